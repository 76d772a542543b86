/*
 * Direct decoding of canonical PCM16 WAV, the common case of ASR shards, without
 * libsndfile's copy of the member and its conversion loop. sharc__wav_parse() accepts
 * only files that libsndfile 1.2 reads the same way, sample for sample (it walks the
 * chunks as libsndfile's wav.c does); anything else, or anything it is unsure of, is
 * "not canonical" and goes to libsndfile unchanged. audio.c decides which path runs.
 */
#ifndef SHARC_SRC_WAV_H
#define SHARC_SRC_WAV_H

#include <stddef.h>
#include <stdint.h>

/*
 * The direct path reads int16 samples in host order, so it exists only on little-endian
 * hosts; elsewhere sharc__wav_parse() always answers "not canonical".
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SHARC__WAV_DIRECT 1
#else
#define SHARC__WAV_DIRECT 0
#endif

/** libsndfile's SF_MAX_CHANNELS: it refuses more channels than this. */
#define SHARC__WAV_MAX_CHANNELS 1024

/**
 * Chunks other than the samples may add up to this many bytes (RIFF header, fmt, LIST,
 * ...). libsndfile caches them in a header buffer that it refuses to grow past 100 KiB;
 * staying well below that keeps every one of its header reads successful.
 */
#define SHARC__WAV_MAX_HEADER_BYTES 32768

/** Where the samples of a canonical PCM16 WAV member are. */
typedef struct sharc__wav_pcm16 {
    int channels;       ///< 1..SHARC__WAV_MAX_CHANNELS
    int sampling_rate;  ///< 1..INT_MAX
    size_t data_offset; ///< byte offset of the first sample in the member (may be odd in memory)
    int64_t frames;     ///< data chunk size / (2 * channels), as libsndfile reports it
} sharc__wav_pcm16;

/**
 * Decide whether `data` is a canonical PCM16 WAV: little-endian RIFF/WAVE; a `fmt ` chunk
 * (16 bytes or more) with format 1 (PCM), or 0xFFFE (WAVE_FORMAT_EXTENSIBLE, 40 bytes or
 * more) whose SubFormat is the PCM GUID, 16 bits per sample, block align 2 * channels,
 * 1..SHARC__WAV_MAX_CHANNELS channels, a rate of at least 1 Hz; then one `data` chunk,
 * not empty, a multiple of the block align, inside the member. Other chunks may come
 * before or after the data (fact, LIST INFO, JUNK, PAD, unknown ones with printable ids,
 * each inside the member, padded to even sizes); chunks that libsndfile interprets in
 * ways that could fail or move its parser (PEAK, cue, smpl, acid, bext, cart, a second
 * fmt or data, odd LIST contents, ...) make the file not canonical. Every read is
 * bounds-checked: any bytes may be passed.
 * @param wav receives the layout when the file is canonical (untouched otherwise)
 * @return 1 canonical, 0 not (libsndfile must decide, and report any error)
 */
int sharc__wav_parse(const uint8_t *data, size_t n, sharc__wav_pcm16 *wav);

/**
 * A member of `n` bytes seen through two pieces: its first `head_len` bytes at `head`,
 * and its bytes from `tail_at` to the end at `tail` (NULL: none). The samples in between
 * are not needed to parse it, so a window into a long member can be read without them.
 */
typedef struct sharc__wav_pieces {
    const uint8_t *head;
    size_t head_len;
    const uint8_t *tail;
    size_t tail_at;
    size_t n;
} sharc__wav_pieces;

/**
 * sharc__wav_parse() on a member given as pieces; the same answer as on the whole member
 * whenever every chunk but the samples is inside the pieces, else 0 (not canonical).
 */
int sharc__wav_parse_pieces(const sharc__wav_pieces *p, sharc__wav_pcm16 *wav);

/**
 * Walk the chunks of a member of `n` bytes from its first `head_len` bytes up to its data
 * chunk. Returns 1 with `*data_end` (the byte after the samples, where the tail to read
 * for sharc__wav_parse_pieces() starts) when the walk reaches a non-empty data chunk
 * inside the head, 0 when it cannot tell (the member then needs reading whole).
 */
int sharc__wav_data_end(const uint8_t *head, size_t head_len, size_t n, size_t *data_end);

/** Where a WAV member's samples end by its header, against what the member holds. */
typedef struct sharc__wav_extent {
    uint64_t data_bytes;    ///< the data chunk's size in its header (RF64: its ds64 chunk's)
    uint64_t present_bytes; ///< bytes of the member from the data chunk's first sample on
    unsigned block_align;   ///< bytes per frame in the fmt chunk before it; 0 when unknown
} sharc__wav_extent;

/**
 * Read the size of the data chunk of a RIFF, RIFX or RF64 WAVE member of `n` bytes from its
 * first `head_len` bytes, walking its chunks as far as that chunk, for any format of
 * samples. A member whose data_bytes exceed present_bytes was cut short after it was
 * written (libsndfile then quietly reads only the bytes there are). Every read is
 * bounds-checked: any bytes may be passed.
 * @return 1 with `*e` when the walk reached the data chunk's header inside the head; 0 when
 *         it cannot tell (not WAVE, a chunk running past the head, no data chunk)
 */
int sharc__wav_extent_get(const uint8_t *head, size_t head_len, size_t n, sharc__wav_extent *e);

/**
 * Convert `samples` little-endian int16 samples at `src` (any alignment) to float32 at
 * `dst`, as libsndfile's sf_read_float() does by default: (float)s * (1.0f / 0x8000).
 * The buffers must not overlap. Vectorised by the compiler at -O2.
 * @param stream nonzero when `dst` is read only much later: long runs then use
 *               non-temporal stores (SSE2), which skip the cache and the reads of `dst`
 */
void sharc__wav_pcm16_to_float(const uint8_t *restrict src, size_t samples, float *restrict dst,
                               int stream);

/** The same for one channel of `channels` interleaved ones: `frames` floats at `dst`. */
void sharc__wav_pcm16_channel_to_float(const uint8_t *restrict src, size_t frames, int channels,
                                       int channel, float *restrict dst);

#endif /* SHARC_SRC_WAV_H */

/*
 * Audio decoding from memory with libsndfile virtual I/O, and directly for canonical PCM16
 * WAV (src/wav.h). The codec is sniffed from the bytes (RIFF/RIFX/RF64 WAV, fLaC, OggS
 * Opus/Vorbis, ID3 or MPEG sync MP3); the member's extension is never trusted.
 */
#ifndef SHARC_SRC_AUDIO_H
#define SHARC_SRC_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/ctx.h"
#include "decode/pcm16.h"
#include "decode/wav.h"

/** Guess the codec from the first bytes. */
sharc__codec sharc__audio_sniff(const uint8_t *data, size_t n);
const char *sharc__codec_name(sharc__codec c);

/**
 * Read the header of an encoded member (canonical PCM16 WAV without libsndfile, with the
 * values libsndfile reports).
 * @return 0, SHARC_ERR_DECODE (message in ctx->error, without shard/member names:
 *         the caller adds those)
 */
int sharc__audio_info_get(sharc__ctx *ctx, const uint8_t *data, size_t n, sharc__audio_info *info);

/**
 * Decode `data` into `out`, float32 interleaved, normalised the libsndfile way (a PCM16
 * sample s becomes s / 32768.0f, so 16-bit WAV and FLAC decode exactly as soundfile
 * does). Canonical PCM16 WAV (see sharc__wav_parse()) is converted straight from `data`,
 * and clean FLAC streams are decoded with libFLAC straight into `out` (see flac.h), both
 * bit-identical to libsndfile; everything else goes through libsndfile. `out` must have
 * room for `out_capacity` floats; nothing is ever written past it, and what lies past
 * the frames written is unspecified (libsndfile may zero it).
 * When spec->want_frames >= 0 exactly want_frames frames are written: trimmed, or padded
 * at the end the way Lhotse does (numpy "reflect" padding, which keeps mirroring with
 * period 2 * (decoded - 1) when the pad is longer than the audio, and repeats the frame
 * of a one-frame signal); decoding nothing at all is a mismatch, never padded. Otherwise
 * all decoded frames are written. WAV and FLAC seek to offset_frames; the lossy codecs
 * decode and discard up to it, because their seeking is approximate.
 * Errors from libsndfile are logged once (with its own text); mismatch and size errors
 * only set ctx->error, so the caller can add the member name before reporting them.
 * Takes nothing from ctx's allocator (libsndfile and libFLAC allocate their decoders with
 * malloc); safe to call from several threads with different contexts.
 * @param info receives the header (rate and channels of the stored audio)
 * @param frames receives the frames written per channel
 * @return 0, SHARC_ERR_DECODE (undecodable), SHARC_ERR_AUDIO_MISMATCH (length beyond
 *         tolerance, or channel out of range), SHARC_ERR_TOO_LARGE (out too small)
 */
int sharc__audio_decode(sharc__ctx *ctx, const uint8_t *data, size_t n,
                        const sharc__decode_spec *spec, float *out, size_t out_capacity,
                        sharc__audio_info *info, int64_t *frames);

/**
 * sharc__audio_decode()'s direct paths alone, for tests: they check that it takes every
 * successful decode of a canonical PCM16 WAV, and nothing else, and that what it takes of
 * FLAC decodes as libsndfile decodes it.
 * @return 1 decoded, as sharc__audio_decode() does when it returns 0; 0 not handled:
 *         *info and *frames are not set, nothing was written for a WAV (a FLAC stream found
 *         faulty partway may have been), and the libsndfile path must run (it reports any
 *         error)
 */
int sharc__audio_decode_direct(const uint8_t *data, size_t n, const sharc__decode_spec *spec,
                               float *out, size_t out_capacity, sharc__audio_info *info,
                               int64_t *frames);

/**
 * sharc__audio_decode_sndfile() on `n` bytes at byte `at` of the open file `fd`, read as
 * libsndfile asks for them, `cache_cap` bytes at a time through `cache` (the caller's; 32
 * KiB is a good size): a window into a long member left in its shard file reads what
 * decoding it needs (FLAC seeks), not the whole member. A file that ends early or cannot be
 * read fails with SHARC_ERR_CORRUPT or SHARC_ERR_IO, not as a decode error.
 */
int sharc__audio_decode_at(sharc__ctx *ctx, int fd, uint64_t at, size_t n, uint8_t *cache,
                           size_t cache_cap, const sharc__decode_spec *spec, float *out,
                           size_t out_capacity, sharc__audio_info *info, int64_t *frames);

/** sharc__audio_info_get() the same way: libsndfile reads the header, not the member. */
int sharc__audio_info_at(sharc__ctx *ctx, int fd, uint64_t at, size_t n, uint8_t *cache,
                         size_t cache_cap, sharc__audio_info *info);

/**
 * sharc__audio_decode() without the direct PCM16 WAV path: always libsndfile. For tests
 * and benchmarks, which compare the two paths bit for bit.
 */
int sharc__audio_decode_sndfile(sharc__ctx *ctx, const uint8_t *data, size_t n,
                                const sharc__decode_spec *spec, float *out, size_t out_capacity,
                                sharc__audio_info *info, int64_t *frames);

/** Encodings that sharc__audio_encode() can write. */
typedef enum sharc__encoding {
    SHARC__ENC_WAV_PCM16 = 0,
    SHARC__ENC_FLAC_PCM16,
    SHARC__ENC_OPUS,   ///< Ogg Opus: rates 8000, 12000, 16000, 24000 or 48000 only
    SHARC__ENC_VORBIS, ///< Ogg Vorbis
    SHARC__ENC_MP3,    ///< MPEG-1/2 Layer III (needs libsndfile built with LAME)
} sharc__encoding;

/**
 * Encode interleaved PCM16 samples in memory (for `sharc pack`, fixtures and tests).
 * The encoded bytes replace the contents of `out` (allocated with ctx's allocator; the
 * caller owns them and frees them with sharc__buf_free()).
 * @return 0, SHARC_ERR_UNSUPPORTED (this libsndfile cannot write that encoding/rate),
 *         SHARC_ERR(EINVAL), SHARC_ERR(ENOMEM), SHARC_ERR_IO (libsndfile write failure)
 */
int sharc__audio_encode(sharc__ctx *ctx, sharc__encoding enc, const int16_t *pcm, int64_t frames,
                        int channels, int sampling_rate, sharc__buf *out);

#endif /* SHARC_SRC_AUDIO_H */

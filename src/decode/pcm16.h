/*
 * The contract of every decoder (the codec, the header information, what to decode and how
 * to fit it to the metadata) and the direct PCM16 path's planning and fitting, shared by
 * the canonical-WAV path (audio.c) and the libFLAC path (flac.c), which both convert
 * 16-bit samples straight into the output as libsndfile would.
 */
#ifndef SHARC_SRC_PCM16_H
#define SHARC_SRC_PCM16_H

#include <stddef.h>
#include <stdint.h>

#include "decode/wav.h"

typedef enum sharc__codec {
    SHARC__CODEC_UNKNOWN = 0,
    SHARC__CODEC_WAV,
    SHARC__CODEC_FLAC,
    SHARC__CODEC_OGG, ///< Ogg Opus or Vorbis
    SHARC__CODEC_MP3,
} sharc__codec;

/** Header information, read without decoding the samples. */
typedef struct sharc__audio_info {
    sharc__codec codec;
    int sampling_rate;
    int channels;
    int64_t frames; ///< as reported by libsndfile (may be approximate for MP3)
    int non_finite; ///< sharc__audio_decode() failed on a NaN or infinite sample
} sharc__audio_info;

/** What to decode and how to fit the result. */
typedef struct sharc__decode_spec {
    int64_t offset_frames;    ///< first frame to keep (0 = start)
    int64_t want_frames;      ///< frames expected from metadata; -1 = keep everything decoded
    int64_t tolerance_frames; ///< |decoded - want| <= tolerance is padded/trimmed, else error
    int channel;              ///< keep only this channel (-1 = all)
    /**
     * 0: the audio after offset_frames must end within tolerance of want_frames (a
     * recording that is much longer than its metadata is an error). Nonzero: want_frames
     * is a window into longer audio (a cut with a duration, NeMo offset/duration), so
     * audio past it is cut off silently, as Lhotse does when it reads with a duration.
     */
    int allow_longer;
    /** Nonzero: the output is read only much later (rows of batches planned ahead), so
     *  long direct conversions write past the cache (sharc__wav_pcm16_to_float). */
    int stream_out;
} sharc__decode_spec;

/**
 * numpy.pad(mode="reflect") of interleaved frames [have, want) from frames [0, have), as
 * Lhotse pads a cut a little shorter than its metadata. `have` must be at least 1.
 */
void sharc__pad_reflect(float *out, int64_t have, int64_t want, int ch);

/**
 * The direct path's decision for a canonical PCM16 WAV (sharc__wav_parse()) and `spec`:
 * which frames it converts, so that a caller holding only part of the member (a window
 * into a long one, read from its file) can read just those.
 * @return 1 with frames [*first, *first + *count) to convert with sharc__pcm16_convert();
 *         0 when the direct path does not apply (libsndfile must decode and report)
 */
int sharc__pcm16_plan(const sharc__wav_pcm16 *wav, const sharc__decode_spec *spec,
                      size_t out_capacity, int64_t *first, int64_t *count);

/**
 * Convert the `count` frames planned by sharc__pcm16_plan(), at `src`, into `out` and fit
 * them to spec->want_frames, as sharc__audio_decode() does for that member:
 * sharc__pcm16_convert_part() on them all, then sharc__pcm16_finish().
 */
void sharc__pcm16_convert(const sharc__wav_pcm16 *wav, const uint8_t *src, int64_t count,
                          const sharc__decode_spec *spec, float *out, sharc__audio_info *info,
                          int64_t *frames);

/**
 * Convert `count` frames at `src`, a run of the planned ones, into `out`, where that run's
 * output starts. A caller reading the planned frames in parts converts each part so.
 */
void sharc__pcm16_convert_part(const sharc__wav_pcm16 *wav, const uint8_t *src, int64_t count,
                               const sharc__decode_spec *spec, float *out);

/**
 * After the `count` planned frames were converted into `out`: fit them to
 * spec->want_frames and report what sharc__audio_decode() reports, the header as `codec`.
 * Planning and finishing depend only on the channels, rate and frames of `wav`, so the
 * direct FLAC path (flac.c) uses them too, with STREAMINFO's.
 */
void sharc__pcm16_finish(const sharc__wav_pcm16 *wav, sharc__codec codec, int64_t count,
                         const sharc__decode_spec *spec, float *out, sharc__audio_info *info,
                         int64_t *frames);

#endif /* SHARC_SRC_PCM16_H */

/*
 * Audio decoding from memory with libsndfile virtual I/O. The codec is sniffed from the
 * bytes (RIFF/RIFX/RF64 WAV, fLaC, OggS Opus/Vorbis, ID3 or MPEG sync MP3); the member's
 * extension is never trusted.
 */
#ifndef SHARC_SRC_AUDIO_H
#define SHARC_SRC_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

typedef enum sharc__codec {
    SHARC__CODEC_UNKNOWN = 0,
    SHARC__CODEC_WAV,
    SHARC__CODEC_FLAC,
    SHARC__CODEC_OGG, ///< Ogg Opus or Vorbis
    SHARC__CODEC_MP3,
} sharc__codec;

/** Guess the codec from the first bytes. */
sharc__codec sharc__audio_sniff(const uint8_t *data, size_t n);
const char *sharc__codec_name(sharc__codec c);

/** Header information, read without decoding the samples. */
typedef struct sharc__audio_info {
    sharc__codec codec;
    int sampling_rate;
    int channels;
    int64_t frames; ///< as reported by libsndfile (may be approximate for MP3)
} sharc__audio_info;

/**
 * Read the header of an encoded member.
 * @return 0, SHARC_ERR_DECODE (message in ctx->error, without shard/member names:
 *         the caller adds those)
 */
int sharc__audio_info_get(sharc__ctx *ctx, const uint8_t *data, size_t n, sharc__audio_info *info);

/** What to decode and how to fit the result. */
typedef struct sharc__decode_spec {
    int64_t offset_frames; ///< first frame to keep (0 = start)
    int64_t want_frames;   ///< frames expected from metadata; -1 = keep everything decoded
    int64_t tolerance_frames; ///< |decoded - want| <= tolerance is padded/trimmed, else error
    int channel;           ///< keep only this channel (-1 = all)
} sharc__decode_spec;

/**
 * Decode `data` into `out`, float32 interleaved. `out` must have room for
 * `out_capacity` floats; when spec->want_frames >= 0 exactly want_frames frames are
 * written (trimmed, or padded at the end the way
 * Lhotse does: numpy "reflect" padding), otherwise all decoded frames.
 * @param info receives the header (rate and channels of the stored audio)
 * @param frames receives the frames written per channel
 * @return 0, SHARC_ERR_DECODE (undecodable), SHARC_ERR_AUDIO_MISMATCH (length beyond
 *         tolerance, or channel out of range), SHARC_ERR_TOO_LARGE (out too small)
 */
int sharc__audio_decode(sharc__ctx *ctx, const uint8_t *data, size_t n,
                        const sharc__decode_spec *spec, float *out, size_t out_capacity,
                        sharc__audio_info *info, int64_t *frames);

#endif /* SHARC_SRC_AUDIO_H */

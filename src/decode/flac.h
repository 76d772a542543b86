/*
 * Direct decoding of FLAC members with libFLAC, without libsndfile's layer around it (its
 * frame copy and conversion loop take about a fifth of the time libsndfile spends on a
 * FLAC member). Only the cases libsndfile decodes cleanly are taken: a native FLAC stream
 * that starts with its signature, one STREAMINFO with 8, 16 or 24 bits per sample and a
 * total sample count, well-formed metadata blocks, every frame decoded without an error, as
 * many samples as STREAMINFO says and nothing after them where libsndfile reads to the end,
 * and no offset to seek to. Anything else is "not done this way" and goes to libsndfile,
 * which then decides, and names what is wrong, as before. audio.c decides which path runs.
 */
#ifndef SHARC_SRC_FLAC_H
#define SHARC_SRC_FLAC_H

#include <stddef.h>
#include <stdint.h>

#include "decode/pcm16.h"

/**
 * Decode the FLAC member `data` into `out` as sharc__audio_decode() does, bit-identical to
 * the libsndfile path: a sample s of b bits becomes (float)s * 2^-(b-1), the float
 * normalisation of libsndfile's FLAC reader.
 * @return 1 decoded (out, *info and *frames set); 0 not done this way: what `out` holds is
 *         then unspecified, and the caller decodes with libsndfile
 */
int sharc__flac_decode_direct(const uint8_t *data, size_t n, const sharc__decode_spec *spec,
                              float *out, size_t out_capacity, sharc__audio_info *info,
                              int64_t *frames);

#endif

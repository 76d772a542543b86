/*
 * Features of a collated batch: the step between decoding a batch's audio and handing it
 * out that adds `features` f32 [B, n_mels, frames] and `feature_lens` i32 [B] (and drops
 * `audio` when keep_audio is off; `audio_lens` stays), from the reader settings' features
 * fields. The plan (features/fbank.h) is made at the first batch and reused for every
 * later one.
 */
#ifndef SHARC_SRC_FEATURIZE_H
#define SHARC_SRC_FEATURIZE_H

#include <stdint.h>

#include "base/ctx.h"
#include "features/fbank.h"
#include "sharc/reader.h"

/** The fbank settings the reader settings ask for (seeded by the reader's seed). */
void sharc__featurize_settings(const sharc_reader_settings *s, sharc__fbank_settings *out);

/**
 * Check the features fields of reader settings: 0, or SHARC_ERR(EINVAL) with ctx's error
 * saying which field is wrong ("features 7: unknown ...", "fbank n_fft 500: ...").
 */
int sharc__featurize_check(sharc__ctx *ctx, const sharc_reader_settings *s);

/**
 * Add the features to batch `b` of step `step`, whose audio is at `rate` Hz; nothing when
 * s->features is NONE. `*plan` is made on the first call (and freed by
 * sharc__fbank_destroy).
 * @return 0; SHARC_ERR_AUDIO_MISMATCH when `rate` is not fbank_sample_rate (the message
 *         names the step, a cut of the batch and both rates); SHARC_ERR_FRAME when the batch
 *         has no f32 [B, T] `audio` and i32 [B] `audio_lens`; SHARC_ERR(ENOMEM). Errors are
 *         logged, with ctx's error saying what went wrong.
 */
int sharc__featurize_batch(sharc__fbank **plan, sharc__ctx *ctx, const sharc_reader_settings *s,
                           sharc_batch *b, int rate, uint64_t step);

#endif /* SHARC_SRC_FEATURIZE_H */

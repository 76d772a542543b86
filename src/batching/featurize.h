/*
 * Features of the batches: `features` f32 [B, n_mels, frames] and `feature_lens` i32 [B]
 * from the reader settings' features fields (and `audio` dropped when keep_audio is off;
 * `audio_lens` stays). They are computed in two steps so that the costly one runs in
 * parallel: each decode worker computes the features of the rows it decoded, with a plan of
 * its own (features/fbank.h), into memory of the cut (sharc__featurize_cut), and the thread
 * that hands the batch out places the rows into the batch's tensors
 * (sharc__featurize_collate), a copy.
 */
#ifndef SHARC_SRC_FEATURIZE_H
#define SHARC_SRC_FEATURIZE_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "batching/bcut.h"
#include "features/fbank.h"
#include "io/bufpool.h"
#include "sharc/batch.h"
#include "sharc/reader.h"

/** The fbank settings the reader settings ask for (seeded by the reader's seed). */
void sharc__featurize_settings(const sharc_reader_settings *s, sharc__fbank_settings *out);

/**
 * Check the features fields of reader settings: 0, or SHARC_ERR(EINVAL) with ctx's error
 * saying which field is wrong ("features 7: unknown ...", "fbank n_fft 500: ...").
 */
int sharc__featurize_check(sharc__ctx *ctx, const sharc_reader_settings *s);

/**
 * Whether the batches get CPU features: the one switch of both steps below (the pipeline
 * calls neither when it is 0).
 */
int sharc__featurize_on_cpu(const sharc_reader_settings *s);

/**
 * The features of cut `c`, just decoded into `x` (its c->job.num_samples samples, at the
 * features' rate), into c->feats (f32 [n_mels, valid frames], a buffer from `pool`) and
 * c->feat_frames. The dither, when on, is seeded by the reader's seed and the cut's key
 * (sharc__fbank_cut_seed), so a row's values do not depend on the thread, the batch or the
 * step. `*plan` belongs to the calling thread: made at its first call, freed by
 * sharc__fbank_destroy.
 * @return 0, or SHARC_ERR(ENOMEM) with ctx's error naming the shard, member and cut
 */
int sharc__featurize_cut(sharc__fbank **plan, sharc__ctx *ctx, const sharc_reader_settings *s,
                         sharc__bufpool *pool, sharc__bcut *c, const float *x);

/**
 * The features of batch `b` of step `step`, whose audio is at `rate` Hz, all computed here
 * from its audio (sharc__fbank_compute: the dither seeded by step and row), the audio then
 * dropped when keep_audio is off; nothing when s->features is NONE. `*plan` is made on the
 * first call (and freed by sharc__fbank_destroy). The pipeline computes them per row
 * instead (below); this is their reference.
 * @return as sharc__featurize_collate
 */
int sharc__featurize_batch(sharc__fbank **plan, sharc__ctx *ctx, const sharc_reader_settings *s,
                           sharc_batch *b, int rate, uint64_t step);

/**
 * Give batch `b` of step `step`, whose audio is at `rate` Hz and whose rows are the cuts
 * cuts[i] not marked in `skipped` (NULL: none) in order (the batch compacted), its features:
 * each row's from its cut (sharc__featurize_cut), frames past feature_lens 0, the frame
 * count that of the audio's padded width T (sharc__fbank_frames). Drops `audio` first when
 * keep_audio is off, so the features are written once and never moved.
 * @return 0; SHARC_ERR_AUDIO_MISMATCH when `rate` is not fbank_sample_rate (the message
 *         names the step, a cut of the batch and both rates); SHARC_ERR_FRAME when the batch
 *         has no f32 [B, T] `audio` and i32 [B] `audio_lens` or a row's features are missing;
 *         SHARC_ERR(ENOMEM). Errors are logged, with ctx's error saying what went wrong.
 */
int sharc__featurize_collate(sharc__ctx *ctx, const sharc_reader_settings *s, sharc_batch *b,
                             sharc__bcut *const *cuts, const uint8_t *skipped, size_t n, int rate,
                             uint64_t step);

#endif /* SHARC_SRC_FEATURIZE_H */

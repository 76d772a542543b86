/*
 * Batch mode: the planner thread, the decode workers and the caller's side.
 */
#ifndef SHARC_SRC_PIPELINE_H
#define SHARC_SRC_PIPELINE_H

#include "reader/reader_impl.h"

/** Check the batching settings at open, as starting the pipeline would (pipeline.c). */
int sharc__pipeline_check_settings(sharc_reader *r);
/**
 * Whether a batch's int32 tensors can hold its sizes (pipeline.c): `audio_lens` each row's
 * samples (`most_samples`, of cut `most_id`, the most of any row), and each string column's
 * `<column>_offsets` its `column_bytes` (cut_id, text, speaker, language).
 * @return 0, or SHARC_ERR_TOO_LARGE with a message naming the step and the tensor
 */
int sharc__pipeline_check_i32(sharc__ctx *ctx, uint64_t step, size_t n_cuts, int64_t most_samples,
                              const char *most_id, const uint64_t column_bytes[4]);
/** Start the batch pipeline (pipeline.c). */
int sharc__pipeline_start(sharc_reader *r);
int sharc__pipeline_next(sharc_reader *r, sharc_batch **out);
/** The state after the last batch returned: 0, SHARC_ERR(ENOSPC), or 1 when none was. */
int sharc__pipeline_state_save(sharc_reader *r, void *buf, size_t cap, size_t *size);
void sharc__pipeline_stats(const sharc_reader *r, sharc_reader_stats *out);
/** The sampler's bins once a batch was handed out (the planner has estimated them then),
 *  else NULL with *n = 0. Caller's thread. */
const double *sharc__pipeline_bins(const sharc_reader *r, size_t *n);
void sharc__pipeline_stop(sharc_reader *r);

#endif /* SHARC_SRC_PIPELINE_H */

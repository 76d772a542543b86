/*
 * Collating one batch from its buffered cuts: the sampling rate its rows share, its tensors
 * (audio [B, T] f32, audio_lens and duration [B], and per string column (cut_id, text,
 * speaker, language, then a mixture's tags) `<column>_offsets` i32 [B + 1] and
 * `<column>_bytes` u8, then `tokens` and `token_lens`, then the conditioning's `speed`, `gain`
 * and `snr_db` [B], each when on) declared and filled but for the audio rows, and, once rows
 * were skipped while decoding, compacted.
 */
#ifndef SHARC_SRC_COLLATE_H
#define SHARC_SRC_COLLATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "batching/batch.h"
#include "batching/bcut.h"

/** One batch being collated. */
typedef struct sharc__collation {
    sharc_batch *batch;
    sharc__bcut **cuts; ///< its rows' cuts, in row order
    size_t n;           ///< rows
    int64_t T;          ///< samples per row: the longest cut at the batch's rate
    int rate;           ///< the batch's sampling rate: that of most of its cuts
    size_t rate_first;  ///< the first cut at that rate
    size_t rate_count;  ///< cuts at that rate
    int rate_tie;       ///< as many cuts are at another rate
    /** A mixture's tag columns after the four of every batch (each cut's values in
     *  sharc__bcut.tags), at most SHARC__MAX_TAG_COLUMNS. */
    size_t n_tags;
    const char *const *tag_names;
    /** The reader has a tokenizer: `tokens` i32 [B, L] (each row's ids, then `pad_id`) and
     *  `token_lens` i32 [B] follow the string columns. */
    int tokens;
    int32_t pad_id;
    /** The reader conditions its cuts (sharc_reader_settings.augment): `speed`, `gain` and
     *  `snr_db` f32 [B] (each row's job.cond: speed factor, linear gain, SNR of the noise
     *  mixed in or NAN) follow the tokens, or the string columns. */
    int cond;
} sharc__collation;

#define SHARC__MAX_TAG_COLUMNS 8

/**
 * The batch's sampling rate: `required` if nonzero, else the rate most of its cuts have, on
 * a tie the one met first. A cut at another rate is a problem of its own when its row is
 * decoded, and does not count towards T.
 */
void sharc__collate_choose_rate(sharc__collation *col, int required);

/**
 * Whether a batch's int32 tensors can hold its sizes: `audio_lens` each row's samples
 * (`most_samples`, of cut `most_id`, the most of any row), and each string column's
 * `<column>_offsets` its `column_bytes` (cut_id, text, speaker, language).
 * @return 0, or SHARC_ERR_TOO_LARGE with a message naming the step and the tensor
 */
int sharc__collate_check_i32(sharc__ctx *ctx, uint64_t step, size_t n_cuts, int64_t most_samples,
                             const char *most_id, const uint64_t column_bytes[4]);

/**
 * Declare the tensors of c->batch (acquired from `pool`, rate chosen) and fill everything
 * but the audio rows; sets c->T.
 * @return 0, or an error naming the step, or the longest cut when the batch does not fit
 */
int sharc__collate_layout(sharc__collation *col, sharc__ctx *ctx, sharc__batch_pool *pool,
                          uint64_t step);

/**
 * Drop the rows marked in `skipped`, in place, and narrow the batch to its longest remaining
 * row: a skipped cut does not keep the others padded to its length.
 * @return the padded seconds that narrowing took from the remaining rows
 */
double sharc__collate_compact(sharc__collation *col, const uint8_t *skipped);

#endif /* SHARC_SRC_COLLATE_H */

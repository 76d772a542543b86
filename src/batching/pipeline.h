/*
 * Batch mode: one planner thread pulls cuts from the walk, feeds the sampler and lays out
 * each batch; decode workers write the rows; the caller takes batches in step order, each
 * with the resume state after it. The planner alone decides what goes into which batch, in
 * a fixed order, so the batches do not depend on the number of threads or their timing.
 */
#ifndef SHARC_SRC_PIPELINE_H
#define SHARC_SRC_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "batching/sampler.h"
#include "decode/condition.h"
#include "plan/dataset.h"
#include "plan/tokenizer.h"
#include "sharc/reader.h"
#include "walk/cutsource.h"
#include "walk/walk.h"

typedef struct sharc__pipeline sharc__pipeline;

/** What a pipeline reads from and reports to; everything outlives the pipeline. */
typedef struct sharc__pipeline_config {
    sharc__ctx *ctx; ///< errors of the planner and the caller's side, log, allocator
    const sharc_reader_settings *s;
    sharc__cutsource cs;       ///< used by the planner thread alone while the pipeline runs
    sharc_reader_stats *stats; ///< the walk's counters, which the planner adds to
    const uint8_t *resume;     ///< a state to resume from (sharc_reader_state_save), or NULL
    size_t resume_len;
    uint64_t state_hash; ///< sharc__resume_hash() of the shards and settings
    /** The tokenizer the cut source tokenizes with (its cuts carry tokens), or NULL: the
     *  batches then hold `tokens` and `token_lens`. */
    const sharc__tokenizer *tokenizer;
    /** Where the noise mixed into cuts comes from, or NULL: given to the cuts of each batch
     *  as it is planned, its position saved with the batch's state. */
    const sharc__noise_source *noise;
    /**
     * The state hash that data-parallel slot dp_rank of dp_size would record with these
     * shards and settings, and for a mixture each source's hash (mix_config.hashes) into
     * `sources`: an elastic resume checks each old slot's state against them.
     */
    void (*slot_hashes)(void *cookie, int dp_rank, int dp_size, uint64_t *state_hash,
                        uint64_t *sources);
    void *slot_hashes_cookie;
} sharc__pipeline_config;

/** Check the batching settings `s`, as starting a pipeline would. */
int sharc__pipeline_check_settings(sharc__ctx *ctx, const sharc_reader_settings *s);

/** Start the threads (restoring the state first, if there is one). */
int sharc__pipeline_start(sharc__pipeline **out, const sharc__pipeline_config *c);
/**
 * The next batch in step order, waiting at most `timeout_ms` for it (< 0: as long as it
 * takes). An error other than SHARC_ERR_BACKPRESSURE and SHARC_ERR_TIMEOUT is returned
 * again by every later call; after a timeout nothing has changed.
 * @return 0, SHARC_END, or an error with its message in the config's ctx
 */
int sharc__pipeline_next(sharc__pipeline *p, sharc_batch **out, int timeout_ms);
/** The state after the last batch returned: 0, SHARC_ERR(ENOSPC), or 1 when none was. */
int sharc__pipeline_state_save(const sharc__pipeline *p, void *buf, size_t cap, size_t *size);
void sharc__pipeline_stats(sharc__pipeline *p, sharc_reader_stats *out);
/** The filtered cuts by reason, as of the same moment as sharc__pipeline_stats(). */
void sharc__pipeline_filter_counts(sharc__pipeline *p, sharc__filter_counts *out);
/** A mixture's source `i`: the cuts and seconds of audio in the batches handed out since
 *  the pipeline started. Caller's thread. */
void sharc__pipeline_source_stats(const sharc__pipeline *p, size_t i, uint64_t *cuts,
                                  double *seconds);
/** The sampler's bins once a batch was handed out (the planner has estimated them then),
 *  else NULL with *n = 0. Caller's thread. */
const double *sharc__pipeline_bins(const sharc__pipeline *p, size_t *n);
/** Stop and join the threads, release everything; NULL-safe. */
void sharc__pipeline_stop(sharc__pipeline **p);

#endif /* SHARC_SRC_PIPELINE_H */

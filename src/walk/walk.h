/*
 * The walk over a dataset's shard plan: epoch by epoch, the shards of this data-parallel
 * slot in their seeded order, each opened as a shard stream of its layout (read here or
 * ahead by read-ahead lanes), and out of them one raw cut at a time with its rate and
 * length known (decode.h), the error policy applied to every problem met on the way. Its
 * position is small (walk_pos) and enough to seek back to, which is what a resume state
 * holds of it.
 *
 * One thread uses a walk at a time: the caller's in cut mode, the planner's in batch mode.
 */
#ifndef SHARC_SRC_WALK_H
#define SHARC_SRC_WALK_H

#include <pthread.h>
#include <stdint.h>

#include "base/ctx.h"
#include "decode/decode.h"
#include "formats/stream.h"
#include "io/bufpool.h"
#include "io/fetch.h"
#include "plan/cut.h"
#include "plan/dataset.h"
#include "plan/tokenizer.h"
#include "sharc/reader.h"
#include "walk/cutsource.h"

typedef struct sharc__walk sharc__walk;

/** Where the walk stands: enough to resume it. */
typedef struct sharc__walk_pos {
    uint64_t epoch;
    uint64_t order_pos;   ///< shards of this epoch's order opened so far
    uint32_t shard_index; ///< the open shard (valid when order_pos > 0)
    uint64_t consumed;    ///< stream entries (cuts and cut-level problems) taken from it
    int shard_open;       ///< a stream is open on shard_index
    uint64_t epoch_cuts;  ///< cuts produced in this epoch, less those the sampler filtered out
    int in_prologue;      ///< reading the prologue (sharc__walk_set_prologue), not an epoch
    uint64_t unit_pos;    ///< units of the prologue opened so far
} sharc__walk_pos;

/**
 * A unit of a prologue: the part of one shard visit (epoch, shard) left to read by an
 * elastic resume (batching/elastic.h): the entries k of the shard's stream (cuts and
 * cut-level problems alike, counted as walk_pos.consumed counts them) with k >= skip and
 * k % every == first.
 */
typedef struct sharc__walk_unit {
    uint64_t epoch;
    uint32_t shard;
    uint64_t skip;
    uint64_t every;
    uint64_t first;
} sharc__walk_unit;

/** Whether entry k of the unit's shard is part of the unit. */
static inline int sharc__walk_unit_has(const sharc__walk_unit *u, uint64_t k)
{
    return k >= u->skip && k % u->every == u->first;
}

/**
 * Start a walk at the first shard of epoch 0.
 * @param ctx errors and log (the reader's); outlives the walk
 * @param s the reader's settings (plan, error policy, decode checks); outlive the walk
 * @param ds the shard plan; outlives the walk
 * @param stats counters the walk adds to (shards, skipped shards and cuts, problems)
 * @param fetch the calling thread's fetcher, for headers of audio left in shard files
 */
int sharc__walk_open(sharc__walk **out, sharc__ctx *ctx, const sharc_reader_settings *s,
                     const sharc__dataset *ds, sharc_reader_stats *stats, sharc__fetcher *fetch);
void sharc__walk_close(sharc__walk **w);

/** Cut mode: each raw cut lends its audio to the caller until the next pull. */
void sharc__walk_lend_audio(sharc__walk *w);
/**
 * Batch mode: audio members are read into buffers from `pool`, or left in plain tar files,
 * and `report_lock` (held by other threads around their own reports) is held around the
 * problem callback. Both NULL: back to reading as at open.
 */
void sharc__walk_batch_mode(sharc__walk *w, sharc__bufpool *pool, pthread_mutex_t *report_lock);

/**
 * Pull the next raw cut, its rate and length known, applying the error policy. Problems are
 * reported unless the walk is peeking or scanning.
 * @return 0 (the cut is sharc__walk_cut()), SHARC_END, or the error that stops the walk
 */
int sharc__walk_pull(sharc__walk *w);
/** The cut the last successful pull produced; the caller may take its audio buffer. */
sharc__rawcut *sharc__walk_cut(sharc__walk *w);

/**
 * Apply the error policy to a problem of the last cut pulled that the caller met (decoding
 * it in cut mode), described by ctx->error and sharc__walk_error().
 * @return 0 when the walk goes on (SKIP), else `rc`, which then stops it
 */
int sharc__walk_problem(sharc__walk *w, int rc);
/** Where the caller describes a problem for sharc__walk_problem(). */
sharc__stream_error *sharc__walk_error(sharc__walk *w);

/** The position after the last cut pulled. */
const sharc__walk_pos *sharc__walk_position(const sharc__walk *w);
/** Re-open the walk at `pos`, skipping the entries already consumed in the open shard. */
int sharc__walk_seek(sharc__walk *w, const sharc__walk_pos *pos);

/**
 * Read `units` (copied) first, in order, then the regular epochs from `start_epoch` (the
 * end at once when the epochs are finite and start_epoch is past them). Before the first
 * pull or seek. With `in_prologue` 0 in walk_pos, a seek goes to the regular epochs.
 * @return 0, SHARC_ERR(ENOMEM)
 */
int sharc__walk_set_prologue(sharc__walk *w, const sharc__walk_unit *units, size_t n,
                             uint64_t start_epoch);

/** The dataset the walk reads. */
const sharc__dataset *sharc__walk_dataset(const sharc__walk *w);

/** The prologue's units (NULL, 0 when none) and the epoch the regular plan starts at. */
const sharc__walk_unit *sharc__walk_prologue(const sharc__walk *w, size_t *n,
                                             uint64_t *start_epoch);
/** The sampler filtered out the last cut pulled: it is not one the epoch produced (an epoch
 *  of filtered cuts must end the walk, not repeat forever). */
void sharc__walk_uncount_cut(sharc__walk *w);

/** What a peek's visitor answers for each cut. */
enum {
    SHARC__WALK_TAKEN = 0,    ///< the cut counts; go on
    SHARC__WALK_FILTERED = 1, ///< the cut is filtered out (sharc__walk_uncount_cut); go on
    SHARC__WALK_STOP = 2,     ///< no more are needed
};
/**
 * Pull cuts ahead quietly, handing each duration to `visit` until it stops or the cuts end,
 * then go back where the walk was, counters included (re-reading the open shard up to there,
 * as a resume does). A problem that would stop the walk ends the peek instead, and stops it
 * when it is pulled. @return 0, or an error going back
 */
int sharc__walk_peek(sharc__walk *w, int (*visit)(void *cookie, double duration), void *cookie);

/**
 * Read shard `shard` again from its start, handing each cut (rate and length known, as
 * of `epoch`) to `cb` until it returns > 0 (stop) or < 0 (error). Bad cuts are passed
 * over silently: they were reported when first read.
 */
int sharc__walk_scan_shard(sharc__walk *w, uint64_t epoch, uint32_t shard,
                           int (*cb)(void *cookie, sharc__rawcut *c), void *cookie);

/**
 * Read shards ahead on `n_lanes` threads, each queueing up to `lane_bytes` (readahead.h);
 * the walk then takes each shard's entries from its lane.
 */
int sharc__walk_readahead_start(sharc__walk *w, int n_lanes, uint64_t lane_bytes);
void sharc__walk_readahead_stop(sharc__walk *w);

/** Seconds spent producing stream entries so far, on whichever thread (lanes included). */
double sharc__walk_read_seconds(const sharc__walk *w);

/** The walk as a cut source (cutsource.h) over the shards of `ds`. */
sharc__cutsource sharc__walk_cutsource(sharc__walk *w, const sharc__dataset *ds);

/**
 * Close the open shard but keep the position, to bound the shards open at once; the next
 * pull re-opens it there (as sharc__walk_seek does, reading again up to where it was).
 */
void sharc__walk_suspend(sharc__walk *w);
/** sharc__walk_seek() without opening the shard yet: the next pull opens it (a mixture
 *  restores hundreds of sources, of which few are drawn soon). */
int sharc__walk_seek_later(sharc__walk *w, const sharc__walk_pos *pos);
/** Whether a shard is open (not suspended). */
int sharc__walk_has_open_shard(const sharc__walk *w);
/**
 * Name the walk (a mixture's source, "input_cfg[1]"): its errors and the problems it logs
 * and reports then begin with "NAME: ". `name` outlives the walk.
 */
void sharc__walk_set_name(sharc__walk *w, const char *name);
/** Peeking through several walks: problems met are not reported while `quiet`. */
/**
 * Give every cut the walk produces the language `language` (NULL: its own), as a mixture's
 * source with a `lang` tag does, and its tokens from `tok` (NULL: none), which then
 * sharc__rawcut.tokens holds. Both outlive the walk. A cut whose transcript `tok` cannot
 * tokenize is a JSON problem of that cut.
 */
void sharc__walk_set_tokens(sharc__walk *w, const sharc__tokenizer *tok, const char *language);
void sharc__walk_set_quiet(sharc__walk *w, int quiet);
/** Go back to `pos` after quiet pulls, forgetting a problem that stopped them. */
int sharc__walk_rewind(sharc__walk *w, const sharc__walk_pos *pos);

#endif /* SHARC_SRC_WALK_H */

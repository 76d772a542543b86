/*
 * The batch pipeline's internals, shared by pipeline.c (threads and planning),
 * pipeline_take.c (the caller's side), pipeline_open.c (start and stop) and
 * pipeline_source.c (the sampler's source of cuts, and restoring a state). pipeline_open.c
 * calls pipeline.c and pipeline_source.c, which never call back and do not call each other;
 * pipeline_take.c calls only pipeline.c's two helpers below.
 */
#ifndef SHARC_SRC_PIPELINE_IMPL_H
#define SHARC_SRC_PIPELINE_IMPL_H

#include <pthread.h>

#include "base/buf.h"
#include "batching/batch.h"
#include "batching/bcut.h"
#include "batching/collate.h"
#include "batching/featurize.h"
#include "batching/pipeline.h"
#include "batching/sampler.h"
#include "decode/decode.h"
#include "io/bufpool.h"
#include "io/fetch.h"
#include "plan/keyset.h"
#include "walk/walk.h"

typedef sharc__bcut bcut;

/* Read-ahead: at most this many lane threads, one per decode thread, or one per
 * PLAIN_WORKERS_PER_LANE for plain tars, whose audio the decode threads read themselves. */
#define SHARC__MAX_LANES       8
#define PLAIN_WORKERS_PER_LANE 4
/* Lanes at least for remote shards, whatever the threads: transfers in flight at once. */
#define REMOTE_LANES 4

typedef struct slot {
    sharc__collation col; ///< the batch, its cuts and its shape
    size_t cap;           ///< of col.cuts and skipped
    size_t dispatched, pending;
    sharc_reader_stats skips; ///< what the rows skipped while decoding take back (under mu)
    uint8_t *skipped;
    size_t n_skipped;
    int rc; ///< error of the batch under FAIL (0: none)
    char message[SHARC__ERRLEN];
    /* Under FAIL the batch reports the failing cut with the lowest row, whichever worker
     * got there first, so the error does not depend on timing. */
    size_t fail_row;
    sharc_problem fail_kind;
    const char *fail_path;
    char fail_member[512], fail_cut[512];
    int end;   ///< no more batches
    int ready; ///< planned and dispatched to the workers
    uint8_t *state;
    size_t state_len, state_cap;
} slot;

typedef struct worker {
    struct sharc__pipeline *p;
    sharc__ctx ctx; ///< own error text
    sharc__stream_error err;
    sharc__fetcher fetch;    ///< audio left in shard files
    sharc__fbank *fbank;     ///< the features' plan of this thread, made at its first row
    sharc__conditioner cond; ///< resamplers and decoded samples of conditioned rows
    double feature_dt;       ///< seconds the last row's features took
    pthread_t thread;
    int started;
} worker;

struct sharc__pipeline {
    sharc__ctx *ctx; ///< the reader's: errors of the planner and of the caller's side
    const sharc_reader_settings *s;
    sharc__cutsource cs; ///< the walk, or a mixture's
    uint8_t *mix_state;
    /** A mixture: the cuts and seconds of audio of each source in the batches handed out
     *  (caller only). */
    uint64_t *source_cuts;
    double *source_seconds;    ///< a mixture's section of the state being written (planner only)
    sharc_reader_stats *stats; ///< the walk's counters, which the planner adds to
    sharc__filter_counts filtered; ///< stats->filtered_cuts by reason (planner only)
    const uint8_t *resume;         ///< the state to resume from, or NULL
    size_t resume_len;
    uint64_t state_hash;
    /** The hashes an old slot's state must have (pipeline_config.slot_hashes). */
    void (*slot_hashes)(void *cookie, int dp_rank, int dp_size, uint64_t *state_hash,
                        uint64_t *sources);
    void *slot_hashes_cookie;
    sharc__decode_opts dopts;
    int failed; ///< the error every later call returns, once the caller met it
    sharc__sampler *sampler;
    sharc__batch_pool *pool;
    pthread_mutex_t mu;
    /* One condition per waiter, so that each event wakes only the threads it concerns
     * (one shared condition woke every thread at every event: about 5% of the time of
     * 2 threads on WAV went to wake-ups and context switches). */
    pthread_cond_t slot_free;  ///< planner: a slot was consumed (or stop)
    pthread_cond_t rows_ready; ///< workers: a planned batch has rows to decode (or stop)
    pthread_cond_t batch_done; ///< caller: a batch is complete, or ended (or stop)
    pthread_t planner;
    int planner_started;
    worker *workers;
    int n_workers;
    slot *slots;
    size_t n_slots;
    uint64_t planned, consumed;
    uint64_t step_base; ///< batches handed out before a restore
    uint64_t handed;    ///< batches handed out since start
    size_t inflight;    ///< batches acquired for slots not yet handed out
    int stop, finished;
    sharc_reader_stats planner_stats;      ///< published copy of *stats (under mu)
    sharc__filter_counts planner_filtered; ///< published copy of `filtered` (under mu)
    sharc_reader_stats worker_stats;       ///< decode counters (under mu)
    double stage[5];                       ///< planner-side stage seconds (planner only)
    double pull_wall;                      ///< wall time of pull_item calls (planner only)
    uint8_t *last_state;
    size_t last_state_len, last_state_cap;
    sharc_reader_stats consumed_skips; ///< the skips of the batches consumed (caller only)
    /** The counters as of the last batch handed out (its state's), which do not depend on
     *  how far ahead the planner is; and whether the caller has met the end or an error,
     *  after which the totals are final (both under mu: a loader's other thread asks). */
    sharc_reader_stats handed_stats;
    sharc__filter_counts handed_filtered; ///< their filtered cuts by reason (under mu)
    int caller_done;
    sharc__keyset held;  ///< keys of the cuts the sampler holds, for the resume state
    sharc__bufpool bufs; ///< audio member buffers, recycled
    bcut **preloaded;    ///< restore: cuts re-read for the saved keys, sorted by key
    uint8_t *taken;      ///< preloaded[i] was handed to the sampler
    size_t n_preloaded;
    /** Cuts an elastic resume re-read that no sampler held yet: the sampler pulls them
     *  before the walk's, in key order (their keys are in `held`, so states keep them). */
    bcut **pending;
    size_t n_pending, pending_at;
    const sharc__noise_source *noise; ///< gives noise to the planned cuts, or NULL
    uint8_t *noise_state;             ///< its position, for the state being written (planner)
    int first_rate;                   ///< the rate of the first batch planned (planner only)
    int rates_warned;                 ///< a batch at another rate was warned about (planner only)
};

/**
 * Publish the counters (as restored, or zero), then start the decode workers and the
 * planner; each thread started is marked so, for sharc__pipeline_stop() to join.
 * @return 0, or SHARC_ERR(EAGAIN) with its message in p->ctx
 */
int sharc__pipeline_start_threads(sharc__pipeline *p);

/** Call on_problem with a problem found in a row or a batch; the caller holds p->mu, which
 *  serialises the calls. */
void sharc__pipeline_report(sharc__pipeline *p, int code, sharc_problem kind, const char *path,
                            const char *member, const char *cut_id, const char *message);

/** Add the skips `s` (cuts, seconds and problems of rows skipped while decoding) to `sum`. */
void sharc__pipeline_add_skips(sharc_reader_stats *sum, const sharc_reader_stats *s);

/** The sampler's source of cuts: the walk, through the pipeline's buffered cuts. */
sharc__sampler_source sharc__pipeline_sampler_source(sharc__pipeline *p);

/**
 * Restore the state p->resume: the counters, the walk's position, the cuts the saved
 * sampler held (re-read from their shards only) and the sampler itself.
 * @return 0, or SHARC_ERR_STATE (or another error) with its message in p->ctx
 */
int sharc__pipeline_restore(sharc__pipeline *p, const sharc__sampler_settings *ss,
                            const sharc__sampler_source *src);

/** Free the pending cuts of an elastic resume that were never pulled. */
void sharc__pipeline_free_pending(sharc__pipeline *p);

#endif /* SHARC_SRC_PIPELINE_IMPL_H */

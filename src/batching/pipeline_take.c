/*
 * The batch pipeline's caller's side: waiting for the next batch in step order, handing it
 * out with the resume state and counters of its step, and what the caller asks of the
 * pipeline between batches (counters, bins, the state of the last batch handed out). The
 * threads that make the batches: pipeline.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "batching/pipeline_impl.h"
#include "batching/resume.h"

/* The slot's draft becomes the state of the last batch handed out, and the slot takes the
 * previous one's buffer to write a later draft into: a swap, not a copy of the draft (tens
 * of kB with a large buffer, written on the planner's core) per batch. A draft that could not
 * be written (len 0) makes state_save report ENOMEM. *counters receives the state's. */
static void take_state(sharc__pipeline *p, slot *s, sharc_reader_stats *counters,
                       sharc__filter_counts *filtered)
{
    uint8_t *buf = p->last_state;
    size_t cap = p->last_state_cap;
    p->last_state = s->state;
    p->last_state_cap = s->state_cap;
    p->last_state_len = s->state_len;
    s->state = buf;
    s->state_cap = cap;
    s->state_len = 0;
    /* Written before the rows were decoded: the skips since are known now. */
    if (p->last_state_len) {
        sharc__resume_take_back(p->last_state, p->last_state_len, &p->consumed_skips, counters);
        sharc__resume_draft_filtered(p->last_state, p->last_state_len, filtered);
    }
}

/* Wait on batch_done until `until` (CLOCK_MONOTONIC; NULL: as long as it takes); returns
 * ETIMEDOUT when the time passed. */
static int wait_batch(sharc__pipeline *p, const struct timespec *until)
{
    if (!until)
        return pthread_cond_wait(&p->batch_done, &p->mu);
    return pthread_cond_timedwait(&p->batch_done, &p->mu, until);
}

/* Wait until the oldest batch not handed out is complete, or ended; takes p->mu and gives
 * it back. Returns 0 with its slot in *out, or SHARC_ERR_BACKPRESSURE when the caller holds
 * max_held_batches, or SHARC_ERR_TIMEOUT when `until` passed first: then nothing changed. */
static int wait_slot(sharc__pipeline *p, const struct timespec *until, int timeout_ms, slot **out)
{
    pthread_mutex_lock(&p->mu);
    size_t held = sharc__batch_pool_held(p->pool);
    if (held > p->inflight && held - p->inflight >= (size_t)p->s->max_held_batches) {
        pthread_mutex_unlock(&p->mu);
        return sharc__set_error(p->ctx, SHARC_ERR_BACKPRESSURE,
                                "the caller holds %zu batches (max_held_batches %d); "
                                "release some first",
                                held - p->inflight, p->s->max_held_batches);
    }
    slot *s = &p->slots[p->consumed % p->n_slots];
    while (!(p->consumed < p->planned && s->ready && s->pending == 0)) {
        if (wait_batch(p, until) == ETIMEDOUT) {
            /* Nothing taken or changed: the next call waits for the same batch. */
            pthread_mutex_unlock(&p->mu);
            return sharc__set_error(p->ctx, SHARC_ERR_TIMEOUT, "no batch ready within %d ms",
                                    timeout_ms);
        }
    }
    pthread_mutex_unlock(&p->mu);
    *out = s;
    return 0;
}

/* What the caller's side took from a complete slot, for settle_batch(). */
typedef struct handout {
    int rc;                        ///< 0, SHARC_END, or the batch's error
    sharc_batch *b;                ///< the slot's batch (NULL when it had none)
    int empty;                     ///< every row was skipped: nothing to hand out
    double narrowed;               ///< padded seconds that compacting took from the kept rows
    sharc_reader_stats handed;     ///< the counters as of this batch (its state's)
    sharc__filter_counts filtered; ///< their filtered cuts by reason
} handout;

/* Free the slot's cuts, first counting each kept row to its mixture source when the batch
 * is handed out (rc 0). */
static void free_rows(sharc__pipeline *p, slot *s, int rc)
{
    for (size_t i = 0; i < s->col.n; i++) {
        const sharc__bcut *c = s->col.cuts[i];
        if (rc == 0 && p->source_cuts && !(s->n_skipped && s->skipped[i])) {
            size_t k = p->cs.ops->source_of(p->cs.self, sharc__key_shard(c->key, p->cs.n_shards));
            p->source_cuts[k]++;
            p->source_seconds[k] += c->duration;
        }
        sharc__bcut_free(&p->bufs, s->col.cuts[i]);
    }
}

/* Take the batch of the complete slot `s`, without the lock: the workers are done with it
 * and the planner reuses the slot only once it is consumed. Drops the rows skipped while
 * decoding, adds the features, frees the cuts and takes the batch's state. */
static void take_batch(sharc__pipeline *p, slot *s, handout *h)
{
    int rc = s->end ? SHARC_END : s->rc;
    sharc_batch *b = s->col.batch;
    h->narrowed = 0;
    if (rc == 0 && s->n_skipped) {
        h->narrowed = sharc__collate_compact(&s->col, s->skipped);
        s->skips.padded_seconds += h->narrowed;
    }
    h->empty = rc == 0 && b->tensors[0].shape[0] == 0;
    if (rc == 0 && !h->empty && sharc__featurize_on_cpu(p->s) &&
        (rc = sharc__featurize_collate(p->ctx, p->s, b, s->col.cuts,
                                       s->n_skipped ? s->skipped : NULL, s->col.n, s->col.rate,
                                       p->step_base + p->handed)) < 0)
        snprintf(s->message, sizeof s->message, "%s", p->ctx->error);
    free_rows(p, s, rc);
    if (rc == 0)
        sharc__pipeline_add_skips(&p->consumed_skips, &s->skips);
    h->handed = p->handed_stats; /* written by this thread only */
    h->filtered = p->handed_filtered;
    if (rc == 0 && !h->empty)
        take_state(p, s, &h->handed, &h->filtered);
    if (rc != 0)
        snprintf(p->ctx->error, sizeof p->ctx->error, "%s", s->message);
    h->rc = rc;
    h->b = b;
}

/* A row of the batch of `s` failed to decode: later batches may be planned and decoded
 * already, so the counters are those this batch's state holds (what was read to plan it),
 * with the cuts of the batches handed out (`handed`) and this batch's problems. Under
 * p->mu. */
static void stats_at_failure(sharc__pipeline *p, const slot *s, const sharc_reader_stats *handed)
{
    sharc_reader_stats at = *handed;
    if (sharc__resume_draft_stats(s->state, s->state_len, &p->consumed_skips, &at) == 0) {
        sharc__resume_draft_filtered(s->state, s->state_len, &p->handed_filtered);
        at.cuts = handed->cuts;
        at.audio_seconds = handed->audio_seconds;
        at.padded_seconds = handed->padded_seconds;
    }
    for (int k = 0; k < SHARC_PROBLEM_COUNT; k++)
        at.problems[k] += s->skips.problems[k];
    at.skipped_cuts += s->skips.skipped_cuts;
    if (s->fail_kind < SHARC_PROBLEM_COUNT)
        at.problems[s->fail_kind]++;
    p->handed_stats = at;
}

/* Under p->mu, settle what take_batch() took from `s`: publish the counters as of it,
 * report a row's failure, and empty the slot, which is consumed when its batch is handed
 * out. Returns the step of a batch handed out. */
static uint64_t settle_batch(sharc__pipeline *p, slot *s, const handout *h)
{
    int rc = h->rc;
    p->worker_stats.padded_seconds += h->narrowed;
    uint64_t step = 0;
    if (rc == 0 && !h->empty) {
        p->handed_stats = h->handed;
        p->handed_filtered = h->filtered;
        step = p->step_base + p->handed++;
    }
    if (rc == SHARC_END || (rc < 0 && s->fail_row == SIZE_MAX)) {
        /* The planner stopped there: every batch it planned has been handed out. */
        p->caller_done = 1;
    } else if (rc < 0) {
        stats_at_failure(p, s, &h->handed);
    }
    if (rc < 0 && s->fail_row != SIZE_MAX && s->fail_kind < SHARC_PROBLEM_COUNT) {
        p->worker_stats.problems[s->fail_kind]++;
        sharc__log(p->ctx, SHARC_LOG_ERROR, "%s", s->message);
        sharc__pipeline_report(p, rc, s->fail_kind, s->fail_path, s->fail_member, s->fail_cut,
                               s->message);
    }
    s->col.batch = NULL;
    s->col.n = 0;
    if (h->b)
        p->inflight--;
    if (rc == 0) {
        s->ready = 0;
        p->consumed++;
        pthread_cond_signal(&p->slot_free);
    }
    return step;
}

int sharc__pipeline_next(sharc__pipeline *p, sharc_batch **out, int timeout_ms)
{
    *out = NULL;
    if (p->failed)
        return p->failed;
    struct timespec deadline, *until = NULL;
    if (timeout_ms >= 0) {
        sharc__deadline_in_ms(&deadline, timeout_ms);
        until = &deadline;
    }
    for (;;) { /* until a batch with rows, the end or an error */
        slot *s = NULL;
        int rc = wait_slot(p, until, timeout_ms, &s);
        if (rc != 0)
            return rc;
        handout h;
        take_batch(p, s, &h);
        pthread_mutex_lock(&p->mu);
        uint64_t step = settle_batch(p, s, &h);
        pthread_mutex_unlock(&p->mu);
        if (h.rc != 0) {
            if (h.b)
                sharc_batch_release(h.b);
            if (h.rc != SHARC_END)
                p->failed = h.rc; /* logged where it happened */
            return h.rc;
        }
        if (h.empty) {
            sharc_batch_release(h.b);
            continue;
        }
        h.b->step = step;
        *out = h.b;
        return 0;
    }
}

/* Until the end or the planner's error, the counters of the last batch handed out (and the
 * problems of a batch that failed to decode): the same at that step whatever the threads
 * and their timing, and what a state saved now restores. Then the totals. Stage seconds
 * are always the time spent so far. */
void sharc__pipeline_stats(sharc__pipeline *p, sharc_reader_stats *out)
{
    pthread_mutex_lock(&p->mu);
    if (p->caller_done) {
        *out = p->planner_stats;
        sharc__stats_take_back(out, &p->worker_stats);
    } else {
        *out = p->handed_stats;
    }
    memcpy(out->stage_seconds, p->planner_stats.stage_seconds, sizeof out->stage_seconds);
    out->stage_seconds[SHARC_STAGE_DECODE] += p->worker_stats.stage_seconds[SHARC_STAGE_DECODE];
    out->feature_seconds = p->worker_stats.feature_seconds;
    out->condition_seconds = p->worker_stats.condition_seconds;
    out->batches = p->step_base + p->handed;
    pthread_mutex_unlock(&p->mu);
}

void sharc__pipeline_filter_counts(sharc__pipeline *p, sharc__filter_counts *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->caller_done ? p->planner_filtered : p->handed_filtered;
    pthread_mutex_unlock(&p->mu);
}

void sharc__pipeline_source_stats(const sharc__pipeline *p, size_t i, uint64_t *cuts,
                                  double *seconds)
{
    *cuts = p->source_cuts ? p->source_cuts[i] : 0;
    *seconds = p->source_seconds ? p->source_seconds[i] : 0;
}

const double *sharc__pipeline_bins(const sharc__pipeline *p, size_t *n)
{
    *n = 0;
    /* The planner estimates them before it plans the first batch and never changes them. */
    return p->handed > 0 ? sharc__sampler_bins(p->sampler, n) : NULL;
}

int sharc__pipeline_state_save(const sharc__pipeline *p, void *buf, size_t cap, size_t *size)
{
    if (!p->last_state_len)
        return 1; /* no batch returned yet: the reader answers (sharc__reader_state_save) */
    *size = p->last_state_len;
    if (!buf || cap < *size)
        return SHARC_ERR(ENOSPC);
    memcpy(buf, p->last_state, *size);
    /* The step field counts batches handed out, which only the caller's side knows. */
    sharc__resume_finish(buf, *size, p->step_base + p->handed);
    return 0;
}

/*
 * The batch pipeline. One planner thread walks the shards, feeds the sampler and lays out
 * each batch (shapes, lengths, strings); worker threads decode the batch's cuts straight
 * into its padded audio tensor; the caller takes batches in step order. The planner alone
 * decides what goes into which batch, in a fixed order, so the batches do not depend on
 * the number of threads or their timing. Starting and stopping it: pipeline_open.c; the
 * sampler's source of cuts and restoring a state: pipeline_source.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batching/pipeline_impl.h"
#include "batching/resume.h"

static int grow_slot(sharc__ctx *ctx, slot *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    size_t cap = n < 64 ? 64 : n * 2;
    bcut **cuts = sharc__malloc(ctx, cap * sizeof *cuts);
    uint8_t *skipped = sharc__malloc(ctx, cap);
    if (!cuts || !skipped) {
        sharc__free(ctx, cuts);
        sharc__free(ctx, skipped);
        return SHARC_ERR(ENOMEM);
    }
    sharc__free(ctx, s->col.cuts);
    sharc__free(ctx, s->skipped);
    s->col.cuts = cuts;
    s->skipped = skipped;
    s->cap = cap;
    return 0;
}

/* Choose the batch's rate (warning once when it differs from the first batch's), then lay
 * the batch out. */
static int layout_batch(sharc__pipeline *p, slot *s, uint64_t step)
{
    sharc__collate_choose_rate(&s->col, p->s->sampling_rate);
    if (!p->first_rate) {
        p->first_rate = s->col.rate;
    } else if (s->col.rate != p->first_rate && !p->rates_warned) {
        p->rates_warned = 1;
        sharc__log(p->ctx, SHARC_LOG_WARN,
                   "a batch at %d Hz (such as cut %s) follows batches at %d Hz: each batch "
                   "holds one rate, but they do not all hold the same; require one with the "
                   "sampling_rate setting (--sampling-rate) to have each cut at another rate "
                   "reported (warned once)",
                   s->col.rate, s->col.cuts[s->col.rate_first]->job.id, p->first_rate);
    }
    return sharc__collate_layout(&s->col, p->ctx, p->pool, step);
}

/* Write the draft state after the batch being planned into s->state (planner thread). */
static int snapshot(sharc__pipeline *p, slot *s, uint64_t next_step, const sharc_reader_stats *st)
{
    sharc__resume at = {.state_hash = p->state_hash,
                        .next_step = next_step,
                        .pos =
                            p->cs.walk ? *sharc__walk_position(p->cs.walk) : (sharc__walk_pos){0},
                        .stats = *st,
                        .filtered = p->filtered};
    if (p->cs.walk) /* an elastic run's prologue, if it has one */
        at.units = sharc__walk_prologue(p->cs.walk, &at.n_units, &at.start_epoch);
    at.has_prologue = at.units != NULL;
    if (p->cs.ops->state_write) { /* a mixture: its draw and its sources' positions */
        at.mix_len = p->cs.ops->state_size(p->cs.self);
        if (!p->mix_state && !(p->mix_state = sharc__malloc(p->ctx, at.mix_len)))
            return SHARC_ERR(ENOMEM);
        p->cs.ops->state_write(p->cs.self, p->mix_state);
        at.mix = p->mix_state;
    }
    if (p->noise) { /* the noise stream's position after this batch's cuts were given theirs */
        at.noise_len = p->noise->state_size(p->noise->self);
        if (!p->noise_state && !(p->noise_state = sharc__malloc(p->ctx, at.noise_len)))
            return SHARC_ERR(ENOMEM);
        p->noise->state_write(p->noise->self, p->noise_state);
        at.noise = p->noise_state;
    }
    return sharc__resume_write(p->ctx, &s->state, &s->state_cap, &s->state_len, &at, &p->held,
                               p->sampler);
}

/* ---- threads ------------------------------------------------------------------------- */

static void publish_stats(sharc__pipeline *p)
{
    p->stats->stage_seconds[SHARC_STAGE_READ] = p->stage[SHARC_STAGE_READ];
    p->stats->stage_seconds[SHARC_STAGE_DECOMPRESS] = p->stage[SHARC_STAGE_DECOMPRESS];
    p->stats->stage_seconds[SHARC_STAGE_SAMPLE] = p->stage[SHARC_STAGE_SAMPLE];
    p->stats->stage_seconds[SHARC_STAGE_COLLATE] = p->stage[SHARC_STAGE_COLLATE];
    p->planner_stats = *p->stats;
    p->planner_filtered = p->filtered;
}

/* Plan one batch into `s`. Returns 0, SHARC_END or an error (message in p->ctx). */
static int plan_one(sharc__pipeline *p, slot *s, uint64_t step)
{
    sharc__sitem *items;
    size_t n;
    double t0 = sharc__now_s(), pulled_before = p->pull_wall;
    int rc = sharc__sampler_next(p->sampler, &items, &n);
    double t1 = sharc__now_s();
    /* The sampler's own time: its call minus the pulls it made (counted by pull_item). */
    p->stage[SHARC_STAGE_SAMPLE] += (t1 - t0) - (p->pull_wall - pulled_before);
    if (rc != 0)
        return rc;
    if ((rc = grow_slot(p->ctx, s, n)) < 0)
        goto fail_items;
    s->col.n = n;
    for (size_t i = 0; i < n; i++) {
        s->col.cuts[i] = items[i].payload;
        s->skipped[i] = 0;
        sharc__keyset_remove(&p->held, items[i].key);
    }
    /* Noise, in the order of planning: which a cut gets does not depend on the threads. */
    for (size_t i = 0; p->noise && i < n; i++) {
        sharc__cut_cond *cond = &s->col.cuts[i]->job.cond;
        if (cond->noise && !cond->noise_cut &&
            (rc = p->noise->assign(p->noise->self, p->ctx, cond)) < 0)
            goto fail_cuts;
    }
    s->n_skipped = 0;
    memset(&s->skips, 0, sizeof s->skips);
    s->rc = 0;
    s->fail_row = SIZE_MAX;
    s->end = 0;
    /* Counted before the pool sees it, so the caller's share is never overstated. */
    pthread_mutex_lock(&p->mu);
    p->inflight++;
    pthread_mutex_unlock(&p->mu);
    rc = sharc__batch_pool_acquire(p->pool, &s->col.batch);
    if (rc < 0) {
        pthread_mutex_lock(&p->mu);
        p->inflight--;
        pthread_mutex_unlock(&p->mu);
        sharc__fail(p->ctx, rc, "no free batch buffer: %s", sharc__batch_pool_error(p->pool));
        goto fail_cuts;
    }
    if ((rc = layout_batch(p, s, step)) < 0)
        goto fail_batch;
    s->col.batch->step = step;
    s->col.batch->epoch = sharc__key_epoch(s->col.cuts[0]->key, p->cs.n_shards);
    p->stats->batches++;
    for (size_t i = 0; i < n; i++) {
        p->stats->cuts++;
        p->stats->audio_seconds += s->col.cuts[i]->duration;
    }
    if (s->col.rate > 0)
        p->stats->padded_seconds += (double)s->col.n * (double)s->col.T / (double)s->col.rate;
    p->stage[SHARC_STAGE_COLLATE] += sharc__now_s() - t1;
    if ((rc = snapshot(p, s, step + 1, p->stats)) < 0)
        goto fail_batch;
    return 0;
fail_batch:
    sharc_batch_release(s->col.batch);
    s->col.batch = NULL;
    pthread_mutex_lock(&p->mu);
    p->inflight--;
    pthread_mutex_unlock(&p->mu);
fail_cuts:
    for (size_t i = 0; i < n; i++)
        sharc__bcut_free(&p->bufs, s->col.cuts[i]);
    s->col.n = 0;
    return rc;
fail_items:
    for (size_t i = 0; i < n; i++)
        sharc__bcut_free(&p->bufs, items[i].payload);
    return rc;
}

static void *planner_main(void *arg)
{
    sharc__pipeline *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->planned - p->consumed >= p->n_slots)
            pthread_cond_wait(&p->slot_free, &p->mu);
        int stop = p->stop;
        uint64_t index = p->planned;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        slot *s = &p->slots[index % p->n_slots];
        int rc = plan_one(p, s, p->step_base + index);
        pthread_mutex_lock(&p->mu);
        publish_stats(p);
        if (rc == 0) {
            s->pending = s->col.n;
            s->dispatched = 0;
        } else {
            s->end = rc == SHARC_END;
            s->rc = rc == SHARC_END ? 0 : rc;
            s->fail_row = SIZE_MAX; /* reported by the reader where it happened, */
            if (rc != SHARC_END)
                sharc__log_error_once(p->ctx); /* or else now */
            snprintf(s->message, sizeof s->message, "%s", p->ctx->error);
            s->pending = 0;
            s->col.n = 0;
            p->finished = 1;
        }
        s->ready = 1;
        p->planned++;
        if (s->pending > 0)
            pthread_cond_broadcast(&p->rows_ready);
        else
            pthread_cond_signal(&p->batch_done);
        pthread_mutex_unlock(&p->mu);
        if (rc != 0)
            break;
    }
    return NULL;
}

/* Decode cut i of slot s into its row of the audio tensor, and compute its features when
 * the batch has them; called without the lock. */
static int decode_row(worker *w, slot *s, size_t i)
{
    sharc__pipeline *p = w->p;
    bcut *b = s->col.cuts[i];
    float *row = (float *)s->col.batch->tensors[0].data + (size_t)i * (size_t)s->col.T;
    int channels = 0, rc;
    w->err.kind = SHARC_PROBLEM_COUNT;
    if (b->job.channels > 1 && p->s->channel < 0) {
        rc =
            sharc__set_error(&w->ctx, SHARC_ERR_AUDIO_MISMATCH,
                             "%s member %s (cut %s): batches hold one channel and this cut has %d; "
                             "choose one with the channel setting (--channel)",
                             b->job.shard, b->job.member, b->job.id, b->job.channels);
        return sharc__stream_fail(&w->ctx, &w->err, rc, SHARC_PROBLEM_AUDIO_FORMAT, 0, b->job.shard,
                                  b->job.member, b->job.id);
    }
    if (b->job.cond.rate != s->col.rate && p->s->sampling_rate > 0) {
        rc = sharc__set_error(&w->ctx, SHARC_ERR_AUDIO_MISMATCH,
                              "%s member %s (cut %s): %d Hz is required, the audio is %d Hz "
                              "(turn on the resample setting, --resample, to convert it)",
                              b->job.shard, b->job.member, b->job.id, s->col.rate,
                              b->job.sampling_rate);
        return sharc__stream_fail(&w->ctx, &w->err, rc, SHARC_PROBLEM_AUDIO_FORMAT, 0, b->job.shard,
                                  b->job.member, b->job.id);
    }
    if (b->job.cond.rate != s->col.rate) {
        rc = sharc__set_error(
            &w->ctx, SHARC_ERR_AUDIO_MISMATCH,
            "%s member %s (cut %s): its audio is at %d Hz, and the batch it was drawn into at "
            "%d Hz (%zu of its %zu cuts, such as %s%s): the rows of a batch share one sampling "
            "rate; require a rate with the sampling_rate setting (--sampling-rate), and turn on "
            "resample (--resample) to convert every cut at another rate, whatever its batch",
            b->job.shard, b->job.member, b->job.id, b->job.sampling_rate, s->col.rate,
            s->col.rate_count, s->col.n, s->col.cuts[s->col.rate_first]->job.id,
            s->col.rate_tie ? "; a tie, won by the rate met first" : "");
        return sharc__stream_fail(&w->ctx, &w->err, rc, SHARC_PROBLEM_AUDIO_FORMAT, 0, b->job.shard,
                                  b->job.member, b->job.id);
    }
    rc = sharc__decode_cond(&p->dopts, &w->ctx, &w->fetch, &w->cond, &b->job, row, (size_t)s->col.T,
                            &channels, &w->err);
    if (rc < 0)
        return rc;
    size_t len = (size_t)b->job.cond.num_samples;
    /* The batch is read much later, after the batches planned ahead: stream the zeros. */
    if (len < (size_t)s->col.T)
        sharc__memzero_stream(row + len, ((size_t)s->col.T - len) * sizeof(float));
    /* Here, in parallel and while the row is in cache, rather than when the batch is handed
     * out: one thread computing every row's features capped batch mode at its rate. A batch
     * at another rate gets none: it fails when handed out (sharc__featurize_collate). */
    if (sharc__featurize_on_cpu(p->s) && s->col.rate == p->s->fbank_sample_rate) {
        double t0 = sharc__now_s();
        rc = sharc__featurize_cut(&w->fbank, &w->ctx, p->s, &p->bufs, b, row);
        w->feature_dt = sharc__now_s() - t0;
        return rc;
    }
    return 0;
}

/* Call on_problem; the caller holds p->mu, which serialises the calls. */
static void report(sharc__pipeline *p, int code, sharc_problem kind, const char *path,
                   const char *member, const char *cut_id, const char *message)
{
    if (!p->s->on_problem)
        return;
    sharc_problem_report rep = {kind,
                                code,
                                path,
                                member && *member ? member : NULL,
                                cut_id && *cut_id ? cut_id : NULL,
                                message,
                                p->s->on_error == SHARC_ON_ERROR_FAIL};
    p->s->on_problem(p->s->problem_cookie, &rep);
}

static slot *find_work(sharc__pipeline *p, size_t *index)
{
    for (uint64_t k = p->consumed; k < p->planned; k++) {
        slot *s = &p->slots[k % p->n_slots];
        if (s->ready && s->dispatched < s->col.n) {
            *index = s->dispatched++;
            return s;
        }
    }
    return NULL;
}

/* Add the skips `s` (cuts, seconds and problems of rows skipped while decoding) to `sum`. */
static void add_skips(sharc_reader_stats *sum, const sharc_reader_stats *s)
{
    sum->cuts += s->cuts;
    sum->audio_seconds += s->audio_seconds;
    sum->padded_seconds += s->padded_seconds;
    sum->skipped_cuts += s->skipped_cuts;
    for (int i = 0; i < SHARC_PROBLEM_COUNT; i++)
        sum->problems[i] += s->problems[i];
}

/* A mixture's row that failed: its error begins with its source's name, as the problems
 * the planner meets do (walk.h). */
static void name_source(const sharc__pipeline *p, sharc__ctx *ctx, const sharc__bcut *c)
{
    if (!p->cs.ops->source_name)
        return;
    size_t k = p->cs.ops->source_of(p->cs.self, sharc__key_shard(c->key, p->cs.n_shards));
    (void)sharc__wrap_error(ctx, 0, "%s", p->cs.ops->source_name(p->cs.self, k));
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    sharc__pipeline *p = w->p;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        size_t i;
        slot *s = find_work(p, &i);
        if (!s) {
            pthread_cond_wait(&p->rows_ready, &p->mu);
            continue;
        }
        pthread_mutex_unlock(&p->mu);
        double t0 = sharc__now_s(), cond0 = w->cond.seconds;
        w->feature_dt = 0;
        int rc = decode_row(w, s, i);
        if (rc < 0)
            name_source(p, &w->ctx, s->col.cuts[i]);
        double dt = sharc__now_s() - t0;
        pthread_mutex_lock(&p->mu);
        p->worker_stats.stage_seconds[SHARC_STAGE_DECODE] += dt - w->feature_dt;
        p->worker_stats.feature_seconds += w->feature_dt;
        p->worker_stats.condition_seconds += w->cond.seconds - cond0;
        if (rc < 0 &&
            (p->s->on_error == SHARC_ON_ERROR_FAIL || w->err.kind >= SHARC_PROBLEM_COUNT)) {
            if (i < s->fail_row) {
                s->fail_row = i;
                s->rc = rc;
                s->fail_kind = w->err.kind;
                s->fail_path = w->err.path;
                snprintf(s->message, sizeof s->message, "%s", w->ctx.error);
                snprintf(s->fail_member, sizeof s->fail_member, "%s",
                         sharc__buf_str(&w->err.member));
                snprintf(s->fail_cut, sizeof s->fail_cut, "%s", sharc__buf_str(&w->err.cut_id));
            }
        } else if (rc < 0) {
            sharc__log(&w->ctx, SHARC_LOG_WARN, "%s", w->ctx.error);
            report(p, rc, w->err.kind, w->err.path, sharc__buf_str(&w->err.member),
                   sharc__buf_str(&w->err.cut_id), w->ctx.error);
            s->skipped[i] = 1;
            s->n_skipped++;
            /* Counted as returned by the planner; taken back here, and from the state of
             * this batch when it is handed out. */
            sharc_reader_stats row = {0};
            row.problems[w->err.kind] = 1;
            row.skipped_cuts = 1;
            row.cuts = 1;
            row.audio_seconds = s->col.cuts[i]->duration;
            row.padded_seconds = s->col.rate > 0 ? (double)s->col.T / (double)s->col.rate : 0;
            add_skips(&p->worker_stats, &row);
            add_skips(&s->skips, &row);
        }
        /* The caller waits for the batches in order: only the oldest one's end concerns it. */
        if (--s->pending == 0 && s == &p->slots[p->consumed % p->n_slots])
            pthread_cond_signal(&p->batch_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int sharc__pipeline_start_threads(sharc__pipeline *p)
{
    publish_stats(p);
    for (int i = 0; i < p->n_workers; i++) {
        worker *w = &p->workers[i];
        w->p = p;
        sharc__ctx_init(&w->ctx, &p->ctx->alloc, &p->ctx->log);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            return sharc__fail(p->ctx, SHARC_ERR(EAGAIN), "cannot start decode thread %d", i);
        w->started = 1;
        char name[16];
        snprintf(name, sizeof name, "sharc-decode%d", i % 100);
        (void)pthread_setname_np(w->thread, name); /* for top -H, perf, gdb */
    }
    if (pthread_create(&p->planner, NULL, planner_main, p) != 0)
        return sharc__fail(p->ctx, SHARC_ERR(EAGAIN), "cannot start the planner thread");
    p->planner_started = 1;
    (void)pthread_setname_np(p->planner, "sharc-planner");
    return 0;
}

/* ---- the caller's side ------------------------------------------------------------- */

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
        add_skips(&p->consumed_skips, &s->skips);
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
        report(p, rc, s->fail_kind, s->fail_path, s->fail_member, s->fail_cut, s->message);
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

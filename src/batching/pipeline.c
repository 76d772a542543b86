/*
 * The batch pipeline. One planner thread walks the shards, feeds the sampler and lays out
 * each batch (shapes, lengths, strings); worker threads decode the batch's cuts straight
 * into its padded audio tensor; the caller takes batches in step order. The planner alone
 * decides what goes into which batch, in a fixed order, so the batches do not depend on
 * the number of threads or their timing. The caller's side: pipeline_take.c; starting and
 * stopping it: pipeline_open.c; the sampler's source of cuts and restoring a state:
 * pipeline_source.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void sharc__pipeline_report(sharc__pipeline *p, int code, sharc_problem kind, const char *path,
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

void sharc__pipeline_add_skips(sharc_reader_stats *sum, const sharc_reader_stats *s)
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
            sharc__pipeline_report(p, rc, w->err.kind, w->err.path, sharc__buf_str(&w->err.member),
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
            sharc__pipeline_add_skips(&p->worker_stats, &row);
            sharc__pipeline_add_skips(&s->skips, &row);
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

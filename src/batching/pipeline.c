/*
 * The batch pipeline. One planner thread walks the shards, feeds the sampler and lays out
 * each batch (shapes, lengths, strings); worker threads decode the batch's cuts straight
 * into its padded audio tensor; the caller takes batches in step order. The planner alone
 * decides what goes into which batch, in a fixed order, so the batches do not depend on
 * the number of threads or their timing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batching/batch.h"
#include "batching/pipeline.h"
#include "reader/reader_impl.h"
#include "batching/bcut.h"
#include "io/remote.h"
#include "io/tar.h"
#include "base/buf.h"
#include "io/fetch.h"
#include "plan/keyset.h"
#include "reader/resume.h"
#include "batching/sampler.h"

typedef sharc__bcut bcut;

/* Read-ahead: at most this many lane threads, one per decode thread, or one per
 * PLAIN_WORKERS_PER_LANE for plain tars, whose audio the decode threads read themselves. */
#define SHARC__MAX_LANES       8
#define PLAIN_WORKERS_PER_LANE 4

typedef struct slot {
    sharc_batch *batch;
    bcut **cuts;
    size_t n, cap;
    size_t dispatched, pending;
    int64_t T;
    int rate;                 ///< the batch's sampling rate: that of most of its cuts
    size_t rate_first;        ///< the first cut at that rate
    size_t rate_count;        ///< cuts at that rate
    int rate_tie;             ///< as many cuts are at another rate
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
    sharc__fetcher fetch; ///< audio left in shard files
    pthread_t thread;
    int started;
} worker;

struct sharc__pipeline {
    sharc_reader *r;
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
    sharc_reader_stats planner_stats; ///< published copy of r->stats (under mu)
    sharc_reader_stats worker_stats;  ///< decode counters (under mu)
    double stage[5];                  ///< planner-side stage seconds (planner only)
    double pull_wall;                 ///< wall time of pull_item calls (planner only)
    uint8_t *last_state;
    size_t last_state_len, last_state_cap;
    sharc_reader_stats consumed_skips; ///< the skips of the batches consumed (caller only)
    /** The counters as of the last batch handed out (its state's), which do not depend on
     *  how far ahead the planner is; and whether the caller has met the end or an error,
     *  after which the totals are final (both under mu: a loader's other thread asks). */
    sharc_reader_stats handed_stats;
    int caller_done;
    sharc__keyset held;  ///< keys of the cuts the sampler holds, for the resume state
    sharc__bufpool bufs; ///< audio member buffers, recycled
    bcut **preloaded;    ///< restore: cuts re-read for the saved keys, sorted by key
    uint8_t *taken;      ///< preloaded[i] was handed to the sampler
    size_t n_preloaded;
    int first_rate;   ///< the rate of the first batch planned (planner only)
    int rates_warned; ///< a batch at another rate was warned about (planner only)
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ---- sampler source ----------------------------------------------------------------- */

static int pull_item(void *cookie, sharc__sitem *out)
{
    sharc__pipeline *p = cookie;
    sharc_reader *r = p->r;
    double t0 = sharc__now_s(), io0 = r->ctx.io_seconds, read0 = r->read_seconds;
    int rc = sharc__reader_pull(r);
    double t1 = sharc__now_s(), io = r->ctx.io_seconds - io0;
    /* The reading itself, here or on a read-ahead lane; waiting for a lane is not a stage. */
    p->stage[SHARC_STAGE_READ] += io;
    p->stage[SHARC_STAGE_DECOMPRESS] += (r->read_seconds - read0) - io;
    if (rc != 0) {
        p->pull_wall += t1 - t0;
        return rc;
    }
    bcut *b;
    if ((rc = sharc__bcut_from_raw(&p->bufs, &r->raw, r->ds.n_shards, &b)) < 0)
        return rc;
    double t2 = sharc__now_s();
    p->stage[SHARC_STAGE_SAMPLE] += t2 - t1;
    p->pull_wall += t2 - t0;
    if ((rc = sharc__keyset_add(&p->r->ctx, &p->held, b->key)) < 0) {
        sharc__bcut_free(&p->bufs, b);
        return rc;
    }
    out->duration = b->duration;
    out->key = b->key;
    out->bytes = sharc__bcut_bytes(b);
    out->payload = b;
    return 0;
}

static void release_item(void *cookie, sharc__sitem *item, sharc__release_reason why)
{
    sharc__pipeline *p = cookie;
    if (why == SHARC__RELEASE_TOO_SHORT || why == SHARC__RELEASE_TOO_LONG) {
        p->r->stats.filtered_cuts++;
        /* Filtered as it was pulled, so it is a cut of the epoch being read: it does not
         * count as one the epoch produced (an epoch of filtered cuts must not repeat
         * forever, see open_next_shard). */
        if (p->r->pos.epoch_cuts > 0)
            p->r->pos.epoch_cuts--;
    } else if (why == SHARC__RELEASE_DROPPED)
        p->r->stats.dropped_cuts++;
    sharc__keyset_remove(&p->held, item->key);
    sharc__bcut_free(&p->bufs, item->payload);
}

/*
 * The durations of the cuts pull_item would produce next (sharc__sampler_source.peek): read
 * on as pull_item would, quietly, then go back. Problems met on the way are not reported
 * (they are when the cuts are pulled) and the counters are put back; a problem that would
 * stop the reader ends the peek instead, and stops it when it is pulled. Going back re-reads
 * the open shard up to where it was, as a resume does.
 */
static int peek_durations(void *cookie, int (*visit)(void *vcookie, double duration), void *vc)
{
    sharc__pipeline *p = cookie;
    sharc_reader *r = p->r;
    const sharc__walk_pos at = r->pos;
    const sharc_reader_stats stats = r->stats;
    const double io0 = r->ctx.io_seconds, read0 = r->read_seconds;
    int rc;
    r->quiet = 1;
    while ((rc = sharc__reader_pull(r)) == 0) {
        int v = visit(vc, r->raw.duration);
        if (v == SHARC__PEEK_FILTERED && r->pos.epoch_cuts > 0)
            r->pos.epoch_cuts--; /* as release_item: an epoch of filtered cuts ends */
        if (v == SHARC__PEEK_STOP)
            break;
    }
    r->quiet = 0;
    r->failed = 0;
    r->stats = stats;
    if (rc == SHARC_ERR(ENOMEM))
        return rc;
    r->ctx.error[0] = 0;
    rc = sharc__reader_seek(r, &at);
    /* The reading ahead and back is startup time spent reading, counted as pull_item does. */
    const double io = r->ctx.io_seconds - io0;
    p->stage[SHARC_STAGE_READ] += io;
    p->stage[SHARC_STAGE_DECOMPRESS] += (r->read_seconds - read0) - io;
    return rc;
}

static void describe_item(void *cookie, const sharc__sitem *item, char *out, size_t cap)
{
    (void)cookie;
    const bcut *b = item->payload;
    snprintf(out, cap, "cut %s (%s member %s)", b->job.id, b->job.shard, b->job.member);
}

static int cmp_bcut_key(const void *a, const void *b)
{
    uint64_t x = (*(bcut *const *)a)->key, y = (*(bcut *const *)b)->key;
    return (x > y) - (x < y);
}

static int reload_item(void *cookie, uint64_t key, sharc__sitem *out)
{
    sharc__pipeline *p = cookie;
    size_t lo = 0, hi = p->n_preloaded;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->preloaded[mid]->key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    bcut *b = lo < p->n_preloaded ? p->preloaded[lo] : NULL;
    if (!b || b->key != key || p->taken[lo])
        return sharc__fail(&p->r->ctx, SHARC_ERR_STATE,
                           "the state's buffered cut at shard %llu position %llu could not be "
                           "read again: the data changed",
                           (unsigned long long)sharc__key_shard(key, p->r->ds.n_shards),
                           (unsigned long long)sharc__key_position(key));
    int rc = sharc__keyset_add(&p->r->ctx, &p->held, key);
    if (rc < 0)
        return rc;
    p->taken[lo] = 1; /* ownership moves to the sampler */
    out->duration = b->duration;
    out->key = key;
    out->bytes = sharc__bcut_bytes(b);
    out->payload = b;
    return 0;
}

/* ---- planning a batch ----------------------------------------------------------------- */

static const char *const string_columns[] = {"cut_id", "text", "speaker", "language"};

static const char *column_value(const bcut *b, int col)
{
    switch (col) {
    case 0:
        return b->job.id;
    case 1:
        return b->text;
    case 2:
        return b->speaker;
    default:
        return b->language;
    }
}

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
    sharc__free(ctx, s->cuts);
    sharc__free(ctx, s->skipped);
    s->cuts = cuts;
    s->skipped = skipped;
    s->cap = cap;
    return 0;
}

/*
 * The batch's sampling rate: the required one if there is one, else the rate most of its
 * cuts have, on a tie the one met first. Its rows hold samples at one rate; a cut at
 * another is a problem of its own (see decode_row()), and does not count towards T.
 */
static void choose_rate(slot *s, int required)
{
    enum { MAX_BATCH_RATES = 16 }; /* rates beyond are never the batch's */
    int rates[MAX_BATCH_RATES];
    size_t counts[MAX_BATCH_RATES], firsts[MAX_BATCH_RATES], n_rates = 0;
    for (size_t i = 0; i < s->n; i++) {
        int rate = s->cuts[i]->job.sampling_rate;
        size_t k = 0;
        while (k < n_rates && rates[k] != rate)
            k++;
        if (k == n_rates && n_rates < MAX_BATCH_RATES) {
            rates[n_rates] = rate;
            counts[n_rates] = 0;
            firsts[n_rates++] = i;
        }
        if (k < n_rates)
            counts[k]++;
    }
    size_t best = 0;
    for (size_t k = 1; k < n_rates; k++)
        if (required ? rates[k] == required : counts[k] > counts[best])
            best = k;
    s->rate_tie = 0;
    for (size_t k = 0; k < n_rates; k++)
        s->rate_tie |= k != best && counts[k] == counts[best];
    if (required && (n_rates == 0 || rates[best] != required)) {
        s->rate = required; /* no cut at that rate */
        s->rate_first = 0;
        s->rate_count = 0;
        return;
    }
    s->rate = n_rates ? rates[best] : 0;
    s->rate_first = n_rates ? firsts[best] : 0;
    s->rate_count = n_rates ? counts[best] : 0;
}

int sharc__pipeline_check_i32(sharc__ctx *ctx, uint64_t step, size_t n_cuts, int64_t most_samples,
                              const char *most_id, const uint64_t column_bytes[4])
{
    if (most_samples > INT32_MAX)
        return sharc__fail(ctx, SHARC_ERR_TOO_LARGE,
                           "step %llu: cannot lay out the batch: audio_lens is int32, and cut %s "
                           "has %lld samples, over %d",
                           (unsigned long long)step, most_id, (long long)most_samples, INT32_MAX);
    for (int c = 0; c < 4; c++)
        if (column_bytes[c] > INT32_MAX)
            return sharc__fail(ctx, SHARC_ERR_TOO_LARGE,
                               "step %llu: cannot lay out the batch: %s_offsets is int32, and its "
                               "%zu cuts hold %llu bytes of %s, over %d",
                               (unsigned long long)step, string_columns[c], n_cuts,
                               (unsigned long long)column_bytes[c], string_columns[c], INT32_MAX);
    return 0;
}

/* Declare the batch's tensors, then fill everything but the audio samples. */
static int layout_batch(sharc__pipeline *p, slot *s, uint64_t step)
{
    sharc_batch *b = s->batch;
    int64_t B = (int64_t)s->n, T = 0, most = 0;
    size_t most_at = 0;
    uint64_t text_bytes[4] = {0, 0, 0, 0};
    choose_rate(s, p->r->s.sampling_rate);
    if (!p->first_rate) {
        p->first_rate = s->rate;
    } else if (s->rate != p->first_rate && !p->rates_warned) {
        p->rates_warned = 1;
        sharc__log(&p->r->ctx, SHARC_LOG_WARN,
                   "a batch at %d Hz (such as cut %s) follows batches at %d Hz: each batch "
                   "holds one rate, but they do not all hold the same; require one with the "
                   "sampling_rate setting (--sampling-rate) to have each cut at another rate "
                   "reported (warned once)",
                   s->rate, s->cuts[s->rate_first]->job.id, p->first_rate);
    }
    size_t longest = s->rate_first; /* named when the batch cannot be laid out */
    for (size_t i = 0; i < s->n; i++) {
        if (s->cuts[i]->job.sampling_rate == s->rate && s->cuts[i]->job.num_samples > T) {
            T = s->cuts[i]->job.num_samples;
            longest = i;
        }
        /* audio_lens holds every row's length, at the batch's rate or not. */
        if (s->cuts[i]->job.num_samples > most) {
            most = s->cuts[i]->job.num_samples;
            most_at = i;
        }
        for (int c = 0; c < 4; c++) {
            const char *v = column_value(s->cuts[i], c);
            text_bytes[c] += v ? strlen(v) : 0;
        }
    }
    int rc = sharc__pipeline_check_i32(&p->r->ctx, step, s->n, most, s->cuts[most_at]->job.id,
                                       text_bytes);
    if (rc < 0)
        return rc;
    s->T = T;
    int64_t shape_audio[2] = {B, T}, shape_b[1] = {B}, shape_off[1] = {B + 1};
    rc = sharc__batch_add_tensor(b, "audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, shape_audio);
    if (rc >= 0)
        rc = sharc__batch_add_tensor(b, "audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1,
                                     shape_b);
    if (rc >= 0)
        rc = sharc__batch_add_tensor(b, "duration", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 1,
                                     shape_b);
    for (int c = 0; c < 4 && rc >= 0; c++) {
        char name[SHARC_TENSOR_NAME_MAX];
        int64_t shape_bytes[1] = {(int64_t)text_bytes[c]};
        snprintf(name, sizeof name, "%s_offsets", string_columns[c]);
        rc = sharc__batch_add_tensor(b, name, SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, shape_off);
        snprintf(name, sizeof name, "%s_bytes", string_columns[c]);
        if (rc >= 0)
            rc = sharc__batch_add_tensor(b, name, SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1,
                                         shape_bytes);
    }
    if (rc < 0 || (rc = sharc__batch_finish(b)) < 0) {
        /* Most often one cut's metadata lies about its length: name the longest. */
        const bcut *c = s->cuts[longest];
        return sharc__fail(&p->r->ctx, rc,
                           "cannot lay out a batch of %lld cuts x %lld samples (the longest is "
                           "cut %s, %s member %s, of %g s by its metadata): %s",
                           (long long)B, (long long)T, c->job.id, c->job.shard, c->job.member,
                           c->duration, sharc__batch_pool_error(p->pool));
    }
    int32_t *lens = b->tensors[1].data;
    float *dur = b->tensors[2].data;
    for (size_t i = 0; i < s->n; i++) {
        lens[i] = (int32_t)s->cuts[i]->job.num_samples;
        dur[i] = (float)s->cuts[i]->duration;
    }
    for (int c = 0; c < 4; c++) {
        int32_t *off = b->tensors[3 + 2 * c].data;
        uint8_t *bytes = b->tensors[4 + 2 * c].data;
        int32_t at = 0;
        for (size_t i = 0; i < s->n; i++) {
            const char *v = column_value(s->cuts[i], c);
            size_t n = v ? strlen(v) : 0;
            off[i] = at;
            if (n)
                memcpy(bytes + at, v, n);
            at += (int32_t)n;
        }
        off[s->n] = at;
    }
    return 0;
}

/* Write the draft state after the batch being planned into s->state (planner thread). */
static int snapshot(sharc__pipeline *p, slot *s, uint64_t next_step, const sharc_reader_stats *st)
{
    return sharc__resume_write(p->r, &s->state, &s->state_cap, &s->state_len, next_step, st,
                               &p->held, p->sampler);
}

/* ---- threads ------------------------------------------------------------------------- */

static void publish_stats(sharc__pipeline *p)
{
    p->r->stats.stage_seconds[SHARC_STAGE_READ] = p->stage[SHARC_STAGE_READ];
    p->r->stats.stage_seconds[SHARC_STAGE_DECOMPRESS] = p->stage[SHARC_STAGE_DECOMPRESS];
    p->r->stats.stage_seconds[SHARC_STAGE_SAMPLE] = p->stage[SHARC_STAGE_SAMPLE];
    p->r->stats.stage_seconds[SHARC_STAGE_COLLATE] = p->stage[SHARC_STAGE_COLLATE];
    p->planner_stats = p->r->stats;
}

/* Plan one batch into `s`. Returns 0, SHARC_END or an error (message in r->ctx). */
static int plan_one(sharc__pipeline *p, slot *s, uint64_t step)
{
    sharc_reader *r = p->r;
    sharc__sitem *items;
    size_t n;
    double t0 = sharc__now_s(), pulled_before = p->pull_wall;
    int rc = sharc__sampler_next(p->sampler, &items, &n);
    double t1 = sharc__now_s();
    /* The sampler's own time: its call minus the pulls it made (counted by pull_item). */
    p->stage[SHARC_STAGE_SAMPLE] += (t1 - t0) - (p->pull_wall - pulled_before);
    if (rc != 0)
        return rc;
    if ((rc = grow_slot(&r->ctx, s, n)) < 0)
        goto fail_items;
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        s->cuts[i] = items[i].payload;
        s->skipped[i] = 0;
        sharc__keyset_remove(&p->held, items[i].key);
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
    rc = sharc__batch_pool_acquire(p->pool, &s->batch);
    if (rc < 0) {
        pthread_mutex_lock(&p->mu);
        p->inflight--;
        pthread_mutex_unlock(&p->mu);
        sharc__fail(&r->ctx, rc, "no free batch buffer: %s", sharc__batch_pool_error(p->pool));
        goto fail_cuts;
    }
    if ((rc = layout_batch(p, s, step)) < 0)
        goto fail_batch;
    s->batch->step = step;
    s->batch->epoch = sharc__key_epoch(s->cuts[0]->key, p->r->ds.n_shards);
    r->stats.batches++;
    for (size_t i = 0; i < n; i++) {
        r->stats.cuts++;
        r->stats.audio_seconds += s->cuts[i]->duration;
    }
    if (s->rate > 0)
        r->stats.padded_seconds += (double)s->n * (double)s->T / (double)s->rate;
    p->stage[SHARC_STAGE_COLLATE] += sharc__now_s() - t1;
    if ((rc = snapshot(p, s, step + 1, &r->stats)) < 0)
        goto fail_batch;
    return 0;
fail_batch:
    sharc_batch_release(s->batch);
    s->batch = NULL;
    pthread_mutex_lock(&p->mu);
    p->inflight--;
    pthread_mutex_unlock(&p->mu);
fail_cuts:
    for (size_t i = 0; i < n; i++)
        sharc__bcut_free(&p->bufs, s->cuts[i]);
    s->n = 0;
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
            s->pending = s->n;
            s->dispatched = 0;
        } else {
            s->end = rc == SHARC_END;
            s->rc = rc == SHARC_END ? 0 : rc;
            s->fail_row = SIZE_MAX; /* reported by the reader where it happened, */
            if (rc != SHARC_END)
                sharc__log_error_once(&p->r->ctx); /* or else now */
            snprintf(s->message, sizeof s->message, "%s", p->r->ctx.error);
            s->pending = 0;
            s->n = 0;
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

/* Decode cut i of slot s into its row of the audio tensor; called without the lock. */
static int decode_row(worker *w, slot *s, size_t i)
{
    sharc__pipeline *p = w->p;
    const bcut *b = s->cuts[i];
    float *row = (float *)s->batch->tensors[0].data + (size_t)i * (size_t)s->T;
    int channels = 0, rc;
    w->err.kind = SHARC_PROBLEM_COUNT;
    if (b->job.channels > 1 && p->r->s.channel < 0) {
        rc =
            sharc__set_error(&w->ctx, SHARC_ERR_AUDIO_MISMATCH,
                             "%s member %s (cut %s): batches hold one channel and this cut has %d; "
                             "choose one with the channel setting (--channel)",
                             b->job.shard, b->job.member, b->job.id, b->job.channels);
        return sharc__stream_fail(&w->ctx, &w->err, rc, SHARC_PROBLEM_AUDIO_FORMAT, 0, b->job.shard,
                                  b->job.member, b->job.id);
    }
    if (b->job.sampling_rate != s->rate && p->r->s.sampling_rate > 0) {
        rc =
            sharc__set_error(&w->ctx, SHARC_ERR_AUDIO_MISMATCH,
                             "%s member %s (cut %s): %d Hz is required, the audio is %d Hz "
                             "(sharc does not resample)",
                             b->job.shard, b->job.member, b->job.id, s->rate, b->job.sampling_rate);
        return sharc__stream_fail(&w->ctx, &w->err, rc, SHARC_PROBLEM_AUDIO_FORMAT, 0, b->job.shard,
                                  b->job.member, b->job.id);
    }
    if (b->job.sampling_rate != s->rate) {
        rc = sharc__set_error(
            &w->ctx, SHARC_ERR_AUDIO_MISMATCH,
            "%s member %s (cut %s): its audio is at %d Hz, and the batch it was drawn into at "
            "%d Hz (%zu of its %zu cuts, such as %s%s): the rows of a batch share one sampling "
            "rate and sharc does not resample; require a rate with the sampling_rate setting "
            "(--sampling-rate) to have every cut at another rate reported, whatever its batch",
            b->job.shard, b->job.member, b->job.id, b->job.sampling_rate, s->rate, s->rate_count,
            s->n, s->cuts[s->rate_first]->job.id,
            s->rate_tie ? "; a tie, won by the rate met first" : "");
        return sharc__stream_fail(&w->ctx, &w->err, rc, SHARC_PROBLEM_AUDIO_FORMAT, 0, b->job.shard,
                                  b->job.member, b->job.id);
    }
    rc = sharc__reader_decode(p->r, &w->ctx, &w->fetch, &b->job, row, (size_t)s->T, &channels,
                              &w->err);
    if (rc < 0)
        return rc;
    size_t len = (size_t)b->job.num_samples;
    /* The batch is read much later, after the batches planned ahead: stream the zeros. */
    if (len < (size_t)s->T)
        sharc__memzero_stream(row + len, ((size_t)s->T - len) * sizeof(float));
    return 0;
}

/* Call on_problem; the caller holds p->mu, which serialises the calls. */
static void report(sharc__pipeline *p, int code, sharc_problem kind, const char *path,
                   const char *member, const char *cut_id, const char *message)
{
    if (!p->r->s.on_problem)
        return;
    sharc_problem_report rep = {
        kind,   code, path, member && *member ? member : NULL, cut_id && *cut_id ? cut_id : NULL,
        message};
    p->r->s.on_problem(p->r->s.problem_cookie, &rep);
}

static slot *find_work(sharc__pipeline *p, size_t *index)
{
    for (uint64_t k = p->consumed; k < p->planned; k++) {
        slot *s = &p->slots[k % p->n_slots];
        if (s->ready && s->dispatched < s->n) {
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
        double t0 = sharc__now_s();
        int rc = decode_row(w, s, i);
        double dt = sharc__now_s() - t0;
        pthread_mutex_lock(&p->mu);
        p->worker_stats.stage_seconds[SHARC_STAGE_DECODE] += dt;
        if (rc < 0 &&
            (p->r->s.on_error == SHARC_ON_ERROR_FAIL || w->err.kind >= SHARC_PROBLEM_COUNT)) {
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
            row.audio_seconds = s->cuts[i]->duration;
            row.padded_seconds = s->rate > 0 ? (double)s->T / (double)s->rate : 0;
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

/* ---- the caller's side ------------------------------------------------------------- */

/*
 * Drop the rows of cuts skipped under the SKIP policy, in place, and narrow the batch to
 * its longest remaining row: a skipped cut does not keep the others padded to its length
 * (a cut whose metadata overstated it would otherwise size every row). Returns the padded
 * seconds that narrowing took from the remaining rows.
 */
static double compact(slot *s)
{
    sharc_batch *b = s->batch;
    size_t T = (size_t)s->T, out = 0, kept = 0;
    float *audio = b->tensors[0].data;
    int32_t *lens = b->tensors[1].data;
    int64_t narrow = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!s->skipped[i]) {
            kept++;
            if (lens[i] > narrow)
                narrow = lens[i];
        }
    size_t T2 = (size_t)narrow; /* <= T: rows are at most T long */
    float *dur = b->tensors[2].data;
    int32_t *offs[4];
    uint8_t *bytes[4];
    int32_t at[4] = {0, 0, 0, 0};
    for (int c = 0; c < 4; c++) {
        offs[c] = b->tensors[3 + 2 * c].data;
        bytes[c] = b->tensors[4 + 2 * c].data;
    }
    for (size_t i = 0; i < s->n; i++) {
        int32_t start[4], end[4];
        for (int c = 0; c < 4; c++) {
            start[c] = offs[c][i];
            end[c] = offs[c][i + 1];
        }
        if (s->skipped[i])
            continue;
        if (out != i || T2 != T) {
            /* Forward, row by row: row `out` at stride T2 ends before row i at stride T. */
            memmove(audio + out * T2, audio + i * T, T2 * sizeof(float));
            lens[out] = lens[i];
            dur[out] = dur[i];
        }
        for (int c = 0; c < 4; c++) {
            memmove(bytes[c] + at[c], bytes[c] + start[c], (size_t)(end[c] - start[c]));
            offs[c][out] = at[c];
            at[c] += end[c] - start[c];
        }
        out++;
    }
    for (int c = 0; c < 4; c++) {
        offs[c][out] = at[c];
        b->tensors[4 + 2 * c].shape[0] = at[c];
        b->tensors[4 + 2 * c].nbytes = (size_t)at[c];
        b->tensors[3 + 2 * c].shape[0] = (int64_t)out + 1;
        b->tensors[3 + 2 * c].nbytes = (out + 1) * sizeof(int32_t);
    }
    b->tensors[0].shape[0] = (int64_t)out;
    b->tensors[0].shape[1] = (int64_t)T2;
    b->tensors[0].nbytes = out * T2 * sizeof(float);
    for (int t = 1; t < 3; t++) {
        b->tensors[t].shape[0] = (int64_t)out;
        b->tensors[t].nbytes = out * 4;
    }
    s->T = (int64_t)T2;
    return s->rate > 0 ? (double)kept * (double)(T - T2) / (double)s->rate : 0;
}

/* The slot's draft becomes the state of the last batch handed out, and the slot takes the
 * previous one's buffer to write a later draft into: a swap, not a copy of the draft (tens
 * of kB with a large buffer, written on the planner's core) per batch. A draft that could not
 * be written (len 0) makes state_save report ENOMEM. *counters receives the state's. */
static void take_state(sharc__pipeline *p, slot *s, sharc_reader_stats *counters)
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
    if (p->last_state_len)
        sharc__resume_take_back(p->last_state, p->last_state_len, &p->consumed_skips, counters);
}

int sharc__pipeline_next(sharc_reader *r, sharc_batch **out)
{
    sharc__pipeline *p = r->pipe;
    *out = NULL;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t held = sharc__batch_pool_held(p->pool);
        if (held > p->inflight && held - p->inflight >= (size_t)r->s.max_held_batches) {
            pthread_mutex_unlock(&p->mu);
            return sharc__set_error(&r->ctx, SHARC_ERR_BACKPRESSURE,
                                    "the caller holds %zu batches (max_held_batches %d); "
                                    "release some first",
                                    held - p->inflight, r->s.max_held_batches);
        }
        slot *s = &p->slots[p->consumed % p->n_slots];
        while (!(p->consumed < p->planned && s->ready && s->pending == 0))
            pthread_cond_wait(&p->batch_done, &p->mu);
        pthread_mutex_unlock(&p->mu);

        int rc = s->end ? SHARC_END : s->rc;
        sharc_batch *b = s->batch;
        double narrowed = 0; /* padded seconds that compacting took from the kept rows */
        if (rc == 0 && s->n_skipped) {
            narrowed = compact(s);
            s->skips.padded_seconds += narrowed;
        }
        for (size_t i = 0; i < s->n; i++)
            sharc__bcut_free(&p->bufs, s->cuts[i]);
        int empty = rc == 0 && b->tensors[0].shape[0] == 0;
        if (rc == 0)
            add_skips(&p->consumed_skips, &s->skips);
        sharc_reader_stats handed = p->handed_stats; /* written by this thread only */
        if (rc == 0 && !empty)
            take_state(p, s, &handed);
        if (rc != 0)
            snprintf(r->ctx.error, sizeof r->ctx.error, "%s", s->message);

        pthread_mutex_lock(&p->mu);
        p->worker_stats.padded_seconds += narrowed;
        uint64_t step = 0;
        if (rc == 0 && !empty) {
            p->handed_stats = handed;
            step = p->step_base + p->handed++;
        }
        if (rc == SHARC_END || (rc < 0 && s->fail_row == SIZE_MAX)) {
            /* The planner stopped there: every batch it planned has been handed out. */
            p->caller_done = 1;
        } else if (rc < 0) {
            /* A row failed to decode: later batches may be planned and decoded already, so
             * the counters are those this batch's state holds (what was read to plan it),
             * with the cuts of the batches handed out and this batch's problems. */
            sharc_reader_stats at = handed;
            if (sharc__resume_draft_stats(s->state, s->state_len, &p->consumed_skips, &at) == 0) {
                at.cuts = handed.cuts;
                at.audio_seconds = handed.audio_seconds;
                at.padded_seconds = handed.padded_seconds;
            }
            for (int k = 0; k < SHARC_PROBLEM_COUNT; k++)
                at.problems[k] += s->skips.problems[k];
            at.skipped_cuts += s->skips.skipped_cuts;
            if (s->fail_kind < SHARC_PROBLEM_COUNT)
                at.problems[s->fail_kind]++;
            p->handed_stats = at;
        }
        if (rc < 0 && s->fail_row != SIZE_MAX && s->fail_kind < SHARC_PROBLEM_COUNT) {
            p->worker_stats.problems[s->fail_kind]++;
            sharc__log(&r->ctx, SHARC_LOG_ERROR, "%s", s->message);
            report(p, rc, s->fail_kind, s->fail_path, s->fail_member, s->fail_cut, s->message);
        }
        s->batch = NULL;
        s->n = 0;
        if (b)
            p->inflight--;
        if (rc == 0) {
            s->ready = 0;
            p->consumed++;
            pthread_cond_signal(&p->slot_free);
        }
        pthread_mutex_unlock(&p->mu);
        if (rc != 0) {
            if (b)
                sharc_batch_release(b);
            if (rc != SHARC_END)
                r->batch_failed = rc; /* logged where it happened */
            return rc;
        }
        if (empty) {
            sharc_batch_release(b);
            continue;
        }
        b->step = step;
        *out = b;
        return 0;
    }
}

/* Until the end or the planner's error, the counters of the last batch handed out (and the
 * problems of a batch that failed to decode): the same at that step whatever the threads
 * and their timing, and what a state saved now restores. Then the totals. Stage seconds
 * are always the time spent so far. */
void sharc__pipeline_stats(const sharc_reader *r, sharc_reader_stats *out)
{
    sharc__pipeline *p = r->pipe;
    pthread_mutex_lock(&p->mu);
    if (p->caller_done) {
        *out = p->planner_stats;
        sharc__stats_take_back(out, &p->worker_stats);
    } else {
        *out = p->handed_stats;
    }
    memcpy(out->stage_seconds, p->planner_stats.stage_seconds, sizeof out->stage_seconds);
    out->stage_seconds[SHARC_STAGE_DECODE] += p->worker_stats.stage_seconds[SHARC_STAGE_DECODE];
    out->batches = p->step_base + p->handed;
    pthread_mutex_unlock(&p->mu);
}

const double *sharc__pipeline_bins(const sharc_reader *r, size_t *n)
{
    const sharc__pipeline *p = r->pipe;
    *n = 0;
    /* The planner estimates them before it plans the first batch and never changes them. */
    return p->handed > 0 ? sharc__sampler_bins(p->sampler, n) : NULL;
}

int sharc__pipeline_state_save(sharc_reader *r, void *buf, size_t cap, size_t *size)
{
    sharc__pipeline *p = r->pipe;
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

/* ---- restore --------------------------------------------------------------------------- */

typedef struct preload_job {
    sharc__pipeline *p;
    const uint64_t *keys; ///< the needed keys of one (epoch, shard), sorted
    size_t n, found;
} preload_job;

static int preload_cut(void *cookie, sharc__rawcut *c)
{
    preload_job *j = cookie;
    sharc__pipeline *p = j->p;
    uint64_t key = 0;
    int rc = sharc__cut_key(&p->r->ctx, c, p->r->ds.n_shards, &key);
    if (rc < 0)
        return rc;
    if (!bsearch(&key, j->keys, j->n, sizeof key, cmp_u64))
        return 0;
    bcut *b;
    if ((rc = sharc__bcut_from_raw(&p->bufs, c, p->r->ds.n_shards, &b)) < 0)
        return rc;
    p->preloaded[p->n_preloaded++] = b;
    return ++j->found == j->n ? 1 : 0;
}

/* Re-read the cuts the saved sampler held: only the shards they are in. */
static int preload(sharc__pipeline *p, const uint64_t *keys, size_t n)
{
    sharc_reader *r = p->r;
    p->preloaded = sharc__calloc(&r->ctx, n ? n : 1, sizeof *p->preloaded);
    p->taken = sharc__calloc(&r->ctx, n ? n : 1, 1);
    if (!p->preloaded || !p->taken)
        return SHARC_ERR(ENOMEM);
    size_t i = 0;
    while (i < n) {
        uint64_t visit = sharc__key_visit(keys[i]); /* epoch and shard */
        size_t j = i;
        while (j < n && sharc__key_visit(keys[j]) == visit)
            j++;
        preload_job job = {p, keys + i, j - i, 0};
        uint32_t shard = sharc__key_shard(keys[i], r->ds.n_shards);
        r->quiet = 1;
        int rc = sharc__reader_scan_shard(r, sharc__key_epoch(keys[i], r->ds.n_shards), shard,
                                          preload_cut, &job);
        r->quiet = 0;
        if (rc < 0)
            return rc;
        if (job.found != job.n)
            return sharc__fail(&r->ctx, SHARC_ERR_STATE,
                               "%zu cuts the state holds were not found again in shard %llu: "
                               "the data changed",
                               job.n - job.found, (unsigned long long)shard);
        i = j;
    }
    qsort(p->preloaded, p->n_preloaded, sizeof *p->preloaded, cmp_bcut_key);
    return 0;
}

static int restore(sharc__pipeline *p, const sharc__sampler_settings *ss,
                   const sharc__sampler_source *src)
{
    sharc_reader *r = p->r;
    sharc__resume st;
    int rc = sharc__resume_parse(r, r->resume, r->s.resume_state_size, &st);
    if (rc < 0)
        return rc;
    p->step_base = st.next_step;
    r->stats = st.stats;
    p->handed_stats = st.stats;
    uint64_t *keys = sharc__malloc(&r->ctx, (st.n_keys ? st.n_keys : 1) * sizeof *keys);
    if (!keys)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < st.n_keys; i++)
        keys[i] = sharc__resume_key(&st, i);
    rc = preload(p, keys, st.n_keys);
    sharc__free(&r->ctx, keys);
    if (rc == 0)
        rc = sharc__reader_seek(r, &st.pos);
    if (rc == 0)
        rc = sharc__sampler_restore(&r->ctx, ss, src, st.sampler, st.sampler_len, &p->sampler);
    for (size_t i = 0; i < p->n_preloaded; i++)
        if (!p->taken[i])
            sharc__bcut_free(&p->bufs, p->preloaded[i]);
    sharc__free(&r->ctx, p->preloaded);
    sharc__free(&r->ctx, p->taken);
    p->preloaded = NULL;
    p->taken = NULL;
    p->n_preloaded = 0;
    return rc;
}

/* ---- start and stop ----------------------------------------------------------------- */

static void sampler_settings(const sharc_reader *r, sharc__sampler_settings *o)
{
    const sharc_sampler_settings *s = &r->s.sampler;
    sharc__sampler_default_settings(o);
    o->max_duration = s->max_duration;
    o->max_cuts = s->max_cuts;
    o->quadratic_duration = s->quadratic_duration;
    o->num_buckets = s->num_buckets;
    o->bins = s->bins;
    o->n_bins = s->n_bins;
    o->bucket_batch_size = s->bucket_batch_size;
    o->num_cuts_for_bins_estimate = s->num_cuts_for_bins_estimate;
    o->buffer_size = s->buffer_size;
    o->max_buffer_bytes = s->max_buffer_bytes;
    o->shuffle = s->shuffle;
    o->drop_last = s->drop_last;
    o->seed = r->s.seed ^ 0x5a17c0de5a17c0deull; /* independent of the shard order's stream */
    o->sync_buckets = s->sync_buckets;
    o->world_size = s->world_size;
    o->min_item_duration = s->min_duration;
    o->max_item_duration = s->max_cut_duration;
}

int sharc__pipeline_check_settings(sharc_reader *r)
{
    sharc__sampler_settings o;
    sampler_settings(r, &o);
    /* A batch size is needed by batches only (the defaults leave it to be chosen): when none
     * is given, that is reported at the first batch, and the rest is checked here. */
    if (o.max_duration == 0 && o.max_cuts == 0 && !o.bucket_batch_size)
        o.max_cuts = 1;
    return sharc__sampler_check_settings(&r->ctx, &o);
}

void sharc__pipeline_stop(sharc_reader *r)
{
    sharc__pipeline *p = r->pipe;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->slot_free);
    pthread_cond_broadcast(&p->rows_ready);
    pthread_cond_broadcast(&p->batch_done);
    pthread_mutex_unlock(&p->mu);
    if (p->planner_started)
        pthread_join(p->planner, NULL);
    sharc__reader_readahead_stop(r);
    /* Either array may be missing when starting ran out of memory. */
    for (int i = 0; p->workers && i < p->n_workers; i++)
        if (p->workers[i].started)
            pthread_join(p->workers[i].thread, NULL);
    for (size_t k = 0; p->slots && k < p->n_slots; k++) {
        slot *s = &p->slots[k];
        if (s->batch)
            sharc_batch_release(s->batch);
        for (size_t i = 0; i < s->n; i++)
            sharc__bcut_free(&p->bufs, s->cuts[i]);
        sharc__free(&r->ctx, s->cuts);
        sharc__free(&r->ctx, s->skipped);
        sharc__free(&r->ctx, s->state);
    }
    sharc__sampler_close(&p->sampler);
    sharc__batch_pool_destroy(&p->pool);
    for (int i = 0; p->workers && i < p->n_workers; i++) {
        sharc__buf_free(&r->ctx, &p->workers[i].err.member);
        sharc__buf_free(&r->ctx, &p->workers[i].err.cut_id);
        sharc__fetcher_free(&p->workers[i].fetch, &r->ctx);
    }
    sharc__free(&r->ctx, p->workers);
    sharc__free(&r->ctx, p->slots);
    sharc__keyset_free(&r->ctx, &p->held);
    sharc__free(&r->ctx, p->last_state);
    r->sopts.pool = NULL;
    r->sopts.lazy_audio = 0;
    sharc__bufpool_destroy(&p->bufs);
    r->report_lock = NULL;
    pthread_cond_destroy(&p->slot_free);
    pthread_cond_destroy(&p->rows_ready);
    pthread_cond_destroy(&p->batch_done);
    pthread_mutex_destroy(&p->mu);
    sharc__free(&r->ctx, p);
    r->pipe = NULL;
}

static int online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int sharc__pipeline_start(sharc_reader *r)
{
    sharc__pipeline *p = sharc__calloc(&r->ctx, 1, sizeof *p);
    if (!p)
        return SHARC_ERR(ENOMEM);
    p->r = r;
    r->pipe = p;
    pthread_mutex_init(&p->mu, NULL);
    sharc__bufpool_init(&p->bufs, &r->ctx);
    r->sopts.pool = &p->bufs;
    r->sopts.lazy_audio = 1;
    pthread_cond_init(&p->slot_free, NULL);
    pthread_cond_init(&p->rows_ready, NULL);
    pthread_cond_init(&p->batch_done, NULL);
    r->report_lock = &p->mu;
    p->n_workers = r->s.n_threads > 0 ? r->s.n_threads : online_cores();
    /* Workers idle at batch boundaries unless the planner is well ahead: by default keep
     * two batches per worker in flight (measured: 2 workers on WAV went from 45k to 63k
     * s of audio/s between prefetch 2 and 6). */
    p->n_slots =
        (size_t)(r->s.prefetch > 0 ? r->s.prefetch
                                   : (p->n_workers * 2 + 2 < 16 ? p->n_workers * 2 + 2 : 16));
    p->slots = sharc__calloc(&r->ctx, p->n_slots, sizeof *p->slots);
    p->workers = sharc__calloc(&r->ctx, (size_t)p->n_workers, sizeof *p->workers);
    int rc = (p->slots && p->workers) ? 0 : SHARC_ERR(ENOMEM);
    for (int i = 0; p->workers && i < p->n_workers; i++)
        sharc__fetcher_init(&p->workers[i].fetch, p->n_workers);
    /* Shards are read ahead when there are threads to spare: the walk alone would cap
     * the pipeline at one core's worth of reading (measured: WAV with 2 threads). */
    /* Audio of plain tars is left in the file and read by the decode threads, so reading
     * a shard is only headers and metadata: lanes then cost more than they give (measured:
     * WAV and FLAC with 2 threads). The first shard stands for the dataset. */
    int n_lanes = p->n_workers;
    if (r->ds.n_shards > 0 && sharc__tar_file_is_plain(r->ds.shards[0].audio_path))
        n_lanes = p->n_workers / PLAIN_WORKERS_PER_LANE;
    if (n_lanes > SHARC__MAX_LANES)
        n_lanes = SHARC__MAX_LANES;
    /* Remote shards (io/remote.h) are read ahead even with one thread: a lane keeps the next
     * shard's transfer in flight, which hides its latency, and waiting costs no core. */
    const int remote = r->ds.n_shards > 0 && sharc__is_remote(r->ds.shards[0].audio_path);
    if ((p->n_workers < 2 && !remote) || r->s.read_ahead_bytes == 0)
        n_lanes = 0;
    else if (remote && n_lanes < 1)
        n_lanes = 1;
    if (rc == 0 && n_lanes > 0)
        rc = sharc__reader_readahead_start(r, n_lanes, r->s.read_ahead_bytes / (uint64_t)n_lanes);
    if (rc == 0)
        rc = sharc__batch_pool_create(&p->pool, &r->ctx, p->n_slots + (size_t)r->s.max_held_batches,
                                      NULL);
    sharc__sampler_settings ss;
    sampler_settings(r, &ss);
    sharc__sampler_source src = {p,           pull_item,     release_item,
                                 reload_item, describe_item, peek_durations};
    if (rc == 0)
        rc = r->resume ? restore(p, &ss, &src)
                       : sharc__sampler_open(&r->ctx, &ss, &src, &p->sampler);
    if (rc < 0)
        goto fail;
    publish_stats(p);
    for (int i = 0; i < p->n_workers; i++) {
        worker *w = &p->workers[i];
        w->p = p;
        sharc__ctx_init(&w->ctx, &r->ctx.alloc, &r->ctx.log);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            rc = sharc__fail(&r->ctx, SHARC_ERR(EAGAIN), "cannot start decode thread %d", i);
            goto fail;
        }
        w->started = 1;
        char name[16];
        snprintf(name, sizeof name, "sharc-decode%d", i % 100);
        (void)pthread_setname_np(w->thread, name); /* for top -H, perf, gdb */
    }
    if (pthread_create(&p->planner, NULL, planner_main, p) != 0) {
        rc = sharc__fail(&r->ctx, SHARC_ERR(EAGAIN), "cannot start the planner thread");
        goto fail;
    }
    p->planner_started = 1;
    (void)pthread_setname_np(p->planner, "sharc-planner");
    return 0;
fail:
    if (r->ctx.error[0] == 0)
        sharc__set_error(&r->ctx, rc, "cannot start the batch pipeline: %s", sharc_strerror(rc));
    sharc__pipeline_stop(r);
    return rc;
}

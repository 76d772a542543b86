/*
 * The noise stream: a cut reader over the noise dataset, read ahead by a thread of its own
 * into a queue of at most noise_max_bytes of decoded noise, and the window at the queue's
 * front from which the planner gives each cut that draws noise a noise cut.
 */
#include "reader/noise.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "base/le.h"

/* The smallest bound used, whatever noise_max_bytes says: the window's rules need room for
 * a few samples. */
#define MIN_BOUND 64
/* Bytes of a position in a resume state: first, used and six of the walk's position. */
#define STATE_FIELDS 8

typedef struct entry {
    sharc__noise_cut *cut;
    sharc__walk_pos before; ///< the reader's position before it: a seek there reads it next
} entry;

struct sharc__noise_stream {
    sharc__ctx *ctx;
    sharc_reader *r; ///< read by the read-ahead thread alone once it runs (its settings and
                     ///< shards, fixed since its open, are hashed by any)
    sharc__noise_hooks hooks;
    uint64_t seed;         ///< slot 0's noise seed: the reader's seed and "noise"
    uint64_t hash;         ///< sharc__noise_source.hash, of this slot
    uint64_t bound;        ///< bytes of decoded noise queued at most
    uint64_t window_bytes; ///< bytes of the window at most (a first cut always fits)
    int64_t cap_samples;   ///< samples kept of a longer noise cut
    pthread_mutex_t mu;
    pthread_cond_t more; ///< planner: a cut was queued, or the thread failed
    pthread_cond_t room; ///< thread: a cut left the queue (or stop)
    pthread_t thread;
    int started, stop;
    entry *q; ///< a ring of q_cap entries, q_n of them from q_head
    size_t q_cap, q_head, q_n;
    uint64_t queued_bytes, held_max;
    double busy_seconds;      ///< reading and decoding noise, waits for room not counted
    sharc__walk_pos next_pos; ///< the position after the last cut queued
    int rc;                   ///< the thread's error, 0 while none
    char error[SHARC__ERRLEN];
    /* The planner's side (under mu too, for the stats). */
    uint64_t first;      ///< index in the stream of the window's first cut (q[q_head])
    uint64_t used;       ///< samples given noise since it became first
    uint64_t last_index; ///< of the latest cut assigned, UINT64_MAX before any
};

static entry *at(sharc__noise_stream *ns, size_t i)
{
    return &ns->q[(ns->q_head + i) % ns->q_cap];
}

static uint64_t bytes_of(const sharc__noise_cut *c)
{
    return sharc__noise_cut_bytes(c->len);
}

/* Append to the queue (under mu). */
static int push(sharc__noise_stream *ns, sharc__noise_cut *c, const sharc__walk_pos *before)
{
    if (ns->q_n == ns->q_cap) {
        size_t cap = ns->q_cap ? ns->q_cap * 2 : 16;
        entry *q = sharc__malloc(ns->ctx, cap * sizeof *q);
        if (!q)
            return SHARC_ERR(ENOMEM);
        for (size_t i = 0; i < ns->q_n; i++)
            q[i] = *at(ns, i);
        sharc__free(ns->ctx, ns->q);
        ns->q = q;
        ns->q_cap = cap;
        ns->q_head = 0;
    }
    *at(ns, ns->q_n++) = (entry){c, *before};
    ns->queued_bytes += bytes_of(c);
    if (ns->queued_bytes > ns->held_max)
        ns->held_max = ns->queued_bytes;
    return 0;
}

/* Drop the window's first cut (under mu). */
static void pop(sharc__noise_stream *ns)
{
    entry *e = at(ns, 0);
    ns->queued_bytes -= bytes_of(e->cut);
    sharc__noise_cut_unref(e->cut);
    ns->q_head = (ns->q_head + 1) % ns->q_cap;
    ns->q_n--;
    ns->first++;
    pthread_cond_signal(&ns->room);
}

/* A noise cut made of the reader's cut `c` (num_samples > 0), cut to cap_samples. */
static sharc__noise_cut *copy_cut(sharc__noise_stream *ns, const sharc_cut *c)
{
    int64_t n = c->num_samples < ns->cap_samples ? c->num_samples : ns->cap_samples;
    sharc__noise_cut *nc = sharc__noise_cut_new(ns->ctx, n);
    if (nc) {
        memcpy(nc->samples, c->samples, (size_t)n * sizeof(float));
        sharc__noise_cut_seal(nc);
    }
    return nc;
}

static void *read_ahead(void *arg)
{
    sharc__noise_stream *ns = arg;
    double busy = 0;
    for (;;) {
        const double t0 = sharc__now_s();
        const sharc_cut *c;
        int rc = sharc_reader_next(ns->r, &c);
        sharc__noise_cut *nc = NULL;
        if (rc == 0 && c->num_samples <= 0) {
            busy += sharc__now_s() - t0;
            continue;
        }
        if (rc == 0 && !(nc = copy_cut(ns, c)))
            rc = SHARC_ERR(ENOMEM);
        sharc__walk_pos after;
        ns->hooks.position(ns->r, &after);
        busy += sharc__now_s() - t0;
        pthread_mutex_lock(&ns->mu);
        ns->busy_seconds += busy;
        busy = 0;
        while (rc == 0 && !ns->stop && ns->queued_bytes > 0 &&
               (ns->queued_bytes + bytes_of(nc) > ns->bound || ns->q_n >= 2 * SHARC__NOISE_WINDOW))
            pthread_cond_wait(&ns->room, &ns->mu);
        if (rc == 0 && !ns->stop && (rc = push(ns, nc, &ns->next_pos)) == 0) {
            ns->next_pos = after;
            nc = NULL;
        }
        if (rc != 0 && !ns->stop) {
            ns->rc = rc == SHARC_END ? SHARC_ERR(EIO) : rc;
            snprintf(ns->error, sizeof ns->error, "noise: %s",
                     rc == SHARC_END           ? "the noise stream ended"
                     : rc == SHARC_ERR(ENOMEM) ? "out of memory"
                                               : sharc_reader_last_error(ns->r));
        }
        int done = rc != 0 || ns->stop;
        pthread_cond_signal(&ns->more);
        pthread_mutex_unlock(&ns->mu);
        sharc__noise_cut_unref(nc);
        if (done)
            return NULL;
    }
}

/* Wait (under mu) until the queue holds `n` cuts; the thread's error if it stopped first. */
static int wait_for(sharc__noise_stream *ns, sharc__ctx *ctx, size_t n)
{
    if (!ns->started) {
        if (pthread_create(&ns->thread, NULL, read_ahead, ns) != 0)
            return sharc__set_error(ctx, SHARC_ERR(EAGAIN), "noise: cannot start its thread");
        ns->started = 1;
        (void)pthread_setname_np(ns->thread, "sharc-noise");
    }
    while (ns->q_n < n) {
        if (ns->rc)
            return sharc__set_error(ctx, ns->rc, "%s", ns->error);
        pthread_cond_wait(&ns->more, &ns->mu);
    }
    return 0;
}

/* The cuts of the window: from the first, as many as fit window_bytes, SHARC__NOISE_WINDOW at
 * most (one at least); it is known once that many are queued or one that does not fit is,
 * which the read-ahead's limits (twice the window's) leave room for. */
static int window(sharc__noise_stream *ns, sharc__ctx *ctx, size_t *w)
{
    uint64_t sum = 0;
    size_t k = 0;
    for (;;) {
        for (; k < ns->q_n && k < SHARC__NOISE_WINDOW &&
               sum + bytes_of(at(ns, k)->cut) <= ns->window_bytes;
             k++)
            sum += bytes_of(at(ns, k)->cut);
        if (k < ns->q_n || k == SHARC__NOISE_WINDOW)
            break;
        int rc = wait_for(ns, ctx, k + 1);
        if (rc < 0)
            return rc;
    }
    *w = k ? k : 1;
    return 0;
}

static int assign(void *self, sharc__ctx *ctx, sharc__cut_cond *cond)
{
    sharc__noise_stream *ns = self;
    size_t w = 0;
    pthread_mutex_lock(&ns->mu);
    int rc = wait_for(ns, ctx, 1);
    if (rc == 0)
        rc = window(ns, ctx, &w);
    if (rc == 0) {
        const size_t k = (size_t)((cond->noise >> 1) % w);
        cond->noise_cut = sharc__noise_cut_ref(at(ns, k)->cut);
        ns->last_index = ns->first + k;
        ns->used += (uint64_t)cond->num_samples;
    }
    /* The window moves past its first cut once that has served its share: by one cut at
     * most per cut given noise, so that noise cuts far shorter than the cuts are not read
     * by the thousand for each. */
    if (rc == 0 && ns->used >= SHARC__NOISE_REUSE * (uint64_t)at(ns, 0)->cut->len) {
        ns->used = 0;
        pop(ns);
        rc = wait_for(ns, ctx, 1);
    }
    pthread_mutex_unlock(&ns->mu);
    return rc;
}

static size_t state_size(void *self)
{
    (void)self;
    return 8 * STATE_FIELDS;
}

static void state_write(void *self, uint8_t *out)
{
    sharc__noise_stream *ns = self;
    pthread_mutex_lock(&ns->mu);
    const sharc__walk_pos *p = ns->q_n ? &at(ns, 0)->before : &ns->next_pos;
    const uint64_t v[STATE_FIELDS] = {ns->first,
                                      ns->used,
                                      p->epoch,
                                      p->order_pos,
                                      p->shard_index,
                                      p->consumed,
                                      (uint64_t)p->shard_open,
                                      p->epoch_cuts};
    pthread_mutex_unlock(&ns->mu);
    for (size_t i = 0; i < STATE_FIELDS; i++)
        sharc__store_le64(out + 8 * i, v[i]);
}

static int restore(void *self, sharc__ctx *ctx, const uint8_t *in, size_t len)
{
    sharc__noise_stream *ns = self;
    uint64_t v[STATE_FIELDS];
    if (len != 8 * STATE_FIELDS || ns->started)
        return sharc__fail(ctx, SHARC_ERR_STATE,
                           "cannot resume: the state's noise position is "
                           "malformed");
    for (size_t i = 0; i < STATE_FIELDS; i++)
        v[i] = sharc__load_le64(in + 8 * i);
    const uint64_t huge = (uint64_t)1 << 62;
    if (v[0] > huge || v[2] > huge || v[4] > UINT32_MAX || v[6] > 1)
        return sharc__fail(ctx, SHARC_ERR_STATE,
                           "cannot resume: the state's noise position is out of range");
    sharc__walk_pos pos = {.epoch = v[2],
                           .order_pos = v[3],
                           .shard_index = (uint32_t)v[4],
                           .consumed = v[5],
                           .shard_open = (int)v[6],
                           .epoch_cuts = v[7]};
    while (ns->q_n)
        pop(ns);
    int rc = ns->hooks.seek(ns->r, &pos);
    if (rc < 0)
        return sharc__fail(ctx, SHARC_ERR_STATE,
                           "cannot resume: the state's noise position is not in the noise "
                           "dataset: %s",
                           sharc_reader_last_error(ns->r));
    ns->next_pos = pos;
    ns->first = v[0];
    ns->used = v[1];
    return 0;
}

/* The noise seed of data-parallel slot `dp_rank`: slot 0's is the noise seed itself, so that
 * a one-slot run and slot 0 of any number of slots stream the same noise. */
static uint64_t slot_seed(uint64_t seed, int dp_rank)
{
    return dp_rank == 0 ? seed : sharc__fnv1a_u64(seed, (uint64_t)dp_rank);
}

uint64_t sharc__noise_slot_hash(const sharc__noise_stream *ns, int dp_rank)
{
    /* The noise read depends on its dataset and reader settings, the window on the bound. */
    static const char revision[] = "noise-stream-1";
    uint64_t h = ns->hooks.state_hash(ns->r, slot_seed(ns->seed, dp_rank));
    h = sharc__fnv1a(h, revision, sizeof revision);
    return sharc__fnv1a_u64(h, ns->bound);
}

sharc__noise_source sharc__noise_source_of(sharc__noise_stream *ns)
{
    return (sharc__noise_source){ns, ns->hash, assign, state_size, state_write, restore};
}

void sharc__noise_stream_stats(sharc__noise_stream *ns, uint64_t *held_max, uint64_t *last_index)
{
    pthread_mutex_lock(&ns->mu);
    *held_max = ns->held_max;
    *last_index = ns->last_index;
    pthread_mutex_unlock(&ns->mu);
}

double sharc__noise_seconds(sharc__noise_stream *ns)
{
    pthread_mutex_lock(&ns->mu);
    const double s = ns->busy_seconds;
    pthread_mutex_unlock(&ns->mu);
    return s;
}

/* Read up to the first cut with audio and queue it; a whole epoch without one fails. */
static int first_cut(sharc__noise_stream *ns, const sharc_augment_settings *a)
{
    const double t0 = sharc__now_s();
    const sharc_cut *c;
    int rc;
    ns->hooks.position(ns->r, &ns->next_pos);
    while ((rc = sharc_reader_next(ns->r, &c)) == 0 && c->epoch == 0 && c->num_samples <= 0)
        ;
    if (rc < 0 && rc != SHARC_END)
        return sharc__fail(ns->ctx, rc, "noise: %s", sharc_reader_last_error(ns->r));
    if (rc == SHARC_END || c->epoch > 0)
        return sharc__fail(ns->ctx, SHARC_ERR(EINVAL), "noise: no audio in the noise paths (%s%s)",
                           a->noise[0], a->n_noise > 1 ? ", ..." : "");
    sharc__noise_cut *nc = copy_cut(ns, c);
    if (!nc)
        return SHARC_ERR(ENOMEM);
    sharc__walk_pos before = ns->next_pos;
    ns->hooks.position(ns->r, &ns->next_pos);
    if ((rc = push(ns, nc, &before)) < 0)
        sharc__noise_cut_unref(nc);
    ns->busy_seconds = sharc__now_s() - t0; /* before the thread starts: no lock needed */
    return rc;
}

int sharc__noise_open(sharc__noise_stream **out, sharc__ctx *ctx, const sharc_reader_settings *s,
                      const sharc__noise_hooks *hooks)
{
    const sharc_augment_settings *a = s->augment;
    *out = NULL;
    sharc__noise_stream *ns = sharc__calloc(ctx, 1, sizeof *ns);
    if (!ns)
        return SHARC_ERR(ENOMEM);
    ns->ctx = ctx;
    ns->hooks = *hooks;
    ns->bound = a->noise_max_bytes < MIN_BOUND ? MIN_BOUND : a->noise_max_bytes;
    ns->window_bytes = ns->bound / 2;
    ns->cap_samples = (int64_t)(ns->bound / (4 * sizeof(float)));
    ns->last_index = UINT64_MAX;
    pthread_mutex_init(&ns->mu, NULL);
    pthread_cond_init(&ns->more, NULL);
    pthread_cond_init(&ns->room, NULL);
    sharc_reader_settings rs;
    sharc_reader_default_settings(&rs);
    rs.paths = a->noise;
    rs.n_paths = a->n_noise;
    rs.epochs = 0; /* without end */
    rs.shuffle_shards = 1;
    static const char salt[] = "noise";
    ns->seed = sharc__fnv1a(sharc__fnv1a_u64(SHARC__FNV_OFFSET, s->seed), salt, sizeof salt);
    rs.seed = slot_seed(ns->seed, s->dp_rank);
    rs.sampling_rate = s->sampling_rate;
    rs.resample = 1;
    rs.channel = 0;
    rs.on_error = s->on_error; /* a bad noise cut or shard is skipped as the reader's are */
    rs.logger = s->logger;
    rs.allocator = s->allocator;
    rs.retries = s->retries;
    rs.timeout_ms = s->timeout_ms;
    int rc = sharc_reader_open(&ns->r, &rs);
    if (rc < 0) {
        sharc__fail(ctx, rc, "noise: cannot open the noise paths (%s%s)", a->noise[0],
                    a->n_noise > 1 ? ", ..." : "");
        goto fail;
    }
    if ((rc = first_cut(ns, a)) < 0)
        goto fail;
    ns->hash = sharc__noise_slot_hash(ns, s->dp_rank);
    *out = ns;
    return 0;
fail:
    sharc__noise_close(&ns);
    return rc;
}

void sharc__noise_close(sharc__noise_stream **pns)
{
    sharc__noise_stream *ns = *pns;
    if (!ns)
        return;
    pthread_mutex_lock(&ns->mu);
    ns->stop = 1;
    pthread_cond_broadcast(&ns->room);
    pthread_mutex_unlock(&ns->mu);
    if (ns->started)
        pthread_join(ns->thread, NULL);
    while (ns->q_n)
        pop(ns);
    sharc_reader_close(&ns->r);
    sharc__free(ns->ctx, ns->q);
    pthread_cond_destroy(&ns->more);
    pthread_cond_destroy(&ns->room);
    pthread_mutex_destroy(&ns->mu);
    sharc__free(ns->ctx, ns);
    *pns = NULL;
}

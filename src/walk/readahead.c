#include "walk/readahead.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Entries a lane may queue, whatever their size (the byte budget usually stops it first). */
#define QUEUE_CAP 64

enum { LANE_FREE, LANE_REQUESTED, LANE_TAKEN };

typedef struct entry {
    int rc;
    int is_open; ///< the result of opening the stream, not of reading a cut
    sharc__rawcut raw;
    sharc__stream_error err;
    char message[SHARC__ERRLEN];
    double read_s, io_s;
    uint64_t bytes;
} entry;

struct sharc__lane {
    sharc__readahead *ra;
    pthread_t thread;
    int started;
    sharc__ctx ctx;      ///< the lane's own error text and read() time
    pthread_cond_t work; ///< the lane waits here for a shard or room in its queue
    pthread_cond_t data; ///< the walk waits here for an entry
    /* Under ra->mu. The walk changes state and gen; the lane fills the queue. */
    int state;
    uint32_t shard;
    uint64_t tag, seq;
    uint64_t gen; ///< bumped at every request and release: the lane drops older work
    int finished; ///< the shard's last entry is queued
    entry q[QUEUE_CAP];
    size_t head, count;
    uint64_t bytes;
};

struct sharc__readahead {
    sharc__ctx *ctx;
    const sharc__stream_ops *ops;
    const sharc__dataset *ds;
    const sharc__stream_opts *opts;
    const sharc__tokenizer *tok; ///< tokenizes the cuts on the lanes, or NULL
    const char *language;        ///< every cut's language, or NULL: its own
    uint64_t lane_bytes;
    pthread_mutex_t mu;
    int stop;
    uint64_t next_seq;
    sharc__lane *lanes;
    int n_lanes;
};

static uint64_t entry_bytes(const sharc__rawcut *c)
{
    uint64_t n = c->audio.len + (c->audio_in_file ? c->audio_size : 0) + c->json.len;
    for (size_t i = 0; i < c->n_fields; i++)
        n += c->fields[i].data.len;
    return n;
}

static int has_room(const sharc__lane *l)
{
    return l->count < QUEUE_CAP && (l->count == 0 || l->bytes < l->ra->lane_bytes);
}

/* Empty the queue and drop whatever the lane is reading; entries keep their buffers. */
static void reset_lane(sharc__lane *l, int state)
{
    l->state = state;
    l->gen++;
    l->head = l->count = 0;
    l->bytes = 0;
    l->finished = 0;
    pthread_cond_signal(&l->work);
}

/* The cut's tokens, here rather than on the walk's thread; a failure is the walk's to
 * report (it tokenizes a cut without tokens again, and fails as it does). */
static void tokenize(sharc__lane *l, sharc__rawcut *c)
{
    const sharc__readahead *ra = l->ra;
    const char *lang = ra->language      ? ra->language
                       : c->has_language ? sharc__buf_str(&c->language)
                                         : NULL;
    c->has_tokens = sharc__tokenizer_encode(ra->tok, &l->ctx, sharc__buf_str(&c->text),
                                            c->has_text ? c->text.len : 0, lang, &c->tokens) == 0;
    l->ctx.error[0] = 0;
}

/* Produce one entry of shard `shard` into `e`: the open when `st` is not open, else the
 * next cut. Returns whether it is the shard's last entry. Runs without the lock. */
static int produce(sharc__lane *l, sharc__stream **st, uint32_t shard, entry *e)
{
    sharc__readahead *ra = l->ra;
    double t0 = sharc__now_s(), io0 = l->ctx.io_seconds;
    sharc__stream_error_reset(&e->err);
    l->ctx.error[0] = 0;
    e->is_open = *st == NULL;
    e->rc = e->is_open ? ra->ops->open(st, &l->ctx, &ra->ds->shards[shard], ra->opts, &e->err)
                       : ra->ops->next(*st, &e->raw, &e->err);
    e->read_s = sharc__now_s() - t0;
    e->io_s = l->ctx.io_seconds - io0;
    e->bytes = e->rc == 0 && !e->is_open ? entry_bytes(&e->raw) : 0;
    if (e->rc == 0 && !e->is_open && ra->tok)
        tokenize(l, &e->raw);
    if (e->rc < 0)
        memcpy(e->message, l->ctx.error, sizeof e->message);
    int last = e->rc == SHARC_END || (e->rc < 0 && (e->is_open || e->err.shard_fatal));
    if (last && *st)
        ra->ops->close(st);
    return last;
}

static void *lane_main(void *arg)
{
    sharc__lane *l = arg;
    sharc__readahead *ra = l->ra;
    sharc__stream *st = NULL;
    uint64_t gen = 0; /* the request `st` belongs to */
    pthread_mutex_lock(&ra->mu);
    for (;;) {
        while (!ra->stop && !(st && l->gen != gen) &&
               !(l->state != LANE_FREE && !l->finished && has_room(l)))
            pthread_cond_wait(&l->work, &ra->mu);
        if (ra->stop)
            break;
        if (st && l->gen != gen) { /* released or cancelled mid-shard */
            pthread_mutex_unlock(&ra->mu);
            ra->ops->close(&st);
            pthread_mutex_lock(&ra->mu);
            continue;
        }
        gen = l->gen;
        uint32_t shard = l->shard;
        entry *e = &l->q[(l->head + l->count) % QUEUE_CAP]; /* only this thread writes it */
        pthread_mutex_unlock(&ra->mu);
        int last = produce(l, &st, shard, e);
        pthread_mutex_lock(&ra->mu);
        if (l->gen != gen)
            continue; /* nobody wants it any more */
        l->count++;
        l->bytes += e->bytes;
        l->finished = last;
        pthread_cond_signal(&l->data);
    }
    pthread_mutex_unlock(&ra->mu);
    if (st)
        ra->ops->close(&st);
    return NULL;
}

void sharc__readahead_destroy(sharc__readahead **rap)
{
    sharc__readahead *ra = *rap;
    if (!ra)
        return;
    pthread_mutex_lock(&ra->mu);
    ra->stop = 1;
    for (int i = 0; i < ra->n_lanes; i++)
        pthread_cond_signal(&ra->lanes[i].work);
    pthread_mutex_unlock(&ra->mu);
    for (int i = 0; i < ra->n_lanes; i++) {
        sharc__lane *l = &ra->lanes[i];
        if (l->started)
            pthread_join(l->thread, NULL);
        for (size_t k = 0; k < QUEUE_CAP; k++) {
            sharc__rawcut_free(ra->ctx, &l->q[k].raw);
            sharc__buf_free(ra->ctx, &l->q[k].err.member);
            sharc__buf_free(ra->ctx, &l->q[k].err.cut_id);
        }
        pthread_cond_destroy(&l->work);
        pthread_cond_destroy(&l->data);
    }
    pthread_mutex_destroy(&ra->mu);
    sharc__free(ra->ctx, ra->lanes);
    sharc__free(ra->ctx, ra);
    *rap = NULL;
}

int sharc__readahead_create(sharc__readahead **out, sharc__ctx *ctx, const sharc__stream_ops *ops,
                            const sharc__dataset *ds, const sharc__stream_opts *opts, int n_lanes,
                            uint64_t lane_bytes, const sharc__tokenizer *tok, const char *language)
{
    *out = NULL;
    sharc__readahead *ra = sharc__calloc(ctx, 1, sizeof *ra);
    if (!ra)
        return SHARC_ERR(ENOMEM);
    ra->ctx = ctx;
    ra->ops = ops;
    ra->ds = ds;
    ra->opts = opts;
    ra->tok = tok;
    ra->language = language;
    ra->lane_bytes = lane_bytes;
    pthread_mutex_init(&ra->mu, NULL);
    ra->lanes = sharc__calloc(ctx, (size_t)n_lanes, sizeof *ra->lanes);
    if (!ra->lanes) {
        pthread_mutex_destroy(&ra->mu);
        sharc__free(ctx, ra);
        return SHARC_ERR(ENOMEM);
    }
    for (int i = 0; i < n_lanes; i++) {
        sharc__lane *l = &ra->lanes[i];
        l->ra = ra;
        sharc__ctx_init(&l->ctx, &ctx->alloc, &ctx->log);
        sharc__ctx_share_settings(&l->ctx, ctx);
        for (size_t k = 0; k < QUEUE_CAP; k++)
            l->q[k].raw.num_samples = -1;
        pthread_cond_init(&l->work, NULL);
        pthread_cond_init(&l->data, NULL);
        ra->n_lanes++;
        if (pthread_create(&l->thread, NULL, lane_main, l) != 0) {
            sharc__readahead_destroy(&ra);
            return sharc__fail(ctx, SHARC_ERR(EAGAIN), "cannot start read-ahead thread %d", i);
        }
        l->started = 1;
        char name[16];
        snprintf(name, sizeof name, "sharc-lane%d", i % 100);
        (void)pthread_setname_np(l->thread, name); /* for top -H, perf, gdb */
    }
    *out = ra;
    return 0;
}

int sharc__readahead_has_free_lane(const sharc__readahead *ra)
{
    for (int i = 0; i < ra->n_lanes; i++)
        if (ra->lanes[i].state == LANE_FREE)
            return 1;
    return 0;
}

void sharc__readahead_request(sharc__readahead *ra, uint32_t shard, uint64_t tag)
{
    pthread_mutex_lock(&ra->mu);
    for (int i = 0; i < ra->n_lanes; i++) {
        sharc__lane *l = &ra->lanes[i];
        if (l->state != LANE_FREE)
            continue;
        l->shard = shard;
        l->tag = tag;
        l->seq = ra->next_seq++;
        reset_lane(l, LANE_REQUESTED);
        break;
    }
    pthread_mutex_unlock(&ra->mu);
}

void sharc__readahead_cancel(sharc__readahead *ra)
{
    pthread_mutex_lock(&ra->mu);
    for (int i = 0; i < ra->n_lanes; i++)
        if (ra->lanes[i].state == LANE_REQUESTED)
            reset_lane(&ra->lanes[i], LANE_FREE);
    pthread_mutex_unlock(&ra->mu);
}

sharc__lane *sharc__readahead_take(sharc__readahead *ra, uint64_t tag)
{
    sharc__lane *oldest = NULL;
    for (int i = 0; i < ra->n_lanes; i++) {
        sharc__lane *l = &ra->lanes[i];
        if (l->state == LANE_REQUESTED && (!oldest || l->seq < oldest->seq))
            oldest = l;
    }
    if (!oldest || oldest->tag != tag) {
        sharc__readahead_cancel(ra);
        return NULL;
    }
    pthread_mutex_lock(&ra->mu);
    oldest->state = LANE_TAKEN;
    pthread_mutex_unlock(&ra->mu);
    return oldest;
}

static void swap_mem(void *a, void *b, void *tmp, size_t n)
{
    memcpy(tmp, a, n);
    memcpy(a, b, n);
    memcpy(b, tmp, n);
}

int sharc__readahead_next(sharc__lane *l, sharc__ctx *ctx, sharc__rawcut *c,
                          sharc__stream_error *err, double *read_s, double *io_s)
{
    sharc__readahead *ra = l->ra;
    pthread_mutex_lock(&ra->mu);
    while (l->count == 0 && !l->finished && l->state == LANE_TAKEN)
        pthread_cond_wait(&l->data, &ra->mu);
    if (l->count == 0) {
        pthread_mutex_unlock(&ra->mu);
        return sharc__set_error(ctx, SHARC_ERR_STATE,
                                "read-ahead: shard %u has no entry left (internal error)",
                                l->shard);
    }
    entry *e = &l->q[l->head];
    union {
        sharc__rawcut raw;
        sharc__stream_error err;
    } tmp;
    if (!e->is_open)
        swap_mem(c, &e->raw, &tmp, sizeof *c);
    swap_mem(err, &e->err, &tmp, sizeof *err);
    int rc = e->rc;
    if (rc < 0) {
        memcpy(ctx->error, e->message, sizeof ctx->error);
        ctx->error_logged = 0; /* the planner reports it (handle_problem) */
    }
    *read_s += e->read_s;
    *io_s += e->io_s;
    l->head = (l->head + 1) % QUEUE_CAP;
    l->count--;
    l->bytes -= e->bytes;
    pthread_cond_signal(&l->work);
    pthread_mutex_unlock(&ra->mu);
    return rc;
}

void sharc__readahead_release(sharc__readahead *ra, sharc__lane *l)
{
    pthread_mutex_lock(&ra->mu);
    reset_lane(l, LANE_FREE);
    pthread_mutex_unlock(&ra->mu);
}

#include "walk/mix_impl.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "base/rng.h"

/* A different shard order per source, from the reader's seed. */
static uint64_t source_seed(uint64_t seed, size_t i)
{
    return seed + (uint64_t)(i + 1) * UINT64_C(0x9E3779B97F4A7C15);
}

/* Weights that can be drawn from: each finite and not negative, and one above 0 at least,
 * since a mixture that cannot produce a cut would otherwise end at once, as if read. */
static int check_weights(const sharc__mix_config *c)
{
    double sum = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (!(c->weights[i] >= 0) || !isfinite(c->weights[i]))
            return sharc__set_error(c->ctx, SHARC_ERR_FORMAT,
                                    "%s: weight %g: a weight is a finite number, 0 or more",
                                    c->names[i], c->weights[i]);
        sum += c->weights[i];
    }
    if (!(sum > 0))
        return sharc__set_error(c->ctx, SHARC_ERR_FORMAT,
                                "the mixture cannot produce a cut: none of its %zu source%s has a "
                                "weight above 0",
                                c->n, c->n == 1 ? "" : "s");
    return 0;
}

int sharc__mix_open(sharc__mix **out, const sharc__mix_config *c)
{
    *out = NULL;
    int rc = check_weights(c);
    if (rc < 0)
        return rc;
    sharc__mix *m = sharc__calloc(c->ctx, 1, sizeof *m);
    if (!m)
        return SHARC_ERR(ENOMEM);
    m->ctx = c->ctx;
    m->stats = c->stats;
    m->n = c->n;
    m->max_open = c->max_open;
    m->n_tag_columns = c->n_tag_columns;
    m->tag_columns = c->tag_columns;
    m->tag_values = c->tag_values;
    m->src = sharc__calloc(c->ctx, c->n ? c->n : 1, sizeof *m->src);
    rc = m->src ? 0 : SHARC_ERR(ENOMEM);
    /* The draw's own stream, apart from the shard orders that the seed also drives. */
    m->seed = c->s->seed;
    sharc__rng_seed(&m->rng, c->s->seed ^ UINT64_C(0x6D69787475726521));
    for (size_t i = 0; rc == 0 && i < c->n; i++) {
        mix_src *x = &m->src[i];
        x->s = *c->s;
        x->s.seed = source_seed(c->s->seed, i);
        x->s.epochs = c->finite ? 1 : 0;
        x->offset = (uint32_t)m->n_shards;
        x->weight = c->weights[i];
        x->name = c->names[i];
        x->language = c->languages ? c->languages[i] : NULL;
        x->hash = c->hashes ? c->hashes[i] : 0;
        x->live = x->weight > 0;
        if (x->live)
            m->live_weight += x->weight;
        m->n_shards += c->ds[i]->n_shards;
        rc = sharc__walk_open(&x->walk, c->ctx, &x->s, c->ds[i], c->stats, c->fetch);
        if (rc == 0) {
            sharc__walk_set_name(x->walk, x->name);
            sharc__walk_set_tokens(x->walk, c->tokenizer, x->language);
        }
    }
    if (rc < 0) {
        sharc__mix_close(&m);
        return rc;
    }
    *out = m;
    return 0;
}

void sharc__mix_close(sharc__mix **mp)
{
    sharc__mix *m = *mp;
    if (!m)
        return;
    for (size_t i = 0; m->src && i < m->n; i++)
        sharc__walk_close(&m->src[i].walk);
    sharc__free(m->ctx, m->src);
    sharc__free(m->ctx, m);
    *mp = NULL;
}

size_t sharc__mix_source_of(const sharc__mix *m, uint32_t shard)
{
    size_t lo = 0, hi = m->n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->src[mid].offset <= shard)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

void sharc__mix_live_sum(sharc__mix *m)
{
    m->live_weight = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->src[i].live)
            m->live_weight += m->src[i].weight;
}

/* The next source, in proportion to the weights of those still in the draw. */
static size_t draw(sharc__mix *m)
{
    double u = sharc__rng_uniform(&m->rng) * m->live_weight;
    size_t pick = m->n;
    for (size_t i = 0; i < m->n; i++) {
        if (!m->src[i].live)
            continue;
        pick = i;
        if (u < m->src[i].weight)
            break;
        u -= m->src[i].weight;
    }
    return pick; /* rounding past the end: the last source in the draw */
}

/* Keep at most max_open sources with a shard open: close the least recently used one. */
static void bound_open(sharc__mix *m, size_t keep)
{
    while (m->max_open && m->n_open > m->max_open) {
        size_t lru = m->n;
        for (size_t i = 0; i < m->n; i++)
            if (i != keep && sharc__walk_has_open_shard(m->src[i].walk) &&
                (lru == m->n || m->src[i].last_used < m->src[lru].last_used))
                lru = i;
        if (lru == m->n)
            return;
        sharc__walk_suspend(m->src[lru].walk);
        m->n_open--;
    }
}

static int mix_pull(void *self)
{
    sharc__mix *m = self;
    for (;;) {
        if (m->live_weight <= 0)
            return SHARC_END;
        size_t i = draw(m);
        mix_src *x = &m->src[i];
        int was_open = sharc__walk_has_open_shard(x->walk);
        x->last_used = ++m->draws;
        int rc = sharc__walk_pull(x->walk);
        m->n_open += (size_t)sharc__walk_has_open_shard(x->walk) - (size_t)was_open;
        m->last = i;
        if (rc == SHARC_END) {
            /* Finite: the source is read; the draw goes on over the others. */
            x->live = 0;
            sharc__mix_live_sum(m);
            continue;
        }
        if (rc < 0)
            return rc; /* named by the walk */
        sharc__rawcut *c = sharc__walk_cut(x->walk);
        c->shard_index += x->offset;
        bound_open(m, i);
        return 0;
    }
}

static sharc__rawcut *mix_cut(void *self)
{
    sharc__mix *m = self;
    return sharc__walk_cut(m->src[m->last].walk);
}

static int mix_problem(void *self, int rc)
{
    sharc__mix *m = self;
    return sharc__walk_problem(m->src[m->last].walk, rc);
}

static sharc__stream_error *mix_error(void *self)
{
    sharc__mix *m = self;
    return sharc__walk_error(m->src[m->last].walk);
}

static void mix_uncount_cut(void *self)
{
    sharc__mix *m = self;
    sharc__walk_uncount_cut(m->src[m->last].walk);
}

/*
 * Pull ahead quietly and go back: the draw, the counters and every source that was pulled
 * from (the others did not move).
 */
static int mix_peek(void *self, int (*visit)(void *cookie, double duration), void *cookie)
{
    sharc__mix *m = self;
    const sharc__rng rng = m->rng;
    const uint64_t draws = m->draws;
    const double live_weight = m->live_weight;
    const size_t last = m->last;
    const sharc_reader_stats stats = *m->stats;
    sharc__walk_pos *at = sharc__malloc(m->ctx, m->n * sizeof *at);
    uint64_t *used = sharc__malloc(m->ctx, m->n * sizeof *used);
    uint8_t *live = sharc__malloc(m->ctx, m->n);
    if (!at || !used || !live) {
        sharc__free(m->ctx, at);
        sharc__free(m->ctx, used);
        sharc__free(m->ctx, live);
        return SHARC_ERR(ENOMEM);
    }
    for (size_t i = 0; i < m->n; i++) {
        at[i] = *sharc__walk_position(m->src[i].walk);
        used[i] = m->src[i].last_used;
        live[i] = (uint8_t)m->src[i].live;
        sharc__walk_set_quiet(m->src[i].walk, 1);
    }
    int rc;
    while ((rc = mix_pull(m)) == 0) {
        int v = visit(cookie, sharc__walk_cut(m->src[m->last].walk)->duration);
        if (v == SHARC__WALK_FILTERED)
            mix_uncount_cut(m);
        if (v == SHARC__WALK_STOP)
            break;
    }
    int back = 0;
    for (size_t i = 0; i < m->n; i++) {
        mix_src *x = &m->src[i];
        sharc__walk_set_quiet(x->walk, 0);
        if (x->last_used == used[i])
            continue; /* not pulled from while peeking */
        int was_open = sharc__walk_has_open_shard(x->walk);
        int r = sharc__walk_rewind(x->walk, &at[i]);
        if (r < 0 && back == 0)
            back = r;
        m->n_open += (size_t)sharc__walk_has_open_shard(x->walk) - (size_t)was_open;
        x->last_used = used[i];
        x->live = live[i];
    }
    m->rng = rng;
    m->draws = draws;
    m->live_weight = live_weight;
    m->last = last;
    *m->stats = stats;
    bound_open(m, m->n);
    sharc__free(m->ctx, at);
    sharc__free(m->ctx, used);
    sharc__free(m->ctx, live);
    if (rc == SHARC_ERR(ENOMEM))
        return rc;
    m->ctx->error[0] = 0;
    return back;
}

typedef struct scan_job {
    uint32_t offset;
    int (*cb)(void *cookie, sharc__rawcut *c);
    void *cookie;
} scan_job;

static int scan_one(void *cookie, sharc__rawcut *c)
{
    const scan_job *j = cookie;
    c->shard_index += j->offset;
    return j->cb(j->cookie, c);
}

static int mix_scan_shard(void *self, uint64_t epoch, uint32_t shard,
                          int (*cb)(void *cookie, sharc__rawcut *c), void *cookie)
{
    sharc__mix *m = self;
    if (shard >= m->n_shards)
        return sharc__fail(m->ctx, SHARC_ERR_STATE, "state names shard %u of %zu", shard,
                           m->n_shards);
    mix_src *x = &m->src[sharc__mix_source_of(m, shard)];
    scan_job j = {x->offset, cb, cookie};
    return sharc__walk_scan_shard(x->walk, epoch, shard - x->offset, scan_one, &j);
}

static void mix_lend_audio(void *self)
{
    sharc__mix *m = self;
    for (size_t i = 0; i < m->n; i++)
        sharc__walk_lend_audio(m->src[i].walk);
}

static void mix_batch_mode(void *self, sharc__bufpool *pool, pthread_mutex_t *report_lock)
{
    sharc__mix *m = self;
    for (size_t i = 0; i < m->n; i++)
        sharc__walk_batch_mode(m->src[i].walk, pool, report_lock);
}

/* Read-ahead lanes read the next shards of one plan; a mixture's next shard depends on the
 * draw, so its sources are read on the planner's thread. */
static int mix_readahead_start(void *self, int n_lanes, uint64_t lane_bytes)
{
    (void)self;
    (void)n_lanes;
    (void)lane_bytes;
    return 0;
}

static void mix_readahead_stop(void *self)
{
    (void)self;
}

static double mix_read_seconds(const void *self)
{
    const sharc__mix *m = self;
    double t = 0;
    for (size_t i = 0; i < m->n; i++)
        t += sharc__walk_read_seconds(m->src[i].walk);
    return t;
}

const sharc_reader_settings *sharc__mix_source_settings(const sharc__mix *m, size_t i)
{
    return &m->src[i].s;
}

const sharc__dataset *sharc__mix_source_dataset(const sharc__mix *m, size_t i)
{
    return sharc__walk_dataset(m->src[i].walk);
}

const char *sharc__mix_source_name(const sharc__mix *m, size_t i)
{
    return m->src[i].name;
}

size_t sharc__mix_n_sources(const sharc__mix *m)
{
    return m->n;
}

static size_t mix_n_sources(const void *self)
{
    return ((const sharc__mix *)self)->n;
}

static size_t mix_source_of(const void *self, uint32_t shard)
{
    return sharc__mix_source_of(self, shard);
}

static const char *mix_source_name(const void *self, size_t source)
{
    return ((const sharc__mix *)self)->src[source].name;
}

static size_t mix_tag_columns(const void *self, const char *const **names)
{
    const sharc__mix *m = self;
    *names = m->tag_columns;
    return m->n_tag_columns;
}

static const char *const *mix_cut_tags(const void *self, uint32_t shard)
{
    const sharc__mix *m = self;
    return m->n_tag_columns ? m->tag_values + sharc__mix_source_of(m, shard) * m->n_tag_columns
                            : NULL;
}

static const sharc__cutsource_ops mix_ops = {
    .pull = mix_pull,
    .cut = mix_cut,
    .problem = mix_problem,
    .error = mix_error,
    .uncount_cut = mix_uncount_cut,
    .peek = mix_peek,
    .scan_shard = mix_scan_shard,
    .lend_audio = mix_lend_audio,
    .batch_mode = mix_batch_mode,
    .readahead_start = mix_readahead_start,
    .readahead_stop = mix_readahead_stop,
    .read_seconds = mix_read_seconds,
    .state_size = sharc__mix_state_size,
    .state_write = sharc__mix_state_write,
    .state_restore = sharc__mix_state_restore,
    .n_sources = mix_n_sources,
    .source_of = mix_source_of,
    .source_name = mix_source_name,
    .tag_columns = mix_tag_columns,
    .cut_tags = mix_cut_tags,
};

sharc__cutsource sharc__mix_cutsource(sharc__mix *m)
{
    const char *first = NULL;
    return (sharc__cutsource){&mix_ops, m, NULL, m->n_shards, first, m};
}

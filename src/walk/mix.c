#include "walk/mix.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "base/le.h"
#include "base/rng.h"

typedef struct mix_src {
    sharc__walk *walk;
    sharc_reader_settings s; ///< the reader's, with this source's seed and epoch limit
    uint32_t offset;         ///< of its shards among the mixture's
    double weight;
    const char *name;
    const char *language;
    uint64_t hash;
    int live;           ///< still in the draw
    uint64_t last_used; ///< the draw that last pulled from it
} mix_src;

struct sharc__mix {
    sharc__ctx *ctx;
    sharc_reader_stats *stats;
    size_t n;
    mix_src *src;
    size_t n_shards;
    double live_weight; ///< the sum of the weights still in the draw
    sharc__rng rng;
    uint64_t seed; ///< the reader's, which the draw's generator starts from
    uint64_t draws;
    size_t last; ///< the source of the last cut pulled
    size_t max_open, n_open;
    size_t n_tag_columns;
    const char *const *tag_columns;
    const char *const *tag_values;
};

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

/* The weights still in the draw, summed in one order, so that a restored mixture draws
 * exactly as the saved one did. */
static void live_sum(sharc__mix *m)
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
            live_sum(m);
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

/*
 * The state: the draw's generator, its count and last source, then per source its hash,
 * whether it is still in the draw, and its walk's position; all little-endian u64. When a
 * source reads a prologue (an elastic resume's share of the work, walk.h), a tag follows,
 * then per source whether it has one, where it is in it, the epoch after it, and its units:
 * a state without prologues keeps the bytes it always had.
 */
enum { HEAD_WORDS = 4 + 3, SOURCE_WORDS = 2 + 6, PROLOGUE_WORDS = 5, UNIT_WORDS = 5 };
#define PROLOGUE_TAG UINT64_C(0xFFFFFFFF50524F4C)

static int any_prologue(const sharc__mix *m)
{
    for (size_t i = 0; i < m->n; i++) {
        size_t n;
        uint64_t start;
        if (sharc__walk_prologue(m->src[i].walk, &n, &start))
            return 1;
    }
    return 0;
}

static size_t mix_state_size(const void *self)
{
    const sharc__mix *m = self;
    size_t words = HEAD_WORDS + SOURCE_WORDS * m->n;
    if (any_prologue(m)) {
        words += 1 + PROLOGUE_WORDS * m->n;
        for (size_t i = 0; i < m->n; i++) {
            size_t n;
            uint64_t start;
            sharc__walk_prologue(m->src[i].walk, &n, &start);
            words += UNIT_WORDS * n;
        }
    }
    return 8 * words;
}

static uint8_t *put_words(uint8_t *out, const uint64_t *v, size_t n)
{
    for (size_t k = 0; k < n; k++, out += 8)
        sharc__store_le64(out, v[k]);
    return out;
}

static void mix_state_write(const void *self, uint8_t *out)
{
    const sharc__mix *m = self;
    out = put_words(out, m->rng.s, 4);
    const uint64_t head[3] = {m->draws, m->last, m->n};
    out = put_words(out, head, 3);
    for (size_t i = 0; i < m->n; i++) {
        const mix_src *x = &m->src[i];
        const sharc__walk_pos *p = sharc__walk_position(x->walk);
        const uint64_t v[SOURCE_WORDS] = {
            x->hash,     (uint64_t)x->live,       p->epoch,     p->order_pos, p->shard_index,
            p->consumed, (uint64_t)p->shard_open, p->epoch_cuts};
        out = put_words(out, v, SOURCE_WORDS);
    }
    if (!any_prologue(m))
        return;
    const uint64_t tag = PROLOGUE_TAG;
    out = put_words(out, &tag, 1);
    for (size_t i = 0; i < m->n; i++) {
        size_t n;
        uint64_t start;
        const sharc__walk_unit *u = sharc__walk_prologue(m->src[i].walk, &n, &start);
        const sharc__walk_pos *p = sharc__walk_position(m->src[i].walk);
        const uint64_t v[PROLOGUE_WORDS] = {u != NULL, (uint64_t)p->in_prologue, p->unit_pos, start,
                                            n};
        out = put_words(out, v, PROLOGUE_WORDS);
        for (size_t k = 0; k < n; k++) {
            const uint64_t w[UNIT_WORDS] = {u[k].epoch, u[k].shard, u[k].skip, u[k].every,
                                            u[k].first};
            out = put_words(out, w, UNIT_WORDS);
        }
    }
}

static int bad_section(sharc__mix *m, const char *why, const char *source)
{
    if (source)
        return sharc__fail(m->ctx, SHARC_ERR_STATE, "cannot resume: %s of source %s", why, source);
    return sharc__fail(m->ctx, SHARC_ERR_STATE, "cannot resume: %s", why);
}

/* Check a section's size and every source's prologue: *prologues receives where they start
 * (NULL when it has none). */
static int check_section(sharc__mix *m, const uint8_t *in, size_t len, const uint8_t **prologues)
{
    *prologues = NULL;
    if (len < 8 * HEAD_WORDS)
        return bad_section(m, "the state blob is truncated", NULL);
    uint64_t n = sharc__load_le64(in + 8 * 6);
    if (n != m->n)
        return sharc__fail(m->ctx, SHARC_ERR_STATE,
                           "cannot resume: the state is of a mixture of %llu sources, and the "
                           "input_cfg lists %zu",
                           (unsigned long long)n, m->n);
    size_t base = 8 * (HEAD_WORDS + SOURCE_WORDS * m->n);
    if (len == base)
        return 0;
    if (len < base + 8 + 8 * PROLOGUE_WORDS * m->n || sharc__load_le64(in + base) != PROLOGUE_TAG)
        return bad_section(m, "the state's mixture section has the wrong size", NULL);
    const uint8_t *at = in + base + 8, *end = in + len;
    for (size_t i = 0; i < m->n; i++) {
        if ((size_t)(end - at) < 8 * PROLOGUE_WORDS)
            return bad_section(m, "the state's mixture section has the wrong size", NULL);
        uint64_t has = sharc__load_le64(at), in_prologue = sharc__load_le64(at + 8);
        uint64_t unit_pos = sharc__load_le64(at + 16), units = sharc__load_le64(at + 32);
        at += 8 * PROLOGUE_WORDS;
        if (has > 1 || in_prologue > has || unit_pos > units || (!has && units) ||
            units > (uint64_t)(end - at) / (8 * UNIT_WORDS))
            return bad_section(m, "the state's prologue is truncated or out of range",
                               m->src[i].name);
        const sharc__dataset *ds = sharc__walk_dataset(m->src[i].walk);
        for (uint64_t k = 0; k < units; k++, at += 8 * UNIT_WORDS) {
            uint64_t epoch = sharc__load_le64(at), shard = sharc__load_le64(at + 8);
            uint64_t every = sharc__load_le64(at + 24), first = sharc__load_le64(at + 32);
            if (shard >= ds->n_shards || every == 0 || first >= every ||
                (m->src[i].s.epochs && epoch >= m->src[i].s.epochs))
                return bad_section(m, "the state's prologue points outside the shards",
                                   m->src[i].name);
        }
    }
    if (at != end)
        return bad_section(m, "the state's mixture section has the wrong size", NULL);
    *prologues = in + base + 8;
    return 0;
}

int sharc__mix_saved_source(sharc__mix *m, const uint8_t *in, size_t len, size_t i,
                            sharc__mix_saved *out)
{
    const uint8_t *prologues;
    int rc = check_section(m, in, len, &prologues);
    if (rc < 0)
        return rc;
    const uint8_t *src = in + 8 * (HEAD_WORDS + SOURCE_WORDS * i);
    uint64_t v[SOURCE_WORDS];
    for (int k = 0; k < SOURCE_WORDS; k++)
        v[k] = sharc__load_le64(src + 8 * k);
    if (v[1] > 1 || v[4] > UINT32_MAX || v[6] > 1 || (v[1] && !(m->src[i].weight > 0)))
        return bad_section(m, "the state's position is out of range", m->src[i].name);
    *out = (sharc__mix_saved){.hash = v[0], .live = (int)v[1]};
    out->pos = (sharc__walk_pos){v[2], v[3], (uint32_t)v[4], v[5], (int)v[6], v[7], 0, 0};
    for (size_t j = 0; prologues && j <= i; j++) {
        uint64_t units = sharc__load_le64(prologues + 32);
        if (j == i) {
            out->has_prologue = (int)sharc__load_le64(prologues);
            out->pos.in_prologue = (int)sharc__load_le64(prologues + 8);
            out->pos.unit_pos = sharc__load_le64(prologues + 16);
            out->start_epoch = sharc__load_le64(prologues + 24);
            out->n_units = (size_t)units;
            out->unit_bytes = prologues + 8 * PROLOGUE_WORDS;
        }
        prologues += 8 * (PROLOGUE_WORDS + UNIT_WORDS * units);
    }
    return 0;
}

sharc__walk_unit sharc__mix_saved_unit(const sharc__mix_saved *s, size_t k)
{
    const uint8_t *p = s->unit_bytes + 8 * UNIT_WORDS * k;
    return (sharc__walk_unit){sharc__load_le64(p), (uint32_t)sharc__load_le64(p + 8),
                              sharc__load_le64(p + 16), sharc__load_le64(p + 24),
                              sharc__load_le64(p + 32)};
}

/* Source i's walk reads the prologue `s` has (if any), then goes where `s` says. */
static int restore_source(sharc__mix *m, size_t i, const sharc__mix_saved *s)
{
    int rc = 0;
    if (s->has_prologue) {
        sharc__walk_unit *u = sharc__malloc(m->ctx, (s->n_units ? s->n_units : 1) * sizeof *u);
        if (!u)
            return SHARC_ERR(ENOMEM);
        for (size_t k = 0; k < s->n_units; k++)
            u[k] = sharc__mix_saved_unit(s, k);
        rc = sharc__mix_set_prologue(m, i, u, s->n_units, s->start_epoch);
        sharc__free(m->ctx, u);
    }
    return rc < 0 ? rc : sharc__walk_seek_later(m->src[i].walk, &s->pos); /* named by the walk */
}

static int mix_state_restore(void *self, const uint8_t *in, size_t len)
{
    sharc__mix *m = self;
    sharc__mix_saved *saved = sharc__calloc(m->ctx, m->n ? m->n : 1, sizeof *saved);
    if (!saved)
        return SHARC_ERR(ENOMEM);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        rc = sharc__mix_saved_source(m, in, len, i, &saved[i]);
        if (rc == 0 && saved[i].hash != m->src[i].hash)
            rc = sharc__fail(m->ctx, SHARC_ERR_STATE,
                             "cannot resume: source %s is not the one the state was saved "
                             "with (its type, shards, weight or tags differ)",
                             m->src[i].name);
    }
    if (rc == 0) {
        for (int k = 0; k < 4; k++)
            m->rng.s[k] = sharc__load_le64(in + 8 * k);
        m->draws = sharc__load_le64(in + 8 * 4);
        uint64_t last = sharc__load_le64(in + 8 * 5);
        m->last = last < m->n ? (size_t)last : 0;
        m->n_open = 0;
    }
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        m->src[i].live = saved[i].live;
        m->src[i].last_used = 0;
        rc = restore_source(m, i, &saved[i]);
    }
    sharc__free(m->ctx, saved);
    if (rc == 0)
        live_sum(m);
    return rc;
}

int sharc__mix_set_prologue(sharc__mix *m, size_t i, const sharc__walk_unit *units, size_t n,
                            uint64_t start_epoch)
{
    return sharc__walk_set_prologue(m->src[i].walk, units, n, start_epoch);
}

void sharc__mix_restart_draw(sharc__mix *m, uint64_t salt)
{
    sharc__rng_seed(&m->rng, m->seed ^ UINT64_C(0x6D69787475726521) ^ salt);
    m->draws = 0;
    m->last = 0;
    for (size_t i = 0; i < m->n; i++) {
        m->src[i].live = m->src[i].weight > 0;
        m->src[i].last_used = 0;
    }
    live_sum(m);
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
    .state_size = mix_state_size,
    .state_write = mix_state_write,
    .state_restore = mix_state_restore,
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

/*
 * The pipeline's side of the sampler: its source of cuts (pulled from the walk into
 * buffered cuts, released, peeked at, reloaded on restore), and restoring a saved state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "batching/elastic.h"
#include "batching/pipeline_impl.h"
#include "batching/resume.h"
#include "walk/mix.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ---- sampler source ----------------------------------------------------------------- */

/* An elastic resume's re-read cut, handed to the sampler before the walk's. */
static void take_pending(sharc__pipeline *p, sharc__sitem *out)
{
    bcut *b = p->pending[p->pending_at];
    p->pending[p->pending_at++] = NULL;
    out->duration = b->duration;
    out->key = b->key;
    out->bytes = sharc__bcut_bytes(b);
    out->payload = b;
}

static int pull_item(void *cookie, sharc__sitem *out)
{
    sharc__pipeline *p = cookie;
    if (p->pending_at < p->n_pending) {
        take_pending(p, out);
        return 0;
    }
    double t0 = sharc__now_s(), io0 = p->ctx->io_seconds, read0 = sharc__cs_read_seconds(&p->cs);
    int rc = sharc__cs_pull(&p->cs);
    double t1 = sharc__now_s(), io = p->ctx->io_seconds - io0;
    /* The reading itself, here or on a read-ahead lane; waiting for a lane is not a stage. */
    p->stage[SHARC_STAGE_READ] += io;
    p->stage[SHARC_STAGE_DECOMPRESS] += (sharc__cs_read_seconds(&p->cs) - read0) - io;
    if (rc != 0) {
        p->pull_wall += t1 - t0;
        return rc;
    }
    bcut *b;
    if ((rc = sharc__bcut_from_raw(&p->bufs, sharc__cs_cut(&p->cs), p->cs.n_shards, &b)) < 0)
        return rc;
    if (p->cs.ops->cut_tags)
        b->tags = p->cs.ops->cut_tags(p->cs.self, sharc__cs_cut(&p->cs)->shard_index);
    double t2 = sharc__now_s();
    p->stage[SHARC_STAGE_SAMPLE] += t2 - t1;
    p->pull_wall += t2 - t0;
    if ((rc = sharc__keyset_add(p->ctx, &p->held, b->key)) < 0) {
        sharc__bcut_free(&p->bufs, b);
        return rc;
    }
    out->duration = b->duration;
    out->key = b->key;
    out->bytes = sharc__bcut_bytes(b);
    out->tokens = b->n_tokens;
    out->payload = b;
    return 0;
}

static void release_item(void *cookie, sharc__sitem *item, sharc__release_reason why)
{
    sharc__pipeline *p = cookie;
    const int filter = sharc__filter_of_release(why);
    if (filter >= 0) {
        p->stats->filtered_cuts++;
        p->filtered.n[filter]++;
        /* Filtered as it was pulled, so it is a cut of the epoch being read. */
        sharc__cs_uncount_cut(&p->cs);
    } else if (why == SHARC__RELEASE_DROPPED)
        p->stats->dropped_cuts++;
    sharc__keyset_remove(&p->held, item->key);
    sharc__bcut_free(&p->bufs, item->payload);
}

typedef struct peek_visit {
    int (*visit)(void *cookie, double duration);
    void *cookie;
} peek_visit;

/* The sampler's answer for a peeked cut, as the walk's. */
static int peek_one(void *cookie, double duration)
{
    const peek_visit *pv = cookie;
    int v = pv->visit(pv->cookie, duration);
    return v == SHARC__PEEK_STOP       ? SHARC__WALK_STOP
           : v == SHARC__PEEK_FILTERED ? SHARC__WALK_FILTERED
                                       : SHARC__WALK_TAKEN;
}

/*
 * The durations of the cuts pull_item would produce next (sharc__sampler_source.peek): the
 * walk reads on quietly and goes back (sharc__walk_peek).
 */
static int peek_durations(void *cookie, int (*visit)(void *vcookie, double duration), void *vc)
{
    sharc__pipeline *p = cookie;
    const double io0 = p->ctx->io_seconds, read0 = sharc__cs_read_seconds(&p->cs);
    peek_visit pv = {visit, vc};
    int rc = sharc__cs_peek(&p->cs, peek_one, &pv);
    /* The reading ahead and back is startup time spent reading, counted as pull_item does. */
    const double io = p->ctx->io_seconds - io0;
    p->stage[SHARC_STAGE_READ] += io;
    p->stage[SHARC_STAGE_DECOMPRESS] += (sharc__cs_read_seconds(&p->cs) - read0) - io;
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
        return sharc__fail(p->ctx, SHARC_ERR_STATE,
                           "the state's buffered cut at shard %llu position %llu could not be "
                           "read again: the data changed",
                           (unsigned long long)sharc__key_shard(key, p->cs.n_shards),
                           (unsigned long long)sharc__key_position(key));
    int rc = sharc__keyset_add(p->ctx, &p->held, key);
    if (rc < 0)
        return rc;
    p->taken[lo] = 1; /* ownership moves to the sampler */
    out->duration = b->duration;
    out->key = key;
    out->bytes = sharc__bcut_bytes(b);
    out->tokens = b->n_tokens;
    out->payload = b;
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
    int rc = sharc__cut_key(p->ctx, c, p->cs.n_shards, &key);
    if (rc < 0)
        return rc;
    if (!bsearch(&key, j->keys, j->n, sizeof key, cmp_u64))
        return 0;
    bcut *b;
    if ((rc = sharc__bcut_from_raw(&p->bufs, c, p->cs.n_shards, &b)) < 0)
        return rc;
    if (p->cs.ops->cut_tags)
        b->tags = p->cs.ops->cut_tags(p->cs.self, c->shard_index);
    p->preloaded[p->n_preloaded++] = b;
    return ++j->found == j->n ? 1 : 0;
}

/* Re-read the cuts the saved sampler held: only the shards they are in. */
static int preload(sharc__pipeline *p, const uint64_t *keys, size_t n)
{
    p->preloaded = sharc__calloc(p->ctx, n ? n : 1, sizeof *p->preloaded);
    p->taken = sharc__calloc(p->ctx, n ? n : 1, 1);
    if (!p->preloaded || !p->taken)
        return SHARC_ERR(ENOMEM);
    size_t i = 0;
    while (i < n) {
        uint64_t visit = sharc__key_visit(keys[i]); /* epoch and shard */
        size_t j = i;
        while (j < n && sharc__key_visit(keys[j]) == visit)
            j++;
        preload_job job = {p, keys + i, j - i, 0};
        uint32_t shard = sharc__key_shard(keys[i], p->cs.n_shards);
        int rc = sharc__cs_scan_shard(&p->cs, sharc__key_epoch(keys[i], p->cs.n_shards), shard,
                                      preload_cut, &job);
        if (rc < 0)
            return rc;
        if (job.found != job.n)
            return sharc__fail(p->ctx, SHARC_ERR_STATE,
                               "%zu cuts the state holds were not found again in shard %llu: "
                               "the data changed",
                               job.n - job.found, (unsigned long long)shard);
        i = j;
    }
    qsort(p->preloaded, p->n_preloaded, sizeof *p->preloaded, cmp_bcut_key);
    return 0;
}

/* The preloaded cuts no sampler took become pending, their keys held, in key order. */
static int keep_pending(sharc__pipeline *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_preloaded; i++)
        n += !p->taken[i];
    p->pending = sharc__calloc(p->ctx, n ? n : 1, sizeof *p->pending);
    if (!p->pending)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < p->n_preloaded; i++) {
        if (p->taken[i])
            continue;
        int rc = sharc__keyset_add(p->ctx, &p->held, p->preloaded[i]->key);
        if (rc < 0)
            return rc;
        p->pending[p->n_pending++] = p->preloaded[i];
        p->taken[i] = 1;
    }
    return 0;
}

void sharc__pipeline_free_pending(sharc__pipeline *p)
{
    for (size_t i = p->pending_at; i < p->n_pending; i++)
        sharc__bcut_free(&p->bufs, p->pending[i]);
    sharc__free(p->ctx, p->pending);
    p->pending = NULL;
    p->n_pending = p->pending_at = 0;
}

static void free_preloaded(sharc__pipeline *p)
{
    for (size_t i = 0; i < p->n_preloaded; i++)
        if (!p->taken[i])
            sharc__bcut_free(&p->bufs, p->preloaded[i]);
    sharc__free(p->ctx, p->preloaded);
    sharc__free(p->ctx, p->taken);
    p->preloaded = NULL;
    p->taken = NULL;
    p->n_preloaded = 0;
}

static const char no_noise[] =
    "cannot resume: the state holds no position of the noise stream: it was saved without "
    "noise, or by a sharc that held a fixed bank of noise (noise is streamed now); start the "
    "run again, or resume it with the sharc that saved it";

/* The noise stream goes back to the state's position, if `go_back`; else it starts from its
 * beginning (the state must have noise all the same). */
static int restore_noise(sharc__pipeline *p, const sharc__resume *st, int go_back)
{
    if (!p->noise)
        return 0;
    if (!st->noise)
        return sharc__fail(p->ctx, SHARC_ERR_STATE, "%s", no_noise);
    return go_back ? p->noise->restore(p->noise->self, p->ctx, st->noise, st->noise_len) : 0;
}

/* The walk reads a state's prologue (an elastic run's) first. */
static int set_prologue(sharc__pipeline *p, const sharc__resume *st)
{
    if (!st->has_prologue)
        return 0;
    sharc__walk_unit *u = sharc__malloc(p->ctx, (st->n_units ? st->n_units : 1) * sizeof *u);
    if (!u)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < st->n_units; i++)
        u[i] = sharc__resume_unit(st, i);
    int rc = sharc__walk_set_prologue(p->cs.walk, u, st->n_units, st->start_epoch);
    sharc__free(p->ctx, u);
    return rc;
}

/* The held keys of the old states (keys[d] of n_keys[d], sorted as saved). */
typedef struct old_keys {
    uint64_t **keys;
    size_t *n_keys, total;
} old_keys;

/* Old slot d's prologue and position as the split reads them; *units receives the decoded
 * prologue (freed by the caller). */
static int old_slot(sharc__ctx *ctx, const sharc__walk_pos *pos, int has_prologue,
                    uint64_t start_epoch, size_t n_units,
                    sharc__walk_unit (*unit)(const void *, size_t), const void *from, size_t d,
                    size_t n, sharc__elastic_old *out, sharc__walk_unit **units)
{
    *out = (sharc__elastic_old){*pos, (int)d, (int)n, NULL, 0, start_epoch};
    *units = NULL;
    if (!has_prologue)
        return 0;
    if (!(*units = sharc__malloc(ctx, (n_units ? n_units : 1) * sizeof **units)))
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < n_units; i++)
        (*units)[i] = unit(from, i);
    out->units = *units;
    out->n_units = n_units;
    return 0;
}

static sharc__walk_unit state_unit(const void *st, size_t i)
{
    return sharc__resume_unit(st, i);
}

static sharc__walk_unit saved_unit(const void *saved, size_t i)
{
    return sharc__mix_saved_unit(saved, i);
}

/* This slot's share of the work the n old slots left of one walk's plan: its prologue.
 * *n_all receives the units of all slots. */
static int split_plan(sharc__pipeline *p, const sharc__elastic_plan *plan,
                      const sharc__elastic_old *old, size_t n, sharc__walk *walk, size_t source,
                      size_t *n_all)
{
    sharc__walk_unit *mine = NULL;
    size_t n_mine = 0;
    uint64_t start_epoch = 0;
    int rc = sharc__elastic_split(p->ctx, plan, old, n, p->s->dp_rank, p->s->dp_size, &mine,
                                  &n_mine, &start_epoch, n_all);
    if (rc == 0)
        rc = walk ? sharc__walk_set_prologue(walk, mine, n_mine, start_epoch)
                  : sharc__mix_set_prologue(p->cs.mix, source, mine, n_mine, start_epoch);
    sharc__free(p->ctx, mine);
    return rc;
}

/* One dataset: split the walk's plan. */
static int split_walk(sharc__pipeline *p, const sharc__resume *st, size_t n)
{
    sharc__elastic_old *old = sharc__calloc(p->ctx, n, sizeof *old);
    sharc__walk_unit **units = sharc__calloc(p->ctx, n, sizeof *units);
    int rc = old && units ? 0 : SHARC_ERR(ENOMEM);
    for (size_t d = 0; rc == 0 && d < n; d++)
        rc = old_slot(p->ctx, &st[d].pos, st[d].has_prologue, st[d].start_epoch, st[d].n_units,
                      state_unit, &st[d], d, n, &old[d], &units[d]);
    sharc__elastic_plan plan = {sharc__walk_dataset(p->cs.walk), p->s->seed, p->s->shuffle_shards,
                                p->s->epochs, 0};
    size_t n_all;
    if (rc == 0)
        rc = split_plan(p, &plan, old, n, p->cs.walk, 0, &n_all);
    for (size_t d = 0; units && d < n; d++)
        sharc__free(p->ctx, units[d]);
    sharc__free(p->ctx, units);
    sharc__free(p->ctx, old);
    return rc;
}

/*
 * A mixture: each source's plan split on its own (its shards, seed and epochs: 1 finite,
 * without end repeating), from what each old slot's mixture section says of it, checked
 * against the source's hash for that slot (sources[d * m + i]). The draw starts afresh.
 */
static int split_mix(sharc__pipeline *p, const sharc__resume *st, size_t n, const uint64_t *sources)
{
    sharc__mix *mix = p->cs.mix;
    size_t m = sharc__mix_n_sources(mix);
    sharc__elastic_old *old = sharc__calloc(p->ctx, n, sizeof *old);
    sharc__walk_unit **units = sharc__calloc(p->ctx, n, sizeof *units);
    int rc = old && units ? 0 : SHARC_ERR(ENOMEM);
    uint64_t dealt = 0; /* units of the sources before: the round goes on where they left it */
    for (size_t i = 0; rc == 0 && i < m; i++) {
        for (size_t d = 0; rc == 0 && d < n; d++) {
            sharc__mix_saved saved;
            sharc__free(p->ctx, units[d]);
            units[d] = NULL;
            rc = sharc__mix_saved_source(mix, st[d].mix, st[d].mix_len, i, &saved);
            if (rc == 0 && saved.hash != sources[d * m + i])
                rc = sharc__fail(p->ctx, SHARC_ERR_STATE,
                                 "cannot resume: source %s is not the one the state was saved "
                                 "with (its type, shards, weight or tags differ)",
                                 sharc__mix_source_name(mix, i));
            if (rc == 0)
                rc = old_slot(p->ctx, &saved.pos, saved.has_prologue, saved.start_epoch,
                              saved.n_units, saved_unit, &saved, d, n, &old[d], &units[d]);
            if (rc < 0)
                sharc__wrap_error(p->ctx, rc,
                                  "the state of data-parallel slot %zu of %zu (the bundle's "
                                  "state %zu: a state of another slot, dataset or settings is "
                                  "refused)",
                                  d, n, d);
        }
        const sharc_reader_settings *ss = sharc__mix_source_settings(mix, i);
        sharc__elastic_plan plan = {sharc__mix_source_dataset(mix, i), ss->seed, ss->shuffle_shards,
                                    ss->epochs, dealt % (uint64_t)p->s->dp_size};
        size_t n_all = 0;
        if (rc == 0)
            rc = split_plan(p, &plan, old, n, NULL, i, &n_all);
        dealt += n_all;
    }
    for (size_t d = 0; units && d < n; d++)
        sharc__free(p->ctx, units[d]);
    sharc__free(p->ctx, units);
    sharc__free(p->ctx, old);
    /* Another draw than the run's first, the same on every new slot. */
    if (rc == 0)
        sharc__mix_restart_draw(mix, p->step_base * UINT64_C(0x9E3779B97F4A7C15) ^ n);
    return rc;
}

/* Parse the n old states, each checked against the hashes of its slot; collect their keys. */
static int parse_old(sharc__pipeline *p, const uint8_t **blobs, const size_t *lens, size_t n,
                     sharc__resume *st, uint64_t *sources, old_keys *k)
{
    size_t m = p->cs.mix ? sharc__mix_n_sources(p->cs.mix) : 0;
    for (size_t d = 0; d < n; d++) {
        uint64_t hash = 0;
        p->slot_hashes(p->slot_hashes_cookie, (int)d, (int)n, &hash, sources + d * m);
        int rc = sharc__resume_parse(p->ctx, blobs[d], lens[d], hash, p->cs.n_shards, p->s->epochs,
                                     &st[d]);
        if (rc == 0 && !st[d].mix != !p->cs.mix)
            rc = sharc__fail(p->ctx, SHARC_ERR_STATE, "cannot resume: the state is of %s",
                             st[d].mix ? "a mixture" : "one dataset");
        if (rc < 0)
            return sharc__wrap_error(p->ctx, rc,
                                     "the state of data-parallel slot %zu of %zu (the bundle's "
                                     "state %zu: a state of another slot, dataset or settings "
                                     "is refused)",
                                     d, n, d);
        if (!(k->keys[d] = sharc__malloc(p->ctx, (st[d].n_keys ? st[d].n_keys : 1) * 8)))
            return SHARC_ERR(ENOMEM);
        for (size_t i = 0; i < st[d].n_keys; i++)
            k->keys[d][i] = sharc__resume_key(&st[d], i);
        k->n_keys[d] = st[d].n_keys;
        k->total += st[d].n_keys;
        if (st[d].next_step > p->step_base)
            p->step_base = st[d].next_step;
    }
    return 0;
}

/*
 * Resume on this slot from the states of `n` slots of another count (a bundle): the work they
 * left split over this run's slots (elastic.h), source by source for a mixture, the cuts their
 * samplers held that fall to this slot re-read and handed to a fresh sampler first.
 */
static int restore_elastic(sharc__pipeline *p, const sharc__sampler_settings *ss,
                           const sharc__sampler_source *src, const uint8_t **blobs,
                           const size_t *lens, size_t n)
{
    size_t m = p->cs.mix ? sharc__mix_n_sources(p->cs.mix) : 0;
    sharc__resume *st = sharc__calloc(p->ctx, n, sizeof *st);
    uint64_t *sources = sharc__calloc(p->ctx, n * m + 1, sizeof *sources);
    old_keys k = {sharc__calloc(p->ctx, n, sizeof *k.keys),
                  sharc__calloc(p->ctx, n, sizeof *k.n_keys), 0};
    uint64_t *mine_keys = NULL;
    int rc = st && sources && k.keys && k.n_keys ? 0 : SHARC_ERR(ENOMEM);
    if (rc == 0)
        rc = parse_old(p, blobs, lens, n, st, sources, &k);
    if (rc == 0)
        rc = p->cs.walk ? split_walk(p, st, n) : split_mix(p, st, n, sources);
    if (rc == 0 && !(mine_keys = sharc__malloc(p->ctx, (k.total ? k.total : 1) * 8)))
        rc = SHARC_ERR(ENOMEM);
    size_t n_mine_keys = 0;
    if (rc == 0)
        rc = sharc__elastic_keys(p->ctx, (const uint64_t *const *)k.keys, k.n_keys, n,
                                 p->s->dp_rank, p->s->dp_size, mine_keys, &n_mine_keys);
    if (rc == 0)
        rc = preload(p, mine_keys, n_mine_keys);
    if (rc == 0)
        rc = keep_pending(p);
    /* Each slot streams noise of its own, seeded by its dp_rank: new slot d goes on from old
     * slot d's position, a slot the old run had not starts its stream from the beginning. */
    const size_t mine = (size_t)p->s->dp_rank;
    if (rc == 0)
        rc = restore_noise(p, &st[mine < n ? mine : 0], mine < n);
    if (rc == 0)
        rc = sharc__sampler_open(p->ctx, ss, src, &p->sampler);
    free_preloaded(p);
    for (size_t d = 0; k.keys && d < n; d++)
        sharc__free(p->ctx, k.keys[d]);
    sharc__free(p->ctx, st);
    sharc__free(p->ctx, sources);
    sharc__free(p->ctx, k.keys);
    sharc__free(p->ctx, k.n_keys);
    sharc__free(p->ctx, mine_keys);
    return rc;
}

int sharc__pipeline_restore(sharc__pipeline *p, const sharc__sampler_settings *ss,
                            const sharc__sampler_source *src)
{
    if (p->noise && sharc__resume_lacks_noise(p->resume, p->resume_len))
        return sharc__fail(p->ctx, SHARC_ERR_STATE, "%s", no_noise);
    long n = sharc__resume_bundle_parse(p->resume, p->resume_len, NULL, NULL, 0);
    if (n < 0)
        return sharc__fail(p->ctx, SHARC_ERR_STATE,
                           "cannot resume: the bundle of states is truncated or malformed");
    if (n > 0) { /* as many states as slots were unpacked when the reader opened */
        const uint8_t **blobs = sharc__calloc(p->ctx, (size_t)n, sizeof *blobs);
        size_t *lens = sharc__calloc(p->ctx, (size_t)n, sizeof *lens);
        int rc = blobs && lens ? 0 : SHARC_ERR(ENOMEM);
        if (rc == 0) {
            sharc__resume_bundle_parse(p->resume, p->resume_len, blobs, lens, (size_t)n);
            rc = restore_elastic(p, ss, src, blobs, lens, (size_t)n);
        }
        sharc__free(p->ctx, blobs);
        sharc__free(p->ctx, lens);
        return rc;
    }
    sharc__resume st;
    int rc = sharc__resume_parse(p->ctx, p->resume, p->resume_len, p->state_hash, p->cs.n_shards,
                                 p->s->epochs, &st);
    if (rc < 0)
        return rc;
    if (!st.mix != !p->cs.ops->state_restore)
        return sharc__fail(p->ctx, SHARC_ERR_STATE,
                           st.mix ? "cannot resume: the state is of a mixture of datasets "
                                    "(input_cfg), and this reader reads one dataset"
                                  : "cannot resume: the state is of one dataset, and this "
                                    "reader reads a mixture (input_cfg)");
    p->step_base = st.next_step;
    *p->stats = st.stats;
    p->handed_stats = st.stats;
    p->filtered = st.filtered;
    p->handed_filtered = st.filtered;
    uint64_t *keys = sharc__malloc(p->ctx, (st.n_keys ? st.n_keys : 1) * sizeof *keys);
    if (!keys)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < st.n_keys; i++)
        keys[i] = sharc__resume_key(&st, i);
    /* A mixture checks its sources first (it opens no shard until drawn): a state of
     * another config is refused for what differs, not for the cuts it cannot find. */
    if (!p->cs.walk)
        rc = p->cs.ops->state_restore(p->cs.self, st.mix, st.mix_len);
    if (rc == 0)
        rc = preload(p, keys, st.n_keys);
    sharc__free(p->ctx, keys);
    if (rc == 0 && p->cs.walk)
        rc = set_prologue(p, &st);
    if (rc == 0 && p->cs.walk)
        rc = sharc__walk_seek(p->cs.walk, &st.pos);
    if (rc == 0)
        rc = restore_noise(p, &st, 1);
    if (rc == 0)
        rc = sharc__sampler_restore(p->ctx, ss, src, st.sampler, st.sampler_len, &p->sampler);
    /* An elastic run's re-read cuts that its sampler had not pulled yet come first again. */
    if (rc == 0 && (st.has_prologue || st.mix))
        rc = keep_pending(p);
    free_preloaded(p);
    return rc;
}

sharc__sampler_source sharc__pipeline_sampler_source(sharc__pipeline *p)
{
    return (sharc__sampler_source){p,           pull_item,     release_item,
                                   reload_item, describe_item, peek_durations};
}

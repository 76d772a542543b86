#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sharc/sharc.h"
#include "base/ctx.h"
#include "base/rng.h"
#include "batching/sampler.h"
#include "testutil.h"

/* ---- a scripted item source -------------------------------------------------------- */

enum { ST_NONE = 0, ST_PULLED, ST_BATCHED, ST_RELEASED };

typedef struct src {
    size_t n;
    double *dur;
    uint64_t bytes_each;
    size_t pos;   /* next item to pull */
    int *state;   /* per key */
    int *reason;  /* release reason per key */
    long fail_at; /* pull of this position fails once with fail_rc */
    int fail_rc;
    size_t reloads;
    double reload_bias;   /* added to reloaded durations, to fake changed data */
    int no_peek;          /* offer no peek callback */
    size_t peeks, peeked; /* peek calls, durations visited */
    uint64_t released[SHARC__RELEASE_REASONS];
} src;

static void src_init(src *s, size_t n)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->dur = calloc(n ? n : 1, sizeof *s->dur);
    s->state = calloc(n ? n : 1, sizeof *s->state);
    s->reason = calloc(n ? n : 1, sizeof *s->reason);
    s->fail_at = -1;
}

static void src_free(src *s)
{
    free(s->dur);
    free(s->state);
    free(s->reason);
}

static void fill_item(src *s, size_t i, sharc__sitem *out)
{
    out->duration = s->dur[i];
    out->key = i;
    out->bytes = s->bytes_each;
    out->payload = &s->dur[i];
}

static int src_pull(void *cookie, sharc__sitem *out)
{
    src *s = cookie;
    if (s->fail_at >= 0 && (size_t)s->fail_at == s->pos) {
        s->fail_at = -1;
        return s->fail_rc;
    }
    if (s->pos >= s->n)
        return SHARC_END;
    ck_assert_int_eq(s->state[s->pos], ST_NONE);
    s->state[s->pos] = ST_PULLED;
    fill_item(s, s->pos++, out);
    return 0;
}

static void src_release(void *cookie, sharc__sitem *it, sharc__release_reason why)
{
    src *s = cookie;
    ck_assert_uint_lt(it->key, s->n);
    ck_assert_ptr_eq(it->payload, &s->dur[it->key]);
    ck_assert_int_eq(s->state[it->key], ST_PULLED);
    s->state[it->key] = ST_RELEASED;
    s->reason[it->key] = (int)why;
    s->released[why]++;
}

static int src_reload(void *cookie, uint64_t key, sharc__sitem *out)
{
    src *s = cookie;
    ck_assert_uint_lt(key, s->n);
    s->reloads++;
    s->state[key] = ST_PULLED;
    fill_item(s, (size_t)key, out);
    out->duration += s->reload_bias;
    return 0;
}

/* The durations after the last pulled item; pulling goes on from there afterwards. */
static int src_peek(void *cookie, int (*visit)(void *vcookie, double duration), void *vc)
{
    src *s = cookie;
    s->peeks++;
    for (size_t i = s->pos; i < s->n; i++) {
        s->peeked++;
        if (visit(vc, s->dur[i]) == SHARC__PEEK_STOP)
            break;
    }
    return 0;
}

static sharc__sampler_source source_of(src *s)
{
    sharc__sampler_source so = {s, src_pull, src_release, src_reload, NULL, src_peek};
    if (s->no_peek)
        so.peek = NULL;
    return so;
}

/* ---- recording and checking batches ------------------------------------------------ */

typedef struct seq {
    uint64_t *keys;
    size_t nk;
    size_t *sizes;
    size_t nb;
} seq;

static void seq_init(seq *q, size_t n)
{
    q->keys = calloc(n + 1, sizeof *q->keys);
    q->sizes = calloc(n + 1, sizeof *q->sizes);
    q->nk = q->nb = 0;
}

static void seq_free(seq *q)
{
    free(q->keys);
    free(q->sizes);
}

static double eff(const sharc__sampler_settings *st, double d)
{
    return st->quadratic_duration > 0 ? d + d * d / st->quadratic_duration : d;
}

/* Lhotse's close_to_exceeding, written independently of the sampler. */
static int closes(const sharc__sampler_settings *st, size_t bucket, size_t n, double longest)
{
    if (st->bucket_batch_size)
        return n >= st->bucket_batch_size[bucket];
    if (st->max_cuts && n >= st->max_cuts)
        return 1;
    return st->max_duration > 0 && (double)(n + 1) * longest > st->max_duration;
}

/* Every batch: one bucket; no prefix closes before the end; the full batch closes unless
 * the sampler reported it as a partial batch (its bucket was not ready). */
static void check_batch(sharc__sampler *s, const sharc__sampler_settings *st, src *so,
                        sharc__sitem *items, size_t n, int partial)
{
    size_t n_bins;
    const double *bins = sharc__sampler_bins(s, &n_bins);
    ck_assert_uint_ge(n, 1);
    size_t b = sharc__bucket_of(bins, n_bins, items[0].duration);
    double longest = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_lt(items[i].key, so->n);
        ck_assert_ptr_eq(items[i].payload, &so->dur[items[i].key]);
        ck_assert_double_eq(items[i].duration, so->dur[items[i].key]);
        ck_assert_int_eq(so->state[items[i].key], ST_PULLED);
        so->state[items[i].key] = ST_BATCHED;
        ck_assert_uint_eq(sharc__bucket_of(bins, n_bins, items[i].duration), b);
        if (i > 0)
            ck_assert_msg(!closes(st, b, i, longest), "batch went on after closing at %zu", i);
        double e = eff(st, items[i].duration);
        longest = e > longest ? e : longest;
    }
    if (!partial)
        ck_assert_msg(closes(st, b, n, longest), "full batch of %zu does not close", n);
    if (n > 1 && st->max_duration > 0) {
        /* n*longest can exceed max_duration only through the last (triggering) item. */
        double before = 0;
        for (size_t i = 0; i + 1 < n; i++)
            before = fmax(before, eff(st, items[i].duration));
        ck_assert_double_le((double)n * before, st->max_duration);
    }
}

/* Run a sampler to the end, checking every batch; returns next()'s final code. */
static int drain(sharc__sampler *s, const sharc__sampler_settings *st, src *so, seq *q,
                 size_t max_batches)
{
    sharc__sitem *items;
    size_t n;
    int rc;
    sharc__sampler_stats before, after;
    for (size_t k = 0; k < max_batches; k++) {
        sharc__sampler_get_stats(s, &before);
        rc = sharc__sampler_next(s, &items, &n);
        if (rc != 0)
            return rc;
        sharc__sampler_get_stats(s, &after);
        check_batch(s, st, so, items, n, after.partial != before.partial);
        for (size_t i = 0; i < n; i++)
            q->keys[q->nk++] = items[i].key;
        q->sizes[q->nb++] = n;
    }
    return 0;
}

static void random_durations(src *so, uint64_t seed, double lo, double hi)
{
    sharc__rng r;
    sharc__rng_seed(&r, seed);
    for (size_t i = 0; i < so->n; i++) {
        double u = sharc__rng_uniform(&r);
        /* A mix of ranges with repeated values, as real corpora have. */
        so->dur[i] =
            (i % 7 == 0) ? round((lo + (hi - lo) * u) * 100) / 100 : lo + (hi - lo) * u * u;
    }
}

static sharc__ctx quiet_ctx;
static sharc__ctx *ctx_quiet(void)
{
    sharc_logger log = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&quiet_ctx, NULL, &log);
    return &quiet_ctx;
}

static sharc__sampler *open_ok(const sharc__sampler_settings *st, src *so)
{
    sharc__sampler *s;
    sharc__sampler_source io = source_of(so);
    int rc = sharc__sampler_open(ctx_quiet(), st, &io, &s);
    ck_assert_msg(rc == 0, "open: %s", quiet_ctx.error);
    return s;
}

/* ---- bins ---------------------------------------------------------------------------- */

START_TEST(bisect_left_boundaries)
{
    const double bins[] = {1.0, 2.0, 2.0, 3.0};
    ck_assert_uint_eq(sharc__bucket_of(bins, 4, 0.0), 0);
    ck_assert_uint_eq(sharc__bucket_of(bins, 4, 1.0), 0);
    ck_assert_uint_eq(sharc__bucket_of(bins, 4, nextafter(1.0, 2.0)), 1);
    ck_assert_uint_eq(sharc__bucket_of(bins, 4, 2.0), 1);
    ck_assert_uint_eq(sharc__bucket_of(bins, 4, 2.5), 3);
    ck_assert_uint_eq(sharc__bucket_of(bins, 4, 3.0), 3);
    ck_assert_uint_eq(sharc__bucket_of(bins, 4, 3.0001), 4);
    ck_assert_uint_eq(sharc__bucket_of(bins, 0, 5.0), 0);
}
END_TEST

typedef struct lhotse_case {
    int k;
    size_t n, n_bins;
    double *dur, *bins;
} lhotse_case;

static int read_case(const char *path, lhotse_case *c)
{
    FILE *f = fopen(path, "r");
    char line[256];
    memset(c, 0, sizeof *c);
    if (!f)
        return -1;
    int ok = fgets(line, sizeof line, f) && line[0] == '#' &&
             fscanf(f, "num_buckets %d ", &c->k) == 1 && fscanf(f, "durations %zu ", &c->n) == 1;
    c->dur = calloc(c->n + 1, sizeof *c->dur);
    for (size_t i = 0; ok && i < c->n; i++)
        ok = fscanf(f, "%lf ", &c->dur[i]) == 1;
    ok = ok && fscanf(f, "bins %zu ", &c->n_bins) == 1;
    c->bins = calloc(c->n_bins + 1, sizeof *c->bins);
    for (size_t i = 0; ok && i < c->n_bins; i++)
        ok = fscanf(f, "%lf ", &c->bins[i]) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* NeMo's find_smallest_bucket, strict mode, on its docstring's example and the edges. */
START_TEST(bucket_of_2d_is_nemo_strict)
{
    const double d[] = {10, 10, 20, 20}, t[] = {5, 10, 12, 18}, tps[] = {1, 1, 0.5, 2};
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, NULL, 4, 8, 11), 4); /* (8, 11): none */
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, NULL, 4, 8, 5), 0);
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, NULL, 4, 10, 6), 1);
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, NULL, 4, 10.5, 6), 2);
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, NULL, 4, 15, 13), 3);
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, NULL, 4, 20.5, 1), 4); /* past every duration */
    /* max_tps per bucket: tokens / duration above the bucket's cap fits nowhere. */
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, tps, 4, 8, 8), 1);   /* 1 is not over 1 */
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, tps, 4, 8, 9), 4);   /* 1.125 > 1 */
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, tps, 4, 20, 11), 4); /* 0.55 > 0.5 */
    ck_assert_uint_eq(sharc__bucket_of_2d(d, t, tps, 4, 20, 10), 2);
}
END_TEST

START_TEST(bins_equal_lhotse)
{
    const char *dir = tu_testdata("lhotse_bins");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "no %s", dir);
    struct dirent *e;
    int cases = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".txt"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        lhotse_case c;
        ck_assert_msg(read_case(path, &c) == 0, "cannot parse %s", path);
        double out[64];
        size_t n_out = 99;
        ck_assert_int_lt(c.k, 64);
        ck_assert_int_eq(sharc_estimate_duration_bins(c.dur, c.n, c.k, out, &n_out), 0);
        ck_assert_msg(n_out == c.n_bins, "%s: %zu bins, lhotse %zu", e->d_name, n_out, c.n_bins);
        for (size_t i = 0; i < n_out; i++)
            ck_assert_msg(out[i] == c.bins[i], "%s: bin %zu is %.17g, lhotse %.17g", e->d_name, i,
                          out[i], c.bins[i]);

        /* The sampler estimates the same bins from the same stream, without consuming it:
         * its buffer holds 1000 items, and it peeks at the durations of the rest. */
        src so;
        src_init(&so, c.n);
        memcpy(so.dur, c.dur, c.n * sizeof *c.dur);
        sharc__sampler_settings st;
        sharc__sampler_default_settings(&st);
        st.max_duration = 100;
        st.num_buckets = (uint32_t)c.k;
        st.num_cuts_for_bins_estimate = (uint32_t)c.n;
        st.buffer_size = 1000;
        sharc__sampler *s = open_ok(&st, &so);
        sharc__sitem *items;
        size_t n, nb;
        ck_assert_int_eq(sharc__sampler_next(s, &items, &n), 0);
        const double *bins = sharc__sampler_bins(s, &nb);
        ck_assert_uint_eq(nb, c.n_bins);
        ck_assert_int_eq(memcmp(bins, c.bins, nb * sizeof *bins), 0);
        ck_assert_uint_eq(so.peeks, c.n > st.buffer_size);
        ck_assert_uint_le(sharc__sampler_buffered(s), st.buffer_size);
        sharc__sampler_close(&s);
        ck_assert_uint_eq(so.released[SHARC__RELEASE_CLOSE] + n, so.pos);
        ck_assert_uint_eq(so.pos, c.n < st.buffer_size + n ? c.n : st.buffer_size + n);
        src_free(&so);
        free(c.dur);
        free(c.bins);
        cases++;
    }
    closedir(d);
    ck_assert_int_ge(cases, 8);
}
END_TEST

START_TEST(bins_reject_bad_input)
{
    const double d[] = {3, 1, NAN, 4}, e[] = {3, 1, 2, 2};
    double out[4];
    size_t n;
    ck_assert_int_eq(sharc_estimate_duration_bins(d, 2, 3, out, &n), SHARC_ERR(EINVAL));
    ck_assert_int_eq(sharc_estimate_duration_bins(d, 4, 1, out, &n), SHARC_ERR(EINVAL));
    ck_assert_int_eq(sharc_estimate_duration_bins(d, 4, 2, out, &n), SHARC_ERR(EINVAL));
    ck_assert_int_eq(sharc_estimate_duration_bins(d, 2, 2, out, &n), 0);
    ck_assert_uint_eq(n, 0); /* sorted 1, 3: the total never passes 2 before the last */
    ck_assert_int_eq(sharc_estimate_duration_bins(e, 4, 2, out, &n), 0);
    ck_assert_uint_eq(n, 1); /* sorted 1, 2, 2, 3: 5 > 4 before the 3 */
    ck_assert_double_eq(out[0], 3.0);
}
END_TEST

/* Bins come from the first N items only, and those items are batched like the others. */
START_TEST(bins_from_first_n_items)
{
    src so;
    src_init(&so, 500);
    random_durations(&so, 3, 0.5, 20);
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.max_duration = 60;
    st.num_buckets = 6;
    st.num_cuts_for_bins_estimate = 120;
    st.buffer_size = 50; /* smaller than N: the rest of the N durations are peeked at */
    double want[8];
    size_t n_want;
    ck_assert_int_eq(sharc_estimate_duration_bins(so.dur, 120, 6, want, &n_want), 0);
    sharc__sampler *s = open_ok(&st, &so);
    size_t nb;
    ck_assert_ptr_null(sharc__sampler_bins(s, &nb));
    seq q;
    seq_init(&q, so.n);
    ck_assert_int_eq(drain(s, &st, &so, &q, 1), 0);
    const double *bins = sharc__sampler_bins(s, &nb);
    ck_assert_uint_eq(nb, n_want);
    ck_assert_int_eq(memcmp(bins, want, nb * sizeof *bins), 0);
    ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
    ck_assert_uint_eq(q.nk, so.n);
    sharc__sampler_close(&s);
    seq_free(&q);
    src_free(&so);
}
END_TEST

/* The byte budget stops the buffer before it holds the N items the bins are estimated
 * from: their durations are peeked at, so the bins are those of the first N items that pass
 * the filters, as without a budget; the buffer stays within the budget; nothing is lost.
 * Without a peek callback the bins come from the items the buffer could hold. */
START_TEST(bins_from_first_n_items_under_byte_budget)
{
    for (int peek = 0; peek < 2; peek++) {
        src so;
        src_init(&so, 500);
        random_durations(&so, 5, 0.5, 20);
        so.bytes_each = 1000;
        so.no_peek = !peek;
        sharc__sampler_settings st;
        sharc__sampler_default_settings(&st);
        st.max_duration = 60;
        st.num_buckets = 6;
        st.num_cuts_for_bins_estimate = 120;
        st.buffer_size = 50;
        st.max_buffer_bytes = 30 * 1000; /* 30 items, and one waiting */
        st.min_item_duration = 2;        /* filtered items are not counted */
        /* The first N items that pass the filter, by an independent count. */
        double first[120];
        size_t n_first = 0, want_n = peek ? 120 : 31;
        for (size_t i = 0; i < so.n && n_first < want_n; i++)
            if (so.dur[i] >= st.min_item_duration)
                first[n_first++] = so.dur[i];
        ck_assert_uint_eq(n_first, want_n);
        double want[8];
        size_t n_want;
        ck_assert_int_eq(sharc_estimate_duration_bins(first, n_first, 6, want, &n_want), 0);
        sharc__sampler *s = open_ok(&st, &so);
        seq q;
        seq_init(&q, so.n);
        ck_assert_int_eq(drain(s, &st, &so, &q, 1), 0);
        size_t nb;
        const double *bins = sharc__sampler_bins(s, &nb);
        ck_assert_uint_eq(nb, n_want);
        ck_assert_int_eq(memcmp(bins, want, nb * sizeof *bins), 0);
        ck_assert_uint_eq(so.peeks, (size_t)peek);
        /* The peek stopped at the 120th counted item, not at the end of the stream. */
        ck_assert_uint_lt(so.peeked, so.n - so.pos);
        ck_assert_uint_le(sharc__sampler_buffered(s), 31);
        ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
        size_t filtered = 0;
        for (size_t i = 0; i < so.n; i++) {
            filtered += so.dur[i] < st.min_item_duration;
            ck_assert_int_eq(so.state[i],
                             so.dur[i] < st.min_item_duration ? ST_RELEASED : ST_BATCHED);
        }
        ck_assert_uint_eq(q.nk, so.n - filtered);
        ck_assert_uint_eq(so.peeks, (size_t)peek); /* bins are estimated once */
        sharc__sampler_close(&s);
        seq_free(&q);
        src_free(&so);
    }
}
END_TEST

/* ---- batching ------------------------------------------------------------------------ */

static void every_item_once(uint64_t seed)
{
    sharc__rng r;
    sharc__rng_seed(&r, seed * 7919 + 1);
    src so;
    src_init(&so, 50 + (size_t)sharc__rng_below(&r, 3000));
    random_durations(&so, seed, 0.2 + sharc__rng_uniform(&r), 5 + 30 * sharc__rng_uniform(&r));
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.seed = seed;
    st.shuffle = (seed & 1) != 0;
    st.sync_buckets = (seed & 2) != 0;
    st.world_size = 1 + (uint32_t)sharc__rng_below(&r, 4);
    st.num_buckets = 1 + (uint32_t)sharc__rng_below(&r, 30);
    st.num_cuts_for_bins_estimate = 1 + (uint32_t)sharc__rng_below(&r, 2000);
    st.buffer_size = 1 + (uint32_t)sharc__rng_below(&r, 2500);
    int mode = (int)(seed % 5);
    st.max_duration = mode == 1 ? 0 : 20 + 200 * sharc__rng_uniform(&r);
    st.max_cuts = mode == 1 || mode == 2 ? 1 + (uint32_t)sharc__rng_below(&r, 40) : 0;
    st.quadratic_duration = mode == 3 ? 5 + 30 * sharc__rng_uniform(&r) : 0;
    if (mode == 4) {
        so.bytes_each = 1000;
        st.max_buffer_bytes = 1000 * (1 + sharc__rng_below(&r, 300));
    }
    sharc__sampler *s = open_ok(&st, &so);
    seq q;
    seq_init(&q, so.n);
    ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
    for (size_t i = 0; i < so.n; i++)
        ck_assert_msg(so.state[i] == ST_BATCHED, "seed %llu: item %zu state %d",
                      (unsigned long long)seed, i, so.state[i]);
    sharc__sampler_stats stats;
    sharc__sampler_get_stats(s, &stats);
    ck_assert_uint_eq(stats.items, so.n);
    ck_assert_uint_eq(stats.pulled, so.n);
    ck_assert_uint_eq(stats.batches, q.nb);
    ck_assert_uint_eq(stats.dropped, 0);
    ck_assert_uint_eq(sharc__sampler_buffered(s), 0);
    sharc__sitem *items;
    size_t n;
    ck_assert_int_eq(sharc__sampler_next(s, &items, &n), SHARC_END);
    sharc__sampler_close(&s);
    seq_free(&q);
    src_free(&so);
}

START_TEST(every_item_exactly_once)
{
    for (uint64_t seed = 1; seed <= 60; seed++)
        every_item_once(seed);
}
END_TEST

/* items: 10 s each; no q: (n+1)*10 > 30 at n = 3. q = 10: d' = 20, alone 2*20 > 30. */
START_TEST(quadratic_term_and_max_cuts)
{
    const double one_bin[] = {100};
    for (int variant = 0; variant < 3; variant++) {
        src so;
        src_init(&so, 10);
        for (size_t i = 0; i < so.n; i++)
            so.dur[i] = 10;
        sharc__sampler_settings st;
        sharc__sampler_default_settings(&st);
        st.bins = one_bin;
        st.n_bins = 1;
        st.max_duration = variant == 2 ? 0 : 30;
        st.quadratic_duration = variant == 1 ? 10 : 0;
        st.max_cuts = variant == 2 ? 4 : 0;
        sharc__sampler *s = open_ok(&st, &so);
        seq q;
        seq_init(&q, so.n);
        ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
        const size_t want[3][10] = {{3, 3, 3, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {4, 4, 2}};
        const size_t want_nb[3] = {4, 10, 3};
        ck_assert_uint_eq(q.nb, want_nb[variant]);
        for (size_t b = 0; b < q.nb; b++)
            ck_assert_uint_eq(q.sizes[b], want[variant][b]);
        for (size_t i = 0; i < q.nk; i++)
            ck_assert_uint_eq(q.keys[i], i); /* FIFO without shuffle */
        sharc__sampler_stats stats;
        sharc__sampler_get_stats(s, &stats);
        ck_assert_uint_eq(stats.oversized, 0);
        ck_assert_uint_eq(stats.partial, variant == 1 ? 0 : 1);
        sharc__sampler_close(&s);
        seq_free(&q);
        src_free(&so);
    }
}
END_TEST

/* Lhotse includes the triggering item even when it is the longest: 2 s then 6 s with
 * max_duration 10 gives one batch of 2 whose padded size is 12 s. */
START_TEST(triggering_item_included)
{
    const double one_bin[] = {100};
    src so;
    src_init(&so, 3);
    so.dur[0] = 2;
    so.dur[1] = 6;
    so.dur[2] = 1;
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.bins = one_bin;
    st.n_bins = 1;
    st.max_duration = 10;
    sharc__sampler *s = open_ok(&st, &so);
    sharc__sitem *items;
    size_t n;
    ck_assert_int_eq(sharc__sampler_next(s, &items, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(items[0].key, 0);
    ck_assert_uint_eq(items[1].key, 1);
    ck_assert_int_eq(sharc__sampler_next(s, &items, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(items[0].key, 2);
    ck_assert_int_eq(sharc__sampler_next(s, &items, &n), SHARC_END);
    sharc__sampler_close(&s);
    src_free(&so);
}
END_TEST

static int warnings;
static char last_warning[512];
static void capture_log(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    if (level == SHARC_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", message);
    }
}

START_TEST(oversized_item_is_a_single_batch_with_warning)
{
    src so;
    src_init(&so, 4);
    so.dur[0] = 3;
    so.dur[1] = 50; /* > max_duration */
    so.dur[2] = 3;
    so.dur[3] = 3;
    const double bins[] = {10};
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.bins = bins;
    st.n_bins = 1;
    st.max_duration = 20;
    st.buffer_size = 2;
    sharc__ctx ctx;
    sharc_logger log = {NULL, capture_log, SHARC_LOG_WARN};
    sharc__ctx_init(&ctx, NULL, &log);
    sharc__sampler *s;
    sharc__sampler_source io = source_of(&so);
    ck_assert_int_eq(sharc__sampler_open(&ctx, &st, &io, &s), 0);
    warnings = 0;
    seq q;
    seq_init(&q, so.n);
    ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
    size_t at = 0;
    for (size_t b = 0, k = 0; b < q.nb; k += q.sizes[b++])
        if (q.keys[k] == 1) {
            ck_assert_uint_eq(q.sizes[b], 1);
            at = 1;
        }
    ck_assert_uint_eq(at, 1);
    ck_assert_int_eq(warnings, 1);
    ck_assert_ptr_nonnull(strstr(last_warning, "0x1 alone"));
    sharc__sampler_stats stats;
    sharc__sampler_get_stats(s, &stats);
    ck_assert_uint_eq(stats.oversized, 1);
    sharc__sampler_close(&s);
    seq_free(&q);
    src_free(&so);
}
END_TEST

START_TEST(fixed_bucket_batch_sizes)
{
    const double bins[] = {2, 5};
    const uint32_t bbs[] = {4, 3};
    src so;
    src_init(&so, 300);
    random_durations(&so, 11, 0.5, 5.0);
    so.dur[17] = 5.0; /* on the last boundary: bucket 1 */
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.bins = bins;
    st.n_bins = 2;
    st.bucket_batch_size = bbs;
    st.shuffle = 1;
    st.buffer_size = 40;
    sharc__sampler *s = open_ok(&st, &so);
    seq q;
    seq_init(&q, so.n);
    ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
    ck_assert_uint_eq(q.nk, so.n);
    size_t partial = 0;
    for (size_t b = 0, k = 0; b < q.nb; k += q.sizes[b++]) {
        size_t want = bbs[sharc__bucket_of(bins, 2, so.dur[q.keys[k]])];
        ck_assert_uint_le(q.sizes[b], want);
        partial += q.sizes[b] < want;
    }
    ck_assert_uint_le(partial, 2); /* at most one drained remainder per bucket */
    sharc__sampler_close(&s);

    /* An item above the last bin is an error naming it, unless filtered. */
    memset(so.state, 0, so.n * sizeof *so.state);
    so.pos = 0;
    so.dur[5] = 5.5;
    s = open_ok(&st, &so);
    sharc__sitem *items;
    size_t n;
    ck_assert_int_eq(sharc__sampler_next(s, &items, &n), SHARC_ERR_TOO_LARGE);
    ck_assert_ptr_nonnull(strstr(quiet_ctx.error, "item 0x5 lasts 5.5 s"));
    ck_assert_int_eq(so.reason[5], SHARC__RELEASE_REJECTED);
    sharc__sampler_close(&s);
    memset(so.state, 0, so.n * sizeof *so.state);
    so.pos = 0;
    st.max_item_duration = 5;
    s = open_ok(&st, &so);
    seq_free(&q);
    seq_init(&q, so.n);
    ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
    ck_assert_uint_eq(q.nk, so.n - 1);
    ck_assert_int_eq(so.reason[5], SHARC__RELEASE_TOO_LONG);
    sharc__sampler_close(&s);
    seq_free(&q);
    src_free(&so);
}
END_TEST

START_TEST(filters_are_counted_and_released)
{
    src so;
    src_init(&so, 400);
    random_durations(&so, 5, 0.1, 30);
    size_t short_n = 0, long_n = 0;
    for (size_t i = 0; i < so.n; i++) {
        short_n += so.dur[i] < 1.0;
        long_n += so.dur[i] > 20.0;
    }
    ck_assert_uint_gt(short_n, 0);
    ck_assert_uint_gt(long_n, 0);
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.max_duration = 80;
    st.min_item_duration = 1.0;
    st.max_item_duration = 20.0;
    st.num_buckets = 4;
    st.num_cuts_for_bins_estimate = 100;
    st.buffer_size = 64;
    st.shuffle = 1;
    sharc__sampler *s = open_ok(&st, &so);
    seq q;
    seq_init(&q, so.n);
    ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
    sharc__sampler_stats stats;
    sharc__sampler_get_stats(s, &stats);
    ck_assert_uint_eq(stats.too_short, short_n);
    ck_assert_uint_eq(stats.too_long, long_n);
    ck_assert_uint_eq(so.released[SHARC__RELEASE_TOO_SHORT], short_n);
    ck_assert_uint_eq(so.released[SHARC__RELEASE_TOO_LONG], long_n);
    ck_assert_uint_eq(q.nk + short_n + long_n, so.n);
    for (size_t i = 0; i < so.n; i++) {
        int want = so.dur[i] < 1.0 || so.dur[i] > 20.0 ? ST_RELEASED : ST_BATCHED;
        ck_assert_int_eq(so.state[i], want);
    }
    sharc__sampler_close(&s);
    seq_free(&q);
    src_free(&so);
}
END_TEST

START_TEST(drop_last_hands_back_the_rest)
{
    for (int sync = 0; sync < 2; sync++) {
        src so;
        src_init(&so, 1000);
        random_durations(&so, 21 + (uint64_t)sync, 1, 15);
        sharc__sampler_settings st;
        sharc__sampler_default_settings(&st);
        st.max_duration = 60;
        st.num_buckets = 5;
        st.num_cuts_for_bins_estimate = 200;
        st.buffer_size = 200;
        st.drop_last = 1;
        st.shuffle = 1;
        st.sync_buckets = sync;
        sharc__sampler *s = open_ok(&st, &so);
        seq q;
        seq_init(&q, so.n);
        ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
        sharc__sampler_stats stats;
        sharc__sampler_get_stats(s, &stats);
        ck_assert_uint_eq(stats.partial, 0);
        ck_assert_uint_gt(stats.dropped, 0);
        ck_assert_uint_eq(so.released[SHARC__RELEASE_DROPPED], stats.dropped);
        ck_assert_uint_eq(q.nk + stats.dropped, so.n);
        ck_assert_uint_eq(sharc__sampler_buffered(s), 0);
        sharc__sampler_close(&s);
        ck_assert_uint_eq(so.released[SHARC__RELEASE_CLOSE], 0);
        seq_free(&q);
        src_free(&so);
    }
}
END_TEST

/* With sync, the drawn bucket serves world_size consecutive batches while it is ready. */
START_TEST(sync_reuses_draw_world_size_times)
{
    const double bins[] = {2, 4, 6, 8};
    for (uint32_t ws = 1; ws <= 4; ws++) {
        src so;
        src_init(&so, 6000);
        for (size_t i = 0; i < so.n; i++)
            so.dur[i] = 1.0 + 2.0 * (double)(i % 5); /* one item per bucket, round robin */
        sharc__sampler_settings st;
        sharc__sampler_default_settings(&st);
        st.bins = bins;
        st.n_bins = 4;
        st.max_cuts = 3;
        st.buffer_size = 3000;
        st.sync_buckets = 1;
        st.world_size = ws;
        st.seed = 99;
        st.shuffle = 1;
        sharc__sampler *s = open_ok(&st, &so);
        seq q;
        seq_init(&q, so.n);
        ck_assert_int_eq(drain(s, &st, &so, &q, 400), 0);
        size_t changes = 0;
        for (size_t b = 1, k = 3; b < q.nb; b++, k += 3) {
            size_t prev = sharc__bucket_of(bins, 4, so.dur[q.keys[k - 3]]);
            size_t cur = sharc__bucket_of(bins, 4, so.dur[q.keys[k]]);
            if (b % ws != 0)
                ck_assert_msg(cur == prev, "ws %u: batch %zu changed bucket", ws, b);
            changes += cur != prev;
        }
        ck_assert_uint_gt(changes, 400 / ws / 2); /* the draws do change buckets */
        sharc__sampler_close(&s);
        seq_free(&q);
        src_free(&so);
    }
}
END_TEST

/* A model of Lhotse's bucket choice over bucket counts, driven by the sampler's RNGs:
 * without sync, uniform among ready buckets (else non-empty ones); with sync, one draw per
 * world_size batches, the idx, idx-1, idx+1, ... scan, and the rewind before the
 * non-empty rescan. The sampler must choose the same bucket and size every time. */
typedef struct model {
    size_t cnt[6];
    sharc__rng rng, brng;
    uint32_t bidx, ws;
    uint64_t usage;
    int has_bidx;
} model;

static long model_scan(model *m, int need_ready)
{
    if (!m->has_bidx || m->usage == m->ws) {
        m->bidx = (uint32_t)sharc__rng_below(&m->brng, 6);
        m->usage = 0;
        m->has_bidx = 1;
    }
    m->usage++;
    const long order[] = {0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5, -6, 6};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        long b = (long)m->bidx + order[i];
        if (b >= 0 && b < 6 && m->cnt[b] >= (need_ready ? 2u : 1u))
            return b;
    }
    return -1;
}

static long model_pick(model *m, int sync)
{
    if (sync) {
        model saved = *m;
        long b = model_scan(m, 1);
        if (b >= 0)
            return b;
        memcpy(m->cnt, saved.cnt, sizeof m->cnt);
        m->brng = saved.brng, m->bidx = saved.bidx, m->usage = saved.usage;
        m->has_bidx = saved.has_bidx;
        return model_scan(m, 0);
    }
    long cand[6];
    size_t n = 0;
    for (int need = 2; need >= 1 && n == 0; need--)
        for (long b = 0; b < 6; b++)
            if (m->cnt[b] >= (size_t)need)
                cand[n++] = b;
    return n ? cand[sharc__rng_below(&m->rng, n)] : -1;
}

START_TEST(bucket_choice_matches_lhotse_model)
{
    const double bins[] = {1, 2, 3, 4, 5};
    for (int variant = 0; variant < 4; variant++) {
        int sync = variant > 0;
        model m;
        memset(&m, 0, sizeof m);
        m.ws = variant ? (uint32_t)variant : 1;
        src so;
        src_init(&so, 20);
        for (size_t i = 0; i < so.n; i++) /* interleaved, so arrival order varies */
            so.dur[i] = i % 3 == 0 && i < 9 ? 9.0 : i % 2 ? 3.5 : 1.5;
        for (size_t i = 0; i < so.n; i++) /* 8, 9 and 3 items in buckets 1, 3 and 5 */
            m.cnt[sharc__bucket_of(bins, 5, so.dur[i])]++;
        sharc__sampler_settings st;
        sharc__sampler_default_settings(&st);
        st.bins = bins;
        st.n_bins = 5;
        st.max_cuts = 2;
        st.buffer_size = 100;
        st.sync_buckets = sync;
        st.world_size = m.ws;
        st.seed = 40 + (uint64_t)variant;
        sharc__rng_seed(&m.rng, st.seed);
        sharc__rng_seed(&m.brng, st.seed ^ SHARC__BUCKET_SEED_SALT);
        sharc__sampler *s = open_ok(&st, &so);
        sharc__sitem *items;
        size_t n, batches = 0;
        long b;
        while ((b = model_pick(&m, sync)) >= 0) {
            size_t take = m.cnt[b] < 2 ? m.cnt[b] : 2;
            m.cnt[b] -= take;
            ck_assert_int_eq(sharc__sampler_next(s, &items, &n), 0);
            ck_assert_uint_eq(n, take);
            ck_assert_msg(sharc__bucket_of(bins, 5, items[0].duration) == (size_t)b,
                          "variant %d batch %zu: bucket %zu, model %ld", variant, batches,
                          sharc__bucket_of(bins, 5, items[0].duration), b);
            batches++;
        }
        ck_assert_int_eq(sharc__sampler_next(s, &items, &n), SHARC_END);
        ck_assert_uint_ge(batches, 11);
        sharc__sampler_close(&s);
        src_free(&so);
    }
}
END_TEST

static void run_to_end(const sharc__sampler_settings *st, src *so, seq *q)
{
    sharc__sampler *s = open_ok(st, so);
    ck_assert_int_eq(drain(s, st, so, q, SIZE_MAX), SHARC_END);
    sharc__sampler_close(&s);
}

START_TEST(deterministic_and_seed_dependent)
{
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.max_duration = 90;
    st.num_buckets = 8;
    st.num_cuts_for_bins_estimate = 300;
    st.buffer_size = 300;
    st.shuffle = 1;
    st.seed = 5;
    seq q[3];
    for (int run = 0; run < 3; run++) {
        src so;
        src_init(&so, 2000);
        random_durations(&so, 77, 0.5, 25);
        if (run == 2)
            st.seed = 6;
        seq_init(&q[run], so.n);
        run_to_end(&st, &so, &q[run]);
        src_free(&so);
    }
    ck_assert_uint_eq(q[0].nk, 2000);
    ck_assert_uint_eq(q[0].nb, q[1].nb);
    ck_assert_int_eq(memcmp(q[0].keys, q[1].keys, q[0].nk * sizeof *q[0].keys), 0);
    ck_assert_int_eq(memcmp(q[0].sizes, q[1].sizes, q[0].nb * sizeof *q[0].sizes), 0);
    ck_assert_int_ne(memcmp(q[0].keys, q[2].keys, q[0].nk * sizeof *q[0].keys), 0);
    for (int run = 0; run < 3; run++)
        seq_free(&q[run]);
}
END_TEST

/* ---- state --------------------------------------------------------------------------- */

static void resume_settings(sharc__sampler_settings *st, int variant)
{
    sharc__sampler_default_settings(st);
    st->max_duration = 70;
    st->quadratic_duration = variant == 2 ? 20 : 0;
    st->num_buckets = 6;
    st->num_cuts_for_bins_estimate = 150;
    st->buffer_size = 120;
    st->shuffle = 1;
    st->seed = 1234 + (uint64_t)variant;
    st->sync_buckets = variant != 1;
    st->world_size = variant == 0 ? 2 : 1;
    st->max_buffer_bytes = variant == 2 ? 100 * 1000 : 0;
    st->min_item_duration = 0.3;
}

/* Save after k batches, restore into a fresh sampler (the source restarted at the saved
 * position), and require the rest to equal the uninterrupted run. */
static void save_restore_at(int variant, size_t k, const seq *full, size_t n_items)
{
    sharc__sampler_settings st;
    resume_settings(&st, variant);
    src so;
    src_init(&so, n_items);
    random_durations(&so, 500 + (uint64_t)variant, 0.1, 20);
    so.bytes_each = 1000;
    sharc__sampler *s = open_ok(&st, &so);
    seq q;
    seq_init(&q, so.n);
    int rc = drain(s, &st, &so, &q, k);
    ck_assert_int_eq(rc, k <= full->nb ? 0 : SHARC_END);
    size_t size = sharc__sampler_state_size(s);
    unsigned char *blob = malloc(size);
    ck_assert_int_eq(sharc__sampler_save(s, blob, size - 1), SHARC_ERR(ENOSPC));
    ck_assert_int_eq(sharc__sampler_save(s, blob, size), 0);
    size_t buffered = sharc__sampler_buffered(s);
    size_t pos = so.pos;
    sharc__sampler_stats stats_saved;
    sharc__sampler_get_stats(s, &stats_saved);
    sharc__sampler_close(&s); /* hands the buffered items back */
    ck_assert_uint_eq(so.released[SHARC__RELEASE_CLOSE], buffered);

    src so2;
    src_init(&so2, n_items);
    memcpy(so2.dur, so.dur, n_items * sizeof *so.dur);
    so2.bytes_each = 1000;
    so2.pos = pos;
    for (size_t i = 0; i < pos; i++)
        so2.state[i] = ST_BATCHED; /* consumed before the save, or reloaded below */
    for (size_t i = 0; i < n_items; i++)
        if (so.state[i] == ST_RELEASED && so.reason[i] == SHARC__RELEASE_CLOSE)
            so2.state[i] = ST_NONE;
    sharc__sampler_source io = source_of(&so2);
    ck_assert_int_eq(sharc__sampler_restore(ctx_quiet(), &st, &io, blob, size, &s), 0);
    ck_assert_uint_eq(so2.reloads, buffered); /* O(buffer), not O(steps) */
    sharc__sampler_stats stats;
    sharc__sampler_get_stats(s, &stats);
    ck_assert_int_eq(memcmp(&stats, &stats_saved, sizeof stats), 0);
    rc = drain(s, &st, &so2, &q, SIZE_MAX);
    ck_assert_int_eq(rc, SHARC_END);
    ck_assert_uint_eq(q.nb, full->nb);
    ck_assert_uint_eq(q.nk, full->nk);
    ck_assert_int_eq(memcmp(q.keys, full->keys, q.nk * sizeof *q.keys), 0);
    ck_assert_int_eq(memcmp(q.sizes, full->sizes, q.nb * sizeof *q.sizes), 0);
    sharc__sampler_close(&s);
    free(blob);
    seq_free(&q);
    src_free(&so);
    src_free(&so2);
}

START_TEST(save_restore_equals_uninterrupted)
{
    for (int variant = 0; variant < 3; variant++) {
        const size_t n_items = 1500;
        sharc__sampler_settings st;
        resume_settings(&st, variant);
        src so;
        src_init(&so, n_items);
        random_durations(&so, 500 + (uint64_t)variant, 0.1, 20);
        so.bytes_each = 1000;
        seq full;
        seq_init(&full, n_items);
        run_to_end(&st, &so, &full);
        ck_assert_uint_gt(full.nb, 20);
        const size_t ks[] = {0, 1, 2, full.nb / 2, full.nb - 3, full.nb - 1, full.nb, full.nb + 1};
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
            save_restore_at(variant, ks[i], &full, n_items);
        seq_free(&full);
        src_free(&so);
    }
}
END_TEST

/* A blob taken mid-run, with the settings and source it came from. */
typedef struct saved {
    sharc__sampler_settings st;
    src so;
    unsigned char *blob;
    size_t size;
} saved;

static void make_saved(saved *sv)
{
    resume_settings(&sv->st, 0);
    src_init(&sv->so, 600);
    random_durations(&sv->so, 8, 0.1, 20);
    sharc__sampler *s = open_ok(&sv->st, &sv->so);
    seq q;
    seq_init(&q, sv->so.n);
    ck_assert_int_eq(drain(s, &sv->st, &sv->so, &q, 10), 0);
    sv->size = sharc__sampler_state_size(s);
    sv->blob = malloc(sv->size);
    ck_assert_int_eq(sharc__sampler_save(s, sv->blob, sv->size), 0);
    sharc__sampler_close(&s);
    seq_free(&q);
}

static int try_restore(saved *sv, const sharc__sampler_settings *st, const void *blob, size_t n)
{
    for (size_t i = 0; i < sv->so.n; i++)
        if (sv->so.state[i] != ST_BATCHED)
            sv->so.state[i] = ST_NONE;
    sv->so.reloads = 0;
    sharc__sampler *s;
    sharc__sampler_source io = source_of(&sv->so);
    int rc = sharc__sampler_restore(ctx_quiet(), st, &io, blob, n, &s);
    if (rc == 0)
        sharc__sampler_close(&s);
    else
        ck_assert_ptr_null(s);
    return rc;
}

START_TEST(corrupt_states_are_rejected)
{
    saved sv;
    make_saved(&sv);
    ck_assert_int_eq(try_restore(&sv, &sv.st, sv.blob, sv.size), 0);
    unsigned char *copy = malloc(sv.size);
    for (size_t i = 0; i < sv.size; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            memcpy(copy, sv.blob, sv.size);
            copy[i] ^= (unsigned char)(1u << bit);
            ck_assert_msg(try_restore(&sv, &sv.st, copy, sv.size) == SHARC_ERR_STATE,
                          "flipped byte %zu accepted", i);
            ck_assert_uint_eq(sv.so.reloads, 0); /* rejected before touching any payload */
        }
    }
    for (size_t n = 0; n < sv.size; n++)
        ck_assert_int_eq(try_restore(&sv, &sv.st, sv.blob, n), SHARC_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(quiet_ctx.error, "sampler state:"));

    /* A forged state with its checksum redone: an all-zero generator (bytes 24..55) would
     * stay all zeros; it is refused before any item is reloaded. */
    memcpy(copy, sv.blob, sv.size);
    memset(copy + 24, 0, 32);
    sharc__sampler_seal(copy, sv.size);
    ck_assert_int_eq(try_restore(&sv, &sv.st, copy, sv.size), SHARC_ERR_STATE);
    ck_assert_str_eq(quiet_ctx.error,
                     "cannot resume: sampler state: a random generator's state is all zeros");
    ck_assert_uint_eq(sv.so.reloads, 0);

    memcpy(copy, sv.blob, sv.size);
    copy[0] = 'X';
    ck_assert_int_eq(try_restore(&sv, &sv.st, copy, sv.size), SHARC_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(quiet_ctx.error, "bad magic"));

    /* Version 1 states (saved with their bins known, fitting the buffer) still resume; a
     * version this build does not know is refused by number. */
    ck_assert_uint_eq(((const unsigned char *)sv.blob)[4], 2);
    memcpy(copy, sv.blob, sv.size);
    copy[4] = 1;
    sharc__sampler_seal(copy, sv.size);
    ck_assert_int_eq(try_restore(&sv, &sv.st, copy, sv.size), 0);
    copy[4] = 3;
    sharc__sampler_seal(copy, sv.size);
    ck_assert_int_eq(try_restore(&sv, &sv.st, copy, sv.size), SHARC_ERR_STATE);
    ck_assert_str_eq(quiet_ctx.error,
                     "cannot resume: sampler state: version 3, this build reads versions 1 and 2");

    sharc__sampler_settings other = sv.st;
    other.seed++;
    ck_assert_int_eq(try_restore(&sv, &other, sv.blob, sv.size), SHARC_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(quiet_ctx.error, "different sampler settings"));
    other = sv.st;
    other.max_duration += 1;
    ck_assert_int_eq(try_restore(&sv, &other, sv.blob, sv.size), SHARC_ERR_STATE);

    /* The data behind a key changed: rejected, reloaded items handed back. */
    sv.so.reload_bias = 0.5;
    ck_assert_int_eq(try_restore(&sv, &sv.st, sv.blob, sv.size), SHARC_ERR_STATE);
    /* Named by its key here (this source describes nothing), with both durations. */
    ck_assert_msg(strstr(quiet_ctx.error, "cannot resume: item 0x") &&
                      strstr(quiet_ctx.error, " bytes, and lasted ") &&
                      strstr(quiet_ctx.error, "when the state was saved: the data changed since"),
                  "%s", quiet_ctx.error);
    ck_assert_uint_eq(sv.so.released[SHARC__RELEASE_REJECTED], 1);
    free(copy);
    free(sv.blob);
    src_free(&sv.so);
}
END_TEST

/* ---- errors, limits, memory --------------------------------------------------------- */

START_TEST(pull_errors_are_returned_and_nothing_is_lost)
{
    src so;
    src_init(&so, 300);
    random_durations(&so, 4, 0.5, 10);
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.max_duration = 30;
    st.num_buckets = 3;
    st.num_cuts_for_bins_estimate = 50;
    st.buffer_size = 50;
    so.fail_at = 20; /* during the first fill */
    so.fail_rc = SHARC_ERR_IO;
    sharc__sampler *s = open_ok(&st, &so);
    sharc__sitem *items;
    size_t n;
    ck_assert_int_eq(sharc__sampler_next(s, &items, &n), SHARC_ERR_IO);
    ck_assert_uint_eq(n, 0);
    so.fail_at = 120; /* during a refill after a batch: reported by the next call */
    seq q;
    seq_init(&q, so.n);
    int rc;
    while ((rc = drain(s, &st, &so, &q, SIZE_MAX)) == SHARC_ERR_IO)
        ;
    ck_assert_int_eq(rc, SHARC_END);
    ck_assert_uint_eq(q.nk, so.n);
    sharc__sampler_close(&s);

    /* An invalid duration is an error naming the item, and the item goes back. */
    memset(so.state, 0, so.n * sizeof *so.state);
    so.pos = 0;
    so.dur[7] = NAN;
    s = open_ok(&st, &so);
    ck_assert_int_eq(sharc__sampler_next(s, &items, &n), SHARC_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(quiet_ctx.error, "item 0x7 has duration nan"));
    ck_assert_int_eq(so.reason[7], SHARC__RELEASE_REJECTED);
    sharc__sampler_close(&s);
    ck_assert_uint_eq(so.released[SHARC__RELEASE_CLOSE], 7);
    seq_free(&q);
    src_free(&so);
}
END_TEST

START_TEST(byte_budget_bounds_the_buffer)
{
    src so;
    src_init(&so, 500);
    random_durations(&so, 9, 0.5, 10);
    so.bytes_each = 1000;
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.max_duration = 25;
    st.num_buckets = 3;
    st.num_cuts_for_bins_estimate = 100;
    st.buffer_size = 100;
    st.max_buffer_bytes = 10500; /* room for 10 items */
    sharc__sampler *s = open_ok(&st, &so);
    seq q;
    seq_init(&q, so.n);
    size_t peak = 0;
    while (drain(s, &st, &so, &q, 1) == 0) {
        size_t b = sharc__sampler_buffered(s);
        peak = b > peak ? b : peak;
        ck_assert_uint_le(b, 11); /* 10 in the buckets, 1 waiting for room */
    }
    ck_assert_uint_eq(peak, 11);
    ck_assert_uint_eq(q.nk, so.n);
    sharc__sampler_close(&s);
    seq_free(&q);
    src_free(&so);
}
END_TEST

static size_t n_allocs;
static void *counting_alloc(void *cookie, size_t size, size_t align)
{
    (void)cookie;
    (void)align;
    n_allocs++;
    return malloc(size);
}
static void counting_free(void *cookie, void *p)
{
    (void)cookie;
    free(p);
}

START_TEST(no_allocation_per_batch)
{
    src so;
    src_init(&so, 3000);
    random_durations(&so, 10, 0.5, 20);
    sharc__sampler_settings st;
    sharc__sampler_default_settings(&st);
    st.max_duration = 60;
    st.num_buckets = 8;
    st.num_cuts_for_bins_estimate = 500;
    st.buffer_size = 400;
    st.shuffle = 1;
    sharc__ctx ctx;
    sharc_allocator a = {NULL, counting_alloc, counting_free};
    sharc_logger log = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, &a, &log);
    sharc__sampler *s;
    sharc__sampler_source io = source_of(&so);
    ck_assert_int_eq(sharc__sampler_open(&ctx, &st, &io, &s), 0);
    seq q;
    seq_init(&q, so.n);
    ck_assert_int_eq(drain(s, &st, &so, &q, 1), 0); /* estimation allocates once */
    size_t after_first = n_allocs;
    ck_assert_int_eq(drain(s, &st, &so, &q, SIZE_MAX), SHARC_END);
    ck_assert_uint_eq(n_allocs, after_first);
    ck_assert_uint_gt(q.nb, 50);
    sharc__sampler_close(&s);
    seq_free(&q);
    src_free(&so);
}
END_TEST

START_TEST(small_and_empty_streams)
{
    for (size_t n_items = 0; n_items < 6; n_items++) {
        src so;
        src_init(&so, n_items);
        for (size_t i = 0; i < n_items; i++)
            so.dur[i] = 1.0 + (double)i;
        sharc__sampler_settings st;
        sharc__sampler_default_settings(&st);
        st.max_duration = 4; /* num_buckets 10 > items: estimated with fewer buckets */
        seq q;
        seq_init(&q, so.n);
        run_to_end(&st, &so, &q);
        ck_assert_uint_eq(q.nk, n_items);
        seq_free(&q);
        src_free(&so);
    }
}
END_TEST

START_TEST(bad_settings_are_rejected)
{
    src so;
    src_init(&so, 1);
    sharc__sampler_source io = source_of(&so);
    sharc__sampler *s = (sharc__sampler *)&so;
    sharc__sampler_settings st;
    static const double unsorted[] = {3, 1}, one[] = {1}, two[] = {1, 2};
    static const uint32_t bbs[] = {4, 0};
    static const struct {
        const char *text;
        int what;
    } cases[] = {{"one of max_duration, max_cuts", 0},
                 {"buffer_size 0", 1},
                 {"bins must be finite", 2},
                 {"bucket_batch_size excludes", 3},
                 {"bucket_batch_size[1] is 0", 4},
                 {"needs explicit bins", 5},
                 {"max_cut_duration 1 < min_duration 2", 6}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sharc__sampler_default_settings(&st);
        st.max_duration = cases[i].what == 0 || cases[i].what >= 4 ? 0 : 10;
        st.max_cuts = cases[i].what == 6 ? 5 : 0;
        if (cases[i].what == 1)
            st.buffer_size = 0;
        if (cases[i].what == 2)
            st.bins = unsorted, st.n_bins = 2;
        if (cases[i].what == 3)
            st.bins = one, st.n_bins = 1, st.bucket_batch_size = bbs;
        if (cases[i].what == 4)
            st.bins = two, st.n_bins = 2, st.bucket_batch_size = bbs;
        if (cases[i].what == 5)
            st.bucket_batch_size = bbs;
        if (cases[i].what == 6)
            st.min_item_duration = 2, st.max_item_duration = 1;
        ck_assert_int_eq(sharc__sampler_open(ctx_quiet(), &st, &io, &s), SHARC_ERR(EINVAL));
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(quiet_ctx.error, cases[i].text), "case %zu: %s", i, quiet_ctx.error);
    }
    src_free(&so);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("sampler");
    TCase *tc = tcase_create("bins");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, bisect_left_boundaries);
    tcase_add_test(tc, bins_equal_lhotse);
    tcase_add_test(tc, bucket_of_2d_is_nemo_strict);
    tcase_add_test(tc, bins_reject_bad_input);
    tcase_add_test(tc, bins_from_first_n_items);
    tcase_add_test(tc, bins_from_first_n_items_under_byte_budget);
    suite_add_tcase(su, tc);
    tc = tcase_create("batches");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_item_exactly_once);
    tcase_add_test(tc, quadratic_term_and_max_cuts);
    tcase_add_test(tc, triggering_item_included);
    tcase_add_test(tc, oversized_item_is_a_single_batch_with_warning);
    tcase_add_test(tc, fixed_bucket_batch_sizes);
    tcase_add_test(tc, filters_are_counted_and_released);
    tcase_add_test(tc, drop_last_hands_back_the_rest);
    tcase_add_test(tc, sync_reuses_draw_world_size_times);
    tcase_add_test(tc, bucket_choice_matches_lhotse_model);
    tcase_add_test(tc, deterministic_and_seed_dependent);
    suite_add_tcase(su, tc);
    tc = tcase_create("state");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, save_restore_equals_uninterrupted);
    tcase_add_test(tc, corrupt_states_are_rejected);
    suite_add_tcase(su, tc);
    tc = tcase_create("limits");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, pull_errors_are_returned_and_nothing_is_lost);
    tcase_add_test(tc, byte_budget_bounds_the_buffer);
    tcase_add_test(tc, no_allocation_per_batch);
    tcase_add_test(tc, small_and_empty_streams);
    tcase_add_test(tc, bad_settings_are_rejected);
    suite_add_tcase(su, tc);
    return tu_run_suite(su);
}

/*
 * NeMo's 2D bucket estimate (buckets_2d.h), step by step as estimate_duration_bins_2d.py.
 */
#include "buckets_2d.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

typedef struct cut_dt {
    float d;   /* numpy float32, as the script holds durations */
    int32_t t; /* numpy int32 */
} cut_dt;

/* np.rec.fromarrays([A, B]).sort(): by the first field, then the second. */
static int by_duration(const void *a, const void *b)
{
    const cut_dt *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return (x->t > y->t) - (x->t < y->t);
}

static int by_tokens(const void *a, const void *b)
{
    const cut_dt *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->d > y->d) - (x->d < y->d);
}

/* numpy's pairwise summation of float32 (sum() of a float32 array), in float32. */
static float pairwise_f32(const cut_dt *a, size_t n)
{
    if (n < 8) {
        float res = 0.f;
        for (size_t i = 0; i < n; i++)
            res += a[i].d;
        return res;
    }
    if (n <= 128) {
        float r[8];
        size_t i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j].d;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j].d;
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i].d;
        return res;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_f32(a, n2) + pairwise_f32(a + n2, n - n2);
}

/* The same for float64 values (np.mean, np.std). */
static double pairwise_f64(const double *a, size_t n)
{
    if (n < 8) {
        double res = 0.;
        for (size_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        size_t i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_f64(a, n2) + pairwise_f64(a + n2, n - n2);
}

/* round(np.float32, 3): np.around in float32 (x * 1000, to even, / 1000). */
static float round3(float x)
{
    return rintf(x * 1000.0f) / 1000.0f;
}

typedef struct est {
    cut_dt *cuts;
    size_t n;
    int sub;
    double threshold;
    bins_2d *out;
    size_t cap;
    double *tps, *dev; /* work space, n each */
    char *err;
    size_t err_cap;
} est;

static int push(est *e, double d, int32_t t, double tps)
{
    if (e->out->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 64;
        double *dd = realloc(e->out->duration, cap * sizeof *dd);
        if (dd)
            e->out->duration = dd;
        int32_t *tt = realloc(e->out->tokens, cap * sizeof *tt);
        if (tt)
            e->out->tokens = tt;
        double *pp = realloc(e->out->max_tps, cap * sizeof *pp);
        if (pp)
            e->out->max_tps = pp;
        if (!dd || !tt || !pp)
            return snprintf(e->err, e->err_cap, "out of memory"), -1;
        e->cap = cap;
    }
    e->out->duration[e->out->n] = d;
    e->out->tokens[e->out->n] = t;
    e->out->max_tps[e->out->n++] = tps;
    return 0;
}

/* _estimate_token_buckets: the sub-buckets of the cuts [start, end), at duration `bd`. */
static int token_buckets(est *e, double bd, size_t start, size_t end, int k)
{
    const size_t m = end - start;
    cut_dt *c = e->cuts + start;
    for (size_t i = 0; i < m; i++)
        e->tps[i] = (double)c[i].t / (double)c[i].d; /* int32 / float32: float64 */
    const double mean = pairwise_f64(e->tps, m) / (double)m;
    for (size_t i = 0; i < m; i++)
        e->dev[i] = (e->tps[i] - mean) * (e->tps[i] - mean);
    const double sd = sqrt(pairwise_f64(e->dev, m) / (double)m);
    /* The non-outliers, in order, to the front of the range (the cuts are not needed again
     * in their duration order: later ranges start after this one). */
    size_t kept = 0;
    double max_tps = 0;
    for (size_t i = 0; i < m; i++)
        if ((e->tps[i] - mean) / sd <= e->threshold) {
            max_tps = kept == 0 || e->tps[i] > max_tps ? e->tps[i] : max_tps;
            c[kept++] = c[i];
        }
    if (kept == 0)
        return snprintf(e->err, e->err_cap,
                        "the bucket up to %.3f s has no cuts left after the tokens-per-second "
                        "outliers (%zu cuts, all alike or none): NeMo's script fails there too",
                        bd, m),
               -1;
    qsort(c, kept, sizeof *c, by_tokens);
    int64_t total = 0;
    for (size_t i = 0; i < kept; i++)
        total += c[i].t;
    const double per_sub = (double)total / (double)k;
    int64_t tot = 0;
    for (size_t i = 0; i < kept; i++) {
        if ((double)tot > per_sub) {
            if (push(e, bd, c[i].t, max_tps) < 0)
                return -1;
            tot = 0;
        }
        tot += c[i].t;
    }
    return push(e, bd, c[kept - 1].t, max_tps);
}

int bins_2d_estimate(const double *durations, const uint32_t *tokens, size_t n, int num_buckets,
                     int num_subbuckets, double max_duration, double threshold, bins_2d *out,
                     char *err, size_t err_cap)
{
    *out = (bins_2d){0};
    est e = {.n = n,
             .sub = num_subbuckets,
             .threshold = threshold,
             .out = out,
             .err = err,
             .err_cap = err_cap};
    float *dbins = malloc((n + 1) * sizeof *dbins);
    size_t *starts = malloc((n + 1) * sizeof *starts), nd = 0;
    e.cuts = malloc((n + 1) * sizeof *e.cuts);
    e.tps = malloc((n + 1) * sizeof *e.tps);
    e.dev = malloc((n + 1) * sizeof *e.dev);
    int rc = -1;
    if (!dbins || !starts || !e.cuts || !e.tps || !e.dev || n == 0) {
        snprintf(err, err_cap, n ? "out of memory" : "no cuts");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        e.cuts[i] = (cut_dt){(float)durations[i], (int32_t)tokens[i]};
    qsort(e.cuts, n, sizeof *e.cuts, by_duration);
    const double per_bucket = (double)pairwise_f32(e.cuts, n) / (double)num_buckets;
    const double maxd = max_duration > 0 ? max_duration : (double)round3(e.cuts[n - 1].d);
    /* Equal-duration buckets: a bin where the running total passes the share. */
    double tot = 0.0;
    for (size_t i = 0; i < n; i++) {
        float size = e.cuts[i].d;
        if (tot > per_bucket) {
            size = round3(size);
            dbins[nd] = size;
            starts[nd++] = i;
            tot = 0.0;
        }
        tot += (double)size;
    }
    /* Bins of one duration are merged, with their sub-buckets, into the last of them. */
    size_t start = 0;
    int skipped = 1;
    rc = 0;
    for (size_t i = 0; i < nd && rc == 0; i++) {
        if ((i + 1 < nd && dbins[i + 1] == dbins[i]) || (i + 1 == nd && maxd == (double)dbins[i])) {
            skipped++;
            continue;
        }
        if (starts[i] == start) {
            snprintf(err, err_cap, "the bucket up to %.3f s holds no cuts", (double)dbins[i]);
            rc = -1;
            break;
        }
        rc = token_buckets(&e, (double)dbins[i], start, starts[i], num_subbuckets * skipped);
        start = starts[i];
        skipped = 1;
    }
    if (rc == 0 && start == n) {
        snprintf(err, err_cap, "the last bucket (up to %.3f s) holds no cuts", maxd);
        rc = -1;
    }
    if (rc == 0)
        rc = token_buckets(&e, maxd, start, n, num_subbuckets * skipped);
done:
    free(dbins);
    free(starts);
    free(e.cuts);
    free(e.tps);
    free(e.dev);
    if (rc < 0)
        bins_2d_free(out);
    return rc;
}

void bins_2d_free(bins_2d *b)
{
    free(b->duration);
    free(b->tokens);
    free(b->max_tps);
    *b = (bins_2d){0};
}

/* The bins as the script prints them: [[d,t],...] with d to 3 places. */
static void print_bins(const bins_2d *b)
{
    putchar('[');
    for (size_t i = 0; i < b->n; i++)
        printf("%s[%.3f,%" PRId32 "]", i ? "," : "", b->duration[i], b->tokens[i]);
    putchar(']');
}

/* The caps as the script prints them: [x,...] to 2 places. */
static void print_tps(const bins_2d *b)
{
    putchar('[');
    for (size_t i = 0; i < b->n; i++)
        printf("%s%.2f", i ? "," : "", b->max_tps[i]);
    putchar(']');
}

int cli_buckets_2d(const double *durations, const uint32_t *tokens, size_t n, uint64_t ignored,
                   int num_buckets, int num_subbuckets, double max_duration, double threshold,
                   int json)
{
    bins_2d b;
    char err[256];
    if (bins_2d_estimate(durations, tokens, n, num_buckets, num_subbuckets, max_duration, threshold,
                         &b, err, sizeof err) < 0) {
        cli_fail("buckets", "cannot estimate 2D bins from %zu cuts: %s", n, err);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        fputs("{\"bucket_duration_bins\":", stdout);
        print_bins(&b);
        fputs(",\"max_tps\":", stdout);
        print_tps(&b);
        printf(",\"cuts\":%zu,\"ignored_cuts\":%" PRIu64 ",\"num_buckets\":%d}\n", n, ignored,
               num_buckets);
    } else {
        printf("Use the following options in your config:\n\tuse_bucketing=1\n"
               "\tnum_buckets=%d\n\tbucket_duration_bins=",
               num_buckets);
        print_bins(&b);
        printf("\nThe max_tps setting below is optional, use it if your data has low quality "
               "long transcript outliers:\n\tmax_tps=");
        print_tps(&b);
        printf("\n-- %zu cuts, %zu 2D buckets (%" PRIu64 " cuts ignored)\n", n, b.n, ignored);
    }
    bins_2d_free(&b);
    return cli_finish_output("buckets", CLI_EXIT_OK);
}

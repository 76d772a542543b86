/*
 * The sampler's settings and bins (sampler.h): defaults, checks, the hash a state is checked
 * by, the bins (given, or estimated as Lhotse's estimate_duration_buckets) and the bucket of
 * a duration (1D) or of a duration and token count (NeMo's 2D find_smallest_bucket), and
 * the filters an item meets before any bucket.
 */
#include "batching/sampler.h"
#include "batching/sampler_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "sharc/reader.h"

#define MAX_BUFFER (1u << 24)
#define MAX_BINS   65536u

void sharc__sampler_default_settings(sharc__sampler_settings *s)
{
    memset(s, 0, sizeof *s);
    s->num_buckets = 10;
    s->num_cuts_for_bins_estimate = 10000;
    s->buffer_size = 20000;
    s->max_buffer_bytes = 2ull << 30;
    s->sync_buckets = 1;
    s->world_size = 1;
}

/* ---- bins ---------------------------------------------------------------------------- */

size_t sharc__bucket_of(const double *bins, size_t n_bins, double duration)
{
    size_t lo = 0, hi = n_bins;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (bins[mid] < duration)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t sharc__bucket_of_2d(const double *bins, const double *tokens, const double *max_tps,
                           size_t n_bins, double duration, uint32_t n_tokens)
{
    const size_t begin = sharc__bucket_of(bins, n_bins, duration);
    if (begin == n_bins)
        return n_bins;
    size_t end = begin;
    while (end < n_bins && bins[end] == bins[begin])
        end++;
    const size_t fit = begin + sharc__bucket_of(tokens + begin, end - begin, (double)n_tokens);
    if (fit == end)
        return n_bins;
    /* NeMo compares tokens / duration > max_ratio: a zero duration gives inf (or nan for no
     * tokens, which passes), as numpy's division does. */
    if (max_tps && (double)n_tokens / duration > max_tps[fit])
        return n_bins;
    return fit;
}

/* numpy's pairwise summation (float64 add.reduce), so the per-bucket total, and thus
 * every comparison against it, is bit-identical to Lhotse's `sizes.sum()`. */
static double pairwise_sum(const double *a, size_t n)
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
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Lhotse's loop over the sorted sizes; at most k - 1 bins since every bin closes a run
 * whose total exceeds sum / k. */
static size_t bins_from_sorted(const double *sizes, size_t n, uint32_t k, double *out)
{
    double per_bucket = pairwise_sum(sizes, n) / (double)k;
    double tot = 0.0;
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        if (tot > per_bucket && nb + 1 < k) {
            out[nb++] = sizes[i];
            tot = 0.0;
        }
        tot += sizes[i];
    }
    return nb;
}

int sharc__estimate_bins(sharc__ctx *ctx, const double *durations, size_t n, uint32_t num_buckets,
                         double *bins_out, size_t *n_bins_out)
{
    if (!durations || !bins_out || !n_bins_out || num_buckets < 2 || num_buckets > MAX_BINS ||
        n < num_buckets)
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "estimate bins: need 2 <= num_buckets (%u) <= %u and at least "
                           "num_buckets durations (got %zu)",
                           num_buckets, MAX_BINS, n);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(durations[i]) || durations[i] < 0)
            return sharc__fail(ctx, SHARC_ERR(EINVAL),
                               "estimate bins: duration %zu is %g, not a finite value >= 0", i,
                               durations[i]);
    double *sorted = sharc__malloc(ctx, n * sizeof *sorted);
    if (!sorted)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "estimate bins: out of memory for %zu values",
                           n);
    memcpy(sorted, durations, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    *n_bins_out = bins_from_sorted(sorted, n, num_buckets, bins_out);
    sharc__free(ctx, sorted);
    return 0;
}

int sharc_estimate_duration_bins(const double *durations, size_t n, int num_buckets,
                                 double *bins_out, size_t *n_bins_out)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    if (num_buckets < 0)
        return sharc__fail(&ctx, SHARC_ERR(EINVAL), "estimate bins: num_buckets %d < 0",
                           num_buckets);
    return sharc__estimate_bins(&ctx, durations, n, (uint32_t)num_buckets, bins_out, n_bins_out);
}

/* ---- settings ------------------------------------------------------------------------ */

/* Everything that changes the batch sequence goes into the hash a state is checked by. */
uint64_t sharc__sampler_hash_settings(const sharc__sampler *s)
{
    const sharc__sampler_settings *st = &s->st;
    uint64_t h = SHARC__FNV_OFFSET;
    h = sharc__fnv1a_u64(h, dbits(st->max_duration));
    if (st->token_equivalent_duration > 0) /* only when set: older states still match */
        h = sharc__fnv1a_u64(h, dbits(st->token_equivalent_duration));
    h = sharc__fnv1a_u64(h, st->max_cuts);
    h = sharc__fnv1a_u64(h, dbits(st->quadratic_duration));
    h = sharc__fnv1a_u64(h, (uint64_t)s->estimating);
    if (s->estimating) {
        h = sharc__fnv1a_u64(h, st->num_buckets);
        h = sharc__fnv1a_u64(h, st->num_cuts_for_bins_estimate);
    }
    h = sharc__fnv1a_u64(h, st->n_bins);
    for (size_t i = 0; !s->estimating && i < st->n_bins; i++)
        h = sharc__fnv1a_u64(h, dbits(st->bins[i]));
    h = sharc__fnv1a_u64(h, s->bbs != NULL);
    for (size_t i = 0; s->bbs && i < st->n_bins; i++)
        h = sharc__fnv1a_u64(h, s->bbs[i]);
    h = sharc__fnv1a_u64(h, st->buffer_size);
    h = sharc__fnv1a_u64(h, st->max_buffer_bytes);
    h = sharc__fnv1a_u64(h, st->shuffle != 0);
    h = sharc__fnv1a_u64(h, st->drop_last != 0);
    h = sharc__fnv1a_u64(h, st->seed);
    h = sharc__fnv1a_u64(h, st->sync_buckets != 0);
    h = sharc__fnv1a_u64(h, st->sync_buckets ? st->world_size : 0);
    h = sharc__fnv1a_u64(h, dbits(st->min_item_duration));
    h = sharc__fnv1a_u64(h, dbits(st->max_item_duration));
    /* The token settings, only when set: states saved before they existed still match. */
    if (s->bin_tokens || st->n_max_tps || st->min_tps > 0 || st->min_tokens || st->max_tokens) {
        h = sharc__fnv1a_u64(h, 0x544f4b454e53ull); /* "TOKENS" */
        for (size_t i = 0; s->bin_tokens && i < st->n_bins; i++)
            h = sharc__fnv1a_u64(h, dbits(s->bin_tokens[i]));
        h = sharc__fnv1a_u64(h, st->n_max_tps);
        for (size_t i = 0; i < st->n_max_tps; i++)
            h = sharc__fnv1a_u64(h, dbits(s->max_tps[i]));
        h = sharc__fnv1a_u64(h, dbits(st->min_tps));
        h = sharc__fnv1a_u64(h, st->min_tokens);
        h = sharc__fnv1a_u64(h, st->max_tokens);
    }
    return h;
}

int sharc__sampler_bad_nonneg(double x)
{
    return !isfinite(x) || x < 0;
}

/* The 2D bins, the tokens-per-second caps and the token limits. */
static int check_token_settings(sharc__ctx *ctx, const sharc__sampler_settings *st)
{
#define BAD(...) sharc__fail(ctx, SHARC_ERR(EINVAL), "sampler settings: " __VA_ARGS__)
    if (st->bin_tokens) {
        if (!st->bins || !st->bucket_batch_size)
            return BAD("2D bins ([duration, tokens] pairs) need bucket_batch_size, one size per "
                       "pair");
        for (size_t i = 0; i < st->n_bins; i++) {
            const double t = st->bin_tokens[i];
            if (sharc__sampler_bad_nonneg(t))
                return BAD("2D bin %zu has a token limit of %g, not a finite value >= 0", i, t);
            if (i && st->bins[i] == st->bins[i - 1] && t < st->bin_tokens[i - 1])
                return BAD("2D bins must be sorted by duration, then tokens: bin %zu [%g, %g] "
                           "comes after [%g, %g]",
                           i, st->bins[i], t, st->bins[i - 1], st->bin_tokens[i - 1]);
        }
    }
    if (st->n_max_tps && !st->max_tps)
        return BAD("n_max_tps is %zu but max_tps is NULL", st->n_max_tps);
    if (st->n_max_tps > 1 && !(st->bin_tokens && st->n_max_tps == st->n_bins))
        return BAD("max_tps has %zu values: one, or one per 2D bin (%zu)", st->n_max_tps,
                   st->bin_tokens ? st->n_bins : (size_t)0);
    for (size_t i = 0; i < st->n_max_tps; i++)
        if (!(st->max_tps[i] > 0) || !isfinite(st->max_tps[i]))
            return BAD("max_tps[%zu] is %g, not a finite value > 0", i, st->max_tps[i]);
    if (sharc__sampler_bad_nonneg(st->min_tps))
        return BAD("min_tps %g is not a finite value >= 0", st->min_tps);
    if (st->n_max_tps == 1 && st->min_tps > st->max_tps[0])
        return BAD("min_tps %g > max_tps %g", st->min_tps, st->max_tps[0]);
    if (st->max_tokens && st->min_tokens > st->max_tokens)
        return BAD("min_tokens %u > max_tokens %u", st->min_tokens, st->max_tokens);
    if (sharc__sampler_bad_nonneg(st->token_equivalent_duration))
        return BAD("token_equivalent_duration %g is not a finite value >= 0",
                   st->token_equivalent_duration);
    if (st->batch_tokens && !(st->token_equivalent_duration > 0))
        return BAD("batch_tokens needs token_equivalent_duration (the seconds of audio a token "
                   "is worth)");
    if (st->batch_tokens && (st->max_duration > 0 || st->bucket_batch_size))
        return BAD("batch_tokens excludes max_duration and bucket_batch_size");
    return 0;
#undef BAD
}

int sharc__sampler_check_settings(sharc__ctx *ctx, const sharc__sampler_settings *st)
{
#define BAD(...) sharc__fail(ctx, SHARC_ERR(EINVAL), "sampler settings: " __VA_ARGS__)
    if (st->buffer_size < 1 || st->buffer_size > MAX_BUFFER)
        return BAD("buffer_size %u is not in 1..%u", st->buffer_size, MAX_BUFFER);
    if (sharc__sampler_bad_nonneg(st->max_duration) ||
        sharc__sampler_bad_nonneg(st->quadratic_duration) ||
        sharc__sampler_bad_nonneg(st->min_item_duration) ||
        sharc__sampler_bad_nonneg(st->max_item_duration))
        return BAD("max_duration, quadratic_duration, min_duration and max_cut_duration must "
                   "be finite and >= 0");
    if (st->max_item_duration > 0 && st->max_item_duration < st->min_item_duration)
        return BAD("max_cut_duration %g < min_duration %g", st->max_item_duration,
                   st->min_item_duration);
    if (st->sync_buckets && st->world_size < 1)
        return BAD("world_size must be >= 1 with sync_buckets");
    if (st->n_bins && !st->bins)
        return BAD("n_bins is %zu but bins is NULL", st->n_bins);
    if (st->bins) {
        if (st->n_bins < 1 || st->n_bins > MAX_BINS)
            return BAD("n_bins %zu is not in 1..%u", st->n_bins, MAX_BINS);
        for (size_t i = 0; i < st->n_bins; i++)
            if (sharc__sampler_bad_nonneg(st->bins[i]) || (i && st->bins[i] < st->bins[i - 1]))
                return BAD("bins must be finite, >= 0 and sorted (bin %zu is %g)", i, st->bins[i]);
    } else if (st->num_buckets < 1 || st->num_buckets > MAX_BINS ||
               st->num_cuts_for_bins_estimate < 1 || st->num_cuts_for_bins_estimate > MAX_BUFFER) {
        return BAD("num_buckets %u must be in 1..%u and num_cuts_for_bins_estimate %u in 1..%u",
                   st->num_buckets, MAX_BINS, st->num_cuts_for_bins_estimate, MAX_BUFFER);
    }
    if (st->bucket_batch_size) {
        if (!st->bins)
            return BAD("bucket_batch_size needs explicit bins");
        if (st->max_duration > 0 || st->max_cuts)
            return BAD("bucket_batch_size excludes max_duration and max_cuts");
        for (size_t i = 0; i < st->n_bins; i++)
            if (st->bucket_batch_size[i] < 1)
                return BAD("bucket_batch_size[%zu] is 0", i);
    } else if (!(st->max_duration > 0) && !st->max_cuts && !st->batch_tokens) {
        return BAD("one of max_duration, max_cuts, batch_tokens or bucket_batch_size is "
                   "required");
    }
    return check_token_settings(ctx, st);
#undef BAD
}

/* Whether the duration limits filter out an item of `duration`: SHARC__RELEASE_TOO_SHORT,
 * SHARC__RELEASE_TOO_LONG, or -1 when it passes. */
int sharc__sampler_filter_of(const sharc__sampler_settings *st, double duration)
{
    if (duration < st->min_item_duration)
        return SHARC__RELEASE_TOO_SHORT;
    if (st->max_item_duration > 0 && duration > st->max_item_duration)
        return SHARC__RELEASE_TOO_LONG;
    return -1;
}

/* Whether the token limits filter out `it` (NeMo's TokenCountFilter and, with one cap,
 * TokenPerSecondFilter, whose bounds are inclusive): the reason, or -1 when it passes. */
int sharc__sampler_token_filter_of(const sharc__sampler_settings *st, const sharc__sitem *it)
{
    const double tps = (double)it->tokens / it->duration; /* numpy's: inf or nan at 0 s */
    if (it->tokens < st->min_tokens)
        return SHARC__RELEASE_MIN_TOKENS;
    if (st->max_tokens && it->tokens > st->max_tokens)
        return SHARC__RELEASE_MAX_TOKENS;
    if (tps < st->min_tps)
        return SHARC__RELEASE_MIN_TPS;
    if (st->n_max_tps == 1 && tps > st->max_tps[0])
        return SHARC__RELEASE_MAX_TPS;
    return -1;
}

int sharc__filter_of_release(sharc__release_reason why)
{
    switch (why) {
    case SHARC__RELEASE_TOO_SHORT:
        return SHARC_FILTER_MIN_DURATION;
    case SHARC__RELEASE_TOO_LONG:
        return SHARC_FILTER_MAX_DURATION;
    case SHARC__RELEASE_MIN_TOKENS:
        return SHARC_FILTER_MIN_TOKENS;
    case SHARC__RELEASE_MAX_TOKENS:
        return SHARC_FILTER_MAX_TOKENS;
    case SHARC__RELEASE_MIN_TPS:
        return SHARC_FILTER_MIN_TPS;
    case SHARC__RELEASE_MAX_TPS:
        return SHARC_FILTER_MAX_TPS;
    case SHARC__RELEASE_NO_BUCKET:
        return SHARC_FILTER_NO_BUCKET;
    default:
        return -1;
    }
}

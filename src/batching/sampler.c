/*
 * The bucketing sampler (sampler.h): items pulled into duration buckets up to the buffer,
 * batches chosen among the buckets as Lhotse's DynamicBucketingSampler does, the leftovers
 * handed back at the end. Settings, bins and filters are in sampler_settings.c.
 */
#include "batching/sampler.h"
#include "batching/sampler_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/hash.h"
#include "base/le.h"
#include "base/rng.h"
#include "sharc/reader.h"

enum { FILTERED = SHARC_END + 1 }; /* pull_one: an item was filtered out */

/* ---- buckets ------------------------------------------------------------------------- */

static void bucket_reset(bucket *k)
{
    k->head = k->tail = NONE;
    k->count = 0;
    k->longest = 0;
}

static void list_append(sharc__sampler *s, size_t b, uint32_t slot)
{
    bucket *k = &s->buckets[b];
    s->next[slot] = NONE;
    s->prev[slot] = k->tail;
    if (k->tail != NONE)
        s->next[k->tail] = slot;
    else
        k->head = slot;
    k->tail = slot;
    k->count++;
    if (s->eff[slot] > k->longest)
        k->longest = s->eff[slot];
}

static void list_unlink(sharc__sampler *s, size_t b, uint32_t slot)
{
    bucket *k = &s->buckets[b];
    if (s->prev[slot] != NONE)
        s->next[s->prev[slot]] = s->next[slot];
    else
        k->head = s->next[slot];
    if (s->next[slot] != NONE)
        s->prev[s->next[slot]] = s->prev[slot];
    else
        k->tail = s->prev[slot];
    k->count--;
}

static double effective(const sharc__sampler *s, double d)
{
    return s->st.quadratic_duration > 0 ? d + d * d / s->st.quadratic_duration : d;
}

void sharc__sampler_admit(sharc__sampler *s, const sharc__sitem *it, size_t b)
{
    uint32_t slot = s->free_slots[--s->n_free];
    s->items[slot] = *it;
    s->eff[slot] = effective(s, sharc__sampler_length(s, it->duration));
    list_append(s, b, slot);
    s->count++;
    s->bytes += it->bytes;
}

size_t sharc__sampler_bucket_of(const sharc__sampler *s, const sharc__sitem *it)
{
    if (!s->bins_ready)
        return 0;
    if (s->bin_tokens)
        return sharc__bucket_of_2d(s->bins, s->bin_tokens, s->st.n_max_tps > 1 ? s->max_tps : NULL,
                                   s->n_bins, sharc__sampler_length(s, it->duration), it->tokens);
    return sharc__bucket_of(s->bins, s->n_bins, sharc__sampler_length(s, it->duration));
}

void sharc__sampler_give_back(sharc__sampler *s, sharc__sitem *it, sharc__release_reason why)
{
    if (s->src.release)
        s->src.release(s->src.cookie, it, why);
}

/* Hand every held item back (drop_last end, close) and empty the buffer. */
static uint64_t release_all(sharc__sampler *s, sharc__release_reason why)
{
    uint64_t n = 0;
    for (size_t b = 0; b < s->nb; b++) {
        for (uint32_t slot = s->buckets[b].head; slot != NONE; slot = s->next[slot]) {
            sharc__sampler_give_back(s, &s->items[slot], why);
            s->free_slots[s->n_free++] = slot;
            n++;
        }
        bucket_reset(&s->buckets[b]);
    }
    if (s->has_pending) {
        sharc__sampler_give_back(s, &s->pending, why);
        s->has_pending = 0;
        n++;
    }
    s->count = 0;
    s->bytes = 0;
    return n;
}

/* ---- pulling ------------------------------------------------------------------------- */

const char *sharc__sampler_reject(sharc__sampler *s, sharc__sitem *it, char *name, size_t cap)
{
    sharc__sampler_item_name(s, it, name, cap);
    sharc__sampler_give_back(s, it, SHARC__RELEASE_REJECTED);
    return name;
}

/* What names `it` in a message: the source's description, else its key. */
const char *sharc__sampler_item_name(const sharc__sampler *s, const sharc__sitem *it, char *out,
                                     size_t cap)
{
    if (s->src.describe)
        s->src.describe(s->src.cookie, it, out, cap);
    else
        snprintf(out, cap, "item %#llx", (unsigned long long)it->key);
    return out;
}

/* Pull one item into `pending`. 0: pending set; FILTERED: item filtered, pull again. */
static int pull_one(sharc__sampler *s)
{
    sharc__sitem it = {0};
    int rc = s->src.pull(s->src.cookie, &it);
    if (rc == SHARC_END) {
        s->exhausted = 1;
        return SHARC_END;
    }
    if (rc < 0)
        return rc;
    if (rc != 0)
        return sharc__fail(s->ctx, SHARC_ERR(EINVAL), "sampler: pull returned %d", rc);
    s->stats.pulled++;
    char name[SHARC__ERRLEN / 2];
    if (sharc__sampler_bad_nonneg(it.duration)) {
        sharc__sampler_reject(s, &it, name, sizeof name);
        return sharc__fail(s->ctx, SHARC_ERR_FORMAT,
                           "sampler: %s has duration %g, not a finite value >= 0", name,
                           it.duration);
    }
    int filter = sharc__sampler_filter_of(&s->st, it.duration);
    if (filter >= 0) {
        if (filter == SHARC__RELEASE_TOO_SHORT)
            s->stats.too_short++;
        else
            s->stats.too_long++;
        sharc__sampler_give_back(s, &it, (sharc__release_reason)filter);
        return FILTERED;
    }
    /* Counted by the source, as the state's counters predate these filters. */
    if ((filter = sharc__sampler_token_filter_of(&s->st, &it)) >= 0) {
        sharc__sampler_give_back(s, &it, (sharc__release_reason)filter);
        return FILTERED;
    }
    if (s->bin_tokens && sharc__sampler_bucket_of(s, &it) == s->n_bins) {
        /* Over its bucket's max_tps when it fits one without the caps. */
        int over_tps =
            s->st.n_max_tps > 1 &&
            sharc__bucket_of_2d(s->bins, s->bin_tokens, NULL, s->n_bins,
                                sharc__sampler_length(s, it.duration), it.tokens) < s->n_bins;
        sharc__sampler_give_back(s, &it,
                                 over_tps ? SHARC__RELEASE_MAX_TPS : SHARC__RELEASE_NO_BUCKET);
        return FILTERED;
    }
    if (s->bbs && sharc__sampler_length(s, it.duration) > s->bins[s->n_bins - 1]) {
        sharc__sampler_reject(s, &it, name, sizeof name);
        return sharc__fail(s->ctx, SHARC_ERR_TOO_LARGE,
                           "sampler: %s lasts %g s, longer than the last bin (%g s), which "
                           "bucket_batch_size has no batch size for; filter such cuts with a "
                           "maximum duration (max_cut_duration, --max-cut-duration)",
                           name, it.duration, s->bins[s->n_bins - 1]);
    }
    s->pending = it;
    s->has_pending = 1;
    return 0;
}

static int over_budget(const sharc__sampler *s)
{
    uint64_t max = s->st.max_buffer_bytes;
    return max && s->count > 0 && (s->bytes > max || s->pending.bytes > max - s->bytes);
}

/* Fill the buckets up to `target` items (or the byte budget, or the end of the stream). */
static int top_up(sharc__sampler *s, size_t target)
{
    while (!s->stopped) {
        if (!s->has_pending) {
            if (s->exhausted || s->count >= target)
                return 0;
            int rc = pull_one(s);
            if (rc == SHARC_END)
                return 0;
            if (rc < 0)
                return rc;
            if (rc == FILTERED)
                continue;
        }
        if (s->count >= target || over_budget(s))
            return 0;
        sharc__sampler_admit(s, &s->pending, sharc__sampler_bucket_of(s, &s->pending));
        s->has_pending = 0;
    }
    return 0;
}

/* The durations the bins are estimated from, gathered by a peek. */
typedef struct peek_into {
    const sharc__sampler *s;
    double *d;
    size_t n, want;
} peek_into;

static int take_peeked(void *cookie, double duration)
{
    peek_into *p = cookie;
    if (sharc__sampler_bad_nonneg(duration))
        return SHARC__PEEK_STOP; /* pull reports it when it gets there */
    if (sharc__sampler_filter_of(&p->s->st, duration) >= 0)
        return SHARC__PEEK_FILTERED;
    p->d[p->n++] = sharc__sampler_length(p->s, duration);
    return p->n == p->want ? SHARC__PEEK_STOP : SHARC__PEEK_TAKEN;
}

/* The durations of the first num_cuts_for_bins_estimate items into d (room for that many):
 * the staged ones (bucket 0, in arrival order), the pending one, and, when the buffer's size
 * or byte budget stopped the staging first, those the source peeks at after them. */
static int estimate_durations(sharc__sampler *s, double *d, size_t *n)
{
    peek_into p = {s, d, 0, s->st.num_cuts_for_bins_estimate};
    for (uint32_t slot = s->buckets[0].head; slot != NONE && p.n < p.want; slot = s->next[slot])
        d[p.n++] = sharc__sampler_length(s, s->items[slot].duration);
    if (s->has_pending && p.n < p.want)
        d[p.n++] = sharc__sampler_length(s, s->pending.duration);
    int rc = 0;
    if (!s->exhausted && p.n < p.want && s->src.peek)
        rc = s->src.peek(s->src.cookie, take_peeked, &p);
    *n = p.n;
    return rc;
}

/* Estimate the bins from the first num_cuts_for_bins_estimate items, then move every staged
 * item (all in bucket 0, in arrival order) to its bucket, keeping arrival order inside each
 * bucket. */
static int estimate_and_assign(sharc__sampler *s)
{
    /* One bucket needs no bins, nor the durations to read ahead for them. */
    if (s->st.num_buckets >= 2) {
        double *d = sharc__malloc(s->ctx, s->st.num_cuts_for_bins_estimate * sizeof *d);
        if (!d)
            return sharc__fail(s->ctx, SHARC_ERR(ENOMEM), "sampler: out of memory for bins");
        size_t n = 0;
        int rc = estimate_durations(s, d, &n);
        uint32_t k = s->st.num_buckets < n ? s->st.num_buckets : (uint32_t)n;
        if (rc == 0 && k >= 2)
            rc = sharc__estimate_bins(s->ctx, d, n, k, s->bins, &s->n_bins);
        sharc__free(s->ctx, d);
        if (rc < 0)
            return rc;
    }
    s->bins_ready = 1;
    s->nb = s->n_bins + 1;
    uint32_t slot = s->buckets[0].head;
    bucket_reset(&s->buckets[0]);
    while (slot != NONE) {
        uint32_t nxt = s->next[slot];
        list_append(s, sharc__sampler_bucket_of(s, &s->items[slot]), slot);
        slot = nxt;
    }
    return 0;
}

/* Lhotse's init heuristic: warn when the buffer is unlikely to fill a batch per bucket. */
static void warn_small_buffer(sharc__sampler *s)
{
    if (!(s->st.max_duration > 0) || !s->n_bins)
        return;
    double mean = 0;
    for (size_t i = 0; i < s->n_bins; i++)
        mean += s->bins[i];
    mean /= (double)s->n_bins;
    if ((double)s->st.buffer_size * mean / (double)s->nb < s->st.max_duration)
        sharc__log(s->ctx, SHARC_LOG_WARN,
                   "sampler: buffer_size %u might be too low to fill batches of max_duration "
                   "%g s over %zu buckets",
                   s->st.buffer_size, s->st.max_duration, s->nb);
}

/* ---- choosing and building batches --------------------------------------------------- */

static int close_to_exceeding(const sharc__sampler *s, size_t b, size_t n, double longest)
{
    if (s->bbs)
        return b < s->n_bins && n >= s->bbs[b];
    if (s->st.max_cuts && n >= s->st.max_cuts)
        return 1;
    return s->st.max_duration > 0 && (double)(n + 1) * longest > s->st.max_duration;
}

static int is_ready(const sharc__sampler *s, size_t b)
{
    const bucket *k = &s->buckets[b];
    return k->count > 0 && close_to_exceeding(s, b, k->count, k->longest);
}

static int bucket_ok(const sharc__sampler *s, long b, int need_ready)
{
    if (b < 0 || (size_t)b >= s->nb)
        return 0;
    return need_ready ? is_ready(s, (size_t)b) : s->buckets[b].count > 0;
}

/* Uniform choice among ready buckets, else (unless drop_last) non-empty ones. */
static long pick_uniform(sharc__sampler *s)
{
    size_t n_ready = 0, n_nonempty = 0;
    for (size_t b = 0; b < s->nb; b++) {
        n_ready += (size_t)is_ready(s, b);
        n_nonempty += s->buckets[b].count > 0;
    }
    int need_ready = n_ready > 0;
    size_t n_cand = need_ready ? n_ready : n_nonempty;
    if ((!need_ready && s->st.drop_last) || n_cand == 0)
        return -1;
    uint64_t k = sharc__rng_below(&s->rng, n_cand);
    for (size_t b = 0; b < s->nb; b++)
        if (bucket_ok(s, (long)b, need_ready) && k-- == 0)
            return (long)b;
    return -1;
}

/* Lhotse's BucketSelectionState.select_bucket_idx: one draw serves world_size batches. */
static long draw_bucket(sharc__sampler *s)
{
    if (!s->has_bidx || s->usage == s->st.world_size) {
        s->bidx = (uint32_t)sharc__rng_below(&s->brng, s->nb);
        s->usage = 0;
        s->has_bidx = 1;
    }
    s->usage++;
    return (long)s->bidx;
}

/* Scan idx, idx-1, idx+1, idx-2, idx+2, ... for a bucket meeting the predicate. */
static long scan_buckets(sharc__sampler *s, int need_ready)
{
    long idx = draw_bucket(s), lo = idx, hi = idx, attempts = 0, nb = (long)s->nb;
    while (!bucket_ok(s, idx, need_ready)) {
        if (lo < 0 && hi >= nb)
            return -1;
        attempts++;
        idx += attempts % 2 == 0 ? attempts : -attempts;
        lo = idx < lo ? idx : lo;
        hi = idx > hi ? idx : hi;
    }
    return idx;
}

static long pick_sync(sharc__sampler *s)
{
    sharc__rng saved_rng = s->brng;
    uint32_t saved_idx = s->bidx;
    uint64_t saved_usage = s->usage;
    int saved_has = s->has_bidx;
    long b = scan_buckets(s, 1);
    if (b >= 0 || s->st.drop_last)
        return b;
    /* Rewind so that every rank uses the bucket RNG the same number of times. */
    s->brng = saved_rng;
    s->bidx = saved_idx;
    s->usage = saved_usage;
    s->has_bidx = saved_has;
    return scan_buckets(s, 0);
}

static void rescan_longest(sharc__sampler *s, size_t b)
{
    bucket *k = &s->buckets[b];
    k->longest = 0;
    for (uint32_t slot = k->head; slot != NONE; slot = s->next[slot])
        if (s->eff[slot] > k->longest)
            k->longest = s->eff[slot];
}

/* Take one batch from bucket b: bucket order, or a partial Fisher-Yates shuffle that
 * draws only the positions it uses (same distribution as shuffling the whole bucket). */
static size_t take_batch(sharc__sampler *s, size_t b)
{
    bucket *k = &s->buckets[b];
    size_t len = k->count, n = 0;
    double longest = 0;
    uint32_t slot = k->head;
    if (s->st.shuffle)
        for (size_t i = 0; i < len; i++, slot = s->next[slot])
            s->scratch[i] = slot;
    for (size_t i = 0; i < len; i++) {
        if (s->st.shuffle) {
            size_t j = i + (size_t)sharc__rng_below(&s->rng, len - i);
            uint32_t t = s->scratch[i];
            s->scratch[i] = s->scratch[j];
            s->scratch[j] = t;
        } else {
            s->scratch[i] = slot;
            slot = s->next[slot];
        }
        uint32_t cur = s->scratch[i];
        s->batch[n++] = s->items[cur];
        if (s->eff[cur] > longest)
            longest = s->eff[cur];
        if (close_to_exceeding(s, b, n, longest))
            break;
    }
    for (size_t i = 0; i < n; i++) {
        list_unlink(s, b, s->scratch[i]);
        s->free_slots[s->n_free++] = s->scratch[i];
        s->bytes -= s->items[s->scratch[i]].bytes;
    }
    s->count -= n;
    rescan_longest(s, b);
    if (n == 1 && s->st.max_duration > 0 && longest > s->st.max_duration) {
        char name[SHARC__ERRLEN / 2];
        s->stats.oversized++;
        sharc__log(s->ctx, SHARC_LOG_WARN,
                   "sampler: %s alone (%g s effective) exceeds max_duration %g s; returning "
                   "it as a batch of its own",
                   sharc__sampler_item_name(s, &s->batch[0], name, sizeof name), longest,
                   s->st.max_duration);
    }
    return n;
}

int sharc__sampler_next(sharc__sampler *s, sharc__sitem **items, size_t *n)
{
    *items = NULL;
    *n = 0;
    if (s->deferred_rc) {
        int rc = s->deferred_rc;
        s->deferred_rc = 0;
        return rc;
    }
    if (s->stopped)
        return SHARC_END;
    int rc;
    if (!s->bins_ready) {
        /* The buffer holds buffer_size items at most, as always; the estimate reads the
         * durations of the rest of the first N ahead (estimate_durations). */
        size_t stage = s->st.num_cuts_for_bins_estimate < s->st.buffer_size
                           ? s->st.num_cuts_for_bins_estimate
                           : s->st.buffer_size;
        if ((rc = top_up(s, stage)) < 0)
            return rc;
        if ((rc = estimate_and_assign(s)) < 0)
            return rc;
        warn_small_buffer(s);
    }
    if ((rc = top_up(s, s->st.buffer_size)) < 0)
        return rc;
    long b = s->st.sync_buckets ? pick_sync(s) : pick_uniform(s);
    if (b < 0) {
        s->stopped = 1;
        s->stats.dropped += release_all(s, SHARC__RELEASE_DROPPED);
        return SHARC_END;
    }
    if (!is_ready(s, (size_t)b))
        s->stats.partial++;
    size_t m = take_batch(s, (size_t)b);
    s->stats.batches++;
    s->stats.items += m;
    /* Refill before returning, so that a state saved now points at the next batch. A
     * failure here does not spoil this batch: it is reported by the next call. */
    s->deferred_rc = top_up(s, s->st.buffer_size);
    *items = s->batch;
    *n = m;
    return 0;
}

/* ---- lifetime ------------------------------------------------------------------------ */

void sharc__sampler_close(sharc__sampler **sp)
{
    sharc__sampler *s = sp ? *sp : NULL;
    if (!s)
        return;
    sharc__ctx *ctx = s->ctx;
    if (s->buckets && s->next)
        release_all(s, SHARC__RELEASE_CLOSE);
    sharc__free(ctx, s->items);
    sharc__free(ctx, s->eff);
    sharc__free(ctx, s->next);
    sharc__free(ctx, s->prev);
    sharc__free(ctx, s->free_slots);
    sharc__free(ctx, s->scratch);
    sharc__free(ctx, s->batch);
    sharc__free(ctx, s->buckets);
    sharc__free(ctx, s->bins);
    sharc__free(ctx, s->bbs);
    sharc__free(ctx, s->bin_tokens);
    sharc__free(ctx, s->max_tps);
    sharc__free(ctx, s);
    *sp = NULL;
}

int sharc__sampler_open(sharc__ctx *ctx, const sharc__sampler_settings *st,
                        const sharc__sampler_source *src, sharc__sampler **out)
{
    *out = NULL;
    if (!st || !src || !src->pull)
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "sampler: settings and a pull callback "
                           "are required");
    int rc = sharc__sampler_check_settings(ctx, st);
    if (rc < 0)
        return rc;
    sharc__sampler *s = sharc__calloc(ctx, 1, sizeof *s);
    if (!s)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "sampler: out of memory");
    s->ctx = ctx;
    s->st = *st;
    /* The batch rule caps n * longest at max_duration: in audio tokens, batch_tokens. */
    if (st->batch_tokens)
        s->st.max_duration = (double)st->batch_tokens;
    s->src = *src;
    s->estimating = st->bins == NULL;
    s->cap = st->buffer_size;
    s->max_buckets = s->estimating ? st->num_buckets : st->n_bins + 1;
    size_t c = s->cap;
    s->items = sharc__malloc(ctx, c * sizeof *s->items);
    s->eff = sharc__malloc(ctx, c * sizeof *s->eff);
    s->next = sharc__malloc(ctx, c * sizeof *s->next);
    s->prev = sharc__malloc(ctx, c * sizeof *s->prev);
    s->free_slots = sharc__malloc(ctx, c * sizeof *s->free_slots);
    s->scratch = sharc__malloc(ctx, c * sizeof *s->scratch);
    s->batch = sharc__malloc(ctx, c * sizeof *s->batch);
    s->buckets = sharc__malloc(ctx, s->max_buckets * sizeof *s->buckets);
    s->bins = sharc__malloc(ctx, s->max_buckets * sizeof *s->bins);
    if (st->bucket_batch_size)
        s->bbs = sharc__malloc(ctx, st->n_bins * sizeof *s->bbs);
    if (st->bin_tokens)
        s->bin_tokens = sharc__malloc(ctx, st->n_bins * sizeof(double));
    if (st->n_max_tps)
        s->max_tps = sharc__malloc(ctx, st->n_max_tps * sizeof(double));
    if (!s->items || !s->eff || !s->next || !s->prev || !s->free_slots || !s->scratch ||
        !s->batch || !s->buckets || !s->bins || (st->bucket_batch_size && !s->bbs) ||
        (st->bin_tokens && !s->bin_tokens) || (st->n_max_tps && !s->max_tps)) {
        rc = sharc__fail(ctx, SHARC_ERR(ENOMEM), "sampler: out of memory for %u slots", s->cap);
        goto fail;
    }
    for (uint32_t i = 0; i < s->cap; i++)
        s->free_slots[i] = s->cap - 1 - i; /* slot 0 is used first */
    s->n_free = s->cap;
    for (size_t b = 0; b < s->max_buckets; b++)
        bucket_reset(&s->buckets[b]);
    if (!s->estimating) {
        memcpy(s->bins, st->bins, st->n_bins * sizeof *s->bins);
        s->n_bins = st->n_bins;
        s->bins_ready = 1;
        s->nb = st->n_bins + 1;
        if (s->bbs)
            memcpy(s->bbs, st->bucket_batch_size, st->n_bins * sizeof *s->bbs);
    } else {
        s->nb = 1; /* bucket 0 stages the items the bins are estimated from */
    }
    s->st.bins = s->estimating ? NULL : s->bins;
    s->st.bucket_batch_size = s->bbs;
    if (s->bin_tokens)
        memcpy(s->bin_tokens, st->bin_tokens, st->n_bins * sizeof(double));
    if (s->max_tps)
        memcpy(s->max_tps, st->max_tps, st->n_max_tps * sizeof(double));
    s->st.bin_tokens = s->bin_tokens;
    s->st.max_tps = s->max_tps;
    sharc__rng_seed(&s->rng, st->seed);
    sharc__rng_seed(&s->brng, st->seed ^ SHARC__BUCKET_SEED_SALT);
    s->settings_hash = sharc__sampler_hash_settings(s);
    if (!s->estimating)
        warn_small_buffer(s);
    *out = s;
    return 0;
fail:
    sharc__sampler_close(&s);
    return rc;
}

const double *sharc__sampler_bins(const sharc__sampler *s, size_t *n)
{
    *n = s->bins_ready ? s->n_bins : 0;
    return s->bins_ready ? s->bins : NULL;
}

void sharc__sampler_get_stats(const sharc__sampler *s, sharc__sampler_stats *out)
{
    *out = s->stats;
}

size_t sharc__sampler_buffered(const sharc__sampler *s)
{
    return s->count + (size_t)s->has_pending;
}

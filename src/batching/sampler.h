/*
 * Dynamic duration bucketing with Lhotse's DynamicBucketingSampler semantics, over item
 * metadata only (no I/O, no decoding, no threads).
 *
 * The sampler pulls items (duration + opaque payload) from its caller, holds up to
 * `buffer_size` of them (and at most `max_buffer_bytes` of their bytes) in duration
 * buckets, and hands out batches:
 *
 * - Bins: given, or estimated like Lhotse's `estimate_duration_buckets` from the first
 *   `num_cuts_for_bins_estimate` items. The buffer holds what it can of them (at most
 *   `buffer_size` items and `max_buffer_bytes`), which are batched as usual, not consumed;
 *   the durations of the rest come from the source's `peek` (the items themselves are
 *   pulled later). Without a peek callback the bins come from the items the buffer holds.
 *   An item goes to bucket `bisect_left(bins, duration)`: a duration equal to a boundary
 *   goes to the lower bucket; bucket `n_bins` holds everything above the last boundary.
 * - Batch rule (Lhotse TimeConstraint.close_to_exceeding): with d' = d + d*d/q when a
 *   quadratic term q is set, items are appended (bucket order, or a random order when
 *   shuffling) until `(max_cuts && n >= max_cuts) || (max_duration && (n+1)*longest >
 *   max_duration)`, the triggering item included. So n times the longest of the first n-1
 *   items is <= max_duration; the whole batch may exceed max_duration when its last item is
 *   the longest (Lhotse does the same). A single item with d' > max_duration is a 1-item
 *   batch, logged as a warning.
 *   With `bucket_batch_size`, bucket b stops at exactly `bucket_batch_size[b]` items.
 * - Bucket choice: a bucket is ready when its items could make a full batch. Without
 *   sync, one of the ready buckets is picked uniformly (else, unless drop_last, one of
 *   the non-empty ones). With sync, a bucket index is drawn from a second RNG, reused for
 *   `world_size` consecutive batches, and the nearest ready bucket is found by scanning
 *   idx, idx-1, idx+1, idx-2, ...; when none is ready (and not drop_last) the bucket RNG
 *   is rewound and the scan repeated accepting any non-empty bucket, so every rank uses
 *   the bucket RNG the same number of times.
 * - Refill: after a batch is taken the buffer is topped up again before the batch is
 *   returned, so a state saved between two calls points at the next batch.
 * - End: batches continue (full ones first, then partial ones unless drop_last) until
 *   the buffer is empty. With drop_last, iteration ends when no bucket is ready and the
 *   remaining items are handed back through `release` as DROPPED.
 *
 * Differences from Lhotse, on purpose: randomness comes from xoshiro256** (src/rng.h),
 * seeded from `seed` (the bucket RNG from a value derived from `seed`, not 1234 +
 * worker id), so batches are reproducible but not bit-identical to Lhotse's; a stream
 * with fewer items than num_buckets estimates with as many buckets as items (Lhotse
 * asserts); num_buckets == 1 means one bucket.
 *
 * A sampler is used by one thread at a time. Everything is allocated at open; a steady
 * state allocates nothing.
 */
#ifndef SHARC_SRC_SAMPLER_H
#define SHARC_SRC_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "sharc/reader.h"

/** One item as the sampler sees it. */
typedef struct sharc__sitem {
    double duration; ///< seconds, finite and >= 0 (raw, without the quadratic term)
    uint64_t key;    ///< the caller's locator to re-read the item after a restore
    uint64_t bytes;  ///< memory the item holds, counted against max_buffer_bytes
    uint32_t tokens; ///< its output tokens (the token filters and 2D buckets measure them)
    void *payload;   ///< the caller's object, returned untouched
} sharc__sitem;

/** Why an item is handed back through the release callback. */
typedef enum sharc__release_reason {
    SHARC__RELEASE_TOO_SHORT = 0, ///< duration < min_item_duration (filtered)
    SHARC__RELEASE_TOO_LONG,      ///< duration > max_item_duration (filtered)
    SHARC__RELEASE_DROPPED,       ///< left over when drop_last ended the iteration
    SHARC__RELEASE_REJECTED,      ///< invalid item whose pull made next() fail
    SHARC__RELEASE_CLOSE,         ///< still buffered when the sampler was closed
    SHARC__RELEASE_MIN_TOKENS,    ///< fewer tokens than min_tokens (filtered)
    SHARC__RELEASE_NO_BUCKET,     ///< fits no 2D bucket (filtered)
    SHARC__RELEASE_MAX_TOKENS,    ///< more tokens than max_tokens (filtered)
    SHARC__RELEASE_MIN_TPS,       ///< fewer tokens per second than min_tps (filtered)
    /** more tokens per second than max_tps, or than its 2D bucket's max_tps (filtered) */
    SHARC__RELEASE_MAX_TPS,
    SHARC__RELEASE_REASONS ///< how many reasons there are
} sharc__release_reason;

/** The items filtered out, by reason (sharc_filter), as the reader counts them. */
typedef struct sharc__filter_counts {
    uint64_t n[SHARC_FILTER_COUNT];
} sharc__filter_counts;

/** The sharc_filter of a release reason, or -1 for one that is no filter (DROPPED, ...). */
int sharc__filter_of_release(sharc__release_reason why);

/** Where items come from and go back to. `pull` is required, the others optional. */
typedef struct sharc__sampler_source {
    void *cookie; ///< passed to every callback
    /**
     * Produce the next item into `*out`. Return 0, SHARC_END when the stream is over (the
     * sampler then never calls pull again), or a negative error, which the sampler
     * returns unchanged (the callee sets the ctx's error text). The sampler owns the
     * item's payload from then on until it returns it in a batch or through release.
     */
    int (*pull)(void *cookie, sharc__sitem *out);
    /**
     * Take back an item the sampler will not return in a batch. NULL: the caller
     * accepts that such payloads are not handed back (fine when payloads own nothing).
     */
    void (*release)(void *cookie, sharc__sitem *item, sharc__release_reason why);
    /**
     * Restore only: re-create the item saved under `key` into `*out`. Called once per
     * saved item, in saved order. `out->key`, `duration` and `bytes` must equal the saved
     * values, else the restore fails with SHARC_ERR_STATE (the data changed).
     */
    int (*reload)(void *cookie, uint64_t key, sharc__sitem *out);
    /**
     * Optional: write what names `item` for a person (a cut id and where it is) into
     * out[cap]; the sampler's messages use it instead of the item's key. NULL: the key.
     */
    void (*describe)(void *cookie, const sharc__sitem *item, char *out, size_t cap);
    /**
     * Optional: the durations of the items `pull` would produce next, without producing
     * them. Call `visit(vcookie, duration)` for each, in order, until it returns
     * SHARC__PEEK_STOP or the items end, then leave `pull` exactly where it was. An item
     * the source cannot produce (a problem `pull` would report) may end the peek early.
     * Used when the buffer (buffer_size or max_buffer_bytes) is full before it holds the
     * items the bins are estimated from. NULL: the bins are estimated from the items the
     * buffer holds.
     * @return 0 or a negative error (the sampler returns it unchanged)
     */
    int (*peek)(void *cookie, int (*visit)(void *vcookie, double duration), void *vcookie);
} sharc__sampler_source;

/** What a peek's `visit` returns (sharc__sampler_source.peek). */
enum {
    SHARC__PEEK_TAKEN = 0,    ///< the duration counts; go on
    SHARC__PEEK_FILTERED = 1, ///< outside the duration limits, not counted; go on
    SHARC__PEEK_STOP = 2,     ///< no more are needed: stop
};

/** Sampler settings. Fill with sharc__sampler_default_settings() first. */
typedef struct sharc__sampler_settings {
    double max_duration;       ///< padded seconds per batch, n*longest; 0 = none (default 0)
    uint32_t max_cuts;         ///< items per batch; 0 = none (default 0)
    double quadratic_duration; ///< q of d' = d + d*d/q; 0 = off (default 0)
    uint32_t num_buckets;      ///< buckets to estimate; ignored with bins (default 10)
    const double *bins;        ///< sorted boundaries (copied); NULL = estimate (default NULL)
    size_t n_bins;             ///< number of bins; buckets = n_bins + 1 (default 0)
    /** Per-bucket fixed batch sizes (copied), n_bins of them, as NeMo's OOMptimizer
     *  writes them; needs `bins` and excludes max_duration/max_cuts. An item longer than
     *  the last bin is then an error (SHARC_ERR_TOO_LARGE). Default NULL. */
    const uint32_t *bucket_batch_size;
    uint32_t num_cuts_for_bins_estimate; ///< items the bins are estimated from (default 10000)
    uint32_t buffer_size;                ///< items held in the buckets, 1..2^24 (default 20000)
    uint64_t max_buffer_bytes; ///< item bytes held (+1 item waiting); 0 = none (default 2 GiB)
    int shuffle;               ///< random order inside a bucket (default 0)
    int drop_last;             ///< stop when no bucket can make a full batch (default 0)
    uint64_t seed;             ///< seeds the in-bucket and bucket-choice RNGs (default 0)
    int sync_buckets;          ///< synchronized bucket choice, as Lhotse's default (default 1)
    uint32_t world_size;       ///< batches that reuse one synchronized draw (default 1)
    double min_item_duration;  ///< items shorter are filtered out (default 0)
    double max_item_duration;  ///< items longer are filtered out; 0 = no limit (default 0)
    /** 2D buckets (NeMo's [duration, tokens] pairs): the token limit of each bin, n_bins of
     *  them (copied), with `bins` the durations, sorted by (duration, tokens), and
     *  bucket_batch_size required; an item goes to the bucket NeMo's find_smallest_bucket
     *  picks in strict mode, and one that fits none is filtered (NO_BUCKET). NULL: 1D. */
    const double *bin_tokens;
    /** Tokens per second caps: one for every item (filtered above it, MAX_TPS), or, with 2D
     *  bins, one per bin (an item over its bucket's cap fits no bucket: MAX_TPS); copied. */
    const double *max_tps;
    size_t n_max_tps; ///< 0 (none), 1, or n_bins with bin_tokens
    double min_tps;   ///< items with fewer tokens per second are filtered (MIN_TPS) (default 0)
    /** token count limits (MIN_TOKENS, MAX_TOKENS); max 0 = none (default 0) */
    uint32_t min_tokens, max_tokens;
    /** NeMo's MultimodalSamplingConstraint: with a token_equivalent_duration t > 0, an item
     *  of d seconds measures ceil(d / t) audio tokens instead of d seconds, for the bins, the
     *  buckets (the first dimension of 2D bins too) and the batch rule, whose cap is then
     *  batch_tokens (instead of max_duration), with the quadratic term q of
     *  quadratic_duration applying to that length (NeMo's quadratic_factor). */
    double token_equivalent_duration;
    uint32_t batch_tokens; ///< audio tokens per batch, n * longest (default 0: none)
} sharc__sampler_settings;

/** Counters since open (restored from a state blob on restore). */
typedef struct sharc__sampler_stats {
    uint64_t pulled;    ///< items obtained from pull
    uint64_t batches;   ///< batches returned
    uint64_t items;     ///< items returned in batches
    uint64_t too_short; ///< items filtered by min_item_duration
    uint64_t too_long;  ///< items filtered by max_item_duration
    uint64_t dropped;   ///< items dropped at the end by drop_last
    uint64_t oversized; ///< 1-item batches with d' > max_duration
    uint64_t partial;   ///< batches taken from a bucket that was not ready
} sharc__sampler_stats;

typedef struct sharc__sampler sharc__sampler;

/** The bucket-choice RNG is sharc__rng_seed(seed ^ SHARC__BUCKET_SEED_SALT): independent of
 *  the in-bucket RNG (seeded with `seed`), and equal on every rank given the same seed. */
#define SHARC__BUCKET_SEED_SALT 0x5348415243425543ull

void sharc__sampler_default_settings(sharc__sampler_settings *s);

/** Check settings as sharc__sampler_open() does: 0, or SHARC_ERR(EINVAL) with the reason in
 * ctx. */
int sharc__sampler_check_settings(sharc__ctx *ctx, const sharc__sampler_settings *st);

/**
 * Create a sampler. Nothing is pulled until the first sharc__sampler_next().
 * `ctx` (allocation, logging, error text) and the source callbacks must outlive it.
 * @return 0, SHARC_ERR(EINVAL) for inconsistent settings (message in ctx), or
 *         SHARC_ERR(ENOMEM). *out is NULL on failure.
 */
int sharc__sampler_open(sharc__ctx *ctx, const sharc__sampler_settings *st,
                        const sharc__sampler_source *src, sharc__sampler **out);

/**
 * Return the next batch: `*items` points at `*n` items in batch order, in an array the
 * sampler owns and overwrites on the next call; the payloads now belong to the caller.
 * @return 0, SHARC_END when no batch is left (also on every later call), or a negative
 *         error: the pull callback's error unchanged, SHARC_ERR_FORMAT for an item with
 *         an invalid duration, SHARC_ERR_TOO_LARGE for an item above the last bin with
 *         bucket_batch_size. The buffer stays consistent after a pull error: a later call
 *         pulls again.
 */
int sharc__sampler_next(sharc__sampler *s, sharc__sitem **items, size_t *n);

/** The bins in use (NULL with *n = 0 before they are estimated, i.e. before next()). */
const double *sharc__sampler_bins(const sharc__sampler *s, size_t *n);

void sharc__sampler_get_stats(const sharc__sampler *s, sharc__sampler_stats *out);

/** Items currently held (buckets plus the one pulled item waiting for room, if any). */
size_t sharc__sampler_buffered(const sharc__sampler *s);

/** Size in bytes of the blob sharc__sampler_save() would write now: O(buffered items). */
size_t sharc__sampler_state_size(const sharc__sampler *s);

/**
 * Write the sampler's state: both RNGs and the bucket-draw usage, bins, counters, flags,
 * a hash of the settings, and the buffered items as (key, duration, bytes, bucket) in
 * their exact bucket order; little-endian, ending with a CRC-32 (zlib) of the rest.
 * @return 0, or SHARC_ERR(ENOSPC) when `cap` < sharc__sampler_state_size().
 */
int sharc__sampler_save(const sharc__sampler *s, void *buf, size_t cap);

/** sharc__sampler_save without the CRC, which sharc__sampler_seal() adds later (the
 *  pipeline drafts a state per batch and seals only the ones it hands out). */
int sharc__sampler_save_draft(const sharc__sampler *s, void *buf, size_t cap);

/** Write the CRC of a drafted blob of `len` bytes. */
void sharc__sampler_seal(void *blob, size_t len);

/**
 * Create a sampler from a saved state, with the same settings as the saved one. Each
 * saved item is re-created through `src->reload` in saved order; then the sampler pulls
 * new items from `src->pull` exactly where the saved sampler would have, and returns the
 * batches the uninterrupted sampler would have returned. Cost: O(saved items).
 * @return 0, SHARC_ERR_STATE for a corrupt, truncated or foreign blob or one saved with
 *         other settings (message in ctx), a reload error unchanged, SHARC_ERR(EINVAL),
 *         SHARC_ERR(ENOMEM). On failure, items already reloaded go back through release.
 */
int sharc__sampler_restore(sharc__ctx *ctx, const sharc__sampler_settings *st,
                           const sharc__sampler_source *src, const void *blob, size_t n,
                           sharc__sampler **out);

/** Free the sampler; buffered items go back through release (CLOSE). NULL-safe. */
void sharc__sampler_close(sharc__sampler **s);

/**
 * Lhotse's estimate_duration_buckets with the sampler's allocator: sort a copy of the
 * durations, sum them as numpy does (pairwise), cut at equal total duration. Writes at
 * most num_buckets - 1 bins. @return 0, SHARC_ERR(EINVAL), SHARC_ERR(ENOMEM).
 */
int sharc__estimate_bins(sharc__ctx *ctx, const double *durations, size_t n, uint32_t num_buckets,
                         double *bins_out, size_t *n_bins_out);

/** Index of the bucket for `duration`: the first i with bins[i] >= duration. */
size_t sharc__bucket_of(const double *bins, size_t n_bins, double duration);

/**
 * NeMo's find_smallest_bucket in strict mode over the 2D bins (bins[i], tokens[i]), sorted:
 * the first bin whose duration is >= `duration`, then, among the bins of that duration, the
 * first whose token limit is >= `n_tokens`; with `max_tps` (n_bins caps), an item with more
 * tokens per second than its bucket's cap fits none. @return the bin, or n_bins for none
 */
size_t sharc__bucket_of_2d(const double *bins, const double *tokens, const double *max_tps,
                           size_t n_bins, double duration, uint32_t n_tokens);

#endif /* SHARC_SRC_SAMPLER_H */

#include "batching/sampler.h"
#include "batching/sampler_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "base/le.h"

#define STATE_MAGIC  "SHSM"
#define STATE_VER    2u   /* 2: the buffer holds buffer_size items while estimating */
#define HEADER_BYTES 176u /* fixed part of the blob before the bins */
#define ITEM_BYTES   28u  /* key u64, duration f64, bytes u64, bucket u32 */

/* Blob layout, little-endian:
 *     0  "SHSM", u32 version, u64 total size, u64 settings hash
 *    24  item RNG (4 x u64), bucket RNG (4 x u64), u64 bucket idx, u64 usage, u32 flags
 *   108  stats: 8 x u64 (pulled, batches, items, too_short, too_long, dropped, oversized,
 *        partial), u32 n_bins                                          -> HEADER_BYTES
 *        n_bins x f64 bins, u32 n_items,
 *        n_items x (u64 key, f64 duration, u64 bytes, u32 bucket; UINT32_MAX = pending)
 *        u32 CRC-32 of everything before it */

typedef struct wr {
    unsigned char *p;
} wr;

static void put_u32(wr *w, uint32_t v)
{
    sharc__store_le32(w->p, v);
    w->p += 4;
}

static void put_u64(wr *w, uint64_t v)
{
    sharc__store_le64(w->p, v);
    w->p += 8;
}

typedef struct rd {
    const unsigned char *p;
} rd;

static uint32_t get_u32(rd *r)
{
    uint32_t v = sharc__load_le32(r->p);
    r->p += 4;
    return v;
}

static uint64_t get_u64(rd *r)
{
    uint64_t v = sharc__load_le64(r->p);
    r->p += 8;
    return v;
}

static double get_f64(rd *r)
{
    uint64_t u = get_u64(r);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static uint64_t *stats_field(sharc__sampler_stats *st, int i)
{
    uint64_t *f[] = {&st->pulled,   &st->batches, &st->items,     &st->too_short,
                     &st->too_long, &st->dropped, &st->oversized, &st->partial};
    return f[i];
}

static uint32_t crc_of(const unsigned char *p, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) { /* zlib takes uInt lengths */
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

size_t sharc__sampler_state_size(const sharc__sampler *s)
{
    return HEADER_BYTES + 8 * s->n_bins + 4 + ITEM_BYTES * sharc__sampler_buffered(s) + 4;
}

static void put_item(wr *w, const sharc__sitem *it, uint32_t bucket_idx)
{
    put_u64(w, it->key);
    put_u64(w, dbits(it->duration));
    put_u64(w, it->bytes);
    put_u32(w, bucket_idx);
}

int sharc__sampler_save(const sharc__sampler *s, void *buf, size_t cap)
{
    int rc = sharc__sampler_save_draft(s, buf, cap);
    if (rc == 0)
        sharc__sampler_seal(buf, sharc__sampler_state_size(s));
    return rc;
}

void sharc__sampler_seal(void *blob, size_t len)
{
    unsigned char *b = blob;
    wr w = {b + len - 4};
    put_u32(&w, crc_of(b, len - 4));
}

int sharc__sampler_save_draft(const sharc__sampler *s, void *buf, size_t cap)
{
    size_t size = sharc__sampler_state_size(s);
    if (cap < size)
        return sharc__set_error(s->ctx, SHARC_ERR(ENOSPC),
                                "sampler state needs %zu bytes, buffer has %zu", size, cap);
    wr w = {buf};
    memcpy(w.p, STATE_MAGIC, 4);
    w.p += 4;
    put_u32(&w, STATE_VER);
    put_u64(&w, size);
    put_u64(&w, s->settings_hash);
    for (int i = 0; i < 4; i++)
        put_u64(&w, s->rng.s[i]);
    for (int i = 0; i < 4; i++)
        put_u64(&w, s->brng.s[i]);
    put_u64(&w, s->bidx);
    put_u64(&w, s->usage);
    put_u32(&w, (uint32_t)((s->has_bidx ? F_HAS_BIDX : 0) | (s->bins_ready ? F_BINS_READY : 0) |
                           (s->exhausted ? F_EXHAUSTED : 0) | (s->stopped ? F_STOPPED : 0) |
                           (s->has_pending ? F_PENDING : 0)));
    sharc__sampler_stats stats = s->stats;
    for (int i = 0; i < 8; i++)
        put_u64(&w, *stats_field(&stats, i));
    put_u32(&w, (uint32_t)s->n_bins);
    for (size_t i = 0; i < s->n_bins; i++)
        put_u64(&w, dbits(s->bins[i]));
    put_u32(&w, (uint32_t)sharc__sampler_buffered(s));
    for (size_t b = 0; b < s->nb; b++)
        for (uint32_t slot = s->buckets[b].head; slot != NONE; slot = s->next[slot])
            put_item(&w, &s->items[slot], (uint32_t)b);
    if (s->has_pending)
        put_item(&w, &s->pending, NONE);
    put_u32(&w, 0); /* the CRC: sharc__sampler_seal */
    return 0;
}

/* Check everything in the blob that does not need the items' payloads. */
static int check_blob(sharc__sampler *s, const unsigned char *p, size_t n)
{
#define BAD(...) sharc__fail(s->ctx, SHARC_ERR_STATE, "cannot resume: sampler state: " __VA_ARGS__)
    if (n < HEADER_BYTES + 8)
        return BAD("truncated (%zu bytes, the fixed part alone is %u)", n, HEADER_BYTES + 8);
    if (memcmp(p, STATE_MAGIC, 4) != 0)
        return BAD("bad magic, not a sampler state");
    /* Version 1 held the estimate's items beyond buffer_size while estimating; its states
     * (always saved with the bins known) resume the same when they fit the buffer. */
    uint32_t ver = sharc__load_le32(p + 4);
    if (ver != STATE_VER && ver != 1)
        return BAD("version %u, this build reads versions 1 and %u", ver, STATE_VER);
    if (sharc__load_le64(p + 8) != n)
        return BAD("size is %zu bytes but the state says %llu (truncated or padded)", n,
                   (unsigned long long)sharc__load_le64(p + 8));
    if (crc_of(p, n - 4) != sharc__load_le32(p + n - 4))
        return BAD("checksum mismatch (corrupted)");
    if (sharc__load_le64(p + 16) != s->settings_hash)
        return BAD("saved with different sampler settings");
    uint32_t flags = sharc__load_le32(p + 104);
    uint32_t n_bins = sharc__load_le32(p + HEADER_BYTES - 4);
    int bins_ready = (flags & F_BINS_READY) != 0;
    if (flags & ~(uint32_t)31)
        return BAD("unknown flags %#x", flags);
    if (ver == 1 && !bins_ready)
        return BAD("version 1, saved before its bins were estimated");
    if (n_bins > s->max_buckets - 1 || (!bins_ready && n_bins) ||
        (!s->estimating && (!bins_ready || n_bins != s->n_bins)))
        return BAD("%u bins do not fit these settings", n_bins);
    if ((n - HEADER_BYTES - 8) / 8 < n_bins)
        return BAD("truncated in the bins");
    const unsigned char *q = p + HEADER_BYTES + 8 * (size_t)n_bins;
    uint32_t n_items = sharc__load_le32(q);
    int pending = (flags & F_PENDING) != 0;
    if (n_items > (uint64_t)s->cap + (uint64_t)pending || n_items < (uint32_t)pending ||
        ((flags & F_STOPPED) && n_items) ||
        (uint64_t)HEADER_BYTES + 8ull * n_bins + 4 + (uint64_t)ITEM_BYTES * n_items + 4 != n)
        return BAD("%u buffered items do not fit a buffer of %u", n_items, s->cap);
    if ((flags & F_HAS_BIDX) && (!bins_ready || sharc__load_le64(p + 88) > n_bins ||
                                 sharc__load_le64(p + 96) > (uint64_t)s->st.world_size))
        return BAD("bucket selection state out of range");
    return 0;
#undef BAD
}

/* Validate bins and items against each other, before any payload is reloaded. */
static int check_items(sharc__sampler *s, const unsigned char *bins_p, uint32_t n_bins,
                       int bins_ready, int pending, const unsigned char *items_p, uint32_t n_items)
{
    rd r = {bins_p};
    for (uint32_t i = 0; i < n_bins; i++) {
        double v = get_f64(&r);
        if (sharc__sampler_bad_nonneg(v) || (i && v < s->bins[i - 1]) ||
            (!s->estimating && dbits(v) != dbits(s->st.bins[i])))
            return sharc__fail(s->ctx, SHARC_ERR_STATE, "cannot resume: sampler state: bad bin %u",
                               i);
        s->bins[i] = v;
    }
    s->n_bins = n_bins;
    r.p = items_p;
    uint32_t prev_b = 0;
    for (uint32_t i = 0; i < n_items; i++) {
        r.p += 8;
        double d = get_f64(&r), len = sharc__sampler_length(s, d);
        r.p += 8;
        uint32_t b = get_u32(&r);
        int ok;
        if (pending && i == n_items - 1)
            ok = b == NONE;
        else if (s->bin_tokens) /* 2D: checked against the item's tokens when reloaded */
            ok = b >= prev_b && b < n_bins && s->bins[b] >= len;
        else if (bins_ready) /* saved bucket by bucket, each where bisect_left puts it */
            ok = b >= prev_b && b == sharc__bucket_of(s->bins, n_bins, len);
        else
            ok = b == 0;
        ok = ok && !sharc__sampler_bad_nonneg(d) && !(s->bbs && len > s->bins[n_bins - 1]);
        prev_b = b;
        if (!ok)
            return sharc__fail(
                s->ctx, SHARC_ERR_STATE,
                "cannot resume: sampler state: buffered item %u (duration %g) is not in "
                "bucket %u",
                i, d, b);
    }
    return 0;
}

static int reload_items(sharc__sampler *s, const unsigned char *items_p, uint32_t n_items)
{
    rd r = {items_p};
    for (uint32_t i = 0; i < n_items; i++) {
        uint64_t key = get_u64(&r), dur = get_u64(&r), bytes = get_u64(&r);
        uint32_t b = get_u32(&r);
        sharc__sitem it = {0};
        int rc = s->src.reload(s->src.cookie, key, &it);
        if (rc < 0)
            return rc;
        if (it.key != key || dbits(it.duration) != dur || it.bytes != bytes) {
            char name[SHARC__ERRLEN / 2];
            sharc__sampler_reject(s, &it, name, sizeof name);
            double d;
            memcpy(&d, &dur, sizeof d);
            if (it.key != key)
                return sharc__fail(s->ctx, SHARC_ERR_STATE,
                                   "cannot resume: the state's item %#llx reads back as %s: "
                                   "the data changed since the state was saved",
                                   (unsigned long long)key, name);
            return sharc__fail(s->ctx, SHARC_ERR_STATE,
                               "cannot resume: %s now lasts %.9g s in %llu bytes, and lasted "
                               "%.9g s in %llu bytes when the state was saved: the data changed "
                               "since",
                               name, it.duration, (unsigned long long)it.bytes, d,
                               (unsigned long long)bytes);
        }
        if (b != NONE && s->bin_tokens && sharc__sampler_bucket_of(s, &it) != b) {
            char name[SHARC__ERRLEN / 2];
            sharc__sampler_reject(s, &it, name, sizeof name);
            return sharc__fail(s->ctx, SHARC_ERR_STATE,
                               "cannot resume: %s now has %u tokens, which put it in another 2D "
                               "bucket than when the state was saved: the data or the tokenizer "
                               "changed since",
                               name, it.tokens);
        }
        if (b == NONE) {
            s->pending = it;
            s->has_pending = 1;
        } else {
            sharc__sampler_admit(s, &it, b);
        }
    }
    return 0;
}

int sharc__sampler_restore(sharc__ctx *ctx, const sharc__sampler_settings *st,
                           const sharc__sampler_source *src, const void *blob, size_t n,
                           sharc__sampler **out)
{
    *out = NULL;
    if (!blob || !src || !src->reload)
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "sampler restore: a state blob and a "
                           "reload callback are required");
    sharc__sampler *s;
    int rc = sharc__sampler_open(ctx, st, src, &s);
    if (rc < 0)
        return rc;
    const unsigned char *p = blob;
    if ((rc = check_blob(s, p, n)) < 0)
        goto fail;
    rd r = {p + 24};
    for (int i = 0; i < 4; i++)
        s->rng.s[i] = get_u64(&r);
    for (int i = 0; i < 4; i++)
        s->brng.s[i] = get_u64(&r);
    /* xoshiro256** never reaches the all-zero state, and would stay in it. */
    if ((s->rng.s[0] | s->rng.s[1] | s->rng.s[2] | s->rng.s[3]) == 0 ||
        (s->brng.s[0] | s->brng.s[1] | s->brng.s[2] | s->brng.s[3]) == 0) {
        rc = sharc__fail(s->ctx, SHARC_ERR_STATE,
                         "cannot resume: sampler state: a random generator's state is all zeros");
        goto fail;
    }
    uint64_t bidx = get_u64(&r);
    s->usage = get_u64(&r);
    uint32_t flags = get_u32(&r);
    sharc__sampler_stats stats;
    for (int i = 0; i < 8; i++)
        *stats_field(&stats, i) = get_u64(&r);
    uint32_t n_bins = get_u32(&r);
    const unsigned char *bins_p = r.p, *items_p = r.p + 8 * (size_t)n_bins + 4;
    uint32_t n_items = sharc__load_le32(items_p - 4);
    int pending = (flags & F_PENDING) != 0;
    s->bins_ready = (flags & F_BINS_READY) != 0;
    rc = check_items(s, bins_p, n_bins, s->bins_ready, pending, items_p, n_items);
    if (rc < 0)
        goto fail;
    s->nb = s->bins_ready ? s->n_bins + 1 : 1;
    s->bidx = (uint32_t)bidx;
    s->has_bidx = (flags & F_HAS_BIDX) != 0;
    s->exhausted = (flags & F_EXHAUSTED) != 0;
    s->stopped = (flags & F_STOPPED) != 0;
    if ((rc = reload_items(s, items_p, n_items)) < 0)
        goto fail;
    s->stats = stats;
    *out = s;
    return 0;
fail:
    sharc__sampler_close(&s);
    return rc;
}

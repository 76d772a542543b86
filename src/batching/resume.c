#include "batching/resume.h"
#include "base/hash.h"
#include "base/le.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <zlib.h>

#define STATE_MAGIC 0x53485253u /* "SRHS" little-endian */
/* Version 2: cut keys locate a shard visit (epoch * shards + shard, see bcut.h) instead of
 * 16 bits of epoch and 24 of shard, so a run past epoch 65535 can be saved and resumed; and
 * a counter for the non_finite problem kind. Version 3: the filtered cuts by reason
 * (sharc_filter) after the other counters; a version 2 state is read with them zero. */
#define STATE_VERSION 3u
#define STEP_OFFSET   16 /* byte offset of next_step */
/* Marks a mixture's section after the keys. Where a single dataset's state has its
 * sampler's length, which is below 2^40, so the two cannot be confused. */
#define MIX_TAG UINT64_C(0xFFFFFFFF4D495853)
/* Marks the noise stream's position after the keys (and a mixture's section), the same way. */
#define NOISE_TAG UINT64_C(0xFFFFFFFF4E4F4953)
/* Marks an elastic run's prologue after the keys, the same way. */
#define PROLOGUE_TAG   UINT64_C(0xFFFFFFFF50524F4C)
#define UNIT_FIELDS    5
#define BUNDLE_MAGIC   0x42485253u /* "SRHB" little-endian */
#define BUNDLE_VERSION 1u
/* Most states in one bundle: data-parallel slots of a run. */
#define BUNDLE_MAX 65535

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf;

static void put_u64(wbuf *w, uint64_t v)
{
    sharc__store_le64(w->p + w->len, v);
    w->len += 8;
}

static void put_f64(wbuf *w, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    put_u64(w, v);
}

typedef struct rbuf {
    const uint8_t *p;
    size_t len, at;
    int bad;
} rbuf;

static uint64_t get_u64(rbuf *r)
{
    if (r->at + 8 > r->len) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = sharc__load_le64(r->p + r->at);
    r->at += 8;
    return v;
}

static double get_f64(rbuf *r)
{
    uint64_t v = get_u64(r);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

static const char *base_of(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : (path ? path : "");
}

uint64_t sharc__resume_hash(const sharc_reader_settings *s, const sharc__dataset *ds)
{
    uint64_t h = SHARC__FNV_OFFSET;
    int64_t v[] = {ds->layout,        (int64_t)ds->n_shards, (int64_t)s->seed,
                   s->shuffle_shards, (int64_t)s->epochs,    s->dp_rank,
                   s->dp_size,        s->on_error,           s->sampling_rate,
                   s->channel};
    h = sharc__fnv1a(h, v, sizeof v);
    h = sharc__fnv1a(h, &s->length_tolerance, sizeof s->length_tolerance);
    if (ds->layout == SHARC_LAYOUT_NEMO) {
        /* How rows become cuts (their order, pairing and windows) changed on 2026-12-04 to
         * follow NeMo's reader: a state saved before points at other cuts, so it is refused. */
        static const char rows_revision[] = "nemo-rows-2";
        h = sharc__fnv1a(h, rows_revision, sizeof rows_revision);
    }
    /* Conditioning changes the cuts' durations and samples; hashed only when on, so that
     * states saved without it keep their hash. */
    if (s->resample) {
        static const char resample[] = "resample";
        h = sharc__fnv1a(h, resample, sizeof resample);
    }
    const sharc_augment_settings *aug = s->augment;
    if (aug && aug->n_noise) {
        double g[4] = {aug->noise_snr_db[0], aug->noise_snr_db[1], aug->noise_prob,
                       (double)aug->noise_max_bytes};
        h = sharc__fnv1a(h, g, sizeof g);
    }
    if (aug && (aug->n_speed_perturb || aug->volume_perturb_db[0] || aug->volume_perturb_db[1])) {
        double g[4] = {aug->speed_perturb_prob, aug->volume_perturb_db[0],
                       aug->volume_perturb_db[1], aug->volume_perturb_prob};
        h = sharc__fnv1a_u64(h, aug->n_speed_perturb);
        h = sharc__fnv1a(h, aug->speed_perturb, aug->n_speed_perturb * sizeof(double));
        h = sharc__fnv1a(h, g, sizeof g);
    }
    for (size_t i = 0; i < ds->n_shards; i++) {
        const char *a = base_of(ds->shards[i].audio_path);
        const char *m = base_of(ds->shards[i].meta_path);
        h = sharc__fnv1a(h, a, strlen(a) + 1);
        h = sharc__fnv1a(h, m, strlen(m) + 1);
    }
    return h;
}

void sharc__stats_take_back(sharc_reader_stats *st, const sharc_reader_stats *skips)
{
    st->cuts -= skips->cuts;
    st->audio_seconds -= skips->audio_seconds;
    st->padded_seconds -= skips->padded_seconds;
    st->skipped_cuts += skips->skipped_cuts;
    for (int i = 0; i < SHARC_PROBLEM_COUNT; i++)
        st->problems[i] += skips->problems[i];
}

#define N_COUNTERS 7

static void put_stats(wbuf *w, const sharc_reader_stats *st, const sharc__filter_counts *filtered)
{
    uint64_t u[N_COUNTERS] = {st->cuts,    st->shards,        st->skipped_cuts, st->skipped_shards,
                              st->batches, st->filtered_cuts, st->dropped_cuts};
    for (size_t i = 0; i < N_COUNTERS; i++)
        put_u64(w, u[i]);
    for (int i = 0; i < SHARC_PROBLEM_COUNT; i++)
        put_u64(w, st->problems[i]);
    put_f64(w, st->audio_seconds);
    put_f64(w, st->padded_seconds);
    if (filtered)
        for (int i = 0; i < SHARC_FILTER_COUNT; i++)
            put_u64(w, filtered->n[i]);
}

/* The counters of a state of `version`, the filtered cuts by reason too (zero before
 * version 3) when `filtered` is not NULL. */
static void get_stats(rbuf *rb, sharc_reader_stats *st, sharc__filter_counts *filtered,
                      uint64_t version)
{
    uint64_t *u[N_COUNTERS] = {&st->cuts,           &st->shards,  &st->skipped_cuts,
                               &st->skipped_shards, &st->batches, &st->filtered_cuts,
                               &st->dropped_cuts};
    for (size_t i = 0; i < N_COUNTERS; i++)
        *u[i] = get_u64(rb);
    for (int i = 0; i < SHARC_PROBLEM_COUNT; i++)
        st->problems[i] = get_u64(rb);
    st->audio_seconds = get_f64(rb);
    st->padded_seconds = get_f64(rb);
    sharc__filter_counts f = {{0}};
    for (int i = 0; version >= 3 && i < SHARC_FILTER_COUNT; i++)
        f.n[i] = get_u64(rb);
    if (filtered)
        *filtered = f;
}

/* The counters' u64 fields in a state of `version`. */
#define STATS_FIELDS(version)                                                                      \
    (N_COUNTERS + SHARC_PROBLEM_COUNT + 2 + ((version) >= 3 ? SHARC_FILTER_COUNT : 0))
/* Fixed u64 fields: magic, hash, step, 6 of position, counters, n_keys, sampler_len, CRC. */
#define FIXED_FIELDS(version) (3 + 6 + STATS_FIELDS(version) + 3)
/* Byte offset of n_keys, which the keys follow, in a draft (always of this version). */
#define KEYS_OFFSET (8 * (3 + 6 + STATS_FIELDS(STATE_VERSION)))

/* Byte offset of the counters: after magic, hash, step and the 6 fields of the position. */
#define STATS_OFFSET (8 * (3 + 6))

int sharc__resume_draft_stats(const uint8_t *draft, size_t len, const sharc_reader_stats *skipped,
                              sharc_reader_stats *out)
{
    sharc_reader_stats st = {0};
    rbuf rb = {draft, len, STATS_OFFSET, 0};
    get_stats(&rb, &st, NULL, STATE_VERSION);
    if (rb.bad)
        return -1;
    sharc__stats_take_back(&st, skipped);
    *out = st;
    return 0;
}

void sharc__resume_draft_filtered(const uint8_t *draft, size_t len, sharc__filter_counts *out)
{
    sharc_reader_stats st;
    sharc__filter_counts f;
    rbuf rb = {draft, len, STATS_OFFSET, 0};
    get_stats(&rb, &st, &f, STATE_VERSION);
    if (!rb.bad)
        *out = f;
}

void sharc__resume_take_back(uint8_t *draft, size_t len, const sharc_reader_stats *skipped,
                             sharc_reader_stats *out)
{
    sharc_reader_stats st;
    if (sharc__resume_draft_stats(draft, len, skipped, &st) < 0)
        return;
    wbuf w = {draft, STATS_OFFSET, len};
    put_stats(&w, &st, NULL); /* the filtered cuts after them stay */
    *out = st;
}

/* Why a blob is not a state of this build for shards and settings hashing to `state_hash`
 * (magic, size, checksum, version, hash), or NULL; *rb then reads it from the step on, and
 * *version is its version (2 or 3). */
static const char *header_problem(const uint8_t *blob, size_t len, uint64_t state_hash, rbuf *rb,
                                  uint64_t *version_out)
{
    if (len < 4 || sharc__load_le32(blob) != STATE_MAGIC)
        return "not a sharc reader state (it does not start as one)";
    if (len < 8 * FIXED_FIELDS(2))
        return "the state blob is truncated";
    if (sharc__load_le64(blob + len - 8) != (uint64_t)(uint32_t)crc32(0L, blob, (uInt)(len - 8)))
        return "the state blob is corrupt (checksum mismatch)";
    *rb = (rbuf){blob, len - 8, 0, 0};
    uint64_t version = get_u64(rb) >> 32;
    *version_out = version;
    if (version == 1)
        return "the state was saved by an older sharc (state version 1, whose cut keys hold 16 "
               "bits of epoch and no non_finite counter), whose states this one cannot read: "
               "resume it with the sharc that "
               "saved it, or start the run again";
    if (version != STATE_VERSION && version != 2)
        return "the state was saved by another version of sharc, whose states this one cannot read";
    if (len < 8 * FIXED_FIELDS(version))
        return "the state blob is truncated";
    if (get_u64(rb) != state_hash)
        return "the state was saved with other shards or reader settings";
    return NULL;
}

void sharc__resume_saved_stats(const uint8_t *blob, size_t len, uint64_t state_hash,
                               sharc_reader_stats *out, sharc__filter_counts *filtered)
{
    rbuf rb;
    uint64_t version;
    if (header_problem(blob, len, state_hash, &rb, &version))
        return;
    uint64_t step = get_u64(&rb);
    sharc_reader_stats st = {0};
    sharc__filter_counts f;
    rb.at = STATS_OFFSET;
    get_stats(&rb, &st, &f, version);
    if (rb.bad)
        return;
    st.batches = step;
    if (out)
        *out = st;
    if (filtered)
        *filtered = f;
}

int sharc__resume_write(sharc__ctx *ctx, uint8_t **buf, size_t *cap, size_t *len,
                        const sharc__resume *st, const sharc__keyset *held,
                        const sharc__sampler *sampler)
{
    size_t n_keys = held->n;
    size_t sampler_len = sharc__sampler_state_size(sampler);
    size_t need = 8 * FIXED_FIELDS(STATE_VERSION) + 8 * n_keys + sampler_len +
                  (st->mix ? 16 + st->mix_len : 0) +
                  (st->has_prologue ? 8 * (5 + UNIT_FIELDS * st->n_units) : 0) +
                  (st->noise ? 16 + st->noise_len : 0);
    if (need > *cap) {
        uint8_t *n = sharc__malloc(ctx, need * 2);
        if (!n)
            return SHARC_ERR(ENOMEM);
        sharc__free(ctx, *buf);
        *buf = n;
        *cap = need * 2;
    }
    wbuf w = {*buf, 0, *cap};
    put_u64(&w, ((uint64_t)STATE_VERSION << 32) | STATE_MAGIC);
    put_u64(&w, st->state_hash);
    put_u64(&w, st->next_step);
    put_u64(&w, st->pos.epoch);
    put_u64(&w, st->pos.order_pos);
    put_u64(&w, st->pos.shard_index);
    put_u64(&w, st->pos.consumed);
    put_u64(&w, (uint64_t)st->pos.shard_open);
    put_u64(&w, st->pos.epoch_cuts);
    put_stats(&w, &st->stats, &st->filtered);
    put_u64(&w, n_keys);
    size_t cursor = 0;
    uint64_t key;
    while (sharc__keyset_next(held, &cursor, &key))
        put_u64(&w, key);
    if (st->has_prologue) {
        put_u64(&w, PROLOGUE_TAG);
        put_u64(&w, (uint64_t)st->pos.in_prologue);
        put_u64(&w, st->pos.unit_pos);
        put_u64(&w, st->start_epoch);
        put_u64(&w, st->n_units);
        for (size_t i = 0; i < st->n_units; i++) {
            const sharc__walk_unit *u = &st->units[i];
            put_u64(&w, u->epoch);
            put_u64(&w, u->shard);
            put_u64(&w, u->skip);
            put_u64(&w, u->every);
            put_u64(&w, u->first);
        }
    }
    if (st->mix) {
        put_u64(&w, MIX_TAG);
        put_u64(&w, st->mix_len);
        memcpy(w.p + w.len, st->mix, st->mix_len);
        w.len += st->mix_len;
    }
    if (st->noise) {
        put_u64(&w, NOISE_TAG);
        put_u64(&w, st->noise_len);
        memcpy(w.p + w.len, st->noise, st->noise_len);
        w.len += st->noise_len;
    }
    put_u64(&w, sampler_len);
    int rc = sharc__sampler_save_draft(sampler, w.p + w.len, sampler_len);
    if (rc < 0)
        return rc;
    w.len += sampler_len;
    put_u64(&w, 0); /* the CRC: sharc__resume_finish */
    *len = w.len;
    return 0;
}

static int seconds_ok(double s)
{
    return isfinite(s) && s >= 0;
}

static int bad_state(sharc__ctx *ctx, const char *why)
{
    return sharc__fail(ctx, SHARC_ERR_STATE, "cannot resume: %s", why);
}

int sharc__resume_parse(sharc__ctx *ctx, const uint8_t *blob, size_t len, uint64_t state_hash,
                        size_t n_shards, uint64_t epochs, sharc__resume *out)
{
    memset(out, 0, sizeof *out);
    rbuf rb;
    uint64_t version;
    const char *why = header_problem(blob, len, state_hash, &rb, &version);
    if (why)
        return bad_state(ctx, why);
    out->state_hash = state_hash;
    out->next_step = get_u64(&rb);
    out->pos.epoch = get_u64(&rb);
    out->pos.order_pos = get_u64(&rb);
    uint64_t shard = get_u64(&rb);
    out->pos.consumed = get_u64(&rb);
    uint64_t open = get_u64(&rb);
    out->pos.epoch_cuts = get_u64(&rb);
    get_stats(&rb, &out->stats, &out->filtered, version);
    uint64_t n_keys = get_u64(&rb);
    if (rb.bad || n_keys > (rb.len - rb.at) / 8)
        return bad_state(ctx, "the state blob is truncated");
    out->n_keys = (size_t)n_keys;
    out->keys = blob + rb.at;
    rb.at += out->n_keys * 8;
    uint64_t sampler_len = get_u64(&rb);
    if (!rb.bad && sampler_len == PROLOGUE_TAG) {
        uint64_t in = get_u64(&rb), unit_pos = get_u64(&rb);
        out->start_epoch = get_u64(&rb);
        uint64_t n = get_u64(&rb);
        if (rb.bad || n > (rb.len - rb.at) / (8 * UNIT_FIELDS) || in > 1 || unit_pos > n)
            return bad_state(ctx, "the state's prologue is truncated or out of range");
        out->has_prologue = 1;
        out->pos.in_prologue = (int)in;
        out->pos.unit_pos = unit_pos;
        out->n_units = (size_t)n;
        out->unit_bytes = blob + rb.at;
        rb.at += out->n_units * 8 * UNIT_FIELDS;
        for (size_t i = 0; i < out->n_units; i++) {
            sharc__walk_unit u = sharc__resume_unit(out, i);
            if (u.shard >= n_shards || u.every == 0 || u.first >= u.every ||
                (epochs && u.epoch >= epochs))
                return bad_state(ctx, "the state's prologue points outside this dataset");
        }
        sampler_len = get_u64(&rb);
    }
    if (!rb.bad && sampler_len == MIX_TAG) {
        uint64_t mix_len = get_u64(&rb);
        if (rb.bad || mix_len > (rb.len - rb.at))
            return bad_state(ctx, "the state blob is truncated");
        out->mix = blob + rb.at;
        out->mix_len = (size_t)mix_len;
        rb.at += out->mix_len;
        sampler_len = get_u64(&rb);
    }
    if (!rb.bad && sampler_len == NOISE_TAG) {
        uint64_t noise_len = get_u64(&rb);
        if (rb.bad || noise_len > (rb.len - rb.at))
            return bad_state(ctx, "the state blob is truncated");
        out->noise = blob + rb.at;
        out->noise_len = (size_t)noise_len;
        rb.at += out->noise_len;
        sampler_len = get_u64(&rb);
    }
    if (rb.bad || sampler_len != rb.len - rb.at)
        return bad_state(ctx, "the state blob's sizes do not add up");
    out->sampler = blob + rb.at;
    out->sampler_len = (size_t)sampler_len;
    if (shard >= n_shards || open > 1 || (epochs && out->pos.epoch >= epochs))
        return bad_state(ctx, "the state points outside this dataset");
    /* Values no run writes: steps and counts past 2^62, seconds that are not finite or are
     * negative. */
    const uint64_t huge = (uint64_t)1 << 62;
    /* The reasons sum to at most filtered_cuts (less in a version 2 state): taken off what
     * is left of it one by one, as a sum of forged counts could wrap. */
    uint64_t unclaimed = out->stats.filtered_cuts;
    int reasons_fit = 1;
    for (int k = 0; k < SHARC_FILTER_COUNT; k++) {
        if (out->filtered.n[k] > unclaimed)
            reasons_fit = 0;
        else
            unclaimed -= out->filtered.n[k];
    }
    if (out->next_step > huge || out->pos.epoch > huge || out->stats.cuts > huge ||
        out->stats.batches > huge || !seconds_ok(out->stats.audio_seconds) ||
        !seconds_ok(out->stats.padded_seconds) || !reasons_fit)
        return bad_state(ctx, "the state's step or counters are out of range");
    out->pos.shard_index = (uint32_t)shard;
    out->pos.shard_open = (int)open;
    for (size_t i = 1; i < out->n_keys; i++)
        if (sharc__resume_key(out, i) <= sharc__resume_key(out, i - 1))
            return bad_state(ctx, "the state's cut list is not sorted");
    return 0;
}

int sharc__resume_lacks_noise(const uint8_t *blob, size_t len)
{
    const sharc_logger none = {0}; /* no callback: nothing logged */
    sharc__ctx quiet;
    sharc__ctx_init(&quiet, NULL, &none);
    sharc__resume st;
    /* Parsed as if its hash were right: only its sections are looked at. */
    return len >= 8 * FIXED_FIELDS(2) &&
           sharc__resume_parse(&quiet, blob, len, sharc__load_le64(blob + 8), SIZE_MAX, 0, &st) ==
               0 &&
           !st.noise;
}

long sharc__resume_bundle_parse(const uint8_t *blob, size_t len, const uint8_t **states,
                                size_t *sizes, size_t cap)
{
    if (!blob || len < 16 ||
        sharc__load_le64(blob) != (((uint64_t)BUNDLE_VERSION << 32) | BUNDLE_MAGIC))
        return 0;
    uint64_t n = sharc__load_le64(blob + 8);
    if (n == 0 || n > BUNDLE_MAX || n > (len - 16) / 8)
        return -1;
    size_t at = 16 + 8 * (size_t)n;
    for (size_t i = 0; i < n; i++) {
        uint64_t size = sharc__load_le64(blob + 16 + 8 * i);
        if (size > len - at)
            return -1;
        if (i < cap) {
            states[i] = blob + at;
            sizes[i] = (size_t)size;
        }
        at += (size_t)size;
    }
    return at == len ? (long)n : -1;
}

void sharc__resume_bundle_get(const uint8_t *blob, size_t i, const uint8_t **state, size_t *size)
{
    uint64_t n = sharc__load_le64(blob + 8);
    size_t at = 16 + 8 * (size_t)n;
    for (size_t k = 0; k < i; k++)
        at += (size_t)sharc__load_le64(blob + 16 + 8 * k);
    *state = blob + at;
    *size = (size_t)sharc__load_le64(blob + 16 + 8 * i);
}

int sharc__resume_bundle_write(const void *const *states, const size_t *sizes, size_t n, void *buf,
                               size_t cap, size_t *size)
{
    size_t need = 16 + 8 * n;
    for (size_t i = 0; i < n; i++)
        need += sizes[i];
    *size = need;
    if (need > cap)
        return SHARC_ERR(ENOSPC);
    uint8_t *p = buf;
    sharc__store_le64(p, ((uint64_t)BUNDLE_VERSION << 32) | BUNDLE_MAGIC);
    sharc__store_le64(p + 8, n);
    size_t at = 16 + 8 * n;
    for (size_t i = 0; i < n; i++) {
        sharc__store_le64(p + 16 + 8 * i, sizes[i]);
        memcpy(p + at, states[i], sizes[i]);
        at += sizes[i];
    }
    return 0;
}

uint64_t sharc__resume_key(const sharc__resume *s, size_t i)
{
    return sharc__load_le64(s->keys + 8 * i);
}

sharc__walk_unit sharc__resume_unit(const sharc__resume *s, size_t i)
{
    const uint8_t *p = s->unit_bytes + 8 * UNIT_FIELDS * i;
    return (sharc__walk_unit){sharc__load_le64(p), (uint32_t)sharc__load_le64(p + 8),
                              sharc__load_le64(p + 16), sharc__load_le64(p + 24),
                              sharc__load_le64(p + 32)};
}

/* Heapsort of n little-endian u64 at p, in place: no allocation, O(n log n). */
static void sift_down(uint8_t *p, size_t root, size_t n)
{
    uint64_t v = sharc__load_le64(p + 8 * root);
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            break;
        uint64_t c = sharc__load_le64(p + 8 * child);
        if (child + 1 < n) {
            uint64_t d = sharc__load_le64(p + 8 * (child + 1));
            if (d > c) {
                child++;
                c = d;
            }
        }
        if (c <= v)
            break;
        sharc__store_le64(p + 8 * root, c);
        root = child;
    }
    sharc__store_le64(p + 8 * root, v);
}

static void sort_u64_le(uint8_t *p, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(p, i, n);
    for (size_t end = n; end-- > 1;) {
        uint64_t top = sharc__load_le64(p);
        sharc__store_le64(p, sharc__load_le64(p + 8 * end));
        sharc__store_le64(p + 8 * end, top);
        sift_down(p, 0, end);
    }
}

void sharc__resume_finish(uint8_t *blob, size_t len, uint64_t step)
{
    sharc__store_le64(blob + STEP_OFFSET, step);
    uint64_t n_keys = sharc__load_le64(blob + KEYS_OFFSET);
    uint8_t *keys = blob + KEYS_OFFSET + 8;
    sort_u64_le(keys, (size_t)n_keys);
    uint8_t *sampler = keys + 8 * n_keys + 8;
    if (sharc__load_le64(sampler - 8) == PROLOGUE_TAG) /* past an elastic run's prologue */
        sampler += 8 * (4 + UNIT_FIELDS * sharc__load_le64(sampler + 24)) + 8;
    if (sharc__load_le64(sampler - 8) == MIX_TAG) /* past a mixture's section */
        sampler += 8 + sharc__load_le64(sampler) + 8;
    if (sharc__load_le64(sampler - 8) == NOISE_TAG) /* past the noise stream's position */
        sampler += 8 + sharc__load_le64(sampler) + 8;
    sharc__sampler_seal(sampler, (size_t)sharc__load_le64(sampler - 8));
    sharc__store_le64(blob + len - 8, (uint32_t)crc32(0L, blob, (uInt)(len - 8)));
}

/*
 * A mixture's section of a resume state (its draw, every source's position and prologue),
 * what it says of each source for an elastic resume, and restoring it.
 */
#include <errno.h>

#include "base/le.h"
#include "walk/mix_impl.h"

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

size_t sharc__mix_state_size(const void *self)
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

void sharc__mix_state_write(const void *self, uint8_t *out)
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
    /* An open shard must be one of the source's: an elastic split makes it a unit of work,
     * which the walk opens without looking it up in its shard order. */
    const sharc__dataset *ds = sharc__walk_dataset(m->src[i].walk);
    if (v[1] > 1 || v[4] > UINT32_MAX || v[6] > 1 || (v[6] && v[4] >= ds->n_shards) ||
        (v[1] && !(m->src[i].weight > 0)))
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

int sharc__mix_state_restore(void *self, const uint8_t *in, size_t len)
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
        sharc__mix_live_sum(m);
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
    sharc__mix_live_sum(m);
}

#include "batching/elastic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "batching/bcut.h"

typedef struct units {
    sharc__ctx *ctx;
    sharc__elastic_unit *u;
    size_t n, cap;
} units;

static int push(units *v, uint64_t epoch, uint32_t shard, uint64_t skip, uint64_t every,
                uint64_t first)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 16;
        sharc__elastic_unit *u = sharc__realloc(v->ctx, v->u, v->cap * sizeof *u, cap * sizeof *u);
        if (!u)
            return SHARC_ERR(ENOMEM);
        v->u = u;
        v->cap = cap;
    }
    v->u[v->n++] = (sharc__elastic_unit){epoch, shard, skip, every, first};
    return 0;
}

/* The last epoch old slot `o` had begun: its walk's, or the one before its regular plan. */
static uint64_t current_epoch(const sharc__elastic_old *o)
{
    if (o->pos.in_prologue)
        return o->start_epoch ? o->start_epoch - 1 : 0;
    return o->pos.epoch;
}

/* Old slot `o`'s remaining work up to the end of epoch `last`, appended to `v`. */
static int remaining(const sharc__elastic_plan *plan, const sharc__elastic_old *o, uint64_t last,
                     uint32_t *order, units *v)
{
    uint32_t every, first;
    sharc__dataset_cut_share(plan->ds->n_shards, o->dp_rank, o->dp_size, &every, &first);
    int rc = 0;
    uint64_t epoch, from;
    if (o->pos.in_prologue) {
        if (o->pos.shard_open && o->pos.unit_pos > 0) {
            sharc__elastic_unit u = o->units[o->pos.unit_pos - 1];
            if (u.skip < o->pos.consumed)
                u.skip = o->pos.consumed;
            rc = push(v, u.epoch, u.shard, u.skip, u.every, u.first);
        }
        for (size_t i = o->pos.unit_pos; rc == 0 && i < o->n_units; i++) {
            const sharc__elastic_unit *u = &o->units[i];
            rc = push(v, u->epoch, u->shard, u->skip, u->every, u->first);
        }
        epoch = o->start_epoch;
        from = 0;
    } else {
        if (o->pos.shard_open)
            rc = push(v, o->pos.epoch, o->pos.shard_index, o->pos.consumed, every, first);
        epoch = o->pos.epoch;
        from = o->pos.order_pos;
    }
    for (; rc == 0 && epoch <= last; epoch++, from = 0) {
        size_t n = sharc__dataset_epoch_order(plan->ds, plan->seed, epoch, plan->shuffle,
                                              o->dp_rank, o->dp_size, order);
        for (size_t p = from; rc == 0 && p < n; p++)
            rc = push(v, epoch, order[p], 0, every, first);
    }
    return rc;
}

/* The most shard visits a split leaves (40 bytes each): far more than any run leaves (its
 * slots' epochs differ by what one slot read while the others read their share), far less
 * than the memory that a state with a forged epoch would have the split take. */
#define MAX_UNITS (UINT64_C(1) << 24)

/* Refuse states whose remaining work up to epoch `last` (which old slot `far` had begun)
 * exceeds MAX_UNITS, counted before it is planned: each old slot's prologue, then its epochs'
 * orders (its first one's size each). */
static int check_work(sharc__ctx *ctx, const sharc__elastic_plan *plan,
                      const sharc__elastic_old *old, size_t n_old, uint64_t last,
                      const sharc__elastic_old *far, uint32_t *order)
{
    uint64_t total = 0;
    for (size_t d = 0; d < n_old; d++) {
        const sharc__elastic_old *o = &old[d];
        const uint64_t from = o->pos.in_prologue ? o->start_epoch : o->pos.epoch;
        uint64_t work = o->pos.in_prologue ? o->n_units + 1 : 1;
        if (from <= last) {
            const uint64_t per_epoch = sharc__dataset_epoch_order(
                plan->ds, plan->seed, from, plan->shuffle, o->dp_rank, o->dp_size, order);
            const uint64_t epochs = last - from + 1;
            work += epochs > MAX_UNITS || per_epoch * epochs > MAX_UNITS ? MAX_UNITS + 1
                                                                         : per_epoch * epochs;
        }
        total += work > MAX_UNITS ? MAX_UNITS + 1 : work;
        if (total > MAX_UNITS)
            return sharc__fail(ctx, SHARC_ERR_STATE,
                               "cannot resume: the states leave more than %llu shard visits to "
                               "split up to epoch %llu, which data-parallel slot %d of %d had "
                               "begun (an epoch no run reaches from the others')",
                               (unsigned long long)MAX_UNITS, (unsigned long long)last,
                               far->dp_rank, far->dp_size);
    }
    return 0;
}

int sharc__elastic_split(sharc__ctx *ctx, const sharc__elastic_plan *plan,
                         const sharc__elastic_old *old, size_t n_old, int rank, int size,
                         sharc__elastic_unit **out, size_t *n_out, uint64_t *start_epoch,
                         size_t *n_all)
{
    *out = NULL;
    *n_out = 0;
    /* Slots relabelled so that slot `offset` takes unit 0: r is this slot's place. */
    const size_t r = (size_t)(((uint64_t)rank + (uint64_t)size - plan->offset % (uint64_t)size) %
                              (uint64_t)size);
    uint64_t last = 0;
    size_t far = 0;
    for (size_t d = 0; d < n_old; d++)
        if (current_epoch(&old[d]) > last) {
            last = current_epoch(&old[d]);
            far = d;
        }
    if (plan->epochs && last >= plan->epochs)
        last = plan->epochs - 1;
    *start_epoch = last + 1;
    units all = {ctx, NULL, 0, 0};
    uint32_t *order =
        sharc__malloc(ctx, (plan->ds->n_shards ? plan->ds->n_shards : 1) * sizeof *order);
    int rc = order ? 0 : SHARC_ERR(ENOMEM);
    if (rc == 0)
        rc = check_work(ctx, plan, old, n_old, last, &old[far], order);
    for (size_t d = 0; rc == 0 && d < n_old; d++)
        rc = remaining(plan, &old[d], last, order, &all);
    sharc__free(ctx, order);
    units mine = {ctx, NULL, 0, 0};
    if (n_all)
        *n_all = all.n;
    if (rc == 0 && all.n >= (size_t)size) {
        for (size_t i = r; rc == 0 && i < all.n; i += (size_t)size) {
            const sharc__elastic_unit *u = &all.u[i];
            rc = push(&mine, u->epoch, u->shard, u->skip, u->every, u->first);
        }
    } else if (rc == 0 && all.n > 0) {
        /* Fewer units than slots: the slots j, j + U, ... share unit j by entries. */
        size_t j = r % all.n;
        uint64_t g = (uint64_t)size / all.n + (j < (size_t)size % all.n);
        const sharc__elastic_unit *u = &all.u[j];
        if (u->every > UINT64_MAX / 2 / g)
            rc = sharc__fail(ctx, SHARC_ERR_STATE,
                             "cannot resume: shard %u would be shared by more slots than a "
                             "state can say (resumed on more slots too many times)",
                             u->shard);
        else
            rc = push(&mine, u->epoch, u->shard, u->skip, u->every * g,
                      u->first + u->every * ((uint64_t)r / all.n));
    }
    sharc__free(ctx, all.u);
    if (rc < 0) {
        sharc__free(ctx, mine.u);
        return rc;
    }
    *out = mine.u;
    *n_out = mine.n;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A shard visit's held keys: out[at, at + count), and the new slot that takes them. */
typedef struct visit {
    size_t at, count;
    int slot;
} visit;

/* Larger visits first; among equals, the earlier visit. */
static int cmp_visit(const void *a, const void *b)
{
    const visit *x = *(const visit *const *)a, *y = *(const visit *const *)b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* A min-heap of the new slots by (keys taken, slot). */
typedef struct heap {
    int *slot;
    size_t *load;
    int n;
} heap;

static int lighter(const heap *h, int a, int b)
{
    return h->load[a] != h->load[b] ? h->load[a] < h->load[b] : a < b;
}

static void sift(heap *h, int i)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            return;
        if (c + 1 < h->n && lighter(h, h->slot[c + 1], h->slot[c]))
            c++;
        if (!lighter(h, h->slot[c], h->slot[i]))
            return;
        int t = h->slot[c];
        h->slot[c] = h->slot[i];
        h->slot[i] = t;
        i = c;
    }
}

/* Each visit, the largest first, to the slot that has taken the fewest keys so far. */
static void assign(visit **by_size, size_t n, heap *h)
{
    for (int i = 0; i < h->n; i++)
        h->slot[i] = i; /* all loads 0: already a heap */
    for (size_t v = 0; v < n; v++) {
        int s = h->slot[0];
        by_size[v]->slot = s;
        h->load[s] += by_size[v]->count;
        sift(h, 0);
    }
}

int sharc__elastic_keys(sharc__ctx *ctx, const uint64_t *const *keys, const size_t *n_keys,
                        size_t n_old, int rank, int size, uint64_t *out, size_t *n_out)
{
    size_t n = 0, n_visits = 0;
    for (size_t d = 0; d < n_old; d++) {
        if (n_keys[d])
            memcpy(out + n, keys[d], n_keys[d] * sizeof *out);
        n += n_keys[d];
    }
    qsort(out, n, sizeof *out, cmp_u64);
    for (size_t i = 0; i < n; i++)
        n_visits += i == 0 || sharc__key_visit(out[i]) != sharc__key_visit(out[i - 1]);
    *n_out = 0;
    if (n_visits == 0)
        return 0;
    visit *v = sharc__calloc(ctx, n_visits, sizeof *v);
    visit **by_size = sharc__calloc(ctx, n_visits, sizeof *by_size);
    heap h = {sharc__calloc(ctx, (size_t)size, sizeof *h.slot),
              sharc__calloc(ctx, (size_t)size, sizeof *h.load), size};
    int rc = v && by_size && h.slot && h.load ? 0 : SHARC_ERR(ENOMEM);
    if (rc == 0) {
        for (size_t i = 0, k = 0; i < n; i++) {
            if (i > 0 && sharc__key_visit(out[i]) != sharc__key_visit(out[i - 1]))
                k++;
            if (v[k].count++ == 0)
                v[k].at = i;
        }
        for (size_t k = 0; k < n_visits; k++)
            by_size[k] = &v[k];
        qsort(by_size, n_visits, sizeof *by_size, cmp_visit);
        assign(by_size, n_visits, &h);
        size_t kept = 0;
        for (size_t k = 0; k < n_visits; k++)
            if (v[k].slot == rank)
                for (size_t i = 0; i < v[k].count; i++)
                    out[kept++] = out[v[k].at + i];
        *n_out = kept;
    }
    sharc__free(ctx, v);
    sharc__free(ctx, by_size);
    sharc__free(ctx, h.slot);
    sharc__free(ctx, h.load);
    return rc;
}

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

int sharc__elastic_split(sharc__ctx *ctx, const sharc__elastic_plan *plan,
                         const sharc__elastic_old *old, size_t n_old, int rank, int size,
                         sharc__elastic_unit **out, size_t *n_out, uint64_t *start_epoch)
{
    *out = NULL;
    *n_out = 0;
    uint64_t last = 0;
    for (size_t d = 0; d < n_old; d++)
        if (current_epoch(&old[d]) > last)
            last = current_epoch(&old[d]);
    if (plan->epochs && last >= plan->epochs)
        last = plan->epochs - 1;
    *start_epoch = last + 1;
    units all = {ctx, NULL, 0, 0};
    uint32_t *order =
        sharc__malloc(ctx, (plan->ds->n_shards ? plan->ds->n_shards : 1) * sizeof *order);
    int rc = order ? 0 : SHARC_ERR(ENOMEM);
    for (size_t d = 0; rc == 0 && d < n_old; d++)
        rc = remaining(plan, &old[d], last, order, &all);
    sharc__free(ctx, order);
    units mine = {ctx, NULL, 0, 0};
    if (rc == 0 && all.n >= (size_t)size) {
        for (size_t i = (size_t)rank; rc == 0 && i < all.n; i += (size_t)size) {
            const sharc__elastic_unit *u = &all.u[i];
            rc = push(&mine, u->epoch, u->shard, u->skip, u->every, u->first);
        }
    } else if (rc == 0 && all.n > 0) {
        /* Fewer units than slots: the slots j, j + U, ... share unit j by entries. */
        size_t j = (size_t)rank % all.n;
        uint64_t g = (uint64_t)size / all.n + (j < (size_t)size % all.n);
        const sharc__elastic_unit *u = &all.u[j];
        if (u->every > UINT64_MAX / 2 / g)
            rc = sharc__fail(ctx, SHARC_ERR_STATE,
                             "cannot resume: shard %u would be shared by more slots than a "
                             "state can say (resumed on more slots too many times)",
                             u->shard);
        else
            rc = push(&mine, u->epoch, u->shard, u->skip, u->every * g,
                      u->first + u->every * ((uint64_t)rank / all.n));
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

size_t sharc__elastic_keys(const uint64_t *const *keys, const size_t *n_keys, size_t n_old,
                           int rank, int size, uint64_t *out)
{
    size_t n = 0;
    for (size_t d = 0; d < n_old; d++) {
        if (n_keys[d])
            memcpy(out + n, keys[d], n_keys[d] * sizeof *out);
        n += n_keys[d];
    }
    qsort(out, n, sizeof *out, cmp_u64);
    size_t kept = 0;
    uint64_t visits = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && sharc__key_visit(out[i]) != sharc__key_visit(out[i - 1]))
            visits++;
        if (visits % (uint64_t)size == (uint64_t)rank)
            out[kept++] = out[i];
    }
    return kept;
}

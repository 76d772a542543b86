#include "plan/keyset.h"

#include <errno.h>
#include <stdlib.h>

static size_t home_of(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

static int grow(sharc__ctx *ctx, sharc__keyset *set)
{
    size_t cap = set->cap ? set->cap * 2 : 1024;
    uint64_t *t = sharc__calloc(ctx, cap, sizeof *t);
    if (!t)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < set->cap; i++) {
        if (!set->slots[i])
            continue;
        size_t j = home_of(set->slots[i], cap);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = set->slots[i];
    }
    sharc__free(ctx, set->slots);
    set->slots = t;
    set->cap = cap;
    return 0;
}

int sharc__keyset_add(sharc__ctx *ctx, sharc__keyset *set, uint64_t key)
{
    int rc;
    if (2 * (set->n + 1) > set->cap && (rc = grow(ctx, set)) < 0)
        return rc;
    uint64_t k = key + 1;
    size_t i = home_of(k, set->cap);
    while (set->slots[i] && set->slots[i] != k)
        i = (i + 1) & (set->cap - 1);
    if (!set->slots[i])
        set->n++;
    set->slots[i] = k;
    return 0;
}

int sharc__keyset_has(const sharc__keyset *set, uint64_t key)
{
    uint64_t k = key + 1;
    if (!set->cap)
        return 0;
    size_t i = home_of(k, set->cap);
    while (set->slots[i] && set->slots[i] != k)
        i = (i + 1) & (set->cap - 1);
    return set->slots[i] == k;
}

void sharc__keyset_remove(sharc__keyset *set, uint64_t key)
{
    uint64_t k = key + 1;
    if (!set->cap)
        return;
    size_t mask = set->cap - 1, i = home_of(k, set->cap);
    while (set->slots[i] && set->slots[i] != k)
        i = (i + 1) & mask;
    if (!set->slots[i])
        return;
    set->n--;
    /* Backward-shift deletion keeps every probe chain unbroken without tombstones: move
     * back each later key of the chain whose home is not cyclically in (i, j]. */
    size_t j = i;
    for (;;) {
        set->slots[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!set->slots[j])
                return;
            size_t home = home_of(set->slots[j], set->cap);
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
                break;
        }
        set->slots[i] = set->slots[j];
        i = j;
    }
}

int sharc__keyset_next(const sharc__keyset *set, size_t *cursor, uint64_t *key)
{
    for (size_t i = *cursor; i < set->cap; i++)
        if (set->slots[i]) {
            *key = set->slots[i] - 1;
            *cursor = i + 1;
            return 1;
        }
    *cursor = set->cap;
    return 0;
}

void sharc__keyset_free(sharc__ctx *ctx, sharc__keyset *set)
{
    sharc__free(ctx, set->slots);
    set->slots = NULL;
    set->cap = set->n = 0;
}

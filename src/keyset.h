/*
 * A set of 64-bit keys (linear probing, backward-shift deletion), for the keys of the cuts
 * the sampler holds: a resume state lists them so that a restore knows which shards to
 * read again.
 */
#ifndef SHARC_SRC_KEYSET_H
#define SHARC_SRC_KEYSET_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

typedef struct sharc__keyset {
    uint64_t *slots; ///< key + 1 per used slot, 0 for an empty one
    size_t cap, n;
    uint64_t *sorted; ///< scratch for sharc__keyset_sorted
    size_t sorted_cap;
} sharc__keyset;

/** Add a key (a key already there stays once). @return 0 or SHARC_ERR(ENOMEM) */
int sharc__keyset_add(sharc__ctx *ctx, sharc__keyset *set, uint64_t key);

/** Remove a key if present. */
void sharc__keyset_remove(sharc__keyset *set, uint64_t key);

/**
 * The keys in ascending order, in a buffer the set owns until the next call.
 * @return 0 or SHARC_ERR(ENOMEM)
 */
int sharc__keyset_sorted(sharc__ctx *ctx, sharc__keyset *set, const uint64_t **keys, size_t *n);

void sharc__keyset_free(sharc__ctx *ctx, sharc__keyset *set);

#endif /* SHARC_SRC_KEYSET_H */

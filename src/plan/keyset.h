/*
 * A set of 64-bit keys (linear probing, backward-shift deletion), for the keys of the cuts
 * the sampler holds: a resume state lists them so that a restore knows which shards to
 * read again.
 */
#ifndef SHARC_SRC_KEYSET_H
#define SHARC_SRC_KEYSET_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"

typedef struct sharc__keyset {
    uint64_t *slots; ///< key + 1 per used slot, 0 for an empty one
    size_t cap, n;
} sharc__keyset;

/** Add a key (a key already there stays once). @return 0 or SHARC_ERR(ENOMEM) */
int sharc__keyset_add(sharc__ctx *ctx, sharc__keyset *set, uint64_t key);

/** Whether the set holds `key`. */
int sharc__keyset_has(const sharc__keyset *set, uint64_t key);

/** Remove a key if present. */
void sharc__keyset_remove(sharc__keyset *set, uint64_t key);

/**
 * Walk the keys, in no particular order: start with *cursor = 0; each call that returns 1
 * sets *key to the next one. The set must not change during the walk.
 */
int sharc__keyset_next(const sharc__keyset *set, size_t *cursor, uint64_t *key);

void sharc__keyset_free(sharc__ctx *ctx, sharc__keyset *set);

#endif /* SHARC_SRC_KEYSET_H */

/*
 * FNV-1a, 64-bit: the hash of resume states (settings, shard names), of a file's identity
 * and of dataset paths. Values must not change: saved states carry them.
 */
#ifndef SHARC_SRC_HASH_H
#define SHARC_SRC_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SHARC__FNV_OFFSET 0xcbf29ce484222325ull

/** Continue hash `h` (start from SHARC__FNV_OFFSET) with `n` bytes at `p`. */
static inline uint64_t sharc__fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/** Continue hash `h` with the 8 little-endian bytes of `v`, whatever the host's order. */
static inline uint64_t sharc__fnv1a_u64(uint64_t h, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    return sharc__fnv1a(h, b, sizeof b);
}

#endif /* SHARC_SRC_HASH_H */

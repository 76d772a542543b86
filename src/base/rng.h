/*
 * Deterministic random numbers: xoshiro256** seeded through splitmix64. The same seed
 * gives the same sequence on every platform, and the whole state fits in 32 bytes so it
 * can be saved in a reader state blob.
 */
#ifndef SHARC_SRC_RNG_H
#define SHARC_SRC_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct sharc__rng {
    uint64_t s[4];
} sharc__rng;

void sharc__rng_seed(sharc__rng *r, uint64_t seed);
uint64_t sharc__rng_next(sharc__rng *r);
/** Uniform integer in [0, n) without modulo bias; n must be > 0. */
uint64_t sharc__rng_below(sharc__rng *r, uint64_t n);
/** Uniform double in [0, 1). */
double sharc__rng_uniform(sharc__rng *r);
/** Fisher-Yates shuffle of n elements of `size` bytes each (size <= 64). */
void sharc__rng_shuffle(sharc__rng *r, void *base, size_t n, size_t size);
/** Fisher-Yates shuffle of an array of uint32_t. */
void sharc__rng_shuffle_u32(sharc__rng *r, uint32_t *a, size_t n);

#endif /* SHARC_SRC_RNG_H */

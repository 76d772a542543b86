#include "base/rng.h"

#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void sharc__rng_seed(sharc__rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

uint64_t sharc__rng_next(sharc__rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t sharc__rng_below(sharc__rng *r, uint64_t n)
{
    /* Rejection sampling on the top of the range keeps every value equally likely. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
    uint64_t x;
    do {
        x = sharc__rng_next(r);
    } while (x >= limit);
    return x % n;
}

double sharc__rng_uniform(sharc__rng *r)
{
    return (double)(sharc__rng_next(r) >> 11) * 0x1.0p-53;
}

void sharc__rng_shuffle(sharc__rng *r, void *base, size_t n, size_t size)
{
    unsigned char tmp[64];
    unsigned char *a = base;
    if (size > sizeof tmp)
        return;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)sharc__rng_below(r, i);
        if (j == i - 1)
            continue;
        memcpy(tmp, a + (i - 1) * size, size);
        memcpy(a + (i - 1) * size, a + j * size, size);
        memcpy(a + j * size, tmp, size);
    }
}

void sharc__rng_shuffle_u32(sharc__rng *r, uint32_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)sharc__rng_below(r, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

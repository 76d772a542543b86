/*
 * Little-endian loads and stores of the fixed-width fields of sharc's binary formats (resume
 * states, broadcast frames), whatever the host's byte order. On a little-endian host they
 * are single moves: gcc does not merge a loop of byte stores (-O2 keeps the loop, and the
 * sampler state written for every batch spent 7% of the planner in it).
 */
#ifndef SHARC_SRC_LE_H
#define SHARC_SRC_LE_H

#include <stdint.h>
#include <string.h>

static inline void sharc__store_le32(void *p, uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, sizeof v);
#else
    unsigned char *b = p;
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
#endif
}

static inline void sharc__store_le64(void *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, sizeof v);
#else
    unsigned char *b = p;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
#endif
}

static inline uint32_t sharc__load_le32(const void *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    const unsigned char *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
#endif
}

static inline uint64_t sharc__load_le64(const void *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    const unsigned char *b = p;
    return (uint64_t)sharc__load_le32(b) | (uint64_t)sharc__load_le32(b + 4) << 32;
#endif
}

#endif /* SHARC_SRC_LE_H */

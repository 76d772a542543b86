/*
 * A growable byte buffer whose memory comes from a context's allocator.
 */
#ifndef SHARC_SRC_BUF_H
#define SHARC_SRC_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"

typedef struct sharc__buf {
    uint8_t *data; ///< always NUL-terminated past `len` when non-NULL
    size_t len;
    size_t cap;
} sharc__buf;

/** Make room for at least `cap` bytes plus a terminating NUL. Keeps contents. */
int sharc__buf_reserve(sharc__ctx *ctx, sharc__buf *b, size_t cap);
/** Append bytes. */
int sharc__buf_append(sharc__ctx *ctx, sharc__buf *b, const void *data, size_t n);
/** Replace contents with a copy of `data`. */
int sharc__buf_set(sharc__ctx *ctx, sharc__buf *b, const void *data, size_t n);
/** Replace contents with a NUL-terminated string (NULL sets an empty buffer). */
int sharc__buf_set_str(sharc__ctx *ctx, sharc__buf *b, const char *s);
static inline void sharc__buf_clear(sharc__buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}
static inline const char *sharc__buf_str(const sharc__buf *b)
{
    return b->data ? (const char *)b->data : "";
}
void sharc__buf_free(sharc__ctx *ctx, sharc__buf *b);

/**
 * memcpy for data that will not be read again soon (audio members buffered for the
 * sampler): large copies use non-temporal stores where the CPU has them, so they neither
 * evict the cache nor read every destination line first. Same result as memcpy.
 */
void sharc__memcpy_stream(void *restrict dst, const void *restrict src, size_t n);

/** memset(dst, 0, n) the same way, for the padding of batch rows. */
void sharc__memzero_stream(void *dst, size_t n);

#endif /* SHARC_SRC_BUF_H */

#include "base/buf.h"

#include <errno.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

int sharc__buf_reserve(sharc__ctx *ctx, sharc__buf *b, size_t cap)
{
    if (cap == SIZE_MAX)
        return SHARC_ERR(ENOMEM);
    if (b->data && cap < b->cap)
        return 0;
    /* A first reservation is usually the exact size of what follows (a tar member): give
     * exactly that. Later growth doubles, so appends stay amortised O(1). */
    size_t new_cap = b->cap ? b->cap : (cap + 1 > 256 ? cap + 1 : 256);
    while (new_cap <= cap) {
        if (new_cap > SIZE_MAX / 2)
            return SHARC_ERR(ENOMEM);
        new_cap *= 2;
    }
    uint8_t *p = sharc__realloc(ctx, b->data, b->data ? b->len + 1 : 0, new_cap);
    if (!p)
        return SHARC_ERR(ENOMEM);
    b->data = p;
    b->cap = new_cap;
    b->data[b->len] = 0;
    return 0;
}

int sharc__buf_append(sharc__ctx *ctx, sharc__buf *b, const void *data, size_t n)
{
    if (n > SIZE_MAX - b->len - 1)
        return SHARC_ERR(ENOMEM);
    int rc = sharc__buf_reserve(ctx, b, b->len + n);
    if (rc < 0)
        return rc;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int sharc__buf_set(sharc__ctx *ctx, sharc__buf *b, const void *data, size_t n)
{
    sharc__buf_clear(b);
    return sharc__buf_append(ctx, b, data, n);
}

int sharc__buf_set_str(sharc__ctx *ctx, sharc__buf *b, const char *s)
{
    return sharc__buf_set(ctx, b, s ? s : "", s ? strlen(s) : 0);
}

/* Below this, a plain memcpy (the destination lines are few and may be reused). */
#define STREAM_MIN_BYTES (64u << 10)

void sharc__memcpy_stream(void *restrict dst, const void *restrict src, size_t n)
{
#if defined(__SSE2__)
    if (n >= STREAM_MIN_BYTES) {
        uint8_t *d = dst;
        const uint8_t *s = src;
        size_t head = (16 - ((uintptr_t)d & 15)) & 15;
        memcpy(d, s, head);
        d += head;
        s += head;
        n -= head;
        for (; n >= 64; n -= 64, d += 64, s += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
            _mm_stream_si128((__m128i *)(void *)d, a);
            _mm_stream_si128((__m128i *)(void *)(d + 16), b);
            _mm_stream_si128((__m128i *)(void *)(d + 32), c);
            _mm_stream_si128((__m128i *)(void *)(d + 48), e);
        }
        memcpy(d, s, n);
        _mm_sfence(); /* visible to whichever thread decodes the member */
        return;
    }
#endif
    memcpy(dst, src, n);
}

/* Zeros are only ever written into batches read much later: stream all but tiny fills. */
#define ZERO_STREAM_MIN_BYTES 4096u

void sharc__memzero_stream(void *dst, size_t n)
{
#if defined(__SSE2__)
    if (n >= ZERO_STREAM_MIN_BYTES) {
        uint8_t *d = dst;
        size_t head = (16 - ((uintptr_t)d & 15)) & 15;
        memset(d, 0, head);
        d += head;
        n -= head;
        __m128i z = _mm_setzero_si128();
        for (; n >= 64; n -= 64, d += 64) {
            _mm_stream_si128((__m128i *)(void *)d, z);
            _mm_stream_si128((__m128i *)(void *)(d + 16), z);
            _mm_stream_si128((__m128i *)(void *)(d + 32), z);
            _mm_stream_si128((__m128i *)(void *)(d + 48), z);
        }
        memset(d, 0, n);
        _mm_sfence();
        return;
    }
#endif
    memset(dst, 0, n);
}

void sharc__buf_free(sharc__ctx *ctx, sharc__buf *b)
{
    sharc__free(ctx, b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

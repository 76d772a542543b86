#include "buf.h"

#include <errno.h>
#include <string.h>

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

void sharc__buf_free(sharc__ctx *ctx, sharc__buf *b)
{
    sharc__free(ctx, b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

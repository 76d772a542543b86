#include "io/bufpool.h"

#include <string.h>

void sharc__bufpool_init(sharc__bufpool *pool, sharc__ctx *ctx)
{
    memset(pool, 0, sizeof *pool);
    pool->ctx = ctx;
    pthread_mutex_init(&pool->mu, NULL);
}

void sharc__bufpool_destroy(sharc__bufpool *pool)
{
    for (size_t i = 0; i < pool->n; i++)
        sharc__buf_free(pool->ctx, &pool->free[i]);
    pool->n = 0;
    pthread_mutex_destroy(&pool->mu);
}

int sharc__bufpool_fits(size_t cap, size_t n)
{
    return cap > n && cap <= n + 1 + (n + 1) / 4 + 4096;
}

void sharc__bufpool_give(sharc__bufpool *pool, sharc__buf *b)
{
    if (!b->data)
        return;
    sharc__buf old = {0};
    pthread_mutex_lock(&pool->mu);
    if (pool->n < SHARC__BUFPOOL_MAX) {
        pool->free[pool->n++] = *b;
    } else {
        /* Full: the newest buffer replaces an old one, so sizes follow the data. */
        old = pool->free[pool->evict];
        pool->free[pool->evict] = *b;
        pool->evict = (pool->evict + 1) % SHARC__BUFPOOL_MAX;
    }
    memset(b, 0, sizeof *b);
    pthread_mutex_unlock(&pool->mu);
    sharc__buf_free(pool->ctx, &old);
}

void sharc__bufpool_take(sharc__bufpool *pool, size_t n, sharc__buf *b)
{
    sharc__bufpool_give(pool, b);
    pthread_mutex_lock(&pool->mu);
    size_t best = pool->n;
    for (size_t i = 0; i < pool->n; i++)
        if (sharc__bufpool_fits(pool->free[i].cap, n) &&
            (best == pool->n || pool->free[i].cap < pool->free[best].cap))
            best = i;
    if (best < pool->n) {
        *b = pool->free[best];
        pool->free[best] = pool->free[--pool->n];
        sharc__buf_clear(b);
    }
    pthread_mutex_unlock(&pool->mu);
}

/*
 * Recycled byte buffers for tar members. The batch pipeline's shard streams read each
 * member into a buffer taken from here, sized to fit it, and the buffered cut keeps that
 * buffer until its batch is decoded, when it comes back. So a steady stream neither copies
 * members nor allocates (and faults in) fresh memory per cut. Thread-safe.
 */
#ifndef SHARC_SRC_BUFPOOL_H
#define SHARC_SRC_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>

#include "base/buf.h"

#define SHARC__BUFPOOL_MAX 64

typedef struct sharc__bufpool {
    sharc__ctx *ctx;
    pthread_mutex_t mu;
    sharc__buf free[SHARC__BUFPOOL_MAX];
    size_t n;
    size_t evict; ///< next slot replaced when the pool is full
} sharc__bufpool;

void sharc__bufpool_init(sharc__bufpool *pool, sharc__ctx *ctx);
void sharc__bufpool_destroy(sharc__bufpool *pool);

/** Whether a buffer of capacity `cap` is a good fit for `n` bytes: no more than 1.25x. */
int sharc__bufpool_fits(size_t cap, size_t n);

/**
 * Make `b` (whatever it holds is given back first) a buffer with room for `n` bytes whose
 * capacity fits them, from the pool when one fits, else empty (the caller's reserve then
 * allocates exactly). Contents are not kept.
 */
void sharc__bufpool_take(sharc__bufpool *pool, size_t n, sharc__buf *b);

/** Give a buffer back (or free it when the pool is full); `b` is left empty. */
void sharc__bufpool_give(sharc__bufpool *pool, sharc__buf *b);

#endif /* SHARC_SRC_BUFPOOL_H */

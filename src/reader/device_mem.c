/*
 * The device stage's device memory: a cache that the batch pool allocates from and frees
 * to, and the caller's current device kept across the calls that change it.
 */
#include <errno.h>
#include <string.h>

#include "reader/device_impl.h"

/* The bytes actually allocated for a request: sixteen size classes per power of two, so a
 * batch a little larger than the last reuses a cached block instead of allocating. */
size_t sharc__device_size_class(size_t n)
{
    if (n <= 4096)
        return 4096;
    size_t p = 4096;
    while (p < n && p <= SIZE_MAX / 2)
        p <<= 1;
    size_t step = p / 16;
    return (n + step - 1) / step * step;
}

static int push_block(devmem *m, devblock **list, size_t *n, size_t *cap, devblock b)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        devblock *p = sharc__malloc(&m->ctx, nc * sizeof *p);
        if (!p)
            return SHARC_ERR(ENOMEM);
        if (*n)
            memcpy(p, *list, *n * sizeof *p);
        sharc__free(&m->ctx, *list);
        *list = p;
        *cap = nc;
    }
    (*list)[(*n)++] = b;
    return 0;
}

/* Make device `ordinal` current, keeping the caller's in *prev for sharc__device_leave. */
cudaError_t sharc__device_enter(int ordinal, int *prev)
{
    *prev = -1;
    cudaError_t e = cudaGetDevice(prev);
    if (e != cudaSuccess) {
        *prev = -1;
        return e;
    }
    return *prev == ordinal ? cudaSuccess : cudaSetDevice(ordinal);
}

void sharc__device_leave(int ordinal, int prev)
{
    if (prev >= 0 && prev != ordinal)
        cudaSetDevice(prev);
}

void sharc__devmem_free_cached(devmem *m)
{
    for (size_t i = 0; i < m->n_free; i++)
        cudaFree(m->free_list[i].ptr);
    m->n_free = 0;
}

void sharc__devmem_destroy(devmem *m)
{
    int prev;
    int entered = sharc__device_enter(m->ordinal, &prev) == cudaSuccess;
    sharc__devmem_free_cached(m);
    if (entered)
        sharc__device_leave(m->ordinal, prev);
    pthread_mutex_destroy(&m->lock);
    sharc__ctx ctx = m->ctx;
    sharc__free(&ctx, m->free_list);
    sharc__free(&ctx, m->live);
    sharc__free(&ctx, m);
}

/* The allocator's calls run with the block's device current: the stage's calls have made it
 * so, and a release after the stage is closed makes it so for the free. */
int sharc__devmem_alloc(void *cookie, void **ptr, size_t size, int ordinal)
{
    devmem *m = cookie;
    *ptr = NULL;
    (void)ordinal;
    pthread_mutex_lock(&m->lock);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < m->n_free; i++)
        if (m->free_list[i].cap >= size && m->free_list[i].cap / 2 <= size &&
            (best == SIZE_MAX || m->free_list[i].cap < m->free_list[best].cap))
            best = i;
    devblock b = {0};
    if (best != SIZE_MAX) {
        b = m->free_list[best];
        m->free_list[best] = m->free_list[--m->n_free];
    } else {
        b.cap = sharc__device_size_class(size);
        cudaError_t e = cudaMalloc(&b.ptr, b.cap);
        if (e == cudaErrorMemoryAllocation) {
            /* The cache may hold what this needs, in blocks of other sizes. */
            cudaGetLastError();
            sharc__devmem_free_cached(m);
            e = cudaMalloc(&b.ptr, b.cap);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            m->last = e;
            pthread_mutex_unlock(&m->lock);
            return SHARC_ERR_CUDA;
        }
        m->n_allocs++;
        m->bytes += b.cap;
    }
    int rc = push_block(m, &m->live, &m->n_live, &m->cap_live, b);
    if (rc < 0)
        cudaFree(b.ptr);
    else
        *ptr = b.ptr;
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void sharc__devmem_free(void *cookie, void *ptr, int ordinal)
{
    devmem *m = cookie;
    (void)ordinal;
    pthread_mutex_lock(&m->lock);
    size_t i = 0;
    while (i < m->n_live && m->live[i].ptr != ptr)
        i++;
    if (i == m->n_live) { /* not ours: nothing to give back */
        pthread_mutex_unlock(&m->lock);
        return;
    }
    devblock b = m->live[i];
    m->live[i] = m->live[--m->n_live];
    int destroy = 0;
    if (m->closed) {
        int prev;
        int entered = sharc__device_enter(m->ordinal, &prev) == cudaSuccess;
        cudaFree(b.ptr);
        if (entered)
            sharc__device_leave(m->ordinal, prev);
        destroy = m->n_live == 0;
    } else if (push_block(m, &m->free_list, &m->n_free, &m->cap_free, b) < 0) {
        cudaFree(b.ptr);
    }
    pthread_mutex_unlock(&m->lock);
    if (destroy)
        sharc__devmem_destroy(m);
}

cudaError_t sharc__devmem_last(devmem *m)
{
    pthread_mutex_lock(&m->lock);
    cudaError_t e = m->last;
    pthread_mutex_unlock(&m->lock);
    return e;
}

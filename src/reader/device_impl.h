/*
 * The device stage's internals, shared by the stage (device.c), its device-memory cache
 * (device_mem.c) and the copy into its staging buffers on several threads (device_copy.c).
 * The cache and the copy call nothing of the stage. Built only with CUDA: nothing includes
 * this header in a build without it.
 */
#ifndef SHARC_SRC_DEVICE_IMPL_H
#define SHARC_SRC_DEVICE_IMPL_H

#include <cuda_runtime.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "reader/device.h"

/* ---- Device memory: a cache the batch pool allocates from and frees to ---------------- */

typedef struct devblock {
    void *ptr;
    size_t cap;
} devblock;

/* Shared by the stage and the pool: the pool may free its buffers after the stage is
 * closed (the caller's last sharc_batch_release), so the cache lives until both are done
 * with it. */
typedef struct devmem {
    pthread_mutex_t lock;
    sharc__ctx ctx; ///< host allocator for the lists
    int ordinal;
    devblock *free_list, *live;
    size_t n_free, n_live, cap_free, cap_live;
    int closed;        ///< the stage is gone: freed blocks go back to CUDA
    uint64_t n_allocs; ///< cudaMalloc and cudaHostAlloc calls
    uint64_t bytes;    ///< their bytes
    cudaError_t last;  ///< the last allocation's error
} devmem;

/** The bytes actually allocated for a request of `n`: its size class. */
size_t sharc__device_size_class(size_t n);

/** Make device `ordinal` current, keeping the caller's in *prev for sharc__device_leave. */
cudaError_t sharc__device_enter(int ordinal, int *prev);

/** Make the caller's device `prev` (from sharc__device_enter) current again. */
void sharc__device_leave(int ordinal, int prev);

/** Give m's cached blocks back to CUDA; the caller holds m->lock or is m's last user. */
void sharc__devmem_free_cached(devmem *m);

/** Free m, its cached blocks and its lists (its device made current for the frees). */
void sharc__devmem_destroy(devmem *m);

/**
 * A block of at least `size` bytes on m's device, from the cache or cudaMalloc: the
 * sharc__device_allocator's alloc (its cookie is m).
 * @return 0, SHARC_ERR_CUDA (m->last says why) or SHARC_ERR(ENOMEM)
 */
int sharc__devmem_alloc(void *cookie, void **ptr, size_t size, int ordinal);

/** The CUDA error of m's last failed allocation (read under m->lock). */
cudaError_t sharc__devmem_last(devmem *m);

/**
 * Give back a block of sharc__devmem_alloc: to the cache, or to CUDA once the stage is
 * closed, the last of them destroying m. A pointer m did not hand out is left alone.
 */
void sharc__devmem_free(void *cookie, void *ptr, int ordinal);

/* ---- A copy into the staging buffers on several threads -------------------------------- */

/* One thread copies about 10 GB/s, a sixth of what a PCIe 5 upload takes: the copy into the
 * pinned staging buffer is split over the caller's thread and COPY_HELPERS more. */
#define COPY_HELPERS 3

typedef struct copier copier;

typedef struct helper_arg {
    copier *c;
    int k; ///< the helper's part is k + 1; the caller's thread copies part 0
} helper_arg;

struct copier {
    pthread_t th[COPY_HELPERS];
    helper_arg args[COPY_HELPERS];
    int n; ///< helper threads started
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int mu_made, go_made, done_made;
    uint64_t job; ///< the number of the copy posted last
    int pending;  ///< helpers still copying it
    int stop;
    uint8_t *dst;
    const uint8_t *src;
    size_t bytes;
};

/** Start c's helpers (c zeroed); with none started, c copies on the caller's thread. */
void sharc__copier_start(copier *c);

/** Stop and join c's helpers; c is zeroed. */
void sharc__copier_stop(copier *c);

/** memcpy, split over c's helpers when it is long. */
void sharc__copier_copy(copier *c, void *dst, const void *src, size_t bytes);

#endif /* SHARC_SRC_DEVICE_IMPL_H */

/*
 * A host allocator for the GPU tests' transports whose memory comes from mmap and is
 * unmapped on free: reading a closed transport faults at once instead of reading stale
 * bytes. guard_live counts the allocations not yet freed.
 */
#ifndef SHARC_TESTS_GPU_GUARD_ALLOC_H
#define SHARC_TESTS_GPU_GUARD_ALLOC_H

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "sharc/common.h"

static int guard_live;

/* One page in front holds the mapping's length; alignments up to a page are honoured. */
static inline void *guard_alloc(void *cookie, size_t size, size_t align)
{
    (void)cookie;
    if (align > 4096)
        return NULL;
    size_t len = ((size ? size : 1) + 4095) / 4096 * 4096 + 4096;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memcpy(p, &len, sizeof len);
    guard_live++;
    return p + 4096;
}

static inline void guard_free(void *cookie, void *ptr)
{
    (void)cookie;
    if (!ptr)
        return;
    uint8_t *p = (uint8_t *)ptr - 4096;
    size_t len;
    memcpy(&len, p, sizeof len);
    munmap(p, len);
    guard_live--;
}

static inline sharc_allocator guard_allocator(void)
{
    sharc_allocator a = {NULL, guard_alloc, guard_free};
    return a;
}

#endif

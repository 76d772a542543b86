/*
 * The internal transport interface: rank, size, broadcast of a buffer from a root,
 * grouping of several broadcasts, abort. Implementations: transport_self.c,
 * transport_mpi.c, transport_nccl.c. The public constructors are in sharc/transport.h,
 * sharc/mpi.h and sharc/cuda.h.
 */
#ifndef SHARC_SRC_TRANSPORT_H
#define SHARC_SRC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "batching/batch.h"
#include "base/ctx.h"
#include "sharc/batch.h"
#include "sharc/transport.h"

typedef struct sharc__transport_ops {
    const char *name;
    /** Device tensors are broadcast from and into their own memory (NCCL), so a source's
     *  device tensor must be on the transport's device; 0 where they are staged (MPI). */
    int device_in_place;
    /**
     * Broadcast `nbytes` at `buf` from group rank `root` to every rank, blocking until the
     * data is in place on this rank. `device` says where `buf` lives; only transports with
     * device memory (NCCL; MPI given a device) accept SHARC_DEVICE_CUDA, which the wrapper
     * checks. Errors are set in t->ctx.
     */
    int (*bcast)(sharc_transport *t, void *buf, size_t nbytes, int root, sharc_device device);
    /**
     * Replace *value by the maximum of every rank's *value (a u32 all-reduce), blocking
     * until done. Used for each step's status word: which rank, if any, has failed.
     */
    int (*allreduce_max)(sharc_transport *t, uint32_t *value);
    /** Start a group: broadcasts up to group_end may be issued together. */
    int (*group_begin)(sharc_transport *t);
    /** End a group: returns once every broadcast of the group has completed here. */
    int (*group_end)(sharc_transport *t);
    /** Give up on pending collectives (after a local failure); the transport is unusable. */
    void (*abort)(sharc_transport *t);
    /** Free the implementation (t itself is freed by sharc_transport_close). */
    void (*close)(sharc_transport *t);
} sharc__transport_ops;

/** How a transport's device memory is made and freed (CUDA: bcast/cuda_mem.c). */
typedef struct sharc__device_ops {
    /** Allocate `size` bytes on device `ordinal`; 0 or an error described in ctx. */
    int (*alloc)(sharc__ctx *ctx, void **ptr, size_t size, int ordinal);
    /** Free what alloc returned; a failure is only logged through ctx. */
    void (*free)(sharc__ctx *ctx, void *ptr, int ordinal);
} sharc__device_ops;

/** The device memory behind a transport's allocator (transport.c). */
typedef struct sharc__device_heap sharc__device_heap;

struct sharc_transport {
    const sharc__transport_ops *ops;
    sharc__ctx ctx;
    int rank;
    int size;
    int timeout_ms;
    int broken; ///< set after abort: every later call fails
    /** Device memory for device tensors (sharc__transport_set_device; NULL alloc: none). Its
     *  cookie is the heap, never the transport, so buffers outlive the transport safely. */
    sharc__device_allocator device;
    int device_ordinal; ///< the device received tensors are allocated on (-1: none)
    sharc__device_heap *heap;
    void *impl;
};

/**
 * Check settings a transport constructor was given (NULL is the defaults): their struct_size
 * (sharc/common.h) and reserved bytes. 0 or SHARC_ERR(EINVAL), logged. Every public
 * constructor calls it before it reads another field.
 */
int sharc__transport_check_settings(const sharc_transport_settings *s);

/** Allocate a transport with `ops`, rank and size (checking `s` first); impl is the caller's
 *  to set. */
int sharc__transport_new(sharc_transport **out, const sharc__transport_ops *ops,
                         const sharc_transport_settings *s, int rank, int size);

/**
 * Let `t` carry device tensors: received ones are allocated on `ordinal` (this rank's own
 * device, whatever device the source's tensors were on) through `ops`. The allocator is a
 * reference-counted heap: the transport holds one reference and every buffer it hands out
 * holds one, so that a batch released after sharc_transport_close() frees its device memory
 * through a heap that is still alive; the last free releases the heap. Before the transport
 * is used; a second call replaces the heap (buffers of the first keep theirs).
 * @return 0 or SHARC_ERR(ENOMEM)
 */
int sharc__transport_set_device(sharc_transport *t, const sharc__device_ops *ops, int ordinal);

/** The transport's device allocator (NULL without device support). */
const sharc__device_allocator *sharc__transport_device_allocator(const sharc_transport *t);

/** Wrappers that check `broken` and arguments before calling the ops. */
int sharc__transport_bcast(sharc_transport *t, void *buf, size_t nbytes, int root,
                           sharc_device device);
int sharc__transport_allreduce_max(sharc_transport *t, uint32_t *value);
int sharc__transport_group_begin(sharc_transport *t);
int sharc__transport_group_end(sharc_transport *t);
void sharc__transport_abort(sharc_transport *t);

#endif /* SHARC_SRC_TRANSPORT_H */

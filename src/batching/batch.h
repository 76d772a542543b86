/*
 * The batch pool: sharc_batch objects whose tensor storage is reused across steps.
 *
 * Each pooled batch owns one contiguous, 256-byte aligned host block. Host tensors are laid
 * out in it exactly as in a frame payload (sharc__frame_layout), so a batch collated into
 * the block is broadcast without a copy, and a received payload lands in it directly.
 * Device tensors get one device buffer each from an optional device allocator. Blocks only
 * grow, so a steady state allocates nothing.
 *
 * Use: acquire, add tensors (sharc__batch_add_tensor), sharc__batch_finish to get the
 * data pointers, fill, hand out; sharc_batch_release() gives it back from any thread.
 */
#ifndef SHARC_SRC_BATCH_H
#define SHARC_SRC_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "sharc/batch.h"

#define SHARC__BATCH_MAX_TENSORS 64 ///< tensors per pooled batch

typedef struct sharc__batch_pool sharc__batch_pool;

/** Device memory for device tensors (the NCCL transport provides one). */
typedef struct sharc__device_allocator {
    void *cookie;
    int (*alloc)(void *cookie, void **ptr, size_t size, int ordinal); ///< 0 or an error
    void (*free)(void *cookie, void *ptr, int ordinal);
} sharc__device_allocator;

/**
 * Create a pool of at most `cap` batches (>= 1), allocated on first use. `dev` may be NULL
 * (host tensors only). The pool copies ctx's allocator and logger.
 */
int sharc__batch_pool_create(sharc__batch_pool **out, const sharc__ctx *ctx, size_t cap,
                             const sharc__device_allocator *dev);

/**
 * Destroy the pool. Batches still held by callers stay valid; the last release frees what
 * remains. NULL-safe; sets *pool = NULL.
 */
void sharc__batch_pool_destroy(sharc__batch_pool **pool);

/**
 * Take a free batch (n_tensors = 0, step and epoch 0). Thread-safe.
 * @return 0, SHARC_ERR_BACKPRESSURE when all `cap` batches are held (nothing is
 *         overwritten), or SHARC_ERR(ENOMEM). Errors are described in the pool's text
 *         (sharc__batch_pool_error).
 */
int sharc__batch_pool_acquire(sharc__batch_pool *pool, sharc_batch **out);

/** Number of batches currently held (acquired and not released). Thread-safe. */
size_t sharc__batch_pool_held(sharc__batch_pool *pool);

/** Text of the pool's last error. */
const char *sharc__batch_pool_error(const sharc__batch_pool *pool);

/**
 * Declare the next tensor of an acquired batch. Host tensors get the next 256-aligned
 * offset of the block. Data pointers are set by sharc__batch_finish.
 * @return the tensor's index, or SHARC_ERR_FRAME (bad shape/dtype/name),
 *         SHARC_ERR_TOO_LARGE (too many tensors), SHARC_ERR_UNSUPPORTED (device tensor
 *         without a device allocator)
 */
int sharc__batch_add_tensor(sharc_batch *b, const char *name, sharc_dtype dtype,
                            sharc_device device, int ordinal, int ndim, const int64_t *shape);

/**
 * Declare all tensors of an acquired, empty batch at once with the payload offsets a frame
 * gave them (a receiver honours the sender's layout). Inputs come from sharc__frame_decode,
 * which has validated them.
 * @return 0 or SHARC_ERR_TOO_LARGE / SHARC_ERR_UNSUPPORTED as sharc__batch_add_tensor
 */
int sharc__batch_set_layout(sharc_batch *b, const sharc_tensor *t, const uint64_t *offsets,
                            size_t n, uint64_t payload_bytes);

/**
 * Size the storage for the declared tensors (growing the block only when needed) and set
 * every tensor's data pointer. Host tensor bytes are not cleared.
 * @return 0 or SHARC_ERR(ENOMEM) / a device allocator error
 */
int sharc__batch_finish(sharc_batch *b);

/**
 * Size the storage for tensors declared after sharc__batch_finish, keeping the bytes of the
 * tensors finished before (copied when the block grows), and set every data pointer again:
 * pointers taken before the call are stale. Steps that add tensors to a collated batch use it.
 * @return as sharc__batch_finish
 */
int sharc__batch_extend(sharc_batch *b);

/** A cut of `b` to name in an error: the first row's id (at most 200 bytes), or "?". */
const char *sharc__batch_first_cut(const sharc_batch *b, char *buf, size_t cap);

/**
 * Remove the tensor called `name` from a finished batch. The host tensors after it move
 * down to the offsets a frame gives them, so the payload stays packed; data pointers taken
 * before the call are stale.
 * @return 0, or SHARC_ERR_FRAME when the batch has no such tensor
 */
int sharc__batch_remove_tensor(sharc_batch *b, const char *name);

/**
 * The frame-ready payload of a pooled batch: its host block and the bytes used (the end
 * of the last host tensor).
 * @return 1 when `b` comes from a pool (then *base and *len are set), 0 otherwise
 */
int sharc__batch_payload(const sharc_batch *b, uint8_t **base, uint64_t *len);

#endif /* SHARC_SRC_BATCH_H */

/*
 * Buffered cuts: what the sampler holds for each cut of the batch pipeline, its metadata
 * and its still-encoded audio, until a decode worker writes the samples into a batch.
 * The audio buffer is taken over from the shard stream without a copy; buffers of freed
 * cuts go back to a sharc__bufpool to receive the next members.
 */
#ifndef SHARC_SRC_BCUT_H
#define SHARC_SRC_BCUT_H

#include <stdint.h>

#include "bufpool.h"
#include "reader_impl.h"

/* A cut's key locates it for a resume: epoch (16 bits), shard index, position in shard. */
#define SHARC__KEY_SHARD_BITS 24
#define SHARC__KEY_POS_BITS   24

static inline uint64_t sharc__key_epoch(uint64_t key)
{
    return key >> (SHARC__KEY_SHARD_BITS + SHARC__KEY_POS_BITS);
}
static inline uint32_t sharc__key_shard(uint64_t key)
{
    return (uint32_t)((key >> SHARC__KEY_POS_BITS) & ((1u << SHARC__KEY_SHARD_BITS) - 1));
}
static inline uint64_t sharc__key_position(uint64_t key)
{
    return key & ((1u << SHARC__KEY_POS_BITS) - 1);
}

typedef struct sharc__bcut {
    uint64_t key;
    double duration;
    sharc__decode_job job; ///< points into this block and `audio`
    const char *text, *speaker, *language;
    size_t block_bytes;
    sharc__buf audio; ///< the encoded member
} sharc__bcut;

/** The key of a raw cut. @return 0, or SHARC_ERR_TOO_LARGE past 2^16 epochs / 2^24 cuts */
int sharc__cut_key(sharc__ctx *ctx, const sharc__rawcut *c, uint64_t *key);

/**
 * Make a buffered cut from the reader's raw cut: the metadata is copied, the audio buffer
 * taken over (c->audio is left empty). In batch mode the streams read members into
 * buffers from `pool` that fit them within 1.25x, so buffered memory stays within 1.25x of
 * the bytes counted.
 */
int sharc__bcut_from_raw(sharc__bufpool *pool, sharc__rawcut *c, sharc__bcut **out);

/** Bytes counted against the sampler's budget: lengths, so batches never depend on
 *  how buffers happened to be recycled. */
uint64_t sharc__bcut_bytes(const sharc__bcut *b);

/** Free a cut, recycling its audio buffer. NULL-safe; any thread. */
void sharc__bcut_free(sharc__bufpool *pool, sharc__bcut *b);

#endif /* SHARC_SRC_BCUT_H */

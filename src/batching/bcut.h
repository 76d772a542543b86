/*
 * Buffered cuts: what the sampler holds for each cut of the batch pipeline, its metadata
 * and its still-encoded audio, until a decode worker writes the samples into a batch.
 * The audio buffer is taken over from the shard stream without a copy; buffers of freed
 * cuts go back to a sharc__bufpool to receive the next members.
 */
#ifndef SHARC_SRC_BCUT_H
#define SHARC_SRC_BCUT_H

#include <stdint.h>

#include "io/bufpool.h"
#include "decode/decode.h"
#include "plan/cut.h"

/*
 * A cut's key locates it for a resume: its shard visit (epoch * n_shards + shard index, the
 * upper 40 bits) and its position in the shard (the lower 24). Keys sort as (epoch, shard,
 * position). A small dataset repeated for a long run reaches many epochs, and a large one
 * few: the visit count bounds both, at 2^40 - 2 (the keyset cannot hold UINT64_MAX), which
 * no run reaches (a shard opened every microsecond would take 12 days).
 */
#define SHARC__KEY_POS_BITS  24
#define SHARC__KEY_MAX_VISIT ((UINT64_C(1) << (64 - SHARC__KEY_POS_BITS)) - 2)

static inline uint64_t sharc__key_visit(uint64_t key)
{
    return key >> SHARC__KEY_POS_BITS;
}
static inline uint64_t sharc__key_epoch(uint64_t key, size_t n_shards)
{
    return sharc__key_visit(key) / n_shards;
}
static inline uint32_t sharc__key_shard(uint64_t key, size_t n_shards)
{
    return (uint32_t)(sharc__key_visit(key) % n_shards);
}
static inline uint64_t sharc__key_position(uint64_t key)
{
    return key & ((UINT64_C(1) << SHARC__KEY_POS_BITS) - 1);
}

typedef struct sharc__bcut {
    uint64_t key;
    double duration;
    sharc__decode_job job; ///< points into this block and `audio`
    const char *text, *speaker, *language;
    const int32_t *tokens; ///< the transcript's token ids, in this block (NULL without a tokenizer)
    uint32_t n_tokens;     ///< how many
    /** A mixture's tag values for the batch's tag columns (NULL entries where its source has
     *  none), owned by the reader; NULL for a single dataset. */
    const char *const *tags;
    size_t block_bytes;
    sharc__buf audio; ///< the encoded member
    /** The row's features once a decode worker computed them (batching/featurize.h): f32
     *  [n_mels, feat_frames], from the same pool as `audio`; empty until then. */
    sharc__buf feats;
    int64_t feat_frames; ///< valid frames in `feats`
} sharc__bcut;

/** The key of a raw cut of a dataset of `n_shards` (>= 1) shards. @return 0, or
 *  SHARC_ERR_TOO_LARGE past 2^24 cuts in a shard or 2^40 - 2 shard visits */
int sharc__cut_key(sharc__ctx *ctx, const sharc__rawcut *c, size_t n_shards, uint64_t *key);

/**
 * Make a buffered cut from the reader's raw cut: the metadata is copied, the audio buffer
 * taken over (c->audio is left empty). In batch mode the streams read members into
 * buffers from `pool` that fit them within 1.25x, so buffered memory stays within 1.25x of
 * the bytes counted.
 */
int sharc__bcut_from_raw(sharc__bufpool *pool, sharc__rawcut *c, size_t n_shards,
                         sharc__bcut **out);

/** Bytes counted against the sampler's budget: lengths, so batches never depend on
 *  how buffers happened to be recycled. */
uint64_t sharc__bcut_bytes(const sharc__bcut *b);

/** Free a cut, recycling its audio and features buffers. NULL-safe; any thread. */
void sharc__bcut_free(sharc__bufpool *pool, sharc__bcut *b);

#endif /* SHARC_SRC_BCUT_H */

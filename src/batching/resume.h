/*
 * The reader's resume state blob. Little-endian u64 fields: magic and version, a hash of
 * the shards and settings, the next step, the walk position, the counters, the sorted
 * keys of the cuts the sampler holds, the sampler's own blob, and a CRC-32 (zlib) of all
 * that precedes it.
 *
 * The pipeline writes a draft after every batch it plans (keys in any order, no CRC) and
 * finishes one only when the caller saves it: sorting and checksumming are paid per save,
 * not per batch.
 */
#ifndef SHARC_SRC_RESUME_H
#define SHARC_SRC_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "plan/keyset.h"
#include "plan/dataset.h"
#include "sharc/reader.h"
#include "walk/walk.h"
#include "batching/sampler.h"

/**
 * Take the cuts skipped while decoding (`skips`: their cuts, audio and padded seconds,
 * skipped_cuts and problems) out of counters that counted them as returned: the planner
 * counts a batch's cuts before its rows are decoded.
 */
void sharc__stats_take_back(sharc_reader_stats *st, const sharc_reader_stats *skips);

/**
 * The counters of a draft state with `skipped` taken back: the cuts that its batches, or
 * earlier ones, skipped while decoding (their cuts, audio_seconds and padded_seconds taken
 * back, their skipped_cuts and problems added).
 * @return 0 with *out, or -1 (out untouched) when the draft is too short
 */
int sharc__resume_draft_stats(const uint8_t *draft, size_t len, const sharc_reader_stats *skipped,
                              sharc_reader_stats *out);

/**
 * Write those counters into the draft, and into *out. The planner writes a state before the
 * batch's rows are decoded; the caller applies this when the batch is handed out.
 */
void sharc__resume_take_back(uint8_t *draft, size_t len, const sharc_reader_stats *skipped,
                             sharc_reader_stats *out);

/** The counters of a state the caller passed to resume, with `batches` its step, when its
 *  checksum, version and hash `state_hash` are right; else `out` is left as it is. */
void sharc__resume_saved_stats(const uint8_t *blob, size_t len, uint64_t state_hash,
                               sharc_reader_stats *out);

/** What a state blob says; pointers point into the blob. */
typedef struct sharc__resume {
    uint64_t state_hash; ///< sharc__resume_hash() of the reader's shards and settings
    uint64_t next_step;
    sharc__walk_pos pos;
    sharc_reader_stats stats;
    size_t n_keys;
    const uint8_t *keys; ///< n_keys little-endian u64, read with sharc__resume_key()
    const uint8_t *sampler;
    size_t sampler_len;
} sharc__resume;

/** Hash of what a state depends on: shard names (not their directory), the walk and the
 *  decode settings. The sampler hashes its own settings. O(shards): the reader computes it
 *  once. */
uint64_t sharc__resume_hash(const sharc_reader_settings *s, const sharc__dataset *ds);

/**
 * Write a draft state into *buf, growing it (capacity *cap) with ctx's allocator: `st`'s
 * hash, step, position and counters (its keys and sampler are not read), the keys of
 * `held` in the set's order, the sampler's blob, and no checksum. sharc__resume_finish()
 * makes it a state.
 * @return 0, SHARC_ERR(ENOMEM)
 */
int sharc__resume_write(sharc__ctx *ctx, uint8_t **buf, size_t *cap, size_t *len,
                        const sharc__resume *st, const sharc__keyset *held,
                        const sharc__sampler *sampler);

/**
 * Check and decode a blob for a reader whose shards and settings hash to `state_hash`, of
 * `n_shards` shards read for `epochs` epochs (0: without end).
 * @return 0, or SHARC_ERR_STATE with a message "cannot resume: ..." in ctx
 */
int sharc__resume_parse(sharc__ctx *ctx, const uint8_t *blob, size_t len, uint64_t state_hash,
                        size_t n_shards, uint64_t epochs, sharc__resume *out);

uint64_t sharc__resume_key(const sharc__resume *s, size_t i);

/** Finish a draft (or rewrite a state) of `len` bytes: set its next step, sort its keys,
 *  seal the sampler's blob and write the CRC. */
void sharc__resume_finish(uint8_t *blob, size_t len, uint64_t step);

#endif /* SHARC_SRC_RESUME_H */

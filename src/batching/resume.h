/*
 * The reader's resume state blob. Little-endian u64 fields: magic and version, a hash of
 * the shards and settings, the next step, the walk position, the counters (the filtered
 * cuts by reason last among them), the sorted
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

/** The filtered cuts by reason of a draft state into *out (left as it is when the draft is
 *  too short). */
void sharc__resume_draft_filtered(const uint8_t *draft, size_t len, sharc__filter_counts *out);

/** The counters of a state the caller passed to resume, with `batches` its step, and its
 *  filtered cuts by reason (zero in a state of version 2), when its checksum, version and
 *  hash `state_hash` are right; else `out` and `filtered` (each may be NULL) are left as
 *  they are. */
void sharc__resume_saved_stats(const uint8_t *blob, size_t len, uint64_t state_hash,
                               sharc_reader_stats *out, sharc__filter_counts *filtered);

/** What a state blob says; pointers point into the blob. */
typedef struct sharc__resume {
    uint64_t state_hash; ///< sharc__resume_hash() of the reader's shards and settings
    uint64_t next_step;
    sharc__walk_pos pos;
    sharc_reader_stats stats;
    sharc__filter_counts filtered; ///< stats.filtered_cuts by reason (zero in version 2)
    size_t n_keys;
    const uint8_t *keys; ///< n_keys little-endian u64, read with sharc__resume_key()
    const uint8_t *sampler;
    size_t sampler_len;
    /** A mixture's section (its draw and every source's position, mix.h), or NULL: only a
     *  mixture's states have one, so a single dataset's keep their bytes. */
    const uint8_t *mix;
    size_t mix_len;
    /** The noise stream's position (sharc__noise_source.state_write), or NULL: only the
     *  states of readers that mix noise have one. */
    const uint8_t *noise;
    size_t noise_len;
    /** An elastic run's prologue (walk.h) with pos.in_prologue and pos.unit_pos, or none
     *  (has_prologue 0): only such runs' states have the section, so the others keep their
     *  bytes. Writing: `units` are the walk's; parsing: read them with sharc__resume_unit. */
    int has_prologue;
    uint64_t start_epoch;
    size_t n_units;
    const sharc__walk_unit *units;
    const uint8_t *unit_bytes;
} sharc__resume;

/** Unit i of a parsed state's prologue. */
sharc__walk_unit sharc__resume_unit(const sharc__resume *s, size_t i);

/** Hash of what a state depends on: shard names (not their directory), the walk and the
 *  decode settings. The sampler hashes its own settings. O(shards): the reader computes it
 *  once. */
uint64_t sharc__resume_hash(const sharc_reader_settings *s, const sharc__dataset *ds);

/**
 * Write a draft state into *buf (with st->mix, a mixture's section after the keys), growing it
 * (capacity *cap) with ctx's allocator: `st`'s hash, step, position and counters (its keys and
 * sampler are not read), the keys of `held` in the set's order, the sampler's blob, and no
 * checksum. sharc__resume_finish() makes it a state.
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

/** Whether `blob` is a state of this version, intact, without a noise position (saved
 *  without noise, or by a sharc that held a fixed bank of noise instead of streaming it). */
int sharc__resume_lacks_noise(const uint8_t *blob, size_t len);

/**
 * A bundle: the states of the D data-parallel slots of a run in one blob (slot i's at i),
 * which a reader on any number of slots resumes from (sharc_reader_pack_states).
 * @return the number of states, 0 when `blob` is not a bundle, -1 when it is one but
 *         malformed; with n > 0, states[i] and sizes[i] (up to `cap`) point into it
 */
long sharc__resume_bundle_parse(const uint8_t *blob, size_t len, const uint8_t **states,
                                size_t *sizes, size_t cap);

/** State `i` of a bundle that sharc__resume_bundle_parse() accepted. */
void sharc__resume_bundle_get(const uint8_t *blob, size_t i, const uint8_t **state, size_t *size);

/** Write a bundle of `n` states into buf (cap bytes); *size receives the bytes needed.
 *  @return 0, or SHARC_ERR(ENOSPC) when cap is too small */
int sharc__resume_bundle_write(const void *const *states, const size_t *sizes, size_t n, void *buf,
                               size_t cap, size_t *size);

/** Finish a draft (or rewrite a state) of `len` bytes: set its next step, sort its keys,
 *  seal the sampler's blob and write the CRC. */
void sharc__resume_finish(uint8_t *blob, size_t len, uint64_t step);

#endif /* SHARC_SRC_RESUME_H */

/*
 * Elastic resume: the work that D old data-parallel slots left, split over D' new ones.
 *
 * A function of saved states only, so that every new slot computes the same split: from
 * each old slot's walk position (and its own plan: dataset, seed, shuffle, its slot and
 * slot count) the units of work it had left up to the end of the latest epoch any old slot
 * had begun; then new slot s of D' takes units i with (i + offset) % D' == s, or, with fewer
 * units than new slots, shares a unit by entries with the other new slots that take it
 * (offset: where a mixture's previous sources left the round). The
 * cuts the old samplers held (their keys) go by shard visit, all of a visit's to one new
 * slot, so that only that slot re-reads the shard, the visits balanced over the new slots
 * by their counts (sharc__elastic_keys). Later epochs are planned for D' as a fresh run
 * plans them.
 *
 * A unit is the part of one shard visit (epoch, shard) left to read: the entries k of the
 * shard's stream (cuts and cut-level problems alike, as the walk counts them) with k >= skip
 * and k % every == first. Sharing a unit by g slots is again such a filter (every * g,
 * first + every * i), so units compose over any number of resumes.
 */
#ifndef SHARC_SRC_ELASTIC_H
#define SHARC_SRC_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "plan/dataset.h"
#include "walk/walk.h"

/** A unit: the part of one shard visit left to read (walk.h). */
typedef sharc__walk_unit sharc__elastic_unit;

/** Where one old slot was, as its state says. */
typedef struct sharc__elastic_old {
    sharc__walk_pos pos;  ///< its walk's position (pos.in_prologue: in its prologue)
    int dp_rank, dp_size; ///< the slot its regular epochs were planned for
    /** Its own prologue, when it was itself resumed elastically (else none). */
    const sharc__elastic_unit *units;
    size_t n_units;
    uint64_t start_epoch; ///< the first epoch of its regular plan (after its prologue)
} sharc__elastic_old;

/** The plan of the walk: its shard order and the epochs. */
typedef struct sharc__elastic_plan {
    const sharc__dataset *ds;
    uint64_t seed;
    int shuffle;
    uint64_t epochs; ///< 0: without end
    /** The new slot that takes unit 0: 0 for one dataset; for a mixture's source, the units
     *  dealt for the sources before it (mod the slots), so that the mixture's units stay
     *  balanced over the slots instead of each source giving its extra units to the first. */
    uint64_t offset;
} sharc__elastic_plan;

/**
 * New slot `rank` of `size`: its units of the old slots' remaining work, in the order it
 * reads them, and the epoch its regular plan starts at.
 * @param units receives an array (free with sharc__free(ctx, ...); NULL when none)
 * @param n_all receives the number of units of all new slots (may be NULL)
 * @return 0, SHARC_ERR(ENOMEM), or SHARC_ERR_STATE when a unit would be shared by more
 *         slots than a filter can say (resumed elastically too many times), or when the old
 *         slots leave more than 2^24 shard visits (their epochs too far apart: forged)
 */
int sharc__elastic_split(sharc__ctx *ctx, const sharc__elastic_plan *plan,
                         const sharc__elastic_old *old, size_t n_old, int rank, int size,
                         sharc__elastic_unit **units, size_t *n_units, uint64_t *start_epoch,
                         size_t *n_all);

/**
 * The held keys (each old slot's sorted keys, keys[i] of n_keys[i]) that new slot `rank`
 * of `size` takes: every key of a shard visit goes to the same slot (which alone re-reads
 * that shard), and the visits are balanced by their number of keys: the largest first, each
 * to the slot that has taken the fewest keys so far (the lowest slot among equals), so the
 * slots' counts differ by at most the largest visit's. Written sorted into `out`, which has
 * room for all keys; *n_out receives the number written.
 * @return 0, SHARC_ERR(ENOMEM)
 */
int sharc__elastic_keys(sharc__ctx *ctx, const uint64_t *const *keys, const size_t *n_keys,
                        size_t n_old, int rank, int size, uint64_t *out, size_t *n_out);

#endif /* SHARC_SRC_ELASTIC_H */

/*
 * Even steps: the sources of all data-parallel slots agree at every step whether every slot
 * has a batch, so that every slot ends at the same step and a DDP job's gradient all-reduce
 * never waits for a slot that has already ended.
 *
 * One round per step, over a transport spanning the sources (its rank is the slot): an
 * all-reduce (max) of one word in which a failure outranks the end, and the end outranks a
 * batch, whose value is its epoch. When a slot failed, the highest failed slot then
 * broadcasts its message, so that every source can name it. Deterministic: the agreement
 * is a function of what each slot had, whatever the timing.
 */
#ifndef SHARC_SRC_DPSYNC_H
#define SHARC_SRC_DPSYNC_H

#include <stdint.h>

#include "bcast/transport.h"

/** The most slots a round can name (a failed slot is 16 bits of the word). */
#define SHARC__DP_MAX_SLOTS 65535

/** The message of a failed slot, at most this many bytes with its NUL. */
#define SHARC__DP_MESSAGE_BYTES 1024

typedef enum sharc__dp_kind {
    SHARC__DP_BATCH = 0, ///< a batch of an epoch
    SHARC__DP_END = 1,   ///< the stream ended (the reader ran dry, or max_steps)
    SHARC__DP_FAIL = 2,  ///< a failure
} sharc__dp_kind;

typedef struct sharc__dp_agreement {
    sharc__dp_kind kind; ///< what every slot does: FAIL if one failed, else END if one ended
    uint64_t epoch;      ///< BATCH: the highest epoch of the slots' batches
    int failed_slot;     ///< FAIL: the highest slot that failed
    char message[SHARC__DP_MESSAGE_BYTES]; ///< FAIL: that slot's message
} sharc__dp_agreement;

/**
 * One round, joined by every source at every step. `t` spans the sources (rank = slot).
 * @param mine  what this slot has; `epoch` its batch's epoch, `why` its failure's text
 * @param out   the agreement, the same on every slot
 * @return 0, or a transport error (text in t's context)
 */
int sharc__dp_agree(sharc_transport *t, sharc__dp_kind mine, uint64_t epoch, const char *why,
                    sharc__dp_agreement *out);

#endif /* SHARC_SRC_DPSYNC_H */

#include "bcast/dpsync.h"

#include <stdio.h>
#include <string.h>

/* Words of the round: a batch's epoch below END, END, then FAIL plus the slot. */
#define WORD_END  0xfffe0000u
#define WORD_FAIL 0xffff0000u

static uint32_t encode(sharc__dp_kind kind, uint64_t epoch, int slot)
{
    switch (kind) {
    case SHARC__DP_FAIL:
        return WORD_FAIL + (uint32_t)slot;
    case SHARC__DP_END:
        return WORD_END;
    default:
        return epoch < WORD_END ? (uint32_t)epoch : WORD_END - 1;
    }
}

int sharc__dp_agree(sharc_transport *t, sharc__dp_kind mine, uint64_t epoch, const char *why,
                    sharc__dp_agreement *out)
{
    memset(out, 0, sizeof *out);
    uint32_t word = encode(mine, epoch, t->rank);
    if (t->size > 1) {
        int rc = sharc__transport_allreduce_max(t, &word);
        if (rc < 0)
            return rc;
    }
    if (word < WORD_END) {
        out->kind = SHARC__DP_BATCH;
        out->epoch = word;
        return 0;
    }
    if (word < WORD_FAIL) {
        out->kind = SHARC__DP_END;
        return 0;
    }
    out->kind = SHARC__DP_FAIL;
    out->failed_slot = (int)(word - WORD_FAIL);
    if (out->failed_slot == t->rank)
        snprintf(out->message, sizeof out->message, "%s", why ? why : "");
    if (t->size == 1)
        return 0;
    int rc = sharc__transport_bcast(t, out->message, sizeof out->message, out->failed_slot,
                                    SHARC_DEVICE_HOST);
    out->message[sizeof out->message - 1] = 0;
    return rc;
}

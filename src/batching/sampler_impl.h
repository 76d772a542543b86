/*
 * The sampler's handle, shared by the sampling (sampler.c), its settings and bins
 * (sampler_settings.c) and the codec of its state (sampler_state.c), which reads and
 * rebuilds it. Nothing else includes this header, and sampler.c calls nothing of
 * sampler_state.c.
 */
#ifndef SHARC_SRC_SAMPLER_IMPL_H
#define SHARC_SRC_SAMPLER_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/ctx.h"
#include "base/rng.h"
#include "batching/sampler.h"

#define NONE UINT32_MAX

enum { F_HAS_BIDX = 1, F_BINS_READY = 2, F_EXHAUSTED = 4, F_STOPPED = 8, F_PENDING = 16 };

typedef struct bucket {
    uint32_t head, tail, count;
    double longest; /* max effective duration of the items held */
} bucket;

struct sharc__sampler {
    sharc__ctx *ctx;
    sharc__sampler_settings st; /* st.bins / st.bucket_batch_size point at own copies */
    sharc__sampler_source src;
    int estimating; /* bins come from the stream */
    uint64_t settings_hash;

    /* Item slots: the buckets are doubly linked lists threaded through next/prev. */
    uint32_t cap;
    sharc__sitem *items;
    double *eff;
    uint32_t *next, *prev;
    uint32_t *free_slots;
    uint32_t n_free;
    uint32_t *scratch;   /* the chosen bucket's slots while a batch is built */
    sharc__sitem *batch; /* the batch returned to the caller */

    bucket *buckets;
    size_t max_buckets, nb;
    double *bins;
    size_t n_bins;
    uint32_t *bbs;
    double *bin_tokens; /* 2D bins' token limits (own copy), or NULL */
    double *max_tps;    /* own copy of st.max_tps */
    int bins_ready;

    size_t count;   /* items in the buckets */
    uint64_t bytes; /* their bytes */
    sharc__sitem pending;
    int has_pending, exhausted, stopped;
    int deferred_rc; /* a pull error met while refilling after a batch */

    sharc__rng rng, brng;
    uint32_t bidx;
    uint64_t usage;
    int has_bidx;
    sharc__sampler_stats stats;
};

/** The bits of `d`, for hashing and storing doubles exactly. */
static inline uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/** What the buckets and the batch rule measure of an item of `d` seconds: its seconds, or
 *  its audio tokens with a token_equivalent_duration. */
static inline double sharc__sampler_length(const sharc__sampler *s, double d)
{
    const double t = s->st.token_equivalent_duration;
    return t > 0 ? ceil(d / t) : d;
}

/** 1 when `x` is not a finite number >= 0. */
int sharc__sampler_bad_nonneg(double x);

/** Everything that changes the batch sequence, hashed: what a state is checked by. */
uint64_t sharc__sampler_hash_settings(const sharc__sampler *s);

/** Whether the duration limits filter out an item of `duration`: SHARC__RELEASE_TOO_SHORT,
 *  SHARC__RELEASE_TOO_LONG, or -1 when it passes. */
int sharc__sampler_filter_of(const sharc__sampler_settings *st, double duration);

/** Whether the token limits filter out `it` (NeMo's TokenCountFilter and, with one cap,
 *  TokenPerSecondFilter, whose bounds are inclusive): the reason, or -1 when it passes. */
int sharc__sampler_token_filter_of(const sharc__sampler_settings *st, const sharc__sitem *it);

/** Put `it` into bucket `b` (a free slot must exist). */
void sharc__sampler_admit(sharc__sampler *s, const sharc__sitem *it, size_t b);

/** The bucket `it` goes to (0 before the bins are known; n_bins when it fits no 2D bin). */
size_t sharc__sampler_bucket_of(const sharc__sampler *s, const sharc__sitem *it);

/** Hand `it` back to the source (its release callback) for `why`. */
void sharc__sampler_give_back(sharc__sampler *s, sharc__sitem *it, sharc__release_reason why);

/** Name `it` into name[cap] for a message, then hand it back as REJECTED; returns name. */
const char *sharc__sampler_reject(sharc__sampler *s, sharc__sitem *it, char *name, size_t cap);

/** What names `it` in a message: the source's description, else its key. */
const char *sharc__sampler_item_name(const sharc__sampler *s, const sharc__sitem *it, char *out,
                                     size_t cap);

#endif /* SHARC_SRC_SAMPLER_IMPL_H */

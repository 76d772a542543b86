/*
 * The mixture's handle, shared by mix.c (the draw and the cut source) and mix_state.c (its
 * section of a resume state).
 */
#ifndef SHARC_SRC_MIX_IMPL_H
#define SHARC_SRC_MIX_IMPL_H

#include "base/rng.h"
#include "walk/mix.h"

typedef struct mix_src {
    sharc__walk *walk;
    sharc_reader_settings s; ///< the reader's, with this source's seed and epoch limit
    uint32_t offset;         ///< of its shards among the mixture's
    double weight;
    const char *name;
    const char *language;
    uint64_t hash;
    int live;           ///< still in the draw
    uint64_t last_used; ///< the draw that last pulled from it
} mix_src;

struct sharc__mix {
    sharc__ctx *ctx;
    sharc_reader_stats *stats;
    size_t n;
    mix_src *src;
    size_t n_shards;
    double live_weight; ///< the sum of the weights still in the draw
    sharc__rng rng;
    uint64_t seed; ///< the reader's, which the draw's generator starts from
    uint64_t draws;
    size_t last; ///< the source of the last cut pulled
    size_t max_open, n_open;
    size_t n_tag_columns;
    const char *const *tag_columns;
    const char *const *tag_values;
};

/** The weights still in the draw, summed in one order, so that a restored mixture draws
 *  exactly as the saved one did. */
void sharc__mix_live_sum(sharc__mix *m);

/* The cut source's state operations (cutsource.h). */
size_t sharc__mix_state_size(const void *self);
void sharc__mix_state_write(const void *self, uint8_t *out);
int sharc__mix_state_restore(void *self, const uint8_t *in, size_t len);

#endif /* SHARC_SRC_MIX_IMPL_H */

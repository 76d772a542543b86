/*
 * A source of raw cuts for the pipeline and the reader: one dataset's walk (walk.h) or a
 * mixture of several (mix.h), behind one table of operations, so that batching and the
 * reader need not know which. The operations mean what walk.h says of the walk's own.
 *
 * A cut's shard index is an index into the source's shards (n_shards): for a mixture, the
 * shards of every dataset one after another.
 */
#ifndef SHARC_SRC_CUTSOURCE_H
#define SHARC_SRC_CUTSOURCE_H

#include <pthread.h>
#include <stdint.h>

#include "formats/stream.h"
#include "io/bufpool.h"
#include "plan/cut.h"

typedef struct sharc__cutsource_ops {
    int (*pull)(void *self);
    sharc__rawcut *(*cut)(void *self);
    int (*problem)(void *self, int rc);
    sharc__stream_error *(*error)(void *self);
    void (*uncount_cut)(void *self);
    int (*peek)(void *self, int (*visit)(void *cookie, double duration), void *cookie);
    int (*scan_shard)(void *self, uint64_t epoch, uint32_t shard,
                      int (*cb)(void *cookie, sharc__rawcut *c), void *cookie);
    void (*lend_audio)(void *self);
    void (*batch_mode)(void *self, sharc__bufpool *pool, pthread_mutex_t *report_lock);
    int (*readahead_start)(void *self, int n_lanes, uint64_t lane_bytes);
    void (*readahead_stop)(void *self);
    double (*read_seconds)(const void *self);
    /* A resume state's section of a source that is not one walk (whose position the state
     * holds itself): its size, writing it, and restoring it. NULL for a walk. */
    size_t (*state_size)(const void *self);
    void (*state_write)(const void *self, uint8_t *out);
    int (*state_restore)(void *self, const uint8_t *in, size_t len);
    /* A mixture's sources, the one a shard index belongs to, and a source's name, which
     * its problems begin with ("input_cfg[1]"). NULL for a walk; safe on any thread. */
    size_t (*n_sources)(const void *self);
    size_t (*source_of)(const void *self, uint32_t shard);
    const char *(*source_name)(const void *self, size_t source);
    /* A mixture's tag columns (besides language), and the values of a shard's cuts for them
     * (NULL entries where its source has none); owned by the source. NULL for a walk. */
    size_t (*tag_columns)(const void *self, const char *const **names);
    const char *const *(*cut_tags)(const void *self, uint32_t shard);
} sharc__cutsource_ops;

typedef struct sharc__cutsource {
    const sharc__cutsource_ops *ops;
    void *self;
    /** A single dataset's walk (whose position a resume state holds), else NULL. */
    struct sharc__walk *walk;
    size_t n_shards;
    /** The path of a shard, for the pipeline's choice of read-ahead lanes. */
    const char *first_shard;
    /** A mixture (mix.h), whose sources an elastic resume splits one by one, else NULL. */
    struct sharc__mix *mix;
} sharc__cutsource;

static inline int sharc__cs_pull(const sharc__cutsource *cs)
{
    return cs->ops->pull(cs->self);
}
static inline sharc__rawcut *sharc__cs_cut(const sharc__cutsource *cs)
{
    return cs->ops->cut(cs->self);
}
static inline int sharc__cs_problem(const sharc__cutsource *cs, int rc)
{
    return cs->ops->problem(cs->self, rc);
}
static inline sharc__stream_error *sharc__cs_error(const sharc__cutsource *cs)
{
    return cs->ops->error(cs->self);
}
static inline void sharc__cs_uncount_cut(const sharc__cutsource *cs)
{
    cs->ops->uncount_cut(cs->self);
}
static inline int sharc__cs_peek(const sharc__cutsource *cs,
                                 int (*visit)(void *cookie, double duration), void *cookie)
{
    return cs->ops->peek(cs->self, visit, cookie);
}
static inline int sharc__cs_scan_shard(const sharc__cutsource *cs, uint64_t epoch, uint32_t shard,
                                       int (*cb)(void *cookie, sharc__rawcut *c), void *cookie)
{
    return cs->ops->scan_shard(cs->self, epoch, shard, cb, cookie);
}
static inline void sharc__cs_lend_audio(const sharc__cutsource *cs)
{
    cs->ops->lend_audio(cs->self);
}
static inline void sharc__cs_batch_mode(const sharc__cutsource *cs, sharc__bufpool *pool,
                                        pthread_mutex_t *report_lock)
{
    cs->ops->batch_mode(cs->self, pool, report_lock);
}
static inline int sharc__cs_readahead_start(const sharc__cutsource *cs, int n_lanes,
                                            uint64_t lane_bytes)
{
    return cs->ops->readahead_start(cs->self, n_lanes, lane_bytes);
}
static inline void sharc__cs_readahead_stop(const sharc__cutsource *cs)
{
    cs->ops->readahead_stop(cs->self);
}
static inline double sharc__cs_read_seconds(const sharc__cutsource *cs)
{
    return cs->ops->read_seconds(cs->self);
}

#endif /* SHARC_SRC_CUTSOURCE_H */

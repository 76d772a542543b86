/*
 * Shard read-ahead for the batch pipeline. Lane threads open the shards the walk will
 * come to next and read their entries (raw cuts, or the problems a stream reports) into
 * bounded queues; the walk then takes a shard's entries from its lane, in the stream's
 * own order, exactly as it would have read them itself. Reading (libarchive, gunzip,
 * pairing, JSON) thus runs on several threads while the order of everything the walk
 * sees, and so every batch, stays what one thread would produce.
 *
 * Threads: the walk (one thread) calls everything here; lanes only run their own loop.
 */
#ifndef SHARC_SRC_READAHEAD_H
#define SHARC_SRC_READAHEAD_H

#include <stdint.h>

#include "formats/stream.h"
#include "plan/tokenizer.h"

typedef struct sharc__readahead sharc__readahead;
typedef struct sharc__lane sharc__lane;

/**
 * Start `n_lanes` lane threads reading shards of `ds` with `ops`. Each lane queues at
 * most `lane_bytes` of entries (metadata and encoded audio) ahead of the walk, and at
 * least one entry. `ctx` gives the allocator and logger (both must be thread-safe). With
 * `tok`, a lane also tokenizes each cut's transcript (in language `language` when not NULL,
 * else the cut's own), off the walk's thread; a cut it cannot tokenize is left without
 * tokens (sharc__rawcut.has_tokens 0), for the walk to report.
 * @return 0, SHARC_ERR(ENOMEM) or SHARC_ERR(EAGAIN) (no thread)
 */
int sharc__readahead_create(sharc__readahead **out, sharc__ctx *ctx, const sharc__stream_ops *ops,
                            const sharc__dataset *ds, const sharc__stream_opts *opts, int n_lanes,
                            uint64_t lane_bytes, const sharc__tokenizer *tok, const char *language);

/** Stop every lane and free everything, including lanes taken and not released. */
void sharc__readahead_destroy(sharc__readahead **ra);

/** Whether a lane is free to read ahead. */
int sharc__readahead_has_free_lane(const sharc__readahead *ra);

/**
 * Have a free lane read shard `shard`; `tag` names the position in the walk's plan
 * (requests are taken in the order they were made). Call only when a lane is free.
 */
void sharc__readahead_request(sharc__readahead *ra, uint32_t shard, uint64_t tag);

/**
 * The lane of the oldest request when it is for `tag`, else NULL after cancelling every
 * request (the plan changed: the caller requests again). A taken lane's entries come
 * from sharc__readahead_next; the first is the stream's open.
 */
sharc__lane *sharc__readahead_take(sharc__readahead *ra, uint64_t tag);

/**
 * The next entry of a taken lane, waiting for it: the result of the stream's open (0 or
 * its error) first, then of each `next`: 0 with a cut in `c`, SHARC_END, or an error
 * with ctx->error and `err` set as the stream set them. `c` and `err` trade buffers
 * with the queue (no copy). A lane stops reading after SHARC_END, a failed open and an
 * error that ends the shard (err->shard_fatal).
 * @param read_s, io_s add the time the lane spent producing the entry (all of it, and
 *                     the part spent in read()), for the stage statistics
 */
int sharc__readahead_next(sharc__lane *l, sharc__ctx *ctx, sharc__rawcut *c,
                          sharc__stream_error *err, double *read_s, double *io_s);

/** Give a taken lane back: it stops reading its shard and becomes free. */
void sharc__readahead_release(sharc__readahead *ra, sharc__lane *l);

/** Cancel every request not taken yet (the walk moves elsewhere). */
void sharc__readahead_cancel(sharc__readahead *ra);

#endif /* SHARC_SRC_READAHEAD_H */

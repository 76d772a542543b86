/*
 * A shard stream turns one shard of a layout into a sequence of raw cuts (metadata plus
 * encoded audio), reading every file of the shard forward once. Each layout (shar.c,
 * nemo.c, wds.c) implements this interface.
 */
#ifndef SHARC_SRC_STREAM_H
#define SHARC_SRC_STREAM_H

#include "plan/cut.h"
#include "plan/dataset.h"

typedef struct sharc__stream_opts {
    uint64_t max_member_bytes;
    uint64_t max_line_bytes;
    const char *nemo_text_field;
    const char *nemo_lang_field;
    struct sharc__bufpool *pool; ///< audio member buffers (batch mode), or NULL
    int lazy_audio; ///< leave audio members of uncompressed tar files there (batch mode)
    /** Cut mode: each cut is used up before the next call, so a member that several cuts
     * share (NeMo rows cutting one recording) is lent to each (sharc__rawcut.audio_lent)
     * instead of copied into each. */
    int lend_audio;
} sharc__stream_opts;

/** Where the last failure of a stream happened, for problem reports. */
typedef struct sharc__stream_error {
    sharc_problem kind;
    int shard_fatal;   ///< the rest of the shard cannot be read (else only this cut is bad)
    const char *path;  ///< file concerned (owned by the dataset)
    sharc__buf member; ///< member or "line N" concerned
    sharc__buf cut_id; ///< cut id when known
} sharc__stream_error;

typedef struct sharc__stream sharc__stream;

typedef struct sharc__stream_ops {
    int (*open)(sharc__stream **out, sharc__ctx *ctx, const sharc__shard *shard,
                const sharc__stream_opts *opts, sharc__stream_error *err);
    /** 0 with a cut, SHARC_END, or an error described by ctx->error and err. */
    int (*next)(sharc__stream *s, sharc__rawcut *c, sharc__stream_error *err);
    void (*close)(sharc__stream **s);
} sharc__stream_ops;

extern const sharc__stream_ops sharc__shar_ops;
extern const sharc__stream_ops sharc__nemo_ops;
extern const sharc__stream_ops sharc__wds_ops;

struct sharc__tar;

/** Open a shard's audio tar as every stream does: with the member cap of `o`, and in batch
 *  mode reading members into buffers from `o->pool`, or, with `o->lazy_audio`, leaving the
 *  audio members (those `is_audio` accepts; all when NULL) in the file.
 *  @return as sharc__tar_open() */
int sharc__stream_open_audio_tar(struct sharc__tar **t, sharc__ctx *ctx, const char *path,
                                 const sharc__stream_opts *o, int (*is_audio)(const char *name));

/** Forget the last failure (kind SHARC_PROBLEM_COUNT: none), keeping the buffers. */
void sharc__stream_error_reset(sharc__stream_error *err);

/** Record where a failure happened; returns `code`. */
int sharc__stream_fail(sharc__ctx *ctx, sharc__stream_error *err, int code, sharc_problem kind,
                       int shard_fatal, const char *path, const char *member, const char *cut_id);

/** Map an archive/lines error code to a problem kind. */
sharc_problem sharc__problem_of(int code);

#endif /* SHARC_SRC_STREAM_H */

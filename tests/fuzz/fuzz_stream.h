/*
 * For fuzz targets that read a shard through a stream (Shar, WebDataset pairing): one pass
 * until the stream ends or cannot go on in this shard, every cut checked by the caller.
 */
#ifndef SHARC_TESTS_FUZZ_STREAM_H
#define SHARC_TESTS_FUZZ_STREAM_H

#include <string.h>

#include "plan/dataset.h"
#include "formats/stream.h"

/* Read `shard` through `ops` (at most 10000 steps, whatever the bytes: a stream that never
 * ends is a bug the step cap would hide, so each step must make progress), handing each
 * cut to `check`, which traps on what must not be. */
static void fuzz_read_stream(const sharc__stream_ops *ops, const sharc__shard *shard,
                             void (*check)(const sharc__rawcut *c, const sharc__shard *shard))
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    sharc__stream_opts opts = {1 << 20, 1 << 16, "text", "lang", NULL, 0, 0};
    sharc__stream_error err;
    memset(&err, 0, sizeof err);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    sharc__stream *st = NULL;
    if (ops->open(&st, &ctx, shard, &opts, &err) == 0) {
        for (int i = 0; i < 10000; i++) {
            int rc = ops->next(st, &c, &err);
            if (rc == SHARC_END || (rc < 0 && err.shard_fatal))
                break;
            if (rc == 0)
                check(&c, shard);
        }
        ops->close(&st);
    }
    sharc__rawcut_free(&ctx, &c);
    sharc__buf_free(&ctx, &err.member);
    sharc__buf_free(&ctx, &err.cut_id);
}

#endif /* SHARC_TESTS_FUZZ_STREAM_H */

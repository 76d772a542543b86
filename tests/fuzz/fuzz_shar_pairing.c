/*
 * Fuzz Shar pairing: the input is split at the first 0xFF byte into a cuts JSON-lines
 * file and a recording tar, written to a temporary directory, and read through the Shar
 * stream until it ends or fails. Whatever the bytes, the stream must end or report an
 * error, never crash or read out of bounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "fuzz_files.h"
#include "stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char cuts[128], rec[128];
    size_t n_cuts;
    if (fuzz_split_files(data, size, "cuts.000000.jsonl", "recording.000000.tar", cuts, rec,
                         &n_cuts) != 0)
        return 0;
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    sharc__shard shard;
    memset(&shard, 0, sizeof shard);
    shard.meta_path = cuts;
    shard.audio_path = rec;
    sharc__stream_opts opts = {1 << 20, 1 << 16, "text", "lang", NULL, 0, 0};
    sharc__stream_error err;
    memset(&err, 0, sizeof err);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    sharc__stream *st = NULL;
    if (sharc__shar_ops.open(&st, &ctx, &shard, &opts, &err) == 0) {
        for (int i = 0; i < 10000; i++) {
            int rc = sharc__shar_ops.next(st, &c, &err);
            if (rc == SHARC_END || (rc < 0 && err.shard_fatal))
                break;
            if (rc == 0 && strcmp(c.shard, rec) != 0)
                __builtin_trap();
        }
        sharc__shar_ops.close(&st);
    }
    sharc__rawcut_free(&ctx, &c);
    sharc__buf_free(&ctx, &err.member);
    sharc__buf_free(&ctx, &err.cut_id);
    return 0;
}

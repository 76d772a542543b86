/*
 * Fuzz WebDataset pairing: the input after its first 0xFF byte is a tar, written to a
 * temporary directory and read through the WebDataset stream (members grouped into samples
 * by key) until it ends or fails. Whatever the bytes, the stream must end or report an
 * error, never crash, loop or read out of bounds; every cut it gives has an audio member
 * named by its key.
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
    char unused[128], tar[128];
    size_t n_unused;
    if (fuzz_split_files(data, size, "unused.txt", "shard-000000.tar", unused, tar, &n_unused) != 0)
        return 0;
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    sharc__shard shard;
    memset(&shard, 0, sizeof shard);
    shard.audio_path = tar;
    sharc__stream_opts opts = {1 << 20, 1 << 16, "text", "lang", NULL, 0, 0};
    sharc__stream_error err;
    memset(&err, 0, sizeof err);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    sharc__stream *st = NULL;
    if (sharc__wds_ops.open(&st, &ctx, &shard, &opts, &err) == 0) {
        for (int i = 0; i < 10000; i++) {
            int rc = sharc__wds_ops.next(st, &c, &err);
            if (rc == SHARC_END || (rc < 0 && err.shard_fatal))
                break;
            /* A cut's audio member is named by its key: key + "." + extension. */
            if (rc == 0 &&
                (c.member.len <= c.id.len || memcmp(c.member.data, c.id.data, c.id.len) != 0 ||
                 c.member.data[c.id.len] != '.'))
                __builtin_trap();
        }
        sharc__wds_ops.close(&st);
    }
    sharc__rawcut_free(&ctx, &c);
    sharc__buf_free(&ctx, &err.member);
    sharc__buf_free(&ctx, &err.cut_id);
    return 0;
}

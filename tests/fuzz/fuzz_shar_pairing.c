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
#include "stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(d, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/sharc-fuzz-shar-XXXXXX");
        if (!mkdtemp(dir))
            return 0;
    }
    const uint8_t *split = memchr(data, 0xFF, size);
    size_t n_cuts = split ? (size_t)(split - data) : size;
    size_t n_tar = split ? size - n_cuts - 1 : 0;
    char cuts[128], rec[128];
    snprintf(cuts, sizeof cuts, "%s/cuts.000000.jsonl", dir);
    snprintf(rec, sizeof rec, "%s/recording.000000.tar", dir);
    if (write_file(cuts, data, n_cuts) || write_file(rec, split ? split + 1 : data, n_tar))
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

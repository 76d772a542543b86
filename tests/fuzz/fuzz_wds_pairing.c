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

#include "fuzz_files.h"
#include "fuzz_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A cut's audio member is named by its key: key + "." + extension. */
static void check_cut(const sharc__rawcut *c, const sharc__shard *shard)
{
    (void)shard;
    if (c->member.len <= c->id.len || memcmp(c->member.data, c->id.data, c->id.len) != 0 ||
        c->member.data[c->id.len] != '.')
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char unused[128], tar[128];
    size_t n_unused;
    if (fuzz_split_files(data, size, "unused.txt", "shard-000000.tar", unused, tar, &n_unused) != 0)
        return 0;
    sharc__shard shard;
    memset(&shard, 0, sizeof shard);
    shard.audio_path = tar;
    fuzz_read_stream(&sharc__wds_ops, &shard, check_cut);
    return 0;
}

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

#include "fuzz_files.h"
#include "fuzz_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A cut comes from the shard's recording tar. */
static void check_cut(const sharc__rawcut *c, const sharc__shard *shard)
{
    if (strcmp(c->shard, shard->audio_path) != 0)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char cuts[128], rec[128];
    size_t n_cuts;
    if (fuzz_split_files(data, size, "cuts.000000.jsonl", "recording.000000.tar", cuts, rec,
                         &n_cuts) != 0)
        return 0;
    sharc__shard shard;
    memset(&shard, 0, sizeof shard);
    shard.meta_path = cuts;
    shard.audio_path = rec;
    fuzz_read_stream(&sharc__shar_ops, &shard, check_cut);
    return 0;
}

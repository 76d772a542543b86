/*
 * The floor of `sharc bench --floor`: the work no shard loader can avoid. It streams the same
 * tar files with libarchive and decodes every audio member from memory with libsndfile into
 * float32, with a given number of threads, and nothing else: no metadata parsing, no pairing,
 * no sampling, no collation. It is deliberately not sharc code, so that it measures what the
 * libraries underneath cost, not what sharc does with them.
 */
#ifndef SHARC_TOOLS_BENCH_FLOOR_H
#define SHARC_TOOLS_BENCH_FLOOR_H

#include <stddef.h>
#include <stdint.h>

/** What one floor run did. */
typedef struct bench_floor_result {
    double wall_seconds;  ///< from the first thread's start to the last thread's end
    double cpu_seconds;   ///< user + system CPU time of the process over the run
    double audio_seconds; ///< decoded frames / sampling rate, summed over members
    uint64_t members;     ///< audio members decoded
    uint64_t bytes;       ///< bytes of archive members read (audio and other members)
    uint64_t shards;      ///< shards opened (a shard read twice counts twice)
} bench_floor_result;

/**
 * Find the tar files under `paths`: a directory gives every `*.tar`, `*.tar.gz`, `*.tgz` and
 * `*.tar.zst` file in it (sorted; `.idx` sidecars are not tars); a file is taken as it is;
 * patterns are expanded by sharc_reader_expand_path(), as the reader expands them. Non-tar files
 * (manifests, cut lists) are skipped, so the same PATH arguments as `sharc read` work.
 * @param out receives a malloc'ed array of malloc'ed paths; free with bench_floor_free_shards()
 * @param err receives a message on failure
 * @return 0, or -1 when a path cannot be read or no tar file is found
 */
int bench_floor_find_shards(const char *const *paths, size_t n_paths, char ***out, size_t *n_out,
                            char *err, size_t err_size);

/** Free what bench_floor_find_shards() returned. NULL-safe. */
void bench_floor_free_shards(char **shards, size_t n);

/**
 * Stream and decode `shards` with `threads` threads; each thread takes the next shard not yet
 * taken. With `min_seconds` > 0 the shards are read again, pass after pass, until that much
 * wall time has gone by (threads finish the member they are decoding, and it counts), so that
 * the floor is measured over a window as long as the loader's; with 0 it makes one pass.
 * @param err receives a message naming the shard and member on failure
 * @return 0, or -1 on an unreadable archive, an undecodable member or an allocation failure
 */
int bench_floor_run(char *const *shards, size_t n_shards, int threads, double min_seconds,
                    bench_floor_result *out, char *err, size_t err_size);

#endif /* SHARC_TOOLS_BENCH_FLOOR_H */

/*
 * What a file's name says it is, for the search of a dataset's shards: Shar field files
 * (`<field>.<NNNNNN>.tar`, `.jsonl`, compressed or not), tar files, NeMo's `audio_N.tar` and
 * `manifest_N.json`, JSON-lines files; and the listing of a directory as the search reads it.
 */
#ifndef SHARC_SRC_SHARDNAMES_H
#define SHARC_SRC_SHARDNAMES_H

#include <stddef.h>

#include "io/braces.h"
#include "base/ctx.h"

/** The part of `path` after its last '/'; of a `pipe:COMMAND`, after its last '/' or space
 *  (the command's last word names its shard). The name functions below take a URL's
 *  SHARC__URL_QUERY_MARK at its end (io/remote.h) for no part of the name. */
const char *sharc__shard_base_name(const char *path);

/** 1 when `s` ends with `suf` (before a SHARC__URL_QUERY_MARK). */
int sharc__shard_has_suffix(const char *s, const char *suf);

/**
 * 1 when `base` names a Shar field file: the field (cut to `fcap`) in `field`, *is_tar for a
 * tar (else JSON lines).
 */
int sharc__shard_shar_name(const char *base, char *field, size_t fcap, int *is_tar);

/** 1 when `base` names a tar file (plain, gzip or zstd by its suffix). */
int sharc__shard_is_tar_name(const char *base);

/** 1 when `base` is NeMo's `audio_<id>.tar` (suffixes as for tars), with the id. */
int sharc__shard_nemo_tar_id(const char *base, long long *id);

/** 1 when `base` names a JSON-lines file (`.json`, `.jsonl`, compressed or not). */
int sharc__shard_json_lines_name(const char *base);

/** 1 when `base` is NeMo's `manifest_<id>.json` (JSON lines), with the id. */
int sharc__shard_nemo_manifest_id(const char *base, long long *id);

/**
 * Append the regular files of `dir` to `out`, sorted; hidden files skipped; subdirectories
 * named in a warning and counted in *ignored, except NeMo's sharded_manifests/ when
 * `recurse_manifests`, whose files are listed too; FIFOs, sockets and devices likewise
 * skipped with a warning. `dir` may be an s3://bucket/prefix/ (sharc__remote_list()).
 * @return 0 or the failure naming `dir`
 */
int sharc__shard_list_dir(sharc__ctx *ctx, const char *dir, sharc__strs *out, int recurse_manifests,
                          size_t *ignored);

#endif /* SHARC_SRC_SHARDNAMES_H */

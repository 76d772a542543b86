/*
 * NeMo tarred datasets as NeMo's reader pairs them: `audio_N.tar` with its
 * `sharded_manifests/manifest_N.json`, or with the rows of shard N of an aggregate
 * `tarred_audio_manifest.json`; shard ids matched within each directory when they repeat.
 */
#ifndef SHARC_SRC_NEMO_PLAN_H
#define SHARC_SRC_NEMO_PLAN_H

#include <stdint.h>

#include "io/braces.h"
#include "base/ctx.h"
#include "plan/shards.h"

/**
 * Add to `d` the NeMo shards among `files` (tars and manifests found by the search),
 * in shard id order. `where` names what was searched, for the messages.
 * @return 0, or the failure (unpaired tars or manifests, bad manifests) naming the file
 */
int sharc__nemo_plan_build(sharc__ctx *ctx, sharc__dataset *d, const sharc__strs *files,
                           uint64_t max_line_bytes, const char *where);

#endif /* SHARC_SRC_NEMO_PLAN_H */

/*
 * The shards of a dataset, as the search found them (dataset.h): per layout, the paths of a
 * shard's audio tar and metadata, Shar's extra fields and NeMo's shard ids and aggregate
 * manifest rows.
 */
#ifndef SHARC_SRC_SHARDS_H
#define SHARC_SRC_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/ctx.h"
#include "sharc/reader.h"

typedef struct sharc__shar_field {
    char *name;
    char *path;
    int is_tar; ///< tar field, else JSON lines
} sharc__shar_field;

typedef struct sharc__shard {
    char *audio_path; ///< recording tar (Shar), audio_N.tar (NeMo), the tar (WebDataset)
    char *meta_path;  ///< cuts jsonl (Shar), manifest (NeMo); NULL for WebDataset
    /* Shar: the extra fields, `recording` excluded. */
    size_t n_fields;
    sharc__shar_field *fields;
    /* NeMo: shard id, and the rows of an aggregate manifest when there is no per-shard one. */
    long long nemo_shard_id;
    sharc__buf nemo_rows; ///< newline-separated JSON rows; empty when meta_path is used
    int nemo_in_memory;
} sharc__shard;

typedef struct sharc__dataset {
    sharc_layout layout;
    size_t n_shards;
    sharc__shard *shards;
    size_t n_ignored; ///< files and subdirectories found but not read, each named in a warning
} sharc__dataset;

/** Append an empty shard (NeMo shard id -1) to `d`. @return 0 or SHARC_ERR(ENOMEM) */
int sharc__dataset_add_shard(sharc__ctx *ctx, sharc__dataset *d, sharc__shard **out);

void sharc__dataset_free(sharc__dataset *d, sharc__ctx *ctx);

#endif /* SHARC_SRC_SHARDS_H */

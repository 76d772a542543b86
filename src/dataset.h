/*
 * The shard plan: find the shards of a dataset (Lhotse Shar, NeMo tarred audio,
 * WebDataset-style tars) from directories, files and brace patterns, and order them per
 * epoch with a seeded permutation split across data-parallel slots.
 */
#ifndef SHARC_SRC_DATASET_H
#define SHARC_SRC_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ctx.h"
#include "sharc/reader.h"

/** A Shar field other than `cuts` (e.g. recording, target_recording, lang_id). */
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

/**
 * Find the shards. Brace patterns ({0..7}, {a,b}, and NeMo's (), [], <>, _OP_/_CL_ forms)
 * are expanded, directories listed. Stray files are ignored with a warning, but every path
 * must contribute shards (one of another layout, or of stray files only, is an error) and
 * no shard may be found twice.
 * @return 0, SHARC_ERR_FORMAT (no shards, unknown or mixed layout, unequal Shar field
 *         counts, NeMo ids without manifest), SHARC_ERR(ENOENT), SHARC_ERR(ENOMEM)
 */
int sharc__dataset_find(sharc__dataset *d, sharc__ctx *ctx, const char *const *paths,
                        size_t n_paths, sharc_layout layout, uint64_t max_line_bytes);

void sharc__dataset_free(sharc__dataset *d, sharc__ctx *ctx);

/**
 * The shards of `epoch` for data-parallel slot `dp_rank` of `dp_size`: indices 0..n-1,
 * permuted with seed + epoch when `shuffle`, then position i goes to slot i % dp_size.
 * @param order receives up to d->n_shards indices
 * @return the number of shards for this slot
 */
size_t sharc__dataset_epoch_order(const sharc__dataset *d, uint64_t seed, uint64_t epoch,
                                  int shuffle, int dp_rank, int dp_size, uint32_t *order);

const char *sharc__layout_name(sharc_layout l);

#endif /* SHARC_SRC_DATASET_H */

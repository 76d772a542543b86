/*
 * The shard plan: find the shards of a dataset (Lhotse Shar, NeMo tarred audio,
 * WebDataset-style tars) from directories, files and brace patterns, and order them per
 * epoch with a seeded permutation split across data-parallel slots.
 */
#ifndef SHARC_SRC_DATASET_H
#define SHARC_SRC_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "plan/shards.h"
#include "sharc/reader.h"

/** A Shar field other than `cuts` (e.g. recording, target_recording, lang_id). */

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

/**
 * The shards of `epoch` for data-parallel slot `dp_rank` of `dp_size`: indices 0..n-1,
 * permuted with seed + epoch when `shuffle`, then position i goes to slot i % dp_size.
 * With fewer shards than slots, slot s reads the one shard at position s % n, which it
 * shares by cuts with the other slots of that position (sharc__dataset_cut_share).
 * @param order receives up to d->n_shards indices
 * @return the number of shards for this slot
 */
size_t sharc__dataset_epoch_order(const sharc__dataset *d, uint64_t seed, uint64_t epoch,
                                  int shuffle, int dp_rank, int dp_size, uint32_t *order);

/**
 * Which entries of each shard slot `dp_rank` keeps: entry k (0-based, cuts and cut-level
 * problems alike) when k % *every == *first. 1 and 0 (all) unless there are fewer shards
 * than slots; then the slots s, s + n, s + 2n, ... that read the same shard (n shards)
 * keep every g-th entry each, g being how many they are, so that every cut goes to exactly
 * one slot.
 */
void sharc__dataset_cut_share(size_t n_shards, int dp_rank, int dp_size, uint32_t *every,
                              uint32_t *first);

const char *sharc__layout_name(sharc_layout l);

#endif /* SHARC_SRC_DATASET_H */

/*
 * The reader: walks the shard plan epoch by epoch, pulls raw cuts from each shard's
 * stream, decodes them, applies the error policy and keeps the counters.
 */
#ifndef SHARC_SRC_READER_H
#define SHARC_SRC_READER_H

#include "batching/sampler.h"
#include "reader/device.h"
#include "sharc/reader.h"

/**
 * Check the struct_size of reader settings `s` and of its sampler settings (sharc/common.h),
 * naming them `name` and `name`.sampler and the function that fills them, `filler`, in the
 * message: 0 or SHARC_ERR(EINVAL), logged.
 */
int sharc__check_reader_struct_sizes(const sharc_reader_settings *s, const char *name,
                                     const char *filler);
int sharc__reader_open(sharc_reader **out, const sharc_reader_settings *s);
int sharc__reader_next(sharc_reader *r, const sharc_cut **cut);
int sharc__reader_next_batch(sharc_reader *r, sharc_batch **batch, int timeout_ms);
int sharc__reader_cut_tokens(sharc_reader *r, const int32_t **ids, size_t *n);
int sharc__reader_state_save(sharc_reader *r, void *buf, size_t cap, size_t *size);
const char *sharc__reader_last_error(const sharc_reader *r);
void sharc__reader_get_stats(const sharc_reader *r, sharc_reader_stats *out);
/** The filtered cuts by reason, as of the counters sharc__reader_get_stats() gives. */
void sharc__reader_filter_counts(const sharc_reader *r, sharc__filter_counts *out);
size_t sharc__reader_num_shards(const sharc_reader *r);
const char *sharc__reader_shard_path(const sharc_reader *r, size_t i);
size_t sharc__reader_num_ignored(const sharc_reader *r);
sharc_layout sharc__reader_layout(const sharc_reader *r);
const double *sharc__reader_bins(const sharc_reader *r, size_t *n);
size_t sharc__reader_num_sources(const sharc_reader *r);
const char *sharc__reader_source_name(const sharc_reader *r, size_t i);
double sharc__reader_source_weight(const sharc_reader *r, size_t i);
size_t sharc__reader_source_tags(const sharc_reader *r, size_t i, const char *const **names,
                                 const char *const **values);
size_t sharc__reader_source_of_shard(const sharc_reader *r, size_t shard);
void sharc__reader_source_stats(const sharc_reader *r, size_t i, uint64_t *cuts, double *seconds);
void sharc__reader_device_stats(const sharc_reader *r, sharc_device_stats *out);
/** The device stage of a reader of device batches once it serves batches, else NULL. */
sharc__device_stage *sharc__reader_device_stage(sharc_reader *r);
/** Tests: have the device stage poison its device tensors, from the first batch on. */
void sharc__reader_device_poison(sharc_reader *r, int on);
/** Tests: the noise stream's sharc__noise_stream_stats(); 0 and UINT64_MAX without noise. */
void sharc__reader_noise_stats(const sharc_reader *r, uint64_t *held_max, uint64_t *last_index);
void sharc__reader_close(sharc_reader **r);

#endif /* SHARC_SRC_READER_H */

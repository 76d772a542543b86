/*
 * The device stage of a batch reader (sharc_reader_settings.device = SHARC_DEVICE_CUDA): it
 * takes each complete host batch of the pipeline, uploads its numeric tensors once to the
 * CUDA device, computes the features there (features/fbank_cuda.h) when features = FBANK,
 * and hands out a batch of device tensors from its own pool (string columns stay on the
 * host). The host batch goes back to the pipeline's pool before the device batch is handed
 * out, so the pipeline never waits on the caller; the device pool holds max_held_batches,
 * which is the reader's back-pressure.
 *
 * The pipeline computes nothing on the CPU for it: it runs with the settings of
 * sharc__device_pipeline_settings (features NONE, audio kept).
 *
 * The audio goes up in row groups through two pinned staging buffers on a copy stream, and
 * each group's features are computed on a compute stream as soon as its upload has
 * finished (an event per staging buffer), so the upload of one group overlaps the features
 * of the one before. Device memory comes from a cache that the batch pool draws on and
 * gives back to, so a steady state makes no cudaMalloc. Every call leaves the caller's
 * current device as it found it.
 */
#ifndef SHARC_SRC_DEVICE_H
#define SHARC_SRC_DEVICE_H

#include <stddef.h>

#include "base/ctx.h"
#include "sharc/reader.h"

typedef struct sharc__device_stage sharc__device_stage;

/** 1 when `s` asks for device batches. */
int sharc__device_wanted(const sharc_reader_settings *s);

/**
 * Check the device fields of `s` at open: the device kind and ordinal, a build with CUDA
 * (and with the GPU features when features = FBANK), the features settings the device
 * supports (no dither, the sampling_rate), and that the device exists.
 * @return 0, SHARC_ERR(EINVAL), SHARC_ERR_UNSUPPORTED (a build without CUDA) or
 *         SHARC_ERR_CUDA (no such device, no usable driver), with ctx's error naming the
 *         device ("device cuda:3: ...")
 */
int sharc__device_check(sharc__ctx *ctx, const sharc_reader_settings *s);

/**
 * The settings the pipeline runs with under a device stage: `s` with features NONE and
 * the audio kept, so that the CPU computes no features, and, with features on and
 * sampling_rate 0, sampling_rate = fbank_sample_rate, so that a cut at another rate is an
 * AUDIO_FORMAT problem of that cut (which the batch's rows no longer say on the device).
 */
void sharc__device_pipeline_settings(const sharc_reader_settings *s, sharc_reader_settings *out);

/** The source of host batches: the pipeline's next batch (0, SHARC_END or an error). */
typedef int (*sharc__host_batch_fn)(void *cookie, sharc_batch **out);

/**
 * Make the stage for reader settings `s` (checked by sharc__device_check): its streams,
 * events, pool and feature plan on the device. Errors go to `ctx`, which the stage keeps
 * for the errors of later calls and which must outlive it.
 * @return 0, SHARC_ERR(ENOMEM) or SHARC_ERR_CUDA
 */
int sharc__device_stage_open(sharc__device_stage **out, sharc__ctx *ctx,
                             const sharc_reader_settings *s);

/**
 * The next device batch: a free device batch is taken first (SHARC_ERR_BACKPRESSURE when
 * the caller holds max_held_batches, nothing taken from `next_host`), then the next host
 * batch, which is uploaded, given its features and released.
 * @return 0, what `next_host` returned other than 0 (SHARC_END, its errors), or an error of
 *         the stage (SHARC_ERR_CUDA naming the step, the call and CUDA's message), which
 *         every later call returns again
 */
int sharc__device_stage_next(sharc__device_stage *d, sharc__host_batch_fn next_host, void *cookie,
                             sharc_batch **out);

/**
 * Free the stage. Device batches still held stay valid; their memory is freed by the last
 * sharc_batch_release(). NULL-safe; sets *d to NULL.
 */
void sharc__device_stage_close(sharc__device_stage **d);

/** The stage's counters; zeros for NULL. */
void sharc__device_stage_stats(const sharc__device_stage *d, sharc_device_stats *out);

/**
 * Tests: fill every device tensor of each later batch with NaN bytes (0xFF) before it is
 * written, so that an element the stage leaves unwritten shows.
 */
void sharc__device_stage_poison(sharc__device_stage *d, int on);

/** sharc_device_copy_bandwidth(), with its errors in ctx. */
int sharc__device_copy_bandwidth(sharc__ctx *ctx, int ordinal, double *bytes_per_second);

/** sharc_tensor_copy_to_host(), with its errors in ctx. */
int sharc__device_tensor_to_host(sharc__ctx *ctx, const sharc_tensor *t, void *dst, size_t cap);

#endif /* SHARC_SRC_DEVICE_H */

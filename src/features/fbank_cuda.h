/*
 * The log-mel features of features/fbank.h on a CUDA device: the same steps, with cuFFT for
 * the FFT and kernels for the framing (pre-emphasis, window), the mel projection, the log
 * and the per-utterance normalisation and masking. Built only when the CUDA toolkit (nvcc
 * and cuFFT) is found (SHARC_HAVE_FBANK_CUDA in config.h); checked against the CPU path by
 * tests/gpu/gpu_fbank.c.
 *
 * A plan owns its device, a stream, a cuFFT plan of a fixed number of frames (the frames
 * of a batch go through it in chunks, so its size never changes) and device work space
 * that only grows: a steady state allocates nothing. Dither is not done on the device
 * (a plan with dither is refused): NeMo dithers in training only, with torch's generator,
 * which neither path reproduces. A plan is used by one thread at a time.
 */
#ifndef SHARC_SRC_FBANK_CUDA_H
#define SHARC_SRC_FBANK_CUDA_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "base/ctx.h"
#include "features/fbank.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sharc__fbank_cuda sharc__fbank_cuda;

/**
 * Make a plan on CUDA device `device`.
 * @return 0, SHARC_ERR(EINVAL) (sharc__fbank_check, or dither on), SHARC_ERR_CUDA (no such
 *         device, out of device memory, a cuFFT failure), with ctx's error saying which call
 *         failed and why
 */
int sharc__fbank_cuda_create(sharc__fbank_cuda **out, sharc__ctx *ctx,
                             const sharc__fbank_settings *s, int device);

/** Free a plan and its device memory; NULL-safe, sets *f to NULL. */
void sharc__fbank_cuda_destroy(sharc__fbank_cuda **f);

/**
 * Features of a batch in device memory, as sharc__fbank_compute: audio f32 [B, T] and lens
 * i32 [B] (each 0..T, checked) into out f32 [B, n_mels, frames] and out_lens i32 [B], all on
 * the plan's device; `frames` at least sharc__fbank_frames() of T. Returns when they are
 * written. The caller's current device is unchanged.
 * @return 0, SHARC_ERR(EINVAL) (a length out of range, too few frames) or SHARC_ERR_CUDA
 */
int sharc__fbank_cuda_compute(sharc__fbank_cuda *f, sharc__ctx *ctx, const float *audio,
                              const int32_t *lens, int64_t B, int64_t T, float *out,
                              int32_t *out_lens, int64_t frames);

/**
 * Enqueue the features of a batch on `stream`, as sharc__fbank_cuda_compute, and return
 * without waiting for them. The caller has made the plan's device current and checked every
 * length (0..T) on the host; `stream` is a stream of that device. The plan's work space
 * serves each call in turn: calls on one stream follow each other, and a call that must
 * grow the work space first waits for the stream of the call before it.
 * @return 0, SHARC_ERR(EINVAL) (too few frames) or SHARC_ERR_CUDA
 */
int sharc__fbank_cuda_enqueue(sharc__fbank_cuda *f, sharc__ctx *ctx, cudaStream_t stream,
                              const float *audio, const int32_t *lens, int64_t B, int64_t T,
                              float *out, int32_t *out_lens, int64_t frames);

/** cudaMalloc calls the plan made for its work space after it was created (it only grows). */
uint64_t sharc__fbank_cuda_mallocs(const sharc__fbank_cuda *f);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_SRC_FBANK_CUDA_H */

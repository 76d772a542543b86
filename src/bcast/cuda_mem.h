/*
 * CUDA helpers shared by the transports that carry device tensors (NCCL, and MPI staging
 * through pinned memory): error texts naming the call, entering a device and leaving the
 * caller's current device as it was, and the device memory of a transport's heap
 * (sharc__transport_set_device). Built when sharc is built with CUDA.
 */
#ifndef SHARC_SRC_CUDA_MEM_H
#define SHARC_SRC_CUDA_MEM_H

#include <cuda_runtime.h>

#include "base/ctx.h"
#include "bcast/transport.h"

/** 0 for cudaSuccess, else SHARC_ERR_CUDA with CUDA's text, naming the call (logged). */
int sharc__cuda_check(sharc__ctx *ctx, cudaError_t err, const char *call);
#define SHARC__CUDA_CHECK(ctx, call) sharc__cuda_check((ctx), (call), #call)

/** Make `device` current, remembering the caller's current device in *prev. */
int sharc__cuda_enter(sharc__ctx *ctx, int device, int *prev);

/** Make `prev` (from sharc__cuda_enter) current again. */
void sharc__cuda_leave(int device, int prev);

/** cudaMalloc / cudaFree on the given device, the caller's current device left unchanged. */
extern const sharc__device_ops sharc__cuda_device_ops;

#endif /* SHARC_SRC_CUDA_MEM_H */

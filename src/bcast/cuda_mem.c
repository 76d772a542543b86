#include "bcast/cuda_mem.h"

int sharc__cuda_check(sharc__ctx *ctx, cudaError_t err, const char *call)
{
    if (err == cudaSuccess)
        return 0;
    return sharc__fail(ctx, SHARC_ERR_CUDA, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                       cudaGetErrorName(err));
}

int sharc__cuda_enter(sharc__ctx *ctx, int device, int *prev)
{
    *prev = -1;
    int rc = SHARC__CUDA_CHECK(ctx, cudaGetDevice(prev));
    if (rc == 0 && *prev != device)
        rc = SHARC__CUDA_CHECK(ctx, cudaSetDevice(device));
    return rc;
}

void sharc__cuda_leave(int device, int prev)
{
    if (prev != device && prev >= 0)
        cudaSetDevice(prev);
}

static int cuda_alloc(sharc__ctx *ctx, void **ptr, size_t size, int ordinal)
{
    int prev = -1;
    *ptr = NULL;
    int rc = sharc__cuda_enter(ctx, ordinal, &prev);
    if (rc == 0)
        rc = SHARC__CUDA_CHECK(ctx, cudaMalloc(ptr, size));
    sharc__cuda_leave(ordinal, prev);
    return rc;
}

static void cuda_free(sharc__ctx *ctx, void *ptr, int ordinal)
{
    int prev = -1;
    if (sharc__cuda_enter(ctx, ordinal, &prev) == 0) {
        SHARC__CUDA_CHECK(ctx, cudaFree(ptr));
        sharc__cuda_leave(ordinal, prev);
    }
}

const sharc__device_ops sharc__cuda_device_ops = {cuda_alloc, cuda_free};

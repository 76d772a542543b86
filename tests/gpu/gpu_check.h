/* What the GPU tests share: a check that exits with its place, and the skip without a GPU. */
#ifndef SHARC_TESTS_GPU_CHECK_H
#define SHARC_TESTS_GPU_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The number of CUDA devices; exits 77 (skipped) when there is none. */
static inline int gpu_devices_or_skip(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no CUDA device: skipped\n");
        exit(77);
    }
    return n;
}

#endif

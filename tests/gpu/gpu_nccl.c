/*
 * The NCCL transport through the real NCCL and CUDA calls, on a one-rank communicator per
 * visible GPU: host buffers (staged through pinned memory), device buffers in place, a
 * group of both, the device allocator, and the caller's current device left unchanged.
 * Exits 77 (skipped) when no GPU is present.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batching/batch.h"
#include "bcast/bcast.h"
#include "gpu_check.h"
#include "guard_alloc.h"
#include "sharc/cuda.h"
#include "sharc/sharc.h"
#include "bcast/transport.h"

static void run_on_device(int dev, int n_devices)
{
    ncclComm_t comm = NULL;
    sharc_transport *t = NULL;
    int other = n_devices > 1 ? (dev + 1) % n_devices : dev;
    CHECK(cudaSetDevice(other) == cudaSuccess);
    CHECK(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess);
    CHECK(cudaSetDevice(other) == cudaSuccess);
    sharc_transport_settings s;
    sharc_transport_default_settings(&s);
    s.timeout_ms = 30000;
    CHECK(sharc_transport_nccl_open(&t, comm, dev, &s) == 0);
    CHECK(strcmp(sharc_transport_name(t), "nccl") == 0);
    CHECK(sharc_transport_rank(t) == 0 && sharc_transport_size(t) == 1);
    int cur = -1;
    CHECK(cudaGetDevice(&cur) == cudaSuccess && cur == other);

    /* Host buffer: through pinned staging and ncclBroadcast. */
    size_t n = 3 << 20;
    uint8_t *host = malloc(n);
    for (size_t i = 0; i < n; i++)
        host[i] = (uint8_t)(i * 31 + 7);
    CHECK(sharc__transport_bcast(t, host, n, 0, SHARC_DEVICE_HOST) == 0);
    for (size_t i = 0; i < n; i += 4099)
        CHECK(host[i] == (uint8_t)(i * 31 + 7));

    /* Each step's status word: an all-reduce of one u32 through the device (called through
     * the op, since the protocol skips it in a group of one); the caller's device stays. */
    uint32_t word = 0xabc;
    CHECK(t->ops->allreduce_max(t, &word) == 0);
    CHECK(word == 0xabc);
    word = 0;
    CHECK(t->ops->allreduce_max(t, &word) == 0);
    CHECK(word == 0);
    CHECK(cudaGetDevice(&cur) == cudaSuccess && cur == other);

    /* Device buffer from the transport's allocator, in place, inside a group with a host one. */
    const sharc__device_allocator *da = sharc__transport_device_allocator(t);
    CHECK(da != NULL);
    void *d = NULL;
    CHECK(da->alloc(da->cookie, &d, n, dev) == 0);
    struct cudaPointerAttributes attr;
    CHECK(cudaPointerGetAttributes(&attr, d) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeDevice && attr.device == dev);
    CHECK(cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(sharc__transport_group_begin(t) == 0);
    CHECK(sharc__transport_bcast(t, host, 4096, 0, SHARC_DEVICE_HOST) == 0);
    CHECK(sharc__transport_bcast(t, d, n, 0, SHARC_DEVICE_CUDA) == 0);
    CHECK(sharc__transport_group_end(t) == 0);
    uint8_t *back = malloc(n);
    CHECK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(back, host, n) == 0);
    CHECK(cudaGetDevice(&cur) == cudaSuccess && cur == other);

    /* A batch pool with device tensors gets device memory from the transport. */
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc_batch *b = NULL;
    int64_t shape[2] = {4, 1000};
    sharc__ctx_init(&ctx, NULL, NULL);
    CHECK(sharc__batch_pool_create(&pool, &ctx, 1, da) == 0);
    CHECK(sharc__batch_pool_acquire(pool, &b) == 0);
    CHECK(sharc__batch_add_tensor(b, "features", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, dev, 2,
                                  shape) == 0);
    CHECK(sharc__batch_add_tensor(b, "audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1,
                                  shape) == 1);
    CHECK(sharc__batch_finish(b) == 0);
    CHECK(cudaPointerGetAttributes(&attr, b->tensors[0].data) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeDevice);
    /* The protocol on a group of one: validated, nothing sent. */
    sharc__bcast *bc = NULL;
    CHECK(sharc__bcast_open(&bc, t, NULL) == 0);
    CHECK(sharc__bcast_send(bc, b) == 0);
    CHECK(sharc__bcast_send_stop(bc) == 0);
    sharc__bcast_close(&bc);
    sharc_batch_release(b);
    sharc__batch_pool_destroy(&pool);

    da->free(da->cookie, d, dev);
    free(host);
    free(back);
    sharc_transport_close(&t);
    CHECK(cudaGetDevice(&cur) == cudaSuccess && cur == other);
    ncclCommDestroy(comm);
    printf("device %d: NCCL transport host, device and grouped broadcasts OK\n", dev);
}

static char logged[512];

static void capture(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    if (level == SHARC_LOG_ERROR)
        snprintf(logged, sizeof logged, "%s", message);
}

/*
 * A batch whose device tensor came from the NCCL transport's allocator, released after the
 * transport was closed. Before the fix the allocator that pools keep had the transport
 * itself as its cookie, and its free reported a failing CUDA call (cudaGetDevice or
 * cudaSetDevice, as at process shutdown) into that freed transport: the first check below
 * fails on that code. Then the free's failure path is taken for real: the CUDA context is
 * reset so that cudaFree fails, and the free must report it through memory that is still
 * alive (the transport's own memory is unmapped by the guard allocator, so any read of it
 * faults). The transport's heap outlives it until the last buffer is freed, and that
 * release frees every host allocation, the heap's included.
 */
static void release_after_close(int dev)
{
    ncclComm_t comm = NULL;
    sharc_transport *t = NULL;
    CHECK(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess);
    sharc_transport_settings s;
    sharc_transport_default_settings(&s);
    s.allocator = guard_allocator();
    s.logger.callback = capture;
    s.logger.level = SHARC_LOG_ERROR;
    CHECK(sharc_transport_nccl_open(&t, comm, dev, &s) == 0);
    CHECK(sharc__transport_device_allocator(t)->cookie != (void *)t);
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc_batch *b = NULL;
    int64_t shape[1] = {1 << 20};
    sharc__ctx_init(&ctx, NULL, NULL);
    CHECK(sharc__batch_pool_create(&pool, &ctx, 1, sharc__transport_device_allocator(t)) == 0);
    CHECK(sharc__batch_pool_acquire(pool, &b) == 0);
    CHECK(sharc__batch_add_tensor(b, "features", SHARC_DTYPE_U8, SHARC_DEVICE_CUDA, dev, 1,
                                  shape) == 0);
    CHECK(sharc__batch_finish(b) == 0);
    CHECK(cudaMemset(b->tensors[0].data, 0x3c, b->tensors[0].nbytes) == cudaSuccess);
    sharc__batch_pool_destroy(&pool); /* the held batch keeps it */
    sharc_transport_close(&t);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
    CHECK(guard_live > 0); /* the heap waits for the buffer */
    uint8_t back[64];
    CHECK(cudaMemcpy(back, b->tensors[0].data, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (size_t i = 0; i < sizeof back; i++)
        CHECK(back[i] == 0x3c);
    /* Under compute-sanitizer the failing cudaFree would count as an error of the test. */
    if (!getenv("SHARC_GPU_UNDER_SANITIZER"))
        CHECK(cudaDeviceReset() == cudaSuccess);
    logged[0] = 0;
    sharc_batch_release(b);
    CHECK(guard_live == 0);
    CHECK(logged[0] == 0 || strstr(logged, "cudaFree(ptr) failed"));
    printf("device %d: a device batch released after its transport was closed%s\n", dev,
           logged[0] ? " (the free after the reset failed, and said so)" : "");
}

int main(void)
{
    int n = gpu_devices_or_skip();
    for (int dev = 0; dev < n; dev++)
        run_on_device(dev, n);
    release_after_close(0); /* last: it resets the CUDA context */
    return 0;
}

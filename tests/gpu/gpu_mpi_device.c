/*
 * The loader's device protocol over the MPI transport staging device tensors through pinned
 * memory (sharc_transport_mpi_set_device), run under mpirun with 2 and 4 processes that
 * share one GPU (NCCL refuses two ranks on one device). Each part says what it catches:
 *   1. device tensors arrive with exact bytes on each peer's own device, in batches that mix
 *      host and device tensors: a host payload over the control block with a device tensor
 *      of several staging chunks; host bytes inline in the control block with a device
 *      tensor (before the fix the source broadcast a host payload from NULL there that the
 *      peers, returning after the inline copy, never joined: the next collectives paired
 *      wrong buffers and the group failed or timed out); a zero-byte device tensor; device
 *      memory reused from the pool; a clean stop on every rank;
 *   2. a frame whose descriptors name a device the peers do not have (ordinal 7): peers
 *      allocate on their own transport's device (before the fix they called cudaSetDevice(7),
 *      failed, and the step failed on every rank);
 *   3. error frames: a produce callback's failure, and a device batch over an MPI transport
 *      without a device ("... the mpi transport cannot carry device tensors ..."), each
 *      raised on the peers as a remote error naming the source rank;
 *   4. a device batch released after its loader and transport were closed (part 4 below).
 * Received device buffers are poisoned before release, so a later batch that reuses one and
 * leaves bytes unwritten fails the byte checks. Exits 77 (on every rank) without a GPU.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "batching/batch.h"
#include "bcast/bcast.h"
#include "guard_alloc.h"
#include "mpi_check.h"
#include "sharc/mpi.h"
#include "sharc/sharc.h"

int world_rank, world_size; /* mpi_check.h names the rank in its messages */
static int dev;

/* The byte every tensor holds at index i: differs by step, tensor and position. */
static uint8_t pattern(uint64_t step, int tensor, size_t i)
{
    return (uint8_t)(i * 131u + step * 17u + (unsigned)tensor * 7u + (i >> 12));
}

static void fill_host(uint8_t *p, size_t n, uint64_t step, int tensor)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(step, tensor, i);
}

/* A device tensor holds exactly the pattern, on this rank's own device. */
static void check_device_tensor(const sharc_tensor *t, uint64_t step, int tensor)
{
    CHECK(t->device == SHARC_DEVICE_CUDA && t->device_ordinal == dev);
    if (t->nbytes == 0)
        return;
    struct cudaPointerAttributes attr;
    CHECK(cudaPointerGetAttributes(&attr, t->data) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeDevice && attr.device == dev);
    uint8_t *back = malloc(t->nbytes);
    CHECK(back != NULL);
    CHECK(cudaMemcpy(back, t->data, t->nbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (size_t i = 0; i < t->nbytes; i++)
        if (back[i] != pattern(step, tensor, i)) {
            fprintf(stderr, "rank %d: step %llu tensor '%s' byte %zu is %u, want %u\n", world_rank,
                    (unsigned long long)step, t->name, i, back[i], pattern(step, tensor, i));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    free(back);
}

static void check_host_tensor(const sharc_tensor *t, uint64_t step, int tensor)
{
    CHECK(t->device == SHARC_DEVICE_HOST);
    for (size_t i = 0; i < t->nbytes; i++)
        CHECK(((const uint8_t *)t->data)[i] == pattern(step, tensor, i));
}

/* Poison a received batch's device memory before it goes back to the pool. */
static void poison(sharc_batch *b)
{
    for (size_t i = 0; i < b->n_tensors; i++)
        if (b->tensors[i].device == SHARC_DEVICE_CUDA && b->tensors[i].nbytes)
            CHECK(cudaMemset(b->tensors[i].data, 0xa5, b->tensors[i].nbytes) == cudaSuccess);
}

static sharc_transport *open_transport(const sharc_transport_settings *ts, int with_device)
{
    sharc_mesh mesh;
    char spec[32];
    snprintf(spec, sizeof spec, "tp=%d", world_size);
    CHECK_RC(sharc_mesh_parse(&mesh, spec, world_rank, world_size), 0);
    sharc_transport *t = NULL;
    CHECK_RC(sharc_transport_mpi_split(&t, MPI_COMM_WORLD, &mesh, ts), 0);
    if (with_device)
        CHECK_RC(sharc_transport_mpi_set_device(t, dev), 0);
    return t;
}

static void loader_settings(sharc_loader_settings *ls, sharc_transport *t)
{
    char spec[32];
    snprintf(spec, sizeof spec, "tp=%d", world_size);
    sharc_loader_default_settings(ls);
    CHECK_RC(sharc_mesh_parse(&ls->mesh, spec, world_rank, world_size), 0);
    ls->transport = t;
    ls->reader.max_held_batches = 2;
}

/* ---- 1. the device protocol ---- */

enum { STEPS = 9 };

typedef struct shape_spec {
    const char *name;
    sharc_dtype dtype;
    sharc_device device;
    int ndim;
    int64_t shape[3];
} shape_spec;

/* Three kinds of batch, in turn. */
static const shape_spec kinds[3][3] = {
    /* a host payload over the control block; a device tensor of three staging chunks */
    {{"audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 2, {2, 300000}},
     {"features", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 3, {4, 80, 30000}},
     {"feature_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 1, {4}}},
    /* host bytes inline in the control block, and a device tensor */
    {{"feature_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 1, {4}},
     {"features", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 3, {4, 80, 1000}},
     {"ids", SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 1, {24}}},
    /* a zero-byte device tensor, a three-byte one and inline host bytes */
    {{"empty", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 2, {0, 80}},
     {"tiny", SHARC_DTYPE_U8, SHARC_DEVICE_CUDA, 1, {3}},
     {"ids", SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 1, {5}}},
};

typedef struct producer {
    int made, fail_at; ///< fail_at: step whose production fails (-1: none)
} producer;

static int produce(void *cookie, sharc_loader *l, sharc_batch **out)
{
    producer *pr = cookie;
    if (pr->made == STEPS)
        return SHARC_END;
    if (pr->made == pr->fail_at) {
        sharc_loader_set_source_error(l,
                                      "shard s-3.tar, member c-7.flac, cut c-7: made-up "
                                      "failure of step %d",
                                      pr->made);
        return SHARC_ERR_DECODE;
    }
    const shape_spec *k = kinds[pr->made % 3];
    sharc_tensor d[3];
    memset(d, 0, sizeof d);
    for (int i = 0; i < 3; i++) {
        snprintf(d[i].name, sizeof d[i].name, "%s", k[i].name);
        d[i].dtype = k[i].dtype;
        d[i].device = k[i].device;
        d[i].device_ordinal = k[i].device == SHARC_DEVICE_CUDA ? dev : 0;
        d[i].ndim = k[i].ndim;
        memcpy(d[i].shape, k[i].shape, sizeof k[i].shape);
    }
    int rc = sharc_loader_batch_new(l, 3, d, out);
    if (rc < 0)
        return rc;
    uint64_t step = (uint64_t)pr->made++;
    for (int i = 0; i < 3; i++) {
        sharc_tensor *t = &(*out)->tensors[i];
        if (t->device == SHARC_DEVICE_HOST) {
            fill_host(t->data, t->nbytes, step, i);
        } else if (t->nbytes) {
            uint8_t *host = malloc(t->nbytes);
            CHECK(host != NULL);
            fill_host(host, t->nbytes, step, i);
            CHECK(cudaMemcpy(t->data, host, t->nbytes, cudaMemcpyHostToDevice) == cudaSuccess);
            free(host);
        }
    }
    (*out)->step = step;
    return 0;
}

static void device_protocol(void)
{
    sharc_transport *t = open_transport(NULL, 1);
    sharc_loader_settings ls;
    loader_settings(&ls, t);
    producer pr = {0, -1};
    ls.produce = produce;
    ls.produce_cookie = &pr;
    sharc_loader *l = NULL;
    CHECK_RC(sharc_loader_open(&l, &ls), 0);
    void *seen[16];
    int n_seen = 0, rc, cur = -1;
    sharc_batch *b = NULL;
    uint64_t step = 0;
    while ((rc = sharc_loader_next(l, &b)) == 0) {
        CHECK(b->step == step && b->n_tensors == 3);
        const shape_spec *k = kinds[step % 3];
        for (int i = 0; i < 3; i++) {
            const sharc_tensor *x = &b->tensors[i];
            CHECK(strcmp(x->name, k[i].name) == 0 && x->ndim == k[i].ndim);
            for (int d = 0; d < x->ndim; d++)
                CHECK(x->shape[d] == k[i].shape[d]);
            if (x->device == SHARC_DEVICE_CUDA)
                check_device_tensor(x, step, i);
            else
                check_host_tensor(x, step, i);
        }
        const sharc_tensor *f = sharc_batch_tensor(b, "features");
        if (f && !sharc_loader_is_source(l)) {
            int j = 0;
            while (j < n_seen && seen[j] != f->data)
                j++;
            if (j == n_seen) {
                CHECK(n_seen < 16);
                seen[n_seen++] = f->data;
            }
        }
        if (!sharc_loader_is_source(l))
            poison(b);
        sharc_batch_release(b);
        step++;
    }
    CHECK_RC(rc, SHARC_END);
    CHECK(step == STEPS);
    CHECK_RC(sharc_loader_next(l, &b), SHARC_END); /* ended: no collective, same result */
    CHECK(cudaGetDevice(&cur) == cudaSuccess && cur == dev);
    /* Pooled: each of the two receive slots keeps its features buffer (grown once at most). */
    CHECK(n_seen <= 4);
    sharc_loader_close(&l);
    sharc_transport_close(&t);
    if (world_rank == 0)
        printf("%d ranks: %d mixed host/device batches with exact bytes on each rank's device\n",
               world_size, STEPS);
}

/* ---- 2. a foreign ordinal in the descriptors ---- */

static void foreign_ordinal(void)
{
    sharc_transport *t = open_transport(NULL, 1);
    sharc__bcast *bc = NULL;
    CHECK_RC(sharc__bcast_open(&bc, t, NULL), 0);
    size_t n = 1 << 20;
    if (sharc__bcast_is_source(bc)) {
        uint8_t *host = malloc(n);
        void *d = NULL;
        CHECK(host && cudaMalloc(&d, n) == cudaSuccess);
        fill_host(host, n, 42, 0);
        CHECK(cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) == cudaSuccess);
        /* Ordinal 7: a device of the source's own numbering that the peers lack. */
        sharc_tensor x = {"features", SHARC_DTYPE_U8, SHARC_DEVICE_CUDA, 7, 1, {(int64_t)n}, d, n};
        sharc_batch b = {42, 0, 1, &x, NULL};
        CHECK_RC(sharc__bcast_send(bc, &b), 0);
        CHECK_RC(sharc__bcast_send_stop(bc), 0);
        CHECK(cudaFree(d) == cudaSuccess);
        free(host);
    } else {
        sharc_batch *got = NULL;
        CHECK_RC(sharc__bcast_recv(bc, &got), 0);
        CHECK(got->tensors[0].device_ordinal == dev);
        check_device_tensor(&got->tensors[0], 42, 0);
        sharc_batch_release(got);
        CHECK_RC(sharc__bcast_recv(bc, &got), SHARC_END);
    }
    sharc__bcast_close(&bc);
    sharc_transport_close(&t);
    if (world_rank == 0)
        printf("%d ranks: a frame naming device 7 lands on each peer's own device\n", world_size);
}

/* ---- 3. error frames ---- */

static void error_frames(void)
{
    /* A produce callback's failure at step 1, after one device batch. */
    sharc_transport *t = open_transport(NULL, 1);
    sharc_loader_settings ls;
    loader_settings(&ls, t);
    producer pr = {0, 1};
    ls.produce = produce;
    ls.produce_cookie = &pr;
    sharc_loader *l = NULL;
    CHECK_RC(sharc_loader_open(&l, &ls), 0);
    sharc_batch *b = NULL;
    CHECK_RC(sharc_loader_next(l, &b), 0);
    sharc_batch_release(b);
    const char *why = "shard s-3.tar, member c-7.flac, cut c-7: made-up failure of step 1";
    char want[256];
    if (sharc_loader_is_source(l)) {
        CHECK_RC(sharc_loader_next(l, &b), SHARC_ERR_DECODE);
        CHECK(strcmp(sharc_loader_last_error(l), why) == 0);
    } else {
        CHECK_RC(sharc_loader_next(l, &b), SHARC_ERR_REMOTE);
        snprintf(want, sizeof want, "source rank 0: %s", why);
        CHECK(strcmp(sharc_loader_last_error(l), want) == 0);
    }
    sharc_loader_close(&l);
    sharc_transport_close(&t);

    /* A device tensor over an MPI transport that was given no device. */
    t = open_transport(NULL, 0);
    sharc__bcast *bc = NULL;
    CHECK_RC(sharc__bcast_open(&bc, t, NULL), 0);
    const char *text = "tensor 'features' is in CUDA memory but the mpi transport cannot carry "
                       "device tensors (give it this rank's CUDA device with "
                       "sharc_transport_mpi_set_device)";
    if (sharc__bcast_is_source(bc)) {
        void *d = NULL;
        CHECK(cudaMalloc(&d, 4096) == cudaSuccess);
        sharc_tensor x = {"features", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, dev, 1, {1024}, d, 4096};
        sharc_batch bb = {0, 0, 1, &x, NULL};
        CHECK_RC(sharc__bcast_send(bc, &bb), SHARC_ERR_UNSUPPORTED);
        CHECK(strcmp(sharc__bcast_error(bc), text) == 0);
        CHECK(cudaFree(d) == cudaSuccess);
    } else {
        sharc_batch *got = NULL;
        CHECK_RC(sharc__bcast_recv(bc, &got), SHARC_ERR_REMOTE);
        snprintf(want, sizeof want, "source rank 0: %s", text);
        CHECK(strcmp(sharc__bcast_error(bc), want) == 0);
    }
    sharc__bcast_close(&bc);
    sharc_transport_close(&t);
    if (world_rank == 0)
        printf("%d ranks: a producer's failure and a device batch over a host-only transport "
               "reach every peer as remote errors\n",
               world_size);
}

/* ---- 4. release after close ---- */

static char freed_log[512];

static void capture(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    if (level == SHARC_LOG_ERROR)
        snprintf(freed_log, sizeof freed_log, "%s", message);
}

/*
 * Every rank holds a device batch (the source its own, from the transport's device memory)
 * while the loader and the transport are closed, reads it, and releases it afterwards. The
 * CUDA context is reset first, so that freeing the buffer fails: the free must then report
 * through memory that is still alive, not through the closed transport (unmapped by the
 * guard allocator: a read of it faults). The transport's heap outlives it until the last
 * buffer is freed, and every host allocation, the heap's included, is freed by that
 * release. (gpu_nccl.c checks the same of the NCCL transport, whose allocator before the
 * fix referred to the transport itself.)
 */
static void release_after_close(void)
{
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.allocator = guard_allocator(); /* the transport's memory: unmapped when freed */
    ts.logger.callback = capture;
    ts.logger.level = SHARC_LOG_ERROR;
    sharc_transport *t = open_transport(&ts, 1);
    sharc_loader_settings ls;
    loader_settings(&ls, t);
    producer pr = {0, -1};
    ls.produce = produce;
    ls.produce_cookie = &pr;
    sharc_loader *l = NULL;
    CHECK_RC(sharc_loader_open(&l, &ls), 0);
    sharc_batch *b = NULL;
    CHECK_RC(sharc_loader_next(l, &b), 0);
    sharc_loader_close(&l);
    sharc_transport_close(&t);
    CHECK(guard_live > 0); /* the heap and the batch pool wait for the batch */
    check_device_tensor(sharc_batch_tensor(b, "features"), 0, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(cudaDeviceReset() == cudaSuccess);
    freed_log[0] = 0;
    sharc_batch_release(b);
    CHECK(guard_live == 0);
    CHECK(freed_log[0] == 0 || strstr(freed_log, "cudaFree(ptr) failed"));
    if (world_rank == 0)
        printf("%d ranks: device batches released after close, the heap freed last%s\n", world_size,
               freed_log[0] ? " (the free after the reset failed, and said so)" : "");
}

int main(int argc, char **argv)
{
    int n_devices = 0;
    int have_gpu = cudaGetDeviceCount(&n_devices) == cudaSuccess && n_devices > 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    int all = 0;
    MPI_Allreduce(&have_gpu, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (world_rank == 0)
            printf("no CUDA device: skipped\n");
        MPI_Finalize();
        return 77;
    }
    alarm(240);
    dev = world_rank % n_devices;
    CHECK(cudaSetDevice(dev) == cudaSuccess);
    device_protocol();
    foreign_ordinal();
    error_frames();
    release_after_close(); /* last: it resets this process's CUDA context */
    MPI_Finalize();
    return 0;
}

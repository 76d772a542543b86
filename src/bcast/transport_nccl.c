/*
 * The NCCL transport: ncclBroadcast on a stream the transport owns. Device buffers are
 * broadcast in place; a host buffer goes host -> pinned -> device staging -> NCCL and back
 * on the peers. Waits poll the stream and ncclCommGetAsyncError so a stuck collective
 * times out instead of blocking forever.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "sharc/cuda.h"
#include "bcast/transport.h"

#if SHARC_HAVE_MPI
#include "sharc/mpi.h"
#include "bcast/transport_mpi.h"
#endif

typedef struct nccl_impl {
    ncclComm_t comm;
    int owned;
    int device;
    cudaStream_t stream;
    uint8_t *pinned; ///< host staging (cudaHostAlloc)
    uint8_t *staged; ///< device staging for host buffers
    size_t stage_cap;
    uint32_t *word_host; ///< pinned: the status word of allreduce_max
    uint32_t *word_dev;
    int in_group;
    void *pending_host; ///< host buffer to fill from the staging after the group (peers)
    size_t pending_n;
} nccl_impl;

static int cuda_check(sharc__ctx *ctx, cudaError_t err, const char *call)
{
    if (err == cudaSuccess)
        return 0;
    return sharc__fail(ctx, SHARC_ERR_CUDA, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                       cudaGetErrorName(err));
}
#define CUDA_CHECK(ctx, call) cuda_check((ctx), (call), #call)

static int nccl_check(sharc__ctx *ctx, ncclComm_t comm, ncclResult_t r, const char *call)
{
    if (r == ncclSuccess)
        return 0;
    const char *detail = comm ? ncclGetLastError(comm) : NULL;
    return sharc__fail(ctx, SHARC_ERR_NCCL, "%s failed: %s%s%s", call, ncclGetErrorString(r),
                       detail && *detail ? ": " : "", detail ? detail : "");
}
#define NCCL_CHECK(ctx, comm, call) nccl_check((ctx), (comm), (call), #call)

/* Make `device` current, remembering the caller's device in *prev. */
static int enter_device(sharc__ctx *ctx, int device, int *prev)
{
    int rc = CUDA_CHECK(ctx, cudaGetDevice(prev));
    if (rc == 0 && *prev != device)
        rc = CUDA_CHECK(ctx, cudaSetDevice(device));
    return rc;
}

static void leave_device(int device, int prev)
{
    if (prev != device && prev >= 0)
        cudaSetDevice(prev);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Wait for the stream, watching NCCL's asynchronous errors and the timeout. */
static int wait_stream(sharc_transport *t)
{
    nccl_impl *n = t->impl;
    double start = now_ms();
    for (long spins = 0;; spins++) {
        cudaError_t q = cudaStreamQuery(n->stream);
        if (q == cudaSuccess)
            return 0;
        if (q != cudaErrorNotReady)
            return CUDA_CHECK(&t->ctx, q);
        ncclResult_t async = ncclSuccess;
        int rc = NCCL_CHECK(&t->ctx, n->comm, ncclCommGetAsyncError(n->comm, &async));
        if (rc == 0 && async != ncclSuccess && async != ncclInProgress)
            rc = nccl_check(&t->ctx, n->comm, async, "NCCL collective (asynchronous error)");
        if (rc < 0) {
            sharc__transport_abort(t);
            return rc;
        }
        if (t->timeout_ms > 0 && now_ms() - start > t->timeout_ms) {
            sharc__transport_abort(t);
            return sharc__fail(
                &t->ctx, SHARC_ERR_TIMEOUT,
                "NCCL collective did not finish within %d ms on rank %d of a broadcast group "
                "of %d: another rank of the group stopped, died or is stuck; "
                "communicator aborted",
                t->timeout_ms, t->rank, t->size);
        }
        if (spins > 1000) {
            struct timespec pause = {0, 20000};
            nanosleep(&pause, NULL);
        }
    }
}

static int grow_staging(sharc_transport *t, size_t nbytes)
{
    nccl_impl *n = t->impl;
    if (nbytes <= n->stage_cap)
        return 0;
    if (n->pending_host)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "one host buffer per NCCL broadcast group at most");
    cudaFreeHost(n->pinned);
    cudaFree(n->staged);
    n->pinned = NULL;
    n->staged = NULL;
    n->stage_cap = 0;
    int rc = CUDA_CHECK(&t->ctx, cudaHostAlloc((void **)&n->pinned, nbytes, cudaHostAllocDefault));
    if (rc == 0)
        rc = CUDA_CHECK(&t->ctx, cudaMalloc((void **)&n->staged, nbytes));
    if (rc == 0)
        n->stage_cap = nbytes;
    return rc;
}

static int issue(sharc_transport *t, void *buf, size_t nbytes, int root, sharc_device device)
{
    nccl_impl *n = t->impl;
    if (device == SHARC_DEVICE_CUDA)
        return NCCL_CHECK(&t->ctx, n->comm,
                          ncclBroadcast(buf, buf, nbytes, ncclUint8, root, n->comm, n->stream));
    if (n->pending_host)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "one host buffer per NCCL broadcast group at most");
    int rc = grow_staging(t, nbytes);
    if (rc == 0 && t->rank == root) {
        memcpy(n->pinned, buf, nbytes);
        rc = CUDA_CHECK(&t->ctx, cudaMemcpyAsync(n->staged, n->pinned, nbytes,
                                                 cudaMemcpyHostToDevice, n->stream));
    }
    if (rc == 0)
        rc = NCCL_CHECK(
            &t->ctx, n->comm,
            ncclBroadcast(n->staged, n->staged, nbytes, ncclUint8, root, n->comm, n->stream));
    if (rc == 0 && t->rank != root) {
        n->pending_host = buf;
        n->pending_n = nbytes;
    }
    return rc;
}

/* After the group: bring a staged host buffer back and wait for everything. */
static int complete(sharc_transport *t)
{
    nccl_impl *n = t->impl;
    int rc = 0;
    if (n->pending_host)
        rc = CUDA_CHECK(&t->ctx, cudaMemcpyAsync(n->pinned, n->staged, n->pending_n,
                                                 cudaMemcpyDeviceToHost, n->stream));
    if (rc == 0)
        rc = wait_stream(t);
    if (rc == 0 && n->pending_host)
        memcpy(n->pending_host, n->pinned, n->pending_n);
    n->pending_host = NULL;
    n->pending_n = 0;
    return rc;
}

static int nccl_group_begin(sharc_transport *t)
{
    nccl_impl *n = t->impl;
    int rc = NCCL_CHECK(&t->ctx, n->comm, ncclGroupStart());
    if (rc == 0)
        n->in_group = 1;
    return rc;
}

static int nccl_group_end(sharc_transport *t)
{
    nccl_impl *n = t->impl;
    int prev = -1;
    n->in_group = 0;
    int rc = enter_device(&t->ctx, n->device, &prev);
    int end = NCCL_CHECK(&t->ctx, n->comm, ncclGroupEnd());
    if (rc == 0)
        rc = end;
    if (rc == 0)
        rc = complete(t);
    leave_device(n->device, prev);
    return rc;
}

static int nccl_bcast(sharc_transport *t, void *buf, size_t nbytes, int root, sharc_device device)
{
    nccl_impl *n = t->impl;
    int prev = -1;
    int rc = enter_device(&t->ctx, n->device, &prev);
    if (rc == 0)
        rc = issue(t, buf, nbytes, root, device);
    if (rc == 0 && !n->in_group)
        rc = complete(t);
    leave_device(n->device, prev);
    return rc;
}

static int nccl_allreduce_max(sharc_transport *t, uint32_t *value)
{
    nccl_impl *n = t->impl;
    int prev = -1;
    int rc = enter_device(&t->ctx, n->device, &prev);
    if (rc == 0 && !n->word_dev) {
        rc = CUDA_CHECK(&t->ctx, cudaHostAlloc((void **)&n->word_host, sizeof *n->word_host,
                                               cudaHostAllocDefault));
        if (rc == 0)
            rc = CUDA_CHECK(&t->ctx, cudaMalloc((void **)&n->word_dev, sizeof *n->word_dev));
    }
    if (rc == 0) {
        *n->word_host = *value;
        rc = CUDA_CHECK(&t->ctx, cudaMemcpyAsync(n->word_dev, n->word_host, sizeof *value,
                                                 cudaMemcpyHostToDevice, n->stream));
    }
    if (rc == 0)
        rc = NCCL_CHECK(
            &t->ctx, n->comm,
            ncclAllReduce(n->word_dev, n->word_dev, 1, ncclUint32, ncclMax, n->comm, n->stream));
    if (rc == 0)
        rc = CUDA_CHECK(&t->ctx, cudaMemcpyAsync(n->word_host, n->word_dev, sizeof *value,
                                                 cudaMemcpyDeviceToHost, n->stream));
    if (rc == 0)
        rc = wait_stream(t);
    if (rc == 0)
        *value = *n->word_host;
    leave_device(n->device, prev);
    return rc;
}

static void nccl_abort(sharc_transport *t)
{
    nccl_impl *n = t->impl;
    if (n->comm)
        ncclCommAbort(n->comm);
    n->comm = NULL;
}

static void nccl_close(sharc_transport *t)
{
    nccl_impl *n = t->impl;
    int prev = -1;
    if (!n)
        return;
    int entered = enter_device(&t->ctx, n->device, &prev) == 0;
    if (n->stream)
        cudaStreamSynchronize(n->stream);
    if (n->owned && n->comm)
        ncclCommDestroy(n->comm);
    cudaFreeHost(n->pinned);
    cudaFree(n->staged);
    cudaFreeHost(n->word_host);
    cudaFree(n->word_dev);
    if (n->stream)
        cudaStreamDestroy(n->stream);
    if (entered)
        leave_device(n->device, prev);
    sharc__free(&t->ctx, n);
    t->impl = NULL;
}

static int device_alloc(void *cookie, void **ptr, size_t size, int ordinal)
{
    sharc_transport *t = cookie;
    int prev = -1;
    int rc = enter_device(&t->ctx, ordinal, &prev);
    if (rc == 0)
        rc = CUDA_CHECK(&t->ctx, cudaMalloc(ptr, size));
    leave_device(ordinal, prev);
    return rc;
}

static void device_free(void *cookie, void *ptr, int ordinal)
{
    sharc_transport *t = cookie;
    int prev = -1;
    if (enter_device(&t->ctx, ordinal, &prev) == 0) {
        cudaFree(ptr);
        leave_device(ordinal, prev);
    }
}

static const sharc__transport_ops nccl_ops = {
    .name = "nccl",
    .bcast = nccl_bcast,
    .allreduce_max = nccl_allreduce_max,
    .group_begin = nccl_group_begin,
    .group_end = nccl_group_end,
    .abort = nccl_abort,
    .close = nccl_close,
};

/* Wrap `comm`; on failure an owned comm is destroyed. */
static int open_comm(sharc_transport **out, ncclComm_t comm, int owned, int device,
                     const sharc_transport_settings *s)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, s ? &s->allocator : NULL, s ? &s->logger : NULL);
    sharc_transport *t = NULL;
    nccl_impl *n = NULL;
    int rank = 0, size = 0, prev = -1;
    int rc = enter_device(&ctx, device, &prev);
    if (rc < 0)
        goto fail_comm;
    rc = NCCL_CHECK(&ctx, comm, ncclCommUserRank(comm, &rank));
    if (rc == 0)
        rc = NCCL_CHECK(&ctx, comm, ncclCommCount(comm, &size));
    if (rc == 0)
        rc = sharc__transport_new(&t, &nccl_ops, s, rank, size);
    if (rc < 0)
        goto fail_comm;
    n = sharc__calloc(&t->ctx, 1, sizeof *n);
    if (!n) {
        rc = SHARC_ERR(ENOMEM);
        goto fail_comm;
    }
    n->comm = comm;
    n->owned = owned;
    n->device = device;
    t->impl = n;
    rc = CUDA_CHECK(&t->ctx, cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    if (rc < 0)
        goto fail;
    t->device.cookie = t;
    t->device.alloc = device_alloc;
    t->device.free = device_free;
    leave_device(device, prev);
    *out = t;
    return 0;
fail_comm:
    if (owned && comm)
        ncclCommDestroy(comm);
fail:
    sharc_transport_close(&t);
    leave_device(device, prev);
    return rc;
}

int sharc_transport_nccl_open(sharc_transport **out, ncclComm_t comm, int device,
                              const sharc_transport_settings *s)
{
    int settings_rc = sharc__transport_check_settings(s);
    if (settings_rc < 0) {
        *out = NULL;
        return settings_rc;
    }
    *out = NULL;
    return open_comm(out, comm, 0, device, s);
}

int sharc_transport_nccl_split(sharc_transport **out, ncclComm_t parent, int device,
                               const sharc_mesh *mesh, const sharc_transport_settings *s)
{
    int settings_rc = sharc__transport_check_settings(s);
    if (settings_rc < 0) {
        *out = NULL;
        return settings_rc;
    }
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, s ? &s->allocator : NULL, s ? &s->logger : NULL);
    ncclComm_t group = NULL;
    int rank = -1, size = 0, prev = -1;
    *out = NULL;
    int rc = enter_device(&ctx, device, &prev);
    if (rc == 0)
        rc = NCCL_CHECK(&ctx, parent, ncclCommUserRank(parent, &rank));
    if (rc == 0)
        rc = NCCL_CHECK(&ctx, parent, ncclCommCount(parent, &size));
    if (rc == 0 && (rank != mesh->rank || size != mesh->size))
        rc = sharc__fail(&ctx, SHARC_ERR(EINVAL),
                         "mesh is for rank %d of %d but the communicator has rank %d of %d",
                         mesh->rank, mesh->size, rank, size);
    if (rc == 0)
        rc = NCCL_CHECK(&ctx, parent,
                        ncclCommSplit(parent, sharc_mesh_dp_rank(mesh), sharc_mesh_group_rank(mesh),
                                      &group, NULL));
    leave_device(device, prev);
    if (rc < 0)
        return rc;
    return open_comm(out, group, 1, device, s);
}

#if SHARC_HAVE_MPI
int sharc_transport_nccl_bootstrap_mpi(sharc_transport **out, MPI_Comm parent,
                                       const sharc_mesh *mesh, int device,
                                       const sharc_transport_settings *s)
{
    int settings_rc = sharc__transport_check_settings(s);
    if (settings_rc < 0) {
        *out = NULL;
        return settings_rc;
    }
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, s ? &s->allocator : NULL, s ? &s->logger : NULL);
    MPI_Comm group = MPI_COMM_NULL;
    ncclComm_t comm = NULL;
    ncclUniqueId id;
    int rank = 0, size = 0, prev = -1;
    *out = NULL;
    memset(&id, 0, sizeof id);
    int rc = sharc__mpi_split_group(&ctx, parent, mesh, s ? s->timeout_ms : 600000, &group);
    if (rc < 0)
        return rc;
    rc = SHARC__MPI_CHECK(&ctx, MPI_Comm_rank(group, &rank));
    if (rc == 0)
        rc = SHARC__MPI_CHECK(&ctx, MPI_Comm_size(group, &size));
    /* Every rank joins the MPI_Bcast even if its own ncclGetUniqueId failed. */
    int id_rc = rc == 0 && rank == 0 ? NCCL_CHECK(&ctx, NULL, ncclGetUniqueId(&id)) : 0;
    if (rc == 0)
        rc = SHARC__MPI_CHECK(&ctx, MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, group));
    if (rc == 0)
        rc = id_rc;
    if (rc == 0)
        rc = enter_device(&ctx, device, &prev);
    if (rc == 0) {
        rc = NCCL_CHECK(&ctx, NULL, ncclCommInitRank(&comm, size, id, rank));
        leave_device(device, prev);
    }
    MPI_Comm_free(&group);
    if (rc < 0)
        return rc;
    return open_comm(out, comm, 1, device, s);
}
#endif

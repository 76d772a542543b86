/*
 * The NCCL transport: ncclBroadcast on a stream the transport owns. Device buffers are
 * broadcast in place; a host buffer goes host -> pinned -> device staging -> NCCL and back
 * on the peers. Waits poll the stream and ncclCommGetAsyncError so a stuck collective
 * times out instead of blocking forever.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "sharc/cuda.h"
#include "bcast/cuda_mem.h"
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
    int host_in_group;  ///< a host buffer is staged in the open group (every rank)
    void *pending_host; ///< host buffer to fill from the staging after the group (peers)
    size_t pending_n;
} nccl_impl;

static int nccl_check(sharc__ctx *ctx, ncclComm_t comm, ncclResult_t r, const char *call)
{
    if (r == ncclSuccess)
        return 0;
    const char *detail = comm ? ncclGetLastError(comm) : NULL;
    return sharc__fail(ctx, SHARC_ERR_NCCL, "%s failed: %s%s%s", call, ncclGetErrorString(r),
                       detail && *detail ? ": " : "", detail ? detail : "");
}
#define NCCL_CHECK(ctx, comm, call) nccl_check((ctx), (comm), (call), #call)

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
            return SHARC__CUDA_CHECK(&t->ctx, q);
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
    cudaFreeHost(n->pinned);
    cudaFree(n->staged);
    n->pinned = NULL;
    n->staged = NULL;
    n->stage_cap = 0;
    int rc = SHARC__CUDA_CHECK(&t->ctx,
                               cudaHostAlloc((void **)&n->pinned, nbytes, cudaHostAllocDefault));
    if (rc == 0)
        rc = SHARC__CUDA_CHECK(&t->ctx, cudaMalloc((void **)&n->staged, nbytes));
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
    /* The staging buffers hold one host buffer until the group completes, on the source as
     * on the peers: every rank refuses a second one alike. */
    if (n->host_in_group)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "one host buffer per NCCL broadcast group at most");
    int rc = grow_staging(t, nbytes);
    if (rc == 0 && t->rank == root) {
        memcpy(n->pinned, buf, nbytes);
        rc = SHARC__CUDA_CHECK(&t->ctx, cudaMemcpyAsync(n->staged, n->pinned, nbytes,
                                                        cudaMemcpyHostToDevice, n->stream));
    }
    if (rc == 0)
        rc = NCCL_CHECK(
            &t->ctx, n->comm,
            ncclBroadcast(n->staged, n->staged, nbytes, ncclUint8, root, n->comm, n->stream));
    if (rc == 0 && n->in_group)
        n->host_in_group = 1;
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
        rc = SHARC__CUDA_CHECK(&t->ctx, cudaMemcpyAsync(n->pinned, n->staged, n->pending_n,
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
    n->host_in_group = 0;
    int rc = sharc__cuda_enter(&t->ctx, n->device, &prev);
    int end = NCCL_CHECK(&t->ctx, n->comm, ncclGroupEnd());
    if (rc == 0)
        rc = end;
    if (rc == 0)
        rc = complete(t);
    if (rc < 0) {
        /* The group's collectives may have run on some ranks only: the ranks are out of
         * step, and a staged host buffer is not to be filled later. */
        n->pending_host = NULL;
        n->pending_n = 0;
        sharc__transport_abort(t);
    }
    sharc__cuda_leave(n->device, prev);
    return rc;
}

static int nccl_bcast(sharc_transport *t, void *buf, size_t nbytes, int root, sharc_device device)
{
    nccl_impl *n = t->impl;
    int prev = -1;
    int rc = sharc__cuda_enter(&t->ctx, n->device, &prev);
    if (rc == 0)
        rc = issue(t, buf, nbytes, root, device);
    if (rc == 0 && !n->in_group)
        rc = complete(t);
    sharc__cuda_leave(n->device, prev);
    return rc;
}

static int nccl_allreduce_max(sharc_transport *t, uint32_t *value)
{
    nccl_impl *n = t->impl;
    int prev = -1;
    int rc = sharc__cuda_enter(&t->ctx, n->device, &prev);
    if (rc == 0 && !n->word_host)
        rc = SHARC__CUDA_CHECK(&t->ctx, cudaHostAlloc((void **)&n->word_host, sizeof *n->word_host,
                                                      cudaHostAllocDefault));
    if (rc == 0 && !n->word_dev)
        rc = SHARC__CUDA_CHECK(&t->ctx, cudaMalloc((void **)&n->word_dev, sizeof *n->word_dev));
    if (rc == 0) {
        *n->word_host = *value;
        rc = SHARC__CUDA_CHECK(&t->ctx, cudaMemcpyAsync(n->word_dev, n->word_host, sizeof *value,
                                                        cudaMemcpyHostToDevice, n->stream));
    }
    if (rc == 0)
        rc = NCCL_CHECK(
            &t->ctx, n->comm,
            ncclAllReduce(n->word_dev, n->word_dev, 1, ncclUint32, ncclMax, n->comm, n->stream));
    if (rc == 0)
        rc = SHARC__CUDA_CHECK(&t->ctx, cudaMemcpyAsync(n->word_host, n->word_dev, sizeof *value,
                                                        cudaMemcpyDeviceToHost, n->stream));
    if (rc == 0)
        rc = wait_stream(t);
    if (rc == 0)
        *value = *n->word_host;
    sharc__cuda_leave(n->device, prev);
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
    int entered = sharc__cuda_enter(&t->ctx, n->device, &prev) == 0;
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
        sharc__cuda_leave(n->device, prev);
    sharc__free(&t->ctx, n);
    t->impl = NULL;
}

static const sharc__transport_ops nccl_ops = {
    .name = "nccl",
    .device_in_place = 1,
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
    int rc = sharc__cuda_enter(&ctx, device, &prev);
    if (rc < 0)
        goto fail_comm;
    rc = NCCL_CHECK(&ctx, comm, ncclCommUserRank(comm, &rank));
    if (rc == 0)
        rc = NCCL_CHECK(&ctx, comm, ncclCommCount(comm, &size));
    /* The stream, the staging and received tensors live on `device`: the communicator's
     * kernels must run there too. */
    int comm_device = -1;
    if (rc == 0)
        rc = NCCL_CHECK(&ctx, comm, ncclCommCuDevice(comm, &comm_device));
    if (rc == 0 && comm_device != device)
        rc = sharc__fail(&ctx, SHARC_ERR(EINVAL),
                         "the NCCL communicator is on CUDA device %d, not on device %d given "
                         "for the transport",
                         comm_device, device);
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
    rc = SHARC__CUDA_CHECK(&t->ctx, cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    if (rc < 0)
        goto fail;
    /* Received tensors go to this rank's own device; their memory lives in a heap that
     * outlives the transport while batches hold it. */
    rc = sharc__transport_set_device(t, &sharc__cuda_device_ops, device);
    if (rc < 0)
        goto fail;
    sharc__cuda_leave(device, prev);
    *out = t;
    return 0;
fail_comm:
    if (owned && comm)
        ncclCommDestroy(comm);
fail:
    sharc_transport_close(&t);
    sharc__cuda_leave(device, prev);
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
    int rc = sharc__cuda_enter(&ctx, device, &prev);
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
    sharc__cuda_leave(device, prev);
    if (rc < 0)
        return rc;
    return open_comm(out, group, 1, device, s);
}

#if SHARC_HAVE_MPI
/* What group rank 0 sends every rank before the communicator is made: the NCCL unique id,
 * or why it has none. */
typedef struct boot_id {
    int32_t code; ///< 0, or the error of ncclGetUniqueId on rank 0
    char text[512];
    ncclUniqueId id;
} boot_id;

/*
 * Every rank of `group` says whether it failed (`failed`, with its reason in `text`); when
 * any did, every rank fails with `code` and the same text, naming the first rank that
 * failed, so that none goes on to ncclCommInitRank waiting for a rank that has left.
 */
static int agree(sharc__ctx *ctx, MPI_Comm group, int rank, int size, const sharc_mesh *mesh,
                 int failed, int code, const char *what, char *text, size_t cap)
{
    int mine = failed ? rank : size, first = size;
    int rc = SHARC__MPI_CHECK(ctx, MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, group));
    if (rc == 0 && first < size)
        rc = SHARC__MPI_CHECK(ctx, MPI_Bcast(text, (int)cap, MPI_CHAR, first, group));
    if (rc < 0 || first == size)
        return rc;
    text[cap - 1] = 0;
    return sharc__fail(ctx, code, "NCCL bootstrap: group rank %d (global rank %d) %s: %s", first,
                       sharc_mesh_group_member(mesh, first), what, text);
}

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
    boot_id boot;
    char why[512] = "";
    int rank = 0, size = 0, prev = -1;
    *out = NULL;
    memset(&boot, 0, sizeof boot);
    int rc = sharc__mpi_split_group(&ctx, parent, mesh, s ? s->timeout_ms : 600000, &group);
    if (rc < 0)
        return rc;
    /* Our own communicator: report errors instead of aborting the job. */
    MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
    rc = SHARC__MPI_CHECK(&ctx, MPI_Comm_rank(group, &rank));
    if (rc == 0)
        rc = SHARC__MPI_CHECK(&ctx, MPI_Comm_size(group, &size));
    /* Rank 0's failure to make the id travels with it: every rank must learn it and stop
     * here, since a rank that went on to ncclCommInitRank would wait for rank 0 forever. */
    if (rc == 0 && rank == 0 && NCCL_CHECK(&ctx, NULL, ncclGetUniqueId(&boot.id)) < 0) {
        boot.code = SHARC_ERR_NCCL;
        snprintf(boot.text, sizeof boot.text, "%.500s", ctx.error);
    }
    if (rc == 0)
        rc = SHARC__MPI_CHECK(&ctx, MPI_Bcast(&boot, (int)sizeof boot, MPI_BYTE, 0, group));
    if (rc == 0 && boot.code < 0)
        rc = sharc__fail(&ctx, SHARC_ERR_NCCL,
                         "NCCL bootstrap: group rank 0 (global rank %d) could not create the NCCL "
                         "unique id: %.511s",
                         sharc_mesh_group_member(mesh, 0), boot.text);
    /* Likewise a rank that cannot use its device fails every rank before the init. */
    int entered = 0;
    if (rc == 0) {
        entered = sharc__cuda_enter(&ctx, device, &prev) == 0;
        if (!entered)
            snprintf(why, sizeof why, "%.500s", ctx.error);
        char what[64];
        snprintf(what, sizeof what, "cannot use CUDA device %d", device);
        rc = agree(&ctx, group, rank, size, mesh, !entered, SHARC_ERR_CUDA, what, why, sizeof why);
    }
    if (rc == 0)
        rc = NCCL_CHECK(&ctx, NULL, ncclCommInitRank(&comm, size, boot.id, rank));
    if (entered)
        sharc__cuda_leave(device, prev);
    MPI_Comm_free(&group);
    if (rc < 0)
        return rc;
    return open_comm(out, comm, 1, device, s);
}
#endif

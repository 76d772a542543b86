/*
 * The MPI transport: MPI_Bcast of host memory on a communicator that spans one broadcast
 * group, either the caller's or one split from a parent by the mesh. Given a CUDA device
 * (sharc_transport_mpi_set_device), it also carries device tensors, staged through pinned
 * host memory: the source copies device -> pinned on a stream of its own, MPI_Bcast carries
 * the pinned bytes, and each peer copies pinned -> device into memory on its own device.
 * Large tensors go in chunks through two pinned halves, so that the copy of one chunk
 * overlaps the broadcast of the other and the pinned memory stays bounded.
 */
#include "bcast/transport_mpi.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "sharc/mpi.h"
#include "bcast/transport.h"
#if SHARC_HAVE_CUDA
#include "bcast/cuda_mem.h"
#endif

typedef struct mpi_impl {
    MPI_Comm comm;
    int owned; ///< split by us: freed on close
#if SHARC_HAVE_CUDA
    int device;          ///< CUDA device of the staging (-1: host memory only)
    cudaStream_t stream; ///< the staging copies
    uint8_t *pinned;     ///< two halves of half_cap bytes each (cudaHostAlloc)
    size_t half_cap;
#endif
} mpi_impl;

/* The most a pinned half holds: a device tensor larger than this travels in chunks. */
#define STAGE_CHUNK ((size_t)16 << 20)

int sharc__mpi_check(sharc__ctx *ctx, int mpi_rc, const char *call)
{
    if (mpi_rc == MPI_SUCCESS)
        return 0;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS)
        len = 0;
    text[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = 0;
    return sharc__fail(ctx, SHARC_ERR_MPI, "%s failed: %s (MPI error %d)", call,
                       len ? text : "unknown error", mpi_rc);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/*
 * Complete a non-blocking collective within `timeout_ms` (0: no limit). The first moments
 * are spent polling without pause, because a transfer in progress needs MPI_Test to move
 * its fragments along; a rank still waiting after that is waiting for another rank (a
 * source reading its next batch), and checks back every 50 us instead of spinning a core.
 * @return 0, SHARC_ERR_MPI, or SHARC_ERR_TIMEOUT (1) with the request left pending
 */
static int wait_within(sharc__ctx *ctx, MPI_Request *req, int timeout_ms, int *timed_out)
{
    double start = now_ms();
    *timed_out = 0;
    for (unsigned long spins = 0;; spins++) {
        int done = 0;
        int rc = SHARC__MPI_CHECK(ctx, MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (rc < 0 || done)
            return rc;
        if (spins % 64)
            continue;
        double waited = now_ms() - start;
        if (timeout_ms > 0 && waited > timeout_ms) {
            *timed_out = 1;
            return SHARC_ERR_TIMEOUT;
        }
        if (waited > 20) {
            struct timespec pause = {0, 50000};
            nanosleep(&pause, NULL);
        }
    }
}

/*
 * Every rank of `parent` describes its mesh and all compare: ranks started with different
 * meshes would otherwise split into groups that do not match and wait on each other. The
 * text is the same on every rank: the first rank whose mesh differs from rank 0's.
 */
static int check_same_mesh(sharc__ctx *ctx, MPI_Comm parent, const sharc_mesh *mesh, int rank,
                           int size, int timeout_ms)
{
    enum { TEXT = 192 };
    char *all = sharc__calloc(ctx, (size_t)size, TEXT);
    char mine[TEXT] = "";
    if (!all)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "out of memory comparing %d meshes", size);
    sharc_mesh_format(mesh, mine, sizeof mine);
    MPI_Request req = MPI_REQUEST_NULL;
    int timed_out = 0;
    int rc = SHARC__MPI_CHECK(
        ctx, MPI_Iallgather(mine, TEXT, MPI_CHAR, all, TEXT, MPI_CHAR, parent, &req));
    if (rc == 0)
        rc = wait_within(ctx, &req, timeout_ms, &timed_out);
    if (timed_out)
        rc = sharc__fail(ctx, SHARC_ERR_TIMEOUT,
                         "comparing meshes: rank %d of %d waited %d ms for the other ranks to "
                         "join the split",
                         rank, size, timeout_ms);
    for (int r = 1; rc == 0 && r < size; r++)
        if (strncmp(all, all + (size_t)r * TEXT, TEXT) != 0)
            rc = sharc__fail(ctx, SHARC_ERR_SETTINGS,
                             "the ranks were started with different meshes: rank 0 has %.*s but "
                             "rank %d has %.*s",
                             TEXT, all, r, TEXT, all + (size_t)r * TEXT);
    sharc__free(ctx, all);
    return rc;
}

/* Before a split: `mesh` is this rank's place in `parent`, and every rank has the same. */
static int check_parent(sharc__ctx *ctx, MPI_Comm parent, const sharc_mesh *mesh, int timeout_ms)
{
    int rank = 0, size = 0;
    int rc = SHARC__MPI_CHECK(ctx, MPI_Comm_rank(parent, &rank));
    if (rc == 0)
        rc = SHARC__MPI_CHECK(ctx, MPI_Comm_size(parent, &size));
    if (rc < 0)
        return rc;
    if (rank != mesh->rank || size != mesh->size)
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "mesh is for rank %d of %d but the communicator has rank %d of %d",
                           mesh->rank, mesh->size, rank, size);
    return check_same_mesh(ctx, parent, mesh, rank, size, timeout_ms);
}

int sharc__mpi_split_group(sharc__ctx *ctx, MPI_Comm parent, const sharc_mesh *mesh, int timeout_ms,
                           MPI_Comm *out)
{
    int group_rank = -1;
    *out = MPI_COMM_NULL;
    int rc = check_parent(ctx, parent, mesh, timeout_ms);
    if (rc < 0)
        return rc;
    /* A fresh split every time: groups are never looked up by mesh identity. */
    rc = SHARC__MPI_CHECK(
        ctx, MPI_Comm_split(parent, sharc_mesh_dp_rank(mesh), sharc_mesh_group_rank(mesh), out));
    if (rc < 0)
        return rc;
    rc = SHARC__MPI_CHECK(ctx, MPI_Comm_rank(*out, &group_rank));
    if (rc == 0 && group_rank != sharc_mesh_group_rank(mesh))
        rc = sharc__fail(ctx, SHARC_ERR_MPI, "split group rank %d differs from the mesh's %d",
                         group_rank, sharc_mesh_group_rank(mesh));
    if (rc < 0)
        MPI_Comm_free(out);
    return rc;
}

/* The tag of the probe after a timeout: nothing else goes point to point on the transport's
 * communicator. */
#define PROBE_TAG 0x5348

/* How long the probe waits for the other ranks: the last fifth of the timeout, 0.1 to 2 s.
 * The ranks of a group start their probes as far apart as they entered the collective (up
 * to a step: peers wait for the control block while the source reads), and a probe must
 * outlast that and the network's latency to hear from every rank still there. */
static int probe_window_ms(int timeout_ms)
{
    int w = timeout_ms / 5;
    return w < 100 ? 100 : w > 2000 ? 2000 : w;
}

/* Append "R (world rank W)", after "; " unless first, for group rank `r` to `out`. */
static void append_rank(MPI_Comm comm, int r, char *out, size_t cap)
{
    MPI_Group group, world;
    int w = MPI_UNDEFINED;
    if (MPI_Comm_group(comm, &group) == MPI_SUCCESS) {
        if (MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
            MPI_Group_translate_ranks(group, 1, &r, world, &w);
            MPI_Group_free(&world);
        }
        MPI_Group_free(&group);
    }
    size_t len = strlen(out);
    if (w != MPI_UNDEFINED && w != r)
        snprintf(out + len, cap - len, "%s%d (world rank %d)", len ? "; " : "", r, w);
    else
        snprintf(out + len, cap - len, "%s%d", len ? "; " : "", r);
}

/*
 * After a timeout, which ranks of the group are still there? Each rank that times out sends
 * one byte to every other rank and waits `window_ms` for theirs. A rank that can be reached
 * times out too, in the same collective within about a step, so its byte comes; one that
 * died, hangs or sits behind a cut link sends none. The silent ranks are listed in `out`
 * (empty: every rank answered). MPI failures here only leave a rank listed.
 */
static void name_silent_ranks(sharc_transport *t, int window_ms, char *out, size_t cap)
{
    static const uint8_t hello = 1;
    mpi_impl *m = t->impl;
    int n = t->size;
    out[0] = 0;
    MPI_Request *req = sharc__malloc(&t->ctx, (size_t)n * 2 * sizeof *req);
    uint8_t *got = sharc__malloc(&t->ctx, (size_t)n * 2);
    if (req == NULL || got == NULL) {
        snprintf(out, cap, "?");
        goto done;
    }
    for (int r = 0; r < n; r++) {
        req[r] = req[n + r] = MPI_REQUEST_NULL;
        got[n + r] = r == t->rank; /* done: got[n + r] */
        if (r == t->rank)
            continue;
        if (MPI_Irecv(&got[r], 1, MPI_BYTE, r, PROBE_TAG, m->comm, &req[r]) != MPI_SUCCESS)
            req[r] = MPI_REQUEST_NULL;
        if (MPI_Isend(&hello, 1, MPI_BYTE, r, PROBE_TAG, m->comm, &req[n + r]) == MPI_SUCCESS)
            MPI_Request_free(&req[n + r]); /* a static byte: it may go whenever it can */
    }
    double start = now_ms();
    for (int waiting = 1; waiting && now_ms() - start < window_ms;) {
        waiting = 0;
        for (int r = 0; r < n; r++) {
            int done = 0;
            if (!got[n + r] && req[r] != MPI_REQUEST_NULL &&
                MPI_Test(&req[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
                got[n + r] = 1;
            waiting |= !got[n + r];
        }
        struct timespec pause = {0, 50000};
        nanosleep(&pause, NULL);
    }
    for (int r = 0; r < n; r++) {
        if (got[n + r])
            continue;
        if (req[r] != MPI_REQUEST_NULL) { /* the receive buffer is freed below */
            MPI_Cancel(&req[r]);
            MPI_Wait(&req[r], MPI_STATUS_IGNORE);
        }
        append_rank(m->comm, r, out, cap);
    }
done:
    sharc__free(&t->ctx, req);
    sharc__free(&t->ctx, got);
}

/*
 * Complete a collective within the transport's timeout, the probe included: the request
 * has the timeout less the probe's window, then the ranks are probed for the rest, so that
 * a rank gives up `timeout_ms` after it entered the collective, as every other wait does.
 * A collective that completed while the ranks were probed is not a failure (the byte sent
 * to the others then waits unread, and can only make one of them count this rank as
 * answering a later probe).
 */
static int wait_request(sharc_transport *t, MPI_Request *req, const char *what, size_t nbytes)
{
    int timed_out = 0;
    int window_ms = 0, wait_ms = t->timeout_ms;
    if (t->timeout_ms > 0) {
        window_ms = probe_window_ms(t->timeout_ms);
        wait_ms = t->timeout_ms - window_ms;
        if (wait_ms < t->timeout_ms / 2) { /* a timeout under 200 ms: half and half */
            wait_ms = t->timeout_ms - t->timeout_ms / 2;
            window_ms = t->timeout_ms / 2;
        }
    }
    int rc = wait_within(&t->ctx, req, wait_ms, &timed_out);
    if (!timed_out)
        return rc;
    char silent[256];
    name_silent_ranks(t, window_ms, silent, sizeof silent);
    int done = 0;
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
        return 0;
    sharc__transport_abort(t);
    if (silent[0] == 0)
        return sharc__fail(&t->ctx, SHARC_ERR_TIMEOUT,
                           "%s of %zu bytes did not complete within %d ms on rank %d of a "
                           "broadcast group of %d, though every other rank answered a probe "
                           "after it: another rank of the group stopped, died or is stuck in "
                           "another call; the transport is aborted",
                           what, nbytes, t->timeout_ms, t->rank, t->size);
    return sharc__fail(&t->ctx, SHARC_ERR_TIMEOUT,
                       "%s of %zu bytes did not complete within %d ms on rank %d of a "
                       "broadcast group of %d: another rank of the group stopped, died or is "
                       "stuck, or cannot be reached: no answer to a probe within %d ms from "
                       "%s %s; the transport is aborted",
                       what, nbytes, t->timeout_ms, t->rank, t->size, window_ms,
                       strchr(silent, ';') ? "ranks" : "rank", silent);
}

static int bcast_host(sharc_transport *t, void *buf, size_t nbytes, int root)
{
    mpi_impl *m = t->impl;
    /* MPI counts are int: send large buffers in chunks of 1 GiB. */
    for (size_t done = 0; done < nbytes;) {
        size_t n = nbytes - done < ((size_t)1 << 30) ? nbytes - done : ((size_t)1 << 30);
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = SHARC__MPI_CHECK(
            &t->ctx, MPI_Ibcast((char *)buf + done, (int)n, MPI_BYTE, root, m->comm, &req));
        if (rc == 0)
            rc = wait_request(t, &req, "MPI_Ibcast", n);
        if (rc < 0)
            return rc;
        done += n;
    }
    return 0;
}

#if SHARC_HAVE_CUDA
/* Grow the pinned staging to two halves of at least `half` bytes (never shrinks). */
static int grow_pinned(sharc_transport *t, size_t half)
{
    mpi_impl *m = t->impl;
    if (half <= m->half_cap)
        return 0;
    if (m->pinned)
        SHARC__CUDA_CHECK(&t->ctx, cudaFreeHost(m->pinned));
    m->pinned = NULL;
    m->half_cap = 0;
    int rc = SHARC__CUDA_CHECK(&t->ctx,
                               cudaHostAlloc((void **)&m->pinned, 2 * half, cudaHostAllocDefault));
    if (rc == 0)
        m->half_cap = half;
    else
        m->pinned = NULL;
    return rc;
}

static int sync_stream(sharc_transport *t)
{
    mpi_impl *m = t->impl;
    return SHARC__CUDA_CHECK(&t->ctx, cudaStreamSynchronize(m->stream));
}

/*
 * A device buffer through the pinned halves, chunk k in half k % 2. The source stages
 * chunk k+1 while chunk k is broadcast; a peer copies chunk k to its device while chunk
 * k+1 arrives in the other half. Each half is reused only after the stream has finished
 * with it (the synchronisation after every chunk's broadcast). The chunks depend on
 * `nbytes` alone, so every rank issues the same broadcasts.
 */
static int stage_chunks(sharc_transport *t, uint8_t *buf, size_t nbytes, int root)
{
    mpi_impl *m = t->impl;
    int source = t->rank == root;
    size_t chunk = nbytes < STAGE_CHUNK ? nbytes : STAGE_CHUNK;
    size_t n_chunks = (nbytes + chunk - 1) / chunk;
    int rc = 0;
#define CHUNK_LEN(k) ((k) + 1 < n_chunks ? chunk : nbytes - (k)*chunk)
#define HALF(k)      (m->pinned + ((k) % 2) * m->half_cap)
    if (source) {
        rc = SHARC__CUDA_CHECK(&t->ctx, cudaMemcpyAsync(HALF(0), buf, CHUNK_LEN(0),
                                                        cudaMemcpyDeviceToHost, m->stream));
        if (rc == 0)
            rc = sync_stream(t);
    }
    for (size_t k = 0; rc == 0 && k < n_chunks; k++) {
        size_t n = CHUNK_LEN(k);
        MPI_Request req = MPI_REQUEST_NULL;
        rc = SHARC__MPI_CHECK(&t->ctx, MPI_Ibcast(HALF(k), (int)n, MPI_BYTE, root, m->comm, &req));
        if (rc < 0)
            break;
        int copy_rc = 0;
        if (source && k + 1 < n_chunks)
            copy_rc = SHARC__CUDA_CHECK(
                &t->ctx, cudaMemcpyAsync(HALF(k + 1), buf + (k + 1) * chunk, CHUNK_LEN(k + 1),
                                         cudaMemcpyDeviceToHost, m->stream));
        /* Waited for even when the copy failed: MPI still reads the half. */
        rc = wait_request(t, &req, "MPI_Ibcast", n);
        if (rc == 0)
            rc = copy_rc;
        if (rc == 0)
            rc = sync_stream(t); /* source: the next chunk is staged; peer: the last is in */
        if (rc == 0 && !source)
            rc = SHARC__CUDA_CHECK(&t->ctx, cudaMemcpyAsync(buf + k * chunk, HALF(k), n,
                                                            cudaMemcpyHostToDevice, m->stream));
    }
#undef HALF
#undef CHUNK_LEN
    if (rc == 0 && !source)
        rc = sync_stream(t);
    return rc;
}

static int bcast_device(sharc_transport *t, void *buf, size_t nbytes, int root)
{
    mpi_impl *m = t->impl;
    int prev = -1;
    int rc = sharc__cuda_enter(&t->ctx, m->device, &prev);
    if (rc == 0) {
        rc = grow_pinned(t, nbytes < STAGE_CHUNK ? nbytes : STAGE_CHUNK);
        if (rc == 0)
            rc = stage_chunks(t, buf, nbytes, root);
        sharc__cuda_leave(m->device, prev);
    }
    /* A rank that failed here has left the chunks' collectives that the others are in: the
     * transport is unusable, and the others time out on their bounded waits. */
    if (rc < 0 && rc != SHARC_ERR_TIMEOUT)
        sharc__transport_abort(t);
    return rc;
}
#endif

static int mpi_bcast(sharc_transport *t, void *buf, size_t nbytes, int root, sharc_device device)
{
#if SHARC_HAVE_CUDA
    if (device == SHARC_DEVICE_CUDA)
        return bcast_device(t, buf, nbytes, root);
#else
    (void)device;
#endif
    return bcast_host(t, buf, nbytes, root);
}

static int mpi_allreduce_max(sharc_transport *t, uint32_t *value)
{
    mpi_impl *m = t->impl;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = SHARC__MPI_CHECK(
        &t->ctx, MPI_Iallreduce(MPI_IN_PLACE, value, 1, MPI_UINT32_T, MPI_MAX, m->comm, &req));
    return rc < 0 ? rc : wait_request(t, &req, "MPI_Iallreduce", sizeof *value);
}

static void mpi_close(sharc_transport *t)
{
    mpi_impl *m = t->impl;
    if (!m)
        return;
#if SHARC_HAVE_CUDA
    /* The staging is the transport's own; device memory of received batches is the heap's. */
    int prev = -1;
    if (m->device >= 0 && sharc__cuda_enter(&t->ctx, m->device, &prev) == 0) {
        if (m->stream) {
            cudaStreamSynchronize(m->stream);
            cudaStreamDestroy(m->stream);
        }
        /* After a timeout a broadcast into the staging may still be pending in MPI, which
         * could write it later: a broken transport leaves it allocated. */
        if (m->pinned && !t->broken)
            cudaFreeHost(m->pinned);
        sharc__cuda_leave(m->device, prev);
    }
#endif
    if (m->owned && m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    sharc__free(&t->ctx, m);
    t->impl = NULL;
}

/*
 * No abort op: MPI has no way to cancel a collective or to revoke a communicator short of
 * ending the processes (MPI_Abort), which a library must not do. sharc__transport_abort
 * marks the transport broken; the pending request is left to MPI_Finalize or to the
 * program's exit, and every other rank times out on its own bounded wait.
 */
static const sharc__transport_ops mpi_ops = {
    .name = "mpi",
    .bcast = mpi_bcast,
    .allreduce_max = mpi_allreduce_max,
    .close = mpi_close,
};

static int open_comm(sharc_transport **out, MPI_Comm comm, int owned,
                     const sharc_transport_settings *s)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, s ? &s->allocator : NULL, s ? &s->logger : NULL);
    int rank = 0, size = 0;
    sharc_transport *t = NULL;
    int rc = SHARC__MPI_CHECK(&ctx, MPI_Comm_rank(comm, &rank));
    if (rc == 0)
        rc = SHARC__MPI_CHECK(&ctx, MPI_Comm_size(comm, &size));
    if (rc == 0)
        rc = sharc__transport_new(&t, &mpi_ops, s, rank, size);
    if (rc < 0)
        goto fail;
    mpi_impl *m = sharc__calloc(&t->ctx, 1, sizeof *m);
    if (!m) {
        rc = SHARC_ERR(ENOMEM);
        goto fail;
    }
    m->comm = comm;
    m->owned = owned;
#if SHARC_HAVE_CUDA
    m->device = -1;
#endif
    t->impl = m;
    *out = t;
    return 0;
fail:
    sharc_transport_close(&t);
    if (owned)
        MPI_Comm_free(&comm);
    return rc;
}

int sharc_transport_mpi_open(sharc_transport **out, MPI_Comm comm,
                             const sharc_transport_settings *s)
{
    int settings_rc = sharc__transport_check_settings(s);
    if (settings_rc < 0) {
        *out = NULL;
        return settings_rc;
    }
    *out = NULL;
    return open_comm(out, comm, 0, s);
}

/* The sources of all data-parallel slots, ranked by slot (MPI_COMM_NULL on the others). */
static int split_sources(sharc__ctx *ctx, MPI_Comm parent, const sharc_mesh *mesh, int timeout_ms,
                         MPI_Comm *out)
{
    *out = MPI_COMM_NULL;
    int rc = check_parent(ctx, parent, mesh, timeout_ms);
    if (rc == 0)
        rc = SHARC__MPI_CHECK(ctx,
                              MPI_Comm_split(parent, sharc_mesh_is_source(mesh) ? 0 : MPI_UNDEFINED,
                                             sharc_mesh_dp_rank(mesh), out));
    return rc;
}

/* A transport over this rank's part of `parent`, split by `split` (none where it has none). */
static int open_split(sharc_transport **out, MPI_Comm parent, const sharc_mesh *mesh,
                      const sharc_transport_settings *s,
                      int (*split)(sharc__ctx *, MPI_Comm, const sharc_mesh *, int, MPI_Comm *))
{
    *out = NULL;
    int rc = sharc__transport_check_settings(s);
    if (rc < 0)
        return rc;
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, s ? &s->allocator : NULL, s ? &s->logger : NULL);
    MPI_Comm comm = MPI_COMM_NULL;
    rc = split(&ctx, parent, mesh, s ? s->timeout_ms : 600000, &comm);
    if (rc < 0 || comm == MPI_COMM_NULL)
        return rc;
    /* Our own communicator: report errors instead of aborting the job. */
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    return open_comm(out, comm, 1, s);
}

int sharc_transport_mpi_split(sharc_transport **out, MPI_Comm parent, const sharc_mesh *mesh,
                              const sharc_transport_settings *s)
{
    return open_split(out, parent, mesh, s, sharc__mpi_split_group);
}

int sharc_transport_mpi_split_dp(sharc_transport **out, MPI_Comm parent, const sharc_mesh *mesh,
                                 const sharc_transport_settings *s)
{
    return open_split(out, parent, mesh, s, split_sources);
}

int sharc_transport_mpi_comm(const sharc_transport *t, MPI_Comm *comm)
{
    if (!t || !comm || t->ops != &mpi_ops)
        return SHARC_ERR(EINVAL);
    *comm = ((const mpi_impl *)t->impl)->comm;
    return 0;
}

int sharc_transport_mpi_set_device(sharc_transport *t, int device)
{
    if (!t)
        return SHARC_ERR(EINVAL);
    if (t->ops != &mpi_ops)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "sharc_transport_mpi_set_device: the transport is %s, not mpi",
                           t->ops->name);
#if SHARC_HAVE_CUDA
    mpi_impl *m = t->impl;
    if (m->device >= 0)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "sharc_transport_mpi_set_device: the transport already stages "
                           "through CUDA device %d",
                           m->device);
    if (device < 0)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "sharc_transport_mpi_set_device: no CUDA device %d", device);
    int prev = -1;
    int rc = sharc__cuda_enter(&t->ctx, device, &prev);
    if (rc < 0)
        return rc;
    rc = SHARC__CUDA_CHECK(&t->ctx, cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    sharc__cuda_leave(device, prev);
    if (rc == 0)
        rc = sharc__transport_set_device(t, &sharc__cuda_device_ops, device);
    if (rc < 0) {
        if (m->stream)
            cudaStreamDestroy(m->stream);
        m->stream = NULL;
        return rc;
    }
    m->device = device;
    return 0;
#else
    (void)device;
    return sharc__fail(&t->ctx, SHARC_ERR_UNSUPPORTED,
                       "sharc was built without CUDA: the mpi transport carries host memory "
                       "only");
#endif
}

#if !SHARC_HAVE_NCCL
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
    (void)parent;
    (void)mesh;
    (void)device;
    *out = NULL;
    sharc__ctx_init(&ctx, s ? &s->allocator : NULL, s ? &s->logger : NULL);
    return sharc__fail(&ctx, SHARC_ERR_UNSUPPORTED, "sharc was built without NCCL");
}
#endif

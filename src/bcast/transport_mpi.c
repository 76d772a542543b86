/*
 * The MPI transport: MPI_Bcast of host memory on a communicator that spans one broadcast
 * group, either the caller's or one split from a parent by the mesh.
 */
#include "bcast/transport_mpi.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "sharc/mpi.h"
#include "bcast/transport.h"

typedef struct mpi_impl {
    MPI_Comm comm;
    int owned; ///< split by us: freed on close
} mpi_impl;

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

int sharc__mpi_split_group(sharc__ctx *ctx, MPI_Comm parent, const sharc_mesh *mesh, int timeout_ms,
                           MPI_Comm *out)
{
    int rank = 0, size = 0, group_rank = -1;
    *out = MPI_COMM_NULL;
    int rc = SHARC__MPI_CHECK(ctx, MPI_Comm_rank(parent, &rank));
    if (rc == 0)
        rc = SHARC__MPI_CHECK(ctx, MPI_Comm_size(parent, &size));
    if (rc < 0)
        return rc;
    if (rank != mesh->rank || size != mesh->size)
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "mesh is for rank %d of %d but the communicator has rank %d of %d",
                           mesh->rank, mesh->size, rank, size);
    rc = check_same_mesh(ctx, parent, mesh, rank, size, timeout_ms);
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

static int wait_request(sharc_transport *t, MPI_Request *req, const char *what, size_t nbytes)
{
    int timed_out = 0;
    int rc = wait_within(&t->ctx, req, t->timeout_ms, &timed_out);
    if (!timed_out)
        return rc;
    sharc__transport_abort(t);
    return sharc__fail(&t->ctx, SHARC_ERR_TIMEOUT,
                       "%s of %zu bytes did not complete within %d ms on rank %d of a "
                       "broadcast group of %d: another rank of the group stopped, died or is "
                       "stuck; the transport is aborted",
                       what, nbytes, t->timeout_ms, t->rank, t->size);
}

static int mpi_bcast(sharc_transport *t, void *buf, size_t nbytes, int root, sharc_device device)
{
    mpi_impl *m = t->impl;
    (void)device;
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

int sharc_transport_mpi_split(sharc_transport **out, MPI_Comm parent, const sharc_mesh *mesh,
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
    *out = NULL;
    int rc = sharc__mpi_split_group(&ctx, parent, mesh, s ? s->timeout_ms : 600000, &group);
    if (rc < 0)
        return rc;
    /* Our own communicator: report errors instead of aborting the job. */
    MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
    return open_comm(out, group, 1, s);
}

int sharc_transport_mpi_comm(const sharc_transport *t, MPI_Comm *comm)
{
    if (!t || !comm || t->ops != &mpi_ops)
        return SHARC_ERR(EINVAL);
    *comm = ((const mpi_impl *)t->impl)->comm;
    return 0;
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

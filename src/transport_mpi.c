/*
 * The MPI transport: MPI_Bcast of host memory on a communicator that spans one broadcast
 * group, either the caller's or one split from a parent by the mesh.
 */
#include "transport_mpi.h"

#include <errno.h>
#include <limits.h>

#include "config.h"
#include "sharc/mpi.h"
#include "transport.h"

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

int sharc__mpi_split_group(sharc__ctx *ctx, MPI_Comm parent, const sharc_mesh *mesh, MPI_Comm *out)
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

static int mpi_bcast(sharc_transport *t, void *buf, size_t nbytes, int root, sharc_device device)
{
    mpi_impl *m = t->impl;
    (void)device;
    /* MPI counts are int: send large buffers in chunks of 1 GiB. */
    for (size_t done = 0; done < nbytes;) {
        size_t n = nbytes - done < ((size_t)1 << 30) ? nbytes - done : ((size_t)1 << 30);
        int rc = SHARC__MPI_CHECK(&t->ctx,
                                  MPI_Bcast((char *)buf + done, (int)n, MPI_BYTE, root, m->comm));
        if (rc < 0)
            return rc;
        done += n;
    }
    return 0;
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

static const sharc__transport_ops mpi_ops = {
    .name = "mpi",
    .bcast = mpi_bcast,
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
    *out = NULL;
    return open_comm(out, comm, 0, s);
}

int sharc_transport_mpi_split(sharc_transport **out, MPI_Comm parent, const sharc_mesh *mesh,
                              const sharc_transport_settings *s)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, s ? &s->allocator : NULL, s ? &s->logger : NULL);
    MPI_Comm group = MPI_COMM_NULL;
    *out = NULL;
    int rc = sharc__mpi_split_group(&ctx, parent, mesh, &group);
    if (rc < 0)
        return rc;
    /* Our own communicator: report errors instead of aborting the job. */
    MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
    return open_comm(out, group, 1, s);
}

#if !SHARC_HAVE_NCCL
int sharc_transport_nccl_bootstrap_mpi(sharc_transport **out, MPI_Comm parent,
                                       const sharc_mesh *mesh, int device,
                                       const sharc_transport_settings *s)
{
    sharc__ctx ctx;
    (void)parent;
    (void)mesh;
    (void)device;
    *out = NULL;
    sharc__ctx_init(&ctx, s ? &s->allocator : NULL, s ? &s->logger : NULL);
    return sharc__fail(&ctx, SHARC_ERR_UNSUPPORTED, "sharc was built without NCCL");
}
#endif

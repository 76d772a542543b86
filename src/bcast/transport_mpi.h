/*
 * MPI helpers shared by the MPI transport and the NCCL bootstrap.
 */
#ifndef SHARC_SRC_TRANSPORT_MPI_H
#define SHARC_SRC_TRANSPORT_MPI_H

#include <mpi.h>

#include "base/ctx.h"
#include "sharc/mesh.h"

/** Map an MPI return code to SHARC_ERR_MPI with MPI's own text, naming the call. */
int sharc__mpi_check(sharc__ctx *ctx, int mpi_rc, const char *call);
#define SHARC__MPI_CHECK(ctx, call) sharc__mpi_check((ctx), (call), #call)

/**
 * Split this rank's broadcast group from `parent` by `mesh` (color = data-parallel slot,
 * key = group rank) and check that the new communicator's rank is the mesh's group rank.
 * Every rank's mesh is compared first: a difference fails every rank with
 * SHARC_ERR_SETTINGS naming both meshes; a rank that does not join within `timeout_ms`
 * (0: no limit) gives SHARC_ERR_TIMEOUT. Collective over `parent`. The caller frees *out
 * with MPI_Comm_free.
 */
int sharc__mpi_split_group(sharc__ctx *ctx, MPI_Comm parent, const sharc_mesh *mesh, int timeout_ms,
                           MPI_Comm *out);

#endif /* SHARC_SRC_TRANSPORT_MPI_H */

/*
 * sharc: MPI constructors for transports. The only public header with MPI types; installed
 * when sharc is built with MPI.
 */
#ifndef SHARC_MPI_H
#define SHARC_MPI_H

#include <mpi.h>

#include "sharc/mesh.h"
#include "sharc/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A transport over the caller's communicator `comm`, which must span exactly one broadcast
 * group (rank 0 of `comm` is the source). The caller keeps `comm` and frees it after
 * sharc_transport_close(). Host memory only. MPI errors on `comm` follow the error handler
 * the caller set on it (MPI's default aborts the job); split communicators return errors.
 * @param s settings, or NULL for the defaults
 * @return 0, SHARC_ERR_MPI (text in the log), SHARC_ERR(ENOMEM)
 */
SHARC_API int sharc_transport_mpi_open(sharc_transport **out, MPI_Comm comm,
                                       const sharc_transport_settings *s);

/**
 * A transport over this rank's broadcast group, split from `parent` by `mesh`:
 * MPI_Comm_split(parent, color = data-parallel slot, key = group rank). Collective over
 * `parent`. The split communicator is owned by the transport and freed by
 * sharc_transport_close() (collective over the group). Each call splits afresh: two meshes
 * never share a group by accident.
 * Every rank's mesh is compared first (sharc_mesh_format), so ranks started with
 * different meshes all fail here instead of splitting into groups that wait on each other.
 * @param mesh this rank's mesh; its rank and size must equal parent's
 * @return 0, SHARC_ERR(EINVAL) when the mesh does not match `parent` (the text is logged),
 *         SHARC_ERR_SETTINGS on every rank when the ranks' meshes differ (logged: "the ranks
 *         were started with different meshes: rank 0 has ... but rank R has ..."),
 *         SHARC_ERR_TIMEOUT when a rank of `parent` does not join within the settings'
 *         timeout_ms, SHARC_ERR_MPI, SHARC_ERR(ENOMEM)
 */
SHARC_API int sharc_transport_mpi_split(sharc_transport **out, MPI_Comm parent,
                                        const sharc_mesh *mesh, const sharc_transport_settings *s);

/**
 * A transport over the sources of all data-parallel slots, split from `parent` by `mesh`:
 * MPI_Comm_split(parent, color = source or not, key = data-parallel slot), so that its rank
 * is the slot. It is what sharc_loader_settings.dp_transport takes for even steps. Collective
 * over `parent` (every rank calls it); every rank's mesh is compared first, as in
 * sharc_transport_mpi_split(). On a rank that is not its group's source, *out is NULL and 0
 * is returned. The communicator is owned by the transport.
 * @return 0, or the errors of sharc_transport_mpi_split()
 */
SHARC_API int sharc_transport_mpi_split_dp(sharc_transport **out, MPI_Comm parent,
                                           const sharc_mesh *mesh,
                                           const sharc_transport_settings *s);

/**
 * Let an MPI transport carry device tensors (SHARC_DEVICE_CUDA), staged through pinned host
 * memory: the source copies each device tensor to pinned memory on a CUDA stream the
 * transport owns, MPI_Bcast carries it, and every peer copies it into device memory on
 * `device`, this rank's own CUDA device (never the source's ordinal from the frame), from a
 * pool reused across steps. Several processes may share one GPU this way, which NCCL
 * refuses. The pinned staging grows to at most 32 MiB (two 16 MiB halves: a larger tensor
 * travels in chunks, copies overlapping the broadcast). Call it on every rank of the group
 * before a loader opens on the transport; without it, a device batch on the source is an
 * error sent to the peers ("... the mpi transport cannot carry device tensors ..."). Device
 * memory of received batches stays valid, and is freed safely, after
 * sharc_transport_close(). The caller's current device is unchanged.
 * @return 0; SHARC_ERR_UNSUPPORTED when sharc was built without CUDA; SHARC_ERR(EINVAL) for
 *         a transport that is not MPI, a negative device, or a second call; SHARC_ERR_CUDA
 *         (the device cannot be used); SHARC_ERR(ENOMEM). Text in
 *         sharc_transport_last_error().
 */
SHARC_API int sharc_transport_mpi_set_device(sharc_transport *t, int device);

/**
 * The communicator of an MPI transport (borrowed: valid until sharc_transport_close), for
 * a program's own collectives over the same group.
 * @return 0, or SHARC_ERR(EINVAL) when `t` is not an MPI transport
 */
SHARC_API int sharc_transport_mpi_comm(const sharc_transport *t, MPI_Comm *comm);

/**
 * An NCCL transport for this rank's broadcast group, bootstrapped over MPI: the group is
 * split from `parent` by `mesh`, its rank 0 creates an NCCL unique id, MPI_Bcast shares it,
 * and every rank creates the communicator on CUDA device `device`. The transport owns the
 * NCCL communicator. Collective over `parent`. The caller's current device is unchanged.
 * A failure of one rank before the communicator is made fails every rank of the group
 * with the same code and text, naming that rank ("NCCL bootstrap: group rank 0 (global
 * rank R) could not create the NCCL unique id: ...", "NCCL bootstrap: group rank G (global
 * rank R) cannot use CUDA device D: ..."), so no rank waits in ncclCommInitRank for one
 * that has left.
 * @return 0, SHARC_ERR_UNSUPPORTED when sharc was built without NCCL, SHARC_ERR(EINVAL),
 *         SHARC_ERR_MPI, SHARC_ERR_NCCL, SHARC_ERR_CUDA
 */
SHARC_API int sharc_transport_nccl_bootstrap_mpi(sharc_transport **out, MPI_Comm parent,
                                                 const sharc_mesh *mesh, int device,
                                                 const sharc_transport_settings *s);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_MPI_H */

/*
 * sharc: NCCL constructors for transports. The only public header with CUDA or NCCL
 * types; installed when sharc is built with CUDA. (The MPI bootstrap of an NCCL
 * communicator is sharc_transport_nccl_bootstrap_mpi() in sharc/mpi.h.)
 *
 * The NCCL transport broadcasts device tensors in place and stages host memory through one
 * pinned buffer, on a CUDA stream it owns. A peer receives device tensors into pooled
 * memory on the transport's `device` (its own, never the source's ordinal), and may release
 * them after sharc_transport_close() (see there). Every call leaves the caller's current
 * device as it found it. A broadcast that has not finished after the settings' timeout_ms (or
 * that NCCL reports failed through ncclCommGetAsyncError) aborts the communicator with
 * ncclCommAbort and returns SHARC_ERR_TIMEOUT or SHARC_ERR_NCCL; the transport is unusable
 * afterwards. An aborted communicator the caller passed in must not be destroyed again.
 */
#ifndef SHARC_CUDA_H
#define SHARC_CUDA_H

#include <cuda_runtime.h>
/* nccl.h declares `f()` functions; keep -Wstrict-prototypes builds of our users quiet. */
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <nccl.h>
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif

#include "sharc/mesh.h"
#include "sharc/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A transport over the caller's NCCL communicator `comm`, which spans exactly one broadcast
 * group (its rank 0 is the source) and lives on CUDA device `device`. The caller keeps
 * `comm` and destroys it after sharc_transport_close().
 * @return 0, SHARC_ERR_NCCL, SHARC_ERR_CUDA, SHARC_ERR(ENOMEM)
 */
SHARC_API int sharc_transport_nccl_open(sharc_transport **out, ncclComm_t comm, int device,
                                        const sharc_transport_settings *s);

/**
 * A transport over this rank's broadcast group, split from `parent` (spanning the whole
 * mesh, parent rank == mesh rank) with ncclCommSplit(color = data-parallel slot, key =
 * group rank). Collective over `parent`. The transport owns the new communicator.
 * @return 0, SHARC_ERR(EINVAL) when the mesh does not match `parent`, SHARC_ERR_NCCL,
 *         SHARC_ERR_CUDA, SHARC_ERR(ENOMEM)
 */
SHARC_API int sharc_transport_nccl_split(sharc_transport **out, ncclComm_t parent, int device,
                                         const sharc_mesh *mesh, const sharc_transport_settings *s);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_CUDA_H */

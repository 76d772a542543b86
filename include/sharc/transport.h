/*
 * sharc: transports carry each step's frame from a broadcast group's source to its peers.
 *
 * A transport spans exactly one broadcast group; its rank 0 is the group's source. The
 * constructors live with their dependency: sharc_transport_self_open() here,
 * sharc_transport_mpi_open()/_split() in sharc/mpi.h, sharc_transport_nccl_open()/_split()
 * in sharc/cuda.h.
 */
#ifndef SHARC_TRANSPORT_H
#define SHARC_TRANSPORT_H

#include "sharc/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque transport handle. Used by one thread at a time. */
typedef struct sharc_transport sharc_transport;

/** Settings common to every transport. */
typedef struct sharc_transport_settings {
    /** sizeof(sharc_transport_settings), set by sharc_transport_default_settings() (the rule
     *  is in sharc/common.h) */
    uint32_t struct_size;
    sharc_allocator allocator; ///< host allocations (default: sharc_default_allocator)
    sharc_logger logger;       ///< log sink (default: sharc_default_logger)
    /**
     * Every collective (MPI and NCCL) that has not completed after this many milliseconds
     * fails with SHARC_ERR_TIMEOUT and leaves the transport aborted (NCCL: the communicator
     * is aborted; MPI, which cannot cancel a collective without ending processes: every
     * later call fails, and the program should exit). 0 waits forever (default 600000).
     */
    int timeout_ms;
    uint8_t reserved[60]; ///< room for later fields; must be zero
} sharc_transport_settings;

/** Fill `s` with the defaults documented on each field. */
SHARC_API void sharc_transport_default_settings(sharc_transport_settings *s);

/**
 * A group of one rank: broadcasts are no-ops. Used when the broadcast axes of the mesh
 * have size 1, and by tests.
 * @param out receives the transport; close it with sharc_transport_close()
 * @param s   settings, or NULL for the defaults
 * @return 0, SHARC_ERR(EINVAL) for settings not filled by sharc_transport_default_settings()
 *         (struct_size) or with reserved bytes set, or SHARC_ERR(ENOMEM)
 */
SHARC_API int sharc_transport_self_open(sharc_transport **out, const sharc_transport_settings *s);

/**
 * Close a transport and free what it owns (a communicator it split or created; never one
 * the caller passed in; its stream and pinned staging). NULL-safe; sets *t = NULL.
 * Collective for transports that own a communicator: every rank of the group must call it.
 * Batches with device tensors from the transport's device memory (received ones, or ones a
 * produce callback made) may be released after this call, from any thread: that memory
 * belongs to a reference-counted heap that outlives the transport and is freed with the
 * last such batch.
 */
SHARC_API void sharc_transport_close(sharc_transport **t);

/** This rank's index in the group (0 is the source). */
SHARC_API int sharc_transport_rank(const sharc_transport *t);

/** Number of ranks in the group. */
SHARC_API int sharc_transport_size(const sharc_transport *t);

/** "self", "mpi" or "nccl". */
SHARC_API const char *sharc_transport_name(const sharc_transport *t);

/** Text of the transport's last error ("" when none). */
SHARC_API const char *sharc_transport_last_error(const sharc_transport *t);

/**
 * 1 once a failure has aborted the transport (a collective that did not complete within
 * timeout_ms, a rank lost): every later call fails at once, and an MPI program should end
 * without MPI_Finalize, which would wait for the collective left pending on a rank that
 * never answers. 0 otherwise, and for NULL.
 */
SHARC_API int sharc_transport_aborted(const sharc_transport *t);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_TRANSPORT_H */

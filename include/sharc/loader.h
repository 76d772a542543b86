/*
 * sharc: the loader. One call on every rank of a training job, sharc_loader_next(), that
 * reads on the source rank of each broadcast group and receives on its peers, so that every
 * rank of a group gets the same batch, the same end and the same error at the same step.
 *
 * On the source rank (coordinate 0 on every broadcast axis of the mesh) the loader owns a
 * sharc_reader and sends each of its batches as one framed message over the transport; on
 * the other ranks it receives them into a pool of reusable buffers. Peers never open a
 * file: of their reader settings only the logger, the allocator, max_held_batches and the
 * settings compared in the first step's handshake (epochs, seed, batching) are used. A
 * step costs a control block and a one-word status round when the batch fits the control
 * block, and one more collective otherwise; a failure on any rank ends every rank at the
 * same step (docs/training-loop.md, "The failure contract"). A steady state allocates
 * nothing on any rank, and batches from the reader are sent from their own memory without
 * a copy.
 *
 * Typical loop, the same code on every rank:
 *
 *     sharc_loader *l;
 *     if (sharc_loader_open(&l, &settings) < 0) ...;
 *     sharc_batch *b;
 *     int rc;
 *     while ((rc = sharc_loader_next(l, &b)) == 0) {
 *         const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
 *         ...
 *         sharc_batch_release(b);
 *     }
 *     if (rc != SHARC_END) fprintf(stderr, "%s\n", sharc_loader_last_error(l));
 *     sharc_loader_close(&l);
 *
 * docs/training-loop.md has a complete program.
 */
#ifndef SHARC_LOADER_H
#define SHARC_LOADER_H

#include "sharc/batch.h"
#include "sharc/common.h"
#include "sharc/mesh.h"
#include "sharc/reader.h"
#include "sharc/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque loader handle. Used by one thread at a time. */
typedef struct sharc_loader sharc_loader;

/**
 * A source-side batch producer used instead of a reader (for batches a program makes
 * itself, and for benchmarks). Called by sharc_loader_next() on the source rank only.
 * Batches made with sharc_loader_batch_new() are broadcast without a copy.
 * @param cookie the settings' produce_cookie
 * @param l      the loader (for sharc_loader_batch_new())
 * @param out    receives the batch; the caller of sharc_loader_next() releases it
 * @return 0 with a batch, SHARC_END to end the stream, SHARC_ERR_BACKPRESSURE (nothing is
 *         sent; sharc_loader_next returns it), or a negative error, which is sent to the
 *         peers with the text of sharc_loader_set_source_error() (or sharc_strerror)
 */
typedef int (*sharc_loader_produce_fn)(void *cookie, sharc_loader *l, sharc_batch **out);

/** Loader settings. Fill with sharc_loader_default_settings() first. */
typedef struct sharc_loader_settings {
    /** sizeof(sharc_loader_settings), set by sharc_loader_default_settings() (the rule is in
     *  sharc/common.h) */
    uint32_t struct_size;
    /**
     * The source's reader (see sharc/reader.h). Paths are needed on source ranks only. On
     * every rank the loader uses its logger, allocator and max_held_batches (received
     * batches a peer's caller may hold). When the mesh has more than one data-parallel
     * slot, dp_rank and dp_size are set from the mesh (leave them at 0 and 1, or set them
     * equal to the mesh's). An empty resume_state (size 0, as a peer saves) means start.
     */
    sharc_reader_settings reader;
    sharc_mesh mesh; ///< this rank's mesh (default: one rank on an axis "dp" of size 1)
    /**
     * The transport spanning this rank's broadcast group (its rank 0 is the source),
     * borrowed: the caller closes it after sharc_loader_close(). NULL when the group is
     * this rank alone (broadcast axes absent or of size 1): no communicator is needed
     * (default NULL).
     */
    sharc_transport *transport;
    uint64_t max_frame_bytes; ///< cap on one frame: control block, payload and device tensors;
                              ///< a larger batch is an error sent to the peers (default 4 GiB)
    size_t control_bytes;     ///< size of the first collective of every step, which also
                              ///< carries batches that fit; a multiple of 256, at least 4096
                              ///< (default 65536)
    sharc_loader_produce_fn produce; ///< source: make batches with this instead of a
                                     ///< reader; reader.paths are then unused (default NULL)
    void *produce_cookie;            ///< passed to produce (default NULL)
    uint64_t max_steps; ///< end the stream (STOP on every rank) after this many batches;
                        ///< 0 = no limit (default 0)
    /**
     * A transport spanning the sources of all data-parallel slots, its rank being the slot
     * (sharc_transport_mpi_split_dp() makes one; NULL on ranks that are not a source),
     * borrowed like `transport`. With it and even_steps, the sources agree at every step
     * (default NULL: every slot runs on its own).
     */
    sharc_transport *dp_transport;
    /**
     * 1: when the mesh has more than one data-parallel slot, reader.epochs is not 0 and a
     * dp_transport is given, every slot ends at the same step: the sources agree at every
     * step (a one-word all-reduce over dp_transport), the stream ends on every slot when
     * the first one runs dry (the batches the others still had are dropped and counted,
     * sharc_loader_dropped()), a failure of any slot's source ends every slot, and every
     * slot's batch of a step carries the same epoch, the highest of the slots'. Every slot
     * must give the same value. 0: every slot runs on its own (default 1)
     */
    int even_steps;
    uint8_t reserved[52]; ///< room for later fields; must be zero
} sharc_loader_settings;

/**
 * Fill `s` with the defaults documented on each field (the reader's through
 * sharc_reader_default_settings). Any thread.
 */
SHARC_API void sharc_loader_default_settings(sharc_loader_settings *s);

/**
 * Open a loader on this rank. Not collective: nothing is communicated before the first
 * sharc_loader_next(), which starts with a handshake: the source sends the settings every
 * rank of the group must share (mesh, max_steps, control_bytes, max_frame_bytes, the
 * reader's epochs, seed, shuffle_shards and sampler settings), and a difference fails every
 * rank with SHARC_ERR_SETTINGS and a text naming the field and both values. Peers therefore
 * pass the same reader settings as their source, except paths and resume state.
 *
 * On the source rank the reader is opened here. A reader that cannot be opened (no shards,
 * bad reader settings, a path that does not exist) does not fail this call: the first
 * sharc_loader_next() returns that error on the source and SHARC_ERR_REMOTE with its text
 * on every peer, so that all ranks of the group fail at the same step and none waits.
 *
 * @param out receives the loader; NULL on failure
 * @param s   settings; copied (strings and the resume state included), the caller keeps `s`
 * @return 0; SHARC_ERR(EINVAL) when the settings do not fit together (a transport whose
 *         size or rank differs from the mesh's broadcast group, no transport for a group
 *         of several ranks, a dp_rank/dp_size that contradicts the mesh, a bad control
 *         block size or frame cap); SHARC_ERR(ENOMEM). The reason is logged, since no
 *         handle exists to hold it.
 */
SHARC_API int sharc_loader_open(sharc_loader **out, const sharc_loader_settings *s);

/**
 * What even steps (sharc_loader_settings.even_steps) dropped on this slot's source: the
 * batches its reader still had when another slot ran dry first, and their cuts (rows of
 * "cut_id"), read to the end of the stream after STOP was sent so that the count is exact
 * (a stream without end, a repeating mixture or a produce callback, counts the batch in
 * hand only).
 * 0 and 0 on peers, without even steps, and before the end.
 * @return 0, or SHARC_ERR(EINVAL) for a NULL argument
 */
SHARC_API int sharc_loader_dropped(const sharc_loader *l, uint64_t *batches, uint64_t *cuts);

/**
 * Seconds this rank has spent in the broadcast of its steps so far: on a source, the
 * agreement of the data-parallel slots (even steps) and the sending of each batch's frame;
 * on a peer, the receiving of each frame, which includes waiting for its source to have
 * the batch. Any thread may call it while no other thread is in sharc_loader_next().
 * @return 0, or SHARC_ERR(EINVAL) for a NULL argument
 */
SHARC_API int sharc_loader_broadcast_seconds(const sharc_loader *l, double *seconds);

/**
 * The next batch, on every rank of the group at the same step.
 * @param batch receives a batch owned by the loader until sharc_batch_release() (any
 *              thread may release it); NULL unless 0 is returned
 * @return 0 with a batch; SHARC_END after the last one, on every rank together;
 *         SHARC_ERR_BACKPRESSURE when the caller already holds reader.max_held_batches
 *         batches (nothing was communicated: release one and call again, on every rank);
 *         on the source, the reader's (or producer's) error or the reason a frame could not
 *         be built (SHARC_ERR_TOO_LARGE over the frame cap, SHARC_ERR_FRAME,
 *         SHARC_ERR_UNSUPPORTED), each after it was sent to the peers; on peers,
 *         SHARC_ERR_REMOTE for any source error, with sharc_loader_last_error() =
 *         "source rank R: <the source's message>", or SHARC_ERR_FRAME for a malformed
 *         frame; SHARC_ERR_SETTINGS at the first step when the ranks' settings differ;
 *         after sharc_loader_fail() on any rank of the group, that failure (its code on
 *         that rank, SHARC_ERR_REMOTE with "rank R: <message>" on the others); a transport
 *         error (SHARC_ERR_MPI, SHARC_ERR_NCCL, SHARC_ERR_TIMEOUT: a collective did not
 *         complete within the transport's timeout_ms, because another rank stopped, died
 *         or hangs).
 *         After SHARC_END or an error (other than back-pressure) the stream has ended:
 *         later calls return the same result without communicating.
 */
SHARC_API int sharc_loader_next(sharc_loader *l, sharc_batch **batch);

/**
 * Make an empty batch for a produce callback, with the tensors described by `desc` (name,
 * dtype, device, device_ordinal, ndim and shape are used; data and nbytes are set here).
 * Host tensors share one reusable block laid out as a frame payload, so the batch is
 * broadcast without a copy; device tensors need a transport with device memory (NCCL, or
 * MPI given a device by sharc_transport_mpi_set_device).
 * The caller fills the tensors; the batch returns to the loader on sharc_batch_release().
 * Source rank only.
 * @return 0; SHARC_ERR_BACKPRESSURE when reader.max_held_batches batches are held;
 *         SHARC_ERR_FRAME for a bad descriptor; SHARC_ERR_TOO_LARGE for more than 64
 *         tensors; SHARC_ERR_UNSUPPORTED; SHARC_ERR(EINVAL) on a peer or without a produce
 *         callback; SHARC_ERR(ENOMEM). Text in sharc_loader_last_error().
 */
SHARC_API int sharc_loader_batch_new(sharc_loader *l, size_t n_tensors, const sharc_tensor *desc,
                                     sharc_batch **batch);

/**
 * Report a failure of this rank's own that must end the stream on every rank of the group:
 * a checkpoint or output that could not be written, an exception in the training step.
 * The next sharc_loader_next() fails on every rank at the same step, this rank's with
 * `code` and the others with SHARC_ERR_REMOTE and "rank R: <message>" ("source rank R:"
 * when this rank is the source). So one rank's failure never leaves the others waiting in
 * the next step's collectives. Any rank; the first failure reported is kept.
 * @param code    a negative result code (anything else is taken as SHARC_ERR(EINVAL))
 * @param message plain text, cut to 1024 bytes
 * @return 0; or, when the stream has already ended, its result (nothing is sent)
 */
SHARC_API int sharc_loader_fail(sharc_loader *l, int code, const char *message);

/**
 * Set the text sent to the peers with the next error a produce callback returns (the
 * reader's errors carry their own text). Source rank, from inside the callback.
 */
SHARC_API void sharc_loader_set_source_error(sharc_loader *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/**
 * Save the loader's position for a checkpoint. The state lives on the source: there it is
 * sharc_reader_state_save() of the reader (pass it back as reader.resume_state to resume
 * with the exact remaining batch sequence); on a peer it is empty (*size = 0, return 0),
 * and resuming a peer from it is a no-op.
 * @param buf  receives the state; may be NULL (with cap 0) to ask for the size
 * @param size receives the state's size
 * @return 0, SHARC_ERR(ENOSPC) when cap is too small, a NULL buf included (*size says
 *         how much is needed),
 *         SHARC_ERR(EINVAL) on a source without a working reader (it failed to open, or
 *         batches come from a produce callback) or before the reader served a batch
 */
SHARC_API int sharc_loader_state_save(sharc_loader *l, void *buf, size_t cap, size_t *size);

/** 1 on the rank that reads for its broadcast group, 0 on its peers. */
SHARC_API int sharc_loader_is_source(const sharc_loader *l);

/** Global rank of this group's source (named in the peers' error texts). */
SHARC_API int sharc_loader_source_rank(const sharc_loader *l);

/**
 * The source's reader, for its statistics (sharc_reader_get_stats) and layout; NULL on
 * peers, with a produce callback, and when the reader failed to open. Owned by the
 * loader: do not call its next functions or close it.
 */
SHARC_API sharc_reader *sharc_loader_reader(const sharc_loader *l);

/** The name of the transport in use ("self", "mpi", "nccl"). */
SHARC_API const char *sharc_loader_transport_name(const sharc_loader *l);

/** Text of the loader's last error ("" when none). Valid until the next call on `l`. */
SHARC_API const char *sharc_loader_last_error(const sharc_loader *l);

/**
 * Close the loader: stop and free the reader, the buffers and a transport the loader made
 * itself (never the caller's). Batches still held stay valid until released. Not
 * collective: after a synchronized early break (every rank stops calling next at the same
 * step) no collective is pending. NULL-safe; sets *l = NULL.
 */
SHARC_API void sharc_loader_close(sharc_loader **l);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_LOADER_H */

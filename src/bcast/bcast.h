/*
 * The broadcast protocol: one framed message per step from a group's source to its peers.
 *
 * Before the first step the source broadcasts a handshake (handshake.h): protocol version,
 * group size, transport, control block size, frame cap, and the caller's fields (the mesh,
 * the limit, epochs, batching). Every peer compares it with its own; a mismatch fails every
 * rank at step 0 with SHARC_ERR_SETTINGS and a text naming the field and both values.
 *
 * Every step then is, on every rank, in this order:
 *   1. the control block (a fixed size, a setting) from the source: a DATA, STOP or ERROR
 *      frame with the header, the descriptors and, when they fit, the host tensors;
 *   2. the status round: an all-reduce of one word saying whether any rank has failed
 *      since the control block was announced (a frame it cannot decode or make room for)
 *      or since the previous step (a failure the caller reported with sharc__bcast_fail:
 *      a checkpoint or output file that could not be written). If one has, it broadcasts
 *      its message and the stream ends on every rank at this step;
 *   3. for DATA whose host payload did not fit the control block or that has device tensors
 *      with bytes: one more collective (a group under NCCL) with that host payload (not one
 *      that came inline) and every device tensor with bytes. Source and peers decide it
 *      from the control block alone, so they always join the same collectives.
 * So no rank ever joins a collective that another rank will not join: everything the
 * source can fail on is found before step 1 and sent as ERROR instead; everything a peer
 * can fail on after step 1 is said in step 2, before the payload; and a local failure after
 * a step has returned is carried by the next step. Every collective waits at most the
 * transport's timeout_ms. After STOP or ERROR the stream has ended: further calls return
 * the same result without communicating. A synchronized early break (every rank stops
 * calling at the same step) leaves nothing pending because each call completes its
 * collectives before returning.
 *
 * Drive it from a loop: the source calls sharc__bcast_send per batch and then
 * sharc__bcast_send_stop (or sharc__bcast_send_error); peers call sharc__bcast_recv until
 * it returns SHARC_END or an error. A handle is used by one thread at a time.
 */
#ifndef SHARC_SRC_BCAST_H
#define SHARC_SRC_BCAST_H

#include <stddef.h>
#include <stdint.h>

#include "sharc/batch.h"
#include "sharc/mesh.h"
#include "bcast/transport.h"

typedef struct sharc__bcast sharc__bcast;

typedef struct sharc__bcast_settings {
    size_t control_bytes;     ///< fixed control block size (default 65536, at least 4096)
    uint64_t max_frame_bytes; ///< control + payload + device bytes per frame (default 4 GiB)
    size_t max_tensors;       ///< tensors per frame (default and at most 64)
    size_t max_held;          ///< received batches the caller may hold at once (default 4)
    int root;                 ///< group rank of the source (default 0)
    int source_rank;          ///< rank named in peers' error texts (default -1: root)
    const sharc_mesh *mesh;   ///< copied; names the global ranks in texts (default NULL:
                              ///< group ranks are named)
    const struct sharc__handshake *handshake; ///< the caller's fields every rank of the
                                              ///< group must share (default NULL: none)
} sharc__bcast_settings;

void sharc__bcast_default_settings(sharc__bcast_settings *s);

/**
 * Open the protocol over `t` (borrowed: it must outlive the handle). Allocates the control
 * block and, on peers, the receive pool. Errors are described in t's text.
 * @return 0, SHARC_ERR(EINVAL) for bad settings, SHARC_ERR(ENOMEM)
 */
int sharc__bcast_open(sharc__bcast **out, sharc_transport *t, const sharc__bcast_settings *s);

/**
 * Close. Received batches still held stay valid until released. Not collective. NULL-safe.
 */
void sharc__bcast_close(sharc__bcast **bc);

/**
 * Run the handshake now if it has not run yet (every send and recv starts with it), so
 * that a source learns of a mismatch before it reads a batch. Every rank of the group.
 * @return 0, or the stream's result when it has ended (SHARC_ERR_SETTINGS, a transport
 *         error, ...)
 */
int sharc__bcast_start(sharc__bcast *bc);

/** 1 on the group's source rank. */
int sharc__bcast_is_source(const sharc__bcast *bc);

/**
 * Source: broadcast `b` as a DATA frame. Host tensors of a batch from a batch pool
 * (sharc__batch_finish layout) are sent from the pool's block without a copy; other host
 * tensors are packed into a reusable send buffer.
 * @return 0; or, when the frame cannot be built (bad tensor, over the cap), the reason
 *         (SHARC_ERR_FRAME, SHARC_ERR_UNSUPPORTED, SHARC_ERR_TOO_LARGE) after an ERROR
 *         frame with that text has gone to the peers (the stream has then ended); or the
 *         pending failure of sharc__bcast_fail, likewise sent; or SHARC_ERR_SETTINGS when
 *         the handshake failed; or SHARC_ERR_REMOTE when a peer reported a failure in the
 *         status round; or a transport error (SHARC_ERR_TIMEOUT, SHARC_ERR_MPI, ...)
 */
int sharc__bcast_send(sharc__bcast *bc, const sharc_batch *b);

/**
 * Record a failure of this rank's own, found after a step returned (a checkpoint or output
 * that could not be written), to end the stream on every rank at the next step: on the
 * source the next send goes out as ERROR with `message`; on a peer the next recv's status
 * round names this rank and `message`. The first failure recorded is kept.
 * @return 0, or the stream's result when it has already ended (nothing is recorded)
 */
int sharc__bcast_fail(sharc__bcast *bc, int code, const char *message);

/** 1 when a failure recorded by sharc__bcast_fail waits for the next step. */
int sharc__bcast_has_pending(const sharc__bcast *bc);

/** The text of that failure ("" when none). */
const char *sharc__bcast_pending_text(const sharc__bcast *bc);

/**
 * Source: broadcast STOP; the stream ends.
 * @return 0, or the failure a peer reported in the status round (SHARC_ERR_REMOTE), or a
 *         transport error
 */
int sharc__bcast_send_stop(sharc__bcast *bc);

/**
 * Source: broadcast ERROR with the source's `code` (negative) and `message`; the stream
 * ends. Peers return SHARC_ERR_REMOTE with the message.
 * @return 0 or a transport error
 */
int sharc__bcast_send_error(sharc__bcast *bc, int code, const char *message);

/**
 * Peer: receive the next frame.
 * @param out receives a batch (release with sharc_batch_release) on 0, NULL otherwise
 * @return 0 with a batch; SHARC_END on STOP; SHARC_ERR_REMOTE on ERROR (text:
 *         "source rank R: <message>", see sharc__bcast_error) or when another peer
 *         failed ("rank R: <message>"); this rank's own failure (SHARC_ERR_FRAME for a
 *         malformed frame, SHARC_ERR(ENOMEM), the code given to sharc__bcast_fail), after
 *         it was reported to the group; SHARC_ERR_SETTINGS when the handshake failed;
 *         SHARC_ERR_BACKPRESSURE
 *         when max_held batches are held (no collective was started; release one and call
 *         again); a transport error (SHARC_ERR_TIMEOUT, ...)
 */
int sharc__bcast_recv(sharc__bcast *bc, sharc_batch **out);

/** Text of the last error of this handle ("" when none). */
const char *sharc__bcast_error(const sharc__bcast *bc);

/** The source's message of the ERROR frame received ("" when none). */
const char *sharc__bcast_remote_message(const sharc__bcast *bc);

/** The source's error code of the ERROR frame received (0 when none). */
int sharc__bcast_remote_code(const sharc__bcast *bc);

/** Frames sent or received so far. */
uint64_t sharc__bcast_frames(const sharc__bcast *bc);

/** Collectives issued so far (control blocks plus payload groups). */
uint64_t sharc__bcast_collectives(const sharc__bcast *bc);

#endif /* SHARC_SRC_BCAST_H */

/*
 * The broadcast protocol: one framed message per step from a group's source to its peers.
 *
 * Every step is one DATA, STOP or ERROR frame. The frame's control block (a fixed size, a
 * setting) is always the first collective; it holds the header, the descriptors and, when
 * they fit, the host tensors. Otherwise a second collective (a group under NCCL) carries
 * the host payload and the device tensors. So a step costs one collective when the batch
 * fits the control block and two otherwise.
 *
 * Everything that can fail on the source (a bad tensor, a frame over the cap) is found
 * before the first collective and sent as ERROR instead, so peers never wait on a
 * collective the source will not join. After STOP or ERROR the stream has ended: further
 * calls return the same result without communicating. A synchronized early break (every
 * rank stops calling at the same step) leaves nothing pending because each call completes
 * its collectives before returning.
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
#include "transport.h"

typedef struct sharc__bcast sharc__bcast;

typedef struct sharc__bcast_settings {
    size_t control_bytes;     ///< fixed control block size (default 65536, at least 4096)
    uint64_t max_frame_bytes; ///< control + payload + device bytes per frame (default 4 GiB)
    size_t max_tensors;       ///< tensors per frame (default and at most 64)
    size_t max_held;          ///< received batches the caller may hold at once (default 4)
    int root;                 ///< group rank of the source (default 0)
    int source_rank;          ///< rank named in peers' error texts (default -1: root)
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

/** 1 on the group's source rank. */
int sharc__bcast_is_source(const sharc__bcast *bc);

/**
 * Source: broadcast `b` as a DATA frame. Host tensors of a batch from a batch pool
 * (sharc__batch_finish layout) are sent from the pool's block without a copy; other host
 * tensors are packed into a reusable send buffer.
 * @return 0; or, when the frame cannot be built (bad tensor, over the cap), the reason
 *         (SHARC_ERR_FRAME, SHARC_ERR_UNSUPPORTED, SHARC_ERR_TOO_LARGE) after an ERROR
 *         frame with that text has gone to the peers (the stream has then ended); or a
 *         transport error
 */
int sharc__bcast_send(sharc__bcast *bc, const sharc_batch *b);

/** Source: broadcast STOP; the stream ends. @return 0 or a transport error */
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
 *         "source rank R: <message>", see sharc__bcast_error); SHARC_ERR_BACKPRESSURE
 *         when max_held batches are held (no collective was started; release one and call
 *         again); SHARC_ERR_FRAME for a malformed frame; a transport error
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

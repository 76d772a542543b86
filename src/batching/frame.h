/*
 * The frame codec: one self-describing message per broadcast step.
 *
 * Wire layout (all integers little-endian), inside a fixed-size control block:
 *
 *   header, 64 bytes
 *     0  magic "SHRC"            4  u16 version (2)        6  u16 kind (DATA, STOP, ERROR)
 *     8  u64 step               16  u64 epoch             24  u32 n_tensors
 *    28  u32 inline_offset (0: the payload follows in its own collective)
 *    32  u64 payload_bytes      40  i32 error_code        44  u32 message_len
 *    48  u32 descriptor_size    52  u32 reserved (0)      56  u32 reserved (0)
 *    60  u32 CRC-32 (zlib) of bytes [0, 60) + descriptors + message
 *   n_tensors descriptors, 96 bytes each
 *     0  name[32], NUL-terminated   32 u8 dtype  33 u8 device  34 u8 ndim  35 u8 reserved
 *    36  i32 device_ordinal         40 i64 shape[4]            72 u64 offset  80 u64 nbytes
 *    88  u64 reserved (0)
 *   ERROR: message_len bytes of text (no NUL), after the header
 *   DATA with an inline payload: the payload at inline_offset (256-aligned)
 *
 * Host tensors live in the payload at 256-byte aligned offsets. Device tensors are not in
 * the payload: each travels in place in its own broadcast, in descriptor order, offset 0.
 */
#ifndef SHARC_SRC_FRAME_H
#define SHARC_SRC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "sharc/batch.h"

#define SHARC__FRAME_VERSION     2
#define SHARC__FRAME_HEADER_SIZE 64
#define SHARC__FRAME_DESC_SIZE   96
#define SHARC__FRAME_ALIGN       256
#define SHARC__FRAME_MESSAGE_MAX 1024 ///< longest ERROR text carried (longer is cut)
#define SHARC__FRAME_MIN_CONTROL 4096 ///< smallest control block accepted

typedef enum sharc__frame_kind {
    SHARC__FRAME_DATA = 1,
    SHARC__FRAME_STOP = 2,
    SHARC__FRAME_ERROR = 3,
} sharc__frame_kind;

/** What a receiver accepts. */
typedef struct sharc__frame_limits {
    size_t max_tensors;       ///< descriptors per frame
    uint64_t max_frame_bytes; ///< control block + payload + device tensors
} sharc__frame_limits;

/** A decoded header. */
typedef struct sharc__frame_header {
    sharc__frame_kind kind;
    uint64_t step;
    uint64_t epoch;
    uint32_t n_tensors;
    uint32_t inline_offset;
    uint64_t payload_bytes;
    int error_code;                             ///< ERROR only
    char message[SHARC__FRAME_MESSAGE_MAX + 1]; ///< ERROR only, NUL-terminated
} sharc__frame_header;

/** Round up to SHARC__FRAME_ALIGN; returns 0 (an impossible size) on overflow. */
uint64_t sharc__frame_align(uint64_t n);

/** Bytes of the control block used by a header with `n_tensors` descriptors. */
size_t sharc__frame_control_bytes(size_t n_tensors);

/**
 * Check a tensor before it is framed: known dtype and device, 0..4 dims, non-negative
 * extents whose product times the element size equals nbytes without overflow, a
 * NUL-terminated non-empty name. Sets ctx's error naming the tensor.
 * @return 0, SHARC_ERR_FRAME or SHARC_ERR_UNSUPPORTED
 */
int sharc__frame_check_tensor(sharc__ctx *ctx, const sharc_tensor *t);

/**
 * Packed payload layout of the host tensors: offsets[i] is 256-aligned for host tensors
 * and 0 for device tensors; *payload_bytes is the end of the last host tensor.
 * @return 0 or SHARC_ERR_TOO_LARGE on size overflow
 */
int sharc__frame_layout(const sharc_tensor *t, size_t n, uint64_t *offsets,
                        uint64_t *payload_bytes);

/**
 * Write a DATA header and descriptors into `buf` (cap bytes). Tensors must have passed
 * sharc__frame_check_tensor. The inline payload, if any, is the caller's to copy.
 * @return 0 or SHARC_ERR_TOO_LARGE when the descriptors do not fit
 */
int sharc__frame_encode_data(uint8_t *buf, size_t cap, uint64_t step, uint64_t epoch,
                             const sharc_tensor *t, const uint64_t *offsets, size_t n,
                             uint64_t payload_bytes, uint32_t inline_offset);

/** Write a STOP frame. `cap` must be at least SHARC__FRAME_HEADER_SIZE. */
void sharc__frame_encode_stop(uint8_t *buf, size_t cap, uint64_t step);

/**
 * Write an ERROR frame with `code` and `message` (cut to SHARC__FRAME_MESSAGE_MAX bytes).
 * `cap` must be at least SHARC__FRAME_HEADER_SIZE + SHARC__FRAME_MESSAGE_MAX.
 */
void sharc__frame_encode_error(uint8_t *buf, size_t cap, uint64_t step, int code,
                               const char *message);

/**
 * Validate and decode a control block of `len` bytes. Every field is checked (magic,
 * version, kind, CRC, counts, sizes, shapes, offsets, names, dtypes, devices); nothing
 * outside [buf, buf+len) is read. Tensors get data = NULL; offsets[i] is each tensor's
 * payload offset. `tensors` and `offsets` must hold limits->max_tensors entries.
 * @return 0, or SHARC_ERR_FRAME with ctx's error saying which field is wrong
 */
int sharc__frame_decode(sharc__ctx *ctx, const uint8_t *buf, size_t len,
                        const sharc__frame_limits *limits, sharc__frame_header *h,
                        sharc_tensor *tensors, uint64_t *offsets);

#endif /* SHARC_SRC_FRAME_H */

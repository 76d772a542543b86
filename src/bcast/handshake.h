/*
 * The handshake of a broadcast group: before its first step, the source broadcasts the
 * settings every rank of the group must share (protocol version, mesh, frame cap, control
 * block size, and the settings that decide the batch sequence: limit, epochs, batching),
 * and each peer compares them with its own. A mismatch fails every rank at step 0 with a
 * message naming the field and both values, instead of a hang or a silent divergence later.
 *
 * Wire layout (little-endian), SHARC__HANDSHAKE_BYTES bytes:
 *   0 magic "SHRH"   4 u16 version (1)   6 u16 n_fields
 *   8 n_fields entries of 128 bytes: name[32] and value[96], each NUL-terminated text
 *   then u32 CRC-32 (zlib) of everything before it; the rest is zero.
 * Values are compared as text, so a field's rendering is part of the protocol.
 */
#ifndef SHARC_SRC_HANDSHAKE_H
#define SHARC_SRC_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"

#define SHARC__HANDSHAKE_BYTES      4096
#define SHARC__HANDSHAKE_MAX_FIELDS 30
#define SHARC__HANDSHAKE_NAME_MAX   32
#define SHARC__HANDSHAKE_VALUE_MAX  96

typedef struct sharc__handshake_field {
    char name[SHARC__HANDSHAKE_NAME_MAX];
    char value[SHARC__HANDSHAKE_VALUE_MAX];
} sharc__handshake_field;

typedef struct sharc__handshake {
    size_t n;
    sharc__handshake_field fields[SHARC__HANDSHAKE_MAX_FIELDS];
} sharc__handshake;

/** Append a field whose value is printf-formatted (cut to fit); ignored when full. */
void sharc__handshake_add(sharc__handshake *h, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Encode into `buf` of SHARC__HANDSHAKE_BYTES bytes. */
void sharc__handshake_encode(const sharc__handshake *h, uint8_t *buf);

/**
 * Decode and validate `len` bytes (magic, version, count, NUL-terminated texts, CRC).
 * Nothing outside [buf, buf+len) is read.
 * @return 0, or SHARC_ERR_FRAME with ctx's error saying what is wrong
 */
int sharc__handshake_decode(sharc__ctx *ctx, const uint8_t *buf, size_t len, sharc__handshake *h);

/**
 * Compare the source's fields with this rank's. On the first difference (a field with
 * another value, or present on one side only), write "<name> is <source's> on source rank
 * <source_rank> but <mine> on rank <my_rank>" into `why` and return 1; else return 0.
 */
int sharc__handshake_compare(const sharc__handshake *source, const sharc__handshake *mine,
                             int source_rank, int my_rank, char *why, size_t cap);

#endif /* SHARC_SRC_HANDSHAKE_H */

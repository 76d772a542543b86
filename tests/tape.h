/*
 * A "tape" transport for in-process protocol tests: the source's broadcasts are recorded,
 * then replayed to the peer in order. Shared by the bcast and loader suites.
 */
#ifndef SHARC_TESTS_TAPE_H
#define SHARC_TESTS_TAPE_H

#include <stddef.h>
#include <stdint.h>

#include "bcast/transport.h"

#define TAPE_MAX 512

typedef struct tape_entry {
    uint8_t *bytes;
    size_t n;
    const void *src; ///< the source's buffer: shows whether a payload was copied first
} tape_entry;

extern tape_entry tape[TAPE_MAX];
extern int tape_len, tape_pos;
extern const sharc__transport_ops tape_ops;

/** Forget everything recorded. */
void tape_clear(void);

#endif

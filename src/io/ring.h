/*
 * A bounded byte queue between one writing thread and one reading thread: what a remote
 * shard's transfer (remote_http.c) hands to the reader of its stream (source.c). The bytes
 * are copied in, and copied out or used in place, outside the lock (each end owns the part
 * of the buffer it works on), and an end that waits is woken only once a useful amount is
 * there: a quarter of the buffer or what it asked for, whichever is less. So the many small
 * pieces a transfer delivers (libcurl's are 16 KiB) cost no system call each, as writes to
 * a pipe would. A reader also takes what is there after SHARC__RING_LULL_MS without more,
 * so that a slow writer (a server that trickles) never holds back the bytes it wrote.
 */
#ifndef SHARC_SRC_RING_H
#define SHARC_SRC_RING_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/ctx.h"

/** A waiting reader takes what is there (less than it waits for) after this many ms. */
#define SHARC__RING_LULL_MS 20

typedef struct sharc__ring {
    uint8_t *data;
    size_t cap;
    pthread_mutex_t mu;
    pthread_cond_t readable, writable;
    /* Guarded by mu. */
    size_t head, used; ///< the unread bytes start at data[head], wrapping around
    int write_closed;  ///< the writer is done: what is left is all there will be
    int read_closed;   ///< the reader is gone: writes fail
    int reader_waits, writer_waits;
    size_t read_min, write_min; ///< what a waiting end waits for
} sharc__ring;

/**
 * A ring of `cap` bytes, empty and open at both ends.
 * @return 0, or SHARC_ERR(ENOMEM)/SHARC_ERR(EAGAIN) (the lock or conditions cannot be made)
 */
int sharc__ring_init(sharc__ring *q, sharc__ctx *ctx, size_t cap);

/** Release the buffer; no thread may be using the ring. */
void sharc__ring_free(sharc__ring *q, sharc__ctx *ctx);

/** Empty the ring and open both ends again; no thread may be using it. */
void sharc__ring_reset(sharc__ring *q);

/**
 * Append `n` bytes, waiting for room as long as the reader is there.
 * @return 0, or -1 once the read end is closed (the bytes not taken are dropped)
 */
int sharc__ring_write(sharc__ring *q, const void *p, size_t n);

/** The writer's end of the stream: a reader waiting, or reading once all is read, gets 0. */
void sharc__ring_close_write(sharc__ring *q);

/** The reader leaves: a writer waiting for room, and every later write, gets -1. */
void sharc__ring_close_read(sharc__ring *q);

/**
 * Take up to `n` bytes (n > 0) into `dst`, waiting for min(n, a quarter of the ring) of them
 * or the end of the stream, or for SHARC__RING_LULL_MS without more once some are there.
 * @param wait_ms the longest wait, or -1 for no limit
 * @return the bytes taken; 0 at the end of the stream; -1 when wait_ms passed with none
 */
ssize_t sharc__ring_read(sharc__ring *q, void *dst, size_t n, int wait_ms);

/**
 * sharc__ring_read() without the copy: wait as it does, then point *p at the unread bytes
 * in the ring itself, as many as are there up to `n` and up to the end of the buffer (the
 * bytes after the wrap come at the next call). They stay the reader's, untouched by the
 * writer, until sharc__ring_consume() gives them back; a second peek before that sees them
 * again.
 * @return the bytes at *p; 0 at the end of the stream; -1 when wait_ms passed with none
 */
ssize_t sharc__ring_peek(sharc__ring *q, const void **p, size_t n, int wait_ms);

/** Give back the first `n` bytes a peek pointed at (n at most what it returned). */
void sharc__ring_consume(sharc__ring *q, size_t n);

#endif /* SHARC_SRC_RING_H */

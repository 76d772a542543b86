/*
 * The bytes under libarchive, for the tar reader (archive.c) and the JSON-lines reader
 * (lines.c): a file descriptor or memory, read in blocks; gzip inflated here with zlib
 * (which checks every member's CRC-32 and length), anything else (plain, zstd) passed to
 * libarchive's own filters. Also the one translation of libarchive's failures into sharc's
 * errors, and the making of a libarchive reader that never starts an external program.
 */
#ifndef SHARC_SRC_SOURCE_H
#define SHARC_SRC_SOURCE_H

#include <archive.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zlib.h>

#include "base/ctx.h"
#include "io/remote.h"

/* libarchive reads the file in blocks of this size; large blocks keep syscalls off the hot path. */
#define SHARC__READ_BLOCK (1u << 20)
/* With payloads left in the file (lazy members), reads are small: they fetch headers and
 * metadata members, and every byte of a skipped payload they read is a wasted copy. The
 * first read of every file is this small too: it is made before the caller can say that
 * payloads are to be left in the file, and sniffing and libarchive's format bid need 512
 * bytes. */
#define SHARC__LAZY_READ_BLOCK (4u << 10)
/* The path named in the texts of readers over memory. */
#define SHARC__MEMORY_PATH "<memory>"

/*
 * The bytes under libarchive: a file descriptor or memory, read in blocks. A gzip stream
 * (sniffed from its magic bytes) is inflated here with zlib instead of by libarchive's gzip
 * filter, which (3.6) never checks a member's CRC-32 and length trailer: damage that still
 * inflates, e.g. inside a stored block, would otherwise pass as good data. zlib checks both.
 * Anything else (plain, zstd) goes through untouched for libarchive's own filters.
 */
enum { SHARC__SRC_SNIFF, SHARC__SRC_PLAIN, SHARC__SRC_GZIP, SHARC__SRC_DONE };

typedef struct sharc__source {
    sharc__ctx *ctx;
    const char *path;
    int fd;              ///< -1 for memory and remote streams
    int seekable;        ///< a regular file: payloads of a plain tar are skipped with lseek
    uint64_t file_size;  ///< when seekable
    uint64_t file_id;    ///< sharc__file_id() of a regular file, else 0
    int small_reads;     ///< plain tars are read SHARC__LAZY_READ_BLOCK bytes at a time
    uint8_t *in;         ///< SHARC__READ_BLOCK bytes read from fd or remote (NULL for memory)
    uint8_t *out;        ///< SHARC__READ_BLOCK inflated bytes (gzip only)
    const uint8_t *next; ///< unread input, `avail` bytes
    size_t avail;
    uint64_t total;     ///< input bytes read or skipped so far
    uint64_t hinted_to; ///< payloads left in the file up to here are cached or asked for
    int eof, mode;
    z_stream z;
    int z_ready;
    int member_done;       ///< a gzip member ended; look for another at the next read
    int finishing;         ///< past the archive's end (sharc__source_finish)
    double drain_until;    ///< then, when a remote stream is read no longer (sharc__now_s)
    sharc__remote *remote; ///< a remote shard's stream (sharc__remote_read), or NULL
    size_t lent;           ///< bytes of `remote` used in place (`next` points into its ring)
} sharc__source;

/**
 * Open `path` for reading, so that a missing file or a directory gets errno's own text; a
 * remote path (sharc__is_remote()) starts its stream instead, which is read as a pipe is.
 * @param size   receives the size of a regular file, else -1 (a pipe: unknown, never empty)
 * @param id     receives sharc__file_id() of a regular file, else 0
 * @param fd     receives the open file, or -1 for a remote path
 * @param remote receives the stream of a remote path (else NULL), for sharc__source.remote,
 *               which must be set before sharc__source_open(): the source then owns it
 * @return 0, or the failure (set in ctx) with *fd = -1
 */
int sharc__open_input(sharc__ctx *ctx, const char *path, int *fd, off_t *size, uint64_t *id,
                      sharc__remote **remote);

/**
 * Take `fd` (closed by sharc__source_free; -1 for memory or s->remote) or `mem` (n bytes,
 * which must outlive the source), and hand the stream to libarchive's reader `a`.
 * @return libarchive's status (ARCHIVE_OK, ...)
 */
int sharc__source_open(sharc__source *s, struct archive *a, sharc__ctx *ctx, const char *path,
                       int fd, int seekable, const void *mem, size_t n);

/**
 * At the end of the archive: inflate what is left of a gzip stream, so that its CRC and
 * length are checked and a file cut short after them is not taken as whole.
 * @return ARCHIVE_OK or ARCHIVE_FATAL (the reason set on `a`)
 */
int sharc__source_finish(sharc__source *s, struct archive *a);

/** Input bytes consumed so far. */
uint64_t sharc__source_consumed(const sharc__source *s);

/** Free the buffers and close the file; the source is reset. */
void sharc__source_free(sharc__source *s);

/**
 * A libarchive reader with the gzip, zstd and no-compression filters and the tar format
 * (`tar` nonzero) or the raw and empty formats (a JSON-lines file). Compression is sniffed
 * from the bytes; no external program is ever started.
 * @return 0, or the failure naming `path`
 */
int sharc__archive_reader_new(sharc__ctx *ctx, struct archive **out, int tar, const char *path);

/**
 * Translate a libarchive failure: our context text, then libarchive's own message, set as
 * the handle's error and logged once. ARCHIVE_WARN is logged and accepted (returns 0).
 */
int sharc__la_result(sharc__ctx *ctx, struct archive *a, long r, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/*
 * The one check for libarchive calls that return a status: anything but ARCHIVE_OK goes
 * through sharc__la_result(); on failure `rc` is set and control jumps to `fail`.
 */
#define SHARC__LA_TRY(ctx, a, call, code, ...)                                                     \
    do {                                                                                           \
        int la_r_ = (call);                                                                        \
        if (la_r_ != ARCHIVE_OK &&                                                                 \
            (rc = sharc__la_result((ctx), (a), la_r_, (code), __VA_ARGS__)) < 0)                   \
            goto fail;                                                                             \
    } while (0)

#endif /* SHARC_SRC_SOURCE_H */

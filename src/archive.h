/*
 * Forward-only streaming of tar archives and JSON-lines files with libarchive.
 * Compression (none, gzip including multi-member and trailing garbage, zstd) is detected
 * from the bytes, never from the file name.
 */
#ifndef SHARC_SRC_ARCHIVE_H
#define SHARC_SRC_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ctx.h"

typedef struct sharc__tar sharc__tar;

/** One regular member of a tar archive; `data` holds its whole payload. */
typedef struct sharc__member {
    sharc__buf name; ///< full member path inside the archive (PAX/GNU long names resolved)
    sharc__buf data; ///< the member's bytes (NUL-terminated past len, for JSON parsing)
    uint64_t index;  ///< 0-based index among the regular members returned so far
} sharc__member;

/**
 * Open `path` for streaming. Nothing but the first header block may be read here.
 * @param max_member_bytes members larger than this fail with SHARC_ERR_TOO_LARGE
 * @return 0, SHARC_ERR(ENOENT)/SHARC_ERR_IO when unreadable, SHARC_ERR_CORRUPT when not a
 *         tar; the message (naming the path) is in ctx->error.
 */
int sharc__tar_open(sharc__tar **out, sharc__ctx *ctx, const char *path, uint64_t max_member_bytes);

/**
 * Read the next regular member (directories, links, pax/global headers are skipped).
 * Buffers in `m` are reused across calls (caller frees with sharc__member_free()).
 * @return 0 with a member, SHARC_END at the clean end of the archive, SHARC_ERR_CORRUPT
 *         for truncated/garbled data or a corrupt compressed stream, SHARC_ERR_TOO_LARGE
 *         when the member exceeds the cap (its name is still in m->name). Messages name
 *         the archive path and member.
 */
int sharc__tar_next(sharc__tar *t, sharc__member *m);

/** Like sharc__tar_next but only reads the header: m->data is left empty, the payload skipped. */
int sharc__tar_next_header(sharc__tar *t, sharc__member *m, uint64_t *size);

/** Bytes of compressed input consumed so far (for progress and benchmarks). */
uint64_t sharc__tar_bytes_read(const sharc__tar *t);

void sharc__tar_close(sharc__tar **t);
void sharc__member_free(sharc__ctx *ctx, sharc__member *m);

typedef struct sharc__lines sharc__lines;

/** Open a (possibly gzip/zstd compressed) text file for reading line by line. */
int sharc__lines_open(sharc__lines **out, sharc__ctx *ctx, const char *path, uint64_t max_line_bytes);

/**
 * Next line, without its '\n' (and without a trailing '\r'). Empty lines are skipped.
 * The last line need not end with '\n'.
 * @param line receives a NUL-terminated pointer valid until the next call
 * @param lineno receives the 1-based line number
 * @return 0, SHARC_END, SHARC_ERR_CORRUPT, SHARC_ERR_TOO_LARGE
 */
int sharc__lines_next(sharc__lines *l, const char **line, size_t *len, uint64_t *lineno);

void sharc__lines_close(sharc__lines **l);

#endif /* SHARC_SRC_ARCHIVE_H */

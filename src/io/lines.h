/*
 * Forward-only reading of JSON-lines files (Lhotse cuts and field files, NeMo manifests),
 * plain, gzip or zstd (detected from the bytes), over the byte source of source.h.
 */
#ifndef SHARC_SRC_LINES_H
#define SHARC_SRC_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"

typedef struct sharc__lines sharc__lines;

/**
 * Open a (possibly gzip/zstd compressed) text file for reading line by line, through
 * libarchive's raw format. Concatenated gzip members are all read; bytes after the last
 * complete gzip member that do not start another member are ignored, as `gzip -d` does.
 * A 0-byte file, or a compressed stream of nothing, has no lines: the first next() gives
 * SHARC_END.
 * @param ctx the owning handle's context; must outlive `*out`
 * @param max_line_bytes longer lines (not counting "\n" or "\r\n") fail with
 *        SHARC_ERR_TOO_LARGE; the buffer never grows past about twice this
 * @return 0 with `*out` owned by the caller (free with sharc__lines_close()),
 *         SHARC_ERR(ENOENT)/SHARC_ERR(EACCES)/SHARC_ERR(EISDIR)/SHARC_ERR_IO, or
 *         SHARC_ERR_CORRUPT for a compressed stream broken from its first bytes.
 */
int sharc__lines_open(sharc__lines **out, sharc__ctx *ctx, const char *path,
                      uint64_t max_line_bytes);

/** Like sharc__lines_open() on bytes in memory, which must outlive the handle. */
int sharc__lines_open_memory(sharc__lines **out, sharc__ctx *ctx, const void *data, size_t n,
                             uint64_t max_line_bytes);

/**
 * Next line, without its '\n' (and without a trailing '\r'). Empty lines and lines of
 * only blanks (space, tab, CR, FF, VT) are skipped but counted in line numbers. The last
 * line need not end with '\n'. A UTF-8 byte order mark at the start of the file is dropped.
 * A line containing a NUL byte is SHARC_ERR_CORRUPT (it could not be passed on as a C string).
 * Errors and SHARC_END are final: later calls return the same code.
 * @param line receives a NUL-terminated pointer valid until the next call
 * @param lineno receives the 1-based line number
 * @return 0, SHARC_END, SHARC_ERR_CORRUPT (broken compressed stream, NUL byte),
 *         SHARC_ERR_TOO_LARGE; messages name the path and the line number.
 */
int sharc__lines_next(sharc__lines *l, const char **line, size_t *len, uint64_t *lineno);

/** Free the reader and close its file; NULL-safe, sets `*l` to NULL. */
void sharc__lines_close(sharc__lines **l);

#endif /* SHARC_SRC_LINES_H */

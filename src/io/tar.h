/*
 * Forward-only streaming of tar archives with libarchive, over the byte source of
 * source.h (JSON-lines files: lines.h).
 * Compression (none, gzip including multi-member and trailing garbage, zstd) is detected
 * from the bytes, never from the file name. gzip is inflated with zlib, which checks each
 * member's CRC-32 and length (libarchive 3.6's gzip filter does not); zstd frames are
 * decoded by libarchive (their checksum is verified at the end of each frame).
 * Neither reader ever starts an external decompression program.
 */
#ifndef SHARC_SRC_TAR_H
#define SHARC_SRC_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/ctx.h"

typedef struct sharc__tar sharc__tar;

/** One regular member of a tar archive; `data` holds its whole payload. */
typedef struct sharc__member {
    sharc__buf name; ///< full member path inside the archive (PAX/GNU long names resolved)
    sharc__buf data; ///< the member's bytes (NUL-terminated past len, for JSON parsing)
    uint64_t index;  ///< 0-based index among the regular members returned so far
    uint64_t size;   ///< payload bytes
    int in_file;     ///< the payload was left in the file (sharc__tar_set_lazy), at byte `at`
    uint64_t at;
    uint64_t file_id; ///< with in_file: the file's sharc__file_id() when it was opened
    int broke_inside; ///< after an error: 1 when it is inside the member `name` names (its
                      ///< header was read), 0 when after it (the next header, the file's end)
} sharc__member;

/**
 * Open `path` for streaming. Only the first block is read here (to detect the compression
 * and the tar format), with libarchive's gzip, zstd and no-compression filters.
 * A 0-byte file is refused with SHARC_ERR_CORRUPT (it is almost always an interrupted copy;
 * a genuinely empty tar has 1024 zero bytes and gives SHARC_END on the first next()).
 * @param ctx the owning handle's context (allocator, logger, error text); must outlive `*out`
 * @param max_member_bytes members larger than this fail with SHARC_ERR_TOO_LARGE
 * @return 0 with `*out` owned by the caller (free with sharc__tar_close()),
 *         SHARC_ERR(ENOENT)/SHARC_ERR(EACCES)/SHARC_ERR(EISDIR)/SHARC_ERR_IO when unreadable,
 *         SHARC_ERR_CORRUPT when not a tar (or a compressed stream broken from its first
 *         bytes); the message (naming the path, with libarchive's text) is in ctx->error.
 *         On error `*out` is NULL.
 */
int sharc__tar_open(sharc__tar **out, sharc__ctx *ctx, const char *path, uint64_t max_member_bytes);

/**
 * Like sharc__tar_open() on `n` bytes in memory (fuzzing, tests). Messages name "<memory>".
 * `data` is not copied and must stay valid until sharc__tar_close().
 */
int sharc__tar_open_memory(sharc__tar **out, sharc__ctx *ctx, const void *data, size_t n,
                           uint64_t max_member_bytes);

/** The path given to open ("<memory>" for in-memory archives); valid until close. */
const char *sharc__tar_path(const sharc__tar *t);

/**
 * Read the next regular member (directories, links, pax/global headers are skipped).
 * Buffers in `m` are reused across calls (caller frees with sharc__member_free()).
 * @return 0 with a member, SHARC_END at the clean end of the archive, SHARC_ERR_CORRUPT
 *         for truncated/garbled data or a corrupt compressed stream, SHARC_ERR_TOO_LARGE
 *         when the member exceeds the cap (its name is still in m->name; its declared size
 *         is checked before anything is allocated or read). Messages name the archive path
 *         and member, and carry libarchive's own text. SHARC_ERR_TOO_LARGE is not final: the
 *         next call skips that member's payload and goes on. Any other error, and SHARC_END,
 *         are final: later calls return the same code. After any error m->name is the member
 *         the message names: the one being read, or the last one read when the archive
 *         broke right after it (a bad header, a file cut short); empty when it names none;
 *         m->broke_inside tells the two apart.
 */
int sharc__tar_next(sharc__tar *t, sharc__member *m);

/**
 * Like sharc__tar_next, but the payload is read into m->data even when payloads are left in
 * the file (sharc__tar_set_lazy): for a member the caller parses, whatever its name (the
 * metadata member of a Shar pair is the second of the pair, not the one named `.json`).
 */
int sharc__tar_next_read(sharc__tar *t, sharc__member *m);

/**
 * Like sharc__tar_next but only reads the header: m->data is left empty and the payload is
 * skipped by the following call. No cap applies (nothing is allocated).
 * @param size receives the member's declared size when not NULL
 */
int sharc__tar_next_header(sharc__tar *t, sharc__member *m, uint64_t *size);

struct sharc__bufpool;

/** Take member buffers from `pool` (sized to fit each member) instead of growing one. */
void sharc__tar_set_pool(sharc__tar *t, struct sharc__bufpool *pool);

/**
 * Whether `path` is a regular file that does not start like a gzip or zstd stream (so a
 * plain tar, if a tar at all): the shards whose audio sharc__tar_set_lazy leaves in the file.
 * 0 when it cannot be read.
 */
int sharc__tar_file_is_plain(const char *path);

/**
 * From now on, when the archive is an uncompressed regular file, sharc__tar_next leaves the
 * payload of each member that `leave` accepts (every member when `leave` is NULL) in the
 * file: m->data is empty, m->in_file is set and m->at, m->size say where it is (read it
 * later with sharc__fetch). The file is then read in small blocks, so that skipping those
 * payloads with lseek saves their copy. Otherwise (compressed, a pipe, memory, a sparse
 * member) members are read as always, with m->in_file = 0. The cap on member size applies
 * either way.
 */
void sharc__tar_set_lazy(sharc__tar *t, int (*leave)(const char *name));

/** Members of remote shards from this size on may be left there (sharc__tar_set_ranged). */
#define SHARC__TAR_RANGED_MIN ((uint64_t)8 << 20)

/**
 * From now on, when the archive is an uncompressed tar streamed over HTTP(S) or S3 (not a
 * command), sharc__tar_next leaves the payload of each member that sharc__tar_ranged_member()
 * accepts in the object: m->in_file is set, m->at and m->size say where it is, m->file_id is
 * the object's identity (sharc__remote_object_id()), and sharc__fetch reads it later with
 * ranged requests. The stream skips such a payload with a new request past it
 * (SHARC__NET_SKIP_MIN), so it is not downloaded. Otherwise members are read as always.
 * For readers whose cuts are windows of long recordings (NeMo rows with offset/duration),
 * which then fetch a member's header and their window only.
 */
void sharc__tar_set_ranged(sharc__tar *t);

/** Whether a member of a remote shard is left there (sharc__tar_set_ranged): a WAV member
 *  (named .wav) of SHARC__TAR_RANGED_MIN bytes or more, where a window is a byte range and
 *  one request more is little next to the bytes a short window saves. */
int sharc__tar_ranged_member(const char *name, uint64_t size);

/** Bytes of compressed input consumed so far (for progress and benchmarks). */
uint64_t sharc__tar_bytes_read(const sharc__tar *t);

/** Free the reader and close its file; NULL-safe, sets `*t` to NULL. */
void sharc__tar_close(sharc__tar **t);
/** Free both buffers of a member (the member struct itself is the caller's). */
void sharc__member_free(sharc__ctx *ctx, sharc__member *m);

#endif /* SHARC_SRC_TAR_H */

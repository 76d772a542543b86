/*
 * Reading audio members that a shard stream left in their file (lazy members of
 * uncompressed tars, see sharc__tar_set_lazy). Each thread that decodes keeps one
 * fetcher: a few open files and one buffer reused for every member, so the bytes go from
 * the page cache into a buffer that is still in the core's cache when they are decoded.
 * Not thread-safe: one fetcher per thread.
 */
#ifndef SHARC_SRC_FETCH_H
#define SHARC_SRC_FETCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/hash.h"
#include "io/remote.h"

/* Open files kept per fetcher at most. A batch's rows come from the shards that the
 * sampler's buffer spans; with 8, a buffer of 1000 cuts over 16 shards reopened a file for a
 * third of the rows. Fewer are kept where the process's limit on open files is low (see
 * sharc__fetcher_init()). */
#define SHARC__FETCH_FILES 32

/* Room for a member's head or tail when only parts of it are read (see sharc__fetch_into). */
#define SHARC__FETCH_PIECE 4096

/* Samples of a WAV member left in a remote object are read this many bytes per request at
 * most (a window's in one request, where a file's are read in small parts). */
#define SHARC__FETCH_REMOTE_PART ((size_t)8 << 20)

/* An open file's identity is checked again at most this often (an fstat): a metadata
 * round trip per row would cost on network file systems, and a shard rewritten in place
 * is caught all the same, a moment later. */
#define SHARC__FETCH_RECHECK_NS 100000000 /* 0.1 s */

/* Bytes libsndfile reads at once from a member decoded in its file (sharc__audio_decode_at). */
#define SHARC__FETCH_IO (32u << 10)

/**
 * A file's identity as stat() gives it (device, inode, size, modification time), hashed;
 * never 0. A shard stream records it when it opens a file, and a fetcher checks that the
 * file it reads a member from is still that one: a shard replaced or rewritten after its
 * headers were read would otherwise give other bytes than the headers describe.
 * `with_inode` is 0 for files on a file system whose inode numbers may change between two
 * opens of one file (sharc__inodes_stable()); their identity leaves the inode out.
 */
static inline uint64_t sharc__file_id(const struct stat *st, int with_inode)
{
    const uint64_t v[5] = {(uint64_t)st->st_dev, with_inode ? (uint64_t)st->st_ino : 0,
                           (uint64_t)st->st_size, (uint64_t)st->st_mtim.tv_sec,
                           (uint64_t)st->st_mtim.tv_nsec};
    uint64_t h = SHARC__FNV_OFFSET;
    for (int i = 0; i < 5; i++)
        h = sharc__fnv1a_u64(h, v[i]);
    return h ? h : 1;
}

/** Whether the file `st` describes has the identity `id`, recorded with or without its inode
 *  (a real inode is never 0, so the two cannot be confused but by a 64-bit collision). */
static inline int sharc__file_is(const struct stat *st, uint64_t id)
{
    return id == sharc__file_id(st, 1) || id == sharc__file_id(st, 0);
}

/**
 * Whether the inode numbers of the file system that `fd` is on can be trusted to stay the
 * same between two opens of a file: 0 on every FUSE mount (gcsfuse, mountpoint-s3, sshfs
 * without use_ino, ... hand numbers out on lookup and may hand out new ones once the kernel
 * forgets the file; which FUSE file systems do cannot be told) and every SMB mount (CIFS
 * with noserverino does the same), else 1, also when it cannot be told.
 */
int sharc__inodes_stable(int fd);

/** Where a member left in its file is: the file and its identity (0: not checked). */
typedef struct sharc__file_ref {
    const char *path; ///< owned by the dataset
    uint64_t id;      ///< sharc__file_id() when the stream opened it, or 0
    /** The member's bytes in the file, for messages when only part of it is read (its
     *  header, a window, a part); member_len 0: the bytes read are the member. */
    uint64_t member_at, member_len;
} sharc__file_ref;

typedef struct sharc__fetcher {
    struct {
        const char *path; ///< NULL for a free entry; owned by the dataset
        uint64_t id; ///< its identity when last checked, in the form streams record (0: unknown)
        int fd;
        uint64_t used;      ///< clock of the last use, for least-recently-used replacement
        int64_t checked_ns; ///< when its identity was last checked (CLOCK_MONOTONIC_COARSE)
    } files[SHARC__FETCH_FILES];
    size_t max_files; ///< files kept open at most (<= SHARC__FETCH_FILES)
    uint64_t clock;
    sharc__buf buf;
    /** Scratch for the caller: the head and tail of a member read in parts. */
    uint8_t head[SHARC__FETCH_PIECE], tail[SHARC__FETCH_PIECE];
    uint8_t io[SHARC__FETCH_IO]; ///< the cache of sharc__audio_decode_at()
    /** Members left in a remote object (sharc__tar_set_ranged) are read with ranged requests:
     *  the last object read, with the ETag its first answer gave, which the next requests
     *  must match (If-Match). */
    struct {
        const char *path; ///< NULL: none; owned by the dataset
        uint64_t id;
        char etag[SHARC__NET_ETAG_MAX];
        struct sharc__remote_conn *conn; ///< connections kept open between ranged reads
    } remote;
    /** What `buf` holds of a remote object (n 0: nothing), and the last piece (a member's
     *  header) read from one: rows that cut one member ask for them in turn. */
    struct {
        const char *path;
        uint64_t id, at;
        size_t n;
    } buf_holds, piece_holds;
    uint8_t piece[SHARC__FETCH_PIECE];
} sharc__fetcher;

/**
 * A fetcher that is one of `n_fetchers` in the process. Together they keep at most a
 * quarter of the process's limit on open files (RLIMIT_NOFILE), so that shards can still be
 * opened by the reader and the application; each keeps 1 to SHARC__FETCH_FILES. Should
 * descriptors run out anyway, a fetcher closes its others and keeps the one it needs.
 */
void sharc__fetcher_init(sharc__fetcher *f, int n_fetchers);

/** Close the files and free the buffer; the fetcher can be used again after init. */
void sharc__fetcher_free(sharc__fetcher *f, sharc__ctx *ctx);

/**
 * Read `n` bytes at byte `at` of `file` into the fetcher's buffer. A remote object's bytes
 * come with one ranged request (sharc__remote_read_range()), which must find the object its
 * headers were read from: the first request's ETag is checked against file->id, the next
 * ones carry it in If-Match.
 * @param out receives the bytes, valid until the next call
 * @return 0, SHARC_ERR(ENOENT)/SHARC_ERR(EACCES)/... when the file cannot be opened,
 *         SHARC_ERR_IO on a read error, SHARC_ERR_CORRUPT when the file is no longer the
 *         one its headers were read from (file->id) or has become shorter than the member,
 *         SHARC_ERR(ENOMEM); the message names the path and the byte range.
 */
int sharc__fetch(sharc__fetcher *f, sharc__ctx *ctx, const sharc__file_ref *file, uint64_t at,
                 size_t n, const uint8_t **out);

/** 1 when `file` is a remote object (io/remote.h), whose members are read with ranged
 *  requests and which has no descriptor (sharc__fetch_fd). */
int sharc__fetch_is_remote(const sharc__file_ref *file);

/** The fetcher's open descriptor of `file` (opened and checked if needed), valid until the
 *  next call. SHARC_ERR_UNSUPPORTED for a remote object. */
int sharc__fetch_fd(sharc__fetcher *f, sharc__ctx *ctx, const sharc__file_ref *file, int *fd);

/** sharc__fetch() into `dst` (room for `n` bytes) instead of the fetcher's buffer. */
int sharc__fetch_into(sharc__fetcher *f, sharc__ctx *ctx, const sharc__file_ref *file, uint64_t at,
                      size_t n, uint8_t *dst);

#endif /* SHARC_SRC_FETCH_H */

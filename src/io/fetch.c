#include "io/fetch.h"
#include "io/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>

/* A quarter of the limit on open files, shared by `n_fetchers`: 1 to SHARC__FETCH_FILES. */
static size_t files_per_fetcher(int n_fetchers)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return SHARC__FETCH_FILES;
    rlim_t share = rl.rlim_cur / 4 / (rlim_t)(n_fetchers > 0 ? n_fetchers : 1);
    return share < 1 ? 1 : share < SHARC__FETCH_FILES ? (size_t)share : SHARC__FETCH_FILES;
}

static void reset(sharc__fetcher *f, size_t max_files)
{
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < SHARC__FETCH_FILES; i++)
        f->files[i].fd = -1;
    f->max_files = max_files;
}

void sharc__fetcher_init(sharc__fetcher *f, int n_fetchers)
{
    reset(f, files_per_fetcher(n_fetchers));
}

/* Close entry `i`'s file, if any, and free the entry. */
static void drop(sharc__fetcher *f, size_t i)
{
    if (f->files[i].fd >= 0)
        close(f->files[i].fd);
    f->files[i].fd = -1;
    f->files[i].path = NULL;
    f->files[i].id = 0;
    f->files[i].used = 0;
}

void sharc__fetcher_free(sharc__fetcher *f, sharc__ctx *ctx)
{
    for (size_t i = 0; i < SHARC__FETCH_FILES; i++)
        drop(f, i);
    sharc__buf_free(ctx, &f->buf);
    sharc__remote_conn_free(&f->remote.conn);
    reset(f, f->max_files);
}

static int changed(sharc__ctx *ctx, const char *path)
{
    return sharc__fail_data(ctx, SHARC_ERR_CORRUPT,
                            "%s: the file changed after its headers were read (it was replaced "
                            "or rewritten: its inode, size or modification time differ), so "
                            "its members are no longer where they were",
                            path);
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int sharc__inodes_stable(int fd)
{
    struct statfs sf;
    if (fstatfs(fd, &sf) != 0)
        return 1;
    switch ((unsigned long)sf.f_type) {
    case FUSE_SUPER_MAGIC:
    case CIFS_SUPER_MAGIC:
    case SMB2_SUPER_MAGIC:
        return 0;
    default:
        return 1;
    }
}

/* The identity of the file open as `fd` now, as a stream that opened it would record it; 0
 * when it cannot be known. */
static uint64_t id_of_fd(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? sharc__file_id(&st, sharc__inodes_stable(fd)) : 0;
}

/* Whether the file open as `fd` still has the identity `id`. */
static int fd_is(int fd, uint64_t id)
{
    struct stat st;
    return fstat(fd, &st) == 0 && sharc__file_is(&st, id);
}

/*
 * The descriptor of `file`, opening it in the least recently used entry when needed, and
 * checking that it is still the file its headers were read from. An open descriptor is
 * checked again (one fstat) when it is used SHARC__FETCH_RECHECK_NS or more after its last
 * check: a file rewritten in place changes under it. After a file was replaced by another
 * of its name, a descriptor of the old one that is open stays open next to the new one, for
 * the cuts read from the old one still to be decoded; a file that is no longer at its path
 * (and not open) is not opened at all.
 */
static int file_of(sharc__fetcher *f, sharc__ctx *ctx, const sharc__file_ref *file, int *fd)
{
    const char *path = file->path;
    size_t victim = 0;
    f->clock++;
    for (size_t i = 0; i < f->max_files; i++) {
        if (f->files[i].path && (f->files[i].path == path || strcmp(f->files[i].path, path) == 0)) {
            if (!file->id) {
                f->files[i].used = f->clock;
                *fd = f->files[i].fd;
                return 0;
            }
            if (f->files[i].id == file->id) {
                int64_t now = now_ns();
                if (now - f->files[i].checked_ns >= SHARC__FETCH_RECHECK_NS) {
                    if (!fd_is(f->files[i].fd, f->files[i].id))
                        f->files[i].id = id_of_fd(f->files[i].fd); /* 0: cannot be checked */
                    f->files[i].checked_ns = now;
                }
                if (f->files[i].id == file->id) {
                    f->files[i].used = f->clock;
                    *fd = f->files[i].fd;
                    return 0;
                }
            }
        }
        if (f->files[i].used < f->files[victim].used)
            victim = i;
    }
    struct stat st;
    if (file->id && stat(path, &st) == 0 && !sharc__file_is(&st, file->id))
        return changed(ctx, path); /* without taking an entry from the files still good */
    drop(f, victim);
    int nfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nfd < 0 && (errno == EMFILE || errno == ENFILE)) {
        /* Out of descriptors: keep only the one needed now. */
        for (size_t i = 0; i < SHARC__FETCH_FILES; i++)
            drop(f, i);
        nfd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (nfd < 0)
        return sharc__fail_data(ctx, SHARC_ERR(errno), "%s: cannot open again to read audio: %s",
                                path, strerror(errno));
    uint64_t id = file->id && fd_is(nfd, file->id) ? file->id : id_of_fd(nfd);
    if (!id) {
        int e = errno;
        close(nfd);
        return sharc__fail_data(ctx, SHARC_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    f->files[victim].path = path;
    f->files[victim].id = id;
    f->files[victim].fd = nfd;
    f->files[victim].used = f->clock;
    f->files[victim].checked_ns = now_ns();
    if (file->id && id != file->id)
        return changed(ctx, path); /* changed between the stat and the open */
    *fd = nfd;
    return 0;
}

int sharc__fetch_is_remote(const sharc__file_ref *file)
{
    return sharc__is_remote(file->path);
}

int sharc__fetch_fd(sharc__fetcher *f, sharc__ctx *ctx, const sharc__file_ref *file, int *fd)
{
    if (sharc__fetch_is_remote(file))
        return sharc__fail_data(ctx, SHARC_ERR_UNSUPPORTED,
                                "%s: a remote object is read by ranges, not as a file", file->path);
    return file_of(f, ctx, file, fd);
}

static int same_object(const char *path, uint64_t id, const char *other, uint64_t other_id)
{
    return other && id == other_id && (other == path || strcmp(other, path) == 0);
}

/* Bytes of a member left in a remote object: one ranged request, for the object whose
 * headers were read (its ETag then is file->id). */
static int remote_fetch(sharc__fetcher *f, sharc__ctx *ctx, const sharc__file_ref *file,
                        uint64_t at, size_t n, uint8_t *dst)
{
    const char *path = file->path;
    if (n && n <= SHARC__FETCH_PIECE && f->piece_holds.n == n && f->piece_holds.at == at &&
        same_object(path, file->id, f->piece_holds.path, f->piece_holds.id)) {
        memcpy(dst, f->piece, n);
        return 0;
    }
    if (!same_object(path, file->id, f->remote.path, f->remote.id)) {
        f->remote.path = path;
        f->remote.id = file->id;
        f->remote.etag[0] = 0;
    }
    if (n <= SHARC__FETCH_PIECE)
        f->piece_holds.n = 0;
    int rc = sharc__remote_read_range(ctx, &f->remote.conn, path, at, n, dst, f->remote.etag,
                                      sizeof f->remote.etag);
    /* An answer without an ETag (some servers leave it off partial answers) says nothing. */
    if (rc == 0 && file->id && f->remote.etag[0] &&
        sharc__remote_etag_id(f->remote.etag) != file->id)
        rc = sharc__fail_data(ctx, SHARC_ERR_CORRUPT,
                              "%s: bytes %llu-%llu: the object changed after its headers were "
                              "read (its ETag is now %s), so its members are no longer where "
                              "they were",
                              path, (unsigned long long)at, (unsigned long long)(at + n - 1),
                              f->remote.etag);
    if (rc < 0) {
        f->remote.path = NULL;
        return rc;
    }
    if (n <= SHARC__FETCH_PIECE) {
        memcpy(f->piece, dst, n);
        f->piece_holds.path = path;
        f->piece_holds.id = file->id;
        f->piece_holds.at = at;
        f->piece_holds.n = n;
    }
    return 0;
}

int sharc__fetch_into(sharc__fetcher *f, sharc__ctx *ctx, const sharc__file_ref *file, uint64_t at,
                      size_t n, uint8_t *dst)
{
    const char *path = file->path;
    if (sharc__fetch_is_remote(file))
        return remote_fetch(f, ctx, file, at, n, dst);
    int fd = -1, rc = file_of(f, ctx, file, &fd);
    if (rc < 0)
        return rc;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, dst + got, n - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return sharc__fail_data(ctx, SHARC_ERR_IO, "%s: read error at byte %llu: %s", path,
                                    (unsigned long long)(at + got), strerror(errno));
        if (r == 0) {
            const int part = file->member_len > 0;
            return sharc__fail_data(
                ctx, SHARC_ERR_CORRUPT,
                "%s: the file ends at byte %llu, inside audio of %llu bytes at byte "
                "%llu: it changed after it was read",
                path, (unsigned long long)(at + got),
                (unsigned long long)(part ? file->member_len : n),
                (unsigned long long)(part ? file->member_at : at));
        }
        got += (size_t)r;
    }
    return 0;
}

int sharc__fetch(sharc__fetcher *f, sharc__ctx *ctx, const sharc__file_ref *file, uint64_t at,
                 size_t n, const uint8_t **out)
{
    const char *path = file->path;
    const int remote = sharc__fetch_is_remote(file);
    if (remote && n && f->buf_holds.n == n && f->buf_holds.at == at &&
        same_object(path, file->id, f->buf_holds.path, f->buf_holds.id)) {
        *out = f->buf.data; /* rows of one member read whole take it in turn */
        return 0;
    }
    f->buf_holds.n = 0;
    int rc = sharc__buf_reserve(ctx, &f->buf, n);
    if (rc < 0)
        return sharc__set_error(ctx, rc, "%s: cannot allocate %zu bytes to read audio", path,
                                n); /* reported by the caller, with the cut */
    if ((rc = sharc__fetch_into(f, ctx, file, at, n, f->buf.data)) < 0)
        return rc;
    if (remote) {
        f->buf_holds.path = path;
        f->buf_holds.id = file->id;
        f->buf_holds.at = at;
        f->buf_holds.n = n;
    }
    f->buf.len = n;
    f->buf.data[n] = 0;
    *out = f->buf.data;
    return 0;
}

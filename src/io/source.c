#include "io/source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fetch.h"

/* libarchive's errno says when a failure is the system's rather than the data's. */
static int la_code(struct archive *a, int dflt)
{
    int e = archive_errno(a);
    if (e == ENOMEM)
        return SHARC_ERR(ENOMEM);
    if (e == EIO)
        return SHARC_ERR_IO;
    /* A remote shard refused (HTTP 401/403) or missing (404): io/remote.h. */
    if (e == EACCES || e == ENOENT)
        return SHARC_ERR(e);
    return dflt;
}

int sharc__la_result(sharc__ctx *ctx, struct archive *a, long r, int code, const char *fmt, ...)
{
    char what[SHARC__ERRLEN / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *msg = archive_error_string(a);
    if (!msg)
        msg = "unreadable or corrupt data (libarchive gave no details)";
    if (r == ARCHIVE_WARN) {
        /* In the C locale every non-ASCII PAX name "can't be converted"; the raw UTF-8 bytes
         * are kept and used, so that warning would only flood the log (EILSEQ is
         * libarchive's ARCHIVE_ERRNO_FILE_FORMAT on POSIX). */
        int expected = archive_errno(a) == EILSEQ && strstr(msg, "converted");
        sharc__log(ctx, expected ? SHARC_LOG_DEBUG : SHARC_LOG_WARN, "%s: %s", what, msg);
        return 0;
    }
    return sharc__fail_data(ctx, la_code(a, code), "%s: %s", what, msg);
}

int sharc__open_input(sharc__ctx *ctx, const char *path, int *fd, off_t *size, uint64_t *id,
                      sharc__remote **remote)
{
    struct stat st;
    int rc = 0;
    *remote = NULL;
    *fd = -1;
    if (sharc__is_remote(path)) {
        *size = -1;
        *id = 0;
        return sharc__remote_open(remote, ctx, path);
    }
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return sharc__fail_data(ctx, SHARC_ERR(errno), "%s: cannot open: %s", path,
                                strerror(errno));
    if (fstat(*fd, &st) != 0) {
        rc = sharc__fail_data(ctx, SHARC_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = sharc__fail_data(ctx, SHARC_ERR(EISDIR), "%s: is a directory", path);
        goto fail;
    }
    /* Non-regular inputs (pipes) report -1: unknown size, never treated as empty. */
    *size = S_ISREG(st.st_mode) ? st.st_size : -1;
    *id = S_ISREG(st.st_mode) ? sharc__file_id(&st, sharc__inodes_stable(*fd)) : 0;
    if (S_ISREG(st.st_mode))
        (void)posix_fadvise(*fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
fail:
    close(*fd);
    *fd = -1;
    return rc;
}

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    return sharc__calloc(opaque, items, size);
}

static void z_free(voidpf opaque, voidpf p)
{
    sharc__free(opaque, p);
}

/* A remote stream's end of file is only the end of its bytes when the transfer or the
 * command says it completed; otherwise the shard is not whole, and the reason is the error. */
static int remote_ended(sharc__source *s, struct archive *a)
{
    char msg[SHARC__ERRLEN / 2];
    int rc = sharc__remote_end(s->remote, msg, sizeof msg);
    if (rc == 0)
        return 0;
    archive_set_error(a, rc == SHARC_ERR_IO ? EIO : -rc, "%s", msg);
    return ARCHIVE_FATAL;
}

/* How long a read of a remote stream waits: without limit, but after the archive's end no
 * later than the end of its drain. */
static int remote_wait_ms(const sharc__source *s)
{
    if (!s->finishing)
        return -1;
    const double left_ms = (s->drain_until - sharc__now_s()) * 1000.0;
    return left_ms > 0 ? (int)left_ms + 1 : 0;
}

/* Past the end of the drain after an archive's end: the stream is read no more (taken as
 * ended; closing the source stops its transfer or command). */
static int drain_over(sharc__source *s)
{
    if (!s->finishing || sharc__now_s() < s->drain_until)
        return 0;
    s->eof = 1;
    return 1;
}

/* Give back the bytes of a remote stream that were used where they waited (src_next). */
static void release_lent(sharc__source *s)
{
    if (s->lent)
        sharc__remote_consume(s->remote, s->lent);
    s->lent = 0;
}

static void count_wait(sharc__source *s, double t0)
{
    /* Benchmarks split reading from decompression with this. */
    double waited = sharc__now_s() - t0;
    s->ctx->io_seconds += waited;
    if (s->remote)
        atomic_fetch_add(&sharc__ctx_net(s->ctx)->wait_ns, (uint64_t)(waited * 1e9));
}

/* Keep the unread bytes, append what the file has next. */
static int src_fill(sharc__source *s, struct archive *a)
{
    if (s->fd < 0 && !s->remote) {
        s->eof = 1;
        return 0;
    }
    if (s->avail && s->next != s->in)
        memmove(s->in, s->next, s->avail);
    s->next = s->in;
    release_lent(s); /* the unread bytes of a lent block are in `in` now */
    const int small =
        s->mode == SHARC__SRC_SNIFF || (s->small_reads && s->mode == SHARC__SRC_PLAIN);
    size_t want =
        small && s->avail < SHARC__LAZY_READ_BLOCK ? SHARC__LAZY_READ_BLOCK : SHARC__READ_BLOCK;
    ssize_t n;
    double t0 = sharc__now_s();
    if (s->remote) {
        if (drain_over(s))
            return 0;
        n = sharc__remote_read(s->remote, s->in + s->avail, want - s->avail, remote_wait_ms(s));
        if (n < 0 && errno == ETIMEDOUT) {
            s->eof = 1;
            return 0;
        }
    } else {
        do
            n = read(s->fd, s->in + s->avail, want - s->avail);
        while (n < 0 && errno == EINTR);
    }
    count_wait(s, t0);
    if (n < 0) {
        archive_set_error(a, errno, "read error: %s", strerror(errno));
        return ARCHIVE_FATAL;
    }
    s->eof = n == 0;
    if (s->eof && s->remote && remote_ended(s, a) < 0)
        return ARCHIVE_FATAL;
    s->avail += (size_t)n;
    s->total += (uint64_t)n;
    return 0;
}

/* All input taken: the next bytes. Those of a remote transfer are used where they wait, in
 * its ring (no copy; given back at the next call), the others read into `in`. */
static int src_next(sharc__source *s, struct archive *a)
{
    if (!s->remote || !sharc__remote_can_peek(s->remote))
        return src_fill(s, a);
    release_lent(s);
    if (drain_over(s))
        return 0;
    const void *p = NULL;
    double t0 = sharc__now_s();
    ssize_t n = sharc__remote_peek(s->remote, &p, SHARC__READ_BLOCK, remote_wait_ms(s));
    count_wait(s, t0);
    if (n < 0) { /* no byte within the timeout after the archive's end */
        s->eof = 1;
        return 0;
    }
    s->eof = n == 0;
    if (s->eof && remote_ended(s, a) < 0)
        return ARCHIVE_FATAL;
    s->next = p;
    s->avail = s->lent = (size_t)n;
    s->total += (uint64_t)n;
    return 0;
}

static int gz_start(sharc__source *s, struct archive *a)
{
    s->out = sharc__malloc(s->ctx, SHARC__READ_BLOCK);
    s->z.zalloc = z_alloc;
    s->z.zfree = z_free;
    s->z.opaque = s->ctx;
    if (!s->out || inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) {
        archive_set_error(a, ENOMEM, "cannot set up gzip decompression");
        return ARCHIVE_FATAL;
    }
    s->z_ready = 1;
    return 0;
}

/* After a member: another member follows, or the stream ends; trailing bytes that are not a
 * gzip member are ignored, as `gzip -d` does (tape padding is common). */
static int gz_next_member(sharc__source *s, struct archive *a)
{
    while (s->avail < 2 && !s->eof)
        if (src_fill(s, a) < 0)
            return ARCHIVE_FATAL;
    if (s->avail >= 2 && s->next[0] == 0x1f && s->next[1] == 0x8b) {
        inflateReset(&s->z);
        return 0;
    }
    if (s->avail)
        sharc__log(s->ctx, SHARC_LOG_DEBUG, "%s: trailing bytes after gzip data ignored", s->path);
    s->mode = SHARC__SRC_DONE;
    return 0;
}

static la_ssize_t gz_read(sharc__source *s, struct archive *a, const void **buf)
{
    s->z.next_out = s->out;
    s->z.avail_out = SHARC__READ_BLOCK;
    if (s->member_done) {
        s->member_done = 0;
        if (gz_next_member(s, a) < 0)
            return ARCHIVE_FATAL;
    }
    while (s->z.avail_out == SHARC__READ_BLOCK && s->mode == SHARC__SRC_GZIP) {
        if (s->avail == 0) {
            if (s->eof) {
                archive_set_error(a, EILSEQ, "truncated gzip input");
                return ARCHIVE_FATAL;
            }
            if (src_next(s, a) < 0)
                return ARCHIVE_FATAL;
            continue;
        }
        uInt in = s->avail > UINT_MAX ? UINT_MAX : (uInt)s->avail;
        s->z.next_in = (Bytef *)(uintptr_t)s->next;
        s->z.avail_in = in;
        int zr = inflate(&s->z, Z_NO_FLUSH);
        s->next += in - s->z.avail_in;
        s->avail -= in - s->z.avail_in;
        if (zr == Z_STREAM_END && s->z.avail_out < SHARC__READ_BLOCK) {
            /* The member's last bytes go to libarchive before a look for another member,
             * which may wait on a stream (a command that has written all it will, but not
             * yet ended): an archive that ends in them needs no more. */
            s->member_done = 1;
        } else if (zr == Z_STREAM_END) {
            if (gz_next_member(s, a) < 0)
                return ARCHIVE_FATAL;
        } else if (zr != Z_OK && !(zr == Z_BUF_ERROR && s->z.avail_in < in)) {
            archive_set_error(a, EILSEQ, "gzip decompression failed: %s",
                              s->z.msg ? s->z.msg : "corrupt data");
            return ARCHIVE_FATAL;
        }
    }
    *buf = s->out;
    return (la_ssize_t)(SHARC__READ_BLOCK - s->z.avail_out);
}

/*
 * At the end of the archive: inflate what is left of a gzip file (libarchive stops reading at
 * the end-of-archive blocks), so that its CRC and length are checked and a file cut short
 * after them is not taken as whole. Later gzip members are checked the same way; bytes that
 * are not gzip data end it, as with `gzip -d`.
 */
int sharc__source_finish(sharc__source *s, struct archive *a)
{
    const uint32_t timeout =
        s->ctx->net_timeout_ms ? s->ctx->net_timeout_ms : SHARC__NET_TIMEOUT_MS;
    /* The rest of the gzip data (its trailer, later members) within timeout_ms in all, not
     * per byte: a trickle that goes on fails the shard instead of holding it. */
    s->finishing = 1;
    s->drain_until = sharc__now_s() + timeout / 1000.0;
    while (s->mode == SHARC__SRC_GZIP) {
        const void *block;
        if (gz_read(s, a, &block) < 0)
            return ARCHIVE_FATAL;
    }
    const double drain_s =
        (timeout < SHARC__NET_DRAIN_MAX_MS ? timeout : SHARC__NET_DRAIN_MAX_MS) / 1000.0;
    if (s->drain_until > sharc__now_s() + drain_s)
        s->drain_until = sharc__now_s() + drain_s;
    /* A remote shard is read on to its end, so that a transfer or a command that failed after
     * the archive's last block is not taken for a whole shard; but only for so many bytes
     * (tape padding is 10 KiB) and so long (drain_s, src_fill): beyond that, the archive,
     * whole and checked, is taken as it is, and closing the source stops what still runs. */
    uint64_t start = s->total;
    while (s->remote && !s->eof && s->total - start < SHARC__NET_DRAIN_MAX) {
        s->avail = 0;
        if (src_fill(s, a) < 0)
            return ARCHIVE_FATAL;
    }
    return ARCHIVE_OK;
}

static la_ssize_t src_read(struct archive *a, void *cookie, const void **buf)
{
    sharc__source *s = cookie;
    if (s->mode == SHARC__SRC_SNIFF) {
        while (s->avail < 2 && !s->eof)
            if (src_fill(s, a) < 0)
                return ARCHIVE_FATAL;
        int gz = s->avail >= 2 && s->next[0] == 0x1f && s->next[1] == 0x8b;
        s->mode = gz ? SHARC__SRC_GZIP : SHARC__SRC_PLAIN;
        if (gz && gz_start(s, a) < 0)
            return ARCHIVE_FATAL;
    }
    if (s->mode == SHARC__SRC_GZIP)
        return gz_read(s, a, buf);
    if (s->mode == SHARC__SRC_PLAIN && s->avail == 0 && !s->eof && src_next(s, a) < 0)
        return ARCHIVE_FATAL;
    if (s->mode != SHARC__SRC_PLAIN)
        return 0;
    /* libarchive may use the block until the next call, when src_fill reuses `in`. */
    size_t n = s->avail;
    *buf = s->next;
    s->next += n;
    s->avail = 0;
    return (la_ssize_t)n;
}

/* A long skip of a remote uncompressed tar restarts its transfer after the span, so that
 * the span is never downloaded (io/remote.h, SHARC__NET_SKIP_MIN). */
static la_int64_t remote_skip(struct archive *a, sharc__source *s, la_int64_t request)
{
    uint64_t at;
    s->lent = 0; /* the seek empties the ring */
    if (sharc__remote_seek(s->remote, s->ctx, s->total, s->total + (uint64_t)request, &at) < 0) {
        s->eof = 1;
        archive_set_error(a, EIO, "%s", s->ctx->error);
        return ARCHIVE_FATAL;
    }
    s->eof = 0;
    la_int64_t skipped = (la_int64_t)(at - s->total);
    s->total = at;
    return skipped;
}

static la_int64_t src_skip(struct archive *a, void *cookie, la_int64_t request)
{
    sharc__source *s = cookie;
    if (s->mode == SHARC__SRC_PLAIN && s->remote && !s->avail && !s->eof && request > 0 &&
        (uint64_t)request >= SHARC__NET_SKIP_MIN && sharc__remote_can_seek(s->remote))
        return remote_skip(a, s, request);
    if (s->mode != SHARC__SRC_PLAIN || !s->seekable || s->avail || request <= 0 ||
        lseek(s->fd, (off_t)request, SEEK_CUR) < 0)
        return 0;
    s->total += (uint64_t)request;
    return request;
}

/* Take `fd` (closed by src_free) or `mem`, and hand the stream to libarchive. */
int sharc__source_open(sharc__source *s, struct archive *a, sharc__ctx *ctx, const char *path,
                       int fd, int seekable, const void *mem, size_t n)
{
    s->ctx = ctx;
    s->path = path;
    s->fd = fd;
    s->seekable = seekable;
    if (fd >= 0 || s->remote) {
        s->in = sharc__malloc(ctx, SHARC__READ_BLOCK);
        if (!s->in) {
            archive_set_error(a, ENOMEM, "out of memory");
            return ARCHIVE_FATAL;
        }
        s->next = s->in;
    } else {
        s->next = mem;
        s->avail = n;
        s->total = n;
        s->eof = 1;
    }
    return archive_read_open2(a, s, NULL, src_read, src_skip, NULL);
}

uint64_t sharc__source_consumed(const sharc__source *s)
{
    return s->total - s->avail;
}

void sharc__source_free(sharc__source *s)
{
    if (s->z_ready)
        inflateEnd(&s->z);
    if (s->remote)
        sharc__remote_close(&s->remote, s->ctx);
    else if (s->fd >= 0)
        close(s->fd);
    sharc__free(s->ctx, s->in);
    sharc__free(s->ctx, s->out);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

/* Compression is sniffed from the bytes; no external programs are ever spawned. */
int sharc__archive_reader_new(sharc__ctx *ctx, struct archive **out, int tar, const char *path)
{
    int rc = 0;
    struct archive *a = archive_read_new();
    if (!a)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "%s: cannot create a libarchive reader", path);
    SHARC__LA_TRY(ctx, a, archive_read_support_filter_gzip(a), SHARC_ERR_UNSUPPORTED, "%s: gzip",
                  path);
    SHARC__LA_TRY(ctx, a, archive_read_support_filter_zstd(a), SHARC_ERR_UNSUPPORTED, "%s: zstd",
                  path);
    SHARC__LA_TRY(ctx, a, archive_read_support_filter_none(a), SHARC_ERR_UNSUPPORTED, "%s", path);
    if (tar) {
        SHARC__LA_TRY(ctx, a, archive_read_support_format_tar(a), SHARC_ERR_UNSUPPORTED, "%s",
                      path);
    } else {
        SHARC__LA_TRY(ctx, a, archive_read_support_format_raw(a), SHARC_ERR_UNSUPPORTED, "%s",
                      path);
        /* Without it a stream that decompresses to nothing is "Unrecognized archive format". */
        SHARC__LA_TRY(ctx, a, archive_read_support_format_empty(a), SHARC_ERR_UNSUPPORTED, "%s",
                      path);
    }
    *out = a;
    return 0;
fail:
    archive_read_free(a);
    return rc;
}

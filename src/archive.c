#include "archive.h"
#include "bufpool.h"
#include "fetch.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

/* libarchive reads the file in blocks of this size; large blocks keep syscalls off the hot path. */
#define READ_BLOCK (1u << 20)
/* With payloads left in the file (lazy members), reads are small: they fetch headers and
 * metadata members, and every byte of a skipped payload they read is a wasted copy. The
 * first read of every file is this small too: it is made before the caller can say that
 * payloads are to be left in the file, and sniffing and libarchive's format bid need 512
 * bytes. */
#define LAZY_READ_BLOCK (4u << 10)
/* First size of the line buffer; it grows (doubling) up to about twice the line cap. */
#define LINE_BUF_INITIAL (64u << 10)
#define MEMORY_PATH      "<memory>"

/*
 * The bytes under libarchive: a file descriptor or memory, read in blocks. A gzip stream
 * (sniffed from its magic bytes) is inflated here with zlib instead of by libarchive's gzip
 * filter, which (3.6) never checks a member's CRC-32 and length trailer: damage that still
 * inflates, e.g. inside a stored block, would otherwise pass as good data. zlib checks both.
 * Anything else (plain, zstd) goes through untouched for libarchive's own filters.
 */
enum { SRC_SNIFF, SRC_PLAIN, SRC_GZIP, SRC_DONE };

typedef struct source {
    sharc__ctx *ctx;
    const char *path;
    int fd;              ///< -1 for memory
    int seekable;        ///< a regular file: payloads of a plain tar are skipped with lseek
    uint64_t file_size;  ///< when seekable
    uint64_t file_id;    ///< sharc__file_id() of a regular file, else 0
    int small_reads;     ///< plain tars are read LAZY_READ_BLOCK bytes at a time
    uint8_t *in;         ///< READ_BLOCK bytes read from fd (NULL for memory)
    uint8_t *out;        ///< READ_BLOCK inflated bytes (gzip only)
    const uint8_t *next; ///< unread input, `avail` bytes
    size_t avail;
    uint64_t total;     ///< input bytes read or skipped so far
    uint64_t hinted_to; ///< payloads left in the file up to here are cached or asked for
    int eof, mode;
    z_stream z;
    int z_ready;
} source;

struct sharc__tar {
    sharc__ctx *ctx;
    struct archive *a;
    source src;
    char *path;
    uint64_t max_member_bytes;
    uint64_t next_index;
    sharc__buf last_name;           ///< the last regular member, to place header errors
    int64_t last_end;               ///< where the last entry's data ends (-1: no entry yet)
    sharc__bufpool *pool;           ///< where member buffers come from, or NULL
    int lazy;                       ///< payloads of a plain tar file are left in the file
    int (*leave)(const char *name); ///< which ones (NULL: all); see sharc__tar_set_lazy
    int read_next;                  ///< sharc__tar_next_read: this member's payload is read
    int status;                     ///< 0 while readable, then SHARC_END or the (sticky) error
    int broke_inside;               ///< with an error status: inside member last_name, not after
};

struct sharc__lines {
    sharc__ctx *ctx;
    struct archive *a;
    source src;
    char *path;
    uint64_t max_line_bytes;
    uint8_t *buf; ///< bytes [pos, end) are unread; end < cap always (room for a NUL)
    size_t cap, pos, end;
    int eof;
    uint64_t lineno;
    int status;
};

/* libarchive's errno says when a failure is the system's rather than the data's. */
static int la_code(struct archive *a, int dflt)
{
    int e = archive_errno(a);
    if (e == ENOMEM)
        return SHARC_ERR(ENOMEM);
    if (e == EIO)
        return SHARC_ERR_IO;
    return dflt;
}

/*
 * Translate a libarchive failure: our context text, then libarchive's own message, set as the
 * handle's error and logged once. ARCHIVE_WARN is logged and accepted (returns 0).
 */
static int la_result(sharc__ctx *ctx, struct archive *a, long r, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int la_result(sharc__ctx *ctx, struct archive *a, long r, int code, const char *fmt, ...)
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

/*
 * The one check for libarchive calls that return a status: anything but ARCHIVE_OK goes
 * through la_result(); on failure `rc` is set and control jumps to `fail`.
 */
#define LA_TRY(ctx, a, call, code, ...)                                                            \
    do {                                                                                           \
        int la_r_ = (call);                                                                        \
        if (la_r_ != ARCHIVE_OK && (rc = la_result((ctx), (a), la_r_, (code), __VA_ARGS__)) < 0)   \
            goto fail;                                                                             \
    } while (0)

/* Open `path` ourselves so that a missing file or a directory gets errno's own text. */
static int open_input(sharc__ctx *ctx, const char *path, int *fd, off_t *size, uint64_t *id)
{
    struct stat st;
    int rc = 0;
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

/* Keep the unread bytes, append what the file has next. */
static int src_fill(source *s, struct archive *a)
{
    if (s->fd < 0) {
        s->eof = 1;
        return 0;
    }
    if (s->avail && s->next != s->in)
        memmove(s->in, s->next, s->avail);
    s->next = s->in;
    const int small = s->mode == SRC_SNIFF || (s->small_reads && s->mode == SRC_PLAIN);
    size_t want = small && s->avail < LAZY_READ_BLOCK ? LAZY_READ_BLOCK : READ_BLOCK;
    ssize_t n;
    double t0 = sharc__now_s();
    do
        n = read(s->fd, s->in + s->avail, want - s->avail);
    while (n < 0 && errno == EINTR);
    /* Benchmarks split reading from decompression with this. */
    s->ctx->io_seconds += sharc__now_s() - t0;
    if (n < 0) {
        archive_set_error(a, errno, "read error: %s", strerror(errno));
        return ARCHIVE_FATAL;
    }
    s->eof = n == 0;
    s->avail += (size_t)n;
    s->total += (uint64_t)n;
    return 0;
}

static int gz_start(source *s, struct archive *a)
{
    s->out = sharc__malloc(s->ctx, READ_BLOCK);
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
static int gz_next_member(source *s, struct archive *a)
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
    s->mode = SRC_DONE;
    return 0;
}

static la_ssize_t gz_read(source *s, struct archive *a, const void **buf)
{
    s->z.next_out = s->out;
    s->z.avail_out = READ_BLOCK;
    while (s->z.avail_out == READ_BLOCK && s->mode == SRC_GZIP) {
        if (s->avail == 0) {
            if (s->eof) {
                archive_set_error(a, EILSEQ, "truncated gzip input");
                return ARCHIVE_FATAL;
            }
            if (src_fill(s, a) < 0)
                return ARCHIVE_FATAL;
            continue;
        }
        uInt in = s->avail > UINT_MAX ? UINT_MAX : (uInt)s->avail;
        s->z.next_in = (Bytef *)(uintptr_t)s->next;
        s->z.avail_in = in;
        int zr = inflate(&s->z, Z_NO_FLUSH);
        s->next += in - s->z.avail_in;
        s->avail -= in - s->z.avail_in;
        if (zr == Z_STREAM_END) {
            if (gz_next_member(s, a) < 0)
                return ARCHIVE_FATAL;
        } else if (zr != Z_OK && !(zr == Z_BUF_ERROR && s->z.avail_in < in)) {
            archive_set_error(a, EILSEQ, "gzip decompression failed: %s",
                              s->z.msg ? s->z.msg : "corrupt data");
            return ARCHIVE_FATAL;
        }
    }
    *buf = s->out;
    return (la_ssize_t)(READ_BLOCK - s->z.avail_out);
}

/*
 * At the end of the archive: inflate what is left of a gzip file (libarchive stops reading at
 * the end-of-archive blocks), so that its CRC and length are checked and a file cut short
 * after them is not taken as whole. Later gzip members are checked the same way; bytes that
 * are not gzip data end it, as with `gzip -d`.
 */
static int src_finish(source *s, struct archive *a)
{
    while (s->mode == SRC_GZIP) {
        const void *block;
        if (gz_read(s, a, &block) < 0)
            return ARCHIVE_FATAL;
    }
    return ARCHIVE_OK;
}

static la_ssize_t src_read(struct archive *a, void *cookie, const void **buf)
{
    source *s = cookie;
    if (s->mode == SRC_SNIFF) {
        while (s->avail < 2 && !s->eof)
            if (src_fill(s, a) < 0)
                return ARCHIVE_FATAL;
        int gz = s->avail >= 2 && s->next[0] == 0x1f && s->next[1] == 0x8b;
        s->mode = gz ? SRC_GZIP : SRC_PLAIN;
        if (gz && gz_start(s, a) < 0)
            return ARCHIVE_FATAL;
    }
    if (s->mode == SRC_GZIP)
        return gz_read(s, a, buf);
    if (s->mode == SRC_PLAIN && s->avail == 0 && !s->eof && src_fill(s, a) < 0)
        return ARCHIVE_FATAL;
    if (s->mode != SRC_PLAIN)
        return 0;
    /* libarchive may use the block until the next call, when src_fill reuses `in`. */
    size_t n = s->avail;
    *buf = s->next;
    s->next += n;
    s->avail = 0;
    return (la_ssize_t)n;
}

static la_int64_t src_skip(struct archive *a, void *cookie, la_int64_t request)
{
    source *s = cookie;
    (void)a;
    if (s->mode != SRC_PLAIN || !s->seekable || s->avail || request <= 0 ||
        lseek(s->fd, (off_t)request, SEEK_CUR) < 0)
        return 0;
    s->total += (uint64_t)request;
    return request;
}

/* Take `fd` (closed by src_free) or `mem`, and hand the stream to libarchive. */
static int src_open(source *s, struct archive *a, sharc__ctx *ctx, const char *path, int fd,
                    int seekable, const void *mem, size_t n)
{
    s->ctx = ctx;
    s->path = path;
    s->fd = fd;
    s->seekable = seekable;
    if (fd >= 0) {
        s->in = sharc__malloc(ctx, READ_BLOCK);
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

static uint64_t src_consumed(const source *s)
{
    return s->total - s->avail;
}

static void src_free(source *s)
{
    if (s->z_ready)
        inflateEnd(&s->z);
    if (s->fd >= 0)
        close(s->fd);
    sharc__free(s->ctx, s->in);
    sharc__free(s->ctx, s->out);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

/* Compression is sniffed from the bytes; no external programs are ever spawned. */
static int new_reader(sharc__ctx *ctx, struct archive **out, int tar, const char *path)
{
    int rc = 0;
    struct archive *a = archive_read_new();
    if (!a)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "%s: cannot create a libarchive reader", path);
    LA_TRY(ctx, a, archive_read_support_filter_gzip(a), SHARC_ERR_UNSUPPORTED, "%s: gzip", path);
    LA_TRY(ctx, a, archive_read_support_filter_zstd(a), SHARC_ERR_UNSUPPORTED, "%s: zstd", path);
    LA_TRY(ctx, a, archive_read_support_filter_none(a), SHARC_ERR_UNSUPPORTED, "%s", path);
    if (tar) {
        LA_TRY(ctx, a, archive_read_support_format_tar(a), SHARC_ERR_UNSUPPORTED, "%s", path);
    } else {
        LA_TRY(ctx, a, archive_read_support_format_raw(a), SHARC_ERR_UNSUPPORTED, "%s", path);
        /* Without it a stream that decompresses to nothing is "Unrecognized archive format". */
        LA_TRY(ctx, a, archive_read_support_format_empty(a), SHARC_ERR_UNSUPPORTED, "%s", path);
    }
    *out = a;
    return 0;
fail:
    archive_read_free(a);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* tar */

static int tar_new(sharc__tar **out, sharc__ctx *ctx, const char *path, uint64_t max_member_bytes)
{
    sharc__tar *t = sharc__calloc(ctx, 1, sizeof *t);
    if (!t)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "%s: out of memory", path);
    t->ctx = ctx;
    t->src.fd = -1;
    t->last_end = -1;
    t->max_member_bytes = max_member_bytes;
    t->path = sharc__strdup(ctx, path);
    *out = t;
    if (!t->path)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "%s: out of memory", path);
    return new_reader(ctx, &t->a, 1, path);
}

int sharc__tar_open(sharc__tar **out, sharc__ctx *ctx, const char *path, uint64_t max_member_bytes)
{
    sharc__tar *t = NULL;
    off_t size = -1;
    *out = NULL;
    int rc = tar_new(&t, ctx, path, max_member_bytes);
    if (rc < 0)
        goto fail;
    int fd = -1;
    uint64_t id = 0;
    if ((rc = open_input(ctx, path, &fd, &size, &id)) < 0)
        goto fail;
    if (size == 0) {
        close(fd);
        rc = sharc__fail_data(ctx, SHARC_ERR_CORRUPT,
                              "%s: empty file (0 bytes), not a tar archive (an empty tar has 1024 "
                              "zero bytes)",
                              path);
        goto fail;
    }
    t->src.file_size = size > 0 ? (uint64_t)size : 0;
    t->src.file_id = id;
    LA_TRY(ctx, t->a, src_open(&t->src, t->a, ctx, t->path, fd, size > 0, NULL, 0),
           SHARC_ERR_CORRUPT, "%s: cannot start reading the archive", path);
    *out = t;
    return 0;
fail:
    sharc__tar_close(&t);
    return rc;
}

int sharc__tar_open_memory(sharc__tar **out, sharc__ctx *ctx, const void *data, size_t n,
                           uint64_t max_member_bytes)
{
    sharc__tar *t = NULL;
    *out = NULL;
    int rc = tar_new(&t, ctx, MEMORY_PATH, max_member_bytes);
    if (rc < 0)
        goto fail;
    if (n == 0) {
        rc = sharc__fail_data(ctx, SHARC_ERR_CORRUPT,
                              "%s: empty input (0 bytes), not a tar archive", MEMORY_PATH);
        goto fail;
    }
    LA_TRY(ctx, t->a, src_open(&t->src, t->a, ctx, t->path, -1, 0, data, n), SHARC_ERR_CORRUPT,
           "%s: cannot start reading the archive", MEMORY_PATH);
    *out = t;
    return 0;
fail:
    sharc__tar_close(&t);
    return rc;
}

const char *sharc__tar_path(const sharc__tar *t)
{
    return t->path;
}

static int is_ascii(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80)
            return 0;
    return 1;
}

static const char *entry_name(struct archive_entry *e)
{
    /* An ASCII name reads the same in every character set. Asking libarchive for the UTF-8
     * form of a name it holds in the locale's form converts it, and libarchive 3.6 opens
     * an iconv descriptor for every such call (measured: 2% of reading WAV shards). */
    const char *mbs = archive_entry_pathname(e);
    if (mbs && is_ascii(mbs))
        return mbs;
    /* PAX names are UTF-8; the locale-dependent form is only a fallback for raw bytes. */
    const char *name = archive_entry_pathname_utf8(e);
    if (!name)
        name = mbs;
    return name ? name : "";
}

/* Advance to the next regular member; its name goes to m->name (and t->last_name). */
/* How far past a plain tar's end-of-archive blocks the bytes are checked to be zeros. */
#define TAIL_CHECK_BYTES ((uint64_t)64 << 20)

/*
 * The zero blocks that end a tar are also what a zeroed or damaged header, or a second tar
 * appended with cat, looks like to a reader, which then stops (libarchive, Python's tarfile
 * and GNU tar without --ignore-zeros alike): the members after them would be lost without a
 * word. A plain tar file is therefore checked to hold only zeros after its end, the padding
 * of its last record. Compressed tars are left alone (their end is inside the decompressor).
 * @return 0, or SHARC_ERR_CORRUPT naming where the data resumes
 */
static int check_after_end(sharc__tar *t)
{
    source *s = &t->src;
    la_int64_t end = archive_filter_bytes(t->a, 0);
    if (s->mode != SRC_PLAIN || !s->seekable || archive_filter_count(t->a) != 1 || end < 0 ||
        (uint64_t)end >= s->file_size)
        return 0;
    /* A file appended to while it was read (tar -rf writes over the end blocks) is no
     * longer the one whose end was seen: nothing to say about it. */
    struct stat st;
    if (fstat(s->fd, &st) != 0 || !sharc__file_is(&st, s->file_id))
        return 0;
    uint8_t *buf = s->in; /* libarchive is done with the last block it was given */
    uint64_t at = (uint64_t)end;
    uint64_t stop = s->file_size - at > TAIL_CHECK_BYTES ? at + TAIL_CHECK_BYTES : s->file_size;
    while (at < stop) {
        size_t want = stop - at < READ_BLOCK ? (size_t)(stop - at) : READ_BLOCK;
        ssize_t got = pread(s->fd, buf, want, (off_t)at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return 0; /* the file shrank or cannot be read: nothing more to check */
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] == 0)
                continue;
            char after[600] = "";
            if (t->last_name.len)
                snprintf(after, sizeof after, " after member '%s'", sharc__buf_str(&t->last_name));
            return sharc__fail_data(t->ctx, SHARC_ERR_CORRUPT,
                                    "%s: the tar ends at byte %lld%s, but data follows (a non-zero "
                                    "byte at %llu of %llu): the members after it cannot be read (a "
                                    "zeroed or damaged header, or tars joined with cat)",
                                    t->path, (long long)end, after,
                                    (unsigned long long)(at + (uint64_t)i),
                                    (unsigned long long)s->file_size);
        }
        at += (uint64_t)got;
    }
    return 0;
}

static int next_regular(sharc__tar *t, sharc__member *m, struct archive_entry **entry)
{
    int rc = 0;
    for (;;) {
        int r = archive_read_next_header(t->a, entry);
        if (r == ARCHIVE_EOF) {
            if (src_finish(&t->src, t->a) != ARCHIVE_OK) {
                /* The damage may be anywhere in the compressed data: no member is named. */
                sharc__buf_clear(&t->last_name);
                return la_result(t->ctx, t->a, ARCHIVE_FATAL, SHARC_ERR_CORRUPT,
                                 "%s: at the end of the gzip data, after the tar's last member",
                                 t->path);
            }
            /* libarchive takes a file that ends right after an entry's data as complete; a
             * tar ends with zero blocks, so that is a file cut short (a writer stopped). */
            if (t->last_end >= 0 && archive_filter_bytes(t->a, 0) == t->last_end)
                return sharc__fail_data(t->ctx, SHARC_ERR_CORRUPT,
                                        "%s: the file ends right after member '%s', without "
                                        "the zero blocks that end a tar: it was cut short",
                                        t->path, sharc__buf_str(&t->last_name));
            if ((rc = check_after_end(t)) < 0)
                return rc;
            return SHARC_END;
        }
        if (r != ARCHIVE_OK) {
            if (t->last_name.len)
                rc = la_result(t->ctx, t->a, r, SHARC_ERR_CORRUPT,
                               "%s: bad tar header after member '%s'", t->path,
                               sharc__buf_str(&t->last_name));
            else
                rc = la_result(t->ctx, t->a, r, SHARC_ERR_CORRUPT,
                               "%s: bad tar header before the first member", t->path);
            if (rc < 0)
                return rc;
        }
        struct archive_entry *e = *entry;
        la_int64_t data_at = archive_filter_bytes(t->a, 0);
        la_int64_t data_size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
        t->last_end = data_at >= 0 && data_size >= 0 && data_size <= INT64_MAX - 1024 - data_at
                          ? data_at + (data_size + 511) / 512 * 512
                          : -1;
        /* Directories and other entries without data are skipped. Links are too, as
         * WebDataset skips them (Lhotse fails on them): their data is another member's or
         * not in the archive. A cut whose audio is a link then has no member, so say why. */
        const char *target = archive_entry_hardlink(e);
        int hard = target != NULL;
        if (!hard && archive_entry_filetype(e) == AE_IFLNK)
            target = archive_entry_symlink(e);
        if (target)
            sharc__log(t->ctx, SHARC_LOG_WARN,
                       "%s: member '%s' is a %s link to '%s', not a file: skipped (sharc reads "
                       "the data of regular members only)",
                       t->path, entry_name(e), hard ? "hard" : "symbolic", target);
        if (archive_entry_filetype(e) != AE_IFREG || hard)
            continue;
        const char *name = entry_name(e);
        if ((rc = sharc__buf_set_str(t->ctx, &m->name, name)) < 0 ||
            (rc = sharc__buf_set_str(t->ctx, &t->last_name, name)) < 0)
            return sharc__fail(t->ctx, rc, "%s: out of memory for member name", t->path);
        m->index = t->next_index++;
        m->size = 0;
        m->in_file = 0;
        sharc__buf_clear(&m->data);
        return 0;
    }
}

/* Payloads left in the file are checked for being cached, or asked for, this many bytes at
 * a time. */
#define PREFETCH_SPAN ((uint64_t)4 << 20)

/*
 * Have the kernel read a payload left in the file now, while the shard is read in order, so
 * that the decode thread finds it in the page cache. Asking for pages that are already
 * cached still costs a lookup per page (measured: 10% of WAV batches), and so does asking
 * whether they are, so this is done for PREFETCH_SPAN bytes from the payload at once: when
 * the span's second page and its last byte are cached, the span is taken as cached (pages
 * are read in order and evicted oldest first, and a shard is usually cached whole or not at
 * all; the first page holds the header just read); else the kernel is asked to read it.
 */
static void prefetch(source *s, uint64_t at, uint64_t size)
{
    if (size == 0 || at + size <= s->hinted_to)
        return;
    uint64_t span = size > PREFETCH_SPAN ? size : PREFETCH_SPAN;
    if (span > s->file_size - at)
        span = s->file_size - at; /* the payload is inside the file: checked by the caller */
    s->hinted_to = at + span;
    const uint64_t probes[2] = {span > 4096 ? at + 4096 : at, at + span - 1};
    for (int i = 0; i < 2; i++) {
        char byte;
        struct iovec v = {&byte, 1};
        if (preadv2(s->fd, &v, 1, (off_t)probes[i], RWF_NOWAIT) != 1) {
            (void)posix_fadvise(s->fd, (off_t)at, (off_t)span, POSIX_FADV_WILLNEED);
            return;
        }
    }
}

/* The declared size is checked against the cap before any allocation. */
static int read_payload(sharc__tar *t, sharc__member *m, struct archive_entry *e)
{
    const char *name = sharc__buf_str(&m->name);
    if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0)
        return sharc__fail_data(t->ctx, SHARC_ERR_CORRUPT, "%s: member '%s' has no valid size",
                                t->path, name);
    uint64_t size = (uint64_t)archive_entry_size(e);
    if (size > t->max_member_bytes || size >= SIZE_MAX)
        return sharc__set_error(t->ctx, SHARC_ERR_TOO_LARGE,
                                "%s: member '%s' is %llu bytes, over the cap of %llu bytes",
                                t->path, name, (unsigned long long)size,
                                (unsigned long long)t->max_member_bytes);
    m->size = size;
    if (t->lazy && t->src.mode == SRC_PLAIN && t->src.seekable &&
        archive_entry_sparse_count(e) == 0 && !t->read_next && (!t->leave || t->leave(name))) {
        /* The payload starts where libarchive stopped consuming: right after the header(s). */
        la_int64_t at = archive_filter_bytes(t->a, 0);
        uint64_t left = at >= 0 && (uint64_t)at <= t->src.file_size
                            ? t->src.file_size - (uint64_t)at
                            : 0; /* bytes of the file from the payload on */
        if (size > left)
            return sharc__fail_data(t->ctx, SHARC_ERR_CORRUPT,
                                    "%s: member '%s' ends after %llu of its %llu bytes", t->path,
                                    name, (unsigned long long)left, (unsigned long long)size);
        m->at = (uint64_t)at;
        m->in_file = 1;
        m->file_id = t->src.file_id;
        prefetch(&t->src, (uint64_t)at, size);
        return 0; /* the next header skips the payload (with lseek) */
    }
    if (t->pool && !sharc__bufpool_fits(m->data.cap, (size_t)size))
        sharc__bufpool_take(t->pool, (size_t)size, &m->data);
    int rc = sharc__buf_reserve(t->ctx, &m->data, (size_t)size);
    if (rc < 0)
        return sharc__fail(t->ctx, rc, "%s: member '%s': cannot allocate %llu bytes", t->path, name,
                           (unsigned long long)size);
    /* Blocks point into the stream's own buffer: one copy. */
    size_t got = 0;
    for (;;) {
        const void *block;
        size_t len;
        la_int64_t at;
        int r = archive_read_data_block(t->a, &block, &len, &at);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
            return la_result(t->ctx, t->a, ARCHIVE_FATAL, SHARC_ERR_CORRUPT,
                             "%s: member '%s' (at byte %zu of %llu)", t->path, name, got,
                             (unsigned long long)size);
        if (at < (la_int64_t)got || (uint64_t)at > size || len > size - (uint64_t)at)
            return sharc__fail_data(t->ctx, SHARC_ERR_CORRUPT,
                                    "%s: member '%s' has data outside its %llu bytes", t->path,
                                    name, (unsigned long long)size);
        memset(m->data.data + got, 0, (size_t)at - got); /* a hole of a sparse member */
        if (t->pool) /* batch mode: the member waits in the sampler's buffer */
            sharc__memcpy_stream(m->data.data + at, block, len);
        else
            memcpy(m->data.data + at, block, len);
        got = (size_t)at + len;
    }
    if (got < size && archive_entry_sparse_count(e) == 0)
        return sharc__fail_data(t->ctx, SHARC_ERR_CORRUPT,
                                "%s: member '%s' ends after %zu of its %llu bytes", t->path, name,
                                got, (unsigned long long)size);
    memset(m->data.data + got, 0, (size_t)size - got); /* a sparse member's trailing hole */
    m->data.len = (size_t)size;
    m->data.data[size] = 0;
    return 0;
}

/* After a failure, m->name is the member it concerns (as the message names it): the one
 * being read (t->broke_inside), or the last one read when the archive broke right after it;
 * empty for none. */
static int name_failure(sharc__tar *t, sharc__member *m, int rc)
{
    if (sharc__buf_set_str(t->ctx, &m->name, sharc__buf_str(&t->last_name)) < 0)
        sharc__buf_clear(&m->name); /* the error itself still stands */
    m->broke_inside = t->broke_inside;
    return rc;
}

static int tar_step(sharc__tar *t, sharc__member *m, int with_data, uint64_t *size)
{
    if (t->status)
        return t->status < 0 ? name_failure(t, m, t->status) : t->status;
    struct archive_entry *e = NULL;
    int rc = next_regular(t, m, &e);
    if (rc == 0 && size)
        *size = archive_entry_size_is_set(e) && archive_entry_size(e) > 0
                    ? (uint64_t)archive_entry_size(e)
                    : 0;
    /* A header read, the payload is all that can fail: inside that member. */
    t->broke_inside = rc == 0 && with_data;
    if (rc == 0 && with_data)
        rc = read_payload(t, m, e);
    /* An oversized member is skipped by the next call; every other outcome is final. */
    if (rc != 0 && rc != SHARC_ERR_TOO_LARGE)
        t->status = rc;
    return rc < 0 ? name_failure(t, m, rc) : rc;
}

int sharc__tar_next(sharc__tar *t, sharc__member *m)
{
    return tar_step(t, m, 1, NULL);
}

int sharc__tar_next_read(sharc__tar *t, sharc__member *m)
{
    t->read_next = 1;
    int rc = tar_step(t, m, 1, NULL);
    t->read_next = 0;
    return rc;
}

int sharc__tar_next_header(sharc__tar *t, sharc__member *m, uint64_t *size)
{
    return tar_step(t, m, 0, size);
}

void sharc__tar_set_pool(sharc__tar *t, sharc__bufpool *pool)
{
    t->pool = pool;
}

int sharc__tar_file_is_plain(const char *path)
{
    uint8_t magic[4] = {0};
    struct stat st;
    /* Only regular files are opened: opening a named pipe would block until a writer came,
     * or take the one that came and lose what it wrote when this closes it. */
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int plain = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
                !(magic[0] == 0x1f && magic[1] == 0x8b) &&
                !(magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd);
    close(fd);
    return plain;
}

void sharc__tar_set_lazy(sharc__tar *t, int (*leave)(const char *name))
{
    /* A tar that libarchive decompresses (zstd; gzip is inflated here, in the source) has
     * its payloads at offsets of the decompressed stream, not of the file: read them. */
    if (archive_filter_code(t->a, 0) != ARCHIVE_FILTER_NONE)
        return;
    t->lazy = 1;
    t->leave = leave;
    t->src.small_reads = 1;
}

uint64_t sharc__tar_bytes_read(const sharc__tar *t)
{
    return src_consumed(&t->src);
}

void sharc__tar_close(sharc__tar **tp)
{
    sharc__tar *t = tp ? *tp : NULL;
    if (!t)
        return;
    archive_read_free(t->a);
    src_free(&t->src);
    sharc__buf_free(t->ctx, &t->last_name);
    sharc__free(t->ctx, t->path);
    sharc__free(t->ctx, t);
    *tp = NULL;
}

void sharc__member_free(sharc__ctx *ctx, sharc__member *m)
{
    if (!m)
        return;
    sharc__buf_free(ctx, &m->name);
    sharc__buf_free(ctx, &m->data);
    m->index = 0;
}

/* ---------------------------------------------------------------------------------------- */
/* lines */

static int lines_new(sharc__lines **out, sharc__ctx *ctx, const char *path, uint64_t max_line)
{
    sharc__lines *l = sharc__calloc(ctx, 1, sizeof *l);
    if (!l)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "%s: out of memory", path);
    l->ctx = ctx;
    l->src.fd = -1;
    l->max_line_bytes = max_line;
    *out = l;
    l->path = sharc__strdup(ctx, path);
    l->cap = LINE_BUF_INITIAL;
    l->buf = sharc__malloc(ctx, l->cap);
    if (!l->path || !l->buf)
        return sharc__fail(ctx, SHARC_ERR(ENOMEM), "%s: out of memory", path);
    return new_reader(ctx, &l->a, 0, path);
}

/* Position on the single raw entry; a stream that decompresses to nothing ends at once. */
static int lines_start(sharc__lines *l)
{
    struct archive_entry *e;
    int r = archive_read_next_header(l->a, &e);
    if (r == ARCHIVE_EOF) {
        /* The "empty" format also bids when a decompressor failed before its first byte. */
        if (archive_errno(l->a) != 0 || archive_error_string(l->a))
            return la_result(l->ctx, l->a, ARCHIVE_FATAL, SHARC_ERR_CORRUPT, "%s", l->path);
        l->status = SHARC_END;
        return 0;
    }
    if (r != ARCHIVE_OK)
        return la_result(l->ctx, l->a, r, SHARC_ERR_CORRUPT, "%s", l->path);
    return 0;
}

int sharc__lines_open(sharc__lines **out, sharc__ctx *ctx, const char *path,
                      uint64_t max_line_bytes)
{
    sharc__lines *l = NULL;
    off_t size = -1;
    *out = NULL;
    int rc = lines_new(&l, ctx, path, max_line_bytes);
    if (rc < 0)
        goto fail;
    int fd = -1;
    uint64_t id;
    if ((rc = open_input(ctx, path, &fd, &size, &id)) < 0)
        goto fail;
    if (size == 0) {
        close(fd);
        l->status = SHARC_END;
        *out = l;
        return 0;
    }
    LA_TRY(ctx, l->a, src_open(&l->src, l->a, ctx, l->path, fd, size > 0, NULL, 0),
           SHARC_ERR_CORRUPT, "%s: cannot read", path);
    if ((rc = lines_start(l)) < 0)
        goto fail;
    *out = l;
    return 0;
fail:
    sharc__lines_close(&l);
    return rc;
}

int sharc__lines_open_memory(sharc__lines **out, sharc__ctx *ctx, const void *data, size_t n,
                             uint64_t max_line_bytes)
{
    sharc__lines *l = NULL;
    *out = NULL;
    int rc = lines_new(&l, ctx, MEMORY_PATH, max_line_bytes);
    if (rc < 0)
        goto fail;
    if (n == 0) {
        l->status = SHARC_END;
        *out = l;
        return 0;
    }
    LA_TRY(ctx, l->a, src_open(&l->src, l->a, ctx, l->path, -1, 0, data, n), SHARC_ERR_CORRUPT,
           "%s: cannot read", MEMORY_PATH);
    if ((rc = lines_start(l)) < 0)
        goto fail;
    *out = l;
    return 0;
fail:
    sharc__lines_close(&l);
    return rc;
}

static int line_too_long(sharc__lines *l, uint64_t lineno)
{
    return sharc__fail_data(l->ctx, SHARC_ERR_TOO_LARGE, "%s: line %llu is longer than %llu bytes",
                            l->path, (unsigned long long)lineno,
                            (unsigned long long)l->max_line_bytes);
}

/* Keep the unread tail, make room, and read more decompressed bytes after it. */
static int lines_fill(sharc__lines *l)
{
    size_t pending = l->end - l->pos;
    /* A pending line without '\n' that is over the cap even after dropping a '\r'. */
    if (pending > 1 && (uint64_t)(pending - 1) > l->max_line_bytes)
        return line_too_long(l, l->lineno + 1);
    if (l->pos > 0) {
        memmove(l->buf, l->buf + l->pos, pending);
        l->pos = 0;
        l->end = pending;
    }
    if (l->end + 1 >= l->cap) {
        if (l->cap > SIZE_MAX / 2)
            return line_too_long(l, l->lineno + 1);
        uint8_t *p = sharc__realloc(l->ctx, l->buf, l->end, l->cap * 2);
        if (!p)
            return sharc__fail(l->ctx, SHARC_ERR(ENOMEM), "%s: out of memory at line %llu", l->path,
                               (unsigned long long)(l->lineno + 1));
        l->buf = p;
        l->cap *= 2;
    }
    la_ssize_t n = archive_read_data(l->a, l->buf + l->end, l->cap - 1 - l->end);
    if (n < 0)
        return la_result(l->ctx, l->a, ARCHIVE_FATAL, SHARC_ERR_CORRUPT, "%s: at line %llu",
                         l->path, (unsigned long long)(l->lineno + 1));
    if (n == 0)
        l->eof = 1;
    l->end += (size_t)n;
    return 0;
}

/* 1 when the line holds only blanks; a line's own '\r' is stripped before. */
static int is_blank(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v')
            return 0;
    return 1;
}

int sharc__lines_next(sharc__lines *l, const char **line, size_t *len, uint64_t *lineno)
{
    while (!l->status) {
        uint8_t *start = l->buf + l->pos;
        size_t avail = l->end - l->pos, n;
        uint8_t *nl = memchr(start, '\n', avail);
        if (nl) {
            n = (size_t)(nl - start);
            l->pos += n + 1;
        } else if (l->eof) {
            if (avail == 0) {
                l->status = SHARC_END;
                break;
            }
            n = avail;
            l->pos = l->end;
        } else {
            int rc = lines_fill(l);
            if (rc < 0)
                l->status = rc;
            continue;
        }
        l->lineno++;
        if (n > 0 && start[n - 1] == '\r')
            n--;
        if (l->lineno == 1 && n >= 3 && memcmp(start, "\xEF\xBB\xBF", 3) == 0) {
            start += 3; /* a UTF-8 byte order mark is not part of the first line */
            n -= 3;
        }
        if ((uint64_t)n > l->max_line_bytes) {
            l->status = line_too_long(l, l->lineno);
            break;
        }
        if (memchr(start, 0, n)) {
            l->status =
                sharc__fail_data(l->ctx, SHARC_ERR_CORRUPT, "%s: line %llu contains a NUL byte",
                                 l->path, (unsigned long long)l->lineno);
            break;
        }
        if (is_blank(start, n))
            continue;
        start[n] = 0; /* the '\n' or '\r', or the spare byte past `end` */
        *line = (const char *)start;
        *len = n;
        *lineno = l->lineno;
        return 0;
    }
    return l->status;
}

void sharc__lines_close(sharc__lines **lp)
{
    sharc__lines *l = lp ? *lp : NULL;
    if (!l)
        return;
    archive_read_free(l->a);
    src_free(&l->src);
    sharc__free(l->ctx, l->buf);
    sharc__free(l->ctx, l->path);
    sharc__free(l->ctx, l);
    *lp = NULL;
}

#include "io/tar.h"
#include "io/bufpool.h"
#include "io/fetch.h"
#include "io/source.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

struct sharc__tar {
    sharc__ctx *ctx;
    struct archive *a;
    sharc__source src;
    char *path;
    uint64_t max_member_bytes;
    uint64_t next_index;
    sharc__buf last_name;           ///< the last regular member, to place header errors
    int64_t last_end;               ///< where the last entry's data ends (-1: no entry yet)
    sharc__bufpool *pool;           ///< where member buffers come from, or NULL
    int lazy;                       ///< payloads of a plain tar file are left in the file
    int (*leave)(const char *name); ///< which ones (NULL: all); see sharc__tar_set_lazy
    int ranged;                     ///< long WAV members of a remote plain tar are left there
    int read_next;                  ///< sharc__tar_next_read: this member's payload is read
    int status;                     ///< 0 while readable, then SHARC_END or the (sticky) error
    int broke_inside;               ///< with an error status: inside member last_name, not after
};

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
    return sharc__archive_reader_new(ctx, &t->a, 1, path);
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
    sharc__remote *remote;
    if ((rc = sharc__open_input(ctx, path, &fd, &size, &id, &remote)) < 0)
        goto fail;
    t->src.remote = remote; /* owned by the source from here on */
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
    SHARC__LA_TRY(ctx, t->a, sharc__source_open(&t->src, t->a, ctx, t->path, fd, size > 0, NULL, 0),
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
    int rc = tar_new(&t, ctx, SHARC__MEMORY_PATH, max_member_bytes);
    if (rc < 0)
        goto fail;
    if (n == 0) {
        rc = sharc__fail_data(ctx, SHARC_ERR_CORRUPT,
                              "%s: empty input (0 bytes), not a tar archive", SHARC__MEMORY_PATH);
        goto fail;
    }
    SHARC__LA_TRY(ctx, t->a, sharc__source_open(&t->src, t->a, ctx, t->path, -1, 0, data, n),
                  SHARC_ERR_CORRUPT, "%s: cannot start reading the archive", SHARC__MEMORY_PATH);
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
    sharc__source *s = &t->src;
    la_int64_t end = archive_filter_bytes(t->a, 0);
    if (s->mode != SHARC__SRC_PLAIN || !s->seekable || archive_filter_count(t->a) != 1 || end < 0 ||
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
        size_t want = stop - at < SHARC__READ_BLOCK ? (size_t)(stop - at) : SHARC__READ_BLOCK;
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
            if (sharc__source_finish(&t->src, t->a) != ARCHIVE_OK) {
                /* The damage may be anywhere in the compressed data: no member is named. */
                sharc__buf_clear(&t->last_name);
                return sharc__la_result(
                    t->ctx, t->a, ARCHIVE_FATAL, SHARC_ERR_CORRUPT,
                    "%s: at the end of the gzip data, after the tar's last member", t->path);
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
                rc = sharc__la_result(t->ctx, t->a, r, SHARC_ERR_CORRUPT,
                                      "%s: bad tar header after member '%s'", t->path,
                                      sharc__buf_str(&t->last_name));
            else
                rc = sharc__la_result(t->ctx, t->a, r, SHARC_ERR_CORRUPT,
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
static void prefetch(sharc__source *s, uint64_t at, uint64_t size)
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
    if (t->lazy && t->src.mode == SHARC__SRC_PLAIN && t->src.seekable &&
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
    if (t->ranged && t->src.mode == SHARC__SRC_PLAIN && archive_entry_sparse_count(e) == 0 &&
        !t->read_next && sharc__tar_ranged_member(name, size)) {
        la_int64_t at = archive_filter_bytes(t->a, 0);
        if (at < 0)
            return sharc__fail_data(t->ctx, SHARC_ERR_CORRUPT,
                                    "%s: member '%s': its place in the stream is unknown", t->path,
                                    name);
        /* The object's identity is known once its first answer came, before any member. */
        if (!t->src.file_id)
            t->src.file_id = sharc__remote_object_id(t->src.remote);
        m->at = (uint64_t)at;
        m->in_file = 1;
        m->file_id = t->src.file_id;
        return 0; /* the next header skips the payload (a new request past it) */
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
            return sharc__la_result(t->ctx, t->a, ARCHIVE_FATAL, SHARC_ERR_CORRUPT,
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
    /* Nor can a stream that cannot seek (a pipe, a remote shard) leave payloads behind, and
     * small reads would only cost it a wake-up per 4 KiB. */
    if (!t->src.seekable)
        return;
    t->lazy = 1;
    t->leave = leave;
    t->src.small_reads = 1;
}

int sharc__tar_ranged_member(const char *name, uint64_t size)
{
    size_t n = strlen(name);
    return size >= SHARC__TAR_RANGED_MIN && n >= 4 && strcasecmp(name + n - 4, ".wav") == 0;
}

void sharc__tar_set_ranged(sharc__tar *t)
{
    if (t->src.remote && sharc__remote_can_seek(t->src.remote) &&
        archive_filter_code(t->a, 0) == ARCHIVE_FILTER_NONE)
        t->ranged = 1;
}

uint64_t sharc__tar_bytes_read(const sharc__tar *t)
{
    return sharc__source_consumed(&t->src);
}

void sharc__tar_close(sharc__tar **tp)
{
    sharc__tar *t = tp ? *tp : NULL;
    if (!t)
        return;
    archive_read_free(t->a);
    sharc__source_free(&t->src);
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

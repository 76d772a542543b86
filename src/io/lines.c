#include "io/lines.h"
#include "io/source.h"

#include <archive.h>
#include <errno.h>
#include <string.h>

/* First size of the line buffer; it grows (doubling) up to about twice the line cap. */
#define LINE_BUF_INITIAL (64u << 10)

struct sharc__lines {
    sharc__ctx *ctx;
    struct archive *a;
    sharc__source src;
    char *path;
    uint64_t max_line_bytes;
    uint8_t *buf; ///< bytes [pos, end) are unread; end < cap always (room for a NUL)
    size_t cap, pos, end;
    int eof;
    uint64_t lineno;
    int status;
};

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
    return sharc__archive_reader_new(ctx, &l->a, 0, path);
}

/* Position on the single raw entry; a stream that decompresses to nothing ends at once. */
static int lines_start(sharc__lines *l)
{
    struct archive_entry *e;
    int r = archive_read_next_header(l->a, &e);
    if (r == ARCHIVE_EOF) {
        /* The "empty" format also bids when a decompressor failed before its first byte. */
        if (archive_errno(l->a) != 0 || archive_error_string(l->a))
            return sharc__la_result(l->ctx, l->a, ARCHIVE_FATAL, SHARC_ERR_CORRUPT, "%s", l->path);
        l->status = SHARC_END;
        return 0;
    }
    if (r != ARCHIVE_OK)
        return sharc__la_result(l->ctx, l->a, r, SHARC_ERR_CORRUPT, "%s", l->path);
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
    sharc__remote *remote;
    if ((rc = sharc__open_input(ctx, path, &fd, &size, &id, &remote)) < 0)
        goto fail;
    l->src.remote = remote; /* owned by the source from here on */
    if (size == 0) {
        close(fd);
        l->status = SHARC_END;
        *out = l;
        return 0;
    }
    SHARC__LA_TRY(ctx, l->a, sharc__source_open(&l->src, l->a, ctx, l->path, fd, size > 0, NULL, 0),
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
    int rc = lines_new(&l, ctx, SHARC__MEMORY_PATH, max_line_bytes);
    if (rc < 0)
        goto fail;
    if (n == 0) {
        l->status = SHARC_END;
        *out = l;
        return 0;
    }
    SHARC__LA_TRY(ctx, l->a, sharc__source_open(&l->src, l->a, ctx, l->path, -1, 0, data, n),
                  SHARC_ERR_CORRUPT, "%s: cannot read", SHARC__MEMORY_PATH);
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
        return sharc__la_result(l->ctx, l->a, ARCHIVE_FATAL, SHARC_ERR_CORRUPT, "%s: at line %llu",
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
    sharc__source_free(&l->src);
    sharc__free(l->ctx, l->buf);
    sharc__free(l->ctx, l->path);
    sharc__free(l->ctx, l);
    *lp = NULL;
}

/*
 * The files of the shards a writer writes: each under a temporary name until finish, the
 * tars (libarchive), the Shar cuts files (zlib) and the NeMo manifests (stdio), and the
 * JSON lines they hold, byte for byte as Lhotse's SharWriter and NeMo's tools write them.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/layout.h"
#include "write/writer_impl.h"

int sharc__writer_cancelled(sharc_writer *w)
{
    if (!w->s.cancel || !w->s.cancel(w->s.cancel_cookie))
        return 0;
    return sharc__set_error(&w->ctx, SHARC_ERR(ECANCELED), "cancelled");
}

/* ---- JSON text into a buffer; running out of memory sets w->json_oom ---- */

static void jput(sharc_writer *w, sharc__buf *b, const char *s, size_t n)
{
    if (!w->json_oom && sharc__buf_append(&w->ctx, b, s, n) != 0)
        w->json_oom = 1;
}

static void jputs(sharc_writer *w, sharc__buf *b, const char *s)
{
    jput(w, b, s, strlen(s));
}

static void jfmt(sharc_writer *w, sharc__buf *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void jfmt(sharc_writer *w, sharc__buf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    jput(w, b, tmp, n < 0 ? 0 : (size_t)n);
}

/* The length of the valid UTF-8 sequence at p (judged by sharc_utf8_invalid_at), or 0. */
static size_t utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    size_t n = *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC0 ? 2 : 0;
    return n && (size_t)(end - p) >= n && sharc_utf8_invalid_at((const char *)p, n) == n ? n : 0;
}

/* A JSON string: UTF-8 as it is; a byte that is not UTF-8 as Python's surrogateescape
 * decodes it, so that the line stays valid JSON. */
static void jstr(sharc_writer *w, sharc__buf *b, const char *s)
{
    jputs(w, b, "\"");
    const unsigned char *end = (const unsigned char *)s + strlen(s);
    for (const unsigned char *p = (const unsigned char *)s; p < end; p++) {
        if (*p >= 0x80) {
            size_t k = utf8_sequence(p, end);
            if (k)
                jput(w, b, (const char *)p, k);
            else
                jfmt(w, b, "\\udc%02x", *p);
            p += k ? k - 1 : 0;
            continue;
        }
        const char *esc = *p == '"'    ? "\\\""
                          : *p == '\\' ? "\\\\"
                          : *p == '\n' ? "\\n"
                          : *p == '\r' ? "\\r"
                          : *p == '\t' ? "\\t"
                                       : NULL;
        if (esc)
            jputs(w, b, esc);
        else if (*p < 0x20 || *p == 0x7f)
            jfmt(w, b, "\\u%04x", *p);
        else
            jput(w, b, (const char *)p, 1);
    }
    jputs(w, b, "\"");
}

/* The shortest of %.15g..%.17g that reads back as the same double. */
static void jnum(sharc_writer *w, sharc__buf *b, double v)
{
    if (!isfinite(v)) {
        jputs(w, b, "null");
        return;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    jputs(w, b, buf);
}

static void jchannels(sharc_writer *w, sharc__buf *b, int channels)
{
    jputs(w, b, "[");
    for (int c = 0; c < channels; c++)
        jfmt(w, b, c ? ", %d" : "%d", c);
    jputs(w, b, "]");
}

static void jchannel(sharc_writer *w, sharc__buf *b, int channels)
{
    if (channels == 1)
        jputs(w, b, "0");
    else
        jchannels(w, b, channels);
}

/* Lhotse's recording placeholder (to_shar_placeholder): the tar's .json and the cut's
 * "recording". The recording id is the cut id, as Recording.to_cut() gives it. */
static void shar_recording(sharc_writer *w, sharc__buf *b, const sharc__wcut *c)
{
    const sharc_writer_audio *a = &c->audio;
    jputs(w, b, "{\"id\": ");
    jstr(w, b, c->cut->id);
    jputs(w, b, ", \"sources\": [{\"type\": \"shar\", \"channels\": ");
    jchannels(w, b, a->channels);
    jfmt(w, b, ", \"source\": \"\"}], \"sampling_rate\": %d, \"num_samples\": %" PRId64,
         a->sampling_rate, a->frames);
    jputs(w, b, ", \"duration\": ");
    jnum(w, b, a->duration);
    jputs(w, b, ", \"channel_ids\": ");
    jchannels(w, b, a->channels);
    jputs(w, b, "}");
}

/* A MonoCut (MultiCut for several channels) as Lhotse's to_dict() writes it; the supervision
 * spans the whole cut and carries only the fields the cut has. */
static void shar_cut_line(sharc_writer *w, sharc__buf *b, const sharc__wcut *c)
{
    const sharc_writer_cut *cut = c->cut;
    double d = c->audio.duration;
    jputs(w, b, "{\"id\": ");
    jstr(w, b, cut->id);
    jputs(w, b, ", \"start\": 0, \"duration\": ");
    jnum(w, b, d);
    jputs(w, b, ", \"channel\": ");
    jchannel(w, b, c->audio.channels);
    jputs(w, b, ", \"supervisions\": [");
    if (cut->text || cut->speaker || cut->language) {
        jputs(w, b, "{\"id\": ");
        jstr(w, b, cut->id);
        jputs(w, b, ", \"recording_id\": ");
        jstr(w, b, cut->id);
        jputs(w, b, ", \"start\": 0.0, \"duration\": ");
        jnum(w, b, d);
        jputs(w, b, ", \"channel\": ");
        jchannel(w, b, c->audio.channels);
        const char *keys[] = {"text", "language", "speaker"};
        const char *vals[] = {cut->text, cut->language, cut->speaker};
        for (int k = 0; k < 3; k++) {
            if (!vals[k])
                continue;
            jfmt(w, b, ", \"%s\": ", keys[k]);
            jstr(w, b, vals[k]);
        }
        jputs(w, b, "}");
    }
    jputs(w, b, "], \"recording\": ");
    shar_recording(w, b, c);
    jputs(w, b,
          c->audio.channels == 1 ? ", \"type\": \"MonoCut\"}\n" : ", \"type\": \"MultiCut\"}\n");
}

/* NeMo's tarred manifest row: audio_filepath is the member's name. */
static void nemo_row(sharc_writer *w, sharc__buf *b, const sharc__wcut *c, const char *member)
{
    const sharc_writer_cut *cut = c->cut;
    jputs(w, b, "{\"audio_filepath\": ");
    jstr(w, b, member);
    jputs(w, b, ", \"duration\": ");
    jnum(w, b, c->audio.duration);
    jputs(w, b, ", \"text\": ");
    jstr(w, b, cut->text ? cut->text : "");
    if (cut->language) {
        jputs(w, b, ", \"lang\": ");
        jstr(w, b, cut->language);
    }
    if (cut->speaker) {
        jputs(w, b, ", \"speaker\": ");
        jstr(w, b, cut->speaker);
    }
    jfmt(w, b, ", \"shard_id\": %d}\n", w->shard);
}

/* ---- files under temporary names ---- */

static char *path_fmt(sharc_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *path_fmt(sharc_writer *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n < 0 ? NULL : sharc__malloc(&w->ctx, (size_t)n + 1);
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* Create the temporary file of `path`, ".NAME.PID.N.tmp" next to it (the name shortened so
 * that it fits in NAME_MAX where the name does). @return 0 or a negative errno */
static int make_tmp(sharc_writer *w, const char *path, char **tmp)
{
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    for (int attempt = 0; attempt < 1000; attempt++) {
        char *name = path_fmt(w, "%.*s.%.200s.%ld.%lu.tmp", dir_len, path, base, (long)getpid(),
                              w->tmp_counter++);
        if (!name)
            return SHARC_ERR(ENOMEM);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            close(fd);
            *tmp = name;
            return 0;
        }
        int err = errno;
        sharc__free(&w->ctx, name);
        if (err != EEXIST)
            return SHARC_ERR(err);
    }
    return SHARC_ERR(EEXIST);
}

/* Record `path` (taken) as written and create its temporary file, which *tmp names. */
static int note_file(sharc_writer *w, char *path, const char **tmp)
{
    if (!path)
        return sharc__set_error(&w->ctx, SHARC_ERR(ENOMEM), "out of memory");
    if (w->n_files == w->cap_files) {
        size_t cap = w->cap_files ? 2 * w->cap_files : 16;
        char **v = sharc__realloc(&w->ctx, w->files, w->cap_files * sizeof *v, cap * sizeof *v);
        if (v)
            w->files = v;
        char **t =
            v ? sharc__realloc(&w->ctx, w->tmps, w->cap_files * sizeof *t, cap * sizeof *t) : NULL;
        if (t)
            w->tmps = t;
        if (!v || !t) { /* files may have grown alone: cap_files stays the smaller */
            sharc__free(&w->ctx, path);
            return sharc__set_error(&w->ctx, SHARC_ERR(ENOMEM), "out of memory");
        }
        w->cap_files = cap;
    }
    char *name = NULL;
    int rc = make_tmp(w, path, &name);
    if (rc == SHARC_ERR(ENOMEM)) {
        sharc__set_error(&w->ctx, rc, "out of memory");
        sharc__free(&w->ctx, path);
        return rc;
    }
    if (rc != 0) {
        sharc__set_error(&w->ctx, rc, "cannot write %s: %s", path, strerror(-rc));
        sharc__free(&w->ctx, path);
        return rc;
    }
    w->files[w->n_files] = path;
    w->tmps[w->n_files++] = name;
    w->stats.files++;
    *tmp = name;
    return 0;
}

void sharc__writer_free_files(sharc_writer *w)
{
    for (size_t i = 0; i < w->n_files; i++) {
        sharc__free(&w->ctx, w->files[i]);
        sharc__free(&w->ctx, w->tmps[i]);
    }
    sharc__free(&w->ctx, w->files);
    sharc__free(&w->ctx, w->tmps);
    w->files = w->tmps = NULL;
    w->n_files = w->cap_files = w->n_renamed = 0;
}

int sharc__writer_rename_all(sharc_writer *w)
{
    while (w->n_renamed < w->n_files) {
        int rc = sharc__writer_cancelled(w);
        if (rc != 0)
            return rc;
        size_t i = w->n_renamed;
        if (rename(w->tmps[i], w->files[i]) != 0)
            return sharc__set_error(&w->ctx, SHARC_ERR(errno), "cannot write %s: %s", w->files[i],
                                    strerror(errno));
        w->n_renamed++;
    }
    return 0;
}

size_t sharc__writer_remove_files(sharc_writer *w)
{
    for (size_t i = 0; i < w->n_files; i++)
        unlink(i < w->n_renamed ? w->files[i] : w->tmps[i]);
    return w->n_files;
}

/* ---- tars ---- */

static const char *const tar_suffix[] = {"", ".gz", ".zst"};

static int tar_begin(sharc_writer *w, const char *name_fmt)
{
    char *path = path_fmt(w, "%s/", w->out), *full = NULL;
    if (path) {
        char name[64];
        snprintf(name, sizeof name, name_fmt, w->shard);
        full = path_fmt(w, "%s%s%s", path, name, tar_suffix[w->s.compression]);
        sharc__free(&w->ctx, path);
    }
    const char *tmp;
    int rc = note_file(w, full, &tmp);
    if (rc != 0)
        return rc;
    w->tar_file = w->n_files - 1;
    /* A plain tar ends padded to tarfile's 10240-byte records, as Lhotse's are; a compressed
     * stream is not padded after its end (zstd refuses trailing zeros). */
    struct archive *a = archive_write_new();
    w->tar = a;
    int plain = w->s.compression == SHARC_WRITER_COMPRESS_NONE;
    int ok = a && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK &&
             archive_write_set_bytes_per_block(a, 10240) == ARCHIVE_OK &&
             archive_write_set_bytes_in_last_block(a, plain ? 10240 : 1) == ARCHIVE_OK;
    if (ok && w->s.compression == SHARC_WRITER_COMPRESS_GZIP)
        ok = archive_write_add_filter_gzip(a) == ARCHIVE_OK &&
             archive_write_set_filter_option(a, "gzip", "timestamp", NULL) == ARCHIVE_OK;
    if (ok && w->s.compression == SHARC_WRITER_COMPRESS_ZSTD) {
        ok = archive_write_add_filter_zstd(a) == ARCHIVE_OK;
        /* Threads where this libarchive has the option; one thread otherwise. */
        char threads[16];
        snprintf(threads, sizeof threads, "%d", w->s.zstd_threads > 1 ? w->s.zstd_threads : 1);
        if (ok && w->s.zstd_threads > 1)
            (void)archive_write_set_filter_option(a, "zstd", "threads", threads);
    }
    if (!ok || archive_write_open_filename(a, tmp) != ARCHIVE_OK)
        return sharc__set_error(&w->ctx, a ? SHARC_ERR_IO : SHARC_ERR(ENOMEM),
                                "cannot write %s: %s", w->files[w->tar_file],
                                a ? archive_error_string(a) ? archive_error_string(a)
                                                            : "libarchive error"
                                  : "out of memory");
    return 0;
}

static int tar_fail(sharc_writer *w, const char *name)
{
    return sharc__set_error(&w->ctx, SHARC_ERR_IO, "cannot write %s: member %s: %s",
                            w->files[w->tar_file], name, archive_error_string(w->tar));
}

static int tar_header(sharc_writer *w, const char *name, int64_t size)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return sharc__set_error(&w->ctx, SHARC_ERR(ENOMEM), "out of memory");
    archive_entry_set_pathname_utf8(e, name); /* in a UTF-8 LC_CTYPE: see sharc_writer_add */
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, 0, 0);
    int ok = archive_write_header(w->tar, e) == ARCHIVE_OK;
    archive_entry_free(e);
    return ok ? 0 : tar_fail(w, name);
}

static int tar_data(sharc_writer *w, const char *name, const void *p, size_t n)
{
    if (n && archive_write_data(w->tar, p, n) != (la_ssize_t)n)
        return tar_fail(w, name);
    return 0;
}

/* Whether the file's status `now` is not what it was when its header was checked. */
static int file_changed(const struct stat *then, const struct stat *now)
{
    return then->st_dev != now->st_dev || then->st_ino != now->st_ino ||
           then->st_size != now->st_size || then->st_mtim.tv_sec != now->st_mtim.tv_sec ||
           then->st_mtim.tv_nsec != now->st_mtim.tv_nsec;
}

/* Copy c's audio into the open tar as `name`: from memory, or from its file one chunk at a
 * time, refusing a file that is no longer what was checked. */
static int tar_add_audio(sharc_writer *w, const sharc__wcut *c, const char *name)
{
    const sharc_writer_cut *cut = c->cut;
    if (!cut->path) {
        int rc = tar_header(w, name, (int64_t)cut->size);
        return rc ? rc : tar_data(w, name, cut->data, cut->size);
    }
    struct stat st;
    FILE *f;
    int rc = sharc__writer_open_audio(w, c->where, cut->path, &st, &f);
    if (rc != 0)
        return rc;
    if (file_changed(&c->st, &st)) {
        rc = sharc__set_error(&w->ctx, SHARC_ERR_IO,
                              "%s: %s: the file changed after its header was checked", c->where,
                              cut->path);
        goto done;
    }
    rc = tar_header(w, name, (int64_t)st.st_size);
    for (int64_t left = (int64_t)st.st_size; rc == 0 && left > 0;) {
        if ((rc = sharc__writer_cancelled(w)) != 0)
            break;
        size_t want =
            left < (int64_t)SHARC__WRITER_COPY_CHUNK ? (size_t)left : SHARC__WRITER_COPY_CHUNK;
        size_t got = fread(w->copy_buf, 1, want, f);
        if (got != want) {
            rc = sharc__set_error(&w->ctx, SHARC_ERR_IO, "%s: %s: %s while copying it", c->where,
                                  cut->path, ferror(f) ? strerror(errno) : "the file got shorter");
            break;
        }
        rc = tar_data(w, name, w->copy_buf, got);
        left -= (int64_t)got;
    }
    /* A change while it was copied: what the tar holds may not be what was checked. */
    if (rc == 0 && (fstat(fileno(f), &st) != 0 || file_changed(&c->st, &st)))
        rc = sharc__set_error(&w->ctx, SHARC_ERR_IO, "%s: %s: the file changed while it was copied",
                              c->where, cut->path);
done:
    fclose(f);
    return rc;
}

int sharc__writer_open_audio(sharc_writer *w, const char *where, const char *path, struct stat *st,
                             FILE **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return sharc__set_error(&w->ctx, SHARC_ERR(err), "%s: %s: cannot open: %s", where, path,
                                strerror(err));
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return sharc__set_error(
            &w->ctx, SHARC_ERR(EINVAL), "%s: %s: not a regular file (%s)", where, path,
            S_ISDIR(st->st_mode)                           ? "a folder"
            : S_ISFIFO(st->st_mode)                        ? "a FIFO"
            : S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "a device"
                                                           : "a socket or other");
    }
    /* Opened without waiting on a FIFO; read as a plain blocking stream from here on. */
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        return sharc__set_error(&w->ctx, SHARC_ERR(err), "%s: %s: cannot open: %s", where, path,
                                strerror(err));
    }
    *out = f;
    return 0;
}

/* ---- shards ---- */

int sharc__writer_open_all(sharc_writer *w)
{
    char *path = path_fmt(w, "%s/" SHARC__NEMO_ALL_MANIFEST, w->out);
    const char *tmp;
    int rc = note_file(w, path, &tmp);
    if (rc != 0)
        return rc;
    w->all = fopen(tmp, "w");
    if (!w->all)
        return sharc__set_error(&w->ctx, SHARC_ERR(errno), "cannot write %s: %s",
                                w->files[w->n_files - 1], strerror(errno));
    return 0;
}

int sharc__writer_close_all(sharc_writer *w, int ok)
{
    int rc = 0;
    if (w->all && fclose(w->all) != 0 && ok)
        rc = sharc__set_error(&w->ctx, SHARC_ERR_IO,
                              "cannot write %s/" SHARC__NEMO_ALL_MANIFEST ": %s", w->out,
                              strerror(errno));
    w->all = NULL;
    return rc;
}

int sharc__writer_shard_begin(sharc_writer *w)
{
    int shar = w->s.layout == SHARC_LAYOUT_SHAR;
    int rc = tar_begin(w, shar ? SHARC__SHAR_RECORDING_FMT : SHARC__NEMO_AUDIO_FMT);
    if (rc != 0)
        return rc;
    char *path = shar
                     ? path_fmt(w, "%s/" SHARC__SHAR_CUTS_FMT, w->out, w->shard)
                     : path_fmt(w, "%s/" SHARC__NEMO_SHARDED_DIR "/" SHARC__NEMO_SHARD_MANIFEST_FMT,
                                w->out, w->shard);
    const char *tmp;
    if ((rc = note_file(w, path, &tmp)) != 0)
        return rc;
    w->meta_file = w->n_files - 1;
    if (shar)
        w->cuts = gzopen(tmp, "wb");
    else
        w->rows = fopen(tmp, "w");
    if (!w->cuts && !w->rows)
        return sharc__set_error(&w->ctx, SHARC_ERR(errno ? errno : ENOMEM), "cannot write %s: %s",
                                w->files[w->meta_file], strerror(errno ? errno : ENOMEM));
    w->stats.shards++;
    return 0;
}

int sharc__writer_shard_end(sharc_writer *w, int ok)
{
    int rc = 0;
    if (w->tar) {
        if (ok && archive_write_close(w->tar) != ARCHIVE_OK)
            rc = sharc__set_error(&w->ctx, SHARC_ERR_IO, "cannot write %s: %s",
                                  w->files[w->tar_file], archive_error_string(w->tar));
        archive_write_free(w->tar);
        w->tar = NULL;
    }
    if (w->cuts) {
        if (gzclose(w->cuts) != Z_OK && ok && rc == 0)
            rc = sharc__set_error(&w->ctx, SHARC_ERR_IO, "cannot write the shard's cuts file %s",
                                  w->files[w->meta_file]);
        w->cuts = NULL;
    }
    if (w->rows) {
        if (fclose(w->rows) != 0 && ok && rc == 0)
            rc = sharc__set_error(&w->ctx, SHARC_ERR_IO, "cannot write %s: %s",
                                  w->files[w->meta_file], strerror(errno));
        w->rows = NULL;
    }
    w->shard = -1;
    return rc;
}

static int json_done(sharc_writer *w)
{
    if (!w->json_oom)
        return 0;
    w->json_oom = 0;
    return sharc__set_error(&w->ctx, SHARC_ERR(ENOMEM), "out of memory");
}

static int add_shar(sharc_writer *w, const sharc__wcut *c, const char *member)
{
    sharc__buf_clear(&w->meta);
    sharc__buf_clear(&w->line);
    shar_recording(w, &w->meta, c);
    jputs(w, &w->meta, "\n");
    shar_cut_line(w, &w->line, c);
    int rc = json_done(w);
    char *meta_name = rc ? NULL : path_fmt(w, "%s.json", c->cut->id);
    if (rc == 0 && !meta_name)
        rc = sharc__set_error(&w->ctx, SHARC_ERR(ENOMEM), "out of memory");
    if (rc == 0)
        rc = tar_add_audio(w, c, member);
    if (rc == 0)
        rc = tar_header(w, meta_name, (int64_t)w->meta.len);
    if (rc == 0)
        rc = tar_data(w, meta_name, w->meta.data, w->meta.len);
    if (rc == 0 && gzwrite(w->cuts, w->line.data, (unsigned)w->line.len) != (int)w->line.len)
        rc = sharc__set_error(&w->ctx, SHARC_ERR_IO, "cannot write the cuts file of shard %d",
                              w->shard);
    sharc__free(&w->ctx, meta_name);
    return rc;
}

static int add_nemo(sharc_writer *w, const sharc__wcut *c, const char *member)
{
    sharc__buf_clear(&w->line);
    nemo_row(w, &w->line, c, member);
    int rc = json_done(w);
    if (rc == 0)
        rc = tar_add_audio(w, c, member);
    if (rc == 0 && (fwrite(w->line.data, 1, w->line.len, w->rows) != w->line.len ||
                    fwrite(w->line.data, 1, w->line.len, w->all) != w->line.len))
        rc = sharc__set_error(&w->ctx, SHARC_ERR_IO, "cannot write the manifests of shard %d: %s",
                              w->shard, strerror(errno));
    return rc;
}

int sharc__writer_shard_add(sharc_writer *w, const sharc__wcut *c)
{
    sharc__buf_clear(&w->name);
    jputs(w, &w->name, c->cut->id);
    jputs(w, &w->name, ".");
    jputs(w, &w->name, c->audio.format);
    int rc = json_done(w);
    if (rc != 0)
        return rc;
    const char *member = sharc__buf_str(&w->name);
    return w->s.layout == SHARC_LAYOUT_SHAR ? add_shar(w, c, member) : add_nemo(w, c, member);
}

/*
 * The shard writer's public calls (include/sharc/writer.h): settings, the output folder,
 * the checks of a cut (its id, its audio's header) and the writer's life from open to
 * finish or abort. The files themselves are written by writer_shard.c.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/layout.h"
#include "write/writer_impl.h"

void sharc_writer_default_settings(sharc_writer_settings *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = (uint32_t)sizeof *s;
    s->layout = SHARC_LAYOUT_SHAR;
    s->compression = SHARC_WRITER_COMPRESS_NONE;
    s->cuts_per_shard = 1000;
    s->duration_tolerance = 0.1;
    s->max_audio_bytes = (uint64_t)64 << 30;
    sharc_default_allocator(&s->allocator);
    sharc_default_logger(&s->logger);
}

static int reserved_set(const sharc_writer_settings *s)
{
    for (size_t i = 0; i < sizeof s->reserved; i++)
        if (s->reserved[i])
            return 1;
    return 0;
}

static int settings_error(const sharc_writer_settings *s)
{
    if (s->struct_size != sizeof *s || reserved_set(s))
        return 1;
    return !s->out_dir || !s->out_dir[0] ||
           (s->layout != SHARC_LAYOUT_SHAR && s->layout != SHARC_LAYOUT_NEMO) ||
           (unsigned)s->compression > SHARC_WRITER_COMPRESS_ZSTD || s->cuts_per_shard == 0 ||
           s->cuts_per_shard > SHARC_WRITER_MAX_CUTS_PER_SHARD || !(s->duration_tolerance >= 0);
}

/* Which setting is wrong, for the message of sharc_writer_open. */
static const char *settings_why(const sharc_writer_settings *s)
{
    if (s->struct_size != sizeof *s)
        return "struct_size is not sizeof(sharc_writer_settings) of this library: fill the "
               "settings with sharc_writer_default_settings()";
    if (reserved_set(s))
        return "reserved bytes are not zero";
    if (!s->out_dir || !s->out_dir[0])
        return "no out_dir";
    if (s->layout != SHARC_LAYOUT_SHAR && s->layout != SHARC_LAYOUT_NEMO)
        return "layout is neither SHARC_LAYOUT_SHAR nor SHARC_LAYOUT_NEMO";
    if ((unsigned)s->compression > SHARC_WRITER_COMPRESS_ZSTD)
        return "unknown compression";
    if (s->cuts_per_shard == 0 || s->cuts_per_shard > SHARC_WRITER_MAX_CUTS_PER_SHARD)
        return "cuts_per_shard is not in 1..SHARC_WRITER_MAX_CUTS_PER_SHARD";
    return "duration_tolerance is negative or NaN";
}

int sharc_writer_open(sharc_writer **out, const sharc_writer_settings *s)
{
    if (!out)
        return SHARC_ERR(EINVAL);
    *out = NULL;
    if (!s)
        return SHARC_ERR(EINVAL);
    /* A settings struct smaller than ours was built against an older header: its fields
     * cannot be read past its end, and there is no allocator to trust either. */
    int too_small = s->struct_size != sizeof *s;
    sharc__ctx boot;
    sharc__ctx_init(&boot, too_small ? NULL : &s->allocator, too_small ? NULL : &s->logger);
    if (settings_error(s))
        return sharc__fail(&boot, SHARC_ERR(EINVAL), "sharc_writer_open: %s", settings_why(s));
    sharc_writer *w = sharc__calloc(&boot, 1, sizeof *w);
    if (!w)
        return sharc__fail(&boot, SHARC_ERR(ENOMEM), "sharc_writer_open: out of memory");
    w->ctx = boot;
    w->s = *s;
    w->shard = -1;
    w->out = sharc__strdup(&w->ctx, s->out_dir);
    w->s.out_dir = w->out;
    w->sf_log = sharc__malloc(&w->ctx, SHARC__WRITER_SF_LOG);
    /* Made here, so that an abort never needs memory to find what it must remove. */
    size_t n = strlen(s->out_dir) + sizeof "/" SHARC__NEMO_SHARDED_DIR;
    w->sub = sharc__malloc(&w->ctx, n);
    if (w->sub)
        snprintf(w->sub, n, "%s/" SHARC__NEMO_SHARDED_DIR, s->out_dir);
    if (!w->out || !w->sf_log || !w->sub) {
        sharc_writer_close(&w);
        return sharc__fail(&boot, SHARC_ERR(ENOMEM), "sharc_writer_open: out of memory");
    }
    w->utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    *out = w;
    return 0;
}

static int fail_out(sharc_writer *w, int rc)
{
    sharc__log_error_once(&w->ctx);
    return rc;
}

/* Whether the folder `dir` has anything in it. @return 1, 0, or a negative errno */
static int dir_has_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return SHARC_ERR(errno);
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)) != NULL)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return !empty;
}

static int begin(sharc_writer *w)
{
    sharc__ctx *ctx = &w->ctx;
    int has = dir_has_files(w->out);
    if (has == SHARC_ERR(ENOENT)) {
        if (w->s.dry_run)
            return 0; /* absent: it would be created */
        if (mkdir(w->out, 0777) != 0)
            return sharc__set_error(ctx, SHARC_ERR(errno), "cannot create %s: %s", w->out,
                                    strerror(errno));
        w->made_dir = 1;
    } else if (has < 0) {
        return sharc__set_error(ctx, has, "cannot use %s: %s", w->out, strerror(-has));
    } else if (has) {
        return sharc__set_error(ctx, SHARC_ERR(EEXIST),
                                "%s is not empty; the writer writes only into an empty or new "
                                "folder",
                                w->out);
    }
    if (w->s.layout == SHARC_LAYOUT_NEMO && !w->s.dry_run) {
        int rc = mkdir(w->sub, 0777) == 0 ? 0 : SHARC_ERR(errno);
        if (rc)
            return sharc__set_error(ctx, rc, "cannot create %s/" SHARC__NEMO_SHARDED_DIR ": %s",
                                    w->out, strerror(-rc));
        w->made_sub = 1;
    }
    return 0;
}

int sharc_writer_begin(sharc_writer *w)
{
    if (!w)
        return SHARC_ERR(EINVAL);
    if (w->begun)
        return 0;
    if (w->broken || w->finished || w->aborted)
        return fail_out(
            w, sharc__set_error(&w->ctx, SHARC_ERR(EINVAL), "the writer accepts nothing more"));
    int rc = begin(w);
    if (rc != 0) {
        w->broken = 1;
        return fail_out(w, rc);
    }
    w->begun = 1;
    return 0;
}

/* ---- checks of a cut ---- */

static const char *cut_where(sharc_writer *w, const sharc_writer_cut *cut)
{
    if (cut->origin)
        snprintf(w->where, sizeof w->where, "%s", cut->origin);
    else
        snprintf(w->where, sizeof w->where, "cut '%s'", cut->id);
    return w->where;
}

/* The tar member rules: no control character, nothing that unpacks outside the folder. */
static int check_member_id(sharc_writer *w, const sharc_writer_cut *cut, const char *where)
{
    int ctl = sharc__id_control_char(cut->id);
    if (ctl)
        return sharc__set_error(&w->ctx, SHARC_ERR_FORMAT,
                                "%s: the id holds a control character (0x%02x): it cannot name a "
                                "tar member",
                                where, ctl);
    const char *why = sharc__id_unsafe(cut->id);
    if (why)
        return sharc__set_error(&w->ctx, SHARC_ERR_FORMAT,
                                "%s: id '%s' cannot name a tar member: %s", where, cut->id, why);
    return 0;
}

static int check_layout_id(sharc_writer *w, const sharc_writer_cut *cut, const char *where)
{
    size_t ext, n = strlen(cut->id);
    if (w->s.layout == SHARC_LAYOUT_NEMO && sharc__nemo_sub_at(cut->id, &ext) < n && ext == n)
        return sharc__set_error(&w->ctx, SHARC_ERR_FORMAT,
                                "%s: id '%s' ends in -subN, which NeMo's reader takes for a part "
                                "of another member: give the line another \"id\"",
                                where, cut->id);
    if (!w->utf8)
        for (const unsigned char *c = (const unsigned char *)cut->id; *c; c++)
            if (*c >= 0x80)
                return sharc__set_error(&w->ctx, SHARC_ERR_UNSUPPORTED,
                                        "%s: id '%s' is not ASCII, and this system has no "
                                        "C.UTF-8 locale to write it into a tar with",
                                        where, cut->id);
    return 0;
}

/* The member extension of a format libsndfile recognised; NULL for formats sharc does not
 * read. */
static const char *format_ext(int format)
{
    switch (format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV:
    case SF_FORMAT_WAVEX:
    case SF_FORMAT_RF64:
        return "wav";
    case SF_FORMAT_FLAC:
        return "flac";
    case SF_FORMAT_OGG:
        return (format & SF_FORMAT_SUBMASK) == SF_FORMAT_OPUS ? "opus" : "ogg";
    case SF_FORMAT_MPEG:
        return "mp3";
    }
    return NULL;
}

/* libsndfile's virtual I/O over audio held in memory. */
typedef struct mem_io {
    const uint8_t *p;
    sf_count_t n, at;
} mem_io;

static sf_count_t mem_len(void *u)
{
    return ((mem_io *)u)->n;
}

static sf_count_t mem_seek(sf_count_t off, int whence, void *u)
{
    mem_io *m = u;
    sf_count_t to = whence == SEEK_SET ? off : whence == SEEK_CUR ? m->at + off : m->n + off;
    if (to < 0 || to > m->n)
        return -1;
    return m->at = to;
}

static sf_count_t mem_read(void *ptr, sf_count_t count, void *u)
{
    mem_io *m = u;
    sf_count_t k = count < m->n - m->at ? count : m->n - m->at;
    memcpy(ptr, m->p + m->at, (size_t)k);
    m->at += k;
    return k;
}

static sf_count_t mem_write(const void *ptr, sf_count_t count, void *u)
{
    (void)ptr, (void)count, (void)u;
    return 0;
}

static sf_count_t mem_tell(void *u)
{
    return ((mem_io *)u)->at;
}

/* Read the header of c's audio into c->audio, checking what the library can tell. */
static int probe_audio(sharc_writer *w, sharc__wcut *c)
{
    const sharc_writer_cut *cut = c->cut;
    const char *path = cut->path ? cut->path : NULL, *where = c->where;
    char label[1300]; /* "<where>: <path>" or "<where>" */
    snprintf(label, sizeof label, path ? "%s: %s" : "%s", where, path ? path : "");
    FILE *f = NULL;
    SF_INFO info = {0};
    SNDFILE *sf;
    mem_io mem = {cut->data, (sf_count_t)cut->size, 0};
    SF_VIRTUAL_IO vio = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
    if (path) {
        int rc = sharc__writer_open_audio(w, where, path, &c->st, &f);
        if (rc != 0)
            return rc;
        c->audio.bytes = (uint64_t)c->st.st_size;
    } else {
        c->audio.bytes = cut->size;
    }
    if (c->audio.bytes > w->s.max_audio_bytes) {
        if (f)
            fclose(f);
        return sharc__set_error(&w->ctx, SHARC_ERR_TOO_LARGE,
                                "%s: %llu bytes of audio, more than max_audio_bytes (%llu)", label,
                                (unsigned long long)c->audio.bytes,
                                (unsigned long long)w->s.max_audio_bytes);
    }
    sf = f ? sf_open_fd(fileno(f), SFM_READ, &info, 0)
           : sf_open_virtual(&vio, SFM_READ, &info, &mem);
    if (!sf) {
        if (f)
            fclose(f);
        return sharc__set_error(&w->ctx, SHARC_ERR_DECODE, "%s: not audio libsndfile can read: %s",
                                label, sf_strerror(NULL));
    }
    /* A WAV whose data chunk claims more bytes than the file holds was cut short: libsndfile
     * (and so every reader) quietly gives only what is there. Its log says "data : N (should
     * be M)"; N of 0 or 0xFFFFFFFF is a streamed WAV's unknown length, not a truncation. */
    w->sf_log[0] = 0;
    sf_command(sf, SFC_GET_LOG_INFO, w->sf_log, SHARC__WRITER_SF_LOG);
    unsigned long long said = 0, held = 0;
    const char *data = strstr(w->sf_log, "\ndata : ");
    int cut_short = (info.format & SF_FORMAT_TYPEMASK) != SF_FORMAT_FLAC && data &&
                    sscanf(data, "\ndata : %llu (should be %llu)", &said, &held) == 2 &&
                    said > held && said != 0xFFFFFFFFull;
    sf_close(sf);
    if (f)
        fclose(f);
    if (cut_short)
        return sharc__set_error(&w->ctx, SHARC_ERR_FORMAT,
                                "%s: truncated: its header says %llu bytes of audio, the file "
                                "holds %llu",
                                label, said, held);
    const char *ext = format_ext(info.format);
    if (!ext)
        return sharc__set_error(&w->ctx, SHARC_ERR_FORMAT,
                                "%s: a format sharc does not read (WAV, FLAC, Ogg Opus/Vorbis and "
                                "MP3 are)",
                                label);
    if (info.samplerate <= 0 || info.channels <= 0 || info.frames <= 0 ||
        info.frames == SF_COUNT_MAX)
        return sharc__set_error(&w->ctx, SHARC_ERR_FORMAT,
                                "%s: the audio has no samples (or no known length)", label);
    sharc_writer_audio *a = &c->audio;
    snprintf(a->format, sizeof a->format, "%s", ext);
    a->sampling_rate = info.samplerate;
    a->channels = info.channels;
    a->frames = info.frames;
    a->duration = (double)a->frames / a->sampling_rate;
    if (cut->sampling_rate && cut->sampling_rate != a->sampling_rate)
        return sharc__set_error(&w->ctx, SHARC_ERR_AUDIO_MISMATCH,
                                "%s: the cut's sampling rate %d differs from the audio's %d", label,
                                cut->sampling_rate, a->sampling_rate);
    /* Exactly the tolerance apart is within it, whatever the rounding of the difference. */
    double tol = w->s.duration_tolerance;
    if (cut->duration >= 0 && fabs(cut->duration - a->duration) > tol * (1 + 1e-9))
        return sharc__set_error(&w->ctx, SHARC_ERR_AUDIO_MISMATCH,
                                "%s: the cut's duration %g s differs from the audio's %g s by "
                                "more than %g s",
                                label, cut->duration, a->duration, tol);
    return 0;
}

static int check_cut(sharc_writer *w, const sharc_writer_cut *cut, sharc__wcut *c, int audio)
{
    if (!cut->id)
        return sharc__set_error(&w->ctx, SHARC_ERR(EINVAL), "a cut without an id");
    memset(c, 0, sizeof *c);
    c->cut = cut;
    c->where = cut_where(w, cut);
    int rc = check_member_id(w, cut, c->where);
    if (rc != 0 || !audio)
        return rc;
    if ((rc = check_layout_id(w, cut, c->where)) != 0)
        return rc;
    if (!cut->path && !cut->data)
        return sharc__set_error(&w->ctx, SHARC_ERR(EINVAL), "%s: neither a path nor data",
                                c->where);
    return probe_audio(w, c);
}

int sharc_writer_check(sharc_writer *w, const sharc_writer_cut *cut, sharc_writer_audio *audio)
{
    if (!w || !cut)
        return SHARC_ERR(EINVAL);
    sharc__wcut c;
    int rc = check_cut(w, cut, &c, audio != NULL);
    if (rc != 0)
        return fail_out(w, rc);
    if (audio)
        *audio = c.audio;
    return 0;
}

/* ---- the ids added ---- */

static uint64_t id_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of `id`: where it is, or the empty one where it would go. */
static size_t id_slot(const sharc_writer *w, const char *id)
{
    size_t i = (size_t)id_hash(id) & (w->ids_cap - 1);
    while (w->ids[i] && strcmp(w->ids[i], id) != 0)
        i = (i + 1) & (w->ids_cap - 1);
    return i;
}

static int ids_grow(sharc_writer *w)
{
    size_t cap = w->ids_cap ? 2 * w->ids_cap : 1024;
    char **ids = sharc__calloc(&w->ctx, cap, sizeof *ids);
    char **origins = ids ? sharc__calloc(&w->ctx, cap, sizeof *origins) : NULL;
    if (!origins) {
        sharc__free(&w->ctx, ids);
        return sharc__set_error(&w->ctx, SHARC_ERR(ENOMEM), "out of memory");
    }
    char **old = w->ids, **old_origins = w->id_origins;
    size_t old_cap = w->ids_cap;
    w->ids = ids;
    w->id_origins = origins;
    w->ids_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i])
            continue;
        size_t j = id_slot(w, old[i]);
        ids[j] = old[i];
        origins[j] = old_origins[i];
    }
    sharc__free(&w->ctx, old);
    sharc__free(&w->ctx, old_origins);
    return 0;
}

/* Refuse an id added before; remember it otherwise. */
static int note_id(sharc_writer *w, const sharc__wcut *c)
{
    if (w->ids_cap) {
        size_t i = id_slot(w, c->cut->id);
        if (w->ids[i]) {
            if (w->id_origins[i])
                return sharc__set_error(&w->ctx, SHARC_ERR(EEXIST),
                                        "%s: duplicate id '%s': already used at %s", c->where,
                                        c->cut->id, w->id_origins[i]);
            return sharc__set_error(&w->ctx, SHARC_ERR(EEXIST),
                                    "%s: duplicate id '%s': already added", c->where, c->cut->id);
        }
    }
    if (2 * (w->ids_n + 1) > w->ids_cap && ids_grow(w) != 0)
        return SHARC_ERR(ENOMEM);
    char *id = sharc__strdup(&w->ctx, c->cut->id);
    char *origin = c->cut->origin ? sharc__strdup(&w->ctx, c->cut->origin) : NULL;
    if (!id || (c->cut->origin && !origin)) {
        sharc__free(&w->ctx, id);
        sharc__free(&w->ctx, origin);
        return sharc__set_error(&w->ctx, SHARC_ERR(ENOMEM), "out of memory");
    }
    size_t i = id_slot(w, id);
    w->ids[i] = id;
    w->id_origins[i] = origin;
    w->ids_n++;
    return 0;
}

static void ids_free(sharc_writer *w)
{
    for (size_t i = 0; i < w->ids_cap; i++) {
        sharc__free(&w->ctx, w->ids[i]);
        sharc__free(&w->ctx, w->id_origins[i]);
    }
    sharc__free(&w->ctx, w->ids);
    sharc__free(&w->ctx, w->id_origins);
    w->ids = w->id_origins = NULL;
    w->ids_cap = w->ids_n = 0;
}

/* ---- writing ---- */

/* Write a checked cut, beginning a shard where one is due. */
static int write_cut(sharc_writer *w, const sharc__wcut *c)
{
    int rc = 0;
    if (!w->copy_buf && !(w->copy_buf = sharc__malloc(&w->ctx, SHARC__WRITER_COPY_CHUNK)))
        return sharc__set_error(&w->ctx, SHARC_ERR(ENOMEM), "out of memory");
    if (w->s.layout == SHARC_LAYOUT_NEMO && w->stats.cuts == 0 &&
        (rc = sharc__writer_open_all(w)) != 0)
        return rc;
    if (w->stats.cuts % w->s.cuts_per_shard == 0) {
        if (w->stats.cuts > 0 && (rc = sharc__writer_shard_end(w, 1)) != 0)
            return rc;
        w->shard = (int)(w->stats.cuts / w->s.cuts_per_shard);
        if ((rc = sharc__writer_shard_begin(w)) != 0)
            return rc;
    }
    /* libarchive converts a member name from UTF-8 through the locale's character set, which
     * in the C locale has no non-ASCII characters (it then fails, in 3.6 with a crash): the
     * tars are written with a UTF-8 LC_CTYPE for this thread, so that a non-ASCII id is a
     * UTF-8 pax "path" as Python's tarfile writes it. */
    locale_t old = w->utf8 ? uselocale(w->utf8) : (locale_t)0;
    rc = sharc__writer_shard_add(w, c);
    if (w->utf8)
        uselocale(old);
    return rc;
}

int sharc_writer_add(sharc_writer *w, const sharc_writer_cut *cut)
{
    if (!w || !cut)
        return SHARC_ERR(EINVAL);
    if (w->broken || w->finished || w->aborted)
        return fail_out(
            w, sharc__set_error(&w->ctx, SHARC_ERR(EINVAL), "the writer accepts nothing more"));
    int rc = sharc__writer_cancelled(w);
    if (rc == 0 && !w->begun && (rc = sharc_writer_begin(w)) != 0)
        return rc;
    sharc__wcut c;
    if (rc == 0 && (rc = check_cut(w, cut, &c, 1)) == 0 && (rc = note_id(w, &c)) == 0 &&
        !w->s.dry_run && (rc = write_cut(w, &c)) != 0)
        w->broken = 1; /* a shard is half written */
    if (rc != 0)
        return fail_out(w, rc);
    w->stats.cuts++;
    w->stats.audio_seconds += c.audio.duration;
    w->stats.audio_bytes += c.audio.bytes;
    if (w->s.dry_run)
        w->stats.shards =
            (uint32_t)((w->stats.cuts + w->s.cuts_per_shard - 1) / w->s.cuts_per_shard);
    return 0;
}

int sharc_writer_finish(sharc_writer *w)
{
    if (!w)
        return SHARC_ERR(EINVAL);
    if (w->broken || w->finished || w->aborted || w->stats.cuts == 0)
        return fail_out(w, sharc__set_error(&w->ctx, SHARC_ERR(EINVAL), "%s",
                                            w->stats.cuts ? "the writer accepts nothing more"
                                                          : "no cut was added"));
    int rc = sharc__writer_shard_end(w, 1);
    int all = sharc__writer_close_all(w, rc == 0);
    rc = rc ? rc : all;
    if (rc == 0)
        rc = sharc__writer_rename_all(w);
    if (rc != 0) {
        w->broken = 1;
        return fail_out(w, rc);
    }
    w->finished = 1;
    struct stat st;
    if (!w->s.dry_run) {
        w->stats.bytes = 0;
        for (size_t i = 0; i < w->n_files; i++)
            if (stat(w->files[i], &st) == 0)
                w->stats.bytes += (uint64_t)st.st_size;
    } else {
        w->stats.bytes = w->stats.audio_bytes;
    }
    return 0;
}

size_t sharc_writer_abort(sharc_writer *w)
{
    if (!w || w->finished || w->aborted)
        return 0;
    w->aborted = 1;
    sharc__writer_shard_end(w, 0);
    sharc__writer_close_all(w, 0);
    size_t n = sharc__writer_remove_files(w);
    if (w->made_sub)
        rmdir(w->sub);
    if (w->made_dir)
        rmdir(w->out);
    return n;
}

void sharc_writer_close(sharc_writer **wp)
{
    if (!wp || !*wp)
        return;
    sharc_writer *w = *wp;
    sharc_writer_abort(w);
    sharc__writer_free_files(w);
    ids_free(w);
    sharc__buf_free(&w->ctx, &w->line);
    sharc__buf_free(&w->ctx, &w->meta);
    sharc__buf_free(&w->ctx, &w->name);
    sharc__free(&w->ctx, w->copy_buf);
    sharc__free(&w->ctx, w->sf_log);
    sharc__free(&w->ctx, w->out);
    sharc__free(&w->ctx, w->sub);
    if (w->utf8)
        freelocale(w->utf8);
    sharc__ctx ctx = w->ctx;
    sharc__free(&ctx, w);
    *wp = NULL;
}

void sharc_writer_get_stats(const sharc_writer *w, sharc_writer_stats *out)
{
    if (!out)
        return;
    if (w)
        *out = w->stats;
    else
        memset(out, 0, sizeof *out);
}

const char *sharc_writer_last_error(const sharc_writer *w)
{
    return w ? w->ctx.error : "";
}

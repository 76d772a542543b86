/*
 * Lhotse Shar: cuts.NNNNNN.jsonl[.gz] paired by position with recording.NNNNNN.tar and
 * any other field files of the same shard. Each cut owns one (data, metadata) member pair
 * in every tar field and one line in every jsonl field; `.nodata`/`.nometa` pairs and
 * `{"cut_id": ...}` lines stand for an absent value. Unlike Lhotse, which zips the
 * streams and stops silently at the shortest, any difference in length is an error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "io/tar.h"
#include "io/lines.h"
#include "plan/json.h"
#include "formats/stream.h"

typedef struct shar_field_stream {
    const sharc__shar_field *def;
    sharc__tar *tar;
    sharc__lines *lines;
} shar_field_stream;

struct sharc__stream {
    sharc__ctx *ctx;
    const sharc__shard *shard;
    sharc__lines *cuts;
    sharc__tar *rec;
    shar_field_stream fields[SHARC__MAX_FIELDS];
    size_t n_fields;
    sharc__member data, meta; ///< scratch members, buffers reused
    sharc__member rec_meta;   ///< the recording's metadata member, kept while fields are read
    sharc__buf field_id;      ///< scratch for jsonl field ids
    sharc__buf member_cut;    ///< scratch: the cut id a member's name gives
    uint64_t position;
    int data_too_large; ///< read_pair: its data member was over the size cap (and skipped)
};

static void shar_close(sharc__stream **sp)
{
    sharc__stream *s = *sp;
    if (!s)
        return;
    sharc__lines_close(&s->cuts);
    sharc__tar_close(&s->rec);
    for (size_t i = 0; i < s->n_fields; i++) {
        sharc__tar_close(&s->fields[i].tar);
        sharc__lines_close(&s->fields[i].lines);
    }
    sharc__member_free(s->ctx, &s->data);
    sharc__member_free(s->ctx, &s->meta);
    sharc__member_free(s->ctx, &s->rec_meta);
    sharc__buf_free(s->ctx, &s->field_id);
    sharc__buf_free(s->ctx, &s->member_cut);
    sharc__free(s->ctx, s);
    *sp = NULL;
}

static int shar_open(sharc__stream **out, sharc__ctx *ctx, const sharc__shard *shard,
                     const sharc__stream_opts *o, sharc__stream_error *err)
{
    int rc;
    sharc__stream *s = sharc__calloc(ctx, 1, sizeof *s);
    *out = NULL;
    if (!s)
        return SHARC_ERR(ENOMEM);
    s->ctx = ctx;
    s->shard = shard;
    if (shard->n_fields > SHARC__MAX_FIELDS) {
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT, "%s: more than %d fields", shard->meta_path,
                              SHARC__MAX_FIELDS);
        sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_LAYOUT, 1, shard->meta_path, NULL, NULL);
        goto fail;
    }
    const char *path = shard->meta_path;
    if ((rc = sharc__lines_open(&s->cuts, ctx, path, o->max_line_bytes)) < 0)
        goto fail_path;
    path = shard->audio_path;
    /* Members pair by position, as Lhotse reads them: the first of a pair is the data, left in
     * an uncompressed tar file in batch mode; the second is the metadata, whatever its name,
     * read by read_pair(). */
    if ((rc = sharc__stream_open_audio_tar(&s->rec, ctx, path, o, NULL)) < 0)
        goto fail_path;
    for (size_t i = 0; i < shard->n_fields; i++) {
        shar_field_stream *f = &s->fields[s->n_fields++];
        f->def = &shard->fields[i];
        path = f->def->path;
        rc = f->def->is_tar ? sharc__tar_open(&f->tar, ctx, path, o->max_member_bytes)
                            : sharc__lines_open(&f->lines, ctx, path, o->max_line_bytes);
        if (rc < 0)
            goto fail_path;
    }
    *out = s;
    return 0;
fail_path:
    sharc__stream_fail(ctx, err, rc, sharc__problem_of(rc), 1, path, NULL, NULL);
fail:
    shar_close(&s);
    return rc;
}

/* The length of the cut id a member's name gives: str(Path(member).parent / Path(member).stem). */
static size_t stem_len(const char *member)
{
    const char *slash = strrchr(member, '/');
    const char *base = slash ? slash + 1 : member;
    const char *dot = strrchr(base, '.');
    return (dot && dot != base) ? (size_t)(dot - member) : strlen(member);
}

/* Lhotse's check: the member's name gives the cut id. */
static int member_matches(const char *member, const char *id)
{
    size_t n = stem_len(member);
    return strlen(id) == n && strncmp(member, id, n) == 0;
}

/*
 * A failure reading the tar at `path` into `m` (shard-fatal): reported with the member the
 * archive broke at (sharc__tar_next names it in m->name; none when empty) and the cut lost
 * with it: the one that member's name gives when it broke inside it, else `id`, the cut being
 * read (NULL: none), not the cut of a member read whole before the break.
 */
static int tar_failed(sharc__stream *s, sharc__stream_error *err, int rc, const char *path,
                      const sharc__member *m, const char *id)
{
    const char *name = sharc__buf_str(&m->name), *cut = id;
    if (m->broke_inside && *name && !(id && member_matches(name, id)))
        cut = sharc__buf_set(s->ctx, &s->member_cut, name, stem_len(name)) < 0
                  ? NULL
                  : sharc__buf_str(&s->member_cut);
    return sharc__stream_fail(s->ctx, err, rc, sharc__problem_of(rc), 1, path, name, cut);
}

static int is_placeholder(const sharc__member *m, const char *ext)
{
    return m->name.len >= strlen(ext) &&
           strcmp(sharc__buf_str(&m->name) + m->name.len - strlen(ext), ext) == 0;
}

/*
 * Read the (data, metadata) pair of one tar field for cut `id`. *present is 0 for a
 * .nodata/.nometa pair. Errors are shard-fatal: the pairing is lost.
 */
static int read_pair(sharc__stream *s, sharc__tar *tar, const char *path, const char *id,
                     int *present, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    int rc = sharc__tar_next(tar, &s->data);
    s->data_too_large = rc == SHARC_ERR_TOO_LARGE;
    if (rc == SHARC_END) {
        rc = sharc__set_error(ctx, SHARC_ERR_MISMATCH, "%s ended before the member of cut %s", path,
                              id);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_MISSING_MEMBER, 1, path, NULL, id);
    }
    if (rc < 0)
        return tar_failed(s, err, rc, path, &s->data, id);
    rc = sharc__tar_next_read(tar, &s->meta);
    if (rc == SHARC_END) {
        rc = sharc__set_error(ctx, SHARC_ERR_MISMATCH,
                              "%s: odd number of members: %s has no metadata member (cut %s)", path,
                              sharc__buf_str(&s->data.name), id);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_MISSING_MEMBER, 1, path,
                                  sharc__buf_str(&s->data.name), id);
    }
    if (rc < 0)
        return tar_failed(s, err, rc, path, &s->meta, id);
    *present = !(is_placeholder(&s->data, ".nodata") && is_placeholder(&s->meta, ".nometa"));
    const char *dname = sharc__buf_str(&s->data.name), *mname = sharc__buf_str(&s->meta.name);
    if (*present && (!member_matches(dname, id) || !member_matches(mname, id))) {
        rc = sharc__set_error(
            ctx, SHARC_ERR_MISMATCH,
            "%s: member %s (metadata %s) does not belong to cut %s at position %llu", path, dname,
            mname, id, (unsigned long long)s->position);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_ID_MISMATCH, 1, path, dname, id);
    }
    return 0;
}

static void swap_buf(sharc__buf *a, sharc__buf *b)
{
    sharc__buf t = *a;
    *a = *b;
    *b = t;
}

static int read_fields(sharc__stream *s, sharc__rawcut *c, const char *id, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    int rc;
    c->n_fields = s->n_fields;
    for (size_t i = 0; i < s->n_fields; i++) {
        shar_field_stream *f = &s->fields[i];
        sharc__field_data *fd = &c->fields[i];
        fd->name = f->def->name;
        fd->is_tar = f->def->is_tar;
        if (f->tar) {
            if ((rc = read_pair(s, f->tar, f->def->path, id, &fd->present, err)) < 0)
                return rc;
            if (fd->present) {
                swap_buf(&fd->member, &s->data.name);
                swap_buf(&fd->data, &s->data.data);
                swap_buf(&fd->json, &s->meta.data);
            }
            continue;
        }
        const char *line;
        size_t len;
        uint64_t lineno;
        rc = sharc__lines_next(f->lines, &line, &len, &lineno);
        if (rc == SHARC_END) {
            rc = sharc__set_error(ctx, SHARC_ERR_MISMATCH, "%s ended before the line of cut %s",
                                  f->def->path, id);
            return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_MISSING_MEMBER, 1, f->def->path,
                                      NULL, id);
        }
        if (rc < 0)
            return sharc__stream_fail(ctx, err, rc, sharc__problem_of(rc), 1, f->def->path, NULL,
                                      id);
        rc = sharc__json_lhotse_field(ctx, line, len, f->def->name, &s->field_id, &fd->json,
                                      &fd->present);
        if (rc < 0) {
            char where[64];
            snprintf(where, sizeof where, "line %llu", (unsigned long long)lineno);
            sharc__wrap_error(ctx, rc, "%s %s (cut %s)", f->def->path, where, id);
            return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_JSON, 1, f->def->path, where, id);
        }
        if (fd->present && strcmp(sharc__buf_str(&s->field_id), id) != 0) {
            rc = sharc__set_error(ctx, SHARC_ERR_MISMATCH,
                                  "%s line %llu belongs to cut %s, expected cut %s", f->def->path,
                                  (unsigned long long)lineno, sharc__buf_str(&s->field_id), id);
            return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_ID_MISMATCH, 1, f->def->path,
                                      NULL, id);
        }
    }
    return 0;
}

/* At the end of the cuts, every other stream must be at its end too. */
static int check_all_ended(sharc__stream *s, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    for (size_t i = 0; i <= s->n_fields; i++) {
        sharc__tar *tar = i == 0 ? s->rec : s->fields[i - 1].tar;
        sharc__lines *lines = i == 0 ? NULL : s->fields[i - 1].lines;
        const char *path = i == 0 ? s->shard->audio_path : s->fields[i - 1].def->path;
        int rc;
        if (tar) {
            rc = sharc__tar_next_header(tar, &s->data, NULL);
        } else {
            const char *line;
            size_t len;
            uint64_t lineno;
            rc = sharc__lines_next(lines, &line, &len, &lineno);
        }
        if (rc == SHARC_END)
            continue;
        if (rc < 0 && tar)
            return tar_failed(s, err, rc, path, &s->data, NULL);
        if (rc < 0)
            return sharc__stream_fail(ctx, err, rc, sharc__problem_of(rc), 1, path, NULL, NULL);
        rc = sharc__set_error(ctx, SHARC_ERR_MISMATCH,
                              "%s has more entries than %s has cuts (%llu); first extra: %s", path,
                              s->shard->meta_path, (unsigned long long)s->position,
                              tar ? sharc__buf_str(&s->data.name) : "a line");
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_ORPHAN_MEMBER, 1, path,
                                  tar ? sharc__buf_str(&s->data.name) : NULL, NULL);
    }
    return SHARC_END;
}

/*
 * Step over the members (and field lines) of the cut at this position, whose line or audio
 * could not be used, so that the cuts after it are read, their pairing checked by id as
 * usual. `id` is the line's cut id when it has one: its recording must then be that cut's.
 * With `rec_data_taken` the recording's data member was already taken (an oversized one,
 * which the next header skips). Returns 0, or
 * -1 when the pairing is lost (the streams end, fail, or hold another cut here); ctx->error
 * is left as it was.
 */
static int step_over(sharc__stream *s, const char *id, int rec_data_taken)
{
    char saved[SHARC__ERRLEN];
    memcpy(saved, s->ctx->error, sizeof saved);
    int ok = 1;
    for (size_t i = 0; ok && i <= s->n_fields; i++) {
        sharc__tar *tar = i == 0 ? s->rec : s->fields[i - 1].tar;
        if (tar) {
            for (int k = i == 0 && rec_data_taken ? 1 : 0; ok && k < 2; k++) {
                sharc__member *m = k == 0 ? &s->data : &s->meta;
                ok = sharc__tar_next_header(tar, m, NULL) == 0 &&
                     (i > 0 || !*id || member_matches(sharc__buf_str(&m->name), id) ||
                      is_placeholder(m, k == 0 ? ".nodata" : ".nometa"));
            }
        } else {
            const char *line;
            size_t len;
            uint64_t lineno;
            ok = sharc__lines_next(s->fields[i - 1].lines, &line, &len, &lineno) == 0;
        }
    }
    memcpy(s->ctx->error, saved, sizeof saved);
    return ok ? 0 : -1;
}

static int shar_next(sharc__stream *s, sharc__rawcut *c, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    const char *line;
    size_t len;
    uint64_t lineno;
    char where[64];
    int rc = sharc__lines_next(s->cuts, &line, &len, &lineno);
    if (rc == SHARC_END)
        return check_all_ended(s, err);
    if (rc < 0)
        return sharc__stream_fail(ctx, err, rc, sharc__problem_of(rc), 1, s->shard->meta_path, NULL,
                                  NULL);
    snprintf(where, sizeof where, "line %llu", (unsigned long long)lineno);
    sharc__rawcut_reset(c);
    c->shard = s->shard->audio_path;
    c->position = s->position++;
    rc = sharc__json_lhotse_cut(ctx, line, len, c);
    if (rc < 0) {
        /* Only this cut is lost: its members are stepped over, and the pairing of the cuts
         * after it is checked by their ids as always. */
        const char *id = sharc__buf_str(&c->id);
        if (*id && !strstr(ctx->error, id)) /* the message names the cut when its id is known */
            sharc__wrap_error(ctx, rc, "%s %s (cut %s)", s->shard->meta_path, where, id);
        else
            sharc__wrap_error(ctx, rc, "%s %s", s->shard->meta_path, where);
        int lost = step_over(s, id, 0) < 0;
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_JSON, lost, s->shard->meta_path,
                                  where, *id ? id : NULL);
    }
    const char *id = sharc__buf_str(&c->id);
    int present;
    if ((rc = read_pair(s, s->rec, s->shard->audio_path, id, &present, err)) < 0) {
        /* An audio member over the size cap costs its cut only: it is skipped unread. */
        if (s->data_too_large && step_over(s, id, 1) == 0)
            err->shard_fatal = 0;
        return rc;
    }
    swap_buf(&c->member, &s->data.name);
    swap_buf(&c->audio, &s->data.data);
    c->audio_in_file = s->data.in_file;
    c->audio_at = s->data.at;
    c->audio_file_id = s->data.file_id;
    c->audio_size = s->data.size;
    swap_buf(&s->rec_meta.name, &s->meta.name);
    swap_buf(&s->rec_meta.data, &s->meta.data);
    if ((rc = read_fields(s, c, id, err)) < 0)
        return rc;
    if (!present) {
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT, "%s: cut %s has no recording (.nodata)",
                              s->shard->audio_path, id);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_MISSING_MEMBER, 0,
                                  s->shard->audio_path, sharc__buf_str(&c->member), id);
    }
    const sharc__member *meta = &s->rec_meta;
    rc = sharc__json_lhotse_recording(ctx, (const char *)meta->data.data, meta->data.len, c);
    if (rc < 0) {
        sharc__wrap_error(ctx, rc, "%s member %s (cut %s)", s->shard->audio_path,
                          sharc__buf_str(&meta->name), id);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_JSON, 0, s->shard->audio_path,
                                  sharc__buf_str(&meta->name), id);
    }
    return 0;
}

const sharc__stream_ops sharc__shar_ops = {shar_open, shar_next, shar_close};

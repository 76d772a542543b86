/*
 * NeMo tarred audio: audio_N.tar with manifest_N.json (or one manifest with shard_id).
 * Members pair with manifest rows by name, not by position: the row's audio_filepath
 * basename, with a "-subN" suffix stripped, names the member. Several rows may cut one
 * member by offset/duration; rows with a truthy _skipme are dropped silently, as NeMo
 * does. Members without a row and rows without a member are reported.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/tar.h"
#include "io/lines.h"
#include "plan/json.h"
#include "base/layout.h"
#include "formats/stream.h"

typedef struct nemo_row {
    char *key;       ///< member name the row refers to
    char *path;      ///< audio_filepath as written (the cut id)
    size_t line_off; ///< the raw line in `lines`
    size_t line_len;
    uint64_t lineno;
    int used;
    int skipme;
    int bad;   ///< the line did not parse; reported once
    char *why; ///< why, when bad
} nemo_row;

struct sharc__stream {
    sharc__ctx *ctx;
    int hinted; ///< a member without a row was looked for under another path
    const sharc__shard *shard;
    const sharc__stream_opts *opts;
    sharc__tar *tar;
    sharc__buf lines; ///< all rows of the shard, each followed by a NUL
    nemo_row *rows;
    size_t n_rows;
    uint32_t *by_key; ///< row indices sorted by key, then manifest order
    sharc__member member;
    size_t pending_first, pending_end; ///< range in by_key of the current member's rows
    size_t bad_cursor, missing_cursor;
    int tar_done;
    uint64_t position;
};

static void nemo_close(sharc__stream **sp)
{
    sharc__stream *s = *sp;
    if (!s)
        return;
    sharc__tar_close(&s->tar);
    for (size_t i = 0; i < s->n_rows; i++) {
        sharc__free(s->ctx, s->rows[i].key);
        sharc__free(s->ctx, s->rows[i].path);
        sharc__free(s->ctx, s->rows[i].why);
    }
    sharc__free(s->ctx, s->rows);
    sharc__free(s->ctx, s->by_key);
    sharc__buf_free(s->ctx, &s->lines);
    sharc__member_free(s->ctx, &s->member);
    sharc__free(s->ctx, s);
    *sp = NULL;
}

/*
 * The tar member a row's audio_filepath names, as NeMo's LazyNeMoTarredIterator finds it:
 * the whole path, with a -subN before the extension removed, by the regular expression
 * ^(?P<stem>.+)(?P<sub>-sub\d+)(?P<ext>\.\w+)?$ (several rows cutting one member are
 * written as x-sub1.wav, x-sub2.wav, ...). The member's name must then equal it: no
 * directory is taken off.
 */
static char *member_key(sharc__ctx *ctx, const char *path)
{
    size_t n = strlen(path), end;
    size_t stem = sharc__nemo_sub_at(path, &end);
    if (stem == n) /* no -subN there, or nothing before it */
        return sharc__strdup(ctx, path);
    char *key = sharc__malloc(ctx, stem + (n - end) + 1);
    if (!key)
        return NULL;
    memcpy(key, path, stem);
    memcpy(key + stem, path + end, n - end + 1);
    return key;
}

/* By member, then the rows of one member by audio_filepath, as NeMo sorts them (and in
 * manifest order when two are equal: Python's sort is stable). */
static int cmp_rows(const void *a, const void *b, void *rows)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const nemo_row *r = rows;
    int c = strcmp(r[i].key, r[j].key);
    if (c == 0)
        c = strcmp(r[i].path, r[j].path);
    return c ? c : (i > j) - (i < j);
}

static int add_row(sharc__stream *s, const char *line, size_t len, uint64_t lineno, size_t *cap,
                   sharc__rawcut *scratch)
{
    sharc__ctx *ctx = s->ctx;
    if (s->n_rows == *cap) {
        size_t n = *cap ? *cap * 2 : 256;
        nemo_row *p = sharc__realloc(ctx, s->rows, *cap * sizeof *p, n * sizeof *p);
        if (!p)
            return SHARC_ERR(ENOMEM);
        s->rows = p;
        *cap = n;
    }
    nemo_row *r = &s->rows[s->n_rows];
    memset(r, 0, sizeof *r);
    r->line_off = s->lines.len;
    r->line_len = len;
    r->lineno = lineno;
    int rc = sharc__buf_append(ctx, &s->lines, line, len);
    if (rc == 0)
        rc = sharc__buf_append(ctx, &s->lines, "", 1);
    if (rc < 0)
        return rc;
    /* A row that names its member but has a bad value elsewhere (a negative duration, say)
     * still pairs with its member: emit_row then reports it as that cut's problem. */
    sharc__nemo_row row = {0};
    int jrc = sharc__json_nemo_row(ctx, line, len, "text", "lang", &row, scratch);
    if (jrc < 0 && jrc != SHARC_ERR_JSON) { /* out of memory: not the row's fault */
        sharc__free(ctx, row.audio_filepath);
        return jrc;
    }
    if (jrc < 0 && !row.audio_filepath) {
        r->bad = 1;
        r->key = sharc__strdup(ctx, "");
        r->path = sharc__strdup(ctx, "");
        r->why = sharc__strdup(ctx, ctx->error);
    } else {
        r->key = member_key(ctx, row.audio_filepath);
        r->path = row.audio_filepath;
        row.audio_filepath = NULL;
        r->skipme = row.skipme;
    }
    sharc__free(ctx, row.audio_filepath);
    s->n_rows++;
    return (r->key && r->path && (!r->bad || r->why)) ? 0 : SHARC_ERR(ENOMEM);
}

static int load_rows(sharc__stream *s, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    const sharc__shard *sh = s->shard;
    sharc__rawcut scratch = {0};
    size_t cap = 0;
    int rc = 0;
    if (sh->nemo_in_memory) {
        const char *p = sharc__buf_str(&sh->nemo_rows), *end = p + sh->nemo_rows.len;
        uint64_t k = 0;
        while (rc == 0 && p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            rc = add_row(s, p, len, ++k, &cap, &scratch);
            p += len + 1;
        }
    } else {
        sharc__lines *l = NULL;
        const char *line;
        size_t len;
        uint64_t lineno;
        rc = sharc__lines_open(&l, ctx, sh->meta_path, s->opts->max_line_bytes);
        while (rc == 0 && (rc = sharc__lines_next(l, &line, &len, &lineno)) == 0)
            rc = add_row(s, line, len, lineno, &cap, &scratch);
        if (rc == SHARC_END)
            rc = 0;
        sharc__lines_close(&l);
        if (rc < 0)
            sharc__stream_fail(ctx, err, rc, sharc__problem_of(rc), 1, sh->meta_path, NULL, NULL);
    }
    sharc__rawcut_free(ctx, &scratch);
    if (rc < 0)
        return rc;
    s->by_key = sharc__malloc(ctx, (s->n_rows ? s->n_rows : 1) * sizeof *s->by_key);
    if (!s->by_key)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < s->n_rows; i++)
        s->by_key[i] = (uint32_t)i;
    qsort_r(s->by_key, s->n_rows, sizeof *s->by_key, cmp_rows, s->rows);
    return 0;
}

static int nemo_open(sharc__stream **out, sharc__ctx *ctx, const sharc__shard *shard,
                     const sharc__stream_opts *o, sharc__stream_error *err)
{
    int rc;
    sharc__stream *s = sharc__calloc(ctx, 1, sizeof *s);
    *out = NULL;
    if (!s)
        return SHARC_ERR(ENOMEM);
    s->ctx = ctx;
    s->shard = shard;
    s->opts = o;
    if ((rc = load_rows(s, err)) < 0)
        goto fail;
    if ((rc = sharc__stream_open_audio_tar(&s->tar, ctx, shard->audio_path, o, NULL)) < 0) {
        sharc__stream_fail(ctx, err, rc, sharc__problem_of(rc), 1, shard->audio_path, NULL, NULL);
        goto fail;
    }
    /* Rows cut windows from long recordings: of a remote shard, fetch only those. */
    if (o->lazy_audio)
        sharc__tar_set_ranged(s->tar);
    *out = s;
    return 0;
fail:
    nemo_close(&s);
    return rc;
}

/* First index in by_key whose row key is >= key. */
static size_t lower_bound(const sharc__stream *s, const char *key)
{
    size_t lo = 0, hi = s->n_rows;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(s->rows[s->by_key[mid]].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The cut id of member `name`: its first row's audio_filepath, in the order rows are read
 * (rows dropped by _skipme and rows that did not parse aside); NULL when it has none. */
static const char *member_cut(const sharc__stream *s, const char *name)
{
    for (size_t i = *name ? lower_bound(s, name) : s->n_rows; i < s->n_rows; i++) {
        const nemo_row *r = &s->rows[s->by_key[i]];
        if (strcmp(r->key, name) != 0)
            break;
        if (!r->bad && !r->skipme)
            return r->path;
    }
    return NULL;
}

static int emit_row(sharc__stream *s, nemo_row *r, sharc__rawcut *c, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    sharc__nemo_row row = {0};
    sharc__rawcut_reset(c);
    c->shard = s->shard->audio_path;
    c->position = s->position++;
    int rc = sharc__json_nemo_row(ctx, sharc__buf_str(&s->lines) + r->line_off, r->line_len,
                                  s->opts->nemo_text_field, s->opts->nemo_lang_field, &row, c);
    sharc__free(ctx, row.audio_filepath);
    if (rc < 0) {
        sharc__wrap_error(ctx, rc, "%s line %llu", s->shard->meta_path,
                          (unsigned long long)r->lineno);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_JSON, 0, s->shard->meta_path,
                                  sharc__buf_str(&s->member.name), r->path);
    }
    c->duration = row.duration; /* < 0: the whole member, known after decoding */
    c->window = row.duration >= 0;
    c->offset = row.offset;
    if ((rc = sharc__buf_set_str(ctx, &c->id, r->path)) < 0 ||
        (rc = sharc__buf_set(ctx, &c->member, s->member.name.data, s->member.name.len)) < 0)
        return rc;
    /* Rows of one member (windows into a long recording) share it: left in the file, each
     * row only notes where it is; in cut mode each row borrows it; else (the sampler holds
     * rows apart) each row gets a copy. */
    c->audio_in_file = s->member.in_file;
    c->audio_at = s->member.at;
    c->audio_file_id = s->member.file_id;
    c->audio_size = s->member.in_file ? s->member.size : s->member.data.len;
    if (s->member.in_file)
        return 0;
    if (s->opts->lend_audio) {
        c->audio_lent = s->member.data.data;
        return 0;
    }
    return sharc__buf_set(ctx, &c->audio, s->member.data.data, s->member.data.len);
}

/* Rows that never met their member, and rows that did not parse, are reported at the end. */
static int report_leftovers(sharc__stream *s, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    while (s->bad_cursor < s->n_rows) {
        nemo_row *r = &s->rows[s->bad_cursor++];
        if (!r->bad)
            continue;
        char where[64];
        snprintf(where, sizeof where, "line %llu", (unsigned long long)r->lineno);
        int rc = sharc__set_error(ctx, SHARC_ERR_JSON, "%s %s: invalid manifest row: %s",
                                  s->shard->meta_path, where, r->why);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_JSON, 0, s->shard->meta_path, where,
                                  NULL);
    }
    while (s->missing_cursor < s->n_rows) {
        nemo_row *r = &s->rows[s->missing_cursor++];
        if (r->used || r->skipme || r->bad)
            continue;
        int rc = sharc__set_error(
            ctx, SHARC_ERR_MISMATCH, "%s line %llu: %s has no member %s in %s", s->shard->meta_path,
            (unsigned long long)r->lineno, r->path, r->key, s->shard->audio_path);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_MISSING_MEMBER, 0,
                                  s->shard->audio_path, r->key, r->path);
    }
    return SHARC_END;
}

/* A row whose audio_filepath is `name` in some directory, for the message of a member that
 * has no row: the manifest named it by a longer path than the tar does. */
static const nemo_row *row_in_a_directory(const sharc__stream *s, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < s->n_rows; i++) {
        const char *k = s->rows[i].key;
        size_t m = strlen(k);
        if (m > n && k[m - n - 1] == '/' && strcmp(k + m - n, name) == 0)
            return &s->rows[i];
    }
    return NULL;
}

static int nemo_next(sharc__stream *s, sharc__rawcut *c, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    for (;;) {
        while (s->pending_first < s->pending_end) {
            nemo_row *r = &s->rows[s->by_key[s->pending_first++]];
            if (r->bad || r->skipme)
                continue;
            return emit_row(s, r, c, err);
        }
        if (s->tar_done)
            return report_leftovers(s, err);
        int rc = sharc__tar_next(s->tar, &s->member);
        if (rc == SHARC_END) {
            s->tar_done = 1;
            continue;
        }
        const char *name = sharc__buf_str(&s->member.name);
        if (rc == SHARC_ERR_TOO_LARGE) {
            /* Over the size cap: skipped unread by the next call, so the shard goes on and
             * only this member's rows are lost (not reported again as missing). */
            size_t first = lower_bound(s, name), end = first;
            while (end < s->n_rows && strcmp(s->rows[s->by_key[end]].key, name) == 0)
                s->rows[s->by_key[end++]].used = 1;
            return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_TOO_LARGE, 0,
                                      s->shard->audio_path, name, member_cut(s, name));
        }
        if (rc < 0) {
            /* A broken archive loses the rest of the shard; its rows are not reported
             * one by one as missing. sharc__tar_next names the member it broke at. */
            s->tar_done = 1;
            s->missing_cursor = s->n_rows;
            return sharc__stream_fail(ctx, err, rc, sharc__problem_of(rc), 1, s->shard->audio_path,
                                      name, s->member.broke_inside ? member_cut(s, name) : NULL);
        }
        size_t first = lower_bound(s, name), end = first;
        if (first < s->n_rows && strcmp(s->rows[s->by_key[first]].key, name) == 0 &&
            s->rows[s->by_key[first]].used) {
            /* Its rows went with its first copy: emitting them again would repeat cuts. */
            rc = sharc__set_error(ctx, SHARC_ERR_MISMATCH,
                                  "%s: member %s appears again; its rows in %s were read with "
                                  "its first copy",
                                  s->shard->audio_path, name, s->shard->meta_path);
            return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_ORPHAN_MEMBER, 0,
                                      s->shard->audio_path, name, NULL);
        }
        while (end < s->n_rows && strcmp(s->rows[s->by_key[end]].key, name) == 0)
            s->rows[s->by_key[end++]].used = 1;
        if (first == end) {
            /* The hint costs a pass over the rows: for the first such member only. */
            const nemo_row *other = s->hinted++ ? NULL : row_in_a_directory(s, name);
            rc = sharc__set_error(
                ctx, SHARC_ERR_MISMATCH, "%s: member %s has no row in %s%s%s%s",
                s->shard->audio_path, name, s->shard->meta_path, other ? " (its row names it " : "",
                other ? other->path : "",
                other ? ": rows name members by their whole audio_filepath, as NeMo does)" : "");
            return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_ORPHAN_MEMBER, 0,
                                      s->shard->audio_path, name, NULL);
        }
        s->pending_first = first;
        s->pending_end = end;
    }
}

const sharc__stream_ops sharc__nemo_ops = {nemo_open, nemo_next, nemo_close};

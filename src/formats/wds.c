/*
 * WebDataset-style tars: consecutive members sharing a key (the path up to the first dot
 * of the basename, as webdataset's base_plus_ext splits it) form one sample. Audio is
 * key.flac|wav|opus|mp3|ogg, metadata key.json (duration, text, speaker, language, ...)
 * and/or key.txt (the transcript), extensions in any case; any other member becomes an
 * extra field named by its extension.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "io/tar.h"
#include "plan/json.h"
#include "base/layout.h"
#include "formats/stream.h"

/* A member over the size cap: what to report for its sample. */
typedef struct oversized {
    sharc__buf message, member;
} oversized;

struct sharc__stream {
    sharc__ctx *ctx;
    const sharc__shard *shard;
    sharc__tar *tar;
    sharc__member next; ///< lookahead member (first of the next sample)
    int have_next;
    int tar_done;
    int pending_rc; ///< a read error met while the previous sample was complete
    sharc_problem pending_kind;
    sharc__buf pending_member, pending_message;
    sharc__buf pending_cut; ///< the sample of the tar's failure (its member's key), if any
    int next_too_large;     ///< the lookahead is a member over the size cap (not read)
    int sample_too_large;   ///< the sample being built has such a member
    oversized next_large;   ///< the lookahead's, kept when it was met
    oversized large;        ///< the sample's first: reported when the sample is complete
    sharc__buf key;
    char exts[SHARC__MAX_FIELDS + 3][32]; ///< extensions of the sample's members so far
    size_t n_exts;
    sharc__buf duplicate; ///< a member whose extension the sample already had
    int warned_audio;     ///< a sample with several audio members was reported
    sharc__buf json;      ///< key.json of the current sample
    sharc__buf txt;       ///< key.txt of the current sample
    int has_json, has_txt;
    uint64_t position;
};

/*
 * Split a member name into key and extension as webdataset's base_plus_ext does, with
 * re.match(r"^((?:.*\/|)[^.]+)[.]([^/]*)$") (a backslash added here, to keep the comment
 * open): the key runs to the first dot of the basename, which must not start it (then only
 * a directory whose last part has no dot is a key: "d/.wav" is key "d/"). 0 for a name with
 * no key (".wav", "README", "a.b/.wav"), and for webdataset's meta files (__x__ at the top),
 * which belong to no sample.
 */
static int split_key(const char *name, size_t *key_len, const char **ext)
{
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    size_t n = strlen(name);
    if (!slash && n >= 4 && strncmp(name, "__", 2) == 0 && strcmp(name + n - 2, "__") == 0)
        return 0;
    if (*base != '.') {
        const char *dot = strchr(base, '.');
        if (!dot)
            return 0;
        *key_len = (size_t)(dot - name);
        *ext = dot + 1;
        return 1;
    }
    const char *seg = base - 1; /* the last directory's part, with its '/' */
    while (seg > name && seg[-1] != '/')
        seg--;
    if (!slash || memchr(seg, '.', (size_t)(base - seg)))
        return 0;
    *key_len = (size_t)(base - name);
    *ext = base + 1;
    return 1;
}

static int is_audio_ext(const char *ext)
{
    for (size_t i = 0; i < sharc__n_audio_exts; i++)
        if (strcasecmp(ext, sharc__audio_exts[i]) == 0)
            return 1;
    return 0;
}

/* In batch mode audio members of an uncompressed tar file are left there; the others are read. */
static int is_audio_member(const char *name)
{
    size_t key_len;
    const char *ext;
    return split_key(name, &key_len, &ext) && is_audio_ext(ext);
}

static void wds_close(sharc__stream **sp)
{
    sharc__stream *s = *sp;
    if (!s)
        return;
    sharc__tar_close(&s->tar);
    sharc__member_free(s->ctx, &s->next);
    sharc__buf_free(s->ctx, &s->key);
    sharc__buf_free(s->ctx, &s->duplicate);
    sharc__buf_free(s->ctx, &s->json);
    sharc__buf_free(s->ctx, &s->txt);
    sharc__buf_free(s->ctx, &s->pending_member);
    sharc__buf_free(s->ctx, &s->pending_cut);
    sharc__buf_free(s->ctx, &s->pending_message);
    sharc__buf_free(s->ctx, &s->next_large.message);
    sharc__buf_free(s->ctx, &s->next_large.member);
    sharc__buf_free(s->ctx, &s->large.message);
    sharc__buf_free(s->ctx, &s->large.member);
    sharc__free(s->ctx, s);
    *sp = NULL;
}

static int wds_open(sharc__stream **out, sharc__ctx *ctx, const sharc__shard *shard,
                    const sharc__stream_opts *o, sharc__stream_error *err)
{
    sharc__stream *s = sharc__calloc(ctx, 1, sizeof *s);
    *out = NULL;
    if (!s)
        return SHARC_ERR(ENOMEM);
    s->ctx = ctx;
    s->shard = shard;
    int rc = sharc__stream_open_audio_tar(&s->tar, ctx, shard->audio_path, o, is_audio_member);
    if (rc < 0) {
        sharc__stream_fail(ctx, err, rc, sharc__problem_of(rc), 1, shard->audio_path, NULL, NULL);
        wds_close(&s);
        return rc;
    }
    *out = s;
    return 0;
}

static void swap_buf(sharc__buf *a, sharc__buf *b)
{
    sharc__buf t = *a;
    *a = *b;
    *b = t;
}

/* File the lookahead member into the sample being built. */
static int take_member(sharc__stream *s, sharc__rawcut *c, const char *ext, int *has_audio)
{
    sharc__ctx *ctx = s->ctx;
    if (is_audio_ext(ext) && !*has_audio) {
        swap_buf(&c->member, &s->next.name);
        swap_buf(&c->audio, &s->next.data);
        c->audio_in_file = s->next.in_file;
        c->audio_at = s->next.at;
        c->audio_file_id = s->next.file_id;
        c->audio_size = s->next.size;
        *has_audio = 1;
    } else if (strcasecmp(ext, "json") == 0) {
        swap_buf(&s->json, &s->next.data);
        s->has_json = 1;
    } else if (strcasecmp(ext, "txt") == 0) {
        swap_buf(&s->txt, &s->next.data);
        s->has_txt = 1;
    } else if (c->n_fields < SHARC__MAX_FIELDS) {
        if (is_audio_ext(ext) && !s->duplicate.len && !s->warned_audio++)
            sharc__log(ctx, SHARC_LOG_WARN,
                       "%s: sample %.*s has several audio members: the first, %s, is read and "
                       "%s is an extra field (said once per shard)",
                       s->shard->audio_path, (int)s->key.len, (const char *)s->key.data,
                       sharc__buf_str(&c->member), sharc__buf_str(&s->next.name));
        sharc__field_data *f = &c->fields[c->n_fields++];
        f->name = NULL; /* set from the member name by the reader */
        f->present = 1;
        f->is_tar = 1;
        swap_buf(&f->member, &s->next.name);
        swap_buf(&f->data, &s->next.data);
        sharc__buf_clear(&f->json);
    } else {
        sharc__log(ctx, SHARC_LOG_WARN, "%s: ignoring member %s: more than %d extra members",
                   s->shard->audio_path, sharc__buf_str(&s->next.name), SHARC__MAX_FIELDS);
    }
    return 0;
}

/* Record the lookahead's extension in the sample; a second member with it is noted. */
static int note_extension(sharc__stream *s, const char *ext)
{
    for (size_t i = 0; i < s->n_exts; i++)
        if (strcmp(s->exts[i], ext) == 0)
            return s->duplicate.len
                       ? 0
                       : sharc__buf_set(s->ctx, &s->duplicate, s->next.name.data, s->next.name.len);
    if (s->n_exts < sizeof s->exts / sizeof s->exts[0])
        snprintf(s->exts[s->n_exts++], sizeof s->exts[0], "%s", ext);
    return 0;
}

static int finish_sample(sharc__stream *s, sharc__rawcut *c, int has_audio,
                         sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    const char *id = sharc__buf_str(&c->id);
    int rc;
    if (s->duplicate.len) {
        rc = sharc__set_error(ctx, SHARC_ERR_MISMATCH,
                              "%s: sample %s has member %s twice (webdataset stops on it: "
                              "\"duplicate file name\"), so which one pairs with the rest is "
                              "not known",
                              s->shard->audio_path, id, sharc__buf_str(&s->duplicate));
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_ORPHAN_MEMBER, 0,
                                  s->shard->audio_path, sharc__buf_str(&s->duplicate), id);
    }
    if (!has_audio) {
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT, "%s: sample %s has no audio member (%s)",
                              s->shard->audio_path, id, "flac, wav, opus, mp3 or ogg");
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_MISSING_MEMBER, 0,
                                  s->shard->audio_path, id, id);
    }
    c->duration = -1;
    if (s->has_json &&
        (rc = sharc__json_wds_meta(ctx, (const char *)s->json.data, s->json.len, c)) < 0) {
        sharc__wrap_error(ctx, rc, "%s member %s.json", s->shard->audio_path, id);
        return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_JSON, 0, s->shard->audio_path, id,
                                  id);
    }
    if (s->has_txt && !c->has_text) {
        /* Trailing newlines of a .txt member are not part of the transcript. */
        size_t n = s->txt.len;
        while (n && (s->txt.data[n - 1] == '\n' || s->txt.data[n - 1] == '\r'))
            n--;
        /* Python reads the NUL byte as a character of the text; the cut API hands texts out
         * NUL-terminated, which would cut it there: refused, as the JSON escape \u0000 is. */
        if (n && memchr(s->txt.data, 0, n)) {
            rc = sharc__set_error(ctx, SHARC_ERR_JSON,
                                  "%s: sample %s: its .txt transcript holds the character U+0000 "
                                  "(a NUL byte), which sharc refuses rather than cut the string "
                                  "there",
                                  s->shard->audio_path, id);
            return sharc__stream_fail(ctx, err, rc, SHARC_PROBLEM_JSON, 0, s->shard->audio_path, id,
                                      id);
        }
        if ((rc = sharc__buf_set(ctx, &c->text, s->txt.data, n)) < 0)
            return rc;
        c->has_text = 1;
    }
    return 0;
}

/* A failure of the tar (shard-fatal), reported with the member sharc__tar_next names in
 * s->next.name and the sample its key gives (kept in s->pending_cut), when it names one. A
 * member without a key that it broke inside sits in the sample being read: that one. */
static int tar_failed(sharc__stream *s, sharc__stream_error *err, int rc)
{
    const char *name = sharc__buf_str(&s->next.name), *ext;
    size_t key_len;
    int keyed = *name && split_key(name, &key_len, &ext);
    sharc__buf_clear(&s->pending_cut);
    if ((keyed && sharc__buf_set(s->ctx, &s->pending_cut, name, key_len) < 0) ||
        (!keyed && *name && s->next.broke_inside &&
         sharc__buf_set(s->ctx, &s->pending_cut, s->key.data, s->key.len) < 0))
        sharc__buf_clear(&s->pending_cut); /* reported without it */
    return sharc__stream_fail(s->ctx, err, rc, sharc__problem_of(rc), 1, s->shard->audio_path, name,
                              s->pending_cut.len ? sharc__buf_str(&s->pending_cut) : NULL);
}

static int wds_next(sharc__stream *s, sharc__rawcut *c, sharc__stream_error *err)
{
    sharc__ctx *ctx = s->ctx;
    int rc, has_audio = 0;
    if (s->pending_rc) {
        rc = s->pending_rc;
        s->pending_rc = 0;
        snprintf(ctx->error, sizeof ctx->error, "%s", sharc__buf_str(&s->pending_message));
        return sharc__stream_fail(ctx, err, rc, s->pending_kind, 1, s->shard->audio_path,
                                  sharc__buf_str(&s->pending_member),
                                  s->pending_cut.len ? sharc__buf_str(&s->pending_cut) : NULL);
    }
    sharc__rawcut_reset(c);
    c->n_fields = 0;
    c->shard = s->shard->audio_path;
    s->has_json = s->has_txt = 0;
    s->sample_too_large = 0;
    s->n_exts = 0;
    sharc__buf_clear(&s->duplicate);
    sharc__buf_clear(&s->key);
    for (;;) {
        if (!s->have_next && !s->tar_done) {
            rc = sharc__tar_next(s->tar, &s->next);
            s->next_too_large = rc == SHARC_ERR_TOO_LARGE;
            if (rc == SHARC_END) {
                s->tar_done = 1;
            } else if (s->next_too_large) {
                /* Skipped unread by the next call: it stands in the sample it belongs to,
                 * which is reported (and only it lost) once its other members are read. */
                const char *name = sharc__buf_str(&s->next.name);
                if (sharc__buf_set_str(ctx, &s->next_large.message, ctx->error) < 0 ||
                    sharc__buf_set_str(ctx, &s->next_large.member, name) < 0)
                    return SHARC_ERR(ENOMEM);
                s->have_next = 1;
            } else if (rc < 0) {
                s->tar_done = 1;
                rc = tar_failed(s, err, rc);
                /* The archive broke inside the sample being read, or right after one of its
                 * members: what was read of it may be part of it only (its transcript still
                 * to come), so it is the sample reported, not handed out (webdataset does
                 * not yield it either). One with a member over the size cap is reported as
                 * such first, and never handed out. */
                if (s->key.len == 0 || (!s->sample_too_large && s->pending_cut.len == s->key.len &&
                                        memcmp(s->pending_cut.data, s->key.data, s->key.len) == 0))
                    return rc;
                /* It broke at the next sample's member: the sample read so far is whole; hand
                 * it out, report the error next. */
                s->pending_rc = rc;
                s->pending_kind = err->kind;
                if (sharc__buf_set_str(ctx, &s->pending_member, sharc__buf_str(&err->member)) < 0 ||
                    sharc__buf_set_str(ctx, &s->pending_message, ctx->error) < 0)
                    return SHARC_ERR(ENOMEM);
                break;
            } else {
                s->have_next = 1;
            }
        }
        if (!s->have_next)
            break;
        size_t key_len;
        const char *ext;
        if (!split_key(sharc__buf_str(&s->next.name), &key_len, &ext)) {
            sharc__log(ctx, SHARC_LOG_WARN,
                       "%s: skipping member %s: its name has no sample key (no dot in its "
                       "file name, or one that starts it), and webdataset skips it too",
                       s->shard->audio_path, sharc__buf_str(&s->next.name));
            s->have_next = 0;
            s->next_too_large = 0;
            continue;
        }
        if (s->key.len == 0) {
            if ((rc = sharc__buf_set(ctx, &s->key, s->next.name.data, key_len)) < 0)
                return rc;
        } else if (key_len != s->key.len || memcmp(s->key.data, s->next.name.data, key_len) != 0) {
            break; /* the lookahead starts the next sample */
        }
        /* Extensions in lower case, as webdataset keys the sample's fields. */
        char ext_copy[32];
        snprintf(ext_copy, sizeof ext_copy, "%s", ext);
        for (char *q = ext_copy; *q; q++)
            *q = (char)tolower((unsigned char)*q);
        if ((rc = note_extension(s, ext_copy)) < 0)
            return rc;
        s->have_next = 0;
        if (s->next_too_large) {
            if (!s->sample_too_large) {
                oversized t = s->large;
                s->large = s->next_large;
                s->next_large = t;
            }
            s->sample_too_large = 1;
            s->next_too_large = 0;
            continue;
        }
        if ((rc = take_member(s, c, ext_copy, &has_audio)) < 0)
            return rc;
    }
    if (s->key.len == 0)
        return SHARC_END;
    if ((rc = sharc__buf_set(ctx, &c->id, s->key.data, s->key.len)) < 0)
        return rc;
    c->position = s->position++;
    if (s->sample_too_large) {
        const char *id = sharc__buf_str(&c->id);
        snprintf(ctx->error, sizeof ctx->error, "%s (sample %s)", sharc__buf_str(&s->large.message),
                 id);
        return sharc__stream_fail(ctx, err, SHARC_ERR_TOO_LARGE, SHARC_PROBLEM_TOO_LARGE, 0,
                                  s->shard->audio_path, sharc__buf_str(&s->large.member), id);
    }
    return finish_sample(s, c, has_audio, err);
}

const sharc__stream_ops sharc__wds_ops = {wds_open, wds_next, wds_close};

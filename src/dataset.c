#include "dataset.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "archive.h"
#include "braces.h"
#include "cut.h"
#include "hash.h"
#include "json.h"
#include "keyset.h"
#include "layout.h"
#include "rng.h"

#define MAX_EXPANSION        1000000
#define SHARC__MAX_FIELDS_DS (SHARC__MAX_FIELDS + 2)

const char *sharc__layout_name(sharc_layout l)
{
    switch (l) {
    case SHARC_LAYOUT_SHAR:
        return "shar";
    case SHARC_LAYOUT_NEMO:
        return "nemo";
    case SHARC_LAYOUT_WDS:
        return "wds";
    default:
        return "auto";
    }
}

/* ---- path expansion -------------------------------------------------------------- */

static int expand_list(sharc__ctx *ctx, const char *pattern, sharc__strs *out)
{
    struct stat st;
    if (stat(pattern, &st) == 0)
        return sharc__strs_push(ctx, out, sharc__strdup(ctx, pattern));
    return sharc__braces_expand(ctx, pattern, MAX_EXPANSION, out);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int too_many(sharc__ctx *ctx, const char *path)
{
    return sharc__set_error(ctx, SHARC_ERR_TOO_LARGE, "%s stands for more than %d paths", path,
                            MAX_EXPANSION);
}

/* The first directory glob() could not read for a reason other than its absence (set by
 * glob_error, per thread: glob takes no argument for its callback). */
static _Thread_local struct {
    char path[1024];
    int err;
} glob_failure;

static int glob_error(const char *path, int err)
{
    if (err == ENOENT || err == ENOTDIR)
        return 0; /* a name that is not a directory: nothing under it matches */
    snprintf(glob_failure.path, sizeof glob_failure.path, "%s", path);
    glob_failure.err = err;
    return 1;
}

/* `path` with glob's special characters other than * and ? escaped: `[` is not a wildcard
 * here (NeMo's brackets are braces), and a backslash is a character of the name. */
static char *escape_for_glob(sharc__ctx *ctx, const char *path)
{
    size_t n = strlen(path);
    char *s = sharc__malloc(ctx, 2 * n + 1);
    if (!s)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (path[i] == '[' || path[i] == ']' || path[i] == '\\')
            s[j++] = '\\';
        s[j++] = path[i];
    }
    s[j] = 0;
    return s;
}

/*
 * A path with the shell's wildcards * and ? that does not exist as given: the paths they
 * match, in byte order (a shell sorts by the locale; shard names sort the same either way).
 * Other characters stand for themselves. A pattern that matches nothing is an error, as a
 * missing file is, and so is a directory on the way that cannot be read.
 */
static int expand_wildcards(sharc__ctx *ctx, const char *path, sharc__strs *out, int *matched)
{
    struct stat st;
    if (!strpbrk(path, "*?") || stat(path, &st) == 0)
        return sharc__strs_push(ctx, out, sharc__strdup(ctx, path));
    *matched = 1;
    char *pattern = escape_for_glob(ctx, path);
    if (!pattern)
        return SHARC_ERR(ENOMEM);
    glob_t g;
    glob_failure.err = 0;
    int r = glob(pattern, GLOB_NOSORT, glob_error, &g);
    sharc__free(ctx, pattern);
    int rc = 0;
    if (r == GLOB_ABORTED || glob_failure.err)
        rc = sharc__set_error(ctx, SHARC_ERR(glob_failure.err ? glob_failure.err : EIO),
                              "%s: cannot read %s to match the pattern: %s", path,
                              glob_failure.err ? glob_failure.path : "a directory",
                              strerror(glob_failure.err ? glob_failure.err : EIO));
    else if (r == GLOB_NOMATCH)
        rc = sharc__set_error(ctx, SHARC_ERR(ENOENT), "%s: no file matches the pattern", path);
    else if (r != 0)
        rc = sharc__set_error(ctx, SHARC_ERR(ENOMEM), "%s: out of memory matching the pattern",
                              path);
    else if (g.gl_pathc > MAX_EXPANSION)
        rc = too_many(ctx, path);
    if (rc == 0)
        qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
        rc = sharc__strs_push(ctx, out, sharc__strdup(ctx, g.gl_pathv[i]));
    globfree(&g);
    return rc;
}

/* A path as given: its braces expanded, then its wildcards (`*matched` set when a wildcard
 * was matched); at most MAX_EXPANSION paths. */
static int expand_path(sharc__ctx *ctx, const char *path, sharc__strs *out, int *matched)
{
    sharc__strs braced = {0};
    size_t first = out->n;
    int rc = expand_list(ctx, path, &braced);
    for (size_t i = 0; rc == 0 && i < braced.n; i++) {
        rc = expand_wildcards(ctx, braced.items[i], out, matched);
        if (rc == 0 && out->n - first > MAX_EXPANSION)
            rc = too_many(ctx, path);
    }
    sharc__strs_free(ctx, &braced);
    return rc;
}

/* `l` as one malloc'd block (the caller's sharc_free()): the pointers, then the strings. */
static char **pack_paths(const sharc__strs *l)
{
    size_t bytes = l->n * sizeof(char *);
    for (size_t i = 0; i < l->n; i++)
        bytes += strlen(l->items[i]) + 1;
    char **v = malloc(bytes ? bytes : 1);
    if (!v)
        return NULL;
    char *w = (char *)(v + l->n);
    for (size_t i = 0; i < l->n; i++) {
        v[i] = w;
        w = stpcpy(w, l->items[i]) + 1;
    }
    return v;
}

int sharc_reader_expand_path(const char *path, char ***out, size_t *n, char *err, size_t err_size)
{
    sharc_logger silent = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, &silent);
    sharc__strs l = {0};
    int matched = 0, rc;
    if (!path || !out || !n)
        rc = sharc__set_error(&ctx, SHARC_ERR(EINVAL), "expand path: NULL argument");
    else if ((rc = expand_path(&ctx, path, &l, &matched)) == 0 && !(*out = pack_paths(&l)))
        rc = sharc__set_error(&ctx, SHARC_ERR(ENOMEM), "%s: out of memory", path);
    if (n)
        *n = rc == 0 ? l.n : 0;
    if (rc != 0 && out)
        *out = NULL;
    if (rc != 0 && err && err_size)
        snprintf(err, err_size, "%s", ctx.error[0] ? ctx.error : sharc_strerror(rc));
    sharc__strs_free(&ctx, &l);
    return rc;
}

/* ---- file classification --------------------------------------------------------- */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static int is_compression_suffix(const char *s)
{
    return *s == 0 || strcmp(s, ".gz") == 0 || strcmp(s, ".zst") == 0 || strcmp(s, ".zstd") == 0;
}

/* Shar: <field>.[NNNNNN.](jsonl|tar)[.gz|.zst]. Returns 1 and fills field/kind. */
static int shar_name(const char *base, char *field, size_t fcap, int *is_tar)
{
    const char *dot = strchr(base, '.');
    if (!dot || dot == base || (size_t)(dot - base) >= fcap)
        return 0;
    const char *p = dot + 1;
    const char *q = p;
    while (isdigit((unsigned char)*q))
        q++;
    if (q > p) {
        if (*q != '.')
            return 0;
        p = q + 1;
    }
    if (strncmp(p, "jsonl", 5) == 0 && is_compression_suffix(p + 5))
        *is_tar = 0;
    else if (strncmp(p, "tar", 3) == 0 && is_compression_suffix(p + 3))
        *is_tar = 1;
    else
        return 0;
    memcpy(field, base, (size_t)(dot - base));
    field[dot - base] = 0;
    return 1;
}

static int is_tar_name(const char *base)
{
    return has_suffix(base, ".tar") || has_suffix(base, ".tar.gz") || has_suffix(base, ".tgz") ||
           has_suffix(base, ".tar.zst") || has_suffix(base, ".tar.zstd");
}

/*
 * The shard id NeMo finds in a file name with re.search(r"audio[^/]*_(\d+)[^/]*\.tar") or
 * re.search(r"manifest[^/]*_(\d+)[^/]*\.json"): `word` anywhere in the name (en_audio_0.tar,
 * train_manifest_3.jsonl.gz), then the last "_<digits>" before the last `ext`, as the greedy
 * pattern finds it. 1 with the id, 0 when the name has none.
 */
static int nemo_id(const char *base, const char *word, const char *ext, long long *id)
{
    const char *w = strstr(base, word), *e = NULL;
    if (!w)
        return 0;
    for (const char *p = strstr(w + strlen(word), ext); p; p = strstr(p + 1, ext))
        e = p;
    long long found = -1;
    for (const char *p = w + strlen(word); e && p < e; p++) {
        if (*p != '_' || !isdigit((unsigned char)p[1]))
            continue;
        char *end;
        errno = 0;
        long long v = strtoll(p + 1, &end, 10);
        if (end <= e && errno == 0)
            found = v;
    }
    if (found < 0)
        return 0;
    *id = found;
    return 1;
}

/* NeMo's audio_N.tar, named so that the id is known: a tar name NeMo's pattern finds an id in. */
static int nemo_tar_id(const char *base, long long *id)
{
    return is_tar_name(base) && nemo_id(base, "audio", ".tar", id);
}

/* A JSON-lines name (.json or .jsonl, plain or compressed), as NeMo's manifests are. */
static int json_lines_name(const char *base)
{
    const char *e = strstr(base, ".json");
    for (const char *p = e; p; p = strstr(p + 1, ".json"))
        e = p;
    return e && (is_compression_suffix(e + 5) || (e[5] == 'l' && is_compression_suffix(e + 6)));
}

/* NeMo's manifest_N.json for shard N. */
static int nemo_manifest_id(const char *base, long long *id)
{
    return json_lines_name(base) && nemo_id(base, "manifest", ".json", id);
}

static int list_dir(sharc__ctx *ctx, const char *dir, sharc__strs *out, int recurse_manifests,
                    size_t *ignored)
{
    DIR *d = opendir(dir);
    if (!d)
        return sharc__set_error(ctx, SHARC_ERR(errno), "cannot list %s: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    size_t first = out->n;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *p = sharc__malloc(ctx, n);
        if (!p) {
            rc = SHARC_ERR(ENOMEM);
            break;
        }
        size_t len = strlen(dir);
        snprintf(p, n, "%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/", e->d_name);
        struct stat st;
        const int known = stat(p, &st) == 0; /* if not, opening it names the error */
        if (known && S_ISDIR(st.st_mode)) {
            /* Other subdirectories are not searched, and said so, so that a dataset of
             * subdirectories is not read as none. */
            if (recurse_manifests && strcmp(e->d_name, SHARC__NEMO_SHARDED_DIR) == 0) {
                rc = list_dir(ctx, p, out, 0, ignored);
            } else {
                sharc__log(ctx, SHARC_LOG_WARN,
                           "ignoring directory %s: shards are read from the directories given, "
                           "not from their subdirectories (give it, or a pattern, as a path)",
                           p);
                (*ignored)++;
            }
            sharc__free(ctx, p);
            continue;
        }
        if (known && !S_ISREG(st.st_mode)) {
            /* opening a FIFO nobody writes to would wait forever */
            sharc__log(ctx, SHARC_LOG_WARN,
                       "ignoring %s: not a regular file (a FIFO, socket or device; give it as a "
                       "path to read it)",
                       p);
            (*ignored)++;
            sharc__free(ctx, p);
            continue;
        }
        rc = sharc__strs_push(ctx, out, p);
    }
    closedir(d);
    if (rc == 0 && out->n > first)
        qsort(out->items + first, out->n - first, sizeof(char *), cmp_str);
    return rc;
}

/* ---- building shards --------------------------------------------------------------- */

static int add_shard(sharc__ctx *ctx, sharc__dataset *d, sharc__shard **out)
{
    sharc__shard *p =
        sharc__realloc(ctx, d->shards, d->n_shards * sizeof *p, (d->n_shards + 1) * sizeof *p);
    if (!p)
        return SHARC_ERR(ENOMEM);
    d->shards = p;
    *out = &p[d->n_shards++];
    memset(*out, 0, sizeof **out);
    (*out)->nemo_shard_id = -1;
    return 0;
}

static int same_dir(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t na = sa ? (size_t)(sa - a) : 0, nb = sb ? (size_t)(sb - b) : 0;
    return na == nb && strncmp(a, b, na) == 0;
}

/* The shard number of a Shar file name (the digits of <field>.NNNNNN.ext), with its length;
 * NULL when it has none. */
static const char *shar_number(const char *path, size_t *len)
{
    const char *dot = strchr(base_name(path), '.');
    const char *q = dot ? dot + 1 : NULL;
    while (q && isdigit((unsigned char)*q))
        q++;
    *len = q ? (size_t)(q - dot - 1) : 0;
    return *len ? dot + 1 : NULL;
}

typedef struct shar_group {
    char name[128];
    int is_tar;
    sharc__strs files;
} shar_group;

/*
 * Next to numbered cuts files (cuts.000000.jsonl.gz), a "field" none of whose files carries
 * a shard number is no Shar field but another layout's shards (NeMo's audio_0.tar,
 * WebDataset's shard-000000.tar): ignored with a warning, not paired as a field.
 */
static void drop_unnumbered_fields(sharc__ctx *ctx, sharc__dataset *d, shar_group *groups,
                                   size_t *n_groups)
{
    size_t len, kept = 0;
    const shar_group *cuts = NULL;
    for (size_t g = 0; g < *n_groups; g++)
        if (strcmp(groups[g].name, "cuts") == 0)
            cuts = &groups[g];
    if (!cuts || cuts->files.n == 0 || !shar_number(cuts->files.items[0], &len))
        return;
    for (size_t g = 0; g < *n_groups; g++) {
        int numbered = 0;
        for (size_t i = 0; i < groups[g].files.n && !numbered; i++)
            numbered = shar_number(groups[g].files.items[i], &len) != NULL;
        if (numbered) {
            groups[kept++] = groups[g];
            continue;
        }
        for (size_t i = 0; i < groups[g].files.n; i++)
            sharc__log(ctx, SHARC_LOG_WARN,
                       "ignoring %s: not a Shar field file (no shard number in its name, unlike "
                       "the cuts files beside it: a shard of another layout?)",
                       groups[g].files.items[i]);
        d->n_ignored += groups[g].files.n;
        sharc__strs_free(ctx, &groups[g].files);
    }
    for (size_t g = kept; g < *n_groups; g++) /* moved or freed: nothing of theirs to free */
        memset(&groups[g], 0, sizeof groups[g]);
    *n_groups = kept;
}

/* Build the Shar shards of the files in one directory (files sorted by name). */
static int shar_dir(sharc__ctx *ctx, sharc__dataset *d, char **files, size_t n)
{
    shar_group groups[SHARC__MAX_FIELDS_DS];
    size_t n_groups = 0;
    int rc = 0;
    memset(groups, 0, sizeof groups);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *b = base_name(files[i]);
        char field[128];
        int is_tar;
        if (has_suffix(b, ".idx"))
            continue; /* Lhotse's index sidecars */
        if (!shar_name(b, field, sizeof field, &is_tar)) {
            sharc__log(ctx, SHARC_LOG_WARN, "ignoring %s: not a Shar field file", files[i]);
            d->n_ignored++;
            continue;
        }
        if (strcmp(field, "cuts") == 0 && is_tar) {
            sharc__log(ctx, SHARC_LOG_WARN, "ignoring %s: cuts must be JSON lines", files[i]);
            d->n_ignored++;
            continue;
        }
        size_t g = 0;
        while (g < n_groups && strcmp(groups[g].name, field) != 0)
            g++;
        if (g == n_groups) {
            if (n_groups == SHARC__MAX_FIELDS_DS) {
                rc = sharc__set_error(ctx, SHARC_ERR_FORMAT, "too many Shar fields next to %s",
                                      files[i]);
                break;
            }
            snprintf(groups[g].name, sizeof groups[g].name, "%s", field);
            groups[g].is_tar = is_tar;
            n_groups++;
        } else if (groups[g].is_tar != is_tar) {
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "Shar field %s has both tar and jsonl shards (%s)", field,
                                  files[i]);
            break;
        }
        rc = sharc__strs_push(ctx, &groups[g].files, sharc__strdup(ctx, files[i]));
    }
    /* Fields pair by index: in name order, also when the files were given one by one. */
    for (size_t g = 0; g < n_groups; g++) {
        qsort(groups[g].files.items, groups[g].files.n, sizeof(char *), cmp_str);
        for (size_t i = 1; rc == 0 && i < groups[g].files.n; i++)
            if (strcmp(groups[g].files.items[i - 1], groups[g].files.items[i]) == 0)
                rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                      "%s is found twice (a path given twice, or patterns that "
                                      "overlap): its cuts would be read twice per epoch",
                                      groups[g].files.items[i]);
    }
    if (rc == 0)
        drop_unnumbered_fields(ctx, d, groups, &n_groups);
    shar_group *cuts = NULL, *rec = NULL;
    for (size_t g = 0; g < n_groups; g++) {
        if (strcmp(groups[g].name, "cuts") == 0)
            cuts = &groups[g];
        else if (strcmp(groups[g].name, "recording") == 0)
            rec = &groups[g];
    }
    if (rc == 0 && !cuts)
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                              "no cuts.*.jsonl shards to go with %s: give the Shar directory, or "
                              "its cuts files too",
                              files[0]);
    if (rc == 0 && (!rec || !rec->is_tar))
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                              "no recording.*.tar shards to go with %s: give the Shar directory, "
                              "or its recording files too",
                              cuts->files.items[0]);
    for (size_t g = 0; g < n_groups && rc == 0; g++) {
        if (groups[g].files.n != cuts->files.n)
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "Shar field %s has %zu shards but cuts has %zu (in the "
                                  "directory of %s)",
                                  groups[g].name, groups[g].files.n, cuts->files.n,
                                  cuts->files.items[0]);
    }
    /* Pairing is by position: numbered files at one position must carry one number, or a
     * field is missing a shard that another field has (and the cut ids would not pair). */
    for (size_t g = 0; g < n_groups && rc == 0; g++) {
        for (size_t k = 0; k < cuts->files.n && rc == 0; k++) {
            size_t la, lb;
            const char *a = shar_number(cuts->files.items[k], &la);
            const char *b = shar_number(groups[g].files.items[k], &lb);
            if (a && b && (la != lb || memcmp(a, b, la) != 0))
                rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                      "%s pairs with %s by position, but their shard numbers "
                                      "differ: field %s lacks a shard that cuts has, or has one "
                                      "more",
                                      groups[g].files.items[k], cuts->files.items[k],
                                      groups[g].name);
        }
    }
    for (size_t k = 0; rc == 0 && k < cuts->files.n; k++) {
        sharc__shard *s;
        if ((rc = add_shard(ctx, d, &s)) < 0)
            break;
        s->meta_path = sharc__strdup(ctx, cuts->files.items[k]);
        s->audio_path = sharc__strdup(ctx, rec->files.items[k]);
        s->fields = sharc__calloc(ctx, n_groups, sizeof *s->fields);
        if (!s->meta_path || !s->audio_path || !s->fields) {
            rc = SHARC_ERR(ENOMEM);
            break;
        }
        for (size_t g = 0; g < n_groups; g++) {
            if (&groups[g] == cuts || &groups[g] == rec)
                continue;
            sharc__shar_field *f = &s->fields[s->n_fields++];
            f->name = sharc__strdup(ctx, groups[g].name);
            f->path = sharc__strdup(ctx, groups[g].files.items[k]);
            f->is_tar = groups[g].is_tar;
            if (!f->name || !f->path) {
                rc = SHARC_ERR(ENOMEM);
                break;
            }
        }
    }
    for (size_t g = 0; g < SHARC__MAX_FIELDS_DS; g++)
        sharc__strs_free(ctx, &groups[g].files);
    return rc;
}

typedef struct nemo_item {
    long long id;
    char *path;
    char *group; ///< "" unless shard ids repeat: then the directory (of sharded_manifests/)
} nemo_item;

static int cmp_nemo_id(const void *a, const void *b)
{
    const nemo_item *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static int cmp_nemo(const void *a, const void *b)
{
    int c = strcmp(((const nemo_item *)a)->group, ((const nemo_item *)b)->group);
    return c ? c : cmp_nemo_id(a, b);
}

/* The first shard of d->shards[first, first + n) whose NeMo id is `sid` (they are sorted by
 * id), or first + n. */
static size_t find_nemo_shard(const sharc__dataset *d, size_t first, size_t n, long long sid)
{
    size_t lo = first, hi = first + n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->shards[mid].nemo_shard_id < sid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < first + n && d->shards[lo].nemo_shard_id == sid ? lo : first + n;
}

/* Group the rows of an aggregate manifest by shard_id into the in-memory rows of the shards
 * d->shards[first, first + n). */
static int nemo_load_aggregate(sharc__ctx *ctx, sharc__dataset *d, const char *path, size_t first,
                               size_t n, uint64_t max_line_bytes)
{
    sharc__lines *l = NULL;
    int rc = sharc__lines_open(&l, ctx, path, max_line_bytes);
    const char *line;
    size_t len;
    uint64_t lineno;
    sharc__log(ctx, SHARC_LOG_WARN,
               "%s: one manifest for all shards is held in memory; per-shard manifests "
               "(sharded_manifests/manifest_N.json) stream instead",
               path);
    while (rc == 0 && (rc = sharc__lines_next(l, &line, &len, &lineno)) == 0) {
        long long sid;
        if (sharc__json_nemo_shard_id(ctx, line, len, &sid) < 0 || sid < 0) {
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "%s line %llu: no valid shard_id in a manifest shared by "
                                  "several shards",
                                  path, (unsigned long long)lineno);
            break;
        }
        size_t k = find_nemo_shard(d, first, n, sid);
        if (k == first + n) {
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "%s line %llu: shard_id %lld has no audio_%lld.tar", path,
                                  (unsigned long long)lineno, sid, sid);
            break;
        }
        sharc__buf *rows = &d->shards[k].nemo_rows;
        if ((rc = sharc__buf_append(ctx, rows, line, len)) < 0 ||
            (rc = sharc__buf_append(ctx, rows, "\n", 1)) < 0)
            break;
    }
    if (rc == SHARC_END)
        rc = 0;
    sharc__lines_close(&l);
    return rc;
}

/* The directory of `path`, and for a manifest under sharded_manifests/ the one above it. */
static char *nemo_group(sharc__ctx *ctx, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    static const char sub[] = SHARC__NEMO_SHARDED_DIR;
    const size_t m = sizeof sub - 1;
    if (n >= m && strncmp(path + n - m, sub, m) == 0 && (n == m || path[n - m - 1] == '/'))
        n = n == m ? 0 : n - m - 1;
    return sharc__strndup(ctx, path, n);
}

/* Shard ids that repeat (NeMo's bucketing datasets: bucket1/audio_0.tar, bucket2/audio_0.tar)
 * are told apart by their directories: each directory is then a dataset of its own, with its
 * manifests next to its tars or under its sharded_manifests/. */
static int nemo_set_groups(sharc__ctx *ctx, nemo_item *items[3], const size_t n[3])
{
    qsort(items[0], n[0], sizeof *items[0], cmp_nemo_id);
    int repeats = 0;
    for (size_t i = 1; i < n[0]; i++)
        repeats |= items[0][i].id == items[0][i - 1].id;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < n[k]; i++) {
            items[k][i].group =
                repeats ? nemo_group(ctx, items[k][i].path) : sharc__strdup(ctx, "");
            if (!items[k][i].group)
                return SHARC_ERR(ENOMEM);
        }
    for (int k = 0; k < 3; k++)
        qsort(items[k], n[k], sizeof *items[k], cmp_nemo);
    return 0;
}

/* The shards of one group: tars[0, nt) with its per-shard manifests mans[0, nm), or else its
 * first aggregate manifest (NULL when there is none). */
static int nemo_add_group(sharc__ctx *ctx, sharc__dataset *d, const nemo_item *tars, size_t nt,
                          const nemo_item *mans, size_t nm, const char *aggregate,
                          uint64_t max_line_bytes)
{
    for (size_t i = 1; i < nt; i++)
        if (tars[i].id == tars[i - 1].id)
            return sharc__set_error(ctx, SHARC_ERR_FORMAT, "shard id %lld appears twice: %s, %s",
                                    tars[i].id, tars[i - 1].path, tars[i].path);
    /* NeMo takes a lone manifest as the one for all shards, grouped by shard_id, whatever its
     * name: tarred_audio_manifest_16k.json has a "_16" but is not shard 16's. Only when it is
     * the manifest of the only tar is it read as that shard's (the same rows either way). */
    if (nm == 1 && !aggregate && (nt > 1 || mans[0].id != tars[0].id)) {
        aggregate = mans[0].path;
        nm = 0;
    }
    if (nm == 0 && !aggregate)
        return sharc__set_error(ctx, SHARC_ERR_FORMAT, "no NeMo manifest found for %s",
                                tars[0].path);
    for (size_t j = 1; j < nm; j++)
        if (mans[j].id == mans[j - 1].id)
            return sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                    "two manifests for shard %lld: %s and %s", mans[j].id,
                                    mans[j - 1].path, mans[j].path);
    /* Per-shard manifests: the two id sets must be equal, as NeMo asserts. */
    for (size_t i = 0, j = 0; nm > 0 && (i < nt || j < nm); i++, j++) {
        if (j == nm || (i < nt && tars[i].id < mans[j].id))
            return sharc__set_error(ctx, SHARC_ERR_FORMAT, "%s has no manifest_%lld.json",
                                    tars[i].path, tars[i].id);
        if (i == nt || mans[j].id < tars[i].id)
            return sharc__set_error(ctx, SHARC_ERR_FORMAT, "%s has no audio_%lld.tar", mans[j].path,
                                    mans[j].id);
    }
    size_t first = d->n_shards;
    for (size_t i = 0; i < nt; i++) {
        sharc__shard *s;
        int rc = add_shard(ctx, d, &s);
        if (rc < 0)
            return rc;
        s->nemo_shard_id = tars[i].id;
        s->audio_path = sharc__strdup(ctx, tars[i].path);
        s->meta_path = sharc__strdup(ctx, nm > 0 ? mans[i].path : aggregate);
        s->nemo_in_memory = nm == 0;
        if (!s->audio_path || !s->meta_path)
            return SHARC_ERR(ENOMEM);
    }
    return nm == 0 ? nemo_load_aggregate(ctx, d, aggregate, first, nt, max_line_bytes) : 0;
}

/* Items of `v` [*at, n) in group `g`: their count, *at moved past them (and past those of
 * groups before `g`, which *skipped then names). */
static size_t take_group(const nemo_item *v, size_t n, size_t *at, const char *g,
                         const char **skipped)
{
    for (; *at < n && strcmp(v[*at].group, g) < 0; (*at)++)
        *skipped = *skipped ? *skipped : v[*at].path;
    size_t first = *at;
    while (*at < n && strcmp(v[*at].group, g) == 0)
        (*at)++;
    return *at - first;
}

static int nemo_build(sharc__ctx *ctx, sharc__dataset *d, const sharc__strs *files,
                      uint64_t max_line_bytes, const char *where)
{
    nemo_item *items[3]; /* tars, per-shard manifests, aggregate manifests */
    size_t n[3] = {0, 0, 0};
    int rc = 0;
    for (int k = 0; k < 3; k++)
        items[k] = sharc__calloc(ctx, files->n + 1, sizeof *items[k]);
    if (!items[0] || !items[1] || !items[2]) {
        rc = SHARC_ERR(ENOMEM);
        goto done;
    }
    for (size_t i = 0; i < files->n; i++) {
        const char *b = base_name(files->items[i]);
        long long id;
        if (nemo_tar_id(b, &id))
            items[0][n[0]++] = (nemo_item){id, files->items[i], NULL};
        else if (nemo_manifest_id(b, &id))
            items[1][n[1]++] = (nemo_item){id, files->items[i], NULL};
        else if (json_lines_name(b)) /* in the order given: the first one is used */
            items[2][n[2]++] = (nemo_item){(long long)n[2], files->items[i], NULL};
        else if (!has_suffix(b, ".idx") && !has_suffix(b, ".yaml")) {
            sharc__log(ctx, SHARC_LOG_WARN, "ignoring %s: not a NeMo shard or manifest",
                       files->items[i]);
            d->n_ignored++;
        }
    }
    if (n[0] == 0) {
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT, "no NeMo audio_N.tar shards found in %s",
                              where);
        goto done;
    }
    if ((rc = nemo_set_groups(ctx, items, n)) < 0)
        goto done;
    size_t at[3] = {0, 0, 0};
    const char *lone[3] = {NULL, NULL, NULL}; /* lone[1]: a manifest whose directory has no tar */
    for (size_t t = 0; rc == 0 && t < n[0];) {
        const char *g = items[0][t].group;
        size_t first[3], count[3];
        for (int k = 0; k < 3; k++) {
            count[k] = take_group(items[k], n[k], &at[k], g, &lone[k]);
            first[k] = at[k] - count[k];
        }
        rc = nemo_add_group(ctx, d, items[0] + first[0], count[0], items[1] + first[1], count[1],
                            count[2] ? items[2][first[2]].path : NULL, max_line_bytes);
        t = at[0];
    }
    if (rc == 0 && (lone[1] || at[1] < n[1]))
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                              "%s has no audio_N.tar: shard ids repeat, so each directory is a "
                              "NeMo dataset of its own, and this one has no tars",
                              lone[1] ? lone[1] : items[1][at[1]].path);
done:
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; items[k] && i < n[k]; i++)
            sharc__free(ctx, items[k][i].group);
        sharc__free(ctx, items[k]);
    }
    return rc;
}

/* `where`: the paths given, for the error when none of them holds a shard. */
static int wds_build(sharc__ctx *ctx, sharc__dataset *d, const sharc__strs *files,
                     const char *where)
{
    int rc = 0;
    for (size_t i = 0; i < files->n && rc == 0; i++) {
        if (!is_tar_name(base_name(files->items[i]))) {
            if (!has_suffix(files->items[i], ".idx")) {
                sharc__log(ctx, SHARC_LOG_WARN, "ignoring %s: not a tar shard", files->items[i]);
                d->n_ignored++;
            }
            continue;
        }
        sharc__shard *s;
        if ((rc = add_shard(ctx, d, &s)) < 0)
            break;
        s->audio_path = sharc__strdup(ctx, files->items[i]);
        if (!s->audio_path)
            rc = SHARC_ERR(ENOMEM);
    }
    if (rc == 0 && d->n_shards == 0)
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT, "no tar shards found in %s", where);
    return rc;
}

typedef struct placed {
    char *path;
    size_t pos;   ///< in the order given
    size_t first; ///< the position of the first file given from its directory
} placed;

static int cmp_dir_then_pos(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    const char *sx = strrchr(x->path, '/'), *sy = strrchr(y->path, '/');
    size_t nx = sx ? (size_t)(sx - x->path) : 0, ny = sy ? (size_t)(sy - y->path) : 0;
    int c = memcmp(x->path, y->path, nx < ny ? nx : ny);
    if (c == 0 && nx != ny)
        c = nx < ny ? -1 : 1;
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_first_then_pos(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int shar_build(sharc__ctx *ctx, sharc__dataset *d, const sharc__strs *files,
                      const char *where)
{
    /* Fields pair by position within one directory: group the files by directory, the
     * directories in the order they were first given (a shell glob over several Shar
     * directories interleaves them: a/cuts.0 b/cuts.0 a/recording.0 b/recording.0). */
    placed *all = sharc__calloc(ctx, files->n + 1, sizeof *all);
    char **order = sharc__calloc(ctx, files->n + 1, sizeof *order);
    int rc = all && order ? 0 : SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < files->n && rc == 0; i++)
        all[i] = (placed){files->items[i], i, 0};
    if (rc == 0) {
        qsort(all, files->n, sizeof *all, cmp_dir_then_pos);
        for (size_t i = 0; i < files->n; i++)
            all[i].first =
                i > 0 && same_dir(all[i - 1].path, all[i].path) ? all[i - 1].first : all[i].pos;
        qsort(all, files->n, sizeof *all, cmp_first_then_pos);
        for (size_t i = 0; i < files->n; i++)
            order[i] = all[i].path;
    }
    size_t i = 0;
    while (i < files->n && rc == 0) {
        size_t j = i + 1;
        while (j < files->n && same_dir(order[i], order[j]))
            j++;
        int has_cuts = 0;
        for (size_t k = i; k < j; k++) {
            char field[128];
            int is_tar;
            if (shar_name(base_name(order[k]), field, sizeof field, &is_tar) &&
                strcmp(field, "cuts") == 0)
                has_cuts = 1;
        }
        if (has_cuts)
            rc = shar_dir(ctx, d, order + i, j - i);
        else {
            sharc__log(ctx, SHARC_LOG_WARN, "ignoring %zu files next to %s: no cuts shards", j - i,
                       order[i]);
            d->n_ignored += j - i;
        }
        i = j;
    }
    sharc__free(ctx, all);
    sharc__free(ctx, order);
    if (rc == 0 && d->n_shards == 0)
        rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                              "no Shar shards (cuts.NNNNNN.jsonl) found in %s", where);
    return rc;
}

/* Tars given without the files that say what is in them (detect_layout). */
typedef enum tars_alone {
    TARS_NOT_ALONE = 0,
    NEMO_TARS_ALONE,      ///< audio_N.tar without a manifest
    SHAR_RECORDINGS_ALONE ///< recording.NNNNNN.tar without cuts files
} tars_alone;

/* The layout of `files`. When every tar is named as NeMo tarred audio (audio_N.tar) with no
 * manifest among the files, or as Shar recording shards with no cuts file, *alone says so and
 * the layout is AUTO: read as WebDataset, their transcripts or cuts would be missing. */
static sharc_layout detect_layout(const sharc__strs *files, tars_alone *alone)
{
    *alone = TARS_NOT_ALONE;
    int tars = 0, nemo_tars = 0, named_tars = 0, nemo_manifests = 0, json = 0, shar_recordings = 0;
    for (size_t i = 0; i < files->n; i++) {
        const char *b = base_name(files->items[i]);
        char field[128];
        int is_tar;
        long long id;
        int shar = shar_name(b, field, sizeof field, &is_tar);
        if (shar && !is_tar && strcmp(field, "cuts") == 0)
            return SHARC_LAYOUT_SHAR;
        /* The name Lhotse's Shar writer gives the audio field's shards. */
        shar_recordings += shar && is_tar && strcmp(field, "recording") == 0;
        /* NeMo's own names (audio_N.tar), and names it finds an id in (en_audio_N.tar). */
        if (nemo_tar_id(b, &id)) {
            nemo_tars++;
            named_tars += strncmp(b, "audio", 5) == 0;
        }
        nemo_manifests += nemo_manifest_id(b, &id);
        json += json_lines_name(b);
        if (is_tar_name(b))
            tars++;
    }
    /* Tars named audio_N with any JSON lines, tars and manifests both with ids, or only tars
     * with ids next to JSON lines: NeMo. A WebDataset shard may be named x_audio_N.tar, but
     * not next to a manifest. */
    if ((named_tars > 0 && json > 0) || (nemo_tars > 0 && nemo_manifests > 0) ||
        (nemo_tars > 0 && nemo_tars == tars && json > 0))
        return SHARC_LAYOUT_NEMO;
    if (named_tars > 0 && named_tars == tars) {
        *alone = NEMO_TARS_ALONE;
        return SHARC_LAYOUT_AUTO;
    }
    if (tars > 0 && shar_recordings == tars) {
        *alone = SHAR_RECORDINGS_ALONE;
        return SHARC_LAYOUT_AUTO;
    }
    return tars > 0 ? SHARC_LAYOUT_WDS : SHARC_LAYOUT_AUTO;
}

static uint64_t hash_path(const char *p)
{
    /* >> 1: a key of the set, which cannot hold UINT64_MAX */
    return sharc__fnv1a(SHARC__FNV_OFFSET, p, strlen(p)) >> 1;
}

/*
 * Every directory and wildcard pattern given must give the dataset something, and no path
 * may be of another layout: a NeMo directory next to a Shar one was left out with at most a
 * warning. A file given by itself may be a sidecar the layout does not read (a `.idx`, a
 * NeMo manifest for all shards next to per-shard ones), as a shell glob over a dataset
 * gives them. files[ends[i-1]..ends[i]) came from paths[i]; is_group[i] says whether a
 * directory or wildcards did. With `patterns`, paths[i] is a match of patterns[i] (NULL when
 * it was given as it is), which the messages name.
 */
static int check_every_path_used(sharc__ctx *ctx, const sharc__dataset *d, const char *const *paths,
                                 const char *const *patterns, size_t n_paths,
                                 const sharc__strs *files, const size_t *ends,
                                 const uint8_t *is_group)
{
    sharc__keyset used = {0};
    int rc = 0;
    for (size_t k = 0; k < d->n_shards && rc == 0; k++) {
        const sharc__shard *s = &d->shards[k];
        if (s->audio_path)
            rc = sharc__keyset_add(ctx, &used, hash_path(s->audio_path));
        if (rc == 0 && s->meta_path)
            rc = sharc__keyset_add(ctx, &used, hash_path(s->meta_path));
        for (size_t f = 0; f < s->n_fields && rc == 0; f++)
            rc = sharc__keyset_add(ctx, &used, hash_path(s->fields[f].path));
    }
    for (size_t i = 0, lo = 0; i < n_paths && rc == 0; lo = ends[i++]) {
        size_t j = lo;
        while (j < ends[i] && !sharc__keyset_has(&used, hash_path(files->items[j])))
            j++;
        if (j < ends[i])
            continue;
        char label[2200];
        if (patterns && patterns[i])
            snprintf(label, sizeof label, "%.1024s (matched by %.1024s)", paths[i], patterns[i]);
        else
            snprintf(label, sizeof label, "%.2048s", paths[i]);
        sharc__strs own = {files->items + lo, ends[i] - lo, 0};
        tars_alone alone;
        sharc_layout other = detect_layout(&own, &alone);
        if (alone != TARS_NOT_ALONE)
            other = SHARC_LAYOUT_WDS; /* as such tars read with --layout wds */
        if (other != SHARC_LAYOUT_AUTO && other != d->layout)
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "%s holds %s shards, and the dataset is read as %s (from the "
                                  "other paths): one layout is read at a time",
                                  label, sharc__layout_name(other), sharc__layout_name(d->layout));
        else if (is_group[i] || lo == ends[i])
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "%s: none of its files is part of the dataset (read as %s)",
                                  label, sharc__layout_name(d->layout));
    }
    sharc__keyset_free(ctx, &used);
    return rc;
}

typedef struct file_key {
    dev_t dev;
    ino_t ino;
    const char *path;
} file_key;

static int cmp_file_key(const void *a, const void *b)
{
    const file_key *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return (x->ino > y->ino) - (x->ino < y->ino);
}

/* A shard found twice (the same path given twice, by other spellings or links, or patterns
 * that overlap) would have its cuts read twice per epoch. Files are told apart by device
 * and inode; one that cannot be stat()ed is left to fail when it is opened. */
static int check_no_repeats(sharc__ctx *ctx, const sharc__dataset *d)
{
    file_key *keys = sharc__calloc(ctx, d->n_shards + 1, sizeof *keys);
    if (!keys)
        return SHARC_ERR(ENOMEM);
    size_t n = 0;
    for (size_t k = 0; k < d->n_shards; k++) {
        struct stat st;
        if (stat(d->shards[k].audio_path, &st) == 0)
            keys[n++] = (file_key){st.st_dev, st.st_ino, d->shards[k].audio_path};
    }
    qsort(keys, n, sizeof *keys, cmp_file_key);
    int rc = 0;
    for (size_t k = 1; k < n && rc == 0; k++)
        if (cmp_file_key(&keys[k - 1], &keys[k]) == 0) {
            const char *a = keys[k - 1].path, *b = keys[k].path;
            rc = strcmp(a, b) == 0
                     ? sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                        "%s is found twice (a path given twice, or patterns "
                                        "that overlap): its cuts would be read twice per epoch",
                                        a)
                     : sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                        "%s and %s are the same file (a path given twice, or "
                                        "patterns that overlap): its cuts would be read twice "
                                        "per epoch",
                                        a, b);
        }
    sharc__free(ctx, keys);
    return rc;
}

int sharc__dataset_find(sharc__dataset *d, sharc__ctx *ctx, const char *const *paths,
                        size_t n_paths, sharc_layout layout, uint64_t max_line_bytes)
{
    sharc__strs inputs = {0}, files = {0};
    size_t *ends = sharc__calloc(ctx, n_paths ? n_paths : 1, sizeof *ends);
    uint8_t *is_group = sharc__calloc(ctx, n_paths ? n_paths : 1, 1); /* a directory or wildcards */
    /* Per path its braces and wildcards gave: where its files end, whether it is a directory,
     * and the pattern it matched (NULL for a path given as it is). */
    size_t *in_ends = NULL;
    uint8_t *in_dir = NULL;
    const char **in_pattern = NULL;
    size_t in_cap = 0;
    int rc = ends && is_group ? 0 : SHARC_ERR(ENOMEM);
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < n_paths && rc == 0; i++) {
        if (!paths[i] || !*paths[i]) {
            rc = sharc__set_error(ctx, SHARC_ERR(EINVAL), "empty path");
            break;
        }
        size_t first = inputs.n;
        int matched = 0;
        rc = expand_path(ctx, paths[i], &inputs, &matched);
        is_group[i] = (uint8_t)matched;
        if (rc == 0 && inputs.n > in_cap) {
            size_t cap = inputs.n * 2;
            size_t *e = sharc__realloc(ctx, in_ends, in_cap * sizeof *e, cap * sizeof *e);
            in_ends = e ? e : in_ends;
            uint8_t *g = e ? sharc__realloc(ctx, in_dir, in_cap, cap) : NULL;
            in_dir = g ? g : in_dir;
            const char **p =
                g ? sharc__realloc(ctx, in_pattern, in_cap * sizeof *p, cap * sizeof *p) : NULL;
            in_pattern = p ? p : in_pattern;
            rc = p ? 0 : SHARC_ERR(ENOMEM);
            in_cap = p ? cap : in_cap;
        }
        for (size_t j = first; j < inputs.n && rc == 0; j++) {
            in_pattern[j] = strcmp(inputs.items[j], paths[i]) != 0 ? paths[i] : NULL;
            in_dir[j] = 0;
            struct stat st;
            if (stat(inputs.items[j], &st) != 0) {
                rc = sharc__set_error(ctx, SHARC_ERR(ENOENT), "%s: %s", inputs.items[j],
                                      strerror(errno));
            } else if (S_ISDIR(st.st_mode)) {
                is_group[i] = 1;
                in_dir[j] = 1;
                rc = list_dir(ctx, inputs.items[j], &files, 1, &d->n_ignored);
            } else {
                rc = sharc__strs_push(ctx, &files, sharc__strdup(ctx, inputs.items[j]));
            }
            in_ends[j] = files.n;
        }
        ends[i] = files.n;
    }
    if (rc < 0)
        goto done;
    char where[1100];
    snprintf(where, sizeof where, "%.1024s%s", n_paths ? paths[0] : "", n_paths > 1 ? " ..." : "");
    tars_alone alone = TARS_NOT_ALONE;
    if (layout == SHARC_LAYOUT_AUTO)
        layout = detect_layout(&files, &alone);
    d->layout = layout;
    switch (layout) {
    case SHARC_LAYOUT_SHAR:
        rc = shar_build(ctx, d, &files, where);
        break;
    case SHARC_LAYOUT_NEMO:
        rc = nemo_build(ctx, d, &files, max_line_bytes, where);
        break;
    case SHARC_LAYOUT_WDS:
        rc = wds_build(ctx, d, &files, where);
        break;
    default:
        if (alone == SHAR_RECORDINGS_ALONE)
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "%s%s: the tars are named as Lhotse Shar recording shards "
                                  "(recording.NNNNNN.tar) and no cuts.NNNNNN.jsonl[.gz] is given "
                                  "with them: give the Shar directory, or its cuts files too; or "
                                  "read the tars as WebDataset shards with the wds layout "
                                  "(--layout wds)",
                                  n_paths ? paths[0] : "", n_paths > 1 ? " ..." : "");
        else if (alone == NEMO_TARS_ALONE)
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "%s%s: the tars are named as NeMo tarred audio (audio_N.tar) "
                                  "and no NeMo manifest is given with them, so their transcripts "
                                  "would be missing: give the manifests too (manifest_N.json, or "
                                  "one for all shards), or read the tars as WebDataset shards "
                                  "with the wds layout (--layout wds)",
                                  n_paths ? paths[0] : "", n_paths > 1 ? " ..." : "");
        else
            rc = sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                  "no shards found in %s%s (expected Lhotse Shar cuts.*.jsonl, "
                                  "NeMo audio_N.tar + manifests, or .tar shards)",
                                  n_paths ? paths[0] : "", n_paths > 1 ? " ..." : "");
    }
    /* Each match of a pattern is checked as if it had been given by itself (a directory of
     * another layout among the matches is an error, as it is when given), then each path as
     * given: a pattern whose matches give the dataset nothing is an error too. */
    if (rc == 0)
        rc = check_every_path_used(ctx, d, (const char *const *)inputs.items, in_pattern, inputs.n,
                                   &files, in_ends, in_dir);
    if (rc == 0)
        rc = check_every_path_used(ctx, d, paths, NULL, n_paths, &files, ends, is_group);
    if (rc == 0)
        rc = check_no_repeats(ctx, d);
done:
    sharc__strs_free(ctx, &inputs);
    sharc__strs_free(ctx, &files);
    sharc__free(ctx, ends);
    sharc__free(ctx, is_group);
    sharc__free(ctx, in_ends);
    sharc__free(ctx, in_dir);
    sharc__free(ctx, (void *)in_pattern);
    if (rc < 0)
        sharc__dataset_free(d, ctx);
    return rc;
}

void sharc__dataset_free(sharc__dataset *d, sharc__ctx *ctx)
{
    for (size_t i = 0; i < d->n_shards; i++) {
        sharc__shard *s = &d->shards[i];
        sharc__free(ctx, s->audio_path);
        sharc__free(ctx, s->meta_path);
        for (size_t f = 0; f < s->n_fields; f++) {
            sharc__free(ctx, s->fields[f].name);
            sharc__free(ctx, s->fields[f].path);
        }
        sharc__free(ctx, s->fields);
        sharc__buf_free(ctx, &s->nemo_rows);
    }
    sharc__free(ctx, d->shards);
    memset(d, 0, sizeof *d);
}

size_t sharc__dataset_epoch_order(const sharc__dataset *d, uint64_t seed, uint64_t epoch,
                                  int shuffle, int dp_rank, int dp_size, uint32_t *order)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_shards; i++)
        order[i] = (uint32_t)i;
    if (shuffle) {
        sharc__rng rng;
        sharc__rng_seed(&rng, seed + epoch);
        sharc__rng_shuffle_u32(&rng, order, d->n_shards);
    }
    for (size_t i = 0; i < d->n_shards; i++)
        if (i % (size_t)dp_size == (size_t)dp_rank)
            order[n++] = order[i];
    return n;
}

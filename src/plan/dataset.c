#include "plan/dataset.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/tar.h"
#include "io/lines.h"
#include "io/braces.h"
#include "plan/cut.h"
#include "base/hash.h"
#include "plan/json.h"
#include "plan/keyset.h"
#include "base/layout.h"
#include "plan/nemo_plan.h"
#include "io/paths.h"
#include "io/remote.h"
#include "plan/shardnames.h"
#include "base/rng.h"

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

/* ---- building shards --------------------------------------------------------------- */

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
    const char *dot = strchr(sharc__shard_base_name(path), '.');
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
        const char *b = sharc__shard_base_name(files[i]);
        char field[128];
        int is_tar;
        if (sharc__shard_has_suffix(b, ".idx"))
            continue; /* Lhotse's index sidecars */
        if (!sharc__shard_shar_name(b, field, sizeof field, &is_tar)) {
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
        qsort(groups[g].files.items, groups[g].files.n, sizeof(char *), sharc__cmp_str);
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
        if ((rc = sharc__dataset_add_shard(ctx, d, &s)) < 0)
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

static int wds_build(sharc__ctx *ctx, sharc__dataset *d, const sharc__strs *files,
                     const char *where)
{
    int rc = 0;
    for (size_t i = 0; i < files->n && rc == 0; i++) {
        if (!sharc__shard_is_tar_name(sharc__shard_base_name(files->items[i]))) {
            if (!sharc__shard_has_suffix(files->items[i], ".idx")) {
                sharc__log(ctx, SHARC_LOG_WARN, "ignoring %s: not a tar shard", files->items[i]);
                d->n_ignored++;
            }
            continue;
        }
        sharc__shard *s;
        if ((rc = sharc__dataset_add_shard(ctx, d, &s)) < 0)
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
            if (sharc__shard_shar_name(sharc__shard_base_name(order[k]), field, sizeof field,
                                       &is_tar) &&
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
        const char *b = sharc__shard_base_name(files->items[i]);
        char field[128];
        int is_tar;
        long long id;
        int shar = sharc__shard_shar_name(b, field, sizeof field, &is_tar);
        if (shar && !is_tar && strcmp(field, "cuts") == 0)
            return SHARC_LAYOUT_SHAR;
        /* The name Lhotse's Shar writer gives the audio field's shards. */
        shar_recordings += shar && is_tar && strcmp(field, "recording") == 0;
        /* NeMo's own names (audio_N.tar), and names it finds an id in (en_audio_N.tar). */
        if (sharc__shard_nemo_tar_id(b, &id)) {
            nemo_tars++;
            named_tars += strncmp(b, "audio", 5) == 0;
        }
        nemo_manifests += sharc__shard_nemo_manifest_id(b, &id);
        json += sharc__shard_json_lines_name(b);
        if (sharc__shard_is_tar_name(b))
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
        const char *p = d->shards[k].audio_path;
        /* Remote shards are told apart by their URL. */
        if (sharc__is_remote(p))
            keys[n++] = (file_key){(dev_t)-1, (ino_t)hash_path(p), p};
        else if (stat(p, &st) == 0)
            keys[n++] = (file_key){st.st_dev, st.st_ino, p};
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

int sharc__dataset_find(sharc__dataset *d, sharc__ctx *ctx, const char *const *given,
                        size_t n_paths, sharc_layout layout, uint64_t max_line_bytes)
{
    /* The paths as shown, for messages: a URL's query string (a presigned URL's signature)
     * never appears (io/remote.h, sharc__remote_shown). */
    char **shown = sharc__calloc(ctx, n_paths ? n_paths : 1, sizeof *shown);
    const char *const *paths = (const char *const *)shown;
    sharc__strs inputs = {0}, files = {0};
    size_t *ends = sharc__calloc(ctx, n_paths ? n_paths : 1, sizeof *ends);
    uint8_t *is_group = sharc__calloc(ctx, n_paths ? n_paths : 1, 1); /* a directory or wildcards */
    /* Per path its braces and wildcards gave: where its files end, whether it is a directory,
     * and the pattern it matched (NULL for a path given as it is). */
    size_t *in_ends = NULL;
    uint8_t *in_dir = NULL;
    const char **in_pattern = NULL;
    size_t in_cap = 0;
    int rc = ends && is_group && shown ? 0 : SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < n_paths && rc == 0; i++)
        if (given[i] && !(shown[i] = sharc__remote_shown(ctx, given[i])))
            rc = SHARC_ERR(ENOMEM);
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < n_paths && rc == 0; i++) {
        if (!paths[i] || !*paths[i]) {
            rc = sharc__set_error(ctx, SHARC_ERR(EINVAL), "empty path");
            break;
        }
        size_t first = inputs.n;
        int matched = 0;
        rc = sharc__expand_path(ctx, given[i], &inputs, &matched);
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
            const int remote = sharc__is_remote(inputs.items[j]);
            if (remote && sharc__remote_is_prefix(inputs.items[j])) {
                is_group[i] = 1;
                in_dir[j] = 1;
                rc = sharc__shard_list_dir(ctx, inputs.items[j], &files, 1, &d->n_ignored);
            } else if (remote) {
                rc = sharc__strs_push(ctx, &files, sharc__strdup(ctx, inputs.items[j]));
            } else if (stat(inputs.items[j], &st) != 0) {
                rc = sharc__set_error(ctx, SHARC_ERR(ENOENT), "%s: %s", inputs.items[j],
                                      strerror(errno));
            } else if (S_ISDIR(st.st_mode)) {
                is_group[i] = 1;
                in_dir[j] = 1;
                rc = sharc__shard_list_dir(ctx, inputs.items[j], &files, 1, &d->n_ignored);
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
        rc = sharc__nemo_plan_build(ctx, d, &files, max_line_bytes, where);
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
    for (size_t i = 0; shown && i < n_paths; i++)
        sharc__free(ctx, shown[i]);
    sharc__free(ctx, shown);
    if (rc < 0)
        sharc__dataset_free(d, ctx);
    return rc;
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
    if ((size_t)dp_size > d->n_shards) { /* shared by cuts: sharc__dataset_cut_share */
        if (d->n_shards == 0)
            return 0;
        order[0] = order[(size_t)dp_rank % d->n_shards];
        return 1;
    }
    for (size_t i = 0; i < d->n_shards; i++)
        if (i % (size_t)dp_size == (size_t)dp_rank)
            order[n++] = order[i];
    return n;
}

void sharc__dataset_cut_share(size_t n_shards, int dp_rank, int dp_size, uint32_t *every,
                              uint32_t *first)
{
    *every = 1;
    *first = 0;
    if (n_shards == 0 || (size_t)dp_size <= n_shards)
        return;
    size_t j = (size_t)dp_rank % n_shards;
    *every = (uint32_t)((size_t)dp_size / n_shards + (j < (size_t)dp_size % n_shards));
    *first = (uint32_t)((size_t)dp_rank / n_shards);
}

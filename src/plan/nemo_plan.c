#include "plan/nemo_plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/json.h"
#include "base/layout.h"
#include "io/lines.h"
#include "plan/shardnames.h"

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
        int rc = sharc__dataset_add_shard(ctx, d, &s);
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

int sharc__nemo_plan_build(sharc__ctx *ctx, sharc__dataset *d, const sharc__strs *files,
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
        const char *b = sharc__shard_base_name(files->items[i]);
        long long id;
        if (sharc__shard_nemo_tar_id(b, &id))
            items[0][n[0]++] = (nemo_item){id, files->items[i], NULL};
        else if (sharc__shard_nemo_manifest_id(b, &id))
            items[1][n[1]++] = (nemo_item){id, files->items[i], NULL};
        else if (sharc__shard_json_lines_name(b)) /* in the order given: the first one is used */
            items[2][n[2]++] = (nemo_item){(long long)n[2], files->items[i], NULL};
        else if (!sharc__shard_has_suffix(b, ".idx") && !sharc__shard_has_suffix(b, ".yaml")) {
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

#include "io/paths.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/remote.h"
#include "sharc/reader.h"

#define MAX_EXPANSION 1000000

static int expand_list(sharc__ctx *ctx, const char *pattern, sharc__strs *out)
{
    struct stat st;
    if (!sharc__is_remote(pattern) && stat(pattern, &st) == 0)
        return sharc__strs_push(ctx, out, sharc__strdup(ctx, pattern));
    return sharc__braces_expand(ctx, pattern, MAX_EXPANSION, out);
}

int sharc__cmp_str(const void *a, const void *b)
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
    /* A URL's * and ? are characters of its name (and pipe: commands have their own). */
    if (!strpbrk(path, "*?") || sharc__is_remote(path) || stat(path, &st) == 0)
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
        qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, sharc__cmp_str);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
        rc = sharc__strs_push(ctx, out, sharc__strdup(ctx, g.gl_pathv[i]));
    globfree(&g);
    return rc;
}

int sharc__expand_path(sharc__ctx *ctx, const char *path, sharc__strs *out, int *matched)
{
    sharc__strs braced = {0};
    size_t first = out->n;
    /* A URL's query string (a presigned URL's signature) is kept out of sight: the paths
     * found are the URL shown with "?…", braces expanded in its path, and each is kept with
     * the query for its requests. */
    const char *query = sharc__remote_query(path);
    char *shown = query ? sharc__remote_shown(ctx, path) : NULL;
    int rc = query && !shown ? SHARC_ERR(ENOMEM) : sharc__remote_check_path(ctx, path);
    path = shown ? shown : path;
    if (rc == 0)
        rc = expand_list(ctx, path, &braced);
    for (size_t i = 0; rc == 0 && i < braced.n; i++) {
        rc = expand_wildcards(ctx, braced.items[i], out, matched);
        if (rc == 0 && out->n - first > MAX_EXPANSION)
            rc = too_many(ctx, path);
    }
    for (size_t i = first; rc == 0 && query && i < out->n; i++)
        rc = sharc__remote_keep_query(ctx, out->items[i], query);
    sharc__strs_free(ctx, &braced);
    sharc__free(ctx, shown);
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
    else if ((rc = sharc__expand_path(&ctx, path, &l, &matched)) == 0 && !(*out = pack_paths(&l)))
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

/*
 * Path expansion as NeMo does it: a path that exists is taken as it is; otherwise its braces
 * are expanded (braces.h), then its shell wildcards (glob, sorted), at most a million paths.
 * Behind sharc_reader_expand_path() and the dataset's search for shards.
 */
#ifndef SHARC_SRC_PATHS_H
#define SHARC_SRC_PATHS_H

#include "io/braces.h"
#include "base/ctx.h"

/**
 * Append the paths `path` names to `out`: its braces expanded, then its wildcards
 * (`*matched` set when a wildcard matched something). An http(s) URL with a query string
 * gives URLs shown with "?…" (sharc__remote_shown()), whose requests use the query.
 * @return 0, SHARC_ERR_TOO_LARGE past a million paths, a brace or glob failure (text in ctx)
 */
int sharc__expand_path(sharc__ctx *ctx, const char *path, sharc__strs *out, int *matched);

/** qsort() comparator of `char *` items in strcmp order (glob's order). */
int sharc__cmp_str(const void *a, const void *b);

#endif /* SHARC_SRC_PATHS_H */

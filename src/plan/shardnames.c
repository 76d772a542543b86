#include "plan/shardnames.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/layout.h"
#include "io/paths.h"
#include "io/remote.h"

const char *sharc__shard_base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    if (strncmp(path, "pipe:", 5) == 0) {
        /* A command's shard is named by its last word, a comment if need be:
         * `pipe:aws s3 cp s3://b/shard-0.tar - # shard-0.tar`. */
        const char *space = strrchr(path, ' ');
        if (space && (!s || space > s))
            s = space;
        return s ? s + 1 : path + 5;
    }
    return s ? s + 1 : path;
}

/* The length of a name without the "?…" that stands for a URL's query (io/remote.h): the
 * name of a presigned URL's shard is that of its path. */
static size_t name_len(const char *s)
{
    const size_t n = strlen(s), m = sizeof SHARC__URL_QUERY_MARK - 1;
    return n >= m && strcmp(s + n - m, SHARC__URL_QUERY_MARK) == 0 ? n - m : n;
}

int sharc__shard_has_suffix(const char *s, const char *suf)
{
    size_t n = name_len(s), m = strlen(suf);
    return n >= m && strncmp(s + n - m, suf, m) == 0;
}

static int is_compression_suffix(const char *s)
{
    const size_t n = name_len(s);
    return n == 0 || (n == 3 && strncmp(s, ".gz", 3) == 0) ||
           (n == 4 && strncmp(s, ".zst", 4) == 0) || (n == 5 && strncmp(s, ".zstd", 5) == 0);
}

/* Shar: <field>.[NNNNNN.](jsonl|tar)[.gz|.zst]. Returns 1 and fills field/kind. */
int sharc__shard_shar_name(const char *base, char *field, size_t fcap, int *is_tar)
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

int sharc__shard_is_tar_name(const char *base)
{
    return sharc__shard_has_suffix(base, ".tar") || sharc__shard_has_suffix(base, ".tar.gz") ||
           sharc__shard_has_suffix(base, ".tgz") || sharc__shard_has_suffix(base, ".tar.zst") ||
           sharc__shard_has_suffix(base, ".tar.zstd");
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
int sharc__shard_nemo_tar_id(const char *base, long long *id)
{
    return sharc__shard_is_tar_name(base) && nemo_id(base, "audio", ".tar", id);
}

/* A JSON-lines name (.json or .jsonl, plain or compressed), as NeMo's manifests are. */
int sharc__shard_json_lines_name(const char *base)
{
    const char *e = strstr(base, ".json");
    for (const char *p = e; p; p = strstr(p + 1, ".json"))
        e = p;
    return e && (is_compression_suffix(e + 5) || (e[5] == 'l' && is_compression_suffix(e + 6)));
}

/* NeMo's manifest_N.json for shard N. */
int sharc__shard_nemo_manifest_id(const char *base, long long *id)
{
    return sharc__shard_json_lines_name(base) && nemo_id(base, "manifest", ".json", id);
}

int sharc__shard_list_dir(sharc__ctx *ctx, const char *dir, sharc__strs *out, int recurse_manifests,
                          size_t *ignored)
{
    if (sharc__is_remote(dir))
        return sharc__remote_list(ctx, dir, out, recurse_manifests, ignored);
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
                rc = sharc__shard_list_dir(ctx, p, out, 0, ignored);
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
        qsort(out->items + first, out->n - first, sizeof(char *), sharc__cmp_str);
    return rc;
}

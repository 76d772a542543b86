/*
 * Query strings of http(s) URLs (presigned URLs: their signature is a credential): a URL is
 * shown and kept everywhere with its query replaced by SHARC__URL_QUERY_MARK, and the whole
 * URL waits in a table of the process for the requests of the shown one.
 *
 * The table is the process's, not a handle's: the shown URL is what the dataset, the
 * messages and the saved states hold, so it must resolve in every handle that is given it
 * (a reader, its threads, a mixture's sources), and it outlives them. Its memory is
 * therefore malloc()'s, not a handle's allocator's; an entry is replaced when the same URL
 * comes with another query (a presigned URL signed again), and the table is freed with the
 * process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "io/remote_impl.h"

#define MARK     SHARC__URL_QUERY_MARK
#define MARK_LEN (sizeof MARK - 1)
#define BUCKETS  4096

typedef struct kept_url {
    struct kept_url *next;
    char *shown; ///< the URL with the query replaced by MARK
    char *url;   ///< the whole URL
} kept_url;

static kept_url *table[BUCKETS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static int is_http(const char *path)
{
    return strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0;
}

static int ends_with_mark(const char *path, size_t n)
{
    return n >= MARK_LEN && memcmp(path + n - MARK_LEN, MARK, MARK_LEN) == 0;
}

const char *sharc__remote_query(const char *path)
{
    if (!is_http(path))
        return NULL;
    const char *host = strstr(path, "://") + 3;
    const char *q = host + strcspn(host, "?#");
    if (*q != '?' || strcmp(q, MARK) == 0)
        return NULL;
    return q;
}

char *sharc__remote_shown(sharc__ctx *ctx, const char *path)
{
    const char *q = sharc__remote_query(path);
    size_t n = q ? (size_t)(q - path) : strlen(path);
    char *s = sharc__malloc(ctx, n + (q ? MARK_LEN : 0) + 1);
    if (!s)
        return NULL;
    memcpy(s, path, n);
    strcpy(s + n, q ? MARK : "");
    return s;
}

static size_t bucket_of(const char *shown)
{
    return (size_t)(sharc__fnv1a(SHARC__FNV_OFFSET, shown, strlen(shown)) % BUCKETS);
}

int sharc__remote_keep_query(sharc__ctx *ctx, const char *shown, const char *query)
{
    size_t n = strlen(shown);
    if (!ends_with_mark(shown, n))
        return 0;
    size_t base = n - MARK_LEN, qn = strlen(query);
    char *url = malloc(base + qn + 1), *key = strdup(shown);
    if (url && key) {
        memcpy(url, shown, base);
        memcpy(url + base, query, qn + 1);
    }
    int rc = url && key ? 0 : SHARC_ERR(ENOMEM);
    pthread_mutex_lock(&table_lock);
    kept_url **slot = &table[bucket_of(shown)], *e = *slot;
    while (e && strcmp(e->shown, shown) != 0)
        e = e->next;
    if (rc == 0 && e) {
        /* The same URL with another query (signed again): the latest is used. */
        explicit_bzero(e->url, strlen(e->url));
        free(e->url);
        e->url = url;
        url = NULL;
    } else if (rc == 0 && (e = malloc(sizeof *e))) {
        *e = (kept_url){*slot, key, url};
        *slot = e;
        url = key = NULL;
    } else {
        rc = SHARC_ERR(ENOMEM);
    }
    pthread_mutex_unlock(&table_lock);
    if (url)
        explicit_bzero(url, base + qn + 1);
    free(url);
    free(key);
    return rc < 0 ? sharc__set_error(ctx, rc, "%s: out of memory", shown) : 0;
}

int sharc__remote_full_url(sharc__ctx *ctx, const char *path, char **url)
{
    *url = NULL;
    if (!is_http(path) || !ends_with_mark(path, strlen(path)) || sharc__remote_query(path))
        return (*url = sharc__strdup(ctx, path)) ? 0 : SHARC_ERR(ENOMEM);
    pthread_mutex_lock(&table_lock);
    kept_url *e = table[bucket_of(path)];
    while (e && strcmp(e->shown, path) != 0)
        e = e->next;
    *url = e ? sharc__strdup(ctx, e->url) : NULL;
    pthread_mutex_unlock(&table_lock);
    if (e)
        return *url ? 0 : SHARC_ERR(ENOMEM);
    return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                            "%s: the query string of this URL is not known in this process: "
                            "give the URL whole (with its query) as a path",
                            path);
}

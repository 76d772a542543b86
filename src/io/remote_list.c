/*
 * Listing an S3 prefix (ListObjectsV2, paginated), for discovery of a remote dataset as
 * of a local directory: the answer's XML read for its keys and continuation token.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/layout.h"
#include "io/remote_impl.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The character an entity at `a` (n bytes) stands for, with its length in *used: the five
 * predefined ones and character references to ASCII (S3 writes control characters so);
 * -1 for anything else, which then stands for itself. */
static int xml_entity(const char *a, size_t n, size_t *used)
{
    static const struct {
        const char *name;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    if (n < 3 || a[0] != '&')
        return -1;
    for (size_t k = 0; k < sizeof ents / sizeof *ents; k++)
        if (n >= strlen(ents[k].name) && strncmp(a, ents[k].name, strlen(ents[k].name)) == 0) {
            *used = strlen(ents[k].name);
            return ents[k].c;
        }
    if (a[1] != '#')
        return -1;
    const int hex = a[2] == 'x';
    unsigned v = 0;
    size_t i = 2 + (size_t)hex;
    for (; i < n && i < 8 && (hex ? isxdigit((unsigned char)a[i]) : isdigit((unsigned char)a[i]));
         i++)
        v = v * (hex ? 16u : 10u) + (unsigned)(isdigit((unsigned char)a[i])
                                                   ? a[i] - '0'
                                                   : tolower((unsigned char)a[i]) - 'a' + 10);
    if (i >= n || a[i] != ';' || i == 2 + (size_t)hex || v == 0 || v >= 0x80)
        return -1;
    *used = i + 1;
    return (int)v;
}

/* The text of the first <tag>…</tag> in [p, end), entities decoded, in *out (NULL when the
 * tag is absent). */
static int xml_text(sharc__ctx *ctx, const char *p, const char *end, const char *tag, char **out)
{
    char open[64], close_[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close_, sizeof close_, "</%s>", tag);
    *out = NULL;
    const char *a = memmem(p, (size_t)(end - p), open, strlen(open));
    if (!a)
        return 0;
    a += strlen(open);
    const char *b = memmem(a, (size_t)(end - a), close_, strlen(close_));
    if (!b)
        return 0;
    char *s = sharc__malloc(ctx, (size_t)(b - a) + 1), *w = s;
    if (!s)
        return SHARC_ERR(ENOMEM);
    while (a < b) {
        size_t used = 0;
        int c = xml_entity(a, (size_t)(b - a), &used);
        if (c >= 0) {
            *w++ = (char)c;
            a += used;
        } else {
            *w++ = *a++;
        }
    }
    *w = 0;
    *out = s;
    return 0;
}

/* Every <block>…</block> of [p, end) in turn: *at is where the next search starts. */
static int xml_block(const char *p, const char *end, const char *block, const char **b0,
                     const char **b1)
{
    char open[64], close_[64];
    snprintf(open, sizeof open, "<%s>", block);
    snprintf(close_, sizeof close_, "</%s>", block);
    const char *a = memmem(p, (size_t)(end - p), open, strlen(open));
    const char *b = a ? memmem(a, (size_t)(end - a), close_, strlen(close_)) : NULL;
    if (!b)
        return 0;
    *b0 = a + strlen(open);
    *b1 = b;
    return 1;
}

/* The query of one ListObjectsV2 page, its parameters in SigV4's (sorted) order. */
static int list_query(sharc__ctx *ctx, sharc__buf *u, const char *prefix, const char *token)
{
    int rc = sharc__buf_append(ctx, u, "?", 1);
    if (rc == 0 && token) {
        rc = sharc__buf_append(ctx, u, "continuation-token=", 19);
        rc = rc < 0 ? rc : sharc__remote_append_encoded(ctx, u, token, strlen(token), 0);
        rc = rc < 0 ? rc : sharc__buf_append(ctx, u, "&", 1);
    }
    rc = rc < 0 ? rc : sharc__buf_append(ctx, u, "delimiter=%2F&list-type=2&prefix=", 33);
    rc = rc < 0 ? rc : sharc__remote_append_encoded(ctx, u, prefix, strlen(prefix), 0);
    return rc < 0 ? SHARC_ERR(ENOMEM) : 0;
}

/* GET one page into `page`, with the retries of a shard's transfer. */
static int list_page(sharc__ctx *ctx, sharc__remote *r, const char *url, sharc__buf *page)
{
    sharc__free(ctx, r->url);
    if (!(r->url = sharc__strdup(ctx, url)))
        return SHARC_ERR(ENOMEM);
    sharc__buf_clear(page);
    r->mem = page;
    r->delivered = 0;
    r->total = UINT64_MAX;
    r->etag[0] = 0;
    sharc__remote_transfer(r);
    if (r->rc < 0)
        return sharc__set_error(
            ctx, r->rc == SHARC_ERR(EACCES) || r->rc == SHARC_ERR(ENOENT) ? r->rc : SHARC_ERR_IO,
            "cannot list %s: %s", r->name, r->msg);
    return 0;
}

int sharc__s3_parse_list(sharc__ctx *ctx, const char *xml, size_t n, const char *bucket,
                         sharc__strs *keys, sharc__strs *dirs, char **token)
{
    const char *p = xml, *end = xml + n, *b0, *b1;
    char *text = NULL;
    int rc = 0;
    *token = NULL;
    for (; rc == 0 && xml_block(p, end, "Contents", &b0, &b1); p = b1) {
        if ((rc = xml_text(ctx, b0, b1, "Key", &text)) < 0)
            break;
        if (!text) {
            rc = sharc__set_error(ctx, SHARC_ERR_IO, "an object without a <Key> in the listing");
            break;
        }
        const char *leaf = strrchr(text, '/') ? strrchr(text, '/') + 1 : text;
        /* Hidden names are skipped as in a directory; a key ending in '/' marks a folder. */
        if (*leaf && *leaf != '.') {
            size_t len = strlen(bucket) + strlen(text) + 7;
            char *u = sharc__malloc(ctx, len);
            if (u)
                snprintf(u, len, "s3://%s/%s", bucket, text);
            rc = sharc__strs_push(ctx, keys, u);
        }
        sharc__free(ctx, text);
        text = NULL;
    }
    for (p = xml; rc == 0 && xml_block(p, end, "CommonPrefixes", &b0, &b1); p = b1) {
        if ((rc = xml_text(ctx, b0, b1, "Prefix", &text)) == 0 && text)
            rc = sharc__strs_push(ctx, dirs, text);
        text = NULL;
    }
    if (rc == 0 && (rc = xml_text(ctx, xml, end, "IsTruncated", &text)) == 0 && text &&
        strcmp(text, "true") == 0) {
        rc = xml_text(ctx, xml, end, "NextContinuationToken", token);
        if (rc == 0 && (!*token || !**token))
            rc = sharc__set_error(ctx, SHARC_ERR_IO,
                                  "a truncated listing page without a NextContinuationToken");
    }
    sharc__free(ctx, text);
    if (rc < 0) {
        sharc__free(ctx, *token);
        *token = NULL;
    }
    return rc == SHARC_ERR(ENOMEM) ? sharc__set_error(ctx, rc, "out of memory") : rc;
}

void sharc__s3_list_guard_free(sharc__ctx *ctx, sharc__s3_list_guard *g)
{
    sharc__free(ctx, g->seen);
    g->seen = NULL;
    g->cap = g->n = 0;
}

/* Put h (not 0) into the set of g: 1 when it was there already, 0, or SHARC_ERR(ENOMEM). */
static int add_seen(sharc__ctx *ctx, sharc__s3_list_guard *g, uint64_t h)
{
    if (2 * (g->n + 1) > g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        uint64_t *v = sharc__calloc(ctx, cap, sizeof *v);
        if (!v)
            return SHARC_ERR(ENOMEM);
        uint64_t *old = g->seen;
        size_t old_cap = g->cap;
        g->seen = v;
        g->cap = cap;
        g->n = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i])
                (void)add_seen(ctx, g, old[i]);
        sharc__free(ctx, old);
    }
    size_t i = (size_t)(h % g->cap);
    while (g->seen[i] && g->seen[i] != h)
        i = (i + 1) % g->cap;
    if (g->seen[i])
        return 1;
    g->seen[i] = h;
    g->n++;
    return 0;
}

int sharc__s3_list_guard_page(sharc__ctx *ctx, sharc__s3_list_guard *g, const char *prefix,
                              const char *token, size_t keys)
{
    g->pages++;
    g->keys += keys;
    if (g->keys > g->max_keys || (token && g->pages >= g->max_pages))
        return sharc__set_error(ctx, SHARC_ERR_IO,
                                "more than %zu %s: the server would list on forever, or the "
                                "prefix holds more than one dataset (give its directories, or "
                                "the shards by name with braces)",
                                g->keys > g->max_keys ? g->max_keys : g->max_pages,
                                g->keys > g->max_keys ? "objects" : "pages");
    if (!token)
        return 0;
    uint64_t h = sharc__fnv1a(SHARC__FNV_OFFSET, prefix, strlen(prefix) + 1);
    h = sharc__fnv1a(h, token, strlen(token));
    int seen = add_seen(ctx, g, h ? h : 1);
    if (seen < 0)
        return sharc__set_error(ctx, seen, "out of memory");
    return seen ? sharc__set_error(ctx, SHARC_ERR_IO,
                                   "the server gave the continuation token of an earlier page "
                                   "again (after %zu pages): its listing would never end",
                                   g->pages)
                : 0;
}

static int list_prefix(sharc__ctx *ctx, sharc__remote *r, sharc__s3_list_guard *g,
                       const char *bucket, const char *prefix, sharc__strs *out,
                       int recurse_manifests, size_t *ignored)
{
    sharc__buf base = {0}, url = {0}, page = {0};
    sharc__strs dirs = {0};
    char *token = NULL;
    int rc = sharc__remote_s3_url(ctx, &base, bucket, strlen(bucket), NULL);
    do {
        rc = rc < 0 ? rc : sharc__buf_set(ctx, &url, base.data, base.len);
        rc = rc < 0 ? rc : list_query(ctx, &url, prefix, token);
        rc = rc < 0 ? rc : list_page(ctx, r, sharc__buf_str(&url), &page);
        sharc__free(ctx, token); /* in the URL now */
        token = NULL;
        const size_t before = out->n + dirs.n;
        if (rc == 0 && (rc = sharc__s3_parse_list(ctx, (const char *)page.data, page.len, bucket,
                                                  out, &dirs, &token)) < 0)
            sharc__wrap_error(ctx, rc, "cannot list s3://%s/%s", bucket, prefix);
        /* A server whose tokens cycle, or never end, would be listed forever. */
        if (rc == 0 &&
            (rc = sharc__s3_list_guard_page(ctx, g, prefix, token, out->n + dirs.n - before)) < 0)
            sharc__wrap_error(ctx, rc, "cannot list s3://%s/%s", bucket, prefix);
    } while (rc == 0 && token);
    const size_t plen = strlen(prefix);
    for (size_t i = 0; rc == 0 && i < dirs.n; i++) {
        const char *sub = dirs.items[i];
        const int below = strncmp(sub, prefix, plen) == 0;
        if (recurse_manifests && below && strcmp(sub + plen, SHARC__NEMO_SHARDED_DIR "/") == 0) {
            rc = list_prefix(ctx, r, g, bucket, sub, out, 0, ignored);
        } else {
            sharc__log(ctx, SHARC_LOG_WARN,
                       "ignoring directory s3://%s/%s: shards are read from the directories "
                       "given, not from their subdirectories (give it, or a pattern, as a path)",
                       bucket, sub);
            (*ignored)++;
        }
    }
    sharc__free(ctx, token);
    sharc__strs_free(ctx, &dirs);
    sharc__buf_free(ctx, &base);
    sharc__buf_free(ctx, &url);
    sharc__buf_free(ctx, &page);
    return rc == SHARC_ERR(ENOMEM) && !ctx->error[0]
               ? sharc__set_error(ctx, rc, "cannot list s3://%s/%s: out of memory", bucket, prefix)
               : rc;
}

int sharc__remote_list(sharc__ctx *ctx, const char *url, sharc__strs *out, int recurse_manifests,
                       size_t *ignored)
{
    if (!sharc__remote_is_prefix(url))
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "cannot list %s: only s3://bucket/prefix/ can be listed", url);
    sharc__remote *r = NULL;
    int rc = sharc__remote_new(&r, ctx, url, KIND_HTTP);
    if (rc == 0)
        rc = sharc__remote_s3_credentials(ctx, r);
    if (rc == 0 && !sharc__remote_curl_ready())
        rc = sharc__set_error(ctx, SHARC_ERR_IO, "%s: libcurl cannot be initialised", url);
    const char *slash = strchr(url + 5, '/');
    char *bucket =
        sharc__strndup(ctx, url + 5, slash ? (size_t)(slash - url - 5) : strlen(url + 5));
    size_t first = out->n;
    ctx->error[0] = 0;
    if (rc == 0 && !bucket)
        rc = sharc__set_error(ctx, SHARC_ERR(ENOMEM), "cannot list %s: out of memory", url);
    sharc__s3_list_guard g = {.max_pages = SHARC__NET_LIST_MAX_PAGES,
                              .max_keys = SHARC__NET_LIST_MAX_KEYS};
    if (rc == 0)
        rc = list_prefix(ctx, r, &g, bucket, slash ? slash + 1 : "", out, recurse_manifests,
                         ignored);
    sharc__s3_list_guard_free(ctx, &g);
    sharc__free(ctx, bucket);
    if (rc == 0 && out->n > first)
        qsort(out->items + first, out->n - first, sizeof(char *), cmp_str);
    sharc__remote_close(&r, ctx);
    return rc;
}

/*
 * The remote module's internals, shared by remote.c (paths, S3 addressing, opening a stream,
 * pipe:), remote_http.c (one HTTP transfer with its retries; ranged reads) and remote_list.c
 * (S3 listings). remote_list.c calls into the other two and remote_http.c calls into
 * remote.c, never the other way; remote.c calls only sharc__remote_transfer and
 * sharc__remote_curl_ready of remote_http.c. remote_url.c keeps the query strings of URLs
 * out of sight (sharc__remote_shown) and finds them for the requests.
 */
#ifndef SHARC_SRC_REMOTE_IMPL_H
#define SHARC_SRC_REMOTE_IMPL_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/ctx.h"
#include "io/remote.h"
#include "io/ring.h"

enum { KIND_PIPE, KIND_HTTP };
/* What one attempt at a transfer came to. */
enum { XFER_DONE, XFER_RETRY, XFER_FAIL };

struct sharc__remote {
    sharc__ctx *ctx;
    int kind;
    char *name; ///< the path as shown, for messages (never holds credentials or a query)
    int rfd;    ///< the command's standard output (pipe:)
    /* pipe: */
    pid_t pid;
    int reaped, wstatus;
    /* http: the request and its credentials */
    char *url, *sigv4, *user, *pass, *token_header;
    uint32_t retries, timeout_ms;
    sharc__ring ring; ///< a stream's bytes, from its transfer to the reader (http, s3)
    sharc__buf *mem;  ///< else the bytes go here (a listing page)
    pthread_t thread;
    int started;
    atomic_int cancel;
    /* the transfer, owned by its thread until joined */
    CURL *curl;
    CURL *kept; ///< a caller's handle, reused (and its connections) instead of a new one
    uint64_t delivered, total; ///< total: UINT64_MAX while unknown
    uint64_t skip;             ///< bytes of a 200 answer to a resumed request already delivered
    uint64_t range_start;      ///< the start of a 206 answer's Content-Range
    /* A ranged read (sharc__remote_read_range): the bytes up to range_end (inclusive; else
     * UINT64_MAX, to the object's end) go to `dst`, whose first byte is the object's byte
     * `dst_origin`, instead of to `ring` or `mem`. */
    uint64_t range_end, dst_origin;
    uint8_t *dst;
    int range_full; ///< an answer that ignored the range delivered all of it: done
    long code;
    int checked, stalled, sink_failed;
    double last_progress;
    char etag[SHARC__NET_ETAG_MAX];
    /** A weak ETag (W/"...") the answer must still carry: If-Match compares strongly and
     *  never matches one, so a resumed transfer or ranged read compares the answer's. */
    char expect[SHARC__NET_ETAG_MAX];
    int etag_changed;      ///< the answer carried another ETag than `expect`
    atomic_ullong etag_id; ///< sharc__remote_etag_id(etag), for the reader's thread
    char body[2048];       ///< the start of an error answer's body
    size_t body_len;
    atomic_ullong bytes;
    atomic_uint n_retries;
    int rc;
    char msg[900];
};

/** A handle for `path` of `kind` (KIND_PIPE, KIND_HTTP), not yet opened. */
int sharc__remote_new(sharc__remote **out, sharc__ctx *ctx, const char *path, int kind);
/** Make r a request for http(s):// `path` or the object s3:// `path`. */
int sharc__remote_http_setup(sharc__ctx *ctx, sharc__remote *r, const char *path);
/** The S3 credentials and signing of r, from the environment. */
int sharc__remote_s3_credentials(sharc__ctx *ctx, sharc__remote *r);
/** The HTTP URL of an S3 object or listing: `bucket` then `key`, percent-encoded. */
int sharc__remote_s3_url(sharc__ctx *ctx, sharc__buf *b, const char *bucket, size_t bucket_len,
                         const char *key);
/** Append `s` (n bytes) percent-encoded as S3 wants, keeping '/' when keep_slash. */
int sharc__remote_append_encoded(sharc__ctx *ctx, sharc__buf *b, const char *s, size_t n,
                                 int keep_slash);
/** The URL that requests for `path` go to, in *url (sharc__free()): the whole URL kept for a
 *  shown one (sharc__remote_keep_query()), else `path`. SHARC_ERR(EINVAL) with the message
 *  naming `path` for a shown URL whose query is not known; SHARC_ERR(ENOMEM). */
int sharc__remote_full_url(sharc__ctx *ctx, const char *path, char **url);
/** Run r's transfer with its retries; r->rc is 0 when it completed. */
void sharc__remote_transfer(sharc__remote *r);
/** libcurl initialised once for the process: 1, or 0 when it cannot be. */
int sharc__remote_curl_ready(void);

#endif /* SHARC_SRC_REMOTE_IMPL_H */

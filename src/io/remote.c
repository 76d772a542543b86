#include "io/remote_impl.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/hash.h"
#include "base/layout.h"

extern char **environ;

int sharc__is_remote(const char *path)
{
    return strncmp(path, "s3://", 5) == 0 || strncmp(path, "http://", 7) == 0 ||
           strncmp(path, "https://", 8) == 0 || strncmp(path, "pipe:", 5) == 0;
}

int sharc__remote_is_prefix(const char *path)
{
    if (strncmp(path, "s3://", 5) != 0)
        return 0;
    const char *slash = strchr(path + 5, '/');
    return !slash || slash[1] == 0 || path[strlen(path) - 1] == '/';
}

/* Where the authority of a URL starts and ends, or 0 for a path that is not a URL. */
static int authority(const char *url, const char **at, const char **end)
{
    const char *p = strstr(url, "://");
    if (strncmp(url, "pipe:", 5) == 0 || !p)
        return 0;
    *at = p + 3;
    *end = *at + strcspn(*at, "/?#");
    return 1;
}

int sharc__remote_check_path(sharc__ctx *ctx, const char *path)
{
    const char *a, *e;
    if (!authority(path, &a, &e))
        return 0;
    const char *user = memchr(a, '@', (size_t)(e - a));
    if (!user)
        return 0;
    return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                            "%.*s***%.1000s: a URL with a user name or password is refused, so "
                            "that credentials never appear in messages or saved states: give "
                            "them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                            (int)(a - path), path, user);
}

static void wipe_free(sharc__ctx *ctx, char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        sharc__free(ctx, s);
    }
}

static void remote_free(sharc__ctx *ctx, sharc__remote *r)
{
    sharc__free(ctx, r->name);
    sharc__free(ctx, r->url);
    sharc__free(ctx, r->sigv4);
    wipe_free(ctx, r->user);
    wipe_free(ctx, r->pass);
    wipe_free(ctx, r->token_header);
    sharc__free(ctx, r);
}

/* ---- S3 addressing and credentials ---- */

/* Append `s` percent-encoded as SigV4 wants it: all but the unreserved characters, and '/'
 * when `keep_slash`. */
int sharc__remote_append_encoded(sharc__ctx *ctx, sharc__buf *b, const char *s, size_t n,
                                 int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
            (keep_slash && c == '/')) {
            if (sharc__buf_append(ctx, b, &s[i], 1) < 0)
                return SHARC_ERR(ENOMEM);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            if (sharc__buf_append(ctx, b, e, 3) < 0)
                return SHARC_ERR(ENOMEM);
        }
    }
    return 0;
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static const char *region_of_env(void)
{
    const char *r = env_nonempty("AWS_REGION");
    if (!r)
        r = env_nonempty("AWS_DEFAULT_REGION");
    return r ? r : "us-east-1";
}

/* The HTTP URL of the object or bucket root (`key` NULL) of s3://bucket/key: path-style
 * under AWS_ENDPOINT_URL, else AWS's virtual-hosted name. */
int sharc__remote_s3_url(sharc__ctx *ctx, sharc__buf *b, const char *bucket, size_t bucket_len,
                         const char *key)
{
    const char *endpoint = env_nonempty("AWS_ENDPOINT_URL");
    int rc = 0;
    sharc__buf_clear(b);
    if (endpoint) {
        size_t n = strlen(endpoint);
        while (n && endpoint[n - 1] == '/')
            n--;
        rc = sharc__buf_append(ctx, b, endpoint, n);
        rc = rc < 0 ? rc : sharc__buf_append(ctx, b, "/", 1);
        rc = rc < 0 ? rc : sharc__remote_append_encoded(ctx, b, bucket, bucket_len, 0);
    } else {
        char host[512];
        snprintf(host, sizeof host, "https://%.*s.s3.%s.amazonaws.com", (int)bucket_len, bucket,
                 region_of_env());
        rc = sharc__buf_append(ctx, b, host, strlen(host));
    }
    if (rc == 0 && key) {
        rc = sharc__buf_append(ctx, b, "/", 1);
        rc = rc < 0 ? rc : sharc__remote_append_encoded(ctx, b, key, strlen(key), 1);
    } else if (rc == 0 && !endpoint) {
        rc = sharc__buf_append(ctx, b, "/", 1);
    }
    return rc < 0 ? SHARC_ERR(ENOMEM) : 0;
}

/* The signing of S3 requests, from the standard variables; none without a key. */
int sharc__remote_s3_credentials(sharc__ctx *ctx, sharc__remote *r)
{
    const char *id = env_nonempty("AWS_ACCESS_KEY_ID");
    const char *secret = env_nonempty("AWS_SECRET_ACCESS_KEY");
    const char *token = env_nonempty("AWS_SESSION_TOKEN");
    if (!id || !secret)
        return 0;
    char sig[128];
    snprintf(sig, sizeof sig, "aws:amz:%s:s3", region_of_env());
    if (!(r->sigv4 = sharc__strdup(ctx, sig)) || !(r->user = sharc__strdup(ctx, id)) ||
        !(r->pass = sharc__strdup(ctx, secret)))
        return SHARC_ERR(ENOMEM);
    if (token) {
        size_t n = strlen(token) + 32;
        if (!(r->token_header = sharc__malloc(ctx, n)))
            return SHARC_ERR(ENOMEM);
        snprintf(r->token_header, n, "x-amz-security-token: %s", token);
    }
    return 0;
}

int sharc__remote_new(sharc__remote **out, sharc__ctx *ctx, const char *path, int kind)
{
    sharc__remote *r = sharc__calloc(ctx, 1, sizeof *r);
    if (!r)
        return SHARC_ERR(ENOMEM);
    r->ctx = ctx;
    r->kind = kind;
    r->rfd = r->wfd = -1;
    r->total = UINT64_MAX;
    r->range_end = UINT64_MAX;
    r->retries = ctx->net_retries_1 ? ctx->net_retries_1 - 1 : SHARC__NET_RETRIES;
    r->timeout_ms = ctx->net_timeout_ms ? ctx->net_timeout_ms : SHARC__NET_TIMEOUT_MS;
    atomic_init(&r->cancel, 0);
    atomic_init(&r->bytes, 0);
    atomic_init(&r->n_retries, 0);
    atomic_init(&r->etag_id, 0);
    *out = r;
    if (!(r->name = sharc__strdup(ctx, path)))
        return SHARC_ERR(ENOMEM);
    return 0;
}

/* Make `r` a request for http(s):// `path` or the object s3:// `path`. */
static int http_setup(sharc__ctx *ctx, sharc__remote *r, const char *path)
{
    if (strncmp(path, "s3://", 5) != 0)
        return (r->url = sharc__strdup(ctx, path)) ? 0 : SHARC_ERR(ENOMEM);
    const char *bucket = path + 5, *slash = strchr(bucket, '/');
    if (!slash || slash == bucket || !slash[1])
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "%s: not an object URL (expected s3://bucket/key)", path);
    sharc__buf b = {0};
    int rc = sharc__remote_s3_url(ctx, &b, bucket, (size_t)(slash - bucket), slash + 1);
    if (rc == 0)
        r->url = (char *)b.data;
    else
        sharc__buf_free(ctx, &b);
    return rc < 0 ? rc : sharc__remote_s3_credentials(ctx, r);
}

/* ---- one HTTP transfer ---- */

static double now_s(void)
{
    return sharc__now_s();
}

static int deliver(sharc__remote *r, const char *p, size_t n)
{
    if (r->dst) {
        /* on_body keeps every answer within [dst_origin, range_end]. */
        memcpy(r->dst + (r->delivered - r->dst_origin), p, n);
        return 0;
    }
    if (r->mem) {
        if (r->mem->len + n > SHARC__NET_PAGE_MAX || sharc__buf_append(r->ctx, r->mem, p, n) < 0) {
            r->sink_failed = 1;
            return -1;
        }
        return 0;
    }
    while (n) {
        ssize_t w = send(r->wfd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            /* The reader closed its end: nobody wants the rest. */
            atomic_store(&r->cancel, 1);
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *user)
{
    sharc__remote *r = user;
    size_t n = size * nmemb;
    atomic_fetch_add(&r->bytes, n);
    r->last_progress = now_s();
    if (!r->checked) {
        r->checked = 1;
        curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &r->code);
        if (r->code == 200)
            r->skip = r->delivered; /* the server ignored the Range */
        else if (r->code == 206 && r->range_start != r->delivered)
            return 0; /* an answer for other bytes than asked: fails the attempt */
    }
    if (r->code != 200 && r->code != 206) {
        size_t keep = sizeof r->body - 1 - r->body_len;
        keep = n < keep ? n : keep;
        memcpy(r->body + r->body_len, p, keep);
        r->body_len += keep;
        r->body[r->body_len] = 0;
        return n;
    }
    size_t drop = r->skip < n ? (size_t)r->skip : n;
    r->skip -= drop;
    size_t give = n - drop;
    if (r->range_end != UINT64_MAX && give > r->range_end + 1 - r->delivered) {
        /* A 200 answer to a ranged read goes on past the range: what was asked for is all
         * there once this part is delivered, and the rest is not wanted. */
        give = (size_t)(r->range_end + 1 - r->delivered);
        r->range_full = 1;
    }
    if (give && deliver(r, p + drop, give) < 0)
        return 0;
    r->delivered += give;
    return r->range_full ? 0 : n;
}

static int header_is(const char *h, size_t n, const char *name)
{
    size_t m = strlen(name);
    return n > m && strncasecmp(h, name, m) == 0;
}

static size_t on_header(char *h, size_t size, size_t nmemb, void *user)
{
    sharc__remote *r = user;
    size_t n = size * nmemb;
    char line[512];
    size_t m = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, h, m);
    while (m && (line[m - 1] == '\n' || line[m - 1] == '\r' || line[m - 1] == ' '))
        m--;
    line[m] = 0;
    if (header_is(line, m, "etag:")) {
        const char *v = line + 5;
        while (*v == ' ')
            v++;
        snprintf(r->etag, sizeof r->etag, "%.250s", v);
        atomic_store(&r->etag_id, sharc__remote_etag_id(r->etag));
    } else if (header_is(line, m, "content-range:")) {
        unsigned long long a, b, t;
        if (sscanf(line + 14, " bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
            r->range_start = a;
            r->total = t;
        } else if (sscanf(line + 14, " bytes %llu-%llu/", &a, &b) == 2) {
            r->range_start = a;
        }
    }
    return n;
}

static int on_progress(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    sharc__remote *r = user;
    (void)dt, (void)dn, (void)ut, (void)un;
    if (atomic_load(&r->cancel))
        return 1;
    if ((now_s() - r->last_progress) * 1000.0 > (double)r->timeout_ms) {
        r->stalled = 1;
        return 1;
    }
    return 0;
}

/* The <Code> of an S3 error body, if any. */
static void s3_error_code(const char *body, char *out, size_t cap)
{
    const char *a = strstr(body, "<Code>"), *b = a ? strstr(a, "</Code>") : NULL;
    out[0] = 0;
    if (a && b)
        snprintf(out, cap, " (%.*s)", (int)(b - a - 6) < 100 ? (int)(b - a - 6) : 100, a + 6);
}

static const char *status_meaning(long code)
{
    switch (code) {
    case 400:
        return "bad request";
    case 401:
    case 403:
        return "access denied: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
               "AWS_SESSION_TOKEN and AWS_REGION, and the object's permissions";
    case 404:
        return "no such object or bucket";
    case 408:
        return "request timeout";
    case 412:
        return "the object changed while it was being read";
    case 416:
        return "range not satisfiable";
    case 429:
        return "too many requests";
    case 500:
        return "internal server error";
    case 502:
        return "bad gateway";
    case 503:
        return "service unavailable (slow down)";
    case 504:
        return "gateway timeout";
    default:
        return code >= 500 ? "server error" : "refused";
    }
}

static int retryable_curl(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY:
        return 1;
    default:
        return 0;
    }
}

/* Append a header to *h; on failure (out of memory) *h keeps what it had and -1 is returned. */
static int add_header(struct curl_slist **h, const char *line)
{
    struct curl_slist *n = curl_slist_append(*h, line);
    if (!n)
        return -1;
    *h = n;
    return 0;
}

static int setup_request(sharc__remote *r, struct curl_slist **headers, char *errbuf)
{
    CURL *c = r->curl;
    char range[64], match[sizeof r->etag + 16];
    if (r->range_end != UINT64_MAX)
        snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-%" PRIu64, r->delivered,
                 r->range_end);
    else
        snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-", r->delivered);
    snprintf(match, sizeof match, "If-Match: %s", r->etag);
    int bad = add_header(headers, range) < 0;
    /* A resumed transfer, or a ranged read of a member, must read the object whose headers
     * were read, not a replacement. */
    if ((r->delivered || r->range_end != UINT64_MAX) && r->etag[0])
        bad |= add_header(headers, match) < 0;
    if (r->token_header)
        bad |= add_header(headers, r->token_header) < 0;
    /* S3 wants the payload's hash among the signed headers, which libcurl 7.88 leaves out;
     * a GET's payload is empty. */
    if (r->sigv4)
        bad |= add_header(headers,
                          "x-amz-content-sha256: "
                          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") < 0;
    struct curl_slist *h = *headers;
    bad |= curl_easy_setopt(c, CURLOPT_URL, r->url) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, h) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)r->timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEDATA, r) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HEADERDATA, r) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_XFERINFODATA, r) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_BUFFERSIZE, (long)SHARC__NET_BUFFER / 2) != CURLE_OK;
    if (r->sigv4) {
        bad |= curl_easy_setopt(c, CURLOPT_AWS_SIGV4, r->sigv4) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_USERNAME, r->user) != CURLE_OK;
        bad |= curl_easy_setopt(c, CURLOPT_PASSWORD, r->pass) != CURLE_OK;
    }
    return bad ? -1 : 0;
}

/* Where the bytes asked for end: the range's end, or the object's (UINT64_MAX: unknown). */
static uint64_t want_end(const sharc__remote *r)
{
    return r->range_end != UINT64_MAX ? r->range_end + 1 : r->total;
}

/* One attempt, from byte r->delivered on: DONE, RETRY or FAIL with r->msg and r->rc set. */
static int attempt(sharc__remote *r)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *headers = NULL;
    r->checked = r->stalled = r->range_full = 0;
    r->code = 0;
    r->skip = 0;
    r->range_start = UINT64_MAX;
    r->body_len = 0;
    r->body[0] = 0;
    r->last_progress = now_s();
    int out = XFER_FAIL;
    r->curl = r->kept ? r->kept : curl_easy_init();
    if (!r->curl || setup_request(r, &headers, errbuf) < 0) {
        r->rc = SHARC_ERR(ENOMEM);
        snprintf(r->msg, sizeof r->msg, "cannot set up the request (libcurl)");
        goto done;
    }
    CURLcode res = curl_easy_perform(r->curl);
    long code = r->code;
    if (!r->checked)
        curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &code);
    if (atomic_load(&r->cancel)) {
        r->rc = SHARC_ERR(ECANCELED);
        snprintf(r->msg, sizeof r->msg, "the transfer was stopped");
    } else if (r->sink_failed) {
        r->rc = SHARC_ERR_TOO_LARGE;
        snprintf(r->msg, sizeof r->msg, "answer larger than %zu bytes", SHARC__NET_PAGE_MAX);
    } else if (r->range_full) {
        out = XFER_DONE;
    } else if (code == 416 && r->delivered > 0 && r->total == UINT64_MAX &&
               r->range_end == UINT64_MAX) {
        out = XFER_DONE; /* resumed exactly at the end of an object of unknown size */
    } else if (code >= 300 && res == CURLE_OK) {
        char s3code[128];
        s3_error_code(r->body, s3code, sizeof s3code);
        out = code >= 500 || code == 429 || code == 408 ? XFER_RETRY : XFER_FAIL;
        r->rc = code == 401 || code == 403 ? SHARC_ERR(EACCES)
                : code == 404              ? SHARC_ERR(ENOENT)
                                           : SHARC_ERR_IO;
        snprintf(r->msg, sizeof r->msg, "HTTP %ld%s: %s", code, s3code, status_meaning(code));
    } else if (r->stalled) {
        out = XFER_RETRY;
        r->rc = SHARC_ERR_TIMEOUT;
        snprintf(r->msg, sizeof r->msg, "no data for %" PRIu32 " ms (timeout_ms)", r->timeout_ms);
    } else if (res == CURLE_WRITE_ERROR && r->checked && r->code == 206) {
        out = XFER_FAIL;
        r->rc = SHARC_ERR_IO;
        snprintf(r->msg, sizeof r->msg,
                 "the server answered a request for bytes %" PRIu64 "- with other bytes",
                 r->delivered);
    } else if (res != CURLE_OK) {
        out = retryable_curl(res) ? XFER_RETRY : XFER_FAIL;
        r->rc = res == CURLE_OPERATION_TIMEDOUT ? SHARC_ERR_TIMEOUT : SHARC_ERR_IO;
        snprintf(r->msg, sizeof r->msg, "%s (after %" PRIu64 " bytes)",
                 errbuf[0] ? errbuf : curl_easy_strerror(res), r->delivered);
    } else if (want_end(r) != UINT64_MAX && r->delivered < want_end(r)) {
        out = XFER_RETRY;
        r->rc = SHARC_ERR_IO;
        if (r->range_end != UINT64_MAX)
            snprintf(r->msg, sizeof r->msg,
                     "the body ended at byte %" PRIu64 ", before the range's end at byte %" PRIu64,
                     r->delivered, r->range_end + 1);
        else
            snprintf(r->msg, sizeof r->msg,
                     "the body ended after %" PRIu64 " of the object's %" PRIu64 " bytes",
                     r->delivered, r->total);
    } else {
        out = XFER_DONE;
    }
done:
    curl_slist_free_all(headers);
    /* A kept handle forgets this attempt's buffers and callbacks (they die with it), not
     * its connections. */
    if (r->kept)
        curl_easy_reset(r->kept);
    else
        curl_easy_cleanup(r->curl);
    r->curl = NULL;
    return out;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_start(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

int sharc__remote_curl_ready(void)
{
    pthread_once(&curl_once, curl_start);
    return curl_ready;
}

/* Attempts with capped exponential backoff; r->rc 0 when the transfer completed. */
void sharc__remote_transfer(sharc__remote *r)
{
    r->rc = 0;
    for (uint32_t k = 0;; k++) {
        if (want_end(r) != UINT64_MAX && r->delivered == want_end(r) && k > 0) {
            r->rc = 0; /* the attempt that failed had delivered every byte */
            break;
        }
        int out = attempt(r);
        if (out == XFER_DONE) {
            r->rc = 0;
            break;
        }
        if (out == XFER_FAIL || k >= r->retries) {
            if (out == XFER_RETRY) {
                size_t n = strlen(r->msg);
                snprintf(r->msg + n, sizeof r->msg - n, " (after %" PRIu32 " retries)", k);
            }
            break;
        }
        atomic_fetch_add(&r->n_retries, 1);
        uint64_t wait = (uint64_t)SHARC__NET_BACKOFF_MS << (k < 16 ? k : 16);
        if (wait > SHARC__NET_BACKOFF_MAX_MS)
            wait = SHARC__NET_BACKOFF_MAX_MS;
        for (uint64_t t = 0; t < wait && !atomic_load(&r->cancel); t += 10)
            nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        if (atomic_load(&r->cancel))
            break;
    }
}

static void *transfer_thread(void *arg)
{
    sharc__remote *r = arg;
    sharc__remote_transfer(r);
    /* End of file for the reader, which then asks sharc__remote_end() how it went. */
    shutdown(r->wfd, SHUT_WR);
    return NULL;
}

/* Start r's transfer from byte r->delivered on, into a new socket pair whose reading end
 * goes to *fd. */
static int start_transfer(sharc__remote *r, sharc__ctx *ctx, const char *path, int *fd)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return sharc__set_error(ctx, SHARC_ERR_IO, "%s: cannot make a socket pair: %s", path,
                                strerror(errno));
    r->rfd = sv[0];
    r->wfd = sv[1];
    /* A larger buffer means fewer wake-ups of the two threads per megabyte; the kernel caps
     * it (net.core.wmem_max), and it bounds what a transfer holds. */
    int buf = SHARC__NET_BUFFER;
    (void)setsockopt(r->wfd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&r->thread, NULL, transfer_thread, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return sharc__set_error(ctx, SHARC_ERR(EAGAIN), "%s: cannot start a thread: %s", path,
                                strerror(e));
    r->started = 1;
    *fd = r->rfd;
    return 0;
}

static int http_open(sharc__remote *r, sharc__ctx *ctx, const char *path, int *fd)
{
    int rc = http_setup(ctx, r, path);
    if (rc < 0)
        return rc == SHARC_ERR(ENOMEM) ? sharc__set_error(ctx, rc, "%s: out of memory", path) : rc;
    pthread_once(&curl_once, curl_start);
    if (!curl_ready)
        return sharc__set_error(ctx, SHARC_ERR_IO, "%s: libcurl cannot be initialised", path);
    return start_transfer(r, ctx, path, fd);
}

int sharc__remote_can_seek(const sharc__remote *r)
{
    return r->kind == KIND_HTTP;
}

/* Stop r's transfer and wait for its thread; nothing runs on r afterwards. */
static void stop_transfer(sharc__remote *r)
{
    atomic_store(&r->cancel, 1);
    if (r->rfd >= 0)
        close(r->rfd); /* a transfer blocked on a full socket wakes with EPIPE */
    r->rfd = -1;
    if (r->started)
        pthread_join(r->thread, NULL);
    r->started = 0;
    if (r->wfd >= 0)
        close(r->wfd);
    r->wfd = -1;
}

int sharc__remote_seek(sharc__remote *r, sharc__ctx *ctx, uint64_t from, uint64_t to, uint64_t *at,
                       int *fd)
{
    stop_transfer(r);
    /* Past the object's end (a tar cut short), the bytes from `from` on are read instead,
     * so that the reader meets the end where it is. The thread is joined: `total` is ours. */
    *at = r->total != UINT64_MAX && to >= r->total ? from : to;
    atomic_store(&r->cancel, 0);
    r->delivered = *at;
    r->rc = 0;
    r->msg[0] = 0;
    return start_transfer(r, ctx, r->name, fd);
}

uint64_t sharc__remote_etag_id(const char *etag)
{
    if (!etag[0])
        return 0;
    uint64_t h = sharc__fnv1a(SHARC__FNV_OFFSET, etag, strlen(etag));
    return h ? h : 1;
}

uint64_t sharc__remote_object_id(const sharc__remote *r)
{
    return r->kind == KIND_HTTP ? atomic_load(&r->etag_id) : 0;
}

void sharc__remote_conn_free(sharc__remote_conn **conn)
{
    if (conn && *conn)
        curl_easy_cleanup((CURL *)*conn);
    if (conn)
        *conn = NULL;
}

int sharc__remote_read_range(sharc__ctx *ctx, sharc__remote_conn **conn, const char *path,
                             uint64_t at, size_t n, uint8_t *dst, char *etag, size_t etag_cap)
{
    sharc__remote *r = NULL;
    if (n == 0)
        return 0;
    int rc = sharc__remote_check_path(ctx, path);
    if (rc == 0 && (rc = sharc__remote_new(&r, ctx, path, KIND_HTTP)) == 0)
        rc = http_setup(ctx, r, path);
    if (rc == SHARC_ERR(ENOMEM))
        rc = sharc__set_error(ctx, rc, "%s: out of memory", path);
    if (rc == 0 && !sharc__remote_curl_ready())
        rc = sharc__set_error(ctx, SHARC_ERR_IO, "%s: libcurl cannot be initialised", path);
    if (rc < 0)
        goto done;
    if (conn && !*conn)
        *conn = (sharc__remote_conn *)curl_easy_init(); /* NULL: a handle per attempt */
    r->kept = conn ? (CURL *)*conn : NULL;
    r->delivered = r->dst_origin = at;
    r->range_end = at + n - 1;
    r->dst = dst;
    snprintf(r->etag, sizeof r->etag, "%s", etag);
    sharc__remote_transfer(r);
    if (r->rc < 0) {
        rc = r->rc == SHARC_ERR(EACCES) || r->rc == SHARC_ERR(ENOENT) ? r->rc : SHARC_ERR_IO;
        rc = sharc__fail_data(ctx, rc, "%s: bytes %" PRIu64 "-%" PRIu64 ": %s", path, at,
                              at + n - 1, r->msg);
    } else {
        snprintf(etag, etag_cap, "%s", r->etag);
    }
done:
    sharc__remote_close(&r, ctx);
    return rc;
}

/* ---- pipe: ---- */

static int pipe_open(sharc__remote *r, sharc__ctx *ctx, const char *path, int *fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return sharc__set_error(ctx, SHARC_ERR_IO, "%s: cannot make a pipe: %s", path,
                                strerror(errno));
    /* As for a socket pair: fewer switches between the command and the reader (capped by
     * /proc/sys/fs/pipe-max-size; a failure keeps the default 64 KiB). */
    (void)fcntl(p[1], F_SETPIPE_SZ, SHARC__NET_BUFFER);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    /* Its own process group, so that closing a shard early stops every process of it. */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, pipe_sig;
    sigemptyset(&none);
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &pipe_sig);
    char *argv[] = {"sh", "-c", (char *)path + 5, NULL};
    int e = posix_spawn(&r->pid, "/bin/sh", &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(p[1]);
    if (e != 0) {
        close(p[0]);
        r->reaped = 1;
        return sharc__set_error(ctx, SHARC_ERR_IO, "%s: cannot start /bin/sh: %s", path,
                                strerror(e));
    }
    r->rfd = p[0];
    *fd = r->rfd;
    return 0;
}

static void reap(sharc__remote *r)
{
    if (r->reaped)
        return;
    while (waitpid(r->pid, &r->wstatus, 0) < 0 && errno == EINTR)
        ;
    r->reaped = 1;
}

int sharc__remote_open(sharc__remote **out, sharc__ctx *ctx, const char *path, int *fd)
{
    sharc__remote *r = NULL;
    const int kind = strncmp(path, "pipe:", 5) == 0 ? KIND_PIPE : KIND_HTTP;
    *out = NULL;
    *fd = -1;
    int rc = sharc__remote_check_path(ctx, path);
    if (rc == 0 && (rc = sharc__remote_new(&r, ctx, path, kind)) < 0)
        rc = sharc__set_error(ctx, rc, "%s: out of memory", path);
    if (rc == 0)
        rc = kind == KIND_PIPE ? pipe_open(r, ctx, path, fd) : http_open(r, ctx, path, fd);
    if (rc < 0) {
        sharc__remote_close(&r, ctx);
        *fd = -1;
        return sharc__fail_data(ctx, rc, "%s", ctx->error);
    }
    *out = r;
    return 0;
}

int sharc__remote_end(sharc__remote *r, char *msg, size_t cap)
{
    if (r->kind == KIND_PIPE) {
        reap(r);
        int st = r->wstatus;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            return 0;
        if (WIFSIGNALED(st)) {
            const char *abbrev = sigabbrev_np(WTERMSIG(st));
            snprintf(msg, cap, "the command was killed by signal %d (SIG%s)", WTERMSIG(st),
                     abbrev ? abbrev : "?");
        } else {
            snprintf(msg, cap, "the command exited with status %d",
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        }
        return SHARC_ERR_IO;
    }
    if (r->started) {
        pthread_join(r->thread, NULL);
        r->started = 0;
    }
    if (r->rc == 0)
        return 0;
    snprintf(msg, cap, "%s", r->msg);
    return r->rc == SHARC_ERR(EACCES) || r->rc == SHARC_ERR(ENOENT) ? r->rc : SHARC_ERR_IO;
}

void sharc__remote_close(sharc__remote **rp, sharc__ctx *ctx)
{
    sharc__remote *r = *rp;
    if (!r)
        return;
    *rp = NULL;
    if (r->kind == KIND_PIPE) {
        if (r->rfd >= 0)
            close(r->rfd);
        if (!r->reaped && r->pid > 0) {
            kill(-r->pid, SIGKILL);
            reap(r);
        }
    } else {
        stop_transfer(r);
    }
    atomic_fetch_add(&sharc__ctx_net(ctx)->bytes, atomic_load(&r->bytes));
    atomic_fetch_add(&sharc__ctx_net(ctx)->retries, atomic_load(&r->n_retries));
    remote_free(ctx, r);
}

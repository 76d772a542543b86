/*
 * HTTP transfers of the remote module: one transfer with its retries (libcurl, resumed by
 * Range from the byte already delivered), into the stream's ring, a buffer or the caller's
 * memory; and the ranged read of an object's bytes, which is such a transfer run on the
 * caller's thread.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "io/remote_impl.h"

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
    if (sharc__ring_write(&r->ring, p, n) < 0) {
        /* The reader closed its end: nobody wants the rest. */
        atomic_store(&r->cancel, 1);
        return -1;
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
        if ((r->code == 200 || r->code == 206) && r->expect[0] && strcmp(r->etag, r->expect) != 0) {
            r->etag_changed = 1;
            return 0; /* fails the attempt: another object than the one being read */
        }
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
    /* Time spent waiting for the reader to make room is no stall of the server's. */
    r->last_progress = now_s();
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
    size_t n = size * nmemb, m = n;
    while (m && (h[m - 1] == '\n' || h[m - 1] == '\r' || h[m - 1] == ' '))
        m--;
    if (header_is(h, m, "etag:")) {
        /* Whole or not at all (as if none came): a cut one would fail every If-Match. */
        size_t v = 5;
        while (v < m && h[v] == ' ')
            v++;
        const size_t len = m - v < sizeof r->etag ? m - v : 0;
        memcpy(r->etag, h + v, len);
        r->etag[len] = 0;
        atomic_store(&r->etag_id, sharc__remote_etag_id(r->etag));
        return n;
    }
    char line[512];
    m = m < sizeof line - 1 ? m : sizeof line - 1;
    memcpy(line, h, m);
    line[m] = 0;
    if (header_is(line, m, "content-range:")) {
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

static const char *status_meaning(long code, int is_signed)
{
    switch (code) {
    case 301:
    case 302:
    case 303:
    case 307:
    case 308:
        if (!is_signed)
            return "a redirect that cannot be followed (no Location)";
        return "a redirect, not followed for a signed request so that its credentials stay with "
               "AWS_ENDPOINT_URL (or the region's endpoint): check AWS_REGION and "
               "AWS_ENDPOINT_URL";
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
     * were read, not a replacement: the server checks a strong ETag (If-Match), we check a
     * weak one, which If-Match never matches (RFC 9110 compares strongly). */
    r->expect[0] = 0;
    if ((r->delivered || r->range_end != UINT64_MAX) && r->etag[0]) {
        if (strncmp(r->etag, "W/", 2) == 0)
            snprintf(r->expect, sizeof r->expect, "%s", r->etag);
        else
            bad |= add_header(headers, match) < 0;
    }
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
    /* A signed request is never redirected: libcurl drops Authorization on a change of host
     * but sends the session token's header on, and no credential may leave the endpoint (S3
     * answers a wrong region with an error, not a redirect that must be followed). A URL
     * carries none (one with a user name or password is refused), so its redirects are
     * followed, to HTTP(S) only. */
    const long follow = r->sigv4 || r->token_header ? 0L : 1L;
    bad |= curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK;
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
    r->checked = r->stalled = r->range_full = r->etag_changed = 0;
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
    } else if (r->etag_changed) {
        r->rc = SHARC_ERR_IO;
        snprintf(r->msg, sizeof r->msg,
                 "the object changed while it was being read (its ETag %.300s is now %.300s)",
                 r->expect, r->etag);
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
        snprintf(r->msg, sizeof r->msg, "HTTP %ld%s: %s", code, s3code,
                 status_meaning(code, r->sigv4 || r->token_header));
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

/* ---- ranged reads ---- */

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
        rc = sharc__remote_http_setup(ctx, r, path);
    if (rc == SHARC_ERR(ENOMEM))
        rc = sharc__set_error(ctx, rc, "%s: out of memory", r && r->name ? r->name : "");
    if (rc == 0 && !sharc__remote_curl_ready())
        rc = sharc__set_error(ctx, SHARC_ERR_IO, "%s: libcurl cannot be initialised", r->name);
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
        rc = sharc__fail_data(ctx, rc, "%s: bytes %" PRIu64 "-%" PRIu64 ": %s", r->name, at,
                              at + n - 1, r->msg);
    } else {
        /* Whole or none: a cut ETag in the next read's If-Match would fail it. */
        snprintf(etag, etag_cap, "%s", strlen(r->etag) < etag_cap ? r->etag : "");
    }
done:
    sharc__remote_close(&r, ctx);
    return rc;
}

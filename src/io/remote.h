/*
 * Shards that are not local files: objects of an S3-compatible store (`s3://bucket/key`),
 * HTTP(S) URLs, and the standard output of a command (`pipe:COMMAND`). Each is a stream that
 * the byte source (source.h) reads with sharc__remote_read() as it reads a file, so the tar,
 * gzip, zstd and JSON-lines readers work on it unchanged and memory stays bounded: a URL by a
 * thread of its own that runs libcurl and hands what arrives to the reader through a ring of
 * SHARC__NET_BUFFER bytes (io/ring.h; waiting while the reader is behind), a command by the
 * command itself, started with /bin/sh -c and its standard output on a pipe.
 *
 * A transfer that fails on the way (connection reset or refused, no byte for timeout_ms, a
 * body shorter than announced, HTTP 5xx, 429 or 408) is retried with capped exponential
 * backoff from the byte already delivered (an HTTP Range request, with If-Match on the
 * object's ETag so that a replaced object is never spliced), so nothing is lost or repeated;
 * HTTP 401/403/404 and other client errors fail at once. The reader learns of a failure when
 * its stream ends: sharc__remote_end() says whether the stream was whole.
 *
 * S3 requests are signed (AWS SigV4, libcurl's) with the credentials of the standard
 * variables AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, for AWS_REGION
 * (or AWS_DEFAULT_REGION; default us-east-1), against AWS_ENDPOINT_URL with path-style URLs
 * (`ENDPOINT/bucket/key`) when it is set, else AWS's virtual-hosted endpoint. Without a key,
 * requests go unsigned (public buckets). Credentials never appear in a message: URLs that
 * carry a user name or password are refused, and the variables are never formatted.
 */
#ifndef SHARC_SRC_REMOTE_H
#define SHARC_SRC_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/ctx.h"
#include "io/braces.h"

/** Retries of a failed transfer by default (sharc_reader_settings.net_retries). */
#define SHARC__NET_RETRIES 5
/** No byte for this long (ms) fails a transfer, to be retried (default of net_timeout_ms). */
#define SHARC__NET_TIMEOUT_MS 30000
/** Backoff before the first retry, doubled for each next one up to the cap (ms). */
#define SHARC__NET_BACKOFF_MS     100
#define SHARC__NET_BACKOFF_MAX_MS 5000
/** The ring between a transfer and the reader (and a command's pipe, where the kernel
 *  allows), in bytes: with libcurl's receive buffer (half as large), what one remote shard
 *  being read holds. */
#define SHARC__NET_BUFFER (1 << 20)
/** The most bytes read on after an archive's end to learn whether its stream ended well,
 *  and for how long at most (ms; timeout_ms when shorter): a server or a command that
 *  trickles on cannot hold a whole archive's shard open. */
#define SHARC__NET_DRAIN_MAX    ((uint64_t)1 << 20)
#define SHARC__NET_DRAIN_MAX_MS 2000
/** A skip over this many bytes or more of a remote uncompressed tar (a member left in the
 *  shard, or one too large to read) stops the transfer and starts another at the byte after
 *  it (Range: bytes=N-); shorter spans are read and dropped, cheaper than a new request. */
#define SHARC__NET_SKIP_MIN ((uint64_t)1 << 20)
/** The longest ETag kept, NUL included: a longer one (no store sends one) is taken as none,
 *  so that no request sends a cut one in If-Match. */
#define SHARC__NET_ETAG_MAX 4096
/** The most pages and objects (keys and "subdirectories") one listing of an S3 prefix reads:
 *  past either it fails, as a server that lists forever would never end. S3 gives 1000
 *  keys a page. */
#define SHARC__NET_LIST_MAX_PAGES 10000
#define SHARC__NET_LIST_MAX_KEYS  1000000
/** The most bytes of one listing page or error body kept. */
#define SHARC__NET_PAGE_MAX ((size_t)32 << 20)

typedef struct sharc__remote sharc__remote;

/** What stands for the query string of an http(s) URL (a presigned URL's signature)
 *  wherever the URL is shown or kept: "?…" (UTF-8). */
#define SHARC__URL_QUERY_MARK "?\xe2\x80\xa6"

/** Where the query string of the http(s) URL `path` starts (its '?'); NULL when it has none,
 *  or only SHARC__URL_QUERY_MARK, or `path` is no http(s) URL. */
const char *sharc__remote_query(const char *path);

/** `path` as it is shown and kept: its query string (sharc__remote_query()) replaced by
 *  SHARC__URL_QUERY_MARK. A new string (sharc__free()), NULL when out of memory. */
char *sharc__remote_shown(sharc__ctx *ctx, const char *path);

/**
 * Keep the whole URL of the shown URL `shown` (one that ends with SHARC__URL_QUERY_MARK;
 * another is left alone): `shown` less the mark, then `query` (from its '?'). Requests for
 * `shown` (sharc__remote_open(), sharc__remote_read_range()) go to that URL, in every
 * handle of the process; the same URL kept again with another query (signed again) uses the
 * latest.
 * @return 0, or SHARC_ERR(ENOMEM) with the message naming `shown`
 */
int sharc__remote_keep_query(sharc__ctx *ctx, const char *shown, const char *query);

/** 1 when `path` names a remote shard: s3://, http://, https:// or pipe:. */
int sharc__is_remote(const char *path);

/** 1 when `path` is a remote path that names a directory-like prefix: an s3:// URL that
 *  ends with '/' or names a bucket only. */
int sharc__remote_is_prefix(const char *path);

/**
 * Refuse a URL that carries credentials (a user name or password before the host); the
 * message shows it with them replaced by "***".
 * @return 0, or SHARC_ERR(EINVAL) with the message in ctx
 */
int sharc__remote_check_path(sharc__ctx *ctx, const char *path);

/**
 * Start streaming `path` (sharc__is_remote()).
 * @param out receives the stream, read with sharc__remote_read() and closed with
 *            sharc__remote_close()
 * @return 0, or SHARC_ERR(ENOMEM)/SHARC_ERR_IO (cannot start a thread or the command) with
 *         the message naming `path`
 */
int sharc__remote_open(sharc__remote **out, sharc__ctx *ctx, const char *path);

/**
 * Take the stream's next bytes, up to `n` (n > 0), into `dst`, waiting for them.
 * @param wait_ms the longest wait, or -1 for no limit
 * @return the bytes taken; 0 at the end of the stream (then ask sharc__remote_end() whether
 *         it was whole); -1 with errno ETIMEDOUT when wait_ms passed with none, or a
 *         command's pipe's read error in errno
 */
ssize_t sharc__remote_read(sharc__remote *r, void *dst, size_t n, int wait_ms);

/** 1 when the stream's bytes can be taken in place (sharc__remote_peek): HTTP(S) and S3,
 *  whose bytes wait in the stream's ring, not a command. */
int sharc__remote_can_peek(const sharc__remote *r);

/**
 * sharc__remote_read() without a copy, for sharc__remote_can_peek() streams: *p points at
 * the stream's next bytes where they wait (io/ring.h, sharc__ring_peek), until
 * sharc__remote_consume() gives them back, which must come before the next read or peek.
 * @return as sharc__remote_read()
 */
ssize_t sharc__remote_peek(sharc__remote *r, const void **p, size_t n, int wait_ms);

/** Give back the first `n` bytes the last sharc__remote_peek() pointed at. */
void sharc__remote_consume(sharc__remote *r, size_t n);

/**
 * After sharc__remote_read() (or _peek) gave 0: whether the stream was delivered whole. Waits for
 * the transfer's thread or the command to end.
 * @param msg receives the reason on failure, without the path (which the caller's message
 *            names): the HTTP status and its meaning, the transport's error and the retries
 *            made; the command's exit status or signal
 * @return 0, SHARC_ERR_IO (transfer failed after its retries, command failed),
 *         SHARC_ERR(EACCES) (401/403), SHARC_ERR(ENOENT) (404)
 */
int sharc__remote_end(sharc__remote *r, char *msg, size_t cap);

/** 1 when the stream can be restarted at another byte (sharc__remote_seek): HTTP(S) and S3,
 *  not a command. */
int sharc__remote_can_seek(const sharc__remote *r);

/**
 * Stop the stream's transfer and start another at byte `to` of the object (Range: bytes=N-,
 * If-Match on the ETag of the first answer), so that the bytes between are not downloaded.
 * The bytes the old transfer had delivered but the reader had not read are dropped: `from`
 * is the byte the reader is at. When `to` is at or past the object's end (as its first
 * answer gave it), the new transfer starts at `from` instead, so that the reader meets the
 * object's end where it is. Only for sharc__remote_can_seek() streams, from the reader's
 * thread; a transfer that then fails is reported by sharc__remote_end() as always.
 * @param at receives where the new transfer starts: `to` or `from`
 * @return 0, or SHARC_ERR(EAGAIN) (no thread) with the message naming the URL
 */
int sharc__remote_seek(sharc__remote *r, sharc__ctx *ctx, uint64_t from, uint64_t to, uint64_t *at);

/** The identity of the object a stream reads, from the ETag of its answers (hashed; 0 when
 *  there was none yet, or for a command): what sharc__remote_read_range() checks a member's
 *  object against. */
uint64_t sharc__remote_object_id(const sharc__remote *r);

/** The identity sharc__remote_object_id() gives for the ETag `etag` ("" gives 0). */
uint64_t sharc__remote_etag_id(const char *etag);

/** What ranged reads of one thread share: libcurl's handle, whose connections stay open
 *  between reads (no new TCP and TLS handshake per read). Not thread-safe. */
typedef struct sharc__remote_conn sharc__remote_conn;

/** Close the connections of `*conn` and free it; NULL-safe, sets *conn to NULL. */
void sharc__remote_conn_free(sharc__remote_conn **conn);

/**
 * Read bytes [at, at + n) of the object `path` (http(s):// or s3://) into `dst`, in the
 * calling thread: one request (Range: bytes=at-(at+n-1)), retried and resumed like a stream
 * (settings retries and timeout_ms of ctx). An answer that ignores the range (200) is read
 * up to the range's end and dropped before it.
 * @param conn the calling thread's connections, made on first use (*conn NULL) and kept
 *             for the next reads; NULL for a connection of this read's own
 * @param etag in: the ETag the object must still have (If-Match; a replaced object answers
 *             412), or "" for any; out: the ETag of the answer ("" when it has more than
 *             etag_cap - 1 bytes). Room for `etag_cap` bytes (SHARC__NET_ETAG_MAX).
 * @return 0; SHARC_ERR(EACCES) (401/403), SHARC_ERR(ENOENT) (404), SHARC_ERR_IO (412, a range
 *         not satisfiable, failures after the retries), SHARC_ERR(EINVAL) (a URL with
 *         credentials), SHARC_ERR(ENOMEM); the message names the URL and the byte range
 */
int sharc__remote_read_range(sharc__ctx *ctx, sharc__remote_conn **conn, const char *path,
                             uint64_t at, size_t n, uint8_t *dst, char *etag, size_t etag_cap);

/** Stop the transfer or the command (if still running), release everything, and add the
 *  stream's bytes and retries to the counters of `ctx` (sharc__ctx_net()). NULL-safe; sets
 *  *r to NULL. */
void sharc__remote_close(sharc__remote **r, sharc__ctx *ctx);

/**
 * Append the objects under the prefix `url` (sharc__remote_is_prefix()) to `out` as
 * s3:// URLs, sorted; the keys under deeper "directories" are named in a warning and counted
 * in *ignored, except NeMo's sharded_manifests/ when `recurse_manifests`, whose objects are
 * listed too. ListObjectsV2, page by page.
 * @return 0, or the failure naming `url`: SHARC_ERR(EACCES), SHARC_ERR(ENOENT) (no such
 *         bucket), SHARC_ERR_IO, SHARC_ERR(ENOMEM)
 */
int sharc__remote_list(sharc__ctx *ctx, const char *url, sharc__strs *out, int recurse_manifests,
                       size_t *ignored);

/**
 * Parse one ListObjectsV2 page (`n` bytes of XML, NUL-terminated) of `bucket`: append its
 * objects to `keys` as s3://bucket/key (hidden names and keys ending in '/' left out), its
 * common prefixes ("subdirectories", as the keys spell them) to `dirs`, and set *token to
 * its NextContinuationToken when the page says it is truncated (else NULL; the caller frees
 * it with sharc__free()). The predefined entities and character references to ASCII are
 * decoded; the parse is by tags, not a full XML parser, which S3's fixed layout allows.
 * @return 0; SHARC_ERR_IO for an object without a key, or a truncated page without a token;
 *         SHARC_ERR(ENOMEM)
 */
int sharc__s3_parse_list(sharc__ctx *ctx, const char *xml, size_t n, const char *bucket,
                         sharc__strs *keys, sharc__strs *dirs, char **token);

/** What one listing has read, so that a server that lists forever is stopped: the
 *  continuation tokens given (hashed, with the prefix), the pages and objects read, and the
 *  most of each (SHARC__NET_LIST_MAX_PAGES, SHARC__NET_LIST_MAX_KEYS; set by the caller). */
typedef struct sharc__s3_list_guard {
    uint64_t *seen; ///< open addressing, 0 for a free slot
    size_t cap, n;
    size_t pages, keys, max_pages, max_keys;
} sharc__s3_list_guard;

/**
 * Count a listing page of `prefix` that gave `keys` objects and the continuation token
 * `token` (NULL on the last page).
 * @return 0; SHARC_ERR_IO for a token given before (tokens that cycle: A, B, A ...), or past
 *         max_pages or max_keys, with the message (without the URL, which the caller's
 *         names); SHARC_ERR(ENOMEM)
 */
int sharc__s3_list_guard_page(sharc__ctx *ctx, sharc__s3_list_guard *g, const char *prefix,
                              const char *token, size_t keys);

/** Free what `g` holds. */
void sharc__s3_list_guard_free(sharc__ctx *ctx, sharc__s3_list_guard *g);

#endif /* SHARC_SRC_REMOTE_H */

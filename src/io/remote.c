#include "io/remote_impl.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/wait.h>
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
    const char *q = sharc__remote_query(path);
    const int rest = (int)(q ? q - user : (ptrdiff_t)strlen(user));
    return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                            "%.*s***%.*s%s: a URL with a user name or password is refused, so "
                            "that credentials never appear in messages or saved states: give "
                            "them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                            (int)(a - path), path, rest < 1000 ? rest : 1000, user,
                            q ? SHARC__URL_QUERY_MARK : "");
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
    wipe_free(ctx, r->url); /* a presigned URL's query is a credential */
    sharc__free(ctx, r->sigv4);
    sharc__ring_free(&r->ring, ctx);
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
    r->rfd = -1;
    r->total = UINT64_MAX;
    r->range_end = UINT64_MAX;
    r->retries = ctx->net_retries_1 ? ctx->net_retries_1 - 1 : SHARC__NET_RETRIES;
    r->timeout_ms = ctx->net_timeout_ms ? ctx->net_timeout_ms : SHARC__NET_TIMEOUT_MS;
    atomic_init(&r->cancel, 0);
    atomic_init(&r->bytes, 0);
    atomic_init(&r->n_retries, 0);
    atomic_init(&r->etag_id, 0);
    *out = r;
    if (!(r->name = sharc__remote_shown(ctx, path)))
        return SHARC_ERR(ENOMEM);
    return 0;
}

/* Make `r` a request for http(s):// `path` or the object s3:// `path`. */
int sharc__remote_http_setup(sharc__ctx *ctx, sharc__remote *r, const char *path)
{
    if (strncmp(path, "s3://", 5) != 0)
        return sharc__remote_full_url(ctx, path, &r->url);
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

static void *transfer_thread(void *arg)
{
    sharc__remote *r = arg;
    sharc__remote_transfer(r);
    /* The end for the reader, which then asks sharc__remote_end() how it went. */
    sharc__ring_close_write(&r->ring);
    return NULL;
}

/* Start r's transfer from byte r->delivered on, into its emptied ring. */
static int start_transfer(sharc__remote *r, sharc__ctx *ctx, const char *path)
{
    if (!r->ring.data && sharc__ring_init(&r->ring, ctx, SHARC__NET_BUFFER) < 0)
        return sharc__set_error(ctx, SHARC_ERR(ENOMEM), "%s: out of memory", path);
    sharc__ring_reset(&r->ring);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&r->thread, NULL, transfer_thread, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        /* A reader that reads on meets the end of a stream that failed. */
        r->rc = SHARC_ERR(EAGAIN);
        snprintf(r->msg, sizeof r->msg, "cannot start a thread: %s", strerror(e));
        sharc__ring_close_write(&r->ring);
        return sharc__set_error(ctx, SHARC_ERR(EAGAIN), "%s: cannot start a thread: %s", path,
                                strerror(e));
    }
    r->started = 1;
    return 0;
}

static int http_open(sharc__remote *r, sharc__ctx *ctx, const char *path)
{
    int rc = sharc__remote_http_setup(ctx, r, path);
    if (rc < 0)
        return rc == SHARC_ERR(ENOMEM) ? sharc__set_error(ctx, rc, "%s: out of memory", r->name)
                                       : rc;
    if (!sharc__remote_curl_ready())
        return sharc__set_error(ctx, SHARC_ERR_IO, "%s: libcurl cannot be initialised", r->name);
    return start_transfer(r, ctx, r->name);
}

int sharc__remote_can_seek(const sharc__remote *r)
{
    return r->kind == KIND_HTTP;
}

/* Stop r's transfer and wait for its thread; nothing runs on r afterwards. */
static void stop_transfer(sharc__remote *r)
{
    atomic_store(&r->cancel, 1);
    if (r->ring.data)
        sharc__ring_close_read(&r->ring); /* a transfer waiting for room fails */
    if (r->started)
        pthread_join(r->thread, NULL);
    r->started = 0;
}

int sharc__remote_seek(sharc__remote *r, sharc__ctx *ctx, uint64_t from, uint64_t to, uint64_t *at)
{
    stop_transfer(r);
    /* Past the object's end (a tar cut short), the bytes from `from` on are read instead,
     * so that the reader meets the end where it is. The thread is joined: `total` is ours. */
    *at = r->total != UINT64_MAX && to >= r->total ? from : to;
    atomic_store(&r->cancel, 0);
    r->delivered = *at;
    r->rc = 0;
    r->msg[0] = 0;
    return start_transfer(r, ctx, r->name);
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

/* ---- pipe: ---- */

static int pipe_open(sharc__remote *r, sharc__ctx *ctx, const char *path)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return sharc__set_error(ctx, SHARC_ERR_IO, "%s: cannot make a pipe: %s", path,
                                strerror(errno));
    /* Fewer switches between the command and the reader (capped by
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

int sharc__remote_open(sharc__remote **out, sharc__ctx *ctx, const char *path)
{
    sharc__remote *r = NULL;
    const int kind = strncmp(path, "pipe:", 5) == 0 ? KIND_PIPE : KIND_HTTP;
    *out = NULL;
    int rc = sharc__remote_check_path(ctx, path);
    if (rc == 0 && (rc = sharc__remote_new(&r, ctx, path, kind)) < 0)
        rc = sharc__set_error(ctx, rc, "out of memory");
    if (rc == 0)
        rc = kind == KIND_PIPE ? pipe_open(r, ctx, path) : http_open(r, ctx, path);
    if (rc < 0) {
        sharc__remote_close(&r, ctx);
        return sharc__fail_data(ctx, rc, "%s", ctx->error);
    }
    *out = r;
    return 0;
}

ssize_t sharc__remote_read(sharc__remote *r, void *dst, size_t n, int wait_ms)
{
    if (r->kind == KIND_HTTP) {
        ssize_t k = sharc__ring_read(&r->ring, dst, n, wait_ms);
        if (k < 0)
            errno = ETIMEDOUT;
        return k;
    }
    if (wait_ms >= 0) {
        struct pollfd pfd = {.fd = r->rfd, .events = POLLIN};
        int ready;
        while ((ready = poll(&pfd, 1, wait_ms)) < 0 && errno == EINTR)
            ;
        if (ready == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
    ssize_t k;
    while ((k = read(r->rfd, dst, n)) < 0 && errno == EINTR)
        ;
    return k;
}

int sharc__remote_can_peek(const sharc__remote *r)
{
    return r->kind == KIND_HTTP;
}

ssize_t sharc__remote_peek(sharc__remote *r, const void **p, size_t n, int wait_ms)
{
    ssize_t k = sharc__ring_peek(&r->ring, p, n, wait_ms);
    if (k < 0)
        errno = ETIMEDOUT;
    return k;
}

void sharc__remote_consume(sharc__remote *r, size_t n)
{
    sharc__ring_consume(&r->ring, n);
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

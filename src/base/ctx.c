#include "base/ctx.h"
#include "sharc/version.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

double sharc__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void sharc__deadline_in_ms(struct timespec *out, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, out);
    out->tv_sec += ms / 1000;
    out->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (out->tv_nsec >= 1000000000L) {
        out->tv_sec++;
        out->tv_nsec -= 1000000000L;
    }
}

static void *default_alloc(void *cookie, size_t size, size_t align)
{
    (void)cookie;
    void *p = NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        return NULL;
    return p;
}

static void default_free(void *cookie, void *ptr)
{
    (void)cookie;
    free(ptr);
}

static void default_log(void *cookie, sharc_log_level level, const char *message)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    (void)cookie;
    /* One fprintf per message so lines from worker threads do not interleave. */
    fprintf(stderr, "sharc: %s: %s\n", names[level <= SHARC_LOG_DEBUG ? level : 3], message);
}

/* The memory sharc_reader_expand_path() returns comes from malloc (it has no handle, hence no
 * allocator), so free() releases it; callers go through here so that this may change. */
void sharc_free(void *p)
{
    free(p);
}

void sharc_default_allocator(sharc_allocator *a)
{
    a->cookie = NULL;
    a->alloc = default_alloc;
    a->free = default_free;
}

void sharc_default_logger(sharc_logger *log)
{
    log->cookie = NULL;
    log->callback = default_log;
    log->level = SHARC_LOG_WARN;
}

int sharc__check_struct_size(const char *name, uint32_t size, size_t known, const char *filler)
{
    if (size == known)
        return 0;
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    if (size == 0)
        return sharc__fail(&ctx, SHARC_ERR(EINVAL),
                           "%s.struct_size is 0: fill the settings with %s()", name, filler);
    return sharc__fail(&ctx, SHARC_ERR(EINVAL),
                       "%s.struct_size is %" PRIu32 ", but this library (sharc %s) knows only %zu: "
                       "build with the sharc headers of the library the program runs with, and "
                       "fill the settings with %s()",
                       name, size, SHARC_VERSION_STRING, known, filler);
}

void sharc__ctx_share_settings(sharc__ctx *dst, sharc__ctx *src)
{
    dst->net_retries_1 = src->net_retries_1;
    dst->net_timeout_ms = src->net_timeout_ms;
    dst->net_shared = sharc__ctx_net(src);
}

void sharc__ctx_set_net(sharc__ctx *ctx, uint32_t retries, uint32_t timeout_ms)
{
    ctx->net_retries_1 = retries + 1;
    ctx->net_timeout_ms = timeout_ms;
}

void sharc__ctx_init(sharc__ctx *ctx, const sharc_allocator *alloc, const sharc_logger *log)
{
    memset(ctx, 0, sizeof *ctx);
    if (alloc && alloc->alloc && alloc->free)
        ctx->alloc = *alloc;
    else
        sharc_default_allocator(&ctx->alloc);
    if (log)
        ctx->log = *log;
    else
        sharc_default_logger(&ctx->log);
}

void *sharc__malloc_aligned(sharc__ctx *ctx, size_t size, size_t align)
{
    return ctx->alloc.alloc(ctx->alloc.cookie, size, align);
}

/*
 * Measured on WAV batches, 2 threads: the decode threads spent 8-14% less CPU per cut with
 * the batch payloads on huge pages (a 13 MB payload spans 3200 4 KiB pages, more than the
 * TLB holds, so each page written cost a page walk).
 */
void *sharc__malloc_bulk(sharc__ctx *ctx, size_t size, size_t align)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (ctx->alloc.alloc == default_alloc && size >= 2 * SHARC__HUGE_PAGE &&
        align <= SHARC__HUGE_PAGE) {
        void *p = default_alloc(NULL, size, SHARC__HUGE_PAGE);
        /* A hint: where huge pages are off or none is free, 4 KiB pages back it. */
        if (p)
            (void)madvise(p, size, MADV_HUGEPAGE);
        return p;
    }
#endif
    return sharc__malloc_aligned(ctx, size, align);
}

void *sharc__malloc(sharc__ctx *ctx, size_t size)
{
    return ctx->alloc.alloc(ctx->alloc.cookie, size, 16);
}

void *sharc__calloc(sharc__ctx *ctx, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = sharc__malloc(ctx, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *sharc__realloc(sharc__ctx *ctx, void *ptr, size_t old_size, size_t new_size)
{
    void *p = sharc__malloc(ctx, new_size);
    if (!p)
        return NULL;
    if (ptr) {
        memcpy(p, ptr, old_size < new_size ? old_size : new_size);
        sharc__free(ctx, ptr);
    }
    return p;
}

void sharc__free(sharc__ctx *ctx, void *ptr)
{
    if (ptr)
        ctx->alloc.free(ctx->alloc.cookie, ptr);
}

char *sharc__strndup(sharc__ctx *ctx, const char *s, size_t n)
{
    char *p = sharc__malloc(ctx, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

char *sharc__strdup(sharc__ctx *ctx, const char *s)
{
    return s ? sharc__strndup(ctx, s, strlen(s)) : NULL;
}

/* Messages are formatted here, so that the callback takes a plain string: no binding has to
 * implement a va_list. A longer message is cut at SHARC__LOG_MAX - 1 bytes. */
static void vlog(sharc__ctx *ctx, sharc_log_level level, const char *fmt, va_list ap)
{
    if (!ctx->log.callback || level > ctx->log.level)
        return;
    char line[SHARC__LOG_MAX];
    vsnprintf(line, sizeof line, fmt, ap);
    ctx->log.callback(ctx->log.cookie, level, line);
}

void sharc__log(sharc__ctx *ctx, sharc_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(ctx, level, fmt, ap);
    va_end(ap);
}

int sharc__set_error(sharc__ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    ctx->error_logged = 0;
    return code;
}

int sharc__fail(sharc__ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    sharc__log_error(ctx, SHARC_LOG_ERROR);
    return code;
}

int sharc__fail_data(sharc__ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    ctx->error_logged = 0;
    sharc__log(ctx, SHARC_LOG_DEBUG, "%s", ctx->error);
    return code;
}

void sharc__log_error(sharc__ctx *ctx, sharc_log_level level)
{
    sharc__log(ctx, level, "%s", ctx->error);
    ctx->error_logged = 1;
}

void sharc__log_error_once(sharc__ctx *ctx)
{
    if (!ctx->error_logged && ctx->error[0])
        sharc__log_error(ctx, SHARC_LOG_ERROR);
}

static void vwrap(sharc__ctx *ctx, const char *fmt, va_list ap)
{
    char inner[SHARC__ERRLEN];
    char prefix[SHARC__ERRLEN];
    memcpy(inner, ctx->error, sizeof inner);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    size_t np = strlen(prefix), ni = strlen(inner), cap = sizeof ctx->error - 1;
    np = np < cap ? np : cap;
    memcpy(ctx->error, prefix, np);
    size_t n = np;
    if (n + 2 <= cap) {
        memcpy(ctx->error + n, ": ", 2);
        n += 2;
    }
    ni = ni < cap - n ? ni : cap - n;
    memcpy(ctx->error + n, inner, ni);
    ctx->error[n + ni] = 0;
}

int sharc__fail_wrap(sharc__ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwrap(ctx, fmt, ap);
    va_end(ap);
    sharc__log_error(ctx, SHARC_LOG_ERROR);
    return code;
}

int sharc__wrap_error(sharc__ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwrap(ctx, fmt, ap);
    va_end(ap);
    ctx->error_logged = 0;
    return code;
}

/*
 * The context every handle carries: allocator, logger and the handle's last error text.
 */
#ifndef SHARC_SRC_CTX_H
#define SHARC_SRC_CTX_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

#include "sharc/common.h"

#define SHARC__ERRLEN 1024
/** Longest log message passed to a sharc_logger callback, NUL included. */
#define SHARC__LOG_MAX 2048

/** What remote shards read through a handle cost, counted by its threads at once: bytes
 *  received, transfers retried, nanoseconds the readers waited for their bytes. */
#ifdef __cplusplus
/* The CUDA sources, compiled as C++, pass contexts through and never touch these counters:
 * a plain integer of the same size and alignment keeps the struct's layout. */
typedef uint64_t sharc__atomic_u64;
#else
typedef _Atomic uint64_t sharc__atomic_u64;
#endif
typedef struct sharc__net_counters {
    sharc__atomic_u64 bytes, retries, wait_ns;
} sharc__net_counters;

typedef struct sharc__ctx {
    sharc_allocator alloc;
    sharc_logger log;
    char error[SHARC__ERRLEN]; ///< last error message of the owning handle
    int error_logged;          ///< `error` went to the log at WARN or ERROR
    double io_seconds;         ///< time spent in read() by streams using this context
    /** Remote shards (io/remote.h): retries of a failed transfer plus one (0: the default,
     *  SHARC__NET_RETRIES) and the stall timeout in ms (0: SHARC__NET_TIMEOUT_MS), set from
     *  the reader's settings and copied into the contexts of its threads. */
    uint32_t net_retries_1, net_timeout_ms;
    /** What remote shards cost the handle (sharc__ctx_net()): its own counters, or those of
     *  the context whose settings it shares (sharc__ctx_share_settings()), which outlives it. */
    sharc__net_counters net_own, *net_shared;
} sharc__ctx;

/** The counters of remote shards that `ctx` counts into. */
static inline sharc__net_counters *sharc__ctx_net(sharc__ctx *ctx)
{
    return ctx->net_shared ? ctx->net_shared : &ctx->net_own;
}

/** Initialise from (possibly zeroed) user settings: NULL callbacks in alloc mean default. */
void sharc__ctx_init(sharc__ctx *ctx, const sharc_allocator *alloc, const sharc_logger *log);

/** Give `dst` the settings of `src` that reach below the handle (net_retries_1,
 *  net_timeout_ms), and make it count into the network counters of `src`, which must
 *  outlive it: for the contexts of a handle's threads. */
void sharc__ctx_share_settings(sharc__ctx *dst, sharc__ctx *src);

/** Set the remote-shard settings from a reader's `retries` and `timeout_ms`. */
void sharc__ctx_set_net(sharc__ctx *ctx, uint32_t retries, uint32_t timeout_ms);

void *sharc__malloc(sharc__ctx *ctx, size_t size);
void *sharc__calloc(sharc__ctx *ctx, size_t n, size_t size);
void *sharc__malloc_aligned(sharc__ctx *ctx, size_t size, size_t align);
/**
 * A large buffer that is written across in long streams (batch payloads). With the default
 * allocator and at least SHARC__HUGE_PAGE * 2 bytes, it starts on a huge-page boundary and
 * is marked for transparent huge pages (madvise MADV_HUGEPAGE, Linux) where the system
 * allows them, so writing rows across it does not miss the TLB at every 4 KiB page.
 * Otherwise, and with a user's allocator, as sharc__malloc_aligned(). Freed by sharc__free().
 */
void *sharc__malloc_bulk(sharc__ctx *ctx, size_t size, size_t align);
#define SHARC__HUGE_PAGE ((size_t)2 << 20) ///< x86-64's, and arm64's with 4 KiB pages
void *sharc__realloc(sharc__ctx *ctx, void *ptr, size_t old_size, size_t new_size);
void sharc__free(sharc__ctx *ctx, void *ptr);
char *sharc__strdup(sharc__ctx *ctx, const char *s);
char *sharc__strndup(sharc__ctx *ctx, const char *s, size_t n);

/**
 * Check the struct_size of a public settings struct (the rule is in sharc/common.h) taken by
 * an open function: 0 when it is `known`, else SHARC_ERR(EINVAL), logged through the default
 * logger (stderr), since no other field of a struct of unknown layout can be trusted:
 * "<name>.struct_size is 0: fill the settings with <filler>()".
 */
int sharc__check_struct_size(const char *name, uint32_t size, size_t known, const char *filler);

/** Monotonic clock in seconds, for stage timings. */
double sharc__now_s(void);

/** The CLOCK_MONOTONIC time `ms` milliseconds from now, for pthread_cond_timedwait on a
 *  condition variable made with that clock. */
void sharc__deadline_in_ms(struct timespec *out, int ms);

void sharc__log(sharc__ctx *ctx, sharc_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * Record `code` with a formatted message as the handle's last error, log it at ERROR
 * level, and return `code` (so callers write `return sharc__fail(ctx, ...)`).
 */
int sharc__fail(sharc__ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * Prefix the current error text with a formatted context ("<prefix>: <previous text>"),
 * log it, and return `code`. Used where a lower layer's message gains file and cut names.
 */
int sharc__fail_wrap(sharc__ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Like sharc__fail_wrap but only sets the text (no log). */
int sharc__wrap_error(sharc__ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Like sharc__fail but only sets the text (no log): for errors the caller may handle. */
int sharc__set_error(sharc__ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * Like sharc__fail for a problem with the data being read (an unreadable, corrupt or
 * truncated shard, an undecodable member), at the boundary of the dependency that found
 * it: the text is logged there at DEBUG only. The reader reports it once, with the file,
 * member and cut, at the level its error policy gives it (ERROR when it stops, WARN when it
 * skips), so one problem is one line in the log.
 */
int sharc__fail_data(sharc__ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Log the current error text at `level` (WARN or ERROR), as the report of a problem. */
void sharc__log_error(sharc__ctx *ctx, sharc_log_level level);

/**
 * Log the current error text at ERROR unless it already went to the log at WARN or ERROR:
 * for errors leaving the library through a call whose handle may not survive (open).
 */
void sharc__log_error_once(sharc__ctx *ctx);

#endif /* SHARC_SRC_CTX_H */

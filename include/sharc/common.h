/*
 * sharc: error codes, logging and allocation shared by every public handle.
 */
#ifndef SHARC_COMMON_H
#define SHARC_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SHARC_API __declspec(dllexport)
#elif defined(__GNUC__)
#define SHARC_API __attribute__((visibility("default")))
#else
#define SHARC_API
#endif

/**
 * Generic failures are negative POSIX errno values: SHARC_ERR(ENOMEM).
 */
#define SHARC_ERR(e) (-(e))

/**
 * sharc's own result codes. X(name, value, message). SHARC_END (positive) is not an
 * error: it says a stream has ended cleanly.
 */
#define SHARC_ERROR_MAP(X)                                                                         \
    X(END, 1, "end of stream")                                                                     \
    X(CORRUPT, -1001, "corrupt or truncated archive")                                              \
    X(FORMAT, -1002, "invalid shard layout or metadata")                                           \
    X(MISMATCH, -1003, "fields of a shard do not pair up")                                         \
    X(DECODE, -1004, "audio could not be decoded")                                                 \
    X(AUDIO_MISMATCH, -1005, "decoded audio does not match its metadata")                          \
    X(TOO_LARGE, -1006, "size exceeds the configured cap")                                         \
    X(JSON, -1007, "invalid JSON")                                                                 \
    X(REMOTE, -1008, "error reported by another rank")                                             \
    X(STATE, -1009, "invalid or incompatible reader state")                                        \
    X(FRAME, -1010, "malformed frame")                                                             \
    X(MPI, -1011, "MPI error")                                                                     \
    X(NCCL, -1012, "NCCL error")                                                                   \
    X(CUDA, -1013, "CUDA error")                                                                   \
    X(TIMEOUT, -1014, "operation timed out")                                                       \
    X(BACKPRESSURE, -1015, "too many batches held by the caller")                                  \
    X(UNSUPPORTED, -1016, "unsupported feature or input")                                          \
    X(IO, -1017, "I/O error")                                                                      \
    X(SETTINGS, -1018, "settings differ between the ranks of a broadcast group")

enum sharc_error {
#define SHARC_X_(name, value, msg) SHARC_ERR_##name = value,
    SHARC_ERROR_MAP(SHARC_X_)
#undef SHARC_X_
};

/** A clean end of stream (returned by the `next` functions). */
#define SHARC_END SHARC_ERR_END

/**
 * Describe a result code: sharc's own codes, negative errno values and 0.
 * @return a static string; never NULL. Any thread may call it.
 */
SHARC_API const char *sharc_strerror(int code);

/**
 * The symbolic name of a result code ("SHARC_ERR_CORRUPT", "ENOMEM", "OK").
 * @return a static string; never NULL. Any thread may call it.
 */
SHARC_API const char *sharc_err_name(int code);

/** Log levels, most severe first. */
typedef enum sharc_log_level {
    SHARC_LOG_ERROR = 0,
    SHARC_LOG_WARN = 1,
    SHARC_LOG_INFO = 2,
    SHARC_LOG_DEBUG = 3,
} sharc_log_level;

/**
 * Log sink. The callback may be called from the library's worker threads, possibly
 * concurrently; it must be thread-safe. A NULL callback turns logging off.
 */
typedef struct sharc_logger {
    void *cookie; ///< passed to callback (default NULL)
    void (*callback)(void *cookie, sharc_log_level level, const char *fmt,
                     va_list ap); ///< default: prints "sharc: <level>: <text>" to stderr
    sharc_log_level level;        ///< messages above this level are dropped (default WARN)
} sharc_logger;

/**
 * Host allocator used for every allocation a handle makes. Both callbacks must be
 * thread-safe. alloc returns memory aligned to at least `align` (a power of two), or NULL.
 */
typedef struct sharc_allocator {
    void *cookie;                                            ///< passed to both callbacks
    void *(*alloc)(void *cookie, size_t size, size_t align); ///< default: aligned malloc
    void (*free)(void *cookie, void *ptr);                   ///< default: free
} sharc_allocator;

/** Fill `log` with the default logger (stderr, level WARN). */
SHARC_API void sharc_default_logger(sharc_logger *log);

/** Fill `a` with the default allocator (posix_memalign/free). */
SHARC_API void sharc_default_allocator(sharc_allocator *a);

/**
 * Where the first byte of `s` (n bytes) that is not well-formed UTF-8 is, as Python's strict
 * decoder (and so Lhotse and NeMo reading metadata) judges it: no overlong forms, no
 * surrogates (U+D800..U+DFFF), no code points past U+10FFFF and no sequence cut short by the
 * end. sharc refuses metadata with such a byte, naming this offset. NUL bytes are valid.
 * @return n when all of `s` is valid, else the offset of the first bad byte. Any thread may
 *         call it; `s` may be NULL when n is 0.
 */
SHARC_API size_t sharc_utf8_invalid_at(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_COMMON_H */

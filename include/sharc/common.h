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

/*
 * How the settings structs grow without breaking built programs (docs/design.md, "A binary
 * interface that can grow"):
 *
 * - Every settings struct (sharc_reader_settings, sharc_sampler_settings,
 *   sharc_loader_settings, sharc_transport_settings) starts with `uint32_t struct_size`,
 *   which its *_default_settings() sets to sizeof the struct; the functions that take one
 *   refuse a struct_size of 0 ("...: fill the settings with ..._default_settings()") or any
 *   size the library does not know, with SHARC_ERR(EINVAL).
 * - Every settings struct ends with a reserved tail (`reserved[]`, must be zero). A new field
 *   is carved from the front of that tail, which shrinks by the same number of bytes, so
 *   sizeof never changes and no field moves, at any level of nesting: the sampler settings
 *   nested in the reader settings, and the reader settings nested in the loader settings,
 *   keep their size and offsets whatever is added to any of them. A new field's zero value
 *   means the behaviour from before it existed.
 * - tests/test_abi.c records the offset of every field and the size of every public struct;
 *   a change that moves a field or changes a size fails it. Using up a tail is an ABI break,
 *   made only with a new major version (and soname).
 * - Arrays indexed by a growing enum have a fixed capacity (SHARC_PROBLEM_CAPACITY), and
 *   sharc_reader_stats, which the library fills, has a reserved tail too.
 */

/**
 * Generic failures are negative POSIX errno values: SHARC_ERR(ENOMEM).
 */
#define SHARC_ERR(e) (-(e))

/**
 * A clean end of stream, returned by the `next` functions: a positive result, not an error,
 * so it stays out of enum sharc_error. sharc_strerror(SHARC_END) is "end of stream" and
 * sharc_err_name(SHARC_END) is "SHARC_END".
 */
#define SHARC_END 1

/**
 * sharc's own error codes. X(name, value, message); every value is negative.
 */
#define SHARC_ERROR_MAP(X)                                                                         \
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

/** The former name of SHARC_END, kept so that older programs still compile. */
#define SHARC_ERR_END SHARC_END

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
 * Log sink. The callback receives the message formatted (no trailing newline), valid only
 * during the call, so that a binding without C varargs (ctypes, cffi, Rust) can implement it.
 * It may be called from the library's worker threads, possibly concurrently; it must be
 * thread-safe. A NULL callback turns logging off.
 */
typedef struct sharc_logger {
    void *cookie; ///< passed to callback (default NULL)
    /** Receives each message (default: prints "sharc: <level>: <message>" to stderr). */
    void (*callback)(void *cookie, sharc_log_level level, const char *message);
    sharc_log_level level; ///< messages above this level are dropped (default WARN)
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

/**
 * Free memory that a sharc function returned to the caller and documented as released with
 * sharc_free() (the paths of sharc_reader_expand_path()). NULL-safe. Any thread.
 */
SHARC_API void sharc_free(void *p);

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

/* Helpers shared by the Check suites. */
#ifndef SHARC_TESTUTIL_H
#define SHARC_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "sharc/common.h"

/** Run a suite (each test forked, Check's default) and free it; the exit status for main(). */
int tu_run_suite(Suite *s);

/** Path of a file under testdata/ (from $SHARC_TESTDATA), in a static buffer per call slot. */
const char *tu_testdata(const char *rel);

/** Make a fresh temporary directory (removed at exit by the caller's rm_rf if wanted). */
char *tu_mkdtemp(void);

/** Write `n` bytes to `path`; returns 0 or -1. */
int tu_write_file(const char *path, const void *data, size_t n);

/** Read a whole file into malloc'd memory; returns NULL on failure. */
uint8_t *tu_read_file(const char *path, size_t *n);

/** Run a shell command (for fixtures made with tar/gzip/zstd); returns its exit status. */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How many file descriptors this process has open. */
int tu_open_fds(void);

/* Bytes this process has read with read() and pread() so far (/proc/self/io rchar); 0 when
 * it cannot be known. */
unsigned long long tu_bytes_read(void);

/** An allocator (posix_memalign/free) that counts its allocations in *counter. */
sharc_allocator tu_counting_allocator(int *counter);

/** free() with the allocator callback's signature, for tests' own allocators. */
void tu_free(void *cookie, void *ptr);

/** Remove a directory tree. */
void tu_rm_rf(const char *path);

#endif

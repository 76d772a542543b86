/* Helpers shared by the Check suites. */
#ifndef SHARC_TESTUTIL_H
#define SHARC_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "sharc/common.h"
#include "sharc/reader.h"

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

/** The resume state of a reader of `s` after `batches` batches, in *size bytes (free it). */
void *tu_state_after(const sharc_reader_settings *s, size_t batches, size_t *size);

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

/* Corpora written by sharc-gen (its shar.expected.jsonl lists the cuts in corpus order). */

/** Field `key` (a string) of cut `index`, 0-based, of the corpus in `dir`. */
void tu_expected_field(const char *dir, int index, const char *key, char *out, size_t cap);

/**
 * The longest cut of the corpus in `dir` (its index in *longest, its samples in *most) and
 * the samples of the next longest in *second. @return the number of cuts
 */
int tu_longest_cuts(const char *dir, int *longest, int64_t *most, int64_t *second);

/**
 * Give cut `index` of the Shar corpus in `dir` (`cuts_per_shard` cuts a shard) a garbage
 * FLAC body (tests/corrupt.py); its member and id go to `member` and `id`.
 */
void tu_spoil_member(const char *dir, int index, int cuts_per_shard, char member[256],
                     char id[256]);

/**
 * The status of the first batch of a reader opened on `s` (opening must succeed: a resume
 * state is checked when the pipeline starts), with the reader's error text in why[cap].
 */
int tu_first_batch_status(const sharc_reader_settings *s, char *why, size_t cap);

/** Write a resume state's checksum again (a CRC-32 in its last 8 bytes), as a forger would. */
void tu_reseal_state(uint8_t *blob, size_t size);

#endif

/*
 * Brace expansion of dataset paths, as NeMo expands `tarred_audio_filepaths`: NeMo's
 * spellings of braces mapped to braces, then Python's `braceexpand` with escape=False.
 */
#ifndef SHARC_SRC_BRACES_H
#define SHARC_SRC_BRACES_H

#include <stddef.h>

#include "base/ctx.h"

/** A growable list of strings, each owned by the list. */
typedef struct sharc__strs {
    char **items;
    size_t n, cap;
} sharc__strs;

/** Append `s` (taken over; freed on failure). SHARC_ERR(ENOMEM) when `s` is NULL. */
int sharc__strs_push(sharc__ctx *ctx, sharc__strs *l, char *s);

/** Free the strings and the list; the list is empty afterwards. */
void sharc__strs_free(sharc__ctx *ctx, sharc__strs *l);

/** The most bytes the paths of one pattern may take (with their terminating NULs). */
#define SHARC__BRACES_MAX_BYTES ((size_t)256 << 20)

/**
 * Append to `out` the paths `pattern` stands for, in the order Python's
 * `braceexpand(pattern, escape=False)` yields them (the first group varies slowest):
 * - a range `{A..B}` or `{A..B..STEP}` of integers (negative ones too) or of ASCII letters,
 *   upwards or downwards, the sign of STEP ignored and a STEP of 0 taken as 1; integers are
 *   zero-padded to the longer of A and B when either has a leading zero (`{08..10}`);
 * - a list `{a,b}`, whose items may be empty or hold groups of their own;
 * - any other group `{x}` stands for itself with its inside expanded;
 * - NeMo writes braces as `_OP_`/`_CL_`, and as (), [] or <> around a range (`(0..7)`);
 *   here brackets are braces only around a range, so that `q (v2)` and `r[1]` stay names.
 * A backslash is a character like any other (escape=False). Python reads `\d` as any
 * Unicode digit and lets a range end with a newline; here digits are ASCII and a newline is
 * not part of a range.
 * @return 0; SHARC_ERR(EINVAL) for unbalanced braces or braces nested more than 64 deep;
 *         SHARC_ERR_TOO_LARGE when the pattern stands for more than `max` paths or
 *         SHARC__BRACES_MAX_BYTES of them; SHARC_ERR(ENOMEM). The message names the pattern.
 */
int sharc__braces_expand(sharc__ctx *ctx, const char *pattern, size_t max, sharc__strs *out);

#endif

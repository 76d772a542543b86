/*
 * The elastic --resume of `sharc read` (see cli_resume.h).
 */
#include "cli_resume.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sharc/sharc.h>

#define MAX_STATES      65535
#define MAX_STATE_BYTES ((size_t)1 << 30)

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

int cli_resume_read_file(const char *path, void **data, size_t *size, char *why, size_t cap)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    const char *problem = NULL;
    *data = NULL;
    if (f == NULL || fstat(fileno(f), &sb) != 0)
        problem = strerror(errno);
    else if (!S_ISREG(sb.st_mode))
        problem = "not a regular file";
    else if (sb.st_size == 0)
        problem = "the file is empty";
    else if ((size_t)sb.st_size > MAX_STATE_BYTES)
        problem = "the file is too large for a reader state";
    else if ((*data = malloc((size_t)sb.st_size)) == NULL)
        problem = "out of memory";
    else if (fread(*data, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
        problem = ferror(f) ? strerror(errno) : "the file shrank while being read";
    if (f != NULL)
        fclose(f);
    if (problem != NULL) {
        free(*data);
        *data = NULL;
        snprintf(why, cap, "cannot read the state file %s: %s", path, problem);
        return -1;
    }
    *size = (size_t)sb.st_size;
    return 0;
}

int cli_resume_bundle(const char *base, int slot, int slots, void **blob, size_t *size, char *why,
                      size_t cap)
{
    (void)slot; /* every slot packs the same bundle; the reader takes its share */
    size_t len = strlen(base) + 16;
    char *path = malloc(len);
    if (path == NULL) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    int n = 0;
    for (;; n++) {
        snprintf(path, len, "%s.dp%d", base, n);
        if (n == MAX_STATES || !exists(path))
            break;
    }
    int rc = 0;
    int one = n == 0 && exists(base);
    if ((n == 0 && !one) || (n == slots && slots > 1) || (slots == 1 && exists(base)))
        goto done; /* the run's own file, read as before (and refused there if missing) */
    for (int k = n + 1; k <= n + 64; k++) { /* a slot's file missing between others */
        snprintf(path, len, "%s.dp%d", base, k);
        if (exists(path)) {
            snprintf(why, cap,
                     "the states of --resume %s are incomplete: %s.dp%d is missing but %s "
                     "exists",
                     base, base, n, path);
            rc = -1;
            goto done;
        }
    }
    int count = one ? 1 : n;
    void **states = calloc((size_t)count, sizeof *states);
    size_t *sizes = calloc((size_t)count, sizeof *sizes);
    rc = states && sizes ? 0 : -1;
    if (rc < 0)
        snprintf(why, cap, "out of memory");
    for (int k = 0; rc == 0 && k < count; k++) {
        if (!one)
            snprintf(path, len, "%s.dp%d", base, k);
        rc = cli_resume_read_file(one ? base : path, &states[k], &sizes[k], why, cap);
    }
    if (rc == 0) {
        sharc_reader_pack_states((const void *const *)states, sizes, (size_t)count, NULL, 0, size);
        if ((*blob = malloc(*size)) == NULL ||
            sharc_reader_pack_states((const void *const *)states, sizes, (size_t)count, *blob,
                                     *size, size) != 0) {
            snprintf(why, cap, "out of memory");
            free(*blob);
            *blob = NULL;
            rc = -1;
        } else {
            rc = 1;
        }
    }
    for (int k = 0; states && k < count; k++)
        free(states[k]);
    free(states);
    free(sizes);
done:
    free(path);
    return rc;
}

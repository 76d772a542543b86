/*
 * For fuzz targets that read shards from files: the input split into a metadata file and
 * an archive, written to a temporary directory made once per process.
 */
#ifndef SHARC_TESTS_FUZZ_FILES_H
#define SHARC_TESTS_FUZZ_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fuzz_write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(d, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

/*
 * Split `data` at its first 0xFF byte: the bytes before go to file `meta_name`, those after
 * (none without a 0xFF) to `tar_name`, both in one directory per process (/tmp/sharc-fuzz-*,
 * removed at exit; the names of the first call stand for the process).
 * Their paths go to `meta` and `tar` (128 bytes each), the first part's size to `*meta_len`.
 * @return 0, or -1 when the files could not be written
 */
static char fuzz_dir[64], fuzz_meta[128], fuzz_tar[128];

/* At exit: the two files and their directory go. */
static void fuzz_remove_files(void)
{
    unlink(fuzz_meta);
    unlink(fuzz_tar);
    rmdir(fuzz_dir);
}

static int fuzz_split_files(const uint8_t *data, size_t size, const char *meta_name,
                            const char *tar_name, char *meta, char *tar, size_t *meta_len)
{
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/sharc-fuzz-XXXXXX");
        if (!mkdtemp(fuzz_dir)) {
            fuzz_dir[0] = 0;
            return -1;
        }
        snprintf(fuzz_meta, sizeof fuzz_meta, "%s/%s", fuzz_dir, meta_name);
        snprintf(fuzz_tar, sizeof fuzz_tar, "%s/%s", fuzz_dir, tar_name);
        atexit(fuzz_remove_files);
    }
    const uint8_t *split = memchr(data, 0xFF, size);
    size_t n_meta = split ? (size_t)(split - data) : size;
    size_t n_tar = split ? size - n_meta - 1 : 0;
    memcpy(meta, fuzz_meta, sizeof fuzz_meta);
    memcpy(tar, fuzz_tar, sizeof fuzz_tar);
    *meta_len = n_meta;
    if (fuzz_write_file(meta, data, n_meta) ||
        fuzz_write_file(tar, split ? split + 1 : data, n_tar))
        return -1;
    return 0;
}

#endif /* SHARC_TESTS_FUZZ_FILES_H */

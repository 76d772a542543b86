#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "sharc/sharc.h"

const char *tu_testdata(const char *rel)
{
    static char bufs[8][4096];
    static int slot;
    const char *root = getenv("SHARC_TESTDATA");
    char *b = bufs[slot++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", root ? root : "testdata", rel);
    return b;
}

char *tu_mkdtemp(void)
{
    char tmpl[] = "/tmp/sharc-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

int tu_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

uint8_t *tu_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(sz > 0 ? (size_t)sz : 1);
    if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p && n)
        *n = (size_t)sz;
    return p;
}

int tu_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void tu_rm_rf(const char *path)
{
    if (path && strncmp(path, "/tmp/sharc-test-", 16) == 0)
        tu_sh("rm -rf '%s'", path);
}

static void *counting_alloc(void *cookie, size_t size, size_t align)
{
    void *p = NULL;
    (*(int *)cookie)++;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1))
        return NULL;
    return p;
}

void tu_free(void *cookie, void *ptr)
{
    (void)cookie;
    free(ptr);
}

sharc_allocator tu_counting_allocator(int *counter)
{
    sharc_allocator a = {counter, counting_alloc, tu_free};
    return a;
}

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

int tu_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

unsigned long long tu_bytes_read(void)
{
    char line[128];
    unsigned long long n = 0;
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "rchar: %llu", &n) == 1)
            break;
    fclose(f);
    return n;
}

void tu_expected_field(const char *dir, int index, const char *key, char *out, size_t cap)
{
    char path[600], line[4096];
    snprintf(path, sizeof path, "%s/shar.expected.jsonl", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i <= index; i++)
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    cJSON *o = cJSON_Parse(line);
    const cJSON *v = cJSON_GetObjectItem(o, key);
    ck_assert_msg(cJSON_IsString(v), "cut %d has no %s", index, key);
    snprintf(out, cap, "%s", v->valuestring);
    cJSON_Delete(o);
}

int tu_longest_cuts(const char *dir, int *longest, int64_t *most, int64_t *second)
{
    char path[600], line[4096];
    snprintf(path, sizeof path, "%s/shar.expected.jsonl", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int index = 0;
    *longest = -1;
    *most = *second = -1;
    while (fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        int64_t n = (int64_t)cJSON_GetObjectItem(o, "num_samples")->valuedouble;
        if (n > *most) {
            *second = *most;
            *most = n;
            *longest = index;
        } else if (n > *second) {
            *second = n;
        }
        cJSON_Delete(o);
        index++;
    }
    fclose(f);
    return index;
}

void tu_spoil_member(const char *dir, int index, int cuts_per_shard, char member[256], char id[256])
{
    tu_expected_field(dir, index, "member", member, 256);
    tu_expected_field(dir, index, "id", id, 256);
    ck_assert_int_eq(tu_sh("cd '%s/shar' && python3 '%s/corrupt.py' tar-replace recording.%06d.tar "
                           "'%s' @flac-garbage:2000",
                           dir, getenv("SHARC_TESTS_SRC"), index / cuts_per_shard, member),
                     0);
}

int tu_first_batch_status(const sharc_reader_settings *s, char *why, size_t cap)
{
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    int rc = sharc_reader_next_batch(r, &b);
    if (rc == 0)
        sharc_batch_release(b);
    snprintf(why, cap, "%s", sharc_reader_last_error(r));
    sharc_reader_close(&r);
    return rc;
}

void tu_reseal_state(uint8_t *blob, size_t size)
{
    uint64_t crc = (uint32_t)crc32(0L, blob, (uInt)(size - 8));
    for (int k = 0; k < 8; k++)
        blob[size - 8 + (size_t)k] = (uint8_t)(crc >> (8 * k));
}

void *tu_state_after(const sharc_reader_settings *s, size_t batches, size_t *size)
{
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    for (size_t i = 0; i < batches; i++) {
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
        sharc_batch_release(b);
    }
    ck_assert_int_eq(sharc_reader_state_save(r, NULL, 0, size), SHARC_ERR(ENOSPC));
    void *blob = malloc(*size);
    ck_assert_int_eq(sharc_reader_state_save(r, blob, *size, size), 0);
    sharc_reader_close(&r);
    return blob;
}

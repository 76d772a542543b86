#include "testutil.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sharc/sharc.h"
#include "testutil.h"
#include "base/ctx.h"
#include "base/buf.h"

START_TEST(strerror_covers_own_and_errno_codes)
{
    ck_assert_str_eq(sharc_strerror(0), "success");
    ck_assert_str_eq(sharc_strerror(SHARC_ERR_CORRUPT), "corrupt or truncated archive");
    ck_assert_str_eq(sharc_strerror(SHARC_END), "end of stream");
    ck_assert_str_eq(sharc_strerror(SHARC_ERR(ENOMEM)), strerror(ENOMEM));
    ck_assert_str_eq(sharc_strerror(-123456), "unknown error");
    ck_assert_str_eq(sharc_err_name(SHARC_ERR_REMOTE), "SHARC_ERR_REMOTE");
    ck_assert_str_eq(sharc_err_name(SHARC_ERR(EINVAL)), "EINVAL");
    ck_assert_str_eq(sharc_err_name(0), "OK");
    ck_assert_int_lt(SHARC_ERR_CORRUPT, -1000);
    ck_assert_int_gt(SHARC_END, 0);
}
END_TEST

START_TEST(problem_names)
{
    ck_assert_str_eq(sharc_problem_name(SHARC_PROBLEM_ID_MISMATCH), "id_mismatch");
    ck_assert_str_eq(sharc_problem_name(SHARC_PROBLEM_LAYOUT), "layout");
    ck_assert_str_eq(sharc_problem_name(SHARC_PROBLEM_COUNT), "unknown");
}
END_TEST

static int logged;
static char last_log[256];
static void capture(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    (void)level;
    logged++;
    snprintf(last_log, sizeof last_log, "%s", message);
}

START_TEST(fail_sets_text_and_logs)
{
    sharc__ctx ctx;
    sharc_logger log = {NULL, capture, SHARC_LOG_WARN};
    sharc__ctx_init(&ctx, NULL, &log);
    int rc = sharc__fail(&ctx, SHARC_ERR_DECODE, "bad member %s", "a.flac");
    ck_assert_int_eq(rc, SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, "bad member a.flac");
    ck_assert_int_eq(logged, 1);
    ck_assert_str_eq(last_log, "bad member a.flac");
    sharc__log(&ctx, SHARC_LOG_DEBUG, "dropped");
    ck_assert_int_eq(logged, 1);
}
END_TEST

/* The streaming copy and zero fill equal memcpy and memset at every size and alignment
 * around their thresholds, and touch nothing outside the range. */
START_TEST(stream_copy_and_zero_match_memcpy_and_memset)
{
    enum { CAP = (160 << 10) + 256 };
    uint8_t *src = malloc(CAP), *got = malloc(CAP), *want = malloc(CAP);
    ck_assert(src && got && want);
    for (size_t i = 0; i < CAP; i++)
        src[i] = (uint8_t)(i * 131 + 7);
    const size_t sizes[] = {0, 1, 15, 63, 64, 4095, 4096, 4097, 65535, 65536, 65601, 160 << 10};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t off = 0; off < 32; off += 7) {
            size_t n = sizes[k];
            memset(got, 0xAB, CAP);
            memset(want, 0xAB, CAP);
            sharc__memcpy_stream(got + off, src + 3, n);
            memcpy(want + off, src + 3, n);
            ck_assert_msg(memcmp(got, want, CAP) == 0, "copy: n %zu off %zu", n, off);
            sharc__memzero_stream(got + off, n);
            memset(want + off, 0, n);
            ck_assert_msg(memcmp(got, want, CAP) == 0, "zero: n %zu off %zu", n, off);
        }
    free(src);
    free(got);
    free(want);
}
END_TEST

static int alloc_budget;
static void *limited_alloc(void *cookie, size_t size, size_t align)
{
    (void)cookie;
    (void)align;
    if (alloc_budget-- <= 0)
        return NULL;
    return malloc(size);
}

START_TEST(buf_grows_and_reports_allocation_failure)
{
    sharc__ctx ctx;
    sharc_allocator a = {NULL, limited_alloc, tu_free};
    sharc__ctx_init(&ctx, &a, NULL);
    sharc__buf b = {0};
    alloc_budget = 100;
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(sharc__buf_append(&ctx, &b, "abc", 3), 0);
    ck_assert_uint_eq(b.len, 3000);
    ck_assert_int_eq(memcmp(b.data + 2997, "abc", 3), 0);
    ck_assert_int_eq(b.data[3000], 0);
    alloc_budget = 0;
    ck_assert_int_eq(sharc__buf_reserve(&ctx, &b, 1 << 20), SHARC_ERR(ENOMEM));
    ck_assert_uint_eq(b.len, 3000);
    sharc__buf_free(&ctx, &b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, strerror_covers_own_and_errno_codes);
    tcase_add_test(tc, problem_names);
    tcase_add_test(tc, fail_sets_text_and_logs);
    tcase_add_test(tc, stream_copy_and_zero_match_memcpy_and_memset);
    tcase_add_test(tc, buf_grows_and_reports_allocation_failure);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

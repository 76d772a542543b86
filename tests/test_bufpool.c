/* The buffer pool: fitting buffers come back, unfit ones are not handed out. */
#include <check.h>
#include <string.h>

#include "io/bufpool.h"
#include "testutil.h"

START_TEST(takes_a_fitting_buffer)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__bufpool pool;
    sharc__bufpool_init(&pool, &ctx);
    sharc__buf a = {0}, b = {0}, c = {0};
    ck_assert_int_eq(sharc__buf_reserve(&ctx, &a, 100000), 0); /* exact: 100001 */
    ck_assert_uint_eq(a.cap, 100001);
    ck_assert_int_eq(sharc__buf_reserve(&ctx, &b, 10000), 0);
    uint8_t *big = a.data, *small = b.data;
    sharc__bufpool_give(&pool, &a);
    sharc__bufpool_give(&pool, &b);
    ck_assert_ptr_null(a.data);
    ck_assert_uint_eq(pool.n, 2);
    /* 90000 bytes: the 100001 buffer fits (within 1.25x), the small one does not. */
    sharc__bufpool_take(&pool, 90000, &c);
    ck_assert_ptr_eq(c.data, big);
    ck_assert_uint_eq(c.len, 0);
    /* 20000 bytes: nothing fits (10001 too small); c goes back, c comes out empty. */
    sharc__bufpool_take(&pool, 20000, &c);
    ck_assert_ptr_null(c.data);
    ck_assert_uint_eq(pool.n, 2);
    /* 1000 bytes: the 10001 buffer fits within the 4 KiB + 25% slack? No: 10001 > 1000 *
     * 1.25 + 4096, so a fresh one is needed. */
    sharc__bufpool_take(&pool, 1000, &c);
    ck_assert_ptr_null(c.data);
    sharc__bufpool_take(&pool, 9000, &c);
    ck_assert_ptr_eq(c.data, small);
    ck_assert(sharc__bufpool_fits(100001, 100000));
    ck_assert(!sharc__bufpool_fits(100000, 100000));
    ck_assert(!sharc__bufpool_fits(1 << 20, 1000));
    sharc__buf_free(&ctx, &c);
    /* A full pool replaces old buffers with new ones instead of dropping the new. */
    for (int i = 0; i < SHARC__BUFPOOL_MAX + 10; i++) {
        sharc__buf d = {0};
        ck_assert_int_eq(sharc__buf_reserve(&ctx, &d, (size_t)(1000 + i)), 0);
        sharc__bufpool_give(&pool, &d);
    }
    ck_assert_uint_eq(pool.n, SHARC__BUFPOOL_MAX);
    sharc__buf e = {0};
    sharc__bufpool_take(&pool, 1000 + SHARC__BUFPOOL_MAX + 9, &e);
    ck_assert_ptr_nonnull(e.data);
    sharc__buf_free(&ctx, &e);
    sharc__bufpool_destroy(&pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bufpool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, takes_a_fitting_buffer);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

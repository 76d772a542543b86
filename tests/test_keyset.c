/* The key set: random adds and removes against a plain array, across growth. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "plan/keyset.h"
#include "base/rng.h"
#include "testutil.h"

START_TEST(matches_a_reference_under_churn)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__keyset set = {0};
    enum { UNIVERSE = 5000 };
    static unsigned char present[UNIVERSE];
    memset(present, 0, sizeof present);
    sharc__rng rng;
    sharc__rng_seed(&rng, 42);
    size_t n = 0;
    for (int step = 0; step < 200000; step++) {
        /* Keys clustered like real ones: shard and position fields, many collisions. */
        uint64_t k = sharc__rng_below(&rng, UNIVERSE);
        uint64_t key = ((k / 100) << 24) | (k % 100);
        if (sharc__rng_below(&rng, 3) == 0 || !present[k]) {
            ck_assert_int_eq(sharc__keyset_add(&ctx, &set, key), 0);
            n += !present[k];
            present[k] = 1;
        } else {
            sharc__keyset_remove(&set, key);
            present[k] = 0;
            n--;
        }
        ck_assert_uint_eq(set.n, n);
        if (step % 10000 == 0) {
            /* The walk yields each present key exactly once. */
            static unsigned char seen[UNIVERSE];
            memset(seen, 0, sizeof seen);
            size_t cursor = 0, m = 0;
            uint64_t key_seen;
            while (sharc__keyset_next(&set, &cursor, &key_seen)) {
                uint64_t k_seen = (key_seen >> 24) * 100 + (key_seen & 0xffffff);
                ck_assert_uint_lt(k_seen, UNIVERSE);
                ck_assert(present[k_seen] && !seen[k_seen]);
                seen[k_seen] = 1;
                m++;
            }
            ck_assert_uint_eq(m, n);
            ck_assert(!sharc__keyset_next(&set, &cursor, &key_seen));
        }
    }
    /* Removing what is absent changes nothing. */
    sharc__keyset_remove(&set, 1ull << 60);
    ck_assert_uint_eq(set.n, n);
    sharc__keyset_free(&ctx, &set);
    ck_assert_ptr_null(set.slots);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("keyset");
    TCase *tc = tcase_create("set");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, matches_a_reference_under_churn);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

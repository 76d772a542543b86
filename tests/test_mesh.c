#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sharc/sharc.h"
#include "testutil.h"

START_TEST(dp2_cp2_on_four_ranks)
{
    /* Row-major: rank = dp * 2 + cp. Groups {0,1} and {2,3}; sources 0 and 2. */
    static const int source[4] = {1, 0, 1, 0};
    for (int r = 0; r < 4; r++) {
        sharc_mesh m;
        ck_assert_int_eq(sharc_mesh_parse(&m, "dp=2,cp=2", r, 4), 0);
        ck_assert_int_eq(m.n_axes, 2);
        ck_assert_str_eq(m.names[0], "dp");
        ck_assert_int_eq(sharc_mesh_coord(&m, "dp"), r / 2);
        ck_assert_int_eq(sharc_mesh_coord(&m, "cp"), r % 2);
        ck_assert_int_eq(sharc_mesh_coord(&m, "tp"), -1);
        ck_assert_int_eq(sharc_mesh_is_source(&m), source[r]);
        ck_assert_int_eq(sharc_mesh_dp_rank(&m), r / 2);
        ck_assert_int_eq(sharc_mesh_dp_size(&m), 2);
        ck_assert_int_eq(sharc_mesh_group_rank(&m), r % 2);
        ck_assert_int_eq(sharc_mesh_group_size(&m), 2);
        ck_assert_int_eq(sharc_mesh_group_member(&m, 0), (r / 2) * 2);
        ck_assert_int_eq(sharc_mesh_group_member(&m, 1), (r / 2) * 2 + 1);
        ck_assert_int_eq(sharc_mesh_group_member(&m, 2), -1);
    }
}
END_TEST

START_TEST(dp_cp_tp_three_axes)
{
    sharc_mesh m;
    /* rank 5 = (dp 1, cp 0, tp 1) */
    ck_assert_int_eq(sharc_mesh_parse(&m, "dp=2,cp=2,tp=2", 5, 8), 0);
    ck_assert_int_eq(sharc_mesh_coord(&m, "dp"), 1);
    ck_assert_int_eq(sharc_mesh_coord(&m, "cp"), 0);
    ck_assert_int_eq(sharc_mesh_coord(&m, "tp"), 1);
    ck_assert_int_eq(sharc_mesh_is_source(&m), 0);
    ck_assert_int_eq(sharc_mesh_group_rank(&m), 1);
    ck_assert_int_eq(sharc_mesh_group_size(&m), 4);
    ck_assert_int_eq(sharc_mesh_dp_rank(&m), 1);
    ck_assert_int_eq(sharc_mesh_dp_size(&m), 2);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sharc_mesh_group_member(&m, i), 4 + i);
    /* Broadcasting over tp only: the slot is (dp, cp) = (1, 0) = slot 2 of 4. */
    ck_assert_int_eq(sharc_mesh_set_broadcast_axes(&m, "tp"), 0);
    ck_assert_int_eq(sharc_mesh_dp_rank(&m), 2);
    ck_assert_int_eq(sharc_mesh_dp_size(&m), 4);
    ck_assert_int_eq(sharc_mesh_group_rank(&m), 1);
    ck_assert_int_eq(sharc_mesh_group_member(&m, 0), 4);
    ck_assert_int_eq(sharc_mesh_group_member(&m, 1), 5);
    /* Broadcasting over dp and tp: group members differ in dp and tp, cp fixed at 0. */
    ck_assert_int_eq(sharc_mesh_set_broadcast_axes(&m, "tp,dp"), 0);
    ck_assert_int_eq(sharc_mesh_group_rank(&m), 3);
    ck_assert_int_eq(sharc_mesh_group_member(&m, 0), 0);
    ck_assert_int_eq(sharc_mesh_group_member(&m, 1), 1);
    ck_assert_int_eq(sharc_mesh_group_member(&m, 2), 4);
    ck_assert_int_eq(sharc_mesh_dp_size(&m), 2);
}
END_TEST

START_TEST(tp_only_is_one_group)
{
    for (int r = 0; r < 4; r++) {
        sharc_mesh m;
        ck_assert_int_eq(sharc_mesh_parse(&m, "tp=4", r, 4), 0);
        ck_assert_int_eq(sharc_mesh_is_source(&m), r == 0);
        ck_assert_int_eq(sharc_mesh_dp_rank(&m), 0);
        ck_assert_int_eq(sharc_mesh_dp_size(&m), 1);
        ck_assert_int_eq(sharc_mesh_group_rank(&m), r);
        ck_assert_int_eq(sharc_mesh_group_size(&m), 4);
    }
}
END_TEST

START_TEST(no_broadcast_axes_means_every_rank_reads)
{
    for (int r = 0; r < 4; r++) {
        sharc_mesh m;
        ck_assert_int_eq(sharc_mesh_parse(&m, "dp=4", r, 4), 0);
        ck_assert_int_eq(sharc_mesh_is_source(&m), 1);
        ck_assert_int_eq(sharc_mesh_group_size(&m), 1);
        ck_assert_int_eq(sharc_mesh_dp_rank(&m), r);
        ck_assert_int_eq(sharc_mesh_dp_size(&m), 4);
        ck_assert_int_eq(sharc_mesh_group_member(&m, 0), r);
        /* Size-1 broadcast axes also make every rank a source. */
        ck_assert_int_eq(sharc_mesh_parse(&m, "dp=4,cp=1,tp=1", r, 4), 0);
        ck_assert_int_eq(sharc_mesh_is_source(&m), 1);
        ck_assert_int_eq(sharc_mesh_group_size(&m), 1);
        ck_assert_int_eq(sharc_mesh_dp_rank(&m), r);
    }
    sharc_mesh m;
    ck_assert_int_eq(sharc_mesh_parse(&m, "dp=2,cp=2", 3, 4), 0);
    ck_assert_int_eq(sharc_mesh_set_broadcast_axes(&m, ""), 0);
    ck_assert_int_eq(sharc_mesh_is_source(&m), 1);
    ck_assert_int_eq(sharc_mesh_dp_rank(&m), 3);
    ck_assert_int_eq(sharc_mesh_set_broadcast_axes(&m, "pp,ep"), 0);
    ck_assert_int_eq(sharc_mesh_group_size(&m), 1);
}
END_TEST

START_TEST(init_from_arrays)
{
    const char *names[] = {"pp", "cp"};
    int sizes[] = {3, 2};
    sharc_mesh m;
    ck_assert_int_eq(sharc_mesh_init(&m, 2, names, sizes, 5), 0);
    ck_assert_int_eq(m.size, 6);
    ck_assert_int_eq(sharc_mesh_coord(&m, "pp"), 2);
    ck_assert_int_eq(sharc_mesh_coord(&m, "cp"), 1);
    ck_assert_int_eq(sharc_mesh_group_member(&m, 0), 4);
    sizes[1] = 0;
    ck_assert_int_eq(sharc_mesh_init(&m, 2, names, sizes, 0), SHARC_ERR(EINVAL));
    ck_assert_ptr_nonnull(strstr(m.error, "'cp'"));
    sizes[1] = 2;
    ck_assert_int_eq(sharc_mesh_init(&m, 2, names, sizes, 6), SHARC_ERR(EINVAL));
    ck_assert_ptr_nonnull(strstr(m.error, "rank 6"));
}
END_TEST

static void expect_bad(const char *spec, int world, const char *needle)
{
    sharc_mesh m;
    ck_assert_int_eq(sharc_mesh_parse(&m, spec, 0, world), SHARC_ERR(EINVAL));
    ck_assert_msg(strstr(m.error, needle), "'%s': error '%s' lacks '%s'", spec, m.error, needle);
}

START_TEST(rejects_bad_specs)
{
    expect_bad("dp=2,cp=3", 4, "has 6 ranks but the world has 4");
    expect_bad("dp2", 2, "expected name=size");
    expect_bad("dp=0", 1, "invalid size");
    expect_bad("dp=x", 1, "invalid size");
    expect_bad("dp=2x", 2, "invalid size");
    expect_bad("dp=", 1, "invalid size");
    expect_bad("=2", 2, "invalid axis name");
    expect_bad("d-p=2", 2, "invalid axis name");
    expect_bad("dp=2,", 2, "ends with a comma");
    expect_bad("dp=2,dp=1", 2, "appears twice");
    expect_bad("", 1, "empty");
    expect_bad("averyveryverylongaxisname=1", 1, "invalid axis name");
    expect_bad("a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1", 1, "more than 8 axes");
    sharc_mesh m;
    ck_assert_int_eq(sharc_mesh_parse(&m, "dp=2", 0, 2), 0);
    ck_assert_int_eq(sharc_mesh_set_broadcast_axes(&m, "cp,,tp"), SHARC_ERR(EINVAL));
}
END_TEST

static Suite *mesh_suite(void)
{
    Suite *s = suite_create("mesh");
    TCase *tc = tcase_create("mesh");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, dp2_cp2_on_four_ranks);
    tcase_add_test(tc, dp_cp_tp_three_axes);
    tcase_add_test(tc, tp_only_is_one_group);
    tcase_add_test(tc, no_broadcast_axes_means_every_rank_reads);
    tcase_add_test(tc, init_from_arrays);
    tcase_add_test(tc, rejects_bad_specs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(mesh_suite());
}

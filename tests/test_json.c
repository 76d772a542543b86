/* JSON parsing errors: the byte position is right, and stays sane with parsers on several
 * threads (cJSON keeps the error position in one global). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cut.h"
#include "json.h"
#include "testutil.h"

START_TEST(bad_json_names_the_byte)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    const char *line = "{\"id\": \"a\", \"duration\": }";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, line, strlen(line), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "invalid JSON near byte 24");
    const char *list = "[1, 2]";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, list, strlen(list), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "expected a JSON object");
    sharc__rawcut_free(&ctx, &c);
}
END_TEST

/* Each thread parses its own bad line over and over; every message must be one of the two
 * forms, with a position inside that thread's own line. */
static void *parse_bad_lines(void *arg)
{
    size_t pad = (size_t)(uintptr_t)arg;
    char line[256];
    snprintf(line, sizeof line, "{\"id\": \"%*s\", \"duration\": ]", (int)pad, "x");
    size_t len = strlen(line);
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    char *bad = NULL;
    for (int i = 0; i < 20000 && !bad; i++) {
        if (sharc__json_lhotse_cut(&ctx, line, len, &c) != SHARC_ERR_JSON)
            bad = strdup("parsed a bad line");
        size_t at = 0;
        if (strcmp(ctx.error, "invalid JSON") != 0 &&
            !(sscanf(ctx.error, "invalid JSON near byte %zu", &at) == 1 && at <= len))
            bad = strdup(ctx.error);
    }
    sharc__rawcut_free(&ctx, &c);
    return bad;
}

START_TEST(error_positions_with_parsers_on_several_threads)
{
    pthread_t t[4];
    for (size_t i = 0; i < 4; i++)
        ck_assert_int_eq(
            pthread_create(&t[i], NULL, parse_bad_lines, (void *)(uintptr_t)(i * 40 + 1)), 0);
    for (int i = 0; i < 4; i++) {
        char *bad = NULL;
        pthread_join(t[i], (void **)&bad);
        ck_assert_msg(bad == NULL, "thread %d: %s", i, bad ? bad : "");
        free(bad);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("errors");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_json_names_the_byte);
    tcase_add_test(tc, error_positions_with_parsers_on_several_threads);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

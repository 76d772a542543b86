/* JSON parsing errors: the byte position is right, and stays sane with parsers on several
 * threads (cJSON keeps the error position in one global); numbers out of range are errors,
 * not undefined conversions. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sharc/common.h>

#include "plan/cut.h"
#include "plan/json.h"
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
    /* One object per line, as json.loads() reads it: spaces may follow, nothing else. */
    const char *more = "{\"id\": \"a\", \"duration\": 1} x";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, more, strlen(more), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "invalid JSON near byte 27: more after the object");
    const char *spaces = "{\"id\": \"a\", \"duration\": 1} \t\r\n";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, spaces, strlen(spaces), &c), 0);
    /* A repeated key: the last value, as Python's json module (Lhotse, NeMo) takes it. */
    const char *twice = "{\"id\": \"a\", \"duration\": 1, \"duration\": 2.5}";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, twice, strlen(twice), &c), 0);
    ck_assert(c.duration == 2.5);
    /* Bytes that are not UTF-8 (a stray byte, an overlong form, a surrogate, past U+10FFFF,
     * a sequence cut short) are an error naming the byte; real multi-byte text is not. */
    const char *bad_utf8[] = {"{\"id\": \"a\xff\", \"duration\": 1}",
                              "{\"id\": \"a\xc0\xaf\", \"duration\": 1}",
                              "{\"id\": \"a\xed\xa0\x80\", \"duration\": 1}",
                              "{\"id\": \"a\xf4\x90\x80\x80\", \"duration\": 1}",
                              "{\"id\": \"a\xe2\x82\", \"duration\": 1}"};
    for (int i = 0; i < 5; i++) {
        sharc__rawcut_reset(&c);
        ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, bad_utf8[i], strlen(bad_utf8[i]), &c),
                         SHARC_ERR_JSON);
        ck_assert_str_eq(ctx.error, "invalid UTF-8 at byte 9");
    }
    const char *good_utf8 = "{\"id\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"duration\": 1}";
    sharc__rawcut_reset(&c);
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, good_utf8, strlen(good_utf8), &c), 0);
    ck_assert_str_eq(sharc__buf_str(&c.id), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
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

/*
 * Durations and offsets past SHARC__MAX_SECONDS are errors naming the key and the value
 * (sample counts computed from them would overflow); a shard_id that is not a whole number
 * fitting a long long is no shard_id. Found by libFuzzer (float-cast-overflow).
 */
START_TEST(numbers_out_of_range)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    const char *cut = "{\"id\": \"a\", \"duration\": 1e300}";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, cut, strlen(cut), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error,
                     "cut a: \"duration\" is 1e+300 s, over the 1e+07 s any audio can have");
    const char *ok = "{\"id\": \"a\", \"duration\": 1e7}";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, ok, strlen(ok), &c), 0);
    ck_assert(c.duration == 1e7);
    /* A start other than 0 (or null, which is absent) would need the recording cut. */
    const char *starts[] = {"{\"id\": \"a\", \"start\": 2.5, \"duration\": 1}",
                            "{\"id\": \"a\", \"start\": \"0\", \"duration\": 1}",
                            "{\"id\": \"a\", \"start\": 0, \"duration\": 1}",
                            "{\"id\": \"a\", \"start\": 0.0, \"duration\": 1}",
                            "{\"id\": \"a\", \"start\": null, \"duration\": 1}"};
    const char *start_why[] = {"2.5", "a value that is not a finite number"};
    for (int i = 0; i < 5; i++) {
        sharc__rawcut_reset(&c);
        int rc = sharc__json_lhotse_cut(&ctx, starts[i], strlen(starts[i]), &c);
        if (i >= 2) {
            ck_assert_int_eq(rc, 0);
            continue;
        }
        ck_assert_int_eq(rc, SHARC_ERR_JSON);
        char want_text[256];
        snprintf(want_text, sizeof want_text,
                 "cut a has \"start\" %s: Shar cuts start at 0 (Lhotse stores each cut's own "
                 "audio), and sharc does not cut recordings by start",
                 start_why[i]);
        ck_assert_str_eq(ctx.error, want_text);
    }

    sharc__nemo_row row = {0};
    /* So are values that are there but not seconds: not taken as absent. The row still
     * names its member and says whether it is skipped. */
    const char *rows[] = {"{\"audio_filepath\": \"x.wav\", \"duration\": 2e7}",
                          "{\"audio_filepath\": \"x.wav\", \"duration\": 1, \"offset\": 1e300}",
                          "{\"audio_filepath\": \"x.wav\", \"duration\": -0.5, \"_skipme\": 1}",
                          "{\"audio_filepath\": \"x.wav\", \"duration\": 1, \"offset\": \"2\"}",
                          "{\"audio_filepath\": \"x.wav\", \"duration\": [1]}"};
    const char *why[] = {
        "manifest row x.wav: \"duration\" is 2e+07 s, over the 1e+07 s any audio can have",
        "manifest row x.wav: \"offset\" is 1e+300 s, over the 1e+07 s any audio can have",
        "manifest row x.wav: \"duration\" is -0.5 s, below 0",
        "manifest row x.wav: \"offset\" is not a number of seconds",
        "manifest row x.wav: \"duration\" is not a number of seconds"};
    for (int i = 0; i < 5; i++) {
        sharc__rawcut_reset(&c);
        ck_assert_int_eq(
            sharc__json_nemo_row(&ctx, rows[i], strlen(rows[i]), "text", "lang", &row, &c),
            SHARC_ERR_JSON);
        ck_assert_str_eq(ctx.error, why[i]);
        ck_assert_str_eq(row.audio_filepath, "x.wav");
        ck_assert_int_eq(row.skipme, i == 2);
        sharc__free(&ctx, row.audio_filepath);
        row.audio_filepath = NULL;
    }
    const char *wds = "{\"duration\": 1e19}";
    sharc__rawcut_reset(&c);
    ck_assert_int_eq(sharc__json_wds_meta(&ctx, wds, strlen(wds), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "\"duration\" is 1e+19 s, over the 1e+07 s any audio can have");
    const char *wds_bad = "{\"duration\": \"3.5\"}";
    sharc__rawcut_reset(&c);
    ck_assert_int_eq(sharc__json_wds_meta(&ctx, wds_bad, strlen(wds_bad), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "\"duration\" is not a number of seconds");
    const char *wds_null = "{\"duration\": null, \"text\": \"hi\"}";
    sharc__rawcut_reset(&c);
    ck_assert_int_eq(sharc__json_wds_meta(&ctx, wds_null, strlen(wds_null), &c), 0);
    ck_assert_str_eq(sharc__buf_str(&c.text), "hi");
    const char *shar_bad = "{\"id\": \"a\", \"duration\": -1}";
    sharc__rawcut_reset(&c);
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, shar_bad, strlen(shar_bad), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "cut a: \"duration\" is -1 s, below 0");
    const char *cut_ids[] = {"{\"id\": 5, \"duration\": 1}", "{\"id\": \"\", \"duration\": 1}",
                             "{\"duration\": 1}"};
    const char *id_why[] = {"cut's \"id\" is not a non-empty string",
                            "cut's \"id\" is not a non-empty string", "cut has no \"id\""};
    for (int i = 0; i < 3; i++) {
        sharc__rawcut_reset(&c);
        ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, cut_ids[i], strlen(cut_ids[i]), &c),
                         SHARC_ERR_JSON);
        ck_assert_str_eq(ctx.error, id_why[i]);
    }
    const char *shar_none = "{\"id\": \"a\", \"duration\": null}";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, shar_none, strlen(shar_none), &c),
                     SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "cut a has no \"duration\"");

    const char *ids[] = {"{\"shard_id\": 1111111111111111111111111111111113}",
                         "{\"shard_id\": 1.5}", "{\"shard_id\": -3}", "{\"shard_id\": 12}"};
    const long long want[] = {-1, -1, -1, 12};
    for (int i = 0; i < 4; i++) {
        long long sid = 0;
        ck_assert_int_eq(sharc__json_nemo_shard_id(&ctx, ids[i], strlen(ids[i]), &sid), 0);
        ck_assert_int_eq(sid, want[i]);
        sharc__rawcut_reset(&c);
        char line[128];
        snprintf(line, sizeof line, "{\"audio_filepath\": \"x.wav\", %s", ids[i] + 1);
        ck_assert_int_eq(sharc__json_nemo_row(&ctx, line, strlen(line), "text", "lang", &row, &c),
                         0);
        ck_assert_int_eq(row.shard_id, want[i]);
        sharc__free(&ctx, row.audio_filepath);
        row.audio_filepath = NULL;
    }
    sharc__rawcut_free(&ctx, &c);
}
END_TEST

/*
 * NaN, Infinity and -Infinity are read as Python's json module reads them (json.dumps writes
 * them for float('nan') and float('inf')): a cut line that holds one in a value sharc does
 * not use is a good line, one where seconds are wanted is a json problem, and the same words
 * inside strings are text. Errors still name the byte of the line as given.
 */
START_TEST(python_constants)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    const char *line = "{\"id\": \"a\", \"duration\": 1.5, \"custom\": {\"snr\": NaN, \"hi\": "
                       "Infinity, \"lo\": -Infinity}, \"supervisions\": [{\"text\": \"NaN \\\" "
                       "Infinity\"}]}";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, line, strlen(line), &c), 0);
    ck_assert(c.duration == 1.5);
    ck_assert_str_eq(sharc__buf_str(&c.text), "NaN \" Infinity");
    ck_assert_str_eq(sharc__buf_str(&c.json), line); /* the line as given */
    const char *nan_duration[] = {"{\"id\": \"a\", \"duration\": NaN}",
                                  "{\"id\": \"a\", \"duration\": Infinity}",
                                  "{\"id\": \"a\", \"duration\": -Infinity}"};
    for (int i = 0; i < 3; i++) {
        sharc__rawcut_reset(&c);
        ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, nan_duration[i], strlen(nan_duration[i]), &c),
                         SHARC_ERR_JSON);
        ck_assert_str_eq(ctx.error, "cut a: \"duration\" is not a number of seconds");
    }
    /* Python has no -NaN, and a constant run together with a number or a word is none. */
    const char *bad[] = {"{\"id\": \"a\", \"x\": -NaN, \"duration\": 1}",
                         "{\"id\": \"a\", \"x\": NaNa, \"duration\": 1}",
                         "{\"id\": \"a\", \"x\": 1NaN, \"duration\": 1}",
                         "{\"id\": \"a\", \"x\": NaN0, \"duration\": 1}",
                         "{\"id\": \"a\", \"x\": Infinity1, \"duration\": 1}",
                         "{\"id\": \"a\", \"x\": 0Infinity, \"duration\": 1}",
                         "{\"id\": \"a\", \"x\": 1.NaN, \"duration\": 1}",
                         "{\"id\": \"a\", \"x\": -Infinity0, \"duration\": 1}",
                         "{\"id\": \"a\", \"x\": 1-Infinity, \"duration\": 1}"};
    for (int i = 0; i < 9; i++) {
        sharc__rawcut_reset(&c);
        ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, bad[i], strlen(bad[i]), &c), SHARC_ERR_JSON);
        ck_assert_msg(strncmp(ctx.error, "invalid JSON near byte ", 23) == 0, "%s", ctx.error);
    }
    /* The byte named is the one in the line as given, after a NaN (spelled longer) too: the
     * same as with a value of NaN's length in its place. */
    const char *after_nan = "{\"id\": \"a\", \"x\": NaN, \"y\": NaN, \"duration\": }";
    const char *after_num = "{\"id\": \"a\", \"x\": 0.0, \"y\": 0.0, \"duration\": }";
    char want[SHARC__ERRLEN];
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, after_num, strlen(after_num), &c),
                     SHARC_ERR_JSON);
    snprintf(want, sizeof want, "%s", ctx.error);
    ck_assert_str_eq(want, "invalid JSON near byte 44");
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, after_nan, strlen(after_nan), &c),
                     SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, want);
    /* cJSON stops inside the spelled token: the byte named is still one of the line. */
    const char *cut_nan = "{\"id\": \"a\", \"duration\": 1, \"x\": NaN";
    const char *cut_num = "{\"id\": \"a\", \"duration\": 1, \"x\": 0.0";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, cut_num, strlen(cut_num), &c), SHARC_ERR_JSON);
    snprintf(want, sizeof want, "%s", ctx.error);
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, cut_nan, strlen(cut_nan), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, want);
    const char *list = "{\"id\": \"a\", \"x\": [NaN,Infinity,-Infinity], \"duration\": 1}";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, list, strlen(list), &c), 0);
    const char *more = "{\"id\": \"a\", \"x\": NaN, \"duration\": 1} x";
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, more, strlen(more), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "invalid JSON near byte 37: more after the object");
    /* NeMo rows: an offset of -Infinity is no offset; a shard_id is found past a NaN. */
    sharc__nemo_row row = {0};
    const char *nemo = "{\"audio_filepath\": \"x.wav\", \"duration\": 1, \"offset\": -Infinity}";
    sharc__rawcut_reset(&c);
    ck_assert_int_eq(sharc__json_nemo_row(&ctx, nemo, strlen(nemo), "text", "lang", &row, &c),
                     SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "manifest row x.wav: \"offset\" is not a number of seconds");
    sharc__free(&ctx, row.audio_filepath);
    long long sid = 0;
    const char *agg = "{\"wer\": NaN, \"shard_id\": 3}";
    ck_assert_int_eq(sharc__json_nemo_shard_id(&ctx, agg, strlen(agg), &sid), 0);
    ck_assert_int_eq(sid, 3);
    /* A custom field's value comes as written: NaN stays NaN (cJSON would print null). */
    sharc__buf id = {0}, value = {0};
    int present = 0;
    const char *fields[] = {"{\"cut_id\": \"a\", \"snr\": NaN}",
                            "{\"cut_id\": \"a\", \"snr\": {\"x\": [1, -Infinity] }, \"y\": 2}",
                            "{\"snr\": 1, \"cut_id\": \"a\", \"snr\" : \"b,}\\\"\" }",
                            "{\"cut_id\": \"a\", \"s\\u006er\": 1.50}",
                            "{\"cut_id\": \"a\", \"snr\": null}"};
    const char *values[] = {"NaN", "{\"x\": [1, -Infinity] }", "\"b,}\\\"\"", "1.50", "null"};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(sharc__json_lhotse_field(&ctx, fields[i], strlen(fields[i]), "snr", &id,
                                                  &value, &present),
                         0);
        ck_assert_int_eq(present, 1);
        ck_assert_str_eq(sharc__buf_str(&id), "a");
        ck_assert_str_eq(sharc__buf_str(&value), values[i]);
    }
    sharc__buf_free(&ctx, &id);
    sharc__buf_free(&ctx, &value);
    sharc__rawcut_free(&ctx, &c);
}
END_TEST

/*
 * The escape \u0000 ends cJSON's C strings: a string sharc reads (ids, texts, speakers,
 * languages, paths) that holds it is refused with a message naming its field, never cut
 * there. A key that holds it is not the key it starts with (as in Python), an escaped
 * backslash before "u0000" is text, and values sharc passes on as written keep it.
 */
#define NUL_WHY                                                                                    \
    "holds the character U+0000 (\\u0000), which sharc refuses rather than cut the "               \
    "string there"
START_TEST(nul_escapes_are_refused_not_cut)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    const char *cuts[] = {
        "{\"id\": \"a\", \"duration\": 1, \"supervisions\": [{\"text\": \"keep this\\u0000 and "
        "this too\"}]}",
        "{\"id\": \"a\", \"duration\": 1, \"supervisions\": [{\"text\": \"t\", \"speaker\": "
        "\"s\\u0000\"}]}",
        "{\"id\": \"a\", \"duration\": 1, \"supervisions\": [{\"language\": \"\\u0000en\"}]}",
        "{\"id\": \"a\\u0000b\", \"duration\": 1}",
        "{\"id\": \"a\", \"duration\": 1, \"type\": \"MonoCut\\u0000\"}"};
    const char *why[] = {"supervision \"text\" " NUL_WHY, "supervision \"speaker\" " NUL_WHY,
                         "supervision \"language\" " NUL_WHY, "cut a\\u0000b: \"id\" " NUL_WHY,
                         "cut a: \"type\" " NUL_WHY};
    for (int i = 0; i < 5; i++) {
        sharc__rawcut_reset(&c);
        ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, cuts[i], strlen(cuts[i]), &c),
                         SHARC_ERR_JSON);
        ck_assert_str_eq(ctx.error, why[i]);
    }
    /* An escaped backslash, then "u0000": text. A key "text\u0000": not "text". A value sharc
     * does not read: kept in the line as given. */
    const char *kept = "{\"id\": \"a\", \"duration\": 1, \"custom\": {\"note\": \"x\\u0000y\"}, "
                       "\"supervisions\": [{\"text\": \"a\\\\u0000b\", \"speaker\\u0000\": 5, "
                       "\"speaker\": \"s\"}, {\"text\\u0000\": \"gone\"}]}";
    sharc__rawcut_reset(&c);
    ck_assert_int_eq(sharc__json_lhotse_cut(&ctx, kept, strlen(kept), &c), 0);
    ck_assert_str_eq(sharc__buf_str(&c.text), "a\\u0000b");
    ck_assert_str_eq(sharc__buf_str(&c.speaker), "s");
    ck_assert_str_eq(sharc__buf_str(&c.json), kept);

    /* Shar field lines: the cut id is read, the value passed on as written. */
    sharc__buf id = {0}, value = {0};
    int present = 0;
    const char *field = "{\"cut_id\": \"a\", \"lang_id\": \"x\\u0000y\", \"lang_id\\u0000\": 2}";
    ck_assert_int_eq(
        sharc__json_lhotse_field(&ctx, field, strlen(field), "lang_id", &id, &value, &present), 0);
    ck_assert_int_eq(present, 1);
    ck_assert_str_eq(sharc__buf_str(&value), "\"x\\u0000y\"");
    const char *field_id = "{\"cut_id\": \"a\\u0000\", \"lang_id\": 1}";
    ck_assert_int_eq(sharc__json_lhotse_field(&ctx, field_id, strlen(field_id), "lang_id", &id,
                                              &value, &present),
                     SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "lang_id line: \"cut_id\" " NUL_WHY);
    sharc__buf_free(&ctx, &id);
    sharc__buf_free(&ctx, &value);

    /* NeMo rows and WebDataset metadata. */
    sharc__nemo_row row = {0};
    const char *rows[] = {
        "{\"audio_filepath\": \"x.wav\\u0000.flac\", \"duration\": 1}",
        "{\"audio_file\": \"x.wav\\u0000\", \"duration\": 1}",
        "{\"audio_filepath\": \"x.wav\", \"duration\": 1, \"text\": \"a\\u0000\"}",
        "{\"audio_filepath\": \"x.wav\", \"duration\": 1, \"lang\": \"\\u0000\"}"};
    const char *row_why[] = {"manifest row x.wav\\u0000.flac: \"audio_filepath\" " NUL_WHY,
                             "manifest row x.wav\\u0000: \"audio_file\" " NUL_WHY,
                             "manifest row x.wav: \"text\" " NUL_WHY,
                             "manifest row x.wav: \"lang\" " NUL_WHY};
    for (int i = 0; i < 4; i++) {
        sharc__rawcut_reset(&c);
        ck_assert_int_eq(
            sharc__json_nemo_row(&ctx, rows[i], strlen(rows[i]), "text", "lang", &row, &c),
            SHARC_ERR_JSON);
        ck_assert_str_eq(ctx.error, row_why[i]);
        sharc__free(&ctx, row.audio_filepath);
        row.audio_filepath = NULL;
    }
    long long sid = 0;
    const char *sid_key = "{\"shard_id\\u0000\": 5}";
    ck_assert_int_eq(sharc__json_nemo_shard_id(&ctx, sid_key, strlen(sid_key), &sid), 0);
    ck_assert_int_eq(sid, -1);
    const char *wds = "{\"duration\": 1, \"text\": \"keep this\\u0000 and this too\"}";
    sharc__rawcut_reset(&c);
    ck_assert_int_eq(sharc__json_wds_meta(&ctx, wds, strlen(wds), &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "\"text\" " NUL_WHY);
    sharc__rawcut_free(&ctx, &c);
}
END_TEST

/* An empty metadata member has no buffer: parsed as the empty text it is, not read through
 * NULL (memmem(NULL) is undefined, and UBSan says so). */
START_TEST(empty_member_without_a_buffer)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(sharc__json_lhotse_recording(&ctx, NULL, 0, &c), SHARC_ERR_JSON);
    ck_assert_str_eq(ctx.error, "invalid JSON near byte 0");
    long long sid = 0;
    ck_assert_int_eq(sharc__json_nemo_shard_id(&ctx, NULL, 0, &sid), SHARC_ERR_JSON);
    sharc__rawcut_free(&ctx, &c);
}
END_TEST

/*
 * sharc_utf8_invalid_at, the public check the library and the CLI share: valid 1-4 byte
 * sequences pass whole; each form Python's strict decoder refuses is found at its first
 * byte, also after a run of ASCII long enough for the eight-byte fast path.
 */
START_TEST(utf8_invalid_at_judges_as_python)
{
    static const struct {
        const char *s;
        size_t bad; /* SIZE_MAX: valid */
    } cases[] = {
        {"", SIZE_MAX},
        {"plain ascii text, longer than eight bytes", SIZE_MAX},
        {"\xc2\x80", SIZE_MAX},         /* U+0080, the first two-byte */
        {"\xdf\xbf", SIZE_MAX},         /* U+07FF */
        {"\xe0\xa0\x80", SIZE_MAX},     /* U+0800, the first three-byte */
        {"\xed\x9f\xbf", SIZE_MAX},     /* U+D7FF, below the surrogates */
        {"\xee\x80\x80", SIZE_MAX},     /* U+E000, above them */
        {"\xef\xbf\xbf", SIZE_MAX},     /* U+FFFF */
        {"\xf0\x90\x80\x80", SIZE_MAX}, /* U+10000, the first four-byte */
        {"\xf4\x8f\xbf\xbf", SIZE_MAX}, /* U+10FFFF, the last code point */
        {"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80", SIZE_MAX},
        {"\xc0\x80", 0},                               /* overlong NUL */
        {"\xc1\xbf", 0},                               /* overlong two-byte */
        {"ab\xe0\x9f\xbf", 2},                         /* overlong three-byte (U+07FF) */
        {"\xf0\x8f\xbf\xbf", 0},                       /* overlong four-byte (U+FFFF) */
        {"x\xed\xa0\x80", 1},                          /* U+D800, a high surrogate */
        {"\xed\xbf\xbf", 0},                           /* U+DFFF, a low surrogate */
        {"\xf4\x90\x80\x80", 0},                       /* U+110000, past the last code point */
        {"\xf5\x80\x80\x80", 0},                       /* a lead byte past U+10FFFF */
        {"\xff", 0},                                   /* never in UTF-8 */
        {"\x80", 0},                                   /* a continuation byte alone */
        {"abc\xc3", 3},                                /* two-byte sequence cut short */
        {"\xe4\xb8", 0},                               /* three-byte sequence cut short */
        {"\xf0\x9f\x98", 0},                           /* four-byte sequence cut short */
        {"\xe4\xb8z", 0},                              /* a non-continuation inside a sequence */
        {"0123456789abcdef\xc3\xa9!\xed\xa0\x80", 19}, /* after the fast path */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const size_t n = strlen(cases[i].s);
        const size_t want = cases[i].bad == SIZE_MAX ? n : cases[i].bad;
        ck_assert_msg(sharc_utf8_invalid_at(cases[i].s, n) == want, "case %zu: %zu, want %zu", i,
                      sharc_utf8_invalid_at(cases[i].s, n), want);
    }
    /* A NUL byte is valid UTF-8, and the length, not a terminator, bounds the check. */
    ck_assert_uint_eq(sharc_utf8_invalid_at("a\0b", 3), 3);
    ck_assert_uint_eq(sharc_utf8_invalid_at("\xc3\xa9", 1), 0);
    ck_assert_uint_eq(sharc_utf8_invalid_at(NULL, 0), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("errors");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_json_names_the_byte);
    tcase_add_test(tc, error_positions_with_parsers_on_several_threads);
    tcase_add_test(tc, numbers_out_of_range);
    tcase_add_test(tc, python_constants);
    tcase_add_test(tc, nul_escapes_are_refused_not_cut);
    tcase_add_test(tc, empty_member_without_a_buffer);
    tcase_add_test(tc, utf8_invalid_at_judges_as_python);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

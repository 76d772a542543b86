/*
 * Shard discovery: brace patterns, layout detection, Shar field grouping, NeMo id
 * matching, and the per-epoch order split over data-parallel slots.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/dataset.h"
#include "testutil.h"

static sharc__ctx ctx;

static void setup(void)
{
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
}

/* `pattern` expands, as sharc_reader_expand_path() does, to the paths `want` lists one per line. */
static void expect_expansion(const char *pattern, const char *want)
{
    char **paths = NULL, err[256] = "";
    size_t n = 0;
    ck_assert_msg(sharc_reader_expand_path(pattern, &paths, &n, err, sizeof err) == 0, "%s: %s",
                  pattern, err);
    sharc__buf got = {0};
    for (size_t i = 0; i < n; i++) {
        if (i)
            ck_assert_int_eq(sharc__buf_append(&ctx, &got, "\n", 1), 0);
        ck_assert_int_eq(sharc__buf_append(&ctx, &got, paths[i], strlen(paths[i])), 0);
    }
    ck_assert_str_eq(sharc__buf_str(&got), want);
    sharc__buf_free(&ctx, &got);
    sharc_free(paths);
}

/* `pattern` is refused with `code` and a message that holds `text`. */
static void expect_refusal(const char *pattern, int code, const char *text)
{
    char **paths = (char **)&ctx, err[1024] = "";
    size_t n = 7;
    ck_assert_int_eq(sharc_reader_expand_path(pattern, &paths, &n, err, sizeof err), code);
    ck_assert_ptr_null(paths);
    ck_assert_uint_eq(n, 0);
    ck_assert_msg(strstr(err, text) != NULL, "%s: %s", pattern, err);
}

/* Every expected value here is what Python's braceexpand 0.1.7 gives with escape=False, as
 * NeMo calls it (after NeMo's bracket spellings are mapped to braces). */
START_TEST(brace_patterns)
{
    expect_expansion("a_{0..3}.tar", "a_0.tar\na_1.tar\na_2.tar\na_3.tar");
    expect_expansion("a_{08..10}.tar", "a_08.tar\na_09.tar\na_10.tar");
    expect_expansion("{x,y}/m_{1..2}", "x/m_1\nx/m_2\ny/m_1\ny/m_2");
    expect_expansion("audio__OP_0..2_CL_.tar", "audio_0.tar\naudio_1.tar\naudio_2.tar");
    expect_expansion("audio_(0..1).tar", "audio_0.tar\naudio_1.tar");
    expect_expansion("audio_[1..2].tar", "audio_1.tar\naudio_2.tar");
    expect_expansion("audio_<3..4>.tar", "audio_3.tar\naudio_4.tar");
    expect_expansion("plain.tar", "plain.tar");
    expect_expansion("{a,{b,c}}", "a\nb\nc");
    /* Ranges down, with steps, negative, of letters; padding from either endpoint. */
    expect_expansion("s{4..1}", "s4\ns3\ns2\ns1");
    expect_expansion("audio_(2..0).tar", "audio_2.tar\naudio_1.tar\naudio_0.tar");
    expect_expansion("{0..10..4}", "0\n4\n8");
    expect_expansion("{10..0..-4}", "10\n6\n2");
    expect_expansion("{0..2..0}", "0\n1\n2");
    expect_expansion("{2..-1}", "2\n1\n0\n-1");
    expect_expansion("{-05..-3}", "-05\n-04\n-03");
    expect_expansion("{1..010..4}", "001\n005\n009");
    expect_expansion("{9..010}", "009\n010");
    expect_expansion("{0..2}", "0\n1\n2");
    expect_expansion("{a..e..2}", "a\nc\ne");
    expect_expansion("{Y..b}", "Y\nZ\na\nb");
    expect_expansion("{b..A..26}", "b\nB");
    expect_expansion("a_<b..c>", "a_b\na_c");
    /* Lists with empty items; groups that are neither stand for themselves. */
    expect_expansion("index{,.bak}", "index\nindex.bak");
    expect_expansion("{,}", "\n");
    expect_expansion("x{}y", "x{}y");
    expect_expansion("a_{x}.tar", "a_{x}.tar");
    expect_expansion("{a{1,2}}", "{a1}\n{a2}");
    expect_expansion("{x,{y}}", "x\n{y}");
    expect_expansion("{1..3..}", "{1..3..}");
    expect_expansion("}{", "}{");
    expect_expansion("p{2.{5..6},3.{2,3}}", "p2.5\np2.6\np3.2\np3.3");
    /* Brackets are NeMo's braces only around a range; a backslash is a character. */
    expect_expansion("q (v2)/x", "q (v2)/x");
    expect_expansion("r[1]", "r[1]");
    expect_expansion("a\\{1,2}", "a\\1\na\\2");
    expect_refusal("a_{0..3.tar", SHARC_ERR(EINVAL), "unbalanced braces in a_{0..3.tar");
    expect_refusal("a}b", SHARC_ERR(EINVAL), "unbalanced");
    expect_refusal("{0..999999}{0..999999}", SHARC_ERR_TOO_LARGE, "more than 1000000 paths");
    expect_refusal("{0..1000000}", SHARC_ERR_TOO_LARGE, "more than 1000000 paths");
    expect_refusal("{1..99999999999999999999}", SHARC_ERR_TOO_LARGE, "more than");
    expect_expansion("{5..5..99999999999999999999}", "5");
    /* Leading zeros count for the padding only; numbers up to a long long's. */
    expect_expansion("{0000000000000000000001..3}",
                     "0000000000000000000001\n0000000000000000000002\n0000000000000000000003");
    expect_expansion("{1..5..0000000000000000000002}", "1\n3\n5");
    expect_expansion("{1000000000000000000..1000000000000000001}",
                     "1000000000000000000\n1000000000000000001");
    expect_expansion("{-9223372036854775807..-9223372036854775806}",
                     "-9223372036854775807\n-9223372036854775806");
    /* NeMo replaces every _OP_, then every _CL_. */
    expect_expansion("O,_CL_OP_L,_CL_", "O,_CLL\nO,_CL");
    /* 64 levels of braces are expanded, 65 refused. */
    char deep[200];
    memset(deep, '{', 64);
    deep[64] = 'a';
    memset(deep + 65, '}', 64);
    deep[129] = 0;
    char want_deep[200];
    snprintf(want_deep, sizeof want_deep, "%s", deep);
    expect_expansion(deep, want_deep);
    memset(deep, '{', 65);
    deep[65] = 'a';
    memset(deep + 66, '}', 65);
    deep[131] = 0;
    expect_refusal(deep, SHARC_ERR(EINVAL), "nests braces more than 64 deep");
    /* Paths are capped in bytes too: 1000 x 300000 bytes is over 256 MiB. */
    char *wide = malloc(300100);
    ck_assert_ptr_nonnull(wide);
    memcpy(wide, "{1..1000}", 9);
    memset(wide + 9, 'x', 300000);
    wide[300009] = 0;
    expect_refusal(wide, SHARC_ERR_TOO_LARGE, "MiB of paths");
    free(wide);
    expect_refusal(NULL, SHARC_ERR(EINVAL), "NULL");
}
END_TEST

static char *dir;

static void touch(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    ck_assert_int_eq(tu_write_file(path, "", 0), 0);
}

static int find(sharc__dataset *d, sharc_layout layout)
{
    const char *paths[] = {dir};
    return sharc__dataset_find(d, &ctx, paths, 1, layout, 1 << 20);
}

START_TEST(shar_fields_group_and_count)
{
    dir = tu_mkdtemp();
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "cuts.%06d.jsonl.gz", i);
        touch(name);
        snprintf(name, sizeof name, "recording.%06d.tar", i);
        touch(name);
        snprintf(name, sizeof name, "recording.%06d.tar.idx", i);
        touch(name);
        snprintf(name, sizeof name, "lang_id.%06d.jsonl.gz", i);
        touch(name);
    }
    touch("README.md");
    ck_assert_int_eq(tu_sh("mkdir '%s/old' && mkfifo '%s/pipe'", dir, dir), 0);
    sharc__dataset d;
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_AUTO), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_SHAR);
    ck_assert_uint_eq(d.n_shards, 3);
    /* README.md, old/ and pipe; the .idx sidecars are Lhotse's */
    ck_assert_uint_eq(d.n_ignored, 3);
    ck_assert_ptr_nonnull(strstr(d.shards[2].meta_path, "cuts.000002.jsonl.gz"));
    ck_assert_ptr_nonnull(strstr(d.shards[2].audio_path, "recording.000002.tar"));
    ck_assert_uint_eq(d.shards[1].n_fields, 1);
    ck_assert_str_eq(d.shards[1].fields[0].name, "lang_id");
    ck_assert_int_eq(d.shards[1].fields[0].is_tar, 0);
    sharc__dataset_free(&d, &ctx);
    /* Shards of other layouts beside numbered cuts files are no Shar fields (audio_0 would
     * pair with cuts.000000 by position): ignored, each named in a warning. */
    touch("audio_0.tar");
    touch("shard-000000.tar.gz");
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_AUTO), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_SHAR);
    ck_assert_uint_eq(d.n_shards, 3);
    ck_assert_uint_eq(d.n_ignored, 5);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(d.shards[i].n_fields, 1);
        ck_assert_str_eq(d.shards[i].fields[0].name, "lang_id");
    }
    sharc__dataset_free(&d, &ctx);
    ck_assert_int_eq(tu_sh("rm '%s/audio_0.tar' '%s/shard-000000.tar.gz'", dir, dir), 0);
    /* Files given one by one, out of order, pair by name all the same. */
    char given[6][600];
    const char *order[6];
    for (int i = 0; i < 3; i++) {
        snprintf(given[i], sizeof given[i], "%s/recording.%06d.tar", dir, 2 - i);
        snprintf(given[3 + i], sizeof given[3 + i], "%s/cuts.%06d.jsonl.gz", dir, i);
    }
    for (int i = 0; i < 6; i++)
        order[i] = given[i];
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, order, 6, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_uint_eq(d.n_shards, 3);
    for (int i = 0; i < 3; i++) {
        char want[64];
        snprintf(want, sizeof want, "recording.%06d.tar", i);
        ck_assert_ptr_nonnull(strstr(d.shards[i].audio_path, want));
        snprintf(want, sizeof want, "cuts.%06d.jsonl.gz", i);
        ck_assert_ptr_nonnull(strstr(d.shards[i].meta_path, want));
    }
    sharc__dataset_free(&d, &ctx);
    /* A field missing a shard that another has pairs nothing by position. */
    snprintf(given[0], sizeof given[0], "%s/recording.%06d.tar", dir, 1);
    const char *skewed[] = {given[0], given[3]}; /* recording 1 with cuts 0 */
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, skewed, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "recording.000001.tar pairs with") &&
                      strstr(ctx.error, "but their shard numbers differ"),
                  "%s", ctx.error);
    /* One more lang_id shard than cuts shards. */
    touch("lang_id.000003.jsonl.gz");
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_AUTO), SHARC_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ctx.error, "lang_id has 4 shards but cuts has 3"));
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

START_TEST(nemo_ids_must_match)
{
    dir = tu_mkdtemp();
    ck_assert_int_eq(tu_sh("mkdir '%s/sharded_manifests'", dir), 0);
    touch("audio_0.tar");
    touch("audio_1.tar");
    touch("audio_10.tar");
    touch("sharded_manifests/manifest_0.json");
    touch("sharded_manifests/manifest_1.json");
    touch("sharded_manifests/manifest_10.json");
    sharc__dataset d;
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_AUTO), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_NEMO);
    ck_assert_uint_eq(d.n_shards, 3);
    /* Numeric order, not lexicographic. */
    ck_assert_int_eq(d.shards[2].nemo_shard_id, 10);
    ck_assert_ptr_nonnull(strstr(d.shards[2].meta_path, "manifest_10.json"));
    sharc__dataset_free(&d, &ctx);
    touch("audio_11.tar");
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_AUTO), SHARC_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ctx.error, "has no manifest_11.json"));
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Shard ids are found where NeMo's patterns find them (re.search of audio[^/]*_(\d+)[^/]*\.tar
 * and manifest[^/]*_(\d+)[^/]*\.json): prefixed names, and manifests as .jsonl or
 * compressed. Such tars next to such manifests are NeMo's, not WebDataset shards. */
START_TEST(nemo_names_as_nemo_finds_them)
{
    static const char *const sets[][4] = {
        {"en_audio_0.tar", "en_audio_1.tar", "en_manifest_0.json", "en_manifest_1.json"},
        {"audio_0.tar", "audio_1.tar", "manifest_0.jsonl", "manifest_1.jsonl"},
        {"audio_0.tar", "audio_1.tar", "manifest_0.json.gz", "manifest_1.jsonl.gz"},
        {"train_audio_0.tar.gz", "train_audio_1.tar.gz", "train_manifest_0.json",
         "train_manifest_1.json"},
    };
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        dir = tu_mkdtemp();
        for (int i = 0; i < 4; i++)
            touch(sets[k][i]);
        sharc__dataset d;
        ck_assert_msg(find(&d, SHARC_LAYOUT_AUTO) == 0, "set %zu: %s", k, ctx.error);
        ck_assert_int_eq(d.layout, SHARC_LAYOUT_NEMO);
        ck_assert_uint_eq(d.n_shards, 2);
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(d.shards[i].nemo_shard_id, i);
            ck_assert_int_eq(d.shards[i].nemo_in_memory, 0);
            ck_assert_ptr_nonnull(strstr(d.shards[i].audio_path, sets[k][i]));
            ck_assert_ptr_nonnull(strstr(d.shards[i].meta_path, sets[k][2 + i]));
        }
        sharc__dataset_free(&d, &ctx);
        tu_rm_rf(dir);
        free(dir);
    }
    /* One manifest for all shards, whatever its name holds (NeMo groups a lone manifest by
     * shard_id), also next to tars that only NeMo's pattern finds an id in. */
    static const char *const aggregated[][3] = {
        {"audio_0.tar", "audio_1.tar", "tarred_audio_manifest_16k.json"},
        {"en_audio_0.tar", "en_audio_1.tar", "tarred_audio_manifest.json"},
    };
    for (size_t k = 0; k < 2; k++) {
        dir = tu_mkdtemp();
        for (int i = 0; i < 3; i++)
            touch(aggregated[k][i]);
        sharc__dataset d;
        ck_assert_msg(find(&d, SHARC_LAYOUT_AUTO) == 0, "aggregated %zu: %s", k, ctx.error);
        ck_assert_int_eq(d.layout, SHARC_LAYOUT_NEMO);
        ck_assert_uint_eq(d.n_shards, 2);
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(d.shards[i].nemo_in_memory, 1);
            ck_assert_ptr_nonnull(strstr(d.shards[i].meta_path, aggregated[k][2]));
        }
        sharc__dataset_free(&d, &ctx);
        tu_rm_rf(dir);
        free(dir);
    }
    /* Tars that only NeMo's pattern finds an id in, with no manifest: WebDataset shards. */
    dir = tu_mkdtemp();
    touch("speech_audio_0.tar");
    touch("speech_audio_1.tar");
    sharc__dataset d;
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_AUTO), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_WDS);
    sharc__dataset_free(&d, &ctx);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* NeMo's bucketing datasets repeat shard ids (bucket1/audio_0.tar, bucket2/audio_0.tar): then
 * each directory is a dataset of its own, its manifests beside its tars, under its
 * sharded_manifests/, or one for all its shards. Unique ids pair across directories. */
START_TEST(nemo_buckets_repeat_shard_ids)
{
    dir = tu_mkdtemp();
    ck_assert_int_eq(tu_sh("cd '%s' && mkdir -p b1/sharded_manifests b2 b3 m", dir), 0);
    touch("b1/audio_0.tar");
    touch("b1/audio_1.tar");
    touch("b1/sharded_manifests/manifest_0.json");
    touch("b1/sharded_manifests/manifest_1.json");
    touch("b2/audio_0.tar");
    touch("b2/manifest_0.json");
    touch("b3/audio_0.tar");
    char path[700], b[4][600];
    snprintf(path, sizeof path, "%s/b3/tarred_audio_manifest.json", dir);
    const char *rows = "{\"audio_filepath\": \"x.flac\", \"duration\": 1, \"shard_id\": 0}\n";
    ck_assert_int_eq(tu_write_file(path, rows, strlen(rows)), 0);
    for (int i = 0; i < 3; i++)
        snprintf(b[i], sizeof b[i], "%s/b%d", dir, i + 1);
    const char *paths[] = {b[0], b[1], b[2]};
    sharc__dataset d;
    ck_assert_msg(sharc__dataset_find(&d, &ctx, paths, 3, SHARC_LAYOUT_AUTO, 1 << 20) == 0, "%s",
                  ctx.error);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_NEMO);
    ck_assert_uint_eq(d.n_shards, 4);
    const char *tars[] = {"b1/audio_0.tar", "b1/audio_1.tar", "b2/audio_0.tar", "b3/audio_0.tar"};
    const char *mans[] = {"b1/sharded_manifests/manifest_0.json",
                          "b1/sharded_manifests/manifest_1.json", "b2/manifest_0.json",
                          "b3/tarred_audio_manifest.json"};
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_nonnull(strstr(d.shards[i].audio_path, tars[i]));
        ck_assert_ptr_nonnull(strstr(d.shards[i].meta_path, mans[i]));
    }
    ck_assert_int_eq(d.shards[3].nemo_in_memory, 1);
    ck_assert_ptr_nonnull(strstr(sharc__buf_str(&d.shards[3].nemo_rows), "x.flac"));
    sharc__dataset_free(&d, &ctx);
    /* A directory of manifests without tars is a dataset without shards. */
    touch("m/manifest_0.json");
    snprintf(b[3], sizeof b[3], "%s/m/manifest_0.json", dir);
    const char *more[] = {b[0], b[1], b[3]};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, more, 3, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "m/manifest_0.json has no audio_N.tar") != NULL, "%s",
                  ctx.error);
    /* Paths relative to a bucket's directory: its sharded_manifests/ is its own. */
    char here[1024], b2[600];
    ck_assert_ptr_nonnull(getcwd(here, sizeof here));
    ck_assert_int_eq(chdir(b[0]), 0);
    snprintf(b2, sizeof b2, "%s", "../b2/audio_0.tar");
    const char *relative[] = {"audio_0.tar",
                              "audio_1.tar",
                              "sharded_manifests/manifest_0.json",
                              "sharded_manifests/manifest_1.json",
                              b2,
                              "../b2/manifest_0.json"};
    ck_assert_msg(sharc__dataset_find(&d, &ctx, relative, 6, SHARC_LAYOUT_AUTO, 1 << 20) == 0, "%s",
                  ctx.error);
    ck_assert_uint_eq(d.n_shards, 3);
    ck_assert_str_eq(d.shards[2].meta_path, "../b2/manifest_0.json");
    sharc__dataset_free(&d, &ctx);
    ck_assert_int_eq(chdir(here), 0);
    /* Tars in one directory and their manifests in another pair by id when ids are unique. */
    char tar[700];
    snprintf(tar, sizeof tar, "%s/b3/audio_0.tar", dir);
    const char *split[] = {tar, b[3]};
    ck_assert_msg(sharc__dataset_find(&d, &ctx, split, 2, SHARC_LAYOUT_AUTO, 1 << 20) == 0, "%s",
                  ctx.error);
    ck_assert_uint_eq(d.n_shards, 1);
    ck_assert_str_eq(d.shards[0].meta_path, b[3]);
    sharc__dataset_free(&d, &ctx);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

START_TEST(nemo_aggregate_manifest_grouped_by_shard_id)
{
    dir = tu_mkdtemp();
    touch("audio_0.tar");
    touch("audio_1.tar");
    char path[512];
    snprintf(path, sizeof path, "%s/tarred_audio_manifest.json", dir);
    const char *rows = "{\"audio_filepath\": \"a.flac\", \"duration\": 1, \"shard_id\": 1}\n"
                       "{\"audio_filepath\": \"b.flac\", \"duration\": 1, \"shard_id\": 0}\n"
                       "{\"audio_filepath\": \"c.flac\", \"duration\": 1, \"shard_id\": 1}\n";
    ck_assert_int_eq(tu_write_file(path, rows, strlen(rows)), 0);
    sharc__dataset d;
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_NEMO), 0);
    ck_assert_uint_eq(d.n_shards, 2);
    ck_assert_int_eq(d.shards[1].nemo_in_memory, 1);
    ck_assert_ptr_nonnull(strstr(sharc__buf_str(&d.shards[1].nemo_rows), "a.flac"));
    ck_assert_ptr_nonnull(strstr(sharc__buf_str(&d.shards[1].nemo_rows), "c.flac"));
    ck_assert_ptr_null(strstr(sharc__buf_str(&d.shards[1].nemo_rows), "b.flac"));
    sharc__dataset_free(&d, &ctx);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Fewer shards than slots: each slot reads one shard, and the slots that read the same one
 * keep disjoint entries of it, which together are all of them. */
START_TEST(cut_share_gives_every_entry_to_one_slot)
{
    sharc__dataset d = {0};
    uint32_t order[8];
    for (size_t n = 1; n <= 8; n++) {
        d.n_shards = n;
        for (int slots = 1; slots <= 20; slots++) {
            for (uint64_t epoch = 0; epoch < 3; epoch++) {
                int owner[8][40];
                memset(owner, -1, sizeof owner);
                for (int s = 0; s < slots; s++) {
                    size_t k = sharc__dataset_epoch_order(&d, 9, epoch, 1, s, slots, order);
                    uint32_t every, first;
                    sharc__dataset_cut_share(n, s, slots, &every, &first);
                    ck_assert_uint_ge(k, 1);
                    ck_assert(every >= 1 && first < every);
                    if ((size_t)slots > n)
                        ck_assert_uint_eq(k, 1);
                    else
                        ck_assert_uint_eq(every, 1);
                    for (size_t i = 0; i < k; i++)
                        for (int e = 0; e < 40; e++) {
                            if ((uint32_t)e % every != first)
                                continue;
                            ck_assert_msg(owner[order[i]][e] < 0,
                                          "%zu shards, %d slots: entry %d of shard %u goes to "
                                          "slots %d and %d",
                                          n, slots, e, order[i], owner[order[i]][e], s);
                            owner[order[i]][e] = s;
                        }
                }
                for (size_t sh = 0; sh < n; sh++)
                    for (int e = 0; e < 40; e++)
                        ck_assert_msg(owner[sh][e] >= 0,
                                      "%zu shards, %d slots: entry %d of "
                                      "shard %zu goes to no slot",
                                      n, slots, e, sh);
            }
        }
    }
}
END_TEST

START_TEST(epoch_order_permutes_and_splits)
{
    sharc__dataset d = {.layout = SHARC_LAYOUT_WDS, .n_shards = 10};
    uint32_t a[10], b[10], c[10], s0[10], s1[10];
    ck_assert_uint_eq(sharc__dataset_epoch_order(&d, 5, 0, 0, 0, 1, a), 10);
    for (uint32_t i = 0; i < 10; i++)
        ck_assert_uint_eq(a[i], i);
    ck_assert_uint_eq(sharc__dataset_epoch_order(&d, 5, 0, 1, 0, 1, a), 10);
    ck_assert_uint_eq(sharc__dataset_epoch_order(&d, 5, 0, 1, 0, 1, b), 10);
    ck_assert_uint_eq(sharc__dataset_epoch_order(&d, 5, 1, 1, 0, 1, c), 10);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    ck_assert_int_ne(memcmp(a, c, sizeof a), 0);
    /* Each index once. */
    int seen[10] = {0};
    for (int i = 0; i < 10; i++)
        seen[a[i]]++;
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(seen[i], 1);
    /* Slots take positions i % dp_size of the same permutation. */
    ck_assert_uint_eq(sharc__dataset_epoch_order(&d, 5, 0, 1, 0, 3, s0), 4);
    ck_assert_uint_eq(sharc__dataset_epoch_order(&d, 5, 0, 1, 1, 3, s1), 3);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(s0[i], a[3 * i]);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(s1[i], a[3 * i + 1]);
}
END_TEST

/* Every path given contributes shards: a NeMo directory next to a Shar one is refused, not
 * left out, as is a directory of stray files; a NeMo dataset given as its tars and its
 * manifests in two paths is one dataset. */
START_TEST(every_path_counts)
{
    dir = tu_mkdtemp();
    ck_assert_int_eq(tu_sh("cd '%s' && mkdir shar nemo nemo/sharded_manifests junk", dir), 0);
    touch("shar/cuts.000000.jsonl");
    touch("shar/recording.000000.tar");
    touch("nemo/audio_0.tar");
    touch("nemo/sharded_manifests/manifest_0.json");
    touch("junk/notes.txt");
    char shar[512], nemo[512], junk[512], tars[512], mans[512];
    snprintf(shar, sizeof shar, "%s/shar", dir);
    snprintf(nemo, sizeof nemo, "%s/nemo", dir);
    snprintf(junk, sizeof junk, "%s/junk", dir);
    snprintf(tars, sizeof tars, "%s/nemo/audio_{0..0}.tar", dir);
    snprintf(mans, sizeof mans, "%s/nemo/sharded_manifests", dir);
    sharc__dataset d;
    const char *mixed[] = {shar, nemo};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, mixed, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    char want[700];
    snprintf(want, sizeof want, "%s holds nemo shards, and the dataset is read as shar", nemo);
    ck_assert_msg(strstr(ctx.error, want), "%s", ctx.error);
    /* A pattern behaves as its matches given one by one: a match of another layout is an
     * error naming it and the pattern, not left out with a warning. */
    char pat[600], pat_want[1400];
    const char *pats[] = {pat};
    const char *const forms[] = {"%s/{shar,nemo}", "%s/{nemo,shar}", "%s/*/*"};
    const char *const offender[] = {"%s/nemo", "%s/nemo", "%s/nemo/audio_0.tar"};
    for (int k = 0; k < 3; k++) {
        snprintf(pat, sizeof pat, forms[k], dir);
        ck_assert_int_eq(sharc__dataset_find(&d, &ctx, pats, 1, SHARC_LAYOUT_AUTO, 1 << 20),
                         SHARC_ERR_FORMAT);
        char match[600];
        snprintf(match, sizeof match, offender[k], dir);
        snprintf(pat_want, sizeof pat_want,
                 "%s (matched by %s) holds %s shards, and the dataset is read as shar (from the "
                 "other paths): one layout is read at a time",
                 match, pat, k == 2 ? "wds" : "nemo");
        ck_assert_str_eq(ctx.error, pat_want);
    }
    /* The junk directory among the matches is an error too, as it is when given (it comes
     * before the NeMo one in the order of the matches). */
    snprintf(pat, sizeof pat, "%s/*", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, pats, 1, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    snprintf(pat_want, sizeof pat_want,
             "%s (matched by %s): none of its files is part of the dataset (read as shar)", junk,
             pat);
    ck_assert_str_eq(ctx.error, pat_want);
    const char *swapped[] = {nemo, shar};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, swapped, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "one layout is read at a time"), "%s", ctx.error);
    const char *with_junk[] = {shar, junk};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, with_junk, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: none of its files is part of the dataset (read as shar)",
             junk);
    ck_assert_msg(strstr(ctx.error, want), "%s", ctx.error);
    /* NeMo's tars without their manifests are not taken for WebDataset (no transcripts),
     * unless asked for. */
    const char *tars_alone[] = {tars};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, tars_alone, 1, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "no NeMo manifest is given with them") &&
                      strstr(ctx.error, "--layout wds"),
                  "%s", ctx.error);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, tars_alone, 1, SHARC_LAYOUT_WDS, 1 << 20), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_WDS);
    sharc__dataset_free(&d, &ctx);
    const char *split[] = {tars, mans};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, split, 2, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_NEMO);
    ck_assert_uint_eq(d.n_shards, 1);
    sharc__dataset_free(&d, &ctx);
    /* The same shards twice would be read twice per epoch. */
    const char *twice[] = {shar, shar};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, twice, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "000000.") && strstr(ctx.error, " is found twice"), "%s",
                  ctx.error);
    /* A Shar file given with its directory: the same, not a count of shards that differ. */
    char one[700];
    snprintf(one, sizeof one, "%s/cuts.000000.jsonl", shar);
    const char *file_and_dir[] = {shar, one};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, file_and_dir, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "cuts.000000.jsonl is found twice"), "%s", ctx.error);
    /* A cuts file alone: its recording files are asked for. */
    const char *cuts_alone[] = {one};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, cuts_alone, 1, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "no recording.*.tar shards to go with") &&
                      strstr(ctx.error, "give the Shar directory"),
                  "%s", ctx.error);
    /* Also when spelled otherwise, or through a link. */
    char other[600];
    snprintf(other, sizeof other, "%s/./shar/", dir);
    const char *respelled[] = {shar, other};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, respelled, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "are the same file"), "%s", ctx.error);
    ck_assert_int_eq(tu_sh("ln -s shar '%s/link'", dir), 0);
    snprintf(other, sizeof other, "%s/link", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, respelled, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "are the same file"), "%s", ctx.error);
    /* A file given by itself may be a sidecar the layout does not read (a shell glob). */
    touch("shar/cuts.000000.jsonl.idx");
    touch("shar/README.md");
    snprintf(other, sizeof other, "%s/shar/cuts.000000.jsonl.idx", dir);
    char readme[600], cuts[600], rec[600];
    snprintf(readme, sizeof readme, "%s/shar/README.md", dir);
    snprintf(cuts, sizeof cuts, "%s/shar/cuts.000000.jsonl", dir);
    snprintf(rec, sizeof rec, "%s/shar/recording.000000.tar", dir);
    const char *glob[] = {readme, cuts, other, rec};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, glob, 4, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_uint_eq(d.n_shards, 1);
    sharc__dataset_free(&d, &ctx);
    /* A Shar recording tar alone is not taken for a WebDataset shard (its recording
     * manifests would pass for the samples' metadata), unless asked for; a WebDataset shard
     * named like a Shar field other than recording is read as one. */
    const char *rec_alone[] = {rec};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, rec_alone, 1, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "recording.000000.tar: the tars are named as Lhotse Shar "
                                    "recording shards") &&
                      strstr(ctx.error, "no cuts.NNNNNN.jsonl[.gz] is given") &&
                      strstr(ctx.error, "--layout wds"),
                  "%s", ctx.error);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, rec_alone, 1, SHARC_LAYOUT_WDS, 1 << 20), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_WDS);
    sharc__dataset_free(&d, &ctx);
    touch("junk/train.000000.tar");
    char wds[600];
    snprintf(wds, sizeof wds, "%s/junk/train.000000.tar", dir);
    const char *wds_alone[] = {wds};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, wds_alone, 1, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_WDS);
    sharc__dataset_free(&d, &ctx);
    /* A glob over two Shar directories interleaves them: still one directory at a time, in
     * the order the directories first came. */
    ck_assert_int_eq(tu_sh("cd '%s' && mkdir shar2 && cp shar/cuts.000000.jsonl "
                           "shar/recording.000000.tar shar2/",
                           dir),
                     0);
    char cuts2[600], rec2[600];
    snprintf(cuts2, sizeof cuts2, "%s/shar2/cuts.000000.jsonl", dir);
    snprintf(rec2, sizeof rec2, "%s/shar2/recording.000000.tar", dir);
    const char *interleaved[] = {cuts2, cuts, rec2, rec};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, interleaved, 4, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_uint_eq(d.n_shards, 2);
    ck_assert_str_eq(d.shards[0].audio_path, rec2);
    ck_assert_str_eq(d.shards[0].meta_path, cuts2);
    ck_assert_str_eq(d.shards[1].audio_path, rec);
    sharc__dataset_free(&d, &ctx);
    snprintf(tars, sizeof tars, "%s/nemo/audio_{0,0}.tar", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, split, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Wildcards * and ? in a path that does not exist as given match files, in byte order,
 * after braces are expanded; a pattern that matches nothing, or nothing of the dataset, is
 * an error. A path that exists is taken as it is, wildcard characters and all. */
START_TEST(wildcard_patterns)
{
    dir = tu_mkdtemp();
    ck_assert_int_eq(tu_sh("cd '%s' && mkdir a b 'odd*' 'q (v2)' 'r[1]' 'back\\slash' loop && "
                           "ln -s self loop/self",
                           dir),
                     0);
    static const char *const shards[] = {
        "a/shard-000002.tar", "b/shard-000001.tar", "a/shard-000001.tar", "odd*/x.tar",
        "q (v2)/x.tar",       "r[1]/x.tar",         "back\\slash/x.tar"};
    for (size_t i = 0; i < sizeof shards / sizeof *shards; i++)
        touch(shards[i]);
    /* Created in an order that a directory listing does not give sorted by chance. */
    for (int i = 0; i < 31; i++) {
        char name[64];
        snprintf(name, sizeof name, "a/shard-0000%02d.tar", (i * 7) % 31 + 10);
        touch(name);
    }
    touch("a/notes.txt");
    char pattern[600], other[600];
    const char *paths[] = {pattern, other};
    sharc__dataset d;
    snprintf(pattern, sizeof pattern, "%s/a/shard-*.tar", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, paths, 1, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_int_eq(d.layout, SHARC_LAYOUT_WDS);
    ck_assert_uint_eq(d.n_shards, 33);
    for (size_t i = 0; i < 33; i++) {
        char want[64];
        snprintf(want, sizeof want, "/a/shard-0000%02zu.tar", i < 2 ? i + 1 : i + 8);
        ck_assert_msg(strstr(d.shards[i].audio_path, want), "shard %zu: %s, not %s", i,
                      d.shards[i].audio_path, want);
    }
    sharc__dataset_free(&d, &ctx);
    /* Braces first, then wildcards; ? is one character. */
    snprintf(pattern, sizeof pattern, "%s/{a,b}/shard-00000?.tar", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, paths, 1, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_uint_eq(d.n_shards, 3);
    ck_assert_ptr_nonnull(strstr(d.shards[0].audio_path, "/a/shard-000001.tar"));
    ck_assert_ptr_nonnull(strstr(d.shards[1].audio_path, "/a/shard-000002.tar"));
    ck_assert_ptr_nonnull(strstr(d.shards[2].audio_path, "/b/shard-000001.tar"));
    sharc__dataset_free(&d, &ctx);
    /* A directory matched is listed, as when it is given. */
    snprintf(pattern, sizeof pattern, "%s/?", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, paths, 1, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_uint_eq(d.n_shards, 34);
    sharc__dataset_free(&d, &ctx);
    /* An existing name with a wildcard character in it is that file. */
    snprintf(pattern, sizeof pattern, "%s/odd*", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, paths, 1, SHARC_LAYOUT_AUTO, 1 << 20), 0);
    ck_assert_uint_eq(d.n_shards, 1);
    ck_assert_ptr_nonnull(strstr(d.shards[0].audio_path, "odd*/x.tar"));
    sharc__dataset_free(&d, &ctx);
    /* Brackets that are not NeMo's braces around a range, and backslashes, are parts of
     * names. */
    static const char *const literal[] = {"q (v2)/*.tar", "r[1]/*.tar", "back\\slash/*.tar"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(pattern, sizeof pattern, "%s/%s", dir, literal[i]);
        ck_assert_msg(sharc__dataset_find(&d, &ctx, paths, 1, SHARC_LAYOUT_AUTO, 1 << 20) == 0,
                      "%s: %s", pattern, ctx.error);
        ck_assert_uint_eq(d.n_shards, 1);
        sharc__dataset_free(&d, &ctx);
    }
    /* Nothing matched. */
    snprintf(pattern, sizeof pattern, "%s/a/shard-*.tar.gz", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, paths, 1, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR(ENOENT));
    ck_assert_msg(strstr(ctx.error, "shard-*.tar.gz: no file matches the pattern"), "%s",
                  ctx.error);
    /* A directory on the way that cannot be read is an error, not fewer shards. */
    snprintf(pattern, sizeof pattern, "%s/*/self/*.tar", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, paths, 1, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR(ELOOP));
    ck_assert_msg(strstr(ctx.error, "cannot read") && strstr(ctx.error, "loop/self") &&
                      strstr(ctx.error, "to match the pattern"),
                  "%s", ctx.error);
    /* Matched, but none of the files is part of the dataset. */
    snprintf(pattern, sizeof pattern, "%s/a/shard-00000?.tar", dir);
    snprintf(other, sizeof other, "%s/a/*.txt", dir);
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, paths, 2, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR_FORMAT);
    ck_assert_msg(strstr(ctx.error, "*.txt: none of its files is part of the dataset"), "%s",
                  ctx.error);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

START_TEST(nothing_found)
{
    dir = tu_mkdtemp();
    touch("notes.txt");
    sharc__dataset d;
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_AUTO), SHARC_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ctx.error, "no shards found"));
    /* A layout given that the files do not have: the error names where it looked. */
    char want[700];
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_NEMO), SHARC_ERR_FORMAT);
    snprintf(want, sizeof want, "no NeMo audio_N.tar shards found in %s", dir);
    ck_assert_str_eq(ctx.error, want);
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_SHAR), SHARC_ERR_FORMAT);
    snprintf(want, sizeof want, "no Shar shards (cuts.NNNNNN.jsonl) found in %s", dir);
    ck_assert_str_eq(ctx.error, want);
    ck_assert_int_eq(find(&d, SHARC_LAYOUT_WDS), SHARC_ERR_FORMAT);
    snprintf(want, sizeof want, "no tar shards found in %s", dir);
    ck_assert_str_eq(ctx.error, want);
    const char *missing[] = {"/nonexistent/sharc/path"};
    ck_assert_int_eq(sharc__dataset_find(&d, &ctx, missing, 1, SHARC_LAYOUT_AUTO, 1 << 20),
                     SHARC_ERR(ENOENT));
    ck_assert_ptr_nonnull(strstr(ctx.error, "/nonexistent/sharc/path"));
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dataset");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, brace_patterns);
    tcase_add_test(tc, shar_fields_group_and_count);
    tcase_add_test(tc, nemo_ids_must_match);
    tcase_add_test(tc, nemo_names_as_nemo_finds_them);
    tcase_add_test(tc, nemo_buckets_repeat_shard_ids);
    tcase_add_test(tc, nemo_aggregate_manifest_grouped_by_shard_id);
    tcase_add_test(tc, epoch_order_permutes_and_splits);
    tcase_add_test(tc, cut_share_gives_every_entry_to_one_slot);
    tcase_add_test(tc, nothing_found);
    tcase_add_test(tc, wildcard_patterns);
    tcase_add_test(tc, every_path_counts);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

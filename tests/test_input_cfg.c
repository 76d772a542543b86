/*
 * NeMo's input_cfg: entries, groups, tags, weights as NeMo computes them (temperature per
 * level), and every malformed case refused with a message naming the entry.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/input_cfg.h"
#include "testutil.h"

static sharc__ctx ctx;

static void setup(void)
{
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
}

static void parse_ok(sharc__input_cfg *c, const char *text)
{
    int rc = sharc__input_cfg_parse(c, &ctx, "cfg.yaml", text, strlen(text));
    ck_assert_msg(rc == 0, "%s", ctx.error);
}

static void expect_error(const char *text, const char *message)
{
    sharc__input_cfg c;
    ck_assert_int_eq(sharc__input_cfg_parse(&c, &ctx, "cfg.yaml", text, strlen(text)),
                     SHARC_ERR_FORMAT);
    ck_assert_str_eq(ctx.error, message);
    ck_assert_uint_eq(c.n_sources, 0);
}

START_TEST(types_paths_tags)
{
    sharc__input_cfg c;
    parse_ok(&c, "- type: lhotse_shar\n"
                 "  shar_path: /d/shar\n"
                 "  weight: 3\n"
                 "  tags: {lang: en, task: asr}\n"
                 "- type: nemo_tarred\n"
                 "  manifest_filepath: /d/nemo/manifest__OP_0..1_CL_.json\n"
                 "  tarred_audio_filepaths: /d/nemo/audio__OP_0..1_CL_.tar\n"
                 "  weight: 1\n"
                 "- type: group\n"
                 "  weight: 1\n"
                 "  tags: {lang: de, domain: news}\n"
                 "  input_cfg:\n"
                 "    - type: wds\n"
                 "      paths: [/d/wds/a.tar, /d/wds/b.tar]\n"
                 "      weight: 2\n"
                 "      tags: {lang: fr}\n");
    ck_assert_uint_eq(c.n_sources, 3);
    ck_assert_int_eq(c.depth, 2);
    ck_assert_int_eq(c.sources[0].layout, SHARC_LAYOUT_SHAR);
    ck_assert_uint_eq(c.sources[0].n_paths, 1);
    ck_assert_str_eq(c.sources[0].paths[0], "/d/shar");
    ck_assert_uint_eq(c.sources[0].n_tags, 2);
    ck_assert_str_eq(c.sources[0].tag_names[0], "language");
    ck_assert_str_eq(c.sources[0].tag_values[0], "en");
    ck_assert_str_eq(c.sources[0].tag_names[1], "task");
    ck_assert_str_eq(c.sources[0].tag_values[1], "asr");
    ck_assert_int_eq(c.sources[1].layout, SHARC_LAYOUT_NEMO);
    ck_assert_uint_eq(c.sources[1].n_paths, 2);
    ck_assert_str_eq(c.sources[1].paths[0], "/d/nemo/manifest__OP_0..1_CL_.json");
    ck_assert_str_eq(c.sources[1].paths[1], "/d/nemo/audio__OP_0..1_CL_.tar");
    ck_assert_uint_eq(c.sources[1].n_tags, 0);
    ck_assert_int_eq(c.sources[2].layout, SHARC_LAYOUT_WDS);
    ck_assert_str_eq(c.sources[2].where, "input_cfg[2].input_cfg[0]");
    ck_assert_uint_eq(c.sources[2].n_paths, 2);
    ck_assert_str_eq(c.sources[2].paths[1], "/d/wds/b.tar");
    /* The source's own tag wins over its group's; the group's others are inherited. */
    ck_assert_uint_eq(c.sources[2].n_tags, 2);
    ck_assert_str_eq(c.sources[2].tag_names[0], "language");
    ck_assert_str_eq(c.sources[2].tag_values[0], "fr");
    ck_assert_str_eq(c.sources[2].tag_names[1], "domain");
    ck_assert_str_eq(c.sources[2].tag_values[1], "news");
    double w[3];
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, NULL, w), 0);
    ck_assert_double_eq_tol(w[0], 3.0 / 5, 1e-12);
    ck_assert_double_eq_tol(w[1], 1.0 / 5, 1e-12);
    ck_assert_double_eq_tol(w[2], 1.0 / 5, 1e-12);
    sharc__input_cfg_free(&c, &ctx);
}
END_TEST

/* The same config as JSON (a YAML subset), in the mapping form. */
START_TEST(json_form)
{
    sharc__input_cfg c;
    parse_ok(&c, "{\"input_cfg\": [{\"type\": \"lhotse_shar\", \"shar_path\": [\"/a\", \"/b\"]},"
                 " {\"type\": \"wds\", \"paths\": \"/c\"}]}");
    ck_assert_uint_eq(c.n_sources, 2);
    ck_assert_uint_eq(c.sources[0].n_paths, 2);
    ck_assert(sharc__input_cfg_needs_counts(&c));
    /* Without weights they are cut counts. */
    double counts[2] = {300, 100}, w[2];
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, counts, w), 0);
    ck_assert_double_eq_tol(w[0], 0.75, 1e-12);
    ck_assert_double_eq_tol(w[1], 0.25, 1e-12);
    sharc__input_cfg_free(&c, &ctx);
}
END_TEST

/* NeMo: at each level w_i^T / sum_j w_j^T (temperature_reweighting), and a source's weight
 * the product along its path. The expected values are computed here from that formula. */
START_TEST(group_and_temperature)
{
    const char *tree = "  - type: group\n"
                       "    weight: 197\n"
                       "    input_cfg:\n"
                       "      - {type: lhotse_shar, shar_path: /it, weight: 197}\n"
                       "  - type: group\n"
                       "    weight: 2159\n"
                       "    input_cfg:\n"
                       "      - {type: lhotse_shar, shar_path: /ja_cv, weight: 544}\n"
                       "      - {type: lhotse_shar, shar_path: /ja_emilia, weight: 1615}\n";
    char text[2048];
    double w[3];
    sharc__input_cfg c;

    /* No temperature: products of the plain shares. */
    snprintf(text, sizeof text, "input_cfg:\n%s", tree);
    parse_ok(&c, text);
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, NULL, w), 0);
    ck_assert_double_eq_tol(w[0], 197.0 / 2356, 1e-12);
    ck_assert_double_eq_tol(w[1], 2159.0 / 2356 * 544 / 2159, 1e-12);
    ck_assert_double_eq_tol(w[2], 2159.0 / 2356 * 1615 / 2159, 1e-12);
    sharc__input_cfg_free(&c, &ctx);

    /* [1.0, 0.0]: the top level kept, the inner one equalised (NeMo's own test). */
    snprintf(text, sizeof text, "reweight_temperature: [1.0, 0.0]\ninput_cfg:\n%s", tree);
    parse_ok(&c, text);
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, NULL, w), 0);
    ck_assert_double_eq_tol(w[0], 197.0 / 2356, 1e-12);
    ck_assert_double_eq_tol(w[1], 2159.0 / 2356 * 0.5, 1e-12);
    ck_assert_double_eq_tol(w[2], 2159.0 / 2356 * 0.5, 1e-12);
    sharc__input_cfg_free(&c, &ctx);

    /* A scalar 0.5 applies at both levels. */
    snprintf(text, sizeof text, "reweight_temperature: 0.5\ninput_cfg:\n%s", tree);
    parse_ok(&c, text);
    ck_assert_int_eq(c.depth, 2);
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, NULL, w), 0);
    double top = sqrt(197) + sqrt(2159), in = sqrt(544) + sqrt(1615);
    ck_assert_double_eq_tol(w[0], sqrt(197) / top, 1e-12);
    ck_assert_double_eq_tol(w[1], sqrt(2159) / top * sqrt(544) / in, 1e-12);
    ck_assert_double_eq_tol(w[2], sqrt(2159) / top * sqrt(1615) / in, 1e-12);
    ck_assert_double_eq_tol(w[0] + w[1] + w[2], 1.0, 1e-12);
    sharc__input_cfg_free(&c, &ctx);
}
END_TEST

START_TEST(errors)
{
    expect_error("- {type: foo, paths: /a}\n",
                 "cfg.yaml: input_cfg[0]: unknown type 'foo' (lhotse_shar, nemo_tarred, wds "
                 "or group)");
    expect_error("- {type: wds, paths: /a}\n"
                 "- type: group\n"
                 "  input_cfg:\n"
                 "    - {type: wds, paths: /b}\n"
                 "    - {type: foo}\n",
                 "cfg.yaml: input_cfg[1].input_cfg[1]: unknown type 'foo' (lhotse_shar, "
                 "nemo_tarred, wds or group)");
    expect_error("- {type: wds, paths: /a, shuffle: true}\n",
                 "cfg.yaml: input_cfg[0]: unknown key 'shuffle'");
    expect_error("- {type: wds, shar_path: /a}\n",
                 "cfg.yaml: input_cfg[0]: key 'shar_path' does not belong to type 'wds'");
    expect_error("- {paths: /a}\n", "cfg.yaml: input_cfg[0]: missing type");
    expect_error("- {type: lhotse_shar}\n", "cfg.yaml: input_cfg[0]: missing shar_path");
    expect_error("- {type: wds}\n", "cfg.yaml: input_cfg[0]: missing paths");
    expect_error("- {type: nemo_tarred, tarred_audio_filepaths: /a.tar}\n",
                 "cfg.yaml: input_cfg[0]: missing manifest_filepath");
    expect_error("- {type: nemo_tarred, manifest_filepath: /m.json}\n",
                 "cfg.yaml: input_cfg[0]: missing tarred_audio_filepaths");
    expect_error("- {type: wds, paths: ''}\n", "cfg.yaml: input_cfg[0]: paths is empty");
    expect_error("- {type: wds, paths: []}\n", "cfg.yaml: input_cfg[0]: paths is an empty list");
    expect_error("- {type: group}\n",
                 "cfg.yaml: input_cfg[0]: missing input_cfg (a group's list of entries)");
    expect_error("- {type: group, input_cfg: []}\n", "cfg.yaml: input_cfg[0].input_cfg: is an "
                                                     "empty list");
    expect_error("- {type: wds, paths: /a, weight: -1}\n",
                 "cfg.yaml: input_cfg[0]: weight -1 is negative");
    expect_error("- {type: wds, paths: /a, weight: heavy}\n",
                 "cfg.yaml: input_cfg[0]: weight must be a number, not 'heavy'");
    expect_error("- {type: wds, paths: /a, weight: 0}\n- {type: wds, paths: /b, weight: 0}\n",
                 "cfg.yaml: input_cfg: every weight is zero");
    expect_error("- {type: wds, paths: /a, weight: 1}\n- {type: wds, paths: /b}\n",
                 "cfg.yaml: input_cfg[0]: has a weight but input_cfg[1] does not: give every "
                 "entry of a list a weight, or none");
    expect_error("- {type: wds, paths: /a}\n- {type: wds, paths: /b, weight: 2}\n",
                 "cfg.yaml: input_cfg[1]: has a weight but input_cfg[0] does not: give every "
                 "entry of a list a weight, or none");
    expect_error("- {type: wds, paths: /a, tags: [en]}\n",
                 "cfg.yaml: input_cfg[0]: tags must be a mapping, not a list");
    expect_error("reweight_temperature: [1, 0.5]\ninput_cfg:\n  - {type: wds, paths: /a}\n",
                 "cfg.yaml: reweight_temperature: has 2 values, but input_cfg nests 1 level: "
                 "give one per level, or one for all");
    expect_error("reweight_temperature: -1\ninput_cfg:\n  - {type: wds, paths: /a}\n",
                 "cfg.yaml: reweight_temperature: -1 is negative");
    expect_error("reweight_temperature: 0.5\ninput_cfg:\n"
                 "  - {type: wds, paths: /a, weight: 0}\n  - {type: wds, paths: /b, weight: 1}\n",
                 "cfg.yaml: input_cfg[0]: weight 0 cannot be reweighted by "
                 "reweight_temperature: weights must be positive");
    expect_error("shuffle: true\ninput_cfg: []\n",
                 "cfg.yaml: unknown key 'shuffle' (input_cfg, reweight_temperature)");
    expect_error("input_cfg: {type: wds}\n",
                 "cfg.yaml: input_cfg: must be a list of entries, not a mapping");
    expect_error("", "cfg.yaml: empty file: expected a list of entries (input_cfg)");
    expect_error("- [a\n", "cfg.yaml: line 2 column 1: did not find expected ',' or ']' while "
                           "parsing a flow sequence");
}
END_TEST

/* YAML aliases are refused where they stand, before anything is built: a file of a few
 * hundred bytes could otherwise expand to any number of sources. An anchor alone is
 * harmless. */
START_TEST(aliases_refused)
{
    expect_error("input_cfg:\n"
                 "  - &s {type: wds, paths: /x}\n"
                 "  - &g1 {type: group, input_cfg: [*s, *s, *s, *s, *s, *s, *s, *s, *s, *s]}\n"
                 "  - &g2 {type: group, input_cfg: [*g1, *g1, *g1, *g1, *g1, *g1, *g1, *g1]}\n"
                 "  - {type: group, input_cfg: [*g2, *g2, *g2, *g2, *g2, *g2, *g2, *g2]}\n",
                 "cfg.yaml: line 3 column 35: alias *s: an input_cfg takes no YAML aliases "
                 "(they can expand a short file without bound); write the entry out");
    expect_error("- {type: wds, paths: &p /a}\n- {type: wds, paths: *p}\n",
                 "cfg.yaml: line 2 column 22: alias *p: an input_cfg takes no YAML aliases "
                 "(they can expand a short file without bound); write the entry out");
    sharc__input_cfg c;
    parse_ok(&c, "- &a {type: wds, paths: /a}\n");
    ck_assert_uint_eq(c.n_sources, 1);
    sharc__input_cfg_free(&c, &ctx);
}
END_TEST

/* Text of `n` copies of `line`. */
static char *repeat(const char *head, const char *line, size_t n, const char *tail)
{
    size_t hl = strlen(head), ll = strlen(line), tl = strlen(tail);
    char *t = malloc(hl + ll * n + tl + 1);
    ck_assert_ptr_nonnull(t);
    memcpy(t, head, hl);
    for (size_t i = 0; i < n; i++)
        memcpy(t + hl + i * ll, line, ll);
    memcpy(t + hl + ll * n, tail, tl + 1);
    return t;
}

static void expect_repeated_error(const char *head, const char *line, size_t n, const char *tail,
                                  const char *message)
{
    char *t = repeat(head, line, n, tail);
    expect_error(t, message);
    free(t);
}

/* The bounds: entries, YAML nodes, nesting and bytes, each refused naming the limit; at the
 * entries' limit the weights are computed (in time linear in the entries). */
START_TEST(limits)
{
    char *t = repeat("", "- {type: wds, paths: /a}\n", 10000, "");
    sharc__input_cfg c;
    parse_ok(&c, t);
    ck_assert_uint_eq(c.n_sources, 10000);
    double *w = malloc(10000 * sizeof *w);
    ck_assert_ptr_nonnull(w);
    double counts[10000];
    for (size_t i = 0; i < 10000; i++)
        counts[i] = (double)(i % 2 + 1);
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, counts, w), 0);
    ck_assert_double_eq_tol(w[0], 1.0 / 15000, 1e-15);
    ck_assert_double_eq_tol(w[9999], 2.0 / 15000, 1e-15);
    free(w);
    sharc__input_cfg_free(&c, &ctx);
    free(t);

    expect_repeated_error("- type: group\n  input_cfg:\n", "    - {type: wds, paths: /a}\n", 10000,
                          "",
                          "cfg.yaml: input_cfg: more than 10000 entries (sources and groups "
                          "together), the limit");

    /* Just under the nodes' bound, one source's many paths are read at once. */
    t = repeat("- {type: wds, paths: [", "a,", 199989, "a]}\n");
    parse_ok(&c, t);
    ck_assert_uint_eq(c.sources[0].n_paths, 199990);
    sharc__input_cfg_free(&c, &ctx);
    free(t);
    expect_repeated_error("- {type: wds, paths: [", "a,", 200000, "a]}\n",
                          "cfg.yaml: line 1 column 400011: more than 200000 YAML nodes, the "
                          "limit for an input_cfg");
    expect_repeated_error("", "[", 65, "",
                          "cfg.yaml: line 1 column 65: YAML nested deeper than 64 levels, the "
                          "limit for an input_cfg");

    /* Bytes: from text as from a file, refused before the YAML is read. */
    ck_assert_int_eq(sharc__input_cfg_parse(&c, &ctx, "cfg.yaml", "", (size_t)16 << 20 | 1),
                     SHARC_ERR_FORMAT);
    ck_assert_str_eq(ctx.error, "cfg.yaml: larger than 16 MiB, the limit for an input_cfg");
    char *d = tu_mkdtemp(), path[256];
    snprintf(path, sizeof path, "%s/big.yaml", d);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ftruncate(fileno(f), ((off_t)16 << 20) + 1), 0);
    fclose(f);
    ck_assert_int_eq(sharc__input_cfg_load(&c, &ctx, path), SHARC_ERR_FORMAT);
    char want[512];
    snprintf(want, sizeof want, "%s: larger than 16 MiB, the limit for an input_cfg", path);
    ck_assert_str_eq(ctx.error, want);
    tu_rm_rf(d);
    free(d);
}
END_TEST

/* Weights near the ends of a double: normalised without overflow (by the largest of a
 * list, a temperature applied to the ratios), and those a double cannot hold are refused
 * saying so. */
START_TEST(extreme_weights)
{
    sharc__input_cfg c;
    double w[3];
    parse_ok(&c, "- {type: wds, paths: /a, weight: 1e308}\n"
                 "- {type: wds, paths: /b, weight: 1e308}\n");
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, NULL, w), 0);
    ck_assert_double_eq_tol(w[0], 0.5, 1e-15);
    ck_assert_double_eq_tol(w[1], 0.5, 1e-15);
    sharc__input_cfg_free(&c, &ctx);

    parse_ok(&c, "reweight_temperature: 2\ninput_cfg:\n"
                 "  - {type: wds, paths: /a, weight: 1e200}\n"
                 "  - {type: wds, paths: /b, weight: 1e200}\n"
                 "  - {type: wds, paths: /c, weight: 5e199}\n");
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, NULL, w), 0);
    ck_assert_double_eq_tol(w[0], 1 / 2.25, 1e-15);
    ck_assert_double_eq_tol(w[1], 1 / 2.25, 1e-15);
    ck_assert_double_eq_tol(w[2], 0.25 / 2.25, 1e-15);
    sharc__input_cfg_free(&c, &ctx);

    /* Tiny but normal weights, and a ratio whose power underflows: still a share. */
    parse_ok(&c, "reweight_temperature: 0.5\ninput_cfg:\n"
                 "  - {type: wds, paths: /a, weight: 1e-300}\n"
                 "  - {type: wds, paths: /b, weight: 4e-300}\n");
    ck_assert_int_eq(sharc__input_cfg_weights(&c, &ctx, NULL, w), 0);
    ck_assert_double_eq_tol(w[0], 1.0 / 3, 1e-15);
    ck_assert_double_eq_tol(w[1], 2.0 / 3, 1e-15);
    sharc__input_cfg_free(&c, &ctx);

    expect_error("- {type: wds, paths: /a, weight: 1e-320}\n- {type: wds, paths: /b, weight: 1}\n",
                 "cfg.yaml: input_cfg[0]: weight 1e-320 is too small to compute with (the "
                 "least is 2.2e-308; 0 leaves an entry out)");
    expect_error("- {type: wds, paths: /a, weight: 1e400}\n",
                 "cfg.yaml: input_cfg[0]: weight 1e400 is too large (the most is 1.8e+308)");
    expect_error("reweight_temperature: 4e-310\ninput_cfg:\n  - {type: wds, paths: /a}\n",
                 "cfg.yaml: reweight_temperature: its value 4e-310 is too small to compute "
                 "with (the least is 2.2e-308)");
}
END_TEST

/* YAML that would be read with another meaning than written is refused naming its line:
 * a top-level key twice, a second document, a null where a value is needed, a tag twice. */
START_TEST(other_meanings)
{
    expect_error("input_cfg:\n  - {type: wds, paths: /a}\n"
                 "reweight_temperature: 1\n"
                 "input_cfg:\n  - {type: wds, paths: /b}\n",
                 "cfg.yaml: line 4 column 1: input_cfg given twice (first on line 1)");
    expect_error("reweight_temperature: 1\nreweight_temperature: 2\n"
                 "input_cfg:\n  - {type: wds, paths: /b}\n",
                 "cfg.yaml: line 2 column 1: reweight_temperature given twice (first on "
                 "line 1)");
    expect_error("- {type: wds, paths: /a}\n---\n- {type: wds, paths: /b}\n",
                 "cfg.yaml: line 2 column 1: a second YAML document ('---'): an input_cfg "
                 "is one document");
    expect_error("- {type: wds, paths: /a, tags: {lang: ~}}\n",
                 "cfg.yaml: line 1 column 39: input_cfg[0]: tag 'lang' is null; give it a "
                 "value, or quote it ('~')");
    expect_error("- type: wds\n  paths: /a\n  tags:\n    task: null\n",
                 "cfg.yaml: line 4 column 11: input_cfg[0]: tag 'task' is null; give it a "
                 "value, or quote it ('~')");
    expect_error("- type: wds\n  paths: /a\n  tags:\n    lang:\n",
                 "cfg.yaml: line 4 column 10: input_cfg[0]: tag 'lang' is null; give it a "
                 "value, or quote it ('~')");
    expect_error("- {type: wds, paths: /a, tags: {lang: en, language: de}}\n",
                 "cfg.yaml: line 1 column 43: input_cfg[0]: tag 'language' given twice "
                 "('lang' is 'language')");
    expect_error("- {type: wds, paths: ~}\n", "cfg.yaml: input_cfg[0]: paths is empty");
    expect_error("- {type: wds, paths: /a, weight: ~}\n",
                 "cfg.yaml: input_cfg[0]: weight must be a number, not null");
    /* Quoted, the same characters are strings; one document may be marked as such. */
    sharc__input_cfg c;
    parse_ok(&c, "---\n- {type: wds, paths: /a, tags: {lang: '~', task: \"null\"}}\n...\n");
    ck_assert_str_eq(c.sources[0].tag_values[0], "~");
    ck_assert_str_eq(c.sources[0].tag_values[1], "null");
    sharc__input_cfg_free(&c, &ctx);
}
END_TEST

static void *bytes_alloc(void *cookie, size_t size, size_t align)
{
    *(size_t *)cookie += size;
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)
               ? NULL
               : p;
}

/* A group's tags are shared by its sources, not copied to each: a tag of 20 KB over 5000
 * sources costs 20 KB, not 100 MB (a file of 16 MiB could otherwise ask for terabytes). */
START_TEST(tags_shared_not_copied)
{
    char *value = malloc(20001);
    ck_assert_ptr_nonnull(value);
    memset(value, 'x', 20000);
    value[20000] = 0;
    char head[20100];
    snprintf(head, sizeof head, "- type: group\n  tags: {lang: en, note: %s}\n  input_cfg:\n",
             value);
    char *t = repeat(head, "    - {type: wds, paths: /a, tags: {task: asr}}\n", 5000, "");
    size_t allocated = 0;
    sharc_allocator counting = {&allocated, bytes_alloc, tu_free};
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx counted;
    sharc__ctx_init(&counted, &counting, &quiet);
    sharc__input_cfg c;
    ck_assert_int_eq(sharc__input_cfg_parse(&c, &counted, "cfg.yaml", t, strlen(t)), 0);
    ck_assert_uint_eq(c.n_sources, 5000);
    ck_assert_msg(allocated < ((size_t)4 << 20), "%zu bytes allocated", allocated);
    const sharc__input_source *last = &c.sources[4999];
    ck_assert_uint_eq(last->n_tags, 3);
    ck_assert_str_eq(last->tag_names[0], "language");
    ck_assert_str_eq(last->tag_values[0], "en");
    ck_assert_str_eq(last->tag_names[1], "note");
    ck_assert_str_eq(last->tag_values[1], value);
    ck_assert_str_eq(last->tag_names[2], "task");
    ck_assert_str_eq(last->tag_values[2], "asr");
    sharc__input_cfg_free(&c, &counted);
    free(t);
    free(value);
}
END_TEST

START_TEST(missing_file)
{
    sharc__input_cfg c;
    ck_assert_int_lt(sharc__input_cfg_load(&c, &ctx, "/nonexistent/cfg.yaml"), 0);
    ck_assert_str_eq(ctx.error,
                     "/nonexistent/cfg.yaml: cannot open input_cfg: No such file or directory");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("input_cfg");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, types_paths_tags);
    tcase_add_test(tc, json_form);
    tcase_add_test(tc, group_and_temperature);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, aliases_refused);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, extreme_weights);
    tcase_add_test(tc, other_meanings);
    tcase_add_test(tc, tags_shared_not_copied);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

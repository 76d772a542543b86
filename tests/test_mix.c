/*
 * Mixing datasets (input_cfg): three synthetic corpora of different layouts and sizes mixed
 * 0.6/0.3/0.1, the realised shares against the weights (chi-square), the sequence
 * reproducible and the same with 1 or 2 threads, tags on the cuts, finite mode, data
 * parallel slots, weights from cut counts, errors naming the entry, and 500 sources under
 * a small open-shard budget with file descriptors bounded.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/fetch.h"
#include "plan/dataset.h"
#include "plan/shards.h"
#include "sharc/sharc.h"
#include "walk/mix.h"
#include "testutil.h"

static char *dir;
static char cfg_path[700];

/* Cuts per corpus: Shar 6 x 20, NeMo 4 x 15, WebDataset 3 x 10. */
enum { SHAR_CUTS = 120, NEMO_CUTS = 60, WDS_CUTS = 30 };

/* Outside any test: a failure here stops the suite with its message. */
static void need(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "test_mix: %s\n", what);
        exit(1);
    }
}

static void write_cfg(const char *path, const char *weights[3], const char *extra)
{
    char w[3][64];
    for (int i = 0; i < 3; i++)
        snprintf(w[i], sizeof w[i], weights[i] ? "  weight: %s\n" : "", weights[i]);
    FILE *f = fopen(path, "w");
    need(f != NULL, "cannot write the config");
    fprintf(f,
            "%s- type: lhotse_shar\n  shar_path: %s/a/shar\n%s  tags: {lang: en, task: asr}\n"
            "- type: nemo_tarred\n"
            "  manifest_filepath: %s/b/nemo/sharded_manifests/manifest__OP_0..3_CL_.json\n"
            "  tarred_audio_filepaths: %s/b/nemo/audio__OP_0..3_CL_.tar\n%s  tags: {lang: de}\n"
            "- type: wds\n  paths: %s/c/wds\n%s",
            extra, dir, w[0], dir, dir, w[1], dir, w[2]);
    fclose(f);
}

static void make_corpora(void)
{
    dir = tu_mkdtemp();
    const char *gen = getenv("SHARC_GEN");
    need(gen != NULL, "SHARC_GEN is not set");
    need(tu_sh("'%s' --out '%s/a' --layout shar --compress none --shards 6 "
               "--cuts-per-shard 20 --max-duration 3 >/dev/null",
               gen, dir) == 0,
         "sharc-gen failed");
    need(tu_sh("'%s' --out '%s/b' --layout nemo --compress none --shards 4 "
               "--cuts-per-shard 15 --seed 2 --max-duration 3 >/dev/null",
               gen, dir) == 0,
         "sharc-gen failed");
    need(tu_sh("'%s' --out '%s/c' --layout wds --compress none --shards 3 "
               "--cuts-per-shard 10 --seed 3 --max-duration 3 >/dev/null",
               gen, dir) == 0,
         "sharc-gen failed");
    snprintf(cfg_path, sizeof cfg_path, "%s/cfg.yaml", dir);
    const char *w[3] = {"0.6", "0.3", "0.1"};
    write_cfg(cfg_path, w, "");
}

static void settings_on(sharc_reader_settings *s, const char *cfg)
{
    sharc_reader_default_settings(s);
    s->input_cfg = cfg;
    s->logger.level = SHARC_LOG_ERROR;
    s->seed = 11;
    s->decode = 0;
}

static sharc_reader *open_ok(const sharc_reader_settings *s)
{
    sharc_reader *r = NULL;
    int rc = sharc_reader_open(&r, s);
    ck_assert_msg(rc == 0, "open: %s", sharc_strerror(rc));
    return r;
}

/* The realised shares of a long run match the weights: Pearson's chi-square over the three
 * sources, 2 degrees of freedom, below 13.82 (p = 0.001). The run is seeded, so the test is
 * exact: the bound is what makes its outcome meaningful. */
START_TEST(shares_match_weights)
{
    sharc_reader_settings s;
    settings_on(&s, cfg_path);
    sharc_reader *r = open_ok(&s);
    ck_assert_uint_eq(sharc_reader_num_sources(r), 3);
    const double w[3] = {0.6, 0.3, 0.1};
    for (size_t i = 0; i < 3; i++)
        ck_assert_double_eq_tol(sharc_reader_source_weight(r, i), w[i], 1e-12);
    ck_assert_str_eq(sharc_reader_source_name(r, 1), "input_cfg[1]");
    ck_assert_uint_eq(sharc_reader_num_shards(r), 13);
    enum { N = 6000 };
    double count[3] = {0, 0, 0};
    const sharc_cut *c;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(sharc_reader_next(r, &c), 0);
        count[sharc_reader_source_of_shard(r, c->shard_index)]++;
    }
    double chi2 = 0;
    for (int i = 0; i < 3; i++)
        chi2 += (count[i] - N * w[i]) * (count[i] - N * w[i]) / (N * w[i]);
    ck_assert_msg(chi2 < 13.82, "chi-square %g: counts %g %g %g", chi2, count[0], count[1],
                  count[2]);
    /* Each source repeats: far more cuts than the three corpora hold were read. */
    ck_assert_double_gt(count[2], 2 * WDS_CUTS);
    sharc_reader_close(&r);
}
END_TEST

/* The cut ids of the first n cuts, one after another. */
static void cut_sequence(const sharc_reader_settings *s, int n, char *out, size_t cap)
{
    sharc_reader *r = open_ok(s);
    const sharc_cut *c;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(sharc_reader_next(r, &c), 0);
        ck_assert_uint_lt(strlen(out) + strlen(c->id) + 2, cap);
        strcat(out, c->id);
        strcat(out, " ");
    }
    sharc_reader_close(&r);
}

START_TEST(sequence_reproducible)
{
    static char a[65536], b[65536];
    sharc_reader_settings s;
    settings_on(&s, cfg_path);
    cut_sequence(&s, 400, a, sizeof a);
    cut_sequence(&s, 400, b, sizeof b);
    ck_assert_str_eq(a, b);
    /* A budget of one open shard changes nothing but the re-reading. */
    s.max_open_streams = 1;
    cut_sequence(&s, 400, b, sizeof b);
    ck_assert_str_eq(a, b);
    s.max_open_streams = 0;
    s.seed = 12;
    cut_sequence(&s, 400, b, sizeof b);
    ck_assert_str_ne(a, b);
}
END_TEST

static void batch_settings(sharc_reader_settings *s, const char *cfg, int threads)
{
    settings_on(s, cfg);
    s->decode = 1;
    s->n_threads = threads;
    s->sampler.max_duration = 12;
    s->sampler.num_buckets = 2;
    s->sampler.buffer_size = 40;
    s->sampler.num_cuts_for_bins_estimate = 50;
}

/* A state blob saved after some step, for resume tests. */
typedef struct saved {
    int step;
    uint8_t *blob;
    size_t len;
} saved;

/* The cut ids of each of n batches, and their audio's CRC; with `saves`, the state after
 * each step asked for. */
static void batch_run(const sharc_reader_settings *s, int n, char *out, size_t cap, saved *saves,
                      int n_saves)
{
    sharc_reader *r = open_ok(s);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        sharc_batch *b;
        int rc = sharc_reader_next_batch(r, &b);
        ck_assert_msg(rc == 0, "step %d: %s", i, sharc_reader_last_error(r));
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        char line[64];
        snprintf(line, sizeof line, "%08lx:", crc32(0L, audio->data, (uInt)audio->nbytes));
        strcat(out, line);
        for (int64_t k = 0; k < audio->shape[0]; k++) {
            size_t len;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)k, &len);
            ck_assert_uint_lt(strlen(out) + len + 2, cap);
            strncat(out, id, len);
            strcat(out, " ");
        }
        strcat(out, "\n");
        sharc_batch_release(b);
        for (int k = 0; k < n_saves; k++)
            if (saves[k].step == i) {
                ck_assert_int_eq(sharc_reader_state_save(r, NULL, 0, &saves[k].len),
                                 SHARC_ERR(ENOSPC));
                saves[k].blob = malloc(saves[k].len);
                ck_assert_int_eq(
                    sharc_reader_state_save(r, saves[k].blob, saves[k].len, &saves[k].len), 0);
            }
    }
    sharc_reader_close(&r);
}

static void batch_sequence(int threads, int n, char *out, size_t cap)
{
    sharc_reader_settings s;
    batch_settings(&s, cfg_path, threads);
    batch_run(&s, n, out, cap, NULL, 0);
}

START_TEST(threads_give_same_batches)
{
    static char one[131072], two[131072];
    batch_sequence(1, 25, one, sizeof one);
    batch_sequence(2, 25, two, sizeof two);
    ck_assert_str_eq(one, two);
}
END_TEST

/* The lang tag is the cut's language (NeMo sets tags on the cut); the others are the
 * source's, through the API. */
START_TEST(tags_per_cut)
{
    sharc_reader_settings s;
    settings_on(&s, cfg_path);
    sharc_reader *r = open_ok(&s);
    const char *const *names, *const *values;
    ck_assert_uint_eq(sharc_reader_source_tags(r, 0, &names, &values), 2);
    ck_assert_str_eq(names[0], "language");
    ck_assert_str_eq(values[0], "en");
    ck_assert_str_eq(names[1], "task");
    ck_assert_str_eq(values[1], "asr");
    ck_assert_uint_eq(sharc_reader_source_tags(r, 2, &names, &values), 0);
    const sharc_cut *c;
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < 300; i++) {
        ck_assert_int_eq(sharc_reader_next(r, &c), 0);
        size_t src = sharc_reader_source_of_shard(r, c->shard_index);
        seen[src]++;
        if (src == 0)
            ck_assert_str_eq(c->language, "en");
        else if (src == 1)
            ck_assert_str_eq(c->language, "de");
    }
    ck_assert(seen[0] && seen[1] && seen[2]);
    sharc_reader_close(&r);
}
END_TEST

/* In batches, the source's tags besides lang are string columns: `task` is "asr" for the
 * Shar source's cuts (language "en") and empty for the NeMo one's (language "de"). */
START_TEST(tags_as_batch_columns)
{
    sharc_reader_settings s;
    batch_settings(&s, cfg_path, 2);
    sharc_reader *r = open_ok(&s);
    int asr = 0, de = 0;
    for (int i = 0; i < 10; i++) {
        sharc_batch *b;
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
        ck_assert_ptr_nonnull(sharc_batch_tensor(b, "task_offsets"));
        ck_assert_ptr_nonnull(sharc_batch_tensor(b, "task_bytes"));
        int64_t rows = sharc_batch_tensor(b, "audio")->shape[0];
        for (int64_t k = 0; k < rows; k++) {
            size_t tlen, llen;
            const char *task = sharc_batch_string(b, "task", (size_t)k, &tlen);
            const char *lang = sharc_batch_string(b, "language", (size_t)k, &llen);
            ck_assert_ptr_nonnull(task);
            ck_assert_ptr_nonnull(lang);
            if (tlen == 3 && !memcmp(task, "asr", 3)) {
                asr++;
                ck_assert_msg(llen == 2 && !memcmp(lang, "en", 2), "task asr, language %.*s",
                              (int)llen, lang);
            } else {
                ck_assert_uint_eq(tlen, 0);
            }
            if (llen == 2 && !memcmp(lang, "de", 2)) {
                de++;
                ck_assert_uint_eq(tlen, 0);
            }
        }
        sharc_batch_release(b);
    }
    ck_assert_int_gt(asr, 0);
    ck_assert_int_gt(de, 0);
    sharc_reader_close(&r);
}
END_TEST

/* Finite: every cut of every source exactly once, then the end. */
static void read_finite(sharc_reader_settings *s, int *count, char **ids, size_t *n_ids)
{
    sharc_reader *r = open_ok(s);
    const sharc_cut *c;
    int rc;
    while ((rc = sharc_reader_next(r, &c)) == 0) {
        size_t src = sharc_reader_source_of_shard(r, c->shard_index);
        count[src]++;
        if (ids) { /* the corpora may share ids: an id within its source */
            char id[512];
            snprintf(id, sizeof id, "%zu/%s", src, c->id);
            ids[(*n_ids)++] = strdup(id);
        }
    }
    ck_assert_int_eq(rc, SHARC_END);
    sharc_reader_close(&r);
}

START_TEST(finite_reads_each_source_once)
{
    sharc_reader_settings s;
    settings_on(&s, cfg_path);
    s.mix_finite = 1;
    int count[3] = {0, 0, 0};
    read_finite(&s, count, NULL, NULL);
    ck_assert_int_eq(count[0], SHAR_CUTS);
    ck_assert_int_eq(count[1], NEMO_CUTS);
    ck_assert_int_eq(count[2], WDS_CUTS);
}
END_TEST

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Data-parallel slots read disjoint shares of every source, together all of it: 2 slots,
 * and 7, more than any source has shards (6, 4 and 3), which the slots then share by cuts.
 */
START_TEST(data_parallel_disjoint)
{
    enum { TOTAL = SHAR_CUTS + NEMO_CUTS + WDS_CUTS };
    const int slots = _i == 0 ? 2 : 7;
    char *ids[2 * TOTAL];
    size_t n = 0;
    int count[7][3] = {{0}}, sum[3] = {0, 0, 0};
    for (int rank = 0; rank < slots; rank++) {
        sharc_reader_settings s;
        settings_on(&s, cfg_path);
        s.mix_finite = 1;
        s.dp_size = slots;
        s.dp_rank = rank;
        read_finite(&s, count[rank], ids, &n);
        for (int k = 0; k < 3; k++) {
            ck_assert(count[rank][k] > 0);
            sum[k] += count[rank][k];
        }
    }
    ck_assert_uint_eq(n, TOTAL);
    ck_assert_int_eq(sum[0], SHAR_CUTS);
    ck_assert_int_eq(sum[1], NEMO_CUTS);
    ck_assert_int_eq(sum[2], WDS_CUTS);
    qsort(ids, n, sizeof *ids, cmp_str);
    for (size_t i = 1; i < n; i++)
        ck_assert_str_ne(ids[i - 1], ids[i]);
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
}
END_TEST

/* Without weights, each source weighs its cut count (NeMo's default). */
START_TEST(weights_from_cut_counts)
{
    char path[800];
    snprintf(path, sizeof path, "%s/counts.yaml", dir);
    const char *none[3] = {NULL, NULL, NULL};
    write_cfg(path, none, "");
    sharc_reader_settings s;
    settings_on(&s, path);
    sharc_reader *r = open_ok(&s);
    const double total = SHAR_CUTS + NEMO_CUTS + WDS_CUTS;
    ck_assert_double_eq_tol(sharc_reader_source_weight(r, 0), SHAR_CUTS / total, 1e-12);
    ck_assert_double_eq_tol(sharc_reader_source_weight(r, 1), NEMO_CUTS / total, 1e-12);
    ck_assert_double_eq_tol(sharc_reader_source_weight(r, 2), WDS_CUTS / total, 1e-12);
    sharc_reader_close(&r);
}
END_TEST

typedef struct logged {
    char last[2048];
} logged;

static void keep_log(void *cookie, sharc_log_level level, const char *msg)
{
    (void)level;
    snprintf(((logged *)cookie)->last, sizeof((logged *)cookie)->last, "%s", msg);
}

/* The same input_cfg given as text in memory (input_cfg_text): the same mixture, cut for
 * cut; its errors name it; it goes with neither input_cfg nor paths. */
START_TEST(config_as_text)
{
    size_t len = 0;
    uint8_t *bytes = tu_read_file(cfg_path, &len);
    ck_assert_ptr_nonnull(bytes);
    char *text = strndup((const char *)bytes, len); /* the API takes NUL-terminated text */
    free(bytes);
    ck_assert_ptr_nonnull(text);
    sharc_reader_settings a, b;
    settings_on(&a, cfg_path);
    settings_on(&b, NULL);
    b.input_cfg_text = text;
    static char from_file[65536], from_text[65536];
    cut_sequence(&a, 200, from_file, sizeof from_file);
    cut_sequence(&b, 200, from_text, sizeof from_text);
    ck_assert_str_eq(from_text, from_file);

    sharc_reader *r = NULL;
    logged log = {""};
    b.logger.callback = keep_log;
    b.logger.cookie = &log;
    b.input_cfg_text = "- {type: wds, paths: /a, shuffle: true}\n";
    ck_assert_int_lt(sharc_reader_open(&r, &b), 0);
    ck_assert_ptr_null(r);
    ck_assert_str_eq(log.last, "input_cfg text: input_cfg[0]: unknown key 'shuffle'");
    b.input_cfg_text = text;
    b.input_cfg = cfg_path;
    ck_assert_int_eq(sharc_reader_open(&r, &b), SHARC_ERR(EINVAL));
    b.input_cfg = NULL;
    const char *path = cfg_path;
    b.paths = &path;
    b.n_paths = 1;
    ck_assert_int_eq(sharc_reader_open(&r, &b), SHARC_ERR(EINVAL));
    free(text);
}
END_TEST

/* A source whose data is missing is named by its entry; paths and input_cfg exclude each
 * other. */
START_TEST(errors_name_the_entry)
{
    char path[800], want[2048];
    snprintf(path, sizeof path, "%s/missing.yaml", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "- {type: wds, paths: %s/c/wds, weight: 1}\n"
            "- type: group\n  weight: 1\n  input_cfg:\n"
            "    - {type: lhotse_shar, shar_path: %s/nowhere, weight: 1}\n",
            dir, dir);
    fclose(f);
    sharc_reader_settings s;
    settings_on(&s, path);
    logged log = {""};
    s.logger.callback = keep_log;
    s.logger.cookie = &log;
    sharc_reader *r = NULL;
    ck_assert_int_lt(sharc_reader_open(&r, &s), 0);
    snprintf(want, sizeof want, "%s: input_cfg[1].input_cfg[0]: %s/nowhere: ", path, dir);
    ck_assert_msg(strncmp(log.last, want, strlen(want)) == 0, "got '%s'", log.last);

    const char *paths[1] = {"x"};
    settings_on(&s, cfg_path);
    s.paths = paths;
    s.n_paths = 1;
    ck_assert_int_eq(sharc_reader_open(&r, &s), SHARC_ERR(EINVAL));
}
END_TEST

typedef struct problems {
    int n;
    char first[2048];
} problems;

static void keep_problem(void *cookie, const sharc_problem_report *p)
{
    problems *seen = cookie;
    if (seen->n++ == 0)
        snprintf(seen->first, sizeof seen->first, "%s", p->message);
}

/* Counts the log lines that contain a text. */
typedef struct log_count {
    const char *text;
    int n;
} log_count;

static void count_log(void *cookie, sharc_log_level level, const char *msg)
{
    (void)level;
    log_count *lc = cookie;
    lc->n += strstr(msg, lc->text) != NULL;
}

/*
 * A source's shard closed to keep one open at a time (max_open_streams = 1) and gone when the
 * source is drawn again: re-opening it is a problem of the shard like opening it, under the
 * policy. With SKIP the mixture reads on without it, the problem reported once and named;
 * with FAIL it stops there, the error named and logged once.
 */
START_TEST(suspended_shard_gone)
{
    for (int skip = 1; skip >= 0; skip--) {
        char sub[800], path[900];
        snprintf(sub, sizeof sub, "%s/gone%d", dir, skip);
        ck_assert_int_eq(tu_sh("'%s' --out '%s/x' --layout wds --compress none --shards 2 "
                               "--cuts-per-shard 5 --seed 5 --max-duration 3 >/dev/null && "
                               "'%s' --out '%s/y' --layout wds --compress none --shards 2 "
                               "--cuts-per-shard 5 --seed 6 --max-duration 3 >/dev/null",
                               getenv("SHARC_GEN"), sub, getenv("SHARC_GEN"), sub),
                         0);
        snprintf(path, sizeof path, "%s/cfg.yaml", sub);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "- {type: wds, paths: %s/x/wds, weight: 1}\n- {type: wds, paths: %s/y/wds, "
                "weight: 1}\n",
                sub, sub);
        fclose(f);
        sharc_reader_settings s;
        settings_on(&s, path);
        s.logger.level = SHARC_LOG_WARN;
        s.max_open_streams = 1;
        s.mix_finite = 1;
        s.on_error = skip ? SHARC_ON_ERROR_SKIP : SHARC_ON_ERROR_FAIL;
        problems seen = {0, ""};
        s.on_problem = keep_problem;
        s.problem_cookie = &seen;
        log_count lc = {"input_cfg[0]: ", 0};
        s.logger.callback = count_log;
        s.logger.cookie = &lc;
        sharc_reader *r = open_ok(&s);
        const sharc_cut *c;
        int from[2] = {0, 0}, rc;
        /* Until source 0 has given a cut and source 1 then another: source 0's shard is
         * closed, its place kept. */
        while (!(from[0] && from[1])) {
            ck_assert_int_eq(sharc_reader_next(r, &c), 0);
            from[sharc_reader_source_of_shard(r, c->shard_index)]++;
        }
        ck_assert_int_eq(tu_sh("rm -r '%s/x/wds'", sub), 0);
        while ((rc = sharc_reader_next(r, &c)) == 0)
            from[sharc_reader_source_of_shard(r, c->shard_index)]++;
        ck_assert_msg(strncmp(seen.first, "input_cfg[0]: ", 14) == 0, "problem '%s'", seen.first);
        ck_assert_int_eq(lc.n, seen.n); /* each logged once, named */
        if (skip) {
            ck_assert_int_eq(rc, SHARC_END);
            ck_assert_int_eq(from[1], 10); /* the other source whole */
            ck_assert_int_lt(from[0], 10);
            sharc_reader_stats st;
            sharc_reader_get_stats(r, &st);
            ck_assert_uint_eq(st.skipped_shards, (uint64_t)seen.n);
            ck_assert_int_ge(seen.n, 1);
        } else {
            ck_assert_int_lt(rc, 0);
            ck_assert_int_eq(seen.n, 1);
            ck_assert_str_eq(sharc_reader_last_error(r), seen.first);
        }
        sharc_reader_close(&r);
    }
}
END_TEST

/* AddressSanitizer keeps freed memory in quarantine: resident memory says nothing there. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_MEANINGFUL 0
#else
#define RSS_MEANINGFUL 1
#endif

/* Resident memory of this process, in KiB (/proc/self/statm). */
static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    if (f)
        fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* 500 sources of one shard each, at most 8 open at once: the file descriptors stay within
 * the budget and the memory small while every source is drawn from many times; without
 * the budget both grow with the sources. */
START_TEST(many_sources_bounded)
{
    enum { SOURCES = 500 };
    ck_assert_int_eq(tu_sh("'%s' --out '%s/many' --layout wds --compress none --shards %d "
                           "--cuts-per-shard 3 --max-duration 1 >/dev/null",
                           getenv("SHARC_GEN"), dir, SOURCES),
                     0);
    char path[800];
    snprintf(path, sizeof path, "%s/many.yaml", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < SOURCES; i++)
        fprintf(f, "- {type: wds, paths: %s/many/wds/shard-%06d.tar, weight: 1}\n", dir, i);
    fclose(f);
    long bounded_growth = 0;
    for (int bound = 1; bound >= 0; bound--) {
        sharc_reader_settings s;
        settings_on(&s, path);
        s.max_open_streams = bound ? 8 : 0;
        int fds0 = tu_open_fds();
        sharc_reader *r = open_ok(&s);
        ck_assert_uint_eq(sharc_reader_num_sources(r), SOURCES);
        const long rss0 = rss_kib();
        const sharc_cut *c;
        int most = 0;
        long grew = 0;
        for (int i = 0; i < 3000; i++) {
            ck_assert_int_eq(sharc_reader_next(r, &c), 0);
            int fds = tu_open_fds() - fds0;
            if (fds > most)
                most = fds;
            if (rss_kib() - rss0 > grew)
                grew = rss_kib() - rss0;
        }
        if (bound) {
            ck_assert_msg(most <= 8, "%d files open with a budget of 8", most);
            ck_assert_msg(!RSS_MEANINGFUL || grew < 64 * 1024,
                          "memory grew by %ld KiB with a budget of 8", grew);
            bounded_growth = grew;
        } else { /* the same run without a budget keeps a shard of most sources open */
            ck_assert_msg(most > 100, "only %d files open without a budget", most);
            ck_assert_msg(!RSS_MEANINGFUL || grew > 8 * bounded_growth,
                          "memory grew by %ld KiB without a budget, %ld KiB with one", grew,
                          bounded_growth);
        }
        sharc_reader_close(&r);
        ck_assert_int_eq(tu_open_fds(), fds0);
    }
}
END_TEST

/* The batches after a state saved at several steps are those of the run that went on. */
START_TEST(resume_equals_uninterrupted)
{
    enum { STEPS = 30 };
    static char whole[131072], rest[131072];
    saved saves[3] = {{2, NULL, 0}, {9, NULL, 0}, {20, NULL, 0}};
    sharc_reader_settings s;
    batch_settings(&s, cfg_path, 2);
    batch_run(&s, STEPS, whole, sizeof whole, saves, 3);
    for (int k = 0; k < 3; k++) {
        sharc_reader_settings t;
        batch_settings(&t, cfg_path, 2);
        t.resume_state = saves[k].blob;
        t.resume_state_size = saves[k].len;
        batch_run(&t, STEPS - 1 - saves[k].step, rest, sizeof rest, NULL, 0);
        /* `whole` after the saved step's line */
        const char *at = whole;
        for (int i = 0; i <= saves[k].step; i++)
            at = strchr(at, '\n') + 1;
        ck_assert_str_eq(rest, at);
    }

    /* Another weight for one source: refused, naming it. */
    char path[800];
    snprintf(path, sizeof path, "%s/other.yaml", dir);
    const char *w[3] = {"0.6", "0.3", "0.2"};
    write_cfg(path, w, "");
    batch_settings(&s, path, 2);
    s.resume_state = saves[1].blob;
    s.resume_state_size = saves[1].len;
    sharc_reader *r = open_ok(&s);
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_STATE);
    ck_assert_str_eq(sharc_reader_last_error(r),
                     "cannot resume: source input_cfg[0] is not the one the state was saved with "
                     "(its type, shards, weight or tags differ)");
    sharc_reader_close(&r);

    /* A source more: refused, counting them. */
    snprintf(path, sizeof path, "%s/four.yaml", dir);
    const char *w4[3] = {"0.6", "0.3", "0.1"};
    char extra[700];
    snprintf(extra, sizeof extra, "- {type: wds, paths: %s/c/wds, weight: 0.1}\n", dir);
    write_cfg(path, w4, extra);
    batch_settings(&s, path, 2);
    s.resume_state = saves[1].blob;
    s.resume_state_size = saves[1].len;
    r = open_ok(&s);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_STATE);
    ck_assert_str_eq(sharc_reader_last_error(r), "cannot resume: the state is of a mixture of 3 "
                                                 "sources, and the input_cfg lists 4");
    sharc_reader_close(&r);
    for (int k = 0; k < 3; k++)
        free(saves[k].blob);
}
END_TEST

/* Weights at the top of a double's range are normalised without overflow: 1e308 each gives
 * three equal thirds, and the mixture reads on (it used to end at once, as if read). */
START_TEST(overflowing_weights)
{
    char path[800];
    snprintf(path, sizeof path, "%s/huge.yaml", dir);
    const char *w[3] = {"1e308", "1e308", "1e308"};
    write_cfg(path, w, "");
    sharc_reader_settings s;
    settings_on(&s, path);
    sharc_reader *r = open_ok(&s);
    for (size_t i = 0; i < 3; i++)
        ck_assert_double_eq_tol(sharc_reader_source_weight(r, i), 1.0 / 3, 1e-15);
    int count[3] = {0, 0, 0};
    const sharc_cut *c;
    for (int i = 0; i < 300; i++) {
        ck_assert_int_eq(sharc_reader_next(r, &c), 0);
        count[sharc_reader_source_of_shard(r, c->shard_index)]++;
    }
    for (int i = 0; i < 3; i++)
        ck_assert_int_gt(count[i], 60);
    sharc_reader_close(&r);
}
END_TEST

/* A mixture that cannot produce a cut (no weight above 0) or with a weight that is not a
 * number fails to open, repeating or finite, rather than ending at once. */
START_TEST(mixer_refuses_weights)
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    char p[800];
    snprintf(p, sizeof p, "%s/c/wds", dir);
    const char *paths[1] = {p};
    sharc__dataset ds;
    ck_assert_int_eq(sharc__dataset_find(&ds, &ctx, paths, 1, SHARC_LAYOUT_WDS, 1 << 20), 0);
    sharc_reader_settings s;
    settings_on(&s, NULL);
    sharc_reader_stats stats;
    memset(&stats, 0, sizeof stats);
    sharc__fetcher fetch;
    sharc__fetcher_init(&fetch, 1);
    const sharc__dataset *dss[2] = {&ds, &ds};
    const char *names[2] = {"input_cfg[0]", "input_cfg[1]"};
    const double cases[4][2] = {{0, 0}, {NAN, 1}, {1, -1}, {INFINITY, 1}};
    const char *want[4] = {
        "the mixture cannot produce a cut: none of its 2 sources has a weight above 0",
        "input_cfg[0]: weight nan: a weight is a finite number, 0 or more",
        "input_cfg[1]: weight -1: a weight is a finite number, 0 or more",
        "input_cfg[0]: weight inf: a weight is a finite number, 0 or more"};
    for (int finite = 0; finite < 2; finite++)
        for (int i = 0; i < 4; i++) {
            const sharc__mix_config mc = {.ctx = &ctx,
                                          .s = &s,
                                          .n = 2,
                                          .ds = dss,
                                          .weights = cases[i],
                                          .names = names,
                                          .finite = finite,
                                          .stats = &stats,
                                          .fetch = &fetch};
            sharc__mix *m = (sharc__mix *)&ctx; /* set to NULL on failure */
            ck_assert_int_eq(sharc__mix_open(&m, &mc), SHARC_ERR_FORMAT);
            ck_assert_ptr_null(m);
            ck_assert_str_eq(ctx.error, want[i]);
        }
    sharc__fetcher_free(&fetch, &ctx);
    sharc__dataset_free(&ds, &ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mix");
    TCase *tc = tcase_create("mix");
    tcase_set_timeout(tc, 240);
    make_corpora();
    tcase_add_test(tc, shares_match_weights);
    tcase_add_test(tc, sequence_reproducible);
    tcase_add_test(tc, threads_give_same_batches);
    tcase_add_test(tc, tags_per_cut);
    tcase_add_test(tc, tags_as_batch_columns);
    tcase_add_test(tc, finite_reads_each_source_once);
    tcase_add_loop_test(tc, data_parallel_disjoint, 0, 2);
    tcase_add_test(tc, weights_from_cut_counts);
    tcase_add_test(tc, errors_name_the_entry);
    tcase_add_test(tc, suspended_shard_gone);
    tcase_add_test(tc, config_as_text);
    tcase_add_test(tc, many_sources_bounded);
    tcase_add_test(tc, resume_equals_uninterrupted);
    tcase_add_test(tc, overflowing_weights);
    tcase_add_test(tc, mixer_refuses_weights);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    tu_rm_rf(dir);
    free(dir);
    return rc;
}

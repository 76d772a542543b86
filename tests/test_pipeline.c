/*
 * Batch pipeline tests: every cut once, the padding-aware rule, determinism across thread
 * counts, and save/resume equal to the uninterrupted run.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "batching/bcut.h"
#include "batching/collate.h"
#include "batching/pipeline.h"
#include "sharc/sharc.h"
#include "synth.h"
#include "testutil.h"

static char *corpus_dir;
static char corpus_path[600];
static size_t corpus_cuts;

/* A fresh directory with a corpus written by sharc-gen with `args`. */
static char *gen_corpus(const char *args)
{
    char *dir = tu_mkdtemp();
    ck_assert_int_eq(tu_sh("'%s' --out '%s' %s >/dev/null", getenv("SHARC_GEN"), dir, args), 0);
    return dir;
}

/* One corpus for the whole suite: Shar, FLAC, 6 shards of 20 cuts of 0.5-8 s. */
static void make_corpus(void)
{
    if (corpus_dir)
        return;
    corpus_dir =
        gen_corpus("--layout shar --compress none --shards 6 --cuts-per-shard 20 --max-duration 8");
    snprintf(corpus_path, sizeof corpus_path, "%s/shar", corpus_dir);
    char exp[700];
    snprintf(exp, sizeof exp, "%s/shar.expected.jsonl", corpus_dir);
    ck_assert_int_eq(tu_sh("test $(wc -l < '%s') -eq 120", exp), 0);
    corpus_cuts = 120;
}

/* Defaults, reading the one directory paths[0], logger off. */
static void settings_on(sharc_reader_settings *s, const char **paths)
{
    sharc_reader_default_settings(s);
    s->paths = paths;
    s->n_paths = 1;
    s->logger.callback = NULL;
}

static void settings_for(sharc_reader_settings *s, const char **paths, int threads, int prefetch)
{
    paths[0] = corpus_path;
    settings_on(s, paths);
    s->seed = 3;
    s->n_threads = threads;
    s->prefetch = prefetch;
    s->sampler.max_duration = 40;
    s->sampler.num_buckets = 4;
    s->sampler.buffer_size = 30;
    s->sampler.num_cuts_for_bins_estimate = 30;
}

/* A batch's fingerprint: its ids and the CRC-32 of its padded audio. */
typedef struct print {
    char ids[4096];
    uint32_t crc;
    int64_t B, T;
} print;

static void fingerprint(const sharc_batch *b, print *p)
{
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    ck_assert_ptr_nonnull(audio);
    p->B = audio->shape[0];
    p->T = audio->shape[1];
    p->crc = (uint32_t)crc32(0L, audio->data, (uInt)audio->nbytes);
    p->ids[0] = 0;
    for (int64_t i = 0; i < p->B; i++) {
        size_t len;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
        ck_assert_ptr_nonnull(id);
        strncat(p->ids, id, len);
        strcat(p->ids, " ");
    }
}

/* The same n batches: ids and audio CRC, step by step. */
static void expect_same_batches(const print *got, const print *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(strcmp(got[i].ids, want[i].ids) == 0, "step %zu: ids '%s', want '%s'", i,
                      got[i].ids, want[i].ids);
        ck_assert_msg(got[i].crc == want[i].crc, "step %zu: audio CRC %08x, want %08x", i,
                      got[i].crc, want[i].crc);
    }
}

static size_t run(const sharc_reader_settings *s, print *out, size_t cap)
{
    sharc_reader *r;
    sharc_batch *b;
    int rc;
    size_t n = 0;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        ck_assert_uint_lt(n, cap);
        ck_assert_uint_eq(b->step, n);
        fingerprint(b, &out[n++]);
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    sharc_reader_close(&r);
    return n;
}

START_TEST(every_cut_once_and_padding_rule)
{
    make_corpus();
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 2, 2);
    sharc_reader *r;
    sharc_batch *b;
    int rc;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    char seen[200][128];
    size_t n_seen = 0;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
        const sharc_tensor *dur = sharc_batch_tensor(b, "duration");
        ck_assert_int_eq(audio->dtype, SHARC_DTYPE_F32);
        ck_assert_int_eq(lens->dtype, SHARC_DTYPE_I32);
        int64_t B = audio->shape[0], T = audio->shape[1];
        ck_assert_int_eq(lens->shape[0], B);
        double longest = 0, longest_before_last = 0;
        int32_t max_len = 0;
        for (int64_t i = 0; i < B; i++) {
            const int32_t len = ((const int32_t *)lens->data)[i];
            const float d = ((const float *)dur->data)[i];
            max_len = len > max_len ? len : max_len;
            if (i == B - 1)
                longest_before_last = longest;
            longest = d > longest ? d : longest;
            ck_assert_int_eq(len, (int32_t)lround(d * 16000.0));
            /* Padding is zero. */
            const float *row = (const float *)audio->data + i * T;
            for (int64_t t = len; t < T; t++)
                ck_assert_msg(row[t] == 0.0f, "padding not zero at %lld", (long long)t);
            size_t idlen;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &idlen);
            ck_assert_uint_lt(idlen, 128);
            memcpy(seen[n_seen], id, idlen);
            seen[n_seen][idlen] = 0;
            for (size_t k = 0; k < n_seen; k++)
                ck_assert_str_ne(seen[k], seen[n_seen]);
            n_seen++;
        }
        ck_assert_int_eq(max_len, T);
        /* Lhotse's padding-aware rule: cuts are added while (n + 1) * longest fits, and the
         * cut that breaks it is included; so before the last cut the batch fitted with
         * room for one more of the longest. A full batch (not a drained one) then breaks
         * the rule with its last cut. */
        if (B > 1)
            ck_assert_msg(B * longest_before_last <= 40.0 + 1e-4, "batch %llu: %lld x %.3f > 40",
                          (unsigned long long)b->step, (long long)B, longest_before_last);
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    ck_assert_uint_eq(n_seen, corpus_cuts);
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.cuts, corpus_cuts);
    ck_assert_double_gt(st.padded_seconds, st.audio_seconds - 1e-6);
    sharc_reader_close(&r);
}
END_TEST

/* Decoded samples in a batch equal what the generator wrote. */
START_TEST(batch_samples_exact)
{
    make_corpus();
    char exp[700];
    snprintf(exp, sizeof exp, "%s/shar.expected.jsonl", corpus_dir);
    size_t n;
    char *text = (char *)tu_read_file(exp, &n);
    text = realloc(text, n + 1);
    text[n] = 0;
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 3, 3);
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    for (int64_t i = 0; i < audio->shape[0]; i++) {
        size_t idlen;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &idlen);
        char needle[256];
        snprintf(needle, sizeof needle, "{\"id\": \"%.*s\"", (int)idlen, id);
        char *line = strstr(text, needle);
        ck_assert_msg(line != NULL, "%s not expected", needle);
        cJSON *o = cJSON_Parse(strtok(line, "\n"));
        uint64_t seed = (uint64_t)cJSON_GetObjectItem(o, "cut_seed")->valuedouble;
        const float *row = (const float *)audio->data + i * audio->shape[1];
        for (int32_t t = 0; t < ((const int32_t *)lens->data)[i]; t++)
            if (row[t] != synth_sample_f32(seed, t, 0))
                ck_abort_msg("cut %.*s sample %d differs", (int)idlen, id, t);
        cJSON_Delete(o);
        /* strtok cut the text: restore the newline for the next search. */
        line[strlen(line)] = '\n';
    }
    sharc_batch_release(b);
    sharc_reader_close(&r);
    free(text);
}
END_TEST

START_TEST(same_batches_for_any_thread_count)
{
    make_corpus();
    static print ref[256], other[256];
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 1, 1);
    size_t n = run(&s, ref, 256);
    ck_assert_uint_gt(n, 5);
    const int threads[] = {2, 4, 3};
    const int prefetch[] = {4, 2, 8};
    for (int k = 0; k < 3; k++) {
        settings_for(&s, paths, threads[k], prefetch[k]);
        ck_assert_uint_eq(run(&s, other, 256), n);
        expect_same_batches(other, ref, n);
    }
}
END_TEST

/*
 * Near the process's limit on open files, decode threads that keep shard files open for
 * the audio left there keep fewer, so that the planner can still open shards, and give
 * theirs up rather than fail a cut: the batches are those of a run without the limit. (Each
 * thread kept 8 files, so 2 threads over 6 shards took 12 descriptors besides the planner's
 * 3 per shard.)
 */
START_TEST(decode_threads_near_the_open_file_limit)
{
    make_corpus();
    static print ref[256], got[256];
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 2, 4);
    const size_t n = run(&s, ref, 256);
    struct rlimit old;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    struct rlimit tight = old;
    tight.rlim_cur = (rlim_t)tu_open_fds() + 12; /* 3 files per shard for the planner */
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &tight), 0);
    const size_t m = run(&s, got, 256);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    ck_assert_uint_eq(m, n);
    expect_same_batches(got, ref, n);
}
END_TEST

/* The bucket of duration d: the first bin >= d (bisect_left). */
static size_t bucket_of(const double *bins, size_t n, double d)
{
    size_t i = 0;
    while (i < n && bins[i] < d)
        i++;
    return i;
}

/*
 * Bins estimated when the byte budget holds far fewer cuts than the estimate needs: they are
 * those of the first num_cuts_for_bins_estimate cuts all the same (their durations are read
 * ahead, then the walk goes back), every cut comes once (checked by id), nothing is counted
 * twice, and a
 * resumed run equals the uninterrupted one. On `path` with `threads` decode threads (with 2
 * and compressed shards, the shards are read ahead on lanes).
 */
static void bins_past_the_budget(const char *path, size_t n_cuts, int threads)
{
    enum { N = 100, K = 5 };
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.seed = 5;
    s.n_threads = threads;
    s.sampler.max_duration = 40;
    s.sampler.num_buckets = K;
    s.sampler.num_cuts_for_bins_estimate = N;
    s.sampler.buffer_size = 30;
    s.sampler.max_buffer_bytes = 200 * 1000; /* a few FLAC cuts of 0.5-8 s */
    /* Every cut's id and duration in the reader's order, from a cut reader. */
    sharc_reader_settings cs = s;
    cs.decode = 0;
    sharc_reader *r;
    const sharc_cut *c;
    static char ids[256][128];
    static double d[256];
    static uint8_t used[256];
    double want[K];
    size_t n = 0, n_want = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &cs), 0);
    while (sharc_reader_next(r, &c) == 0) {
        ck_assert_uint_lt(n, 256);
        snprintf(ids[n], sizeof ids[n], "%s", c->id);
        d[n++] = c->duration;
    }
    ck_assert_uint_eq(n, n_cuts);
    sharc_reader_close(&r);
    memset(used, 0, sizeof used);
    ck_assert_int_eq(sharc_estimate_duration_bins(d, N, K, want, &n_want), 0);
    ck_assert_uint_eq(n_want, K - 1);

    static print ref[256];
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    size_t nb = 1;
    ck_assert_ptr_null(sharc_reader_bins(r, &nb));
    ck_assert_uint_eq(nb, 0);
    sharc_batch *b;
    int rc;
    size_t steps = 0, cuts = 0;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        const double *bins = sharc_reader_bins(r, &nb);
        ck_assert_ptr_nonnull(bins);
        ck_assert_uint_eq(nb, n_want);
        for (size_t i = 0; i < nb; i++)
            ck_assert_msg(bins[i] == want[i], "threads %d: bin %zu is %.17g, want %.17g", threads,
                          i, bins[i], want[i]);
        /* Every cut of a batch in one bucket of these bins. */
        const int64_t B = sharc_batch_tensor(b, "audio")->shape[0];
        size_t bucket = 0;
        for (int64_t i = 0; i < B; i++) {
            size_t len, k = 0;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
            while (k < n && (strlen(ids[k]) != len || memcmp(ids[k], id, len) != 0))
                k++;
            ck_assert_uint_lt(k, n);
            ck_assert_msg(!used[k], "cut %s twice", ids[k]);
            used[k] = 1;
            if (i == 0)
                bucket = bucket_of(want, nb, d[k]);
            ck_assert_uint_eq(bucket_of(want, nb, d[k]), bucket);
        }
        ck_assert_uint_lt(steps, 256);
        fingerprint(b, &ref[steps++]);
        cuts += (size_t)B;
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    ck_assert_uint_eq(cuts, n_cuts);
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.cuts, n_cuts); /* the cuts read ahead are not counted twice */
    ck_assert_uint_eq(st.shards, 6);
    sharc_reader_close(&r);

    /* Resumed after the second batch: the rest of the run, and the same bins. */
    static print got[256];
    size_t size;
    void *blob = tu_state_after(&s, 2, &size);
    sharc_reader_settings s2 = s;
    s2.resume_state = blob;
    s2.resume_state_size = size;
    ck_assert_int_eq(sharc_reader_open(&r, &s2), 0);
    size_t m = 0;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        ck_assert_uint_lt(2 + m, steps);
        fingerprint(b, &got[m++]);
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    ck_assert_uint_eq(2 + m, steps);
    expect_same_batches(got, ref + 2, m);
    const double *bins = sharc_reader_bins(r, &nb);
    ck_assert_uint_eq(nb, n_want);
    ck_assert_int_eq(memcmp(bins, want, nb * sizeof *bins), 0);
    sharc_reader_close(&r);
    free(blob);
}

START_TEST(bins_estimated_past_the_byte_budget)
{
    make_corpus();
    bins_past_the_budget(corpus_path, corpus_cuts, 1);
    bins_past_the_budget(corpus_path, corpus_cuts, 2);
    char *dir =
        gen_corpus("--layout shar --compress gzip --shards 6 --cuts-per-shard 20 --max-duration 8");
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    bins_past_the_budget(path, 120, 2);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Save after batch k, resume, and compare with the uninterrupted run from k + 1 on. */
/* Also for slot 6 of 8 over the 6 shards, which shares the cuts of its shard with slot 0. */
START_TEST(resume_equals_uninterrupted)
{
    make_corpus();
    static print ref[256], got[256];
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 2, 2);
    s.epochs = 2;
    if (_i == 1) {
        s.dp_rank = 6;
        s.dp_size = 8;
    }
    size_t n = run(&s, ref, 256);
    ck_assert_uint_ge(n, 4);
    size_t ks[] = {0, 1, n / 4, n / 2, n - 3, n - 2};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        size_t k = ks[t];
        sharc_reader *r;
        sharc_batch *b;
        size_t size;
        void *blob = tu_state_after(&s, k + 1, &size);
        sharc_reader_settings s2 = s;
        s2.resume_state = blob;
        s2.resume_state_size = size;
        s2.n_threads = 3; /* a different thread count must not matter */
        ck_assert_int_eq(sharc_reader_open(&r, &s2), 0);
        /* Saved before its first batch, a resumed reader's state is the one it came from. */
        size_t again_size = 0;
        ck_assert_int_eq(sharc_reader_state_save(r, NULL, 0, &again_size), SHARC_ERR(ENOSPC));
        ck_assert_uint_eq(again_size, size);
        void *again = malloc(size);
        ck_assert_int_eq(sharc_reader_state_save(r, again, size, &again_size), 0);
        ck_assert_int_eq(memcmp(again, blob, size), 0);
        free(again);
        size_t m = 0;
        int rc;
        while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
            ck_assert_uint_eq(b->step, k + 1 + m);
            fingerprint(b, &got[m++]);
            sharc_batch_release(b);
        }
        ck_assert_msg(rc == SHARC_END, "k=%zu: %s", k, sharc_reader_last_error(r));
        ck_assert_uint_eq(m, n - k - 1);
        for (size_t i = 0; i < m; i++) {
            ck_assert_msg(strcmp(got[i].ids, ref[k + 1 + i].ids) == 0, "k=%zu batch %zu: %s vs %s",
                          k, k + 1 + i, got[i].ids, ref[k + 1 + i].ids);
            ck_assert_uint_eq(got[i].crc, ref[k + 1 + i].crc);
        }
        sharc_reader_close(&r);
        free(blob);
    }
}
END_TEST

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Add the ids of a fingerprint to ids[*n]. */
static void add_ids(const print *p, char **ids, size_t *n)
{
    char copy[sizeof p->ids];
    snprintf(copy, sizeof copy, "%s", p->ids);
    for (char *save = NULL, *id = strtok_r(copy, " ", &save); id; id = strtok_r(NULL, " ", &save))
        ids[(*n)++] = strdup(id);
}

/*
 * Elastic resume: D slots stop after k batches each, their states packed into one bundle,
 * and D' slots resume from it. Over the two runs every cut of both epochs is delivered
 * exactly once per epoch, none lost, none repeated; with D' = D each slot's batches are those
 * its own state alone gives.
 */
START_TEST(elastic_resume_delivers_every_cut_once)
{
    make_corpus();
    static const int cases[][3] = {{2, 1, 1}, {2, 3, 2}, {3, 2, 1}, {3, 4, 3}, {4, 2, 1},
                                   {4, 3, 5}, {1, 3, 2}, {2, 2, 1}, {8, 3, 1}, {3, 8, 2}};
    static print got[256], want[256];
    static char *ids[4 * 120];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int D = cases[c][0], D2 = cases[c][1];
        size_t k = (size_t)cases[c][2], n_ids = 0;
        void *states[8];
        size_t sizes[8];
        for (int d = 0; d < D; d++) {
            sharc_reader_settings s;
            const char *paths[1];
            settings_for(&s, paths, 2, 2);
            s.epochs = 2;
            s.dp_rank = d;
            s.dp_size = D;
            size_t n = run(&s, want, 256);
            ck_assert_uint_gt(n, k);
            states[d] = tu_state_after(&s, k, &sizes[d]);
            for (size_t i = 0; i < k; i++)
                add_ids(&want[i], ids, &n_ids);
        }
        size_t size = 0;
        ck_assert_int_eq(
            sharc_reader_pack_states((const void *const *)states, sizes, (size_t)D, NULL, 0, &size),
            SHARC_ERR(ENOSPC));
        void *bundle = malloc(size);
        ck_assert_int_eq(sharc_reader_pack_states((const void *const *)states, sizes, (size_t)D,
                                                  bundle, size, &size),
                         0);
        for (int d = 0; d < D2; d++) {
            sharc_reader_settings s;
            const char *paths[1];
            settings_for(&s, paths, 2, 2);
            s.epochs = 2;
            s.dp_rank = d;
            s.dp_size = D2;
            s.resume_state = bundle;
            s.resume_state_size = size;
            sharc_reader *r;
            sharc_batch *b;
            ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
            int rc;
            size_t m = 0;
            while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
                ck_assert_uint_lt(m, 256);
                fingerprint(b, &got[m]);
                add_ids(&got[m++], ids, &n_ids);
                sharc_batch_release(b);
            }
            ck_assert_msg(rc == SHARC_END, "%d -> %d slot %d: %s", D, D2, d,
                          sharc_reader_last_error(r));
            sharc_reader_close(&r);
            if (D2 != D && d == 0 && m > 2) {
                /* Its own state after its first batch (with its share of the work and the
                 * re-read cuts not yet taken) resumes to the same batches again. */
                size_t again_size;
                void *again = tu_state_after(&s, 1, &again_size);
                s.resume_state = again;
                s.resume_state_size = again_size;
                ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
                size_t resumed = 0;
                while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
                    ck_assert_uint_lt(resumed, 255);
                    fingerprint(b, &want[resumed++]);
                    sharc_batch_release(b);
                }
                ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
                sharc_reader_close(&r);
                ck_assert_uint_eq(resumed, m - 1);
                expect_same_batches(got + 1, want, m - 1);
                free(again);
            }
            if (D2 == D) { /* the slot's own state alone gives the same batches */
                s.resume_state = states[d];
                s.resume_state_size = sizes[d];
                ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
                size_t own = 0;
                while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
                    fingerprint(b, &want[own++]);
                    sharc_batch_release(b);
                }
                sharc_reader_close(&r);
                ck_assert_uint_eq(own, m);
                expect_same_batches(got, want, m);
            }
        }
        ck_assert_msg(n_ids == 2 * (size_t)corpus_cuts,
                      "%d -> %d slots after %zu batches: %zu cuts delivered, want %zu", D, D2, k,
                      n_ids, 2 * (size_t)corpus_cuts);
        qsort(ids, n_ids, sizeof *ids, cmp_str_ptr);
        for (size_t i = 0; i < n_ids; i += 2) {
            ck_assert_msg(strcmp(ids[i], ids[i + 1]) == 0 &&
                              (i + 2 == n_ids || strcmp(ids[i + 1], ids[i + 2]) != 0),
                          "%d -> %d slots after %zu batches: cut %s is not delivered twice (once "
                          "an epoch)",
                          D, D2, k, ids[i]);
        }
        for (size_t i = 0; i < n_ids; i++)
            free(ids[i]);
        for (int d = 0; d < D; d++)
            free(states[d]);
        free(bundle);
    }
}
END_TEST

#define WHY_LEN 1024 /* room for a reader's error text */

/* The status of the first batch of a reader on `s` resumed from blob[size] (opening must
 * succeed: a state is checked when the pipeline starts), with its error text in why. */
static int resume_status(const sharc_reader_settings *s, const void *blob, size_t size,
                         char why[WHY_LEN])
{
    sharc_reader_settings s2 = *s;
    s2.resume_state = blob;
    s2.resume_state_size = size;
    return tu_first_batch_status(&s2, why, WHY_LEN);
}

/* A bundle with a slot missing, repeated or of other settings is refused, naming the slot. */
START_TEST(elastic_resume_refuses_wrong_states)
{
    make_corpus();
    void *states[3];
    size_t sizes[3];
    for (int d = 0; d < 3; d++) {
        sharc_reader_settings s;
        const char *paths[1];
        settings_for(&s, paths, 1, 2);
        s.dp_rank = d;
        s.dp_size = 3;
        s.seed = d == 2 ? 99 : 3; /* slot 2 with another seed */
        states[d] = tu_state_after(&s, 1, &sizes[d]);
    }
    static const struct {
        int n, order[3];
        const char *want;
    } cases[] = {
        {2, {0, 1}, "data-parallel slot 0 of 2"},    /* a slot missing */
        {3, {0, 0, 1}, "data-parallel slot 1 of 3"}, /* slot 0 twice */
        {3, {0, 1, 2}, "data-parallel slot 2 of 3"}, /* another seed */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const void *pick[3];
        size_t pick_sizes[3], size = 0;
        for (int i = 0; i < cases[c].n; i++) {
            pick[i] = states[cases[c].order[i]];
            pick_sizes[i] = sizes[cases[c].order[i]];
        }
        sharc_reader_pack_states(pick, pick_sizes, (size_t)cases[c].n, NULL, 0, &size);
        void *bundle = malloc(size);
        ck_assert_int_eq(
            sharc_reader_pack_states(pick, pick_sizes, (size_t)cases[c].n, bundle, size, &size), 0);
        sharc_reader_settings s;
        const char *paths[1];
        settings_for(&s, paths, 1, 2);
        s.dp_rank = 0;
        s.dp_size = 4;
        char why[WHY_LEN];
        ck_assert_int_eq(resume_status(&s, bundle, size, why), SHARC_ERR_STATE);
        ck_assert_msg(strstr(why, cases[c].want) != NULL, "case %zu: '%s' lacks '%s'", c, why,
                      cases[c].want);
        free(bundle);
    }
    for (int d = 0; d < 3; d++)
        free(states[d]);
}
END_TEST

START_TEST(corrupt_states_are_rejected)
{
    make_corpus();
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 2, 2);
    sharc_reader *r;
    size_t size;
    char why[WHY_LEN];
    uint8_t *blob = tu_state_after(&s, 3, &size), *bad = malloc(size);
    /* Every flipped byte, every truncation: rejected at the first batch, never a crash. */
    for (size_t i = 0; i < size; i += (size > 400 ? 7 : 1)) {
        memcpy(bad, blob, size);
        bad[i] ^= 0x41;
        int rc = resume_status(&s, bad, size, why);
        ck_assert_msg(rc == SHARC_ERR_STATE, "byte %zu of %zu flipped: %s", i, size,
                      sharc_err_name(rc));
        ck_assert_ptr_nonnull(strstr(why, "cannot resume"));
    }
    sharc_reader_settings s0 = s;
    s0.resume_state = blob;
    s0.resume_state_size = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s0), SHARC_ERR(EINVAL));
    for (size_t cut = 1; cut < size; cut += 13)
        ck_assert_int_eq(resume_status(&s, blob, cut, why), SHARC_ERR_STATE);
    /* Some other file, and a state of another version (sealed as that version would). */
    memset(bad, 'x', size);
    ck_assert_int_eq(resume_status(&s, bad, size, why), SHARC_ERR_STATE);
    ck_assert_str_eq(why, "cannot resume: not a sharc reader state (it does not start as one)");
    memcpy(bad, blob, size);
    bad[4] ^= 0x7f;
    tu_reseal_state(bad, size);
    ck_assert_int_eq(resume_status(&s, bad, size, why), SHARC_ERR_STATE);
    ck_assert_str_eq(why, "cannot resume: the state was saved by another version of sharc, whose "
                          "states this one cannot read");
    /* One of version 1, whose keys held 16 bits of epoch: refused, saying so. */
    memcpy(bad, blob, size);
    bad[4] = 1;
    memset(bad + 5, 0, 3);
    tu_reseal_state(bad, size);
    ck_assert_int_eq(resume_status(&s, bad, size, why), SHARC_ERR_STATE);
    ck_assert_str_eq(why, "cannot resume: the state was saved by an older sharc (state version 1, "
                          "whose cut keys hold 16 bits of epoch and no non_finite counter), whose "
                          "states this one cannot "
                          "read: resume it with the sharc that saved it, or start the run again");
    /* A forged state whose checksum holds: a walk position past the shard order (the u64 at
     * byte 32), with no shard open (byte 56), is refused before it is used. */
    memcpy(bad, blob, size);
    bad[32] = 100;
    memset(bad + 33, 0, 7);
    memset(bad + 56, 0, 8);
    tu_reseal_state(bad, size);
    ck_assert_int_eq(resume_status(&s, bad, size, why), SHARC_ERR_STATE);
    ck_assert_str_eq(why, "cannot resume: the state points at position 100 of a shard order of 6");
    /* Forged counters and steps no run writes: NaN seconds, a step past 2^62, more cuts
     * filtered by a reason than in all (the u64 after the two seconds), four reasons of 2^63
     * each (whose sum wraps to 0 in 64 bits). */
    const size_t seconds_at = 8 * (9 + 7 + SHARC_PROBLEM_COUNT);
    for (int k = 0; k < 4; k++) {
        memcpy(bad, blob, size);
        if (k == 0) {
            double nan_value = NAN;
            memcpy(bad + seconds_at, &nan_value, 8);
        } else if (k == 1) {
            bad[16 + 7] = 0x80;
        } else if (k == 2) {
            bad[seconds_at + 16] = 1;
        } else {
            for (int reason = 0; reason < 4; reason++) {
                memset(bad + seconds_at + 16 + 8 * reason, 0, 8);
                bad[seconds_at + 16 + 8 * reason + 7] = 0x80;
            }
        }
        tu_reseal_state(bad, size);
        ck_assert_int_eq(resume_status(&s, bad, size, why), SHARC_ERR_STATE);
        ck_assert_str_eq(why, "cannot resume: the state's step or counters are out of range");
    }
    /* Other sampler settings: refused by the sampler, with the same opening words. */
    sharc_reader_settings s4 = s;
    s4.sampler.buffer_size = 31;
    ck_assert_int_eq(resume_status(&s4, blob, size, why), SHARC_ERR_STATE);
    ck_assert_str_eq(why, "cannot resume: sampler state: saved with different sampler settings");
    /* Before the first batch such a reader reports the state's counters; once the state is
     * refused, none: they were never this reader's. */
    s4.resume_state = blob;
    s4.resume_state_size = size;
    ck_assert_int_eq(sharc_reader_open(&r, &s4), 0);
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.batches, 3);
    ck_assert_uint_gt(st.cuts, 3);
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_STATE);
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.batches, 0);
    ck_assert_uint_eq(st.cuts, 0);
    sharc_reader_close(&r);
    /* A state is a batch reader's: a cut reader given one refuses to read rather than start
     * from the beginning as if there were none, and can still serve the batches. */
    sharc_reader_settings s5 = s;
    s5.resume_state = blob;
    s5.resume_state_size = size;
    ck_assert_int_eq(sharc_reader_open(&r, &s5), 0);
    const sharc_cut *cut = NULL;
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_ERR(EINVAL));
    ck_assert_ptr_null(cut);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), "use sharc_reader_next_batch"));
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
    ck_assert_uint_eq(b->step, 3);
    sharc_batch_release(b);
    sharc_reader_close(&r);
    /* Other settings: a different seed. */
    sharc_reader_settings s3 = s;
    s3.seed = 4;
    ck_assert_int_eq(resume_status(&s3, blob, size, why), SHARC_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(why, "other shards or reader settings"));
    free(blob);
    free(bad);
}
END_TEST

/* How many of this process's threads are named `name` (/proc/self/task/<tid>/comm). */
static int threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread ended */
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        n += strcmp(comm, name) == 0;
    }
    closedir(d);
    return n;
}

/* The pipeline's threads carry names, for top -H, perf and gdb. (That they are gone after
 * sharc_reader_close() cannot be read from /proc right away: a joined thread's entry may
 * stay a moment.) */
START_TEST(threads_are_named)
{
    make_corpus();
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 2, 2);
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
    ck_assert_int_eq(threads_named("sharc-planner"), 1);
    ck_assert_int_eq(threads_named("sharc-decode0"), 1);
    ck_assert_int_eq(threads_named("sharc-decode1"), 1);
    ck_assert_int_eq(threads_named("sharc-decode2"), 0);
    sharc_batch_release(b);
    sharc_reader_close(&r);
    /* 4 decode threads on plain tars: one read-ahead lane. */
    settings_for(&s, paths, 4, 2);
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
    ck_assert_int_eq(threads_named("sharc-decode3"), 1);
    ck_assert_int_eq(threads_named("sharc-lane0"), 1);
    sharc_batch_release(b);
    sharc_reader_close(&r);
}
END_TEST

START_TEST(backpressure_and_mode_errors)
{
    make_corpus();
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 2, 2);
    s.max_held_batches = 2;
    sharc_reader *r;
    sharc_batch *b[3];
    const sharc_cut *cut;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    size_t size = 1;
    ck_assert_int_eq(sharc_reader_state_save(r, NULL, 0, &size), SHARC_ERR(EINVAL));
    ck_assert_uint_eq(size, 0);
    ck_assert_str_eq(sharc_reader_last_error(r),
                     "no batch has been returned yet: there is no state to save");
    ck_assert_int_eq(sharc_reader_next_batch(r, &b[0]), 0);
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_ERR(EINVAL));
    ck_assert_int_eq(sharc_reader_next_batch(r, &b[1]), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b[2]), SHARC_ERR_BACKPRESSURE);
    /* Held batches keep their contents while others are produced. */
    print before, after;
    fingerprint(b[0], &before);
    sharc_batch_release(b[1]);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b[2]), 0);
    fingerprint(b[0], &after);
    ck_assert_uint_eq(before.crc, after.crc);
    sharc_batch_release(b[0]);
    sharc_batch_release(b[2]);
    sharc_reader_close(&r);
}
END_TEST

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A timed wait on a stalled shard (a command that writes its tar, then waits for a file to
 * appear) gives SHARC_ERR_TIMEOUT and changes nothing: once the shard ends, the same reader
 * returns every cut, from step 0 on. */
START_TEST(timed_next_waits_in_slices)
{
    char *dir = gen_corpus("--layout wds --compress none --shards 1 --cuts-per-shard 6 "
                           "--max-duration 4");
    char path[2048];
    snprintf(path, sizeof path,
             "pipe:cat '%s/wds/shard-000000.tar'; until test -e '%s/go'; do sleep 0.02; done "
             "# shard-000000.tar",
             dir, dir);
    const char *paths[1] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.layout = SHARC_LAYOUT_WDS;
    s.n_threads = 1;
    s.sampler.max_duration = 1000; /* batches planned at the shard's end */
    sharc_reader *r;
    sharc_batch *b = NULL;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    double t0 = mono_s();
    ck_assert_int_eq(sharc_reader_next_batch_timed(r, &b, 200), SHARC_ERR_TIMEOUT);
    double waited = mono_s() - t0;
    ck_assert_msg(waited >= 0.19 && waited < 30, "waited %.3f s for 200 ms", waited);
    ck_assert_ptr_null(b);
    ck_assert_str_eq(sharc_reader_last_error(r), "no batch ready within 200 ms");
    ck_assert_int_eq(sharc_reader_next_batch_timed(r, &b, 0), SHARC_ERR_TIMEOUT);
    ck_assert_int_eq(tu_sh("touch '%s/go'", dir), 0);
    int rc;
    while ((rc = sharc_reader_next_batch_timed(r, &b, 50)) == SHARC_ERR_TIMEOUT)
        ;
    int64_t cuts = 0;
    for (uint64_t step = 0; rc == 0; step++) {
        ck_assert_uint_eq(b->step, step);
        cuts += sharc_batch_tensor(b, "audio")->shape[0];
        sharc_batch_release(b);
        rc = sharc_reader_next_batch_timed(r, &b, -1);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    ck_assert_int_eq(cuts, 6);
    ck_assert_int_eq(sharc_reader_next_batch_timed(r, &b, 0), SHARC_END);
    ck_assert_int_eq(sharc_reader_next_batch_timed(NULL, &b, 0), SHARC_ERR(EINVAL));
    sharc_reader_close(&r);
    ck_assert_int_eq(tu_sh("rm -rf '%s'", dir), 0);
    free(dir);
}
END_TEST

/* Posix memory, refusing any block over the size_t its cookie points at. */
static void *capped_alloc(void *cookie, size_t size, size_t align)
{
    void *p = NULL;
    if (size > *(const size_t *)cookie ||
        posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0)
        return NULL;
    return p;
}

static void capped_free(void *cookie, void *p)
{
    (void)cookie;
    free(p);
}

/* Log lines at WARN and ERROR, to check that one problem is one line. */
static int log_errors, log_warnings;
static char last_logged[1024];
static void capture_log(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    if (level > SHARC_LOG_WARN)
        return;
    level == SHARC_LOG_ERROR ? log_errors++ : log_warnings++;
    snprintf(last_logged, sizeof last_logged, "%s", message);
}

/* Opening with `s` fails with EINVAL, no reader, and the logged reason holding `why`. */
static void open_refused(sharc_reader_settings *s, const char *why)
{
    sharc_reader *r = NULL;
    s->logger.callback = capture_log;
    last_logged[0] = 0;
    ck_assert_int_eq(sharc_reader_open(&r, s), SHARC_ERR(EINVAL));
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(last_logged, why), "'%s' not in '%s'", why, last_logged);
}

/* Settings are checked at open, the batching ones included (a batch size is asked for only
 * by batches); a pipeline that cannot be allocated fails its first batch, without a crash. */
START_TEST(settings_at_open_and_no_memory_at_start)
{
    make_corpus();
    sharc_reader_settings s;
    const char *paths[1];
    sharc_reader *r = NULL;
    const char *counts = "n_threads must be in 0..4096, prefetch in 0..1024";
    settings_for(&s, paths, 2, 2);
    s.n_threads = 5000;
    open_refused(&s, counts);
    settings_for(&s, paths, 2, 5000);
    open_refused(&s, counts);
    settings_for(&s, paths, 2, 2);
    s.max_held_batches = 5000;
    open_refused(&s, counts);
    const char *null_path[1] = {NULL};
    settings_for(&s, paths, 2, 2);
    s.paths = null_path;
    open_refused(&s, "a path is NULL");
    settings_for(&s, paths, 2, 2);
    s.sampler.num_buckets = 0;
    open_refused(&s, "sampler settings: num_buckets 0 must be in 1..");
    settings_for(&s, paths, 2, 2);
    s.sampler.world_size = 0;
    open_refused(&s, "sampler settings: world_size must be >= 1");
    /* The reasons name the public fields, not the sampler's own. */
    settings_for(&s, paths, 2, 2);
    s.sampler.min_duration = 5;
    s.sampler.max_cut_duration = 2;
    open_refused(&s, "sampler settings: max_cut_duration 2 < min_duration 5");
    settings_for(&s, paths, 2, 2);
    s.sampler.max_cut_duration = -1;
    open_refused(&s, "min_duration and max_cut_duration must be finite and >= 0");
    /* The defaults leave the batch size unset: a cut reader opens, a batch asks for it. */
    settings_for(&s, paths, 2, 2);
    s.sampler.max_duration = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    sharc_batch *b = NULL;
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR(EINVAL));
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), "max_duration, max_cuts"));
    sharc_reader_close(&r);

    settings_for(&s, paths, 4000, 2);
    static size_t cap_8mib = (size_t)8 << 20;
    s.allocator.alloc = capped_alloc;
    s.allocator.free = capped_free;
    s.allocator.cookie = &cap_8mib;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR(ENOMEM));
    ck_assert_ptr_null(b);
    ck_assert_str_eq(sharc_reader_last_error(r),
                     "cannot start the batch pipeline: Cannot allocate memory");
    sharc_reader_close(&r);
}
END_TEST

/*
 * The `layout` corpus sharc-gen wrote in `dir`, read in batches with `threads` decode
 * threads keeping `channel`: every cut once, its samples exact.
 */
static void batches_exact(const char *dir, const char *layout, int channel, int threads)
{
    char path[600], exp[700];
    snprintf(path, sizeof path, "%s/%s", dir, layout);
    snprintf(exp, sizeof exp, "%s/%s.expected.jsonl", dir, layout);
    size_t n;
    char *text = (char *)tu_read_file(exp, &n);
    text = realloc(text, n + 1);
    text[n] = 0;
    cJSON *want[64];
    size_t n_want = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        ck_assert_uint_lt(n_want, sizeof want / sizeof want[0]);
        want[n_want++] = cJSON_Parse(line);
    }
    free(text);
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.n_threads = threads;
    s.channel = channel;
    s.sampler.max_duration = 40;
    sharc_reader *r;
    sharc_batch *b;
    int rc, seen[64] = {0};
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
        for (int64_t i = 0; i < audio->shape[0]; i++) {
            size_t idlen;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &idlen);
            size_t k = 0;
            while (k < n_want &&
                   !(strlen(cJSON_GetObjectItem(want[k], "id")->valuestring) == idlen &&
                     memcmp(cJSON_GetObjectItem(want[k], "id")->valuestring, id, idlen) == 0))
                k++;
            ck_assert_msg(k < n_want, "%s: unexpected cut %.*s", layout, (int)idlen, id);
            seen[k]++;
            int32_t len = ((const int32_t *)lens->data)[i];
            ck_assert_int_eq(len, cJSON_GetObjectItem(want[k], "num_samples")->valueint);
            uint64_t seed = (uint64_t)cJSON_GetObjectItem(want[k], "cut_seed")->valuedouble;
            int64_t off = (int64_t)cJSON_GetObjectItem(want[k], "offset_frames")->valuedouble;
            const float *row = (const float *)audio->data + i * audio->shape[1];
            for (int32_t t = 0; t < len; t++)
                if (row[t] != synth_sample_f32(seed, off + t, channel < 0 ? 0 : channel))
                    ck_abort_msg("%s cut %.*s frame %d differs", layout, (int)idlen, id, t);
        }
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s: %s", layout, sharc_reader_last_error(r));
    for (size_t k = 0; k < n_want; k++) {
        ck_assert_int_eq(seen[k], 1);
        cJSON_Delete(want[k]);
    }
    sharc_reader_close(&r);
}

/* Every layout of the corpus sharc-gen writes with `args`, batches_exact(). */
static void layouts_in_batches_exact(const char *args, int channel, int threads)
{
    static const char *layouts[] = {"shar", "nemo", "wds"};
    char *dir = gen_corpus(args);
    for (int l = 0; l < 3; l++)
        batches_exact(dir, layouts[l], channel, threads);
    tu_rm_rf(dir);
    free(dir);
}

/* NeMo (offset rows, -subN) and WebDataset (lengths from headers) in batches, sample-exact.
 * Every layout, from gzip and zstd tars (audio read into the buffer, on read-ahead lanes)
 * and from plain tars (audio left in the file and read by the decode threads), FLAC and
 * WAV. */
START_TEST(every_layout_in_batches)
{
    static const char *variants[] = {"--compress gzip", "--compress none",
                                     "--compress none --codec wav", "--compress zstd --codec wav"};
    char args[200];
    snprintf(args, sizeof args, "--layout all %s --shards 3 --cuts-per-shard 6 --max-duration 5",
             variants[_i]);
    layouts_in_batches_exact(args, -1, _i >= 2 ? 4 : 2);
}
END_TEST

/*
 * Long WAV members left in their plain tar are read in parts (128 KiB) and converted part
 * by part, with NeMo windows starting inside a part; every sample exact: mono (3-8 parts a
 * member), one channel kept of stereo (6-15 parts) and of 3 channels, where a part is not
 * a whole number of 4-float vectors of output (21845 frames).
 */
START_TEST(long_wav_members_in_parts)
{
    static const struct {
        int channels, keep, threads;
    } cases[] = {{1, -1, 3}, {2, 1, 2}, {3, 2, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256];
        snprintf(args, sizeof args,
                 "--layout all --compress none --codec wav --shards 2 --cuts-per-shard 4 "
                 "--min-duration 12 --max-duration 30 --channels %d",
                 cases[i].channels);
        layouts_in_batches_exact(args, cases[i].keep, cases[i].threads);
    }
}
END_TEST

/*
 * WAV members left in their file that cannot be read in parts are read whole, with the
 * same samples: one with a 6000-byte comment after its samples (past the tail that is
 * read) and one with a 5000-byte comment before them (the samples start past the head).
 */
START_TEST(wav_members_not_in_parts_read_whole)
{
    char *dir = gen_corpus("--layout shar --compress none --codec wav --shards 1 "
                           "--cuts-per-shard 4 --min-duration 2 --max-duration 4");
    char after[256], before[256];
    tu_expected_field(dir, 0, "member", after, sizeof after);
    tu_expected_field(dir, 1, "member", before, sizeof before);
    const char *src = getenv("SHARC_TESTS_SRC");
    ck_assert_int_eq(tu_sh("cd '%s/shar' && python3 '%s/corrupt.py' wav-comment "
                           "recording.000000.tar '%s' after 6000 && python3 '%s/corrupt.py' "
                           "wav-comment recording.000000.tar '%s' before 5000",
                           dir, src, after, src, before),
                     0);
    batches_exact(dir, "shar", -1, 2);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Read the rest of the run, counting the cuts of its batches; returns the last status. */
static int drain(sharc_reader *r, size_t *cuts)
{
    sharc_batch *b;
    int rc;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        *cuts += (size_t)sharc_batch_tensor(b, "audio")->shape[0];
        sharc_batch_release(b);
    }
    return rc;
}

static int problems_seen;
static char problem_cut[256];
static void count_problem(void *cookie, const sharc_problem_report *p)
{
    (void)cookie;
    problems_seen++;
    snprintf(problem_cut, sizeof problem_cut, "%s", p->cut_id ? p->cut_id : "");
}

/* The corpus of the error tests: 2 Shar shards of 6 cuts in plain tars, where the third cut
 * of shard 1 has a garbage FLAC body. */
/* 12 cuts of at most 4 s in 2 plain Shar shards of 6. */
static char *small_corpus(void)
{
    return gen_corpus("--layout shar --compress none --shards 2 --cuts-per-shard 6 "
                      "--max-duration 4");
}

/* Cut `index` of small_corpus() gets a garbage FLAC body; its member and id are returned. */
static void spoil_member(const char *dir, int index, char bad_member[256], char bad_id[256])
{
    tu_spoil_member(dir, index, 6, bad_member, bad_id);
}

static char *corpus_with_bad_member(char bad_member[256], char bad_id[256])
{
    char *dir = small_corpus();
    spoil_member(dir, 8, bad_member, bad_id);
    return dir;
}

/* A corrupt member: FAIL stops at its batch naming it; SKIP drops just that row. */
START_TEST(decode_errors_under_both_policies)
{
    char bad_member[256], bad_id[256];
    char *dir = corpus_with_bad_member(bad_member, bad_id);
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.n_threads = 2;
    s.sampler.max_duration = 12;
    s.on_problem = count_problem;
    sharc_reader *r;
    sharc_batch *b;
    int rc;
    size_t cuts = 0;
    problems_seen = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    rc = drain(r, &cuts);
    ck_assert_int_eq(rc, SHARC_ERR_DECODE);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), bad_member));
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), bad_id));
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_DECODE); /* sticks */
    ck_assert_int_eq(problems_seen, 1);
    ck_assert_str_eq(problem_cut, bad_id);
    ck_assert_uint_lt(cuts, 12);
    sharc_reader_close(&r);

    s.on_error = SHARC_ON_ERROR_SKIP;
    problems_seen = 0;
    cuts = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
        const sharc_tensor *ids = sharc_batch_tensor(b, "cut_id_offsets");
        ck_assert_int_eq(lens->shape[0], audio->shape[0]);
        ck_assert_int_eq(ids->shape[0], audio->shape[0] + 1);
        for (int64_t i = 0; i < audio->shape[0]; i++) {
            size_t n;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &n);
            ck_assert_msg(!(n == strlen(bad_id) && memcmp(id, bad_id, n) == 0),
                          "the corrupt cut was not dropped");
            /* Rows kept after compaction are still non-zero audio of the right length. */
            const float *row = (const float *)audio->data + i * audio->shape[1];
            int32_t len = ((const int32_t *)lens->data)[i];
            float peak = 0;
            for (int32_t t = 0; t < len; t++)
                peak = fabsf(row[t]) > peak ? fabsf(row[t]) : peak;
            ck_assert_float_gt(peak, 0.01f);
        }
        cuts += (size_t)audio->shape[0];
        sharc_batch_release(b);
    }
    ck_assert_int_eq(rc, SHARC_END);
    ck_assert_uint_eq(cuts, 11);
    ck_assert_int_eq(problems_seen, 1);
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.cuts, 11);
    ck_assert_uint_eq(st.skipped_cuts, 1);
    ck_assert_uint_eq(st.problems[SHARC_PROBLEM_DECODE], 1);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/*
 * The counters a batch reader reports are those of the last batch returned: the same at each
 * step for any thread count, prefetch and caller speed, equal to the sums over the batches
 * returned, restored with a state, and the totals after the end. Under SKIP a cut whose
 * audio does not decode counts with the batch that held it.
 */
typedef struct step_stats {
    uint64_t cuts, shards, skipped, decode_problems, batches;
    double audio, padded;
} step_stats;

static step_stats stats_now(sharc_reader *r)
{
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    return (step_stats){
        st.cuts,    st.shards,        st.skipped_cuts,  st.problems[SHARC_PROBLEM_DECODE],
        st.batches, st.audio_seconds, st.padded_seconds};
}

static void expect_same_stats(const step_stats *got, const step_stats *want, size_t step)
{
    ck_assert_msg(
        got->cuts == want->cuts && got->shards == want->shards && got->skipped == want->skipped &&
            got->decode_problems == want->decode_problems && got->batches == want->batches &&
            fabs(got->audio - want->audio) < 1e-6 && fabs(got->padded - want->padded) < 1e-6,
        "step %zu: cuts %llu shards %llu skipped %llu decode %llu batches %llu audio "
        "%.6f padded %.6f; want %llu %llu %llu %llu %llu %.6f %.6f",
        step, (unsigned long long)got->cuts, (unsigned long long)got->shards,
        (unsigned long long)got->skipped, (unsigned long long)got->decode_problems,
        (unsigned long long)got->batches, got->audio, got->padded, (unsigned long long)want->cuts,
        (unsigned long long)want->shards, (unsigned long long)want->skipped,
        (unsigned long long)want->decode_problems, (unsigned long long)want->batches, want->audio,
        want->padded);
}

START_TEST(stats_are_those_of_the_batch_returned)
{
    char *dir = gen_corpus("--layout shar --compress none --shards 4 --cuts-per-shard 6 "
                           "--max-duration 4");
    char bad_member[256], bad_id[256];
    spoil_member(dir, 8, bad_member, bad_id);
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.seed = 5;
    s.sampler.max_duration = 8;
    s.sampler.buffer_size = 4;
    s.sampler.num_buckets = 2;
    s.on_error = SHARC_ON_ERROR_SKIP;
    enum { CAP = 64 };
    static step_stats ref[CAP], got[CAP];
    static uint8_t state[1 << 16];
    size_t state_len = 0, n_ref = 0;
    const size_t save_at = 3;
    step_stats total = {0};
    for (int run = 0; run < 4; run++) {
        s.n_threads = 1 + run % 3;
        s.prefetch = run == 0 ? 1 : 8;
        sharc_reader *r;
        sharc_batch *b;
        int rc;
        size_t n = 0;
        step_stats sum = {0};
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
            ck_assert_uint_lt(n, CAP);
            if (run > 0)
                usleep(20000); /* the planner and the decoders run ahead */
            got[n] = stats_now(r);
            const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
            const sharc_tensor *dur = sharc_batch_tensor(b, "duration");
            sum.cuts += (uint64_t)audio->shape[0];
            sum.padded += (double)(audio->shape[0] * audio->shape[1]) / 16000.0;
            for (int64_t i = 0; i < audio->shape[0]; i++)
                sum.audio += ((const float *)dur->data)[i];
            ck_assert_uint_eq(got[n].cuts, sum.cuts);
            ck_assert_uint_eq(got[n].batches, n + 1);
            ck_assert_double_eq_tol(got[n].audio, sum.audio, 1e-3);
            ck_assert_double_eq_tol(got[n].padded, sum.padded, 1e-3);
            if (run == 0 && n + 1 == save_at)
                ck_assert_int_eq(sharc_reader_state_save(r, state, sizeof state, &state_len), 0);
            sharc_batch_release(b);
            n++;
        }
        ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
        step_stats end = stats_now(r);
        sharc_reader_close(&r);
        if (run == 0) {
            n_ref = n;
            memcpy(ref, got, n * sizeof *got);
            total = end;
            ck_assert_uint_gt(n, save_at + 2);
            ck_assert_uint_eq(total.cuts, 23);
            ck_assert_uint_eq(total.skipped, 1);
            ck_assert_uint_eq(total.decode_problems, 1);
            ck_assert_uint_eq(total.shards, 4);
            /* The first batches were planned before the last shard was opened. */
            ck_assert_uint_lt(ref[0].shards, 4);
        }
        ck_assert_uint_eq(n, n_ref);
        for (size_t i = 0; i < n; i++)
            expect_same_stats(&got[i], &ref[i], i);
        expect_same_stats(&end, &total, n);
    }
    /* A reader resumed at step save_at reports that step's counters, then goes on. */
    s.resume_state = state;
    s.resume_state_size = state_len;
    s.n_threads = 2;
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    step_stats before = stats_now(r); /* no batch asked for yet */
    expect_same_stats(&before, &ref[save_at - 1], save_at - 1);
    for (size_t i = save_at; i < n_ref; i++) {
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
        sharc_batch_release(b);
        step_stats now = stats_now(r);
        expect_same_stats(&now, &ref[i], i);
    }
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_END);
    sharc_reader_close(&r);

    /* Under FAIL, after the batch that fails to decode: the counters of the batch before
     * it and the one problem, however far the planner and the decoders had gone. */
    s.resume_state = NULL;
    s.resume_state_size = 0;
    s.on_error = SHARC_ON_ERROR_FAIL;
    step_stats failed_ref = {0};
    for (int run = 0; run < 4; run++) {
        s.n_threads = 1 + run % 3;
        s.prefetch = run == 0 ? 1 : 16;
        size_t n = 0;
        int rc;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
            sharc_batch_release(b);
            if (run > 0)
                usleep(20000);
            n++;
        }
        ck_assert_int_eq(rc, SHARC_ERR_DECODE);
        step_stats after = stats_now(r);
        sharc_reader_close(&r);
        ck_assert_uint_gt(n, 0);
        /* The same batches as under SKIP up to there; what was read to plan the failing
         * batch (its shards) counts, its cuts do not. */
        step_stats want = ref[n - 1];
        ck_assert_uint_ge(after.shards, want.shards);
        ck_assert_uint_gt(after.shards, 0);
        want.shards = after.shards; /* the same in every run, below */
        want.decode_problems++;
        expect_same_stats(&after, &want, n);
        if (run == 0)
            failed_ref = after;
        expect_same_stats(&after, &failed_ref, n);
    }
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/*
 * Filtered cuts by reason (sharc_reader_filter_counts) follow the counters' rule: at each
 * step those of the last batch returned, the same for any threads and prefetch, summing to
 * filtered_cuts, at the end the cuts that cut mode shows outside the limits; restored by a
 * resume; a state of version 2 (without them) restores the total, and the reasons count
 * from zero.
 */
typedef struct filter_step {
    uint64_t total, by[SHARC_FILTER_COUNT];
} filter_step;

static filter_step filters_now(const sharc_reader *r)
{
    filter_step f = {0};
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    f.total = st.filtered_cuts;
    ck_assert_uint_eq(sharc_reader_filter_counts(r, f.by, SHARC_FILTER_COUNT), SHARC_FILTER_COUNT);
    return f;
}

START_TEST(filtered_cuts_by_reason)
{
    make_corpus();
    const char *paths[1];
    sharc_reader_settings s;
    settings_for(&s, paths, 1, 1);
    sharc_reader *r;
    const sharc_cut *c;
    uint64_t short_n = 0, long_n = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while (sharc_reader_next(r, &c) == 0) {
        short_n += c->duration < 1.5;
        long_n += c->duration > 6;
    }
    filter_step none = filters_now(r); /* a cut reader filters nothing */
    ck_assert_uint_eq(none.total + none.by[SHARC_FILTER_MIN_DURATION], 0);
    sharc_reader_close(&r);
    ck_assert(short_n > 0 && long_n > 0);
    s.sampler.min_duration = 1.5;
    s.sampler.max_cut_duration = 6;
    enum { CAP = 128 };
    static filter_step ref[CAP], got;
    static uint8_t state[1 << 16];
    size_t n_ref = 0, state_len = 0;
    const size_t save_at = 2;
    sharc_batch *b;
    for (int run = 0; run < 3; run++) {
        s.n_threads = 1 + run;
        s.prefetch = run == 0 ? 1 : 8;
        size_t n = 0;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        while (sharc_reader_next_batch(r, &b) == 0) {
            ck_assert_uint_lt(n, CAP);
            if (run > 0)
                usleep(5000); /* the planner runs ahead */
            got = filters_now(r);
            ck_assert_uint_eq(got.by[SHARC_FILTER_MIN_DURATION] + got.by[SHARC_FILTER_MAX_DURATION],
                              got.total);
            if (run == 0) {
                ref[n] = got;
                if (n + 1 == save_at)
                    ck_assert_int_eq(sharc_reader_state_save(r, state, sizeof state, &state_len),
                                     0);
            }
            ck_assert_mem_eq(&got, &ref[n], sizeof got);
            sharc_batch_release(b);
            n++;
        }
        got = filters_now(r);
        sharc_reader_close(&r);
        if (run == 0)
            n_ref = n;
        ck_assert_uint_eq(n, n_ref);
        ck_assert_uint_eq(got.by[SHARC_FILTER_MIN_DURATION], short_n);
        ck_assert_uint_eq(got.by[SHARC_FILTER_MAX_DURATION], long_n);
        ck_assert_uint_eq(got.total, short_n + long_n);
        for (int k = SHARC_FILTER_MIN_TOKENS; k < SHARC_FILTER_COUNT; k++)
            ck_assert_uint_eq(got.by[k], 0);
    }
    /* The reference run counted them as it went, not all at once. */
    ck_assert_uint_gt(ref[save_at - 1].total, 0);
    ck_assert_uint_lt(ref[save_at - 1].total, short_n + long_n);
    /* Resumed: the saved step's counts before any batch, then the same steps. */
    s.resume_state = state;
    s.resume_state_size = state_len;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    got = filters_now(r);
    ck_assert_mem_eq(&got, &ref[save_at - 1], sizeof got);
    for (size_t i = save_at; i < n_ref; i++) {
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
        sharc_batch_release(b);
        got = filters_now(r);
        ck_assert_mem_eq(&got, &ref[i], sizeof got);
    }
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_END);
    sharc_reader_close(&r);
    /* The same state as version 2 wrote it (no counts by reason after the counters). */
    static uint8_t old[1 << 16];
    const size_t by_at = 8 * (9 + 7 + SHARC_PROBLEM_COUNT + 2), by_len = 8 * SHARC_FILTER_COUNT;
    memcpy(old, state, by_at);
    memcpy(old + by_at, state + by_at + by_len, state_len - by_at - by_len);
    old[4] = 2;
    tu_reseal_state(old, state_len - by_len);
    s.resume_state = old;
    s.resume_state_size = state_len - by_len;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    got = filters_now(r);
    ck_assert_uint_eq(got.total, ref[save_at - 1].total);
    ck_assert_uint_eq(got.by[SHARC_FILTER_MIN_DURATION] + got.by[SHARC_FILTER_MAX_DURATION], 0);
    size_t steps = save_at;
    while (sharc_reader_next_batch(r, &b) == 0) {
        sharc_batch_release(b);
        steps++;
    }
    ck_assert_msg(steps == n_ref, "%s", sharc_reader_last_error(r));
    got = filters_now(r);
    sharc_reader_close(&r);
    ck_assert_uint_eq(got.total, short_n + long_n);
    ck_assert_uint_eq(got.by[SHARC_FILTER_MIN_DURATION] + got.by[SHARC_FILTER_MAX_DURATION],
                      short_n + long_n - ref[save_at - 1].total);
    /* Names, and a caller that knows fewer reasons. */
    ck_assert_str_eq(sharc_filter_name(SHARC_FILTER_MIN_DURATION), "min_duration");
    ck_assert_str_eq(sharc_filter_name(SHARC_FILTER_MAX_DURATION), "max_cut_duration");
    ck_assert_str_eq(sharc_filter_name(SHARC_FILTER_MAX_TPS), "max_tps");
    ck_assert_str_eq(sharc_filter_name(SHARC_FILTER_NO_BUCKET), "no_bucket");
    ck_assert_str_eq(sharc_filter_name(SHARC_FILTER_COUNT), "unknown");
    uint64_t two[2] = {7, 7};
    ck_assert_uint_eq(sharc_reader_filter_counts(NULL, two, 2), 0);
    ck_assert_uint_eq(two[0], 7);
}
END_TEST

/* Endless epochs that produce nothing stop with one error instead of looping: every cut
 * filtered out (batches), and every shard skipped under SKIP (cuts and batches). */
START_TEST(endless_epochs_of_nothing_stop)
{
    char *dir = small_corpus();
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    const char *want = "a whole epoch produced no usable cuts";
    sharc_reader_settings s;
    sharc_reader *r;
    sharc_batch *b;
    const sharc_cut *cut;
    sharc_reader_stats st;

    settings_on(&s, paths);
    s.epochs = 0;
    s.n_threads = 2;
    s.sampler.max_duration = 12;
    s.sampler.min_duration = 1000; /* every cut is shorter */
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), want));
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_FORMAT); /* sticks */
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.filtered_cuts, 12); /* one epoch, then the stop */
    uint64_t by[SHARC_FILTER_COUNT];
    ck_assert_uint_eq(sharc_reader_filter_counts(r, by, SHARC_FILTER_COUNT), SHARC_FILTER_COUNT);
    ck_assert_uint_eq(by[SHARC_FILTER_MIN_DURATION], 12);
    ck_assert_uint_eq(by[SHARC_FILTER_MAX_DURATION], 0);
    ck_assert_uint_eq(sharc_reader_filter_counts(r, NULL, 0), SHARC_FILTER_COUNT); /* a query */
    ck_assert_uint_eq(sharc_reader_filter_counts(r, NULL, 2), 0);
    ck_assert_uint_eq(st.batches, 0);
    sharc_reader_close(&r);

    /* Both shards cut short inside their first member: each is skipped, every epoch. */
    ck_assert_int_eq(tu_sh("cd '%s/shar' && truncate -s 3000 recording.000000.tar "
                           "recording.000001.tar",
                           dir),
                     0);
    settings_on(&s, paths);
    s.epochs = 0;
    s.on_error = SHARC_ON_ERROR_SKIP;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), want));
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_ERR_FORMAT);
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.skipped_shards, 2);
    ck_assert_uint_eq(st.cuts, 0);
    sharc_reader_close(&r);

    s.n_threads = 2;
    s.sampler.max_duration = 12;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), want));
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);

    /* Three shards of four cut short, two data-parallel slots: slot 0's shards change each
     * epoch, and the first epoch in which both of its are bad stops it, after batches. The
     * bins' estimate reads that far ahead (a buffer of 5, 300 cuts to estimate from): the
     * stop is still logged once, when the reader gets there. */
    dir = gen_corpus("--layout shar --compress none --shards 4 --cuts-per-shard 6 "
                     "--max-duration 4");
    snprintf(path, sizeof path, "%s/shar", dir);
    ck_assert_int_eq(tu_sh("cd '%s/shar' && truncate -s 3000 recording.000001.tar "
                           "recording.000002.tar recording.000003.tar",
                           dir),
                     0);
    settings_on(&s, paths);
    s.epochs = 0;
    s.seed = 4; /* the first epochs give slot 0 cuts: the stop comes after 5 batches */
    s.dp_size = 2;
    s.on_error = SHARC_ON_ERROR_SKIP;
    s.n_threads = 2;
    s.sampler.max_duration = 8;
    s.sampler.buffer_size = 5;
    s.sampler.num_cuts_for_bins_estimate = 300;
    s.logger.callback = capture_log;
    s.logger.level = SHARC_LOG_DEBUG;
    log_errors = log_warnings = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    int rc;
    size_t batches = 0;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        batches++;
        sharc_batch_release(b);
    }
    ck_assert_int_eq(rc, SHARC_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), want));
    ck_assert_uint_gt(batches, 0);
    ck_assert_int_eq(log_errors, 1);
    ck_assert_ptr_nonnull(strstr(last_logged, want));
    sharc_reader_get_stats(r, &st);
    /* One per shard skipped, and the sampler's about a buffer too small for its buckets. */
    ck_assert_uint_eq(log_warnings, st.skipped_shards + 1);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Under FAIL, the batches before the error are the same whatever the threads, the prefetch
 * and the caller's pace: the planner meets the error while planning ahead, and the batches
 * it planned before it are still handed out. */
START_TEST(fail_stops_at_the_same_batch)
{
    char *dir = gen_corpus("--layout shar --compress none --shards 3 --cuts-per-shard 8 "
                           "--max-duration 4");
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    /* The last shard in order is cut short inside its third cut's audio member. */
    ck_assert_int_eq(tu_sh("cd '%s/shar' && n=$(python3 -c \"import tarfile; "
                           "t=tarfile.open('recording.000002.tar'); "
                           "m=t.getmembers()[4]; print(m.offset_data + 100)\") && "
                           "python3 '%s/corrupt.py' truncate recording.000002.tar $n",
                           dir, getenv("SHARC_TESTS_SRC")),
                     0);
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.shuffle_shards = 0;
    s.sampler.max_duration = 8;
    s.sampler.buffer_size = 4;
    s.sampler.num_buckets = 2;
    s.on_error = SHARC_ON_ERROR_FAIL;
    static print ref[64], got[64];
    size_t n_ref = 0;
    for (int run = 0; run < 6; run++) {
        s.n_threads = 1 + run % 3;
        s.prefetch = run < 3 ? 16 : 1;
        sharc_reader *r;
        sharc_batch *b;
        int rc;
        size_t n = 0;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
            ck_assert_uint_lt(n, 64);
            fingerprint(b, &got[n++]);
            sharc_batch_release(b);
            if (run < 3)
                usleep(20000); /* the planner runs ahead, into the error */
        }
        ck_assert_int_eq(rc, SHARC_ERR_CORRUPT);
        ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), "recording.000002.tar"));
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_CORRUPT); /* sticks */
        sharc_reader_close(&r);
        if (run == 0) {
            n_ref = n;
            memcpy(ref, got, n * sizeof *got);
            ck_assert_uint_gt(n, 2);
        }
        ck_assert_msg(n == n_ref, "run %d (%d threads, prefetch %d): %zu batches, want %zu", run,
                      s.n_threads, s.prefetch, n, n_ref);
        expect_same_batches(got, ref, n);
    }
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Under SKIP, a dropped row that was the batch's longest does not keep the others padded to
 * it: the batch narrows to its longest remaining row, and the padded seconds follow. */
START_TEST(skipped_longest_row_narrows_the_batch)
{
    char *dir = small_corpus();
    /* The longest cut of the corpus gets a garbage FLAC body. */
    int longest;
    int64_t most, second;
    ck_assert_int_eq(tu_longest_cuts(dir, &longest, &most, &second), 12);
    char member[256], id[256];
    spoil_member(dir, longest, member, id);
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.n_threads = 2;
    s.on_error = SHARC_ON_ERROR_SKIP;
    s.sampler.max_cuts = 12; /* one batch of every cut */
    s.sampler.num_buckets = 2;
    const double bins[1] = {100};
    s.sampler.bins = bins;
    s.sampler.n_bins = 1;
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    ck_assert_int_eq(audio->shape[0], 11);
    ck_assert_int_eq(audio->shape[1], second);
    ck_assert_uint_eq(audio->nbytes, (size_t)(11 * second) * sizeof(float));
    int32_t widest = 0;
    for (int64_t i = 0; i < 11; i++) {
        const float *row = (const float *)audio->data + i * audio->shape[1];
        int32_t len = ((const int32_t *)lens->data)[i];
        widest = len > widest ? len : widest;
        for (int64_t t = len; t < audio->shape[1]; t++)
            ck_assert_msg(row[t] == 0.0f, "row %lld is not zero at %lld", (long long)i,
                          (long long)t);
        float peak = 0;
        for (int32_t t = 0; t < len; t++)
            peak = fabsf(row[t]) > peak ? fabsf(row[t]) : peak;
        ck_assert_float_gt(peak, 0.01f);
    }
    ck_assert_int_eq(widest, second);
    sharc_batch_release(b);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_END);
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.cuts, 11);
    ck_assert_uint_eq(st.skipped_cuts, 1);
    ck_assert_double_eq_tol(st.padded_seconds, 11.0 * second / 16000.0, 1e-6);
    sharc_reader_close(&r);
    /* With conditioning, the per-row gains are compacted with the rows: each kept row has
     * its own cut's gain, as cut mode draws it. */
    sharc_augment_settings a;
    sharc_augment_default_settings(&a);
    a.volume_perturb_db[0] = -6;
    a.volume_perturb_db[1] = 6;
    s.augment = &a;
    char ids[12][256];
    double gains[12];
    size_t n = 0;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while (sharc_reader_next(r, &c) == 0) {
        ck_assert_uint_lt(n, 12);
        snprintf(ids[n], sizeof ids[n], "%s", c->id);
        gains[n++] = c->gain;
    }
    sharc_reader_close(&r);
    ck_assert_uint_eq(n, 11);
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
    const sharc_tensor *gain = sharc_batch_tensor(b, "gain");
    ck_assert_int_eq(gain->shape[0], 11);
    ck_assert_uint_eq(gain->nbytes, 11 * sizeof(float));
    ck_assert_int_eq(sharc_batch_tensor(b, "speed")->shape[0], 11);
    ck_assert_int_eq(sharc_batch_tensor(b, "snr_db")->shape[0], 11);
    for (size_t i = 0; i < 11; i++) {
        size_t len, k = 0;
        const char *cid = sharc_batch_string(b, "cut_id", i, &len);
        while (k < n && !(strlen(ids[k]) == len && memcmp(ids[k], cid, len) == 0))
            k++;
        ck_assert_uint_lt(k, n);
        ck_assert(((const float *)gain->data)[i] == (float)gains[k]);
    }
    sharc_batch_release(b);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

static int rate_warnings;
static void count_rate_warnings(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    (void)level;
    char m[1024];
    snprintf(m, sizeof m, "%s", message);
    rate_warnings += strstr(m, "follows batches at") != NULL;
}

/* Whether cut `id` is in the generated corpus in `dir`. */
static int corpus_has(const char *dir, const char *id)
{
    return tu_sh("grep -q '\"id\": \"%s\"' '%s/shar.expected.jsonl'", id, dir) == 0;
}

/* Two corpora at 16 and 8 kHz read together: a batch never mixes rates. FAIL stops at the
 * first cut drawn into a batch of the other rate, naming it and both rates; SKIP drops such
 * cuts and keeps every other. */
START_TEST(batches_hold_one_sampling_rate)
{
    char *wide = gen_corpus("--layout shar --codec wav --compress none --shards 2 "
                            "--cuts-per-shard 10 --max-duration 6");
    char *narrow = gen_corpus("--layout shar --codec wav --compress none --shards 1 "
                              "--cuts-per-shard 3 --max-duration 6 --seed 7 --sampling-rate 8000");
    char p0[600], p1[600];
    snprintf(p0, sizeof p0, "%s/shar", wide);
    snprintf(p1, sizeof p1, "%s/shar", narrow);
    const char *paths[] = {p0, p1};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.n_paths = 2;
    s.seed = 1;
    s.n_threads = 2;
    s.sampler.max_duration = 30;
    s.on_problem = count_problem;
    sharc_reader *r;
    sharc_batch *b;
    int rc;
    problems_seen = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0)
        sharc_batch_release(b);
    ck_assert_int_eq(rc, SHARC_ERR_AUDIO_MISMATCH);
    const char *e = sharc_reader_last_error(r);
    ck_assert_int_eq(problems_seen, 1);
    ck_assert_msg(corpus_has(narrow, problem_cut), "%s is not an 8 kHz cut", problem_cut);
    ck_assert_ptr_nonnull(strstr(e, problem_cut));
    ck_assert_ptr_nonnull(strstr(e, "is at 8000 Hz"));
    ck_assert_ptr_nonnull(strstr(e, "batch it was drawn into at 16000 Hz"));
    ck_assert_ptr_nonnull(strstr(e, "sampling_rate"));
    sharc_reader_close(&r);

    s.on_error = SHARC_ON_ERROR_SKIP;
    problems_seen = 0;
    size_t cuts = 0, narrow_cuts = 0, steps = 0;
    double padded = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        const int32_t *lens = sharc_batch_tensor(b, "audio_lens")->data;
        const float *dur = sharc_batch_tensor(b, "duration")->data;
        int64_t T = 0;
        double batch_rate = 0;
        for (int64_t i = 0; i < audio->shape[0]; i++) {
            double rate = lens[i] / (double)dur[i]; /* within a sample of the rate */
            ck_assert_msg(fabs(rate - 16000) < 1 || fabs(rate - 8000) < 1, "row rate %g", rate);
            if (i == 0)
                batch_rate = rate;
            ck_assert_msg(fabs(rate - batch_rate) < 2, "step %llu mixes %g and %g Hz",
                          (unsigned long long)b->step, batch_rate, rate);
            T = lens[i] > T ? lens[i] : T;
        }
        ck_assert_int_eq(audio->shape[1], T); /* a skipped cut does not widen the batch */
        int narrow_batch = fabs(batch_rate - 8000) < 2;
        narrow_cuts += narrow_batch ? (size_t)audio->shape[0] : 0;
        padded += (double)audio->shape[0] * (double)T / (narrow_batch ? 8000 : 16000);
        cuts += (size_t)audio->shape[0];
        steps++;
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    ck_assert_int_ge(problems_seen, 1);
    ck_assert_uint_eq(st.problems[SHARC_PROBLEM_AUDIO_FORMAT], (uint64_t)problems_seen);
    ck_assert_uint_eq(st.skipped_cuts, (uint64_t)problems_seen);
    ck_assert_uint_eq(cuts + (size_t)problems_seen, 23);
    ck_assert_uint_eq(st.cuts, cuts);
    ck_assert_double_eq_tol(st.padded_seconds, padded, 1e-6); /* skipped rows not counted */
    ck_assert_uint_lt(narrow_cuts, 3);
    sharc_reader_close(&r);

    /* Saved at any step and resumed, the counters end as the uninterrupted run's: a state
     * also takes back the rows skipped while decoding the batches before it. */
    for (size_t k = 1; k < steps; k++) {
        size_t size;
        void *blob = tu_state_after(&s, k, &size);
        sharc_reader_settings s2 = s;
        s2.resume_state = blob;
        s2.resume_state_size = size;
        ck_assert_int_eq(sharc_reader_open(&r, &s2), 0);
        while ((rc = sharc_reader_next_batch(r, &b)) == 0)
            sharc_batch_release(b);
        ck_assert_int_eq(rc, SHARC_END);
        sharc_reader_stats st2;
        sharc_reader_get_stats(r, &st2);
        ck_assert_msg(st2.cuts == st.cuts && st2.skipped_cuts == st.skipped_cuts &&
                          st2.problems[SHARC_PROBLEM_AUDIO_FORMAT] ==
                              st.problems[SHARC_PROBLEM_AUDIO_FORMAT],
                      "resumed at %zu: %llu cuts, %llu skipped; uninterrupted %llu, %llu", k,
                      (unsigned long long)st2.cuts, (unsigned long long)st2.skipped_cuts,
                      (unsigned long long)st.cuts, (unsigned long long)st.skipped_cuts);
        ck_assert_double_eq_tol(st2.audio_seconds, st.audio_seconds, 1e-6);
        ck_assert_double_eq_tol(st2.padded_seconds, st.padded_seconds, 1e-6);
        sharc_reader_close(&r);
        free(blob);
    }

    /* Batches of one rate each, but not all the same rate: warned once. With seed 0 an
     * 8 kHz batch follows 16 kHz ones, with seed 1 (above) none does. */
    s.logger.callback = count_rate_warnings;
    for (uint64_t seed = 0; seed < 2; seed++) {
        s.seed = seed;
        rate_warnings = 0;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        size_t ignored = 0;
        ck_assert_int_eq(drain(r, &ignored), SHARC_END);
        sharc_reader_close(&r);
        ck_assert_int_eq(rate_warnings, seed == 0 ? 1 : 0);
    }
    s.seed = 1;

    /* A required rate is every batch's: all the 16 kHz cuts come through, each 8 kHz cut
     * is reported as not at the required rate. */
    s.sampling_rate = 16000;
    problems_seen = 0;
    cuts = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    rc = drain(r, &cuts);
    ck_assert_int_eq(rc, SHARC_END);
    ck_assert_uint_eq(cuts, 20);
    ck_assert_int_eq(problems_seen, 3);
    ck_assert_msg(corpus_has(narrow, problem_cut), "%s is not an 8 kHz cut", problem_cut);
    s.on_error = SHARC_ON_ERROR_FAIL;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0)
        sharc_batch_release(b);
    ck_assert_int_eq(rc, SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_ptr_nonnull(
        strstr(sharc_reader_last_error(r), "16000 Hz is required, the audio is 8000 Hz"));
    sharc_reader_close(&r);
    tu_rm_rf(wide);
    tu_rm_rf(narrow);
    free(wide);
    free(narrow);
}
END_TEST

/* A cut whose metadata say 5000 s (within what its member could hold) no batch can hold
 * under this allocator: the error names the cut and its member. (A NeMo row can no longer
 * say more than its member holds: its window stops at the member's end, as NeMo's.) */
START_TEST(batch_too_large_names_its_longest_cut)
{
    char *dir = gen_corpus("--layout wds --codec wav --compress none --shards 1 "
                           "--cuts-per-shard 4 --max-duration 3");
    char path[600], member[256];
    snprintf(path, sizeof path, "%s/wds", dir);
    ck_assert_int_eq(tu_sh("cd '%s' && tar tf shard-000000.tar | grep '[.]wav$' | head -1 > "
                           "../first && key=$(basename \"$(cat ../first)\" .wav) && python3 "
                           "'%s/corrupt.py' tar-replace shard-000000.tar \"$key.json\" "
                           "'{\"duration\": 5000, \"sampling_rate\": 16000, \"num_samples\": "
                           "80000000}'",
                           path, getenv("SHARC_TESTS_SRC")),
                     0);
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.n_threads = 1;
    s.shuffle_shards = 0;
    s.sampler.max_duration = 30;
    s.sampler.num_buckets = 1;
    static size_t cap_256mib = (size_t)256 << 20;
    s.allocator.alloc = capped_alloc;
    s.allocator.free = capped_free;
    s.allocator.cookie = &cap_256mib;
    sharc_reader *r;
    sharc_batch *b;
    int rc;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0)
        sharc_batch_release(b);
    ck_assert_int_eq(rc, SHARC_ERR(ENOMEM));
    const char *e = sharc_reader_last_error(r);
    char idpath[700];
    snprintf(idpath, sizeof idpath, "%s/first", dir);
    FILE *idf = fopen(idpath, "r");
    ck_assert_ptr_nonnull(idf);
    ck_assert_ptr_nonnull(fgets(member, sizeof member, idf));
    fclose(idf);
    member[strcspn(member, "\n")] = 0;
    ck_assert_msg(strstr(e, "cannot lay out a batch") && strstr(e, "of 5000 s by its metadata"),
                  "%s", e);
    char want[400];
    snprintf(want, sizeof want, "cut %.*s, ", (int)(strlen(member) - 4), member); /* no .wav */
    ck_assert_msg(strstr(e, want) != NULL, "'%s' not in: %s", want, e);
    snprintf(want, sizeof want, "member %s", member);
    ck_assert_msg(strstr(e, want) != NULL, "'%s' not in: %s", want, e);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* The report of the row that starts past the end of the long member. */
static int past_reports;
static sharc_problem past_kind;
static char past_message[1024];
static void record_past(void *cookie, const sharc_problem_report *p)
{
    (void)cookie;
    if (!p->cut_id || !strstr(p->cut_id, "-sub9999"))
        return;
    past_reports++;
    past_kind = p->kind;
    snprintf(past_message, sizeof past_message, "%s", p->message);
}

/*
 * Cut mode on the long-form corpus: every row lends the one member (its bytes are the
 * member's, the same for every row), decodes its own window exactly, and the row past the
 * end gives its problem, which is returned for comparison with batch mode.
 */
static void windows_in_cut_mode(const char *path, uint64_t seed, int rows, int64_t window,
                                char *message, size_t cap)
{
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.on_error = SHARC_ON_ERROR_SKIP;
    s.on_problem = record_past;
    past_reports = 0;
    sharc_reader *r;
    const sharc_cut *cut;
    uint8_t *member = NULL;
    size_t member_bytes = 0;
    int rc, seen = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while ((rc = sharc_reader_next(r, &cut)) == 0) {
        const char *sub = strstr(cut->id, "-sub");
        ck_assert_ptr_nonnull(sub);
        const int k = atoi(sub + 4);
        ck_assert_int_eq(cut->num_samples, window);
        for (int64_t t = 0; t < window; t++)
            ck_assert_msg(cut->samples[t] == synth_sample_f32(seed, (k - 1) * window + t, 0),
                          "cut mode %s sample %lld", cut->id, (long long)t);
        ck_assert_ptr_nonnull(cut->audio);
        if (member == NULL) {
            ck_assert_msg(memcmp(cut->audio, "RIFF", 4) == 0 || memcmp(cut->audio, "fLaC", 4) == 0,
                          "%s: the audio is not the member's", cut->id);
            member_bytes = cut->audio_nbytes;
            member = malloc(member_bytes);
            ck_assert_ptr_nonnull(member);
            memcpy(member, cut->audio, member_bytes);
        }
        ck_assert_uint_eq(cut->audio_nbytes, member_bytes);
        ck_assert_msg(memcmp(cut->audio, member, member_bytes) == 0, "%s: other bytes", cut->id);
        seen++;
    }
    ck_assert_int_eq(rc, SHARC_END);
    ck_assert_int_eq(seen, rows);
    sharc_reader_close(&r);
    free(member);
    ck_assert_int_eq(past_reports, 1);
    ck_assert_int_eq(past_kind, SHARC_PROBLEM_LENGTH);
    snprintf(message, cap, "%s", past_message);
}

/*
 * Long-form audio: 20 manifest rows cut consecutive 2 s windows out of one 40 s member (as
 * NeMo manifests segment a long recording), in a plain tar, WAV and FLAC. Every window's
 * samples are exact, and the member is read about once in all, not once or twice per row:
 * its header from its first bytes, each window's samples alone (WAV), or what libsndfile
 * reads to seek to and decode the window (FLAC). A row starting past the member's end is the
 * same problem, with the same text, as when the member is decoded whole (one that starts
 * inside and runs past it stops at the end, as NeMo's: test_reader.c). Cut mode, which
 * reads members into memory, lends the member to each of its rows and decodes each window.
 */
START_TEST(long_member_windows_read_once)
{
    static const char *const codecs[] = {"wav", "flac"};
    enum { ROWS = 20, RATE = 16000, WINDOW = 2 * RATE };
    for (int c = 0; c < 2; c++) {
        char args[256];
        snprintf(args, sizeof args,
                 "--layout nemo --codec %s --compress none --shards 1 --cuts-per-shard 3 "
                 "--min-duration 40 --max-duration 40",
                 codecs[c]);
        char *dir = gen_corpus(args);
        ck_assert_int_eq(tu_sh("python3 '%s/nemo_windows.py' '%s' %d 2 41 >/dev/null",
                               getenv("SHARC_TESTS_SRC"), dir, ROWS),
                         0);
        char path[600], tar[700], line[4096];
        snprintf(path, sizeof path, "%s/nemo.expected.jsonl", dir);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        fclose(f);
        /* The first member's seed, as text: it may not fit a double. */
        const char *at = strstr(line, "\"cut_seed\": ");
        ck_assert_ptr_nonnull(at);
        const uint64_t seed = strtoull(at + strlen("\"cut_seed\": "), NULL, 10);
        snprintf(path, sizeof path, "%s/nemo", dir);
        snprintf(tar, sizeof tar, "%s/audio_0.tar", path);
        size_t tar_bytes;
        free(tu_read_file(tar, &tar_bytes));
        const char *paths[] = {path};
        sharc_reader_settings s;
        settings_on(&s, paths);
        s.sampler.max_duration = 20;
        s.on_error = SHARC_ON_ERROR_SKIP; /* the other members have no rows */
        s.on_problem = record_past;
        char whole_message[1024];
        windows_in_cut_mode(path, seed, ROWS, WINDOW, whole_message, sizeof whole_message);
        for (int threads = 1; threads <= 3; threads += 2) {
            s.n_threads = threads;
            sharc_reader *r;
            sharc_batch *b;
            int rc, seen = 0;
            const unsigned long long before = tu_bytes_read();
            past_reports = 0;
            ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
            while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
                const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
                const int32_t *lens = sharc_batch_tensor(b, "audio_lens")->data;
                for (int64_t i = 0; i < audio->shape[0]; i++) {
                    size_t n;
                    const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &n);
                    const char *sub = memmem(id, n, "-sub", 4);
                    ck_assert_ptr_nonnull(sub);
                    const int k = atoi(sub + 4);
                    ck_assert_int_eq(lens[i], WINDOW);
                    const float *row = (const float *)audio->data + i * audio->shape[1];
                    for (int64_t t = 0; t < WINDOW; t++)
                        ck_assert_msg(row[t] ==
                                          synth_sample_f32(seed, (int64_t)(k - 1) * WINDOW + t, 0),
                                      "%s %.*s sample %lld", codecs[c], (int)n, id, (long long)t);
                    seen++;
                }
                sharc_batch_release(b);
            }
            ck_assert_int_eq(rc, SHARC_END);
            ck_assert_int_eq(seen, ROWS);
            sharc_reader_close(&r);
            ck_assert_int_eq(past_reports, 1);
            ck_assert_int_eq(past_kind, SHARC_PROBLEM_LENGTH);
            ck_assert_str_eq(past_message, whole_message);
            /* A whole read of the member per row would be about ROWS x the tar. */
            const unsigned long long read = tu_bytes_read() - before;
            ck_assert_uint_gt(read, 0); /* /proc/self/io counts */
            ck_assert_msg(read < 3ull * tar_bytes, "%s: read %llu bytes of a %zu-byte tar",
                          codecs[c], read, tar_bytes);
        }
        tu_rm_rf(dir);
        free(dir);
    }
}
END_TEST

static char sampler_warning[1024];
static void capture_sampler_warning(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    char line[1024];
    snprintf(line, sizeof line, "%s", message);
    if (level == SHARC_LOG_WARN && strstr(line, "sampler:"))
        snprintf(sampler_warning, sizeof sampler_warning, "%s", line);
}

/* The sampler's messages about one cut name it by its id, shard and member, not its key. */
START_TEST(sampler_messages_name_the_cut)
{
    make_corpus();
    sharc_reader_settings s;
    const char *paths[1];
    settings_for(&s, paths, 1, 0);
    s.sampler.shuffle = 0;
    s.shuffle_shards = 0;
    char first[256], want[1400];
    tu_expected_field(corpus_dir, 0, "id", first, sizeof first);
    snprintf(want, sizeof want, "cut %s (%s/recording.000000.tar member %s.flac)", first,
             corpus_path, first);
    /* Fixed batch sizes for bins that end below the first cut (0.5-8 s): an error. */
    const double bins[1] = {0.25};
    const uint32_t sizes[2] = {4, 4};
    s.sampler.max_duration = 0;
    s.sampler.bins = bins;
    s.sampler.n_bins = 1;
    s.sampler.bucket_batch_size = sizes;
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_TOO_LARGE);
    const char *e = sharc_reader_last_error(r);
    ck_assert_msg(strstr(e, want) && strstr(e, "--max-cut-duration"), "%s", e);
    sharc_reader_close(&r);
    /* A cut longer than max_duration alone: a batch of its own, with a warning naming it. */
    settings_for(&s, paths, 1, 0);
    s.sampler.shuffle = 0;
    s.shuffle_shards = 0;
    s.sampler.max_duration = 0.1;
    s.logger.callback = capture_sampler_warning;
    s.logger.level = SHARC_LOG_WARN;
    sampler_warning[0] = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
    ck_assert_int_eq(b->tensors[0].shape[0], 1);
    sharc_batch_release(b);
    ck_assert_msg(strstr(sampler_warning, "sampler: cut ") &&
                      strstr(sampler_warning, "exceeds max_duration 0.1 s"),
                  "%s", sampler_warning);
    sharc_reader_close(&r);
}
END_TEST

/*
 * A problem found by the planner (a truncated tar) and one found by a decode thread (a
 * corrupt member) are each reported once: one on_problem call, one count, one log line, at
 * ERROR under FAIL and WARN under SKIP, naming the shard and member (not also libarchive's
 * or libsndfile's bare text, nor again when the caller takes the failed batch).
 */
START_TEST(one_report_per_problem)
{
    char bad_member[256], bad_id[256], cut_member[256];
    char *dir = corpus_with_bad_member(bad_member, bad_id);
    tu_expected_field(dir, 3, "member", cut_member, sizeof cut_member);
    /* Shard 0 also ends inside its fourth member. */
    ck_assert_int_eq(tu_sh("cd '%s/shar' && n=$(python3 -c \"import tarfile; "
                           "t=tarfile.open('recording.000000.tar'); m=t.getmember('%s'); "
                           "print(m.offset_data + 100)\") && "
                           "python3 '%s/corrupt.py' truncate recording.000000.tar $n",
                           dir, cut_member, getenv("SHARC_TESTS_SRC")),
                     0);
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.shuffle_shards = 0;
    s.sampler.shuffle = 0;
    s.sampler.max_duration = 12;
    s.logger.callback = capture_log;
    s.logger.level = SHARC_LOG_DEBUG;
    s.on_problem = count_problem;
    /* With a byte budget of one cut, the bins' estimate reads ahead over both problems
     * before they are pulled: they are still reported once, when pulled. */
    const uint64_t budget = s.sampler.max_buffer_bytes;
    for (int run = 0; run < 4; run++) {
        const int threads = run % 2 ? 4 : 1;
        s.n_threads = threads;
        s.sampler.max_buffer_bytes = run < 2 ? budget : 1;
        /* FAIL: shard 0 comes first; its truncation stops the run. */
        s.on_error = SHARC_ON_ERROR_FAIL;
        log_errors = log_warnings = 0;
        problems_seen = 0;
        sharc_reader *r;
        sharc_batch *b;
        int rc;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        while ((rc = sharc_reader_next_batch(r, &b)) == 0)
            sharc_batch_release(b);
        ck_assert_int_eq(rc, SHARC_ERR_CORRUPT);
        ck_assert_int_eq(problems_seen, 1);
        ck_assert_int_eq(log_errors, 1);
        ck_assert_int_eq(log_warnings, 0);
        ck_assert_ptr_nonnull(strstr(last_logged, "recording.000000.tar"));
        ck_assert_ptr_nonnull(strstr(last_logged, cut_member));
        sharc_reader_stats st;
        sharc_reader_get_stats(r, &st);
        ck_assert_uint_eq(st.problems[SHARC_PROBLEM_ARCHIVE], 1);
        sharc_reader_close(&r);

        /* SKIP: the rest of shard 0 and the corrupt cut of shard 1 are skipped, each one
         * warning. */
        s.on_error = SHARC_ON_ERROR_SKIP;
        log_errors = log_warnings = 0;
        problems_seen = 0;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        while ((rc = sharc_reader_next_batch(r, &b)) == 0)
            sharc_batch_release(b);
        ck_assert_int_eq(rc, SHARC_END);
        ck_assert_int_eq(problems_seen, 2);
        ck_assert_int_eq(log_errors, 0);
        ck_assert_int_eq(log_warnings, 2);
        sharc_reader_get_stats(r, &st);
        ck_assert_uint_eq(st.problems[SHARC_PROBLEM_ARCHIVE], 1);
        ck_assert_uint_eq(st.problems[SHARC_PROBLEM_DECODE], 1);
        ck_assert_uint_eq(st.skipped_shards, 1);
        ck_assert_uint_eq(st.skipped_cuts, 1);
        sharc_reader_close(&r);
    }
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Problems seen while reading, in the order they were reported. */
#define MAX_SEEN 64
static char seen[MAX_SEEN][600];
static size_t n_seen;
static void record_problem(void *cookie, const sharc_problem_report *p)
{
    (void)cookie;
    if (n_seen < MAX_SEEN)
        snprintf(seen[n_seen], sizeof seen[0], "%s|%s|%s|%s", sharc_problem_name(p->kind),
                 p->shard ? p->shard : "", p->member ? p->member : "", p->cut_id ? p->cut_id : "");
    n_seen++;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The batches and the reading problems (in order; decode problems come from decode
 * threads in any order, so those are compared as a set) of one run. */
static size_t run_recording(const sharc_reader_settings *s, print *out, size_t cap,
                            char (*problems)[600], size_t *n_problems)
{
    n_seen = 0;
    size_t n = run(s, out, cap);
    ck_assert_uint_le(n_seen, MAX_SEEN);
    size_t k = 0;
    for (size_t i = 0; i < n_seen; i++) /* reading problems first, as reported */
        if (strncmp(seen[i], "decode|", 7) != 0)
            memcpy(problems[k++], seen[i], sizeof seen[0]);
    size_t n_read = k;
    for (size_t i = 0; i < n_seen; i++)
        if (strncmp(seen[i], "decode|", 7) == 0)
            memcpy(problems[k++], seen[i], sizeof seen[0]);
    qsort(problems + n_read, k - n_read, sizeof problems[0], cmp_str);
    *n_problems = k;
    return n;
}

/*
 * Shards read ahead on other threads give what one thread reading them gives: the same
 * batches and the same problems in the same order, over damaged shards (bad metadata
 * line, truncated archive, garbage file, corrupt audio), several epochs, and a
 * data-parallel slot with a single shard (the same shard every epoch).
 */
START_TEST(read_ahead_keeps_order_with_problems)
{
    char *dir =
        gen_corpus("--layout shar --compress gzip --shards 6 --cuts-per-shard 10 --max-duration 4");
    char bad_member[256], bad_id[200], bad_meta[256];
    tu_expected_field(dir, 34, "member", bad_member, sizeof bad_member); /* shard 3, cut 4 */
    tu_expected_field(dir, 52, "id", bad_id, sizeof bad_id);             /* shard 5, cut 2 */
    snprintf(bad_meta, sizeof bad_meta, "%s.json", bad_id);
    const char *py = "python3 '%s/corrupt.py'";
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s/shar' && %s lines-set cuts.000001.jsonl.gz 3 '{not json' && "
             "%s truncate recording.000002.tar.gz -3000 && "
             "%s tar-replace recording.000003.tar.gz '%s' @flac-garbage:2000 && "
             "head -c 100 /dev/urandom > recording.000004.tar.gz && "
             "%s tar-replace recording.000005.tar.gz '%s' '{bad'",
             dir, py, py, py, bad_member, py, bad_meta);
    const char *src = getenv("SHARC_TESTS_SRC");
    ck_assert_int_eq(tu_sh(cmd, src, src, src, src), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    static print ref[256], got[256];
    static char ref_p[MAX_SEEN][600], got_p[MAX_SEEN][600];
    for (int dp = 0; dp < 2; dp++) {
        sharc_reader_settings s;
        settings_on(&s, paths);
        s.seed = 11;
        s.epochs = 3;
        s.on_error = SHARC_ON_ERROR_SKIP;
        s.on_problem = record_problem;
        s.sampler.max_duration = 10;
        s.sampler.buffer_size = 12;
        s.sampler.num_cuts_for_bins_estimate = 20;
        if (dp) { /* one shard per slot: slot 4 reads the garbage file every epoch */
            s.dp_size = 6;
            s.dp_rank = 3;
        }
        size_t n_ref_p, n_got_p;
        s.n_threads = 1;
        size_t n = run_recording(&s, ref, 256, ref_p, &n_ref_p);
        ck_assert_uint_gt(n, 2);
        ck_assert_uint_gt(n_ref_p, dp ? 0 : 4);
        const int threads[] = {2, 4};
        for (int t = 0; t < 2; t++) {
            s.n_threads = threads[t];
            ck_assert_uint_eq(run_recording(&s, got, 256, got_p, &n_got_p), n);
            expect_same_batches(got, ref, n);
            ck_assert_uint_eq(n_got_p, n_ref_p);
            for (size_t i = 0; i < n_ref_p; i++)
                ck_assert_str_eq(got_p[i], ref_p[i]);
        }
        if (!dp) { /* every kind of damage was met, each epoch */
            size_t kinds[5] = {0};
            for (size_t i = 0; i < n_ref_p; i++) {
                kinds[0] += strstr(ref_p[i], "cuts.000001.jsonl.gz") != NULL;
                kinds[1] += strstr(ref_p[i], "recording.000002.tar.gz") != NULL;
                kinds[2] += strstr(ref_p[i], bad_member) != NULL;
                kinds[3] += strstr(ref_p[i], "recording.000004.tar.gz") != NULL;
                kinds[4] += strstr(ref_p[i], bad_meta) != NULL; /* only that cut is lost */
            }
            for (int k = 0; k < 5; k++)
                ck_assert_msg(kinds[k] == 3, "damage %d reported %zu times, not once per epoch", k,
                              kinds[k]);
        }
    }
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Shards longer than a lane's queue (64 entries, or its byte budget): lanes wait for room
 * and go on. */
START_TEST(read_ahead_over_full_queues)
{
    char *dir = gen_corpus("--layout shar --compress gzip --shards 3 --cuts-per-shard 150 "
                           "--min-duration 0.2 --max-duration 0.6");
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    static print ref[512], got[512];
    sharc_reader_settings s;
    settings_on(&s, paths);
    s.seed = 4;
    s.epochs = 2;
    s.sampler.max_duration = 6;
    s.sampler.buffer_size = 40;
    s.sampler.num_cuts_for_bins_estimate = 100;
    s.n_threads = 1;
    size_t n = run(&s, ref, 512);
    ck_assert_uint_gt(n, 50);
    s.n_threads = 3;
    /* Default budget (the queue's entry cap binds), one entry per lane, no lanes at all. */
    const uint64_t budgets[] = {s.read_ahead_bytes, 1, 0};
    for (int k = 0; k < 3; k++) {
        s.read_ahead_bytes = budgets[k];
        ck_assert_uint_eq(run(&s, got, 512), n);
        expect_same_batches(got, ref, n);
    }
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/*
 * audio_lens and the string offsets are int32: a batch whose row lengths or string bytes pass
 * INT32_MAX is an error naming the step and the tensor, never a wrapped value. Checked with
 * numbers at the boundary (no 2 GiB batch is allocated).
 */
START_TEST(int32_tensors_are_bounded)
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    uint64_t bytes[4] = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX};
    ck_assert_int_eq(sharc__collate_check_i32(&ctx, 7, 3, INT32_MAX, "a", bytes), 0);
    ck_assert_int_eq(sharc__collate_check_i32(&ctx, 7, 3, (int64_t)INT32_MAX + 1, "a", bytes),
                     SHARC_ERR_TOO_LARGE);
    ck_assert_str_eq(ctx.error, "step 7: cannot lay out the batch: audio_lens is int32, and cut a "
                                "has 2147483648 samples, over 2147483647");
    static const char *const columns[] = {"cut_id", "text", "speaker", "language"};
    for (int c = 0; c < 4; c++) {
        bytes[c] = (uint64_t)INT32_MAX + 1;
        ck_assert_int_eq(sharc__collate_check_i32(&ctx, 12, 5, 16000, "b", bytes),
                         SHARC_ERR_TOO_LARGE);
        char want[256];
        snprintf(want, sizeof want,
                 "step 12: cannot lay out the batch: %s_offsets is int32, and its 5 cuts hold "
                 "2147483648 bytes of %s, over 2147483647",
                 columns[c], columns[c]);
        ck_assert_str_eq(ctx.error, want);
        bytes[c] = INT32_MAX;
    }
    ck_assert_int_eq(sharc__collate_check_i32(&ctx, 12, 5, 16000, "b", bytes), 0);
}
END_TEST

/*
 * A cut's key locates any epoch a run reaches: a small dataset repeated past epoch 65535
 * (where keys of 16 bits of epoch ended the run) keeps its epoch, shard and position, keys
 * sort as (epoch, shard, position), and only 2^40 - 2 shard visits are past the end.
 */
START_TEST(cut_keys_locate_any_epoch)
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(sharc__buf_set_str(&ctx, &c.id, "u1"), 0);
    const size_t shards[] = {1, 3, ((size_t)1 << 24) - 1};
    const uint64_t epochs[] = {0, 65535, 65536, 70000, 1000003};
    for (size_t k = 0; k < 3; k++) {
        uint64_t last = 0;
        for (size_t e = 0; e < 5; e++)
            for (uint32_t shard = 0; shard < 2 && shard < shards[k]; shard++) {
                c.epoch = epochs[e];
                c.shard_index = shards[k] > 1 ? (uint32_t)shards[k] - 2 + shard : 0;
                c.position = (UINT64_C(1) << 24) - 1 - shard;
                uint64_t key = 0;
                if (epochs[e] * shards[k] + c.shard_index > SHARC__KEY_MAX_VISIT) {
                    ck_assert_int_eq(sharc__cut_key(&ctx, &c, shards[k], &key),
                                     SHARC_ERR_TOO_LARGE);
                    continue;
                }
                ck_assert_int_eq(sharc__cut_key(&ctx, &c, shards[k], &key), 0);
                ck_assert_uint_eq(sharc__key_epoch(key, shards[k]), c.epoch);
                ck_assert_uint_eq(sharc__key_shard(key, shards[k]), c.shard_index);
                ck_assert_uint_eq(sharc__key_position(key), c.position);
                ck_assert(key > last || (e == 0 && shard == 0));
                ck_assert(key != UINT64_MAX);
                last = key;
            }
    }
    /* The last visit a key holds, and the one after it. */
    uint64_t key = 0;
    c.epoch = SHARC__KEY_MAX_VISIT / 2;
    c.shard_index = 0;
    ck_assert_int_eq(sharc__cut_key(&ctx, &c, 2, &key), 0);
    ck_assert_uint_eq(sharc__key_epoch(key, 2), c.epoch);
    c.shard_index = 1;
    ck_assert_int_eq(sharc__cut_key(&ctx, &c, 2, &key), SHARC_ERR_TOO_LARGE);
    char want[256];
    snprintf(want, sizeof want,
             "cut u1: epoch %llu of 2 shards is past what a resume state can locate (2^40 - 2 "
             "shard visits)",
             (unsigned long long)c.epoch);
    ck_assert_str_eq(ctx.error, want);
    c.epoch = 0;
    c.position = UINT64_C(1) << 24;
    ck_assert_int_eq(sharc__cut_key(&ctx, &c, 2, &key), SHARC_ERR_TOO_LARGE);
    ck_assert_str_eq(ctx.error, "cut u1: position 16777216 in its shard is past what a resume "
                                "state can locate (2^24 cuts per shard)");
    sharc__buf_free(&ctx, &c.id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("batches");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, every_cut_once_and_padding_rule);
    tcase_add_test(tc, int32_tensors_are_bounded);
    tcase_add_test(tc, cut_keys_locate_any_epoch);
    tcase_add_test(tc, batch_samples_exact);
    tcase_add_test(tc, same_batches_for_any_thread_count);
    tcase_add_loop_test(tc, resume_equals_uninterrupted, 0, 2);
    tcase_add_test(tc, elastic_resume_delivers_every_cut_once);
    tcase_add_test(tc, elastic_resume_refuses_wrong_states);
    tcase_add_test(tc, bins_estimated_past_the_byte_budget);
    tcase_add_test(tc, corrupt_states_are_rejected);
    tcase_add_test(tc, threads_are_named);
    tcase_add_test(tc, backpressure_and_mode_errors);
    tcase_add_test(tc, timed_next_waits_in_slices);
    tcase_add_test(tc, decode_errors_under_both_policies);
    tcase_add_test(tc, stats_are_those_of_the_batch_returned);
    tcase_add_test(tc, filtered_cuts_by_reason);
    tcase_add_test(tc, skipped_longest_row_narrows_the_batch);
    tcase_add_test(tc, batches_hold_one_sampling_rate);
    tcase_add_test(tc, batch_too_large_names_its_longest_cut);
    tcase_add_test(tc, sampler_messages_name_the_cut);
    tcase_add_test(tc, one_report_per_problem);
    tcase_add_test(tc, long_member_windows_read_once);
    tcase_add_loop_test(tc, every_layout_in_batches, 0, 4);
    tcase_add_test(tc, long_wav_members_in_parts);
    tcase_add_test(tc, wav_members_not_in_parts_read_whole);
    tcase_add_test(tc, read_ahead_keeps_order_with_problems);
    tcase_add_test(tc, read_ahead_over_full_queues);
    tcase_add_test(tc, endless_epochs_of_nothing_stop);
    tcase_add_test(tc, fail_stops_at_the_same_batch);
    tcase_add_test(tc, settings_at_open_and_no_memory_at_start);
    tcase_add_test(tc, decode_threads_near_the_open_file_limit);
    /* One corpus for all tests, made once in this process before they fork (an unchecked
     * fixture runs in the parent): each test runs in its own child, so that the timeout
     * applies and a crash fails that test alone. */
    tcase_add_unchecked_fixture(tc, make_corpus, NULL);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tu_rm_rf(corpus_dir);
    free(corpus_dir);
    return failed ? 1 : 0;
}

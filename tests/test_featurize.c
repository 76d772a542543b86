/*
 * Features computed per row in the decode workers (batching/featurize.h): every batch's
 * features equal those the whole-batch function computes from its audio, with any number of
 * threads, with rows skipped and compacted, with or without the audio; the dither is seeded
 * by the cut, not by the batch or the thread; a resumed run gives the same features; and the
 * thread that takes the batches does not compute them.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batching/bcut.h"
#include "batching/featurize.h"
#include "features/fbank.h"
#include "sharc/sharc.h"
#include "testutil.h"

enum { SHARDS = 3, CUTS_PER_SHARD = 8, N_CUTS = SHARDS * CUTS_PER_SHARD, MAX_STEPS = 64 };

/* A fresh directory with a corpus written by sharc-gen with `args`. */
static char *gen_corpus(const char *args)
{
    char *dir = tu_mkdtemp();
    ck_assert_int_eq(tu_sh("'%s' --out '%s' %s >/dev/null", getenv("SHARC_GEN"), dir, args), 0);
    return dir;
}

/* Shar, FLAC, 3 shards of 8 cuts of 0.5-6 s. */
static char *make_corpus(void)
{
    char *dir = gen_corpus("--layout shar --compress none --shards 3 --cuts-per-shard 8 "
                           "--max-duration 6 --seed 4");
    ck_assert_int_eq(tu_sh("test $(wc -l < '%s/shar.expected.jsonl') -eq %d", dir, N_CUTS), 0);
    return dir;
}

/* Cut `index` (in corpus order) gets a garbage FLAC body; its id is returned. */
static void settings_for(sharc_reader_settings *s, const char **paths, int threads)
{
    sharc_reader_default_settings(s);
    s->paths = paths;
    s->n_paths = 1;
    s->logger.callback = NULL;
    s->seed = 3;
    s->n_threads = threads;
    s->features = SHARC_FEATURES_FBANK;
    s->fbank_n_mels = 64;
    s->sampler.max_duration = 20;
    s->sampler.num_buckets = 2;
    s->sampler.buffer_size = 10;
    s->sampler.num_cuts_for_bins_estimate = 10;
}

/* The keys of the corpus's cuts (batching/bcut.h), by id, from a run over single cuts: what
 * the dither of a cut is seeded by. */
typedef struct keymap {
    char id[N_CUTS][128];
    uint64_t key[N_CUTS];
    size_t n;
} keymap;

static void read_keys(const char *path, keymap *km)
{
    const char *paths[] = {path};
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    s.paths = paths;
    s.n_paths = 1;
    s.logger.callback = NULL;
    s.decode = 0;
    s.on_error = SHARC_ON_ERROR_SKIP;
    sharc_reader *r;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    size_t n_shards = sharc_reader_num_shards(r);
    km->n = 0;
    while (sharc_reader_next(r, &c) == 0) {
        ck_assert_uint_lt(km->n, N_CUTS);
        snprintf(km->id[km->n], sizeof km->id[0], "%s", c->id);
        uint64_t visit = c->epoch * n_shards + c->shard_index;
        km->key[km->n++] = (visit << SHARC__KEY_POS_BITS) | c->position;
    }
    sharc_reader_close(&r);
}

static uint64_t key_of(const keymap *km, const char *id, size_t len)
{
    for (size_t i = 0; i < km->n; i++)
        if (strlen(km->id[i]) == len && memcmp(km->id[i], id, len) == 0)
            return km->key[i];
    ck_abort_msg("cut %.*s has no key", (int)len, id);
    return 0;
}

/*
 * The features of batch `b` as the whole-batch function computes them from its audio: with
 * `km` NULL (no dither) sharc__fbank_compute itself; with dither, each row by
 * sharc__fbank_row_seeded seeded by its cut's key. Compared exactly, with the lengths, the
 * shape and the zero padding.
 */
static void expect_reference(const sharc_batch *b, const sharc_reader_settings *rs,
                             const keymap *km)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__fbank_settings fs;
    sharc__featurize_settings(rs, &fs);
    sharc__fbank *plan = NULL;
    ck_assert_int_eq(sharc__fbank_create(&plan, &ctx, &fs), 0);
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    const sharc_tensor *ft = sharc_batch_tensor(b, "features");
    const sharc_tensor *fl = sharc_batch_tensor(b, "feature_lens");
    ck_assert_ptr_nonnull(audio);
    ck_assert_ptr_nonnull(ft);
    ck_assert_ptr_nonnull(fl);
    int64_t B = audio->shape[0], T = audio->shape[1], frames = sharc__fbank_frames(plan, T);
    ck_assert_int_eq(ft->ndim, 3);
    ck_assert_int_eq(ft->shape[0], B);
    ck_assert_int_eq(ft->shape[1], rs->fbank_n_mels);
    ck_assert_int_eq(ft->shape[2], frames);
    ck_assert_int_eq(fl->shape[0], B);
    size_t row_floats = (size_t)rs->fbank_n_mels * (size_t)frames;
    float *want = malloc((size_t)B * row_floats * sizeof *want);
    int32_t *want_lens = malloc((size_t)B * sizeof *want_lens);
    ck_assert_ptr_nonnull(want);
    if (!km) {
        ck_assert_int_eq(sharc__fbank_compute(plan, &ctx, audio->data, lens->data, B, T, b->step,
                                              want, want_lens, frames),
                         0);
    } else {
        for (int64_t i = 0; i < B; i++) {
            size_t len = 0;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
            int32_t n = ((const int32_t *)lens->data)[i];
            int64_t nv = sharc__fbank_row_seeded(plan, &ctx, (const float *)audio->data + i * T, n,
                                                 sharc__fbank_cut_seed(plan, key_of(km, id, len)),
                                                 want + (size_t)i * row_floats, frames);
            ck_assert_int_ge(nv, 0);
            want_lens[i] = (int32_t)nv;
        }
    }
    ck_assert_mem_eq(fl->data, want_lens, (size_t)B * sizeof *want_lens);
    const float *got = ft->data;
    for (size_t k = 0; k < (size_t)B * row_floats; k++)
        if (memcmp(&got[k], &want[k], sizeof *got) != 0)
            ck_abort_msg("step %llu: features[%zu][%zu][%zu] = %.9g, the reference %.9g",
                         (unsigned long long)b->step, k / row_floats,
                         k % row_floats / (size_t)frames, k % (size_t)frames, got[k], want[k]);
    /* The reference writes zeros past the valid frames: they are exactly 0 here too. */
    for (int64_t i = 0; i < B; i++)
        for (int64_t m = 0; m < rs->fbank_n_mels; m++)
            for (int64_t t = want_lens[i]; t < frames; t++)
                ck_assert(got[(size_t)i * row_floats + (size_t)(m * frames + t)] == 0.0f);
    free(want);
    free(want_lens);
    sharc__fbank_destroy(&plan);
}

/* A batch's features and ids, kept to compare runs. */
typedef struct kept {
    char ids[2048];
    float *features;
    size_t nbytes;
    int32_t lens[N_CUTS];
    int64_t B, frames;
} kept;

static void keep(const sharc_batch *b, kept *k)
{
    const sharc_tensor *ft = sharc_batch_tensor(b, "features");
    const sharc_tensor *fl = sharc_batch_tensor(b, "feature_lens");
    ck_assert_ptr_nonnull(ft);
    ck_assert_ptr_nonnull(fl);
    k->B = ft->shape[0];
    k->frames = ft->shape[2];
    k->nbytes = ft->nbytes;
    k->features = malloc(ft->nbytes);
    memcpy(k->features, ft->data, ft->nbytes);
    ck_assert_int_le(k->B, N_CUTS);
    memcpy(k->lens, fl->data, (size_t)k->B * sizeof(int32_t));
    k->ids[0] = 0;
    for (int64_t i = 0; i < k->B; i++) {
        size_t len;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
        strncat(k->ids, id, len);
        strcat(k->ids, " ");
    }
}

static void expect_same(const kept *got, const kept *want, size_t step)
{
    ck_assert_msg(strcmp(got->ids, want->ids) == 0, "step %zu: ids '%s', want '%s'", step, got->ids,
                  want->ids);
    ck_assert_int_eq(got->B, want->B);
    ck_assert_int_eq(got->frames, want->frames);
    ck_assert_mem_eq(got->lens, want->lens, (size_t)got->B * sizeof(int32_t));
    ck_assert_uint_eq(got->nbytes, want->nbytes);
    ck_assert_msg(memcmp(got->features, want->features, got->nbytes) == 0,
                  "step %zu: the features differ", step);
}

static void free_kept(kept *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(k[i].features);
}

/* Read every batch of `s`, checking each against the reference (see expect_reference) when
 * the audio is kept, and keep them. */
static size_t run(const sharc_reader_settings *s, const keymap *km, kept *out)
{
    sharc_reader *r;
    sharc_batch *b;
    int rc;
    size_t n = 0;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        ck_assert_uint_lt(n, MAX_STEPS);
        ck_assert_uint_eq(b->step, n);
        if (s->keep_audio)
            expect_reference(b, s, km);
        else
            ck_assert_ptr_null(sharc_batch_tensor(b, "audio"));
        keep(b, &out[n++]);
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    sharc_reader_close(&r);
    return n;
}

/* 1 and 3 threads, with and without the audio: the whole-batch function's values. */
START_TEST(rows_equal_the_whole_batch_function)
{
    char *dir = make_corpus();
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    static kept one[MAX_STEPS], three[MAX_STEPS], bare[MAX_STEPS];
    sharc_reader_settings s;
    settings_for(&s, paths, 1);
    size_t n = run(&s, NULL, one);
    ck_assert_uint_ge(n, 4);
    s.n_threads = 3;
    ck_assert_uint_eq(run(&s, NULL, three), n);
    s.keep_audio = 0;
    ck_assert_uint_eq(run(&s, NULL, bare), n);
    for (size_t i = 0; i < n; i++) {
        expect_same(&three[i], &one[i], i);
        expect_same(&bare[i], &one[i], i);
    }
    free_kept(one, n);
    free_kept(three, n);
    free_kept(bare, n);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/*
 * The longest cut fails to decode under the skip policy: its batch is compacted to the other
 * rows, narrowed to the longest of them, and its features are those of the compacted audio,
 * with 1 and 3 threads, and the same without the audio.
 */
START_TEST(skipped_rows_leave_compacted_features)
{
    char *dir = make_corpus();
    int longest;
    int64_t most, second;
    ck_assert_int_eq(tu_longest_cuts(dir, &longest, &most, &second), N_CUTS);
    char bad_member[256], bad_id[256];
    tu_spoil_member(dir, longest, CUTS_PER_SHARD, bad_member, bad_id);
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    static kept one[MAX_STEPS], three[MAX_STEPS], bare[MAX_STEPS];
    sharc_reader_settings s;
    settings_for(&s, paths, 1);
    s.on_error = SHARC_ON_ERROR_SKIP;
    s.sampler.max_cuts = N_CUTS; /* one batch of every cut */
    s.sampler.max_duration = 0;
    s.sampler.buffer_size = 2 * N_CUTS;
    const double bins[1] = {100};
    s.sampler.bins = bins;
    s.sampler.n_bins = 1;
    ck_assert_uint_eq(run(&s, NULL, one), 1);
    ck_assert_int_eq(one[0].B, N_CUTS - 1);
    ck_assert_ptr_null(strstr(one[0].ids, bad_id));
    sharc__fbank_settings fs;
    sharc__featurize_settings(&s, &fs);
    /* Narrowed to the second longest cut, not padded to the skipped one. */
    ck_assert_int_eq(one[0].frames, sharc__fbank_frames_of(&fs, second));
    ck_assert_int_lt(one[0].frames, sharc__fbank_frames_of(&fs, most));
    s.n_threads = 3;
    ck_assert_uint_eq(run(&s, NULL, three), 1);
    s.keep_audio = 0;
    ck_assert_uint_eq(run(&s, NULL, bare), 1);
    expect_same(&three[0], &one[0], 0);
    expect_same(&bare[0], &one[0], 0);
    free_kept(one, 1);
    free_kept(three, 1);
    free_kept(bare, 1);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/*
 * With dither, each cut's noise comes from the seed and the cut's key: every row equals the
 * row function seeded so, whatever the thread count and however the cuts are batched, and
 * the dither does change the features.
 */
START_TEST(dither_is_seeded_by_the_cut)
{
    char *dir = make_corpus();
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    static keymap km;
    read_keys(path, &km);
    ck_assert_uint_eq(km.n, N_CUTS);
    static kept plain[MAX_STEPS], one[MAX_STEPS], three[MAX_STEPS], other[MAX_STEPS];
    sharc_reader_settings s;
    settings_for(&s, paths, 1);
    size_t n = run(&s, NULL, plain);
    s.fbank_dither = 1e-3;
    ck_assert_uint_eq(run(&s, &km, one), n);
    s.n_threads = 3;
    ck_assert_uint_eq(run(&s, &km, three), n);
    for (size_t i = 0; i < n; i++) {
        expect_same(&three[i], &one[i], i);
        ck_assert_str_eq(one[i].ids, plain[i].ids);
        ck_assert(memcmp(one[i].features, plain[i].features, one[i].nbytes) != 0);
    }
    /* Other batches, other steps and rows: the same noise per cut. */
    s.sampler.max_duration = 9;
    s.sampler.shuffle = 0;
    size_t m = run(&s, &km, other);
    ck_assert_uint_gt(m, n);
    free_kept(plain, n);
    free_kept(one, n);
    free_kept(three, n);
    free_kept(other, m);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Resumed from a state saved mid-epoch, with another thread count: the same features, dither
 * included, as the run that went on. */
START_TEST(resume_gives_the_same_features)
{
    char *dir = make_corpus();
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    static kept ref[MAX_STEPS], got[MAX_STEPS];
    sharc_reader_settings s;
    settings_for(&s, paths, 2);
    s.epochs = 2;
    s.fbank_dither = 1e-3;
    s.keep_audio = 0;
    size_t n = run(&s, NULL, ref);
    ck_assert_uint_ge(n, 8);
    size_t k = n / 4; /* within the first epoch */
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    for (size_t i = 0; i < k; i++) {
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
        sharc_batch_release(b);
    }
    size_t size = 0;
    ck_assert_int_eq(sharc_reader_state_save(r, NULL, 0, &size), SHARC_ERR(ENOSPC));
    void *blob = malloc(size);
    ck_assert_int_eq(sharc_reader_state_save(r, blob, size, &size), 0);
    sharc_reader_close(&r);
    sharc_reader_settings s2 = s;
    s2.resume_state = blob;
    s2.resume_state_size = size;
    s2.n_threads = 3;
    ck_assert_int_eq(sharc_reader_open(&r, &s2), 0);
    size_t m = 0;
    int rc;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        ck_assert_uint_lt(k + m, n);
        ck_assert_uint_eq(b->step, k + m);
        keep(b, &got[m]);
        expect_same(&got[m], &ref[k + m], k + m);
        m++;
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    ck_assert_uint_eq(k + m, n);
    sharc_reader_close(&r);
    free(blob);
    free_kept(ref, n);
    free_kept(got, m);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * The thread that takes the batches only places the rows' features: its CPU time in
 * sharc_reader_next_batch is a small part of what computing them takes (measured on the same
 * thread, with the whole-batch function on the same batches).
 */
START_TEST(the_taking_thread_does_not_compute_them)
{
    char *dir = make_corpus();
    char path[600];
    snprintf(path, sizeof path, "%s/shar", dir);
    const char *paths[] = {path};
    sharc_reader_settings s;
    settings_for(&s, paths, 2);
    s.epochs = 3;
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__fbank *plan = NULL;
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    double taking = 0, computing = 0;
    int rc;
    for (;;) {
        double t0 = thread_cpu_s();
        rc = sharc_reader_next_batch(r, &b);
        taking += thread_cpu_s() - t0;
        if (rc != 0)
            break;
        /* The same features again, from the batch's audio, in a batch of the test's own. */
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        int64_t B = audio->shape[0], T = audio->shape[1];
        sharc__fbank_settings fs;
        sharc__featurize_settings(&s, &fs);
        if (!plan)
            ck_assert_int_eq(sharc__fbank_create(&plan, &ctx, &fs), 0);
        int64_t frames = sharc__fbank_frames(plan, T);
        float *out = malloc((size_t)(B * s.fbank_n_mels * frames) * sizeof *out);
        int32_t *lens = malloc((size_t)B * sizeof *lens);
        t0 = thread_cpu_s();
        ck_assert_int_eq(sharc__fbank_compute(plan, &ctx, audio->data,
                                              sharc_batch_tensor(b, "audio_lens")->data, B, T, 0,
                                              out, lens, frames),
                         0);
        computing += thread_cpu_s() - t0;
        free(out);
        free(lens);
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    sharc_reader_close(&r);
    sharc__fbank_destroy(&plan);
    ck_assert_msg(taking < 0.3 * computing,
                  "the taking thread spent %.3f s of CPU for features that take %.3f s", taking,
                  computing);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("featurize");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, rows_equal_the_whole_batch_function);
    tcase_add_test(tc, skipped_rows_leave_compacted_features);
    tcase_add_test(tc, dither_is_seeded_by_the_cut);
    tcase_add_test(tc, resume_gives_the_same_features);
    tcase_add_test(tc, the_taking_thread_does_not_compute_them);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}

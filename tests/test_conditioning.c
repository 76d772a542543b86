/*
 * Conditioning (docs/conditioning.md): resampling, speed and volume perturbation, against
 * sox's `rate` and `speed` effects on speech-like audio and Lhotse's length formulas, in
 * cut mode and in batches, threads 1 and 2, across a resume, and the settings' errors.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sharc/sharc.h>

#include "base/hash.h"
#include "decode/condition.h"
#include "reader/reader.h"
#include "testutil.h"

/*
 * Test audio made by sox: speech (an utterance of the Lhotse fixture, espeak-ng at 16 kHz,
 * converted to the cut's rate by sox), or, for lengths of a few samples, pink noise
 * band-limited to 4 kHz with a syllable-rate envelope. A second channel, when there is
 * one, is a 440 Hz tone, so that the channel selected shows.
 */
typedef struct src_cut {
    const char *id;
    int rate, channels;
    const char *trim;   ///< speech: sox `trim` start and length in seconds; else NULL
    const char *length; ///< synthetic: sox synth length in samples ("40s")
} src_cut;

static const src_cut mixed[] = {
    {"a-8k", 8000, 1, "0.2 1.1", NULL},   {"b-44k", 44100, 1, "0.5 1.3", NULL},
    {"c-48k", 48000, 1, "1.0 0.7", NULL}, {"d-48k-stereo", 48000, 2, "0.4 0.9", NULL},
    {"e-16k", 16000, 1, "0.1 0.6", NULL}, {"f-48k-tiny", 48000, 1, NULL, "40s"},
    {"g-48k-one", 48000, 1, NULL, "1s"},
};
#define N_MIXED (sizeof mixed / sizeof mixed[0])

/* Write `cuts` as WAV files in dir/src and one WebDataset tar of them in dir/ds. */
static void make_dataset(const char *dir, const src_cut *cuts, size_t n)
{
    ck_assert_int_eq(tu_sh("mkdir -p '%s/src' '%s/ds' && tar xOf "
                           "'%s/lhotse-shar-edge/wav/recording.000000.tar' dir/sub/utt-001.wav "
                           "> '%s/speech.wav'",
                           dir, dir, getenv("SHARC_TESTDATA"), dir),
                     0);
    for (size_t i = 0; i < n; i++) {
        const src_cut *c = &cuts[i];
        int rc;
        if (c->trim && c->channels > 1)
            rc = tu_sh("cd '%s' && sox -R -M speech.wav '|sox -n -r 16000 -p synth 4 sine 440' "
                       "-r %d -b 16 src/%s.wav trim %s 2>/dev/null",
                       dir, c->rate, c->id, c->trim);
        else if (c->trim)
            rc = tu_sh("cd '%s' && sox -R speech.wav -r %d -b 16 src/%s.wav trim %s 2>/dev/null",
                       dir, c->rate, c->id, c->trim);
        else
            rc = tu_sh("cd '%s' && sox -R -n -r %d -c %d -b 16 src/%s.wav synth %s pinknoise "
                       "sinc -4k tremolo 5 90 gain -n -3 2>/dev/null",
                       dir, c->rate, c->channels, c->id, c->length);
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(tu_sh("echo 'words of %s' > '%s/src/%s.txt'", c->id, dir, c->id), 0);
    }
    ck_assert_int_eq(tu_sh("cd '%s/src' && ls | sort | xargs tar cf ../ds/shard-000000.tar", dir),
                     0);
}

/* Logged messages, for the errors of an open that fails. */
static char logged[1024];
static void keep_log(void *cookie, sharc_log_level level, const char *msg)
{
    (void)cookie;
    (void)level;
    snprintf(logged, sizeof logged, "%s", msg);
}

/* A noise dataset of pink noise by sox in dir/noise: a cut shorter than the speech (looped)
 * and a longer one at 48 kHz (resampled, from an offset). */
static const char *make_noise(const char *dir)
{
    static char path[1024];
    ck_assert_int_eq(tu_sh("mkdir -p '%s/nsrc' '%s/noise' && cd '%s/nsrc' && "
                           "sox -R -n -r 16000 -b 16 n0.wav synth 0.3 pinknoise gain -n -10 && "
                           "sox -R -n -r 48000 -b 16 n1.wav synth 3 brownnoise gain -n -10 && "
                           "tar cf ../noise/shard-000000.tar n0.wav n1.wav",
                           dir, dir, dir),
                     0);
    snprintf(path, sizeof path, "%s/noise", dir);
    return path;
}

/* sox's conversion of dir/src/<id>.wav with `effects` as float samples (malloc'ed). */
static float *sox_reference(const char *dir, const char *id, const char *effects, size_t *n)
{
    ck_assert_int_eq(tu_sh("cd '%s' && sox -R src/%s.wav -t raw -e floating-point -b 32 ref.raw "
                           "%s 2>/dev/null",
                           dir, id, effects),
                     0);
    char path[1024];
    snprintf(path, sizeof path, "%s/ref.raw", dir);
    size_t bytes;
    float *ref = (float *)tu_read_file(path, &bytes);
    ck_assert_ptr_nonnull(ref);
    *n = bytes / sizeof(float);
    return ref;
}

/* Signal to difference ratio of x against ref over their common length, in dB. */
static double sdr_db(const float *x, const float *ref, size_t n)
{
    double s = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)ref[i] * ref[i];
        d += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]);
    }
    return d > 0 ? 10 * log10(s / d) : 999;
}

/* Lhotse's compute_num_samples(n / from, to), for the lengths used here (no ties at 8
 * decimals). */
static int64_t resampled(int64_t n, int from, int to)
{
    return from == to ? n : (int64_t)floor((double)n * to / from + 0.5);
}

static const src_cut *find_cut(const src_cut *cuts, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(cuts[i].id, id) == 0)
            return &cuts[i];
    ck_abort_msg("unknown cut %s", id);
    return NULL;
}

static void settings_for(sharc_reader_settings *s, const char *dir, const char **path)
{
    static char ds[1024];
    snprintf(ds, sizeof ds, "%s/ds", dir);
    *path = ds;
    sharc_reader_default_settings(s);
    s->paths = path;
    s->n_paths = 1;
    s->shuffle_shards = 0;
    s->channel = 0;
    s->sampling_rate = 16000;
    s->resample = 1;
}

/* Every rate to 16 kHz, against `sox ... rate 16000`: exact lengths, >= 50 dB. */
START_TEST(resample_matches_sox)
{
    char *dir = tu_mkdtemp();
    make_dataset(dir, mixed, N_MIXED);
    sharc_reader_settings s;
    const char *path;
    settings_for(&s, dir, &path);
    sharc_reader *r;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    size_t seen = 0;
    while (sharc_reader_next(r, &c) == 0) {
        const src_cut *src = find_cut(mixed, N_MIXED, c->id);
        char srcpath[1024];
        snprintf(srcpath, sizeof srcpath, "%s/src/%s.wav", dir, c->id);
        size_t n_ref;
        /* The stored length, as sox reads it. */
        float *orig = sox_reference(dir, c->id, "remix 1", &n_ref);
        const int64_t n_src = (int64_t)n_ref;
        free(orig);
        ck_assert_int_eq(c->sampling_rate, 16000);
        ck_assert_int_eq(c->channels, 1);
        ck_assert_int_eq(c->num_samples, resampled(n_src, src->rate, 16000));
        ck_assert_double_eq_tol(c->duration, (double)n_src / src->rate, 1e-9);
        ck_assert(c->speed == 1 && c->gain == 1);
        float *ref = sox_reference(dir, c->id, "remix 1 rate 16000", &n_ref);
        size_t n = (size_t)c->num_samples < n_ref ? (size_t)c->num_samples : n_ref;
        for (int64_t i = 0; i < c->num_samples; i++)
            ck_assert(isfinite(c->samples[i]));
        if (n_src > 4000) {
            /* sox's length is the same rule within a sample */
            ck_assert_int_le(llabs((long long)n_ref - (long long)c->num_samples), 1);
            double q = sdr_db(c->samples, ref, n);
            ck_assert_msg(q >= 50, "cut %s: %.1f dB against sox", c->id, q);
        }
        free(ref);
        seen++;
    }
    ck_assert_uint_eq(seen, N_MIXED);
    sharc_reader_close(&r);
    /* Without a channel chosen, cut mode converts both channels of the stereo cut. */
    s.channel = -1;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while (sharc_reader_next(r, &c) == 0 && strcmp(c->id, "d-48k-stereo") != 0)
        ;
    ck_assert_str_eq(c->id, "d-48k-stereo");
    ck_assert_int_eq(c->channels, 2);
    size_t n_ref;
    float *ref = sox_reference(dir, c->id, "remix 2 rate 16000", &n_ref);
    ck_assert_uint_eq(n_ref, (size_t)c->num_samples);
    float *right = malloc(n_ref * sizeof(float));
    for (size_t i = 0; i < n_ref; i++)
        right[i] = c->samples[2 * i + 1];
    ck_assert(sdr_db(right, ref, n_ref) >= 50);
    free(right);
    free(ref);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Batches hold the cut-mode samples of each cut, the same with 1 and 2 threads. */
static void read_batches(const sharc_reader_settings *s, float **rows, int64_t *lens,
                         char ids[][32], size_t cap, size_t *n)
{
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    *n = 0;
    while (sharc_reader_next_batch(r, &b) == 0) {
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        const sharc_tensor *al = sharc_batch_tensor(b, "audio_lens");
        const sharc_tensor *dur = sharc_batch_tensor(b, "duration");
        for (int64_t i = 0; i < audio->shape[0]; i++) {
            ck_assert_uint_lt(*n, cap);
            int32_t len = ((const int32_t *)al->data)[i];
            const float *row = (const float *)audio->data + i * audio->shape[1];
            size_t idl;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &idl);
            snprintf(ids[*n], 32, "%.*s", (int)idl, id);
            /* the duration tensor is the cut's, whatever its rate */
            ck_assert(((const float *)dur->data)[i] > 0);
            rows[*n] = malloc((size_t)audio->shape[1] * sizeof(float) + 1);
            memcpy(rows[*n], row, (size_t)audio->shape[1] * sizeof(float));
            for (int64_t t = len; t < audio->shape[1]; t++)
                ck_assert(row[t] == 0.0f); /* padding stays exactly 0 */
            lens[(*n)++] = len;
        }
        sharc_batch_release(b);
    }
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    /* the conversions' time, part of the decode threads' */
    ck_assert(st.condition_seconds > 0 &&
              st.condition_seconds < st.stage_seconds[SHARC_STAGE_DECODE]);
    /* and the noise stream's, apart from them, 0 without noise */
    ck_assert((st.noise_seconds > 0) == (s->augment && s->augment->n_noise > 0));
    sharc_reader_close(&r);
}

/* The rows of the batches of a reader, as read_batches() gives them. */
enum { MAX_ROWS = 48 };
typedef struct rows_read {
    float *rows[MAX_ROWS];
    int64_t lens[MAX_ROWS];
    char ids[MAX_ROWS][32];
    size_t n;
} rows_read;

/* The rows of the batches of `s` with 1 thread (got[0]) and with 2 (got[1]), `want` each;
 * free them with free_rows(). */
static void read_any_threads(sharc_reader_settings *s, rows_read got[2], size_t want)
{
    for (int t = 0; t < 2; t++) {
        s->n_threads = t + 1;
        read_batches(s, got[t].rows, got[t].lens, got[t].ids, MAX_ROWS, &got[t].n);
        ck_assert_uint_eq(got[t].n, want);
    }
}

static void free_rows(rows_read got[2])
{
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < got[t].n; i++)
            free(got[t].rows[i]);
}

/* The batches of `s` hold the same `want` rows, bit for bit, with 1 and 2 threads. */
static void same_rows_any_threads(sharc_reader_settings *s, size_t want)
{
    rows_read got[2];
    read_any_threads(s, got, want);
    for (size_t i = 0; i < want; i++) {
        ck_assert_str_eq(got[0].ids[i], got[1].ids[i]);
        ck_assert_int_eq(got[0].lens[i], got[1].lens[i]);
        ck_assert_mem_eq(got[0].rows[i], got[1].rows[i], (size_t)got[0].lens[i] * sizeof(float));
    }
    free_rows(got);
}

START_TEST(batches_match_cuts_any_threads)
{
    char *dir = tu_mkdtemp();
    make_dataset(dir, mixed, N_MIXED);
    sharc_reader_settings s;
    const char *path;
    settings_for(&s, dir, &path);
    s.sampler.max_cuts = 3;
    s.sampler.shuffle = 0;
    s.sampler.num_buckets = 1;
    rows_read got[2];
    read_any_threads(&s, got, N_MIXED);
    sharc_reader *r;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    size_t matched = 0;
    while (sharc_reader_next(r, &c) == 0)
        for (size_t i = 0; i < N_MIXED; i++) {
            if (strcmp(got[0].ids[i], c->id) != 0)
                continue;
            for (int t = 0; t < 2; t++) {
                ck_assert_str_eq(got[t].ids[i], c->id);
                ck_assert_int_eq(got[t].lens[i], c->num_samples);
                ck_assert_mem_eq(got[t].rows[i], c->samples,
                                 (size_t)c->num_samples * sizeof(float));
            }
            matched++;
        }
    ck_assert_uint_eq(matched, N_MIXED);
    sharc_reader_close(&r);
    free_rows(got);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Without `resample`, a cut at another rate is an error that names the setting. */
START_TEST(without_resample_the_error_names_it)
{
    char *dir = tu_mkdtemp();
    make_dataset(dir, mixed, 1);
    sharc_reader_settings s;
    const char *path;
    settings_for(&s, dir, &path);
    s.resample = 0;
    sharc_reader *r;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next(r, &c), SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), "a-8k"));
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), "--resample"));
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

static const src_cut speech16[] = {
    {"s0", 16000, 1, "0.0 1.2", NULL}, {"s1", 16000, 1, "0.3 0.9", NULL},
    {"s2", 16000, 1, "0.6 1.5", NULL}, {"s3", 16000, 1, "0.9 0.8", NULL},
    {"s4", 48000, 1, "1.2 1.1", NULL}, {"s5", 16000, 1, "1.5 1.0", NULL},
};
#define N_SPEECH (sizeof speech16 / sizeof speech16[0])

/* Lhotse's perturb_num_samples(n, f) for the lengths used here (no ties at 8 decimals). */
static int64_t perturbed(int64_t n, double f)
{
    double x = round((double)n / f * 1e8) / 1e8;
    return f >= 1 ? (int64_t)floor(x + 0.5) : (int64_t)ceil(x - 0.5);
}

/* Speed factors against `sox ... speed F rate 16000` (>= 40 dB), lengths and durations as
 * Lhotse's perturb_speed, with resampling first for the 48 kHz cut. */
START_TEST(speed_matches_sox)
{
    char *dir = tu_mkdtemp();
    make_dataset(dir, speech16, N_SPEECH);
    sharc_reader_settings s;
    const char *path;
    settings_for(&s, dir, &path);
    static const double factors[] = {0.9, 1.0, 1.1};
    sharc_augment_settings a;
    sharc_augment_default_settings(&a);
    a.speed_perturb = factors;
    a.n_speed_perturb = 3;
    s.augment = &a;
    sharc_reader *r;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    int used[3] = {0};
    while (sharc_reader_next(r, &c) == 0) {
        const src_cut *src = find_cut(speech16, N_SPEECH, c->id);
        size_t n_ref;
        float *orig = sox_reference(dir, c->id, "", &n_ref);
        free(orig);
        const int64_t n16 = resampled((int64_t)n_ref, src->rate, 16000);
        int k = c->speed == 0.9 ? 0 : c->speed == 1.0 ? 1 : c->speed == 1.1 ? 2 : -1;
        ck_assert_int_ge(k, 0);
        used[k]++;
        ck_assert_int_eq(c->num_samples, perturbed(n16, c->speed));
        ck_assert_double_eq_tol(
            c->duration, c->speed == 1 ? (double)n_ref / src->rate : (double)c->num_samples / 16000,
            1e-9);
        char effects[64];
        snprintf(effects, sizeof effects, "speed %g rate 16000", c->speed);
        float *ref = sox_reference(dir, c->id, c->speed == 1 ? "rate 16000" : effects, &n_ref);
        ck_assert_int_le(llabs((long long)n_ref - (long long)c->num_samples), 1);
        size_t n = (size_t)c->num_samples < n_ref ? (size_t)c->num_samples : n_ref;
        double q = sdr_db(c->samples, ref, n);
        ck_assert_msg(q >= 40, "cut %s at speed %g: %.1f dB against sox", c->id, c->speed, q);
        free(ref);
    }
    /* six cuts draw each factor */
    ck_assert(used[0] && used[1] && used[2]);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* The draws depend on the seed, the cut and its epoch only: the same in batches and cuts,
 * other draws in another epoch; with probability 0 none. */
START_TEST(draws_depend_on_seed_cut_epoch)
{
    char *dir = tu_mkdtemp();
    char args[64];
    snprintf(args, sizeof args, "--layout wds --codec wav --shards 1 --cuts-per-shard 40");
    ck_assert_int_eq(tu_sh("'%s' --out '%s' %s --min-duration 0.2 --max-duration 0.5 "
                           ">/dev/null",
                           getenv("SHARC_GEN"), dir, args),
                     0);
    char ds[1024];
    snprintf(ds, sizeof ds, "%s/wds", dir);
    const char *path = ds;
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    s.paths = &path;
    s.n_paths = 1;
    s.epochs = 2;
    static const double factors[] = {0.9, 1.1};
    sharc_augment_settings a;
    sharc_augment_default_settings(&a);
    a.speed_perturb = factors;
    a.n_speed_perturb = 2;
    a.volume_perturb_db[0] = -6;
    a.volume_perturb_db[1] = 6;
    s.augment = &a;
    double speed[2][40], gain[2][40];
    int64_t len[40];
    char ids[40][64];
    sharc_reader *r;
    const sharc_cut *c;
    for (int pass = 0; pass < 2; pass++) {
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        size_t k = 0;
        while (sharc_reader_next(r, &c) == 0) {
            ck_assert_uint_lt(c->epoch, 2);
            size_t i = k % 40;
            if (pass == 0 && c->epoch == 0)
                snprintf(ids[i], sizeof ids[i], "%s", c->id);
            ck_assert(c->gain >= pow(10, -0.3) - 1e-12 && c->gain <= pow(10, 0.3) + 1e-12);
            ck_assert(c->speed == 0.9 || c->speed == 1.1);
            if (pass == 1) { /* a rerun draws the same */
                ck_assert(speed[c->epoch][i] == c->speed && gain[c->epoch][i] == c->gain);
            }
            speed[c->epoch][i] = c->speed;
            gain[c->epoch][i] = c->gain;
            if (c->epoch == 0)
                len[i] = c->num_samples;
            k++;
        }
        ck_assert_uint_eq(k, 80);
        sharc_reader_close(&r);
    }
    int differ = 0;
    for (size_t i = 0; i < 40; i++)
        differ += speed[0][i] != speed[1][i] || gain[0][i] != gain[1][i];
    ck_assert_int_gt(differ, 10);
    /* The batches' lengths are the perturbed ones, whatever the threads. */
    s.epochs = 1;
    s.sampler.max_cuts = 7;
    s.n_threads = 2;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    sharc_batch *b;
    size_t rows = 0;
    while (sharc_reader_next_batch(r, &b) == 0) {
        const sharc_tensor *al = sharc_batch_tensor(b, "audio_lens");
        const sharc_tensor *du = sharc_batch_tensor(b, "duration");
        for (int64_t i = 0; i < al->shape[0]; i++, rows++) {
            size_t idl;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &idl);
            size_t j = 0;
            while (j < 40 && !(strlen(ids[j]) == idl && memcmp(ids[j], id, idl) == 0))
                j++;
            ck_assert_uint_lt(j, 40);
            ck_assert_int_eq(((const int32_t *)al->data)[i], len[j]);
            ck_assert_float_eq_tol(((const float *)du->data)[i], (float)len[j] / 16000, 1e-6);
        }
        sharc_batch_release(b);
    }
    ck_assert_uint_eq(rows, 40);
    sharc_reader_close(&r);
    /* probability 0: nothing drawn applies */
    a.speed_perturb_prob = 0;
    a.volume_perturb_prob = 0;
    s.sampler.max_cuts = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while (sharc_reader_next(r, &c) == 0)
        ck_assert(c->speed == 1 && c->gain == 1);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Each batch row carries its cut's speed factor, gain and SNR: those of cut mode for the same
 * cut and epoch (as f32), NAN where no noise was mixed in, whatever the threads; each of the
 * 2 epochs' cuts is met once. A reader without conditioning has no such tensors. */
START_TEST(batches_carry_the_draws)
{
    char *dir = tu_mkdtemp();
    ck_assert_int_eq(tu_sh("'%s' --out '%s' --layout wds --codec wav --shards 2 "
                           "--cuts-per-shard 12 --min-duration 0.2 --max-duration 0.5 >/dev/null",
                           getenv("SHARC_GEN"), dir),
                     0);
    const char *noise = make_noise(dir);
    sharc_reader_settings s;
    const char *path;
    settings_for(&s, dir, &path);
    char ds[1024];
    snprintf(ds, sizeof ds, "%s/wds", dir);
    path = ds; /* sharc-gen's, for dir/ds */
    s.epochs = 2;
    static const double factors[] = {0.9, 1.0, 1.1};
    sharc_augment_settings a;
    sharc_augment_default_settings(&a);
    a.speed_perturb = factors;
    a.n_speed_perturb = 3;
    a.volume_perturb_db[0] = -6;
    a.volume_perturb_db[1] = 6;
    a.volume_perturb_prob = 0.5;
    a.noise = &noise;
    a.n_noise = 1;
    s.augment = &a;
    enum { N = 48 };
    char ids[N][64];
    double speed[N], gain[N], snr[N];
    sharc_reader *r;
    const sharc_cut *c;
    size_t n = 0;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    while (sharc_reader_next(r, &c) == 0) {
        ck_assert_uint_lt(n, N);
        snprintf(ids[n], sizeof ids[n], "%s", c->id);
        speed[n] = c->speed;
        gain[n] = c->gain;
        snr[n++] = c->snr_db;
    }
    sharc_reader_close(&r);
    ck_assert_uint_eq(n, N);
    s.sampler.max_cuts = 5;
    for (int threads = 1; threads <= 2; threads++) {
        s.n_threads = threads;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        sharc_batch *b;
        size_t rows = 0, noisy = 0, gained = 0, sped = 0;
        uint8_t seen[N] = {0};
        while (sharc_reader_next_batch(r, &b) == 0) {
            const sharc_tensor *t[3] = {sharc_batch_tensor(b, "speed"),
                                        sharc_batch_tensor(b, "gain"),
                                        sharc_batch_tensor(b, "snr_db")};
            for (int k = 0; k < 3; k++) {
                ck_assert_ptr_nonnull(t[k]);
                ck_assert_int_eq(t[k]->dtype, SHARC_DTYPE_F32);
                ck_assert_int_eq(t[k]->ndim, 1);
                ck_assert_int_eq(t[k]->shape[0], sharc_batch_tensor(b, "audio_lens")->shape[0]);
            }
            for (int64_t i = 0; i < t[0]->shape[0]; i++, rows++) {
                size_t idl;
                const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &idl);
                const float *v[3] = {t[0]->data, t[1]->data, t[2]->data};
                /* A batch may hold cuts of two epochs: the row is the one of its cut's two
                 * (id, epoch) entries whose draws it has, each entry met once. */
                size_t j = 0;
                while (j < N && (seen[j] || strlen(ids[j]) != idl || memcmp(ids[j], id, idl) != 0 ||
                                 v[0][i] != (float)speed[j] || v[1][i] != (float)gain[j] ||
                                 (isnan(snr[j]) ? !isnan(v[2][i]) : v[2][i] != (float)snr[j])))
                    j++;
                ck_assert_msg(j < N,
                              "row %lld of step %llu (cut %.*s): no cut of that id has "
                              "speed %g, gain %g, SNR %g",
                              (long long)i, (unsigned long long)b->step, (int)idl, id, v[0][i],
                              v[1][i], v[2][i]);
                seen[j] = 1;
                noisy += !isnan(snr[j]);
                gained += gain[j] != 1;
                sped += speed[j] != 1;
            }
            sharc_batch_release(b);
        }
        ck_assert_uint_eq(rows, N);
        /* Every kind of draw shows, and not on every row. */
        ck_assert(noisy > 0 && noisy < N && gained > 0 && gained < N && sped > 0 && sped < N);
        sharc_reader_close(&r);
    }
    /* Without conditioning, no such tensors. */
    s.augment = NULL;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
    ck_assert_ptr_null(sharc_batch_tensor(b, "speed"));
    ck_assert_ptr_null(sharc_batch_tensor(b, "gain"));
    ck_assert_ptr_null(sharc_batch_tensor(b, "snr_db"));
    sharc_batch_release(b);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* A volume-perturbed cut is the unperturbed one times its gain. */
START_TEST(volume_scales_samples)
{
    char *dir = tu_mkdtemp();
    make_dataset(dir, speech16, 2);
    sharc_reader_settings s;
    const char *path;
    settings_for(&s, dir, &path);
    sharc_augment_settings a;
    sharc_augment_default_settings(&a);
    a.volume_perturb_db[0] = -6;
    a.volume_perturb_db[1] = 6;
    sharc_reader *plain, *loud;
    const sharc_cut *c, *d;
    ck_assert_int_eq(sharc_reader_open(&plain, &s), 0);
    s.augment = &a;
    ck_assert_int_eq(sharc_reader_open(&loud, &s), 0);
    while (sharc_reader_next(plain, &c) == 0) {
        ck_assert_int_eq(sharc_reader_next(loud, &d), 0);
        ck_assert_int_eq(c->num_samples, d->num_samples);
        ck_assert(d->gain != 1 && c->gain == 1);
        for (int64_t i = 0; i < c->num_samples; i++)
            ck_assert(d->samples[i] == (float)(c->samples[i] * (float)d->gain));
    }
    sharc_reader_close(&plain);
    sharc_reader_close(&loud);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* A FLAC Shar corpus by sharc-gen in dir/shar (2 shards of `cuts` cuts of `min`-0.8 s at
 * `rate` Hz), and settings that read it (path in `ds`) at 16 kHz with `seed`. */
static void gen_corpus(const char *dir, int rate, int cuts, const char *min, char *ds, size_t cap,
                       sharc_reader_settings *s, const char **path, uint64_t seed)
{
    ck_assert_int_eq(tu_sh("'%s' --out '%s' --layout shar --codec flac --shards 2 "
                           "--cuts-per-shard %d --sampling-rate %d --min-duration %s "
                           "--max-duration 0.8 >/dev/null",
                           getenv("SHARC_GEN"), dir, cuts, rate, min),
                     0);
    snprintf(ds, cap, "%s/shar", dir);
    *path = ds;
    sharc_reader_default_settings(s);
    s->paths = path;
    s->n_paths = 1;
    s->seed = seed;
    s->sampling_rate = 16000;
}

/* Settings `s` mixing in the noise of `*noise` through `a` (its defaults but those), with
 * noise_max_bytes `max_bytes` (0: the default). */
static void with_noise(sharc_reader_settings *s, sharc_augment_settings *a, const char **noise,
                       uint64_t max_bytes)
{
    sharc_augment_default_settings(a);
    a->noise = noise;
    a->n_noise = 1;
    if (max_bytes)
        a->noise_max_bytes = max_bytes;
    s->augment = a;
}

/* Two readers of `s` with the same draws: `clean` without noise (noise_prob 0), `noisy`
 * with noise for every cut. */
static void open_clean_and_noisy(const sharc_reader_settings *s, sharc_augment_settings *a,
                                 sharc_reader **clean, sharc_reader **noisy)
{
    a->noise_prob = 0;
    ck_assert_int_eq(sharc_reader_open(clean, s), 0);
    a->noise_prob = 1;
    ck_assert_int_eq(sharc_reader_open(noisy, s), 0);
}

/* A run resumed at any step gives the batches of the run that went on, bit for bit, with 2
 * threads as with 1; the noise streamed through a bound smaller than the noise dataset,
 * which it reads over and over. A state without the noise stream's position is refused. */
START_TEST(resume_is_bit_identical)
{
    char *dir = tu_mkdtemp(), ds[1024];
    const char *path;
    sharc_reader_settings s;
    gen_corpus(dir, 24000, 12, "0.2", ds, sizeof ds, &s, &path, 3);
    s.epochs = 2;
    s.resample = 1;
    s.n_threads = 2;
    s.sampler.max_cuts = 5;
    s.sampler.num_buckets = 2;
    s.sampler.num_cuts_for_bins_estimate = 10;
    s.sampler.buffer_size = 8;
    static const double factors[] = {0.9, 1.0, 1.1};
    sharc_augment_settings a;
    sharc_augment_default_settings(&a);
    a.speed_perturb = factors;
    a.n_speed_perturb = 3;
    a.volume_perturb_db[0] = -3;
    a.volume_perturb_db[1] = 3;
    const char *noise = make_noise(dir);
    a.noise = &noise;
    a.n_noise = 1;
    a.noise_max_bytes = 40000; /* noise cuts of 2500 samples, two at a time in the window */
    s.augment = &a;
    s.n_threads = 1;
    enum { MAX_BATCHES = 16 };
    size_t sizes[MAX_BATCHES];
    uint8_t *audio[MAX_BATCHES];
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    size_t n = 0;
    while (sharc_reader_next_batch(r, &b) == 0) {
        ck_assert_uint_lt(n, MAX_BATCHES);
        const sharc_tensor *t = sharc_batch_tensor(b, "audio");
        sizes[n] = t->nbytes;
        audio[n] = malloc(t->nbytes + 1);
        memcpy(audio[n++], t->data, t->nbytes);
        sharc_batch_release(b);
    }
    sharc_reader_close(&r);
    ck_assert_uint_ge(n, 6);
    s.n_threads = 2;
    for (size_t at = 1; at < n; at += 2) {
        size_t size;
        void *blob = tu_state_after(&s, at, &size);
        sharc_reader_settings t = s;
        t.resume_state = blob;
        t.resume_state_size = size;
        ck_assert_int_eq(sharc_reader_open(&r, &t), 0);
        for (size_t i = at; i < n; i++) {
            ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
            const sharc_tensor *x = sharc_batch_tensor(b, "audio");
            ck_assert_uint_eq(x->nbytes, sizes[i]);
            ck_assert_mem_eq(x->data, audio[i], sizes[i]);
            sharc_batch_release(b);
        }
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_END);
        sharc_reader_close(&r);
        /* a state saved with other conditioning is refused */
        a.speed_perturb_prob = 0.5;
        ck_assert_int_eq(sharc_reader_open(&r, &t), 0);
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_STATE);
        sharc_reader_close(&r);
        a.speed_perturb_prob = 1;
        free(blob);
    }
    /* A state without the noise's position (saved without noise, or by a sharc that held a
     * fixed bank of noise) is refused, saying so. */
    a.n_noise = 0;
    size_t size;
    void *blob = tu_state_after(&s, 1, &size);
    a.n_noise = 1;
    sharc_reader_settings t = s;
    t.resume_state = blob;
    t.resume_state_size = size;
    t.logger.callback = keep_log; /* the refusal is expected */
    ck_assert_int_eq(sharc_reader_open(&r, &t), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), "holds no position of the noise"));
    sharc_reader_close(&r);
    free(blob);
    for (size_t i = 0; i < n; i++)
        free(audio[i]);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Each noisy cut is the clean one plus noise at the SNR drawn for it (within 0.2 dB over
 * the cut's own length), the same with 1 and 2 threads, padding 0. */
START_TEST(noise_reaches_the_drawn_snr)
{
    char *dir = tu_mkdtemp();
    make_dataset(dir, speech16, N_SPEECH);
    const char *noise = make_noise(dir);
    sharc_reader_settings s;
    const char *path;
    settings_for(&s, dir, &path);
    sharc_augment_settings a;
    with_noise(&s, &a, &noise, 0);
    a.noise_snr_db[0] = 5;
    a.noise_snr_db[1] = 15;
    sharc_reader *clean, *noisy;
    const sharc_cut *c, *d;
    open_clean_and_noisy(&s, &a, &clean, &noisy);
    double first_snr = NAN;
    int differ = 0;
    while (sharc_reader_next(clean, &c) == 0) {
        ck_assert_int_eq(sharc_reader_next(noisy, &d), 0);
        ck_assert_str_eq(c->id, d->id);
        ck_assert(isnan(c->snr_db));
        ck_assert(d->snr_db >= 5 && d->snr_db <= 15);
        ck_assert_int_eq(c->num_samples, d->num_samples);
        double ps = 0, pn = 0;
        for (int64_t i = 0; i < c->num_samples; i++) {
            double z = (double)d->samples[i] - c->samples[i];
            ps += (double)c->samples[i] * c->samples[i];
            pn += z * z;
        }
        double snr = 10 * log10(ps / pn);
        ck_assert_msg(fabs(snr - d->snr_db) <= 0.2, "cut %s: %.3f dB, drawn %.3f", c->id, snr,
                      d->snr_db);
        differ += !isnan(first_snr) && d->snr_db != first_snr;
        first_snr = d->snr_db;
    }
    ck_assert_int_gt(differ, 0);
    sharc_reader_close(&clean);
    sharc_reader_close(&noisy);
    /* A noise path without audio fails the open, saying so. */
    char empty[1024];
    snprintf(empty, sizeof empty, "%s/src/s0.txt", dir);
    const char *bad = empty;
    a.noise = &bad;
    s.logger.callback = keep_log;
    logged[0] = 0;
    ck_assert_int_lt(sharc_reader_open(&clean, &s), 0);
    ck_assert_ptr_nonnull(strstr(logged, "noise:"));
    s.logger = (sharc_logger){0};
    sharc_default_logger(&s.logger);
    a.noise = &noise;
    s.sampler.max_cuts = 4;
    same_rows_any_threads(&s, N_SPEECH);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Noise cuts told apart by their tone: cut k of the noise dataset is 0.05 s of a sine at
 * 200 + 100 k Hz (whole periods, so that it loops seamlessly), `per_shard` of them to a
 * shard, in that order (shard j holds cuts j * per_shard on). */
enum { N_TONES = 40, TONE_SAMPLES = 800 };

static const char *make_tones(const char *dir, int per_shard)
{
    static char path[1024];
    ck_assert_int_eq(tu_sh("mkdir -p '%s/tsrc' '%s/tones' && cd '%s/tsrc' && "
                           "for k in $(seq 0 %d); do sox -R -n -r 16000 -b 16 "
                           "n$(printf %%02d $k).wav synth 0.05 sine $((200 + 100 * k)) gain -3; "
                           "done && for j in $(seq 0 %d); do tar cf "
                           "../tones/shard-$(printf %%06d $j).tar $(ls n*.wav | sed -n "
                           "\"$((j * %d + 1)),$((j * %d + %d))p\"); done",
                           dir, dir, dir, N_TONES - 1, N_TONES / per_shard - 1, per_shard,
                           per_shard, per_shard),
                     0);
    snprintf(path, sizeof path, "%s/tones", dir);
    return path;
}

/* Which tone `z` (the noise mixed into a cut, n samples at 16 kHz) is: its sign changes
 * (with hysteresis, about its peak) give its frequency. -1 when it is no tone. */
static int tone_of(const double *z, int64_t n)
{
    double peak = 0;
    for (int64_t i = 0; i < n; i++)
        peak = fabs(z[i]) > peak ? fabs(z[i]) : peak;
    int sign = 0, changes = 0;
    for (int64_t i = 0; i < n; i++) {
        int now = z[i] > 0.3 * peak ? 1 : z[i] < -0.3 * peak ? -1 : 0;
        if (now && sign && now != sign)
            changes++;
        if (now)
            sign = now;
    }
    double hz = changes / 2.0 / ((double)n / 16000);
    int k = (int)lround((hz - 200) / 100);
    return k >= 0 && k < N_TONES && fabs(hz - (200 + 100 * k)) < 20 ? k : -1;
}

/* The tone mixed into each cut that readers of `s` give, noise drawn for every cut, in
 * tones[] (room for `cap`); *held and *index receive the noise stream's stats at the end.
 * @return the cuts read */
static size_t tones_mixed(const sharc_reader_settings *s, sharc_augment_settings *a, int *tones,
                          size_t cap, uint64_t *held, uint64_t *index)
{
    sharc_reader *clean, *noisy;
    const sharc_cut *c, *d;
    open_clean_and_noisy(s, a, &clean, &noisy);
    size_t n = 0;
    while (sharc_reader_next(clean, &c) == 0) {
        ck_assert_int_eq(sharc_reader_next(noisy, &d), 0);
        ck_assert_str_eq(c->id, d->id);
        ck_assert_uint_lt(n, cap);
        double *z = malloc((size_t)c->num_samples * sizeof *z);
        for (int64_t i = 0; i < c->num_samples; i++)
            z[i] = (double)d->samples[i] - c->samples[i];
        tones[n] = tone_of(z, c->num_samples);
        free(z);
        ck_assert_msg(tones[n++] >= 0, "cut %s: the noise mixed in is no tone", c->id);
    }
    sharc__reader_noise_stats(noisy, held, index);
    /* the noise stream's time reading and decoding noise */
    sharc_reader_stats st;
    sharc_reader_get_stats(noisy, &st);
    ck_assert(st.noise_seconds > 0);
    sharc_reader_close(&clean);
    sharc_reader_close(&noisy);
    return n;
}

/* A noise dataset larger than noise_max_bytes is streamed: cuts past the first
 * noise_max_bytes of it are mixed in, the noise held stays within the bound, and the
 * batches are the same with 1 and 2 threads. */
START_TEST(noise_streams_past_the_bound)
{
    char *dir = tu_mkdtemp(), ds[1024];
    const char *path, *tones = make_tones(dir, N_TONES);
    sharc_reader_settings s;
    gen_corpus(dir, 16000, 20, "0.3", ds, sizeof ds, &s, &path, 5);
    sharc_augment_settings a;
    /* Five tones and a little: the window holds two (half the bound). */
    with_noise(&s, &a, &tones, 5 * TONE_SAMPLES * sizeof(float) + 768);
    int got[64], most = -1;
    uint64_t held, index;
    size_t n = tones_mixed(&s, &a, got, 64, &held, &index);
    ck_assert_uint_eq(n, 40);
    for (size_t i = 0; i < n; i++)
        most = got[i] > most ? got[i] : most;
    /* Past the first noise_max_bytes of the noise dataset (its first five cuts). */
    ck_assert_int_ge(most, 6);
    ck_assert_uint_le(held, a.noise_max_bytes);
    ck_assert_uint_eq(index, (uint64_t)got[n - 1]);
    /* Batches: the same rows whatever the threads, with speed and volume on too. */
    static const double factors[] = {0.9, 1.0, 1.1};
    a.speed_perturb = factors;
    a.n_speed_perturb = 3;
    a.volume_perturb_db[0] = -3;
    a.volume_perturb_db[1] = 3;
    a.noise_prob = 0.7;
    s.sampler.max_cuts = 3;
    same_rows_any_threads(&s, 40);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* The first n tones of `tones` in the order a reader of seed `seed` walks them (its shards
 * shuffled each epoch, epochs without end), as the noise stream's reader does. */
static void tone_order(const char *tones, uint64_t seed, int *order, size_t n)
{
    sharc_reader_settings t;
    sharc_reader_default_settings(&t);
    t.paths = &tones;
    t.n_paths = 1;
    t.epochs = 0;
    t.seed = seed;
    t.decode = 0;
    sharc_reader *r;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &t), 0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(sharc_reader_next(r, &c), 0);
        order[i] = atoi(c->id + strlen(c->id) - 2); /* nKK */
    }
    sharc_reader_close(&r);
}

/* Each data-parallel slot streams the noise in an order of its own: slot 0 in the order
 * every slot had before (the noise reader seeded by the reader's seed and "noise"), whatever
 * dp_size, and slot 1 in another. With a window of one noise cut, the tones mixed into the
 * cuts, each counted once, are the stream's order. */
START_TEST(noise_order_is_each_slots_own)
{
    char *dir = tu_mkdtemp(), ds[1024];
    const char *path, *tones = make_tones(dir, 2); /* 20 shards of 2 tones */
    sharc_reader_settings s;
    gen_corpus(dir, 16000, 20, "0.5", ds, sizeof ds, &s, &path, 7);
    sharc_augment_settings a;
    with_noise(&s, &a, &tones, 4 * TONE_SAMPLES * sizeof(float));
    static const char salt[] = "noise";
    const uint64_t seed =
        sharc__fnv1a(sharc__fnv1a_u64(SHARC__FNV_OFFSET, s.seed), salt, sizeof salt);
    int order[N_TONES], got[3][64];
    tone_order(tones, seed, order, N_TONES);
    size_t n[3];
    for (int i = 0; i < 3; i++) { /* one slot; slot 0 of 2; slot 1 of 2 */
        s.dp_size = i ? 2 : 1;
        s.dp_rank = i == 2;
        uint64_t held, index;
        size_t cuts = tones_mixed(&s, &a, got[i], 64, &held, &index);
        n[i] = 0;
        for (size_t k = 0; k < cuts; k++)
            if (!n[i] || got[i][n[i] - 1] != got[i][k])
                got[i][n[i]++] = got[i][k];
        ck_assert_uint_ge(n[i], 3);
        ck_assert_uint_eq(index, n[i] - 1);
    }
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < n[i]; k++)
            ck_assert_int_eq(got[i][k], order[k]);
    ck_assert_int_ne(got[2][0], order[0]);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* The bytes of the audio of every batch a reader gives from where it starts to its end, but
 * the first `skip`, as one hash; *n receives the batches hashed. */
static uint64_t audio_hash(const sharc_reader_settings *s, size_t skip, size_t *n)
{
    sharc_reader *r;
    sharc_batch *b;
    uint64_t h = 1469598103934665603ull;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    for (size_t i = 0; i < skip; i++) {
        ck_assert_int_eq(sharc_reader_next_batch(r, &b), 0);
        sharc_batch_release(b);
    }
    int rc;
    for (*n = 0; (rc = sharc_reader_next_batch(r, &b)) == 0; ++*n) {
        const sharc_tensor *t = sharc_batch_tensor(b, "audio");
        for (size_t i = 0; i < t->nbytes; i++)
            h = (h ^ ((const uint8_t *)t->data)[i]) * 1099511628211ull;
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    sharc_reader_close(&r);
    return h;
}

/* The n states packed into a bundle (malloc'd, of *size bytes). */
static void *pack_states(void *const *states, const size_t *sizes, size_t n, size_t *size)
{
    const void *const *blobs = (const void *const *)states;
    ck_assert_int_eq(sharc_reader_pack_states(blobs, sizes, n, NULL, 0, size), SHARC_ERR(ENOSPC));
    void *bundle = malloc(*size);
    ck_assert_int_eq(sharc_reader_pack_states(blobs, sizes, n, bundle, *size, size), 0);
    return bundle;
}

/* A bundle of the slots' states resumes with noise: on as many slots, a slot gives what its
 * own state gives (another slot's state is refused); on fewer (an elastic resume, whose
 * states are checked against each old slot's noise hash too), the same batches at every
 * rerun. */
START_TEST(noise_resumes_elastic)
{
    char *dir = tu_mkdtemp(), ds[1024];
    const char *path, *noise = make_noise(dir);
    sharc_reader_settings s;
    gen_corpus(dir, 16000, 12, "0.2", ds, sizeof ds, &s, &path, 11);
    s.n_threads = 2;
    s.sampler.max_cuts = 3;
    sharc_augment_settings a;
    with_noise(&s, &a, &noise, 4096); /* noise cuts of 256 samples */
    a.volume_perturb_db[0] = -3;
    a.volume_perturb_db[1] = 3;
    s.dp_size = 2;
    void *states[2];
    size_t sizes[2];
    for (int d = 0; d < 2; d++) {
        s.dp_rank = d;
        states[d] = tu_state_after(&s, 2, &sizes[d]);
    }
    size_t size, n, m;
    void *bundle = pack_states(states, sizes, 2, &size);
    sharc_reader_settings t = s;
    t.dp_rank = 1;
    t.resume_state = states[1];
    t.resume_state_size = sizes[1];
    const uint64_t own = audio_hash(&t, 0, &n);
    /* Slot 0's state, whose noise order is another, is refused on slot 1. */
    t.resume_state = states[0];
    t.resume_state_size = sizes[0];
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, &t), 0);
    ck_assert_int_eq(sharc_reader_next_batch(r, &b), SHARC_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), "cannot resume"));
    sharc_reader_close(&r);
    t.resume_state = bundle;
    t.resume_state_size = size;
    ck_assert_uint_eq(audio_hash(&t, 0, &m), own);
    ck_assert_uint_eq(m, n);
    ck_assert_uint_gt(n, 0);
    t.dp_rank = 0;
    t.dp_size = 1;
    const uint64_t one = audio_hash(&t, 0, &n);
    ck_assert_uint_eq(audio_hash(&t, 0, &m), one);
    ck_assert_uint_eq(m, n);
    ck_assert_uint_gt(n, 0);
    free(bundle);
    free(states[0]);
    free(states[1]);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* An input_cfg (in `cfg`) mixing an 8 kHz and a 24 kHz Shar dataset generated in dir, each
 * of `shards` shards of 5 cuts, and settings reading it once at 16 kHz, resampled. */
static void gen_mixture(const char *dir, int shards, char *cfg, size_t cap,
                        sharc_reader_settings *s)
{
    ck_assert_int_eq(tu_sh("for r in 8000 24000; do '%s' --out \"%s/r$r\" --layout shar "
                           "--shards %d --cuts-per-shard 5 --min-duration 0.2 --max-duration 0.6 "
                           "--sampling-rate $r --seed $r >/dev/null || exit 1; done",
                           getenv("SHARC_GEN"), dir, shards),
                     0);
    snprintf(cfg, cap,
             "[{\"type\": \"lhotse_shar\", \"shar_path\": \"%s/r8000/shar\", \"weight\": 1},"
             " {\"type\": \"lhotse_shar\", \"shar_path\": \"%s/r24000/shar\", \"weight\": 1}]",
             dir, dir);
    sharc_reader_default_settings(s);
    s->input_cfg_text = cfg;
    s->mix_finite = 1;
    s->sampling_rate = 16000;
    s->resample = 1;
}

/* A mixture (input_cfg) with noise resumes bit for bit: its state holds the mixture's
 * section and the noise's position. */
START_TEST(noise_resumes_in_a_mixture)
{
    char *dir = tu_mkdtemp(), cfg[2048];
    sharc_reader_settings s;
    gen_mixture(dir, 2, cfg, sizeof cfg, &s);
    const char *noise = make_noise(dir);
    s.n_threads = 2;
    s.sampler.max_cuts = 2;
    sharc_augment_settings a;
    with_noise(&s, &a, &noise, 4096);
    for (size_t k = 1; k <= 3; k += 2) {
        size_t size, n, m;
        void *blob = tu_state_after(&s, k, &size);
        const uint64_t want = audio_hash(&s, k, &n);
        sharc_reader_settings t = s;
        t.resume_state = blob;
        t.resume_state_size = size;
        ck_assert_uint_eq(audio_hash(&t, 0, &m), want);
        ck_assert_uint_eq(m, n);
        ck_assert_uint_gt(n, 0);
        free(blob);
    }
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* The tones of the rows of the batches that a reader of `s` gives, noise at -60 dB SNR (a
 * row is its tone, nearly), each counted once when in consecutive rows: with a window of one
 * noise cut, the noise stream's order from where the reader starts. @return how many */
static size_t tones_batched(const sharc_reader_settings *s, int *tones, size_t cap)
{
    sharc_reader *r;
    sharc_batch *b;
    size_t n = 0;
    int rc;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        const int32_t *lens = sharc_batch_tensor(b, "audio_lens")->data;
        for (int64_t i = 0; i < audio->shape[0]; i++) {
            const float *row = (const float *)audio->data + i * audio->shape[1];
            double *z = malloc((size_t)lens[i] * sizeof *z);
            for (int32_t k = 0; k < lens[i]; k++)
                z[k] = row[k];
            const int tone = tone_of(z, lens[i]);
            free(z);
            ck_assert_int_ge(tone, 0);
            if (!n || tones[n - 1] != tone) {
                ck_assert_uint_lt(n, cap);
                tones[n++] = tone;
            }
        }
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    sharc_reader_close(&r);
    return n;
}

/* An elastic resume with noise, 2 slots -> 3, of one dataset and of a mixture: new slots 0
 * and 1 go on with the noise streams of old slots 0 and 1 from where their states left
 * them, new slot 2 streams its own from its beginning, as a fresh slot 2 of 3 does. */
START_TEST(noise_goes_on_per_slot_elastically)
{
    char *dir = tu_mkdtemp(), ds[1024], cfg[2048];
    const char *path = ds, *tones = make_tones(dir, 2); /* 20 shards of 2 tones */
    sharc_reader_settings mix;
    gen_mixture(dir, 8, cfg, sizeof cfg, &mix);
    snprintf(ds, sizeof ds, "%s/r24000/shar", dir);
    for (int mixture = 0; mixture < 2; mixture++) {
        sharc_reader_settings s = mix; /* or its second source alone */
        if (!mixture) {
            s.input_cfg_text = NULL;
            s.paths = &path;
            s.n_paths = 1;
        }
        s.sampler.max_cuts = 2;
        sharc_augment_settings a;
        with_noise(&s, &a, &tones, 4 * TONE_SAMPLES * sizeof(float)); /* a window of one */
        a.noise_prob = 1;
        a.noise_snr_db[0] = a.noise_snr_db[1] = -60;
        int old[2][64], fresh[64], now[64];
        size_t n_old[2], sizes[2], size;
        void *states[2];
        s.dp_size = 2;
        for (int d = 0; d < 2; d++) {
            s.dp_rank = d;
            n_old[d] = tones_batched(&s, old[d], 64);
            states[d] = tu_state_after(&s, 3, &sizes[d]);
        }
        sharc_reader_settings t = s;
        t.dp_size = 3;
        t.dp_rank = 2;
        const size_t n_fresh = tones_batched(&t, fresh, 64);
        void *bundle = pack_states(states, sizes, 2, &size);
        t.resume_state = bundle;
        t.resume_state_size = size;
        for (int d = 0; d < 3; d++) {
            t.dp_rank = d;
            const size_t n = tones_batched(&t, now, 64);
            ck_assert_uint_gt(n, 1);
            const int *from = d < 2 ? old[d] : fresh;
            const size_t n_from = d < 2 ? n_old[d] : n_fresh;
            size_t j = 0; /* where in `from` it goes on */
            while (j < n_from && from[j] != now[0])
                j++;
            ck_assert_msg(d < 2 ? j > 0 && j < n_from : j == 0,
                          "mixture %d, new slot %d: its first tone is %zu into its stream", mixture,
                          d, j);
            for (size_t k = 0; k < n && j + k < n_from; k++)
                ck_assert_int_eq(now[k], from[j + k]);
        }
        free(bundle);
        free(states[0]);
        free(states[1]);
    }
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* A noise shard that cannot be read fails the reading when the stream reaches it, naming
 * it, in cuts and in batches; nothing waits for noise that never comes. */
START_TEST(noise_error_names_the_noise_shard)
{
    char *dir = tu_mkdtemp(), ds[1024];
    const char *path, *noise = make_noise(dir);
    ck_assert_int_eq(tu_sh("head -c 5000 /dev/urandom > '%s/shard-000001.tar'", noise), 0);
    sharc_reader_settings s;
    gen_corpus(dir, 16000, 12, "0.2", ds, sizeof ds, &s, &path, 2);
    sharc_augment_settings a;
    with_noise(&s, &a, &noise, 4096); /* the stream moves on every few cuts */
    a.noise_prob = 1;
    s.logger.callback = keep_log; /* the failure is expected */
    s.sampler.max_cuts = 3;
    for (int batches = 0; batches < 2; batches++) {
        sharc_reader *r;
        int rc;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0); /* its first pass begins with shard 0 */
        const sharc_cut *c;
        sharc_batch *b;
        while ((rc = batches ? sharc_reader_next_batch(r, &b) : sharc_reader_next(r, &c)) == 0)
            if (batches)
                sharc_batch_release(b);
        ck_assert_int_lt(rc, 0);
        ck_assert_msg(strstr(sharc_reader_last_error(r), "noise:"), "%s",
                      sharc_reader_last_error(r));
        ck_assert_msg(strstr(sharc_reader_last_error(r), "shard-000001.tar"), "%s",
                      sharc_reader_last_error(r));
        sharc_reader_close(&r);
    }
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* NeMo rows that cut windows out of one 24 kHz recording: each window is cut at 24 kHz, then
 * converted, as sox converts the same window (`trim`, then `rate`). */
START_TEST(windows_cut_then_resampled)
{
    char *dir = tu_mkdtemp();
    ck_assert_int_eq(
        tu_sh(
            "'%s' --out '%s' --layout nemo --shards 1 --cuts-per-shard 2 "
            "--sampling-rate 24000 --min-duration 5 --max-duration 6 --compress none >/dev/null && "
            "python3 '%s/nemo_windows.py' '%s' 2 2.0 > '%s/member' && "
            "cd '%s' && tar xf nemo/audio_0.tar \"$(cat member)\" && "
            "sox -R \"$(cat member)\" -t raw -e floating-point -b 32 w2.raw "
            "trim 48000s 48000s rate 16000",
            getenv("SHARC_GEN"), dir, getenv("SHARC_TESTS_SRC"), dir, dir, dir),
        0);
    char ds[1024], ref_path[1024];
    snprintf(ds, sizeof ds, "%s/nemo", dir);
    snprintf(ref_path, sizeof ref_path, "%s/w2.raw", dir);
    const char *path = ds;
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    s.paths = &path;
    s.n_paths = 1;
    s.on_error = SHARC_ON_ERROR_SKIP; /* the recording's other members have no rows */
    s.sampling_rate = 16000;
    s.resample = 1;
    sharc_reader *r;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    size_t n_ref, bytes, windows = 0;
    int compared = 0;
    float *ref = (float *)tu_read_file(ref_path, &bytes);
    n_ref = bytes / sizeof(float);
    while (sharc_reader_next(r, &c) == 0) {
        ck_assert_int_eq(c->num_samples, 32000);
        ck_assert_double_eq_tol(c->duration, 2.0, 1e-9);
        if (strstr(c->id, "-sub2")) {
            ck_assert_uint_eq(n_ref, 32000);
            double q = sdr_db(c->samples, ref, n_ref);
            ck_assert_msg(q >= 50, "window 2: %.1f dB against sox", q);
            compared++;
        }
        windows++;
    }
    ck_assert_uint_eq(windows, 2);
    ck_assert_int_eq(compared, 1);
    free(ref);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* A mixture of an 8 kHz and a 24 kHz dataset reads at 16 kHz, in cuts and in batches. */
START_TEST(mixture_resamples_every_source)
{
    char *dir = tu_mkdtemp(), cfg[2048];
    sharc_reader_settings s;
    gen_mixture(dir, 1, cfg, sizeof cfg, &s);
    sharc_reader *r;
    const sharc_cut *c;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    size_t n = 0;
    while (sharc_reader_next(r, &c) == 0) {
        ck_assert_int_eq(c->sampling_rate, 16000);
        /* duration = n / rate, kept: n * 16000 / rate is duration * 16000 */
        ck_assert_int_eq(c->num_samples, (int64_t)floor(c->duration * 16000 + 0.5));
        n++;
    }
    ck_assert_uint_eq(n, 10);
    sharc_reader_close(&r);
    s.sampler.max_cuts = 3;
    s.n_threads = 2;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    sharc_batch *b;
    n = 0;
    int rc;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        n += (size_t)sharc_batch_tensor(b, "audio_lens")->shape[0];
        sharc_batch_release(b);
    }
    ck_assert_int_eq(rc, SHARC_END);
    ck_assert_uint_eq(n, 10);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* Lhotse's rounding: half up when resampling and speeding up, half down when slowing
 * down, after rounding to 8 decimals (11 / 1.1 is 10.000000000000002 in doubles). */
START_TEST(lengths_are_lhotses)
{
    ck_assert_int_eq(sharc__cond_resampled_length(1, 16000, 24000), 2);
    ck_assert_int_eq(sharc__cond_resampled_length(3, 16000, 24000), 5);
    ck_assert_int_eq(sharc__cond_resampled_length(1, 48000, 16000), 0);
    ck_assert_int_eq(sharc__cond_resampled_length(2, 48000, 16000), 1);
    ck_assert_int_eq(sharc__cond_resampled_length(44100, 44100, 16000), 16000);
    ck_assert_int_eq(sharc__cond_resampled_length(1000, 44100, 16000), 363);
    ck_assert_int_eq(sharc__cond_perturbed_length(3, 2.0), 2);
    ck_assert_int_eq(sharc__cond_perturbed_length(2, 0.8), 2);
    ck_assert_int_eq(sharc__cond_perturbed_length(6, 0.8), 7);
    ck_assert_int_eq(sharc__cond_perturbed_length(11, 1.1), 10);
    ck_assert_int_eq(sharc__cond_perturbed_length(16000, 0.9), 17778);
    ck_assert_int_eq(sharc__cond_perturbed_length(16000, 1.1), 14545);
    ck_assert_int_eq(sharc__cond_perturbed_length(7, 1.0), 7);
}
END_TEST

static void expect_refused(const sharc_reader_settings *s, const char *text)
{
    sharc_reader *r;
    logged[0] = 0;
    ck_assert_int_eq(sharc_reader_open(&r, s), SHARC_ERR(EINVAL));
    ck_assert_msg(strstr(logged, text), "\"%s\" not in \"%s\"", text, logged);
}

START_TEST(bad_settings_name_the_setting)
{
    const char *path = "/nonexistent";
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    s.paths = &path;
    s.n_paths = 1;
    s.logger.callback = keep_log;
    s.resample = 1;
    expect_refused(&s, "resample needs sampling_rate");
    s.resample = 0;
    sharc_augment_settings a;
    sharc_augment_default_settings(&a);
    s.augment = &a;
    double bad[] = {1.0, 0.0};
    a.speed_perturb = bad;
    a.n_speed_perturb = 2;
    expect_refused(&s, "speed_perturb: each factor must be in (0, 3]");
    bad[1] = 3.5;
    expect_refused(&s, "speed_perturb: each factor must be in (0, 3]");
    bad[1] = 1.1;
    a.speed_perturb_prob = 1.5;
    expect_refused(&s, "speed_perturb_prob must be in [0, 1]");
    a.speed_perturb_prob = 1;
    a.volume_perturb_db[0] = 6;
    a.volume_perturb_db[1] = -6;
    expect_refused(&s, "volume_perturb: the low gain must not be above the high one");
    a.volume_perturb_db[0] = -6;
    a.volume_perturb_prob = -0.1;
    expect_refused(&s, "volume_perturb_prob must be in [0, 1]");
    a.volume_perturb_prob = 1;
    const char *noise = "/nonexistent-noise";
    a.noise = &noise;
    a.n_noise = 1;
    expect_refused(&s, "noise needs sampling_rate (--sampling-rate)");
    s.sampling_rate = 16000;
    a.noise_snr_db[0] = 20;
    a.noise_snr_db[1] = 10;
    expect_refused(&s, "noise_snr: the low SNR must not be above the high one");
    a.noise_snr_db[0] = 10;
    a.noise_prob = 2;
    expect_refused(&s, "noise_prob must be in [0, 1]");
    a.noise_prob = 0.5;
    a.n_noise = 0;
    a.struct_size = 0;
    expect_refused(&s, "sharc_augment_default_settings");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conditioning");
    TCase *tc = tcase_create("conditioning");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, lengths_are_lhotses);
    tcase_add_test(tc, resample_matches_sox);
    tcase_add_test(tc, batches_match_cuts_any_threads);
    tcase_add_test(tc, without_resample_the_error_names_it);
    tcase_add_test(tc, speed_matches_sox);
    tcase_add_test(tc, draws_depend_on_seed_cut_epoch);
    tcase_add_test(tc, batches_carry_the_draws);
    tcase_add_test(tc, volume_scales_samples);
    tcase_add_test(tc, resume_is_bit_identical);
    tcase_add_test(tc, bad_settings_name_the_setting);
    tcase_add_test(tc, mixture_resamples_every_source);
    tcase_add_test(tc, noise_reaches_the_drawn_snr);
    tcase_add_test(tc, noise_streams_past_the_bound);
    tcase_add_test(tc, noise_order_is_each_slots_own);
    tcase_add_test(tc, noise_resumes_elastic);
    tcase_add_test(tc, noise_resumes_in_a_mixture);
    tcase_add_test(tc, noise_goes_on_per_slot_elastically);
    tcase_add_test(tc, noise_error_names_the_noise_shard);
    tcase_add_test(tc, windows_cut_then_resampled);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

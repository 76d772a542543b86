/* The CPU log-mel features (features/fbank.c) and their step in the batch (featurize.c):
 * values against tests/fbank_ref.py, lengths, exact zero padding, short rows, dither,
 * refused settings with their messages, no allocation once warm, and a batch gaining its
 * features with or without its audio. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batching/batch.h"
#include "batching/featurize.h"
#include "batching/frame.h"
#include "features/fbank.h"
#include "sharc/reader.h"
#include "testutil.h"

/* The chirp of tests/fbank_ref.py's check values: 300 Hz rising by 2000 Hz over N samples,
 * its amplitude moving with three slow periods (so that no mel bin is constant). */
enum { CHIRP_N = 4000 };
static void chirp(float *x, int n)
{
    for (int i = 0; i < n; i++) {
        double t = i;
        x[i] = (float)(0.3 * sin(2 * M_PI * (300 * t + 2000 * t * t / (2.0 * CHIRP_N)) / 16000) *
                       (0.5 + 0.5 * sin(2 * M_PI * 3 * t / CHIRP_N)));
    }
}

/* The errors tested below are logged too; the log is not what is checked. */
static void quiet(void *cookie, sharc_log_level level, const char *message) {}

static sharc__fbank *plan_with(sharc__ctx *ctx, int n_mels)
{
    sharc__fbank_settings s;
    sharc__fbank_default_settings(&s);
    s.n_mels = n_mels;
    sharc__fbank *f = NULL;
    ck_assert_int_eq(sharc__fbank_create(&f, ctx, &s), 0);
    return f;
}

START_TEST(defaults_are_nemo_fastconformer)
{
    sharc__fbank_settings s;
    sharc__fbank_default_settings(&s);
    ck_assert_int_eq(s.sample_rate, 16000);
    ck_assert_int_eq(s.window, 400);
    ck_assert_int_eq(s.hop, 160);
    ck_assert_int_eq(s.n_fft, 512);
    ck_assert_int_eq(s.n_mels, 80);
    ck_assert_int_eq(s.pad_to, 16);
    ck_assert(s.preemph == 0.97 && s.dither == 0);
    sharc_reader_settings rs;
    sharc_reader_default_settings(&rs);
    ck_assert_int_eq(rs.features, SHARC_FEATURES_NONE);
    ck_assert_int_eq(rs.keep_audio, 1);
    ck_assert_int_eq(rs.fbank_n_mels, 80);
    ck_assert_int_eq(rs.fbank_sample_rate, 16000);
    ck_assert_int_eq(rs.fbank_window, 400);
    ck_assert_int_eq(rs.fbank_hop, 160);
    ck_assert_int_eq(rs.fbank_n_fft, 512);
    ck_assert_int_eq(rs.fbank_pad_to, 16);
    ck_assert(rs.fbank_preemph == 0.97 && rs.fbank_dither == 0);
}
END_TEST

START_TEST(bad_settings_are_named)
{
    static const struct {
        const char *field;
        int value;
        const char *message;
    } cases[] = {
        {"sample_rate", 100, "fbank sample_rate 100: must be 1000..384000 Hz"},
        {"n_fft", 511, "fbank n_fft 511: must be even and 2..65536"},
        {"n_fft", 0, "fbank n_fft 0: must be even and 2..65536"},
        {"window", 513, "fbank window 513: must be 1..n_fft (512) samples"},
        {"window", 0, "fbank window 0: must be 1..n_fft (512) samples"},
        {"hop", 0, "fbank hop 0: must be 1..n_fft (512) samples"},
        {"n_mels", 0, "fbank n_mels 0: must be 1..256"},
        {"n_mels", 257, "fbank n_mels 257: must be 1..256"},
        {"pad_to", -1, "fbank pad_to -1: must be 0..4096 frames (0 = no padding)"},
    };
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sharc__fbank_settings s;
        sharc__fbank_default_settings(&s);
        int *field = strcmp(cases[i].field, "sample_rate") == 0 ? &s.sample_rate
                     : strcmp(cases[i].field, "n_fft") == 0     ? &s.n_fft
                     : strcmp(cases[i].field, "window") == 0    ? &s.window
                     : strcmp(cases[i].field, "hop") == 0       ? &s.hop
                     : strcmp(cases[i].field, "n_mels") == 0    ? &s.n_mels
                                                                : &s.pad_to;
        *field = cases[i].value;
        sharc__fbank *f = (sharc__fbank *)1;
        ck_assert_int_eq(sharc__fbank_create(&f, &ctx, &s), SHARC_ERR(EINVAL));
        ck_assert_ptr_null(f);
        ck_assert_str_eq(ctx.error, cases[i].message);
    }
    sharc__fbank_settings s;
    sharc__fbank_default_settings(&s);
    s.preemph = 1.0;
    ck_assert_int_eq(sharc__fbank_check(&ctx, &s), SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "fbank preemph 1: must be in [0, 1) (0 = none)");
    s.preemph = NAN;
    ck_assert_int_eq(sharc__fbank_check(&ctx, &s), SHARC_ERR(EINVAL));
    s.preemph = 0.97;
    s.dither = -1e-5;
    ck_assert_int_eq(sharc__fbank_check(&ctx, &s), SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "fbank dither -1e-05: must be in [0, 1] (0 = off)");

    /* Through the reader settings: an unknown kind, keep_audio out of range, a bad fbank
     * field only when the features are on. */
    sharc_reader_settings rs;
    sharc_reader_default_settings(&rs);
    rs.fbank_n_fft = 3;
    ck_assert_int_eq(sharc__featurize_check(&ctx, &rs), 0);
    rs.features = SHARC_FEATURES_FBANK;
    ck_assert_int_eq(sharc__featurize_check(&ctx, &rs), SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "fbank n_fft 3: must be even and 2..65536");
    rs.fbank_n_fft = 512;
    rs.features = (sharc_features)7;
    ck_assert_int_eq(sharc__featurize_check(&ctx, &rs), SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "features 7: unknown (SHARC_FEATURES_NONE or _FBANK)");
    rs.features = SHARC_FEATURES_FBANK;
    rs.keep_audio = 2;
    ck_assert_int_eq(sharc__featurize_check(&ctx, &rs), SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "keep_audio 2: must be 0 or 1");

    /* sharc_reader_open refuses them before looking for shards. */
    rs.keep_audio = 1;
    rs.fbank_n_mels = 300;
    const char *paths[] = {"/nonexistent"};
    rs.paths = paths;
    rs.n_paths = 1;
    rs.logger.callback = quiet;
    sharc_reader *r = NULL;
    ck_assert_int_eq(sharc_reader_open(&r, &rs), SHARC_ERR(EINVAL));
    ck_assert_ptr_null(r);
}
END_TEST

START_TEST(frame_counts)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__fbank *f = plan_with(&ctx, 80);
    ck_assert_int_eq(sharc__fbank_valid_frames(f, 0), 0);
    ck_assert_int_eq(sharc__fbank_valid_frames(f, 1), 0);
    ck_assert_int_eq(sharc__fbank_valid_frames(f, 159), 0);
    ck_assert_int_eq(sharc__fbank_valid_frames(f, 160), 1);
    ck_assert_int_eq(sharc__fbank_valid_frames(f, 319), 1);
    ck_assert_int_eq(sharc__fbank_valid_frames(f, 320), 2);
    /* 15 s: 1500 valid frames of the STFT's 1501 (Parakeet's 128 x 1501 with pad_to 0). */
    ck_assert_int_eq(sharc__fbank_valid_frames(f, 240000), 1500);
    ck_assert_int_eq(sharc__fbank_frames(f, 0), 16);
    ck_assert_int_eq(sharc__fbank_frames(f, 2399), 16); /* 15 frames */
    ck_assert_int_eq(sharc__fbank_frames(f, 2400), 16); /* 16 frames */
    ck_assert_int_eq(sharc__fbank_frames(f, 2560), 32); /* 17 frames */
    ck_assert_int_eq(sharc__fbank_frames(f, 240000), 1504);
    sharc__fbank_destroy(&f);
    ck_assert_ptr_null(f);
    sharc__fbank_settings s;
    sharc__fbank_default_settings(&s);
    s.pad_to = 0;
    ck_assert_int_eq(sharc__fbank_create(&f, &ctx, &s), 0);
    ck_assert_int_eq(sharc__fbank_frames(f, 240000), 1501);
    sharc__fbank_destroy(&f);
}
END_TEST

/* Values from tests/fbank_ref.py (NumPy, float64) for the chirp; the row is written to
 * every element, padding exactly +0, and normalised per bin. */
START_TEST(chirp_matches_the_reference)
{
    static const struct {
        int m, t;
        double v;
    } want[] = {
        {0, 0, 3.922221},      {5, 3, 0.513764351},    {20, 10, 0.0469434167},
        {40, 24, 0.269799832}, {79, 12, -0.295916526}, {60, 7, -0.310199879},
    };
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__fbank *f = plan_with(&ctx, 80);
    static float x[CHIRP_N];
    chirp(x, CHIRP_N);
    int64_t frames = sharc__fbank_frames(f, CHIRP_N);
    ck_assert_int_eq(frames, 32);
    float *out = malloc((size_t)80 * (size_t)frames * sizeof *out);
    for (int64_t i = 0; i < 80 * frames; i++)
        out[i] = NAN; /* poison: every element must be written */
    int32_t len = CHIRP_N, n_out = -1;
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, x, &len, 1, CHIRP_N, 0, out, &n_out, frames), 0);
    ck_assert_int_eq(n_out, 25);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double got = out[want[i].m * frames + want[i].t];
        ck_assert_msg(fabs(got - want[i].v) <= 1e-4, "mel %d frame %d: %.9g, reference %.9g",
                      want[i].m, want[i].t, got, want[i].v);
    }
    for (int m = 0; m < 80; m++) {
        const float *o = out + m * frames;
        double sum = 0, ss = 0;
        for (int t = 0; t < 25; t++)
            sum += o[t];
        for (int t = 0; t < 25; t++)
            ss += (o[t] - sum / 25) * (o[t] - sum / 25);
        ck_assert_msg(fabs(sum / 25) < 1e-5, "mel %d: mean %g", m, sum / 25);
        ck_assert_msg(fabs(sqrt(ss / 24) - 1) < 1e-3, "mel %d: std %g", m, sqrt(ss / 24));
        for (int t = 25; t < frames; t++) {
            ck_assert_msg(o[t] == 0 && !signbit(o[t]), "mel %d frame %d: %g", m, t, o[t]);
        }
    }
    free(out);
    sharc__fbank_destroy(&f);
}
END_TEST

/* A row's features do not depend on the batch's width, its neighbours or what the plan
 * computed before; once warm, a batch allocates nothing. */
START_TEST(rows_are_independent_and_warm_plans_allocate_nothing)
{
    int allocs = 0;
    sharc_allocator a = tu_counting_allocator(&allocs);
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, &a, NULL);
    sharc__fbank *f = plan_with(&ctx, 64);
    enum { T = 6000 };
    static float audio[3 * T], alone[CHIRP_N];
    chirp(alone, CHIRP_N);
    for (int i = 0; i < T; i++) {
        audio[i] = (float)(0.1 * sin(i * 0.05));
        audio[2 * T + i] = (float)(0.2 * sin(i * 0.31) * sin(i * 0.001));
    }
    memcpy(audio + T, alone, sizeof alone);
    int32_t lens[3] = {T, CHIRP_N, 4321}, out_lens[3];
    int64_t frames = sharc__fbank_frames(f, T), f1 = sharc__fbank_frames(f, CHIRP_N);
    float *out = calloc((size_t)3 * 64 * (size_t)frames, sizeof *out);
    float *one = calloc((size_t)64 * (size_t)f1, sizeof *one);
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, audio, lens, 3, T, 5, out, out_lens, frames), 0);
    ck_assert_int_eq(out_lens[0], 37);
    ck_assert_int_eq(out_lens[1], 25);
    ck_assert_int_eq(out_lens[2], 27);
    int32_t len1 = CHIRP_N, n1;
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, alone, &len1, 1, CHIRP_N, 9, one, &n1, f1), 0);
    for (int m = 0; m < 64; m++)
        ck_assert_mem_eq(out + ((size_t)64 + m) * (size_t)frames, one + (size_t)m * (size_t)f1,
                         25 * sizeof(float));
    int before = allocs;
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, audio, lens, 3, T, 6, out, out_lens, frames), 0);
    ck_assert_int_eq(allocs, before);
    free(out);
    free(one);
    sharc__fbank_destroy(&f);
}
END_TEST

/* Under a hop: no valid frame; one valid frame: normalised to exactly 0 (NeMo's std NaN
 * guard); two hops: two frames, each bin +-1/sqrt(2) at most, most of them close to it. */
START_TEST(short_rows)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__fbank *f = plan_with(&ctx, 80);
    enum { T = 400 };
    static float audio[4 * T];
    chirp(audio, T);
    memcpy(audio + T, audio, T * sizeof(float));
    memcpy(audio + 2 * T, audio, T * sizeof(float));
    memcpy(audio + 3 * T, audio, T * sizeof(float));
    int32_t lens[4] = {0, 159, 319, 320}, out_lens[4];
    int64_t frames = sharc__fbank_frames(f, T);
    ck_assert_int_eq(frames, 16);
    float *out = malloc((size_t)4 * 80 * (size_t)frames * sizeof *out);
    for (int64_t i = 0; i < 4 * 80 * frames; i++)
        out[i] = NAN;
    /* Row 0 is empty but its samples are not zero: they must not be read. */
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, audio, lens, 4, T, 0, out, out_lens, frames), 0);
    ck_assert_int_eq(out_lens[0], 0);
    ck_assert_int_eq(out_lens[1], 0);
    ck_assert_int_eq(out_lens[2], 1);
    ck_assert_int_eq(out_lens[3], 2);
    for (int64_t i = 0; i < 3 * 80 * frames; i++)
        ck_assert_msg(out[i] == 0 && !signbit(out[i]), "element %lld: %g", (long long)i, out[i]);
    const float *r3 = out + 3 * 80 * frames;
    int near = 0;
    for (int m = 0; m < 80; m++) {
        ck_assert(fabsf(r3[m * frames]) <= 0.70711f);
        near += fabsf(r3[m * frames]) > 0.7f;
        ck_assert_float_eq_tol(r3[m * frames], -r3[m * frames + 1], 1e-6);
        for (int t = 2; t < frames; t++)
            ck_assert(r3[m * frames + t] == 0);
    }
    ck_assert_int_ge(near, 60);
    free(out);
    sharc__fbank_destroy(&f);
}
END_TEST

START_TEST(dither_is_seeded_by_seed_step_and_row)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__fbank_settings s;
    sharc__fbank_default_settings(&s);
    s.dither = 1e-3;
    s.seed = 11;
    sharc__fbank *f = NULL, *g = NULL, *plain = NULL;
    ck_assert_int_eq(sharc__fbank_create(&f, &ctx, &s), 0);
    ck_assert_int_eq(sharc__fbank_create(&g, &ctx, &s), 0);
    s.dither = 0;
    ck_assert_int_eq(sharc__fbank_create(&plain, &ctx, &s), 0);
    static float x[CHIRP_N];
    chirp(x, CHIRP_N);
    size_t n = (size_t)80 * 32;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    int32_t len = CHIRP_N, ol;
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, x, &len, 1, CHIRP_N, 3, a, &ol, 32), 0);
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, x, &len, 1, CHIRP_N, 4, b, &ol, 32), 0);
    ck_assert_int_eq(sharc__fbank_compute(g, &ctx, x, &len, 1, CHIRP_N, 3, c, &ol, 32), 0);
    ck_assert_mem_eq(a, c, n * sizeof *a); /* same seed, step and row: the same noise */
    ck_assert(memcmp(a, b, n * sizeof *a) != 0);
    ck_assert_int_eq(sharc__fbank_compute(plain, &ctx, x, &len, 1, CHIRP_N, 3, b, &ol, 32), 0);
    ck_assert(memcmp(a, b, n * sizeof *a) != 0);
    free(a);
    free(b);
    free(c);
    sharc__fbank_destroy(&f);
    sharc__fbank_destroy(&g);
    sharc__fbank_destroy(&plain);
}
END_TEST

START_TEST(bad_batches_are_refused)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__fbank *f = plan_with(&ctx, 80);
    static float audio[2 * 1000], out[2 * 80 * 16];
    int32_t lens[2] = {1000, 1001}, ol[2];
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, audio, lens, 2, 1000, 0, out, ol, 16),
                     SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "fbank: row 1 has length 1001, outside the batch's 0..1000");
    lens[1] = -1;
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, audio, lens, 2, 1000, 0, out, ol, 16),
                     SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "fbank: row 1 has length -1, outside the batch's 0..1000");
    lens[1] = 10;
    ck_assert_int_eq(sharc__fbank_compute(f, &ctx, audio, lens, 2, 3000, 0, out, ol, 16),
                     SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error,
                     "fbank: a batch of 2 x 3000 samples needs 32 frames, the output holds 16");
    sharc__fbank_destroy(&f);
}
END_TEST

/* A collated batch as the pipeline lays it out: audio, audio_lens, duration, cut_id. */
static sharc_batch *collated(sharc__batch_pool *pool, int64_t B, int64_t T)
{
    sharc_batch *b = NULL;
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &b), 0);
    int64_t sa[2] = {B, T}, sb[1] = {B}, so[1] = {B + 1}, sy[1] = {(int64_t)B * 2};
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, sa), 0);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, sb), 1);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "duration", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 1, sb), 2);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "cut_id_offsets", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, so),
        3);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "cut_id_bytes", SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1, sy), 4);
    ck_assert_int_eq(sharc__batch_finish(b), 0);
    float *audio = b->tensors[0].data;
    int32_t *lens = b->tensors[1].data, *off = b->tensors[3].data;
    char *ids = b->tensors[4].data;
    for (int64_t i = 0; i < B; i++) {
        lens[i] = (int32_t)(T - 700 * i);
        chirp(audio + i * T, lens[i] < CHIRP_N ? lens[i] : CHIRP_N);
        for (int64_t k = CHIRP_N; k < lens[i]; k++)
            audio[i * T + k] = (float)(0.05 * sin(0.2 * (double)k));
        memset(audio + i * T + lens[i], 0, (size_t)(T - lens[i]) * sizeof(float));
        ((float *)b->tensors[2].data)[i] = (float)lens[i] / 16000;
        off[i] = (int32_t)(2 * i);
        ids[2 * i] = 'c';
        ids[2 * i + 1] = (char)('0' + i);
    }
    off[B] = (int32_t)(2 * B);
    return b;
}

START_TEST(batches_gain_features_with_or_without_audio)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    ctx.log.callback = quiet;
    sharc__batch_pool *pool = NULL;
    ck_assert_int_eq(sharc__batch_pool_create(&pool, &ctx, 2, NULL), 0);
    sharc_reader_settings rs;
    sharc_reader_default_settings(&rs);
    rs.features = SHARC_FEATURES_FBANK;
    enum { B = 3, T = 5000 };
    sharc__fbank *plan = NULL;

    /* With the audio: two tensors more, their values those of the plan on the audio. */
    sharc_batch *b = collated(pool, B, T);
    ck_assert_int_eq(sharc__featurize_batch(&plan, &ctx, &rs, b, 16000, 7), 0);
    ck_assert_ptr_nonnull(plan);
    ck_assert_uint_eq(b->n_tensors, 7);
    const sharc_tensor *ft = sharc_batch_tensor(b, "features");
    const sharc_tensor *fl = sharc_batch_tensor(b, "feature_lens");
    ck_assert_ptr_nonnull(ft);
    ck_assert_ptr_nonnull(fl);
    ck_assert_int_eq(ft->dtype, SHARC_DTYPE_F32);
    ck_assert_int_eq(ft->ndim, 3);
    ck_assert_int_eq(ft->shape[0], B);
    ck_assert_int_eq(ft->shape[1], 80);
    ck_assert_int_eq(ft->shape[2], 32);
    ck_assert_int_eq(fl->dtype, SHARC_DTYPE_I32);
    const int32_t *lens = fl->data;
    ck_assert_int_eq(lens[0], 31);
    ck_assert_int_eq(lens[1], 26);
    ck_assert_int_eq(lens[2], 22);
    float *want = malloc((size_t)B * 80 * 32 * sizeof *want);
    int32_t wl[B];
    const sharc_tensor *au = sharc_batch_tensor(b, "audio");
    ck_assert_int_eq(sharc__fbank_compute(plan, &ctx, au->data,
                                          sharc_batch_tensor(b, "audio_lens")->data, B, T, 7, want,
                                          wl, 32),
                     0);
    ck_assert_mem_eq(ft->data, want, ft->nbytes);
    /* The ids survived the block growing under them. */
    size_t n = 0;
    const char *id = sharc_batch_string(b, "cut_id", 2, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_mem_eq(id, "c2", 2);
    sharc_batch_release(b);

    /* Without the audio: the other tensors move down, packed as a frame lays them out. */
    rs.keep_audio = 0;
    b = collated(pool, B, T);
    ck_assert_int_eq(sharc__featurize_batch(&plan, &ctx, &rs, b, 16000, 7), 0);
    ck_assert_uint_eq(b->n_tensors, 6);
    ck_assert_ptr_null(sharc_batch_tensor(b, "audio"));
    ck_assert_str_eq(b->tensors[0].name, "audio_lens");
    ck_assert_str_eq(b->tensors[5].name, "feature_lens");
    ft = sharc_batch_tensor(b, "features");
    ck_assert_mem_eq(ft->data, want, ft->nbytes);
    uint8_t *base = NULL;
    uint64_t len = 0, packed = 0, offsets[8];
    ck_assert(sharc__batch_payload(b, &base, &len));
    ck_assert_int_eq(sharc__frame_layout(b->tensors, b->n_tensors, offsets, &packed), 0);
    ck_assert_uint_eq(len, packed);
    for (size_t i = 0; i < b->n_tensors; i++)
        ck_assert_ptr_eq(b->tensors[i].data, base + offsets[i]);
    id = sharc_batch_string(b, "cut_id", 1, &n);
    ck_assert_mem_eq(id, "c1", 2);
    ck_assert_int_eq(((int32_t *)b->tensors[0].data)[2], T - 1400);
    sharc_batch_release(b);

    /* Audio at another rate: refused, naming the step, a cut and both rates. */
    b = collated(pool, B, T);
    ck_assert_int_eq(sharc__featurize_batch(&plan, &ctx, &rs, b, 8000, 12),
                     SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_str_eq(ctx.error,
                     "features: step 12: the batch's audio (cut c0, ...) is at 8000 Hz and the "
                     "fbank features are made for 16000 Hz (fbank_sample_rate, "
                     "--fbank-sample-rate): require the rate with the sampling_rate setting "
                     "(--sampling-rate 16000), and turn on resample (--resample) to convert each "
                     "cut at another rate");
    ck_assert_uint_eq(b->n_tensors, 5);
    sharc_batch_release(b);

    /* Features off: the batch is left as it is. */
    rs.features = SHARC_FEATURES_NONE;
    b = collated(pool, B, T);
    ck_assert_int_eq(sharc__featurize_batch(&plan, &ctx, &rs, b, 8000, 12), 0);
    ck_assert_uint_eq(b->n_tensors, 5);
    sharc_batch_release(b);
    free(want);
    sharc__fbank_destroy(&plan);
    sharc__batch_pool_destroy(&pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fbank");
    TCase *tc = tcase_create("fbank");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_are_nemo_fastconformer);
    tcase_add_test(tc, bad_settings_are_named);
    tcase_add_test(tc, frame_counts);
    tcase_add_test(tc, chirp_matches_the_reference);
    tcase_add_test(tc, rows_are_independent_and_warm_plans_allocate_nothing);
    tcase_add_test(tc, short_rows);
    tcase_add_test(tc, dither_is_seeded_by_seed_step_and_row);
    tcase_add_test(tc, bad_batches_are_refused);
    tcase_add_test(tc, batches_gain_features_with_or_without_audio);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

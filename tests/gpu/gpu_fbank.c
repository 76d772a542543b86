/* The GPU log-mel features (features/fbank_cuda.cu) against the CPU path (features/fbank.c)
 * on speech-like, noisy, silent and quantised audio of many lengths (empty, under a hop,
 * exactly one and two hops, odd, long enough to take several cuFFT chunks) and batch sizes,
 * for 64, 80 and 128 mels: lengths exact, every element written (the output is poisoned
 * with NaN first), padding exactly 0, max abs error <= 1e-3. Then the throughput, from
 * audio already on the device, for the record. Exits 77 without a GPU. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/ctx.h"
#include "base/rng.h"
#include "features/fbank.h"
#include "features/fbank_cuda.h"
#include "gpu_check.h"

static void fill_row(sharc__rng *r, float *x, int64_t n, int kind)
{
    double f0 = 90 + 150 * sharc__rng_uniform(r), phase = 0;
    for (int64_t i = 0; i < n; i++) {
        double t = (double)i / 16000, v = 0;
        switch (kind) {
        case 0: /* voiced speech-like: harmonics, moving pitch, pauses */
            phase += 2 * M_PI * f0 * (1 + 0.1 * sin(2 * M_PI * 0.7 * t)) / 16000;
            for (int h = 1; h <= 8; h++)
                v += sin(h * phase) / h;
            v *= fmod(t, 1.3) < 1.0 ? 0.1 : 0.0;
            v += 0.001 * (sharc__rng_uniform(r) - 0.5);
            break;
        case 1: /* white noise */
            v = 0.2 * (sharc__rng_uniform(r) - 0.5);
            break;
        case 2: /* digital silence with a few PCM16 steps, the hard case for the normalisation */
            v = sharc__rng_below(r, 50) == 0 ? (double)((int)sharc__rng_below(r, 3) - 1) / 32768
                                             : 0;
            break;
        default: /* speech-like quantised to PCM16 */
            phase += 2 * M_PI * 180 / 16000;
            v = round((0.3 * sin(phase) * sin(3 * phase) + 0.01 * sharc__rng_uniform(r)) * 32768) /
                32768;
        }
        x[i] = (float)v;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One batch: CPU and GPU features of the same audio, compared. Returns the max abs error. */
static double compare(sharc__fbank *cpu, sharc__fbank_cuda *gpu, sharc__ctx *ctx, int n_mels,
                      const int32_t *lens, int64_t B, int64_t T, uint64_t seed)
{
    sharc__rng r;
    sharc__rng_seed(&r, seed);
    float *audio = calloc((size_t)(B * T > 0 ? B * T : 1), sizeof *audio);
    CHECK(audio != NULL);
    for (int64_t b = 0; b < B; b++)
        fill_row(&r, audio + b * T, lens[b], (int)((seed + (uint64_t)b) % 4));
    int64_t frames = sharc__fbank_frames(cpu, T);
    size_t n_out = (size_t)B * (size_t)n_mels * (size_t)frames;
    float *want = malloc(n_out * sizeof *want), *got = malloc(n_out * sizeof *got);
    int32_t *want_lens = malloc((size_t)B * 4), *got_lens = malloc((size_t)B * 4);
    CHECK(want && got && want_lens && got_lens);
    CHECK(sharc__fbank_compute(cpu, ctx, audio, lens, B, T, 0, want, want_lens, frames) == 0);

    float *d_audio, *d_out;
    int32_t *d_lens, *d_out_lens;
    CHECK(cudaMalloc((void **)&d_audio, (size_t)(B * T > 0 ? B * T : 1) * sizeof(float)) == 0);
    CHECK(cudaMalloc((void **)&d_lens, (size_t)B * 4) == 0);
    CHECK(cudaMalloc((void **)&d_out, n_out * sizeof(float)) == 0);
    CHECK(cudaMalloc((void **)&d_out_lens, (size_t)B * 4) == 0);
    CHECK(cudaMemcpy(d_audio, audio, (size_t)(B * T) * sizeof(float), cudaMemcpyHostToDevice) == 0);
    CHECK(cudaMemcpy(d_lens, lens, (size_t)B * 4, cudaMemcpyHostToDevice) == 0);
    CHECK(cudaMemset(d_out, 0xFF, n_out * sizeof(float)) == 0); /* NaN everywhere */
    CHECK(cudaMemset(d_out_lens, 0xFF, (size_t)B * 4) == 0);
    int rc = sharc__fbank_cuda_compute(gpu, ctx, d_audio, d_lens, B, T, d_out, d_out_lens, frames);
    if (rc != 0)
        fprintf(stderr, "sharc__fbank_cuda_compute: %s\n", ctx->error);
    CHECK(rc == 0);
    CHECK(cudaMemcpy(got, d_out, n_out * sizeof(float), cudaMemcpyDeviceToHost) == 0);
    CHECK(cudaMemcpy(got_lens, d_out_lens, (size_t)B * 4, cudaMemcpyDeviceToHost) == 0);

    double worst = 0;
    for (int64_t b = 0; b < B; b++) {
        if (got_lens[b] != want_lens[b]) {
            fprintf(stderr, "row %lld (%d samples): %d frames on the GPU, %d on the CPU\n",
                    (long long)b, lens[b], got_lens[b], want_lens[b]);
            exit(1);
        }
        for (int m = 0; m < n_mels; m++)
            for (int64_t t = 0; t < frames; t++) {
                size_t i = ((size_t)b * (size_t)n_mels + (size_t)m) * (size_t)frames + (size_t)t;
                if (t >= want_lens[b]) {
                    if (got[i] != 0 || signbit(got[i])) {
                        fprintf(stderr, "row %lld mel %d frame %lld: %g past the valid frames\n",
                                (long long)b, m, (long long)t, got[i]);
                        exit(1);
                    }
                    continue;
                }
                double e = fabs((double)got[i] - want[i]);
                if (!(e <= 1e-3)) {
                    fprintf(stderr, "row %lld (%d samples) mel %d frame %lld: GPU %.7g, CPU %.7g\n",
                            (long long)b, lens[b], m, (long long)t, got[i], want[i]);
                    exit(1);
                }
                if (e > worst)
                    worst = e;
            }
    }
    cudaFree(d_audio);
    cudaFree(d_lens);
    cudaFree(d_out);
    cudaFree(d_out_lens);
    free(audio);
    free(want);
    free(got);
    free(want_lens);
    free(got_lens);
    return worst;
}

int main(void)
{
    gpu_devices_or_skip();
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    static const int32_t edge[] = {0,   1,   2,   159, 160, 161, 319,   320,   321,
                                   399, 400, 401, 511, 512, 513, 16000, 16001, 48007};
    const int n_edge = (int)(sizeof edge / sizeof edge[0]);
    static const int mels[] = {80, 64, 128};
    double worst = 0;
    int batches = 0;
    for (int mi = 0; mi < 3; mi++) {
        sharc__fbank_settings s;
        sharc__fbank_default_settings(&s);
        s.n_mels = mels[mi];
        sharc__fbank *cpu = NULL;
        sharc__fbank_cuda *gpu = NULL;
        CHECK(sharc__fbank_create(&cpu, &ctx, &s) == 0);
        if (sharc__fbank_cuda_create(&gpu, &ctx, &s, 0) != 0) {
            fprintf(stderr, "sharc__fbank_cuda_create: %s\n", ctx.error);
            exit(1);
        }
        /* Every edge length, alone and all in one batch. */
        for (int i = 0; i < n_edge; i++) {
            double e = compare(cpu, gpu, &ctx, s.n_mels, &edge[i], 1, edge[i], (uint64_t)i);
            worst = fmax(worst, e);
            batches++;
        }
        double e = compare(cpu, gpu, &ctx, s.n_mels, edge, n_edge, 48007 + 13, 99);
        worst = fmax(worst, e);
        batches++;
        /* Random batches: 1 to 33 rows of up to 20 s, one wider than its longest row. */
        sharc__rng r;
        sharc__rng_seed(&r, 7 + (uint64_t)mi);
        for (int k = 0; k < 12; k++) {
            int64_t B = 1 + (int64_t)sharc__rng_below(&r, 33), T = 0;
            int32_t lens[33];
            for (int64_t b = 0; b < B; b++) {
                lens[b] = (int32_t)sharc__rng_below(&r, 320000);
                if (lens[b] > T)
                    T = lens[b];
            }
            T += k == 3 ? 777 : 0;
            e = compare(cpu, gpu, &ctx, s.n_mels, lens, B, T, 1000 + (uint64_t)k);
            worst = fmax(worst, e);
            batches++;
        }
        /* A 32 x 20 s batch takes 8 chunks of frames: the same plan, no new cuFFT plan. */
        int32_t big[32];
        for (int b = 0; b < 32; b++)
            big[b] = 320000 - 4000 * b;
        worst = fmax(worst, compare(cpu, gpu, &ctx, s.n_mels, big, 32, 320000, 5));
        batches++;
        if (mi == 0) {
            /* Throughput from audio on the device, for the record. */
            float *d_audio, *d_out;
            int32_t *d_lens, *d_out_lens;
            int64_t T = 320000, B = 32, frames = sharc__fbank_frames(cpu, T);
            CHECK(cudaMalloc((void **)&d_audio, (size_t)(B * T) * 4) == 0);
            CHECK(cudaMemset(d_audio, 0, (size_t)(B * T) * 4) == 0);
            CHECK(cudaMalloc((void **)&d_lens, (size_t)B * 4) == 0);
            CHECK(cudaMemcpy(d_lens, big, (size_t)B * 4, cudaMemcpyHostToDevice) == 0);
            CHECK(cudaMalloc((void **)&d_out, (size_t)B * 80 * (size_t)frames * 4) == 0);
            CHECK(cudaMalloc((void **)&d_out_lens, (size_t)B * 4) == 0);
            double audio_s = 0;
            for (int b = 0; b < 32; b++)
                audio_s += big[b] / 16000.0;
            CHECK(sharc__fbank_cuda_compute(gpu, &ctx, d_audio, d_lens, B, T, d_out, d_out_lens,
                                            frames) == 0);
            double t0 = now_s();
            for (int k = 0; k < 20; k++)
                CHECK(sharc__fbank_cuda_compute(gpu, &ctx, d_audio, d_lens, B, T, d_out, d_out_lens,
                                                frames) == 0);
            double dt = (now_s() - t0) / 20;
            printf("GPU features, 80 mels, 32 x 20 s from device audio: %.2f ms per batch, %.0f s "
                   "of audio per second\n",
                   dt * 1e3, audio_s / dt);
            cudaFree(d_audio);
            cudaFree(d_lens);
            cudaFree(d_out);
            cudaFree(d_out_lens);
        }
        sharc__fbank_cuda_destroy(&gpu);
        CHECK(gpu == NULL);
        sharc__fbank_destroy(&cpu);
    }
    /* Dither is refused on the device, with a message naming it. */
    sharc__fbank_settings s;
    sharc__fbank_default_settings(&s);
    s.dither = 1e-5;
    sharc__fbank_cuda *g = NULL;
    CHECK(sharc__fbank_cuda_create(&g, &ctx, &s, 0) == SHARC_ERR(EINVAL));
    CHECK(strcmp(ctx.error, "fbank dither 1e-05: the GPU path does not dither (set 0)") == 0);
    printf("gpu_fbank: %d batches, max abs error GPU vs CPU %.3g\n", batches, worst);
    return 0;
}

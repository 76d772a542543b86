/*
 * sharc-fbank: the CPU log-mel features (src/features/fbank.c) alone, on one thread.
 *
 * A batch of B rows of speech-like audio (a few harmonics with a moving pitch, noise and
 * pauses, rows of 2/3 to 1 of T samples) is made once; the features of the whole batch are
 * then computed `--repeat` times, each timed, after one untimed run. Prints per run and the
 * median: the thread's CPU seconds (the machine may be shared with other work, which wall
 * time would count), and audio seconds per CPU second (x real time) on this one core.
 *
 *   sharc-fbank [--rows B] [--seconds S] [--n-mels N] [--repeat R] [--json]
 */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "base/ctx.h"
#include "base/rng.h"
#include "features/fbank.h"

/* CPU seconds of this thread: the machine may be shared, and the figure is per core. */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(void)
{
    fputs("usage: sharc-fbank [--rows B] [--seconds S] [--n-mels N] [--repeat R] [--json]\n",
          stderr);
}

int main(int argc, char **argv)
{
    int rows = 32, n_mels = 80, repeat = 7, json = 0;
    double seconds = 15;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        if (!v) {
            usage();
            return 2;
        }
        if (strcmp(a, "--rows") == 0)
            rows = atoi(v);
        else if (strcmp(a, "--seconds") == 0)
            seconds = atof(v);
        else if (strcmp(a, "--n-mels") == 0)
            n_mels = atoi(v);
        else if (strcmp(a, "--repeat") == 0)
            repeat = atoi(v);
        else {
            usage();
            return 2;
        }
        i++;
    }
    if (rows < 1 || !(seconds > 0.1 && seconds < 600) || repeat < 1 || repeat > 1000) {
        usage();
        return 2;
    }
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__fbank_settings s;
    sharc__fbank_default_settings(&s);
    s.n_mels = n_mels;
    sharc__fbank *f = NULL;
    if (sharc__fbank_create(&f, &ctx, &s) < 0) {
        fprintf(stderr, "sharc-fbank: %s\n", ctx.error);
        return 1;
    }
    int64_t T = (int64_t)(seconds * s.sample_rate), frames = sharc__fbank_frames(f, T);
    float *audio = calloc((size_t)rows * (size_t)T, sizeof *audio);
    float *out = malloc((size_t)rows * (size_t)n_mels * (size_t)frames * sizeof *out);
    int32_t *lens = calloc((size_t)rows, sizeof *lens), *out_lens = calloc((size_t)rows, 4);
    double *times = calloc((size_t)repeat, sizeof *times);
    if (!audio || !out || !lens || !out_lens || !times) {
        fputs("sharc-fbank: out of memory\n", stderr);
        return 1;
    }
    sharc__rng r;
    sharc__rng_seed(&r, 1);
    double total = 0;
    for (int b = 0; b < rows; b++) {
        lens[b] = (int32_t)(T - (int64_t)sharc__rng_below(&r, (uint64_t)T / 3));
        total += (double)lens[b] / s.sample_rate;
        double f0 = 90 + 150 * sharc__rng_uniform(&r), phase = 0;
        float *x = audio + (size_t)b * (size_t)T;
        for (int64_t i = 0; i < lens[b]; i++) {
            double t = (double)i / s.sample_rate;
            double pitch = f0 * (1 + 0.1 * sin(2 * M_PI * 0.7 * t));
            phase += 2 * M_PI * pitch / s.sample_rate;
            double env = fmod(t, 1.3) < 1.0 ? 0.3 : 0.0; /* words and pauses */
            double v = 0;
            for (int h = 1; h <= 8; h++)
                v += sin(h * phase) / h;
            x[i] = (float)(env * v * 0.3 + 0.003 * (sharc__rng_uniform(&r) - 0.5));
        }
    }
    for (int k = -1; k < repeat; k++) {
        double t0 = thread_cpu_s();
        if (sharc__fbank_compute(f, &ctx, audio, lens, rows, T, 0, out, out_lens, frames) < 0) {
            fprintf(stderr, "sharc-fbank: %s\n", ctx.error);
            return 1;
        }
        double dt = thread_cpu_s() - t0;
        if (k >= 0)
            times[k] = dt;
    }
    double *sorted = malloc((size_t)repeat * sizeof *sorted);
    memcpy(sorted, times, (size_t)repeat * sizeof *sorted);
    qsort(sorted, (size_t)repeat, sizeof *sorted, cmp_double);
    double med =
        repeat % 2 ? sorted[repeat / 2] : (sorted[repeat / 2 - 1] + sorted[repeat / 2]) / 2;
    if (json) {
        printf("{\"rows\": %d, \"audio_seconds\": %.3f, \"n_mels\": %d, \"repeat\": %d, "
               "\"median_cpu_s\": %.6f, \"x_real_time\": %.1f}\n",
               rows, total, n_mels, repeat, med, total / med);
    } else {
        for (int k = 0; k < repeat; k++)
            printf("run %d: %.4f CPU s, %.0fx real time\n", k, times[k], total / times[k]);
        printf("fbank %d mels, %d rows, %.1f s of audio, one thread: median %.4f CPU s, %.0fx "
               "real time\n",
               n_mels, rows, total, med, total / med);
    }
    free(sorted);
    free(times);
    free(audio);
    free(out);
    free(lens);
    free(out_lens);
    sharc__fbank_destroy(&f);
    return 0;
}

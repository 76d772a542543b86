/*
 * The reader's device batches (reader.device = cuda:0, reader/device.c) against the same
 * reader on the host, on sharc-gen corpora (FLAC speech-like rows of 0.5 to 25 s; WAV rows of
 * 5 ms to 3 s, many shorter than a window or a hop), 64, 80 and 128 mels, one to 24 rows per
 * batch:
 *   - the same steps, tensor names, dtypes and shapes; numeric tensors on cuda:0,
 *     string columns on the host; audio, audio_lens and duration bit-identical; feature_lens
 *     exact; features within 1e-3 of the CPU path's, padding exactly +0;
 *   - every element written: the stage fills its device tensors with NaN before each batch;
 *   - without the audio (keep_audio 0) and without features (the audio alone goes up);
 *   - back-pressure once max_held_batches are held, which keep their values;
 *   - a steady state allocates nothing: no device or pinned allocation after the first
 *     epoch of three;
 *   - a batch held past sharc_reader_close stays readable, and its release frees it;
 *   - the caller's current device is the same after every call (with a second GPU);
 *   - a cut at another rate than the features' is that cut's error.
 * Then the device stage's throughput, for the record. Needs SHARC_GEN. Exits 77 without a
 * GPU.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_check.h"
#include "reader/reader.h"
#include "sharc/sharc.h"

static char corpus[3][512];
static const char *paths[3][1] = {{corpus[0]}, {corpus[1]}, {corpus[2]}};

static void gen(int i, const char *args)
{
    const char *g = getenv("SHARC_GEN");
    CHECK(g != NULL);
    char cmd[2048];
    snprintf(corpus[i], sizeof corpus[i], "/tmp/sharc-gpu-device-%d-%d", (int)getpid(), i);
    snprintf(cmd, sizeof cmd, "rm -rf %s && %s --out %s %s >/dev/null", corpus[i], g, corpus[i],
             args);
    CHECK(system(cmd) == 0);
    strncat(corpus[i], "/shar", sizeof corpus[i] - strlen(corpus[i]) - 1);
}

static void settings(sharc_reader_settings *s, int c, int n_mels, uint32_t max_cuts)
{
    sharc_reader_default_settings(s);
    s->paths = paths[c];
    s->n_paths = 1;
    s->seed = 5;
    s->n_threads = 2;
    s->sampler.max_cuts = max_cuts;
    s->sampler.num_buckets = 2;
    s->sampler.buffer_size = 32;
    s->sampler.num_cuts_for_bins_estimate = 32;
    s->features = SHARC_FEATURES_FBANK;
    s->fbank_n_mels = n_mels;
}

static void *to_host(const sharc_tensor *t)
{
    void *p = malloc(t->nbytes ? t->nbytes : 1);
    CHECK(p != NULL);
    int rc = sharc_tensor_copy_to_host(t, p, t->nbytes);
    if (rc != 0)
        fprintf(stderr, "copy of %s: %s\n", t->name, sharc_strerror(rc));
    CHECK(rc == 0);
    return p;
}

static int is_string_part(const char *name)
{
    size_t n = strlen(name);
    return (n > 8 && strcmp(name + n - 8, "_offsets") == 0) ||
           (n > 6 && strcmp(name + n - 6, "_bytes") == 0);
}

/* Device batch `d` against host batch `h`; returns the max abs error of the features. */
static double compare(const sharc_batch *h, const sharc_batch *d)
{
    CHECK(h->step == d->step && h->epoch == d->epoch);
    CHECK(h->n_tensors == d->n_tensors);
    double worst = 0;
    const sharc_tensor *fl = sharc_batch_tensor(h, "feature_lens");
    int32_t *flens = NULL;
    for (size_t i = 0; i < h->n_tensors; i++) {
        const sharc_tensor *a = &h->tensors[i], *b = sharc_batch_tensor(d, a->name);
        if (b == NULL)
            fprintf(stderr, "step %llu: no %s on the device\n", (unsigned long long)d->step,
                    a->name);
        CHECK(b != NULL);
        CHECK(a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes);
        for (int k = 0; k < a->ndim; k++)
            CHECK(a->shape[k] == b->shape[k]);
        CHECK(a->device == SHARC_DEVICE_HOST);
        if (is_string_part(a->name)) {
            CHECK(b->device == SHARC_DEVICE_HOST);
        } else {
            if (b->device != SHARC_DEVICE_CUDA || b->device_ordinal != 0)
                fprintf(stderr, "step %llu: %s is not on cuda:0\n", (unsigned long long)d->step,
                        b->name);
            CHECK(b->device == SHARC_DEVICE_CUDA && b->device_ordinal == 0);
        }
        uint8_t *got = to_host(b);
        if (strcmp(a->name, "features") != 0) {
            if (memcmp(got, a->data, a->nbytes) != 0)
                fprintf(stderr, "step %llu: %s differs\n", (unsigned long long)d->step, a->name);
            CHECK(memcmp(got, a->data, a->nbytes) == 0);
            free(got);
            continue;
        }
        CHECK(fl != NULL);
        flens = fl->data;
        const float *w = a->data, *g = (const float *)got;
        const int64_t B = a->shape[0], M = a->shape[1], F = a->shape[2];
        for (int64_t r = 0; r < B; r++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t t = 0; t < F; t++) {
                    size_t j = (size_t)((r * M + m) * F + t);
                    if (t >= flens[r]) {
                        if (g[j] != 0 || signbit(g[j])) {
                            fprintf(stderr,
                                    "step %llu row %lld mel %lld frame %lld: %g past "
                                    "the valid frames\n",
                                    (unsigned long long)d->step, (long long)r, (long long)m,
                                    (long long)t, g[j]);
                            exit(1);
                        }
                        continue;
                    }
                    double e = fabs((double)g[j] - w[j]);
                    if (!(e <= 1e-3)) {
                        fprintf(stderr,
                                "step %llu row %lld mel %lld frame %lld: GPU %.7g, CPU "
                                "%.7g\n",
                                (unsigned long long)d->step, (long long)r, (long long)m,
                                (long long)t, g[j], w[j]);
                        exit(1);
                    }
                    worst = e > worst ? e : worst;
                }
        free(got);
    }
    return worst;
}

static void check_current_device(int want)
{
    int cur = -1;
    CHECK(cudaGetDevice(&cur) == cudaSuccess);
    if (cur != want)
        fprintf(stderr, "the current device is %d, the caller's was %d\n", cur, want);
    CHECK(cur == want);
}

/* Host and device readers with the same settings, batch by batch. */
static double against_host(const sharc_reader_settings *hs, int keep_audio, int caller_dev,
                           int *batches)
{
    sharc_reader_settings ds = *hs;
    ds.device = SHARC_DEVICE_CUDA;
    ds.device_ordinal = 0;
    ds.keep_audio = keep_audio;
    sharc_reader_settings hs2 = *hs;
    hs2.keep_audio = keep_audio;
    sharc_reader *h = NULL, *d = NULL;
    CHECK(sharc_reader_open(&h, &hs2) == 0);
    CHECK(cudaSetDevice(caller_dev) == cudaSuccess);
    int rc = sharc_reader_open(&d, &ds);
    if (rc != 0)
        fprintf(stderr, "open: %s\n", sharc_strerror(rc));
    CHECK(rc == 0);
    sharc__reader_device_poison(d, 1);
    double worst = 0;
    for (;;) {
        sharc_batch *a = NULL, *b = NULL;
        int ra = sharc_reader_next_batch(h, &a);
        int rb = sharc_reader_next_batch(d, &b);
        check_current_device(caller_dev);
        if (ra != rb)
            fprintf(stderr, "host %d, device %d: %s\n", ra, rb, sharc_reader_last_error(d));
        CHECK(ra == rb);
        if (ra == SHARC_END)
            break;
        CHECK(ra == 0);
        double e = compare(a, b);
        worst = e > worst ? e : worst;
        (*batches)++;
        sharc_batch_release(a);
        sharc_batch_release(b);
        check_current_device(caller_dev);
    }
    sharc_device_stats st;
    sharc_reader_get_device_stats(d, &st);
    CHECK(st.batches > 0 && st.upload_bytes > 0);
    CHECK(hs->features == SHARC_FEATURES_NONE ||
          (st.feature_seconds > 0 && st.feature_write_bytes > 0));
    sharc_reader_close(&h);
    sharc_reader_close(&d);
    check_current_device(caller_dev);
    return worst;
}

/* Back-pressure at max_held_batches, each held batch still holding its values; then three
 * epochs of the same batches, each released before the next is asked for: no allocation
 * after the first epoch. */
static void steady_state(void)
{
    sharc_reader_settings s;
    settings(&s, 0, 80, 6);
    s.sampler.num_buckets = 1; /* the same batches in every epoch */
    s.sampler.shuffle = 0;
    s.shuffle_shards = 0;
    s.device = SHARC_DEVICE_CUDA;
    s.max_held_batches = 3;
    sharc_reader_settings hs = s;
    hs.device = SHARC_DEVICE_HOST;
    sharc_reader *r = NULL, *h = NULL;
    CHECK(sharc_reader_open(&r, &s) == 0);
    CHECK(sharc_reader_open(&h, &hs) == 0);
    sharc_batch *held[4] = {0}, *want[4] = {0};
    for (int i = 0; i < 3; i++) {
        CHECK(sharc_reader_next_batch(r, &held[i]) == 0);
        CHECK(sharc_reader_next_batch(h, &want[i]) == 0);
    }
    CHECK(sharc_reader_next_batch(r, &held[3]) == SHARC_ERR_BACKPRESSURE && held[3] == NULL);
    const char *msg = "the caller holds 3 batches (max_held_batches 3); release some first";
    if (strcmp(sharc_reader_last_error(r), msg) != 0)
        fprintf(stderr, "back-pressure: %s\n", sharc_reader_last_error(r));
    CHECK(strcmp(sharc_reader_last_error(r), msg) == 0);
    sharc_batch_release(held[0]);
    CHECK(sharc_reader_next_batch(r, &held[3]) == 0);
    CHECK(sharc_reader_next_batch(h, &want[3]) == 0);
    for (int i = 1; i < 4; i++) {
        compare(want[i], held[i]);
        sharc_batch_release(held[i]);
    }
    for (int i = 0; i < 4; i++)
        sharc_batch_release(want[i]);
    sharc_reader_close(&r);
    sharc_reader_close(&h);

    s.epochs = 3;
    CHECK(sharc_reader_open(&r, &s) == 0);
    uint64_t after_first = 0;
    int n = 0, rc;
    sharc_device_stats st;
    sharc_batch *b = NULL;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        if (b->epoch >= 1 && after_first == 0) {
            sharc_reader_get_device_stats(r, &st);
            after_first = st.allocations;
            CHECK(after_first > 0);
        }
        sharc_batch_release(b);
        n++;
    }
    CHECK(rc == SHARC_END);
    sharc_reader_get_device_stats(r, &st);
    printf("steady state: %d batches over 3 epochs, %llu allocations (%llu by the end of epoch "
           "0), %.1f MiB\n",
           n, (unsigned long long)st.allocations, (unsigned long long)after_first,
           (double)st.allocated_bytes / 1048576.0);
    if (st.allocations != after_first)
        fprintf(stderr, "%llu allocations after the first epoch\n",
                (unsigned long long)(st.allocations - after_first));
    CHECK(after_first > 0 && st.allocations == after_first);
    sharc_reader_close(&r);
}

/* A batch held past close stays valid, and its release frees it. */
static void release_after_close(void)
{
    sharc_reader_settings s;
    settings(&s, 1, 80, 4);
    s.device = SHARC_DEVICE_CUDA;
    sharc_reader *r = NULL, *h = NULL;
    CHECK(sharc_reader_open(&r, &s) == 0);
    sharc_batch *b = NULL, *a = NULL;
    CHECK(sharc_reader_next_batch(r, &b) == 0);
    sharc_reader_close(&r);
    s.device = SHARC_DEVICE_HOST;
    CHECK(sharc_reader_open(&h, &s) == 0);
    CHECK(sharc_reader_next_batch(h, &a) == 0);
    compare(a, b);
    sharc_batch_release(b);
    sharc_batch_release(a);
    sharc_reader_close(&h);
}

/* Features on the device are made for fbank_sample_rate: a cut at another rate is that
 * cut's error (the pipeline requires the rate), never features of the wrong rate. */
static void other_rate(void)
{
    sharc_reader_settings s;
    settings(&s, 2, 80, 4);
    s.device = SHARC_DEVICE_CUDA;
    sharc_reader *r = NULL;
    CHECK(sharc_reader_open(&r, &s) == 0);
    sharc_batch *b = NULL;
    int rc = sharc_reader_next_batch(r, &b);
    const char *want = ": 16000 Hz is required, the audio is 8000 Hz (turn on the resample "
                       "setting, --resample, to convert it)";
    if (rc != SHARC_ERR_AUDIO_MISMATCH || !strstr(sharc_reader_last_error(r), want))
        fprintf(stderr, "8 kHz: %d: %s\n", rc, sharc_reader_last_error(r));
    CHECK(rc == SHARC_ERR_AUDIO_MISMATCH && b == NULL);
    CHECK(strstr(sharc_reader_last_error(r), want) != NULL);
    sharc_reader_close(&r);
}

/* Host batch to device features, for the record (the bench reports it too). */
static void throughput(void)
{
    sharc_reader_settings s;
    settings(&s, 0, 80, 0);
    s.sampler.max_duration = 600;
    s.sampler.num_buckets = 4;
    s.n_threads = 8;
    s.epochs = 4;
    s.keep_audio = 0;
    s.device = SHARC_DEVICE_CUDA;
    sharc_reader *r = NULL;
    CHECK(sharc_reader_open(&r, &s) == 0);
    sharc_batch *b;
    double audio = 0;
    int rc;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        const sharc_tensor *d = sharc_batch_tensor(b, "duration");
        float *v = to_host(d);
        for (int64_t i = 0; i < d->shape[0]; i++)
            audio += v[i];
        free(v);
        sharc_batch_release(b);
    }
    CHECK(rc == SHARC_END);
    sharc_device_stats st;
    sharc_reader_get_device_stats(r, &st);
    double bw = 0;
    CHECK(sharc_device_copy_bandwidth(0, &bw, NULL) == 0 && bw > 0);
    double fbw = (double)(st.feature_read_bytes + st.feature_write_bytes) / st.feature_seconds;
    printf("device stage: %llu batches, %.3f ms per batch from the host batch (%.0f s of audio/s), "
           "features %.3f ms per batch, %.1f GB/s (%.2f of the %.1f GB/s copy bandwidth)\n",
           (unsigned long long)st.batches, 1e3 * st.seconds / (double)st.batches,
           audio / st.seconds, 1e3 * st.feature_seconds / (double)st.batches, fbw * 1e-9, fbw / bw,
           bw * 1e-9);
    sharc_reader_close(&r);
}

int main(void)
{
    int n_dev = gpu_devices_or_skip();
    gen(0, "--layout shar --codec flac --shards 2 --cuts-per-shard 24 --seed 3");
    gen(1, "--layout shar --codec wav --shards 2 --cuts-per-shard 40 --seed 9 --min-duration "
           "0.005 --max-duration 3");
    gen(2, "--layout shar --codec wav --shards 1 --cuts-per-shard 8 --sampling-rate 8000");
    static const int mels[] = {80, 64, 128};
    static const uint32_t cuts[] = {1, 3, 7, 24};
    double worst = 0;
    int batches = 0;
    for (int c = 0; c < 2; c++)
        for (int mi = 0; mi < 3; mi++)
            for (int k = 0; k < 4; k++) {
                sharc_reader_settings s;
                settings(&s, c, mels[mi], cuts[k]);
                double e = against_host(&s, 1, n_dev > 1 ? 1 : 0, &batches);
                worst = e > worst ? e : worst;
            }
    sharc_reader_settings s;
    settings(&s, 1, 80, 5);
    double e = against_host(&s, 0, 0, &batches); /* without the audio */
    worst = e > worst ? e : worst;
    settings(&s, 0, 80, 5);
    s.features = SHARC_FEATURES_NONE; /* the audio alone */
    against_host(&s, 1, 0, &batches);
    printf("device batches equal the host's: %d batches, features max abs error %.3g\n", batches,
           worst);
    steady_state();
    release_after_close();
    other_rate();
    throughput();
    char cmd[1200];
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "rm -rf %.*s", (int)(strlen(corpus[i]) - 5), corpus[i]);
        CHECK(system(cmd) == 0);
    }
    return 0;
}

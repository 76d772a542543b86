/*
 * sharc-decode: the decoder alone, side by side with libsndfile, on audio files in memory
 * (docs/benchmarks.md, "FLAC decoded with libFLAC directly").
 *
 * For every FILE: read it into memory, then in alternating rounds decode it whole ROUNDS
 * times through sharc__audio_decode() (the direct WAV and FLAC paths where they apply) and
 * ROUNDS times through libsndfile alone (sharc__audio_decode_sndfile(), as the floor
 * decodes), so that both see the same machine state. Both must give the same frames and
 * samples, bit for bit, or it fails.
 *
 * Usage: sharc-decode [--repeat R] [--rounds N] FILE...
 * Prints one JSON object per file: file, frames, sharc_us and sndfile_us (median over the
 * R rounds of the time of one decode), ratio (sharc_us / sndfile_us).
 */
#include "decode/audio.h"
#include "base/ctx.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int bench_file(const char *path, int repeat, int rounds)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        fprintf(stderr, "sharc-decode: cannot read %s\n", path);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    const size_t n = (size_t)st.st_size;
    uint8_t *data = malloc(n);
    int ok = data && pread(fd, data, n, 0) == (ssize_t)n;
    close(fd);
    const size_t cap = (size_t)1 << 26; /* 64 Mi floats: any member of a shard */
    float *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
    double *ta = malloc((size_t)repeat * sizeof *ta), *tb = malloc((size_t)repeat * sizeof *tb);
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    const sharc__decode_spec all = {0, -1, 0, -1, 0, 0};
    sharc__audio_info ia, ib;
    int64_t fa = -1, fb = -1;
    for (int r = 0; ok && r < repeat; r++) {
        double t0 = sharc__now_s();
        for (int k = 0; ok && k < rounds; k++)
            ok = sharc__audio_decode(&ctx, data, n, &all, a, cap, &ia, &fa) == 0;
        double t1 = sharc__now_s();
        for (int k = 0; ok && k < rounds; k++)
            ok = sharc__audio_decode_sndfile(&ctx, data, n, &all, b, cap, &ib, &fb) == 0;
        double t2 = sharc__now_s();
        ta[r] = (t1 - t0) / rounds;
        tb[r] = (t2 - t1) / rounds;
    }
    if (ok && (fa != fb || ia.channels != ib.channels ||
               memcmp(a, b, (size_t)fa * (size_t)ia.channels * sizeof *a) != 0)) {
        fprintf(stderr, "sharc-decode: %s: sharc and libsndfile differ\n", path);
        ok = 0;
    } else if (!ok) {
        fprintf(stderr, "sharc-decode: %s: %s\n", path,
                ctx.error[0] ? ctx.error : "cannot read it");
    }
    if (ok) {
        double sa = median(ta, repeat), sb = median(tb, repeat);
        printf("{\"file\": \"%s\", \"frames\": %lld, \"sharc_us\": %.1f, \"sndfile_us\": %.1f, "
               "\"ratio\": %.4f}\n",
               path, (long long)fa, 1e6 * sa, 1e6 * sb, sa / sb);
    }
    free(data);
    free(a);
    free(b);
    free(ta);
    free(tb);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    int repeat = 20, rounds = 5, i = 1, failed = 0;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else
            break;
    }
    if (i >= argc || repeat < 1 || rounds < 1) {
        fprintf(stderr, "usage: sharc-decode [--repeat R] [--rounds N] FILE...\n"
                        "  decodes each FILE whole N times through sharc and N times through\n"
                        "  libsndfile, R alternating rounds (default 20 and 5), and prints one\n"
                        "  JSON line per file with the median time of one decode by each\n");
        return 2;
    }
    for (; i < argc; i++)
        failed |= bench_file(argv[i], repeat, rounds);
    return failed;
}

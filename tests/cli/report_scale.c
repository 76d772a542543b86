/*
 * report-scale: the validation report of a synthetic corpus of N cuts over S shards, fed to
 * the report module (tools/report.h) as `sharc validate` would, so that cli_report_scale can
 * check the page's size and that Chromium renders it without the hours a real corpus of that
 * size takes to generate. usage: report-scale CUTS SHARDS PROBLEMS OUT.html OUT.json
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

static uint64_t next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return (double)(next(s) >> 11) / 9007199254740992.0;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: report-scale CUTS SHARDS PROBLEMS OUT.html OUT.json\n");
        return 2;
    }
    size_t n_cuts = strtoul(argv[1], NULL, 10), n_shards = strtoul(argv[2], NULL, 10);
    size_t n_problems = strtoul(argv[3], NULL, 10);
    char **names = calloc(n_shards, sizeof *names);
    report r;
    if (names == NULL || report_init(&r) < 0)
        return 1;
    for (size_t i = 0; i < n_shards; i++) {
        names[i] = malloc(96);
        if (names[i] == NULL)
            return 1;
        snprintf(names[i], 96, "/data/corpus/en/train/shar/recording.%06zu.tar", i);
    }
    if (report_set_shards(&r, n_shards, (const char *const *)names) < 0)
        return 1;
    static const char text[] = "the quick brown fox jumps over the lazy dog and keeps running "
                               "through the long grass of the meadow until the evening falls";
    static const uint8_t flac[4] = {'f', 'L', 'a', 'C'};
    uint64_t seed = 42;
    for (size_t i = 0; i < n_cuts; i++) {
        char id[48], shard[96];
        uint32_t s = (uint32_t)(i * n_shards / n_cuts);
        snprintf(id, sizeof id, "spk%03u-utt-%08zu", (unsigned)(i % 997), i);
        snprintf(shard, sizeof shard, "%s", names[s]);
        double d = 0.5 + 19.5 * uniform(&seed) * uniform(&seed);
        report_signal sig = {.samples = (uint64_t)(d * 16000),
                             .zeros = (uint64_t)(d * 16000 * 0.01 * uniform(&seed)),
                             .clipped = next(&seed) % 1000 == 0 ? 400 : 0,
                             .peak = 0.5,
                             .rms = 0.1,
                             .mean = (uniform(&seed) - 0.5) * 0.002};
        report_cut c = {.id = id,
                        .shard = shard,
                        .text = text + next(&seed) % 100,
                        .shard_index = s,
                        .duration = d,
                        .sampling_rate = 16000,
                        .channels = 1,
                        .num_samples = (int64_t)(d * 16000),
                        .audio = flac,
                        .audio_nbytes = (size_t)(d * 32000 * 0.6),
                        .signal = &sig};
        report_add_cut(&r, &c);
    }
    for (size_t i = 0; i < n_problems; i++) {
        char id[48], msg[256];
        const char *shard = names[next(&seed) % n_shards];
        snprintf(id, sizeof id, "spk%03zu-utt-%08zu", i % 997, i * 37 % (n_cuts ? n_cuts : 1));
        snprintf(msg, sizeof msg, "%s: member '%s.flac': cannot decode the audio", shard, id);
        report_add_problem(&r, i % 3 ? "decode" : "length", shard, "x.flac", id, msg);
    }
    r.command = "sharc validate";
    r.layout = "shar";
    r.threads = 16;
    r.wall_seconds = 3600;
    r.checked_shards = n_shards;
    const char *failed = NULL;
    int err = report_save(&r, argv[4], argv[5], &failed);
    if (err != 0)
        fprintf(stderr, "report-scale: cannot write %s\n", failed);
    report_free(&r);
    for (size_t i = 0; i < n_shards; i++)
        free(names[i]);
    free(names);
    return err ? 1 : 0;
}

/*
 * sharc bench's output: the medians of the runs as one JSON object or as text.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "cli_loader.h"
#include "cli_opts.h"
#include "cli_reader_opts.h"

/* ---- reporting ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of `get(run)` over n runs; NAN when any is NAN (undefined in this mode). */
static double median_of(const run_result *runs, int n, double (*get)(const run_result *))
{
    double v[MAX_REPEAT];
    for (int i = 0; i < n; i++) {
        v[i] = get(&runs[i]);
        if (isnan(v[i]))
            return NAN;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double per_wall(double x, double wall)
{
    return wall > 0 ? x / wall : 0.0;
}

static double get_audio_rate(const run_result *r)
{
    return per_wall(r->audio, r->wall);
}

static double get_cut_rate(const run_result *r)
{
    return per_wall(r->cuts, r->wall);
}

static double get_batch_rate(const run_result *r)
{
    return per_wall(r->batches, r->wall);
}

static double get_padding(const run_result *r)
{
    return r->real_frames > 0 ? r->padded_frames / r->real_frames : NAN;
}

static double get_fill(const run_result *r)
{
    return r->batches > 0 && r->fill_sum > 0 ? r->fill_sum / r->batches : NAN;
}

static double get_first(const run_result *r)
{
    return r->first;
}

static double get_cpu_per_audio(const run_result *r)
{
    return r->audio > 0 ? r->cpu / r->audio : NAN;
}

static double get_wall(const run_result *r)
{
    return r->wall;
}

static double get_net_bytes(const run_result *r)
{
    return r->net_bytes;
}

static double get_net_retries(const run_result *r)
{
    return r->net_retries;
}

static double get_net_wait(const run_result *r)
{
    return r->net_wait;
}

/* Milliseconds the decode threads spent on each batch's features (host batches). */
static double get_cpu_feat_ms(const run_result *r)
{
    return r->batches > 0 ? 1e3 * r->cpu_feat_seconds / r->batches : NAN;
}

/* This rank's seconds in the broadcast over the window (sharc_loader_broadcast_seconds). */
static double get_bcast_seconds(const run_result *r)
{
    return r->bcast_seconds;
}

/* The noise stream's seconds reading and decoding noise, on its own thread. */
static double get_noise_seconds(const run_result *r)
{
    return r->noise_seconds;
}

/* The conditioning's share of the decode threads' decoding time. */
static double get_cond_share(const run_result *r)
{
    return r->stage[SHARC_STAGE_DECODE] > 0 ? r->cond_seconds / r->stage[SHARC_STAGE_DECODE] : NAN;
}

static double get_dev_ms(const run_result *r)
{
    return r->dev_batches > 0 ? 1e3 * r->dev_seconds / r->dev_batches : NAN;
}

static double get_feat_ms(const run_result *r)
{
    return r->dev_batches > 0 ? 1e3 * r->feat_seconds / r->dev_batches : NAN;
}

/* Seconds of audio per second of the device stage: from a host batch to device features. */
static double get_dev_rate(const run_result *r)
{
    return r->dev_seconds > 0 ? r->audio / r->dev_seconds : NAN;
}

static double get_feat_bw(const run_result *r)
{
    return r->feat_seconds > 0 ? r->feat_bytes / r->feat_seconds : NAN;
}

#define STAGE_GETTER(k)                                                                            \
    static double get_stage##k(const run_result *r)                                                \
    {                                                                                              \
        return r->stage[k];                                                                        \
    }
STAGE_GETTER(0)
STAGE_GETTER(1)
STAGE_GETTER(2)
STAGE_GETTER(3)
STAGE_GETTER(4)
static double (*const stage_getters[N_STAGES])(const run_result *) = {
    get_stage0, get_stage1, get_stage2, get_stage3, get_stage4};

#define ROLE_GETTER(k)                                                                             \
    static double get_role##k(const run_result *r)                                                 \
    {                                                                                              \
        return r->cuts > 0 ? 1e6 * r->role_cpu[k] / r->cuts : NAN;                                 \
    }
ROLE_GETTER(0)
ROLE_GETTER(1)
ROLE_GETTER(2)
ROLE_GETTER(3)
ROLE_GETTER(4)
/* CPU microseconds per cut of each role's threads. */
static double (*const role_getters[N_ROLES])(const run_result *) = {get_role0, get_role1, get_role2,
                                                                    get_role3, get_role4};

static void json_field(FILE *f, const char *key, double v)
{
    cli_json_key(f, key, 0);
    cli_json_num(f, v);
}

static void print_run_json(FILE *f, const run_result *r, const run_result *fl)
{
    fputc('{', f);
    cli_json_key(f, "window_seconds", 1);
    cli_json_num(f, r->wall);
    json_field(f, "audio_seconds_per_second", get_audio_rate(r));
    json_field(f, "cuts_per_second", get_cut_rate(r));
    fprintf(f, ",\"peak_rss_bytes\":%" PRIu64 ",\"end_of_data\":%s", r->peak_rss,
            r->ended ? "true" : "false");
    json_field(f, "warmup_seconds", r->warmup_wall);
    fprintf(f, ",\"warmup_batches\":%" PRIu64, r->warmup_taken);
    if (fl != NULL) {
        json_field(f, "floor_window_seconds", fl->wall);
        json_field(f, "floor_audio_seconds_per_second", get_audio_rate(fl));
        json_field(f, "ratio_to_floor", get_audio_rate(r) / get_audio_rate(fl));
    }
    fputc('}', f);
}

void bench_print_json(FILE *f, const report *rp)
{
    const bench_opts *o = rp->o;
    const run_result *runs = rp->runs;
    int n = o->repeat, batches = !o->cuts_mode;
    uint64_t peak = 0;
    double audio = 0, cuts = 0, nb = 0;
    for (int i = 0; i < n; i++) {
        peak = runs[i].peak_rss > peak ? runs[i].peak_rss : peak;
        audio += runs[i].audio;
        cuts += runs[i].cuts;
        nb += runs[i].batches;
    }
    fputc('{', f);
    cli_json_key(f, "mode", 1);
    cli_json_str(f, o->cuts_mode ? "cuts" : "batches");
    fprintf(f, ",\"threads\":%d,\"repeat\":%d,\"shards\":%zu,\"tar_files\":%zu",
            o->cuts_mode ? 1 : rp->s->n_threads, n, runs[0].shards, rp->n_tars);
    json_field(f, "window_seconds", median_of(runs, n, get_wall));
    json_field(f, "audio_seconds", audio);
    json_field(f, "cuts", cuts);
    json_field(f, "batches", batches ? nb : NAN);
    json_field(f, "audio_seconds_per_second", median_of(runs, n, get_audio_rate));
    json_field(f, "cuts_per_second", median_of(runs, n, get_cut_rate));
    json_field(f, "batches_per_second", batches ? median_of(runs, n, get_batch_rate) : NAN);
    json_field(f, "padding_ratio", batches ? median_of(runs, n, get_padding) : NAN);
    json_field(f, "batch_fill", batches ? median_of(runs, n, get_fill) : NAN);
    json_field(f, "max_duration", batches ? rp->s->sampler.max_duration : NAN);
    json_field(f, "time_to_first_batch_s", median_of(runs, n, get_first));
    json_field(f, "cpu_seconds_per_audio_second", median_of(runs, n, get_cpu_per_audio));
    fprintf(f, ",\"peak_rss_bytes\":%" PRIu64, peak);
    cli_json_key(f, "peak_rss_scope", 0);
    cli_json_str(f, rp->peak_scope_run ? "run" : "process");
    cli_json_key(f, "stage_seconds", 0);
    fputc('{', f);
    for (int k = 0; k < N_STAGES; k++) {
        cli_json_key(f, bench_stage_names[k], k == 0);
        cli_json_num(f, batches ? median_of(runs, n, stage_getters[k]) : NAN);
    }
    fputc('}', f);
    cli_json_key(f, "network", 0);
    fputc('{', f);
    cli_json_key(f, "bytes", 1);
    cli_json_num(f, median_of(runs, n, get_net_bytes));
    json_field(f, "retries", median_of(runs, n, get_net_retries));
    json_field(f, "wait_seconds", median_of(runs, n, get_net_wait));
    fputc('}', f);
    json_field(f, "feature_ms_per_batch",
               batches && rp->s->features != SHARC_FEATURES_NONE &&
                       rp->s->device != SHARC_DEVICE_CUDA
                   ? median_of(runs, n, get_cpu_feat_ms)
                   : NAN);
    json_field(f, "broadcast_seconds", batches ? median_of(runs, n, get_bcast_seconds) : NAN);
    json_field(f, "conditioning_share",
               batches && (rp->s->resample || rp->s->augment) ? median_of(runs, n, get_cond_share)
                                                              : NAN);
    /* The noise stream has a thread of its own in both modes. */
    json_field(f, "noise_seconds",
               rp->s->augment && rp->s->augment->n_noise > 0 ? median_of(runs, n, get_noise_seconds)
                                                             : NAN);
    cli_json_key(f, "cpu_us_per_cut", 0);
    fputc('{', f);
    for (int k = 0; k < N_ROLES; k++) {
        cli_json_key(f, bench_role_names[k], k == 0);
        cli_json_num(f, median_of(runs, n, role_getters[k]));
    }
    fputc('}', f);
    if (rp->floors != NULL) {
        double fr = median_of(rp->floors, n, get_audio_rate);
        json_field(f, "floor_audio_seconds_per_second", fr);
        json_field(f, "floor_cuts_per_second", median_of(rp->floors, n, get_cut_rate));
        json_field(f, "floor_cpu_seconds_per_audio_second",
                   median_of(rp->floors, n, get_cpu_per_audio));
        json_field(f, "ratio_to_floor", median_of(runs, n, get_audio_rate) / fr);
    }
    if (rp->s->device == SHARC_DEVICE_CUDA) {
        double bw = median_of(runs, n, get_feat_bw);
        cli_json_key(f, "device", 0);
        fputc('{', f);
        cli_json_key(f, "name", 1);
        fprintf(f, "\"cuda:%d\"", rp->s->device_ordinal);
        json_field(f, "ms_per_batch", median_of(runs, n, get_dev_ms));
        json_field(f, "feature_ms_per_batch", median_of(runs, n, get_feat_ms));
        json_field(f, "audio_seconds_per_second", median_of(runs, n, get_dev_rate));
        json_field(f, "feature_bytes_per_second", bw);
        json_field(f, "copy_bytes_per_second", rp->copy_bw);
        json_field(f, "feature_to_copy_bandwidth", bw / rp->copy_bw);
        fputc('}', f);
    }
    cli_dist_json(f, &o->dist, NULL);
    cli_json_key(f, "runs", 0);
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        print_run_json(f, &runs[i], rp->floors ? &rp->floors[i] : NULL);
    }
    fputc(']', f);
    if (bench_sources_json)
        fputs(bench_sources_json, f);
    fputs("}\n", f);
}

void bench_print_text(const report *rp)
{
    const bench_opts *o = rp->o;
    const run_result *runs = rp->runs;
    int n = o->repeat;
    char a[32];
    uint64_t peak = 0;
    for (int i = 0; i < n; i++)
        peak = runs[i].peak_rss > peak ? runs[i].peak_rss : peak;
    printf("sharc bench: %s, %d thread%s, %zu shards, %d repetition%s (medians)\n",
           o->cuts_mode ? "cuts (no batching)" : "batches", o->cuts_mode ? 1 : rp->s->n_threads,
           (o->cuts_mode || rp->s->n_threads == 1) ? "" : "s", runs[0].shards, n,
           n == 1 ? "" : "s");
    double rate = median_of(runs, n, get_audio_rate);
    printf("  audio          %10.1f s/s", rate);
    if (rp->floors != NULL) {
        double fr = median_of(rp->floors, n, get_audio_rate);
        printf("   floor %.1f s/s, ratio %.3f", fr, rate / fr);
    }
    printf("\n  cuts           %10s /s\n",
           cli_fmt_count(a, sizeof a, median_of(runs, n, get_cut_rate)));
    if (!o->cuts_mode) {
        printf("  batches        %10.2f /s\n", median_of(runs, n, get_batch_rate));
        printf("  padding ratio  %10.3f (padded / real audio)\n", median_of(runs, n, get_padding));
        double fill = median_of(runs, n, get_fill);
        if (!isnan(fill))
            printf("  batch fill     %10.3f (sum duration / max_duration %g s)\n", fill,
                   rp->s->sampler.max_duration);
    }
    printf("  first %s    %10.3f s\n", o->cuts_mode ? "cut  " : "batch",
           median_of(runs, n, get_first));
    printf("  peak RSS       %10.1f MiB (%s)\n", (double)peak / (1024.0 * 1024.0),
           rp->peak_scope_run ? "per run" : "whole process");
    double net_bytes = median_of(runs, n, get_net_bytes);
    if (net_bytes > 0)
        printf("  network        %10.1f MiB received, %.0f retries, %.3f s waited\n",
               net_bytes / (1024.0 * 1024.0), median_of(runs, n, get_net_retries),
               median_of(runs, n, get_net_wait));
    printf("  CPU            %10.3f ms per s of audio",
           1e3 * median_of(runs, n, get_cpu_per_audio));
    if (rp->floors != NULL)
        printf("   floor %.3f ms", 1e3 * median_of(rp->floors, n, get_cpu_per_audio));
    printf("\n");
    if (rp->s->augment && rp->s->augment->n_noise > 0)
        printf("  noise          %10.3f s reading and decoding noise, on its own thread\n",
               median_of(runs, n, get_noise_seconds));
    if (!o->cuts_mode) {
        printf("  stages (s)     ");
        for (int k = 0; k < N_STAGES; k++)
            printf(" %s %.3f", bench_stage_names[k], median_of(runs, n, stage_getters[k]));
        printf("\n");
        if (rp->s->features != SHARC_FEATURES_NONE && rp->s->device != SHARC_DEVICE_CUDA)
            printf("  features       %10.3f ms per batch in the decode threads\n",
                   median_of(runs, n, get_cpu_feat_ms));
        if (rp->s->resample || rp->s->augment)
            printf("  conditioning   %10.3f of the decode threads' decoding time\n",
                   median_of(runs, n, get_cond_share));
        printf("  CPU per cut (us)");
        for (int k = 0; k < N_ROLES; k++)
            printf(" %s %.1f", bench_role_names[k], median_of(runs, n, role_getters[k]));
        printf("\n");
    }
    if (rp->s->device == SHARC_DEVICE_CUDA) {
        double bw = median_of(runs, n, get_feat_bw);
        printf("  device cuda:%-3d%10.3f ms per batch from the host batch, %.0f s of audio/s\n",
               rp->s->device_ordinal, median_of(runs, n, get_dev_ms),
               median_of(runs, n, get_dev_rate));
        printf("  features       %10.3f ms per batch on the device, %.1f GB/s read and written "
               "(%.2f of the copy bandwidth, %.1f GB/s)\n",
               median_of(runs, n, get_feat_ms), bw * 1e-9, bw / rp->copy_bw, rp->copy_bw * 1e-9);
    }
    int ended = 0;
    for (int i = 0; i < n; i++)
        ended += runs[i].ended;
    printf("  window         %10.2f s%s\n", median_of(runs, n, get_wall),
           ended ? " (ended with the data; --epochs 0 reads on)" : "");
    if (bench_sources_text)
        fputs(bench_sources_text, stdout);
}

/*
 * sharc bench: measure the loader (batches, or cuts with --cuts) and, with --floor, the floor
 * (libarchive + libsndfile alone, bench_floor.c) in the same run, alternating the two.
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

#include "bench_bcast.h"
#include "bench_floor.h"
#include "bench.h"
#include "bench_report.h"
#include "cli.h"
#include "cli_loader.h"
#include "cli_opts.h"
#include "cli_reader_opts.h"

static const char *const cmd = "bench";

/* JSON names of sharc_reader_stats.stage_seconds, by enum sharc_stage. */
const char *const bench_stage_names[N_STAGES] = {[SHARC_STAGE_READ] = "read",
                                                 [SHARC_STAGE_DECOMPRESS] = "decompress",
                                                 [SHARC_STAGE_SAMPLE] = "sample",
                                                 [SHARC_STAGE_DECODE] = "decode",
                                                 [SHARC_STAGE_COLLATE] = "collate"};
const char *const bench_role_names[N_ROLES] = {"planner", "decode", "read_ahead", "other"};

/* Every failure is recorded for the {"error"} object --json ends with (cli_fail). */
#define fail_with(...) cli_fail(cmd, __VA_ARGS__)

/* The transport and mesh fields of the {"error"} object (cli_print_json_failure). */
static void dist_json(FILE *f, const void *dist)
{
    cli_dist_json(f, dist, NULL);
}

/* A finite number >= min (> min when `strict`); -1 after a usage error. */
static int parse_double(const char *opt, const char *val, double min, int strict, double *out)
{
    char *end;
    double v = strtod(val, &end);
    if (end == val || *end != '\0' || !isfinite(v) || v < min || (strict && v == min)) {
        cli_usage_error(cmd, "%s needs a number %s %g, not '%s'", opt, strict ? ">" : ">=", min,
                        val);
        return -1;
    }
    *out = v;
    return 0;
}

/* "1.5,3,7.25": sorted (non-decreasing) positive boundaries. */
static int parse_bins(cli_parser *parser, const cli_opt *opt, const char *val, void *target)
{
    bench_opts *o = parser->own;
    sharc_sampler_settings *st = &parser->reader->sampler;
    o->bins_linspace = strcmp(val, "linspace") == 0;
    if (o->bins_linspace)
        return 0;
    if (strchr(val, '[')) { /* NeMo's 2D bins, with --tokenizer and --bucket-batch-size */
        cli_reader_opts *ro = parser->ro;
        if (cli_parse_bins_2d(cmd, val, &ro->bins, &ro->bin_tokens, &st->n_bins) < 0)
            return -1;
        st->bins = ro->bins;
        st->bin_tokens = ro->bin_tokens;
        return 0;
    }
    size_t n = 1;
    for (const char *p = val; *p; p++)
        n += *p == ',';
    free(o->bins);
    o->bins = malloc(n * sizeof *o->bins);
    if (o->bins == NULL)
        return cli_usage_error(cmd, "out of memory"), -1;
    const char *p = val;
    for (size_t i = 0; i < n; i++) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || (*end != ',' && *end != '\0') || !isfinite(v) || v <= 0 ||
            (i > 0 && v < o->bins[i - 1])) {
            cli_usage_error(cmd,
                            "--bins needs sorted positive numbers separated by commas, "
                            "not '%s'",
                            val);
            return -1;
        }
        o->bins[i] = v;
        p = end + 1;
    }
    st->bins = o->bins;
    st->n_bins = n;
    return 0;
}

/* Seconds above 0, in bench's words ("--seconds needs a number > 0, not 'x'"). */
static int parse_positive(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    char flag[32];
    snprintf(flag, sizeof flag, "--%s", opt->name);
    return parse_double(flag, val, 0, 1, target);
}

static int parse_warmup(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    bench_opts *o = p->own;
    o->warmup_given = 1;
    return cli_parse_u64(cmd, "--warmup", val, &o->warmup);
}

static int parse_max_cuts(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    uint64_t u = 0;
    if (cli_parse_u64(cmd, "--max-cuts", val, &u) < 0)
        return -1;
    if (u == 0 || u > UINT32_MAX) {
        cli_usage_error(cmd, "--max-cuts must be in [1, %" PRIu32 "], not %s", UINT32_MAX, val);
        return -1;
    }
    *(uint32_t *)target = (uint32_t)u;
    return 0;
}

/* --no-shuffle: here also the shard order. */
static int parse_no_shuffle(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    p->reader->shuffle_shards = 0;
    p->reader->sampler.shuffle = 0;
    return 0;
}

#define OWN(field)      .target = CLI_T_CMD, .offset = offsetof(bench_opts, field)
#define SM(field)       .target = CLI_T_READER, .offset = offsetof(sharc_reader_settings, sampler.field)
#define USE(name, help) CLI_USE(cli_reader_group, name, help)

/* The reader options as 'sharc read' parses them; the sampler options bench checks in its
 * own words. The batching options, --threads, --prefetch and --read-ahead-bytes are refused
 * with --cuts (CLI_BATCH_ONLY); --no-shuffle is not, as it also sets the shard order. */
static const cli_opt options[] = {
    CLI_TEXT("Measurement:\n"),
    {CLI_OPT_U64, "batches", .metavar = "N", OWN(count), .min = 1,
     .help = "time N batches (N cuts with --cuts); not with --seconds\n(default: by --seconds)"},
    {CLI_OPT_CUSTOM, "seconds", .metavar = "S", OWN(seconds), .handler = parse_positive,
     .help = "time S seconds; not with --batches (default 10 when --batches\nis not given)"},
    {CLI_OPT_CUSTOM, "warmup", .metavar = "N", .handler = parse_warmup,
     .help = "untimed batches (cuts with --cuts) first; they include opening\n"
             "and the first buffer fill, see time_to_first_batch_s\n"
             "(default 2, or 20 with --cuts)"},
    {CLI_OPT_CUSTOM, "warmup-seconds", .metavar = "S", OWN(warmup_seconds),
     .handler = parse_positive,
     .help = "and keep warming up until S seconds after opening: long enough\n"
             "for the sampler's buffer to fill (remote and compressed shards\n"
             "hold their audio in it, up to --max-buffer-bytes), so that the\n"
             "window times the steady state; not with --transport or --mesh\n"
             "(default 0)"},
    {CLI_OPT_INT, "repeat", .metavar = "R", OWN(repeat), .min = 1, .max = MAX_REPEAT,
     .help = "repetitions; medians are reported (default 1, or 3 with --floor)"},
    {CLI_OPT_FLAG, "floor", OWN(floor), .min = 1,
     .help = "also measure the floor, alternating with the loader; the floor\n"
             "runs as long as the loader's window of the same repetition,\n"
             "and at least 1 s (a rate from a few members would mean little)"},
    {CLI_OPT_FLAG, "cuts", OWN(cuts_mode), .min = 1,
     .help = "cut-level reader (sharc_reader_next): no sampler, no collation,\n"
             "one thread, so the batching, --threads, --prefetch and\n"
             "--read-ahead-bytes options are refused; the floor then uses\n"
             "one thread too"},
    CLI_TEXT("\nReader (defaults as 'sharc read' unless said):\n"),
    USE("layout", "auto, shar, nemo or wds (default auto)"),
    USE("epochs", "epochs; the window also ends with the data; 0 = forever, for\n"
                  "a steady state on a small dataset (default 1)"),
    USE("seed", "shard order and sampler seed (default 0)"),
    USE("on-error", "fail or skip (default fail)"),
    USE("sampling-rate", "required sampling rate (default: any; a batch holds one rate)"),
    USE("resample", NULL),
    USE("speed-perturb", NULL),
    USE("speed-perturb-prob", NULL),
    USE("volume-perturb", NULL),
    USE("volume-perturb-prob", NULL),
    USE("noise", NULL),
    USE("noise-snr", NULL),
    USE("noise-prob", NULL),
    USE("noise-max-bytes", NULL),
    USE("channel", "keep channel K of multi-channel audio (default: all; batches\n"
                   "need one channel)"),
    USE("threads", "decode threads for batches (with N > 1, shard read-ahead\n"
                   "threads too: as many for compressed tars, one per 4 for plain\n"
                   "ones, at most 8; remote shards: at least one, also with N = 1);\n"
                   "0 = all online cores (default 0)"),
    USE("prefetch", "batches prepared ahead; 0 = 2 per thread + 2, at most 16\n(default 0)"),
    USE("read-ahead-bytes", "encoded bytes read ahead by the read-ahead threads, all\n"
                            "together; 0 = none (default 67108864)"),
    USE("retries", NULL),
    USE("timeout-ms", NULL),
    USE("tokenizer", NULL),
    CLI_TEXT(
        "\nSampler (batches; Lhotse DynamicBucketingSampler equivalents in docs/sampler.md):\n"),
    {CLI_OPT_CUSTOM, "batch-duration", .metavar = "S", SM(max_duration), .handler = parse_positive,
     .flags = CLI_BATCH_ONLY | CLI_SHARED,
     .help = "padded seconds per batch (default 200 here when neither\n"
             "--batch-duration nor --max-cuts is given)"},
    {CLI_OPT_CUSTOM, "max-duration", .metavar = "S", SM(max_duration), .handler = parse_positive,
     .flags = CLI_BATCH_ONLY | CLI_SHARED, .help = "deprecated: --batch-duration",
     .replaced_by = "batch-duration"},
    {CLI_OPT_CUSTOM, "max-cuts", .metavar = "N", SM(max_cuts), .handler = parse_max_cuts,
     .flags = CLI_BATCH_ONLY | CLI_SHARED, .help = "cuts per batch (default: no limit)"},
    {CLI_OPT_U32, "num-buckets", .metavar = "N", SM(num_buckets), .min = 1, .max = 1 << 20,
     .flags = CLI_BATCH_ONLY | CLI_SHARED, .help = "buckets estimated from metadata (default 10)"},
    {CLI_OPT_CUSTOM, "bins", .metavar = "A,B,...", .handler = parse_bins,
     .flags = CLI_BATCH_ONLY | CLI_SHARED,
     .help = "explicit sorted bucket boundaries in seconds (default: estimate);\n"
             "'linspace': NeMo's default when its config sets max_duration,\n"
             "evenly spaced from --min-duration to --max-cut-duration;\n"
             "'[[D,T],...]': NeMo's 2D bins (with --tokenizer and\n"
             "--bucket-batch-size)"},
    USE("bucket-batch-size", NULL),
    USE("token-equivalent-duration", NULL),
    USE("batch-tokens", NULL),
    USE("min-duration", NULL),
    USE("max-cut-duration", NULL),
    {CLI_OPT_CUSTOM, "quadratic-duration", .metavar = "Q", SM(quadratic_duration),
     .handler = parse_positive, .flags = CLI_BATCH_ONLY | CLI_SHARED,
     .help = "a cut counts as d + d*d/Q (default off)"},
    {CLI_OPT_U32, "buffer-size", .metavar = "N", SM(buffer_size), .min = 1, .max = 1 << 30,
     .flags = CLI_BATCH_ONLY | CLI_SHARED, .help = "cuts held in the buckets (default 20000)"},
    USE("max-buffer-bytes", NULL),
    {CLI_OPT_CUSTOM, "no-shuffle", .handler = parse_no_shuffle, .flags = CLI_NO_VALUE | CLI_SHARED,
     .help = "no shuffle inside buckets nor of the shard order"},
    CLI_TEXT("\nFeatures (batches; see docs/features.md):\n"),
    USE("features", NULL),
    USE("n-mels", NULL),
    USE("fbank-sample-rate", NULL),
    USE("fbank-window", NULL),
    USE("fbank-hop", NULL),
    USE("fbank-n-fft", NULL),
    USE("fbank-pad-to", NULL),
    USE("fbank-preemph", NULL),
    USE("fbank-dither", NULL),
    USE("no-keep-audio", NULL),
    USE("device", NULL),
    CLI_TEXT("\nMixing datasets (instead of PATH; see docs/mixing.md):\n"),
    USE("input-cfg", NULL),
    USE("max-open-streams", NULL),
    USE("mix-finite", NULL),
    CLI_TEXT("\nDistributed (batches; every rank prints its own report):\n"),
    CLI_GROUP(cli_dist_group),
    /* --broadcast-only is taken before the options are parsed (bench_bcast_requested). */
    CLI_TEXT("                      (the window is then --batches N, default 20: ranks stop "
             "together)\n"
             "  --broadcast-only    measure the broadcast alone against a raw MPI_Bcast of the "
             "same\n"
             "                      bytes (see sharc bench --broadcast-only --help)\n"),
    CLI_GROUP(cli_even_group),
    CLI_TEXT("\nOutput:\n"),
    {CLI_OPT_FLAG, "json", OWN(json), .min = 1, .help = "print one JSON object at the end (below)"},
    {CLI_OPT_STRING, "report", .metavar = "FILE", OWN(report_html),
     .help = "also write the run as one self-contained HTML page: throughput over\n"
             "the window, time by stage, memory over time, results, machine"},
    {CLI_OPT_STRING, "report-json", .metavar = "FILE", OWN(report_json),
     .help = "also write the report's JSON alone; two of them make a comparison:\n"
             "sharc bench --compare A.json B.json --report C.html"},
    {CLI_OPT_FLAG, "quiet", OWN(quiet), .min = 1, .help = "no progress line, no library warnings"},
    {CLI_OPT_FLAG, "verbose", OWN(verbose), .min = 1,
     .help = "also the library's informational messages"},
    CLI_HELP_OPT,
    CLI_END,
};

#undef OWN
#undef SM
#undef USE

static void print_help(void)
{
    printf("Usage: sharc bench [options] PATH...\n"
           "\n"
           "Measure the loader as a training job uses it: open the dataset, take --warmup batches\n"
           "untimed, then time --batches N batches or --seconds S seconds of them, and report\n"
           "seconds of audio per second, cuts/s, batches/s, padding, batch fill, time to the\n"
           "first batch, peak RSS and the time split by stage. With --floor the floor is measured\n"
           "in the same run: libarchive streaming the same tar files and libsndfile decoding\n"
           "every audio member from memory, with the same number of threads and nothing else;\n"
           "loader and floor runs alternate and the medians are reported with their ratio.\n"
           "\n"
           "PATH is a dataset directory, a shard file, a brace or a wildcard pattern, as for\n"
           "'sharc read'.\n"
           "\n");
    cli_opts_print(stdout, options);
    printf(
        "\n"
        "The JSON object has: mode (\"batches\" or \"cuts\"), threads, repeat, shards,\n"
        "tar_files, window_seconds, and the totals over the repetitions' windows audio_seconds,\n"
        "cuts and batches; then audio_seconds_per_second, cuts_per_second, batches_per_second,\n"
        "padding_ratio (padded / real audio samples, >= 1), batch_fill (mean over batches of\n"
        "sum(duration) / max_duration), max_duration, time_to_first_batch_s (open to the first\n"
        "batch, or cut), cpu_seconds_per_audio_second (process CPU time over the window),\n"
        "peak_rss_bytes (peak resident memory of the loader runs; peak_rss_scope is \"run\"\n"
        "when the kernel let the peak be reset before each run, else \"process\"),\n"
        "stage_seconds {read, decompress, sample, decode, collate} (seconds summed over\n"
        "threads in the window: reading files, decompressing and parsing tars, JSON and\n"
        "pairing, sampling, decoding, collating; the reader fills them in batch mode, so\n"
        "they are null with --cuts), network {bytes, retries, wait_seconds} (remote shards,\n"
        "docs/storage.md: bytes received, transfers retried and seconds the reading\n"
        "threads waited for remote bytes in the window; 0 for local shards),\n"
        "feature_ms_per_batch (with --features on the host: seconds the decode threads\n"
        "spent computing features per batch, in ms, not part of stage_seconds; null\n"
        "otherwise), conditioning_share (with --resample or a perturbation: the share of\n"
        "stage_seconds.decode spent converting samples, docs/conditioning.md; null\n"
        "otherwise),\n"
        "cpu_us_per_cut {planner, decode, read_ahead, other}\n"
        "(CPU microseconds per cut in the window of the library's threads by role, told\n"
        "by their names, and of all other threads, the caller's among them; 0 where /proc\n"
        "cannot tell), and with --floor floor_audio_seconds_per_second,\n"
        "floor_cuts_per_second, floor_cpu_seconds_per_audio_second and ratio_to_floor\n"
        "(loader / floor), with --device cuda:N device {name, ms_per_batch (wall time from\n"
        "a host batch to its device batch: upload and features), feature_ms_per_batch (the\n"
        "feature kernels' device time), audio_seconds_per_second (audio per second of that\n"
        "wall time), feature_bytes_per_second (audio read plus features written per second of\n"
        "kernel time), copy_bytes_per_second (the device's device-to-device cudaMemcpy\n"
        "bandwidth, read plus written, measured once) and feature_to_copy_bandwidth}, rank and\n"
        "source (whether this rank read the batches or received them), then runs\n"
        "(one object per repetition, end_of_data telling whether the data ended its window,\n"
        "warmup_seconds and warmup_batches what went untimed before it: seconds from opening\n"
        "and batches, or cuts with --cuts). Rates are medians over the repetitions, the peak\n"
        "RSS is the maximum; values a mode does not define (batches with --cuts) are null. A\n"
        "run that fails (exit status 1) prints {\"error\",\"rank\",\"source\"} instead, error\n"
        "saying why.\n"
        "\n"
        "Exit status: 0 success, 1 read or floor error, 2 usage error.\n"
        "\n"
        "Example:\n"
        "  sharc bench --floor --threads 1 --batch-duration 200 --seconds 10 data/shar\n"
        "  sharc bench --cuts --floor --json data/wds\n"
        "  sharc bench --features fbank --device cuda:0 --batch-duration 600 data/shar\n"
        "  mpirun -n 4 sharc bench --transport mpi --mesh dp=2,cp=2 --batches 50 --json "
        "data/shar\n");
}

/* Check the combination of options and fill in the defaults that depend on others. */
static int finish_args(sharc_reader_settings *s, bench_opts *o, const char *batch_only)
{
    if (o->cuts_mode && batch_only != NULL)
        return cli_usage_error(
            cmd, "--%s applies to batches; it cannot be used with --cuts%s", batch_only,
            strcmp(batch_only, "threads") == 0 ? " (which reads on one thread)" : "");
    if (o->count > 0 && o->seconds > 0)
        return cli_usage_error(cmd, "--batches and --seconds both set the window: give one");
    if (cli_dist_active(&o->dist)) {
        /* Every rank of a group must take the same number of steps: no timed windows. */
        if (o->cuts_mode)
            return cli_usage_error(cmd, "--transport and --mesh measure batches, not --cuts");
        if (o->seconds > 0)
            return cli_usage_error(cmd, "with --transport or --mesh the window is a number of "
                                        "batches (--batches N): ranks must stop together");
        if (o->warmup_seconds > 0)
            return cli_usage_error(cmd, "with --transport or --mesh the warm-up is a number of "
                                        "batches (--warmup N): ranks must start together");
        if (o->count == 0)
            o->count = 20;
    }
    if (!o->warmup_given)
        o->warmup = o->cuts_mode ? 20 : 2;
    if (o->count == 0 && o->seconds == 0)
        o->seconds = 10;
    if (o->repeat == 0)
        o->repeat = o->floor ? 3 : 1;
    sharc_sampler_settings *st = &s->sampler;
    if (o->bins_linspace) {
        free(o->bins);
        o->bins = NULL;
        if (cli_linspace_bins(cmd, st, &o->bins, &st->n_bins) < 0)
            return CLI_EXIT_USAGE;
        st->bins = o->bins;
    }
    if (!(st->max_duration > 0) && st->max_cuts == 0 && st->bucket_batch_size == NULL &&
        st->batch_tokens == 0)
        st->max_duration = 200;
    if (s->n_threads == 0)
        s->n_threads = cli_online_cpus();
    return -1;
}

/* Parse argv into settings and options. Returns -1 to continue, else an exit status. */
static int parse_args(int argc, char **argv, sharc_reader_settings *s, bench_opts *o)
{
    cli_parser p = {.cmd = cmd,
                    .table = options,
                    .print_help = print_help,
                    .own = o,
                    .reader = s,
                    .ro = &o->ro,
                    .dist = &o->dist,
                    .argc = argc,
                    .argv = argv};
    int status = cli_opts_parse(&p);
    if (status >= 0)
        return status;
    if (o->ro.bucket_batch_size && o->ro.n_bucket_batch_size != s->sampler.n_bins)
        return cli_usage_error(cmd, "--bucket-batch-size needs one number per --bins entry");
    s->sampler.bucket_batch_size = o->ro.bucket_batch_size;
    status = cli_take_paths(cmd, argc, argv, s);
    return status >= 0 ? status : finish_args(s, o, p.batch_only);
}

/* ---- the loader runs ---- */

typedef struct window {
    double t0, cpu0;
    double stage0[N_STAGES];
    double role0[N_ROLES];
    double net0[3]; /* bytes, retries, wait seconds */
    sharc_device_stats dev0;
    double cpu_feat0; /* the decode threads' feature seconds at the start */
    double cond0;     /* and their conditioning seconds */
    int open;         /* the window has started */
} window;

static void window_start(window *w, sharc_reader *r, double t0)
{
    sharc_reader_stats st = {0};
    if (r != NULL) /* NULL on a peer of a broadcast group: it reads nothing */
        sharc_reader_get_stats(r, &st);
    w->t0 = t0;
    w->cpu0 = bench_process_cpu_seconds();
    bench_role_cpu_seconds(w->role0);
    memcpy(w->stage0, st.stage_seconds, sizeof w->stage0);
    w->net0[0] = (double)st.net_bytes;
    w->net0[1] = st.net_retries;
    w->net0[2] = st.net_wait_seconds;
    w->cpu_feat0 = st.feature_seconds;
    w->cond0 = st.condition_seconds;
    sharc_reader_get_device_stats(r, &w->dev0);
    w->open = 1;
}

static void window_end(const window *w, sharc_reader *r, run_result *res)
{
    sharc_reader_stats st = {0};
    if (r != NULL)
        sharc_reader_get_stats(r, &st);
    res->wall = cli_now() - w->t0;
    res->cpu = bench_process_cpu_seconds() - w->cpu0;
    for (int k = 0; k < N_STAGES; k++)
        res->stage[k] = st.stage_seconds[k] - w->stage0[k];
    res->net_bytes = (double)st.net_bytes - w->net0[0];
    res->net_retries = st.net_retries - w->net0[1];
    res->net_wait = st.net_wait_seconds - w->net0[2];
    res->cpu_feat_seconds = st.feature_seconds - w->cpu_feat0;
    res->cond_seconds = st.condition_seconds - w->cond0;
    sharc_device_stats ds;
    sharc_reader_get_device_stats(r, &ds);
    res->dev_batches = (double)(ds.batches - w->dev0.batches);
    res->dev_seconds = ds.seconds - w->dev0.seconds;
    res->feat_seconds = ds.feature_seconds - w->dev0.feature_seconds;
    res->feat_bytes = (double)(ds.feature_read_bytes + ds.feature_write_bytes -
                               w->dev0.feature_read_bytes - w->dev0.feature_write_bytes);
    double role[N_ROLES];
    bench_role_cpu_seconds(role);
    for (int k = 0; k < N_ROLES; k++) /* a thread that ended in the window took its time */
        res->role_cpu[k] = role[k] > w->role0[k] ? role[k] - w->role0[k] : 0;
}

/* Whether the window is complete after `n` units in `elapsed` seconds. */
static int window_done(const bench_opts *o, uint64_t n, double elapsed)
{
    return (o->count > 0 && n >= o->count) || (o->seconds > 0 && elapsed >= o->seconds);
}

static void progress(cli_progress *p, const bench_opts *o, const char *what, int rep, uint64_t n,
                     double elapsed, double audio)
{
    char suffix[160];
    snprintf(suffix, sizeof suffix, "rep %d/%d %s: %" PRIu64 " %s, %.0f s of audio/s", rep + 1,
             o->repeat, what, n, o->cuts_mode ? "cuts" : "batches",
             elapsed > 0 ? audio / elapsed : 0.0);
    if (o->count > 0)
        cli_progress_update(p, (double)n, (double)o->count, suffix, 0);
    else
        cli_progress_update(p, elapsed, o->seconds, suffix, 0);
}

/* Add one batch's figures to the window. */
static int count_batch(const sharc_batch *b, double max_duration, run_result *res)
{
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    const sharc_tensor *dur = sharc_batch_tensor(b, "duration");
    /* --no-keep-audio drops the audio: the rows are then counted from audio_lens, and the
     * padded width is the longest row (all rows are at the features' rate). */
    int64_t rows = audio != NULL && audio->ndim == 2                  ? audio->shape[0]
                   : audio == NULL && lens != NULL && lens->ndim == 1 ? lens->shape[0]
                                                                      : -1;
    if (rows < 0 || lens == NULL || dur == NULL || lens->dtype != SHARC_DTYPE_I32 ||
        dur->dtype != SHARC_DTYPE_F32 || lens->shape[0] != rows || dur->shape[0] != rows) {
        fail_with("batch %" PRIu64 " lacks the audio, audio_lens or duration tensor of the "
                  "documented shape",
                  b->step);
        return -1;
    }
    int64_t n = rows, width = audio != NULL ? audio->shape[1] : 0;
    const int32_t *l = lens->data;
    const float *d = dur->data;
    /* --device cuda: the lengths and durations are read from their copies on the host. */
    int32_t *l_host = NULL;
    float *d_host = NULL;
    if (lens->device != SHARC_DEVICE_HOST || dur->device != SHARC_DEVICE_HOST) {
        l_host = malloc(lens->nbytes + 1);
        d_host = malloc(dur->nbytes + 1);
        int rc = l_host == NULL || d_host == NULL
                     ? SHARC_ERR(ENOMEM)
                     : sharc_tensor_copy_to_host(lens, l_host, lens->nbytes);
        if (rc == 0)
            rc = sharc_tensor_copy_to_host(dur, d_host, dur->nbytes);
        if (rc < 0) {
            free(l_host);
            free(d_host);
            fail_with("batch %" PRIu64 ": cannot copy audio_lens and duration from device "
                      "cuda:%d: %s",
                      b->step, lens->device_ordinal, sharc_strerror(rc));
            return -1;
        }
        l = l_host;
        d = d_host;
    }
    double sum_d = 0;
    for (int64_t i = 0; i < n; i++) {
        res->real_frames += l[i];
        sum_d += d[i];
        if (audio == NULL && l[i] > width)
            width = l[i];
    }
    free(l_host);
    free(d_host);
    res->padded_frames += (double)n * (double)width;
    res->audio += sum_d;
    res->cuts += (double)n;
    res->batches += 1;
    if (max_duration > 0)
        res->fill_sum += sum_d / max_duration;
    return 0;
}

/* Take one batch (cut); 1 with one, 0 at the end, -1 after printing the error. */
static int take_one(sharc_reader *r, sharc_loader *l, const bench_opts *o, double max_duration,
                    int counted, run_result *res)
{
    int rc;
    if (o->cuts_mode) {
        const sharc_cut *c;
        rc = sharc_reader_next(r, &c);
        if (rc == 0 && counted) {
            res->audio += c->duration;
            res->cuts += 1;
        }
    } else {
        sharc_batch *b;
        rc = sharc_loader_next(l, &b);
        if (rc == 0) {
            int bad = counted ? count_batch(b, max_duration, res) : 0;
            sharc_batch_release(b);
            if (bad < 0)
                return -1;
        }
    }
    if (rc == SHARC_END)
        return 0;
    if (rc < 0) {
        const char *why = l != NULL ? sharc_loader_last_error(l) : sharc_reader_last_error(r);
        snprintf(cli_failure_buf(), CLI_FAILURE_BYTES, "read error: %s",
                 why[0] ? why : sharc_strerror(rc));
        cli_report_error("bench", "read error: ", why[0] ? why : sharc_strerror(rc));
        return -1;
    }
    return 1;
}

static int open_reader(const sharc_reader_settings *s, sharc_reader **r)
{
    int rc = cli_open_reader("bench", s, r);
    if (rc < 0)
        cli_open_failure_text(cli_failure_buf(), CLI_FAILURE_BYTES, "dataset", rc);
    return rc < 0 ? -1 : 0;
}

/*
 * Batches come from a sharc_loader: a plain reader alone, and under --transport/--mesh the
 * source of each group reads while its peers receive. A dataset the source cannot open is
 * reported by the first next, which also tells the peers.
 */
static int open_loader(const sharc_reader_settings *s, const bench_opts *o, sharc_loader **l)
{
    sharc_loader_settings ls;
    sharc_loader_default_settings(&ls);
    ls.reader = *s;
    cli_dist_apply(&o->dist, &ls);
    int rc = cli_open_loader("bench", &ls, l);
    if (rc < 0)
        cli_open_failure_text(cli_failure_buf(), CLI_FAILURE_BYTES, "loader", rc);
    if (rc == 0 && sharc_loader_is_source(*l) && sharc_loader_reader(*l) == NULL) {
        sharc_batch *b = NULL;
        rc = sharc_loader_next(*l, &b);
        fail_with("%s", sharc_loader_last_error(*l));
        sharc_loader_close(l);
    }
    return rc < 0 ? -1 : 0;
}

/* A mixture's per-source summary of the last repetition, as text and as a JSON member. */
char *bench_sources_text, *bench_sources_json;

static void keep_sources(const sharc_reader *r)
{
    if (r == NULL || sharc_reader_num_sources(r) == 0)
        return;
    size_t len;
    free(bench_sources_text);
    free(bench_sources_json);
    bench_sources_text = bench_sources_json = NULL;
    FILE *f = open_memstream(&bench_sources_text, &len);
    if (f) {
        cli_print_sources_text(f, r);
        fclose(f);
    }
    f = open_memstream(&bench_sources_json, &len);
    if (f) {
        cli_print_sources_json(f, r);
        fclose(f);
    }
}

/* One loader run: open, warm up, time the window. 0, or -1 after printing the error. */
static int run_loader(const sharc_reader_settings *s, const bench_opts *o, int rep, cli_progress *p,
                      run_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = cli_now();
    sharc_reader *r = NULL;
    sharc_loader *l = NULL;
    if (o->cuts_mode ? open_reader(s, &r) < 0 : open_loader(s, o, &l) < 0)
        return -1;
    if (l != NULL)
        r = sharc_loader_reader(l); /* NULL on a peer */
    res->shards = r != NULL ? sharc_reader_num_shards(r) : 0;
    window w = {0};
    if (o->warmup == 0 && o->warmup_seconds == 0)
        window_start(&w, r, t0);
    uint64_t taken = 0, n = 0;
    int rc;
    while ((rc = take_one(r, l, o, s->sampler.max_duration, w.open, res)) == 1) {
        if (taken++ == 0)
            res->first = cli_now() - t0;
        if (!w.open) {
            double now = cli_now();
            if (taken >= o->warmup && now - t0 >= o->warmup_seconds) {
                window_start(&w, r, now);
                res->warmup_wall = now - t0;
                res->warmup_taken = taken;
            }
            continue;
        }
        double elapsed = cli_now() - w.t0;
        progress(p, o, "sharc", rep, ++n, elapsed, res->audio);
        bench_timeline_add(rep, elapsed, (double)n, res->audio);
        if (window_done(o, n, elapsed))
            break;
    }
    if (rc == 0 && !w.open) {
        fail_with("the dataset ended after %" PRIu64 " %s, during the warm-up; use --epochs 0 "
                  "or a shorter warm-up (--warmup, --warmup-seconds)",
                  taken, o->cuts_mode ? "cuts" : "batches");
        rc = -1;
    }
    res->ended = rc == 0;
    if (rc >= 0)
        window_end(&w, r, res);
    keep_sources(r);
    if (l != NULL)
        sharc_loader_close(&l); /* the reader is the loader's */
    else
        sharc_reader_close(&r);
    return rc < 0 ? -1 : 0;
}

/* The floor's shortest window: a window of a few batches would time a member or two, or only
 * the metadata members before the first audio one. */
#define MIN_FLOOR_SECONDS 1.0

static int run_floor(char *const *shards, size_t n_shards, int threads, double seconds,
                     run_result *res)
{
    memset(res, 0, sizeof *res);
    bench_floor_result f;
    char err[1024] = "";
    if (bench_floor_run(shards, n_shards, threads, seconds, &f, err, sizeof err) < 0) {
        fail_with("floor: %s", err);
        return -1;
    }
    res->wall = f.wall_seconds;
    res->cpu = f.cpu_seconds;
    res->audio = f.audio_seconds;
    res->cuts = (double)f.members;
    return 0;
}

/* ---- the command ---- */

/* Run the loader (and the floor) o->repeat times, alternating. */
static int run_all(const sharc_reader_settings *s, const bench_opts *o, char **shards,
                   size_t n_shards, run_result *runs, run_result *floors, int *scope_run)
{
    cli_progress p;
    cli_progress_init(&p, !o->quiet);
    *scope_run = 1;
    for (int i = 0; i < o->repeat; i++) {
        *scope_run &= bench_reset_peak_rss();
        int rc = run_loader(s, o, i, &p, &runs[i]);
        runs[i].peak_rss = bench_peak_rss_bytes();
        if (rc < 0)
            return cli_progress_clear(&p), -1;
        if (floors == NULL)
            continue;
        char suffix[64];
        snprintf(suffix, sizeof suffix, "rep %d/%d floor", i + 1, o->repeat);
        cli_progress_update(&p, 0, 0, suffix, 1);
        double floor_seconds = runs[i].wall > MIN_FLOOR_SECONDS ? runs[i].wall : MIN_FLOOR_SECONDS;
        if (run_floor(shards, n_shards, o->cuts_mode ? 1 : s->n_threads, floor_seconds,
                      &floors[i]) < 0)
            return cli_progress_clear(&p), -1;
    }
    cli_progress_clear(&p);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    if (bench_bcast_requested(argc, argv)) /* --broadcast-only: tools/bench_bcast.c */
        return bench_bcast_main(argc, argv);
    if (bench_compare_requested(argc, argv)) /* --compare: tools/bench_report.c */
        return bench_compare_main(argc, argv);
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    bench_opts o = {0};
    cli_dist_init(&o.dist);
    char **shards = NULL;
    size_t n_shards = 0;
    run_result *runs = NULL, *floors = NULL;
    int reported = 0; /* the report was printed: a failure after it is only stdout's */
    int status = parse_args(argc, argv, &s, &o);
    if (status >= 0)
        goto done;
    status = CLI_EXIT_FAIL;
    cli_logger(&s.logger, o.quiet ? CLI_LOG_SILENT : (o.verbose ? SHARC_LOG_INFO : SHARC_LOG_WARN));
    char err[1024];
    if (bench_floor_find_shards(s.paths, s.n_paths, &shards, &n_shards, err, sizeof err) < 0) {
        if (o.floor) {
            fail_with("floor: %s", err);
            goto done;
        }
        n_shards = 0; /* the tar count is only reported without --floor */
    }
    runs = calloc((size_t)o.repeat, sizeof *runs);
    floors = o.floor ? calloc((size_t)o.repeat, sizeof *floors) : NULL;
    if (runs == NULL || (o.floor && floors == NULL)) {
        fail_with("out of memory");
        goto done;
    }
    o.dist.device = s.device == SHARC_DEVICE_CUDA ? s.device_ordinal : -1;
    if (!o.cuts_mode && (status = cli_dist_setup(cmd, &o.dist)) != 0)
        goto done;
    status = CLI_EXIT_FAIL;
    int scope_run;
    if (run_all(&s, &o, shards, n_shards, runs, floors, &scope_run) < 0)
        goto done;
    report rp = {&o, &s, runs, floors, n_shards, scope_run, NAN};
    /* The device's copy bandwidth, measured once: the yardstick of the feature kernels'. */
    if (s.device == SHARC_DEVICE_CUDA &&
        sharc_device_copy_bandwidth(s.device_ordinal, &rp.copy_bw, NULL) < 0)
        rp.copy_bw = NAN;
    reported = 1;
    if (o.json)
        bench_print_json(stdout, &rp);
    else
        bench_print_text(&rp);
    status = cli_finish_output(cmd, CLI_EXIT_OK);
    if (o.report_html != NULL || o.report_json != NULL) {
        char *result = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&result, &len);
        if (m != NULL)
            bench_print_json(m, &rp);
        if (m == NULL || fclose(m) != 0 ||
            bench_report_save(o.report_html, o.report_json, result, argc, argv) < 0)
            status = CLI_EXIT_FAIL;
        free(result);
    }
done:
    if (status == CLI_EXIT_FAIL && o.json && !reported) /* the one object scripts wait for */
        cli_print_json_failure(stdout, dist_json, &o.dist);
    free(runs);
    free(floors);
    bench_floor_free_shards(shards, n_shards);
    free(o.bins);
    free(bench_sources_text);
    free(bench_sources_json);
    bench_timeline_free();
    cli_reader_opts_free(&o.ro);
    cli_dist_close(&o.dist);
    return status;
}

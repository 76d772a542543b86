/*
 * sharc bench's command line: the option table, --help, and the checks that turn argv into
 * reader settings and bench options (cmd_bench.c runs them).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "cli_loader.h"
#include "cli_opts.h"
#include "cli_reader_opts.h"

static const char *const cmd = "bench";

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
    {CLI_OPT_U32, "num-buckets", .metavar = "N", SM(num_buckets), .min = 1, .max = 65536,
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
    {CLI_OPT_U32, "buffer-size", .metavar = "N", SM(buffer_size), .min = 1, .max = 1 << 24,
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
    /* --compare is taken before the options are parsed (bench_compare_requested). */
    CLI_TEXT("  --compare A.json B.json  instead of measuring: write the page of --report C.html\n"
             "                      that compares two runs' --report-json files (see sharc\n"
             "                      bench --compare --help)\n"),
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
        "otherwise), noise_seconds (with --noise: seconds the noise stream's thread spent\n"
        "reading and decoding noise in the window, not part of stage_seconds; null\n"
        "otherwise), broadcast_seconds (batches: this rank's seconds in the broadcast over\n"
        "the window, sharc_loader_broadcast_seconds, near 0 for a group of one; on a peer\n"
        "they include waiting for the source's batch; null with --cuts),\n"
        "cpu_us_per_cut {planner, decode, read_ahead, noise, other}\n"
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
        "Exit status: 0 success, 1 read or floor error, 2 usage error (a report file that would\n"
        "replace an input, a shard, manifest or --compare's JSON, included).\n"
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
int bench_parse_args(int argc, char **argv, sharc_reader_settings *s, bench_opts *o)
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
    if (status < 0)
        status = cli_refuse_reports_over_inputs(cmd, s, NULL, 0, o->report_html, o->report_json);
    return status >= 0 ? status : finish_args(s, o, p.batch_only);
}

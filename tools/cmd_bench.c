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
#include "cli.h"
#include "cli_loader.h"
#include "cli_opts.h"
#include "cli_reader_opts.h"

static const char *const cmd = "bench";

#define MAX_REPEAT 101
#define N_STAGES   5

/* JSON names of sharc_reader_stats.stage_seconds, by enum sharc_stage. */
static const char *const stage_names[N_STAGES] = {[SHARC_STAGE_READ] = "read",
                                                  [SHARC_STAGE_DECOMPRESS] = "decompress",
                                                  [SHARC_STAGE_SAMPLE] = "sample",
                                                  [SHARC_STAGE_DECODE] = "decode",
                                                  [SHARC_STAGE_COLLATE] = "collate"};

/* The threads of the process by role, told by the names the library gives them
 * (src/pipeline.c, src/readahead.c); "other" is the caller's thread and any thread not
 * sharc's. */
enum { ROLE_PLANNER, ROLE_DECODE, ROLE_READ_AHEAD, ROLE_OTHER, N_ROLES };
static const char *const role_names[N_ROLES] = {"planner", "decode", "read_ahead", "other"};

typedef struct bench_opts {
    int cuts_mode; /* --cuts: sharc_reader_next(), no batching */
    int floor;     /* --floor */
    int json, quiet, verbose;
    uint64_t warmup; /* batches (cuts with --cuts) before the window */
    int warmup_given;
    double warmup_seconds; /* --warmup-seconds: and at least this long from opening */
    uint64_t count;        /* --batches: window length in batches (cuts); 0 = by time */
    double seconds;        /* --seconds: window length in seconds; 0 = by count */
    int repeat;
    double *bins;       /* --bins, owned */
    int bins_linspace;  /* --bins linspace: NeMo's evenly spaced bins, made at the end */
    cli_dist dist;      /* --transport, --mesh: batches come from a sharc_loader */
    cli_reader_opts ro; /* the shared list-valued options: 2D bins, batch sizes, models */
} bench_opts;

/* Every failure is recorded for the {"error"} object --json ends with (cli_fail). */
#define fail_with(...) cli_fail(cmd, __VA_ARGS__)

/* The transport and mesh fields of the {"error"} object (cli_print_json_failure). */
static void dist_json(FILE *f, const void *dist)
{
    cli_dist_json(f, dist, NULL);
}

/* One measured run of the loader or of the floor. */
typedef struct run_result {
    double wall;  /* the measured window, seconds */
    double cpu;   /* process CPU seconds over the window */
    double audio; /* seconds of audio (metadata durations) in the window */
    double cuts, batches;
    double real_frames, padded_frames; /* sum audio_lens, sum B * T */
    double fill_sum;                   /* sum over batches of sum(duration) / max_duration */
    double first;                      /* open to first batch (cut), seconds */
    double warmup_wall;                /* open to the window's start, seconds */
    uint64_t warmup_taken;             /* batches (cuts) taken before the window */
    double stage[N_STAGES];            /* stage seconds over the window */
    double role_cpu[N_ROLES];          /* CPU seconds of each role's threads over the window */
    double net_bytes, net_retries;     /* remote shards: bytes received, transfers retried */
    double net_wait;                   /* remote shards: seconds waited for their bytes */
    /* --device cuda: the device stage's batches, wall seconds from host batch to device
     * batch, feature kernel seconds and the bytes they read and wrote */
    double dev_batches, dev_seconds, feat_seconds, feat_bytes;
    double cpu_feat_seconds; /* --features on the host: the decode threads' feature seconds */
    uint64_t peak_rss;       /* bytes */
    size_t shards;           /* shards the reader found */
    int ended;               /* the data ended the window */
} run_result;

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
    {CLI_OPT_CUSTOM, "max-duration", .metavar = "S", SM(max_duration), .handler = parse_positive,
     .flags = CLI_BATCH_ONLY | CLI_SHARED,
     .help = "padded seconds per batch (default 200 here when neither\n"
             "--max-duration nor --max-cuts is given)"},
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
             "                      bytes (see sharc bench --broadcast-only --help)\n"
             "\nOutput:\n"),
    {CLI_OPT_FLAG, "json", OWN(json), .min = 1, .help = "print one JSON object at the end (below)"},
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
        "  sharc bench --floor --threads 1 --max-duration 200 --seconds 10 data/shar\n"
        "  sharc bench --cuts --floor --json data/wds\n"
        "  sharc bench --features fbank --device cuda:0 --max-duration 600 data/shar\n"
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

/* ---- memory and CPU ---- */

static double process_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/*
 * Writing 5 to /proc/self/clear_refs resets the peak RSS (VmHWM) to the current RSS (Linux
 * >= 4.0), so that each loader run reports its own peak, not the floor's or a previous run's.
 * Returns 1 when the reset worked.
 */
static int reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f == NULL)
        return 0;
    int ok = fputs("5", f) >= 0;
    ok &= fclose(f) == 0;
    return ok;
}

/* VmHWM from /proc/self/status, else the process's ru_maxrss; bytes. */
static uint64_t peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f != NULL) {
        char line[256];
        unsigned long long kib = 0;
        int found = 0;
        while (!found && fgets(line, sizeof line, f) != NULL)
            found = sscanf(line, "VmHWM: %llu kB", &kib) == 1;
        fclose(f);
        if (found)
            return (uint64_t)kib * 1024;
    }
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}

/* CPU seconds of thread `tid` of this process: from schedstat (nanoseconds), else from
 * stat (clock ticks); -1 when it is gone or /proc cannot tell. */
static double task_cpu_seconds(const char *tid)
{
    char path[300], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", tid);
    FILE *f = fopen(path, "r");
    unsigned long long ns;
    if (f != NULL) {
        int ok = fscanf(f, "%llu", &ns) == 1;
        fclose(f);
        if (ok)
            return (double)ns * 1e-9;
    }
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    const char *end = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    fclose(f);
    unsigned long long utime, stime;
    /* After the name: state, then 10 fields up to utime and stime (proc(5)). */
    if (end == NULL || sscanf(end + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                              &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds so far of this process's threads, by role; 0 for all when /proc cannot tell. */
static void role_cpu_seconds(double out[N_ROLES])
{
    for (int k = 0; k < N_ROLES; k++)
        out[k] = 0;
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* the thread ended */
        if (fgets(comm, sizeof comm, f) == NULL)
            comm[0] = 0;
        fclose(f);
        double cpu = task_cpu_seconds(e->d_name);
        if (cpu < 0)
            continue;
        int role = strncmp(comm, "sharc-planner", 13) == 0  ? ROLE_PLANNER
                   : strncmp(comm, "sharc-decode", 12) == 0 ? ROLE_DECODE
                   : strncmp(comm, "sharc-lane", 10) == 0   ? ROLE_READ_AHEAD
                                                            : ROLE_OTHER;
        out[role] += cpu;
    }
    closedir(d);
}

/* ---- the loader runs ---- */

typedef struct window {
    double t0, cpu0;
    double stage0[N_STAGES];
    double role0[N_ROLES];
    double net0[3]; /* bytes, retries, wait seconds */
    sharc_device_stats dev0;
    double cpu_feat0; /* the decode threads' feature seconds at the start */
    int open;         /* the window has started */
} window;

static void window_start(window *w, sharc_reader *r, double t0)
{
    sharc_reader_stats st = {0};
    if (r != NULL) /* NULL on a peer of a broadcast group: it reads nothing */
        sharc_reader_get_stats(r, &st);
    w->t0 = t0;
    w->cpu0 = process_cpu_seconds();
    role_cpu_seconds(w->role0);
    memcpy(w->stage0, st.stage_seconds, sizeof w->stage0);
    w->net0[0] = (double)st.net_bytes;
    w->net0[1] = st.net_retries;
    w->net0[2] = st.net_wait_seconds;
    w->cpu_feat0 = st.feature_seconds;
    sharc_reader_get_device_stats(r, &w->dev0);
    w->open = 1;
}

static void window_end(const window *w, sharc_reader *r, run_result *res)
{
    sharc_reader_stats st = {0};
    if (r != NULL)
        sharc_reader_get_stats(r, &st);
    res->wall = cli_now() - w->t0;
    res->cpu = process_cpu_seconds() - w->cpu0;
    for (int k = 0; k < N_STAGES; k++)
        res->stage[k] = st.stage_seconds[k] - w->stage0[k];
    res->net_bytes = (double)st.net_bytes - w->net0[0];
    res->net_retries = st.net_retries - w->net0[1];
    res->net_wait = st.net_wait_seconds - w->net0[2];
    res->cpu_feat_seconds = st.feature_seconds - w->cpu_feat0;
    sharc_device_stats ds;
    sharc_reader_get_device_stats(r, &ds);
    res->dev_batches = (double)(ds.batches - w->dev0.batches);
    res->dev_seconds = ds.seconds - w->dev0.seconds;
    res->feat_seconds = ds.feature_seconds - w->dev0.feature_seconds;
    res->feat_bytes = (double)(ds.feature_read_bytes + ds.feature_write_bytes -
                               w->dev0.feature_read_bytes - w->dev0.feature_write_bytes);
    double role[N_ROLES];
    role_cpu_seconds(role);
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
static char *sources_text, *sources_json;

static void keep_sources(const sharc_reader *r)
{
    if (r == NULL || sharc_reader_num_sources(r) == 0)
        return;
    size_t len;
    free(sources_text);
    free(sources_json);
    sources_text = sources_json = NULL;
    FILE *f = open_memstream(&sources_text, &len);
    if (f) {
        cli_print_sources_text(f, r);
        fclose(f);
    }
    f = open_memstream(&sources_json, &len);
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
/* CPU microseconds per cut of each role's threads. */
static double (*const role_getters[N_ROLES])(const run_result *) = {get_role0, get_role1, get_role2,
                                                                    get_role3};

typedef struct report {
    const bench_opts *o;
    const sharc_reader_settings *s;
    const run_result *runs, *floors;
    size_t n_tars;      /* tar files the floor reads */
    int peak_scope_run; /* the peak was reset before each run */
    double copy_bw;     /* --device cuda: the device's copy bandwidth, bytes/s (NAN: none) */
} report;

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

static void print_json(const report *rp)
{
    const bench_opts *o = rp->o;
    const run_result *runs = rp->runs;
    int n = o->repeat, batches = !o->cuts_mode;
    FILE *f = stdout;
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
        cli_json_key(f, stage_names[k], k == 0);
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
    cli_json_key(f, "cpu_us_per_cut", 0);
    fputc('{', f);
    for (int k = 0; k < N_ROLES; k++) {
        cli_json_key(f, role_names[k], k == 0);
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
    if (sources_json)
        fputs(sources_json, f);
    fputs("}\n", f);
}

static void print_text(const report *rp)
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
    if (!o->cuts_mode) {
        printf("  stages (s)     ");
        for (int k = 0; k < N_STAGES; k++)
            printf(" %s %.3f", stage_names[k], median_of(runs, n, stage_getters[k]));
        printf("\n");
        if (rp->s->features != SHARC_FEATURES_NONE && rp->s->device != SHARC_DEVICE_CUDA)
            printf("  features       %10.3f ms per batch in the decode threads\n",
                   median_of(runs, n, get_cpu_feat_ms));
        printf("  CPU per cut (us)");
        for (int k = 0; k < N_ROLES; k++)
            printf(" %s %.1f", role_names[k], median_of(runs, n, role_getters[k]));
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
    if (sources_text)
        fputs(sources_text, stdout);
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
        *scope_run &= reset_peak_rss();
        int rc = run_loader(s, o, i, &p, &runs[i]);
        runs[i].peak_rss = peak_rss_bytes();
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
        print_json(&rp);
    else
        print_text(&rp);
    status = cli_finish_output(cmd, CLI_EXIT_OK);
done:
    if (status == CLI_EXIT_FAIL && o.json && !reported) /* the one object scripts wait for */
        cli_print_json_failure(stdout, dist_json, &o.dist);
    free(runs);
    free(floors);
    bench_floor_free_shards(shards, n_shards);
    free(o.bins);
    cli_reader_opts_free(&o.ro);
    free(sources_text);
    free(sources_json);
    cli_dist_close(&o.dist);
    return status;
}

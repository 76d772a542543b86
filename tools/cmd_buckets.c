/*
 * sharc buckets: estimate duration bucket boundaries from a dataset's metadata, as
 * Lhotse's estimate_duration_buckets (and NeMo's estimate_duration_bins.py) would.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "buckets_2d.h"
#include "cli_reader_opts.h"

static const char *const cmd = "buckets";

typedef struct buckets_opts {
    int num_buckets;
    int num_subbuckets;       /* with --tokenizer: 2D bins */
    double outlier_threshold; /* --token-outlier-threshold */
    uint64_t num_cuts;        /* 0 = all */
    double min_duration, max_duration;
    int json, quiet;
    cli_reader_opts ro; /* --tokenizer's list */
} buckets_opts;

/* --min-duration and --max-cut-duration filter the cuts whose durations are estimated, as
 * the reader's options of the same names filter the cuts it reads. */
static int parse_seconds(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    (void)p;
    char *end;
    double v = strtod(val, &end);
    if (end == val || *end || !isfinite(v) || v < 0)
        return cli_usage_error(cmd, "--%s wants seconds >= 0, not '%s'", o->name, val), -1;
    *(double *)target = v;
    return 0;
}

#define OWN(field) .target = CLI_T_CMD, .offset = offsetof(buckets_opts, field)

static const cli_opt options[] = {
    {CLI_OPT_INT, "num-buckets", .metavar = "K", OWN(num_buckets), .min = 2, .max = 65536,
     .help = "buckets wanted, 2 <= K (default 30, as NeMo)"},
    {CLI_OPT_U64, "num-cuts", .metavar = "N", OWN(num_cuts),
     .help = "use only the first N cuts in the dataset's shard order, as Lhotse's\n"
             "num_cuts_for_bins_estimate (default 0: all cuts)"},
    {CLI_OPT_CUSTOM, "min-duration", .metavar = "S", OWN(min_duration), .handler = parse_seconds,
     .help = "ignore cuts shorter than S seconds (default 0)"},
    {CLI_OPT_CUSTOM, "max-cut-duration", .metavar = "S", OWN(max_duration),
     .handler = parse_seconds, .help = "ignore cuts longer than S seconds (default 0: no limit)"},
    {CLI_OPT_CUSTOM, "max-duration", .metavar = "S", OWN(max_duration), .handler = parse_seconds,
     .help = "deprecated: --max-cut-duration", .replaced_by = "max-cut-duration"},
    CLI_USE(cli_reader_group, "tokenizer",
            "a SentencePiece model, or LANG=M once per language: estimate\n"
            "NeMo's 2D bins of [duration, tokens] and each bin's max_tps\n"
            "(estimate_duration_bins_2d.py; see below) (default: 1D bins)"),
    {CLI_OPT_INT, "num-subbuckets", .metavar = "K", OWN(num_subbuckets), .min = 1, .max = 65536,
     .help = "with --tokenizer: token sub-buckets per duration bucket\n"
             "(default 2, as NeMo)",
     .needs = "tokenizer"},
    {CLI_OPT_DOUBLE, "token-outlier-threshold", .metavar = "Z", OWN(outlier_threshold),
     .dmin = -1e9, .dmax = 1e9,
     .help = "with --tokenizer: cuts whose tokens per second are more than Z\n"
             "standard deviations above their bucket's mean are left out of\n"
             "its sub-buckets (default 4, as NeMo)",
     .needs = "tokenizer"},
    CLI_USE(cli_reader_group, "layout", "shard layout: auto, shar, nemo or wds (default auto)"),
    CLI_USE(cli_reader_group, "retries", NULL),
    CLI_USE(cli_reader_group, "timeout-ms", NULL),
    CLI_USE(cli_reader_group, "input-cfg",
            "estimate over the mixture a NeMo input_cfg file lists (YAML or\n"
            "JSON) instead of PATH: the first --num-cuts cuts its weights\n"
            "draw (default 10000 there)"),
    {CLI_OPT_FLAG, "json", OWN(json), .min = 1,
     .help = "print one JSON object instead of text (see below)"},
    {CLI_OPT_FLAG, "quiet", OWN(quiet), .min = 1, .help = "print only the bins"},
    CLI_HELP_OPT,
    CLI_END,
};

#undef OWN

static void print_help(void)
{
    printf("Usage: sharc buckets [options] PATH...\n"
           "\n"
           "Estimate duration bucket boundaries (bins) from the cuts' metadata, without\n"
           "decoding audio: sort the durations and start a new bucket each time the running\n"
           "total passes total/num_buckets. Given the same cuts and --num-buckets, the bins\n"
           "equal Lhotse's estimate_duration_buckets (NeMo's estimate_duration_bins.py), so\n"
           "they can be passed to `sharc read --bins` or to Lhotse/NeMo as duration_bins.\n"
           "A cut of duration d belongs to the first bucket whose bin is >= d; the last\n"
           "bucket holds the cuts longer than every bin. Repeated bins are possible.\n"
           "\n"
           "PATH is a dataset directory, a shard file, a brace or a wildcard pattern, as for\n"
           "'sharc read'; several may be given.\n"
           "\n"
           "Options:\n");
    cli_opts_print(stdout, options);
    printf("\n"
           "Text output: the bins on one line (comma-separated, ready for a config), then one\n"
           "line per bucket with its range, cuts, seconds, a histogram bar, and the padding\n"
           "it would cost if every batch were padded to the bucket's longest cut.\n"
           "\n"
           "JSON output: {\"bins\":[...],\"counts\":[...],\"seconds\":[...],\"min\":[...],\n"
           "  \"max\":[...],\"padding_seconds\":[...],\"padding_ratio\":[...],\"cuts\",\n"
           "  \"total_seconds\",\"ignored_cuts\",\"num_buckets\"}, one entry per bucket\n"
           "(len(bins) + 1 of them); padding_ratio = padding / (cuts * longest); min and max\n"
           "are null for an empty bucket. A run that fails prints {\"error\"} with why.\n"
           "\n"
           "With --tokenizer, the bins are NeMo's 2D bins, as its\n"
           "estimate_duration_bins_2d.py computes them: --num-buckets buckets of equal total\n"
           "duration, each split into --num-subbuckets sub-buckets of equal total tokens\n"
           "(buckets of one duration merged, with their sub-buckets), the cuts whose tokens\n"
           "per second are outliers left out of the split, and each bucket's largest\n"
           "remaining tokens per second as its max_tps; --max-cut-duration, when given, is the\n"
           "last bucket's duration. Text output: the script's lines (bucket_duration_bins and\n"
           "max_tps, ready for a config); --json: {\"bucket_duration_bins\":[[d,t],...],\n"
           "\"max_tps\":[...],\"cuts\",\"ignored_cuts\",\"num_buckets\"}.\n"
           "\n"
           "Exit status: 0 success, 1 read error or too few cuts, 2 usage error.\n"
           "\n"
           "Example:\n"
           "  sharc buckets --num-buckets 30 --max-cut-duration 40 data/shar\n");
}

static int parse_args(int argc, char **argv, sharc_reader_settings *s, buckets_opts *o)
{
    cli_parser p = {.cmd = cmd,
                    .table = options,
                    .print_help = print_help,
                    .own = o,
                    .reader = s,
                    .ro = &o->ro,
                    .argc = argc,
                    .argv = argv};
    int status = cli_opts_parse(&p);
    if (status >= 0)
        return status;
    status = cli_take_paths(cmd, argc, argv, s);
    /* A mixture repeats without end: its estimate reads the cuts its weights draw, as
     * many as Lhotse's num_cuts_for_bins_estimate. */
    if (status < 0 && s->input_cfg && o->num_cuts == 0)
        o->num_cuts = 10000;
    if (status < 0 && o->max_duration > 0 && o->max_duration < o->min_duration)
        return cli_usage_error(cmd, "--max-cut-duration is below --min-duration");
    return status;
}

/* Every failure is recorded for the {"error"} object --json ends with (cli_fail). */
#define fail_with(...) cli_fail("buckets", __VA_ARGS__)

/* Durations of the cuts kept by the filters, in sorted shard order. Returns 0, or 1 after
 * saying why (a read error or out of memory). */
static int collect(sharc_reader *r, const buckets_opts *o, double **out, uint32_t **tokens,
                   size_t *n, uint64_t *ignored)
{
    size_t cap = 1024;
    double *d = malloc(cap * sizeof *d);
    uint32_t *t = tokens ? malloc(cap * sizeof *t) : NULL;
    if (tokens && !t) {
        free(d);
        d = NULL;
    }
    const sharc_cut *c;
    int rc = 0;
    *n = 0;
    *ignored = 0;
    while (d && (o->num_cuts == 0 || *n < o->num_cuts) && (rc = sharc_reader_next(r, &c)) == 0) {
        if (c->duration < o->min_duration ||
            (o->max_duration > 0 && c->duration > o->max_duration)) {
            (*ignored)++;
            continue;
        }
        if (*n == cap) {
            double *bigger = realloc(d, 2 * cap * sizeof *d);
            uint32_t *more = tokens && bigger ? realloc(t, 2 * cap * sizeof *t) : t;
            if (!bigger || (tokens && !more)) {
                free(bigger ? bigger : d);
                d = NULL;
                break;
            }
            d = bigger;
            t = more;
            cap *= 2;
        }
        if (tokens) {
            const int32_t *ids;
            size_t n_ids = 0;
            (void)sharc_reader_cut_tokens(r, &ids, &n_ids);
            t[*n] = (uint32_t)n_ids;
        }
        d[(*n)++] = c->duration;
    }
    if (!d)
        free(t);
    if (!d) {
        fail_with("out of memory after %zu cuts", *n);
        return 1;
    }
    if (rc < 0) {
        snprintf(cli_failure_buf(), CLI_FAILURE_BYTES, "%s", sharc_reader_last_error(r));
        cli_report_error("buckets", "", cli_failure_buf());
        free(d);
        free(t);
        return 1;
    }
    *out = d;
    if (tokens)
        *tokens = t;
    return 0;
}

typedef struct bucket_stats {
    uint64_t count;
    double seconds, min, max;
} bucket_stats;

static size_t bucket_of(const double *bins, size_t n_bins, double d)
{
    size_t lo = 0, hi = n_bins;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (bins[mid] < d)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static double padding_of(const bucket_stats *b)
{
    return b->count ? (double)b->count * b->max - b->seconds : 0.0;
}

static void json_array(const char *key, const bucket_stats *b, size_t nb, int what)
{
    cli_json_key(stdout, key, 0);
    putchar('[');
    for (size_t i = 0; i < nb; i++) {
        if (i)
            putchar(',');
        double pad = padding_of(&b[i]), full = (double)b[i].count * b[i].max;
        if (what == 0)
            printf("%" PRIu64, b[i].count);
        else if (what == 1)
            cli_json_num(stdout, b[i].seconds);
        else if (b[i].count == 0 && what < 4) /* min and max of no cut */
            fputs("null", stdout);
        else
            cli_json_num(stdout, what == 2   ? b[i].min
                                 : what == 3 ? b[i].max
                                 : what == 4 ? pad
                                             : (full > 0 ? pad / full : 0.0));
    }
    putchar(']');
}

static void print_json(const double *bins, size_t n_bins, const bucket_stats *b, size_t n,
                       double total, uint64_t ignored, int k)
{
    size_t nb = n_bins + 1;
    fputc('{', stdout);
    cli_json_key(stdout, "bins", 1);
    cli_json_nums(stdout, bins, n_bins);
    json_array("counts", b, nb, 0);
    json_array("seconds", b, nb, 1);
    json_array("min", b, nb, 2);
    json_array("max", b, nb, 3);
    json_array("padding_seconds", b, nb, 4);
    json_array("padding_ratio", b, nb, 5);
    printf(",\"cuts\":%zu", n);
    cli_json_key(stdout, "total_seconds", 0);
    cli_json_num(stdout, total);
    printf(",\"ignored_cuts\":%" PRIu64 ",\"num_buckets\":%d}\n", ignored, k);
}

static void print_text(const double *bins, size_t n_bins, const bucket_stats *b, size_t n,
                       double total, uint64_t ignored, int quiet)
{
    for (size_t i = 0; i < n_bins; i++) {
        /* As --json prints them: the shortest text that reads back as the same double. */
        fputs(i ? "," : "", stdout);
        cli_json_num(stdout, bins[i]);
    }
    printf("\n");
    if (quiet)
        return;
    uint64_t most = 1;
    for (size_t i = 0; i <= n_bins; i++)
        most = b[i].count > most ? b[i].count : most;
    printf("%-4s %-21s %8s %12s %9s  %s\n", "#", "duration range (s)", "cuts", "seconds", "padding",
           "histogram");
    double pad_total = 0, full_total = 0;
    for (size_t i = 0; i <= n_bins; i++) {
        char range[64], bar[41];
        double lo = i ? bins[i - 1] : 0;
        if (i < n_bins)
            snprintf(range, sizeof range, "(%.3f, %.3f]", lo, bins[i]);
        else
            snprintf(range, sizeof range, "> %.3f", lo);
        size_t w = (size_t)((double)b[i].count * 40.0 / (double)most + 0.5);
        memset(bar, '#', w);
        bar[w] = 0;
        double pad = padding_of(&b[i]), full = (double)b[i].count * b[i].max;
        pad_total += pad;
        full_total += full;
        printf("%-4zu %-21s %8" PRIu64 " %12.3f %8.1f%%  %s\n", i, range, b[i].count, b[i].seconds,
               full > 0 ? 100.0 * pad / full : 0.0, bar);
    }
    printf("-- %zu cuts, %.3f s in %zu buckets (%" PRIu64 " ignored); padding to each "
           "bucket's longest cut: %.1f%%\n",
           n, total, n_bins + 1, ignored, full_total > 0 ? 100.0 * pad_total / full_total : 0.0);
}

int cmd_buckets(int argc, char **argv)
{
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    s.decode = 0;
    s.shuffle_shards = 0; /* sorted shard order: "the first N cuts" is well defined */
    s.epochs = 1;
    buckets_opts o = {.num_buckets = 30, .num_subbuckets = 2, .outlier_threshold = 4.0};
    int status = parse_args(argc, argv, &s, &o);
    if (status >= 0) {
        cli_reader_opts_free(&o.ro);
        return status;
    }
    cli_logger(&s.logger, o.quiet ? SHARC_LOG_ERROR : SHARC_LOG_WARN);

    status = CLI_EXIT_FAIL;
    sharc_reader *r = NULL;
    double *d = NULL, *bins = NULL;
    uint32_t *t = NULL; /* with --tokenizer: each cut's tokens */
    bucket_stats *b = NULL;
    size_t n = 0, n_bins = 0;
    uint64_t ignored = 0;
    int reported = 0;
    int rc = cli_open_reader("buckets", &s, &r);
    if (rc < 0) {
        cli_open_failure_text(cli_failure_buf(), CLI_FAILURE_BYTES, "dataset", rc);
        goto done;
    }
    rc = collect(r, &o, &d, s.n_tokenizer ? &t : NULL, &n, &ignored);
    sharc_reader_close(&r);
    if (rc != 0)
        goto done;
    if (n < (size_t)o.num_buckets) {
        char filtered[96] = "";
        if (ignored > 0)
            snprintf(filtered, sizeof filtered,
                     "; %" PRIu64 " more were outside --min-duration/--max-cut-duration", ignored);
        fail_with("%zu cuts are too few for %d buckets (Lhotse's estimation needs at least one "
                  "cut per bucket; a batch reader would use %zu buckets)%s",
                  n, o.num_buckets, n, filtered);
        goto done;
    }
    if (t) {
        status = cli_buckets_2d(d, t, n, ignored, o.num_buckets, o.num_subbuckets, o.max_duration,
                                o.outlier_threshold, o.json);
        reported = status == CLI_EXIT_OK;
        goto done;
    }
    bins = malloc((size_t)o.num_buckets * sizeof *bins);
    b = calloc((size_t)o.num_buckets + 1, sizeof *b);
    if (!bins || !b || sharc_estimate_duration_bins(d, n, o.num_buckets, bins, &n_bins) != 0) {
        fail_with("the estimation of the bins failed (out of memory)");
        goto done;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        bucket_stats *k = &b[bucket_of(bins, n_bins, d[i])];
        k->min = k->count == 0 || d[i] < k->min ? d[i] : k->min;
        k->max = d[i] > k->max ? d[i] : k->max;
        k->count++;
        k->seconds += d[i];
        total += d[i];
    }
    if (o.json)
        print_json(bins, n_bins, b, n, total, ignored, o.num_buckets);
    else
        print_text(bins, n_bins, b, n, total, ignored, o.quiet);
    reported = 1; /* a failure after this is only stdout's */
    status = cli_finish_output(cmd, CLI_EXIT_OK);
done:
    if (status == CLI_EXIT_FAIL && o.json && !reported) /* the one object scripts wait for */
        cli_print_json_failure(stdout, NULL, NULL);
    free(bins);
    free(b);
    free(d);
    free(t);
    cli_reader_opts_free(&o.ro);
    return status;
}

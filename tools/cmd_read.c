/*
 * sharc read: stream cuts as a training job would and print one line per cut.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *const cmd = "read";

typedef struct read_opts {
    int json;
    int quiet;
    int verbose;
    uint64_t limit; /* 0 = no limit */
} read_opts;

static void print_help(void)
{
    printf(
        "Usage: sharc read [options] PATH...\n"
        "\n"
        "Stream the cuts of a dataset as a training job would: shards in a seeded order per\n"
        "epoch, split across data-parallel slots, audio decoded to float samples. Prints one\n"
        "line per cut and a summary.\n"
        "\n"
        "PATH is a dataset directory, a shard file or a brace pattern\n"
        "(audio_{0..7}.tar, audio__OP_0..7_CL_.tar); several may be given.\n"
        "\n"
        "Options:\n"
        "  --layout L          shard layout: auto, shar, nemo or wds (default auto: detect)\n"
        "  --epochs N          epochs to read; 0 reads forever (default 1)\n"
        "  --seed S            shard order seed; epoch e uses S + e (default 0)\n"
        "  --no-shuffle        keep the sorted shard order (default: permute each epoch)\n"
        "  --dp-rank R         this data-parallel slot, 0 <= R < N (default 0)\n"
        "  --dp-size N         number of data-parallel slots; shard i of the epoch's order\n"
        "                      goes to slot i %% N (default 1)\n"
        "  --on-error P        fail: stop at the first bad cut or shard (default);\n"
        "                      skip: skip it, count it by reason and go on\n"
        "  --sampling-rate HZ  require this sampling rate; a cut at another rate is an error\n"
        "                      (no resampling) (default: any)\n"
        "  --channel K         keep only channel K (0-based) of the stored audio\n"
        "                      (default: all channels)\n"
        "  --no-decode         do not decode audio (faster; sample_sum is null)\n"
        "  --limit N           stop after N cuts (default: no limit)\n"
        "  --json              print JSON Lines instead of text (see below)\n"
        "  --quiet             print only the summary; library warnings are not shown\n"
        "  --verbose           also show the library's informational messages\n"
        "  -h, --help          show this help\n"
        "\n"
        "Text output: one line per cut with id, duration, sampling rate, channels, samples,\n"
        "shard:member and the start of the text, then a summary (cuts, audio seconds, shards,\n"
        "skipped cuts and shards by reason, wall time, audio seconds per second).\n"
        "\n"
        "JSON output: one object per cut\n"
        "  {\"type\":\"cut\",\"id\",\"duration\",\"sampling_rate\",\"channels\",\"num_samples\",\n"
        "   \"shard\",\"member\",\"text\",\"speaker\",\"language\",\"epoch\",\"sample_sum\"}\n"
        "where sample_sum is the sum of all decoded samples (all channels, as float32\n"
        "in [-1, 1], summed in double), and a last object\n"
        "  "
        "{\"type\":\"summary\",\"layout\",\"cuts\",\"audio_seconds\",\"shards\",\"skipped_cuts\",\n"
        "   \"skipped_shards\",\"problems\":{<problem code>:count,...},\"wall_seconds\",\n"
        "   \"audio_seconds_per_second\",\"error\"}\n"
        "where error is null or the reader's error message.\n"
        "\n"
        "Exit status: 0 success, 1 read error (the reader's message is printed on stderr),\n"
        "2 usage error.\n"
        "\n"
        "Example:\n"
        "  sharc read --json --epochs 2 --seed 7 --dp-rank 0 --dp-size 4 data/shar\n");
}

/* Copy at most `max_chars` UTF-8 characters of s into buf, with "..." when shortened. */
static const char *shorten(char *buf, size_t n, const char *s, size_t max_chars)
{
    if (s == NULL)
        return "";
    size_t i = 0, chars = 0;
    while (s[i] && chars < max_chars && i + 4 < n - 4) {
        i++;
        while ((s[i] & 0xC0) == 0x80) /* continuation bytes of the same character */
            i++;
        chars++;
    }
    memcpy(buf, s, i);
    if (s[i])
        memcpy(buf + i, "...", 4);
    else
        buf[i] = '\0';
    /* Newlines and tabs would break the one-line-per-cut format. */
    for (char *p = buf; *p; p++) {
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    }
    return buf;
}

static const char *basename_of(const char *path)
{
    if (path == NULL)
        return "?";
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void print_cut_json(const sharc_cut *c)
{
    FILE *f = stdout;
    fputc('{', f);
    cli_json_key(f, "type", 1);
    cli_json_str(f, "cut");
    cli_json_key(f, "id", 0);
    cli_json_str(f, c->id);
    cli_json_key(f, "duration", 0);
    cli_json_num(f, c->duration);
    fprintf(f, ",\"sampling_rate\":%d,\"channels\":%d,\"num_samples\":%" PRId64, c->sampling_rate,
            c->channels, c->num_samples);
    cli_json_key(f, "shard", 0);
    cli_json_str(f, c->shard);
    cli_json_key(f, "member", 0);
    cli_json_str(f, c->member);
    cli_json_key(f, "text", 0);
    cli_json_str(f, c->text);
    cli_json_key(f, "speaker", 0);
    cli_json_str(f, c->speaker);
    cli_json_key(f, "language", 0);
    cli_json_str(f, c->language);
    fprintf(f, ",\"epoch\":%" PRIu64, c->epoch);
    cli_json_key(f, "sample_sum", 0);
    if (c->samples != NULL) {
        cli_sample_stats st;
        cli_sample_stats_compute(c->samples, (size_t)c->num_samples * (size_t)c->channels, &st);
        cli_json_num(f, st.sum);
    } else {
        fputs("null", f);
    }
    fputs("}\n", f);
}

static void print_cut_text(const sharc_cut *c)
{
    char text[256];
    printf("%-32s %8.3fs %6dHz %dch %10" PRId64 "  %s:%s  %s\n", c->id ? c->id : "?", c->duration,
           c->sampling_rate, c->channels, c->num_samples, basename_of(c->shard),
           c->member ? c->member : "?", shorten(text, sizeof text, c->text, 60));
}

static void print_summary_json(const sharc_reader *r, const sharc_reader_stats *st, double wall,
                               const char *error)
{
    FILE *f = stdout;
    fputc('{', f);
    cli_json_key(f, "type", 1);
    cli_json_str(f, "summary");
    cli_json_key(f, "layout", 0);
    cli_json_str(f, cli_layout_name(sharc_reader_layout(r)));
    fprintf(f, ",\"cuts\":%" PRIu64, st->cuts);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, st->audio_seconds);
    fprintf(f, ",\"shards\":%" PRIu64 ",\"skipped_cuts\":%" PRIu64 ",\"skipped_shards\":%" PRIu64,
            st->shards, st->skipped_cuts, st->skipped_shards);
    cli_json_key(f, "problems", 0);
    fputc('{', f);
    for (int k = 0; k < SHARC_PROBLEM_COUNT; k++) {
        cli_json_key(f, sharc_problem_name((sharc_problem)k), k == 0);
        fprintf(f, "%" PRIu64, st->problems[k]);
    }
    fputc('}', f);
    cli_json_key(f, "wall_seconds", 0);
    cli_json_num(f, wall);
    cli_json_key(f, "audio_seconds_per_second", 0);
    cli_json_num(f, wall > 0 ? st->audio_seconds / wall : 0.0);
    cli_json_key(f, "error", 0);
    cli_json_str(f, error);
    fputs("}\n", f);
}

static void print_summary_text(const sharc_reader *r, const sharc_reader_stats *st, double wall)
{
    char a[32], b[32];
    printf("-- %" PRIu64 " cuts, %.3f s of audio (%s), %" PRIu64 " shards opened, layout %s\n",
           st->cuts, st->audio_seconds, cli_fmt_duration(a, sizeof a, st->audio_seconds),
           st->shards, cli_layout_name(sharc_reader_layout(r)));
    printf("-- skipped: %" PRIu64 " cuts, %" PRIu64 " shards", st->skipped_cuts,
           st->skipped_shards);
    for (int k = 0; k < SHARC_PROBLEM_COUNT; k++) {
        if (st->problems[k] > 0)
            printf(", %s %" PRIu64, sharc_problem_name((sharc_problem)k), st->problems[k]);
    }
    printf("\n-- wall time %s, %s cuts/s, %.1f s of audio per second\n",
           cli_fmt_duration(a, sizeof a, wall),
           cli_fmt_count(b, sizeof b, wall > 0 ? (double)st->cuts / wall : 0.0),
           wall > 0 ? st->audio_seconds / wall : 0.0);
}

enum {
    OPT_LAYOUT = 256,
    OPT_EPOCHS,
    OPT_SEED,
    OPT_NO_SHUFFLE,
    OPT_DP_RANK,
    OPT_DP_SIZE,
    OPT_ON_ERROR,
    OPT_RATE,
    OPT_CHANNEL,
    OPT_NO_DECODE,
    OPT_LIMIT,
    OPT_JSON,
    OPT_QUIET,
    OPT_VERBOSE,
};

static const struct option long_opts[] = {
    {"layout", required_argument, NULL, OPT_LAYOUT},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
    {"dp-rank", required_argument, NULL, OPT_DP_RANK},
    {"dp-size", required_argument, NULL, OPT_DP_SIZE},
    {"on-error", required_argument, NULL, OPT_ON_ERROR},
    {"sampling-rate", required_argument, NULL, OPT_RATE},
    {"channel", required_argument, NULL, OPT_CHANNEL},
    {"no-decode", no_argument, NULL, OPT_NO_DECODE},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"verbose", no_argument, NULL, OPT_VERBOSE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Parse argv into settings and options. Returns -1 to continue, else an exit status. */
static int parse_args(int argc, char **argv, sharc_reader_settings *s, read_opts *o)
{
    int opt;
    while ((opt = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        int bad = 0;
        switch (opt) {
        case 'h':
            print_help();
            return CLI_EXIT_OK;
        case OPT_LAYOUT:
            bad = cli_parse_layout(cmd, optarg, &s->layout);
            break;
        case OPT_EPOCHS:
            bad = cli_parse_u64(cmd, "--epochs", optarg, &s->epochs);
            break;
        case OPT_SEED:
            bad = cli_parse_u64(cmd, "--seed", optarg, &s->seed);
            break;
        case OPT_NO_SHUFFLE:
            s->shuffle_shards = 0;
            break;
        case OPT_DP_RANK:
            bad = cli_parse_int(cmd, "--dp-rank", optarg, 0, 1 << 20, &s->dp_rank);
            break;
        case OPT_DP_SIZE:
            bad = cli_parse_int(cmd, "--dp-size", optarg, 1, 1 << 20, &s->dp_size);
            break;
        case OPT_ON_ERROR:
            bad = cli_parse_on_error(cmd, optarg, &s->on_error);
            break;
        case OPT_RATE:
            bad = cli_parse_int(cmd, "--sampling-rate", optarg, 1, 1 << 24, &s->sampling_rate);
            break;
        case OPT_CHANNEL:
            bad = cli_parse_int(cmd, "--channel", optarg, 0, 1 << 16, &s->channel);
            break;
        case OPT_NO_DECODE:
            s->decode = 0;
            break;
        case OPT_LIMIT:
            bad = cli_parse_u64(cmd, "--limit", optarg, &o->limit);
            if (!bad && o->limit == 0)
                return cli_usage_error(cmd, "--limit must be at least 1");
            break;
        case OPT_JSON:
            o->json = 1;
            break;
        case OPT_QUIET:
            o->quiet = 1;
            break;
        case OPT_VERBOSE:
            o->verbose = 1;
            break;
        default: /* getopt_long printed the reason */
            return cli_usage_error(cmd, "invalid option");
        }
        if (bad)
            return CLI_EXIT_USAGE;
    }
    if (optind >= argc)
        return cli_usage_error(cmd, "no PATH given");
    if (s->dp_rank >= s->dp_size)
        return cli_usage_error(cmd, "--dp-rank %d must be less than --dp-size %d", s->dp_rank,
                               s->dp_size);
    s->paths = (const char *const *)(argv + optind);
    s->n_paths = (size_t)(argc - optind);
    return -1;
}

int cmd_read(int argc, char **argv)
{
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    read_opts o = {0};
    int status = parse_args(argc, argv, &s, &o);
    if (status >= 0)
        return status;
    cli_logger(&s.logger,
               o.quiet ? SHARC_LOG_ERROR : (o.verbose ? SHARC_LOG_INFO : SHARC_LOG_WARN));

    double t0 = cli_now();
    sharc_reader *r = NULL;
    int rc = sharc_reader_open(&r, &s);
    if (rc < 0) {
        char why[1024];
        cli_last_logged_error(why, sizeof why);
        fprintf(stderr, "sharc read: cannot open the dataset: %s%s%s\n", sharc_strerror(rc),
                why[0] ? ": " : "", why);
        return CLI_EXIT_FAIL;
    }

    uint64_t n = 0;
    const sharc_cut *c = NULL;
    while (o.limit == 0 || n < o.limit) {
        rc = sharc_reader_next(r, &c);
        if (rc != 0)
            break;
        n++;
        if (o.json)
            print_cut_json(c);
        else if (!o.quiet)
            print_cut_text(c);
    }
    double wall = cli_now() - t0;
    const char *error = rc < 0 ? sharc_reader_last_error(r) : NULL;
    if (error != NULL && error[0] == '\0')
        error = sharc_strerror(rc);

    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    if (o.json)
        print_summary_json(r, &st, wall, error);
    else
        print_summary_text(r, &st, wall);
    fflush(stdout);
    /* The library has usually logged the error already; say it once more only if not. */
    char logged[1024];
    if (error != NULL && strcmp(cli_last_logged_error(logged, sizeof logged), error) != 0)
        fprintf(stderr, "sharc read: error: %s\n", error);
    sharc_reader_close(&r);
    return cli_finish_output(cmd, rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK);
}

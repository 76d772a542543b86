/*
 * sharc read: stream a dataset as a training job would and print what it yields: padded,
 * duration-bucketed batches (the default) or, with --cuts, single cuts.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "cli.h"
#include "cli_loader.h"
#include "cli_resume.h"
#include "cli_opts.h"
#include "cli_reader_opts.h"
#include "npy.h"

static const char *const cmd = "read";

/* Padded seconds per batch when no batch size is given: a typical single-GPU ASR batch. */
#define DEFAULT_MAX_DURATION 600.0
#define MAX_SAVES            16
/* A state holds the buffered cuts as 8-byte locators plus the sampler: far below this. */
/* Ids shown per batch in the text output. */
#define TEXT_IDS 3

typedef struct save_point {
    uint64_t step;
    const char *file;
    int done;
} save_point;

typedef struct read_opts {
    int cuts_mode; /* --cuts */
    int json;
    int quiet;
    int verbose;
    uint64_t limit; /* cuts with --cuts, else batches; 0 = no limit */
    const char *dump_dir;
    const char *resume_file;
    const char *resume_base; /* --resume as given, before FILE.dp<k> */
    save_point saves[MAX_SAVES];
    size_t n_saves;
    const char *batch_only; /* the first option given that only batches use */
    const char *cuts_only;  /* the first option given that only --cuts uses */
    cli_reader_opts ro;     /* --bins, --bucket-batch-size */
    void *state;            /* the --resume blob */
    size_t state_size;
    cli_dist dist;                   /* --transport, --mesh */
    char *slot_names[MAX_SAVES + 2]; /* file names made for this slot (name_files_by_slot) */
    size_t n_slot_names;
    cli_inputs inputs; /* the files the run reads, which no output may replace */
} read_opts;

/* --save-state-at STEP FILE: getopt gives STEP; FILE is the next argument. */
static int parse_save_point(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    read_opts *o = p->own;
    const int argc = p->argc;
    char **argv = p->argv;
    if (o->n_saves == MAX_SAVES) {
        cli_usage_error(cmd, "--save-state-at may be given at most %d times", MAX_SAVES);
        return -1;
    }
    save_point *sp = &o->saves[o->n_saves];
    if (cli_parse_u64(cmd, "--save-state-at", val, &sp->step) < 0)
        return -1;
    if (optind >= argc || argv[optind][0] == '\0') {
        cli_usage_error(cmd, "--save-state-at needs a STEP and a FILE");
        return -1;
    }
    if (argv[optind][0] == '-') {
        /* Most likely the next option, not a file: write ./-name for such a file. */
        cli_usage_error(cmd,
                        "--save-state-at %s needs a FILE after the step, not '%s' (a file "
                        "whose name starts with '-' is given as ./%s)",
                        val, argv[optind], argv[optind]);
        return -1;
    }
    sp->file = argv[optind++];
    sp->done = 0;
    for (size_t i = 0; i < o->n_saves; i++) { /* the later save would overwrite the earlier */
        if (o->saves[i].step == sp->step || cli_same_file(o->saves[i].file, sp->file)) {
            cli_usage_error(cmd,
                            "--save-state-at %" PRIu64 " %s: step %" PRIu64
                            " to %s is given already: each save needs a step and a file of its own",
                            sp->step, sp->file, o->saves[i].step, o->saves[i].file);
            return -1;
        }
    }
    o->n_saves++;
    return 0;
}

/* The help below spells these out. */
_Static_assert((int)DEFAULT_MAX_DURATION == 600, "--max-duration's help says 600");
_Static_assert(MAX_SAVES == 16, "--save-state-at's help says 16");

#define OWN(field) .target = CLI_T_CMD, .offset = offsetof(read_opts, field)
#define USE(name)  CLI_USE(cli_reader_group, name, NULL)

/* In the order --help lists them. The batching options are refused with --cuts
 * (CLI_BATCH_ONLY), --no-decode without it (CLI_CUTS_ONLY). */
static const cli_opt options[] = {
    CLI_TEXT("Reader (batches and --cuts):\n"),
    USE("layout"),
    USE("epochs"),
    USE("seed"),
    USE("shuffle-shards"),
    USE("no-shuffle-shards"),
    USE("dp-rank"),
    USE("dp-size"),
    USE("on-error"),
    USE("sampling-rate"),
    USE("channel"),
    USE("retries"),
    USE("timeout-ms"),
    {CLI_OPT_U64, "limit", .metavar = "N", OWN(limit), .min = 1,
     .help = "stop after N batches (N cuts with --cuts) (default: no limit)"},
    CLI_TEXT("\nBatching (see docs/sampler.md for the Lhotse and NeMo names of each):\n"),
    CLI_USE(cli_reader_group, "max-duration",
            "padded seconds per batch: cuts are taken from a bucket until\n"
            "the n taken so far, the longest lasting L, have (n+1) * L > S\n"
            "(Lhotse's rule) (default 600 when neither --max-cuts nor\n"
            "--bucket-batch-size is given, else none)"),
    USE("max-cuts"),
    USE("quadratic-duration"),
    USE("num-buckets"),
    USE("num-cuts-for-bins"),
    USE("bins"),
    USE("bucket-batch-size"),
    USE("buffer-size"),
    USE("max-buffer-bytes"),
    USE("shuffle"),
    USE("no-shuffle"),
    USE("drop-last"),
    USE("min-duration"),
    USE("max-cut-duration"),
    USE("threads"),
    USE("prefetch"),
    USE("read-ahead-bytes"),
    {CLI_OPT_CUSTOM, "save-state-at", .metavar = "STEP FILE", .handler = parse_save_point,
     .flags = CLI_BATCH_ONLY,
     .help = "after the batch of step STEP is returned, write the\n"
             "reader's state (sharc_reader_state_save) to FILE and go on;\n"
             "may be given up to 16 times, for different steps and files;\n"
             "with several data-parallel slots in one job (mpirun,\n"
             "RANK/WORLD_SIZE) each slot's source writes FILE.dp<slot>.\n"
             "FILE is written whole under a temporary name beside it, then\n"
             "renamed; it may not be a file the run reads (a shard, cuts\n"
             "file, manifest or the --resume state, or a link to one)\n"
             "(default: none)"},
    {CLI_OPT_STRING, "resume", .metavar = "FILE", OWN(resume_file), .flags = CLI_BATCH_ONLY,
     .help = "start from a state written by --save-state-at: the batches\n"
             "are those an uninterrupted run yields after that step; the\n"
             "data and the reader/batching options must be the same\n"
             "(--threads and --prefetch may differ); with several\n"
             "data-parallel slots each reads FILE.dp<slot>; states saved by\n"
             "another number of slots (FILE.dp0 ... FILE.dp<D-1>, or FILE of\n"
             "one) are all read by every slot, which takes its share of\n"
             "what they left (elastic resume) (default: start)"},
    {CLI_OPT_STRING, "dump-dir", .metavar = "DIR", OWN(dump_dir), .flags = CLI_BATCH_ONLY,
     .help = "also write every tensor of every batch to DIR (created if\n"
             "missing) as DIR/step<k>.<tensor>.npy (NumPy format 1.0),\n"
             "written by the source rank only; with several data-parallel\n"
             "slots as DIR/dp<slot>/step<k>.<tensor>.npy (default: none);\n"
             "each file is written whole or not at all, never over an input"},
    CLI_TEXT("\nFeatures (batches; see docs/features.md):\n"),
    USE("features"),
    USE("n-mels"),
    USE("fbank-sample-rate"),
    USE("fbank-window"),
    USE("fbank-hop"),
    USE("fbank-n-fft"),
    USE("fbank-pad-to"),
    USE("fbank-preemph"),
    USE("fbank-dither"),
    USE("no-keep-audio"),
    USE("device"),
    CLI_TEXT("\nCuts (--cuts):\n"),
    {CLI_OPT_FLAG, "cuts", OWN(cuts_mode), .min = 1,
     .help = "read single cuts (sharc_reader_next) instead of batches; the\n"
             "batching options are then refused"},
    {CLI_OPT_FLAG, "no-decode", .target = CLI_T_READER,
     .offset = offsetof(sharc_reader_settings, decode), .min = 0, .flags = CLI_CUTS_ONLY,
     .help = "do not decode audio (faster; sample_sum is null) (--cuts only)"},
    CLI_TEXT("\nMixing datasets (instead of PATH; see docs/mixing.md):\n"),
    USE("input-cfg"),
    USE("max-open-streams"),
    USE("mix-finite"),
    CLI_TEXT("\nDistributed (batches; see docs/training-loop.md):\n"),
    CLI_GROUP(cli_dist_group),
    CLI_GROUP(cli_even_group),
    CLI_TEXT("\nOutput:\n"),
    {CLI_OPT_FLAG, "json", OWN(json), .min = 1,
     .help = "print JSON Lines instead of text (see below)"},
    {CLI_OPT_FLAG, "quiet", OWN(quiet), .min = 1,
     .help = "print only the summary; library warnings are not shown"},
    {CLI_OPT_FLAG, "verbose", OWN(verbose), .min = 1,
     .help = "also show the library's informational messages"},
    CLI_HELP_OPT,
    CLI_END,
};

#undef OWN
#undef USE

static void print_help(void)
{
    printf("Usage: sharc read [options] PATH...\n"
           "\n"
           "Stream a dataset as a training job would: shards in a seeded order per epoch, split\n"
           "across data-parallel slots, cuts grouped into duration buckets (Lhotse's\n"
           "DynamicBucketingSampler), decoded and zero-padded into batches by worker threads.\n"
           "Prints one line per batch and a summary. With --cuts, reads single cuts instead.\n"
           "\n"
           "PATH is a dataset directory, a shard file, a brace pattern expanded as NeMo\n"
           "expands tarred_audio_filepaths (audio_{0..7}.tar, audio__OP_0..7_CL_.tar,\n"
           "{a,b}, {7..0}, {00..10..2}) or a quoted wildcard pattern ('shards/*.tar',\n"
           "matched in byte order); several may be given. Any of them may be remote:\n"
           "s3://bucket/key (a prefix ending in / is listed as a directory is),\n"
           "http(s)://host/path, or pipe:COMMAND (the command's standard output is the\n"
           "shard, its last word names it); braces expand over them too. S3 credentials\n"
           "and endpoint come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"
           "AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL (docs/storage.md).\n"
           "--input-cfg FILE reads the mixture of datasets a NeMo input_cfg lists instead\n"
           "(docs/mixing.md).\n"
           "\n");
    cli_opts_print(stdout, options);
    printf("\n"
           "Text output (batches): one line per batch with its step, epoch, number of cuts,\n"
           "frames T, audio and padded seconds and the first ids, then a summary.\n"
           "\n"
           "JSON output (batches): one object per batch\n"
           "  {\"type\":\"batch\",\"step\",\"epoch\",\"cuts\",\"ids\":[...],\"frames\","
           "\"audio_seconds\",\n"
           "   \"padded_seconds\",\"audio_crc32\",\"rank\",\"source\"}\n"
           "where frames is T of the [cuts, T] audio tensor, audio_seconds the sum of the cuts'\n"
           "durations, padded_seconds cuts * T / sampling rate (the rate given by\n"
           "--sampling-rate, else the one the lengths and durations imply) and audio_crc32 the\n"
           "CRC-32 (zlib) of the audio tensor's bytes (cuts * T little-endian float32, padding\n"
           "included), so that two runs can be compared bit for bit (0 when --no-keep-audio\n"
           "dropped the audio; T is then the longest row). Then a last object\n"
           "  {\"type\":\"summary\",\"layout\",\"batches\",\"first_step\",\"cuts\","
           "\"audio_seconds\",\n"
           "   \"padded_seconds\",\"wall_seconds\",\"audio_seconds_per_second\",\"saved_states\","
           "\"bins\",\n"
           "   \"reader\":{\"batches\",\"cuts\",\"audio_seconds\",\"padded_seconds\","
           "\"filtered_cuts\",\n"
           "   \"dropped_cuts\",\"shards\",\"skipped_cuts\",\"skipped_shards\",\"problems\":{...}},"
           "\"rank\",\n"
           "   \"source\",\"error\"} (layout null on a peer, which reads no shards)\n"
           "where the top-level counts are this run's printed batches, reader holds the\n"
           "library's cumulative counters as of the last batch read (they include what a\n"
           "resumed state had counted, and do not depend on --threads or --prefetch; zero on\n"
           "a peer),\n"
           "saved_states lists {\"step\",\"file\",\"bytes\"}, bins the duration bins the\n"
           "batches' buckets use (given, resumed or estimated; [] with one bucket, null on a\n"
           "peer or before a batch), rank is this process's rank,\n"
           "source says whether it read the batches (a peer received them from its group's\n"
           "source) and error is null or the error message.\n"
           "\n");
    printf(
        "JSON output (--cuts): one object per cut\n"
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
        "--dump-dir files: audio '<f4' [cuts, T], audio_lens '<i4' [cuts], duration '<f4'\n"
        "[cuts], and for each string column (cut_id, text, speaker, language)\n"
        "<column>_offsets '<i4' [cuts + 1] and <column>_bytes '|u1' [N]: string i is\n"
        "bytes[offsets[i]:offsets[i+1]] in UTF-8; with --features fbank, features '<f4'\n"
        "[cuts, n_mels, frames] and feature_lens '<i4' [cuts] (audio only without\n"
        "--no-keep-audio). numpy.load() reads them.\n"
        "\n"
        "Exit status: 0 success, 1 read error, unreadable or rejected --resume state, a\n"
        "--save-state-at step the run did not reach, or a file that could not be written (the\n"
        "message is printed on stderr), 2 usage error (an output that would replace an input\n"
        "included).\n"
        "\n"
        "Example:\n"
        "  sharc read --json --max-duration 200 --num-buckets 8 --threads 4 data/shar\n"
        "  mpirun -n 4 sharc read --transport mpi --mesh dp=2,cp=2 --json data/shar\n"
        "  sharc read --save-state-at 5 state.bin --limit 6 data/shar\n"
        "  sharc read --resume state.bin --dump-dir /tmp/batches --limit 5 data/shar\n"
        "  sharc read --cuts --json --epochs 2 --seed 7 --dp-rank 0 --dp-size 4 data/shar\n");
}

/* ---- cuts ------------------------------------------------------------------------------- */

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

static void print_problems_json(FILE *f, const sharc_reader_stats *st)
{
    cli_json_key(f, "problems", 0);
    fputc('{', f);
    for (int k = 0; k < SHARC_PROBLEM_COUNT; k++) {
        cli_json_key(f, sharc_problem_name((sharc_problem)k), k == 0);
        fprintf(f, "%" PRIu64, st->problems[k]);
    }
    fputc('}', f);
}

/* ,"shards","skipped_cuts","skipped_shards","problems":{...} of the reader's counters. */
static void print_shards_json(FILE *f, const sharc_reader_stats *st)
{
    fprintf(f, ",\"shards\":%" PRIu64 ",\"skipped_cuts\":%" PRIu64 ",\"skipped_shards\":%" PRIu64,
            st->shards, st->skipped_cuts, st->skipped_shards);
    print_problems_json(f, st);
}

/* {"type":"summary","layout": the start of both summaries. */
static void print_summary_head(FILE *f, const sharc_reader *r)
{
    fputc('{', f);
    cli_json_key(f, "type", 1);
    cli_json_str(f, "summary");
    cli_json_key(f, "layout", 0);
    /* A peer never opens the shards: its layout is unknown (null), not "auto". */
    if (sharc_reader_layout(r) == SHARC_LAYOUT_AUTO)
        fputs("null", f);
    else
        cli_json_str(f, cli_layout_name(sharc_reader_layout(r)));
}

static void print_cut_summary_json(const sharc_reader *r, const sharc_reader_stats *st, double wall,
                                   const char *error)
{
    FILE *f = stdout;
    print_summary_head(f, r);
    fprintf(f, ",\"cuts\":%" PRIu64, st->cuts);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, st->audio_seconds);
    print_shards_json(f, st);
    cli_json_key(f, "wall_seconds", 0);
    cli_json_num(f, wall);
    cli_json_key(f, "audio_seconds_per_second", 0);
    cli_json_num(f, wall > 0 ? st->audio_seconds / wall : 0.0);
    cli_print_sources_json(f, r);
    cli_json_key(f, "error", 0);
    cli_json_str(f, error);
    fputs("}\n", f);
}

static void print_skipped_text(const char *prefix, const sharc_reader_stats *st)
{
    printf("%sskipped: %" PRIu64 " cuts, %" PRIu64 " shards", prefix, st->skipped_cuts,
           st->skipped_shards);
    for (int k = 0; k < SHARC_PROBLEM_COUNT; k++) {
        if (st->problems[k] > 0)
            printf(", %s %" PRIu64, sharc_problem_name((sharc_problem)k), st->problems[k]);
    }
}

static void print_cut_summary_text(const sharc_reader *r, const sharc_reader_stats *st, double wall)
{
    char a[32], b[32];
    printf("-- %" PRIu64 " cuts, %.3f s of audio (%s), %" PRIu64 " shards opened, layout %s\n",
           st->cuts, st->audio_seconds, cli_fmt_duration(a, sizeof a, st->audio_seconds),
           st->shards, cli_layout_name(sharc_reader_layout(r)));
    print_skipped_text("-- ", st);
    printf("\n-- wall time %s, %s cuts/s, %.1f s of audio per second\n",
           cli_fmt_duration(a, sizeof a, wall),
           cli_fmt_count(b, sizeof b, wall > 0 ? (double)st->cuts / wall : 0.0),
           wall > 0 ? st->audio_seconds / wall : 0.0);
    cli_print_sources_text(stdout, r);
}

/* The reader's error message for `rc`, or NULL when rc is not an error. */
static const char *reader_error(const sharc_reader *r, int rc)
{
    if (rc >= 0)
        return NULL;
    const char *error = sharc_reader_last_error(r);
    return error[0] ? error : sharc_strerror(rc);
}

/* The library has usually logged the error already; say it once more only if not. */
static void print_error_once(const char *error)
{
    char logged[1024];
    if (error != NULL && strcmp(cli_last_logged_error(logged, sizeof logged), error) != 0)
        fprintf(stderr, "sharc read: error: %s\n", error);
}

static int open_reader(const sharc_reader_settings *s, sharc_reader **r)
{
    return cli_open_reader("read", s, r);
}

/*
 * Batches come from a loader: under --transport/--mesh the source rank of each group reads
 * and its peers receive; alone it is a plain reader. A dataset the source cannot open is
 * reported by its first next, which also tells the peers.
 */
static const char *loader_error(const sharc_loader *l, int rc)
{
    if (rc >= 0)
        return NULL;
    const char *error = sharc_loader_last_error(l);
    return error[0] ? error : sharc_strerror(rc);
}

static int open_loader(const sharc_reader_settings *s, read_opts *o, sharc_loader **l, char *error,
                       size_t cap)
{
    sharc_loader_settings ls;
    sharc_loader_default_settings(&ls);
    ls.reader = *s;
    ls.max_steps = o->limit; /* the same on every rank: checked by the loader's handshake */
    cli_dist_apply(&o->dist, &ls);
    int rc = cli_open_loader("read", &ls, l);
    if (rc < 0)
        cli_open_failure_text(error, cap, "loader", rc);
    if (rc == 0 && sharc_loader_is_source(*l) && sharc_loader_reader(*l) == NULL) {
        sharc_batch *b = NULL;
        rc = sharc_loader_next(*l, &b); /* sends the reason to the peers */
        snprintf(error, cap, "%s", sharc_loader_last_error(*l));
        fprintf(stderr, "sharc read: %s\n", error);
        sharc_loader_close(l);
    }
    if (rc < 0)
        cli_dist_close(&o->dist);
    return rc;
}

static int run_cuts(const sharc_reader_settings *s, const read_opts *o)
{
    double t0 = cli_now();
    sharc_reader *r = NULL;
    int orc = open_reader(s, &r);
    if (orc < 0) {
        if (o->json) { /* the summary line scripts wait for, with the reason */
            char error[1400];
            sharc_reader_stats none = {0};
            print_cut_summary_json(NULL, &none, cli_now() - t0,
                                   cli_open_failure_text(error, sizeof error, "dataset", orc));
        }
        return CLI_EXIT_FAIL;
    }
    uint64_t n = 0;
    const sharc_cut *c = NULL;
    int rc = 0;
    /* Output that cannot be written (a full disk, a reader that left the pipe) ends the run. */
    while ((o->limit == 0 || n < o->limit) && !ferror(stdout)) {
        rc = sharc_reader_next(r, &c);
        if (rc != 0)
            break;
        n++;
        if (o->json)
            print_cut_json(c);
        else if (!o->quiet)
            print_cut_text(c);
    }
    double wall = cli_now() - t0;
    const char *error = reader_error(r, rc);
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    if (o->json)
        print_cut_summary_json(r, &st, wall, error);
    else
        print_cut_summary_text(r, &st, wall);
    fflush(stdout);
    print_error_once(error);
    sharc_reader_close(&r);
    return cli_finish_output(cmd, rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK);
}

/* ---- batches ---------------------------------------------------------------------------- */

/* What one batch's line says. */
typedef struct batch_info {
    int64_t B, T;
    const int32_t *lens;
    const float *duration;
    int rate;
    double audio_seconds;
    double padded_seconds;
    uint32_t crc;
} batch_info;

/* Totals of this run and the first error of the command itself. */
typedef struct batch_run {
    uint64_t batches;
    uint64_t first_step;
    uint64_t cuts;
    double audio_seconds;
    double padded_seconds;
    char error[1024];
} batch_run;

static uint32_t crc32_of(const void *data, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

/*
 * The batch's sampling rate, which the batch does not carry: --sampling-rate when given,
 * else the rate its lengths and durations imply. Lengths are num_samples from the metadata
 * or round(duration * rate), and manifest durations are often rounded to milliseconds, so
 * the estimate is snapped to a usual rate within 0.5%, else rounded to a whole Hz.
 */
static int batch_rate(const batch_info *bi, int given)
{
    static const int usual[] = {8000,  11025, 12000, 16000, 22050, 24000,
                                32000, 44100, 48000, 88200, 96000, 192000};
    if (given > 0)
        return given;
    double samples = 0, seconds = 0;
    for (int64_t i = 0; i < bi->B; i++) {
        samples += bi->lens[i];
        seconds += bi->duration[i];
    }
    if (!(seconds > 0))
        return 0;
    double est = samples / seconds;
    for (size_t i = 0; i < sizeof usual / sizeof usual[0]; i++) {
        if (fabs(est - usual[i]) <= 0.005 * usual[i])
            return usual[i];
    }
    return (int)lround(est);
}

static const sharc_tensor *tensor_of(const sharc_batch *b, const char *name, sharc_dtype dtype,
                                     int ndim, int64_t dim0)
{
    const sharc_tensor *t = sharc_batch_tensor(b, name);
    if (t == NULL || t->dtype != dtype || t->ndim != ndim || t->shape[0] != dim0 ||
        t->device != SHARC_DEVICE_HOST)
        return NULL;
    return t;
}

/* Look up the standard tensors and compute the numbers of the batch's line. */
static int batch_info_compute(const sharc_batch *b, int given_rate, batch_info *bi, batch_run *run)
{
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    /* --no-keep-audio leaves the features and audio_lens: T is then the longest row, which
     * is what the batch's padded width was (its rows all at the features' rate). */
    if (audio == NULL && sharc_batch_tensor(b, "features") != NULL && lens != NULL &&
        lens->dtype == SHARC_DTYPE_I32 && lens->ndim == 1) {
        bi->B = lens->shape[0];
        bi->T = 0;
        for (int64_t i = 0; i < bi->B; i++)
            if (((const int32_t *)lens->data)[i] > bi->T)
                bi->T = ((const int32_t *)lens->data)[i];
    } else if (audio == NULL || audio->dtype != SHARC_DTYPE_F32 || audio->ndim != 2) {
        snprintf(run->error, sizeof run->error, "batch %" PRIu64 " has no [B,T] f32 audio tensor",
                 b->step);
        return -1;
    } else {
        bi->B = audio->shape[0];
        bi->T = audio->shape[1];
    }
    lens = tensor_of(b, "audio_lens", SHARC_DTYPE_I32, 1, bi->B);
    const sharc_tensor *dur = tensor_of(b, "duration", SHARC_DTYPE_F32, 1, bi->B);
    if (lens == NULL || dur == NULL ||
        tensor_of(b, "cut_id_offsets", SHARC_DTYPE_I32, 1, bi->B + 1) == NULL) {
        snprintf(run->error, sizeof run->error,
                 "batch %" PRIu64 " lacks audio_lens, duration or cut_id tensors of %" PRId64
                 " rows",
                 b->step, bi->B);
        return -1;
    }
    bi->lens = lens->data;
    bi->duration = dur->data;
    bi->audio_seconds = 0;
    for (int64_t i = 0; i < bi->B; i++)
        bi->audio_seconds += bi->duration[i];
    bi->rate = batch_rate(bi, given_rate);
    bi->padded_seconds = bi->rate > 0 ? (double)bi->B * (double)bi->T / bi->rate : 0.0;
    bi->crc = audio != NULL ? crc32_of(audio->data, audio->nbytes) : 0;
    return 0;
}

static void print_batch_json(const sharc_batch *b, const batch_info *bi, const cli_dist *d,
                             const sharc_loader *l)
{
    FILE *f = stdout;
    fprintf(f, "{\"type\":\"batch\",\"step\":%" PRIu64 ",\"epoch\":%" PRIu64 ",\"cuts\":%" PRId64,
            b->step, b->epoch, bi->B);
    cli_json_key(f, "ids", 0);
    fputc('[', f);
    for (int64_t i = 0; i < bi->B; i++) {
        size_t len = 0;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
        if (i > 0)
            fputc(',', f);
        if (id != NULL)
            cli_json_strn(f, id, len);
        else
            fputs("null", f);
    }
    fprintf(f, "],\"frames\":%" PRId64, bi->T);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, bi->audio_seconds);
    cli_json_key(f, "padded_seconds", 0);
    cli_json_num(f, bi->padded_seconds);
    fprintf(f, ",\"audio_crc32\":%" PRIu32, bi->crc);
    cli_dist_json(f, d, l);
    fputs("}\n", f);
}

static void print_batch_text(const sharc_batch *b, const batch_info *bi)
{
    printf("step %-6" PRIu64 " epoch %-3" PRIu64 " %4" PRId64 " cuts  T %9" PRId64
           "  %9.3fs audio  %9.3fs padded  ",
           b->step, b->epoch, bi->B, bi->T, bi->audio_seconds, bi->padded_seconds);
    for (int64_t i = 0; i < bi->B && i < TEXT_IDS; i++) {
        size_t len = 0;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
        char shown[128];
        char raw[128];
        len = len < sizeof raw - 1 ? len : sizeof raw - 1;
        memcpy(raw, id ? id : "", id ? len : 0);
        raw[id ? len : 0] = '\0';
        printf("%s%s", i ? " " : "", shorten(shown, sizeof shown, raw, 40));
    }
    if (bi->B > TEXT_IDS)
        printf(" (+%" PRId64 ")", bi->B - TEXT_IDS);
    putchar('\n');
}

/*
 * Every output of the command that could not be written (the dump folder, a dump file, a
 * state file) is reported here and nowhere else, so that one place decides what the run
 * does about it: the batch loop stops, and the message is printed and ends the JSON summary.
 */
static void output_failure(batch_run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void output_failure(batch_run *run, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(run->error, sizeof run->error, fmt, ap);
    va_end(ap);
}

static int make_dir(const char *dir, batch_run *run)
{
    struct stat sb;
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return 0;
    output_failure(run, "cannot create the dump directory %s: %s", dir,
                   strerror(errno == EEXIST ? ENOTDIR : errno));
    return -1;
}

static int write_tensor(FILE *f, const void *t)
{
    return -npy_write_tensor(f, t);
}

/* Write every tensor of the batch as DIR/step<k>.<name>.npy, each complete or not at all. */
static int dump_batch(const read_opts *o, const sharc_batch *b, batch_run *run)
{
    const char *dir = o->dump_dir;
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        char name[SHARC_TENSOR_NAME_MAX], path[4096];
        memcpy(name, t->name, sizeof name);
        name[sizeof name - 1] = '\0';
        int n = snprintf(path, sizeof path, "%s/step%" PRIu64 ".%s.npy", dir, b->step, name);
        int err = ENAMETOOLONG;
        const char *input = NULL;
        if (n > 0 && (size_t)n < sizeof path && strchr(name, '/') == NULL &&
            (input = cli_inputs_find(&o->inputs, path)) == NULL)
            err = cli_write_file(path, NULL, 0, write_tensor, t);
        if (input != NULL) {
            output_failure(run,
                           "cannot write tensor %s of step %" PRIu64 " to %s: it is the input "
                           "file %s, which an output never replaces",
                           name, b->step, path, input);
            return -1;
        }
        if (err != 0) {
            output_failure(run, "cannot write tensor %s of step %" PRIu64 " to %s: %s", name,
                           b->step, dir, strerror(err));
            return -1;
        }
    }
    return 0;
}

static int save_state(sharc_loader *l, const read_opts *o, save_point *sp, batch_run *run,
                      size_t *bytes)
{
    size_t size = 0;
    void *buf = NULL;
    int rc = sharc_loader_state_save(l, NULL, 0, &size);
    if (rc == 0 && !sharc_loader_is_source(l)) {
        sp->done = 1; /* the state lives on the source; a peer's is empty */
        return 0;
    }
    if (rc == SHARC_ERR(ENOSPC) && (buf = malloc(size ? size : 1)) != NULL)
        rc = sharc_loader_state_save(l, buf, size, &size);
    else if (rc == SHARC_ERR(ENOSPC))
        rc = SHARC_ERR(ENOMEM);
    if (rc < 0) {
        snprintf(run->error, sizeof run->error, "cannot save the state after step %" PRIu64 ": %s",
                 sp->step, sharc_loader_last_error(l));
        free(buf);
        return -1;
    }
    /* Checked before the run as well; a link to an input made since then is refused here. */
    const char *input = cli_inputs_find(&o->inputs, sp->file);
    int err = input ? 0 : cli_write_file(sp->file, buf, size, NULL, NULL);
    free(buf);
    if (input != NULL) {
        output_failure(run,
                       "cannot write the state of step %" PRIu64 " to %s: it is the input file "
                       "%s, which an output never replaces",
                       sp->step, sp->file, input);
        return -1;
    }
    if (err != 0) {
        output_failure(run, "cannot write the state of step %" PRIu64 " to %s: %s", sp->step,
                       sp->file, strerror(err));
        return -1;
    }
    sp->done = 1;
    *bytes = size;
    return 0;
}

static int read_state_file(read_opts *o, char *error, size_t cap)
{
    if (cli_resume_read_file(o->resume_file, &o->state, &o->state_size, error, cap) == 0)
        return 0;
    fprintf(stderr, "sharc read: %s\n", error);
    return -1;
}

/* A batch whose device tensors (--device cuda) are copied to the host, so that it is
 * printed and dumped as a host batch is. */
typedef struct host_view {
    sharc_batch b;
    sharc_tensor *t;
} host_view;

/* Free the copies of `orig`'s device tensors. */
static void host_view_free(host_view *v, const sharc_batch *orig)
{
    for (size_t i = 0; v->t != NULL && i < orig->n_tensors; i++)
        if (orig->tensors[i].device != SHARC_DEVICE_HOST)
            free(v->t[i].data);
    free(v->t);
    v->t = NULL;
}

/* `b` itself when it has no device tensor, else its copy in `v` (host_view_free frees it). */
static const sharc_batch *host_view_of(const sharc_batch *b, host_view *v, batch_run *run)
{
    memset(v, 0, sizeof *v);
    size_t n_dev = 0;
    for (size_t i = 0; i < b->n_tensors; i++)
        n_dev += b->tensors[i].device != SHARC_DEVICE_HOST;
    if (n_dev == 0)
        return b;
    v->b = *b;
    v->t = calloc(b->n_tensors, sizeof *v->t);
    if (v->t == NULL) {
        snprintf(run->error, sizeof run->error, "out of memory for batch %" PRIu64, b->step);
        return NULL;
    }
    v->b.tensors = v->t;
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        v->t[i] = *t;
        if (t->device == SHARC_DEVICE_HOST)
            continue;
        v->t[i].device = SHARC_DEVICE_HOST;
        v->t[i].device_ordinal = 0;
        v->t[i].data = malloc(t->nbytes ? t->nbytes : 1);
        int rc = v->t[i].data == NULL ? SHARC_ERR(ENOMEM)
                                      : sharc_tensor_copy_to_host(t, v->t[i].data, t->nbytes);
        if (rc < 0) {
            snprintf(run->error, sizeof run->error,
                     "cannot copy tensor %.31s of step %" PRIu64 " from device cuda:%d: %s",
                     t->name, b->step, t->device_ordinal, sharc_strerror(rc));
            host_view_free(v, b);
            return NULL;
        }
    }
    return &v->b;
}

/* Print, dump and save as asked for one batch. */
static int handle_batch_host(sharc_loader *l, const sharc_batch *b, read_opts *o, int given_rate,
                             batch_run *run, FILE *saved);

static int handle_batch(sharc_loader *l, const sharc_batch *b, read_opts *o, int given_rate,
                        batch_run *run, FILE *saved)
{
    host_view v;
    const sharc_batch *hb = host_view_of(b, &v, run);
    if (hb == NULL)
        return -1;
    int rc = handle_batch_host(l, hb, o, given_rate, run, saved);
    host_view_free(&v, b);
    return rc;
}

static int handle_batch_host(sharc_loader *l, const sharc_batch *b, read_opts *o, int given_rate,
                             batch_run *run, FILE *saved)
{
    batch_info bi;
    if (batch_info_compute(b, given_rate, &bi, run) < 0)
        return -1;
    if (run->batches == 0)
        run->first_step = b->step;
    run->batches++;
    run->cuts += (uint64_t)bi.B;
    run->audio_seconds += bi.audio_seconds;
    run->padded_seconds += bi.padded_seconds;
    if (o->json)
        print_batch_json(b, &bi, &o->dist, l);
    else if (!o->quiet)
        print_batch_text(b, &bi);
    /* A slot's peers receive the batch its source wrote: only the source writes it. */
    if (o->dump_dir != NULL && sharc_loader_is_source(l) && dump_batch(o, b, run) < 0)
        return -1;
    for (size_t i = 0; i < o->n_saves; i++) {
        save_point *sp = &o->saves[i];
        size_t bytes = 0;
        if (sp->step != b->step)
            continue;
        if (save_state(l, o, sp, run, &bytes) < 0)
            return -1;
        /* Listed in the summary: keep the entries as JSON text until then. */
        fprintf(saved, "%s{\"step\":%" PRIu64 ",\"file\":", ftell(saved) > 0 ? "," : "", sp->step);
        cli_json_str(saved, sp->file);
        fprintf(saved, ",\"bytes\":%zu}", bytes);
        if (!o->json && !o->quiet)
            printf("-- saved the state after step %" PRIu64 " to %s (%zu bytes)\n", sp->step,
                   sp->file, bytes);
    }
    return 0;
}

static void print_reader_stats_json(FILE *f, const sharc_reader_stats *st)
{
    cli_json_key(f, "reader", 0);
    fprintf(f, "{\"batches\":%" PRIu64 ",\"cuts\":%" PRIu64, st->batches, st->cuts);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, st->audio_seconds);
    cli_json_key(f, "padded_seconds", 0);
    cli_json_num(f, st->padded_seconds);
    fprintf(f, ",\"filtered_cuts\":%" PRIu64 ",\"dropped_cuts\":%" PRIu64, st->filtered_cuts,
            st->dropped_cuts);
    print_shards_json(f, st);
    fputc('}', f);
}

static void print_batch_summary_json(const sharc_reader *r, const batch_run *run,
                                     const sharc_reader_stats *st, double wall, const char *saved,
                                     const char *error, const cli_dist *d, const sharc_loader *l)
{
    FILE *f = stdout;
    print_summary_head(f, r);
    fprintf(f, ",\"batches\":%" PRIu64, run->batches);
    cli_json_key(f, "first_step", 0);
    if (run->batches > 0)
        fprintf(f, "%" PRIu64, run->first_step);
    else
        fputs("null", f);
    fprintf(f, ",\"cuts\":%" PRIu64, run->cuts);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, run->audio_seconds);
    cli_json_key(f, "padded_seconds", 0);
    cli_json_num(f, run->padded_seconds);
    cli_json_key(f, "wall_seconds", 0);
    cli_json_num(f, wall);
    cli_json_key(f, "audio_seconds_per_second", 0);
    cli_json_num(f, wall > 0 ? run->audio_seconds / wall : 0.0);
    fprintf(f, ",\"saved_states\":[%s]", saved);
    size_t n_bins = 0;
    const double *bins = r ? sharc_reader_bins(r, &n_bins) : NULL;
    cli_json_key(f, "bins", 0);
    if (bins)
        cli_json_nums(f, bins, n_bins);
    else
        fputs("null", f);
    print_reader_stats_json(f, st);
    cli_print_sources_json(f, r);
    cli_dist_json(f, d, l);
    cli_json_key(f, "error", 0);
    cli_json_str(f, error);
    fputs("}\n", f);
}

static void print_batch_summary_text(const sharc_reader *r, const batch_run *run,
                                     const sharc_reader_stats *st, double wall)
{
    char a[32], b[32];
    printf("-- %" PRIu64 " batches", run->batches);
    if (run->batches > 0)
        printf(" (steps %" PRIu64 "..%" PRIu64 ")", run->first_step,
               run->first_step + run->batches - 1);
    /* Durations and frame counts differ by rounding: no padding is 0%, not -0.0%. */
    double padding =
        run->padded_seconds > 0 ? 100.0 * (1.0 - run->audio_seconds / run->padded_seconds) : 0.0;
    printf(", %" PRIu64 " cuts, %.3f s of audio (%s), %.3f s padded (%.1f%% padding), layout %s\n",
           run->cuts, run->audio_seconds, cli_fmt_duration(a, sizeof a, run->audio_seconds),
           run->padded_seconds, padding > 0 ? padding : 0.0,
           r != NULL ? cli_layout_name(sharc_reader_layout(r))
                     : "unknown (a peer reads no shards)");
    printf("-- filtered %" PRIu64 " cuts, dropped %" PRIu64 " (drop-last), %" PRIu64
           " shards opened; ",
           st->filtered_cuts, st->dropped_cuts, st->shards);
    print_skipped_text("", st);
    printf("\n-- wall time %s, %s batches/s, %.1f s of audio per second\n",
           cli_fmt_duration(a, sizeof a, wall),
           cli_fmt_count(b, sizeof b, wall > 0 ? (double)run->batches / wall : 0.0),
           wall > 0 ? run->audio_seconds / wall : 0.0);
    cli_print_sources_text(stdout, r);
}

/* A --save-state-at step that the run never reached is an error: the file was promised. */
static int check_saves_done(const read_opts *o, batch_run *run)
{
    for (size_t i = 0; i < o->n_saves; i++) {
        if (o->saves[i].done)
            continue;
        if (run->batches > 0 && o->saves[i].step < run->first_step) {
            snprintf(run->error, sizeof run->error,
                     "no state saved to %s: step %" PRIu64
                     " came before this run's first step, %" PRIu64
                     " (a resumed run starts after the step its state was saved at)",
                     o->saves[i].file, o->saves[i].step, run->first_step);
            return -1;
        }
        snprintf(run->error, sizeof run->error,
                 "no state saved to %s: the run ended before step %" PRIu64 " (%" PRIu64
                 " batches read)",
                 o->saves[i].file, o->saves[i].step, run->batches);
        return -1;
    }
    return 0;
}

/* A run that could not start still ends with its summary line under --json, with the reason. */
static int fail_to_start(const read_opts *o, const char *error, double t0)
{
    if (o->json) {
        batch_run none = {0};
        sharc_reader_stats zero = {0};
        print_batch_summary_json(NULL, &none, &zero, cli_now() - t0, "", error, &o->dist, NULL);
    }
    return CLI_EXIT_FAIL;
}

/* `fmt` with `path` and `slot`, kept in o->slot_names; NULL when out of memory. */
static const char *slot_name(read_opts *o, const char *fmt, const char *path, int slot)
{
    int n = snprintf(NULL, 0, fmt, path, slot);
    char *s = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (s == NULL)
        return NULL;
    snprintf(s, (size_t)n + 1, fmt, path, slot);
    o->slot_names[o->n_slot_names++] = s;
    return s;
}

/*
 * With several data-parallel slots in one job (mpirun, or RANK and WORLD_SIZE), every rank
 * runs the same command line, and each slot's source writes and reads files of its own:
 * FILE.dp<k> for --save-state-at and --resume, DIR/dp<k>/ for --dump-dir.
 */
static int name_files_by_slot(read_opts *o)
{
    if (sharc_mesh_dp_size(&o->dist.mesh) <= 1)
        return 0;
    const int slot = sharc_mesh_dp_rank(&o->dist.mesh);
    for (size_t i = 0; i < o->n_saves; i++)
        if ((o->saves[i].file = slot_name(o, "%s.dp%d", o->saves[i].file, slot)) == NULL)
            return -1;
    o->resume_base = o->resume_file;
    if (o->resume_file != NULL &&
        (o->resume_file = slot_name(o, "%s.dp%d", o->resume_file, slot)) == NULL)
        return -1;
    if (o->dump_dir != NULL && (o->dump_dir = slot_name(o, "%s/dp%d", o->dump_dir, slot)) == NULL)
        return -1;
    return 0;
}

static void free_slot_names(read_opts *o)
{
    for (size_t i = 0; i < o->n_slot_names; i++)
        free(o->slot_names[i]);
    o->n_slot_names = 0;
}

/* Whether `path` is a dump file's name, step<k>.<tensor>.npy, in folder `dir` (both may be
 * links): such an input would be replaced by a batch's tensor. */
static int is_dump_file_of(const char *path, const char *dir)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t len = strlen(base);
    if (strncmp(base, "step", 4) != 0)
        return 0;
    size_t digits = strspn(base + 4, "0123456789");
    if (digits == 0 || base[4 + digits] != '.' || len < 9 || strcmp(base + len - 4, ".npy") != 0)
        return 0;
    char *parent = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    struct stat a, b;
    int same = parent && stat(parent, &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
    free(parent);
    return same;
}

/*
 * No output may replace a file the run reads (a shard, a cuts file or manifest, the --resume
 * state): a state file or dump file that is one of them is refused before anything is read.
 * Returns -1 to go on, else the exit status after the message.
 */
static int refuse_outputs_over_inputs(const sharc_reader_settings *s, read_opts *o)
{
    if (o->n_saves == 0 && o->dump_dir == NULL)
        return -1; /* nothing is written but stdout */
    if (cli_inputs_add_dataset(&o->inputs, s->paths, s->n_paths) != 0 ||
        (o->resume_file != NULL && cli_inputs_add(&o->inputs, o->resume_file) != 0)) {
        fprintf(stderr, "sharc read: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    for (size_t i = 0; i < o->n_saves; i++) {
        const char *input = cli_inputs_find(&o->inputs, o->saves[i].file);
        if (input != NULL)
            return cli_usage_error(cmd,
                                   "--save-state-at %" PRIu64 " %s would overwrite %s, an input "
                                   "of this run: outputs never replace inputs",
                                   o->saves[i].step, o->saves[i].file, input);
    }
    for (size_t i = 0; o->dump_dir != NULL && i < o->inputs.n; i++) {
        const char *input = o->inputs.v[i].path;
        if (is_dump_file_of(input, o->dump_dir))
            return cli_usage_error(cmd,
                                   "--dump-dir %s would overwrite %s, an input of this run "
                                   "(dump files are named step<k>.<tensor>.npy): outputs never "
                                   "replace inputs",
                                   o->dump_dir, input);
    }
    return -1;
}

static int run_batches_named(sharc_reader_settings *s, read_opts *o, const char *dump_parent)
{
    char why[1400]; /* of a run that could not start */
    double t0 = cli_now();
    int elastic = o->resume_file == NULL
                      ? 0
                      : cli_resume_bundle(o->resume_base ? o->resume_base : o->resume_file,
                                          sharc_mesh_dp_rank(&o->dist.mesh),
                                          sharc_mesh_dp_size(&o->dist.mesh), &o->state,
                                          &o->state_size, why, sizeof why);
    if (elastic < 0)
        fprintf(stderr, "sharc read: %s\n", why);
    if (elastic < 0)
        return fail_to_start(o, why, t0);
    if (o->resume_file != NULL) {
        if (elastic == 0 && read_state_file(o, why, sizeof why) < 0)
            return fail_to_start(o, why, t0);
        s->resume_state = o->state;
        s->resume_state_size = o->state_size;
    }
    batch_run run = {0};
    /* DIR, then DIR/dp<k> when the slot names it (the same directory otherwise). */
    if (o->dump_dir != NULL &&
        (make_dir(dump_parent, &run) < 0 || make_dir(o->dump_dir, &run) < 0)) {
        fprintf(stderr, "sharc read: %s\n", run.error);
        return fail_to_start(o, run.error, t0);
    }
    char *saved = NULL;
    size_t saved_len = 0;
    FILE *saved_f = open_memstream(&saved, &saved_len);
    if (saved_f == NULL) {
        fprintf(stderr, "sharc read: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    sharc_loader *l = NULL;
    if (open_loader(s, o, &l, why, sizeof why) < 0) {
        fclose(saved_f);
        free(saved);
        return fail_to_start(o, why, t0);
    }
    const sharc_reader *r = sharc_loader_reader(l); /* NULL on peers */
    int rc = 0, failed = 0;
    while (!failed && !ferror(stdout)) { /* until STOP: the loader stops after --limit */
        sharc_batch *b = NULL;
        rc = sharc_loader_next(l, &b);
        if (rc != 0)
            break;
        failed = handle_batch(l, b, o, s->sampling_rate, &run, saved_f) < 0;
        sharc_batch_release(b);
        if (failed) /* an output of this rank failed: the next step ends every rank */
            sharc_loader_fail(l, SHARC_ERR_IO, run.error);
        else if (ferror(stdout)) /* likewise; the reason is printed at exit */
            sharc_loader_fail(l, SHARC_ERR_IO, "its standard output failed");
        if (failed || ferror(stdout))
            rc = sharc_loader_next(l, &b);
    }
    double wall = cli_now() - t0;
    if (!failed && rc >= 0 && !ferror(stdout)) /* else the output's failure is the reason */
        failed = check_saves_done(o, &run) < 0;
    fclose(saved_f);
    const char *error = failed ? run.error : loader_error(l, rc);

    sharc_reader_stats st;
    memset(&st, 0, sizeof st);
    if (r != NULL)
        sharc_reader_get_stats(r, &st);
    if (o->json)
        print_batch_summary_json(r, &run, &st, wall, saved ? saved : "", error, &o->dist, l);
    else
        print_batch_summary_text(r, &run, &st, wall);
    fflush(stdout);
    if (failed)
        fprintf(stderr, "sharc read: %s\n", run.error);
    else if (!ferror(stdout)) /* a failed stdout is reported (or kept quiet) at exit */
        print_error_once(error);
    if (rc == SHARC_ERR_STATE && o->resume_file != NULL)
        fprintf(stderr, "sharc read: the state in %s was not accepted\n", o->resume_file);
    free(saved);
    sharc_loader_close(&l);
    cli_dist_close(&o->dist);
    return cli_finish_output(cmd, failed || rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK);
}

static int run_batches(sharc_reader_settings *s, read_opts *o)
{
    const char *dump_parent = o->dump_dir; /* DIR of DIR/dp<k> */
    if (name_files_by_slot(o) < 0) {
        fprintf(stderr, "sharc read: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    int status = refuse_outputs_over_inputs(s, o);
    if (status < 0)
        status = run_batches_named(s, o, dump_parent);
    cli_dist_close(&o->dist); /* also after a failed start: an MPI rank must finalize, or
                                 mpirun takes it for a crash and kills the others */
    free_slot_names(o);
    return status;
}

/* ---- options ---------------------------------------------------------------------------- */

/* Check the combination of options and fill in the defaults that depend on others. */
static int finish_args(sharc_reader_settings *s, read_opts *o)
{
    if (o->cuts_mode && o->batch_only != NULL)
        return cli_usage_error(cmd, "--%s applies to batches; it cannot be used with --cuts%s",
                               o->batch_only,
                               strcmp(o->batch_only, "no-shuffle") == 0
                                   ? " (the shard order is set by --no-shuffle-shards)"
                                   : "");
    if (o->cuts_mode && cli_dist_active(&o->dist))
        return cli_usage_error(cmd, "--transport and --mesh broadcast batches; they cannot be "
                                    "used with --cuts");
    if (!o->cuts_mode && o->cuts_only != NULL)
        return cli_usage_error(cmd, "--%s applies to --cuts (batches are always decoded)",
                               o->cuts_only);
    if (s->dp_rank >= s->dp_size)
        return cli_usage_error(cmd, "--dp-rank %d must be less than --dp-size %d", s->dp_rank,
                               s->dp_size);
    if (o->cuts_mode)
        return -1;
    sharc_sampler_settings *st = &s->sampler;
    if (o->ro.bins_linspace && cli_linspace_bins(cmd, st, &o->ro.bins, &o->ro.n_bins) < 0)
        return CLI_EXIT_USAGE;
    if (o->ro.bucket_batch_size != NULL) {
        if (o->ro.bins == NULL)
            return cli_usage_error(cmd, "--bucket-batch-size needs --bins");
        if (o->ro.n_bucket_batch_size != o->ro.n_bins)
            return cli_usage_error(cmd,
                                   "--bucket-batch-size has %zu numbers but --bins %zu: one per "
                                   "bin is needed",
                                   o->ro.n_bucket_batch_size, o->ro.n_bins);
        if (st->max_duration > 0 || st->max_cuts > 0)
            return cli_usage_error(
                cmd, "--bucket-batch-size cannot be combined with --max-duration or --max-cuts");
        st->bucket_batch_size = o->ro.bucket_batch_size;
    }
    st->bins = o->ro.bins;
    st->n_bins = o->ro.n_bins;
    if (st->max_cut_duration > 0 && st->max_cut_duration < st->min_duration)
        return cli_usage_error(cmd, "--max-cut-duration %g is less than --min-duration %g",
                               st->max_cut_duration, st->min_duration);
    if (!(st->max_duration > 0) && st->max_cuts == 0 && st->bucket_batch_size == NULL)
        st->max_duration = DEFAULT_MAX_DURATION;
    return -1;
}

/* Parse argv into settings and options. Returns -1 to continue, else an exit status. */
static int parse_args(int argc, char **argv, sharc_reader_settings *s, read_opts *o)
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
    o->batch_only = p.batch_only;
    o->cuts_only = p.cuts_only;
    status = cli_take_paths(cmd, argc, argv, s);
    return status >= 0 ? status : finish_args(s, o);
}

int cmd_read(int argc, char **argv)
{
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    read_opts o = {0};
    cli_dist_init(&o.dist);
    int status = parse_args(argc, argv, &s, &o);
    if (status < 0) {
        cli_logger(&s.logger,
                   o.quiet ? SHARC_LOG_ERROR : (o.verbose ? SHARC_LOG_INFO : SHARC_LOG_WARN));
        if (o.cuts_mode) {
            status = run_cuts(&s, &o);
        } else {
            o.dist.reader_dp_given = o.ro.dp_given;
            o.dist.device = s.device == SHARC_DEVICE_CUDA ? s.device_ordinal : -1;
            if ((status = cli_dist_setup(cmd, &o.dist)) == 0) /* MPI, mesh, transport */
                status = run_batches(&s, &o);
        }
    }
    cli_reader_opts_free(&o.ro);
    cli_inputs_free(&o.inputs);
    free(o.state);
    return status;
}

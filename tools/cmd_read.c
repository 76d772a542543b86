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
#include "cli_tokens.h"
#include "npy.h"
#include "read.h"

static const char *const cmd = "read";

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
_Static_assert((int)DEFAULT_MAX_DURATION == 600, "--batch-duration's help says 600");
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
    USE("resample"),
    USE("speed-perturb"),
    USE("speed-perturb-prob"),
    USE("volume-perturb"),
    USE("volume-perturb-prob"),
    USE("noise"),
    USE("noise-snr"),
    USE("noise-prob"),
    USE("noise-max-bytes"),
    USE("channel"),
    USE("retries"),
    USE("timeout-ms"),
    USE("tokenizer"),
    {CLI_OPT_U64, "limit", .metavar = "N", OWN(limit), .min = 1,
     .help = "stop after N batches (N cuts with --cuts) (default: no limit)"},
    CLI_TEXT("\nBatching (see docs/sampler.md for the Lhotse and NeMo names of each):\n"),
    CLI_USE(cli_reader_group, "batch-duration",
            "padded seconds per batch: cuts are taken from a bucket until\n"
            "the n taken so far, the longest lasting L, have (n+1) * L > S\n"
            "(Lhotse's rule) (default 600 when neither --max-cuts nor\n"
            "--bucket-batch-size is given, else none)"),
    USE("max-duration"),
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
    USE("max-tps"),
    USE("min-tps"),
    USE("min-tokens"),
    USE("max-tokens"),
    USE("token-equivalent-duration"),
    USE("batch-tokens"),
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
             "file, manifest, noise, --input-cfg or --tokenizer file, the\n"
             "--resume state, or a link to one) (default: none)"},
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
    {CLI_OPT_FLAG, "json-tokens", OWN(json_tokens), .min = 1, .flags = CLI_BATCH_ONLY,
     .help = "with --json and --tokenizer: each batch object also holds\n"
             "\"tokens\", each cut's token ids in row order",
     .needs = "json,tokenizer"},
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
           "   \"padded_seconds\",\"audio_crc32\",[\"speed\",\"gain\",\"snr_db\",]\"rank\","
           "\"source\"}\n"
           "where frames is T of the [cuts, T] audio tensor, audio_seconds the sum of the cuts'\n"
           "durations, padded_seconds cuts * T / sampling rate (the rate given by\n"
           "--sampling-rate, else the one the lengths and durations imply) and audio_crc32 the\n"
           "CRC-32 (zlib) of the audio tensor's bytes (cuts * T little-endian float32, padding\n"
           "included), so that two runs can be compared bit for bit (0 when --no-keep-audio\n"
           "dropped the audio; T is then the longest row). With --speed-perturb,\n"
           "--volume-perturb or --noise, speed, gain and snr_db list each cut's speed factor,\n"
           "linear gain and noise SNR in row order, as float32, the values --cuts --json gives\n"
           "(snr_db null where no noise was mixed in). Then a last object\n"
           "  {\"type\":\"summary\",\"layout\",\"batches\",\"first_step\",\"cuts\","
           "\"audio_seconds\",\n"
           "   \"padded_seconds\",\"wall_seconds\",\"audio_seconds_per_second\",\"saved_states\","
           "\"bins\",\n"
           "   \"reader\":{\"batches\",\"cuts\",\"audio_seconds\",\"padded_seconds\","
           "\"filtered_cuts\",\n"
           "   \"filtered\":{\"min_duration\",\"max_cut_duration\",\"min_tokens\",\"max_tokens\","
           "\"min_tps\",\n"
           "   \"max_tps\",\"no_bucket\"},\"dropped_cuts\",\"shards\",\"skipped_cuts\","
           "\"skipped_shards\",\n"
           "   \"problems\":{...}},\"rank\",\"source\",\"error\"} (layout \"mixture\" with\n"
           "--input-cfg, null on a peer, which reads no shards)\n"
           "where the top-level counts are this run's printed batches, reader holds the\n"
           "library's cumulative counters as of the last batch read (they include what a\n"
           "resumed state had counted, and do not depend on --threads or --prefetch; zero on\n"
           "a peer), filtered the filtered cuts by the setting that filtered each (max_tps\n"
           "also for a 2D bucket's cap, no_bucket for a cut that fits no 2D bucket),\n"
           "saved_states lists {\"step\",\"file\",\"bytes\"}, bins the duration bins the\n"
           "batches' buckets use (given, resumed or estimated; [] with one bucket, null on a\n"
           "peer or before a batch), rank is this process's rank,\n"
           "source says whether it read the batches (a peer received them from its group's\n"
           "source) and error is null or the error message.\n"
           "\n");
    printf(
        "JSON output (--cuts): one object per cut\n"
        "  {\"type\":\"cut\",\"id\",\"duration\",\"sampling_rate\",\"channels\",\"num_samples\",\n"
        "   \"shard\",\"member\",\"text\",\"speaker\",\"language\",\"epoch\",\"sample_sum\",\n"
        "   \"speed\",\"gain\",\"snr_db\"}\n"
        "where sample_sum is the sum of all decoded samples (all channels, as float32\n"
        "in [-1, 1], summed in double), speed and gain the cut's speed factor and linear\n"
        "gain (1 without --speed-perturb and --volume-perturb), snr_db the SNR of the\n"
        "noise mixed in (null without), and a last object\n"
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
        "  sharc read --json --batch-duration 200 --num-buckets 8 --threads 4 data/shar\n"
        "  mpirun -n 4 sharc read --transport mpi --mesh dp=2,cp=2 --json data/shar\n"
        "  sharc read --save-state-at 5 state.bin --limit 6 data/shar\n"
        "  sharc read --resume state.bin --dump-dir /tmp/batches --limit 5 data/shar\n"
        "  sharc read --cuts --json --epochs 2 --seed 7 --dp-rank 0 --dp-size 4 data/shar\n");
}

/* ---- cuts ------------------------------------------------------------------------------- */

/* Copy at most `max_chars` UTF-8 characters of s into buf, with "..." when shortened. */
const char *read_shorten(char *buf, size_t n, const char *s, size_t max_chars)
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
    /* Newlines and tabs would break the one-line-per-cut format, other controls the
     * terminal. */
    cli_text_sanitize(buf, 0);
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
    cli_json_key(f, "speed", 0);
    cli_json_num(f, c->speed);
    cli_json_key(f, "gain", 0);
    cli_json_num(f, c->gain);
    cli_json_key(f, "snr_db", 0);
    cli_json_num(f, c->snr_db);
    fputs("}\n", f);
}

static void print_cut_text(const sharc_cut *c)
{
    char text[256], *id = NULL, *shard = NULL, *member = NULL;
    printf("%-32s %8.3fs %6dHz %dch %10" PRId64 "  %s:%s  %s\n", c->id ? cli_text(c->id, &id) : "?",
           c->duration, c->sampling_rate, c->channels, c->num_samples,
           cli_text(basename_of(c->shard), &shard), c->member ? cli_text(c->member, &member) : "?",
           read_shorten(text, sizeof text, c->text, 60));
    free(id);
    free(shard);
    free(member);
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
void read_print_shards_json(FILE *f, const sharc_reader_stats *st)
{
    fprintf(f, ",\"shards\":%" PRIu64 ",\"skipped_cuts\":%" PRIu64 ",\"skipped_shards\":%" PRIu64,
            st->shards, st->skipped_cuts, st->skipped_shards);
    print_problems_json(f, st);
}

/* {"type":"summary","layout": the start of both summaries. */
void read_print_summary_head(FILE *f, const sharc_reader *r)
{
    fputc('{', f);
    cli_json_key(f, "type", 1);
    cli_json_str(f, "summary");
    cli_json_key(f, "layout", 0);
    /* A peer never opens the shards: its layout is unknown (null), not "auto". */
    cli_json_str(f, cli_reader_layout_name(r));
}

static void print_cut_summary_json(const sharc_reader *r, const sharc_reader_stats *st, double wall,
                                   const char *error)
{
    FILE *f = stdout;
    read_print_summary_head(f, r);
    fprintf(f, ",\"cuts\":%" PRIu64, st->cuts);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, st->audio_seconds);
    read_print_shards_json(f, st);
    cli_json_key(f, "wall_seconds", 0);
    cli_json_num(f, wall);
    cli_json_key(f, "audio_seconds_per_second", 0);
    cli_json_num(f, wall > 0 ? st->audio_seconds / wall : 0.0);
    cli_print_sources_json(f, r);
    cli_json_key(f, "error", 0);
    cli_json_str(f, error);
    fputs("}\n", f);
}

void read_print_skipped_text(const char *prefix, const sharc_reader_stats *st)
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
           st->shards, cli_reader_layout_name(r) ? cli_reader_layout_name(r) : "unknown");
    read_print_skipped_text("-- ", st);
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
void read_print_error_once(const char *error)
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
const char *read_loader_error(const sharc_loader *l, int rc)
{
    if (rc >= 0)
        return NULL;
    const char *error = sharc_loader_last_error(l);
    return error[0] ? error : sharc_strerror(rc);
}

int read_open_loader(const sharc_reader_settings *s, read_opts *o, sharc_loader **l, char *error,
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
    read_print_error_once(error);
    sharc_reader_close(&r);
    return cli_finish_output(cmd, rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK);
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
                cmd, "--bucket-batch-size cannot be combined with --batch-duration or --max-cuts");
        st->bucket_batch_size = o->ro.bucket_batch_size;
    }
    st->bins = o->ro.bins;
    st->n_bins = o->ro.n_bins;
    st->bin_tokens = o->ro.bin_tokens;
    if (st->max_cut_duration > 0 && st->max_cut_duration < st->min_duration)
        return cli_usage_error(cmd, "--max-cut-duration %g is less than --min-duration %g",
                               st->max_cut_duration, st->min_duration);
    if (!(st->max_duration > 0) && st->max_cuts == 0 && st->bucket_batch_size == NULL &&
        st->batch_tokens == 0)
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
                status = read_run_batches(&s, &o);
        }
    }
    cli_reader_opts_free(&o.ro);
    cli_inputs_free(&o.inputs);
    free(o.state);
    return status;
}

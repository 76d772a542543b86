/*
 * sharc validate: read and decode every shard of a dataset on all cores and report every
 * problem (with shard, member and cut id), including ids duplicated across shards.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "cli_reader_opts.h"
#include "validate.h"

#include <cjson/cJSON.h>

static const char *const cmd = "validate";

typedef struct validate_opts {
    int threads; /* 0 = online CPUs */
    int progress;
    int verbose;
    int json, per_cut; /* for the validator */
    const char *report_html, *report_json;
    const char *partition, *resume_from;
    double progress_every;
    cli_reader_opts ro; /* --tokenizer's list */
} validate_opts;

#define OWN(field) .target = CLI_T_CMD, .offset = offsetof(validate_opts, field)

/* --threads counts readers here, not decode threads: validate has its own. */
static const cli_opt options[] = {
    CLI_USE(cli_reader_group, "layout", NULL),
    CLI_USE(cli_reader_group, "input-cfg",
            "check the sources of a NeMo input_cfg file (YAML or JSON) instead of\n"
            "PATH, of any layouts: every source's cuts once, on one thread;\n"
            "not with --partition or --resume-from"),
    {CLI_OPT_INT, "threads", .metavar = "N", OWN(threads), .min = 1, .max = 1024,
     .help = "readers running in parallel, each on every N-th shard (after\n"
             "--resume-from, each on one shard at a time)\n"
             "(default: the number of online CPUs, at most one per shard)"},
    {CLI_OPT_STRING, "partition", .metavar = "I/N", OWN(partition),
     .help = "check only part I of N (0 <= I < N) of the shards: the shards whose index\n"
             "in the sorted shard list leaves I when divided by N, so that N runs (on N\n"
             "machines) check every shard once whatever their --threads"},
    {CLI_OPT_STRING, "resume-from", .metavar = "LOG", OWN(resume_from),
     .help = "skip the shards that LOG, the --json output of an earlier run that stopped,\n"
             "has a shard record of (finished there); ids duplicated between the shards\n"
             "checked then and now are not seen"},
    {CLI_OPT_DOUBLE, "progress-every", .metavar = "SEC", OWN(progress_every), .dmin = 0,
     .dmax = 1e6,
     .help = "when stderr is not a terminal, print a progress line to it every SEC seconds\n"
             "(for batch logs; default 0: none)"},
    CLI_USE(cli_reader_group, "sampling-rate",
            "also report every cut whose rate is not HZ (default: any)"),
    CLI_USE(cli_reader_group, "max-member-bytes",
            "report archive members larger than N bytes as too_large\n"
            "(default: the library's cap, 1 GiB)"),
    CLI_USE(cli_reader_group, "retries", NULL),
    CLI_USE(cli_reader_group, "timeout-ms", NULL),
    {CLI_OPT_FLAG, "json", OWN(json), .min = 1,
     .help = "print JSON Lines instead of text (see below)"},
    {CLI_OPT_STRING, "report", .metavar = "FILE", OWN(report_html),
     .help = "also write a report of the corpus as one self-contained HTML page\n"
             "(charts, tables and the report's JSON; see below), made in the same pass"},
    {CLI_OPT_STRING, "report-json", .metavar = "FILE", OWN(report_json),
     .help = "also write the report's JSON alone"},
    CLI_USE(cli_reader_group, "tokenizer",
            "a SentencePiece model (or LANG=M, once per language, as for\n"
            "'sharc read'): the report also gives tokens per second of the\n"
            "transcripts, and --json's summary the tokens (default: none)"),
    {CLI_OPT_FLAG, "per-cut", OWN(per_cut), .min = 1,
     .help = "also print one line per cut (id, duration, samples, peak, RMS)"},
    {CLI_OPT_FLAG, "no-progress", OWN(progress), .min = 0,
     .help = "no progress line (it is shown only when stderr is a terminal)"},
    {CLI_OPT_FLAG, "verbose", OWN(verbose), .min = 1,
     .help = "also show the library's log messages (stray files, ...)"},
    CLI_HELP_OPT,
    CLI_END,
};

#undef OWN

static void print_help(void)
{
    printf("Usage: sharc validate [options] PATH...\n"
           "\n"
           "Read every shard of a dataset completely, decode every audio member and report each\n"
           "problem with its shard, member and cut id: unreadable or truncated archives, corrupt\n"
           "compressed streams, invalid metadata, undecodable audio, audio cut short or damaged\n"
           "(less of it than its header says), NaN or infinite samples, id mismatches, orphan and\n"
           "missing members, ids duplicated anywhere in the dataset, decoded lengths beyond the\n"
           "tolerance, sampling-rate or channel mismatches. It keeps going after a problem: with\n"
           "the next cut, or with the next shard when the shard can no longer be read (a damaged\n"
           "archive, members that no longer pair with the cuts); the summary counts the shards\n"
           "whose rest was not checked (shards_cut_short), and the files beside the shards that\n"
           "are not read (ignored_paths: stray files, another layout's shards, subdirectories;\n"
           "--verbose names them).\n"
           "\n"
           "PATH is a dataset directory, a shard file, a brace or a wildcard pattern, as for\n"
           "'sharc read'; several may be given.\n"
           "\n"
           "Options:\n");
    cli_opts_print(stdout, options);
    printf("\nThe text output prints the first %d problems of each kind and counts the rest.\n",
           VALIDATE_TEXT_EXAMPLES);
    printf(
        "\n"
        "Problem codes: archive, json, id_mismatch, orphan_member, missing_member, decode,\n"
        "length, audio_format, too_large, layout, non_finite (from the reader), duplicate_id (an\n"
        "id seen twice; the message names both places) and error (the reader stopped; its\n"
        "message).\n"
        "\n"
        "JSON output (one object per line, order may vary between threads):\n"
        "  {\"type\":\"cut\",\"id\",\"shard\",\"member\",\"duration\",\"num_samples\",\n"
        "   \"sampling_rate\",\"channels\",\"peak\",\"rms_dbfs\"}        with --per-cut\n"
        "  {\"type\":\"problem\",\"code\",\"shard\",\"member\",\"cut_id\",\"message\"}\n"
        "  "
        "{\"type\":\"shard\",\"shard\",\"index\",\"cuts\",\"audio_seconds\",\"bytes\",\"problems\","
        "\n"
        "   \"checked\"}                      each shard once it is done\n"
        "  {\"type\":\"summary\",\"shards\",\"cuts\",\"problems\",\"audio_seconds\",\"layout\",\n"
        "   \"threads\",\"checked_shards\",\"wall_seconds\",\"sampling_rates\":{<Hz>:cuts,...},\n"
        "   \"other_rate_cuts\",\"multichannel_cuts\",\"shards_cut_short\",\"ignored_paths\",\n"
        "   [\"tokens\",] \"empty_shards\":[<path>,...],\"by_code\":{<code>:count,...}}    last\n"
        "peak is the largest absolute decoded sample (float32, full scale 1.0), rms_dbfs is\n"
        "20*log10(RMS) over all samples and channels, null for digital silence. shard, member\n"
        "and cut_id are null when unknown. cuts counts the cuts read completely; sampling_rates\n"
        "counts them by rate (at most 32 rates, the cuts at others are other_rate_cuts) and\n"
        "multichannel_cuts those with more than one channel. The text summary warns when there\n"
        "are several rates (the rows of a batch share one) and when cuts have several channels\n"
        "(batches hold one: 'sharc read' needs --channel). empty_shards lists, when no problem\n"
        "was found, the shards that gave no cut (a tar with no members, an empty cuts file):\n"
        "a format allows them, but a writer that stopped early leaves them; the text summary\n"
        "warns. checked_shards counts the shards checked (all of them unless --partition or\n"
        "--resume-from is given); a shard record's checked is false when a problem stopped the\n"
        "reading of the shard before its end. tokens (with --tokenizer only) sums the token\n"
        "counts of the transcripts, as the report's text.tokens.\n"
        "\n"
        "The report (--report, --report-json) holds the totals (cuts, shards, hours, bytes,\n"
        "layout, codecs), a duration histogram, sampling rates and channels, characters per\n"
        "second of the transcripts (and tokens per second with --tokenizer) with the outliers\n"
        "by cut id, signal checks made while decoding (digital silence, clipping, DC offset,\n"
        "decoded length against the metadata), a table of the shards and the problems grouped\n"
        "by kind; docs/cli.md describes its JSON.\n"
        "Each file is written under a temporary name and renamed once complete.\n"
        "\n"
        "Exit status: 0 no problems, 1 problems found (or the dataset could not be opened, or\n"
        "a report could not be written), 2 usage error (a report file that would replace an\n"
        "input, a shard, cuts file, manifest or the --resume-from log, included).\n"
        "\n"
        "Example:\n"
        "  sharc validate --json --per-cut --threads 8 data/shar > report.jsonl\n");
}

/* ---- Options ---- */

/* "I/N" into *index and *count. */
static int parse_partition(const char *val, size_t *index, size_t *count)
{
    char *end = NULL;
    errno = 0;
    unsigned long long i = strtoull(val, &end, 10);
    if (end == val || *end != '/' || val[0] == '-')
        return -1;
    const char *rest = end + 1;
    unsigned long long n = strtoull(rest, &end, 10);
    if (end == rest || *end != '\0' || rest[0] == '-' || errno != 0 || n < 1 || i >= n ||
        n > 1000000000ull)
        return -1;
    *index = (size_t)i;
    *count = (size_t)n;
    return 0;
}

static int parse_args(int argc, char **argv, sharc_reader_settings *s, validator *v,
                      validate_opts *o)
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
    v->json = o->json;
    v->per_cut = o->per_cut;
    v->verbose = o->verbose;
    v->progress_every = o->progress_every;
    size_t i, n;
    if (o->partition != NULL && parse_partition(o->partition, &i, &n) < 0)
        return cli_usage_error(cmd, "--partition: '%s' is not I/N with 0 <= I < N", o->partition);
    if (s->input_cfg != NULL && (o->partition != NULL || o->resume_from != NULL))
        return cli_usage_error(cmd, "--input-cfg reads the mixture as one: not with --partition "
                                    "or --resume-from");
    v->mixture = s->input_cfg != NULL;
    if ((status = cli_take_paths(cmd, argc, argv, s)) >= 0)
        return status;
    const char *log[1] = {o->resume_from};
    return cli_refuse_reports_over_inputs(cmd, s, log, 1, o->report_html, o->report_json);
}

/*
 * Find the shards once, without reporting, so that the workers can be sized to them. A
 * dataset that cannot be opened is itself the problem to report.
 */
static int probe_dataset(validator *v, const sharc_reader_settings *base)
{
    sharc_reader_settings s = *base;
    s.decode = 0;
    v->layout = s.layout; /* the one asked for, until the dataset says which it is */
    sharc_reader *r = NULL;
    int rc = sharc_reader_open(&r, &s);
    if (rc < 0) {
        v->n_workers = 1;
        validate_report_stop(v, 0, rc, NULL, 1);
        return rc;
    }
    v->n_shards = sharc_reader_num_shards(r);
    v->n_ignored = sharc_reader_num_ignored_paths(r);
    v->layout = sharc_reader_layout(r);
    v->shard_names = calloc(v->n_shards ? v->n_shards : 1, sizeof *v->shard_names);
    for (size_t i = 0; v->shard_names && i < v->n_shards; i++)
        if ((v->shard_names[i] = strdup(sharc_reader_shard_path(r, i))) == NULL)
            v->oom = 1;
    sharc_reader_close(&r);
    v->left = calloc(v->n_shards ? v->n_shards : 1, 1);
    if (v->shard_names == NULL || v->left == NULL || v->oom ||
        report_set_shards(&v->report, v->n_shards, (const char *const *)v->shard_names) < 0) {
        fprintf(stderr, "sharc validate: out of memory\n");
        return SHARC_ERR(ENOMEM);
    }
    return 0;
}

/* A --resume-from log that cannot be read: the problem of the run (code "error"), so that
 * the summary and --json say it, as for a dataset that cannot be opened. */
static int resume_log_failed(validator *v, const char *path, int err)
{
    char msg[1200];
    snprintf(msg, sizeof msg, "cannot read --resume-from %s: %s", path, strerror(err));
    pthread_mutex_lock(&v->lock);
    validate_problem_locked(v, VALIDATE_CODE_ERROR, NULL, NULL, NULL, msg);
    pthread_mutex_unlock(&v->lock);
    return -1;
}

/* The shard paths that the shard records of a --json log name, into `done`. */
static int read_resume_log(validator *v, const char *path, vset *done)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return resume_log_failed(v, path, errno);
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
        const cJSON *shard = cJSON_GetObjectItemCaseSensitive(j, "shard");
        if (cJSON_IsString(type) && strcmp(type->valuestring, "shard") == 0 &&
            cJSON_IsString(shard))
            vset_insert(done, shard->valuestring, NULL, NULL, &v->oom);
        cJSON_Delete(j);
    }
    if (ferror(f))
        rc = resume_log_failed(v, path, errno ? errno : EIO);
    free(line);
    fclose(f);
    return rc;
}

/* The queue of shards to check: those of --partition, less those --resume-from finished. */
static int select_shards(validator *v, const validate_opts *o)
{
    size_t part = 0, parts = 1;
    vset done = {0};
    if (o->partition != NULL)
        parse_partition(o->partition, &part, &parts);
    if (o->resume_from != NULL && read_resume_log(v, o->resume_from, &done) < 0)
        return -1;
    v->queue = calloc(v->n_shards ? v->n_shards : 1, sizeof *v->queue);
    v->selected = calloc(v->n_shards ? v->n_shards : 1, 1);
    if (v->queue == NULL || v->selected == NULL) {
        vset_free(&done);
        fprintf(stderr, "sharc validate: out of memory\n");
        return -1;
    }
    size_t skipped = 0;
    for (size_t k = part; k < v->n_shards; k += parts) {
        if (vset_find(&done, v->shard_names[k]) != NULL) {
            skipped++;
            continue;
        }
        v->selected[k] = 1;
        v->queue[v->n_queue++] = k;
    }
    vset_free(&done);
    if (o->resume_from != NULL)
        fprintf(stderr, "sharc validate: %zu shard%s finished in %s, %zu to check\n", skipped,
                skipped == 1 ? "" : "s", o->resume_from, v->n_queue);
    return 0;
}

/*
 * Without --resume-from each worker reads a data-parallel slot of the dataset: with
 * --partition I/N and W workers, slot I + N * w of N * W (every shard k with k % N == I once,
 * whatever W); the slots may not outnumber the shards.
 */
static void plan_split(validator *v, const validate_opts *o)
{
    size_t part = 0, parts = 1;
    if (o->partition != NULL)
        parse_partition(o->partition, &part, &parts);
    v->per_shard = o->resume_from != NULL;
    if (v->per_shard || v->mixture || v->n_queue == 0)
        return;
    v->split_first = (int)part;
    if (v->n_shards < parts) { /* k % N == I only for k = I: slot I of n_shards */
        v->n_workers = 1;
        v->split_step = 0;
        v->split_size = (int)v->n_shards;
        return;
    }
    if ((size_t)v->n_workers > v->n_shards / parts)
        v->n_workers = (int)(v->n_shards / parts);
    v->split_step = (int)parts;
    v->split_size = (int)parts * v->n_workers;
}

/* A shard that gave no cut in a run that found no problem (a tar with no members, an empty
 * cuts file): not an error in any format, but most likely a writer that stopped early. Where
 * there are problems, a shard without cuts is one of them, or one a stopped reader never
 * reached, and the problems say more. */
static int empty_shard(const validator *v, size_t i)
{
    return v->problems == 0 && v->selected[i] && v->report.shards[i].cuts == 0;
}

static size_t count_empty_shards(const validator *v)
{
    size_t n = 0;
    for (size_t i = 0; v->selected && i < v->n_shards; i++)
        n += (size_t)empty_shard(v, i);
    return n;
}

/* The layout read: one, or "mixture" for an input_cfg's sources (of any layouts). */
static const char *layout_name(const validator *v)
{
    return v->mixture ? "mixture" : cli_layout_name(v->layout);
}

/* Most cuts first, then the lower rate. */
static int cmp_rate(const void *a, const void *b)
{
    const rate_count *x = a, *y = b;
    if (x->cuts != y->cuts)
        return x->cuts < y->cuts ? 1 : -1;
    return (x->rate > y->rate) - (x->rate < y->rate);
}

/* The rates met, most cuts first, into `out` (MAX_RATES entries); returns how many. */
static size_t sorted_rates(const validator *v, rate_count *out)
{
    memcpy(out, v->rates, v->n_rates * sizeof *out);
    qsort(out, v->n_rates, sizeof *out, cmp_rate);
    return v->n_rates;
}

static void print_summary(validator *v, double wall)
{
    rate_count rates[MAX_RATES];
    size_t n_rates = sorted_rates(v, rates);
    if (v->json) {
        FILE *f = stdout;
        printf("{\"type\":\"summary\",\"shards\":%zu,\"cuts\":%" PRIu64 ",\"problems\":%" PRIu64,
               v->n_shards, v->cuts, v->problems);
        cli_json_key(f, "audio_seconds", 0);
        cli_json_num(f, v->audio_seconds);
        cli_json_key(f, "layout", 0);
        cli_json_str(f, layout_name(v));
        printf(",\"threads\":%d,\"checked_shards\":%zu", v->n_workers, v->n_queue);
        cli_json_key(f, "wall_seconds", 0);
        cli_json_num(f, wall);
        cli_json_key(f, "sampling_rates", 0);
        fputc('{', f);
        for (size_t i = 0; i < n_rates; i++)
            printf("%s\"%d\":%" PRIu64, i ? "," : "", rates[i].rate, rates[i].cuts);
        fputc('}', f);
        printf(",\"other_rate_cuts\":%" PRIu64, v->other_rate_cuts);
        printf(",\"multichannel_cuts\":%" PRIu64, v->multichannel_cuts);
        printf(",\"shards_cut_short\":%" PRIu64, v->shards_cut_short);
        printf(",\"ignored_paths\":%zu", v->n_ignored);
        if (v->report.tokenized)
            printf(",\"tokens\":%" PRIu64, v->report.text_tokens);
        cli_json_key(f, "empty_shards", 0);
        fputc('[', f);
        for (size_t i = 0, k = 0; v->selected && i < v->n_shards; i++)
            if (empty_shard(v, i)) {
                if (k++)
                    fputc(',', f);
                cli_json_str(f, v->shard_names[i]);
            }
        fputc(']', f);
        cli_json_key(f, "by_code", 0);
        fputc('{', f);
        for (size_t i = 0; i < SHARC_PROBLEM_COUNT + 2; i++) {
            cli_json_key(f, validate_code_name(i), i == 0);
            printf("%" PRIu64, v->by_code[i]);
        }
        fputs("}}\n", f);
        return;
    }
    char a[32], b[32];
    printf("-- %zu shards (%s)", v->n_shards, layout_name(v));
    if (v->n_queue != v->n_shards) /* --partition, --resume-from: checked_shards of --json */
        printf(", %zu checked", v->n_queue);
    printf(", %" PRIu64 " cuts, %s of audio, %d threads, %s\n", v->cuts,
           cli_fmt_duration(a, sizeof a, v->audio_seconds), v->n_workers,
           cli_fmt_duration(b, sizeof b, wall));
    if (n_rates + (v->other_rate_cuts > 0) > 1) {
        printf("-- warning: several sampling rates: ");
        for (size_t i = 0; i < n_rates; i++)
            printf("%s%d Hz (%" PRIu64 " cuts)", i ? ", " : "", rates[i].rate, rates[i].cuts);
        if (v->other_rate_cuts)
            printf(", and %" PRIu64 " cuts at yet other rates", v->other_rate_cuts);
        printf(
            "\n   the rows of a batch share one rate: reading batches fails at a cut drawn into\n"
            "   a batch of another rate (or drops it, with sharc read --on-error skip);\n"
            "   --sampling-rate HZ lists every cut not at HZ\n");
    }
    if (v->n_ignored > 0)
        printf("-- note: %zu file%s or director%s beside the shards %s not read (stray files,\n"
               "   another layout's shards, subdirectories)%s\n",
               v->n_ignored, v->n_ignored == 1 ? "" : "s", v->n_ignored == 1 ? "y" : "ies",
               v->n_ignored == 1 ? "was" : "were",
               v->verbose ? ", named on stderr" : "; --verbose names them");
    size_t n_empty = count_empty_shards(v);
    if (n_empty > 0) {
        printf("-- warning: %zu shard%s gave no cut (and no problem): ", n_empty,
               n_empty == 1 ? "" : "s");
        for (size_t i = 0, k = 0; i < v->n_shards; i++) {
            if (!empty_shard(v, i))
                continue;
            if (k++ == 3) {
                printf(", ...");
                break;
            }
            printf("%s%s", k > 1 ? ", " : "", v->shard_names[i]);
        }
        printf("\n   a format allows an empty shard, but a writer that stopped early leaves one\n");
    }
    if (v->multichannel_cuts > 0)
        printf("-- warning: %" PRIu64 " cuts have more than one channel (up to %d): the rows of a\n"
               "   batch hold one channel, so reading batches needs --channel C (0..%d)\n",
               v->multichannel_cuts, v->max_channels, v->max_channels - 1);
    if (v->problems == 0) {
        printf("-- OK: no problems found\n");
        return;
    }
    printf("-- %" PRIu64 " problems:", v->problems);
    for (size_t i = 0; i < SHARC_PROBLEM_COUNT + 2; i++) {
        if (v->by_code[i] > 0)
            printf(" %s %" PRIu64, validate_code_name(i), v->by_code[i]);
    }
    putchar('\n');
    for (size_t i = 0; i < SHARC_PROBLEM_COUNT + 2; i++) {
        if (v->by_code[i] > VALIDATE_TEXT_EXAMPLES)
            printf("-- %s: the first %d of %" PRIu64 " are printed above (--json, --report list "
                   "them all)\n",
                   validate_code_name(i), VALIDATE_TEXT_EXAMPLES, v->by_code[i]);
    }
    if (v->shards_cut_short)
        printf("-- %" PRIu64 " shard%s not checked to the end: the problem reported for %s\n"
               "   stops reading a shard (a damaged archive, members that no longer pair with\n"
               "   the cuts); fix it and validate again\n",
               v->shards_cut_short, v->shards_cut_short == 1 ? "" : "s",
               v->shards_cut_short == 1 ? "it" : "each");
}

/* A report that could not be written once the corpus is read: the problem of the run, found
 * before reading it (the report is then not written at the end). Returns 1 when there is one. */
static int report_unwritable(validator *v, validate_opts *o)
{
    const char *paths[2] = {o->report_html, o->report_json};
    for (int k = 0; k < 2; k++) {
        int err = paths[k] != NULL ? cli_check_writable(paths[k]) : 0;
        if (err == 0)
            continue;
        char msg[1200];
        snprintf(msg, sizeof msg, "cannot write the report %s: %s", paths[k], strerror(err));
        pthread_mutex_lock(&v->lock);
        validate_problem_locked(v, VALIDATE_CODE_ERROR, NULL, NULL, NULL, msg);
        pthread_mutex_unlock(&v->lock);
        o->report_html = o->report_json = NULL;
        return 1;
    }
    return 0;
}

/* Write --report and --report-json; a failure is named on stderr. */
static int save_report(validator *v, const validate_opts *o, double wall)
{
    report *r = &v->report;
    r->command = "sharc validate";
    r->layout = layout_name(v);
    r->threads = v->n_workers;
    r->wall_seconds = wall;
    r->shards_cut_short = v->shards_cut_short;
    r->checked_shards = v->n_queue;
    const char *failed = NULL;
    int err = r->oom ? ENOMEM : report_save(r, o->report_html, o->report_json, &failed);
    if (err != 0) {
        fprintf(stderr, "sharc validate: cannot write the report %s: %s\n", failed ? failed : "",
                strerror(err));
        return -1;
    }
    return 0;
}

static void validator_free(validator *v)
{
    report_free(&v->report);
    vset_free(&v->ids);
    vset_free(&v->open_problems);
    vset_free(&v->other_shards);
    if (v->shard_names != NULL) {
        for (size_t i = 0; i < v->n_shards; i++)
            free(v->shard_names[i]);
        free(v->shard_names);
    }
    free(v->left);
    free(v->queue);
    free(v->selected);
    free(v->workers);
    pthread_mutex_destroy(&v->lock);
}

int cmd_validate(int argc, char **argv)
{
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    validator v = {.lock = PTHREAD_MUTEX_INITIALIZER};
    validate_opts o = {.threads = 0, .progress = 1};
    int status = parse_args(argc, argv, &s, &v, &o);
    if (status >= 0) {
        cli_reader_opts_free(&o.ro);
        return status;
    }

    /* Problems are printed by the tool; the library's log messages would repeat them. */
    cli_logger(&s.logger, o.verbose ? SHARC_LOG_WARN : CLI_LOG_SILENT);
    s.on_error = SHARC_ON_ERROR_SKIP;
    s.shuffle_shards = 0;
    s.epochs = 1;
    s.decode = 1;
    s.mix_finite = 1;

    double t0 = cli_now();
    cli_progress_init(&v.progress, o.progress);
    status = CLI_EXIT_FAIL;
    if (report_init(&v.report) < 0) {
        fprintf(stderr, "sharc validate: out of memory\n");
        validator_free(&v);
        cli_reader_opts_free(&o.ro);
        return cli_finish_output(cmd, status);
    }
    v.report.tokenized = s.n_tokenizer > 0;
    if (report_unwritable(&v, &o) || probe_dataset(&v, &s) < 0 || select_shards(&v, &o) < 0)
        goto done;
    int threads = v.mixture ? 1 : o.threads > 0 ? o.threads : cli_online_cpus();
    v.n_workers = (size_t)threads < v.n_queue ? threads : (int)v.n_queue;
    if (v.n_workers < 1)
        v.n_workers = 1;
    plan_split(&v, &o);
    v.workers = calloc((size_t)v.n_workers, sizeof *v.workers);
    if (v.workers == NULL) {
        fprintf(stderr, "sharc validate: out of memory\n");
        goto done;
    }
    if (v.n_queue > 0 && validate_run(&v, &s) < 0)
        goto done;
    if (v.oom) {
        fprintf(stderr, "sharc validate: out of memory; duplicate ids may be missed\n");
        goto done;
    }
    status = v.problems > 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
done:
    cli_progress_clear(&v.progress);
    double wall = cli_now() - t0;
    print_summary(&v, wall);
    if ((o.report_html != NULL || o.report_json != NULL) && save_report(&v, &o, wall) < 0)
        status = CLI_EXIT_FAIL;
    validator_free(&v);
    cli_reader_opts_free(&o.ro);
    return cli_finish_output(cmd, status);
}

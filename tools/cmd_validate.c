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
#include "report.h"

static const char *const cmd = "validate";

/* Problem codes the tool adds to the library's sharc_problem_name() codes. */
static const char *const CODE_DUPLICATE = "duplicate_id";
static const char *const CODE_ERROR = "error";

typedef struct validate_opts {
    int threads; /* 0 = online CPUs */
    int progress;
    int verbose;
    int json, per_cut; /* for the validator */
    const char *report_html, *report_json;
} validate_opts;

#define OWN(field) .target = CLI_T_CMD, .offset = offsetof(validate_opts, field)

/* --threads counts readers here, not decode threads: validate has its own. */
static const cli_opt options[] = {
    CLI_USE(cli_reader_group, "layout", NULL),
    {CLI_OPT_INT, "threads", .metavar = "N", OWN(threads), .min = 1, .max = 1024,
     .help = "readers running in parallel, each on every N-th shard\n"
             "(default: the number of online CPUs, at most one per shard)"},
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
        "  {\"type\":\"summary\",\"shards\",\"cuts\",\"problems\",\"audio_seconds\",\"layout\",\n"
        "   \"threads\",\"wall_seconds\",\"sampling_rates\":{<Hz>:cuts,...},\"other_rate_cuts\",\n"
        "   \"multichannel_cuts\",\"shards_cut_short\",\"ignored_paths\",\n"
        "   \"empty_shards\":[<path>,...],\"by_code\":{<code>:count,...}}          last\n"
        "peak is the largest absolute decoded sample (float32, full scale 1.0), rms_dbfs is\n"
        "20*log10(RMS) over all samples and channels, null for digital silence. shard, member\n"
        "and cut_id are null when unknown. cuts counts the cuts read completely; sampling_rates\n"
        "counts them by rate (at most 32 rates, the cuts at others are other_rate_cuts) and\n"
        "multichannel_cuts those with more than one channel. The text summary warns when there\n"
        "are several rates (the rows of a batch share one) and when cuts have several channels\n"
        "(batches hold one: 'sharc read' needs --channel). empty_shards lists, when no problem\n"
        "was found, the shards that gave no cut (a tar with no members, an empty cuts file):\n"
        "a format allows them, but a writer that stopped early leaves them; the text summary\n"
        "warns.\n"
        "\n"
        "The report (--report, --report-json) holds the totals (cuts, shards, hours, bytes,\n"
        "layout, codecs), a duration histogram, sampling rates and channels, characters per\n"
        "second of the transcripts with the outliers by cut id, signal checks made while\n"
        "decoding (digital silence, clipping, DC offset, decoded length against the metadata),\n"
        "a table of the shards and the problems grouped by kind; docs/cli.md describes its JSON.\n"
        "Each file is written under a temporary name and renamed once complete.\n"
        "\n"
        "Exit status: 0 no problems, 1 problems found (or the dataset could not be opened, or\n"
        "a report could not be written), 2 usage error.\n"
        "\n"
        "Example:\n"
        "  sharc validate --json --per-cut --threads 8 data/shar > report.jsonl\n");
}

/* ---- A hash set of strings with a payload, for ids and problem signatures ---- */

typedef struct entry {
    char *key;
    const char *shard; /* interned, owned by the validator */
    char *member;
} entry;

typedef struct str_set {
    entry *slots;
    size_t cap; /* power of two */
    size_t count;
} str_set;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static entry *set_find_slot(entry *slots, size_t cap, const char *key)
{
    size_t i = (size_t)hash_str(key) & (cap - 1);
    while (slots[i].key != NULL && strcmp(slots[i].key, key) != 0)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int set_grow(str_set *set)
{
    size_t cap = set->cap ? set->cap * 2 : 1024;
    entry *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < set->cap; i++) {
        if (set->slots[i].key != NULL)
            *set_find_slot(slots, cap, set->slots[i].key) = set->slots[i];
    }
    free(set->slots);
    set->slots = slots;
    set->cap = cap;
    return 0;
}

/*
 * Look `key` up; when absent insert it (copying key and member) and return NULL. When
 * present return the existing entry. *oom is set when memory ran out.
 */
static const entry *set_insert(str_set *set, const char *key, const char *shard, const char *member,
                               int *oom)
{
    if ((set->count + 1) * 2 > set->cap && set_grow(set) < 0) {
        *oom = 1;
        return NULL;
    }
    entry *e = set_find_slot(set->slots, set->cap, key);
    if (e->key != NULL)
        return e;
    e->key = strdup(key);
    e->member = member ? strdup(member) : NULL;
    if (e->key == NULL || (member && e->member == NULL)) {
        free(e->key);
        free(e->member);
        e->key = e->member = NULL;
        *oom = 1;
        return NULL;
    }
    e->shard = shard;
    set->count++;
    return NULL;
}

static void set_free(str_set *set)
{
    for (size_t i = 0; i < set->cap; i++) {
        free(set->slots[i].key);
        free(set->slots[i].member);
    }
    free(set->slots);
    set->slots = NULL;
    set->cap = set->count = 0;
}

/* ---- The validator shared by the worker threads ---- */

typedef struct worker worker;

/* A batch holds one sampling rate, so a dataset with several is worth a warning. */
#define MAX_RATES 32
typedef struct rate_count {
    int rate;
    uint64_t cuts;
} rate_count;

typedef struct validator {
    pthread_mutex_t lock;
    int json, per_cut;
    size_t n_shards;
    size_t n_ignored; /* paths found but not read (sharc_reader_num_ignored_paths) */
    sharc_layout layout;
    int n_workers;
    worker *workers;
    /* Guarded by lock: */
    uint64_t cuts;
    double audio_seconds;
    rate_count rates[MAX_RATES]; /* sampling rates met, in order of first sight */
    size_t n_rates;
    uint64_t other_rate_cuts;   /* cuts at rates beyond MAX_RATES */
    uint64_t multichannel_cuts; /* batches hold one channel: these need --channel */
    int max_channels;
    uint64_t problems;
    uint64_t shards_cut_short;                 /* shards whose rest was not read after a problem */
    uint64_t by_code[SHARC_PROBLEM_COUNT + 2]; /* + duplicate_id, error */
    str_set ids;
    str_set open_problems; /* problems reported while opening, once for all workers */
    char **shard_names;    /* shard paths by shard_index, from the probe's reader */
    uint64_t *shard_cuts;  /* cuts read, by shard_index */
    str_set other_shards;  /* interned shard paths without a usable index */
    report *report;        /* with --report or --report-json */
    int oom;
    cli_progress progress;
} validator;

struct worker {
    validator *v;
    const sharc_reader_settings *base;
    int rank;
    int opening; /* inside sharc_reader_open */
    int running;
    uint64_t shards_opened;
    pthread_t thread;
};

static size_t code_index(const char *code)
{
    if (code == CODE_DUPLICATE)
        return SHARC_PROBLEM_COUNT;
    if (code == CODE_ERROR)
        return SHARC_PROBLEM_COUNT + 1;
    for (int k = 0; k < SHARC_PROBLEM_COUNT; k++) {
        if (strcmp(code, sharc_problem_name((sharc_problem)k)) == 0)
            return (size_t)k;
    }
    return SHARC_PROBLEM_COUNT + 1;
}

static const char *code_name(size_t i)
{
    if (i == SHARC_PROBLEM_COUNT)
        return CODE_DUPLICATE;
    if (i == SHARC_PROBLEM_COUNT + 1)
        return CODE_ERROR;
    return sharc_problem_name((sharc_problem)i);
}

/* The problem code for a reader that stopped with `rc`. */
static const char *code_of_error(int rc)
{
    switch (rc) {
    case SHARC_ERR_CORRUPT:
    case SHARC_ERR_IO:
        return sharc_problem_name(SHARC_PROBLEM_ARCHIVE);
    case SHARC_ERR_FORMAT:
        return sharc_problem_name(SHARC_PROBLEM_LAYOUT);
    case SHARC_ERR_MISMATCH:
        return sharc_problem_name(SHARC_PROBLEM_ID_MISMATCH);
    case SHARC_ERR_DECODE:
        return sharc_problem_name(SHARC_PROBLEM_DECODE);
    case SHARC_ERR_AUDIO_MISMATCH:
        return sharc_problem_name(SHARC_PROBLEM_AUDIO_FORMAT);
    case SHARC_ERR_TOO_LARGE:
        return sharc_problem_name(SHARC_PROBLEM_TOO_LARGE);
    case SHARC_ERR_JSON:
        return sharc_problem_name(SHARC_PROBLEM_JSON);
    default:
        return CODE_ERROR;
    }
}

/* Append " shard=X" etc. for what the message does not already name. */
static void print_missing_origin(const char *label, const char *value, const char *message)
{
    if (value != NULL && (message == NULL || strstr(message, value) == NULL))
        printf(" %s=%s", label, value);
}

/* Emit one problem. Called with v->lock held. */
static void emit_problem_locked(validator *v, const char *code, const char *shard,
                                const char *member, const char *cut_id, const char *message)
{
    v->problems++;
    v->by_code[code_index(code)]++;
    if (v->report != NULL)
        report_add_problem(v->report, code, shard, member, cut_id, message);
    cli_progress_clear(&v->progress);
    if (v->json) {
        FILE *f = stdout;
        fputc('{', f);
        cli_json_key(f, "type", 1);
        cli_json_str(f, "problem");
        cli_json_key(f, "code", 0);
        cli_json_str(f, code);
        cli_json_key(f, "shard", 0);
        cli_json_str(f, shard);
        cli_json_key(f, "member", 0);
        cli_json_str(f, member);
        cli_json_key(f, "cut_id", 0);
        cli_json_str(f, cut_id);
        cli_json_key(f, "message", 0);
        cli_json_str(f, message);
        fputs("}\n", f);
    } else {
        printf("problem %s: %s", code, message ? message : "");
        print_missing_origin("shard", shard, message);
        print_missing_origin("member", member, message);
        print_missing_origin("cut", cut_id, message);
        putchar('\n');
    }
    fflush(stdout);
}

static void on_problem(void *cookie, const sharc_problem_report *p)
{
    worker *w = cookie;
    validator *v = w->v;
    const char *code = sharc_problem_name(p->kind);
    pthread_mutex_lock(&v->lock);
    /* Every worker opens the same dataset, so what is found while opening would be
     * reported by each of them; report each such problem once. */
    int seen = 0;
    if (w->opening) {
        char sig[4096];
        snprintf(sig, sizeof sig, "%s\x1f%s\x1f%s\x1f%s\x1f%s", code, p->shard ? p->shard : "",
                 p->member ? p->member : "", p->cut_id ? p->cut_id : "",
                 p->message ? p->message : "");
        seen = set_insert(&v->open_problems, sig, NULL, NULL, &v->oom) != NULL;
    }
    if (!seen)
        emit_problem_locked(v, code, p->shard, p->member, p->cut_id, p->message);
    pthread_mutex_unlock(&v->lock);
}

/* A stable copy of a shard path, shared by all ids of that shard. Called with the lock. */
static const char *intern_shard_locked(validator *v, const char *shard, uint32_t index)
{
    if (shard == NULL)
        return NULL;
    if (index < v->n_shards && strcmp(v->shard_names[index], shard) == 0)
        return v->shard_names[index];
    /* A shard index that names several files (or none): keep one copy per path. */
    const entry *e = set_insert(&v->other_shards, shard, NULL, NULL, &v->oom);
    if (e != NULL)
        return e->key;
    e = set_find_slot(v->other_shards.slots, v->other_shards.cap, shard);
    return e->key;
}

static void emit_cut_locked(validator *v, const sharc_cut *c, const report_signal *st)
{
    double dbfs = st->rms > 0 ? 20.0 * log10(st->rms) : -INFINITY;
    cli_progress_clear(&v->progress);
    if (v->json) {
        FILE *f = stdout;
        fputc('{', f);
        cli_json_key(f, "type", 1);
        cli_json_str(f, "cut");
        cli_json_key(f, "id", 0);
        cli_json_str(f, c->id);
        cli_json_key(f, "shard", 0);
        cli_json_str(f, c->shard);
        cli_json_key(f, "member", 0);
        cli_json_str(f, c->member);
        cli_json_key(f, "duration", 0);
        cli_json_num(f, c->duration);
        fprintf(f, ",\"num_samples\":%" PRId64 ",\"sampling_rate\":%d,\"channels\":%d",
                c->num_samples, c->sampling_rate, c->channels);
        cli_json_key(f, "peak", 0);
        cli_json_num(f, st->peak);
        cli_json_key(f, "rms_dbfs", 0);
        cli_json_num(f, dbfs);
        fputs("}\n", f);
    } else {
        printf("cut %s %.3fs %dHz %dch %" PRId64 " samples peak %.4f rms %.1f dBFS %s:%s\n",
               c->id ? c->id : "?", c->duration, c->sampling_rate, c->channels, c->num_samples,
               st->peak, dbfs, c->shard ? c->shard : "?", c->member ? c->member : "?");
    }
}

static void draw_progress_locked(validator *v, int force)
{
    if (!v->progress.enabled)
        return;
    uint64_t done = 0;
    for (int i = 0; i < v->n_workers; i++) {
        /* A running worker's latest shard is still being read. */
        uint64_t opened = v->workers[i].shards_opened;
        done += opened - (v->workers[i].running && opened > 0 ? 1 : 0);
    }
    char cuts[32], suffix[160];
    snprintf(suffix, sizeof suffix,
             "shards %" PRIu64 "/%zu, %s cuts, %.2f h audio, %" PRIu64 " problems", done,
             v->n_shards, cli_fmt_count(cuts, sizeof cuts, (double)v->cuts),
             v->audio_seconds / 3600.0, v->problems);
    cli_progress_update(&v->progress, (double)done, (double)v->n_shards, suffix, force);
}

static void count_rate_locked(validator *v, int rate)
{
    for (size_t i = 0; i < v->n_rates; i++) {
        if (v->rates[i].rate == rate) {
            v->rates[i].cuts++;
            return;
        }
    }
    if (v->n_rates == MAX_RATES) {
        v->other_rate_cuts++;
        return;
    }
    v->rates[v->n_rates++] = (rate_count){rate, 1};
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

static void on_cut(worker *w, sharc_reader *r, const sharc_cut *c)
{
    validator *v = w->v;
    report_signal st = {0};
    if (c->samples != NULL)
        report_signal_compute(c->samples, (size_t)c->num_samples * (size_t)c->channels, &st);
    sharc_reader_stats rs;
    sharc_reader_get_stats(r, &rs);

    pthread_mutex_lock(&v->lock);
    w->shards_opened = rs.shards;
    v->cuts++;
    if (c->shard_index < v->n_shards)
        v->shard_cuts[c->shard_index]++;
    v->audio_seconds += c->duration;
    count_rate_locked(v, c->sampling_rate);
    if (c->channels > 1) {
        v->multichannel_cuts++;
        v->max_channels = c->channels > v->max_channels ? c->channels : v->max_channels;
    }
    if (v->per_cut)
        emit_cut_locked(v, c, &st);
    if (v->report != NULL) {
        report_cut rc = {.id = c->id,
                         .shard = c->shard,
                         .text = c->text,
                         .shard_index = c->shard_index,
                         .duration = c->duration,
                         .sampling_rate = c->sampling_rate,
                         .channels = c->channels,
                         .num_samples = c->num_samples,
                         .audio = c->audio,
                         .audio_nbytes = c->audio_nbytes,
                         .signal = c->samples != NULL ? &st : NULL};
        report_add_cut(v->report, &rc);
    }
    if (c->id != NULL) {
        const char *shard = intern_shard_locked(v, c->shard, c->shard_index);
        const entry *first = set_insert(&v->ids, c->id, shard, c->member, &v->oom);
        if (first != NULL) {
            char msg[2048];
            snprintf(msg, sizeof msg,
                     "duplicate cut id '%s' in %s member %s; first seen in %s "
                     "member %s",
                     c->id, c->shard ? c->shard : "?", c->member ? c->member : "?",
                     first->shard ? first->shard : "?", first->member ? first->member : "?");
            emit_problem_locked(v, CODE_DUPLICATE, c->shard, c->member, c->id, msg);
        }
    }
    draw_progress_locked(v, 0);
    pthread_mutex_unlock(&v->lock);
}

static void report_stop(worker *w, int rc, const char *why, int opening)
{
    validator *v = w->v;
    char logged[1024];
    if (why == NULL || why[0] == '\0')
        why = cli_last_logged_error(logged, sizeof logged);
    char msg[1400], text[1200];
    cli_error_text(text, sizeof text, rc, why);
    if (opening)
        snprintf(msg, sizeof msg, "cannot open the dataset: %s", text);
    else
        snprintf(msg, sizeof msg, "reader %d of %d stopped: %s", w->rank, v->n_workers, text);
    pthread_mutex_lock(&v->lock);
    emit_problem_locked(v, code_of_error(rc), NULL, NULL, NULL, msg);
    pthread_mutex_unlock(&v->lock);
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    sharc_reader_settings s = *w->base;
    s.dp_rank = w->rank;
    s.dp_size = w->v->n_workers;
    s.on_problem = on_problem;
    s.problem_cookie = w;

    sharc_reader *r = NULL;
    w->opening = 1;
    int rc = sharc_reader_open(&r, &s);
    w->opening = 0;
    if (rc < 0) {
        report_stop(w, rc, NULL, 1);
        goto done;
    }
    const sharc_cut *c = NULL;
    while ((rc = sharc_reader_next(r, &c)) == 0)
        on_cut(w, r, c);
    if (rc < 0)
        report_stop(w, rc, sharc_reader_last_error(r), 0);
    sharc_reader_stats rs;
    sharc_reader_get_stats(r, &rs);
    pthread_mutex_lock(&w->v->lock);
    w->shards_opened = rs.shards;
    w->v->shards_cut_short += rs.skipped_shards;
    pthread_mutex_unlock(&w->v->lock);
done:
    sharc_reader_close(&r);
    pthread_mutex_lock(&w->v->lock);
    w->running = 0;
    draw_progress_locked(w->v, 1);
    pthread_mutex_unlock(&w->v->lock);
    return NULL;
}

/* ---- Options ---- */

static int parse_args(int argc, char **argv, sharc_reader_settings *s, validator *v,
                      validate_opts *o)
{
    cli_parser p = {.cmd = cmd,
                    .table = options,
                    .print_help = print_help,
                    .own = o,
                    .reader = s,
                    .argc = argc,
                    .argv = argv};
    int status = cli_opts_parse(&p);
    if (status >= 0)
        return status;
    v->json = o->json;
    v->per_cut = o->per_cut;
    return cli_take_paths(cmd, argc, argv, s);
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
        worker w = {.v = v, .rank = 0};
        v->n_workers = 1;
        report_stop(&w, rc, NULL, 1);
        return rc;
    }
    v->n_shards = sharc_reader_num_shards(r);
    v->n_ignored = sharc_reader_num_ignored_paths(r);
    v->layout = sharc_reader_layout(r);
    v->shard_names = calloc(v->n_shards ? v->n_shards : 1, sizeof *v->shard_names);
    v->shard_cuts = calloc(v->n_shards ? v->n_shards : 1, sizeof *v->shard_cuts);
    for (size_t i = 0; v->shard_names && i < v->n_shards; i++)
        if ((v->shard_names[i] = strdup(sharc_reader_shard_path(r, i))) == NULL)
            v->oom = 1;
    sharc_reader_close(&r);
    if (v->shard_names == NULL || v->shard_cuts == NULL || v->oom) {
        fprintf(stderr, "sharc validate: out of memory\n");
        return SHARC_ERR(ENOMEM);
    }
    return 0;
}

/* A shard that gave no cut in a run that found no problem (a tar with no members, an empty
 * cuts file): not an error in any format, but most likely a writer that stopped early. Where
 * there are problems, a shard without cuts is one of them, or one a stopped reader never
 * reached, and the problems say more. */
static int empty_shard(const validator *v, size_t i)
{
    return v->problems == 0 && v->shard_cuts[i] == 0;
}

static size_t count_empty_shards(const validator *v)
{
    size_t n = 0;
    for (size_t i = 0; v->shard_cuts && i < v->n_shards; i++)
        n += (size_t)empty_shard(v, i);
    return n;
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
        cli_json_str(f, cli_layout_name(v->layout));
        printf(",\"threads\":%d", v->n_workers);
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
        cli_json_key(f, "empty_shards", 0);
        fputc('[', f);
        for (size_t i = 0, k = 0; v->shard_cuts && i < v->n_shards; i++)
            if (empty_shard(v, i)) {
                if (k++)
                    fputc(',', f);
                cli_json_str(f, v->shard_names[i]);
            }
        fputc(']', f);
        cli_json_key(f, "by_code", 0);
        fputc('{', f);
        for (size_t i = 0; i < SHARC_PROBLEM_COUNT + 2; i++) {
            cli_json_key(f, code_name(i), i == 0);
            printf("%" PRIu64, v->by_code[i]);
        }
        fputs("}}\n", f);
        return;
    }
    char a[32], b[32];
    printf("-- %zu shards (%s), %" PRIu64 " cuts, %s of audio, %d threads, %s\n", v->n_shards,
           cli_layout_name(v->layout), v->cuts, cli_fmt_duration(a, sizeof a, v->audio_seconds),
           v->n_workers, cli_fmt_duration(b, sizeof b, wall));
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
               "   another layout's shards, subdirectories); --verbose names them\n",
               v->n_ignored, v->n_ignored == 1 ? "" : "s", v->n_ignored == 1 ? "y" : "ies",
               v->n_ignored == 1 ? "was" : "were");
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
            printf(" %s %" PRIu64, code_name(i), v->by_code[i]);
    }
    putchar('\n');
    if (v->shards_cut_short)
        printf("-- %" PRIu64 " shard%s not checked to the end: the problem reported for %s\n"
               "   stops reading a shard (a damaged archive, members that no longer pair with\n"
               "   the cuts); fix it and validate again\n",
               v->shards_cut_short, v->shards_cut_short == 1 ? "" : "s",
               v->shards_cut_short == 1 ? "it" : "each");
}

/* Write --report and --report-json; a failure is named on stderr. */
static int save_report(validator *v, const validate_opts *o, double wall)
{
    report *r = v->report;
    r->command = "sharc validate";
    r->layout = cli_layout_name(v->layout);
    r->threads = v->n_workers;
    r->wall_seconds = wall;
    r->shards_cut_short = v->shards_cut_short;
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
    if (v->report != NULL)
        report_free(v->report);
    set_free(&v->ids);
    set_free(&v->open_problems);
    set_free(&v->other_shards);
    free(v->shard_cuts);
    if (v->shard_names != NULL) {
        for (size_t i = 0; i < v->n_shards; i++)
            free(v->shard_names[i]);
        free(v->shard_names);
    }
    free(v->workers);
    pthread_mutex_destroy(&v->lock);
}

static int run_workers(validator *v, const sharc_reader_settings *s)
{
    int started = 0;
    for (int i = 0; i < v->n_workers; i++) {
        worker *w = &v->workers[i];
        *w = (worker){.v = v, .base = s, .rank = i, .running = 1};
    }
    for (; started < v->n_workers; started++) {
        if (pthread_create(&v->workers[started].thread, NULL, run_worker, &v->workers[started]) !=
            0)
            break;
    }
    for (int i = 0; i < started; i++)
        pthread_join(v->workers[i].thread, NULL);
    if (started < v->n_workers) {
        /* Without all workers some shards would go unchecked: that is not a clean run. */
        fprintf(stderr, "sharc validate: could only start %d of %d threads\n", started,
                v->n_workers);
        return -1;
    }
    return 0;
}

int cmd_validate(int argc, char **argv)
{
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    validator v = {.lock = PTHREAD_MUTEX_INITIALIZER};
    validate_opts o = {.threads = 0, .progress = 1};
    int status = parse_args(argc, argv, &s, &v, &o);
    if (status >= 0)
        return status;

    /* Problems are printed by the tool; the library's log messages would repeat them. */
    cli_logger(&s.logger, o.verbose ? SHARC_LOG_WARN : CLI_LOG_SILENT);
    s.on_error = SHARC_ON_ERROR_SKIP;
    s.shuffle_shards = 0;
    s.epochs = 1;
    s.decode = 1;

    double t0 = cli_now();
    cli_progress_init(&v.progress, o.progress);
    status = CLI_EXIT_FAIL;
    report rep;
    if (o.report_html != NULL || o.report_json != NULL) {
        if (report_init(&rep) < 0) {
            fprintf(stderr, "sharc validate: out of memory\n");
            goto done;
        }
        v.report = &rep;
    }
    if (probe_dataset(&v, &s) < 0)
        goto done;
    if (v.report != NULL &&
        report_set_shards(v.report, v.n_shards, (const char *const *)v.shard_names) < 0) {
        fprintf(stderr, "sharc validate: out of memory\n");
        goto done;
    }
    int threads = o.threads > 0 ? o.threads : cli_online_cpus();
    v.n_workers = (size_t)threads < v.n_shards ? threads : (int)v.n_shards;
    if (v.n_workers < 1)
        v.n_workers = 1;
    v.workers = calloc((size_t)v.n_workers, sizeof *v.workers);
    if (v.workers == NULL) {
        fprintf(stderr, "sharc validate: out of memory\n");
        goto done;
    }
    if (run_workers(&v, &s) < 0)
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
    if (v.report != NULL && save_report(&v, &o, wall) < 0)
        status = CLI_EXIT_FAIL;
    validator_free(&v);
    return cli_finish_output(cmd, status);
}

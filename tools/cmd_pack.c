/*
 * sharc pack: write shards (Lhotse Shar or NeMo tarred audio) from NeMo-style JSON-lines
 * manifests of audio files, through sharc_writer (include/sharc/writer.h), which copies the
 * audio byte for byte and writes the layouts' files. The manifests are read here: they are
 * this command's input format, not a shard layout, and every line and every file is checked
 * (sharc_writer_check) before the first byte is written.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

static const char *const cmd = "pack";

/* A manifest's duration may differ from the audio's by this much (seconds). */
#define PACK_DURATION_TOLERANCE 0.1

typedef struct pack_opts {
    const char **manifests;
    size_t n_manifests;
    const char *out;
    sharc_layout layout;
    sharc_writer_compression compress;
    int cuts_per_shard;
    int json, quiet, dry_run;
} pack_opts;

/* One audio file to pack: what its manifest line says and what its header says. */
typedef struct pack_entry {
    char *id, *path, *text, *speaker, *lang;
    size_t manifest; /* index into opts.manifests */
    long line;
    double manifest_duration; /* NAN when the line has none */
    sharc_writer_audio audio; /* what its header says */
} pack_entry;

typedef struct pack_list {
    pack_entry *v;
    size_t n, cap;
} pack_list;

/* Every failure is recorded for the {"error"} object --json ends with (cli_fail). */
#define fail_with(...) cli_fail(cmd, __VA_ARGS__)

/* --manifest FILE, once per manifest. */
static int add_manifest(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    pack_opts *o = p->own;
    const char **m = realloc(o->manifests, (o->n_manifests + 1) * sizeof *m);
    if (!m)
        return cli_usage_error(cmd, "out of memory"), -1;
    m[o->n_manifests++] = val;
    o->manifests = m;
    return 0;
}

/* --layout and --compress are stored as ints (CLI_OPT_ENUM) into these enums. */
_Static_assert(sizeof(sharc_layout) == sizeof(int), "sharc_layout is stored as an int");
_Static_assert(sizeof(sharc_writer_compression) == sizeof(int),
               "sharc_writer_compression is stored as an int");
static const int layouts[] = {SHARC_LAYOUT_SHAR, SHARC_LAYOUT_NEMO};
static const int compressions[] = {SHARC_WRITER_COMPRESS_NONE, SHARC_WRITER_COMPRESS_GZIP,
                                   SHARC_WRITER_COMPRESS_ZSTD};

#define OWN(field) .target = CLI_T_CMD, .offset = offsetof(pack_opts, field)

static const cli_opt options[] = {
    {CLI_OPT_CUSTOM, "manifest", .metavar = "FILE", .handler = add_manifest,
     .help = "a JSON-lines manifest; may be given several times (required)"},
    {CLI_OPT_STRING, "out", .metavar = "DIR", OWN(out),
     .help = "output folder, created; it must be empty or absent (required)"},
    {CLI_OPT_ENUM, "layout", .metavar = "L", OWN(layout), .choices = "shar|nemo", .values = layouts,
     .help = "shar or nemo (default shar)"},
    {CLI_OPT_INT, "cuts-per-shard", .metavar = "N", OWN(cuts_per_shard), .min = 1, .max = 100000000,
     .help = "cuts per shard, 1 <= N (default 1000, as Lhotse)"},
    {CLI_OPT_ENUM, "compress", .metavar = "Z", OWN(compress), .choices = "none|gzip|zstd",
     .values = compressions,
     .help = "none, gzip or zstd: compression of the tars (default none,\n"
             "as Lhotse writes them); Shar cuts files are always .jsonl.gz\n"
             "and NeMo manifests plain JSON lines. Lhotse reads .tar.gz but\n"
             "not .tar.zst; sharc reads all three."},
    {CLI_OPT_FLAG, "json", OWN(json), .min = 1,
     .help = "print one JSON object at the end instead of the summary line"},
    {CLI_OPT_FLAG, "quiet", OWN(quiet), .min = 1, .help = "no progress line and no summary line"},
    {CLI_OPT_FLAG, "dry-run", OWN(dry_run), .min = 1,
     .help = "check every line, every file and --out as a real run does,\n"
             "then write nothing: the summary says what would be written\n"
             "(JSON: the same object with \"dry_run\":true, bytes = the\n"
             "audio files' bytes)"},
    CLI_HELP_OPT,
    CLI_END,
};

#undef OWN

static void print_help(void)
{
    printf("Usage: sharc pack --manifest FILE [--manifest FILE...] --out DIR [options]\n"
           "\n"
           "Write shards from NeMo-style JSON-lines manifests of audio files: Lhotse Shar\n"
           "(cuts.NNNNNN.jsonl.gz + recording.NNNNNN.tar, as Lhotse's SharWriter writes them\n"
           "with fields {\"recording\": <the file's own format>}) or NeMo tarred audio\n"
           "(audio_N.tar + sharded_manifests/manifest_N.json + tarred_audio_manifest.json).\n"
           "The audio is copied byte for byte, never re-encoded; its header (libsndfile) gives\n"
           "the sampling rate, channels and length. WAV, FLAC, Ogg Opus/Vorbis and MP3 files\n"
           "are taken. Cuts keep the manifests' order.\n"
           "\n"
           "Manifest lines are JSON objects:\n"
           "  audio_filepath   required; a relative path is relative to the manifest's folder\n"
           "  duration         optional; more than 0.1 s away from the audio's is an error\n"
           "  id               optional cut id (default: the file name without its extension);\n"
           "                   ids must be unique across all manifests and usable as relative\n"
           "                   paths (no control characters, leading '/', '.' or '..' parts)\n"
           "  text, speaker, lang (or language)   optional; become the cut's supervision\n"
           "  offset           only 0 is accepted: whole files are packed (no windows)\n"
           "Blank lines are ignored; any other line that is not one such object (UTF-8, no\n"
           "NUL, each of the keys above once, nothing after it) is an error. Files must be\n"
           "regular files; a WAV cut shorter than its header says, or a file that changes\n"
           "after its check, is an error.\n"
           "Every line and every file is checked before anything is written.\n"
           "\n"
           "Options:\n");
    cli_opts_print_at(stdout, options, 22);
    printf(
        "\n"
        "A progress line is shown on stderr when it is a terminal. The summary line says\n"
        "how many shards, cuts, seconds of audio and bytes were written. JSON output:\n"
        "{\"layout\",\"shards\",\"cuts\",\"audio_seconds\",\"bytes\"} (bytes: all files written);\n"
        "a run that fails prints {\"error\"} with why. On failure every file written so far\n"
        "is removed again (and DIR, when pack created it). Files are written under hidden\n"
        "temporary names (.NAME.PID.N.tmp) and get their names only once all are complete;\n"
        "SIGINT, SIGTERM or SIGHUP removes every file written as a failure does, then ends\n"
        "pack by that signal (a shell shows 128 + signal).\n"
        "\n"
        "Exit status: 0 success, 1 failure (a bad manifest line, an unreadable file, a\n"
        "duration mismatch, a duplicate id, DIR not empty, a write error), 2 usage error.\n"
        "\n"
        "Example:\n"
        "  sharc pack --manifest train.jsonl --out data/shar --cuts-per-shard 500\n"
        "  sharc pack --manifest train.jsonl --out data/nemo --layout nemo --compress zstd\n");
}

static int parse_args(int argc, char **argv, pack_opts *o)
{
    cli_parser p = {.cmd = cmd,
                    .table = options,
                    .print_help = print_help,
                    .own = o,
                    .argc = argc,
                    .argv = argv};
    int status = cli_opts_parse(&p);
    if (status >= 0)
        return status;
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected operand '%s' (manifests come with --manifest)",
                               argv[optind]);
    if (o->n_manifests == 0)
        return cli_usage_error(cmd, "no --manifest given");
    if (!o->out)
        return cli_usage_error(cmd, "no --out DIR given");
    for (size_t i = 0; i < o->n_manifests; i++) { /* every line would be a duplicate id */
        for (size_t j = 0; j < i; j++)
            if (cli_same_file(o->manifests[i], o->manifests[j]))
                return cli_usage_error(cmd, "--manifest %s is given twice (as %s before)",
                                       o->manifests[i], o->manifests[j]);
    }
    return -1;
}

/* ---- reading the manifests ---- */

static char *dup_str(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void entry_free(pack_entry *e)
{
    free(e->id);
    free(e->path);
    free(e->text);
    free(e->speaker);
    free(e->lang);
}

static void list_free(pack_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        entry_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* The string value of `key`, NULL when absent or null; -1 after a message when it is there
 * but not a string. */
static int opt_string(const cJSON *obj, const char *key, const char *where, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v)) {
        fail_with("%s: \"%s\" is not a string", where, key);
        return -1;
    }
    *out = v->valuestring;
    return 0;
}

/* The path of `audio` relative to the manifest's folder (as is when absolute). */
static char *resolve_path(const char *manifest, const char *audio)
{
    const char *slash = strrchr(manifest, '/');
    if (audio[0] == '/' || !slash) {
        return strdup(audio);
    }
    size_t n = (size_t)(slash - manifest) + 1, m = strlen(audio);
    char *p = malloc(n + m + 1);
    if (p) {
        memcpy(p, manifest, n);
        memcpy(p + n, audio, m + 1);
    }
    return p;
}

/* The id a line gets without an "id": the file name without its extension. */
static char *default_id(const char *audio)
{
    const char *base = strrchr(audio, '/');
    base = base ? base + 1 : audio;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    return strndup(base, n);
}

static int is_blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
            return 0;
    return 1;
}

/* Whether a JSON string in `text` holds the escape \u0000, which cJSON would end the string
 * at (silently cutting the rest of it off). */
static int has_nul_escape(const char *text)
{
    int in_string = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '"') {
            in_string = !in_string;
        } else if (in_string && *p == '\\') {
            if (p[1] == 'u' && strncmp(p + 2, "0000", 4) == 0)
                return 1;
            if (p[1])
                p++;
        }
    }
    return 0;
}

static const char *const known_keys[] = {"audio_filepath", "duration", "text",     "id",
                                         "speaker",        "lang",     "language", "offset"};

/* One manifest line (`len` bytes) into `e`. Returns 0, or -1 after a message. */
static int parse_line(sharc_writer *w, const char *manifest, long line, const char *text,
                      size_t len, pack_entry *e)
{
    char where[1200];
    snprintf(where, sizeof where, "%s:%ld", manifest, line);
    cJSON *obj = NULL;
    int rc = -1;
    size_t bad;
    if (memchr(text, '\0', len)) {
        fail_with("%s: the line holds a NUL byte", where);
        goto done;
    }
    if ((bad = sharc_utf8_invalid_at(text, len)) < len) {
        fail_with("%s: not valid UTF-8 (byte %zu of the line, 0x%02x)", where, bad + 1,
                  (unsigned char)text[bad]);
        goto done;
    }
    const char *end = NULL;
    obj = cJSON_ParseWithOpts(text, &end, 0);
    if (!obj || !cJSON_IsObject(obj)) {
        fail_with("%s: %s", where, obj ? "not a JSON object" : "not valid JSON");
        goto done;
    }
    if (!is_blank(end)) {
        fail_with("%s: more after the JSON object (one object a line)", where);
        goto done;
    }
    if (has_nul_escape(text)) {
        fail_with("%s: a string holds \"\\u0000\" (NUL), which cannot be kept", where);
        goto done;
    }
    for (size_t k = 0; k < sizeof known_keys / sizeof *known_keys; k++) {
        int uses = 0;
        for (const cJSON *c = obj->child; c; c = c->next)
            uses += c->string && strcmp(c->string, known_keys[k]) == 0;
        if (uses > 1) {
            fail_with("%s: \"%s\" is given %d times", where, known_keys[k], uses);
            goto done;
        }
    }
    const char *audio, *id, *txt, *spk, *lang, *language;
    if (opt_string(obj, "audio_filepath", where, &audio) != 0)
        goto done;
    if (!audio || !audio[0]) {
        fail_with("%s: no \"audio_filepath\"", where);
        goto done;
    }
    snprintf(where, sizeof where, "%s:%ld: %s", manifest, line, audio);
    if (opt_string(obj, "id", where, &id) || opt_string(obj, "text", where, &txt) ||
        opt_string(obj, "speaker", where, &spk) || opt_string(obj, "lang", where, &lang) ||
        opt_string(obj, "language", where, &language))
        goto done;
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(obj, "offset");
    if (off && !cJSON_IsNull(off) && !(cJSON_IsNumber(off) && off->valuedouble == 0)) {
        fail_with("%s: \"offset\" other than 0 is not supported: sharc pack packs whole files",
                  where);
        goto done;
    }
    const cJSON *dur = cJSON_GetObjectItemCaseSensitive(obj, "duration");
    e->manifest_duration = NAN;
    if (dur && !cJSON_IsNull(dur)) {
        if (!cJSON_IsNumber(dur) || !isfinite(dur->valuedouble) || dur->valuedouble < 0) {
            fail_with("%s: \"duration\" is not a number of seconds", where);
            goto done;
        }
        e->manifest_duration = dur->valuedouble;
    }
    if (id && !id[0]) {
        fail_with("%s: \"id\" is empty", where);
        goto done;
    }
    e->line = line;
    e->path = resolve_path(manifest, audio);
    e->id = id ? strdup(id) : default_id(audio);
    e->text = dup_str(txt);
    e->speaker = dup_str(spk);
    e->lang = dup_str(lang ? lang : language);
    if (!e->path || !e->id || (txt && !e->text) || (spk && !e->speaker) ||
        ((lang || language) && !e->lang)) {
        fail_with("%s: out of memory", where);
        goto done;
    }
    /* Whether the id can name a tar member, before the next line is read. */
    sharc_writer_cut cut = {.id = e->id, .origin = where};
    if (sharc_writer_check(w, &cut, NULL) != 0) {
        fail_with("%s", sharc_writer_last_error(w));
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(obj);
    return rc;
}

static int read_manifest(sharc_writer *w, const pack_opts *o, size_t m, pack_list *l)
{
    const char *path = o->manifests[m];
    FILE *f = fopen(path, "r");
    if (!f) {
        fail_with("cannot open the manifest %s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = NULL;
    size_t cap = 0;
    long line = 0;
    int rc = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&buf, &cap, f)) >= 0) {
        line++;
        if ((size_t)len == strlen(buf) && is_blank(buf))
            continue;
        if (l->n == l->cap) {
            size_t ncap = l->cap ? 2 * l->cap : 256;
            pack_entry *v = realloc(l->v, ncap * sizeof *v);
            if (!v) {
                fail_with("%s:%ld: out of memory", path, line);
                rc = -1;
                break;
            }
            l->v = v;
            l->cap = ncap;
        }
        pack_entry *e = &l->v[l->n];
        memset(e, 0, sizeof *e);
        e->manifest = m;
        rc = parse_line(w, path, line, buf, (size_t)len, e);
        if (rc != 0)
            entry_free(e);
        else
            l->n++;
    }
    if (rc == 0 && ferror(f)) {
        fail_with("cannot read the manifest %s: %s", path, strerror(errno));
        rc = -1;
    }
    free(buf);
    fclose(f);
    return rc;
}

static int cmp_id(const void *a, const void *b)
{
    const pack_entry *x = *(pack_entry *const *)a, *y = *(pack_entry *const *)b;
    int c = strcmp(x->id, y->id);
    return c ? c : x < y ? -1 : x > y;
}

/* Every id used twice, each named with both lines. Returns 0, or -1 after the messages. */
static int check_unique_ids(const pack_opts *o, const pack_list *l)
{
    pack_entry **by_id = malloc((l->n ? l->n : 1) * sizeof *by_id);
    if (!by_id) {
        fail_with("out of memory");
        return -1;
    }
    for (size_t i = 0; i < l->n; i++)
        by_id[i] = &l->v[i];
    qsort(by_id, l->n, sizeof *by_id, cmp_id);
    int rc = 0;
    const pack_entry *a = l->n ? by_id[0] : NULL; /* the first use of the current id */
    for (size_t i = 1; i < l->n; i++) {
        const pack_entry *b = by_id[i];
        if (strcmp(a->id, b->id) != 0) {
            a = b;
            continue;
        }
        fail_with("%s:%ld: duplicate id '%s': already used at %s:%ld", o->manifests[b->manifest],
                  b->line, b->id, o->manifests[a->manifest], a->line);
        rc = -1;
    }
    free(by_id);
    return rc;
}

/*
 * SIGINT, SIGTERM and SIGHUP end a run as a failure does: what was written is removed, then
 * the process ends by the signal. The handler only records it; the loops here and the
 * writer (through its cancel callback) look.
 */
static volatile sig_atomic_t caught_signal;

static void on_signal(int sig)
{
    caught_signal = sig;
}

static int pack_cancelled(void *cookie)
{
    (void)cookie;
    return caught_signal != 0;
}

static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_CLEANUP_SIGNALS (sizeof cleanup_signals / sizeof *cleanup_signals)

/* Catch the signals (save the old actions in `old`); one ignored when pack started (nohup)
 * stays ignored. */
static void catch_signals(struct sigaction old[N_CLEANUP_SIGNALS])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* writes go on; the loops stop at the next check */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_CLEANUP_SIGNALS; i++) {
        sigaction(cleanup_signals[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN)
            sigaction(cleanup_signals[i], &sa, NULL);
    }
}

static void restore_signals(const struct sigaction old[N_CLEANUP_SIGNALS])
{
    for (size_t i = 0; i < N_CLEANUP_SIGNALS; i++)
        sigaction(cleanup_signals[i], &old[i], NULL);
}

/* -1 after a message when a signal came: the run stops. */
static int check_signal(void)
{
    if (caught_signal == 0)
        return 0;
    fail_with("interrupted by SIG%s", sigabbrev_np(caught_signal));
    return -1;
}

/* The message of a writer call that failed with `rc`. */
static void writer_failed(sharc_writer *w, int rc)
{
    if (rc == SHARC_ERR(ECANCELED) && caught_signal)
        check_signal();
    else
        fail_with("%s", sharc_writer_last_error(w));
}

/* The writer's cut for e: its messages start with "MANIFEST:LINE" (`where`, n bytes). */
static void entry_cut(const pack_opts *o, const pack_entry *e, char *where, size_t n,
                      sharc_writer_cut *cut)
{
    snprintf(where, n, "%s:%ld", o->manifests[e->manifest], e->line);
    memset(cut, 0, sizeof *cut);
    cut->id = e->id;
    cut->path = e->path;
    cut->duration = NAN; /* the manifest's is checked here, with its own message */
    cut->text = e->text;
    cut->speaker = e->speaker;
    cut->language = e->lang;
    cut->origin = where;
}

/* Check e's id against the layout and read its file's header, checked against the line. */
static int probe_audio(sharc_writer *w, const pack_opts *o, pack_entry *e)
{
    char where[1200];
    sharc_writer_cut cut;
    entry_cut(o, e, where, sizeof where, &cut);
    if (sharc_writer_check(w, &cut, &e->audio) != 0) {
        writer_failed(w, -1);
        return -1;
    }
    double d = e->audio.duration;
    /* Exactly the tolerance apart is within it, whatever the rounding of the difference. */
    if (!isnan(e->manifest_duration) &&
        fabs(e->manifest_duration - d) > PACK_DURATION_TOLERANCE * (1 + 1e-9)) {
        fail_with("%s: %s: the manifest's duration %g s differs from the audio's %g s by "
                  "more than %g s",
                  where, e->path, e->manifest_duration, d, PACK_DURATION_TOLERANCE);
        return -1;
    }
    return 0;
}

static int write_all(sharc_writer *w, const pack_opts *o, const pack_list *l)
{
    cli_progress progress;
    cli_progress_init(&progress, !o->quiet);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < l->n && (rc = check_signal()) == 0; i++) {
        char where[1200];
        sharc_writer_cut cut;
        entry_cut(o, &l->v[i], where, sizeof where, &cut);
        if ((rc = sharc_writer_add(w, &cut)) != 0)
            writer_failed(w, rc);
        char suffix[64];
        snprintf(suffix, sizeof suffix, "cuts, shard %zu", i / (size_t)o->cuts_per_shard);
        cli_progress_update(&progress, (double)(i + 1), (double)l->n, suffix, 0);
    }
    cli_progress_clear(&progress);
    if (rc == 0 && (rc = sharc_writer_finish(w)) != 0)
        writer_failed(w, rc);
    return rc;
}

/* 0 when --out is absent or an empty folder, with pack's own messages; the writer checks it
 * again as it creates it (sharc_writer_begin). */
static int check_out(const pack_opts *o)
{
    DIR *d = opendir(o->out);
    if (!d && errno != ENOENT) {
        fail_with("cannot use --out %s: %s", o->out, strerror(errno));
        return -1;
    }
    if (d) {
        struct dirent *e;
        int empty = 1;
        while (empty && (e = readdir(d)) != NULL)
            empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
        closedir(d);
        if (!empty) {
            fail_with("%s is not empty; pack writes only into an empty or new folder", o->out);
            return -1;
        }
    }
    return 0;
}

static void print_result(const pack_opts *o, int shards, size_t cuts, double seconds,
                         uint64_t bytes)
{
    const char *layout = o->layout == SHARC_LAYOUT_SHAR ? "shar" : "nemo";
    if (o->json) {
        fputc('{', stdout);
        cli_json_key(stdout, "layout", 1);
        cli_json_str(stdout, layout);
        printf(",\"shards\":%d,\"cuts\":%zu", shards, cuts);
        cli_json_key(stdout, "audio_seconds", 0);
        cli_json_num(stdout, seconds);
        printf(",\"bytes\":%" PRIu64 "%s}\n", bytes, o->dry_run ? ",\"dry_run\":true" : "");
    } else if (!o->quiet && o->dry_run) {
        char dur[32], size[32];
        printf("-- checked %zu cuts (%s of audio): pack would write %d %s shard%s in %s, with\n"
               "   %sB of audio files; nothing was written (--dry-run)\n",
               cuts, cli_fmt_duration(dur, sizeof dur, seconds), shards, layout,
               shards == 1 ? "" : "s", o->out, cli_fmt_count(size, sizeof size, (double)bytes));
    } else if (!o->quiet) {
        char dur[32], size[32];
        printf("-- packed %zu cuts (%s of audio) into %d %s shard%s in %s, %sB written\n", cuts,
               cli_fmt_duration(dur, sizeof dur, seconds), shards, layout, shards == 1 ? "" : "s",
               o->out, cli_fmt_count(size, sizeof size, (double)bytes));
    }
}

/* Read and check every manifest line and every file's header. */
static int load_entries(sharc_writer *w, const pack_opts *o, pack_list *l)
{
    for (size_t m = 0; m < o->n_manifests; m++)
        if (read_manifest(w, o, m, l) != 0)
            return -1;
    if (l->n == 0) {
        fail_with("the manifests list no audio files");
        return -1;
    }
    if (check_unique_ids(o, l) != 0)
        return -1;
    cli_progress progress; /* reading every file's header can take a while */
    cli_progress_init(&progress, !o->quiet);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        rc = probe_audio(w, o, &l->v[i]);
        cli_progress_update(&progress, (double)(i + 1), (double)l->n, "files checked", 0);
    }
    cli_progress_clear(&progress);
    return rc;
}

static int open_writer(const pack_opts *o, sharc_writer **w)
{
    sharc_writer_settings s;
    sharc_writer_default_settings(&s);
    s.layout = o->layout;
    s.out_dir = o->out;
    s.compression = o->compress;
    s.cuts_per_shard = (uint32_t)o->cuts_per_shard;
    s.zstd_threads = cli_online_cpus();
    s.duration_tolerance = PACK_DURATION_TOLERANCE;
    s.cancel = pack_cancelled;
    s.logger.callback = NULL; /* pack prints the writer's messages itself */
    int rc = sharc_writer_open(w, &s);
    if (rc != 0)
        fail_with("%s", rc == SHARC_ERR(ENOMEM) ? "out of memory" : sharc_strerror(rc));
    return rc;
}

int cmd_pack(int argc, char **argv)
{
    pack_opts o = {.layout = SHARC_LAYOUT_SHAR,
                   .compress = SHARC_WRITER_COMPRESS_NONE,
                   .cuts_per_shard = 1000};
    int status = parse_args(argc, argv, &o);
    if (status >= 0) {
        free(o.manifests);
        return status;
    }
    status = CLI_EXIT_FAIL;
    pack_list l = {0};
    sharc_writer *w = NULL;
    int reported = 0, catching = 0;
    struct sigaction old_actions[N_CLEANUP_SIGNALS];
    if (open_writer(&o, &w) != 0 || load_entries(w, &o, &l) != 0)
        goto done;
    /* From the first folder made to the last file renamed, a signal removes them again. */
    if (!o.dry_run) {
        catch_signals(old_actions);
        catching = 1;
    }
    if (check_out(&o) != 0)
        goto done;
    int shards = (int)((l.n + (size_t)o.cuts_per_shard - 1) / (size_t)o.cuts_per_shard);
    double seconds = 0;
    uint64_t audio_bytes = 0;
    for (size_t i = 0; i < l.n; i++) {
        seconds += l.v[i].audio.duration;
        audio_bytes += l.v[i].audio.bytes;
    }
    if (o.dry_run) {
        print_result(&o, shards, l.n, seconds, audio_bytes);
        reported = 1;
        status = cli_finish_output(cmd, CLI_EXIT_OK);
        goto done;
    }
    int rc = sharc_writer_begin(w);
    if (rc != 0) {
        writer_failed(w, rc);
        goto done;
    }
    if (check_signal() != 0)
        goto done;
    if (write_all(w, &o, &l) != 0) {
        sharc_writer_stats st;
        sharc_writer_get_stats(w, &st);
        sharc_writer_abort(w);
        fprintf(stderr, "sharc pack: removed the %" PRIu64 " file%s written to %s\n", st.files,
                st.files == 1 ? "" : "s", o.out);
        goto done;
    }
    /* A signal after the last rename finds the shards complete: it ends pack as it would any
     * program, with the output in place. */
    restore_signals(old_actions);
    catching = 0;
    sharc_writer_stats st;
    sharc_writer_get_stats(w, &st);
    print_result(&o, shards, l.n, seconds, st.bytes);
    reported = 1;
    status = cli_finish_output(cmd, CLI_EXIT_OK);
done:
    /* Before the signals are restored: what a failed run wrote is removed first. */
    sharc_writer_close(&w);
    if (catching)
        restore_signals(old_actions);
    if (status == CLI_EXIT_FAIL && o.json && !reported)
        cli_print_json_failure(stdout, NULL, NULL);
    list_free(&l);
    free(o.manifests);
    if (caught_signal != 0 && status != CLI_EXIT_OK) {
        /* End as the signal would have ended pack, now that its files are removed. */
        fflush(stdout);
        signal(caught_signal, SIG_DFL);
        raise(caught_signal);
        return 128 + caught_signal;
    }
    return status;
}

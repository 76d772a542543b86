/*
 * sharc pack: write shards (Lhotse Shar or NeMo tarred audio) from NeMo-style JSON-lines
 * manifests of audio files. The audio is copied byte for byte; its header (read with
 * libsndfile) gives the metadata. Everything is checked before the first byte is written.
 */
#include <cjson/cJSON.h>
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <sndfile.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli.h"

static const char *const cmd = "pack";

enum pack_layout { PACK_SHAR, PACK_NEMO };
enum pack_compress { PACK_NONE, PACK_GZIP, PACK_ZSTD };

/* A manifest's duration may differ from the audio's by this much (seconds). */
#define PACK_DURATION_TOLERANCE 0.1

typedef struct pack_opts {
    const char **manifests;
    size_t n_manifests;
    const char *out;
    enum pack_layout layout;
    enum pack_compress compress;
    int cuts_per_shard;
    int json, quiet, dry_run;
} pack_opts;

/* One audio file to pack: what its manifest line says and what its header says. */
typedef struct pack_entry {
    char *id, *path, *text, *speaker, *lang;
    size_t manifest; /* index into opts.manifests */
    long line;
    double manifest_duration; /* NAN when the line has none */
    int rate, channels;
    int64_t frames;
    const char *ext;
    struct stat st; /* the file when its header was checked, to notice a change before the copy */
} pack_entry;

typedef struct pack_list {
    pack_entry *v;
    size_t n, cap;
} pack_list;

/* Every failure is recorded for the {"error"} object --json ends with (cli_fail). */
#define fail_with(...) cli_fail(cmd, __VA_ARGS__)

static void print_help(void)
{
    printf(
        "Usage: sharc pack --manifest FILE [--manifest FILE...] --out DIR [options]\n"
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
        "Options:\n"
        "  --manifest FILE       a JSON-lines manifest; may be given several times (required)\n"
        "  --out DIR             output folder, created; it must be empty or absent (required)\n"
        "  --layout L            shar or nemo (default shar)\n"
        "  --cuts-per-shard N    cuts per shard, 1 <= N (default 1000, as Lhotse)\n"
        "  --compress Z          none, gzip or zstd: compression of the tars (default none,\n"
        "                        as Lhotse writes them); Shar cuts files are always .jsonl.gz\n"
        "                        and NeMo manifests plain JSON lines. Lhotse reads .tar.gz but\n"
        "                        not .tar.zst; sharc reads all three.\n"
        "  --json                print one JSON object at the end instead of the summary line\n"
        "  --quiet               no progress line and no summary line\n"
        "  --dry-run             check every line, every file and --out as a real run does,\n"
        "                        then write nothing: the summary says what would be written\n"
        "                        (JSON: the same object with \"dry_run\":true, bytes = the\n"
        "                        audio files' bytes)\n"
        "  -h, --help            show this help\n"
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

enum {
    OPT_MANIFEST = 256,
    OPT_OUT,
    OPT_LAYOUT,
    OPT_CUTS,
    OPT_COMPRESS,
    OPT_JSON,
    OPT_QUIET,
    OPT_DRY_RUN
};

static const struct option long_opts[] = {
    {"manifest", required_argument, NULL, OPT_MANIFEST},
    {"out", required_argument, NULL, OPT_OUT},
    {"layout", required_argument, NULL, OPT_LAYOUT},
    {"cuts-per-shard", required_argument, NULL, OPT_CUTS},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_opt(int opt, const char *val, pack_opts *o)
{
    switch (opt) {
    case OPT_MANIFEST: {
        const char **m = realloc(o->manifests, (o->n_manifests + 1) * sizeof *m);
        if (!m)
            return cli_usage_error(cmd, "out of memory"), -1;
        m[o->n_manifests++] = val;
        o->manifests = m;
        return 0;
    }
    case OPT_OUT:
        o->out = val;
        return 0;
    case OPT_LAYOUT:
        if (strcmp(val, "shar") == 0 || strcmp(val, "nemo") == 0) {
            o->layout = val[0] == 's' ? PACK_SHAR : PACK_NEMO;
            return 0;
        }
        return cli_usage_error(cmd, "--layout wants shar or nemo, not '%s'", val), -1;
    case OPT_CUTS:
        return cli_parse_int(cmd, "--cuts-per-shard", val, 1, 100000000, &o->cuts_per_shard);
    case OPT_COMPRESS:
        if (strcmp(val, "none") == 0)
            o->compress = PACK_NONE;
        else if (strcmp(val, "gzip") == 0)
            o->compress = PACK_GZIP;
        else if (strcmp(val, "zstd") == 0)
            o->compress = PACK_ZSTD;
        else
            return cli_usage_error(cmd, "--compress wants none, gzip or zstd, not '%s'", val), -1;
        return 0;
    case OPT_JSON:
        o->json = 1;
        return 0;
    case OPT_QUIET:
        o->quiet = 1;
        return 0;
    case OPT_DRY_RUN:
        o->dry_run = 1;
        return 0;
    }
    return -1;
}

static int parse_args(int argc, char **argv, pack_opts *o)
{
    int opt;
    while ((opt = getopt_long(argc, argv, CLI_SHORT_OPTS, long_opts, NULL)) != -1) {
        if (opt == 'h') {
            print_help();
            return CLI_EXIT_OK;
        }
        if (opt == '?' || opt == ':')
            return cli_option_error(cmd, opt, argv, long_opts);
        if (parse_opt(opt, optarg, o) != 0)
            return CLI_EXIT_USAGE;
    }
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

/* Why `id` cannot name tar members ("<id>.<ext>", unpacked by tar as a relative path), or
 * NULL when it can: not absolute, no empty, "." or ".." part (control characters are
 * refused before, without printing the id). */
static const char *bad_id(const char *id)
{
    if (id[0] == '/')
        return "it starts with '/'";
    for (const char *part = id; part;) {
        const char *slash = strchr(part, '/');
        size_t n = slash ? (size_t)(slash - part) : strlen(part);
        if (n == 0 || (n == 1 && part[0] == '.') || (n == 2 && part[0] == '.' && part[1] == '.'))
            return "a part between its slashes is empty, '.' or '..'";
        part = slash ? slash + 1 : NULL;
    }
    return NULL;
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
static int parse_line(const char *manifest, long line, const char *text, size_t len, pack_entry *e)
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
    if ((bad = cli_utf8_invalid_at(text, len)) < len) {
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
    for (const unsigned char *c = (const unsigned char *)e->id; *c; c++) {
        if (*c < 0x20 || *c == 0x7f) {
            fail_with("%s: the id holds a control character (0x%02x): it cannot name a tar member",
                      where, *c);
            goto done;
        }
    }
    const char *why = bad_id(e->id);
    if (why) {
        fail_with("%s: id '%s' cannot name a tar member: %s", where, e->id, why);
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(obj);
    return rc;
}

static int read_manifest(const pack_opts *o, size_t m, pack_list *l)
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
        rc = parse_line(path, line, buf, (size_t)len, e);
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

/* The member extension of a format libsndfile recognised; NULL for formats sharc does not
 * read. */
static const char *format_ext(int format)
{
    switch (format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV:
    case SF_FORMAT_WAVEX:
    case SF_FORMAT_RF64:
        return "wav";
    case SF_FORMAT_FLAC:
        return "flac";
    case SF_FORMAT_OGG:
        return (format & SF_FORMAT_SUBMASK) == SF_FORMAT_OPUS ? "opus" : "ogg";
    case SF_FORMAT_MPEG:
        return "mp3";
    }
    return NULL;
}

/* Open e's file for reading, as a stream, when it is a regular file: never waits on a FIFO
 * (O_NONBLOCK) nor reads a device or a folder. NULL after a message; *st gets its status. */
static FILE *open_audio(const char *man, const pack_entry *e, struct stat *st)
{
    int fd = open(e->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) != 0) {
        fail_with("%s:%ld: %s: cannot open: %s", man, e->line, e->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st->st_mode)) {
        fail_with("%s:%ld: %s: not a regular file (%s)", man, e->line, e->path,
                  S_ISDIR(st->st_mode)                           ? "a folder"
                  : S_ISFIFO(st->st_mode)                        ? "a FIFO"
                  : S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "a device"
                                                                 : "a socket or other");
        close(fd);
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        fail_with("%s:%ld: %s: cannot open: %s", man, e->line, e->path, strerror(errno));
        close(fd);
    }
    return f;
}

/* Whether the file's status `now` is not what it was when its header was checked. */
static int file_changed(const struct stat *then, const struct stat *now)
{
    return then->st_dev != now->st_dev || then->st_ino != now->st_ino ||
           then->st_size != now->st_size || then->st_mtim.tv_sec != now->st_mtim.tv_sec ||
           then->st_mtim.tv_nsec != now->st_mtim.tv_nsec;
}

/* Read the header of e's file and check it against the manifest line. */
static int probe_audio(const pack_opts *o, pack_entry *e)
{
    const char *man = o->manifests[e->manifest];
    FILE *f = open_audio(man, e, &e->st);
    if (!f)
        return -1;
    SF_INFO info = {0};
    SNDFILE *sf = sf_open_fd(fileno(f), SFM_READ, &info, 0);
    if (!sf) {
        fail_with("%s:%ld: %s: not audio libsndfile can read: %s", man, e->line, e->path,
                  sf_strerror(NULL));
        fclose(f);
        return -1;
    }
    /* A WAV whose data chunk claims more bytes than the file holds was cut short: libsndfile
     * (and so every reader) quietly gives only what is there. Its log says "data : N (should
     * be M)"; N of 0 or 0xFFFFFFFF is a streamed WAV's unknown length, not a truncation. */
    static char sf_log[16384];
    sf_log[0] = 0;
    sf_command(sf, SFC_GET_LOG_INFO, sf_log, (int)sizeof sf_log);
    unsigned long long said = 0, held = 0;
    const char *data = strstr(sf_log, "\ndata : ");
    int cut_short = (info.format & SF_FORMAT_TYPEMASK) != SF_FORMAT_FLAC && data &&
                    sscanf(data, "\ndata : %llu (should be %llu)", &said, &held) == 2 &&
                    said > held && said != 0xFFFFFFFFull;
    sf_close(sf);
    fclose(f);
    if (cut_short) {
        fail_with("%s:%ld: %s: truncated: its header says %llu bytes of audio, the file holds "
                  "%llu",
                  man, e->line, e->path, said, held);
        return -1;
    }
    e->ext = format_ext(info.format);
    if (!e->ext) {
        fail_with("%s:%ld: %s: a format sharc does not read (WAV, FLAC, Ogg Opus/Vorbis and MP3 "
                  "are)",
                  man, e->line, e->path);
        return -1;
    }
    if (info.samplerate <= 0 || info.channels <= 0 || info.frames <= 0 ||
        info.frames == SF_COUNT_MAX) {
        fail_with("%s:%ld: %s: the audio has no samples (or no known length)", man, e->line,
                  e->path);
        return -1;
    }
    e->rate = info.samplerate;
    e->channels = info.channels;
    e->frames = info.frames;
    double d = (double)e->frames / e->rate;
    /* Exactly the tolerance apart is within it, whatever the rounding of the difference. */
    if (!isnan(e->manifest_duration) &&
        fabs(e->manifest_duration - d) > PACK_DURATION_TOLERANCE * (1 + 1e-9)) {
        fail_with("%s:%ld: %s: the manifest's duration %g s differs from the audio's %g s by "
                  "more than %g s",
                  man, e->line, e->path, e->manifest_duration, d, PACK_DURATION_TOLERANCE);
        return -1;
    }
    return 0;
}

/* ---- writing ---- */

typedef struct pack_writer {
    const pack_opts *o;
    struct archive *tar;
    gzFile cuts; /* Shar: this shard's cuts file */
    FILE *rows;  /* NeMo: this shard's manifest */
    FILE *all;   /* NeMo: the manifest of all shards */
    /* Every file written (its final path) and the temporary name it is written under until
     * the run is complete, to report its size or remove it on failure. Files [0, n_renamed)
     * have their final names already. */
    char **files, **tmps;
    size_t n_files, cap_files, n_renamed;
    int shard;       /* the open shard, -1 when none */
    size_t tar_file; /* the open tar: its index in files */
    unsigned char *copy_buf;
} pack_writer;

static char *path_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *path_fmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* Record `path` (taken) as written and create its temporary file (cli_make_tmp()), which
 * *tmp names: the file is written there and renamed to `path` once the whole run is done. */
static int note_file(pack_writer *w, char *path, const char **tmp)
{
    if (!path) {
        fail_with("out of memory");
        return -1;
    }
    if (w->n_files == w->cap_files) {
        size_t cap = w->cap_files ? 2 * w->cap_files : 16;
        char **v = realloc(w->files, cap * sizeof *v),
             **t = v ? realloc(w->tmps, cap * sizeof *t) : NULL;
        if (v)
            w->files = v;
        if (t)
            w->tmps = t;
        if (!v || !t) {
            free(path);
            fail_with("out of memory");
            return -1;
        }
        w->cap_files = cap;
    }
    char *name = NULL;
    int err = cli_make_tmp(path, &name);
    if (err != 0) {
        fail_with("cannot write %s: %s", path, strerror(err));
        free(path);
        return -1;
    }
    w->files[w->n_files] = path;
    w->tmps[w->n_files++] = name;
    *tmp = name;
    return 0;
}

/*
 * SIGINT, SIGTERM and SIGHUP end a run as a failure does: what was written is removed, then
 * the process ends by the signal. The handler only records it; the writing loops look.
 */
static volatile sig_atomic_t caught_signal;

static void on_signal(int sig)
{
    caught_signal = sig;
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

static const char *last_file(const pack_writer *w)
{
    return w->files[w->n_files - 1];
}

/* The open tar's path: not last_file() once the shard's cuts file or manifest is noted. */
static const char *tar_file(const pack_writer *w)
{
    return w->files[w->tar_file];
}

static const char *const tar_suffix[] = {"", ".gz", ".zst"};

static int tar_begin(pack_writer *w, const char *name_fmt)
{
    const pack_opts *o = w->o;
    char *path = path_fmt(name_fmt, o->out, w->shard, tar_suffix[o->compress]);
    const char *tmp;
    if (note_file(w, path, &tmp) != 0)
        return -1;
    w->tar_file = w->n_files - 1;
    /* A plain tar ends padded to tarfile's 10240-byte records, as Lhotse's are; a compressed
     * stream is not padded after its end (zstd refuses trailing zeros). */
    struct archive *a = archive_write_new();
    w->tar = a;
    int ok = a && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK &&
             archive_write_set_bytes_per_block(a, 10240) == ARCHIVE_OK &&
             archive_write_set_bytes_in_last_block(a, o->compress == PACK_NONE ? 10240 : 1) ==
                 ARCHIVE_OK;
    if (ok && o->compress == PACK_GZIP)
        ok = archive_write_add_filter_gzip(a) == ARCHIVE_OK &&
             archive_write_set_filter_option(a, "gzip", "timestamp", NULL) == ARCHIVE_OK;
    if (ok && o->compress == PACK_ZSTD) {
        ok = archive_write_add_filter_zstd(a) == ARCHIVE_OK;
        /* Threads where this libarchive has the option; one thread otherwise. */
        char threads[16];
        snprintf(threads, sizeof threads, "%d", cli_online_cpus());
        if (ok)
            (void)archive_write_set_filter_option(a, "zstd", "threads", threads);
    }
    if (!ok || archive_write_open_filename(a, tmp) != ARCHIVE_OK) {
        fail_with("cannot write %s: %s", path,
                  a ? archive_error_string(a) ? archive_error_string(a) : "libarchive error"
                    : "out of memory");
        return -1;
    }
    return 0;
}

static int tar_header(pack_writer *w, const char *name, int64_t size)
{
    struct archive_entry *e = archive_entry_new();
    if (!e) {
        fail_with("out of memory");
        return -1;
    }
    archive_entry_set_pathname_utf8(e, name); /* in a UTF-8 LC_CTYPE: see cmd_pack */
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, 0, 0);
    int rc = archive_write_header(w->tar, e) == ARCHIVE_OK ? 0 : -1;
    archive_entry_free(e);
    if (rc)
        fail_with("cannot write %s: member %s: %s", tar_file(w), name,
                  archive_error_string(w->tar));
    return rc;
}

static int tar_data(pack_writer *w, const char *name, const void *p, size_t n)
{
    if (n && archive_write_data(w->tar, p, n) != (la_ssize_t)n) {
        fail_with("cannot write %s: member %s: %s", tar_file(w), name,
                  archive_error_string(w->tar));
        return -1;
    }
    return 0;
}

#define PACK_COPY_CHUNK (1 << 20)

/* Copy e's file into the open tar as `name`, one chunk at a time. */
static int tar_add_file(pack_writer *w, const pack_entry *e, const char *name)
{
    const char *man = w->o->manifests[e->manifest];
    struct stat st;
    FILE *f = open_audio(man, e, &st);
    if (!f)
        return -1;
    if (file_changed(&e->st, &st)) {
        fail_with("%s:%ld: %s: the file changed after its header was checked", man, e->line,
                  e->path);
        fclose(f);
        return -1;
    }
    int rc = tar_header(w, name, (int64_t)st.st_size);
    int64_t left = (int64_t)st.st_size;
    while (rc == 0 && left > 0 && (rc = check_signal()) == 0) {
        size_t want = left < PACK_COPY_CHUNK ? (size_t)left : PACK_COPY_CHUNK;
        size_t got = fread(w->copy_buf, 1, want, f);
        if (got != want) {
            fail_with("%s:%ld: %s: %s while copying it", man, e->line, e->path,
                      ferror(f) ? strerror(errno) : "the file got shorter");
            rc = -1;
            break;
        }
        rc = tar_data(w, name, w->copy_buf, got);
        left -= (int64_t)got;
    }
    /* A change while it was copied: what the tar holds may not be what was checked. */
    if (rc == 0 && (fstat(fileno(f), &st) != 0 || file_changed(&e->st, &st))) {
        fail_with("%s:%ld: %s: the file changed while it was copied", man, e->line, e->path);
        rc = -1;
    }
    fclose(f);
    return rc;
}

/* A JSON text built with the cli_json_* writers (open_memstream), or NULL. */
typedef struct json_buf {
    FILE *f;
    char *data;
    size_t len;
} json_buf;

static int jb_open(json_buf *b)
{
    memset(b, 0, sizeof *b);
    b->f = open_memstream(&b->data, &b->len);
    if (!b->f)
        fail_with("out of memory");
    return b->f ? 0 : -1;
}

static int jb_close(json_buf *b)
{
    int rc = fclose(b->f) == 0 ? 0 : -1;
    b->f = NULL;
    if (rc)
        fail_with("out of memory");
    return rc;
}

static void jb_free(json_buf *b)
{
    if (b->f)
        fclose(b->f);
    free(b->data);
    memset(b, 0, sizeof *b);
}

static void json_channels(FILE *f, int channels)
{
    fputc('[', f);
    for (int c = 0; c < channels; c++)
        fprintf(f, c ? ", %d" : "%d", c);
    fputc(']', f);
}

static void json_channel(FILE *f, int channels)
{
    if (channels == 1)
        fputc('0', f);
    else
        json_channels(f, channels);
}

static double entry_duration(const pack_entry *e)
{
    return (double)e->frames / e->rate;
}

/* Lhotse's recording placeholder (to_shar_placeholder): the tar's .json and the cut's
 * "recording". The recording id is the cut id, as Recording.to_cut() gives it. */
static void shar_recording(FILE *f, const pack_entry *e)
{
    fputs("{\"id\": ", f);
    cli_json_str(f, e->id);
    fputs(", \"sources\": [{\"type\": \"shar\", \"channels\": ", f);
    json_channels(f, e->channels);
    fprintf(f, ", \"source\": \"\"}], \"sampling_rate\": %d, \"num_samples\": %" PRId64, e->rate,
            e->frames);
    fputs(", \"duration\": ", f);
    cli_json_num(f, entry_duration(e));
    fputs(", \"channel_ids\": ", f);
    json_channels(f, e->channels);
    fputc('}', f);
}

/* A MonoCut (MultiCut for several channels) as Lhotse's to_dict() writes it; the supervision
 * spans the whole cut and carries only the fields the manifest line has. */
static void shar_cut_line(FILE *f, const pack_entry *e)
{
    double d = entry_duration(e);
    fputs("{\"id\": ", f);
    cli_json_str(f, e->id);
    fputs(", \"start\": 0, \"duration\": ", f);
    cli_json_num(f, d);
    fputs(", \"channel\": ", f);
    json_channel(f, e->channels);
    fputs(", \"supervisions\": [", f);
    if (e->text || e->speaker || e->lang) {
        fputs("{\"id\": ", f);
        cli_json_str(f, e->id);
        fputs(", \"recording_id\": ", f);
        cli_json_str(f, e->id);
        fputs(", \"start\": 0.0, \"duration\": ", f);
        cli_json_num(f, d);
        fputs(", \"channel\": ", f);
        json_channel(f, e->channels);
        const char *keys[] = {"text", "language", "speaker"};
        const char *vals[] = {e->text, e->lang, e->speaker};
        for (int k = 0; k < 3; k++) {
            if (!vals[k])
                continue;
            fprintf(f, ", \"%s\": ", keys[k]);
            cli_json_str(f, vals[k]);
        }
        fputc('}', f);
    }
    fputs("], \"recording\": ", f);
    shar_recording(f, e);
    fprintf(f, ", \"type\": \"%s\"}\n", e->channels == 1 ? "MonoCut" : "MultiCut");
}

/* NeMo's tarred manifest row: audio_filepath is the member's name. */
static void nemo_row(FILE *f, const pack_entry *e, const char *member, int shard)
{
    fputs("{\"audio_filepath\": ", f);
    cli_json_str(f, member);
    fputs(", \"duration\": ", f);
    cli_json_num(f, entry_duration(e));
    fputs(", \"text\": ", f);
    cli_json_str(f, e->text ? e->text : "");
    if (e->lang) {
        fputs(", \"lang\": ", f);
        cli_json_str(f, e->lang);
    }
    if (e->speaker) {
        fputs(", \"speaker\": ", f);
        cli_json_str(f, e->speaker);
    }
    fprintf(f, ", \"shard_id\": %d}\n", shard);
}

static int shard_begin(pack_writer *w)
{
    const pack_opts *o = w->o;
    if (o->layout == PACK_SHAR) {
        if (tar_begin(w, "%s/recording.%06d.tar%s") != 0)
            return -1;
        char *path = path_fmt("%s/cuts.%06d.jsonl.gz", o->out, w->shard);
        const char *tmp;
        if (note_file(w, path, &tmp) != 0)
            return -1;
        w->cuts = gzopen(tmp, "wb");
        if (!w->cuts) {
            fail_with("cannot write %s: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (tar_begin(w, "%s/audio_%d.tar%s") != 0)
        return -1;
    char *path = path_fmt("%s/sharded_manifests/manifest_%d.json", o->out, w->shard);
    const char *tmp;
    if (note_file(w, path, &tmp) != 0)
        return -1;
    w->rows = fopen(tmp, "w");
    if (!w->rows) {
        fail_with("cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Close the open shard's files; `ok` 0 closes them after a failure, quietly. */
static int shard_end(pack_writer *w, int ok)
{
    int rc = 0;
    if (w->tar) {
        if (ok && archive_write_close(w->tar) != ARCHIVE_OK) {
            fail_with("cannot write %s: %s", tar_file(w), archive_error_string(w->tar));
            rc = -1;
        }
        archive_write_free(w->tar);
        w->tar = NULL;
    }
    if (w->cuts) {
        if (gzclose(w->cuts) != Z_OK && ok && rc == 0) {
            fail_with("cannot write the shard's cuts file %s", last_file(w));
            rc = -1;
        }
        w->cuts = NULL;
    }
    if (w->rows) {
        if (fclose(w->rows) != 0 && ok && rc == 0) {
            fail_with("cannot write %s: %s", last_file(w), strerror(errno));
            rc = -1;
        }
        w->rows = NULL;
    }
    w->shard = -1;
    return rc;
}

static int add_shar(pack_writer *w, const pack_entry *e)
{
    char *member = path_fmt("%s.%s", e->id, e->ext), *meta_name = path_fmt("%s.json", e->id);
    json_buf meta = {0}, line = {0};
    int rc = -1;
    if (!member || !meta_name) {
        fail_with("out of memory");
        goto done;
    }
    if (tar_add_file(w, e, member) != 0 || jb_open(&meta) != 0)
        goto done;
    shar_recording(meta.f, e);
    fputc('\n', meta.f);
    if (jb_close(&meta) != 0 || tar_header(w, meta_name, (int64_t)meta.len) != 0 ||
        tar_data(w, meta_name, meta.data, meta.len) != 0 || jb_open(&line) != 0)
        goto done;
    shar_cut_line(line.f, e);
    if (jb_close(&line) != 0)
        goto done;
    if (gzwrite(w->cuts, line.data, (unsigned)line.len) != (int)line.len) {
        fail_with("cannot write the cuts file of shard %d", w->shard);
        goto done;
    }
    rc = 0;
done:
    jb_free(&meta);
    jb_free(&line);
    free(member);
    free(meta_name);
    return rc;
}

static int add_nemo(pack_writer *w, const pack_entry *e)
{
    char *member = path_fmt("%s.%s", e->id, e->ext);
    if (!member) {
        fail_with("out of memory");
        return -1;
    }
    int rc = tar_add_file(w, e, member);
    if (rc == 0) {
        nemo_row(w->rows, e, member, w->shard);
        nemo_row(w->all, e, member, w->shard);
        if (ferror(w->rows) || ferror(w->all)) {
            fail_with("cannot write the manifests of shard %d: %s", w->shard, strerror(errno));
            rc = -1;
        }
    }
    free(member);
    return rc;
}

/* Give every file written its final name, once all are complete. */
static int rename_all(pack_writer *w)
{
    while (w->n_renamed < w->n_files) {
        if (check_signal() != 0)
            return -1;
        size_t i = w->n_renamed;
        if (rename(w->tmps[i], w->files[i]) != 0) {
            fail_with("cannot write %s: %s", w->files[i], strerror(errno));
            return -1;
        }
        w->n_renamed++;
    }
    return 0;
}

/* Remove what was written (files under their temporary or final names, the folders pack
 * made). */
static void remove_output(pack_writer *w, int made_dir)
{
    for (size_t i = 0; i < w->n_files; i++)
        unlink(i < w->n_renamed ? w->files[i] : w->tmps[i]);
    if (w->o->layout == PACK_NEMO) { /* made by pack: --out was empty or absent */
        char *sub = path_fmt("%s/sharded_manifests", w->o->out);
        if (sub)
            rmdir(sub);
        free(sub);
    }
    if (made_dir)
        rmdir(w->o->out);
}

static int write_all(pack_writer *w, const pack_list *l)
{
    const pack_opts *o = w->o;
    cli_progress progress;
    cli_progress_init(&progress, !o->quiet);
    int rc = 0;
    if (o->layout == PACK_NEMO) {
        char *path = path_fmt("%s/tarred_audio_manifest.json", o->out);
        const char *tmp;
        if (note_file(w, path, &tmp) != 0)
            return -1;
        w->all = fopen(tmp, "w");
        if (!w->all) {
            fail_with("cannot write %s: %s", path, strerror(errno));
            return -1;
        }
    }
    for (size_t i = 0; rc == 0 && i < l->n && (rc = check_signal()) == 0; i++) {
        if (i % (size_t)o->cuts_per_shard == 0) {
            if (i > 0)
                rc = shard_end(w, 1);
            w->shard = (int)(i / (size_t)o->cuts_per_shard);
            if (rc == 0)
                rc = shard_begin(w);
        }
        if (rc == 0)
            rc = o->layout == PACK_SHAR ? add_shar(w, &l->v[i]) : add_nemo(w, &l->v[i]);
        char suffix[64];
        snprintf(suffix, sizeof suffix, "cuts, shard %d", w->shard);
        cli_progress_update(&progress, (double)(i + 1), (double)l->n, suffix, 0);
    }
    cli_progress_clear(&progress);
    int end = shard_end(w, rc == 0);
    rc = rc ? rc : end;
    if (w->all) {
        if (fclose(w->all) != 0 && rc == 0) {
            fail_with("cannot write %s/tarred_audio_manifest.json: %s", o->out, strerror(errno));
            rc = -1;
        }
        w->all = NULL;
    }
    return rc;
}

/* 0 when `dir` is absent (then *made says pack must create it) or an empty folder. */
static int prepare_out(const pack_opts *o, int *made)
{
    *made = 0;
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
    } else if (o->dry_run) {
        return 0; /* absent: it would be created */
    } else if (mkdir(o->out, 0777) != 0) {
        fail_with("cannot create %s: %s", o->out, strerror(errno));
        return -1;
    } else {
        *made = 1;
    }
    if (o->layout == PACK_NEMO && !o->dry_run) {
        char *sub = path_fmt("%s/sharded_manifests", o->out);
        int rc = sub && mkdir(sub, 0777) == 0 ? 0 : -1;
        if (rc)
            fail_with("cannot create %s/sharded_manifests: %s", o->out, strerror(errno));
        free(sub);
        if (rc && *made)
            rmdir(o->out);
        return rc;
    }
    return 0;
}

static uint64_t written_bytes(const pack_writer *w)
{
    uint64_t total = 0;
    struct stat st;
    for (size_t i = 0; i < w->n_files; i++)
        if (stat(w->files[i], &st) == 0)
            total += (uint64_t)st.st_size;
    return total;
}

static void print_result(const pack_opts *o, int shards, size_t cuts, double seconds,
                         uint64_t bytes)
{
    const char *layout = o->layout == PACK_SHAR ? "shar" : "nemo";
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

/* Whether `id` ends in "-sub" and digits: NeMo pairs a row "x-sub1.wav" with member "x.wav". */
static int nemo_sub_suffix(const char *id)
{
    size_t n = strlen(id), k = n;
    while (k > 0 && id[k - 1] >= '0' && id[k - 1] <= '9')
        k--;
    return k < n && k >= 4 && memcmp(id + k - 4, "-sub", 4) == 0;
}

/* Whether an id has a non-ASCII character; with a message naming the first. */
static int non_ascii_id(const pack_opts *o, const pack_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        for (const unsigned char *c = (const unsigned char *)l->v[i].id; *c; c++)
            if (*c >= 0x80) {
                fail_with("%s:%ld: id '%s' is not ASCII, and this system has no C.UTF-8 locale "
                          "to write it into a tar with",
                          o->manifests[l->v[i].manifest], l->v[i].line, l->v[i].id);
                return 1;
            }
    return 0;
}

/* Read and check every manifest line and every file's header. */
static int load_entries(const pack_opts *o, pack_list *l)
{
    for (size_t m = 0; m < o->n_manifests; m++)
        if (read_manifest(o, m, l) != 0)
            return -1;
    if (l->n == 0) {
        fail_with("the manifests list no audio files");
        return -1;
    }
    if (check_unique_ids(o, l) != 0)
        return -1;
    for (size_t i = 0; o->layout == PACK_NEMO && i < l->n; i++)
        if (nemo_sub_suffix(l->v[i].id)) {
            fail_with("%s:%ld: id '%s' ends in -subN, which NeMo's reader takes for a part of "
                      "another member: give the line another \"id\"",
                      o->manifests[l->v[i].manifest], l->v[i].line, l->v[i].id);
            return -1;
        }
    cli_progress progress; /* reading every file's header can take a while */
    cli_progress_init(&progress, !o->quiet);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        rc = probe_audio(o, &l->v[i]);
        cli_progress_update(&progress, (double)(i + 1), (double)l->n, "files checked", 0);
    }
    cli_progress_clear(&progress);
    return rc;
}

int cmd_pack(int argc, char **argv)
{
    pack_opts o = {.layout = PACK_SHAR, .compress = PACK_NONE, .cuts_per_shard = 1000};
    int status = parse_args(argc, argv, &o);
    if (status >= 0) {
        free(o.manifests);
        return status;
    }
    status = CLI_EXIT_FAIL;
    pack_list l = {0};
    pack_writer w = {.o = &o, .shard = -1};
    int made_dir = 0, reported = 0, catching = 0;
    struct sigaction old_actions[N_CLEANUP_SIGNALS];
    locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (load_entries(&o, &l) != 0 || (!utf8 && non_ascii_id(&o, &l)))
        goto done;
    /* From the first folder made to the last file renamed, a signal removes them again. */
    if (!o.dry_run) {
        catch_signals(old_actions);
        catching = 1;
    }
    if (prepare_out(&o, &made_dir) != 0)
        goto done;
    if (check_signal() != 0) {
        remove_output(&w, made_dir);
        goto done;
    }
    int shards = (int)((l.n + (size_t)o.cuts_per_shard - 1) / (size_t)o.cuts_per_shard);
    double seconds = 0;
    uint64_t audio_bytes = 0;
    for (size_t i = 0; i < l.n; i++) {
        seconds += entry_duration(&l.v[i]);
        audio_bytes += (uint64_t)l.v[i].st.st_size;
    }
    if (o.dry_run) {
        print_result(&o, shards, l.n, seconds, audio_bytes);
        reported = 1;
        status = cli_finish_output(cmd, CLI_EXIT_OK);
        goto done;
    }
    w.copy_buf = malloc(PACK_COPY_CHUNK);
    if (!w.copy_buf) {
        fail_with("out of memory");
        goto done;
    }
    /* libarchive converts a member name from UTF-8 through the locale's character set, which
     * in the C locale has no non-ASCII characters (it then fails, in 3.6 with a crash): the
     * tars are written with a UTF-8 LC_CTYPE for this thread, so that a non-ASCII id is a
     * UTF-8 pax "path" as Python's tarfile writes it. */
    locale_t old = utf8 ? uselocale(utf8) : (locale_t)0;
    int wrote = write_all(&w, &l);
    if (utf8)
        uselocale(old);
    if (wrote == 0)
        wrote = rename_all(&w);
    /* A signal after the last rename finds the shards complete: it ends pack as it would any
     * program, with the output in place. */
    restore_signals(old_actions);
    catching = 0;
    if (wrote != 0) {
        remove_output(&w, made_dir);
        fprintf(stderr, "sharc pack: removed the %zu file%s written to %s\n", w.n_files,
                w.n_files == 1 ? "" : "s", o.out);
        goto done;
    }
    print_result(&o, shards, l.n, seconds, written_bytes(&w));
    reported = 1;
    status = cli_finish_output(cmd, CLI_EXIT_OK);
done:
    if (catching)
        restore_signals(old_actions);
    if (status == CLI_EXIT_FAIL && o.json && !reported)
        cli_print_json_failure(stdout, NULL, NULL);
    for (size_t i = 0; i < w.n_files; i++) {
        free(w.files[i]);
        free(w.tmps[i]);
    }
    free(w.files);
    free(w.tmps);
    free(w.copy_buf);
    if (utf8)
        freelocale(utf8);
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

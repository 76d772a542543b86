/*
 * sharc bench --report and --compare (bench_report.h): the timeline kept while the window
 * runs, the report's JSON, and the HTML page rendered from one or two such JSON objects.
 */
#include "bench_report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cli.h"
#include "report.h"
#include "report_svg.h"

/* ---- The timeline ---- */

typedef struct series {
    double *t, *units, *audio, *rss;
    size_t n, cap;
    double step, last_t;
} series;

static series *reps;
static size_t n_reps;

static double resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f == NULL)
        return NAN;
    int ok = fscanf(f, "%ld %ld", &pages, &resident) == 2;
    fclose(f);
    return ok ? (double)resident * (double)sysconf(_SC_PAGESIZE) : NAN;
}

/* Keep every other sample: the timeline stays bounded however long the window. */
static void halve(series *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i += 2, k++) {
        s->t[k] = s->t[i];
        s->units[k] = s->units[i];
        s->audio[k] = s->audio[i];
        s->rss[k] = s->rss[i];
    }
    s->n = k;
    s->step *= 2;
}

void bench_timeline_add(int rep, double t, double units, double audio)
{
    if (rep < 0)
        return;
    if ((size_t)rep >= n_reps) {
        series *more = realloc(reps, ((size_t)rep + 1) * sizeof *reps);
        if (more == NULL)
            return;
        reps = more;
        for (size_t i = n_reps; i <= (size_t)rep; i++)
            reps[i] = (series){.step = BENCH_TIMELINE_STEP, .last_t = -INFINITY};
        n_reps = (size_t)rep + 1;
    }
    series *s = &reps[rep];
    if (t - s->last_t < s->step)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        if (cap > BENCH_TIMELINE_MAX)
            cap = BENCH_TIMELINE_MAX;
        if (s->n == cap) {
            halve(s);
        } else {
            double *p[4] = {s->t, s->units, s->audio, s->rss};
            for (int k = 0; k < 4; k++) {
                double *q = realloc(p[k], cap * sizeof *q);
                if (q == NULL)
                    return;
                p[k] = q;
            }
            s->t = p[0], s->units = p[1], s->audio = p[2], s->rss = p[3];
            s->cap = cap;
        }
    }
    s->t[s->n] = t;
    s->units[s->n] = units;
    s->audio[s->n] = audio;
    s->rss[s->n] = resident_bytes();
    s->n++;
    s->last_t = t;
}

void bench_timeline_free(void)
{
    for (size_t i = 0; i < n_reps; i++) {
        free(reps[i].t);
        free(reps[i].units);
        free(reps[i].audio);
        free(reps[i].rss);
    }
    free(reps);
    reps = NULL;
    n_reps = 0;
}

/* ---- The report's JSON ---- */

static void json_array(FILE *f, const char *key, const double *v, size_t n)
{
    cli_json_key(f, key, 0);
    cli_json_nums(f, v, n);
}

/* The rates between consecutive samples, at the middle of each interval. */
static void timeline_json(FILE *f, const series *s, int rep)
{
    size_t n = s->n > 0 ? s->n - 1 : 0;
    double *mid = calloc(n + 1, sizeof *mid), *b = calloc(n + 1, sizeof *b);
    double *a = calloc(n + 1, sizeof *a);
    for (size_t i = 0; mid && b && a && i < n; i++) {
        double dt = s->t[i + 1] - s->t[i];
        mid[i] = (s->t[i] + s->t[i + 1]) / 2;
        b[i] = dt > 0 ? (s->units[i + 1] - s->units[i]) / dt : NAN;
        a[i] = dt > 0 ? (s->audio[i + 1] - s->audio[i]) / dt : NAN;
    }
    fprintf(f, "{\"rep\":%d", rep);
    json_array(f, "t", s->t, s->n);
    json_array(f, "rss_bytes", s->rss, s->n);
    json_array(f, "interval_t", mid ? mid : s->t, mid ? n : 0);
    json_array(f, "batches_per_second", b ? b : s->t, b ? n : 0);
    json_array(f, "audio_seconds_per_second", a ? a : s->t, a ? n : 0);
    fputc('}', f);
    free(mid);
    free(b);
    free(a);
}

static void machine_json(FILE *f)
{
    char host[256] = "";
    struct utsname u;
    gethostname(host, sizeof host - 1);
    cli_json_key(f, "machine", 0);
    fputc('{', f);
    cli_json_key(f, "hostname", 1);
    cli_json_str(f, host);
    if (uname(&u) == 0) {
        char k[3 * sizeof u.release];
        snprintf(k, sizeof k, "%s %s %s", u.sysname, u.release, u.machine);
        cli_json_key(f, "kernel", 0);
        cli_json_str(f, k);
    }
    fprintf(f, ",\"cpus\":%d", cli_online_cpus());
    fprintf(f, ",\"memory_bytes\":%.0f",
            (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE));
    FILE *c = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (c != NULL && fgets(line, sizeof line, c) != NULL) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
            colon[strcspn(colon, "\n")] = '\0';
            cli_json_key(f, "cpu", 0);
            cli_json_str(f, colon + 2 <= line + strlen(line) ? colon + 2 : colon);
            break;
        }
    }
    if (c != NULL)
        fclose(c);
    fputc('}', f);
}

static char *report_json(const char *result, int argc, char **argv, size_t *len)
{
    char *json = NULL;
    FILE *f = open_memstream(&json, len);
    if (f == NULL)
        return NULL;
    fputc('{', f);
    cli_json_key(f, "command", 1);
    cli_json_str(f, "sharc bench");
    cli_json_key(f, "argv", 0);
    fputc('[', f);
    for (int i = 0; i < argc; i++) {
        if (i)
            fputc(',', f);
        cli_json_str(f, argv[i]);
    }
    fputc(']', f);
    machine_json(f);
    cli_json_key(f, "result", 0);
    fputs(result, f);
    cli_json_key(f, "timeline", 0);
    fputc('[', f);
    for (size_t i = 0; i < n_reps; i++) {
        if (i)
            fputc(',', f);
        timeline_json(f, &reps[i], (int)i);
    }
    fputs("]}", f);
    if (fclose(f) != 0) {
        free(json);
        return NULL;
    }
    return json;
}

/* ---- The page ---- */

static size_t get_doubles(const cJSON *obj, const char *key, double **out)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
    size_t n = (size_t)cJSON_GetArraySize(a), i = 0;
    *out = calloc(n + 1, sizeof **out);
    const cJSON *e;
    cJSON_ArrayForEach(e, a)
    {
        if (*out != NULL && i < n)
            (*out)[i++] = cJSON_IsNumber(e) ? e->valuedouble : NAN;
    }
    return *out ? i : 0;
}

#define MAX_SERIES 5

/* One line chart of `key` (scaled by `scale`) over `tkey`, a series per run and repetition. */
static void timeline_chart(FILE *f, const char *id, const char *title, const cJSON *const *runs,
                           const char *const *names, size_t n_runs, const char *tkey,
                           const char *key, double scale, const char *unit)
{
    double *xs[MAX_SERIES] = {0}, *ys[MAX_SERIES] = {0};
    size_t ns[MAX_SERIES] = {0}, n = 0;
    char labels[MAX_SERIES][64];
    const char *lp[MAX_SERIES] = {0};
    for (size_t r = 0; r < n_runs; r++) {
        const cJSON *rep;
        cJSON_ArrayForEach(rep, cJSON_GetObjectItemCaseSensitive(runs[r], "timeline"))
        {
            if (n == MAX_SERIES)
                break;
            const cJSON *k = cJSON_GetObjectItemCaseSensitive(rep, "rep");
            int idx = cJSON_IsNumber(k) ? k->valueint + 1 : 1;
            size_t nx = get_doubles(rep, tkey, &xs[n]), ny = get_doubles(rep, key, &ys[n]);
            ns[n] = nx < ny ? nx : ny;
            for (size_t i = 0; ys[n] && i < ns[n]; i++)
                ys[n][i] *= scale;
            snprintf(labels[n], sizeof labels[n], "%s%srep %d", names[r] ? names[r] : "",
                     names[r] ? " " : "", idx);
            lp[n] = labels[n];
            n++;
        }
    }
    svg_lines(f, id, title, (const double *const *)xs, (const double *const *)ys, ns, lp, n,
              "seconds into the window", unit);
    for (size_t i = 0; i < n; i++) {
        free(xs[i]);
        free(ys[i]);
    }
}

static void stage_chart(FILE *f, const cJSON *const *runs, const char *const *names, size_t n_runs)
{
    char labels[2 * 16][64];
    const char *lp[2 * 16];
    double v[2 * 16];
    size_t n = 0;
    for (size_t r = 0; r < n_runs; r++) {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(runs[r], "result");
        const cJSON *st;
        cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(res, "stage_seconds"))
        {
            if (n == 2 * 16 || !cJSON_IsNumber(st))
                continue;
            snprintf(labels[n], sizeof labels[n], "%s%s%s", names[r] ? names[r] : "",
                     names[r] ? ": " : "", st->string);
            lp[n] = labels[n];
            v[n++] = st->valuedouble;
        }
        /* The stages the library's stage clock does not split out: the conditioning's share
         * of decode, host features, which the decode threads compute beside it, the noise
         * stream's reading and decoding on its own thread, and with a transport this rank's
         * broadcast. */
        const cJSON *decode = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(res, "stage_seconds"), "decode");
        const cJSON *share = cJSON_GetObjectItemCaseSensitive(res, "conditioning_share");
        const cJSON *feat = cJSON_GetObjectItemCaseSensitive(res, "feature_ms_per_batch");
        const cJSON *batches = cJSON_GetObjectItemCaseSensitive(res, "batches");
        const cJSON *bcast = cJSON_GetObjectItemCaseSensitive(res, "broadcast_seconds");
        const cJSON *noise = cJSON_GetObjectItemCaseSensitive(res, "noise_seconds");
        const char *extra[4] = {"conditioning (part of decode)", "features", "noise", "broadcast"};
        double seconds[4] = {NAN, NAN, NAN, NAN};
        if (cJSON_IsNumber(decode) && cJSON_IsNumber(share))
            seconds[0] = decode->valuedouble * share->valuedouble;
        if (cJSON_IsNumber(feat) && cJSON_IsNumber(batches))
            seconds[1] = feat->valuedouble * batches->valuedouble / 1e3;
        if (cJSON_IsNumber(noise))
            seconds[2] = noise->valuedouble;
        if (cJSON_IsNumber(bcast))
            seconds[3] = bcast->valuedouble;
        for (int k = 0; k < 4; k++) {
            if (n == 2 * 16 || !isfinite(seconds[k]))
                continue;
            snprintf(labels[n], sizeof labels[n], "%s%s%s", names[r] ? names[r] : "",
                     names[r] ? ": " : "", extra[k]);
            lp[n] = labels[n];
            v[n++] = seconds[k];
        }
    }
    svg_bar_list(f, "chart-stages", "Time by stage (seconds over all threads, in the window)", lp,
                 v, n, "s");
}

static void cell_value(FILE *f, const cJSON *v)
{
    if (v == NULL || cJSON_IsNull(v)) {
        fputs("-", f);
    } else if (cJSON_IsNumber(v)) {
        fprintf(f, "%.6g", v->valuedouble);
    } else if (cJSON_IsString(v)) {
        svg_escape(f, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        fputs(cJSON_IsTrue(v) ? "true" : "false", f);
    } else {
        char *s = cJSON_PrintUnformatted(v);
        svg_escape(f, s ? s : "?");
        free(s);
    }
}

/* The rows of one key of a run's section: nested objects one level down as "key.inner". */
static void key_rows(FILE *f, const cJSON *const *runs, const char *const *names, size_t n_runs,
                     const char *section, const char *key, const char *inner)
{
    fputs("<tr><td>", f);
    svg_escape(f, key);
    if (inner != NULL) {
        fputc('.', f);
        svg_escape(f, inner);
    }
    fputs("</td>", f);
    for (size_t r = 0; r < n_runs; r++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(runs[r], section), key);
        if (inner != NULL)
            v = cJSON_GetObjectItemCaseSensitive(v, inner);
        fputs("<td class=\"n\">", f);
        cell_value(f, v);
        fputs("</td>", f);
    }
    fputs("</tr>\n", f);
}

/* A table of each run's `section`, a column per run. */
static void key_table(FILE *f, const char *id, const char *title, const cJSON *const *runs,
                      const char *const *names, size_t n_runs, const char *section)
{
    fprintf(f, "<table id=\"%s\"><tr><th>", id);
    svg_escape(f, title);
    fputs("</th>", f);
    for (size_t r = 0; r < n_runs; r++) {
        fputs("<th>", f);
        svg_escape(f, names[r] ? names[r] : "value");
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(runs[0], section))
    {
        if (cJSON_IsArray(item))
            continue;
        if (!cJSON_IsObject(item)) {
            key_rows(f, runs, names, n_runs, section, item->string, NULL);
            continue;
        }
        const cJSON *inner;
        cJSON_ArrayForEach(inner, item)
        {
            if (!cJSON_IsObject(inner) && !cJSON_IsArray(inner))
                key_rows(f, runs, names, n_runs, section, item->string, inner->string);
        }
    }
    fputs("</table>\n", f);
}

static void command_lines(FILE *f, const cJSON *const *runs, const char *const *names,
                          size_t n_runs)
{
    for (size_t r = 0; r < n_runs; r++) {
        fputs("<p class=\"note\">", f);
        if (names[r] != NULL) {
            svg_escape(f, names[r]);
            fputs(": ", f);
        }
        fputs("<code>", f);
        const cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(runs[r], "argv"))
        {
            if (cJSON_IsString(a)) {
                svg_escape(f, a->valuestring);
                fputc(' ', f);
            }
        }
        fputs("</code></p>\n", f);
    }
}

static int write_page(FILE *f, const cJSON *const *runs, const char *const *names, size_t n_runs,
                      const char *json, size_t len)
{
    errno = 0;
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>sharc bench report</title><style>%s</style></head><body>\n"
            "<h1>sharc bench %s</h1>\n",
            report_style(), n_runs > 1 ? "comparison" : "report");
    command_lines(f, runs, names, n_runs);
    fputs("<h2>Throughput</h2><div class=\"charts\">\n", f);
    timeline_chart(f, "chart-audio-rate", "Seconds of audio per second", runs, names, n_runs,
                   "interval_t", "audio_seconds_per_second", 1, "audio s/s");
    timeline_chart(f, "chart-batch-rate", "Batches (cuts with --cuts) per second", runs, names,
                   n_runs, "interval_t", "batches_per_second", 1, "per s");
    timeline_chart(f, "chart-memory", "Resident memory (MiB)", runs, names, n_runs, "t",
                   "rss_bytes", 1.0 / (1 << 20), "MiB");
    stage_chart(f, runs, names, n_runs);
    fputs("</div>\n<h2>Results (medians over the repetitions)</h2>\n", f);
    key_table(f, "results", "measure", runs, names, n_runs, "result");
    fputs("<h2>Machine</h2>\n", f);
    key_table(f, "machine", "machine", runs, names, n_runs, "machine");
    report_embed_json(f, json, len);
    fputs("</body></html>\n", f);
    return ferror(f) ? (errno ? errno : EIO) : 0;
}

typedef struct page {
    const cJSON *const *runs;
    const char *const *names;
    size_t n_runs;
    const char *json;
    size_t len;
} page;

static int fill_page(FILE *f, const void *arg)
{
    const page *p = arg;
    return write_page(f, p->runs, p->names, p->n_runs, p->json, p->len);
}

static int save(const char *html_path, const char *json_path, page *p)
{
    const char *failed = NULL;
    int err = report_save_files(html_path, json_path, p->json, p->len, fill_page, p, &failed);
    if (err != 0) {
        fprintf(stderr, "sharc bench: cannot write the report %s: %s\n", failed ? failed : "",
                strerror(err));
        return -1;
    }
    return 0;
}

int bench_report_save(const char *html_path, const char *json_path, const char *result, int argc,
                      char **argv)
{
    size_t len = 0;
    char *json = report_json(result, argc, argv, &len);
    cJSON *run = json ? cJSON_Parse(json) : NULL;
    int rc = -1;
    if (run == NULL) {
        fprintf(stderr, "sharc bench: cannot make the report: out of memory\n");
    } else {
        const cJSON *runs[1] = {run};
        const char *names[1] = {NULL};
        page p = {.runs = runs, .names = names, .n_runs = 1, .json = json, .len = len};
        rc = save(html_path, json_path, &p);
    }
    cJSON_Delete(run);
    free(json);
    return rc;
}

/* ---- --compare ---- */

int bench_compare_requested(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--compare") == 0)
            return 1;
    return 0;
}

/* A bench report's JSON: parsed, and its text in *raw (malloc'ed, trimmed). */
static cJSON *load_json(const char *path, char **raw)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "sharc bench: cannot read %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    char buf[65536];
    size_t n;
    while (m != NULL && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, m);
    fclose(f);
    if (m == NULL || fclose(m) != 0) {
        free(text);
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    *raw = text;
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r'))
        text[--len] = '\0';
    if (j == NULL || text[0] != '{' ||
        !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "result")) ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "timeline"))) {
        fprintf(stderr,
                "sharc bench: %s is not the JSON of a bench report (sharc bench --report-json)\n",
                path);
        cJSON_Delete(j);
        free(text);
        *raw = NULL;
        return NULL;
    }
    return j;
}

static void print_compare_help(void)
{
    printf("Usage: sharc bench --compare A.json B.json --report C.html\n"
           "\n"
           "Write one self-contained HTML page that sets two runs of sharc bench side by side,\n"
           "A and B, from the JSON files their --report-json wrote: their command lines,\n"
           "throughput and memory over the window, time by stage, results and machines, with\n"
           "both JSON objects embedded. Nothing is measured; --report is the only option.\n"
           "C.html is written under a temporary name and renamed once complete, and may not\n"
           "be A.json or B.json.\n"
           "\n"
           "Exit status: 0 success, 1 a file that cannot be read, is not a bench report's\n"
           "JSON, or a page that cannot be written, 2 usage error.\n"
           "\n"
           "Example:\n"
           "  sharc bench --threads 4 --report-json a.json data/shar\n"
           "  sharc bench --threads 8 --report-json b.json data/shar\n"
           "  sharc bench --compare a.json b.json --report threads.html\n");
}

int bench_compare_main(int argc, char **argv)
{
    const char *html = NULL, *files[2] = {NULL, NULL};
    size_t n_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_compare_help();
            return cli_finish_output("bench", CLI_EXIT_OK);
        }
        if (strcmp(a, "--report") == 0 && i + 1 < argc)
            html = argv[++i];
        else if (strncmp(a, "--report=", 9) == 0)
            html = a + 9;
        else if (strcmp(a, "--compare") == 0)
            continue;
        else if (a[0] == '-' || n_files == 2)
            return cli_usage_error("bench",
                                   "--compare takes two report JSON files and "
                                   "--report FILE, not '%s'",
                                   a);
        else
            files[n_files++] = a;
    }
    if (n_files != 2 || html == NULL)
        return cli_usage_error("bench", "--compare A.json B.json --report C.html: two report "
                                        "JSON files (sharc bench --report-json) and the page");
    int refused = cli_refuse_reports_over_inputs("bench", NULL, files, 2, html, NULL);
    if (refused >= 0)
        return refused;
    char *raw[2] = {NULL, NULL};
    cJSON *runs[2] = {load_json(files[0], &raw[0]), NULL};
    runs[1] = runs[0] ? load_json(files[1], &raw[1]) : NULL;
    int status = CLI_EXIT_FAIL;
    /* The runs' own text, each with the file it came from: no number is printed again. */
    char *json = NULL;
    size_t len = 0;
    FILE *m = runs[1] != NULL ? open_memstream(&json, &len) : NULL;
    if (m != NULL) {
        fputs("{\"command\":\"sharc bench --compare\",\"runs\":[", m);
        for (int k = 0; k < 2; k++) {
            fputs(k ? ",{" : "{", m);
            cli_json_key(m, "file", 1);
            cli_json_str(m, files[k]);
            fprintf(m, ",%s", raw[k] + 1);
        }
        fputs("]}", m);
        if (fclose(m) != 0) {
            free(json);
            json = NULL;
        }
    }
    if (json != NULL) {
        const char *names[2] = {"A", "B"};
        page p = {.runs = (const cJSON *const *)runs,
                  .names = names,
                  .n_runs = 2,
                  .json = json,
                  .len = len};
        if (save(html, NULL, &p) == 0)
            status = CLI_EXIT_OK;
    }
    free(json);
    free(raw[0]);
    free(raw[1]);
    cJSON_Delete(runs[0]);
    cJSON_Delete(runs[1]);
    return cli_finish_output("bench", status);
}

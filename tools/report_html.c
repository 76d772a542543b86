/*
 * The validation report as one self-contained HTML page: inline CSS and SVG, no script to
 * run and nothing fetched; the report's JSON is embedded as
 * <script type="application/json" id="sharc-report">.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"
#include "report_svg.h"

/* The page's style, shared with the bench report (report_style()). */
static const char *const style =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:1320px;color:#1a202c;"
    "background:#f7fafc}h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;"
    "border-bottom:1px solid #cbd5e0}.sub{color:#4a5568;margin-bottom:16px}"
    ".ok{color:#2f855a;font-weight:600}.bad{color:#c53030;font-weight:600}"
    ".cards,.charts{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}.card{background:#"
    "fff;border:1px solid #e2e8f0;"
    "border-radius:6px;padding:8px 14px;min-width:120px}.card b{display:block;font-size:19px}"
    ".card span{color:#4a5568;font-size:12px}td "
    "code{word-break:break-all}table{max-width:640px}table.wide{max-width:none}"
    "svg.chart{background:#fff;border:1px solid #e2e8f0;border-radius:6px}"
    ".bar{fill:#4299e1}.grid{stroke:#e2e8f0}.line{fill:none;stroke-width:2}"
    ".ctitle{font-weight:600;font-size:13px}.xlab{font-size:11px;text-anchor:middle;"
    "fill:#4a5568}.ylab,.blab{font-size:11px;text-anchor:end;fill:#4a5568}.bval,.legend{"
    "font-size:11px}table{border-collapse:collapse;background:#fff;margin:6px 0;font-size:13px}"
    "td,th{border:1px solid #e2e8f0;padding:3px 8px;text-align:left;vertical-align:top}"
    "th{background:#edf2f7}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".note{color:#4a5568;font-size:12px}code{font-size:12px}";

const char *report_style(void)
{
    return style;
}

static void esc(FILE *f, const char *s)
{
    svg_escape(f, s ? s : "");
}

static const char *fmt_bytes(char *buf, size_t n, double b)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;
    while (b >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        b /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", b, units[u]);
    return buf;
}

static void card(FILE *f, const char *value, const char *label)
{
    fputs("<div class=\"card\"><b>", f);
    esc(f, value);
    fputs("</b><span>", f);
    esc(f, label);
    fputs("</span></div>\n", f);
}

static void totals(FILE *f, const report *r)
{
    char a[64], b[64];
    fputs("<div class=\"cards\">\n", f);
    snprintf(a, sizeof a, "%" PRIu64, r->cuts);
    card(f, a, "cuts");
    snprintf(a, sizeof a, "%zu", r->n_shards);
    card(f, a, "shards");
    snprintf(a, sizeof a, "%.2f", r->seconds / 3600.0);
    card(f, a, "hours of audio");
    card(f, fmt_bytes(a, sizeof a, (double)r->audio_bytes), "encoded audio");
    card(f, r->shard_bytes > 0 ? fmt_bytes(a, sizeof a, (double)r->shard_bytes) : "?",
         "shard files");
    card(f, r->layout ? r->layout : "?", "layout");
    b[0] = '\0';
    for (size_t i = 0; i < sizeof r->codecs / sizeof r->codecs[0]; i++)
        if (r->codecs[i])
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%s", b[0] ? ", " : "",
                     report_codec_name(i));
    card(f, b[0] ? b : "-", "codecs");
    snprintf(a, sizeof a, "%" PRIu64, r->problems);
    card(f, a, "problems");
    snprintf(a, sizeof a, "%" PRIu64, r->shards_cut_short);
    card(f, a, "shards not checked to the end");
    fputs("</div>\n", f);
}

static void hist_chart(FILE *f, const char *id, const char *title, const report_hist *h,
                       const char *unit)
{
    double edges[REPORT_MAX_BARS + 1];
    uint64_t counts[REPORT_MAX_BARS];
    size_t n = 0;
    report_hist_bars(h, edges, counts, &n);
    svg_histogram(f, id, title, edges, counts, n, unit);
}

static void charts(FILE *f, const report *r)
{
    fputs("<h2>Audio</h2><div class=\"charts\">\n", f);
    hist_chart(f, "chart-duration", "Cut durations (cuts per bin)", &r->duration, "seconds");
    char labels[REPORT_MAX_RATES + REPORT_MAX_CHANNELS + 8][32];
    const char *lp[REPORT_MAX_RATES + 1];
    double v[REPORT_MAX_RATES + 1];
    size_t n = 0;
    for (size_t i = 0; i < r->n_rates; i++, n++) {
        snprintf(labels[n], sizeof labels[n], "%ld Hz", r->rates[i].key);
        lp[n] = labels[n];
        v[n] = (double)r->rates[i].count;
    }
    if (r->other_rate_cuts) {
        lp[n] = "other rates";
        v[n++] = (double)r->other_rate_cuts;
    }
    svg_bar_list(f, "chart-rates", "Sampling rates", lp, v, n, "cuts");
    n = 0;
    for (size_t c = 0; c <= REPORT_MAX_CHANNELS; c++)
        if (r->channels[c]) {
            snprintf(labels[n], sizeof labels[n], "%zu%s channel%s", c,
                     c == REPORT_MAX_CHANNELS ? "+" : "", c == 1 ? "" : "s");
            lp[n] = labels[n];
            v[n++] = (double)r->channels[c];
        }
    svg_bar_list(f, "chart-channels", "Channels", lp, v, n, "cuts");
    n = 0;
    for (size_t i = 0; i < sizeof r->codecs / sizeof r->codecs[0]; i++)
        if (r->codecs[i]) {
            lp[n] = report_codec_name(i);
            v[n++] = (double)r->codecs[i];
        }
    svg_bar_list(f, "chart-codecs", "Codecs", lp, v, n, "cuts");
    fputs("</div>\n", f);
}

static void top_table(FILE *f, const report *r, const char *title, const report_top *t,
                      const char *unit, double factor)
{
    fputs("<table><tr><th colspan=\"3\">", f);
    esc(f, title);
    fputs("</th></tr><tr><th>cut id</th><th>", f);
    esc(f, unit);
    fputs("</th><th>shard</th></tr>\n", f);
    for (size_t i = 0; i < t->n; i++) {
        fputs("<tr><td><code>", f);
        esc(f, t->e[i].id);
        fprintf(f, "</code></td><td class=\"n\">%.4g</td><td>", t->e[i].value * factor);
        esc(f, t->e[i].shard < r->n_shards ? r->shard_names[t->e[i].shard] : "?");
        fputs("</td></tr>\n", f);
    }
    if (t->n == 0)
        fputs("<tr><td colspan=\"3\" class=\"note\">none</td></tr>\n", f);
    fputs("</table>\n", f);
}

static void transcripts(FILE *f, const report *r)
{
    fprintf(f,
            "<h2>Transcripts</h2><p class=\"note\">%" PRIu64 " cuts with text, %.1f characters "
            "per second on average; the outliers at both ends by cut id.</p>\n"
            "<div class=\"charts\">\n",
            r->text_cuts, r->cps.count ? r->cps.sum / (double)r->cps.count : 0.0);
    hist_chart(f, "chart-cps", "Characters per second (cuts per bin)", &r->cps, "chars/s");
    fputs("<div>", f);
    top_table(f, r, "Highest characters per second", &r->cps_high, "chars/s", 1);
    top_table(f, r, "Lowest characters per second", &r->cps_low, "chars/s", 1);
    fputs("</div></div>\n", f);
    if (!r->tokenized)
        return;
    fprintf(f,
            "<p class=\"note\">%" PRIu64 " tokens (the tokenizer's), %.2f tokens per second on "
            "average.</p>\n<div class=\"charts\">\n",
            r->text_tokens, r->tps.count ? r->tps.sum / (double)r->tps.count : 0.0);
    hist_chart(f, "chart-tps", "Tokens per second (cuts per bin)", &r->tps, "tokens/s");
    fputs("<div>", f);
    top_table(f, r, "Highest tokens per second", &r->tps_high, "tokens/s", 1);
    top_table(f, r, "Lowest tokens per second", &r->tps_low, "tokens/s", 1);
    fputs("</div></div>\n", f);
}

static void signal(FILE *f, const report *r)
{
    double n = r->samples ? (double)r->samples : 1;
    fprintf(f,
            "<h2>Signal checks</h2><table id=\"signal\"><tr><th>check</th><th>corpus</th>"
            "<th>cuts over the threshold</th></tr>\n"
            "<tr><td>digital silence (samples exactly 0)</td><td class=\"n\">%.3f%%</td>"
            "<td class=\"n\">%" PRIu64 " over %g%% silent</td></tr>\n"
            "<tr><td>clipping (|sample| &ge; %g)</td><td class=\"n\">%.4f%%</td>"
            "<td class=\"n\">%" PRIu64 " over %g%% clipped</td></tr>\n"
            "<tr><td>DC offset (mean sample)</td><td></td><td class=\"n\">%" PRIu64
            " over %g</td></tr>\n"
            "<tr><td>decoded length against metadata duration</td><td></td>"
            "<td class=\"n\">%" PRIu64 " off by over %g s</td></tr></table>\n"
            "<p class=\"note\">%" PRIu64 " decoded cuts, %" PRIu64 " samples.</p>"
            "<div class=\"charts\">\n",
            100.0 * (double)r->zeros / n, r->silent_cuts, REPORT_SILENT_SHARE * 100,
            REPORT_CLIP_LEVEL, 100.0 * (double)r->clipped / n, r->clipping_cuts,
            REPORT_CLIPPING_SHARE * 100, r->dc_cuts, REPORT_DC_OFFSET, r->length_cuts,
            REPORT_LENGTH_SECONDS, r->decoded_cuts, r->samples);
    top_table(f, r, "Most digital silence", &r->silence_top, "% of samples", 100);
    top_table(f, r, "Most clipping", &r->clip_top, "% of samples", 100);
    top_table(f, r, "Largest DC offset", &r->dc_top, "|mean|", 1);
    top_table(f, r, "Largest length mismatch", &r->length_top, "seconds", 1);
    fputs("</div>\n", f);
}

/* The shard, member, cut id and message cells of a problem's row. */
static void problem_cells(FILE *f, const report_problem *p)
{
    const char *cells[] = {p->shard, p->member, p->cut_id, p->message};
    for (size_t i = 0; i < 4; i++) {
        fputs("<td>", f);
        esc(f, cells[i] ? cells[i] : "-");
        fputs("</td>", f);
    }
}

static void problems(FILE *f, const report *r)
{
    fprintf(f, "<h2>Problems</h2><p class=\"%s\">%" PRIu64 " problem%s</p>\n",
            r->problems ? "bad" : "ok", r->problems, r->problems == 1 ? "" : "s");
    if (r->problems == 0)
        return;
    fputs("<table id=\"problem-kinds\" class=\"wide\"><tr><th>kind</th><th>count</th><th>shard</th>"
          "<th>member</th><th>cut id</th><th>first examples</th></tr>\n",
          f);
    for (size_t i = 0; i < r->n_kinds; i++) {
        const report_kind *k = &r->kinds[i];
        for (size_t j = 0; j < k->n_examples; j++) {
            fputs("<tr>", f);
            if (j == 0) {
                fprintf(f, "<td rowspan=\"%zu\">", k->n_examples);
                esc(f, k->code);
                fprintf(f, "</td><td rowspan=\"%zu\" class=\"n\">%" PRIu64 "</td>", k->n_examples,
                        k->count);
            }
            problem_cells(f, &k->examples[j]);
            fputs("</tr>\n", f);
        }
    }
    fputs("</table>\n<h2>Every problem</h2><table id=\"problem-list\" "
          "class=\"wide\"><tr><th>kind</th>"
          "<th>shard</th><th>member</th><th>cut id</th><th>message</th></tr>\n",
          f);
    for (size_t i = 0; i < r->n_list; i++) {
        fputs("<tr><td>", f);
        esc(f, r->list[i].code);
        fputs("</td>", f);
        problem_cells(f, &r->list[i]);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    if (r->problems > r->n_list)
        fprintf(f, "<p class=\"note\">and %" PRIu64 " more (the first %d are listed)</p>\n",
                r->problems - r->n_list, REPORT_MAX_PROBLEMS);
}

static const report *sort_report;

/* Shards with more problems first, then in their order. */
static int cmp_shard(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    uint64_t px = sort_report->shards[x].problems, py = sort_report->shards[y].problems;
    if (px != py)
        return px < py ? 1 : -1;
    return (x > y) - (x < y);
}

static int shard_table(FILE *f, const report *r)
{
    size_t *order = malloc((r->n_shards ? r->n_shards : 1) * sizeof *order);
    if (order == NULL)
        return ENOMEM;
    for (size_t i = 0; i < r->n_shards; i++)
        order[i] = i;
    sort_report = r;
    qsort(order, r->n_shards, sizeof *order, cmp_shard);
    size_t rows = r->n_shards < REPORT_HTML_SHARD_ROWS ? r->n_shards : REPORT_HTML_SHARD_ROWS;
    fputs("<h2>Shards</h2><table id=\"shards\" class=\"wide\"><tr><th>shard</th><th>cuts</th>"
          "<th>audio seconds</th><th>bytes</th><th>problems</th></tr>\n",
          f);
    for (size_t k = 0; k < rows; k++) {
        const report_shard *s = &r->shards[order[k]];
        char b[32];
        fputs("<tr><td>", f);
        esc(f, r->shard_names[order[k]]);
        fprintf(f,
                "</td><td class=\"n\">%" PRIu64 "</td><td class=\"n\">%.1f</td>"
                "<td class=\"n\">%s</td><td class=\"n%s\">%" PRIu64 "</td></tr>\n",
                s->cuts, s->seconds, s->bytes < 0 ? "?" : fmt_bytes(b, sizeof b, (double)s->bytes),
                s->problems ? " bad" : "", s->problems);
    }
    fputs("</table>\n", f);
    if (rows < r->n_shards)
        fprintf(f,
                "<p class=\"note\">%zu more shards without more problems; the JSON lists the "
                "first %d in order.</p>\n",
                r->n_shards - rows, REPORT_MAX_SHARD_ROWS);
    free(order);
    return 0;
}

/* The JSON inside <script>: every '<' written as \u003c, so that no text in it ends the
 * element (or opens a comment). */
void report_embed_json(FILE *f, const char *json, size_t len)
{
    fputs("<script type=\"application/json\" id=\"sharc-report\">", f);
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '<')
            fputs("\\u003c", f); /* only ever inside a string: the same JSON */
        else
            fputc(json[i], f);
    }
    fputs("</script>\n", f);
}

int report_write_html(FILE *f, const report *r, const char *json, size_t json_len)
{
    errno = 0;
    char wall[32];
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>sharc validate report</title><style>%s</style></head><body>\n"
            "<h1>sharc validate report</h1><div class=\"sub\">",
            style);
    esc(f, r->layout);
    fprintf(f, " layout, %d threads, %s; <span class=\"%s\">%s</span></div>\n", r->threads,
            cli_fmt_duration(wall, sizeof wall, r->wall_seconds), r->problems ? "bad" : "ok",
            r->problems ? "problems found" : "no problems found");
    totals(f, r);
    charts(f, r);
    transcripts(f, r);
    signal(f, r);
    problems(f, r);
    int err = shard_table(f, r);
    report_embed_json(f, json, json_len);
    fputs("</body></html>\n", f);
    if (err == 0 && ferror(f))
        err = errno ? errno : EIO;
    return err;
}

typedef struct save_arg {
    const char *json;
    size_t len;
    int (*write_page)(FILE *f, const void *arg);
    const void *arg;
    int html;
} save_arg;

static int fill(FILE *f, const void *arg)
{
    const save_arg *a = arg;
    if (a->html)
        return a->write_page(f, a->arg);
    if (fwrite(a->json, 1, a->len, f) != a->len || fputc('\n', f) == EOF)
        return errno ? errno : EIO;
    return 0;
}

int report_save_files(const char *html_path, const char *json_path, const char *json, size_t len,
                      int (*write_page)(FILE *f, const void *arg), const void *arg,
                      const char **failed)
{
    save_arg a = {.json = json, .len = len, .write_page = write_page, .arg = arg, .html = 1};
    int err = 0;
    if (html_path != NULL && (err = cli_write_file(html_path, NULL, 0, fill, &a)) != 0)
        *failed = html_path;
    a.html = 0;
    if (err == 0 && json_path != NULL && (err = cli_write_file(json_path, NULL, 0, fill, &a)) != 0)
        *failed = json_path;
    return err;
}

typedef struct page {
    const report *r;
    const char *json;
    size_t len;
} page;

static int write_page(FILE *f, const void *arg)
{
    const page *p = arg;
    return report_write_html(f, p->r, p->json, p->len);
}

int report_save(const report *r, const char *html_path, const char *json_path, const char **failed)
{
    char *json = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&json, &len);
    if (m == NULL)
        return ENOMEM;
    int err = report_write_json(m, r);
    if (fclose(m) != 0 && err == 0)
        err = ENOMEM;
    page p = {.r = r, .json = json, .len = len};
    if (err == 0)
        err = report_save_files(html_path, json_path, json, len, write_page, &p, failed);
    free(json);
    return err;
}

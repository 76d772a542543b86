/*
 * The validation report as one JSON object (docs/cli.md, "The validation report").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "report.h"

static void key(FILE *f, const char *k, int first)
{
    cli_json_key(f, k, first);
}

static void num(FILE *f, const char *k, double v)
{
    key(f, k, 0);
    cli_json_num(f, v);
}

static void u64(FILE *f, const char *k, uint64_t v)
{
    key(f, k, 0);
    fprintf(f, "%" PRIu64, v);
}

static void share(FILE *f, const char *k, uint64_t part, uint64_t whole)
{
    num(f, k, whole ? (double)part / (double)whole : 0.0);
}

static void histogram(FILE *f, const char *k, const report_hist *h)
{
    double edges[REPORT_MAX_BARS + 1];
    uint64_t counts[REPORT_MAX_BARS];
    size_t n = 0;
    report_hist_bars(h, edges, counts, &n);
    key(f, k, 0);
    fputc('{', f);
    key(f, "edges", 1);
    cli_json_nums(f, edges, n + 1);
    key(f, "counts", 0);
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", counts[i]);
    fputs("]}", f);
}

static void top_list(FILE *f, const report *r, const char *k, const report_top *t)
{
    key(f, k, 0);
    fputc('[', f);
    for (size_t i = 0; i < t->n; i++) {
        fputs(i ? ",{" : "{", f);
        key(f, "cut_id", 1);
        cli_json_str(f, t->e[i].id);
        key(f, "shard", 0);
        cli_json_str(f, t->e[i].shard < r->n_shards ? r->shard_names[t->e[i].shard] : NULL);
        num(f, "value", t->e[i].value);
        fputc('}', f);
    }
    fputc(']', f);
}

static void problem(FILE *f, const report_problem *p)
{
    fputc('{', f);
    key(f, "code", 1);
    cli_json_str(f, p->code);
    key(f, "shard", 0);
    cli_json_str(f, p->shard);
    key(f, "member", 0);
    cli_json_str(f, p->member);
    key(f, "cut_id", 0);
    cli_json_str(f, p->cut_id);
    key(f, "message", 0);
    cli_json_str(f, p->message);
    fputc('}', f);
}

static void counts_object(FILE *f, const char *k, const report_count *c, size_t n)
{
    key(f, k, 0);
    fputc('{', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\"%ld\":%" PRIu64, i ? "," : "", c[i].key, c[i].count);
    fputc('}', f);
}

static void totals(FILE *f, const report *r)
{
    key(f, "command", 1);
    cli_json_str(f, r->command);
    key(f, "layout", 0);
    cli_json_str(f, r->layout);
    fprintf(f, ",\"threads\":%d", r->threads);
    num(f, "wall_seconds", r->wall_seconds);
    fprintf(f, ",\"shards\":%zu,\"checked_shards\":%zu", r->n_shards, r->checked_shards);
    u64(f, "cuts", r->cuts);
    num(f, "duration_seconds", r->seconds);
    num(f, "hours", r->seconds / 3600.0);
    u64(f, "audio_bytes", r->audio_bytes);
    key(f, "shard_bytes", 0);
    fprintf(f, "%" PRId64, r->shard_bytes);
    u64(f, "shards_cut_short", r->shards_cut_short);
    key(f, "duration_stats", 0);
    fputc('{', f);
    key(f, "min", 1);
    cli_json_num(f, r->duration.min);
    num(f, "mean", r->cuts ? r->seconds / (double)r->cuts : 0.0);
    num(f, "p50", report_hist_quantile(&r->duration, 0.5));
    num(f, "p90", report_hist_quantile(&r->duration, 0.9));
    num(f, "p99", report_hist_quantile(&r->duration, 0.99));
    num(f, "max", r->duration.max);
    fputc('}', f);
    histogram(f, "duration_histogram", &r->duration);
    counts_object(f, "sampling_rates", r->rates, r->n_rates);
    u64(f, "other_rate_cuts", r->other_rate_cuts);
    report_count ch[REPORT_MAX_CHANNELS + 1];
    size_t n_ch = 0;
    for (size_t c = 0; c <= REPORT_MAX_CHANNELS; c++)
        if (r->channels[c])
            ch[n_ch++] = (report_count){(long)c, r->channels[c]};
    counts_object(f, "channels", ch, n_ch);
    key(f, "codecs", 0);
    fputc('{', f);
    for (size_t i = 0, k = 0; i < sizeof r->codecs / sizeof r->codecs[0]; i++)
        if (r->codecs[i]) {
            key(f, report_codec_name(i), k++ == 0);
            fprintf(f, "%" PRIu64, r->codecs[i]);
        }
    fputc('}', f);
}

static void text_and_signal(FILE *f, const report *r)
{
    key(f, "text", 0);
    fputc('{', f);
    key(f, "cuts", 1);
    fprintf(f, "%" PRIu64, r->text_cuts);
    u64(f, "chars", r->text_chars);
    num(f, "chars_per_second_mean", r->cps.count ? r->cps.sum / (double)r->cps.count : 0.0);
    histogram(f, "chars_per_second_histogram", &r->cps);
    top_list(f, r, "highest_chars_per_second", &r->cps_high);
    top_list(f, r, "lowest_chars_per_second", &r->cps_low);
    if (r->tokenized) {
        u64(f, "tokens", r->text_tokens);
        num(f, "tokens_per_second_mean", r->tps.count ? r->tps.sum / (double)r->tps.count : 0.0);
        histogram(f, "tokens_per_second_histogram", &r->tps);
        top_list(f, r, "highest_tokens_per_second", &r->tps_high);
        top_list(f, r, "lowest_tokens_per_second", &r->tps_low);
    }
    fputc('}', f);

    key(f, "signal", 0);
    fputc('{', f);
    key(f, "decoded_cuts", 1);
    fprintf(f, "%" PRIu64, r->decoded_cuts);
    u64(f, "samples", r->samples);
    share(f, "digital_silence_share", r->zeros, r->samples);
    share(f, "clipping_share", r->clipped, r->samples);
    u64(f, "silent_cuts", r->silent_cuts);
    u64(f, "clipping_cuts", r->clipping_cuts);
    u64(f, "dc_offset_cuts", r->dc_cuts);
    u64(f, "length_mismatch_cuts", r->length_cuts);
    top_list(f, r, "most_silent", &r->silence_top);
    top_list(f, r, "most_clipped", &r->clip_top);
    top_list(f, r, "largest_dc_offset", &r->dc_top);
    top_list(f, r, "largest_length_mismatch", &r->length_top);
    fputc('}', f);
}

static void shards_and_problems(FILE *f, const report *r)
{
    size_t rows = r->n_shards < REPORT_MAX_SHARD_ROWS ? r->n_shards : REPORT_MAX_SHARD_ROWS;
    key(f, "per_shard", 0);
    fputc('[', f);
    for (size_t i = 0; i < rows; i++) {
        const report_shard *s = &r->shards[i];
        fputs(i ? ",{" : "{", f);
        key(f, "shard", 1);
        cli_json_str(f, r->shard_names[i]);
        u64(f, "cuts", s->cuts);
        num(f, "audio_seconds", s->seconds);
        key(f, "bytes", 0);
        if (s->bytes < 0)
            fputs("null", f);
        else
            fprintf(f, "%" PRId64, s->bytes);
        u64(f, "problems", s->problems);
        fputc('}', f);
    }
    fputc(']', f);
    fprintf(f, ",\"per_shard_omitted\":%zu", r->n_shards - rows);
    u64(f, "problem_count", r->problems);
    u64(f, "unattributed_problems", r->unattributed_problems);
    key(f, "problems_by_kind", 0);
    fputc('[', f);
    for (size_t i = 0; i < r->n_kinds; i++) {
        const report_kind *k = &r->kinds[i];
        fputs(i ? ",{" : "{", f);
        key(f, "code", 1);
        cli_json_str(f, k->code);
        u64(f, "count", k->count);
        key(f, "examples", 0);
        fputc('[', f);
        for (size_t j = 0; j < k->n_examples; j++) {
            if (j)
                fputc(',', f);
            problem(f, &k->examples[j]);
        }
        fputs("]}", f);
    }
    fputc(']', f);
    key(f, "problems", 0);
    fputc('[', f);
    for (size_t i = 0; i < r->n_list; i++) {
        if (i)
            fputc(',', f);
        problem(f, &r->list[i]);
    }
    fputc(']', f);
    u64(f, "problems_omitted", r->problems - r->n_list);
}

int report_write_json(FILE *f, const report *r)
{
    errno = 0;
    fputc('{', f);
    totals(f, r);
    text_and_signal(f, r);
    shards_and_problems(f, r);
    fputc('}', f);
    if (ferror(f))
        return errno ? errno : EIO;
    return 0;
}

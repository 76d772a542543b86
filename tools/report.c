/*
 * The validation report's aggregates (report.h): histograms, counts, top-N lists, problems
 * grouped by kind, the per-shard table.
 */
#include "report.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- Signal ---- */

void report_signal_compute(const float *v, size_t n, report_signal *out)
{
    double sum = 0.0, sq = 0.0;
    float peak = 0.0f;
    uint64_t zeros = 0, clipped = 0;
    for (size_t i = 0; i < n; i++) {
        float x = v[i];
        float a = fabsf(x);
        sum += x;
        sq += (double)x * x;
        peak = a > peak ? a : peak;
        zeros += x == 0.0f;
        clipped += a >= (float)REPORT_CLIP_LEVEL;
    }
    out->samples = n;
    out->zeros = zeros;
    out->clipped = clipped;
    out->peak = isnan(peak) ? NAN : peak;
    out->rms = n > 0 ? sqrt(sq / (double)n) : 0.0;
    out->mean = n > 0 ? sum / (double)n : 0.0;
}

/* ---- Histograms ---- */

static int hist_init(report_hist *h, double step, size_t n)
{
    *h = (report_hist){.step = step, .n = n};
    h->bins = calloc(n, sizeof *h->bins);
    return h->bins ? 0 : -1;
}

static void hist_add(report_hist *h, double v)
{
    if (!(v >= 0.0))
        v = 0.0; /* negative or NaN: the first bin */
    /* The small bias keeps 2.0 s in the bin that starts at 2.0 despite 2.0 / 0.1 < 20. */
    double pos = v / h->step + 1e-9;
    if (pos >= (double)h->n)
        h->over++;
    else
        h->bins[(size_t)pos]++;
    h->min = h->count == 0 || v < h->min ? v : h->min;
    h->max = v > h->max ? v : h->max;
    h->count++;
    h->sum += v;
}

/* i * step without the binary fraction's tail (3.9, not 3.9000000000000004). */
static double edge(const report_hist *h, size_t i)
{
    return round((double)i * h->step * 1e9) / 1e9;
}

static const double nice_steps[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};

void report_hist_bars(const report_hist *h, double *edges, uint64_t *counts, size_t *n_bars)
{
    /* Bars of k fine bins, k the first round number giving at most REPORT_MAX_BARS - 1 bars
     * up to the largest value (one bar is kept for the values beyond the fine bins). */
    double top = h->max < h->step * (double)h->n ? h->max : h->step * (double)h->n;
    size_t k = 1, bars = 1;
    for (size_t i = 0; i < sizeof nice_steps / sizeof nice_steps[0]; i++) {
        k = (size_t)nice_steps[i];
        bars = (size_t)floor(top / (h->step * (double)k) + 1e-9) + 1;
        if (bars * k > h->n)
            bars = (h->n + k - 1) / k;
        if (bars <= REPORT_MAX_BARS - 1)
            break;
    }
    if (bars > REPORT_MAX_BARS - 1)
        bars = REPORT_MAX_BARS - 1;
    for (size_t b = 0; b < bars; b++) {
        edges[b] = edge(h, b * k);
        counts[b] = 0;
        for (size_t j = b * k; j < (b + 1) * k && j < h->n; j++)
            counts[b] += h->bins[j];
    }
    edges[bars] = edge(h, bars * k);
    for (size_t j = bars * k; j < h->n; j++)
        counts[bars - 1] += h->bins[j]; /* none unless the cap on bars cut some off */
    if (h->over > 0) {
        counts[bars] = h->over;
        bars++;
        edges[bars] = h->max > edges[bars - 1] ? h->max : edges[bars - 1];
    }
    *n_bars = bars;
}

double report_hist_quantile(const report_hist *h, double q)
{
    if (h->count == 0)
        return 0.0;
    uint64_t want = (uint64_t)ceil(q * (double)h->count), seen = 0;
    if (want == 0)
        want = 1;
    for (size_t i = 0; i < h->n; i++) {
        seen += h->bins[i];
        if (seen >= want)
            return edge(h, i + 1) < h->max ? edge(h, i + 1) : h->max;
    }
    return h->max;
}

/* ---- Top-N lists ---- */

/* Whether (va, ida) goes before (vb, idb) in the list. */
static int top_before(const report_top *t, double va, const char *ida, double vb, const char *idb)
{
    if (va != vb)
        return t->lowest ? va < vb : va > vb;
    return strcmp(ida, idb) < 0;
}

static void top_add(report *r, report_top *t, double v, const char *id, uint32_t shard)
{
    if (!isfinite(v))
        return;
    if (id == NULL)
        id = "";
    if (t->n == REPORT_TOP_N && !top_before(t, v, id, t->e[t->n - 1].value, t->e[t->n - 1].id))
        return;
    char *copy = strdup(id);
    if (copy == NULL) {
        r->oom = 1;
        return;
    }
    size_t i = t->n;
    if (t->n < REPORT_TOP_N)
        t->n++;
    else
        free(t->e[--i].id); /* the last one makes room */
    while (i > 0 && top_before(t, v, id, t->e[i - 1].value, t->e[i - 1].id)) {
        t->e[i] = t->e[i - 1];
        i--;
    }
    t->e[i] = (report_top_entry){.value = v, .id = copy, .shard = shard};
}

static void top_free(report_top *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->e[i].id);
    t->n = 0;
}

/* ---- Shard lookup ---- */

uint64_t report_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

/* "dir\x1fdigits": the folder and the last run of digits of the file name, so that a Shar
 * cuts file finds its recording tar and a NeMo manifest its audio tar. NULL without digits. */
static char *sibling_key(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *end = NULL, *start = NULL;
    for (const char *p = base; *p; p++) {
        if (isdigit((unsigned char)*p)) {
            if (p == base || !isdigit((unsigned char)p[-1]))
                start = p;
            end = p + 1;
        }
    }
    if (start == NULL)
        return NULL;
    int dir_len = (int)(base - path);
    size_t n = (size_t)dir_len + 1 + (size_t)(end - start) + 1;
    char *key = malloc(n);
    if (key != NULL)
        snprintf(key, n, "%.*s\x1f%.*s", dir_len, path, (int)(end - start), start);
    return key;
}

/* The slot of `key`: where it is, or the empty one where it would go. */
static size_t lookup_slot(const report *r, const char *key)
{
    size_t i = (size_t)report_hash(key) & (r->lookup_cap - 1);
    while (r->lookup_keys[i] != NULL && strcmp(r->lookup_keys[i], key) != 0)
        i = (i + 1) & (r->lookup_cap - 1);
    return i;
}

/* Add key -> index (taking the key); a key two shards share maps to none. */
static void lookup_put(report *r, char *key, size_t index)
{
    size_t i = lookup_slot(r, key);
    if (r->lookup_keys[i] != NULL) {
        if (r->lookup[i] != index)
            r->lookup[i] = (size_t)-1;
        free(key);
        return;
    }
    r->lookup_keys[i] = key;
    r->lookup[i] = index;
}

size_t report_find_shard(const report *r, const char *path)
{
    if (path == NULL || r->lookup_cap == 0)
        return (size_t)-1;
    size_t i = lookup_slot(r, path);
    if (r->lookup_keys[i] != NULL && r->lookup[i] != (size_t)-1)
        return r->lookup[i];
    char *key = sibling_key(path);
    if (key == NULL)
        return (size_t)-1;
    i = lookup_slot(r, key);
    free(key);
    return r->lookup_keys[i] != NULL ? r->lookup[i] : (size_t)-1;
}

/* ---- The report ---- */

int report_init(report *r)
{
    *r = (report){.cps_low = {.lowest = 1}, .tps_low = {.lowest = 1}};
    r->list = calloc(REPORT_MAX_PROBLEMS, sizeof *r->list);
    if (r->list == NULL || hist_init(&r->duration, 0.1, 36000) < 0 ||
        hist_init(&r->cps, 0.5, 200) < 0 || hist_init(&r->tps, 0.1, 500) < 0) {
        report_free(r);
        return -1;
    }
    return 0;
}

int report_set_shards(report *r, size_t n, const char *const *shard_names)
{
    r->n_shards = n;
    r->shard_names = calloc(n ? n : 1, sizeof *r->shard_names);
    r->shards = calloc(n ? n : 1, sizeof *r->shards);
    r->lookup_cap = 16;
    while (r->lookup_cap < 4 * n + 16)
        r->lookup_cap *= 2;
    r->lookup = calloc(r->lookup_cap, sizeof *r->lookup);
    r->lookup_keys = calloc(r->lookup_cap, sizeof *r->lookup_keys);
    if (!r->shard_names || !r->shards || !r->lookup || !r->lookup_keys)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const char *name = shard_names[i] ? shard_names[i] : "";
        char *key = strdup(name), *sib = sibling_key(name);
        r->shard_names[i] = strdup(name);
        if (key == NULL || r->shard_names[i] == NULL) {
            free(key);
            free(sib);
            goto fail;
        }
        lookup_put(r, key, i);
        if (sib != NULL)
            lookup_put(r, sib, i);
        struct stat st;
        r->shards[i].bytes = stat(name, &st) == 0 ? (int64_t)st.st_size : -1;
        if (r->shards[i].bytes > 0)
            r->shard_bytes += r->shards[i].bytes;
    }
    return 0;
fail:
    r->oom = 1;
    return -1;
}

/* The codec of an encoded member from its first bytes, as libsndfile would tell. */
static size_t sniff_codec(const uint8_t *a, size_t n)
{
    if (n >= 4 && memcmp(a, "fLaC", 4) == 0)
        return 0;
    if (n >= 12 && (memcmp(a, "RIFF", 4) == 0 || memcmp(a, "RF64", 4) == 0))
        return 1;
    if (n >= 36 && memcmp(a, "OggS", 4) == 0)
        return memcmp(a + 28, "OpusHead", 8) == 0 ? 2 : 3;
    if (n >= 3 && (memcmp(a, "ID3", 3) == 0 || (a[0] == 0xff && (a[1] & 0xe0) == 0xe0)))
        return 4;
    return 5;
}

const char *report_codec_name(size_t i)
{
    static const char *const names[] = {"flac", "wav", "opus", "vorbis", "mp3", "other"};
    return i < 6 ? names[i] : "other";
}

/* Characters (UTF-8 code points) of a text. */
static uint64_t utf8_chars(const char *s)
{
    uint64_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static void count_rate(report *r, int rate)
{
    for (size_t i = 0; i < r->n_rates; i++) {
        if (r->rates[i].key == rate) {
            r->rates[i].count++;
            return;
        }
    }
    if (r->n_rates == REPORT_MAX_RATES)
        r->other_rate_cuts++;
    else
        r->rates[r->n_rates++] = (report_count){rate, 1};
}

static void add_signal(report *r, const report_cut *c, const report_signal *s)
{
    r->decoded_cuts++;
    r->samples += s->samples;
    r->zeros += s->zeros;
    r->clipped += s->clipped;
    double silent = s->samples ? (double)s->zeros / (double)s->samples : 0.0;
    double clip = s->samples ? (double)s->clipped / (double)s->samples : 0.0;
    double length =
        c->sampling_rate > 0 ? fabs((double)c->num_samples / c->sampling_rate - c->duration) : 0.0;
    r->silent_cuts += silent > REPORT_SILENT_SHARE;
    r->clipping_cuts += clip > REPORT_CLIPPING_SHARE;
    r->dc_cuts += fabs(s->mean) > REPORT_DC_OFFSET;
    r->length_cuts += length > REPORT_LENGTH_SECONDS;
    if (silent > 0)
        top_add(r, &r->silence_top, silent, c->id, c->shard_index);
    if (clip > 0)
        top_add(r, &r->clip_top, clip, c->id, c->shard_index);
    if (s->mean != 0)
        top_add(r, &r->dc_top, fabs(s->mean), c->id, c->shard_index);
    if (length > 0)
        top_add(r, &r->length_top, length, c->id, c->shard_index);
}

void report_add_cut(report *r, const report_cut *c)
{
    r->cuts++;
    r->seconds += c->duration;
    r->audio_bytes += c->audio_nbytes;
    hist_add(&r->duration, c->duration);
    count_rate(r, c->sampling_rate);
    int ch = c->channels < 0 ? 0 : c->channels;
    r->channels[ch > REPORT_MAX_CHANNELS ? REPORT_MAX_CHANNELS : ch]++;
    r->codecs[sniff_codec(c->audio, c->audio ? c->audio_nbytes : 0)]++;
    if (c->shard_index < r->n_shards) {
        r->shards[c->shard_index].cuts++;
        r->shards[c->shard_index].seconds += c->duration;
    }
    if (c->text != NULL && c->text[0] != '\0' && c->duration > 0) {
        uint64_t chars = utf8_chars(c->text);
        double cps = (double)chars / c->duration;
        r->text_cuts++;
        r->text_chars += chars;
        hist_add(&r->cps, cps);
        top_add(r, &r->cps_high, cps, c->id, c->shard_index);
        top_add(r, &r->cps_low, cps, c->id, c->shard_index);
        if (c->tokenized) {
            double tps = (double)c->tokens / c->duration;
            r->text_tokens += c->tokens;
            hist_add(&r->tps, tps);
            top_add(r, &r->tps_high, tps, c->id, c->shard_index);
            top_add(r, &r->tps_low, tps, c->id, c->shard_index);
        }
    }
    if (c->signal != NULL)
        add_signal(r, c, c->signal);
}

static char *dup_or_null(report *r, const char *s)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        r->oom = 1;
    return d;
}

static void problem_copy(report *r, report_problem *p, const char *code, const char *shard,
                         const char *member, const char *cut_id, const char *message)
{
    *p = (report_problem){
        .code = dup_or_null(r, code),
        .shard = dup_or_null(r, shard),
        .member = dup_or_null(r, member),
        .cut_id = dup_or_null(r, cut_id),
        .message = dup_or_null(r, message),
    };
}

static void problem_free(report_problem *p)
{
    free(p->code);
    free(p->shard);
    free(p->member);
    free(p->cut_id);
    free(p->message);
}

void report_add_problem(report *r, const char *code, const char *shard, const char *member,
                        const char *cut_id, const char *message)
{
    r->problems++;
    size_t s = report_find_shard(r, shard);
    if (s != (size_t)-1)
        r->shards[s].problems++;
    else
        r->unattributed_problems++;
    report_kind *k = NULL;
    for (size_t i = 0; i < r->n_kinds && k == NULL; i++)
        if (strcmp(r->kinds[i].code, code) == 0)
            k = &r->kinds[i];
    if (k == NULL && r->n_kinds < REPORT_MAX_KINDS) {
        k = &r->kinds[r->n_kinds];
        if ((k->code = dup_or_null(r, code)) == NULL)
            k = NULL;
        else
            r->n_kinds++;
    }
    if (k != NULL) {
        k->count++;
        if (k->n_examples < REPORT_EXAMPLES)
            problem_copy(r, &k->examples[k->n_examples++], code, shard, member, cut_id, message);
    }
    if (r->list != NULL && r->n_list < REPORT_MAX_PROBLEMS)
        problem_copy(r, &r->list[r->n_list++], code, shard, member, cut_id, message);
}

void report_free(report *r)
{
    free(r->duration.bins);
    free(r->cps.bins);
    free(r->tps.bins);
    for (size_t i = 0; r->shard_names && i < r->n_shards; i++)
        free(r->shard_names[i]);
    free(r->shard_names);
    free(r->shards);
    for (size_t i = 0; r->lookup_keys && i < r->lookup_cap; i++)
        free(r->lookup_keys[i]);
    free(r->lookup_keys);
    free(r->lookup);
    top_free(&r->cps_high);
    top_free(&r->cps_low);
    top_free(&r->tps_high);
    top_free(&r->tps_low);
    top_free(&r->silence_top);
    top_free(&r->clip_top);
    top_free(&r->dc_top);
    top_free(&r->length_top);
    for (size_t i = 0; i < r->n_kinds; i++) {
        free(r->kinds[i].code);
        for (size_t j = 0; j < r->kinds[i].n_examples; j++)
            problem_free(&r->kinds[i].examples[j]);
    }
    for (size_t i = 0; r->list && i < r->n_list; i++)
        problem_free(&r->list[i]);
    free(r->list);
    *r = (report){0};
}

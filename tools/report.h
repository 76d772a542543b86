/*
 * The validation report: aggregates of a corpus gathered cut by cut while `sharc validate`
 * reads it (report.c), written as JSON (report_json.c) and as one self-contained HTML page
 * with inline SVG charts and the same JSON embedded (report_html.c, report_svg.c).
 *
 * Everything kept is bounded whatever the corpus: fixed-width histograms, top-N lists, the
 * first examples of each problem kind, a capped problem list and per-shard table. The
 * aggregator is not thread-safe: the caller serialises report_add_*().
 */
#ifndef SHARC_TOOLS_REPORT_H
#define SHARC_TOOLS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Bounds of what a report keeps (docs/cli.md documents them). */
#define REPORT_TOP_N           10   /* cuts in each top-N list */
#define REPORT_EXAMPLES        3    /* first examples kept per problem kind */
#define REPORT_MAX_KINDS       32   /* problem kinds told apart */
#define REPORT_MAX_PROBLEMS    1000 /* problems listed one by one */
#define REPORT_MAX_SHARD_ROWS  5000 /* per-shard rows in the JSON */
#define REPORT_HTML_SHARD_ROWS 500  /* per-shard rows in the HTML table */
#define REPORT_MAX_RATES       32   /* sampling rates told apart */
#define REPORT_MAX_CHANNELS    8    /* channel counts told apart (more count as the last) */
#define REPORT_MAX_BARS        40   /* bars of a rendered histogram, at most */

/* Signal checks: a cut is listed as silent, clipping, off-centre or of the wrong length
 * beyond these. */
#define REPORT_CLIP_LEVEL     0.99997 /* |sample| at or over: clipped (32767/32768) */
#define REPORT_SILENT_SHARE   0.5     /* share of exact zeros over which a cut counts as silent */
#define REPORT_CLIPPING_SHARE 0.001   /* share of clipped samples over which a cut clips */
#define REPORT_DC_OFFSET      0.01    /* |mean| over which a cut has a DC offset */
#define REPORT_LENGTH_SECONDS 0.02    /* |decoded - metadata| seconds over which a cut is off */

/** Signal statistics of one cut's decoded samples (interleaved, all channels). */
typedef struct report_signal {
    uint64_t samples; /* values looked at */
    uint64_t zeros;   /* exactly 0.0: digital silence */
    uint64_t clipped; /* |v| >= REPORT_CLIP_LEVEL */
    double peak;      /* largest |v| */
    double rms;       /* root mean square */
    double mean;      /* DC offset */
} report_signal;

/** One pass over `n` samples (sums in double). */
void report_signal_compute(const float *v, size_t n, report_signal *out);

/** What one cut gives the report; strings are copied when kept. */
typedef struct report_cut {
    const char *id;
    const char *shard;
    const char *text; /* NULL when none */
    int tokenized;    /* `tokens` is the transcript's token count (a tokenizer is set) */
    uint64_t tokens;
    uint32_t shard_index;
    double duration; /* metadata seconds */
    int sampling_rate;
    int channels;
    int64_t num_samples; /* decoded frames */
    const uint8_t *audio;
    size_t audio_nbytes;
    const report_signal *signal; /* NULL when not decoded */
} report_cut;

/** A fine histogram: `n` bins of width `step` from 0, and what lies beyond. */
typedef struct report_hist {
    double step;
    size_t n;
    uint64_t *bins;
    uint64_t over; /* values >= n * step */
    double min;    /* smallest value added (0 before the first) */
    double max;    /* largest value added */
    uint64_t count;
    double sum;
} report_hist;

typedef struct report_top_entry {
    double value;
    char *id;
    uint32_t shard;
} report_top_entry;

/** The REPORT_TOP_N cuts with the largest values (or the smallest, with `lowest`); ties go
 *  to the smaller id, so the list does not depend on thread timing. */
typedef struct report_top {
    int lowest;
    size_t n;
    report_top_entry e[REPORT_TOP_N];
} report_top;

typedef struct report_problem {
    char *code, *shard, *member, *cut_id, *message;
} report_problem;

typedef struct report_kind {
    char *code;
    uint64_t count;
    size_t n_examples;
    report_problem examples[REPORT_EXAMPLES];
} report_kind;

typedef struct report_shard {
    uint64_t cuts;
    double seconds;
    int64_t bytes; /* file size, -1 when unknown (remote) */
    uint64_t problems;
} report_shard;

typedef struct report_count {
    long key;
    uint64_t count;
} report_count;

typedef struct report {
    /* Set by the caller before writing. */
    const char *command; /* "sharc validate" */
    const char *layout;
    int threads;
    double wall_seconds;
    uint64_t shards_cut_short;
    size_t checked_shards; /* fewer than n_shards with --partition, --resume-from */

    size_t n_shards;
    char **shard_names; /* copies */
    report_shard *shards;
    size_t *lookup; /* open addressing over shard names and "dir\x1fdigits" keys */
    char **lookup_keys;
    size_t lookup_cap;

    uint64_t cuts;
    double seconds;
    uint64_t audio_bytes;
    int64_t shard_bytes; /* sum of the known shard sizes */
    report_hist duration;
    report_count rates[REPORT_MAX_RATES];
    size_t n_rates;
    uint64_t other_rate_cuts;
    uint64_t channels[REPORT_MAX_CHANNELS + 1]; /* [c] cuts with c channels, the last c or more */
    uint64_t codecs[6];

    uint64_t text_cuts;
    uint64_t text_chars;
    report_hist cps;
    report_top cps_high, cps_low;
    int tokenized; /* set by the caller: a tokenizer gives each cut's tokens */
    uint64_t text_tokens;
    report_hist tps;
    report_top tps_high, tps_low;

    uint64_t samples, zeros, clipped;
    uint64_t silent_cuts, clipping_cuts, dc_cuts, length_cuts, decoded_cuts;
    report_top silence_top, clip_top, dc_top, length_top;

    uint64_t problems;
    uint64_t unattributed_problems; /* naming no shard of the table */
    report_kind kinds[REPORT_MAX_KINDS];
    size_t n_kinds;
    report_problem *list; /* the first REPORT_MAX_PROBLEMS */
    size_t n_list;
    int oom;
} report;

/** Start an empty report. @return 0, or -1 when out of memory */
int report_init(report *r);

/**
 * Set the shards, once: `n` paths, copied (their sizes are looked up when they are local
 * files). Problems added before name no shard of the table.
 * @return 0, or -1 when out of memory
 */
int report_set_shards(report *r, size_t n, const char *const *shard_names);

void report_add_cut(report *r, const report_cut *c);

/** A problem; `shard` may name a shard's archive or a file of it (its cuts file, manifest). */
void report_add_problem(report *r, const char *code, const char *shard, const char *member,
                        const char *cut_id, const char *message);

/** FNV-1a of a string, for the hash tables of the report and of sharc validate. */
uint64_t report_hash(const char *s);

/** The index of the shard `path` names (its archive, or a file beside it with the same number),
 *  or (size_t)-1. */
size_t report_find_shard(const report *r, const char *path);

void report_free(report *r);

/* ---- Reading the aggregates (for the writers) ---- */

/** The codec names indexed like report.codecs. */
const char *report_codec_name(size_t i);

/**
 * A histogram of at most REPORT_MAX_BARS bars with round edges over the values added:
 * edges[0..*n_bars] and counts[0..*n_bars); the counts sum to h->count.
 */
void report_hist_bars(const report_hist *h, double *edges, uint64_t *counts, size_t *n_bars);

/** The value under which a share `q` (0..1) of the histogram's values lie (bin upper edge). */
double report_hist_quantile(const report_hist *h, double q);

/* ---- Writers (report_json.c, report_html.c) ---- */

/** The report as one JSON object (no newline). @return 0 or an errno value */
int report_write_json(FILE *f, const report *r);

/** The HTML page, with `json` (the report_write_json() text) embedded. @return 0 or errno */
int report_write_html(FILE *f, const report *r, const char *json, size_t json_len);

/**
 * Write `json` (len bytes and a newline) to `json_path` and the page that write_page(f, arg)
 * writes to `html_path` (either may be NULL), each under a temporary name renamed once
 * complete (cli_write_file()): a failure leaves no partial file.
 * @return 0, or an errno value (the failing path in *failed)
 */
int report_save_files(const char *html_path, const char *json_path, const char *json, size_t len,
                      int (*write_page)(FILE *f, const void *arg), const void *arg,
                      const char **failed);

/** The CSS of the report pages. */
const char *report_style(void);

/** `json` as <script type="application/json" id="sharc-report">, each '<' written \u003c. */
void report_embed_json(FILE *f, const char *json, size_t len);

/**
 * Write the HTML page to `html_path` and/or the JSON to `json_path` (either may be NULL),
 * each through a temporary file renamed into place; on failure no partial file is left.
 * @return 0, or an errno value (the failing path in *failed)
 */
int report_save(const report *r, const char *html_path, const char *json_path, const char **failed);

#endif /* SHARC_TOOLS_REPORT_H */

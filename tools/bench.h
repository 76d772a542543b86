/*
 * sharc bench's shared definitions: the options, a run's figures and the report of the runs,
 * used by the command (cmd_bench.c) and its output (bench_output.c).
 */
#ifndef SHARC_TOOLS_BENCH_H
#define SHARC_TOOLS_BENCH_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "cli_loader.h"
#include "cli_reader_opts.h"

#define MAX_REPEAT 101
#define N_STAGES   5

/* JSON names of sharc_reader_stats.stage_seconds, by enum sharc_stage. */
extern const char *const bench_stage_names[N_STAGES];

/* The threads of the process by role, told by the names the library gives them
 * (src/pipeline.c, src/readahead.c); "other" is the caller's thread and any thread not
 * sharc's. */
enum { ROLE_PLANNER, ROLE_DECODE, ROLE_READ_AHEAD, ROLE_NOISE, ROLE_OTHER, N_ROLES };
extern const char *const bench_role_names[N_ROLES];

typedef struct bench_opts {
    int cuts_mode; /* --cuts: sharc_reader_next(), no batching */
    int floor;     /* --floor */
    int json, quiet, verbose;
    uint64_t warmup; /* batches (cuts with --cuts) before the window */
    int warmup_given;
    double warmup_seconds; /* --warmup-seconds: and at least this long from opening */
    uint64_t count;        /* --batches: window length in batches (cuts); 0 = by time */
    double seconds;        /* --seconds: window length in seconds; 0 = by count */
    int repeat;
    double *bins;       /* --bins, owned */
    int bins_linspace;  /* --bins linspace: NeMo's evenly spaced bins, made at the end */
    cli_reader_opts ro; /* the shared list-valued options: 2D bins, batch sizes, models */
    cli_dist dist;      /* --transport, --mesh: batches come from a sharc_loader */
    const char *report_html, *report_json; /* --report, --report-json: bench_report.c */
} bench_opts;

/* Parse argv into settings and options (bench_args.c). Returns -1 to continue, else an exit
 * status. */
int bench_parse_args(int argc, char **argv, sharc_reader_settings *s, bench_opts *o);

/* One measured run of the loader or of the floor. */
typedef struct run_result {
    double wall;  /* the measured window, seconds */
    double cpu;   /* process CPU seconds over the window */
    double audio; /* seconds of audio (metadata durations) in the window */
    double cuts, batches;
    double real_frames, padded_frames; /* sum audio_lens, sum B * T */
    double fill_sum;                   /* sum over batches of sum(duration) / max_duration */
    double first;                      /* open to first batch (cut), seconds */
    double warmup_wall;                /* open to the window's start, seconds */
    uint64_t warmup_taken;             /* batches (cuts) taken before the window */
    double stage[N_STAGES];            /* stage seconds over the window */
    double role_cpu[N_ROLES];          /* CPU seconds of each role's threads over the window */
    double net_bytes, net_retries;     /* remote shards: bytes received, transfers retried */
    double net_wait;                   /* remote shards: seconds waited for their bytes */
    /* --device cuda: the device stage's batches, wall seconds from host batch to device
     * batch, feature kernel seconds and the bytes they read and wrote */
    double dev_batches, dev_seconds, feat_seconds, feat_bytes;
    double cpu_feat_seconds; /* --features on the host: the decode threads' feature seconds */
    double cond_seconds;     /* the decode threads' conditioning seconds (part of decode) */
    double noise_seconds;    /* the noise stream's seconds reading and decoding noise */
    double bcast_seconds;    /* this rank's seconds in the broadcast (NAN without a loader) */
    uint64_t peak_rss;       /* bytes */
    size_t shards;           /* shards the reader found */
    int ended;               /* the data ended the window */
} run_result;

typedef struct report {
    const bench_opts *o;
    const sharc_reader_settings *s;
    const run_result *runs, *floors;
    size_t n_tars;      /* tar files the floor reads */
    int peak_scope_run; /* the peak was reset before each run */
    double copy_bw;     /* --device cuda: the device's copy bandwidth, bytes/s (NAN: none) */
} report;

/* A mixture's per-source summary of the last repetition, as text and as a JSON member. */
extern char *bench_sources_text, *bench_sources_json;

/* The process's CPU seconds (bench_usage.c). */
double bench_process_cpu_seconds(void);
/* Reset the peak resident memory (/proc/self/clear_refs); 1 when it could. */
int bench_reset_peak_rss(void);
/* The peak resident memory, bytes. */
uint64_t bench_peak_rss_bytes(void);
/* CPU seconds of the process's threads, by role. */
void bench_role_cpu_seconds(double out[N_ROLES]);

/* The report of the runs: one JSON object (--json), or text. */
void bench_print_json(FILE *f, const report *rp);
void bench_print_text(const report *rp);

#endif /* SHARC_TOOLS_BENCH_H */

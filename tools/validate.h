/*
 * sharc validate's checking pass (validate_run.c), shared with the command (cmd_validate.c):
 * worker threads read the selected shards, each worker a data-parallel slot of them (or,
 * after --resume-from, each shard from a queue with a reader of its own), and report every
 * cut, problem and finished shard to one validator.
 */
#ifndef SHARC_TOOLS_VALIDATE_H
#define SHARC_TOOLS_VALIDATE_H

#include <pthread.h>
#include <stdint.h>

#include "cli.h"
#include "report.h"

/* Problem codes the tool adds to the library's sharc_problem_name() codes. */
extern const char *const VALIDATE_CODE_DUPLICATE; /* "duplicate_id" */
extern const char *const VALIDATE_CODE_ERROR;     /* "error" */

/* Problems of one kind printed in the text output; the rest are counted. */
#define VALIDATE_TEXT_EXAMPLES 5

/* ---- A hash set of strings with a payload, for ids and problem signatures ---- */

typedef struct vset_entry {
    char *key;
    const char *shard; /* interned, owned by the validator */
    char *member;
} vset_entry;

typedef struct vset {
    vset_entry *slots;
    size_t cap; /* power of two */
    size_t count;
} vset;

/* Look `key` up; when absent insert it (copying key and member) and return NULL. When present
 * return the existing entry. *oom is set when memory ran out. */
const vset_entry *vset_insert(vset *set, const char *key, const char *shard, const char *member,
                              int *oom);
/* The stored copy of `key`, or NULL. */
const char *vset_find(const vset *set, const char *key);
void vset_free(vset *set);

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
    int json, per_cut, verbose;
    double progress_every; /* seconds between progress lines when stderr is no terminal */
    size_t n_shards;
    size_t n_ignored; /* paths found but not read (sharc_reader_num_ignored_paths) */
    sharc_layout layout;
    int n_workers;
    worker *workers;
    char **shard_names;  /* shard paths by shard_index, from the probe's reader */
    unsigned char *left; /* by shard_index: a problem left the shard unread to its end */
    size_t *queue;       /* the shards to check, in order */
    size_t n_queue;
    unsigned char *selected; /* by shard index: in the queue */
    int mixture;             /* --input-cfg: one reader reads every source once */
    int per_shard;           /* --resume-from: a reader per shard of the queue */
    int split_first;         /* else worker w reads the shards k = split_first + split_step * w */
    int split_step;          /*  (mod split_size): a data-parallel slot of the dataset */
    int split_size;
    /* Guarded by lock: */
    size_t next; /* queue position of the next shard to hand out */
    size_t shards_done;
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
    vset ids;
    vset open_problems; /* problems reported while opening, once for all shards */
    vset other_shards;  /* interned shard paths without a usable index */
    report report;      /* the corpus's aggregates (written with --report) */
    int oom;
    cli_progress progress;
    double last_line; /* when the last progress line was printed (no terminal) */
} validator;

struct worker {
    validator *v;
    const sharc_reader_settings *base;
    int rank;
    int opening;       /* inside sharc_reader_open */
    size_t pos;        /* split: the next of its shards not yet recorded as done */
    size_t last_shard; /* split: the shard of the latest cut */
    pthread_t thread;
};

size_t validate_code_index(const char *code);
const char *validate_code_name(size_t i);

/* Emit one problem (JSON line or, for the first VALIDATE_TEXT_EXAMPLES of its kind, a text
 * line). Called with v->lock held. */
void validate_problem_locked(validator *v, const char *code, const char *shard, const char *member,
                             const char *cut_id, const char *message);

/* Report a reader that stopped with `rc` (why: its last error). */
void validate_report_stop(validator *v, int rank, int rc, const char *why, int opening);

/* Check the shards of v->queue on v->n_workers threads. @return 0, or -1 when not all threads
 * could be started */
int validate_run(validator *v, const sharc_reader_settings *s);

void validate_draw_progress_locked(validator *v, int force);

#endif /* SHARC_TOOLS_VALIDATE_H */

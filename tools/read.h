/*
 * sharc read's shared definitions: its options and the helpers that the cuts mode
 * (cmd_read.c) and the batches (read_batches.c) both use.
 */
#ifndef SHARC_TOOLS_READ_H
#define SHARC_TOOLS_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "cli_loader.h"
#include "cli_reader_opts.h"

/* Padded seconds per batch when no batch size is given: a typical single-GPU ASR batch. */
#define DEFAULT_MAX_DURATION 600.0
#define MAX_SAVES            16
/* Ids shown per batch in the text output. */
#define TEXT_IDS 3

typedef struct save_point {
    uint64_t step;
    const char *file;
    int done;
} save_point;

typedef struct read_opts {
    int cuts_mode; /* --cuts */
    int json;
    int json_tokens; /* --json-tokens */
    int quiet;
    int verbose;
    uint64_t limit; /* cuts with --cuts, else batches; 0 = no limit */
    const char *dump_dir;
    const char *resume_file;
    const char *resume_base; /* --resume as given, before FILE.dp<k> */
    save_point saves[MAX_SAVES];
    size_t n_saves;
    const char *batch_only; /* the first option given that only batches use */
    const char *cuts_only;  /* the first option given that only --cuts uses */
    cli_reader_opts ro;     /* --bins, --bucket-batch-size */
    void *state;            /* the --resume blob */
    size_t state_size;
    cli_dist dist;                   /* --transport, --mesh */
    char *slot_names[MAX_SAVES + 2]; /* file names made for this slot (name_files_by_slot) */
    size_t n_slot_names;
    cli_inputs inputs; /* the files the run reads, which no output may replace */
} read_opts;

/* Helpers of cmd_read.c. */
const char *read_shorten(char *buf, size_t n, const char *s, size_t max_chars);
void read_print_shards_json(FILE *f, const sharc_reader_stats *st);
void read_print_summary_head(FILE *f, const sharc_reader *r);
void read_print_skipped_text(const char *prefix, const sharc_reader_stats *st);
void read_print_error_once(const char *error);
const char *read_loader_error(const sharc_loader *l, int rc);
int read_open_loader(const sharc_reader_settings *s, read_opts *o, sharc_loader **l, char *error,
                     size_t cap);

/* Read batches (read_batches.c); an exit status. */
int read_run_batches(sharc_reader_settings *s, read_opts *o);

#endif /* SHARC_TOOLS_READ_H */

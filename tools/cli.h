/*
 * The sharc command-line program: shared declarations.
 *
 * Conventions for subcommands:
 * - Each subcommand lives in tools/cmd_<name>.c and defines
 *   `int cmd_<name>(int argc, char **argv)`. argv[0] is the command name ("read"), the
 *   options and operands follow. The function returns the process exit status.
 * - tools/meson.build compiles cmd_<name>.c when it exists and defines
 *   SHARC_HAVE_CMD_<NAME>=1, so that sharc.c lists only the commands that were built.
 *   A new command adds its name to `sharc_commands` there and an entry to the table in
 *   sharc.c.
 * - Exit statuses: 0 success, 1 failure or problems found (CLI_EXIT_FAIL), 2 usage error
 *   (CLI_EXIT_USAGE). Usage errors print one line naming the problem plus a hint to run
 *   `sharc <command> --help`.
 * - Every command has a complete `--help` (each flag with its default, the exit codes and
 *   an example) printed to stdout with exit status 0.
 * - Options are declared in a table of cli_opt descriptors (tools/cli_opts.h), from which
 *   cli_opts_parse() parses them (getopt_long(); call cli_getopt_reset() first) and
 *   cli_opts_print() lists them in --help. Numeric option values go through cli_parse_*
 *   so that "--epochs abc" is a usage error.
 * - Commands use only the public API (<sharc/sharc.h>). What they need and the API lacks
 *   becomes a public function, not an include of src/.
 * - Machine-readable output is JSON Lines on stdout written with the cli_json_* helpers;
 *   human output goes to stdout, diagnostics and progress to stderr.
 */
#ifndef SHARC_TOOLS_CLI_H
#define SHARC_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <sharc/sharc.h>

#define CLI_EXIT_OK    0
#define CLI_EXIT_FAIL  1
#define CLI_EXIT_USAGE 2

/* Subcommands. Each is defined only when its cmd_<name>.c is built. */
int cmd_read(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_buckets(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_gen(int argc, char **argv);

/* ---- Options and usage errors ---- */

/**
 * Reset getopt_long()'s global state so that a command can parse its own argv. getopt's own
 * messages are off: cli_opts_parse() starts its short options with ':' and hands what
 * getopt returns for a bad option ('?' or ':') to cli_option_error().
 */
void cli_getopt_reset(void);

struct option;
/**
 * The usage error for the option getopt_long() just refused (`opt` is '?' or ':'), saying
 * which and why in one line: unknown, ambiguous (with its candidates), missing its value,
 * or given a value it does not take.
 * @return CLI_EXIT_USAGE
 */
int cli_option_error(const char *cmd, int opt, char *const *argv, const struct option *opts);

/**
 * Print "sharc <cmd>: <message>" and "Try 'sharc <cmd> --help'." to stderr.
 * @return CLI_EXIT_USAGE, so that callers can `return cli_usage_error(...)`.
 */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/**
 * Parse an integer option value in [min, max]; the whole string must be a number.
 * @param opt the option name for the message ("--epochs")
 * @return 0, or -1 after printing a usage error for `cmd`.
 */
int cli_parse_i64(const char *cmd, const char *opt, const char *val, int64_t min, int64_t max,
                  int64_t *out);
int cli_parse_int(const char *cmd, const char *opt, const char *val, int min, int max, int *out);
int cli_parse_u64(const char *cmd, const char *opt, const char *val, uint64_t *out);

/**
 * Parse a finite number in [min, max]; the whole string must be a number.
 * @return 0, or -1 after printing a usage error for `cmd`.
 */
int cli_parse_double(const char *cmd, const char *opt, const char *val, double min, double max,
                     double *out);

/**
 * Parse a comma-separated list of numbers ("1.5,3,7.25"), each finite and in [min, max], and
 * non-decreasing when `sorted`. On success *out (freed first, then malloc'ed) holds *n values;
 * the caller frees it.
 * @return 0, or -1 after printing a usage error for `cmd`.
 */
int cli_parse_double_list(const char *cmd, const char *opt, const char *val, double min, double max,
                          int sorted, double **out, size_t *n);

/** As cli_parse_double_list() for integers in [min, max] ("64,32,16"). */
int cli_parse_u32_list(const char *cmd, const char *opt, const char *val, uint32_t min,
                       uint32_t max, uint32_t **out, size_t *n);

/**
 * Point s->paths at the operands getopt_long() left (argv[optind] on): the PATHs.
 * @return -1 to go on, or CLI_EXIT_USAGE after "no PATH given" when there is none.
 */
int cli_take_paths(const char *cmd, int argc, char **argv, sharc_reader_settings *s);

/** Parse a layout name (auto, shar, nemo, wds); -1 after a usage error. */
int cli_parse_layout(const char *cmd, const char *val, sharc_layout *out);

/** Parse an error policy (fail, skip); -1 after a usage error. */
int cli_parse_on_error(const char *cmd, const char *val, sharc_error_policy *out);

/** The name of a layout ("shar"); "auto" for SHARC_LAYOUT_AUTO. */
const char *cli_layout_name(sharc_layout l);

/** The layout reader `r` reads: its name, "mixture" for an input_cfg's sources (of any
 *  layouts), or NULL when it is not known (a peer, which opens no shards). */
const char *cli_reader_layout_name(const sharc_reader *r);

/**
 * Read an integer environment variable (RANK, WORLD_SIZE, LOCAL_RANK, ...).
 * @return 1 with *out set when it is set and valid, 0 when unset or empty, -1 when it is
 *         set to something that is not an integer in [min, max] (a message is printed).
 */
int cli_env_int(const char *name, int min, int max, int *out);

/** Number of online CPUs (at least 1). */
int cli_online_cpus(void);

/**
 * Flush stdout and check that everything was written (a full disk or closed pipe).
 * @return `status` when it was, else CLI_EXIT_FAIL after a message naming `cmd`; `status`
 *         without a message when the reader of a pipe has gone (cli_stdout_gone()): the
 *         program then ends as if by SIGPIPE in cli_exit().
 */
int cli_finish_output(const char *cmd, int status);

/**
 * Route stdout through a stream that records why a write failed, for the messages of
 * cli_finish_output() and cli_exit(). Called first thing in main().
 */
void cli_stdout_init(void);

/**
 * Whether writing stdout failed because its reader went away (`sharc read | head -1`): a
 * pipe or socket with nothing at the other end. Such an end is quiet, as SIGPIPE's is.
 */
int cli_stdout_gone(void);

/**
 * The end of the program, for main(): flush and close stdout, and when that fails print
 * "sharc CMD: cannot write the output: <why>" (once: not again after cli_finish_output()
 * said it) and return CLI_EXIT_FAIL instead of a success. When the reader of a pipe went
 * away, the process ends by SIGPIPE, quietly, whether SIGPIPE was ignored or not (a shell
 * shows 141). `cmd` is NULL for sharc itself.
 */
int cli_exit(const char *cmd, int status);

/* ---- Output files ---- */

/**
 * The files a run reads, by identity (device and inode), so that no output replaces one:
 * an output that is one of them (the same path, a hard or symbolic link to it) is refused.
 */
typedef struct cli_input {
    dev_t dev;
    ino_t ino;
    char *path; /* as it was added */
} cli_input;

typedef struct cli_inputs {
    cli_input *v;
    size_t n, cap;
} cli_inputs;

/**
 * Add the file at `path`; one that does not exist (yet) is no input and is not added.
 * @return 0, or -1 when out of memory
 */
int cli_inputs_add(cli_inputs *in, const char *path);

/**
 * Add the files behind the reader's PATHs as the reader finds them: each PATH expanded
 * (sharc_reader_expand_path()), a folder's files and those of its sharded_manifests/. A
 * PATH that cannot be expanded adds nothing: opening the reader then says why.
 * @return 0, or -1 when out of memory
 */
int cli_inputs_add_dataset(cli_inputs *in, const char *const *paths, size_t n);

/** The input that `path` names (as it was added), or NULL when it names none. */
const char *cli_inputs_find(const cli_inputs *in, const char *path);

void cli_inputs_free(cli_inputs *in);

/**
 * Make `s` safe to print on a terminal, in place: the control characters (C0, DEL and the C1
 * ones as UTF-8) that a shard's ids, names and transcripts may hold, and that could move the
 * cursor or recolour the screen, each become one '?'; tabs and line breaks become spaces, or
 * stay with `keep_lines` (messages of several lines). Bytes that are not UTF-8 are kept.
 */
void cli_text_sanitize(char *s, int keep_lines);

/**
 * `s` as text output shows it (cli_text_sanitize(), one line): `s` itself when there is
 * nothing to change, else a sanitized copy, malloc'ed into *tmp, which the caller frees (NULL
 * stays NULL; without memory, `s`).
 */
const char *cli_text(const char *s, char **tmp);

/**
 * Add the files a reader with settings `s` reads: its dataset (cli_inputs_add_dataset()), its
 * input_cfg file, its noise dataset and its tokenizer models.
 * @return 0, or -1 when out of memory
 */
int cli_inputs_add_reader(cli_inputs *in, const sharc_reader_settings *s);

/**
 * Refuse --report `html` and --report-json `json` (either may be NULL) when one would replace
 * an input of the run: a file the reader with settings `s` reads (NULL: none), one of the
 * `n_more` files `more` (NULL entries skipped), or the other report file.
 * @return -1 to go on, CLI_EXIT_USAGE after the message, CLI_EXIT_FAIL when out of memory
 */
int cli_refuse_reports_over_inputs(const char *cmd, const sharc_reader_settings *s,
                                   const char *const *more, size_t n_more, const char *html,
                                   const char *json);

/**
 * Create a new, empty file beside `path` for its content, under a hidden temporary name
 * (".<name>.<pid>.<n>.tmp" in the same folder, the name cut at 200 bytes, created with O_EXCL:
 * never an existing file), so that `path` is replaced only by a complete file (cli_rename_tmp())
 * and a failed write leaves nothing behind (unlink the temporary). *tmp is malloc'ed; the caller
 * frees it.
 * @return 0, or an errno value
 */
int cli_make_tmp(const char *path, char **tmp);

/**
 * Whether `path` can be written as cli_write_file() writes it: a temporary file beside it is
 * created and removed again; `path` itself is not touched. For an output that a long run
 * writes at its end, checked before the run.
 * @return 0, or an errno value (ENOENT: no such folder, EACCES, ...)
 */
int cli_check_writable(const char *path);

/**
 * Write `n` bytes of `data` (or, with `fill`, what it writes to the FILE) to `path` through
 * a temporary file (cli_make_tmp()), renamed to `path` once complete and closed; on any
 * failure the temporary is removed and `path` is left as it was.
 * @param fill  when not NULL, writes the content to f and returns 0 or an errno value
 * @return 0, or an errno value (EFBIG, ENOSPC, EACCES, ...)
 */
int cli_write_file(const char *path, const void *data, size_t n,
                   int (*fill)(FILE *f, const void *arg), const void *arg);

/* ---- Time and numbers ---- */

/** Monotonic time in seconds. */
double cli_now(void);

/** Format a count with a k/M/G suffix ("1.25M"); returns buf. */
const char *cli_fmt_count(char *buf, size_t n, double v);

/** Format seconds as "1h02m03s", "4m05s" or "6.7s"; returns buf. */
const char *cli_fmt_duration(char *buf, size_t n, double seconds);

/**
 * Sample statistics of interleaved float samples (all channels together).
 * `sum` is the plain sum, `peak` the maximum absolute value, `rms` the root mean square
 * (0 for an empty buffer). Sums accumulate in double.
 */
typedef struct cli_sample_stats {
    double sum;
    double peak;
    double rms;
} cli_sample_stats;

void cli_sample_stats_compute(const float *samples, size_t n, cli_sample_stats *out);

/* ---- JSON output ---- */

/** Write `s` as a JSON string with escapes (or `null` when s is NULL). */
void cli_json_str(FILE *f, const char *s);

/** Write the `n` bytes at `s` (not NUL-terminated; a NUL byte becomes \u0000) as a JSON string. */
void cli_json_strn(FILE *f, const char *s, size_t n);

/**
 * Whether two paths name one file: the same text, the same existing file (device and inode:
 * a link), or the same resolved folder and name ("a", "./a" and "d/../a"; for files that do
 * not exist yet).
 */
int cli_same_file(const char *a, const char *b);

/** Write a number with round-trip precision, or `null` when it is not finite. */
void cli_json_num(FILE *f, double v);
/** A float as the shortest JSON number that reads back as it; null when not finite. */
void cli_json_f32(FILE *f, float v);
/** v[0..n) as a JSON array of cli_json_num values. */
void cli_json_nums(FILE *f, const double *v, size_t n);

/** Write `"key":` (the key as a JSON string) preceded by a comma unless `first`. */
void cli_json_key(FILE *f, const char *key, int first);

/* ---- Logging and progress ---- */

/** For cli_logger(): record ERROR messages but print nothing. */
#define CLI_LOG_SILENT (-1)

/**
 * A logger for the library that prints "sharc: <level>: <text>" to stderr, thread-safe,
 * clearing the progress line first so that both stay readable. Messages up to `show`
 * (a sharc_log_level, or CLI_LOG_SILENT) are printed; ERROR messages are always recorded
 * for cli_last_logged_error().
 */
void cli_logger(sharc_logger *log, int show);

/**
 * The last ERROR message logged through cli_logger() in this process ("" when none).
 * The library logs the reason of a failed sharc_reader_open() there, since no handle
 * exists to hold it. Copies into buf; returns buf.
 */
const char *cli_last_logged_error(char *buf, size_t n);

/**
 * Print "sharc <cmd>: <prefix><text>" on stderr unless the library's last ERROR message,
 * printed by cli_logger(), was that very text: an error is reported once.
 */
void cli_report_error(const char *cmd, const char *prefix, const char *text);

/**
 * "<kind of error>: <why>" for error `rc` (sharc_strerror()), into buf; only `why` when it
 * names the kind already ("PATH: No such file or directory"), only the kind without `why`.
 * Returns buf.
 */
const char *cli_error_text(char *buf, size_t n, int rc, const char *why);

/*
 * Why a command failed, kept for the {"error": ...} object its --json output ends with (one
 * command runs per process). cli_fail() keeps "<text>" and prints "sharc CMD: <text>" on
 * stderr; cli_failure_buf() is the buffer itself, for text written there directly (not
 * printed); cli_print_json_failure() prints {"error": <the text, or that stderr says why>}
 * and, when `extra` is given, calls it to add fields before the closing brace.
 */
#define CLI_FAILURE_BYTES 2048
void cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *cli_failure_buf(void);
void cli_print_json_failure(FILE *f, void (*extra)(FILE *f, const void *arg), const void *arg);

/** "cannot open the WHAT: <why>", as cli_print_open_failure() prints it after a failed open. */
const char *cli_open_failure_text(char *buf, size_t n, const char *what, int rc);

/**
 * Print "sharc CMD: cannot open the WHAT: <cli_error_text() of rc and the library's logged
 * reason>" for an open that failed with `rc`.
 */
void cli_print_open_failure(const char *cmd, const char *what, int rc);

/**
 * sharc_reader_open() / sharc_loader_open() for command `cmd`. The library's ERROR
 * message for a failed open is held back and printed once, in the command's line from
 * cli_print_open_failure(), instead of twice. A loader whose source could not open its
 * dataset opens without error and reports it through sharc_loader_last_error(); its
 * ERROR line is held back too, for the command to print.
 */
int cli_open_reader(const char *cmd, const sharc_reader_settings *s, sharc_reader **r);
int cli_open_loader(const char *cmd, const sharc_loader_settings *s, sharc_loader **l);

/**
 * A one-line progress display on stderr, shown only when stderr is a terminal and
 * redrawn at most every 100 ms. Not thread-safe: callers serialise updates.
 */
typedef struct cli_progress {
    int enabled;
    double started;
    double last_draw;
} cli_progress;

/** Start a progress display; `enabled` is 0 to force it off (--quiet, --json to a tty). */
void cli_progress_init(cli_progress *p, int enabled);

/**
 * Redraw with `done` of `total` units (total 0 = unknown) and a free-form suffix,
 * unless the last draw was less than 100 ms ago. `force` redraws anyway.
 */
void cli_progress_update(cli_progress *p, double done, double total, const char *suffix, int force);

/** Erase the progress line (before other output to stderr or at the end). */
void cli_progress_clear(cli_progress *p);

/** A mixture's per-source summary (cuts, seconds of audio, realised share against the
 *  weight): "-- " lines, or a ,"sources":[...] member; nothing for a single dataset. */
void cli_print_sources_text(FILE *f, const sharc_reader *r);
void cli_print_sources_json(FILE *f, const sharc_reader *r);

#endif /* SHARC_TOOLS_CLI_H */

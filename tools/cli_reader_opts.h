/*
 * The reader and sampler options that several commands share (--layout, --epochs, ...,
 * --max-duration, --bins, ...): one table of long options with their codes, one function
 * that applies a parsed option to a sharc_reader_settings, and the --help lines that read
 * the same in every command that prints them.
 *
 * Use: list the shared codes a command accepts in a 0-terminated array, build the getopt
 * table with cli_long_options() from that list and the command's own options (numbered
 * from 256, below CLI_RO_FIRST), and pass every option code the command does not handle
 * itself to cli_reader_opt_apply(). A command that validates a shared flag differently
 * (sharc bench's --max-duration) handles that code before calling it. A flag a command
 * does not list stays unknown to getopt, so it is still refused.
 */
#ifndef SHARC_TOOLS_CLI_READER_OPTS_H
#define SHARC_TOOLS_CLI_READER_OPTS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include <sharc/sharc.h>

/* Codes of the shared options: a range of their own, above the commands' codes (256...)
 * and the distributed options (CLI_OPT_TRANSPORT, 2000). */
enum {
    CLI_RO_FIRST = 0x1000,
    /* reader */
    CLI_RO_LAYOUT = CLI_RO_FIRST,
    CLI_RO_EPOCHS,
    CLI_RO_SEED,
    CLI_RO_SHUFFLE_SHARDS,
    CLI_RO_NO_SHUFFLE_SHARDS,
    CLI_RO_DP_RANK,
    CLI_RO_DP_SIZE,
    CLI_RO_ON_ERROR,
    CLI_RO_SAMPLING_RATE,
    CLI_RO_CHANNEL,
    CLI_RO_THREADS,
    CLI_RO_PREFETCH,
    CLI_RO_READ_AHEAD_BYTES,
    CLI_RO_MAX_MEMBER_BYTES,
    /* sampler (batches) */
    CLI_RO_MAX_DURATION,
    CLI_RO_MAX_CUTS,
    CLI_RO_QUADRATIC_DURATION,
    CLI_RO_NUM_BUCKETS,
    CLI_RO_NUM_CUTS_FOR_BINS,
    CLI_RO_BINS,
    CLI_RO_BUCKET_BATCH_SIZE,
    CLI_RO_BUFFER_SIZE,
    CLI_RO_MAX_BUFFER_BYTES,
    CLI_RO_SHUFFLE,
    CLI_RO_NO_SHUFFLE,
    CLI_RO_DROP_LAST,
    CLI_RO_MIN_DURATION,
    CLI_RO_MAX_CUT_DURATION,
    CLI_RO_END
};

/** Whether `opt` is one of the sampler's codes (the options that only batches use). */
#define CLI_RO_IS_SAMPLER(opt) ((opt) >= CLI_RO_MAX_DURATION && (opt) < CLI_RO_END)

/** Room for any command's getopt table built by cli_long_options(). */
#define CLI_MAX_LONG_OPTIONS 80

/**
 * Build a getopt_long() table in `out` (room for `cap` entries): the command's own options
 * `own` (terminated by a {NULL, 0, NULL, 0} entry, which may follow a --help entry), then
 * the shared options named in `shared` (codes, 0-terminated), then the terminator.
 * @return 0, or -1 when `cap` is too small or a code is not a shared option (a bug).
 */
int cli_long_options(struct option *out, size_t cap, const struct option *own, const int *shared);

/** The long name of an option code in a table built by cli_long_options() ("?" if none). */
const char *cli_option_name(const struct option *table, int opt);

/** What the list-valued sampler options own until cli_reader_opts_free(). */
typedef struct cli_reader_opts {
    const char *cmd;             ///< the command, for messages ("read")
    double *bins;                ///< --bins, malloc'ed
    size_t n_bins;               ///< number of --bins
    int bins_linspace;           ///< --bins linspace: NeMo's bins, made by cli_linspace_bins()
    uint32_t *bucket_batch_size; ///< --bucket-batch-size, malloc'ed
    size_t n_bucket_batch_size;  ///< number of --bucket-batch-size
    int dp_given;                ///< --dp-rank or --dp-size was given
} cli_reader_opts;

/**
 * Apply one parsed shared option to `s` (the lists go to `ro`; the caller points
 * s->sampler.bins at them once all options are known, since --bucket-batch-size needs
 * --bins to be checked). Values are checked as `sharc read` has always checked them.
 * @return 0 when applied, 1 when `opt` is not a shared option, -1 after printing a usage
 *         error for ro->cmd.
 */
int cli_reader_opt_apply(cli_reader_opts *ro, int opt, const char *val, sharc_reader_settings *s);

/**
 * The bins NeMo uses when a config gives no bucket_duration_bins but a max_duration
 * (determine_bucket_duration_bins): np.linspace(min_duration if > 0 else 0, max_duration,
 * num_buckets + 1)[1:-1], computed as numpy does, from st->min_duration,
 * st->max_cut_duration (NeMo's max_duration) and st->num_buckets.
 * @param bins receives num_buckets - 1 values, malloc'ed (freed with free())
 * @return 0, or -1 after printing a usage error for `cmd` (no --max-cut-duration, or one
 *         not above --min-duration; fewer than 2 buckets)
 */
int cli_linspace_bins(const char *cmd, const sharc_sampler_settings *st, double **bins,
                      size_t *n_bins);

/** Free the lists held by `ro`. */
void cli_reader_opts_free(cli_reader_opts *ro);

/* --help lines that are the same in every command that prints them. */
#define CLI_RO_HELP_LAYOUT                                                                         \
    "  --layout L          shard layout: auto, shar, nemo or wds (default auto: detect)\n"
#define CLI_RO_HELP_BUFFER_SIZE "  --buffer-size N     cuts held in the buckets (default 20000)\n"

#endif /* SHARC_TOOLS_CLI_READER_OPTS_H */

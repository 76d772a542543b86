/*
 * The reader and sampler options that several commands share (--layout, --epochs, ...,
 * --max-duration, --bins, ...): cli_reader_group, a table of cli_opt descriptors (see
 * cli_opts.h) that commands take options from by name with CLI_USE(), and the lists the
 * list-valued sampler options fill in. A command that checks a shared flag differently
 * (sharc bench's --max-duration) lists a descriptor of its own under that name instead.
 */
#ifndef SHARC_TOOLS_CLI_READER_OPTS_H
#define SHARC_TOOLS_CLI_READER_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include <sharc/sharc.h>

/** What the list-valued sampler options own until cli_reader_opts_free(). */
typedef struct cli_reader_opts {
    double *bins;                ///< --bins, malloc'ed
    size_t n_bins;               ///< number of --bins
    int bins_linspace;           ///< --bins linspace: NeMo's bins, made by cli_linspace_bins()
    uint32_t *bucket_batch_size; ///< --bucket-batch-size, malloc'ed
    size_t n_bucket_batch_size;  ///< number of --bucket-batch-size
    int dp_given;                ///< --dp-rank or --dp-size was given
    /** --speed-perturb, --volume-perturb and their probabilities: the settings' `augment`
     *  points here once one is given (its factors malloc'ed). */
    sharc_augment_settings augment;
    double *bin_tokens;     ///< 2D --bins: the token limit of each bin, malloc'ed
    double *max_tps;        ///< --max-tps, malloc'ed
    const char **tokenizer; ///< --tokenizer values (argv's strings), malloc'ed
    size_t n_tokenizer;     ///< number of --tokenizer
    const char **noise;     ///< --noise paths (argv strings), malloc'ed list
} cli_reader_opts;

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

/**
 * Parse NeMo's 2D bins, "[[D,T],[D,T],...]", into *bins (the durations) and *tokens (the
 * token limits), n_bins each (both freed first, then malloc'ed); the library checks their
 * order. @return 0, or -1 after printing a usage error for `cmd`
 */
int cli_parse_bins_2d(const char *cmd, const char *val, double **bins, double **tokens,
                      size_t *n_bins);

/** Free the lists held by `ro`. */
void cli_reader_opts_free(cli_reader_opts *ro);

#endif /* SHARC_TOOLS_CLI_READER_OPTS_H */

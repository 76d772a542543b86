/*
 * NeMo's 2D bucket estimate (scripts/speech_recognition/estimate_duration_bins_2d.py, as
 * NeMo's speech branch has it): equal-duration buckets, each split into sub-buckets of
 * equal token totals, with the tokens-per-second outliers of each bucket left out of its
 * split and its largest remaining tokens per second as its max_tps. Computed with the
 * script's numpy types (float32 durations, int32 tokens), so the output is the script's.
 */
#ifndef SHARC_TOOLS_BUCKETS_2D_H
#define SHARC_TOOLS_BUCKETS_2D_H

#include <stddef.h>
#include <stdint.h>

typedef struct bins_2d {
    double *duration; ///< each bin's duration (float32 values, or the given max_duration)
    int32_t *tokens;  ///< each bin's token limit
    double *max_tps;  ///< each bin's tokens-per-second cap
    size_t n;         ///< bins
} bins_2d;

/**
 * Estimate the 2D bins of `n` cuts of `durations` seconds and `tokens` tokens.
 * @param num_buckets duration buckets, >= 2
 * @param num_subbuckets token sub-buckets per duration bucket, >= 1
 * @param max_duration the last bucket's duration; 0: the longest cut's, rounded to 3 places
 * @param threshold the z-score of tokens per second above which a cut is an outlier
 * @return 0, or -1 with the reason in err (a bucket left without cuts, as NeMo's script
 *         fails there; out of memory)
 */
int bins_2d_estimate(const double *durations, const uint32_t *tokens, size_t n, int num_buckets,
                     int num_subbuckets, double max_duration, double threshold, bins_2d *out,
                     char *err, size_t err_cap);

void bins_2d_free(bins_2d *b);

/**
 * `sharc buckets --tokenizer`: estimate the 2D bins of the cuts and print them as NeMo's
 * script does (or as one JSON object). @return the command's exit status (a failure is
 * recorded with cli_fail(), which the --json object reports)
 */
int cli_buckets_2d(const double *durations, const uint32_t *tokens, size_t n, uint64_t ignored,
                   int num_buckets, int num_subbuckets, double max_duration, double threshold,
                   int json);

#endif /* SHARC_TOOLS_BUCKETS_2D_H */

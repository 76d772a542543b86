/*
 * The reader and sampler options shared by the commands (see cli_reader_opts.h).
 */
#include "cli_reader_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Indexed by code - CLI_RO_FIRST. */
static const struct option shared_options[CLI_RO_END - CLI_RO_FIRST] = {
#define SHARED(code, name, arg) [code - CLI_RO_FIRST] = {name, arg, NULL, code}
    SHARED(CLI_RO_LAYOUT, "layout", required_argument),
    SHARED(CLI_RO_EPOCHS, "epochs", required_argument),
    SHARED(CLI_RO_SEED, "seed", required_argument),
    SHARED(CLI_RO_SHUFFLE_SHARDS, "shuffle-shards", no_argument),
    SHARED(CLI_RO_NO_SHUFFLE_SHARDS, "no-shuffle-shards", no_argument),
    SHARED(CLI_RO_DP_RANK, "dp-rank", required_argument),
    SHARED(CLI_RO_DP_SIZE, "dp-size", required_argument),
    SHARED(CLI_RO_ON_ERROR, "on-error", required_argument),
    SHARED(CLI_RO_SAMPLING_RATE, "sampling-rate", required_argument),
    SHARED(CLI_RO_CHANNEL, "channel", required_argument),
    SHARED(CLI_RO_THREADS, "threads", required_argument),
    SHARED(CLI_RO_PREFETCH, "prefetch", required_argument),
    SHARED(CLI_RO_READ_AHEAD_BYTES, "read-ahead-bytes", required_argument),
    SHARED(CLI_RO_MAX_MEMBER_BYTES, "max-member-bytes", required_argument),
    SHARED(CLI_RO_MAX_DURATION, "max-duration", required_argument),
    SHARED(CLI_RO_MAX_CUTS, "max-cuts", required_argument),
    SHARED(CLI_RO_QUADRATIC_DURATION, "quadratic-duration", required_argument),
    SHARED(CLI_RO_NUM_BUCKETS, "num-buckets", required_argument),
    SHARED(CLI_RO_NUM_CUTS_FOR_BINS, "num-cuts-for-bins", required_argument),
    SHARED(CLI_RO_BINS, "bins", required_argument),
    SHARED(CLI_RO_BUCKET_BATCH_SIZE, "bucket-batch-size", required_argument),
    SHARED(CLI_RO_BUFFER_SIZE, "buffer-size", required_argument),
    SHARED(CLI_RO_MAX_BUFFER_BYTES, "max-buffer-bytes", required_argument),
    SHARED(CLI_RO_SHUFFLE, "shuffle", no_argument),
    SHARED(CLI_RO_NO_SHUFFLE, "no-shuffle", no_argument),
    SHARED(CLI_RO_DROP_LAST, "drop-last", no_argument),
    SHARED(CLI_RO_MIN_DURATION, "min-duration", required_argument),
    SHARED(CLI_RO_MAX_CUT_DURATION, "max-cut-duration", required_argument),
#undef SHARED
};

int cli_long_options(struct option *out, size_t cap, const struct option *own, const int *shared)
{
    size_t n = 0;
    for (; own->name != NULL; own++) {
        if (n + 1 >= cap)
            return -1;
        out[n++] = *own;
    }
    for (; *shared != 0; shared++) {
        if (n + 1 >= cap || *shared < CLI_RO_FIRST || *shared >= CLI_RO_END)
            return -1;
        out[n++] = shared_options[*shared - CLI_RO_FIRST];
    }
    out[n] = (struct option){NULL, 0, NULL, 0};
    return 0;
}

const char *cli_option_name(const struct option *table, int opt)
{
    for (; table->name != NULL; table++) {
        if (table->val == opt)
            return table->name;
    }
    return "?";
}

static int parse_u32(const char *cmd, const char *opt, const char *val, uint32_t min, uint32_t max,
                     uint32_t *out)
{
    int64_t v;
    if (cli_parse_i64(cmd, opt, val, min, max, &v) < 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* A number of seconds in (0, 1e9]. */
static int parse_positive(const char *cmd, const char *opt, const char *val, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(val, &end);
    if (end == val || *end != '\0' || errno != 0 || !(d > 0) || d > 1e9) {
        cli_usage_error(cmd,
                        "invalid value '%s' for %s (a number above 0, up to 1e+09, is expected)",
                        val, opt);
        return -1;
    }
    *out = d;
    return 0;
}

static int apply_reader(const char *cmd, int opt, const char *val, sharc_reader_settings *s)
{
    switch (opt) {
    case CLI_RO_LAYOUT:
        return cli_parse_layout(cmd, val, &s->layout);
    case CLI_RO_EPOCHS:
        return cli_parse_u64(cmd, "--epochs", val, &s->epochs);
    case CLI_RO_SEED:
        return cli_parse_u64(cmd, "--seed", val, &s->seed);
    case CLI_RO_SHUFFLE_SHARDS:
    case CLI_RO_NO_SHUFFLE_SHARDS:
        s->shuffle_shards = opt == CLI_RO_SHUFFLE_SHARDS;
        return 0;
    case CLI_RO_DP_RANK:
        return cli_parse_int(cmd, "--dp-rank", val, 0, 1 << 20, &s->dp_rank);
    case CLI_RO_DP_SIZE:
        return cli_parse_int(cmd, "--dp-size", val, 1, 1 << 20, &s->dp_size);
    case CLI_RO_ON_ERROR:
        return cli_parse_on_error(cmd, val, &s->on_error);
    case CLI_RO_SAMPLING_RATE:
        return cli_parse_int(cmd, "--sampling-rate", val, 1, 1 << 24, &s->sampling_rate);
    case CLI_RO_CHANNEL:
        return cli_parse_int(cmd, "--channel", val, 0, 1 << 16, &s->channel);
    case CLI_RO_THREADS:
        return cli_parse_int(cmd, "--threads", val, 0, 4096, &s->n_threads);
    case CLI_RO_PREFETCH:
        return cli_parse_int(cmd, "--prefetch", val, 0, 1024, &s->prefetch); /* as the library */
    case CLI_RO_READ_AHEAD_BYTES:
        return cli_parse_u64(cmd, "--read-ahead-bytes", val, &s->read_ahead_bytes);
    case CLI_RO_MAX_MEMBER_BYTES:
        if (cli_parse_u64(cmd, "--max-member-bytes", val, &s->max_member_bytes) < 0)
            return -1;
        if (s->max_member_bytes > 0)
            return 0;
        cli_usage_error(cmd, "--max-member-bytes must be at least 1");
        return -1;
    }
    return 1;
}

static int apply_sampler(cli_reader_opts *ro, int opt, const char *val, sharc_sampler_settings *st)
{
    const char *cmd = ro->cmd;
    switch (opt) {
    case CLI_RO_MAX_DURATION:
        return parse_positive(cmd, "--max-duration", val, &st->max_duration);
    case CLI_RO_MAX_CUTS:
        return parse_u32(cmd, "--max-cuts", val, 1, UINT32_MAX, &st->max_cuts);
    case CLI_RO_QUADRATIC_DURATION:
        return parse_positive(cmd, "--quadratic-duration", val, &st->quadratic_duration);
    case CLI_RO_NUM_BUCKETS:
        return parse_u32(cmd, "--num-buckets", val, 1, 65536, &st->num_buckets);
    case CLI_RO_NUM_CUTS_FOR_BINS:
        return parse_u32(cmd, "--num-cuts-for-bins", val, 1, 1u << 24,
                         &st->num_cuts_for_bins_estimate);
    case CLI_RO_BINS:
        ro->bins_linspace = strcmp(val, "linspace") == 0;
        free(ro->bins);
        ro->bins = NULL;
        ro->n_bins = 0;
        return ro->bins_linspace
                   ? 0
                   : cli_parse_double_list(cmd, "--bins", val, 0, 1e9, 1, &ro->bins, &ro->n_bins);
    case CLI_RO_BUCKET_BATCH_SIZE:
        return cli_parse_u32_list(cmd, "--bucket-batch-size", val, 1, UINT32_MAX,
                                  &ro->bucket_batch_size, &ro->n_bucket_batch_size);
    case CLI_RO_BUFFER_SIZE:
        return parse_u32(cmd, "--buffer-size", val, 1, 1u << 24, &st->buffer_size);
    case CLI_RO_MAX_BUFFER_BYTES:
        return cli_parse_u64(cmd, "--max-buffer-bytes", val, &st->max_buffer_bytes);
    case CLI_RO_SHUFFLE:
    case CLI_RO_NO_SHUFFLE:
        st->shuffle = opt == CLI_RO_SHUFFLE;
        return 0;
    case CLI_RO_DROP_LAST:
        st->drop_last = 1;
        return 0;
    case CLI_RO_MIN_DURATION:
        return cli_parse_double(cmd, "--min-duration", val, 0, 1e9, &st->min_duration);
    case CLI_RO_MAX_CUT_DURATION:
        return parse_positive(cmd, "--max-cut-duration", val, &st->max_cut_duration);
    }
    return 1;
}

int cli_reader_opt_apply(cli_reader_opts *ro, int opt, const char *val, sharc_reader_settings *s)
{
    if (CLI_RO_IS_SAMPLER(opt))
        return apply_sampler(ro, opt, val, &s->sampler);
    ro->dp_given |= opt == CLI_RO_DP_RANK || opt == CLI_RO_DP_SIZE;
    return apply_reader(ro->cmd, opt, val, s);
}

int cli_linspace_bins(const char *cmd, const sharc_sampler_settings *st, double **bins,
                      size_t *n_bins)
{
    const double begin = st->min_duration > 0 ? st->min_duration : 0.0, end = st->max_cut_duration;
    if (!(end > begin))
        return cli_usage_error(cmd,
                               "--bins linspace needs --max-cut-duration (NeMo's max_duration) "
                               "above --min-duration"),
               -1;
    if (st->num_buckets < 2)
        return cli_usage_error(cmd, "--bins linspace needs --num-buckets of at least 2"), -1;
    const size_t n = st->num_buckets - 1;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return cli_usage_error(cmd, "out of memory"), -1;
    /* numpy: step = (stop - start) / (num - 1), then arange(num) * step + start. */
    const double step = (end - begin) / (double)st->num_buckets;
    for (size_t i = 0; i < n; i++)
        v[i] = (double)(i + 1) * step + begin;
    *bins = v;
    *n_bins = n;
    return 0;
}

void cli_reader_opts_free(cli_reader_opts *ro)
{
    free(ro->bins);
    free(ro->bucket_batch_size);
    ro->bins = NULL;
    ro->bucket_batch_size = NULL;
    ro->n_bins = ro->n_bucket_batch_size = 0;
}

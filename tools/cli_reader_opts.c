/*
 * The reader and sampler options shared by the commands (see cli_reader_opts.h).
 */
#include "cli_reader_opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

static int opt_layout(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    return cli_parse_layout(p->cmd, val, target);
}

static int opt_on_error(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    return cli_parse_on_error(p->cmd, val, target);
}

/* --dp-rank and --dp-size: recorded, since a mesh's own dp axis refuses them. */
static int opt_dp(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    char flag[32];
    snprintf(flag, sizeof flag, "--%s", o->name);
    p->ro->dp_given = 1;
    return cli_parse_int(p->cmd, flag, val, (int)o->min, (int)o->max, target);
}

/* Skip spaces, then take `c` when it comes next. */
static int take(const char **p, char c)
{
    while (**p == ' ')
        (*p)++;
    if (**p != c)
        return 0;
    (*p)++;
    return 1;
}

/* A number of --bins from 0 to 1e9 (strtod skips the spaces before it). */
static int take_number(const char **p, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(*p, &end);
    if (end == *p || errno == ERANGE || !isfinite(*out) || *out < 0 || *out > 1e9)
        return 0;
    *p = end;
    return 1;
}

int cli_parse_bins_2d(const char *cmd, const char *val, double **bins, double **tokens,
                      size_t *n_bins)
{
    size_t cap = strlen(val) / 4 + 1, n = 0; /* "[a,b]" takes 5 bytes at least */
    double *d = malloc(cap * sizeof *d), *t = malloc(cap * sizeof *t);
    if (!d || !t) {
        free(d);
        free(t);
        return cli_usage_error(cmd, "out of memory"), -1;
    }
    /* '[' '[' D ',' T ']' (',' '[' D ',' T ']')* ']', spaces anywhere between */
    const char *p = val;
    int ok = take(&p, '[');
    do
        ok = ok && n < cap && take(&p, '[') && take_number(&p, &d[n]) && take(&p, ',') &&
             take_number(&p, &t[n]) && take(&p, ']') && ++n;
    while (ok && take(&p, ','));
    ok = ok && take(&p, ']');
    while (*p == ' ')
        p++;
    if (!ok || *p != '\0') {
        free(d);
        free(t);
        return cli_usage_error(cmd,
                               "--bins '%s': 2D bins are [duration, tokens] pairs, '[[D,T],...]', "
                               "of numbers from 0 to 1e+09",
                               val),
               -1;
    }
    free(*bins);
    free(*tokens);
    *bins = d;
    *tokens = t;
    *n_bins = n;
    return 0;
}

static int opt_bins(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    cli_reader_opts *ro = p->ro;
    ro->bins_linspace = strcmp(val, "linspace") == 0;
    free(ro->bins);
    free(ro->bin_tokens);
    ro->bins = ro->bin_tokens = NULL;
    ro->n_bins = 0;
    if (strchr(val, '['))
        return cli_parse_bins_2d(p->cmd, val, &ro->bins, &ro->bin_tokens, &ro->n_bins);
    return ro->bins_linspace
               ? 0
               : cli_parse_double_list(p->cmd, "--bins", val, 0, 1e9, 1, &ro->bins, &ro->n_bins);
}

/* --max-tps X, or one per 2D bin (the target is sampler.max_tps, which n_max_tps follows). */
static int opt_max_tps(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    cli_reader_opts *ro = p->ro;
    sharc_sampler_settings *st =
        (sharc_sampler_settings *)((char *)target - offsetof(sharc_sampler_settings, max_tps));
    if (cli_parse_double_list(p->cmd, "--max-tps", val, 1e-9, 1e9, 0, &ro->max_tps,
                              &st->n_max_tps) < 0)
        return -1;
    st->max_tps = ro->max_tps;
    return 0;
}

static int opt_bucket_batch_size(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    return cli_parse_u32_list(p->cmd, "--bucket-batch-size", val, 1, UINT32_MAX,
                              &p->ro->bucket_batch_size, &p->ro->n_bucket_batch_size);
}

/* The augment settings of `ro`, pointed to by the reader settings' `augment` (`target`),
 * filled with their defaults when the first of their options is met. */
static sharc_augment_settings *augment_of(cli_reader_opts *ro, void *target)
{
    if (ro->augment.struct_size == 0)
        sharc_augment_default_settings(&ro->augment);
    *(const sharc_augment_settings **)target = &ro->augment;
    return &ro->augment;
}

/* The library checks the ranges at open, naming the setting; here only numbers. */
#define AUGMENT_MAX 1e9

/* --noise PATH, repeatable: the paths of the noise dataset. */
static int opt_noise(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    cli_reader_opts *ro = p->ro;
    sharc_augment_settings *a = augment_of(ro, target);
    const char **list = realloc(ro->noise, (a->n_noise + 1) * sizeof *list);
    if (!list) {
        fprintf(stderr, "sharc %s: out of memory\n", p->cmd);
        return -1;
    }
    list[a->n_noise++] = val;
    ro->noise = list;
    a->noise = list;
    return 0;
}

/* --noise-max-bytes N. */
static int opt_noise_max_bytes(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    return cli_parse_u64(p->cmd, "--noise-max-bytes", val,
                         &augment_of(p->ro, target)->noise_max_bytes);
}

/* --speed-perturb F,..., --volume-perturb LOW,HIGH and --noise-snr LOW,HIGH (in dB). */
static int opt_perturb_list(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    sharc_augment_settings *a = augment_of(p->ro, target);
    const int speed = strcmp(o->name, "speed-perturb") == 0;
    char flag[32];
    double *list = NULL;
    size_t n = 0;
    snprintf(flag, sizeof flag, "--%s", o->name);
    if (cli_parse_double_list(p->cmd, flag, val, -AUGMENT_MAX, AUGMENT_MAX, 0, &list, &n) < 0)
        return -1;
    if (speed) {
        free((void *)a->speed_perturb);
        a->speed_perturb = list;
        a->n_speed_perturb = n;
        return 0;
    }
    const int snr = strcmp(o->name, "noise-snr") == 0;
    if (n != 2) {
        fprintf(stderr, "sharc %s: %s takes two %s in dB, LOW,HIGH (got %zu)\n", p->cmd, flag,
                snr ? "SNRs" : "gains", n);
        free(list);
        return -1;
    }
    double *range = snr ? a->noise_snr_db : a->volume_perturb_db;
    range[0] = list[0];
    range[1] = list[1];
    free(list);
    return 0;
}

/* --speed-perturb-prob, --volume-perturb-prob and --noise-prob: `min` says which. */
static int opt_perturb_prob(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    sharc_augment_settings *a = augment_of(p->ro, target);
    double *const probs[] = {&a->speed_perturb_prob, &a->volume_perturb_prob, &a->noise_prob};
    char flag[32];
    snprintf(flag, sizeof flag, "--%s", o->name);
    return cli_parse_double(p->cmd, flag, val, -AUGMENT_MAX, AUGMENT_MAX, probs[(int)o->min]);
}

/* --tokenizer M.model, or --tokenizer LANG=M.model once per language: each adds a model
 * (the target is `tokenizer`, which n_tokenizer follows). */
static int opt_tokenizer(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    cli_reader_opts *ro = p->ro;
    sharc_reader_settings *s =
        (sharc_reader_settings *)((char *)target - offsetof(sharc_reader_settings, tokenizer));
    if (!*val)
        return cli_usage_error(p->cmd, "--tokenizer wants a model file (or LANG=FILE)"), -1;
    const char **more = realloc(ro->tokenizer, (ro->n_tokenizer + 1) * sizeof *more);
    if (!more)
        return cli_usage_error(p->cmd, "out of memory"), -1;
    more[ro->n_tokenizer++] = val;
    ro->tokenizer = more;
    s->tokenizer = more;
    s->n_tokenizer = ro->n_tokenizer;
    return 0;
}

/* --device cpu|cuda[:N]: sets device and device_ordinal (the target is `device`). */
static int opt_device(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    sharc_reader_settings *s =
        (sharc_reader_settings *)((char *)target - offsetof(sharc_reader_settings, device));
    if (strcmp(val, "cpu") == 0 || strcmp(val, "host") == 0) {
        s->device = SHARC_DEVICE_HOST;
        s->device_ordinal = 0;
        return 0;
    }
    const char *n = val + 4;
    if (strncmp(val, "cuda", 4) == 0 && (*n == 0 || (*n == ':' && n[1]))) {
        long v = 0;
        for (n += *n == ':'; *n >= '0' && *n <= '9' && v <= 1000000; n++)
            v = v * 10 + (*n - '0');
        if (*n == 0 && v <= 1000000) {
            s->device = SHARC_DEVICE_CUDA;
            s->device_ordinal = (int)v;
            return 0;
        }
    }
    return cli_usage_error(p->cmd, "--device '%s': cpu, cuda or cuda:N (N >= 0)", val), -1;
}

/* --features is stored as an int (CLI_OPT_ENUM: the choice's index) into the enum. */
_Static_assert(sizeof(sharc_features) == sizeof(int), "sharc_features is stored as an int");
_Static_assert(SHARC_FEATURES_NONE == 0 && SHARC_FEATURES_FBANK == 1,
               "--features lists none|fbank in the enum's order");

#define R(field)  .target = CLI_T_READER, .offset = offsetof(sharc_reader_settings, field)
#define SM(field) .target = CLI_T_READER, .offset = offsetof(sharc_reader_settings, sampler.field)

/* The help of each option as `sharc read` prints it; other commands may word their own. */
const cli_opt cli_reader_group[] = {
    {CLI_OPT_CUSTOM, "layout", .metavar = "L", R(layout), .handler = opt_layout,
     .help = "shard layout: auto, shar, nemo or wds (default auto: detect)",
     .conflicts = "input-cfg"},
    {CLI_OPT_STRING, "input-cfg", .metavar = "FILE", R(input_cfg),
     .help = "read the mixture a NeMo input_cfg file (YAML or JSON) lists\n"
             "instead of PATH: each cut drawn from a source in proportion\n"
             "to its weight, sources repeating without end (docs/mixing.md)"},
    {CLI_OPT_U32, "max-open-streams", .metavar = "N", R(max_open_streams), .min = 1,
     .max = UINT32_MAX,
     .help = "with --input-cfg: at most N sources with a shard open at once\n"
             "(default: no bound)",
     .needs = "input-cfg"},
    {CLI_OPT_FLAG, "mix-finite", R(mix_finite), .min = 1,
     .help = "with --input-cfg: read each source once, then end", .needs = "input-cfg"},
    {CLI_OPT_U64, "epochs", .metavar = "N", R(epochs),
     .help = "epochs to read; 0 reads forever (default 1)", .conflicts = "input-cfg"},
    {CLI_OPT_U64, "seed", .metavar = "S", R(seed),
     .help = "seed of the shard order (epoch e uses S + e) and of the\n"
             "sampler's bucket choice and in-bucket shuffle (default 0)"},
    {CLI_OPT_FLAG, "shuffle-shards", R(shuffle_shards), .min = 1,
     .help = "permute the shard order each epoch (default)"},
    {CLI_OPT_FLAG, "no-shuffle-shards", R(shuffle_shards), .min = 0,
     .help = "keep the shards in the dataset's order (Shar, WebDataset: the\n"
             "paths' order, by name within a directory; NeMo: by shard id)"},
    {CLI_OPT_CUSTOM, "dp-rank", .metavar = "R", R(dp_rank), .min = 0, .max = 1 << 20,
     .handler = opt_dp, .help = "this data-parallel slot, 0 <= R < N (default 0)"},
    {CLI_OPT_CUSTOM, "dp-size", .metavar = "N", R(dp_size), .min = 1, .max = 1 << 20,
     .handler = opt_dp,
     .help = "number of data-parallel slots; shard i of the epoch's order\n"
             "goes to slot i % N (default 1). For batches, not with RANK and\n"
             "WORLD_SIZE or a --mesh that set the slot themselves"},
    {CLI_OPT_CUSTOM, "on-error", .metavar = "P", R(on_error), .handler = opt_on_error,
     .help = "fail: stop at the first bad cut or shard (default);\n"
             "skip: skip it, count it by reason and go on"},
    {CLI_OPT_INT, "sampling-rate", .metavar = "HZ", R(sampling_rate), .min = 1, .max = 1 << 24,
     .help = "require this sampling rate; a cut at another rate is an error\n"
             "unless --resample (default: any; a batch still holds one rate,\n"
             "and a cut drawn into a batch of another is an error)"},
    {CLI_OPT_FLAG, "resample", R(resample), .min = 1,
     .help = "convert every cut at another rate than --sampling-rate to it\n"
             "(libsoxr, on the decode threads; docs/conditioning.md)"},
    {CLI_OPT_CUSTOM, "speed-perturb", .metavar = "F,...", R(augment), .handler = opt_perturb_list,
     .help = "speed factors in (0, 3], one drawn per cut from the seed, its\n"
             "id and epoch (Lhotse perturb_speed; its duration changes\n"
             "before bucketing) (default: none)"},
    {CLI_OPT_CUSTOM, "speed-perturb-prob", .metavar = "P", R(augment), .min = 0,
     .handler = opt_perturb_prob, .help = "share of cuts whose speed is perturbed (default 1)",
     .needs = "speed-perturb"},
    {CLI_OPT_CUSTOM, "volume-perturb", .metavar = "LO,HI", R(augment), .handler = opt_perturb_list,
     .help = "gain range in dB, one gain drawn uniformly per cut (default:\n"
             "none)"},
    {CLI_OPT_CUSTOM, "volume-perturb-prob", .metavar = "P", R(augment), .min = 1,
     .handler = opt_perturb_prob, .help = "share of cuts whose volume is perturbed (default 1)",
     .needs = "volume-perturb"},
    {CLI_OPT_CUSTOM, "noise", .metavar = "PATH", R(augment), .handler = opt_noise,
     .help = "mix noise from this dataset (any layout; repeat for more paths)\n"
             "into cuts, streamed without end (shards shuffled each pass);\n"
             "needs --sampling-rate (default: none)"},
    {CLI_OPT_CUSTOM, "noise-snr", .metavar = "LO,HI", R(augment), .handler = opt_perturb_list,
     .help = "SNR range in dB, one SNR drawn uniformly per cut (default\n"
             "10,20)",
     .needs = "noise"},
    {CLI_OPT_CUSTOM, "noise-prob", .metavar = "P", R(augment), .min = 2,
     .handler = opt_perturb_prob, .help = "share of cuts that get noise (default 0.5)",
     .needs = "noise"},
    {CLI_OPT_CUSTOM, "noise-max-bytes", .metavar = "N", R(augment), .handler = opt_noise_max_bytes,
     .help = "decoded noise the noise stream holds at most, in bytes of\n"
             "float samples; cuts draw from its first half (default\n"
             "67108864)",
     .needs = "noise"},
    {CLI_OPT_INT, "channel", .metavar = "K", R(channel), .min = 0, .max = 1 << 16,
     .help = "keep only channel K (0-based) of the stored audio (default: all\n"
             "channels; batches need one, so multi-channel data needs it)"},
    {CLI_OPT_INT, "threads", .metavar = "N", R(n_threads), .min = 0, .max = 4096,
     .flags = CLI_BATCH_ONLY,
     .help = "decode threads (with N > 1, shard read-ahead threads too: as\n"
             "many for compressed tars, one per 4 for plain ones, at most\n"
             "8; remote shards: at least one, also with N = 1); 0 = all\n"
             "online cores (default 0)"},
    /* as the library bounds it */
    {CLI_OPT_INT, "prefetch", .metavar = "N", R(prefetch), .min = 0, .max = 1024,
     .flags = CLI_BATCH_ONLY,
     .help = "batches prepared ahead of the one printed; 0 = 2 per thread\n"
             "+ 2, at most 16 (default 0)"},
    {CLI_OPT_U64, "read-ahead-bytes", .metavar = "N", R(read_ahead_bytes), .flags = CLI_BATCH_ONLY,
     .help = "encoded bytes read ahead of the sampler by the read-ahead\n"
             "threads, all together; 0 = no read-ahead threads\n"
             "(default 67108864)"},
    {CLI_OPT_U64, "max-member-bytes", .metavar = "N", R(max_member_bytes), .min = 1, .help = NULL},
    {CLI_OPT_U32, "retries", .metavar = "N", R(retries), .min = 0, .max = 1000,
     .help = "remote shards (s3://, http(s)://): retries of a transfer that\n"
             "fails on the way, each resumed where the last stopped (default 5)"},
    {CLI_OPT_U32, "timeout-ms", .metavar = "MS", R(timeout_ms), .min = 1, .max = 86400000,
     .help = "remote shards: a transfer that receives nothing for MS\n"
             "milliseconds fails and is retried (default 30000)"},
    {CLI_OPT_CUSTOM, "tokenizer", .metavar = "M", R(tokenizer), .handler = opt_tokenizer,
     .help = "a SentencePiece model: each cut's transcript becomes token ids\n"
             "(batches: tokens i32 [B, L], token_lens i32 [B]); repeat as\n"
             "LANG=M, once per language, for NeMo's AggregateTokenizer (ids\n"
             "offset by the models before; a cut's language picks its model)\n"
             "(default: none)"},
    /* the sampler's: batches only */
    {CLI_OPT_CUSTOM, "batch-duration", .metavar = "S", SM(max_duration),
     .handler = cli_opt_positive_seconds, .flags = CLI_BATCH_ONLY, .help = NULL},
    /* The batch limit's old name, which NeMo gives its cut filter (--max-cut-duration). */
    {CLI_OPT_CUSTOM, "max-duration", .metavar = "S", SM(max_duration),
     .handler = cli_opt_positive_seconds, .flags = CLI_BATCH_ONLY,
     .help = "deprecated: --batch-duration", .replaced_by = "batch-duration"},
    {CLI_OPT_U32, "max-cuts", .metavar = "N", SM(max_cuts), .min = 1, .max = UINT32_MAX,
     .flags = CLI_BATCH_ONLY, .help = "at most N cuts per batch (default: no limit)"},
    {CLI_OPT_CUSTOM, "quadratic-duration", .metavar = "Q", SM(quadratic_duration),
     .handler = cli_opt_positive_seconds, .flags = CLI_BATCH_ONLY,
     .help = "a cut of d seconds counts as d + d*d/Q (default: off)"},
    {CLI_OPT_U32, "num-buckets", .metavar = "N", SM(num_buckets), .min = 1, .max = 65536,
     .flags = CLI_BATCH_ONLY,
     .help = "buckets estimated from the first cuts' metadata (default 10)"},
    {CLI_OPT_U32, "num-cuts-for-bins", .metavar = "N", SM(num_cuts_for_bins_estimate), .min = 1,
     .max = 1u << 24, .flags = CLI_BATCH_ONLY,
     .help = "cuts whose durations estimate the bins (default 10000)"},
    {CLI_OPT_CUSTOM, "bins", .metavar = "A,B,...", .handler = opt_bins, .flags = CLI_BATCH_ONLY,
     .help = "sorted bucket boundaries in seconds instead of the estimate:\n"
             "N boundaries make N + 1 buckets, and a cut of d seconds goes\n"
             "to the first bucket whose boundary is >= d (default: estimate);\n"
             "'[[D,T],...]': NeMo's 2D bins of [duration, tokens] pairs (with\n"
             "--tokenizer and --bucket-batch-size, one size per pair): a cut\n"
             "goes to the first pair whose D fits, then the smallest T that\n"
             "fits among that D's pairs; a cut fitting none is filtered out;\n"
             "'linspace': NeMo's default when its config sets max_duration,\n"
             "evenly spaced from --min-duration to --max-cut-duration"},
    {CLI_OPT_CUSTOM, "bucket-batch-size", .metavar = "A,B,...", .handler = opt_bucket_batch_size,
     .flags = CLI_BATCH_ONLY,
     .help = "fixed cuts per batch for each boundary of --bins (one\n"
             "number per boundary, as NeMo's OOMptimizer writes them);\n"
             "excludes --batch-duration and --max-cuts; a cut longer than the\n"
             "last boundary is an error, so also give --max-cut-duration\n"
             "(default: off)"},
    {CLI_OPT_U32, "buffer-size", .metavar = "N", SM(buffer_size), .min = 1, .max = 1u << 24,
     .flags = CLI_BATCH_ONLY, .help = "cuts held in the buckets (default 20000)"},
    {CLI_OPT_U64, "max-buffer-bytes", .metavar = "N", SM(max_buffer_bytes), .flags = CLI_BATCH_ONLY,
     .help = "encoded audio bytes held in the buckets; 0 = no limit\n"
             "(default 1073741824)"},
    {CLI_OPT_FLAG, "shuffle", SM(shuffle), .min = 1, .flags = CLI_BATCH_ONLY,
     .help = "shuffle the cuts inside each bucket (default)"},
    {CLI_OPT_FLAG, "no-shuffle", SM(shuffle), .min = 0, .flags = CLI_BATCH_ONLY,
     .help = "keep the cuts of a bucket in arrival order (the shard order is\n"
             "set by --no-shuffle-shards)"},
    {CLI_OPT_FLAG, "drop-last", SM(drop_last), .min = 1, .flags = CLI_BATCH_ONLY,
     .help = "drop the partial batches left at the end (default: keep them)"},
    {CLI_OPT_DOUBLE, "min-duration", .metavar = "S", SM(min_duration), .dmin = 0, .dmax = 1e9,
     .flags = CLI_BATCH_ONLY,
     .help = "filter out (and count) cuts shorter than S seconds (default 0)"},
    {CLI_OPT_CUSTOM, "max-cut-duration", .metavar = "S", SM(max_cut_duration),
     .handler = cli_opt_positive_seconds, .flags = CLI_BATCH_ONLY,
     .help = "filter out (and count) cuts longer than S seconds\n(default: none)"},
    {CLI_OPT_CUSTOM, "max-tps", .metavar = "X[,X...]", SM(max_tps), .handler = opt_max_tps,
     .flags = CLI_BATCH_ONLY,
     .help = "with --tokenizer: filter out (and count) cuts of more than X\n"
             "tokens per second; with 2D --bins, one X per bin, a cut over\n"
             "its bucket's X fitting no bucket (default: none)"},
    {CLI_OPT_DOUBLE, "min-tps", .metavar = "X", SM(min_tps), .dmin = 0, .dmax = 1e9,
     .flags = CLI_BATCH_ONLY,
     .help = "with --tokenizer: filter out (and count) cuts of fewer than X\n"
             "tokens per second (default 0)"},
    {CLI_OPT_U32, "min-tokens", .metavar = "N", SM(min_tokens), .min = 0, .max = UINT32_MAX,
     .flags = CLI_BATCH_ONLY,
     .help = "with --tokenizer: filter out (and count) cuts of fewer than N\n"
             "tokens (default 0)"},
    {CLI_OPT_U32, "max-tokens", .metavar = "N", SM(max_tokens), .min = 1, .max = UINT32_MAX,
     .flags = CLI_BATCH_ONLY,
     .help = "with --tokenizer: filter out (and count) cuts of more than N\n"
             "tokens (default: none)"},
    {CLI_OPT_DOUBLE, "token-equivalent-duration", .metavar = "S", SM(token_equivalent_duration),
     .dmin = 0, .dmax = 1e9, .flags = CLI_BATCH_ONLY,
     .help = "measure a cut of d seconds as ceil(d / S) audio tokens for the\n"
             "bins, buckets and batch rule, as NeMo's multimodal sampling\n"
             "(--quadratic-duration is then its quadratic_factor) (default: off)"},
    {CLI_OPT_U32, "batch-tokens", .metavar = "N", SM(batch_tokens), .min = 1, .max = UINT32_MAX,
     .flags = CLI_BATCH_ONLY,
     .help = "with --token-equivalent-duration: audio tokens per batch, n cuts\n"
             "x the longest, as --batch-duration counts seconds (default: none)"},
    /* features: batches only (docs/features.md) */
    {CLI_OPT_ENUM, "features", .metavar = "F", R(features), .choices = "none|fbank",
     .flags = CLI_BATCH_ONLY,
     .help = "none, or fbank: NeMo's log-mel filterbank features of each\n"
             "batch as tensors features f32 [B, n_mels, frames] and\n"
             "feature_lens i32 [B] (default none)"},
    {CLI_OPT_INT, "n-mels", .metavar = "N", R(fbank_n_mels), .min = 1, .max = 256,
     .flags = CLI_BATCH_ONLY, .help = "mel bins of --features fbank, 1..256 (default 80)",
     .needs = "features"},
    {CLI_OPT_INT, "fbank-sample-rate", .metavar = "HZ", R(fbank_sample_rate), .min = 1000,
     .max = 384000, .flags = CLI_BATCH_ONLY,
     .help = "the rate the features are made for; a batch at another rate\n"
             "is an error (default 16000)",
     .needs = "features"},
    {CLI_OPT_INT, "fbank-window", .metavar = "N", R(fbank_window), .min = 1, .max = 65536,
     .flags = CLI_BATCH_ONLY, .help = "window length in samples (default 400)",
     .needs = "features"},
    {CLI_OPT_INT, "fbank-hop", .metavar = "N", R(fbank_hop), .min = 1, .max = 65536,
     .flags = CLI_BATCH_ONLY, .help = "hop in samples (default 160)", .needs = "features"},
    {CLI_OPT_INT, "fbank-n-fft", .metavar = "N", R(fbank_n_fft), .min = 2, .max = 65536,
     .flags = CLI_BATCH_ONLY, .help = "FFT size, even, >= the window (default 512)",
     .needs = "features"},
    {CLI_OPT_INT, "fbank-pad-to", .metavar = "N", R(fbank_pad_to), .min = 0, .max = 4096,
     .flags = CLI_BATCH_ONLY,
     .help = "round the frame count up to a multiple of N; 0 = no rounding\n(default 16)",
     .needs = "features"},
    {CLI_OPT_DOUBLE, "fbank-preemph", .metavar = "A", R(fbank_preemph), .dmin = 0, .dmax = 0.999999,
     .flags = CLI_BATCH_ONLY, .help = "pre-emphasis coefficient; 0 = none (default 0.97)",
     .needs = "features"},
    {CLI_OPT_DOUBLE, "fbank-dither", .metavar = "D", R(fbank_dither), .dmin = 0, .dmax = 1,
     .flags = CLI_BATCH_ONLY,
     .help = "standard deviation of a Gaussian dither, seeded by --seed,\n"
             "the cut and its epoch; 0 = off (NeMo dithers in training only)\n(default 0)",
     .needs = "features"},
    {CLI_OPT_FLAG, "no-keep-audio", R(keep_audio), .min = 0, .flags = CLI_BATCH_ONLY,
     .help = "drop the audio tensor from the batches once the features are\n"
             "computed; audio_lens stays (default: keep it)",
     .needs = "features"},
    {CLI_OPT_CUSTOM, "device", .metavar = "D", R(device), .handler = opt_device,
     .flags = CLI_BATCH_ONLY,
     .help = "cpu, or cuda[:N]: upload each batch once to CUDA device N\n"
             "(default 0), compute --features there and hand out device\n"
             "tensors; strings stay on the host (default cpu)"},
    CLI_END,
};

#undef R
#undef SM

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
    free((void *)ro->augment.speed_perturb);
    ro->augment.speed_perturb = NULL;
    free(ro->tokenizer);
    free(ro->bin_tokens);
    free(ro->max_tps);
    ro->bin_tokens = ro->max_tps = NULL;
    ro->tokenizer = NULL;
    ro->n_tokenizer = 0;
    free(ro->noise);
    ro->noise = NULL;
    ro->bins = NULL;
    ro->bucket_batch_size = NULL;
    ro->n_bins = ro->n_bucket_batch_size = 0;
}

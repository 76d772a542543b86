/*
 * Thin public wrappers that validate arguments before calling into the modules.
 */
#include <errno.h>
#include <string.h>

#include "sharc/sharc.h"
#include "base/ctx.h"
#include "batching/resume.h"
#include "batching/featurize.h"
#include "plan/json.h"
#include "reader/reader.h"

_Static_assert(SHARC_PROBLEM_COUNT <= SHARC_PROBLEM_CAPACITY,
               "a new problem kind needs room in sharc_reader_stats.problems");

const char *sharc_problem_name(sharc_problem p)
{
    switch (p) {
#define X(name, str, desc)                                                                         \
    case SHARC_PROBLEM_##name:                                                                     \
        return str;
        SHARC_PROBLEM_MAP(X)
#undef X
    default:
        return "unknown";
    }
}

const char *sharc_filter_name(sharc_filter f)
{
    switch (f) {
#define X(name, str, desc)                                                                         \
    case SHARC_FILTER_##name:                                                                      \
        return str;
        SHARC_FILTER_MAP(X)
#undef X
    default:
        return "unknown";
    }
}

void sharc_augment_default_settings(sharc_augment_settings *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->speed_perturb_prob = 1;
    s->volume_perturb_prob = 1;
    s->noise_snr_db[0] = 10;
    s->noise_snr_db[1] = 20;
    s->noise_prob = 0.5;
    s->noise_max_bytes = (uint64_t)64 << 20;
}

void sharc_reader_default_settings(sharc_reader_settings *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->sampler.struct_size = sizeof s->sampler;
    s->layout = SHARC_LAYOUT_AUTO;
    s->shuffle_shards = 1;
    s->epochs = 1;
    s->dp_size = 1;
    s->on_error = SHARC_ON_ERROR_FAIL;
    s->decode = 1;
    s->channel = -1;
    s->length_tolerance = 0.5;
    s->max_member_bytes = (uint64_t)1 << 30;
    s->max_line_bytes = (uint64_t)16 << 20;
    s->nemo_text_field = "text";
    s->nemo_lang_field = "lang";
    s->sampler.num_buckets = 10;
    s->sampler.num_cuts_for_bins_estimate = 10000;
    s->sampler.buffer_size = 20000;
    s->sampler.max_buffer_bytes = (uint64_t)1 << 30;
    s->sampler.shuffle = 1;
    s->sampler.sync_buckets = 1;
    s->sampler.world_size = 1;
    s->prefetch = 0;
    s->max_held_batches = 4;
    s->read_ahead_bytes = (uint64_t)64 << 20;
    s->device = SHARC_DEVICE_HOST;
    s->device_ordinal = 0;
    s->augment = NULL;
    s->resample = 0;
    s->features = SHARC_FEATURES_NONE;
    s->keep_audio = 1;
    sharc__fbank_settings fs;
    sharc__fbank_default_settings(&fs);
    s->fbank_n_mels = fs.n_mels;
    s->fbank_sample_rate = fs.sample_rate;
    s->fbank_window = fs.window;
    s->fbank_hop = fs.hop;
    s->fbank_n_fft = fs.n_fft;
    s->fbank_pad_to = fs.pad_to;
    s->fbank_preemph = fs.preemph;
    s->fbank_dither = fs.dither;
    s->retries = 5;
    s->timeout_ms = 30000;
    sharc_default_logger(&s->logger);
    sharc_default_allocator(&s->allocator);
}

static int reserved_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* Upper bounds on counts that size arrays and thread pools (far above any machine's need). */
#define SHARC__MAX_THREADS  4096
#define SHARC__MAX_PREFETCH 1024

/* The conditioning settings (docs/conditioning.md), each error naming its setting. */
static const char *check_conditioning(const sharc_reader_settings *s)
{
    const sharc_augment_settings *a = s->augment;
    if (s->resample && s->sampling_rate <= 0)
        return "resample needs sampling_rate (--sampling-rate) to convert the cuts to";
    if (!a)
        return NULL;
    if (a->struct_size != sizeof *a)
        return "augment: fill it with sharc_augment_default_settings()";
    if (!reserved_zero(a->reserved, sizeof a->reserved))
        return "augment reserved bytes must be zero";
    if (a->n_speed_perturb && !a->speed_perturb)
        return "speed_perturb is NULL with n_speed_perturb > 0";
    for (size_t i = 0; i < a->n_speed_perturb; i++)
        if (!(a->speed_perturb[i] > 0 && a->speed_perturb[i] <= 3))
            return "speed_perturb: each factor must be in (0, 3]";
    if (!(a->speed_perturb_prob >= 0 && a->speed_perturb_prob <= 1))
        return "speed_perturb_prob must be in [0, 1]";
    if (!(a->volume_perturb_db[0] <= a->volume_perturb_db[1]))
        return "volume_perturb: the low gain must not be above the high one";
    if (!(a->volume_perturb_db[0] >= -120 && a->volume_perturb_db[1] <= 120))
        return "volume_perturb: gains must be in [-120, 120] dB";
    if (!(a->volume_perturb_prob >= 0 && a->volume_perturb_prob <= 1))
        return "volume_perturb_prob must be in [0, 1]";
    if (!a->n_noise)
        return NULL;
    if (!a->noise)
        return "noise is NULL with n_noise > 0";
    for (size_t i = 0; i < a->n_noise; i++)
        if (!a->noise[i])
            return "noise: a path is NULL";
    if (s->sampling_rate <= 0)
        return "noise needs sampling_rate (--sampling-rate), the rate it is mixed in at";
    if (!(a->noise_snr_db[0] <= a->noise_snr_db[1]))
        return "noise_snr: the low SNR must not be above the high one";
    if (!(a->noise_snr_db[0] >= -100 && a->noise_snr_db[1] <= 100))
        return "noise_snr: SNRs must be in [-100, 100] dB";
    if (!(a->noise_prob >= 0 && a->noise_prob <= 1))
        return "noise_prob must be in [0, 1]";
    if (a->noise_max_bytes == 0)
        return "noise_max_bytes must be > 0";
    return NULL;
}

static int check_reader_settings(const sharc_reader_settings *s, const char **why)
{
    *why = NULL;
    int null_path = 0;
    for (size_t i = 0; s->paths && i < s->n_paths; i++)
        null_path |= s->paths[i] == NULL;
    const int mixture = s->input_cfg || s->input_cfg_text;
    if (s->input_cfg && s->input_cfg_text)
        *why = "give input_cfg or input_cfg_text, not both";
    else if (mixture && s->n_paths)
        *why = "give paths or input_cfg, not both";
    else if (!mixture && (!s->paths || s->n_paths == 0))
        *why = "no paths given";
    else if (null_path)
        *why = "a path is NULL";
    else if (s->layout < SHARC_LAYOUT_AUTO || s->layout > SHARC_LAYOUT_WDS)
        *why = "unknown layout";
    else if (s->dp_size < 1 || s->dp_rank < 0 || s->dp_rank >= s->dp_size)
        *why = "dp_rank must be in [0, dp_size) and dp_size >= 1";
    else if (s->on_error != SHARC_ON_ERROR_FAIL && s->on_error != SHARC_ON_ERROR_SKIP)
        *why = "unknown error policy";
    else if (s->sampling_rate < 0 || s->channel < -1)
        *why = "sampling_rate must be >= 0 and channel >= -1";
    else if (!(s->length_tolerance >= 0 && s->length_tolerance <= SHARC__MAX_SECONDS))
        *why = "length_tolerance must be in [0, 1e7] seconds";
    else if (s->max_member_bytes == 0 || s->max_line_bytes == 0)
        *why = "size caps must be > 0";
    else if (s->n_threads < 0 || s->n_threads > SHARC__MAX_THREADS || s->prefetch < 0 ||
             s->prefetch > SHARC__MAX_PREFETCH || s->max_held_batches < 1 ||
             s->max_held_batches > SHARC__MAX_PREFETCH)
        *why = "n_threads must be in 0..4096, prefetch in 0..1024 and max_held_batches in "
               "1..1024";
    else if (s->retries > 1000 || s->timeout_ms > 86400000)
        *why = "retries must be in 0..1000 and timeout_ms in 0..86400000";
    else if (!s->resume_state != !s->resume_state_size)
        *why = "resume_state and resume_state_size must be given together";
    else if (s->n_tokenizer && !s->tokenizer)
        *why = "n_tokenizer is set and tokenizer is NULL";
    else if (!reserved_zero(s->reserved, sizeof s->reserved))
        *why = "reserved bytes must be zero";
    else if (!reserved_zero(s->sampler.reserved, sizeof s->sampler.reserved))
        *why = "sampler reserved bytes must be zero";
    else
        *why = check_conditioning(s);
    return *why ? SHARC_ERR(EINVAL) : 0;
}

int sharc_reader_open(sharc_reader **out, const sharc_reader_settings *s)
{
    const char *why;
    if (!out)
        return SHARC_ERR(EINVAL);
    *out = NULL;
    if (!s)
        return SHARC_ERR(EINVAL);
    int rc = sharc__check_reader_struct_sizes(s, "sharc_reader_settings",
                                              "sharc_reader_default_settings");
    if (rc < 0)
        return rc;
    if (check_reader_settings(s, &why) < 0) {
        sharc__ctx ctx;
        sharc__ctx_init(&ctx, &s->allocator, &s->logger);
        return sharc__fail(&ctx, SHARC_ERR(EINVAL), "invalid reader settings: %s", why);
    }
    sharc__ctx fctx;
    sharc__ctx_init(&fctx, &s->allocator, &s->logger);
    if ((rc = sharc__featurize_check(&fctx, s)) < 0)
        return sharc__fail_wrap(&fctx, rc, "invalid reader settings");
    /* The device's own message ("device cuda:3: no such device ..."), which says what to
     * change. */
    if ((rc = sharc__device_check(&fctx, s)) < 0) {
        sharc__log_error_once(&fctx);
        return rc;
    }
    return sharc__reader_open(out, s);
}

int sharc_reader_next(sharc_reader *r, const sharc_cut **cut)
{
    if (!r || !cut)
        return SHARC_ERR(EINVAL);
    return sharc__reader_next(r, cut);
}

int sharc_reader_cut_tokens(sharc_reader *r, const int32_t **ids, size_t *n)
{
    if (!r || !ids || !n)
        return SHARC_ERR(EINVAL);
    return sharc__reader_cut_tokens(r, ids, n);
}

int sharc_reader_next_batch(sharc_reader *r, sharc_batch **batch)
{
    if (!r || !batch)
        return SHARC_ERR(EINVAL);
    return sharc__reader_next_batch(r, batch, -1);
}

int sharc_reader_next_batch_timed(sharc_reader *r, sharc_batch **batch, int timeout_ms)
{
    if (!r || !batch)
        return SHARC_ERR(EINVAL);
    return sharc__reader_next_batch(r, batch, timeout_ms < 0 ? -1 : timeout_ms);
}

int sharc_reader_state_save(sharc_reader *r, void *buf, size_t cap, size_t *size)
{
    if (!r || !size)
        return SHARC_ERR(EINVAL);
    return sharc__reader_state_save(r, buf, cap, size);
}

int sharc_reader_pack_states(const void *const *states, const size_t *sizes, size_t n, void *buf,
                             size_t cap, size_t *size)
{
    if (!states || !sizes || !size || n == 0 || n > 65535 || (!buf && cap))
        return SHARC_ERR(EINVAL);
    for (size_t i = 0; i < n; i++)
        if (!states[i] && sizes[i])
            return SHARC_ERR(EINVAL);
    return sharc__resume_bundle_write(states, sizes, n, buf, cap, size);
}

const char *sharc_reader_last_error(const sharc_reader *r)
{
    return r ? sharc__reader_last_error(r) : "";
}

void sharc_reader_get_device_stats(const sharc_reader *r, sharc_device_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (r)
        sharc__reader_device_stats(r, out);
}

int sharc_device_copy_bandwidth(int ordinal, double *bytes_per_second, const sharc_logger *logger)
{
    if (!bytes_per_second || ordinal < 0)
        return SHARC_ERR(EINVAL);
    sharc_logger def;
    sharc_default_logger(&def);
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, logger ? logger : &def);
    return sharc__device_copy_bandwidth(&ctx, ordinal, bytes_per_second);
}

int sharc_tensor_copy_to_host(const sharc_tensor *t, void *dst, size_t cap)
{
    if (!t || (!dst && t->nbytes))
        return SHARC_ERR(EINVAL);
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    return sharc__device_tensor_to_host(&ctx, t, dst, cap);
}

void sharc_reader_get_stats(const sharc_reader *r, sharc_reader_stats *out)
{
    if (!out)
        return;
    if (!r)
        memset(out, 0, sizeof *out);
    else
        sharc__reader_get_stats(r, out);
    out->n_problem_kinds = SHARC_PROBLEM_COUNT;
}

size_t sharc_reader_filter_counts(const sharc_reader *r, uint64_t *counts, size_t n)
{
    if (!r || (!counts && n))
        return 0;
    sharc__filter_counts f;
    sharc__reader_filter_counts(r, &f);
    for (size_t k = 0; k < n && k < SHARC_FILTER_COUNT; k++)
        counts[k] = f.n[k];
    return SHARC_FILTER_COUNT;
}

size_t sharc_reader_num_shards(const sharc_reader *r)
{
    return r ? sharc__reader_num_shards(r) : 0;
}

const char *sharc_reader_shard_path(const sharc_reader *r, size_t i)
{
    return r ? sharc__reader_shard_path(r, i) : NULL;
}

size_t sharc_reader_num_ignored_paths(const sharc_reader *r)
{
    return r ? sharc__reader_num_ignored(r) : 0;
}

sharc_layout sharc_reader_layout(const sharc_reader *r)
{
    return r ? sharc__reader_layout(r) : SHARC_LAYOUT_AUTO;
}

size_t sharc_reader_num_sources(const sharc_reader *r)
{
    return r ? sharc__reader_num_sources(r) : 0;
}

const char *sharc_reader_source_name(const sharc_reader *r, size_t i)
{
    return r ? sharc__reader_source_name(r, i) : NULL;
}

double sharc_reader_source_weight(const sharc_reader *r, size_t i)
{
    return r ? sharc__reader_source_weight(r, i) : 0;
}

size_t sharc_reader_source_tags(const sharc_reader *r, size_t i, const char *const **names,
                                const char *const **values)
{
    const char *const *ignored;
    if (!names)
        names = &ignored;
    if (!values)
        values = &ignored;
    *names = *values = NULL;
    return r ? sharc__reader_source_tags(r, i, names, values) : 0;
}

void sharc_reader_source_stats(const sharc_reader *r, size_t i, uint64_t *cuts, double *seconds)
{
    uint64_t c = 0;
    double sec = 0;
    if (r)
        sharc__reader_source_stats(r, i, &c, &sec);
    if (cuts)
        *cuts = c;
    if (seconds)
        *seconds = sec;
}

size_t sharc_reader_source_of_shard(const sharc_reader *r, size_t shard)
{
    return r ? sharc__reader_source_of_shard(r, shard) : 0;
}

const double *sharc_reader_bins(const sharc_reader *r, size_t *n)
{
    size_t ignored;
    if (!n)
        n = &ignored;
    *n = 0;
    return r ? sharc__reader_bins(r, n) : NULL;
}

void sharc_reader_close(sharc_reader **r)
{
    if (r)
        sharc__reader_close(r);
}

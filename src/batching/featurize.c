#include "batching/featurize.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "batching/batch.h"

void sharc__featurize_settings(const sharc_reader_settings *s, sharc__fbank_settings *out)
{
    memset(out, 0, sizeof *out);
    out->sample_rate = s->fbank_sample_rate;
    out->window = s->fbank_window;
    out->hop = s->fbank_hop;
    out->n_fft = s->fbank_n_fft;
    out->n_mels = s->fbank_n_mels;
    out->pad_to = s->fbank_pad_to;
    out->preemph = s->fbank_preemph;
    out->dither = s->fbank_dither;
    out->seed = s->seed;
}

int sharc__featurize_check(sharc__ctx *ctx, const sharc_reader_settings *s)
{
    if (s->features != SHARC_FEATURES_NONE && s->features != SHARC_FEATURES_FBANK)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "features %d: unknown (SHARC_FEATURES_NONE or _FBANK)",
                                (int)s->features);
    if (s->keep_audio != 0 && s->keep_audio != 1)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL), "keep_audio %d: must be 0 or 1",
                                s->keep_audio);
    if (s->features == SHARC_FEATURES_NONE)
        return 0;
    sharc__fbank_settings fs;
    sharc__featurize_settings(s, &fs);
    return sharc__fbank_check(ctx, &fs);
}

/* A cut of the batch to name in an error: the first row's id, when there is one. */
static const char *first_cut(const sharc_batch *b, char *buf, size_t cap)
{
    size_t len = 0;
    const char *id = sharc_batch_string(b, "cut_id", 0, &len);
    snprintf(buf, cap, "%.*s", id ? (int)(len < 200 ? len : 200) : 1, id ? id : "?");
    return buf;
}

int sharc__featurize_batch(sharc__fbank **plan, sharc__ctx *ctx, const sharc_reader_settings *s,
                           sharc_batch *b, int rate, uint64_t step)
{
    if (s->features == SHARC_FEATURES_NONE)
        return 0;
    char cut[256];
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    if (!audio || !lens || audio->dtype != SHARC_DTYPE_F32 || audio->ndim != 2 ||
        audio->device != SHARC_DEVICE_HOST || lens->dtype != SHARC_DTYPE_I32 || lens->ndim != 1 ||
        lens->shape[0] != audio->shape[0])
        return sharc__fail(ctx, SHARC_ERR_FRAME,
                           "features: step %llu: the batch has no host f32 [B, T] audio with "
                           "i32 [B] audio_lens to compute them from",
                           (unsigned long long)step);
    if (rate != s->fbank_sample_rate)
        return sharc__fail(ctx, SHARC_ERR_AUDIO_MISMATCH,
                           "features: step %llu: the batch's audio (cut %s, ...) is at %d Hz and "
                           "the fbank features are made for %d Hz (fbank_sample_rate, "
                           "--fbank-sample-rate); sharc does not resample: require the rate "
                           "with the sampling_rate setting (--sampling-rate %d) to have each "
                           "cut at another rate reported",
                           (unsigned long long)step, first_cut(b, cut, sizeof cut), rate,
                           s->fbank_sample_rate, s->fbank_sample_rate);
    if (!*plan) {
        sharc__fbank_settings fs;
        sharc__featurize_settings(s, &fs);
        int rc = sharc__fbank_create(plan, ctx, &fs);
        if (rc < 0)
            return sharc__fail_wrap(ctx, rc, "features");
    }
    int64_t B = audio->shape[0], T = audio->shape[1];
    int64_t frames = sharc__fbank_frames(*plan, T);
    int64_t shape_f[3] = {B, s->fbank_n_mels, frames}, shape_b[1] = {B};
    int fi =
        sharc__batch_add_tensor(b, "features", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 3, shape_f);
    int li = fi < 0 ? fi
                    : sharc__batch_add_tensor(b, "feature_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST,
                                              0, 1, shape_b);
    int rc = li < 0 ? li : sharc__batch_extend(b);
    if (rc < 0)
        return sharc__fail(ctx, rc,
                           "features: step %llu: cannot add features of %lld x %d x %lld to the "
                           "batch: %s",
                           (unsigned long long)step, (long long)B, s->fbank_n_mels,
                           (long long)frames, sharc_strerror(rc));
    /* Extending may have moved the block: take every pointer again. */
    audio = sharc_batch_tensor(b, "audio");
    lens = sharc_batch_tensor(b, "audio_lens");
    rc = sharc__fbank_compute(*plan, ctx, audio->data, lens->data, B, T, step, b->tensors[fi].data,
                              b->tensors[li].data, frames);
    if (rc < 0)
        return sharc__fail_wrap(ctx, rc, "features: step %llu", (unsigned long long)step);
    if (!s->keep_audio)
        sharc__batch_remove_tensor(b, "audio");
    return 0;
}

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

int sharc__featurize_on_cpu(const sharc_reader_settings *s)
{
    return s->features == SHARC_FEATURES_FBANK;
}

int sharc__featurize_cut(sharc__fbank **plan, sharc__ctx *ctx, const sharc_reader_settings *s,
                         sharc__bufpool *pool, sharc__bcut *c, const float *x)
{
    char why[SHARC__ERRLEN];
    int64_t got = 0, nv = 0, len = c->job.cond.num_samples;
    if (!*plan) {
        sharc__fbank_settings fs;
        sharc__featurize_settings(s, &fs);
        got = sharc__fbank_create(plan, ctx, &fs);
    }
    if (got == 0) {
        nv = sharc__fbank_valid_frames(*plan, len);
        size_t bytes = (size_t)nv * (size_t)s->fbank_n_mels * sizeof(float);
        if (!sharc__bufpool_fits(c->feats.cap, bytes))
            sharc__bufpool_take(pool, bytes, &c->feats);
        got = sharc__buf_reserve(ctx, &c->feats, bytes);
        if (got < 0)
            snprintf(ctx->error, sizeof ctx->error, "%s", sharc_strerror((int)got));
        /* The row at a stride of nv frames: [n_mels, nv], as the batch holds it but for the
         * padding. */
        if (got == 0)
            got = sharc__fbank_row_seeded(*plan, ctx, x, len, sharc__fbank_cut_seed(*plan, c->key),
                                          (float *)c->feats.data, nv);
        c->feats.len = got < 0 ? 0 : bytes;
    }
    if (got < 0) {
        snprintf(why, sizeof why, "%s", ctx->error);
        return sharc__set_error(ctx, (int)got,
                                "%s member %s (cut %s): cannot compute its features (%lld frames "
                                "of %d mels): %s",
                                c->job.shard, c->job.member, c->job.id, (long long)nv,
                                s->fbank_n_mels, why);
    }
    c->feat_frames = nv;
    return 0;
}

/* Add `features` f32 [B, n_mels, frames] and `feature_lens` i32 [B] to `b` (their indices in
 * *fi and *li) and extend its block; the block may move. */
static int add_feature_tensors(sharc__ctx *ctx, const sharc_reader_settings *s, sharc_batch *b,
                               int64_t B, int64_t frames, uint64_t step, int *fi, int *li)
{
    int64_t shape_f[3] = {B, s->fbank_n_mels, frames}, shape_b[1] = {B};
    *fi = sharc__batch_add_tensor(b, "features", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 3, shape_f);
    *li = *fi < 0 ? *fi
                  : sharc__batch_add_tensor(b, "feature_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST,
                                            0, 1, shape_b);
    int rc = *li < 0 ? *li : sharc__batch_extend(b);
    if (rc < 0)
        return sharc__fail(ctx, rc,
                           "features: step %llu: cannot add features of %lld x %d x %lld to the "
                           "batch: %s",
                           (unsigned long long)step, (long long)B, s->fbank_n_mels,
                           (long long)frames, sharc_strerror(rc));
    return 0;
}

/* The audio that features are computed from: a host f32 [B, T] `audio` with i32 [B]
 * `audio_lens`, at the features' rate. */
static int check_audio(sharc__ctx *ctx, const sharc_reader_settings *s, sharc_batch *b, int rate,
                       uint64_t step)
{
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
                           "--fbank-sample-rate): require the rate with the sampling_rate "
                           "setting (--sampling-rate %d), and turn on resample (--resample) to "
                           "convert each cut at another rate",
                           (unsigned long long)step, sharc__batch_first_cut(b, cut, sizeof cut),
                           rate, s->fbank_sample_rate, s->fbank_sample_rate);
    return 0;
}

/* Copy the rows' features from their cuts into features [B, n_mels, frames], zero past each
 * row's valid frames. */
static int place_rows(sharc__ctx *ctx, const sharc_reader_settings *s, sharc__bcut *const *cuts,
                      const uint8_t *skipped, size_t n, size_t B, float *out, int32_t *out_lens,
                      int64_t frames, uint64_t step)
{
    const size_t n_mels = (size_t)s->fbank_n_mels, F = (size_t)frames;
    size_t row = 0, kept = 0;
    for (size_t i = 0; i < n; i++)
        kept += !(skipped && skipped[i]);
    if (kept != B)
        return sharc__fail(ctx, SHARC_ERR_FRAME,
                           "features: step %llu: %zu rows have features, the batch has %zu",
                           (unsigned long long)step, kept, B);
    for (size_t i = 0; i < n; i++) {
        const sharc__bcut *c = cuts[i];
        if (skipped && skipped[i])
            continue;
        size_t nv = (size_t)c->feat_frames;
        if (c->feat_frames < 0 || c->feat_frames > frames ||
            c->feats.len != nv * n_mels * sizeof(float))
            return sharc__fail(ctx, SHARC_ERR_FRAME,
                               "features: step %llu: %s member %s (cut %s): its row has no "
                               "features of %zu mels within %lld frames",
                               (unsigned long long)step, c->job.shard, c->job.member, c->job.id,
                               n_mels, (long long)frames);
        const float *src = (const float *)c->feats.data;
        float *dst = out + row * n_mels * F;
        for (size_t m = 0; m < n_mels; m++) {
            if (nv)
                memcpy(dst + m * F, src + m * nv, nv * sizeof(float));
            memset(dst + m * F + nv, 0, (F - nv) * sizeof(float));
        }
        out_lens[row++] = (int32_t)nv;
    }
    return 0;
}

int sharc__featurize_batch(sharc__fbank **plan, sharc__ctx *ctx, const sharc_reader_settings *s,
                           sharc_batch *b, int rate, uint64_t step)
{
    if (s->features == SHARC_FEATURES_NONE)
        return 0;
    int rc = check_audio(ctx, s, b, rate, step);
    if (rc < 0)
        return rc;
    if (!*plan) {
        sharc__fbank_settings fs;
        sharc__featurize_settings(s, &fs);
        rc = sharc__fbank_create(plan, ctx, &fs);
        if (rc < 0)
            return sharc__fail_wrap(ctx, rc, "features");
    }
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    int64_t B = audio->shape[0], T = audio->shape[1];
    int64_t frames = sharc__fbank_frames(*plan, T);
    int fi = 0, li = 0;
    rc = add_feature_tensors(ctx, s, b, B, frames, step, &fi, &li);
    if (rc < 0)
        return rc;
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

int sharc__featurize_collate(sharc__ctx *ctx, const sharc_reader_settings *s, sharc_batch *b,
                             sharc__bcut *const *cuts, const uint8_t *skipped, size_t n, int rate,
                             uint64_t step)
{
    int rc = check_audio(ctx, s, b, rate, step);
    if (rc < 0)
        return rc;
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    sharc__fbank_settings fs;
    sharc__featurize_settings(s, &fs);
    int64_t B = audio->shape[0];
    int64_t frames = sharc__fbank_frames_of(&fs, audio->shape[1]);
    /* Without the audio, it is removed first, when only the small tensors after it move
     * down: the features then go at the end, where nothing moves them again. */
    rc = s->keep_audio ? 0 : sharc__batch_remove_tensor(b, "audio");
    int fi = 0, li = 0;
    if (rc == 0)
        rc = add_feature_tensors(ctx, s, b, B, frames, step, &fi, &li);
    if (rc < 0)
        return rc;
    return place_rows(ctx, s, cuts, skipped, n, (size_t)B, b->tensors[fi].data, b->tensors[li].data,
                      frames, step);
}

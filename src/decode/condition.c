/*
 * Conditioning one cut: the draws (a hash of seed, id and epoch), Lhotse's length rules,
 * and the samples made with libsoxr, one conversion for resampling and speed together.
 */
#include "decode/condition.h"

#include <errno.h>
#include <math.h>
#include <soxr.h>
#include <string.h>

#include "base/hash.h"
#include "base/rng.h"

/* Python's round(x, 8) then Decimal.quantize(0) half up (or half down): the fraction alone
 * is rounded to 8 decimals, so the integer part keeps its precision however long the cut. */
static int64_t lhotse_round(double x, int half_up)
{
    double whole = floor(x);
    double frac = round((x - whole) * 1e8) / 1e8;
    if (frac > 0.5 || (frac == 0.5 && half_up))
        whole += 1;
    return (int64_t)whole;
}

void sharc__cond_opts_of(const sharc_reader_settings *s, sharc__cond_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rate = s->sampling_rate;
    o->resample = s->resample;
    o->seed = s->seed;
    if (s->augment) {
        o->speeds = s->augment->speed_perturb;
        o->n_speeds = s->augment->n_speed_perturb;
        o->speed_prob = s->augment->speed_perturb_prob;
        o->gain_db[0] = s->augment->volume_perturb_db[0];
        o->gain_db[1] = s->augment->volume_perturb_db[1];
        o->gain_prob = s->augment->volume_perturb_prob;
        o->noise = s->augment->n_noise > 0;
        o->snr_db[0] = s->augment->noise_snr_db[0];
        o->snr_db[1] = s->augment->noise_snr_db[1];
        o->noise_prob = s->augment->noise_prob;
    }
}

int64_t sharc__cond_resampled_length(int64_t n, int from, int to)
{
    return from == to ? n : lhotse_round((double)n * to / from, 1);
}

int64_t sharc__cond_perturbed_length(int64_t n, double factor)
{
    return factor == 1 ? n : lhotse_round((double)n / factor, factor >= 1);
}

void sharc__cond_plan(const sharc__cond_opts *o, sharc__rawcut *c)
{
    sharc__cut_cond *d = &c->cond;
    d->rate = c->sampling_rate;
    d->num_samples = c->num_samples;
    d->speed = 1;
    d->gain = 1;
    d->noise = 0;
    d->snr_db = NAN;
    d->noise_cut = NULL;
    if (o->resample && o->rate > 0 && c->sampling_rate > 0 && c->sampling_rate != o->rate) {
        d->rate = o->rate;
        d->num_samples = sharc__cond_resampled_length(c->num_samples, c->sampling_rate, o->rate);
    }
    if (!o->n_speeds && o->gain_db[0] == 0 && o->gain_db[1] == 0 && !o->noise)
        return;
    /* Seven draws in a fixed order, whichever are used, from the cut alone. */
    uint64_t h = sharc__fnv1a(SHARC__FNV_OFFSET, c->id.data, c->id.len);
    h = sharc__fnv1a_u64(sharc__fnv1a_u64(h, c->epoch), o->seed);
    sharc__rng rng;
    sharc__rng_seed(&rng, h);
    const double speed_u = sharc__rng_uniform(&rng);
    const uint64_t speed_k = sharc__rng_below(&rng, o->n_speeds ? o->n_speeds : 1);
    const double gain_u = sharc__rng_uniform(&rng);
    const double gain_at = sharc__rng_uniform(&rng);
    const double noise_u = sharc__rng_uniform(&rng);
    const uint64_t noise_pick = sharc__rng_next(&rng) | 1; /* never 0, which means none */
    const double snr_at = sharc__rng_uniform(&rng);
    if (o->n_speeds && speed_u < o->speed_prob && o->speeds[speed_k] != 1) {
        d->speed = o->speeds[speed_k];
        d->num_samples = sharc__cond_perturbed_length(d->num_samples, d->speed);
        c->duration = (double)d->num_samples / d->rate;
    }
    if ((o->gain_db[0] != 0 || o->gain_db[1] != 0) && gain_u < o->gain_prob)
        d->gain = pow(10, (o->gain_db[0] + (o->gain_db[1] - o->gain_db[0]) * gain_at) / 20);
    if (o->noise && noise_u < o->noise_prob) {
        d->noise = noise_pick;
        d->snr_db = o->snr_db[0] + (o->snr_db[1] - o->snr_db[0]) * snr_at;
    }
}

int sharc__cond_is_identity(const sharc__cut_cond *cond, int rate)
{
    return cond->rate == rate && cond->speed == 1 && cond->gain == 1 && cond->noise == 0;
}

/* The sum of squares of x[0..n), in eight running sums: one would make every addition wait
 * for the one before. */
static double sum_squares(const float *x, int64_t n)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++)
        s[0] += (double)x[i] * x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Where a noise cut's sums begin: after its samples, aligned for doubles. */
static size_t sums_at(int64_t len)
{
    const size_t at = sizeof(sharc__noise_cut) + (size_t)len * sizeof(float);
    return (at + sizeof(double) - 1) / sizeof(double) * sizeof(double);
}

uint64_t sharc__noise_cut_bytes(int64_t len)
{
    return (uint64_t)len * sizeof(float) +
           (uint64_t)(len / SHARC__NOISE_BLOCK + 1) * sizeof(double);
}

sharc__noise_cut *sharc__noise_cut_new(sharc__ctx *ctx, int64_t len)
{
    const size_t n_sums = (size_t)(len / SHARC__NOISE_BLOCK + 1);
    sharc__noise_cut *c = sharc__malloc(ctx, sums_at(len) + n_sums * sizeof(double));
    if (!c)
        return NULL;
    atomic_init(&c->refs, 1);
    c->ctx = ctx;
    c->len = len;
    c->sq = (double *)(void *)((char *)c + sums_at(len));
    return c;
}

void sharc__noise_cut_seal(sharc__noise_cut *c)
{
    c->sq[0] = 0;
    for (int64_t b = 0; b < c->len / SHARC__NOISE_BLOCK; b++)
        c->sq[b + 1] =
            c->sq[b] + sum_squares(c->samples + b * SHARC__NOISE_BLOCK, SHARC__NOISE_BLOCK);
}

sharc__noise_cut *sharc__noise_cut_ref(sharc__noise_cut *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}

void sharc__noise_cut_unref(sharc__noise_cut *c)
{
    if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        sharc__free(c->ctx, c);
}

int sharc__conditioner_reserve(sharc__conditioner *cn, sharc__ctx *ctx, size_t n)
{
    if (n <= cn->scratch_cap)
        return 0;
    sharc__free(ctx, cn->scratch);
    cn->scratch = sharc__malloc_aligned(ctx, n * sizeof(float), 64);
    cn->scratch_cap = cn->scratch ? n : 0;
    return cn->scratch ? 0 : SHARC_ERR(ENOMEM);
}

/*
 * A resampler from `in_rate` to `out_rate`, ready for a new signal: one kept from an
 * earlier cut when there is one, cleared, else a new one in place of the least recently
 * used. libsoxr 0.1.3's soxr_clear() rebuilds the resampler as soxr_create() does (its
 * filter designed again, 0.04-0.2 ms), so keeping them saves only the allocations; the
 * cache is there for a libsoxr whose clear keeps the filter.
 */
static soxr_t get_soxr(sharc__conditioner *cn, sharc__ctx *ctx, double in_rate, double out_rate,
                       int channels)
{
    size_t k, oldest = 0;
    for (k = 0; k < SHARC__COND_HANDLES; k++) {
        if (cn->handles[k].soxr && cn->handles[k].in_rate == in_rate &&
            cn->handles[k].out_rate == out_rate && cn->handles[k].channels == channels)
            break;
        if (cn->handles[k].used < cn->handles[oldest].used)
            oldest = k;
    }
    if (k < SHARC__COND_HANDLES) {
        soxr_clear(cn->handles[k].soxr);
    } else {
        k = oldest;
        if (cn->handles[k].soxr)
            soxr_delete(cn->handles[k].soxr);
        cn->handles[k].soxr = NULL;
        soxr_error_t e;
        /* High quality (20 bits, 0.913 passband, linear phase): sox's `rate` default within
         * 50 dB on speech, at a third of the cost of very high quality. */
        const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
        const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
        soxr_t s = soxr_create(in_rate, out_rate, (unsigned)channels, &e, &io, &q, NULL);
        if (!s) {
            sharc__set_error(ctx, SHARC_ERR_DECODE, "libsoxr cannot convert %g Hz to %g Hz: %s",
                             in_rate, out_rate, e ? e : "unknown error");
            return NULL;
        }
        cn->handles[k].soxr = s;
        cn->handles[k].in_rate = in_rate;
        cn->handles[k].out_rate = out_rate;
        cn->handles[k].channels = channels;
    }
    cn->handles[k].used = ++cn->uses;
    return cn->handles[k].soxr;
}

/* Convert `n_in` frames into exactly `want`: all the input, then the resampler flushed,
 * the rest (a cut shorter than the filter's delay) zeros. */
static int convert(sharc__ctx *ctx, soxr_t s, int channels, const float *in, int64_t n_in,
                   float *out, int64_t want)
{
    size_t used_total = 0, done = 0;
    while (done < (size_t)want) {
        const size_t left = (size_t)n_in - used_total;
        size_t used = 0, got = 0;
        soxr_error_t e =
            soxr_process(s, left ? in + used_total * (size_t)channels : NULL, left, &used,
                         out + done * (size_t)channels, (size_t)want - done, &got);
        if (e)
            return sharc__set_error(ctx, SHARC_ERR_DECODE, "libsoxr: %s", e);
        used_total += used;
        done += got;
        if (!left && !got)
            break; /* flushed */
    }
    if (done < (size_t)want)
        memset(out + done * (size_t)channels, 0,
               ((size_t)want - done) * (size_t)channels * sizeof(float));
    return 0;
}

/* The sum of squares of a noise cut's samples [a, e): its sums for the whole blocks. */
static double range_squares(const sharc__noise_cut *c, int64_t a, int64_t e)
{
    const int64_t ba = (a + SHARC__NOISE_BLOCK - 1) / SHARC__NOISE_BLOCK,
                  be = e / SHARC__NOISE_BLOCK;
    if (ba >= be)
        return sum_squares(c->samples + a, e - a);
    return sum_squares(c->samples + a, ba * SHARC__NOISE_BLOCK - a) + (c->sq[be] - c->sq[ba]) +
           sum_squares(c->samples + be * SHARC__NOISE_BLOCK, e - be * SHARC__NOISE_BLOCK);
}

/*
 * Add the noise cut assigned to the cut, from an offset the draw's upper bits pick and
 * looped when shorter, scaled so that the cut's own power over its `n` frames and the
 * noise's over the same frames are cond->snr_db apart. A silent cut, or silent noise, gets
 * none (no SNR can be reached).
 */
static void mix_noise(const sharc__cut_cond *cond, int channels, float *out, int64_t n)
{
    const float *z = cond->noise_cut->samples;
    const int64_t len = cond->noise_cut->len;
    const int64_t start = (int64_t)((cond->noise >> 24) % (uint64_t)len);
    const double ps = sum_squares(out, n * channels);
    double pn = 0;
    /* The noise in runs without a wrap inside. */
    for (int64_t t = 0, at = start; t < n; t += len - at, at = 0)
        pn += range_squares(cond->noise_cut, at, at + (len - at < n - t ? len - at : n - t));
    pn *= channels;
    if (!(ps > 0 && pn > 0))
        return;
    const float scale = (float)sqrt(ps / (pn * pow(10, cond->snr_db / 10)));
    for (int64_t t = 0, at = start; t < n; t += len - at, at = 0) {
        const int64_t run = len - at < n - t ? len - at : n - t;
        float *o = out + t * channels;
        if (channels == 1) {
            for (int64_t i = 0; i < run; i++)
                o[i] += scale * z[at + i];
        } else {
            for (int64_t i = 0; i < run; i++)
                for (int c = 0; c < channels; c++)
                    o[i * channels + c] += scale * z[at + i];
        }
    }
}

int sharc__cond_apply(sharc__conditioner *cn, sharc__ctx *ctx, const sharc__cut_cond *cond,
                      int rate, int channels, const float *in, int64_t n_in, float *out)
{
    const double t0 = sharc__now_s();
    const int64_t want = cond->num_samples;
    const size_t n_out = (size_t)want * (size_t)channels;
    int rc = 0;
    if (cond->rate != rate || cond->speed != 1) {
        soxr_t s = get_soxr(cn, ctx, (double)rate * cond->speed, cond->rate, channels);
        rc = s ? convert(ctx, s, channels, in, n_in, out, want) : SHARC_ERR_DECODE;
    } else {
        const size_t n = (size_t)(n_in < want ? n_in : want) * (size_t)channels;
        if (out != in)
            memmove(out, in, n * sizeof(float));
        memset(out + n, 0, (n_out - n) * sizeof(float));
    }
    if (rc == 0 && cond->gain != 1) {
        const float g = (float)cond->gain;
        for (size_t i = 0; i < n_out; i++)
            out[i] *= g;
    }
    if (rc == 0 && cond->noise && cond->noise_cut)
        mix_noise(cond, channels, out, want);
    cn->seconds += sharc__now_s() - t0;
    return rc;
}

void sharc__conditioner_free(sharc__conditioner *cn, sharc__ctx *ctx)
{
    for (size_t k = 0; k < SHARC__COND_HANDLES; k++)
        if (cn->handles[k].soxr)
            soxr_delete(cn->handles[k].soxr);
    sharc__free(ctx, cn->scratch);
    memset(cn, 0, sizeof *cn);
}

#include "features/fbank.h"

#include <errno.h>
#include <kiss_fftr.h>
#include <math.h>
#include <string.h>

#include "base/hash.h"
#include "base/rng.h"

/* NeMo's constants: the log guard (log_zero_guard_value 2^-24) and the std guard. */
#define LOG_GUARD  5.9604644775390625e-08
#define STD_GUARD  1e-5
#define MAX_N_MELS 256
#define MAX_N_FFT  65536

struct sharc__fbank {
    sharc__fbank_settings s;
    sharc__ctx ctx; ///< allocator for the plan and its work buffers
    int n_bins;     ///< n_fft / 2 + 1
    int woff;       ///< where the window starts in the n_fft frame (torch.stft centres it)
    float *window;  ///< [window]
    /* Mel filter m is nonzero on bins [lo[m], lo[m] + len[m]) only; its weights are
     * weights[start[m] .. start[m] + len[m]). */
    int *lo, *len, *start;
    float *weights;
    kiss_fftr_cfg fft;
    float *frame;       ///< [n_fft]: the windowed frame, zero outside the window
    kiss_fft_cpx *spec; ///< [n_bins]
    float *power;       ///< [n_bins]
    float *signal;      ///< the padded, pre-emphasised row
    size_t signal_cap;  ///< floats in `signal`
    double *logmel;     ///< [frames][n_mels] of the row being computed
    double mel[MAX_N_MELS], shift[MAX_N_MELS], s1[MAX_N_MELS], s2[MAX_N_MELS];
    size_t logmel_cap; ///< doubles in `logmel`
};

void sharc__fbank_default_settings(sharc__fbank_settings *s)
{
    memset(s, 0, sizeof *s);
    s->sample_rate = 16000;
    s->window = 400;
    s->hop = 160;
    s->n_fft = 512;
    s->n_mels = 80;
    s->pad_to = 16;
    s->preemph = 0.97;
    s->dither = 0;
    s->seed = 0;
}

int sharc__fbank_check(sharc__ctx *ctx, const sharc__fbank_settings *s)
{
    if (s->sample_rate < 1000 || s->sample_rate > 384000)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank sample_rate %d: must be 1000..384000 Hz", s->sample_rate);
    if (s->n_fft < 2 || s->n_fft > MAX_N_FFT || s->n_fft % 2 != 0)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL), "fbank n_fft %d: must be even and 2..%d",
                                s->n_fft, MAX_N_FFT);
    if (s->window < 1 || s->window > s->n_fft)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank window %d: must be 1..n_fft (%d) samples", s->window,
                                s->n_fft);
    if (s->hop < 1 || s->hop > s->n_fft)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank hop %d: must be 1..n_fft (%d) samples", s->hop, s->n_fft);
    if (s->n_mels < 1 || s->n_mels > MAX_N_MELS)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL), "fbank n_mels %d: must be 1..%d", s->n_mels,
                                MAX_N_MELS);
    if (s->pad_to < 0 || s->pad_to > 4096)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank pad_to %d: must be 0..4096 frames (0 = no padding)",
                                s->pad_to);
    if (!(s->preemph >= 0 && s->preemph < 1))
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank preemph %g: must be in [0, 1) (0 = none)", s->preemph);
    if (!(s->dither >= 0 && s->dither <= 1))
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank dither %g: must be in [0, 1] (0 = off)", s->dither);
    return 0;
}

/* The Slaney mel scale (librosa's hz_to_mel / mel_to_hz with htk=False): linear below
 * 1 kHz, logarithmic above. */
static double hz_to_mel(double f)
{
    const double f_sp = 200.0 / 3, min_log_hz = 1000, min_log_mel = min_log_hz / f_sp;
    const double logstep = log(6.4) / 27;
    return f >= min_log_hz ? min_log_mel + log(f / min_log_hz) / logstep : f / f_sp;
}

static double mel_to_hz(double m)
{
    const double f_sp = 200.0 / 3, min_log_hz = 1000, min_log_mel = min_log_hz / f_sp;
    const double logstep = log(6.4) / 27;
    return m >= min_log_mel ? min_log_hz * exp(logstep * (m - min_log_mel)) : f_sp * m;
}

/* librosa.filters.mel(sr, n_fft, n_mels, fmin=0, fmax=sr/2, htk=False, norm="slaney"),
 * computed in double and rounded to float as librosa returns it, kept sparse. */
static int build_filters(sharc__fbank *f)
{
    const int n_mels = f->s.n_mels, n_bins = f->n_bins;
    double mel_f[MAX_N_MELS + 2];
    double mel_min = hz_to_mel(0), mel_max = hz_to_mel(f->s.sample_rate / 2.0);
    double step = (mel_max - mel_min) / (n_mels + 1);
    for (int i = 0; i < n_mels + 2; i++)
        mel_f[i] = mel_to_hz(i == n_mels + 1 ? mel_max : mel_min + i * step);
    f->lo = sharc__calloc(&f->ctx, (size_t)n_mels, sizeof *f->lo);
    f->len = sharc__calloc(&f->ctx, (size_t)n_mels, sizeof *f->len);
    f->start = sharc__calloc(&f->ctx, (size_t)n_mels, sizeof *f->start);
    float *dense = sharc__calloc(&f->ctx, (size_t)n_mels * (size_t)n_bins, sizeof *dense);
    if (!f->lo || !f->len || !f->start || !dense)
        goto fail;
    size_t total = 0;
    for (int m = 0; m < n_mels; m++) {
        double fdiff_lo = mel_f[m + 1] - mel_f[m], fdiff_hi = mel_f[m + 2] - mel_f[m + 1];
        double enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
        int first = -1, last = -1;
        for (int k = 0; k < n_bins; k++) {
            double freq = (double)k * f->s.sample_rate / f->s.n_fft;
            double lower = -(mel_f[m] - freq) / fdiff_lo;
            double upper = (mel_f[m + 2] - freq) / fdiff_hi;
            double w = lower < upper ? lower : upper;
            float v = (float)((w > 0 ? w : 0) * enorm);
            dense[(size_t)m * n_bins + k] = v;
            if (v != 0) {
                if (first < 0)
                    first = k;
                last = k;
            }
        }
        /* A filter too narrow to hold a bin (many mels, a short FFT) is all zero, as
         * librosa leaves it: its features are log(2^-24) before normalisation. */
        f->lo[m] = first < 0 ? 0 : first;
        f->len[m] = first < 0 ? 0 : last - first + 1;
        f->start[m] = (int)total;
        total += (size_t)f->len[m];
    }
    f->weights = sharc__calloc(&f->ctx, total ? total : 1, sizeof *f->weights);
    if (!f->weights)
        goto fail;
    for (int m = 0; m < n_mels; m++)
        memcpy(f->weights + f->start[m], dense + (size_t)m * n_bins + f->lo[m],
               (size_t)f->len[m] * sizeof *f->weights);
    sharc__free(&f->ctx, dense);
    return 0;
fail:
    sharc__free(&f->ctx, dense);
    return SHARC_ERR(ENOMEM);
}

int sharc__fbank_create(sharc__fbank **out, sharc__ctx *ctx, const sharc__fbank_settings *s)
{
    *out = NULL;
    int rc = sharc__fbank_check(ctx, s);
    if (rc < 0)
        return rc;
    sharc__fbank *f = sharc__calloc(ctx, 1, sizeof *f);
    if (!f)
        return sharc__set_error(ctx, SHARC_ERR(ENOMEM), "out of memory for the fbank plan");
    sharc__ctx_init(&f->ctx, &ctx->alloc, &ctx->log);
    f->s = *s;
    f->n_bins = s->n_fft / 2 + 1;
    f->woff = (s->n_fft - s->window) / 2;
    f->window = sharc__calloc(&f->ctx, (size_t)s->window, sizeof *f->window);
    f->frame = sharc__calloc(&f->ctx, (size_t)s->n_fft, sizeof *f->frame);
    f->spec = sharc__calloc(&f->ctx, (size_t)f->n_bins, sizeof *f->spec);
    f->power = sharc__calloc(&f->ctx, (size_t)f->n_bins, sizeof *f->power);
    if (!f->window || !f->frame || !f->spec || !f->power || build_filters(f) < 0)
        goto nomem;
    /* torch.hann_window(window, periodic=False): symmetric, both ends 0 (1 for length 1). */
    for (int n = 0; n < s->window; n++)
        f->window[n] = s->window == 1
                           ? 1.0f
                           : (float)(0.5 - 0.5 * cos(2.0 * M_PI * n / (double)(s->window - 1)));
    f->fft = kiss_fftr_alloc(s->n_fft, 0, NULL, NULL);
    if (!f->fft)
        goto nomem;
    *out = f;
    return 0;
nomem:
    sharc__fbank_destroy(&f);
    return sharc__set_error(ctx, SHARC_ERR(ENOMEM), "out of memory for the fbank plan");
}

void sharc__fbank_destroy(sharc__fbank **pf)
{
    sharc__fbank *f = pf ? *pf : NULL;
    if (!f)
        return;
    *pf = NULL;
    if (f->fft)
        kiss_fftr_free(f->fft);
    sharc__ctx ctx = f->ctx;
    sharc__free(&ctx, f->window);
    sharc__free(&ctx, f->lo);
    sharc__free(&ctx, f->len);
    sharc__free(&ctx, f->start);
    sharc__free(&ctx, f->weights);
    sharc__free(&ctx, f->frame);
    sharc__free(&ctx, f->spec);
    sharc__free(&ctx, f->power);
    sharc__free(&ctx, f->signal);
    sharc__free(&ctx, f->logmel);
    sharc__free(&ctx, f);
}

const sharc__fbank_settings *sharc__fbank_settings_of(const sharc__fbank *f)
{
    return &f->s;
}

void sharc__fbank_tables_of(const sharc__fbank *f, sharc__fbank_tables *out)
{
    out->lo = f->lo;
    out->len = f->len;
    out->start = f->start;
    out->weights = f->weights;
    out->n_weights =
        f->s.n_mels > 0 ? (size_t)f->start[f->s.n_mels - 1] + (size_t)f->len[f->s.n_mels - 1] : 0;
    out->window = f->window;
}

int64_t sharc__fbank_valid_frames(const sharc__fbank *f, int64_t len)
{
    return len > 0 ? len / f->s.hop : 0;
}

int64_t sharc__fbank_frames_of(const sharc__fbank_settings *s, int64_t T)
{
    int64_t n = (T > 0 ? T : 0) / s->hop + 1;
    if (s->pad_to > 1 && n % s->pad_to)
        n += s->pad_to - n % s->pad_to;
    return n;
}

int64_t sharc__fbank_frames(const sharc__fbank *f, int64_t T)
{
    return sharc__fbank_frames_of(&f->s, T);
}

/* A standard normal deviate (Box-Muller on two uniforms). */
static double gaussian(sharc__rng *r)
{
    double u1 = sharc__rng_uniform(r), u2 = sharc__rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

/* Fill f->signal with the row as torch.stft sees it: n_fft / 2 zeros, the dithered,
 * pre-emphasised samples, zeros to the end of the last frame. */
static int fill_signal(sharc__fbank *f, sharc__ctx *ctx, const float *x, int64_t len,
                       int64_t n_frames, uint64_t dither_seed)
{
    const size_t pad = (size_t)f->s.n_fft / 2;
    size_t need = (size_t)(n_frames - 1) * (size_t)f->s.hop + (size_t)f->s.n_fft;
    if (need < pad + (size_t)len)
        need = pad + (size_t)len;
    if (need > f->signal_cap) {
        size_t cap = need + need / 2;
        float *p = sharc__malloc_aligned(&f->ctx, cap * sizeof *p, 64);
        if (!p)
            return sharc__set_error(ctx, SHARC_ERR(ENOMEM),
                                    "out of memory for fbank work space of %zu samples", cap);
        sharc__free(&f->ctx, f->signal);
        f->signal = p;
        f->signal_cap = cap;
    }
    float *y = f->signal;
    memset(y, 0, pad * sizeof *y);
    const float a = (float)f->s.preemph;
    if (f->s.dither > 0) {
        sharc__rng r;
        sharc__rng_seed(&r, dither_seed);
        float prev = 0;
        for (int64_t i = 0; i < len; i++) {
            float v = x[i] + (float)(f->s.dither * gaussian(&r));
            y[pad + (size_t)i] = i ? v - a * prev : v;
            prev = v;
        }
    } else if (len > 0) {
        y[pad] = x[0];
        for (int64_t i = 1; i < len; i++)
            y[pad + (size_t)i] = x[i] - a * x[i - 1];
    }
    memset(y + pad + (size_t)len, 0, (need - pad - (size_t)len) * sizeof *y);
    return 0;
}

static int grow_logmel(sharc__fbank *f, sharc__ctx *ctx, size_t need)
{
    if (need <= f->logmel_cap)
        return 0;
    size_t cap = need + need / 2;
    double *p = sharc__malloc_aligned(&f->ctx, cap * sizeof *p, 64);
    if (!p)
        return sharc__set_error(ctx, SHARC_ERR(ENOMEM),
                                "out of memory for fbank work space of %zu values", cap);
    sharc__free(&f->ctx, f->logmel);
    f->logmel = p;
    f->logmel_cap = cap;
    return 0;
}

uint64_t sharc__fbank_row_seed(const sharc__fbank *f, uint64_t step, uint64_t row)
{
    uint64_t h = sharc__fnv1a_u64(0xcbf29ce484222325ull, f->s.seed);
    h = sharc__fnv1a_u64(h, step);
    return sharc__fnv1a_u64(h, row);
}

uint64_t sharc__fbank_cut_seed(const sharc__fbank *f, uint64_t key)
{
    /* A constant word between the seed and the key, so that a cut's seed is not that of the
     * (step, row) pair whose numbers equal (key, ...) in sharc__fbank_row_seed. */
    uint64_t h = sharc__fnv1a_u64(0xcbf29ce484222325ull, f->s.seed);
    h = sharc__fnv1a_u64(h, UINT64_C(0x6375742d6b6579)); /* "cut-key" */
    return sharc__fnv1a_u64(h, key);
}

int64_t sharc__fbank_row(sharc__fbank *f, sharc__ctx *ctx, const float *x, int64_t len,
                         uint64_t step, uint64_t row, float *out, int64_t frames)
{
    int64_t nv = sharc__fbank_valid_frames(f, len);
    if (len < 0 || nv > frames)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank: row %llu: %lld samples need %lld frames, the output "
                                "holds %lld",
                                (unsigned long long)row, (long long)len, (long long)nv,
                                (long long)frames);
    return sharc__fbank_row_seeded(f, ctx, x, len, sharc__fbank_row_seed(f, step, row), out,
                                   frames);
}

int64_t sharc__fbank_row_seeded(sharc__fbank *f, sharc__ctx *ctx, const float *x, int64_t len,
                                uint64_t dither_seed, float *out, int64_t frames)
{
    const int n_mels = f->s.n_mels, hop = f->s.hop, window = f->s.window;
    int64_t nv = sharc__fbank_valid_frames(f, len);
    if (len < 0 || nv > frames)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank: %lld samples need %lld frames, the output holds %lld",
                                (long long)len, (long long)nv, (long long)frames);
    if (nv > 0) {
        int rc = fill_signal(f, ctx, x, len, nv, dither_seed);
        if (rc < 0)
            return rc;
        rc = grow_logmel(f, ctx, (size_t)nv * (size_t)n_mels);
        if (rc < 0)
            return rc;
    }
    const float *w = f->window;
    float *frame = f->frame + f->woff;
    /* The mel energies and their logs are kept in double: a bin whose energy stays far
     * below the log guard (digital silence) moves by less than a float's step near
     * log(2^-24), and normalising such a bin divides those steps by a deviation as small as
     * 1e-5. The sums for the mean and deviation are taken on the way, shifted by the
     * bin's first value so that the deviation of a nearly constant bin keeps its digits. */
    double *mel = f->mel, *shift = f->shift, *s1 = f->s1, *s2 = f->s2;
    for (int64_t t = 0; t < nv; t++) {
        const float *src = f->signal + (size_t)t * (size_t)hop + (size_t)f->woff;
        for (int k = 0; k < window; k++)
            frame[k] = w[k] * src[k];
        kiss_fftr(f->fft, f->frame, f->spec);
        for (int k = 0; k < f->n_bins; k++)
            f->power[k] = f->spec[k].r * f->spec[k].r + f->spec[k].i * f->spec[k].i;
        for (int m = 0; m < n_mels; m++) {
            const float *wt = f->weights + f->start[m], *pw = f->power + f->lo[m];
            /* Two sums, so that the adds of one filter do not wait on each other. */
            double a0 = 0, a1 = 0;
            int k = 0, n = f->len[m];
            for (; k + 1 < n; k += 2) {
                a0 += (double)(wt[k] * pw[k]);
                a1 += (double)(wt[k + 1] * pw[k + 1]);
            }
            if (k < n)
                a0 += (double)(wt[k] * pw[k]);
            mel[m] = a0 + a1 + LOG_GUARD;
        }
        for (int m = 0; m < n_mels; m++)
            mel[m] = log(mel[m]);
        if (t == 0) {
            for (int m = 0; m < n_mels; m++) {
                shift[m] = mel[m];
                s1[m] = s2[m] = 0;
            }
        }
        double *lm = f->logmel + (size_t)t * (size_t)n_mels;
        for (int m = 0; m < n_mels; m++) {
            double d = mel[m] - shift[m];
            s1[m] += d;
            s2[m] += d * d;
            lm[m] = mel[m];
        }
    }
    /* Per mel bin over the valid frames: mean and unbiased std. */
    for (int m = 0; nv > 0 && m < n_mels; m++) {
        double mean = shift[m] + s1[m] / (double)nv;
        double var = nv > 1 ? (s2[m] - s1[m] * s1[m] / (double)nv) / (double)(nv - 1) : 0;
        s1[m] = mean;
        s2[m] = 1.0 / (sqrt(var > 0 ? var : 0) + STD_GUARD);
    }
    for (int64_t t = 0; t < nv; t++) {
        const double *lm = f->logmel + (size_t)t * (size_t)n_mels;
        float *o = out + t;
        for (int m = 0; m < n_mels; m++)
            o[(size_t)m * (size_t)frames] = (float)((lm[m] - s1[m]) * s2[m]);
    }
    for (int m = 0; m < n_mels; m++)
        memset(out + (size_t)m * (size_t)frames + nv, 0, (size_t)(frames - nv) * sizeof *out);
    return nv;
}

int sharc__fbank_compute(sharc__fbank *f, sharc__ctx *ctx, const float *audio, const int32_t *lens,
                         int64_t B, int64_t T, uint64_t step, float *out, int32_t *out_lens,
                         int64_t frames)
{
    if (B < 0 || T < 0 || frames < sharc__fbank_frames(f, T))
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank: a batch of %lld x %lld samples needs %lld frames, the "
                                "output holds %lld",
                                (long long)B, (long long)T, (long long)sharc__fbank_frames(f, T),
                                (long long)frames);
    for (int64_t b = 0; b < B; b++) {
        if (lens[b] < 0 || lens[b] > T)
            return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                    "fbank: row %lld has length %d, outside the batch's 0..%lld",
                                    (long long)b, (int)lens[b], (long long)T);
        int64_t nv =
            sharc__fbank_row(f, ctx, audio + (size_t)b * (size_t)T, lens[b], step, (uint64_t)b,
                             out + (size_t)b * (size_t)f->s.n_mels * (size_t)frames, frames);
        if (nv < 0)
            return (int)nv;
        out_lens[b] = (int32_t)nv;
    }
    return 0;
}

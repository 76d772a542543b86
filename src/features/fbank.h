/*
 * Log-mel filterbank features as NeMo's FilterbankFeatures computes them (the preprocessor
 * of FastConformer, Parakeet and Canary), on the CPU.
 *
 * Per utterance of `len` samples in a zero-padded row:
 *   - optional dither: x += dither * N(0, 1) over the valid samples, seeded per row;
 *   - pre-emphasis y[0] = x[0], y[i] = x[i] - preemph * x[i-1], zero from `len` on;
 *   - torch.stft(center=True, pad_mode="constant"): the signal is padded with n_fft/2 zeros
 *     on both sides, frame t starts at t * hop, and the symmetric Hann window of `window`
 *     samples (torch.hann_window(window, periodic=False)) sits centred in the n_fft frame;
 *   - power |X|^2, Slaney mel filters with Slaney normalisation (librosa.filters.mel's
 *     defaults, fmin 0, fmax sample_rate / 2), log(x + 2^-24);
 *   - valid frames: NeMo's get_seq_len, (len + 2 * (n_fft / 2) - n_fft) / hop = len / hop
 *     (the STFT's last frame, centred at or past the end, is not one of them);
 *   - per mel bin, mean and unbiased standard deviation over the utterance's valid frames,
 *     (x - mean) / (std + 1e-5); a single valid frame has std 0, as NeMo's NaN guard gives,
 *     so it is 0, and so is a row shorter than a hop, which has no valid frame;
 *   - every frame past the valid ones is exactly 0, up to the batch's frame count, that of
 *     the STFT, T / hop + 1, rounded up to a multiple of pad_to, T being the padded width.
 *
 * A plan (filters, window, FFT plan, work buffers) is made once and reused for every
 * batch; work buffers grow to the longest row met and then stay, so a steady state
 * allocates nothing. A plan is used by one thread at a time.
 */
#ifndef SHARC_SRC_FBANK_H
#define SHARC_SRC_FBANK_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"

typedef struct sharc__fbank_settings {
    int sample_rate; ///< Hz the audio must be at (16000)
    int window;      ///< window length in samples, <= n_fft (400)
    int hop;         ///< hop in samples (160)
    int n_fft;       ///< FFT size, even (512)
    int n_mels;      ///< mel bins, 1..256 (80)
    int pad_to;      ///< frame count rounded up to a multiple of this; 0 or 1 = none (16)
    double preemph;  ///< pre-emphasis coefficient; 0 = none (0.97)
    double dither;   ///< standard deviation of the Gaussian dither; 0 = off (0)
    uint64_t seed;   ///< dither seed (0)
} sharc__fbank_settings;

typedef struct sharc__fbank sharc__fbank;

/** NeMo's FastConformer settings with 80 mels and no dither. */
void sharc__fbank_default_settings(sharc__fbank_settings *s);

/**
 * Check settings: 0, or SHARC_ERR(EINVAL) with ctx's error naming the setting, its value
 * and the range it must be in ("fbank n_fft 500: must be even ...").
 */
int sharc__fbank_check(sharc__ctx *ctx, const sharc__fbank_settings *s);

/** Make a plan. @return 0, SHARC_ERR(EINVAL) (sharc__fbank_check) or SHARC_ERR(ENOMEM). */
int sharc__fbank_create(sharc__fbank **out, sharc__ctx *ctx, const sharc__fbank_settings *s);

/** Free a plan; NULL-safe, sets *f to NULL. */
void sharc__fbank_destroy(sharc__fbank **f);

/** The settings the plan was made with. */
const sharc__fbank_settings *sharc__fbank_settings_of(const sharc__fbank *f);

/**
 * The plan's sparse mel filters and window, for another implementation of the same steps
 * (fbank_cuda.cu): filter m holds weights[start[m] .. start[m] + len[m]) for the FFT bins
 * from lo[m] on; `window` has settings.window values. Valid as long as the plan.
 */
typedef struct sharc__fbank_tables {
    const int *lo, *len, *start;
    const float *weights;
    size_t n_weights;
    const float *window;
} sharc__fbank_tables;
void sharc__fbank_tables_of(const sharc__fbank *f, sharc__fbank_tables *out);

/** Valid frames of an utterance of `len` samples: len / hop (NeMo's get_seq_len). */
int64_t sharc__fbank_valid_frames(const sharc__fbank *f, int64_t len);

/** Frames of a batch whose rows are `T` samples wide: (T / hop + 1) rounded up to pad_to. */
int64_t sharc__fbank_frames(const sharc__fbank *f, int64_t T);

/** sharc__fbank_frames for (checked) settings, without a plan. */
int64_t sharc__fbank_frames_of(const sharc__fbank_settings *s, int64_t T);

/**
 * Features of a batch: audio f32 [B, T] (row b valid up to lens[b] <= T, which is checked)
 * into out f32 [B, n_mels, frames] and out_lens i32 [B]. `frames` must be at least
 * sharc__fbank_frames(f, T); every element of out is written. `step` and the row index
 * seed the dither, so a batch's features do not depend on what was computed before.
 * @return 0, SHARC_ERR(EINVAL) (a length out of range, too few frames) or
 *         SHARC_ERR(ENOMEM) (growing the work buffers), with ctx's error saying which
 */
int sharc__fbank_compute(sharc__fbank *f, sharc__ctx *ctx, const float *audio, const int32_t *lens,
                         int64_t B, int64_t T, uint64_t step, float *out, int32_t *out_lens,
                         int64_t frames);

/**
 * One row of sharc__fbank_compute: `x` holds `len` valid samples; writes out[m * frames + t]
 * for every mel bin m and frame t < frames, and returns the valid frames, or a negative
 * error as sharc__fbank_compute.
 */
int64_t sharc__fbank_row(sharc__fbank *f, sharc__ctx *ctx, const float *x, int64_t len,
                         uint64_t step, uint64_t row, float *out, int64_t frames);

/**
 * sharc__fbank_row with the dither's random stream seeded by `dither_seed` (unused without
 * dither): sharc__fbank_row_seed() gives sharc__fbank_compute's seed of a batch row,
 * sharc__fbank_cut_seed() that of a cut wherever it is computed.
 */
int64_t sharc__fbank_row_seeded(sharc__fbank *f, sharc__ctx *ctx, const float *x, int64_t len,
                                uint64_t dither_seed, float *out, int64_t frames);

/** The dither seed of row `row` of step `step`: from the settings' seed, step and row. */
uint64_t sharc__fbank_row_seed(const sharc__fbank *f, uint64_t step, uint64_t row);

/**
 * The dither seed of a cut: from the settings' seed and the cut's key (batching/bcut.h: its
 * epoch, shard and position), so the noise of a cut depends neither on the batch it is
 * drawn into nor on the thread that computes it.
 */
uint64_t sharc__fbank_cut_seed(const sharc__fbank *f, uint64_t key);

#endif /* SHARC_SRC_FBANK_H */

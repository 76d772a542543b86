/*
 * Conditioning one cut (docs/conditioning.md): resampling to the required rate, then speed
 * perturbation, then volume perturbation. Its plan is drawn when the cut is described
 * (sharc__cond_plan()), so the sampler sees the perturbed duration; its samples are made on
 * a decode thread once the cut's samples exist (sharc__cond_apply()). The draws are a hash
 * of the seed, the cut's id and its epoch, never of a thread's order. Resampling and speed
 * are one libsoxr conversion.
 */
#ifndef SHARC_SRC_CONDITION_H
#define SHARC_SRC_CONDITION_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "sharc/reader.h"
#include "plan/cut.h"

/** The conditioning settings (the reader's). Zero: none. */
typedef struct sharc__cond_opts {
    int rate;             ///< the required rate, 0 = any
    int resample;         ///< convert cuts at another rate to `rate`
    uint64_t seed;        ///< the reader's seed
    const double *speeds; ///< speed factors, owned by the reader's settings
    size_t n_speeds;      ///< 0 = no speed perturbation
    double speed_prob;    ///< share of cuts perturbed
    double gain_db[2];    ///< volume perturbation range in dB; off when both are 0
    double gain_prob;     ///< share of cuts whose volume is perturbed
    int noise;            ///< noise is mixed in
    double snr_db[2];     ///< its SNR range in dB
    double noise_prob;    ///< share of cuts that get noise
} sharc__cond_opts;

/** Samples per block of a noise cut's sums of squares. */
#define SHARC__NOISE_BLOCK 256

/** A noise cut to mix in: mono, at the required rate, at least one sample; shared by the
 *  noise stream and the cuts it was assigned to, freed with its last reference. */
typedef struct sharc__noise_cut {
    sharc__atomic_u64 refs;
    sharc__ctx *ctx; ///< whose allocator it was made with (outlives every reference)
    int64_t len;
    /** sq[b]: the sum of squares of the samples before b * SHARC__NOISE_BLOCK, for b up to
     *  len / SHARC__NOISE_BLOCK: the noise's power over a stretch costs no pass over it. */
    double *sq;
    float samples[]; ///< len of them
} sharc__noise_cut;

/** A noise cut of `len` samples (uninitialised) with one reference. NULL: out of memory.
 *  Once its samples are written, sharc__noise_cut_seal() it. */
sharc__noise_cut *sharc__noise_cut_new(sharc__ctx *ctx, int64_t len);

/** Compute the sums of squares of a new noise cut's samples. */
void sharc__noise_cut_seal(sharc__noise_cut *c);

/** Bytes a noise cut of `len` samples takes: its samples and its sums. */
uint64_t sharc__noise_cut_bytes(int64_t len);

/** One more reference to `c`; returns it. */
sharc__noise_cut *sharc__noise_cut_ref(sharc__noise_cut *c);

/** Drop a reference to `c` (NULL-safe), freeing it with the last. */
void sharc__noise_cut_unref(sharc__noise_cut *c);

/**
 * Where noise comes from (reader/noise.h): called in the order the cuts are planned, on the
 * one thread that plans them, so that which noise a cut gets does not depend on threads.
 */
typedef struct sharc__noise_source {
    void *self;
    /** A hash of what the noise depends on (its dataset and settings), which resume states
     *  are checked against with the reader's. */
    uint64_t hash;
    /** Assign noise to a cut whose cond->noise is set: cond->noise_cut gets a reference.
     *  @return 0, or an error with its message ("noise: ...") in ctx */
    int (*assign)(void *self, sharc__ctx *ctx, sharc__cut_cond *cond);
    /** Bytes of the stream's position, and writing them (sharc__noise_source.restore). */
    size_t (*state_size)(void *self);
    void (*state_write)(void *self, uint8_t *out);
    /** Go back to a position written by state_write, before the first assign.
     *  @return 0, or SHARC_ERR_STATE (or another error) with a message in ctx */
    int (*restore)(void *self, sharc__ctx *ctx, const uint8_t *in, size_t len);
} sharc__noise_source;

/** The conditioning the reader's settings `s` ask for (its speed factors stay its own). */
void sharc__cond_opts_of(const sharc_reader_settings *s, sharc__cond_opts *o);

/** Lhotse's compute_num_samples(duration, rate) for n samples at `from` Hz seen at `to` Hz:
 *  round(n * to / from), half up, after rounding to 8 decimals as Lhotse does. */
int64_t sharc__cond_resampled_length(int64_t n, int from, int to);

/** Lhotse's perturb_num_samples(n, factor): n / factor rounded half up for factor >= 1,
 *  half down below, after rounding to 8 decimals. */
int64_t sharc__cond_perturbed_length(int64_t n, double factor);

/**
 * Draw the conditioning of a described cut `c` (rate, channels, length and epoch known):
 * fills c->cond, and sets c->duration to the perturbed one when its speed changes.
 */
void sharc__cond_plan(const sharc__cond_opts *o, sharc__rawcut *c);

/** Whether `cond` of a cut at `rate` Hz leaves its samples as decoded. */
int sharc__cond_is_identity(const sharc__cut_cond *cond, int rate);

/** Resamplers kept for reuse, per thread, one per conversion. */
#define SHARC__COND_HANDLES 8

/** A decode thread's conditioning state: its resamplers and a buffer of decoded samples.
 *  Zero-initialise; free with sharc__conditioner_free(). */
typedef struct sharc__conditioner {
    struct {
        void *soxr; ///< a soxr_t
        double in_rate, out_rate;
        int channels;
        uint64_t used; ///< when last used, for replacing the oldest
    } handles[SHARC__COND_HANDLES];
    uint64_t uses;
    float *scratch; ///< the decoded samples at the source rate
    size_t scratch_cap;
    double seconds; ///< time spent converting, summed
} sharc__conditioner;

/** Room for `n` floats in cn->scratch. @return 0 or SHARC_ERR(ENOMEM) */
int sharc__conditioner_reserve(sharc__conditioner *cn, sharc__ctx *ctx, size_t n);

/**
 * Make the conditioned samples of a cut: `in` holds `n_in` frames of `channels`
 * interleaved at `rate` Hz; `out` receives cond->num_samples frames (zero-padded where the
 * resampler gives fewer), converted to cond->rate and by cond->speed, scaled by cond->gain,
 * then with cond->noise_cut added at cond->snr_db when one was assigned.
 * @return 0, or SHARC_ERR_DECODE when libsoxr fails (message in ctx), SHARC_ERR(ENOMEM)
 */
int sharc__cond_apply(sharc__conditioner *cn, sharc__ctx *ctx, const sharc__cut_cond *cond,
                      int rate, int channels, const float *in, int64_t n_in, float *out);

/** Free a conditioner's resamplers and buffer. */
void sharc__conditioner_free(sharc__conditioner *cn, sharc__ctx *ctx);

#endif /* SHARC_SRC_CONDITION_H */

/*
 * The log-mel features on a CUDA device (fbank_cuda.h). The steps and their precision are
 * those of fbank.c: float frames and FFT (cuFFT), mel energies, logs and the normalisation
 * in double, which H100/H200-class devices run at full rate.
 */
#include <cuda_runtime.h>
#include <cufft.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "features/fbank_cuda.h"
}

#define LOG_GUARD 5.9604644775390625e-08 /* NeMo's log_zero_guard_value, 2^-24 */
#define STD_GUARD 1e-5                   /* NeMo's normalize_batch guard */
/* Frames per cuFFT execution: the plan's size, fixed, so that no batch makes a new plan. */
#define CHUNK        8192
#define NORM_THREADS 256

struct sharc__fbank_cuda {
    sharc__fbank_settings s;
    sharc__ctx ctx;
    int device;
    int n_bins, woff;
    cudaStream_t stream;
    cufftHandle fft;
    int fft_made;
    int *lo, *len, *start; ///< device copies of the CPU plan's sparse filters
    float *weights, *window;
    float *frames;      ///< [CHUNK][n_fft]
    cufftComplex *spec; ///< [CHUNK][n_bins]
    double *logmel;     ///< [B][n_mels][T / hop + 1], grows
    size_t logmel_cap;  ///< doubles in logmel
    int32_t *host_lens; ///< the lengths, checked on the host, grows
    size_t host_lens_cap;
    cudaStream_t busy;  ///< the stream of the last work enqueued, which may use the work space
    uint64_t n_mallocs; ///< cudaMalloc calls for work space made after the plan
};

static int cuda_fail(sharc__ctx *ctx, const char *call, cudaError_t err)
{
    return sharc__set_error(ctx, SHARC_ERR_CUDA, "fbank on the GPU: %s failed: %s (%s)", call,
                            cudaGetErrorString(err), cudaGetErrorName(err));
}

#define CU(ctx, call)                                                                              \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            rc = cuda_fail((ctx), #call, err_);                                                    \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

#define CUFFT(ctx, call)                                                                           \
    do {                                                                                           \
        cufftResult r_ = (call);                                                                   \
        if (r_ != CUFFT_SUCCESS) {                                                                 \
            rc = sharc__set_error((ctx), SHARC_ERR_CUDA,                                           \
                                  "fbank on the GPU: %s failed: cuFFT "                            \
                                  "error %d",                                                      \
                                  #call, (int)r_);                                                 \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* Every entry point makes the plan's device current and gives the caller's back before it
 * returns (the library never leaves the caller's current device changed). */
static int enter_device(sharc__ctx *ctx, int device, int *prev)
{
    int rc = 0;
    *prev = -1;
    CU(ctx, cudaGetDevice(prev));
    CU(ctx, cudaSetDevice(device));
    return 0;
fail:
    return rc;
}

static void leave_device(int prev)
{
    if (prev >= 0)
        cudaSetDevice(prev);
}

/* The windowed frames g0 .. g0 + CHUNK of the batch (frame g is frame g % F0 of row g / F0),
 * as torch.stft(center=True, pad_mode="constant") frames the pre-emphasised rows. */
__global__ void frame_kernel(const float *audio, const int32_t *lens, int64_t T, int64_t B,
                             int64_t F0, int64_t g0, int n_fft, int hop, int woff, int window,
                             float preemph, const float *win, float *frames)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)CHUNK * n_fft)
        return;
    int64_t g = g0 + i / n_fft;
    int k = (int)(i % n_fft);
    float v = 0;
    if (g < B * F0 && k >= woff && k < woff + window) {
        int64_t b = g / F0, t = g % F0;
        int64_t p = t * hop + k - n_fft / 2, len = lens[b];
        if (p >= 0 && p < len) {
            const float *x = audio + b * T;
            float y = p == 0 ? x[0] : x[p] - preemph * x[p - 1];
            v = win[k - woff] * y;
        }
    }
    frames[i] = v;
}

/* log(mel + 2^-24) of the chunk's frames, into logmel[b][m][t]. */
__global__ void mel_kernel(const cufftComplex *spec, int n_bins, int n_mels, const int *lo,
                           const int *len, const int *start, const float *weights, int64_t B,
                           int64_t F0, int64_t g0, double *logmel)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)CHUNK * n_mels)
        return;
    int64_t c = i / n_mels, g = g0 + c;
    int m = (int)(i % n_mels);
    if (g >= B * F0)
        return;
    const cufftComplex *s = spec + c * n_bins + lo[m];
    const float *w = weights + start[m];
    double acc = 0;
    for (int k = 0; k < len[m]; k++) {
        float p = s[k].x * s[k].x + s[k].y * s[k].y;
        acc += (double)(w[k] * p);
    }
    int64_t b = g / F0, t = g % F0;
    logmel[(b * n_mels + m) * F0 + t] = log(acc + LOG_GUARD);
}

/* One block per (row, mel bin): mean and unbiased std over the valid frames, the normalised
 * values, zeros past them up to `frames`. */
__global__ void norm_kernel(const double *logmel, const int32_t *lens, int n_mels, int hop,
                            int64_t F0, int64_t frames, float *out, int32_t *out_lens)
{
    __shared__ double part[NORM_THREADS];
    int64_t bm = blockIdx.x, b = bm / n_mels;
    int64_t len = lens[b], nv = len > 0 ? len / hop : 0;
    const double *lm = logmel + bm * F0;
    float *o = out + bm * frames;
    double sum = 0;
    for (int64_t t = threadIdx.x; t < nv; t += blockDim.x)
        sum += lm[t];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    double mean = nv > 0 ? part[0] / (double)nv : 0;
    __syncthreads();
    double ss = 0;
    for (int64_t t = threadIdx.x; t < nv; t += blockDim.x)
        ss += (lm[t] - mean) * (lm[t] - mean);
    part[threadIdx.x] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    double sd = nv > 1 ? sqrt(part[0] / (double)(nv - 1)) : 0;
    double inv = 1.0 / (sd + STD_GUARD);
    for (int64_t t = threadIdx.x; t < frames; t += blockDim.x)
        o[t] = t < nv ? (float)((lm[t] - mean) * inv) : 0.0f;
    if (bm % n_mels == 0 && threadIdx.x == 0)
        out_lens[b] = (int32_t)nv;
}

extern "C" int sharc__fbank_cuda_create(sharc__fbank_cuda **out, sharc__ctx *ctx,
                                        const sharc__fbank_settings *s, int device)
{
    *out = NULL;
    int rc = sharc__fbank_check(ctx, s);
    if (rc < 0)
        return rc;
    if (s->dither > 0)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank dither %g: the GPU path does not dither (set 0)", s->dither);
    sharc__fbank *cpu = NULL;
    if ((rc = sharc__fbank_create(&cpu, ctx, s)) < 0)
        return rc;
    sharc__fbank_tables tb;
    sharc__fbank_tables_of(cpu, &tb);
    sharc__fbank_cuda *f = (sharc__fbank_cuda *)sharc__calloc(ctx, 1, sizeof *f);
    if (!f) {
        sharc__fbank_destroy(&cpu);
        return sharc__set_error(ctx, SHARC_ERR(ENOMEM), "out of memory for the fbank plan");
    }
    sharc__ctx_init(&f->ctx, &ctx->alloc, &ctx->log);
    f->s = *s;
    f->device = device;
    f->n_bins = s->n_fft / 2 + 1;
    f->woff = (s->n_fft - s->window) / 2;
    size_t nm = (size_t)s->n_mels;
    int prev = -1;
    if ((rc = enter_device(ctx, device, &prev)) < 0)
        goto fail;
    CU(ctx, cudaStreamCreateWithFlags(&f->stream, cudaStreamNonBlocking));
    CU(ctx, cudaMalloc((void **)&f->lo, nm * sizeof(int)));
    CU(ctx, cudaMalloc((void **)&f->len, nm * sizeof(int)));
    CU(ctx, cudaMalloc((void **)&f->start, nm * sizeof(int)));
    CU(ctx, cudaMalloc((void **)&f->weights, (tb.n_weights ? tb.n_weights : 1) * sizeof(float)));
    CU(ctx, cudaMalloc((void **)&f->window, (size_t)s->window * sizeof(float)));
    CU(ctx, cudaMalloc((void **)&f->frames, (size_t)CHUNK * (size_t)s->n_fft * sizeof(float)));
    CU(ctx,
       cudaMalloc((void **)&f->spec, (size_t)CHUNK * (size_t)f->n_bins * sizeof(cufftComplex)));
    CU(ctx, cudaMemcpy(f->lo, tb.lo, nm * sizeof(int), cudaMemcpyHostToDevice));
    CU(ctx, cudaMemcpy(f->len, tb.len, nm * sizeof(int), cudaMemcpyHostToDevice));
    CU(ctx, cudaMemcpy(f->start, tb.start, nm * sizeof(int), cudaMemcpyHostToDevice));
    CU(ctx,
       cudaMemcpy(f->weights, tb.weights, tb.n_weights * sizeof(float), cudaMemcpyHostToDevice));
    CU(ctx,
       cudaMemcpy(f->window, tb.window, (size_t)s->window * sizeof(float), cudaMemcpyHostToDevice));
    CUFFT(ctx, cufftPlan1d(&f->fft, s->n_fft, CUFFT_R2C, CHUNK));
    f->fft_made = 1;
    CUFFT(ctx, cufftSetStream(f->fft, f->stream));
    sharc__fbank_destroy(&cpu);
    leave_device(prev);
    *out = f;
    return 0;
fail:
    sharc__fbank_destroy(&cpu);
    sharc__fbank_cuda_destroy(&f);
    leave_device(prev);
    return rc;
}

extern "C" void sharc__fbank_cuda_destroy(sharc__fbank_cuda **pf)
{
    sharc__fbank_cuda *f = pf ? *pf : NULL;
    if (!f)
        return;
    *pf = NULL;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(f->device) != cudaSuccess)
        prev = -1;
    if (f->fft_made)
        cufftDestroy(f->fft);
    cudaFree(f->lo);
    cudaFree(f->len);
    cudaFree(f->start);
    cudaFree(f->weights);
    cudaFree(f->window);
    cudaFree(f->frames);
    cudaFree(f->spec);
    cudaFree(f->logmel);
    if (f->stream)
        cudaStreamDestroy(f->stream);
    leave_device(prev);
    sharc__ctx ctx = f->ctx;
    sharc__free(&ctx, f->host_lens);
    sharc__free(&ctx, f);
}

/* The frames count a batch of T-sample rows needs, and a check that `frames` holds it. */
static int check_shape(const sharc__fbank_cuda *f, sharc__ctx *ctx, int64_t B, int64_t T,
                       int64_t frames)
{
    int64_t need = (T > 0 ? T : 0) / f->s.hop + 1;
    if (f->s.pad_to > 1 && need % f->s.pad_to)
        need += f->s.pad_to - need % f->s.pad_to;
    if (B < 0 || T < 0 || frames < need)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank: a batch of %lld x %lld samples needs %lld frames, the "
                                "output holds %lld",
                                (long long)B, (long long)T, (long long)need, (long long)frames);
    return 0;
}

extern "C" int sharc__fbank_cuda_enqueue(sharc__fbank_cuda *f, sharc__ctx *ctx, cudaStream_t stream,
                                         const float *audio, const int32_t *lens, int64_t B,
                                         int64_t T, float *out, int32_t *out_lens, int64_t frames)
{
    int rc = check_shape(f, ctx, B, T, frames);
    if (rc < 0 || B == 0)
        return rc;
    int64_t F0 = T / f->s.hop + 1;
    size_t want = (size_t)B * (size_t)f->s.n_mels * (size_t)F0;
    if (want > f->logmel_cap) {
        /* Work enqueued before may still read the old buffer: let it finish first. */
        if (f->busy)
            CU(ctx, cudaStreamSynchronize(f->busy));
        cudaFree(f->logmel);
        f->logmel = NULL;
        f->logmel_cap = 0;
        size_t cap = want + want / 2;
        CU(ctx, cudaMalloc((void **)&f->logmel, cap * sizeof(double)));
        f->logmel_cap = cap;
        f->n_mallocs++;
    }
    f->busy = stream;
    CUFFT(ctx, cufftSetStream(f->fft, stream));
    {
        const int threads = 256;
        int64_t total = B * F0;
        for (int64_t g0 = 0; g0 < total; g0 += CHUNK) {
            int64_t nf = (int64_t)CHUNK * f->s.n_fft, nm = (int64_t)CHUNK * f->s.n_mels;
            frame_kernel<<<(unsigned)((nf + threads - 1) / threads), threads, 0, stream>>>(
                audio, lens, T, B, F0, g0, f->s.n_fft, f->s.hop, f->woff, f->s.window,
                (float)f->s.preemph, f->window, f->frames);
            CU(ctx, cudaGetLastError());
            CUFFT(ctx, cufftExecR2C(f->fft, f->frames, f->spec));
            mel_kernel<<<(unsigned)((nm + threads - 1) / threads), threads, 0, stream>>>(
                f->spec, f->n_bins, f->s.n_mels, f->lo, f->len, f->start, f->weights, B, F0, g0,
                f->logmel);
            CU(ctx, cudaGetLastError());
        }
        norm_kernel<<<(unsigned)(B * f->s.n_mels), NORM_THREADS, 0, stream>>>(
            f->logmel, lens, f->s.n_mels, f->s.hop, F0, frames, out, out_lens);
        CU(ctx, cudaGetLastError());
    }
    return 0;
fail:
    return rc;
}

extern "C" uint64_t sharc__fbank_cuda_mallocs(const sharc__fbank_cuda *f)
{
    return f->n_mallocs;
}

extern "C" int sharc__fbank_cuda_compute(sharc__fbank_cuda *f, sharc__ctx *ctx, const float *audio,
                                         const int32_t *lens, int64_t B, int64_t T, float *out,
                                         int32_t *out_lens, int64_t frames)
{
    int rc = check_shape(f, ctx, B, T, frames);
    if (rc < 0 || B == 0)
        return rc;
    int prev = -1;
    if ((rc = enter_device(ctx, f->device, &prev)) < 0)
        return rc;
    if ((size_t)B > f->host_lens_cap) {
        int32_t *p = (int32_t *)sharc__malloc(&f->ctx, (size_t)B * sizeof *p);
        if (!p) {
            rc = sharc__set_error(ctx, SHARC_ERR(ENOMEM), "out of memory for %lld lengths",
                                  (long long)B);
            goto fail;
        }
        sharc__free(&f->ctx, f->host_lens);
        f->host_lens = p;
        f->host_lens_cap = (size_t)B;
    }
    CU(ctx, cudaMemcpyAsync(f->host_lens, lens, (size_t)B * sizeof(int32_t), cudaMemcpyDeviceToHost,
                            f->stream));
    CU(ctx, cudaStreamSynchronize(f->stream));
    for (int64_t b = 0; b < B; b++)
        if (f->host_lens[b] < 0 || f->host_lens[b] > T) {
            rc = sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                  "fbank: row %lld has length %d, outside the batch's 0..%lld",
                                  (long long)b, (int)f->host_lens[b], (long long)T);
            goto fail;
        }
    if ((rc = sharc__fbank_cuda_enqueue(f, ctx, f->stream, audio, lens, B, T, out, out_lens,
                                        frames)) < 0)
        goto fail;
    CU(ctx, cudaStreamSynchronize(f->stream));
fail:
    leave_device(prev);
    return rc;
}

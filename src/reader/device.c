#include "reader/device.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

#include "batching/batch.h"
#include "batching/featurize.h"
#include "features/fbank.h"

int sharc__device_wanted(const sharc_reader_settings *s)
{
    return s->device == SHARC_DEVICE_CUDA;
}

void sharc__device_pipeline_settings(const sharc_reader_settings *s, sharc_reader_settings *out)
{
    *out = *s;
    if (!sharc__device_wanted(s))
        return;
    out->features = SHARC_FEATURES_NONE;
    out->keep_audio = 1;
    if (s->features != SHARC_FEATURES_NONE && s->sampling_rate == 0)
        out->sampling_rate = s->fbank_sample_rate;
}

/* Checks that need no device. */
static int check_settings(sharc__ctx *ctx, const sharc_reader_settings *s)
{
    const int n = s->device_ordinal;
    if (s->device == 0 || s->device == SHARC_DEVICE_HOST) {
        if (n != 0)
            return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                    "device_ordinal %d: only for device SHARC_DEVICE_CUDA (the "
                                    "host has none: leave it 0)",
                                    n);
        return 0;
    }
    if (s->device != SHARC_DEVICE_CUDA)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "device %d: unknown (SHARC_DEVICE_HOST or SHARC_DEVICE_CUDA)",
                                (int)s->device);
    if (n < 0)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "device cuda:%d: the device ordinal must be >= 0", n);
#if !SHARC_HAVE_CUDA
    return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED,
                            "sharc was built without CUDA: --device cuda:%d needs a CUDA build", n);
#else
    if (s->features == SHARC_FEATURES_NONE)
        return 0;
#if !SHARC_HAVE_FBANK_CUDA
    return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED,
                            "sharc was built without the GPU features (nvcc and cuFFT): "
                            "features on --device cuda:%d need them",
                            n);
#endif
    if (s->fbank_dither > 0)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "fbank dither %g: the features on device cuda:%d are not "
                                "dithered (set 0, or compute them on the host)",
                                s->fbank_dither, n);
    if (s->sampling_rate != 0 && s->sampling_rate != s->fbank_sample_rate)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                "sampling_rate %d: the features on device cuda:%d are made for "
                                "%d Hz (fbank_sample_rate); sharc does not resample",
                                s->sampling_rate, n, s->fbank_sample_rate);
    return 0;
#endif
}

#if !SHARC_HAVE_CUDA

int sharc__device_check(sharc__ctx *ctx, const sharc_reader_settings *s)
{
    return check_settings(ctx, s);
}

int sharc__device_stage_open(sharc__device_stage **out, sharc__ctx *ctx,
                             const sharc_reader_settings *s)
{
    *out = NULL;
    int rc = check_settings(ctx, s);
    return rc < 0 ? rc : sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED, "no device stage");
}

int sharc__device_stage_next(sharc__device_stage *d, sharc__host_batch_fn next_host, void *cookie,
                             sharc_batch **out)
{
    (void)d;
    (void)next_host;
    (void)cookie;
    *out = NULL;
    return SHARC_ERR_UNSUPPORTED;
}

void sharc__device_stage_close(sharc__device_stage **d)
{
    if (d)
        *d = NULL;
}

void sharc__device_stage_stats(const sharc__device_stage *d, sharc_device_stats *out)
{
    (void)d;
    memset(out, 0, sizeof *out);
}

void sharc__device_stage_poison(sharc__device_stage *d, int on)
{
    (void)d;
    (void)on;
}

int sharc__device_copy_bandwidth(sharc__ctx *ctx, int ordinal, double *bytes_per_second)
{
    *bytes_per_second = 0;
    return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED,
                            "sharc was built without CUDA: --device cuda:%d needs a CUDA build",
                            ordinal);
}

int sharc__device_tensor_to_host(sharc__ctx *ctx, const sharc_tensor *t, void *dst, size_t cap)
{
    if (cap < t->nbytes)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL), "tensor '%s': %zu bytes do not fit in %zu",
                                t->name, t->nbytes, cap);
    if (t->device != SHARC_DEVICE_HOST)
        return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED,
                                "tensor '%s' is on device cuda:%d and sharc was built without "
                                "CUDA",
                                t->name, t->device_ordinal);
    if (t->nbytes)
        memcpy(dst, t->data, t->nbytes);
    return 0;
}

#else /* SHARC_HAVE_CUDA */

#include "reader/device_impl.h"

#if SHARC_HAVE_FBANK_CUDA
#include "features/fbank_cuda.h"
#endif

/* Row groups a batch's audio is uploaded in, at most: the upload of one overlaps the
 * features of the one before, and the first upload and last features overlap nothing. */
#define MAX_GROUPS      8
/* A group is at least this many bytes of audio, so that small batches are one copy. */
#define MIN_GROUP_BYTES ((size_t)1 << 20)

/* ---- The stage ------------------------------------------------------------------------ */

struct sharc__device_stage {
    sharc__ctx *ctx;
    int ordinal;
    int features;   ///< compute fbank features
    int keep_audio; ///< with features: `audio` stays in the batch
    int max_held;
    sharc__fbank_settings fs;
    devmem *mem;
    sharc__batch_pool *pool;
    cudaStream_t copy, compute;
    cudaEvent_t uploaded[2];                    ///< a staging buffer's upload has finished
    cudaEvent_t t0[MAX_GROUPS], t1[MAX_GROUPS]; ///< each group's feature kernels
    float *pinned[2];                           ///< staging buffers, pinned
    size_t pinned_cap;                          ///< bytes of each
    void *scratch;                              ///< device audio that the batch does not keep
    size_t scratch_cap;
    copier copy_threads; ///< fill the staging buffers
#if SHARC_HAVE_FBANK_CUDA
    sharc__fbank_cuda *fb;
#endif
    int failed;
    int poison;
    sharc_device_stats stats;
};

static int cuda_error(sharc__device_stage *d, uint64_t step, const char *what, cudaError_t e)
{
    cudaGetLastError(); /* a sticky error stays; a plain one is cleared for the next call */
    return sharc__fail(d->ctx, SHARC_ERR_CUDA, "device cuda:%d: step %llu: %s failed: %s (%s)",
                       d->ordinal, (unsigned long long)step, what, cudaGetErrorString(e),
                       cudaGetErrorName(e));
}

#define CU(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            rc = cuda_error(d, step, (what), e_);                                                  \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

int sharc__device_check(sharc__ctx *ctx, const sharc_reader_settings *s)
{
    int rc = check_settings(ctx, s);
    if (rc < 0 || !sharc__device_wanted(s))
        return rc;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return sharc__set_error(ctx, SHARC_ERR_CUDA,
                                "device cuda:%d: no CUDA device can be used: cudaGetDeviceCount "
                                "failed: %s (%s)",
                                s->device_ordinal, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    if (n == 0)
        return sharc__set_error(ctx, SHARC_ERR_CUDA,
                                "device cuda:%d: no such device (no CUDA device is visible)",
                                s->device_ordinal);
    if (s->device_ordinal >= n)
        return sharc__set_error(ctx, SHARC_ERR_CUDA,
                                "device cuda:%d: no such device (%d CUDA device%s visible, "
                                "cuda:0..cuda:%d)",
                                s->device_ordinal, n, n == 1 ? " is" : "s are", n - 1);
    return 0;
}

void sharc__device_stage_close(sharc__device_stage **pd)
{
    sharc__device_stage *d = pd ? *pd : NULL;
    if (!d)
        return;
    *pd = NULL;
    int prev;
    int entered = sharc__device_enter(d->ordinal, &prev) == cudaSuccess;
    if (d->copy)
        cudaStreamSynchronize(d->copy);
    if (d->compute)
        cudaStreamSynchronize(d->compute);
#if SHARC_HAVE_FBANK_CUDA
    sharc__fbank_cuda_destroy(&d->fb);
#endif
    for (int i = 0; i < 2; i++) {
        if (d->uploaded[i])
            cudaEventDestroy(d->uploaded[i]);
        if (d->pinned[i])
            cudaFreeHost(d->pinned[i]);
    }
    for (int i = 0; i < MAX_GROUPS; i++) {
        if (d->t0[i])
            cudaEventDestroy(d->t0[i]);
        if (d->t1[i])
            cudaEventDestroy(d->t1[i]);
    }
    if (d->copy)
        cudaStreamDestroy(d->copy);
    if (d->compute)
        cudaStreamDestroy(d->compute);
    if (d->mem && d->scratch)
        sharc__devmem_free(d->mem, d->scratch, d->ordinal);
    /* The pool frees its buffers now, or at the caller's last release of a held batch; the
     * cache goes with the last of them. */
    sharc__batch_pool_destroy(&d->pool);
    if (d->mem) {
        pthread_mutex_lock(&d->mem->lock);
        d->mem->closed = 1;
        sharc__devmem_free_cached(d->mem);
        int last = d->mem->n_live == 0;
        pthread_mutex_unlock(&d->mem->lock);
        if (last)
            sharc__devmem_destroy(d->mem);
    }
    if (entered)
        sharc__device_leave(d->ordinal, prev);
    sharc__copier_stop(&d->copy_threads);
    sharc__free(d->ctx, d);
}

int sharc__device_stage_open(sharc__device_stage **out, sharc__ctx *ctx,
                             const sharc_reader_settings *s)
{
    *out = NULL;
    int rc = sharc__device_check(ctx, s);
    if (rc < 0)
        return rc;
    sharc__device_stage *d = sharc__calloc(ctx, 1, sizeof *d);
    if (!d)
        return sharc__set_error(ctx, SHARC_ERR(ENOMEM), "out of memory for the device stage");
    d->ctx = ctx;
    d->ordinal = s->device_ordinal;
    d->features = s->features == SHARC_FEATURES_FBANK;
    d->keep_audio = !d->features || s->keep_audio;
    d->max_held = s->max_held_batches;
    sharc__featurize_settings(s, &d->fs); /* as the CPU path reads them */
    const uint64_t step = 0;
    int prev = -1;
    d->mem = sharc__calloc(ctx, 1, sizeof *d->mem);
    if (!d->mem || pthread_mutex_init(&d->mem->lock, NULL) != 0) {
        sharc__free(ctx, d->mem);
        sharc__free(ctx, d);
        return sharc__set_error(ctx, SHARC_ERR(ENOMEM), "out of memory for the device stage");
    }
    sharc__ctx_init(&d->mem->ctx, &ctx->alloc, &ctx->log);
    d->mem->ordinal = d->ordinal;
    sharc__copier_start(&d->copy_threads);
    const sharc__device_allocator dev = {d->mem, sharc__devmem_alloc, sharc__devmem_free};
    if ((rc = sharc__batch_pool_create(&d->pool, ctx, (size_t)d->max_held, &dev)) < 0) {
        rc = sharc__set_error(ctx, rc, "out of memory for the device stage's batches");
        goto fail;
    }
    CU(sharc__device_enter(d->ordinal, &prev), "cudaSetDevice");
    CU(cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking), "cudaStreamCreate");
    CU(cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking), "cudaStreamCreate");
    for (int i = 0; i < 2; i++)
        CU(cudaEventCreateWithFlags(&d->uploaded[i], cudaEventDisableTiming), "cudaEventCreate");
    for (int i = 0; i < MAX_GROUPS; i++) {
        CU(cudaEventCreate(&d->t0[i]), "cudaEventCreate");
        CU(cudaEventCreate(&d->t1[i]), "cudaEventCreate");
    }
#if SHARC_HAVE_FBANK_CUDA
    if (d->features && (rc = sharc__fbank_cuda_create(&d->fb, ctx, &d->fs, d->ordinal)) < 0) {
        rc = sharc__fail_wrap(ctx, rc, "device cuda:%d: features", d->ordinal);
        goto fail;
    }
#endif
    sharc__device_leave(d->ordinal, prev);
    *out = d;
    return 0;
fail:
    sharc__device_leave(d->ordinal, prev);
    sharc__device_stage_close(&d);
    return rc;
}

void sharc__device_stage_stats(const sharc__device_stage *d, sharc_device_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!d)
        return;
    *out = d->stats;
    pthread_mutex_lock(&d->mem->lock);
    out->allocations = d->mem->n_allocs;
    out->allocated_bytes = d->mem->bytes;
    pthread_mutex_unlock(&d->mem->lock);
#if SHARC_HAVE_FBANK_CUDA
    if (d->fb)
        out->allocations += sharc__fbank_cuda_mallocs(d->fb);
#endif
}

void sharc__device_stage_poison(sharc__device_stage *d, int on)
{
    if (d)
        d->poison = on != 0;
}

/* A string column's tensors (`x_offsets` with `x_bytes`) stay on the host. */
static int is_string_part(const sharc_batch *b, const char *name)
{
    static const char *const suffix[2] = {"_offsets", "_bytes"};
    size_t len = strlen(name);
    for (int k = 0; k < 2; k++) {
        size_t sl = strlen(suffix[k]);
        if (len <= sl || strcmp(name + len - sl, suffix[k]) != 0)
            continue;
        char other[SHARC_TENSOR_NAME_MAX + 16];
        snprintf(other, sizeof other, "%.*s%s", (int)(len - sl), name, suffix[1 - k]);
        if (sharc_batch_tensor(b, other))
            return 1;
    }
    return 0;
}

static int64_t frames_of(const sharc__fbank_settings *fs, int64_t T)
{
    int64_t n = (T > 0 ? T : 0) / fs->hop + 1;
    if (fs->pad_to > 1 && n % fs->pad_to)
        n += fs->pad_to - n % fs->pad_to;
    return n;
}

/* Device memory of at least `bytes` for audio the batch does not keep. */
static int grow_scratch(sharc__device_stage *d, uint64_t step, size_t bytes)
{
    if (bytes <= d->scratch_cap)
        return 0;
    if (d->scratch)
        sharc__devmem_free(d->mem, d->scratch, d->ordinal);
    d->scratch = NULL;
    d->scratch_cap = 0;
    int rc = sharc__devmem_alloc(d->mem, &d->scratch, bytes, d->ordinal);
    if (rc == SHARC_ERR_CUDA)
        return cuda_error(d, step, "cudaMalloc (audio on the device)", sharc__devmem_last(d->mem));
    if (rc < 0)
        return sharc__fail(d->ctx, rc,
                           "device cuda:%d: step %llu: out of memory for the audio "
                           "on the device (%zu bytes)",
                           d->ordinal, (unsigned long long)step, bytes);
    d->scratch_cap = bytes;
    return 0;
}

/* Pinned staging buffers of at least `bytes` each. No copy is in flight between batches. */
static int grow_pinned(sharc__device_stage *d, uint64_t step, size_t bytes)
{
    int rc = 0;
    if (bytes <= d->pinned_cap)
        return 0;
    size_t cap = sharc__device_size_class(bytes);
    for (int i = 0; i < 2; i++) {
        if (d->pinned[i])
            cudaFreeHost(d->pinned[i]);
        d->pinned[i] = NULL;
    }
    d->pinned_cap = 0;
    for (int i = 0; i < 2; i++) {
        CU(cudaHostAlloc((void **)&d->pinned[i], cap, cudaHostAllocDefault),
           "cudaHostAlloc (staging)");
        pthread_mutex_lock(&d->mem->lock);
        d->mem->n_allocs++;
        d->mem->bytes += cap;
        pthread_mutex_unlock(&d->mem->lock);
    }
    d->pinned_cap = cap;
    return 0;
fail:
    return rc;
}

/* Declare the device batch's tensors after the host batch's: numeric ones on the device,
 * string columns on the host, `audio` left out when the features replace it, the features
 * last; then size them. */
static int declare(sharc__device_stage *d, const sharc_batch *h, sharc_batch *db, int64_t B,
                   int64_t frames)
{
    const uint64_t step = h->step;
    int rc = 0;
    for (size_t i = 0; i < h->n_tensors && rc >= 0; i++) {
        const sharc_tensor *t = &h->tensors[i];
        if (!d->keep_audio && strcmp(t->name, "audio") == 0)
            continue;
        int host = is_string_part(h, t->name);
        rc = sharc__batch_add_tensor(db, t->name, t->dtype,
                                     host ? SHARC_DEVICE_HOST : SHARC_DEVICE_CUDA,
                                     host ? 0 : d->ordinal, t->ndim, t->shape);
    }
    if (d->features && rc >= 0) {
        int64_t shape_f[3] = {B, d->fs.n_mels, frames}, shape_b[1] = {B};
        rc = sharc__batch_add_tensor(db, "features", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, d->ordinal,
                                     3, shape_f);
        if (rc >= 0)
            rc = sharc__batch_add_tensor(db, "feature_lens", SHARC_DTYPE_I32, SHARC_DEVICE_CUDA,
                                         d->ordinal, 1, shape_b);
    }
    if (rc >= 0)
        rc = sharc__batch_finish(db);
    if (rc < 0) {
        char cut[256];
        if (rc == SHARC_ERR_CUDA)
            return sharc__fail(
                d->ctx, rc, "device cuda:%d: step %llu (cut %s, ...): %s: %s (%s)", d->ordinal,
                (unsigned long long)step, sharc__batch_first_cut(h, cut, sizeof cut),
                sharc__batch_pool_error(d->pool), cudaGetErrorString(sharc__devmem_last(d->mem)),
                cudaGetErrorName(sharc__devmem_last(d->mem)));
        return sharc__fail(d->ctx, rc, "device cuda:%d: step %llu (cut %s, ...): %s", d->ordinal,
                           (unsigned long long)step, sharc__batch_first_cut(h, cut, sizeof cut),
                           sharc__batch_pool_error(d->pool));
    }
    return 0;
}

/* Upload the audio in row groups through the two staging buffers and enqueue each group's
 * features once its upload is done. */
static int upload_audio(sharc__device_stage *d, uint64_t step, const float *audio, float *dst,
                        const int32_t *dlens, int64_t B, int64_t T, float *feat, int32_t *flens,
                        int64_t frames, int *n_timed)
{
    int rc = 0;
    const size_t row_bytes = (size_t)T * sizeof(float);
    int64_t G = (B + MAX_GROUPS - 1) / MAX_GROUPS;
    if (row_bytes && (size_t)G * row_bytes < MIN_GROUP_BYTES)
        G = (int64_t)((MIN_GROUP_BYTES + row_bytes - 1) / row_bytes);
    if (G > B)
        G = B;
    if (row_bytes && (rc = grow_pinned(d, step, (size_t)G * row_bytes)) < 0)
        return rc;
    int g = 0;
    for (int64_t r0 = 0; r0 < B; r0 += G, g++) {
        const int slot = g & 1;
        const int64_t rows = B - r0 < G ? B - r0 : G;
        const size_t bytes = (size_t)rows * row_bytes;
        if (bytes) {
            /* The staging buffer's last upload must be done before it is filled again. */
            if (g >= 2)
                CU(cudaEventSynchronize(d->uploaded[slot]), "cudaEventSynchronize (staging)");
            sharc__copier_copy(&d->copy_threads, d->pinned[slot], audio + r0 * T, bytes);
            CU(cudaMemcpyAsync(dst + r0 * T, d->pinned[slot], bytes, cudaMemcpyHostToDevice,
                               d->copy),
               "cudaMemcpyAsync (upload of audio)");
            d->stats.upload_bytes += bytes;
        }
        CU(cudaEventRecord(d->uploaded[slot], d->copy), "cudaEventRecord");
        if (!d->features)
            continue;
#if SHARC_HAVE_FBANK_CUDA
        CU(cudaStreamWaitEvent(d->compute, d->uploaded[slot], 0), "cudaStreamWaitEvent");
        CU(cudaEventRecord(d->t0[g], d->compute), "cudaEventRecord");
        rc = sharc__fbank_cuda_enqueue(d->fb, d->ctx, d->compute, dst + r0 * T, dlens + r0, rows, T,
                                       feat + r0 * d->fs.n_mels * frames, flens + r0, frames);
        if (rc < 0)
            return sharc__fail_wrap(d->ctx, rc, "device cuda:%d: step %llu: features", d->ordinal,
                                    (unsigned long long)step);
        CU(cudaEventRecord(d->t1[g], d->compute), "cudaEventRecord");
        *n_timed = g + 1;
        d->stats.feature_read_bytes += bytes + (size_t)rows * sizeof(int32_t);
        d->stats.feature_write_bytes +=
            ((size_t)rows * (size_t)d->fs.n_mels * (size_t)frames + (size_t)rows) * 4;
#else
        (void)feat;
        (void)flens;
        (void)frames;
        (void)dlens;
#endif
    }
    return 0;
fail:
    return rc;
}

/* Make device batch `db` from host batch `h`. */
static int convert(sharc__device_stage *d, const sharc_batch *h, sharc_batch *db)
{
    const uint64_t step = h->step;
    int rc = 0, prev = -1, n_timed = 0;
    db->step = h->step;
    db->epoch = h->epoch;
    const sharc_tensor *audio = sharc_batch_tensor(h, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(h, "audio_lens");
    if (!audio || !lens || audio->dtype != SHARC_DTYPE_F32 || audio->ndim != 2 ||
        audio->device != SHARC_DEVICE_HOST || lens->dtype != SHARC_DTYPE_I32 || lens->ndim != 1 ||
        lens->shape[0] != audio->shape[0])
        return sharc__fail(d->ctx, SHARC_ERR_FRAME,
                           "device cuda:%d: step %llu: the batch has no host f32 [B, T] audio "
                           "with i32 [B] audio_lens",
                           d->ordinal, (unsigned long long)step);
    const int64_t B = audio->shape[0], T = audio->shape[1];
    const int32_t *hl = lens->data;
    for (int64_t b = 0; b < B; b++)
        if (hl[b] < 0 || hl[b] > T) {
            size_t n = 0;
            const char *id = sharc_batch_string(h, "cut_id", (size_t)b, &n);
            return sharc__fail(d->ctx, SHARC_ERR_FRAME,
                               "device cuda:%d: step %llu: row %lld (cut %.*s) has length %d, "
                               "outside the batch's 0..%lld",
                               d->ordinal, (unsigned long long)step, (long long)b,
                               id ? (int)(n < 200 ? n : 200) : 1, id ? id : "?", (int)hl[b],
                               (long long)T);
        }
    const int64_t frames = d->features ? frames_of(&d->fs, T) : 0;
    CU(sharc__device_enter(d->ordinal, &prev), "cudaSetDevice");
    if ((rc = declare(d, h, db, B, frames)) < 0)
        goto fail;
    float *dst = NULL, *feat = NULL;
    int32_t *dlens = NULL, *flens = NULL;
    for (size_t i = 0; i < db->n_tensors; i++) {
        sharc_tensor *t = &db->tensors[i];
        const sharc_tensor *src = sharc_batch_tensor(h, t->name);
        if (t->device == SHARC_DEVICE_CUDA && d->poison && t->nbytes)
            CU(cudaMemsetAsync(t->data, 0xFF, t->nbytes, d->copy), "cudaMemsetAsync (poison)");
        if (strcmp(t->name, "audio") == 0) {
            dst = t->data;
            continue;
        }
        if (strcmp(t->name, "features") == 0) {
            feat = t->data;
            continue;
        }
        if (strcmp(t->name, "feature_lens") == 0) {
            flens = t->data;
            continue;
        }
        if (strcmp(t->name, "audio_lens") == 0)
            dlens = t->data;
        if (!src || !t->nbytes)
            continue;
        if (t->device == SHARC_DEVICE_HOST) {
            memcpy(t->data, src->data, t->nbytes);
            continue;
        }
        /* Small tensors (lengths, durations) go up from the host batch directly. */
        CU(cudaMemcpyAsync(t->data, src->data, t->nbytes, cudaMemcpyHostToDevice, d->copy),
           "cudaMemcpyAsync (upload)");
        d->stats.upload_bytes += t->nbytes;
    }
    if (!dst && B * T > 0) {
        if ((rc = grow_scratch(d, step, (size_t)(B * T) * sizeof(float))) < 0)
            goto fail;
        dst = d->scratch;
        if (d->poison)
            CU(cudaMemsetAsync(dst, 0xFF, (size_t)(B * T) * sizeof(float), d->copy),
               "cudaMemsetAsync (poison)");
    }
    if ((rc = upload_audio(d, step, audio->data, dst, dlens, B, T, feat, flens, frames, &n_timed)) <
        0)
        goto fail;
    CU(cudaStreamSynchronize(d->copy), "cudaStreamSynchronize (upload)");
    CU(cudaStreamSynchronize(d->compute), "cudaStreamSynchronize (features)");
    for (int g = 0; g < n_timed; g++) {
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, d->t0[g], d->t1[g]), "cudaEventElapsedTime");
        d->stats.feature_seconds += (double)ms * 1e-3;
    }
    sharc__device_leave(d->ordinal, prev);
    return 0;
fail:
    /* Nothing may still write into the batch, which goes back to the pool. */
    if (d->copy)
        cudaStreamSynchronize(d->copy);
    if (d->compute)
        cudaStreamSynchronize(d->compute);
    sharc__device_leave(d->ordinal, prev);
    return rc;
}

int sharc__device_stage_next(sharc__device_stage *d, sharc__host_batch_fn next_host, void *cookie,
                             sharc_batch **out)
{
    *out = NULL;
    if (d->failed)
        return d->failed;
    sharc_batch *db = NULL, *h = NULL;
    int rc = sharc__batch_pool_acquire(d->pool, &db);
    if (rc == SHARC_ERR_BACKPRESSURE)
        return sharc__set_error(d->ctx, rc,
                                "the caller holds %zu batches (max_held_batches %d); release "
                                "some first",
                                sharc__batch_pool_held(d->pool), d->max_held);
    if (rc < 0)
        return d->failed = sharc__fail(d->ctx, rc, "device cuda:%d: %s", d->ordinal,
                                       sharc__batch_pool_error(d->pool));
    if ((rc = next_host(cookie, &h)) != 0) {
        sharc_batch_release(db);
        return rc;
    }
    double t = sharc__now_s();
    rc = convert(d, h, db);
    sharc_batch_release(h);
    if (rc < 0) {
        sharc_batch_release(db);
        return d->failed = rc;
    }
    d->stats.batches++;
    d->stats.seconds += sharc__now_s() - t;
    *out = db;
    return 0;
}

int sharc__device_copy_bandwidth(sharc__ctx *ctx, int ordinal, double *bytes_per_second)
{
    *bytes_per_second = 0;
    const size_t n = (size_t)256 << 20;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int prev = -1, rc = 0;
    const char *what = "cudaSetDevice";
    cudaError_t e = sharc__device_enter(ordinal, &prev);
    if (e == cudaSuccess && (what = "cudaMalloc", e = cudaMalloc(&a, n)) == cudaSuccess &&
        (e = cudaMalloc(&b, n)) == cudaSuccess &&
        (what = "cudaEventCreate", e = cudaEventCreate(&e0)) == cudaSuccess &&
        (e = cudaEventCreate(&e1)) == cudaSuccess &&
        (what = "cudaMemset", e = cudaMemset(a, 1, n)) == cudaSuccess) {
        float best = 0;
        for (int i = 0; i < 5 && e == cudaSuccess; i++) {
            float ms = 0;
            what = "cudaMemcpy";
            if ((e = cudaEventRecord(e0, 0)) != cudaSuccess ||
                (e = cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice)) != cudaSuccess ||
                (e = cudaEventRecord(e1, 0)) != cudaSuccess ||
                (e = cudaEventSynchronize(e1)) != cudaSuccess ||
                (e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess)
                break;
            if (i > 0 && (best == 0 || ms < best)) /* the first copy warms up */
                best = ms;
        }
        if (e == cudaSuccess && best > 0)
            *bytes_per_second = 2.0 * (double)n / ((double)best * 1e-3);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        rc = sharc__fail(ctx, SHARC_ERR_CUDA, "device cuda:%d: copy bandwidth: %s failed: %s (%s)",
                         ordinal, what, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    sharc__device_leave(ordinal, prev);
    return rc;
}

int sharc__device_tensor_to_host(sharc__ctx *ctx, const sharc_tensor *t, void *dst, size_t cap)
{
    if (cap < t->nbytes)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL), "tensor '%s': %zu bytes do not fit in %zu",
                                t->name, t->nbytes, cap);
    if (!t->nbytes)
        return 0;
    if (t->device == SHARC_DEVICE_HOST) {
        memcpy(dst, t->data, t->nbytes);
        return 0;
    }
    int prev = -1;
    cudaError_t e = sharc__device_enter(t->device_ordinal, &prev);
    if (e == cudaSuccess)
        e = cudaMemcpy(dst, t->data, t->nbytes, cudaMemcpyDeviceToHost);
    sharc__device_leave(t->device_ordinal, prev);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return sharc__set_error(ctx, SHARC_ERR_CUDA,
                                "tensor '%s' on device cuda:%d: cudaMemcpy to the host failed: "
                                "%s (%s)",
                                t->name, t->device_ordinal, cudaGetErrorString(e),
                                cudaGetErrorName(e));
    }
    return 0;
}

#endif /* SHARC_HAVE_CUDA */

#include "batching/batch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "batching/frame.h"

typedef struct pool_slot {
    sharc_batch batch;
    struct sharc__batch_pool *pool;
    sharc_tensor tensors[SHARC__BATCH_MAX_TENSORS];
    uint64_t offsets[SHARC__BATCH_MAX_TENSORS];
    uint64_t payload_len;  ///< end of the last host tensor declared so far
    uint64_t finished_len; ///< payload_len at the last finish: the bytes an extend keeps
    uint8_t *block;        ///< host payload, 256-byte aligned
    size_t block_cap;
    void *dev[SHARC__BATCH_MAX_TENSORS]; ///< device buffer per tensor index
    size_t dev_cap[SHARC__BATCH_MAX_TENSORS];
    int dev_ordinal[SHARC__BATCH_MAX_TENSORS];
    int held;
} pool_slot;

struct sharc__batch_pool {
    sharc__ctx ctx;
    pthread_mutex_t lock;
    sharc__device_allocator dev;
    size_t cap;
    size_t n_slots;
    size_t held;
    int closed;
    pool_slot **slots;
};

size_t sharc_dtype_size(sharc_dtype dtype)
{
    switch (dtype) {
    case SHARC_DTYPE_F32:
    case SHARC_DTYPE_I32:
        return 4;
    case SHARC_DTYPE_I64:
    case SHARC_DTYPE_F64:
        return 8;
    case SHARC_DTYPE_U8:
        return 1;
    case SHARC_DTYPE_F16:
    case SHARC_DTYPE_BF16:
        return 2;
    default:
        return 0;
    }
}

const char *sharc_dtype_name(sharc_dtype dtype)
{
    switch (dtype) {
    case SHARC_DTYPE_F32:
        return "f32";
    case SHARC_DTYPE_I32:
        return "i32";
    case SHARC_DTYPE_I64:
        return "i64";
    case SHARC_DTYPE_U8:
        return "u8";
    case SHARC_DTYPE_F16:
        return "f16";
    case SHARC_DTYPE_BF16:
        return "bf16";
    case SHARC_DTYPE_F64:
        return "f64";
    default:
        return "unknown";
    }
}

const sharc_tensor *sharc_batch_tensor(const sharc_batch *b, const char *name)
{
    if (!b || !name)
        return NULL;
    for (size_t i = 0; i < b->n_tensors; i++)
        if (strncmp(b->tensors[i].name, name, SHARC_TENSOR_NAME_MAX) == 0)
            return &b->tensors[i];
    return NULL;
}

const char *sharc_batch_string(const sharc_batch *b, const char *column, size_t i, size_t *len)
{
    char name[SHARC_TENSOR_NAME_MAX + 16];
    if (!column || strlen(column) >= SHARC_TENSOR_NAME_MAX)
        return NULL;
    snprintf(name, sizeof name, "%s_offsets", column);
    const sharc_tensor *off = sharc_batch_tensor(b, name);
    snprintf(name, sizeof name, "%s_bytes", column);
    const sharc_tensor *bytes = sharc_batch_tensor(b, name);
    if (!off || !bytes || off->dtype != SHARC_DTYPE_I32 || off->device != SHARC_DEVICE_HOST ||
        bytes->device != SHARC_DEVICE_HOST || off->ndim != 1 || i + 1 >= (size_t)off->shape[0])
        return NULL;
    const int32_t *o = off->data;
    /* Offsets come from the wire on peers: check them before use. */
    if (o[i] < 0 || o[i + 1] < o[i] || (size_t)o[i + 1] > bytes->nbytes)
        return NULL;
    if (len)
        *len = (size_t)(o[i + 1] - o[i]);
    return (const char *)bytes->data + o[i];
}

static void slot_free(sharc__batch_pool *pool, pool_slot *s)
{
    for (int i = 0; i < SHARC__BATCH_MAX_TENSORS; i++)
        if (s->dev[i])
            pool->dev.free(pool->dev.cookie, s->dev[i], s->dev_ordinal[i]);
    sharc__free(&pool->ctx, s->block);
    sharc__free(&pool->ctx, s);
}

static void pool_free(sharc__batch_pool *pool)
{
    for (size_t i = 0; i < pool->n_slots; i++)
        slot_free(pool, pool->slots[i]);
    sharc__free(&pool->ctx, pool->slots);
    pthread_mutex_destroy(&pool->lock);
    sharc__ctx ctx = pool->ctx;
    sharc__free(&ctx, pool);
}

int sharc__batch_pool_create(sharc__batch_pool **out, const sharc__ctx *ctx, size_t cap,
                             const sharc__device_allocator *dev)
{
    sharc__ctx tmp;
    sharc__ctx_init(&tmp, &ctx->alloc, &ctx->log);
    *out = NULL;
    if (cap < 1)
        return sharc__fail(&tmp, SHARC_ERR(EINVAL), "batch pool needs a cap of at least 1");
    sharc__batch_pool *pool = sharc__calloc(&tmp, 1, sizeof *pool);
    if (!pool)
        return SHARC_ERR(ENOMEM);
    pool->ctx = tmp;
    pool->slots = sharc__calloc(&tmp, cap, sizeof *pool->slots);
    if (!pool->slots || pthread_mutex_init(&pool->lock, NULL) != 0) {
        sharc__free(&tmp, pool->slots);
        sharc__free(&tmp, pool);
        return SHARC_ERR(ENOMEM);
    }
    pool->cap = cap;
    if (dev)
        pool->dev = *dev;
    *out = pool;
    return 0;
}

void sharc__batch_pool_destroy(sharc__batch_pool **pp)
{
    sharc__batch_pool *pool = pp ? *pp : NULL;
    if (!pool)
        return;
    *pp = NULL;
    pthread_mutex_lock(&pool->lock);
    pool->closed = 1;
    int last = pool->held == 0;
    pthread_mutex_unlock(&pool->lock);
    if (last)
        pool_free(pool);
}

int sharc__batch_pool_acquire(sharc__batch_pool *pool, sharc_batch **out)
{
    pool_slot *s = NULL;
    int rc = 0;
    *out = NULL;
    pthread_mutex_lock(&pool->lock);
    for (size_t i = 0; i < pool->n_slots && !s; i++)
        if (!pool->slots[i]->held)
            s = pool->slots[i];
    if (!s && pool->n_slots == pool->cap) {
        rc = sharc__set_error(&pool->ctx, SHARC_ERR_BACKPRESSURE,
                              "all %zu batches are held by the caller; release one with "
                              "sharc_batch_release() before asking for the next",
                              pool->cap);
        goto done;
    }
    if (!s) {
        s = sharc__calloc(&pool->ctx, 1, sizeof *s);
        if (!s) {
            rc = sharc__set_error(&pool->ctx, SHARC_ERR(ENOMEM), "out of memory for a batch");
            goto done;
        }
        s->pool = pool;
        pool->slots[pool->n_slots++] = s;
    }
    s->held = 1;
    pool->held++;
    memset(&s->batch, 0, sizeof s->batch);
    s->batch.tensors = s->tensors;
    s->batch.owner_ = s;
    s->payload_len = 0;
    s->finished_len = 0;
    *out = &s->batch;
done:
    pthread_mutex_unlock(&pool->lock);
    return rc;
}

size_t sharc__batch_pool_held(sharc__batch_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    size_t n = pool->held;
    pthread_mutex_unlock(&pool->lock);
    return n;
}

const char *sharc__batch_pool_error(const sharc__batch_pool *pool)
{
    return pool->ctx.error;
}

void sharc_batch_release(sharc_batch *b)
{
    pool_slot *s = b ? b->owner_ : NULL;
    if (!s)
        return;
    sharc__batch_pool *pool = s->pool;
    pthread_mutex_lock(&pool->lock);
    int last = 0;
    if (s->held) {
        s->held = 0;
        pool->held--;
        last = pool->closed && pool->held == 0;
    }
    pthread_mutex_unlock(&pool->lock);
    if (last)
        pool_free(pool);
}

int sharc__batch_add_tensor(sharc_batch *b, const char *name, sharc_dtype dtype,
                            sharc_device device, int ordinal, int ndim, const int64_t *shape)
{
    pool_slot *s = b->owner_;
    sharc__ctx *ctx = &s->pool->ctx;
    if (b->n_tensors >= SHARC__BATCH_MAX_TENSORS)
        return sharc__set_error(ctx, SHARC_ERR_TOO_LARGE, "a batch holds at most %d tensors",
                                SHARC__BATCH_MAX_TENSORS);
    if (device == SHARC_DEVICE_CUDA && !s->pool->dev.alloc)
        return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED,
                                "device tensor '%s' needs a device transport", name);
    if (ndim < 0 || ndim > SHARC_TENSOR_MAX_DIMS)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': %d dimensions (at most %d)",
                                name ? name : "", ndim, SHARC_TENSOR_MAX_DIMS);
    sharc_tensor *t = &s->tensors[b->n_tensors];
    memset(t, 0, sizeof *t);
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= SHARC_TENSOR_NAME_MAX)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor name '%s' is empty or too long",
                                name ? name : "");
    memcpy(t->name, name, len);
    t->dtype = dtype;
    t->device = device;
    t->device_ordinal = ordinal;
    t->ndim = ndim;
    uint64_t nbytes = sharc_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        if (shape[d] > 0 && nbytes > SIZE_MAX / (uint64_t)shape[d])
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': shape overflows", name);
        nbytes *= shape[d] > 0 ? (uint64_t)shape[d] : 0;
    }
    t->nbytes = (size_t)nbytes;
    t->data = (void *)1; /* checked below like a filled tensor; reset right after */
    int rc = sharc__frame_check_tensor(ctx, t);
    t->data = NULL;
    if (rc < 0)
        return rc;
    uint64_t offset = 0;
    if (device == SHARC_DEVICE_HOST) {
        offset = sharc__frame_align(s->payload_len);
        if ((s->payload_len && !offset) || t->nbytes > SIZE_MAX - offset)
            return sharc__set_error(ctx, SHARC_ERR_TOO_LARGE, "batch payload overflows");
        s->payload_len = offset + t->nbytes;
    }
    s->offsets[b->n_tensors] = offset;
    return (int)b->n_tensors++;
}

int sharc__batch_set_layout(sharc_batch *b, const sharc_tensor *t, const uint64_t *offsets,
                            size_t n, uint64_t payload_bytes)
{
    pool_slot *s = b->owner_;
    sharc__ctx *ctx = &s->pool->ctx;
    if (n > SHARC__BATCH_MAX_TENSORS)
        return sharc__set_error(ctx, SHARC_ERR_TOO_LARGE, "a batch holds at most %d tensors",
                                SHARC__BATCH_MAX_TENSORS);
    if (payload_bytes > SIZE_MAX)
        return sharc__set_error(ctx, SHARC_ERR_TOO_LARGE, "batch payload too large");
    for (size_t i = 0; i < n; i++) {
        if (t[i].device == SHARC_DEVICE_CUDA && !s->pool->dev.alloc)
            return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED,
                                    "device tensor '%s' needs a device transport", t[i].name);
        s->tensors[i] = t[i];
        s->tensors[i].data = NULL;
        s->offsets[i] = offsets[i];
    }
    b->n_tensors = n;
    s->payload_len = payload_bytes;
    return 0;
}

static int finish_device(pool_slot *s, size_t i)
{
    sharc__batch_pool *pool = s->pool;
    sharc_tensor *t = &s->tensors[i];
    if (s->dev[i] && (s->dev_cap[i] < t->nbytes || s->dev_ordinal[i] != t->device_ordinal)) {
        pool->dev.free(pool->dev.cookie, s->dev[i], s->dev_ordinal[i]);
        s->dev[i] = NULL;
        s->dev_cap[i] = 0;
    }
    if (!s->dev[i]) {
        size_t want = t->nbytes ? t->nbytes : 1;
        int rc = pool->dev.alloc(pool->dev.cookie, &s->dev[i], want, t->device_ordinal);
        if (rc < 0)
            return sharc__set_error(&pool->ctx, rc, "cannot allocate %zu device bytes for '%s'",
                                    want, t->name);
        s->dev_cap[i] = want;
        s->dev_ordinal[i] = t->device_ordinal;
    }
    t->data = s->dev[i];
    return 0;
}

/* Size the block for the declared tensors, keeping its first `keep` bytes when it grows. */
static int finish_keeping(sharc_batch *b, uint64_t keep)
{
    pool_slot *s = b->owner_;
    sharc__batch_pool *pool = s->pool;
    if (s->payload_len > s->block_cap || !s->block) {
        /* Grow by half again so slowly growing batches do not reallocate every step. */
        uint64_t want = s->payload_len + s->payload_len / 2;
        want = sharc__frame_align(want ? want : SHARC__FRAME_ALIGN);
        if (!want || want > SIZE_MAX)
            return sharc__set_error(&pool->ctx, SHARC_ERR(ENOMEM), "batch payload too large");
        uint8_t *block = sharc__malloc_bulk(&pool->ctx, (size_t)want, SHARC__FRAME_ALIGN);
        if (!block)
            return sharc__set_error(&pool->ctx, SHARC_ERR(ENOMEM),
                                    "out of memory for a batch of %llu bytes",
                                    (unsigned long long)s->payload_len);
        if (keep && s->block)
            memcpy(block, s->block, (size_t)keep);
        sharc__free(&pool->ctx, s->block);
        s->block = block;
        s->block_cap = (size_t)want;
    }
    for (size_t i = 0; i < b->n_tensors; i++) {
        if (s->tensors[i].device == SHARC_DEVICE_HOST) {
            s->tensors[i].data = s->block + s->offsets[i];
            continue;
        }
        int rc = finish_device(s, i);
        if (rc < 0)
            return rc;
    }
    s->finished_len = s->payload_len;
    return 0;
}

int sharc__batch_finish(sharc_batch *b)
{
    return finish_keeping(b, 0);
}

int sharc__batch_extend(sharc_batch *b)
{
    pool_slot *s = b->owner_;
    return finish_keeping(b, s->finished_len);
}

int sharc__batch_remove_tensor(sharc_batch *b, const char *name)
{
    pool_slot *s = b->owner_;
    size_t n = b->n_tensors, i = 0;
    while (i < n && strncmp(s->tensors[i].name, name, SHARC_TENSOR_NAME_MAX) != 0)
        i++;
    if (i == n)
        return sharc__set_error(&s->pool->ctx, SHARC_ERR_FRAME, "the batch has no tensor '%s'",
                                name);
    /* The removed tensor's device buffer stays pooled: it moves to the end of the list. */
    void *dev = s->dev[i];
    size_t dev_cap = s->dev_cap[i];
    int dev_ordinal = s->dev_ordinal[i];
    for (size_t j = i; j + 1 < n; j++) {
        s->tensors[j] = s->tensors[j + 1];
        s->offsets[j] = s->offsets[j + 1];
        s->dev[j] = s->dev[j + 1];
        s->dev_cap[j] = s->dev_cap[j + 1];
        s->dev_ordinal[j] = s->dev_ordinal[j + 1];
    }
    s->dev[n - 1] = dev;
    s->dev_cap[n - 1] = dev_cap;
    s->dev_ordinal[n - 1] = dev_ordinal;
    b->n_tensors = --n;
    /* Host tensors are repacked as sharc__frame_layout lays them out, so the payload a
     * broadcast sends (the block up to payload_len) carries no dead bytes. Offsets only
     * shrink, so moving the tensors in order never overwrites one not moved yet. */
    uint64_t end = 0;
    for (size_t j = 0; j < n; j++) {
        sharc_tensor *t = &s->tensors[j];
        if (t->device != SHARC_DEVICE_HOST)
            continue;
        uint64_t at = sharc__frame_align(end);
        if (at != s->offsets[j] && t->nbytes)
            memmove(s->block + at, s->block + s->offsets[j], t->nbytes);
        s->offsets[j] = at;
        t->data = s->block ? s->block + at : NULL;
        end = at + t->nbytes;
    }
    s->payload_len = end;
    s->finished_len = end;
    return 0;
}

int sharc__batch_payload(const sharc_batch *b, uint8_t **base, uint64_t *len)
{
    const pool_slot *s = b ? b->owner_ : NULL;
    if (!s || !s->block)
        return 0;
    *base = s->block;
    *len = s->payload_len;
    return 1;
}

const char *sharc__batch_first_cut(const sharc_batch *b, char *buf, size_t cap)
{
    size_t len = 0;
    const char *id = sharc_batch_string(b, "cut_id", 0, &len);
    snprintf(buf, cap, "%.*s", id ? (int)(len < 200 ? len : 200) : 1, id ? id : "?");
    return buf;
}

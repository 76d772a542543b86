#include "bcast/transport.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

struct sharc__device_heap {
    sharc__ctx ctx; ///< the transport's allocator and logger; the text of a failed alloc
    sharc__device_ops ops;
    atomic_long refs; ///< the transport's reference (until close) plus one per live buffer
};

static void heap_unref(sharc__device_heap *h)
{
    if (atomic_fetch_sub(&h->refs, 1) == 1) {
        sharc__ctx ctx = h->ctx;
        sharc__free(&ctx, h);
    }
}

/* Allocations come from the one thread that uses the transport's protocol at a time. */
static int heap_alloc(void *cookie, void **ptr, size_t size, int ordinal)
{
    sharc__device_heap *h = cookie;
    int rc = h->ops.alloc(&h->ctx, ptr, size, ordinal);
    if (rc == 0)
        atomic_fetch_add(&h->refs, 1);
    return rc;
}

/* Frees come from any thread (sharc_batch_release), so each logs through a context of its own. */
static void heap_free(void *cookie, void *ptr, int ordinal)
{
    sharc__device_heap *h = cookie;
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, &h->ctx.alloc, &h->ctx.log);
    h->ops.free(&ctx, ptr, ordinal);
    heap_unref(h);
}

int sharc__transport_set_device(sharc_transport *t, const sharc__device_ops *ops, int ordinal)
{
    sharc__device_heap *h = sharc__calloc(&t->ctx, 1, sizeof *h);
    if (!h)
        return sharc__fail(&t->ctx, SHARC_ERR(ENOMEM), "out of memory for the device heap");
    sharc__ctx_init(&h->ctx, &t->ctx.alloc, &t->ctx.log);
    h->ops = *ops;
    atomic_init(&h->refs, 1);
    if (t->heap)
        heap_unref(t->heap);
    t->heap = h;
    t->device.cookie = h;
    t->device.alloc = heap_alloc;
    t->device.free = heap_free;
    t->device_ordinal = ordinal;
    return 0;
}

void sharc_transport_default_settings(sharc_transport_settings *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    sharc_default_allocator(&s->allocator);
    sharc_default_logger(&s->logger);
    s->timeout_ms = 600000;
}

int sharc__transport_check_settings(const sharc_transport_settings *s)
{
    if (!s)
        return 0;
    int rc = sharc__check_struct_size("sharc_transport_settings", s->struct_size, sizeof *s,
                                      "sharc_transport_default_settings");
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < sizeof s->reserved; i++)
        if (s->reserved[i]) {
            sharc__ctx ctx;
            sharc__ctx_init(&ctx, &s->allocator, &s->logger);
            return sharc__fail(&ctx, SHARC_ERR(EINVAL),
                               "sharc_transport_settings: reserved bytes must be zero");
        }
    return 0;
}

int sharc__transport_new(sharc_transport **out, const sharc__transport_ops *ops,
                         const sharc_transport_settings *s, int rank, int size)
{
    sharc_transport_settings defaults;
    *out = NULL;
    int rc = sharc__transport_check_settings(s);
    if (rc < 0)
        return rc;
    if (!s) {
        sharc_transport_default_settings(&defaults);
        s = &defaults;
    }
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, &s->allocator, &s->logger);
    sharc_transport *t = sharc__calloc(&ctx, 1, sizeof *t);
    *out = NULL;
    if (!t)
        return SHARC_ERR(ENOMEM);
    t->ops = ops;
    t->ctx = ctx;
    t->rank = rank;
    t->size = size;
    t->timeout_ms = s->timeout_ms < 0 ? 0 : s->timeout_ms;
    t->device_ordinal = -1;
    *out = t;
    return 0;
}

void sharc_transport_close(sharc_transport **pt)
{
    sharc_transport *t = pt ? *pt : NULL;
    if (!t)
        return;
    *pt = NULL;
    if (t->ops->close)
        t->ops->close(t);
    if (t->heap) /* freed here, or by the release of the last batch holding its memory */
        heap_unref(t->heap);
    sharc__ctx ctx = t->ctx;
    sharc__free(&ctx, t);
}

int sharc_transport_rank(const sharc_transport *t)
{
    return t ? t->rank : -1;
}

int sharc_transport_size(const sharc_transport *t)
{
    return t ? t->size : 0;
}

const char *sharc_transport_name(const sharc_transport *t)
{
    return t ? t->ops->name : "none";
}

const char *sharc_transport_last_error(const sharc_transport *t)
{
    return t ? t->ctx.error : "";
}

int sharc_transport_aborted(const sharc_transport *t)
{
    return t && t->broken;
}

const sharc__device_allocator *sharc__transport_device_allocator(const sharc_transport *t)
{
    return t->device.alloc ? &t->device : NULL;
}

static int check_usable(sharc_transport *t)
{
    if (t->broken)
        return sharc__set_error(&t->ctx, SHARC_ERR_UNSUPPORTED,
                                "%s transport was aborted after an earlier failure", t->ops->name);
    return 0;
}

int sharc__transport_bcast(sharc_transport *t, void *buf, size_t nbytes, int root,
                           sharc_device device)
{
    int rc = check_usable(t);
    if (rc < 0)
        return rc;
    if (root < 0 || root >= t->size)
        return sharc__set_error(&t->ctx, SHARC_ERR(EINVAL),
                                "broadcast root %d outside a group of %d", root, t->size);
    if (device == SHARC_DEVICE_CUDA && !t->device.alloc)
        return sharc__set_error(&t->ctx, SHARC_ERR_UNSUPPORTED,
                                "the %s transport cannot broadcast device memory", t->ops->name);
    if (nbytes == 0)
        return 0;
    return t->ops->bcast(t, buf, nbytes, root, device);
}

int sharc__transport_allreduce_max(sharc_transport *t, uint32_t *value)
{
    int rc = check_usable(t);
    if (rc < 0 || t->size == 1 || !t->ops->allreduce_max)
        return rc;
    return t->ops->allreduce_max(t, value);
}

int sharc__transport_group_begin(sharc_transport *t)
{
    int rc = check_usable(t);
    if (rc < 0 || !t->ops->group_begin)
        return rc;
    return t->ops->group_begin(t);
}

int sharc__transport_group_end(sharc_transport *t)
{
    /* Broken inside the group (group_begin checked before it): the text stays that of the
     * failure, for the caller to report. */
    if (t->broken)
        return SHARC_ERR_UNSUPPORTED;
    if (!t->ops->group_end)
        return 0;
    return t->ops->group_end(t);
}

void sharc__transport_abort(sharc_transport *t)
{
    if (t->broken)
        return;
    t->broken = 1;
    if (t->ops->abort)
        t->ops->abort(t);
}

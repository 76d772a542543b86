#include "bcast/transport.h"

#include <errno.h>
#include <string.h>

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
    int rc = check_usable(t);
    if (rc < 0 || !t->ops->group_end)
        return rc;
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

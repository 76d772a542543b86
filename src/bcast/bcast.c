#include "bcast/bcast.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "batching/batch.h"
#include "batching/frame.h"
#include "bcast/handshake.h"

struct sharc__bcast {
    sharc__ctx ctx;
    sharc_transport *t;
    sharc__bcast_settings s;
    uint8_t *control;  ///< the control block, s.control_bytes
    uint8_t *send_buf; ///< packed payload for batches not laid out by a pool
    size_t send_cap;
    sharc__batch_pool *pool; ///< receive buffers (peers only)
    sharc_tensor tensors[SHARC__BATCH_MAX_TENSORS];
    uint64_t offsets[SHARC__BATCH_MAX_TENSORS];
    sharc__frame_header header;
    int ended; ///< 0 while running; then the result every later call returns
    uint64_t frames;
    uint64_t step; ///< the step whose collectives are under way, for messages
    uint64_t collectives;
    int remote_code;
    char remote_message[SHARC__FRAME_MESSAGE_MAX + 1];
    sharc_mesh mesh;       ///< names global ranks in messages (n_axes 0: none given)
    sharc__handshake mine; ///< what this rank must share with the group
    int handshaken;
    int pending_code; ///< a local failure carried by the next step (0: none)
    char pending[SHARC__FRAME_MESSAGE_MAX + 1];
};

void sharc__bcast_default_settings(sharc__bcast_settings *s)
{
    memset(s, 0, sizeof *s);
    s->control_bytes = 65536;
    s->max_frame_bytes = (uint64_t)4 << 30;
    s->max_tensors = SHARC__BATCH_MAX_TENSORS;
    s->max_held = 4;
    s->root = 0;
    s->source_rank = -1;
}

/* The protocol's own fields of the handshake, then the caller's. */
static void describe_self(sharc__bcast *bc, const sharc__handshake *extra)
{
    sharc__handshake *h = &bc->mine;
    sharc__handshake_add(h, "protocol version", "%d", SHARC__FRAME_VERSION);
    sharc__handshake_add(h, "broadcast group size", "%d", bc->t->size);
    sharc__handshake_add(h, "transport", "%s", bc->t->ops->name);
    sharc__handshake_add(h, "control_bytes", "%zu", bc->s.control_bytes);
    sharc__handshake_add(h, "max_frame_bytes", "%llu", (unsigned long long)bc->s.max_frame_bytes);
    sharc__handshake_add(h, "max_tensors", "%zu", bc->s.max_tensors);
    for (size_t i = 0; extra && i < extra->n; i++)
        sharc__handshake_add(h, extra->fields[i].name, "%s", extra->fields[i].value);
}

int sharc__bcast_open(sharc__bcast **out, sharc_transport *t, const sharc__bcast_settings *s)
{
    sharc__bcast_settings defaults;
    *out = NULL;
    if (!s) {
        sharc__bcast_default_settings(&defaults);
        s = &defaults;
    }
    if (s->control_bytes < SHARC__FRAME_MIN_CONTROL || s->control_bytes > ((size_t)1 << 30) ||
        s->control_bytes % SHARC__FRAME_ALIGN)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "invalid broadcast settings: control_bytes %zu is not a multiple of "
                           "%d from %d to 1 GiB",
                           s->control_bytes, SHARC__FRAME_ALIGN, SHARC__FRAME_MIN_CONTROL);
    if (s->max_frame_bytes < s->control_bytes)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "invalid broadcast settings: max_frame_bytes %llu is below "
                           "control_bytes %zu",
                           (unsigned long long)s->max_frame_bytes, s->control_bytes);
    if (s->max_tensors < 1 || s->max_tensors > SHARC__BATCH_MAX_TENSORS || s->max_held < 1 ||
        s->root < 0 || s->root >= t->size)
        return sharc__fail(&t->ctx, SHARC_ERR(EINVAL),
                           "invalid broadcast settings (1..%d tensors, not %zu; %zu held "
                           "batches; root %d of %d)",
                           SHARC__BATCH_MAX_TENSORS, s->max_tensors, s->max_held, s->root, t->size);
    sharc__bcast *bc = sharc__calloc(&t->ctx, 1, sizeof *bc);
    if (!bc)
        return SHARC_ERR(ENOMEM);
    bc->ctx = t->ctx;
    bc->ctx.error[0] = 0;
    bc->t = t;
    bc->s = *s;
    if (bc->s.source_rank < 0)
        bc->s.source_rank = s->root;
    if (s->mesh)
        bc->mesh = *s->mesh;
    describe_self(bc, s->handshake);
    bc->control = sharc__malloc_aligned(&bc->ctx, s->control_bytes, SHARC__FRAME_ALIGN);
    if (!bc->control)
        goto fail;
    memset(bc->control, 0, s->control_bytes);
    if (t->rank != s->root && sharc__batch_pool_create(&bc->pool, &bc->ctx, s->max_held,
                                                       sharc__transport_device_allocator(t)) < 0)
        goto fail;
    *out = bc;
    return 0;
fail:
    sharc__bcast_close(&bc);
    return sharc__fail(&t->ctx, SHARC_ERR(ENOMEM), "out of memory opening the broadcast");
}

void sharc__bcast_close(sharc__bcast **pbc)
{
    sharc__bcast *bc = pbc ? *pbc : NULL;
    if (!bc)
        return;
    *pbc = NULL;
    sharc__batch_pool_destroy(&bc->pool);
    sharc__free(&bc->ctx, bc->control);
    sharc__free(&bc->ctx, bc->send_buf);
    sharc__ctx ctx = bc->ctx;
    sharc__free(&ctx, bc);
}

int sharc__bcast_is_source(const sharc__bcast *bc)
{
    return bc->t->rank == bc->s.root;
}

const char *sharc__bcast_error(const sharc__bcast *bc)
{
    return bc->ctx.error;
}

const char *sharc__bcast_remote_message(const sharc__bcast *bc)
{
    return bc->remote_message;
}

int sharc__bcast_remote_code(const sharc__bcast *bc)
{
    return bc->remote_code;
}

uint64_t sharc__bcast_frames(const sharc__bcast *bc)
{
    return bc->frames;
}

uint64_t sharc__bcast_collectives(const sharc__bcast *bc)
{
    return bc->collectives;
}

/* A transport failure ends the stream: the group's collectives are no longer in step. */
static int transport_failed(sharc__bcast *bc, int rc)
{
    bc->ended = rc;
    return sharc__fail(&bc->ctx, rc, "step %llu: broadcast over %s failed: %s",
                       (unsigned long long)bc->step, bc->t->ops->name, bc->t->ctx.error);
}

static int end_with(sharc__bcast *bc, int code)
{
    bc->ended = code;
    return code;
}

/* Global rank of group rank `g`, for messages. */
static int global_rank(const sharc__bcast *bc, int g)
{
    return bc->mesh.n_axes > 0 ? sharc_mesh_group_member(&bc->mesh, g) : g;
}

static int check_running(sharc__bcast *bc, int want_source)
{
    if (sharc__bcast_is_source(bc) != want_source)
        return sharc__set_error(&bc->ctx, SHARC_ERR(EINVAL), "%s called on a %s rank",
                                want_source ? "send" : "recv",
                                want_source ? "receiving" : "source");
    if (bc->ended && !want_source)
        return bc->ended; /* the text of the final result is still in ctx.error */
    if (bc->ended)
        return sharc__set_error(&bc->ctx, SHARC_ERR(EINVAL), "the broadcast stream has ended");
    return 0;
}

static int bcast_control(sharc__bcast *bc)
{
    if (bc->t->size == 1)
        return 0;
    bc->collectives++;
    int rc = sharc__transport_bcast(bc->t, bc->control, bc->s.control_bytes, bc->s.root,
                                    SHARC_DEVICE_HOST);
    return rc < 0 ? transport_failed(bc, rc) : 0;
}

/* Bytes of the message round: an ERROR frame with the longest message. */
static size_t message_round_bytes(void)
{
    return (size_t)sharc__frame_align(SHARC__FRAME_HEADER_SIZE + SHARC__FRAME_MESSAGE_MAX);
}

/*
 * The status round, joined by every rank after every control block (and after the
 * handshake): an all-reduce of one word saying whether any rank has failed, locally, since
 * the control block was announced (`code` < 0 with `text`) or since the last step (a
 * pending failure). When one has, the highest such rank broadcasts its message in an ERROR
 * frame and every rank ends the stream at this step: each failing rank with its own code,
 * the others with SHARC_ERR_REMOTE (SHARC_ERR_SETTINGS for a handshake mismatch, on every
 * rank) and "rank R: <message>". No payload follows a failed round, so nobody waits.
 * @return 0 when every rank is fine
 */
static int status_round(sharc__bcast *bc, int code, const char *text)
{
    if (code == 0 && bc->pending_code) {
        code = bc->pending_code;
        text = bc->pending;
    }
    if (bc->t->size == 1)
        return code < 0 ? end_with(bc, sharc__set_error(&bc->ctx, code, "%s", text)) : 0;
    uint32_t word = code < 0 ? (uint32_t)bc->t->rank + 1 : 0;
    bc->collectives++;
    int rc = sharc__transport_allreduce_max(bc->t, &word);
    if (rc < 0)
        return transport_failed(bc, rc);
    if (word == 0)
        return 0;
    int failed = (int)word - 1;
    size_t n = message_round_bytes();
    if (failed == bc->t->rank)
        sharc__frame_encode_error(bc->control, n, bc->frames, code, text);
    bc->collectives++;
    rc = sharc__transport_bcast(bc->t, bc->control, n, failed, SHARC_DEVICE_HOST);
    if (rc < 0)
        return transport_failed(bc, rc);
    if (code < 0) /* this rank failed too: it reports its own failure */
        return end_with(bc, sharc__set_error(&bc->ctx, code, "%s", text));
    sharc__frame_header h;
    sharc__frame_limits limits = {0, bc->s.max_frame_bytes};
    rc = sharc__frame_decode(&bc->ctx, bc->control, n, &limits, &h, NULL, NULL);
    if (rc < 0 || h.kind != SHARC__FRAME_ERROR)
        return end_with(bc, sharc__fail(&bc->ctx, SHARC_ERR_FRAME,
                                        "rank %d failed, and its message is malformed",
                                        global_rank(bc, failed)));
    bc->remote_code = h.error_code;
    snprintf(bc->remote_message, sizeof bc->remote_message, "%s", h.message);
    if (h.error_code == SHARC_ERR_SETTINGS)
        return end_with(bc, sharc__set_error(&bc->ctx, SHARC_ERR_SETTINGS, "%s", h.message));
    return end_with(bc, sharc__set_error(&bc->ctx, SHARC_ERR_REMOTE, "rank %d: %s",
                                         global_rank(bc, failed), h.message));
}

/*
 * Before the first step: the source broadcasts its handshake, each peer compares it with
 * its own, and a status round fails every rank on a mismatch.
 */
static int handshake(sharc__bcast *bc)
{
    if (bc->handshaken)
        return 0;
    bc->handshaken = 1;
    if (bc->t->size == 1)
        return 0;
    int source = sharc__bcast_is_source(bc);
    if (source)
        sharc__handshake_encode(&bc->mine, bc->control);
    bc->collectives++;
    int rc = sharc__transport_bcast(bc->t, bc->control, SHARC__HANDSHAKE_BYTES, bc->s.root,
                                    SHARC_DEVICE_HOST);
    if (rc < 0)
        return transport_failed(bc, rc);
    char diff[SHARC__ERRLEN], why[SHARC__FRAME_MESSAGE_MAX + 1] = "";
    int code = 0;
    sharc__handshake theirs;
    if (!source &&
        sharc__handshake_decode(&bc->ctx, bc->control, SHARC__HANDSHAKE_BYTES, &theirs) < 0) {
        code = SHARC_ERR_FRAME;
        snprintf(why, sizeof why, "handshake from source rank %d: %.900s", bc->s.source_rank,
                 bc->ctx.error);
    } else if (!source &&
               sharc__handshake_compare(&theirs, &bc->mine, bc->s.source_rank,
                                        global_rank(bc, bc->t->rank), diff, sizeof diff)) {
        code = SHARC_ERR_SETTINGS;
        snprintf(why, sizeof why, "settings differ in the broadcast group: %.900s", diff);
    }
    return status_round(bc, code, why);
}

int sharc__bcast_start(sharc__bcast *bc)
{
    if (bc->ended)
        return bc->ended;
    return handshake(bc);
}

/* Source: send the pending local failure, if any, as this step's ERROR frame. */
static int send_pending(sharc__bcast *bc)
{
    if (!bc->pending_code)
        return 0;
    int code = bc->pending_code;
    bc->pending_code = 0;
    char text[sizeof bc->pending];
    snprintf(text, sizeof text, "%s", bc->pending);
    int rc = sharc__bcast_send_error(bc, code, text);
    return rc < 0 ? rc : sharc__set_error(&bc->ctx, code, "%s", text);
}

/* Source: start a step (handshake, pending failure). */
static int begin_step(sharc__bcast *bc)
{
    bc->step = bc->frames;
    int rc = check_running(bc, 1);
    if (rc == 0)
        rc = handshake(bc);
    if (rc == 0)
        rc = send_pending(bc);
    return rc;
}

int sharc__bcast_send_error(sharc__bcast *bc, int code, const char *message)
{
    int rc = check_running(bc, 1);
    if (rc == 0)
        rc = handshake(bc);
    if (rc < 0)
        return rc;
    if (code >= 0)
        code = SHARC_ERR_REMOTE;
    sharc__frame_encode_error(bc->control, bc->s.control_bytes, bc->frames, code, message);
    bc->frames++;
    rc = bcast_control(bc);
    if (rc < 0)
        return rc;
    /* Peers that failed too still end with the source's error, which came first. */
    bc->pending_code = 0;
    rc = status_round(bc, 0, "");
    if (rc < 0 && bc->ended != SHARC_ERR_REMOTE && bc->ended != SHARC_ERR_SETTINGS)
        return rc; /* a transport failure */
    bc->ended = code;
    sharc__set_error(&bc->ctx, code, "%s", message);
    return 0;
}

int sharc__bcast_send_stop(sharc__bcast *bc)
{
    int rc = begin_step(bc);
    if (rc < 0)
        return rc;
    sharc__frame_encode_stop(bc->control, bc->s.control_bytes, bc->frames);
    bc->frames++;
    rc = bcast_control(bc);
    if (rc == 0)
        rc = status_round(bc, 0, "");
    if (rc < 0)
        return rc;
    bc->ended = SHARC_END;
    return 0;
}

/*
 * Offsets of the host tensors when the batch's host tensors already sit in a pool block
 * at 256-aligned offsets inside its payload; 0 when they must be packed.
 */
static int zero_copy_layout(sharc__bcast *bc, const sharc_batch *b, uint8_t **base,
                            uint64_t *payload_bytes)
{
    if (!sharc__batch_payload(b, base, payload_bytes))
        return 0;
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        bc->offsets[i] = 0;
        if (t->device != SHARC_DEVICE_HOST || t->nbytes == 0)
            continue;
        const uint8_t *p = t->data;
        if (p < *base || p > *base + *payload_bytes)
            return 0;
        uint64_t off = (uint64_t)(p - *base);
        if (off % SHARC__FRAME_ALIGN || t->nbytes > *payload_bytes - off)
            return 0;
        bc->offsets[i] = off;
    }
    return 1;
}

/* Validate `b`, encode its control block and say where its host payload comes from. */
static int prepare_data(sharc__bcast *bc, const sharc_batch *b, const uint8_t **payload,
                        uint64_t *payload_bytes)
{
    size_t room = (bc->s.control_bytes - SHARC__FRAME_HEADER_SIZE) / SHARC__FRAME_DESC_SIZE;
    size_t max = bc->s.max_tensors < room ? bc->s.max_tensors : room;
    uint64_t device_bytes = 0;
    if (b->n_tensors > max)
        return sharc__set_error(&bc->ctx, SHARC_ERR_TOO_LARGE,
                                "frame for step %llu has %zu tensors, at most %zu fit",
                                (unsigned long long)b->step, b->n_tensors, max);
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        int rc = sharc__frame_check_tensor(&bc->ctx, t);
        if (rc < 0)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(b->tensors[j].name, t->name) == 0)
                return sharc__set_error(&bc->ctx, SHARC_ERR_FRAME,
                                        "tensor '%s' appears twice in the batch", t->name);
        if (t->device == SHARC_DEVICE_CUDA) {
            if (!sharc__transport_device_allocator(bc->t) && bc->t->size > 1)
                return sharc__set_error(
                    &bc->ctx, SHARC_ERR_UNSUPPORTED,
                    "tensor '%s' is in CUDA memory but the %s transport cannot carry device "
                    "tensors%s",
                    t->name, bc->t->ops->name,
                    strcmp(bc->t->ops->name, "mpi") == 0
                        ? " (give it this rank's CUDA device with sharc_transport_mpi_set_device)"
                        : "");
            if (bc->t->ops->device_in_place && bc->t->size > 1 &&
                t->device_ordinal != bc->t->device_ordinal)
                return sharc__set_error(
                    &bc->ctx, SHARC_ERR(EINVAL),
                    "tensor '%s' is on CUDA device %d, but the %s transport broadcasts device "
                    "tensors in place from its own device %d",
                    t->name, t->device_ordinal, bc->t->ops->name, bc->t->device_ordinal);
            device_bytes += t->nbytes;
        }
    }
    uint8_t *base = NULL;
    int zero_copy = zero_copy_layout(bc, b, &base, payload_bytes);
    if (!zero_copy && sharc__frame_layout(b->tensors, b->n_tensors, bc->offsets, payload_bytes) < 0)
        return sharc__set_error(&bc->ctx, SHARC_ERR_TOO_LARGE, "frame payload overflows");
    uint64_t total = bc->s.control_bytes + *payload_bytes;
    if (total < *payload_bytes || total + device_bytes < total ||
        total + device_bytes > bc->s.max_frame_bytes)
        return sharc__set_error(&bc->ctx, SHARC_ERR_TOO_LARGE,
                                "frame for step %llu is %llu bytes, over the cap of %llu bytes",
                                (unsigned long long)b->step,
                                (unsigned long long)(total + device_bytes),
                                (unsigned long long)bc->s.max_frame_bytes);
    if (bc->t->size == 1) {
        /* A group of one: checked like any frame (same errors everywhere), never sent. */
        *payload = NULL;
        return 0;
    }
    uint64_t inline_at = sharc__frame_align(sharc__frame_control_bytes(b->n_tensors));
    int fits = *payload_bytes && inline_at + *payload_bytes <= bc->s.control_bytes;
    sharc__frame_encode_data(bc->control, bc->s.control_bytes, b->step, b->epoch, b->tensors,
                             bc->offsets, b->n_tensors, *payload_bytes,
                             fits ? (uint32_t)inline_at : 0);
    uint8_t *dst = fits ? bc->control + inline_at : NULL;
    if (!fits && zero_copy) {
        *payload = base;
        return 0;
    }
    if (!fits && *payload_bytes > bc->send_cap) {
        uint8_t *p = sharc__malloc_aligned(&bc->ctx, (size_t)*payload_bytes, SHARC__FRAME_ALIGN);
        if (!p)
            return sharc__set_error(&bc->ctx, SHARC_ERR(ENOMEM),
                                    "out of memory for a frame of %llu bytes",
                                    (unsigned long long)*payload_bytes);
        sharc__free(&bc->ctx, bc->send_buf);
        bc->send_buf = p;
        bc->send_cap = (size_t)*payload_bytes;
    }
    if (!dst)
        dst = bc->send_buf;
    for (size_t i = 0; i < b->n_tensors; i++)
        if (b->tensors[i].device == SHARC_DEVICE_HOST && b->tensors[i].nbytes)
            memcpy(dst + bc->offsets[i], b->tensors[i].data, b->tensors[i].nbytes);
    *payload = fits ? NULL : bc->send_buf;
    return 0;
}

/*
 * Whether step 3 has a collective, decided from what the control block says (the host
 * payload's size, whether it travelled inline, and the descriptors), so that the source and
 * every peer decide alike: it carries the host payload unless that came inline, and every
 * device tensor with bytes. `host_bytes` is the host payload the collective carries.
 */
static int has_payload_round(uint64_t host_bytes, const sharc_tensor *tensors, size_t n)
{
    if (host_bytes)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (tensors[i].device == SHARC_DEVICE_CUDA && tensors[i].nbytes)
            return 1;
    return 0;
}

/* The third collective: host payload (unless inline) and device tensors, as one group. */
static int bcast_payload(sharc__bcast *bc, void *payload, uint64_t host_bytes,
                         sharc_tensor *tensors, size_t n)
{
    sharc_transport *t = bc->t;
    bc->collectives++;
    int rc = sharc__transport_group_begin(t);
    if (rc == 0 && host_bytes)
        rc = sharc__transport_bcast(t, payload, (size_t)host_bytes, bc->s.root, SHARC_DEVICE_HOST);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (tensors[i].device == SHARC_DEVICE_CUDA && tensors[i].nbytes)
            rc = sharc__transport_bcast(t, tensors[i].data, tensors[i].nbytes, bc->s.root,
                                        SHARC_DEVICE_CUDA);
    int end = sharc__transport_group_end(t);
    if (rc == 0)
        rc = end;
    return rc < 0 ? transport_failed(bc, rc) : 0;
}

int sharc__bcast_send(sharc__bcast *bc, const sharc_batch *b)
{
    int rc = begin_step(bc);
    if (rc < 0)
        return rc;
    const uint8_t *payload = NULL;
    uint64_t payload_bytes = 0;
    rc = prepare_data(bc, b, &payload, &payload_bytes);
    if (rc < 0) {
        /* Nothing has been broadcast for this step: tell the peers why instead. */
        char why[SHARC__ERRLEN];
        snprintf(why, sizeof why, "%s", bc->ctx.error);
        int sent = sharc__bcast_send_error(bc, rc, why);
        sharc__fail(&bc->ctx, rc, "%s", why);
        return sent < 0 ? sent : rc;
    }
    bc->frames++;
    rc = bcast_control(bc);
    if (rc == 0)
        rc = status_round(bc, 0, "");
    /* A payload that went inline (payload NULL) is not sent again. */
    uint64_t host_bytes = payload ? payload_bytes : 0;
    if (rc < 0 || bc->t->size == 1 || !has_payload_round(host_bytes, b->tensors, b->n_tensors))
        return rc;
    return bcast_payload(bc, (void *)payload, host_bytes, b->tensors, b->n_tensors);
}

int sharc__bcast_fail(sharc__bcast *bc, int code, const char *message)
{
    if (bc->ended)
        return bc->ended;
    if (code >= 0)
        code = SHARC_ERR(EINVAL);
    if (!bc->pending_code) {
        bc->pending_code = code;
        snprintf(bc->pending, sizeof bc->pending, "%s", message);
    }
    return 0;
}

int sharc__bcast_has_pending(const sharc__bcast *bc)
{
    return bc->pending_code != 0;
}

const char *sharc__bcast_pending_text(const sharc__bcast *bc)
{
    return bc->pending_code ? bc->pending : "";
}

/*
 * Peer: make `b` ready for the DATA frame just decoded. A failure is this rank's to report
 * in the status round, which then ends every rank before the payload collective.
 */
static int prepare_receive(sharc__bcast *bc, sharc_batch *b, char *why, size_t cap)
{
    const sharc__frame_header *h = &bc->header;
    /* Device tensors land on this rank's own device, the one its transport was opened with:
     * the source's ordinal (in the descriptors) names a device of another process, which
     * may not exist here or may belong to another rank. */
    for (size_t i = 0; i < h->n_tensors; i++)
        if (bc->tensors[i].device == SHARC_DEVICE_CUDA && bc->t->device_ordinal >= 0)
            bc->tensors[i].device_ordinal = bc->t->device_ordinal;
    int rc = sharc__batch_set_layout(b, bc->tensors, bc->offsets, h->n_tensors, h->payload_bytes);
    if (rc == 0)
        rc = sharc__batch_finish(b);
    if (rc < 0)
        snprintf(why, cap, "cannot receive step %llu: %s", (unsigned long long)h->step,
                 sharc__batch_pool_error(bc->pool));
    b->step = h->step;
    b->epoch = h->epoch;
    return rc;
}

static int receive_payload(sharc__bcast *bc, sharc_batch *b)
{
    const sharc__frame_header *h = &bc->header;
    uint8_t *block = NULL;
    uint64_t len = 0;
    sharc__batch_payload(b, &block, &len);
    uint64_t host_bytes = h->payload_bytes;
    if (h->inline_offset) {
        memcpy(block, bc->control + h->inline_offset, (size_t)h->payload_bytes);
        host_bytes = 0; /* the device tensors, if any, still come in step 3 */
    }
    if (!has_payload_round(host_bytes, b->tensors, b->n_tensors))
        return 0;
    return bcast_payload(bc, block, host_bytes, b->tensors, b->n_tensors);
}

/* Peer: decode the control block and prepare for its payload; `why` says what failed. */
static int take_control(sharc__bcast *bc, sharc_batch *b, char *why, size_t cap)
{
    sharc__frame_limits limits = {bc->s.max_tensors, bc->s.max_frame_bytes};
    int rc = sharc__frame_decode(&bc->ctx, bc->control, bc->s.control_bytes, &limits, &bc->header,
                                 bc->tensors, bc->offsets);
    if (rc < 0) {
        snprintf(why, cap, "frame from source rank %d: %.900s", bc->s.source_rank, bc->ctx.error);
        return rc;
    }
    return bc->header.kind == SHARC__FRAME_DATA ? prepare_receive(bc, b, why, cap) : 0;
}

int sharc__bcast_recv(sharc__bcast *bc, sharc_batch **out)
{
    sharc_batch *b = NULL;
    *out = NULL;
    bc->step = bc->frames;
    int rc = check_running(bc, 0);
    if (rc == 0)
        rc = handshake(bc);
    if (rc != 0)
        return rc;
    /* Take a receive buffer before the collective, so back-pressure starts none. */
    rc = sharc__batch_pool_acquire(bc->pool, &b);
    if (rc < 0)
        return sharc__set_error(&bc->ctx, rc, "%s", sharc__batch_pool_error(bc->pool));
    rc = bcast_control(bc);
    if (rc < 0)
        goto fail;
    bc->frames++;
    char why[SHARC__FRAME_MESSAGE_MAX + 1] = "";
    int local = take_control(bc, b, why, sizeof why);
    if (local < 0) /* logged here, where it was found; the group learns it next */
        sharc__fail(&bc->ctx, local, "%s", why);
    int source_error = local == 0 && bc->header.kind == SHARC__FRAME_ERROR;
    rc = status_round(bc, source_error ? 0 : local, why);
    if (rc < 0 && !source_error)
        goto fail;
    switch (bc->header.kind) {
    case SHARC__FRAME_STOP:
        sharc__set_error(&bc->ctx, SHARC_END, "end of stream");
        rc = end_with(bc, SHARC_END);
        goto fail;
    case SHARC__FRAME_ERROR:
        /* The source's error came first, whatever a peer reported in the same round. */
        bc->remote_code = bc->header.error_code;
        snprintf(bc->remote_message, sizeof bc->remote_message, "%s", bc->header.message);
        sharc__set_error(&bc->ctx, SHARC_ERR_REMOTE, "source rank %d: %s", bc->s.source_rank,
                         bc->remote_message);
        rc = end_with(bc, SHARC_ERR_REMOTE);
        goto fail;
    default:
        break;
    }
    rc = receive_payload(bc, b);
    if (rc < 0)
        goto fail;
    *out = b;
    return 0;
fail:
    sharc_batch_release(b);
    return rc;
}

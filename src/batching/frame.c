#include "batching/frame.h"
#include "base/le.h"

#include <string.h>
#include <zlib.h>

#include "sharc/batch.h"

static const uint8_t frame_magic[4] = {'S', 'H', 'R', 'C'};

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

uint64_t sharc__frame_align(uint64_t n)
{
    if (n > UINT64_MAX - (SHARC__FRAME_ALIGN - 1))
        return 0;
    return (n + SHARC__FRAME_ALIGN - 1) & ~(uint64_t)(SHARC__FRAME_ALIGN - 1);
}

size_t sharc__frame_control_bytes(size_t n_tensors)
{
    return SHARC__FRAME_HEADER_SIZE + n_tensors * SHARC__FRAME_DESC_SIZE;
}

/* CRC-32 of the header's first 60 bytes and the `extra` bytes that follow the header. */
static uint32_t header_crc(const uint8_t *buf, size_t extra)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, buf, SHARC__FRAME_HEADER_SIZE - 4);
    /* zlib takes uInt lengths; extra is bounded by the control block size. */
    crc = crc32(crc, buf + SHARC__FRAME_HEADER_SIZE, (uInt)extra);
    return (uint32_t)crc;
}

static void put_header(uint8_t *buf, sharc__frame_kind kind, uint64_t step, uint64_t epoch,
                       uint32_t n_tensors, uint32_t inline_offset, uint64_t payload_bytes,
                       int error_code, uint32_t message_len)
{
    memset(buf, 0, SHARC__FRAME_HEADER_SIZE);
    memcpy(buf, frame_magic, 4);
    put16(buf + 4, SHARC__FRAME_VERSION);
    put16(buf + 6, (uint16_t)kind);
    sharc__store_le64(buf + 8, step);
    sharc__store_le64(buf + 16, epoch);
    sharc__store_le32(buf + 24, n_tensors);
    sharc__store_le32(buf + 28, inline_offset);
    sharc__store_le64(buf + 32, payload_bytes);
    sharc__store_le32(buf + 40, (uint32_t)error_code);
    sharc__store_le32(buf + 44, message_len);
    sharc__store_le32(buf + 48, SHARC__FRAME_DESC_SIZE);
    size_t extra = (size_t)n_tensors * SHARC__FRAME_DESC_SIZE + message_len;
    sharc__store_le32(buf + 60, header_crc(buf, extra));
}

/* Shared by the sender's check and the receiver's decoder. */
static int check_shape(sharc__ctx *ctx, const char *name, int dtype, int ndim, const int64_t *shape,
                       uint64_t nbytes)
{
    size_t elem = sharc_dtype_size((sharc_dtype)dtype);
    if (elem == 0)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': unknown dtype %d", name, dtype);
    if (ndim < 0 || ndim > SHARC_TENSOR_MAX_DIMS)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': %d dimensions (at most %d)",
                                name, ndim, SHARC_TENSOR_MAX_DIMS);
    uint64_t total = elem;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': negative extent %lld", name,
                                    (long long)shape[d]);
        uint64_t e = (uint64_t)shape[d];
        if (e != 0 && total > UINT64_MAX / e)
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': shape overflows", name);
        total *= e;
    }
    if (total != nbytes)
        return sharc__set_error(ctx, SHARC_ERR_FRAME,
                                "tensor '%s': %llu bytes do not match its shape (%llu bytes)", name,
                                (unsigned long long)nbytes, (unsigned long long)total);
    return 0;
}

int sharc__frame_check_tensor(sharc__ctx *ctx, const sharc_tensor *t)
{
    size_t len = strnlen(t->name, SHARC_TENSOR_NAME_MAX);
    if (len == 0 || len == SHARC_TENSOR_NAME_MAX)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor name is empty or too long");
    if (t->device != SHARC_DEVICE_HOST && t->device != SHARC_DEVICE_CUDA)
        return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED, "tensor '%s': unknown device %d",
                                t->name, (int)t->device);
    if (t->device_ordinal < 0 || (t->device == SHARC_DEVICE_HOST && t->device_ordinal != 0))
        return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED, "tensor '%s': bad device ordinal %d",
                                t->name, t->device_ordinal);
    if (t->nbytes && !t->data)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s' has no data", t->name);
    return check_shape(ctx, t->name, (int)t->dtype, t->ndim, t->shape, t->nbytes);
}

int sharc__frame_layout(const sharc_tensor *t, size_t n, uint64_t *offsets, uint64_t *payload_bytes)
{
    uint64_t end = 0;
    for (size_t i = 0; i < n; i++) {
        offsets[i] = 0;
        if (t[i].device != SHARC_DEVICE_HOST)
            continue;
        uint64_t at = sharc__frame_align(end);
        if ((end && !at) || t[i].nbytes > UINT64_MAX - at)
            return SHARC_ERR_TOO_LARGE;
        offsets[i] = at;
        end = at + t[i].nbytes;
    }
    *payload_bytes = end;
    return 0;
}

int sharc__frame_encode_data(uint8_t *buf, size_t cap, uint64_t step, uint64_t epoch,
                             const sharc_tensor *t, const uint64_t *offsets, size_t n,
                             uint64_t payload_bytes, uint32_t inline_offset)
{
    if (n > UINT32_MAX / SHARC__FRAME_DESC_SIZE || sharc__frame_control_bytes(n) > cap)
        return SHARC_ERR_TOO_LARGE;
    for (size_t i = 0; i < n; i++) {
        uint8_t *d = buf + SHARC__FRAME_HEADER_SIZE + i * SHARC__FRAME_DESC_SIZE;
        memset(d, 0, SHARC__FRAME_DESC_SIZE);
        memcpy(d, t[i].name, strnlen(t[i].name, SHARC_TENSOR_NAME_MAX - 1));
        d[32] = (uint8_t)t[i].dtype;
        d[33] = (uint8_t)t[i].device;
        d[34] = (uint8_t)t[i].ndim;
        sharc__store_le32(d + 36, (uint32_t)t[i].device_ordinal);
        for (int k = 0; k < t[i].ndim && k < SHARC_TENSOR_MAX_DIMS; k++)
            sharc__store_le64(d + 40 + 8 * k, (uint64_t)t[i].shape[k]);
        sharc__store_le64(d + 72, offsets[i]);
        sharc__store_le64(d + 80, t[i].nbytes);
    }
    put_header(buf, SHARC__FRAME_DATA, step, epoch, (uint32_t)n, inline_offset, payload_bytes, 0,
               0);
    return 0;
}

void sharc__frame_encode_stop(uint8_t *buf, size_t cap, uint64_t step)
{
    (void)cap;
    put_header(buf, SHARC__FRAME_STOP, step, 0, 0, 0, 0, 0, 0);
}

void sharc__frame_encode_error(uint8_t *buf, size_t cap, uint64_t step, int code,
                               const char *message)
{
    (void)cap;
    size_t len = message ? strnlen(message, SHARC__FRAME_MESSAGE_MAX) : 0;
    memcpy(buf + SHARC__FRAME_HEADER_SIZE, message ? message : "", len);
    put_header(buf, SHARC__FRAME_ERROR, step, 0, 0, 0, 0, code < 0 ? code : SHARC_ERR_REMOTE,
               (uint32_t)len);
}

static int decode_tensor(sharc__ctx *ctx, const uint8_t *d, uint32_t i, sharc_tensor *t,
                         uint64_t *offset)
{
    memset(t, 0, sizeof *t);
    size_t len = strnlen((const char *)d, SHARC_TENSOR_NAME_MAX);
    if (len == 0 || len == SHARC_TENSOR_NAME_MAX)
        return sharc__set_error(ctx, SHARC_ERR_FRAME,
                                "frame descriptor %u: name is empty or not NUL-terminated", i);
    memcpy(t->name, d, len);
    if (d[35] != 0 || sharc__load_le64(d + 88) != 0)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "frame descriptor %u: reserved bytes set", i);
    t->dtype = (sharc_dtype)d[32];
    t->device = (sharc_device)d[33];
    t->ndim = d[34];
    t->device_ordinal = (int32_t)sharc__load_le32(d + 36);
    if (t->device != SHARC_DEVICE_HOST && t->device != SHARC_DEVICE_CUDA)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': unknown device %d", t->name,
                                d[33]);
    if (t->device_ordinal < 0 || (t->device == SHARC_DEVICE_HOST && t->device_ordinal != 0))
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': bad device ordinal %d", t->name,
                                t->device_ordinal);
    if (t->ndim > SHARC_TENSOR_MAX_DIMS)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': %d dimensions (at most %d)",
                                t->name, t->ndim, SHARC_TENSOR_MAX_DIMS);
    for (int k = 0; k < SHARC_TENSOR_MAX_DIMS; k++) {
        uint64_t e = sharc__load_le64(d + 40 + 8 * k);
        if (k >= t->ndim && e != 0)
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': extent past ndim", t->name);
        if (e > INT64_MAX)
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s': negative extent", t->name);
        t->shape[k] = (int64_t)e;
    }
    uint64_t nbytes = sharc__load_le64(d + 80);
    *offset = sharc__load_le64(d + 72);
    int rc = check_shape(ctx, t->name, d[32], t->ndim, t->shape, nbytes);
    if (rc < 0)
        return rc;
    if (nbytes > SIZE_MAX)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s' is too large", t->name);
    t->nbytes = (size_t)nbytes;
    return 0;
}

/* Bounds of the descriptors and the message, checked before the CRC is computed over them. */
static int decode_counts(sharc__ctx *ctx, const uint8_t *buf, size_t len,
                         const sharc__frame_limits *limits, sharc__frame_header *h,
                         uint32_t *message_len)
{
    if (len < SHARC__FRAME_HEADER_SIZE)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "frame truncated: %zu bytes", len);
    if (memcmp(buf, frame_magic, 4) != 0)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "bad frame magic %02x%02x%02x%02x", buf[0],
                                buf[1], buf[2], buf[3]);
    if (get16(buf + 4) != SHARC__FRAME_VERSION)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "unsupported frame version %u (want %d)",
                                get16(buf + 4), SHARC__FRAME_VERSION);
    if (sharc__load_le32(buf + 48) != SHARC__FRAME_DESC_SIZE || sharc__load_le32(buf + 52) ||
        sharc__load_le32(buf + 56))
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "bad frame descriptor size or reserved");
    h->n_tensors = sharc__load_le32(buf + 24);
    *message_len = sharc__load_le32(buf + 44);
    if (h->n_tensors > limits->max_tensors)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "frame has %u tensors (at most %zu)",
                                h->n_tensors, limits->max_tensors);
    if (*message_len > SHARC__FRAME_MESSAGE_MAX)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "frame message of %u bytes (at most %d)",
                                *message_len, SHARC__FRAME_MESSAGE_MAX);
    if (sharc__frame_control_bytes(h->n_tensors) + *message_len > len)
        return sharc__set_error(ctx, SHARC_ERR_FRAME,
                                "frame truncated: %u descriptors do not fit in %zu bytes",
                                h->n_tensors, len);
    uint32_t want = sharc__load_le32(buf + 60);
    uint32_t got = header_crc(buf, (size_t)h->n_tensors * SHARC__FRAME_DESC_SIZE + *message_len);
    if (want != got)
        return sharc__set_error(ctx, SHARC_ERR_FRAME,
                                "frame header checksum mismatch (%08x, computed %08x)", want, got);
    return 0;
}

static int decode_data(sharc__ctx *ctx, const uint8_t *buf, size_t len,
                       const sharc__frame_limits *limits, sharc__frame_header *h,
                       sharc_tensor *tensors, uint64_t *offsets)
{
    if (h->payload_bytes > limits->max_frame_bytes)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "frame payload of %llu bytes over the cap",
                                (unsigned long long)h->payload_bytes);
    size_t control = sharc__frame_control_bytes(h->n_tensors);
    if (h->inline_offset && (h->inline_offset % SHARC__FRAME_ALIGN || h->inline_offset < control ||
                             h->inline_offset > len || h->payload_bytes > len - h->inline_offset))
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "frame inline payload out of range");
    uint64_t device_bytes = 0;
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        const uint8_t *d = buf + SHARC__FRAME_HEADER_SIZE + (size_t)i * SHARC__FRAME_DESC_SIZE;
        int rc = decode_tensor(ctx, d, i, &tensors[i], &offsets[i]);
        if (rc < 0)
            return rc;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(tensors[j].name, tensors[i].name) == 0)
                return sharc__set_error(ctx, SHARC_ERR_FRAME, "tensor '%s' appears twice",
                                        tensors[i].name);
        if (tensors[i].device != SHARC_DEVICE_HOST) {
            if (offsets[i] != 0)
                return sharc__set_error(ctx, SHARC_ERR_FRAME,
                                        "device tensor '%s' has a payload offset", tensors[i].name);
            device_bytes += tensors[i].nbytes;
            if (device_bytes > limits->max_frame_bytes)
                return sharc__set_error(ctx, SHARC_ERR_FRAME, "frame device tensors over the cap");
            continue;
        }
        if (offsets[i] % SHARC__FRAME_ALIGN || offsets[i] > h->payload_bytes ||
            tensors[i].nbytes > h->payload_bytes - offsets[i])
            return sharc__set_error(ctx, SHARC_ERR_FRAME,
                                    "tensor '%s': bytes [%llu, +%zu) outside the payload of %llu",
                                    tensors[i].name, (unsigned long long)offsets[i],
                                    tensors[i].nbytes, (unsigned long long)h->payload_bytes);
    }
    if (device_bytes > limits->max_frame_bytes - h->payload_bytes)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "frame of %llu bytes over the cap",
                                (unsigned long long)(device_bytes + h->payload_bytes));
    return 0;
}

int sharc__frame_decode(sharc__ctx *ctx, const uint8_t *buf, size_t len,
                        const sharc__frame_limits *limits, sharc__frame_header *h,
                        sharc_tensor *tensors, uint64_t *offsets)
{
    uint32_t message_len = 0;
    memset(h, 0, sizeof *h - sizeof h->message);
    h->message[0] = 0;
    int rc = decode_counts(ctx, buf, len, limits, h, &message_len);
    if (rc < 0)
        return rc;
    uint16_t kind = get16(buf + 6);
    h->step = sharc__load_le64(buf + 8);
    h->epoch = sharc__load_le64(buf + 16);
    h->inline_offset = sharc__load_le32(buf + 28);
    h->payload_bytes = sharc__load_le64(buf + 32);
    h->error_code = (int32_t)sharc__load_le32(buf + 40);
    switch (kind) {
    case SHARC__FRAME_DATA:
        h->kind = SHARC__FRAME_DATA;
        if (message_len || h->error_code)
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "DATA frame carries an error");
        return decode_data(ctx, buf, len, limits, h, tensors, offsets);
    case SHARC__FRAME_STOP:
    case SHARC__FRAME_ERROR:
        h->kind = (sharc__frame_kind)kind;
        if (h->n_tensors || h->payload_bytes || h->inline_offset)
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "%s frame carries tensors",
                                    kind == SHARC__FRAME_STOP ? "STOP" : "ERROR");
        if (kind == SHARC__FRAME_STOP && (message_len || h->error_code))
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "STOP frame carries an error");
        if (kind == SHARC__FRAME_ERROR && h->error_code >= 0)
            return sharc__set_error(ctx, SHARC_ERR_FRAME, "ERROR frame with code %d",
                                    h->error_code);
        memcpy(h->message, buf + SHARC__FRAME_HEADER_SIZE, message_len);
        h->message[message_len] = 0;
        return 0;
    default:
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "unknown frame kind %u", kind);
    }
}

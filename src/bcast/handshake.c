#include "bcast/handshake.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "base/le.h"

#define HANDSHAKE_VERSION 1
#define HEAD_BYTES        8
#define FIELD_BYTES       (SHARC__HANDSHAKE_NAME_MAX + SHARC__HANDSHAKE_VALUE_MAX)

static const uint8_t handshake_magic[4] = {'S', 'H', 'R', 'H'};

void sharc__handshake_add(sharc__handshake *h, const char *name, const char *fmt, ...)
{
    if (h->n >= SHARC__HANDSHAKE_MAX_FIELDS)
        return;
    sharc__handshake_field *f = &h->fields[h->n++];
    snprintf(f->name, sizeof f->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->value, sizeof f->value, fmt, ap);
    va_end(ap);
}

static uint32_t body_crc(const uint8_t *buf, size_t n)
{
    /* n is at most SHARC__HANDSHAKE_BYTES, so it fits zlib's uInt. */
    return (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)n);
}

void sharc__handshake_encode(const sharc__handshake *h, uint8_t *buf)
{
    memset(buf, 0, SHARC__HANDSHAKE_BYTES);
    memcpy(buf, handshake_magic, 4);
    buf[4] = HANDSHAKE_VERSION;
    buf[6] = (uint8_t)h->n;
    uint8_t *p = buf + HEAD_BYTES;
    for (size_t i = 0; i < h->n; i++, p += FIELD_BYTES) {
        memcpy(p, h->fields[i].name, SHARC__HANDSHAKE_NAME_MAX);
        memcpy(p + SHARC__HANDSHAKE_NAME_MAX, h->fields[i].value, SHARC__HANDSHAKE_VALUE_MAX);
    }
    sharc__store_le32(p, body_crc(buf, (size_t)(p - buf)));
}

static int text_ok(const uint8_t *p, size_t n)
{
    return memchr(p, 0, n) != NULL;
}

int sharc__handshake_decode(sharc__ctx *ctx, const uint8_t *buf, size_t len, sharc__handshake *h)
{
    memset(h, 0, sizeof *h);
    if (len < HEAD_BYTES + 4 || memcmp(buf, handshake_magic, 4) != 0)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "handshake: bad magic");
    unsigned version = (unsigned)(buf[4] | buf[5] << 8), n = (unsigned)(buf[6] | buf[7] << 8);
    if (version != HANDSHAKE_VERSION)
        return sharc__set_error(ctx, SHARC_ERR_FRAME,
                                "handshake: version %u, this build speaks version %d", version,
                                HANDSHAKE_VERSION);
    if (n > SHARC__HANDSHAKE_MAX_FIELDS || HEAD_BYTES + (size_t)n * FIELD_BYTES + 4 > len)
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "handshake: %u fields do not fit", n);
    const uint8_t *p = buf + HEAD_BYTES;
    size_t body = HEAD_BYTES + (size_t)n * FIELD_BYTES;
    if (sharc__load_le32(buf + body) != body_crc(buf, body))
        return sharc__set_error(ctx, SHARC_ERR_FRAME, "handshake: checksum mismatch");
    for (unsigned i = 0; i < n; i++, p += FIELD_BYTES) {
        if (!text_ok(p, SHARC__HANDSHAKE_NAME_MAX) ||
            !text_ok(p + SHARC__HANDSHAKE_NAME_MAX, SHARC__HANDSHAKE_VALUE_MAX))
            return sharc__set_error(ctx, SHARC_ERR_FRAME,
                                    "handshake: field %u is not NUL-terminated", i);
        memcpy(h->fields[i].name, p, SHARC__HANDSHAKE_NAME_MAX);
        memcpy(h->fields[i].value, p + SHARC__HANDSHAKE_NAME_MAX, SHARC__HANDSHAKE_VALUE_MAX);
    }
    h->n = n;
    return 0;
}

static const char *find(const sharc__handshake *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->fields[i].name, name) == 0)
            return h->fields[i].value;
    return NULL;
}

static int differs(const char *name, const char *theirs, const char *mine, int source_rank,
                   int my_rank, char *why, size_t cap)
{
    snprintf(why, cap, "%s is %s on source rank %d but %s on rank %d", name,
             theirs ? theirs : "(not sent)", source_rank, mine ? mine : "(unknown)", my_rank);
    return 1;
}

int sharc__handshake_compare(const sharc__handshake *source, const sharc__handshake *mine,
                             int source_rank, int my_rank, char *why, size_t cap)
{
    for (size_t i = 0; i < source->n; i++) {
        const sharc__handshake_field *f = &source->fields[i];
        const char *v = find(mine, f->name);
        if (!v || strcmp(v, f->value) != 0)
            return differs(f->name, f->value, v, source_rank, my_rank, why, cap);
    }
    for (size_t i = 0; i < mine->n; i++)
        if (!find(source, mine->fields[i].name))
            return differs(mine->fields[i].name, NULL, mine->fields[i].value, source_rank, my_rank,
                           why, cap);
    return 0;
}

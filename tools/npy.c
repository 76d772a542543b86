/*
 * NumPy .npy version 1.0 writer (see npy.h for the layout).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NPY_ORDER ">"
#else
#define NPY_ORDER "<"
#endif

/* numpy.save() leaves room for the first extent to grow to this many digits. */
#define GROWTH_AXIS_MAX_DIGITS 21

/* Magic (6 bytes), version (2), header length (uint16 LE). */
#define PREAMBLE_LEN 10

const char *npy_descr(sharc_dtype dtype)
{
    switch (dtype) {
    case SHARC_DTYPE_F32:
        return NPY_ORDER "f4";
    case SHARC_DTYPE_I32:
        return NPY_ORDER "i4";
    case SHARC_DTYPE_I64:
        return NPY_ORDER "i8";
    case SHARC_DTYPE_U8:
        return "|u1";
    case SHARC_DTYPE_F16:
        return NPY_ORDER "f2";
    case SHARC_DTYPE_F64:
        return NPY_ORDER "f8";
    default:
        return NULL;
    }
}

static int descr_ok(const char *descr)
{
    if (descr == NULL || descr[0] == '\0' || strlen(descr) > 32)
        return 0;
    for (const char *p = descr; *p; p++) {
        if (*p < 0x20 || *p > 0x7e || *p == '\'' || *p == '\\')
            return 0;
    }
    return 1;
}

/* Python's repr of the shape tuple: "()", "(5,)", "(2, 3)". */
static int shape_repr(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t len = 0;
    buf[len++] = '(';
    for (int i = 0; i < ndim; i++) {
        int n = snprintf(buf + len, cap - len, "%s%" PRId64, i ? ", " : "", shape[i]);
        if (n < 0 || (len += (size_t)n) >= cap)
            return -1;
    }
    int n = snprintf(buf + len, cap - len, ndim == 1 ? ",)" : ")");
    return n < 0 || len + (size_t)n >= cap ? -1 : 0;
}

size_t npy_header(char *buf, size_t cap, const char *descr, int ndim, const int64_t *shape)
{
    if (!descr_ok(descr) || ndim < 0 || ndim > NPY_MAX_DIMS || (ndim > 0 && shape == NULL))
        return 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return 0;
    }
    char tuple[NPY_MAX_DIMS * 24 + 8];
    if (shape_repr(tuple, sizeof tuple, ndim, shape) < 0)
        return 0;
    char dict[sizeof tuple + 128];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, tuple);
    if (n < 0 || (size_t)n >= sizeof dict)
        return 0;
    size_t dict_len = (size_t)n;
    if (ndim > 0) {
        char first[24];
        snprintf(first, sizeof first, "%" PRId64, shape[0]);
        size_t digits = strlen(first);
        dict_len += digits < GROWTH_AXIS_MAX_DIGITS ? GROWTH_AXIS_MAX_DIGITS - digits : 0;
    }
    /* Spaces, then '\n', up to the next multiple of NPY_ALIGN (numpy always pads at least
     * one byte: the newline). */
    size_t total = PREAMBLE_LEN + dict_len + 1;
    total = (total + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    size_t header_len = total - PREAMBLE_LEN;
    if (total > cap || header_len > UINT16_MAX)
        return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(header_len & 0xff);
    buf[9] = (char)(header_len >> 8);
    memcpy(buf + PREAMBLE_LEN, dict, (size_t)n);
    memset(buf + PREAMBLE_LEN + n, ' ', total - PREAMBLE_LEN - (size_t)n - 1);
    buf[total - 1] = '\n';
    return total;
}

int npy_write(FILE *f, const char *descr, int ndim, const int64_t *shape, const void *data,
              size_t nbytes)
{
    char header[NPY_ALIGN * 4];
    size_t hlen = npy_header(header, sizeof header, descr, ndim, shape);
    if (hlen == 0)
        return -EINVAL;
    errno = 0;
    if (fwrite(header, 1, hlen, f) != hlen || (nbytes > 0 && fwrite(data, 1, nbytes, f) != nbytes))
        return errno ? -errno : -EIO;
    return 0;
}

int npy_write_tensor(FILE *f, const sharc_tensor *t)
{
    const char *descr = npy_descr(t->dtype);
    if (descr == NULL || (t->device != SHARC_DEVICE_HOST && t->device != SHARC_DEVICE_CUDA))
        return -ENOTSUP;
    if (t->ndim < 0 || t->ndim > SHARC_TENSOR_MAX_DIMS)
        return -EINVAL;
    uint64_t elems = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return -EINVAL;
        if (__builtin_mul_overflow(elems, (uint64_t)t->shape[i], &elems))
            return -EINVAL;
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(elems, (uint64_t)sharc_dtype_size(t->dtype), &bytes) ||
        bytes != t->nbytes)
        return -EINVAL;
    if (t->device == SHARC_DEVICE_HOST)
        return npy_write(f, descr, t->ndim, t->shape, t->data, t->nbytes);
    /* A device tensor is written from its copy on the host. */
    void *copy = malloc(t->nbytes ? t->nbytes : 1);
    if (copy == NULL)
        return -ENOMEM;
    int rc = sharc_tensor_copy_to_host(t, copy, t->nbytes);
    if (rc == 0)
        rc = npy_write(f, descr, t->ndim, t->shape, copy, t->nbytes);
    else
        rc = rc == SHARC_ERR_UNSUPPORTED ? -ENOTSUP : -EIO;
    free(copy);
    return rc;
}

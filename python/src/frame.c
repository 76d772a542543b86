/*
 * The frame codec, for sharc.torch: the module functions frame_data, frame_stop,
 * frame_error and frame_decode build and read a frame's control block with the library's
 * own codec (src/batching/frame.h); the tensors travel in the caller's collectives.
 */
#include "sharcmodule.h"

#include <stdlib.h>
#include <string.h>

#include "batching/frame.h"

static int get_i64(PyObject *seq, Py_ssize_t i, long long *out)
{
    PyObject *v = PySequence_GetItem(seq, i);
    if (!v)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* frame_data(cap, step, epoch, tensors, inline_payload) -> (control, offsets,
 * payload_bytes, inline_offset). `tensors` lists (name, dtype, device, ordinal, shape,
 * nbytes); the control block (header and descriptors, `inline_offset` bytes when the
 * payload goes inline, else the used bytes) is returned for the caller to place first in
 * its control tensor, the payload at inline_offset or in a second collective. */
PyObject *sharc__py_frame_data(PyObject *mod, PyObject *args)
{
    Py_ssize_t cap;
    unsigned long long step, epoch;
    PyObject *list;
    int want_inline;
    if (!PyArg_ParseTuple(args, "nKKOp:frame_data", &cap, &step, &epoch, &list, &want_inline))
        return NULL;
    if (cap < SHARC__FRAME_MIN_CONTROL) {
        PyErr_SetString(PyExc_ValueError, "control block too small");
        return NULL;
    }
    Py_ssize_t n = PySequence_Size(list);
    if (n < 0)
        return NULL;
    size_t max_n = ((size_t)cap - SHARC__FRAME_HEADER_SIZE) / SHARC__FRAME_DESC_SIZE;
    if ((size_t)n > max_n)
        return sharc__py_raise(SHARC_ERR_TOO_LARGE, "batch has more tensors than a frame holds");
    sharc_tensor *t = calloc((size_t)n + 1, sizeof *t);
    uint64_t *off = calloc((size_t)n + 1, sizeof *off);
    uint8_t *buf = calloc(1, (size_t)cap);
    PyObject *ret = NULL;
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    if (!t || !off || !buf) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PySequence_GetItem(list, i);
        if (!d)
            goto done;
        PyObject *name = PySequence_GetItem(d, 0), *shape = PySequence_GetItem(d, 4);
        long long dtype = 0, device = 0, ordinal = 0, nbytes = 0;
        int ok = name && shape && PyUnicode_Check(name) && get_i64(d, 1, &dtype) == 0 &&
                 get_i64(d, 2, &device) == 0 && get_i64(d, 3, &ordinal) == 0 &&
                 get_i64(d, 5, &nbytes) == 0;
        PyObject *nb = ok ? PyUnicode_AsUTF8String(name) : NULL;
        if (nb && sharc__py_no_nul(PyBytes_AsString(nb), PyBytes_Size(nb),
                                   "frame_data: a tensor name") < 0)
            Py_CLEAR(nb);
        Py_ssize_t ndim = ok && nb ? PySequence_Size(shape) : -1;
        if (nb && ndim >= 0) {
            snprintf(t[i].name, sizeof t[i].name, "%s", PyBytes_AsString(nb));
            t[i].dtype = (sharc_dtype)dtype;
            t[i].device = (sharc_device)device;
            t[i].device_ordinal = (int)ordinal;
            t[i].ndim = ndim > SHARC_TENSOR_MAX_DIMS ? SHARC_TENSOR_MAX_DIMS + 1 : (int)ndim;
            for (Py_ssize_t k = 0; k < ndim && k < SHARC_TENSOR_MAX_DIMS; k++) {
                long long e;
                if (get_i64(shape, k, &e) < 0)
                    ok = 0;
                t[i].shape[k] = e;
            }
            t[i].nbytes = (size_t)nbytes;
            /* Descriptors only: the frame check wants data behind a non-empty tensor. */
            t[i].data = nbytes ? (void *)buf : NULL;
        }
        Py_XDECREF(nb);
        Py_XDECREF(name);
        Py_XDECREF(shape);
        Py_DECREF(d);
        if (!ok || !nb || ndim < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "frame_data: bad tensor description");
            goto done;
        }
        if (t[i].ndim > SHARC_TENSOR_MAX_DIMS) {
            sharc__py_raise(SHARC_ERR_UNSUPPORTED, "tensor has more than 4 dimensions");
            goto done;
        }
        int rc = sharc__frame_check_tensor(&ctx, &t[i]);
        if (rc < 0) {
            sharc__py_raise(rc, ctx.error);
            goto done;
        }
    }
    uint64_t payload = 0;
    if (sharc__frame_layout(t, (size_t)n, off, &payload) < 0) {
        sharc__py_raise(SHARC_ERR_TOO_LARGE, "batch too large for a frame");
        goto done;
    }
    size_t control = sharc__frame_control_bytes((size_t)n);
    uint64_t inline_at = sharc__frame_align(control);
    uint32_t inline_offset = 0;
    if (want_inline && inline_at <= (uint64_t)cap && payload <= (uint64_t)cap - inline_at)
        inline_offset = (uint32_t)inline_at;
    if (sharc__frame_encode_data(buf, (size_t)cap, step, epoch, t, off, (size_t)n, payload,
                                 inline_offset) < 0) {
        sharc__py_raise(SHARC_ERR_TOO_LARGE, "batch descriptors do not fit the control block");
        goto done;
    }
    PyObject *offs = PyList_New(n);
    for (Py_ssize_t i = 0; offs && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(off[i]);
        if (!v || PyList_SetItem(offs, i, v) < 0) {
            Py_CLEAR(offs);
        }
    }
    if (!offs)
        goto done;
    size_t used = inline_offset ? inline_offset : control;
    ret = Py_BuildValue("(y#NKI)", (const char *)buf, (Py_ssize_t)used, offs,
                        (unsigned long long)payload, (unsigned)inline_offset);
done:
    free(t);
    free(off);
    free(buf);
    return ret;
}

PyObject *sharc__py_frame_stop(PyObject *mod, PyObject *args)
{
    unsigned long long step;
    if (!PyArg_ParseTuple(args, "K:frame_stop", &step))
        return NULL;
    uint8_t buf[SHARC__FRAME_HEADER_SIZE];
    sharc__frame_encode_stop(buf, sizeof buf, step);
    return PyBytes_FromStringAndSize((const char *)buf, sizeof buf);
}

PyObject *sharc__py_frame_error(PyObject *mod, PyObject *args)
{
    unsigned long long step;
    int code;
    PyObject *msg;
    if (!PyArg_ParseTuple(args, "KiU:frame_error", &step, &code, &msg))
        return NULL;
    PyObject *b = PyUnicode_AsEncodedString(msg, "utf-8", "replace");
    if (!b)
        return NULL;
    uint8_t buf[SHARC__FRAME_HEADER_SIZE + SHARC__FRAME_MESSAGE_MAX];
    const char *s = PyBytes_AsString(b);
    /* Cut a long message at a character boundary, so that the peer decodes it whole. */
    char text[SHARC__FRAME_MESSAGE_MAX + 1];
    size_t len = (size_t)PyBytes_Size(b);
    if (len > SHARC__FRAME_MESSAGE_MAX) {
        len = SHARC__FRAME_MESSAGE_MAX;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;
    }
    /* A NUL would end the message early: an error being reported is not refused for one,
     * it is shown as '?' (as the "replace" encoding shows what it cannot encode). */
    for (size_t i = 0; i < len; i++)
        text[i] = s[i] ? s[i] : '?';
    text[len] = 0;
    Py_DECREF(b);
    sharc__frame_encode_error(buf, sizeof buf, step, code, text);
    return PyBytes_FromStringAndSize((const char *)buf,
                                     (Py_ssize_t)(SHARC__FRAME_HEADER_SIZE + len));
}

/* frame_decode(control: bytes, max_frame_bytes) -> (kind, step, epoch, inline_offset,
 * payload_bytes, error_code, message, [(name, dtype, device, ordinal, shape, offset,
 * nbytes)]); sharc.Error (SHARC_ERR_FRAME) naming the field for a malformed block. */
PyObject *sharc__py_frame_decode(PyObject *mod, PyObject *args)
{
    const char *buf;
    Py_ssize_t len;
    unsigned long long max_bytes;
    if (!PyArg_ParseTuple(args, "y#K:frame_decode", &buf, &len, &max_bytes))
        return NULL;
    size_t max_n = len > SHARC__FRAME_HEADER_SIZE
                       ? ((size_t)len - SHARC__FRAME_HEADER_SIZE) / SHARC__FRAME_DESC_SIZE
                       : 0;
    sharc_tensor *t = calloc(max_n + 1, sizeof *t);
    uint64_t *off = calloc(max_n + 1, sizeof *off);
    sharc__frame_header *h = calloc(1, sizeof *h);
    PyObject *ret = NULL, *list = NULL;
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    if (!t || !off || !h) {
        PyErr_NoMemory();
        goto done;
    }
    sharc__frame_limits limits = {max_n, max_bytes};
    int rc = sharc__frame_decode(&ctx, (const uint8_t *)buf, (size_t)len, &limits, h, t, off);
    if (rc < 0) {
        sharc__py_raise(rc, ctx.error);
        goto done;
    }
    size_t n = h->kind == SHARC__FRAME_DATA ? h->n_tensors : 0;
    list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *shape = sharc__py_shape_tuple(&t[i]);
        PyObject *v = shape ? Py_BuildValue("(siiiNKn)", t[i].name, (int)t[i].dtype,
                                            (int)t[i].device, t[i].device_ordinal, shape,
                                            (unsigned long long)off[i], (Py_ssize_t)t[i].nbytes)
                            : NULL;
        if (!v || PyList_SetItem(list, (Py_ssize_t)i, v) < 0) {
            Py_CLEAR(list);
        }
    }
    if (!list)
        goto done;
    ret = Py_BuildValue("(iKKIKisN)", (int)h->kind, (unsigned long long)h->step,
                        (unsigned long long)h->epoch, (unsigned)h->inline_offset,
                        (unsigned long long)h->payload_bytes, h->error_code, h->message, list);
    list = NULL;
done:
    Py_XDECREF(list);
    free(t);
    free(off);
    free(h);
    return ret;
}

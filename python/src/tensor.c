/*
 * sharc.Tensor and batches as Python objects: a batch becomes a dict of Tensor objects,
 * exported without a copy through DLPack and numpy's __array_interface__, and of lists of
 * str for its string columns. A holder counts what still points into the batch.
 */
#include "sharcmodule.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if SHARC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "dlpack.h"

/* ---------------------------------------------------------------------------------------
 * Batch holders: one per batch, counting the Python tensor objects and the DLPack exports
 * that still point into it. The count is atomic because a DLPack deleter may run on any
 * thread, with or without the GIL; the batch goes back to its pool when the count drops to
 * zero, which may be long after the reader is closed (the pool outlives the reader while
 * batches are held).
 * ------------------------------------------------------------------------------------- */

typedef struct holder {
    atomic_long refs;
    sharc_batch *batch;
    /** The CUDA stream a consumer named in __dlpack__(stream=...) for a device tensor of the
     *  batch (DLPack's numbering: 1 the legacy default stream, 2 the per-thread one), 0 for
     *  none; and the batch's device. */
    atomic_uintptr_t stream;
    int ordinal;
} holder;

static void holder_ref(holder *h)
{
    atomic_fetch_add(&h->refs, 1);
}

#if SHARC_HAVE_CUDA
/*
 * A device batch's memory goes back to its pool, to be written by the next upload or
 * broadcast, when its last tensor is freed; the consumer's kernels queued before that (the
 * model's step on torch's stream) may still be reading it. So a batch exported to a stream
 * is held back: an event recorded on that stream at the release marks when the memory is
 * free, and the batch is released once the event has completed (checked at every
 * next_batch; waited for when the pool has nothing else to lend).
 */
typedef struct pending {
    cudaEvent_t ev;
    sharc_batch *batch;
    struct pending *next;
} pending;

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static pending *pending_head;

static cudaStream_t dlpack_stream(uintptr_t s)
{
    return s == 1 ? cudaStreamLegacy : s == 2 ? cudaStreamPerThread : (cudaStream_t)s;
}

/* Hold `b` back until the work queued on stream `s` so far is done; 0 when that cannot be
 * arranged and the batch is to be released now (after the stream, when it could be
 * waited for). */
static int defer_release(sharc_batch *b, uintptr_t s, int ordinal)
{
    cudaStream_t stream = dlpack_stream(s);
    int prev = -1;
    pending *p = calloc(1, sizeof *p);
    int ok = p && cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(ordinal) == cudaSuccess;
    ok = ok && cudaEventCreateWithFlags(&p->ev, cudaEventDisableTiming) == cudaSuccess;
    if (ok && cudaEventRecord(p->ev, stream) != cudaSuccess) {
        cudaEventDestroy(p->ev);
        ok = 0;
    }
    if (!ok) {
        cudaGetLastError();
        cudaStreamSynchronize(stream); /* the safe order, at the cost of a wait */
        cudaGetLastError();
    }
    if (prev >= 0)
        cudaSetDevice(prev);
    if (!ok) {
        free(p);
        return 0;
    }
    p->batch = b;
    pthread_mutex_lock(&pending_lock);
    pending **tail = &pending_head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    pthread_mutex_unlock(&pending_lock);
    return 1;
}

int sharc__py_drain_releases(int wait)
{
    int left = 0;
    pthread_mutex_lock(&pending_lock);
    for (pending **pp = &pending_head; *pp;) {
        pending *p = *pp;
        cudaError_t e = wait ? cudaEventSynchronize(p->ev) : cudaEventQuery(p->ev);
        if (e == cudaErrorNotReady) {
            left++;
            pp = &p->next;
            continue;
        }
        if (e != cudaSuccess) /* a failed context: nothing runs on the memory any more */
            cudaGetLastError();
        *pp = p->next;
        cudaEventDestroy(p->ev);
        sharc_batch_release(p->batch);
        free(p);
    }
    pthread_mutex_unlock(&pending_lock);
    return left;
}
#else
int sharc__py_drain_releases(int wait)
{
    (void)wait;
    return 0;
}
#endif

int sharc__py_next_with_releases(int (*next)(void *, sharc_batch **), void *handle,
                                 sharc_batch **out)
{
    int left = sharc__py_drain_releases(0);
    int rc = next(handle, out);
    if (rc == SHARC_ERR_BACKPRESSURE && left > 0) {
        sharc__py_drain_releases(1);
        rc = next(handle, out);
    }
    return rc;
}

static void holder_unref(holder *h)
{
    if (atomic_fetch_sub(&h->refs, 1) == 1) {
#if SHARC_HAVE_CUDA
        uintptr_t s = atomic_load(&h->stream);
        if (s && defer_release(h->batch, s, h->ordinal)) {
            free(h);
            return;
        }
#endif
        sharc_batch_release(h->batch);
        free(h);
    }
}

/* ---------------------------------------------------------------------------------------
 * Tensor: one numeric tensor of a batch, exported through DLPack and __array_interface__.
 * ------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD holder *h;
    const sharc_tensor *t;
} TensorObject;

PyTypeObject *sharc__py_tensor_type;

static void Tensor_dealloc(PyObject *self)
{
    TensorObject *o = (TensorObject *)self;
    if (o->h)
        holder_unref(o->h);
    PyTypeObject *tp = Py_TYPE(self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static int dl_dtype(sharc_dtype d, DLDataType *out)
{
    out->lanes = 1;
    switch (d) {
    case SHARC_DTYPE_F32:
        *out = (DLDataType){kDLFloat, 32, 1};
        return 0;
    case SHARC_DTYPE_F64:
        *out = (DLDataType){kDLFloat, 64, 1};
        return 0;
    case SHARC_DTYPE_F16:
        *out = (DLDataType){kDLFloat, 16, 1};
        return 0;
    case SHARC_DTYPE_BF16:
        *out = (DLDataType){kDLBfloat, 16, 1};
        return 0;
    case SHARC_DTYPE_I32:
        *out = (DLDataType){kDLInt, 32, 1};
        return 0;
    case SHARC_DTYPE_I64:
        *out = (DLDataType){kDLInt, 64, 1};
        return 0;
    case SHARC_DTYPE_U8:
        *out = (DLDataType){kDLUInt, 8, 1};
        return 0;
    }
    return -1;
}

/* numpy's typestr for __array_interface__; NULL for bfloat16, which numpy has no type for. */
static const char *np_typestr(sharc_dtype d)
{
    switch (d) {
    case SHARC_DTYPE_F32:
        return "<f4";
    case SHARC_DTYPE_F64:
        return "<f8";
    case SHARC_DTYPE_F16:
        return "<f2";
    case SHARC_DTYPE_I32:
        return "<i4";
    case SHARC_DTYPE_I64:
        return "<i8";
    case SHARC_DTYPE_U8:
        return "|u1";
    default:
        return NULL;
    }
}

static const char *dtype_pyname(sharc_dtype d)
{
    switch (d) {
    case SHARC_DTYPE_F32:
        return "float32";
    case SHARC_DTYPE_F64:
        return "float64";
    case SHARC_DTYPE_F16:
        return "float16";
    case SHARC_DTYPE_BF16:
        return "bfloat16";
    case SHARC_DTYPE_I32:
        return "int32";
    case SHARC_DTYPE_I64:
        return "int64";
    case SHARC_DTYPE_U8:
        return "uint8";
    }
    return "unknown";
}

/* A zero-byte tensor may have no data pointer; DLPack consumers want a non-NULL one. */
static unsigned char empty_data[64] __attribute__((aligned(64)));

typedef struct {
    DLManagedTensor m;
    int64_t shape[SHARC_TENSOR_MAX_DIMS];
    holder *h;
} managed;

static void managed_deleter(DLManagedTensor *self)
{
    managed *m = (managed *)self->manager_ctx;
    holder_unref(m->h);
    free(m);
}

static void capsule_destructor(PyObject *cap)
{
    /* A capsule still named "dltensor" was never consumed: its tensor is ours to free. A
     * consumer renames it "used_dltensor" and calls the deleter itself. */
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter)
            m->deleter(m);
    }
}

static PyObject *Tensor_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream, &max_version,
                                     &dl_device, &copy))
        return NULL;
    TensorObject *o = (TensorObject *)self;
    const sharc_tensor *t = o->t;
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError, "sharc tensors are exported without a copy only");
        return NULL;
    }
    if (dl_device != Py_None) {
        /* Only the tensor's own device: moving it would be a copy. */
        int type = 0, id = 0;
        if (!PyArg_ParseTuple(dl_device, "ii:dl_device", &type, &id))
            return NULL;
        int own_type = t->device == SHARC_DEVICE_CUDA ? kDLCUDA : kDLCPU;
        int own_id = t->device == SHARC_DEVICE_CUDA ? t->device_ordinal : 0;
        if (type != own_type || id != own_id) {
            PyErr_Format(PyExc_BufferError,
                         "tensor '%s' is on DLPack device (%d, %d), not (%d, %d); sharc exports "
                         "without a copy only",
                         t->name, own_type, own_id, type, id);
            return NULL;
        }
    }
    if (t->device == SHARC_DEVICE_CUDA && stream != Py_None) {
        /* The consumer's stream: the batch is ready for it already (handed out complete),
         * and its memory is not reused before the work queued there is done. */
        long long s = PyLong_AsLongLong(stream);
        if (s == -1 && PyErr_Occurred())
            return NULL;
        if (s > 0)
            atomic_store(&o->h->stream, (uintptr_t)s);
        o->h->ordinal = t->device_ordinal;
    }
    managed *m = calloc(1, sizeof *m);
    if (!m)
        return PyErr_NoMemory();
    if (dl_dtype(t->dtype, &m->m.dl_tensor.dtype) < 0) {
        free(m);
        PyErr_Format(PyExc_BufferError, "tensor '%s': dtype %d has no DLPack type", t->name,
                     (int)t->dtype);
        return NULL;
    }
    for (int d = 0; d < t->ndim; d++)
        m->shape[d] = t->shape[d];
    m->m.dl_tensor.data = t->data ? t->data : (void *)empty_data;
    m->m.dl_tensor.device.device_type = t->device == SHARC_DEVICE_CUDA ? kDLCUDA : kDLCPU;
    m->m.dl_tensor.device.device_id = t->device == SHARC_DEVICE_CUDA ? t->device_ordinal : 0;
    m->m.dl_tensor.ndim = t->ndim;
    m->m.dl_tensor.shape = m->shape;
    m->m.dl_tensor.strides = NULL;
    m->m.dl_tensor.byte_offset = 0;
    m->m.manager_ctx = m;
    m->m.deleter = managed_deleter;
    m->h = o->h;
    holder_ref(o->h);
    PyObject *cap = PyCapsule_New(&m->m, "dltensor", capsule_destructor);
    if (!cap) {
        managed_deleter(&m->m);
        return NULL;
    }
    return cap;
}

static PyObject *Tensor_dlpack_device(PyObject *self, PyObject *unused)
{
    const sharc_tensor *t = ((TensorObject *)self)->t;
    if (t->device == SHARC_DEVICE_CUDA)
        return Py_BuildValue("(ii)", (int)kDLCUDA, t->device_ordinal);
    return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

PyObject *sharc__py_shape_tuple(const sharc_tensor *t)
{
    PyObject *shape = PyTuple_New(t->ndim);
    if (!shape)
        return NULL;
    for (int d = 0; d < t->ndim; d++) {
        PyObject *v = PyLong_FromLongLong(t->shape[d]);
        if (!v || PyTuple_SetItem(shape, d, v) < 0) {
            Py_DECREF(shape);
            return NULL;
        }
    }
    return shape;
}

static PyObject *Tensor_get_shape(PyObject *self, void *closure)
{
    return sharc__py_shape_tuple(((TensorObject *)self)->t);
}

static PyObject *Tensor_get_dtype(PyObject *self, void *closure)
{
    return PyUnicode_FromString(dtype_pyname(((TensorObject *)self)->t->dtype));
}

static PyObject *Tensor_get_name(PyObject *self, void *closure)
{
    return PyUnicode_FromString(((TensorObject *)self)->t->name);
}

static PyObject *Tensor_get_nbytes(PyObject *self, void *closure)
{
    return PyLong_FromSize_t(((TensorObject *)self)->t->nbytes);
}

static PyObject *Tensor_get_data_ptr(PyObject *self, void *closure)
{
    const sharc_tensor *t = ((TensorObject *)self)->t;
    return PyLong_FromVoidPtr(t->data ? t->data : (void *)empty_data);
}

/* numpy.asarray(tensor) without numpy being a dependency: the array keeps this object (and
 * so the batch) alive through its base. */
static PyObject *Tensor_get_array_interface(PyObject *self, void *closure)
{
    const sharc_tensor *t = ((TensorObject *)self)->t;
    const char *typestr = np_typestr(t->dtype);
    if (t->device != SHARC_DEVICE_HOST || !typestr) {
        PyErr_Format(PyExc_AttributeError,
                     "tensor '%s' (%s, %s) has no __array_interface__; use __dlpack__", t->name,
                     dtype_pyname(t->dtype), t->device == SHARC_DEVICE_HOST ? "host" : "cuda");
        return NULL;
    }
    PyObject *shape = sharc__py_shape_tuple(t);
    if (!shape)
        return NULL;
    void *data = t->data ? t->data : (void *)empty_data;
    PyObject *d = Py_BuildValue("{s:N,s:s,s:(NO),s:i}", "shape", shape, "typestr", typestr, "data",
                                PyLong_FromVoidPtr(data), Py_False, "version", 3);
    return d;
}

static PyObject *Tensor_repr(PyObject *self)
{
    const sharc_tensor *t = ((TensorObject *)self)->t;
    PyObject *shape = sharc__py_shape_tuple(t);
    if (!shape)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("sharc.Tensor(name='%s', dtype=%s, shape=%R, device=%s)",
                                       t->name, dtype_pyname(t->dtype), shape,
                                       t->device == SHARC_DEVICE_HOST ? "cpu" : "cuda");
    Py_DECREF(shape);
    return r;
}

static PyMethodDef Tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))Tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "Export the tensor as a DLPack capsule, without a copy."},
    {"__dlpack_device__", Tensor_dlpack_device, METH_NOARGS,
     "(device type, device id) as DLPack numbers them."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Tensor_getset[] = {
    {"shape", Tensor_get_shape, NULL, "extent per dimension", NULL},
    {"dtype", Tensor_get_dtype, NULL, "element type name (numpy's spelling)", NULL},
    {"name", Tensor_get_name, NULL, "the tensor's name in the batch", NULL},
    {"nbytes", Tensor_get_nbytes, NULL, "size in bytes", NULL},
    {"data_ptr", Tensor_get_data_ptr, NULL, "address of the first element", NULL},
    {"__array_interface__", Tensor_get_array_interface, NULL, "numpy's array interface", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Tensor_slots[] = {
    {Py_tp_dealloc, Tensor_dealloc},
    {Py_tp_methods, Tensor_methods},
    {Py_tp_getset, Tensor_getset},
    {Py_tp_repr, Tensor_repr},
    {Py_tp_doc, "A tensor of a sharc batch; the batch stays held while this object or any "
                "DLPack export of it lives."},
    {0, NULL},
};

PyType_Spec sharc__py_tensor_spec = {"sharc.Tensor", sizeof(TensorObject), 0, Py_TPFLAGS_DEFAULT,
                                     Tensor_slots};

/* ---------------------------------------------------------------------------------------
 * Batches as dicts: str lists for the string columns, Tensor objects for the rest.
 * ------------------------------------------------------------------------------------- */

/* True when a string column `<col>_offsets` has its `<col>_bytes` partner in the batch. */
static const sharc_tensor *string_bytes(const sharc_batch *b, const sharc_tensor *t)
{
    size_t len = strlen(t->name);
    static const char suffix[] = "_offsets";
    if (len <= sizeof suffix - 1 || strcmp(t->name + len - (sizeof suffix - 1), suffix) != 0 ||
        t->dtype != SHARC_DTYPE_I32 || t->ndim != 1 || t->device != SHARC_DEVICE_HOST)
        return NULL;
    char name[SHARC_TENSOR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%.*s_bytes", (int)(len - (sizeof suffix - 1)), t->name);
    const sharc_tensor *bytes = sharc_batch_tensor(b, name);
    if (!bytes || bytes->dtype != SHARC_DTYPE_U8 || bytes->device != SHARC_DEVICE_HOST)
        return NULL;
    return bytes;
}

static int is_string_bytes(const sharc_batch *b, const sharc_tensor *t)
{
    size_t len = strlen(t->name);
    static const char suffix[] = "_bytes";
    if (len <= sizeof suffix - 1 || strcmp(t->name + len - (sizeof suffix - 1), suffix) != 0)
        return 0;
    char name[SHARC_TENSOR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%.*s_offsets", (int)(len - (sizeof suffix - 1)), t->name);
    const sharc_tensor *off = sharc_batch_tensor(b, name);
    return off && string_bytes(b, off) == t;
}

static PyObject *string_column(const sharc_tensor *off, const sharc_tensor *bytes)
{
    int64_t n = off->shape[0] > 0 ? off->shape[0] - 1 : 0;
    const int32_t *o = off->data;
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        if (o[i] < 0 || o[i + 1] < o[i] || (size_t)o[i + 1] > bytes->nbytes) {
            Py_DECREF(list);
            return sharc__py_raise(SHARC_ERR_FRAME, "string column offsets out of range");
        }
        PyObject *s =
            PyUnicode_DecodeUTF8((const char *)bytes->data + o[i], o[i + 1] - o[i], "strict");
        if (!s || PyList_SetItem(list, (Py_ssize_t)i, s) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

/* The batch as a dict, holding it through its Tensor objects. */
static PyObject *batch_dict(sharc_batch *b)
{
    holder *h = malloc(sizeof *h);
    if (!h) {
        sharc_batch_release(b);
        return PyErr_NoMemory();
    }
    atomic_init(&h->refs, 1); /* this function's own, dropped at the end */
    atomic_init(&h->stream, 0);
    h->ordinal = 0;
    h->batch = b;
    PyObject *d = PyDict_New();
    if (!d)
        goto fail;
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        const sharc_tensor *bytes = string_bytes(b, t);
        PyObject *v;
        char key[SHARC_TENSOR_NAME_MAX];
        snprintf(key, sizeof key, "%s", t->name);
        if (bytes) {
            key[strlen(key) - (sizeof "_offsets" - 1)] = 0;
            v = string_column(t, bytes);
        } else if (is_string_bytes(b, t)) {
            continue;
        } else {
            TensorObject *o = PyObject_New(TensorObject, sharc__py_tensor_type);
            if (o) {
                o->h = h;
                o->t = t;
                holder_ref(h);
            }
            v = (PyObject *)o;
        }
        if (!v || PyDict_SetItemString(d, key, v) < 0) {
            Py_XDECREF(v);
            goto fail;
        }
        Py_DECREF(v);
    }
    holder_unref(h);
    return d;
fail:
    Py_XDECREF(d);
    holder_unref(h);
    return NULL;
}

PyObject *sharc__py_batch_result(int rc, sharc_batch *b, const char *message)
{
    if (rc == SHARC_END)
        Py_RETURN_NONE;
    if (rc != 0)
        return sharc__py_raise(rc, message);
    uint64_t step = b->step, epoch = b->epoch;
    PyObject *d = batch_dict(b);
    if (!d)
        return NULL;
    return Py_BuildValue("(NKK)", d, (unsigned long long)step, (unsigned long long)epoch);
}

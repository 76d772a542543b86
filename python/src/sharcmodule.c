/*
 * sharc._sharc: the C extension behind the Python package, written against the CPython
 * stable ABI (Py_LIMITED_API 3.9), so that one build imports on every CPython from 3.9 on.
 *
 * It holds the reader (keyword settings, batches with the GIL released, the state blob),
 * the DLPack export of batch tensors, the error classes, and the frame codec that
 * sharc.torch frames its broadcasts with. The extension links libsharc's objects statically
 * (sharc_internal): the wheel then carries no shared library to locate at import, and the
 * frame codec (src/batching/frame.h), which is not part of the public C API, is reachable
 * without widening that API for one binding.
 */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "batching/frame.h"
#include "config.h"
#include "dlpack.h"
#include "sharc/sharc.h"

/* ---------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------- */

static PyObject *Error, *DataError, *RemoteError;

/* Codes of problems with the data read: what a caller skips or reports per shard. */
static int is_data_code(int code)
{
    switch (code) {
    case SHARC_ERR_CORRUPT:
    case SHARC_ERR_FORMAT:
    case SHARC_ERR_MISMATCH:
    case SHARC_ERR_DECODE:
    case SHARC_ERR_AUDIO_MISMATCH:
    case SHARC_ERR_TOO_LARGE:
    case SHARC_ERR_JSON:
        return 1;
    default:
        return 0;
    }
}

/* Raise the sharc.Error subclass for `code` with `message`; returns NULL. */
static PyObject *raise_sharc(int code, const char *message)
{
    PyObject *cls = code == SHARC_ERR_REMOTE ? RemoteError : is_data_code(code) ? DataError : Error;
    if (!message || !*message)
        message = sharc_strerror(code);
    PyObject *exc = PyObject_CallFunction(cls, "s", message);
    if (!exc)
        return NULL;
    PyObject *c = PyLong_FromLong(code);
    PyObject *n = PyUnicode_FromString(sharc_err_name(code));
    PyObject *m = PyUnicode_FromString(message);
    if (c && n && m && PyObject_SetAttrString(exc, "code", c) == 0 &&
        PyObject_SetAttrString(exc, "code_name", n) == 0 &&
        PyObject_SetAttrString(exc, "message", m) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(c);
    Py_XDECREF(n);
    Py_XDECREF(m);
    Py_DECREF(exc);
    return NULL;
}

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
} holder;

static void holder_ref(holder *h)
{
    atomic_fetch_add(&h->refs, 1);
}

static void holder_unref(holder *h)
{
    if (atomic_fetch_sub(&h->refs, 1) == 1) {
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

static PyTypeObject *Tensor_Type;

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

static PyObject *shape_tuple(const sharc_tensor *t)
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
    return shape_tuple(((TensorObject *)self)->t);
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
    PyObject *shape = shape_tuple(t);
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
    PyObject *shape = shape_tuple(t);
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

static PyType_Spec Tensor_spec = {"sharc.Tensor", sizeof(TensorObject), 0, Py_TPFLAGS_DEFAULT,
                                  Tensor_slots};

/* ---------------------------------------------------------------------------------------
 * Reader settings from keywords: the CLI's option names with '_' for '-'.
 * ------------------------------------------------------------------------------------- */

enum kw_kind {
    KW_INT,
    KW_U32,
    KW_U64,
    KW_DOUBLE,
    KW_BOOL,
    KW_LAYOUT,
    KW_ON_ERROR,
    KW_FEATURES,
    KW_DEVICE,
    KW_BINS,
    KW_BBS,
    KW_PATH
};

typedef struct {
    const char *name;
    enum kw_kind kind;
    size_t offset;
    double min, max; /* inclusive range of numbers; KW_DOUBLE with min_open excludes min */
    int min_open;
} kw_def;

#define R(f)  offsetof(sharc_reader_settings, f)
#define SM(f) offsetof(sharc_reader_settings, sampler.f)
static const kw_def kw_defs[] = {
    {"layout", KW_LAYOUT, R(layout), 0, 0, 0},
    {"epochs", KW_U64, R(epochs), 0, 0, 0},
    {"seed", KW_U64, R(seed), 0, 0, 0},
    {"shuffle_shards", KW_BOOL, R(shuffle_shards), 0, 0, 0},
    {"dp_rank", KW_INT, R(dp_rank), 0, 1 << 20, 0},
    {"dp_size", KW_INT, R(dp_size), 1, 1 << 20, 0},
    {"on_error", KW_ON_ERROR, R(on_error), 0, 0, 0},
    {"sampling_rate", KW_INT, R(sampling_rate), 1, 1 << 24, 0},
    {"channel", KW_INT, R(channel), 0, 1 << 16, 0},
    {"threads", KW_INT, R(n_threads), 0, 4096, 0},
    {"prefetch", KW_INT, R(prefetch), 0, 1024, 0},
    {"max_held_batches", KW_INT, R(max_held_batches), 1, 1024, 0},
    {"read_ahead_bytes", KW_U64, R(read_ahead_bytes), 0, 0, 0},
    {"max_member_bytes", KW_U64, R(max_member_bytes), 1, 0, 0},
    {"max_duration", KW_DOUBLE, SM(max_duration), 0, 1e9, 1},
    {"max_cuts", KW_U32, SM(max_cuts), 1, UINT32_MAX, 0},
    {"quadratic_duration", KW_DOUBLE, SM(quadratic_duration), 0, 1e9, 1},
    {"num_buckets", KW_U32, SM(num_buckets), 1, 65536, 0},
    {"num_cuts_for_bins", KW_U32, SM(num_cuts_for_bins_estimate), 1, 1u << 24, 0},
    {"bins", KW_BINS, 0, 0, 1e9, 0},
    {"bucket_batch_size", KW_BBS, 0, 1, UINT32_MAX, 0},
    {"buffer_size", KW_U32, SM(buffer_size), 1, 1u << 24, 0},
    {"max_buffer_bytes", KW_U64, SM(max_buffer_bytes), 0, 0, 0},
    {"shuffle", KW_BOOL, SM(shuffle), 0, 0, 0},
    {"drop_last", KW_BOOL, SM(drop_last), 0, 0, 0},
    {"min_duration", KW_DOUBLE, SM(min_duration), 0, 1e9, 0},
    {"max_cut_duration", KW_DOUBLE, SM(max_cut_duration), 0, 1e9, 1},
    /* features (docs/features.md): the CLI's --features, --n-mels, --fbank-*; its
     * --no-keep-audio is keep_audio=False */
    {"features", KW_FEATURES, R(features), 0, 0, 0},
    {"n_mels", KW_INT, R(fbank_n_mels), 1, 256, 0},
    {"fbank_sample_rate", KW_INT, R(fbank_sample_rate), 1000, 384000, 0},
    {"fbank_window", KW_INT, R(fbank_window), 1, 65536, 0},
    {"fbank_hop", KW_INT, R(fbank_hop), 1, 65536, 0},
    {"fbank_n_fft", KW_INT, R(fbank_n_fft), 2, 65536, 0},
    {"fbank_pad_to", KW_INT, R(fbank_pad_to), 0, 4096, 0},
    {"fbank_preemph", KW_DOUBLE, R(fbank_preemph), 0, 0.999999, 0},
    {"fbank_dither", KW_DOUBLE, R(fbank_dither), 0, 1, 0},
    {"keep_audio", KW_BOOL, R(keep_audio), 0, 0, 0},
    {"retries", KW_U32, R(retries), 0, 1000, 0},
    {"timeout_ms", KW_U32, R(timeout_ms), 0, 86400000, 0},
    {"input_cfg", KW_PATH, R(input_cfg), 0, 0, 0},
    {"max_open_streams", KW_U32, R(max_open_streams), 0, UINT32_MAX, 0},
    {"mix_finite", KW_BOOL, R(mix_finite), 0, 0, 0},
    /* "cpu" or "cuda[:N]" (or a torch.device, by its str()): the CLI's --device */
    {"device", KW_DEVICE, R(device), 0, 0, 0},
};
#undef R
#undef SM

/* The messages a failed open logs (it has no handle to keep them), kept for the exception;
 * everything is passed on to the default logger too. */
typedef struct logcap {
    pthread_mutex_t lock;
    char last[1024];
    sharc_logger next;
} logcap;

static void logcap_cb(void *cookie, sharc_log_level level, const char *message)
{
    logcap *lc = cookie;
    if (level == SHARC_LOG_ERROR) {
        pthread_mutex_lock(&lc->lock);
        snprintf(lc->last, sizeof lc->last, "%s", message);
        pthread_mutex_unlock(&lc->lock);
    }
    if (lc->next.callback && level <= lc->next.level)
        lc->next.callback(lc->next.cookie, level, message);
}

typedef struct {
    PyObject_HEAD sharc_reader *r;
    sharc_reader_settings s;
    char **paths;
    size_t n_paths;
    char *input_cfg;
    double *bins;
    uint32_t *bbs;
    void *resume;
    size_t resume_size;
    int busy;
    logcap *log;
} ReaderObject;

/* The name of v's type as an object (PyTypeObject is opaque under the limited API). */
static PyObject *type_name(PyObject *v)
{
    PyObject *n = PyObject_GetAttrString((PyObject *)Py_TYPE(v), "__name__");
    if (!n) {
        PyErr_Clear();
        n = PyUnicode_FromString("?");
    }
    return n;
}

static int kw_error_type(const char *name, const char *want, PyObject *v)
{
    PyObject *tn = type_name(v);
    PyErr_Format(PyExc_TypeError, "sharc.Reader: keyword '%s' must be %s, not %S", name, want, tn);
    Py_XDECREF(tn);
    return -1;
}

/* An int (not a bool) in [min, max] (max 0: the type's own limit). */
static int kw_integer(const kw_def *d, PyObject *v, unsigned long long limit,
                      unsigned long long *out)
{
    if (PyBool_Check(v) || !PyLong_Check(v))
        return kw_error_type(d->name, "an int", v);
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    unsigned long long max = d->max > 0 ? (unsigned long long)d->max : limit;
    unsigned long long ux = 0;
    int bad = overflow < 0 || (overflow == 0 && x < 0);
    if (!bad && overflow > 0) {
        ux = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            bad = 1;
        }
    } else if (!bad) {
        ux = (unsigned long long)x;
    }
    if (bad || ux > max || ux < (unsigned long long)d->min) {
        PyObject *r = PyObject_Repr(v);
        PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must be in %llu..%llu, got %U",
                     d->name, (unsigned long long)d->min, max, r);
        Py_XDECREF(r);
        return -1;
    }
    *out = ux;
    return 0;
}

static int kw_number(const char *name, PyObject *v, double *out)
{
    if (PyBool_Check(v) || !(PyLong_Check(v) || PyFloat_Check(v)))
        return kw_error_type(name, "a number", v);
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

static int kw_double(const kw_def *d, PyObject *v, double *out)
{
    double x = 0;
    if (kw_number(d->name, v, &x) < 0)
        return -1;
    if (!isfinite(x) || x > d->max || (d->min_open ? x <= d->min : x < d->min)) {
        /* PyErr_Format has no %g: the bounds are formatted here. */
        char range[96];
        snprintf(range, sizeof range, "%s %g and at most %g", d->min_open ? ">" : ">=", d->min,
                 d->max);
        PyObject *r = PyObject_Repr(v);
        PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must be %s, got %U", d->name,
                     range, r);
        Py_XDECREF(r);
        return -1;
    }
    *out = x;
    return 0;
}

/* A str compared with a list of choices; *out receives the index. */
static int kw_choice(const char *name, PyObject *v, const char *const *choices, int *out)
{
    if (!PyUnicode_Check(v))
        return kw_error_type(name, "a str", v);
    char list[128] = "";
    for (int i = 0; choices[i]; i++) {
        if (PyUnicode_CompareWithASCIIString(v, choices[i]) == 0) {
            *out = i;
            return 0;
        }
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "", choices[i]);
    }
    PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must be one of %s, got %R", name,
                 list, v);
    return -1;
}

/* A sequence of numbers (bins) or of ints (bucket_batch_size), copied into *out. */
static int kw_list(ReaderObject *self, const kw_def *d, PyObject *v, int ints, void **out,
                   size_t *n_out)
{
    if (PyUnicode_Check(v) || PyBytes_Check(v) || !PySequence_Check(v))
        return kw_error_type(d->name, ints ? "a sequence of ints" : "a sequence of numbers", v);
    Py_ssize_t n = PySequence_Size(v);
    if (n < 0)
        return -1;
    if (n == 0) {
        PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must not be empty", d->name);
        return -1;
    }
    void *arr = calloc((size_t)n, ints ? sizeof(uint32_t) : sizeof(double));
    if (!arr) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(v, i);
        if (!item)
            goto fail;
        int rc;
        if (ints) {
            unsigned long long x;
            rc = kw_integer(d, item, UINT32_MAX, &x);
            if (rc == 0)
                ((uint32_t *)arr)[i] = (uint32_t)x;
        } else {
            double x;
            rc = kw_double(d, item, &x);
            if (rc == 0 && i > 0 && x < ((double *)arr)[i - 1]) {
                PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword 'bins' must be sorted");
                rc = -1;
            }
            if (rc == 0)
                ((double *)arr)[i] = x;
        }
        Py_DECREF(item);
        if (rc < 0)
            goto fail;
    }
    *out = arr;
    *n_out = (size_t)n;
    return 0;
fail:
    free(arr);
    return -1;
}

static int fs_path(PyObject *p, const char *what, char **out);

/* `v` (a list or dict of plain values) as JSON text, malloc'd into *out, with json.dumps;
 * a value json cannot write raises TypeError naming the keyword `what`. */
static int json_text(PyObject *v, const char *what, char **out)
{
    *out = NULL;
    PyObject *json = PyImport_ImportModule("json");
    PyObject *text = json ? PyObject_CallMethod(json, "dumps", "O", v) : NULL;
    Py_XDECREF(json);
    if (!text) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "sharc.Reader: keyword '%s' holds a value JSON cannot represent", what);
        }
        return -1;
    }
    PyObject *b = PyUnicode_AsUTF8String(text);
    Py_DECREF(text);
    if (!b)
        return -1;
    *out = strdup(PyBytes_AsString(b));
    Py_DECREF(b);
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* device="cpu" | "cuda" | "cuda:N", or any object whose str() is one (torch.device). */
static int kw_device(ReaderObject *self, const kw_def *d, PyObject *v)
{
    PyObject *text = PyObject_Str(v);
    PyObject *utf8 = text ? PyUnicode_AsUTF8String(text) : NULL;
    Py_XDECREF(text);
    if (!utf8)
        return -1;
    const char *t = PyBytes_AsString(utf8);
    int ok = t != NULL;
    long n = 0;
    if (ok && (strcmp(t, "cpu") == 0 || strcmp(t, "host") == 0)) {
        self->s.device = SHARC_DEVICE_HOST;
        self->s.device_ordinal = 0;
    } else if (ok && strncmp(t, "cuda", 4) == 0 && (t[4] == 0 || (t[4] == ':' && t[5]))) {
        const char *p = t + 4 + (t[4] == ':');
        for (; *p >= '0' && *p <= '9' && n <= 1000000; p++)
            n = n * 10 + (*p - '0');
        ok = *p == 0 && n <= 1000000;
        if (ok) {
            self->s.device = SHARC_DEVICE_CUDA;
            self->s.device_ordinal = (int)n;
        }
    } else {
        ok = 0;
    }
    if (!ok && t)
        PyErr_Format(PyExc_ValueError,
                     "sharc.Reader: keyword '%s' must be 'cpu', 'cuda' or 'cuda:N', got %R",
                     d->name, v);
    Py_DECREF(utf8);
    return ok ? 0 : -1;
}

static int set_keyword(ReaderObject *self, const kw_def *d, PyObject *v, int *linspace)
{
    static const char *const layouts[] = {"auto", "shar", "nemo", "wds", NULL};
    static const char *const policies[] = {"fail", "skip", NULL};
    /* In the enum's order, as the CLI's --features lists them. */
    static const char *const features[] = {"none", "fbank", NULL};
    char *field = (char *)&self->s + d->offset;
    unsigned long long u;
    double x;
    int choice;
    switch (d->kind) {
    case KW_INT:
        if (kw_integer(d, v, INT32_MAX, &u) < 0)
            return -1;
        *(int *)field = (int)u;
        return 0;
    case KW_U32:
        if (kw_integer(d, v, UINT32_MAX, &u) < 0)
            return -1;
        *(uint32_t *)field = (uint32_t)u;
        return 0;
    case KW_U64:
        if (kw_integer(d, v, UINT64_MAX, &u) < 0)
            return -1;
        *(uint64_t *)field = (uint64_t)u;
        return 0;
    case KW_DOUBLE:
        if (kw_double(d, v, &x) < 0)
            return -1;
        *(double *)field = x;
        return 0;
    case KW_BOOL:
        if (!PyBool_Check(v))
            return kw_error_type(d->name, "a bool", v);
        *(int *)field = v == Py_True;
        return 0;
    case KW_LAYOUT:
        if (kw_choice(d->name, v, layouts, &choice) < 0)
            return -1;
        self->s.layout = (sharc_layout)choice;
        return 0;
    case KW_ON_ERROR:
        if (kw_choice(d->name, v, policies, &choice) < 0)
            return -1;
        self->s.on_error = (sharc_error_policy)choice;
        return 0;
    case KW_FEATURES:
        if (kw_choice(d->name, v, features, &choice) < 0)
            return -1;
        self->s.features = (sharc_features)choice;
        return 0;
    case KW_DEVICE:
        return kw_device(self, d, v);
    case KW_BINS: {
        if (PyUnicode_Check(v) && PyUnicode_CompareWithASCIIString(v, "linspace") == 0) {
            *linspace = 1;
            return 0;
        }
        void *arr = NULL;
        size_t n = 0;
        if (kw_list(self, d, v, 0, &arr, &n) < 0)
            return -1;
        free(self->bins);
        self->bins = arr;
        self->s.sampler.bins = self->bins;
        self->s.sampler.n_bins = n;
        return 0;
    }
    case KW_BBS: {
        void *arr = NULL;
        size_t n = 0;
        if (kw_list(self, d, v, 1, &arr, &n) < 0)
            return -1;
        free(self->bbs);
        self->bbs = arr;
        self->s.sampler.bucket_batch_size = self->bbs;
        return 0;
    }
    case KW_PATH: {
        char *cfg;
        const int structure = PyList_Check(v) || PyDict_Check(v);
        if ((structure ? json_text(v, d->name, &cfg) : fs_path(v, d->name, &cfg)) < 0)
            return -1;
        free(self->input_cfg);
        self->input_cfg = cfg;
        /* A list or dict is the input_cfg itself (as NeMo's config holds it inline), passed
         * as JSON text; anything else names a file. */
        self->s.input_cfg = structure ? NULL : cfg;
        self->s.input_cfg_text = structure ? cfg : NULL;
        return 0;
    }
    }
    return 0;
}

/* NeMo's bins when its config gives max_duration and no bins (as `sharc read --bins
 * linspace`): np.linspace(min_duration, max_cut_duration, num_buckets + 1)[1:-1]. */
static int linspace_bins(ReaderObject *self)
{
    const sharc_sampler_settings *st = &self->s.sampler;
    double begin = st->min_duration > 0 ? st->min_duration : 0.0, end = st->max_cut_duration;
    if (!(end > begin)) {
        PyErr_SetString(PyExc_ValueError, "sharc.Reader: keyword 'bins'='linspace' needs "
                                          "max_cut_duration (NeMo's max_duration) above "
                                          "min_duration");
        return -1;
    }
    if (st->num_buckets < 2) {
        PyErr_SetString(PyExc_ValueError,
                        "sharc.Reader: keyword 'bins'='linspace' needs num_buckets >= 2");
        return -1;
    }
    size_t n = st->num_buckets - 1;
    double *v = calloc(n, sizeof *v);
    if (!v) {
        PyErr_NoMemory();
        return -1;
    }
    const double step = (end - begin) / (double)st->num_buckets;
    for (size_t i = 0; i < n; i++)
        v[i] = (double)(i + 1) * step + begin;
    free(self->bins);
    self->bins = v;
    self->s.sampler.bins = v;
    self->s.sampler.n_bins = n;
    return 0;
}

/* A str, bytes or os.PathLike as a file system path, malloc'd into *out; `what` names the
 * argument in the TypeError for anything else. */
static int fs_path(PyObject *p, const char *what, char **out)
{
    *out = NULL;
    PyObject *fs = PyOS_FSPath(p);
    if (!fs) {
        PyErr_Clear();
        PyObject *tn = type_name(p);
        if (strcmp(what, "paths") == 0)
            PyErr_Format(PyExc_TypeError,
                         "sharc.Reader: paths must be str, bytes or os.PathLike (or a list of "
                         "them), not %S",
                         tn);
        else
            PyErr_Format(PyExc_TypeError,
                         "sharc.Reader: keyword '%s' must be str, bytes or os.PathLike, not %S",
                         what, tn);
        Py_XDECREF(tn);
        return -1;
    }
    PyObject *b = PyUnicode_Check(fs) ? PyUnicode_EncodeFSDefault(fs) : (Py_INCREF(fs), fs);
    Py_DECREF(fs);
    if (!b)
        return -1;
    char *s = NULL;
    Py_ssize_t n = 0;
    if (PyBytes_AsStringAndSize(b, &s, &n) < 0) {
        Py_DECREF(b);
        return -1;
    }
    *out = strndup(s, (size_t)n);
    Py_DECREF(b);
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int add_path(ReaderObject *self, PyObject *p)
{
    char *copy;
    if (fs_path(p, "paths", &copy) < 0)
        return -1;
    char **grown = realloc(self->paths, (self->n_paths + 1) * sizeof *grown);
    if (!copy || !grown) {
        free(copy);
        if (grown)
            self->paths = grown;
        PyErr_NoMemory();
        return -1;
    }
    self->paths = grown;
    self->paths[self->n_paths++] = copy;
    return 0;
}

static int parse_paths(ReaderObject *self, PyObject *paths)
{
    if (PyUnicode_Check(paths) || PyBytes_Check(paths) ||
        PyObject_HasAttrString(paths, "__fspath__"))
        return add_path(self, paths);
    PyObject *it = PyObject_GetIter(paths);
    if (!it) {
        PyErr_Clear();
        return add_path(self, paths);
    }
    PyObject *item;
    while ((item = PyIter_Next(it))) {
        int rc = add_path(self, item);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    return 0;
}

static void reader_free_settings(ReaderObject *self)
{
    for (size_t i = 0; i < self->n_paths; i++)
        free(self->paths[i]);
    free(self->paths);
    free(self->input_cfg);
    free(self->bins);
    free(self->bbs);
    free(self->resume);
    self->paths = NULL;
    self->n_paths = 0;
    self->input_cfg = NULL;
    self->bins = NULL;
    self->bbs = NULL;
    self->resume = NULL;
}

/* (Re)open the C reader from self->s, resuming from self->resume when set. */
static int reader_open(ReaderObject *self)
{
    sharc_reader_close(&self->r);
    self->s.resume_state = self->resume;
    self->s.resume_state_size = self->resume_size;
    self->log->last[0] = 0;
    sharc_reader *r = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = sharc_reader_open(&r, &self->s);
    Py_END_ALLOW_THREADS if (rc != 0)
    {
        raise_sharc(rc, self->log->last[0] ? self->log->last : sharc_strerror(rc));
        return -1;
    }
    self->r = r;
    return 0;
}

static int Reader_init(PyObject *op, PyObject *args, PyObject *kw)
{
    ReaderObject *self = (ReaderObject *)op;
    PyObject *paths = NULL;
    if (self->log) {
        PyErr_SetString(PyExc_RuntimeError, "sharc.Reader: already initialized");
        return -1;
    }
    self->log = calloc(1, sizeof *self->log);
    if (!self->log) {
        PyErr_NoMemory();
        return -1;
    }
    pthread_mutex_init(&self->log->lock, NULL);
    sharc_default_logger(&self->log->next);
    if (!PyArg_ParseTuple(args, "O:Reader", &paths))
        return -1;
    sharc_reader_default_settings(&self->s);
    self->s.logger.callback = logcap_cb;
    self->s.logger.cookie = self->log;
    self->s.logger.level = self->log->next.level;
    if (parse_paths(self, paths) < 0)
        return -1;
    self->s.paths = (const char *const *)self->paths;
    self->s.n_paths = self->n_paths;
    int linspace = 0;
    size_t n_bbs = 0;
    int open_reader = 1;
    if (kw) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kw, &pos, &key, &value)) {
            /* Private: the settings of a sharc.Loader, whose C loader opens the reader. */
            if (PyUnicode_CompareWithASCIIString(key, "_open") == 0) {
                open_reader = PyObject_IsTrue(value);
                continue;
            }
            const kw_def *d = NULL;
            for (size_t i = 0; i < sizeof kw_defs / sizeof kw_defs[0]; i++)
                if (PyUnicode_CompareWithASCIIString(key, kw_defs[i].name) == 0)
                    d = &kw_defs[i];
            if (!d) {
                PyErr_Format(PyExc_TypeError, "sharc.Reader: unknown keyword '%U'", key);
                return -1;
            }
            if (set_keyword(self, d, value, &linspace) < 0)
                return -1;
            if (d->kind == KW_BBS)
                n_bbs = (size_t)PySequence_Size(value);
        }
    }
    if (linspace && linspace_bins(self) < 0)
        return -1;
    if (self->bbs && n_bbs != self->s.sampler.n_bins) {
        PyErr_Format(PyExc_ValueError,
                     "sharc.Reader: keyword 'bucket_batch_size' needs one value per bin: %zu "
                     "values for %zu bins",
                     n_bbs, self->s.sampler.n_bins);
        return -1;
    }
    if (self->n_paths == 0 && !self->input_cfg) {
        PyErr_SetString(PyExc_ValueError, "sharc.Reader: paths is empty");
        return -1;
    }
    if (self->n_paths > 0 && self->input_cfg) {
        PyErr_SetString(PyExc_ValueError,
                        "sharc.Reader: keyword 'input_cfg' reads the datasets it lists: "
                        "give no paths with it (sharc.Reader([], input_cfg=...))");
        return -1;
    }
    return open_reader ? reader_open(self) : 0;
}

static void Reader_dealloc(PyObject *op)
{
    ReaderObject *self = (ReaderObject *)op;
    /* Closing joins the reader's threads, which never take the GIL; held batches stay
     * valid (their pool is freed with the last one released). */
    sharc_reader_close(&self->r);
    reader_free_settings(self);
    if (self->log) {
        pthread_mutex_destroy(&self->log->lock);
        free(self->log);
    }
    PyTypeObject *tp = Py_TYPE(op);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(op);
    Py_DECREF(tp);
}

static int reader_usable(ReaderObject *self)
{
    if (!self->r) {
        PyErr_SetString(PyExc_ValueError, "sharc.Reader is closed");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "sharc.Reader is in use by another thread; a reader serves one thread");
        return -1;
    }
    return 0;
}

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
            return raise_sharc(SHARC_ERR_FRAME, "string column offsets out of range");
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
            TensorObject *o = PyObject_New(TensorObject, Tensor_Type);
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

/* What a reader's or loader's next batch call returns to Python: (batch dict, step, epoch),
 * None at the end, or the raised error `message`. */
static PyObject *batch_result(int rc, sharc_batch *b, const char *message)
{
    if (rc == SHARC_END)
        Py_RETURN_NONE;
    if (rc != 0)
        return raise_sharc(rc, message);
    uint64_t step = b->step, epoch = b->epoch;
    PyObject *d = batch_dict(b);
    if (!d)
        return NULL;
    return Py_BuildValue("(NKK)", d, (unsigned long long)step, (unsigned long long)epoch);
}

static PyObject *Reader_next_batch(PyObject *op, PyObject *unused)
{
    ReaderObject *self = (ReaderObject *)op;
    if (reader_usable(self) < 0)
        return NULL;
    sharc_batch *b = NULL;
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc = sharc_reader_next_batch(self->r, &b);
    Py_END_ALLOW_THREADS self->busy = 0;
    return batch_result(rc, b, sharc_reader_last_error(self->r));
}

static PyObject *Reader_state(PyObject *op, PyObject *unused)
{
    ReaderObject *self = (ReaderObject *)op;
    if (reader_usable(self) < 0)
        return NULL;
    size_t size = 0;
    int rc = sharc_reader_state_save(self->r, NULL, 0, &size);
    if (rc == SHARC_ERR(EINVAL) && !self->resume)
        Py_RETURN_NONE; /* no batch returned yet: the state of a fresh start */
    if (rc != 0 && rc != SHARC_ERR(ENOSPC))
        return raise_sharc(rc, sharc_reader_last_error(self->r));
    PyObject *blob = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!blob)
        return NULL;
    rc = sharc_reader_state_save(self->r, PyBytes_AsString(blob), size, &size);
    if (rc != 0) {
        Py_DECREF(blob);
        return raise_sharc(rc, sharc_reader_last_error(self->r));
    }
    return blob;
}

/* Keep a copy of a state blob (None: the start) as the settings' resume_state. */
static PyObject *Reader_resume_settings(ReaderObject *self, PyObject *blob)
{
    void *copy = NULL;
    size_t n = 0;
    if (blob != Py_None) {
        char *s;
        Py_ssize_t len;
        if (!PyBytes_Check(blob)) {
            PyObject *tn = type_name(blob);
            PyErr_Format(PyExc_TypeError, "sharc.Reader state must be bytes, not %S", tn);
            Py_XDECREF(tn);
            return NULL;
        }
        if (PyBytes_AsStringAndSize(blob, &s, &len) < 0)
            return NULL;
        copy = malloc(len ? (size_t)len : 1);
        if (!copy)
            return PyErr_NoMemory();
        memcpy(copy, s, (size_t)len);
        n = (size_t)len;
    }
    free(self->resume);
    self->resume = copy;
    self->resume_size = n;
    Py_RETURN_NONE;
}

static PyObject *Reader_resume(PyObject *op, PyObject *blob)
{
    ReaderObject *self = (ReaderObject *)op;
    if (reader_usable(self) < 0)
        return NULL;
    PyObject *r = Reader_resume_settings(self, blob);
    if (!r)
        return NULL;
    Py_DECREF(r);
    if (reader_open(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Reader_close(PyObject *op, PyObject *unused)
{
    ReaderObject *self = (ReaderObject *)op;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "sharc.Reader is in use by another thread");
        return NULL;
    }
    sharc_reader *r = self->r;
    self->r = NULL;
    Py_BEGIN_ALLOW_THREADS sharc_reader_close(&r);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyObject *Reader_shards(PyObject *op, PyObject *unused)
{
    ReaderObject *self = (ReaderObject *)op;
    if (reader_usable(self) < 0)
        return NULL;
    size_t n = sharc_reader_num_shards(self->r);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *s = PyUnicode_DecodeFSDefault(sharc_reader_shard_path(self->r, i));
        if (!s || PyList_SetItem(list, (Py_ssize_t)i, s) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

static PyObject *Reader_stats(PyObject *op, PyObject *unused)
{
    ReaderObject *self = (ReaderObject *)op;
    if (reader_usable(self) < 0)
        return NULL;
    sharc_reader_stats st;
    sharc_reader_get_stats(self->r, &st);
    PyObject *problems = PyDict_New();
    for (uint32_t k = 0; problems && k < st.n_problem_kinds && k < SHARC_PROBLEM_CAPACITY; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(st.problems[k]);
        if (!v || PyDict_SetItemString(problems, sharc_problem_name((sharc_problem)k), v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(problems);
            return NULL;
        }
        Py_DECREF(v);
    }
    if (!problems)
        return NULL;
    return Py_BuildValue(
        "{s:K,s:d,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:N}", "cuts", (unsigned long long)st.cuts,
        "audio_seconds", st.audio_seconds, "shards", (unsigned long long)st.shards, "skipped_cuts",
        (unsigned long long)st.skipped_cuts, "skipped_shards",
        (unsigned long long)st.skipped_shards, "batches", (unsigned long long)st.batches,
        "filtered_cuts", (unsigned long long)st.filtered_cuts, "dropped_cuts",
        (unsigned long long)st.dropped_cuts, "padded_seconds", st.padded_seconds, "problems",
        problems);
}

static PyMethodDef Reader_methods[] = {
    {"next_batch", Reader_next_batch, METH_NOARGS,
     "(batch dict, step, epoch), or None at the end; the GIL is released while it waits."},
    {"state", Reader_state, METH_NOARGS,
     "The state blob after the last batch returned (bytes), or None before the first."},
    {"resume", Reader_resume, METH_O, "Reopen the reader at a state blob (None: the start)."},
    {"close", Reader_close, METH_NOARGS, "Close the reader; held batches stay valid."},
    {"shards", Reader_shards, METH_NOARGS, "The shard files found, in dataset order."},
    {"stats", Reader_stats, METH_NOARGS, "The reader's counters as a dict."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Reader_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Reader_init},
    {Py_tp_dealloc, Reader_dealloc},
    {Py_tp_methods, Reader_methods},
    {Py_tp_doc, "The C reader behind sharc.Reader."},
    {0, NULL},
};

static PyTypeObject *Reader_Type;

static PyType_Spec Reader_spec = {"sharc._sharc.CReader", sizeof(ReaderObject), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, Reader_slots};

/* ---------------------------------------------------------------------------------------
 * The native loader (sharc.Loader): the C loader on every rank, its transport split by the
 * mesh from MPI_COMM_WORLD (MPI), or from an NCCL communicator over the whole world whose
 * unique id the Python side shared over the caller's torch.distributed group (NCCL). Built
 * when the library has either transport.
 * ------------------------------------------------------------------------------------- */

#if SHARC_HAVE_MPI || SHARC_HAVE_NCCL
#if SHARC_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>

#include "sharc/mpi.h"

static int mpi_started_here;

/* MPI_Init inside a Python extension: libmpi was loaded with the extension, local to it,
 * and Open MPI's components, loaded later, look for its symbols globally; loading it again
 * with RTLD_GLOBAL (as mpi4py does) makes them visible. */
static int mpi_start(void)
{
    int ready = 0;
    MPI_Initialized(&ready);
    if (ready)
        return 0;
    static const char *const libs[] = {"libmpi.so.40", "libmpi.so.12", "libmpi.so", NULL};
    for (int i = 0; libs[i]; i++)
        if (dlopen(libs[i], RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
            break;
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return -1;
    mpi_started_here = 1;
    return 0;
}

static PyObject *mpi_finalize(PyObject *mod, PyObject *unused)
{
    int done = 0;
    MPI_Finalized(&done);
    if (mpi_started_here && !done)
        MPI_Finalize();
    Py_RETURN_NONE;
}
#endif /* SHARC_HAVE_MPI */

#if SHARC_HAVE_NCCL
#include "sharc/cuda.h"

/* An NCCL unique id, made on one rank and shared by the caller with every other. */
static PyObject *nccl_unique_id(PyObject *mod, PyObject *unused)
{
    ncclUniqueId id;
    ncclResult_t r;
    Py_BEGIN_ALLOW_THREADS r = ncclGetUniqueId(&id);
    Py_END_ALLOW_THREADS if (r != ncclSuccess) return raise_sharc(
        SHARC_ERR_NCCL, ncclGetLastError(NULL)[0] ? ncclGetLastError(NULL) : ncclGetErrorString(r));
    return PyBytes_FromStringAndSize(id.internal, sizeof id.internal);
}

/*
 * The NCCL transport of this rank's broadcast group: a communicator over the whole world
 * (rank `rank` of `world`, on CUDA device `device`) from the shared unique id, split by
 * the mesh. The world communicator is only the split's parent and is destroyed after it.
 * The caller's current device is left as it was.
 */
static int nccl_transport(sharc_transport **out, PyObject *uid, int rank, int world, int device,
                          const sharc_mesh *mesh)
{
    char *bytes = NULL;
    Py_ssize_t len = 0;
    if (PyBytes_AsStringAndSize(uid, &bytes, &len) < 0)
        return -1;
    ncclUniqueId id;
    if (len != (Py_ssize_t)sizeof id.internal) {
        PyErr_Format(PyExc_ValueError, "sharc.Loader: an NCCL unique id has %d bytes, not %zd",
                     (int)sizeof id.internal, len);
        return -1;
    }
    memcpy(id.internal, bytes, sizeof id.internal);
    char why[512] = "";
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS;
    int previous = -1;
    cudaError_t ce = cudaGetDevice(&previous);
    if (ce == cudaSuccess)
        ce = cudaSetDevice(device);
    ncclComm_t world_comm = NULL;
    if (ce != cudaSuccess) {
        rc = SHARC_ERR_CUDA;
        snprintf(why, sizeof why, "CUDA device %d: %s", device, cudaGetErrorString(ce));
    } else {
        ncclResult_t r = ncclCommInitRank(&world_comm, world, id, rank);
        if (r != ncclSuccess) {
            rc = SHARC_ERR_NCCL;
            const char *last = ncclGetLastError(world_comm);
            snprintf(why, sizeof why, "ncclCommInitRank (rank %d of %d, CUDA device %d): %s",
                     rank, world, device, last && last[0] ? last : ncclGetErrorString(r));
            world_comm = NULL;
        }
    }
    if (rc == 0) {
        rc = sharc_transport_nccl_split(out, world_comm, device, mesh, NULL);
        if (rc != 0)
            snprintf(why, sizeof why, "cannot split the NCCL communicator by the mesh: %s",
                     sharc_strerror(rc));
        ncclCommDestroy(world_comm);
    }
    if (previous >= 0)
        cudaSetDevice(previous);
    Py_END_ALLOW_THREADS;
    if (rc != 0) {
        raise_sharc(rc, why);
        return -1;
    }
    return 0;
}
#endif /* SHARC_HAVE_NCCL */

typedef struct {
    PyObject_HEAD PyObject *cfg; /* the CReader holding the reader settings */
    sharc_loader_settings s;
    sharc_transport *t;
    sharc_loader *l;
    int busy;
} LoaderObject;

static int loader_open(LoaderObject *self)
{
    ReaderObject *cfg = (ReaderObject *)self->cfg;
    sharc_loader_close(&self->l);
    self->s.reader = cfg->s;
    self->s.reader.resume_state = cfg->resume;
    self->s.reader.resume_state_size = cfg->resume_size;
    cfg->log->last[0] = 0;
    int rc;
    sharc_loader *l = NULL;
    Py_BEGIN_ALLOW_THREADS rc = sharc_loader_open(&l, &self->s);
    Py_END_ALLOW_THREADS if (rc != 0)
    {
        raise_sharc(rc, cfg->log->last[0] ? cfg->log->last : sharc_strerror(rc));
        return -1;
    }
    self->l = l;
    return 0;
}

static int Loader_init(PyObject *op, PyObject *args, PyObject *kw)
{
    LoaderObject *self = (LoaderObject *)op;
    static char *kwlist[] = {"settings", "mesh", "broadcast_axes", "nccl", NULL};
    PyObject *cfg, *nccl = Py_None;
    const char *mesh, *axes = NULL;
    if (self->cfg) {
        PyErr_SetString(PyExc_RuntimeError, "sharc.Loader: already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oz|zO:CLoader", kwlist, &cfg, &mesh, &axes,
                                     &nccl))
        return -1;
    if (!PyObject_TypeCheck(cfg, Reader_Type) || !((ReaderObject *)cfg)->log) {
        PyErr_SetString(PyExc_TypeError, "sharc.Loader: settings must be a parsed CReader");
        return -1;
    }
    Py_INCREF(cfg);
    self->cfg = cfg;
    /* nccl: (unique id, rank, world size, CUDA device), or None for MPI. */
    PyObject *nccl_id = NULL;
    int rank = 0, size = 1, device = 0;
    if (nccl != Py_None) {
        if (!PyArg_ParseTuple(nccl, "Siii:nccl", &nccl_id, &rank, &size, &device))
            return -1;
        if (size < 1 || rank < 0 || rank >= size) {
            PyErr_Format(PyExc_ValueError, "sharc.Loader: rank %d of a world of %d", rank, size);
            return -1;
        }
#if !SHARC_HAVE_NCCL
        return raise_sharc(SHARC_ERR_UNSUPPORTED, "this build of sharc has no NCCL transport"),
               -1;
#endif
    } else {
#if SHARC_HAVE_MPI
        if (mpi_start() < 0)
            return raise_sharc(SHARC_ERR_MPI, "MPI_Init_thread failed"), -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
#else
        return raise_sharc(SHARC_ERR_UNSUPPORTED, "this build of sharc has no MPI transport"),
               -1;
#endif
    }
    sharc_loader_default_settings(&self->s);
    char every_rank_dp[32];
    if (!mesh) {
        /* No mesh: every rank is its own data-parallel slot. */
        snprintf(every_rank_dp, sizeof every_rank_dp, "dp=%d", size);
        mesh = every_rank_dp;
    }
    int rc = sharc_mesh_parse(&self->s.mesh, mesh, rank, size);
    if (rc == 0 && axes)
        rc = sharc_mesh_set_broadcast_axes(&self->s.mesh, axes);
    if (rc != 0) {
        PyErr_Format(PyExc_ValueError,
                     "sharc.Loader: mesh '%s' does not describe the %d ranks (axes "
                     "'name=size,...', their sizes multiplying to the world size)",
                     mesh, size);
        return -1;
    }
    /* The reader's dp slot comes from the mesh. */
    ((ReaderObject *)cfg)->s.dp_rank = 0;
    ((ReaderObject *)cfg)->s.dp_size = 1;
    /* Communicator creation and splits are collective: under NCCL every rank takes part,
     * also in groups of one (whose transport then carries nothing between ranks). */
    if (nccl_id) {
#if SHARC_HAVE_NCCL
        if (nccl_transport(&self->t, nccl_id, rank, size, device, &self->s.mesh) < 0)
            return -1;
#endif
    } else if (sharc_mesh_group_size(&self->s.mesh) > 1) {
#if SHARC_HAVE_MPI
        Py_BEGIN_ALLOW_THREADS rc =
            sharc_transport_mpi_split(&self->t, MPI_COMM_WORLD, &self->s.mesh, NULL);
        Py_END_ALLOW_THREADS if (rc != 0) return raise_sharc(rc, "cannot split the MPI "
                                                                 "communicator by the mesh "
                                                                 "(see the log)"),
            -1;
        /* Device batches travel staged through pinned memory onto the reader's device. */
        const sharc_reader_settings *rs = &((ReaderObject *)cfg)->s;
        if (rs->device == SHARC_DEVICE_CUDA &&
            (rc = sharc_transport_mpi_set_device(self->t, rs->device_ordinal)) != 0)
            return raise_sharc(rc, sharc_transport_last_error(self->t)), -1;
#endif
    }
    self->s.transport = self->t;
    return loader_open(self);
}

static void Loader_dealloc(PyObject *op)
{
    LoaderObject *self = (LoaderObject *)op;
    sharc_loader_close(&self->l);
    sharc_transport_close(&self->t);
    Py_XDECREF(self->cfg);
    PyTypeObject *tp = Py_TYPE(op);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(op);
    Py_DECREF(tp);
}

static int loader_usable(LoaderObject *self)
{
    if (!self->l) {
        PyErr_SetString(PyExc_ValueError, "sharc.Loader is closed");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "sharc.Loader is in use by another thread");
        return -1;
    }
    return 0;
}

static PyObject *Loader_next_batch(PyObject *op, PyObject *unused)
{
    LoaderObject *self = (LoaderObject *)op;
    if (loader_usable(self) < 0)
        return NULL;
    sharc_batch *b = NULL;
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc = sharc_loader_next(self->l, &b);
    Py_END_ALLOW_THREADS self->busy = 0;
    return batch_result(rc, b, sharc_loader_last_error(self->l));
}

static PyObject *Loader_state(PyObject *op, PyObject *unused)
{
    LoaderObject *self = (LoaderObject *)op;
    if (loader_usable(self) < 0)
        return NULL;
    size_t size = 0;
    int rc = sharc_loader_state_save(self->l, NULL, 0, &size);
    if (rc != 0 && rc != SHARC_ERR(ENOSPC))
        return raise_sharc(rc, sharc_loader_last_error(self->l));
    PyObject *blob = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!blob)
        return NULL;
    if (size && (rc = sharc_loader_state_save(self->l, PyBytes_AsString(blob), size, &size)) != 0) {
        Py_DECREF(blob);
        return raise_sharc(rc, sharc_loader_last_error(self->l));
    }
    return blob;
}

static PyObject *Loader_resume(PyObject *op, PyObject *blob)
{
    LoaderObject *self = (LoaderObject *)op;
    if (loader_usable(self) < 0)
        return NULL;
    PyObject *r = Reader_resume_settings((ReaderObject *)self->cfg, blob);
    if (!r)
        return NULL;
    Py_DECREF(r);
    if (loader_open(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Loader_info(PyObject *op, PyObject *unused)
{
    LoaderObject *self = (LoaderObject *)op;
    if (loader_usable(self) < 0)
        return NULL;
    return Py_BuildValue(
        "{s:O,s:i,s:i,s:i,s:s}", "is_source", sharc_loader_is_source(self->l) ? Py_True : Py_False,
        "dp_rank", sharc_mesh_dp_rank(&self->s.mesh), "dp_size", sharc_mesh_dp_size(&self->s.mesh),
        "source_rank", sharc_loader_source_rank(self->l), "transport",
        sharc_loader_transport_name(self->l));
}

static PyObject *Loader_close(PyObject *op, PyObject *unused)
{
    LoaderObject *self = (LoaderObject *)op;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "sharc.Loader is in use by another thread");
        return NULL;
    }
    sharc_loader_close(&self->l);
    sharc_transport_close(&self->t);
    Py_RETURN_NONE;
}

static PyMethodDef Loader_methods[] = {
    {"next_batch", Loader_next_batch, METH_NOARGS, "(batch dict, step, epoch), or None."},
    {"state", Loader_state, METH_NOARGS, "The loader's state blob after the last batch."},
    {"resume", Loader_resume, METH_O, "Reopen at a state blob (collective)."},
    {"info", Loader_info, METH_NOARGS, "This rank's place: source, dp slot, transport."},
    {"close", Loader_close, METH_NOARGS, "Close the loader and its transport (collective)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Loader_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Loader_init},
    {Py_tp_dealloc, Loader_dealloc},
    {Py_tp_methods, Loader_methods},
    {Py_tp_doc, "The C loader behind sharc.Loader (MPI or NCCL)."},
    {0, NULL},
};

static PyType_Spec Loader_spec = {"sharc._sharc.CLoader", sizeof(LoaderObject), 0,
                                  Py_TPFLAGS_DEFAULT, Loader_slots};
#endif /* SHARC_HAVE_MPI || SHARC_HAVE_NCCL */

/* ---------------------------------------------------------------------------------------
 * The frame codec, for sharc.torch. A frame's control block is built and read here; the
 * tensors travel in the caller's collectives.
 * ------------------------------------------------------------------------------------- */

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
static PyObject *frame_data(PyObject *mod, PyObject *args)
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
        return raise_sharc(SHARC_ERR_TOO_LARGE, "batch has more tensors than a frame holds");
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
            raise_sharc(SHARC_ERR_UNSUPPORTED, "tensor has more than 4 dimensions");
            goto done;
        }
        int rc = sharc__frame_check_tensor(&ctx, &t[i]);
        if (rc < 0) {
            raise_sharc(rc, ctx.error);
            goto done;
        }
    }
    uint64_t payload = 0;
    if (sharc__frame_layout(t, (size_t)n, off, &payload) < 0) {
        raise_sharc(SHARC_ERR_TOO_LARGE, "batch too large for a frame");
        goto done;
    }
    size_t control = sharc__frame_control_bytes((size_t)n);
    uint64_t inline_at = sharc__frame_align(control);
    uint32_t inline_offset = 0;
    if (want_inline && inline_at <= (uint64_t)cap && payload <= (uint64_t)cap - inline_at)
        inline_offset = (uint32_t)inline_at;
    if (sharc__frame_encode_data(buf, (size_t)cap, step, epoch, t, off, (size_t)n, payload,
                                 inline_offset) < 0) {
        raise_sharc(SHARC_ERR_TOO_LARGE, "batch descriptors do not fit the control block");
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

static PyObject *frame_stop(PyObject *mod, PyObject *args)
{
    unsigned long long step;
    if (!PyArg_ParseTuple(args, "K:frame_stop", &step))
        return NULL;
    uint8_t buf[SHARC__FRAME_HEADER_SIZE];
    sharc__frame_encode_stop(buf, sizeof buf, step);
    return PyBytes_FromStringAndSize((const char *)buf, sizeof buf);
}

static PyObject *frame_error(PyObject *mod, PyObject *args)
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
    size_t len = strlen(s);
    if (len > SHARC__FRAME_MESSAGE_MAX) {
        len = SHARC__FRAME_MESSAGE_MAX;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;
    }
    memcpy(text, s, len);
    text[len] = 0;
    Py_DECREF(b);
    sharc__frame_encode_error(buf, sizeof buf, step, code, text);
    return PyBytes_FromStringAndSize((const char *)buf,
                                     (Py_ssize_t)(SHARC__FRAME_HEADER_SIZE + len));
}

/* frame_decode(control: bytes, max_frame_bytes) -> (kind, step, epoch, inline_offset,
 * payload_bytes, error_code, message, [(name, dtype, device, ordinal, shape, offset,
 * nbytes)]); sharc.Error (SHARC_ERR_FRAME) naming the field for a malformed block. */
static PyObject *frame_decode(PyObject *mod, PyObject *args)
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
        raise_sharc(rc, ctx.error);
        goto done;
    }
    size_t n = h->kind == SHARC__FRAME_DATA ? h->n_tensors : 0;
    list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *shape = shape_tuple(&t[i]);
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

static PyObject *strerror_py(PyObject *mod, PyObject *args)
{
    int code;
    if (!PyArg_ParseTuple(args, "i:strerror", &code))
        return NULL;
    return Py_BuildValue("(ss)", sharc_err_name(code), sharc_strerror(code));
}

static PyMethodDef module_methods[] = {
    {"frame_data", frame_data, METH_VARARGS, "Encode a DATA frame's control block."},
    {"frame_stop", frame_stop, METH_VARARGS, "Encode a STOP frame."},
    {"frame_error", frame_error, METH_VARARGS, "Encode an ERROR frame."},
    {"frame_decode", frame_decode, METH_VARARGS, "Decode and check a control block."},
    {"strerror", strerror_py, METH_VARARGS, "(name, description) of a sharc result code."},
#if SHARC_HAVE_MPI
    {"mpi_finalize", mpi_finalize, METH_NOARGS, "MPI_Finalize, when sharc started MPI."},
#endif
#if SHARC_HAVE_NCCL
    {"nccl_unique_id", nccl_unique_id, METH_NOARGS, "A new NCCL unique id (bytes)."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "sharc._sharc",
    "The C extension of sharc.",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int add_int(PyObject *m, const char *name, long v)
{
    return PyModule_AddIntConstant(m, name, v);
}

PyMODINIT_FUNC PyInit__sharc(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    Error = PyErr_NewExceptionWithDoc("sharc.Error",
                                      "A sharc failure: `code` is the C result code (SHARC_ERR_*), "
                                      "`code_name` its name and `message` the handle's message.",
                                      NULL, NULL);
    DataError = Error ? PyErr_NewExceptionWithDoc("sharc.DataError",
                                                  "A shard that cannot be read: the message names "
                                                  "the shard, the member and the cut.",
                                                  Error, NULL)
                      : NULL;
    RemoteError =
        Error ? PyErr_NewExceptionWithDoc("sharc.RemoteError",
                                          "A failure reported by another rank.", Error, NULL)
              : NULL;
    Tensor_Type = (PyTypeObject *)PyType_FromSpec(&Tensor_spec);
    PyObject *reader_type = PyType_FromSpec(&Reader_spec);
    Reader_Type = (PyTypeObject *)reader_type;
    if (!Error || !DataError || !RemoteError || !Tensor_Type || !reader_type)
        goto fail;
    Py_INCREF(Error);
    Py_INCREF(DataError);
    Py_INCREF(RemoteError);
    Py_INCREF(Tensor_Type);
    if (PyModule_AddObject(m, "Error", Error) < 0 ||
        PyModule_AddObject(m, "DataError", DataError) < 0 ||
        PyModule_AddObject(m, "RemoteError", RemoteError) < 0 ||
        PyModule_AddObject(m, "Tensor", (PyObject *)Tensor_Type) < 0 ||
        PyModule_AddObject(m, "CReader", reader_type) < 0)
        goto fail;
#if SHARC_HAVE_MPI || SHARC_HAVE_NCCL
    PyObject *loader_type = PyType_FromSpec(&Loader_spec);
    if (!loader_type || PyModule_AddObject(m, "CLoader", loader_type) < 0)
        goto fail;
#endif
    if (add_int(m, "FRAME_DATA", SHARC__FRAME_DATA) < 0 ||
        add_int(m, "FRAME_STOP", SHARC__FRAME_STOP) < 0 ||
        add_int(m, "FRAME_ERROR", SHARC__FRAME_ERROR) < 0 ||
        add_int(m, "FRAME_ALIGN", SHARC__FRAME_ALIGN) < 0 ||
        add_int(m, "FRAME_HEADER_SIZE", SHARC__FRAME_HEADER_SIZE) < 0 ||
        add_int(m, "FRAME_DESC_SIZE", SHARC__FRAME_DESC_SIZE) < 0 ||
        add_int(m, "FRAME_MESSAGE_MAX", SHARC__FRAME_MESSAGE_MAX) < 0 ||
        add_int(m, "DTYPE_F32", SHARC_DTYPE_F32) < 0 ||
        add_int(m, "DTYPE_I32", SHARC_DTYPE_I32) < 0 ||
        add_int(m, "DTYPE_I64", SHARC_DTYPE_I64) < 0 ||
        add_int(m, "DTYPE_U8", SHARC_DTYPE_U8) < 0 ||
        add_int(m, "DTYPE_F16", SHARC_DTYPE_F16) < 0 ||
        add_int(m, "DTYPE_BF16", SHARC_DTYPE_BF16) < 0 ||
        add_int(m, "DTYPE_F64", SHARC_DTYPE_F64) < 0 ||
        add_int(m, "DEVICE_HOST", SHARC_DEVICE_HOST) < 0 ||
        add_int(m, "DEVICE_CUDA", SHARC_DEVICE_CUDA) < 0 ||
        add_int(m, "ERR_REMOTE", SHARC_ERR_REMOTE) < 0 ||
        add_int(m, "ERR_FRAME", SHARC_ERR_FRAME) < 0 ||
        add_int(m, "ERR_UNSUPPORTED", SHARC_ERR_UNSUPPORTED) < 0 ||
        add_int(m, "ERR_BACKPRESSURE", SHARC_ERR_BACKPRESSURE) < 0 ||
        PyModule_AddStringConstant(m, "version", sharc_version_string()) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}

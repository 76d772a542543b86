/*
 * sharc._sharc: the C extension behind the Python package, written against the CPython
 * stable ABI (Py_LIMITED_API 3.9), so that one build imports on every CPython from 3.9 on.
 *
 * This file holds the module: its functions, constants and types, and the error classes.
 * The reader (keyword settings in keywords.c, the type in reader.c), the DLPack export of
 * batch tensors (tensor.c), the native loader (loader.c) and the frame codec that
 * sharc.torch frames its broadcasts with (frame.c) have files of their own;
 * sharcmodule.h declares what they share. The extension links libsharc's objects
 * statically (sharc_internal): the wheel then carries no shared library to locate at
 * import, and the frame codec (src/batching/frame.h), which is not part of the public C
 * API, is reachable without widening that API for one binding.
 */
#include "sharcmodule.h"

#include <string.h>

#include "batching/frame.h"

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

PyObject *sharc__py_raise(int code, const char *message)
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

PyObject *sharc__py_type_name(PyObject *v)
{
    PyObject *n = PyObject_GetAttrString((PyObject *)Py_TYPE(v), "__name__");
    if (!n) {
        PyErr_Clear();
        n = PyUnicode_FromString("?");
    }
    return n;
}

int sharc__py_no_nul(const char *s, Py_ssize_t n, const char *who)
{
    if (!memchr(s, 0, (size_t)n))
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: embedded null byte", who);
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * The module
 * ------------------------------------------------------------------------------------- */

static PyObject *strerror_py(PyObject *mod, PyObject *args)
{
    int code;
    if (!PyArg_ParseTuple(args, "i:strerror", &code))
        return NULL;
    return Py_BuildValue("(ss)", sharc_err_name(code), sharc_strerror(code));
}

static PyMethodDef module_methods[] = {
    {"frame_data", sharc__py_frame_data, METH_VARARGS, "Encode a DATA frame's control block."},
    {"frame_stop", sharc__py_frame_stop, METH_VARARGS, "Encode a STOP frame."},
    {"frame_error", sharc__py_frame_error, METH_VARARGS, "Encode an ERROR frame."},
    {"frame_decode", sharc__py_frame_decode, METH_VARARGS, "Decode and check a control block."},
    {"strerror", strerror_py, METH_VARARGS, "(name, description) of a sharc result code."},
    {"pack_states", sharc__py_pack_states, METH_O,
     "The state blobs of D data-parallel slots packed into one (elastic resume)."},
#if SHARC_HAVE_MPI
    {"mpi_finalize", sharc__py_mpi_finalize, METH_NOARGS, "MPI_Finalize, when sharc started MPI."},
#endif
#if SHARC_HAVE_NCCL
    {"nccl_unique_id", sharc__py_nccl_unique_id, METH_NOARGS, "A new NCCL unique id (bytes)."},
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
    sharc__py_tensor_type = (PyTypeObject *)PyType_FromSpec(&sharc__py_tensor_spec);
    PyObject *reader_type = PyType_FromSpec(&sharc__py_reader_spec);
    sharc__py_reader_type = (PyTypeObject *)reader_type;
    if (!Error || !DataError || !RemoteError || !sharc__py_tensor_type || !reader_type)
        goto fail;
    Py_INCREF(Error);
    Py_INCREF(DataError);
    Py_INCREF(RemoteError);
    Py_INCREF(sharc__py_tensor_type);
    if (PyModule_AddObject(m, "Error", Error) < 0 ||
        PyModule_AddObject(m, "DataError", DataError) < 0 ||
        PyModule_AddObject(m, "RemoteError", RemoteError) < 0 ||
        PyModule_AddObject(m, "Tensor", (PyObject *)sharc__py_tensor_type) < 0 ||
        PyModule_AddObject(m, "CReader", reader_type) < 0)
        goto fail;
#if SHARC_HAVE_MPI || SHARC_HAVE_NCCL
    PyObject *loader_type = PyType_FromSpec(&sharc__py_loader_spec);
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

/*
 * What the files of the extension sharc._sharc share: module.c (the module, its error
 * classes), tensor.c (batches as dicts of DLPack-exported tensors), keywords.c (with
 * keyword_values.c, private to them: keywords.h) and reader.c (the CReader type and its
 * settings), loader.c (the CLoader type, MPI and NCCL) and
 * frame.c (the frame codec of sharc.torch).
 *
 * Every file of the extension includes this header first: the extension is written against
 * the CPython stable ABI (Py_LIMITED_API 3.9), which has to be chosen before Python.h is
 * read. Names shared between the files carry the library's internal prefix and `py_`
 * (sharc__py_*), so that they cannot collide with libsharc's own objects, which the
 * extension links statically.
 */
#ifndef SHARC_PYTHON_SHARCMODULE_H
#define SHARC_PYTHON_SHARCMODULE_H

#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "sharc/sharc.h"

/* ---------------------------------------------------------------------------------------
 * module.c: errors
 * ------------------------------------------------------------------------------------- */

/* Raise the sharc.Error subclass for `code` (sharc.DataError for problems with the data
 * read, sharc.RemoteError for SHARC_ERR_REMOTE) with `message`; returns NULL. */
PyObject *sharc__py_raise(int code, const char *message);

/* The name of v's type as a new reference (PyTypeObject is opaque under the limited API);
 * "?" when it has none. */
PyObject *sharc__py_type_name(PyObject *v);

/* 0 when the `n` bytes at `s` hold no NUL, which would end them early as a C string; else
 * -1 with ValueError("<who>: embedded null byte"), as CPython's own path functions raise. */
int sharc__py_no_nul(const char *s, Py_ssize_t n, const char *who);

/* ---------------------------------------------------------------------------------------
 * args.c: sharc.Reader's arguments as C values
 * ------------------------------------------------------------------------------------- */

/* A str, bytes or os.PathLike as a file system path, malloc'd into *out; 0, or -1 with
 * TypeError or ValueError naming `what` ("paths", or a keyword). */
int sharc__py_fs_path(PyObject *p, const char *what, char **out);

/* A path, or an iterable of paths, appended to the malloc'd list `*list` of `*n`. */
int sharc__py_parse_paths(char ***list, size_t *n, PyObject *paths, const char *what);

/* `v` (a list or dict of plain values) as JSON text, malloc'd into *out, with json.dumps;
 * a value json cannot write raises TypeError naming the keyword `what`. */
int sharc__py_json_text(PyObject *v, const char *what, char **out);

/* ---------------------------------------------------------------------------------------
 * tensor.c: sharc.Tensor and batches as Python objects
 * ------------------------------------------------------------------------------------- */

extern PyType_Spec sharc__py_tensor_spec;
/* The type made from sharc__py_tensor_spec at module init. */
extern PyTypeObject *sharc__py_tensor_type;

/* A tensor's shape as a tuple of ints. */
PyObject *sharc__py_shape_tuple(const sharc_tensor *t);

/* What a reader's or loader's next batch call returns to Python: (batch dict, step, epoch),
 * None at the end, or the raised error `message`. With rc 0 the batch `b` is taken over: it
 * goes back to its pool with the last tensor object or DLPack export of it, or at once when
 * the dict cannot be made. */
PyObject *sharc__py_batch_result(int rc, sharc_batch *b, const char *message);

/**
 * Give back the device batches whose consumers' streams have passed the point where their
 * last tensor was freed (tensor.c: a CUDA batch exported to a stream is released only once
 * the work queued on that stream before the release is done). `wait`: wait for all of them.
 * Call without the GIL. @return how many are still pending
 */
int sharc__py_drain_releases(int wait);

/**
 * The C call behind next_batch, then, when the batch pool is full (SHARC_ERR_BACKPRESSURE)
 * while device batches wait for their consumers' streams, once more after those are done.
 * Call without the GIL.
 */
int sharc__py_next_with_releases(int (*next)(void *, sharc_batch **), void *handle,
                                 sharc_batch **out);

/* ---------------------------------------------------------------------------------------
 * keywords.c and reader.c: the CReader type (sharc.Reader's C side)
 * ------------------------------------------------------------------------------------- */

/* The messages a failed open logs (it has no handle to keep them), kept for the exception;
 * everything is passed on to the default logger too. */
typedef struct logcap {
    pthread_mutex_t lock;
    char last[1024];
    sharc_logger next;
} logcap;

typedef struct {
    PyObject_HEAD sharc_reader *r;
    sharc_reader_settings s;
    char **paths;
    size_t n_paths;
    char *input_cfg;
    double *bins;
    uint32_t *bbs;
    sharc_augment_settings augment; ///< s.augment points here once a perturbation is given
    double *speeds;                 ///< augment.speed_perturb
    char **tokenizer;               /* the tokenizer keyword's models, "PATH" or "LANG=PATH" */
    size_t n_tokenizer;
    double *bin_tokens; /* 2D bins' token limits */
    double *max_tps;
    char **noise; ///< augment.noise
    size_t n_noise;
    void *resume;
    size_t resume_size;
    int busy;
    logcap *log;
    char *nemo_fields[2]; /* nemo_text_field, nemo_lang_field */
    pid_t pid;            /* the process that opened r: a fork's copy has none of r's threads */
} ReaderObject;

/** Free the tokenizer keyword's strings (self->tokenizer) and clear them. */
void sharc__py_free_tokenizer(ReaderObject *self);
/** Free self->bin_tokens and self->max_tps. */
void sharc__py_free_token_lists(ReaderObject *self);

/*
 * Fill self->s (already at its defaults) from the Reader's positional `paths` and its
 * keywords `kw` (may be NULL): the CLI's option names with '_' for '-'. *open_reader is
 * cleared by the private keyword `_open=False` (a sharc.Loader's settings, whose C loader
 * opens the reader). Returns 0, or -1 with a Python exception set.
 */
int sharc__py_reader_settings(ReaderObject *self, PyObject *paths, PyObject *kw, int *open_reader);

extern PyType_Spec sharc__py_reader_spec;
/* The type made from sharc__py_reader_spec at module init. */
extern PyTypeObject *sharc__py_reader_type;

/* Keep a copy of a state blob (None: the start) as the settings' resume_state; returns
 * None, or NULL with a Python exception set. */
PyObject *sharc__py_reader_keep_state(ReaderObject *self, PyObject *blob);

/* pack_states(states): the state blobs (bytes) of the D data-parallel slots of a run, in
 * slot order, packed by sharc_reader_pack_states() into one blob for an elastic resume. */
PyObject *sharc__py_pack_states(PyObject *mod, PyObject *states);

/* ---------------------------------------------------------------------------------------
 * loader.c: the CLoader type (sharc.Loader's C side), built with either transport
 * ------------------------------------------------------------------------------------- */

#if SHARC_HAVE_MPI || SHARC_HAVE_NCCL
extern PyType_Spec sharc__py_loader_spec;
#endif
#if SHARC_HAVE_MPI
/* _sharc.mpi_finalize(): MPI_Finalize, when sharc started MPI. */
PyObject *sharc__py_mpi_finalize(PyObject *mod, PyObject *unused);
#endif
#if SHARC_HAVE_NCCL
/* _sharc.nccl_unique_id(): a new NCCL unique id as bytes. */
PyObject *sharc__py_nccl_unique_id(PyObject *mod, PyObject *unused);
#endif

/* ---------------------------------------------------------------------------------------
 * frame.c: the frame codec for sharc.torch (module functions)
 * ------------------------------------------------------------------------------------- */

PyObject *sharc__py_frame_data(PyObject *mod, PyObject *args);
PyObject *sharc__py_frame_stop(PyObject *mod, PyObject *args);
PyObject *sharc__py_frame_error(PyObject *mod, PyObject *args);
PyObject *sharc__py_frame_decode(PyObject *mod, PyObject *args);

#endif

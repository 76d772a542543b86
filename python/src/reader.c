/*
 * The CReader type, sharc.Reader's C side: it opens the C reader from the settings of
 * keywords.c and serves its batches with the GIL released, its state blob, shards and
 * counters.
 */
#include "sharcmodule.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The reader logs through this, keeping the last error for the exception of a failed
 * open. */
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

static void reader_free_settings(ReaderObject *self)
{
    for (size_t i = 0; i < self->n_paths; i++)
        free(self->paths[i]);
    free(self->paths);
    free(self->input_cfg);
    free(self->bins);
    free(self->bbs);
    free(self->speeds);
    sharc__py_free_tokenizer(self);
    sharc__py_free_token_lists(self);
    for (size_t i = 0; i < self->n_noise; i++)
        free(self->noise[i]);
    free(self->noise);
    free(self->resume);
    free(self->nemo_fields[0]);
    free(self->nemo_fields[1]);
    self->nemo_fields[0] = self->nemo_fields[1] = NULL;
    self->paths = NULL;
    self->n_paths = 0;
    self->input_cfg = NULL;
    self->bins = NULL;
    self->bbs = NULL;
    self->speeds = NULL;
    self->noise = NULL;
    self->n_noise = 0;
    self->resume = NULL;
}

/* 1 when r was opened by another process, of which this one is a fork (a DataLoader worker):
 * r's threads are not here, so using or closing it would wait for ever or crash. */
static int reader_forked(const ReaderObject *self)
{
    return self->r && self->pid != getpid();
}

/* Take the reader out of self to close it: NULL for one this process did not open, which
 * is forgotten, not closed (its threads, locks and memory are the opening process's; this
 * process's copy of them is left as it is). */
static sharc_reader *reader_take(ReaderObject *self)
{
    sharc_reader *r = reader_forked(self) ? NULL : self->r;
    self->r = NULL;
    return r;
}

/* (Re)open the C reader from self->s, resuming from self->resume when set. */
static int reader_open(ReaderObject *self)
{
    sharc_reader *old = reader_take(self);
    sharc_reader_close(&old);
    self->s.resume_state = self->resume;
    self->s.resume_state_size = self->resume_size;
    self->log->last[0] = 0;
    sharc_reader *r = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = sharc_reader_open(&r, &self->s);
    Py_END_ALLOW_THREADS if (rc != 0)
    {
        sharc__py_raise(rc, self->log->last[0] ? self->log->last : sharc_strerror(rc));
        return -1;
    }
    self->r = r;
    self->pid = getpid();
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
    int open_reader = 1;
    if (sharc__py_reader_settings(self, paths, kw, &open_reader) < 0)
        return -1;
    return open_reader ? reader_open(self) : 0;
}

static void Reader_dealloc(PyObject *op)
{
    ReaderObject *self = (ReaderObject *)op;
    /* Closing joins the reader's threads, which never take the GIL; held batches stay
     * valid (their pool is freed with the last one released). */
    sharc_reader *r = reader_take(self);
    sharc_reader_close(&r);
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

/* 0, or -1 with RuntimeError when this process is a fork of the one that opened the reader. */
static int reader_in_its_process(ReaderObject *self)
{
    if (reader_forked(self)) {
        PyErr_Format(PyExc_RuntimeError,
                     "sharc.Reader: opened in process %ld, used in process %ld (a fork, such as "
                     "a DataLoader worker), where its threads are not: keep DataLoader's "
                     "num_workers at 0 (the reader decodes on threads of its own), or make the "
                     "reader in the process that iterates it",
                     (long)self->pid, (long)getpid());
        return -1;
    }
    return 0;
}

static int reader_usable(ReaderObject *self)
{
    if (!self->r) {
        PyErr_SetString(PyExc_ValueError, "sharc.Reader is closed");
        return -1;
    }
    if (reader_in_its_process(self) < 0)
        return -1;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "sharc.Reader is in use by another thread; a reader serves one thread");
        return -1;
    }
    return 0;
}

/* How long a wait for a batch runs without the GIL before it checks for signals: Ctrl-C
 * raises KeyboardInterrupt within this much, however long the batch takes. */
#define WAIT_SLICE_MS 100

static int reader_next(void *r, sharc_batch **out)
{
    return sharc_reader_next_batch_timed(r, out, WAIT_SLICE_MS);
}

static PyObject *Reader_next_batch(PyObject *op, PyObject *unused)
{
    ReaderObject *self = (ReaderObject *)op;
    if (reader_usable(self) < 0)
        return NULL;
    sharc_batch *b = NULL;
    int rc;
    self->busy = 1;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS rc = sharc__py_next_with_releases(reader_next, self->r, &b);
        Py_END_ALLOW_THREADS if (rc != SHARC_ERR_TIMEOUT) break;
        /* A signal's handler raised (KeyboardInterrupt): the reader is left as it was, and
         * the next call returns the batch this one waited for. */
        if (PyErr_CheckSignals() < 0) {
            self->busy = 0;
            return NULL;
        }
    }
    self->busy = 0;
    return sharc__py_batch_result(rc, b, sharc_reader_last_error(self->r));
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
        return sharc__py_raise(rc, sharc_reader_last_error(self->r));
    PyObject *blob = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!blob)
        return NULL;
    rc = sharc_reader_state_save(self->r, PyBytes_AsString(blob), size, &size);
    if (rc != 0) {
        Py_DECREF(blob);
        return sharc__py_raise(rc, sharc_reader_last_error(self->r));
    }
    return blob;
}

PyObject *sharc__py_reader_keep_state(ReaderObject *self, PyObject *blob)
{
    void *copy = NULL;
    size_t n = 0;
    if (blob != Py_None) {
        char *s;
        Py_ssize_t len;
        if (!PyBytes_Check(blob)) {
            PyObject *tn = sharc__py_type_name(blob);
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

PyObject *sharc__py_pack_states(PyObject *mod, PyObject *states)
{
    PyObject *seq = PySequence_List(states);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyList_Size(seq);
    PyObject *out = NULL;
    const void **blobs = calloc(n ? (size_t)n : 1, sizeof *blobs);
    size_t *sizes = calloc(n ? (size_t)n : 1, sizeof *sizes);
    if (!blobs || !sizes) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyList_GetItem(seq, i);
        char *s;
        Py_ssize_t len;
        if (!PyBytes_Check(b) || PyBytes_AsStringAndSize(b, &s, &len) < 0 || len == 0) {
            PyObject *tn = sharc__py_type_name(b);
            PyErr_Format(PyExc_ValueError,
                         "sharc: state %zd of %zd is %s%S, not the state blob of data-parallel "
                         "slot %zd",
                         i, n, PyBytes_Check(b) ? "empty " : "", tn, i);
            Py_XDECREF(tn);
            goto fail;
        }
        blobs[i] = s;
        sizes[i] = (size_t)len;
    }
    size_t size = 0;
    int rc = sharc_reader_pack_states(blobs, sizes, (size_t)n, NULL, 0, &size);
    if (rc == SHARC_ERR(ENOSPC) || rc == 0) {
        out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
        if (!out)
            goto fail;
        rc = sharc_reader_pack_states(blobs, sizes, (size_t)n, PyBytes_AsString(out), size, &size);
    }
    if (rc != 0) {
        Py_CLEAR(out);
        PyErr_Format(PyExc_ValueError, "sharc: cannot pack %zd states (%s; 1 to 65535 states)", n,
                     sharc_strerror(rc));
    }
fail:
    free(blobs);
    free(sizes);
    Py_DECREF(seq);
    return out;
}

/* open(state): open the C reader of a CReader made with _open=False at a state blob (None:
 * the start). sharc.Reader calls it on a thread of its own, so that Ctrl-C interrupts the
 * wait for an open that stalls (an S3 listing); the reader then closes when it is done. */
static PyObject *Reader_open(PyObject *op, PyObject *blob)
{
    ReaderObject *self = (ReaderObject *)op;
    if (!self->log || self->r || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "sharc.Reader: open() needs a reader not yet opened");
        return NULL;
    }
    PyObject *kept = sharc__py_reader_keep_state(self, blob);
    if (!kept)
        return NULL;
    Py_DECREF(kept);
    self->busy = 1;
    int rc = reader_open(self);
    self->busy = 0;
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Reader_check_process(PyObject *op, PyObject *unused)
{
    if (reader_in_its_process((ReaderObject *)op) < 0)
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
    sharc_reader *r = reader_take(self);
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

static const char *problem_name(size_t k)
{
    return sharc_problem_name((sharc_problem)k);
}

static const char *filter_name(size_t k)
{
    return sharc_filter_name((sharc_filter)k);
}

/* A dict of counts[k] by name(k), k < n; NULL with an exception set. */
static PyObject *counts_dict(const uint64_t *counts, size_t n, const char *(*name)(size_t))
{
    PyObject *d = PyDict_New();
    for (size_t k = 0; d && k < n; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(counts[k]);
        if (!v || PyDict_SetItemString(d, name(k), v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *Reader_stats(PyObject *op, PyObject *unused)
{
    ReaderObject *self = (ReaderObject *)op;
    if (reader_usable(self) < 0)
        return NULL;
    sharc_reader_stats st;
    sharc_reader_get_stats(self->r, &st);
    uint64_t by[SHARC_FILTER_COUNT];
    size_t n_by = sharc_reader_filter_counts(self->r, by, SHARC_FILTER_COUNT);
    size_t n_kinds =
        st.n_problem_kinds < SHARC_PROBLEM_CAPACITY ? st.n_problem_kinds : SHARC_PROBLEM_CAPACITY;
    PyObject *problems = counts_dict(st.problems, n_kinds, problem_name);
    if (!problems)
        return NULL;
    PyObject *filtered =
        counts_dict(by, n_by < SHARC_FILTER_COUNT ? n_by : SHARC_FILTER_COUNT, filter_name);
    if (!filtered) {
        Py_DECREF(problems);
        return NULL;
    }
    return Py_BuildValue(
        "{s:K,s:d,s:K,s:K,s:K,s:K,s:K,s:N,s:K,s:d,s:N}", "cuts", (unsigned long long)st.cuts,
        "audio_seconds", st.audio_seconds, "shards", (unsigned long long)st.shards, "skipped_cuts",
        (unsigned long long)st.skipped_cuts, "skipped_shards",
        (unsigned long long)st.skipped_shards, "batches", (unsigned long long)st.batches,
        "filtered_cuts", (unsigned long long)st.filtered_cuts, "filtered", filtered, "dropped_cuts",
        (unsigned long long)st.dropped_cuts, "padded_seconds", st.padded_seconds, "problems",
        problems);
}

/* The cuts this reader's settings read (this slot's share, all its epochs), counted from
 * the metadata by a reader of cuts that decodes nothing: sharc.Reader.__len__. */
static PyObject *Reader_count_cuts(PyObject *op, PyObject *unused)
{
    ReaderObject *self = (ReaderObject *)op;
    sharc_reader_settings s = self->s;
    s.decode = 0;
    s.features = SHARC_FEATURES_NONE;
    s.device = SHARC_DEVICE_HOST;
    s.augment = NULL;
    s.resume_state = NULL;
    s.resume_state_size = 0;
    self->log->last[0] = 0;
    sharc_reader *r = NULL;
    const sharc_cut *cut;
    unsigned long long n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = sharc_reader_open(&r, &s);
    while (rc == 0 && (rc = sharc_reader_next(r, &cut)) == 0)
        n++;
    Py_END_ALLOW_THREADS if (rc != SHARC_END)
    {
        PyObject *err =
            sharc__py_raise(rc, r ? sharc_reader_last_error(r)
                                  : (self->log->last[0] ? self->log->last : sharc_strerror(rc)));
        sharc_reader_close(&r);
        return err;
    }
    sharc_reader_close(&r);
    return PyLong_FromUnsignedLongLong(n);
}

static PyMethodDef Reader_methods[] = {
    {"next_batch", Reader_next_batch, METH_NOARGS,
     "(batch dict, step, epoch), or None at the end; the GIL is released while it waits."},
    {"state", Reader_state, METH_NOARGS,
     "The state blob after the last batch returned (bytes), or None before the first."},
    {"open", Reader_open, METH_O,
     "Open the reader of a CReader made with _open=False at a state blob (None: the start)."},
    {"close", Reader_close, METH_NOARGS, "Close the reader; held batches stay valid."},
    {"check_process", Reader_check_process, METH_NOARGS,
     "Raise RuntimeError in a fork of the process that opened the reader (a DataLoader worker)."},
    {"shards", Reader_shards, METH_NOARGS, "The shard files found, in dataset order."},
    {"stats", Reader_stats, METH_NOARGS, "The reader's counters as a dict."},
    {"count_cuts", Reader_count_cuts, METH_NOARGS,
     "The cuts of the settings' epochs for this slot, counted from metadata, no decoding."},
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

PyTypeObject *sharc__py_reader_type;

PyType_Spec sharc__py_reader_spec = {"sharc._sharc.CReader", sizeof(ReaderObject), 0,
                                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, Reader_slots};

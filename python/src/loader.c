/*
 * The native loader, sharc.Loader's C side (CLoader): the C loader on every rank, its
 * transport split by the mesh from MPI_COMM_WORLD (MPI), or from an NCCL communicator over
 * the whole world whose unique id the Python side shared over the caller's
 * torch.distributed group (NCCL). Built when the library has either transport; without
 * one the file is empty and the module has no CLoader.
 */
#include "sharcmodule.h"

#include <string.h>

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

PyObject *sharc__py_mpi_finalize(PyObject *mod, PyObject *unused)
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
PyObject *sharc__py_nccl_unique_id(PyObject *mod, PyObject *unused)
{
    ncclUniqueId id;
    ncclResult_t r;
    Py_BEGIN_ALLOW_THREADS r = ncclGetUniqueId(&id);
    Py_END_ALLOW_THREADS if (r != ncclSuccess) return sharc__py_raise(
        SHARC_ERR_NCCL, ncclGetLastError(NULL)[0] ? ncclGetLastError(NULL) : ncclGetErrorString(r));
    return PyBytes_FromStringAndSize(id.internal, sizeof id.internal);
}

/*
 * The NCCL transport of this rank's broadcast group: a communicator over the whole world
 * (rank `rank` of `world`, on CUDA device `device`) from the shared unique id, split by
 * the mesh. With `dp_out` (even steps), also the transport over the sources of all
 * data-parallel slots, its rank the slot (NULL on the other ranks), over a communicator
 * split from the same parent, which the caller destroys (*dp_comm) after closing it. The
 * world communicator is only the splits' parent and is destroyed after them. The caller's
 * current device is left as it was.
 */
static int nccl_transport(sharc_transport **out, PyObject *uid, int rank, int world, int device,
                          const sharc_mesh *mesh, sharc_transport **dp_out, void **dp_comm)
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
            snprintf(why, sizeof why, "ncclCommInitRank (rank %d of %d, CUDA device %d): %s", rank,
                     world, device, last && last[0] ? last : ncclGetErrorString(r));
            if (world_comm) /* a communicator half made is aborted, not left behind */
                ncclCommAbort(world_comm);
            world_comm = NULL;
        }
    }
    if (rc == 0) {
        rc = sharc_transport_nccl_split(out, world_comm, device, mesh, NULL);
        if (rc != 0)
            snprintf(why, sizeof why,
                     "cannot split the NCCL communicator by the mesh: %s (the log says why)",
                     sharc_strerror(rc));
    }
    if (world_comm && dp_out) {
        /* Collective over the world: a rank whose group split failed still takes part (in
         * no group), so that the others do not wait for it here. */
        int color = rc == 0 && sharc_mesh_group_rank(mesh) == 0 ? 0 : NCCL_SPLIT_NOCOLOR;
        ncclComm_t dp = NULL;
        ncclResult_t r = ncclCommSplit(world_comm, color, sharc_mesh_dp_rank(mesh), &dp, NULL);
        if (rc == 0 && r != ncclSuccess) {
            rc = SHARC_ERR_NCCL;
            const char *last = ncclGetLastError(world_comm);
            snprintf(why, sizeof why,
                     "cannot split the NCCL communicator of the data-parallel sources: %s",
                     last && last[0] ? last : ncclGetErrorString(r));
        }
        if (rc == 0 && dp) {
            rc = sharc_transport_nccl_open(dp_out, dp, device, NULL);
            if (rc != 0)
                snprintf(why, sizeof why,
                         "cannot open the transport of the data-parallel sources: %s (the log "
                         "says why)",
                         sharc_strerror(rc));
        }
        if (rc == 0)
            *dp_comm = dp;
        else if (dp)
            ncclCommDestroy(dp);
    }
    if (world_comm)
        ncclCommDestroy(world_comm);
    if (previous >= 0)
        cudaSetDevice(previous);
    Py_END_ALLOW_THREADS;
    if (rc != 0) {
        sharc__py_raise(rc, why);
        return -1;
    }
    return 0;
}
#endif /* SHARC_HAVE_NCCL */

typedef struct {
    PyObject_HEAD PyObject *cfg; /* the CReader holding the reader settings */
    sharc_loader_settings s;
    sharc_transport *t;
    sharc_transport *dp_t; /* over the slots' sources, for even steps; NULL on peers */
    void *dp_comm;         /* dp_t's NCCL communicator (ncclComm_t), destroyed after it */
    sharc_loader *l;
    int busy;
} LoaderObject;

/* Close the transports (collective over their groups) and the dp communicator. */
static void loader_close_transports(LoaderObject *self)
{
    sharc_transport_close(&self->t);
    sharc_transport_close(&self->dp_t);
#if SHARC_HAVE_NCCL
    if (self->dp_comm)
        ncclCommDestroy((ncclComm_t)self->dp_comm);
#endif
    self->dp_comm = NULL;
}

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
        sharc__py_raise(rc, cfg->log->last[0] ? cfg->log->last : sharc_strerror(rc));
        return -1;
    }
    self->l = l;
    return 0;
}

static int Loader_init(PyObject *op, PyObject *args, PyObject *kw)
{
    LoaderObject *self = (LoaderObject *)op;
    static char *kwlist[] = {"settings", "mesh", "broadcast_axes", "nccl", "even_steps", NULL};
    PyObject *cfg, *nccl = Py_None;
    int even_steps = -1; /* -1: the C default */
    const char *mesh, *axes = NULL;
    Py_ssize_t mesh_len = 0, axes_len = 0;
    if (self->cfg) {
        PyErr_SetString(PyExc_RuntimeError, "sharc.Loader: already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oz#|z#Oi:CLoader", kwlist, &cfg, &mesh, &mesh_len,
                                     &axes, &axes_len, &nccl, &even_steps))
        return -1;
    if ((mesh && sharc__py_no_nul(mesh, mesh_len, "sharc.Loader: mesh") < 0) ||
        (axes && sharc__py_no_nul(axes, axes_len, "sharc.Loader: broadcast_axes") < 0))
        return -1;
    if (!PyObject_TypeCheck(cfg, sharc__py_reader_type) || !((ReaderObject *)cfg)->log) {
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
        return sharc__py_raise(SHARC_ERR_UNSUPPORTED, "this build of sharc has no NCCL transport"),
               -1;
#endif
    } else {
#if SHARC_HAVE_MPI
        if (mpi_start() < 0)
            return sharc__py_raise(SHARC_ERR_MPI, "MPI_Init_thread failed"), -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
#else
        return sharc__py_raise(SHARC_ERR_UNSUPPORTED, "this build of sharc has no MPI transport"),
               -1;
#endif
    }
    sharc_loader_default_settings(&self->s);
    if (even_steps >= 0)
        self->s.even_steps = even_steps != 0;
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
        /* On the reader's device when batches are made on one, so that the source
         * broadcasts them in place; else on the device the caller gave (its current one). */
        const sharc_reader_settings *rs = &((ReaderObject *)cfg)->s;
        if (rs->device == SHARC_DEVICE_CUDA)
            device = rs->device_ordinal;
        int even = self->s.even_steps && sharc_mesh_dp_size(&self->s.mesh) > 1;
        if (nccl_transport(&self->t, nccl_id, rank, size, device, &self->s.mesh,
                           even ? &self->dp_t : NULL, &self->dp_comm) < 0)
            return -1;
        self->s.dp_transport = self->dp_t;
#endif
    } else if (sharc_mesh_group_size(&self->s.mesh) > 1) {
#if SHARC_HAVE_MPI
        Py_BEGIN_ALLOW_THREADS rc =
            sharc_transport_mpi_split(&self->t, MPI_COMM_WORLD, &self->s.mesh, NULL);
        Py_END_ALLOW_THREADS if (rc != 0) return sharc__py_raise(rc, "cannot split the MPI "
                                                                     "communicator by the mesh "
                                                                     "(see the log)"),
            -1;
        /* Device batches travel staged through pinned memory onto the reader's device. */
        const sharc_reader_settings *rs = &((ReaderObject *)cfg)->s;
        if (rs->device == SHARC_DEVICE_CUDA &&
            (rc = sharc_transport_mpi_set_device(self->t, rs->device_ordinal)) != 0)
            return sharc__py_raise(rc, sharc_transport_last_error(self->t)), -1;
#endif
    }
#if SHARC_HAVE_MPI
    /* Even steps over MPI (under NCCL, nccl_transport made it): the sources of the slots
     * agree at every step over a communicator of their own, split collectively over the
     * world (the mesh is the same on every rank). */
    if (!nccl_id && self->s.even_steps && sharc_mesh_dp_size(&self->s.mesh) > 1) {
        Py_BEGIN_ALLOW_THREADS rc =
            sharc_transport_mpi_split_dp(&self->dp_t, MPI_COMM_WORLD, &self->s.mesh, NULL);
        Py_END_ALLOW_THREADS if (rc != 0) return sharc__py_raise(
            rc, "cannot split the MPI communicator of the data-parallel sources (see the log)"),
            -1;
        self->s.dp_transport = self->dp_t;
    }
#endif
    self->s.transport = self->t;
    return loader_open(self);
}

static void Loader_dealloc(PyObject *op)
{
    LoaderObject *self = (LoaderObject *)op;
    sharc_loader_close(&self->l);
    loader_close_transports(self);
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

static int loader_next(void *l, sharc_batch **out)
{
    return sharc_loader_next(l, out);
}

static PyObject *Loader_next_batch(PyObject *op, PyObject *unused)
{
    LoaderObject *self = (LoaderObject *)op;
    if (loader_usable(self) < 0)
        return NULL;
    sharc_batch *b = NULL;
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc = sharc__py_next_with_releases(loader_next, self->l, &b);
    Py_END_ALLOW_THREADS self->busy = 0;
    return sharc__py_batch_result(rc, b, sharc_loader_last_error(self->l));
}

static PyObject *Loader_state(PyObject *op, PyObject *unused)
{
    LoaderObject *self = (LoaderObject *)op;
    if (loader_usable(self) < 0)
        return NULL;
    size_t size = 0;
    int rc = sharc_loader_state_save(self->l, NULL, 0, &size);
    if (rc != 0 && rc != SHARC_ERR(ENOSPC))
        return sharc__py_raise(rc, sharc_loader_last_error(self->l));
    PyObject *blob = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!blob)
        return NULL;
    if (size && (rc = sharc_loader_state_save(self->l, PyBytes_AsString(blob), size, &size)) != 0) {
        Py_DECREF(blob);
        return sharc__py_raise(rc, sharc_loader_last_error(self->l));
    }
    return blob;
}

static PyObject *Loader_resume(PyObject *op, PyObject *blob)
{
    LoaderObject *self = (LoaderObject *)op;
    if (loader_usable(self) < 0)
        return NULL;
    PyObject *r = sharc__py_reader_keep_state((ReaderObject *)self->cfg, blob);
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

static PyObject *Loader_dropped(PyObject *op, PyObject *unused)
{
    LoaderObject *self = (LoaderObject *)op;
    if (loader_usable(self) < 0)
        return NULL;
    uint64_t batches = 0, cuts = 0;
    sharc_loader_dropped(self->l, &batches, &cuts);
    return Py_BuildValue("(KK)", (unsigned long long)batches, (unsigned long long)cuts);
}

static PyObject *Loader_close(PyObject *op, PyObject *unused)
{
    LoaderObject *self = (LoaderObject *)op;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "sharc.Loader is in use by another thread");
        return NULL;
    }
    sharc_loader_close(&self->l);
    loader_close_transports(self);
    Py_RETURN_NONE;
}

static PyMethodDef Loader_methods[] = {
    {"next_batch", Loader_next_batch, METH_NOARGS, "(batch dict, step, epoch), or None."},
    {"state", Loader_state, METH_NOARGS, "The loader's state blob after the last batch."},
    {"resume", Loader_resume, METH_O, "Reopen at a state blob (collective)."},
    {"info", Loader_info, METH_NOARGS, "This rank's place: source, dp slot, transport."},
    {"dropped", Loader_dropped, METH_NOARGS,
     "(batches, cuts) even steps dropped on this slot's source at the end."},
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

PyType_Spec sharc__py_loader_spec = {"sharc._sharc.CLoader", sizeof(LoaderObject), 0,
                                     Py_TPFLAGS_DEFAULT, Loader_slots};
#endif /* SHARC_HAVE_MPI || SHARC_HAVE_NCCL */

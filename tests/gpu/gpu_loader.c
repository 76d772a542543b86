/*
 * The loader over the real NCCL transport on one GPU (a one-rank communicator: NCCL
 * refuses two ranks on one device, so the multi-rank protocol is covered by the MPI and
 * tape tests, and on a GPU by gpu_mpi_device.c over the MPI transport's pinned staging): a reader's
 * batches through an NCCL loader equal the reader's own, and a produce callback's device tensors
 * are allocated by the transport on the GPU, come back with their values and are reused from the
 * pool. Also sharc_transport_nccl_split on a one-rank parent. Needs SHARC_GEN (the corpus
 * generator). Exits 77 without a GPU.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "base/hash.h"
#include "sharc/cuda.h"
#include "sharc/sharc.h"

/* FNV-1a over a batch's step and every tensor's name, shape and host bytes. */
static uint64_t fingerprint(const sharc_batch *b)
{
    uint64_t h = sharc__fnv1a(SHARC__FNV_OFFSET, &b->step, sizeof b->step);
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        CHECK(t->device == SHARC_DEVICE_HOST);
        h = sharc__fnv1a(h, t->name, strlen(t->name));
        h = sharc__fnv1a(h, t->shape, sizeof t->shape[0] * (size_t)t->ndim);
        h = sharc__fnv1a(h, t->data, t->nbytes);
    }
    return h;
}

static char corpus[512];
static const char *paths[1] = {corpus};

static void reader_settings(sharc_reader_settings *s)
{
    sharc_reader_default_settings(s);
    s->paths = paths;
    s->n_paths = 1;
    s->seed = 11;
    s->n_threads = 2;
    s->sampler.max_duration = 30;
    s->sampler.num_buckets = 2;
    s->sampler.buffer_size = 16;
    s->sampler.num_cuts_for_bins_estimate = 16;
}

static sharc_transport *open_nccl(int dev, ncclComm_t *comm)
{
    sharc_transport *t = NULL;
    CHECK(ncclCommInitAll(comm, 1, &dev) == ncclSuccess);
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.timeout_ms = 30000;
    CHECK(sharc_transport_nccl_open(&t, *comm, dev, &ts) == 0);
    return t;
}

/* The reader's own batch sequence, then the same settings through an NCCL loader. */
static void reader_through_nccl(int dev)
{
    sharc_reader_settings rs;
    reader_settings(&rs);
    sharc_reader *r = NULL;
    CHECK(sharc_reader_open(&r, &rs) == 0);
    uint64_t want[256];
    size_t n = 0;
    sharc_batch *b = NULL;
    int rc;
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        CHECK(n < 256);
        want[n++] = fingerprint(b);
        sharc_batch_release(b);
    }
    CHECK(rc == SHARC_END);
    sharc_reader_close(&r);
    CHECK(n >= 4);

    ncclComm_t comm;
    sharc_transport *t = open_nccl(dev, &comm);
    sharc_loader_settings ls;
    sharc_loader_default_settings(&ls);
    reader_settings(&ls.reader);
    ls.transport = t;
    sharc_loader *l = NULL;
    CHECK(sharc_loader_open(&l, &ls) == 0);
    CHECK(strcmp(sharc_loader_transport_name(l), "nccl") == 0);
    size_t got = 0;
    while ((rc = sharc_loader_next(l, &b)) == 0) {
        CHECK(got < n && fingerprint(b) == want[got]);
        got++;
        sharc_batch_release(b);
    }
    CHECK(rc == SHARC_END && got == n);
    sharc_loader_close(&l);
    sharc_transport_close(&t);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
    printf("device %d: %zu reader batches through an NCCL loader equal the reader's\n", dev, n);
}

typedef struct producer {
    int steps, made, dev;
    float *host; /* staging for the values of one batch */
} producer;

enum { ROWS = 64, COLS = 4000 };

static int produce(void *cookie, sharc_loader *l, sharc_batch **out)
{
    producer *pr = cookie;
    if (pr->made == pr->steps)
        return SHARC_END;
    sharc_tensor d[2];
    memset(d, 0, sizeof d);
    strcpy(d[0].name, "features");
    d[0].dtype = SHARC_DTYPE_F32;
    d[0].device = SHARC_DEVICE_CUDA;
    d[0].device_ordinal = pr->dev;
    d[0].ndim = 2;
    d[0].shape[0] = ROWS;
    d[0].shape[1] = COLS;
    strcpy(d[1].name, "step");
    d[1].dtype = SHARC_DTYPE_I64;
    d[1].device = SHARC_DEVICE_HOST;
    d[1].ndim = 0;
    int rc = sharc_loader_batch_new(l, 2, d, out);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++)
        pr->host[i] = (float)pr->made * 0.5f + (float)i;
    if (cudaMemcpy((*out)->tensors[0].data, pr->host, sizeof(float) * ROWS * COLS,
                   cudaMemcpyHostToDevice) != cudaSuccess) {
        sharc_batch_release(*out);
        *out = NULL;
        sharc_loader_set_source_error(l, "cudaMemcpy failed");
        return SHARC_ERR_CUDA;
    }
    *(int64_t *)(*out)->tensors[1].data = pr->made;
    (*out)->step = (uint64_t)pr->made++;
    return 0;
}

/* Device tensors from a produce callback: on the GPU, with their values, from a reused pool. */
static void produced_device_tensors(int dev)
{
    ncclComm_t comm;
    sharc_transport *t = open_nccl(dev, &comm);
    producer pr = {40, 0, dev, malloc(sizeof(float) * ROWS * COLS)};
    float *back = malloc(sizeof(float) * ROWS * COLS);
    CHECK(pr.host && back);
    sharc_loader_settings ls;
    sharc_loader_default_settings(&ls);
    ls.transport = t;
    ls.produce = produce;
    ls.produce_cookie = &pr;
    ls.reader.max_held_batches = 2;
    sharc_loader *l = NULL;
    CHECK(sharc_loader_open(&l, &ls) == 0);
    void *seen[8];
    size_t n_seen = 0;
    sharc_batch *b = NULL;
    int rc, step = 0;
    while ((rc = sharc_loader_next(l, &b)) == 0) {
        const sharc_tensor *f = sharc_batch_tensor(b, "features");
        const sharc_tensor *s = sharc_batch_tensor(b, "step");
        CHECK(f && s && f->device == SHARC_DEVICE_CUDA && f->shape[1] == COLS);
        CHECK(*(const int64_t *)s->data == step && b->step == (uint64_t)step);
        struct cudaPointerAttributes attr;
        CHECK(cudaPointerGetAttributes(&attr, f->data) == cudaSuccess);
        CHECK(attr.type == cudaMemoryTypeDevice && attr.device == dev);
        CHECK(cudaMemcpy(back, f->data, f->nbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        for (size_t i = 0; i < (size_t)ROWS * COLS; i += 997)
            CHECK(back[i] == (float)step * 0.5f + (float)i);
        size_t k = 0;
        while (k < n_seen && seen[k] != f->data)
            k++;
        if (k == n_seen) {
            CHECK(n_seen < 8);
            seen[n_seen++] = f->data;
        }
        sharc_batch_release(b);
        step++;
    }
    CHECK(rc == SHARC_END && step == 40);
    CHECK(n_seen <= 2); /* the pool's blocks, reused: max_held_batches of them */
    sharc_loader_close(&l);
    sharc_transport_close(&t);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
    free(pr.host);
    free(back);
    printf("device %d: 40 produced batches with device tensors, %zu device blocks reused\n", dev,
           n_seen);
}

static char logged[512];

static void capture(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    (void)level;
    snprintf(logged, sizeof logged, "%s", message);
}

/* sharc_transport_nccl_split on a one-rank parent: the group's own communicator works. */
static void split_from_parent(int dev)
{
    ncclComm_t parent;
    CHECK(ncclCommInitAll(&parent, 1, &dev) == ncclSuccess);
    sharc_mesh mesh;
    CHECK(sharc_mesh_parse(&mesh, "dp=1,tp=1", 0, 1) == 0);
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.timeout_ms = 30000;
    sharc_transport *t = NULL;
    CHECK(sharc_transport_nccl_split(&t, parent, dev, &mesh, &ts) == 0);
    CHECK(sharc_transport_size(t) == 1 && sharc_transport_rank(t) == 0);
    sharc_mesh wrong;
    CHECK(sharc_mesh_parse(&wrong, "dp=2", 1, 2) == 0);
    sharc_transport *bad = NULL;
    ts.logger.callback = capture;
    CHECK(sharc_transport_nccl_split(&bad, parent, dev, &wrong, &ts) == SHARC_ERR(EINVAL));
    CHECK(bad == NULL);
    CHECK(strstr(logged, "mesh is for rank 1 of 2 but the communicator has rank 0 of 1"));
    sharc_transport_close(&t);
    CHECK(ncclCommDestroy(parent) == ncclSuccess);
    printf("device %d: split transport OK, a mismatched mesh refused\n", dev);
}

int main(void)
{
    gpu_devices_or_skip();
    const char *gen = getenv("SHARC_GEN");
    CHECK(gen != NULL);
    char dir[] = "/tmp/sharc-gpu-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' --out '%s/c' --layout shar --compress none --shards 3 --cuts-per-shard 16 "
             "--max-duration 8 >/dev/null",
             gen, dir);
    CHECK(system(cmd) == 0);
    snprintf(corpus, sizeof corpus, "%s/c/shar", dir);
    reader_through_nccl(0);
    produced_device_tensors(0);
    split_from_parent(0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return 0;
}

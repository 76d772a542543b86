/*
 * A minimal training loop on every rank of an MPI job, with sharc feeding the batches.
 *
 *   cc train_loop.c $(pkg-config --cflags --libs sharc) $(pkg-config --cflags --libs ompi-c) \
 *      -o train_loop
 *   mpirun -n 4 ./train_loop --mesh dp=2,cp=2 DATA_DIR [STATE_FILE]
 *
 * Each data-parallel slot has one source rank that reads DATA_DIR; its context-parallel peers
 * receive every batch from it and never open a file. Every rank runs the same loop and sees
 * the same batches, the same end and the same errors at the same step. With STATE_FILE each
 * slot's source saves its position after the second step to STATE_FILE.dp<slot>, and a later
 * run given the same STATE_FILE resumes from there. See docs/training-loop.md.
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sharc/mpi.h>
#include <sharc/sharc.h>

/* Stand-in for the model's forward/backward: a checksum of what a step consumed. */
static double train_step(const sharc_batch *b)
{
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    if (audio == NULL || lens == NULL || audio->dtype != SHARC_DTYPE_F32)
        return -1.0;
    const float *x = audio->data;
    const int32_t *n = lens->data;
    int64_t rows = audio->shape[0], frames = audio->shape[1];
    double sum = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t t = 0; t < n[i]; t++) /* frames past n[i] are padding */
            sum += x[i * frames + t];
    return sum;
}

/* Read the state file of a previous run, if any. */
static void *load_state(const char *path, size_t *size)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    void *buf = NULL;
    *size = 0;
    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && (buf = malloc((size_t)n)) != NULL) {
            rewind(f);
            *size = fread(buf, 1, (size_t)n, f);
        }
    }
    fclose(f);
    return buf;
}

/* Save the loader's state; only the source has one (a peer's is empty). */
static int save_state(sharc_loader *l, const char *path)
{
    size_t size = 0;
    int rc = sharc_loader_state_save(l, NULL, 0, &size);
    if (rc == 0 && size == 0)
        return 0; /* a peer: nothing to save */
    void *buf = rc == SHARC_ERR(ENOSPC) ? malloc(size) : NULL;
    if (buf == NULL)
        return rc < 0 && rc != SHARC_ERR(ENOSPC) ? rc : SHARC_ERR(ENOMEM);
    rc = sharc_loader_state_save(l, buf, size, &size);
    FILE *f = rc == 0 ? fopen(path, "wb") : NULL;
    if (rc == 0 && (f == NULL || fwrite(buf, 1, size, f) != size))
        rc = SHARC_ERR_IO;
    if (f != NULL && fclose(f) != 0)
        rc = SHARC_ERR_IO;
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1, status = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4 || strcmp(argv[1], "--mesh") != 0) {
        if (rank == 0)
            fprintf(stderr, "usage: %s --mesh dp=2,cp=2 DATA_DIR [STATE_FILE]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *data[] = {argv[3]};

    /* 1. The mesh says which ranks share a batch (cp, tp) and which slot each reads. */
    sharc_loader_settings s;
    sharc_loader_default_settings(&s);
    if (sharc_mesh_parse(&s.mesh, argv[2], rank, size) < 0) {
        fprintf(stderr, "rank %d: --mesh: %s\n", rank, s.mesh.error);
        MPI_Finalize();
        return 2;
    }

    /* Each data-parallel slot has its own source and so its own state: one file per slot. */
    char state_path[4096];
    const char *state_file = NULL;
    if (argc > 4) {
        snprintf(state_path, sizeof state_path, "%s.dp%d", argv[4], sharc_mesh_dp_rank(&s.mesh));
        state_file = state_path;
    }

    /* 2. A transport over this rank's broadcast group, split from the world by the mesh.
     *    (sharc_transport_nccl_bootstrap_mpi gives the same over NCCL on GPUs.) */
    sharc_transport *t = NULL;
    int rc = sharc_transport_mpi_split(&t, MPI_COMM_WORLD, &s.mesh, NULL);
    if (rc < 0) {
        fprintf(stderr, "rank %d: transport: %s\n", rank, sharc_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    s.transport = t;
    /*    And one over the sources of all data-parallel slots (NULL on peers), over which the
     *    sources agree at every step, so that every slot ends at the same step. */
    sharc_transport *dp = NULL;
    rc = sharc_transport_mpi_split_dp(&dp, MPI_COMM_WORLD, &s.mesh, NULL);
    if (rc < 0) {
        fprintf(stderr, "rank %d: transport: %s\n", rank, sharc_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    s.dp_transport = dp;

    /* 3. The reader: used on the source only; peers may pass the same settings. */
    s.reader.paths = data;
    s.reader.n_paths = 1;
    s.reader.seed = 1234;
    s.reader.sampler.max_duration = 120; /* padded seconds per batch */
    s.reader.sampler.num_buckets = 4;
    size_t state_size = 0;
    void *state = load_state(state_file, &state_size);
    s.reader.resume_state = state; /* copied by open; a peer's (empty) state is ignored */
    s.reader.resume_state_size = state_size;

    sharc_loader *l = NULL;
    rc = sharc_loader_open(&l, &s);
    free(state);
    if (rc < 0) { /* settings that do not fit together: the reason was logged */
        fprintf(stderr, "rank %d: cannot open the loader: %s\n", rank, sharc_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* 4. The loop: the same on every rank, no length needed up front. */
    sharc_batch *b = NULL;
    int steps = 0;
    while ((rc = sharc_loader_next(l, &b)) == 0) {
        size_t len = 0;
        const char *first = sharc_batch_string(b, "cut_id", 0, &len);
        double sum = train_step(b);
        printf("rank %d (%s): step %llu, %lld cuts, first %.*s, sum %.6f\n", rank,
               sharc_loader_is_source(l) ? "source" : "peer", (unsigned long long)b->step,
               (long long)sharc_batch_tensor(b, "audio")->shape[0], (int)len, first ? first : "",
               sum);
        sharc_batch_release(b); /* the buffer goes back to the pool */
        /* Only the source writes; a failed save is reported and training goes on (breaking
         * out here alone would leave the peers waiting for this rank's next step). */
        int saved = ++steps == 2 && state_file != NULL ? save_state(l, state_file) : 0;
        if (saved < 0)
            fprintf(stderr, "rank %d: cannot save the state: %s\n", rank, sharc_strerror(saved));
    }

    /* 5. The end: SHARC_END on every rank together, or the same failure everywhere. */
    if (rc == SHARC_END) {
        printf("rank %d: end of data after %d steps\n", rank, steps);
        status = 0;
    } else if (rc == SHARC_ERR_REMOTE) {
        fprintf(stderr, "rank %d: the source failed: %s\n", rank, sharc_loader_last_error(l));
    } else if (rc < 0) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, sharc_err_name(rc), sharc_loader_last_error(l));
    }
    sharc_loader_close(&l);
    sharc_transport_close(&dp); /* collective over the sources */
    sharc_transport_close(&t);  /* collective over the group: every rank closes */
    MPI_Finalize();
    return status;
}

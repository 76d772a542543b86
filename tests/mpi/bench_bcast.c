/*
 * Per-step cost of the framed broadcast against a raw MPI_Bcast of the same payload bytes,
 * measured side by side (alternating) on a 20 MB batch: audio f32 [32, 160000] plus cut
 * ids. Prints medians from the receiving rank. Not a test: run with
 *   mpirun -n 2 build/tests/mpi/bench_bcast [steps [control_bytes]]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batching/batch.h"
#include "bcast/bcast.h"
#include "sharc/mpi.h"
#include "sharc/sharc.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static sharc_batch *make_batch(sharc__batch_pool *pool, int step)
{
    enum { B = 32, T = 160000 };
    sharc_batch *b = NULL;
    int64_t s2[2] = {B, T}, s1[1] = {B}, so[1] = {B + 1}, sb[1] = {B * 16};
    if (sharc__batch_pool_acquire(pool, &b) < 0)
        return NULL;
    sharc__batch_add_tensor(b, "audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, s2);
    sharc__batch_add_tensor(b, "audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, s1);
    sharc__batch_add_tensor(b, "cut_id_offsets", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, so);
    sharc__batch_add_tensor(b, "cut_id_bytes", SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1, sb);
    if (sharc__batch_finish(b) < 0)
        return NULL;
    float *audio = b->tensors[0].data;
    for (size_t i = 0; i < (size_t)B * T; i += 1024)
        audio[i] = (float)(step + i);
    int32_t *lens = b->tensors[1].data, *off = b->tensors[2].data;
    for (int i = 0; i <= B; i++)
        off[i] = 16 * i;
    for (int i = 0; i < B; i++) {
        lens[i] = T;
        memset((char *)b->tensors[3].data + 16 * i, 'a' + i % 26, 16);
    }
    b->step = (uint64_t)step;
    return b;
}

int main(int argc, char **argv)
{
    int rank, size, steps = argc > 1 ? atoi(argv[1]) : 40;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool *pool = NULL;
    sharc_transport *t = NULL;
    sharc__bcast *bc = NULL;
    sharc__bcast_settings bs;
    sharc__bcast_default_settings(&bs);
    if (argc > 2)
        bs.control_bytes = (size_t)atol(argv[2]);
    if (steps < 2 || sharc__batch_pool_create(&pool, &ctx, 2, NULL) < 0 ||
        sharc_transport_mpi_open(&t, MPI_COMM_WORLD, NULL) < 0 ||
        sharc__bcast_open(&bc, t, &bs) < 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
    sharc_batch *src = rank == 0 ? make_batch(pool, 0) : NULL;
    uint8_t *base = NULL;
    uint64_t payload = 0;
    sharc_batch *probe = make_batch(pool, 0);
    sharc__batch_payload(probe, &base, &payload);
    size_t raw_bytes = (size_t)payload;
    uint8_t *raw = malloc(raw_bytes);
    memset(raw, 1, raw_bytes);
    sharc_batch_release(probe);
    double *framed = calloc((size_t)steps, sizeof(double));
    double *plain = calloc((size_t)steps, sizeof(double));
    for (int i = -2; i < steps; i++) { /* two warm-up rounds */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0) {
            if (sharc__bcast_send(bc, src) < 0)
                MPI_Abort(MPI_COMM_WORLD, 1);
        } else {
            sharc_batch *got = NULL;
            if (sharc__bcast_recv(bc, &got) < 0)
                MPI_Abort(MPI_COMM_WORLD, 1);
            sharc_batch_release(got);
        }
        double t1 = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        double t2 = MPI_Wtime();
        MPI_Bcast(raw, (int)raw_bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        double t3 = MPI_Wtime();
        if (i >= 0) {
            framed[i] = t1 - t0;
            plain[i] = t3 - t2;
        }
    }
    if (rank == 0)
        sharc__bcast_send_stop(bc);
    else {
        sharc_batch *got = NULL;
        sharc__bcast_recv(bc, &got);
    }
    if (rank == size - 1) {
        double f = median(framed, steps), r = median(plain, steps);
        printf("{\"seconds_per_step\": %.6f, \"raw_seconds_per_step\": %.6f, \"ratio\": %.3f, "
               "\"bytes\": %zu, \"steps\": %d, \"transport\": \"mpi\", \"ranks\": %d}\n",
               f, r, f / r, raw_bytes, steps, size);
    }
    sharc_batch_release(src);
    free(raw);
    free(framed);
    free(plain);
    sharc__bcast_close(&bc);
    sharc_transport_close(&t);
    sharc__batch_pool_destroy(&pool);
    MPI_Finalize();
    return 0;
}

/*
 * The broadcast contract across processes (run under mpirun with 2 and 4 ranks): lockstep
 * with identical batches, source errors, a frame over the cap, failure before the first
 * batch, synchronized early break, dp=2,cp=2 groups, group resolution that depends on
 * the communicator only, and a device batch over an MPI transport without a device. A failed check
 * aborts the whole job so mpirun exits non-zero.
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batching/batch.h"
#include "bcast/bcast.h"
#include "mpi_check.h"
#include "sharc/mpi.h"
#include "sharc/sharc.h"

int world_rank, world_size;

static sharc__batch_pool *pool;

/* A batch whose contents depend on (slot, step): audio [B,T] and cut ids "s<slot>-<step>-<i>". */
static sharc_batch *make_batch(int slot, int step, int T)
{
    enum { B = 4 };
    sharc_batch *b = NULL;
    int64_t s2[2] = {B, T}, s1[1] = {B}, so[1] = {B + 1}, sb[1] = {B * 12};
    CHECK_RC(sharc__batch_pool_acquire(pool, &b), 0);
    sharc__batch_add_tensor(b, "audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, s2);
    sharc__batch_add_tensor(b, "audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, s1);
    sharc__batch_add_tensor(b, "cut_id_offsets", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, so);
    sharc__batch_add_tensor(b, "cut_id_bytes", SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1, sb);
    CHECK_RC(sharc__batch_finish(b), 0);
    float *audio = b->tensors[0].data;
    int32_t *lens = b->tensors[1].data, *off = b->tensors[2].data;
    char *bytes = b->tensors[3].data;
    for (int i = 0; i < B * T; i++)
        audio[i] = (float)(slot * 7919 + step * 104729 + i);
    off[0] = 0;
    for (int i = 0; i < B; i++) {
        lens[i] = T - i;
        char id[32];
        snprintf(id, sizeof id, "s%d-%04d-%04d", slot % 10, step % 10000, i % 10000);
        memcpy(bytes + 12 * i, id, 12);
        off[i + 1] = 12 * (i + 1);
    }
    b->step = (uint64_t)step;
    b->epoch = (uint64_t)slot;
    return b;
}

static void check_equal(const sharc_batch *want, const sharc_batch *got)
{
    CHECK(got->n_tensors == want->n_tensors);
    CHECK(got->step == want->step && got->epoch == want->epoch);
    for (size_t i = 0; i < want->n_tensors; i++) {
        const sharc_tensor *w = &want->tensors[i], *g = sharc_batch_tensor(got, w->name);
        CHECK(g != NULL);
        CHECK(g->dtype == w->dtype && g->ndim == w->ndim && g->nbytes == w->nbytes);
        CHECK(memcmp(g->data, w->data, w->nbytes) == 0);
    }
}

static sharc__bcast *open_bcast(sharc_transport *t, uint64_t cap)
{
    sharc__bcast_settings s;
    sharc__bcast *bc = NULL;
    sharc__bcast_default_settings(&s);
    if (cap)
        s.max_frame_bytes = cap;
    CHECK_RC(sharc__bcast_open(&bc, t, &s), 0);
    return bc;
}

/* Source: send `n` batches of `slot` then STOP. Peer: receive, compare, count. */
static int run_stream(sharc_transport *t, int slot, int n, const int *lengths)
{
    sharc__bcast *bc = open_bcast(t, 0);
    int steps = 0;
    if (sharc__bcast_is_source(bc)) {
        for (int i = 0; i < n; i++) {
            sharc_batch *b = make_batch(slot, i, lengths[i]);
            CHECK_RC(sharc__bcast_send(bc, b), 0);
            sharc_batch_release(b);
            steps++;
        }
        CHECK_RC(sharc__bcast_send_stop(bc), 0);
    } else {
        sharc_batch *got = NULL;
        int rc;
        while ((rc = sharc__bcast_recv(bc, &got)) == 0) {
            sharc_batch *want = make_batch(slot, steps, lengths[steps]);
            check_equal(want, got);
            sharc_batch_release(want);
            sharc_batch_release(got);
            steps++;
        }
        CHECK_RC(rc, SHARC_END);
        CHECK_RC(sharc__bcast_recv(bc, &got), SHARC_END);
    }
    sharc__bcast_close(&bc);
    return steps;
}

static void lockstep(void)
{
    sharc_mesh m;
    sharc_transport *t = NULL;
    static const int lengths[4] = {100, 200000, 3, 50000}; /* inline and two-collective frames */
    CHECK_RC(sharc_mesh_parse(&m, world_size == 4 ? "cp=2,tp=2" : "cp=2", world_rank, world_size),
             0);
    CHECK_RC(sharc_transport_mpi_split(&t, MPI_COMM_WORLD, &m, NULL), 0);
    CHECK(sharc_transport_size(t) == world_size);
    CHECK(sharc_transport_rank(t) == world_rank);
    CHECK(strcmp(sharc_transport_name(t), "mpi") == 0);
    int steps = run_stream(t, 0, 4, lengths);
    int all[8] = {0};
    MPI_Allgather(&steps, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < world_size; r++)
        CHECK(all[r] == 4);
    sharc_transport_close(&t);
}

/* Source fails after `after` batches with `code`/`message`; peers see it as REMOTE. */
static void source_fails(int after, int code, const char *message, const char *want_text)
{
    sharc_transport *t = NULL;
    sharc__bcast *bc = NULL;
    CHECK_RC(sharc_transport_mpi_open(&t, MPI_COMM_WORLD, NULL), 0);
    bc = open_bcast(t, 0);
    int got_batches = 0;
    if (world_rank == 0) {
        for (int i = 0; i < after; i++) {
            sharc_batch *b = make_batch(0, i, 10);
            CHECK_RC(sharc__bcast_send(bc, b), 0);
            sharc_batch_release(b);
        }
        CHECK_RC(sharc__bcast_send_error(bc, code, message), 0);
    } else {
        sharc_batch *got = NULL;
        int rc;
        while ((rc = sharc__bcast_recv(bc, &got)) == 0) {
            sharc_batch *want = make_batch(0, got_batches, 10);
            check_equal(want, got);
            sharc_batch_release(want);
            sharc_batch_release(got);
            got_batches++;
        }
        CHECK_RC(rc, SHARC_ERR_REMOTE);
        CHECK(got_batches == after);
        if (!strstr(sharc__bcast_error(bc), want_text)) {
            fprintf(stderr, "rank %d: '%s' lacks '%s'\n", world_rank, sharc__bcast_error(bc),
                    want_text);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        CHECK(strncmp(sharc__bcast_error(bc), "source rank 0: ", 15) == 0);
        CHECK(sharc__bcast_remote_code(bc) == code);
        CHECK_RC(sharc__bcast_recv(bc, &got), SHARC_ERR_REMOTE); /* ended: no hang */
    }
    sharc__bcast_close(&bc);
    sharc_transport_close(&t);
}

static void frame_over_cap(void)
{
    sharc_transport *t = NULL;
    CHECK_RC(sharc_transport_mpi_open(&t, MPI_COMM_WORLD, NULL), 0);
    sharc__bcast *bc = open_bcast(t, 1 << 20);
    if (world_rank == 0) {
        sharc_batch *small = make_batch(0, 0, 10), *big = make_batch(0, 1, 100000); /* 1.6 MB */
        CHECK_RC(sharc__bcast_send(bc, small), 0);
        CHECK_RC(sharc__bcast_send(bc, big), SHARC_ERR_TOO_LARGE);
        CHECK(strstr(sharc__bcast_error(bc), "frame for step 1 is"));
        sharc_batch_release(small);
        sharc_batch_release(big);
    } else {
        sharc_batch *got = NULL;
        CHECK_RC(sharc__bcast_recv(bc, &got), 0);
        sharc_batch_release(got);
        CHECK_RC(sharc__bcast_recv(bc, &got), SHARC_ERR_REMOTE);
        CHECK(strstr(sharc__bcast_error(bc), "frame for step 1 is"));
        CHECK(strstr(sharc__bcast_error(bc), "over the cap of 1048576 bytes"));
        CHECK(sharc__bcast_remote_code(bc) == SHARC_ERR_TOO_LARGE);
    }
    sharc__bcast_close(&bc);
    sharc_transport_close(&t);
}

/* Every rank stops after the first batch; nothing may be left pending. */
static void early_break(void)
{
    sharc_transport *t = NULL;
    CHECK_RC(sharc_transport_mpi_open(&t, MPI_COMM_WORLD, NULL), 0);
    sharc__bcast *bc = open_bcast(t, 0);
    if (world_rank == 0) {
        sharc_batch *b = make_batch(0, 0, 100000);
        CHECK_RC(sharc__bcast_send(bc, b), 0);
        sharc_batch_release(b);
    } else {
        sharc_batch *got = NULL;
        CHECK_RC(sharc__bcast_recv(bc, &got), 0);
        sharc_batch_release(got);
    }
    sharc__bcast_close(&bc);
    /* The next collectives match up only if the broken-off stream left none behind. */
    int token = world_rank == 0 ? 4242 : -1;
    MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(token == 4242);
    CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
    static const int lengths[2] = {10, 20};
    CHECK(run_stream(t, 0, 2, lengths) == 2);
    sharc_transport_close(&t);
}

/* dp=2,cp=2: two independent groups with different contents per slot. */
static void dp_slots(void)
{
    sharc_mesh m;
    sharc_transport *t = NULL;
    const char *spec = world_size == 4 ? "dp=2,cp=2" : "dp=2,cp=1";
    CHECK_RC(sharc_mesh_parse(&m, spec, world_rank, world_size), 0);
    CHECK_RC(sharc_transport_mpi_split(&t, MPI_COMM_WORLD, &m, NULL), 0);
    CHECK(sharc_transport_size(t) == sharc_mesh_group_size(&m));
    CHECK(sharc_transport_rank(t) == sharc_mesh_group_rank(&m));
    int slot = sharc_mesh_dp_rank(&m);
    sharc__bcast *bc = open_bcast(t, 0);
    char first_id[16] = {0};
    sharc_batch *b = NULL;
    if (sharc_mesh_is_source(&m)) {
        b = make_batch(slot, 0, 1000);
        CHECK_RC(sharc__bcast_send(bc, b), 0);
        CHECK_RC(sharc__bcast_send_stop(bc), 0);
    } else {
        CHECK_RC(sharc__bcast_recv(bc, &b), 0);
        sharc_batch *want = make_batch(slot, 0, 1000);
        check_equal(want, b);
        sharc_batch_release(want);
        sharc_batch *none = NULL;
        CHECK_RC(sharc__bcast_recv(bc, &none), SHARC_END);
    }
    size_t n = 0;
    const char *id = sharc_batch_string(b, "cut_id", 0, &n);
    CHECK(id && n == 12);
    memcpy(first_id, id, n);
    sharc_batch_release(b);
    char all[4][16];
    MPI_Allgather(first_id, 16, MPI_CHAR, all, 16, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < world_size; r++) {
        int r_slot = world_size == 4 ? r / 2 : r;
        char want[32];
        snprintf(want, sizeof want, "s%d-0000-0000", r_slot);
        CHECK(strcmp(all[r], want) == 0);
    }
    CHECK(strcmp(all[0], all[world_size - 1]) != 0);
    sharc__bcast_close(&bc);
    sharc_transport_close(&t);
}

/* Same mesh spec over two communicators with different rank orders: different sources. */
static void groups_follow_the_communicator(void)
{
    MPI_Comm a, b;
    sharc_mesh ma, mb;
    sharc_transport *ta = NULL, *tb = NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - 1 - world_rank, &b);
    int ra, rb;
    MPI_Comm_rank(a, &ra);
    MPI_Comm_rank(b, &rb);
    const char *spec = world_size == 4 ? "dp=2,cp=2" : "cp=2";
    CHECK_RC(sharc_mesh_parse(&ma, spec, ra, world_size), 0);
    CHECK_RC(sharc_mesh_parse(&mb, spec, rb, world_size), 0);
    CHECK_RC(sharc_transport_mpi_split(&ta, a, &ma, NULL), 0);
    CHECK_RC(sharc_transport_mpi_split(&tb, b, &mb, NULL), 0);
    /* Each source puts its world rank in the slot field; peers check who sent. */
    sharc_transport *ts[2] = {ta, tb};
    sharc_mesh *ms[2] = {&ma, &mb};
    for (int k = 0; k < 2; k++) {
        sharc__bcast *bc = open_bcast(ts[k], 0);
        int group_source_world;
        if (k == 0)
            group_source_world = sharc_mesh_group_member(ms[k], 0);
        else
            group_source_world = world_size - 1 - sharc_mesh_group_member(ms[k], 0);
        if (sharc_mesh_is_source(ms[k])) {
            CHECK(group_source_world == world_rank);
            sharc_batch *x = make_batch(world_rank, k, 50);
            CHECK_RC(sharc__bcast_send(bc, x), 0);
            sharc_batch_release(x);
        } else {
            sharc_batch *got = NULL, *want = make_batch(group_source_world, k, 50);
            CHECK_RC(sharc__bcast_recv(bc, &got), 0);
            check_equal(want, got);
            sharc_batch_release(want);
            sharc_batch_release(got);
        }
        sharc__bcast_close(&bc);
    }
    sharc_transport_close(&ta);
    sharc_transport_close(&tb);
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
}

static void mesh_mismatch_is_refused(void)
{
    sharc_mesh m;
    sharc_transport *t = NULL;
    sharc_transport_settings s;
    sharc_transport_default_settings(&s);
    s.logger.callback = NULL;
    CHECK_RC(sharc_mesh_parse(&m, "dp=2,cp=4", world_rank, 8), 0);
    CHECK_RC(sharc_transport_mpi_split(&t, MPI_COMM_WORLD, &m, &s), SHARC_ERR(EINVAL));
    CHECK(t == NULL);
}

/*
 * A batch with a device tensor over an MPI transport that was given no device: the source
 * sends an ERROR frame naming the transport, every peer raises it as a remote error, and
 * the tensor's pointer (no device memory here) is never read. sharc_transport_mpi_set_device
 * refuses a transport that is not MPI and a negative device.
 */
static void device_tensor_without_device(void)
{
    sharc_mesh m;
    sharc_transport *t = NULL;
    char spec[16];
    snprintf(spec, sizeof spec, "tp=%d", world_size);
    CHECK_RC(sharc_mesh_parse(&m, spec, world_rank, world_size), 0);
    CHECK_RC(sharc_transport_mpi_split(&t, MPI_COMM_WORLD, &m, NULL), 0);
    int rc = sharc_transport_mpi_set_device(t, -1);
    CHECK(rc == SHARC_ERR(EINVAL) || rc == SHARC_ERR_UNSUPPORTED);
    CHECK_TEXT(sharc_transport_last_error(t),
               rc == SHARC_ERR(EINVAL) ? "sharc_transport_mpi_set_device: no CUDA device -1"
                                       : "sharc was built without CUDA");
    sharc_transport *self = NULL;
    CHECK_RC(sharc_transport_self_open(&self, NULL), 0);
    CHECK_RC(sharc_transport_mpi_set_device(self, 0), SHARC_ERR(EINVAL));
    CHECK_TEXT(sharc_transport_last_error(self), "the transport is self, not mpi");
    sharc_transport_close(&self);

    sharc__bcast *bc = NULL;
    CHECK_RC(sharc__bcast_open(&bc, t, NULL), 0);
    const char *want = "tensor 'features' is in CUDA memory but the mpi transport cannot carry "
                       "device tensors (give it this rank's CUDA device with "
                       "sharc_transport_mpi_set_device)";
    if (world_rank == 0) {
        static int32_t lens[2] = {3, 4};
        sharc_tensor x[2] = {
            {"feature_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, {2}, lens, sizeof lens},
            {"features", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 0, 2, {2, 80}, (void *)64, 640},
        };
        sharc_batch b = {0, 0, 2, x, NULL};
        CHECK_RC(sharc__bcast_send(bc, &b), SHARC_ERR_UNSUPPORTED);
        CHECK(strcmp(sharc__bcast_error(bc), want) == 0);
    } else {
        sharc_batch *got = NULL;
        CHECK_RC(sharc__bcast_recv(bc, &got), SHARC_ERR_REMOTE);
        CHECK(got == NULL);
        char full[512];
        snprintf(full, sizeof full, "source rank 0: %s", want);
        CHECK(strcmp(sharc__bcast_error(bc), full) == 0);
        CHECK(sharc__bcast_remote_code(bc) == SHARC_ERR_UNSUPPORTED);
    }
    sharc__bcast_close(&bc);
    sharc_transport_close(&t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    CHECK(world_size == 2 || world_size == 4);
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    CHECK_RC(sharc__batch_pool_create(&pool, &ctx, 8, NULL), 0);

    lockstep();
    source_fails(1, SHARC_ERR_DECODE,
                 "source iterator failed: corrupt FLAC in recording.000003.tar member "
                 "spk1-utt9.flac",
                 "source rank 0: source iterator failed: corrupt FLAC in recording.000003.tar");
    source_fails(0, SHARC_ERR_IO, "source iterator creation failed: cannot open shard.tar",
                 "iterator creation failed: cannot open shard.tar");
    frame_over_cap();
    early_break();
    dp_slots();
    groups_follow_the_communicator();
    mesh_mismatch_is_refused();
    device_tensor_without_device();

    sharc__batch_pool_destroy(&pool);
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("mpi_bcast: all scenarios passed on %d ranks\n", world_size);
    MPI_Finalize();
    return 0;
}

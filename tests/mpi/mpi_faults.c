/*
 * Fault injection across processes (run under mpirun with 2 and 4 ranks, all in one
 * broadcast group). Each case makes one rank fail at a chosen point of a step and checks
 * that every rank ends, at the same step, with a non-zero result and a text naming the
 * failing rank and the cause, within the transport's timeout:
 *   1. settings that differ (max_steps on the last rank): every rank SHARC_ERR_SETTINGS
 *   2. the source fails before the control block (its producer's error)
 *   3. a peer rejects a frame after the control block (no memory for the payload)
 *   4. the source fails after a step (an output it could not write, sharc_loader_fail)
 *   5. a peer fails after a step, likewise
 *   6. the source stalls between the control block and the payload, past the timeout
 *   7. a peer stalls before a step's control block, past the timeout
 * Batches come from a produce callback: 1.6 MB of audio each, so every step has a payload.
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpi_check.h"
#include "sharc/mpi.h"
#include "sharc/sharc.h"
#include "bcast/transport.h"

int world_rank, world_size;

enum { TIMEOUT_MS = 1500, MARGIN_MS = 1500, ROWS = 4, COLS = 100000 };

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- batches ---- */

typedef struct producer {
    int step;
    int fail_at; ///< step at which the producer fails (-1: never)
} producer;

static int produce(void *cookie, sharc_loader *l, sharc_batch **out)
{
    producer *p = cookie;
    if (p->step == p->fail_at) {
        sharc_loader_set_source_error(l, "shard recording.000007.tar is unreadable");
        return SHARC_ERR_CORRUPT;
    }
    sharc_tensor desc = {
        .name = "audio", .dtype = SHARC_DTYPE_F32, .device = SHARC_DEVICE_HOST, .ndim = 2};
    desc.shape[0] = ROWS;
    desc.shape[1] = COLS;
    int rc = sharc_loader_batch_new(l, 1, &desc, out);
    if (rc < 0)
        return rc;
    float *x = (*out)->tensors[0].data;
    for (int i = 0; i < ROWS * COLS; i++)
        x[i] = (float)(p->step * 7 + i % 13);
    (*out)->step = (uint64_t)p->step++;
    return 0;
}

/* ---- an allocator that refuses large blocks (a peer without memory for the payload) ---- */

static void *small_only(void *cookie, size_t size, size_t align)
{
    (void)cookie;
    void *p = NULL;
    if (size > (1u << 20) ||
        posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) != 0)
        return NULL;
    return p;
}

static void plain_free(void *cookie, void *p)
{
    (void)cookie;
    free(p);
}

/* ---- a transport that stalls one rank at one point, over a real MPI transport ---- */

typedef struct staller {
    sharc_transport *inner;
    int rank;  ///< the rank that stalls
    int bcast; ///< it sleeps before its bcast number `bcast` (1-based), 0: never
    int after; ///< ... or after it
    int calls;
    int sleep_ms;
} staller;

static void nap(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int stall_bcast(sharc_transport *t, void *buf, size_t n, int root, sharc_device device)
{
    staller *s = t->impl;
    int mine = world_rank == s->rank && ++s->calls == s->bcast;
    if (mine && !s->after)
        nap(s->sleep_ms);
    int rc = sharc__transport_bcast(s->inner, buf, n, root, device);
    if (mine && s->after)
        nap(s->sleep_ms);
    if (rc < 0)
        sharc__set_error(&t->ctx, rc, "%s", sharc_transport_last_error(s->inner));
    return rc;
}

static int stall_allreduce(sharc_transport *t, uint32_t *v)
{
    staller *s = t->impl;
    int rc = sharc__transport_allreduce_max(s->inner, v);
    if (rc < 0)
        sharc__set_error(&t->ctx, rc, "%s", sharc_transport_last_error(s->inner));
    return rc;
}

static const sharc__transport_ops stall_ops = {
    .name = "mpi", .bcast = stall_bcast, .allreduce_max = stall_allreduce};

/* ---- one case ---- */

typedef struct group {
    sharc_mesh mesh;
    sharc_transport *inner, *t;
    staller stall;
    producer prod;
    sharc_loader *l;
} group;

static void open_group(group *g, const staller *stall, int fail_at,
                       void (*tweak)(sharc_loader_settings *), int small_memory_rank)
{
    char spec[32];
    snprintf(spec, sizeof spec, "cp=%d", world_size);
    CHECK_RC(sharc_mesh_parse(&g->mesh, spec, world_rank, world_size), 0);
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.timeout_ms = TIMEOUT_MS;
    ts.logger.callback = NULL;
    if (world_rank == small_memory_rank) { /* receive buffers come from the transport's */
        ts.allocator.alloc = small_only;
        ts.allocator.free = plain_free;
        ts.allocator.cookie = NULL;
    }
    CHECK_RC(sharc_transport_mpi_split(&g->inner, MPI_COMM_WORLD, &g->mesh, &ts), 0);
    g->t = g->inner;
    if (stall) {
        CHECK_RC(sharc__transport_new(&g->t, &stall_ops, &ts, world_rank, world_size), 0);
        g->stall = *stall;
        g->stall.inner = g->inner;
        g->t->impl = &g->stall;
    }
    sharc_loader_settings s;
    sharc_loader_default_settings(&s);
    s.mesh = g->mesh;
    s.transport = g->t;
    s.reader.logger.callback = NULL;
    g->prod.step = 0;
    g->prod.fail_at = fail_at;
    s.produce = produce;
    s.produce_cookie = &g->prod;
    if (tweak)
        tweak(&s);
    CHECK_RC(sharc_loader_open(&g->l, &s), 0);
}

static void close_group(group *g)
{
    sharc_loader_close(&g->l);
    if (g->t != g->inner)
        sharc_transport_close(&g->t);
    sharc_transport_close(&g->inner);
}

/* Run `steps` good steps on every rank (checking the batch), then one more call. */
static int run_steps(group *g, int steps, double *ended_ms)
{
    for (int i = 0; i < steps; i++) {
        sharc_batch *b = NULL;
        CHECK_RC(sharc_loader_next(g->l, &b), 0);
        const sharc_tensor *a = sharc_batch_tensor(b, "audio");
        CHECK(a && a->shape[1] == COLS && ((const float *)a->data)[5] == (float)(i * 7 + 5));
        sharc_batch_release(b);
    }
    sharc_batch *b = NULL;
    double t0 = now_ms();
    int rc = sharc_loader_next(g->l, &b);
    *ended_ms = now_ms() - t0;
    if (b != NULL) {
        fprintf(stderr, "rank %d: step %d (call %d) succeeded where it should have failed\n",
                world_rank, g->prod.step, steps);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return rc;
}

/* This rank ended with `want` and a text starting with `text`, and stays ended. */
static void expect(group *g, int rc, int want, const char *text)
{
    CHECK_RC(rc, want);
    const char *got = sharc_loader_last_error(g->l);
    if (strncmp(got, text, strlen(text)) != 0) {
        fprintf(stderr, "rank %d: error text '%s' does not start with '%s'\n", world_rank, got,
                text);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    sharc_batch *b = NULL;
    CHECK_RC(sharc_loader_next(g->l, &b), want); /* ended: the same, without communicating */
}

static void other_limit(sharc_loader_settings *s)
{
    if (world_rank == 1)
        s->max_steps = 5;
}

static void settings_differ(void)
{
    group g;
    double ms;
    open_group(&g, NULL, -1, other_limit, -1);
    int rc = run_steps(&g, 0, &ms);
    expect(&g, rc, SHARC_ERR_SETTINGS,
           "settings differ in the broadcast group: max_steps is 0 on source rank 0 but 5 on "
           "rank 1");
    close_group(&g);
}

static void source_fails_before_control(void)
{
    group g;
    double ms;
    open_group(&g, NULL, 2, NULL, -1);
    int rc = run_steps(&g, 2, &ms);
    if (world_rank == 0)
        expect(&g, rc, SHARC_ERR_CORRUPT, "shard recording.000007.tar is unreadable");
    else
        expect(&g, rc, SHARC_ERR_REMOTE, "source rank 0: shard recording.000007.tar is unreadable");
    close_group(&g);
}

static void peer_rejects_frame(void)
{
    group g;
    double ms;
    int last = world_size - 1;
    open_group(&g, NULL, -1, NULL, last);
    int rc = run_steps(&g, 0, &ms);
    char text[64];
    snprintf(text, sizeof text, "rank %d: cannot receive step 0: ", last);
    if (world_rank == last)
        expect(&g, rc, SHARC_ERR(ENOMEM), "cannot receive step 0: ");
    else
        expect(&g, rc, SHARC_ERR_REMOTE, text);
    close_group(&g);
}

/* 4 and 5: rank `who` cannot write an output after step 1. */
static void own_failure_after_step(int who)
{
    group g;
    double ms;
    open_group(&g, NULL, -1, NULL, -1);
    for (int i = 0; i < 2; i++) {
        sharc_batch *b = NULL;
        CHECK_RC(sharc_loader_next(g.l, &b), 0);
        sharc_batch_release(b);
    }
    if (world_rank == who)
        CHECK_RC(
            sharc_loader_fail(g.l, SHARC_ERR_IO, "cannot write state.bin: No space left on device"),
            0);
    int rc = run_steps(&g, 0, &ms);
    char text[128];
    snprintf(text, sizeof text, "%srank %d: cannot write state.bin", who == 0 ? "source " : "",
             who);
    if (world_rank == who)
        expect(&g, rc, SHARC_ERR_IO, "cannot write state.bin: No space left on device");
    else
        expect(&g, rc, SHARC_ERR_REMOTE, text);
    close_group(&g);
}

/*
 * 6 and 7: rank `who` stalls past the timeout around its broadcast number `bcast` (the
 * handshake is number 1, step s's control block 2 + 2s and its payload 3 + 2s). Every other
 * rank must give up within the timeout plus a margin, with SHARC_ERR_TIMEOUT.
 */
static void stall(int who, int bcast, int after, int good_steps)
{
    group g;
    double ms;
    staller st = {NULL, who, bcast, after, 0, TIMEOUT_MS * 3};
    open_group(&g, &st, -1, NULL, -1);
    CHECK(!sharc_transport_aborted(g.inner) && !sharc_transport_aborted(NULL));
    int rc = run_steps(&g, good_steps, &ms);
    CHECK_RC(rc, SHARC_ERR_TIMEOUT);
    /* The MPI transport tells the program to end without MPI_Finalize. */
    CHECK(sharc_transport_aborted(g.inner));
    CHECK_TEXT(sharc_loader_last_error(g.l), "did not complete within 1500 ms");
    CHECK_TEXT(sharc_loader_last_error(g.l), "another rank of the group stopped, died or is");
    if (world_rank != who && ms > TIMEOUT_MS + MARGIN_MS) {
        fprintf(stderr, "rank %d: waited %.0f ms, over %d + %d\n", world_rank, ms, TIMEOUT_MS,
                MARGIN_MS);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("rank %d: stall of rank %d at broadcast %d: gave up after %.0f ms\n", world_rank, who,
           bcast, ms);
    /* The abandoned collectives stay pending in MPI; the next case uses a fresh split once
     * every rank is back. */
    MPI_Barrier(MPI_COMM_WORLD);
    close_group(&g);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    CHECK(world_size >= 2);
    settings_differ();
    source_fails_before_control();
    peer_rejects_frame();
    own_failure_after_step(0);
    own_failure_after_step(world_size - 1);
    stall(0, 2 + 2 * 2, 1, 2);          /* source: after step 2's control block */
    stall(world_size - 1, 2 + 2, 0, 1); /* last peer: before step 1's control block */
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("mpi_faults: %d ranks passed\n", world_size);
    MPI_Finalize();
    return 0;
}

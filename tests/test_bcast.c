/*
 * The broadcast protocol in one process: a "tape" transport records what the source
 * broadcasts and replays it to a peer, so every frame, collective count and payload path
 * can be checked without MPI (tests/mpi/ runs the same protocol across processes).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batching/batch.h"
#include "bcast/bcast.h"
#include "sharc/sharc.h"
#include "testutil.h"
#include "tape.h"
#include "bcast/transport.h"

static int allocations;

static sharc_transport *src_t, *peer_t;
static sharc__bcast *src, *peer;

/* A source with settings `s` and a peer with `ps` over a tape. */
static void open_pair_with(const sharc__bcast_settings *s, const sharc__bcast_settings *ps)
{
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.allocator = tu_counting_allocator(&allocations);
    tape_len = tape_pos = 0;
    ck_assert_int_eq(sharc__transport_new(&src_t, &tape_ops, &ts, 0, 2), 0);
    ck_assert_int_eq(sharc__transport_new(&peer_t, &tape_ops, &ts, 1, 2), 0);
    ck_assert_int_eq(sharc__bcast_open(&src, src_t, s), 0);
    ck_assert_int_eq(sharc__bcast_open(&peer, peer_t, ps), 0);
    ck_assert(sharc__bcast_is_source(src));
    ck_assert(!sharc__bcast_is_source(peer));
}

static void open_pair(const sharc__bcast_settings *s)
{
    open_pair_with(s, s);
}

static void close_pair(void)
{
    sharc__bcast_close(&src);
    sharc__bcast_close(&peer);
    sharc_transport_close(&src_t);
    sharc_transport_close(&peer_t);
    tape_clear();
}

/* A collated batch in a pool: audio [B,T] f32 and a cut_id column, values from `seed`. */
static sharc_batch *pooled_batch(sharc__batch_pool *pool, int B, int T, int seed)
{
    sharc_batch *b = NULL;
    int64_t s2[2] = {B, T}, so[1] = {B + 1}, sb[1] = {B * 6};
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &b), 0);
    sharc__batch_add_tensor(b, "audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, s2);
    sharc__batch_add_tensor(b, "cut_id_offsets", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, so);
    sharc__batch_add_tensor(b, "cut_id_bytes", SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1, sb);
    ck_assert_int_eq(sharc__batch_finish(b), 0);
    float *audio = b->tensors[0].data;
    for (int i = 0; i < B * T; i++)
        audio[i] = (float)(seed * 1000003 + i);
    int32_t *off = b->tensors[1].data;
    char *bytes = b->tensors[2].data;
    for (int i = 0; i <= B; i++)
        off[i] = 6 * i;
    for (int i = 0; i < B; i++) {
        char id[8];
        snprintf(id, sizeof id, "c%02d-%02d", seed % 100, i % 100);
        memcpy(bytes + 6 * i, id, 6);
    }
    b->step = (uint64_t)seed;
    b->epoch = 1;
    return b;
}

static void check_same(const sharc_batch *a, const sharc_batch *b)
{
    ck_assert_uint_eq(a->n_tensors, b->n_tensors);
    ck_assert_uint_eq(a->step, b->step);
    ck_assert_uint_eq(a->epoch, b->epoch);
    for (size_t i = 0; i < a->n_tensors; i++) {
        const sharc_tensor *x = &a->tensors[i], *y = sharc_batch_tensor(b, x->name);
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(x->dtype, y->dtype);
        ck_assert_int_eq(x->ndim, y->ndim);
        for (int d = 0; d < x->ndim; d++)
            ck_assert_int_eq(x->shape[d], y->shape[d]);
        ck_assert_uint_eq(x->nbytes, y->nbytes);
        ck_assert_msg(memcmp(x->data, y->data, x->nbytes) == 0, "tensor %s differs", x->name);
        ck_assert_uint_eq((uintptr_t)y->data % 256, 0);
    }
}

START_TEST(small_batch_is_one_data_collective)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(NULL);
    sharc_batch *b = pooled_batch(pool, 4, 1000, 3), *got = NULL; /* 16 KB */
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    /* the handshake and its status word, then the control block and its status word */
    ck_assert_int_eq(tape_len, 4);
    ck_assert_uint_eq(tape[0].n, 4096);
    ck_assert_uint_eq(tape[1].n, 4);
    ck_assert_uint_eq(tape[2].n, 65536);
    ck_assert_uint_eq(tape[3].n, 4);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    check_same(b, got);
    size_t n;
    ck_assert(memcmp(sharc_batch_string(got, "cut_id", 3, &n), "c03-03", 6) == 0);
    ck_assert_uint_eq(sharc__bcast_collectives(peer), 4);
    sharc_batch_release(got);
    sharc_batch_release(b);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

START_TEST(large_pooled_batch_is_sent_without_copy)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(NULL);
    sharc_batch *b = pooled_batch(pool, 8, 40000, 5), *got = NULL; /* 1.28 MB */
    uint8_t *base;
    uint64_t len;
    ck_assert(sharc__batch_payload(b, &base, &len));
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    ck_assert_int_eq(tape_len, 5);
    ck_assert_ptr_eq(tape[4].src, base); /* straight from the pool block */
    ck_assert_uint_eq(tape[4].n, len);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    check_same(b, got);
    ck_assert_uint_eq(sharc__bcast_collectives(peer), 5);
    sharc_batch_release(got);
    sharc_batch_release(b);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

START_TEST(hand_built_batch_is_packed)
{
    static float audio[3][50000];
    static int32_t lens[3] = {50000, 10, 0};
    for (int i = 0; i < 3 * 50000; i++)
        audio[i / 50000][i % 50000] = (float)i;
    sharc_tensor t[2] = {
        {"audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, {3, 50000}, audio, sizeof audio},
        {"audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, {3}, lens, sizeof lens},
    };
    sharc_batch b = {9, 0, 2, t, NULL}, *got = NULL;
    open_pair(NULL);
    ck_assert_int_eq(sharc__bcast_send(src, &b), 0);
    ck_assert_int_eq(tape_len, 5);
    ck_assert_ptr_ne(tape[4].src, audio);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    check_same(&b, got);
    ck_assert_uint_eq(got->step, 9);
    sharc_batch_release(got);
    close_pair();
}
END_TEST

START_TEST(stop_ends_in_lockstep_and_stays_ended)
{
    sharc_batch *got = (sharc_batch *)1;
    open_pair(NULL);
    ck_assert_int_eq(sharc__bcast_send_stop(src), 0);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_END);
    ck_assert_ptr_null(got);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_END);
    ck_assert_int_eq(tape_pos, 4);
    ck_assert_int_eq(sharc__bcast_send_stop(src), SHARC_ERR(EINVAL));
    ck_assert_int_eq(tape_len, 4);
    close_pair();
}
END_TEST

START_TEST(source_error_reaches_peers)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(NULL);
    sharc_batch *b = pooled_batch(pool, 2, 10, 0), *got = NULL;
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    ck_assert_int_eq(sharc__bcast_send_error(src, SHARC_ERR_DECODE,
                                             "corrupt FLAC in rec.000003.tar member u9.flac"),
                     0);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    check_same(b, got);
    sharc_batch_release(got);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_REMOTE);
    ck_assert_str_eq(sharc__bcast_error(peer),
                     "source rank 0: corrupt FLAC in rec.000003.tar member u9.flac");
    ck_assert_str_eq(sharc__bcast_remote_message(peer),
                     "corrupt FLAC in rec.000003.tar member u9.flac");
    ck_assert_int_eq(sharc__bcast_remote_code(peer), SHARC_ERR_DECODE);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_REMOTE);
    ck_assert_ptr_nonnull(strstr(sharc__bcast_error(peer), "corrupt FLAC"));
    sharc_batch_release(b);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

START_TEST(frame_over_cap_is_sent_as_error)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__bcast_settings s;
    sharc__bcast_default_settings(&s);
    s.max_frame_bytes = 1 << 20;
    s.source_rank = 4;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(&s);
    sharc_batch *b = pooled_batch(pool, 8, 40000, 1), *got = NULL;
    ck_assert_int_eq(sharc__bcast_send(src, b), SHARC_ERR_TOO_LARGE);
    ck_assert_int_eq(tape_len, 4); /* handshake, the ERROR control block, status: no payload */
    ck_assert_ptr_nonnull(strstr(sharc__bcast_error(src), "over the cap of 1048576 bytes"));
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_REMOTE);
    ck_assert_ptr_nonnull(strstr(sharc__bcast_error(peer), "source rank 4: frame for step 1 is"));
    ck_assert_int_eq(sharc__bcast_remote_code(peer), SHARC_ERR_TOO_LARGE);
    sharc_batch_release(b);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

START_TEST(bad_tensor_is_sent_as_error)
{
    static float x[4];
    sharc_tensor t[2] = {
        {"audio", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 0, 1, {4}, x, sizeof x},
        {"audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, {4}, x, sizeof x},
    };
    sharc_batch b = {0, 0, 2, t, NULL}, *got = NULL;
    open_pair(NULL);
    ck_assert_int_eq(sharc__bcast_send(src, &b), SHARC_ERR_UNSUPPORTED);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_REMOTE);
    ck_assert_ptr_nonnull(strstr(sharc__bcast_error(peer), "tensor 'audio' is in CUDA memory"));
    close_pair();
}
END_TEST

START_TEST(backpressure_starts_no_collective)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__bcast_settings s;
    sharc__bcast_default_settings(&s);
    s.max_held = 1;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(&s);
    sharc_batch *b = pooled_batch(pool, 2, 10, 0), *first = NULL, *second = NULL;
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    ck_assert_int_eq(sharc__bcast_recv(peer, &first), 0);
    ck_assert_int_eq(sharc__bcast_recv(peer, &second), SHARC_ERR_BACKPRESSURE);
    ck_assert_int_eq(tape_pos, 4);
    ck_assert_ptr_nonnull(strstr(sharc__bcast_error(peer), "held"));
    sharc_batch_release(first);
    ck_assert_int_eq(sharc__bcast_recv(peer, &second), 0);
    check_same(b, second);
    sharc_batch_release(second);
    sharc_batch_release(b);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

START_TEST(corrupt_control_block_is_rejected)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(NULL);
    sharc_batch *b = pooled_batch(pool, 2, 10, 0), *got = NULL;
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    tape[2].bytes[70] ^= 0x10; /* inside the first descriptor's name */
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_FRAME);
    ck_assert_ptr_nonnull(strstr(sharc__bcast_error(peer), "frame from source rank 0"));
    ck_assert_ptr_nonnull(strstr(sharc__bcast_error(peer), "checksum"));
    ck_assert_ptr_null(got);
    sharc_batch_release(b);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

START_TEST(handshake_mismatch_fails_at_step_0)
{
    sharc__bcast_settings a, b;
    sharc__bcast_default_settings(&a);
    sharc__bcast_default_settings(&b);
    b.max_frame_bytes = 1 << 20;
    open_pair_with(&a, &b);
    ck_assert_int_eq(sharc__bcast_send_stop(src), 0); /* the tape cannot tell the source */
    sharc_batch *got = NULL;
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_SETTINGS);
    ck_assert_str_eq(sharc__bcast_error(peer), "settings differ in the broadcast group: "
                                               "max_frame_bytes is 4294967296 on source rank 0 "
                                               "but 1048576 on rank 1");
    ck_assert_int_eq(tape_pos, 2); /* handshake and status word: no step was started */
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_SETTINGS);
    close_pair();
}
END_TEST

START_TEST(source_failure_after_a_step_goes_out_with_the_next)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(NULL);
    sharc_batch *b = pooled_batch(pool, 2, 10, 0), *got = NULL;
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    ck_assert_int_eq(sharc__bcast_fail(src, SHARC_ERR_IO, "cannot write state.bin: No space"), 0);
    ck_assert(sharc__bcast_has_pending(src));
    ck_assert_int_eq(sharc__bcast_send(src, b), SHARC_ERR_IO);
    ck_assert_str_eq(sharc__bcast_error(src), "cannot write state.bin: No space");
    ck_assert_int_eq(sharc__bcast_send(src, b), SHARC_ERR(EINVAL)); /* ended */
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    sharc_batch_release(got);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_REMOTE);
    ck_assert_str_eq(sharc__bcast_error(peer), "source rank 0: cannot write state.bin: No space");
    ck_assert_int_eq(sharc__bcast_remote_code(peer), SHARC_ERR_IO);
    sharc_batch_release(b);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

START_TEST(peer_failure_is_reported_before_the_payload)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(NULL);
    sharc_batch *b = pooled_batch(pool, 8, 40000, 5), *got = NULL; /* 1.28 MB: a payload */
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    ck_assert_int_eq(sharc__bcast_send(src, b), 0);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    sharc_batch_release(got);
    ck_assert_int_eq(sharc__bcast_fail(peer, SHARC_ERR_IO, "cannot write dump.npy"), 0);
    int before = tape_pos;
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_IO);
    ck_assert_str_eq(sharc__bcast_error(peer), "cannot write dump.npy");
    /* control block and status word read; the payload collective was never joined */
    ck_assert_int_eq(tape_pos, before + 2);
    ck_assert_ptr_null(got);
    ck_assert_int_eq(sharc__bcast_fail(peer, SHARC_ERR_IO, "again"), SHARC_ERR_IO);
    sharc_batch_release(b);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

START_TEST(steady_state_allocates_nothing)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc_allocator a = tu_counting_allocator(&allocations);
    sharc__ctx_init(&ctx, &a, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(NULL);
    int before = 0;
    for (int step = 0; step < 12; step++) {
        if (step == 2)
            before = allocations;
        sharc_batch *b = pooled_batch(pool, 4, 30000 - step, step), *got = NULL;
        ck_assert_int_eq(sharc__bcast_send(src, b), 0);
        ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
        check_same(b, got);
        sharc_batch_release(got);
        sharc_batch_release(b);
    }
    ck_assert_int_eq(allocations, before);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

/*
 * Device memory for the tape transport: host memory stands in for it (the tape copies bytes
 * whatever the device), and each allocation's ordinal is recorded.
 */
static int fake_dev_live, fake_dev_ordinal = -1;

static int fake_dev_alloc(sharc__ctx *ctx, void **ptr, size_t size, int ordinal)
{
    (void)ctx;
    *ptr = aligned_alloc(256, (size + 255) / 256 * 256); /* as aligned as cudaMalloc's */
    fake_dev_live += *ptr != NULL;
    fake_dev_ordinal = ordinal;
    return *ptr ? 0 : SHARC_ERR(ENOMEM);
}

static void fake_dev_free(sharc__ctx *ctx, void *ptr, int ordinal)
{
    (void)ctx;
    (void)ordinal;
    free(ptr);
    fake_dev_live--;
}

static const sharc__device_ops fake_dev_ops = {fake_dev_alloc, fake_dev_free};

/* Host memory in use through the transports' allocator (open_device_pair). */
static int live_host;

static void *live_alloc(void *cookie, size_t size, size_t align)
{
    void *p = NULL;
    (void)cookie;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1))
        return NULL;
    live_host++;
    return p;
}

static void live_free(void *cookie, void *ptr)
{
    (void)cookie;
    live_host -= ptr != NULL;
    free(ptr);
}

/* A source and a peer over a tape, both able to carry device tensors (the peer's own
 * device is `peer_ordinal`). */
static void open_device_pair_with(int peer_ordinal, const sharc__bcast_settings *bs)
{
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.allocator.cookie = NULL;
    ts.allocator.alloc = live_alloc;
    ts.allocator.free = live_free;
    tape_len = tape_pos = 0;
    live_host = 0;
    fake_dev_live = 0;
    fake_dev_ordinal = -1;
    ck_assert_int_eq(sharc__transport_new(&src_t, &tape_ops, &ts, 0, 2), 0);
    ck_assert_int_eq(sharc__transport_new(&peer_t, &tape_ops, &ts, 1, 2), 0);
    ck_assert_int_eq(sharc__transport_set_device(src_t, &fake_dev_ops, 0), 0);
    ck_assert_int_eq(sharc__transport_set_device(peer_t, &fake_dev_ops, peer_ordinal), 0);
    ck_assert_int_eq(sharc__bcast_open(&src, src_t, bs), 0);
    ck_assert_int_eq(sharc__bcast_open(&peer, peer_t, bs), 0);
}

static void open_device_pair(int peer_ordinal)
{
    open_device_pair_with(peer_ordinal, NULL);
}

/*
 * A batch whose host tensors fit the control block but that also has device tensors: the
 * control block carries the host bytes inline and step 3 carries the device tensors alone,
 * on both sides. (The source used to broadcast a host payload from NULL there, which the
 * peer, returning after the inline copy, never joined.) A device tensor of zero bytes
 * starts no collective on either side.
 */
START_TEST(inline_batch_with_device_tensors)
{
    static float feats[2][300];
    static int32_t lens[2] = {300, 17};
    for (int i = 0; i < 600; i++)
        feats[i / 300][i % 300] = (float)i * 0.25f;
    sharc_tensor t[3] = {
        {"features", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 0, 2, {2, 300}, feats, sizeof feats},
        {"feature_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, {2}, lens, sizeof lens},
        {"empty", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 0, 2, {2, 0}, feats, 0},
    };
    sharc_batch b = {5, 1, 3, t, NULL}, *got = NULL;
    open_device_pair(0);
    ck_assert_int_eq(sharc__bcast_send(src, &b), 0);
    /* handshake and status, control block (lens inline) and status, then the features */
    ck_assert_int_eq(tape_len, 5);
    ck_assert_uint_eq(tape[2].n, 65536);
    ck_assert_uint_eq(tape[4].n, sizeof feats);
    ck_assert_ptr_eq(tape[4].src, feats);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    ck_assert_int_eq(tape_pos, 5);
    ck_assert_uint_eq(sharc__bcast_collectives(peer), sharc__bcast_collectives(src));
    check_same(&b, got);
    ck_assert_int_eq(sharc_batch_tensor(got, "features")->device, SHARC_DEVICE_CUDA);
    ck_assert_int_eq(((const int32_t *)sharc_batch_tensor(got, "feature_lens")->data)[1], 17);
    ck_assert_uint_eq(got->step, 5);
    sharc_batch_release(got);

    /* Only a zero-byte device tensor besides the inline host bytes: no third collective. */
    sharc_tensor t2[2] = {t[1], t[2]};
    sharc_batch b2 = {6, 1, 2, t2, NULL};
    ck_assert_int_eq(sharc__bcast_send(src, &b2), 0);
    ck_assert_int_eq(tape_len, 7);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    ck_assert_int_eq(tape_pos, 7);
    ck_assert_uint_eq(sharc_batch_tensor(got, "empty")->nbytes, 0);
    ck_assert_uint_eq(got->step, 6);
    sharc_batch_release(got);

    /* A host payload over the control block and a device tensor: one group of both. */
    static float audio[40000];
    for (int i = 0; i < 40000; i++)
        audio[i] = (float)-i;
    sharc_tensor t3[2] = {
        {"audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 1, {40000}, audio, sizeof audio},
        t[0],
    };
    sharc_batch b3 = {7, 1, 2, t3, NULL};
    ck_assert_int_eq(sharc__bcast_send(src, &b3), 0);
    ck_assert_int_eq(tape_len, 11);
    ck_assert_uint_eq(tape[9].n, sizeof audio);
    ck_assert_uint_eq(tape[10].n, sizeof feats);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    ck_assert_int_eq(tape_pos, 11);
    check_same(&b3, got);
    sharc_batch_release(got);
    close_pair();
    ck_assert_int_eq(fake_dev_live, 0);
}
END_TEST

/*
 * A peer allocates device tensors on its own transport's device: the source's ordinal in
 * the descriptors (3 here) names a device of another process. The batch says the peer's.
 */
START_TEST(peer_allocates_on_its_own_device)
{
    static uint8_t bytes[5000];
    for (int i = 0; i < 5000; i++)
        bytes[i] = (uint8_t)(i * 7);
    sharc_tensor t = {"features", SHARC_DTYPE_U8, SHARC_DEVICE_CUDA, 3, 1, {5000}, bytes, 5000};
    sharc_batch b = {0, 0, 1, &t, NULL}, *got = NULL;
    open_device_pair(1);
    ck_assert_int_eq(sharc__bcast_send(src, &b), 0);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    ck_assert_int_eq(fake_dev_ordinal, 1);
    ck_assert_int_eq(got->tensors[0].device, SHARC_DEVICE_CUDA);
    ck_assert_int_eq(got->tensors[0].device_ordinal, 1);
    ck_assert_mem_eq(got->tensors[0].data, bytes, 5000);
    sharc_batch_release(got);
    close_pair();
    ck_assert_int_eq(fake_dev_live, 0);
}
END_TEST

/*
 * A device batch released after its transport was closed frees its memory through the
 * transport's heap, which outlives the transport until then (ASan sees any use after free);
 * every host allocation of the transport and the heap is freed by the last release.
 */
START_TEST(device_batch_released_after_close)
{
    static uint8_t bytes[3000];
    memset(bytes, 0x5a, sizeof bytes);
    sharc_tensor t = {"features", SHARC_DTYPE_U8, SHARC_DEVICE_CUDA, 0, 1, {3000}, bytes, 3000};
    sharc_batch b = {0, 0, 1, &t, NULL}, *got = NULL;
    open_device_pair(0);
    ck_assert_int_eq(sharc__bcast_send(src, &b), 0);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    close_pair();
    ck_assert_int_eq(fake_dev_live, 1);
    ck_assert_int_gt(live_host, 0); /* the heap and the pool wait for the batch */
    ck_assert_mem_eq(got->tensors[0].data, bytes, 3000);
    sharc_batch_release(got);
    ck_assert_int_eq(fake_dev_live, 0);
    ck_assert_int_eq(live_host, 0);
}
END_TEST

/*
 * A device tensor over a transport that cannot carry device memory (none was given to the
 * mpi transport): the source sends an ERROR frame naming the transport, the peers raise it
 * as a remote error, and the tensor's pointer (not device memory here) is never read.
 */
START_TEST(device_tensor_over_host_transport_is_an_error)
{
    static const sharc__transport_ops host_only = {.name = "mpi"};
    sharc__transport_ops ops = tape_ops;
    ops.name = host_only.name;
    sharc_tensor t[2] = {
        {"lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, {1}, (void *)"abcd", 4},
        {"features", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 0, 1, {8}, (void *)16, 32},
    };
    sharc_batch b = {3, 0, 2, t, NULL}, *got = NULL;
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    tape_len = tape_pos = 0;
    ck_assert_int_eq(sharc__transport_new(&src_t, &ops, &ts, 0, 2), 0);
    ck_assert_int_eq(sharc__transport_new(&peer_t, &ops, &ts, 1, 2), 0);
    ck_assert_int_eq(sharc__bcast_open(&src, src_t, NULL), 0);
    ck_assert_int_eq(sharc__bcast_open(&peer, peer_t, NULL), 0);
    const char *want = "tensor 'features' is in CUDA memory but the mpi transport cannot carry "
                       "device tensors (give it this rank's CUDA device with "
                       "sharc_transport_mpi_set_device)";
    ck_assert_int_eq(sharc__bcast_send(src, &b), SHARC_ERR_UNSUPPORTED);
    ck_assert_str_eq(sharc__bcast_error(src), want);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_REMOTE);
    ck_assert_ptr_null(got);
    ck_assert_str_eq(sharc__bcast_remote_message(peer), want);
    ck_assert_int_eq(sharc__bcast_remote_code(peer), SHARC_ERR_UNSUPPORTED);
    char full[512];
    snprintf(full, sizeof full, "source rank 0: %s", want);
    ck_assert_str_eq(sharc__bcast_error(peer), full);
    close_pair();
}
END_TEST

/*
 * A transport that broadcasts device tensors in place (NCCL) cannot send one from another
 * device than its own: an ERROR frame naming both devices, and no collective of the tensor.
 */
START_TEST(device_tensor_on_another_device_than_an_in_place_transport)
{
    sharc__transport_ops ops = tape_ops;
    ops.device_in_place = 1;
    static uint8_t bytes[64];
    sharc_tensor t = {"features", SHARC_DTYPE_U8, SHARC_DEVICE_CUDA, 3, 1, {64}, bytes, 64};
    sharc_batch b = {4, 0, 1, &t, NULL}, *got = NULL;
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    tape_len = tape_pos = 0;
    ck_assert_int_eq(sharc__transport_new(&src_t, &ops, &ts, 0, 2), 0);
    ck_assert_int_eq(sharc__transport_new(&peer_t, &ops, &ts, 1, 2), 0);
    ck_assert_int_eq(sharc__transport_set_device(src_t, &fake_dev_ops, 0), 0);
    ck_assert_int_eq(sharc__transport_set_device(peer_t, &fake_dev_ops, 0), 0);
    ck_assert_int_eq(sharc__bcast_open(&src, src_t, NULL), 0);
    ck_assert_int_eq(sharc__bcast_open(&peer, peer_t, NULL), 0);
    const char *want = "tensor 'features' is on CUDA device 3, but the tape transport "
                       "broadcasts device tensors in place from its own device 0";
    ck_assert_int_eq(sharc__bcast_send(src, &b), SHARC_ERR(EINVAL));
    ck_assert_str_eq(sharc__bcast_error(src), want);
    ck_assert_int_eq(tape_len, 4); /* handshake, the ERROR control block, status */
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_REMOTE);
    ck_assert_ptr_null(got);
    ck_assert_str_eq(sharc__bcast_remote_message(peer), want);
    /* The same tensor on the transport's device goes out. */
    t.device_ordinal = 0;
    close_pair();
    open_device_pair(0);
    ck_assert_int_eq(sharc__bcast_send(src, &b), 0);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    ck_assert_mem_eq(got->tensors[0].data, bytes, 64);
    sharc_batch_release(got);
    close_pair();
}
END_TEST

/* Device bytes count toward the frame cap: over it, an ERROR frame and no collective. */
START_TEST(device_bytes_over_the_frame_cap)
{
    static uint8_t bytes[8192];
    sharc_tensor t = {"features", SHARC_DTYPE_U8, SHARC_DEVICE_CUDA, 0, 1, {8192}, bytes, 8192};
    sharc_batch b = {2, 0, 1, &t, NULL}, *got = NULL;
    sharc__bcast_settings bs;
    sharc__bcast_default_settings(&bs);
    bs.max_frame_bytes = 65536 + 4096;
    open_device_pair_with(0, &bs);
    ck_assert_int_eq(sharc__bcast_send(src, &b), SHARC_ERR_TOO_LARGE);
    const char *want = "frame for step 2 is 73728 bytes, over the cap of 69632 bytes";
    ck_assert_str_eq(sharc__bcast_error(src), want);
    ck_assert_int_eq(tape_len, 4); /* handshake, the ERROR control block, status */
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_REMOTE);
    ck_assert_str_eq(sharc__bcast_remote_message(peer), want);
    ck_assert_int_eq(tape_pos, 4);
    ck_assert_int_eq(fake_dev_live, 0);
    close_pair();
}
END_TEST

START_TEST(self_transport_sends_nothing)
{
    sharc_transport *t = NULL;
    sharc__bcast *bc = NULL;
    static int32_t v[2] = {1, 2};
    sharc_tensor tt = {"audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, {2}, v, 8};
    sharc_batch b = {0, 0, 1, &tt, NULL}, *got = NULL;
    ck_assert_int_eq(sharc_transport_self_open(&t, NULL), 0);
    ck_assert_str_eq(sharc_transport_name(t), "self");
    ck_assert_int_eq(sharc_transport_rank(t), 0);
    ck_assert_int_eq(sharc_transport_size(t), 1);
    ck_assert_int_eq(sharc__bcast_open(&bc, t, NULL), 0);
    ck_assert_int_eq(sharc__bcast_send(bc, &b), 0);
    ck_assert_int_eq(sharc__bcast_send_stop(bc), 0);
    ck_assert_uint_eq(sharc__bcast_collectives(bc), 0);
    ck_assert_int_eq(sharc__bcast_recv(bc, &got), SHARC_ERR(EINVAL));
    sharc__bcast_close(&bc);
    sharc_transport_close(&t);
    ck_assert_ptr_null(t);
    sharc_transport_close(&t);
}
END_TEST

/* A transport failure names the step whose collectives were under way: here a peer's status
 * round of step 1, after its control block came. */
START_TEST(transport_failure_names_its_step)
{
    sharc__ctx ctx;
    sharc__batch_pool *pool = NULL;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool_create(&pool, &ctx, 2, NULL);
    open_pair(NULL);
    sharc_batch *b0 = pooled_batch(pool, 2, 100, 0), *b1 = pooled_batch(pool, 2, 100, 1);
    sharc_batch *got = NULL;
    ck_assert_int_eq(sharc__bcast_send(src, b0), 0);
    ck_assert_int_eq(sharc__bcast_send(src, b1), 0);
    ck_assert_int_eq(tape_len, 6); /* handshake, step 0, step 1: each with its status word */
    tape_len = 5;                  /* step 1's status word is lost */
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), 0);
    sharc_batch_release(got);
    ck_assert_int_eq(sharc__bcast_recv(peer, &got), SHARC_ERR_MPI);
    ck_assert_str_eq(sharc__bcast_error(peer), "step 1: broadcast over tape failed: tape is empty");
    tape_len = 6;
    sharc_batch_release(b0);
    sharc_batch_release(b1);
    close_pair();
    sharc__batch_pool_destroy(&pool);
}
END_TEST

/* A collective that fails inside a group (a payload timeout) keeps its text through the
 * group's end, which a broken transport still refuses; later calls say it was aborted. */
START_TEST(failure_in_a_group_keeps_its_text)
{
    sharc_transport *t = NULL;
    ck_assert_int_eq(sharc_transport_self_open(&t, NULL), 0);
    ck_assert_int_eq(sharc__transport_group_begin(t), 0);
    sharc__fail(&t->ctx, SHARC_ERR_TIMEOUT, "MPI_Ibcast of 8 bytes did not complete");
    sharc__transport_abort(t);
    ck_assert_int_eq(sharc__transport_group_end(t), SHARC_ERR_UNSUPPORTED);
    ck_assert_str_eq(sharc_transport_last_error(t), "MPI_Ibcast of 8 bytes did not complete");
    uint32_t word = 0;
    ck_assert_int_eq(sharc__transport_allreduce_max(t, &word), SHARC_ERR_UNSUPPORTED);
    ck_assert_str_eq(sharc_transport_last_error(t), "self transport was aborted after an earlier "
                                                    "failure");
    sharc_transport_close(&t);
}
END_TEST

static Suite *bcast_suite(void)
{
    Suite *s = suite_create("bcast");
    TCase *tc = tcase_create("protocol");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, small_batch_is_one_data_collective);
    tcase_add_test(tc, large_pooled_batch_is_sent_without_copy);
    tcase_add_test(tc, hand_built_batch_is_packed);
    tcase_add_test(tc, stop_ends_in_lockstep_and_stays_ended);
    tcase_add_test(tc, source_error_reaches_peers);
    tcase_add_test(tc, frame_over_cap_is_sent_as_error);
    tcase_add_test(tc, bad_tensor_is_sent_as_error);
    tcase_add_test(tc, backpressure_starts_no_collective);
    tcase_add_test(tc, corrupt_control_block_is_rejected);
    tcase_add_test(tc, handshake_mismatch_fails_at_step_0);
    tcase_add_test(tc, source_failure_after_a_step_goes_out_with_the_next);
    tcase_add_test(tc, peer_failure_is_reported_before_the_payload);
    tcase_add_test(tc, steady_state_allocates_nothing);
    tcase_add_test(tc, self_transport_sends_nothing);
    tcase_add_test(tc, failure_in_a_group_keeps_its_text);
    tcase_add_test(tc, transport_failure_names_its_step);
    tcase_add_test(tc, inline_batch_with_device_tensors);
    tcase_add_test(tc, peer_allocates_on_its_own_device);
    tcase_add_test(tc, device_batch_released_after_close);
    tcase_add_test(tc, device_tensor_over_host_transport_is_an_error);
    tcase_add_test(tc, device_bytes_over_the_frame_cap);
    tcase_add_test(tc, device_tensor_on_another_device_than_an_in_place_transport);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(bcast_suite());
}

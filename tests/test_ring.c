/* The byte ring between a transfer and its reader: every byte through once and in order,
 * across the wrap and between threads, copied out or used in place; the ends' closing; a
 * read's time limit. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "io/ring.h"
#include "testutil.h"

/* Byte i of the test stream. */
static uint8_t byte_at(uint64_t i)
{
    uint64_t x = i * 0x9E3779B97F4A7C15ull;
    return (uint8_t)(x >> 56);
}

static uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* A ring of 100 bytes through which in[i] = i went 70 in, 60 out, 70 (in[30..100)) in: the
 * second write wraps around the end of the buffer, and 80 bytes wait from position 60 on. */
static void wrapped_ring(sharc__ring *q, sharc__ctx *ctx, uint8_t in[100])
{
    uint8_t out[60];
    sharc__ctx_init(ctx, NULL, NULL);
    ck_assert_int_eq(sharc__ring_init(q, ctx, 100), 0);
    for (int i = 0; i < 100; i++)
        in[i] = (uint8_t)i;
    ck_assert_int_eq(sharc__ring_write(q, in, 70), 0);
    ck_assert_int_eq(sharc__ring_read(q, out, 60, -1), 60);
    ck_assert(memcmp(out, in, 60) == 0);
    ck_assert_int_eq(sharc__ring_write(q, in + 30, 70), 0);
    ck_assert_uint_eq(q->used, 80);
    ck_assert_uint_eq(q->head, 60);
}

START_TEST(keeps_order_across_the_wrap)
{
    sharc__ctx ctx;
    sharc__ring q;
    uint8_t in[100], out[100];
    wrapped_ring(&q, &ctx, in);
    /* What a read asks past what is there is not waited for once the writer is done. */
    sharc__ring_close_write(&q);
    ck_assert_int_eq(sharc__ring_read(&q, out, 100, -1), 80);
    ck_assert(memcmp(out, in + 60, 10) == 0);
    ck_assert(memcmp(out + 10, in + 30, 70) == 0);
    ck_assert_int_eq(sharc__ring_read(&q, out, 100, -1), 0);
    ck_assert_int_eq(sharc__ring_read(&q, out, 1, 0), 0);
    /* Reset: empty and open again. */
    sharc__ring_reset(&q);
    ck_assert_int_eq(sharc__ring_write(&q, "xyz", 3), 0);
    ck_assert_int_eq(sharc__ring_read(&q, out, 3, -1), 3);
    ck_assert(memcmp(out, "xyz", 3) == 0);
    sharc__ring_free(&q, &ctx);
    ck_assert_ptr_null(q.data);
}
END_TEST

/* Peek points into the ring up to its end; the bytes stay until consumed. */
START_TEST(peeks_in_place_up_to_the_wrap)
{
    sharc__ctx ctx;
    sharc__ring q;
    uint8_t in[100];
    wrapped_ring(&q, &ctx, in);
    const void *p = NULL, *again = NULL;
    ck_assert_int_eq(sharc__ring_peek(&q, &p, 100, -1), 40); /* up to the end of the buffer */
    ck_assert_ptr_eq(p, q.data + 60);
    ck_assert(memcmp(p, in + 60, 10) == 0);
    ck_assert(memcmp((const uint8_t *)p + 10, in + 30, 30) == 0);
    ck_assert_int_eq(sharc__ring_peek(&q, &again, 100, -1), 40);
    ck_assert_ptr_eq(again, p);
    sharc__ring_consume(&q, 25);
    ck_assert_int_eq(sharc__ring_peek(&q, &p, 10, -1), 10);
    ck_assert_ptr_eq(p, q.data + 85);
    ck_assert(memcmp(p, in + 45, 10) == 0);
    sharc__ring_consume(&q, 15);
    ck_assert_int_eq(sharc__ring_peek(&q, &p, 100, -1), 40); /* after the wrap */
    ck_assert_ptr_eq(p, q.data);
    ck_assert(memcmp(p, in + 60, 40) == 0);
    sharc__ring_consume(&q, 40);
    sharc__ring_close_write(&q);
    ck_assert_int_eq(sharc__ring_peek(&q, &p, 100, -1), 0);
    sharc__ring_free(&q, &ctx);
}
END_TEST

typedef struct {
    sharc__ring *q;
    uint64_t total;
    uint32_t seed;
    int rc;
} writer_arg;

static void *writer(void *p)
{
    writer_arg *w = p;
    uint8_t piece[40000];
    uint64_t at = 0;
    while (at < w->total) {
        size_t n = 1 + next_rand(&w->seed) % sizeof piece;
        if (n > w->total - at)
            n = (size_t)(w->total - at);
        for (size_t i = 0; i < n; i++)
            piece[i] = byte_at(at + i);
        if ((w->rc = sharc__ring_write(w->q, piece, n)) < 0)
            break;
        at += n;
    }
    sharc__ring_close_write(w->q);
    return NULL;
}

/* Every byte between two threads, taken by copies (_i 0) or in place (_i 1). */
START_TEST(passes_every_byte_between_threads)
{
    const int in_place = _i;
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__ring q;
    ck_assert_int_eq(sharc__ring_init(&q, &ctx, 65536 + 7), 0);
    writer_arg w = {.q = &q, .total = 20u << 20, .seed = 1};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, writer, &w), 0);
    static uint8_t buf[100000];
    uint32_t seed = 2;
    uint64_t at = 0, bad = UINT64_MAX;
    ssize_t k;
    for (;;) {
        const size_t want = 1 + next_rand(&seed) % sizeof buf;
        const uint8_t *got = buf;
        if (in_place)
            k = sharc__ring_peek(&q, (const void **)&got, want, -1);
        else
            k = sharc__ring_read(&q, buf, want, -1);
        if (k <= 0)
            break;
        for (ssize_t i = 0; i < k && bad == UINT64_MAX; i++)
            if (got[i] != byte_at(at + (uint64_t)i))
                bad = at + (uint64_t)i;
        at += (uint64_t)k;
        if (in_place)
            sharc__ring_consume(&q, (size_t)k);
    }
    pthread_join(t, NULL);
    ck_assert_int_eq(k, 0);
    ck_assert_int_eq(w.rc, 0);
    ck_assert_uint_eq(bad, UINT64_MAX);
    ck_assert_uint_eq(at, w.total);
    sharc__ring_free(&q, &ctx);
}
END_TEST

START_TEST(a_closed_reader_fails_a_waiting_writer)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__ring q;
    ck_assert_int_eq(sharc__ring_init(&q, &ctx, 4096), 0);
    /* The writer fills the ring and waits for room that never comes. */
    writer_arg w = {.q = &q, .total = 1u << 20, .seed = 3};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, writer, &w), 0);
    uint8_t b[16];
    ck_assert_int_eq(sharc__ring_read(&q, b, sizeof b, -1), 16);
    ck_assert_uint_eq(b[15], byte_at(15));
    sharc__ring_close_read(&q);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, -1);
    ck_assert_int_eq(sharc__ring_write(&q, b, 1), -1);
    sharc__ring_free(&q, &ctx);
}
END_TEST

START_TEST(a_read_waits_no_longer_than_asked)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__ring q;
    ck_assert_int_eq(sharc__ring_init(&q, &ctx, 4096), 0);
    uint8_t b[2048];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(sharc__ring_read(&q, b, sizeof b, 50), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_int_ge((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, 50);
    /* Fewer bytes than a waiting read is woken for (a quarter of the ring) are still
     * given once its time is up. */
    ck_assert_int_eq(sharc__ring_write(&q, "abc", 3), 0);
    ck_assert_int_eq(sharc__ring_read(&q, b, sizeof b, 20), 3);
    ck_assert(memcmp(b, "abc", 3) == 0);
    sharc__ring_free(&q, &ctx);
}
END_TEST

/* A writer that trickles (a server sending a byte now and then) never fills a quarter of
 * the ring: a read without a time limit still gets what was written, after a lull. */
START_TEST(a_read_without_limit_gets_a_trickle)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__ring q;
    ck_assert_int_eq(sharc__ring_init(&q, &ctx, 4096), 0);
    uint8_t b[2048];
    ck_assert_int_eq(sharc__ring_write(&q, "xy", 2), 0);
    ck_assert_int_eq(sharc__ring_read(&q, b, sizeof b, -1), 2);
    ck_assert(memcmp(b, "xy", 2) == 0);
    const void *p = NULL;
    ck_assert_int_eq(sharc__ring_write(&q, "z", 1), 0);
    ck_assert_int_eq(sharc__ring_peek(&q, &p, sizeof b, -1), 1);
    ck_assert(memcmp(p, "z", 1) == 0);
    sharc__ring_consume(&q, 1);
    sharc__ring_free(&q, &ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ring");
    TCase *tc = tcase_create("ring");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, keeps_order_across_the_wrap);
    tcase_add_test(tc, peeks_in_place_up_to_the_wrap);
    tcase_add_loop_test(tc, passes_every_byte_between_threads, 0, 2);
    tcase_add_test(tc, a_closed_reader_fails_a_waiting_writer);
    tcase_add_test(tc, a_read_waits_no_longer_than_asked);
    tcase_add_test(tc, a_read_without_limit_gets_a_trickle);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

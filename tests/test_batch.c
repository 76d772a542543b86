#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batching/batch.h"
#include "base/ctx.h"
#include "batching/frame.h"
#include "sharc/sharc.h"
#include "testutil.h"

static int allocations;

static sharc__ctx make_ctx(void)
{
    sharc__ctx ctx;
    sharc_allocator a = tu_counting_allocator(&allocations);
    sharc__ctx_init(&ctx, &a, NULL);
    return ctx;
}

/* A batch like collate makes: audio [B,T], lens, and a cut_id string column. */
static void fill(sharc_batch *b, int B, int T, const char *const *ids)
{
    int64_t s2[2] = {B, T}, s1[1] = {B}, so[1] = {B + 1};
    size_t total = 0;
    for (int i = 0; i < B; i++)
        total += strlen(ids[i]);
    int64_t sb[1] = {(int64_t)total};
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, s2), 0);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, s1), 1);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "cut_id_offsets", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, so),
        2);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "cut_id_bytes", SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1, sb), 3);
    ck_assert_int_eq(sharc__batch_finish(b), 0);
    float *audio = b->tensors[0].data;
    for (int i = 0; i < B * T; i++)
        audio[i] = (float)i * 0.5f;
    int32_t *lens = b->tensors[1].data, *off = b->tensors[2].data;
    char *bytes = b->tensors[3].data;
    off[0] = 0;
    for (int i = 0; i < B; i++) {
        lens[i] = T - i;
        memcpy(bytes + off[i], ids[i], strlen(ids[i]));
        off[i + 1] = off[i] + (int32_t)strlen(ids[i]);
    }
}

START_TEST(dtypes)
{
    ck_assert_uint_eq(sharc_dtype_size(SHARC_DTYPE_F32), 4);
    ck_assert_uint_eq(sharc_dtype_size(SHARC_DTYPE_I64), 8);
    ck_assert_uint_eq(sharc_dtype_size(SHARC_DTYPE_U8), 1);
    ck_assert_uint_eq(sharc_dtype_size(SHARC_DTYPE_BF16), 2);
    ck_assert_uint_eq(sharc_dtype_size((sharc_dtype)0), 0);
    ck_assert_str_eq(sharc_dtype_name(SHARC_DTYPE_F16), "f16");
    ck_assert_str_eq(sharc_dtype_name(SHARC_DTYPE_F64), "f64");
    ck_assert_str_eq(sharc_dtype_name((sharc_dtype)99), "unknown");
}
END_TEST

START_TEST(layout_lookup_and_strings)
{
    sharc__ctx ctx = make_ctx();
    sharc__batch_pool *pool = NULL;
    sharc_batch *b = NULL;
    static const char *const ids[] = {"utt-a", "b", "utt-ccc"};
    ck_assert_int_eq(sharc__batch_pool_create(&pool, &ctx, 2, NULL), 0);
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &b), 0);
    fill(b, 3, 100, ids);
    uint8_t *base;
    uint64_t len;
    ck_assert_int_eq(sharc__batch_payload(b, &base, &len), 1);
    ck_assert_ptr_eq(b->tensors[0].data, base);
    ck_assert_ptr_eq(b->tensors[1].data, base + 1280); /* 1200 bytes of audio, aligned */
    ck_assert_ptr_eq(b->tensors[2].data, base + 1536);
    ck_assert_ptr_eq(b->tensors[3].data, base + 1792);
    ck_assert_uint_eq(len, 1792 + 13);
    ck_assert_uint_eq((uintptr_t)base % 256, 0);
    const sharc_tensor *t = sharc_batch_tensor(b, "audio_lens");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(((int32_t *)t->data)[2], 98);
    ck_assert_ptr_null(sharc_batch_tensor(b, "features"));
    size_t n = 0;
    const char *s = sharc_batch_string(b, "cut_id", 2, &n);
    ck_assert_uint_eq(n, 7);
    ck_assert(memcmp(s, "utt-ccc", 7) == 0);
    s = sharc_batch_string(b, "cut_id", 1, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(s[0], 'b');
    ck_assert_ptr_null(sharc_batch_string(b, "cut_id", 3, &n));
    ck_assert_ptr_null(sharc_batch_string(b, "text", 0, &n));
    /* Offsets past the bytes (as a corrupt peer frame could carry) are refused. */
    ((int32_t *)b->tensors[2].data)[3] = 99;
    ck_assert_ptr_null(sharc_batch_string(b, "cut_id", 2, &n));
    sharc_batch_release(b);
    sharc__batch_pool_destroy(&pool);
    ck_assert_ptr_null(pool);
}
END_TEST

START_TEST(backpressure_and_reuse_without_allocation)
{
    sharc__ctx ctx = make_ctx();
    sharc__batch_pool *pool = NULL;
    sharc_batch *a = NULL, *b = NULL, *c = NULL;
    static const char *const ids[] = {"x", "y"};
    ck_assert_int_eq(sharc__batch_pool_create(&pool, &ctx, 2, NULL), 0);
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &a), 0);
    fill(a, 2, 1000, ids);
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &b), 0);
    fill(b, 2, 1000, ids);
    ck_assert_int_eq(sharc__batch_pool_held(pool), 2);
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &c), SHARC_ERR_BACKPRESSURE);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(sharc__batch_pool_error(pool), "all 2 batches are held"));
    /* Nothing was overwritten: a's data is intact. */
    ck_assert_float_eq(((float *)a->tensors[0].data)[1999], 999.5f);
    void *a_block = a->tensors[0].data;
    sharc_batch_release(a);
    sharc_batch_release(a); /* a second release of the same batch is harmless */
    ck_assert_int_eq(sharc__batch_pool_held(pool), 1);
    /* Steady state: same or smaller batches reuse the storage, no allocation. */
    int before = allocations;
    for (int step = 0; step < 50; step++) {
        ck_assert_int_eq(sharc__batch_pool_acquire(pool, &c), 0);
        ck_assert_uint_eq(c->n_tensors, 0);
        fill(c, 2, 900 + step % 100, ids);
        ck_assert_ptr_eq(c->tensors[0].data, a_block);
        sharc_batch_release(c);
    }
    ck_assert_int_eq(allocations, before);
    sharc_batch_release(b);
    sharc__batch_pool_destroy(&pool);
}
END_TEST

static void *release_in_thread(void *arg)
{
    sharc_batch_release(arg);
    return NULL;
}

START_TEST(release_from_another_thread_after_destroy)
{
    sharc__ctx ctx = make_ctx();
    sharc__batch_pool *pool = NULL;
    sharc_batch *b = NULL;
    static const char *const ids[] = {"held"};
    ck_assert_int_eq(sharc__batch_pool_create(&pool, &ctx, 1, NULL), 0);
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &b), 0);
    fill(b, 1, 10, ids);
    sharc__batch_pool_destroy(&pool);
    /* The held batch outlives its pool; its data are still readable. */
    size_t n;
    ck_assert(memcmp(sharc_batch_string(b, "cut_id", 0, &n), "held", 4) == 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, release_in_thread, b), 0);
    pthread_join(th, NULL);
    sharc_batch_release(NULL);
}
END_TEST

START_TEST(rejects_bad_tensors)
{
    sharc__ctx ctx = make_ctx();
    sharc__batch_pool *pool = NULL;
    sharc_batch *b = NULL;
    int64_t shape[2] = {2, 3}, huge[2] = {INT64_MAX / 2, 4};
    ck_assert_int_eq(sharc__batch_pool_create(&pool, &ctx, 1, NULL), 0);
    ck_assert_int_eq(sharc__batch_pool_create(&(sharc__batch_pool *){NULL}, &ctx, 0, NULL),
                     SHARC_ERR(EINVAL));
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &b), 0);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "audio", SHARC_DTYPE_F32, SHARC_DEVICE_CUDA, 0, 2, shape),
        SHARC_ERR_UNSUPPORTED);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, shape),
        SHARC_ERR_FRAME);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "a", (sharc_dtype)77, SHARC_DEVICE_HOST, 0, 2, shape),
        SHARC_ERR_FRAME);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "a", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, huge),
        SHARC_ERR_FRAME);
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "a", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 5, shape),
        SHARC_ERR_FRAME);
    for (int i = 0; i < SHARC__BATCH_MAX_TENSORS; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        ck_assert_int_eq(
            sharc__batch_add_tensor(b, name, SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1, shape), i);
    }
    ck_assert_int_eq(
        sharc__batch_add_tensor(b, "one_more", SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1, shape),
        SHARC_ERR_TOO_LARGE);
    sharc_batch_release(b);
    sharc__batch_pool_destroy(&pool);
}
END_TEST

/*
 * THPeligible of the mapping that holds `addr` in /proc/self/smaps: 1 or 0, or -1 where the
 * kernel does not say (not Linux, an older kernel) or huge pages are off on this system.
 */
static int thp_eligible(const void *addr)
{
    char line[512], mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(mode, sizeof mode, f))
            mode[0] = 0;
        fclose(f);
    }
    if (!strstr(mode, "[always]") && !strstr(mode, "[madvise]"))
        return -1;
    if (!(f = fopen("/proc/self/smaps", "r")))
        return -1;
    int inside = 0, eligible = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        else if (inside && sscanf(line, "THPeligible: %d", &eligible) == 1)
            break;
    }
    fclose(f);
    return eligible;
}

/* Payloads of 2 huge pages or more from the default allocator start on a huge page and are
 * marked for transparent huge pages; the data are as written. */
START_TEST(large_payloads_on_huge_pages)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__batch_pool *pool = NULL;
    sharc_batch *b = NULL;
    static const char *const ids[] = {"a", "b", "c", "d"};
    ck_assert_int_eq(sharc__batch_pool_create(&pool, &ctx, 1, NULL), 0);
    ck_assert_int_eq(sharc__batch_pool_acquire(pool, &b), 0);
    fill(b, 4, 1 << 20, ids); /* 16 MiB of audio */
    const float *audio = b->tensors[0].data;
#if defined(__linux__)
    ck_assert_uint_eq((uintptr_t)audio % SHARC__HUGE_PAGE, 0);
#endif
    ck_assert_float_eq(audio[(4 << 20) - 1], (float)((4 << 20) - 1) * 0.5f);
    int eligible = thp_eligible(audio + (2 << 20));
    if (eligible >= 0)
        ck_assert_int_eq(eligible, 1);
    sharc_batch_release(b);
    sharc__batch_pool_destroy(&pool);
}
END_TEST

static Suite *batch_suite(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, dtypes);
    tcase_add_test(tc, layout_lookup_and_strings);
    tcase_add_test(tc, backpressure_and_reuse_without_allocation);
    tcase_add_test(tc, release_from_another_thread_after_destroy);
    tcase_add_test(tc, rejects_bad_tensors);
    tcase_add_test(tc, large_payloads_on_huge_pages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(batch_suite());
}

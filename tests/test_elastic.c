/*
 * The elastic split (batching/elastic.c) against a model of the walk: old slots stopped
 * after any number of cuts, some of them still held by their samplers, then the remaining
 * work split over new slots, which may stop in turn and be split again. Over every
 * generation, every entry of every shard of every epoch is delivered exactly once.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "batching/bcut.h"
#include "batching/elastic.h"
#include "testutil.h"

enum { MAX_SHARDS = 6, MAX_LEN = 6, MAX_EPOCHS = 3, MAX_SLOTS = 8 };

static sharc__ctx ctx;
static sharc__dataset ds;
static uint64_t len[MAX_SHARDS];                  /* entries of each shard */
static int seen[MAX_EPOCHS][MAX_SHARDS][MAX_LEN]; /* deliveries of each entry */

/* One slot of one generation: its plan, and where it stopped. */
typedef struct slot {
    sharc__elastic_unit *units;
    size_t n_units;
    uint64_t start_epoch;
    int rank, size;
    sharc__elastic_old at; /* where it stopped */
    uint64_t held[MAX_EPOCHS * MAX_SHARDS * MAX_LEN];
    size_t n_held;
} slot;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t key_of(uint64_t epoch, uint32_t shard, uint64_t k)
{
    return ((epoch * ds.n_shards + shard) << SHARC__KEY_POS_BITS) | k;
}

/* An entry the slot's walk returned: delivered, or held by the sampler (1 in 3). */
static void take(slot *s, sharc__rng *rng, uint64_t epoch, uint32_t shard, uint64_t k)
{
    if (sharc__rng_below(rng, 3) == 0)
        s->held[s->n_held++] = key_of(epoch, shard, k);
    else
        seen[epoch][shard][k]++;
}

/*
 * The walk of slot `s` (its prologue, then its regular epochs), stopped after `cuts` cuts
 * (or at its end): fills s->at as the walk's position would be saved. Returns the cuts it
 * returned.
 */
static uint64_t walk(slot *s, uint64_t epochs, uint64_t cuts, sharc__rng *rng)
{
    sharc__elastic_old *o = &s->at;
    memset(o, 0, sizeof *o);
    o->dp_rank = s->rank;
    o->dp_size = s->size;
    o->units = s->units;
    o->n_units = s->n_units;
    o->start_epoch = s->start_epoch;
    o->pos.in_prologue = s->units != NULL || s->start_epoch > 0;
    uint64_t got = 0;
    if (cuts == 0)
        return 0;
    /* Stopped right after a cut: its shard still open, as the walk leaves it. */
    for (size_t i = 0; o->pos.in_prologue && i < s->n_units; i++) {
        const sharc__elastic_unit *u = &s->units[i];
        o->pos = (sharc__walk_pos){u->epoch, 0, u->shard, 0, 1, 0, 1, i + 1};
        for (uint64_t k = 0; k < len[u->shard]; k++) {
            o->pos.consumed = k + 1;
            if (sharc__walk_unit_has(u, k)) {
                take(s, rng, u->epoch, u->shard, k);
                if (++got == cuts)
                    return got;
            }
        }
        o->pos.shard_open = 0;
    }
    if (o->pos.in_prologue && s->start_epoch >= epochs)
        return got; /* the end, after the prologue */
    o->pos.in_prologue = 0;
    uint32_t every, first, order[MAX_SHARDS];
    sharc__dataset_cut_share(ds.n_shards, s->rank, s->size, &every, &first);
    for (uint64_t e = s->start_epoch; e < epochs; e++) {
        size_t n = sharc__dataset_epoch_order(&ds, 7, e, 1, s->rank, s->size, order);
        o->pos = (sharc__walk_pos){e, 0, 0, 0, 0, 0, 0, 0};
        for (size_t p = 0; p < n; p++) {
            o->pos = (sharc__walk_pos){e, p + 1, order[p], 0, 1, 0, 0, 0};
            for (uint64_t k = 0; k < len[order[p]]; k++) {
                o->pos.consumed = k + 1;
                if (k % every == first) {
                    take(s, rng, e, order[p], k);
                    if (++got == cuts)
                        return got;
                }
            }
            o->pos.shard_open = 0;
        }
    }
    return got;
}

/* The next generation: `next` new slots split the work `old` left of a plan of `epochs`
 * epochs (0: without end, as a repeating mixture's source). */
static void split(slot *old, int n_old, slot *next, int n_next, uint64_t epochs, uint64_t offset)
{
    sharc__elastic_old at[MAX_SLOTS];
    const uint64_t *keys[MAX_SLOTS];
    size_t n_keys[MAX_SLOTS];
    for (int d = 0; d < n_old; d++) {
        at[d] = old[d].at;
        qsort(old[d].held, old[d].n_held, sizeof old[d].held[0], cmp_u64);
        keys[d] = old[d].held;
        n_keys[d] = old[d].n_held;
    }
    /* A mixture's source starts the round where the sources before it left it. */
    sharc__elastic_plan plan = {&ds, 7, 1, epochs, offset};
    int owner[MAX_EPOCHS * MAX_SHARDS]; /* the new slot that took a visit's held cuts */
    size_t load[MAX_SLOTS] = {0}, largest = 0;
    for (size_t v = 0; v < MAX_EPOCHS * MAX_SHARDS; v++)
        owner[v] = -1;
    for (int s = 0; s < n_next; s++) {
        slot *n = &next[s];
        memset(n, 0, sizeof *n);
        n->rank = s;
        n->size = n_next;
        ck_assert_int_eq(sharc__elastic_split(&ctx, &plan, at, (size_t)n_old, s, n_next, &n->units,
                                              &n->n_units, &n->start_epoch, NULL),
                         0);
        /* The held cuts it takes are delivered first. */
        uint64_t mine[MAX_EPOCHS * MAX_SHARDS * MAX_LEN * MAX_SLOTS];
        size_t k = 0;
        ck_assert_int_eq(
            sharc__elastic_keys(&ctx, keys, n_keys, (size_t)n_old, s, n_next, mine, &k), 0);
        load[s] = k;
        for (size_t i = 0, run = 0; i < k; i++) {
            uint64_t key = mine[i];
            seen[sharc__key_epoch(key, ds.n_shards)][sharc__key_shard(key, ds.n_shards)]
                [sharc__key_position(key)]++;
            /* Every visit's keys went to this slot alone, in order. */
            uint64_t visit = sharc__key_visit(key);
            ck_assert(owner[visit] == -1 || owner[visit] == s);
            owner[visit] = s;
            ck_assert(i == 0 || mine[i - 1] < key);
            run = i > 0 && sharc__key_visit(mine[i - 1]) == visit ? run + 1 : 1;
            largest = run > largest ? run : largest;
        }
    }
    /* Balanced by count: the slots' loads differ by at most the largest visit's. */
    for (int s = 0; s < n_next; s++)
        for (int t = 0; t < n_next; t++)
            ck_assert_uint_le(load[s], load[t] + largest);
}

static void free_slots(slot *s, int n)
{
    for (int i = 0; i < n; i++)
        sharc__free(&ctx, s[i].units);
}

static void expect_each_once(uint64_t epochs, const char *what)
{
    for (uint64_t e = 0; e < epochs; e++)
        for (size_t sh = 0; sh < ds.n_shards; sh++)
            for (uint64_t k = 0; k < len[sh]; k++)
                ck_assert_msg(seen[e][sh][k] == 1,
                              "%s: epoch %llu shard %zu entry %llu seen %d times", what,
                              (unsigned long long)e, sh, (unsigned long long)k, seen[e][sh][k]);
}

/*
 * D slots stop anywhere, D' slots take over (and stop anywhere too), D'' finish. With
 * `forever`, the plan has no end (a repeating mixture's source): each split takes what the
 * old slots left up to the end of the latest epoch any of them had begun, the later epochs
 * planned afresh; the model walks such a plan up to a bound, and every entry of the epochs
 * below it is delivered once.
 */
static void three_generations(int forever)
{
    sharc__ctx_init(&ctx, NULL, NULL);
    static slot a[MAX_SLOTS], b[MAX_SLOTS], c[MAX_SLOTS];
    sharc__rng rng;
    sharc__rng_seed(&rng, forever ? 4321 : 1234);
    for (int trial = 0; trial < 3000; trial++) {
        memset(seen, 0, sizeof seen);
        ds.n_shards = 1 + sharc__rng_below(&rng, MAX_SHARDS);
        for (size_t i = 0; i < ds.n_shards; i++)
            len[i] = 1 + sharc__rng_below(&rng, MAX_LEN);
        uint64_t epochs = 1 + sharc__rng_below(&rng, MAX_EPOCHS);
        uint64_t plan = forever ? 0 : epochs;
        int d0 = 1 + (int)sharc__rng_below(&rng, MAX_SLOTS);
        int d1 = 1 + (int)sharc__rng_below(&rng, MAX_SLOTS);
        int d2 = 1 + (int)sharc__rng_below(&rng, MAX_SLOTS);
        uint64_t budget = 1 + sharc__rng_below(&rng, 3 * MAX_SHARDS * MAX_LEN / 2);
        for (int s = 0; s < d0; s++) {
            memset(&a[s], 0, sizeof a[s]);
            a[s].rank = s;
            a[s].size = d0;
            walk(&a[s], epochs, sharc__rng_below(&rng, budget), &rng);
        }
        split(a, d0, b, d1, plan, sharc__rng_below(&rng, 20));
        for (int s = 0; s < d1; s++)
            walk(&b[s], epochs, sharc__rng_below(&rng, budget), &rng);
        split(b, d1, c, d2, plan, sharc__rng_below(&rng, 20));
        for (int s = 0; s < d2; s++)
            walk(&c[s], epochs, UINT64_MAX, &rng);
        for (int s = 0; s < d2; s++) /* nothing is held at the end */
            for (size_t i = 0; i < c[s].n_held; i++) {
                uint64_t key = c[s].held[i];
                seen[sharc__key_epoch(key, ds.n_shards)][sharc__key_shard(key, ds.n_shards)]
                    [sharc__key_position(key)]++;
            }
        char what[128];
        snprintf(what, sizeof what, "trial %d: %zu shards, %llu epochs%s, %d -> %d -> %d slots",
                 trial, ds.n_shards, (unsigned long long)epochs, forever ? " of no end" : "", d0,
                 d1, d2);
        expect_each_once(epochs, what);
        free_slots(b, d1);
        free_slots(c, d2);
    }
}

START_TEST(every_entry_once_over_three_generations)
{
    three_generations(0);
}
END_TEST

START_TEST(every_entry_once_without_end)
{
    three_generations(1);
}
END_TEST

/* A new slot computes the same split whatever the others do: the split is the same call. */
START_TEST(new_slots_share_units_when_fewer_than_slots)
{
    sharc__ctx_init(&ctx, NULL, NULL);
    ds.n_shards = 2;
    len[0] = len[1] = 6;
    memset(seen, 0, sizeof seen);
    static slot a[1], b[5];
    a[0].rank = 0;
    a[0].size = 1;
    sharc__rng rng;
    sharc__rng_seed(&rng, 5);
    walk(&a[0], 1, 3, &rng); /* three cuts into the first shard of the one epoch */
    split(a, 1, b, 5, 1, 0);
    /* Two units (the first shard's rest, the second shard) over five slots: slots 0, 2, 4
     * share the first, slots 1 and 3 the second. */
    for (int s = 0; s < 5; s++) {
        ck_assert_uint_eq(b[s].n_units, 1);
        ck_assert_uint_eq(b[s].start_epoch, 1);
        ck_assert_uint_eq(b[s].units[0].every, s % 2 == 0 ? 3 : 2);
        ck_assert_uint_eq(b[s].units[0].first, (uint64_t)(s / 2));
    }
    ck_assert_uint_eq(b[0].units[0].skip, 3);
    ck_assert_uint_eq(b[1].units[0].skip, 0);
    free_slots(b, 5);
}
END_TEST

/* The round of units starts at the plan's offset: 4 units over 3 slots from slot 1 give
 * slot 1 the first and the fourth (a mixture's next source then starts at slot 2). */
START_TEST(units_start_at_the_offset)
{
    sharc__ctx_init(&ctx, NULL, NULL);
    ds.n_shards = 4;
    len[0] = len[1] = len[2] = len[3] = 2;
    memset(seen, 0, sizeof seen);
    static slot a[1], b[3];
    a[0].rank = 0;
    a[0].size = 1;
    sharc__rng rng;
    sharc__rng_seed(&rng, 5);
    walk(&a[0], 1, 0, &rng); /* stopped before its first cut: all 4 shards left */
    split(a, 1, b, 3, 1, 1);
    ck_assert_uint_eq(b[0].n_units, 1);
    ck_assert_uint_eq(b[1].n_units, 2);
    ck_assert_uint_eq(b[2].n_units, 1);
    size_t n_all = 0;
    sharc__elastic_unit *u = NULL;
    size_t n_u = 0;
    uint64_t start = 0;
    sharc__elastic_plan plan = {&ds, 7, 1, 1, 1};
    ck_assert_int_eq(sharc__elastic_split(&ctx, &plan, &a[0].at, 1, 2, 3, &u, &n_u, &start, &n_all),
                     0);
    ck_assert_uint_eq(n_all, 4);
    ck_assert_uint_eq(n_u, 1);
    ck_assert_uint_eq(u[0].shard, b[2].units[0].shard);
    sharc__free(&ctx, u);
    free_slots(b, 3);
}
END_TEST

/* Old slots whose epochs no run reaches from each other's (a forged state) are refused
 * before their remaining work is planned: slot 1 of 2 at epoch 2^30 of a dataset without
 * end would leave 2^30 epochs of slot 0's shards to split. */
START_TEST(epochs_far_apart_are_refused)
{
    sharc__ctx_init(&ctx, NULL, NULL);
    ds.n_shards = 2;
    sharc__elastic_old old[2] = {{.pos = {.epoch = 0}, .dp_rank = 0, .dp_size = 2},
                                 {.pos = {.epoch = UINT64_C(1) << 30}, .dp_rank = 1, .dp_size = 2}};
    sharc__elastic_plan plan = {&ds, 7, 1, 0, 0};
    sharc__elastic_unit *u = NULL;
    size_t n_u = 0, n_all = 0;
    uint64_t start = 0;
    ck_assert_int_eq(sharc__elastic_split(&ctx, &plan, old, 2, 0, 3, &u, &n_u, &start, &n_all),
                     SHARC_ERR_STATE);
    ck_assert_ptr_null(u);
    ck_assert_str_eq(ctx.error, "cannot resume: the states leave more than 16777216 shard visits "
                                "to split up to epoch 1073741824, which data-parallel slot 1 of "
                                "2 had begun (an epoch no run reaches from the others')");
    /* Three epochs apart: planned. */
    old[1].pos.epoch = 3;
    ck_assert_int_eq(sharc__elastic_split(&ctx, &plan, old, 2, 0, 3, &u, &n_u, &start, &n_all), 0);
    ck_assert_uint_eq(n_all, 4 + 1); /* slot 0's epochs 0..3, one shard each; slot 1's epoch 3 */
    ck_assert_uint_eq(start, 4);
    sharc__free(&ctx, u);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("elastic");
    TCase *tc = tcase_create("split");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_entry_once_over_three_generations);
    tcase_add_test(tc, every_entry_once_without_end);
    tcase_add_test(tc, new_slots_share_units_when_fewer_than_slots);
    tcase_add_test(tc, units_start_at_the_offset);
    tcase_add_test(tc, epochs_far_apart_are_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}

/*
 * Elastic resume of mixtures (input_cfg) on real shards: three small corpora of different
 * layouts mixed 0.5/0.3/0.2, D slots stopped after k batches, their states packed, and D'
 * slots resumed from the bundle. Finite: over the two runs every cut of every source is
 * delivered exactly once. Repeating (one cut per batch, so that a batch's epoch is its cut's
 * pass): every cut of each source's first pass once, and none twice in a pass. D' = D gives
 * each slot's own batches; a resumed slot's state resumes again; a bundle with a slot
 * missing, of another config or other settings is refused naming the slot. With noise mixed
 * in, one dataset and a mixture alike.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "sharc/sharc.h"
#include "testutil.h"

static char *dir;
static char cfg[4096];

/* Cuts per corpus: Shar 4 x 10, NeMo 3 x 8, WebDataset 2 x 6. */
enum { SHAR_CUTS = 40, NEMO_CUTS = 24, WDS_CUTS = 12, TOTAL = SHAR_CUTS + NEMO_CUTS + WDS_CUTS };
enum { MAX_IDS = 8 * TOTAL, MAX_STEPS = 160 };

static void need(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "test_mix_elastic: %s\n", what);
        exit(1);
    }
}

/* The config, with `tag_c` the third source's corpus tag (another config when it differs). */
static void write_cfg(char *out, size_t cap, const char *tag_c)
{
    snprintf(out, cap,
             "- {type: lhotse_shar, shar_path: %s/a/shar, weight: 0.5, tags: {corpus: a}}\n"
             "- {type: nemo_tarred, manifest_filepath: "
             "'%s/b/nemo/sharded_manifests/manifest__OP_0..2_CL_.json', tarred_audio_filepaths: "
             "'%s/b/nemo/audio__OP_0..2_CL_.tar', weight: 0.3, tags: {corpus: b}}\n"
             "- {type: wds, paths: %s/c/wds, weight: 0.2, tags: {corpus: %s}}\n",
             dir, dir, dir, dir, tag_c);
}

static void make_corpora(void)
{
    dir = tu_mkdtemp();
    const char *gen = getenv("SHARC_GEN");
    need(gen != NULL, "SHARC_GEN is not set");
    need(tu_sh("'%s' --out '%s/a' --layout shar --compress none --shards 4 --cuts-per-shard 10 "
               "--max-duration 2 >/dev/null && '%s' --out '%s/b' --layout nemo --compress none "
               "--shards 3 --cuts-per-shard 8 --seed 2 --max-duration 2 >/dev/null && '%s' "
               "--out '%s/c' --layout wds --compress none --shards 2 --cuts-per-shard 6 --seed 3 "
               "--max-duration 2 >/dev/null",
               gen, dir, gen, dir, gen, dir) == 0,
         "sharc-gen failed");
    write_cfg(cfg, sizeof cfg, "c");
}

static void settings_for(sharc_reader_settings *s, const char *text, int finite, uint64_t seed,
                         int rank, int size)
{
    sharc_reader_default_settings(s);
    s->input_cfg_text = text;
    s->mix_finite = finite;
    s->seed = seed;
    s->dp_rank = rank;
    s->dp_size = size;
    s->logger.level = SHARC_LOG_ERROR;
    s->n_threads = 1;
    s->sampler.max_duration = 5;
    s->sampler.num_buckets = 2;
    s->sampler.buffer_size = 12;
    s->sampler.num_cuts_for_bins_estimate = 20;
}

/* A run's batches: each line the audio's CRC and the cuts as "corpus/id". */
typedef struct run_out {
    char lines[MAX_STEPS][512];
    size_t n;
    int end; ///< the run reached SHARC_END
} run_out;

/* Add the batch's cuts to ids[*n_ids] (as "corpus/id") and its line to out. */
static void add_batch(sharc_batch *b, run_out *out, char **ids, size_t *n_ids)
{
    ck_assert_uint_lt(out->n, MAX_STEPS);
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    char *line = out->lines[out->n++];
    int at = snprintf(line, 512, "%08lx:", crc32(0L, audio->data, (uInt)audio->nbytes));
    for (int64_t k = 0; k < audio->shape[0]; k++) {
        size_t len, clen = 0;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)k, &len);
        /* A mixture's corpus tag; one dataset has no such column. */
        const char *corpus = sharc_batch_tensor(b, "corpus_bytes")
                                 ? sharc_batch_string(b, "corpus", (size_t)k, &clen)
                                 : "";
        char one[160];
        snprintf(one, sizeof one, "%.*s/%.*s", (int)clen, corpus, (int)len, id);
        if (ids) {
            ck_assert_uint_lt(*n_ids, MAX_IDS);
            ids[(*n_ids)++] = strdup(one);
        }
        at += snprintf(line + at, 512 - (size_t)at, " %s", at < 400 ? one : "");
    }
}

/* The reader's state after its last batch, in a new *state of *len bytes. */
static void save_state(sharc_reader *r, void **state, size_t *len)
{
    ck_assert_int_eq(sharc_reader_state_save(r, NULL, 0, len), SHARC_ERR(ENOSPC));
    *state = malloc(*len);
    ck_assert_int_eq(sharc_reader_state_save(r, *state, *len, len), 0);
}

/* Up to `steps` batches of a reader on `s` (to its end with SIZE_MAX); with `state`, the
 * state after the last batch returned. */
static void run(const sharc_reader_settings *s, size_t steps, run_out *out, char **ids,
                size_t *n_ids, void **state, size_t *state_len)
{
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    out->n = 0;
    out->end = 0;
    int rc = 0;
    while (out->n < steps && (rc = sharc_reader_next_batch(r, &b)) == 0) {
        add_batch(b, out, ids, n_ids);
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == 0 || rc == SHARC_END, "slot %d of %d: %s", s->dp_rank, s->dp_size,
                  sharc_reader_last_error(r));
    out->end = rc == SHARC_END;
    if (state)
        save_state(r, state, state_len);
    sharc_reader_close(&r);
}

static void *pack(void *const *states, const size_t *sizes, size_t n, size_t *size)
{
    ck_assert_int_eq(sharc_reader_pack_states((const void *const *)states, sizes, n, NULL, 0, size),
                     SHARC_ERR(ENOSPC));
    void *bundle = malloc(*size);
    ck_assert_int_eq(
        sharc_reader_pack_states((const void *const *)states, sizes, n, bundle, *size, size), 0);
    return bundle;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void expect_same(const run_out *got, const run_out *want, size_t from, const char *what)
{
    ck_assert_msg(got->n == want->n - from, "%s: %zu batches, want %zu", what, got->n,
                  want->n - from);
    for (size_t i = 0; i < got->n; i++)
        ck_assert_msg(!strcmp(got->lines[i], want->lines[from + i]), "%s: batch %zu: %s vs %s",
                      what, i, got->lines[i], want->lines[from + i]);
}

static run_out old_out, new_out, again_out;

/* D slots stop after k batches; their states, packed, into *bundle. */
static void stop_old(int finite, uint64_t seed, int D, size_t k, void **states, size_t *sizes,
                     char **ids, size_t *n_ids)
{
    for (int d = 0; d < D; d++) {
        sharc_reader_settings s;
        settings_for(&s, cfg, finite, seed, d, D);
        run(&s, k, &old_out, ids, n_ids, &states[d], &sizes[d]);
        ck_assert_uint_ge(old_out.n, 1);
    }
}

/* The slots of a run resumed from `bundle` on D slots each stop after k batches (SIZE_MAX: to
 * the end), their ids added; with `states`, their states after it. */
static void resume_all(const void *bundle, size_t size, int D, size_t k, char **ids, size_t *n_ids,
                       void **states, size_t *sizes)
{
    for (int d = 0; d < D; d++) {
        sharc_reader_settings s;
        settings_for(&s, cfg, 1, 12, d, D);
        s.resume_state = bundle;
        s.resume_state_size = size;
        run(&s, k, &new_out, ids, n_ids, states ? &states[d] : NULL, sizes ? &sizes[d] : NULL);
    }
}

/* Three generations of a finite mixture, 2 -> 3 -> 2 and 3 -> 5 -> 2: the second run's states
 * (each source reading its share as a prologue) split again; every cut once over the three. */
START_TEST(finite_three_generations)
{
    static const int cases[][3] = {{2, 3, 2}, {3, 5, 2}};
    static char *ids[MAX_IDS];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        void *a[8], *b[8];
        size_t a_sizes[8], b_sizes[8], n_ids = 0, size, size2;
        stop_old(1, 12, cases[c][0], 1, a, a_sizes, ids, &n_ids);
        void *bundle = pack(a, a_sizes, (size_t)cases[c][0], &size);
        resume_all(bundle, size, cases[c][1], 1, ids, &n_ids, b, b_sizes);
        void *bundle2 = pack(b, b_sizes, (size_t)cases[c][1], &size2);
        resume_all(bundle2, size2, cases[c][2], SIZE_MAX, ids, &n_ids, NULL, NULL);
        ck_assert_uint_eq(n_ids, TOTAL);
        qsort(ids, n_ids, sizeof *ids, cmp_str);
        for (size_t i = 1; i < n_ids; i++)
            ck_assert_msg(strcmp(ids[i - 1], ids[i]) != 0, "case %zu: %s twice", c, ids[i]);
        for (size_t i = 0; i < n_ids; i++)
            free(ids[i]);
        for (int d = 0; d < cases[c][0]; d++)
            free(a[d]);
        for (int d = 0; d < cases[c][1]; d++)
            free(b[d]);
        free(bundle);
        free(bundle2);
    }
}
END_TEST

/*
 * Finite mixtures: every cut of every source exactly once over the old run and the new one,
 * for D -> D' with stop steps and seeds; with D' = D each slot's batches are those its own
 * state gives; a new slot's own state after a batch resumes to its remaining batches.
 */
START_TEST(finite_every_cut_once)
{
    static const int cases[][4] = {{2, 3, 2, 1}, {3, 2, 1, 2}, {4, 2, 3, 3}, {2, 4, 4, 4},
                                   {3, 4, 2, 5}, {1, 3, 5, 6}, {4, 1, 1, 7}, {3, 3, 2, 8},
                                   {2, 5, 6, 9}, {5, 2, 2, 10}};
    static char *ids[MAX_IDS];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int D = cases[c][0], D2 = cases[c][1];
        size_t k = (size_t)cases[c][2], n_ids = 0, size;
        uint64_t seed = (uint64_t)cases[c][3];
        void *states[8];
        size_t sizes[8];
        stop_old(1, seed, D, k, states, sizes, ids, &n_ids);
        void *bundle = pack(states, sizes, (size_t)D, &size);
        for (int d = 0; d < D2; d++) {
            sharc_reader_settings s;
            settings_for(&s, cfg, 1, seed, d, D2);
            s.resume_state = bundle;
            s.resume_state_size = size;
            run(&s, SIZE_MAX, &new_out, ids, &n_ids, NULL, NULL);
            if (D2 == D) { /* its own state alone gives the same batches */
                s.resume_state = states[d];
                s.resume_state_size = sizes[d];
                run(&s, SIZE_MAX, &again_out, NULL, NULL, NULL, NULL);
                expect_same(&new_out, &again_out, 0, "own state");
            } else if (d == 0 && new_out.n > 1) {
                /* Its state after its first batch (its share of every source's work, the
                 * re-read cuts not yet taken) resumes to its remaining batches. */
                void *mid;
                size_t mid_len;
                run(&s, 1, &again_out, NULL, NULL, &mid, &mid_len);
                s.resume_state = mid;
                s.resume_state_size = mid_len;
                run(&s, SIZE_MAX, &again_out, NULL, NULL, NULL, NULL);
                expect_same(&again_out, &new_out, 1, "resumed again");
                free(mid);
            }
        }
        ck_assert_msg(n_ids == TOTAL, "%d -> %d after %zu, seed %llu: %zu cuts, want %d", D, D2, k,
                      (unsigned long long)seed, n_ids, TOTAL);
        qsort(ids, n_ids, sizeof *ids, cmp_str);
        for (size_t i = 1; i < n_ids; i++)
            ck_assert_msg(strcmp(ids[i - 1], ids[i]) != 0, "%d -> %d after %zu: %s twice", D, D2, k,
                          ids[i]);
        for (size_t i = 0; i < n_ids; i++)
            free(ids[i]);
        for (int d = 0; d < D; d++)
            free(states[d]);
        free(bundle);
    }
}
END_TEST

/* A repeating run of one cut per batch: each cut as "corpus/id@pass" (the batch's epoch is
 * its cut's, the pass of its source), into ids[*n]; with `state`, the state after the last. */
static void run_passes(sharc_reader_settings *s, size_t steps, char **ids, size_t *n, void **state,
                       size_t *state_len)
{
    s->sampler.max_cuts = 1;
    sharc_reader *r;
    sharc_batch *b;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    for (size_t i = 0; i < steps; i++) {
        int rc = sharc_reader_next_batch(r, &b);
        ck_assert_msg(rc == 0, "slot %d of %d: %s", s->dp_rank, s->dp_size,
                      sharc_reader_last_error(r));
        size_t len, clen;
        const char *id = sharc_batch_string(b, "cut_id", 0, &len);
        const char *corpus = sharc_batch_string(b, "corpus", 0, &clen);
        char one[192];
        snprintf(one, sizeof one, "%.*s/%.*s@%llu", (int)clen, corpus, (int)len, id,
                 (unsigned long long)b->epoch);
        ck_assert_uint_lt(*n, MAX_IDS);
        ids[(*n)++] = strdup(one);
        sharc_batch_release(b);
    }
    if (state)
        save_state(r, state, state_len);
    sharc_reader_close(&r);
}

/*
 * Repeating mixtures: each source's pass that the old slots were in is split, later passes
 * planned for D' slots as a fresh run plans them. One cut per batch, so a batch's epoch is
 * its cut's pass: over the old slots (stopped early in the first passes) and the new ones
 * (read long enough to finish them), every cut of every source comes once in pass 0, and no
 * cut comes twice in one pass (the new slots' second passes included).
 */
START_TEST(repeating_pass_once)
{
    static const int cases[][3] = {{2, 3, 1}, {3, 2, 2}, {4, 3, 1}, {1, 2, 3}};
    static char *ids[MAX_IDS];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int D = cases[c][0], D2 = cases[c][1];
        size_t k = (size_t)cases[c][2], n_ids = 0, size;
        void *states[8];
        size_t sizes[8];
        for (int d = 0; d < D; d++) {
            sharc_reader_settings s;
            settings_for(&s, cfg, 0, 4, d, D);
            run_passes(&s, k, ids, &n_ids, &states[d], &sizes[d]);
        }
        void *bundle = pack(states, sizes, (size_t)D, &size);
        for (int d = 0; d < D2; d++) {
            sharc_reader_settings s;
            settings_for(&s, cfg, 0, 4, d, D2);
            s.resume_state = bundle;
            s.resume_state_size = size;
            run_passes(&s, 400 / (size_t)D2, ids, &n_ids, NULL, NULL);
        }
        qsort(ids, n_ids, sizeof *ids, cmp_str);
        size_t first_pass = 0;
        for (size_t i = 0; i < n_ids; i++) {
            ck_assert_msg(i == 0 || strcmp(ids[i - 1], ids[i]) != 0, "%d -> %d: %s twice", D, D2,
                          ids[i]);
            first_pass += strstr(ids[i], "@0") != NULL && strstr(ids[i], "@0")[2] == 0;
        }
        ck_assert_msg(first_pass == TOTAL, "%d -> %d: %zu cuts in the first passes, want %d", D, D2,
                      first_pass, TOTAL);
        ck_assert_uint_gt(n_ids, TOTAL); /* the second passes began */
        free(bundle);
        for (int d = 0; d < D; d++)
            free(states[d]);
        for (size_t i = 0; i < n_ids; i++)
            free(ids[i]);
    }
}
END_TEST

/* A slot missing, a slot repeated, another source config or another seed: refused naming the
 * slot (and the source, where one differs). */
START_TEST(refuses_wrong_states)
{
    static char other[4096];
    write_cfg(other, sizeof other, "c2");
    void *states[4];
    size_t sizes[4];
    for (int d = 0; d < 4; d++) {
        sharc_reader_settings s;
        /* slot 2 with another tag for source c, slot 3 of another seed */
        settings_for(&s, d == 2 ? other : cfg, 1, d == 3 ? 99 : 5, d < 3 ? d : 2, 3);
        run(&s, 1, &old_out, NULL, NULL, &states[d], &sizes[d]);
    }
    static const struct {
        int n, order[3];
        const char *want;
    } cases[] = {
        {2, {0, 1}, "the state of data-parallel slot 0 of 2"},
        {3, {0, 0, 1}, "the state of data-parallel slot 1 of 3"},
        {3,
         {0, 1, 2},
         "the state of data-parallel slot 2 of 3 (the bundle's state 2: a state of another "
         "slot, dataset or settings is refused): cannot resume: source input_cfg[2] is not the "
         "one the state was saved with"},
        {3, {0, 1, 3}, "the state of data-parallel slot 2 of 3"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        void *pick[3];
        size_t pick_sizes[3], size;
        for (int i = 0; i < cases[c].n; i++) {
            pick[i] = states[cases[c].order[i]];
            pick_sizes[i] = sizes[cases[c].order[i]];
        }
        void *bundle = pack(pick, pick_sizes, (size_t)cases[c].n, &size);
        sharc_reader_settings s;
        settings_for(&s, cfg, 1, 5, 0, 4);
        s.resume_state = bundle;
        s.resume_state_size = size;
        char why[2048];
        ck_assert_int_eq(tu_first_batch_status(&s, why, sizeof why), SHARC_ERR_STATE);
        ck_assert_msg(strstr(why, cases[c].want) != NULL, "case %zu: '%s' lacks '%s'", c, why,
                      cases[c].want);
        free(bundle);
    }
    for (int d = 0; d < 4; d++)
        free(states[d]);
}
END_TEST

/* Little-endian u64 at p. */
static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = v << 8 | p[k];
    return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

/* The state's mixture section: after its tag and its length; *len receives the length. */
static size_t mix_section(const uint8_t *blob, size_t size, size_t *len)
{
    size_t at = 0;
    while (at + 8 <= size && le64(blob + at) != UINT64_C(0xFFFFFFFF4D495853))
        at++;
    ck_assert_uint_lt(at + 16, size);
    *len = (size_t)le64(blob + at + 8);
    return at + 16;
}

/* A new slot's state whose mixture section's prologues were tampered with (the checksum made
 * right again): refused naming the source, never read past the blob. */
START_TEST(refuses_tampered_prologues)
{
    void *states[2], *mid;
    size_t sizes[2], size, len;
    stop_old(1, 3, 2, 1, states, sizes, NULL, NULL);
    void *bundle = pack(states, sizes, 2, &size);
    sharc_reader_settings s;
    settings_for(&s, cfg, 1, 3, 0, 3);
    s.resume_state = bundle;
    s.resume_state_size = size;
    run(&s, 1, &again_out, NULL, NULL, &mid, &len);
    const uint8_t *blob = mid;
    size_t at = 0; /* the mixture section's prologue tag */
    while (at + 8 <= len && le64(blob + at) != UINT64_C(0xFFFFFFFF50524F4C))
        at++;
    ck_assert_uint_lt(at + 8, len);
    const size_t source0 = at + 8, n_units = source0 + 32;
    ck_assert_uint_eq(le64(blob + source0), 1); /* source 0 has a prologue ... */
    ck_assert_uint_ge(le64(blob + n_units), 1); /* ... of a unit at least */
    static const struct {
        size_t offset;
        uint64_t value;
        const char *want;
    } cases[] = {
        {0, 2,
         "cannot resume: the state's prologue is truncated or out of range of source "
         "input_cfg[0]"},
        {32, UINT64_C(1) << 40,
         "cannot resume: the state's prologue is truncated or out of range "
         "of source input_cfg[0]"},
        {40 + 8, 1000,
         "cannot resume: the state's prologue points outside the shards of source "
         "input_cfg[0]"},
        {40 + 24, 0,
         "cannot resume: the state's prologue points outside the shards of source "
         "input_cfg[0]"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t *bad = malloc(len);
        memcpy(bad, blob, len);
        put_le64(bad + source0 + cases[c].offset, cases[c].value);
        tu_reseal_state(bad, len);
        s.resume_state = bad;
        s.resume_state_size = len;
        char why[2048];
        ck_assert_int_eq(tu_first_batch_status(&s, why, sizeof why), SHARC_ERR_STATE);
        ck_assert_msg(strstr(why, cases[c].want) != NULL, "case %zu: '%s'", c, why);
        free(bad);
    }
    free(mid);
    free(bundle);
    for (int d = 0; d < 2; d++)
        free(states[d]);
}
END_TEST

/* An old slot's state whose mixture section puts a source's open shard past its shards (the
 * checksum made right again): refused naming the source on every new slot, never opened (the
 * split would hand the shard to a new slot as a unit of work). */
START_TEST(refuses_tampered_positions)
{
    void *states[2];
    size_t sizes[2], size;
    stop_old(1, 3, 2, 1, states, sizes, NULL, NULL);
    uint8_t *blob = states[0];
    size_t section_len;
    const size_t section = mix_section(blob, sizes[0], &section_len);
    ck_assert_uint_eq(le64(blob + section + 8 * 6), 3); /* sources */
    size_t open = 3; /* a source with a shard open: words hash, live, epoch, order_pos, */
    for (size_t i = 0; open == 3 && i < 3; i++) /* shard_index, consumed, shard_open, ... */
        if (le64(blob + section + 8 * (7 + 8 * i + 6)) == 1)
            open = i;
    ck_assert_uint_lt(open, 3);
    put_le64(blob + section + 8 * (7 + 8 * open + 4), 1000);
    tu_reseal_state(blob, sizes[0]);
    void *bundle = pack(states, sizes, 2, &size);
    char want[160];
    snprintf(want, sizeof want,
             "cannot resume: the state's position is out of range of source input_cfg[%zu]", open);
    for (int rank = 0; rank < 3; rank++) {
        sharc_reader_settings s;
        settings_for(&s, cfg, 1, 3, rank, 3);
        s.resume_state = bundle;
        s.resume_state_size = size;
        char why[2048];
        ck_assert_int_eq(tu_first_batch_status(&s, why, sizeof why), SHARC_ERR_STATE);
        ck_assert_msg(strstr(why, want) != NULL, "slot %d: '%s'", rank, why);
    }
    free(bundle);
    for (int d = 0; d < 2; d++)
        free(states[d]);
}
END_TEST

/* Every third byte of a mixture section with prologues (an elastically resumed slot's
 * state) flipped, the checksum made right again: resumed on as many slots and split over fewer,
 * each either reads or is refused as a state, never reads past the blob (ASan). */
START_TEST(flipped_sections_are_refused_or_read)
{
    void *a[2], *b[3];
    size_t a_sizes[2], b_sizes[3], size;
    stop_old(1, 12, 2, 1, a, a_sizes, NULL, NULL);
    void *bundle = pack(a, a_sizes, 2, &size);
    resume_all(bundle, size, 3, 1, NULL, NULL, b, b_sizes);
    free(bundle);
    const uint8_t *blob = b[0];
    const size_t len = b_sizes[0];
    size_t section_len;
    const size_t from = mix_section(blob, len, &section_len), to = from + section_len;
    ck_assert_uint_gt(to - from, 8 * (7 + 3 * 8 + 1)); /* with its prologues */
    uint8_t *bad = malloc(len);
    for (size_t i = from; i < to; i += 3) { /* 3: every byte of a word, over three words */
        memcpy(bad, blob, len);
        bad[i] ^= (uint8_t)(0x81u << (i % 3));
        tu_reseal_state(bad, len);
        sharc_reader_settings s;
        char why[2048];
        settings_for(&s, cfg, 1, 12, 0, 3);
        s.resume_state = bad;
        s.resume_state_size = len;
        int rc = tu_first_batch_status(&s, why, sizeof why);
        ck_assert_msg(rc == 0 || rc == SHARC_ERR_STATE, "byte %zu: %d %s", i, rc, why);
        void *pick[3] = {bad, b[1], b[2]};
        void *bundle2 = pack(pick, b_sizes, 3, &size);
        for (int rank = 0; rank < 2; rank++) {
            settings_for(&s, cfg, 1, 12, rank, 2);
            s.resume_state = bundle2;
            s.resume_state_size = size;
            rc = tu_first_batch_status(&s, why, sizeof why);
            ck_assert_msg(rc == 0 || rc == SHARC_ERR_STATE, "byte %zu, slot %d of 2: %d %s", i,
                          rank, rc, why);
        }
        free(bundle2);
    }
    free(bad);
    for (int d = 0; d < 2; d++)
        free(a[d]);
    for (int d = 0; d < 3; d++)
        free(b[d]);
}
END_TEST

/* With noise mixed in (which a state's hash covers), one dataset and a mixture resume on
 * another number of slots alike: 2 -> 3, every cut once. */
START_TEST(noise_resumes_elastically)
{
    static char *ids[MAX_IDS];
    char shar[700], noise[700];
    snprintf(shar, sizeof shar, "%s/a/shar", dir);
    snprintf(noise, sizeof noise, "%s/c/wds", dir);
    const char *paths[1] = {shar}, *noises[1] = {noise};
    sharc_augment_settings aug;
    sharc_augment_default_settings(&aug);
    aug.noise = noises;
    aug.n_noise = 1;
    for (int mixture = 0; mixture < 2; mixture++) {
        void *states[2];
        size_t sizes[2], size, n_ids = 0;
        for (int gen = 0; gen < 2; gen++) {
            void *bundle = gen ? pack(states, sizes, 2, &size) : NULL;
            for (int d = 0; d < 2 + gen; d++) {
                sharc_reader_settings s;
                settings_for(&s, mixture ? cfg : NULL, 1, 6, d, 2 + gen);
                if (!mixture) {
                    s.paths = paths;
                    s.n_paths = 1;
                }
                s.augment = &aug;
                s.sampling_rate = 16000; /* noise is mixed in at a rate of its own */
                s.resume_state = bundle;
                s.resume_state_size = gen ? size : 0;
                run(&s, gen ? SIZE_MAX : 1, &new_out, ids, &n_ids, gen ? NULL : &states[d],
                    &sizes[d]);
            }
            free(bundle);
        }
        ck_assert_uint_eq(n_ids, mixture ? TOTAL : SHAR_CUTS);
        qsort(ids, n_ids, sizeof *ids, cmp_str);
        for (size_t i = 1; i < n_ids; i++)
            ck_assert(strcmp(ids[i - 1], ids[i]) != 0);
        for (size_t i = 0; i < n_ids; i++)
            free(ids[i]);
        for (int d = 0; d < 2; d++)
            free(states[d]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mix_elastic");
    TCase *tc = tcase_create("mix_elastic");
    tcase_set_timeout(tc, 240);
    make_corpora();
    tcase_add_test(tc, finite_every_cut_once);
    tcase_add_test(tc, finite_three_generations);
    tcase_add_test(tc, repeating_pass_once);
    tcase_add_test(tc, refuses_wrong_states);
    tcase_add_test(tc, refuses_tampered_prologues);
    tcase_add_test(tc, refuses_tampered_positions);
    tcase_add_test(tc, flipped_sections_are_refused_or_read);
    tcase_add_test(tc, noise_resumes_elastically);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    tu_rm_rf(dir);
    free(dir);
    return rc;
}

/*
 * Loader tests in one process: a group of one behaves as a plain reader (same batches as
 * sharc_reader_next_batch, DP slot from the mesh, state save/resume), and a source/peer
 * pair over a "tape" transport (the source's broadcasts are recorded, then replayed to
 * the peer) checks identical batches, zero-copy sends, no per-step allocation on the peer,
 * and every source failure reaching the peer as SHARC_ERR_REMOTE with the source's text.
 * tests/mpi/mpi_loader.c runs the same scenarios across processes.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "sharc/sharc.h"
#include "tape.h"
#include "testutil.h"
#include "bcast/transport.h"

/* ---- corpus: Shar, FLAC, 4 shards of 10 cuts, made once by main() ---- */

static char *corpus_dir;
static char corpus_path[600];
static char bad_path[600]; /* the same corpus with a garbage FLAC member in shard 0 */
static char bad_member[256];

/* The corpora are made before the tests run, where ck_assert cannot report. */
static void need(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "test_loader: %s\n", what);
        exit(EXIT_FAILURE);
    }
}

static void make_corpora(void)
{
    const char *gen = getenv("SHARC_GEN"), *src = getenv("SHARC_TESTS_SRC");
    need(gen && src, "SHARC_GEN and SHARC_TESTS_SRC must be set");
    corpus_dir = tu_mkdtemp();
    need(tu_sh("'%s' --out '%s/a' --layout shar --compress none --shards 4 "
               "--cuts-per-shard 10 --max-duration 6 >/dev/null",
               gen, corpus_dir) == 0,
         "cannot make the corpus");
    snprintf(corpus_path, sizeof corpus_path, "%s/a/shar", corpus_dir);
    snprintf(bad_path, sizeof bad_path, "%s/bad", corpus_dir);
    /* The third member of shard 0 becomes undecodable FLAC. */
    need(tu_sh("cp -r '%s' '%s' && cd '%s' && tar tf recording.000000.tar | "
               "grep -v json | sed -n 3p > member.txt",
               corpus_path, bad_path, bad_path) == 0,
         "cannot make the corpus");
    char file[700];
    snprintf(file, sizeof file, "%s/member.txt", bad_path);
    size_t n = 0;
    char *m = (char *)tu_read_file(file, &n);
    need(m && n > 1 && n < sizeof bad_member, "no member to damage");
    memcpy(bad_member, m, n - 1);
    free(m);
    need(tu_sh("cd '%s' && rm member.txt && python3 '%s/corrupt.py' tar-replace "
               "recording.000000.tar '%s' @flac-garbage:3000",
               bad_path, src, bad_member) == 0,
         "cannot make the corpus");
}

static const char *paths_a[1], *paths_bad[1], *paths_none[] = {"/nonexistent/sharc/peer/data"};

static void reader_settings(sharc_reader_settings *s, const char *const *paths)
{
    sharc_reader_default_settings(s);
    s->paths = paths;
    s->n_paths = 1;
    s->seed = 5;
    s->n_threads = 2;
    s->sampler.max_duration = 20;
    s->sampler.num_buckets = 2;
    s->sampler.buffer_size = 12;
    s->sampler.num_cuts_for_bins_estimate = 12;
    s->logger.callback = NULL;
}

static void loader_settings(sharc_loader_settings *s, const char *mesh, int rank, int world)
{
    sharc_loader_default_settings(s);
    reader_settings(&s->reader, paths_a);
    if (mesh)
        ck_assert_int_eq(sharc_mesh_parse(&s->mesh, mesh, rank, world), 0);
}

/* ---- batch fingerprints ---- */

typedef struct print {
    uint64_t step, epoch;
    size_t n_tensors;
    char ids[2048];
    uint32_t crc; /* over every tensor's name, dtype, shape and bytes */
} print;

static void fingerprint(const sharc_batch *b, print *p)
{
    memset(p, 0, sizeof *p);
    p->step = b->step;
    p->epoch = b->epoch;
    p->n_tensors = b->n_tensors;
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        crc = crc32(crc, (const Bytef *)t->name, (uInt)strlen(t->name));
        crc = crc32(crc, (const Bytef *)&t->dtype, sizeof t->dtype);
        crc = crc32(crc, (const Bytef *)t->shape, (uInt)(sizeof t->shape[0] * (size_t)t->ndim));
        if (t->nbytes)
            crc = crc32(crc, t->data, (uInt)t->nbytes);
    }
    p->crc = (uint32_t)crc;
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    for (int64_t i = 0; audio && i < audio->shape[0]; i++) {
        size_t len = 0;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
        ck_assert_ptr_nonnull(id);
        strncat(p->ids, id, len);
        strcat(p->ids, " ");
    }
}

static void assert_same(const print *a, const print *b)
{
    ck_assert_uint_eq(a->step, b->step);
    ck_assert_uint_eq(a->epoch, b->epoch);
    ck_assert_uint_eq(a->n_tensors, b->n_tensors);
    ck_assert_str_eq(a->ids, b->ids);
    ck_assert_uint_eq(a->crc, b->crc);
}

/* Every batch of a plain reader; returns the count. */
static size_t reader_prints(const sharc_reader_settings *s, print *out, size_t cap)
{
    sharc_reader *r = NULL;
    sharc_batch *b = NULL;
    size_t n = 0;
    int rc;
    ck_assert_int_eq(sharc_reader_open(&r, s), 0);
    while ((rc = sharc_reader_next_batch(r, &b)) == 0) {
        ck_assert_uint_lt(n, cap);
        fingerprint(b, &out[n++]);
        sharc_batch_release(b);
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    sharc_reader_close(&r);
    return n;
}

/* Every batch of a loader until it stops; returns the count and the final code in *last. */
static size_t loader_prints(sharc_loader *l, print *out, size_t cap, int *last)
{
    sharc_batch *b = NULL;
    size_t n = 0;
    int rc;
    while ((rc = sharc_loader_next(l, &b)) == 0) {
        ck_assert_uint_lt(n, cap);
        fingerprint(b, &out[n++]);
        sharc_batch_release(b);
    }
    ck_assert_ptr_null(b);
    *last = rc;
    return n;
}

/* ---- a group of one: the loader is a plain reader ---- */

START_TEST(self_loader_equals_reader)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    print want[64], got[64];
    size_t n = reader_prints(&s.reader, want, 64);
    ck_assert_uint_gt(n, 3);

    sharc_loader *l = NULL;
    ck_assert_int_eq(sharc_loader_open(&l, &s), 0);
    ck_assert_int_eq(sharc_loader_is_source(l), 1);
    ck_assert_int_eq(sharc_loader_source_rank(l), 0);
    ck_assert_str_eq(sharc_loader_transport_name(l), "self");
    ck_assert_ptr_nonnull(sharc_loader_reader(l));
    int last = 0;
    ck_assert_uint_eq(loader_prints(l, got, 64, &last), n);
    ck_assert_int_eq(last, SHARC_END);
    for (size_t i = 0; i < n; i++)
        assert_same(&want[i], &got[i]);
    sharc_batch *b = (sharc_batch *)&b;
    ck_assert_int_eq(sharc_loader_next(l, &b), SHARC_END); /* ended: stays ended */
    ck_assert_ptr_null(b);
    sharc_reader_stats st;
    sharc_reader_get_stats(sharc_loader_reader(l), &st);
    ck_assert_uint_eq(st.cuts, 40);
    sharc_loader_close(&l);
    ck_assert_ptr_null(l);
    sharc_loader_close(&l); /* NULL-safe */
}
END_TEST

/* A mesh whose broadcast axes have size 1 needs no transport; its DP slot picks the shards. */
START_TEST(dp_slot_comes_from_the_mesh)
{
    char all_ids[2][4096] = {"", ""};
    for (int rank = 0; rank < 2; rank++) {
        sharc_loader_settings s;
        loader_settings(&s, "dp=2,cp=1", rank, 2);
        sharc_reader_settings rs = s.reader;
        rs.dp_rank = rank;
        rs.dp_size = 2;
        print want[64], got[64];
        size_t n = reader_prints(&rs, want, 64);
        sharc_loader *l = NULL;
        ck_assert_int_eq(sharc_loader_open(&l, &s), 0);
        ck_assert_int_eq(sharc_loader_is_source(l), 1);
        ck_assert_int_eq(sharc_loader_source_rank(l), rank);
        int last = 0;
        ck_assert_uint_eq(loader_prints(l, got, 64, &last), n);
        ck_assert_int_eq(last, SHARC_END);
        for (size_t i = 0; i < n; i++) {
            assert_same(&want[i], &got[i]);
            strcat(all_ids[rank], got[i].ids);
        }
        sharc_reader_stats st;
        sharc_reader_get_stats(sharc_loader_reader(l), &st);
        ck_assert_uint_eq(st.cuts, 20); /* two shards of ten cuts per slot */
        sharc_loader_close(&l);
    }
    /* The two slots read disjoint cuts. */
    for (char *id = strtok(all_ids[0], " "); id; id = strtok(NULL, " ")) {
        char word[300];
        snprintf(word, sizeof word, " %s ", id);
        char padded[4200];
        snprintf(padded, sizeof padded, " %s", all_ids[1]);
        ck_assert_msg(strstr(padded, word) == NULL, "cut %s read by both slots", id);
    }
}
END_TEST

START_TEST(state_save_and_resume)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    print all[64], rest[64];
    sharc_loader *l = NULL;
    sharc_batch *b = NULL;
    ck_assert_int_eq(sharc_loader_open(&l, &s), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sharc_loader_next(l, &b), 0);
        fingerprint(b, &all[i]);
        sharc_batch_release(b);
    }
    size_t size = 0;
    ck_assert_int_eq(sharc_loader_state_save(l, NULL, 0, &size), SHARC_ERR(ENOSPC));
    ck_assert_uint_gt(size, 0);
    void *state = malloc(size);
    ck_assert_int_eq(sharc_loader_state_save(l, state, size, &size), 0);
    int last = 0;
    size_t n = 2 + loader_prints(l, all + 2, 62, &last);
    ck_assert_int_eq(last, SHARC_END);
    sharc_loader_close(&l);

    s.reader.resume_state = state;
    s.reader.resume_state_size = size;
    ck_assert_int_eq(sharc_loader_open(&l, &s), 0);
    free(state); /* copied by open */
    ck_assert_uint_eq(loader_prints(l, rest, 64, &last), n - 2);
    ck_assert_int_eq(last, SHARC_END);
    for (size_t i = 2; i < n; i++)
        assert_same(&all[i], &rest[i - 2]);
    sharc_loader_close(&l);
}
END_TEST

/* ---- settings that do not fit together ---- */

static char logged[1024];
static void record_log(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    if (level == SHARC_LOG_ERROR)
        snprintf(logged, sizeof logged, "%s", message);
}

static void expect_rejected(sharc_loader_settings *s, const char *text)
{
    sharc_loader *l = (sharc_loader *)&l;
    logged[0] = 0;
    s->reader.logger.callback = record_log;
    s->reader.logger.level = SHARC_LOG_ERROR;
    ck_assert_int_eq(sharc_loader_open(&l, s), SHARC_ERR(EINVAL));
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(logged, text), "'%s' lacks '%s'", logged, text);
}

START_TEST(open_rejects_bad_settings)
{
    sharc_loader_settings s;
    loader_settings(&s, "dp=1,cp=2", 1, 2);
    expect_rejected(&s, "has 2 ranks, so a transport is needed");

    sharc_transport *self = NULL;
    ck_assert_int_eq(sharc_transport_self_open(&self, NULL), 0);
    loader_settings(&s, "cp=2", 0, 2);
    s.transport = self;
    expect_rejected(&s, "the self transport is rank 0 of 1 but the mesh puts rank 0 at 0 of a "
                        "broadcast group of 2");

    loader_settings(&s, "dp=2", 1, 2);
    s.reader.dp_rank = 0;
    s.reader.dp_size = 2;
    expect_rejected(&s, "contradict the mesh's data-parallel slot 1 of 2");

    loader_settings(&s, NULL, 0, 1);
    memset(&s.mesh, 0, sizeof s.mesh);
    expect_rejected(&s, "mesh is not initialised");

    loader_settings(&s, NULL, 0, 1);
    s.reader.max_held_batches = 0;
    expect_rejected(&s, "max_held_batches must be at least 1");

    loader_settings(&s, NULL, 0, 1);
    s.control_bytes = 1000;
    expect_rejected(&s, "invalid broadcast settings: control_bytes 1000 is not a multiple of 256 "
                        "from 4096 to 1 GiB");

    loader_settings(&s, NULL, 0, 1);
    s.max_frame_bytes = 100;
    expect_rejected(&s, "invalid broadcast settings: max_frame_bytes 100 is below control_bytes "
                        "65536");

    loader_settings(&s, NULL, 0, 1);
    s.reserved[3] = 1;
    expect_rejected(&s, "reserved");
    sharc_transport_close(&self);
}
END_TEST

/* ---- a source and a peer over a tape transport ---- */

static int peer_allocations;
static void (*peer_tweak)(sharc_loader_settings *s); /* a peer started with other settings */

typedef struct pair {
    sharc_transport *st, *pt;
    sharc_loader *src, *peer;
} pair;

/*
 * A group of two of `mesh` (source at group rank 0 = global `src_rank`, peer global
 * `peer_rank`). The source reads `src_paths`; the peer is given a path that does not exist.
 */
static void open_pair(pair *p, sharc_loader_settings *s, const char *mesh, int src_rank,
                      int peer_rank, int world)
{
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.logger.callback = NULL;
    tape_len = tape_pos = 0;
    ck_assert_int_eq(sharc__transport_new(&p->st, &tape_ops, &ts, 0, 2), 0);
    ts.allocator = tu_counting_allocator(&peer_allocations);
    ck_assert_int_eq(sharc__transport_new(&p->pt, &tape_ops, &ts, 1, 2), 0);
    ck_assert_int_eq(sharc_mesh_parse(&s->mesh, mesh, src_rank, world), 0);
    s->transport = p->st;
    ck_assert_int_eq(sharc_loader_open(&p->src, s), 0);
    sharc_loader_settings ps = *s;
    ck_assert_int_eq(sharc_mesh_parse(&ps.mesh, mesh, peer_rank, world), 0);
    ps.transport = p->pt;
    ps.reader.paths = paths_none;
    ps.reader.resume_state = "junk"; /* peers ignore the resume state */
    ps.reader.resume_state_size = 4;
    if (peer_tweak)
        peer_tweak(&ps);
    ck_assert_int_eq(sharc_loader_open(&p->peer, &ps), 0);
    ck_assert_int_eq(sharc_loader_is_source(p->src), 1);
    ck_assert_int_eq(sharc_loader_is_source(p->peer), 0);
    ck_assert_ptr_null(sharc_loader_reader(p->peer));
    ck_assert_int_eq(sharc_loader_source_rank(p->peer), src_rank);
}

static void close_pair(pair *p)
{
    sharc_loader_close(&p->src);
    sharc_loader_close(&p->peer);
    sharc_transport_close(&p->st);
    sharc_transport_close(&p->pt);
    tape_clear();
}

START_TEST(peer_gets_identical_batches)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    pair p;
    open_pair(&p, &s, "dp=1,cp=2", 0, 1, 2);
    print want[64], got[64];
    sharc_batch *b = NULL;
    size_t n = 0;
    int rc, two_collective = 0;
    while ((rc = sharc_loader_next(p.src, &b)) == 0) {
        fingerprint(b, &want[n++]);
        /* A payload broadcast straight from the batch's memory, not from a copy. */
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        const tape_entry *e = &tape[tape_len - 1];
        if (e->n > 65536) {
            two_collective++;
            ck_assert((const uint8_t *)audio->data >= (const uint8_t *)e->src &&
                      (const uint8_t *)audio->data < (const uint8_t *)e->src + e->n);
        }
        sharc_batch_release(b);
    }
    ck_assert_int_eq(rc, SHARC_END);
    ck_assert_int_gt(two_collective, 0);
    int last = 0;
    for (int i = 0; i < 2; i++) { /* warm up the peer's pool, then count */
        ck_assert_int_eq(sharc_loader_next(p.peer, &b), 0);
        fingerprint(b, &got[i]);
        sharc_batch_release(b);
    }
    int before = peer_allocations;
    ck_assert_uint_eq(2 + loader_prints(p.peer, got + 2, 62, &last), n);
    ck_assert_int_eq(last, SHARC_END);
    ck_assert_msg(peer_allocations - before <= 1,
                  "the peer allocated %d times in %zu steps (one growth of the block allowed)",
                  peer_allocations - before, n - 2);
    for (size_t i = 0; i < n; i++)
        assert_same(&want[i], &got[i]);
    ck_assert_int_eq(sharc_loader_next(p.peer, &b), SHARC_END);
    ck_assert_int_eq(tape_pos, tape_len); /* the peer consumed every collective */
    size_t size = 99;
    ck_assert_int_eq(sharc_loader_state_save(p.peer, NULL, 0, &size), 0);
    ck_assert_uint_eq(size, 0);
    close_pair(&p);
}
END_TEST

START_TEST(source_fails_mid_stream)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    s.reader.paths = paths_bad;
    s.reader.shuffle_shards = 0; /* shard 0 first: the bad member comes early */
    pair p;
    open_pair(&p, &s, "dp=1,cp=2", 0, 1, 2);
    print want[64], got[64];
    int src_rc = 0, peer_rc = 0;
    size_t n = loader_prints(p.src, want, 64, &src_rc);
    ck_assert_int_eq(src_rc, SHARC_ERR_DECODE);
    const char *src_text = sharc_loader_last_error(p.src);
    ck_assert_msg(strstr(src_text, bad_member) && strstr(src_text, "recording.000000.tar"),
                  "source text '%s' lacks the shard and member %s", src_text, bad_member);
    ck_assert_uint_eq(loader_prints(p.peer, got, 64, &peer_rc), n);
    ck_assert_int_eq(peer_rc, SHARC_ERR_REMOTE);
    for (size_t i = 0; i < n; i++)
        assert_same(&want[i], &got[i]);
    char expect[1200];
    snprintf(expect, sizeof expect, "source rank 0: %s", src_text);
    ck_assert_str_eq(sharc_loader_last_error(p.peer), expect);
    sharc_batch *b = NULL;
    ck_assert_int_eq(sharc_loader_next(p.src, &b), SHARC_ERR_DECODE); /* both stay ended */
    ck_assert_int_eq(sharc_loader_next(p.peer, &b), SHARC_ERR_REMOTE);
    ck_assert_str_eq(sharc_loader_last_error(p.peer), expect);
    close_pair(&p);
}
END_TEST

START_TEST(source_fails_to_open)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    s.reader.paths = paths_none; /* the source's dataset does not exist */
    pair p;
    open_pair(&p, &s, "dp=2,cp=2", 2, 3, 4); /* slot 1: its source is global rank 2 */
    sharc_batch *b = NULL;
    /* A call that fails before the first step does not change what the peers are told. */
    size_t early = 0;
    ck_assert_int_eq(sharc_loader_state_save(p.src, NULL, 0, &early), SHARC_ERR(EINVAL));
    int rc = sharc_loader_next(p.src, &b);
    ck_assert_int_lt(rc, 0);
    ck_assert_int_ne(rc, SHARC_ERR_REMOTE);
    char src_text[1024];
    snprintf(src_text, sizeof src_text, "%s", sharc_loader_last_error(p.src));
    ck_assert_msg(strstr(src_text, "cannot open the dataset") &&
                      strstr(src_text, "/nonexistent/sharc/peer/data"),
                  "source text: %s", src_text);
    size_t size = 0;
    ck_assert_int_eq(sharc_loader_state_save(p.src, NULL, 0, &size), SHARC_ERR(EINVAL));
    ck_assert_int_eq(sharc_loader_next(p.peer, &b), SHARC_ERR_REMOTE);
    ck_assert_ptr_null(b);
    char expect[1200];
    snprintf(expect, sizeof expect, "source rank 2: %s", src_text);
    ck_assert_str_eq(sharc_loader_last_error(p.peer), expect);
    ck_assert_int_eq(tape_len, 4); /* handshake, ERROR control block, their status words */
    close_pair(&p);
}
END_TEST

START_TEST(frame_over_the_cap)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    s.max_frame_bytes = 65536 + 4096; /* a batch of audio cannot fit */
    pair p;
    open_pair(&p, &s, "cp=2", 0, 1, 2);
    sharc_batch *b = NULL;
    ck_assert_int_eq(sharc_loader_next(p.src, &b), SHARC_ERR_TOO_LARGE);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(sharc_loader_last_error(p.src), "over the cap of 69632 bytes"));
    ck_assert_int_eq(sharc_loader_next(p.peer, &b), SHARC_ERR_REMOTE);
    ck_assert_ptr_nonnull(
        strstr(sharc_loader_last_error(p.peer), "source rank 0: frame for step 0"));
    ck_assert_ptr_nonnull(strstr(sharc_loader_last_error(p.peer), "over the cap of 69632 bytes"));
    close_pair(&p);
}
END_TEST

static void other_max_duration(sharc_loader_settings *s)
{
    s->reader.sampler.max_duration = 30;
}

static void other_limit(sharc_loader_settings *s)
{
    s->max_steps = 3;
}

static void other_features(sharc_loader_settings *s)
{
    s->reader.features = SHARC_FEATURES_FBANK;
    s->reader.fbank_n_mels = 128;
}

/* Ranks started with other batching, another limit or other features fail together at
 * step 0. */
START_TEST(settings_mismatch_fails_every_rank_at_step_0)
{
    static const struct {
        void (*tweak)(sharc_loader_settings *);
        const char *text;
    } cases[] = {
        {other_max_duration, "settings differ in the broadcast group: sampler.max_duration is "
                             "%.17g on source rank 0 but 30 on rank 1"},
        {other_limit, "settings differ in the broadcast group: max_steps is 0 on source rank 0 "
                      "but 3 on rank 1"},
        {other_features, "settings differ in the broadcast group: reader.features is none on "
                         "source rank 0 but fbank n_mels=128 sample_rate=16000 window=400 "
                         "hop=160 n_fft=512 pad_to=16 keep_audio=1 on rank 1"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sharc_loader_settings s;
        loader_settings(&s, NULL, 0, 1);
        pair p;
        peer_tweak = cases[c].tweak;
        open_pair(&p, &s, "cp=2", 0, 1, 2);
        peer_tweak = NULL;
        sharc_batch *b = NULL;
        ck_assert_int_eq(sharc_loader_next(p.src, &b), 0); /* the tape cannot tell the source */
        sharc_batch_release(b);
        char want[512];
        snprintf(want, sizeof want, cases[c].text, s.reader.sampler.max_duration);
        ck_assert_int_eq(sharc_loader_next(p.peer, &b), SHARC_ERR_SETTINGS);
        ck_assert_ptr_null(b);
        ck_assert_str_eq(sharc_loader_last_error(p.peer), want);
        ck_assert_int_eq(tape_pos, 2); /* the handshake and its status word only */
        close_pair(&p);
    }
}
END_TEST

/* max_steps ends the stream on every rank with STOP. */
START_TEST(max_steps_stops_every_rank)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    s.max_steps = 2;
    pair p;
    open_pair(&p, &s, "cp=2", 0, 1, 2);
    sharc_batch *b = NULL;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sharc_loader_next(p.src, &b), 0);
        sharc_batch_release(b);
    }
    ck_assert_int_eq(sharc_loader_next(p.src, &b), SHARC_END);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sharc_loader_next(p.peer, &b), 0);
        ck_assert_uint_eq(b->step, (uint64_t)i);
        sharc_batch_release(b);
    }
    ck_assert_int_eq(sharc_loader_next(p.peer, &b), SHARC_END);
    close_pair(&p);
}
END_TEST

/* A failure of the source's own after a step (a checkpoint it could not write) ends every
 * rank at the next step with its text. */
START_TEST(source_own_failure_reaches_peers)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    pair p;
    open_pair(&p, &s, "cp=2", 0, 1, 2);
    sharc_batch *b = NULL;
    ck_assert_int_eq(sharc_loader_next(p.src, &b), 0);
    sharc_batch_release(b);
    ck_assert_int_eq(sharc_loader_fail(p.src, SHARC_ERR_IO, "cannot write state.bin: disk full"),
                     0);
    ck_assert_int_eq(sharc_loader_next(p.src, &b), SHARC_ERR_IO);
    ck_assert_str_eq(sharc_loader_last_error(p.src), "cannot write state.bin: disk full");
    ck_assert_int_eq(sharc_loader_fail(p.src, SHARC_ERR_IO, "later"), SHARC_ERR_IO);
    ck_assert_int_eq(sharc_loader_next(p.peer, &b), 0);
    sharc_batch_release(b);
    ck_assert_int_eq(sharc_loader_next(p.peer, &b), SHARC_ERR_REMOTE);
    ck_assert_str_eq(sharc_loader_last_error(p.peer),
                     "source rank 0: cannot write state.bin: disk full");
    close_pair(&p);
}
END_TEST

/* The peer's back-pressure starts no collective; the stream goes on after a release. */
START_TEST(backpressure_is_local)
{
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    s.reader.max_held_batches = 2;
    pair p;
    open_pair(&p, &s, "cp=2", 0, 1, 2);
    sharc_batch *sb[3], *pb[3];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(sharc_loader_next(p.src, &sb[i]), 0);
    int recorded = tape_len;
    ck_assert_int_eq(sharc_loader_next(p.src, &sb[2]), SHARC_ERR_BACKPRESSURE);
    ck_assert_int_eq(tape_len, recorded);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(sharc_loader_next(p.peer, &pb[i]), 0);
    ck_assert_int_eq(sharc_loader_next(p.peer, &pb[2]), SHARC_ERR_BACKPRESSURE);
    ck_assert_int_eq(tape_pos, tape_len);
    ck_assert_ptr_nonnull(strstr(sharc_loader_last_error(p.peer), "sharc_batch_release"));
    sharc_batch_release(sb[0]);
    sharc_batch_release(pb[0]);
    ck_assert_int_eq(sharc_loader_next(p.src, &sb[2]), 0);
    ck_assert_int_eq(sharc_loader_next(p.peer, &pb[2]), 0);
    print a, c;
    fingerprint(sb[2], &a);
    fingerprint(pb[2], &c);
    assert_same(&a, &c);
    ck_assert_uint_eq(a.step, 2);
    for (int i = 1; i < 3; i++) {
        sharc_batch_release(sb[i]);
        sharc_batch_release(pb[i]);
    }
    close_pair(&p);
}
END_TEST

/* ---- a produce callback instead of a reader ---- */

typedef struct producer {
    int steps;   /* batches before the end */
    int fail;    /* end with an error instead of SHARC_END */
    int64_t len; /* floats per batch */
    int made;
} producer;

static int produce(void *cookie, sharc_loader *l, sharc_batch **out)
{
    producer *pr = cookie;
    if (pr->made == pr->steps) {
        if (!pr->fail)
            return SHARC_END;
        sharc_loader_set_source_error(l, "synthetic failure after %d batches", pr->made);
        return SHARC_ERR_DECODE;
    }
    sharc_tensor d[2];
    memset(d, 0, sizeof d);
    strcpy(d[0].name, "x");
    d[0].dtype = SHARC_DTYPE_F32;
    d[0].device = SHARC_DEVICE_HOST;
    d[0].ndim = 1;
    d[0].shape[0] = pr->len;
    strcpy(d[1].name, "step");
    d[1].dtype = SHARC_DTYPE_I64;
    d[1].device = SHARC_DEVICE_HOST;
    d[1].ndim = 0;
    int rc = sharc_loader_batch_new(l, 2, d, out);
    if (rc < 0)
        return rc;
    float *x = (*out)->tensors[0].data;
    for (int64_t i = 0; i < pr->len; i++)
        x[i] = (float)(pr->made * 1000 + i);
    *(int64_t *)(*out)->tensors[1].data = pr->made;
    (*out)->step = (uint64_t)pr->made++;
    return 0;
}

START_TEST(produced_batches_and_their_error)
{
    producer pr = {3, 1, 100000, 0};
    sharc_loader_settings s;
    loader_settings(&s, NULL, 0, 1);
    s.produce = produce;
    s.produce_cookie = &pr;
    pair p;
    open_pair(&p, &s, "cp=2", 0, 1, 2);
    ck_assert_ptr_null(sharc_loader_reader(p.src));
    sharc_batch *b = NULL;
    sharc_tensor d = {.name = "y", .dtype = SHARC_DTYPE_U8, .device = SHARC_DEVICE_HOST};
    ck_assert_int_eq(sharc_loader_batch_new(p.peer, 1, &d, &b), SHARC_ERR(EINVAL));
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sharc_loader_next(p.src, &b), 0);
        ck_assert((const void *)b->tensors[0].data == tape[tape_len - 1].src); /* no copy */
        sharc_batch_release(b);
    }
    ck_assert_int_eq(sharc_loader_next(p.src, &b), SHARC_ERR_DECODE);
    ck_assert_str_eq(sharc_loader_last_error(p.src), "synthetic failure after 3 batches");
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sharc_loader_next(p.peer, &b), 0);
        const sharc_tensor *x = sharc_batch_tensor(b, "x"), *st = sharc_batch_tensor(b, "step");
        ck_assert_int_eq(x->shape[0], 100000);
        ck_assert_float_eq(((float *)x->data)[99999], (float)(i * 1000 + 99999));
        ck_assert_int_eq(*(int64_t *)st->data, i);
        ck_assert_uint_eq(b->step, (uint64_t)i);
        sharc_batch_release(b);
    }
    ck_assert_int_eq(sharc_loader_next(p.peer, &b), SHARC_ERR_REMOTE);
    ck_assert_str_eq(sharc_loader_last_error(p.peer),
                     "source rank 0: synthetic failure after 3 batches");
    size_t size = 0;
    ck_assert_int_eq(sharc_loader_state_save(p.src, NULL, 0, &size), SHARC_ERR(EINVAL));
    close_pair(&p);
}
END_TEST

int main(void)
{
    make_corpora();
    paths_a[0] = corpus_path;
    paths_bad[0] = bad_path;
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, self_loader_equals_reader);
    tcase_add_test(tc, dp_slot_comes_from_the_mesh);
    tcase_add_test(tc, state_save_and_resume);
    tcase_add_test(tc, open_rejects_bad_settings);
    tcase_add_test(tc, peer_gets_identical_batches);
    tcase_add_test(tc, source_fails_mid_stream);
    tcase_add_test(tc, source_fails_to_open);
    tcase_add_test(tc, frame_over_the_cap);
    tcase_add_test(tc, settings_mismatch_fails_every_rank_at_step_0);
    tcase_add_test(tc, max_steps_stops_every_rank);
    tcase_add_test(tc, source_own_failure_reaches_peers);
    tcase_add_test(tc, backpressure_is_local);
    tcase_add_test(tc, produced_batches_and_their_error);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tu_rm_rf(corpus_dir);
    free(corpus_dir);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

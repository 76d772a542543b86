/*
 * The loader's contract across processes, on real generated shards (run under mpirun with
 * 2 and 4 ranks; argv[1] is sharc-gen, argv[2] tests/corrupt.py):
 *   1. lockstep: identical batches on every rank of a group, STOP ends all together
 *   2. the source's reader fails after some batches: peers got them, then SHARC_ERR_REMOTE
 *   3. the source's reader fails to open: peers get SHARC_ERR_REMOTE on their first next
 *   4. a frame over the cap: source SHARC_ERR_TOO_LARGE, peers SHARC_ERR_REMOTE
 *   5. a synchronized early break leaves nothing pending (the transport is reused)
 *   6. dp=2,cp=2 on 4 ranks: CP peers identical, slots disjoint, only sources open files
 *   7. two communicators with the same mesh resolve to their own sources
 *   8. malformed frames from the source are rejected by every peer
 *   9. a mesh of size one on the broadcast axes: no transport, each rank a plain reader
 * Peers are always given a dataset path that does not exist. A failed check aborts the job.
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "batching/frame.h"
#include "mpi_check.h"
#include "bcast/transport.h"
#include "sharc/mpi.h"
#include "sharc/sharc.h"

int world_rank, world_size;
static char corpus[512], damaged[512], damaged_member[256];
static const char *missing = "/nonexistent/sharc/peer/data";

/* Rank 0 generates the corpora; everyone else learns the paths. */
static void make_corpora(const char *gen, const char *corrupt_py)
{
    char dir[256] = "";
    if (world_rank == 0) {
        char tmpl[] = "/tmp/sharc-mpi-loader-XXXXXX";
        CHECK(mkdtemp(tmpl) != NULL);
        snprintf(dir, sizeof dir, "%s", tmpl);
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "'%s' --out '%s/a' --layout shar --compress none --shards 4 --cuts-per-shard 8 "
                 "--max-duration 4 >/dev/null && cp -r '%s/a/shar' '%s/bad' && cd '%s/bad' && "
                 "tar tf recording.000003.tar | grep -v json | sed -n 4p > ../member.txt",
                 gen, dir, dir, dir, dir);
        CHECK(system(cmd) == 0);
        snprintf(cmd, sizeof cmd, "%s/member.txt", dir);
        FILE *f = fopen(cmd, "r");
        CHECK(f && fgets(damaged_member, sizeof damaged_member, f));
        fclose(f);
        damaged_member[strcspn(damaged_member, "\n")] = 0;
        /* A FLAC member of the last shard becomes garbage: read in order, the source fails
         * after the batches of the first shards. */
        snprintf(cmd, sizeof cmd,
                 "cd '%s/bad' && python3 '%s' tar-replace recording.000003.tar '%s' "
                 "@flac-garbage:3000",
                 dir, corrupt_py, damaged_member);
        CHECK(system(cmd) == 0);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(damaged_member, sizeof damaged_member, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(corpus, sizeof corpus, "%s/a/shar", dir);
    snprintf(damaged, sizeof damaged, "%s/bad", dir);
}

static void remove_corpora(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%.*s'", (int)(strlen(corpus) - strlen("/a/shar")),
                 corpus);
        CHECK(system(cmd) == 0);
    }
}

static const char *src_paths[1], *peer_paths[1];

/* Settings for this rank: the source reads `path`, peers get a path that does not exist. */
static void settings_for(sharc_loader_settings *s, const sharc_mesh *m, const char *path)
{
    sharc_loader_default_settings(s);
    s->mesh = *m;
    src_paths[0] = path;
    peer_paths[0] = missing;
    s->reader.paths = sharc_mesh_is_source(m) ? src_paths : peer_paths;
    s->reader.n_paths = 1;
    s->reader.seed = 11;
    s->reader.shuffle_shards = 0;
    s->reader.n_threads = 1;
    s->reader.sampler.max_duration = 12;
    s->reader.sampler.num_buckets = 2;
    s->reader.sampler.buffer_size = 8;
    s->reader.sampler.num_cuts_for_bins_estimate = 8;
    s->reader.logger.callback = NULL;
}

enum { MAX_STEPS = 64 };

/* What one rank saw; gathered from every rank and compared on all. */
typedef struct seen {
    int slot, group_rank, source, n, last, cuts;
    uint32_t crc[MAX_STEPS];
    char ids[2048];
    char error[1024];
} seen;

static uint32_t batch_crc(const sharc_batch *b)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, (const Bytef *)&b->step, sizeof b->step);
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        crc = crc32(crc, (const Bytef *)t->name, (uInt)strlen(t->name));
        crc = crc32(crc, (const Bytef *)t->shape, (uInt)(sizeof t->shape[0] * (size_t)t->ndim));
        if (t->nbytes)
            crc = crc32(crc, t->data, (uInt)t->nbytes);
    }
    return (uint32_t)crc;
}

/* Run a loader until it stops or `max_steps` batches; fill `s`. */
static void run(sharc_loader *l, const sharc_mesh *m, int max_steps, seen *s)
{
    memset(s, 0, sizeof *s);
    s->slot = sharc_mesh_dp_rank(m);
    s->group_rank = sharc_mesh_group_rank(m);
    s->source = sharc_loader_is_source(l);
    sharc_batch *b = NULL;
    while (s->n < max_steps && (s->last = sharc_loader_next(l, &b)) == 0) {
        CHECK(b != NULL && s->n < MAX_STEPS);
        CHECK(b->step == (uint64_t)s->n);
        s->crc[s->n++] = batch_crc(b);
        const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
        CHECK(audio != NULL && audio->dtype == SHARC_DTYPE_F32 && audio->ndim == 2);
        for (int64_t i = 0; i < audio->shape[0]; i++) {
            size_t len = 0;
            const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
            CHECK(id != NULL && strlen(s->ids) + len + 2 < sizeof s->ids);
            strncat(s->ids, id, len);
            strcat(s->ids, " ");
            s->cuts++;
        }
        sharc_batch_release(b);
    }
    snprintf(s->error, sizeof s->error, "%s", s->last < 0 ? sharc_loader_last_error(l) : "");
}

static seen all[16];

static void gather(const seen *mine)
{
    CHECK(world_size <= 16);
    MPI_Allgather(mine, sizeof *mine, MPI_BYTE, all, sizeof *mine, MPI_BYTE, MPI_COMM_WORLD);
}

/* Every rank of a slot saw what its source saw: same batches, same end. */
static void check_groups_identical(void)
{
    for (int r = 0; r < world_size; r++)
        for (int q = 0; q < world_size; q++) {
            if (all[q].slot != all[r].slot || !all[q].source)
                continue;
            CHECK(all[r].n == all[q].n);
            CHECK(memcmp(all[r].crc, all[q].crc, sizeof all[r].crc) == 0);
            CHECK(strcmp(all[r].ids, all[q].ids) == 0);
            if (all[q].last == SHARC_END || all[r].source)
                CHECK(all[r].last == all[q].last);
            else
                CHECK(all[r].last == SHARC_ERR_REMOTE);
        }
}

/* Different slots read disjoint cuts; together they read every cut once. */
static void check_slots_disjoint(int slots, int total_cuts)
{
    int cuts = 0;
    for (int r = 0; r < world_size; r++) {
        if (!all[r].source)
            continue;
        cuts += all[r].cuts;
        for (int q = 0; q < world_size; q++) {
            if (!all[q].source || all[q].slot == all[r].slot)
                continue;
            char ids[sizeof all[r].ids];
            snprintf(ids, sizeof ids, "%s", all[r].ids);
            for (char *id = strtok(ids, " "); id; id = strtok(NULL, " ")) {
                char word[300], padded[sizeof all[q].ids + 2];
                snprintf(word, sizeof word, " %s ", id);
                snprintf(padded, sizeof padded, " %s", all[q].ids);
                CHECK(strstr(padded, word) == NULL);
            }
        }
    }
    int sources = 0;
    for (int r = 0; r < world_size; r++)
        sources += all[r].source;
    CHECK(sources == slots);
    CHECK(cuts == total_cuts);
}

/* Open a transport for `m` split from the world and a loader reading `path`. */
static void open_group(const char *spec, const char *path, sharc_mesh *m, sharc_transport **t,
                       sharc_loader **l, uint64_t frame_cap)
{
    sharc_loader_settings s;
    CHECK_RC(sharc_mesh_parse(m, spec, world_rank, world_size), 0);
    CHECK_RC(sharc_transport_mpi_split(t, MPI_COMM_WORLD, m, NULL), 0);
    settings_for(&s, m, path);
    s.transport = *t;
    if (frame_cap)
        s.max_frame_bytes = frame_cap;
    CHECK_RC(sharc_loader_open(l, &s), 0);
}

static const char *group_spec(void)
{
    return world_size == 4 ? "cp=2,tp=2" : "cp=2";
}

/* 1 and 5: lockstep; then an early break after one batch and a full rerun on the same
 * transport, which would mismatch or hang if the break had left a collective pending. */
static void lockstep_and_early_break(void)
{
    sharc_mesh m;
    sharc_transport *t = NULL;
    sharc_loader *l = NULL;
    seen mine, first;
    open_group(group_spec(), corpus, &m, &t, &l, 0);
    run(l, &m, MAX_STEPS, &mine);
    sharc_batch *b = NULL;
    CHECK_RC(sharc_loader_next(l, &b), SHARC_END);
    /* Every rank spent some time in the broadcast: a peer at least in receiving its frames. */
    double bcast = -1;
    CHECK_RC(sharc_loader_broadcast_seconds(l, &bcast), 0);
    CHECK(bcast > 0 && bcast < 600);
    CHECK_RC(sharc_loader_broadcast_seconds(NULL, &bcast), SHARC_ERR(EINVAL));
    sharc_loader_close(&l);
    gather(&mine);
    check_groups_identical();
    CHECK(mine.last == SHARC_END && mine.n > 2 && mine.cuts == 32);
    first = mine;

    sharc_loader_settings s;
    settings_for(&s, &m, corpus);
    s.transport = t;
    CHECK_RC(sharc_loader_open(&l, &s), 0);
    run(l, &m, 1, &mine);
    CHECK(mine.n == 1 && mine.crc[0] == first.crc[0]);
    sharc_loader_close(&l); /* every rank breaks after the first batch */
    CHECK_RC(sharc_loader_open(&l, &s), 0);
    run(l, &m, MAX_STEPS, &mine);
    CHECK(mine.n == first.n && mine.last == SHARC_END);
    CHECK(memcmp(mine.crc, first.crc, sizeof mine.crc) == 0);
    sharc_loader_close(&l);
    sharc_transport_close(&t);
}

/* 2, 3, 4: a failure on the source reaches every peer with the source's text. */
static void source_failure(const char *path, uint64_t frame_cap, int want_rc, const char *want_text,
                           int min_batches)
{
    sharc_mesh m;
    sharc_transport *t = NULL;
    sharc_loader *l = NULL;
    seen mine;
    open_group(group_spec(), path, &m, &t, &l, frame_cap);
    run(l, &m, MAX_STEPS, &mine);
    sharc_batch *b = NULL;
    CHECK_RC(sharc_loader_next(l, &b), mine.last); /* the stream stays ended, nobody waits */
    sharc_loader_close(&l);
    sharc_transport_close(&t);
    gather(&mine);
    check_groups_identical();
    CHECK(mine.n >= min_batches);
    CHECK_RC(mine.last, mine.source ? want_rc : SHARC_ERR_REMOTE);
    CHECK_TEXT(mine.error, want_text);
    if (!mine.source) {
        char expect[1100];
        snprintf(expect, sizeof expect, "source rank 0: %s", all[0].error);
        CHECK(strcmp(mine.error, expect) == 0);
    }
}

/* 6 and 9: data-parallel slots, with and without broadcast peers. */
static void slots(const char *spec, int slots_n, int no_transport)
{
    sharc_mesh m;
    sharc_transport *t = NULL;
    sharc_loader *l = NULL;
    seen mine;
    if (no_transport) {
        sharc_loader_settings s;
        CHECK_RC(sharc_mesh_parse(&m, spec, world_rank, world_size), 0);
        settings_for(&s, &m, corpus);
        CHECK_RC(sharc_loader_open(&l, &s), 0);
        CHECK(sharc_loader_is_source(l));
        CHECK(strcmp(sharc_loader_transport_name(l), "self") == 0);
    } else {
        open_group(spec, corpus, &m, &t, &l, 0);
    }
    CHECK(sharc_loader_source_rank(l) == sharc_mesh_group_member(&m, 0));
    run(l, &m, MAX_STEPS, &mine);
    CHECK(mine.last == SHARC_END);
    sharc_loader_close(&l);
    sharc_transport_close(&t);
    gather(&mine);
    check_groups_identical();
    check_slots_disjoint(slots_n, 32);
}

/* 7: two communicators, one mesh spec; each loader's batches come from its own source. */
typedef struct producer {
    int made;
} producer;

static int produce_who(void *cookie, sharc_loader *l, sharc_batch **out)
{
    producer *p = cookie;
    if (p->made == 3)
        return SHARC_END;
    sharc_tensor d;
    memset(&d, 0, sizeof d);
    strcpy(d.name, "who");
    d.dtype = SHARC_DTYPE_I32;
    d.device = SHARC_DEVICE_HOST;
    d.ndim = 1;
    d.shape[0] = 2;
    int rc = sharc_loader_batch_new(l, 1, &d, out);
    if (rc < 0)
        return rc;
    int32_t *who = (*out)->tensors[0].data;
    who[0] = world_rank;
    who[1] = p->made;
    (*out)->step = (uint64_t)p->made++;
    return 0;
}

static void two_communicators(void)
{
    MPI_Comm comm[2];
    sharc_transport *t[2] = {NULL, NULL};
    sharc_loader *l[2] = {NULL, NULL};
    producer prod[2] = {{0}, {0}};
    MPI_Comm_dup(MPI_COMM_WORLD, &comm[0]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - 1 - world_rank, &comm[1]); /* reversed */
    for (int i = 0; i < 2; i++) {
        int rank;
        sharc_mesh m;
        sharc_loader_settings s;
        MPI_Comm_rank(comm[i], &rank);
        CHECK_RC(sharc_mesh_parse(&m, world_size == 4 ? "cp=4" : "cp=2", rank, world_size), 0);
        CHECK_RC(sharc_transport_mpi_open(&t[i], comm[i], NULL), 0);
        settings_for(&s, &m, corpus);
        s.transport = t[i];
        s.produce = produce_who;
        s.produce_cookie = &prod[i];
        CHECK_RC(sharc_loader_open(&l[i], &s), 0);
    }
    CHECK(sharc_loader_is_source(l[0]) == (world_rank == 0));
    CHECK(sharc_loader_is_source(l[1]) == (world_rank == world_size - 1));
    for (int step = 0; step <= 3; step++)
        for (int i = 0; i < 2; i++) { /* interleaved steps of the two loaders */
            sharc_batch *b = NULL;
            int rc = sharc_loader_next(l[i], &b);
            if (step == 3) {
                CHECK_RC(rc, SHARC_END);
                continue;
            }
            CHECK_RC(rc, 0);
            const int32_t *who = sharc_batch_tensor(b, "who")->data;
            CHECK(who[0] == (i == 0 ? 0 : world_size - 1));
            CHECK(who[1] == step);
            sharc_batch_release(b);
        }
    for (int i = 0; i < 2; i++) {
        sharc_loader_close(&l[i]);
        sharc_transport_close(&t[i]);
        MPI_Comm_free(&comm[i]);
    }
}

/*
 * A transport that corrupts one byte of the source's first control block on its way out
 * (after the frame was encoded and checksummed), over a real MPI transport.
 */
typedef struct corrupting {
    sharc_transport *inner;
    size_t offset;
    uint8_t value;
    int bcasts;
} corrupting;

static int corrupt_bcast(sharc_transport *t, void *buf, size_t n, int root, sharc_device device)
{
    corrupting *c = t->impl;
    /* The handshake is the first broadcast; the first control block the second. */
    if (++c->bcasts == 2 && t->rank == root) {
        uint8_t *copy = malloc(n);
        CHECK(copy != NULL);
        memcpy(copy, buf, n);
        copy[c->offset] = c->value;
        int rc = sharc__transport_bcast(c->inner, copy, n, root, device);
        free(copy);
        return rc;
    }
    return sharc__transport_bcast(c->inner, buf, n, root, device);
}

static int corrupt_allreduce(sharc_transport *t, uint32_t *v)
{
    corrupting *c = t->impl;
    return sharc__transport_allreduce_max(c->inner, v);
}

static const sharc__transport_ops corrupt_ops = {
    .name = "mpi", .bcast = corrupt_bcast, .allreduce_max = corrupt_allreduce};

/* 8: a malformed frame from the source is rejected by every peer, and the source learns
 * it in the same step's status round. */
static void malformed_frames(void)
{
    static const struct {
        size_t offset;
        uint8_t value;
        const char *text;
    } cases[] = {
        {0, 'X', "bad frame magic"},
        {4, 9, "unsupported frame version 9"},
        {8, 0x5a, "frame header checksum mismatch"},
        {24, 200, "frame has 200 tensors"},
        {48, 7, "bad frame descriptor size"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sharc_mesh m;
        sharc_transport *inner = NULL, *t = NULL;
        sharc_loader *l = NULL;
        sharc_loader_settings s;
        CHECK_RC(sharc_mesh_parse(&m, world_size == 4 ? "cp=4" : "cp=2", world_rank, world_size),
                 0);
        CHECK_RC(sharc_transport_mpi_split(&inner, MPI_COMM_WORLD, &m, NULL), 0);
        CHECK_RC(sharc__transport_new(&t, &corrupt_ops, NULL, world_rank, world_size), 0);
        corrupting cor = {inner, cases[c].offset, cases[c].value, 0};
        t->impl = &cor;
        settings_for(&s, &m, corpus);
        s.transport = t;
        CHECK_RC(sharc_loader_open(&l, &s), 0);
        sharc_batch *b = NULL;
        int want = world_rank == 0 ? SHARC_ERR_REMOTE : SHARC_ERR_FRAME;
        CHECK_RC(sharc_loader_next(l, &b), want);
        CHECK(b == NULL);
        if (world_rank == 0) {
            char expect[64];
            snprintf(expect, sizeof expect, "rank %d: frame from source rank 0: ", world_size - 1);
            CHECK(strncmp(sharc_loader_last_error(l), expect, strlen(expect)) == 0);
        } else {
            CHECK(strncmp(sharc_loader_last_error(l), "frame from source rank 0: ", 26) == 0);
        }
        CHECK_TEXT(sharc_loader_last_error(l), cases[c].text);
        CHECK_RC(sharc_loader_next(l, &b), want); /* ended, no collective */
        sharc_loader_close(&l);
        sharc_transport_close(&t);
        sharc_transport_close(&inner);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    CHECK(argc == 3);
    CHECK(world_size == 2 || world_size == 4);
    make_corpora(argv[1], argv[2]);

    lockstep_and_early_break();
    source_failure(damaged, 0, SHARC_ERR_DECODE, damaged_member, 1);
    source_failure(damaged, 0, SHARC_ERR_DECODE, "recording.000003.tar", 1);
    source_failure(missing, 0, SHARC_ERR(ENOENT), "cannot open the dataset", 0);
    source_failure(corpus, 65536 + 4096, SHARC_ERR_TOO_LARGE, "over the cap of 69632 bytes", 0);
    if (world_size == 4)
        slots("dp=2,cp=2", 2, 0);
    slots(world_size == 4 ? "dp=4" : "dp=2", world_size, 1);
    slots(world_size == 4 ? "dp=2,cp=1,tp=2" : "dp=1,cp=2", world_size == 4 ? 2 : 1, 0);
    two_communicators();
    malformed_frames();

    remove_corpora();
    if (world_rank == 0)
        printf("mpi_loader: %d ranks passed\n", world_size);
    MPI_Finalize();
    return 0;
}

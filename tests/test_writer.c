/*
 * Writer tests: shards written with sharc_writer (Shar and NeMo, each compression) are read
 * back with sharc_reader, cut by cut and sample by sample; bad cuts, abort, close without
 * finish, cancellation and allocation failures leave nothing behind.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sharc/sharc.h"
#include "testutil.h"

/* A 16-bit PCM WAV of `frames` frames, sample k of channel c = (k * 37 + c * 1000 + seed)
 * % 20000 - 10000. Its size in *n; malloc'd. */
static uint8_t *make_wav(int rate, int channels, int frames, int seed, size_t *n)
{
    size_t data = (size_t)frames * (size_t)channels * 2;
    uint8_t *p = calloc(1, 44 + data);
    ck_assert_ptr_nonnull(p);
    uint32_t u32[] = {(uint32_t)(36 + data), 16, (uint32_t)rate, (uint32_t)(rate * channels * 2),
                      (uint32_t)data};
    memcpy(p, "RIFF", 4);
    memcpy(p + 4, &u32[0], 4);
    memcpy(p + 8, "WAVEfmt ", 8);
    memcpy(p + 16, &u32[1], 4);
    uint16_t fmt = 1, ch = (uint16_t)channels, align = (uint16_t)(channels * 2), bits = 16;
    memcpy(p + 20, &fmt, 2);
    memcpy(p + 22, &ch, 2);
    memcpy(p + 24, &u32[2], 4);
    memcpy(p + 28, &u32[3], 4);
    memcpy(p + 32, &align, 2);
    memcpy(p + 34, &bits, 2);
    memcpy(p + 36, "data", 4);
    memcpy(p + 40, &u32[4], 4);
    for (int k = 0; k < frames; k++)
        for (int c = 0; c < channels; c++) {
            int16_t v = (int16_t)((k * 37 + c * 1000 + seed) % 20000 - 10000);
            memcpy(p + 44 + ((size_t)k * (size_t)channels + (size_t)c) * 2, &v, 2);
        }
    *n = 44 + data;
    return p;
}

static float expected_sample(int k, int c, int seed)
{
    return (float)((k * 37 + c * 1000 + seed) % 20000 - 10000) / 32768.0f;
}

typedef struct test_cut {
    const char *id, *text, *speaker, *language;
    int rate, channels, frames, in_memory;
} test_cut;

static const test_cut cuts5[] = {
    {"a", "first text", "spk1", "en", 16000, 1, 8000, 0},
    {"dir/b.x", "zweiter Text", NULL, "de", 16000, 1, 4000, 1},
    {"c", NULL, NULL, NULL, 8000, 2, 2000, 0},
    {"ünï cödé", "é", "spk2", NULL, 16000, 1, 1600, 0},
    {"e", "last", NULL, NULL, 22050, 1, 22050, 1},
};
#define N_CUTS5 (sizeof cuts5 / sizeof cuts5[0])

static char *tmp_root;

static void setup(void)
{
    tmp_root = tu_mkdtemp();
}

static void teardown(void)
{
    tu_rm_rf(tmp_root);
    free(tmp_root);
}

static char *path_in(const char *dir, const char *name)
{
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
    return p;
}

static void settings_for(sharc_writer_settings *s, const char *out, sharc_layout layout,
                         sharc_writer_compression z, uint32_t per_shard)
{
    sharc_writer_default_settings(s);
    s->out_dir = out;
    s->layout = layout;
    s->compression = z;
    s->cuts_per_shard = per_shard;
    s->logger.callback = NULL;
}

/* The cut of test cut i: its file written under `src` or its bytes in *buf. */
static void cut_for(int i, const char *src, sharc_writer_cut *cut, uint8_t **buf, char **path)
{
    const test_cut *t = &cuts5[i];
    size_t n;
    *buf = make_wav(t->rate, t->channels, t->frames, i, &n);
    *path = NULL;
    memset(cut, 0, sizeof *cut);
    cut->id = t->id;
    cut->text = t->text;
    cut->speaker = t->speaker;
    cut->language = t->language;
    cut->duration = (double)t->frames / t->rate;
    cut->sampling_rate = t->rate;
    if (t->in_memory) {
        cut->data = *buf;
        cut->size = n;
    } else {
        char name[32];
        snprintf(name, sizeof name, "src%d.wav", i);
        *path = path_in(src, name);
        ck_assert_int_eq(tu_write_file(*path, *buf, n), 0);
        cut->path = *path;
    }
}

static void write_cuts5(sharc_writer *w, const char *src)
{
    for (int i = 0; i < (int)N_CUTS5; i++) {
        sharc_writer_cut cut;
        uint8_t *buf;
        char *path;
        cut_for(i, src, &cut, &buf, &path);
        int rc = sharc_writer_add(w, &cut);
        ck_assert_msg(rc == 0, "add %s: %s", cut.id, sharc_writer_last_error(w));
        free(buf);
        free(path);
    }
}

/* The names in `dir` (not . and ..), sorted and joined by spaces. */
static char *list_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return strdup("<absent>");
    char *out = calloc(1, 4096);
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..")) {
            if (out[0])
                strcat(out, " ");
            strcat(out, names[i]->d_name);
        }
        free(names[i]);
    }
    free(names);
    return out;
}

static void expect_listing(const char *dir, const char *want)
{
    char *got = list_dir(dir);
    ck_assert_msg(strcmp(got, want) == 0, "%s holds '%s', expected '%s'", dir, got, want);
    free(got);
}

/* The test cut a read cut is: NeMo's cut id is the member's name, "<id>.wav". */
static int find_cut(const char *id, sharc_layout layout)
{
    for (int i = 0; i < (int)N_CUTS5; i++) {
        size_t n = strlen(cuts5[i].id);
        if (layout == SHARC_LAYOUT_SHAR
                ? strcmp(cuts5[i].id, id) == 0
                : strncmp(cuts5[i].id, id, n) == 0 && strcmp(id + n, ".wav") == 0)
            return i;
    }
    return -1;
}

static void expect_str(const char *what, const char *id, const char *got, const char *want)
{
    ck_assert_msg((got == NULL && want == NULL) || (got && want && strcmp(got, want) == 0),
                  "%s: %s '%s', expected '%s'", id, what, got ? got : "(null)",
                  want ? want : "(null)");
}

/* Read `dir` back and compare every cut with cuts5, sample by sample. */
static void read_back(const char *dir, sharc_layout layout)
{
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    const char *paths[] = {dir};
    s.paths = paths;
    s.n_paths = 1;
    s.layout = layout;
    s.logger.callback = NULL;
    sharc_reader *r = NULL;
    int rc = sharc_reader_open(&r, &s);
    ck_assert_msg(rc == 0, "open %s: %s", dir, sharc_strerror(rc));
    int seen[N_CUTS5] = {0};
    const sharc_cut *cp;
    while ((rc = sharc_reader_next(r, &cp)) == 0) {
        sharc_cut cut = *cp;
        int i = find_cut(cut.id, layout);
        ck_assert_msg(i >= 0, "unexpected cut '%s'", cut.id);
        const test_cut *t = &cuts5[i];
        seen[i]++;
        ck_assert_double_eq_tol(cut.duration, (double)t->frames / t->rate, 1e-12);
        ck_assert_int_eq(cut.sampling_rate, t->rate);
        ck_assert_int_eq(cut.channels, t->channels);
        ck_assert_int_eq(cut.num_samples, t->frames);
        if (layout == SHARC_LAYOUT_SHAR) {
            expect_str("text", t->id, cut.text, t->text);
            expect_str("speaker", t->id, cut.speaker, t->speaker);
        } else {
            expect_str("text", t->id, cut.text, t->text ? t->text : "");
        }
        expect_str("language", t->id, cut.language, t->language);
        for (int k = 0; k < t->frames; k++)
            for (int c = 0; c < t->channels; c++) {
                float v = cut.samples[(size_t)k * (size_t)t->channels + (size_t)c];
                ck_assert_msg(v == expected_sample(k, c, i), "%s: sample %d/%d is %g, not %g",
                              t->id, k, c, v, expected_sample(k, c, i));
            }
    }
    ck_assert_msg(rc == SHARC_END, "read %s: %s", dir, sharc_strerror(rc));
    for (size_t i = 0; i < N_CUTS5; i++)
        ck_assert_msg(seen[i] == 1, "cut %s read %d times", cuts5[i].id, seen[i]);
    sharc_reader_close(&r);
}

static const char *const tar_suffix[] = {"", ".gz", ".zst"};

START_TEST(shar_round_trip)
{
    sharc_writer_compression z = (sharc_writer_compression)_i;
    char *out = path_in(tmp_root, "shar");
    sharc_writer_settings s;
    settings_for(&s, out, SHARC_LAYOUT_SHAR, z, 2);
    sharc_writer *w = NULL;
    ck_assert_int_eq(sharc_writer_open(&w, &s), 0);
    write_cuts5(w, tmp_root);
    ck_assert_msg(sharc_writer_finish(w) == 0, "%s", sharc_writer_last_error(w));
    sharc_writer_stats st;
    sharc_writer_get_stats(w, &st);
    ck_assert_uint_eq(st.cuts, 5);
    ck_assert_uint_eq(st.shards, 3);
    ck_assert_uint_eq(st.files, 6);
    ck_assert_double_eq_tol(st.audio_seconds, 0.5 + 0.25 + 0.25 + 0.1 + 1.0, 1e-9);
    sharc_writer_close(&w); /* finished: the files stay */
    char want[400];
    snprintf(want, sizeof want,
             "cuts.000000.jsonl.gz cuts.000001.jsonl.gz cuts.000002.jsonl.gz "
             "recording.000000.tar%s recording.000001.tar%s recording.000002.tar%s",
             tar_suffix[z], tar_suffix[z], tar_suffix[z]);
    expect_listing(out, want);
    read_back(out, SHARC_LAYOUT_SHAR);
    free(out);
}
END_TEST

START_TEST(nemo_round_trip)
{
    sharc_writer_compression z = (sharc_writer_compression)_i;
    char *out = path_in(tmp_root, "nemo");
    sharc_writer_settings s;
    settings_for(&s, out, SHARC_LAYOUT_NEMO, z, 3);
    sharc_writer *w = NULL;
    ck_assert_int_eq(sharc_writer_open(&w, &s), 0);
    write_cuts5(w, tmp_root);
    ck_assert_msg(sharc_writer_finish(w) == 0, "%s", sharc_writer_last_error(w));
    sharc_writer_close(&w);
    char want[400], *sub = path_in(out, "sharded_manifests");
    snprintf(want, sizeof want,
             "audio_0.tar%s audio_1.tar%s sharded_manifests tarred_audio_manifest.json",
             tar_suffix[z], tar_suffix[z]);
    expect_listing(out, want);
    expect_listing(sub, "manifest_0.json manifest_1.json");
    read_back(out, SHARC_LAYOUT_NEMO);
    /* The rows as NeMo's tools write them. */
    char *man = path_in(sub, "manifest_1.json");
    size_t n;
    char *text = (char *)tu_read_file(man, &n);
    ck_assert_ptr_nonnull(text);
    const char *row = "{\"audio_filepath\": \"ünï cödé.wav\", \"duration\": 0.1, \"text\": \"é\", "
                      "\"speaker\": \"spk2\", \"shard_id\": 1}\n"
                      "{\"audio_filepath\": \"e.wav\", \"duration\": 1, \"text\": \"last\", "
                      "\"shard_id\": 1}\n";
    ck_assert_uint_eq(n, strlen(row));
    ck_assert_int_eq(memcmp(text, row, n), 0);
    free(text);
    free(man);
    free(sub);
    free(out);
}
END_TEST

/* A writer on `out` (SHAR, 2 cuts a shard) that must open. */
static sharc_writer *open_on(const char *out, sharc_layout layout)
{
    sharc_writer_settings s;
    settings_for(&s, out, layout, SHARC_WRITER_COMPRESS_NONE, 2);
    sharc_writer *w = NULL;
    ck_assert_int_eq(sharc_writer_open(&w, &s), 0);
    return w;
}

static void expect_error(sharc_writer *w, int rc, int want_rc, const char *want)
{
    ck_assert_msg(rc == want_rc, "rc %s, expected %s (%s)", sharc_err_name(rc),
                  sharc_err_name(want_rc), sharc_writer_last_error(w));
    ck_assert_str_eq(sharc_writer_last_error(w), want);
}

START_TEST(bad_cuts_are_refused_with_their_origin)
{
    char *out = path_in(tmp_root, "out"), *missing = path_in(tmp_root, "missing.wav");
    sharc_writer *w = open_on(out, SHARC_LAYOUT_NEMO);
    size_t n;
    uint8_t *wav = make_wav(16000, 1, 1600, 0, &n);
    sharc_writer_cut c = {.id = "a", .data = wav, .size = n, .duration = -1, .origin = "m.jsonl:1"};
    ck_assert_int_eq(sharc_writer_add(w, &c), 0);
    c.origin = "m.jsonl:2";
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR(EEXIST),
                 "m.jsonl:2: duplicate id 'a': already used at m.jsonl:1");
    c.origin = NULL;
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR(EEXIST),
                 "cut 'a': duplicate id 'a': already used at m.jsonl:1");
    c.id = "../up";
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR_FORMAT,
                 "cut '../up': id '../up' cannot name a tar member: a part between its slashes "
                 "is empty, '.' or '..'");
    c.id = "/abs";
    c.origin = "x";
    expect_error(w, sharc_writer_check(w, &c, NULL), SHARC_ERR_FORMAT,
                 "x: id '/abs' cannot name a tar member: it starts with '/'");
    c.id = "a\tb";
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR_FORMAT,
                 "x: the id holds a control character (0x09): it cannot name a tar member");
    c.id = "x-sub12";
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR_FORMAT,
                 "x: id 'x-sub12' ends in -subN, which NeMo's reader takes for a part of another "
                 "member: give the line another \"id\"");
    c.id = "d";
    c.duration = 0.25;
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR_AUDIO_MISMATCH,
                 "x: the cut's duration 0.25 s differs from the audio's 0.1 s by more than 0.1 s");
    c.duration = -1;
    c.sampling_rate = 8000;
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR_AUDIO_MISMATCH,
                 "x: the cut's sampling rate 8000 differs from the audio's 16000");
    c.sampling_rate = 0;
    c.data = "RIFF but not audio";
    c.size = 18;
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR_DECODE,
                 "x: not audio libsndfile can read: Format not recognised.");
    c.data = NULL;
    c.path = missing;
    char want[600];
    snprintf(want, sizeof want, "x: %s: cannot open: No such file or directory", missing);
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR(ENOENT), want);
    c.path = tmp_root;
    snprintf(want, sizeof want, "x: %s: not a regular file (a folder)", tmp_root);
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR(EINVAL), want);
    /* A WAV cut short: its header says more than the file holds. */
    char *short_wav = path_in(tmp_root, "short.wav");
    ck_assert_int_eq(tu_write_file(short_wav, wav, n - 1000), 0);
    c.path = short_wav;
    snprintf(want, sizeof want,
             "x: %s: truncated: its header says 3200 bytes of audio, the file holds 2200",
             short_wav);
    expect_error(w, sharc_writer_add(w, &c), SHARC_ERR_FORMAT, want);
    /* The cut's own checks leave the writer usable. */
    c.path = NULL;
    c.data = wav;
    c.size = n;
    ck_assert_int_eq(sharc_writer_add(w, &c), 0);
    ck_assert_int_eq(sharc_writer_finish(w), 0);
    sharc_writer_close(&w);
    char *sub = path_in(out, "sharded_manifests");
    expect_listing(sub, "manifest_0.json");
    free(sub);
    free(short_wav);
    free(wav);
    free(missing);
    free(out);
}
END_TEST

START_TEST(settings_are_checked)
{
    sharc_writer_settings s;
    sharc_writer *w = (sharc_writer *)&s;
    char *out = path_in(tmp_root, "out");
    settings_for(&s, out, SHARC_LAYOUT_SHAR, SHARC_WRITER_COMPRESS_NONE, 1);
    s.struct_size = 0;
    ck_assert_int_eq(sharc_writer_open(&w, &s), SHARC_ERR(EINVAL));
    ck_assert_ptr_null(w);
    s.struct_size = sizeof s - 1;
    ck_assert_int_eq(sharc_writer_open(&w, &s), SHARC_ERR(EINVAL));
    s.struct_size = sizeof s;
    s.cuts_per_shard = 0;
    ck_assert_int_eq(sharc_writer_open(&w, &s), SHARC_ERR(EINVAL));
    s.cuts_per_shard = 1;
    s.layout = SHARC_LAYOUT_WDS;
    ck_assert_int_eq(sharc_writer_open(&w, &s), SHARC_ERR(EINVAL));
    s.layout = SHARC_LAYOUT_SHAR;
    s.out_dir = NULL;
    ck_assert_int_eq(sharc_writer_open(&w, &s), SHARC_ERR(EINVAL));
    s.out_dir = out;
    ck_assert_int_eq(sharc_writer_open(&w, &s), 0);
    expect_error(w, sharc_writer_finish(w), SHARC_ERR(EINVAL), "no cut was added");
    sharc_writer_close(&w);
    ck_assert_ptr_null(w);
    sharc_writer_close(&w);
    sharc_writer_close(NULL);
    /* A folder with something in it is refused and left as it was. */
    ck_assert_int_eq(mkdir(out, 0777), 0);
    char *keep = path_in(out, "keep");
    ck_assert_int_eq(tu_write_file(keep, "x", 1), 0);
    ck_assert_int_eq(sharc_writer_open(&w, &s), 0);
    char want[600];
    snprintf(want, sizeof want,
             "%s is not empty; the writer writes only into an empty or new folder", out);
    expect_error(w, sharc_writer_begin(w), SHARC_ERR(EEXIST), want);
    sharc_writer_close(&w);
    expect_listing(out, "keep");
    free(keep);
    free(out);
}
END_TEST

/* abort (or close without finish) removes every file and the folders the writer made; a
 * folder that was there stays, empty. */
START_TEST(abort_and_close_remove_everything)
{
    for (int how = 0; how < 4; how++) {
        sharc_layout layout = how % 2 ? SHARC_LAYOUT_NEMO : SHARC_LAYOUT_SHAR;
        char *out = path_in(tmp_root, "out");
        if (how >= 2)
            ck_assert_int_eq(mkdir(out, 0777), 0);
        sharc_writer *w = open_on(out, layout);
        write_cuts5(w, tmp_root);
        sharc_writer_stats st;
        sharc_writer_get_stats(w, &st);
        ck_assert_uint_eq(st.files, layout == SHARC_LAYOUT_SHAR ? 6 : 7);
        if (how < 2) {
            ck_assert_uint_eq(sharc_writer_abort(w), st.files);
            ck_assert_int_eq(sharc_writer_add(w, &(sharc_writer_cut){.id = "z", .data = "x"}),
                             SHARC_ERR(EINVAL));
            ck_assert_str_eq(sharc_writer_last_error(w), "the writer accepts nothing more");
            ck_assert_uint_eq(sharc_writer_abort(w), 0);
        }
        sharc_writer_close(&w);
        expect_listing(out, how >= 2 ? "" : "<absent>");
        rmdir(out);
        free(out);
    }
}
END_TEST

static int cancel_after;

static int cancel_countdown(void *cookie)
{
    (void)cookie;
    return --cancel_after < 0;
}

START_TEST(cancel_stops_and_abort_cleans)
{
    char *out = path_in(tmp_root, "out");
    sharc_writer_settings s;
    settings_for(&s, out, SHARC_LAYOUT_SHAR, SHARC_WRITER_COMPRESS_GZIP, 2);
    s.cancel = cancel_countdown;
    cancel_after = 3;
    sharc_writer *w = NULL;
    ck_assert_int_eq(sharc_writer_open(&w, &s), 0);
    int rc = 0;
    for (int i = 0; i < (int)N_CUTS5 && rc == 0; i++) {
        sharc_writer_cut cut;
        uint8_t *buf;
        char *path;
        cut_for(i, tmp_root, &cut, &buf, &path);
        rc = sharc_writer_add(w, &cut);
        free(buf);
        free(path);
    }
    expect_error(w, rc, SHARC_ERR(ECANCELED), "cancelled");
    ck_assert_uint_gt(sharc_writer_abort(w), 0);
    sharc_writer_close(&w);
    expect_listing(out, "<absent>");
    free(out);
}
END_TEST

START_TEST(dry_run_writes_nothing)
{
    char *out = path_in(tmp_root, "out");
    sharc_writer_settings s;
    settings_for(&s, out, SHARC_LAYOUT_NEMO, SHARC_WRITER_COMPRESS_NONE, 2);
    s.dry_run = 1;
    sharc_writer *w = NULL;
    ck_assert_int_eq(sharc_writer_open(&w, &s), 0);
    write_cuts5(w, tmp_root);
    ck_assert_int_eq(sharc_writer_finish(w), 0);
    sharc_writer_stats st;
    sharc_writer_get_stats(w, &st);
    ck_assert_uint_eq(st.cuts, 5);
    ck_assert_uint_eq(st.shards, 3);
    ck_assert_uint_eq(st.files, 0);
    ck_assert_uint_eq(st.bytes, st.audio_bytes);
    sharc_writer_close(&w);
    expect_listing(out, "<absent>");
    free(out);
}
END_TEST

/* An allocator that fails from its `limit`-th allocation on. */
typedef struct failing {
    int count, limit;
} failing;

static void *failing_alloc(void *cookie, size_t size, size_t align)
{
    failing *f = cookie;
    if (f->count++ >= f->limit)
        return NULL;
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) ? NULL : p;
}

START_TEST(allocation_failures_leave_nothing)
{
    char *out = path_in(tmp_root, "out");
    int succeeded = 0;
    for (int limit = 0; limit < 400 && !succeeded; limit++) {
        failing f = {0, limit};
        sharc_writer_settings s;
        settings_for(&s, out, _i ? SHARC_LAYOUT_NEMO : SHARC_LAYOUT_SHAR,
                     SHARC_WRITER_COMPRESS_NONE, 2);
        s.allocator.alloc = failing_alloc;
        s.allocator.free = tu_free;
        s.allocator.cookie = &f;
        sharc_writer *w = NULL;
        int rc = sharc_writer_open(&w, &s);
        for (int i = 0; rc == 0 && i < (int)N_CUTS5; i++) {
            sharc_writer_cut cut;
            uint8_t *buf;
            char *path;
            cut_for(i, tmp_root, &cut, &buf, &path);
            rc = sharc_writer_add(w, &cut);
            free(buf);
            free(path);
        }
        if (rc == 0)
            rc = sharc_writer_finish(w);
        ck_assert_msg(rc == 0 || rc == SHARC_ERR(ENOMEM), "limit %d: %s (%s)", limit,
                      sharc_err_name(rc), sharc_writer_last_error(w));
        if (rc == SHARC_ERR(ENOMEM) && w)
            ck_assert_str_eq(sharc_writer_last_error(w), "out of memory");
        sharc_writer_close(&w);
        if (rc == 0) {
            succeeded = 1;
            read_back(out, _i ? SHARC_LAYOUT_NEMO : SHARC_LAYOUT_SHAR);
        } else {
            expect_listing(out, "<absent>");
        }
    }
    ck_assert_msg(succeeded, "no run succeeded with 400 allocations");
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("writer");
    TCase *tc = tcase_create("round_trip");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, shar_round_trip, SHARC_WRITER_COMPRESS_NONE,
                        SHARC_WRITER_COMPRESS_ZSTD + 1);
    tcase_add_loop_test(tc, nemo_round_trip, SHARC_WRITER_COMPRESS_NONE,
                        SHARC_WRITER_COMPRESS_ZSTD + 1);
    tcase_add_test(tc, dry_run_writes_nothing);
    suite_add_tcase(s, tc);
    TCase *bad = tcase_create("failures");
    tcase_set_timeout(bad, 120);
    tcase_add_checked_fixture(bad, setup, teardown);
    tcase_add_test(bad, bad_cuts_are_refused_with_their_origin);
    tcase_add_test(bad, settings_are_checked);
    tcase_add_test(bad, abort_and_close_remove_everything);
    tcase_add_test(bad, cancel_stops_and_abort_cleans);
    tcase_add_loop_test(bad, allocation_failures_leave_nothing, 0, 2);
    suite_add_tcase(s, bad);
    return tu_run_suite(s);
}

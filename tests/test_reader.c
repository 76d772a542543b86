/*
 * Reader tests over corpora written by sharc-gen (every layout, codec and compression),
 * the Lhotse-written fixture, and damaged copies of both.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sharc/sharc.h"
#include "synth.h"
#include "testutil.h"

typedef struct expected_cut {
    char id[512];
    char text[1024];
    char member[512];
    int64_t num_samples;
    int sampling_rate;
    int channels;
    uint64_t cut_seed;
    int64_t offset_frames;
    int seen;
} expected_cut;

typedef struct corpus {
    char *dir;
    char path[600];
    expected_cut *cuts;
    size_t n;
} corpus;

static const char *gen(void)
{
    const char *g = getenv("SHARC_GEN");
    ck_assert_msg(g != NULL, "SHARC_GEN not set");
    return g;
}

static void load_expected(corpus *c, const char *file)
{
    size_t n;
    char *text = (char *)tu_read_file(file, &n);
    ck_assert_msg(text != NULL, "cannot read %s", file);
    text = realloc(text, n + 1);
    text[n] = 0;
    c->cuts = calloc(4096, sizeof *c->cuts);
    c->n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        ck_assert_ptr_nonnull(o);
        expected_cut *e = &c->cuts[c->n++];
        snprintf(e->id, sizeof e->id, "%s", cJSON_GetObjectItem(o, "id")->valuestring);
        cJSON *t = cJSON_GetObjectItem(o, "text");
        snprintf(e->text, sizeof e->text, "%s", cJSON_IsString(t) ? t->valuestring : "");
        snprintf(e->member, sizeof e->member, "%s", cJSON_GetObjectItem(o, "member")->valuestring);
        e->num_samples = (int64_t)cJSON_GetObjectItem(o, "num_samples")->valuedouble;
        e->sampling_rate = cJSON_GetObjectItem(o, "sampling_rate")->valueint;
        e->channels = cJSON_GetObjectItem(o, "channels")->valueint;
        e->cut_seed = (uint64_t)cJSON_GetObjectItem(o, "cut_seed")->valuedouble;
        e->offset_frames = (int64_t)cJSON_GetObjectItem(o, "offset_frames")->valuedouble;
        cJSON_Delete(o);
    }
    free(text);
}

static corpus make_corpus(const char *layout, const char *codec, const char *compress, int shards,
                          int cuts)
{
    corpus c = {0};
    c.dir = tu_mkdtemp();
    ck_assert_int_eq(tu_sh("'%s' --out '%s' --layout %s --codec %s --compress %s --shards %d "
                           "--cuts-per-shard %d --max-duration 6 >/dev/null",
                           gen(), c.dir, layout, codec, compress, shards, cuts),
                     0);
    snprintf(c.path, sizeof c.path, "%s/%s", c.dir, layout);
    char exp[700];
    snprintf(exp, sizeof exp, "%s/%s.expected.jsonl", c.dir, layout);
    load_expected(&c, exp);
    return c;
}

static void free_corpus(corpus *c)
{
    tu_rm_rf(c->dir);
    free(c->dir);
    free(c->cuts);
}

static expected_cut *find(corpus *c, const char *id)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->cuts[i].id, id) == 0)
            return &c->cuts[i];
    return NULL;
}

/* Defaults, reading `paths[0]` = path, without a logger. */
static void settings_on(sharc_reader_settings *s, const char **paths, const char *path)
{
    sharc_reader_default_settings(s);
    paths[0] = path;
    s->paths = paths;
    s->n_paths = 1;
    s->logger.callback = NULL;
}

static sharc_reader *open_reader(const char *path, sharc_error_policy policy, uint64_t epochs)
{
    sharc_reader_settings s;
    const char *paths[1];
    settings_on(&s, paths, path);
    s.on_error = policy;
    s.epochs = epochs;
    sharc_reader *r = NULL;
    int rc = sharc_reader_open(&r, &s);
    ck_assert_msg(rc == 0, "open %s: %s", path, sharc_strerror(rc));
    return r;
}

/* Compare one decoded cut with what the generator wrote, sample by sample. */
static void check_cut(corpus *c, const sharc_cut *cut, int lossless)
{
    expected_cut *e = find(c, cut->id);
    ck_assert_msg(e != NULL, "unexpected cut %s", cut->id);
    e->seen++;
    ck_assert_int_eq(cut->num_samples, e->num_samples);
    ck_assert_int_eq(cut->sampling_rate, e->sampling_rate);
    ck_assert_int_eq(cut->channels, e->channels);
    ck_assert_str_eq(cut->text ? cut->text : "", e->text);
    ck_assert_str_eq(cut->member, e->member);
    ck_assert_ptr_nonnull(cut->samples);
    if (!lossless)
        return;
    for (int64_t i = 0; i < cut->num_samples; i++)
        for (int ch = 0; ch < cut->channels; ch++) {
            float want = synth_sample_f32(e->cut_seed, e->offset_frames + i, ch);
            float got = cut->samples[i * cut->channels + ch];
            if (got != want)
                ck_abort_msg("cut %s frame %lld channel %d: got %.9g want %.9g", cut->id,
                             (long long)i, ch, got, want);
        }
}

static void read_all_and_check(const char *layout, const char *codec, const char *compress)
{
    corpus c = make_corpus(layout, codec, compress, 3, 5);
    sharc_reader *r = open_reader(c.path, SHARC_ON_ERROR_FAIL, 1);
    const sharc_cut *cut;
    int rc;
    size_t n = 0;
    int lossless = strcmp(codec, "flac") == 0 || strcmp(codec, "wav") == 0;
    ck_assert_uint_eq(sharc_reader_num_shards(r), 3);
    while ((rc = sharc_reader_next(r, &cut)) == 0) {
        check_cut(&c, cut, lossless);
        /* The shard list the index refers to names the same file. */
        const char *path = sharc_reader_shard_path(r, cut->shard_index);
        ck_assert_msg(path && strcmp(path, cut->shard) == 0, "shard %u: %s, cut says %s",
                      cut->shard_index, path ? path : "NULL", cut->shard);
        n++;
    }
    ck_assert_ptr_null(sharc_reader_shard_path(r, 3));
    ck_assert_ptr_null(sharc_reader_shard_path(NULL, 0));
    ck_assert_msg(rc == SHARC_END, "%s: %s", sharc_strerror(rc), sharc_reader_last_error(r));
    ck_assert_uint_eq(n, c.n);
    for (size_t i = 0; i < c.n; i++)
        ck_assert_msg(c.cuts[i].seen == 1, "cut %s seen %d times", c.cuts[i].id, c.cuts[i].seen);
    sharc_reader_stats st;
    sharc_reader_get_stats(r, &st);
    ck_assert_uint_eq(st.cuts, c.n);
    ck_assert_uint_eq(st.shards, 3);
    sharc_reader_close(&r);
    ck_assert_ptr_null(r);
    free_corpus(&c);
}

static const char *layouts[] = {"shar", "nemo", "wds"};
static const char *compressions[] = {"none", "gzip", "zstd"};

START_TEST(every_layout_and_compression_flac)
{
    read_all_and_check(layouts[_i / 3], "flac", compressions[_i % 3]);
}
END_TEST

START_TEST(every_layout_wav_opus_mp3)
{
    static const char *codecs[] = {"wav", "opus", "mp3"};
    read_all_and_check(layouts[_i / 3], codecs[_i % 3], "gzip");
}
END_TEST

/* NeMo rows that cut one member come in manifest order, as NeMo yields them, not sorted by
 * their audio_filepath ("x-sub1.flac" sorts before "x.flac"). */
static int cmp_expected_id(const void *a, const void *b)
{
    return strcmp(((const expected_cut *)a)->id, ((const expected_cut *)b)->id);
}

/* The rows of one member come sorted by audio_filepath, as NeMo's LazyNeMoTarredIterator
 * yields them: x-sub1.flac, x-sub2.flac, then x.flac ('-' sorts before '.'). */
START_TEST(nemo_rows_sorted_by_path)
{
    corpus c = make_corpus("nemo", "flac", "none", 3, 6);
    /* The generator lists rows in manifest order; NeMo's is by member, then by path. */
    for (size_t i = 0, j; i < c.n; i = j) {
        for (j = i + 1; j < c.n && strcmp(c.cuts[j].member, c.cuts[i].member) == 0; j++)
            ;
        qsort(c.cuts + i, j - i, sizeof *c.cuts, cmp_expected_id);
    }
    sharc_reader_settings s;
    const char *paths[1];
    settings_on(&s, paths, c.path);
    s.shuffle_shards = 0;
    sharc_reader *r;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    const sharc_cut *cut;
    size_t n = 0, subs = 0, after_subs = 0;
    while (sharc_reader_next(r, &cut) == 0) {
        ck_assert_uint_lt(n, c.n);
        ck_assert_msg(strcmp(cut->id, c.cuts[n].id) == 0, "cut %zu: %s, want %s", n, cut->id,
                      c.cuts[n].id);
        int sub = strstr(cut->id, "-sub") != NULL;
        subs += sub;
        after_subs += !sub && n > 0 && strstr(c.cuts[n - 1].id, "-sub") &&
                      strcmp(c.cuts[n - 1].member, c.cuts[n].member) == 0;
        n++;
    }
    ck_assert_uint_eq(n, c.n);
    ck_assert_uint_gt(subs, 0);       /* the corpus has rows that share a member */
    ck_assert_uint_gt(after_subs, 0); /* and x.flac comes after its x-subN.flac */
    sharc_reader_close(&r);
    free_corpus(&c);
}
END_TEST

/* A NeMo dataset written by Python's tarfile: one tar of 1 s WAV members named by
 * `members` (spaces between), and the manifest `rows`. */
static char *nemo_by_hand(const char *members, const char *rows)
{
    char *dir = tu_mkdtemp();
    char path[700];
    snprintf(path, sizeof path, "%s/manifest_0.json", dir);
    ck_assert_int_eq(tu_write_file(path, rows, strlen(rows)), 0);
    ck_assert_int_eq(
        tu_sh("cd '%s' && python3 -c \"\n"
              "import io, struct, sys, tarfile, wave\n"
              "with tarfile.open('audio_0.tar', 'w', format=tarfile.USTAR_FORMAT) as t:\n"
              "    for name in sys.argv[1:]:\n"
              "        b = io.BytesIO(); w = wave.open(b, 'wb'); w.setnchannels(1)\n"
              "        w.setsampwidth(2); w.setframerate(16000)\n"
              "        w.writeframes(struct.pack('<16000h', *range(16000))); w.close()\n"
              "        i = tarfile.TarInfo(name); i.size = len(b.getvalue())\n"
              "        t.addfile(i, io.BytesIO(b.getvalue()))\n"
              "\" %s",
              dir, members),
        0);
    return dir;
}

/* Rows name their member by the whole audio_filepath, as NeMo matches them (tar_info.name ==
 * the path, -subN removed): members in directories pair, and a row that names its member by
 * another path does not pair with it (NeMo stops with "Mismatched entry"). An empty list or
 * object as _skipme is false, as in Python. */
START_TEST(nemo_rows_match_members_by_whole_path)
{
    char *dir = nemo_by_hand(
        "a/x.wav b/x.wav c.wav d.wav",
        "{\"audio_filepath\": \"b/x.wav\", \"duration\": 0.1, \"text\": \"B\", \"shard_id\": 0}\n"
        "{\"audio_filepath\": \"a/x.wav\", \"duration\": 0.1, \"text\": \"A\", \"shard_id\": 0}\n"
        "{\"audio_filepath\": \"c.wav\", \"duration\": 0.1, \"_skipme\": {}, \"shard_id\": 0}\n"
        "{\"audio_filepath\": \"d.wav\", \"duration\": 0.1, \"_skipme\": [0], \"shard_id\": 0}\n");
    sharc_reader *r = open_reader(dir, SHARC_ON_ERROR_FAIL, 1); /* one shard: in order */
    const sharc_cut *cut;
    const char *ids[] = {"a/x.wav", "b/x.wav", "c.wav"}, *texts[] = {"A", "B", ""};
    size_t n = 0;
    int rc;
    while ((rc = sharc_reader_next(r, &cut)) == 0) {
        ck_assert_uint_lt(n, 3);
        ck_assert_str_eq(cut->id, ids[n]);
        ck_assert_str_eq(cut->text ? cut->text : "", texts[n]);
        ck_assert_int_eq(cut->num_samples, 1600);
        n++;
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    ck_assert_uint_eq(n, 3);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);

    dir = nemo_by_hand(
        "x.wav", "{\"audio_filepath\": \"/data/a/x.wav\", \"duration\": 0.1, \"shard_id\": 0}\n"
                 "{\"audio_filepath\": \"/data/b/x.wav\", \"duration\": 0.1, \"shard_id\": 0}\n");
    r = open_reader(dir, SHARC_ON_ERROR_FAIL, 1);
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_ERR_MISMATCH);
    ck_assert_msg(strstr(sharc_reader_last_error(r), "member x.wav has no row") != NULL, "%s",
                  sharc_reader_last_error(r));
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* A row whose duration is within 0.2 s of its member's is the whole member from its start,
 * whatever its offset, as NeMo's make_cut_with_subset_inmemory_recording makes it; other
 * rows are their window. Members here are 1 s (16000 samples of 0, 1, 2, ...). */
START_TEST(nemo_rows_near_the_member_length_are_the_member)
{
    char *dir = nemo_by_hand(
        "a.wav b.wav c.wav",
        "{\"audio_filepath\": \"a.wav\", \"duration\": 1.15, \"shard_id\": 0}\n"
        "{\"audio_filepath\": \"b.wav\", \"offset\": 0.02, \"duration\": 0.05, \"shard_id\": 0}\n"
        "{\"audio_filepath\": \"c.wav\", \"offset\": 0.5, \"duration\": 0.85, \"shard_id\": 0}\n");
    sharc_reader *r = open_reader(dir, SHARC_ON_ERROR_FAIL, 1); /* one shard: in order */
    const sharc_cut *cut;
    const int64_t want_n[] = {16000, 800, 16000}, want_first[] = {0, 320, 0};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sharc_reader_next(r, &cut), 0);
        ck_assert_int_eq(cut->num_samples, want_n[i]);
        ck_assert_double_eq_tol(cut->duration, (double)want_n[i] / 16000, 1e-9);
        ck_assert_float_eq_tol(cut->samples[0] * 32768.0f, (float)want_first[i], 1e-3f);
    }
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_END);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);

    /* A window past the member's end stops at the end, as Lhotse's truncate makes NeMo's. */
    dir = nemo_by_hand(
        "d.wav e.wav",
        "{\"audio_filepath\": \"d.wav\", \"offset\": 0.5, \"duration\": 0.75, \"shard_id\": 0}\n"
        "{\"audio_filepath\": \"e.wav\", \"duration\": 1.5, \"shard_id\": 0}\n");
    r = open_reader(dir, SHARC_ON_ERROR_FAIL, 1);
    const int64_t past_n[] = {8000, 16000}, past_first[] = {8000, 0};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sharc_reader_next(r, &cut), 0);
        ck_assert_int_eq(cut->num_samples, past_n[i]);
        ck_assert_float_eq_tol(cut->samples[0] * 32768.0f, (float)past_first[i], 1e-3f);
    }
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_END);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

/* A WebDataset tar written by Python's tarfile in a new directory: `entries` are NAME:WHAT
 * words, WHAT being WAV (0.1 s of 16 kHz PCM16) or the member's text. */
static char *wds_by_hand(const char *entries)
{
    char *dir = tu_mkdtemp();
    ck_assert_int_eq(
        tu_sh("cd '%s' && python3 -c \"\n"
              "import io, struct, sys, tarfile, wave\n"
              "def wav():\n"
              "    b = io.BytesIO(); w = wave.open(b, 'wb'); w.setnchannels(1)\n"
              "    w.setsampwidth(2); w.setframerate(16000)\n"
              "    w.writeframes(struct.pack('<1600h', *range(1600))); w.close()\n"
              "    return b.getvalue()\n"
              "with tarfile.open('shard-000000.tar', 'w', format=tarfile.USTAR_FORMAT) as t:\n"
              "    for e in sys.argv[1:]:\n"
              "        name, what = e.split(':', 1)\n"
              "        d = wav() if what == 'WAV' else what.encode()\n"
              "        i = tarfile.TarInfo(name); i.size = len(d); t.addfile(i, io.BytesIO(d))\n"
              "\" %s",
              dir, entries),
        0);
    return dir;
}

/* Samples as webdataset makes them: names with no key (".wav", "README", webdataset's
 * "__meta__") belong to no sample and are skipped, not taken into the next one; extensions
 * in any case; of several audio members the first is read. A sample with one extension twice
 * (webdataset stops on it) is a problem, and only it is lost under SKIP. */
START_TEST(wds_samples_as_webdataset_makes_them)
{
    char *dir = wds_by_hand(".wav:WAV .txt:orphan a.WAV:WAV a.TXT:alpha README:x __meta__:x "
                            "c.wav:WAV c.flac:WAV c.Json:{\\\"speaker\\\":\\\"s\\\"}");
    sharc_reader *r = open_reader(dir, SHARC_ON_ERROR_FAIL, 1);
    const sharc_cut *cut;
    ck_assert_int_eq(sharc_reader_next(r, &cut), 0);
    ck_assert_str_eq(cut->id, "a");
    ck_assert_str_eq(cut->member, "a.WAV");
    ck_assert_str_eq(cut->text, "alpha");
    ck_assert_int_eq(sharc_reader_next(r, &cut), 0);
    ck_assert_str_eq(cut->id, "c");
    ck_assert_str_eq(cut->member, "c.wav");
    ck_assert_str_eq(cut->speaker, "s");
    ck_assert_uint_eq(cut->n_fields, 1);
    ck_assert_str_eq(cut->fields[0].member, "c.flac");
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_END);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);

    dir = wds_by_hand("d.wav:WAV d.txt:old d.wav:WAV d.txt:new e.wav:WAV");
    r = open_reader(dir, SHARC_ON_ERROR_FAIL, 1);
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_ERR_MISMATCH);
    ck_assert_msg(strstr(sharc_reader_last_error(r), "sample d has member d.wav twice") != NULL,
                  "%s", sharc_reader_last_error(r));
    sharc_reader_close(&r);
    r = open_reader(dir, SHARC_ON_ERROR_SKIP, 1);
    ck_assert_int_eq(sharc_reader_next(r, &cut), 0);
    ck_assert_str_eq(cut->id, "e");
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_END);
    sharc_reader_close(&r);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

START_TEST(epochs_shuffle_and_dp_split)
{
    corpus c = make_corpus("shar", "flac", "gzip", 4, 3);
    /* Two epochs: every cut twice, once per epoch, in a different shard order. */
    sharc_reader *r = open_reader(c.path, SHARC_ON_ERROR_FAIL, 2);
    const sharc_cut *cut;
    uint32_t order[2][4];
    size_t per_epoch[2] = {0, 0};
    int rc;
    while ((rc = sharc_reader_next(r, &cut)) == 0) {
        ck_assert_uint_lt(cut->epoch, 2);
        if (cut->position == 0)
            order[cut->epoch][per_epoch[cut->epoch] / 3] = cut->shard_index;
        per_epoch[cut->epoch]++;
        find(&c, cut->id)->seen++;
    }
    ck_assert_int_eq(rc, SHARC_END);
    ck_assert_uint_eq(per_epoch[0], 12);
    ck_assert_uint_eq(per_epoch[1], 12);
    for (size_t i = 0; i < c.n; i++)
        ck_assert_int_eq(c.cuts[i].seen, 2);
    ck_assert_msg(memcmp(order[0], order[1], sizeof order[0]) != 0,
                  "epochs 0 and 1 read shards in the same order");
    sharc_reader_close(&r);

    /* Two data-parallel slots: disjoint shards, together everything. */
    for (size_t i = 0; i < c.n; i++)
        c.cuts[i].seen = 0;
    for (int slot = 0; slot < 2; slot++) {
        sharc_reader_settings s;
        const char *paths[1];
        settings_on(&s, paths, c.path);
        s.dp_rank = slot;
        s.dp_size = 2;
        s.seed = 7;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        size_t n = 0;
        while ((rc = sharc_reader_next(r, &cut)) == 0) {
            find(&c, cut->id)->seen++;
            n++;
        }
        ck_assert_int_eq(rc, SHARC_END);
        ck_assert_uint_eq(n, 6);
        sharc_reader_close(&r);
    }
    for (size_t i = 0; i < c.n; i++)
        ck_assert_int_eq(c.cuts[i].seen, 1);

    /* Seven slots over four shards, two shuffled epochs: slots that read the same shard
     * share its cuts, and every cut goes to exactly one slot in each epoch. */
    for (size_t i = 0; i < c.n; i++)
        c.cuts[i].seen = 0;
    size_t epoch_cuts[2] = {0, 0}, slot_cuts[7] = {0};
    for (int slot = 0; slot < 7; slot++) {
        sharc_reader_settings s;
        const char *paths[1];
        settings_on(&s, paths, c.path);
        s.dp_rank = slot;
        s.dp_size = 7;
        s.seed = 7;
        s.epochs = 2;
        s.shuffle_shards = 1;
        ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
        while ((rc = sharc_reader_next(r, &cut)) == 0) {
            ck_assert_uint_lt(cut->epoch, 2);
            epoch_cuts[cut->epoch]++;
            slot_cuts[slot]++;
            find(&c, cut->id)->seen++;
        }
        ck_assert_int_eq(rc, SHARC_END);
        sharc_reader_close(&r);
    }
    ck_assert_uint_eq(epoch_cuts[0], 12);
    ck_assert_uint_eq(epoch_cuts[1], 12);
    for (size_t i = 0; i < c.n; i++)
        ck_assert_int_eq(c.cuts[i].seen, 2);
    /* Slot 3 reads a shard alone; slots 0 and 4 share one (2 + 1 of its 3 cuts a epoch). */
    ck_assert_uint_eq(slot_cuts[3], 6);
    ck_assert_uint_eq(slot_cuts[0], 4);
    ck_assert_uint_eq(slot_cuts[4], 2);
    free_corpus(&c);
}
END_TEST

/* The fixture written by the real Lhotse SharWriter (testdata/lhotse-shar-edge). */
START_TEST(lhotse_written_fixture)
{
    static const char *formats[] = {"flac", "wav", "opus", "mp3"};
    const char *fmt = formats[_i];
    size_t n;
    char *text = (char *)tu_read_file(tu_testdata("lhotse-shar-edge/expected.json"), &n);
    ck_assert_ptr_nonnull(text);
    cJSON *root = cJSON_ParseWithLength(text, n);
    free(text);
    cJSON *cuts = cJSON_GetObjectItem(root, "cuts");
    char path[512];
    snprintf(path, sizeof path, "%s", tu_testdata("lhotse-shar-edge"));
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", fmt);
    sharc_reader_settings s;
    const char *paths[1];
    settings_on(&s, paths, path);
    s.shuffle_shards = 0;
    sharc_reader *r;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    const sharc_cut *cut;
    int rc, count = 0;
    while ((rc = sharc_reader_next(r, &cut)) == 0) {
        cJSON *e = cJSON_GetObjectItem(cuts, cut->id);
        ck_assert_msg(e != NULL, "unexpected cut id %s", cut->id);
        ck_assert_int_eq(cut->num_samples, cJSON_GetObjectItem(e, "num_samples")->valueint);
        ck_assert_int_eq(cut->sampling_rate, cJSON_GetObjectItem(e, "sampling_rate")->valueint);
        ck_assert_int_eq(cut->channels, cJSON_GetObjectItem(e, "channels")->valueint);
        /* Supervision texts, joined by a space. */
        char joined[1024] = "";
        cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "texts"))
        {
            if (joined[0])
                strcat(joined, " ");
            strcat(joined, t->valuestring);
        }
        ck_assert_str_eq(cut->text ? cut->text : "", joined);
        double sum = 0;
        for (int64_t i = 0; i < cut->num_samples * cut->channels; i++)
            sum += cut->samples[i];
        double want = cJSON_GetObjectItem(e, "sample_sum")->valuedouble;
        /* Exact for lossless codecs. Opus drops the DC offset, so its sum says nothing. */
        double tol = _i < 2 ? 1e-6 : _i == 3 ? 0.02 * fabs(want) + 1.0 : INFINITY;
        ck_assert_msg(fabs(sum - want) <= tol, "%s %s: sample sum %.9g, expected %.9g", fmt,
                      cut->id, sum, want);
        /* Extra fields: lang_id on cuts 0-5, target_recording on even cuts. */
        int has_lang = 0, has_target = 0;
        for (size_t f = 0; f < cut->n_fields; f++) {
            if (strcmp(cut->fields[f].name, "lang_id") == 0) {
                has_lang = 1;
                cJSON *want_lang = cJSON_GetObjectItem(e, "lang_id");
                char quoted[64];
                snprintf(quoted, sizeof quoted, "\"%s\"", want_lang->valuestring);
                ck_assert_str_eq(cut->fields[f].json, quoted);
            }
            if (strcmp(cut->fields[f].name, "target_recording") == 0) {
                has_target = 1;
                ck_assert_uint_gt(cut->fields[f].nbytes, 0);
                ck_assert_ptr_nonnull(cut->fields[f].json);
            }
        }
        ck_assert_int_eq(has_lang, cJSON_IsString(cJSON_GetObjectItem(e, "lang_id")));
        ck_assert_int_eq(has_target, cJSON_IsTrue(cJSON_GetObjectItem(e, "has_target")));
        count++;
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    ck_assert_int_eq(count, cJSON_GetArraySize(cuts));
    sharc_reader_close(&r);
    cJSON_Delete(root);
}
END_TEST

typedef struct problem_log {
    int count;
    sharc_problem kinds[64];
    char last_message[1024];
    char last_cut[512];
    char last_member[512];
} problem_log;

static void on_problem(void *cookie, const sharc_problem_report *p)
{
    problem_log *log = cookie;
    if (log->count < 64)
        log->kinds[log->count] = p->kind;
    log->count++;
    snprintf(log->last_message, sizeof log->last_message, "%s", p->message);
    snprintf(log->last_cut, sizeof log->last_cut, "%s", p->cut_id ? p->cut_id : "");
    snprintf(log->last_member, sizeof log->last_member, "%s", p->member ? p->member : "");
}

/* Read `path` under a policy; returns the final code, the cut count and the problems. */
static int read_with(const char *path, sharc_error_policy policy, size_t *cuts, problem_log *log,
                     char *error, size_t error_cap, uint64_t max_member, sharc_reader_stats *stats)
{
    sharc_reader_settings s;
    const char *paths[1];
    settings_on(&s, paths, path);
    s.on_error = policy;
    s.on_problem = on_problem;
    s.problem_cookie = log;
    if (max_member)
        s.max_member_bytes = max_member;
    memset(log, 0, sizeof *log);
    sharc_reader *r;
    int rc = sharc_reader_open(&r, &s);
    *cuts = 0;
    if (rc < 0)
        return rc;
    const sharc_cut *cut;
    while ((rc = sharc_reader_next(r, &cut)) == 0)
        (*cuts)++;
    snprintf(error, error_cap, "%s", sharc_reader_last_error(r));
    if (stats)
        sharc_reader_get_stats(r, stats);
    sharc_reader_close(&r);
    return rc;
}

static void corrupt(corpus *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void corrupt(corpus *c, const char *fmt, ...)
{
    char args[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    const char *src = getenv("SHARC_TESTS_SRC");
    ck_assert_int_eq(tu_sh("cd '%s' && python3 '%s/corrupt.py' %s", c->path, src, args), 0);
}

typedef struct damage_case {
    const char *layout;
    const char *compress;
    const char *command; /* corrupt.py arguments; %s is replaced by a member name */
    int member_index;    /* which expected cut's member %s names */
    int fail_code;       /* sharc_reader_next's error under FAIL */
    sharc_problem kind;  /* problem kind reported */
    const char *message; /* a substring of the message ("" = the member name) */
    int lost;            /* cuts lost under SKIP (-1: more than one, the rest of a shard) */
    uint64_t max_member;
    /* 0: names not checked; else the problem names the member %s stands for and a cut:
     * NAMES_ITS (member_index's), NAMES_NEXT (the one after, lost with the tar broken right
     * after the member) or NAMES_NONE (no cut: the rest of the shard is lost) */
    int names;
} damage_case;

enum { NAMES_ITS = 1, NAMES_NEXT, NAMES_NONE };

static const damage_case damage[] = {
    {"shar", "none", "truncate recording.000001.tar 3000", 5, SHARC_ERR_CORRUPT,
     SHARC_PROBLEM_ARCHIVE, "recording.000001.tar", -1, 0, NAMES_ITS},
    /* A tar cut short in or right after a member: the problem names that member and its cut
     * (Shar: the cut the member's name gives; WebDataset: the member's key; NeMo: its row). */
    {"shar", "none", "tar-cut recording.000001.tar %s end", 9, SHARC_ERR_CORRUPT,
     SHARC_PROBLEM_ARCHIVE, "", 1, 0, NAMES_ITS},
    {"shar", "none", "tar-cut recording.000001.tar %s.json end", 7, SHARC_ERR_CORRUPT,
     SHARC_PROBLEM_ARCHIVE, "", 2, 0, NAMES_NEXT},
    {"wds", "none", "tar-cut shard-000001.tar %s mid", 7, SHARC_ERR_CORRUPT, SHARC_PROBLEM_ARCHIVE,
     "", 3, 0, NAMES_ITS},
    /* Cut right after the sample's audio: the sample is lost with the rest, not read without
     * its transcript. */
    {"wds", "none", "tar-cut shard-000001.tar %s end", 7, SHARC_ERR_CORRUPT, SHARC_PROBLEM_ARCHIVE,
     "", 3, 0, NAMES_ITS},
    {"nemo", "none", "tar-cut audio_1.tar %s mid", 8, SHARC_ERR_CORRUPT, SHARC_PROBLEM_ARCHIVE, "",
     2, 0, NAMES_ITS},
    {"nemo", "none", "tar-cut audio_1.tar %s end", 8, SHARC_ERR_CORRUPT, SHARC_PROBLEM_ARCHIVE, "",
     1, 0, NAMES_NONE},
    {"shar", "zstd", "flip recording.000000.tar.zst 6", 0, SHARC_ERR_CORRUPT, SHARC_PROBLEM_ARCHIVE,
     "recording.000000.tar.zst", -1, 0, 0},
    {"shar", "none", "tar-replace recording.000000.tar %s @flac-garbage:3000", 1, SHARC_ERR_DECODE,
     SHARC_PROBLEM_DECODE, "", 1, 0, 0},
    {"shar", "none", "lines-swap cuts.000000.jsonl 0 1", 0, SHARC_ERR_MISMATCH,
     SHARC_PROBLEM_ID_MISMATCH, "does not belong to cut", -1, 0, 0},
    /* A bad cut line costs that cut only: its members are stepped over. */
    {"shar", "gzip", "lines-set cuts.000001.jsonl.gz 2 {not-json", 0, SHARC_ERR_JSON,
     SHARC_PROBLEM_JSON, "cuts.000001.jsonl.gz line 3", 1, 0, 0},
    /* The same for a cut line whose id is known and whose duration is not a number. */
    {"shar", "none", "lines-key cuts.000001.jsonl 3 duration abc", 0, SHARC_ERR_JSON,
     SHARC_PROBLEM_JSON, "\"duration\" is not a number of seconds", 1, 0, 0},
    /* A NeMo row whose duration or offset is there but not seconds costs that row: it is
     * not read as the whole member or from its start. */
    {"nemo", "none", "lines-json sharded_manifests/manifest_1.json 1 duration -2.5", 0,
     SHARC_ERR_JSON, SHARC_PROBLEM_JSON, "\"duration\" is -2.5 s, below 0", 1, 0, 0},
    {"nemo", "gzip", "lines-key sharded_manifests/manifest_0.json 0 offset 1.5", 0, SHARC_ERR_JSON,
     SHARC_PROBLEM_JSON, "\"offset\" is not a number of seconds", 1, 0, 0},
    /* A bad value in a cut line whose id is known: the message names the cut. */
    {"shar", "none", "lines-key cuts.000001.jsonl 1 supervisions x", 0, SHARC_ERR_JSON,
     SHARC_PROBLEM_JSON, "cuts.000001.jsonl line 2 (cut ", 1, 0, 0},
    {"shar", "none", "lines-drop cuts.000002.jsonl 4", 0, SHARC_ERR_MISMATCH,
     SHARC_PROBLEM_ORPHAN_MEMBER, "more entries than", 1, 0, 0},
    /* A NeMo member over the size cap: its row's cut is named, only it is lost. */
    {"nemo", "none", "tar-replace audio_1.tar %s @garbage:2000000", 8, SHARC_ERR_TOO_LARGE,
     SHARC_PROBLEM_TOO_LARGE, "", 1, 1 << 20, NAMES_ITS},
    {"wds", "none", "tar-huge shard-000000.tar huge.flac 99999999999", 0, SHARC_ERR_TOO_LARGE,
     SHARC_PROBLEM_TOO_LARGE, "huge.flac", 0, 1 << 20, 0},
    {"nemo", "none", "lines-drop sharded_manifests/manifest_1.json 0", 0, SHARC_ERR_MISMATCH,
     SHARC_PROBLEM_ORPHAN_MEMBER, "has no row", 1, 0, 0},
    {"nemo", "none", "tar-drop audio_0.tar %s", 0, SHARC_ERR_MISMATCH, SHARC_PROBLEM_MISSING_MEMBER,
     "has no member", 1, 0, 0},
    /* Odd member count: the last cut's metadata member is missing ("%s" -> its .json). */
    {"shar", "none", "tar-drop recording.000001.tar %s.json", 9, SHARC_ERR_MISMATCH,
     SHARC_PROBLEM_MISSING_MEMBER, "odd number of members", 1, 0, 0},
    {"wds", "none", "tar-replace shard-000001.tar %s @garbage:500", 7, SHARC_ERR_DECODE,
     SHARC_PROBLEM_DECODE, "", 1, 0, 0},
};

START_TEST(damaged_shards_are_reported)
{
    const damage_case *d = &damage[_i];
    corpus c = make_corpus(d->layout, "flac", d->compress, 3, 5);
    const char *member = c.cuts[d->member_index].member;
    char stem[512], cmd[1024];
    snprintf(stem, sizeof stem, "%s", member);
    if (strstr(d->command, "%s.json"))
        *strrchr(stem, '.') = 0; /* the command names the metadata member */
    snprintf(cmd, sizeof cmd, d->command, stem);
    corrupt(&c, "%s", cmd);
    char named[520];
    snprintf(named, sizeof named, "%s%s", stem, strstr(d->command, "%s.json") ? ".json" : "");
    const char *expect = d->message[0] ? d->message : named;

    size_t cuts;
    problem_log log;
    char error[1024];
    int rc = read_with(c.path, SHARC_ON_ERROR_FAIL, &cuts, &log, error, sizeof error, d->max_member,
                       NULL);
    ck_assert_msg(rc == d->fail_code, "case %d: got %s (%s), want %s", _i, sharc_err_name(rc),
                  error, sharc_err_name(d->fail_code));
    ck_assert_msg(strstr(error, expect) != NULL, "case %d: '%s' not in '%s'", _i, expect, error);
    ck_assert_int_eq(log.count, 1);
    ck_assert_int_eq(log.kinds[0], d->kind);
    ck_assert_str_eq(log.last_message, error);
    if (d->names) {
        ck_assert_str_eq(log.last_member, named);
        const char *cut =
            d->names == NAMES_NONE ? "" : c.cuts[d->member_index + (d->names == NAMES_NEXT)].id;
        ck_assert_str_eq(log.last_cut, cut);
        /* The text names the cut being read too (in the member's name, or appended). */
        ck_assert_msg(strstr(error, cut) != NULL, "case %d: cut '%s' not in '%s'", _i, cut, error);
    }

    sharc_reader_stats st;
    rc = read_with(c.path, SHARC_ON_ERROR_SKIP, &cuts, &log, error, sizeof error, d->max_member,
                   &st);
    ck_assert_msg(rc == SHARC_END, "case %d under skip: %s", _i, error);
    ck_assert_uint_ge(st.problems[d->kind], 1);
    if (d->kind == SHARC_PROBLEM_ORPHAN_MEMBER && strcmp(d->layout, "nemo") == 0)
        /* A member without a row is no cut: nothing was skipped but the member. */
        ck_assert_msg(st.skipped_cuts == 0 && st.skipped_shards == 0,
                      "case %d: %" PRIu64 " cuts and %" PRIu64 " shards skipped", _i,
                      st.skipped_cuts, st.skipped_shards);
    else
        ck_assert_uint_ge(st.skipped_cuts + st.skipped_shards, 1);
    ck_assert_int_ge(log.count, 1);
    ck_assert_int_eq(log.kinds[0], d->kind);
    if (d->lost >= 0)
        ck_assert_msg(cuts == c.n - (size_t)d->lost, "case %d: %zu cuts of %zu", _i, cuts, c.n);
    else
        ck_assert_msg(cuts < c.n - 1, "case %d: %zu cuts of %zu", _i, cuts, c.n);
    free_corpus(&c);
}
END_TEST

/* A WebDataset tar that breaks inside a member with no key ("README") between a sample's
 * members: the problem names that member and the sample being read, which is lost with the
 * rest of the shard. */
START_TEST(wds_tar_broken_inside_a_keyless_member)
{
    corpus c = make_corpus("wds", "flac", "none", 3, 5);
    char stem[512];
    snprintf(stem, sizeof stem, "%s", c.cuts[7].member);
    *strrchr(stem, '.') = 0;
    corrupt(&c, "tar-rename shard-000001.tar %s.json README", stem);
    corrupt(&c, "tar-cut shard-000001.tar README mid");
    size_t cuts;
    problem_log log;
    char error[1024];
    int rc = read_with(c.path, SHARC_ON_ERROR_FAIL, &cuts, &log, error, sizeof error, 0, NULL);
    ck_assert_msg(rc == SHARC_ERR_CORRUPT, "got %s (%s)", sharc_err_name(rc), error);
    ck_assert_int_eq(log.count, 1);
    ck_assert_int_eq(log.kinds[0], SHARC_PROBLEM_ARCHIVE);
    ck_assert_str_eq(log.last_member, "README");
    ck_assert_str_eq(log.last_cut, c.cuts[7].id);
    ck_assert_msg(strstr(error, "README") != NULL, "%s", error);
    rc = read_with(c.path, SHARC_ON_ERROR_SKIP, &cuts, &log, error, sizeof error, 0, NULL);
    ck_assert_msg(rc == SHARC_END, "under skip: %s", error);
    ck_assert_uint_eq(cuts, c.n - 3); /* the sample being read and the two after it */
    free_corpus(&c);
}
END_TEST

/* The reason a failed open logs (there is no handle to ask). */
static char open_error[1024];
static void keep_error(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    if (level == SHARC_LOG_ERROR)
        snprintf(open_error, sizeof open_error, "%s", message);
}

/* A length tolerance that is not a number of seconds a recording can have is refused at
 * open (it is multiplied by the sampling rate into a sample count). */
START_TEST(length_tolerance_out_of_range)
{
    const char *paths[] = {"/nonexistent"};
    const double bad[] = {-1, 1e300, INFINITY, NAN};
    for (int i = 0; i < 4; i++) {
        sharc_reader_settings s;
        sharc_reader_default_settings(&s);
        s.paths = paths;
        s.n_paths = 1;
        s.logger.callback = keep_error;
        s.length_tolerance = bad[i];
        sharc_reader *r = NULL;
        open_error[0] = 0;
        ck_assert_int_eq(sharc_reader_open(&r, &s), SHARC_ERR(EINVAL));
        ck_assert_ptr_null(r);
        ck_assert_str_eq(open_error,
                         "invalid reader settings: length_tolerance must be in [0, 1e7] seconds");
    }
}
END_TEST

START_TEST(layout_errors_at_open)
{
    corpus c = make_corpus("shar", "flac", "none", 3, 2);
    size_t cuts;
    problem_log log;
    char error[1024];
    /* A stray file is ignored. */
    ck_assert_int_eq(tu_sh("echo hello > '%s/README.md'", c.path), 0);
    ck_assert_int_eq(read_with(c.path, SHARC_ON_ERROR_FAIL, &cuts, &log, error, 1024, 0, NULL),
                     SHARC_END);
    ck_assert_uint_eq(cuts, 6);
    /* An extra recording shard without cuts: unequal counts. */
    ck_assert_int_eq(
        tu_sh("cp '%s/recording.000002.tar' '%s/recording.000003.tar'", c.path, c.path), 0);
    ck_assert_int_eq(read_with(c.path, SHARC_ON_ERROR_FAIL, &cuts, &log, error, 1024, 0, NULL),
                     SHARC_ERR_FORMAT);
    ck_assert_int_eq(tu_sh("rm '%s/recording.000003.tar'", c.path), 0);
    /* An empty shard (no cuts, an empty tar) yields nothing and is not an error. */
    ck_assert_int_eq(tu_sh("cd '%s' && : > cuts.000003.jsonl && : > lang_id.000003.jsonl && "
                           "tar cf recording.000003.tar --files-from /dev/null",
                           c.path),
                     0);
    ck_assert_int_eq(read_with(c.path, SHARC_ON_ERROR_FAIL, &cuts, &log, error, 1024, 0, NULL),
                     SHARC_END);
    ck_assert_uint_eq(cuts, 6);
    /* Nothing there at all. */
    char missing[700];
    snprintf(missing, sizeof missing, "%s/nope", c.dir);
    ck_assert_int_eq(read_with(missing, SHARC_ON_ERROR_FAIL, &cuts, &log, error, 1024, 0, NULL),
                     SHARC_ERR(ENOENT));
    free_corpus(&c);
}
END_TEST

START_TEST(required_rate_and_length_mismatch)
{
    corpus c = make_corpus("shar", "flac", "none", 1, 3);
    sharc_reader_settings s;
    const char *paths[1];
    settings_on(&s, paths, c.path);
    s.sampling_rate = 8000;
    sharc_reader *r;
    const sharc_cut *cut;
    ck_assert_int_eq(sharc_reader_open(&r, &s), 0);
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), "8000 Hz is required"));
    ck_assert_ptr_nonnull(strstr(sharc_reader_last_error(r), c.cuts[0].id));
    /* The error sticks. */
    ck_assert_int_eq(sharc_reader_next(r, &cut), SHARC_ERR_AUDIO_MISMATCH);
    sharc_reader_close(&r);

    /* Metadata claiming 1 s more than the audio holds is beyond the 0.5 s tolerance. */
    char meta[600], json[1200];
    snprintf(meta, sizeof meta, "%.*s.json", (int)(strlen(c.cuts[0].member) - 5), c.cuts[0].member);
    snprintf(json, sizeof json,
             "'{\"id\": \"r\", \"sources\": [], \"sampling_rate\": 16000, \"num_samples\": "
             "%lld, \"duration\": 1.0, \"channel_ids\": [0]}'",
             (long long)c.cuts[0].num_samples + 16000);
    corrupt(&c, "tar-replace recording.000000.tar %s %s", meta, json);
    size_t cuts;
    problem_log log;
    char error[1024];
    ck_assert_int_eq(read_with(c.path, SHARC_ON_ERROR_FAIL, &cuts, &log, error, 1024, 0, NULL),
                     SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_int_eq(log.kinds[0], SHARC_PROBLEM_LENGTH);
    ck_assert_str_eq(log.last_cut, c.cuts[0].id);
    free_corpus(&c);
}
END_TEST

/*
 * Audio that decodes to less than its own header says, or to samples no batch may hold, is
 * an error of its cut naming shard, member and cut, never a shorter or padded cut. Each case
 * edits member 1 of a one-shard corpus with corrupt.py's audio-edit.
 */
typedef struct bad_audio_case {
    const char *layout;
    const char *codec;
    const char *edit;   /* audio-edit HOW */
    int drop_json;      /* WebDataset: no .json, so the cut's length comes from the header */
    int no_decode;      /* read with decode off: the header gives the length */
    int fail_code;      /* sharc_reader_next's error under FAIL */
    sharc_problem kind; /* the problem reported */
    /* The text after "member M (cut C): ", a format given the member's samples n, 2n, n - 500
     * and 2n - 1000, in this order (printf ignores those it does not use). */
    const char *message;
} bad_audio_case;

#define CUT_SHORT_1000                                                                             \
    "wav audio is cut short: its header says %lld samples (%lld bytes), the member holds %lld "    \
    "(%lld bytes)"

static const bad_audio_case bad_audio[] = {
    /* A member 1000 bytes (500 samples) shorter than its data chunk: within the length
     * tolerance of its metadata, and read whatever the path to its length. */
    {"wds", "wav", "wav-short:1000", 0, 0, SHARC_ERR_DECODE, SHARC_PROBLEM_DECODE, CUT_SHORT_1000},
    {"wds", "wav", "wav-short:1000", 1, 0, SHARC_ERR_DECODE, SHARC_PROBLEM_DECODE, CUT_SHORT_1000},
    {"wds", "wav", "wav-short:1000", 1, 1, SHARC_ERR_DECODE, SHARC_PROBLEM_DECODE, CUT_SHORT_1000},
    {"shar", "wav", "wav-short:1000", 0, 0, SHARC_ERR_DECODE, SHARC_PROBLEM_DECODE, CUT_SHORT_1000},
    /* A data chunk size of 0xFFFFFFFF, far more than the member holds. */
    {"shar", "wav", "wav-data-size:4294967295", 0, 0, SHARC_ERR_DECODE, SHARC_PROBLEM_DECODE,
     "wav audio is cut short: its header says 2147483647 samples (4294967295 bytes), the member "
     "holds %lld (%lld bytes)"},
    /* A data chunk of no samples, while the metadata give some. */
    {"shar", "wav", "wav-data-size:0", 0, 0, SHARC_ERR_AUDIO_MISMATCH, SHARC_PROBLEM_LENGTH,
     "wav audio: decoded 0 frames, expected %lld"},
    {"shar", "wav", "wav-float:5:nan", 0, 0, SHARC_ERR_DECODE, SHARC_PROBLEM_NON_FINITE,
     "wav audio holds a non-finite sample: NaN at sample 5 (channel 0)"},
    {"wds", "wav", "wav-float:7:-inf", 0, 0, SHARC_ERR_DECODE, SHARC_PROBLEM_NON_FINITE,
     "wav audio holds a non-finite sample: -Inf at sample 7 (channel 0)"},
    /* The last Ogg page fails its CRC: decoding would stop short of the stream's end. */
    {"shar", "opus", "ogg-last-page", 0, 0, SHARC_ERR_DECODE, SHARC_PROBLEM_DECODE,
     "ogg audio: no length in its last page: the end of the stream is missing or damaged"},
    {"wds", "opus", "ogg-last-page", 1, 1, SHARC_ERR_DECODE, SHARC_PROBLEM_DECODE,
     "ogg audio: no length in its last page: the end of the stream is missing or damaged"},
};

/* Read `path` (decode on or off) under a policy; as read_with() otherwise. */
static int read_bad_audio(const char *path, const bad_audio_case *b, sharc_error_policy policy,
                          size_t *cuts, problem_log *log, char *error, size_t error_cap,
                          sharc_reader_stats *stats)
{
    sharc_reader_settings s;
    const char *paths[1];
    settings_on(&s, paths, path);
    s.on_error = policy;
    s.on_problem = on_problem;
    s.problem_cookie = log;
    s.decode = !b->no_decode;
    memset(log, 0, sizeof *log);
    sharc_reader *r;
    int rc = sharc_reader_open(&r, &s);
    ck_assert_int_eq(rc, 0);
    const sharc_cut *cut;
    *cuts = 0;
    while ((rc = sharc_reader_next(r, &cut)) == 0)
        (*cuts)++;
    snprintf(error, error_cap, "%s", sharc_reader_last_error(r));
    sharc_reader_get_stats(r, stats);
    sharc_reader_close(&r);
    return rc;
}

START_TEST(bad_audio_is_an_error)
{
    const bad_audio_case *b = &bad_audio[_i];
    corpus c = make_corpus(b->layout, b->codec, "none", 1, 3);
    const expected_cut *e = &c.cuts[1];
    const char *tar = strcmp(b->layout, "wds") == 0 ? "shard-000000.tar" : "recording.000000.tar";
    corrupt(&c, "audio-edit %s '%s' %s", tar, e->member, b->edit);
    if (b->drop_json) {
        char stem[512];
        snprintf(stem, sizeof stem, "%s", e->member);
        *strrchr(stem, '.') = 0;
        corrupt(&c, "tar-drop %s '%s.json'", tar, stem);
    }
    const long long n = e->num_samples;
    char detail[512], want[4096], error[1024];
    snprintf(detail, sizeof detail, b->message, n, 2 * n, n - 500, 2 * n - 1000);
    snprintf(want, sizeof want, "%s/%s member %s (cut %s): %s", c.path, tar, e->member, e->id,
             detail);

    size_t cuts;
    problem_log log;
    sharc_reader_stats st;
    int rc = read_bad_audio(c.path, b, SHARC_ON_ERROR_FAIL, &cuts, &log, error, sizeof error, &st);
    ck_assert_msg(rc == b->fail_code, "case %d: got %s (%s), want %s", _i, sharc_err_name(rc),
                  error, sharc_err_name(b->fail_code));
    ck_assert_msg(strncmp(error, want, strlen(want)) == 0, "case %d:\n got '%s'\nwant '%s'", _i,
                  error, want);
    ck_assert_uint_eq(cuts, 1);
    ck_assert_int_eq(log.count, 1);
    ck_assert_int_eq(log.kinds[0], b->kind);
    ck_assert_str_eq(log.last_member, e->member);
    ck_assert_str_eq(log.last_cut, e->id);

    rc = read_bad_audio(c.path, b, SHARC_ON_ERROR_SKIP, &cuts, &log, error, sizeof error, &st);
    ck_assert_msg(rc == SHARC_END, "case %d under skip: %s", _i, error);
    ck_assert_uint_eq(cuts, 2);
    ck_assert_uint_eq(st.problems[b->kind], 1);
    ck_assert_uint_eq(st.skipped_cuts, 1);
    free_corpus(&c);
}
END_TEST

/*
 * A FLAC member whose STREAMINFO gives 0 samples (unknown, which the format allows), in a
 * WebDataset sample without metadata: its length is learned by decoding it, and it is read
 * whole, sample for sample.
 */
START_TEST(flac_of_unknown_length_is_counted)
{
    corpus c = make_corpus("wds", "flac", "none", 1, 3);
    for (size_t i = 0; i < c.n; i++) {
        char stem[512];
        snprintf(stem, sizeof stem, "%s", c.cuts[i].member);
        *strrchr(stem, '.') = 0;
        corrupt(&c, "audio-edit shard-000000.tar '%s' flac-no-length", c.cuts[i].member);
        corrupt(&c, "tar-drop shard-000000.tar '%s.json'", stem);
        c.cuts[i].text[0] = 0; /* the transcript is in the .txt member, which stays */
    }
    sharc_reader *r = open_reader(c.path, SHARC_ON_ERROR_FAIL, 1);
    const sharc_cut *cut;
    int rc;
    size_t n = 0;
    while ((rc = sharc_reader_next(r, &cut)) == 0) {
        expected_cut *e = find(&c, cut->id);
        ck_assert_ptr_nonnull(e);
        ck_assert_double_eq_tol(cut->duration, (double)e->num_samples / e->sampling_rate, 1e-9);
        snprintf(e->text, sizeof e->text, "%s", cut->text ? cut->text : "");
        check_cut(&c, cut, 1);
        n++;
    }
    ck_assert_msg(rc == SHARC_END, "%s", sharc_reader_last_error(r));
    ck_assert_uint_eq(n, c.n);
    sharc_reader_close(&r);
    free_corpus(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reader");
    TCase *tc = tcase_create("read");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, every_layout_and_compression_flac, 0, 9);
    tcase_add_loop_test(tc, every_layout_wav_opus_mp3, 0, 9);
    tcase_add_test(tc, epochs_shuffle_and_dp_split);
    tcase_add_test(tc, nemo_rows_sorted_by_path);
    tcase_add_test(tc, nemo_rows_match_members_by_whole_path);
    tcase_add_test(tc, nemo_rows_near_the_member_length_are_the_member);
    tcase_add_test(tc, wds_samples_as_webdataset_makes_them);
    tcase_add_loop_test(tc, lhotse_written_fixture, 0, 4);
    suite_add_tcase(s, tc);
    TCase *bad = tcase_create("damaged");
    tcase_set_timeout(bad, 120);
    tcase_add_test(bad, wds_tar_broken_inside_a_keyless_member);
    tcase_add_loop_test(bad, damaged_shards_are_reported, 0,
                        (int)(sizeof damage / sizeof damage[0]));
    tcase_add_test(bad, layout_errors_at_open);
    tcase_add_test(bad, length_tolerance_out_of_range);
    tcase_add_test(bad, required_rate_and_length_mismatch);
    tcase_add_loop_test(bad, bad_audio_is_an_error, 0,
                        (int)(sizeof bad_audio / sizeof bad_audio[0]));
    tcase_add_test(bad, flac_of_unknown_length_is_counted);
    suite_add_tcase(s, bad);
    return tu_run_suite(s);
}

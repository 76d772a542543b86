/*
 * Fuzz NeMo pairing: the input is split at the first 0xFF byte into a manifest (JSON lines)
 * and an audio tar, written to a temporary directory as manifest_0.json and audio_0.tar,
 * and read through the NeMo stream until it ends or fails: once copying each member into
 * the cut, once lending it (lend_audio), and once more lending it with the rows held in
 * memory, as an aggregate manifest gives them. Whatever the bytes, the stream must end or
 * report an error, never crash or read out of bounds, and every pass must give the same
 * cuts with the same audio.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/dataset.h"
#include "fuzz_files.h"
#include "formats/stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STEPS 20000
#define MAX_KEPT  4096

static uint64_t mix(uint64_t h, const void *d, size_t n)
{
    const uint8_t *p = d;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Everything a cut says, as one number, to compare passes. */
static uint64_t cut_digest(const sharc__rawcut *c)
{
    size_t n = 0;
    const uint8_t *a = sharc__rawcut_audio(c, &n);
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, c->id.data, c->id.len);
    h = mix(h, "\0", 1);
    h = mix(h, c->member.data, c->member.len);
    h = mix(h, "\0", 1);
    h = mix(h, c->text.data, c->text.len);
    h = mix(h, &n, sizeof n);
    h = mix(h, a, n);
    h = mix(h, &c->offset, sizeof c->offset);
    h = mix(h, &c->duration, sizeof c->duration);
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One pass over the stream; the digests of its first MAX_KEPT cuts go to `kept`.
 * @return the number of cuts */
static size_t run_pass(const sharc__shard *shard, int lend, uint64_t *kept)
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    sharc__stream_opts opts = {1 << 20, 1 << 16, "text", "lang", NULL, 0, lend};
    sharc__stream_error err;
    memset(&err, 0, sizeof err);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    sharc__stream *st = NULL;
    size_t n_cuts = 0;
    uint64_t last_position = 0;
    if (sharc__nemo_ops.open(&st, &ctx, shard, &opts, &err) == 0) {
        for (int i = 0; i < MAX_STEPS; i++) {
            sharc__stream_error_reset(&err);
            int rc = sharc__nemo_ops.next(st, &c, &err);
            if (rc == SHARC_END)
                break;
            if (rc < 0) {
                /* Every failure says what kind of problem it is. */
                if (err.kind == SHARC_PROBLEM_COUNT)
                    __builtin_trap();
                if (err.shard_fatal)
                    break;
                continue;
            }
            if (rc != 0)
                __builtin_trap();
            /* A cut comes from this shard's tar, is named by its row, and has a member. */
            if (!c.shard || strcmp(c.shard, shard->audio_path) != 0)
                __builtin_trap();
            if (c.id.len == 0 || strlen(sharc__buf_str(&c.id)) != c.id.len)
                __builtin_trap();
            /* Positions count the rows handed out, a row that failed too (a resume skips
             * the same ones): they only grow. */
            if (c.position < n_cuts || (n_cuts > 0 && c.position <= last_position))
                __builtin_trap();
            last_position = c.position;
            /* Offsets are never negative; a duration is a window, or -1 for the whole member. */
            if (c.offset < 0 || (c.window ? c.duration < 0 : c.duration != -1))
                __builtin_trap();
            /* Audio is lent in cut mode, copied otherwise, never both. */
            if (c.audio_in_file || (lend && c.audio.len != 0) ||
                (!lend && (c.audio_lent || c.audio.len != c.audio_size)))
                __builtin_trap();
            size_t n = 0;
            const uint8_t *a = sharc__rawcut_audio(&c, &n);
            if (n && !a)
                __builtin_trap();
            if (n_cuts < MAX_KEPT)
                kept[n_cuts] = cut_digest(&c);
            n_cuts++;
        }
        sharc__nemo_ops.close(&st);
        if (st)
            __builtin_trap();
    }
    sharc__rawcut_free(&ctx, &c);
    sharc__buf_free(&ctx, &err.member);
    sharc__buf_free(&ctx, &err.cut_id);
    return n_cuts;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t copied[MAX_KEPT], lent[MAX_KEPT];
    char manifest[128], tar[128];
    size_t n_manifest;
    if (fuzz_split_files(data, size, "manifest_0.json", "audio_0.tar", manifest, tar,
                         &n_manifest) != 0)
        return 0;
    sharc__shard shard;
    memset(&shard, 0, sizeof shard);
    shard.meta_path = manifest;
    shard.audio_path = tar;
    shard.nemo_shard_id = 0;
    /* Lending the audio changes nothing a cut says, nor its order. */
    size_t n = run_pass(&shard, 0, copied);
    if (run_pass(&shard, 1, lent) != n)
        __builtin_trap();
    size_t kept = n < MAX_KEPT ? n : MAX_KEPT;
    if (memcmp(copied, lent, kept * sizeof *lent) != 0)
        __builtin_trap();
    /* The rows of an aggregate manifest, held in memory, pair the same way. A manifest file
     * is read through libarchive's filters by lines, which drop a '\r', a byte order mark and
     * blank lines and stop at a NUL: only a plain manifest (starting with '{') is compared,
     * and as a set, since rows of one member and id may sort either way. */
    int plain = n_manifest > 0 && n_manifest < (1 << 16) && data[0] == '{';
    for (size_t i = 0; i < n_manifest && plain; i++)
        plain = data[i] != 0 && data[i] != '\r';
    uint8_t *rows = plain ? malloc(n_manifest + 1) : NULL;
    if (rows) {
        memcpy(rows, data, n_manifest);
        rows[n_manifest] = 0;
        shard.nemo_rows.data = rows;
        shard.nemo_rows.len = n_manifest;
        shard.nemo_rows.cap = n_manifest;
        shard.nemo_in_memory = 1;
        if (run_pass(&shard, 1, lent) != n)
            __builtin_trap();
        free(rows);
        qsort(copied, kept, sizeof *copied, cmp_u64);
        qsort(lent, kept, sizeof *lent, cmp_u64);
        if (n <= MAX_KEPT && memcmp(copied, lent, kept * sizeof *lent) != 0)
            __builtin_trap();
    }
    return 0;
}

/* sharc-gen: writes a deterministic synthetic ASR corpus as Lhotse Shar, NeMo tarred audio and
 * WebDataset-style shards, plus an expected.jsonl per layout that lists every cut a reader must
 * yield. The same flags always give byte-identical files. See testdata/README.md.
 *
 * This is a standalone test tool, not part of libsharc: it writes with libarchive, libsndfile,
 * zlib and libzstd so that the shards come from other code than the reader under test.
 */
#include "synth.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sndfile.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

enum codec { CODEC_FLAC, CODEC_WAV, CODEC_OPUS, CODEC_MP3 };
enum compress { COMP_NONE, COMP_GZIP, COMP_ZSTD };
enum layout { LAYOUT_SHAR = 1, LAYOUT_NEMO = 2, LAYOUT_WDS = 4 };
enum sidecar { IDX_NONE, IDX_TAR, IDX_JSONL };

typedef struct gen_opts {
    const char *out;
    unsigned layouts;
    enum codec codec;
    enum compress comp;
    int shards, cuts_per_shard;
    uint64_t seed;
    double min_dur, max_dur;
    int rate, channels;
    bool index; /* Lhotse 2.0 .idx sidecars */
} gen_opts;

static const char *const codec_ext[] = {"flac", "wav", "opus", "mp3"};
static const char *const comp_sfx[] = {"", ".gz", ".zst"};

/* ---- growable byte buffer; pos is the libsndfile virtual I/O position ---- */

typedef struct membuf {
    unsigned char *data;
    size_t len, cap, pos;
} membuf;

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("sharc-gen: out of memory\n", stderr);
        exit(1);
    }
    return q;
}

static void mb_reserve(membuf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

static void mb_put(membuf *b, const void *p, size_t n)
{
    mb_reserve(b, n + 1);
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

static void mb_puts(membuf *b, const char *s)
{
    mb_put(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void mb_printf(membuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    mb_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void mb_free(membuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* A formatted string in a new heap block (a path of any length); the caller frees it. */
__attribute__((format(printf, 1, 2))) static char *strfmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = xrealloc(NULL, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- JSON the way Python's json.dumps writes it ---- */

/* Decodes one UTF-8 sequence (the generator only writes valid UTF-8). */
static uint32_t utf8_next(const unsigned char **s)
{
    const unsigned char *p = *s;
    uint32_t c = p[0];
    int n = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    if (n > 0)
        c &= 0x3Fu >> n;
    for (int i = 1; i <= n && p[i]; i++)
        c = (c << 6) | (p[i] & 0x3Fu);
    *s = p + 1 + n;
    return c;
}

/* A JSON string; ascii=true escapes every non-ASCII character as \uXXXX (json.dumps default),
 * ascii=false keeps raw UTF-8 (ensure_ascii=False, as in Lhotse's cuts files). */
static void json_str(membuf *b, const char *s, bool ascii)
{
    const unsigned char *p = (const unsigned char *)s;
    mb_put(b, "\"", 1);
    while (*p) {
        const unsigned char *start = p;
        uint32_t c = utf8_next(&p);
        if (c == '"' || c == '\\')
            mb_printf(b, "\\%c", (char)c);
        else if (c == '\n')
            mb_puts(b, "\\n");
        else if (c == '\t')
            mb_puts(b, "\\t");
        else if (c == '\r')
            mb_puts(b, "\\r");
        else if (c < 0x20 || (ascii && c == 0x7F))
            mb_printf(b, "\\u%04x", (unsigned)c);
        else if (!ascii || c < 0x80)
            mb_put(b, start, (size_t)(p - start));
        else if (c < 0x10000)
            mb_printf(b, "\\u%04x", (unsigned)c);
        else
            mb_printf(b, "\\u%04x\\u%04x", 0xD800u + ((c - 0x10000u) >> 10),
                      0xDC00u + ((c - 0x10000u) & 0x3FFu));
    }
    mb_put(b, "\"", 1);
}

/* A float as Python's repr(): the shortest digits that read back to the same double, fixed
 * notation for exponents -4..15 with at least one decimal, else C's %e style. */
static void json_float(membuf *b, double v)
{
    char e[40], f[400];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    snprintf(e, sizeof e, "%.*e", prec - 1, v);
    int exp10 = atoi(strchr(e, 'e') + 1);
    if (exp10 < -4 || exp10 >= 16) {
        char *m = strchr(e, 'e');
        char *dot = strchr(e, '.');
        if (dot && dot < m) { /* strip trailing zeros of the mantissa, as repr does */
            char *z = m;
            while (z[-1] == '0')
                z--;
            if (z[-1] == '.')
                z--;
            memmove(z, m, strlen(m) + 1);
        }
        mb_puts(b, e);
        return;
    }
    int decimals = prec - 1 - exp10;
    snprintf(f, sizeof f, "%.*f", decimals > 0 ? decimals : 0, v);
    mb_puts(b, f);
    if (!strchr(f, '.'))
        mb_puts(b, ".0");
}

static void json_channels(membuf *b, int channels)
{
    mb_puts(b, "[");
    for (int c = 0; c < channels; c++)
        mb_printf(b, c ? ", %d" : "%d", c);
    mb_puts(b, "]");
}

/* ---- one synthetic cut ---- */

typedef struct cut_info {
    uint64_t index, seed;
    int64_t frames; /* of the whole recording */
    int rate, channels;
    double duration;
    char text[512];
    char speaker[6];
    const char *lang;
} cut_info;

static int codec_rate(const gen_opts *o)
{
    /* libsndfile does not resample, and Lhotse's Opus audio is 48 kHz: synthesise at 48 kHz. */
    return o->codec == CODEC_OPUS ? 48000 : o->rate;
}

static void cut_make(const gen_opts *o, uint64_t index, cut_info *c)
{
    memset(c, 0, sizeof *c);
    c->index = index;
    c->seed = synth_cut_seed(o->seed, index);
    c->rate = codec_rate(o);
    c->channels = o->channels;
    c->frames = synth_num_samples(c->seed, o->min_dur, o->max_dur, c->rate);
    c->duration = (double)c->frames / c->rate;
    synth_text(c->seed, 0, c->text, sizeof c->text);
    synth_speaker(c->seed, c->speaker);
    c->lang = synth_language(c->seed);
}

/* Sum and sum of squares of the float samples (sample / 32768) of frames [off, off+n). */
static void cut_sums(const cut_info *c, int64_t off, int64_t n, double *sum, double *sumsq)
{
    synth_voice v;
    synth_voice_init(&v, c->seed);
    double s = 0, q = 0;
    for (int64_t i = off; i < off + n; i++)
        for (int ch = 0; ch < c->channels; ch++) {
            double x = synth_voice_sample(&v, i, ch) / 32768.0;
            s += x;
            q += x * x;
        }
    *sum = s;
    *sumsq = q;
}

/* ---- audio encoding with libsndfile into memory ---- */

static sf_count_t vio_len(void *u)
{
    return (sf_count_t)((membuf *)u)->len;
}

static sf_count_t vio_seek(sf_count_t off, int whence, void *u)
{
    membuf *b = u;
    sf_count_t base = whence == SEEK_SET   ? 0
                      : whence == SEEK_CUR ? (sf_count_t)b->pos
                                           : (sf_count_t)b->len;
    if (base + off < 0)
        return -1;
    b->pos = (size_t)(base + off);
    return (sf_count_t)b->pos;
}

static sf_count_t vio_read(void *p, sf_count_t n, void *u)
{
    membuf *b = u;
    size_t avail = b->pos < b->len ? b->len - b->pos : 0;
    size_t k = (size_t)n < avail ? (size_t)n : avail;
    memcpy(p, b->data + b->pos, k);
    b->pos += k;
    return (sf_count_t)k;
}

static sf_count_t vio_write(const void *p, sf_count_t n, void *u)
{
    membuf *b = u;
    size_t end = b->pos + (size_t)n;
    if (end > b->len) {
        mb_reserve(b, end - b->len + 1);
        if (b->pos > b->len)
            memset(b->data + b->len, 0, b->pos - b->len);
        b->len = end;
    }
    memcpy(b->data + b->pos, p, (size_t)n);
    b->pos = end;
    return n;
}

static sf_count_t vio_tell(void *u)
{
    return (sf_count_t)((membuf *)u)->pos;
}

static int sf_format_of(enum codec codec)
{
    switch (codec) {
    case CODEC_FLAC:
        return SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    case CODEC_WAV:
        return SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    case CODEC_OPUS:
        return SF_FORMAT_OGG | SF_FORMAT_OPUS;
    default:
        return SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
    }
}

/* Ogg's page CRC: polynomial 0x04C11DB7, not reflected, initial value 0. */
static uint32_t ogg_crc(const unsigned char *p, size_t n)
{
    uint32_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint32_t)p[i] << 24;
        for (int k = 0; k < 8; k++)
            crc = crc & 0x80000000u ? (crc << 1) ^ 0x04C11DB7u : crc << 1;
    }
    return crc;
}

/* libsndfile gives each Ogg stream a random serial number; set a fixed one (and fix each page's
 * CRC) so that the output is deterministic. */
static int ogg_set_serial(membuf *b, uint32_t serial)
{
    size_t pos = 0;
    while (pos < b->len) {
        unsigned char *pg = b->data + pos;
        if (b->len - pos < 27 || memcmp(pg, "OggS", 4) != 0 || b->len - pos < 27u + pg[26])
            return -1;
        size_t hdr = 27u + pg[26], body = 0;
        for (unsigned i = 0; i < pg[26]; i++)
            body += pg[27 + i];
        if (b->len - pos < hdr + body)
            return -1;
        for (int i = 0; i < 4; i++) {
            pg[14 + i] = (unsigned char)(serial >> (8 * i));
            pg[22 + i] = 0;
        }
        uint32_t crc = ogg_crc(pg, hdr + body);
        for (int i = 0; i < 4; i++)
            pg[22 + i] = (unsigned char)(crc >> (8 * i));
        pos += hdr + body;
    }
    return 0;
}

static int encode_audio(const gen_opts *o, const cut_info *c, membuf *out)
{
    SF_VIRTUAL_IO vio = {vio_len, vio_seek, vio_read, vio_write, vio_tell};
    SF_INFO info = {
        .samplerate = c->rate, .channels = c->channels, .format = sf_format_of(o->codec)};
    int16_t *pcm = xrealloc(NULL, (size_t)c->frames * (size_t)c->channels * sizeof *pcm);
    synth_voice v;
    synth_voice_init(&v, c->seed);
    for (int64_t i = 0; i < c->frames; i++)
        for (int ch = 0; ch < c->channels; ch++)
            pcm[i * c->channels + ch] = synth_voice_sample(&v, i, ch);
    out->len = out->pos = 0;
    SNDFILE *sf = sf_open_virtual(&vio, SFM_WRITE, &info, out);
    int rc = -1;
    if (!sf) {
        fprintf(stderr, "sharc-gen: libsndfile cannot write %s: %s\n", codec_ext[o->codec],
                sf_strerror(NULL));
        goto done;
    }
    if (sf_writef_short(sf, pcm, c->frames) != c->frames) {
        fprintf(stderr, "sharc-gen: encoding cut %" PRIu64 " failed: %s\n", c->index,
                sf_strerror(sf));
        sf_close(sf);
        goto done;
    }
    if (sf_close(sf) != 0) {
        fprintf(stderr, "sharc-gen: finishing cut %" PRIu64 " failed\n", c->index);
        goto done;
    }
    rc = 0;
    if (o->codec == CODEC_OPUS && ogg_set_serial(out, (uint32_t)c->seed) != 0) {
        fprintf(stderr, "sharc-gen: libsndfile wrote an Ogg stream sharc-gen cannot parse\n");
        rc = -1;
    }
done:
    free(pcm);
    return rc;
}

/* ---- tar (pax, like Python's tarfile) built in memory with libarchive ---- */

typedef struct tar_out {
    struct archive *a;
    membuf buf;
} tar_out;

static la_ssize_t tar_write_cb(struct archive *a, void *u, const void *p, size_t n)
{
    mb_put(u, p, n);
    return (la_ssize_t)n;
}

static int tar_open(tar_out *t)
{
    memset(t, 0, sizeof *t);
    t->a = archive_write_new();
    if (!t->a || archive_write_set_format_pax_restricted(t->a) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(t->a, 10240) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(t->a, 10240) != ARCHIVE_OK ||
        archive_write_open(t->a, &t->buf, NULL, tar_write_cb, NULL) != ARCHIVE_OK) {
        fprintf(stderr, "sharc-gen: libarchive: %s\n",
                t->a ? archive_error_string(t->a) : "out of memory");
        return -1;
    }
    return 0;
}

static int tar_add(tar_out *t, const char *name, const void *data, size_t n)
{
    struct archive_entry *e = archive_entry_new();
    int rc = -1;
    if (!e)
        goto done;
    archive_entry_set_pathname_utf8(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)n);
    archive_entry_set_mtime(e, 0, 0);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    if (archive_write_header(t->a, e) != ARCHIVE_OK ||
        (n && archive_write_data(t->a, data, n) != (la_ssize_t)n))
        goto done;
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "sharc-gen: libarchive: member %s: %s\n", name,
                e ? archive_error_string(t->a) : "out of memory");
    archive_entry_free(e);
    return rc;
}

static int tar_finish(tar_out *t)
{
    int rc = archive_write_close(t->a) == ARCHIVE_OK ? 0 : -1;
    if (rc)
        fprintf(stderr, "sharc-gen: libarchive: %s\n", archive_error_string(t->a));
    archive_write_free(t->a);
    t->a = NULL;
    return rc;
}

static void tar_discard(tar_out *t)
{
    if (t->a)
        archive_write_free(t->a);
    mb_free(&t->buf);
    t->a = NULL;
}

/* ---- output files ---- */

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "sharc-gen: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int gzip_buf(const membuf *in, membuf *out)
{
    z_stream z = {0};
    /* windowBits 15+16: gzip wrapper with mtime 0, no file name, so the bytes are reproducible. */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    mb_reserve(out, deflateBound(&z, in->len));
    z.next_in = in->data;
    z.avail_in = (uInt)in->len;
    z.next_out = out->data + out->len;
    z.avail_out = (uInt)(out->cap - out->len);
    int rc = deflate(&z, Z_FINISH);
    out->len += (size_t)(z.next_out - (out->data + out->len));
    deflateEnd(&z);
    return rc == Z_STREAM_END ? 0 : -1;
}

static int zstd_buf(const membuf *in, membuf *out)
{
    mb_reserve(out, ZSTD_compressBound(in->len));
    size_t n = ZSTD_compress(out->data + out->len, out->cap - out->len, in->data, in->len, 3);
    if (ZSTD_isError(n))
        return -1;
    out->len += n;
    return 0;
}

/* Offsets of the first header of each member (a pax 'x' header belongs to the member after it)
 * and the end of the last member's data, by walking the tar we wrote. */
static size_t tar_member_starts(const membuf *tar, uint64_t *starts, size_t max, uint64_t *end)
{
    size_t pos = 0, n = 0;
    *end = 0;
    while (pos + 512 <= tar->len && tar->data[pos] != 0) {
        size_t start = pos;
        char type;
        do {
            const unsigned char *h = tar->data + pos;
            type = (char)h[156];
            size_t size = (size_t)strtoull((const char *)h + 124, NULL, 8);
            pos += 512 + (size + 511) / 512 * 512;
        } while ((type == 'x' || type == 'g') && pos + 512 <= tar->len);
        if (n < max)
            starts[n] = start;
        n++;
        *end = pos;
    }
    return n;
}

/* Lhotse's .idx sidecar of an uncompressed tar: the offset of each (data, json) pair, then the
 * position its streaming scan ends at (the end-of-archive block read, rounded up to tarfile's
 * 10240-byte records). */
static int write_tar_idx(const char *path, const membuf *tar)
{
    uint64_t end;
    size_t n = tar_member_starts(tar, NULL, 0, &end);
    uint64_t *starts = xrealloc(NULL, (n + 1) * sizeof *starts);
    tar_member_starts(tar, starts, n, &end);
    membuf idx = {0};
    for (size_t i = 0; i < n; i += 2)
        mb_put(&idx, &starts[i], 8);
    uint64_t sentinel = (end + 512 + 10239) / 10240 * 10240;
    if (sentinel > tar->len)
        sentinel = tar->len;
    mb_put(&idx, &sentinel, 8);
    char *p = strfmt("%s.idx", path);
    int rc = write_file(p, idx.data, idx.len);
    free(p);
    mb_free(&idx);
    free(starts);
    return rc;
}

/* Lhotse's .idx sidecar of an uncompressed JSONL file: each line's offset, then the file size. */
static int write_jsonl_idx(const char *path, const membuf *jl)
{
    membuf idx = {0};
    uint64_t off = 0;
    for (size_t i = 0; i < jl->len; i++)
        if (i == 0 || jl->data[i - 1] == '\n') {
            off = i;
            mb_put(&idx, &off, 8);
        }
    off = jl->len;
    mb_put(&idx, &off, 8);
    char *p = strfmt("%s.idx", path);
    int rc = write_file(p, idx.data, idx.len);
    free(p);
    mb_free(&idx);
    return rc;
}

/* Writes `raw` to dir/name, compressed as asked (the suffix is already in `name`), with a Lhotse
 * index sidecar when uncompressed and asked for. */
static int write_shard_file(const gen_opts *o, const char *dir, const char *name, const membuf *raw,
                            enum compress comp, enum sidecar idx)
{
    char *path = strfmt("%s/%s", dir, name);
    membuf z = {0};
    if (!o->index)
        idx = IDX_NONE;
    int rc;
    if (comp == COMP_NONE) {
        rc = write_file(path, raw->data, raw->len);
        if (rc == 0 && idx == IDX_TAR)
            rc = write_tar_idx(path, raw);
        else if (rc == 0 && idx == IDX_JSONL)
            rc = write_jsonl_idx(path, raw);
    } else {
        rc = comp == COMP_GZIP ? gzip_buf(raw, &z) : zstd_buf(raw, &z);
        if (rc != 0)
            fprintf(stderr, "sharc-gen: compressing %s failed\n", path);
        else
            rc = write_file(path, z.data, z.len);
    }
    mb_free(&z);
    free(path);
    return rc;
}

/* ---- expected.jsonl ---- */

typedef struct expect_row {
    const char *id, *layout, *shard, *member;
    int shard_index, position;
    const cut_info *cut;
    int64_t offset_frames, frames;
    const char *text, *speaker, *lang_id; /* speaker, lang_id: NULL writes null */
} expect_row;

static void expected_line(membuf *b, const expect_row *r)
{
    double sum, sumsq;
    cut_sums(r->cut, r->offset_frames, r->frames, &sum, &sumsq);
    mb_puts(b, "{\"id\": ");
    json_str(b, r->id, false);
    mb_printf(b,
              ", \"layout\": \"%s\", \"shard_index\": %d, \"position\": %d, \"shard\": ", r->layout,
              r->shard_index, r->position);
    json_str(b, r->shard, false);
    mb_puts(b, ", \"member\": ");
    json_str(b, r->member, false);
    mb_puts(b, ", \"duration\": ");
    json_float(b, (double)r->frames / r->cut->rate);
    mb_printf(b, ", \"num_samples\": %" PRId64 ", \"sampling_rate\": %d, \"channels\": %d",
              r->frames, r->cut->rate, r->cut->channels);
    mb_puts(b, ", \"text\": ");
    json_str(b, r->text, false);
    mb_puts(b, ", \"speaker\": ");
    if (r->speaker)
        json_str(b, r->speaker, false);
    else
        mb_puts(b, "null");
    mb_printf(b, ", \"language\": \"%s\", \"lang_id\": ", r->cut->lang);
    if (r->lang_id)
        json_str(b, r->lang_id, false);
    else
        mb_puts(b, "null");
    mb_printf(b,
              ", \"cut_index\": %" PRIu64 ", \"cut_seed\": %" PRIu64 ", \"offset_frames\": %" PRId64
              ", \"sample_sum\": ",
              r->cut->index, r->cut->seed, r->offset_frames);
    json_float(b, sum);
    mb_puts(b, ", \"sample_sumsq\": ");
    json_float(b, sumsq);
    mb_puts(b, "}\n");
}

/* ---- Lhotse Shar ---- */

/* The recording manifest: the tar companion .json, and the placeholder inside the cut line. */
static void shar_recording(membuf *b, const char *id, const cut_info *c, bool ascii)
{
    mb_puts(b, "{\"id\": ");
    json_str(b, id, ascii);
    mb_puts(b, ", \"sources\": [{\"type\": \"shar\", \"channels\": ");
    json_channels(b, c->channels);
    mb_printf(b, ", \"source\": \"\"}], \"sampling_rate\": %d, \"num_samples\": %" PRId64, c->rate,
              c->frames);
    mb_puts(b, ", \"duration\": ");
    json_float(b, c->duration);
    mb_puts(b, ", \"channel_ids\": ");
    json_channels(b, c->channels);
    mb_puts(b, "}");
}

static void shar_cut_line(membuf *b, const char *id, const cut_info *c, const char *lang_id)
{
    membuf ch = {0};
    if (c->channels == 1)
        mb_puts(&ch, "0");
    else
        json_channels(&ch, c->channels);
    mb_puts(b, "{\"id\": ");
    json_str(b, id, false);
    mb_puts(b, ", \"start\": 0, \"duration\": ");
    json_float(b, c->duration);
    mb_printf(b, ", \"channel\": %s, \"supervisions\": [{\"id\": ", (char *)ch.data);
    json_str(b, id, false);
    mb_puts(b, ", \"recording_id\": ");
    json_str(b, id, false);
    mb_puts(b, ", \"start\": 0.0, \"duration\": ");
    json_float(b, c->duration);
    mb_printf(b, ", \"channel\": %s, \"text\": ", (char *)ch.data);
    json_str(b, c->text, false);
    mb_printf(b, ", \"language\": \"%s\", \"speaker\": \"%s\"}], \"recording\": ", c->lang,
              c->speaker);
    shar_recording(b, id, c, false);
    if (lang_id)
        mb_printf(b, ", \"custom\": {\"lang_id\": \"%s\"}", lang_id);
    mb_printf(b, ", \"type\": \"%s\"}\n", c->channels == 1 ? "MonoCut" : "MultiCut");
    mb_free(&ch);
}

static void shar_lang_line(membuf *b, const char *id, const char *lang_id)
{
    mb_puts(b, "{\"cut_id\": ");
    json_str(b, id, false);
    if (lang_id)
        mb_printf(b, ", \"lang_id\": \"%s\"", lang_id);
    mb_puts(b, "}\n");
}

static int shar_shard(const gen_opts *o, const char *dir, int s, membuf *expected)
{
    const char *js = comp_sfx[o->comp];
    char tar_name[64], cuts_name[64], lang_name[64], member[600], id[512];
    snprintf(tar_name, sizeof tar_name, "recording.%06d.tar%s", s, js);
    snprintf(cuts_name, sizeof cuts_name, "cuts.%06d.jsonl%s", s, js);
    snprintf(lang_name, sizeof lang_name, "lang_id.%06d.jsonl%s", s, js);
    membuf cuts = {0}, lang = {0}, audio = {0}, meta = {0};
    tar_out t;
    int rc = tar_open(&t);
    for (int pos = 0; rc == 0 && pos < o->cuts_per_shard; pos++) {
        cut_info c;
        cut_make(o, (uint64_t)s * (uint64_t)o->cuts_per_shard + (uint64_t)pos, &c);
        synth_shar_id(c.seed, c.index, id, sizeof id);
        const char *lang_id = c.index % 3 == 2 ? NULL : c.lang; /* placeholder every 3rd cut */
        snprintf(member, sizeof member, "%s.%s", id, codec_ext[o->codec]);
        meta.len = 0;
        shar_recording(&meta, id, &c, true);
        mb_puts(&meta, "\n");
        rc = encode_audio(o, &c, &audio);
        if (rc == 0)
            rc = tar_add(&t, member, audio.data, audio.len);
        snprintf(member, sizeof member, "%s.json", id);
        if (rc == 0)
            rc = tar_add(&t, member, meta.data, meta.len);
        shar_cut_line(&cuts, id, &c, lang_id);
        shar_lang_line(&lang, id, lang_id);
        snprintf(member, sizeof member, "%s.%s", id, codec_ext[o->codec]);
        expect_row r = {id, "shar", tar_name, member, s,         pos,
                        &c, 0,      c.frames, c.text, c.speaker, lang_id};
        expected_line(expected, &r);
    }
    if (rc == 0)
        rc = tar_finish(&t);
    if (rc == 0)
        rc = write_shard_file(o, dir, tar_name, &t.buf, o->comp, IDX_TAR);
    if (rc == 0)
        rc = write_shard_file(o, dir, cuts_name, &cuts, o->comp, IDX_JSONL);
    if (rc == 0)
        rc = write_shard_file(o, dir, lang_name, &lang, o->comp, IDX_JSONL);
    tar_discard(&t);
    mb_free(&cuts);
    mb_free(&lang);
    mb_free(&audio);
    mb_free(&meta);
    return rc;
}

/* ---- NeMo tarred audio ---- */

/* convert_to_tarred_audio_dataset.py's member name: '/' and '.' of the path without its
 * extension become '_'. */
static void nemo_squash(const char *path, char *out, size_t cap)
{
    const char *ext = strrchr(path, '.');
    size_t n = (size_t)(ext - path);
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = path[i] == '/' || path[i] == '.' ? '_' : path[i];
    snprintf(out + n, cap - n, "%s", ext);
}

static void nemo_row(membuf *b, const char *name, int64_t offset_frames, int64_t frames,
                     const cut_info *c, const char *text, bool skipme, int shard)
{
    mb_puts(b, "{\"audio_filepath\": ");
    json_str(b, name, true);
    if (offset_frames > 0) {
        mb_puts(b, ", \"offset\": ");
        json_float(b, (double)offset_frames / c->rate);
    }
    mb_puts(b, ", \"duration\": ");
    json_float(b, (double)frames / c->rate);
    mb_puts(b, ", \"text\": ");
    json_str(b, text, true);
    mb_printf(b, ", \"lang\": \"%s\"%s, \"shard_id\": %d}\n", c->lang,
              skipme ? ", \"_skipme\": true" : "", shard);
}

static int nemo_shard(const gen_opts *o, const char *dir, int s, membuf *all, membuf *expected)
{
    int n = o->cuts_per_shard;
    /* The corners: one member referenced by two rows (the second a "-sub1" sub-range), and one
     * member whose only row is _skipme, so that a reader must drop the member silently. */
    int sub_pos = n >= 2 ? 1 : -1;
    int skip_pos = n >= 3 ? (n / 2 > 2 ? n / 2 : 2) : -1;
    char tar_name[64], man_name[64], src[600], member[600], sub[640], text[512];
    snprintf(tar_name, sizeof tar_name, "audio_%d.tar%s", s, comp_sfx[o->comp]);
    snprintf(man_name, sizeof man_name, "sharded_manifests/manifest_%d.json", s);
    membuf man = {0}, audio = {0};
    tar_out t;
    int rc = tar_open(&t), row = 0;
    for (int pos = 0; rc == 0 && pos < n; pos++) {
        cut_info c;
        cut_make(o, (uint64_t)s * (uint64_t)n + (uint64_t)pos, &c);
        synth_nemo_source(c.seed, c.index, codec_ext[o->codec], src, sizeof src);
        nemo_squash(src, member, sizeof member);
        rc = encode_audio(o, &c, &audio);
        if (rc == 0)
            rc = tar_add(&t, member, audio.data, audio.len);
        nemo_row(&man, member, 0, c.frames, &c, c.text, pos == skip_pos, s);
        if (pos != skip_pos) {
            expect_row r = {member, "nemo", tar_name, member, s,    row,
                            &c,     0,      c.frames, c.text, NULL, NULL};
            expected_line(expected, &r);
        }
        row++;
        if (pos != sub_pos)
            continue;
        int64_t off = c.frames / 4, len = c.frames / 2 > 0 ? c.frames / 2 : 1;
        const char *ext = strrchr(member, '.');
        snprintf(sub, sizeof sub, "%.*s-sub1%s", (int)(ext - member), member, ext);
        synth_text(c.seed, 1, text, sizeof text);
        nemo_row(&man, sub, off, len, &c, text, false, s);
        expect_row r = {sub, "nemo", tar_name, member, s, row, &c, off, len, text, NULL, NULL};
        expected_line(expected, &r);
        row++;
    }
    if (rc == 0)
        rc = tar_finish(&t);
    if (rc == 0)
        rc = write_shard_file(o, dir, tar_name, &t.buf, o->comp, IDX_NONE);
    if (rc == 0)
        rc = write_shard_file(o, dir, man_name, &man, COMP_NONE, IDX_NONE);
    if (rc == 0)
        mb_put(all, man.data, man.len);
    tar_discard(&t);
    mb_free(&man);
    mb_free(&audio);
    return rc;
}

/* ---- WebDataset ---- */

static int wds_shard(const gen_opts *o, const char *dir, int s, membuf *expected)
{
    char tar_name[64], key[512], member[600];
    snprintf(tar_name, sizeof tar_name, "shard-%06d.tar%s", s, comp_sfx[o->comp]);
    membuf audio = {0}, meta = {0};
    tar_out t;
    int rc = tar_open(&t);
    for (int pos = 0; rc == 0 && pos < o->cuts_per_shard; pos++) {
        cut_info c;
        cut_make(o, (uint64_t)s * (uint64_t)o->cuts_per_shard + (uint64_t)pos, &c);
        synth_wds_key(c.seed, c.index, key, sizeof key);
        meta.len = 0;
        mb_puts(&meta, "{\"duration\": ");
        json_float(&meta, c.duration);
        mb_puts(&meta, ", \"text\": ");
        json_str(&meta, c.text, false);
        mb_printf(&meta,
                  ", \"speaker\": \"%s\", \"language\": \"%s\", \"sampling_rate\": %d, "
                  "\"num_samples\": %" PRId64 "}",
                  c.speaker, c.lang, c.rate, c.frames);
        rc = encode_audio(o, &c, &audio);
        snprintf(member, sizeof member, "%s.%s", key, codec_ext[o->codec]);
        if (rc == 0)
            rc = tar_add(&t, member, audio.data, audio.len);
        snprintf(member, sizeof member, "%s.json", key);
        if (rc == 0)
            rc = tar_add(&t, member, meta.data, meta.len);
        snprintf(member, sizeof member, "%s.txt", key);
        if (rc == 0)
            rc = tar_add(&t, member, c.text, strlen(c.text));
        snprintf(member, sizeof member, "%s.%s", key, codec_ext[o->codec]);
        expect_row r = {key, "wds", tar_name, member, s,         pos,
                        &c,  0,     c.frames, c.text, c.speaker, NULL};
        expected_line(expected, &r);
    }
    if (rc == 0)
        rc = tar_finish(&t);
    if (rc == 0)
        rc = write_shard_file(o, dir, tar_name, &t.buf, o->comp, IDX_NONE);
    tar_discard(&t);
    mb_free(&audio);
    mb_free(&meta);
    return rc;
}

/* ---- driver ---- */

static int make_dir(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "sharc-gen: cannot create %s: %s\n", path, strerror(errno));
    return -1;
}

static int make_dirs(const char *path)
{
    char *p = strfmt("%s", path);
    int rc = 0;
    for (char *s = p + 1; rc == 0 && *s; s++)
        if (*s == '/') {
            *s = '\0';
            rc = make_dir(p);
            *s = '/';
        }
    if (rc == 0)
        rc = make_dir(p);
    free(p);
    return rc;
}

/* Refuses to write into a non-empty layout folder: leftovers of a bigger corpus would otherwise
 * be read as part of this one. */
static int check_empty(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            fprintf(stderr, "sharc-gen: %s is not empty; remove it or choose another --out\n",
                    path);
            rc = -1;
            break;
        }
    closedir(d);
    return rc;
}

static int write_layout(const gen_opts *o, enum layout l)
{
    const char *name = l == LAYOUT_SHAR ? "shar" : l == LAYOUT_NEMO ? "nemo" : "wds";
    char *dir = strfmt("%s/%s", o->out, name), *path = NULL;
    membuf expected = {0}, all = {0};
    int rc = check_empty(dir) != 0 || make_dirs(dir) != 0 ? -1 : 0;
    if (rc == 0 && l == LAYOUT_NEMO) {
        path = strfmt("%s/sharded_manifests", dir);
        rc = make_dir(path);
        free(path);
    }
    for (int s = 0; rc == 0 && s < o->shards; s++)
        rc = l == LAYOUT_SHAR   ? shar_shard(o, dir, s, &expected)
             : l == LAYOUT_NEMO ? nemo_shard(o, dir, s, &all, &expected)
                                : wds_shard(o, dir, s, &expected);
    if (rc == 0 && l == LAYOUT_NEMO) {
        path = strfmt("%s/tarred_audio_manifest.json", dir);
        rc = write_file(path, all.data, all.len);
        free(path);
    }
    if (rc == 0) {
        path = strfmt("%s/%s.expected.jsonl", o->out, name);
        rc = write_file(path, expected.data, expected.len);
        free(path);
    }
    mb_free(&expected);
    mb_free(&all);
    free(dir);
    return rc;
}

static void usage(FILE *f)
{
    fputs("usage: sharc-gen --out DIR [options]\n"
          "Writes a deterministic synthetic ASR corpus: DIR/<layout>/ shards and\n"
          "DIR/<layout>.expected.jsonl (one line per cut a reader must yield, in order).\n"
          "\n"
          "  --out DIR              output folder (created; DIR/<layout> must be empty)\n"
          "  --layout L             shar | nemo | wds | all (default shar)\n"
          "  --codec C              flac | wav | opus | mp3 (default flac; opus is 48 kHz)\n"
          "  --compress Z           none | gzip | zstd (default gzip): JSONL and tars\n"
          "  --shards N             shards per layout (default 4)\n"
          "  --cuts-per-shard N     audio members per shard (default 24)\n"
          "  --seed S               corpus seed (default 1)\n"
          "  --min-duration SEC     shortest cut (default 0.5)\n"
          "  --max-duration SEC     longest cut (default 25)\n"
          "  --sampling-rate HZ     sampling rate, except for opus (default 16000)\n"
          "  --channels N           channels, 1..8 (default 1)\n"
          "  --index                Lhotse 2.0 .idx sidecars next to uncompressed Shar files\n"
          "                         (Lhotse 1.x readers take them for shards: off by default)\n"
          "  --help                 this text\n",
          f);
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "sharc-gen: %s must be an integer in [%ld, %ld], got '%s'\n", flag, lo, hi,
                v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_double(const char *flag, const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !(x > 0) || x > 3600) {
        fprintf(stderr, "sharc-gen: %s must be a number of seconds in (0, 3600], got '%s'\n", flag,
                v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_choice(const char *flag, const char *v, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return 0;
        }
    fprintf(stderr, "sharc-gen: unknown %s '%s'\n", flag, v);
    return -1;
}

static int parse_opt(gen_opts *o, int c, const char *v)
{
    static const char *const layouts[] = {"shar", "nemo", "wds", "all"};
    static const char *const comps[] = {"none", "gzip", "zstd"};
    long x;
    int k, rc = 0;
    switch (c) {
    case 'o':
        o->out = v;
        break;
    case 'l':
        rc = parse_choice("--layout", v, layouts, 4, &k);
        o->layouts = k == 3 ? 7u : 1u << k;
        break;
    case 'c':
        rc = parse_choice("--codec", v, codec_ext, 4, &k);
        o->codec = (enum codec)k;
        break;
    case 'z':
        rc = parse_choice("--compress", v, comps, 3, &k);
        o->comp = (enum compress)k;
        break;
    case 'n':
        rc = parse_long("--shards", v, 1, 100000, &x);
        o->shards = (int)x;
        break;
    case 'k':
        rc = parse_long("--cuts-per-shard", v, 1, 1000000, &x);
        o->cuts_per_shard = (int)x;
        break;
    case 's': {
        char *end;
        errno = 0;
        o->seed = strtoull(v, &end, 10);
        if (errno || *end || end == v || v[0] == '-') {
            fprintf(stderr, "sharc-gen: --seed must be an unsigned integer, got '%s'\n", v);
            rc = -1;
        }
        break;
    }
    case 'a':
        rc = parse_double("--min-duration", v, &o->min_dur);
        break;
    case 'b':
        rc = parse_double("--max-duration", v, &o->max_dur);
        break;
    case 'r':
        rc = parse_long("--sampling-rate", v, 1000, 384000, &x);
        o->rate = (int)x;
        break;
    case 'C':
        rc = parse_long("--channels", v, 1, 8, &x);
        o->channels = (int)x;
        break;
    case 'x':
        o->index = true;
        break;
    default:
        rc = -1;
    }
    return rc;
}

/* Checks what only shows once all flags are known, before anything is written. */
static int check_opts(const gen_opts *o)
{
    if (!o->out) {
        fputs("sharc-gen: --out DIR is required (see --help)\n", stderr);
        return -1;
    }
    if (o->min_dur > o->max_dur) {
        fprintf(stderr, "sharc-gen: --min-duration %g is larger than --max-duration %g\n",
                o->min_dur, o->max_dur);
        return -1;
    }
    SF_INFO info = {
        .samplerate = codec_rate(o), .channels = o->channels, .format = sf_format_of(o->codec)};
    if (!sf_format_check(&info)) {
        fprintf(stderr, "sharc-gen: this libsndfile (%s) cannot write %s audio%s\n",
                sf_version_string(), codec_ext[o->codec],
                o->codec == CODEC_MP3 ? " (MPEG layer III writing needs libsndfile >= 1.1 built "
                                        "with LAME)"
                                      : "");
        return -1;
    }
    /* sf_format_check() misses some limits (MPEG sample rates), so also open an encoder. */
    SF_VIRTUAL_IO vio = {vio_len, vio_seek, vio_read, vio_write, vio_tell};
    membuf scratch = {0};
    SNDFILE *sf = sf_open_virtual(&vio, SFM_WRITE, &info, &scratch);
    if (sf)
        sf_close(sf);
    mb_free(&scratch);
    if (!sf) {
        fprintf(stderr, "sharc-gen: cannot write %s audio at %d Hz with %d channel(s): %s\n",
                codec_ext[o->codec], info.samplerate, o->channels, sf_strerror(NULL));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"out", required_argument, NULL, 'o'},
        {"layout", required_argument, NULL, 'l'},
        {"codec", required_argument, NULL, 'c'},
        {"compress", required_argument, NULL, 'z'},
        {"shards", required_argument, NULL, 'n'},
        {"cuts-per-shard", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, 's'},
        {"min-duration", required_argument, NULL, 'a'},
        {"max-duration", required_argument, NULL, 'b'},
        {"sampling-rate", required_argument, NULL, 'r'},
        {"channels", required_argument, NULL, 'C'},
        {"index", no_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    gen_opts o = {NULL, LAYOUT_SHAR, CODEC_FLAC, COMP_GZIP, 4, 24, 1, 0.5, 25.0, 16000, 1, false};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == '?' || parse_opt(&o, c, optarg) != 0) {
            fputs("see sharc-gen --help\n", stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sharc-gen: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (check_opts(&o) != 0)
        return 2;
    if (make_dirs(o.out) != 0)
        return 1;
    const enum layout order[] = {LAYOUT_SHAR, LAYOUT_NEMO, LAYOUT_WDS};
    for (int i = 0; i < 3; i++)
        if ((o.layouts & order[i]) && write_layout(&o, order[i]) != 0)
            return 1;
    return 0;
}

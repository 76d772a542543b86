#include "decode/wav.h"

#include <limits.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/*
 * The rules below follow libsndfile 1.2.0's wav_read_header() and
 * wavlike_subchunk_parse(): where libsndfile would fail, log-and-fix, or leave its chunk
 * walk somewhere else than the end of a chunk, the file is not canonical.
 */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static unsigned le16(const uint8_t *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static int id_is(const uint8_t *id, const char *name)
{
    return !memcmp(id, name, 4);
}

/* libsndfile skips chunks with unknown printable ids and resyncs or stops on others. */
static int id_printable(const uint8_t *id)
{
    for (int i = 0; i < 4; i++)
        if (id[i] < ' ' || id[i] > '~')
            return 0;
    return 1;
}

/*
 * Chunks that libsndfile interprets and whose contents could fail the open or leave its
 * walk elsewhere: a second RIFF header, PEAK, cue, smpl, acid, bext and cart parsers, a
 * top-level INFO list. "TAG" starts an ID3v1 trailer, which ends its walk.
 */
static int id_refused(const uint8_t *id)
{
    static const char *const refused[] = {"RIFF", "RIFX", "PEAK", "cue ", "smpl",
                                          "acid", "bext", "cart", "INFO"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (id_is(id, refused[i]))
            return 1;
    return !memcmp(id, "TAG", 3);
}

static int fmt_is_pcm16(const uint8_t *p, uint32_t size, sharc__wav_pcm16 *w)
{
    /* KSDATAFORMAT_SUBTYPE_PCM as stored: 00000001-0000-0010-8000-00aa00389b71. */
    static const uint8_t pcm_guid[16] = {0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
                                         0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71};
    if (size < 16)
        return 0;
    const unsigned tag = le16(p), channels = le16(p + 2), align = le16(p + 12);
    const unsigned bits = le16(p + 14);
    const uint32_t rate = le32(p + 4);
    if (tag == 0xFFFE) {
        if (size < 40 || memcmp(p + 24, pcm_guid, sizeof pcm_guid))
            return 0;
    } else if (tag != 1) {
        return 0;
    }
    if (channels < 1 || channels > SHARC__WAV_MAX_CHANNELS || rate < 1 || rate > INT_MAX ||
        bits != 16 || align != 2 * channels)
        return 0;
    w->channels = (int)channels;
    w->sampling_rate = (int)rate;
    return 1;
}

static int info_string_id(const uint8_t *id)
{
    static const char *const names[] = {"ISFT", "ICOP", "IARL", "IART", "ICMT", "ICRD", "IENG",
                                        "IGNR", "INAM", "IPRD", "ISBJ", "ISRC", "IAUT", "ITRK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (id_is(id, names[i]))
            return 1;
    return 0;
}

/*
 * A LIST chunk (INFO strings, as ffmpeg and sox write) is walked the way libsndfile walks
 * it; it is plain when that walk ends exactly at the chunk's end. Sub-chunks that make
 * libsndfile back out (data), read past the chunk, or parse further (exif, labl, ...)
 * are refused, as are sizes that its 32-bit sums would wrap.
 */
static int list_is_plain(const uint8_t *p, uint32_t len)
{
    uint32_t pos = 0;
    if (len <= 8)
        return 0; /* libsndfile's "weird length" branch */
    while (pos < len) {
        if (len - pos < 4)
            return 0; /* libsndfile would read past the list */
        const uint8_t *id = p + pos;
        pos += 4;
        if (id_is(id, "INFO") || id_is(id, "adtl"))
            continue; /* list types: no size follows */
        if (len - pos < 4 || !id_printable(id) || id_is(id, "data") || id_is(id, "exif") ||
            id_is(id, "labl") || id_is(id, "DISP") || id_is(id, "ltxt") || id_is(id, "note"))
            return 0;
        uint32_t size = le32(p + pos);
        pos += 4;
        if (size > INT32_MAX)
            return 0;
        size += size & 1;
        /* Too big: libsndfile gives up on the list and skips to its end. */
        if (size > len - pos || (info_string_id(id) && size >= 2048))
            return 1;
        pos += size;
    }
    return 1;
}

/* Check one chunk that is not `data`; returns 0 when it makes the file not canonical. */
static int chunk_is_plain(const uint8_t *id, const uint8_t *body, uint32_t size, int *have_fmt,
                          sharc__wav_pcm16 *w)
{
    if (id_is(id, "fmt ")) {
        /* libsndfile ignores a second fmt without skipping it: refuse. */
        if (*have_fmt || !fmt_is_pcm16(body, size, w))
            return 0;
        *have_fmt = 1;
        return 1;
    }
    if (id_is(id, "fact"))
        return size >= 4; /* libsndfile reads 4 bytes whatever the size */
    if (id_is(id, "LIST"))
        return list_is_plain(body, size);
    return id_printable(id) && !id_refused(id);
}

/* Bytes [pos, pos + len) of the member, or NULL when they are not in the pieces at hand. */
static const uint8_t *piece_at(const sharc__wav_pieces *p, size_t pos, size_t len)
{
    if (pos > p->n || len > p->n - pos)
        return NULL;
    if (len <= p->head_len && pos <= p->head_len - len)
        return p->head + pos;
    if (p->tail && pos >= p->tail_at)
        return p->tail + (pos - p->tail_at);
    return NULL;
}

/*
 * The chunk walk. With `locate`, it stops at the data chunk and reports where that ends
 * (for sharc__wav_data_end); otherwise it checks the whole member. A byte it needs that
 * is not in the pieces makes the member not canonical.
 */
static int walk(const sharc__wav_pieces *p, sharc__wav_pcm16 *wav, size_t *data_end)
{
    sharc__wav_pcm16 w = {0};
    const size_t n = p->n;
    size_t pos = 12, header = 12, data_size = 0;
    int have_fmt = 0, have_data = 0, pad = 0;
    const uint8_t *riff = piece_at(p, 0, 12);
    if (!SHARC__WAV_DIRECT || !riff || !id_is(riff, "RIFF") || !id_is(riff + 8, "WAVE"))
        return 0;
    /* libsndfile stops walking within 4 bytes of the end, and at a zero chunk id. */
    while (n - pos > 4) {
        pos += (size_t)pad;
        if (n - pos < 8)
            return 0;
        const uint8_t *id = piece_at(p, pos, 8);
        if (!id)
            return 0;
        const uint32_t size = le32(id + 4);
        if (!memcmp(id, "\0\0\0\0", 4))
            break;
        pos += 8;
        header += 8;
        if (size > n - pos)
            return 0; /* libsndfile would truncate or stop: let it */
        if (id_is(id, "data")) {
            if (!have_fmt || have_data)
                return 0;
            have_data = 1;
            w.data_offset = pos;
            data_size = size;
            pos += size;
            pad = 0;
            if (data_end) {
                *data_end = pos;
                return data_size > 0 && piece_at(p, w.data_offset, 4) != NULL;
            }
            continue;
        }
        header += (size_t)size + (size & 1);
        const uint8_t *body = piece_at(p, pos, size);
        if (size > INT32_MAX || header > SHARC__WAV_MAX_HEADER_BYTES || !body ||
            !chunk_is_plain(id, body, size, &have_fmt, &w))
            return 0;
        pos += size;
        pad = size & 1;
    }
    if (!have_data || data_end || data_size == 0 || data_size % (2 * (size_t)w.channels))
        return 0;
    /* libsndfile refuses WavPack and Ogg payloads inside a WAV. */
    const uint8_t *first = piece_at(p, w.data_offset, 4);
    if (!first || id_is(first, "wvpk") || id_is(first, "OggS"))
        return 0;
    w.frames = (int64_t)(data_size / (2 * (size_t)w.channels));
    *wav = w;
    return 1;
}

int sharc__wav_parse(const uint8_t *data, size_t n, sharc__wav_pcm16 *wav)
{
    if (!data)
        return 0;
    const sharc__wav_pieces p = {data, n, NULL, n, n};
    return walk(&p, wav, NULL);
}

int sharc__wav_parse_pieces(const sharc__wav_pieces *p, sharc__wav_pcm16 *wav)
{
    return walk(p, wav, NULL);
}

int sharc__wav_data_end(const uint8_t *head, size_t head_len, size_t n, size_t *data_end)
{
    const sharc__wav_pieces p = {head, head_len < n ? head_len : n, NULL, n, n};
    return head ? walk(&p, NULL, data_end) : 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

int sharc__wav_extent_get(const uint8_t *head, size_t head_len, size_t n, sharc__wav_extent *e)
{
    if (!head || head_len < 12)
        return 0;
    head_len = head_len < n ? head_len : n;
    const int big = id_is(head, "RIFX"), rf64 = id_is(head, "RF64") || id_is(head, "BW64");
    if ((!big && !rf64 && !id_is(head, "RIFF")) || !id_is(head + 8, "WAVE"))
        return 0;
    uint64_t ds64_data = 0;
    int have_ds64 = 0;
    unsigned align = 0;
    size_t pos = 12;
    while (pos <= head_len && head_len - pos >= 8) {
        const uint8_t *chunk = head + pos;
        const uint32_t size = big ? be32(chunk + 4) : le32(chunk + 4);
        pos += 8;
        if (id_is(chunk, "data")) {
            /* RF64 keeps the real size in ds64 and writes 0xFFFFFFFF here. */
            e->data_bytes = rf64 && have_ds64 && size == 0xFFFFFFFFu ? ds64_data : size;
            e->present_bytes = n - pos;
            e->block_align = align;
            return 1;
        }
        if (size > head_len - pos)
            return 0;
        if (id_is(chunk, "fmt ") && size >= 16)
            align = big ? (unsigned)chunk[20] << 8 | chunk[21] : le16(chunk + 20);
        if (rf64 && id_is(chunk, "ds64") && size >= 16) {
            ds64_data = le64(chunk + 16); /* after the RIFF size; ds64 is little-endian */
            have_ds64 = 1;
        }
        pos += (size_t)size + (size & 1);
    }
    return 0;
}

static float pcm16_at(const uint8_t *src, size_t i)
{
    int16_t s;
    memcpy(&s, src + 2 * i, sizeof s); /* unaligned, host (little-endian) order */
    return (float)s * (1.0f / 0x8000);
}

/*
 * Fixed-size blocks: gcc's -O2 cost model vectorises a loop only when no scalar
 * epilogue is needed, so the inner loop has a constant trip count and the tail is left
 * to a scalar loop.
 */
#define CONVERT_BLOCK 16

#if defined(__SSE2__)
/*
 * Long conversions into batch rows write with non-temporal stores: a row is read again only
 * after the batches planned ahead of it are done (tens of MB later), so filling the
 * cache with it, and first reading every destination line into the cache, only costs
 * memory bandwidth. The values are those of pcm16_at(): int16 -> float is exact and so
 * is the product with 2^-15.
 */
#define STREAM_MIN_SAMPLES 8192

static size_t convert_stream(const uint8_t *restrict src, size_t samples, float *restrict dst)
{
    size_t i = 0;
    for (; i < samples && ((uintptr_t)(dst + i) & 15); i++)
        dst[i] = pcm16_at(src, i);
    const __m128 scale = _mm_set1_ps(1.0f / 0x8000);
    for (; i + 8 <= samples; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
        __m128i lo = _mm_srai_epi32(_mm_unpacklo_epi16(v, v), 16);
        __m128i hi = _mm_srai_epi32(_mm_unpackhi_epi16(v, v), 16);
        _mm_stream_ps(dst + i, _mm_mul_ps(_mm_cvtepi32_ps(lo), scale));
        _mm_stream_ps(dst + i + 4, _mm_mul_ps(_mm_cvtepi32_ps(hi), scale));
    }
    _mm_sfence(); /* the stores are visible before the row is reported done */
    return i;
}
#endif

void sharc__wav_pcm16_to_float(const uint8_t *restrict src, size_t samples, float *restrict dst,
                               int stream)
{
    size_t i = 0;
#if defined(__SSE2__)
    if (stream && samples >= STREAM_MIN_SAMPLES)
        i = convert_stream(src, samples, dst);
#endif
    for (; i + CONVERT_BLOCK <= samples; i += CONVERT_BLOCK)
        for (size_t k = 0; k < CONVERT_BLOCK; k++)
            dst[i + k] = pcm16_at(src, i + k);
    for (; i < samples; i++)
        dst[i] = pcm16_at(src, i);
}

void sharc__wav_pcm16_channel_to_float(const uint8_t *restrict src, size_t frames, int channels,
                                       int channel, float *restrict dst)
{
    for (size_t i = 0; i < frames; i++)
        dst[i] = pcm16_at(src, i * (size_t)channels + (size_t)channel);
}

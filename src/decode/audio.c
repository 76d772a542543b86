#include "decode/audio.h"
#include "decode/flac.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include <sndfile.h>

#include "decode/wav.h"

/*
 * The one place where libsndfile failures become ours (STYLE R8): record libsndfile's own
 * text once, with the sniffed codec and what we were doing, and leave through `label`. It
 * is logged at DEBUG here; the reader reports the problem with file, member and cut.
 * After a failed sf_open_virtual() `snd` is NULL and libsndfile reports its process-wide
 * last error; under concurrent failures that text may belong to another thread, which
 * only ever costs the wording, never memory safety.
 */
#define SHARC__SF_CHECK(ctx, snd, cond, codec, what, rc, label)                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            (rc) = sharc__fail_data((ctx), SHARC_ERR_DECODE, "%s audio: %s: %s",                   \
                                    sharc__codec_name(codec), (what), sf_strerror(snd));           \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* Frames are staged through this many floats when a channel is selected or skipped. */
#define CHUNK_FLOATS 4096

sharc__codec sharc__audio_sniff(const uint8_t *data, size_t n)
{
    if (!data || n < 4)
        return SHARC__CODEC_UNKNOWN;
    if (n >= 12 &&
        (!memcmp(data, "RIFF", 4) || !memcmp(data, "RIFX", 4) || !memcmp(data, "RF64", 4)) &&
        !memcmp(data + 8, "WAVE", 4))
        return SHARC__CODEC_WAV;
    if (!memcmp(data, "fLaC", 4))
        return SHARC__CODEC_FLAC;
    if (!memcmp(data, "OggS", 4))
        return SHARC__CODEC_OGG;
    if (!memcmp(data, "ID3", 3)) {
        /* An ID3v2 tag normally precedes MP3, but FLAC files may carry one too. */
        if (n >= 10 && !((data[6] | data[7] | data[8] | data[9]) & 0x80)) {
            size_t len = 10 + ((size_t)data[6] << 21 | (size_t)data[7] << 14 |
                               (size_t)data[8] << 7 | (size_t)data[9]);
            if (data[5] & 0x10)
                len += 10; /* footer */
            if (len + 4 <= n && !memcmp(data + len, "fLaC", 4))
                return SHARC__CODEC_FLAC;
        }
        return SHARC__CODEC_MP3;
    }
    /*
     * MPEG audio frame header: 11 sync bits, then version (01 reserved), layer (00
     * reserved), and bitrate (0000 free format, 1111 invalid) and rate (11 reserved)
     * indices. Requiring valid fields keeps random bytes starting with 0xFF out.
     */
    if (data[0] == 0xFF && (data[1] & 0xE0) == 0xE0 && ((data[1] >> 3) & 3) != 1 &&
        ((data[1] >> 1) & 3) != 0 && (data[2] >> 4) != 0 && (data[2] >> 4) != 15 &&
        ((data[2] >> 2) & 3) != 3)
        return SHARC__CODEC_MP3;
    return SHARC__CODEC_UNKNOWN;
}

const char *sharc__codec_name(sharc__codec c)
{
    switch (c) {
    case SHARC__CODEC_WAV:
        return "wav";
    case SHARC__CODEC_FLAC:
        return "flac";
    case SHARC__CODEC_OGG:
        return "ogg";
    case SHARC__CODEC_MP3:
        return "mp3";
    case SHARC__CODEC_UNKNOWN:
        break;
    }
    return "unknown";
}

/*
 * Read-only libsndfile virtual file over a caller's buffer, or over `len` bytes at byte
 * `base` of an open file (data NULL), read with pread through the caller's cache (libsndfile
 * and its codecs read a little at a time, and FLAC seeks by bisection): a window into a long
 * member left in its shard file then reads only what decoding it needs.
 */
typedef struct mem_reader {
    const uint8_t *data;
    sf_count_t len;
    sf_count_t pos;
    int fd;
    uint64_t base;
    sf_count_t cache_at, cache_len;
    int io_error; ///< errno of a failed pread, or -1 when the file ended before `len` bytes
    uint8_t *cache;
    size_t cache_cap;
} mem_reader;

/* Fill the cache with the bytes from `pos` on; 0 when none could be read. */
static sf_count_t file_fill(mem_reader *m, sf_count_t pos)
{
    sf_count_t want =
        m->len - pos < (sf_count_t)m->cache_cap ? m->len - pos : (sf_count_t)m->cache_cap;
    ssize_t got;
    do
        got = pread(m->fd, m->cache, (size_t)want, (off_t)(m->base + (uint64_t)pos));
    while (got < 0 && errno == EINTR);
    if (got <= 0) {
        m->io_error = got < 0 ? errno : -1;
        m->cache_len = 0;
        return 0;
    }
    m->cache_at = pos;
    m->cache_len = got;
    return got;
}

static sf_count_t mem_get_filelen(void *user)
{
    return ((mem_reader *)user)->len;
}

static sf_count_t mem_seek(sf_count_t offset, int whence, void *user)
{
    mem_reader *m = user;
    sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->len : 0;
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END)
        return -1;
    if ((offset > 0 && base > INT64_MAX - offset) || base + offset < 0)
        return -1;
    m->pos = base + offset; /* past the end is allowed, as for files; reads return 0 */
    return m->pos;
}

static sf_count_t mem_read(void *ptr, sf_count_t count, void *user)
{
    mem_reader *m = user;
    if (count <= 0 || m->pos >= m->len)
        return 0;
    if (count > m->len - m->pos)
        count = m->len - m->pos;
    if (m->data) {
        memcpy(ptr, m->data + m->pos, (size_t)count);
        m->pos += count;
        return count;
    }
    sf_count_t done = 0;
    while (done < count) {
        sf_count_t at = m->pos + done;
        if ((at < m->cache_at || at >= m->cache_at + m->cache_len) && file_fill(m, at) == 0)
            break; /* libsndfile sees a short read; the caller reports io_error */
        sf_count_t n = m->cache_at + m->cache_len - at;
        n = n < count - done ? n : count - done;
        memcpy((uint8_t *)ptr + done, m->cache + (at - m->cache_at), (size_t)n);
        done += n;
    }
    m->pos += done;
    return done;
}

static sf_count_t mem_write_none(const void *ptr, sf_count_t count, void *user)
{
    (void)ptr;
    (void)count;
    (void)user;
    return 0;
}

static sf_count_t mem_tell(void *user)
{
    return ((mem_reader *)user)->pos;
}

/* An open decoder; `mem` must stay where it is while `snd` is open. */
typedef struct decoder {
    SNDFILE *snd;
    SF_INFO sfi;
    sharc__codec codec;
    mem_reader mem;
} decoder;

/*
 * A WAV member whose data chunk claims more bytes than the member holds was cut short:
 * libsndfile would read the bytes there are as if they were all, and the cut would be
 * padded or shortened. `head` holds the member's first `head_len` bytes.
 */
static int check_wav_extent(sharc__ctx *ctx, const uint8_t *head, size_t head_len, size_t n)
{
    sharc__wav_extent e;
    if (!sharc__wav_extent_get(head, head_len, n, &e) || e.data_bytes <= e.present_bytes)
        return 0;
    if (e.block_align == 0)
        return sharc__set_error(ctx, SHARC_ERR_DECODE,
                                "wav audio is cut short: its header says %" PRIu64
                                " bytes of samples, the member holds %" PRIu64,
                                e.data_bytes, e.present_bytes);
    return sharc__set_error(ctx, SHARC_ERR_DECODE,
                            "wav audio is cut short: its header says %" PRIu64 " samples (%" PRIu64
                            " bytes), the member holds %" PRIu64 " (%" PRIu64 " bytes)",
                            e.data_bytes / e.block_align, e.data_bytes,
                            e.present_bytes / e.block_align, e.present_bytes);
}

/* libsndfile's "unknown" length (SF_COUNT_MAX), or a negative one. */
static int length_unknown(sf_count_t frames)
{
    return frames < 0 || frames == SF_COUNT_MAX;
}

/* Open the decoder on d->mem, which is set up, with d->codec sniffed. */
static int decoder_start(sharc__ctx *ctx, decoder *d)
{
    static const SF_VIRTUAL_IO vio = {mem_get_filelen, mem_seek, mem_read, mem_write_none,
                                      mem_tell};
    int rc = 0;
    /*
     * libsndfile guesses the container from the bytes itself (MP3 included since 1.1);
     * a format is only an input for headerless RAW, which we never accept.
     */
    d->snd = sf_open_virtual((SF_VIRTUAL_IO *)&vio, SFM_READ, &d->sfi, &d->mem);
    SHARC__SF_CHECK(ctx, d->snd, d->snd != NULL, d->codec, "cannot open", rc, fail);
    if (d->sfi.channels < 1 || d->sfi.channels > CHUNK_FLOATS || d->sfi.samplerate < 1) {
        rc = sharc__fail_data(ctx, SHARC_ERR_DECODE, "%s audio: bad header: %d channels at %d Hz",
                              sharc__codec_name(d->codec), d->sfi.channels, d->sfi.samplerate);
        goto fail;
    }
    /*
     * libsndfile takes an Ogg stream's length from the granule position of its last page,
     * which every complete stream has: without one, the end of the stream is missing or
     * damaged (a page failing its CRC), and decoding would quietly stop short of it.
     */
    if (d->codec == SHARC__CODEC_OGG && length_unknown(d->sfi.frames)) {
        rc = sharc__set_error(ctx, SHARC_ERR_DECODE,
                              "ogg audio: no length in its last page: the end of the stream is "
                              "missing or damaged");
        goto fail;
    }
    return 0;
fail:
    if (d->snd)
        sf_close(d->snd);
    d->snd = NULL;
    return rc;
}

static int decoder_open(sharc__ctx *ctx, decoder *d, const uint8_t *data, size_t n)
{
    memset(d, 0, sizeof *d);
    d->codec = sharc__audio_sniff(data, n);
    if (!data || n == 0)
        return sharc__set_error(ctx, SHARC_ERR_DECODE, "empty audio data (0 bytes)");
    d->mem.data = data;
    d->mem.len = (sf_count_t)n;
    int rc = d->codec == SHARC__CODEC_WAV ? check_wav_extent(ctx, data, n, n) : 0;
    return rc < 0 ? rc : decoder_start(ctx, d);
}

/* The same over `n` bytes at byte `at` of the open file `fd`, read through `cache`. */
static int decoder_open_file(sharc__ctx *ctx, decoder *d, int fd, uint64_t at, size_t n,
                             uint8_t *cache, size_t cache_cap)
{
    memset(d, 0, sizeof *d);
    if (n == 0)
        return sharc__set_error(ctx, SHARC_ERR_DECODE, "empty audio data (0 bytes)");
    if (!cache || cache_cap < 64)
        return sharc__set_error(ctx, SHARC_ERR(EINVAL), "no room to read audio from its file");
    d->mem.cache = cache;
    d->mem.cache_cap = cache_cap;
    d->mem.fd = fd;
    d->mem.base = at;
    d->mem.len = (sf_count_t)n;
    sf_count_t head = file_fill(&d->mem, 0);
    d->codec = sharc__audio_sniff(d->mem.cache, (size_t)head);
    int rc =
        d->codec == SHARC__CODEC_WAV ? check_wav_extent(ctx, d->mem.cache, (size_t)head, n) : 0;
    return rc < 0 ? rc : decoder_start(ctx, d);
}

static void decoder_info(const decoder *d, sharc__audio_info *info)
{
    if (!info)
        return;
    info->codec = d->codec;
    info->sampling_rate = d->sfi.samplerate;
    info->channels = d->sfi.channels;
    info->frames = d->sfi.frames;
    info->non_finite = 0;
}

/*
 * Read up to `max` frames. With `channel` < 0 they land in `out` directly (the hot path:
 * no copy of ours); otherwise only that channel is kept, staged through a stack chunk.
 * A NULL `out` discards. Returns the frames read, or -1 with libsndfile's error set.
 */
static int64_t read_frames(decoder *d, float *out, int64_t max, int channel)
{
    float chunk[CHUNK_FLOATS];
    const int ch = d->sfi.channels;
    int64_t done = 0;
    if (out && channel < 0) {
        done = sf_readf_float(d->snd, out, max);
    } else {
        const int64_t per = CHUNK_FLOATS / ch;
        while (done < max) {
            int64_t want = max - done < per ? max - done : per;
            int64_t got = sf_readf_float(d->snd, chunk, want);
            if (got <= 0)
                break;
            if (out) {
                for (int64_t i = 0; i < got; i++)
                    out[done + i] = chunk[i * ch + channel];
            }
            done += got;
            if (got < want)
                break;
        }
    }
    return sf_error(d->snd) != SF_ERR_NO_ERROR ? -1 : done;
}

/*
 * Report the header of the open decoder `d` and close it. A length libsndfile does not know
 * (a FLAC stream whose STREAMINFO gives 0 samples, which the format allows) is counted by
 * decoding: a cut's length comes from here when its metadata lack one.
 */
static int decoder_header(sharc__ctx *ctx, decoder *d, sharc__audio_info *info)
{
    int rc = 0;
    if (length_unknown(d->sfi.frames)) {
        int64_t n = read_frames(d, NULL, INT64_MAX, 0);
        SHARC__SF_CHECK(ctx, d->snd, n >= 0, d->codec, "decode failed while counting its samples",
                        rc, done);
        d->sfi.frames = n;
    }
    decoder_info(d, info);
done:
    sf_close(d->snd);
    return rc;
}

int sharc__audio_info_get(sharc__ctx *ctx, const uint8_t *data, size_t n, sharc__audio_info *info)
{
    sharc__wav_pcm16 wav;
    if (sharc__wav_parse(data, n, &wav)) {
        if (info)
            *info = (sharc__audio_info){SHARC__CODEC_WAV, wav.sampling_rate, wav.channels,
                                        wav.frames, 0};
        return 0;
    }
    decoder d;
    int rc = decoder_open(ctx, &d, data, n);
    if (rc < 0)
        return rc;
    return decoder_header(ctx, &d, info);
}

/*
 * Position the decoder at `offset` frames; returns 0, 1 (audio ends before it, at frame
 * *reached), or -1.
 */
static int skip_to(decoder *d, int64_t offset, int64_t *reached)
{
    *reached = offset;
    if (offset == 0)
        return 0;
    if ((d->codec == SHARC__CODEC_WAV || d->codec == SHARC__CODEC_FLAC) && d->sfi.seekable) {
        /* PCM and FLAC seek sample-exactly; past the end libsndfile refuses. */
        if (offset > d->sfi.frames) {
            *reached = d->sfi.frames;
            return 1;
        }
        return sf_seek(d->snd, offset, SEEK_SET) == offset ? 0 : -1;
    }
    int64_t got = read_frames(d, NULL, offset, 0);
    if (got < 0)
        return -1;
    *reached = got;
    return got < offset ? 1 : 0;
}

/*
 * The length the header gives where decoding must reach it: FLAC's STREAMINFO count and an
 * Ogg stream's last granule position are exact. -1 for the others (a WAV cut short is found
 * from its chunks, an MP3's length may be an estimate) and when it is unknown.
 */
static int64_t exact_length(const decoder *d)
{
    if ((d->codec != SHARC__CODEC_FLAC && d->codec != SHARC__CODEC_OGG) ||
        length_unknown(d->sfi.frames))
        return -1;
    return d->sfi.frames;
}

/*
 * Samples stored as floats may be NaN or infinite, which no batch should hold: the first
 * such one of the `count` frames decoded into `out` (out_ch channels each, from frame
 * `offset` of the member) is an error naming where it is. Integer samples, the other codecs'
 * output, are always finite, so only float sources are scanned.
 */
static int check_finite(sharc__ctx *ctx, const decoder *d, const float *out, int64_t count,
                        int out_ch, const sharc__decode_spec *spec, sharc__audio_info *info)
{
    const int sub = d->sfi.format & SF_FORMAT_SUBMASK;
    if (sub != SF_FORMAT_FLOAT && sub != SF_FORMAT_DOUBLE)
        return 0;
    const size_t n = (size_t)count * (size_t)out_ch;
    size_t i = 0;
    while (i < n && isfinite(out[i]))
        i++;
    if (i == n)
        return 0;
    if (info)
        info->non_finite = 1;
    return sharc__set_error(ctx, SHARC_ERR_DECODE,
                            "%s audio holds a non-finite sample: %s at sample %" PRId64
                            " (channel %d)",
                            sharc__codec_name(d->codec),
                            isnan(out[i]) ? "NaN"
                            : out[i] > 0  ? "+Inf"
                                          : "-Inf",
                            spec->offset_frames + (int64_t)(i / (size_t)out_ch),
                            spec->channel >= 0 ? spec->channel : (int)(i % (size_t)out_ch));
}

/* Frames left after the current position, counting at most `limit`; -1 on error. */
static int64_t count_rest(decoder *d, int64_t limit)
{
    return read_frames(d, NULL, limit, 0);
}

/* Decode with the decoder open on `d` (closed on return), as sharc__audio_decode_sndfile(). */
static int decode_opened(sharc__ctx *ctx, decoder *d, const sharc__decode_spec *spec, float *out,
                         size_t out_capacity, sharc__audio_info *info, int64_t *frames)
{
    const char *cname;
    int rc = 0;
    decoder_info(d, info);
    cname = sharc__codec_name(d->codec);
    const int64_t want = spec->want_frames, tol = spec->tolerance_frames;
    const int out_ch = spec->channel >= 0 ? 1 : d->sfi.channels;
    const int64_t cap_frames = (int64_t)(out_capacity / (size_t)out_ch);
    if (spec->channel >= d->sfi.channels) {
        rc = sharc__set_error(ctx, SHARC_ERR_AUDIO_MISMATCH, "channel %d requested, audio has %d",
                              spec->channel, d->sfi.channels);
        goto fail;
    }
    if (spec->offset_frames < 0 || tol < 0) {
        rc = sharc__set_error(ctx, SHARC_ERR(EINVAL), "negative offset or tolerance");
        goto fail;
    }
    if (want > cap_frames) {
        rc = sharc__set_error(ctx, SHARC_ERR_TOO_LARGE,
                              "%" PRId64 " frames x %d channels do not fit in %zu floats", want,
                              out_ch, out_capacity);
        goto fail;
    }

    int64_t got = 0, reached;
    int skipped = skip_to(d, spec->offset_frames, &reached);
    SHARC__SF_CHECK(ctx, d->snd, skipped >= 0, d->codec, "cannot skip to the offset", rc, fail);
    if (!skipped) {
        got = read_frames(d, out, want >= 0 ? want : cap_frames, spec->channel);
        SHARC__SF_CHECK(ctx, d->snd, got >= 0, d->codec, "decode failed", rc, fail);
        reached = spec->offset_frames + got;
        if ((rc = check_finite(ctx, d, out, got, out_ch, spec, info)) < 0)
            goto fail;
    }
    /* A decoder that ends before the length its header gives has lost part of the stream
     * (a damaged frame or page): an error, never a shorter or padded cut. */
    const int64_t length = exact_length(d);
    if ((skipped || got < (want >= 0 ? want : cap_frames)) && length >= 0 && reached < length) {
        rc = sharc__set_error(ctx, SHARC_ERR_DECODE,
                              "%s audio: decoding gave %" PRId64 " samples of the %" PRId64
                              " its header gives: part of the stream is missing or damaged",
                              cname, reached, length);
        goto fail;
    }

    if (want < 0) {
        if (got == cap_frames && !skipped) {
            int64_t more = count_rest(d, 1);
            SHARC__SF_CHECK(ctx, d->snd, more >= 0, d->codec, "decode failed", rc, fail);
            if (more > 0) {
                rc = sharc__set_error(ctx, SHARC_ERR_TOO_LARGE,
                                      "%s audio has more than %" PRId64
                                      " frames x %d channels (%zu floats of room)",
                                      cname, cap_frames, out_ch, out_capacity);
                goto fail;
            }
        }
        *frames = got;
        goto done;
    }

    if (got == want && !spec->allow_longer && !skipped) {
        int64_t extra = count_rest(d, tol < INT64_MAX ? tol + 1 : tol);
        SHARC__SF_CHECK(ctx, d->snd, extra >= 0, d->codec, "decode failed", rc, fail);
        if (extra > tol) {
            rc = sharc__set_error(ctx, SHARC_ERR_AUDIO_MISMATCH,
                                  "%s audio: decoded more than %" PRId64
                                  " frames, expected %" PRId64 " (tolerance %" PRId64 ")",
                                  cname, want + tol, want, tol);
            goto fail;
        }
    }
    if (want - got > tol || (got == 0 && want > 0)) {
        rc = sharc__set_error(ctx, SHARC_ERR_AUDIO_MISMATCH,
                              "%s audio: decoded %" PRId64 " frames, expected %" PRId64
                              " (tolerance %" PRId64 ", offset %" PRId64 ")",
                              cname, got, want, tol, spec->offset_frames);
        goto fail;
    }
    sharc__pad_reflect(out, got, want, out_ch);
    *frames = want;
done:
    sf_close(d->snd);
    return 0;
fail:
    sf_close(d->snd);
    return rc;
}

int sharc__audio_decode_sndfile(sharc__ctx *ctx, const uint8_t *data, size_t n,
                                const sharc__decode_spec *spec, float *out, size_t out_capacity,
                                sharc__audio_info *info, int64_t *frames)
{
    decoder d;
    int rc = decoder_open(ctx, &d, data, n);
    if (rc < 0)
        return rc;
    return decode_opened(ctx, &d, spec, out, out_capacity, info, frames);
}

/* A file that ended early or could not be read fails as that, not as the codec's error,
 * and also where libsndfile took the short read for the end of the audio. */
static int file_failure(sharc__ctx *ctx, const decoder *d, int rc, uint64_t at, size_t n)
{
    if (d->mem.io_error == 0)
        return rc;
    if (d->mem.io_error > 0)
        return sharc__fail_data(ctx, SHARC_ERR_IO,
                                "read error in audio of %zu bytes at byte %llu: %s", n,
                                (unsigned long long)at, strerror(d->mem.io_error));
    return sharc__fail_data(ctx, SHARC_ERR_CORRUPT,
                            "the file ends inside audio of %zu bytes at byte %llu: it changed "
                            "after it was read",
                            n, (unsigned long long)at);
}

int sharc__audio_decode_at(sharc__ctx *ctx, int fd, uint64_t at, size_t n, uint8_t *cache,
                           size_t cache_cap, const sharc__decode_spec *spec, float *out,
                           size_t out_capacity, sharc__audio_info *info, int64_t *frames)
{
    decoder d;
    int rc = decoder_open_file(ctx, &d, fd, at, n, cache, cache_cap);
    if (rc == 0)
        rc = decode_opened(ctx, &d, spec, out, out_capacity, info, frames);
    return file_failure(ctx, &d, rc, at, n);
}

int sharc__audio_info_at(sharc__ctx *ctx, int fd, uint64_t at, size_t n, uint8_t *cache,
                         size_t cache_cap, sharc__audio_info *info)
{
    decoder d;
    int rc = decoder_open_file(ctx, &d, fd, at, n, cache, cache_cap);
    if (rc == 0)
        rc = decoder_header(ctx, &d, info);
    return file_failure(ctx, &d, rc, at, n);
}

/*
 * The direct path mirrors the libsndfile path's decisions and handles only the cases
 * where that path succeeds; for every other one the libsndfile path runs and reports the
 * error with its own text.
 */
int sharc__audio_decode_direct(const uint8_t *data, size_t n, const sharc__decode_spec *spec,
                               float *out, size_t out_capacity, sharc__audio_info *info,
                               int64_t *frames)
{
    sharc__wav_pcm16 wav;
    int64_t first, count;
    if (!sharc__wav_parse(data, n, &wav))
        return sharc__flac_decode_direct(data, n, spec, out, out_capacity, info, frames);
    if (!sharc__pcm16_plan(&wav, spec, out_capacity, &first, &count))
        return 0;
    const uint8_t *src = data + wav.data_offset + (size_t)first * 2 * (size_t)wav.channels;
    sharc__pcm16_convert(&wav, src, count, spec, out, info, frames);
    return 1;
}

int sharc__audio_decode(sharc__ctx *ctx, const uint8_t *data, size_t n,
                        const sharc__decode_spec *spec, float *out, size_t out_capacity,
                        sharc__audio_info *info, int64_t *frames)
{
    if (sharc__audio_decode_direct(data, n, spec, out, out_capacity, info, frames))
        return 0;
    return sharc__audio_decode_sndfile(ctx, data, n, spec, out, out_capacity, info, frames);
}

/* Growable libsndfile virtual file for encoding into a sharc__buf. */
typedef struct mem_writer {
    sharc__ctx *ctx;
    sharc__buf *buf;
    sf_count_t pos;
    int failed;
} mem_writer;

static sf_count_t memw_get_filelen(void *user)
{
    return (sf_count_t)((mem_writer *)user)->buf->len;
}

static sf_count_t memw_seek(sf_count_t offset, int whence, void *user)
{
    mem_writer *w = user;
    sf_count_t base = whence == SEEK_CUR   ? w->pos
                      : whence == SEEK_END ? (sf_count_t)w->buf->len
                                           : 0;
    if (base + offset < 0)
        return -1;
    w->pos = base + offset;
    return w->pos;
}

static sf_count_t memw_read(void *ptr, sf_count_t count, void *user)
{
    mem_writer *w = user;
    sf_count_t len = (sf_count_t)w->buf->len;
    if (count <= 0 || w->pos >= len)
        return 0;
    if (count > len - w->pos)
        count = len - w->pos;
    memcpy(ptr, w->buf->data + w->pos, (size_t)count);
    w->pos += count;
    return count;
}

static sf_count_t memw_write(const void *ptr, sf_count_t count, void *user)
{
    mem_writer *w = user;
    sharc__buf *b = w->buf;
    if (count <= 0)
        return 0;
    size_t end = (size_t)w->pos + (size_t)count;
    /* sharc__buf_reserve() keeps room for a NUL past `end` and grows geometrically. */
    if (sharc__buf_reserve(w->ctx, b, end) < 0) {
        w->failed = 1;
        return 0;
    }
    if ((size_t)w->pos > b->len)
        memset(b->data + b->len, 0, (size_t)w->pos - b->len);
    memcpy(b->data + w->pos, ptr, (size_t)count);
    w->pos += count;
    if (end > b->len) {
        b->len = end;
        b->data[end] = 0;
    }
    return count;
}

static sf_count_t memw_tell(void *user)
{
    return ((mem_writer *)user)->pos;
}

static int encoding_format(sharc__encoding enc)
{
    switch (enc) {
    case SHARC__ENC_WAV_PCM16:
        return SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    case SHARC__ENC_FLAC_PCM16:
        return SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    case SHARC__ENC_OPUS:
        return SF_FORMAT_OGG | SF_FORMAT_OPUS;
    case SHARC__ENC_VORBIS:
        return SF_FORMAT_OGG | SF_FORMAT_VORBIS;
    case SHARC__ENC_MP3:
        return SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
    }
    return 0;
}

int sharc__audio_encode(sharc__ctx *ctx, sharc__encoding enc, const int16_t *pcm, int64_t frames,
                        int channels, int sampling_rate, sharc__buf *out)
{
    SF_VIRTUAL_IO vio = {memw_get_filelen, memw_seek, memw_read, memw_write, memw_tell};
    mem_writer w = {ctx, out, 0, 0};
    SF_INFO sfi = {0};
    SNDFILE *snd = NULL;
    int rc = 0;
    if (frames < 0 || channels < 1 || sampling_rate < 1 || (frames > 0 && !pcm))
        return sharc__set_error(ctx, SHARC_ERR(EINVAL), "bad arguments to audio encode");
    sfi.format = encoding_format(enc);
    sfi.channels = channels;
    sfi.samplerate = sampling_rate;
    if (!sfi.format || !sf_format_check(&sfi))
        return sharc__set_error(ctx, SHARC_ERR_UNSUPPORTED,
                                "libsndfile cannot write encoding %d with %d channels at %d Hz",
                                (int)enc, channels, sampling_rate);
    sharc__buf_clear(out);
    snd = sf_open_virtual(&vio, SFM_WRITE, &sfi, &w);
    if (!snd) {
        rc = sharc__fail(ctx, w.failed ? SHARC_ERR(ENOMEM) : SHARC_ERR_UNSUPPORTED,
                         "libsndfile cannot open encoder %d at %d Hz: %s", (int)enc, sampling_rate,
                         sf_strerror(NULL));
        goto fail;
    }
    if (sf_writef_short(snd, pcm, frames) != frames) {
        rc = sharc__fail(ctx, w.failed ? SHARC_ERR(ENOMEM) : SHARC_ERR_IO,
                         "libsndfile encode failed: %s", sf_strerror(snd));
        goto fail;
    }
    int closed = sf_close(snd);
    snd = NULL;
    if (closed != 0 || w.failed) {
        rc = sharc__fail(ctx, w.failed ? SHARC_ERR(ENOMEM) : SHARC_ERR_IO,
                         "libsndfile could not finish the encoded stream: %s",
                         sf_error_number(closed));
        goto fail;
    }
    return 0;
fail:
    if (snd)
        sf_close(snd);
    sharc__buf_clear(out);
    return rc;
}

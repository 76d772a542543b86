#include "decode/flac.h"

#include <FLAC/stream_decoder.h>
#include <string.h>

#include "decode/wav.h"

/* libsndfile's FLAC reader takes these widths (its other ones it does not convert). */
static int width_taken(unsigned bits)
{
    return bits == 8 || bits == 16 || bits == 24;
}

/* Fixed-size blocks, so that gcc -O2 vectorises the inner loop (see wav.c). */
#define CONVERT_BLOCK 16

typedef struct flac_job {
    const uint8_t *data;
    size_t n, at;
    int have_info, failed;
    FLAC__StreamMetadata_StreamInfo info;
    float *out;      ///< NULL while reading the metadata
    int64_t count;   ///< frames to write into out
    int64_t decoded; ///< frames decoded so far
    int channel;     ///< the channel kept, or -1 for all
    int out_ch;      ///< channels per output frame
} flac_job;

static FLAC__StreamDecoderReadStatus read_cb(const FLAC__StreamDecoder *d, FLAC__byte buffer[],
                                             size_t *bytes, void *cookie)
{
    (void)d;
    flac_job *j = cookie;
    size_t k = j->n - j->at < *bytes ? j->n - j->at : *bytes;
    if (k == 0) {
        *bytes = 0;
        return FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM;
    }
    memcpy(buffer, j->data + j->at, k);
    j->at += k;
    *bytes = k;
    return FLAC__STREAM_DECODER_READ_STATUS_CONTINUE;
}

static void meta_cb(const FLAC__StreamDecoder *d, const FLAC__StreamMetadata *m, void *cookie)
{
    (void)d;
    flac_job *j = cookie;
    if (m->type == FLAC__METADATA_TYPE_STREAMINFO) {
        j->failed |= j->have_info; /* a second one: libsndfile may refuse the stream */
        j->info = m->data.stream_info;
        j->have_info = 1;
    }
}

static void error_cb(const FLAC__StreamDecoder *d, FLAC__StreamDecoderErrorStatus status,
                     void *cookie)
{
    (void)d;
    (void)status;
    ((flac_job *)cookie)->failed = 1; /* libsndfile decides what such a stream gives */
}

/* out[k] = src[k] * norm for k < n: int -> float is exact up to 24 bits, and so is the
 * product with a power of two, as in libsndfile's loop. */
static void convert_mono(const FLAC__int32 *restrict src, size_t n, float norm, float *restrict out)
{
    size_t i = 0;
    for (; i + CONVERT_BLOCK <= n; i += CONVERT_BLOCK)
        for (size_t k = 0; k < CONVERT_BLOCK; k++)
            out[i + k] = (float)src[i + k] * norm;
    for (; i < n; i++)
        out[i] = (float)src[i] * norm;
}

static FLAC__StreamDecoderWriteStatus write_cb(const FLAC__StreamDecoder *d,
                                               const FLAC__Frame *frame,
                                               const FLAC__int32 *const buffer[], void *cookie)
{
    (void)d;
    flac_job *j = cookie;
    const FLAC__FrameHeader *h = &frame->header;
    if (j->failed || !j->out || h->channels != j->info.channels ||
        h->bits_per_sample != j->info.bits_per_sample ||
        (uint64_t)j->decoded + h->blocksize > j->info.total_samples) {
        j->failed = 1;
        return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT;
    }
    const float norm = (float)(1.0 / (double)(1u << (h->bits_per_sample - 1)));
    int64_t n = j->count - j->decoded;
    n = n < 0 ? 0 : (n > (int64_t)h->blocksize ? (int64_t)h->blocksize : n);
    if (n == 0) {
        /* past the frames written: decoded only to check the stream */
    } else if (j->out_ch == 1) {
        convert_mono(buffer[j->channel >= 0 ? j->channel : 0], (size_t)n, norm,
                     j->out + j->decoded);
    } else {
        float *out = j->out + (size_t)j->decoded * (size_t)j->out_ch;
        for (int64_t i = 0; i < n; i++)
            for (int c = 0; c < j->out_ch; c++)
                out[(size_t)i * (size_t)j->out_ch + (size_t)c] = (float)buffer[c][i] * norm;
    }
    j->decoded += h->blocksize;
    return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE;
}

int sharc__flac_decode_direct(const uint8_t *data, size_t n, const sharc__decode_spec *spec,
                              float *out, size_t out_capacity, sharc__audio_info *info,
                              int64_t *frames)
{
    /* Native FLAC only (libsndfile also skips ID3 tags and such; it decides those), and
     * no seeking: a window at an offset goes to libsndfile, which seeks. */
    if (!data || n < 42 || memcmp(data, "fLaC", 4) != 0 || spec->offset_frames != 0)
        return 0;
    FLAC__StreamDecoder *d = FLAC__stream_decoder_new();
    if (!d)
        return 0;
    flac_job j = {.data = data, .n = n, .channel = spec->channel};
    int done = 0;
    /* Every metadata block parsed, as libsndfile has them: a malformed one is an error
     * (then libsndfile decides), not a block skipped by its length. */
    if (!FLAC__stream_decoder_set_metadata_respond_all(d))
        goto out;
    if (FLAC__stream_decoder_init_stream(d, read_cb, NULL, NULL, NULL, NULL, write_cb, meta_cb,
                                         error_cb, &j) != FLAC__STREAM_DECODER_INIT_STATUS_OK)
        goto out;
    if (!FLAC__stream_decoder_process_until_end_of_metadata(d) || j.failed || !j.have_info)
        goto out;
    const FLAC__StreamMetadata_StreamInfo *si = &j.info;
    if (!width_taken(si->bits_per_sample) || si->channels < 1 || si->sample_rate < 1 ||
        si->total_samples == 0 || si->total_samples > (uint64_t)INT64_MAX / 2)
        goto out;
    /* Which frames land in `out` depends only on the channels and the length: the plan of
     * PCM audio, with STREAMINFO's count where a WAV has its data chunk's. */
    const sharc__wav_pcm16 shape = {(int)si->channels, (int)si->sample_rate, 0,
                                    (int64_t)si->total_samples};
    int64_t first, count;
    if (!sharc__pcm16_plan(&shape, spec, out_capacity, &first, &count) || first != 0)
        goto out;
    j.out = out;
    j.count = count;
    j.out_ch = spec->channel >= 0 ? 1 : (int)si->channels;
    int ok = 1;
    if (spec->allow_longer && spec->want_frames >= 0 && count == spec->want_frames) {
        /* A window from the start of longer audio: its frames and no more, as libsndfile
         * reads them (it reads no further, so a long recording is not decoded whole). A
         * window reaching the end, like keeping everything, reads to the end below. */
        while (ok && !j.failed && j.decoded < count &&
               FLAC__stream_decoder_get_state(d) != FLAC__STREAM_DECODER_END_OF_STREAM)
            ok = FLAC__stream_decoder_process_single(d);
        ok = ok && !j.failed && j.decoded >= count;
    } else {
        /* Every frame, past the ones written too: the stream must decode cleanly to the
         * length STREAMINFO gives, as the plan assumed. */
        ok = FLAC__stream_decoder_process_until_end_of_stream(d) && !j.failed &&
             FLAC__stream_decoder_get_state(d) == FLAC__STREAM_DECODER_END_OF_STREAM &&
             (uint64_t)j.decoded == si->total_samples;
    }
    if (!ok)
        goto out;
    sharc__pcm16_finish(&shape, SHARC__CODEC_FLAC, count, spec, out, info, frames);
    done = 1;
out:
    FLAC__stream_decoder_delete(d);
    return done;
}

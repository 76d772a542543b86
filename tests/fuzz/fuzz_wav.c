/*
 * Fuzz target for the canonical PCM16 WAV parser (src/wav.c) and the direct FLAC decoder
 * (src/flac.c), differential: any bytes must parse without reading outside them, and
 * whatever a direct path takes must decode exactly as libsndfile decodes it (same rc,
 * header, frames and samples, bit for bit), and its header must be what libsndfile reports. Parsing
 * it from a head and a tail (sharc__wav_parse_pieces) must give the same answer as parsing it
 * whole. The data chunk's extent (sharc__wav_extent_get) is read without reading outside the
 * bytes, and a canonical file's is its whole data chunk.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode/audio.h"
#include "decode/wav.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_info(const sharc__audio_info *a, const sharc__audio_info *b)
{
    return a->codec == b->codec && a->sampling_rate == b->sampling_rate &&
           a->channels == b->channels && a->frames == b->frames;
}

/* Decode with both paths; abort on any difference. Returns the rc, ib libsndfile's header. */
static int compare(sharc__ctx *ctx, const uint8_t *data, size_t n, const sharc__decode_spec *spec,
                   float *a, float *b, size_t cap, sharc__audio_info *ib_out)
{
    sharc__audio_info ia = {0}, ib = {0};
    int64_t fa = -1, fb = -1;
    int ra = sharc__audio_decode(ctx, data, n, spec, a, cap, &ia, &fa);
    int rb = sharc__audio_decode_sndfile(ctx, data, n, spec, b, cap, &ib, &fb);
    if (ra != rb || fa != fb || !same_info(&ia, &ib))
        abort();
    if (ra == 0 &&
        memcmp(a, b, (size_t)fa * (spec->channel >= 0 ? 1 : (size_t)ia.channels) * sizeof *a))
        abort();
    *ib_out = ib;
    return ra;
}

/* The pieces parse of a head of `head_len` bytes and the matching tail; abort if it differs. */
static void pieces_agree(const uint8_t *data, size_t size, size_t head_len)
{
    sharc__wav_pcm16 whole = {0}, parts = {0};
    const int canonical = sharc__wav_parse(data, size, &whole);
    size_t end = 0;
    head_len = head_len < size ? head_len : size;
    uint8_t *head = malloc(head_len ? head_len : 1);
    if (!head)
        return;
    memcpy(head, data, head_len);
    if (sharc__wav_data_end(head, head_len, size, &end)) {
        if (end > size)
            abort();
        uint8_t *tail = malloc(size - end ? size - end : 1);
        if (tail) {
            memcpy(tail, data + end, size - end);
            const sharc__wav_pieces p = {head, head_len, tail, end, size};
            if (sharc__wav_parse_pieces(&p, &parts) != canonical ||
                (canonical && memcmp(&parts, &whole, sizeof whole)))
                abort();
            free(tail);
        }
    }
    free(head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pieces_agree(data, size, 4096);
    pieces_agree(data, size, size / 2);
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__wav_pcm16 w;
    sharc__ctx_init(&ctx, NULL, &quiet);
    /* An exact-size copy, so a sanitizer build catches any read past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    sharc__wav_extent e;
    const int extent_known = sharc__wav_extent_get(copy, size, size, &e);
    if (extent_known && e.present_bytes > size)
        abort();
    if (!sharc__wav_parse(copy, size, &w)) {
        free(copy);
        return 0;
    }
    /* A canonical file holds its whole data chunk: it is never one cut short. */
    if (!extent_known || e.data_bytes != (uint64_t)w.frames * 2u * (uint64_t)w.channels ||
        e.data_bytes > e.present_bytes || e.block_align != 2u * (unsigned)w.channels)
        abort();
    const size_t samples = (size_t)w.frames * (size_t)w.channels;
    if (w.channels < 1 || w.channels > SHARC__WAV_MAX_CHANNELS || w.sampling_rate < 1 ||
        w.frames < 1 || w.data_offset > size || samples > (size - w.data_offset) / 2)
        abort(); /* the parser promised samples inside the member */
    float *a = malloc((samples + 8) * sizeof *a), *b = malloc((samples + 8) * sizeof *b);
    if (a && b) {
        sharc__decode_spec all = {0, -1, 0, -1, 0, 0};
        sharc__decode_spec tail = {
            w.frames / 2, w.frames - w.frames / 2 + 3, 3, w.channels - 1, 0, 0};
        sharc__audio_info lib, info;
        /* libsndfile must read a canonical file whole, with the header parsed here. */
        if (compare(&ctx, copy, size, &all, a, b, samples + 8, &lib) != 0 ||
            sharc__audio_info_get(&ctx, copy, size, &info) != 0 || !same_info(&info, &lib))
            abort();
        compare(&ctx, copy, size, &tail, a, b, samples + 8, &lib);
    }
    free(a);
    free(b);
    free(copy);
    return 0;
}

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sharc/sharc.h"
#include "testutil.h"
#include "audio.h"
#include "buf.h"
#include "ctx.h"

static sharc__ctx ctx;

static void setup(void)
{
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
}

/* Deterministic PCM16: a sine per channel plus noise, with both extremes present. */
static int16_t *make_pcm(int64_t frames, int channels, int rate)
{
    int16_t *p = malloc((size_t)(frames * channels) * sizeof *p + 1);
    uint32_t x = 12345;
    for (int64_t i = 0; i < frames; i++) {
        for (int c = 0; c < channels; c++) {
            x = x * 1664525u + 1013904223u;
            double s = 12000.0 * sin(2 * M_PI * (440.0 + 110.0 * c) * (double)i / rate);
            p[i * channels + c] = (int16_t)(s + (double)((int)(x >> 20) - 2048));
        }
    }
    if (frames > 3) {
        p[0] = -32768;
        p[channels * 2] = 32767;
    }
    return p;
}

/* A smooth tone for the lossy codecs (noise would dominate their error). */
static int16_t *make_tone(int64_t frames, int channels, int rate)
{
    int16_t *p = malloc((size_t)(frames * channels) * sizeof *p + 1);
    for (int64_t i = 0; i < frames; i++)
        for (int c = 0; c < channels; c++)
            p[i * channels + c] = (int16_t)(10000.0 * sin(2 * M_PI * 440.0 * (double)i / rate));
    return p;
}

static sharc__buf encode(sharc__encoding enc, const int16_t *pcm, int64_t frames, int ch, int rate)
{
    sharc__buf b = {0};
    int rc = sharc__audio_encode(&ctx, enc, pcm, frames, ch, rate, &b);
    ck_assert_msg(rc == 0, "encode %d at %d Hz: %s", (int)enc, rate, ctx.error);
    ck_assert_uint_gt(b.len, 0);
    return b;
}

static int decode(const sharc__buf *b, int64_t offset, int64_t want, int64_t tol, int channel,
                  float *out, size_t cap, sharc__audio_info *info, int64_t *frames)
{
    sharc__decode_spec spec = {offset, want, tol, channel, 0};
    return sharc__audio_decode(&ctx, b->data, b->len, &spec, out, cap, info, frames);
}

static void assert_exact(const float *out, const int16_t *pcm, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (out[i] != (float)pcm[i] / 32768.0f)
            ck_abort_msg("sample %lld: got %.9g, expected %.9g", (long long)i, out[i],
                         pcm[i] / 32768.0);
}

START_TEST(sniff_magic_bytes)
{
    static const uint8_t riff[12] = "RIFF\0\0\0\0WAVE", rf64[12] = "RF64\0\0\0\0WAVE";
    static const uint8_t rifx[12] = "RIFX\0\0\0\0WAVE", avi[12] = "RIFF\0\0\0\0AVI ";
    ck_assert_int_eq(sharc__audio_sniff(riff, 12), SHARC__CODEC_WAV);
    ck_assert_int_eq(sharc__audio_sniff(rf64, 12), SHARC__CODEC_WAV);
    ck_assert_int_eq(sharc__audio_sniff(rifx, 12), SHARC__CODEC_WAV);
    ck_assert_int_eq(sharc__audio_sniff(avi, 12), SHARC__CODEC_UNKNOWN);
    ck_assert_int_eq(sharc__audio_sniff(riff, 11), SHARC__CODEC_UNKNOWN);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"fLaC\0\0\0\x22", 8), SHARC__CODEC_FLAC);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"OggS\0\2", 6), SHARC__CODEC_OGG);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"ID3\4\0\0\0\0\0\0\xff\xfb", 12),
                     SHARC__CODEC_MP3);
    /* An ID3 tag of 2 bytes (syncsafe size), then a FLAC stream. */
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"ID3\3\0\0\0\0\0\2xyfLaC", 16),
                     SHARC__CODEC_FLAC);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"ID3\3\0\0\0\0\0\2xyOggS", 16),
                     SHARC__CODEC_MP3);
    /* MPEG-1 Layer III, 128 kbit/s, 44.1 kHz; MPEG-2 Layer III, 16 kHz. */
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"\xff\xfb\x90\x64", 4), SHARC__CODEC_MP3);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"\xff\xf3\x48\xc4", 4), SHARC__CODEC_MP3);
    /* ADTS AAC (layer 00), bad bitrate, reserved version, reserved rate, no sync. */
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"\xff\xf1\x50\x80", 4),
                     SHARC__CODEC_UNKNOWN);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"\xff\xfb\xf0\x64", 4),
                     SHARC__CODEC_UNKNOWN);
    /* Free-format bitrate (0000) is legal but never written; treat it as noise. */
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"\xff\xfb\x04\x64", 4),
                     SHARC__CODEC_UNKNOWN);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"\xff\xeb\x90\x64", 4),
                     SHARC__CODEC_UNKNOWN);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"\xff\xfb\x9c\x64", 4),
                     SHARC__CODEC_UNKNOWN);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"\xfe\xfb\x90\x64", 4),
                     SHARC__CODEC_UNKNOWN);
    ck_assert_int_eq(sharc__audio_sniff(NULL, 0), SHARC__CODEC_UNKNOWN);
    ck_assert_int_eq(sharc__audio_sniff((const uint8_t *)"fLa", 3), SHARC__CODEC_UNKNOWN);
    ck_assert_str_eq(sharc__codec_name(SHARC__CODEC_FLAC), "flac");
    ck_assert_str_eq(sharc__codec_name(SHARC__CODEC_OGG), "ogg");
    ck_assert_str_eq(sharc__codec_name(SHARC__CODEC_MP3), "mp3");
    ck_assert_str_eq(sharc__codec_name(SHARC__CODEC_WAV), "wav");
    ck_assert_str_eq(sharc__codec_name(SHARC__CODEC_UNKNOWN), "unknown");
}
END_TEST

/* WAV and FLAC at 8k/16k/44.1k, mono and stereo: decoded floats are exactly s / 32768. */
START_TEST(lossless_decode_is_exact)
{
    static const int rates[] = {8000, 16000, 44100};
    static const sharc__encoding encs[] = {SHARC__ENC_WAV_PCM16, SHARC__ENC_FLAC_PCM16};
    static const sharc__codec codecs[] = {SHARC__CODEC_WAV, SHARC__CODEC_FLAC};
    for (int e = 0; e < 2; e++) {
        for (int r = 0; r < 3; r++) {
            for (int ch = 1; ch <= 2; ch++) {
                const int64_t n = rates[r] / 2 + 17;
                int16_t *pcm = make_pcm(n, ch, rates[r]);
                sharc__buf b = encode(encs[e], pcm, n, ch, rates[r]);
                ck_assert_int_eq(sharc__audio_sniff(b.data, b.len), codecs[e]);

                sharc__audio_info info = {0};
                ck_assert_int_eq(sharc__audio_info_get(&ctx, b.data, b.len, &info), 0);
                ck_assert_int_eq(info.codec, codecs[e]);
                ck_assert_int_eq(info.sampling_rate, rates[r]);
                ck_assert_int_eq(info.channels, ch);
                ck_assert_int_eq(info.frames, n);

                float *out = malloc((size_t)(n * ch) * sizeof *out);
                int64_t frames = -1;
                memset(&info, 0, sizeof info);
                ck_assert_int_eq(decode(&b, 0, -1, 0, -1, out, (size_t)(n * ch), &info, &frames),
                                 0);
                ck_assert_int_eq(frames, n);
                ck_assert_int_eq(info.sampling_rate, rates[r]);
                ck_assert_int_eq(info.codec, codecs[e]);
                assert_exact(out, pcm, n * ch);
                ck_assert_float_eq(out[0], -1.0f);

                /* The same with want_frames equal to the length and no tolerance. */
                memset(out, 0, (size_t)(n * ch) * sizeof *out);
                ck_assert_int_eq(decode(&b, 0, n, 0, -1, out, (size_t)(n * ch), NULL, &frames), 0);
                ck_assert_int_eq(frames, n);
                assert_exact(out, pcm, n * ch);
                free(out);
                free(pcm);
                sharc__buf_free(&ctx, &b);
            }
        }
    }
}
END_TEST

START_TEST(offset_slices_exactly)
{
    const int64_t n = 16000;
    int16_t *pcm = make_pcm(n, 2, 16000);
    static const sharc__encoding encs[] = {SHARC__ENC_WAV_PCM16, SHARC__ENC_FLAC_PCM16};
    float *out = malloc((size_t)n * 2 * sizeof *out);
    for (int e = 0; e < 2; e++) {
        sharc__buf b = encode(encs[e], pcm, n, 2, 16000);
        int64_t frames = 0;
        /* A window inside longer audio. */
        sharc__decode_spec win = {4321, 1000, 0, -1, 1};
        ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, b.len, &win, out, 2000, NULL, &frames),
                         0);
        ck_assert_int_eq(frames, 1000);
        assert_exact(out, pcm + 4321 * 2, 2000);
        /* Without allow_longer the rest of the audio must match want_frames. */
        ck_assert_int_eq(decode(&b, 4321, 1000, 100, -1, out, 2000, NULL, &frames),
                         SHARC_ERR_AUDIO_MISMATCH);
        ck_assert_ptr_nonnull(strstr(ctx.error, "decoded more than 1100 frames, expected 1000"));
        /* To the end, by count and with want_frames. */
        ck_assert_int_eq(decode(&b, 15000, -1, 0, -1, out, (size_t)n * 2, NULL, &frames), 0);
        ck_assert_int_eq(frames, 1000);
        assert_exact(out, pcm + 15000 * 2, 2000);
        ck_assert_int_eq(decode(&b, 15000, 1000, 0, 1, out, 1000, NULL, &frames), 0);
        for (int i = 0; i < 1000; i++)
            ck_assert_float_eq(out[i], pcm[(15000 + i) * 2 + 1] / 32768.0f);
        /* Offset at or past the end. */
        ck_assert_int_eq(decode(&b, n, -1, 0, -1, out, (size_t)n * 2, NULL, &frames), 0);
        ck_assert_int_eq(frames, 0);
        ck_assert_int_eq(decode(&b, n + 5, 10, 0, -1, out, (size_t)n * 2, NULL, &frames),
                         SHARC_ERR_AUDIO_MISMATCH);
        ck_assert_ptr_nonnull(strstr(ctx.error, "decoded 0 frames, expected 10"));
        sharc__buf_free(&ctx, &b);
    }
    free(out);
    free(pcm);
}
END_TEST

START_TEST(trim_and_reflect_pad)
{
    const int64_t n = 1000;
    int16_t *pcm = make_pcm(n, 2, 8000);
    sharc__buf b = encode(SHARC__ENC_FLAC_PCM16, pcm, n, 2, 8000);
    float out[2 * 1010];
    int64_t frames = 0;
    /* 3 frames too many, tolerance 5: trimmed. */
    ck_assert_int_eq(decode(&b, 0, n - 3, 5, -1, out, 2 * (n - 3), NULL, &frames), 0);
    ck_assert_int_eq(frames, n - 3);
    assert_exact(out, pcm, 2 * (n - 3));
    /* 2 frames short: [.., x[n-1], x[n-2], x[n-3]] per channel. */
    ck_assert_int_eq(decode(&b, 0, n + 2, 5, -1, out, 2 * (n + 2), NULL, &frames), 0);
    ck_assert_int_eq(frames, n + 2);
    assert_exact(out, pcm, 2 * n);
    for (int c = 0; c < 2; c++) {
        ck_assert_float_eq(out[2 * n + c], pcm[2 * (n - 2) + c] / 32768.0f);
        ck_assert_float_eq(out[2 * (n + 1) + c], pcm[2 * (n - 3) + c] / 32768.0f);
    }
    /* Same through channel selection. */
    ck_assert_int_eq(decode(&b, 0, n + 2, 5, 1, out, n + 2, NULL, &frames), 0);
    ck_assert_float_eq(out[n - 1], pcm[2 * (n - 1) + 1] / 32768.0f);
    ck_assert_float_eq(out[n], pcm[2 * (n - 2) + 1] / 32768.0f);
    ck_assert_float_eq(out[n + 1], pcm[2 * (n - 3) + 1] / 32768.0f);
    sharc__buf_free(&ctx, &b);
    free(pcm);
}
END_TEST

/* numpy.pad([a, b, c], (0, 9), mode="reflect") == [a b c b a b c b a b c b]. */
START_TEST(reflect_pad_longer_than_signal)
{
    const int16_t three[3] = {100, 200, 300}, one[1] = {-7};
    const int expect3[12] = {0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1};
    float out[12];
    int64_t frames = 0;
    sharc__buf b = encode(SHARC__ENC_WAV_PCM16, three, 3, 1, 16000);
    ck_assert_int_eq(decode(&b, 0, 12, 9, -1, out, 12, NULL, &frames), 0);
    ck_assert_int_eq(frames, 12);
    for (int i = 0; i < 12; i++)
        ck_assert_float_eq(out[i], three[expect3[i]] / 32768.0f);
    /* Tolerance 8 < 9 missing frames. */
    ck_assert_int_eq(decode(&b, 0, 12, 8, -1, out, 12, NULL, &frames), SHARC_ERR_AUDIO_MISMATCH);
    sharc__buf_free(&ctx, &b);

    /* A one-frame signal is repeated (numpy's singleton rule). */
    b = encode(SHARC__ENC_WAV_PCM16, one, 1, 1, 16000);
    ck_assert_int_eq(decode(&b, 0, 4, 3, -1, out, 12, NULL, &frames), 0);
    ck_assert_int_eq(frames, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(out[i], -7 / 32768.0f);
    sharc__buf_free(&ctx, &b);

    /* Nothing decoded is never padded, whatever the tolerance. */
    b = encode(SHARC__ENC_WAV_PCM16, one, 0, 1, 16000);
    ck_assert_int_eq(decode(&b, 0, 4, 100, -1, out, 12, NULL, &frames), SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_ptr_nonnull(strstr(ctx.error, "decoded 0 frames, expected 4"));
    ck_assert_int_eq(decode(&b, 0, 0, 0, -1, out, 12, NULL, &frames), 0);
    ck_assert_int_eq(frames, 0);
    sharc__buf_free(&ctx, &b);
}
END_TEST

START_TEST(mismatch_beyond_tolerance)
{
    const int64_t n = 8000;
    int16_t *pcm = make_pcm(n, 1, 16000);
    sharc__buf b = encode(SHARC__ENC_FLAC_PCM16, pcm, n, 1, 16000);
    float *out = malloc(9000 * sizeof *out);
    int64_t frames = 0;
    ck_assert_int_eq(decode(&b, 0, 8100, 99, -1, out, 9000, NULL, &frames),
                     SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_str_eq(ctx.error,
                     "flac audio: decoded 8000 frames, expected 8100 (tolerance 99, offset 0)");
    ck_assert_int_eq(decode(&b, 0, 8100, 100, -1, out, 9000, NULL, &frames), 0);
    ck_assert_int_eq(frames, 8100);
    ck_assert_int_eq(decode(&b, 0, 7900, 99, -1, out, 9000, NULL, &frames),
                     SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_str_eq(ctx.error,
                     "flac audio: decoded more than 7999 frames, expected 7900 (tolerance 99)");
    ck_assert_int_eq(decode(&b, 0, 7900, 100, -1, out, 9000, NULL, &frames), 0);
    assert_exact(out, pcm, 7900);
    free(out);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}
END_TEST

START_TEST(channel_selection)
{
    const int64_t n = 44100; /* several staging chunks */
    int16_t *pcm = make_pcm(n, 3, 44100);
    sharc__buf b = encode(SHARC__ENC_WAV_PCM16, pcm, n, 3, 44100);
    float *out = malloc((size_t)n * sizeof *out);
    int64_t frames = 0;
    sharc__audio_info info = {0};
    for (int c = 0; c < 3; c++) {
        ck_assert_int_eq(decode(&b, 0, -1, 0, c, out, (size_t)n, &info, &frames), 0);
        ck_assert_int_eq(frames, n);
        ck_assert_int_eq(info.channels, 3);
        for (int64_t i = 0; i < n; i++)
            if (out[i] != pcm[i * 3 + c] / 32768.0f)
                ck_abort_msg("channel %d frame %lld", c, (long long)i);
    }
    ck_assert_int_eq(decode(&b, 0, -1, 0, 3, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_str_eq(ctx.error, "channel 3 requested, audio has 3");
    /* One channel needs room for one channel only; all three do not fit. */
    ck_assert_int_eq(decode(&b, 0, -1, 0, -1, out, (size_t)n, NULL, &frames), SHARC_ERR_TOO_LARGE);
    free(out);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}
END_TEST

/* Energy of the decoded signal, and its best normalised correlation with the original. */
static void compare_lossy(const float *dec, int64_t nd, const int16_t *pcm, int64_t n,
                          double *energy_ratio, double *corr)
{
    double e_ref = 0, e_dec = 0;
    int64_t m = nd < n ? nd : n;
    for (int64_t i = 0; i < m; i++) {
        e_ref += (pcm[i] / 32768.0) * (pcm[i] / 32768.0);
        e_dec += (double)dec[i] * dec[i];
    }
    *energy_ratio = e_dec / e_ref;
    *corr = -1;
    const int64_t from = 4000, len = 4000;
    for (int lag = -1500; lag <= 1500; lag++) {
        double xy = 0, xx = 0, yy = 0;
        for (int64_t i = from; i < from + len; i++) {
            double x = pcm[i] / 32768.0, y = dec[i + lag];
            xy += x * y;
            xx += x * x;
            yy += y * y;
        }
        double c = xy / sqrt(xx * yy + 1e-30);
        if (c > *corr)
            *corr = c;
    }
}

static void check_lossy(sharc__encoding enc, int rate, int64_t delay_tol)
{
    const int64_t n = rate; /* one second */
    int16_t *pcm = make_tone(n, 1, rate);
    sharc__buf b = {0};
    int rc = sharc__audio_encode(&ctx, enc, pcm, n, 1, rate, &b);
    if (enc == SHARC__ENC_MP3 && rc == SHARC_ERR_UNSUPPORTED) {
        printf("note: this libsndfile cannot write MP3 (%s); MP3 decode not tested\n", ctx.error);
        free(pcm);
        return;
    }
    ck_assert_msg(rc == 0, "encode %d: %s", (int)enc, ctx.error);
    sharc__codec want_codec = enc == SHARC__ENC_MP3 ? SHARC__CODEC_MP3 : SHARC__CODEC_OGG;
    ck_assert_int_eq(sharc__audio_sniff(b.data, b.len), want_codec);

    size_t cap = (size_t)(2 * n);
    float *out = malloc(cap * sizeof *out);
    int64_t frames = 0;
    sharc__audio_info info = {0};
    ck_assert_msg(decode(&b, 0, -1, 0, -1, out, cap, &info, &frames) == 0, "%s", ctx.error);
    ck_assert_int_eq(info.codec, want_codec);
    ck_assert_int_eq(info.sampling_rate, rate);
    ck_assert_int_eq(info.channels, 1);
    ck_assert_msg(llabs(frames - n) <= delay_tol, "codec %d decoded %lld of %lld frames", (int)enc,
                  (long long)frames, (long long)n);
    double energy, corr;
    compare_lossy(out, frames, pcm, n, &energy, &corr);
    ck_assert_msg(energy > 0.8 && energy < 1.2, "codec %d energy ratio %g", (int)enc, energy);
    ck_assert_msg(corr > 0.95, "codec %d correlation %g", (int)enc, corr);

    /* Metadata length within the codec delay tolerance: exactly n frames come out. */
    ck_assert_int_eq(decode(&b, 0, n, delay_tol, -1, out, cap, NULL, &frames), 0);
    ck_assert_int_eq(frames, n);

    /* Offsets decode and discard: the same samples as a full decode, shifted. */
    float *full = malloc(cap * sizeof *full);
    int64_t nfull = 0, nrest = 0;
    ck_assert_int_eq(decode(&b, 0, -1, 0, -1, full, cap, NULL, &nfull), 0);
    ck_assert_int_eq(decode(&b, 1234, -1, 0, 0, out, cap, NULL, &nrest), 0);
    ck_assert_int_eq(nrest, nfull - 1234);
    for (int64_t i = 0; i < nrest; i++)
        if (out[i] != full[1234 + i])
            ck_abort_msg("codec %d offset frame %lld differs", (int)enc, (long long)i);
    free(full);
    free(out);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}

START_TEST(opus_decodes_close)
{
    check_lossy(SHARC__ENC_OPUS, 48000, 960);
    check_lossy(SHARC__ENC_OPUS, 16000, 320);
}
END_TEST

START_TEST(vorbis_decodes_close)
{
    check_lossy(SHARC__ENC_VORBIS, 16000, 1024);
    check_lossy(SHARC__ENC_VORBIS, 44100, 2048);
}
END_TEST

START_TEST(mp3_decodes_close)
{
    check_lossy(SHARC__ENC_MP3, 16000, 1152);
    check_lossy(SHARC__ENC_MP3, 44100, 2304);
}
END_TEST

/* An ID3v2 tag of `body` zero bytes followed by `b`, in malloc'd memory. */
static uint8_t *with_id3(const sharc__buf *b, size_t body, size_t *n)
{
    uint8_t *p = calloc(1, 10 + body + b->len);
    memcpy(p, "ID3\4\0\0", 6);
    p[8] = (uint8_t)(body >> 7);
    p[9] = (uint8_t)(body & 0x7f);
    memcpy(p + 10 + body, b->data, b->len);
    *n = 10 + body + b->len;
    return p;
}

START_TEST(id3_tagged_streams)
{
    const int64_t n = 3000;
    int16_t *pcm = make_pcm(n, 1, 16000);
    sharc__buf flac = encode(SHARC__ENC_FLAC_PCM16, pcm, n, 1, 16000);
    size_t len = 0;
    uint8_t *tagged = with_id3(&flac, 300, &len);
    ck_assert_int_eq(sharc__audio_sniff(tagged, len), SHARC__CODEC_FLAC);
    float *out = malloc((size_t)n * sizeof *out);
    int64_t frames = 0;
    sharc__decode_spec spec = {0, n, 0, -1, 0};
    sharc__audio_info info = {0};
    ck_assert_msg(sharc__audio_decode(&ctx, tagged, len, &spec, out, (size_t)n, &info, &frames) ==
                      0,
                  "%s", ctx.error);
    ck_assert_int_eq(info.codec, SHARC__CODEC_FLAC);
    assert_exact(out, pcm, n);
    free(tagged);

    /* libsndfile writes bare MPEG frames; a tagged copy decodes to the same samples. */
    sharc__buf mp3 = {0};
    if (sharc__audio_encode(&ctx, SHARC__ENC_MP3, pcm, n, 1, 16000, &mp3) == 0) {
        ck_assert_int_eq(sharc__audio_sniff(mp3.data, mp3.len), SHARC__CODEC_MP3);
        ck_assert_int_eq(mp3.data[0], 0xFF);
        float *ref = malloc(2 * (size_t)n * sizeof *ref);
        float *got = malloc(2 * (size_t)n * sizeof *got);
        int64_t nref = 0, ngot = 0;
        spec.want_frames = -1;
        ck_assert_int_eq(
            sharc__audio_decode(&ctx, mp3.data, mp3.len, &spec, ref, 2 * (size_t)n, NULL, &nref),
            0);
        tagged = with_id3(&mp3, 1000, &len);
        ck_assert_int_eq(sharc__audio_sniff(tagged, len), SHARC__CODEC_MP3);
        ck_assert_int_eq(
            sharc__audio_decode(&ctx, tagged, len, &spec, got, 2 * (size_t)n, &info, &ngot), 0);
        ck_assert_int_eq(info.codec, SHARC__CODEC_MP3);
        ck_assert_int_eq(ngot, nref);
        ck_assert_int_eq(memcmp(got, ref, (size_t)nref * sizeof *ref), 0);
        free(tagged);
        free(ref);
        free(got);
    } else {
        printf("note: this libsndfile cannot write MP3; tagged MP3 not tested\n");
    }
    sharc__buf_free(&ctx, &mp3);
    sharc__buf_free(&ctx, &flac);
    free(out);
    free(pcm);
}
END_TEST

/* Stereo Opus: channel selection picks the same samples as the interleaved decode. */
START_TEST(lossy_stereo_channel_selection)
{
    const int64_t n = 24000;
    int16_t *pcm = make_pcm(n, 2, 48000);
    sharc__buf b = encode(SHARC__ENC_OPUS, pcm, n, 2, 48000);
    float *all = malloc(2 * (size_t)n * sizeof *all), *one = malloc((size_t)n * sizeof *one);
    int64_t nall = 0, none = 0;
    sharc__audio_info info = {0};
    ck_assert_int_eq(decode(&b, 0, n, 960, -1, all, 2 * (size_t)n, &info, &nall), 0);
    ck_assert_int_eq(info.channels, 2);
    ck_assert_int_eq(nall, n);
    ck_assert_int_eq(decode(&b, 0, n, 960, 1, one, (size_t)n, NULL, &none), 0);
    ck_assert_int_eq(none, n);
    for (int64_t i = 0; i < n; i++)
        if (one[i] != all[2 * i + 1])
            ck_abort_msg("frame %lld", (long long)i);
    free(all);
    free(one);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}
END_TEST

START_TEST(garbage_and_empty_input)
{
    uint8_t junk[4096];
    uint32_t x = 99;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (uint8_t)(x >> 16);
    }
    float out[64];
    int64_t frames = 0;
    sharc__decode_spec spec = {0, -1, 0, -1, 0};
    sharc__audio_info info;

    memcpy(junk, "fLaC", 4);
    ck_assert_int_eq(sharc__audio_decode(&ctx, junk, sizeof junk, &spec, out, 64, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_msg(!strncmp(ctx.error, "flac audio: ", 12), "%s", ctx.error);
    ck_assert_int_eq(sharc__audio_info_get(&ctx, junk, sizeof junk, &info), SHARC_ERR_DECODE);

    memcpy(junk, "OggS", 4);
    ck_assert_int_eq(sharc__audio_decode(&ctx, junk, sizeof junk, &spec, out, 64, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_msg(!strncmp(ctx.error, "ogg audio: ", 11), "%s", ctx.error);

    memcpy(junk, "RIFF\xff\xff\xff\x7fWAVE", 12);
    ck_assert_int_eq(sharc__audio_decode(&ctx, junk, sizeof junk, &spec, out, 64, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_msg(!strncmp(ctx.error, "wav audio: ", 11), "%s", ctx.error);

    memcpy(junk, "junk", 4);
    ck_assert_int_eq(sharc__audio_decode(&ctx, junk, sizeof junk, &spec, out, 64, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_msg(!strncmp(ctx.error, "unknown audio: cannot open: ", 28), "%s", ctx.error);

    ck_assert_int_eq(sharc__audio_decode(&ctx, junk, 0, &spec, out, 64, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, "empty audio data (0 bytes)");
    ck_assert_int_eq(sharc__audio_info_get(&ctx, NULL, 0, &info), SHARC_ERR_DECODE);
    ck_assert_int_eq(
        sharc__audio_decode(&ctx, (const uint8_t *)"fLaC", 4, &spec, out, 64, NULL, &frames),
        SHARC_ERR_DECODE);
}
END_TEST

START_TEST(truncated_flac_is_reported)
{
    const int64_t n = 16000;
    int16_t *pcm = make_pcm(n, 1, 16000);
    sharc__buf b = encode(SHARC__ENC_FLAC_PCM16, pcm, n, 1, 16000);
    float *out = malloc((size_t)n * sizeof *out);
    int64_t frames = -1;
    size_t cuts[] = {b.len * 6 / 10, b.len / 2 + 3, b.len - 1, 200, 42};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        sharc__decode_spec spec = {0, n, 160, -1, 0};
        int rc = sharc__audio_decode(&ctx, b.data, cuts[k], &spec, out, (size_t)n, NULL, &frames);
        ck_assert_msg(rc == SHARC_ERR_AUDIO_MISMATCH || rc == SHARC_ERR_DECODE,
                      "cut at %zu of %zu: rc %d", cuts[k], b.len, rc);
        ck_assert_ptr_nonnull(strstr(ctx.error, "flac audio: "));
        /* Keeping everything never returns the full length of the intact stream. */
        spec.want_frames = -1;
        rc = sharc__audio_decode(&ctx, b.data, cuts[k], &spec, out, (size_t)n, NULL, &frames);
        ck_assert(rc == SHARC_ERR_DECODE || (rc == 0 && frames < n));
        if (rc == 0)
            assert_exact(out, pcm, frames);
        /* Seeking into the missing part fails cleanly too. */
        spec.offset_frames = n / 2;
        spec.want_frames = n / 2;
        rc = sharc__audio_decode(&ctx, b.data, cuts[k], &spec, out, (size_t)n, NULL, &frames);
        ck_assert_msg(rc == SHARC_ERR_AUDIO_MISMATCH || rc == SHARC_ERR_DECODE,
                      "offset, cut at %zu: rc %d", cuts[k], rc);
        ck_assert_ptr_nonnull(strstr(ctx.error, "flac audio: "));
    }
    free(out);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}
END_TEST

START_TEST(capacity_is_never_exceeded)
{
    const int64_t n = 5000;
    int16_t *pcm = make_pcm(n, 2, 16000);
    sharc__buf flac = encode(SHARC__ENC_FLAC_PCM16, pcm, n, 2, 16000);
    sharc__buf wav = encode(SHARC__ENC_WAV_PCM16, pcm, n, 2, 16000);
    const sharc__buf *bufs[] = {&flac, &wav};
    for (int k = 0; k < 2; k++) {
        /* Exactly sized heap blocks, so that ASan sees any write past them. */
        size_t cap = 2 * (size_t)n - 3;
        float *out = malloc(cap * sizeof *out);
        int64_t frames = 0;
        ck_assert_int_eq(decode(bufs[k], 0, -1, 0, -1, out, cap, NULL, &frames),
                         SHARC_ERR_TOO_LARGE);
        ck_assert_ptr_nonnull(strstr(ctx.error, "more than 4998 frames x 2 channels"));
        ck_assert_int_eq(decode(bufs[k], 0, n, 0, -1, out, cap, NULL, &frames),
                         SHARC_ERR_TOO_LARGE);
        ck_assert_str_eq(ctx.error, "5000 frames x 2 channels do not fit in 9997 floats");
        /* Padding must not run past the buffer either. */
        ck_assert_int_eq(decode(bufs[k], 0, n + 10, 100, -1, out, cap, NULL, &frames),
                         SHARC_ERR_TOO_LARGE);
        free(out);
        /* Room for exactly the audio works; a sentinel after it stays untouched. */
        out = malloc((2 * (size_t)n + 1) * sizeof *out);
        out[2 * n] = 12345.0f;
        ck_assert_int_eq(decode(bufs[k], 0, -1, 0, -1, out, 2 * (size_t)n, NULL, &frames), 0);
        ck_assert_int_eq(frames, n);
        ck_assert_float_eq(out[2 * n], 12345.0f);
        assert_exact(out, pcm, 2 * n);
        free(out);
    }
    sharc__buf_free(&ctx, &flac);
    sharc__buf_free(&ctx, &wav);
    free(pcm);
}
END_TEST

/* A WAV whose data chunk claims 1000 bytes more than the member holds. */
START_TEST(wav_header_longer_than_data)
{
    const int64_t n = 4000;
    int16_t *pcm = make_pcm(n, 1, 16000);
    sharc__buf b = encode(SHARC__ENC_WAV_PCM16, pcm, n, 1, 16000);
    size_t len = b.len - 1000;
    float *out = malloc((size_t)n * sizeof *out);
    int64_t frames = 0;
    sharc__decode_spec spec = {0, -1, 0, -1, 0};
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, len, &spec, out, (size_t)n, NULL, &frames),
                     0);
    ck_assert_int_eq(frames, n - 500);
    assert_exact(out, pcm, n - 500);
    spec.want_frames = n;
    spec.tolerance_frames = 100;
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, len, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_str_eq(ctx.error,
                     "wav audio: decoded 3500 frames, expected 4000 (tolerance 100, offset 0)");
    /* Cut inside the header itself. */
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, 30, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_DECODE);
    free(out);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}
END_TEST

START_TEST(encode_rejects_bad_arguments)
{
    sharc__buf b = {0};
    int16_t s[4] = {0};
    ck_assert_int_eq(sharc__audio_encode(&ctx, SHARC__ENC_WAV_PCM16, s, 4, 0, 16000, &b),
                     SHARC_ERR(EINVAL));
    ck_assert_int_eq(sharc__audio_encode(&ctx, SHARC__ENC_WAV_PCM16, NULL, 4, 1, 16000, &b),
                     SHARC_ERR(EINVAL));
    /* Opus only runs at 8/12/16/24/48 kHz. */
    int rc = sharc__audio_encode(&ctx, SHARC__ENC_OPUS, s, 4, 1, 44100, &b);
    ck_assert_int_eq(rc, SHARC_ERR_UNSUPPORTED);
    ck_assert_uint_eq(b.len, 0);
    sharc__buf_free(&ctx, &b);
}
END_TEST

static int logged;
static char last_log[512];
static void capture(void *cookie, sharc_log_level level, const char *fmt, va_list ap)
{
    (void)cookie;
    (void)level;
    logged++;
    vsnprintf(last_log, sizeof last_log, fmt, ap);
}

/* libsndfile's own text is logged once; mismatches are left to the caller to report. */
START_TEST(libsndfile_errors_logged_once)
{
    sharc_logger log = {NULL, capture, SHARC_LOG_DEBUG};
    sharc__ctx_init(&ctx, NULL, &log);
    uint8_t junk[256];
    memset(junk, 0x5a, sizeof junk);
    memcpy(junk, "fLaC", 4);
    float out[16];
    int64_t frames = 0;
    sharc__decode_spec spec = {0, -1, 0, -1, 0};
    logged = 0;
    ck_assert_int_eq(sharc__audio_decode(&ctx, junk, sizeof junk, &spec, out, 16, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_int_eq(logged, 1);
    ck_assert_str_eq(last_log, ctx.error);
    /* "flac audio: cannot open: " followed by libsndfile's sentence. */
    ck_assert_uint_gt(strlen(ctx.error), strlen("flac audio: cannot open: ") + 5);

    const int16_t pcm[4] = {1, 2, 3, 4};
    sharc__buf b = encode(SHARC__ENC_WAV_PCM16, pcm, 4, 1, 8000);
    logged = 0;
    ck_assert_int_eq(decode(&b, 0, 100, 0, -1, out, 16, NULL, &frames), SHARC_ERR_TOO_LARGE);
    ck_assert_int_eq(decode(&b, 0, 10, 0, -1, out, 16, NULL, &frames), SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_int_eq(logged, 0);
    sharc__buf_free(&ctx, &b);
}
END_TEST

static int alloc_budget;
static void *limited_alloc(void *cookie, size_t size, size_t align)
{
    (void)cookie;
    (void)align;
    if (alloc_budget-- <= 0)
        return NULL;
    return malloc(size);
}

START_TEST(encode_reports_allocation_failure)
{
    sharc_allocator a = {NULL, limited_alloc, tu_free};
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    int16_t *pcm = make_pcm(8000, 1, 8000);
    /* Every allocation failure is reported as ENOMEM until the budget suffices. */
    int budget = 0, rc;
    for (;; budget++) {
        sharc__ctx_init(&ctx, &a, &quiet);
        sharc__buf b = {0};
        alloc_budget = budget;
        rc = sharc__audio_encode(&ctx, SHARC__ENC_WAV_PCM16, pcm, 8000, 1, 8000, &b);
        if (rc == 0) {
            ck_assert_uint_eq(b.len, 44 + 16000);
            sharc__buf_free(&ctx, &b);
            break;
        }
        ck_assert_msg(rc == SHARC_ERR(ENOMEM), "budget %d: rc %d (%s)", budget, rc, ctx.error);
        ck_assert_uint_eq(b.len, 0);
        sharc__buf_free(&ctx, &b);
        ck_assert_int_lt(budget, 100);
    }
    ck_assert_int_gt(budget, 0);
    free(pcm);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("audio");
    TCase *tc = tcase_create("lossless");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, sniff_magic_bytes);
    tcase_add_test(tc, lossless_decode_is_exact);
    tcase_add_test(tc, offset_slices_exactly);
    tcase_add_test(tc, trim_and_reflect_pad);
    tcase_add_test(tc, reflect_pad_longer_than_signal);
    tcase_add_test(tc, mismatch_beyond_tolerance);
    tcase_add_test(tc, channel_selection);
    suite_add_tcase(s, tc);

    tc = tcase_create("lossy");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, opus_decodes_close);
    tcase_add_test(tc, vorbis_decodes_close);
    tcase_add_test(tc, mp3_decodes_close);
    tcase_add_test(tc, id3_tagged_streams);
    tcase_add_test(tc, lossy_stereo_channel_selection);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, garbage_and_empty_input);
    tcase_add_test(tc, truncated_flac_is_reported);
    tcase_add_test(tc, capacity_is_never_exceeded);
    tcase_add_test(tc, wav_header_longer_than_data);
    tcase_add_test(tc, encode_rejects_bad_arguments);
    tcase_add_test(tc, libsndfile_errors_logged_once);
    tcase_add_test(tc, encode_reports_allocation_failure);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

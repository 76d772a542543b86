#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sndfile.h>

#include "sharc/sharc.h"
#include "testutil.h"
#include "decode/audio.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "decode/wav.h"

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
    sharc__decode_spec spec = {offset, want, tol, channel, 0, 0};
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
        sharc__decode_spec win = {4321, 1000, 0, -1, 1, 0};
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
    sharc__decode_spec spec = {0, n, 0, -1, 0, 0};
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
    sharc__decode_spec spec = {0, -1, 0, -1, 0, 0};
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
        sharc__decode_spec spec = {0, n, 160, -1, 0, 0};
        int rc = sharc__audio_decode(&ctx, b.data, cuts[k], &spec, out, (size_t)n, NULL, &frames);
        ck_assert_msg(rc == SHARC_ERR_AUDIO_MISMATCH || rc == SHARC_ERR_DECODE,
                      "cut at %zu of %zu: rc %d", cuts[k], b.len, rc);
        ck_assert_ptr_nonnull(strstr(ctx.error, "flac audio: "));
        /* Keeping everything is no shorter cut either: STREAMINFO gives the length. */
        spec.want_frames = -1;
        rc = sharc__audio_decode(&ctx, b.data, cuts[k], &spec, out, (size_t)n, NULL, &frames);
        ck_assert_msg(rc == SHARC_ERR_DECODE, "cut at %zu of %zu: rc %d", cuts[k], b.len, rc);
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

/*
 * A WAV whose data chunk claims 1000 bytes more than the member holds was cut short: an
 * error however it is read (all of it, a length within tolerance, a window, its header),
 * never a shorter or padded cut.
 */
START_TEST(wav_header_longer_than_data)
{
    const int64_t n = 4000;
    int16_t *pcm = make_pcm(n, 1, 16000);
    sharc__buf b = encode(SHARC__ENC_WAV_PCM16, pcm, n, 1, 16000);
    size_t len = b.len - 1000;
    float *out = malloc((size_t)n * sizeof *out);
    int64_t frames = 0;
    const char *cut_short = "wav audio is cut short: its header says 4000 samples (8000 bytes), "
                            "the member holds 3500 (7000 bytes)";
    sharc__decode_spec spec = {0, -1, 0, -1, 0, 0};
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, len, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, cut_short);
    spec.want_frames = n;
    spec.tolerance_frames = n;
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, len, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, cut_short);
    /* A window inside the samples there are still comes from a member cut short. */
    spec = (sharc__decode_spec){100, 1000, 0, -1, 1, 0};
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, len, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, cut_short);
    sharc__audio_info info;
    ck_assert_int_eq(sharc__audio_info_get(&ctx, b.data, len, &info), SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, cut_short);
    /* A data chunk size of 0xFFFFFFFF, as a writer that could not seek back leaves it. */
    sharc__buf whole = encode(SHARC__ENC_WAV_PCM16, pcm, n, 1, 16000);
    sharc__wav_pcm16 w;
    ck_assert_int_eq(sharc__wav_parse(whole.data, whole.len, &w), 1);
    memset(whole.data + w.data_offset - 4, 0xFF, 4);
    spec = (sharc__decode_spec){0, n, 0, -1, 0, 0};
    ck_assert_int_eq(
        sharc__audio_decode(&ctx, whole.data, whole.len, &spec, out, (size_t)n, NULL, &frames),
        SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, "wav audio is cut short: its header says 2147483647 samples "
                                "(4294967295 bytes), the member holds 4000 (8000 bytes)");
    /* A data chunk of no samples is no cut of 4000. */
    memset(whole.data + w.data_offset - 4, 0, 4);
    ck_assert_int_eq(
        sharc__audio_decode(&ctx, whole.data, whole.len, &spec, out, (size_t)n, NULL, &frames),
        SHARC_ERR_AUDIO_MISMATCH);
    ck_assert_str_eq(ctx.error,
                     "wav audio: decoded 0 frames, expected 4000 (tolerance 0, offset 0)");
    sharc__buf_free(&ctx, &whole);
    /* Cut inside the header itself. */
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, 30, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_DECODE);
    free(out);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}
END_TEST

/* The Ogg pages of `b`: the byte offsets of their "OggS", at most `max`. */
static size_t ogg_pages(const sharc__buf *b, size_t *at, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i + 27 <= b->len && n < max; i++)
        if (memcmp(b->data + i, "OggS", 4) == 0)
            at[n++] = i;
    return n;
}

/* Flip a byte of the payload of the Ogg page at `at`: the page then fails its CRC. */
static void damage_page(sharc__buf *b, size_t at)
{
    size_t body = at + 27 + b->data[at + 26];
    ck_assert_uint_lt(body + 3, b->len);
    b->data[body + 3] ^= 0x55;
}

/*
 * An Opus stream whose last page fails its CRC has no length (libsndfile finds none) and
 * decodes short; one with a damaged page inside decodes less than its length. Both are
 * decode errors, not cuts padded back to their metadata's length.
 */
START_TEST(damaged_ogg_pages_are_errors)
{
    const int64_t n = 5 * 48000;
    int16_t *pcm = make_tone(n, 1, 48000);
    sharc__buf b = encode(SHARC__ENC_OPUS, pcm, n, 1, 48000);
    size_t pages[256];
    size_t np = ogg_pages(&b, pages, 256);
    ck_assert_uint_ge(np, 6);
    float *out = malloc((size_t)n * sizeof *out);
    int64_t frames;
    sharc__audio_info info;
    sharc__decode_spec spec = {0, n, n, -1, 0, 0};
    /* Intact, it decodes whole. */
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, b.len, &spec, out, (size_t)n, NULL, &frames),
                     0);
    ck_assert_int_eq(sharc__audio_info_get(&ctx, b.data, b.len, &info), 0);
    ck_assert_int_eq(info.frames, n);

    damage_page(&b, pages[np - 1]);
    const char *no_end =
        "ogg audio: no length in its last page: the end of the stream is missing or damaged";
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, b.len, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, no_end);
    spec.want_frames = -1;
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, b.len, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, no_end);
    ck_assert_int_eq(sharc__audio_info_get(&ctx, b.data, b.len, &info), SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error, no_end);
    damage_page(&b, pages[np - 1]); /* repaired */

    damage_page(&b, pages[np / 2]);
    spec.want_frames = n;
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, b.len, &spec, out, (size_t)n, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_msg(strstr(ctx.error, "ogg audio: decoding gave ") == ctx.error &&
                      strstr(ctx.error, " samples of the 240000 its header gives: part of the "
                                        "stream is missing or damaged") != NULL,
                  "%s", ctx.error);
    free(out);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}
END_TEST

/* A float32 WAV of `frames` x `channels` samples. */
static sharc__buf float_wav(const float *samples, int64_t frames, int channels, int rate)
{
    const uint32_t data = (uint32_t)(frames * channels * 4), align = 4u * (uint32_t)channels;
    uint8_t h[44];
    memcpy(h, "RIFF", 4);
    const uint32_t riff = 36 + data, fmt_size = 16, byte_rate = (uint32_t)rate * align;
    const uint16_t tag = 3, ch = (uint16_t)channels, blk = (uint16_t)align, bits = 32;
    memcpy(h + 4, &riff, 4);
    memcpy(h + 8, "WAVEfmt ", 8);
    memcpy(h + 16, &fmt_size, 4);
    memcpy(h + 20, &tag, 2);
    memcpy(h + 22, &ch, 2);
    memcpy(h + 24, &rate, 4);
    memcpy(h + 28, &byte_rate, 4);
    memcpy(h + 32, &blk, 2);
    memcpy(h + 34, &bits, 2);
    memcpy(h + 36, "data", 4);
    memcpy(h + 40, &data, 4);
    sharc__buf b = {0};
    ck_assert_int_eq(sharc__buf_append(&ctx, &b, h, sizeof h), 0);
    ck_assert_int_eq(sharc__buf_append(&ctx, &b, samples, data), 0);
    return b;
}

/*
 * NaN and infinite samples of a float WAV are an error naming the first one (its sample
 * index and channel), where they are among the samples kept; finite ones decode exactly.
 */
START_TEST(non_finite_samples_are_errors)
{
    enum { N = 64 };
    float s[2 * N];
    for (int i = 0; i < 2 * N; i++)
        s[i] = (float)(i % 17) / 32.0f - 0.25f;
    float out[2 * N];
    int64_t frames;
    sharc__audio_info info = {0};
    sharc__buf b = float_wav(s, N, 2, 16000);
    ck_assert_int_eq(decode(&b, 0, N, 0, -1, out, 2 * N, &info, &frames), 0);
    ck_assert_int_eq(frames, N);
    ck_assert_int_eq(info.non_finite, 0);
    ck_assert_int_eq(memcmp(out, s, sizeof s), 0);
    sharc__buf_free(&ctx, &b);

    s[2 * 10 + 1] = INFINITY; /* frame 10, channel 1 */
    s[2 * 20] = NAN;          /* frame 20, channel 0 */
    b = float_wav(s, N, 2, 16000);
    ck_assert_int_eq(decode(&b, 0, N, 0, -1, out, 2 * N, &info, &frames), SHARC_ERR_DECODE);
    ck_assert_int_eq(info.non_finite, 1);
    ck_assert_str_eq(ctx.error,
                     "wav audio holds a non-finite sample: +Inf at sample 10 (channel 1)");
    ck_assert_int_eq(decode(&b, 0, -1, 0, 0, out, 2 * N, &info, &frames), SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error,
                     "wav audio holds a non-finite sample: NaN at sample 20 (channel 0)");
    /* A window: indices count from the member's start. */
    ck_assert_int_eq(decode(&b, 15, 10, 0, -1, out, 2 * N, &info, &frames), SHARC_ERR_DECODE);
    ck_assert_str_eq(ctx.error,
                     "wav audio holds a non-finite sample: NaN at sample 20 (channel 0)");
    /* Samples not kept are not looked at: frames 0..9, or channel 1 past frame 10. */
    sharc__decode_spec spec = {0, 10, 0, -1, 1, 0};
    info.non_finite = 7;
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, b.len, &spec, out, 2 * N, &info, &frames),
                     0);
    ck_assert_int_eq(info.non_finite, 0);
    ck_assert_int_eq(memcmp(out, s, 20 * sizeof *s), 0);
    spec = (sharc__decode_spec){21, 30, 0, 1, 1, 0};
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.data, b.len, &spec, out, 2 * N, &info, &frames),
                     0);
    for (int i = 0; i < 30; i++)
        ck_assert_float_eq(out[i], s[2 * (21 + i) + 1]);
    sharc__buf_free(&ctx, &b);
}
END_TEST

/*
 * A FLAC stream whose STREAMINFO gives 0 samples (unknown, which the format allows): its
 * header reports the length decoding finds, and it decodes exactly.
 */
START_TEST(flac_of_unknown_length)
{
    const int64_t n = 20000;
    int16_t *pcm = make_pcm(n, 1, 16000);
    sharc__buf b = encode(SHARC__ENC_FLAC_PCM16, pcm, n, 1, 16000);
    ck_assert_int_eq(memcmp(b.data, "fLaC", 4), 0);
    b.data[8 + 13] &= 0xF0;
    memset(b.data + 8 + 14, 0, 4);
    sharc__audio_info info;
    ck_assert_int_eq(sharc__audio_info_get(&ctx, b.data, b.len, &info), 0);
    ck_assert_int_eq(info.frames, n);
    ck_assert_int_eq(info.sampling_rate, 16000);
    float *out = malloc((size_t)n * sizeof *out);
    int64_t frames;
    ck_assert_int_eq(decode(&b, 0, -1, 0, -1, out, (size_t)n, NULL, &frames), 0);
    ck_assert_int_eq(frames, n);
    assert_exact(out, pcm, n);
    ck_assert_int_eq(decode(&b, 0, n, 0, -1, out, (size_t)n, NULL, &frames), 0);
    assert_exact(out, pcm, n);
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
static sharc_log_level last_level;
static void capture(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    last_level = level;
    logged++;
    snprintf(last_log, sizeof last_log, "%s", message);
}

/* libsndfile's own text is logged once, at DEBUG (the reader reports the problem with the
 * file, member and cut at its policy's level); mismatches are left to the caller. */
START_TEST(libsndfile_errors_logged_once)
{
    sharc_logger log = {NULL, capture, SHARC_LOG_DEBUG};
    sharc__ctx_init(&ctx, NULL, &log);
    uint8_t junk[256];
    memset(junk, 0x5a, sizeof junk);
    memcpy(junk, "fLaC", 4);
    float out[16];
    int64_t frames = 0;
    sharc__decode_spec spec = {0, -1, 0, -1, 0, 0};
    logged = 0;
    ck_assert_int_eq(sharc__audio_decode(&ctx, junk, sizeof junk, &spec, out, 16, NULL, &frames),
                     SHARC_ERR_DECODE);
    ck_assert_int_eq(logged, 1);
    ck_assert_int_eq(last_level, SHARC_LOG_DEBUG);
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

/*
 * The direct PCM16 WAV path (src/wav.c) against libsndfile: every result, error text and
 * written sample must be the same, bit for bit.
 */

/* Full-range PCM16 from a xorshift generator, with both extremes present. */
static int16_t *random_pcm(int64_t frames, int channels, uint32_t seed)
{
    const size_t n = (size_t)(frames * channels);
    int16_t *p = malloc(n * sizeof *p + 1);
    uint32_t x = seed | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (int16_t)(x >> 16);
    }
    if (n > 4) {
        p[1] = -32768;
        p[n - 2] = 32767;
    }
    return p;
}

/* A WAV file built by hand, chunk by chunk. */
typedef struct bytes {
    uint8_t *p;
    size_t n;
} bytes;

static void put(bytes *b, const void *d, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_u16(bytes *b, unsigned v, int big)
{
    uint8_t le[2] = {(uint8_t)v, (uint8_t)(v >> 8)}, be[2] = {le[1], le[0]};
    put(b, big ? be : le, 2);
}

static void put_u32(bytes *b, uint32_t v, int big)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    uint8_t be[4] = {le[3], le[2], le[1], le[0]};
    put(b, big ? be : le, 4);
}

/* A chunk whose size field says `size`; `body` has `len` bytes, then a pad byte if odd. */
static void put_chunk(bytes *b, const char *id, uint32_t size, const void *body, size_t len)
{
    put(b, id, 4);
    put_u32(b, size, 0);
    put(b, body, len);
    if (len & 1)
        put(b, "", 1);
}

static void put_text_chunk(bytes *b, const char *id, const char *text)
{
    put_chunk(b, id, (uint32_t)strlen(text), text, strlen(text));
}

static bytes riff_begin(const char *magic)
{
    bytes b = {NULL, 0};
    put(&b, magic, 4);
    put_u32(&b, 0, 0);
    put(&b, "WAVE", 4);
    return b;
}

/* The RIFF size is the file length less 8, as writers set it (little-endian). */
static void riff_end(bytes *b)
{
    uint32_t size = (uint32_t)(b->n - 8);
    for (int i = 0; i < 4; i++)
        b->p[4 + i] = (uint8_t)(size >> (8 * i));
}

enum { FMT_PCM = 1, FMT_FLOAT = 3, FMT_EXT = 0xFFFE };

/* A fmt chunk of `size` bytes (16, 18 or 40); EXTENSIBLE carries `sub` as SubFormat tag. */
static void put_fmt(bytes *b, unsigned tag, int ch, uint32_t rate, int bits, unsigned align,
                    uint32_t size, unsigned sub)
{
    static const uint8_t guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                          0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71};
    bytes f = {NULL, 0};
    put_u16(&f, tag, 0);
    put_u16(&f, (unsigned)ch, 0);
    put_u32(&f, rate, 0);
    put_u32(&f, rate * align, 0);
    put_u16(&f, align, 0);
    put_u16(&f, (unsigned)bits, 0);
    if (size >= 18)
        put_u16(&f, size - 18, 0);
    if (size >= 40) {
        put_u16(&f, (unsigned)bits, 0);
        put_u32(&f, ch == 2 ? 3 : 4, 0);
        put_u16(&f, sub, 0);
        put(&f, guid_tail, sizeof guid_tail);
    }
    put_chunk(b, "fmt ", size, f.p, f.n);
    free(f.p);
}

static void put_fmt16(bytes *b, int ch)
{
    put_fmt(b, FMT_PCM, ch, 16000, 16, 2 * (unsigned)ch, 16, 0);
}

/* `frames` frames of deterministic PCM16, little-endian, as a data chunk body. */
static bytes pcm_body(int64_t frames, int ch)
{
    int16_t *pcm = random_pcm(frames, ch, 77);
    bytes d = {NULL, 0};
    for (int64_t i = 0; i < frames * ch; i++)
        put_u16(&d, (uint16_t)pcm[i], 0);
    free(pcm);
    return d;
}

static void put_data(bytes *b, int64_t frames, int ch)
{
    bytes d = pcm_body(frames, ch);
    put_chunk(b, "data", (uint32_t)d.n, d.p, d.n);
    free(d.p);
}

/* Field by field: a struct's padding bytes are unspecified. */
static int same_info(const sharc__audio_info *a, const sharc__audio_info *b)
{
    return a->codec == b->codec && a->sampling_rate == b->sampling_rate &&
           a->channels == b->channels && a->frames == b->frames;
}

/* Whether p[from..to) still holds the 0xA5 fill (one assertion instead of one per float). */
static int untouched(const float *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        uint32_t v;
        memcpy(&v, p + i, sizeof v);
        if (v != 0xA5A5A5A5u)
            return 0;
    }
    return 1;
}

/* Decode with both paths from fresh contexts and demand the same outcome, bit for bit. */
static void same_as_sndfile(const uint8_t *data, size_t n, const sharc__decode_spec *spec,
                            size_t cap, const char *what)
{
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx ca, cb;
    sharc__ctx_init(&ca, NULL, &quiet);
    sharc__ctx_init(&cb, NULL, &quiet);
    float *a = malloc((cap + 1) * sizeof *a), *b = malloc((cap + 1) * sizeof *b);
    memset(a, 0xA5, (cap + 1) * sizeof *a);
    memset(b, 0xA5, (cap + 1) * sizeof *b);
    sharc__audio_info ia, ib;
    memset(&ia, 0x5A, sizeof ia);
    memset(&ib, 0x5A, sizeof ib);
    int64_t fa = -7, fb = -7;
    /* An exact-size copy (keeping the alignment), so that ASan sees any read past it. */
    const size_t shift = (uintptr_t)data & 1;
    uint8_t *copy = malloc(n + shift ? n + shift : 1);
    if (n)
        memcpy(copy + shift, data, n);
    data = copy + shift;
    sharc__wav_pcm16 wav;
    const int canonical = sharc__wav_parse(data, n, &wav);
    const int flac = n >= 4 && !memcmp(data, "fLaC", 4);
    /* The direct paths alone first: which of them takes this decode. */
    sharc__audio_info ic, unset;
    memset(&ic, 0x5A, sizeof ic);
    memset(&unset, 0x5A, sizeof unset);
    int64_t fc = -7;
    const int taken = sharc__audio_decode_direct(data, n, spec, b, cap, &ic, &fc);
    float *direct_out = malloc((cap + 1) * sizeof *direct_out);
    memcpy(direct_out, b, (cap + 1) * sizeof *b);
    memset(b, 0xA5, (cap + 1) * sizeof *b);
    int ra = sharc__audio_decode(&ca, data, n, spec, a, cap, &ia, &fa);
    int rb = sharc__audio_decode_sndfile(&cb, data, n, spec, b, cap, &ib, &fb);
    ck_assert_msg(ra == rb, "%s: rc %d, libsndfile %d (%s)", what, ra, rb, cb.error);
    ck_assert_msg(fa == fb, "%s: %lld frames, libsndfile %lld", what, (long long)fa, (long long)fb);
    ck_assert_msg(same_info(&ia, &ib), "%s: info differs", what);
    ck_assert_msg(!strcmp(ca.error, cb.error), "%s: '%s' vs '%s'", what, ca.error, cb.error);
    /*
     * Past the frames written the contents are unspecified: libsndfile may zero them
     * (see wav_direct_path_is_taken), the direct path leaves them alone.
     */
    size_t cmp = cap;
    if (ra == 0 && taken && spec->want_frames < 0) {
        cmp = (size_t)fa * (size_t)(spec->channel >= 0 ? 1 : ib.channels);
        ck_assert_msg(untouched(a, cmp, cap), "%s: wrote past the frames", what);
    }
    ck_assert_msg(!memcmp(a, b, cmp * sizeof *a), "%s: samples differ", what);
    ck_assert_msg(untouched(a, cap, cap + 1), "%s: wrote past capacity", what);
    /*
     * The WAV path takes exactly the successes of canonical files; the FLAC path only
     * successes (a stream it finds faulty goes to libsndfile, which may still decode it).
     */
    if (flac)
        ck_assert_msg(!taken || rb == 0, "%s: FLAC path taken where libsndfile fails", what);
    else
        ck_assert_msg(taken == (canonical && rb == 0), "%s: direct path taken %d", what, taken);
    if (taken) {
        ck_assert_msg(fc == fa && same_info(&ic, &ia) && !memcmp(a, direct_out, cap * sizeof *a),
                      "%s: direct path alone differs", what);
    } else {
        ck_assert_msg(fc == -7 && same_info(&ic, &unset), "%s: outputs set", what);
        if (!flac)
            ck_assert_msg(untouched(direct_out, 0, cap + 1), "%s: wrote when not taken", what);
    }
    ck_assert_msg(untouched(direct_out, cap, cap + 1), "%s: direct path wrote past capacity", what);
    free(direct_out);
    free(copy);
    free(a);
    free(b);
}

/* A few typical decodes of a file, and its header, through both paths. */
static void all_same_as_sndfile(const uint8_t *data, size_t n, const char *what)
{
    sharc__audio_info info, ref;
    sharc__decode_spec all = {0, -1, 0, -1, 0, 0}, exact = {0, 0, 0, -1, 0, 0};
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx c;
    int64_t frames = 0;
    float *out = malloc(1 << 20);
    memset(&ref, 0x5A, sizeof ref);
    memset(&info, 0x5A, sizeof info);
    sharc__ctx_init(&c, NULL, &quiet);
    int rc =
        sharc__audio_decode_sndfile(&c, data, n, &all, out, (1 << 20) / sizeof *out, &ref, &frames);
    char opened[SHARC__ERRLEN];
    snprintf(opened, sizeof opened, "%s", c.error);
    sharc__ctx_init(&c, NULL, &quiet);
    int ri = sharc__audio_info_get(&c, data, n, &info);
    if (ref.channels != 0x5A5A5A5A) { /* libsndfile opened it */
        ck_assert_msg(ri == 0, "%s: info rc %d (%s)", what, ri, c.error);
        ck_assert_msg(same_info(&info, &ref), "%s: info differs", what);
    } else {
        ck_assert_int_eq(ri, rc);
        ck_assert_str_eq(c.error, opened);
    }
    free(out);
    const int64_t len = rc == 0 ? frames : 8;
    same_as_sndfile(data, n, &all, 1 << 16, what);
    same_as_sndfile(data, n, &all, 1, what);
    exact.want_frames = len;
    same_as_sndfile(data, n, &exact, (size_t)len * 8, what);
    exact.offset_frames = len / 2;
    exact.want_frames = len - len / 2 + 2;
    exact.tolerance_frames = 2;
    exact.channel = 0;
    same_as_sndfile(data, n, &exact, (size_t)len, what);
    exact.tolerance_frames = 1;
    same_as_sndfile(data, n, &exact, (size_t)len, what);
}

START_TEST(wav_parse_finds_the_samples)
{
    static const int chans[] = {1, 2, 6};
    for (int k = 0; k < 3; k++) {
        int16_t *pcm = random_pcm(1001, chans[k], 5);
        sharc__buf b = encode(SHARC__ENC_WAV_PCM16, pcm, 1001, chans[k], 22050);
        sharc__wav_pcm16 w = {0};
        ck_assert_int_eq(sharc__wav_parse(b.data, b.len, &w), SHARC__WAV_DIRECT);
        if (SHARC__WAV_DIRECT) {
            ck_assert_int_eq(w.channels, chans[k]);
            ck_assert_int_eq(w.sampling_rate, 22050);
            ck_assert_uint_eq(w.data_offset, 44);
            ck_assert_int_eq(w.frames, 1001);
            ck_assert_int_eq(memcmp(b.data + w.data_offset, pcm, 2 * 1001 * (size_t)chans[k]), 0);
        }
        free(pcm);
        sharc__buf_free(&ctx, &b);
    }
    if (!SHARC__WAV_DIRECT)
        return;
    /* EXTENSIBLE, 6 channels, with chunks around the data: the data follows them. */
    bytes f = riff_begin("RIFF");
    put_fmt(&f, FMT_EXT, 6, 48000, 16, 12, 40, FMT_PCM);
    put_text_chunk(&f, "JUNK", "abc");
    put_chunk(&f, "fact", 4, "\x10\0\0\0", 4);
    put_data(&f, 10, 6);
    put_text_chunk(&f, "id3 ", "tail");
    riff_end(&f);
    sharc__wav_pcm16 w = {0};
    ck_assert_int_eq(sharc__wav_parse(f.p, f.n, &w), 1);
    ck_assert_int_eq(w.channels, 6);
    ck_assert_int_eq(w.sampling_rate, 48000);
    ck_assert_uint_eq(w.data_offset, 12 + 48 + 12 + 12 + 8);
    ck_assert_int_eq(w.frames, 10);
    /* Not canonical: the output is left alone. */
    w.frames = -3;
    ck_assert_int_eq(sharc__wav_parse(f.p, 30, &w), 0);
    ck_assert_int_eq(sharc__wav_parse(NULL, 0, &w), 0);
    ck_assert_int_eq(w.frames, -3);
    free(f.p);
}
END_TEST

/* Every int16 value converts exactly as libsndfile converts it, at any alignment. */
START_TEST(wav_direct_converts_every_value)
{
    int16_t *pcm = malloc(65536 * sizeof *pcm);
    for (int i = 0; i < 65536; i++)
        pcm[i] = (int16_t)(i - 32768);
    sharc__buf b = encode(SHARC__ENC_WAV_PCM16, pcm, 65536, 1, 16000);
    float *out = malloc(65536 * sizeof *out);
    for (int i = 0; i < 65536; i++)
        out[i] = -9.0f;
    sharc__wav_pcm16_to_float(b.data + 44, 65536, out, 0);
    for (int i = 0; i < 65536; i++) {
        float want = (float)pcm[i] / 32768.0f;
        if (memcmp(&out[i], &want, sizeof want))
            ck_abort_msg("value %d: got %.9g", pcm[i], out[i]);
    }
    ck_assert_float_eq(out[0], -1.0f);
    same_as_sndfile(b.data, b.len, &(sharc__decode_spec){0, -1, 0, -1, 0, 0}, 65536, "all values");
    /* The same member one byte off alignment, as tar streams hand members over. */
    uint8_t *odd = malloc(b.len + 1);
    memcpy(odd + 1, b.data, b.len);
    same_as_sndfile(odd + 1, b.len, &(sharc__decode_spec){0, -1, 0, -1, 0, 0}, 65536,
                    "odd address");
    same_as_sndfile(odd + 1, b.len, &(sharc__decode_spec){1, 65535, 0, 0, 0, 0}, 65535,
                    "odd offset");
    /* Short runs exercise the tail after the vector blocks. */
    for (size_t len = 0; len < 40; len++) {
        float got[40];
        sharc__wav_pcm16_to_float(odd + 1 + 44 + 2 * 100, len, got, len & 1);
        for (size_t i = 0; i < len; i++)
            if (got[i] != (float)pcm[100 + i] / 32768.0f)
                ck_abort_msg("%zu samples: sample %zu", len, i);
    }
    /* Long runs with streamed stores (batch rows), at every float alignment, odd lengths. */
    static const size_t lens[] = {8191, 8192, 8193, 8199, 10007, 65536 - 8};
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t shift = 0; shift < 4; shift++) {
            for (int i = 0; i < 65536; i++)
                out[i] = -9.0f;
            sharc__wav_pcm16_to_float(odd + 1 + 44 + 2 * 3, lens[l], out + shift, 1);
            for (size_t i = 0; i < 65536; i++) {
                float want = i >= shift && i - shift < lens[l]
                                 ? (float)pcm[3 + i - shift] / 32768.0f
                                 : -9.0f; /* nothing written outside */
                if (memcmp(&out[i], &want, sizeof want))
                    ck_abort_msg("%zu samples at +%zu: float %zu is %.9g", lens[l], shift, i,
                                 out[i]);
            }
        }
    free(odd);
    free(out);
    free(pcm);
    sharc__buf_free(&ctx, &b);
}
END_TEST

/* Random signals, 1/2/6 channels, across offsets, lengths, tolerances, channels, room. */
START_TEST(wav_direct_matches_libsndfile)
{
    static const int chans[] = {1, 2, 6};
    for (int k = 0; k < 3; k++) {
        const int ch = chans[k];
        const int64_t n = 997 + 31 * ch;
        int16_t *pcm = random_pcm(n, ch, 1234u + (uint32_t)ch);
        sharc__buf b = encode(SHARC__ENC_WAV_PCM16, pcm, n, ch, 16000);
        sharc__wav_pcm16 w;
        ck_assert_int_eq(sharc__wav_parse(b.data, b.len, &w), SHARC__WAV_DIRECT);
        const int64_t offsets[] = {0, 1, n / 2, n - 1, n, n + 1, n + 3};
        const int chan_sel[] = {-1, 0, ch - 1, ch}, tols[] = {0, 3, 40};
        for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
            const int64_t off = offsets[o], rest = off < n ? n - off : 0;
            const int64_t wants[] = {-1, 0, 1, rest, rest - 3, rest + 3, rest - 40, rest + 40};
            for (size_t wi = 0; wi < sizeof wants / sizeof wants[0]; wi++) {
                if (wants[wi] < -1)
                    continue;
                for (int t = 0; t < 3; t++)
                    for (size_t c = 0; c < sizeof chan_sel / sizeof chan_sel[0]; c++)
                        for (int longer = 0; longer < 2; longer++) {
                            const int tol = tols[t]; /* 3 and 40 meet the wants' edges */
                            sharc__decode_spec spec = {off,         wants[wi], tol,
                                                       chan_sel[c], longer,    (int)(wi & 1)};
                            const size_t out_ch = chan_sel[c] >= 0 ? 1 : (size_t)ch;
                            const int64_t room = wants[wi] >= 0 ? wants[wi] : rest;
                            const size_t caps[] = {(size_t)room * out_ch,
                                                   room ? (size_t)room * out_ch - 1 : 0,
                                                   (size_t)(room + 50) * out_ch};
                            for (int r = 0; r < 3; r++) {
                                char what[128];
                                snprintf(what, sizeof what,
                                         "%d ch, offset %lld, want %lld, tol %d, channel %d, "
                                         "longer %d, cap %zu",
                                         ch, (long long)off, (long long)wants[wi], tol, chan_sel[c],
                                         longer, caps[r]);
                                same_as_sndfile(b.data, b.len, &spec, caps[r], what);
                            }
                        }
            }
        }
        /* A negative offset or tolerance is refused the same way. */
        same_as_sndfile(b.data, b.len, &(sharc__decode_spec){-1, -1, 0, -1, 0, 0}, 1 << 16, "neg");
        same_as_sndfile(b.data, b.len, &(sharc__decode_spec){0, 10, -1, -1, 0, 0}, 1 << 16, "neg");
        free(pcm);
        sharc__buf_free(&ctx, &b);
    }
}
END_TEST

/* Hand-built WAVs: the direct path takes only the canonical ones, libsndfile the rest. */
typedef void (*wav_builder)(bytes *b);

static void wav_plain(bytes *b)
{
    put_fmt16(b, 1);
    put_data(b, 500, 1);
}
static void wav_fmt18(bytes *b)
{
    put_fmt(b, FMT_PCM, 2, 8000, 16, 4, 18, 0);
    put_data(b, 300, 2);
}
static void wav_extensible(bytes *b)
{
    put_fmt(b, FMT_EXT, 2, 44100, 16, 4, 40, FMT_PCM);
    put_data(b, 300, 2);
}
static void wav_extensible_short(bytes *b)
{
    put_fmt(b, FMT_EXT, 2, 44100, 16, 4, 18, FMT_PCM);
    put_data(b, 300, 2);
}
static void wav_extensible_float(bytes *b)
{
    bytes d = pcm_body(300, 2); /* any bytes: read as float32 */
    put_fmt(b, FMT_EXT, 1, 44100, 32, 4, 40, FMT_FLOAT);
    put_chunk(b, "data", (uint32_t)d.n, d.p, d.n);
    free(d.p);
}
static void wav_list_before_data(bytes *b)
{
    /* As ffmpeg writes it, plus an odd-length string with its pad byte. */
    bytes l = {NULL, 0};
    put(&l, "INFO", 4);
    put_text_chunk(&l, "ISFT", "Lavf58.76.100");
    put_text_chunk(&l, "INAM", "utt");
    put_fmt16(b, 2);
    put_chunk(b, "LIST", (uint32_t)l.n, l.p, l.n);
    put_data(b, 400, 2);
    free(l.p);
}
static void wav_chunks_around_data(bytes *b)
{
    put_text_chunk(b, "JUNK", "odd");
    put_fmt16(b, 6);
    put_chunk(b, "fact", 4, "\x2c\1\0\0", 4);
    put_text_chunk(b, "PAD ", "12345");
    put_data(b, 300, 6);
    put_text_chunk(b, "iXML", "<x/>");
    put_text_chunk(b, "abcd", "odd size");
    put_text_chunk(b, "efgh", "odd");
}
static void wav_trailing_3(bytes *b)
{
    wav_plain(b);
    put(b, "xyz", 3);
}
static void wav_trailing_6(bytes *b)
{
    wav_plain(b);
    put(b, "uvwxyz", 6);
}
static void wav_trailing_zeros(bytes *b)
{
    wav_plain(b);
    put(b, "\0\0\0\0\0\0\0\0\0\0", 10);
}
static void wav_trailing_frame(bytes *b)
{
    wav_plain(b);
    put(b, "ab", 2); /* one frame of bytes after the data */
}
static void wav_zero_data(bytes *b)
{
    put_fmt16(b, 1);
    put_chunk(b, "data", 0, "", 0);
    put_text_chunk(b, "JUNK", "after nothing");
}
static void wav_unfinished(bytes *b)
{
    /* A writer that never closed the file: RIFF size 8 and data size 0 (set below). */
    wav_zero_data(b);
}
static void wav_id3v1_trailer(bytes *b)
{
    /* An ID3v1 tag's 128 bytes end the file; libsndfile stops at "TAG" there. */
    put_fmt16(b, 1);
    bytes t = {NULL, 0};
    put(&t, "TAG+", 4);
    put_u32(&t, 20, 0);
    put(&t, "12345678901234567890", 20);
    bytes d = pcm_body(46, 1);
    put_chunk(&t, "data", (uint32_t)d.n, d.p, d.n);
    ck_assert_uint_eq(t.n, 128);
    put(b, t.p, t.n);
    free(t.p);
    free(d.p);
}
static void wav_data_too_long(bytes *b)
{
    bytes d = pcm_body(500, 1);
    put_fmt16(b, 1);
    put_chunk(b, "data", (uint32_t)d.n + 1000, d.p, d.n);
    free(d.p);
}
static void wav_data_size_max(bytes *b)
{
    bytes d = pcm_body(500, 1);
    put_fmt16(b, 1);
    put_chunk(b, "data", 0xFFFFFFFFu, d.p, d.n);
    free(d.p);
}
static void wav_data_not_whole_frames(bytes *b)
{
    bytes d = pcm_body(500, 2);
    put_fmt16(b, 2);
    put_chunk(b, "data", (uint32_t)d.n - 2, d.p, d.n - 2);
    free(d.p);
}
static void wav_data_odd(bytes *b)
{
    bytes d = pcm_body(500, 1);
    put_fmt16(b, 1);
    put_chunk(b, "data", (uint32_t)d.n - 1, d.p, d.n - 1);
    free(d.p);
}
static void wav_pcm8(bytes *b)
{
    bytes d = pcm_body(300, 1);
    put_fmt(b, FMT_PCM, 1, 8000, 8, 1, 16, 0);
    put_chunk(b, "data", (uint32_t)d.n, d.p, d.n);
    free(d.p);
}
static void wav_pcm24(bytes *b)
{
    bytes d = pcm_body(300, 3); /* 1800 bytes: 600 frames of 3 bytes */
    put_fmt(b, FMT_PCM, 1, 8000, 24, 3, 16, 0);
    put_chunk(b, "data", (uint32_t)d.n, d.p, d.n);
    free(d.p);
}
static void wav_pcm32(bytes *b)
{
    bytes d = pcm_body(300, 2);
    put_fmt(b, FMT_PCM, 1, 8000, 32, 4, 16, 0);
    put_chunk(b, "data", (uint32_t)d.n, d.p, d.n);
    free(d.p);
}
static void wav_pcm12(bytes *b)
{
    /* libsndfile reads 12-bit PCM as 16-bit; the direct path leaves it alone. */
    put_fmt(b, FMT_PCM, 1, 8000, 12, 2, 16, 0);
    put_data(b, 300, 1);
}
static void wav_float(bytes *b)
{
    float s[256];
    for (int i = 0; i < 256; i++)
        s[i] = (float)i / 300.0f - 0.4f;
    put_fmt(b, FMT_FLOAT, 1, 8000, 32, 4, 16, 0);
    put_chunk(b, "data", sizeof s, s, sizeof s);
}
static void wav_bad_align(bytes *b)
{
    put_fmt(b, FMT_PCM, 2, 8000, 16, 2, 16, 0);
    put_data(b, 300, 2);
}
static void wav_no_channels(bytes *b)
{
    put_fmt(b, FMT_PCM, 0, 8000, 16, 0, 16, 0);
    put_data(b, 300, 1);
}
static void wav_rate_zero(bytes *b)
{
    put_fmt(b, FMT_PCM, 1, 0, 16, 2, 16, 0);
    put_data(b, 300, 1);
}
static void wav_fmt_after_data(bytes *b)
{
    put_data(b, 300, 1);
    put_fmt16(b, 1);
}
static void wav_no_fmt(bytes *b)
{
    put_data(b, 300, 1);
}
static void wav_no_data(bytes *b)
{
    put_fmt16(b, 1);
    put_text_chunk(b, "JUNK", "nothing here");
}
static void wav_two_fmt(bytes *b)
{
    put_fmt16(b, 1);
    put_fmt16(b, 2);
    put_data(b, 300, 1);
}
static void wav_two_data(bytes *b)
{
    put_fmt16(b, 1);
    put_data(b, 300, 1);
    put_data(b, 200, 1);
}
static void wav_peak(bytes *b)
{
    uint8_t peak[16] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x3f, 5, 0, 0, 0};
    put_fmt16(b, 1);
    put_chunk(b, "PEAK", sizeof peak, peak, sizeof peak);
    put_data(b, 300, 1);
}
static void wav_binary_chunk_id(bytes *b)
{
    put_fmt16(b, 1);
    put_chunk(b, "\x01\x02\x03\x04", 4, "abcd", 4);
    put_data(b, 300, 1);
}
static void wav_list_with_data(bytes *b)
{
    bytes l = {NULL, 0};
    put(&l, "INFO", 4);
    put_text_chunk(&l, "ISFT", "x");
    put_text_chunk(&l, "data", "zz");
    put_fmt16(b, 1);
    put_chunk(b, "LIST", (uint32_t)l.n, l.p, l.n);
    put_data(b, 300, 1);
    free(l.p);
}
static void wav_list_tiny(bytes *b)
{
    put_fmt16(b, 1);
    put_chunk(b, "LIST", 4, "INFO", 4);
    put_data(b, 300, 1);
}
static void wav_short_fact(bytes *b)
{
    put_fmt16(b, 1);
    put_chunk(b, "fact", 2, "\1\0", 2);
    put_data(b, 300, 1);
}
static void wav_wavpack_payload(bytes *b)
{
    bytes d = pcm_body(300, 1);
    memcpy(d.p, "wvpk", 4);
    put_fmt16(b, 1);
    put_chunk(b, "data", (uint32_t)d.n, d.p, d.n);
    free(d.p);
}
static void wav_big_junk(bytes *b)
{
    static uint8_t junk[40000];
    put_chunk(b, "JUNK", sizeof junk, junk, sizeof junk);
    put_fmt16(b, 1);
    put_data(b, 300, 1);
}
static void wav_20k_junk(bytes *b)
{
    static uint8_t junk[20000];
    put_fmt16(b, 1);
    put_chunk(b, "JUNK", sizeof junk, junk, sizeof junk);
    put_data(b, 300, 1);
}
static void wav_one_frame(bytes *b)
{
    put_fmt16(b, 1);
    put_data(b, 1, 1);
}
static void wav_header_only(bytes *b)
{
    put_fmt16(b, 1);
    b->n -= 6;
}

/* RIFX: the same file with every header field and sample big-endian. */
static bytes build_rifx(void)
{
    bytes b = riff_begin("RIFX"), f = {NULL, 0};
    put_u16(&f, 1, 1);
    put_u16(&f, 1, 1);
    put_u32(&f, 8000, 1);
    put_u32(&f, 16000, 1);
    put_u16(&f, 2, 1);
    put_u16(&f, 16, 1);
    put(&b, "fmt ", 4);
    put_u32(&b, 16, 1);
    put(&b, f.p, f.n);
    bytes d = pcm_body(300, 1);
    put(&b, "data", 4);
    put_u32(&b, (uint32_t)d.n, 1);
    for (size_t i = 0; i < d.n; i += 2)
        put(&b, (uint8_t[2]){d.p[i + 1], d.p[i]}, 2);
    uint32_t size = (uint32_t)(b.n - 8);
    for (int i = 0; i < 4; i++)
        b.p[4 + i] = (uint8_t)(size >> (24 - 8 * i));
    free(f.p);
    free(d.p);
    return b;
}

/* RF64 with a ds64 chunk carrying the real sizes. */
static bytes build_rf64(void)
{
    bytes b = riff_begin("RF64"), ds = {NULL, 0}, d = pcm_body(300, 1);
    b.p[4] = b.p[5] = b.p[6] = b.p[7] = 0xFF;
    const uint64_t riff = 4 + (8 + 28) + (8 + 16) + 8 + d.n;
    put_u32(&ds, (uint32_t)riff, 0);
    put_u32(&ds, 0, 0);
    put_u32(&ds, (uint32_t)d.n, 0);
    put_u32(&ds, 0, 0);
    put_u32(&ds, 300, 0);
    put_u32(&ds, 0, 0);
    put_u32(&ds, 0, 0);
    put_chunk(&b, "ds64", (uint32_t)ds.n, ds.p, ds.n);
    put_fmt16(&b, 1);
    put_chunk(&b, "data", 0xFFFFFFFFu, d.p, d.n);
    free(ds.p);
    free(d.p);
    return b;
}

/*
 * Parsing a member from its head and tail (a window into a long member read in parts)
 * agrees with parsing it whole, for any head length: where the walk needs a byte it does
 * not have, the member is not canonical. Exact-size copies, so ASan sees any read past.
 */
static int windows_from_pieces; /* windows checked against the whole member */
static void pieces_agree(const uint8_t *data, size_t n, const char *what)
{
    sharc__wav_pcm16 whole, parts;
    const int canonical = sharc__wav_parse(data, n, &whole);
    const size_t heads[] = {4096, 44, 13, n / 2, n};
    for (size_t k = 0; k < sizeof heads / sizeof heads[0]; k++) {
        size_t head_len = heads[k] < n ? heads[k] : n, data_end = 0;
        uint8_t *head = malloc(head_len ? head_len : 1);
        memcpy(head, data, head_len);
        if (!sharc__wav_data_end(head, head_len, n, &data_end)) {
            free(head);
            continue;
        }
        ck_assert_msg(data_end <= n, "%s: data end %zu past %zu", what, data_end, n);
        uint8_t *tail = malloc(n - data_end ? n - data_end : 1);
        memcpy(tail, data + data_end, n - data_end);
        const sharc__wav_pieces p = {head, head_len, tail, data_end, n};
        memset(&parts, 0x5A, sizeof parts);
        const int got = sharc__wav_parse_pieces(&p, &parts);
        /* A head that stops inside a chunk before the data cannot reach it. */
        ck_assert_msg(got == canonical, "%s: head %zu: pieces %d, whole %d", what, head_len, got,
                      canonical);
        if (got) {
            ck_assert_msg(
                parts.channels == whole.channels && parts.sampling_rate == whole.sampling_rate &&
                    parts.data_offset == whole.data_offset && parts.frames == whole.frames,
                "%s: head %zu: layout differs", what, head_len);
            /* A window planned on the pieces converts the bytes decoding it whole would. */
            sharc__decode_spec win = {whole.frames / 3, whole.frames / 3 + 1, 0, -1, 1, 0};
            int64_t first, count, fa = -1, fb = -1;
            const size_t cap = (size_t)(whole.frames + 2) * (size_t)whole.channels;
            float *a = calloc(cap, sizeof *a), *b = calloc(cap, sizeof *b);
            sharc__audio_info ia, ib;
            const int direct = sharc__audio_decode_direct(data, n, &win, a, cap, &ia, &fa);
            ck_assert_int_eq(sharc__pcm16_plan(&parts, &win, cap, &first, &count), direct);
            if (direct) {
                sharc__pcm16_convert(
                    &parts, data + parts.data_offset + (size_t)first * 2 * (size_t)parts.channels,
                    count, &win, b, &ib, &fb);
                ck_assert_msg(fa == fb && same_info(&ia, &ib) && !memcmp(a, b, cap * sizeof *a),
                              "%s: window differs", what);
                windows_from_pieces++;
            }
            free(a);
            free(b);
        }
        free(tail);
        free(head);
    }
}

/*
 * Decoding a member at an offset of a file (sharc__audio_decode_at: what a window into a
 * long member left in its shard file uses) gives what decoding it from memory gives, for
 * WAV, FLAC and Opus, whole and windowed; a file cut short fails as a changed file, not as
 * undecodable audio.
 */
START_TEST(decode_from_a_file_matches_memory)
{
    static const sharc__encoding encs[] = {SHARC__ENC_WAV_PCM16, SHARC__ENC_FLAC_PCM16,
                                           SHARC__ENC_OPUS};
    const int64_t frames = 96000; /* 2 s at 48 kHz, 6 s at 16 kHz */
    static uint8_t io[1000];      /* a small cache: many refills, seeks across them */
    int16_t *pcm = random_pcm(frames, 2, 11);
    char *dir = tu_mkdtemp(), path[600];
    snprintf(path, sizeof path, "%s/shard.bin", dir);
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++) {
        const int rate = encs[e] == SHARC__ENC_OPUS ? 48000 : 16000;
        sharc__buf b = encode(encs[e], pcm, frames, 2, rate);
        const uint64_t at = 1234; /* the member starts mid-file, as in a tar */
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        for (uint64_t i = 0; i < at; i++)
            fputc('x', f);
        ck_assert_uint_eq(fwrite(b.data, 1, b.len, f), b.len);
        fputs("trailing bytes of the next member", f);
        fclose(f);
        int fd = open(path, O_RDONLY);
        ck_assert_int_ge(fd, 0);
        const sharc__decode_spec specs[] = {
            {0, -1, 0, -1, 0, 0},                  /* everything */
            {rate, rate / 2, 0, 1, 1, 0},          /* a window, one channel */
            {frames - 100, 400, 400, -1, 1, 0},    /* past the end, padded */
            {frames / 3, frames / 3, 0, -1, 0, 0}, /* much longer than wanted */
        };
        const size_t cap = (size_t)frames * 2 + 64;
        float *a = malloc(cap * sizeof *a), *m = malloc(cap * sizeof *m);
        for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
            sharc__audio_info ia, im;
            int64_t fa = -1, fm = -1;
            char ea[SHARC__ERRLEN];
            memset(a, 0, cap * sizeof *a);
            memset(m, 0, cap * sizeof *m);
            int ra = sharc__audio_decode_at(&ctx, fd, at, b.len, io, sizeof io, &specs[k], a, cap,
                                            &ia, &fa);
            snprintf(ea, sizeof ea, "%s", ctx.error);
            int rm = sharc__audio_decode_sndfile(&ctx, b.data, b.len, &specs[k], m, cap, &im, &fm);
            ck_assert_msg(ra == rm, "enc %zu spec %zu: rc %d from the file, %d from memory (%s)", e,
                          k, ra, rm, ea);
            if (ra == 0) {
                ck_assert_int_eq(fa, fm);
                ck_assert_int_eq(ia.sampling_rate, im.sampling_rate);
                ck_assert_int_eq(ia.channels, im.channels);
                ck_assert_int_eq(ia.frames, im.frames);
                ck_assert_msg(!memcmp(a, m, cap * sizeof *a), "enc %zu spec %zu: samples", e, k);
            } else {
                ck_assert_str_eq(ea, ctx.error);
            }
        }
        sharc__audio_info ii, ig;
        ck_assert_int_eq(sharc__audio_info_at(&ctx, fd, at, b.len, io, sizeof io, &ii), 0);
        ck_assert_int_eq(sharc__audio_info_get(&ctx, b.data, b.len, &ig), 0);
        ck_assert(same_info(&ii, &ig));
        close(fd);
        /* Cut in the middle of the member: it changed after its headers were read. */
        ck_assert_int_eq(truncate(path, (off_t)(at + b.len / 2)), 0);
        fd = open(path, O_RDONLY);
        int64_t fa;
        sharc__audio_info ia;
        ck_assert_int_eq(
            sharc__audio_decode_at(&ctx, fd, at, b.len, io, sizeof io, &specs[0], a, cap, &ia, &fa),
            SHARC_ERR_CORRUPT);
        ck_assert_ptr_nonnull(strstr(ctx.error, "changed after it was read"));
        close(fd);
        free(a);
        free(m);
        sharc__buf_free(&ctx, &b);
    }
    free(pcm);
    tu_rm_rf(dir);
    free(dir);
}
END_TEST

START_TEST(wav_edge_files_match_libsndfile)
{
    static const struct {
        const char *name;
        wav_builder build;
        int canonical;
    } cases[] = {
        {"plain", wav_plain, 1},
        {"fmt of 18 bytes", wav_fmt18, 1},
        {"extensible PCM", wav_extensible, 1},
        {"extensible with an 18-byte fmt", wav_extensible_short, 0},
        {"extensible float", wav_extensible_float, 0},
        {"LIST INFO before data", wav_list_before_data, 1},
        {"chunks around data", wav_chunks_around_data, 1},
        {"3 trailing bytes", wav_trailing_3, 1},
        {"6 trailing bytes", wav_trailing_6, 0},
        {"trailing zeros", wav_trailing_zeros, 1},
        {"one trailing frame", wav_trailing_frame, 1},
        {"zero-length data", wav_zero_data, 0},
        {"unfinished file", wav_unfinished, 0},
        {"ID3v1 trailer hiding the data", wav_id3v1_trailer, 0},
        {"data longer than the file", wav_data_too_long, 0},
        {"data size 0xFFFFFFFF", wav_data_size_max, 0},
        {"data not whole frames", wav_data_not_whole_frames, 0},
        {"odd data size", wav_data_odd, 0},
        {"8-bit", wav_pcm8, 0},
        {"24-bit", wav_pcm24, 0},
        {"32-bit", wav_pcm32, 0},
        {"12-bit", wav_pcm12, 0},
        {"float", wav_float, 0},
        {"block align wrong", wav_bad_align, 0},
        {"no channels", wav_no_channels, 0},
        {"rate 0", wav_rate_zero, 0},
        {"fmt after data", wav_fmt_after_data, 0},
        {"no fmt", wav_no_fmt, 0},
        {"no data", wav_no_data, 0},
        {"two fmt", wav_two_fmt, 0},
        {"two data", wav_two_data, 0},
        {"PEAK", wav_peak, 0},
        {"binary chunk id", wav_binary_chunk_id, 0},
        {"LIST holding data", wav_list_with_data, 0},
        {"LIST of 4 bytes", wav_list_tiny, 0},
        {"fact of 2 bytes", wav_short_fact, 0},
        {"WavPack payload", wav_wavpack_payload, 0},
        {"20 kB JUNK", wav_20k_junk, 1},
        {"40 kB JUNK", wav_big_junk, 0},
        {"one frame", wav_one_frame, 0},
        {"cut in the header", wav_header_only, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bytes b = riff_begin("RIFF");
        cases[k].build(&b);
        riff_end(&b);
        if (cases[k].build == wav_unfinished)
            memcpy(b.p + 4, "\x08\0\0\0", 4);
        sharc__wav_pcm16 w;
        ck_assert_msg(sharc__wav_parse(b.p, b.n, &w) == (cases[k].canonical && SHARC__WAV_DIRECT),
                      "%s: parse", cases[k].name);
        all_same_as_sndfile(b.p, b.n, cases[k].name);
        pieces_agree(b.p, b.n, cases[k].name);
        free(b.p);
    }
    /* Every canonical case, from at least its 4 KiB and whole heads. */
    ck_assert_int_ge(windows_from_pieces, 2 * 9 * SHARC__WAV_DIRECT);
    bytes rifx = build_rifx(), rf64 = build_rf64();
    sharc__wav_pcm16 w;
    ck_assert_int_eq(sharc__wav_parse(rifx.p, rifx.n, &w), 0);
    ck_assert_int_eq(sharc__wav_parse(rf64.p, rf64.n, &w), 0);
    all_same_as_sndfile(rifx.p, rifx.n, "RIFX");
    all_same_as_sndfile(rf64.p, rf64.n, "RF64");
    /* Both decode through libsndfile to the samples of the little-endian file. */
    bytes plain = riff_begin("RIFF");
    put_fmt(&plain, FMT_PCM, 1, 8000, 16, 2, 16, 0);
    put_data(&plain, 300, 1);
    riff_end(&plain);
    float ref[300], got[300];
    int64_t frames = 0;
    sharc__decode_spec spec = {0, 300, 0, -1, 0, 0};
    ck_assert_int_eq(sharc__audio_decode(&ctx, plain.p, plain.n, &spec, ref, 300, NULL, &frames),
                     0);
    ck_assert_int_eq(sharc__audio_decode(&ctx, rifx.p, rifx.n, &spec, got, 300, NULL, &frames), 0);
    ck_assert_int_eq(memcmp(ref, got, sizeof ref), 0);
    ck_assert_int_eq(sharc__audio_decode(&ctx, rf64.p, rf64.n, &spec, got, 300, NULL, &frames), 0);
    ck_assert_int_eq(memcmp(ref, got, sizeof ref), 0);
    free(plain.p);
    free(rifx.p);
    free(rf64.p);
}
END_TEST

/*
 * Proof that sharc__audio_decode() takes the direct path: with a chunk after the data,
 * libsndfile reads past the samples and zeroes the rest of the buffer, the direct path
 * writes only the frames.
 */
START_TEST(wav_direct_path_is_taken)
{
    bytes b = riff_begin("RIFF");
    put_fmt16(&b, 1);
    put_data(&b, 100, 1);
    put_text_chunk(&b, "JUNK", "after the samples");
    riff_end(&b);
    float direct[164], lib[164];
    for (int i = 0; i < 164; i++)
        direct[i] = lib[i] = 7.0f;
    int64_t fd = 0, fl = 0;
    sharc__decode_spec spec = {0, -1, 0, -1, 0, 0};
    ck_assert_int_eq(sharc__audio_decode(&ctx, b.p, b.n, &spec, direct, 164, NULL, &fd), 0);
    ck_assert_int_eq(sharc__audio_decode_sndfile(&ctx, b.p, b.n, &spec, lib, 164, NULL, &fl), 0);
    ck_assert_int_eq(fd, 100);
    ck_assert_int_eq(fl, 100);
    ck_assert_int_eq(memcmp(direct, lib, 100 * sizeof *lib), 0);
    ck_assert_float_eq(lib[100], 0.0f);
    ck_assert_float_eq(lib[163], 0.0f);
    if (SHARC__WAV_DIRECT) {
        ck_assert_float_eq(direct[100], 7.0f);
        ck_assert_float_eq(direct[163], 7.0f);
    }
    free(b.p);
}
END_TEST

/* Channel 0 of the first `frames` (at most 4096) interleaved frames of `ch` channels. */
static const float *ref_channel0(float *ref, int ch, int64_t frames)
{
    static float first[4096];
    for (int64_t i = 0; i < frames && i < 4096; i++)
        first[i] = ref[i * ch];
    return first;
}

/* A FLAC file written by libsndfile itself: `bits` 8, 16 or 24, noise in every bit. */
static bytes flac_file(int bits, int channels, int64_t frames)
{
    char path[] = "/tmp/sharc-flac-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    SF_INFO info = {0};
    info.samplerate = 16000;
    info.channels = channels;
    info.format = SF_FORMAT_FLAC | (bits == 8    ? SF_FORMAT_PCM_S8
                                    : bits == 16 ? SF_FORMAT_PCM_16
                                                 : SF_FORMAT_PCM_24);
    SNDFILE *f = sf_open_fd(fd, SFM_WRITE, &info, 0);
    ck_assert_ptr_nonnull(f);
    int16_t *pcm = make_pcm(frames, channels, 16000);
    int *wide = malloc((size_t)(frames * channels) * sizeof *wide);
    uint32_t x = 99;
    for (int64_t i = 0; i < frames * channels; i++) {
        x = x * 1664525u + 1013904223u;
        /* left-aligned, as sf_writef_int takes it: the bits below `bits` are dropped */
        wide[i] = (int)((uint32_t)(int32_t)pcm[i] << 16 | ((x >> 8) & 0xFF00u));
    }
    ck_assert_int_eq(sf_writef_int(f, wide, frames), frames);
    sf_close(f);
    bytes b = {0};
    FILE *in = fdopen(fd, "rb");
    ck_assert_ptr_nonnull(in);
    fseek(in, 0, SEEK_END);
    b.n = (size_t)ftell(in);
    b.p = malloc(b.n);
    fseek(in, 0, SEEK_SET);
    ck_assert_uint_eq(fread(b.p, 1, b.n, in), b.n);
    fclose(in);
    unlink(path);
    free(pcm);
    free(wide);
    return b;
}

/*
 * Clean FLAC streams of every width libsndfile converts are decoded by libFLAC directly,
 * bit for bit as libsndfile decodes them, whole, trimmed, padded, by channel; a window at an
 * offset and a damaged frame go to libsndfile (which then gives the answer).
 */
START_TEST(flac_direct_matches_libsndfile)
{
    static const int widths[] = {8, 16, 24};
    for (size_t w = 0; w < 3; w++) {
        for (int ch = 1; ch <= 2; ch++) {
            const int64_t frames = 20000 + 37 * ch;
            bytes b = flac_file(widths[w], ch, frames);
            char what[64];
            snprintf(what, sizeof what, "FLAC %d-bit, %d channel(s)", widths[w], ch);
            float *out = malloc((size_t)(frames * ch) * sizeof *out);
            float *ref = malloc((size_t)(frames * ch) * sizeof *ref);
            sharc__decode_spec all = {0, -1, 0, -1, 0, 0};
            sharc__audio_info info;
            int64_t got = 0, want = 0;
            ck_assert_msg(sharc__audio_decode_direct(b.p, b.n, &all, out, (size_t)(frames * ch),
                                                     &info, &got) == 1,
                          "%s: not taken", what);
            ck_assert_int_eq(got, frames);
            ck_assert_int_eq(info.codec, SHARC__CODEC_FLAC);
            ck_assert_int_eq(info.channels, ch);
            ck_assert_int_eq(info.sampling_rate, 16000);
            ck_assert_int_eq(sharc__audio_decode_sndfile(&ctx, b.p, b.n, &all, ref,
                                                         (size_t)(frames * ch), NULL, &want),
                             0);
            ck_assert_int_eq(want, frames);
            ck_assert_msg(!memcmp(out, ref, (size_t)(frames * ch) * sizeof *out), "%s: samples",
                          what);
            /* Not silence, and every width's low bits are there. */
            ck_assert_msg(ref[0] < -0.99f, "%s: first sample %g", what, ref[0]);
            int low_bits = 0;
            for (int i = 0; i < 100; i++)
                low_bits |= (int)(ref[i] * 8388608.0f) & 0xFF;
            ck_assert_int_eq(low_bits != 0, widths[w] == 24);
            all_same_as_sndfile(b.p, b.n, what);
            /* A window from the start of the audio: its frames, bit for bit. */
            sharc__decode_spec head = {0, 1000, 0, 0, 1, 0};
            ck_assert_int_eq(sharc__audio_decode_direct(b.p, b.n, &head, out, (size_t)(frames * ch),
                                                        &info, &got),
                             1);
            ck_assert_int_eq(got, 1000);
            ck_assert_msg(!memcmp(out, ref_channel0(ref, ch, 1000), 1000 * sizeof *out),
                          "%s: window", what);
            same_as_sndfile(b.p, b.n, &head, (size_t)frames, what);
            head.want_frames = frames + 5; /* past the end: libsndfile reports it */
            same_as_sndfile(b.p, b.n, &head, (size_t)frames + 5, what);
            head.tolerance_frames = 5;
            same_as_sndfile(b.p, b.n, &head, (size_t)frames + 5, what);
            /* A window at an offset is libsndfile's (it seeks). */
            sharc__decode_spec window = {100, 1000, 0, 0, 1, 0};
            ck_assert_int_eq(sharc__audio_decode_direct(b.p, b.n, &window, out,
                                                        (size_t)(frames * ch), &info, &got),
                             0);
            /* A damaged frame: libFLAC reports it, so libsndfile decides. */
            b.p[b.n * 6 / 10] ^= 0x55;
            ck_assert_int_eq(
                sharc__audio_decode_direct(b.p, b.n, &all, out, (size_t)(frames * ch), &info, &got),
                0);
            same_as_sndfile(b.p, b.n, &all, (size_t)(frames * ch), what);
            /* Cut short: fewer samples than STREAMINFO promises, libsndfile's too. */
            ck_assert_int_eq(sharc__audio_decode_direct(b.p, b.n / 2, &all, out,
                                                        (size_t)(frames * ch), &info, &got),
                             0);
            same_as_sndfile(b.p, b.n / 2, &all, (size_t)(frames * ch), what);
            free(out);
            free(ref);
            free(b.p);
        }
    }
}
END_TEST

/* `b` with a metadata block of `type` and `body` put right after STREAMINFO (not last). */
static bytes flac_with_block(const bytes *b, int type, const uint8_t *body, size_t len)
{
    bytes out = {malloc(b->n + 4 + len), b->n + 4 + len};
    memcpy(out.p, b->p, 42);
    out.p[42] = (uint8_t)type;
    out.p[43] = (uint8_t)(len >> 16);
    out.p[44] = (uint8_t)(len >> 8);
    out.p[45] = (uint8_t)len;
    memcpy(out.p + 46, body, len);
    memcpy(out.p + 46 + len, b->p + 42, b->n - 42);
    return out;
}

/*
 * Streams libsndfile refuses or reads differently, though every audio frame is sound, are
 * not taken by the direct path: bytes after the last frame (an ID3v1 tag) that libsndfile
 * reads into when it reads to the end, malformed metadata blocks, a second STREAMINFO.
 */
START_TEST(flac_odd_streams_go_to_libsndfile)
{
    const int64_t frames = 10000;
    bytes b = flac_file(16, 1, frames);
    ck_assert_int_eq(b.p[4] & 0x80, 0); /* STREAMINFO is not the last block */
    /* An ID3v1 tag after the audio. */
    bytes tagged = {malloc(b.n + 128), b.n + 128};
    memcpy(tagged.p, b.p, b.n);
    memset(tagged.p + b.n, ' ', 128);
    memcpy(tagged.p + b.n, "TAG", 3);
    const sharc__decode_spec specs[] = {
        {0, frames + 5, 5, -1, 1, 0}, /* a window reaching past the end */
        {0, -1, 0, -1, 1, 0},         /* everything, as a window */
        {0, -1, 0, -1, 0, 0},         /* everything */
        {0, frames, 0, -1, 0, 0},     /* exactly */
        {0, 1000, 0, -1, 1, 0},       /* a window inside: libsndfile reads no further */
    };
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
        same_as_sndfile(tagged.p, tagged.n, &specs[k], (size_t)frames + 5, "FLAC + ID3v1");
    /* Malformed metadata blocks, and a second STREAMINFO that says stereo. */
    static const uint8_t vorbis[8] = {0xFF, 0xFF, 0, 0, 0, 0, 0, 0};
    static const uint8_t picture[8] = {0, 0, 0, 3, 0x7F, 0xFF, 0xFF, 0xFF};
    uint8_t info[34]; /* the true STREAMINFO, put second; the first is made to say stereo */
    memcpy(info, b.p + 8, 34);
    const struct {
        const char *what;
        int type;
        const uint8_t *body;
        size_t len;
    } blocks[] = {
        {"VORBIS_COMMENT of a 65535-byte vendor in 8 bytes", 4, vorbis, sizeof vorbis},
        {"PICTURE of a 2 GiB MIME type in 8 bytes", 6, picture, sizeof picture},
        {"CUESHEET of 8 bytes", 5, vorbis + 2, 6},
        {"a second STREAMINFO, after one that says stereo", 0, info, sizeof info},
    };
    sharc__decode_spec all = {0, -1, 0, -1, 0, 0};
    float *out = malloc((size_t)frames * sizeof *out);
    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
        bytes odd = flac_with_block(&b, blocks[k].type, blocks[k].body, blocks[k].len);
        if (blocks[k].type == 0)
            odd.p[8 + 12] |= 0x02; /* channels - 1 is bits 3..1 of STREAMINFO's byte 12 */
        sharc__audio_info ai;
        int64_t got = 0;
        ck_assert_msg(
            sharc__audio_decode_direct(odd.p, odd.n, &all, out, (size_t)frames, &ai, &got) == 0,
            "%s: taken", blocks[k].what);
        same_as_sndfile(odd.p, odd.n, &all, (size_t)frames, blocks[k].what);
        free(odd.p);
    }
    /* The same stream without them is taken. */
    sharc__audio_info ai;
    int64_t got = 0;
    ck_assert_int_eq(sharc__audio_decode_direct(b.p, b.n, &all, out, (size_t)frames, &ai, &got), 1);
    free(out);
    free(tagged.p);
    free(b.p);
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
    tcase_add_test(tc, damaged_ogg_pages_are_errors);
    tcase_add_test(tc, non_finite_samples_are_errors);
    tcase_add_test(tc, flac_of_unknown_length);
    tcase_add_test(tc, encode_rejects_bad_arguments);
    tcase_add_test(tc, libsndfile_errors_logged_once);
    tcase_add_test(tc, encode_reports_allocation_failure);
    suite_add_tcase(s, tc);

    tc = tcase_create("wav_direct");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, wav_parse_finds_the_samples);
    tcase_add_test(tc, wav_direct_converts_every_value);
    tcase_add_test(tc, wav_direct_matches_libsndfile);
    tcase_add_test(tc, wav_edge_files_match_libsndfile);
    tcase_add_test(tc, wav_direct_path_is_taken);
    tcase_add_test(tc, flac_direct_matches_libsndfile);
    tcase_add_test(tc, flac_odd_streams_go_to_libsndfile);
    tcase_add_test(tc, decode_from_a_file_matches_memory);
    suite_add_tcase(s, tc);

    return tu_run_suite(s);
}

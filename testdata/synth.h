/* Deterministic synthetic cuts for sharc's tests and benchmarks.
 *
 * sharc-gen (testdata/gen_corpus.c) writes its shards from these functions, and the reader tests
 * include this header to recompute the exact samples and metadata of any cut from its seed. Every
 * function is pure integer or IEEE double arithmetic without libm calls, so the results are
 * bit-identical on every platform and compiler.
 *
 * A cut is identified by its global index in the corpus; synth_cut_seed() turns (corpus seed,
 * index) into the cut seed from which everything else about the cut is drawn.
 */
#ifndef SHARC_TESTDATA_SYNTH_H
#define SHARC_TESTDATA_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/** splitmix64 finaliser: a bijective 64-bit mixer. */
static inline uint64_t synth_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/** Seed of cut `cut_index` of the corpus `corpus_seed`. It fits in 53 bits, so a JSON number
 *  holds it exactly whatever the parser. */
static inline uint64_t synth_cut_seed(uint64_t corpus_seed, uint64_t cut_index)
{
    uint64_t s = synth_mix64(synth_mix64(corpus_seed ^ 0x5348415243ull) + cut_index);
    return s & ((1ull << 53) - 1);
}

/** Draw number `k` (an independent stream per property) of a cut. */
static inline uint64_t synth_draw(uint64_t cut_seed, uint64_t k)
{
    return synth_mix64(cut_seed * 0x100000001B3ull + (k + 1) * 0xD1B54A32D192ED03ull);
}

/** Parabolic approximation of 32768*sin(2*pi*phase/2^32), exact in integers. */
static inline int32_t synth_psine(uint32_t phase)
{
    uint32_t q = (phase >> 16) & 0x7FFFu;
    int32_t y = (int32_t)((q * (32768u - q)) >> 13);
    return (phase & 0x80000000u) ? -y : y;
}

/** Per-cut signal parameters, drawn once from the cut seed (synth_sample() redraws them on every
 *  call; a loop over many frames should use synth_voice_init() and synth_voice_sample()). */
typedef struct synth_voice {
    uint64_t seed;
    uint64_t step1, step2; /* phase increments per frame, 2^32 = one cycle */
    uint64_t phase0;
    int64_t amp1, amp2;
} synth_voice;

static inline void synth_voice_init(synth_voice *v, uint64_t cut_seed)
{
    v->seed = cut_seed;
    v->step1 = 29527900u + synth_draw(cut_seed, 1) % 206700000u;
    v->step2 = 268435456u + synth_draw(cut_seed, 2) % 536870912u;
    v->amp1 = 4000 + (int64_t)(synth_draw(cut_seed, 3) % 2000u);
    v->amp2 = 1500 + (int64_t)(synth_draw(cut_seed, 4) % 1500u);
    v->phase0 = synth_draw(cut_seed, 5);
}

/** Sample `frame` (>= 0) of `channel` of a cut, as PCM16: two per-cut tones (about 110-880 Hz and
 *  1-3 kHz at 16 kHz) plus uniform noise in [-512, 511]. |sample| <= 9511, about 0.29 of full
 *  scale, so it never clips. A decoder that normalises PCM16 the libsndfile way returns exactly
 *  sample / 32768.0f for WAV and FLAC. */
static inline int16_t synth_voice_sample(const synth_voice *v, int64_t frame, int channel)
{
    uint64_t ph = v->phase0 + (uint64_t)channel * 0x40000000u;
    uint32_t p1 = (uint32_t)(v->step1 * (uint64_t)frame + ph);
    uint32_t p2 = (uint32_t)(v->step2 * (uint64_t)frame + (ph >> 32));
    int64_t tone = (v->amp1 * synth_psine(p1) + v->amp2 * synth_psine(p2)) / 32768;
    uint64_t h = synth_mix64(v->seed ^ ((uint64_t)frame * 0x9E3779B97F4A7C15ull) ^
                             ((uint64_t)channel << 56));
    int64_t noise = (int64_t)(h & 1023u) - 512;
    return (int16_t)(tone + noise);
}

/** synth_voice_sample() of the cut with seed `cut_seed`. */
static inline int16_t synth_sample(uint64_t cut_seed, int64_t frame, int channel)
{
    synth_voice v;
    synth_voice_init(&v, cut_seed);
    return synth_voice_sample(&v, frame, channel);
}

/** The float a libsndfile-style reader returns for a PCM16 sample. */
static inline float synth_sample_f32(uint64_t cut_seed, int64_t frame, int channel)
{
    return (float)synth_sample(cut_seed, frame, channel) / 32768.0f;
}

/** Nominal duration of a cut, uniform in [min_s, max_s). */
static inline double synth_duration(uint64_t cut_seed, double min_s, double max_s)
{
    double u = (double)(synth_draw(cut_seed, 6) >> 11) * (1.0 / 9007199254740992.0);
    return min_s + u * (max_s - min_s);
}

/** Number of frames of a cut at `rate`: round_half_up(synth_duration() * rate), at least 1. The
 *  metadata duration is then num_samples / rate, so Lhotse's rule
 *  num_samples = round_half_up(duration * rate) gives back exactly this count. */
static inline int64_t synth_num_samples(uint64_t cut_seed, double min_s, double max_s, int rate)
{
    double x = synth_duration(cut_seed, min_s, max_s) * (double)rate + 0.5;
    int64_t n = (int64_t)x; /* x > 0, so truncation is floor */
    return n < 1 ? 1 : n;
}

/** Transcript of a cut: 2 to 10 words separated by single spaces. `variant` gives independent
 *  texts for several rows of one recording (NeMo sub-segments). Writes at most cap-1 bytes plus
 *  a NUL and returns the length. */
static inline size_t synth_text(uint64_t cut_seed, unsigned variant, char *buf, size_t cap)
{
    /* Mostly ASCII, some Latin letters with diacritics and one character outside the BMP (its
     * JSON \u escape needs a surrogate pair). */
    static const char *const words[] = {
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
        "hello",
        "world",
        "speech",
        "signal",
        "shard",
        "batch",
        "token",
        "model",
        "one",
        "two",
        "three",
        "four",
        "five",
        "seven",
        "forty-two",
        "again",
        "café",
        "naïve",
        "zażółć",
        "gęślą",
        "jaźń",
        "größe",
        "straße",
        "łódź",
        "über",
        "crème",
        "brûlée",
        "smörgås",
        "\xF0\x9F\x8E\xA4",
        "o'clock",
        "it's",
        "ok",
    };
    uint64_t base = 100 + 1000 * (uint64_t)variant;
    unsigned n = 2 + (unsigned)(synth_draw(cut_seed, base) % 9u);
    size_t len = 0;
    if (cap == 0)
        return 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        const char *w =
            words[synth_draw(cut_seed, base + 1 + i) % (sizeof words / sizeof words[0])];
        size_t wl = strlen(w);
        if (len + wl + 2 > cap)
            break;
        if (i > 0)
            buf[len++] = ' ';
        memcpy(buf + len, w, wl);
        len += wl;
        buf[len] = '\0';
    }
    return len;
}

/** Speaker of a cut: "spk00" .. "spk07". `buf` needs 6 bytes. */
static inline void synth_speaker(uint64_t cut_seed, char buf[6])
{
    snprintf(buf, 6, "spk%02u", (unsigned)(synth_draw(cut_seed, 8) % 8u));
}

/** Language of a cut: "en", "de" or "pl". */
static inline const char *synth_language(uint64_t cut_seed)
{
    static const char *const langs[] = {"en", "de", "pl"};
    return langs[synth_draw(cut_seed, 9) % 3u];
}

/** Lhotse Shar cut id of global cut `cut_index`. Most ids are "spkNN-utt-IIIIII"; every 7th
 *  (index % 7 == 3) contains dots, another every 7th (index % 7 == 5) contains slashes (the tar
 *  member is then in a "directory"), and index % 17 == 9 is a slashed id whose file name part
 *  alone is over 100 bytes, so that its tar members need a pax header (no ustar prefix split). Ids
 * never contain spaces, "..", or a trailing slash. */
static inline void synth_shar_id(uint64_t cut_seed, uint64_t cut_index, char *buf, size_t cap)
{
    char spk[6];
    unsigned long long i = (unsigned long long)cut_index;
    synth_speaker(cut_seed, spk);
    if (cut_index % 17 == 9)
        snprintf(buf, cap,
                 "%s/utt-with-a-deliberately-long-file-name-that-does-not-fit-into-the-100-byte-"
                 "name-field-of-a-ustar-header-%06llu",
                 spk, i);
    else if (cut_index % 7 == 3)
        snprintf(buf, cap, "%s.sess%u.utt.%06llu", spk, (unsigned)(i % 4), i);
    else if (cut_index % 7 == 5)
        snprintf(buf, cap, "%s/sess-%u/utt-%06llu", spk, (unsigned)(i % 4), i);
    else
        snprintf(buf, cap, "%s-utt-%06llu", spk, i);
}

/** WebDataset key of global cut `cut_index`: no dots; index % 5 == 2 has a directory part. */
static inline void synth_wds_key(uint64_t cut_seed, uint64_t cut_index, char *buf, size_t cap)
{
    char spk[6];
    synth_speaker(cut_seed, spk);
    snprintf(buf, cap, cut_index % 5 == 2 ? "%s/utt-%06llu" : "%s-utt-%06llu", spk,
             (unsigned long long)cut_index);
}

/** Source path that a NeMo manifest would have named before tarring (the member name is this
 *  path "squashed"); index % 4 == 1 has dots in the directory and the file stem. */
static inline void synth_nemo_source(uint64_t cut_seed, uint64_t cut_index, const char *ext,
                                     char *buf, size_t cap)
{
    char spk[6];
    unsigned long long i = (unsigned long long)cut_index;
    synth_speaker(cut_seed, spk);
    if (cut_index % 4 == 1)
        snprintf(buf, cap, "/data/%s/sess.%u/utt.%06llu.%s", spk, (unsigned)(i % 3), i, ext);
    else
        snprintf(buf, cap, "/data/%s/utt_%06llu.%s", spk, i, ext);
}

#endif

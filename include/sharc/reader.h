/*
 * sharc: reading audio shards into decoded cuts.
 */
#ifndef SHARC_READER_H
#define SHARC_READER_H

#include "sharc/batch.h"
#include "sharc/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Shard layouts. */
typedef enum sharc_layout {
    SHARC_LAYOUT_AUTO = 0, ///< detect from the files found
    SHARC_LAYOUT_SHAR,     ///< Lhotse Shar: cuts.NNNNNN.jsonl[.gz] + recording.NNNNNN.tar
    SHARC_LAYOUT_NEMO,     ///< NeMo tarred audio: audio_N.tar + manifest_N.json
    SHARC_LAYOUT_WDS,      ///< WebDataset-style tars: key.flac + key.json / key.txt
} sharc_layout;

/** Features computed from each batch's audio. */
typedef enum sharc_features {
    SHARC_FEATURES_NONE = 0,  ///< the audio only
    SHARC_FEATURES_FBANK = 1, ///< NeMo's log-mel filterbank (FilterbankFeatures)
} sharc_features;

/** What the reader does when a cut or shard is bad. */
typedef enum sharc_error_policy {
    SHARC_ON_ERROR_FAIL = 0, ///< return the error from sharc_reader_next()
    SHARC_ON_ERROR_SKIP,     ///< skip the cut (or the rest of the shard), count and log it
} sharc_error_policy;

/**
 * Kinds of problems found in shards. Each is counted in sharc_reader_stats and
 * reported through sharc_reader_settings.on_problem.
 */
#define SHARC_PROBLEM_MAP(X)                                                                       \
    X(ARCHIVE, "archive", "unreadable, truncated or corrupt archive or compressed stream")         \
    X(JSON, "json", "invalid metadata (JSON) line or member")                                      \
    X(ID_MISMATCH, "id_mismatch", "member name does not match the cut id")                         \
    X(ORPHAN_MEMBER, "orphan_member", "archive member without metadata")                           \
    X(MISSING_MEMBER, "missing_member", "metadata without archive member")                         \
    X(DECODE, "decode", "audio could not be decoded")                                              \
    X(LENGTH, "length", "decoded length differs from metadata beyond tolerance")                   \
    X(AUDIO_FORMAT, "audio_format", "sampling rate or channel count differs from expected")        \
    X(TOO_LARGE, "too_large", "member or line larger than the configured cap")                     \
    X(LAYOUT, "layout", "shard files missing, unequal or unpaired")                                \
    X(NON_FINITE, "non_finite", "decoded audio holds a NaN or infinite sample")

typedef enum sharc_problem {
#define SHARC_X_(name, str, desc) SHARC_PROBLEM_##name,
    SHARC_PROBLEM_MAP(SHARC_X_)
#undef SHARC_X_
        SHARC_PROBLEM_COUNT ///< the kinds this header knows (see sharc_reader_stats)
} sharc_problem;

/**
 * The room for problem kinds in sharc_reader_stats.problems: fixed, so that a kind added
 * later does not move the fields after it. SHARC_PROBLEM_COUNT of them are in use.
 */
#define SHARC_PROBLEM_CAPACITY 32

/** The short machine name of a problem kind ("id_mismatch"); "unknown" if out of range. */
SHARC_API const char *sharc_problem_name(sharc_problem p);

/**
 * A problem report. Strings are valid only during the callback; any may be NULL when
 * unknown. `message` is the full human text, naming shard, member and cut id.
 */
typedef struct sharc_problem_report {
    sharc_problem kind; ///< what went wrong
    int code;           ///< the sharc result code (SHARC_ERR_*)
    const char *shard;  ///< path of the shard file concerned
    const char *member; ///< archive member or metadata line concerned
    const char *cut_id; ///< cut id concerned
    const char *message;
    /** 1 when the shard is not read to its end after this problem: the rest of it is
     *  skipped (a problem of the whole shard under SHARC_ON_ERROR_SKIP) or the reader stops
     *  here (SHARC_ON_ERROR_FAIL); 0 when reading goes on in the same shard. */
    int shard_left;
} sharc_problem_report;

/** One extra field of a cut (Shar fields other than cuts/recording, WebDataset extras). */
typedef struct sharc_field {
    const char *name;   ///< field name ("target_recording", "lang_id", "txt", ...)
    const char *member; ///< archive member name; NULL for JSON-lines fields
    const char *json; ///< metadata as JSON text (tar .json member or the jsonl value); may be NULL
    const uint8_t *data; ///< data member bytes; NULL for JSON-lines fields
    size_t nbytes;       ///< size of data
} sharc_field;

/**
 * One cut. Everything it points to is owned by the reader and stays valid until the
 * next call to sharc_reader_next() or sharc_reader_close().
 */
typedef struct sharc_cut {
    const char *id;            ///< unique cut id (Shar id, NeMo audio_filepath, WebDataset key)
    double duration;           ///< seconds, from metadata
    int sampling_rate;         ///< Hz (from the tar .json when present, else the cut line)
    int channels;              ///< channels in `samples`
    int64_t num_samples;       ///< frames per channel in `samples` (= metadata num_samples)
    const float *samples;      ///< interleaved [num_samples * channels]; NULL when decode is off
    const char *text;          ///< supervision texts joined by a space; NULL when none
    const char *speaker;       ///< first speaker among the supervisions; NULL when none
    const char *language;      ///< first language among the supervisions; NULL when none
    const char *json;          ///< the raw metadata: cut line, manifest row or key.json
    const char *shard;         ///< path of the archive that held the audio
    const char *member;        ///< audio member name in that archive
    const uint8_t *audio;      ///< the encoded audio bytes of the member
    size_t audio_nbytes;       ///< size of audio
    double offset;             ///< start of the cut inside the member, seconds (NeMo offset)
    uint64_t epoch;            ///< epoch this cut belongs to (0-based)
    uint32_t shard_index;      ///< index of the shard in the dataset's sorted shard list
    uint64_t position;         ///< 0-based position of the cut within its shard (cuts that
                               ///< failed count too: positions only grow)
    size_t n_fields;           ///< number of extra fields present on this cut
    const sharc_field *fields; ///< extra fields, absent ones (.nodata, placeholders) omitted
    /** The speed factor applied (sharc_augment_settings; 1 = none): `duration` and
     *  `num_samples` are the perturbed ones. */
    double speed;
    double gain; ///< the linear gain applied to `samples` (1 = none)
    /** The SNR in dB at which noise was mixed in (sharc_augment_settings.noise); NAN when
     *  none was. */
    double snr_db;
} sharc_cut;

/**
 * Batching: Lhotse's DynamicBucketingSampler semantics (docs/sampler.md maps every field
 * to its Lhotse and NeMo name). Used by sharc_reader_next_batch().
 */
typedef struct sharc_sampler_settings {
    /** sizeof(sharc_sampler_settings), set by sharc_reader_default_settings() (the rule is in
     *  sharc/common.h) */
    uint32_t struct_size;
    /** padded seconds per batch, n * longest: CLI --batch-duration, Python batch_duration,
     *  NeMo's batch_duration (NeMo's max_duration is max_cut_duration); 0 = none (default 0) */
    double max_duration;
    uint32_t max_cuts;         ///< cuts per batch; 0 = none (default 0)
    double quadratic_duration; ///< q: a cut counts as d + d*d/q; 0 = off (default 0)
    uint32_t num_buckets;      ///< buckets estimated from metadata when no bins (default 10)
    const double *bins;        ///< sorted bucket boundaries, copied; NULL = estimate (default NULL)
    size_t n_bins;             ///< number of bins (default 0)
    const uint32_t
        *bucket_batch_size; ///< fixed cuts per bucket, n_bins of them (NeMo
                            ///< OOMptimizer); excludes max_duration/max_cuts (default NULL)
    /** The first N cuts (that pass the duration filters) whose durations estimate the bins;
     *  those the buffer cannot hold are read ahead for their durations only (default 10000) */
    uint32_t num_cuts_for_bins_estimate;
    uint32_t buffer_size;      ///< cuts held in the buckets, at most (default 20000)
    uint64_t max_buffer_bytes; ///< encoded audio in the buckets; 0 = no limit (default 1 GiB)
    int shuffle;               ///< random order inside a bucket (default 1)
    int drop_last;             ///< drop the partial batches at the end (default 0)
    int sync_buckets;          ///< synchronized bucket choice across `world_size` (default 1)
    uint32_t world_size;       ///< consecutive batches drawn from one bucket choice (default 1)
    double min_duration;       ///< shorter cuts are filtered out and counted (default 0)
    double max_cut_duration;   ///< longer cuts are filtered out and counted; 0 = none (default 0)
    /** 2D buckets (NeMo's bucket_duration_bins as [duration, tokens] pairs; needs a
     *  tokenizer): the token limit of each of the n_bins bins, whose durations are `bins`,
     *  sorted by duration, then tokens; bucket_batch_size is then required. A cut goes to
     *  the bucket NeMo's find_smallest_bucket picks in strict mode (the first bin whose
     *  duration fits, then the first among the bins of that duration whose token limit
     *  fits), and one that fits none is filtered out and counted. Copied. NULL: 1D (default) */
    const double *bin_tokens;
    /** Tokens per second, at most (needs a tokenizer): one cap for every cut, or, with
     *  bin_tokens, one per bin (a cut over its bucket's cap fits no bucket); filtered cuts
     *  are counted. Copied. NULL: none (default) */
    const double *max_tps;
    size_t n_max_tps;    ///< values in max_tps: 1, or n_bins with bin_tokens (default 0)
    double min_tps;      ///< cuts with fewer tokens per second are filtered out (default 0)
    uint32_t min_tokens; ///< cuts with fewer tokens are filtered out (default 0)
    uint32_t max_tokens; ///< cuts with more tokens are filtered out; 0 = none (default 0)
    /** NeMo's MultimodalSamplingConstraint: seconds of audio one token is worth (its
     *  token_equivalent_duration). Set, a cut of d seconds measures ceil(d / t) audio tokens
     *  instead of d seconds for the bins (given or estimated), the buckets (the first
     *  dimension of 2D bins too) and the batch rule, and quadratic_duration is NeMo's
     *  quadratic_factor of that length. 0: seconds (default) */
    double token_equivalent_duration;
    /** With token_equivalent_duration: audio tokens per batch, as max_duration counts
     *  seconds (n cuts x the longest, quadratic term included); excludes max_duration and
     *  bucket_batch_size. 0: none (default) */
    uint32_t batch_tokens;
    uint8_t reserved[12]; ///< room for later fields; must be zero
} sharc_sampler_settings;

/**
 * Speed and volume perturbation of each cut (docs/conditioning.md maps every field to its
 * NeMo and Lhotse name), applied on the decode threads after resampling. Each cut's draws
 * come from the reader's seed, the cut's id and its epoch only, so batches are the same
 * whatever the threads, the mesh or a resume. Fill with sharc_augment_default_settings().
 */
typedef struct sharc_augment_settings {
    /** sizeof(sharc_augment_settings), set by sharc_augment_default_settings() */
    uint32_t struct_size;
    /** Speed factors, each in (0, 3], copied (Lhotse perturb_speed: resample by the factor,
     *  keep the rate): a cut gets one, drawn uniformly, and n samples become
     *  perturb_num_samples(n, factor), its duration with them, before bucketing. NULL =
     *  none (default NULL). */
    const double *speed_perturb;
    size_t n_speed_perturb;    ///< number of speed factors (default 0)
    double speed_perturb_prob; ///< share of cuts perturbed, in [0, 1] (default 1)
    /** Gain range in dB, low <= high: a perturbed cut's samples are scaled by 10^(g/20),
     *  g uniform in it. Off when both are 0 (default 0, 0). */
    double volume_perturb_db[2];
    double volume_perturb_prob; ///< share of cuts whose volume is perturbed, in [0, 1] (default 1)
    /** Noise to mix in (Lhotse CutMix): paths of a dataset in any layout sharc reads, as
     *  `paths` (default NULL: none). Needs `sampling_rate`: the noise dataset is streamed
     *  without end (its shards shuffled anew each pass, seeded from `seed` and `dp_rank`:
     *  each data-parallel slot in an order of its own, slot 0's as before), converted to
     *  it (channel 0), by a read-ahead thread (docs/conditioning.md). */
    const char *const *noise;
    size_t n_noise;         ///< number of noise paths (default 0)
    double noise_snr_db[2]; ///< SNR range in dB, low <= high, uniform per cut (default 10, 20)
    double noise_prob;      ///< share of cuts that get noise, in [0, 1] (default 0.5)
    /** Decoded noise the noise stream holds at most, in bytes of float samples (and a sum
     *  per 256 of them; 64 at least): cuts draw their noise from the first 16 noise cuts within its
     * first half, and a noise cut is kept to its first quarter (default 64 MiB) */
    uint64_t noise_max_bytes;
    uint8_t reserved[16]; ///< room for later fields; must be zero
} sharc_augment_settings;

/** Reader settings. Fill with sharc_reader_default_settings() first. */
typedef struct sharc_reader_settings {
    /** sizeof(sharc_reader_settings), set by sharc_reader_default_settings() (the rule is in
     *  sharc/common.h) */
    uint32_t struct_size;
    const char *const *paths; ///< directories, shard files, brace or wildcard patterns (required)
    size_t n_paths;           ///< number of paths (required, >= 1)
    sharc_layout layout;      ///< shard layout (default AUTO)
    uint64_t seed;            ///< shard order (epoch e: seed + e) and sampler seed (default 0)
    int shuffle_shards;       ///< permute shards each epoch (default 1)
    uint64_t epochs;          ///< epochs to read; 0 = forever (default 1)
    int dp_rank;              ///< this data-parallel slot (default 0)
    int dp_size;              ///< number of data-parallel slots; with fewer shards than
                              ///< slots, slots that read the same shard share its cuts
                              ///< (default 1)
    sharc_error_policy on_error; ///< error policy (default FAIL)
    int decode;                  ///< decode audio into float samples (default 1)
    /** Required rate in Hz, a cut at another is an error (no resampling); 0 = any, but the
     *  rows of a batch share one rate: a cut drawn into a batch of another rate is an
     *  AUDIO_FORMAT problem (default 0) */
    int sampling_rate;
    int channel;             ///< keep only this channel of the stored audio; -1 = all (default -1)
    double length_tolerance; ///< seconds of decoded-length mismatch fixed by pad/trim (default 0.5)
    uint64_t max_member_bytes;      ///< cap on one archive member (default 1 GiB)
    uint64_t max_line_bytes;        ///< cap on one metadata line or JSON member (default 16 MiB)
    const char *nemo_text_field;    ///< NeMo manifest key for the transcript (default "text")
    const char *nemo_lang_field;    ///< NeMo manifest key for the language (default "lang")
    sharc_sampler_settings sampler; ///< batching, for sharc_reader_next_batch()
    /** Decode threads for batches, 0..4096; 0 = online cores (default 0). With more than
     *  one, lane threads also read the next shards ahead, within read_ahead_bytes: one per
     *  decode thread for compressed tars, one per 4 when the first shard is a plain tar
     *  (none below 4), at most 8; at least 4 for remote shards (docs/storage.md), also
     *  with one decode thread; none when read_ahead_bytes is 0. */
    int n_threads;
    int prefetch; ///< batches prepared ahead, 0..1024; 0 = 2 per thread + 2, at most 16 (default 0)
    int max_held_batches; ///< batches the caller may hold at once, 1..1024 (default 4)
    /** A blob from sharc_reader_state_save(), copied; NULL = start. Checked by the first
     *  sharc_reader_next_batch(), not by open: a corrupt one, or one saved with other shards,
     *  seed or settings, fails that call with SHARC_ERR_STATE ("cannot resume: ..."). Batches
     *  only: sharc_reader_next() refuses it with SHARC_ERR(EINVAL). */
    const void *resume_state;
    size_t resume_state_size; ///< size of resume_state
    /** Problem sink (default NULL). In batch mode it is called from the library's threads,
     *  never from two at once. */
    void (*on_problem)(void *cookie, const sharc_problem_report *p);
    void *problem_cookie;      ///< passed to on_problem (default NULL)
    sharc_logger logger;       ///< log sink (default: stderr, WARN)
    sharc_allocator allocator; ///< host allocator (default: malloc)
    /** Batches: metadata and encoded audio read ahead of the sampler, over all read-ahead
     *  threads; 0 = read on the planner thread only (default 64 MiB). Reading scales with
     *  threads only as far as this holds the shards being read ahead: raise it towards
     *  threads x shard size when reading is the limit (many cores, compressed shards). */
    uint64_t read_ahead_bytes;
    /** Features added to every batch (sharc_reader_next_batch(); not to single cuts)
     *  (default NONE). FBANK adds `features` f32 [B, n_mels, frames] and `feature_lens` i32
     *  [B] (docs/features.md); the batches' audio must then be at fbank_sample_rate, which
     *  a batch at another rate fails with SHARC_ERR_AUDIO_MISMATCH. */
    sharc_features features;
    /** With features on, keep `audio` in the batch too (default 1); 0 drops it once the
     *  features are computed (`audio_lens` stays). Without features the audio is always
     *  kept. */
    int keep_audio;
    int fbank_n_mels;      ///< mel bins, 1..256 (default 80; NeMo's models use 64, 80, 128)
    int fbank_sample_rate; ///< Hz the audio must be at (default 16000)
    int fbank_window;      ///< window length in samples, <= fbank_n_fft (default 400)
    int fbank_hop;         ///< hop in samples (default 160)
    int fbank_n_fft;       ///< FFT size, even (default 512)
    /** The frame count is rounded up to a multiple of this; 0 = no rounding (default 16) */
    int fbank_pad_to;
    double fbank_preemph; ///< pre-emphasis coefficient in [0, 1); 0 = none (default 0.97)
    /** Standard deviation of a Gaussian dither added to the samples, in [0, 1]; 0 = off
     *  (default 0). Seeded from `seed` and the cut (its epoch, shard and position), so runs
     *  repeat whatever the threads, and each epoch gets new noise. */
    double fbank_dither;
    /** Remote shards (s3://, http://, https://; docs/storage.md): retries of a transfer that
     *  fails on the way (connection reset or refused, no data for timeout_ms, HTTP 5xx, 429),
     *  each resuming at the byte where the last stopped, after a backoff doubling from
     *  0.1 s to at most 5 s; 0 = none, at most 1000 (default 5) */
    uint32_t retries;
    /** Remote shards: a transfer that receives nothing for this long fails (and is retried);
     *  also the limit on connecting, in ms; 0 = 30000, at most 86400000 (default 30000) */
    uint32_t timeout_ms;
    /** A NeMo input_cfg file (YAML or JSON; docs/mixing.md): read the mixture of the
     *  datasets it lists instead of `paths` (which must then be empty), each next cut drawn
     *  from a source chosen in proportion to its weight with a generator seeded by `seed`.
     *  NULL: read `paths` (default). */
    const char *input_cfg;
    /** Mixtures: sources with a shard open at once; when one more is drawn, the least
     *  recently used closes its shard and re-opens it where it was when next drawn. The
     *  batches do not depend on it. 0: no bound (default). */
    uint32_t max_open_streams;
    /** Mixtures: read each source once, an exhausted source leaving the draw, and end when
     *  all are read (evaluation). 0: each source repeats, reshuffled, without end (default;
     *  `epochs` applies to single datasets only). */
    int mix_finite;
    /** The same NeMo input_cfg as YAML or JSON text (NUL-terminated), for a program that
     *  builds the structure in memory (the Python package passes a list or dict this way);
     *  errors name it "input_cfg text". Not with `input_cfg` or `paths`. NULL (default). */
    const char *input_cfg_text;
    /** Where the batches' tensors are made (docs/features.md): SHARC_DEVICE_HOST (or 0), in
     *  host memory (default), or SHARC_DEVICE_CUDA, on CUDA device `device_ordinal`: each
     *  host batch is uploaded once, its features (features = FBANK) computed there, and its
     *  numeric tensors handed out as device tensors (string columns stay on the host). A
     *  build without CUDA, an ordinal no device has, or a device that cannot be used fails
     *  sharc_reader_open with the device named in the message. Batches only. */
    sharc_device device;
    int device_ordinal; ///< the CUDA device of SHARC_DEVICE_CUDA, >= 0 (default 0)
    /** Speed and volume perturbation (docs/conditioning.md), copied at open; NULL = none
     *  (default NULL). Fill with sharc_augment_default_settings() first. Given, batches
     *  hold each cut's `speed`, `gain` and `snr_db` f32 [B] (sharc/batch.h). */
    const sharc_augment_settings *augment;
    /** Convert every cut at another rate than `sampling_rate` (which must then be set) to
     *  it on the decode threads, with libsoxr: a cut of n samples at rate r gets
     *  round(n * sampling_rate / r) samples, half up (Lhotse's compute_num_samples), and
     *  keeps its duration; windows are cut at the source rate, then converted. 0: a cut at
     *  another rate is an AUDIO_FORMAT problem (default 0). */
    int resample;
    /** SentencePiece models that tokenize each cut's transcript (its supervisions' texts
     *  joined by a space) once, when its metadata is read (docs/sampler.md): one "PATH", or
     *  one "LANG=PATH" per language as NeMo's AggregateTokenizer (each language's ids offset
     *  by the vocabulary sizes of the models before it; a cut's language from its metadata
     *  or its mixture source's `lang` tag). Loaded by sharc_reader_open, which fails naming
     *  a model that cannot be read. Batches then hold `tokens` i32 [B, L] (padded with the
     *  first model's pad id, or 0 when it has none) and `token_lens` i32 [B]; a cut whose
     *  transcript is not UTF-8, or whose language has no model, is a JSON problem. Strings
     *  are read only by open. NULL: no tokens (default). */
    const char *const *tokenizer;
    size_t n_tokenizer;  ///< number of entries of `tokenizer` (default 0)
    uint8_t reserved[8]; ///< room for later fields; must be zero
} sharc_reader_settings;

/**
 * Counters, cumulative since open (a resumed reader starts from those of its state). In
 * batch mode they are those of the last batch returned, the same at a given step whatever
 * n_threads, prefetch and timing are, and what a state saved then holds: `batches` counts
 * the batches returned, `cuts` and `audio_seconds` the cuts in them, the other counters
 * what the reader had read and met when it planned the last one (a cut that fails to decode
 * under SKIP counts with the batch that held it, or with the next one returned when no row
 * of its batch was left). Batches prepared ahead do not count yet, though the problem
 * callback may already have reported what was found in them. After a batch that fails to
 * decode, they are what was read to plan it, with the cuts of the batches returned and its
 * problems; after SHARC_END or any other error, the totals. `stage_seconds` is always the
 * time spent so far.
 */
typedef struct sharc_reader_stats {
    uint64_t cuts;           ///< cuts returned (batch mode: see above)
    double audio_seconds;    ///< sum of those cuts' durations
    uint64_t shards;         ///< shards opened
    uint64_t skipped_cuts;   ///< cuts skipped under the SKIP policy (a member
                             ///< without a row is a problem, not a cut)
    uint64_t skipped_shards; ///< shards (or shard rests) skipped
    /** Problems seen, by kind (sharc_problem); entries from n_problem_kinds on are zero. */
    uint64_t problems[SHARC_PROBLEM_CAPACITY];
    uint64_t batches;       ///< batches returned
    uint64_t filtered_cuts; ///< cuts outside the duration and token limits, or fitting no 2D
                            ///< bin (by reason: sharc_reader_filter_counts())
    uint64_t dropped_cuts;  ///< cuts dropped at the end by drop_last
    double padded_seconds;  ///< sum over batches of B * T / rate
    /** Seconds spent per stage, summed over threads: reading files, decompressing and
     *  parsing (tar, JSON, pairing), sampling (buckets, buffered copies), decoding audio,
     *  collating (laying out batches, strings). Filled in batch mode. */
    double stage_seconds[5];
    /** The problem kinds the library counts (its SHARC_PROBLEM_COUNT): a program built with
     *  an older header learns from it that `problems` holds kinds it has no name for. */
    uint32_t n_problem_kinds;
    /** Remote shards (docs/storage.md), like stage_seconds the totals so far, over every
     *  thread: transfers retried, bytes received (bodies, error answers and listings
     *  included), seconds the reading threads waited for remote bytes (part of
     *  stage_seconds[SHARC_STAGE_READ] too). */
    uint32_t net_retries;
    uint64_t net_bytes;
    double net_wait_seconds;
    /** Seconds the decode threads spent computing log-mel features on the CPU (features =
     *  FBANK with host batches), summed over threads; not part of stage_seconds. */
    double feature_seconds;
    /** Seconds the decode threads spent converting samples (resampling, speed and volume
     *  perturbation; docs/conditioning.md), summed over threads; part of
     *  stage_seconds[SHARC_STAGE_DECODE]. Filled in batch mode. */
    double condition_seconds;
    /** Seconds the noise stream's read-ahead thread spent reading and decoding noise
     *  (sharc_augment_settings.noise; docs/conditioning.md), its waits for room not counted;
     *  not part of stage_seconds, 0 without noise. */
    double noise_seconds;
    /** Room for later counters, so that the struct keeps its size (sharc/common.h); zero. */
    uint8_t reserved[16];
} sharc_reader_stats;

/**
 * Why batching filtered a cut out (sharc_reader_filter_counts()), named after the setting
 * that did (sharc_sampler_settings). A cut is counted once, under the first reason that
 * holds, in this order.
 */
#define SHARC_FILTER_MAP(X)                                                                        \
    X(MIN_DURATION, "min_duration", "shorter than min_duration")                                   \
    X(MAX_DURATION, "max_cut_duration", "longer than max_cut_duration")                            \
    X(MIN_TOKENS, "min_tokens", "fewer tokens than min_tokens")                                    \
    X(MAX_TOKENS, "max_tokens", "more tokens than max_tokens")                                     \
    X(MIN_TPS, "min_tps", "fewer tokens per second than min_tps")                                  \
    X(MAX_TPS, "max_tps", "more tokens per second than max_tps, or than its 2D bucket's")          \
    X(NO_BUCKET, "no_bucket", "fits no 2D bucket by its duration and tokens")

typedef enum sharc_filter {
#define SHARC_X_(name, str, desc) SHARC_FILTER_##name,
    SHARC_FILTER_MAP(SHARC_X_)
#undef SHARC_X_
        SHARC_FILTER_COUNT ///< the reasons this header knows
} sharc_filter;

/** The short machine name of a filter reason ("max_tps"); "unknown" if out of range. */
SHARC_API const char *sharc_filter_name(sharc_filter f);

/** Indices of sharc_reader_stats.stage_seconds. */
enum sharc_stage {
    SHARC_STAGE_READ = 0,
    SHARC_STAGE_DECOMPRESS = 1,
    SHARC_STAGE_SAMPLE = 2,
    SHARC_STAGE_DECODE = 3,
    SHARC_STAGE_COLLATE = 4,
};

/**
 * The device stage's counters (sharc_reader_settings.device = SHARC_DEVICE_CUDA), cumulative
 * since open; all zero for a reader of host batches.
 */
typedef struct sharc_device_stats {
    uint64_t batches;             ///< batches made on the device
    double seconds;               ///< wall time from each host batch to its device batch, summed
    double feature_seconds;       ///< device time of the feature kernels (CUDA events), summed
    uint64_t upload_bytes;        ///< bytes copied from host to device
    uint64_t feature_read_bytes;  ///< bytes of audio and lengths the feature kernels read
    uint64_t feature_write_bytes; ///< bytes of features and feature lengths they wrote
    /** Device and pinned allocations (cudaMalloc, cudaHostAlloc) made so far, for pooled
     *  batch tensors, staging and work space, and their bytes: they stop growing once the
     *  largest batch has been met. */
    uint64_t allocations;
    uint64_t allocated_bytes;
    uint8_t reserved[64]; ///< room for later counters; zero
} sharc_device_stats;

typedef struct sharc_reader sharc_reader;

/** Fill `s` with defaults. */
SHARC_API void sharc_reader_default_settings(sharc_reader_settings *s);

/** Fill `s` with defaults (no perturbation; probabilities 1). */
SHARC_API void sharc_augment_default_settings(sharc_augment_settings *s);

/**
 * Open a reader. Finds the shards (no audio is read yet) and validates settings.
 * @param out receives the reader; set to NULL on failure
 * @return 0, SHARC_ERR(EINVAL) for bad settings (the sampler's too, except a missing batch
 *         size: see sharc_reader_next_batch), SHARC_ERR_FORMAT when no shards or an unknown
 *         layout are found, SHARC_ERR(ENOMEM), or the
 *         errno of a path that cannot be read (SHARC_ERR(ENOENT), SHARC_ERR(EACCES), ...).
 *         The message of a failed open is logged, since there is no handle to hold it.
 * Settings strings are copied; the caller keeps ownership of `s`.
 */
SHARC_API int sharc_reader_open(sharc_reader **out, const sharc_reader_settings *s);

/**
 * Return the next cut.
 * @param cut receives a pointer owned by the reader, valid until the next call
 * @return 0 with a cut, SHARC_END after the last epoch, SHARC_ERR(EINVAL) on a batch
 *         reader or one opened with a resume_state, or a negative error (details in
 *         sharc_reader_last_error()). After an error under the FAIL policy the reader
 *         stays failed and returns the same error.
 */
SHARC_API int sharc_reader_next(sharc_reader *r, const sharc_cut **cut);

/**
 * The token ids of the cut the last sharc_reader_next() returned, made by the reader's
 * tokenizer (sharc_reader_settings.tokenizer) from its transcript.
 * @param ids receives a pointer owned by the reader, valid until the next call to
 *        sharc_reader_next() (NULL when there are none)
 * @param n receives the number of ids
 * @return 0, or SHARC_ERR(EINVAL) for a reader without a tokenizer or before a cut
 */
SHARC_API int sharc_reader_cut_tokens(sharc_reader *r, const int32_t **ids, size_t *n);

/**
 * Return the next batch (see include/sharc/batch.h for its tensors). The first call starts
 * the decode threads; a reader then serves batches only (sharc_reader_next fails with
 * EINVAL, and vice versa).
 *
 * Multi-channel audio must be reduced to one channel with settings.channel.
 * @param batch receives a batch owned by the reader until sharc_batch_release()
 * @return 0 with a batch, SHARC_END after the last one, SHARC_ERR_BACKPRESSURE when the
 *         caller already holds max_held_batches, SHARC_ERR(EINVAL) on a cut reader or when
 *         none of max_duration, max_cuts and bucket_batch_size is set, SHARC_ERR_STATE (first
 *         call) for a resume_state that is refused, or a negative error (details in
 *         sharc_reader_last_error()); errors under the FAIL policy stick.
 * The sequence of batches depends only on the data, the seed and the settings, never on
 * n_threads, prefetch or timing.
 */
SHARC_API int sharc_reader_next_batch(sharc_reader *r, sharc_batch **batch);

/**
 * Save where a batch reader stands after the last batch it returned, as a small blob that
 * sharc_reader_settings.resume_state accepts: the epoch, the shard order position and the
 * position in the open shard, the sampler's RNG states, the buffered cuts as locators and
 * the counters. Restoring re-reads only the shards those locators point into and the open
 * shard up to its position, never the epoch from its start.
 * @param buf receives the blob; may be NULL to ask for the size
 * @param size receives the blob's size
 * @return 0, SHARC_ERR(ENOSPC) when cap is too small (*size tells how much is needed),
 *         SHARC_ERR(EINVAL) when the reader is not serving batches or has returned no batch
 *         yet (a resumed reader returns the state it was resumed from until then)
 */
SHARC_API int sharc_reader_state_save(sharc_reader *r, void *buf, size_t cap, size_t *size);

/**
 * Pack the states saved by all D data-parallel slots of a run (states[i] saved by slot i,
 * sizes[i] bytes each) into one blob that resume_state accepts on any number of slots D'
 * (elastic resume; docs/training-loop.md). With D' = D each slot resumes from its own state
 * exactly as it would from that state alone. Otherwise every slot splits the same way what
 * the D slots had left of their latest epoch (the rest of their shards, and the cuts their
 * samplers held, re-read from their shards only), so that over the two runs every cut of
 * that epoch is delivered once; later epochs are planned for D' slots. A bundle whose state
 * i was not saved by slot i of D with these shards and reader settings (a slot missing or
 * repeated, another dataset, other settings) fails the first sharc_reader_next_batch() with
 * SHARC_ERR_STATE naming the slot. A mixture (input_cfg) is split source by source: each
 * source's pass (its one epoch when finite) that the D slots had begun, with the draw
 * started afresh on every new slot (docs/training-loop.md, "Mixtures").
 * @param buf receives the blob; may be NULL to ask for the size
 * @param size receives the bundle's size
 * @return 0, SHARC_ERR(ENOSPC) when cap is too small (*size tells how much is needed),
 *         SHARC_ERR(EINVAL) for a NULL argument, no states or more than 65535
 */
SHARC_API int sharc_reader_pack_states(const void *const *states, const size_t *sizes, size_t n,
                                       void *buf, size_t cap, size_t *size);

/**
 * The message of the error the last call on this reader returned ("" when none). Valid until
 * the next call. After a call that returned 0 or SHARC_END it is either "" or the text of a
 * problem skipped under SHARC_ON_ERROR_SKIP: read skipped problems from the problem callback
 * and sharc_reader_get_stats(), not from here.
 */
SHARC_API const char *sharc_reader_last_error(const sharc_reader *r);

/** Copy the reader's counters into `out`. */
SHARC_API void sharc_reader_get_stats(const sharc_reader *r, sharc_reader_stats *out);

/**
 * The cuts that batching filtered out, by reason: counts[k] for sharc_filter k, for k below
 * both `n` and the returned count. They sum to sharc_reader_stats.filtered_cuts and follow
 * its rule (those of the last batch returned, the same whatever the threads, and restored by
 * a resume; a state saved by a sharc without these counts restores the total only, and the
 * reasons count from zero). All zero for a cut reader, which filters nothing.
 * @return SHARC_FILTER_COUNT of the library, which may exceed `n` (a program built with an
 *         older header), also for NULL counts with `n` 0 (which asks for it); 0 for a NULL
 *         reader, or NULL counts with `n` above 0
 */
SHARC_API size_t sharc_reader_filter_counts(const sharc_reader *r, uint64_t *counts, size_t n);

/** Copy the device stage's counters into `out` (zero for a reader of host batches). */
SHARC_API void sharc_reader_get_device_stats(const sharc_reader *r, sharc_device_stats *out);

/**
 * Measure CUDA device `ordinal`'s device-to-device copy bandwidth: cudaMemcpy of a 256 MiB
 * buffer, best of a few, counting the bytes read and written. Takes a fraction of a second
 * and 512 MiB of device memory for that time. The caller's current device is unchanged.
 * @param bytes_per_second receives the bandwidth
 * @return 0, SHARC_ERR(EINVAL) (NULL, a negative ordinal), SHARC_ERR_UNSUPPORTED (a build
 *         without CUDA) or SHARC_ERR_CUDA (no such device, out of memory), with the reason
 *         logged through `logger` (NULL: the default logger)
 */
SHARC_API int sharc_device_copy_bandwidth(int ordinal, double *bytes_per_second,
                                          const sharc_logger *logger);

/** The number of shards found (before the data-parallel split). */
SHARC_API size_t sharc_reader_num_shards(const sharc_reader *r);

/**
 * The path of shard `i` (0 <= i < sharc_reader_num_shards) in the sorted shard list that
 * sharc_cut.shard_index refers to: its audio archive (the recording tar of a Shar shard,
 * audio_N.tar of a NeMo one, the tar of a WebDataset one), as in sharc_cut.shard and in
 * problem reports. NULL when i is out of range. Owned by the reader.
 */
SHARC_API const char *sharc_reader_shard_path(const sharc_reader *r, size_t i);

/**
 * The number of files and subdirectories found under the paths given that are not read:
 * stray files beside the shards, files of another layout, subdirectories, FIFOs. Each was
 * named in a warning when the reader was opened.
 */
SHARC_API size_t sharc_reader_num_ignored_paths(const sharc_reader *r);

/** The layout in use (after detection); SHARC_LAYOUT_AUTO for a mixture. */
SHARC_API sharc_layout sharc_reader_layout(const sharc_reader *r);

/**
 * A mixture's sources (input_cfg), in the file's order, groups flattened; 0 for a reader of
 * `paths`. A cut's source is sharc_reader_source_of_shard(r, cut->shard_index): a mixture's
 * shards are its sources' shards one source after another.
 */
SHARC_API size_t sharc_reader_num_sources(const sharc_reader *r);
/** Source `i`'s entry in the file ("input_cfg[2].input_cfg[0]"), its effective weight (the
 *  sources' sum to 1) and its tags (`lang` named `language`); NULL / 0 out of range. */
SHARC_API const char *sharc_reader_source_name(const sharc_reader *r, size_t i);
SHARC_API double sharc_reader_source_weight(const sharc_reader *r, size_t i);
SHARC_API size_t sharc_reader_source_tags(const sharc_reader *r, size_t i,
                                          const char *const **names, const char *const **values);
/** Source `i`'s cuts and seconds of audio returned so far (in cuts, or in the batches
 *  handed out), for its realised share; call from the thread that reads. */
SHARC_API void sharc_reader_source_stats(const sharc_reader *r, size_t i, uint64_t *cuts,
                                         double *seconds);
/** The source shard `shard` belongs to (0 for a reader of `paths`). */
SHARC_API size_t sharc_reader_source_of_shard(const sharc_reader *r, size_t shard);

/**
 * The duration bins a batch reader's buckets use: those of the settings, those saved in the
 * state it resumed from, or those estimated from the first num_cuts_for_bins_estimate cuts.
 * Known once sharc_reader_next_batch() has returned a batch.
 * @param n receives the number of bins (0 with one bucket, or when not known)
 * @return the bins, owned by the reader and valid until it is closed; NULL when not known
 *         (no batch returned yet, or a cut reader)
 */
SHARC_API const double *sharc_reader_bins(const sharc_reader *r, size_t *n);

/** Close a reader and free everything it owns. NULL-safe; sets *r to NULL. */
SHARC_API void sharc_reader_close(sharc_reader **r);

/**
 * The paths one entry of sharc_reader_settings.paths stands for, as the reader expands it
 * (docs/formats.md), for tools that must find the same files:
 * - a path that exists is itself;
 * - otherwise its braces are expanded as NeMo expands `tarred_audio_filepaths`: NeMo's
 *   `_OP_`/`_CL_` are braces, and so are (), [] and <> around a range (`audio_(0..7).tar`);
 *   then Python's `braceexpand` with escape=False: ranges of integers or letters, up or down,
 *   with an optional step (`{0..10..2}`), zero-padded when an endpoint has a leading zero,
 *   lists (`{a,b}`), nesting; any other group stands for itself;
 * - then each result that does not exist and holds `*` or `?` is matched as a shell would,
 *   in byte order (`[`, `]` and `\` stand for themselves).
 * A directory comes back as its path, not listed; a path with no pattern comes back as
 * given whether or not it exists. An http(s) URL with a query string (a presigned URL) comes
 * back with its query replaced by "?…" (UTF-8), braces expanded in its path only: what
 * messages and outputs show, and a path this process's readers read with the query.
 * @param path     the path or pattern
 * @param out      receives `*n` NUL-terminated paths in one block, which the caller frees
 *                 with sharc_free(); NULL on failure
 * @param n        receives the number of paths (>= 1 on success, 0 on failure)
 * @param err      receives the message on failure, naming the path (may be NULL)
 * @param err_size the capacity of `err`
 * @return 0; SHARC_ERR(EINVAL) for unbalanced braces or braces nested over 64 deep;
 *         SHARC_ERR(ENOENT) when a wildcard matches nothing; an errno of a directory that
 *         cannot be read; SHARC_ERR_TOO_LARGE past 1,000,000 paths; SHARC_ERR(ENOMEM).
 *         Any thread.
 */
SHARC_API int sharc_reader_expand_path(const char *path, char ***out, size_t *n, char *err,
                                       size_t err_size);

/**
 * Estimate duration bucket boundaries exactly as Lhotse's `estimate_duration_buckets`:
 * sort the durations, and start a new bucket at the first duration after the running
 * total exceeds sum/num_buckets (the sum taken as numpy does). Metadata only: given the
 * same durations and num_buckets, the bins are bit-identical to Lhotse's. A cut of
 * duration d then belongs to bucket `bisect_left(bins, d)`.
 * @param durations  n durations in seconds, finite and >= 0 (order does not matter)
 * @param num_buckets buckets wanted, 2 <= num_buckets <= n
 * @param bins_out   receives the bins; room for num_buckets - 1 values
 * @param n_bins_out receives how many bins were written (<= num_buckets - 1; repeated
 *                   values are possible, as in Lhotse)
 * @return 0, SHARC_ERR(EINVAL) for bad arguments (logged), SHARC_ERR(ENOMEM). Any thread.
 */
SHARC_API int sharc_estimate_duration_bins(const double *durations, size_t n, int num_buckets,
                                           double *bins_out, size_t *n_bins_out);

/**
 * sharc_reader_next_batch(), waiting at most `timeout_ms` milliseconds for the batch, so that
 * a caller can wait in slices and do something else in between (the Python binding checks
 * for Ctrl-C). A batch that is not ready in time gives SHARC_ERR_TIMEOUT and changes
 * nothing: the reader stays usable, and the next call (timed or not) waits for the same
 * batch, so none is lost or repeated. Timeouts do not stick as errors do.
 * The first call of a reader starts its pipeline before the wait; with a resume_state that
 * restores the buffered cuts, reading their shards on the caller's thread, in any time.
 * @param timeout_ms the longest wait; 0 only takes a batch that is ready; < 0 waits as long
 *                   as it takes (sharc_reader_next_batch())
 * @return what sharc_reader_next_batch() returns, or SHARC_ERR_TIMEOUT
 */
SHARC_API int sharc_reader_next_batch_timed(sharc_reader *r, sharc_batch **batch, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_READER_H */

/*
 * The reader's internal cut: metadata plus the still-encoded audio bytes, as produced by
 * a layout's shard stream and before decoding. It owns its buffers and is reused from
 * cut to cut, so a steady stream allocates nothing.
 */
#ifndef SHARC_SRC_CUT_H
#define SHARC_SRC_CUT_H

#include <stdint.h>

#include "base/buf.h"
#include "base/ctx.h"

#define SHARC__MAX_FIELDS 16

typedef struct sharc__field_data {
    const char *name; ///< field name, owned by the dataset
    int present;      ///< 0 for .nodata/.nometa pairs and jsonl placeholders
    int is_tar;       ///< tar field (member + json + data) or jsonl field (json only)
    sharc__buf member;
    sharc__buf json;
    sharc__buf data;
} sharc__field_data;

/**
 * What conditioning (decode/condition.h) makes of a cut, drawn when the cut is described:
 * the rate and length of its samples once converted, and its speed factor and gain.
 */
typedef struct sharc__cut_cond {
    int rate;            ///< Hz of the conditioned samples (the cut's own unless resampled)
    int64_t num_samples; ///< their length
    double speed;        ///< speed factor, 1 = none
    double gain;         ///< linear gain, 1 = none
    uint64_t noise;      ///< the draw that picks the noise cut and its offset; 0 = no noise
    double snr_db;       ///< the SNR of the noise mixed in
    /** The noise cut assigned to it where batches are planned (decode/condition.h), one
     *  reference held by whoever holds the cut; NULL until then. */
    struct sharc__noise_cut *noise_cut;
} sharc__cut_cond;

typedef struct sharc__rawcut {
    sharc__buf id;
    sharc__buf text;     ///< supervision texts joined by ' '
    sharc__buf speaker;  ///< first supervision's speaker
    sharc__buf language; ///< first supervision's language
    int has_text, has_speaker, has_language;
    sharc__buf json;   ///< raw metadata line
    sharc__buf member; ///< audio member name
    const char *shard; ///< audio archive path, owned by the dataset
    sharc__buf audio;  ///< encoded audio bytes (empty when left in the file or lent)
    /** Encoded audio lent by the stream (sharc__stream_opts.lend_audio): audio_size bytes,
     * valid until the stream's next call; `audio` stays empty. */
    const uint8_t *audio_lent;
    int audio_in_file;      ///< the audio was left in `shard` (lazy member): audio_size bytes
    uint64_t audio_at;      ///< at this offset
    uint64_t audio_file_id; ///< the identity of `shard` when it was opened (sharc__file_id)
    uint64_t audio_size;
    double duration;     ///< seconds, from metadata
    double offset;       ///< seconds into the member where the cut starts
    int window;          ///< duration is a window into a longer member (NeMo offset rows)
    int sampling_rate;   ///< from metadata, 0 = unknown
    int channels;        ///< from metadata, 0 = unknown
    int64_t num_samples; ///< from metadata, -1 = unknown
    uint64_t epoch;
    uint32_t shard_index;
    uint64_t position;
    sharc__cut_cond cond; ///< set when the cut is described (sharc__decode_describe)
    size_t n_fields;
    sharc__field_data fields[SHARC__MAX_FIELDS];
    /** The transcript's token ids, int32 (4 bytes each), when the reader has a tokenizer
     *  (plan/tokenizer.h): made by the walk, once per cut. */
    sharc__buf tokens;
    int has_tokens;
} sharc__rawcut;

/** Reset the metadata of `c` for the next cut, keeping its buffers. */
void sharc__rawcut_reset(sharc__rawcut *c);
/** The encoded audio bytes of `c` held in memory (its own or lent), or NULL; `*n` their size. */
const uint8_t *sharc__rawcut_audio(const sharc__rawcut *c, size_t *n);
void sharc__rawcut_free(sharc__ctx *ctx, sharc__rawcut *c);

#endif /* SHARC_SRC_CUT_H */

/*
 * Metadata parsing with cJSON: Lhotse cut lines and recording manifests, NeMo manifest
 * rows, WebDataset key.json members. Parsers fill a sharc__rawcut and return 0 or
 * SHARC_ERR_JSON with a message in ctx->error (the caller adds shard and line).
 */
#ifndef SHARC_SRC_JSON_H
#define SHARC_SRC_JSON_H

#include <stddef.h>

#include "plan/cut.h"

/**
 * Longest duration or offset metadata may give, in seconds (about 116 days): beyond any
 * recording, so a larger value is corrupt, and sample counts computed from it would not fit
 * their integers. Parsers reject it with an error naming the key and the value.
 */
#define SHARC__MAX_SECONDS 1e7

/* At most this many channels, as libsndfile (SF_MAX_CHANNELS): metadata that give more are a
 * problem of the cut, not a buffer size. */
#define SHARC__MAX_CHANNELS 1024

/* At most this many samples (all channels together) per byte of encoded audio: FLAC's
 * constant subframes, the densest coding of any codec read here, stay below 8192. Metadata
 * that claim more for a member are a problem of the cut, not a buffer size. */
#define SHARC__MAX_SAMPLES_PER_BYTE 16384

/** A Lhotse cut line (MonoCut): id, duration, supervisions, recording placeholder. */
int sharc__json_lhotse_cut(sharc__ctx *ctx, const char *line, size_t len, sharc__rawcut *c);

/**
 * A Lhotse recording manifest (the tar `.json` member): sampling_rate, num_samples,
 * channel_ids. These win over the values from the cut line.
 */
int sharc__json_lhotse_recording(sharc__ctx *ctx, const char *text, size_t len, sharc__rawcut *c);

/**
 * A Lhotse custom jsonl field line {"cut_id": ..., "<field>": value}. `value` receives the
 * value as it is written in the line (empty and *present = 0 for a placeholder line).
 */
int sharc__json_lhotse_field(sharc__ctx *ctx, const char *line, size_t len, const char *field,
                             sharc__buf *cut_id, sharc__buf *value, int *present);

/** The fields of a NeMo manifest row that the reader needs. */
typedef struct sharc__nemo_row {
    char *audio_filepath; ///< as written in the manifest (may carry -subN)
    double duration;      ///< seconds, < 0 if absent
    double offset;        ///< seconds (0 if absent)
    int skipme;           ///< _skipme is truthy
    long long shard_id;   ///< -1 if absent
} sharc__nemo_row;

/**
 * Parse a NeMo manifest row. Text and language come from `text_field` / `lang_field`
 * into c (c->json gets the raw line). `row->audio_filepath` is allocated with ctx.
 */
int sharc__json_nemo_row(sharc__ctx *ctx, const char *line, size_t len, const char *text_field,
                         const char *lang_field, sharc__nemo_row *row, sharc__rawcut *c);

/**
 * Only the shard_id of a NeMo row (for grouping an aggregate manifest); -1 when absent.
 * @return 0, or SHARC_ERR_JSON when the row is not a JSON object (the message in ctx)
 */
int sharc__json_nemo_shard_id(sharc__ctx *ctx, const char *line, size_t len, long long *shard_id);

/** A WebDataset key.json member: duration, text, speaker, language, sampling_rate, num_samples. */
int sharc__json_wds_meta(sharc__ctx *ctx, const char *text, size_t len, sharc__rawcut *c);

#endif /* SHARC_SRC_JSON_H */

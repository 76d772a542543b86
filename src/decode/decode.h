/*
 * Decoding one cut: from a raw cut (metadata and encoded audio, or where the audio lies in
 * its shard file) to its samples. The walk describes each cut as it reads it (rate,
 * channels and length known and consistent); cut mode and the batch pipeline's workers
 * decode it. Nothing here keeps state between calls but the header cache, which belongs
 * to its caller's thread.
 */
#ifndef SHARC_SRC_DECODE_H
#define SHARC_SRC_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "decode/audio.h"
#include "decode/condition.h"
#include "formats/stream.h"
#include "io/fetch.h"
#include "plan/cut.h"

/** The settings decoding obeys (the reader's). */
typedef struct sharc__decode_opts {
    double length_tolerance; ///< seconds a decoded length may differ from the metadata's
    int channel;             ///< keep only this channel, or -1 for all
    int sampling_rate;       ///< the rate every cut must have, or 0 for any
    int stream_out;          ///< the output is read much later (rows of batches planned ahead)
    sharc__cond_opts cond;   ///< conditioning, planned when a cut is described (zero: none)
} sharc__decode_opts;

/** What decoding one cut needs, whichever thread does it. */
typedef struct sharc__decode_job {
    const uint8_t *audio; ///< NULL when the audio was left in the shard file (in_file)
    size_t audio_len;
    int sampling_rate; ///< from metadata or header, > 0
    int channels;      ///< stored channels, > 0
    int64_t num_samples;
    double offset;
    int window;
    const char *shard, *member, *id;
    int in_file; ///< audio_len bytes at byte `at` of `shard` (sharc__fetch)
    uint64_t at;
    uint64_t file_id;     ///< the identity of `shard` when its headers were read (sharc__file_id)
    sharc__cut_cond cond; ///< the rate and length of the samples made (sharc__decode_cond)
} sharc__decode_job;

/** The header of the last member left in its file that was described: rows that cut one
 *  long recording ask for it in turn. Zero-initialise; one per thread. */
typedef struct sharc__header_cache {
    const char *shard;
    uint64_t at, file_id;
    sharc__audio_info info;
} sharc__header_cache;

/** What decoding the raw cut `c` needs (its strings stay owned by `c`). */
sharc__decode_job sharc__decode_job_of(const sharc__rawcut *c);

/**
 * Make the rate, channels and length of `c` known, from its metadata or else its audio
 * header (read with `f`, remembered in `cache`), and check that they agree with each other,
 * with the member's size and with the settings `o`; then draw its conditioning (c->cond,
 * and c->duration when its speed changes).
 * @return 0, or an error described by ctx->error and `err` (the problem's kind and where)
 */
int sharc__decode_describe(sharc__ctx *ctx, sharc__fetcher *f, sharc__header_cache *cache,
                           const sharc__decode_opts *o, sharc__rawcut *c, sharc__stream_error *err);

/**
 * Decode one cut into `out` (room for `cap` floats) with `ctx` for error text. Checks the
 * rate and channel count against the metadata and the settings `o`.
 * @param f the calling thread's fetcher, for audio left in the shard file (j->in_file)
 * @param out_channels receives the channels written per frame
 * @return 0 or an error described by ctx->error and `err`
 */
int sharc__decode(const sharc__decode_opts *o, sharc__ctx *ctx, sharc__fetcher *f,
                  const sharc__decode_job *j, float *out, size_t cap, int *out_channels,
                  sharc__stream_error *err);

/**
 * Decode one cut and condition it (j->cond): `out` receives j->cond.num_samples frames at
 * j->cond.rate (room for `cap` floats), decoded into cn's buffer first when conditioning
 * changes them, else in place as sharc__decode() does.
 * @return 0 or an error described by ctx->error and `err`
 */
int sharc__decode_cond(const sharc__decode_opts *o, sharc__ctx *ctx, sharc__fetcher *f,
                       sharc__conditioner *cn, const sharc__decode_job *j, float *out, size_t cap,
                       int *out_channels, sharc__stream_error *err);

#endif /* SHARC_SRC_DECODE_H */

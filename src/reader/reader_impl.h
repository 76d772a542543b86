/*
 * The reader's internals, shared by reader.c (shard walking, cuts) and pipeline.c
 * (batches on worker threads).
 */
#ifndef SHARC_SRC_READER_IMPL_H
#define SHARC_SRC_READER_IMPL_H

#include <pthread.h>

#include "decode/audio.h"
#include "base/ctx.h"
#include "plan/cut.h"
#include "plan/dataset.h"
#include "io/fetch.h"
#include "reader/reader.h"
#include "formats/stream.h"

typedef struct sharc__pipeline sharc__pipeline;

/** Where the shard walk stands: enough to resume it. */
typedef struct sharc__walk_pos {
    uint64_t epoch;
    uint64_t order_pos;   ///< shards of this epoch's order opened so far
    uint32_t shard_index; ///< the open shard (valid when order_pos > 0)
    uint64_t consumed;    ///< stream entries (cuts and cut-level problems) taken from it
    int shard_open;       ///< a stream is open on shard_index
    uint64_t epoch_cuts;  ///< cuts produced in this epoch, less those the sampler filtered out
} sharc__walk_pos;

struct sharc_reader {
    sharc__ctx ctx;
    sharc_reader_settings s;
    char **paths;
    char *nemo_text_field, *nemo_lang_field;
    double *bins;
    uint32_t *bucket_batch_size;
    uint8_t *resume;
    sharc__dataset ds;
    uint64_t state_hash; ///< sharc__resume_hash, fixed once the reader is open
    const sharc__stream_ops *ops;
    sharc__stream_opts sopts;
    uint32_t *order;
    size_t n_order;
    sharc__walk_pos pos;
    sharc__stream *stream; ///< the open shard, read on this thread
    /* Batch mode with read-ahead: the open shard's entries come from a lane instead. */
    struct sharc__readahead *ra;
    struct sharc__lane *lane;
    uint64_t ahead_epoch, ahead_pos; ///< next plan position to request from ra
    uint32_t *ahead_order;           ///< shard order of ahead_epoch
    size_t n_ahead_order;
    double read_seconds; ///< time spent producing stream entries, on whichever thread
    int quiet;           ///< replaying after a restore: problems were reported the first time
    sharc__rawcut raw;
    sharc__stream_error err;
    sharc__fetcher fetch; ///< audio left in shard files, read on this thread
    /* The header of the last member left in its file that was described (job_info). */
    const char *info_shard;
    uint64_t info_at, info_file_id;
    sharc__audio_info info;
    float *samples;
    size_t samples_cap; ///< in floats
    sharc_cut cut;
    sharc_field fields[SHARC__MAX_FIELDS];
    sharc_reader_stats stats;
    int mode;   ///< 0 unused, 1 cuts, 2 batches
    int failed; ///< the walk's error that stopped it (planner's thread in batch mode)
    /** Batch mode, caller's thread: the error sharc_reader_next_batch returns from now on,
     *  set when the caller reaches it in step order (the planner's `failed` comes earlier,
     *  while it plans ahead, and must not cut the batches planned before it short). */
    int batch_failed;
    sharc__pipeline *pipe;
    /** Held around on_problem calls once worker threads exist, so the callback is never
     *  entered by two threads at once. */
    pthread_mutex_t *report_lock;
};

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
    uint64_t file_id; ///< the identity of `shard` when its headers were read (sharc__file_id)
} sharc__decode_job;

/**
 * Pull the next raw cut into r->raw with its rate and length known (from metadata or the
 * audio header), applying the error policy. Problems are reported unless r->quiet.
 * @return 0, SHARC_END, or the error that stops the reader
 */
int sharc__reader_pull(sharc_reader *r);

/**
 * Take the cuts skipped while decoding (`skips`: their cuts, audio and padded seconds,
 * skipped_cuts and problems) out of counters that counted them as returned: the planner
 * counts a batch's cuts before its rows are decoded.
 */
void sharc__stats_take_back(sharc_reader_stats *st, const sharc_reader_stats *skips);

/**
 * Decode one cut into `out` (room for `cap` floats) with `ctx` for error text. Checks the
 * rate and channel count against the metadata and the settings.
 * @param f the calling thread's fetcher, for audio left in the shard file (j->in_file)
 * @param out_channels receives the channels written per frame
 * @return 0 or an error described by ctx->error and `err`
 */
int sharc__reader_decode(const sharc_reader *r, sharc__ctx *ctx, sharc__fetcher *f,
                         const sharc__decode_job *j, float *out, size_t cap, int *out_channels,
                         sharc__stream_error *err);

/** Report a problem (count, callback) without applying the policy. Thread-safe when the
 *  caller holds whatever lock protects r->stats. */
void sharc__reader_report(sharc_reader *r, int code, const sharc__stream_error *e,
                          const char *message);

/** Re-open the walk at `pos`, skipping the entries already consumed in the open shard. */
int sharc__reader_seek(sharc_reader *r, const sharc__walk_pos *pos);

/**
 * Read shard `shard` again from its start, handing each cut (rate and length known, as
 * of `epoch`) to `cb` until it returns > 0 (stop) or < 0 (error). Bad cuts are passed
 * over silently: they were reported when first read.
 */
int sharc__reader_scan_shard(sharc_reader *r, uint64_t epoch, uint32_t shard,
                             int (*cb)(void *cookie, sharc__rawcut *c), void *cookie);

/**
 * Read shards ahead on `n_lanes` threads, each queueing up to `lane_bytes` (readahead.h);
 * the walk then takes each shard's entries from its lane. Batch mode only.
 */
int sharc__reader_readahead_start(sharc_reader *r, int n_lanes, uint64_t lane_bytes);
void sharc__reader_readahead_stop(sharc_reader *r);

#endif /* SHARC_SRC_READER_IMPL_H */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "plan/json.h"
#include "walk/readahead.h"
#include "batching/pipeline.h"
#include "reader/reader_impl.h"
#include "reader/resume.h"

static int copy_array(sharc__ctx *ctx, void **dst, const void *src, size_t n, size_t size)
{
    *dst = NULL;
    if (!src || n == 0)
        return 0;
    *dst = sharc__malloc(ctx, n * size);
    if (!*dst)
        return SHARC_ERR(ENOMEM);
    memcpy(*dst, src, n * size);
    return 0;
}

static int copy_settings(sharc_reader *r, const sharc_reader_settings *s)
{
    sharc__ctx *ctx = &r->ctx;
    r->s = *s;
    r->paths = sharc__calloc(ctx, s->n_paths, sizeof *r->paths);
    if (!r->paths)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < s->n_paths; i++)
        if (!(r->paths[i] = sharc__strdup(ctx, s->paths[i])))
            return SHARC_ERR(ENOMEM);
    r->nemo_text_field = sharc__strdup(ctx, s->nemo_text_field ? s->nemo_text_field : "text");
    r->nemo_lang_field = sharc__strdup(ctx, s->nemo_lang_field ? s->nemo_lang_field : "lang");
    if (!r->nemo_text_field || !r->nemo_lang_field)
        return SHARC_ERR(ENOMEM);
    int rc = copy_array(ctx, (void **)&r->bins, s->sampler.bins, s->sampler.n_bins, sizeof(double));
    if (rc == 0)
        rc = copy_array(ctx, (void **)&r->bucket_batch_size, s->sampler.bucket_batch_size,
                        s->sampler.bucket_batch_size ? s->sampler.n_bins : 0, sizeof(uint32_t));
    if (rc == 0)
        rc = copy_array(ctx, (void **)&r->resume, s->resume_state, s->resume_state_size, 1);
    if (rc < 0)
        return rc;
    r->s.paths = (const char *const *)r->paths;
    r->s.nemo_text_field = r->nemo_text_field;
    r->s.nemo_lang_field = r->nemo_lang_field;
    r->s.sampler.bins = r->bins;
    r->s.sampler.bucket_batch_size = r->bucket_batch_size;
    r->s.resume_state = r->resume;
    r->sopts.max_member_bytes = s->max_member_bytes;
    r->sopts.max_line_bytes = s->max_line_bytes;
    r->sopts.nemo_text_field = r->nemo_text_field;
    r->sopts.nemo_lang_field = r->nemo_lang_field;
    return 0;
}

/* ---- the open shard, read here or by a read-ahead lane ------------------------------ */

static int walk_is_open(const sharc_reader *r)
{
    return r->stream != NULL || r->lane != NULL;
}

static void walk_close(sharc_reader *r)
{
    if (r->lane)
        sharc__readahead_release(r->ra, r->lane);
    r->lane = NULL;
    if (r->stream)
        r->ops->close(&r->stream);
}

/* A plan position: the k-th shard of an epoch's order. */
static uint64_t plan_tag(uint64_t epoch, uint64_t pos)
{
    return epoch << 32 | pos;
}

/* Request the shards after the last one requested, as far as free lanes allow. */
static void plan_ahead(sharc_reader *r)
{
    while (sharc__readahead_has_free_lane(r->ra)) {
        if (r->ahead_pos == r->n_ahead_order) {
            if (r->s.epochs && r->ahead_epoch + 1 >= r->s.epochs)
                return;
            r->ahead_epoch++;
            r->n_ahead_order =
                sharc__dataset_epoch_order(&r->ds, r->s.seed, r->ahead_epoch, r->s.shuffle_shards,
                                           r->s.dp_rank, r->s.dp_size, r->ahead_order);
            r->ahead_pos = 0;
            if (r->n_ahead_order == 0)
                return;
        }
        sharc__readahead_request(r->ra, r->ahead_order[r->ahead_pos],
                                 plan_tag(r->ahead_epoch, r->ahead_pos));
        r->ahead_pos++;
    }
}

/* Forget the requests made and request again from position `pos` of the current epoch. */
static void plan_from(sharc_reader *r, uint64_t pos)
{
    sharc__readahead_cancel(r->ra);
    r->ahead_epoch = r->pos.epoch;
    r->ahead_pos = pos;
    memcpy(r->ahead_order, r->order, r->n_order * sizeof *r->order);
    r->n_ahead_order = r->n_order;
    plan_ahead(r);
}

static int lane_next(sharc_reader *r)
{
    return sharc__readahead_next(r->lane, &r->ctx, &r->raw, &r->err, &r->read_seconds,
                                 &r->ctx.io_seconds);
}

/* Open the shard at the walk's position (order_pos - 1), preferably from a lane. */
static int walk_open(sharc_reader *r)
{
    const sharc__shard *shard = &r->ds.shards[r->pos.shard_index];
    if (!r->ra) {
        double t0 = sharc__now_s();
        int rc = r->ops->open(&r->stream, &r->ctx, shard, &r->sopts, &r->err);
        r->read_seconds += sharc__now_s() - t0;
        return rc;
    }
    uint64_t tag = plan_tag(r->pos.epoch, r->pos.order_pos - 1);
    sharc__lane *l = sharc__readahead_take(r->ra, tag);
    if (!l) {
        plan_from(r, r->pos.order_pos - 1);
        l = sharc__readahead_take(r->ra, tag);
    }
    plan_ahead(r);
    if (!l)
        return sharc__fail(&r->ctx, SHARC_ERR_STATE, "read-ahead lost shard %u (internal error)",
                           r->pos.shard_index);
    r->lane = l;
    int rc = lane_next(r); /* the lane's open */
    if (rc < 0)
        walk_close(r);
    return rc;
}

static int walk_next(sharc_reader *r)
{
    if (r->lane)
        return lane_next(r);
    double t0 = sharc__now_s();
    int rc = r->ops->next(r->stream, &r->raw, &r->err);
    r->read_seconds += sharc__now_s() - t0;
    return rc;
}

int sharc__reader_readahead_start(sharc_reader *r, int n_lanes, uint64_t lane_bytes)
{
    r->ahead_order = sharc__malloc(&r->ctx, r->ds.n_shards * sizeof *r->ahead_order);
    if (!r->ahead_order)
        return SHARC_ERR(ENOMEM);
    return sharc__readahead_create(&r->ra, &r->ctx, r->ops, &r->ds, &r->sopts, n_lanes, lane_bytes);
}

void sharc__reader_readahead_stop(sharc_reader *r)
{
    if (!r->ra)
        return;
    walk_close(r);
    sharc__readahead_destroy(&r->ra);
}

int sharc__reader_open(sharc_reader **out, const sharc_reader_settings *s)
{
    sharc__ctx boot;
    sharc__ctx_init(&boot, &s->allocator, &s->logger);
    sharc_reader *r = sharc__calloc(&boot, 1, sizeof *r);
    *out = NULL;
    if (!r)
        return SHARC_ERR(ENOMEM);
    r->ctx = boot;
    sharc__ctx_set_net(&r->ctx, s->retries, s->timeout_ms);
    sharc__fetcher_init(&r->fetch, 1);
    int rc = copy_settings(r, s);
    if (rc < 0)
        goto fail;
    rc = sharc__dataset_find(&r->ds, &r->ctx, r->s.paths, r->s.n_paths, s->layout,
                             s->max_line_bytes);
    if (rc < 0)
        goto fail;
    r->ops = r->ds.layout == SHARC_LAYOUT_SHAR   ? &sharc__shar_ops
             : r->ds.layout == SHARC_LAYOUT_NEMO ? &sharc__nemo_ops
                                                 : &sharc__wds_ops;
    if (r->ds.n_shards >= (1u << 24)) {
        rc = sharc__fail(&r->ctx, SHARC_ERR_FORMAT, "too many shards (%zu, at most 2^24)",
                         r->ds.n_shards);
        goto fail;
    }
    /* The batching settings too, though only batches use them: a mistake there is reported
     * here, as for every other setting, not at the first batch. */
    if ((rc = sharc__pipeline_check_settings(r)) < 0)
        goto fail;
    if ((size_t)s->dp_size > r->ds.n_shards) {
        rc = sharc__fail(&r->ctx, SHARC_ERR_FORMAT,
                         "%zu shards cannot feed %d data-parallel slots: slot %d would get none",
                         r->ds.n_shards, s->dp_size, s->dp_size - 1);
        goto fail;
    }
    r->order = sharc__malloc(&r->ctx, r->ds.n_shards * sizeof *r->order);
    if (!r->order) {
        rc = SHARC_ERR(ENOMEM);
        goto fail;
    }
    r->n_order = sharc__dataset_epoch_order(&r->ds, s->seed, 0, s->shuffle_shards, s->dp_rank,
                                            s->dp_size, r->order);
    r->state_hash = sharc__resume_hash(r); /* O(shards): once, not per saved state */
    *out = r;
    return 0;
fail:
    /* The handle goes away: the log is the only place left for the message. */
    sharc__log_error_once(&r->ctx);
    sharc__reader_close(&r);
    return rc;
}

void sharc__reader_close(sharc_reader **rp)
{
    sharc_reader *r = *rp;
    if (!r)
        return;
    sharc__ctx *ctx = &r->ctx;
    sharc__pipeline_stop(r);
    walk_close(r);
    sharc__dataset_free(&r->ds, ctx);
    sharc__rawcut_free(ctx, &r->raw);
    sharc__buf_free(ctx, &r->err.member);
    sharc__buf_free(ctx, &r->err.cut_id);
    sharc__fetcher_free(&r->fetch, ctx);
    sharc__free(ctx, r->samples);
    sharc__free(ctx, r->order);
    sharc__free(ctx, r->ahead_order);
    if (r->paths)
        for (size_t i = 0; i < r->s.n_paths; i++)
            sharc__free(ctx, r->paths[i]);
    sharc__free(ctx, r->paths);
    sharc__free(ctx, r->nemo_text_field);
    sharc__free(ctx, r->nemo_lang_field);
    sharc__free(ctx, r->bins);
    sharc__free(ctx, r->bucket_batch_size);
    sharc__free(ctx, r->resume);
    sharc__ctx copy = r->ctx;
    sharc__free(&copy, r);
    *rp = NULL;
}

void sharc__reader_report(sharc_reader *r, int code, const sharc__stream_error *e,
                          const char *message)
{
    r->stats.problems[e->kind]++;
    if (r->s.on_problem) {
        if (r->report_lock)
            pthread_mutex_lock(r->report_lock);
        sharc_problem_report p = {e->kind,
                                  code,
                                  e->path,
                                  e->member.len ? sharc__buf_str(&e->member) : NULL,
                                  e->cut_id.len ? sharc__buf_str(&e->cut_id) : NULL,
                                  message};
        r->s.on_problem(r->s.problem_cookie, &p);
        if (r->report_lock)
            pthread_mutex_unlock(r->report_lock);
    }
}

/*
 * Report a problem, count it, and apply the policy. Returns 0 when the reader should go
 * on (SKIP), else the error, which then sticks.
 */
static int handle_problem(sharc_reader *r, int rc)
{
    sharc__stream_error *e = &r->err;
    if (e->kind >= SHARC_PROBLEM_COUNT) {
        /* Not a data problem (out of memory, ...): no policy applies. Logged once, when
         * it stops the reader (not while the bins' estimate reads ahead, quietly). */
        if (!r->quiet)
            sharc__log_error_once(&r->ctx);
        r->failed = rc;
        return rc;
    }
    if (!r->quiet) {
        /* Skipped problems are warnings; under FAIL this is the error that stops. */
        sharc__log_error(&r->ctx,
                         r->s.on_error == SHARC_ON_ERROR_SKIP ? SHARC_LOG_WARN : SHARC_LOG_ERROR);
        sharc__reader_report(r, rc, e, r->ctx.error);
    }
    if (r->s.on_error == SHARC_ON_ERROR_FAIL) {
        r->failed = rc;
        return rc;
    }
    if (e->shard_fatal) {
        r->stats.skipped_shards++;
        walk_close(r);
        r->pos.shard_open = 0;
    } else if (e->kind != SHARC_PROBLEM_ORPHAN_MEMBER) {
        r->stats.skipped_cuts++; /* a member without a row is no cut: a problem only */
    }
    return 0;
}

static void reset_err(sharc_reader *r)
{
    sharc__stream_error_reset(&r->err);
}

static void set_epoch(sharc_reader *r, uint64_t epoch)
{
    r->pos.epoch = epoch;
    r->n_order = sharc__dataset_epoch_order(&r->ds, r->s.seed, epoch, r->s.shuffle_shards,
                                            r->s.dp_rank, r->s.dp_size, r->order);
}

/* Open the next shard of the plan, moving to the next epoch when needed. */
static int open_next_shard(sharc_reader *r)
{
    while (r->pos.order_pos == r->n_order) {
        if (r->pos.epoch_cuts == 0 && r->s.epochs == 0 && r->stats.shards > 0) {
            /* Not a problem of one shard or cut, so no policy applies: it stops the reader
             * (under SKIP it would otherwise be skipped, and the next epoch tried, forever).
             * Logged by handle_problem, unless the bins' estimate is reading ahead. */
            reset_err(r);
            return sharc__set_error(&r->ctx, SHARC_ERR_FORMAT,
                                    "a whole epoch produced no usable cuts (each was skipped "
                                    "after a problem or filtered out by the duration limits); "
                                    "stopping instead of looping forever");
        }
        if (r->s.epochs && r->pos.epoch + 1 >= r->s.epochs)
            return SHARC_END;
        set_epoch(r, r->pos.epoch + 1);
        r->pos.order_pos = 0;
        r->pos.epoch_cuts = 0;
    }
    r->pos.shard_index = r->order[r->pos.order_pos++];
    r->pos.consumed = 0;
    r->pos.shard_open = 1;
    r->stats.shards++;
    reset_err(r);
    return walk_open(r);
}

static int64_t round_half_up(double x)
{
    return (int64_t)floor(x + 0.5);
}

static int cut_problem(sharc__ctx *ctx, sharc__stream_error *err, int rc, sharc_problem kind,
                       const char *shard, const char *member, const char *id)
{
    return sharc__stream_fail(ctx, err, rc, kind, 0, shard, member, id);
}

void sharc__stats_take_back(sharc_reader_stats *st, const sharc_reader_stats *skips)
{
    st->cuts -= skips->cuts;
    st->audio_seconds -= skips->audio_seconds;
    st->padded_seconds -= skips->padded_seconds;
    st->skipped_cuts += skips->skipped_cuts;
    for (int i = 0; i < SHARC_PROBLEM_COUNT; i++)
        st->problems[i] += skips->problems[i];
}

/* What decoding the raw cut `c` needs (its strings stay owned by `c`). */
static sharc__decode_job raw_job(const sharc__rawcut *c)
{
    size_t held;
    const uint8_t *audio = sharc__rawcut_audio(c, &held);
    sharc__decode_job j = {audio,
                           c->audio_in_file ? (size_t)c->audio_size : held,
                           c->sampling_rate,
                           c->channels,
                           c->num_samples,
                           c->offset,
                           c->window,
                           c->shard,
                           sharc__buf_str(&c->member),
                           sharc__buf_str(&c->id),
                           c->audio_in_file,
                           c->audio_at,
                           c->audio_file_id};
    return j;
}

/* The file `j`'s audio was left in, with its identity then and where the member is. */
static sharc__file_ref job_file(const sharc__decode_job *j)
{
    return (sharc__file_ref){j->shard, j->file_id, j->at, j->audio_len};
}

/* The encoded audio of `j`: its bytes, or read with `f` when it was left in the shard file. */
static int job_audio(sharc__ctx *ctx, sharc__fetcher *f, const sharc__decode_job *j,
                     const uint8_t **audio, sharc__stream_error *err)
{
    const sharc__file_ref file = job_file(j);
    *audio = j->audio;
    if (!j->in_file)
        return 0;
    int rc = sharc__fetch(f, ctx, &file, j->at, j->audio_len, audio);
    if (rc < 0) {
        sharc__wrap_error(ctx, rc, "%s member %s (cut %s)", j->shard, j->member, j->id);
        return cut_problem(ctx, err, rc, SHARC_PROBLEM_ARCHIVE, j->shard, j->member, j->id);
    }
    return 0;
}

/* Members left in their file from this size on may be read in parts (header, window);
 * smaller ones are read whole, their parts would be most of them. */
#define LONG_MEMBER_BYTES (4 * SHARC__FETCH_PIECE)

static int ends_with_wav(const char *name)
{
    size_t n = strlen(name);
    return n >= 4 && strcasecmp(name + n - 4, ".wav") == 0;
}

/*
 * The layout of a WAV member left in its file, from its head and, past its samples, its
 * tail: what parsing the whole member gives (sharc__wav_parse_pieces()), without reading
 * the samples. For long members, of which a row needs the header or a window only.
 * @return 1 with `*wav`; 0 when it cannot be done this way (not a .wav member, not
 *         canonical PCM16 WAV, chunks beyond the pieces); or an error reading the file
 */
static int wav_from_pieces(sharc__ctx *ctx, sharc__fetcher *f, const sharc__decode_job *j,
                           sharc__wav_pcm16 *wav)
{
    const sharc__file_ref file = job_file(j);
    const size_t n = j->audio_len;
    size_t data_end;
    if (!j->in_file || !ends_with_wav(j->member) || n < LONG_MEMBER_BYTES)
        return 0;
    int rc = sharc__fetch_into(f, ctx, &file, j->at, SHARC__FETCH_PIECE, f->head);
    if (rc < 0)
        return rc;
    if (!sharc__wav_data_end(f->head, SHARC__FETCH_PIECE, n, &data_end) ||
        n - data_end > SHARC__FETCH_PIECE)
        return 0;
    if (data_end < n &&
        (rc = sharc__fetch_into(f, ctx, &file, j->at + data_end, n - data_end, f->tail)) < 0)
        return rc;
    const sharc__wav_pieces pieces = {f->head, SHARC__FETCH_PIECE, f->tail, data_end, n};
    return sharc__wav_parse_pieces(&pieces, wav);
}

/* The kind of problem a failed decode is: reading the member from its file failed, the
 * audio did not decode, or it did not fit its metadata. */
static sharc_problem decode_problem(int rc)
{
    if (rc == SHARC_ERR_DECODE)
        return SHARC_PROBLEM_DECODE;
    if (rc == SHARC_ERR_AUDIO_MISMATCH || rc == SHARC_ERR_TOO_LARGE || rc == SHARC_ERR(EINVAL))
        return SHARC_PROBLEM_LENGTH;
    return SHARC_PROBLEM_ARCHIVE;
}

/* A window that covers little of a member left in its file (NeMo rows cutting one long
 * recording), judged by its size as PCM16: worth reading by itself, not the whole member. */
static int small_window(const sharc__decode_job *j)
{
    const uint64_t window_bytes = (uint64_t)(j->num_samples > 0 ? j->num_samples : 0) * 2u *
                                  (uint64_t)(j->channels > 0 ? j->channels : 1);
    return j->in_file && j->window && window_bytes + LONG_MEMBER_BYTES < j->audio_len;
}

/*
 * The samples of a WAV member left in its file are read in parts of this size, each
 * converted while it is still in the core's cache: the buffer stays small whatever the
 * member's length, and the conversion reads from the cache, not from memory.
 */
#define WAV_PART_BYTES ((size_t)128 * 1024)

/*
 * A WAV member left in its file: read its header, then only the samples the cut needs (a
 * window's, or all), WAV_PART_BYTES at a time. The result is the one decoding the whole
 * member gives.
 * @return 1 decoded; 0 not done this way (see wav_from_pieces()), nothing written; or an
 *         error reading the file
 */
static int decode_wav_in_file(sharc__ctx *ctx, sharc__fetcher *f, const sharc__decode_job *j,
                              const sharc__decode_spec *spec, float *out, size_t cap,
                              sharc__audio_info *info, int64_t *frames)
{
    const sharc__file_ref file = job_file(j);
    sharc__wav_pcm16 wav;
    int64_t first, count;
    int rc = wav_from_pieces(ctx, f, j, &wav);
    if (rc <= 0)
        return rc;
    if (!sharc__pcm16_plan(&wav, spec, cap, &first, &count))
        return 0; /* libsndfile decides, and names what does not fit */
    const size_t frame_bytes = 2 * (size_t)wav.channels;
    const int64_t part = (int64_t)(WAV_PART_BYTES / frame_bytes);
    const int out_ch = spec->channel >= 0 ? 1 : wav.channels;
    for (int64_t done = 0; done < count; done += part) {
        const int64_t n = count - done < part ? count - done : part;
        const uint64_t at = j->at + wav.data_offset + (uint64_t)(first + done) * frame_bytes;
        const uint8_t *src;
        if ((rc = sharc__fetch(f, ctx, &file, at, (size_t)n * frame_bytes, &src)) < 0)
            return rc;
        sharc__pcm16_convert_part(&wav, src, n, spec, out + done * out_ch);
    }
    sharc__pcm16_finish(&wav, SHARC__CODEC_WAV, count, spec, out, info, frames);
    return 1;
}

/*
 * The audio header of a cut whose metadata lacks its rate, channels or length. Rows that
 * cut one member left in the file ask in turn, so the last member described is
 * remembered; a long WAV member is described from its head and tail.
 */
static int job_info(sharc_reader *r, const sharc__decode_job *j, sharc__audio_info *info)
{
    const sharc__file_ref file = job_file(j);
    if (j->in_file && r->info_shard == j->shard && r->info_at == j->at &&
        r->info_file_id == j->file_id) {
        *info = r->info;
        return 0;
    }
    sharc__wav_pcm16 wav;
    const uint8_t *audio;
    int rc = wav_from_pieces(&r->ctx, &r->fetch, j, &wav);
    if (rc < 0) {
        sharc__wrap_error(&r->ctx, rc, "%s member %s (cut %s)", j->shard, j->member, j->id);
        return cut_problem(&r->ctx, &r->err, rc, SHARC_PROBLEM_ARCHIVE, j->shard, j->member, j->id);
    }
    if (rc > 0) {
        *info =
            (sharc__audio_info){SHARC__CODEC_WAV, wav.sampling_rate, wav.channels, wav.frames, 0};
    } else {
        int fd;
        if (j->in_file && j->audio_len >= LONG_MEMBER_BYTES) {
            /* libsndfile reads the header from the file, not the whole member. */
            if ((rc = sharc__fetch_fd(&r->fetch, &r->ctx, &file, &fd)) == 0)
                rc = sharc__audio_info_at(&r->ctx, fd, j->at, j->audio_len, r->fetch.io,
                                          sizeof r->fetch.io, info);
        } else {
            if ((rc = job_audio(&r->ctx, &r->fetch, j, &audio, &r->err)) < 0)
                return rc;
            rc = sharc__audio_info_get(&r->ctx, audio, j->audio_len, info);
        }
        if (rc < 0 || info->sampling_rate <= 0 || info->channels <= 0) {
            rc = rc < 0 ? rc : SHARC_ERR_DECODE;
            sharc__wrap_error(&r->ctx, rc, "%s member %s (cut %s)", j->shard, j->member, j->id);
            return cut_problem(&r->ctx, &r->err, rc, decode_problem(rc), j->shard, j->member,
                               j->id);
        }
    }
    if (j->in_file) {
        r->info_shard = j->shard;
        r->info_at = j->at;
        r->info_file_id = j->file_id;
        r->info = *info;
    }
    return 0;
}

/*
 * Metadata that contradict themselves are a problem of the cut, found before anything is
 * allocated for it: more channels than an audio file can have, a duration and a sample
 * count further apart than length_tolerance (at least one sample), or more samples than the
 * member's bytes can hold. Lhotse writes them all from the same audio; a sample count that
 * lies would otherwise size the cut's buffers and its batch.
 */
static int check_metadata(sharc_reader *r)
{
    const sharc__rawcut *c = &r->raw;
    const sharc__decode_job j = raw_job(c);
    const int code = SHARC_ERR_AUDIO_MISMATCH;
    sharc_problem kind = SHARC_PROBLEM_LENGTH;
    double want = c->duration * c->sampling_rate;
    double tolerance = r->s.length_tolerance * c->sampling_rate;
    /* No codec packs more than a few thousand samples into a byte (FLAC's constant blocks
     * are the densest): a member cannot hold more than this, whatever its metadata say. */
    double most = (double)j.audio_len * SHARC__MAX_SAMPLES_PER_BYTE;
    int rc = 0;
    if (c->channels > SHARC__MAX_CHANNELS) {
        kind = SHARC_PROBLEM_AUDIO_FORMAT;
        rc = sharc__set_error(&r->ctx, code,
                              "its metadata give %d channels, more than the %d an audio file "
                              "can have",
                              c->channels, SHARC__MAX_CHANNELS);
    } else if (r->s.channel >= c->channels) {
        kind = SHARC_PROBLEM_AUDIO_FORMAT;
        rc = sharc__set_error(&r->ctx, code,
                              "channel %d is required (the channel setting, --channel), and the "
                              "cut has only %d (channels 0..%d)",
                              r->s.channel, c->channels, c->channels - 1);
    } else if (fabs((double)c->num_samples - want) > (tolerance > 1 ? tolerance : 1)) {
        rc = sharc__set_error(&r->ctx, code,
                              "its metadata disagree: a duration of %g s is %.0f samples at %d "
                              "Hz, and num_samples says %lld",
                              c->duration, want, c->sampling_rate, (long long)c->num_samples);
    } else if ((double)c->num_samples * c->channels > most) {
        rc = sharc__set_error(&r->ctx, code,
                              "its metadata give %lld samples x %d channels for %zu bytes of "
                              "audio, more than any codec holds (%d samples per byte)",
                              (long long)c->num_samples, c->channels, j.audio_len,
                              SHARC__MAX_SAMPLES_PER_BYTE);
    }
    if (rc == 0)
        return 0;
    sharc__wrap_error(&r->ctx, rc, "%s member %s (cut %s)", j.shard, j.member, j.id);
    return cut_problem(&r->ctx, &r->err, rc, kind, j.shard, j.member, j.id);
}

/* A NeMo row is its whole member when its duration is within this of the member's. */
#define NEMO_WHOLE_MEMBER_SECONDS 0.2

/* Make rate, channels and length known, from the metadata or else the audio header, and
 * check that they agree. */
static int describe_cut(sharc_reader *r)
{
    sharc__rawcut *c = &r->raw;
    if (c->sampling_rate > 0 && c->num_samples >= 0 && c->duration >= 0 && c->channels > 0)
        return check_metadata(r);
    sharc__audio_info info;
    sharc__decode_job j = raw_job(c);
    int rc = job_info(r, &j, &info);
    if (rc < 0)
        return rc;
    if (c->sampling_rate <= 0)
        c->sampling_rate = info.sampling_rate;
    if (c->channels <= 0)
        c->channels = info.channels;
    if (c->window && info.frames > 0 && info.sampling_rate > 0) {
        const double member_s = (double)info.frames / info.sampling_rate;
        if (fabs(c->duration - member_s) < NEMO_WHOLE_MEMBER_SECONDS) {
            /* NeMo (make_cut_with_subset_inmemory_recording) takes the whole member, from
             * its start, for a row whose duration is this close to the member's, whatever
             * its offset: the row's duration was measured before the audio was re-encoded. */
            c->window = 0;
            c->offset = 0;
            c->duration = member_s;
            c->num_samples = info.frames;
        } else if (member_s > c->offset && c->duration > member_s - c->offset) {
            /* Past the member's end, NeMo's cut (Lhotse's truncate) stops at the end. */
            c->duration = member_s - c->offset;
        }
    }
    if (c->duration < 0)
        c->duration = (double)info.frames / info.sampling_rate - c->offset;
    if (c->duration < 0)
        c->duration = 0;
    if (c->num_samples < 0)
        c->num_samples = round_half_up(c->duration * c->sampling_rate);
    return check_metadata(r);
}

int sharc__reader_pull(sharc_reader *r)
{
    int rc;
    if (r->failed)
        return r->failed;
    for (;;) {
        if (!walk_is_open(r)) {
            rc = open_next_shard(r);
            if (rc == SHARC_END)
                return rc;
            if (rc < 0) {
                if (handle_problem(r, rc) < 0)
                    return rc;
                continue;
            }
        }
        reset_err(r);
        rc = walk_next(r);
        if (rc == SHARC_END) {
            walk_close(r);
            r->pos.shard_open = 0;
            continue;
        }
        if (rc == 0 || !r->err.shard_fatal)
            r->pos.consumed++;
        if (rc == 0) {
            double t0 = sharc__now_s();
            rc = describe_cut(r);
            r->read_seconds += sharc__now_s() - t0;
        }
        if (rc < 0) {
            if (handle_problem(r, rc) < 0)
                return rc;
            continue;
        }
        r->raw.epoch = r->pos.epoch;
        r->raw.shard_index = r->pos.shard_index;
        r->pos.epoch_cuts++;
        return 0;
    }
}

int sharc__reader_seek(sharc_reader *r, const sharc__walk_pos *pos)
{
    int rc = 0;
    walk_close(r);
    set_epoch(r, pos->epoch);
    if (pos->order_pos > r->n_order)
        return sharc__fail(&r->ctx, SHARC_ERR_STATE,
                           "cannot resume: the state points at position %llu of a shard order "
                           "of %zu",
                           (unsigned long long)pos->order_pos, r->n_order);
    r->pos = *pos;
    if (r->ra) /* read ahead from the shard after the open one */
        plan_from(r, pos->order_pos);
    if (!pos->shard_open)
        return 0;
    if (pos->order_pos == 0 || r->order[pos->order_pos - 1] != pos->shard_index)
        return sharc__fail(&r->ctx, SHARC_ERR_STATE,
                           "cannot resume: the state points at shard %u, which is not "
                           "where this dataset's shard order puts it",
                           pos->shard_index);
    /* Skip what the saved reader had taken from the open shard: bounded by one shard. */
    reset_err(r);
    rc = r->ops->open(&r->stream, &r->ctx, &r->ds.shards[pos->shard_index], &r->sopts, &r->err);
    for (uint64_t i = 0; rc == 0 && i < pos->consumed; i++) {
        reset_err(r);
        rc = r->ops->next(r->stream, &r->raw, &r->err);
        if (rc < 0 && !r->err.shard_fatal)
            rc = 0;
    }
    if (rc == SHARC_END)
        rc = sharc__fail(
            &r->ctx, SHARC_ERR_STATE, "state points at entry %llu of %s, which has fewer entries",
            (unsigned long long)pos->consumed, r->ds.shards[pos->shard_index].audio_path);
    if (rc < 0 && r->stream)
        r->ops->close(&r->stream);
    r->pos.shard_open = r->stream != NULL;
    return rc;
}

int sharc__reader_decode(const sharc_reader *r, sharc__ctx *ctx, sharc__fetcher *f,
                         const sharc__decode_job *j, float *out, size_t cap, int *out_channels,
                         sharc__stream_error *err)
{
    const sharc__file_ref file = job_file(j);
    sharc__decode_spec spec = {round_half_up(j->offset * j->sampling_rate),
                               j->num_samples,
                               (int64_t)(r->s.length_tolerance * j->sampling_rate),
                               r->s.channel,
                               j->window,
                               r->mode == 2};
    sharc__audio_info info = {0};
    int64_t frames = 0;
    int fd, rc = 0;
    if (j->in_file) {
        /* Only what the cut needs: a WAV member's samples, or what libsndfile reads of a
         * small window. */
        rc = decode_wav_in_file(ctx, f, j, &spec, out, cap, &info, &frames);
        if (rc == 0 && small_window(j) && (rc = sharc__fetch_fd(f, ctx, &file, &fd)) == 0) {
            rc = sharc__audio_decode_at(ctx, fd, j->at, j->audio_len, f->io, sizeof f->io, &spec,
                                        out, cap, &info, &frames);
            rc = rc == 0 ? 1 : rc;
        }
    }
    if (rc == 0) {
        const uint8_t *audio;
        if ((rc = job_audio(ctx, f, j, &audio, err)) < 0)
            return rc;
        rc = sharc__audio_decode(ctx, audio, j->audio_len, &spec, out, cap, &info, &frames);
    }
    /* A decoder that failed on audio with other channels than the metadata's failed for that
     * (the buffer was sized by the metadata): reported below as the mismatch it is. */
    if (rc < 0 && !(info.channels > 0 && info.channels != j->channels)) {
        sharc__wrap_error(ctx, rc, "%s member %s (cut %s)", j->shard, j->member, j->id);
        return cut_problem(ctx, err, rc,
                           info.non_finite ? SHARC_PROBLEM_NON_FINITE : decode_problem(rc),
                           j->shard, j->member, j->id);
    }
    const char *what = NULL;
    int have = 0, want = 0;
    if (info.sampling_rate != j->sampling_rate) {
        what = "metadata says %d Hz, the audio is %d Hz";
        want = j->sampling_rate;
        have = info.sampling_rate;
    } else if (info.channels != j->channels) {
        what = "metadata says %d channels, the audio has %d";
        want = j->channels;
        have = info.channels;
    } else if (r->s.sampling_rate > 0 && info.sampling_rate != r->s.sampling_rate) {
        what = "%d Hz is required, the audio is %d Hz (sharc does not resample)";
        want = r->s.sampling_rate;
        have = info.sampling_rate;
    }
    if (what) {
        char detail[160];
        snprintf(detail, sizeof detail, what, want, have);
        rc = sharc__set_error(ctx, SHARC_ERR_AUDIO_MISMATCH, "%s member %s (cut %s): %s", j->shard,
                              j->member, j->id, detail);
        return cut_problem(ctx, err, rc, SHARC_PROBLEM_AUDIO_FORMAT, j->shard, j->member, j->id);
    }
    *out_channels = r->s.channel >= 0 ? 1 : info.channels;
    return 0;
}

static int grow_samples(sharc_reader *r, size_t n)
{
    if (n <= r->samples_cap)
        return 0;
    sharc__free(&r->ctx, r->samples);
    r->samples = sharc__malloc_aligned(&r->ctx, n * sizeof(float), 64);
    r->samples_cap = r->samples ? n : 0;
    return r->samples ? 0 : SHARC_ERR(ENOMEM);
}

static int decode_cut(sharc_reader *r)
{
    sharc__rawcut *c = &r->raw;
    sharc__decode_job j = raw_job(c);
    size_t cap = (size_t)(c->num_samples > 0 ? c->num_samples : 1) * (size_t)c->channels;
    reset_err(r);
    int channels, rc = grow_samples(r, cap);
    if (rc < 0) {
        rc = sharc__set_error(&r->ctx, SHARC_ERR_TOO_LARGE,
                              "%s member %s (cut %s): cannot allocate %zu samples for its audio",
                              j.shard, j.member, j.id, cap);
        return cut_problem(&r->ctx, &r->err, rc, SHARC_PROBLEM_TOO_LARGE, j.shard, j.member, j.id);
    }
    rc = sharc__reader_decode(r, &r->ctx, &r->fetch, &j, r->samples, cap, &channels, &r->err);
    if (rc < 0)
        return rc;
    c->channels = channels;
    return 0;
}

static const char *opt_str(const sharc__buf *b, int has)
{
    return has ? sharc__buf_str(b) : NULL;
}

static void fill_cut(sharc_reader *r)
{
    sharc__rawcut *c = &r->raw;
    sharc_cut *o = &r->cut;
    o->id = sharc__buf_str(&c->id);
    o->duration = c->duration;
    o->sampling_rate = c->sampling_rate;
    o->channels = c->channels;
    o->num_samples = c->num_samples;
    o->samples = r->s.decode ? r->samples : NULL;
    o->text = opt_str(&c->text, c->has_text);
    o->speaker = opt_str(&c->speaker, c->has_speaker);
    o->language = opt_str(&c->language, c->has_language);
    o->json = sharc__buf_str(&c->json);
    o->shard = c->shard;
    o->member = sharc__buf_str(&c->member);
    o->audio = sharc__rawcut_audio(c, &o->audio_nbytes);
    o->offset = c->offset;
    o->epoch = c->epoch;
    o->shard_index = c->shard_index;
    o->position = c->position;
    o->n_fields = 0;
    for (size_t i = 0; i < c->n_fields; i++) {
        const sharc__field_data *f = &c->fields[i];
        if (!f->present)
            continue;
        sharc_field *p = &r->fields[o->n_fields++];
        const char *member = sharc__buf_str(&f->member);
        const char *slash = strrchr(member, '/');
        const char *dot = strchr(slash ? slash + 1 : member, '.');
        p->name = f->name ? f->name : (dot ? dot + 1 : member);
        p->member = f->is_tar ? member : NULL;
        p->json = f->json.len ? sharc__buf_str(&f->json) : NULL;
        p->data = f->is_tar ? f->data.data : NULL;
        p->nbytes = f->is_tar ? f->data.len : 0;
    }
    o->fields = r->fields;
}

int sharc__reader_next(sharc_reader *r, const sharc_cut **cut)
{
    *cut = NULL;
    if (r->mode == 2)
        return sharc__set_error(&r->ctx, SHARC_ERR(EINVAL),
                                "this reader serves batches: use sharc_reader_next_batch");
    if (r->resume) /* reading cuts from the start would silently ignore the state */
        return sharc__set_error(&r->ctx, SHARC_ERR(EINVAL),
                                "a resumed reader serves batches: resume_state is a batch "
                                "reader's state, use sharc_reader_next_batch");
    r->mode = 1;
    r->sopts.lend_audio = 1; /* each cut is the caller's until the next call */
    for (;;) {
        int rc = sharc__reader_pull(r);
        if (rc != 0)
            return rc;
        if (r->s.decode && (rc = decode_cut(r)) < 0) {
            if (handle_problem(r, rc) < 0)
                return rc;
            continue;
        }
        fill_cut(r);
        r->stats.cuts++;
        r->stats.audio_seconds += r->cut.duration;
        *cut = &r->cut;
        return 0;
    }
}

const char *sharc__reader_last_error(const sharc_reader *r)
{
    return r->ctx.error;
}

int sharc__check_reader_struct_sizes(const sharc_reader_settings *s, const char *name,
                                     const char *filler)
{
    char sampler[64];
    int rc = sharc__check_struct_size(name, s->struct_size, sizeof *s, filler);
    if (rc < 0)
        return rc;
    snprintf(sampler, sizeof sampler, "%s.sampler", name);
    return sharc__check_struct_size(sampler, s->sampler.struct_size, sizeof s->sampler, filler);
}

static void get_stats(const sharc_reader *r, sharc_reader_stats *out)
{
    if (r->pipe) {
        sharc__pipeline_stats(r, out);
        return;
    }
    *out = r->stats;
    /* Resumed, and no batch asked for yet: the counters are the state's. */
    if (r->mode != 1 && r->resume && !r->batch_failed)
        sharc__resume_saved_stats(r->resume, r->s.resume_state_size, r->state_hash, out);
}

void sharc__reader_get_stats(const sharc_reader *r, sharc_reader_stats *out)
{
    get_stats(r, out);
    /* Remote shards' counters, totals so far over the reader's threads (base/ctx.h). */
    sharc__net_counters *net = sharc__ctx_net((sharc__ctx *)&r->ctx);
    out->net_retries = (uint32_t)atomic_load(&net->retries);
    out->net_bytes = atomic_load(&net->bytes);
    out->net_wait_seconds = (double)atomic_load(&net->wait_ns) * 1e-9;
}

size_t sharc__reader_num_shards(const sharc_reader *r)
{
    return r->ds.n_shards;
}

const char *sharc__reader_shard_path(const sharc_reader *r, size_t i)
{
    return i < r->ds.n_shards ? r->ds.shards[i].audio_path : NULL;
}

size_t sharc__reader_num_ignored(const sharc_reader *r)
{
    return r->ds.n_ignored;
}

sharc_layout sharc__reader_layout(const sharc_reader *r)
{
    return r->ds.layout;
}

const double *sharc__reader_bins(const sharc_reader *r, size_t *n)
{
    return r->pipe ? sharc__pipeline_bins(r, n) : NULL;
}

int sharc__reader_scan_shard(sharc_reader *r, uint64_t epoch, uint32_t shard,
                             int (*cb)(void *cookie, sharc__rawcut *c), void *cookie)
{
    sharc__stream *st = NULL;
    if (shard >= r->ds.n_shards)
        return sharc__fail(&r->ctx, SHARC_ERR_STATE, "state names shard %u of %zu", shard,
                           r->ds.n_shards);
    reset_err(r);
    int rc = r->ops->open(&st, &r->ctx, &r->ds.shards[shard], &r->sopts, &r->err);
    while (rc == 0) {
        reset_err(r);
        rc = r->ops->next(st, &r->raw, &r->err);
        if (rc == 0 && (rc = describe_cut(r)) == 0) {
            r->raw.epoch = epoch;
            r->raw.shard_index = shard;
            rc = cb(cookie, &r->raw);
            if (rc > 0) {
                rc = 0;
                break;
            }
        } else if (rc < 0 && !r->err.shard_fatal && r->err.kind < SHARC_PROBLEM_COUNT) {
            rc = 0; /* a bad cut was skipped the first time too */
        }
    }
    if (rc == SHARC_END)
        rc = 0;
    if (st)
        r->ops->close(&st);
    return rc;
}

int sharc__reader_next_batch(sharc_reader *r, sharc_batch **batch)
{
    *batch = NULL;
    if (r->mode == 1)
        return sharc__set_error(&r->ctx, SHARC_ERR(EINVAL),
                                "this reader serves cuts: use sharc_reader_next");
    if (r->batch_failed)
        return r->batch_failed;
    if (r->mode == 0) {
        r->mode = 2;
        int rc = sharc__pipeline_start(r);
        if (rc < 0) {
            sharc__log_error_once(&r->ctx);
            r->batch_failed = rc;
            if (r->resume) /* a refused state's counters are not this reader's */
                memset(&r->stats, 0, sizeof r->stats);
            return rc;
        }
    }
    return sharc__pipeline_next(r, batch);
}

int sharc__reader_state_save(sharc_reader *r, void *buf, size_t cap, size_t *size)
{
    *size = 0;
    int rc = r->mode == 2 && r->pipe ? sharc__pipeline_state_save(r, buf, cap, size) : 1;
    if (rc != 1)
        return rc;
    if (r->mode != 1 && r->resume) {
        /* Resumed, and no batch returned since: the state is the one it was resumed from. */
        *size = r->s.resume_state_size;
        if (!buf || cap < *size)
            return SHARC_ERR(ENOSPC);
        memcpy(buf, r->resume, *size);
        return 0;
    }
    return sharc__set_error(&r->ctx, SHARC_ERR(EINVAL),
                            r->mode != 1
                                ? "no batch has been returned yet: there is no state to save"
                                : "only a reader serving batches has a state to save");
}

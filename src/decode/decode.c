/*
 * Decoding one cut, whichever thread does it: its rate, channels and length made known
 * from the metadata or the audio header (and checked against each other), then its samples
 * decoded from the member's bytes or read from the shard file, with windows, channel
 * selection and the checks against the metadata and the settings. Long WAV members left in
 * their file are read in parts (header, window) instead of whole.
 */
#include "decode/decode.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "plan/json.h"

static int64_t round_half_up(double x)
{
    return (int64_t)floor(x + 0.5);
}

static int cut_problem(sharc__ctx *ctx, sharc__stream_error *err, int rc, sharc_problem kind,
                       const char *shard, const char *member, const char *id)
{
    return sharc__stream_fail(ctx, err, rc, kind, 0, shard, member, id);
}

sharc__decode_job sharc__decode_job_of(const sharc__rawcut *c)
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
                           c->audio_file_id,
                           c->cond};
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
    /* A remote object's parts are requests: a window's samples come in one. */
    const size_t part_bytes =
        sharc__fetch_is_remote(&file) ? SHARC__FETCH_REMOTE_PART : WAV_PART_BYTES;
    const int64_t part = (int64_t)(part_bytes / frame_bytes);
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
static int job_info(sharc__ctx *ctx, sharc__fetcher *f, sharc__header_cache *cache,
                    sharc__stream_error *err, const sharc__decode_job *j, sharc__audio_info *info)
{
    const sharc__file_ref file = job_file(j);
    if (j->in_file && cache->shard == j->shard && cache->at == j->at &&
        cache->file_id == j->file_id) {
        *info = cache->info;
        return 0;
    }
    sharc__wav_pcm16 wav;
    const uint8_t *audio;
    int rc = wav_from_pieces(ctx, f, j, &wav);
    if (rc < 0) {
        sharc__wrap_error(ctx, rc, "%s member %s (cut %s)", j->shard, j->member, j->id);
        return cut_problem(ctx, err, rc, SHARC_PROBLEM_ARCHIVE, j->shard, j->member, j->id);
    }
    if (rc > 0) {
        *info =
            (sharc__audio_info){SHARC__CODEC_WAV, wav.sampling_rate, wav.channels, wav.frames, 0};
    } else {
        int fd;
        if (j->in_file && j->audio_len >= LONG_MEMBER_BYTES && !sharc__fetch_is_remote(&file)) {
            /* libsndfile reads the header from the file, not the whole member. */
            if ((rc = sharc__fetch_fd(f, ctx, &file, &fd)) == 0)
                rc = sharc__audio_info_at(ctx, fd, j->at, j->audio_len, f->io, sizeof f->io, info);
        } else {
            if ((rc = job_audio(ctx, f, j, &audio, err)) < 0)
                return rc;
            rc = sharc__audio_info_get(ctx, audio, j->audio_len, info);
        }
        if (rc < 0 || info->sampling_rate <= 0 || info->channels <= 0) {
            rc = rc < 0 ? rc : SHARC_ERR_DECODE;
            sharc__wrap_error(ctx, rc, "%s member %s (cut %s)", j->shard, j->member, j->id);
            return cut_problem(ctx, err, rc, decode_problem(rc), j->shard, j->member, j->id);
        }
    }
    if (j->in_file) {
        cache->shard = j->shard;
        cache->at = j->at;
        cache->file_id = j->file_id;
        cache->info = *info;
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
static int check_metadata(sharc__ctx *ctx, const sharc__decode_opts *o, const sharc__rawcut *c,
                          sharc__stream_error *err)
{
    const sharc__decode_job j = sharc__decode_job_of(c);
    const int code = SHARC_ERR_AUDIO_MISMATCH;
    sharc_problem kind = SHARC_PROBLEM_LENGTH;
    double want = c->duration * c->sampling_rate;
    double tolerance = o->length_tolerance * c->sampling_rate;
    /* No codec packs more than a few thousand samples into a byte (FLAC's constant blocks
     * are the densest): a member cannot hold more than this, whatever its metadata say. */
    double most = (double)j.audio_len * SHARC__MAX_SAMPLES_PER_BYTE;
    int rc = 0;
    if (c->channels > SHARC__MAX_CHANNELS) {
        kind = SHARC_PROBLEM_AUDIO_FORMAT;
        rc = sharc__set_error(ctx, code,
                              "its metadata give %d channels, more than the %d an audio file "
                              "can have",
                              c->channels, SHARC__MAX_CHANNELS);
    } else if (o->channel >= c->channels) {
        kind = SHARC_PROBLEM_AUDIO_FORMAT;
        rc = sharc__set_error(ctx, code,
                              "channel %d is required (the channel setting, --channel), and the "
                              "cut has only %d (channels 0..%d)",
                              o->channel, c->channels, c->channels - 1);
    } else if (fabs((double)c->num_samples - want) > (tolerance > 1 ? tolerance : 1)) {
        rc = sharc__set_error(ctx, code,
                              "its metadata disagree: a duration of %g s is %.0f samples at %d "
                              "Hz, and num_samples says %lld",
                              c->duration, want, c->sampling_rate, (long long)c->num_samples);
    } else if ((double)c->num_samples * c->channels > most) {
        rc = sharc__set_error(ctx, code,
                              "its metadata give %lld samples x %d channels for %zu bytes of "
                              "audio, more than any codec holds (%d samples per byte)",
                              (long long)c->num_samples, c->channels, j.audio_len,
                              SHARC__MAX_SAMPLES_PER_BYTE);
    }
    if (rc == 0)
        return 0;
    sharc__wrap_error(ctx, rc, "%s member %s (cut %s)", j.shard, j.member, j.id);
    return cut_problem(ctx, err, rc, kind, j.shard, j.member, j.id);
}

/* Check the metadata of a described cut, then draw its conditioning. */
static int plan_cond(sharc__ctx *ctx, const sharc__decode_opts *o, sharc__rawcut *c,
                     sharc__stream_error *err)
{
    int rc = check_metadata(ctx, o, c, err);
    if (rc == 0)
        sharc__cond_plan(&o->cond, c);
    return rc;
}

/* A NeMo row is its whole member when its duration is within this of the member's. */
#define NEMO_WHOLE_MEMBER_SECONDS 0.2

/* Make rate, channels and length known, from the metadata or else the audio header, and
 * check that they agree. */
int sharc__decode_describe(sharc__ctx *ctx, sharc__fetcher *f, sharc__header_cache *cache,
                           const sharc__decode_opts *o, sharc__rawcut *c, sharc__stream_error *err)
{
    if (c->sampling_rate > 0 && c->num_samples >= 0 && c->duration >= 0 && c->channels > 0)
        return plan_cond(ctx, o, c, err);
    sharc__audio_info info;
    sharc__decode_job j = sharc__decode_job_of(c);
    int rc = job_info(ctx, f, cache, err, &j, &info);
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
    return plan_cond(ctx, o, c, err);
}

int sharc__decode(const sharc__decode_opts *o, sharc__ctx *ctx, sharc__fetcher *f,
                  const sharc__decode_job *j, float *out, size_t cap, int *out_channels,
                  sharc__stream_error *err)
{
    const sharc__file_ref file = job_file(j);
    sharc__decode_spec spec = {round_half_up(j->offset * j->sampling_rate),
                               j->num_samples,
                               (int64_t)(o->length_tolerance * j->sampling_rate),
                               o->channel,
                               j->window,
                               o->stream_out};
    sharc__audio_info info = {0};
    int64_t frames = 0;
    int fd, rc = 0;
    if (j->in_file) {
        /* Only what the cut needs: a WAV member's samples, or what libsndfile reads of a
         * small window. */
        rc = decode_wav_in_file(ctx, f, j, &spec, out, cap, &info, &frames);
        if (rc == 0 && small_window(j) && !sharc__fetch_is_remote(&file) &&
            (rc = sharc__fetch_fd(f, ctx, &file, &fd)) == 0) {
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
    } else if (o->sampling_rate > 0 && info.sampling_rate != o->sampling_rate &&
               !o->cond.resample) {
        what = "%d Hz is required, the audio is %d Hz (turn on the resample setting, "
               "--resample, to convert it)";
        want = o->sampling_rate;
        have = info.sampling_rate;
    }
    if (what) {
        char detail[160];
        snprintf(detail, sizeof detail, what, want, have);
        rc = sharc__set_error(ctx, SHARC_ERR_AUDIO_MISMATCH, "%s member %s (cut %s): %s", j->shard,
                              j->member, j->id, detail);
        return cut_problem(ctx, err, rc, SHARC_PROBLEM_AUDIO_FORMAT, j->shard, j->member, j->id);
    }
    *out_channels = o->channel >= 0 ? 1 : info.channels;
    return 0;
}

int sharc__decode_cond(const sharc__decode_opts *o, sharc__ctx *ctx, sharc__fetcher *f,
                       sharc__conditioner *cn, const sharc__decode_job *j, float *out, size_t cap,
                       int *out_channels, sharc__stream_error *err)
{
    if (sharc__cond_is_identity(&j->cond, j->sampling_rate))
        return sharc__decode(o, ctx, f, j, out, cap, out_channels, err);
    const int stored = o->channel >= 0 ? 1 : j->channels;
    const size_t n_in = (size_t)(j->num_samples > 0 ? j->num_samples : 1) * (size_t)stored;
    /* Samples kept at their rate and length (gain, noise) are conditioned in place. */
    const int in_place = j->cond.rate == j->sampling_rate && j->cond.speed == 1;
    int rc = in_place ? 0 : sharc__conditioner_reserve(cn, ctx, n_in);
    if (rc == 0 && (size_t)j->cond.num_samples * (size_t)stored > cap)
        rc = sharc__set_error(ctx, SHARC_ERR_TOO_LARGE,
                              "%lld conditioned samples do not fit the %zu of the row",
                              (long long)j->cond.num_samples, cap);
    if (rc < 0) {
        sharc__wrap_error(ctx, rc, "%s member %s (cut %s)", j->shard, j->member, j->id);
        return cut_problem(ctx, err, rc, SHARC_PROBLEM_TOO_LARGE, j->shard, j->member, j->id);
    }
    float *in = in_place ? out : cn->scratch;
    if ((rc = sharc__decode(o, ctx, f, j, in, in_place ? cap : n_in, out_channels, err)) < 0)
        return rc;
    rc = sharc__cond_apply(cn, ctx, &j->cond, j->sampling_rate, *out_channels, in, j->num_samples,
                           out);
    if (rc < 0) {
        sharc__wrap_error(ctx, rc, "%s member %s (cut %s)", j->shard, j->member, j->id);
        return cut_problem(ctx, err, rc, SHARC_PROBLEM_DECODE, j->shard, j->member, j->id);
    }
    return 0;
}

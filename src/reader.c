#include "reader.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "audio.h"
#include "ctx.h"
#include "cut.h"
#include "dataset.h"
#include "stream.h"

struct sharc_reader {
    sharc__ctx ctx;
    sharc_reader_settings s;
    char **paths;
    char *nemo_text_field, *nemo_lang_field;
    sharc__dataset ds;
    const sharc__stream_ops *ops;
    sharc__stream_opts sopts;
    uint32_t *order;
    size_t n_order, order_pos;
    uint64_t epoch;
    uint64_t epoch_cuts; ///< cuts returned in the current epoch
    sharc__stream *stream;
    uint32_t shard_index;
    sharc__rawcut raw;
    sharc__stream_error err;
    float *samples;
    size_t samples_cap; ///< in floats
    sharc_cut cut;
    sharc_field fields[SHARC__MAX_FIELDS];
    sharc_reader_stats stats;
    int failed;
};

static int copy_settings(sharc_reader *r, const sharc_reader_settings *s)
{
    r->s = *s;
    r->paths = sharc__calloc(&r->ctx, s->n_paths, sizeof *r->paths);
    if (!r->paths)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < s->n_paths; i++)
        if (!(r->paths[i] = sharc__strdup(&r->ctx, s->paths[i])))
            return SHARC_ERR(ENOMEM);
    r->nemo_text_field = sharc__strdup(&r->ctx, s->nemo_text_field ? s->nemo_text_field : "text");
    r->nemo_lang_field = sharc__strdup(&r->ctx, s->nemo_lang_field ? s->nemo_lang_field : "lang");
    if (!r->nemo_text_field || !r->nemo_lang_field)
        return SHARC_ERR(ENOMEM);
    r->s.paths = (const char *const *)r->paths;
    r->s.nemo_text_field = r->nemo_text_field;
    r->s.nemo_lang_field = r->nemo_lang_field;
    r->sopts.max_member_bytes = s->max_member_bytes;
    r->sopts.max_line_bytes = s->max_line_bytes;
    r->sopts.nemo_text_field = r->nemo_text_field;
    r->sopts.nemo_lang_field = r->nemo_lang_field;
    return 0;
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
    int rc = copy_settings(r, s);
    if (rc < 0)
        goto fail;
    rc = sharc__dataset_find(&r->ds, &r->ctx, r->s.paths, r->s.n_paths, s->layout,
                             s->max_line_bytes);
    if (rc < 0) {
        sharc__log(&r->ctx, SHARC_LOG_ERROR, "%s", r->ctx.error);
        goto fail;
    }
    r->ops = r->ds.layout == SHARC_LAYOUT_SHAR   ? &sharc__shar_ops
             : r->ds.layout == SHARC_LAYOUT_NEMO ? &sharc__nemo_ops
                                                 : &sharc__wds_ops;
    if (r->ds.n_shards > UINT32_MAX) {
        rc = sharc__fail(&r->ctx, SHARC_ERR_FORMAT, "too many shards (%zu)", r->ds.n_shards);
        goto fail;
    }
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
    *out = r;
    return 0;
fail:
    sharc__reader_close(&r);
    return rc;
}

void sharc__reader_close(sharc_reader **rp)
{
    sharc_reader *r = *rp;
    if (!r)
        return;
    sharc__ctx *ctx = &r->ctx;
    if (r->stream)
        r->ops->close(&r->stream);
    sharc__dataset_free(&r->ds, ctx);
    sharc__rawcut_free(ctx, &r->raw);
    sharc__buf_free(ctx, &r->err.member);
    sharc__buf_free(ctx, &r->err.cut_id);
    sharc__free(ctx, r->samples);
    sharc__free(ctx, r->order);
    if (r->paths)
        for (size_t i = 0; i < r->s.n_paths; i++)
            sharc__free(ctx, r->paths[i]);
    sharc__free(ctx, r->paths);
    sharc__free(ctx, r->nemo_text_field);
    sharc__free(ctx, r->nemo_lang_field);
    sharc__ctx copy = r->ctx;
    sharc__free(&copy, r);
    *rp = NULL;
}

/*
 * Report a problem, count it, and apply the policy. Returns 0 when the reader should go
 * on (SKIP), else the error, which then sticks.
 */
static int handle_problem(sharc_reader *r, int rc)
{
    sharc__stream_error *e = &r->err;
    if (e->kind >= SHARC_PROBLEM_COUNT) {
        /* Not a data problem (out of memory, ...): no policy applies. */
        r->failed = rc;
        return rc;
    }
    r->stats.problems[e->kind]++;
    if (r->s.on_problem) {
        sharc_problem_report p = {e->kind,
                                  rc,
                                  e->path,
                                  e->member.len ? sharc__buf_str(&e->member) : NULL,
                                  e->cut_id.len ? sharc__buf_str(&e->cut_id) : NULL,
                                  r->ctx.error};
        r->s.on_problem(r->s.problem_cookie, &p);
    }
    if (r->s.on_error == SHARC_ON_ERROR_FAIL) {
        r->failed = rc;
        return rc;
    }
    if (e->shard_fatal) {
        r->stats.skipped_shards++;
        r->ops->close(&r->stream);
    } else {
        r->stats.skipped_cuts++;
    }
    return 0;
}

static int reset_err(sharc_reader *r)
{
    r->err.kind = SHARC_PROBLEM_COUNT;
    r->err.shard_fatal = 0;
    r->err.path = NULL;
    sharc__buf_clear(&r->err.member);
    sharc__buf_clear(&r->err.cut_id);
    return 0;
}

/* Open the next shard of the plan, moving to the next epoch when needed. */
static int open_next_shard(sharc_reader *r)
{
    while (r->order_pos == r->n_order) {
        if (r->epoch_cuts == 0 && r->s.epochs == 0 && r->stats.shards > 0)
            return sharc__fail(&r->ctx, SHARC_ERR_FORMAT,
                               "a whole epoch produced no cuts; stopping instead of looping "
                               "forever");
        r->epoch++;
        r->epoch_cuts = 0;
        if (r->s.epochs && r->epoch >= r->s.epochs)
            return SHARC_END;
        r->n_order = sharc__dataset_epoch_order(&r->ds, r->s.seed, r->epoch, r->s.shuffle_shards,
                                                r->s.dp_rank, r->s.dp_size, r->order);
        r->order_pos = 0;
    }
    r->shard_index = r->order[r->order_pos++];
    r->stats.shards++;
    reset_err(r);
    return r->ops->open(&r->stream, &r->ctx, &r->ds.shards[r->shard_index], &r->sopts, &r->err);
}

static int64_t round_half_up(double x)
{
    return (int64_t)floor(x + 0.5);
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

static int cut_problem(sharc_reader *r, int rc, sharc_problem kind)
{
    const sharc__rawcut *c = &r->raw;
    return sharc__stream_fail(&r->ctx, &r->err, rc, kind, 0, c->shard, sharc__buf_str(&c->member),
                              sharc__buf_str(&c->id));
}

static int decode_raw(sharc_reader *r, int64_t *frames, sharc__audio_info *info)
{
    sharc__rawcut *c = &r->raw;
    sharc__decode_spec spec = {0, -1, 0, r->s.channel, 0};
    int sr = c->sampling_rate, channels = c->channels > 0 ? c->channels : 1, rc;
    int need_header = sr <= 0 || c->num_samples < 0 || c->offset > 0;
    if (need_header) {
        if ((rc = sharc__audio_info_get(&r->ctx, c->audio.data, c->audio.len, info)) < 0)
            return rc;
        sr = info->sampling_rate;
        channels = info->channels;
    }
    if (need_header && (c->offset > 0 || c->num_samples < 0)) {
        spec.offset_frames = round_half_up(c->offset * sr);
        spec.want_frames = c->duration >= 0 ? round_half_up(c->duration * sr) : -1;
        spec.allow_longer = c->duration >= 0; /* a window into a longer member */
    } else {
        spec.want_frames = c->num_samples;
    }
    spec.tolerance_frames = (int64_t)(r->s.length_tolerance * sr);
    int64_t frames_cap = spec.want_frames >= 0 ? spec.want_frames : info->frames + sr;
    if (!need_header && frames_cap < 1)
        frames_cap = 1;
    size_t cap = (size_t)(frames_cap > 0 ? frames_cap : 1) * (size_t)channels;
    if ((rc = grow_samples(r, cap)) < 0)
        return rc;
    rc = sharc__audio_decode(&r->ctx, c->audio.data, c->audio.len, &spec, r->samples, cap, info,
                             frames);
    if (rc == SHARC_ERR_TOO_LARGE && !need_header && info->channels > channels) {
        /* The metadata understated the channel count: make room and decode again. */
        cap = (size_t)frames_cap * (size_t)info->channels;
        if ((rc = grow_samples(r, cap)) < 0)
            return rc;
        rc = sharc__audio_decode(&r->ctx, c->audio.data, c->audio.len, &spec, r->samples, cap, info,
                                 frames);
    }
    return rc;
}

static int decode_cut(sharc_reader *r)
{
    sharc__rawcut *c = &r->raw;
    const char *id = sharc__buf_str(&c->id), *member = sharc__buf_str(&c->member);
    sharc__audio_info info = {0};
    int64_t frames = 0;
    int rc = decode_raw(r, &frames, &info);
    if (rc < 0) {
        sharc__fail_wrap(&r->ctx, rc, "%s member %s (cut %s)", c->shard, member, id);
        return cut_problem(r, rc,
                           rc == SHARC_ERR_DECODE ? SHARC_PROBLEM_DECODE : SHARC_PROBLEM_LENGTH);
    }
    int out_channels = r->s.channel >= 0 ? 1 : info.channels;
    if (c->sampling_rate > 0 && info.sampling_rate != c->sampling_rate) {
        rc = sharc__fail(&r->ctx, SHARC_ERR_AUDIO_MISMATCH,
                         "%s member %s (cut %s): metadata says %d Hz, the audio is %d Hz", c->shard,
                         member, id, c->sampling_rate, info.sampling_rate);
        return cut_problem(r, rc, SHARC_PROBLEM_AUDIO_FORMAT);
    }
    if (c->channels > 0 && info.channels != c->channels) {
        rc = sharc__fail(&r->ctx, SHARC_ERR_AUDIO_MISMATCH,
                         "%s member %s (cut %s): metadata says %d channels, the audio has %d",
                         c->shard, member, id, c->channels, info.channels);
        return cut_problem(r, rc, SHARC_PROBLEM_AUDIO_FORMAT);
    }
    if (r->s.sampling_rate > 0 && info.sampling_rate != r->s.sampling_rate) {
        rc = sharc__fail(&r->ctx, SHARC_ERR_AUDIO_MISMATCH,
                         "%s member %s (cut %s): audio is %d Hz but %d Hz is required (sharc "
                         "does not resample)",
                         c->shard, member, id, info.sampling_rate, r->s.sampling_rate);
        return cut_problem(r, rc, SHARC_PROBLEM_AUDIO_FORMAT);
    }
    c->sampling_rate = info.sampling_rate;
    c->channels = out_channels;
    c->num_samples = frames;
    if (c->duration < 0)
        c->duration = (double)frames / info.sampling_rate;
    return 0;
}

/* Header-only pass for decode = 0: rate and length from the metadata or the header. */
static int describe_cut(sharc_reader *r)
{
    sharc__rawcut *c = &r->raw;
    if (c->sampling_rate > 0 && c->num_samples >= 0 && c->duration >= 0)
        return 0;
    sharc__audio_info info;
    int rc = sharc__audio_info_get(&r->ctx, c->audio.data, c->audio.len, &info);
    if (rc < 0) {
        sharc__fail_wrap(&r->ctx, rc, "%s member %s (cut %s)", c->shard, sharc__buf_str(&c->member),
                         sharc__buf_str(&c->id));
        return cut_problem(r, rc, SHARC_PROBLEM_DECODE);
    }
    if (c->sampling_rate <= 0)
        c->sampling_rate = info.sampling_rate;
    if (c->channels <= 0)
        c->channels = info.channels;
    if (c->duration < 0)
        c->duration = (double)info.frames / info.sampling_rate - c->offset;
    if (c->num_samples < 0)
        c->num_samples = round_half_up(c->duration * c->sampling_rate);
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
    o->audio = c->audio.data;
    o->audio_nbytes = c->audio.len;
    o->offset = c->offset;
    o->epoch = r->epoch;
    o->shard_index = r->shard_index;
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
    int rc;
    *cut = NULL;
    if (r->failed)
        return r->failed;
    for (;;) {
        if (!r->stream) {
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
        rc = r->ops->next(r->stream, &r->raw, &r->err);
        if (rc == SHARC_END) {
            r->ops->close(&r->stream);
            continue;
        }
        if (rc == 0)
            rc = r->s.decode ? decode_cut(r) : describe_cut(r);
        if (rc < 0) {
            if (handle_problem(r, rc) < 0)
                return rc;
            continue;
        }
        r->raw.epoch = r->epoch;
        fill_cut(r);
        r->stats.cuts++;
        r->epoch_cuts++;
        r->stats.audio_seconds += r->cut.duration;
        *cut = &r->cut;
        return 0;
    }
}

const char *sharc__reader_last_error(const sharc_reader *r)
{
    return r->ctx.error;
}

void sharc__reader_get_stats(const sharc_reader *r, sharc_reader_stats *out)
{
    *out = r->stats;
}

size_t sharc__reader_num_shards(const sharc_reader *r)
{
    return r->ds.n_shards;
}

sharc_layout sharc__reader_layout(const sharc_reader *r)
{
    return r->ds.layout;
}

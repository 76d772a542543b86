/*
 * sharc_reader: the composition of the stages. It owns the settings, the shard plan, the
 * walk over it and, in batch mode, the pipeline; in cut mode it decodes each cut the walk
 * pulls on the caller's thread. A mixture's sources are opened by reader_mix.c, and what
 * the reader says of itself is in reader_info.c (the handle: reader_impl.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "batching/resume.h"
#include "reader/reader_impl.h"

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

/*
 * A bundle of as many states as this run has data-parallel slots: this slot's own state,
 * as if it had been given alone. Other bundles stay whole for the elastic split (checked
 * there, at the first batch); a malformed one too, to fail there as a bad state does.
 */
static int unbundle_own_state(sharc_reader *r)
{
    long n = sharc__resume_bundle_parse(r->resume, r->s.resume_state_size, NULL, NULL, 0);
    if (n != r->s.dp_size)
        return 0;
    const uint8_t *own = NULL;
    size_t size = 0;
    sharc__resume_bundle_get(r->resume, (size_t)r->s.dp_rank, &own, &size);
    memmove(r->resume, own, size);
    r->s.resume_state_size = size;
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
        rc = copy_array(ctx, (void **)&r->bin_tokens, s->sampler.bin_tokens,
                        s->sampler.bin_tokens ? s->sampler.n_bins : 0, sizeof(double));
    if (rc == 0)
        rc = copy_array(ctx, (void **)&r->max_tps, s->sampler.max_tps, s->sampler.n_max_tps,
                        sizeof(double));
    if (rc == 0)
        rc = copy_array(ctx, (void **)&r->resume, s->resume_state, s->resume_state_size, 1);
    if (rc == 0 && s->augment) {
        r->augment = *s->augment;
        rc = copy_array(ctx, (void **)&r->speeds, s->augment->speed_perturb,
                        s->augment->n_speed_perturb, sizeof(double));
        r->augment.speed_perturb = r->speeds;
        r->s.augment = &r->augment;
    }
    if (rc < 0)
        return rc;
    if (s->input_cfg && !(r->input_cfg_path = sharc__strdup(ctx, s->input_cfg)))
        return SHARC_ERR(ENOMEM);
    r->s.input_cfg = r->input_cfg_path;
    if (s->input_cfg_text && !(r->input_cfg_text = sharc__strdup(ctx, s->input_cfg_text)))
        return SHARC_ERR(ENOMEM);
    r->s.input_cfg_text = r->input_cfg_text;
    r->s.paths = (const char *const *)r->paths;
    r->s.nemo_text_field = r->nemo_text_field;
    r->s.nemo_lang_field = r->nemo_lang_field;
    r->s.sampler.bins = r->bins;
    r->s.sampler.bucket_batch_size = r->bucket_batch_size;
    r->s.sampler.bin_tokens = r->bin_tokens;
    r->s.sampler.max_tps = r->max_tps;
    r->s.resume_state = r->resume;
    /* The models are read now, and the strings naming them are not needed again. */
    if (s->n_tokenizer &&
        (rc = sharc__tokenizer_open(ctx, s->tokenizer, s->n_tokenizer, &r->tok)) < 0)
        return rc;
    r->s.tokenizer = NULL; /* n_tokenizer stays: the batching settings' checks read it */
    return unbundle_own_state(r);
}

/* The noise stream's hooks into its cut reader (reader/noise.h), a single dataset's. */
static void noise_position(const sharc_reader *r, sharc__walk_pos *out)
{
    *out = *sharc__walk_position(r->walk);
}

static int noise_seek(sharc_reader *r, const sharc__walk_pos *pos)
{
    return sharc__walk_seek(r->walk, pos);
}

static uint64_t noise_state_hash(const sharc_reader *r, uint64_t seed)
{
    sharc_reader_settings s = r->s;
    s.seed = seed;
    return sharc__resume_hash(&s, &r->ds);
}

/* The noise stream of augment.noise, whose paths are read now. */
static int open_noise(sharc_reader *r)
{
    static const sharc__noise_hooks hooks = {noise_position, noise_seek, noise_state_hash};
    int rc = sharc__noise_open(&r->noise, &r->ctx, &r->s, &hooks);
    if (rc < 0)
        return rc;
    r->noise_src = sharc__noise_source_of(r->noise);
    /* The paths were read; the caller's strings are not kept. */
    r->augment.noise = NULL;
    return 0;
}

/* A single dataset: its shards found, the settings checked and the walk over it opened. */
static int open_dataset(sharc_reader *r)
{
    int rc = sharc__dataset_find(&r->ds, &r->ctx, r->s.paths, r->s.n_paths, r->s.layout,
                                 r->s.max_line_bytes);
    if (rc < 0)
        return rc;
    if (r->ds.n_shards >= (1u << 24))
        return sharc__fail(&r->ctx, SHARC_ERR_FORMAT, "too many shards (%zu, at most 2^24)",
                           r->ds.n_shards);
    /* The batching settings too, though only batches use them: a mistake there is reported
     * here, as for every other setting, not at the first batch. */
    if ((rc = sharc__pipeline_check_settings(&r->ctx, &r->s)) < 0)
        return rc;
    if ((rc = sharc__walk_open(&r->walk, &r->ctx, &r->s, &r->ds, &r->stats, &r->fetch)) < 0)
        return rc;
    sharc__walk_set_tokens(r->walk, r->tok, NULL);
    r->cs = sharc__walk_cutsource(r->walk, &r->ds);
    r->state_hash = sharc__resume_hash(&r->s, &r->ds); /* O(shards): once, not per state */
    if (r->noise)
        r->state_hash = sharc__fnv1a_u64(r->state_hash, r->noise_src.hash);
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
    sharc__ctx_set_net(&r->ctx, s->retries, s->timeout_ms);
    sharc__fetcher_init(&r->fetch, 1);
    int rc = copy_settings(r, s);
    if (rc == 0 && r->s.augment && r->s.augment->n_noise)
        rc = open_noise(r);
    if (rc < 0)
        goto fail;
    if (!r->s.input_cfg && !r->s.input_cfg_text)
        rc = open_dataset(r);
    else if ((rc = sharc__pipeline_check_settings(&r->ctx, &r->s)) >= 0)
        rc = sharc__reader_open_mixture(r);
    if (rc < 0)
        goto fail;
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
    sharc__pipeline_stop(&r->pipe);
    sharc__device_stage_close(&r->dev);
    sharc__walk_close(&r->walk);
    sharc__mix_close(&r->mix);
    sharc__tokenizer_close(&r->tok);
    for (size_t i = 0; r->mix_ds && i < r->cfg.n_sources; i++)
        sharc__dataset_free(&r->mix_ds[i], ctx);
    sharc__free(ctx, r->mix_ds);
    sharc__free(ctx, r->mix_weights);
    sharc__free(ctx, r->mix_offsets);
    sharc__free(ctx, r->tag_columns);
    sharc__free(ctx, r->tag_values);
    sharc__free(ctx, r->source_cuts);
    sharc__free(ctx, r->source_seconds);
    sharc__input_cfg_free(&r->cfg, ctx);
    sharc__free(ctx, r->input_cfg_path);
    sharc__free(ctx, r->input_cfg_text);
    sharc__dataset_free(&r->ds, ctx);
    sharc__fetcher_free(&r->fetch, ctx);
    sharc__free(ctx, r->samples);
    sharc__conditioner_free(&r->cond, ctx);
    sharc__noise_cut_unref(r->noise_held);
    sharc__noise_close(&r->noise);
    sharc__free(ctx, r->speeds);
    if (r->paths)
        for (size_t i = 0; i < r->s.n_paths; i++)
            sharc__free(ctx, r->paths[i]);
    sharc__free(ctx, r->paths);
    sharc__free(ctx, r->nemo_text_field);
    sharc__free(ctx, r->nemo_lang_field);
    sharc__free(ctx, r->bins);
    sharc__free(ctx, r->bucket_batch_size);
    sharc__free(ctx, r->bin_tokens);
    sharc__free(ctx, r->max_tps);
    sharc__free(ctx, r->resume);
    sharc__ctx copy = r->ctx;
    sharc__free(&copy, r);
    *rp = NULL;
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
    sharc__rawcut *c = sharc__cs_cut(&r->cs);
    sharc__stream_error *err = sharc__cs_error(&r->cs);
    sharc__decode_job j = sharc__decode_job_of(c);
    const int64_t most =
        c->num_samples > c->cond.num_samples ? c->num_samples : c->cond.num_samples;
    size_t cap = (size_t)(most > 0 ? most : 1) * (size_t)c->channels;
    sharc__stream_error_reset(err);
    int channels, rc = grow_samples(r, cap);
    if (rc < 0) {
        rc = sharc__set_error(&r->ctx, SHARC_ERR_TOO_LARGE,
                              "%s member %s (cut %s): cannot allocate %zu samples for its audio",
                              j.shard, j.member, j.id, cap);
        return sharc__stream_fail(&r->ctx, err, rc, SHARC_PROBLEM_TOO_LARGE, 0, j.shard, j.member,
                                  j.id);
    }
    sharc__decode_opts o = {.length_tolerance = r->s.length_tolerance,
                            .channel = r->s.channel,
                            .sampling_rate = r->s.sampling_rate,
                            .stream_out = 0};
    sharc__cond_opts_of(&r->s, &o.cond);
    /* Noise is given to the cuts in the order they are read, as the planner gives it. */
    sharc__noise_cut_unref(r->noise_held);
    r->noise_held = NULL;
    if (r->noise && j.cond.noise) {
        if ((rc = r->noise_src.assign(r->noise_src.self, &r->ctx, &j.cond)) < 0)
            return rc;
        r->noise_held = j.cond.noise_cut;
    }
    rc = sharc__decode_cond(&o, &r->ctx, &r->fetch, &r->cond, &j, r->samples, cap, &channels, err);
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
    const sharc__rawcut *c = sharc__cs_cut(&r->cs);
    sharc_cut *o = &r->cut;
    o->id = sharc__buf_str(&c->id);
    o->duration = c->duration;
    o->sampling_rate = c->cond.rate;
    o->channels = c->channels;
    o->num_samples = c->cond.num_samples;
    o->speed = c->cond.speed;
    o->gain = c->cond.gain;
    o->snr_db = c->cond.snr_db;
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

int sharc__reader_cut_tokens(sharc_reader *r, const int32_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (!r->tok || r->mode != 1 || !r->cut.id)
        return sharc__set_error(&r->ctx, SHARC_ERR(EINVAL),
                                "no tokens: the reader has no tokenizer, or returned no cut");
    const sharc__rawcut *c = sharc__cs_cut(&r->cs);
    *ids = c->tokens.len ? (const int32_t *)(const void *)c->tokens.data : NULL;
    *n = c->tokens.len / sizeof(int32_t);
    return 0;
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
    sharc__cs_lend_audio(&r->cs); /* each cut is the caller's until the next call */
    for (;;) {
        int rc = sharc__cs_pull(&r->cs);
        if (rc != 0)
            return rc;
        if (r->s.decode && (rc = decode_cut(r)) < 0) {
            if (sharc__cs_problem(&r->cs, rc) < 0)
                return rc;
            continue;
        }
        fill_cut(r);
        if (r->mix) {
            size_t k = sharc__mix_source_of(r->mix, r->cut.shard_index);
            r->source_cuts[k]++;
            r->source_seconds[k] += r->cut.duration;
        }
        r->stats.cuts++;
        r->stats.audio_seconds += r->cut.duration;
        *cut = &r->cut;
        return 0;
    }
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

typedef struct timed_next {
    sharc__pipeline *pipe;
    int timeout_ms;
} timed_next;

static int pipeline_next(void *cookie, sharc_batch **out)
{
    const timed_next *t = cookie;
    return sharc__pipeline_next(t->pipe, out, t->timeout_ms);
}

int sharc__reader_next_batch(sharc_reader *r, sharc_batch **batch, int timeout_ms)
{
    *batch = NULL;
    if (r->mode == 1)
        return sharc__set_error(&r->ctx, SHARC_ERR(EINVAL),
                                "this reader serves cuts: use sharc_reader_next");
    if (r->batch_failed)
        return r->batch_failed;
    if (r->mode == 0) {
        r->mode = 2;
        sharc__device_pipeline_settings(&r->s, &r->pipe_s);
        const sharc__pipeline_config c = {&r->ctx,
                                          &r->pipe_s,
                                          r->cs,
                                          &r->stats,
                                          r->resume,
                                          r->s.resume_state_size,
                                          r->state_hash,
                                          r->tok,
                                          r->noise ? &r->noise_src : NULL,
                                          sharc__reader_slot_hashes,
                                          r};
        int rc =
            sharc__device_wanted(&r->s) ? sharc__device_stage_open(&r->dev, &r->ctx, &r->s) : 0;
        if (rc == 0)
            sharc__device_stage_poison(r->dev, r->dev_poison);
        if (rc == 0)
            rc = sharc__pipeline_start(&r->pipe, &c);
        if (rc < 0) {
            sharc__log_error_once(&r->ctx);
            r->batch_failed = rc;
            if (r->resume) /* a refused state's counters are not this reader's */
                memset(&r->stats, 0, sizeof r->stats);
            return rc;
        }
    }
    timed_next t = {r->pipe, timeout_ms};
    if (r->dev)
        return sharc__device_stage_next(r->dev, pipeline_next, &t, batch);
    return sharc__pipeline_next(r->pipe, batch, timeout_ms);
}

void sharc__reader_device_poison(sharc_reader *r, int on)
{
    r->dev_poison = on;
    sharc__device_stage_poison(r->dev, on);
}

int sharc__reader_state_save(sharc_reader *r, void *buf, size_t cap, size_t *size)
{
    *size = 0;

    int rc = r->mode == 2 && r->pipe ? sharc__pipeline_state_save(r->pipe, buf, cap, size) : 1;
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

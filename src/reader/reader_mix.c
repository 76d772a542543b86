/*
 * The reader of a mixture (input_cfg): its sources' datasets, weights and tags, the mixer
 * that stands for the walk, and the hashes its resume states record.
 */
#include <errno.h>
#include <string.h>

#include "base/hash.h"
#include "batching/collate.h"
#include "batching/resume.h"
#include "reader/reader_impl.h"

/* Cut counts of a source, for a level of the config without weights (NeMo's default):
 * its whole data set, read once through a walk of its own. */
static int count_cuts(sharc_reader *r, const sharc__dataset *ds, double *out)
{
    sharc_reader_settings one = r->s;
    sharc_reader_stats st = {0};
    one.epochs = 1;
    one.dp_rank = 0;
    one.dp_size = 1;
    one.on_problem = NULL;
    sharc__walk *w = NULL;
    int rc = sharc__walk_open(&w, &r->ctx, &one, ds, &st, &r->fetch);
    uint64_t n = 0;
    while (rc == 0 && (rc = sharc__walk_pull(w)) == 0)
        n++;
    sharc__walk_close(&w);
    *out = (double)n;
    return rc == SHARC_END ? 0 : rc;
}

/* The batch columns of the sources' tags besides language (which is the cuts' own), in the
 * order the file first names them, and each source's values for them. */
static int tag_columns(sharc_reader *r)
{
    sharc__ctx *ctx = &r->ctx;
    const sharc__input_cfg *cfg = &r->cfg;
    size_t n = 0;
    r->tag_columns = sharc__calloc(ctx, SHARC__MAX_TAG_COLUMNS, sizeof *r->tag_columns);
    if (!r->tag_columns)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < cfg->n_sources; i++)
        for (size_t t = 0; t < cfg->sources[i].n_tags; t++) {
            const char *name = cfg->sources[i].tag_names[t];
            size_t k = 0;
            while (k < n && strcmp(r->tag_columns[k], name))
                k++;
            if (k < n || !strcmp(name, "language"))
                continue;
            static const char *const taken[] = {"cut_id", "text",       "speaker",
                                                "audio",  "audio_lens", "duration"};
            for (size_t j = 0; j < sizeof taken / sizeof *taken; j++)
                if (!strcmp(name, taken[j]))
                    return sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                            "%s: %s: tag '%s' would replace the batch's own "
                                            "column of that name",
                                            cfg->name, cfg->sources[i].where, name);
            if (n == SHARC__MAX_TAG_COLUMNS)
                return sharc__set_error(
                    ctx, SHARC_ERR_FORMAT, "%s: %s: tag '%s': at most %d tag names besides lang",
                    cfg->name, cfg->sources[i].where, name, SHARC__MAX_TAG_COLUMNS);
            r->tag_columns[n++] = name;
        }
    r->n_tag_columns = n;
    r->tag_values = sharc__calloc(ctx, cfg->n_sources * (n ? n : 1), sizeof *r->tag_values);
    if (!r->tag_values)
        return SHARC_ERR(ENOMEM);
    for (size_t i = 0; i < cfg->n_sources; i++)
        for (size_t t = 0; t < cfg->sources[i].n_tags; t++)
            for (size_t k = 0; k < n; k++)
                if (!strcmp(r->tag_columns[k], cfg->sources[i].tag_names[t]))
                    r->tag_values[i * n + k] = cfg->sources[i].tag_values[t];
    return 0;
}

/* The hashes a mixture's state records with settings `s`: the header's covers the settings,
 * and each source's its shards, weight and tags, so that a state of another config is
 * refused naming the first source that differs. */
static void mixture_hashes(const sharc_reader *r, const sharc_reader_settings *s,
                           uint64_t *state_hash, uint64_t *sources)
{
    const sharc__input_cfg *cfg = &r->cfg;
    const sharc__dataset none = {0};
    uint64_t h = sharc__resume_hash(s, &none);
    const uint64_t head[2] = {UINT64_C(0x6D697874757265), (uint64_t)s->mix_finite};
    h = sharc__fnv1a(h, head, sizeof head);
    if (r->noise)
        h = sharc__fnv1a_u64(h, sharc__noise_slot_hash(r->noise, s->dp_rank));
    *state_hash = h;
    for (size_t i = 0; i < cfg->n_sources; i++) {
        const sharc__input_source *src = &cfg->sources[i];
        h = sharc__resume_hash(s, &r->mix_ds[i]);
        h = sharc__fnv1a(h, &r->mix_weights[i], sizeof r->mix_weights[i]);
        for (size_t t = 0; t < src->n_tags; t++) {
            h = sharc__fnv1a(h, src->tag_names[t], strlen(src->tag_names[t]) + 1);
            h = sharc__fnv1a(h, src->tag_values[t], strlen(src->tag_values[t]) + 1);
        }
        sources[i] = h;
    }
}

void sharc__reader_slot_hashes(void *cookie, int dp_rank, int dp_size, uint64_t *state_hash,
                               uint64_t *sources)
{
    const sharc_reader *r = cookie;
    sharc_reader_settings s = r->s;
    s.dp_rank = dp_rank;
    s.dp_size = dp_size;
    if (r->mix) {
        mixture_hashes(r, &s, state_hash, sources);
        return;
    }
    *state_hash = sharc__resume_hash(&s, &r->ds);
    if (r->noise)
        *state_hash = sharc__fnv1a_u64(*state_hash, sharc__noise_slot_hash(r->noise, dp_rank));
}

/* What opening a mixture needs for the mixer's config alone, one entry per source. */
typedef struct mix_scratch {
    const char **names, **langs;
    const sharc__dataset **dss;
    double *counts; ///< each source's cuts, when the weights need them (need_counts)
    uint64_t *hashes;
    int need_counts;
} mix_scratch;

static int alloc_sources(sharc_reader *r, size_t n, mix_scratch *t)
{
    sharc__ctx *ctx = &r->ctx;
    r->mix_ds = sharc__calloc(ctx, n, sizeof *r->mix_ds);
    r->mix_weights = sharc__calloc(ctx, n, sizeof *r->mix_weights);
    r->mix_offsets = sharc__calloc(ctx, n + 1, sizeof *r->mix_offsets);
    t->names = sharc__calloc(ctx, n, sizeof *t->names);
    t->langs = sharc__calloc(ctx, n, sizeof *t->langs);
    t->dss = sharc__calloc(ctx, n, sizeof *t->dss);
    t->counts = sharc__calloc(ctx, n, sizeof *t->counts);
    t->hashes = sharc__calloc(ctx, n, sizeof *t->hashes);
    r->source_cuts = sharc__calloc(ctx, n, sizeof *r->source_cuts);
    r->source_seconds = sharc__calloc(ctx, n, sizeof *r->source_seconds);
    if (!r->mix_ds || !r->mix_weights || !r->mix_offsets || !t->names || !t->langs || !t->dss ||
        !t->counts || !t->hashes || !r->source_cuts || !r->source_seconds)
        return SHARC_ERR(ENOMEM);
    return 0;
}

static void free_scratch(sharc__ctx *ctx, mix_scratch *t)
{
    sharc__free(ctx, t->names);
    sharc__free(ctx, t->langs);
    sharc__free(ctx, t->dss);
    sharc__free(ctx, t->counts);
    sharc__free(ctx, t->hashes);
}

/* Each source's shards (and its cuts, when the weights need them), name and language. */
static int find_sources(sharc_reader *r, mix_scratch *t)
{
    sharc__ctx *ctx = &r->ctx;
    const sharc__input_cfg *cfg = &r->cfg;
    size_t n = cfg->n_sources;
    t->need_counts = sharc__input_cfg_needs_counts(cfg);
    for (size_t i = 0; i < n; i++) {
        const sharc__input_source *src = &cfg->sources[i];
        int rc = sharc__dataset_find(&r->mix_ds[i], ctx, (const char *const *)src->paths,
                                     src->n_paths, src->layout, r->s.max_line_bytes);
        if (rc == 0 && t->need_counts)
            rc = count_cuts(r, &r->mix_ds[i], &t->counts[i]);
        if (rc < 0)
            return sharc__wrap_error(ctx, rc, "%s: %s", cfg->name, src->where);
        r->mix_offsets[i + 1] = r->mix_offsets[i] + r->mix_ds[i].n_shards;
        t->names[i] = src->where;
        t->dss[i] = &r->mix_ds[i];
        for (size_t k = 0; k < src->n_tags; k++)
            if (!strcmp(src->tag_names[k], "language"))
                t->langs[i] = src->tag_values[k];
    }
    if (r->mix_offsets[n] >= (1u << 24))
        return sharc__set_error(ctx, SHARC_ERR_FORMAT, "too many shards (%zu, at most 2^24)",
                                r->mix_offsets[n]);
    return 0;
}

static int start_mixer(sharc_reader *r, const mix_scratch *t)
{
    const sharc__mix_config mc = {.ctx = &r->ctx,
                                  .s = &r->s,
                                  .n = r->cfg.n_sources,
                                  .ds = t->dss,
                                  .weights = r->mix_weights,
                                  .names = t->names,
                                  .languages = t->langs,
                                  .hashes = t->hashes,
                                  .n_tag_columns = r->n_tag_columns,
                                  .tag_columns = r->tag_columns,
                                  .tag_values = r->tag_values,
                                  .finite = r->s.mix_finite,
                                  .max_open = r->s.max_open_streams,
                                  .stats = &r->stats,
                                  .fetch = &r->fetch,
                                  .tokenizer = r->tok};
    int rc = sharc__mix_open(&r->mix, &mc);
    if (rc == 0)
        r->cs = sharc__mix_cutsource(r->mix);
    return rc;
}

int sharc__reader_open_mixture(sharc_reader *r)
{
    sharc__ctx *ctx = &r->ctx;
    sharc__input_cfg *cfg = &r->cfg;
    mix_scratch t = {0};
    const char *text = r->s.input_cfg_text;
    int rc = text ? sharc__input_cfg_parse(cfg, ctx, "input_cfg text", text, strlen(text))
                  : sharc__input_cfg_load(cfg, ctx, r->s.input_cfg);
    if (rc < 0)
        return rc;
    if ((rc = alloc_sources(r, cfg->n_sources, &t)) < 0 || (rc = find_sources(r, &t)) < 0)
        goto fail;
    rc = sharc__input_cfg_weights(cfg, ctx, t.need_counts ? t.counts : NULL, r->mix_weights);
    if (rc < 0)
        goto fail;
    mixture_hashes(r, &r->s, &r->state_hash, t.hashes);
    if ((rc = tag_columns(r)) < 0)
        goto fail;
    rc = start_mixer(r, &t);
fail:
    free_scratch(ctx, &t);
    return rc;
}

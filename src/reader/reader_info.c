/*
 * What a reader says of itself: its last error, its counters (the walk's, the pipeline's,
 * a resumed state's, the remote reads'), its shards and layout, a mixture's sources, the
 * sampler's bins and the device stage's counters.
 */
#include <string.h>

#include "batching/resume.h"
#include "reader/reader_impl.h"

void sharc__reader_noise_stats(const sharc_reader *r, uint64_t *held_max, uint64_t *last_index)
{
    *held_max = 0;
    *last_index = UINT64_MAX;
    if (r->noise)
        sharc__noise_stream_stats(r->noise, held_max, last_index);
}

const char *sharc__reader_last_error(const sharc_reader *r)
{
    return r->ctx.error;
}

static void get_stats(const sharc_reader *r, sharc_reader_stats *out)
{
    if (r->pipe) {
        sharc__pipeline_stats(r->pipe, out);
        return;
    }
    *out = r->stats;
    /* Resumed, and no batch asked for yet: the counters are the state's. */
    if (r->mode != 1 && r->resume && !r->batch_failed)
        sharc__resume_saved_stats(r->resume, r->s.resume_state_size, r->state_hash, out, NULL);
}

void sharc__reader_filter_counts(const sharc_reader *r, sharc__filter_counts *out)
{
    memset(out, 0, sizeof *out);
    if (r->pipe)
        sharc__pipeline_filter_counts(r->pipe, out);
    else if (r->mode != 1 && r->resume && !r->batch_failed) /* as get_stats() */
        sharc__resume_saved_stats(r->resume, r->s.resume_state_size, r->state_hash, NULL, out);
}

void sharc__reader_get_stats(const sharc_reader *r, sharc_reader_stats *out)
{
    get_stats(r, out);
    /* Remote shards' counters, totals so far over the reader's threads (base/ctx.h). */
    sharc__net_counters *net = sharc__ctx_net((sharc__ctx *)&r->ctx);
    out->net_retries = (uint32_t)atomic_load(&net->retries);
    out->net_bytes = atomic_load(&net->bytes);
    out->net_wait_seconds = (double)atomic_load(&net->wait_ns) * 1e-9;
    out->noise_seconds = r->noise ? sharc__noise_seconds(r->noise) : 0;
}

size_t sharc__reader_num_shards(const sharc_reader *r)
{
    return r->mix ? r->mix_offsets[r->cfg.n_sources] : r->ds.n_shards;
}

const char *sharc__reader_shard_path(const sharc_reader *r, size_t i)
{
    if (r->mix) {
        if (i >= r->mix_offsets[r->cfg.n_sources])
            return NULL;
        size_t k = sharc__reader_source_of_shard(r, i);
        return r->mix_ds[k].shards[i - r->mix_offsets[k]].audio_path;
    }
    return i < r->ds.n_shards ? r->ds.shards[i].audio_path : NULL;
}

size_t sharc__reader_num_ignored(const sharc_reader *r)
{
    size_t n = r->ds.n_ignored;
    for (size_t i = 0; r->mix_ds && i < r->cfg.n_sources; i++)
        n += r->mix_ds[i].n_ignored;
    return n;
}

sharc_layout sharc__reader_layout(const sharc_reader *r)
{
    return r->mix ? SHARC_LAYOUT_AUTO : r->ds.layout;
}

size_t sharc__reader_num_sources(const sharc_reader *r)
{
    return r->mix ? r->cfg.n_sources : 0;
}

const char *sharc__reader_source_name(const sharc_reader *r, size_t i)
{
    return r->mix && i < r->cfg.n_sources ? r->cfg.sources[i].where : NULL;
}

double sharc__reader_source_weight(const sharc_reader *r, size_t i)
{
    return r->mix && i < r->cfg.n_sources ? r->mix_weights[i] : 0;
}

size_t sharc__reader_source_tags(const sharc_reader *r, size_t i, const char *const **names,
                                 const char *const **values)
{
    if (!r->mix || i >= r->cfg.n_sources)
        return 0;
    *names = (const char *const *)r->cfg.sources[i].tag_names;
    *values = (const char *const *)r->cfg.sources[i].tag_values;
    return r->cfg.sources[i].n_tags;
}

void sharc__reader_source_stats(const sharc_reader *r, size_t i, uint64_t *cuts, double *seconds)
{
    *cuts = 0;
    *seconds = 0;
    if (!r->mix || i >= r->cfg.n_sources)
        return;
    if (r->pipe) {
        sharc__pipeline_source_stats(r->pipe, i, cuts, seconds);
        return;
    }
    *cuts = r->source_cuts[i];
    *seconds = r->source_seconds[i];
}

size_t sharc__reader_source_of_shard(const sharc_reader *r, size_t shard)
{
    return r->mix ? sharc__mix_source_of(r->mix, (uint32_t)shard) : 0;
}

const double *sharc__reader_bins(const sharc_reader *r, size_t *n)
{
    return r->pipe ? sharc__pipeline_bins(r->pipe, n) : NULL;
}

void sharc__reader_device_stats(const sharc_reader *r, sharc_device_stats *out)
{
    sharc__device_stage_stats(r->dev, out);
}

sharc__device_stage *sharc__reader_device_stage(sharc_reader *r)
{
    return r->dev;
}

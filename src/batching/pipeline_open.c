/*
 * Starting and stopping the batch pipeline (pipeline.c): the sampler's settings from the
 * reader's, the slots, workers and read-ahead lanes sized from the settings and the machine,
 * restoring a state, and the join and release of everything at the end.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batching/pipeline_impl.h"
#include "io/remote.h"
#include "io/tar.h"

static void sampler_settings(const sharc_reader_settings *rs, sharc__sampler_settings *o)
{
    const sharc_sampler_settings *s = &rs->sampler;
    sharc__sampler_default_settings(o);
    o->max_duration = s->max_duration;
    o->max_cuts = s->max_cuts;
    o->quadratic_duration = s->quadratic_duration;
    o->num_buckets = s->num_buckets;
    o->bins = s->bins;
    o->n_bins = s->n_bins;
    o->bucket_batch_size = s->bucket_batch_size;
    o->num_cuts_for_bins_estimate = s->num_cuts_for_bins_estimate;
    o->buffer_size = s->buffer_size;
    o->max_buffer_bytes = s->max_buffer_bytes;
    o->shuffle = s->shuffle;
    o->drop_last = s->drop_last;
    o->seed = rs->seed ^ 0x5a17c0de5a17c0deull; /* independent of the shard order's stream */
    o->sync_buckets = s->sync_buckets;
    o->world_size = s->world_size;
    o->min_item_duration = s->min_duration;
    o->max_item_duration = s->max_cut_duration;
    o->bin_tokens = s->bin_tokens;
    o->max_tps = s->max_tps;
    o->n_max_tps = s->n_max_tps;
    o->min_tps = s->min_tps;
    o->min_tokens = s->min_tokens;
    o->max_tokens = s->max_tokens;
    o->token_equivalent_duration = s->token_equivalent_duration;
    o->batch_tokens = s->batch_tokens;
}

int sharc__pipeline_check_settings(sharc__ctx *ctx, const sharc_reader_settings *s)
{
    sharc__sampler_settings o;
    sampler_settings(s, &o);
    /* A batch size is needed by batches only (the defaults leave it to be chosen): when none
     * is given, that is reported at the first batch, and the rest is checked here. */
    if (o.max_duration == 0 && o.max_cuts == 0 && !o.bucket_batch_size && !o.batch_tokens)
        o.max_cuts = 1;
    if (!s->n_tokenizer &&
        (o.bin_tokens || o.n_max_tps || o.min_tps > 0 || o.min_tokens || o.max_tokens))
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "sampler settings: 2D bins (bin_tokens), max_tps, min_tps, "
                           "min_tokens and max_tokens count tokens, and need a tokenizer");
    return sharc__sampler_check_settings(ctx, &o);
}

void sharc__pipeline_stop(sharc__pipeline **pp)
{
    sharc__pipeline *p = *pp;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->slot_free);
    pthread_cond_broadcast(&p->rows_ready);
    pthread_cond_broadcast(&p->batch_done);
    pthread_mutex_unlock(&p->mu);
    if (p->planner_started)
        pthread_join(p->planner, NULL);
    sharc__cs_readahead_stop(&p->cs);
    /* Either array may be missing when starting ran out of memory. */
    for (int i = 0; p->workers && i < p->n_workers; i++)
        if (p->workers[i].started)
            pthread_join(p->workers[i].thread, NULL);
    for (size_t k = 0; p->slots && k < p->n_slots; k++) {
        slot *s = &p->slots[k];
        if (s->col.batch)
            sharc_batch_release(s->col.batch);
        for (size_t i = 0; i < s->col.n; i++)
            sharc__bcut_free(&p->bufs, s->col.cuts[i]);
        sharc__free(p->ctx, s->col.cuts);
        sharc__free(p->ctx, s->skipped);
        sharc__free(p->ctx, s->state);
    }
    sharc__sampler_close(&p->sampler);
    sharc__batch_pool_destroy(&p->pool);
    for (int i = 0; p->workers && i < p->n_workers; i++) {
        sharc__fbank_destroy(&p->workers[i].fbank);
        sharc__buf_free(p->ctx, &p->workers[i].err.member);
        sharc__buf_free(p->ctx, &p->workers[i].err.cut_id);
        sharc__fetcher_free(&p->workers[i].fetch, p->ctx);
        sharc__conditioner_free(&p->workers[i].cond, p->ctx);
    }
    sharc__free(p->ctx, p->workers);
    sharc__free(p->ctx, p->slots);
    sharc__pipeline_free_pending(p);
    sharc__keyset_free(p->ctx, &p->held);
    sharc__free(p->ctx, p->last_state);
    sharc__free(p->ctx, p->mix_state);
    sharc__free(p->ctx, p->noise_state);
    sharc__free(p->ctx, p->source_cuts);
    sharc__free(p->ctx, p->source_seconds);
    sharc__cs_batch_mode(&p->cs, NULL, NULL);
    sharc__bufpool_destroy(&p->bufs);
    pthread_cond_destroy(&p->slot_free);
    pthread_cond_destroy(&p->rows_ready);
    pthread_cond_destroy(&p->batch_done);
    pthread_mutex_destroy(&p->mu);
    sharc__free(p->ctx, p);
    *pp = NULL;
}

static int online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The pipeline's share of the config `c`, and its decode options from the settings. */
static void take_config(sharc__pipeline *p, const sharc__pipeline_config *c)
{
    const sharc_reader_settings *rs = c->s;
    p->ctx = c->ctx;
    p->s = rs;
    p->cs = c->cs;
    p->stats = c->stats;
    p->resume = c->resume;
    p->resume_len = c->resume_len;
    p->state_hash = c->state_hash;
    p->slot_hashes = c->slot_hashes;
    p->slot_hashes_cookie = c->slot_hashes_cookie;
    p->noise = c->noise;
    p->dopts = (sharc__decode_opts){.length_tolerance = rs->length_tolerance,
                                    .channel = rs->channel,
                                    .sampling_rate = rs->sampling_rate,
                                    .stream_out = 1};
    sharc__cond_opts_of(rs, &p->dopts.cond);
}

/* The lock, the conditions and the audio buffers, which the cut source is told of. */
static void init_sync(sharc__pipeline *p)
{
    pthread_mutex_init(&p->mu, NULL);
    sharc__bufpool_init(&p->bufs, p->ctx);
    pthread_cond_init(&p->slot_free, NULL);
    pthread_cond_init(&p->rows_ready, NULL);
    /* Timed waits (sharc_reader_next_batch_timed) count on the monotonic clock. */
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    (void)pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&p->batch_done, &monotonic);
    pthread_condattr_destroy(&monotonic);
    sharc__cs_batch_mode(&p->cs, &p->bufs, &p->mu);
}

/* The workers and the slots, each slot told the columns its batches hold, and a mixture's
 * counters per source. Returns 0 or SHARC_ERR(ENOMEM) (either array may then be missing). */
static int alloc_slots(sharc__pipeline *p, const sharc__pipeline_config *c)
{
    const sharc_reader_settings *rs = c->s;
    sharc__ctx *ctx = c->ctx;
    p->n_workers = rs->n_threads > 0 ? rs->n_threads : online_cores();
    /* Workers idle at batch boundaries unless the planner is well ahead: by default keep
     * two batches per worker in flight (measured: 2 workers on WAV went from 45k to 63k
     * s of audio/s between prefetch 2 and 6). */
    p->n_slots =
        (size_t)(rs->prefetch > 0 ? rs->prefetch
                                  : (p->n_workers * 2 + 2 < 16 ? p->n_workers * 2 + 2 : 16));
    p->slots = sharc__calloc(ctx, p->n_slots, sizeof *p->slots);
    p->workers = sharc__calloc(ctx, (size_t)p->n_workers, sizeof *p->workers);
    int rc = (p->slots && p->workers) ? 0 : SHARC_ERR(ENOMEM);
    if (rc == 0 && p->cs.ops->tag_columns) { /* a mixture's tags are columns of its batches */
        const char *const *names = NULL;
        size_t n_tags = p->cs.ops->tag_columns(p->cs.self, &names);
        for (size_t k = 0; k < p->n_slots; k++) {
            p->slots[k].col.n_tags = n_tags;
            p->slots[k].col.tag_names = names;
        }
    }
    for (size_t k = 0; rc == 0 && c->tokenizer && k < p->n_slots; k++) {
        p->slots[k].col.tokens = 1;
        p->slots[k].col.pad_id = sharc__tokenizer_pad_id(c->tokenizer);
    }
    for (size_t k = 0; rc == 0 && rs->augment && k < p->n_slots; k++)
        p->slots[k].col.cond = 1; /* each row's speed, gain and SNR */
    if (rc == 0 && p->cs.ops->n_sources) {
        size_t n = p->cs.ops->n_sources(p->cs.self);
        p->source_cuts = sharc__calloc(ctx, n, sizeof *p->source_cuts);
        p->source_seconds = sharc__calloc(ctx, n, sizeof *p->source_seconds);
        if (!p->source_cuts || !p->source_seconds)
            rc = SHARC_ERR(ENOMEM);
    }
    return rc;
}

/* How many lanes read shards ahead of the walk (0: none). */
static int read_ahead_lanes(const sharc__pipeline *p)
{
    /* Shards are read ahead when there are threads to spare: the walk alone would cap
     * the pipeline at one core's worth of reading (measured: WAV with 2 threads). */
    /* Audio of plain tars is left in the file and read by the decode threads, so reading
     * a shard is only headers and metadata: lanes then cost more than they give (measured:
     * WAV and FLAC with 2 threads). The first shard stands for the dataset. */
    int n_lanes = p->n_workers;
    if (p->cs.first_shard && sharc__tar_file_is_plain(p->cs.first_shard))
        n_lanes = p->n_workers / PLAIN_WORKERS_PER_LANE;
    if (n_lanes > SHARC__MAX_LANES)
        n_lanes = SHARC__MAX_LANES;
    /* Remote shards (io/remote.h) are read ahead even with one thread, by REMOTE_LANES lanes
     * at least: each keeps a shard's transfer in flight, so that the latency of the next
     * shards' requests passes while this one is read, and waiting costs no core (measured:
     * WAV over HTTP with 20 ms per request, 1 thread, 3x the batches of one lane). */
    const int remote = p->cs.first_shard && sharc__is_remote(p->cs.first_shard);
    if ((p->n_workers < 2 && !remote) || p->s->read_ahead_bytes == 0)
        n_lanes = 0;
    else if (remote && n_lanes < REMOTE_LANES)
        n_lanes = REMOTE_LANES;
    return n_lanes;
}

int sharc__pipeline_start(sharc__pipeline **out, const sharc__pipeline_config *c)
{
    sharc__pipeline *p = sharc__calloc(c->ctx, 1, sizeof *p);
    *out = NULL;
    if (!p)
        return SHARC_ERR(ENOMEM);
    const sharc_reader_settings *rs = c->s;
    sharc__ctx *ctx = c->ctx;
    take_config(p, c);
    init_sync(p);
    int rc = alloc_slots(p, c);
    for (int i = 0; p->workers && i < p->n_workers; i++)
        sharc__fetcher_init(&p->workers[i].fetch, p->n_workers);
    int n_lanes = read_ahead_lanes(p);
    if (rc == 0 && n_lanes > 0)
        rc = sharc__cs_readahead_start(&p->cs, n_lanes, rs->read_ahead_bytes / (uint64_t)n_lanes);
    if (rc == 0)
        rc = sharc__batch_pool_create(&p->pool, ctx, p->n_slots + (size_t)rs->max_held_batches,
                                      NULL);
    sharc__sampler_settings ss;
    sampler_settings(rs, &ss);
    sharc__sampler_source src = sharc__pipeline_sampler_source(p);
    if (rc == 0)
        rc = p->resume ? sharc__pipeline_restore(p, &ss, &src)
                       : sharc__sampler_open(ctx, &ss, &src, &p->sampler);
    if (rc < 0 || (rc = sharc__pipeline_start_threads(p)) < 0)
        goto fail;
    *out = p;
    return 0;
fail:
    if (ctx->error[0] == 0)
        sharc__set_error(ctx, rc, "cannot start the batch pipeline: %s", sharc_strerror(rc));
    sharc__pipeline_stop(&p);
    return rc;
}

#include "bcast/loader.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "batching/batch.h"
#include "bcast/bcast.h"
#include "base/ctx.h"
#include "bcast/dpsync.h"
#include "bcast/handshake.h"
#include "base/hash.h"
#include "reader/reader.h"
#include "bcast/transport.h"

struct sharc_loader {
    sharc__ctx ctx;
    sharc_mesh mesh;
    int source;
    sharc_transport *t;             ///< the caller's transport, or own_t
    sharc_transport *own_t;         ///< a self transport made for a group of one
    sharc__bcast *bc;               ///< the framed protocol over t
    sharc_reader *reader;           ///< source with paths: the reader (NULL if it failed to open)
    int open_rc;                    ///< source: why the reader could not be opened (0 if it was)
    char open_error[SHARC__ERRLEN]; ///< source: its message, sent at the first step
    sharc__batch_pool *pool;        ///< source with a produce callback: its batches
    sharc_loader_produce_fn produce;
    void *produce_cookie;
    char produce_error[SHARC__ERRLEN]; ///< text for the producer's next error
    sharc_logger user_log;             ///< the caller's logger, behind capture_log
    int capturing;                     ///< capture_log records ERROR texts (during open only)
    char captured[SHARC__ERRLEN];
    int ended; ///< 0 while the stream runs; then what every later next returns
    uint64_t max_steps;
    uint64_t steps;           ///< source: batches sent so far
    sharc_transport *dp_t;    ///< source with even steps: the sources of all slots (else NULL)
    int dp_done;              ///< even steps: a round has ended the stream (no more rounds)
    uint64_t dropped_batches; ///< even steps: this slot's batches after the common end
    uint64_t dropped_cuts;
    int drain;  ///< even steps: read the rest of the stream after STOP
    int finite; ///< the reader's stream ends (finite epochs, no repeating mixture): drain it
    char dp_why[SHARC__ERRLEN]; ///< even steps: the text of a failure the round brought
    double bcast_seconds;       ///< in the broadcast so far (sharc_loader_broadcast_seconds)
};

void sharc_loader_default_settings(sharc_loader_settings *s)
{
    static const char *const dp[] = {"dp"};
    static const int one[] = {1};
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    sharc_reader_default_settings(&s->reader);
    sharc_mesh_init(&s->mesh, 1, dp, one, 0);
    s->max_frame_bytes = (uint64_t)4 << 30;
    s->control_bytes = 65536;
    s->even_steps = 1;
}

/*
 * The reader logs why its open failed (there is no handle to hold the text). The loader
 * puts itself between the reader and the caller's logger to keep that text for the ERROR
 * frame; everything is passed on to the caller's logger as it was configured.
 */
static void capture_log(void *cookie, sharc_log_level level, const char *message)
{
    sharc_loader *l = cookie;
    if (l->capturing && level == SHARC_LOG_ERROR)
        snprintf(l->captured, sizeof l->captured, "%s", message);
    if (l->user_log.callback && level <= l->user_log.level)
        l->user_log.callback(l->user_log.cookie, level, message);
}

static int check_settings(sharc__ctx *ctx, const sharc_loader_settings *s)
{
    const sharc_mesh *m = &s->mesh;
    for (size_t i = 0; i < sizeof s->reserved; i++)
        if (s->reserved[i])
            return sharc__fail(ctx, SHARC_ERR(EINVAL), "loader settings: reserved bytes not zero");
    if (m->n_axes < 1 || m->n_axes > SHARC_MESH_MAX_AXES || m->size < 1 || m->rank < 0 ||
        m->rank >= m->size)
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "loader settings: the mesh is not initialised (use sharc_mesh_parse "
                           "or sharc_mesh_init)");
    if (s->reader.max_held_batches < 1)
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "loader settings: reader.max_held_batches must be at least 1, got %d",
                           s->reader.max_held_batches);
    int group = sharc_mesh_group_size(m), group_rank = sharc_mesh_group_rank(m);
    if (!s->transport && group > 1)
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "loader settings: the broadcast group of rank %d has %d ranks, so a "
                           "transport is needed",
                           m->rank, group);
    if (s->transport && (sharc_transport_size(s->transport) != group ||
                         sharc_transport_rank(s->transport) != group_rank))
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "loader settings: the %s transport is rank %d of %d but the mesh puts "
                           "rank %d at %d of a broadcast group of %d",
                           sharc_transport_name(s->transport), sharc_transport_rank(s->transport),
                           sharc_transport_size(s->transport), m->rank, group_rank, group);
    int dp_size = sharc_mesh_dp_size(m), dp_rank = sharc_mesh_dp_rank(m);
    if (s->dp_transport && sharc_mesh_is_source(m) &&
        (sharc_transport_size(s->dp_transport) != dp_size ||
         sharc_transport_rank(s->dp_transport) != dp_rank || dp_size > SHARC__DP_MAX_SLOTS))
        return sharc__fail(
            ctx, SHARC_ERR(EINVAL),
            "loader settings: the %s dp_transport is rank %d of %d but the mesh "
            "puts this source at data-parallel slot %d of %d (at most %d)",
            sharc_transport_name(s->dp_transport), sharc_transport_rank(s->dp_transport),
            sharc_transport_size(s->dp_transport), dp_rank, dp_size, SHARC__DP_MAX_SLOTS);
    if (dp_size > 1 && !(s->reader.dp_rank == 0 && s->reader.dp_size == 1) &&
        (s->reader.dp_rank != dp_rank || s->reader.dp_size != dp_size))
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "loader settings: reader.dp_rank/dp_size %d/%d contradict the mesh's "
                           "data-parallel slot %d of %d",
                           s->reader.dp_rank, s->reader.dp_size, dp_rank, dp_size);
    return 0;
}

/* The source's reader; a failure is kept for the first next, which sends it to the peers. */
static int open_reader(sharc_loader *l, const sharc_loader_settings *s)
{
    sharc_reader_settings rs = s->reader;
    if (sharc_mesh_dp_size(&l->mesh) > 1) {
        rs.dp_rank = sharc_mesh_dp_rank(&l->mesh);
        rs.dp_size = sharc_mesh_dp_size(&l->mesh);
    }
    if (rs.resume_state_size == 0)
        rs.resume_state = NULL; /* a peer's empty state: start from the beginning */
    l->user_log = s->reader.logger;
    rs.logger.cookie = l;
    rs.logger.callback = capture_log;
    rs.logger.level = l->user_log.callback ? l->user_log.level : SHARC_LOG_ERROR;
    if (rs.logger.level < SHARC_LOG_ERROR)
        rs.logger.level = SHARC_LOG_ERROR;
    l->capturing = 1;
    int rc = sharc_reader_open(&l->reader, &rs);
    l->capturing = 0;
    if (rc == SHARC_ERR(ENOMEM))
        return sharc__fail(&l->ctx, rc, "out of memory opening the reader");
    if (rc < 0) {
        l->open_rc = rc;
        sharc__set_error(&l->ctx, rc, "cannot open the dataset: %s",
                         l->captured[0] ? l->captured : sharc_strerror(rc));
        /* Kept apart: calls before the first step (state_save, ...) set errors of their own. */
        snprintf(l->open_error, sizeof l->open_error, "%s", l->ctx.error);
    }
    return 0;
}

/* The settings that decide the batch sequence, which every rank of the group must share. */
static void describe_settings(sharc__handshake *h, const sharc_loader_settings *s)
{
    const sharc_reader_settings *r = &s->reader;
    const sharc_sampler_settings *p = &r->sampler;
    char mesh[SHARC__HANDSHAKE_VALUE_MAX];
    sharc_mesh_format(&s->mesh, mesh, sizeof mesh);
    uint64_t bins = 0xcbf29ce484222325ull;
    for (size_t i = 0; p->bins && i < p->n_bins; i++)
        bins = sharc__fnv1a(bins, &p->bins[i], sizeof p->bins[i]);
    sharc__handshake_add(h, "mesh", "%s", mesh);
    sharc__handshake_add(h, "max_steps", "%llu", (unsigned long long)s->max_steps);
    sharc__handshake_add(h, "reader.epochs", "%llu", (unsigned long long)r->epochs);
    sharc__handshake_add(h, "reader.seed", "%llu", (unsigned long long)r->seed);
    sharc__handshake_add(h, "reader.shuffle_shards", "%d", r->shuffle_shards);
    sharc__handshake_add(h, "sampler.max_duration", "%.17g", p->max_duration);
    sharc__handshake_add(h, "sampler.max_cuts", "%u", (unsigned)p->max_cuts);
    sharc__handshake_add(h, "sampler.quadratic_duration", "%.17g", p->quadratic_duration);
    sharc__handshake_add(h, "sampler.num_buckets", "%u", (unsigned)p->num_buckets);
    sharc__handshake_add(h, "sampler.bins", "%zu bins, hash %016llx", p->bins ? p->n_bins : 0,
                         (unsigned long long)bins);
    sharc__handshake_add(h, "sampler.num_cuts_for_bins_estimate", "%u",
                         (unsigned)p->num_cuts_for_bins_estimate);
    sharc__handshake_add(h, "sampler.buffer_size", "%u", (unsigned)p->buffer_size);
    sharc__handshake_add(h, "sampler.max_buffer_bytes", "%llu",
                         (unsigned long long)p->max_buffer_bytes);
    sharc__handshake_add(h, "sampler.shuffle", "%d", p->shuffle);
    sharc__handshake_add(h, "sampler.drop_last", "%d", p->drop_last);
    sharc__handshake_add(h, "sampler.sync_buckets", "%d", p->sync_buckets);
    sharc__handshake_add(h, "sampler.world_size", "%u", (unsigned)p->world_size);
    sharc__handshake_add(h, "sampler.min_duration", "%.17g", p->min_duration);
    sharc__handshake_add(h, "sampler.max_cut_duration", "%.17g", p->max_cut_duration);
    /* The tokens: the models are compared by number (their paths may differ by machine), the
     * token settings that decide the batches by a hash. */
    uint64_t tok = sharc__fnv1a(0xcbf29ce484222325ull, &p->min_tps, sizeof p->min_tps);
    for (size_t i = 0; p->bin_tokens && i < p->n_bins; i++)
        tok = sharc__fnv1a(tok, &p->bin_tokens[i], sizeof p->bin_tokens[i]);
    for (size_t i = 0; p->max_tps && i < p->n_max_tps; i++)
        tok = sharc__fnv1a(tok, &p->max_tps[i], sizeof p->max_tps[i]);
    const uint64_t more[4] = {p->min_tokens, p->max_tokens, p->batch_tokens, p->n_max_tps};
    tok = sharc__fnv1a(tok, more, sizeof more);
    tok = sharc__fnv1a(tok, &p->token_equivalent_duration, sizeof p->token_equivalent_duration);
    sharc__handshake_add(h, "reader.tokens", "%zu models, settings hash %016llx", r->n_tokenizer,
                         (unsigned long long)tok);
    /* The features decide the batches' tensors: a peer set for other features would get
     * tensors it does not expect. Their parameters count only when they are on. */
    if (r->features == SHARC_FEATURES_NONE) {
        sharc__handshake_add(h, "reader.features", "none");
    } else {
        sharc__handshake_add(h, "reader.features",
                             "fbank n_mels=%d sample_rate=%d window=%d hop=%d n_fft=%d pad_to=%d "
                             "keep_audio=%d",
                             r->fbank_n_mels, r->fbank_sample_rate, r->fbank_window, r->fbank_hop,
                             r->fbank_n_fft, r->fbank_pad_to, r->keep_audio);
        sharc__handshake_add(h, "reader.fbank", "preemph=%.17g dither=%.17g", r->fbank_preemph,
                             r->fbank_dither);
    }
}

/* Source: whether its slot agrees with the others at every step (even steps). */
static int setup_even_steps(sharc_loader *l, const sharc_loader_settings *s)
{
    if (!l->source || !s->even_steps || sharc_mesh_dp_size(&s->mesh) < 2 ||
        (!s->produce && s->reader.epochs == 0))
        return 0;
    if (s->dp_transport) {
        const sharc_reader_settings *r = &s->reader;
        l->dp_t = s->dp_transport;
        l->finite = !s->produce && r->epochs != 0 &&
                    (!(r->input_cfg || r->input_cfg_text) || r->mix_finite);
        return 0;
    }
    if (sharc_mesh_dp_rank(&s->mesh) == 0)
        sharc__log(&l->ctx, SHARC_LOG_WARN,
                   "even steps are off: the %d data-parallel slots have no dp_transport to agree "
                   "over (sharc_transport_mpi_split_dp), so they may end at different steps",
                   sharc_mesh_dp_size(&s->mesh));
    return 0;
}

int sharc_loader_open(sharc_loader **out, const sharc_loader_settings *s)
{
    sharc__ctx boot;
    if (!out || !s) {
        sharc__ctx_init(&boot, NULL, NULL);
        if (out)
            *out = NULL;
        return sharc__fail(&boot, SHARC_ERR(EINVAL), "sharc_loader_open: NULL argument");
    }
    *out = NULL;
    int rc = sharc__check_struct_size("sharc_loader_settings", s->struct_size, sizeof *s,
                                      "sharc_loader_default_settings");
    if (rc == 0)
        rc = sharc__check_reader_struct_sizes(&s->reader, "sharc_loader_settings.reader",
                                              "sharc_loader_default_settings");
    if (rc < 0)
        return rc;
    sharc__ctx_init(&boot, &s->reader.allocator, &s->reader.logger);
    rc = check_settings(&boot, s);
    if (rc < 0)
        return rc;
    sharc_loader *l = sharc__calloc(&boot, 1, sizeof *l);
    if (!l)
        return sharc__fail(&boot, SHARC_ERR(ENOMEM), "out of memory opening the loader");
    l->ctx = boot;
    l->mesh = s->mesh;
    l->source = sharc_mesh_is_source(&s->mesh);
    l->produce = s->produce;
    l->produce_cookie = s->produce_cookie;
    l->max_steps = s->max_steps;
    l->t = s->transport;
    rc = setup_even_steps(l, s);
    if (rc < 0)
        goto fail;
    if (!l->t) {
        sharc_transport_settings ts;
        sharc_transport_default_settings(&ts);
        ts.allocator = l->ctx.alloc;
        ts.logger = l->ctx.log;
        rc = sharc_transport_self_open(&l->own_t, &ts);
        if (rc < 0)
            goto fail;
        l->t = l->own_t;
    }
    sharc__bcast_settings bs;
    sharc__bcast_default_settings(&bs);
    bs.control_bytes = s->control_bytes;
    bs.max_frame_bytes = s->max_frame_bytes;
    bs.max_held = (size_t)s->reader.max_held_batches;
    bs.source_rank = sharc_mesh_group_member(&s->mesh, 0);
    bs.mesh = &s->mesh;
    sharc__handshake fields = {0};
    describe_settings(&fields, s);
    bs.handshake = &fields;
    rc = sharc__bcast_open(&l->bc, l->t, &bs); /* logs its reason */
    if (rc < 0)
        goto fail;
    if (l->source && l->produce)
        rc = sharc__batch_pool_create(&l->pool, &l->ctx, (size_t)s->reader.max_held_batches,
                                      sharc__transport_device_allocator(l->t));
    else if (l->source)
        rc = open_reader(l, s);
    if (rc < 0)
        goto fail;
    *out = l;
    return 0;
fail:
    if (rc == SHARC_ERR(ENOMEM))
        sharc__fail(&boot, rc, "out of memory opening the loader");
    sharc_loader_close(&l);
    return rc;
}

/*
 * The stream has ended with `code`; the text stays in ctx.error for later calls. Under even
 * steps, a failure that no round has carried yet (a peer's, the transport's, the
 * handshake's) goes to the other slots' sources in one more round, which they join at
 * their next step, so that they end there instead of waiting for this slot.
 */
static int end_with(sharc_loader *l, int code)
{
    l->ended = code;
    if (code < 0 && l->dp_t && !l->dp_done) {
        sharc__dp_agreement a;
        l->dp_done = 1;
        sharc__dp_agree(l->dp_t, SHARC__DP_FAIL, 0, l->ctx.error, &a);
    }
    return code;
}

/* Source: the reader or producer failed with `rc` and `why`; tell the peers, then return. */
static int send_failure(sharc_loader *l, int rc, const char *why)
{
    char text[SHARC__ERRLEN];
    snprintf(text, sizeof text, "%s", why[0] ? why : sharc_strerror(rc));
    int sent = sharc__bcast_send_error(l->bc, rc, text);
    if (sent < 0)
        return end_with(l, sharc__set_error(&l->ctx, sent, "%s (and telling the peers failed: %s)",
                                            text, sharc__bcast_error(l->bc)));
    sharc__set_error(&l->ctx, rc, "%s", text);
    return end_with(l, rc);
}

static int produce_next(sharc_loader *l, sharc_batch **b)
{
    l->produce_error[0] = 0;
    int rc = l->produce(l->produce_cookie, l, b);
    if (rc == 0 && !*b) {
        snprintf(l->produce_error, sizeof l->produce_error,
                 "the produce callback returned no batch");
        rc = SHARC_ERR(EINVAL);
    }
    if (rc > 0 && rc != SHARC_END) {
        snprintf(l->produce_error, sizeof l->produce_error,
                 "the produce callback returned %d, which is not a result code", rc);
        rc = SHARC_ERR(EINVAL);
    }
    return rc;
}

/* Cuts of a batch: the rows of its cut ids, else of its audio lengths (0 if neither). */
static uint64_t batch_cuts(const sharc_batch *b)
{
    const sharc_tensor *t = sharc_batch_tensor(b, "cut_id_offsets");
    if (t && t->ndim == 1 && t->shape[0] > 0)
        return (uint64_t)t->shape[0] - 1;
    t = sharc_batch_tensor(b, "audio_lens");
    return t && t->ndim == 1 ? (uint64_t)t->shape[0] : 0;
}

static void drop(sharc_loader *l, sharc_batch *b)
{
    l->dropped_batches++;
    l->dropped_cuts += batch_cuts(b);
    sharc_batch_release(b);
}

/*
 * Even steps, after STOP went out because another slot ran dry: read this slot's stream to
 * its end, so that what it drops is counted exactly, and say so in the log.
 */
static void drain_dropped(sharc_loader *l)
{
    sharc_batch *b = NULL;
    int rc = 0;
    while (l->finite && l->reader && (rc = sharc_reader_next_batch(l->reader, &b)) == 0)
        drop(l, b);
    if (rc < 0 && rc != SHARC_ERR_BACKPRESSURE)
        sharc__log(&l->ctx, SHARC_LOG_WARN, "even steps: reading the dropped batches failed: %s",
                   sharc_reader_last_error(l->reader));
    sharc__log(&l->ctx, SHARC_LOG_WARN,
               "even steps: another data-parallel slot ran dry first, so the stream ended at "
               "step %llu on every slot; slot %d drops the %llu batches (%llu cuts) it still "
               "had%s",
               (unsigned long long)l->steps, sharc_mesh_dp_rank(&l->mesh),
               (unsigned long long)l->dropped_batches, (unsigned long long)l->dropped_cuts,
               rc == SHARC_ERR_BACKPRESSURE || !l->finite ? " (at least)" : "");
}

/* Source: the stream ends with STOP (0) unless a failure recorded since is sent instead. */
static int send_stop(sharc_loader *l)
{
    int rc = sharc__bcast_send_stop(l->bc);
    if (rc < 0)
        return end_with(l, sharc__set_error(&l->ctx, rc, "%s", sharc__bcast_error(l->bc)));
    if (l->drain)
        drain_dropped(l);
    sharc__set_error(&l->ctx, SHARC_END, "end of stream");
    return end_with(l, SHARC_END);
}

/*
 * Even steps: this slot's result for the step (`rc`: 0 with a batch, SHARC_END, or an
 * error with `*why`; `pending`: a failure recorded with sharc_loader_fail) agreed with
 * every other slot's. Returns what this slot does: its own failure, else another slot's
 * failure (SHARC_ERR_REMOTE, *why naming the slot), else the end when any slot ended
 * (its batch dropped), else its batch labelled with the slots' highest epoch.
 */
static int agree(sharc_loader *l, sharc_batch **b, int rc, int pending, const char **why)
{
    sharc__dp_kind mine = pending || (rc < 0) ? SHARC__DP_FAIL
                          : rc == SHARC_END   ? SHARC__DP_END
                                              : SHARC__DP_BATCH;
    const char *text = pending ? sharc__bcast_pending_text(l->bc) : *why;
    if (mine == SHARC__DP_FAIL && !text[0])
        text = sharc_strerror(pending ? SHARC_ERR(EINVAL) : rc);
    sharc__dp_agreement a;
    int arc = sharc__dp_agree(l->dp_t, mine, *b ? (*b)->epoch : 0, text, &a);
    if (arc < 0 || a.kind != SHARC__DP_BATCH)
        l->dp_done = 1;
    if (arc < 0) {
        sharc_batch_release(*b);
        *b = NULL;
        snprintf(l->dp_why, sizeof l->dp_why,
                 "step %llu: the agreement of the data-parallel slots over %s failed: %s",
                 (unsigned long long)l->steps, sharc_transport_name(l->dp_t),
                 sharc_transport_last_error(l->dp_t));
        *why = l->dp_why;
        return arc;
    }
    if (mine == SHARC__DP_FAIL)
        return rc;
    if (a.kind == SHARC__DP_FAIL) {
        sharc_batch_release(*b);
        *b = NULL;
        snprintf(l->dp_why, sizeof l->dp_why, "data-parallel slot %d failed at step %llu: %.900s",
                 a.failed_slot, (unsigned long long)l->steps, a.message);
        *why = l->dp_why;
        return SHARC_ERR_REMOTE;
    }
    if (a.kind == SHARC__DP_END) {
        if (*b) {
            drop(l, *b);
            *b = NULL;
            l->drain = 1; /* read to the end when it has one, and said */
        }
        return SHARC_END;
    }
    (*b)->epoch = a.epoch;
    return 0;
}

static int source_next(sharc_loader *l, sharc_batch **out)
{
    sharc_batch *b = NULL;
    int rc = sharc__bcast_start(l->bc); /* the handshake, before anything is read */
    if (rc < 0)
        return end_with(l, sharc__set_error(&l->ctx, rc, "%s", sharc__bcast_error(l->bc)));
    int pending = sharc__bcast_has_pending(l->bc);
    const char *why = "";
    if (pending || (l->max_steps && l->steps >= l->max_steps)) {
        rc = SHARC_END; /* a pending failure goes out as ERROR in its place */
    } else if (l->open_rc < 0) {
        rc = l->open_rc;
        why = l->open_error;
    } else {
        rc = l->produce ? produce_next(l, &b) : sharc_reader_next_batch(l->reader, &b);
        why = l->produce ? l->produce_error : sharc_reader_last_error(l->reader);
        if (rc == SHARC_ERR_BACKPRESSURE) /* local and retryable: nothing is sent */
            return sharc__set_error(&l->ctx, rc, "%s", why[0] ? why : sharc_strerror(rc));
    }
    const double t0 = sharc__now_s(); /* the broadcast's share of the step starts here */
    if (l->dp_t && !l->dp_done)
        rc = agree(l, &b, rc, pending, &why);
    if (rc == SHARC_END)
        return send_stop(l);
    if (rc < 0)
        return send_failure(l, rc, why);
    rc = sharc__bcast_send(l->bc, b); /* a frame that cannot be built goes out as ERROR */
    l->bcast_seconds += sharc__now_s() - t0;
    if (rc < 0) {
        sharc_batch_release(b);
        return end_with(l, sharc__set_error(&l->ctx, rc, "%s", sharc__bcast_error(l->bc)));
    }
    *out = b;
    l->steps++;
    return 0;
}

static int peer_next(sharc_loader *l, sharc_batch **out)
{
    const double t0 = sharc__now_s();
    int rc = sharc__bcast_recv(l->bc, out);
    l->bcast_seconds += sharc__now_s() - t0;
    if (rc == 0)
        return 0;
    sharc__set_error(&l->ctx, rc, "%s", sharc__bcast_error(l->bc));
    return rc == SHARC_ERR_BACKPRESSURE ? rc : end_with(l, rc);
}

int sharc_loader_next(sharc_loader *l, sharc_batch **batch)
{
    if (!batch)
        return l ? sharc__set_error(&l->ctx, SHARC_ERR(EINVAL), "sharc_loader_next: NULL batch")
                 : SHARC_ERR(EINVAL);
    *batch = NULL;
    if (!l)
        return SHARC_ERR(EINVAL);
    if (l->ended)
        return l->ended;
    return l->source ? source_next(l, batch) : peer_next(l, batch);
}

int sharc_loader_batch_new(sharc_loader *l, size_t n_tensors, const sharc_tensor *desc,
                           sharc_batch **batch)
{
    sharc_batch *b = NULL;
    if (!l || !batch || (n_tensors && !desc))
        return l ? sharc__set_error(&l->ctx, SHARC_ERR(EINVAL),
                                    "sharc_loader_batch_new: NULL "
                                    "argument")
                 : SHARC_ERR(EINVAL);
    *batch = NULL;
    if (!l->pool)
        return sharc__set_error(&l->ctx, SHARC_ERR(EINVAL),
                                "sharc_loader_batch_new serves the produce callback of a source "
                                "rank only");
    if (n_tensors > SHARC__BATCH_MAX_TENSORS)
        return sharc__set_error(&l->ctx, SHARC_ERR_TOO_LARGE, "a batch holds at most %d tensors",
                                SHARC__BATCH_MAX_TENSORS);
    int rc = sharc__batch_pool_acquire(l->pool, &b);
    for (size_t i = 0; rc >= 0 && i < n_tensors; i++) {
        const sharc_tensor *d = &desc[i];
        if (!memchr(d->name, 0, sizeof d->name)) {
            sharc_batch_release(b);
            return sharc__set_error(&l->ctx, SHARC_ERR_FRAME,
                                    "tensor %zu: name is not NUL-terminated", i);
        }
        rc = sharc__batch_add_tensor(b, d->name, d->dtype, d->device, d->device_ordinal, d->ndim,
                                     d->shape);
    }
    if (rc >= 0)
        rc = sharc__batch_finish(b);
    if (rc < 0) {
        sharc_batch_release(b);
        return sharc__set_error(&l->ctx, rc, "%s", sharc__batch_pool_error(l->pool));
    }
    *batch = b;
    return 0;
}

void sharc_loader_set_source_error(sharc_loader *l, const char *fmt, ...)
{
    if (!l || !fmt)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->produce_error, sizeof l->produce_error, fmt, ap);
    va_end(ap);
}

int sharc_loader_fail(sharc_loader *l, int code, const char *message)
{
    if (!l)
        return SHARC_ERR(EINVAL);
    if (l->ended)
        return l->ended;
    return sharc__bcast_fail(l->bc, code, message ? message : "");
}

int sharc_loader_state_save(sharc_loader *l, void *buf, size_t cap, size_t *size)
{
    if (!l || !size)
        return l ? sharc__set_error(&l->ctx, SHARC_ERR(EINVAL),
                                    "sharc_loader_state_save: NULL "
                                    "size")
                 : SHARC_ERR(EINVAL);
    *size = 0;
    if (!l->source)
        return 0; /* the state lives on the source */
    if (!l->reader)
        return sharc__set_error(&l->ctx, SHARC_ERR(EINVAL), "no reader state on this source: %s",
                                l->produce ? "batches come from a produce callback"
                                           : "the reader failed to open");
    int rc = sharc_reader_state_save(l->reader, buf, cap, size);
    if (rc < 0)
        sharc__set_error(&l->ctx, rc, "%s", sharc_reader_last_error(l->reader));
    return rc;
}

int sharc_loader_broadcast_seconds(const sharc_loader *l, double *seconds)
{
    if (!l || !seconds)
        return SHARC_ERR(EINVAL);
    *seconds = l->bcast_seconds;
    return 0;
}

int sharc_loader_dropped(const sharc_loader *l, uint64_t *batches, uint64_t *cuts)
{
    if (!l || !batches || !cuts)
        return SHARC_ERR(EINVAL);
    *batches = l->dropped_batches;
    *cuts = l->dropped_cuts;
    return 0;
}

int sharc_loader_is_source(const sharc_loader *l)
{
    return l ? l->source : 0;
}

int sharc_loader_source_rank(const sharc_loader *l)
{
    return l ? sharc_mesh_group_member(&l->mesh, 0) : -1;
}

sharc_reader *sharc_loader_reader(const sharc_loader *l)
{
    return l ? l->reader : NULL;
}

const char *sharc_loader_transport_name(const sharc_loader *l)
{
    return l ? sharc_transport_name(l->t) : "";
}

const char *sharc_loader_last_error(const sharc_loader *l)
{
    return l ? l->ctx.error : "";
}

void sharc_loader_close(sharc_loader **pl)
{
    sharc_loader *l = pl ? *pl : NULL;
    if (!l)
        return;
    *pl = NULL;
    sharc_reader_close(&l->reader);
    sharc__batch_pool_destroy(&l->pool);
    sharc__bcast_close(&l->bc);
    sharc_transport_close(&l->own_t);
    sharc__ctx ctx = l->ctx;
    sharc__free(&ctx, l);
}

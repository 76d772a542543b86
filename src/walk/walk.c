#include "walk/walk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "walk/readahead.h"

struct sharc__walk {
    sharc__ctx *ctx;
    const sharc_reader_settings *s;
    const sharc__dataset *ds;
    sharc_reader_stats *stats;
    sharc__fetcher *fetch; ///< headers of audio left in shard files, read on this thread
    sharc__header_cache info;
    sharc__decode_opts dopts;
    const sharc__stream_ops *ops;
    sharc__stream_opts sopts;
    uint32_t *order;
    size_t n_order;
    uint32_t share_every, share_first; ///< the entries of each shard this slot keeps
    sharc__walk_unit *units;           ///< the prologue (sharc__walk_set_prologue)
    size_t n_units;
    uint64_t start_epoch; ///< the first epoch after the prologue
    int has_prologue;
    sharc__walk_pos pos;
    sharc__stream *stream; ///< the open shard, read on this thread
    /* With read-ahead: the open shard's entries come from a lane instead. */
    struct sharc__readahead *ra;
    struct sharc__lane *lane;
    uint64_t ahead_epoch, ahead_pos; ///< next plan position to request from ra
    uint32_t *ahead_order;           ///< shard order of ahead_epoch
    size_t n_ahead_order;
    double read_seconds; ///< time spent producing stream entries, on whichever thread
    int quiet;           ///< peeking or scanning: problems are reported when pulled
    int failed;          ///< the error that stopped the walk
    const char *name;    ///< a mixture's source: the front of its errors (or NULL)
    int suspended;       ///< the open shard was closed to bound open shards (pos kept)
    sharc__rawcut raw;
    sharc__stream_error err;
    const sharc__tokenizer *tok; ///< tokenizes each cut's transcript (NULL: no tokens)
    const char *language;        ///< every cut's language (a mixture source's tag), or NULL
    /** Held around on_problem calls once other threads report too, so the callback is
     *  never entered by two threads at once. */
    pthread_mutex_t *report_lock;
};

/* ---- the open shard, read here or by a read-ahead lane ------------------------------ */

static int shard_is_open(const sharc__walk *w)
{
    return w->stream != NULL || w->lane != NULL;
}

static void shard_close(sharc__walk *w)
{
    if (w->lane)
        sharc__readahead_release(w->ra, w->lane);
    w->lane = NULL;
    if (w->stream)
        w->ops->close(&w->stream);
}

/* Put the walk's name, if it has one, in front of ctx->error. */
static void name_error(sharc__walk *w)
{
    if (w->name)
        (void)sharc__wrap_error(w->ctx, 0, "%s", w->name);
}

/* sharc__fail for the walk: the error named, then logged. */
static int walk_fail(sharc__walk *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int walk_fail(sharc__walk *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->ctx->error, sizeof w->ctx->error, fmt, ap);
    va_end(ap);
    name_error(w);
    sharc__log_error(w->ctx, SHARC_LOG_ERROR);
    return code;
}

/* A plan position: the k-th shard of an epoch's order. */
static uint64_t plan_tag(uint64_t epoch, uint64_t pos)
{
    return epoch << 32 | pos;
}

/* Request the shards after the last one requested, as far as free lanes allow. */
static void plan_ahead(sharc__walk *w)
{
    while (sharc__readahead_has_free_lane(w->ra)) {
        if (w->ahead_pos == w->n_ahead_order) {
            if (w->s->epochs && w->ahead_epoch + 1 >= w->s->epochs)
                return;
            w->ahead_epoch++;
            w->n_ahead_order =
                sharc__dataset_epoch_order(w->ds, w->s->seed, w->ahead_epoch, w->s->shuffle_shards,
                                           w->s->dp_rank, w->s->dp_size, w->ahead_order);
            w->ahead_pos = 0;
            if (w->n_ahead_order == 0)
                return;
        }
        sharc__readahead_request(w->ra, w->ahead_order[w->ahead_pos],
                                 plan_tag(w->ahead_epoch, w->ahead_pos));
        w->ahead_pos++;
    }
}

/* Forget the requests made and request again from position `pos` of the current epoch. */
static void plan_from(sharc__walk *w, uint64_t pos)
{
    sharc__readahead_cancel(w->ra);
    w->ahead_epoch = w->pos.epoch;
    w->ahead_pos = pos;
    memcpy(w->ahead_order, w->order, w->n_order * sizeof *w->order);
    w->n_ahead_order = w->n_order;
    plan_ahead(w);
}

static int lane_next(sharc__walk *w)
{
    return sharc__readahead_next(w->lane, w->ctx, &w->raw, &w->err, &w->read_seconds,
                                 &w->ctx->io_seconds);
}

/* Open the shard at the walk's position (order_pos - 1), preferably from a lane. */
static int shard_open(sharc__walk *w)
{
    const sharc__shard *shard = &w->ds->shards[w->pos.shard_index];
    if (!w->ra || w->pos.in_prologue) { /* lanes read the epochs' plan, not a prologue */
        double t0 = sharc__now_s();
        int rc = w->ops->open(&w->stream, w->ctx, shard, &w->sopts, &w->err);
        w->read_seconds += sharc__now_s() - t0;
        return rc;
    }
    uint64_t tag = plan_tag(w->pos.epoch, w->pos.order_pos - 1);
    sharc__lane *l = sharc__readahead_take(w->ra, tag);
    if (!l) {
        plan_from(w, w->pos.order_pos - 1);
        l = sharc__readahead_take(w->ra, tag);
    }
    plan_ahead(w);
    if (!l)
        return walk_fail(w, SHARC_ERR_STATE, "read-ahead lost shard %u (internal error)",
                         w->pos.shard_index);
    w->lane = l;
    int rc = lane_next(w); /* the lane's open */
    if (rc < 0)
        shard_close(w);
    return rc;
}

static int shard_next(sharc__walk *w)
{
    if (w->lane)
        return lane_next(w);
    double t0 = sharc__now_s();
    int rc = w->ops->next(w->stream, &w->raw, &w->err);
    w->read_seconds += sharc__now_s() - t0;
    return rc;
}

int sharc__walk_readahead_start(sharc__walk *w, int n_lanes, uint64_t lane_bytes)
{
    w->ahead_order = sharc__malloc(w->ctx, w->ds->n_shards * sizeof *w->ahead_order);
    if (!w->ahead_order)
        return SHARC_ERR(ENOMEM);
    return sharc__readahead_create(&w->ra, w->ctx, w->ops, w->ds, &w->sopts, n_lanes, lane_bytes,
                                   w->tok, w->language);
}

void sharc__walk_readahead_stop(sharc__walk *w)
{
    if (!w->ra)
        return;
    shard_close(w);
    sharc__readahead_destroy(&w->ra);
}

/* The cut's tokens (tokenizer.h): a cut whose transcript cannot be tokenized is a problem
 * of its metadata. */
static int tokenize(sharc__walk *w)
{
    sharc__rawcut *c = &w->raw;
    int rc = sharc__tokenizer_encode(
        w->tok, w->ctx, sharc__buf_str(&c->text), c->has_text ? c->text.len : 0,
        c->has_language ? sharc__buf_str(&c->language) : NULL, &c->tokens);
    if (rc == 0) {
        c->has_tokens = 1;
        return 0;
    }
    const char *shard = c->shard ? c->shard : w->ds->shards[w->pos.shard_index].audio_path;
    sharc__wrap_error(w->ctx, rc, "%s member %s (cut %s)", shard, sharc__buf_str(&c->member),
                      sharc__buf_str(&c->id));
    return sharc__stream_fail(w->ctx, &w->err, rc, SHARC_PROBLEM_JSON, 0, shard,
                              sharc__buf_str(&c->member), sharc__buf_str(&c->id));
}

/* Make the raw cut's rate, channels and length known and check them, and draw its
 * conditioning, which depends on its epoch (decode.h); then give it its language and
 * tokens. */
static int describe(sharc__walk *w, uint64_t epoch)
{
    w->raw.epoch = epoch;
    int rc = sharc__decode_describe(w->ctx, w->fetch, &w->info, &w->dopts, &w->raw, &w->err);
    if (rc == 0 && w->language) {
        if ((rc = sharc__buf_set_str(w->ctx, &w->raw.language, w->language)) < 0)
            return rc;
        w->raw.has_language = 1;
    }
    /* A read-ahead lane may have made them already. */
    return rc == 0 && w->tok && !w->raw.has_tokens ? tokenize(w) : rc;
}

static void report(sharc__walk *w, int code, const sharc__stream_error *e, const char *message)
{
    w->stats->problems[e->kind]++;
    if (w->s->on_problem) {
        if (w->report_lock)
            pthread_mutex_lock(w->report_lock);
        sharc_problem_report p = {e->kind,
                                  code,
                                  e->path,
                                  e->member.len ? sharc__buf_str(&e->member) : NULL,
                                  e->cut_id.len ? sharc__buf_str(&e->cut_id) : NULL,
                                  message,
                                  w->s->on_error == SHARC_ON_ERROR_FAIL || e->shard_fatal};
        w->s->on_problem(w->s->problem_cookie, &p);
        if (w->report_lock)
            pthread_mutex_unlock(w->report_lock);
    }
}

/*
 * Report a problem, count it, and apply the policy. Returns 0 when the reader should go
 * on (SKIP), else the error, which then sticks.
 */
static int handle_problem(sharc__walk *w, int rc)
{
    sharc__stream_error *e = &w->err;
    if (e->kind >= SHARC_PROBLEM_COUNT) {
        /* Not a data problem (out of memory, ...): no policy applies. Logged once, when
         * it stops the reader (not while the bins' estimate reads ahead, quietly). */
        if (!w->ctx->error_logged)
            name_error(w);
        if (!w->quiet)
            sharc__log_error_once(w->ctx);
        w->failed = rc;
        return rc;
    }
    name_error(w);
    if (!w->quiet) {
        /* Skipped problems are warnings; under FAIL this is the error that stops. */
        sharc__log_error(w->ctx,
                         w->s->on_error == SHARC_ON_ERROR_SKIP ? SHARC_LOG_WARN : SHARC_LOG_ERROR);
        report(w, rc, e, w->ctx->error);
    }
    if (w->s->on_error == SHARC_ON_ERROR_FAIL) {
        w->failed = rc;
        return rc;
    }
    if (e->shard_fatal) {
        w->stats->skipped_shards++;
        shard_close(w);
        w->pos.shard_open = 0;
    } else if (e->kind != SHARC_PROBLEM_ORPHAN_MEMBER) {
        w->stats->skipped_cuts++; /* a member without a row is no cut: a problem only */
    }
    return 0;
}

static void reset_err(sharc__walk *w)
{
    sharc__stream_error_reset(&w->err);
}

static void set_epoch(sharc__walk *w, uint64_t epoch)
{
    w->pos.epoch = epoch;
    w->n_order = sharc__dataset_epoch_order(w->ds, w->s->seed, epoch, w->s->shuffle_shards,
                                            w->s->dp_rank, w->s->dp_size, w->order);
}

/* The prologue's next unit (*opened 1), or the first epoch after it (*opened 0). */
static int open_next_unit(sharc__walk *w, int *opened)
{
    *opened = w->pos.unit_pos < w->n_units;
    if (*opened) {
        const sharc__walk_unit *u = &w->units[w->pos.unit_pos++];
        w->pos.epoch = u->epoch;
        w->pos.shard_index = u->shard;
        w->pos.consumed = 0;
        w->pos.shard_open = 1;
        w->stats->shards++;
        reset_err(w);
        return shard_open(w);
    }
    if (w->s->epochs && w->start_epoch >= w->s->epochs)
        return SHARC_END;
    w->pos.in_prologue = 0;
    set_epoch(w, w->start_epoch);
    w->pos.order_pos = 0;
    w->pos.epoch_cuts = 0;
    if (w->ra)
        plan_from(w, 0);
    return 0;
}

/* Open the next shard of the plan, moving to the next epoch when needed. */
static int open_next_shard(sharc__walk *w)
{
    int opened = 0;
    if (w->pos.in_prologue) {
        int rc = open_next_unit(w, &opened);
        if (rc != 0 || opened)
            return rc;
    }
    while (w->pos.order_pos == w->n_order) {
        if (w->pos.epoch_cuts == 0 && w->s->epochs == 0 && w->stats->shards > 0) {
            /* Not a problem of one shard or cut, so no policy applies: it stops the reader
             * (under SKIP it would otherwise be skipped, and the next epoch tried, forever).
             * Logged by handle_problem, unless the bins' estimate is reading ahead. */
            reset_err(w);
            return sharc__set_error(w->ctx, SHARC_ERR_FORMAT,
                                    "a whole epoch produced no usable cuts (each was skipped "
                                    "after a problem or filtered out by the duration limits); "
                                    "stopping instead of looping forever");
        }
        if (w->s->epochs && w->pos.epoch + 1 >= w->s->epochs)
            return SHARC_END;
        set_epoch(w, w->pos.epoch + 1);
        w->pos.order_pos = 0;
        w->pos.epoch_cuts = 0;
    }
    w->pos.shard_index = w->order[w->pos.order_pos++];
    w->pos.consumed = 0;
    w->pos.shard_open = 1;
    w->stats->shards++;
    reset_err(w);
    return shard_open(w);
}

int sharc__walk_pull(sharc__walk *w)
{
    int rc;
    if (w->failed)
        return w->failed;
    if (w->suspended) {
        const sharc__walk_pos at = w->pos;
        w->suspended = 0;
        /* Re-opening fails as opening did: a problem of the shard, under the policy. */
        if ((rc = sharc__walk_seek(w, &at)) < 0 && handle_problem(w, rc) < 0)
            return rc;
    }
    for (;;) {
        if (!shard_is_open(w)) {
            rc = open_next_shard(w);
            if (rc == SHARC_END)
                return rc;
            if (rc < 0) {
                if (handle_problem(w, rc) < 0)
                    return rc;
                continue;
            }
        }
        reset_err(w);
        rc = shard_next(w);
        if (rc == SHARC_END) {
            shard_close(w);
            w->pos.shard_open = 0;
            continue;
        }
        if (rc == 0 || !w->err.shard_fatal) {
            w->pos.consumed++;
            uint64_t k = w->pos.consumed - 1;
            if (w->pos.in_prologue ? !sharc__walk_unit_has(&w->units[w->pos.unit_pos - 1], k)
                                   : k % w->share_every != w->share_first)
                continue; /* another slot's entry of a shard read by several */
        }
        if (rc == 0) {
            double t0 = sharc__now_s();
            rc = describe(w, w->pos.epoch);
            w->read_seconds += sharc__now_s() - t0;
        }
        if (rc < 0) {
            if (handle_problem(w, rc) < 0)
                return rc;
            continue;
        }
        w->raw.epoch = w->pos.epoch;
        w->raw.shard_index = w->pos.shard_index;
        w->pos.epoch_cuts++;
        return 0;
    }
}

int sharc__walk_seek(sharc__walk *w, const sharc__walk_pos *pos)
{
    int rc = 0;
    w->suspended = 0;
    reset_err(w);
    shard_close(w);
    if (pos->in_prologue) {
        if (!w->has_prologue || pos->unit_pos > w->n_units ||
            (pos->shard_open && pos->unit_pos == 0))
            return walk_fail(w, SHARC_ERR_STATE,
                             "cannot resume: the state points at unit %llu of a prologue of %zu",
                             (unsigned long long)pos->unit_pos, w->n_units);
        w->pos = *pos;
        if (!pos->shard_open)
            return 0;
        const sharc__walk_unit *u = &w->units[pos->unit_pos - 1];
        if (u->epoch != pos->epoch || u->shard != pos->shard_index)
            return walk_fail(w, SHARC_ERR_STATE,
                             "cannot resume: the state points at shard %u, which is not "
                             "where its prologue puts it",
                             pos->shard_index);
    } else {
        set_epoch(w, pos->epoch);
        if (pos->order_pos > w->n_order)
            return walk_fail(w, SHARC_ERR_STATE,
                             "cannot resume: the state points at position %llu of a shard "
                             "order of %zu",
                             (unsigned long long)pos->order_pos, w->n_order);
        w->pos = *pos;
        if (w->ra) /* read ahead from the shard after the open one */
            plan_from(w, pos->order_pos);
        if (!pos->shard_open)
            return 0;
        if (pos->order_pos == 0 || w->order[pos->order_pos - 1] != pos->shard_index)
            return walk_fail(w, SHARC_ERR_STATE,
                             "cannot resume: the state points at shard %u, which is not "
                             "where this dataset's shard order puts it",
                             pos->shard_index);
    }
    /* Skip what the saved reader had taken from the open shard: bounded by one shard. */
    reset_err(w);
    rc = w->ops->open(&w->stream, w->ctx, &w->ds->shards[pos->shard_index], &w->sopts, &w->err);
    for (uint64_t i = 0; rc == 0 && i < pos->consumed; i++) {
        reset_err(w);
        rc = w->ops->next(w->stream, &w->raw, &w->err);
        if (rc < 0 && !w->err.shard_fatal)
            rc = 0;
    }
    if (rc == SHARC_END)
        rc = walk_fail(
            w, SHARC_ERR_STATE, "state points at entry %llu of %s, which has fewer entries",
            (unsigned long long)pos->consumed, w->ds->shards[pos->shard_index].audio_path);
    if (rc < 0 && w->stream)
        w->ops->close(&w->stream);
    w->pos.shard_open = w->stream != NULL;
    return rc;
}

int sharc__walk_scan_shard(sharc__walk *w, uint64_t epoch, uint32_t shard,
                           int (*cb)(void *cookie, sharc__rawcut *c), void *cookie)
{
    sharc__stream *st = NULL;
    if (shard >= w->ds->n_shards)
        return walk_fail(w, SHARC_ERR_STATE, "state names shard %u of %zu", shard, w->ds->n_shards);
    reset_err(w);
    int rc = w->ops->open(&st, w->ctx, &w->ds->shards[shard], &w->sopts, &w->err);
    while (rc == 0) {
        reset_err(w);
        rc = w->ops->next(st, &w->raw, &w->err);
        if (rc == 0 && (rc = describe(w, epoch)) == 0) {
            w->raw.epoch = epoch;
            w->raw.shard_index = shard;
            rc = cb(cookie, &w->raw);
            if (rc > 0) {
                rc = 0;
                break;
            }
        } else if (rc < 0 && !w->err.shard_fatal && w->err.kind < SHARC_PROBLEM_COUNT) {
            rc = 0; /* a bad cut was skipped the first time too */
        }
    }
    if (rc == SHARC_END)
        rc = 0;
    if (st)
        w->ops->close(&st);
    return rc;
}

int sharc__walk_open(sharc__walk **out, sharc__ctx *ctx, const sharc_reader_settings *s,
                     const sharc__dataset *ds, sharc_reader_stats *stats, sharc__fetcher *fetch)
{
    sharc__walk *w = sharc__calloc(ctx, 1, sizeof *w);
    *out = NULL;
    if (!w)
        return SHARC_ERR(ENOMEM);
    w->ctx = ctx;
    w->s = s;
    w->ds = ds;
    w->stats = stats;
    w->fetch = fetch;
    w->dopts = (sharc__decode_opts){.length_tolerance = s->length_tolerance,
                                    .channel = s->channel,
                                    .sampling_rate = s->sampling_rate,
                                    .stream_out = 0};
    sharc__cond_opts_of(s, &w->dopts.cond);
    w->ops = ds->layout == SHARC_LAYOUT_SHAR   ? &sharc__shar_ops
             : ds->layout == SHARC_LAYOUT_NEMO ? &sharc__nemo_ops
                                               : &sharc__wds_ops;
    w->sopts.max_member_bytes = s->max_member_bytes;
    w->sopts.max_line_bytes = s->max_line_bytes;
    w->sopts.nemo_text_field = s->nemo_text_field;
    w->sopts.nemo_lang_field = s->nemo_lang_field;
    w->order = sharc__malloc(ctx, ds->n_shards * sizeof *w->order);
    if (!w->order) {
        sharc__free(ctx, w);
        return SHARC_ERR(ENOMEM);
    }
    w->n_order = sharc__dataset_epoch_order(ds, s->seed, 0, s->shuffle_shards, s->dp_rank,
                                            s->dp_size, w->order);
    sharc__dataset_cut_share(ds->n_shards, s->dp_rank, s->dp_size, &w->share_every,
                             &w->share_first);
    *out = w;
    return 0;
}

void sharc__walk_close(sharc__walk **wp)
{
    sharc__walk *w = *wp;
    if (!w)
        return;
    sharc__ctx *ctx = w->ctx;
    sharc__walk_readahead_stop(w);
    shard_close(w);
    sharc__rawcut_free(ctx, &w->raw);
    sharc__buf_free(ctx, &w->err.member);
    sharc__buf_free(ctx, &w->err.cut_id);
    sharc__free(ctx, w->order);
    sharc__free(ctx, w->units);
    sharc__free(ctx, w->ahead_order);
    sharc__free(ctx, w);
    *wp = NULL;
}

void sharc__walk_lend_audio(sharc__walk *w)
{
    w->sopts.lend_audio = 1;
}

void sharc__walk_batch_mode(sharc__walk *w, sharc__bufpool *pool, pthread_mutex_t *report_lock)
{
    w->sopts.pool = pool;
    w->sopts.lazy_audio = pool != NULL;
    w->dopts.stream_out = pool != NULL;
    w->report_lock = report_lock;
}

sharc__rawcut *sharc__walk_cut(sharc__walk *w)
{
    return &w->raw;
}

int sharc__walk_problem(sharc__walk *w, int rc)
{
    return handle_problem(w, rc);
}

sharc__stream_error *sharc__walk_error(sharc__walk *w)
{
    return &w->err;
}

int sharc__walk_set_prologue(sharc__walk *w, const sharc__walk_unit *units, size_t n,
                             uint64_t start_epoch)
{
    sharc__walk_unit *copy = sharc__malloc(w->ctx, (n ? n : 1) * sizeof *copy);
    if (!copy)
        return SHARC_ERR(ENOMEM);
    if (n)
        memcpy(copy, units, n * sizeof *copy);
    sharc__free(w->ctx, w->units);
    w->units = copy;
    w->n_units = n;
    w->start_epoch = start_epoch;
    w->has_prologue = 1;
    w->pos = (sharc__walk_pos){0};
    w->pos.in_prologue = 1;
    return 0;
}

const sharc__dataset *sharc__walk_dataset(const sharc__walk *w)
{
    return w->ds;
}

const sharc__walk_unit *sharc__walk_prologue(const sharc__walk *w, size_t *n, uint64_t *start_epoch)
{
    *n = w->has_prologue ? w->n_units : 0;
    *start_epoch = w->start_epoch;
    return w->has_prologue ? w->units : NULL;
}

const sharc__walk_pos *sharc__walk_position(const sharc__walk *w)
{
    return &w->pos;
}

void sharc__walk_uncount_cut(sharc__walk *w)
{
    if (w->pos.epoch_cuts > 0)
        w->pos.epoch_cuts--;
}

int sharc__walk_peek(sharc__walk *w, int (*visit)(void *cookie, double duration), void *cookie)
{
    const sharc__walk_pos at = w->pos;
    const sharc_reader_stats stats = *w->stats;
    int rc;
    w->quiet = 1;
    while ((rc = sharc__walk_pull(w)) == 0) {
        int v = visit(cookie, w->raw.duration);
        if (v == SHARC__WALK_FILTERED)
            sharc__walk_uncount_cut(w);
        if (v == SHARC__WALK_STOP)
            break;
    }
    w->quiet = 0;
    w->failed = 0;
    *w->stats = stats;
    if (rc == SHARC_ERR(ENOMEM))
        return rc;
    w->ctx->error[0] = 0;
    return sharc__walk_seek(w, &at);
}

double sharc__walk_read_seconds(const sharc__walk *w)
{
    return w->read_seconds;
}

void sharc__walk_suspend(sharc__walk *w)
{
    if (!shard_is_open(w))
        return;
    shard_close(w);
    w->suspended = 1;
}

int sharc__walk_has_open_shard(const sharc__walk *w)
{
    return shard_is_open(w);
}

int sharc__walk_seek_later(sharc__walk *w, const sharc__walk_pos *pos)
{
    shard_close(w);
    if (pos->in_prologue) {
        /* Checked as sharc__walk_seek checks it; the shard opens at the next pull. */
        const sharc__walk_unit *u =
            w->has_prologue && pos->unit_pos > 0 && pos->unit_pos <= w->n_units
                ? &w->units[pos->unit_pos - 1]
                : NULL;
        if (!w->has_prologue || pos->unit_pos > w->n_units ||
            (pos->shard_open && (!u || u->epoch != pos->epoch || u->shard != pos->shard_index)))
            return walk_fail(w, SHARC_ERR_STATE,
                             "cannot resume: the state points at unit %llu of a prologue of %zu",
                             (unsigned long long)pos->unit_pos, w->n_units);
        w->pos = *pos;
        w->suspended = pos->shard_open;
        return 0;
    }
    set_epoch(w, pos->epoch);
    if (pos->order_pos > w->n_order || (pos->shard_open && pos->order_pos == 0))
        return walk_fail(w, SHARC_ERR_STATE,
                         "cannot resume: the state points at position %llu of a shard order "
                         "of %zu",
                         (unsigned long long)pos->order_pos, w->n_order);
    w->pos = *pos;
    w->suspended = pos->shard_open;
    return 0;
}

void sharc__walk_set_name(sharc__walk *w, const char *name)
{
    w->name = name;
}

void sharc__walk_set_tokens(sharc__walk *w, const sharc__tokenizer *tok, const char *language)
{
    w->tok = tok;
    w->language = language;
}

void sharc__walk_set_quiet(sharc__walk *w, int quiet)
{
    w->quiet = quiet;
}

int sharc__walk_rewind(sharc__walk *w, const sharc__walk_pos *pos)
{
    w->quiet = 0;
    w->failed = 0;
    return sharc__walk_seek(w, pos);
}

/* ---- the walk as a cut source ------------------------------------------------------ */

static int cs_pull(void *self)
{
    return sharc__walk_pull(self);
}
static sharc__rawcut *cs_cut(void *self)
{
    return sharc__walk_cut(self);
}
static int cs_problem(void *self, int rc)
{
    return sharc__walk_problem(self, rc);
}
static sharc__stream_error *cs_error(void *self)
{
    return sharc__walk_error(self);
}
static void cs_uncount_cut(void *self)
{
    sharc__walk_uncount_cut(self);
}
static int cs_peek(void *self, int (*visit)(void *cookie, double duration), void *cookie)
{
    return sharc__walk_peek(self, visit, cookie);
}
static int cs_scan_shard(void *self, uint64_t epoch, uint32_t shard,
                         int (*cb)(void *cookie, sharc__rawcut *c), void *cookie)
{
    return sharc__walk_scan_shard(self, epoch, shard, cb, cookie);
}
static void cs_lend_audio(void *self)
{
    sharc__walk_lend_audio(self);
}
static void cs_batch_mode(void *self, sharc__bufpool *pool, pthread_mutex_t *report_lock)
{
    sharc__walk_batch_mode(self, pool, report_lock);
}
static int cs_readahead_start(void *self, int n_lanes, uint64_t lane_bytes)
{
    return sharc__walk_readahead_start(self, n_lanes, lane_bytes);
}
static void cs_readahead_stop(void *self)
{
    sharc__walk_readahead_stop(self);
}
static double cs_read_seconds(const void *self)
{
    return sharc__walk_read_seconds(self);
}

static const sharc__cutsource_ops walk_ops = {
    .pull = cs_pull,
    .cut = cs_cut,
    .problem = cs_problem,
    .error = cs_error,
    .uncount_cut = cs_uncount_cut,
    .peek = cs_peek,
    .scan_shard = cs_scan_shard,
    .lend_audio = cs_lend_audio,
    .batch_mode = cs_batch_mode,
    .readahead_start = cs_readahead_start,
    .readahead_stop = cs_readahead_stop,
    .read_seconds = cs_read_seconds,
};

sharc__cutsource sharc__walk_cutsource(sharc__walk *w, const sharc__dataset *ds)
{
    return (sharc__cutsource){
        &walk_ops, w, w, ds->n_shards, ds->n_shards ? ds->shards[0].audio_path : NULL, NULL};
}

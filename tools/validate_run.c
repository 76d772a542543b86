/*
 * sharc validate's checking pass (validate.h): each worker thread reads a data-parallel slot
 * of the shards (or takes shards from a queue and reads each with a reader of its own:
 * dp_rank = the shard's index, dp_size = the number of shards), and reports cuts, problems,
 * ids seen twice and one record per finished shard.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "validate.h"

const char *const VALIDATE_CODE_DUPLICATE = "duplicate_id";
const char *const VALIDATE_CODE_ERROR = "error";

/* ---- The hash set ---- */

static vset_entry *set_find_slot(vset_entry *slots, size_t cap, const char *key)
{
    size_t i = (size_t)report_hash(key) & (cap - 1);
    while (slots[i].key != NULL && strcmp(slots[i].key, key) != 0)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int set_grow(vset *set)
{
    size_t cap = set->cap ? set->cap * 2 : 1024;
    vset_entry *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < set->cap; i++) {
        if (set->slots[i].key != NULL)
            *set_find_slot(slots, cap, set->slots[i].key) = set->slots[i];
    }
    free(set->slots);
    set->slots = slots;
    set->cap = cap;
    return 0;
}

const vset_entry *vset_insert(vset *set, const char *key, const char *shard, const char *member,
                              int *oom)
{
    if ((set->count + 1) * 2 > set->cap && set_grow(set) < 0) {
        *oom = 1;
        return NULL;
    }
    vset_entry *e = set_find_slot(set->slots, set->cap, key);
    if (e->key != NULL)
        return e;
    e->key = strdup(key);
    e->member = member ? strdup(member) : NULL;
    if (e->key == NULL || (member && e->member == NULL)) {
        free(e->key);
        free(e->member);
        e->key = e->member = NULL;
        *oom = 1;
        return NULL;
    }
    e->shard = shard;
    set->count++;
    return NULL;
}

const char *vset_find(const vset *set, const char *key)
{
    if (set->cap == 0)
        return NULL;
    return set_find_slot(set->slots, set->cap, key)->key;
}

void vset_free(vset *set)
{
    for (size_t i = 0; i < set->cap; i++) {
        free(set->slots[i].key);
        free(set->slots[i].member);
    }
    free(set->slots);
    set->slots = NULL;
    set->cap = set->count = 0;
}

/* ---- Problems ---- */

size_t validate_code_index(const char *code)
{
    if (code == VALIDATE_CODE_DUPLICATE)
        return SHARC_PROBLEM_COUNT;
    if (code == VALIDATE_CODE_ERROR)
        return SHARC_PROBLEM_COUNT + 1;
    for (int k = 0; k < SHARC_PROBLEM_COUNT; k++) {
        if (strcmp(code, sharc_problem_name((sharc_problem)k)) == 0)
            return (size_t)k;
    }
    return SHARC_PROBLEM_COUNT + 1;
}

const char *validate_code_name(size_t i)
{
    if (i == SHARC_PROBLEM_COUNT)
        return VALIDATE_CODE_DUPLICATE;
    if (i == SHARC_PROBLEM_COUNT + 1)
        return VALIDATE_CODE_ERROR;
    return sharc_problem_name((sharc_problem)i);
}

/* The problem code for a reader that stopped with `rc`. */
static const char *code_of_error(int rc)
{
    switch (rc) {
    case SHARC_ERR_CORRUPT:
    case SHARC_ERR_IO:
        return sharc_problem_name(SHARC_PROBLEM_ARCHIVE);
    case SHARC_ERR_FORMAT:
        return sharc_problem_name(SHARC_PROBLEM_LAYOUT);
    case SHARC_ERR_MISMATCH:
        return sharc_problem_name(SHARC_PROBLEM_ID_MISMATCH);
    case SHARC_ERR_DECODE:
        return sharc_problem_name(SHARC_PROBLEM_DECODE);
    case SHARC_ERR_AUDIO_MISMATCH:
        return sharc_problem_name(SHARC_PROBLEM_AUDIO_FORMAT);
    case SHARC_ERR_TOO_LARGE:
        return sharc_problem_name(SHARC_PROBLEM_TOO_LARGE);
    case SHARC_ERR_JSON:
        return sharc_problem_name(SHARC_PROBLEM_JSON);
    default:
        return VALIDATE_CODE_ERROR;
    }
}

/* Append " shard=X" etc. for what the message does not already name. */
static void print_missing_origin(const char *label, const char *value, const char *message)
{
    char *tmp = NULL;
    if (value != NULL && (message == NULL || strstr(message, value) == NULL))
        printf(" %s=%s", label, cli_text(value, &tmp));
    free(tmp);
}

void validate_problem_locked(validator *v, const char *code, const char *shard, const char *member,
                             const char *cut_id, const char *message)
{
    size_t k = validate_code_index(code);
    v->problems++;
    v->by_code[k]++;
    report_add_problem(&v->report, code, shard, member, cut_id, message);
    if (!v->json && v->by_code[k] > VALIDATE_TEXT_EXAMPLES)
        return; /* counted; the summary says how many more */
    cli_progress_clear(&v->progress);
    if (v->json) {
        FILE *f = stdout;
        fputc('{', f);
        cli_json_key(f, "type", 1);
        cli_json_str(f, "problem");
        cli_json_key(f, "code", 0);
        cli_json_str(f, code);
        cli_json_key(f, "shard", 0);
        cli_json_str(f, shard);
        cli_json_key(f, "member", 0);
        cli_json_str(f, member);
        cli_json_key(f, "cut_id", 0);
        cli_json_str(f, cut_id);
        cli_json_key(f, "message", 0);
        cli_json_str(f, message);
        fputs("}\n", f);
    } else {
        char *tmp = NULL;
        printf("problem %s: %s", code, message ? cli_text(message, &tmp) : "");
        free(tmp);
        print_missing_origin("shard", shard, message);
        print_missing_origin("member", member, message);
        print_missing_origin("cut", cut_id, message);
        putchar('\n');
    }
    fflush(stdout);
}

static void on_problem(void *cookie, const sharc_problem_report *p)
{
    worker *w = cookie;
    validator *v = w->v;
    const char *code = sharc_problem_name(p->kind);
    pthread_mutex_lock(&v->lock);
    /* Every shard's reader opens the same dataset, so what is found while opening would be
     * reported for each of them; report each such problem once. */
    int seen = 0;
    if (w->opening) {
        char sig[4096];
        snprintf(sig, sizeof sig, "%s\x1f%s\x1f%s\x1f%s\x1f%s", code, p->shard ? p->shard : "",
                 p->member ? p->member : "", p->cut_id ? p->cut_id : "",
                 p->message ? p->message : "");
        seen = vset_insert(&v->open_problems, sig, NULL, NULL, &v->oom) != NULL;
    }
    if (!seen)
        validate_problem_locked(v, code, p->shard, p->member, p->cut_id, p->message);
    size_t k = p->shard_left ? report_find_shard(&v->report, p->shard) : (size_t)-1;
    if (k < v->n_shards)
        v->left[k] = 1;
    pthread_mutex_unlock(&v->lock);
}

void validate_report_stop(validator *v, int rank, int rc, const char *why, int opening)
{
    char logged[1024];
    if (why == NULL || why[0] == '\0')
        why = cli_last_logged_error(logged, sizeof logged);
    char msg[1400], text[1200];
    cli_error_text(text, sizeof text, rc, why);
    if (opening)
        snprintf(msg, sizeof msg, "cannot open the dataset: %s", text);
    else
        snprintf(msg, sizeof msg, "reader %d of %d stopped: %s", rank, v->n_workers, text);
    pthread_mutex_lock(&v->lock);
    validate_problem_locked(v, code_of_error(rc), NULL, NULL, NULL, msg);
    pthread_mutex_unlock(&v->lock);
}

/* ---- Cuts ---- */

/* A stable copy of a shard path, shared by all ids of that shard. Called with the lock. */
static const char *intern_shard_locked(validator *v, const char *shard, uint32_t index)
{
    if (shard == NULL)
        return NULL;
    if (index < v->n_shards && strcmp(v->shard_names[index], shard) == 0)
        return v->shard_names[index];
    /* A shard index that names several files (or none): keep one copy per path. */
    vset_insert(&v->other_shards, shard, NULL, NULL, &v->oom);
    return vset_find(&v->other_shards, shard);
}

static void emit_cut_locked(validator *v, const sharc_cut *c, const report_signal *st)
{
    double dbfs = st->rms > 0 ? 20.0 * log10(st->rms) : -INFINITY;
    cli_progress_clear(&v->progress);
    if (v->json) {
        FILE *f = stdout;
        fputc('{', f);
        cli_json_key(f, "type", 1);
        cli_json_str(f, "cut");
        cli_json_key(f, "id", 0);
        cli_json_str(f, c->id);
        cli_json_key(f, "shard", 0);
        cli_json_str(f, c->shard);
        cli_json_key(f, "member", 0);
        cli_json_str(f, c->member);
        cli_json_key(f, "duration", 0);
        cli_json_num(f, c->duration);
        fprintf(f, ",\"num_samples\":%" PRId64 ",\"sampling_rate\":%d,\"channels\":%d",
                c->num_samples, c->sampling_rate, c->channels);
        cli_json_key(f, "peak", 0);
        cli_json_num(f, st->peak);
        cli_json_key(f, "rms_dbfs", 0);
        cli_json_num(f, dbfs);
        fputs("}\n", f);
    } else {
        char *id = NULL, *shard = NULL, *member = NULL;
        printf("cut %s %.3fs %dHz %dch %" PRId64 " samples peak %.4f rms %.1f dBFS %s:%s\n",
               c->id ? cli_text(c->id, &id) : "?", c->duration, c->sampling_rate, c->channels,
               c->num_samples, st->peak, dbfs, c->shard ? cli_text(c->shard, &shard) : "?",
               c->member ? cli_text(c->member, &member) : "?");
        free(id);
        free(shard);
        free(member);
    }
}

void validate_draw_progress_locked(validator *v, int force)
{
    char cuts[32], suffix[160];
    snprintf(suffix, sizeof suffix, "shards %zu/%zu, %s cuts, %.2f h audio, %" PRIu64 " problems",
             v->shards_done, v->n_queue, cli_fmt_count(cuts, sizeof cuts, (double)v->cuts),
             v->audio_seconds / 3600.0, v->problems);
    if (v->progress.enabled) {
        cli_progress_update(&v->progress, (double)v->shards_done, (double)v->n_queue, suffix,
                            force);
        return;
    }
    double now = cli_now();
    if (v->progress_every > 0 && now - v->last_line >= v->progress_every) {
        char took[32];
        v->last_line = now;
        fprintf(stderr, "sharc validate: %s, %s\n", suffix,
                cli_fmt_duration(took, sizeof took, now - v->progress.started));
    }
}

static void count_rate_locked(validator *v, int rate)
{
    for (size_t i = 0; i < v->n_rates; i++) {
        if (v->rates[i].rate == rate) {
            v->rates[i].cuts++;
            return;
        }
    }
    if (v->n_rates == MAX_RATES) {
        v->other_rate_cuts++;
        return;
    }
    v->rates[v->n_rates++] = (rate_count){rate, 1};
}

static void shards_done_locked(worker *w, size_t until, int stopped);

/* A cut read by `r`; `split`: in split mode (check_split), where it tells the shards done. */
static void on_cut(worker *w, sharc_reader *r, int split, const sharc_cut *c, uint32_t shard)
{
    validator *v = w->v;
    const int32_t *ids = NULL;
    size_t n_ids = 0;
    int tokenized = w->base->n_tokenizer > 0 && sharc_reader_cut_tokens(r, &ids, &n_ids) == 0;
    report_signal st = {0};
    if (c->samples != NULL)
        report_signal_compute(c->samples, (size_t)c->num_samples * (size_t)c->channels, &st);
    report_cut rc = {.id = c->id,
                     .shard = c->shard,
                     .text = c->text,
                     .tokenized = tokenized,
                     .tokens = n_ids,
                     .shard_index = shard,
                     .duration = c->duration,
                     .sampling_rate = c->sampling_rate,
                     .channels = c->channels,
                     .num_samples = c->num_samples,
                     .audio = c->audio,
                     .audio_nbytes = c->audio_nbytes,
                     .signal = c->samples != NULL ? &st : NULL};

    pthread_mutex_lock(&v->lock);
    if (split && shard != w->last_shard) {
        shards_done_locked(w, shard, 0); /* the worker's shards before this one */
        w->last_shard = shard;
    }
    v->cuts++;
    v->audio_seconds += c->duration;
    count_rate_locked(v, c->sampling_rate);
    if (c->channels > 1) {
        v->multichannel_cuts++;
        v->max_channels = c->channels > v->max_channels ? c->channels : v->max_channels;
    }
    if (v->per_cut)
        emit_cut_locked(v, c, &st);
    report_add_cut(&v->report, &rc);
    if (c->id != NULL) {
        const char *shard_name = intern_shard_locked(v, c->shard, shard);
        const vset_entry *first = vset_insert(&v->ids, c->id, shard_name, c->member, &v->oom);
        if (first != NULL) {
            char msg[2048];
            snprintf(msg, sizeof msg,
                     "duplicate cut id '%s' in %s member %s; first seen in %s "
                     "member %s",
                     c->id, c->shard ? c->shard : "?", c->member ? c->member : "?",
                     first->shard ? first->shard : "?", first->member ? first->member : "?");
            validate_problem_locked(v, VALIDATE_CODE_DUPLICATE, c->shard, c->member, c->id, msg);
        }
    }
    validate_draw_progress_locked(v, 0);
    pthread_mutex_unlock(&v->lock);
}

/* ---- Shards ---- */

/* A shard is done: its record in --json. Called with the lock. */
static void shard_done_locked(validator *v, size_t k, int checked)
{
    const report_shard *s = &v->report.shards[k];
    v->shards_done++;
    if (!checked && !v->mixture)
        v->shards_cut_short++;
    if (v->json) {
        FILE *f = stdout;
        fputc('{', f);
        cli_json_key(f, "type", 1);
        cli_json_str(f, "shard");
        cli_json_key(f, "shard", 0);
        cli_json_str(f, v->shard_names[k]);
        fprintf(f, ",\"index\":%zu,\"cuts\":%" PRIu64, k, s->cuts);
        cli_json_key(f, "audio_seconds", 0);
        cli_json_num(f, s->seconds);
        cli_json_key(f, "bytes", 0);
        if (s->bytes < 0)
            fputs("null", f);
        else
            fprintf(f, "%" PRId64, s->bytes);
        fprintf(f, ",\"problems\":%" PRIu64 ",\"checked\":%s}\n", s->problems,
                checked ? "true" : "false");
        fflush(f);
    }
    validate_draw_progress_locked(v, 1);
}

/*
 * Split mode: the worker's shards before `until` (its order) are done, each checked to its
 * end unless a problem left it (sharc_problem_report.shard_left) or, with `stopped`, it is
 * the last of them, where the reader stopped.
 */
static void shards_done_locked(worker *w, size_t until, int stopped)
{
    validator *v = w->v;
    size_t step = (size_t)v->split_size;
    for (size_t k = w->pos; k < until && k < v->n_shards; k += step, w->pos += step)
        shard_done_locked(v, k, !v->left[k] && !(stopped && k + step >= until));
}

/* Split mode: read the worker's data-parallel slot of the shards. */
static void check_split(worker *w)
{
    validator *v = w->v;
    sharc_reader_settings s = *w->base;
    s.dp_rank = v->split_first + v->split_step * w->rank;
    s.dp_size = v->split_size;
    s.on_problem = on_problem;
    s.problem_cookie = w;
    w->pos = (size_t)s.dp_rank;
    w->last_shard = (size_t)-1;

    sharc_reader *r = NULL;
    w->opening = 1;
    int rc = sharc_reader_open(&r, &s);
    w->opening = 0;
    if (rc < 0) {
        validate_report_stop(v, w->rank, rc, NULL, 1);
        sharc_reader_close(&r);
        return;
    }
    const sharc_cut *c = NULL;
    while ((rc = sharc_reader_next(r, &c)) == 0)
        on_cut(w, r, 1, c, c->shard_index);
    if (rc < 0)
        validate_report_stop(v, w->rank, rc, sharc_reader_last_error(r), 0);
    sharc_reader_stats rs;
    sharc_reader_get_stats(r, &rs);
    sharc_reader_close(&r);
    pthread_mutex_lock(&v->lock);
    /* At the end every shard of the slot is done; after a stop, only the one being read (the
     * others were never reached and are left for --resume-from). */
    size_t until = rc >= 0 ? v->n_shards : w->last_shard + 1;
    if (rc >= 0 || w->last_shard != (size_t)-1)
        shards_done_locked(w, until, rc < 0);
    pthread_mutex_unlock(&v->lock);
}

/* Read shard k to its end (or to the problem that stops it). */
static void check_shard(worker *w, size_t k)
{
    validator *v = w->v;
    sharc_reader_settings s = *w->base;
    s.dp_rank = (int)k;
    s.dp_size = (int)v->n_shards;
    s.on_problem = on_problem;
    s.problem_cookie = w;

    sharc_reader *r = NULL;
    w->opening = 1;
    int rc = sharc_reader_open(&r, &s);
    w->opening = 0;
    int checked = 0;
    if (rc < 0) {
        validate_report_stop(v, w->rank, rc, NULL, 1);
    } else {
        const sharc_cut *c = NULL;
        while ((rc = sharc_reader_next(r, &c)) == 0)
            on_cut(w, r, 0, c, (uint32_t)k);
        if (rc < 0)
            validate_report_stop(v, w->rank, rc, sharc_reader_last_error(r), 0);
        sharc_reader_stats rs;
        sharc_reader_get_stats(r, &rs);
        checked = rc >= 0 && rs.skipped_shards == 0;
    }
    sharc_reader_close(&r);
    pthread_mutex_lock(&v->lock);
    shard_done_locked(v, k, checked);
    pthread_mutex_unlock(&v->lock);
}

/* --input-cfg: one reader over the whole mixture, each source read once (mix_finite). After
 * a stop, where the mixture was in each source is not known: no record says checked. */
static void check_mixture(worker *w)
{
    validator *v = w->v;
    sharc_reader_settings s = *w->base;
    s.on_problem = on_problem;
    s.problem_cookie = w;
    sharc_reader *r = NULL;
    w->opening = 1;
    int rc = sharc_reader_open(&r, &s);
    w->opening = 0;
    sharc_reader_stats rs = {0};
    if (rc < 0) {
        validate_report_stop(v, w->rank, rc, NULL, 1);
    } else {
        const sharc_cut *c = NULL;
        while ((rc = sharc_reader_next(r, &c)) == 0)
            on_cut(w, r, 0, c, c->shard_index);
        if (rc < 0)
            validate_report_stop(v, w->rank, rc, sharc_reader_last_error(r), 0);
        sharc_reader_get_stats(r, &rs);
    }
    sharc_reader_close(&r);
    pthread_mutex_lock(&v->lock);
    v->shards_cut_short += rs.skipped_shards;
    for (size_t i = 0; i < v->n_queue; i++)
        shard_done_locked(v, v->queue[i], rc >= 0 && !v->left[v->queue[i]]);
    pthread_mutex_unlock(&v->lock);
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    validator *v = w->v;
    if (v->mixture) {
        check_mixture(w);
        return NULL;
    }
    if (!v->per_shard) {
        check_split(w);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&v->lock);
        size_t pos = v->next < v->n_queue ? v->next++ : v->n_queue;
        pthread_mutex_unlock(&v->lock);
        if (pos == v->n_queue)
            break;
        check_shard(w, v->queue[pos]);
    }
    return NULL;
}

int validate_run(validator *v, const sharc_reader_settings *s)
{
    int started = 0;
    for (int i = 0; i < v->n_workers; i++)
        v->workers[i] = (worker){.v = v, .base = s, .rank = i};
    for (; started < v->n_workers; started++) {
        if (pthread_create(&v->workers[started].thread, NULL, run_worker, &v->workers[started]) !=
            0)
            break;
    }
    for (int i = 0; i < started; i++)
        pthread_join(v->workers[i].thread, NULL);
    if (started < v->n_workers && (started == 0 || v->next < v->n_queue)) {
        /* Without workers some shards would go unchecked: that is not a clean run. */
        fprintf(stderr, "sharc validate: could only start %d of %d threads\n", started,
                v->n_workers);
        return -1;
    }
    return 0;
}

/*
 * Collating a batch: its sampling rate, its tensors declared and filled from the buffered
 * cuts (lengths, durations, string columns; the audio rows are the decode workers'), and
 * its rows compacted when some were skipped while decoding.
 */
#include "batching/collate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef sharc__bcut bcut;

static const char *const string_columns[] = {"cut_id", "text", "speaker", "language"};

#define MAX_COLUMNS (4 + SHARC__MAX_TAG_COLUMNS)

static const char *column_name(const sharc__collation *col, int c)
{
    return c < 4 ? string_columns[c] : col->tag_names[c - 4];
}

static const char *column_value(const sharc__bcut *b, int col)
{
    if (col >= 4)
        return b->tags ? b->tags[col - 4] : NULL;
    switch (col) {
    case 0:
        return b->job.id;
    case 1:
        return b->text;
    case 2:
        return b->speaker;
    default:
        return b->language;
    }
}

/*
 * The batch's sampling rate: the required one if there is one, else the rate most of its
 * cuts have, on a tie the one met first. Its rows hold samples at one rate; a cut at
 * another is a problem of its own (see decode_row()), and does not count towards T.
 */
void sharc__collate_choose_rate(sharc__collation *col, int required)
{
    enum { MAX_BATCH_RATES = 16 }; /* rates beyond are never the batch's */
    int rates[MAX_BATCH_RATES];
    size_t counts[MAX_BATCH_RATES], firsts[MAX_BATCH_RATES], n_rates = 0;
    for (size_t i = 0; i < col->n; i++) {
        int rate = col->cuts[i]->job.cond.rate;
        size_t k = 0;
        while (k < n_rates && rates[k] != rate)
            k++;
        if (k == n_rates && n_rates < MAX_BATCH_RATES) {
            rates[n_rates] = rate;
            counts[n_rates] = 0;
            firsts[n_rates++] = i;
        }
        if (k < n_rates)
            counts[k]++;
    }
    size_t best = 0;
    for (size_t k = 1; k < n_rates; k++)
        if (required ? rates[k] == required : counts[k] > counts[best])
            best = k;
    col->rate_tie = 0;
    for (size_t k = 0; k < n_rates; k++)
        col->rate_tie |= k != best && counts[k] == counts[best];
    if (required && (n_rates == 0 || rates[best] != required)) {
        col->rate = required; /* no cut at that rate */
        col->rate_first = 0;
        col->rate_count = 0;
        return;
    }
    col->rate = n_rates ? rates[best] : 0;
    col->rate_first = n_rates ? firsts[best] : 0;
    col->rate_count = n_rates ? counts[best] : 0;
}

int sharc__collate_check_i32(sharc__ctx *ctx, uint64_t step, size_t n_cuts, int64_t most_samples,
                             const char *most_id, const uint64_t column_bytes[4])
{
    if (most_samples > INT32_MAX)
        return sharc__fail(ctx, SHARC_ERR_TOO_LARGE,
                           "step %llu: cannot lay out the batch: audio_lens is int32, and cut %s "
                           "has %lld samples, over %d",
                           (unsigned long long)step, most_id, (long long)most_samples, INT32_MAX);
    for (int c = 0; c < 4; c++)
        if (column_bytes[c] > INT32_MAX)
            return sharc__fail(ctx, SHARC_ERR_TOO_LARGE,
                               "step %llu: cannot lay out the batch: %s_offsets is int32, and its "
                               "%zu cuts hold %llu bytes of %s, over %d",
                               (unsigned long long)step, string_columns[c], n_cuts,
                               (unsigned long long)column_bytes[c], string_columns[c], INT32_MAX);
    return 0;
}

/* `tokens` [B, L] (L the most tokens of a row) and `token_lens` [B]. */
static int add_token_tensors(sharc__collation *col, int64_t B)
{
    int64_t L = 0;
    for (size_t i = 0; i < col->n; i++)
        if ((int64_t)col->cuts[i]->n_tokens > L)
            L = col->cuts[i]->n_tokens;
    int64_t shape_tokens[2] = {B, L}, shape_b[1] = {B};
    int rc = sharc__batch_add_tensor(col->batch, "tokens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 2,
                                     shape_tokens);
    if (rc >= 0)
        rc = sharc__batch_add_tensor(col->batch, "token_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST,
                                     0, 1, shape_b);
    return rc;
}

/* Each row's ids, padded with the tokenizer's pad id; `t` is the tokens tensor. */
static void fill_tokens(const sharc__collation *col, sharc_tensor *t)
{
    const size_t L = (size_t)t->shape[1];
    int32_t *ids = t->data, *lens = t[1].data;
    for (size_t i = 0; i < col->n; i++) {
        const bcut *c = col->cuts[i];
        if (c->n_tokens)
            memcpy(ids + i * L, c->tokens, c->n_tokens * sizeof(int32_t));
        for (size_t k = c->n_tokens; k < L; k++)
            ids[i * L + k] = col->pad_id;
        lens[i] = (int32_t)c->n_tokens;
    }
}

/* The conditioning's per-row tensors, in this order (sharc__collation.cond). */
static const char *const cond_names[] = {"speed", "gain", "snr_db"};
#define N_COND 3

/* The index of the first conditioning tensor: after the string columns and the tokens. */
static size_t cond_at(const sharc__collation *col)
{
    return 3 + 2 * (4 + col->n_tags) + (col->tokens ? 2 : 0);
}

/* Each row's speed factor, linear gain and SNR (NAN without noise), as drawn for it. */
static void fill_cond(const sharc__collation *col, sharc_tensor *t)
{
    float *speed = t[0].data, *gain = t[1].data, *snr = t[2].data;
    for (size_t i = 0; i < col->n; i++) {
        const sharc__cut_cond *c = &col->cuts[i]->job.cond;
        speed[i] = (float)c->speed;
        gain[i] = (float)c->gain;
        snr[i] = c->noise ? (float)c->snr_db : NAN;
    }
}

/* Declare the batch's tensors, then fill everything but the audio samples. */
int sharc__collate_layout(sharc__collation *col, sharc__ctx *ctx, sharc__batch_pool *pool,
                          uint64_t step)
{
    sharc_batch *b = col->batch;
    int64_t B = (int64_t)col->n, T = 0, most = 0;
    size_t most_at = 0;
    uint64_t text_bytes[MAX_COLUMNS] = {0};
    const int n_cols = 4 + (int)col->n_tags;
    size_t longest = col->rate_first; /* named when the batch cannot be laid out */
    for (size_t i = 0; i < col->n; i++) {
        if (col->cuts[i]->job.cond.rate == col->rate && col->cuts[i]->job.cond.num_samples > T) {
            T = col->cuts[i]->job.cond.num_samples;
            longest = i;
        }
        /* audio_lens holds every row's length, at the batch's rate or not. */
        if (col->cuts[i]->job.cond.num_samples > most) {
            most = col->cuts[i]->job.cond.num_samples;
            most_at = i;
        }
        for (int c = 0; c < n_cols; c++) {
            const char *v = column_value(col->cuts[i], c);
            text_bytes[c] += v ? strlen(v) : 0;
        }
    }
    int rc =
        sharc__collate_check_i32(ctx, step, col->n, most, col->cuts[most_at]->job.id, text_bytes);
    if (rc < 0)
        return rc;
    for (int c = 4; c < n_cols; c++)
        if (text_bytes[c] > INT32_MAX)
            return sharc__fail(ctx, SHARC_ERR_TOO_LARGE,
                               "step %llu: cannot lay out the batch: %s_offsets is int32, and its "
                               "%zu cuts hold %llu bytes of %s, over %d",
                               (unsigned long long)step, column_name(col, c), col->n,
                               (unsigned long long)text_bytes[c], column_name(col, c), INT32_MAX);
    col->T = T;
    int64_t shape_audio[2] = {B, T}, shape_b[1] = {B}, shape_off[1] = {B + 1};
    rc = sharc__batch_add_tensor(b, "audio", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 2, shape_audio);
    if (rc >= 0)
        rc = sharc__batch_add_tensor(b, "audio_lens", SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1,
                                     shape_b);
    if (rc >= 0)
        rc = sharc__batch_add_tensor(b, "duration", SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 1,
                                     shape_b);
    for (int c = 0; c < n_cols && rc >= 0; c++) {
        char name[SHARC_TENSOR_NAME_MAX];
        int64_t shape_bytes[1] = {(int64_t)text_bytes[c]};
        snprintf(name, sizeof name, "%s_offsets", column_name(col, c));
        rc = sharc__batch_add_tensor(b, name, SHARC_DTYPE_I32, SHARC_DEVICE_HOST, 0, 1, shape_off);
        snprintf(name, sizeof name, "%s_bytes", column_name(col, c));
        if (rc >= 0)
            rc = sharc__batch_add_tensor(b, name, SHARC_DTYPE_U8, SHARC_DEVICE_HOST, 0, 1,
                                         shape_bytes);
    }
    if (rc >= 0 && col->tokens)
        rc = add_token_tensors(col, B);
    for (int k = 0; k < N_COND && rc >= 0 && col->cond; k++)
        rc = sharc__batch_add_tensor(b, cond_names[k], SHARC_DTYPE_F32, SHARC_DEVICE_HOST, 0, 1,
                                     shape_b);
    if (rc < 0 || (rc = sharc__batch_finish(b)) < 0) {
        /* Most often one cut's metadata lies about its length: name the longest. */
        const bcut *c = col->cuts[longest];
        return sharc__fail(ctx, rc,
                           "cannot lay out a batch of %lld cuts x %lld samples (the longest is "
                           "cut %s, %s member %s, of %g s by its metadata): %s",
                           (long long)B, (long long)T, c->job.id, c->job.shard, c->job.member,
                           c->duration, sharc__batch_pool_error(pool));
    }
    int32_t *lens = b->tensors[1].data;
    float *dur = b->tensors[2].data;
    for (size_t i = 0; i < col->n; i++) {
        lens[i] = (int32_t)col->cuts[i]->job.cond.num_samples;
        dur[i] = (float)col->cuts[i]->duration;
    }
    for (int c = 0; c < n_cols; c++) {
        int32_t *off = b->tensors[3 + 2 * c].data;
        uint8_t *bytes = b->tensors[4 + 2 * c].data;
        int32_t at = 0;
        for (size_t i = 0; i < col->n; i++) {
            const char *v = column_value(col->cuts[i], c);
            size_t n = v ? strlen(v) : 0;
            off[i] = at;
            if (n)
                memcpy(bytes + at, v, n);
            at += (int32_t)n;
        }
        off[col->n] = at;
    }
    if (col->tokens)
        fill_tokens(col, &b->tensors[3 + 2 * n_cols]);
    if (col->cond)
        fill_cond(col, &b->tensors[cond_at(col)]);
    return 0;
}

/* The rows of the tokens tensor `t` (and token_lens after it) without the skipped ones,
 * narrowed to the longest row left, as the audio is. */
static void compact_tokens(sharc_tensor *t, const uint8_t *skipped, size_t n)
{
    const size_t L = (size_t)t->shape[1];
    int32_t *ids = t->data, *lens = t[1].data;
    size_t out = 0, L2 = 0;
    for (size_t i = 0; i < n; i++)
        if (!skipped[i] && (size_t)lens[i] > L2)
            L2 = (size_t)lens[i];
    for (size_t i = 0; i < n; i++) {
        if (skipped[i])
            continue;
        /* Forward, row by row: row `out` at stride L2 ends before row i at stride L. */
        memmove(ids + out * L2, ids + i * L, L2 * sizeof(int32_t));
        lens[out++] = lens[i];
    }
    t->shape[0] = t[1].shape[0] = (int64_t)out;
    t->shape[1] = (int64_t)L2;
    t->nbytes = out * L2 * sizeof(int32_t);
    t[1].nbytes = out * sizeof(int32_t);
}

/* The rows of the f32 [B] tensor `t` without the skipped ones. */
static void compact_rows_f32(sharc_tensor *t, const uint8_t *skipped, size_t n)
{
    float *v = t->data;
    size_t out = 0;
    for (size_t i = 0; i < n; i++)
        if (!skipped[i])
            v[out++] = v[i];
    t->shape[0] = (int64_t)out;
    t->nbytes = out * sizeof(float);
}

/*
 * Drop the rows of cuts skipped under the SKIP policy, in place, and narrow the batch to
 * its longest remaining row: a skipped cut does not keep the others padded to its length
 * (a cut whose metadata overstated it would otherwise size every row). Returns the padded
 * seconds that narrowing took from the remaining rows.
 */
double sharc__collate_compact(sharc__collation *col, const uint8_t *skipped)
{
    sharc_batch *b = col->batch;
    size_t T = (size_t)col->T, out = 0, kept = 0;
    float *audio = b->tensors[0].data;
    int32_t *lens = b->tensors[1].data;
    int64_t narrow = 0;
    for (size_t i = 0; i < col->n; i++)
        if (!skipped[i]) {
            kept++;
            if (lens[i] > narrow)
                narrow = lens[i];
        }
    size_t T2 = (size_t)narrow; /* <= T: rows are at most T long */
    float *dur = b->tensors[2].data;
    const int n_cols = 4 + (int)col->n_tags;
    int32_t *offs[MAX_COLUMNS];
    uint8_t *bytes[MAX_COLUMNS];
    int32_t at[MAX_COLUMNS] = {0};
    for (int c = 0; c < n_cols; c++) {
        offs[c] = b->tensors[3 + 2 * c].data;
        bytes[c] = b->tensors[4 + 2 * c].data;
    }
    for (size_t i = 0; i < col->n; i++) {
        int32_t start[MAX_COLUMNS], end[MAX_COLUMNS];
        for (int c = 0; c < n_cols; c++) {
            start[c] = offs[c][i];
            end[c] = offs[c][i + 1];
        }
        if (skipped[i])
            continue;
        if (out != i || T2 != T) {
            /* Forward, row by row: row `out` at stride T2 ends before row i at stride T. */
            memmove(audio + out * T2, audio + i * T, T2 * sizeof(float));
            lens[out] = lens[i];
            dur[out] = dur[i];
        }
        for (int c = 0; c < n_cols; c++) {
            memmove(bytes[c] + at[c], bytes[c] + start[c], (size_t)(end[c] - start[c]));
            offs[c][out] = at[c];
            at[c] += end[c] - start[c];
        }
        out++;
    }
    for (int c = 0; c < n_cols; c++) {
        offs[c][out] = at[c];
        b->tensors[4 + 2 * c].shape[0] = at[c];
        b->tensors[4 + 2 * c].nbytes = (size_t)at[c];
        b->tensors[3 + 2 * c].shape[0] = (int64_t)out + 1;
        b->tensors[3 + 2 * c].nbytes = (out + 1) * sizeof(int32_t);
    }
    b->tensors[0].shape[0] = (int64_t)out;
    b->tensors[0].shape[1] = (int64_t)T2;
    b->tensors[0].nbytes = out * T2 * sizeof(float);
    for (int t = 1; t < 3; t++) {
        b->tensors[t].shape[0] = (int64_t)out;
        b->tensors[t].nbytes = out * 4;
    }
    if (col->tokens)
        compact_tokens(&b->tensors[3 + 2 * n_cols], skipped, col->n);
    for (size_t k = 0, t = cond_at(col); col->cond && k < N_COND; k++, t++)
        compact_rows_f32(&b->tensors[t], skipped, col->n);
    col->T = (int64_t)T2;
    return col->rate > 0 ? (double)kept * (double)(T - T2) / (double)col->rate : 0;
}

#include "batching/bcut.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

int sharc__cut_key(sharc__ctx *ctx, const sharc__rawcut *c, size_t n_shards, uint64_t *key)
{
    if (c->position >= (UINT64_C(1) << SHARC__KEY_POS_BITS))
        return sharc__fail(ctx, SHARC_ERR_TOO_LARGE,
                           "cut %s: position %llu in its shard is past what a resume state can "
                           "locate (2^24 cuts per shard)",
                           sharc__buf_str(&c->id), (unsigned long long)c->position);
    /* Without overflow: epoch * n_shards + shard <= SHARC__KEY_MAX_VISIT. */
    if (c->epoch > (SHARC__KEY_MAX_VISIT - c->shard_index) / n_shards)
        return sharc__fail(ctx, SHARC_ERR_TOO_LARGE,
                           "cut %s: epoch %llu of %zu shards is past what a resume state can "
                           "locate (2^40 - 2 shard visits)",
                           sharc__buf_str(&c->id), (unsigned long long)c->epoch, n_shards);
    uint64_t visit = c->epoch * n_shards + c->shard_index;
    *key = (visit << SHARC__KEY_POS_BITS) | c->position;
    return 0;
}

static size_t str_room(const sharc__buf *b, int has)
{
    return has ? b->len + 1 : 0;
}

static const char *put_str(char **p, const sharc__buf *b, int has)
{
    if (!has)
        return NULL;
    char *s = *p;
    memcpy(s, sharc__buf_str(b), b->len + 1);
    *p += b->len + 1;
    return s;
}

int sharc__bcut_from_raw(sharc__bufpool *pool, sharc__rawcut *c, size_t n_shards, sharc__bcut **out)
{
    sharc__ctx *ctx = pool->ctx;
    /* Batch mode never lends audio (sharc__stream_opts.lend_audio): the sampler holds cuts
     * long after the stream has moved on. */
    assert(c->audio_lent == NULL);
    size_t strings = c->id.len + 1 + c->member.len + 1 + str_room(&c->text, c->has_text) +
                     str_room(&c->speaker, c->has_speaker) +
                     str_room(&c->language, c->has_language);
    /* The tokens first: the block is aligned for the struct, and so for int32 after it. */
    const size_t token_bytes = c->has_tokens ? c->tokens.len : 0;
    size_t bytes = sizeof(sharc__bcut) + token_bytes + strings;
    sharc__bcut *b = sharc__malloc(ctx, bytes);
    *out = NULL;
    if (!b)
        return SHARC_ERR(ENOMEM);
    int rc = sharc__cut_key(ctx, c, n_shards, &b->key);
    if (rc < 0) {
        sharc__free(ctx, b);
        return rc;
    }
    char *q = (char *)(b + 1);
    b->tokens = c->has_tokens ? (const int32_t *)(void *)q : NULL;
    b->n_tokens = (uint32_t)(token_bytes / sizeof(int32_t));
    if (token_bytes)
        memcpy(q, c->tokens.data, token_bytes);
    q += token_bytes;
    b->duration = c->duration;
    b->block_bytes = bytes;
    b->job.id = put_str(&q, &c->id, 1);
    b->job.member = put_str(&q, &c->member, 1);
    b->text = put_str(&q, &c->text, c->has_text);
    b->speaker = put_str(&q, &c->speaker, c->has_speaker);
    b->language = put_str(&q, &c->language, c->has_language);
    b->tags = NULL;      /* a mixture's pipeline sets them */
    b->audio = c->audio; /* taken over, not copied */
    memset(&c->audio, 0, sizeof c->audio);
    memset(&b->feats, 0, sizeof b->feats);
    b->feat_frames = 0;
    b->job.audio = c->audio_in_file ? NULL : b->audio.data;
    b->job.audio_len = c->audio_in_file ? (size_t)c->audio_size : b->audio.len;
    b->job.in_file = c->audio_in_file;
    b->job.at = c->audio_at;
    b->job.file_id = c->audio_file_id;
    b->job.sampling_rate = c->sampling_rate;
    b->job.channels = c->channels;
    b->job.num_samples = c->num_samples;
    b->job.offset = c->offset;
    b->job.window = c->window;
    b->job.shard = c->shard;
    b->job.cond = c->cond;
    *out = b;
    return 0;
}

uint64_t sharc__bcut_bytes(const sharc__bcut *b)
{
    return b->block_bytes + b->job.audio_len;
}

void sharc__bcut_free(sharc__bufpool *pool, sharc__bcut *b)
{
    if (!b)
        return;
    sharc__bufpool_give(pool, &b->audio);
    sharc__bufpool_give(pool, &b->feats);
    sharc__noise_cut_unref(b->job.cond.noise_cut);
    sharc__free(pool->ctx, b);
}

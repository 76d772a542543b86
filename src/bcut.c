#include "bcut.h"

#include <errno.h>
#include <string.h>

void sharc__bcut_pool_init(sharc__bcut_pool *pool, sharc__ctx *ctx)
{
    memset(pool, 0, sizeof *pool);
    pool->ctx = ctx;
    pthread_mutex_init(&pool->mu, NULL);
}

void sharc__bcut_pool_destroy(sharc__bcut_pool *pool)
{
    for (size_t i = 0; i < pool->n_free; i++)
        sharc__buf_free(pool->ctx, &pool->free[i]);
    pool->n_free = 0;
    pthread_mutex_destroy(&pool->mu);
}

int sharc__cut_key(sharc__ctx *ctx, const sharc__rawcut *c, uint64_t *key)
{
    if (c->epoch >= (1u << 16) || c->position >= (1u << SHARC__KEY_POS_BITS))
        return sharc__fail(ctx, SHARC_ERR_TOO_LARGE,
                           "cut %s: epoch %llu or position %llu is past what a resume state "
                           "can locate (2^16 epochs, 2^24 cuts per shard)",
                           sharc__buf_str(&c->id), (unsigned long long)c->epoch,
                           (unsigned long long)c->position);
    *key = (c->epoch << (SHARC__KEY_SHARD_BITS + SHARC__KEY_POS_BITS)) |
           ((uint64_t)c->shard_index << SHARC__KEY_POS_BITS) | c->position;
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

/* Move the member's bytes into b->audio, leaving c->audio with a recycled buffer. */
static int take_audio(sharc__bcut_pool *pool, sharc__rawcut *c, sharc__bcut *b)
{
    memset(&b->audio, 0, sizeof b->audio);
    if (c->audio.cap > c->audio.len + c->audio.len / 4 + 4096) {
        int rc = sharc__buf_set(pool->ctx, &b->audio, c->audio.data, c->audio.len);
        sharc__buf_clear(&c->audio);
        return rc;
    }
    b->audio = c->audio;
    pthread_mutex_lock(&pool->mu);
    if (pool->n_free)
        c->audio = pool->free[--pool->n_free];
    else
        memset(&c->audio, 0, sizeof c->audio);
    pthread_mutex_unlock(&pool->mu);
    sharc__buf_clear(&c->audio);
    return 0;
}

int sharc__bcut_from_raw(sharc__bcut_pool *pool, sharc__rawcut *c, sharc__bcut **out)
{
    sharc__ctx *ctx = pool->ctx;
    size_t strings = c->id.len + 1 + c->member.len + 1 + str_room(&c->text, c->has_text) +
                     str_room(&c->speaker, c->has_speaker) +
                     str_room(&c->language, c->has_language);
    size_t bytes = sizeof(sharc__bcut) + strings;
    sharc__bcut *b = sharc__malloc(ctx, bytes);
    *out = NULL;
    if (!b)
        return SHARC_ERR(ENOMEM);
    int rc = sharc__cut_key(ctx, c, &b->key);
    if (rc == 0)
        rc = take_audio(pool, c, b);
    if (rc < 0) {
        sharc__free(ctx, b);
        return rc;
    }
    char *q = (char *)(b + 1);
    b->duration = c->duration;
    b->block_bytes = bytes;
    b->job.id = put_str(&q, &c->id, 1);
    b->job.member = put_str(&q, &c->member, 1);
    b->text = put_str(&q, &c->text, c->has_text);
    b->speaker = put_str(&q, &c->speaker, c->has_speaker);
    b->language = put_str(&q, &c->language, c->has_language);
    b->job.audio = b->audio.data;
    b->job.audio_len = b->audio.len;
    b->job.sampling_rate = c->sampling_rate;
    b->job.channels = c->channels;
    b->job.num_samples = c->num_samples;
    b->job.offset = c->offset;
    b->job.window = c->window;
    b->job.shard = c->shard;
    *out = b;
    return 0;
}

uint64_t sharc__bcut_bytes(const sharc__bcut *b)
{
    return b->block_bytes + b->audio.len;
}

void sharc__bcut_free(sharc__bcut_pool *pool, sharc__bcut *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&pool->mu);
    if (pool->n_free < SHARC__FREE_BUFFERS_MAX && b->audio.data) {
        pool->free[pool->n_free++] = b->audio;
        b->audio.data = NULL;
    }
    pthread_mutex_unlock(&pool->mu);
    sharc__buf_free(pool->ctx, &b->audio);
    sharc__free(pool->ctx, b);
}

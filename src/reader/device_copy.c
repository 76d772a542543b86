/*
 * The copy of a batch's audio into the device stage's pinned staging buffers, split over
 * the caller's thread and COPY_HELPERS helper threads when it is long.
 */
#include <string.h>

#include "reader/device_impl.h"

/* A copy shorter than this is made by the caller's thread alone. */
#define MIN_SPLIT_BYTES ((size_t)4 << 20)

/* Part `k` of `parts` of a copy of `bytes`, at 64-byte boundaries. */
static void part_of(size_t bytes, int k, int parts, size_t *at, size_t *len)
{
    size_t step = ((bytes + (size_t)parts - 1) / (size_t)parts + 63) & ~(size_t)63;
    size_t a = step * (size_t)k, e = k == parts - 1 ? bytes : a + step;
    *at = a < bytes ? a : bytes;
    *len = (e < bytes ? e : bytes) - *at;
}

static void *copy_helper(void *arg)
{
    copier *c = ((helper_arg *)arg)->c;
    const int k = ((helper_arg *)arg)->k;
    uint64_t seen = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->job == seen)
            pthread_cond_wait(&c->go, &c->mu);
        if (c->stop)
            break;
        seen = c->job;
        size_t at, len;
        part_of(c->bytes, k + 1, c->n + 1, &at, &len);
        uint8_t *dst = c->dst;
        const uint8_t *src = c->src;
        pthread_mutex_unlock(&c->mu);
        if (len)
            memcpy(dst + at, src + at, len);
        pthread_mutex_lock(&c->mu);
        if (--c->pending == 0)
            pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Start the helpers; a copier that could start none copies on the caller's thread. */
void sharc__copier_start(copier *c)
{
    c->mu_made = pthread_mutex_init(&c->mu, NULL) == 0;
    c->go_made = pthread_cond_init(&c->go, NULL) == 0;
    c->done_made = pthread_cond_init(&c->done, NULL) == 0;
    if (!c->mu_made || !c->go_made || !c->done_made)
        return;
    for (int i = 0; i < COPY_HELPERS; i++) {
        c->args[i].c = c;
        c->args[i].k = i;
        if (pthread_create(&c->th[i], NULL, copy_helper, &c->args[i]) != 0)
            break;
        (void)pthread_setname_np(c->th[i], "sharc-upload"); /* for top -H, perf, gdb */
        c->n++;
    }
}

void sharc__copier_stop(copier *c)
{
    if (c->n) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_broadcast(&c->go);
        pthread_mutex_unlock(&c->mu);
        for (int i = 0; i < c->n; i++)
            pthread_join(c->th[i], NULL);
    }
    if (c->done_made)
        pthread_cond_destroy(&c->done);
    if (c->go_made)
        pthread_cond_destroy(&c->go);
    if (c->mu_made)
        pthread_mutex_destroy(&c->mu);
    memset(c, 0, sizeof *c);
}

/* memcpy, split over the helpers when it is long. */
void sharc__copier_copy(copier *c, void *dst, const void *src, size_t bytes)
{
    if (c->n == 0 || bytes < MIN_SPLIT_BYTES) {
        memcpy(dst, src, bytes);
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->dst = dst;
    c->src = src;
    c->bytes = bytes;
    c->pending = c->n;
    c->job++;
    const int parts = c->n + 1;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    size_t at, len;
    part_of(bytes, 0, parts, &at, &len);
    memcpy(dst, src, len);
    pthread_mutex_lock(&c->mu);
    while (c->pending > 0)
        pthread_cond_wait(&c->done, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

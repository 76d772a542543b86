#include "io/ring.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"

int sharc__ring_init(sharc__ring *q, sharc__ctx *ctx, size_t cap)
{
    memset(q, 0, sizeof *q);
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return SHARC_ERR(EAGAIN);
    (void)pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int e = pthread_mutex_init(&q->mu, NULL);
    if (e == 0 && (e = pthread_cond_init(&q->readable, &attr)) != 0)
        pthread_mutex_destroy(&q->mu);
    if (e == 0 && (e = pthread_cond_init(&q->writable, &attr)) != 0) {
        pthread_cond_destroy(&q->readable);
        pthread_mutex_destroy(&q->mu);
    }
    pthread_condattr_destroy(&attr);
    if (e != 0)
        return SHARC_ERR(EAGAIN);
    if (!(q->data = sharc__malloc(ctx, cap))) {
        pthread_cond_destroy(&q->writable);
        pthread_cond_destroy(&q->readable);
        pthread_mutex_destroy(&q->mu);
        return SHARC_ERR(ENOMEM);
    }
    q->cap = cap;
    return 0;
}

void sharc__ring_free(sharc__ring *q, sharc__ctx *ctx)
{
    if (!q->data)
        return;
    sharc__free(ctx, q->data);
    pthread_cond_destroy(&q->writable);
    pthread_cond_destroy(&q->readable);
    pthread_mutex_destroy(&q->mu);
    memset(q, 0, sizeof *q);
}

void sharc__ring_reset(sharc__ring *q)
{
    q->head = q->used = 0;
    q->write_closed = q->read_closed = 0;
    q->reader_waits = q->writer_waits = 0;
}

static size_t wake_at(const sharc__ring *q, size_t n)
{
    size_t quarter = q->cap / 4 ? q->cap / 4 : 1;
    return n < quarter ? n : quarter;
}

int sharc__ring_write(sharc__ring *q, const void *p, size_t n)
{
    const uint8_t *src = p;
    pthread_mutex_lock(&q->mu);
    while (n) {
        q->write_min = wake_at(q, n);
        while (!q->read_closed && q->cap - q->used < q->write_min) {
            q->writer_waits = 1;
            pthread_cond_wait(&q->writable, &q->mu);
        }
        q->writer_waits = 0;
        if (q->read_closed) {
            pthread_mutex_unlock(&q->mu);
            return -1;
        }
        size_t tail = (q->head + q->used) % q->cap;
        size_t k = q->cap - q->used < n ? q->cap - q->used : n;
        pthread_mutex_unlock(&q->mu);
        /* [tail, tail + k) is free: the reader never touches it until `used` says so. */
        size_t first = q->cap - tail < k ? q->cap - tail : k;
        memcpy(q->data + tail, src, first);
        memcpy(q->data, src + first, k - first);
        src += k;
        n -= k;
        pthread_mutex_lock(&q->mu);
        q->used += k;
        if (q->reader_waits && q->used >= q->read_min)
            pthread_cond_signal(&q->readable);
    }
    pthread_mutex_unlock(&q->mu);
    return 0;
}

void sharc__ring_close_write(sharc__ring *q)
{
    pthread_mutex_lock(&q->mu);
    q->write_closed = 1;
    pthread_cond_broadcast(&q->readable);
    pthread_mutex_unlock(&q->mu);
}

void sharc__ring_close_read(sharc__ring *q)
{
    pthread_mutex_lock(&q->mu);
    q->read_closed = 1;
    pthread_cond_broadcast(&q->writable);
    pthread_mutex_unlock(&q->mu);
}

/* `ms` from now on the monotonic clock. */
static struct timespec in_ms(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

static int earlier(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec != b->tv_sec ? a->tv_sec < b->tv_sec : a->tv_nsec < b->tv_nsec;
}

/* Wait, under the lock, for min(n, a quarter) bytes or the end, or for what is there after
 * SHARC__RING_LULL_MS without more; 0, or -1 when wait_ms passed with none (the lock is
 * then released). */
static int wait_readable(sharc__ring *q, size_t n, int wait_ms)
{
    const struct timespec until = in_ms(wait_ms >= 0 ? wait_ms : 0);
    pthread_mutex_lock(&q->mu);
    q->read_min = wake_at(q, n);
    while (!q->write_closed && q->used < q->read_min) {
        q->reader_waits = 1;
        /* A slow or trickling writer may never fill a quarter: what it wrote is taken after
         * a lull, so that the reader sees an archive's end that is all there. */
        const struct timespec lull = in_ms(SHARC__RING_LULL_MS);
        const int last = wait_ms >= 0 && earlier(&until, &lull);
        if (pthread_cond_timedwait(&q->readable, &q->mu, last ? &until : &lull) == ETIMEDOUT) {
            if (q->used)
                break;
            if (last) {
                q->reader_waits = 0;
                pthread_mutex_unlock(&q->mu);
                return -1;
            }
        }
    }
    q->reader_waits = 0;
    return 0;
}

ssize_t sharc__ring_peek(sharc__ring *q, const void **p, size_t n, int wait_ms)
{
    if (wait_readable(q, n, wait_ms) < 0)
        return -1;
    size_t head = q->head;
    size_t k = q->used < n ? q->used : n;
    if (k > q->cap - head)
        k = q->cap - head; /* up to the wrap: the rest comes next */
    pthread_mutex_unlock(&q->mu);
    *p = q->data + head;
    return (ssize_t)k;
}

void sharc__ring_consume(sharc__ring *q, size_t n)
{
    pthread_mutex_lock(&q->mu);
    q->head = (q->head + n) % q->cap;
    q->used -= n;
    if (q->writer_waits && q->cap - q->used >= q->write_min)
        pthread_cond_signal(&q->writable);
    pthread_mutex_unlock(&q->mu);
}

ssize_t sharc__ring_read(sharc__ring *q, void *dst, size_t n, int wait_ms)
{
    if (wait_readable(q, n, wait_ms) < 0)
        return -1;
    size_t head = q->head;
    size_t k = q->used < n ? q->used : n;
    pthread_mutex_unlock(&q->mu);
    /* [head, head + k) is written: the writer never touches it until `used` says so. */
    size_t first = q->cap - head < k ? q->cap - head : k;
    memcpy(dst, q->data + head, first);
    memcpy((uint8_t *)dst + first, q->data, k - first);
    sharc__ring_consume(q, k);
    return (ssize_t)k;
}

/*
 * sharc-datapath: the memory traffic of sharc's batches on a plain-tar WAV corpus, and
 * nothing else (bench/run.sh --what datapath; docs/benchmarks.md, "Scaling on WAV").
 *
 * For every WAV member of the tars under DIR, in order, spread over N threads as sharc's
 * decode threads take rows: pread the member's header, then its samples 128 KiB at a time
 * into the thread's reused buffer (as src/reader.c does; --chunk 0 reads each member whole),
 * converting each part's PCM16 to float32 into the next row of a ring of batch buffers, then
 * zero the row's padding (as src/batch.c does, with sharc's own routines: non-temporal
 * stores; the ring allocated as batch payloads are, on huge pages). No tar parsing, JSON, sampling
 * or planning is timed: the member list is read before the clock starts. Its rate with 1 and 2
 * threads is what the memory system allows for the data sharc must move, so the ratio of the
 * two bounds the scaling any loader can show on this corpus and machine.
 *
 * --from-memory reads every member into memory before the clock starts and then times the
 * conversion and padding alone: no system calls and no page cache, only the PCM16 read from
 * memory and the float32 rows written, the memory system's own 2-thread / 1-thread ratio for
 * the writes a batch is made of.
 *
 * Usage: sharc-datapath [--threads N] [--seconds S] [--padding P] [--chunk BYTES]
 *                       [--from-memory] DIR
 * Prints one JSON object: audio_seconds_per_second, cuts_per_second,
 * cpu_seconds_per_audio_second, peak_rss_bytes, time_to_first_batch_s (null), members.
 */
#include "io/tar.h"
#include "base/buf.h"
#include "base/ctx.h"
#include "decode/wav.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_THREADS 64
/* Like the batch pool of a 200 s max_duration at 16 kHz, 6 batches in flight. */
#define RING_BYTES ((size_t)6 * 14 * 1024 * 1024)

typedef struct member {
    int fd;
    uint64_t at, size;
    const uint8_t *mem; /* --from-memory: the member's bytes, read before the clock */
} member;

typedef struct job {
    member *v;
    size_t n, cap;
    int fds[4096];
    size_t n_fds;
    double padding;
    size_t chunk; /* 0: read each member whole; else its samples in reads of this size */
    double stop_at;
    float *ring;
    atomic_size_t next;      /* member sequence number, taken by the threads in turn */
    atomic_size_t ring_used; /* floats handed out in the ring */
} job;

typedef struct worker {
    job *j;
    pthread_t thread;
    double audio_s, members;
    int failed;
} worker;

static int is_wav(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".wav") == 0;
}

static int add_tar(job *j, sharc__ctx *ctx, const char *path)
{
    sharc__tar *t = NULL;
    if (j->n_fds == sizeof j->fds / sizeof j->fds[0] ||
        sharc__tar_open(&t, ctx, path, UINT64_MAX) != 0) {
        fprintf(stderr, "sharc-datapath: %s: %s\n", path, ctx->error);
        return -1;
    }
    sharc__tar_set_lazy(t, is_wav);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        sharc__tar_close(&t);
        return -1;
    }
    j->fds[j->n_fds++] = fd;
    sharc__member m = {0};
    int rc;
    while ((rc = sharc__tar_next(t, &m)) == 0) {
        if (!m.in_file)
            continue;
        if (j->n == j->cap) {
            j->cap = j->cap ? 2 * j->cap : 1024;
            j->v = realloc(j->v, j->cap * sizeof *j->v);
            if (j->v == NULL)
                abort();
        }
        j->v[j->n++] = (member){fd, m.at, m.size, NULL};
    }
    sharc__member_free(ctx, &m);
    sharc__tar_close(&t);
    if (rc != SHARC_END) {
        fprintf(stderr, "sharc-datapath: %s: %s\n", path, ctx->error);
        return -1;
    }
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int add_dir(job *j, sharc__ctx *ctx, const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) {
        perror(dir);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]->d_name);
        if (rc == 0 && len > 4 && strcmp(names[i]->d_name + len - 4, ".tar") == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            rc = add_tar(j, ctx, path);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

/* `buf`, or a new buffer of at least `need` bytes in its place (its bytes are not kept). */
static uint8_t *room(uint8_t *buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return buf;
    free(buf);
    *cap = need;
    if ((buf = malloc(need)) == NULL)
        abort();
    return buf;
}

/* The next row of the ring for `samples` samples and `pad` more zeroed after them, or -1. */
static ptrdiff_t take_row(job *j, size_t samples, size_t pad)
{
    const size_t ring_floats = RING_BYTES / sizeof(float);
    size_t row = (samples + pad + 15) & ~(size_t)15;
    if (row > ring_floats)
        return -1;
    size_t at = atomic_fetch_add(&j->ring_used, row) % ring_floats;
    if (at + row > ring_floats)
        at = 0; /* rows do not straddle the ring's end (they may overlap: only the
                   traffic matters here) */
    return (ptrdiff_t)at;
}

/* --from-memory: the conversion and padding alone, from bytes already in memory (no system
 * calls, no page cache): the memory system's own scaling for the batches' writes. */
static int convert_from_memory(job *j, const member *m, worker *w)
{
    sharc__wav_pcm16 wav;
    if (!sharc__wav_parse(m->mem, m->size, &wav)) {
        w->failed = 1;
        return 0;
    }
    size_t samples = (size_t)wav.frames * (size_t)wav.channels;
    size_t pad = (size_t)((double)samples * j->padding);
    ptrdiff_t at = take_row(j, samples, pad);
    if (at < 0) {
        w->failed = 1;
        return 0;
    }
    sharc__wav_pcm16_to_float(m->mem + wav.data_offset, samples, j->ring + at, 1);
    sharc__memzero_stream(j->ring + at + samples, pad * sizeof(float));
    w->audio_s += (double)wav.frames / wav.sampling_rate;
    w->members += 1;
    return 1;
}

static void *work(void *arg)
{
    worker *w = arg;
    job *j = w->j;
    size_t cap = 0;
    uint8_t *buf = NULL;
    while (sharc__now_s() < j->stop_at) {
        const member *m = &j->v[atomic_fetch_add(&j->next, 1) % j->n];
        if (m->mem) {
            if (!convert_from_memory(j, m, w))
                break;
            continue;
        }
        buf = room(buf, &cap, j->chunk ? j->chunk + 4096 : m->size);
        /* In parts: the header from the first 4 KiB, as sharc does; a member whose header
         * does not fit is read whole, as sharc reads it then. */
        int whole = !j->chunk || m->size <= 4096;
        size_t head = whole ? m->size : 4096;
        sharc__wav_pcm16 wav;
        if (pread(m->fd, buf, head, (off_t)m->at) != (ssize_t)head) {
            w->failed = 1;
            break;
        }
        const sharc__wav_pieces pieces = {buf, head, NULL, m->size, m->size};
        if (!whole && !sharc__wav_parse_pieces(&pieces, &wav)) {
            whole = 1;
            buf = room(buf, &cap, m->size);
            if (pread(m->fd, buf, m->size, (off_t)m->at) != (ssize_t)m->size) {
                w->failed = 1;
                break;
            }
        }
        if (whole && !sharc__wav_parse(buf, m->size, &wav)) {
            w->failed = 1;
            break;
        }
        size_t samples = (size_t)wav.frames * (size_t)wav.channels;
        size_t pad = (size_t)((double)samples * j->padding);
        ptrdiff_t at = take_row(j, samples, pad);
        if (at < 0) {
            w->failed = 1;
            break;
        }
        if (whole) {
            sharc__wav_pcm16_to_float(buf + wav.data_offset, samples, j->ring + at, 1);
        } else {
            const size_t per = j->chunk / 2;
            for (size_t done = 0; done < samples && !w->failed;) {
                size_t k = samples - done < per ? samples - done : per;
                if (pread(m->fd, buf, 2 * k, (off_t)(m->at + wav.data_offset + 2 * done)) !=
                    (ssize_t)(2 * k))
                    w->failed = 1;
                else
                    sharc__wav_pcm16_to_float(buf, k, j->ring + at + done, 1);
                done += k;
            }
            if (w->failed)
                break;
        }
        sharc__memzero_stream(j->ring + at + samples, pad * sizeof(float));
        w->audio_s += (double)wav.frames / wav.sampling_rate;
        w->members += 1;
    }
    free(buf);
    return NULL;
}

/* --from-memory: every member's bytes read into one block, before the clock starts. */
static uint8_t *load_members(job *j)
{
    size_t total = 0;
    for (size_t i = 0; i < j->n; i++)
        total += j->v[i].size;
    uint8_t *all = malloc(total ? total : 1);
    if (all == NULL) {
        fprintf(stderr, "sharc-datapath: --from-memory: no memory for %zu bytes\n", total);
        return NULL;
    }
    uint8_t *at = all;
    for (size_t i = 0; i < j->n; i++) {
        member *m = &j->v[i];
        if (pread(m->fd, at, m->size, (off_t)m->at) != (ssize_t)m->size) {
            fprintf(stderr, "sharc-datapath: --from-memory: a member could not be read\n");
            free(all);
            return NULL;
        }
        m->mem = at;
        at += m->size;
    }
    return all;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

int main(int argc, char **argv)
{
    int threads = 1;
    double seconds = 10, padding = 0.14;
    size_t chunk = 128 * 1024;
    int from_memory = 0;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: sharc-datapath [--threads N] [--seconds S] [--padding P] [--chunk B]\n"
                   "                      [--from-memory] DIR\n"
                   "  pread + PCM16-to-float32 + zeroed padding of every WAV member of the\n"
                   "  tars in DIR, with N threads (1) for S seconds (10), padding P (0.14)\n"
                   "  of each row, the samples read B bytes at a time (131072, as sharc reads\n"
                   "  them; 0: each member whole); prints one JSON object.\n"
                   "  --from-memory: read every member into memory first (untimed), then time\n"
                   "  the conversion and padding alone, without system calls\n");
            return 0;
        } else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) {
            threads = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--seconds") == 0) {
            seconds = atof(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--chunk") == 0) {
            long c = atol(argv[++i]);
            if (c != 0 && c < 4096) {
                fprintf(stderr, "sharc-datapath: --chunk must be 0 or at least 4096\n");
                return 2;
            }
            chunk = (size_t)c;
        } else if (strcmp(argv[i], "--from-memory") == 0) {
            from_memory = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--padding") == 0) {
            padding = atof(argv[++i]);
        } else if (argv[i][0] != '-' && dir == NULL) {
            dir = argv[i];
        } else {
            fprintf(stderr, "sharc-datapath: unexpected '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (dir == NULL || threads < 1 || threads > MAX_THREADS || !(seconds > 0) ||
        !(padding >= 0 && padding < 4)) {
        fprintf(stderr,
                "sharc-datapath: need DIR, 1 <= --threads <= %d, --seconds > 0, "
                "0 <= --padding < 4 (see --help)\n",
                MAX_THREADS);
        return 2;
    }
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    static job j;
    j.padding = padding;
    j.chunk = chunk;
    if (add_dir(&j, &ctx, dir) != 0)
        return 1;
    if (j.n == 0) {
        fprintf(stderr, "sharc-datapath: no .wav members in the .tar files of %s\n", dir);
        return 1;
    }
    uint8_t *members_in_memory = NULL;
    if (from_memory && (members_in_memory = load_members(&j)) == NULL)
        return 1;
    j.ring = sharc__malloc_bulk(&ctx, RING_BYTES, 64); /* huge pages, as batch payloads */
    if (j.ring == NULL)
        return 1;
    memset(j.ring, 0, RING_BYTES); /* the pool is allocated and touched before batches */

    worker w[MAX_THREADS] = {0};
    double cpu0 = cpu_seconds(), t0 = sharc__now_s();
    j.stop_at = t0 + seconds;
    for (int i = 0; i < threads; i++) {
        w[i].j = &j;
        if (pthread_create(&w[i].thread, NULL, work, &w[i]) != 0)
            return 1;
    }
    double audio = 0, members = 0;
    int failed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(w[i].thread, NULL);
        audio += w[i].audio_s;
        members += w[i].members;
        failed |= w[i].failed;
    }
    double wall = sharc__now_s() - t0, cpu = cpu_seconds() - cpu0;
    if (failed) {
        fprintf(stderr, "sharc-datapath: a member could not be read back or is not "
                        "canonical PCM16 WAV, or is longer than the batch ring\n");
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"audio_seconds_per_second\": %.1f, \"cuts_per_second\": %.1f, "
           "\"cpu_seconds_per_audio_second\": %.9f, \"peak_rss_bytes\": %ld, "
           "\"time_to_first_batch_s\": null, \"members\": %zu, \"threads\": %d, "
           "\"from_memory\": %s}\n",
           audio / wall, members / wall, audio > 0 ? cpu / audio : 0.0, ru.ru_maxrss * 1024L, j.n,
           threads, from_memory ? "true" : "false");
    for (size_t i = 0; i < j.n_fds; i++)
        close(j.fds[i]);
    sharc__free(&ctx, j.ring);
    free(members_in_memory);
    free(j.v);
    return 0;
}

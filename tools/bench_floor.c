/*
 * The floor of `sharc bench --floor`: libarchive + libsndfile alone (see bench_floor.h).
 */
#include "bench_floor.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sndfile.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "sharc/sharc.h"

/* Large reads keep libarchive's syscalls off the hot path, as in the reader. */
#define FLOOR_BLOCK_BYTES (1u << 20)

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void set_err(char *err, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* ---- finding the tars ---- */

typedef struct path_list {
    char **v;
    size_t n, cap;
} path_list;

static int list_add(path_list *l, const char *path)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n] = strdup(path);
    if (l->v[l->n] == NULL)
        return -1;
    l->n++;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int is_tar_name(const char *name)
{
    return ends_with(name, ".tar") || ends_with(name, ".tar.gz") || ends_with(name, ".tgz") ||
           ends_with(name, ".tar.zst");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_dir(path_list *l, const char *dir, char *err, size_t errn)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        set_err(err, errn, "%s: %s", dir, strerror(errno));
        return -1;
    }
    size_t first = l->n;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!is_tar_name(e->d_name))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = list_add(l, path);
    }
    closedir(d);
    if (rc < 0) {
        set_err(err, errn, "out of memory");
        return -1;
    }
    if (l->n > first) /* none: l->v may be NULL, which qsort may not be given */
        qsort(l->v + first, l->n - first, sizeof *l->v, cmp_str);
    return 0;
}

static int add_path(path_list *l, const char *path, char *err, size_t errn)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        set_err(err, errn, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode))
        return add_dir(l, path, err, errn);
    if (is_tar_name(path) && list_add(l, path) < 0) {
        set_err(err, errn, "out of memory");
        return -1;
    }
    return 0;
}

int bench_floor_find_shards(const char *const *paths, size_t n_paths, char ***out, size_t *n_out,
                            char *err, size_t err_size)
{
    path_list l = {0};
    for (size_t i = 0; i < n_paths; i++) { /* the files the reader finds for this path */
        char **found = NULL;
        size_t n_found = 0;
        if (sharc_reader_expand_path(paths[i], &found, &n_found, err, err_size) != 0)
            goto fail;
        int rc = 0;
        for (size_t j = 0; j < n_found && rc == 0; j++)
            rc = add_path(&l, found[j], err, err_size);
        sharc_free(found);
        if (rc < 0)
            goto fail;
    }
    if (l.n == 0) {
        set_err(err, err_size, "no tar files (*.tar, *.tar.gz, *.tgz, *.tar.zst) found under %s%s",
                n_paths ? paths[0] : "(no path)", n_paths > 1 ? " ..." : "");
        goto fail;
    }
    *out = l.v;
    *n_out = l.n;
    return 0;
fail:
    bench_floor_free_shards(l.v, l.n);
    *out = NULL;
    *n_out = 0;
    return -1;
}

void bench_floor_free_shards(char **shards, size_t n)
{
    if (shards == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(shards[i]);
    free(shards);
}

/* ---- decoding from memory ---- */

typedef struct mem_file {
    const unsigned char *data;
    sf_count_t len, pos;
} mem_file;

static sf_count_t mem_len(void *user)
{
    return ((mem_file *)user)->len;
}

static sf_count_t mem_seek(sf_count_t offset, int whence, void *user)
{
    mem_file *m = user;
    sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->len : 0;
    sf_count_t pos = base + offset;
    if (pos < 0 || pos > m->len)
        return -1;
    m->pos = pos;
    return pos;
}

static sf_count_t mem_read(void *ptr, sf_count_t count, void *user)
{
    mem_file *m = user;
    sf_count_t n = m->len - m->pos < count ? m->len - m->pos : count;
    memcpy(ptr, m->data + m->pos, (size_t)n);
    m->pos += n;
    return n;
}

static sf_count_t mem_write(const void *ptr, sf_count_t count, void *user)
{
    (void)ptr;
    (void)count;
    (void)user;
    return 0;
}

static sf_count_t mem_tell(void *user)
{
    return ((mem_file *)user)->pos;
}

/* Audio by its magic bytes (FLAC, RIFF/WAVE, Ogg, MP3 with ID3 or a frame sync). */
static int looks_like_audio(const unsigned char *p, size_t n)
{
    if (n < 4)
        return 0;
    return memcmp(p, "fLaC", 4) == 0 || memcmp(p, "RIFF", 4) == 0 || memcmp(p, "OggS", 4) == 0 ||
           memcmp(p, "ID3", 3) == 0 || (p[0] == 0xFF && (p[1] & 0xE0) == 0xE0);
}

/* Per-thread state: reusable member and sample buffers, and what the thread did. */
typedef struct floor_worker {
    struct floor_job *job;
    pthread_t thread;
    unsigned char *data;
    size_t data_cap;
    float *pcm;
    size_t pcm_cap;
    double audio_seconds;
    uint64_t members, bytes, shards;
} floor_worker;

typedef struct floor_job {
    char *const *shards;
    size_t n_shards;
    double start, min_seconds;
    atomic_size_t next; /* shard tickets; ticket k is shard k % n_shards */
    atomic_int stop;
    pthread_mutex_t lock; /* guards err */
    int failed;
    char *err;
    size_t err_size;
} floor_job;

static void job_fail(floor_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_fail(floor_job *j, const char *fmt, ...)
{
    pthread_mutex_lock(&j->lock);
    if (!j->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->err, j->err_size, fmt, ap);
        va_end(ap);
        j->failed = 1;
    }
    pthread_mutex_unlock(&j->lock);
    atomic_store(&j->stop, 1);
}

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap : 1u << 16;
    while (cap2 < need)
        cap2 *= 2;
    void *p = realloc(*buf, cap2 * elem);
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = cap2;
    return 0;
}

static int decode_member(floor_worker *w, size_t n, const char *shard, const char *name)
{
    mem_file m = {w->data, (sf_count_t)n, 0};
    SF_VIRTUAL_IO vio = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
    SF_INFO info = {0};
    SNDFILE *snd = sf_open_virtual(&vio, SFM_READ, &info, &m);
    if (snd == NULL) {
        job_fail(w->job, "%s: %s: libsndfile cannot open it: %s", shard, name, sf_strerror(NULL));
        return -1;
    }
    size_t want = (size_t)info.frames * (size_t)info.channels;
    if (info.frames < 0 || info.channels <= 0 ||
        grow((void **)&w->pcm, &w->pcm_cap, want, sizeof(float)) < 0) {
        sf_close(snd);
        job_fail(w->job, "%s: %s: cannot hold %lld frames", shard, name, (long long)info.frames);
        return -1;
    }
    sf_count_t got = sf_readf_float(snd, w->pcm, info.frames);
    int bad = sf_error(snd) != SF_ERR_NO_ERROR;
    if (bad)
        job_fail(w->job, "%s: %s: decode failed: %s", shard, name, sf_strerror(snd));
    sf_close(snd);
    if (bad)
        return -1;
    w->audio_seconds += (double)got / (double)info.samplerate;
    w->members++;
    return 0;
}

static int over_time(floor_job *j)
{
    return j->min_seconds > 0 && now_seconds() - j->start >= j->min_seconds;
}

static int read_shard(floor_worker *w, const char *shard)
{
    floor_job *j = w->job;
    struct archive *a = archive_read_new();
    if (a == NULL) {
        job_fail(j, "%s: out of memory", shard);
        return -1;
    }
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    if (archive_read_open_filename(a, shard, FLOOR_BLOCK_BYTES) != ARCHIVE_OK) {
        job_fail(j, "%s: %s", shard, archive_error_string(a));
        archive_read_free(a);
        return -1;
    }
    struct archive_entry *e;
    int rc = 0, r;
    while (rc == 0 && !atomic_load(&j->stop) && !over_time(j) &&
           (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        const char *name = archive_entry_pathname(e);
        la_int64_t size = archive_entry_size(e);
        if (size < 0 || grow((void **)&w->data, &w->data_cap, (size_t)size + 1, 1) < 0) {
            job_fail(j, "%s: %s: cannot hold %lld bytes", shard, name, (long long)size);
            rc = -1;
            break;
        }
        la_ssize_t got = archive_read_data(a, w->data, (size_t)size);
        if (got != (la_ssize_t)size) {
            job_fail(j, "%s: %s: %s", shard, name,
                     got < 0 ? archive_error_string(a) : "short member");
            rc = -1;
            break;
        }
        w->bytes += (uint64_t)size;
        if (looks_like_audio(w->data, (size_t)size))
            rc = decode_member(w, (size_t)size, shard, name);
    }
    if (rc == 0 && !atomic_load(&j->stop) && !over_time(j) && r != ARCHIVE_EOF) {
        job_fail(j, "%s: %s", shard, archive_error_string(a));
        rc = -1;
    }
    archive_read_free(a);
    return rc;
}

static void *floor_thread(void *arg)
{
    floor_worker *w = arg;
    floor_job *j = w->job;
    while (!atomic_load(&j->stop)) {
        size_t k = atomic_fetch_add(&j->next, 1);
        if (j->min_seconds <= 0 ? k >= j->n_shards : over_time(j))
            break;
        w->shards++;
        if (read_shard(w, j->shards[k % j->n_shards]) < 0)
            break;
    }
    return NULL;
}

int bench_floor_run(char *const *shards, size_t n_shards, int threads, double min_seconds,
                    bench_floor_result *out, char *err, size_t err_size)
{
    memset(out, 0, sizeof *out);
    if (threads < 1)
        threads = 1;
    floor_job job = {.shards = shards,
                     .n_shards = n_shards,
                     .min_seconds = min_seconds,
                     .err = err,
                     .err_size = err_size};
    atomic_init(&job.next, 0);
    atomic_init(&job.stop, 0);
    pthread_mutex_init(&job.lock, NULL);
    floor_worker *w = calloc((size_t)threads, sizeof *w);
    if (w == NULL) {
        set_err(err, err_size, "out of memory");
        pthread_mutex_destroy(&job.lock);
        return -1;
    }
    double cpu0 = cpu_seconds();
    job.start = now_seconds();
    int started = 0;
    for (; started < threads; started++) {
        w[started].job = &job;
        if (pthread_create(&w[started].thread, NULL, floor_thread, &w[started]) != 0) {
            job_fail(&job, "cannot start floor thread %d", started);
            break;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(w[i].thread, NULL);
    out->wall_seconds = now_seconds() - job.start;
    out->cpu_seconds = cpu_seconds() - cpu0;
    for (int i = 0; i < threads; i++) {
        out->audio_seconds += w[i].audio_seconds;
        out->members += w[i].members;
        out->bytes += w[i].bytes;
        out->shards += w[i].shards;
        free(w[i].data);
        free(w[i].pcm);
    }
    free(w);
    pthread_mutex_destroy(&job.lock);
    return job.failed ? -1 : 0;
}

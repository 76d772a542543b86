/*
 * Helpers shared by the sharc subcommands: stdout, the inputs a command must not overwrite,
 * files written whole, time and numbers, sample statistics and JSON output.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* stdout's failure was reported (cli_finish_output), so that cli_exit() does not repeat it. */
static int stdout_failure_reported;

int cli_stdout_gone(void)
{
    /* A pipe whose reader closed it, or a socket whose peer did, polls as an error or a
     * hang-up for the writer. */
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

/* Why the last write to stdout failed (0: none did). stdio keeps no such record: a large
 * write that fails is not buffered, so a later fflush() has nothing to say. */
static int stdout_errno;

static ssize_t stdout_write(void *cookie, const char *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(STDOUT_FILENO, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            stdout_errno = w < 0 ? errno : EIO;
            errno = stdout_errno;
            return -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

static int stdout_close(void *cookie)
{
    /* Some file systems (NFS) report a failed write only when the file is closed. */
    if (close(STDOUT_FILENO) != 0 && errno != EINTR) {
        stdout_errno = errno;
        return -1;
    }
    return 0;
}

void cli_stdout_init(void)
{
    FILE *f = fopencookie(NULL, "w",
                          (cookie_io_functions_t){.write = stdout_write, .close = stdout_close});
    if (f == NULL)
        return; /* stdio's own stdout: a failure is still seen, with a vaguer reason */
    /* As stdio buffers a stdout of its own: by line on a terminal, else by block. */
    setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
    stdout = f;
}

/* 0 when everything written to stdout so far has reached it, else an errno value. */
static int flush_stdout(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    return stdout_errno ? stdout_errno : errno ? errno : EIO;
}

int cli_finish_output(const char *cmd, int status)
{
    int err = flush_stdout();
    if (err == 0 || stdout_failure_reported)
        return err == 0 ? status : CLI_EXIT_FAIL;
    if (err == EPIPE || cli_stdout_gone())
        return status; /* the reader went away: cli_exit() ends the program as SIGPIPE does */
    fprintf(stderr, "sharc %s: cannot write the output: %s\n", cmd, strerror(err));
    stdout_failure_reported = 1;
    return CLI_EXIT_FAIL;
}

int cli_exit(const char *cmd, int status)
{
    int err = flush_stdout();
    if (err != 0 && (err == EPIPE || cli_stdout_gone())) {
        /* Quietly, as a program that did not ignore SIGPIPE ends (an MPI launcher or a parent
         * process may have ignored it for us). */
        signal(SIGPIPE, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        raise(SIGPIPE);
        return 128 + SIGPIPE;
    }
    errno = 0;
    if (fclose(stdout) != 0 && err == 0)
        err = stdout_errno ? stdout_errno : errno ? errno : EIO;
    if (err == 0)
        return status;
    if (!stdout_failure_reported)
        fprintf(stderr, "sharc%s%s: cannot write the output: %s\n", cmd ? " " : "", cmd ? cmd : "",
                strerror(err));
    stdout_failure_reported = 1;
    return status == CLI_EXIT_OK ? CLI_EXIT_FAIL : status;
}

int cli_inputs_add(cli_inputs *in, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISDIR(st.st_mode))
        return 0;
    if (in->n == in->cap) {
        size_t cap = in->cap ? 2 * in->cap : 64;
        cli_input *v = realloc(in->v, cap * sizeof *v);
        if (!v)
            return -1;
        in->v = v;
        in->cap = cap;
    }
    if ((in->v[in->n].path = strdup(path)) == NULL)
        return -1;
    in->v[in->n].dev = st.st_dev;
    in->v[in->n].ino = st.st_ino;
    in->n++;
    return 0;
}

/* The files of folder `dir` that the reader lists: not hidden, and with `sub` (NULL for
 * none) those of that subfolder too. */
static int inputs_add_dir(cli_inputs *in, const char *dir, const char *sub)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* the reader says why */
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *p = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!p) {
            rc = -1;
            break;
        }
        sprintf(p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (sub && strcmp(e->d_name, sub) == 0 && stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rc = inputs_add_dir(in, p, NULL);
        else
            rc = cli_inputs_add(in, p);
        free(p);
    }
    closedir(d);
    return rc;
}

int cli_inputs_add_dataset(cli_inputs *in, const char *const *paths, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char **found = NULL;
        size_t n_found = 0;
        if (sharc_reader_expand_path(paths[i], &found, &n_found, NULL, 0) != 0)
            continue; /* the reader says why when it is opened */
        int rc = 0;
        for (size_t k = 0; rc == 0 && k < n_found; k++) {
            struct stat st;
            if (stat(found[k], &st) == 0 && S_ISDIR(st.st_mode))
                rc = inputs_add_dir(in, found[k], "sharded_manifests");
            else
                rc = cli_inputs_add(in, found[k]);
        }
        sharc_free(found);
        if (rc != 0)
            return -1;
    }
    return 0;
}

const char *cli_inputs_find(const cli_inputs *in, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return NULL; /* not there (yet): no input */
    for (size_t i = 0; i < in->n; i++)
        if (in->v[i].dev == st.st_dev && in->v[i].ino == st.st_ino)
            return in->v[i].path;
    return NULL;
}

/* The length of the control character at `p` that cli_text_sanitize() replaces, else 0. */
static size_t control_len(const unsigned char *p, int keep_lines)
{
    if (*p == '\n' || *p == '\t' || *p == '\r')
        return keep_lines && *p != '\r' ? 0 : 1;
    if (*p < 0x20 || *p == 0x7f)
        return 1;
    return p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F ? 2 : 0; /* U+0080..U+009F */
}

void cli_text_sanitize(char *s, int keep_lines)
{
    unsigned char *r = (unsigned char *)s, *w = r;
    while (*r) {
        size_t n = control_len(r, keep_lines);
        if (n == 0) {
            *w++ = *r++;
            continue;
        }
        *w++ = *r == '\n' || *r == '\t' || *r == '\r' ? ' ' : '?';
        r += n;
    }
    *w = '\0';
}

const char *cli_text(const char *s, char **tmp)
{
    *tmp = NULL;
    const unsigned char *p = (const unsigned char *)s;
    while (p && *p && control_len(p, 0) == 0)
        p++;
    if (p == NULL || *p == '\0' || (*tmp = strdup(s)) == NULL)
        return s;
    cli_text_sanitize(*tmp, 0);
    return *tmp;
}

int cli_inputs_add_reader(cli_inputs *in, const sharc_reader_settings *s)
{
    if (cli_inputs_add_dataset(in, s->paths, s->n_paths) != 0 ||
        (s->input_cfg != NULL && cli_inputs_add(in, s->input_cfg) != 0))
        return -1;
    const sharc_augment_settings *a = s->augment;
    if (a != NULL && a->n_noise > 0 && cli_inputs_add_dataset(in, a->noise, a->n_noise) != 0)
        return -1;
    for (size_t i = 0; i < s->n_tokenizer; i++) {
        /* PATH or LANG=PATH: both spellings are tried, the one that is no file adds nothing */
        const char *eq = strchr(s->tokenizer[i], '=');
        if (cli_inputs_add(in, s->tokenizer[i]) != 0 || (eq && cli_inputs_add(in, eq + 1) != 0))
            return -1;
    }
    return 0;
}

void cli_inputs_free(cli_inputs *in)
{
    for (size_t i = 0; i < in->n; i++)
        free(in->v[i].path);
    free(in->v);
    memset(in, 0, sizeof *in);
}

int cli_make_tmp(const char *path, char **tmp)
{
    static unsigned long counter;
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    *tmp = NULL;
    for (int attempt = 0; attempt < 1000; attempt++) {
        char *name = NULL;
        /* The name shortened so that the temporary's fits in NAME_MAX where the name does. */
        if (asprintf(&name, "%.*s.%.200s.%ld.%lu.tmp", dir_len, path, base, (long)getpid(),
                     counter++) < 0)
            return ENOMEM;
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            close(fd);
            *tmp = name;
            return 0;
        }
        int err = errno;
        free(name);
        if (err != EEXIST)
            return err;
    }
    return EEXIST;
}

int cli_check_writable(const char *path)
{
    char *tmp = NULL;
    int err = cli_make_tmp(path, &tmp);
    if (err == 0)
        unlink(tmp);
    free(tmp);
    return err;
}

int cli_write_file(const char *path, const void *data, size_t n,
                   int (*fill)(FILE *f, const void *arg), const void *arg)
{
    char *tmp = NULL;
    int err = cli_make_tmp(path, &tmp);
    if (err != 0)
        return err;
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        err = errno;
    } else {
        errno = 0;
        if (fill != NULL)
            err = fill(f, arg);
        else if (fwrite(data, 1, n, f) != n)
            err = errno ? errno : EIO;
        errno = 0;
        if (fflush(f) != 0 && err == 0)
            err = errno ? errno : EIO;
        errno = 0;
        if (fclose(f) != 0 && err == 0)
            err = errno ? errno : EIO;
    }
    if (err == 0 && rename(tmp, path) != 0)
        err = errno;
    if (err != 0)
        unlink(tmp);
    free(tmp);
    return err;
}

int cli_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 1024 ? 1024 : (int)n);
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *cli_fmt_count(char *buf, size_t n, double v)
{
    static const char suffix[] = {'k', 'M', 'G', 'T'};
    if (fabs(v) < 1000.0) {
        snprintf(buf, n, "%.0f", v);
        return buf;
    }
    int i = -1;
    while (fabs(v) >= 1000.0 && i < 3) {
        v /= 1000.0;
        i++;
    }
    snprintf(buf, n, "%.*f%c", fabs(v) < 10.0 ? 2 : (fabs(v) < 100.0 ? 1 : 0), v, suffix[i]);
    return buf;
}

const char *cli_fmt_duration(char *buf, size_t n, double seconds)
{
    if (!isfinite(seconds) || seconds < 0.0)
        seconds = 0.0;
    if (seconds < 60.0) {
        snprintf(buf, n, "%.1fs", seconds);
        return buf;
    }
    uint64_t s = (uint64_t)(seconds + 0.5);
    if (s < 3600)
        snprintf(buf, n, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else
        snprintf(buf, n, "%" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s", s / 3600, s / 60 % 60, s % 60);
    return buf;
}

void cli_sample_stats_compute(const float *samples, size_t n, cli_sample_stats *out)
{
    double sum = 0.0, sq = 0.0, peak = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = samples[i];
        sum += v;
        sq += v * v;
        if (fabs(v) > peak)
            peak = fabs(v);
    }
    out->sum = sum;
    out->peak = peak;
    out->rms = n > 0 ? sqrt(sq / (double)n) : 0.0;
}

void cli_json_str(FILE *f, const char *s)
{
    if (s == NULL)
        fputs("null", f);
    else
        cli_json_strn(f, s, strlen(s));
}

/* The length of the well-formed UTF-8 sequence at p (end at `end`), 0 when there is none. */
static size_t utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    size_t n = *p >= 0xF0 && *p <= 0xF4 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC2 && *p <= 0xDF ? 2 : 0;
    if (n == 0 || *p > 0xF4 || (size_t)(end - p) < n)
        return 0;
    unsigned lo = *p == 0xE0 ? 0xA0 : *p == 0xF0 ? 0x90 : 0x80;
    unsigned hi = *p == 0xED ? 0x9F : *p == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xBF)
            return 0;
    return n;
}

/* The directory part of `path` resolved (realpath), then its last component: "a", "./a" and
 * "d/../a" give the same. NULL when the directory cannot be resolved. Freed by the caller. */
static char *resolved_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *real = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!real)
        return NULL;
    char *out = malloc(strlen(real) + strlen(base) + 2);
    if (out)
        sprintf(out, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base);
    free(real);
    return out;
}

int cli_same_file(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return 1;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ra = resolved_path(a), *rb = resolved_path(b);
    int same = ra && rb && strcmp(ra, rb) == 0;
    free(ra);
    free(rb);
    return same;
}

void cli_json_strn(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    const unsigned char *end = (const unsigned char *)s + n;
    for (const unsigned char *p = (const unsigned char *)s; p < end; p++) {
        if (*p >= 0x80) {
            /* UTF-8 as it is; a byte that is not (a name in Latin-1, say) as Python's
             * surrogateescape decodes it, so that the line stays valid JSON. */
            size_t k = utf8_sequence(p, end);
            if (k)
                fwrite(p, 1, k, f);
            else
                fprintf(f, "\\udc%02x", *p);
            p += k ? k - 1 : 0;
            continue;
        }
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            /* Other control characters need \u escapes. */
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void cli_json_num(FILE *f, double v)
{
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    /* The shortest of %.15g..%.17g that reads back as the same double. */
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

void cli_json_f32(FILE *f, float v)
{
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    /* The shortest of %.6g..%.9g that reads back as the same float. */
    char buf[40];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

void cli_json_nums(FILE *f, const double *v, size_t n)
{
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        cli_json_num(f, v[i]);
    }
    fputc(']', f);
}

void cli_json_key(FILE *f, const char *key, int first)
{
    if (!first)
        fputc(',', f);
    cli_json_str(f, key);
    fputc(':', f);
}

/*
 * Helpers shared by the sharc subcommands: option values, JSON output, numbers, logging
 * and the progress line.
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

/*
 * stderr is shared by the library's log messages (possibly from its worker threads) and
 * the progress line; one lock keeps each write whole and lets a log message erase the
 * progress line first. The process has one stderr, so this state is process-wide.
 */
/* Distinct warnings remembered, so that each is printed once (a hash table, half full at most). */
#define WARNED_SLOTS 1024

static struct {
    pthread_mutex_t lock;
    int progress_shown;   /* a progress line is on the terminal, without a newline */
    int hold_errors;      /* ERROR messages are recorded, not printed: the command reports them */
    int last_error_shown; /* last_error was printed */
    char last_error[1024];
    uint64_t warned[WARNED_SLOTS]; /* hashes of the warnings printed (0: free slot) */
    size_t n_warned;
} cli_stderr = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, "", {0}, 0};

void cli_getopt_reset(void)
{
    /* glibc re-initialises getopt completely when optind is 0. */
    optind = 0;
    opterr = 0;
}

int cli_option_error(const char *cmd, int opt, char *const *argv, const struct option *opts)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    int is_long = strncmp(arg, "--", 2) == 0;
    /* Long options have codes from 256 (--help's is 'h'); getopt sets optopt to a short
     * option's letter, and argv[optind - 1] may then be the argument before its group. */
    if (optopt > 0 && optopt < 256 && !(is_long && optopt == 'h')) {
        if (opt == ':')
            return cli_usage_error(cmd, "option '-%c' requires a value", optopt);
        return cli_usage_error(cmd, "unknown option '-%c'", optopt);
    }
    if (!is_long)
        return cli_usage_error(cmd, "invalid option '%s'", arg);
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    if (opt == ':')
        return cli_usage_error(cmd, "option '--%.*s' requires a value", (int)len, name);
    char candidates[512] = "";
    size_t n = 0, used = 0;
    const char *match = NULL;
    int full = 0;
    for (const struct option *o = opts; o->name; o++) {
        if (strncmp(o->name, name, len) != 0)
            continue;
        if (o->name[len] == 0) { /* exactly this option */
            n = 1;
            match = o->name;
            break;
        }
        match = o->name;
        n++;
        if (full)
            continue;
        int w = snprintf(candidates + used, sizeof candidates - used, "%s--%s", n > 1 ? ", " : "",
                         o->name);
        if (w > 0 && used + (size_t)w + 5 < sizeof candidates) {
            used += (size_t)w;
        } else { /* no room for this one: an ellipsis instead, and no more */
            snprintf(candidates + used, sizeof candidates - used, ", ...");
            full = 1;
        }
    }
    if (n > 1)
        return cli_usage_error(cmd, "option '--%.*s' is ambiguous: %s", (int)len, name, candidates);
    if (n == 1) /* it, or the one option it abbreviates, was refused for its value */
        return cli_usage_error(cmd, "option '--%s' takes no value", match);
    return cli_usage_error(cmd, "unknown option '--%.*s'", (int)len, name);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sharc %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'sharc %s --help'.\n", cmd);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_parse_i64(const char *cmd, const char *opt, const char *val, int64_t min, int64_t max,
                  int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (val[0] == '\0' || *end != '\0' || errno == ERANGE || v < min || v > max) {
        cli_usage_error(cmd,
                        "invalid value '%s' for %s (an integer from %" PRId64 " to %" PRId64
                        " is expected)",
                        val, opt, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_int(const char *cmd, const char *opt, const char *val, int min, int max, int *out)
{
    int64_t v;
    if (cli_parse_i64(cmd, opt, val, min, max, &v) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *val, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    /* strtoull accepts "-1" and wraps it; reject any sign explicitly. */
    if (val[0] < '0' || val[0] > '9') {
        cli_usage_error(cmd, "invalid value '%s' for %s (a non-negative integer is expected)", val,
                        opt);
        return -1;
    }
    unsigned long long v = strtoull(val, &end, 10);
    if (*end == '\0' && errno == ERANGE) {
        cli_usage_error(cmd, "invalid value '%s' for %s (out of range: at most %" PRIu64 ")", val,
                        opt, UINT64_MAX);
        return -1;
    }
    if (*end != '\0') {
        cli_usage_error(cmd, "invalid value '%s' for %s (a non-negative integer is expected)", val,
                        opt);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_double(const char *cmd, const char *opt, const char *val, double min, double max,
                     double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(val, &end);
    if (end == val || *end != '\0' || errno == ERANGE || !isfinite(v) || v < min || v > max) {
        cli_usage_error(cmd, "invalid value '%s' for %s (a number from %g to %g is expected)", val,
                        opt, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

/* Number of comma-separated items in val; 0 when an item is empty ("1,,2", "", "3,"). */
static size_t count_list_items(const char *val)
{
    size_t n = 1;
    const char *prev = val;
    for (const char *p = val;; p++) {
        if (*p == ',' || *p == '\0') {
            if (p == prev)
                return 0;
            if (*p == '\0')
                return n;
            n++;
            prev = p + 1;
        }
    }
}

/* Free the previous list and allocate one for the items of val (NULL when it has none). */
static void *list_begin(void *old, const char *val, size_t item_size, size_t *count, size_t *n)
{
    free(old);
    *count = count_list_items(val);
    *n = 0;
    return *count ? malloc(*count * item_size) : NULL;
}

int cli_parse_double_list(const char *cmd, const char *opt, const char *val, double min, double max,
                          int sorted, double **out, size_t *n)
{
    size_t count;
    *out = list_begin(*out, val, sizeof **out, &count, n);
    const char *p = val;
    for (size_t i = 0; i < count && *out != NULL; i++) {
        char *end = NULL;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || (*end != ',' && *end != '\0') || errno == ERANGE || !isfinite(v) ||
            v < min || v > max || (sorted && i > 0 && v < (*out)[i - 1]))
            break;
        (*out)[(*n)++] = v;
        p = end + 1;
    }
    if (count > 0 && *n == count)
        return 0;
    cli_usage_error(cmd,
                    "invalid value '%s' for %s (%snumbers from %g to %g separated by commas "
                    "are expected)",
                    val, opt, sorted ? "non-decreasing " : "", min, max);
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}

int cli_parse_u32_list(const char *cmd, const char *opt, const char *val, uint32_t min,
                       uint32_t max, uint32_t **out, size_t *n)
{
    size_t count;
    *out = list_begin(*out, val, sizeof **out, &count, n);
    const char *p = val;
    for (size_t i = 0; i < count && *out != NULL; i++) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = *p >= '0' && *p <= '9' ? strtoull(p, &end, 10) : 0;
        if (end == NULL || end == p || (*end != ',' && *end != '\0') || errno == ERANGE ||
            v < min || v > max)
            break;
        (*out)[(*n)++] = (uint32_t)v;
        p = end + 1;
    }
    if (count > 0 && *n == count)
        return 0;
    cli_usage_error(cmd,
                    "invalid value '%s' for %s (integers from %" PRIu32 " to %" PRIu32
                    " separated by commas are expected)",
                    val, opt, min, max);
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}

int cli_take_paths(const char *cmd, int argc, char **argv, sharc_reader_settings *s)
{
    if (s->input_cfg) {
        if (optind < argc)
            return cli_usage_error(cmd, "give PATH or --input-cfg, not both");
        return -1;
    }
    if (optind >= argc)
        return cli_usage_error(cmd, "no PATH given");
    s->paths = (const char *const *)(argv + optind);
    s->n_paths = (size_t)(argc - optind);
    return -1;
}

static const struct {
    const char *name;
    sharc_layout layout;
} layouts[] = {
    {"auto", SHARC_LAYOUT_AUTO},
    {"shar", SHARC_LAYOUT_SHAR},
    {"nemo", SHARC_LAYOUT_NEMO},
    {"wds", SHARC_LAYOUT_WDS},
};

int cli_parse_layout(const char *cmd, const char *val, sharc_layout *out)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        if (strcmp(val, layouts[i].name) == 0) {
            *out = layouts[i].layout;
            return 0;
        }
    }
    cli_usage_error(cmd, "unknown layout '%s' (auto, shar, nemo or wds)", val);
    return -1;
}

const char *cli_layout_name(sharc_layout l)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        if (layouts[i].layout == l)
            return layouts[i].name;
    }
    return "unknown";
}

int cli_parse_on_error(const char *cmd, const char *val, sharc_error_policy *out)
{
    if (strcmp(val, "fail") == 0) {
        *out = SHARC_ON_ERROR_FAIL;
        return 0;
    }
    if (strcmp(val, "skip") == 0) {
        *out = SHARC_ON_ERROR_SKIP;
        return 0;
    }
    cli_usage_error(cmd, "unknown error policy '%s' (fail or skip)", val);
    return -1;
}

int cli_env_int(const char *name, int min, int max, int *out)
{
    const char *val = getenv(name);
    if (val == NULL || val[0] == '\0')
        return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < min || v > max) {
        fprintf(stderr, "sharc: environment variable %s='%s' is not an integer from %d to %d\n",
                name, val, min, max);
        return -1;
    }
    *out = (int)v;
    return 1;
}

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

static void erase_progress_locked(void)
{
    if (cli_stderr.progress_shown) {
        fputs("\r\033[K", stderr);
        cli_stderr.progress_shown = 0;
    }
}

static const char *level_name(sharc_log_level level)
{
    switch (level) {
    case SHARC_LOG_ERROR:
        return "error";
    case SHARC_LOG_WARN:
        return "warning";
    case SHARC_LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

/*
 * 1 when the warning `text` was printed already. Several readers over one dataset (validate's
 * threads, bench's repetitions, the epochs of a run) would each repeat what they found.
 */
static int warned_before_locked(const char *text)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = text; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h |= 1;
    size_t i = (size_t)(h % WARNED_SLOTS);
    while (cli_stderr.warned[i] != 0) {
        if (cli_stderr.warned[i] == h)
            return 1;
        i = (i + 1) % WARNED_SLOTS;
    }
    if (cli_stderr.n_warned < WARNED_SLOTS / 2) { /* full: print the rest every time */
        cli_stderr.warned[i] = h;
        cli_stderr.n_warned++;
    }
    return 0;
}

static void log_to_stderr(void *cookie, sharc_log_level level, const char *message)
{
    char text[1024];
    snprintf(text, sizeof text, "%s", message);
    size_t len = strlen(text);
    while (len > 0 && text[len - 1] == '\n')
        text[--len] = '\0';
    pthread_mutex_lock(&cli_stderr.lock);
    int show = (int)level <= (int)(intptr_t)cookie &&
               !(level == SHARC_LOG_ERROR && cli_stderr.hold_errors) &&
               !(level == SHARC_LOG_WARN && warned_before_locked(text));
    if (level == SHARC_LOG_ERROR) {
        snprintf(cli_stderr.last_error, sizeof cli_stderr.last_error, "%s", text);
        cli_stderr.last_error_shown = show;
    }
    if (show) {
        erase_progress_locked();
        fprintf(stderr, "sharc: %s: %s\n", level_name(level), text);
    }
    pthread_mutex_unlock(&cli_stderr.lock);
}

void cli_report_error(const char *cmd, const char *prefix, const char *text)
{
    pthread_mutex_lock(&cli_stderr.lock);
    int shown = cli_stderr.last_error_shown && strcmp(cli_stderr.last_error, text) == 0;
    if (!shown) {
        erase_progress_locked();
        fprintf(stderr, "sharc %s: %s%s\n", cmd, prefix, text);
    }
    pthread_mutex_unlock(&cli_stderr.lock);
}

void cli_logger(sharc_logger *log, int show)
{
    /* The level shown travels in the cookie; the library must still pass ERROR messages so
     * that they can be recorded. */
    log->callback = log_to_stderr;
    log->cookie = (void *)(intptr_t)show;
    log->level = show > SHARC_LOG_ERROR ? (sharc_log_level)show : SHARC_LOG_ERROR;
}

const char *cli_last_logged_error(char *buf, size_t n)
{
    pthread_mutex_lock(&cli_stderr.lock);
    snprintf(buf, n, "%s", cli_stderr.last_error);
    pthread_mutex_unlock(&cli_stderr.lock);
    return buf;
}

static void hold_errors(int hold)
{
    pthread_mutex_lock(&cli_stderr.lock);
    cli_stderr.hold_errors = hold;
    if (hold)
        cli_stderr.last_error[0] = '\0'; /* only this open's reason is reported */
    pthread_mutex_unlock(&cli_stderr.lock);
}

const char *cli_error_text(char *buf, size_t n, int rc, const char *why)
{
    const char *kind = sharc_strerror(rc);
    if (why == NULL || why[0] == '\0')
        snprintf(buf, n, "%s", kind);
    else if (strstr(why, kind) != NULL) /* "PATH: No such file or directory" says it all */
        snprintf(buf, n, "%s", why);
    else
        snprintf(buf, n, "%s: %s", kind, why);
    return buf;
}

static char failure[CLI_FAILURE_BYTES];

void cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure, sizeof failure, fmt, ap);
    va_end(ap);
    fprintf(stderr, "sharc %s: %s\n", cmd, failure);
}

char *cli_failure_buf(void)
{
    return failure;
}

void cli_print_json_failure(FILE *f, void (*extra)(FILE *f, const void *arg), const void *arg)
{
    fputc('{', f);
    cli_json_key(f, "error", 1);
    cli_json_str(f, failure[0] ? failure : "the run failed (see stderr)");
    if (extra)
        extra(f, arg);
    fputs("}\n", f);
    fflush(f);
}

const char *cli_open_failure_text(char *buf, size_t n, const char *what, int rc)
{
    char why[1024], text[1200];
    cli_last_logged_error(why, sizeof why);
    snprintf(buf, n, "cannot open the %s: %s", what, cli_error_text(text, sizeof text, rc, why));
    return buf;
}

void cli_print_open_failure(const char *cmd, const char *what, int rc)
{
    char text[1400];
    fprintf(stderr, "sharc %s: %s\n", cmd, cli_open_failure_text(text, sizeof text, what, rc));
}

int cli_open_reader(const char *cmd, const sharc_reader_settings *s, sharc_reader **r)
{
    hold_errors(1);
    int rc = sharc_reader_open(r, s);
    hold_errors(0);
    if (rc < 0)
        cli_print_open_failure(cmd, "dataset", rc);
    return rc;
}

int cli_open_loader(const char *cmd, const sharc_loader_settings *s, sharc_loader **l)
{
    hold_errors(1);
    int rc = sharc_loader_open(l, s);
    hold_errors(0);
    if (rc < 0)
        cli_print_open_failure(cmd, "loader", rc);
    return rc;
}

void cli_progress_init(cli_progress *p, int enabled)
{
    p->enabled = enabled && isatty(STDERR_FILENO);
    p->started = cli_now();
    p->last_draw = 0.0;
}

void cli_progress_update(cli_progress *p, double done, double total, const char *suffix, int force)
{
    if (!p->enabled)
        return;
    double now = cli_now();
    if (!force && now - p->last_draw < 0.1)
        return;
    p->last_draw = now;

    char bar[32 + 1];
    const int width = 32;
    double frac = total > 0 ? done / total : 0.0;
    frac = frac < 0.0 ? 0.0 : (frac > 1.0 ? 1.0 : frac);
    int fill = (int)(frac * width);
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : (total > 0 ? '.' : ' ');
    bar[width] = '\0';
    char elapsed[32];
    cli_fmt_duration(elapsed, sizeof elapsed, now - p->started);

    pthread_mutex_lock(&cli_stderr.lock);
    if (total > 0)
        fprintf(stderr, "\r\033[K[%s] %3.0f%% %s %s", bar, frac * 100.0, suffix ? suffix : "",
                elapsed);
    else
        fprintf(stderr, "\r\033[K%s %s", suffix ? suffix : "", elapsed);
    fflush(stderr);
    cli_stderr.progress_shown = 1;
    pthread_mutex_unlock(&cli_stderr.lock);
}

void cli_progress_clear(cli_progress *p)
{
    if (!p->enabled)
        return;
    pthread_mutex_lock(&cli_stderr.lock);
    erase_progress_locked();
    fflush(stderr);
    pthread_mutex_unlock(&cli_stderr.lock);
}

/* Each source's realised share: of the cuts returned, and of the seconds of audio. */
static void source_totals(const sharc_reader *r, uint64_t *cuts, double *seconds)
{
    *cuts = 0;
    *seconds = 0;
    for (size_t i = 0; i < sharc_reader_num_sources(r); i++) {
        uint64_t c;
        double sec;
        sharc_reader_source_stats(r, i, &c, &sec);
        *cuts += c;
        *seconds += sec;
    }
}

void cli_print_sources_text(FILE *f, const sharc_reader *r)
{
    size_t n = r ? sharc_reader_num_sources(r) : 0;
    uint64_t total;
    double total_s;
    if (n == 0)
        return;
    source_totals(r, &total, &total_s);
    fprintf(f, "-- %zu sources (input_cfg): cuts, seconds of audio, share of cuts against weight\n",
            n);
    for (size_t i = 0; i < n; i++) {
        uint64_t c;
        double sec;
        sharc_reader_source_stats(r, i, &c, &sec);
        fprintf(f, "--   %-28s %10" PRIu64 " cuts %12.3f s  %6.2f%% (weight %.2f%%)\n",
                sharc_reader_source_name(r, i), c, sec,
                total ? 100.0 * (double)c / (double)total : 0.0,
                100.0 * sharc_reader_source_weight(r, i));
    }
}

void cli_print_sources_json(FILE *f, const sharc_reader *r)
{
    size_t n = r ? sharc_reader_num_sources(r) : 0;
    uint64_t total;
    double total_s;
    if (n == 0)
        return;
    source_totals(r, &total, &total_s);
    cli_json_key(f, "sources", 0);
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        uint64_t c;
        double sec;
        sharc_reader_source_stats(r, i, &c, &sec);
        fputs(i ? ",{" : "{", f);
        cli_json_key(f, "name", 1);
        cli_json_str(f, sharc_reader_source_name(r, i));
        cli_json_key(f, "weight", 0);
        cli_json_num(f, sharc_reader_source_weight(r, i));
        fprintf(f, ",\"cuts\":%" PRIu64, c);
        cli_json_key(f, "audio_seconds", 0);
        cli_json_num(f, sec);
        cli_json_key(f, "share", 0);
        cli_json_num(f, total ? (double)c / (double)total : 0.0);
        cli_json_key(f, "audio_share", 0);
        cli_json_num(f, total_s > 0 ? sec / total_s : 0.0);
        fputc('}', f);
    }
    fputc(']', f);
}

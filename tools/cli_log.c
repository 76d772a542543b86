/*
 * Helpers shared by the sharc subcommands: logging, error texts, the progress line and a
 * mixture's per-source summary.
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
        cli_text_sanitize(text, 1); /* a shard's names in it do not drive the terminal */
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
        char *safe = strdup(text); /* a shard's names in it do not drive the terminal */
        if (safe != NULL)
            cli_text_sanitize(safe, 1);
        fprintf(stderr, "sharc %s: %s%s\n", cmd, prefix, safe ? safe : text);
        free(safe);
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

/*
 * Helpers shared by the sharc subcommands: option errors and values (numbers, lists, paths,
 * layouts, error policies, environment variables).
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

const char *cli_reader_layout_name(const sharc_reader *r)
{
    if (sharc_reader_num_sources(r) > 0)
        return "mixture";
    sharc_layout l = sharc_reader_layout(r);
    return l == SHARC_LAYOUT_AUTO ? NULL : cli_layout_name(l);
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

int cli_refuse_reports_over_inputs(const char *cmd, const sharc_reader_settings *s,
                                   const char *const *more, size_t n_more, const char *html,
                                   const char *json)
{
    if (html == NULL && json == NULL)
        return -1;
    if (html != NULL && json != NULL && cli_same_file(html, json))
        return cli_usage_error(cmd,
                               "--report %s and --report-json %s name the same file: each "
                               "needs a file of its own",
                               html, json);
    cli_inputs in = {0};
    int rc = s != NULL ? cli_inputs_add_reader(&in, s) : 0;
    for (size_t i = 0; rc == 0 && i < n_more; i++)
        rc = more[i] != NULL ? cli_inputs_add(&in, more[i]) : 0;
    if (rc != 0) {
        cli_inputs_free(&in);
        fprintf(stderr, "sharc %s: out of memory\n", cmd);
        return CLI_EXIT_FAIL;
    }
    const char *const outs[2] = {html, json}, *const names[2] = {"--report", "--report-json"};
    int status = -1;
    for (int k = 0; status < 0 && k < 2; k++) {
        const char *input = outs[k] != NULL ? cli_inputs_find(&in, outs[k]) : NULL;
        if (input != NULL)
            status = cli_usage_error(cmd,
                                     "%s %s would overwrite %s, an input of this run: outputs "
                                     "never replace inputs",
                                     names[k], outs[k], input);
    }
    cli_inputs_free(&in);
    return status;
}

/*
 * Table-driven options (see cli_opts.h).
 */
#include "cli_opts.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Room for the options of any command; a bigger table is a bug, reported as one. */
#define MAX_OPTS 96

/*
 * The options of `table`, groups and shared uses resolved, in table order: with `uses` 0
 * the command's own and its groups' options, with 1 the shared ones (CLI_USE, CLI_SHARED).
 * getopt's table lists the first before the second, as the commands always have: that is
 * the order in which an ambiguous abbreviation's candidates are named.
 */
static int flatten(const cli_opt *table, int uses, const cli_opt **out, size_t *n)
{
    for (const cli_opt *o = table; o->kind != CLI_OPT_END; o++) {
        const cli_opt *use = o;
        if (o->kind == CLI_OPT_TEXT || (o->kind == CLI_OPT_USE || (o->flags & CLI_SHARED)) != uses)
            continue;
        if (o->kind == CLI_OPT_GROUP) {
            if (flatten(o->group, 0, out, n) < 0)
                return -1;
            continue;
        }
        if (o->kind == CLI_OPT_USE) {
            for (use = o->group; use->kind != CLI_OPT_END; use++)
                if (use->name && strcmp(use->name, o->name) == 0)
                    break;
            if (use->kind == CLI_OPT_END)
                return -1;
        }
        if (*n == MAX_OPTS)
            return -1;
        out[(*n)++] = use;
    }
    return 0;
}

static void *target_of(const cli_parser *p, const cli_opt *o)
{
    char *base = NULL;
    switch (o->target) {
    case CLI_T_CMD:
        base = p->own;
        break;
    case CLI_T_READER:
        base = (char *)p->reader;
        break;
    case CLI_T_RO:
        base = (char *)p->ro;
        break;
    case CLI_T_DIST:
        base = (char *)p->dist;
        break;
    }
    return base ? base + o->offset : NULL;
}

/* "--name", for messages. */
static const char *flag_of(const cli_opt *o, char *buf, size_t cap)
{
    snprintf(buf, cap, "--%s", o->name);
    return buf;
}

static int parse_enum(cli_parser *p, const cli_opt *o, const char *val, const char *flag, int *out)
{
    int index = 0;
    size_t len = strlen(val);
    for (const char *c = o->choices;; index++) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == len && strncmp(c, val, len) == 0) {
            *out = o->values ? o->values[index] : index;
            return 0;
        }
        if (!bar)
            break;
        c = bar + 1;
    }
    /* "--compress wants none, gzip or zstd, not 'xz'" */
    char list[256] = "";
    size_t used = 0;
    for (const char *c = o->choices; used < sizeof list;) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        const char *sep = c == o->choices ? "" : bar ? ", " : " or ";
        int w = snprintf(list + used, sizeof list - used, "%s%.*s", sep, (int)n, c);
        used += w > 0 ? (size_t)w : 0;
        if (!bar)
            break;
        c = bar + 1;
    }
    cli_usage_error(p->cmd, "%s wants %s, not '%s'", flag, list, val);
    return -1;
}

/* Apply one option. 0, or -1 after a usage error. */
static int apply(cli_parser *p, const cli_opt *o, const char *val)
{
    char flag[80];
    flag_of(o, flag, sizeof flag);
    void *t = target_of(p, o);
    int64_t v;
    if (!t && o->kind != CLI_OPT_CUSTOM) { /* a table naming a struct its command lacks */
        cli_usage_error(p->cmd, "internal error: %s has nowhere to go", flag);
        return -1;
    }
    switch (o->kind) {
    case CLI_OPT_FLAG:
        *(int *)t = (int)o->min;
        return 0;
    case CLI_OPT_INT:
        return cli_parse_int(p->cmd, flag, val, (int)o->min, (int)o->max, (int *)t);
    case CLI_OPT_U32:
        if (cli_parse_i64(p->cmd, flag, val, o->min, o->max, &v) < 0)
            return -1;
        *(uint32_t *)t = (uint32_t)v;
        return 0;
    case CLI_OPT_U64: {
        uint64_t u;
        if (cli_parse_u64(p->cmd, flag, val, &u) < 0)
            return -1;
        if (u < (uint64_t)o->min) {
            cli_usage_error(p->cmd, "%s must be at least %" PRId64, flag, o->min);
            return -1;
        }
        *(uint64_t *)t = u;
        return 0;
    }
    case CLI_OPT_DOUBLE:
        return cli_parse_double(p->cmd, flag, val, o->dmin, o->dmax, (double *)t);
    case CLI_OPT_STRING:
        *(const char **)t = val;
        return 0;
    case CLI_OPT_ENUM:
        return parse_enum(p, o, val, flag, (int *)t);
    case CLI_OPT_CUSTOM:
        return o->handler(p, o, val, t);
    default:
        cli_usage_error(p->cmd, "internal error: %s has no kind", flag);
        return -1;
    }
}

static int takes_value(const cli_opt *o)
{
    return o->kind != CLI_OPT_FLAG && o->kind != CLI_OPT_HELP &&
           !(o->kind == CLI_OPT_CUSTOM && (o->flags & CLI_NO_VALUE));
}

/* Whether the option named `name` (length `len`) is one of the `n` options `opts` and, when
 * `seen` is given, was given. */
static int has_option(const cli_opt *const *opts, const char *seen, size_t n, const char *name,
                      size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i]->name) == len && strncmp(opts[i]->name, name, len) == 0)
            return seen == NULL || seen[i];
    return 0;
}

/* An option given without one it needs (cli_opt.needs), or with one that makes it do nothing
 * (cli_opt.conflicts), would be silently ignored: refused. */
static int check_needs(const cli_parser *p, const cli_opt *const *opts, const char *seen, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!seen[i])
            continue;
        for (const char *c = opts[i]->needs ? opts[i]->needs : ""; *c;) {
            size_t len = strcspn(c, ",");
            if (has_option(opts, NULL, n, c, len) && !has_option(opts, seen, n, c, len))
                return cli_usage_error(p->cmd, "--%s works with --%.*s, which is not given",
                                       opts[i]->name, (int)len, c);
            c += len + (c[len] == ',');
        }
        for (const char *c = opts[i]->conflicts ? opts[i]->conflicts : ""; *c;) {
            size_t len = strcspn(c, ",");
            if (has_option(opts, seen, n, c, len))
                return cli_usage_error(p->cmd,
                                       "--%s does nothing with --%.*s: give one or the other",
                                       opts[i]->name, (int)len, c);
            c += len + (c[len] == ',');
        }
    }
    return -1;
}

int cli_opts_parse(cli_parser *p)
{
    const cli_opt *opts[MAX_OPTS];
    struct option long_opts[MAX_OPTS + 1];
    char short_opts[2 * MAX_OPTS + 2] = ":";
    size_t n = 0, ns = 1;
    if (flatten(p->table, 0, opts, &n) < 0 || flatten(p->table, 1, opts, &n) < 0)
        return cli_usage_error(p->cmd, "internal error: an option table is too big or names an "
                                       "unknown shared option");
    for (size_t i = 0; i < n; i++) {
        long_opts[i] =
            (struct option){opts[i]->name, takes_value(opts[i]) ? required_argument : no_argument,
                            NULL, 256 + (int)i};
        if (opts[i]->short_name) {
            long_opts[i].val = opts[i]->short_name;
            short_opts[ns++] = opts[i]->short_name;
            if (takes_value(opts[i]))
                short_opts[ns++] = ':';
        }
    }
    long_opts[n] = (struct option){NULL, 0, NULL, 0};
    short_opts[ns] = '\0';
    char seen[MAX_OPTS] = {0};
    int code;
    while ((code = getopt_long(p->argc, p->argv, short_opts, long_opts, NULL)) != -1) {
        if (code == '?' || code == ':')
            return cli_option_error(p->cmd, code, p->argv, long_opts);
        const cli_opt *o = NULL;
        if (code >= 256 && code < 256 + (int)n) {
            o = opts[code - 256];
        } else {
            for (size_t i = 0; i < n && !o; i++)
                if (opts[i]->short_name == code)
                    o = opts[i];
        }
        if (!o)
            return cli_usage_error(p->cmd, "internal error: option %d is not handled", code);
        for (size_t i = 0; i < n; i++)
            seen[i] |= opts[i] == o;
        if (o->kind == CLI_OPT_HELP) {
            p->print_help();
            return CLI_EXIT_OK;
        }
        if (o->replaced_by)
            fprintf(stderr, "sharc %s: warning: --%s is deprecated; use --%s\n", p->cmd, o->name,
                    o->replaced_by);
        if ((o->flags & CLI_BATCH_ONLY) && !p->batch_only)
            p->batch_only = o->name;
        if ((o->flags & CLI_CUTS_ONLY) && !p->cuts_only)
            p->cuts_only = o->name;
        if (apply(p, o, takes_value(o) ? optarg : NULL) < 0)
            return CLI_EXIT_USAGE;
    }
    return check_needs(p, opts, seen, n);
}

/* The help of option `o` at the column the commands have always used. */
static void print_option(FILE *f, const cli_opt *o, const char *help, int width)
{
    char label[128];
    if (o->label)
        snprintf(label, sizeof label, "%s", o->label);
    else if (o->metavar)
        snprintf(label, sizeof label, "--%s %s", o->name, o->metavar);
    else
        snprintf(label, sizeof label, "--%s", o->name);
    size_t len = strlen(label);
    fprintf(f, "  %s%*s", label, len < (size_t)width ? width - (int)len : 2, "");
    for (const char *line = help;;) {
        const char *nl = strchr(line, '\n');
        if (!nl) {
            fprintf(f, "%s\n", line);
            break;
        }
        fprintf(f, "%.*s\n%*s", (int)(nl - line), line, width + 2, "");
        line = nl + 1;
    }
}

void cli_opts_print_at(FILE *f, const cli_opt *table, int width)
{
    for (const cli_opt *o = table; o->kind != CLI_OPT_END; o++) {
        switch (o->kind) {
        case CLI_OPT_TEXT:
            fputs(o->help, f);
            break;
        case CLI_OPT_GROUP:
            cli_opts_print_at(f, o->group, width);
            break;
        case CLI_OPT_USE: {
            const cli_opt *use = o->group;
            while (use->kind != CLI_OPT_END && !(use->name && strcmp(use->name, o->name) == 0))
                use++;
            const char *help = o->help ? o->help : use->help;
            if (use->kind != CLI_OPT_END && help)
                print_option(f, use, help, width);
            break;
        }
        default:
            if (o->help)
                print_option(f, o, o->help, width);
        }
    }
}

void cli_opts_print(FILE *f, const cli_opt *table)
{
    cli_opts_print_at(f, table, 20);
}

int cli_opt_positive_seconds(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    char *end;
    errno = 0;
    double d = strtod(val, &end);
    if (end == val || *end != '\0' || errno != 0 || !(d > 0) || d > 1e9) {
        cli_usage_error(p->cmd,
                        "invalid value '%s' for --%s (a number above 0, up to 1e+09, is expected)",
                        val, o->name);
        return -1;
    }
    *(double *)target = d;
    return 0;
}

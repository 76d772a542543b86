/*
 * The options of every subcommand as tables: one descriptor per option (long name, short
 * letter, kind of argument and where it goes, bounds, help line, handler for what the kinds
 * do not cover), from which the getopt_long() table, the parsing of values with the same
 * error messages for the same kinds, and the option list of --help are all made.
 *
 * Options shared by several commands are tables of their own (cli_reader_group: the reader
 * and sampler options; cli_dist_group: --transport, --mesh, --timeout). A command lists,
 * in the order its --help shows them, its own descriptors, CLI_USE() entries naming a
 * shared option (optionally with help of its own) and CLI_GROUP() entries taking a whole
 * group; CLI_TEXT() entries are help text between options (section headings). A flag a
 * command does not list stays unknown to getopt, so it is refused.
 *
 * A value lands in one of four targets (cli_target): the command's own options struct, the
 * reader settings, the list-valued sampler options (cli_reader_opts) or the distributed
 * options (cli_dist); `offset` is the field's offset in it.
 */
#ifndef SHARC_TOOLS_CLI_OPTS_H
#define SHARC_TOOLS_CLI_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sharc/sharc.h>

typedef enum cli_opt_kind {
    CLI_OPT_END = 0, ///< ends a table
    CLI_OPT_TEXT,    ///< no option: `help` is printed as it is (a heading, a blank line)
    CLI_OPT_HELP,    ///< -h, --help: print the command's help and exit 0
    CLI_OPT_FLAG,    ///< no value: store `min` in the int target
    CLI_OPT_INT,     ///< an int in [min, max]
    CLI_OPT_U32,     ///< a uint32_t in [min, max]
    CLI_OPT_U64,     ///< a uint64_t, at least min ("--limit must be at least 1")
    CLI_OPT_DOUBLE,  ///< a finite double in [dmin, dmax]
    CLI_OPT_STRING,  ///< the value itself (a const char * into argv)
    CLI_OPT_ENUM,    ///< one of `choices` ("none|gzip|zstd"): its index, or values[index]
    CLI_OPT_CUSTOM,  ///< `handler` parses the value (or the flag, with CLI_NO_VALUE)
    CLI_OPT_USE,     ///< the option `name` of `group`, with this entry's help when given
    CLI_OPT_GROUP,   ///< every option of `group`
} cli_opt_kind;

/** Where a value goes. */
typedef enum cli_target {
    CLI_T_CMD,    ///< the command's own options struct
    CLI_T_READER, ///< sharc_reader_settings
    CLI_T_RO,     ///< cli_reader_opts
    CLI_T_DIST,   ///< cli_dist
} cli_target;

/** Flags of a descriptor. */
enum {
    CLI_NO_VALUE = 1,   ///< a CLI_OPT_CUSTOM option that takes no value
    CLI_BATCH_ONLY = 2, ///< used by batches only: recorded in cli_parser.batch_only
    CLI_CUTS_ONLY = 4,  ///< used by single cuts only: recorded in cli_parser.cuts_only
    CLI_SHARED = 8,     ///< a shared option the command checks itself: getopt lists it
                        ///< among the CLI_USE ones (the order ambiguities are named in)
};

typedef struct cli_parser cli_parser;
typedef struct cli_opt cli_opt;

/**
 * Parse `val` (NULL for an option without a value) of option `o` into `target` (the field
 * the descriptor names). @return 0, or -1 after a usage error naming the option.
 */
typedef int (*cli_opt_handler)(cli_parser *p, const cli_opt *o, const char *val, void *target);

struct cli_opt {
    cli_opt_kind kind;
    const char *name;        ///< long name, without "--"
    char short_name;         ///< a letter, or 0
    const char *metavar;     ///< the value's name in --help ("N"), NULL for none
    const char *help;        ///< --help text; '\n' starts an indented line; NULL: not listed
    const char *label;       ///< shown instead of "--name METAVAR" in --help (may be NULL)
    cli_target target;       ///< which struct the value goes to
    size_t offset;           ///< the field's offset in it
    int64_t min, max;        ///< bounds of INT, U32, U64 (min only), the value of a FLAG
    double dmin, dmax;       ///< bounds of DOUBLE
    const char *choices;     ///< ENUM: the allowed values, separated by '|'
    const int *values;       ///< ENUM: the int stored for each choice (NULL: its index)
    cli_opt_handler handler; ///< CUSTOM
    int flags;               ///< CLI_NO_VALUE, CLI_BATCH_ONLY, CLI_CUTS_ONLY
    const cli_opt *group;    ///< USE, GROUP
    /** The option's new name: given, this one still works and warns on stderr, naming it
     *  (NULL: a current option) */
    const char *replaced_by;
    /** The options this one works with, comma-separated ("json,tokenizer"): given without
     *  one of them (and the command has it), this one would do nothing, so it is refused
     *  as a usage error naming both (NULL: none) */
    const char *needs;
    /** The options that make this one do nothing, comma-separated: given with one of them,
     *  it is refused as a usage error naming both (NULL: none) */
    const char *conflicts;
};

/* Entries of a table, so that the tables read as lists of options. */
#define CLI_TEXT(text)                                                                             \
    {                                                                                              \
        .kind = CLI_OPT_TEXT, .help = (text)                                                       \
    }
#define CLI_END                                                                                    \
    {                                                                                              \
        .kind = CLI_OPT_END                                                                        \
    }
#define CLI_HELP_OPT                                                                               \
    {                                                                                              \
        .kind = CLI_OPT_HELP, .name = "help", .short_name = 'h', .label = "-h, --help",            \
        .help = "show this help"                                                                   \
    }
/** The shared option `nm` of `grp`, with the group's help (help_ NULL) or its own. */
#define CLI_USE(grp, nm, help_)                                                                    \
    {                                                                                              \
        .kind = CLI_OPT_USE, .name = (nm), .group = (grp), .help = (help_)                         \
    }
#define CLI_GROUP(grp)                                                                             \
    {                                                                                              \
        .kind = CLI_OPT_GROUP, .group = (grp)                                                      \
    }

/** The reader and sampler options (--layout ... --max-cut-duration). */
extern const cli_opt cli_reader_group[];
/** The distributed options: --transport, --mesh, --timeout. */
extern const cli_opt cli_dist_group[];

struct cli_reader_opts;
struct cli_dist;

/** One parse of a command's argv. */
struct cli_parser {
    const char *cmd;               ///< the command, for messages ("read")
    const cli_opt *table;          ///< its options
    void (*print_help)(void);      ///< prints the whole --help
    void *own;                     ///< CLI_T_CMD
    sharc_reader_settings *reader; ///< CLI_T_READER
    struct cli_reader_opts *ro;    ///< CLI_T_RO
    struct cli_dist *dist;         ///< CLI_T_DIST
    int argc;                      ///< for handlers that take more arguments
    char **argv;                   ///< (--save-state-at STEP FILE)
    const char *batch_only;        ///< out: the first CLI_BATCH_ONLY option given
    const char *cuts_only;         ///< out: the first CLI_CUTS_ONLY option given
};

/**
 * Parse the options of p->argv (getopt_long(), from optind as it stands). Operands are
 * left from optind on.
 * @return -1 when every option was parsed, CLI_EXIT_OK after --help, CLI_EXIT_USAGE after
 *         a usage error on stderr.
 */
int cli_opts_parse(cli_parser *p);

/**
 * Print the option list of `table` for --help: "  --name META", padded to 20 columns (or
 * followed by two spaces when longer), then its help, whose further lines are indented to
 * the same column.
 */
void cli_opts_print(FILE *f, const cli_opt *table);

/** As cli_opts_print() with the labels padded to `width` columns. */
void cli_opts_print_at(FILE *f, const cli_opt *table, int width);

/** Handlers for values the plain kinds do not check as the commands always have. */
/** Seconds in (0, 1e9] ("invalid value 'x' for --max-duration (a number above 0, ...)"). */
int cli_opt_positive_seconds(cli_parser *p, const cli_opt *o, const char *val, void *target);

#endif /* SHARC_TOOLS_CLI_OPTS_H */

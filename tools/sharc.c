/*
 * sharc: one program with subcommands. This file only dispatches; each subcommand is in
 * tools/cmd_<name>.c (see cli.h for the conventions).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

/* Only the commands that were built are listed (tools/meson.build defines SHARC_HAVE_CMD_*). */
static const command commands[] = {
#if SHARC_HAVE_CMD_READ
    {"read", cmd_read, "stream batches (or cuts) as a training job would and print them"},
#endif
#if SHARC_HAVE_CMD_VALIDATE
    {"validate", cmd_validate, "read and decode every shard, report every problem"},
#endif
#if SHARC_HAVE_CMD_BUCKETS
    {"buckets", cmd_buckets, "estimate duration bucket boundaries from a dataset"},
#endif
#if SHARC_HAVE_CMD_BENCH
    {"bench", cmd_bench, "measure reading and decoding throughput"},
#endif
#if SHARC_HAVE_CMD_PACK
    {"pack", cmd_pack, "write shards (Lhotse Shar or NeMo tarred audio)"},
#endif
#if SHARC_HAVE_CMD_GEN
    {"gen", cmd_gen, "generate a synthetic corpus"},
#endif
    {NULL, NULL, NULL},
};

static void print_help(FILE *f)
{
    fprintf(f, "Usage: sharc <command> [options] [PATH...]\n"
               "       sharc --help | --version\n"
               "       sharc help <command>\n"
               "\n"
               "Stream audio shards (Lhotse Shar, NeMo tarred audio, WebDataset-style tars)\n"
               "into duration-bucketed padded batches; under mpirun, one source rank per\n"
               "data-parallel slot broadcasts them to its context/tensor-parallel peers.\n"
               "\n"
               "Commands:\n");
    for (const command *c = commands; c->name; c++)
        fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f, "\n"
               "Run 'sharc <command> --help' for the options of a command.\n"
               "\n"
               "Exit status: 0 success, 1 failure (or problems found), 2 usage error. Output\n"
               "that cannot be written (a full disk) is a failure; a pipe whose reader left\n"
               "(sharc read --json | head -1) ends sharc quietly, as SIGPIPE does (141).\n");
}

static const command *find_command(const char *name)
{
    for (const command *c = commands; c->name; c++) {
        if (strcmp(c->name, name) == 0)
            return c;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    cli_stdout_init();
    if (argc < 2) {
        print_help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        print_help(stdout);
        return cli_exit(NULL, CLI_EXIT_OK);
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("sharc %s\n", SHARC_VERSION_STRING);
        return cli_exit(NULL, CLI_EXIT_OK);
    }
    if (strcmp(name, "help") == 0) {
        if (argc < 3) {
            print_help(stdout);
            return cli_exit(NULL, CLI_EXIT_OK);
        }
        const command *c = find_command(argv[2]);
        if (c == NULL) {
            fprintf(stderr, "sharc: unknown command '%s'\nTry 'sharc --help'.\n", argv[2]);
            return CLI_EXIT_USAGE;
        }
        char help_flag[] = "--help";
        char program[64];
        snprintf(program, sizeof program, "sharc %s", c->name);
        char *help_argv[] = {program, help_flag, NULL};
        cli_getopt_reset();
        return cli_exit(c->name, c->run(2, help_argv));
    }
    const command *c = find_command(name);
    if (c == NULL) {
        fprintf(stderr, "sharc: unknown %s '%s'\nTry 'sharc --help'.\n",
                name[0] == '-' ? "option" : "command", name);
        return CLI_EXIT_USAGE;
    }
    /* getopt names the program by argv[0] in its messages: "sharc read: ...". */
    char program[64];
    snprintf(program, sizeof program, "sharc %s", c->name);
    argv[1] = program;
    cli_getopt_reset();
    /* Every command's output, --help's too, is checked once more at the end: a write that
     * failed (a full disk) is an error, and a pipe whose reader left ends the program. */
    return cli_exit(c->name, c->run(argc - 1, argv + 1));
}

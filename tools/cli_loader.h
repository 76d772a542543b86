/*
 * The distributed options shared by `sharc read` and `sharc bench`: --transport and
 * --mesh, mapped onto a sharc_mesh and a transport, and the "rank"/"source" JSON fields.
 *
 * Use: add CLI_DIST_LONG_OPTIONS to the command's getopt table, pass unknown option codes
 * to cli_dist_option(), call cli_dist_setup() after parsing (it initialises MPI for the
 * mpi and nccl transports), open the loader with the mesh and transport it filled in, and
 * cli_dist_close() at the end. Under mpirun each rank prints its own lines.
 */
#ifndef SHARC_TOOLS_CLI_LOADER_H
#define SHARC_TOOLS_CLI_LOADER_H

#include <getopt.h>
#include <stdio.h>

#include <sharc/sharc.h>

enum { CLI_OPT_TRANSPORT = 2000, CLI_OPT_MESH, CLI_OPT_TIMEOUT };

#define CLI_DIST_LONG_OPTIONS                                                                      \
    {"transport", required_argument, NULL, CLI_OPT_TRANSPORT},                                     \
        {"mesh", required_argument, NULL, CLI_OPT_MESH},                                           \
    {                                                                                              \
        "timeout", required_argument, NULL, CLI_OPT_TIMEOUT                                        \
    }

/** Lines for --help describing --transport and --mesh. */
#define CLI_DIST_HELP                                                                              \
    "  --transport T       self (default), mpi or nccl; mpi and nccl run under mpirun, one\n"      \
    "                      process per rank, the rank and size from MPI_COMM_WORLD (nccl:\n"       \
    "                      the GPU from LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK, else\n"       \
    "                      0); with self, from RANK and WORLD_SIZE when set (torchrun's\n"         \
    "                      variables; default 0 and 1), each process reading its own slot\n"       \
    "  --mesh SPEC         rank mesh, axes outermost first (\"dp=2,cp=2\"); cp and tp are\n"       \
    "                      broadcast axes: their coordinate-0 rank reads, its peers receive\n"     \
    "                      (default: dp=<world size>, every rank reads its own slot)\n"            \
    "  --timeout S         seconds a rank waits in one collective for the others before\n"         \
    "                      every rank of its group fails with a timeout (a rank that died,\n"      \
    "                      stopped or hangs); 0 waits forever (default 600)\n"

typedef struct cli_dist {
    const char *transport;    ///< "self", "mpi", "nccl"
    const char *mesh_spec;    ///< NULL: <default_axis>=<world size>
    int timeout_ms;           ///< --timeout, for the transport (default 600000)
    const char *default_axis; ///< axis of the default mesh ("dp")
    int rank, world_size;     ///< from MPI, else RANK/WORLD_SIZE (default 0 and 1)
    int mpi_initialized;      ///< cli_dist_setup called MPI_Init
    sharc_mesh mesh;          ///< filled by cli_dist_setup
    sharc_transport *t;       ///< filled by cli_dist_setup (NULL for a group of one)
    void *comm;               ///< MPI: the split communicator (owned by t)
    int reader_dp_given;      ///< --dp-rank/--dp-size given: refused with a mesh's own dp
} cli_dist;

/** Defaults: self transport, no mesh. */
void cli_dist_init(cli_dist *d);

/**
 * Handle option `opt` of getopt_long. @return 1 when handled, 0 when `opt` is not one of
 * ours, -1 after a usage error for `cmd`.
 */
int cli_dist_option(const char *cmd, cli_dist *d, int opt, const char *arg);

/** 1 when --transport or --mesh asked for more than a plain local reader. */
int cli_dist_active(const cli_dist *d);

/**
 * Initialise MPI when the transport needs it, build the mesh and the transport.
 * @return 0, or an exit status after a message on stderr
 */
int cli_dist_setup(const char *cmd, cli_dist *d);

/** Point loader settings at the mesh and transport. */
void cli_dist_apply(const cli_dist *d, sharc_loader_settings *s);

/** Write `,"rank":R,"source":true|false` for the JSON line of a loader (NULL: from the mesh). */
void cli_dist_json(FILE *f, const cli_dist *d, const sharc_loader *l);

/** After a local failure in a group run under MPI: end the whole job (MPI_Abort). */
void cli_dist_abort(cli_dist *d);

/** Close the transport and finalise MPI when setup started it. */
void cli_dist_close(cli_dist *d);

/** The raw communicator of an mpi transport (an MPI_Comm *), NULL otherwise. */
void *cli_dist_mpi_comm(const cli_dist *d);

#endif /* SHARC_TOOLS_CLI_LOADER_H */

/*
 * The distributed options shared by `sharc read` and `sharc bench`: --transport and
 * --mesh, mapped onto a sharc_mesh and a transport, and the "rank"/"source" JSON fields.
 *
 * Use: take CLI_GROUP(cli_dist_group) into the command's option table (cli_opts.h), call
 * cli_dist_setup() after parsing (it initialises MPI for the mpi and nccl transports), open the
 * loader with the mesh and transport it filled in, and cli_dist_close() at the end. Under mpirun
 * each rank prints its own lines.
 */
#ifndef SHARC_TOOLS_CLI_LOADER_H
#define SHARC_TOOLS_CLI_LOADER_H

#include <stdio.h>

#include <sharc/sharc.h>

#include "cli_opts.h"

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
    /** The reader's CUDA device (--device cuda:N), -1 for host batches: the NCCL transport
     *  is opened on it (else on the rank's LOCAL_RANK), and the MPI transport stages device
     *  tensors through it. */
    int device;
    int even_steps;        ///< --even-steps / --no-even-steps (default 1)
    sharc_transport *dp_t; ///< the sources of all slots, for even steps (NULL: none)
} cli_dist;

/** --even-steps and --no-even-steps (into the same cli_dist). */
extern const cli_opt cli_even_group[];

/** Defaults: self transport, no mesh. */
void cli_dist_init(cli_dist *d);

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

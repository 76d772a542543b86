/*
 * --transport and --mesh for the commands that open a sharc_loader (see cli_loader.h).
 */
#include "cli_loader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#if SHARC_CLI_HAVE_MPI
#include <sharc/mpi.h>
#endif

void cli_dist_init(cli_dist *d)
{
    memset(d, 0, sizeof *d);
    d->transport = "self";
    d->default_axis = "dp";
    d->world_size = 1;
    d->timeout_ms = 600000;
    d->device = -1;
    d->even_steps = 1;
}

static int opt_transport(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    if (strcmp(val, "self") != 0 && strcmp(val, "mpi") != 0 && strcmp(val, "nccl") != 0) {
        cli_usage_error(p->cmd, "--transport must be self, mpi or nccl, not '%s'", val);
        return -1;
    }
    *(const char **)target = val;
    return 0;
}

static int opt_timeout(cli_parser *p, const cli_opt *o, const char *val, void *target)
{
    char *end = NULL;
    errno = 0;
    double sec = strtod(val, &end);
    if (errno || end == val || *end || !(sec >= 0) || sec > 86400 * 7) {
        cli_usage_error(p->cmd, "--timeout must be a number of seconds from 0 to 604800, not '%s'",
                        val);
        return -1;
    }
    *(int *)target = sec > 0 && sec < 0.001 ? 1 : (int)(sec * 1000);
    return 0;
}

const cli_opt cli_dist_group[] = {
    {CLI_OPT_CUSTOM, "transport", .metavar = "T", .target = CLI_T_DIST,
     .offset = offsetof(cli_dist, transport), .handler = opt_transport,
     .help = "self (default), mpi or nccl; mpi and nccl run under mpirun, one\n"
             "process per rank, the rank and size from MPI_COMM_WORLD (nccl:\n"
             "the GPU from LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK, else\n"
             "0); with self, from RANK and WORLD_SIZE when set (torchrun's\n"
             "variables; default 0 and 1), each process reading its own slot"},
    {CLI_OPT_STRING, "mesh", .metavar = "SPEC", .target = CLI_T_DIST,
     .offset = offsetof(cli_dist, mesh_spec),
     .help = "rank mesh, axes outermost first (\"dp=2,cp=2\"); cp and tp are\n"
             "broadcast axes: their coordinate-0 rank reads, its peers receive\n"
             "(default: dp=<world size>, every rank reads its own slot)"},
    {CLI_OPT_CUSTOM, "timeout", .metavar = "S", .target = CLI_T_DIST,
     .offset = offsetof(cli_dist, timeout_ms), .handler = opt_timeout, .flags = CLI_BATCH_ONLY,
     .help = "seconds a rank waits in one collective for the others before\n"
             "every rank of its group fails with a timeout (a rank that died,\n"
             "stopped or hangs); 0 waits forever (default 600)"},
    CLI_END,
};

const cli_opt cli_even_group[] = {
    {CLI_OPT_FLAG, "even-steps", .target = CLI_T_DIST, .offset = offsetof(cli_dist, even_steps),
     .min = 1, .flags = CLI_BATCH_ONLY,
     .help = "with several data-parallel slots under mpi or nccl and a finite\n"
             "--epochs, every slot ends at the same step: the sources agree\n"
             "at every step, the stream ends when the first slot runs dry and\n"
             "the others' remaining batches are dropped and counted (default)"},
    {CLI_OPT_FLAG, "no-even-steps", .target = CLI_T_DIST, .offset = offsetof(cli_dist, even_steps),
     .min = 0, .flags = CLI_BATCH_ONLY, .help = "every data-parallel slot reads to its own end"},
    CLI_END,
};

int cli_dist_active(const cli_dist *d)
{
    return strcmp(d->transport, "self") != 0 || d->mesh_spec != NULL;
}

/* Rank and size of a process started without MPI (torchrun-style variables). */
static int env_rank(cli_dist *d)
{
    if (cli_env_int("WORLD_SIZE", 1, 1 << 20, &d->world_size) < 0 ||
        cli_env_int("RANK", 0, 1 << 20, &d->rank) < 0)
        return -1;
    return d->rank < d->world_size ? 0 : -1;
}

#if SHARC_CLI_HAVE_MPI
static const sharc_transport_settings *transport_settings(const cli_dist *d)
{
    static sharc_transport_settings ts; /* one transport per process */
    sharc_transport_default_settings(&ts);
    ts.timeout_ms = d->timeout_ms;
    return &ts;
}

static int mpi_setup(const char *cmd, cli_dist *d)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
            fprintf(stderr, "sharc %s: MPI_Init failed\n", cmd);
            return -1;
        }
        d->mpi_initialized = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world_size);
    return 0;
}

/* Even steps: the sources of all data-parallel slots agree over a transport of their own. */
static int dp_transport(cli_dist *d)
{
    if (!d->even_steps || sharc_mesh_dp_size(&d->mesh) < 2)
        return 0;
    return sharc_transport_mpi_split_dp(&d->dp_t, MPI_COMM_WORLD, &d->mesh, transport_settings(d));
}

static int mpi_transport(const char *cmd, cli_dist *d)
{
    if (strcmp(d->transport, "nccl") == 0) {
        /* The reader's device when batches are on one, so that the source broadcasts its
         * device tensors in place; else the GPU of this rank on its node. */
        int device = d->device;
        if (device < 0 && cli_env_int("LOCAL_RANK", 0, 1 << 16, &device) == 0)
            cli_env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 1 << 16, &device);
        if (device < 0)
            device = 0;
        int rc = sharc_transport_nccl_bootstrap_mpi(&d->t, MPI_COMM_WORLD, &d->mesh, device,
                                                    transport_settings(d));
        return rc < 0 ? rc : dp_transport(d);
    }
    /* The split compares every rank's mesh first, so ranks started with different --mesh
     * all fail here instead of waiting on groups that do not match. */
    int rc = sharc_transport_mpi_split(&d->t, MPI_COMM_WORLD, &d->mesh, transport_settings(d));
    if (rc == 0)
        rc = dp_transport(d);
    if (rc < 0)
        return rc;
    /* Device batches travel staged through pinned memory, onto this rank's own device. */
    if (d->device >= 0 && (rc = sharc_transport_mpi_set_device(d->t, d->device)) < 0)
        return rc;
    MPI_Comm *comm = malloc(sizeof *comm);
    if (comm == NULL)
        return SHARC_ERR(ENOMEM);
    sharc_transport_mpi_comm(d->t, comm); /* `sharc bench` times a raw MPI_Bcast on it */
    d->comm = comm;
    return 0;
}
#endif

static int dist_setup(const char *cmd, cli_dist *d)
{
    int use_mpi = strcmp(d->transport, "self") != 0;
#if SHARC_CLI_HAVE_MPI
    if (use_mpi && mpi_setup(cmd, d) < 0)
        return CLI_EXIT_FAIL;
#else
    if (use_mpi) {
        fprintf(stderr, "sharc %s: --transport %s needs sharc built with MPI\n", cmd, d->transport);
        return CLI_EXIT_FAIL;
    }
#endif
    if (!use_mpi && env_rank(d) < 0) {
        const char *rank = getenv("RANK"), *size = getenv("WORLD_SIZE");
        return cli_usage_error(cmd,
                               "RANK=%s and WORLD_SIZE=%s are not a valid rank and size (integers, "
                               "0 <= RANK < WORLD_SIZE <= %d)",
                               rank ? rank : "(unset)", size ? size : "(unset)", 1 << 20);
    }
    char spec[64];
    snprintf(spec, sizeof spec, "%s=%d", d->default_axis, d->world_size);
    if (sharc_mesh_parse(&d->mesh, d->mesh_spec ? d->mesh_spec : spec, d->rank, d->world_size) < 0)
        return cli_usage_error(cmd, "--mesh: %s", d->mesh.error);
    for (int i = 0; d->mesh_spec && d->rank == 0 && i < d->mesh.n_axes; i++)
        if (!(d->mesh.broadcast_mask & (1u << i)) && strcmp(d->mesh.names[i], "dp") != 0)
            fprintf(stderr, /* a typo of cp or tp would split the data instead */
                    "sharc %s: note: --mesh axis %s is a data-parallel axis (its ranks read "
                    "different data); only cp and tp are broadcast axes\n",
                    cmd, d->mesh.names[i]);
    if (d->reader_dp_given && sharc_mesh_dp_size(&d->mesh) > 1)
        return cli_usage_error(cmd,
                               "--dp-rank/--dp-size cannot be used when the %s gives this process "
                               "its data-parallel slot (%d of %d): give one or the other",
                               use_mpi ? "MPI world and --mesh"
                                       : (d->mesh_spec ? "--mesh" : "RANK/WORLD_SIZE environment"),
                               sharc_mesh_dp_rank(&d->mesh), sharc_mesh_dp_size(&d->mesh));
    if (!use_mpi && d->world_size > 1) /* so that a stray RANK never halves a run unnoticed */
        fprintf(stderr,
                "sharc %s: rank %d of %d (RANK and WORLD_SIZE from the environment): reading "
                "data-parallel slot %d of %d\n",
                cmd, d->rank, d->world_size, sharc_mesh_dp_rank(&d->mesh),
                sharc_mesh_dp_size(&d->mesh));
    /* A group of one needs no transport at all; under MPI it still splits, which compares
     * every rank's mesh, so that a rank started with another --mesh cannot go unnoticed. */
    if (sharc_mesh_group_size(&d->mesh) == 1 && !use_mpi)
        return 0;
    if (!use_mpi)
        return cli_usage_error(cmd,
                               "--mesh %s puts %d ranks in a broadcast group: use --transport mpi "
                               "or nccl under mpirun",
                               d->mesh_spec, sharc_mesh_group_size(&d->mesh));
    int rc = 0;
#if SHARC_CLI_HAVE_MPI
    rc = mpi_transport(cmd, d);
#endif
    if (rc < 0) {
        char why[1024];
        fprintf(stderr, "sharc %s: cannot open the %s transport: %s%s%s\n", cmd, d->transport,
                sharc_strerror(rc), cli_last_logged_error(why, sizeof why)[0] ? ": " : "", why);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

int cli_dist_setup(const char *cmd, cli_dist *d)
{
    int status = dist_setup(cmd, d);
    if (status != 0) /* an MPI rank must finalize, or mpirun takes it for a crash */
        cli_dist_close(d);
    return status;
}

void cli_dist_apply(const cli_dist *d, sharc_loader_settings *s)
{
    s->mesh = d->mesh;
    s->transport = d->t;
    s->dp_transport = d->dp_t;
    s->even_steps = d->even_steps;
}

void cli_dist_json(FILE *f, const cli_dist *d, const sharc_loader *l)
{
    int source = l != NULL ? sharc_loader_is_source(l)
                           : d->mesh.n_axes == 0 || sharc_mesh_is_source(&d->mesh);
    fprintf(f, ",\"rank\":%d,\"source\":%s", d->rank, source ? "true" : "false");
}

void *cli_dist_mpi_comm(const cli_dist *d)
{
    return d->comm;
}

void cli_dist_abort(cli_dist *d)
{
#if SHARC_CLI_HAVE_MPI
    if (d->mpi_initialized && d->world_size > 1)
        MPI_Abort(MPI_COMM_WORLD, CLI_EXIT_FAIL);
#endif
    (void)d;
}

void cli_dist_close(cli_dist *d)
{
    /* After a collective timed out, MPI_Finalize would wait for the rank that never
     * answered, forever when it is stopped or unreachable: the rank exits without it. */
    const int aborted = sharc_transport_aborted(d->t) || sharc_transport_aborted(d->dp_t);
    sharc_transport_close(&d->dp_t);
    sharc_transport_close(&d->t);
#if SHARC_CLI_HAVE_MPI
    free(d->comm); /* the transport's communicator, freed with it */
    d->comm = NULL;
    if (d->mpi_initialized && !aborted)
        MPI_Finalize();
#endif
    d->mpi_initialized = 0;
}

/*
 * sharc_transport_nccl_bootstrap_mpi when group rank 0 cannot make the NCCL unique id
 * (NCCL_COMM_ID, set on rank 0 only, is not an address, so ncclGetUniqueId fails there;
 * without a GPU it may fail anyway). Every rank must fail with SHARC_ERR_NCCL and the same
 * text naming rank 0, and none may go on to ncclCommInitRank: before the fix the others
 * took the zeroed id that rank 0 broadcast, and went on to the device (SHARC_ERR_CUDA
 * without a GPU) or to ncclCommInitRank, where on a GPU they wait for rank 0 forever (the
 * alarm turns such a wait into a failure). Needs no GPU; runs under mpirun with 2 and 4
 * ranks, and from tests/gpu/device_check.sh on a GPU machine.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_check.h"
#include "sharc/mpi.h"
#include "sharc/sharc.h"

int world_rank, world_size;

static char logged[1024];

/* Keep the last error logged: the bootstrap's reason (there is no handle to hold it). */
static void capture(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    if (level == SHARC_LOG_ERROR)
        snprintf(logged, sizeof logged, "%s", message);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    alarm(60);
    if (world_rank == 0)
        setenv("NCCL_COMM_ID", "not-an-address", 1);
    sharc_mesh mesh;
    char spec[32];
    snprintf(spec, sizeof spec, "tp=%d", world_size);
    CHECK_RC(sharc_mesh_parse(&mesh, spec, world_rank, world_size), 0);
    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.timeout_ms = 20000;
    ts.logger.callback = capture;
    ts.logger.level = SHARC_LOG_ERROR;
    sharc_transport *t = NULL;
    int rc = sharc_transport_nccl_bootstrap_mpi(&t, MPI_COMM_WORLD, &mesh, 0, &ts);
#if SHARC_TEST_HAVE_NCCL
    CHECK_RC(rc, SHARC_ERR_NCCL);
    CHECK(t == NULL);
    const char *want = "NCCL bootstrap: group rank 0 (global rank 0) could not create the NCCL "
                       "unique id: ncclGetUniqueId(&boot.id) failed: ";
    CHECK(strncmp(logged, want, strlen(want)) == 0);
    /* The same text on every rank. */
    char *all = calloc((size_t)world_size, sizeof logged);
    CHECK(all != NULL);
    MPI_Gather(logged, sizeof logged, MPI_CHAR, all, sizeof logged, MPI_CHAR, 0, MPI_COMM_WORLD);
    for (int r = 1; world_rank == 0 && r < world_size; r++)
        CHECK(strcmp(all, all + (size_t)r * sizeof logged) == 0);
    free(all);
    if (world_rank == 0)
        printf("%d ranks: %s\n", world_size, logged);
#else
    CHECK_RC(rc, SHARC_ERR_UNSUPPORTED);
    CHECK_TEXT(logged, "sharc was built without NCCL");
#endif
    MPI_Finalize();
    return 0;
}

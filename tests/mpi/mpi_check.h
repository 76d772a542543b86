/*
 * Checks for the multi-process tests: a failed check prints the rank, file and line, then
 * aborts the whole job, so that no rank is left waiting for one that stopped.
 */
#ifndef SHARC_TESTS_MPI_CHECK_H
#define SHARC_TESTS_MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "sharc/sharc.h"

extern int world_rank, world_size;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", world_rank, __FILE__, __LINE__,  \
                    #cond);                                                                        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

#define CHECK_RC(call, want)                                                                       \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != (want)) {                                                                       \
            fprintf(stderr, "rank %d: %s:%d: %s returned %d (%s), want %d\n", world_rank,          \
                    __FILE__, __LINE__, #call, rc_, sharc_err_name(rc_), (want));                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

#define CHECK_TEXT(text, want)                                                                     \
    do {                                                                                           \
        if (!strstr((text), (want))) {                                                             \
            fprintf(stderr, "rank %d: %s:%d: '%s' lacks '%s'\n", world_rank, __FILE__, __LINE__,   \
                    (text), (want));                                                               \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

#endif

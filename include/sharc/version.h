/*
 * sharc: the version this header belongs to, and that of the library a program runs with.
 */
#ifndef SHARC_VERSION_H
#define SHARC_VERSION_H

#include "sharc/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHARC_VERSION_MAJOR  0
#define SHARC_VERSION_MINOR  1
#define SHARC_VERSION_PATCH  0
#define SHARC_VERSION_STRING "0.1.0"

/** A version as one number, MAJOR * 10000 + MINOR * 100 + PATCH, ordered as versions are. */
#define SHARC_VERSION_NUMBER                                                                       \
    (SHARC_VERSION_MAJOR * 10000 + SHARC_VERSION_MINOR * 100 + SHARC_VERSION_PATCH)

/**
 * The version of the library loaded at run time, as SHARC_VERSION_NUMBER spells it; it may
 * differ from the SHARC_VERSION_NUMBER a program was compiled with. Any thread.
 */
SHARC_API unsigned sharc_version(void);

/** The version of the library loaded at run time, "MAJOR.MINOR.PATCH"; static. Any thread. */
SHARC_API const char *sharc_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_VERSION_H */

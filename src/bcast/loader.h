/*
 * The loader (public API in include/sharc/loader.h): on a broadcast group's source it
 * drives a reader (or a produce callback) and sends every batch, the end or the failure as
 * one frame through bcast.c; on peers it receives them. Everything in this module is
 * public; this header exists so that every module has its internal header.
 */
#ifndef SHARC_SRC_LOADER_H
#define SHARC_SRC_LOADER_H

#include "sharc/loader.h"

#endif /* SHARC_SRC_LOADER_H */

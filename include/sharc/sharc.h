/*
 * sharc: stream audio shards into duration-bucketed batches and broadcast them to
 * context- and tensor-parallel peers. The umbrella header: include only this one.
 */
#ifndef SHARC_SHARC_H
#define SHARC_SHARC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "sharc/version.h"
#include "sharc/common.h"
#include "sharc/reader.h"
#include "sharc/batch.h"
#include "sharc/mesh.h"
#include "sharc/transport.h"
#include "sharc/loader.h"
#include "sharc/writer.h"

#endif /* SHARC_SHARC_H */

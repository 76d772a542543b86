/*
 * The rank mesh (public API in include/sharc/mesh.h). Everything is in the public header;
 * this file exists so that every module has its internal header.
 */
#ifndef SHARC_SRC_MESH_H
#define SHARC_SRC_MESH_H

#include "sharc/mesh.h"

#endif /* SHARC_SRC_MESH_H */

/*
 * sharc: the rank mesh. A row-major grid of named axes ("dp=2,cp=2,tp=2") that says which
 * ranks share a batch (the broadcast group) and which rank reads it (the source).
 */
#ifndef SHARC_MESH_H
#define SHARC_MESH_H

#include <stddef.h>

#include "sharc/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHARC_MESH_MAX_AXES      8  ///< axes per mesh
#define SHARC_MESH_AXIS_NAME_MAX 16 ///< axis names are at most 15 bytes plus NUL

/**
 * A rank mesh: plain data, filled by sharc_mesh_init() or sharc_mesh_parse(), copied freely.
 *
 * Ranks are laid out row-major: the last axis varies fastest, so with `dp=2,cp=2` global
 * rank 1 is (dp 0, cp 1) and rank 2 is (dp 1, cp 0). The broadcast axes (default `cp` and
 * `tp`; axes absent from the mesh are ignored) span one broadcast group; the other axes
 * name the group's data-parallel slot. Within a group ranks are numbered row-major over the
 * broadcast axes; group rank 0 (coordinate 0 on every broadcast axis) is the source.
 */
typedef struct sharc_mesh {
    int n_axes;                                                ///< number of axes (1..8)
    char names[SHARC_MESH_MAX_AXES][SHARC_MESH_AXIS_NAME_MAX]; ///< axis names, outermost first
    int sizes[SHARC_MESH_MAX_AXES];                            ///< extent of each axis (>= 1)
    int coords[SHARC_MESH_MAX_AXES];                           ///< this rank's coordinates
    unsigned broadcast_mask; ///< bit i set when axis i is a broadcast axis
    int rank;                ///< this rank's global rank
    int size;                ///< product of the sizes (the world size)
    char error[160];         ///< why the last init/parse/set call failed ("" otherwise)
} sharc_mesh;

/**
 * Describe a mesh from axis names and sizes, with the default broadcast axes (cp, tp).
 * @param m       receives the mesh
 * @param n_axes  number of axes, 1..SHARC_MESH_MAX_AXES
 * @param names   axis names: non-empty, unique, [A-Za-z0-9_], shorter than 16 bytes
 * @param sizes   axis extents, each >= 1
 * @param rank    this rank's global rank, 0 <= rank < product(sizes)
 * @return 0, or SHARC_ERR(EINVAL) with the reason in m->error. Any thread.
 */
SHARC_API int sharc_mesh_init(sharc_mesh *m, int n_axes, const char *const *names, const int *sizes,
                              int rank);

/**
 * Parse a mesh spec such as "dp=2,cp=2,tp=2" (axes outermost first) for `rank` of
 * `world_size` ranks, with the default broadcast axes (cp, tp).
 * @return 0, or SHARC_ERR(EINVAL) when the spec is malformed or the product of the sizes
 *         differs from `world_size`; m->error says which. Any thread.
 */
SHARC_API int sharc_mesh_parse(sharc_mesh *m, const char *spec, int rank, int world_size);

/**
 * Choose the broadcast axes: a comma-separated list of axis names ("cp,tp"; "" for none).
 * Names absent from the mesh are ignored, as NeMo does.
 * @return 0, or SHARC_ERR(EINVAL) for a malformed list (m->error says why).
 */
SHARC_API int sharc_mesh_set_broadcast_axes(sharc_mesh *m, const char *axes);

/** This rank's coordinate on `axis`, or -1 when the mesh has no such axis. */
SHARC_API int sharc_mesh_coord(const sharc_mesh *m, const char *axis);

/**
 * 1 when this rank reads data for its group: coordinate 0 on every broadcast axis. True on
 * every rank when the broadcast axes are absent or all of size 1.
 */
SHARC_API int sharc_mesh_is_source(const sharc_mesh *m);

/** Index of this rank's data-parallel slot: row-major over the non-broadcast axes. */
SHARC_API int sharc_mesh_dp_rank(const sharc_mesh *m);

/** Number of data-parallel slots: product of the non-broadcast axis sizes. */
SHARC_API int sharc_mesh_dp_size(const sharc_mesh *m);

/** This rank's index in its broadcast group (0 on the source). */
SHARC_API int sharc_mesh_group_rank(const sharc_mesh *m);

/** Number of ranks in a broadcast group: product of the broadcast axis sizes. */
SHARC_API int sharc_mesh_group_size(const sharc_mesh *m);

/**
 * Global rank of member `group_rank` of this rank's group; member 0 is the source.
 * @return the global rank, or -1 when group_rank is out of range.
 */
SHARC_API int sharc_mesh_group_member(const sharc_mesh *m, int group_rank);

/**
 * Describe the mesh's shape, the same on every rank of a job: "dp=2,cp=2 broadcast=cp"
 * (axes outermost first, then the broadcast axes present, "-" when none). Used to check
 * that every rank was started with the same mesh. Any thread.
 * @param buf receives the text, cut to fit and NUL-terminated (cap >= 1)
 * @return the length of the full text (as snprintf)
 */
SHARC_API int sharc_mesh_format(const sharc_mesh *m, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_MESH_H */

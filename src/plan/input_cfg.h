/*
 * NeMo's `input_cfg`: a YAML (or JSON) list of data sources, each {type, weight, tags, ...},
 * with nested `group` entries, read into a flat list of sources and their effective
 * weights. Types: lhotse_shar (shar_path), nemo_tarred (manifest_filepath,
 * tarred_audio_filepaths), wds (paths) and group (input_cfg). The file is either the list
 * itself or a mapping {input_cfg: [...], reweight_temperature: T or [T per level]}.
 */
#ifndef SHARC_SRC_INPUT_CFG_H
#define SHARC_SRC_INPUT_CFG_H

#include <stddef.h>

#include "base/ctx.h"
#include "sharc/reader.h"

/** A source: one dataset of one layout. */
typedef struct sharc__input_source {
    sharc_layout layout;
    char **paths; ///< as dataset.h takes them (NeMo: the manifests, then the tar patterns)
    size_t n_paths;
    /** Tags, the source's own over its groups': column names and values (`lang` is named
     *  `language`, as the cut's own column). The strings are the config's (`tags`), shared
     *  by the sources of a group, so that a group's tags cost their size once. */
    const char **tag_names, **tag_values;
    size_t n_tags;
    char *where; ///< "input_cfg[2].input_cfg[0]", for messages
} sharc__input_source;

/** A node of the config's tree: a source or a group, with its weight as written. */
typedef struct sharc__input_node {
    int parent;     ///< index of the group, -1 at the top level
    int level;      ///< 1 at the top level
    int source;     ///< index into sources, or -1 for a group
    int has_weight; ///< every sibling has one too (checked), or none has
    double weight;  ///< as written
} sharc__input_node;

typedef struct sharc__input_cfg {
    char *name; ///< the file, as given
    size_t n_sources;
    sharc__input_source *sources;
    size_t n_nodes;
    sharc__input_node *nodes; ///< parents before their children
    int depth;                ///< levels of nesting (1: no group)
    size_t n_temperatures;    ///< 0 (none), or depth (a scalar is broadcast)
    double *temperatures;     ///< per level, from the top
    char **tags;              ///< the tag names and values the sources point to, owned
    size_t n_tags, tags_cap;
} sharc__input_cfg;

/**
 * Read and check a config file.
 * @return 0, SHARC_ERR_FORMAT with "<file>: <entry>: <what is wrong>" in ctx, errno codes
 *         for a file that cannot be read, SHARC_ERR(ENOMEM)
 */
int sharc__input_cfg_load(sharc__input_cfg *cfg, sharc__ctx *ctx, const char *path);
/** The same from text in memory, `name` naming it in messages. */
int sharc__input_cfg_parse(sharc__input_cfg *cfg, sharc__ctx *ctx, const char *name,
                           const char *text, size_t len);
void sharc__input_cfg_free(sharc__input_cfg *cfg, sharc__ctx *ctx);

/** Some level has no weights: they are its sources' cut counts (sharc__input_cfg_weights). */
int sharc__input_cfg_needs_counts(const sharc__input_cfg *cfg);

/**
 * The effective weight of each source, summing to 1, as NeMo computes it: at each level the
 * weights of siblings w_i become w_i^T / sum_j w_j^T (T the level's reweight_temperature, 1
 * without one), and a source's weight is the product of those along its path. A level
 * without weights uses its entries' cut counts (the sum over a group's sources), from
 * `counts` (one per source; NULL when no level needs them). Computed as (w_i/m)^T / sum_j
 * (w_j/m)^T, m the largest of the list, so that nothing overflows; linear in the nodes.
 * @return 0, or SHARC_ERR_FORMAT when a level's weights are all zero
 */
int sharc__input_cfg_weights(const sharc__input_cfg *cfg, sharc__ctx *ctx, const double *counts,
                             double *out);

#endif /* SHARC_SRC_INPUT_CFG_H */

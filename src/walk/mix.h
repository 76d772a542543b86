/*
 * A mixture of datasets, as Lhotse's CutSet.mux: one walk per source, and each next cut
 * drawn from a source chosen with a seeded RNG in proportion to the sources' weights. Each
 * source is an endless stream of its shards, reshuffled every pass (its walk without an
 * epoch limit), or, finite, read once, an exhausted source leaving the draw.
 *
 * At most max_open sources have a shard open: when one more is drawn, the source used
 * least recently closes its shard and re-opens it where it was when it is drawn again. The
 * draw does not depend on that budget, so neither do the batches.
 */
#ifndef SHARC_SRC_MIX_H
#define SHARC_SRC_MIX_H

#include "walk/cutsource.h"
#include "walk/walk.h"

typedef struct sharc__mix sharc__mix;

/** What the mixture is made of; the arrays are copied, what they point to outlives it. */
typedef struct sharc__mix_config {
    sharc__ctx *ctx;
    const sharc_reader_settings *s; ///< seed, plan, error policy, decode checks
    size_t n;                       ///< sources
    const sharc__dataset *const *ds;
    const double *weights;    ///< finite, >= 0, one > 0; a source of weight 0 is never drawn
    const char *const *names; ///< "input_cfg[1]", prefixed to the errors of a source
    /** Per source, the language every cut of it is given (its `lang` tag, as NeMo sets the
     *  tag on the cut), or NULL: the cut keeps its own. */
    const char *const *languages;
    /** Per source, a hash of its shards and settings, which a resume state records and
     *  checks source by source. */
    const uint64_t *hashes;
    /** Tag columns besides language, and each source's values for them: n rows of
     *  n_tag_columns, NULL where a source has no such tag. */
    size_t n_tag_columns;
    const char *const *tag_columns;
    const char *const *tag_values;
    int finite;      ///< each source read once, not repeated
    size_t max_open; ///< sources with a shard open at once (0: no bound)
    sharc_reader_stats *stats;
    sharc__fetcher *fetch;
    const sharc__tokenizer *tokenizer; ///< the cuts' tokens (NULL: none); outlives the mixture
} sharc__mix_config;

/**
 * @return 0, SHARC_ERR_FORMAT when a weight is negative or not finite, or none is above 0
 *         (the mixture could not produce a cut), errors of opening the walks
 */
int sharc__mix_open(sharc__mix **out, const sharc__mix_config *c);
void sharc__mix_close(sharc__mix **m);

/** The mixture as a cut source: its shards are every source's, one source after another. */
sharc__cutsource sharc__mix_cutsource(sharc__mix *m);

/** The source a shard index of the cut source belongs to. */
size_t sharc__mix_source_of(const sharc__mix *m, uint32_t shard);

/** The mixture's sources. */
size_t sharc__mix_n_sources(const sharc__mix *m);
/** Source i's name ("input_cfg[1]"). */
const char *sharc__mix_source_name(const sharc__mix *m, size_t i);
/** Source i's walk settings: the reader's, with the source's seed and epochs (1 finite, 0
 *  repeating). */
const sharc_reader_settings *sharc__mix_source_settings(const sharc__mix *m, size_t i);
/** Source i's shards. */
const sharc__dataset *sharc__mix_source_dataset(const sharc__mix *m, size_t i);

/** What a state's mixture section says of one source. */
typedef struct sharc__mix_saved {
    uint64_t hash;        ///< the source's hash (mix_config.hashes) in the run that saved it
    int live;             ///< still in the draw
    sharc__walk_pos pos;  ///< its walk's position (pos.in_prologue: in its prologue)
    int has_prologue;     ///< it read a prologue (an elastic resume's share of the work)
    uint64_t start_epoch; ///< the first epoch after the prologue
    size_t n_units;
    const uint8_t *unit_bytes; ///< the prologue's units, read with sharc__mix_saved_unit
} sharc__mix_saved;

/**
 * Check a state's mixture section (in[len], written for a mixture of as many sources as
 * this one) and read what it says of source `i`; the hash is not compared.
 * @return 0, or SHARC_ERR_STATE with "cannot resume: ..." naming what is wrong
 */
int sharc__mix_saved_source(sharc__mix *m, const uint8_t *in, size_t len, size_t i,
                            sharc__mix_saved *out);
/** Unit k of a saved source's prologue. */
sharc__walk_unit sharc__mix_saved_unit(const sharc__mix_saved *s, size_t k);

/** Source i reads `units` first, then its epochs from `start_epoch` (walk.h); before the
 *  first pull. */
int sharc__mix_set_prologue(sharc__mix *m, size_t i, const sharc__walk_unit *units, size_t n,
                            uint64_t start_epoch);
/** Start the draw afresh, from the reader's seed and `salt`, every source of weight above 0
 *  in it (an elastic resume: the old slots' draws are not this slot's). */
void sharc__mix_restart_draw(sharc__mix *m, uint64_t salt);

#endif /* SHARC_SRC_MIX_H */

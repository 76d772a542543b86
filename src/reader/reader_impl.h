/*
 * The reader's handle, shared by reader.c (settings, open and close, cut and batch mode),
 * reader_mix.c (a mixture of sources, input_cfg) and reader_info.c (what the reader says of
 * its plan, sources and counters). Nothing outside these files includes this header.
 */
#ifndef SHARC_SRC_READER_IMPL_H
#define SHARC_SRC_READER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "base/ctx.h"
#include "batching/pipeline.h"
#include "decode/decode.h"
#include "plan/dataset.h"
#include "plan/input_cfg.h"
#include "plan/tokenizer.h"
#include "reader/device.h"
#include "reader/noise.h"
#include "reader/reader.h"
#include "walk/cutsource.h"
#include "walk/mix.h"
#include "walk/walk.h"

struct sharc_reader {
    sharc__ctx ctx;
    sharc_reader_settings s; ///< the caller's, with its strings and arrays copied below
    char **paths;
    char *nemo_text_field, *nemo_lang_field;
    double *bins;
    uint32_t *bucket_batch_size;
    sharc_augment_settings augment; ///< the caller's, when given, with its factors copied
    double *speeds;
    double *bin_tokens, *max_tps;
    sharc__noise_stream *noise;    ///< the noise mixed in (augment.noise), or NULL
    sharc__noise_source noise_src; ///< the stream, as the pipeline's source of noise
    sharc__noise_cut *noise_held;  ///< cut mode: the noise of the last cut returned
    uint8_t *resume;
    sharc__dataset ds;
    uint64_t state_hash; ///< sharc__resume_hash, fixed once the reader is open
    sharc__walk *walk;
    /* A mixture (input_cfg): its sources' datasets, weights and the mixer, which then
     * stands for the walk. */
    char *input_cfg_path, *input_cfg_text;
    sharc__input_cfg cfg;
    sharc__dataset *mix_ds;
    double *mix_weights;
    size_t *mix_offsets; ///< of each source's shards; n_sources + 1 of them
    sharc__mix *mix;
    const char **tag_columns; ///< a mixture's tag columns besides language
    const char **tag_values;  ///< per source, its value for each column, or NULL
    size_t n_tag_columns;
    uint64_t *source_cuts; ///< cut mode: cuts of each source returned
    double *source_seconds;
    sharc__cutsource cs;   ///< the walk, or the mixer
    sharc__tokenizer *tok; ///< the cuts' tokens (tokenizer setting), or NULL
    sharc__pipeline *pipe; ///< batch mode
    /** Batch mode with device = CUDA: the stage that makes device batches of the pipeline's,
     *  and the settings the pipeline runs with (sharc__device_pipeline_settings). */
    sharc__device_stage *dev;
    sharc_reader_settings pipe_s;
    int dev_poison; ///< tests: the stage poisons its device tensors (sharc__device_stage_poison)
    sharc__fetcher fetch;     ///< the walk's and cut mode's reads of audio left in shard files
    sharc_reader_stats stats; ///< the walk's and the planner's counters
    /* Cut mode: the last cut returned. */
    float *samples;
    size_t samples_cap;      ///< in floats
    sharc__conditioner cond; ///< cut mode's resamplers
    sharc_cut cut;
    sharc_field fields[SHARC__MAX_FIELDS];
    int mode; ///< 0 unused, 1 cuts, 2 batches
    /** Batch mode: the pipeline could not start, and every call returns this. */
    int batch_failed;
};

/**
 * Open the mixture of r's input_cfg (path or text): read it, find each source's shards,
 * weigh the sources, fix r->state_hash and open the mixer, which becomes r->cs.
 * @return 0 or a negative error, its message on r's context; what was built is freed by
 *         sharc__reader_close()
 */
int sharc__reader_open_mixture(sharc_reader *r);

/**
 * The hashes a resume state of data-parallel slot dp_rank of dp_size records
 * (sharc__pipeline_config.slot_hashes; its cookie is the reader): the header's in
 * *state_hash and, for a mixture, each source's in sources[].
 */
void sharc__reader_slot_hashes(void *cookie, int dp_rank, int dp_size, uint64_t *state_hash,
                               uint64_t *sources);

#endif /* SHARC_SRC_READER_IMPL_H */

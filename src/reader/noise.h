/*
 * The noise mixed into cuts (sharc_augment_settings.noise; docs/conditioning.md): read at
 * open from the noise dataset with a cut reader of its own, in the dataset's order,
 * converted to the required rate, channel 0, until noise_max_bytes of samples are held.
 */
#ifndef SHARC_SRC_NOISE_H
#define SHARC_SRC_NOISE_H

#include <stdint.h>

#include "base/ctx.h"
#include "decode/condition.h"
#include "sharc/reader.h"

/**
 * Read the noise of the settings `s` (s->augment->n_noise > 0) into `bank`.
 * @param hash receives a hash of the noise held (its cuts' lengths), for resume states
 * @return 0, or the noise reader's error with a message in ctx that begins "noise:"
 */
int sharc__noise_load(sharc__ctx *ctx, const sharc_reader_settings *s, sharc__noise_bank *bank,
                      uint64_t *hash);

/** Free what sharc__noise_load() holds; NULL-safe for an empty bank. */
void sharc__noise_free(sharc__ctx *ctx, sharc__noise_bank *bank);

#endif /* SHARC_SRC_NOISE_H */

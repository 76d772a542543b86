/*
 * The noise mixed into cuts (sharc_augment_settings.noise; docs/conditioning.md), streamed:
 * a cut reader of its own reads the noise dataset without end (its shards shuffled anew each
 * epoch, with a seed derived from the reader's seed and data-parallel slot, so that each slot
 * walks the noise in an order of its own), converted to the required rate, channel 0,
 * on a read-ahead thread that holds at most noise_max_bytes of decoded noise. The cuts that
 * draw noise are given one, in the order they are planned, from a window at the front of the
 * stream: the noise cuts from the window's first, SHARC__NOISE_WINDOW of them at most, within
 * half of noise_max_bytes. The window
 * moves past its first cut once the cuts given noise since it became first add up to
 * SHARC__NOISE_REUSE times its length (by one cut at most per cut given noise). Which noise a cut
 * gets thus depends on the order of planning alone; the stream's position (the first cut of the
 * window, as a walk position, and what was given since) is part of the resume state.
 */
#ifndef SHARC_SRC_NOISE_H
#define SHARC_SRC_NOISE_H

#include <stdint.h>

#include "base/ctx.h"
#include "decode/condition.h"
#include "sharc/reader.h"
#include "walk/walk.h"

/** Audio given noise, in multiples of a noise cut's length, before the window moves past it:
 *  each noise cut is decoded once and serves that much, so noise costs little decoding. */
#define SHARC__NOISE_REUSE 32
/** Noise cuts in the window at most; the read-ahead holds up to twice as many. */
#define SHARC__NOISE_WINDOW 16

typedef struct sharc__noise_stream sharc__noise_stream;

/** What the stream needs of its cut reader beyond the public API (reader.c). */
typedef struct sharc__noise_hooks {
    /** The walk position after the last cut returned. */
    void (*position)(const sharc_reader *r, sharc__walk_pos *out);
    /** Read on from `pos` (a position of the same reader). */
    int (*seek)(sharc_reader *r, const sharc__walk_pos *pos);
    /** The hash of the reader's shards and settings, as a resume state has it, were its
     *  seed `seed` (the noise reader of another data-parallel slot). */
    uint64_t (*state_hash)(const sharc_reader *r, uint64_t seed);
} sharc__noise_hooks;

/**
 * Open the noise stream of the settings `s` (s->augment->n_noise > 0) and read up to its
 * first cut with audio (an open that finds none fails).
 * @return 0, or an error with a message in ctx that begins "noise:"
 */
int sharc__noise_open(sharc__noise_stream **out, sharc__ctx *ctx, const sharc_reader_settings *s,
                      const sharc__noise_hooks *hooks);

/** The hash of the noise that data-parallel slot `dp_rank` streams (that slot's
 *  sharc__noise_source.hash): old slots' states are checked with it on an elastic resume. */
uint64_t sharc__noise_slot_hash(const sharc__noise_stream *ns, int dp_rank);

/** The stream as the pipeline's source of noise. */
sharc__noise_source sharc__noise_source_of(sharc__noise_stream *ns);

/** Tests: the most bytes of decoded noise the stream held at once, and the index in the
 *  stream of the latest noise cut assigned (its first is 0), or UINT64_MAX before any. */
void sharc__noise_stream_stats(sharc__noise_stream *ns, uint64_t *held_max, uint64_t *last_index);

/** Seconds spent reading and decoding noise so far: the first cut's at open, then the
 *  read-ahead thread's, its waits for room not counted (sharc_reader_stats.noise_seconds). */
double sharc__noise_seconds(sharc__noise_stream *ns);

/** Stop the read-ahead and free the stream; the noise cuts still assigned stay valid. */
void sharc__noise_close(sharc__noise_stream **ns);

#endif /* SHARC_SRC_NOISE_H */

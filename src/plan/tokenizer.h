/*
 * SentencePiece tokenizers behind a C interface: one model, or one per language as NeMo's
 * AggregateTokenizer (the ids of each language offset by the vocabulary sizes of the models
 * before it). The only C++ in src/ is tokenizer.cc, which wraps libsentencepiece; this
 * header is C and C++.
 *
 * A tokenizer is immutable once open: sharc__tokenizer_encode() may be called from any
 * number of threads at once. libsentencepiece allocates through operator new, not through
 * the handle's allocator (the models and each call's work space).
 */
#ifndef SHARC_SRC_TOKENIZER_H
#define SHARC_SRC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

/* The base headers are C without linkage guards of their own. */
#ifdef __cplusplus
extern "C" {
#endif

#include "base/buf.h"
#include "base/ctx.h"

typedef struct sharc__tokenizer sharc__tokenizer;

/** Models of one tokenizer, at most. */
#define SHARC__TOKENIZER_MAX_MODELS 64

/**
 * Load the models of `specs` (n >= 1), each "PATH" (n must then be 1: one model for every
 * cut) or "LANG=PATH" (a model for the cuts whose language is LANG; LANG is letters, digits,
 * '_' and '-'). Errors name the setting, the model file and what libsentencepiece said.
 * @return 0, SHARC_ERR(EINVAL) for a malformed list (repeated language, a PATH among
 *         LANG=PATH), SHARC_ERR_FORMAT for a model that cannot be read or parsed,
 *         SHARC_ERR(ENOMEM). *out is NULL on failure.
 */
int sharc__tokenizer_open(sharc__ctx *ctx, const char *const *specs, size_t n,
                          sharc__tokenizer **out);

/** Free a tokenizer. NULL-safe; sets *t = NULL. */
void sharc__tokenizer_close(sharc__tokenizer **t);

/** The id that pads the tokens tensor: the first model's pad id, or 0 when it has none. */
int32_t sharc__tokenizer_pad_id(const sharc__tokenizer *t);

/** The size of the id space: the sum of the models' vocabulary sizes. */
uint32_t sharc__tokenizer_vocab_size(const sharc__tokenizer *t);

/**
 * The ids of `text` (`len` bytes, valid UTF-8) for a cut of language `lang` (NULL: none),
 * as Python sentencepiece's encode_as_ids(text), offset for its language's model; replaces
 * the contents of `ids` with int32 ids (ids->len is 4 bytes per id).
 * @return 0; SHARC_ERR_FORMAT with the reason in ctx (not naming the cut, which the caller
 *         adds) for text that is not valid UTF-8, a cut without a language or of a language
 *         without a model (with several models), or a model's failure; SHARC_ERR(ENOMEM).
 */
int sharc__tokenizer_encode(const sharc__tokenizer *t, sharc__ctx *ctx, const char *text,
                            size_t len, const char *lang, sharc__buf *ids);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_SRC_TOKENIZER_H */

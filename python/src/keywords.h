/*
 * The Python binding's keyword table entries (keywords.c) and the conversions of Python
 * values into settings' values they use (keyword_values.c), each error naming the keyword.
 */
#ifndef SHARC_PY_KEYWORDS_H
#define SHARC_PY_KEYWORDS_H

#include "sharcmodule.h"

enum kw_kind {
    KW_INT,
    KW_U32,
    KW_U64,
    KW_DOUBLE,
    KW_BOOL,
    KW_LAYOUT,
    KW_ON_ERROR,
    KW_FEATURES,
    KW_DEVICE,
    KW_BINS,
    KW_BBS,
    KW_PATH,
    KW_SPEEDS,     ///< augment.speed_perturb
    KW_VOLUME,     ///< augment.volume_perturb_db: [low, high]
    KW_AUG_DOUBLE, ///< a double of augment, at `offset` in sharc_augment_settings
    KW_TOKENIZER,
    KW_TPS,
    KW_NOISE,   ///< augment.noise: a path or a list of paths
    KW_AUG_U64, ///< a uint64_t of augment, at `offset`
    KW_FIELD,   ///< a NeMo manifest key, kept in self->nemo_fields[min]
    KW_LOG      ///< quiet (min 0) or verbose (min 1): what the library prints on stderr
};

typedef struct {
    const char *name;
    enum kw_kind kind;
    size_t offset;
    double min, max; /* inclusive range of numbers; KW_DOUBLE with min_open excludes min */
    int min_open;
} kw_def;

/** TypeError: keyword `name` must be `want` ("an int"), not v's type. Returns -1. */
int kw_error_type(const char *name, const char *want, PyObject *v);

/** An int (not a bool) in [d->min, d->max] (d->max 0: `limit`); any numbers.Integral. */
int kw_integer(const kw_def *d, PyObject *v, unsigned long long limit, unsigned long long *out);

/** 1 when `v` is a number a float setting takes (not a bool; numpy's scalars included), 0
 *  when not, -1 with an exception set. */
int is_real(PyObject *v);

/** A number (is_real) of keyword `name`, unbounded. */
int kw_number(const char *name, PyObject *v, double *out);

/** A finite number in d's range. */
int kw_double(const kw_def *d, PyObject *v, double *out);

/** A str among `choices` (NULL-terminated); *out receives its index. */
int kw_choice(const char *name, PyObject *v, const char *const *choices, int *out);

/** A non-empty sequence of numbers (d->kind KW_BINS: sorted) or of ints, into a calloc'd
 *  array of doubles or uint32_t. */
int kw_list(ReaderObject *self, const kw_def *d, PyObject *v, int ints, void **out, size_t *n_out);

/** Numbers of `v` (a number, or a sequence of `pair` numbers per item when pair is 2, of one
 *  number each when 1) into a malloc'd array: column `col` of each item. */
int kw_numbers(const kw_def *d, PyObject *v, int pair, int col, double **out, size_t *n);

#endif /* SHARC_PY_KEYWORDS_H */

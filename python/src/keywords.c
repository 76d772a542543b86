/*
 * The CReader's settings from sharc.Reader's arguments: the paths, and keywords named as the
 * CLI's options with '_' for '-', each checked against its type and range, with errors that
 * name the keyword.
 */
#include "keywords.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Reader settings from keywords: the CLI's option names with '_' for '-'.
 * ------------------------------------------------------------------------------------- */

#define R(f)  offsetof(sharc_reader_settings, f)
#define SM(f) offsetof(sharc_reader_settings, sampler.f)
#define AG(f) offsetof(sharc_augment_settings, f)
static const kw_def kw_defs[] = {
    {"layout", KW_LAYOUT, R(layout), 0, 0, 0},
    {"epochs", KW_U64, R(epochs), 0, 0, 0},
    {"seed", KW_U64, R(seed), 0, 0, 0},
    {"shuffle_shards", KW_BOOL, R(shuffle_shards), 0, 0, 0},
    {"dp_rank", KW_INT, R(dp_rank), 0, 1 << 20, 0},
    {"dp_size", KW_INT, R(dp_size), 1, 1 << 20, 0},
    {"on_error", KW_ON_ERROR, R(on_error), 0, 0, 0},
    {"sampling_rate", KW_INT, R(sampling_rate), 1, 1 << 24, 0},
    {"resample", KW_BOOL, R(resample), 0, 0, 0},
    {"speed_perturb", KW_SPEEDS, 0, 0, 3, 1},
    {"speed_perturb_prob", KW_AUG_DOUBLE, AG(speed_perturb_prob), 0, 1, 0},
    {"volume_perturb", KW_VOLUME, 0, -120, 120, 0},
    {"volume_perturb_prob", KW_AUG_DOUBLE, AG(volume_perturb_prob), 0, 1, 0},
    {"noise", KW_NOISE, 0, 0, 0, 0},
    {"noise_snr", KW_VOLUME, 0, -100, 100, 0},
    {"noise_prob", KW_AUG_DOUBLE, AG(noise_prob), 0, 1, 0},
    {"noise_max_bytes", KW_AUG_U64, AG(noise_max_bytes), 1, 0, 0},
    {"channel", KW_INT, R(channel), 0, 1 << 16, 0},
    {"threads", KW_INT, R(n_threads), 0, 4096, 0},
    {"prefetch", KW_INT, R(prefetch), 0, 1024, 0},
    {"max_held_batches", KW_INT, R(max_held_batches), 1, 1024, 0},
    {"read_ahead_bytes", KW_U64, R(read_ahead_bytes), 0, 0, 0},
    {"max_member_bytes", KW_U64, R(max_member_bytes), 1, 0, 0},
    {"batch_duration", KW_DOUBLE, SM(max_duration), 0, 1e9, 1},
    /* batch_duration's old name, which NeMo gives its cut filter: warns */
    {"max_duration", KW_DOUBLE, SM(max_duration), 0, 1e9, 1},
    {"max_cuts", KW_U32, SM(max_cuts), 1, UINT32_MAX, 0},
    {"quadratic_duration", KW_DOUBLE, SM(quadratic_duration), 0, 1e9, 1},
    {"num_buckets", KW_U32, SM(num_buckets), 1, 65536, 0},
    {"num_cuts_for_bins", KW_U32, SM(num_cuts_for_bins_estimate), 1, 1u << 24, 0},
    {"bins", KW_BINS, 0, 0, 1e9, 0},
    {"bucket_batch_size", KW_BBS, 0, 1, UINT32_MAX, 0},
    {"buffer_size", KW_U32, SM(buffer_size), 1, 1u << 24, 0},
    {"max_buffer_bytes", KW_U64, SM(max_buffer_bytes), 0, 0, 0},
    {"shuffle", KW_BOOL, SM(shuffle), 0, 0, 0},
    {"drop_last", KW_BOOL, SM(drop_last), 0, 0, 0},
    {"min_duration", KW_DOUBLE, SM(min_duration), 0, 1e9, 0},
    {"max_cut_duration", KW_DOUBLE, SM(max_cut_duration), 0, 1e9, 1},
    /* features (docs/features.md): the CLI's --features, --n-mels, --fbank-*; its
     * --no-keep-audio is keep_audio=False */
    {"features", KW_FEATURES, R(features), 0, 0, 0},
    {"n_mels", KW_INT, R(fbank_n_mels), 1, 256, 0},
    {"fbank_sample_rate", KW_INT, R(fbank_sample_rate), 1000, 384000, 0},
    {"fbank_window", KW_INT, R(fbank_window), 1, 65536, 0},
    {"fbank_hop", KW_INT, R(fbank_hop), 1, 65536, 0},
    {"fbank_n_fft", KW_INT, R(fbank_n_fft), 2, 65536, 0},
    {"fbank_pad_to", KW_INT, R(fbank_pad_to), 0, 4096, 0},
    {"fbank_preemph", KW_DOUBLE, R(fbank_preemph), 0, 0.999999, 0},
    {"fbank_dither", KW_DOUBLE, R(fbank_dither), 0, 1, 0},
    {"keep_audio", KW_BOOL, R(keep_audio), 0, 0, 0},
    {"retries", KW_U32, R(retries), 0, 1000, 0},
    {"timeout_ms", KW_U32, R(timeout_ms), 0, 86400000, 0},
    {"input_cfg", KW_PATH, R(input_cfg), 0, 0, 0},
    {"max_open_streams", KW_U32, R(max_open_streams), 0, UINT32_MAX, 0},
    {"mix_finite", KW_BOOL, R(mix_finite), 0, 0, 0},
    /* "cpu" or "cuda[:N]" (or a torch.device, by its str()): the CLI's --device */
    {"device", KW_DEVICE, R(device), 0, 0, 0},
    /* a model path, a list of "LANG=PATH", or a dict {LANG: PATH} (NeMo's
     * AggregateTokenizer): the CLI's --tokenizer, repeated */
    {"tokenizer", KW_TOKENIZER, R(tokenizer), 0, 0, 0},
    /* with a tokenizer: NeMo's token filters; max_tps a number or one per 2D bin */
    {"max_tps", KW_TPS, 0, 0, 1e9, 1},
    {"min_tps", KW_DOUBLE, SM(min_tps), 0, 1e9, 0},
    {"min_tokens", KW_U32, SM(min_tokens), 0, UINT32_MAX, 0},
    {"max_tokens", KW_U32, SM(max_tokens), 1, UINT32_MAX, 0},
    {"token_equivalent_duration", KW_DOUBLE, SM(token_equivalent_duration), 0, 1e9, 0},
    {"batch_tokens", KW_U32, SM(batch_tokens), 1, UINT32_MAX, 0},
    /* NeMo's text_field and lang_field: the manifest keys of the transcript and language */
    {"nemo_text_field", KW_FIELD, R(nemo_text_field), 0, 0, 0},
    {"nemo_lang_field", KW_FIELD, R(nemo_lang_field), 1, 0, 0},
    /* the CLI's --quiet (nothing on stderr) and --verbose (informational messages too) */
    {"quiet", KW_LOG, 0, 0, 0, 0},
    {"verbose", KW_LOG, 0, 1, 0, 0},
};
#undef R
#undef SM

/* Lhotse's and NeMo's names for keywords (docs/python.md, "Settings"), named by the error of
 * a keyword that sharc.Reader does not know. */
static const struct {
    const char *theirs, *whose, *ours;
} kw_aliases[] = {
    {"duration_bins", "Lhotse's", "bins"},
    {"bucket_duration_bins", "NeMo's", "bins"},
    {"num_cuts_for_bins_estimate", "Lhotse's and NeMo's", "num_cuts_for_bins"},
    {"bucket_buffer_size", "NeMo's", "buffer_size"},
    {"shuffle_buffer_size", "NeMo's", "buffer_size"},
    {"batch_size", "NeMo's", "max_cuts"},
    {"quadratic_factor", "NeMo's", "quadratic_duration"},
    {"rank", "Lhotse's", "dp_rank"},
    {"world_size", "Lhotse's", "dp_size"},
    {"shard_seed", "NeMo's", "seed"},
    {"sample_rate", "NeMo's", "sampling_rate"},
    {"channel_selector", "NeMo's", "channel"},
    {"perturb_speed", "NeMo's", "speed_perturb"},
    {"noise_path", "NeMo's", "noise"},
    {"noise_mix_prob", "NeMo's", "noise_prob"},
    {"text_field", "NeMo's", "nemo_text_field"},
    {"lang_field", "NeMo's", "nemo_lang_field"},
    {"num_workers", "NeMo's", "threads"},
};

/* TypeError for the keyword `key` that sharc.Reader does not know: naming the sharc keyword
 * when it is Lhotse's or NeMo's name for one, else the closest keyword
 * (difflib.get_close_matches) when one is close. */
static int kw_unknown(PyObject *key)
{
    for (size_t i = 0; i < sizeof kw_aliases / sizeof kw_aliases[0]; i++)
        if (PyUnicode_CompareWithASCIIString(key, kw_aliases[i].theirs) == 0) {
            PyErr_Format(PyExc_TypeError, "sharc.Reader: unknown keyword '%U' (%s name for %s)",
                         key, kw_aliases[i].whose, kw_aliases[i].ours);
            return -1;
        }
    const size_t n = sizeof kw_defs / sizeof kw_defs[0];
    PyObject *names = PyList_New((Py_ssize_t)n), *difflib = NULL, *close = NULL;
    for (size_t i = 0; names && i < n; i++) {
        PyObject *name = PyUnicode_FromString(kw_defs[i].name);
        if (!name) {
            Py_CLEAR(names);
            break;
        }
        PyList_SetItem(names, (Py_ssize_t)i, name);
    }
    if (names)
        difflib = PyImport_ImportModule("difflib");
    if (difflib)
        close = PyObject_CallMethod(difflib, "get_close_matches", "OOid", key, names, 1, 0.75);
    PyObject *best =
        close && PyList_Check(close) && PyList_Size(close) == 1 ? PyList_GetItem(close, 0) : NULL;
    PyErr_Clear(); /* without a suggestion, the error still names the keyword */
    if (best)
        PyErr_Format(PyExc_TypeError, "sharc.Reader: unknown keyword '%U' (did you mean %U?)", key,
                     best);
    else
        PyErr_Format(PyExc_TypeError, "sharc.Reader: unknown keyword '%U'", key);
    Py_XDECREF(close);
    Py_XDECREF(difflib);
    Py_XDECREF(names);
    return -1;
}

/* A non-empty str naming a manifest key, kept in self->nemo_fields and pointed to by the
 * settings' field at d->offset. */
static int kw_field(ReaderObject *self, const kw_def *d, PyObject *v)
{
    if (!PyUnicode_Check(v))
        return kw_error_type(d->name, "a str", v);
    PyObject *utf8 = PyUnicode_AsUTF8String(v);
    if (!utf8)
        return -1;
    char *t = NULL, who[64];
    Py_ssize_t len = 0;
    snprintf(who, sizeof who, "sharc.Reader: keyword '%s'", d->name);
    if (PyBytes_AsStringAndSize(utf8, &t, &len) < 0 || sharc__py_no_nul(t, len, who) < 0) {
        Py_DECREF(utf8);
        return -1;
    }
    char *copy = len > 0 ? strdup(t) : NULL;
    Py_DECREF(utf8);
    if (len == 0) {
        PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must not be empty", d->name);
        return -1;
    }
    if (!copy) {
        PyErr_NoMemory();
        return -1;
    }
    char **slot = &self->nemo_fields[(int)d->min];
    free(*slot);
    *slot = copy;
    *(const char **)((char *)&self->s + d->offset) = copy;
    return 0;
}

/* device="cpu" | "cuda" | "cuda:N", or any object whose str() is one (torch.device). */
static int kw_device(ReaderObject *self, const kw_def *d, PyObject *v)
{
    PyObject *text = PyObject_Str(v);
    PyObject *utf8 = text ? PyUnicode_AsUTF8String(text) : NULL;
    Py_XDECREF(text);
    if (!utf8)
        return -1;
    char *t = NULL;
    Py_ssize_t len = 0;
    if (PyBytes_AsStringAndSize(utf8, &t, &len) < 0 ||
        sharc__py_no_nul(t, len, "sharc.Reader: keyword 'device'") < 0) {
        Py_DECREF(utf8);
        return -1;
    }
    int ok = 1;
    long n = 0;
    if (ok && (strcmp(t, "cpu") == 0 || strcmp(t, "host") == 0)) {
        self->s.device = SHARC_DEVICE_HOST;
        self->s.device_ordinal = 0;
    } else if (ok && strncmp(t, "cuda", 4) == 0 && (t[4] == 0 || (t[4] == ':' && t[5]))) {
        const char *p = t + 4 + (t[4] == ':');
        for (; *p >= '0' && *p <= '9' && n <= 1000000; p++)
            n = n * 10 + (*p - '0');
        ok = *p == 0 && n <= 1000000;
        if (ok) {
            self->s.device = SHARC_DEVICE_CUDA;
            self->s.device_ordinal = (int)n;
        }
    } else {
        ok = 0;
    }
    if (!ok)
        PyErr_Format(PyExc_ValueError,
                     "sharc.Reader: keyword '%s' must be 'cpu', 'cuda' or 'cuda:N', got %R",
                     d->name, v);
    Py_DECREF(utf8);
    return ok ? 0 : -1;
}

/* The augment settings, pointed to by the settings once a perturbation keyword is met. */
static sharc_augment_settings *augment_of(ReaderObject *self)
{
    if (self->augment.struct_size == 0)
        sharc_augment_default_settings(&self->augment);
    self->s.augment = &self->augment;
    return &self->augment;
}

/* speed_perturb=[factors], volume_perturb=[low_db, high_db]. */
static int kw_augment_list(ReaderObject *self, const kw_def *d, PyObject *v)
{
    void *arr = NULL;
    size_t n = 0;
    if (kw_list(self, d, v, 0, &arr, &n) < 0)
        return -1;
    sharc_augment_settings *a = augment_of(self);
    if (d->kind == KW_SPEEDS) {
        free(self->speeds);
        self->speeds = arr;
        a->speed_perturb = self->speeds;
        a->n_speed_perturb = n;
        return 0;
    }
    const double *db = arr;
    const int snr = strcmp(d->name, "noise_snr") == 0;
    if (n != 2 || db[0] > db[1]) {
        PyErr_Format(PyExc_ValueError,
                     "sharc.Reader: keyword '%s' must be [low, high] %s in dB, low <= high",
                     d->name, snr ? "SNRs" : "gains");
        free(arr);
        return -1;
    }
    double *range = snr ? a->noise_snr_db : a->volume_perturb_db;
    range[0] = db[0];
    range[1] = db[1];
    free(arr);
    return 0;
}

void sharc__py_free_tokenizer(ReaderObject *self)
{
    for (size_t i = 0; i < self->n_tokenizer; i++)
        free(self->tokenizer[i]);
    free(self->tokenizer);
    self->tokenizer = NULL;
    self->n_tokenizer = 0;
    self->s.tokenizer = NULL;
    self->s.n_tokenizer = 0;
}

/* Add one model, `lang` (NULL: none) and the path `p`, as "LANG=PATH" or "PATH". */
static int add_model(ReaderObject *self, const kw_def *d, PyObject *lang, PyObject *p)
{
    char *path = NULL, *l = NULL, *spec = NULL;
    if (sharc__py_fs_path(p, d->name, &path) < 0 ||
        (lang && sharc__py_fs_path(lang, d->name, &l) < 0)) {
        free(path);
        return -1;
    }
    char **grown = realloc(self->tokenizer, (self->n_tokenizer + 1) * sizeof *grown);
    if (grown)
        self->tokenizer = grown;
    if (grown && (spec = malloc((l ? strlen(l) : 0) + strlen(path) + 2)))
        sprintf(spec, l ? "%s=%s" : "%s%s", l ? l : "", path);
    free(path);
    free(l);
    if (!spec) {
        PyErr_NoMemory();
        return -1;
    }
    self->tokenizer[self->n_tokenizer++] = spec;
    return 0;
}

void sharc__py_free_token_lists(ReaderObject *self)
{
    free(self->bin_tokens);
    free(self->max_tps);
    self->bin_tokens = self->max_tps = NULL;
}

/* bins=[[duration, tokens], ...]: NeMo's 2D bins (the sampler checks their order). */
static int kw_bins_2d(ReaderObject *self, const kw_def *d, PyObject *v)
{
    double *dur = NULL, *tok = NULL;
    size_t n = 0, n2 = 0;
    if (kw_numbers(d, v, 2, 0, &dur, &n) < 0 || kw_numbers(d, v, 2, 1, &tok, &n2) < 0) {
        free(dur);
        return -1;
    }
    free(self->bins);
    free(self->bin_tokens);
    self->bins = dur;
    self->bin_tokens = tok;
    self->s.sampler.bins = dur;
    self->s.sampler.bin_tokens = tok;
    self->s.sampler.n_bins = n;
    return 0;
}

static int kw_max_tps(ReaderObject *self, const kw_def *d, PyObject *v)
{
    double *x;
    size_t n;
    if (kw_numbers(d, v, 1, 0, &x, &n) < 0)
        return -1;
    free(self->max_tps);
    self->max_tps = x;
    self->s.sampler.max_tps = x;
    self->s.sampler.n_max_tps = n;
    return 0;
}

static int kw_tokenizer(ReaderObject *self, const kw_def *d, PyObject *v)
{
    sharc__py_free_tokenizer(self);
    int rc = 0;
    if (PyDict_Check(v)) {
        PyObject *k, *p;
        Py_ssize_t pos = 0;
        while (rc == 0 && PyDict_Next(v, &pos, &k, &p))
            rc = PyUnicode_Check(k) ? add_model(self, d, k, p)
                                    : kw_error_type(d->name, "a dict with str keys", k);
    } else if (PyList_Check(v) || PyTuple_Check(v)) {
        for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Size(v); i++) {
            PyObject *item = PySequence_GetItem(v, i);
            rc = item ? add_model(self, d, NULL, item) : -1;
            Py_XDECREF(item);
        }
    } else if (v != Py_None) {
        rc = add_model(self, d, NULL, v);
    }
    if (rc < 0) {
        sharc__py_free_tokenizer(self);
        return -1;
    }
    self->s.tokenizer = (const char *const *)self->tokenizer;
    self->s.n_tokenizer = self->n_tokenizer;
    return 0;
}

static int set_keyword(ReaderObject *self, const kw_def *d, PyObject *v, int *linspace)
{
    static const char *const layouts[] = {"auto", "shar", "nemo", "wds", NULL};
    static const char *const policies[] = {"fail", "skip", NULL};
    /* In the enum's order, as the CLI's --features lists them. */
    static const char *const features[] = {"none", "fbank", NULL};
    char *field = (char *)&self->s + d->offset;
    unsigned long long u;
    double x;
    int choice;
    switch (d->kind) {
    case KW_INT:
        if (kw_integer(d, v, INT32_MAX, &u) < 0)
            return -1;
        *(int *)field = (int)u;
        return 0;
    case KW_U32:
        if (kw_integer(d, v, UINT32_MAX, &u) < 0)
            return -1;
        *(uint32_t *)field = (uint32_t)u;
        return 0;
    case KW_U64:
        if (kw_integer(d, v, UINT64_MAX, &u) < 0)
            return -1;
        *(uint64_t *)field = (uint64_t)u;
        return 0;
    case KW_DOUBLE:
        if (kw_double(d, v, &x) < 0)
            return -1;
        *(double *)field = x;
        return 0;
    case KW_BOOL:
        if (!PyBool_Check(v))
            return kw_error_type(d->name, "a bool", v);
        *(int *)field = v == Py_True;
        return 0;
    case KW_LAYOUT:
        if (kw_choice(d->name, v, layouts, &choice) < 0)
            return -1;
        self->s.layout = (sharc_layout)choice;
        return 0;
    case KW_ON_ERROR:
        if (kw_choice(d->name, v, policies, &choice) < 0)
            return -1;
        self->s.on_error = (sharc_error_policy)choice;
        return 0;
    case KW_FEATURES:
        if (kw_choice(d->name, v, features, &choice) < 0)
            return -1;
        self->s.features = (sharc_features)choice;
        return 0;
    case KW_DEVICE:
        return kw_device(self, d, v);
    case KW_SPEEDS:
    case KW_VOLUME:
        return kw_augment_list(self, d, v);
    case KW_AUG_DOUBLE:
        if (kw_double(d, v, &x) < 0)
            return -1;
        *(double *)((char *)augment_of(self) + d->offset) = x;
        return 0;
    case KW_AUG_U64:
        if (kw_integer(d, v, UINT64_MAX, &u) < 0)
            return -1;
        *(uint64_t *)((char *)augment_of(self) + d->offset) = (uint64_t)u;
        return 0;
    case KW_NOISE: {
        if (sharc__py_parse_paths(&self->noise, &self->n_noise, v, d->name) < 0)
            return -1;
        sharc_augment_settings *a = augment_of(self);
        a->noise = (const char *const *)self->noise;
        a->n_noise = self->n_noise;
        return 0;
    }
    case KW_BINS: {
        if (PyUnicode_Check(v) && PyUnicode_CompareWithASCIIString(v, "linspace") == 0) {
            *linspace = 1;
            return 0;
        }
        PyObject *first = PySequence_Check(v) && !PyUnicode_Check(v) && PySequence_Size(v) > 0
                              ? PySequence_GetItem(v, 0)
                              : NULL;
        const int pairs = first && PySequence_Check(first) && !PyUnicode_Check(first);
        Py_XDECREF(first);
        PyErr_Clear();
        if (pairs)
            return kw_bins_2d(self, d, v);
        void *arr = NULL;
        size_t n = 0;
        if (kw_list(self, d, v, 0, &arr, &n) < 0)
            return -1;
        free(self->bins);
        self->bins = arr;
        self->s.sampler.bins = self->bins;
        self->s.sampler.n_bins = n;
        return 0;
    }
    case KW_BBS: {
        void *arr = NULL;
        size_t n = 0;
        if (kw_list(self, d, v, 1, &arr, &n) < 0)
            return -1;
        free(self->bbs);
        self->bbs = arr;
        self->s.sampler.bucket_batch_size = self->bbs;
        return 0;
    }
    case KW_TOKENIZER:
        return kw_tokenizer(self, d, v);
    case KW_TPS:
        return kw_max_tps(self, d, v);
    case KW_FIELD:
        return kw_field(self, d, v);
    case KW_LOG:
        if (!PyBool_Check(v))
            return kw_error_type(d->name, "a bool", v);
        if (v == Py_True && d->min == 0)
            self->log->next.callback = NULL; /* errors are still kept for the exception */
        if (v == Py_True && d->min == 1)
            self->log->next.level = self->s.logger.level = SHARC_LOG_INFO;
        return 0;
    case KW_PATH: {
        char *cfg;
        const int structure = PyList_Check(v) || PyDict_Check(v);
        if ((structure ? sharc__py_json_text(v, d->name, &cfg)
                       : sharc__py_fs_path(v, d->name, &cfg)) < 0)
            return -1;
        free(self->input_cfg);
        self->input_cfg = cfg;
        /* A list or dict is the input_cfg itself (as NeMo's config holds it inline), passed
         * as JSON text; anything else names a file. */
        self->s.input_cfg = structure ? NULL : cfg;
        self->s.input_cfg_text = structure ? cfg : NULL;
        return 0;
    }
    }
    return 0;
}

/* NeMo's bins when its config gives max_duration and no bins (as `sharc read --bins
 * linspace`): np.linspace(min_duration, max_cut_duration, num_buckets + 1)[1:-1]. */
static int linspace_bins(ReaderObject *self)
{
    const sharc_sampler_settings *st = &self->s.sampler;
    double begin = st->min_duration > 0 ? st->min_duration : 0.0, end = st->max_cut_duration;
    if (!(end > begin)) {
        PyErr_SetString(PyExc_ValueError, "sharc.Reader: keyword 'bins'='linspace' needs "
                                          "max_cut_duration (NeMo's max_duration) above "
                                          "min_duration");
        return -1;
    }
    if (st->num_buckets < 2) {
        PyErr_SetString(PyExc_ValueError,
                        "sharc.Reader: keyword 'bins'='linspace' needs num_buckets >= 2");
        return -1;
    }
    size_t n = st->num_buckets - 1;
    double *v = calloc(n, sizeof *v);
    if (!v) {
        PyErr_NoMemory();
        return -1;
    }
    const double step = (end - begin) / (double)st->num_buckets;
    for (size_t i = 0; i < n; i++)
        v[i] = (double)(i + 1) * step + begin;
    free(self->bins);
    self->bins = v;
    self->s.sampler.bins = v;
    self->s.sampler.n_bins = n;
    return 0;
}

/* The stack level, as PyErr_WarnEx counts it (1: the innermost Python frame), of the first
 * caller outside the sharc package's folder, so that a warning names the user's line however
 * deep in the package the settings were read. */
static int caller_level(void)
{
    int level = 1;
    PyObject *os_path = PyImport_ImportModule("os.path");
    PyObject *pkg = PyImport_ImportModule("sharc");
    PyObject *file = pkg ? PyObject_GetAttrString(pkg, "__file__") : NULL;
    PyObject *dir = file && os_path ? PyObject_CallMethod(os_path, "dirname", "O", file) : NULL;
    PyObject *sys = PyImport_ImportModule("sys");
    PyObject *frame = sys && dir ? PyObject_CallMethod(sys, "_getframe", NULL) : NULL;
    while (frame && frame != Py_None) {
        PyObject *code = PyObject_GetAttrString(frame, "f_code");
        PyObject *name = code ? PyObject_GetAttrString(code, "co_filename") : NULL;
        PyObject *where = name ? PyObject_CallMethod(os_path, "dirname", "O", name) : NULL;
        int inside = where ? PyObject_RichCompareBool(where, dir, Py_EQ) : -1;
        Py_XDECREF(code);
        Py_XDECREF(name);
        Py_XDECREF(where);
        if (inside != 1)
            break;
        PyObject *back = PyObject_GetAttrString(frame, "f_back");
        Py_DECREF(frame);
        frame = back;
        level++;
    }
    Py_XDECREF(frame);
    Py_XDECREF(sys);
    Py_XDECREF(dir);
    Py_XDECREF(file);
    Py_XDECREF(pkg);
    Py_XDECREF(os_path);
    PyErr_Clear(); /* a level found in part still names a line */
    return level;
}

/* max_duration= is batch_duration= under its old name, which NeMo gives its cut filter
 * (max_cut_duration here): a DeprecationWarning at the caller of sharc.Reader(), and both
 * together are an error. */
static int deprecated_batch_limit(const kw_def *d, int *seen)
{
    if (++*seen > 1) {
        PyErr_SetString(PyExc_TypeError, "sharc.Reader: give batch_duration only (max_duration "
                                         "is its deprecated name)");
        return -1;
    }
    if (strcmp(d->name, "max_duration") != 0)
        return 0;
    return PyErr_WarnEx(PyExc_DeprecationWarning,
                        "sharc.Reader: keyword 'max_duration' is deprecated; use batch_duration "
                        "(the batch limit; NeMo's max_duration is the cut filter max_cut_duration)",
                        caller_level());
}

/* ValueError for a keyword that applies only with another, given without it (noise_prob
 * without noise would draw nothing and say nothing). */
static int needs_missing_keyword(PyObject *kw)
{
    static const struct {
        const char *name, *needs, *what;
    } deps[] = {
        {"noise_snr", "noise", "the noise dataset"},
        {"noise_prob", "noise", "the noise dataset"},
        {"noise_max_bytes", "noise", "the noise dataset"},
        {"speed_perturb_prob", "speed_perturb", "the speed factors"},
        {"volume_perturb_prob", "volume_perturb", "the gain range"},
    };
    for (size_t i = 0; i < sizeof deps / sizeof deps[0]; i++) {
        PyObject *key = PyUnicode_FromString(deps[i].name);
        PyObject *need = key ? PyUnicode_FromString(deps[i].needs) : NULL;
        int given = need ? PyDict_Contains(kw, key) : -1;
        int has = given == 1 ? PyDict_Contains(kw, need) : 1;
        Py_XDECREF(key);
        Py_XDECREF(need);
        if (given < 0 || has < 0)
            return -1;
        if (!has) {
            PyErr_Format(
                PyExc_ValueError,
                "sharc.Reader: keyword '%s' applies with %s (%s): give %s too, or remove it",
                deps[i].name, deps[i].needs, deps[i].what, deps[i].needs);
            return -1;
        }
    }
    return 0;
}

int sharc__py_reader_settings(ReaderObject *self, PyObject *paths, PyObject *kw, int *open_reader)
{
    if (sharc__py_parse_paths(&self->paths, &self->n_paths, paths, "paths") < 0)
        return -1;
    self->s.paths = (const char *const *)self->paths;
    self->s.n_paths = self->n_paths;
    int linspace = 0, batch_limits = 0;
    size_t n_bbs = 0;
    if (kw) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kw, &pos, &key, &value)) {
            /* Private: the settings of a sharc.Loader, whose C loader opens the reader. */
            if (PyUnicode_CompareWithASCIIString(key, "_open") == 0) {
                if ((*open_reader = PyObject_IsTrue(value)) < 0)
                    return -1;
                continue;
            }
            const kw_def *d = NULL;
            for (size_t i = 0; i < sizeof kw_defs / sizeof kw_defs[0]; i++)
                if (PyUnicode_CompareWithASCIIString(key, kw_defs[i].name) == 0)
                    d = &kw_defs[i];
            if (!d)
                return kw_unknown(key);
            if (d->offset == offsetof(sharc_reader_settings, sampler.max_duration) &&
                d->kind == KW_DOUBLE && deprecated_batch_limit(d, &batch_limits) < 0)
                return -1;
            if (set_keyword(self, d, value, &linspace) < 0)
                return -1;
            if (d->kind == KW_BBS)
                n_bbs = (size_t)PySequence_Size(value);
        }
    }
    if (linspace && linspace_bins(self) < 0)
        return -1;
    if (kw && needs_missing_keyword(kw) < 0)
        return -1;
    if (!self->log->next.callback && self->log->next.level == SHARC_LOG_INFO) {
        PyErr_SetString(PyExc_ValueError, "sharc.Reader: give quiet or verbose, not both");
        return -1;
    }
    if (self->s.dp_rank >= self->s.dp_size) {
        PyErr_Format(PyExc_ValueError,
                     "sharc.Reader: keyword 'dp_rank' must be below dp_size (%d), got %d",
                     self->s.dp_size, self->s.dp_rank);
        return -1;
    }
    if (self->bbs && n_bbs != self->s.sampler.n_bins) {
        PyErr_Format(PyExc_ValueError,
                     "sharc.Reader: keyword 'bucket_batch_size' needs one value per bin: %zu "
                     "values for %zu bins",
                     n_bbs, self->s.sampler.n_bins);
        return -1;
    }
    if (self->n_paths == 0 && !self->input_cfg) {
        PyErr_SetString(PyExc_ValueError, "sharc.Reader: paths is empty");
        return -1;
    }
    if (self->n_paths > 0 && self->input_cfg) {
        PyErr_SetString(PyExc_ValueError,
                        "sharc.Reader: keyword 'input_cfg' reads the datasets it lists: "
                        "give no paths with it (sharc.Reader([], input_cfg=...))");
        return -1;
    }
    return 0;
}

/*
 * The SentencePiece tokenizers (tokenizer.h): libsentencepiece's processor, one per model,
 * behind the C interface. No exception leaves this file.
 *
 * Words are cached for the models whose ids of a text are those of its words one after the
 * other (split_into_words()): a transcript is cut at its spaces, and each word's ids come
 * from a bounded cache, or from libsentencepiece once.
 */
/* The C headers below use C99's restrict, which C++ spells __restrict (GCC, Clang). */
#define restrict __restrict
#include "plan/tokenizer.h"

#include <errno.h>
#include <string.h>

#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <sentencepiece_processor.h>

namespace
{

/* The word cache's shards, each with its lock, and the words each holds at most (a full
 * shard is emptied): 16 x 4096 words of a few ids, a few MiB per model at most. */
constexpr size_t kCacheShards = 16;
constexpr size_t kCacheWords = 4096;
constexpr size_t kCacheWordBytes = 64; /* longer words are encoded each time */

struct word_cache {
    std::mutex lock[kCacheShards];
    std::unordered_map<std::string, std::vector<int>> words[kCacheShards];
};

struct model {
    sentencepiece::SentencePieceProcessor sp;
    std::string lang; /* empty: the only model, for every cut */
    int32_t offset = 0;
    bool by_words = false; /* split_into_words() holds */
    mutable word_cache *cache = nullptr;
    ~model()
    {
        delete cache;
    }
};

/* Protocol buffer wire format, as much as reading a few scalar fields needs. */
struct pb_reader {
    const unsigned char *p, *end;
    bool ok = true;

    uint64_t varint()
    {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (p == end) {
                ok = false;
                return 0;
            }
            const unsigned char b = *p++;
            v |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80))
                return v;
        }
        ok = false;
        return 0;
    }

    /* The next field: its number, wire type, and (type 0) value or (type 2) bytes. */
    bool next(uint32_t &field, uint32_t &type, uint64_t &value, const unsigned char *&bytes)
    {
        if (!ok || p == end)
            return false;
        const uint64_t key = varint();
        field = (uint32_t)(key >> 3);
        type = (uint32_t)(key & 7);
        bytes = nullptr;
        switch (type) {
        case 0:
            value = varint();
            break;
        case 1:
        case 5: {
            const size_t n = type == 1 ? 8 : 4;
            if ((size_t)(end - p) < n)
                ok = false;
            else
                p += n;
            value = 0;
            break;
        }
        case 2:
            value = varint();
            if (value > (uint64_t)(end - p))
                ok = false;
            else {
                bytes = p;
                p += value;
            }
            break;
        default:
            ok = false;
        }
        return ok;
    }
};

/* Whether the model's ids for a text are the ids of its space-separated words, each encoded
 * alone, one after the other. True of a BPE model whose pieces hold U+2581 (the escaped
 * space) only at their start, with U+2581 a piece of its own, which adds a dummy prefix to the
 * text, removes extra whitespace, escapes it, and puts it before words: its merges never cross the
 * start of a word, each word is encoded as if it began the text, and the normalizer's map works one
 * code point at a time. Not of unigram models: their Viterbi search sums float scores along
 * the whole text, so a near tie between two splits of a word can go another way after the
 * score of the words before it. */
static bool split_into_words(const sentencepiece::SentencePieceProcessor &sp)
{
    const std::string proto = sp.serialized_model_proto();
    pb_reader top{(const unsigned char *)proto.data(),
                  (const unsigned char *)proto.data() + proto.size()};
    uint32_t field, type;
    uint64_t value;
    const unsigned char *bytes;
    uint64_t model_type = 1; /* UNIGRAM, the default */
    bool suffix = false, dummy_prefix = true, extra_whitespace = true, escape = true;
    while (top.next(field, type, value, bytes)) {
        if (type != 2 || (field != 2 && field != 3))
            continue;
        pb_reader sub{bytes, bytes + value};
        uint32_t f, t;
        uint64_t v;
        const unsigned char *b;
        while (sub.next(f, t, v, b)) {
            if (t != 0)
                continue;
            if (field == 2 && f == 3) /* TrainerSpec.model_type */
                model_type = v;
            else if (field == 2 && f == 24) /* TrainerSpec.treat_whitespace_as_suffix */
                suffix = v != 0;
            else if (field == 3 && f == 3) /* NormalizerSpec.add_dummy_prefix */
                dummy_prefix = v != 0;
            else if (field == 3 && f == 4) /* NormalizerSpec.remove_extra_whitespaces */
                extra_whitespace = v != 0;
            else if (field == 3 && f == 5) /* NormalizerSpec.escape_whitespaces */
                escape = v != 0;
        }
        if (!sub.ok)
            return false;
    }
    if (!top.ok || model_type != 2 || suffix || !dummy_prefix || !extra_whitespace || !escape)
        return false;
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */
    /* Without a piece of its own, a word's escaped space would be unknown, and runs of
     * unknown pieces are merged: across the words, in a whole text. */
    const int alone = sp.PieceToId(space);
    if (sp.IsUnknown(alone) || sp.IsControl(alone) || sp.IsUnused(alone))
        return false;
    for (int id = 0; id < sp.GetPieceSize(); id++) {
        const std::string &piece = sp.IdToPiece(id);
        if (piece.size() > 1 && piece.find(space, 1) != std::string::npos)
            return false;
    }
    return true;
}

/* Append to `out` the ids of the word text[0, len), from the cache or encoded now. */
static sentencepiece::util::Status encode_word(const model *m, const char *text, size_t len,
                                               std::vector<int> &out)
{
    if (len > kCacheWordBytes) {
        std::vector<int> ids;
        const auto st = m->sp.Encode(absl::string_view(text, len), &ids);
        out.insert(out.end(), ids.begin(), ids.end());
        return st;
    }
    const std::string word(text, len);
    const size_t shard = std::hash<std::string>{}(word) % kCacheShards;
    {
        std::lock_guard<std::mutex> hold(m->cache->lock[shard]);
        const auto it = m->cache->words[shard].find(word);
        if (it != m->cache->words[shard].end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return sentencepiece::util::Status();
        }
    }
    std::vector<int> ids;
    const auto st = m->sp.Encode(absl::string_view(text, len), &ids);
    if (!st.ok())
        return st;
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> hold(m->cache->lock[shard]);
    auto &words = m->cache->words[shard];
    if (words.size() >= kCacheWords)
        words.clear();
    words.emplace(word, std::move(ids));
    return sentencepiece::util::Status();
}

/* The ids of text[0, len): word by word where the model allows it, else whole. */
static sentencepiece::util::Status encode_text(const model *m, const char *text, size_t len,
                                               std::vector<int> &out)
{
    if (!m->by_words)
        return m->sp.Encode(absl::string_view(text, len), &out);
    out.clear();
    for (size_t at = 0; at < len;) {
        const char *space = (const char *)memchr(text + at, ' ', len - at);
        const size_t end = space ? (size_t)(space - text) : len;
        if (end > at) {
            const auto st = encode_word(m, text + at, end - at, out);
            if (!st.ok())
                return st;
        }
        at = end + 1;
    }
    return sentencepiece::util::Status();
}

} // namespace

struct sharc__tokenizer {
    std::vector<model *> models;
    int32_t pad_id = 0;
    uint32_t vocab = 0;
};

static bool is_lang(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Split "LANG=PATH" (LANG as is_lang) from a plain "PATH". */
static void split_spec(const char *spec, std::string &lang, const char *&path)
{
    const char *eq = strchr(spec, '=');
    lang.clear();
    path = spec;
    if (eq && is_lang(spec, (size_t)(eq - spec))) {
        lang.assign(spec, (size_t)(eq - spec));
        path = eq + 1;
    }
}

static int add_model(sharc__tokenizer *t, sharc__ctx *ctx, const char *spec, size_t n)
{
    model *m = new model;
    t->models.push_back(m);
    const char *path;
    split_spec(spec, m->lang, path);
    if (n > 1 && m->lang.empty())
        return sharc__fail(ctx, SHARC_ERR(EINVAL),
                           "tokenizer: '%s' has no language: with several models each is "
                           "LANG=PATH (as NeMo's AggregateTokenizer)",
                           spec);
    for (size_t i = 0; i + 1 < t->models.size(); i++)
        if (t->models[i]->lang == m->lang)
            return sharc__fail(ctx, SHARC_ERR(EINVAL), "tokenizer: language '%s' is given twice",
                               m->lang.c_str());
    const auto st = m->sp.Load(path);
    if (!st.ok())
        return sharc__fail(ctx, SHARC_ERR_FORMAT,
                           "tokenizer: cannot load the SentencePiece model %s: %s", path,
                           st.ToString().c_str());
    const int size = m->sp.GetPieceSize();
    if (size <= 0 || (uint64_t)t->vocab + (uint64_t)size > INT32_MAX)
        return sharc__fail(ctx, SHARC_ERR_FORMAT,
                           "tokenizer: the SentencePiece model %s has %d pieces (the models' ids "
                           "together must fit int32)",
                           path, size);
    m->offset = (int32_t)t->vocab;
    t->vocab += (uint32_t)size;
    m->by_words = split_into_words(m->sp);
    if (m->by_words)
        m->cache = new word_cache;
    return 0;
}

extern "C" int sharc__tokenizer_open(sharc__ctx *ctx, const char *const *specs, size_t n,
                                     sharc__tokenizer **out)
{
    *out = NULL;
    if (n == 0 || n > SHARC__TOKENIZER_MAX_MODELS)
        return sharc__fail(ctx, SHARC_ERR(EINVAL), "tokenizer: %zu models (1 to %d)", n,
                           SHARC__TOKENIZER_MAX_MODELS);
    sharc__tokenizer *t = NULL;
    int rc = 0;
    try {
        t = new sharc__tokenizer;
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (!specs[i] || !*specs[i])
                rc = sharc__fail(ctx, SHARC_ERR(EINVAL), "tokenizer: model %zu is empty", i);
            else
                rc = add_model(t, ctx, specs[i], n);
        }
        if (rc == 0) {
            const int pad = t->models[0]->sp.pad_id();
            t->pad_id = pad >= 0 ? pad + t->models[0]->offset : 0;
        }
    } catch (const std::bad_alloc &) {
        rc = SHARC_ERR(ENOMEM);
    } catch (const std::exception &e) {
        rc = sharc__fail(ctx, SHARC_ERR_FORMAT, "tokenizer: %s", e.what());
    }
    if (rc < 0) {
        sharc__tokenizer_close(&t);
        return rc;
    }
    *out = t;
    return 0;
}

extern "C" void sharc__tokenizer_close(sharc__tokenizer **tp)
{
    sharc__tokenizer *t = *tp;
    if (!t)
        return;
    for (model *m : t->models)
        delete m;
    delete t;
    *tp = NULL;
}

extern "C" int32_t sharc__tokenizer_pad_id(const sharc__tokenizer *t)
{
    return t->pad_id;
}

extern "C" uint32_t sharc__tokenizer_vocab_size(const sharc__tokenizer *t)
{
    return t->vocab;
}

static const model *model_for(const sharc__tokenizer *t, sharc__ctx *ctx, const char *lang)
{
    if (t->models.size() == 1 && t->models[0]->lang.empty())
        return t->models[0];
    if (!lang) {
        sharc__set_error(ctx, SHARC_ERR_FORMAT,
                         "it has no language, and the tokenizer has one model per language");
        return NULL;
    }
    for (const model *m : t->models)
        if (m->lang == lang)
            return m;
    sharc__set_error(ctx, SHARC_ERR_FORMAT, "its language '%s' has no tokenizer model", lang);
    return NULL;
}

extern "C" int sharc__tokenizer_encode(const sharc__tokenizer *t, sharc__ctx *ctx, const char *text,
                                       size_t len, const char *lang, sharc__buf *ids)
{
    const size_t bad = sharc_utf8_invalid_at(text, len);
    if (bad < len)
        return sharc__set_error(ctx, SHARC_ERR_FORMAT,
                                "its transcript is not valid UTF-8 (at byte %zu), so it cannot "
                                "be tokenized",
                                bad);
    const model *m = model_for(t, ctx, lang);
    if (!m)
        return SHARC_ERR_FORMAT;
    try {
        std::vector<int> out;
        const auto st = encode_text(m, text, len, out);
        if (!st.ok())
            return sharc__set_error(ctx, SHARC_ERR_FORMAT, "the tokenizer failed: %s",
                                    st.ToString().c_str());
        int rc = sharc__buf_reserve(ctx, ids, out.size() * sizeof(int32_t));
        if (rc < 0)
            return rc;
        int32_t *dst = (int32_t *)ids->data;
        for (size_t i = 0; i < out.size(); i++)
            dst[i] = (int32_t)out[i] + m->offset;
        ids->len = out.size() * sizeof(int32_t);
    } catch (const std::bad_alloc &) {
        return SHARC_ERR(ENOMEM);
    } catch (const std::exception &e) {
        return sharc__set_error(ctx, SHARC_ERR_FORMAT, "the tokenizer failed: %s", e.what());
    }
    return 0;
}

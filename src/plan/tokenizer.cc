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
#include <math.h>
#include <string.h>

#include <memory>
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
constexpr size_t kCacheWordBytes = 64; /* a text with a longer word is encoded whole */

/* A word's ids; for a unigram model also the score of its best split and by how much that
 * beats the second best (exact sums of the pieces' scores), or a negative margin where the
 * word must not be taken from the cache (see unigram_word()). */
struct cached_word {
    std::vector<int> ids;
    double score = 0;
    double margin = HUGE_VAL;
};

struct word_cache {
    std::mutex lock[kCacheShards];
    std::unordered_map<std::string, cached_word> words[kCacheShards];
};

enum class by_words { no, bpe, unigram };

struct model {
    sentencepiece::SentencePieceProcessor sp;
    std::string lang; /* empty: the only model, for every cut */
    int32_t offset = 0;
    by_words words = by_words::no; /* split_into_words() */
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

/* How the model's ids for a text may come from its space-separated words, each encoded
 * alone. That needs pieces that hold U+2581 (the escaped space) only at their start, U+2581
 * a piece of its own, and a model that adds a dummy prefix to the text, removes extra
 * whitespace, escapes it and puts it before words: then no piece crosses the start of a
 * word, each word is encoded as if it began the text, and the normalizer's map works one
 * code point at a time.
 * - BPE: the merges inside a word are those of the word alone, so its ids are.
 * - Unigram: the best split of the text is the best split of each word, but the Viterbi
 *   search adds float scores along the whole text, so where two splits of a word nearly tie
 *   the words before it can tip the choice; unigram_word() keeps each word's margin. */
static by_words split_into_words(const sentencepiece::SentencePieceProcessor &sp)
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
            return by_words::no;
    }
    if (!top.ok || (model_type != 1 && model_type != 2) || suffix || !dummy_prefix ||
        !extra_whitespace || !escape)
        return by_words::no;
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */
    /* Without a piece of its own, a word's escaped space would be unknown, and runs of
     * unknown pieces are merged: across the words, in a whole text. */
    const int alone = sp.PieceToId(space);
    if (sp.IsUnknown(alone) || sp.IsControl(alone) || sp.IsUnused(alone))
        return by_words::no;
    for (int id = 0; id < sp.GetPieceSize(); id++) {
        const std::string &piece = sp.IdToPiece(id);
        if (piece.size() > 1 && piece.find(space, 1) != std::string::npos)
            return by_words::no;
    }
    return model_type == 2 ? by_words::bpe : by_words::unigram;
}

/* A unigram model's word: its ids, and the margin by which their split beats the next best
 * (NBestEncode's second), both scored as exact sums of the pieces' scores. A word whose
 * split holds a piece scored otherwise in the search (unknown, bytes, user-defined symbols,
 * all of score 0 or none) gets a negative margin: never taken from the cache. */
static sentencepiece::util::Status unigram_word(const model *m, absl::string_view word,
                                                cached_word &w)
{
    std::vector<std::vector<int>> best;
    auto st = m->sp.Encode(word, &w.ids);
    if (st.ok())
        st = m->sp.NBestEncode(word, 2, &best);
    if (!st.ok())
        return st;
    double score[2] = {0, -HUGE_VAL};
    for (size_t k = 0; k < best.size() && k < 2; k++) {
        score[k] = 0;
        for (int id : best[k]) {
            const float piece = m->sp.GetScore(id);
            if (!(piece < 0) || m->sp.IsUnknown(id) || m->sp.IsByte(id)) {
                w.margin = -1;
                return st;
            }
            score[k] += piece;
        }
    }
    w.score = score[0];
    w.margin = best.empty() || best[0] != w.ids ? -1 : score[0] - score[1];
    return st;
}

/* Append the ids of the word text[0, len) to `out`, from the cache or encoded (and cached)
 * now; `score` and `margin` receive a unigram word's (cached_word). */
static sentencepiece::util::Status append_word(const model *m, const char *text, size_t len,
                                               std::vector<int> &out, double &score, double &margin)
{
    const std::string word(text, len);
    const size_t shard = std::hash<std::string>{}(word) % kCacheShards;
    {
        std::lock_guard<std::mutex> hold(m->cache->lock[shard]);
        const auto it = m->cache->words[shard].find(word);
        if (it != m->cache->words[shard].end()) {
            out.insert(out.end(), it->second.ids.begin(), it->second.ids.end());
            score = it->second.score;
            margin = it->second.margin;
            return sentencepiece::util::Status();
        }
    }
    cached_word w;
    const auto st =
        m->words == by_words::unigram ? unigram_word(m, word, w) : m->sp.Encode(word, &w.ids);
    if (!st.ok())
        return st;
    out.insert(out.end(), w.ids.begin(), w.ids.end());
    score = w.score;
    margin = w.margin;
    std::lock_guard<std::mutex> hold(m->cache->lock[shard]);
    auto &words = m->cache->words[shard];
    if (words.size() >= kCacheWords)
        words.clear();
    words.emplace(word, std::move(w));
    return st;
}

/* The ids of the whole text[0, len), in place of any in `out`. */
static sentencepiece::util::Status encode_whole(const model *m, const char *text, size_t len,
                                                std::vector<int> &out)
{
    out.clear();
    return m->sp.Encode(absl::string_view(text, len), &out);
}

/*
 * The ids of text[0, len): word by word where the model allows it, else whole. A unigram
 * word is taken from the cache only when its margin exceeds what float rounding can move
 * in the whole text's search: each path through the word adds at most len + 2 scores to
 * partial sums no larger than the text's score so far plus the word's, each sum off by at
 * most half an ulp (2^-24 of it), so two splits compared there are off by at most twice
 * that; four times that is required. Otherwise the whole text is encoded.
 */
static sentencepiece::util::Status encode_text(const model *m, const char *text, size_t len,
                                               std::vector<int> &out)
{
    if (m->words == by_words::no)
        return encode_whole(m, text, len, out);
    out.clear();
    double so_far = 0; /* minus the best split's score of the words before */
    for (size_t at = 0; at < len;) {
        const char *space = (const char *)memchr(text + at, ' ', len - at);
        const size_t end = space ? (size_t)(space - text) : len;
        const size_t n = end - at;
        if (n > kCacheWordBytes)
            return encode_whole(m, text, len, out);
        if (n > 0) {
            double score = 0, margin = HUGE_VAL;
            const auto st = append_word(m, text + at, n, out, score, margin);
            if (!st.ok())
                return st;
            so_far -= score;
            if (m->words == by_words::unigram &&
                !(margin > 8.0 * (double)(n + 2) * so_far * 0x1p-24))
                return encode_whole(m, text, len, out);
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
    std::unique_ptr<model> owned(new model);
    t->models.push_back(owned.get()); /* may throw: then `owned` frees the model */
    model *m = owned.release();
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
    m->words = split_into_words(m->sp);
    if (m->words != by_words::no)
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

/*
 * The SentencePiece tokenizers (tokenizer.h): libsentencepiece's processor, one per model,
 * behind the C interface. No exception leaves this file.
 */
/* The C headers below use C99's restrict, which C++ spells __restrict (GCC, Clang). */
#define restrict __restrict
#include "plan/tokenizer.h"

#include <errno.h>
#include <string.h>

#include <new>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

namespace
{

struct model {
    sentencepiece::SentencePieceProcessor sp;
    std::string lang; /* empty: the only model, for every cut */
    int32_t offset = 0;
};

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
        const auto st = m->sp.Encode(absl::string_view(text, len), &out);
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

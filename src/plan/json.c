#include "plan/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* cJSON allocates with malloc; documents are parsed and freed within one call, so it
 * never holds memory across calls. */

/*
 * Lhotse and NeMo read metadata files as UTF-8 text and stop at a byte Python's strict
 * decoder refuses; sharc refuses the same bytes (see common.h).
 */
size_t sharc_utf8_invalid_at(const char *text, size_t len)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        /* Metadata is mostly ASCII: skip it eight bytes at a time. */
        if (len - i >= 8) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if ((word & 0x8080808080808080u) == 0) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return i;
        }
        if (len - i < n || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t k = 2; k < n; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return i;
        i += n;
    }
    return len;
}

/*
 * Python's json module also reads NaN, Infinity and -Infinity, which its json.dumps writes
 * for float('nan') and float('inf'), so Lhotse and NeMo read manifests that hold them; cJSON
 * does not. This writes `text` to `out` (when not NULL) with each of them outside strings
 * spelled as a number that overflows to an infinity (NaN too: no value sharc reads may be
 * either), and returns the length written. `Infinity` keeps its length; `NaN` grows by two
 * bytes, so with `copy_at` set it stops there and returns the offset in `text` instead.
 */
#define OVERFLOW_INF "1e999999" /* as long as "Infinity" */
#define OVERFLOW_NAN "1e999"

static int word_byte(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
           c == '.' || c == '+' || c == '-';
}

/* The length of the constant at text[i] (outside strings) where Python's json reads one as a
 * value: after a delimiter (or `-` for -Infinity) and before one; 0 when there is none. */
static size_t constant_at(const char *text, size_t len, size_t i, const char **as)
{
    static const struct {
        const char *word, *spelled;
        size_t n;
    } constants[] = {{"Infinity", OVERFLOW_INF, 8}, {"NaN", OVERFLOW_NAN, 3}};
    for (size_t k = 0; k < 2; k++) {
        size_t n = constants[k].n;
        if (len - i < n || memcmp(text + i, constants[k].word, n) != 0)
            continue;
        char before = i ? text[i - 1] : ' ', after = i + n < len ? text[i + n] : ' ';
        int minus = before == '-' && k == 0 && (i < 2 || !word_byte(text[i - 2]));
        if ((word_byte(before) && !minus) || word_byte(after))
            return 0;
        *as = constants[k].spelled;
        return n;
    }
    return 0;
}

static size_t spell_constants(const char *text, size_t len, char *out, size_t copy_at)
{
    size_t j = 0;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        if (copy_at != SIZE_MAX && j >= copy_at)
            return i;
        const char *as = NULL;
        size_t skip = 0;
        char c = text[i];
        if (in_string) {
            if (c == '\\' && i + 1 < len) {
                if (out)
                    out[j] = c;
                j++;
                c = text[++i];
            } else if (c == '"') {
                in_string = 0;
            }
        } else if (c == '"') {
            in_string = 1;
        } else if ((c == 'I' || c == 'N') && (skip = constant_at(text, len, i, &as)) > 0) {
            size_t n = strlen(as);
            if (copy_at != SIZE_MAX && copy_at < j + n) /* a byte of the token */
                return i + (copy_at - j < skip ? copy_at - j : skip - 1);
            if (out)
                memcpy(out + j, as, n);
            j += n;
            i += skip - 1;
            continue;
        }
        if (out)
            out[j] = c;
        j++;
    }
    return copy_at != SIZE_MAX ? len : j;
}

/*
 * cJSON decodes the escape \u0000 into a NUL byte, which ends its C string: a string holding
 * one would silently lose the rest of it. Before parsing, each such escape is marked as six
 * NUL_MARK bytes (the escape's own length, so error positions stay those of the text as
 * given). No decoded string can hold that byte otherwise: the text was checked to be UTF-8,
 * and cJSON writes only UTF-8. A key holding the mark matches no key sharc reads (as in
 * Python, where "text\x00" is not "text"), and a value sharc reads that holds it is refused
 * with a message naming its field, as the cut API hands strings out NUL-terminated.
 */
#define NUL_MARK       ((char)0xFF)
#define NUL_ESCAPE_LEN 6 /* \u0000 */

/* Whether the string content t[0..n) (escapes as written, no quotes) has the escape \u0000 at
 * t[i], which the caller found to be a backslash that starts an escape. */
static int nul_escape_at(const char *t, size_t n, size_t i)
{
    return n - i >= NUL_ESCAPE_LEN && t[i + 1] == 'u' && memcmp(t + i + 2, "0000", 4) == 0;
}

/* Whether the string content t[0..n) (between its quotes) holds the escape \u0000. */
static int holds_nul_escape(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] == '\\') {
            if (nul_escape_at(t, n, i))
                return 1;
            i++; /* the escaped character */
        }
    return 0;
}

/* Mark each \u0000 escape inside the strings of s[0..n) in place (see NUL_MARK). */
static void mark_nul_escapes(char *s, size_t n)
{
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') {
            in_string = !in_string;
        } else if (in_string && s[i] == '\\') {
            if (nul_escape_at(s, n, i)) {
                memset(s + i, NUL_MARK, NUL_ESCAPE_LEN);
                i += NUL_ESCAPE_LEN - 1;
            } else {
                i++;
            }
        }
    }
}

/* Whether a decoded string holds the mark of a \u0000 escape. */
static int holds_nul(const char *s)
{
    return s && strchr(s, NUL_MARK) != NULL;
}

/* `s`, a decoded string, as it was written: each mark spelled \u0000 again (same length). */
static void unmark(const char *s, char *out, size_t cap)
{
    size_t n = strlen(s);
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n;) {
        if (s[i] == NUL_MARK && n - i >= NUL_ESCAPE_LEN) {
            memcpy(out + i, "\\u0000", NUL_ESCAPE_LEN);
            i += NUL_ESCAPE_LEN;
        } else {
            out[i] = s[i];
            i++;
        }
    }
    out[n] = 0;
}

/* The error for a string value under `key` that holds \u0000 (`what` says whose it is). */
static int nul_refused(sharc__ctx *ctx, const char *what, const char *key)
{
    return sharc__set_error(ctx, SHARC_ERR_JSON,
                            "%s\"%s\" holds the character U+0000 (\\u0000), which sharc refuses "
                            "rather than cut the string there",
                            what, key);
}

/* `text` ready for cJSON, NUL-terminated, in *n bytes: its constants spelled as numbers and
 * its \u0000 escapes marked. NULL with *n = len when it needs neither (or, with *rc =
 * SHARC_ERR(ENOMEM), when memory runs out). */
static char *prepared_copy(sharc__ctx *ctx, const char *text, size_t len, size_t *n, int *rc)
{
    *n = len;
    *rc = 0;
    int constants = memmem(text, len, "NaN", 3) || memmem(text, len, "Infinity", 8);
    int nuls = memmem(text, len, "\\u0000", NUL_ESCAPE_LEN) != NULL;
    if (!constants && !nuls)
        return NULL;
    *n = constants ? spell_constants(text, len, NULL, SIZE_MAX) : len;
    char *s = sharc__malloc(ctx, *n + 1);
    if (!s) {
        *rc = SHARC_ERR(ENOMEM);
        return NULL;
    }
    if (constants)
        spell_constants(text, len, s, SIZE_MAX);
    else
        memcpy(s, text, len);
    s[*n] = 0;
    if (nuls)
        mark_nul_escapes(s, *n);
    return s;
}

/* The whitespace JSON allows between tokens (and json.loads() after the value). */
static int is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static cJSON *parse(sharc__ctx *ctx, const char *text, size_t len, int *rc)
{
    if (!text) /* an empty member has no buffer; memmem() and the rest want one */
        text = "";
    size_t bad = sharc_utf8_invalid_at(text, len);
    if (bad < len) {
        *rc = sharc__set_error(ctx, SHARC_ERR_JSON, "invalid UTF-8 at byte %zu", bad);
        return NULL;
    }
    size_t src_len;
    char *spelled = prepared_copy(ctx, text, len, &src_len, rc);
    if (*rc < 0)
        return NULL;
    const char *src = spelled ? spelled : text;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(src, src_len, &end, 0);
    size_t at = SIZE_MAX; /* where the error is in `src`, when known */
    int trailing = 0;
    if (root) {
        /* One value per line, as json.loads() wants: anything but spaces after it is an
         * error, not ignored. */
        at = (size_t)(end - src);
        while (at < src_len && is_json_space(src[at]))
            at++;
        trailing = at < src_len;
        if (trailing) {
            cJSON_Delete(root);
            root = NULL;
        }
    } else {
        /* cJSON keeps the error position in one global for all threads, and read-ahead
         * lanes parse at the same time: use it only when it points into this text. */
        const char *err = cJSON_GetErrorPtr();
        uintptr_t lo = (uintptr_t)src, p = (uintptr_t)err;
        if (err && p >= lo && p <= lo + src_len)
            at = (size_t)(p - lo);
    }
    if (!root && spelled && at != SIZE_MAX)
        at = spell_constants(text, len, NULL, at); /* the byte in the text as given */
    sharc__free(ctx, spelled);
    if (!root) {
        if (trailing)
            *rc = sharc__set_error(ctx, SHARC_ERR_JSON,
                                   "invalid JSON near byte %zu: more after the object", at);
        else if (at != SIZE_MAX)
            *rc = sharc__set_error(ctx, SHARC_ERR_JSON, "invalid JSON near byte %zu", at);
        else
            *rc = sharc__set_error(ctx, SHARC_ERR_JSON, "invalid JSON");
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        *rc = sharc__set_error(ctx, SHARC_ERR_JSON, "expected a JSON object");
        return NULL;
    }
    *rc = 0;
    return root;
}

/* The value of `key` in object `o`: the last one when the key is repeated, as Python's
 * json module (and so Lhotse and NeMo) reads it. */
static const cJSON *member(const cJSON *o, const char *key)
{
    const cJSON *found = NULL;
    if (cJSON_IsObject(o))
        for (const cJSON *v = o->child; v; v = v->next)
            if (v->string && strcmp(v->string, key) == 0)
                found = v;
    return found;
}

static const char *get_string(const cJSON *o, const char *key)
{
    const cJSON *v = member(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int get_number(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = member(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return 0;
    *out = v->valuedouble;
    return 1;
}

/*
 * Seconds (a duration or an offset) under `key`: 1 with `*out`; 0 when absent or null (the
 * callers' defaults apply); SHARC_ERR_JSON when it is there but not a number of seconds from
 * 0 to SHARC__MAX_SECONDS (a string, a negative number), which is not taken as absent.
 */
static int get_seconds(sharc__ctx *ctx, const cJSON *o, const char *key, double *out)
{
    const cJSON *v = member(o, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return sharc__set_error(ctx, SHARC_ERR_JSON, "\"%s\" is not a number of seconds", key);
    double d = v->valuedouble;
    if (d < 0)
        return sharc__set_error(ctx, SHARC_ERR_JSON, "\"%s\" is %g s, below 0", key, d);
    if (d > SHARC__MAX_SECONDS)
        return sharc__set_error(ctx, SHARC_ERR_JSON,
                                "\"%s\" is %g s, over the %g s any audio can have", key, d,
                                SHARC__MAX_SECONDS);
    *out = d;
    return 1;
}

/* Integer metadata (rates, sample counts) must be whole numbers in a sane range. */
static int get_int64(const cJSON *o, const char *key, int64_t max, int64_t *out)
{
    double d;
    if (!get_number(o, key, &d) || d < 0 || d > (double)max || d != floor(d))
        return 0;
    *out = (int64_t)d;
    return 1;
}

static int set_opt(sharc__ctx *ctx, sharc__buf *b, int *has, const char *s)
{
    *has = s != NULL;
    return sharc__buf_set_str(ctx, b, s);
}

static int parse_supervisions(sharc__ctx *ctx, const cJSON *sups, sharc__rawcut *c)
{
    int rc = 0;
    sharc__buf_clear(&c->text);
    c->has_text = c->has_speaker = c->has_language = 0;
    if (!sups)
        return 0;
    if (!cJSON_IsArray(sups))
        return sharc__set_error(ctx, SHARC_ERR_JSON, "\"supervisions\" is not a list");
    const cJSON *s;
    cJSON_ArrayForEach(s, sups)
    {
        if (!cJSON_IsObject(s))
            return sharc__set_error(ctx, SHARC_ERR_JSON, "a supervision is not an object");
        const char *text = get_string(s, "text");
        const char *spk = get_string(s, "speaker");
        const char *lang = get_string(s, "language");
        const char *nul = holds_nul(text)   ? "text"
                          : holds_nul(spk)  ? "speaker"
                          : holds_nul(lang) ? "language"
                                            : NULL;
        if (nul)
            return nul_refused(ctx, "supervision ", nul);
        if (text) {
            if (c->has_text && (rc = sharc__buf_append(ctx, &c->text, " ", 1)) < 0)
                return rc;
            if ((rc = sharc__buf_append(ctx, &c->text, text, strlen(text))) < 0)
                return rc;
            c->has_text = 1;
        }
        if (spk && !c->has_speaker && (rc = set_opt(ctx, &c->speaker, &c->has_speaker, spk)) < 0)
            return rc;
        if (lang && !c->has_language &&
            (rc = set_opt(ctx, &c->language, &c->has_language, lang)) < 0)
            return rc;
    }
    return 0;
}

/* A NeMo row's shard_id: a whole number from 0 on, else -1 (a number that does not fit a
 * long long is not one, and converting it would be undefined). */
static long long shard_id_of(const cJSON *row)
{
    int64_t v;
    return get_int64(row, "shard_id", INT64_MAX / 2, &v) ? (long long)v : -1;
}

static int recording_fields(sharc__ctx *ctx, const cJSON *rec, sharc__rawcut *c)
{
    int64_t v;
    if (get_int64(rec, "sampling_rate", 10000000, &v)) {
        if (v == 0)
            return sharc__set_error(ctx, SHARC_ERR_JSON, "recording sampling_rate is 0");
        c->sampling_rate = (int)v;
    }
    if (get_int64(rec, "num_samples", INT64_MAX / 2, &v))
        c->num_samples = v;
    const cJSON *ch = member(rec, "channel_ids");
    if (cJSON_IsArray(ch))
        c->channels = cJSON_GetArraySize(ch);
    return 0;
}

int sharc__json_lhotse_cut(sharc__ctx *ctx, const char *line, size_t len, sharc__rawcut *c)
{
    int rc;
    cJSON *root = parse(ctx, line, len, &rc);
    if (!root)
        return rc;
    const char *id = get_string(root, "id");
    double duration = 0; /* gcc -O3 cannot tell that it is set whenever it is read */
    if (!id || !*id) {
        rc = sharc__set_error(ctx, SHARC_ERR_JSON,
                              member(root, "id") ? "cut's \"id\" is not a non-empty string"
                                                 : "cut has no \"id\"");
        goto done;
    }
    if (holds_nul(id)) {
        char shown[256];
        unmark(id, shown, sizeof shown);
        char what[300];
        snprintf(what, sizeof what, "cut %s: ", shown);
        rc = nul_refused(ctx, what, "id");
        goto done;
    }
    if ((rc = sharc__buf_set_str(ctx, &c->id, id)) < 0)
        goto done;
    if ((rc = get_seconds(ctx, root, "duration", &duration)) <= 0) {
        if (rc == 0)
            rc = sharc__set_error(ctx, SHARC_ERR_JSON, "cut %s has no \"duration\"", id);
        else
            sharc__wrap_error(ctx, rc, "cut %s", id);
        goto done;
    }
    c->duration = duration;
    /* Lhotse's SharWriter stores each cut's own audio and writes start 0. A cut that starts
     * elsewhere in its recording would need the recording cut, which sharc does not do. */
    const cJSON *start = member(root, "start");
    int start_number = cJSON_IsNumber(start) && isfinite(start->valuedouble);
    if (start && !cJSON_IsNull(start) && !(start_number && start->valuedouble == 0)) {
        char value[64] = "a value that is not a finite number";
        if (start_number)
            snprintf(value, sizeof value, "%g", start->valuedouble);
        rc = sharc__set_error(ctx, SHARC_ERR_JSON,
                              "cut %s has \"start\" %s: Shar cuts start at 0 (Lhotse stores "
                              "each cut's own audio), and sharc does not cut recordings by start",
                              id, value);
        goto done;
    }
    const char *type = get_string(root, "type");
    if (holds_nul(type)) {
        rc = nul_refused(ctx, "", "type");
        sharc__wrap_error(ctx, rc, "cut %s", id);
        goto done;
    }
    if (type && strcmp(type, "MonoCut") != 0 && strcmp(type, "MultiCut") != 0 &&
        strcmp(type, "Cut") != 0) {
        rc = sharc__set_error(ctx, SHARC_ERR_JSON, "cut %s has unsupported type %s", id, type);
        goto done;
    }
    if ((rc = parse_supervisions(ctx, member(root, "supervisions"), c)) < 0)
        goto done;
    const cJSON *rec = member(root, "recording");
    if (cJSON_IsObject(rec) && (rc = recording_fields(ctx, rec, c)) < 0)
        goto done;
    rc = sharc__buf_set(ctx, &c->json, line, len);
done:
    cJSON_Delete(root);
    return rc;
}

int sharc__json_lhotse_recording(sharc__ctx *ctx, const char *text, size_t len, sharc__rawcut *c)
{
    int rc;
    cJSON *root = parse(ctx, text, len, &rc);
    if (!root)
        return rc;
    rc = recording_fields(ctx, root, c);
    cJSON_Delete(root);
    return rc;
}

static size_t skip_space(const char *t, size_t len, size_t i)
{
    while (i < len && is_json_space(t[i]))
        i++;
    return i;
}

/* The index after the JSON string that opens at t[i]. */
static size_t skip_string(const char *t, size_t len, size_t i)
{
    for (i++; i < len; i++) {
        if (t[i] == '\\')
            i++;
        else if (t[i] == '"')
            return i + 1;
    }
    return len;
}

/* Whether the raw key t[0..n) (between its quotes, escapes as written) is `key`. */
static int key_is(const char *t, size_t n, const char *key)
{
    if (!memchr(t, '\\', n))
        return strlen(key) == n && memcmp(t, key, n) == 0;
    if (holds_nul_escape(t, n)) /* no key sharc asks for holds U+0000 */
        return 0;
    char quoted[256];
    if (n + 3 > sizeof quoted)
        return 0;
    quoted[0] = '"';
    memcpy(quoted + 1, t, n);
    memcpy(quoted + 1 + n, "\"", 2);
    cJSON *k = cJSON_ParseWithLength(quoted, n + 2);
    int same = cJSON_IsString(k) && strcmp(k->valuestring, key) == 0;
    cJSON_Delete(k);
    return same;
}

/*
 * The value of `key` in the JSON object `t` as it is written there (the last one when the key
 * repeats, as member() takes it): 1 with its span. `t` has parsed as an object already.
 */
static int raw_member(const char *t, size_t len, const char *key, size_t *at, size_t *n)
{
    int found = 0;
    size_t i = skip_space(t, len, 0);
    if (i >= len || t[i] != '{')
        return 0;
    i = skip_space(t, len, i + 1);
    while (i < len && t[i] == '"') {
        size_t k1 = skip_string(t, len, i);
        int match = k1 > i + 1 && key_is(t + i + 1, k1 - i - 2, key);
        i = skip_space(t, len, k1);
        if (i >= len || t[i] != ':')
            break;
        size_t v0 = i = skip_space(t, len, i + 1);
        for (int depth = 0; i < len; i++) {
            char c = t[i];
            if (c == '"')
                i = skip_string(t, len, i) - 1;
            else if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && depth-- == 0)
                break;
            else if (c == ',' && depth == 0)
                break;
        }
        size_t v1 = i;
        while (v1 > v0 && is_json_space(t[v1 - 1]))
            v1--;
        if (match) {
            *at = v0;
            *n = v1 - v0;
            found = 1;
        }
        if (i >= len || t[i] != ',')
            break;
        i = skip_space(t, len, i + 1);
    }
    return found;
}

int sharc__json_lhotse_field(sharc__ctx *ctx, const char *line, size_t len, const char *field,
                             sharc__buf *cut_id, sharc__buf *value, int *present)
{
    int rc;
    cJSON *root = parse(ctx, line, len, &rc);
    if (!root)
        return rc;
    const char *id = get_string(root, "cut_id");
    *present = 0;
    sharc__buf_clear(value);
    if (!id) {
        rc = sharc__set_error(ctx, SHARC_ERR_JSON, "%s line has no \"cut_id\"", field);
        goto done;
    }
    if (holds_nul(id)) {
        char what[300];
        snprintf(what, sizeof what, "%.200s line: ", field);
        rc = nul_refused(ctx, what, "cut_id");
        goto done;
    }
    if ((rc = sharc__buf_set_str(ctx, cut_id, id)) < 0)
        goto done;
    /* The value as written: NaN and Infinity stay what they are (cJSON prints them as null). */
    size_t at, n;
    if (member(root, field)) {
        if (raw_member(line, len, field, &at, &n))
            rc = sharc__buf_set(ctx, value, line + at, n);
        else
            rc = sharc__set_error(ctx, SHARC_ERR_JSON, "%s line: cannot find the value of %s",
                                  field, field);
        *present = rc == 0;
    }
done:
    cJSON_Delete(root);
    return rc;
}

static int truthy(const cJSON *v)
{
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v))
        return 0;
    if (cJSON_IsNumber(v))
        return v->valuedouble != 0;
    if (cJSON_IsString(v))
        return v->valuestring[0] != 0;
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) /* Python: an empty list or dict is false */
        return v->child != NULL;
    return 1;
}

int sharc__json_nemo_row(sharc__ctx *ctx, const char *line, size_t len, const char *text_field,
                         const char *lang_field, sharc__nemo_row *row, sharc__rawcut *c)
{
    int rc;
    cJSON *root = parse(ctx, line, len, &rc);
    if (!root)
        return rc;
    const char *path = get_string(root, "audio_filepath");
    if (!path)
        path = get_string(root, "audio_file");
    if (!path || !*path) {
        const char *key = member(root, "audio_filepath") ? "audio_filepath"
                          : member(root, "audio_file")   ? "audio_file"
                                                         : NULL;
        rc = key ? sharc__set_error(ctx, SHARC_ERR_JSON,
                                    "manifest row's \"%s\" is not a non-empty string", key)
                 : sharc__set_error(ctx, SHARC_ERR_JSON, "manifest row has no \"audio_filepath\"");
        goto done;
    }
    if (holds_nul(path)) {
        char shown[256];
        unmark(path, shown, sizeof shown);
        char what[300];
        snprintf(what, sizeof what, "manifest row %s: ", shown);
        rc = nul_refused(ctx, what,
                         get_string(root, "audio_filepath") ? "audio_filepath" : "audio_file");
        goto done;
    }
    row->audio_filepath = sharc__strdup(ctx, path);
    if (!row->audio_filepath) {
        rc = SHARC_ERR(ENOMEM);
        goto done;
    }
    row->skipme = truthy(member(root, "_skipme"));
    row->shard_id = shard_id_of(root);
    row->duration = -1; /* the whole member */
    row->offset = 0;
    if ((rc = get_seconds(ctx, root, "duration", &row->duration)) < 0 ||
        (rc = get_seconds(ctx, root, "offset", &row->offset)) < 0) {
        sharc__wrap_error(ctx, rc, "manifest row %s", path);
        goto done;
    }
    const char *nemo_keys[] = {text_field, lang_field, "speaker"};
    for (int k = 0; k < 3; k++)
        if (holds_nul(get_string(root, nemo_keys[k]))) {
            char what[300];
            snprintf(what, sizeof what, "manifest row %s: ", path);
            rc = nul_refused(ctx, what, nemo_keys[k]);
            goto done;
        }
    if ((rc = set_opt(ctx, &c->text, &c->has_text, get_string(root, text_field))) < 0)
        goto done;
    if ((rc = set_opt(ctx, &c->language, &c->has_language, get_string(root, lang_field))) < 0)
        goto done;
    if ((rc = set_opt(ctx, &c->speaker, &c->has_speaker, get_string(root, "speaker"))) < 0)
        goto done;
    rc = sharc__buf_set(ctx, &c->json, line, len);
done:
    cJSON_Delete(root);
    return rc;
}

int sharc__json_nemo_shard_id(sharc__ctx *ctx, const char *line, size_t len, long long *shard_id)
{
    /* Leniently: a row that is only bad in ways that parse() refuses (bytes that are not
     * UTF-8, more after the object) is grouped, then reported as its cut's problem. */
    *shard_id = -1;
    size_t n;
    int rc;
    if (!line)
        line = "";
    char *spelled = prepared_copy(ctx, line, len, &n, &rc);
    if (rc < 0)
        return rc;
    cJSON *root = cJSON_ParseWithLength(spelled ? spelled : line, n);
    sharc__free(ctx, spelled);
    if (!root)
        return sharc__set_error(ctx, SHARC_ERR_JSON, "invalid JSON");
    *shard_id = shard_id_of(root);
    cJSON_Delete(root);
    return 0;
}

int sharc__json_wds_meta(sharc__ctx *ctx, const char *text, size_t len, sharc__rawcut *c)
{
    int rc;
    cJSON *root = parse(ctx, text, len, &rc);
    if (!root)
        return rc;
    double d = 0; /* gcc -O3 cannot tell that it is set whenever it is read */
    if ((rc = get_seconds(ctx, root, "duration", &d)) < 0)
        goto done;
    if (rc > 0)
        c->duration = d;
    const char *wds_keys[] = {"text", "speaker", "language"};
    for (int k = 0; k < 3; k++)
        if (holds_nul(get_string(root, wds_keys[k]))) {
            rc = nul_refused(ctx, "", wds_keys[k]);
            goto done;
        }
    const char *t = get_string(root, "text");
    if (t && (rc = set_opt(ctx, &c->text, &c->has_text, t)) < 0)
        goto done;
    if ((rc = set_opt(ctx, &c->speaker, &c->has_speaker, get_string(root, "speaker"))) < 0)
        goto done;
    if ((rc = set_opt(ctx, &c->language, &c->has_language, get_string(root, "language"))) < 0)
        goto done;
    if ((rc = recording_fields(ctx, root, c)) < 0)
        goto done;
    rc = sharc__buf_set(ctx, &c->json, text, len);
done:
    cJSON_Delete(root);
    return rc;
}

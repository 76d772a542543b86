#include "io/braces.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Deeper nesting is refused rather than recursed into (Python gives up near 1000 levels). */
#define MAX_NESTING 64
/* A pattern in a message: its first 200 bytes, then "..." when there is more. */
#define SHOWN(p) 200, (p), strlen(p) > 200 ? "..." : ""

int sharc__strs_push(sharc__ctx *ctx, sharc__strs *l, char *s)
{
    if (!s)
        return SHARC_ERR(ENOMEM);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **p = sharc__realloc(ctx, l->items, l->cap * sizeof *p, cap * sizeof *p);
        if (!p) {
            sharc__free(ctx, s);
            return SHARC_ERR(ENOMEM);
        }
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = s;
    return 0;
}

void sharc__strs_free(sharc__ctx *ctx, sharc__strs *l)
{
    for (size_t i = 0; i < l->n; i++)
        sharc__free(ctx, l->items[i]);
    sharc__free(ctx, l->items);
    memset(l, 0, sizeof *l);
}

/* ---- ranges ---------------------------------------------------------------------- */

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* A range as braceexpand reads one: -?D..-?D or L..L (ASCII letters), then ..-?D or nothing. */
typedef struct brace_range {
    int letters;              ///< a range of letters (from and to index `alphabet`)
    long long from, to;       ///< the first item, and the bound it runs towards (inclusive)
    unsigned long long step;  ///< >= 1
    unsigned long long count; ///< items; ULLONG_MAX when an endpoint has too many digits
    int width;                ///< zero padding of integers, 0 for none
} brace_range;

/* The length of the integer -?D+ at s[0..n), 0 when there is none; its value saturated. */
static size_t scan_int(const char *s, size_t n, long long *value, int *huge)
{
    size_t i = n > 0 && s[0] == '-';
    size_t first = i;
    unsigned long long v = 0;
    *huge = 0;
    for (; i < n && isdigit((unsigned char)s[i]); i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > ((unsigned long long)LLONG_MAX - d) / 10)
            *huge = 1; /* past a long long: Python's ints go on, but no range this long fits */
        else
            v = v * 10 + d;
    }
    if (i == first)
        return 0;
    *value = first ? -(long long)v : (long long)v;
    return i;
}

static int letter_at(const char *s, size_t n, size_t i, long long *index)
{
    const char *p = i < n && isalpha((unsigned char)s[i]) ? strchr(alphabet, s[i]) : NULL;
    if (!p)
        return 0;
    *index = p - alphabet;
    return 1;
}

/* braceexpand's padding: the longer endpoint's width when either (not 0 itself) starts 0. */
static int zero_padding(const char *a, size_t na, const char *b, size_t nb)
{
    int padded = 0;
    const char *ends[2] = {a, b};
    size_t lens[2] = {na, nb};
    for (int k = 0; k < 2; k++) {
        const char *d = ends[k] + (ends[k][0] == '-');
        size_t nd = lens[k] - (size_t)(ends[k][0] == '-');
        padded |= d[0] == '0' && nd > 1;
    }
    return padded ? (int)(na > nb ? na : nb) : 0;
}

/* 1 and the range when s[0..n) is one, else 0. */
static int parse_range(const char *s, size_t n, brace_range *r)
{
    memset(r, 0, sizeof *r);
    int huge_a = 0, huge_b = 0, huge_step = 0;
    size_t a = 0, b = 0;
    if (letter_at(s, n, 0, &r->from) && n >= 4 && memcmp(s + 1, "..", 2) == 0 &&
        letter_at(s, n, 3, &r->to)) {
        r->letters = 1;
        a = 1;
        b = 4;
    } else {
        a = scan_int(s, n, &r->from, &huge_a);
        if (a == 0 || n - a < 3 || memcmp(s + a, "..", 2) != 0)
            return 0;
        size_t len_b = scan_int(s + a + 2, n - a - 2, &r->to, &huge_b);
        if (len_b == 0)
            return 0;
        b = a + 2 + len_b;
        r->width = zero_padding(s, a, s + a + 2, len_b);
    }
    long long step = 1;
    if (b < n) {
        size_t at = b + 2, len;
        if (n - b < 3 || memcmp(s + b, "..", 2) != 0 ||
            (len = scan_int(s + at, n - at, &step, &huge_step)) == 0 || at + len != n)
            return 0;
    }
    unsigned long long mag = step < 0 ? 0ULL - (unsigned long long)step : (unsigned long long)step;
    r->step = huge_step ? ULLONG_MAX / 2 : mag ? mag : 1;
    unsigned long long span = r->from <= r->to
                                  ? (unsigned long long)r->to - (unsigned long long)r->from
                                  : (unsigned long long)r->from - (unsigned long long)r->to;
    r->count = huge_a || huge_b ? ULLONG_MAX : span / r->step + 1;
    return 1;
}

static char *range_item(sharc__ctx *ctx, const brace_range *r, unsigned long long k)
{
    unsigned long long off = k * r->step, from = (unsigned long long)r->from;
    long long v = (long long)(r->from <= r->to ? from + off : from - off); /* two's complement */
    if (r->letters) {
        char c[2] = {alphabet[v], 0};
        return sharc__strdup(ctx, c);
    }
    char num[32];
    snprintf(num, sizeof num, "%0*lld", r->width, v);
    return sharc__strdup(ctx, num);
}

/* ---- patterns -------------------------------------------------------------------- */

typedef struct expansion {
    sharc__ctx *ctx;
    const char *pattern; ///< as given, for messages
    size_t max;
    size_t bytes, max_bytes; ///< the bytes of the paths made so far, and their cap
} expansion;

static int too_large(expansion *e)
{
    return sharc__set_error(e->ctx, SHARC_ERR_TOO_LARGE,
                            "pattern %.*s%s stands for more than %zu paths", SHOWN(e->pattern),
                            e->max);
}

static int expand_pattern(expansion *e, const char *s, size_t n, sharc__strs *out);

/* `{` + each expansion of s[0..n) + `}`: a group that is neither a range nor a list. */
static int expand_literal_group(expansion *e, const char *s, size_t n, sharc__strs *alts)
{
    sharc__strs inner = {0};
    int rc = expand_pattern(e, s, n, &inner);
    for (size_t i = 0; rc == 0 && i < inner.n; i++) {
        size_t len = strlen(inner.items[i]);
        char *item = sharc__malloc(e->ctx, len + 3);
        if (item) {
            item[0] = '{';
            memcpy(item + 1, inner.items[i], len);
            memcpy(item + 1 + len, "}", 2);
        }
        rc = sharc__strs_push(e->ctx, alts, item);
    }
    sharc__strs_free(e->ctx, &inner);
    return rc;
}

/* The alternatives a group with inside s[0..n) stands for, appended to `alts`. */
static int expand_group(expansion *e, const char *s, size_t n, sharc__strs *alts)
{
    brace_range r;
    if (parse_range(s, n, &r)) {
        if (r.count > e->max)
            return too_large(e);
        int rc = 0;
        for (unsigned long long k = 0; rc == 0 && k < r.count; k++)
            rc = sharc__strs_push(e->ctx, alts, range_item(e->ctx, &r, k));
        return rc;
    }
    int level = 0, commas = 0;
    for (size_t i = 0; i < n; i++) {
        level += s[i] == '{' ? 1 : s[i] == '}' ? -1 : 0;
        commas += s[i] == ',' && level == 0;
    }
    if (commas == 0 || level != 0)
        return expand_literal_group(e, s, n, alts);
    size_t start = 0;
    int rc = 0;
    level = 0;
    for (size_t i = 0; i <= n && rc == 0; i++) {
        char c = i < n ? s[i] : ',';
        level += c == '{' ? 1 : c == '}' ? -1 : 0;
        if (c != ',' || level != 0)
            continue;
        rc = expand_pattern(e, s + start, i - start, alts);
        if (rc == 0 && alts->n > e->max)
            rc = too_large(e);
        start = i + 1;
    }
    return rc;
}

/* Every combination of one item per part, the last part varying fastest, appended to out. */
static int product(expansion *e, const sharc__strs *parts, size_t n_parts, sharc__strs *out)
{
    size_t total = 1;
    for (size_t p = 0; p < n_parts; p++) {
        if (parts[p].n > e->max / total)
            return too_large(e);
        total *= parts[p].n;
    }
    if (total > e->max - out->n)
        return too_large(e);
    /* Each item of part p is in total / n_p of the paths. */
    double bytes = (double)total;
    for (size_t p = 0; p < n_parts; p++) {
        size_t sum = 0;
        for (size_t k = 0; k < parts[p].n; k++)
            sum += strlen(parts[p].items[k]);
        bytes += (double)sum * (double)(total / parts[p].n);
    }
    if (bytes > (double)(e->max_bytes - e->bytes))
        return sharc__set_error(e->ctx, SHARC_ERR_TOO_LARGE,
                                "pattern %.*s%s stands for more than %zu MiB of paths",
                                SHOWN(e->pattern), e->max_bytes >> 20);
    e->bytes += (size_t)bytes;
    size_t *idx = sharc__calloc(e->ctx, n_parts + 1, sizeof *idx);
    if (!idx)
        return SHARC_ERR(ENOMEM);
    int rc = 0;
    for (size_t t = 0; t < total && rc == 0; t++) {
        size_t len = 0;
        for (size_t p = 0; p < n_parts; p++)
            len += strlen(parts[p].items[idx[p]]);
        char *item = sharc__malloc(e->ctx, len + 1);
        if (item) {
            char *w = item;
            for (size_t p = 0; p < n_parts; p++)
                w = stpcpy(w, parts[p].items[idx[p]]);
            *w = 0;
        }
        rc = sharc__strs_push(e->ctx, out, item);
        for (size_t p = n_parts; p-- > 0;) {
            if (++idx[p] < parts[p].n)
                break;
            idx[p] = 0;
        }
    }
    sharc__free(e->ctx, idx);
    return rc;
}

/* A new empty part at the end of `*parts`, NULL when out of memory. */
static sharc__strs *new_part(sharc__ctx *ctx, sharc__strs **parts, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t grown = *cap ? *cap * 2 : 8;
        sharc__strs *p = sharc__realloc(ctx, *parts, *cap * sizeof *p, grown * sizeof *p);
        if (!p)
            return NULL;
        *parts = p;
        *cap = grown;
    }
    sharc__strs *part = &(*parts)[(*n)++];
    memset(part, 0, sizeof *part);
    return part;
}

/* braceexpand's parse_pattern: literal runs and top-level groups, each a part of a product. */
static int expand_pattern(expansion *e, const char *s, size_t n, sharc__strs *out)
{
    sharc__strs *parts = NULL, *part;
    size_t n_parts = 0, cap = 0, start = 0;
    int level = 0, rc = 0;
    for (size_t pos = 0; pos < n && rc == 0; pos++) {
        if (s[pos] == '{') {
            if (level == 0 && pos > start) {
                part = new_part(e->ctx, &parts, &n_parts, &cap);
                rc = part ? sharc__strs_push(e->ctx, part,
                                             sharc__strndup(e->ctx, s + start, pos - start))
                          : SHARC_ERR(ENOMEM);
                start = pos;
            }
            level++;
        } else if (s[pos] == '}' && --level == 0) {
            part = new_part(e->ctx, &parts, &n_parts, &cap);
            rc = part ? expand_group(e, s + start + 1, pos - start - 1, part) : SHARC_ERR(ENOMEM);
            start = pos + 1;
        }
    }
    if (rc == 0 && level != 0)
        rc = sharc__set_error(e->ctx, SHARC_ERR(EINVAL), "unbalanced braces in %.*s%s",
                              SHOWN(e->pattern));
    if (rc == 0 && start < n) {
        part = new_part(e->ctx, &parts, &n_parts, &cap);
        rc = part ? sharc__strs_push(e->ctx, part, sharc__strndup(e->ctx, s + start, n - start))
                  : SHARC_ERR(ENOMEM);
    }
    if (rc == 0)
        rc = product(e, parts, n_parts, out);
    for (size_t p = 0; p < n_parts; p++)
        sharc__strs_free(e->ctx, &parts[p]);
    sharc__free(e->ctx, parts);
    return rc;
}

/* ---- NeMo's spellings ------------------------------------------------------------ */

/* The length of "(R)" when the bracket at p opens a range R closed by `close`, else 0. A
 * range is short and made of digits, letters, dots and minus signs only: the scan stops at
 * the first other byte. */
static size_t bracket_range(const char *p, char close)
{
    size_t n = 1;
    while (n < 128 && (isalnum((unsigned char)p[n]) || p[n] == '.' || p[n] == '-'))
        n++;
    brace_range r;
    return p[n] == close && parse_range(p + 1, n - 1, &r) ? n + 1 : 0;
}

/* Every `word` in `s` (left to right, not overlapping, as Python's str.replace) as `c`. */
static void replace_all(char *s, const char *word, char c)
{
    size_t n = strlen(word), j = 0;
    for (size_t i = 0; s[i];) {
        if (strncmp(s + i, word, n) == 0) {
            s[j++] = c;
            i += n;
        } else {
            s[j++] = s[i++];
        }
    }
    s[j] = 0;
}

/* `p` with NeMo's spellings of braces as braces, in NeMo's order: every _OP_, then every
 * _CL_; (), [] and <> only around a range. */
static char *nemo_braces(sharc__ctx *ctx, const char *p)
{
    static const char open[] = "([<", close[] = ")]>";
    size_t n = strlen(p);
    char *s = sharc__malloc(ctx, n + 1);
    if (!s)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        const char *o = strchr(open, p[i]);
        size_t len = o ? bracket_range(p + i, close[o - open]) : 0;
        if (len) {
            s[j++] = '{';
            memcpy(s + j, p + i + 1, len - 2);
            j += len - 2;
            s[j++] = '}';
            i += len - 1;
        } else {
            s[j++] = p[i];
        }
    }
    s[j] = 0;
    replace_all(s, "_OP_", '{');
    replace_all(s, "_CL_", '}');
    return s;
}

/* How deep braces nest in `s`. */
static int nesting(const char *s)
{
    int level = 0, deepest = 0;
    for (; *s; s++) {
        level += *s == '{' ? 1 : *s == '}' ? -1 : 0;
        deepest = level > deepest ? level : deepest;
    }
    return deepest;
}

int sharc__braces_expand(sharc__ctx *ctx, const char *pattern, size_t max, sharc__strs *out)
{
    char *mapped = nemo_braces(ctx, pattern);
    if (!mapped)
        return SHARC_ERR(ENOMEM);
    expansion e = {ctx, pattern, max, 0, SHARC__BRACES_MAX_BYTES};
    int rc = nesting(mapped) > MAX_NESTING
                 ? sharc__set_error(ctx, SHARC_ERR(EINVAL),
                                    "pattern %.*s%s nests braces more than %d deep", SHOWN(pattern),
                                    MAX_NESTING)
                 : expand_pattern(&e, mapped, strlen(mapped), out);
    sharc__free(ctx, mapped);
    return rc;
}

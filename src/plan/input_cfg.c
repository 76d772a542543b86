#include "plan/input_cfg.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/buf.h"

/* The deepest nesting of groups accepted: a config is written by hand, and a bound keeps a
 * hostile file from recursing without end. */
#define MAX_DEPTH 16
/* What a file may hold, each checked before the structure it bounds is built: its bytes,
 * its YAML nodes and their nesting (while the YAML is scanned, before it is loaded), and
 * its entries (before the first is allocated). docs/mixing.md states them. */
#define MAX_BYTES        ((size_t)16 << 20)
#define MAX_YAML_NODES   200000
#define MAX_YAML_NESTING 64
#define MAX_ENTRIES      10000

typedef struct parse {
    sharc__ctx *ctx;
    sharc__input_cfg *cfg;
    yaml_document_t doc;
    size_t nodes_cap, sources_cap;
} parse;

/* "<file>: <at>: <what>", or "<file>: <what>" where `at` is empty. */
static int report(parse *p, const char *at, const char *fmt, va_list ap)
{
    char what[512];
    vsnprintf(what, sizeof what, fmt, ap);
    return sharc__set_error(p->ctx, SHARC_ERR_FORMAT, "%s: %s%s%s", p->cfg->name, at,
                            *at ? ": " : "", what);
}

/* A problem of an entry, `where` naming it ("input_cfg[1]"). */
static int bad(parse *p, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(parse *p, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = report(p, where, fmt, ap);
    va_end(ap);
    return rc;
}

/* A problem at a place of the text: "<file>: line L column C: <what>". */
static int bad_at(parse *p, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad_at(parse *p, yaml_mark_t m, const char *fmt, ...)
{
    char at[64];
    snprintf(at, sizeof at, "line %zu column %zu", m.line + 1, m.column + 1);
    va_list ap;
    va_start(ap, fmt);
    int rc = report(p, at, fmt, ap);
    va_end(ap);
    return rc;
}

/* YAML's null: `~`, `null` or nothing at all, unquoted. libyaml leaves it a string; a
 * config reading it as the text "~" would mean something else than was written. */
static int is_null(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = (const char *)n->data.scalar.value;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* A scalar's text, or NULL for anything else, null included. */
static const char *scalar(yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE && !is_null(n) ? (const char *)n->data.scalar.value
                                                           : NULL;
}

static const char *kind_name(yaml_node_t *n)
{
    return n->type == YAML_MAPPING_NODE    ? "a mapping"
           : n->type == YAML_SEQUENCE_NODE ? "a list"
           : is_null(n)                    ? "null"
                                           : "a scalar";
}

static int number(parse *p, const char *where, const char *key, yaml_node_t *n, double *out)
{
    const char *s = scalar(n);
    char *end = NULL;
    if (s) {
        errno = 0;
        *out = strtod(s, &end);
    }
    if (!s || !*s || *end || (errno != ERANGE && !isfinite(*out)))
        return bad(p, where, "%s must be a number, not %s%s%s", key, s ? "'" : "",
                   s ? s : kind_name(n), s ? "'" : "");
    /* Out of a double's normal range: too large overflows, too small (subnormal) loses its
     * precision, and neither can be raised to a temperature or divided by. */
    if (errno == ERANGE && fabs(*out) > 1)
        return bad(p, where, "%s %s is too large (the most is %.2g)", key, s, DBL_MAX);
    if (errno == ERANGE || (*out != 0 && fabs(*out) < DBL_MIN))
        return bad(p, where, "%s %s is too small to compute with (the least is %.2g%s)", key, s,
                   DBL_MIN, strcmp(key, "weight") ? "" : "; 0 leaves an entry out");
    return 0;
}

/* Room for `more` strings after the n of *arr, so that a list of many paths is not copied
 * once per path. */
static int grow(parse *p, char ***arr, size_t n, size_t more)
{
    char **grown = sharc__realloc(p->ctx, *arr, n * sizeof **arr, (n + more) * sizeof **arr);
    if (!grown)
        return SHARC_ERR(ENOMEM);
    *arr = grown;
    return 0;
}

/* Append a copy of s to *arr, which has room for it. */
static int put_string(parse *p, char **arr, size_t *n, const char *s)
{
    if (!(arr[*n] = sharc__strdup(p->ctx, s)))
        return SHARC_ERR(ENOMEM);
    (*n)++;
    return 0;
}

/* A path key: one string or a list of strings, appended to the source's paths. */
static int paths_of(parse *p, const char *where, const char *key, yaml_node_t *n,
                    sharc__input_source *src)
{
    if (n->type == YAML_SCALAR_NODE) {
        const char *s = scalar(n);
        if (!s || !*s)
            return bad(p, where, "%s is empty", key);
        int rc = grow(p, &src->paths, src->n_paths, 1);
        return rc < 0 ? rc : put_string(p, src->paths, &src->n_paths, s);
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return bad(p, where, "%s must be a path or a list of paths, not %s", key, kind_name(n));
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return bad(p, where, "%s is an empty list", key);
    int rc = grow(p, &src->paths, src->n_paths, count);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const char *s = scalar(yaml_document_get_node(&p->doc, n->data.sequence.items.start[i]));
        rc = s && *s ? put_string(p, src->paths, &src->n_paths, s)
                     : bad(p, where, "%s[%zu] must be a path", key, i);
    }
    return rc;
}

static int add_node(parse *p, int parent, int level, int source, int *out)
{
    sharc__input_cfg *c = p->cfg;
    if (c->n_nodes == p->nodes_cap) {
        size_t cap = p->nodes_cap ? p->nodes_cap * 2 : 16;
        sharc__input_node *g =
            sharc__realloc(p->ctx, c->nodes, p->nodes_cap * sizeof *g, cap * sizeof *g);
        if (!g)
            return SHARC_ERR(ENOMEM);
        c->nodes = g;
        p->nodes_cap = cap;
    }
    c->nodes[c->n_nodes] = (sharc__input_node){parent, level, source, 0, 0};
    *out = (int)c->n_nodes++;
    return 0;
}

static int add_source(parse *p, const char *where, sharc__input_source **out)
{
    sharc__input_cfg *c = p->cfg;
    if (c->n_sources == p->sources_cap) {
        size_t cap = p->sources_cap ? p->sources_cap * 2 : 16;
        sharc__input_source *g =
            sharc__realloc(p->ctx, c->sources, p->sources_cap * sizeof *g, cap * sizeof *g);
        if (!g)
            return SHARC_ERR(ENOMEM);
        c->sources = g;
        p->sources_cap = cap;
    }
    sharc__input_source *s = &c->sources[c->n_sources++];
    memset(s, 0, sizeof *s);
    if (!(s->where = sharc__strdup(p->ctx, where)))
        return SHARC_ERR(ENOMEM);
    *out = s;
    return 0;
}

/* Tags inherited from the groups above, the innermost last. */
typedef struct tagset {
    const char *name[64], *value[64];
    size_t n;
} tagset;

/* A copy of a tag's name or value, owned by the config, for every source to point to. */
static const char *keep_tag(parse *p, const char *s)
{
    sharc__input_cfg *c = p->cfg;
    if (c->n_tags == c->tags_cap) {
        size_t cap = c->tags_cap ? c->tags_cap * 2 : 16;
        char **g = sharc__realloc(p->ctx, c->tags, c->tags_cap * sizeof *g, cap * sizeof *g);
        if (!g)
            return NULL;
        c->tags = g;
        c->tags_cap = cap;
    }
    char *copy = sharc__strdup(p->ctx, s);
    if (copy)
        c->tags[c->n_tags++] = copy;
    return copy;
}

static int read_tags(parse *p, const char *where, yaml_node_t *n, tagset *t)
{
    if (n->type != YAML_MAPPING_NODE)
        return bad(p, where, "tags must be a mapping, not %s", kind_name(n));
    int here[sizeof t->name / sizeof *t->name] = {0}; /* set by this mapping */
    for (yaml_node_pair_t *kv = n->data.mapping.pairs.start; kv < n->data.mapping.pairs.top; kv++) {
        yaml_node_t *key = yaml_document_get_node(&p->doc, kv->key);
        yaml_node_t *value = yaml_document_get_node(&p->doc, kv->value);
        const char *k = scalar(key), *v = scalar(value);
        if (!k || !*k)
            return bad(p, where, "a tag's name must be a string");
        if (is_null(value))
            return bad_at(p, value->start_mark,
                          "%s: tag '%s' is null; give it a value, or quote it ('~')", where, k);
        if (!v)
            return bad(p, where, "tag '%s' must be a string or number", k);
        int lang = !strcmp(k, "lang") || !strcmp(k, "language");
        if (!strcmp(k, "lang"))
            k = "language"; /* the cut's own language column */
        size_t i = 0;
        while (i < t->n && strcmp(t->name[i], k))
            i++;
        if (i < t->n && here[i])
            return bad_at(p, key->start_mark, "%s: tag '%s' given twice%s", where, k,
                          lang ? " ('lang' is 'language')" : "");
        if (i == t->n) {
            if (t->n == sizeof t->name / sizeof *t->name)
                return bad(p, where, "more than %zu tags", t->n);
            t->n++;
        }
        if (!(t->name[i] = keep_tag(p, k)) || !(t->value[i] = keep_tag(p, v)))
            return SHARC_ERR(ENOMEM);
        here[i] = 1;
    }
    return 0;
}

static int parse_list(parse *p, yaml_node_t *list, const char *where, int parent, int level,
                      const tagset *tags);

static int set_layout(parse *p, const char *where, const char *type, sharc_layout *out)
{
    if (!strcmp(type, "lhotse_shar"))
        *out = SHARC_LAYOUT_SHAR;
    else if (!strcmp(type, "nemo_tarred"))
        *out = SHARC_LAYOUT_NEMO;
    else if (!strcmp(type, "wds"))
        *out = SHARC_LAYOUT_WDS;
    else
        return bad(p, where, "unknown type '%s' (lhotse_shar, nemo_tarred, wds or group)", type);
    return 0;
}

static int parse_entry(parse *p, yaml_node_t *e, const char *where, int parent, int level,
                       const tagset *inherited)
{
    if (e->type != YAML_MAPPING_NODE)
        return bad(p, where, "an entry must be a mapping, not %s", kind_name(e));
    yaml_node_t *type = NULL, *weight = NULL, *tags = NULL, *list = NULL;
    yaml_node_t *shar = NULL, *manifest = NULL, *tars = NULL, *wds = NULL;
    const char *tars_key = "tarred_audio_filepaths";
    for (yaml_node_pair_t *kv = e->data.mapping.pairs.start; kv < e->data.mapping.pairs.top; kv++) {
        const char *k = scalar(yaml_document_get_node(&p->doc, kv->key));
        yaml_node_t *v = yaml_document_get_node(&p->doc, kv->value);
        yaml_node_t **slot = !k                                     ? NULL
                             : !strcmp(k, "type")                   ? &type
                             : !strcmp(k, "weight")                 ? &weight
                             : !strcmp(k, "tags")                   ? &tags
                             : !strcmp(k, "input_cfg")              ? &list
                             : !strcmp(k, "shar_path")              ? &shar
                             : !strcmp(k, "manifest_filepath")      ? &manifest
                             : !strcmp(k, "tarred_audio_filepaths") ? &tars
                             : !strcmp(k, "tarred_audio_filepath")  ? &tars
                             : !strcmp(k, "paths")                  ? &wds
                                                                    : NULL;
        if (!slot)
            return bad(p, where, "unknown key '%s'", k ? k : "?");
        if (*slot)
            return bad(p, where, "key '%s' given twice", k);
        if (slot == &tars)
            tars_key = k;
        *slot = v;
    }
    if (!type || !scalar(type))
        return bad(p, where, "missing type");
    const char *t = scalar(type);
    int is_group = !strcmp(t, "group");
    sharc_layout layout = SHARC_LAYOUT_AUTO;
    int rc = is_group ? 0 : set_layout(p, where, t, &layout);
    if (rc < 0)
        return rc;
    /* Each type takes its own keys only: another type's key is a mistake, not ignored. */
    struct {
        yaml_node_t *n;
        const char *key;
        int ok;
    } keys[] = {{shar, "shar_path", layout == SHARC_LAYOUT_SHAR},
                {manifest, "manifest_filepath", layout == SHARC_LAYOUT_NEMO},
                {tars, tars_key, layout == SHARC_LAYOUT_NEMO},
                {wds, "paths", layout == SHARC_LAYOUT_WDS},
                {list, "input_cfg", is_group}};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (keys[i].n && !keys[i].ok)
            return bad(p, where, "key '%s' does not belong to type '%s'", keys[i].key, t);
    tagset own = *inherited;
    if (tags && (rc = read_tags(p, where, tags, &own)) < 0)
        return rc;
    int idx;
    if ((rc = add_node(p, parent, level, -1, &idx)) < 0)
        return rc;
    if (weight) {
        double w;
        if ((rc = number(p, where, "weight", weight, &w)) < 0)
            return rc;
        if (w < 0)
            return bad(p, where, "weight %s is negative", scalar(weight));
        p->cfg->nodes[idx].has_weight = 1;
        p->cfg->nodes[idx].weight = w;
    }
    if (is_group) {
        if (!list)
            return bad(p, where, "missing input_cfg (a group's list of entries)");
        if (level >= MAX_DEPTH)
            return bad(p, where, "groups nest deeper than %d levels", MAX_DEPTH);
        char inner[512];
        if (snprintf(inner, sizeof inner, "%s.input_cfg", where) >= (int)sizeof inner)
            return bad(p, where, "groups nest too deep");
        return parse_list(p, list, inner, idx, level + 1, &own);
    }
    sharc__input_source *src;
    if ((rc = add_source(p, where, &src)) < 0)
        return rc;
    p->cfg->nodes[idx].source = (int)(p->cfg->n_sources - 1);
    src->layout = layout;
    if (layout == SHARC_LAYOUT_SHAR) {
        if (!shar)
            return bad(p, where, "missing shar_path");
        rc = paths_of(p, where, "shar_path", shar, src);
    } else if (layout == SHARC_LAYOUT_NEMO) {
        if (!manifest)
            return bad(p, where, "missing manifest_filepath");
        if (!tars)
            return bad(p, where, "missing tarred_audio_filepaths");
        rc = paths_of(p, where, "manifest_filepath", manifest, src);
        if (rc == 0)
            rc = paths_of(p, where, tars_key, tars, src);
    } else {
        if (!wds)
            return bad(p, where, "missing paths");
        rc = paths_of(p, where, "paths", wds, src);
    }
    if (rc < 0 || own.n == 0)
        return rc;
    src->tag_names = sharc__malloc(p->ctx, own.n * sizeof *src->tag_names);
    src->tag_values = sharc__malloc(p->ctx, own.n * sizeof *src->tag_values);
    if (!src->tag_names || !src->tag_values)
        return SHARC_ERR(ENOMEM);
    memcpy(src->tag_names, own.name, own.n * sizeof *own.name);
    memcpy(src->tag_values, own.value, own.n * sizeof *own.value);
    src->n_tags = own.n;
    return 0;
}

static int parse_list(parse *p, yaml_node_t *list, const char *where, int parent, int level,
                      const tagset *tags)
{
    if (list->type != YAML_SEQUENCE_NODE)
        return bad(p, where, "must be a list of entries, not %s", kind_name(list));
    if (list->data.sequence.items.start == list->data.sequence.items.top)
        return bad(p, where, "is an empty list");
    if (level > p->cfg->depth)
        p->cfg->depth = level;
    size_t first = p->cfg->n_nodes, i = 0;
    int weighted = -1;
    const char *first_where = NULL;
    char here[512], other[512] = "";
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top;
         it++, i++) {
        if (snprintf(here, sizeof here, "%s[%zu]", where, i) >= (int)sizeof here)
            return bad(p, where, "groups nest too deep");
        size_t idx = p->cfg->n_nodes;
        int rc = parse_entry(p, yaml_document_get_node(&p->doc, *it), here, parent, level, tags);
        if (rc < 0)
            return rc;
        int has = p->cfg->nodes[idx].has_weight;
        if (weighted < 0) {
            weighted = has;
            snprintf(other, sizeof other, "%s", here);
            first_where = other;
        } else if (has != weighted) {
            return bad(p, has ? here : first_where,
                       "has a weight but %s does not: give every entry of a list a weight, "
                       "or none",
                       has ? first_where : here);
        }
    }
    if (weighted) {
        double sum = 0;
        for (size_t k = first; k < p->cfg->n_nodes; k++)
            if (p->cfg->nodes[k].parent == parent)
                sum += p->cfg->nodes[k].weight;
        if (sum <= 0)
            return bad(p, where, "every weight is zero");
    }
    return 0;
}

static int parse_temperature(parse *p, yaml_node_t *t)
{
    sharc__input_cfg *c = p->cfg;
    size_t n = t->type == YAML_SEQUENCE_NODE
                   ? (size_t)(t->data.sequence.items.top - t->data.sequence.items.start)
                   : 1;
    if (t->type == YAML_SEQUENCE_NODE && n != (size_t)c->depth)
        return bad(p, "reweight_temperature",
                   "has %zu values, but input_cfg nests %d level%s: give one per level, or "
                   "one for all",
                   n, c->depth, c->depth == 1 ? "" : "s");
    if (!(c->temperatures = sharc__calloc(p->ctx, (size_t)c->depth, sizeof(double))))
        return SHARC_ERR(ENOMEM);
    c->n_temperatures = (size_t)c->depth;
    for (size_t i = 0; i < (size_t)c->depth; i++) {
        yaml_node_t *v = t->type == YAML_SEQUENCE_NODE
                             ? yaml_document_get_node(&p->doc, t->data.sequence.items.start[i])
                             : t;
        char key[64];
        snprintf(key, sizeof key, t->type == YAML_SEQUENCE_NODE ? "value %zu" : "its value", i);
        int rc = number(p, "reweight_temperature", key, v, &c->temperatures[i]);
        if (rc < 0)
            return rc;
        if (c->temperatures[i] < 0)
            return bad(p, "reweight_temperature", "%s is negative", scalar(v));
    }
    /* NeMo's temperature_reweighting refuses weights that are not positive (0^T is not a
     * weight that a temperature can rescale). */
    for (size_t k = 0; k < c->n_nodes; k++)
        if (c->nodes[k].has_weight && c->nodes[k].weight <= 0) {
            const char *w = "";
            for (size_t s = k; s < c->n_nodes; s++)
                if (c->nodes[s].source >= 0) {
                    w = c->sources[c->nodes[s].source].where;
                    break;
                }
            return bad(p, w,
                       "weight 0 cannot be reweighted by reweight_temperature: weights "
                       "must be positive");
        }
    return 0;
}

static int syntax_error(parse *p, const yaml_parser_t *y)
{
    return bad_at(p, y->problem_mark, "%s%s%s", y->problem ? y->problem : "not YAML",
                  y->context ? " " : "", y->context ? y->context : "");
}

/*
 * The YAML's events, before any node is built: aliases are refused (an alias repeats a
 * subtree by reference, so a file of a few hundred bytes could expand to millions of
 * entries, and NeMo configs do not use them), as are a second document, and more nodes or
 * a deeper nesting than the bounds.
 */
static int scan_events(parse *p, const char *text, size_t len)
{
    yaml_parser_t y;
    if (!yaml_parser_initialize(&y))
        return SHARC_ERR(ENOMEM);
    yaml_parser_set_input_string(&y, (const unsigned char *)text, len);
    size_t nodes = 0, nesting = 0, docs = 0;
    int rc = 0;
    for (int done = 0; rc == 0 && !done;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&y, &ev)) {
            rc = syntax_error(p, &y);
            break;
        }
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            /* libyaml loads the first document; the rest would be ignored. */
            if (++docs > 1)
                rc = bad_at(p, ev.start_mark,
                            "a second YAML document ('---'): an input_cfg is one document");
            break;
        case YAML_ALIAS_EVENT:
            rc = bad_at(p, ev.start_mark,
                        "alias *%s: an input_cfg takes no YAML aliases (they can expand a short "
                        "file without bound); write the entry out",
                        (const char *)ev.data.alias.anchor);
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++nesting > MAX_YAML_NESTING)
                rc = bad_at(p, ev.start_mark,
                            "YAML nested deeper than %d levels, the limit for an input_cfg",
                            MAX_YAML_NESTING);
            /* fall through */
        case YAML_SCALAR_EVENT:
            if (rc == 0 && ++nodes > MAX_YAML_NODES)
                rc = bad_at(p, ev.start_mark, "more than %d YAML nodes, the limit for an input_cfg",
                            MAX_YAML_NODES);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            nesting--;
            break;
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&y);
    return rc;
}

static yaml_node_t *value_of(parse *p, yaml_node_t *map, const char *key)
{
    for (yaml_node_pair_t *kv = map->data.mapping.pairs.start; kv < map->data.mapping.pairs.top;
         kv++) {
        const char *k = scalar(yaml_document_get_node(&p->doc, kv->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(&p->doc, kv->value);
    }
    return NULL;
}

/* The entries of a list and of the groups in it, counted up to the bound (a tree: the
 * aliases that could join its branches were refused). */
static size_t count_entries(parse *p, yaml_node_t *list, int level, size_t n)
{
    if (!list || list->type != YAML_SEQUENCE_NODE || level > MAX_DEPTH)
        return n;
    for (yaml_node_item_t *it = list->data.sequence.items.start;
         n <= MAX_ENTRIES && it < list->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(&p->doc, *it);
        n++;
        if (e && e->type == YAML_MAPPING_NODE)
            n = count_entries(p, value_of(p, e, "input_cfg"), level + 1, n);
    }
    return n;
}

static int check_entries(parse *p, yaml_node_t *list)
{
    if (count_entries(p, list, 1, 0) > MAX_ENTRIES)
        return bad(p, "input_cfg", "more than %d entries (sources and groups together), the limit",
                   MAX_ENTRIES);
    return 0;
}

static int parse_doc(parse *p)
{
    yaml_node_t *root = yaml_document_get_root_node(&p->doc);
    if (!root)
        return bad(p, "", "empty file: expected a list of entries (input_cfg)");
    tagset none = {.n = 0};
    if (root->type == YAML_SEQUENCE_NODE) {
        int rc = check_entries(p, root);
        return rc < 0 ? rc : parse_list(p, root, "input_cfg", -1, 1, &none);
    }
    if (root->type != YAML_MAPPING_NODE)
        return bad(p, "", "expected a list of entries (input_cfg), or a mapping with input_cfg");
    yaml_node_t *list = NULL, *temp = NULL, *keys[2] = {NULL, NULL};
    for (yaml_node_pair_t *kv = root->data.mapping.pairs.start; kv < root->data.mapping.pairs.top;
         kv++) {
        yaml_node_t *key = yaml_document_get_node(&p->doc, kv->key);
        const char *k = scalar(key);
        int which = !k                                   ? -1
                    : !strcmp(k, "input_cfg")            ? 0
                    : !strcmp(k, "reweight_temperature") ? 1
                                                         : -1;
        if (which < 0)
            return bad(p, "", "unknown key '%s' (input_cfg, reweight_temperature)", k ? k : "?");
        /* YAML leaves a key given twice to the application; the last would win. */
        if (keys[which])
            return bad_at(p, key->start_mark, "%s given twice (first on line %zu)", k,
                          keys[which]->start_mark.line + 1);
        keys[which] = key;
        *(which ? &temp : &list) = yaml_document_get_node(&p->doc, kv->value);
    }
    if (!list)
        return bad(p, "", "missing input_cfg");
    int rc = check_entries(p, list);
    if (rc == 0)
        rc = parse_list(p, list, "input_cfg", -1, 1, &none);
    if (rc == 0 && temp)
        rc = parse_temperature(p, temp);
    return rc;
}

static int too_large(sharc__ctx *ctx, const char *name)
{
    return sharc__set_error(ctx, SHARC_ERR_FORMAT,
                            "%s: larger than %zu MiB, the limit for an input_cfg", name,
                            MAX_BYTES >> 20);
}

int sharc__input_cfg_parse(sharc__input_cfg *cfg, sharc__ctx *ctx, const char *name,
                           const char *text, size_t len)
{
    memset(cfg, 0, sizeof *cfg);
    if (!(cfg->name = sharc__strdup(ctx, name)))
        return SHARC_ERR(ENOMEM);
    parse p = {.ctx = ctx, .cfg = cfg};
    int rc = len > MAX_BYTES ? too_large(ctx, name) : scan_events(&p, text, len);
    if (rc < 0) {
        sharc__input_cfg_free(cfg, ctx);
        return rc;
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        sharc__input_cfg_free(cfg, ctx);
        return SHARC_ERR(ENOMEM);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &p.doc)) {
        rc = syntax_error(&p, &parser);
        yaml_parser_delete(&parser);
        sharc__input_cfg_free(cfg, ctx);
        return rc;
    }
    rc = parse_doc(&p);
    yaml_document_delete(&p.doc);
    yaml_parser_delete(&parser);
    if (rc < 0)
        sharc__input_cfg_free(cfg, ctx);
    return rc;
}

int sharc__input_cfg_load(sharc__input_cfg *cfg, sharc__ctx *ctx, const char *path)
{
    memset(cfg, 0, sizeof *cfg);
    FILE *f = fopen(path, "rb");
    if (!f)
        return sharc__set_error(ctx, SHARC_ERR(errno), "%s: cannot open input_cfg: %s", path,
                                strerror(errno));
    sharc__buf text = {0};
    char chunk[65536];
    size_t got;
    int rc = 0;
    while (rc == 0 && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = text.len + got > MAX_BYTES ? too_large(ctx, path)
                                        : sharc__buf_append(ctx, &text, chunk, got);
    if (rc == 0 && ferror(f))
        rc = sharc__set_error(ctx, SHARC_ERR(EIO), "%s: cannot read input_cfg", path);
    fclose(f);
    if (rc == 0)
        rc = sharc__input_cfg_parse(cfg, ctx, path, text.data ? (const char *)text.data : "",
                                    text.len);
    sharc__buf_free(ctx, &text);
    return rc;
}

static void free_strings(sharc__ctx *ctx, char **a, size_t n)
{
    for (size_t i = 0; a && i < n; i++)
        sharc__free(ctx, a[i]);
    sharc__free(ctx, a);
}

void sharc__input_cfg_free(sharc__input_cfg *cfg, sharc__ctx *ctx)
{
    for (size_t i = 0; i < cfg->n_sources; i++) {
        sharc__input_source *s = &cfg->sources[i];
        free_strings(ctx, s->paths, s->n_paths);
        sharc__free(ctx, s->tag_names);
        sharc__free(ctx, s->tag_values);
        sharc__free(ctx, s->where);
    }
    sharc__free(ctx, cfg->sources);
    sharc__free(ctx, cfg->nodes);
    sharc__free(ctx, cfg->temperatures);
    free_strings(ctx, cfg->tags, cfg->n_tags);
    sharc__free(ctx, cfg->name);
    memset(cfg, 0, sizeof *cfg);
}

int sharc__input_cfg_needs_counts(const sharc__input_cfg *cfg)
{
    for (size_t k = 0; k < cfg->n_nodes; k++)
        if (!cfg->nodes[k].has_weight)
            return 1;
    return 0;
}

int sharc__input_cfg_weights(const sharc__input_cfg *cfg, sharc__ctx *ctx, const double *counts,
                             double *out)
{
    size_t n = cfg->n_nodes;
    double *size = sharc__calloc(ctx, n ? n : 1, sizeof *size);
    double *prob = sharc__calloc(ctx, n ? n : 1, sizeof *prob);
    /* per list, at its parent + 1: */
    double *sum = sharc__calloc(ctx, n + 1, sizeof *sum),
           *most = sharc__calloc(ctx, n + 1, sizeof *most);
    int rc = 0;
    if (!size || !prob || !sum || !most) {
        rc = SHARC_ERR(ENOMEM);
        goto fail;
    }
    /* A node's size: its weight, or the cut count of its sources. Children follow their
     * parents, so counts add up from the end. */
    for (size_t k = n; k-- > 0;) {
        const sharc__input_node *x = &cfg->nodes[k];
        if (x->source >= 0)
            size[k] = counts ? counts[x->source] : 0;
        if (x->parent >= 0)
            size[x->parent] += size[k];
    }
    /* Each list's sizes over its largest, raised to its level's temperature, and their sum:
     * w_i^T / sum_j w_j^T computed as (w_i/m)^T / sum_j (w_j/m)^T, m the largest, so that
     * neither a power nor the sum overflows (the largest term is 1, the sum at most the
     * list's length), and a ratio too small to be represented is a share of 0. */
    for (size_t k = 0; k < n; k++) {
        const sharc__input_node *x = &cfg->nodes[k];
        if (x->has_weight)
            size[k] = x->weight;
        if (size[k] > most[x->parent + 1])
            most[x->parent + 1] = size[k];
    }
    for (size_t k = 0; k < n; k++) {
        const sharc__input_node *x = &cfg->nodes[k];
        double t = cfg->n_temperatures ? cfg->temperatures[x->level - 1] : 1.0;
        double m = most[x->parent + 1];
        size[k] = m > 0 ? size[k] / m : 0;
        if (t != 1.0)
            size[k] = pow(size[k], t);
        sum[x->parent + 1] += size[k];
    }
    /* Each share of its list, times its parent's (parents come first). */
    for (size_t k = 0; k < n; k++) {
        const sharc__input_node *x = &cfg->nodes[k];
        double total = sum[x->parent + 1];
        if (total <= 0) {
            const sharc__input_node *leaf = x;
            for (size_t j = k; leaf->source < 0 && ++j < n;)
                leaf = &cfg->nodes[j];
            rc = sharc__set_error(
                ctx, SHARC_ERR_FORMAT,
                "%s: %s: every source of this list has no cuts, so no "
                "weight can be given by cut counts",
                cfg->name, leaf->source >= 0 ? cfg->sources[leaf->source].where : "input_cfg");
            goto fail;
        }
        prob[k] = size[k] / total * (x->parent >= 0 ? prob[x->parent] : 1.0);
        if (x->source >= 0)
            out[x->source] = prob[k];
    }
fail:
    sharc__free(ctx, size);
    sharc__free(ctx, prob);
    sharc__free(ctx, sum);
    sharc__free(ctx, most);
    return rc;
}

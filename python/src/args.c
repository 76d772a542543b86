/*
 * sharc.Reader's arguments as C values: file system paths (str, bytes or os.PathLike), lists
 * of them, and lists or dicts as JSON text, each refused with an error naming the argument.
 */
#include "sharcmodule.h"

#include <stdlib.h>
#include <string.h>

/* Whether JSON text holds the escape \u0000 (a NUL in a string, which C strings end at): a
 * backslash that is not itself escaped, then u0000. */
static int json_has_nul(const char *t)
{
    for (const char *p = t; (p = strstr(p, "\\u0000")) != NULL; p++) {
        const char *q = p; /* the first of the backslashes that end at p */
        while (q > t && q[-1] == '\\')
            q--;
        if ((p - q) % 2 == 0)
            return 1;
    }
    return 0;
}

/* A malloc'd copy of the `n` bytes at `s`, which bytes object `b` holds, into *out; `b` is
 * released either way. */
static int copy_out(PyObject *b, const char *s, Py_ssize_t n, char **out)
{
    *out = strndup(s, (size_t)n);
    Py_DECREF(b);
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* `v` (a list or dict of plain values) as JSON text, malloc'd into *out, with json.dumps;
 * a value json cannot write raises TypeError naming the keyword `what`. */
int sharc__py_json_text(PyObject *v, const char *what, char **out)
{
    *out = NULL;
    PyObject *json = PyImport_ImportModule("json");
    PyObject *text = json ? PyObject_CallMethod(json, "dumps", "O", v) : NULL;
    Py_XDECREF(json);
    if (!text) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "sharc.Reader: keyword '%s' holds a value JSON cannot represent", what);
        }
        return -1;
    }
    PyObject *b = PyUnicode_AsUTF8String(text);
    Py_DECREF(text);
    if (!b)
        return -1;
    if (json_has_nul(PyBytes_AsString(b))) {
        Py_DECREF(b);
        PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s': embedded null byte", what);
        return -1;
    }
    return copy_out(b, PyBytes_AsString(b), PyBytes_Size(b), out);
}

/* A str, bytes or os.PathLike as a file system path, malloc'd into *out; `what` names the
 * argument in the TypeError for anything else. */
int sharc__py_fs_path(PyObject *p, const char *what, char **out)
{
    *out = NULL;
    PyObject *fs = PyOS_FSPath(p);
    if (!fs) {
        PyErr_Clear();
        PyObject *tn = sharc__py_type_name(p);
        if (strcmp(what, "paths") == 0)
            PyErr_Format(PyExc_TypeError,
                         "sharc.Reader: paths must be str, bytes or os.PathLike (or a list of "
                         "them), not %S",
                         tn);
        else
            PyErr_Format(PyExc_TypeError,
                         "sharc.Reader: keyword '%s' must be str, bytes or os.PathLike, not %S",
                         what, tn);
        Py_XDECREF(tn);
        return -1;
    }
    PyObject *b = PyUnicode_Check(fs) ? PyUnicode_EncodeFSDefault(fs) : (Py_INCREF(fs), fs);
    Py_DECREF(fs);
    if (!b)
        return -1;
    char *s = NULL;
    Py_ssize_t n = 0;
    char who[96];
    snprintf(who, sizeof who,
             strcmp(what, "paths") == 0 ? "sharc.Reader: %s" : "sharc.Reader: keyword '%s'", what);
    if (PyBytes_AsStringAndSize(b, &s, &n) < 0 || sharc__py_no_nul(s, n, who) < 0) {
        Py_DECREF(b);
        return -1;
    }
    return copy_out(b, s, n, out);
}

/* Append path `p` to the list `*list` of `*n` (the positional paths, or `what` keyword's). */
static int add_path(char ***list, size_t *n, PyObject *p, const char *what)
{
    char *copy;
    if (sharc__py_fs_path(p, what, &copy) < 0)
        return -1;
    char **grown = realloc(*list, (*n + 1) * sizeof *grown);
    if (!copy || !grown) {
        free(copy);
        if (grown)
            *list = grown;
        PyErr_NoMemory();
        return -1;
    }
    *list = grown;
    (*list)[(*n)++] = copy;
    return 0;
}

/* A path, or an iterable of paths, appended to `*list`. */
int sharc__py_parse_paths(char ***list, size_t *n, PyObject *paths, const char *what)
{
    if (PyUnicode_Check(paths) || PyBytes_Check(paths) ||
        PyObject_HasAttrString(paths, "__fspath__"))
        return add_path(list, n, paths, what);
    PyObject *it = PyObject_GetIter(paths);
    if (!it) {
        PyErr_Clear();
        return add_path(list, n, paths, what);
    }
    PyObject *item;
    while ((item = PyIter_Next(it))) {
        int rc = add_path(list, n, item, what);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    return 0;
}

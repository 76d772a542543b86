/*
 * Python values into settings' values for sharc.Reader's keywords (keywords.h): ints,
 * numbers, choices and lists, with the errors that name the keyword.
 */
#include "keywords.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int kw_error_type(const char *name, const char *want, PyObject *v)
{
    PyObject *tn = sharc__py_type_name(v);
    PyErr_Format(PyExc_TypeError, "sharc.Reader: keyword '%s' must be %s, not %S", name, want, tn);
    Py_XDECREF(tn);
    return -1;
}

/* 1 when `v` is an instance of numbers.<abc> ("Integral", "Real"), as numpy's scalars are
 * (np.int64, np.float32: not int or float subclasses); numpy's bool_ is neither. 0 when it is
 * not, -1 with an exception set. */
static int is_number_abc(PyObject *v, const char *abc)
{
    PyObject *numbers = PyImport_ImportModule("numbers");
    PyObject *cls = numbers ? PyObject_GetAttrString(numbers, abc) : NULL;
    int yes = cls ? PyObject_IsInstance(v, cls) : -1;
    Py_XDECREF(cls);
    Py_XDECREF(numbers);
    return yes;
}

/* An int (not a bool) in [min, max] (max 0: the type's own limit); any numbers.Integral
 * (numpy's integer scalars) is taken as the int it stands for. */
int kw_integer(const kw_def *d, PyObject *v, unsigned long long limit, unsigned long long *out)
{
    if (PyBool_Check(v))
        return kw_error_type(d->name, "an int", v);
    if (!PyLong_Check(v)) {
        int integral = is_number_abc(v, "Integral");
        if (integral <= 0)
            return integral < 0 ? -1 : kw_error_type(d->name, "an int", v);
        PyObject *i = PyNumber_Index(v);
        if (!i)
            return -1;
        int rc = kw_integer(d, i, limit, out);
        Py_DECREF(i);
        return rc;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    unsigned long long max = d->max > 0 ? (unsigned long long)d->max : limit;
    unsigned long long ux = 0;
    int bad = overflow < 0 || (overflow == 0 && x < 0);
    if (!bad && overflow > 0) {
        ux = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            bad = 1;
        }
    } else if (!bad) {
        ux = (unsigned long long)x;
    }
    if (bad || ux > max || ux < (unsigned long long)d->min) {
        PyObject *r = PyObject_Repr(v);
        PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must be in %llu..%llu, got %U",
                     d->name, (unsigned long long)d->min, max, r);
        Py_XDECREF(r);
        return -1;
    }
    *out = ux;
    return 0;
}

/* 1 when `v` is a number a float setting takes: an int or float (not a bool), or any
 * numbers.Real (numpy's float and integer scalars); 0 when not, -1 with an exception set. */
int is_real(PyObject *v)
{
    if (PyBool_Check(v))
        return 0;
    return PyLong_Check(v) || PyFloat_Check(v) ? 1 : is_number_abc(v, "Real");
}

int kw_number(const char *name, PyObject *v, double *out)
{
    int real = is_real(v);
    if (real <= 0)
        return real < 0 ? -1 : kw_error_type(name, "a number", v);
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

int kw_double(const kw_def *d, PyObject *v, double *out)
{
    double x = 0;
    if (kw_number(d->name, v, &x) < 0)
        return -1;
    if (!isfinite(x) || x > d->max || (d->min_open ? x <= d->min : x < d->min)) {
        /* PyErr_Format has no %g: the bounds are formatted here. */
        char range[96];
        snprintf(range, sizeof range, "%s %g and at most %g", d->min_open ? ">" : ">=", d->min,
                 d->max);
        PyObject *r = PyObject_Repr(v);
        PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must be %s, got %U", d->name,
                     range, r);
        Py_XDECREF(r);
        return -1;
    }
    *out = x;
    return 0;
}

/* A str compared with a list of choices; *out receives the index. */
int kw_choice(const char *name, PyObject *v, const char *const *choices, int *out)
{
    if (!PyUnicode_Check(v))
        return kw_error_type(name, "a str", v);
    char list[128] = "";
    for (int i = 0; choices[i]; i++) {
        if (PyUnicode_CompareWithASCIIString(v, choices[i]) == 0) {
            *out = i;
            return 0;
        }
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "", choices[i]);
    }
    PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must be one of %s, got %R", name,
                 list, v);
    return -1;
}

/* A sequence of numbers (bins) or of ints (bucket_batch_size), copied into *out. */
int kw_list(ReaderObject *self, const kw_def *d, PyObject *v, int ints, void **out, size_t *n_out)
{
    if (PyUnicode_Check(v) || PyBytes_Check(v) || !PySequence_Check(v))
        return kw_error_type(d->name, ints ? "a sequence of ints" : "a sequence of numbers", v);
    Py_ssize_t n = PySequence_Size(v);
    if (n < 0)
        return -1;
    if (n == 0) {
        PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword '%s' must not be empty", d->name);
        return -1;
    }
    void *arr = calloc((size_t)n, ints ? sizeof(uint32_t) : sizeof(double));
    if (!arr) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(v, i);
        if (!item)
            goto fail;
        int rc;
        if (ints) {
            unsigned long long x;
            rc = kw_integer(d, item, UINT32_MAX, &x);
            if (rc == 0)
                ((uint32_t *)arr)[i] = (uint32_t)x;
        } else {
            double x;
            rc = kw_double(d, item, &x);
            if (rc == 0 && d->kind == KW_BINS && i > 0 && x < ((double *)arr)[i - 1]) {
                PyErr_Format(PyExc_ValueError, "sharc.Reader: keyword 'bins' must be sorted");
                rc = -1;
            }
            if (rc == 0)
                ((double *)arr)[i] = x;
        }
        Py_DECREF(item);
        if (rc < 0)
            goto fail;
    }
    *out = arr;
    *n_out = (size_t)n;
    return 0;
fail:
    free(arr);
    return -1;
}

/* Numbers of `v` (a number, or a sequence of `pair` numbers per item when pair is 2, of one
 * number each when 1) into a malloc'd array: column `col` of each item. */
int kw_numbers(const kw_def *d, PyObject *v, int pair, int col, double **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int real = pair == 1 ? is_real(v) : 0;
    if (real < 0)
        return -1;
    if (real) {
        double x;
        if (kw_double(d, v, &x) < 0 || !(*out = malloc(sizeof x)))
            return PyErr_Occurred() ? -1 : (PyErr_NoMemory(), -1);
        **out = x;
        *n = 1;
        return 0;
    }
    if (PyUnicode_Check(v) || !PySequence_Check(v))
        return kw_error_type(
            d->name,
            pair == 2 ? "a list of [duration, tokens] pairs" : "a number or a list of numbers", v);
    Py_ssize_t len = PySequence_Size(v);
    if (len <= 0 || !(*out = calloc((size_t)len, sizeof **out)))
        return len < 0 ? -1
                       : (len == 0 ? kw_error_type(d->name, "a non-empty list", v)
                                   : (PyErr_NoMemory(), -1));
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < len; i++) {
        PyObject *item = PySequence_GetItem(v, i), *x = item;
        if (item && pair == 2)
            x = PySequence_Check(item) && PySequence_Size(item) == 2
                    ? PySequence_GetItem(item, col)
                    : (kw_error_type(d->name, "a list of [duration, tokens] pairs", item), NULL);
        rc = x ? kw_double(d, x, &(*out)[i]) : -1;
        if (x != item)
            Py_XDECREF(x);
        Py_XDECREF(item);
    }
    if (rc < 0) {
        free(*out);
        *out = NULL;
        return -1;
    }
    *n = (size_t)len;
    return 0;
}

/*
 * Inline SVG charts for the HTML reports (report_html.c): a histogram over numeric edges and
 * a bar chart of labelled counts. Each chart is one <svg> element with an id, a <title> and
 * one <rect class="bar"> per bar (each with its own <title>: the value on hover).
 */
#ifndef SHARC_TOOLS_REPORT_SVG_H
#define SHARC_TOOLS_REPORT_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** Write `s` with &, <, >, " and ' escaped, for HTML text and attribute values. */
void svg_escape(FILE *f, const char *s);

/**
 * A histogram: bars between edges[i] and edges[i + 1] of height counts[i], i < n, with the
 * edges labelled on the x axis (`unit` after them, e.g. "s").
 */
void svg_histogram(FILE *f, const char *id, const char *title, const double *edges,
                   const uint64_t *counts, size_t n, const char *unit);

/** Horizontal bars: one per label, its length values[i], the value printed after it. */
void svg_bar_list(FILE *f, const char *id, const char *title, const char *const *labels,
                  const double *values, size_t n, const char *unit);

/**
 * Line chart of `n_series` series, series s being the points (xs[s][i], ys[s][i]), i < ns[s],
 * named names[s], against axes from 0 (non-finite y values are left out).
 */
void svg_lines(FILE *f, const char *id, const char *title, const double *const *xs,
               const double *const *ys, const size_t *ns, const char *const *names, size_t n_series,
               const char *x_unit, const char *y_unit);

#endif /* SHARC_TOOLS_REPORT_SVG_H */

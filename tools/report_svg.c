/*
 * Inline SVG charts (report_svg.h). Plain SVG 1.1 with classes styled by the page's CSS:
 * no script, no external reference.
 */
#include "report_svg.h"

#include <math.h>

#define W  640.0
#define H  260.0
#define ML 64.0 /* margins: left (y labels), right, top (title), bottom (x labels) */
#define MR 16.0
#define MT 30.0
#define MB 44.0

static const char *const palette[] = {"#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b7791f"};

void svg_escape(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* The smallest 1, 2 or 5 times a power of ten at or above v (1 for v <= 0). */
static double nice_ceil(double v)
{
    if (!(v > 0))
        return 1;
    double p = pow(10, floor(log10(v)));
    for (int m = 1; m <= 10; m *= 2) {
        double c = (m == 4 ? 5 : m) * p;
        if (c >= v * (1 - 1e-12))
            return c;
    }
    return 10 * p;
}

/* An axis from 0 over values up to v: its tick step (1, 2 or 5 times a power of ten, at most
 * 5 ticks after 0) and its end *top, the first tick at or above v. */
static double axis_step(double v, double *top)
{
    double step = nice_ceil(v / 5);
    *top = step * ceil(v / step - 1e-9);
    if (!(*top > 0))
        *top = step;
    return step;
}

/* A number for an axis: short, without trailing zeros. */
static void fmt_num(char *buf, size_t n, double v)
{
    double a = fabs(v);
    if (a >= 1e9)
        snprintf(buf, n, "%.3gG", v / 1e9);
    else if (a >= 1e6)
        snprintf(buf, n, "%.3gM", v / 1e6);
    else if (a >= 1e4)
        snprintf(buf, n, "%.3gk", v / 1e3);
    else
        snprintf(buf, n, "%.4g", v);
}

static void open_chart(FILE *f, const char *id, const char *title, double height)
{
    fprintf(f, "<svg id=\"");
    svg_escape(f, id);
    fprintf(f,
            "\" class=\"chart\" viewBox=\"0 0 %g %g\" "
            "width=\"%g\" height=\"%g\" role=\"img\"><title>",
            W, height, W, height);
    svg_escape(f, title);
    fprintf(f, "</title><text class=\"ctitle\" x=\"%g\" y=\"18\">", ML);
    svg_escape(f, title);
    fputs("</text>\n", f);
}

/* Horizontal grid lines and y labels from 0 over values up to max; returns the y scale
 * (pixels per unit). */
static double y_axis(FILE *f, double max)
{
    double top, step = axis_step(max, &top);
    double scale = (H - MT - MB) / top;
    for (int i = 0; i * step <= top * (1 + 1e-9); i++) {
        double v = i * step, y = H - MB - v * scale;
        char label[32];
        fmt_num(label, sizeof label, v);
        fprintf(f,
                "<line class=\"grid\" x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\"/>"
                "<text class=\"ylab\" x=\"%g\" y=\"%.1f\">%s</text>\n",
                ML, y, W - MR, y, ML - 6, y + 4, label);
    }
    return scale;
}

void svg_histogram(FILE *f, const char *id, const char *title, const double *edges,
                   const uint64_t *counts, size_t n, const char *unit)
{
    open_chart(f, id, title, H);
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++)
        max = counts[i] > max ? counts[i] : max;
    double scale = y_axis(f, (double)max);
    double bw = n ? (W - ML - MR) / (double)n : 0;
    size_t every = n > 20 ? (n + 9) / 10 : 1; /* x labels on every n-th edge */
    for (size_t i = 0; i < n; i++) {
        double h = (double)counts[i] * scale, x = ML + bw * (double)i;
        char lo[32], hi[32];
        fmt_num(lo, sizeof lo, edges[i]);
        fmt_num(hi, sizeof hi, edges[i + 1]);
        fprintf(f,
                "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\">"
                "<title>%s-%s %s: %llu</title></rect>\n",
                x + 0.5, H - MB - h, bw > 2 ? bw - 1 : bw, h, lo, hi, unit,
                (unsigned long long)counts[i]);
    }
    for (size_t i = 0; i <= n; i += every) {
        char label[32];
        fmt_num(label, sizeof label, edges[i]);
        fprintf(f, "<text class=\"xlab\" x=\"%.1f\" y=\"%g\">%s</text>\n", ML + bw * (double)i,
                H - MB + 16, label);
    }
    fprintf(f, "<text class=\"xlab\" x=\"%g\" y=\"%g\">", (W + ML) / 2, H - 6);
    svg_escape(f, unit);
    fputs("</text></svg>\n", f);
}

void svg_bar_list(FILE *f, const char *id, const char *title, const char *const *labels,
                  const double *values, size_t n, const char *unit)
{
    double row = 22, height = MT + row * (double)(n ? n : 1) + 12;
    open_chart(f, id, title, height);
    double max = 0;
    for (size_t i = 0; i < n; i++)
        max = values[i] > max ? values[i] : max;
    double x0 = 150, span = W - x0 - 110;
    for (size_t i = 0; i < n; i++) {
        double y = MT + row * (double)i, w = max > 0 ? values[i] / max * span : 0;
        char value[32];
        fmt_num(value, sizeof value, values[i]);
        fprintf(f, "<text class=\"blab\" x=\"%g\" y=\"%.1f\">", x0 - 8, y + 15);
        svg_escape(f, labels[i]);
        fprintf(f,
                "</text><rect class=\"bar\" x=\"%g\" y=\"%.1f\" width=\"%.1f\" height=\"%g\">"
                "<title>%s %s</title></rect><text class=\"bval\" x=\"%.1f\" y=\"%.1f\">%s %s"
                "</text>\n",
                x0, y + 3, w < 1 && values[i] > 0 ? 1 : w, row - 6, value, unit, x0 + w + 6, y + 15,
                value, unit);
    }
    fputs("</svg>\n", f);
}

void svg_lines(FILE *f, const char *id, const char *title, const double *const *xs,
               const double *const *ys, const size_t *ns, const char *const *names, size_t n_series,
               const char *x_unit, const char *y_unit)
{
    open_chart(f, id, title, H);
    double xmax = 0, ymax = 0;
    for (size_t s = 0; s < n_series; s++)
        for (size_t i = 0; i < ns[s]; i++) {
            xmax = isfinite(xs[s][i]) && xs[s][i] > xmax ? xs[s][i] : xmax;
            ymax = isfinite(ys[s][i]) && ys[s][i] > ymax ? ys[s][i] : ymax;
        }
    double scale = y_axis(f, ymax), xtop, xstep = axis_step(xmax, &xtop);
    double xscale = (W - ML - MR) / xtop;
    for (int i = 0; i * xstep <= xtop * (1 + 1e-9); i++) {
        char label[32];
        fmt_num(label, sizeof label, i * xstep);
        fprintf(f, "<text class=\"xlab\" x=\"%.1f\" y=\"%g\">%s</text>\n", ML + i * xstep * xscale,
                H - MB + 16, label);
    }
    for (size_t s = 0; s < n_series; s++) {
        const char *color = palette[s % (sizeof palette / sizeof palette[0])];
        fprintf(f, "<polyline class=\"line\" stroke=\"%s\" points=\"", color);
        for (size_t i = 0; i < ns[s]; i++)
            if (isfinite(xs[s][i]) && isfinite(ys[s][i]))
                fprintf(f, "%.1f,%.1f ", ML + xs[s][i] * xscale, H - MB - ys[s][i] * scale);
        fputs("\"><title>", f);
        svg_escape(f, names[s]);
        fputs(", ", f);
        svg_escape(f, y_unit);
        fprintf(f, "</title></polyline><text class=\"legend\" fill=\"%s\" x=\"%.1f\" y=\"%g\">",
                color, W - MR - 110.0 * (double)(n_series - s), MT - 12);
        svg_escape(f, names[s]);
        fputs("</text>\n", f);
    }
    fprintf(f, "<text class=\"xlab\" x=\"%g\" y=\"%g\">", (W + ML) / 2, H - 6);
    svg_escape(f, x_unit);
    fputs("</text></svg>\n", f);
}

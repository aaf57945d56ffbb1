/*
 * A small SVG line chart for bench --plot: two panels that share an x
 * axis (bench: images/s above, device utilization below, against the
 * prefetch depth), one polyline per series in both, a legend on the
 * right. Written by hand so the CLI needs no plotting library; the output
 * is plain SVG 1.1 that librsvg, browsers and Inkscape render alike.
 */
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Layout, in SVG user units (= px). */
#define W 760
#define H 660
#define LEFT 90     /* room for the y tick labels and the axis label */
#define RIGHT 210   /* room for the legend */
#define TOP 60
#define PANEL_H 230
#define GAP 80      /* between the panels: the top panel's x tick labels */

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};
static const char *const dashes[] = {"", "8,4", "2,4", "10,4,2,4"};

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            /* Control bytes are not allowed in XML 1.0. */
            if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
                fputc(*s, f);
        }
    }
}

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about n ticks over [0, max]. */
static double nice_step(double max, int n)
{
    double raw = max / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

typedef struct xmap {
    int log2;
    double lo, hi;
} xmap;

static double x_pos(const xmap *m, double x)
{
    double a = m->log2 ? log2(x) : x, lo = m->log2 ? log2(m->lo) : m->lo,
           hi = m->log2 ? log2(m->hi) : m->hi;
    double plot_w = W - LEFT - RIGHT;
    if (hi <= lo)
        return LEFT + plot_w / 2;
    return LEFT + 20 + (a - lo) / (hi - lo) * (plot_w - 40);
}

static void fmt_num(char *buf, size_t n, double v)
{
    if (fabs(v) >= 1e6 && fmod(v, 1e6) == 0)
        snprintf(buf, n, "%gM", v / 1e6);
    else if (fabs(v) >= 1e4 && fmod(v, 1e3) == 0)
        snprintf(buf, n, "%gk", v / 1e3);
    else
        snprintf(buf, n, "%g", v);
}

static void panel(FILE *f, const cli_plot *p, int k, const xmap *xm, const double *xs, int nx)
{
    int y0 = TOP + k * (PANEL_H + GAP), y1 = y0 + PANEL_H; /* top, bottom */
    double ymax = p->y_max[k];
    char buf[64];
    if (ymax <= 0) {
        for (int i = 0; i < p->n_lines; i++)
            for (int j = 0; j < p->lines[i].n; j++)
                if (isfinite(p->lines[i].y[k][j]) && p->lines[i].y[k][j] > ymax)
                    ymax = p->lines[i].y[k][j];
        if (ymax <= 0)
            ymax = 1;
        double step = nice_step(ymax * 1.05, 5);
        ymax = ceil(ymax * 1.05 / step) * step;
    }
    double step = nice_step(ymax, 5);

    /* Frame, grid and y ticks. */
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#ffffff\" "
               "stroke=\"#333333\" stroke-width=\"1\"/>\n",
            LEFT, y0, W - LEFT - RIGHT, PANEL_H);
    for (double v = 0; v <= ymax * (1 + 1e-9); v += step) {
        double y = y1 - v / ymax * PANEL_H;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n",
                LEFT, y, W - RIGHT, y);
        fmt_num(buf, sizeof buf, v);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">%s</text>\n",
                LEFT - 6, y + 4, buf);
    }
    /* x ticks: at the values measured. */
    for (int i = 0; i < nx; i++) {
        double x = x_pos(xm, xs[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333333\"/>\n", x,
                y1, x, y1 + 5);
        fmt_num(buf, sizeof buf, xs[i]);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">%s</text>\n",
                x, y1 + 19, buf);
    }
    /* Axis labels. */
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">",
            LEFT + (W - LEFT - RIGHT) / 2, y1 + 38);
    xml_text(f, p->x_label);
    fputs("</text>\n", f);
    fprintf(f, "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\" "
               "font-size=\"13\">",
            24, (y0 + y1) / 2);
    xml_text(f, p->y_label[k]);
    fputs("</text>\n", f);

    /* The series. */
    for (int i = 0; i < p->n_lines; i++) {
        const cli_plot_line *l = &p->lines[i];
        const char *col = colours[l->colour % (int)(sizeof colours / sizeof *colours)];
        const char *dash = dashes[l->dash % (int)(sizeof dashes / sizeof *dashes)];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s points=\"", col,
                *dash ? " stroke-dasharray=\"" : "", dash, *dash ? "\"" : "");
        for (int j = 0; j < l->n; j++)
            if (isfinite(l->y[k][j]))
                fprintf(f, "%s%.1f,%.1f", j ? " " : "", x_pos(xm, l->x[j]),
                        y1 - l->y[k][j] / ymax * PANEL_H);
        fputs("\"/>\n", f);
        for (int j = 0; j < l->n; j++)
            if (isfinite(l->y[k][j]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                        x_pos(xm, l->x[j]), y1 - l->y[k][j] / ymax * PANEL_H, col);
    }
}

int cli_plot_svg(const char *path, const cli_plot *p, char *why, size_t why_len)
{
    double xs[CLI_PLOT_MAX_POINTS * 4];
    int nx = 0;
    xmap xm = {1, 0, 0};

    /* The distinct x values, sorted: the ticks. */
    for (int i = 0; i < p->n_lines; i++)
        for (int j = 0; j < p->lines[i].n; j++) {
            double x = p->lines[i].x[j];
            int k = 0;
            while (k < nx && xs[k] < x)
                k++;
            if (k < nx && xs[k] == x)
                continue;
            if (nx == (int)(sizeof xs / sizeof *xs))
                continue;
            memmove(xs + k + 1, xs + k, (size_t)(nx - k) * sizeof *xs);
            xs[k] = x;
            nx++;
        }
    if (nx == 0) {
        snprintf(why, why_len, "nothing to plot");
        return -1;
    }
    /* A log2 axis for sizes that double (1, 2, 4, 8), linear otherwise. */
    xm.lo = xs[0];
    xm.hi = xs[nx - 1];
    xm.log2 = xs[0] > 0 && xm.hi / xm.lo >= 4;

    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, why_len, "%s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Arial, "
               "sans-serif\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" "
               "font-weight=\"bold\">",
            W / 2);
    xml_text(f, p->title);
    fputs("</text>\n", f);
    if (p->subtitle) {
        fprintf(f, "<text x=\"%d\" y=\"46\" text-anchor=\"middle\" font-size=\"12\" "
                   "fill=\"#555555\">",
                W / 2);
        xml_text(f, p->subtitle);
        fputs("</text>\n", f);
    }
    panel(f, p, 0, &xm, xs, nx);
    panel(f, p, 1, &xm, xs, nx);

    /* Legend: one entry per series, right of the top panel. */
    int lx = W - RIGHT + 16, ly = TOP + 10;
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">",
            lx, ly);
    xml_text(f, p->legend_title ? p->legend_title : "");
    fputs("</text>\n", f);
    for (int i = 0; i < p->n_lines; i++) {
        const cli_plot_line *l = &p->lines[i];
        const char *col = colours[l->colour % (int)(sizeof colours / sizeof *colours)];
        const char *dash = dashes[l->dash % (int)(sizeof dashes / sizeof *dashes)];
        int y = ly + 22 + 20 * i;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"2\"%s%s%s/>\n",
                lx, y - 4, lx + 30, y - 4, col, *dash ? " stroke-dasharray=\"" : "", dash,
                *dash ? "\"" : "");
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">", lx + 38, y);
        xml_text(f, l->label);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    if (ferror(f) | (fclose(f) != 0)) {
        snprintf(why, why_len, "%s: write failed", path);
        return -1;
    }
    return 0;
}

/*
 * plot.c: an SVG line chart of two panels sharing the x axis (bench
 * --plot). Main thread.
 */
#ifndef GF_CLI_PLOT_H
#define GF_CLI_PLOT_H

#include <stddef.h>

/* Each series is drawn in both panels (y[0] above, y[1]
 * below) in its colour and dash pattern (indices into fixed palettes).
 * The x axis is log2 when every x > 0 and they span a factor of 4 or
 * more; ticks sit at the x values given. y_max[k] == 0: from the data. */
enum { CLI_PLOT_MAX_POINTS = 32 };
typedef struct cli_plot_line {
    char label[64];
    int n;
    double x[CLI_PLOT_MAX_POINTS];
    double y[2][CLI_PLOT_MAX_POINTS]; /* non-finite: left out */
    int colour, dash;
} cli_plot_line;
typedef struct cli_plot {
    const char *title, *subtitle; /* subtitle may be NULL */
    const char *x_label, *y_label[2], *legend_title;
    double y_max[2];
    const cli_plot_line *lines;
    int n_lines;
} cli_plot;
/* Writes the chart to path. Returns 0, or -1 with the reason in why. */
int cli_plot_svg(const char *path, const cli_plot *p, char *why, size_t why_len);

#endif /* GF_CLI_PLOT_H */

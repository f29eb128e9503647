/* A hand-written SVG of one analysis: the graph (circle, or the grid for
 * torus/grid), the spectrum (all eigenvalues on the dense path, the
 * extremes otherwise) and the consensus decay, measured against rho^k. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define PW 400 /* panel width */
#define PH 400
#define DRAW_MAX 512 /* peers drawn at most; beyond that only the plots */

static void esc(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

static void node_xy(const rumor_topo_t *t, int i, double *x, double *y)
{
    if (t->rows > 0 && t->cols > 0) {
        double sx = (PW - 80.0) / (t->cols > 1 ? t->cols - 1 : 1);
        double sy = (PH - 120.0) / (t->rows > 1 ? t->rows - 1 : 1);
        *x = 40 + (i % t->cols) * sx;
        *y = 60 + (double)(i / t->cols) * sy;
        return;
    }
    double a = 2 * 3.14159265358979 * i / t->n - 3.14159265358979 / 2;
    *x = PW / 2.0 + (PW / 2.0 - 40) * cos(a);
    *y = PH / 2.0 + 10 + (PH / 2.0 - 60) * sin(a);
}

static void panel_graph(FILE *f, const rumor_topo_result_t *r)
{
    const rumor_topo_t *t = r->topo;
    fprintf(f, "<g><text x=\"%d\" y=\"24\" class=\"h\">graph: ", PW / 2);
    esc(f, t->spec);
    fprintf(f, "</text>\n");
    if (t->n > DRAW_MAX) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"c\">%d peers: too many to draw</text></g>\n",
                PW / 2, PH / 2, t->n);
        return;
    }
    const rumor_graph_t *g = t->graph;
    double op = g->m > 2000 ? 0.15 : 0.6;
    for (int i = 0; i < g->n; i++)
        for (long p = g->off[i]; p < g->off[i + 1]; p++)
            if (g->adj[p] > i) {
                double x1, y1, x2, y2;
                node_xy(t, i, &x1, &y1);
                node_xy(t, g->adj[p], &x2, &y2);
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                           "stroke=\"#4a6fa5\" stroke-opacity=\"%.2f\"/>\n",
                        x1, y1, x2, y2, op);
            }
    double rad = t->n > 128 ? 2 : (t->n > 32 ? 4 : 8);
    for (int i = 0; i < t->n; i++) {
        double x, y;
        node_xy(t, i, &x, &y);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.0f\" fill=\"#f4a261\" "
                   "stroke=\"#333\"><title>peer %d, degree %d</title></circle>\n",
                x, y, rad, i, rumor_graph_degree(t->graph, i));
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"c\">%d peers, %ld links%s</text></g>\n", PW / 2,
            PH - 10, t->n, g->m, t->period > 1 ? " (union over a period)" : "");
}

/* plot area inside a panel at x offset ox */
#define L 60
#define R (PW - 20)
#define T 40
#define B (PH - 50)

static void axes(FILE *f, int ox, const char *title, const char *xl, const char *yl)
{
    fprintf(f, "<g transform=\"translate(%d,0)\"><text x=\"%d\" y=\"24\" class=\"h\">%s</text>\n",
            ox, PW / 2, title);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n",
            L, T, R - L, B - T);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"c\">%s</text>\n", (L + R) / 2, PH - 12, xl);
    fprintf(f, "<text x=\"14\" y=\"%d\" class=\"c\" transform=\"rotate(-90 14 %d)\">%s</text>\n",
            (T + B) / 2, (T + B) / 2, yl);
}

static void panel_spectrum(FILE *f, const rumor_topo_analysis_t *a)
{
    int eig = !isnan(a->lambda2);
    axes(f, PW, eig ? "spectrum of W" : "singular values of P - 11'/n", "index (ascending)",
         eig ? "eigenvalue" : "singular value");
    double lo = eig ? -1 : 0, hi = 1;
#define YV(v) (B - ((v)-lo) / (hi - lo) * (B - T))
    for (double v = lo; v <= hi + 1e-9; v += 0.5)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"r\">%.1f</text>"
                   "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                L - 4, YV(v) + 4, v, L, R, YV(v), YV(v));
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c0392b\" "
               "stroke-dasharray=\"4 3\"/><text x=\"%d\" y=\"%.1f\" class=\"r\" fill=\"#c0392b\">"
               "rho %.4f</text>\n",
            L, R, YV(a->rho), YV(a->rho), R - 4, YV(a->rho) - 4, a->rho);
    if (eig)
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c0392b\" "
                   "stroke-dasharray=\"4 3\"/>\n",
                L, R, YV(-a->rho), YV(-a->rho));
    if (a->eigs && a->neigs > 0) {
        int step = a->neigs > 2000 ? a->neigs / 2000 : 1;
        for (int i = 0; i < a->neigs; i += step) {
            double x = L + (a->neigs > 1 ? (double)i / (a->neigs - 1) : 0.5) * (R - L);
            double v = a->eigs[i] < lo ? lo : (a->eigs[i] > hi ? hi : a->eigs[i]);
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.6\" fill=\"#2c3e50\"/>\n", x, YV(v));
        }
    } else if (eig) {
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"c\">lambda_2 = %.6f</text>\n", (L + R) / 2,
                YV(a->lambda2) + 16, a->lambda2);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"c\">lambda_n = %.6f</text>\n", (L + R) / 2,
                YV(a->lambda_min) - 6, a->lambda_min);
    }
#undef YV
    fprintf(f, "</g>\n");
}

static void panel_decay(FILE *f, const rumor_topo_analysis_t *a)
{
    axes(f, 2 * PW, "consensus: measured vs rho^k", "round k",
         "log10 ||x_k - mean|| / ||x_0 - mean||");
    int K = a->sim_rounds > 0 ? a->sim_rounds : 1;
    double lo = -16, hi = 0;
#define XK(k) (L + (double)(k) / K * (R - L))
#define YL(v) (B - ((v)-lo) / (hi - lo) * (B - T))
    for (int e = -16; e <= 0; e += 4)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"r\">%d</text>"
                   "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                L - 4, YL(e) + 4, e, L, R, YL(e), YL(e));
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"c\">0</text><text x=\"%d\" y=\"%d\" "
               "class=\"c\">%d</text>\n",
            L, B + 14, R, B + 14, K);
    if (a->sim_rounds > 0) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"#2c3e50\" stroke-width=\"2\" points=\"");
        for (int k = 0; k <= a->sim_rounds; k++) {
            double v = a->sim_err[k] > 1e-16 ? log10(a->sim_err[k]) : -16;
            fprintf(f, "%.1f,%.1f ", XK(k), YL(v));
        }
        fprintf(f, "\"/>\n");
    }
    /* the prediction rho^k (per round; exact sequences drop at the period) */
    fprintf(f, "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-dasharray=\"5 4\" points=\"");
    for (int k = 0; k <= K; k++) {
        double v = a->rho > 0 ? k * log10(a->rho) : (k ? -16 : 0);
        if (a->exact_after > 0)
            v = k >= a->exact_after ? -16 : 0;
        fprintf(f, "%.1f,%.1f ", XK(k), YL(v < lo ? lo : v));
    }
    fprintf(f, "\"/>\n<text x=\"%d\" y=\"%d\" class=\"r\">measured (solid), rho^k (dashed)</text>\n",
            R - 4, T + 16);
#undef XK
#undef YL
    fprintf(f, "</g>\n");
}

int rumor_topo_write_svg(const char *path, const rumor_topo_result_t *r)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return rumor_err_sys(RUMOR_ESYS, "%s", path);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            3 * PW, PH, 3 * PW, PH);
    fprintf(f, "<style>.h{font-weight:bold;text-anchor:middle}.c{text-anchor:middle}"
               ".r{text-anchor:end}</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    panel_graph(f, r);
    panel_spectrum(f, &r->an);
    panel_decay(f, &r->an);
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return rumor_err_sys(RUMOR_EIO, "%s: write failed", path);
    return 0;
}

/* Mixing matrices: local schemes, the triplet builder, checks and sparse
 * products (see weights.h). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"

#define SUM_TOL 1e-12

static const char *const scheme_names[] = { "mh", "maxdeg", "uniform", "bestconst",
                                            "fmmc", "file", "native" };

int rumor_mix_parse_scheme(const char *name, rumor_mix_scheme *out)
{
    for (int s = 0; s <= RUMOR_MIX_FMMC; s++)
        if (!strcmp(name, scheme_names[s])) {
            *out = (rumor_mix_scheme)s;
            return 0;
        }
    return rumor_err_set(RUMOR_EINVAL,
                         "unknown weights '%s' (expected mh, maxdeg, uniform, bestconst, fmmc or "
                         "file:PATH)",
                         name);
}

const char *rumor_mix_scheme_name(rumor_mix_scheme s)
{
    return (unsigned)s <= RUMOR_MIX_NATIVE ? scheme_names[s] : "?";
}

double rumor_mix_mh_weight(int deg_i, int deg_j)
{
    return 1.0 / (1.0 + (deg_i > deg_j ? deg_i : deg_j));
}

/* Allocates an empty W with room for nnz off-diagonal entries. */
static rumor_mix_t *mix_alloc(int n, long nnz)
{
    rumor_mix_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->n = n;
    w->nnz = nnz;
    w->off = calloc((size_t)n + 1, sizeof *w->off);
    w->col = malloc((size_t)(nnz + 1) * sizeof *w->col);
    w->val = malloc((size_t)(nnz + 1) * sizeof *w->val);
    w->diag = calloc((size_t)n, sizeof *w->diag);
    if (!w->off || !w->col || !w->val || !w->diag)
        rumor_mix_destroy(&w);
    return w;
}

void rumor_mix_destroy(rumor_mix_t **wp)
{
    if (!wp || !*wp)
        return;
    free((*wp)->off);
    free((*wp)->col);
    free((*wp)->val);
    free((*wp)->diag);
    free(*wp);
    *wp = NULL;
}

void rumor_mix_free_seq(rumor_mix_t ***w, int count)
{
    if (!w || !*w)
        return;
    for (int k = 0; k < count; k++)
        rumor_mix_destroy(&(*w)[k]);
    free(*w);
    *w = NULL;
}

/* Neumaier's compensated sum, so that a row of 10^4 weights 1/n still sums
 * to 1 within 1e-12. */
typedef struct {
    double s, c;
} ksum_t;

static void kadd(ksum_t *k, double x)
{
    double t = k->s + x;
    if (fabs(k->s) >= fabs(x))
        k->c += (k->s - t) + x;
    else
        k->c += (x - t) + k->s;
    k->s = t;
}

static double row_offsum(const rumor_mix_t *w, int i)
{
    ksum_t k = { 0, 0 };
    for (long p = w->off[i]; p < w->off[i + 1]; p++)
        kadd(&k, w->val[p]);
    return k.s + k.c;
}

int rumor_mix_from_graph(const rumor_graph_t *g, rumor_mix_scheme s, rumor_mix_t **out)
{
    *out = NULL;
    if (s == RUMOR_MIX_BESTCONST)
        return rumor_mix_bestconst(g, out);
    if (s == RUMOR_MIX_FMMC)
        return rumor_mix_fmmc(g, 0, out);
    if (s != RUMOR_MIX_MH && s != RUMOR_MIX_MAXDEG && s != RUMOR_MIX_UNIFORM)
        return rumor_err_set(RUMOR_EINVAL, "weights '%s' cannot be computed from a graph",
                             rumor_mix_scheme_name(s));
    int dmin, dmax;
    rumor_graph_degree_range(g, &dmin, &dmax);
    if (s == RUMOR_MIX_UNIFORM && dmin != dmax)
        return rumor_err_set(RUMOR_EINVAL,
                             "uniform weights need a regular graph; degrees range over [%d, %d] "
                             "(use mh or maxdeg)",
                             dmin, dmax);
    rumor_mix_t *w = mix_alloc(g->n, 2 * g->m);
    if (!w)
        return rumor_err_set(RUMOR_ENOMEM, "weights: out of memory (%d peers)", g->n);
    memcpy(w->off, g->off, ((size_t)g->n + 1) * sizeof *w->off);
    memcpy(w->col, g->adj, (size_t)(2 * g->m) * sizeof *w->col);
    for (int i = 0; i < g->n; i++) {
        int di = rumor_graph_degree(g, i);
        for (long p = g->off[i]; p < g->off[i + 1]; p++)
            w->val[p] = s == RUMOR_MIX_MH ? rumor_mix_mh_weight(di, rumor_graph_degree(g, g->adj[p]))
                                          : 1.0 / (1.0 + dmax);
        w->diag[i] = 1.0 - row_offsum(w, i);
    }
    w->symmetric = 1;
    *out = w;
    return 0;
}

typedef struct {
    int r, c;
    long idx;
} trip_t;

static int cmp_trip(const void *a, const void *b)
{
    const trip_t *x = a, *y = b;
    if (x->r != y->r)
        return x->r < y->r ? -1 : 1;
    if (x->c != y->c)
        return x->c < y->c ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* "file:12: " when a line is known, else "" (for messages). */
static const char *where(char *buf, size_t len, const char *what, const int *line, long k)
{
    if (line && line[k] > 0)
        snprintf(buf, len, "%s:%d: ", what ? what : "weights", line[k]);
    else if (what)
        snprintf(buf, len, "%s: ", what);
    else
        buf[0] = 0;
    return buf;
}

int rumor_mix_build(int n, long count, const int *row, const int *col, const double *val,
                    const int *line, const char *what, rumor_mix_t **out)
{
    *out = NULL;
    char loc[512];
    if (n < 1 || n > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "%sn = %d is outside [1, %d]",
                             where(loc, sizeof loc, what, NULL, 0), n, RUMOR_TOPO_MAX_NODES);
    trip_t *t = malloc((size_t)(count + 1) * sizeof *t);
    if (!t)
        return rumor_err_set(RUMOR_ENOMEM, "weights: out of memory (%ld entries)", count);
    long offd = 0;
    for (long k = 0; k < count; k++) {
        if (row[k] < 0 || row[k] >= n || col[k] < 0 || col[k] >= n) {
            free(t);
            return rumor_err_set(RUMOR_EINVAL, "%sentry (%d,%d) names a peer outside [0, %d)",
                                 where(loc, sizeof loc, what, line, k), row[k], col[k], n);
        }
        if (!isfinite(val[k])) {
            free(t);
            return rumor_err_set(RUMOR_EINVAL, "%sweight of (%d,%d) is not a finite number",
                                 where(loc, sizeof loc, what, line, k), row[k], col[k]);
        }
        t[k] = (trip_t){ row[k], col[k], k };
        offd += row[k] != col[k];
    }
    qsort(t, (size_t)count, sizeof *t, cmp_trip);
    for (long k = 1; k < count; k++)
        if (t[k].r == t[k - 1].r && t[k].c == t[k - 1].c) {
            char first[64] = "";
            if (line && line[t[k - 1].idx] > 0)
                snprintf(first, sizeof first, " (first at line %d)", line[t[k - 1].idx]);
            int rc = rumor_err_set(RUMOR_EINVAL, "%sentry (%d,%d) is given twice%s",
                                   where(loc, sizeof loc, what, line, t[k].idx), t[k].r, t[k].c,
                                   first);
            free(t);
            return rc;
        }
    rumor_mix_t *w = mix_alloc(n, offd);
    unsigned char *has_diag = calloc((size_t)n, 1);
    if (!w || !has_diag) {
        free(t);
        free(has_diag);
        rumor_mix_destroy(&w);
        return rumor_err_set(RUMOR_ENOMEM, "weights: out of memory (%d peers)", n);
    }
    long p = 0;
    for (long k = 0; k < count; k++) {
        if (t[k].r == t[k].c) {
            w->diag[t[k].r] = val[t[k].idx];
            has_diag[t[k].r] = 1;
            continue;
        }
        w->off[t[k].r + 1]++;
        w->col[p] = t[k].c;
        w->val[p++] = val[t[k].idx];
    }
    for (int i = 0; i < n; i++)
        w->off[i + 1] += w->off[i];
    for (int i = 0; i < n; i++)
        if (!has_diag[i])
            w->diag[i] = 1.0 - row_offsum(w, i);
    free(t);
    free(has_diag);
    *out = w;
    return 0;
}

/* Finds W_ij (i != j) by binary search; 0 when absent. */
static double entry(const rumor_mix_t *w, int i, int j)
{
    long lo = w->off[i], hi = w->off[i + 1];
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (w->col[mid] == j)
            return w->val[mid];
        if (w->col[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0.0;
}

int rumor_mix_check(rumor_mix_t *w, int need_symmetric, int allow_neg)
{
    int n = w->n;
    for (int i = 0; i < n; i++) {
        if (!isfinite(w->diag[i]))
            return rumor_err_set(RUMOR_EINVAL, "W(%d,%d) is not finite", i, i);
        if (w->diag[i] < 0 && allow_neg == RUMOR_MIX_NONNEG)
            return rumor_err_set(RUMOR_EINVAL,
                                 "W(%d,%d) = %.17g is negative: peer %d's weights sum to more "
                                 "than 1",
                                 i, i, w->diag[i], i);
        for (long p = w->off[i]; p < w->off[i + 1]; p++) {
            if (!isfinite(w->val[p]))
                return rumor_err_set(RUMOR_EINVAL, "W(%d,%d) is not finite", i, w->col[p]);
            if (w->val[p] < 0 && allow_neg != RUMOR_MIX_SIGNED)
                return rumor_err_set(RUMOR_EINVAL, "W(%d,%d) = %.17g is negative", i, w->col[p],
                                     w->val[p]);
        }
        ksum_t k = { 0, 0 };
        kadd(&k, w->diag[i]);
        kadd(&k, row_offsum(w, i));
        if (fabs(k.s + k.c - 1.0) > SUM_TOL)
            return rumor_err_set(RUMOR_EINVAL, "row %d of W sums to %.17g, not 1 (within %g)", i,
                                 k.s + k.c, SUM_TOL);
    }
    ksum_t *cs = n > 0 ? calloc((size_t)n, sizeof *cs) : NULL;
    if (!cs)
        return rumor_err_set(RUMOR_ENOMEM, "weights: out of memory");
    for (int i = 0; i < n; i++) {
        kadd(&cs[i], w->diag[i]);
        for (long p = w->off[i]; p < w->off[i + 1]; p++)
            kadd(&cs[w->col[p]], w->val[p]);
    }
    for (int j = 0; j < n; j++)
        if (fabs(cs[j].s + cs[j].c - 1.0) > SUM_TOL) {
            int rc = rumor_err_set(RUMOR_EINVAL,
                                   "column %d of W sums to %.17g, not 1 (within %g): W is not "
                                   "doubly stochastic",
                                   j, cs[j].s + cs[j].c, SUM_TOL);
            free(cs);
            return rc;
        }
    free(cs);
    w->symmetric = 1;
    for (int i = 0; i < n && w->symmetric; i++)
        for (long p = w->off[i]; p < w->off[i + 1]; p++) {
            double a = w->val[p], b = entry(w, w->col[p], i);
            if (fabs(a - b) > SUM_TOL) {
                w->symmetric = 0;
                if (need_symmetric)
                    return rumor_err_set(RUMOR_EINVAL,
                                         "W is not symmetric: W(%d,%d) = %.17g but W(%d,%d) = "
                                         "%.17g",
                                         i, w->col[p], a, w->col[p], i, b);
                break;
            }
        }
    return 0;
}

int rumor_mix_on_graph(const rumor_mix_t *w, const rumor_graph_t *g, int *bi, int *bj)
{
    for (int i = 0; i < w->n; i++)
        for (long p = w->off[i]; p < w->off[i + 1]; p++)
            if (w->val[p] != 0 && !rumor_graph_has_edge(g, i, w->col[p])) {
                *bi = i;
                *bj = w->col[p];
                return 0;
            }
    return 1;
}

int rumor_mix_support(rumor_mix_t *const *w, int count, rumor_graph_t **out)
{
    /* Every non-zero W_ij is a link whichever way it points; the graph
     * builder merges i-j with j-i. */
    rumor_edges_t e = { 0 };
    for (int k = 0; k < count; k++)
        for (int i = 0; i < w[k]->n; i++)
            for (long p = w[k]->off[i]; p < w[k]->off[i + 1]; p++)
                if (w[k]->val[p] != 0) {
                    int rc = rumor_edges_add(&e, i, w[k]->col[p], NAN, 0);
                    if (rc < 0) {
                        rumor_edges_free(&e);
                        return rc;
                    }
                }
    int rc = rumor_graph_from_edges(w[0]->n, &e, out);
    rumor_edges_free(&e);
    return rc;
}

void rumor_mix_apply(const rumor_mix_t *w, const double *x, double *y)
{
    for (int i = 0; i < w->n; i++) {
        double s = w->diag[i] * x[i];
        for (long p = w->off[i]; p < w->off[i + 1]; p++)
            s += w->val[p] * x[w->col[p]];
        y[i] = s;
    }
}

void rumor_mix_apply_t(const rumor_mix_t *w, const double *x, double *y)
{
    for (int i = 0; i < w->n; i++)
        y[i] = w->diag[i] * x[i];
    for (int i = 0; i < w->n; i++)
        for (long p = w->off[i]; p < w->off[i + 1]; p++)
            y[w->col[p]] += w->val[p] * x[i];
}

void rumor_mix_to_dense(const rumor_mix_t *w, double *a)
{
    size_t n = (size_t)w->n;
    memset(a, 0, n * n * sizeof *a);
    for (size_t i = 0; i < n; i++) {
        a[i + i * n] = w->diag[i];
        for (long p = w->off[i]; p < w->off[i + 1]; p++)
            a[i + (size_t)w->col[p] * n] = w->val[p];
    }
}

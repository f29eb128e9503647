/* Weights that need the spectrum: the best constant edge weight (Xiao &
 * Boyd 2004) and the fastest mixing Markov chain (Boyd, Diaconis & Xiao
 * 2004) by projected subgradient (see weights.h). Best constant takes the
 * Laplacian's extreme eigenvalues from the closed form when the graph has
 * one (ring, torus, hypercube, grid, ...: a ring of 2^20 peers in well under
 * a second), else from LAPACK or Lanczos.
 *
 * FMMC minimises rho(W) = max(lambda_2, -lambda_n) over symmetric W with
 * the graph's sparsity, W 1 = 1, W >= 0. With p_l the weight of edge
 * l = {i, j}, W = I - sum_l p_l (e_i - e_j)(e_i - e_j)^T, and a subgradient
 * of rho is -(u_i - u_j)^2 (u the unit eigenvector of lambda_2) when lambda_2
 * dominates, +(v_i - v_j)^2 (v that of lambda_n) otherwise. Steps shrink as
 * 1/sqrt(k); after each, p is projected back onto {p >= 0, sum of p around
 * each peer <= 1}. The iteration starts at Metropolis–Hastings and returns
 * the best W it met, so it is never worse than mh. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "closedform.h"
#include "spectrum.h"
#include "weights.h"

#define FMMC_DENSE_MAX 256

/* L x for the graph Laplacian. */
static void op_lap(void *ctx, const double *x, double *y)
{
    const rumor_graph_t *g = ctx;
    for (int i = 0; i < g->n; i++) {
        double s = (double)rumor_graph_degree(g, i) * x[i];
        for (long p = g->off[i]; p < g->off[i + 1]; p++)
            s -= x[g->adj[p]];
        y[i] = s;
    }
}

/* lambda_1(L) and lambda_{n-1}(L) from the closed form of the max-degree
 * weights I - L/(1 + d_max), when the graph has a symmetry group
 * (closedform.h): 1 when found, 0 when not. */
static int laplacian_closed_form(const rumor_graph_t *g, int dmax, double *lmax, double *lfied)
{
    rumor_mix_t *w = NULL;
    RUMOR_CHECK(rumor_mix_from_graph(g, RUMOR_MIX_MAXDEG, &w));
    rumor_topo_shape_t sh;
    rumor_cf_spectrum_t cf;
    int rc = rumor_mix_find_shape(&w, 1, NULL, 0, 0, &sh);
    if (rc > 0 && (rc = rumor_mix_closed_form(&w, 1, &sh, 0, &cf)) >= 0) {
        *lfied = (1.0 + dmax) * cf.one_minus_l2; /* no cancellation: 1e-11 keeps its digits */
        *lmax = (1.0 + dmax) * (2 - cf.one_plus_ln);
        rc = 1;
    }
    rumor_mix_destroy(&w);
    return rc;
}

int rumor_mix_bestconst(const rumor_graph_t *g, rumor_mix_t **out)
{
    *out = NULL;
    int n = g->n, dmin, dmax, cf;
    double lmax, lfied;
    rumor_graph_degree_range(g, &dmin, &dmax);
    RUMOR_CHECK(cf = laplacian_closed_form(g, dmax, &lmax, &lfied));
    if (cf) {
        /* lmax and lfied from the closed form */
    } else if (n <= 2048) {
        double *a = calloc((size_t)n * n, sizeof *a), *ev = malloc((size_t)n * sizeof *ev);
        if (!a || !ev) {
            free(a), free(ev);
            return rumor_err_set(RUMOR_ENOMEM, "bestconst: out of memory");
        }
        for (int i = 0; i < n; i++) {
            a[(size_t)i * n + i] = rumor_graph_degree(g, i);
            for (long p = g->off[i]; p < g->off[i + 1]; p++)
                a[(size_t)g->adj[p] * n + i] = -1;
        }
        int rc = rumor_topo_eig_dense(n, a, ev, 0);
        lfied = n > 1 ? ev[1] : 0;
        lmax = ev[n - 1];
        free(a), free(ev);
        RUMOR_CHECK(rc);
    } else {
        RUMOR_CHECK(rumor_topo_lanczos(n, op_lap, (void *)g, 1, 1e-10 * (2.0 * dmax), 200000,
                                       &lmax, &lfied, NULL, NULL, NULL));
    }
    if (!(lfied > 1e-12))
        return rumor_err_set(RUMOR_EINVAL, "bestconst: the graph is not connected");
    double alpha = 2.0 / (lmax + lfied);
    RUMOR_CHECK(rumor_mix_from_graph(g, RUMOR_MIX_MH, out));
    rumor_mix_t *w = *out;
    for (long p = 0; p < w->nnz; p++)
        w->val[p] = alpha;
    for (int i = 0; i < n; i++)
        w->diag[i] = 1.0 - alpha * rumor_graph_degree(g, i);
    return 0;
}

/* Projects p onto {p >= 0, sum around each peer <= 1}: clip, then push
 * each over-full peer's edges onto its simplex, a few sweeps, then scale
 * what is left over so that the result is feasible whatever happened. */
static void project(const rumor_graph_t *g, const long *eid, double *p, long m, double *buf)
{
    for (long l = 0; l < m; l++)
        if (p[l] < 0)
            p[l] = 0;
    for (int sweep = 0; sweep < 20; sweep++) {
        int bad = 0;
        for (int i = 0; i < g->n; i++) {
            long lo = g->off[i], d = g->off[i + 1] - lo;
            double s = 0;
            for (long q = 0; q < d; q++)
                s += p[eid[lo + q]];
            if (s <= 1)
                continue;
            bad = 1;
            /* simplex projection: subtract tau, clip at 0, so the sum is 1 */
            for (long q = 0; q < d; q++)
                buf[q] = p[eid[lo + q]];
            double tau, a = 0, b = 1; /* bisection: sum(max(p - tau, 0)) = 1 */
            for (long q = 0; q < d; q++)
                b = buf[q] > b ? buf[q] : b;
            for (int it = 0; it < 80; it++) {
                tau = 0.5 * (a + b);
                double sum = 0;
                for (long q = 0; q < d; q++)
                    sum += buf[q] > tau ? buf[q] - tau : 0;
                if (sum > 1)
                    a = tau;
                else
                    b = tau;
            }
            for (long q = 0; q < d; q++)
                p[eid[lo + q]] = buf[q] > b ? buf[q] - b : 0;
        }
        if (!bad)
            break;
    }
    for (int i = 0; i < g->n; i++) {
        double s = 0;
        for (long q = g->off[i]; q < g->off[i + 1]; q++)
            s += p[eid[q]];
        if (s > 1)
            for (long q = g->off[i]; q < g->off[i + 1]; q++)
                p[eid[q]] /= s * (1 + 1e-15);
    }
}

/* Sets W from edge weights p. */
static void set_w(rumor_mix_t *w, const long *eid, const double *p)
{
    for (int i = 0; i < w->n; i++) {
        double s = 0;
        for (long q = w->off[i]; q < w->off[i + 1]; q++) {
            w->val[q] = p[eid[q]];
            s += w->val[q];
        }
        w->diag[i] = 1.0 - s;
    }
}

static void op_mix(void *ctx, const double *x, double *y)
{
    rumor_mix_apply(ctx, x, y);
}

/* lambda_2, lambda_n and their unit eigenvectors u, v. */
static int extremes(rumor_mix_t *w, double *dense, double *ev, double *l2, double *ln, double *u,
                    double *v)
{
    int n = w->n;
    if (dense) {
        rumor_mix_to_dense(w, dense);
        RUMOR_CHECK(rumor_topo_eig_dense(n, dense, ev, 1));
        *l2 = ev[n - 2];
        *ln = ev[0];
        memcpy(u, dense + (size_t)(n - 2) * n, (size_t)n * sizeof *u);
        memcpy(v, dense, (size_t)n * sizeof *v);
        return 0;
    }
    int rc = rumor_topo_lanczos(n, op_mix, w, 1, 1e-9, 20000, l2, ln, u, v, NULL);
    return rc == RUMOR_EINVAL ? 0 : rc; /* unconverged estimates still steer */
}

int rumor_mix_fmmc(const rumor_graph_t *g, int iters, rumor_mix_t **out)
{
    *out = NULL;
    int n = g->n;
    long m = g->m;
    if (iters <= 0)
        iters = n <= FMMC_DENSE_MAX ? 300 : 100;
    rumor_mix_t *w = NULL, *best = NULL;
    RUMOR_CHECK(rumor_mix_from_graph(g, RUMOR_MIX_MH, &w));
    RUMOR_CHECK(rumor_mix_from_graph(g, RUMOR_MIX_MH, &best));
    long *eid = malloc((size_t)(2 * m + 1) * sizeof *eid);
    double *p = malloc((size_t)(m + 1) * sizeof *p), *gr = malloc((size_t)(m + 1) * sizeof *gr);
    double *u = malloc((size_t)n * sizeof *u), *v = malloc((size_t)n * sizeof *v);
    double *buf = malloc((size_t)n * sizeof *buf), *ev = malloc((size_t)n * sizeof *ev);
    double *dense = n <= FMMC_DENSE_MAX ? malloc((size_t)n * n * sizeof *dense) : NULL;
    int rc = 0;
    if (!eid || !p || !gr || !u || !v || !buf || !ev || (n <= FMMC_DENSE_MAX && !dense)) {
        rc = rumor_err_set(RUMOR_ENOMEM, "fmmc: out of memory");
        goto out;
    }
    /* number the edges; eid maps each CSR slot to its edge */
    long next = 0;
    for (int i = 0; i < n; i++)
        for (long q = g->off[i]; q < g->off[i + 1]; q++) {
            int j = g->adj[q];
            if (i < j) {
                eid[q] = next;
                p[next++] = w->val[q];
            } else {
                long lo = g->off[j], hi = g->off[j + 1];
                while (lo < hi) {
                    long mid = lo + (hi - lo) / 2;
                    if (g->adj[mid] < i)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                eid[q] = eid[lo];
            }
        }
    double pn = 0;
    for (long l = 0; l < m; l++)
        pn += p[l] * p[l];
    double step0 = 0.5 * sqrt(pn), best_rho = INFINITY;
    for (int k = 1; k <= iters; k++) {
        double l2, ln;
        if ((rc = extremes(w, dense, ev, &l2, &ln, u, v)) < 0)
            goto out;
        double rho = l2 > -ln ? l2 : -ln;
        if (rho < best_rho) {
            best_rho = rho;
            memcpy(best->val, w->val, (size_t)w->nnz * sizeof *w->val);
            memcpy(best->diag, w->diag, (size_t)n * sizeof *w->diag);
        }
        const double *x = l2 >= -ln ? u : v;
        double sign = l2 >= -ln ? -1 : 1, gn = 0;
        for (int i = 0; i < n; i++)
            for (long q = g->off[i]; q < g->off[i + 1]; q++)
                if (i < g->adj[q]) {
                    double dlt = x[i] - x[g->adj[q]];
                    gr[eid[q]] = sign * dlt * dlt;
                    gn += dlt * dlt * dlt * dlt;
                }
        if (!(gn > 0))
            break;
        double step = step0 / sqrt((double)k) / sqrt(gn);
        for (long l = 0; l < m; l++)
            p[l] -= step * gr[l];
        project(g, eid, p, m, buf);
        set_w(w, eid, p);
    }
    best->symmetric = 1;
    rc = rumor_mix_check(best, 1, 0);
    if (rc >= 0) {
        *out = best;
        best = NULL;
    }
out:
    rumor_mix_destroy(&w);
    rumor_mix_destroy(&best);
    free(eid), free(p), free(gr), free(u), free(v), free(buf), free(ev), free(dense);
    return rc;
}

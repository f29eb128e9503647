/* Spectral analysis of topologies: picks the dense or sparse path, handles
 * symmetric, non-symmetric and time-varying mixing, and runs the consensus
 * simulation that checks the prediction (see spectrum.h). */
#include "config.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "spectrum.h"

#define EXACT_TOL 1e-12  /* contraction below this = exact averaging */
#define SPARSE_TOL 1e-10 /* residual of the sparse eigensolvers */
#define SPARSE_MAXMV 200000L

int rumor_eig_parse_method(const char *name, rumor_eig_method *out)
{
    static const char *const names[] = { "auto", "dense", "lanczos", "arpack" };
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) {
            *out = (rumor_eig_method)i;
            return 0;
        }
    return rumor_err_set(RUMOR_EINVAL, "unknown method '%s' (expected auto, dense, lanczos or arpack)",
                         name);
}

long rumor_topo_rounds_to_eps(double rho, double eps)
{
    if (!(rho < 1))
        return -1;
    if (rho <= EXACT_TOL)
        return 1;
    double r = ceil(log(1.0 / eps) / log(1.0 / rho) - 1e-9);
    return r < 1 ? 1 : (r > 9e15 ? -1 : (long)r);
}

int rumor_topo_eig_dense(int n, double *a, double *ev, int vec)
{
    int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, vec ? 'V' : 'N', 'U', n, a, n, ev);
    if (info != 0)
        return rumor_err_set(RUMOR_EINVAL, "dsyevd failed (info %d)", info);
    return 0;
}

/* ---- operators for the sparse paths */
typedef struct {
    rumor_mix_t *const *w;
    int period;
    double *tmp;
} prod_ctx_t;

static void op_w(void *ctx, const double *x, double *y)
{
    const prod_ctx_t *c = ctx;
    rumor_mix_apply(c->w[0], x, y);
}

/* y = P^T P x with P = W_{p-1} ... W_0 (deflation done by the solver) */
static void op_ptp(void *ctx, const double *x, double *y)
{
    const prod_ctx_t *c = ctx;
    int n = c->w[0]->n;
    double *a = c->tmp, *b = y;
    memcpy(a, x, (size_t)n * sizeof *a);
    for (int k = 0; k < c->period; k++) {
        rumor_mix_apply(c->w[k], a, b);
        double *t = a;
        a = b;
        b = t;
    }
    for (int k = c->period - 1; k >= 0; k--) {
        rumor_mix_apply_t(c->w[k], a, b);
        double *t = a;
        a = b;
        b = t;
    }
    if (a != y)
        memcpy(y, a, (size_t)n * sizeof *y);
}

static int sparse_solve(rumor_eig_method m, int n, rumor_linop_fn op, void *ctx, double *lmax,
                        double *lmin, long *mv, char *name, size_t len)
{
    /* AUTO takes our Lanczos: on the 65,536-peer benchmarks it needs a
     * quarter of ARPACK's products (its restarts keep more Ritz vectors) */
    if (m == RUMOR_EIG_ARPACK) {
        snprintf(name, len, "sparse (ARPACK dsaupd)");
        return rumor_topo_arpack(n, op, ctx, 1, SPARSE_TOL, SPARSE_MAXMV, lmax, lmin, NULL, NULL,
                                 mv);
    }
    snprintf(name, len, "sparse (Lanczos)");
    return rumor_topo_lanczos(n, op, ctx, 1, SPARSE_TOL, SPARSE_MAXMV, lmax, lmin, NULL, NULL, mv);
}

int rumor_mix_rho(const rumor_mix_t *w, rumor_eig_method method, double *l2, double *ln,
                  double *rho)
{
    int n = w->n;
    if (method == RUMOR_EIG_DENSE || (method == RUMOR_EIG_AUTO && n <= 2048)) {
        double *a = malloc((size_t)n * n * sizeof *a), *ev = malloc((size_t)n * sizeof *ev);
        if (!a || !ev) {
            free(a), free(ev);
            return rumor_err_set(RUMOR_ENOMEM, "spectrum: out of memory for a dense %dx%d W", n, n);
        }
        rumor_mix_to_dense(w, a);
        int rc = rumor_topo_eig_dense(n, a, ev, 0);
        if (rc >= 0) {
            *l2 = n > 1 ? ev[n - 2] : 0;
            *ln = ev[0];
        }
        free(a), free(ev);
        RUMOR_CHECK(rc);
    } else {
        rumor_mix_t *wm = (rumor_mix_t *)w; /* the operator only reads it */
        prod_ctx_t c = { &wm, 1, NULL };
        char name[48];
        long mv;
        RUMOR_CHECK(sparse_solve(method, n, op_w, &c, l2, ln, &mv, name, sizeof name));
    }
    *rho = fabs(*l2) > fabs(*ln) ? fabs(*l2) : fabs(*ln);
    return 0;
}

/* Dense contraction of one period: singular values of P - 11^T/n. */
static int dense_contraction(rumor_mix_t *const *w, int period, rumor_topo_analysis_t *a)
{
    int n = w[0]->n;
    size_t N = (size_t)n;
    double *p = malloc(N * N * sizeof *p), *col = malloc(N * sizeof *col);
    double *sv = malloc(N * sizeof *sv);
    if (!p || !col || !sv) {
        free(p), free(col), free(sv);
        return rumor_err_set(RUMOR_ENOMEM, "spectrum: out of memory for a dense %dx%d product", n,
                             n);
    }
    /* column j of P = W_{p-1} ... W_0 e_j */
    for (size_t j = 0; j < N; j++) {
        double *x = p + j * N;
        memset(x, 0, N * sizeof *x);
        x[j] = 1;
        for (int k = 0; k < period; k++) {
            rumor_mix_apply(w[k], x, col);
            memcpy(x, col, N * sizeof *x);
        }
        for (size_t i = 0; i < N; i++)
            x[i] -= 1.0 / n;
    }
    int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', n, n, p, n, sv, NULL, 1, NULL, 1);
    free(p), free(col);
    if (info != 0) {
        free(sv);
        return rumor_err_set(RUMOR_EINVAL, "dgesdd failed (info %d)", info);
    }
    a->contraction = sv[0];
    /* ascending, for the plots */
    for (int i = 0; i < n / 2; i++) {
        double t = sv[i];
        sv[i] = sv[n - 1 - i];
        sv[n - 1 - i] = t;
    }
    a->eigs = sv;
    a->neigs = n;
    snprintf(a->method, sizeof a->method, "dense (dgesdd)");
    return 0;
}

/* Simulates x <- W_k x from a random x_0 and records the relative
 * disagreement per round. */
static int simulate(const rumor_topo_t *t, const rumor_analyze_opts_t *o, rumor_topo_analysis_t *a)
{
    int n = t->n;
    long nnz = 0;
    for (int k = 0; k < t->period; k++)
        nnz += t->w[k]->nnz + n;
    long cap = o->sim_rounds > 0 ? o->sim_rounds : 1000;
    long budget = (long)(3e8 / (double)(nnz + 1)); /* keep it to about a second */
    long want = a->rounds_to_eps > 0 ? a->rounds_to_eps + t->period : cap;
    if (want < 4L * t->period)
        want = 4L * t->period;
    long R = want < cap ? want : cap;
    if (R > budget)
        R = budget < 2 ? 2 : budget;
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    a->sim_err = malloc(((size_t)R + 1) * sizeof *a->sim_err);
    if (!x || !y || !a->sim_err) {
        free(x), free(y);
        return rumor_err_set(RUMOR_ENOMEM, "simulation: out of memory");
    }
    rumor_topo_rng_t r;
    rumor_topo_rng_seed(&r, o->seed, 99);
    for (int i = 0; i < n; i++)
        x[i] = rumor_topo_rng_normal(&r);
    double mean = 0;
    for (int i = 0; i < n; i++)
        mean += x[i] / n;
    double e0 = 0;
    for (int i = 0; i < n; i++)
        e0 += (x[i] - mean) * (x[i] - mean);
    e0 = sqrt(e0);
    a->sim_err[0] = 1;
    long k;
    for (k = 1; k <= R; k++) {
        rumor_mix_apply(t->w[(k - 1) % t->period], x, y);
        double e = 0;
        for (int i = 0; i < n; i++)
            e += (y[i] - mean) * (y[i] - mean);
        a->sim_err[k] = sqrt(e) / e0;
        double *tt = x;
        x = y;
        y = tt;
        if (a->sim_err[k] < 1e-15 && k % t->period == 0) {
            k++;
            break;
        }
    }
    a->sim_rounds = (int)(k - 1);
    /* the rate over the second half, in whole periods */
    long hi = a->sim_rounds / t->period * t->period, lo = hi / 2 / t->period * t->period;
    if (hi > lo && a->sim_err[lo] > 0)
        a->sim_rate = a->sim_err[hi] > 1e-300 ? pow(a->sim_err[hi] / a->sim_err[lo], 1.0 / (hi - lo))
                                              : 0;
    else
        a->sim_rate = NAN;
    free(x), free(y);
    return 0;
}

int rumor_topo_analyze(const rumor_topo_t *t, const rumor_analyze_opts_t *opts,
                       rumor_topo_analysis_t *a)
{
    rumor_analyze_opts_t o = opts ? *opts : (rumor_analyze_opts_t){ 0 };
    if (o.dense_max <= 0)
        o.dense_max = 2048;
    if (!(o.eps > 0 && o.eps < 1))
        o.eps = 1e-6;
    if (!o.seed)
        o.seed = 1;
    memset(a, 0, sizeof *a);
    a->n = t->n;
    a->edges = t->graph->m;
    rumor_graph_degree_range(t->graph, &a->degree_min, &a->degree_max);
    a->degree_mean = 2.0 * t->graph->m / t->n;
    a->period = t->period;
    a->eps = o.eps;
    a->lambda2 = a->lambda_min = NAN;
    a->exact_after = -1;
    a->symmetric = 1;
    for (int k = 0; k < t->period; k++) {
        a->symmetric &= t->w[k]->symmetric;
        if (k == 0)
            for (int i = 0; i < t->n; i++)
                a->neg_diag += t->w[k]->diag[i] < 0;
    }
    int n = t->n, dense = o.method == RUMOR_EIG_DENSE ||
                          (o.method == RUMOR_EIG_AUTO && n <= o.dense_max);
    if (dense && (double)n * n * 8 > 8e9)
        return rumor_err_set(RUMOR_EINVAL, "dense path: n = %d needs %.0f GB; use --method lanczos",
                             n, (double)n * n * 8 / 1e9);
    double t0 = rumor_now();
    int static_sym = t->period == 1 && a->symmetric;
    if (static_sym && dense) {
        double *m = malloc((size_t)n * n * sizeof *m), *ev = malloc((size_t)n * sizeof *ev);
        if (!m || !ev) {
            free(m), free(ev);
            return rumor_err_set(RUMOR_ENOMEM, "spectrum: out of memory for a dense %dx%d W", n,
                                 n);
        }
        rumor_mix_to_dense(t->w[0], m);
        int rc = rumor_topo_eig_dense(n, m, ev, 0);
        free(m);
        if (rc < 0) {
            free(ev);
            return rc;
        }
        a->eigs = ev;
        a->neigs = n;
        a->lambda2 = ev[n - 2];
        a->lambda_min = ev[0];
        snprintf(a->method, sizeof a->method, "dense (LAPACK dsyevd)");
    } else if (static_sym) {
        prod_ctx_t c = { t->w, 1, NULL };
        RUMOR_CHECK(sparse_solve(o.method, n, op_w, &c, &a->lambda2, &a->lambda_min, &a->matvecs,
                                 a->method, sizeof a->method));
    } else if (dense) {
        RUMOR_CHECK(dense_contraction(t->w, t->period, a));
    } else {
        prod_ctx_t c = { t->w, t->period, malloc((size_t)n * sizeof(double)) };
        if (!c.tmp)
            return rumor_err_set(RUMOR_ENOMEM, "spectrum: out of memory");
        double lmax, lmin;
        /* our Lanczos: its tolerance is absolute, which matters when the
         * product is (nearly) exact and every eigenvalue is about 0 */
        int rc = rumor_topo_lanczos(n, op_ptp, &c, 1, 1e-13, SPARSE_MAXMV, &lmax, &lmin, NULL,
                                    NULL, &a->matvecs);
        free(c.tmp);
        RUMOR_CHECK(rc);
        a->contraction = sqrt(lmax > 0 ? lmax : 0);
        snprintf(a->method, sizeof a->method, "sparse (Lanczos on P^T P)");
    }
    a->seconds = rumor_now() - t0;
    if (static_sym) {
        a->contraction = fabs(a->lambda2) > fabs(a->lambda_min) ? fabs(a->lambda2)
                                                                 : fabs(a->lambda_min);
        /* a connected W has lambda_2 < 1; 1 within rounding means it is not */
        if (a->lambda2 > 1 - 1e-13)
            rumor_warn("%s: lambda_2 = 1: the weights do not connect the peers", t->spec);
    }
    if (a->contraction <= EXACT_TOL) {
        a->contraction = 0;
        a->exact_after = t->period;
    }
    a->rho = a->contraction > 0 ? pow(a->contraction, 1.0 / t->period) : 0;
    a->spectral_gap = 1 - a->rho;
    if (a->exact_after > 0)
        a->rounds_to_eps = a->exact_after;
    else {
        long per = rumor_topo_rounds_to_eps(a->contraction, o.eps);
        a->rounds_to_eps = per < 0 ? -1 : per * t->period;
        if (t->period == 1)
            a->rounds_to_eps = per;
    }
    if (o.sim_rounds >= 0)
        RUMOR_CHECK(simulate(t, &o, a));
    return 0;
}

void rumor_topo_analysis_free(rumor_topo_analysis_t *a)
{
    if (!a)
        return;
    free(a->eigs);
    free(a->sim_err);
    a->eigs = a->sim_err = NULL;
}

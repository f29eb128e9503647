/* Spectral analysis of topologies: picks the dense or sparse path, handles
 * symmetric, non-symmetric and time-varying mixing, and runs the consensus
 * simulation that checks the prediction (see spectrum.h). */
#include "config.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "closedform.h"
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

/* ceil(log(1/eps) / log(1/(1 - gap))), with log1p keeping a tiny gap's digits. */
static long rounds_from_gap(double gap, double eps)
{
    if (!(gap > 0))
        return -1;
    if (gap >= 1 - EXACT_TOL)
        return 1;
    double r = ceil(log(1.0 / eps) / -log1p(-gap) - 1e-9);
    return r < 1 ? 1 : (r > 9e15 ? -1 : (long)r);
}

long rumor_topo_rounds_to_eps(double rho, double eps)
{
    if (!(rho < 1))
        return -1;
    return rounds_from_gap(1 - rho, eps);
}

long rumor_topo_analysis_rounds(const rumor_topo_analysis_t *a, double eps)
{
    if (a->exact_after > 0)
        return a->exact_after;
    long per = rounds_from_gap(a->contraction_gap, eps);
    return per < 0 || per > 9e15 / a->period ? -1 : per * a->period;
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
                        double *lmin, long *mv, char *name, size_t len, rumor_eig_ctl_t *ctl)
{
    /* AUTO takes our Lanczos: on the 65,536-peer benchmarks it needs a
     * quarter of ARPACK's products (its restarts keep more Ritz vectors) */
    if (m == RUMOR_EIG_ARPACK) {
        snprintf(name, len, "sparse (ARPACK dsaupd)");
        return rumor_topo_arpack_ctl(n, op, ctx, 1, SPARSE_TOL, SPARSE_MAXMV, lmax, lmin, NULL,
                                     NULL, mv, ctl);
    }
    snprintf(name, len, "sparse (Lanczos)");
    return rumor_topo_lanczos_ctl(n, op, ctx, 1, SPARSE_TOL, SPARSE_MAXMV, lmax, lmin, NULL, NULL,
                                  mv, ctl);
}

int rumor_mix_rho(const rumor_mix_t *w, rumor_eig_method method, double *l2, double *ln,
                  double *rho)
{
    int n = w->n;
    rumor_mix_t *wm = (rumor_mix_t *)w; /* only read */
    rumor_topo_shape_t sh;
    int found = method == RUMOR_EIG_AUTO && w->symmetric
                    ? rumor_mix_find_shape(&wm, 1, NULL, 0, 0, &sh)
                    : 0;
    RUMOR_CHECK(found);
    if (found) {
        rumor_cf_spectrum_t cf;
        RUMOR_CHECK(rumor_mix_closed_form(&wm, 1, &sh, 0, &cf));
        *l2 = cf.lambda2;
        *ln = cf.lambda_min;
    } else if (method == RUMOR_EIG_DENSE || (method == RUMOR_EIG_AUTO && n <= 2048)) {
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
        prod_ctx_t c = { &wm, 1, NULL };
        char name[48];
        long mv;
        rumor_eig_ctl_t ctl = { .time_limit = RUMOR_TOPO_TIME_LIMIT };
        RUMOR_CHECK(sparse_solve(method, n, op_w, &c, l2, ln, &mv, name, sizeof name, &ctl));
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

/* The closed form, when every matrix of t has a symmetry group: 1 when it
 * filled a, 0 when t has none. */
static int closed_form(const rumor_topo_t *t, rumor_topo_analysis_t *a, double *cgap)
{
    rumor_topo_shape_t sh;
    int found = rumor_mix_find_shape(t->w, t->period, t->family, t->rows, t->cols, &sh);
    if (found <= 0)
        return found;
    rumor_cf_spectrum_t cf;
    RUMOR_CHECK(rumor_mix_closed_form(t->w, t->period, &sh, 1, &cf));
    char name[40];
    snprintf(a->method, sizeof a->method, "closed-form (%s)",
             rumor_topo_shape_name(&sh, name, sizeof name));
    a->eigs = cf.eigs;
    a->neigs = t->n;
    if (cf.symmetric) {
        a->lambda2 = cf.lambda2;
        a->lambda_min = cf.lambda_min;
    }
    a->contraction = cf.contraction > 0 ? cf.contraction : 0;
    *cgap = cf.gap < 1 ? cf.gap : 1;
    return 1;
}

/* The message of a solve stopped by the time limit: what it knows. */
static int timed_out(const rumor_topo_t *t, const rumor_eig_ctl_t *ctl, int static_sym,
                     const rumor_analyze_opts_t *o)
{
    double eps = o->eps;
    const rumor_eig_progress_t *p = &ctl->last;
    char known[320] = "nothing yet (no estimate finished)";
    if (!isnan(p->lmax) && static_sym) {
        double rho = fmax(p->lmax, -p->lmin);
        long r = rumor_topo_rounds_to_eps(rho, eps);
        char rounds[96] = "";
        if (r > 0)
            snprintf(rounds, sizeof rounds, ", and eps = %g takes at least %ld rounds", eps, r);
        snprintf(known, sizeof known,
                 "lambda_2 >= %.10f and lambda_n <= %.10f, so rho >= %.10f (spectral gap at most "
                 "%.3g)%s",
                 p->lmax, p->lmin, rho, 1 - rho, rounds);
    } else if (!isnan(p->lmax)) {
        double c = sqrt(p->lmax > 0 ? p->lmax : 0);
        snprintf(known, sizeof known,
                 "the contraction of one period is at least %.10f (rho >= %.10f per round)", c,
                 pow(c, 1.0 / t->period));
    }
    char res[96] = "";
    if (isfinite(p->rmax) && isfinite(p->rmin))
        snprintf(res, sizeof res, " (residuals %.2g, %.2g; target %.2g)", p->rmax, p->rmin,
                 p->tol);
    return rumor_err_set(RUMOR_ETIMEOUT,
                         "%s: spectrum: stopped at the time limit of %g s after %ld operator "
                         "products of %s, before the estimates converged%s. Known so far: %s. "
                         "Raise --time-limit (0 = no limit)%s",
                         t->spec, ctl->time_limit, p->matvecs, p->method, res, known,
                         o->method == RUMOR_EIG_AUTO
                             ? ""
                             : ", or use --method auto, which takes the closed form where W "
                               "has one");
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
    if (o.time_limit == 0)
        o.time_limit = RUMOR_TOPO_TIME_LIMIT;
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
    double t0 = rumor_now(), cgap = NAN;
    int static_sym = t->period == 1 && a->symmetric, done = 0;
    rumor_eig_ctl_t ctl = { .time_limit = o.time_limit, .progress = o.progress,
                            .arg = o.progress_arg, .what = t->spec, .squared = !static_sym };
    if (o.method == RUMOR_EIG_AUTO)
        RUMOR_CHECK(done = closed_form(t, a, &cgap));
    if (!done && dense && (double)n * n * 8 > 8e9)
        return rumor_err_set(RUMOR_EINVAL, "dense path: n = %d needs %.0f GB; use --method lanczos",
                             n, (double)n * n * 8 / 1e9);
    if (done) {
        /* closed form: a filled in */
    } else if (static_sym && dense) {
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
        int rc = sparse_solve(o.method, n, op_w, &c, &a->lambda2, &a->lambda_min, &a->matvecs,
                              a->method, sizeof a->method, &ctl);
        if (rc == RUMOR_ETIMEOUT)
            return timed_out(t, &ctl, 1, &o);
        RUMOR_CHECK(rc);
    } else if (dense) {
        RUMOR_CHECK(dense_contraction(t->w, t->period, a));
    } else {
        prod_ctx_t c = { t->w, t->period, malloc((size_t)n * sizeof(double)) };
        if (!c.tmp)
            return rumor_err_set(RUMOR_ENOMEM, "spectrum: out of memory");
        double lmax, lmin;
        /* our Lanczos: its tolerance is absolute, which matters when the
         * product is (nearly) exact and every eigenvalue is about 0 */
        int rc = rumor_topo_lanczos_ctl(n, op_ptp, &c, 1, 1e-13, SPARSE_MAXMV, &lmax, &lmin, NULL,
                                        NULL, &a->matvecs, &ctl);
        free(c.tmp);
        if (rc == RUMOR_ETIMEOUT)
            return timed_out(t, &ctl, 0, &o);
        RUMOR_CHECK(rc);
        a->contraction = sqrt(lmax > 0 ? lmax : 0);
        snprintf(a->method, sizeof a->method, "sparse (Lanczos on P^T P)");
    }
    a->seconds = rumor_now() - t0;
    if (static_sym) {
        if (!done)
            a->contraction = fabs(a->lambda2) > fabs(a->lambda_min) ? fabs(a->lambda2)
                                                                     : fabs(a->lambda_min);
        /* a connected W has lambda_2 < 1; 1 within rounding means it is not */
        if (a->lambda2 > 1 - 1e-13)
            rumor_warn("%s: lambda_2 = 1: the weights do not connect the peers", t->spec);
    }
    if (isnan(cgap))
        cgap = 1 - a->contraction;
    if (a->contraction <= EXACT_TOL) {
        a->contraction = 0;
        cgap = 1;
        a->exact_after = t->period;
    }
    a->contraction_gap = cgap;
    a->rho = a->contraction > 0 ? pow(a->contraction, 1.0 / t->period) : 0;
    /* 1 - c^(1/p) = -expm1(log1p(-gap) / p): no cancellation when c is near 1 */
    a->spectral_gap = t->period == 1 ? cgap : -expm1(log1p(-cgap) / t->period);
    a->rounds_to_eps = rumor_topo_analysis_rounds(a, o.eps);
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

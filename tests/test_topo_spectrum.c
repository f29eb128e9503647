/* Spectra of topologies against closed forms and against each other:
 * ring, torus and hypercube with Metropolis–Hastings weights, the complete
 * graph, the directed exponential graph (circulant), exact averaging of the
 * one-peer exponential and Base-(k+1) graphs, and the dense, Lanczos and
 * ARPACK paths agreeing on random graphs. */
#include "config.h"

#include <complex.h>
#include <stdlib.h>

#include "spectrum.h"
#include "blas_tune.h"
#include "testutil.h"

static const double PI = 3.14159265358979323846;

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static rumor_topo_t *parse(const char *spec)
{
    rumor_topo_t *t = NULL;
    int rc = rumor_topo_parse(spec, &t);
    if (rc < 0)
        fprintf(stderr, "parse %s: %s\n", spec, rumor_err_msg());
    return t;
}

static rumor_analyze_opts_t opts(rumor_eig_method m)
{
    return (rumor_analyze_opts_t){ .method = m, .sim_rounds = -1 };
}

/* Compares the whole dense spectrum with a closed-form list. */
static void check_spectrum(const char *spec, double *want, int n)
{
    rumor_topo_t *t = parse(spec);
    CHECK(t != NULL);
    if (!t)
        return;
    rumor_analyze_opts_t o = opts(RUMOR_EIG_DENSE);
    rumor_topo_analysis_t a;
    CHECK_OK(rumor_topo_analyze(t, &o, &a));
    qsort(want, (size_t)n, sizeof *want, cmp_dbl);
    CHECK(a.neigs == n);
    double err = 0;
    for (int i = 0; i < n && i < a.neigs; i++)
        err = fmax(err, fabs(a.eigs[i] - want[i]));
    CHECKF(err < 1e-12, "%s: spectrum off by %g", spec, err);
    double rho = fmax(fabs(want[n - 2]), fabs(want[0]));
    CHECK_CLOSE(a.lambda2, want[n - 2], 1e-12, 0);
    CHECK_CLOSE(a.lambda_min, want[0], 1e-12, 0);
    CHECK_CLOSE(a.rho, rho, 1e-12, 0);
    CHECK_CLOSE(a.spectral_gap, 1 - rho, 1e-12, 0);
    CHECK(a.rounds_to_eps == (rho == 0 ? 1 : (long)ceil(log(1e6) / log(1 / rho))));
    rumor_topo_analysis_free(&a);
    rumor_topo_destroy(&t);
}

static void test_ring(int n)
{
    double *want = malloc((size_t)n * sizeof *want);
    for (int k = 0; k < n; k++)
        want[k] = 1.0 / 3 + 2.0 / 3 * cos(2 * PI * k / n);
    char spec[64];
    snprintf(spec, sizeof spec, "ring:%d", n);
    check_spectrum(spec, want, n);
    free(want);
}

static void test_torus(int r, int c)
{
    double *want = malloc((size_t)r * c * sizeof *want);
    for (int a = 0; a < r; a++)
        for (int b = 0; b < c; b++)
            want[a * c + b] = (1 + 2 * cos(2 * PI * a / r) + 2 * cos(2 * PI * b / c)) / 5;
    char spec[64];
    snprintf(spec, sizeof spec, "torus:%dx%d", r, c);
    check_spectrum(spec, want, r * c);
    free(want);
}

/* Hypercube Q_d with MH weights 1/(d+1): W = (I + A)/(d+1), and A has
 * eigenvalue d - 2k with multiplicity C(d, k). */
static void test_hypercube(int d)
{
    int n = 1 << d;
    double *want = malloc((size_t)n * sizeof *want);
    for (int x = 0; x < n; x++)
        want[x] = (1.0 + d - 2.0 * __builtin_popcount((unsigned)x)) / (d + 1);
    char spec[64];
    snprintf(spec, sizeof spec, "hypercube:%d", d);
    check_spectrum(spec, want, n);
    free(want);
}

static void test_complete(void)
{
    rumor_topo_t *t = parse("complete:8");
    rumor_analyze_opts_t o = opts(RUMOR_EIG_AUTO);
    o.sim_rounds = 0;
    rumor_topo_analysis_t a;
    CHECK_OK(rumor_topo_analyze(t, &o, &a));
    CHECK_CLOSE(t->w[0]->val[0], 1.0 / 8, 1e-15, 0);
    CHECK_CLOSE(a.rho, 0, 1e-12, 0);
    CHECK(a.exact_after == 1);
    CHECK(a.rounds_to_eps == 1);
    CHECK(a.sim_rounds >= 1 && a.sim_err[1] < 1e-14);
    rumor_topo_analysis_free(&a);
    rumor_topo_destroy(&t);
}

/* The one-peer exponential graph on 2^k peers averages exactly after k
 * rounds, talking to one peer a round. */
static void test_onepeer(int k)
{
    int n = 1 << k;
    char spec[64];
    snprintf(spec, sizeof spec, "onepeer-exp:%d", n);
    rumor_topo_t *t = parse(spec);
    CHECK(t && t->period == k);
    if (!t)
        return;
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y), mean = 0;
    unsigned long long s = 42;
    for (int i = 0; i < n; i++)
        mean += (x[i] = tu_randf(&s)) / n;
    for (int r = 0; r < k; r++) {
        for (int i = 0; i < n; i++) {
            int nb[4];
            double w[4];
            CHECK(rumor_topo_neighbors(t, i, r, nb, w, 4) == 1);
            CHECK(rumor_topo_out_neighbors(t, i, r, NULL, NULL, 0) == 1);
            y[i] = rumor_topo_self_weight(t, i, r) * x[i] + w[0] * x[nb[0]];
        }
        double *tmp = x;
        x = y;
        y = tmp;
    }
    double err = 0;
    for (int i = 0; i < n; i++)
        err = fmax(err, fabs(x[i] - mean));
    CHECKF(err < 1e-15, "onepeer-exp:%d not exact after %d rounds: %g", n, k, err);
    rumor_analyze_opts_t o = opts(RUMOR_EIG_AUTO);
    rumor_topo_analysis_t a;
    CHECK_OK(rumor_topo_analyze(t, &o, &a));
    CHECK(a.exact_after == k && a.rounds_to_eps == k && a.rho == 0);
    rumor_topo_analysis_free(&a);
    o.method = RUMOR_EIG_LANCZOS;
    CHECK_OK(rumor_topo_analyze(t, &o, &a));
    CHECK(a.exact_after == k);
    rumor_topo_analysis_free(&a);
    free(x), free(y);
    rumor_topo_destroy(&t);
}

/* Base-(k+1): degree <= k every round and exact averaging after a period,
 * for every n up to 40; checked by multiplying out the period on basis
 * vectors. */
static void test_base(void)
{
    int worst_period = 0;
    for (int k = 1; k <= 4; k++)
        for (int n = k + 1; n <= 40; n++) {
            char spec[64];
            snprintf(spec, sizeof spec, "base:%d:%d", n, k);
            rumor_topo_t *t = parse(spec);
            CHECK(t != NULL);
            if (!t)
                continue;
            int maxdeg = 0;
            for (int r = 0; r < t->period; r++)
                for (int i = 0; i < n; i++) {
                    int d = rumor_topo_neighbors(t, i, r, NULL, NULL, 0);
                    maxdeg = d > maxdeg ? d : maxdeg;
                }
            CHECKF(maxdeg <= k, "%s: degree %d > %d", spec, maxdeg, k);
            double err = 0, x[40], y[40];
            for (int j = 0; j < n; j++) {
                memset(x, 0, sizeof x);
                x[j] = 1;
                for (int r = 0; r < t->period; r++) {
                    rumor_mix_apply(t->w[r], x, y);
                    memcpy(x, y, sizeof x);
                }
                for (int i = 0; i < n; i++)
                    err = fmax(err, fabs(x[i] - 1.0 / n));
            }
            CHECKF(err < 1e-12, "%s: period product differs from J/n by %g", spec, err);
            worst_period = t->period > worst_period ? t->period : worst_period;
            rumor_topo_destroy(&t);
        }
    CHECK(worst_period <= 16);
    /* a power of k+1 takes log_{k+1} n rounds (the k-peer hyper-hypercube) */
    rumor_topo_t *t = parse("base:27:2");
    CHECK(t && t->period == 3);
    rumor_topo_destroy(&t);
}

/* Directed static exponential graph: W is circulant, so its singular values
 * are the moduli of its eigenvalues (1 + sum_m w^(j 2^m))/(tau + 1). */
static void test_exp_directed(int n)
{
    int tau = 0;
    while ((1 << tau) < n)
        tau++;
    double want = 0;
    for (int j = 1; j < n; j++) {
        double complex mu = 1;
        for (int m = 0; m < tau; m++)
            mu += cexp(I * 2 * PI * j * (1 << m) / n);
        want = fmax(want, cabs(mu) / (tau + 1));
    }
    char spec[64];
    snprintf(spec, sizeof spec, "exp:%d:directed", n);
    rumor_topo_t *t = parse(spec);
    CHECK(t != NULL);
    if (!t)
        return;
    rumor_analyze_opts_t o = opts(RUMOR_EIG_DENSE);
    rumor_topo_analysis_t a;
    CHECK_OK(rumor_topo_analyze(t, &o, &a));
    CHECK_CLOSE(a.rho, want, 1e-12, 0);
    CHECK(!a.symmetric && isnan(a.lambda2));
    rumor_topo_analysis_free(&a);
    o.method = RUMOR_EIG_LANCZOS;
    CHECK_OK(rumor_topo_analyze(t, &o, &a));
    CHECK_CLOSE(a.rho, want, 1e-8, 0);
    rumor_topo_analysis_free(&a);
    rumor_topo_destroy(&t);
}

/* Dense, Lanczos and ARPACK agree on lambda_2 and lambda_n to 1e-8. */
static void test_paths_agree(const char *spec)
{
    rumor_topo_t *t = parse(spec);
    CHECK(t != NULL);
    if (!t)
        return;
    rumor_analyze_opts_t o = opts(RUMOR_EIG_DENSE);
    rumor_topo_analysis_t d, l, p;
    CHECK_OK(rumor_topo_analyze(t, &o, &d));
    o.method = RUMOR_EIG_LANCZOS;
    CHECK_OK(rumor_topo_analyze(t, &o, &l));
    CHECKF(fabs(d.lambda2 - l.lambda2) < 1e-8, "%s: dense %.12f lanczos %.12f", spec, d.lambda2,
           l.lambda2);
    CHECKF(fabs(d.lambda_min - l.lambda_min) < 1e-8, "%s: dense %.12f lanczos %.12f", spec,
           d.lambda_min, l.lambda_min);
#ifdef HAVE_ARPACK
    o.method = RUMOR_EIG_ARPACK;
    CHECK_OK(rumor_topo_analyze(t, &o, &p));
    CHECKF(fabs(d.lambda2 - p.lambda2) < 1e-8, "%s: dense %.12f arpack %.12f", spec, d.lambda2,
           p.lambda2);
    CHECKF(fabs(d.lambda_min - p.lambda_min) < 1e-8, "%s: dense %.12f arpack %.12f", spec,
           d.lambda_min, p.lambda_min);
    rumor_topo_analysis_free(&p);
#else
    (void)p;
#endif
    rumor_topo_analysis_free(&d);
    rumor_topo_analysis_free(&l);
    rumor_topo_destroy(&t);
}

/* A time-varying product that is not exact: dense SVD and Lanczos on
 * P^T P agree. */
static void test_tv_paths(void)
{
    rumor_topo_t *t = parse("onepeer-exp:12");
    rumor_analyze_opts_t o = opts(RUMOR_EIG_DENSE);
    rumor_topo_analysis_t d, l;
    CHECK_OK(rumor_topo_analyze(t, &o, &d));
    o.method = RUMOR_EIG_LANCZOS;
    CHECK_OK(rumor_topo_analyze(t, &o, &l));
    CHECK(d.contraction > 0.01 && d.exact_after < 0);
    CHECK_CLOSE(l.contraction, d.contraction, 1e-8, 0);
    rumor_topo_analysis_free(&d);
    rumor_topo_analysis_free(&l);
    rumor_topo_destroy(&t);
}

/* The simulated decay follows rho: never faster than the bound allows... */
static void test_simulation(void)
{
    rumor_topo_t *t = parse("ring:32");
    rumor_analyze_opts_t o = { .sim_rounds = 400 };
    rumor_topo_analysis_t a;
    CHECK_OK(rumor_topo_analyze(t, &o, &a));
    CHECK(a.sim_rounds > 100);
    /* ||W^k x|| <= rho^k ||x|| on the complement of 1, for symmetric W */
    for (int k = 0; k <= a.sim_rounds; k++)
        CHECKF(a.sim_err[k] <= pow(a.rho, k) * (1 + 1e-9), "round %d: %g > %g", k, a.sim_err[k],
               pow(a.rho, k));
    CHECKF(fabs(a.sim_rate - a.rho) < 2e-3, "measured %g vs rho %g", a.sim_rate, a.rho);
    rumor_topo_analysis_free(&a);
    rumor_topo_destroy(&t);
}

int main(void)
{
    rumor_blas_set_threads(1); /* tiny BLAS calls: threads only cost here */
    test_ring(16);
    test_ring(17);
    test_ring(64);
    test_torus(4, 4);
    test_torus(3, 7);
    test_hypercube(1);
    test_hypercube(5);
    test_hypercube(8);
    test_complete();
    test_onepeer(1);
    test_onepeer(5);
    test_onepeer(10);
    test_base();
    test_exp_directed(16);
    test_exp_directed(12);
    test_paths_agree("rreg:300:4:seed=3");
    test_paths_agree("er:400:0.03:seed=2");
    test_paths_agree("ws:500:6:0.2:seed=5");
    test_paths_agree("ring:60");
    test_paths_agree("exp:256");
    test_tv_paths();
    test_simulation();
    CHECK(rumor_topo_rounds_to_eps(0.5, 1e-6) == 20);
    CHECK(rumor_topo_rounds_to_eps(1.0, 1e-6) == -1);
    CHECK(rumor_topo_rounds_to_eps(0.0, 1e-6) == 1);
    return tu_finish("test_topo_spectrum");
}

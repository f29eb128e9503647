/* Spectral analysis of a topology's mixing matrices.
 *
 * For a symmetric doubly stochastic W with eigenvalues 1 = lambda_1 >=
 * lambda_2 >= ... >= lambda_n, rho = max(|lambda_2|, |lambda_n|) =
 * ||W - 11^T/n||_2 is the factor by which the distance to consensus shrinks
 * each round, and about log(1/eps)/log(1/rho) rounds reach eps. For a
 * non-symmetric W or a time-varying sequence, rho is taken from the largest
 * singular value of (product over one period) - 11^T/n, the contraction of
 * one period, spread over its rounds; a product of exactly 11^T/n means
 * exact averaging after one period.
 *
 * Two paths: dense (LAPACKE dsyevd / dgesdd, all eigenvalues, n up to a few
 * thousand) and sparse (thick-restart Lanczos with full reorthogonalization,
 * ours, or ARPACK's dsaupd when built with it) for tens of thousands of
 * peers. The sparse paths work on the complement of the all-ones vector, so
 * the trivial eigenvalue 1 never gets in the way. */
#ifndef RUMOR_TOPO_SPECTRUM_H
#define RUMOR_TOPO_SPECTRUM_H

#include "topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = A x for a symmetric operator A of size n. */
typedef void (*rumor_linop_fn)(void *ctx, const double *x, double *y);

typedef enum rumor_eig_method {
    RUMOR_EIG_AUTO = 0, /* dense up to dense_max peers, then our Lanczos */
    RUMOR_EIG_DENSE,
    RUMOR_EIG_LANCZOS,
    RUMOR_EIG_ARPACK
} rumor_eig_method;

/* "auto", "dense", "lanczos", "arpack" */
int rumor_eig_parse_method(const char *name, rumor_eig_method *out) RUMOR_WUR;

/* Extreme eigenpairs of A restricted to the complement of the all-ones
 * vector when `deflate` (else all of R^n): *lmax, *lmin, and unit Ritz
 * vectors vmax, vmin when not NULL. Converged when both residuals are below
 * `tol` (absolute); RUMOR_ETIMEOUT-free: gives up after `maxmv` products with
 * RUMOR_EINVAL ("did not converge") and the best estimates filled in.
 * *mv (may be NULL) gets the number of products used. */
int rumor_topo_lanczos(int n, rumor_linop_fn op, void *ctx, int deflate, double tol, long maxmv,
                       double *lmax, double *lmin, double *vmax, double *vmin, long *mv) RUMOR_WUR;
/* Same through ARPACK (RUMOR_ENOTSUP when not built with it). */
int rumor_topo_arpack(int n, rumor_linop_fn op, void *ctx, int deflate, double tol, long maxmv,
                      double *lmax, double *lmin, double *vmax, double *vmin, long *mv) RUMOR_WUR;

/* All eigenvalues (ascending) of the symmetric n*n column-major matrix a,
 * which is destroyed; with vectors when vec != 0 (then a holds them). */
int rumor_topo_eig_dense(int n, double *a, double *ev, int vec) RUMOR_WUR;

typedef struct rumor_analyze_opts {
    rumor_eig_method method; /* default AUTO */
    int dense_max;           /* AUTO's limit for the dense path (default 2048) */
    double eps;              /* consensus target (default 1e-6) */
    int sim_rounds;          /* consensus simulation cap; 0 = default, < 0 = off */
    uint64_t seed;           /* of the simulation's random vector (default 1) */
} rumor_analyze_opts_t;

typedef struct rumor_topo_analysis {
    int n;
    long edges;          /* undirected links (union over a period) */
    int degree_min, degree_max;
    double degree_mean;
    int period;
    int symmetric;       /* every matrix symmetric */
    int neg_diag;        /* peers with W_ii < 0 (bestconst) */
    char method[48];     /* "dense (dsyevd)", "lanczos", "arpack", ... */
    double lambda2, lambda_min; /* NAN unless static and symmetric */
    double contraction;  /* ||prod_period W - 11^T/n||_2 */
    double rho;          /* per round: contraction^(1/period) */
    double spectral_gap; /* 1 - rho */
    int exact_after;     /* rounds to exact averaging, or -1 */
    double eps;
    long rounds_to_eps;  /* -1 when rho >= 1 (never) */
    double *eigs;        /* (neigs) ascending: eigenvalues of W (dense, symmetric) or
                            singular values of the deflated product; NULL on sparse paths */
    int neigs;
    long matvecs;        /* sparse paths: operator products used */
    double seconds;      /* time spent on the spectrum */
    /* consensus simulation from a random vector */
    int sim_rounds;      /* rounds simulated (0 when off) */
    double *sim_err;     /* (sim_rounds+1) ||x_k - mean|| / ||x_0 - mean|| */
    double sim_rate;     /* measured per-round decay over the second half */
} rumor_topo_analysis_t;

/* Analyzes t; fills *a (free with rumor_topo_analysis_free). */
int rumor_topo_analyze(const rumor_topo_t *t, const rumor_analyze_opts_t *opts,
                       rumor_topo_analysis_t *a) RUMOR_WUR;
void rumor_topo_analysis_free(rumor_topo_analysis_t *a);

/* Rounds to bring the disagreement below eps at rate rho per round
 * (ceil(log(1/eps)/log(1/rho)); 1 when rho == 0; -1 when rho >= 1). */
long rumor_topo_rounds_to_eps(double rho, double eps);

/* rho = max(|lambda_2|, |lambda_n|) of a static symmetric W (the dense or
 * sparse path by `method`); used by bestconst/fmmc and the tests. */
int rumor_mix_rho(const rumor_mix_t *w, rumor_eig_method method, double *lambda2,
                  double *lambda_min, double *rho) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

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
 * Three paths: the closed form when every W has a symmetry group
 * (closedform.h: rings, tori, hypercubes, exponential and complete graphs,
 * constant-weight grids; up to 2^20 peers, checked entry by entry first),
 * dense (LAPACKE dsyevd / dgesdd, all eigenvalues, n up to a few thousand)
 * and sparse (thick-restart Lanczos with full reorthogonalization, ours, or
 * ARPACK's dsaupd when built with it) for tens of thousands of peers. The
 * sparse paths work on the complement of the all-ones vector, so the
 * trivial eigenvalue 1 never gets in the way; they report progress and stop
 * at a time limit with what they know (Ritz values bound the extremes). */
#ifndef RUMOR_TOPO_SPECTRUM_H
#define RUMOR_TOPO_SPECTRUM_H

#include "topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = A x for a symmetric operator A of size n. */
typedef void (*rumor_linop_fn)(void *ctx, const double *x, double *y);

typedef enum rumor_eig_method {
    RUMOR_EIG_AUTO = 0, /* closed form when W has a symmetry group (closedform.h), else
                           dense up to dense_max peers, then our Lanczos */
    RUMOR_EIG_DENSE,
    RUMOR_EIG_LANCZOS,
    RUMOR_EIG_ARPACK
} rumor_eig_method;

/* "auto", "dense", "lanczos", "arpack" */
int rumor_eig_parse_method(const char *name, rumor_eig_method *out) RUMOR_WUR;

/* Where a long iterative solve stands. The Ritz values bound the answer:
 * the largest eigenvalue is at least lmax and the smallest at most lmin
 * (NAN before the first estimates); they are final once both residuals are
 * below tol. */
typedef struct rumor_eig_progress {
    const char *what;   /* what is being solved (the topology's spec), or NULL */
    const char *method; /* "sparse (Lanczos)", ... */
    double seconds;     /* since the solve began */
    long matvecs;       /* operator products so far */
    double lmax, lmin;  /* current Ritz values at both ends */
    double rmax, rmin;  /* their residuals (NAN when unknown) */
    double tol;
    int squared;        /* the operator is P^T P: contraction = sqrt(lmax) */
} rumor_eig_progress_t;

typedef void (*rumor_eig_progress_fn)(void *arg, const rumor_eig_progress_t *p);

/* Limits of an iterative solve: it stops after time_limit seconds (<= 0:
 * none) with RUMOR_ETIMEOUT and the estimates so far filled in, and calls
 * progress (when not NULL) after 1, 2, 5, 10 s and every 10 s after. */
typedef struct rumor_eig_ctl {
    double time_limit;
    rumor_eig_progress_fn progress;
    void *arg;
    const char *what;        /* passed on in rumor_eig_progress_t */
    int squared;
    rumor_eig_progress_t last; /* out: where the solve stopped */
} rumor_eig_ctl_t;

/* Extreme eigenpairs of A restricted to the complement of the all-ones
 * vector when `deflate` (else all of R^n): *lmax, *lmin, and unit Ritz
 * vectors vmax, vmin when not NULL. Converged when both residuals are below
 * `tol` (absolute); gives up after `maxmv` products with RUMOR_EINVAL ("did
 * not converge") and the best estimates filled in. *mv (may be NULL) gets
 * the number of products used. */
int rumor_topo_lanczos(int n, rumor_linop_fn op, void *ctx, int deflate, double tol, long maxmv,
                       double *lmax, double *lmin, double *vmax, double *vmin, long *mv) RUMOR_WUR;
/* The same with a time limit and progress reports (ctl may be NULL). */
int rumor_topo_lanczos_ctl(int n, rumor_linop_fn op, void *ctx, int deflate, double tol,
                           long maxmv, double *lmax, double *lmin, double *vmax, double *vmin,
                           long *mv, rumor_eig_ctl_t *ctl) RUMOR_WUR;
/* Same through ARPACK (RUMOR_ENOTSUP when not built with it). */
int rumor_topo_arpack(int n, rumor_linop_fn op, void *ctx, int deflate, double tol, long maxmv,
                      double *lmax, double *lmin, double *vmax, double *vmin, long *mv) RUMOR_WUR;
int rumor_topo_arpack_ctl(int n, rumor_linop_fn op, void *ctx, int deflate, double tol,
                          long maxmv, double *lmax, double *lmin, double *vmax, double *vmin,
                          long *mv, rumor_eig_ctl_t *ctl) RUMOR_WUR;

/* All eigenvalues (ascending) of the symmetric n*n column-major matrix a,
 * which is destroyed; with vectors when vec != 0 (then a holds them). */
int rumor_topo_eig_dense(int n, double *a, double *ev, int vec) RUMOR_WUR;

typedef struct rumor_analyze_opts {
    rumor_eig_method method; /* default AUTO */
    int dense_max;           /* AUTO's limit for the dense path (default 2048) */
    double eps;              /* consensus target (default 1e-6) */
    int sim_rounds;          /* consensus simulation cap; 0 = default, < 0 = off */
    uint64_t seed;           /* of the simulation's random vector (default 1) */
    double time_limit;       /* seconds an iterative solve may take: 0 = the default
                                (RUMOR_TOPO_TIME_LIMIT), < 0 = none */
    rumor_eig_progress_fn progress; /* reports on long iterative solves (may be NULL) */
    void *progress_arg;
} rumor_analyze_opts_t;

#define RUMOR_TOPO_TIME_LIMIT 60.0

typedef struct rumor_topo_analysis {
    int n;
    long edges;          /* undirected links (union over a period) */
    int degree_min, degree_max;
    double degree_mean;
    int period;
    int symmetric;       /* every matrix symmetric */
    int neg_diag;        /* peers with W_ii < 0 (bestconst) */
    char method[48];     /* "dense (LAPACK dsyevd)", "sparse (Lanczos)",
                            "closed-form (circulant)", ... */
    double lambda2, lambda_min; /* NAN unless static and symmetric */
    double contraction;  /* ||prod_period W - 11^T/n||_2 */
    double rho;          /* per round: contraction^(1/period) */
    double spectral_gap; /* 1 - rho */
    double contraction_gap; /* 1 - contraction, without cancellation on the closed-form
                               path (where rho may be 1 - 1e-11) */
    int exact_after;     /* rounds to exact averaging, or -1 */
    double eps;
    long rounds_to_eps;  /* -1 when rho >= 1 (never) */
    double *eigs;        /* (neigs) ascending: eigenvalues of W (symmetric) or singular
                            values of the deflated product; NULL on sparse paths */
    int neigs;
    long matvecs;        /* sparse paths: operator products used */
    double seconds;      /* time spent on the spectrum */
    /* consensus simulation from a random vector */
    int sim_rounds;      /* rounds simulated (0 when off) */
    double *sim_err;     /* (sim_rounds+1) ||x_k - mean|| / ||x_0 - mean|| */
    double sim_rate;     /* measured per-round decay over the second half */
} rumor_topo_analysis_t;

/* Analyzes t; fills *a (free with rumor_topo_analysis_free). An iterative
 * solve that reaches the time limit fails with RUMOR_ETIMEOUT and a message
 * saying what is known so far (bounds on lambda_2, lambda_n and rho). */
int rumor_topo_analyze(const rumor_topo_t *t, const rumor_analyze_opts_t *opts,
                       rumor_topo_analysis_t *a) RUMOR_WUR;
void rumor_topo_analysis_free(rumor_topo_analysis_t *a);

/* Rounds to bring the disagreement below eps at rate rho per round
 * (ceil(log(1/eps)/log(1/rho)); 1 when rho == 0; -1 when rho >= 1). */
long rumor_topo_rounds_to_eps(double rho, double eps);
/* Rounds of an analysis to eps (its exact_after, else whole periods at its
 * contraction, from contraction_gap so that a gap of 1e-11 keeps its digits);
 * -1 when it never gets there. */
long rumor_topo_analysis_rounds(const rumor_topo_analysis_t *a, double eps);

/* rho = max(|lambda_2|, |lambda_n|) of a static symmetric W (the dense or
 * sparse path by `method`; AUTO tries the closed form first and gives the
 * sparse path RUMOR_TOPO_TIME_LIMIT); used by bestconst/fmmc, the weights
 * file reader and the tests. */
int rumor_mix_rho(const rumor_mix_t *w, rumor_eig_method method, double *lambda2,
                  double *lambda_min, double *rho) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

/* Mixing matrices W: sparse rows, the weight schemes, checks, and the
 * weights file that rumor-peer reads.
 *
 * A peer i mixes x_i <- sum_j W_ij x_j: row i lists whom it receives from.
 * W is stored as CSR rows without the diagonal plus a separate diagonal, so
 * node i's whole row is diag[i] and (col, val)[off[i] .. off[i+1]).
 *
 * Schemes for a static undirected graph (d_i = degree of i):
 *   mh         Metropolis–Hastings, W_ij = 1/(1+max(d_i,d_j)) (the default;
 *              each peer computes it from its own and its neighbours' degrees)
 *   maxdeg     W_ij = 1/(1+d_max) (the +1 keeps the chain aperiodic)
 *   uniform    W_ij = 1/(1+d) on a d-regular graph (an error otherwise)
 *   bestconst  W = I - a L with a = 2/(lambda_1(L) + lambda_{n-1}(L)), the best
 *              constant edge weight (Xiao & Boyd 2004); self-weights may be
 *              negative (the star's centre: (3 - n)/(n + 1)), which averaging
 *              allows as long as rho(W - 11^T/n) < 1, as it is here
 *   fmmc       fastest mixing Markov chain (Boyd, Diaconis & Xiao 2004) by
 *              projected subgradient from the MH weights; never worse than mh
 * W_ii = 1 - sum_j W_ij in every case. */
#ifndef RUMOR_TOPO_WEIGHTS_H
#define RUMOR_TOPO_WEIGHTS_H

#include <stdio.h>

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_mix {
    int n;
    long nnz;     /* off-diagonal entries */
    long *off;    /* (n+1) */
    int *col;     /* (nnz) sorted within a row */
    double *val;  /* (nnz) */
    double *diag; /* (n) */
    int symmetric; /* 1 when W == W^T exactly (set by rumor_mix_check) */
} rumor_mix_t;

typedef enum rumor_mix_scheme {
    RUMOR_MIX_MH = 0,
    RUMOR_MIX_MAXDEG,
    RUMOR_MIX_UNIFORM,
    RUMOR_MIX_BESTCONST,
    RUMOR_MIX_FMMC,
    RUMOR_MIX_FILE, /* weights given by the user (edge file or weights file) */
    RUMOR_MIX_NATIVE /* fixed by a time-varying construction */
} rumor_mix_scheme;

/* "mh", "maxdeg", "uniform", "bestconst", "fmmc" -> scheme; RUMOR_EINVAL
 * naming the bad word otherwise ("file:" is handled by the caller). */
int rumor_mix_parse_scheme(const char *name, rumor_mix_scheme *out) RUMOR_WUR;
const char *rumor_mix_scheme_name(rumor_mix_scheme s);

/* The Metropolis–Hastings weight of edge i-j from the two degrees: what a
 * peer computes locally, identical to what rumor_mix_from_graph builds. */
double rumor_mix_mh_weight(int deg_i, int deg_j);

/* W on graph g with one of the first five schemes. bestconst and fmmc need
 * the spectrum and may take seconds on large graphs. */
int rumor_mix_from_graph(const rumor_graph_t *g, rumor_mix_scheme s, rumor_mix_t **out) RUMOR_WUR;

/* Builds W from (row, col, value) triplets. Entries with row == col set the
 * diagonal; a row without one gets 1 - (sum of its other entries). Repeats
 * and ids outside [0, n) are errors; `line` (may be NULL) names the source
 * line of each triplet in messages, with `what` (a file name) in front. */
int rumor_mix_build(int n, long count, const int *row, const int *col, const double *val,
                    const int *line, const char *what, rumor_mix_t **out) RUMOR_WUR;

/* Frees W and sets *w to NULL; safe on NULL and twice. */
void rumor_mix_destroy(rumor_mix_t **w);

/* What rumor_mix_check lets below zero. */
#define RUMOR_MIX_NONNEG 0   /* nothing */
#define RUMOR_MIX_NEG_DIAG 1 /* self-weights */
#define RUMOR_MIX_SIGNED 2   /* any entry; the caller must then check that W
                                contracts (rumor_mix_check_signed) */

/* Checks what D-PSGD needs, naming the first violation: entries finite;
 * signs as `allow_neg` says; rows and columns summing to 1 within 1e-12;
 * symmetric when need_symmetric. Sets w->symmetric. */
int rumor_mix_check(rumor_mix_t *w, int need_symmetric, int allow_neg) RUMOR_WUR;

/* The rule for weights from outside (weights files): a W without negative
 * entries needs only rumor_mix_check (it cannot blow up); one with a
 * negative entry (bestconst's self-weights, or any other) must be symmetric
 * and contract, rho(W - 11^T/n) < 1 (checked: closed form, LAPACK or
 * Lanczos), or averaging with it does not converge. Messages name the
 * negative entry and rho. */
int rumor_mix_check_signed(rumor_mix_t *w) RUMOR_WUR;

/* 1 when every entry of W_ij (i != j) is on an edge of g. Otherwise 0 and
 * *bi, *bj name an entry that is not. */
int rumor_mix_on_graph(const rumor_mix_t *w, const rumor_graph_t *g, int *bi, int *bj);

/* The undirected support of W (i-j when W_ij or W_ji is non-zero) as a
 * graph; for a sequence, the union over all of them. */
int rumor_mix_support(rumor_mix_t *const *w, int count, rumor_graph_t **out) RUMOR_WUR;

/* y = W x and y = W^T x (x and y of length n, not aliased). */
void rumor_mix_apply(const rumor_mix_t *w, const double *x, double *y);
void rumor_mix_apply_t(const rumor_mix_t *w, const double *x, double *y);

/* Writes W into the n*n column-major array a (zeroed first). */
void rumor_mix_to_dense(const rumor_mix_t *w, double *a);

/* ---- the weights file (format in docs/rumor-topo.md):
 *   rumor-weights 1 n=N period=P
 *   round K            (starts round K's matrix; optional when P = 1)
 *   i j w              (W_ij, %.17g; every non-zero, both (i,j) and (j,i))
 * with '#' comments. Row i is everything peer i needs for round K. */
int rumor_mix_write(FILE *f, rumor_mix_t *const *w, int period, const char *comment) RUMOR_WUR;
int rumor_mix_save(const char *path, rumor_mix_t *const *w, int period,
                   const char *comment) RUMOR_WUR;
/* Reads a weights file: *out gets *period matrices (free each, then the
 * array). Errors name the file and line. Checks each matrix with
 * rumor_mix_check_signed, so whatever rumor_mix_write wrote (bestconst's
 * negative self-weights included) reads back. */
int rumor_mix_load(const char *path, rumor_mix_t ***out, int *period) RUMOR_WUR;

/* ---- time-varying constructions: *out gets *period matrices */
/* One-peer exponential graph (Ying et al. 2021): at round k peer i averages
 * with peer i + 2^(k mod tau) (mod n), tau = ceil(log2 n). Exact average
 * after tau rounds when n is a power of two. */
int rumor_mix_onepeer_exp(int n, rumor_mix_t ***out, int *period) RUMOR_WUR;
/* Base-(k+1) graph (Takezawa et al. 2023): every round's graph has degree at
 * most k, and the product of one period is exactly 11^T/n for any n. */
int rumor_mix_base(int n, int k, rumor_mix_t ***out, int *period) RUMOR_WUR;
/* Static exponential graph as published (Ying et al. 2021): directed, peer i
 * receives from i + 2^m (mod n), m < tau, each with weight 1/(tau+1). */
int rumor_mix_exp_directed(int n, rumor_mix_t ***out, int *period) RUMOR_WUR;
/* Frees an array of `count` matrices and sets *w to NULL. */
void rumor_mix_free_seq(rumor_mix_t ***w, int count);

/* ---- weights that need the spectrum (fmmc.c) */
/* Best constant edge weight a (Xiao & Boyd): W = I - a L. */
int rumor_mix_bestconst(const rumor_graph_t *g, rumor_mix_t **out) RUMOR_WUR;
/* FMMC by projected subgradient; `iters` <= 0 picks a default. Returns the
 * best W met, so rho(W) <= rho(MH). */
int rumor_mix_fmmc(const rumor_graph_t *g, int iters, rumor_mix_t **out) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

/* Closed-form spectra of mixing matrices that have a symmetry group.
 *
 * Number the peers in mixed radix, i = (i_0, ..., i_{k-1}) with digit t in
 * Z_{m_t}, the last digit fastest (torus:RxC's peer r*C + c is (r, c)). A W
 * with W_ij = c(j - i), digit by digit modulo m_t, commutes with every shift
 * of the group G = Z_{m_0} x ... x Z_{m_{k-1}}, so the characters
 * chi_f(d) = exp(2 pi i sum_t f_t d_t / m_t) are its eigenvectors and
 *   lambda_f = sum_d c(d) chi_f(d)
 * its eigenvalues: the DFT of the first row for a ring (k = 1), the 2-D DFT
 * for a torus, the Walsh-Hadamard transform for a hypercube (all m_t = 2).
 * Such matrices are normal and commute with each other, so for a sequence
 * W_0 .. W_{p-1} of them the singular values of the product on the
 * complement of 1 are |prod_k lambda_f(W_k)|, f != 0. Ring, torus,
 * hypercube, complete and exponential graphs (undirected or directed) and
 * the one-peer exponential sequence are of this kind under any weights that
 * treat all peers alike: mh, maxdeg, uniform and bestconst on these regular
 * graphs, not fmmc (its subgradient steps follow one eigenvector and break
 * the symmetry).
 *
 * The grid RxC is not, but W = I - a L with one weight a on every link
 * (maxdeg and bestconst; mh on a path) has the eigenvalues
 * 1 - a (4 sin^2(pi u / 2R) + 4 sin^2(pi v / 2C)) of the product of two paths.
 *
 * A shape is never taken from a name alone: it is used only after every
 * entry of every matrix has been checked against it (O(nnz)). All n
 * eigenvalues then cost O(n s) time for s entries a row, and O(n) memory.
 * 1 - lambda_f is summed as sum_d c(d) (2 sin^2(theta/2) - i sin theta), so a
 * gap of 1e-11 (a ring of 2^20 peers) keeps all its digits. */
#ifndef RUMOR_TOPO_CLOSEDFORM_H
#define RUMOR_TOPO_CLOSEDFORM_H

#include <stddef.h>

#include "weights.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_SHAPE_MAXF 20

typedef enum rumor_shape_kind {
    RUMOR_SHAPE_CAYLEY = 1, /* W_ij = c(j - i) in Z_{m_0} x ... x Z_{m_{k-1}} */
    RUMOR_SHAPE_GRID        /* W = I - a L of the m_0 x m_1 grid (k = 2) */
} rumor_shape_kind;

typedef struct rumor_topo_shape {
    rumor_shape_kind kind;
    int k;                   /* factors */
    int m[RUMOR_SHAPE_MAXF]; /* their sizes, slowest digit first; product n */
} rumor_topo_shape_t;

/* Shapes worth trying for `family` ("ring", "torus", ..., "file"; NULL when
 * unknown, which tries every factorization into one or two factors, the
 * hypercube and the grids), most likely first. Returns how many were
 * written (at most cap). */
int rumor_topo_shape_candidates(const char *family, int n, int rows, int cols,
                                rumor_topo_shape_t *out, int cap);

/* 1 when every matrix of w[0..count) has shape s, checked entry by entry
 * (entries equal within 1e-15); 0 when not; RUMOR_ENOMEM. */
int rumor_mix_has_shape(rumor_mix_t *const *w, int count, const rumor_topo_shape_t *s) RUMOR_WUR;

/* The first candidate for `family` that fits: 1 (and *out), 0 when none. */
int rumor_mix_find_shape(rumor_mix_t *const *w, int count, const char *family, int rows,
                         int cols, rumor_topo_shape_t *out) RUMOR_WUR;

/* "circulant", "circulant 1024x1024", "hypercube Z_2^20", "grid 4x5" */
const char *rumor_topo_shape_name(const rumor_topo_shape_t *s, char *buf, size_t len);

typedef struct rumor_cf_spectrum {
    int symmetric;          /* one symmetric W: lambda2 and lambda_min are set */
    double lambda2, lambda_min;       /* NAN otherwise */
    double one_minus_l2, one_plus_ln; /* 1 - lambda2, 1 + lambda_min, without cancellation */
    double contraction;     /* ||W_{p-1} ... W_0 - 11^T/n||_2 */
    double gap;             /* 1 - contraction, without cancellation */
    double *eigs;           /* (n) ascending, when asked: W's eigenvalues (symmetric),
                               else the product's singular values on 1^perp and a 0 */
} rumor_cf_spectrum_t;

/* The spectrum of w[0..count), which must have shape s (rumor_mix_has_shape).
 * With want_eigs, out->eigs is allocated (the caller frees it). */
int rumor_mix_closed_form(rumor_mix_t *const *w, int count, const rumor_topo_shape_t *s,
                          int want_eigs, rumor_cf_spectrum_t *out) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

/* Extreme eigenpairs of large sparse symmetric operators: our thick-restart
 * Lanczos and an ARPACK wrapper, both on the complement of the all-ones
 * vector when asked (see spectrum.h).
 *
 * The Lanczos basis is kept fully orthogonal (classical Gram–Schmidt, twice)
 * so no spurious copies appear, and the basis is capped at M vectors: when
 * full, it restarts from the best Ritz vectors at both ends of the spectrum
 * (Wu & Simon 2000), which keeps memory at n*(M+1) doubles and the cost of
 * orthogonalization at O(n M) a product. */
#include "config.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_ARPACK
#include <arpack.h>
#endif

#include "log.h"
#include "spectrum.h"

#define BASIS_MAX 80
#define BASIS_BYTES (256L << 20)

/* x -= mean(x): projects out the all-ones direction. */
static void deflate_ones(int n, double *x)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    s /= n;
    for (int i = 0; i < n; i++)
        x[i] -= s;
}

/* The time limit and the progress reports of one solve. */
typedef struct {
    rumor_eig_ctl_t *ctl;
    double t0, deadline, next; /* next: when the next report is due */
} watch_t;

static void watch_start(watch_t *w, rumor_eig_ctl_t *ctl, const char *method, double tol)
{
    w->ctl = ctl;
    w->t0 = rumor_now();
    w->deadline = ctl && ctl->time_limit > 0 ? w->t0 + ctl->time_limit : INFINITY;
    w->next = 1;
    if (ctl)
        ctl->last = (rumor_eig_progress_t){ .what = ctl->what, .method = method, .lmax = NAN,
                                            .lmin = NAN, .rmax = NAN, .rmin = NAN, .tol = tol,
                                            .squared = ctl->squared };
}

/* Records where the solve is; reports when due. Returns 1 past the deadline. */
static int watch_tick(watch_t *w, long mv, double lmax, double lmin, double rmax, double rmin)
{
    if (!w->ctl)
        return 0;
    double now = rumor_now(), el = now - w->t0;
    rumor_eig_progress_t *p = &w->ctl->last;
    p->seconds = el;
    p->matvecs = mv;
    p->lmax = lmax, p->lmin = lmin, p->rmax = rmax, p->rmin = rmin;
    if (w->ctl->progress && el >= w->next) {
        w->ctl->progress(w->ctl->arg, p);
        /* 1, 2, 5, 10 s, then every 10 s */
        w->next = w->next < 2 ? 2 : (w->next < 5 ? 5 : (w->next < 10 ? 10 : w->next + 10));
        while (w->next <= el)
            w->next += 10;
    }
    return now >= w->deadline;
}

static int timeout_error(const watch_t *w, const char *who, long mv, double rmax, double rmin,
                         double tol)
{
    if (!isfinite(rmax) || !isfinite(rmin))
        return rumor_err_set(RUMOR_ETIMEOUT,
                             "%s: stopped at the time limit of %g s after %ld operator products, "
                             "before converging",
                             who, w->ctl->time_limit, mv);
    return rumor_err_set(RUMOR_ETIMEOUT,
                         "%s: stopped at the time limit of %g s after %ld operator products, "
                         "before converging (residuals %.2g, %.2g; target %.2g)",
                         who, w->ctl->time_limit, mv, rmax, rmin, tol);
}

static void start_vector(int n, int deflate, double *v)
{
    rumor_topo_rng_t r;
    rumor_topo_rng_seed(&r, 0x5eed, 7);
    for (int i = 0; i < n; i++)
        v[i] = rumor_topo_rng_unif(&r) - 0.5;
    if (deflate)
        deflate_ones(n, v);
    double nr = cblas_dnrm2(n, v, 1);
    cblas_dscal(n, 1.0 / nr, v, 1);
}

int rumor_topo_lanczos(int n, rumor_linop_fn op, void *ctx, int deflate, double tol, long maxmv,
                       double *lmax, double *lmin, double *vmax, double *vmin, long *mvp)
{
    return rumor_topo_lanczos_ctl(n, op, ctx, deflate, tol, maxmv, lmax, lmin, vmax, vmin, mvp,
                                  NULL);
}

int rumor_topo_lanczos_ctl(int n, rumor_linop_fn op, void *ctx, int deflate, double tol,
                           long maxmv, double *lmax, double *lmin, double *vmax, double *vmin,
                           long *mvp, rumor_eig_ctl_t *ctl)
{
    int neff = n - (deflate ? 1 : 0);
    if (neff < 1)
        return rumor_err_set(RUMOR_EINVAL, "lanczos: nothing to do on %d peers", n);
    int m = neff < BASIS_MAX ? neff : BASIS_MAX;
    long cap = BASIS_BYTES / (8L * n) - 1;
    if (m > cap)
        m = cap < 12 ? 12 : (int)cap;
    if (m > neff)
        m = neff;
    int keep = m / 5 < 2 ? 2 : (m / 5 > 10 ? 10 : m / 5);
    size_t N = (size_t)n;
    double *V = malloc(N * ((size_t)m + 1) * sizeof *V), *w = malloc(N * sizeof *w);
    double *H = calloc((size_t)m * m, sizeof *H), *S = malloc((size_t)m * m * sizeof *S);
    double *th = malloc((size_t)m * sizeof *th), *h = malloc(((size_t)m + 1) * sizeof *h);
    double *Y = malloc(N * 2 * keep * sizeof *Y);
    int *kidx = malloc((size_t)2 * keep * sizeof *kidx);
    if (!V || !w || !H || !S || !th || !h || !Y || !kidx) {
        free(V), free(w), free(H), free(S), free(th), free(h), free(Y), free(kidx);
        return rumor_err_set(RUMOR_ENOMEM, "lanczos: out of memory (n = %d, basis %d)", n, m);
    }
    start_vector(n, deflate, V);
    long mv = 0;
    int cols = 1, k = 0, rc = 0, invariant = 0, late = 0;
    double beta = 0, rmax = INFINITY, rmin = INFINITY, l_hi = NAN, l_lo = NAN;
    watch_t watch;
    watch_start(&watch, ctl, "sparse (Lanczos)", tol);
    for (;;) {
        /* extend the basis to m vectors (or until it spans an invariant
         * subspace, or time is up: then the Ritz values of the basis so far
         * are what is known) */
        int j;
        for (j = cols - 1; j < m; j++) {
            if (j >= cols && watch_tick(&watch, mv, l_hi, l_lo, rmax, rmin)) {
                late = 1;
                break;
            }
            op(ctx, V + (size_t)j * N, w);
            mv++;
            if (deflate)
                deflate_ones(n, w);
            /* h = V^T w, w -= V h, twice (CGS2) */
            cblas_dgemv(CblasColMajor, CblasTrans, n, j + 1, 1.0, V, n, w, 1, 0.0, h, 1);
            cblas_dgemv(CblasColMajor, CblasNoTrans, n, j + 1, -1.0, V, n, h, 1, 1.0, w, 1);
            for (int i = 0; i <= j; i++) {
                H[(size_t)i + (size_t)j * m] = h[i];
                H[(size_t)j + (size_t)i * m] = h[i];
            }
            cblas_dgemv(CblasColMajor, CblasTrans, n, j + 1, 1.0, V, n, w, 1, 0.0, h, 1);
            cblas_dgemv(CblasColMajor, CblasNoTrans, n, j + 1, -1.0, V, n, h, 1, 1.0, w, 1);
            if (deflate)
                deflate_ones(n, w);
            beta = cblas_dnrm2(n, w, 1);
            double scale = fabs(H[(size_t)j + (size_t)j * m]) + 1e-300;
            if (j + 1 >= neff || beta <= 1e-13 * (scale > 1 ? scale : 1)) {
                invariant = 1;
                j++;
                break;
            }
            if (j + 1 < m + 1)
                memcpy(V + (size_t)(j + 1) * N, w, N * sizeof *w);
            cblas_dscal(n, 1.0 / beta, V + (size_t)(j + 1) * N, 1);
        }
        k = j; /* basis V[:, 0..k), residual direction V[:, k] */
        for (int c = 0; c < k; c++)
            for (int r = 0; r < k; r++)
                S[(size_t)r + (size_t)c * k] = H[(size_t)r + (size_t)c * m];
        if (LAPACKE_dsyev(LAPACK_COL_MAJOR, 'V', 'U', k, S, k, th) != 0) {
            rc = rumor_err_set(RUMOR_EINVAL, "lanczos: dsyev failed on the projected matrix");
            break;
        }
        double b = invariant ? 0.0 : beta;
        rmin = fabs(b * S[(size_t)(k - 1)]);
        rmax = fabs(b * S[(size_t)(k - 1) + (size_t)(k - 1) * k]);
        *lmin = l_lo = th[0];
        *lmax = l_hi = th[k - 1];
        int done = rmin <= tol && rmax <= tol;
        if (late && !done) {
            RUMOR_IGNORE(watch_tick(&watch, mv, l_hi, l_lo, rmax, rmin));
            rc = timeout_error(&watch, "lanczos", mv, rmax, rmin, tol);
            break;
        }
        if (done || mv >= maxmv) {
            if (vmin)
                cblas_dgemv(CblasColMajor, CblasNoTrans, n, k, 1.0, V, n, S, 1, 0.0, vmin, 1);
            if (vmax)
                cblas_dgemv(CblasColMajor, CblasNoTrans, n, k, 1.0, V, n,
                            S + (size_t)(k - 1) * k, 1, 0.0, vmax, 1);
            if (!done)
                rc = rumor_err_set(RUMOR_EINVAL,
                                   "lanczos: did not converge in %ld products (residuals %.2g, "
                                   "%.2g > %.2g)",
                                   mv, rmax, rmin, tol);
            break;
        }
        /* thick restart: keep `keep` Ritz vectors at each end */
        int nk = 0;
        for (int i = 0; i < keep && i < k; i++)
            kidx[nk++] = i;
        for (int i = k - keep; i < k; i++)
            if (i >= keep)
                kidx[nk++] = i;
        for (int c = 0; c < nk; c++)
            cblas_dgemv(CblasColMajor, CblasNoTrans, n, k, 1.0, V, n,
                        S + (size_t)kidx[c] * k, 1, 0.0, Y + (size_t)c * N, 1);
        memmove(V + (size_t)nk * N, V + (size_t)k * N, N * sizeof *V);
        memcpy(V, Y, (size_t)nk * N * sizeof *V);
        memset(H, 0, (size_t)m * m * sizeof *H);
        for (int c = 0; c < nk; c++) {
            H[(size_t)c + (size_t)c * m] = th[kidx[c]];
            double s = beta * S[(size_t)(k - 1) + (size_t)kidx[c] * k];
            H[(size_t)c + (size_t)nk * m] = s;
            H[(size_t)nk + (size_t)c * m] = s;
        }
        cols = nk + 1;
    }
    if (mvp)
        *mvp = mv;
    free(V), free(w), free(H), free(S), free(th), free(h), free(Y), free(kidx);
    return rc;
}

int rumor_topo_arpack(int n, rumor_linop_fn op, void *ctx, int deflate, double tol, long maxmv,
                      double *lmax, double *lmin, double *vmax, double *vmin, long *mvp)
{
    return rumor_topo_arpack_ctl(n, op, ctx, deflate, tol, maxmv, lmax, lmin, vmax, vmin, mvp,
                                 NULL);
}

int rumor_topo_arpack_ctl(int n, rumor_linop_fn op, void *ctx, int deflate, double tol,
                          long maxmv, double *lmax, double *lmin, double *vmax, double *vmin,
                          long *mvp, rumor_eig_ctl_t *ctl)
{
#ifndef HAVE_ARPACK
    (void)n, (void)op, (void)ctx, (void)deflate, (void)tol, (void)maxmv, (void)lmax, (void)lmin;
    (void)vmax, (void)vmin, (void)mvp, (void)ctl;
    return rumor_err_set(RUMOR_ENOTSUP, "arpack: rumor was built without ARPACK");
#else
    int neff = n - (deflate ? 1 : 0);
    if (neff < 4)
        return rumor_topo_lanczos_ctl(n, op, ctx, deflate, tol, maxmv, lmax, lmin, vmax, vmin,
                                      mvp, ctl);
    a_int nev = 2, ncv = neff - 1 < 40 ? neff - 1 : 40, ldv = n, ido = 0, info = 1;
    a_int lworkl = ncv * (ncv + 8), iparam[11] = { 0 }, ipntr[11] = { 0 };
    size_t N = (size_t)n;
    double *resid = malloc(N * sizeof *resid), *V = malloc(N * (size_t)ncv * sizeof *V);
    double *workd = malloc(3 * N * sizeof *workd), *workl = calloc((size_t)lworkl, sizeof *workl);
    double *z = malloc(N * 2 * sizeof *z), d[2];
    a_int select[64];
    if (!resid || !V || !workd || !workl || !z) {
        free(resid), free(V), free(workd), free(workl), free(z);
        return rumor_err_set(RUMOR_ENOMEM, "arpack: out of memory (n = %d)", n);
    }
    start_vector(n, deflate, resid);
    iparam[0] = 1; /* exact shifts */
    iparam[2] = (a_int)(maxmv / (ncv > 1 ? ncv - 1 : 1) + 1);
    iparam[6] = 1; /* mode 1: A x = lambda x */
    long mv = 0;
    int rc = 0, late = 0;
    watch_t watch;
    watch_start(&watch, ctl, "sparse (ARPACK dsaupd)", tol);
    /* relative tolerance in ARPACK; ours is absolute on operators of norm
     * about 1, the same thing here */
    for (;;) {
        dsaupd_c(&ido, "I", n, "BE", nev, tol, resid, ncv, V, ldv, iparam, ipntr, workd, workl,
                 lworkl, &info);
        if (ido != 1 && ido != -1)
            break;
        /* once the first factorization is done, workl holds the Ritz values
         * of the current tridiagonal matrix: bounds on both ends */
        double hi = NAN, lo = NAN;
        if (mv >= ncv)
            for (a_int r = 0; r < ncv; r++) {
                double th = workl[ipntr[5] - 1 + r];
                hi = r == 0 || th > hi ? th : hi;
                lo = r == 0 || th < lo ? th : lo;
            }
        if (watch_tick(&watch, mv, hi, lo, NAN, NAN)) {
            late = 1;
            *lmax = hi;
            *lmin = lo;
            rc = timeout_error(&watch, "arpack", mv, NAN, NAN, tol);
            break;
        }
        double *x = workd + ipntr[0] - 1, *y = workd + ipntr[1] - 1;
        op(ctx, x, y);
        mv++;
        if (deflate)
            deflate_ones(n, y);
    }
    if (late) {
        /* stopped: nothing more to extract */
    } else if (info < 0 || (info == 1 && iparam[4] < nev)) {
        rc = rumor_err_set(RUMOR_EINVAL, "arpack: dsaupd %s (info %d, %d of %d converged)",
                           info == 1 ? "did not converge" : "failed", (int)info, (int)iparam[4],
                           (int)nev);
    } else {
        a_int rvec = (vmax || vmin) ? 1 : 0;
        dseupd_c(rvec, "A", select, d, z, n, 0.0, "I", n, "BE", nev, tol, resid, ncv, V, ldv,
                 iparam, ipntr, workd, workl, lworkl, &info);
        if (info != 0) {
            rc = rumor_err_set(RUMOR_EINVAL, "arpack: dseupd failed (info %d)", (int)info);
        } else {
            int lo = d[0] <= d[1] ? 0 : 1;
            *lmin = d[lo];
            *lmax = d[1 - lo];
            if (vmin)
                memcpy(vmin, z + (size_t)lo * N, N * sizeof *z);
            if (vmax)
                memcpy(vmax, z + (size_t)(1 - lo) * N, N * sizeof *z);
        }
    }
    if (mvp)
        *mvp = mv;
    free(resid), free(V), free(workd), free(workl), free(z);
    return rc;
#endif
}

/* Closed-form spectra of mixing matrices with a symmetry group: checking a
 * shape against W entry by entry, and the characters' eigenvalues (see
 * closedform.h). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "closedform.h"

#define SAME_TOL 1e-15

static const double PI = 3.14159265358979323846;

/* ---- the group Z_{m_0} x ... x Z_{m_{k-1}} on peer ids */
typedef struct {
    int n, k, all2; /* all2: every m_t = 2, so j - i is j xor i */
    int m[RUMOR_SHAPE_MAXF];
    int stride[RUMOR_SHAPE_MAXF];
} group_t;

static int group_init(group_t *g, const rumor_topo_shape_t *s, int n)
{
    if (s->k < 1 || s->k > RUMOR_SHAPE_MAXF)
        return 0;
    long prod = 1;
    g->all2 = 1;
    for (int t = s->k - 1; t >= 0; t--) {
        if (s->m[t] < 1 || prod * s->m[t] > n)
            return 0;
        g->m[t] = s->m[t];
        g->stride[t] = (int)prod;
        prod *= s->m[t];
        g->all2 &= s->m[t] == 2;
    }
    g->n = n;
    g->k = s->k;
    return prod == n;
}

/* j - i in the group, as a peer id. */
static int group_sub(const group_t *g, int j, int i)
{
    if (g->k == 1)
        return j >= i ? j - i : j - i + g->n;
    if (g->all2)
        return j ^ i;
    int r = 0;
    for (int t = 0; t < g->k; t++) {
        int d = (j / g->stride[t]) % g->m[t] - (i / g->stride[t]) % g->m[t];
        r += (d < 0 ? d + g->m[t] : d) * g->stride[t];
    }
    return r;
}

/* ---- W_ij = c(j - i): the stencil c is row 0 (whose offsets are the
 * column ids themselves, already sorted) */
typedef struct {
    long len;
    int *off;
    double *val, c0;
} stencil_t;

static void stencil_free(stencil_t *st)
{
    free(st->off);
    free(st->val);
    memset(st, 0, sizeof *st);
}

static double stencil_at(const stencil_t *st, int off, int *found)
{
    long lo = 0, hi = st->len;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (st->off[mid] == off) {
            *found = 1;
            return st->val[mid];
        }
        if (st->off[mid] < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return 0;
}

/* 1 and *st when w has W_ij = c(j - i); 0 (nothing kept) when not. */
static int stencil_of(const rumor_mix_t *w, const group_t *g, stencil_t *st)
{
    memset(st, 0, sizeof *st);
    long len = 0;
    for (long p = w->off[0]; p < w->off[1]; p++)
        len += w->val[p] != 0;
    st->off = malloc(((size_t)len + 1) * sizeof *st->off);
    st->val = malloc(((size_t)len + 1) * sizeof *st->val);
    if (!st->off || !st->val) {
        stencil_free(st);
        return rumor_err_set(RUMOR_ENOMEM, "closed form: out of memory");
    }
    for (long p = w->off[0]; p < w->off[1]; p++)
        if (w->val[p] != 0) {
            st->off[st->len] = w->col[p];
            st->val[st->len++] = w->val[p];
        }
    st->c0 = w->diag[0];
    for (int i = 1; i < w->n; i++) {
        if (fabs(w->diag[i] - st->c0) > SAME_TOL)
            goto no;
        long cnt = 0;
        for (long p = w->off[i]; p < w->off[i + 1]; p++) {
            if (w->val[p] == 0)
                continue;
            int found;
            double c = stencil_at(st, group_sub(g, w->col[p], i), &found);
            if (!found || fabs(w->val[p] - c) > SAME_TOL)
                goto no;
            cnt++;
        }
        if (cnt != st->len) /* each entry found once, no repeats: a bijection */
            goto no;
    }
    return 1;
no:
    stencil_free(st);
    return 0;
}

/* 1 and *a when w = I - a L of the R x C grid (one weight a on every link). */
static int grid_fits(const rumor_mix_t *w, int R, int C, double *a)
{
    if ((long)R * C != w->n)
        return 0;
    *a = NAN;
    for (int i = 0; i < w->n; i++) {
        int r = i / C, c = i % C, want[4], nw = 0;
        if (r > 0)
            want[nw++] = i - C;
        if (c > 0)
            want[nw++] = i - 1;
        if (c < C - 1)
            want[nw++] = i + 1;
        if (r < R - 1)
            want[nw++] = i + C;
        int got = 0;
        for (long p = w->off[i]; p < w->off[i + 1]; p++) {
            if (w->val[p] == 0)
                continue;
            if (got == nw || w->col[p] != want[got])
                return 0;
            if (isnan(*a))
                *a = w->val[p];
            else if (fabs(w->val[p] - *a) > SAME_TOL)
                return 0;
            got++;
        }
        if (got != nw || isnan(*a) || fabs(w->diag[i] - (1 - *a * nw)) > SAME_TOL)
            return 0;
    }
    return 1;
}

int rumor_mix_has_shape(rumor_mix_t *const *w, int count, const rumor_topo_shape_t *s)
{
    if (count < 1)
        return 0;
    int n = w[0]->n;
    if (s->kind == RUMOR_SHAPE_GRID) {
        double a;
        return count == 1 && s->k == 2 && grid_fits(w[0], s->m[0], s->m[1], &a);
    }
    group_t g;
    if (s->kind != RUMOR_SHAPE_CAYLEY || !group_init(&g, s, n))
        return 0;
    for (int q = 0; q < count; q++) {
        stencil_t st;
        int rc = w[q]->n == n ? stencil_of(w[q], &g, &st) : 0;
        if (rc <= 0)
            return rc;
        stencil_free(&st);
    }
    return 1;
}

int rumor_topo_shape_candidates(const char *family, int n, int rows, int cols,
                                rumor_topo_shape_t *out, int cap)
{
    int c = 0;
#define PUT(KIND, K, M0, M1)                                                       \
    do {                                                                           \
        if (c < cap)                                                               \
            out[c++] = (rumor_topo_shape_t){ .kind = (KIND), .k = (K), .m = { (M0), (M1) } }; \
    } while (0)
    int d = 0;
    while (d < 30 && (1L << d) < n)
        d++;
    int pow2 = (1L << d) == n && d >= 1 && d <= RUMOR_SHAPE_MAXF;
    if (family && !strcmp(family, "torus") && (long)rows * cols == n)
        PUT(RUMOR_SHAPE_CAYLEY, 2, rows, cols);
    if (family && !strcmp(family, "grid") && (long)rows * cols == n)
        PUT(RUMOR_SHAPE_GRID, 2, rows, cols);
    if (family && !strcmp(family, "hypercube") && pow2 && c < cap) {
        out[c] = (rumor_topo_shape_t){ .kind = RUMOR_SHAPE_CAYLEY, .k = d };
        for (int t = 0; t < d; t++)
            out[c].m[t] = 2;
        c++;
    }
    /* ring, exp, complete, onepeer-exp, and any graph that happens to be
     * circulant in its numbering */
    PUT(RUMOR_SHAPE_CAYLEY, 1, n, 0);
    if (family && strcmp(family, "file"))
        return c;
    if (pow2 && d > 1 && c < cap) {
        out[c] = (rumor_topo_shape_t){ .kind = RUMOR_SHAPE_CAYLEY, .k = d };
        for (int t = 0; t < d; t++)
            out[c].m[t] = 2;
        c++;
    }
    for (int r = 2; (long)r * r <= n; r++)
        if (n % r == 0) {
            PUT(RUMOR_SHAPE_CAYLEY, 2, r, n / r);
            if (r != n / r)
                PUT(RUMOR_SHAPE_CAYLEY, 2, n / r, r);
        }
    PUT(RUMOR_SHAPE_GRID, 2, 1, n);
    for (int r = 2; (long)r * r <= n; r++)
        if (n % r == 0) {
            PUT(RUMOR_SHAPE_GRID, 2, r, n / r);
            if (r != n / r)
                PUT(RUMOR_SHAPE_GRID, 2, n / r, r);
        }
#undef PUT
    return c;
}

int rumor_mix_find_shape(rumor_mix_t *const *w, int count, const char *family, int rows,
                         int cols, rumor_topo_shape_t *out)
{
    rumor_topo_shape_t cand[512];
    int nc = rumor_topo_shape_candidates(family, w[0]->n, rows, cols, cand, 512);
    for (int i = 0; i < nc; i++) {
        int rc = rumor_mix_has_shape(w, count, &cand[i]);
        if (rc < 0)
            return rc;
        if (rc) {
            *out = cand[i];
            return 1;
        }
    }
    return 0;
}

const char *rumor_topo_shape_name(const rumor_topo_shape_t *s, char *buf, size_t len)
{
    int all2 = 1;
    for (int t = 0; t < s->k; t++)
        all2 &= s->m[t] == 2;
    if (s->kind == RUMOR_SHAPE_GRID)
        snprintf(buf, len, "grid %dx%d", s->m[0], s->m[1]);
    else if (s->k == 1)
        snprintf(buf, len, "circulant");
    else if (all2)
        snprintf(buf, len, "hypercube Z_2^%d", s->k);
    else if (s->k == 2)
        snprintf(buf, len, "circulant %dx%d", s->m[0], s->m[1]);
    else
        snprintf(buf, len, "abelian group, %d factors", s->k);
    return buf;
}

/* ---- evaluation */

/* u = 1 - exp(2 pi i r / m) for r in [0, m), from the angle nearest 0 so
 * that small values keep their digits. */
static int tables(int m, double **ur, double **ui)
{
    *ur = malloc((size_t)m * sizeof **ur);
    *ui = malloc((size_t)m * sizeof **ui);
    if (!*ur || !*ui)
        return rumor_err_set(RUMOR_ENOMEM, "closed form: out of memory");
    for (int r = 0; r < m; r++) {
        int rr = r <= m - r ? r : m - r;
        double s = sin(PI * rr / m), s2 = sin(2 * PI * rr / m);
        (*ur)[r] = 2 * s * s;
        (*ui)[r] = r == rr ? -s2 : s2;
    }
    return 0;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The grid: mu = 1 - lambda = a (4 sin^2(pi u/2R) + 4 sin^2(pi v/2C)). */
static int grid_spectrum(const rumor_mix_t *w, const rumor_topo_shape_t *s, double *eigs,
                         double *mu_lo, double *mu_hi)
{
    int R = s->m[0], C = s->m[1];
    double a;
    if (!grid_fits(w, R, C, &a))
        return rumor_err_set(RUMOR_EINVAL, "closed form: W is not I - a L of the %dx%d grid", R,
                             C);
    double *pr = malloc(((size_t)R + C) * sizeof *pr), *pc = pr + R;
    if (!pr)
        return rumor_err_set(RUMOR_ENOMEM, "closed form: out of memory");
    for (int u = 0; u < R; u++) {
        double x = sin(PI * u / (2.0 * R));
        pr[u] = 4 * x * x;
    }
    for (int v = 0; v < C; v++) {
        double x = sin(PI * v / (2.0 * C));
        pc[v] = 4 * x * x;
    }
    *mu_lo = INFINITY;
    *mu_hi = -INFINITY;
    for (int u = 0; u < R; u++)
        for (int v = 0; v < C; v++) {
            double mu = a * (pr[u] + pc[v]);
            if (u || v) {
                *mu_lo = mu < *mu_lo ? mu : *mu_lo;
                *mu_hi = mu > *mu_hi ? mu : *mu_hi;
            }
            if (eigs)
                eigs[(size_t)u * C + v] = 1 - mu;
        }
    free(pr);
    return 0;
}

/* What the Cayley evaluation needs of each matrix. */
typedef struct {
    stencil_t st;
    int *dig; /* (len * k) digits of each offset when k > 1; when k = 1, (len)
                 f * offset mod n for the current frequency f */
} term_t;

static int cayley_spectrum(rumor_mix_t *const *w, int count, const rumor_topo_shape_t *s,
                           int sym, double *eigs, double *mu_lo, double *mu_hi, double *lmax)
{
    group_t g;
    int n = w[0]->n, rc = 0;
    if (!group_init(&g, s, n))
        return rumor_err_set(RUMOR_EINVAL, "closed form: shape does not multiply out to %d", n);
    term_t *tm = calloc((size_t)count, sizeof *tm);
    double *ur[RUMOR_SHAPE_MAXF] = { 0 }, *ui[RUMOR_SHAPE_MAXF] = { 0 };
    if (!tm)
        return rumor_err_set(RUMOR_ENOMEM, "closed form: out of memory");
    for (int q = 0; q < count && rc >= 0; q++) {
        rc = stencil_of(w[q], &g, &tm[q].st);
        if (rc == 0)
            rc = rumor_err_set(RUMOR_EINVAL, "closed form: matrix %d does not have the shape", q);
        if (rc >= 0 && !g.all2) {
            tm[q].dig = calloc((size_t)tm[q].st.len * g.k + 1, sizeof *tm[q].dig);
            if (!tm[q].dig)
                rc = rumor_err_set(RUMOR_ENOMEM, "closed form: out of memory");
            for (long e = 0; rc >= 0 && g.k > 1 && e < tm[q].st.len; e++)
                for (int t = 0; t < g.k; t++)
                    tm[q].dig[e * g.k + t] = (tm[q].st.off[e] / g.stride[t]) % g.m[t];
        }
    }
    for (int t = 0; rc >= 0 && !g.all2 && t < g.k; t++)
        rc = tables(g.m[t], &ur[t], &ui[t]);
    int f[RUMOR_SHAPE_MAXF] = { 0 }; /* the frequency's digits */
    *mu_lo = INFINITY;
    *mu_hi = *lmax = -INFINITY;
    for (int fi = 0; rc >= 0 && fi < n; fi++) {
        double logmag = 0, mu_re = 0;
        for (int q = 0; q < count; q++) {
            const stencil_t *st = &tm[q].st;
            double mr = 0, mi = 0;
            for (long e = 0; e < st->len; e++) {
                double a, b; /* 1 - chi_f(offset e) */
                if (g.all2) {
                    a = __builtin_parity((unsigned)(fi & st->off[e])) ? 2 : 0;
                    b = 0;
                } else if (g.k == 1) {
                    int *r = &tm[q].dig[e]; /* f * offset mod n, stepped with f */
                    a = ur[0][*r];
                    b = ui[0][*r];
                    *r += st->off[e];
                    if (*r >= n)
                        *r -= n;
                } else {
                    /* 1 - prod_t (1 - u_t), accumulated as U + u - U u */
                    a = b = 0;
                    for (int t = 0; t < g.k; t++) {
                        int r = (int)((long long)f[t] * tm[q].dig[e * g.k + t] % g.m[t]);
                        double x = ur[t][r], y = ui[t][r];
                        double na = a + x - (a * x - b * y), nb = b + y - (a * y + b * x);
                        a = na, b = nb;
                    }
                }
                mr += st->val[e] * a;
                mi += st->val[e] * b;
            }
            if (sym) {
                mu_re = mr;
            } else {
                /* log |1 - mu| = log(1 - 2 Re mu + |mu|^2) / 2 */
                double x = mr * mr + mi * mi - 2 * mr;
                logmag += x <= -1 ? -INFINITY : 0.5 * log1p(x);
            }
        }
        if (sym) {
            if (fi) {
                *mu_lo = mu_re < *mu_lo ? mu_re : *mu_lo;
                *mu_hi = mu_re > *mu_hi ? mu_re : *mu_hi;
            }
            if (eigs)
                eigs[fi] = 1 - mu_re;
        } else {
            if (fi && logmag > *lmax)
                *lmax = logmag;
            if (eigs)
                eigs[fi] = fi ? exp(logmag) : 0;
        }
        for (int t = g.k - 1; t >= 0; t--) { /* next frequency, last digit fastest */
            if (++f[t] < g.m[t])
                break;
            f[t] = 0;
        }
    }
    for (int q = 0; q < count; q++) {
        stencil_free(&tm[q].st);
        free(tm[q].dig);
    }
    free(tm);
    for (int t = 0; t < RUMOR_SHAPE_MAXF; t++)
        free(ur[t]), free(ui[t]);
    return rc < 0 ? rc : 0;
}

int rumor_mix_closed_form(rumor_mix_t *const *w, int count, const rumor_topo_shape_t *s,
                          int want_eigs, rumor_cf_spectrum_t *out)
{
    memset(out, 0, sizeof *out);
    out->lambda2 = out->lambda_min = out->one_minus_l2 = out->one_plus_ln = NAN;
    int n = w[0]->n;
    int sym = count == 1 && w[0]->symmetric;
    double *eigs = want_eigs ? malloc((size_t)n * sizeof *eigs) : NULL;
    if (want_eigs && !eigs)
        return rumor_err_set(RUMOR_ENOMEM, "closed form: out of memory for %d eigenvalues", n);
    double mu_lo = NAN, mu_hi = NAN, lmax = NAN;
    int rc;
    if (s->kind == RUMOR_SHAPE_GRID) {
        rc = count == 1 ? grid_spectrum(w[0], s, eigs, &mu_lo, &mu_hi)
                        : rumor_err_set(RUMOR_EINVAL, "closed form: a grid shape is static");
        sym = 1;
    } else {
        rc = cayley_spectrum(w, count, s, sym, eigs, &mu_lo, &mu_hi, &lmax);
    }
    if (rc < 0) {
        free(eigs);
        return rc;
    }
    if (sym) {
        out->symmetric = 1;
        out->one_minus_l2 = mu_lo;
        out->one_plus_ln = 2 - mu_hi;
        out->lambda2 = 1 - mu_lo;
        out->lambda_min = 1 - mu_hi;
        out->gap = mu_lo < 2 - mu_hi ? mu_lo : 2 - mu_hi;
        out->contraction = 1 - out->gap;
    } else {
        out->contraction = exp(lmax);
        out->gap = -expm1(lmax);
    }
    if (eigs)
        qsort(eigs, (size_t)n, sizeof *eigs, cmp_dbl);
    out->eigs = eigs;
    return 0;
}

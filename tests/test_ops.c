/* Every op of the ops table on every backend that is present.
 *
 * Each op runs on "cpu:1", "cpu:2" and every CUDA GPU that opens, and its
 * result is compared to an independent reference written here naively in
 * double precision (or, for the optimizers, to values worked out by hand).
 * A GPU's results are also compared to the CPU's, which is the reference
 * backend (ops.h). Without a GPU (or a CUDA build) the CUDA backend is
 * absent and only the CPU backends run; where a GPU is present, a CUDA
 * backend that does not open (its ops not written) fails the test.
 *
 * Also: the device spec parser ("cpu", "cpu:N", "cuda:N", "auto") and its
 * errors, and that OpenBLAS runs the kernels blas_tune chose. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "err.h"
#include "ops.h"
#include "testutil.h"

/* ------------------------------------------------------------------ helpers */

/* A device copy of `bytes` of host data (zeroed when host is NULL). Running
 * out of memory here is a broken test machine, not a failed check. */
static void *dput(rumor_device_t *d, const void *host, size_t bytes)
{
    void *p = d->ops->alloc(d, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "%s: alloc %zu bytes: %s\n", d->name, bytes, rumor_err_msg());
        exit(99);
    }
    if (host && bytes)
        CHECK_OK(d->ops->upload(d, p, host, bytes));
    return p;
}

/* Waits for the device, copies `bytes` back to a fresh host buffer and frees
 * the device buffer. The caller frees the result. */
static void *dtake(rumor_device_t *d, void *dp, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    if (!h) {
        perror("malloc");
        exit(99);
    }
    CHECK_OK(d->ops->sync(d));
    CHECK_OK(d->ops->download(d, h, dp, bytes));
    d->ops->free(d, dp);
    return h;
}

static float *fmalloc(size_t n)
{
    float *p = malloc(n * sizeof *p + 1);
    if (!p) {
        perror("malloc");
        exit(99);
    }
    return p;
}

static double *dmalloc(size_t n)
{
    double *p = malloc(n * sizeof *p + 1);
    if (!p) {
        perror("malloc");
        exit(99);
    }
    return p;
}

/* One check for a whole array: every got[i] within atol + rtol*|want[i]| of
 * want[i] (and finite where want is); reports the first few misses. */
static void cmp(const char *dev, const char *what, const float *got, const double *want,
                size_t n, double atol, double rtol)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isfinite(g) && fabs(g - w) <= atol + rtol * fabs(w))
            continue;
        if (bad++ < 5)
            fprintf(stderr, "  %s %s[%zu] = %.9g, expected %.9g\n", dev, what, i, g, w);
    }
    CHECKF(bad == 0, "%s %s: %zu of %zu elements off", dev, what, bad, n);
}

/* Same, against float results of the reference backend (the CPU). */
static void cmp_cpu(const char *dev, const char *what, const float *got, const float *cpu,
                    size_t n, double atol, double rtol)
{
    double *w = dmalloc(n);
    for (size_t i = 0; i < n; i++)
        w[i] = cpu[i];
    char label[128];
    snprintf(label, sizeof label, "%s (vs cpu)", what);
    cmp(dev, label, got, w, n, atol, rtol);
    free(w);
}

static void fill(float *x, size_t n, float lo, float hi, unsigned long long seed)
{
    unsigned long long s = seed * 2654435761ULL + 88172645463325252ULL;
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * 0.5f * (tu_randf(&s) + 1.0f);
}

/* ------------------------------------------------------------------- gemm */

typedef struct {
    int m, n, k;
    int pad_a, pad_b, pad_c; /* leading dimension = row length + pad */
    float alpha, beta;
    int nan_c;               /* C starts as NaN: beta 0 must not read it */
} gemm_case;

/* C (m,n) = alpha * op(A) * op(B) + beta * C0 in double, and for each element
 * a bound on float rounding: (k+2) * 4u * (|alpha| sum|a*b| + |beta c|). */
static void ref_gemm(int ta, int tb, const gemm_case *g, const float *a, int lda,
                     const float *b, int ldb, const float *c0, int ldc, double *out,
                     double *tol)
{
    for (int i = 0; i < g->m; i++)
        for (int j = 0; j < g->n; j++) {
            double s = 0, sa = 0;
            for (int l = 0; l < g->k; l++) {
                double av = ta ? a[(size_t)l * lda + i] : a[(size_t)i * lda + l];
                double bv = tb ? b[(size_t)j * ldb + l] : b[(size_t)l * ldb + j];
                s += av * bv;
                sa += fabs(av * bv);
            }
            double c = g->beta == 0.0f ? 0.0 : c0[(size_t)i * ldc + j];
            out[(size_t)i * g->n + j] = g->alpha * s + g->beta * c;
            tol[(size_t)i * g->n + j] =
                (g->k + 2) * 2.4e-7 * (fabs(g->alpha) * sa + fabs(g->beta * c)) + 1e-30;
        }
}

/* Runs one case on d; returns C (m rows of ldc floats, padding included). */
static float *run_gemm(rumor_device_t *d, int ta, int tb, const gemm_case *g, const float *a,
                       size_t a_len, int lda, const float *b, size_t b_len, int ldb,
                       const float *c0, size_t c_len, int ldc)
{
    float *da = dput(d, a, a_len * sizeof *a);
    float *db = dput(d, b, b_len * sizeof *b);
    float *dc = dput(d, c0, c_len * sizeof *c0);
    d->ops->gemm(d, ta, tb, g->m, g->n, g->k, g->alpha, da, lda, db, ldb, g->beta, dc, ldc);
    float *c = dtake(d, dc, c_len * sizeof *c);
    d->ops->free(d, da);
    d->ops->free(d, db);
    return c;
}

static void test_gemm(rumor_device_t *d, rumor_device_t *cpu)
{
    static const gemm_case cases[] = {
        { 37, 23, 51, 5, 3, 7, 0.7f, -0.3f, 0 },      /* non-square, padded */
        { 1, 1, 1, 0, 0, 0, 1.5f, 2.0f, 0 },
        { 33, 17, 29, 2, 2, 2, 0.5f, 0.0f, 1 },       /* beta 0 over NaN */
        { 64, 96, 300, 0, 0, 0, 1.0f, 1.0f, 0 },      /* accumulate, as in backward */
        { 130, 150, 200, 4, 8, 16, -1.25f, 0.5f, 0 }, /* big enough for 2 threads */
    };
    const float SENTINEL = 777.0f;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const gemm_case *g = &cases[ci];
        for (int ta = 0; ta <= 1; ta++)
            for (int tb = 0; tb <= 1; tb++) {
                /* Stored shapes (row-major): A is (m,k) or (k,m) when transposed. */
                int a_rows = ta ? g->k : g->m, a_cols = ta ? g->m : g->k;
                int b_rows = tb ? g->n : g->k, b_cols = tb ? g->k : g->n;
                int lda = a_cols + g->pad_a, ldb = b_cols + g->pad_b, ldc = g->n + g->pad_c;
                size_t a_len = (size_t)a_rows * lda, b_len = (size_t)b_rows * ldb;
                size_t c_len = (size_t)g->m * ldc;
                float *a = fmalloc(a_len), *b = fmalloc(b_len), *c0 = fmalloc(c_len);
                /* Padding is NaN in A and B (reading it would show) and a
                 * sentinel in C (writing it would show). */
                for (size_t i = 0; i < a_len; i++)
                    a[i] = NAN;
                for (size_t i = 0; i < b_len; i++)
                    b[i] = NAN;
                for (size_t i = 0; i < c_len; i++)
                    c0[i] = SENTINEL;
                for (int r = 0; r < a_rows; r++)
                    fill(a + (size_t)r * lda, a_cols, -1, 1, 100 + ci * 7 + r);
                for (int r = 0; r < b_rows; r++)
                    fill(b + (size_t)r * ldb, b_cols, -1, 1, 5000 + ci * 7 + r);
                for (int r = 0; r < g->m; r++) {
                    if (g->nan_c)
                        for (int j = 0; j < g->n; j++)
                            c0[(size_t)r * ldc + j] = NAN;
                    else
                        fill(c0 + (size_t)r * ldc, g->n, -1, 1, 9000 + ci * 7 + r);
                }
                size_t mn = (size_t)g->m * g->n;
                double *want = dmalloc(mn), *tol = dmalloc(mn);
                ref_gemm(ta, tb, g, a, lda, b, ldb, c0, ldc, want, tol);

                float *c = run_gemm(d, ta, tb, g, a, a_len, lda, b, b_len, ldb, c0, c_len, ldc);
                size_t bad = 0, pad_bad = 0;
                for (int i = 0; i < g->m; i++) {
                    for (int j = 0; j < g->n; j++) {
                        double got = c[(size_t)i * ldc + j], w = want[(size_t)i * g->n + j];
                        if (isfinite(got) && fabs(got - w) <= tol[(size_t)i * g->n + j])
                            continue;
                        if (bad++ < 3)
                            fprintf(stderr, "  %s gemm C[%d,%d] = %.9g, expected %.9g\n",
                                    d->name, i, j, got, w);
                    }
                    for (int j = g->n; j < ldc; j++)
                        pad_bad += c[(size_t)i * ldc + j] != SENTINEL;
                }
                CHECKF(bad == 0, "%s gemm m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g: %zu off",
                       d->name, g->m, g->n, g->k, ta, tb, g->alpha, g->beta, bad);
                CHECKF(pad_bad == 0, "%s gemm ta=%d tb=%d wrote %zu padding elements of C",
                       d->name, ta, tb, pad_bad);
                if (d != cpu) {
                    float *cc = run_gemm(cpu, ta, tb, g, a, a_len, lda, b, b_len, ldb, c0,
                                         c_len, ldc);
                    cmp_cpu(d->name, "gemm", c, cc, c_len, 1e-4 * g->k, 1e-5);
                    free(cc);
                }
                free(c);
                free(want);
                free(tol);
                free(a);
                free(b);
                free(c0);
            }
    }
}

/* ------------------------------------------------------- memory and algebra */

static void test_memory(rumor_device_t *d)
{
    enum { N = 1003 };
    float host[N], back[N];
    fill(host, N, -3, 3, 1);
    float *p = dput(d, NULL, sizeof host);
    float *q = dput(d, NULL, sizeof host);
    CHECK_OK(d->ops->download(d, back, p, sizeof back));
    size_t nonzero = 0;
    for (int i = 0; i < N; i++)
        nonzero += back[i] != 0.0f;
    CHECKF(nonzero == 0, "%s: alloc left %zu non-zero floats", d->name, nonzero);
    CHECK_OK(d->ops->upload(d, p, host, sizeof host));
    CHECK_OK(d->ops->copy(d, q, p, sizeof host));
    CHECK_OK(d->ops->sync(d));
    CHECK_OK(d->ops->download(d, back, q, sizeof back));
    CHECKF(memcmp(back, host, sizeof host) == 0, "%s: upload/copy/download round trip",
           d->name);
    d->ops->free(d, p);
    d->ops->free(d, q);
}

static float *run_add_bias(rumor_device_t *d, const float *y0, const float *bias, int rows,
                           int cols)
{
    float *dy = dput(d, y0, sizeof(float) * rows * cols);
    float *db = dput(d, bias, sizeof(float) * cols);
    d->ops->add_bias(d, dy, db, rows, cols);
    d->ops->free(d, db);
    return dtake(d, dy, sizeof(float) * rows * cols);
}

static float *run_sum_rows(rumor_device_t *d, const float *db0, const float *dy, int rows,
                           int cols, float beta)
{
    float *ddb = dput(d, db0, sizeof(float) * cols);
    float *ddy = dput(d, dy, sizeof(float) * rows * cols);
    d->ops->sum_rows(d, ddb, ddy, rows, cols, beta);
    d->ops->free(d, ddy);
    return dtake(d, ddb, sizeof(float) * cols);
}

static float *run_axpy(rumor_device_t *d, const float *y0, float a, const float *x, size_t n)
{
    float *dy = dput(d, y0, sizeof(float) * n), *dx = dput(d, x, sizeof(float) * n);
    d->ops->axpy(d, dy, a, dx, n);
    d->ops->free(d, dx);
    return dtake(d, dy, sizeof(float) * n);
}

static float *run_scale(rumor_device_t *d, const float *y0, float a, size_t n)
{
    float *dy = dput(d, y0, sizeof(float) * n);
    d->ops->scale(d, dy, a, n);
    return dtake(d, dy, sizeof(float) * n);
}

static void test_algebra(rumor_device_t *d, rumor_device_t *cpu)
{
    enum { R = 9, C = 37, N = 1001 };
    float y0[R * C], bias[C], db0[C];
    double want[R * C];
    fill(y0, R * C, -2, 2, 11);
    fill(bias, C, -1, 1, 12);

    float *y = run_add_bias(d, y0, bias, R, C);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            want[r * C + c] = (double)y0[r * C + c] + bias[c];
    cmp(d->name, "add_bias", y, want, R * C, 1e-6, 1e-6);
    if (d != cpu) {
        float *yc = run_add_bias(cpu, y0, bias, R, C);
        cmp_cpu(d->name, "add_bias", y, yc, R * C, 1e-6, 1e-6);
        free(yc);
    }
    free(y);

    /* beta 0 overwrites (db may hold garbage, even NaN), 1 accumulates. */
    static const float betas[] = { 0.0f, 1.0f, 0.5f };
    for (size_t bi = 0; bi < 3; bi++) {
        float beta = betas[bi];
        fill(db0, C, -1, 1, 13);
        if (beta == 0.0f)
            for (int c = 0; c < C; c += 2)
                db0[c] = NAN;
        float *db = run_sum_rows(d, db0, y0, R, C, beta);
        double wdb[C];
        for (int c = 0; c < C; c++) {
            double s = beta == 0.0f ? 0.0 : (double)beta * db0[c];
            for (int r = 0; r < R; r++)
                s += y0[r * C + c];
            wdb[c] = s;
        }
        char what[64];
        snprintf(what, sizeof what, "sum_rows(beta=%g)", beta);
        cmp(d->name, what, db, wdb, C, 1e-5, 1e-5);
        if (d != cpu) {
            float *dbc = run_sum_rows(cpu, db0, y0, R, C, beta);
            cmp_cpu(d->name, what, db, dbc, C, 1e-5, 1e-5);
            free(dbc);
        }
        free(db);
    }

    float *x = fmalloc(N), *yv = fmalloc(N);
    double *w = dmalloc(N);
    fill(x, N, -5, 5, 14);
    fill(yv, N, -5, 5, 15);
    float *r = run_axpy(d, yv, -0.37f, x, N);
    for (int i = 0; i < N; i++)
        w[i] = (double)yv[i] + (double)-0.37f * x[i];
    cmp(d->name, "axpy", r, w, N, 1e-6, 1e-6);
    if (d != cpu) {
        float *rc = run_axpy(cpu, yv, -0.37f, x, N);
        cmp_cpu(d->name, "axpy", r, rc, N, 1e-6, 1e-6);
        free(rc);
    }
    free(r);

    r = run_scale(d, yv, -1.7f, N);
    for (int i = 0; i < N; i++)
        w[i] = (double)-1.7f * yv[i];
    cmp(d->name, "scale", r, w, N, 0, 1e-7);
    if (d != cpu) {
        float *rc = run_scale(cpu, yv, -1.7f, N);
        cmp_cpu(d->name, "scale", r, rc, N, 0, 1e-7);
        free(rc);
    }
    free(r);
    free(x);
    free(yv);
    free(w);
}

/* ------------------------------------------------------------- activations */

typedef void (*act_fwd_fn)(rumor_device_t *, float *, const float *, size_t);
typedef void (*act_bwd_fn)(rumor_device_t *, float *, const float *, const float *, size_t);

static float *run_fwd(rumor_device_t *d, act_fwd_fn f, const float *x, size_t n)
{
    float *dx = dput(d, x, n * sizeof *x), *dy = dput(d, NULL, n * sizeof *x);
    f(d, dy, dx, n);
    d->ops->free(d, dx);
    return dtake(d, dy, n * sizeof *x);
}

/* Backward with dx aliasing dy (allowed by ops.h, and what layers do). */
static float *run_bwd(rumor_device_t *d, act_bwd_fn f, const float *x, const float *dy,
                      size_t n)
{
    float *dx = dput(d, x, n * sizeof *x), *ddy = dput(d, dy, n * sizeof *x);
    f(d, ddy, dx, ddy, n);
    d->ops->free(d, dx);
    return dtake(d, ddy, n * sizeof *x);
}

#define GELU_K 0.79788456080286535588 /* sqrt(2/pi) */

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(GELU_K * (x + 0.044715 * x * x * x)));
}

static void test_activations(rumor_device_t *d, rumor_device_t *cpu)
{
    enum { N = 4099 };
    float *x = fmalloc(N), *dy = fmalloc(N);
    double *w = dmalloc(N);
    fill(x, N, -8, 8, 21);
    fill(dy, N, -2, 2, 22);
    /* Exact zeros (both signs), tiny and saturating values. */
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = 1e-30f;
    x[3] = -1e-30f;
    x[4] = 20.0f;
    x[5] = -20.0f;
    x[6] = 0.0f;

    float *y = run_fwd(d, d->ops->relu_forward, x, N);
    for (int i = 0; i < N; i++)
        w[i] = x[i] > 0 ? x[i] : 0.0;
    cmp(d->name, "relu_forward", y, w, N, 0, 0);
    free(y);
    float *g = run_bwd(d, d->ops->relu_backward, x, dy, N);
    for (int i = 0; i < N; i++)
        w[i] = x[i] > 0 ? dy[i] : 0.0; /* the gradient at x == 0 is 0 */
    cmp(d->name, "relu_backward", g, w, N, 0, 0);
    free(g);

    y = run_fwd(d, d->ops->gelu_forward, x, N);
    for (int i = 0; i < N; i++)
        w[i] = gelu_ref(x[i]);
    cmp(d->name, "gelu_forward", y, w, N, 1e-6, 1e-5);
    if (d != cpu) {
        float *yc = run_fwd(cpu, cpu->ops->gelu_forward, x, N);
        cmp_cpu(d->name, "gelu_forward", y, yc, N, 1e-6, 1e-5);
        free(yc);
    }
    free(y);

    /* Central difference of the double forward: error ~h^2 f''' ~ 1e-10. */
    const double h = 1e-5;
    g = run_bwd(d, d->ops->gelu_backward, x, dy, N);
    for (int i = 0; i < N; i++)
        w[i] = dy[i] * (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h);
    cmp(d->name, "gelu_backward", g, w, N, 2e-6, 2e-5);
    if (d != cpu) {
        float *gc = run_bwd(cpu, cpu->ops->gelu_backward, x, dy, N);
        cmp_cpu(d->name, "gelu_backward", g, gc, N, 2e-6, 2e-5);
        free(gc);
    }
    free(g);
    free(x);
    free(dy);
    free(w);
}

/* ----------------------------------------------------------------- dropout */

static float *run_dropout(rumor_device_t *d, int backward, const float *x, size_t n, float p,
                          uint64_t seed)
{
    float *dx = dput(d, x, n * sizeof *x), *dy = dput(d, NULL, n * sizeof *x);
    if (backward)
        d->ops->dropout_backward(d, dy, dx, n, p, seed);
    else
        d->ops->dropout_forward(d, dy, dx, n, p, seed);
    d->ops->free(d, dx);
    return dtake(d, dy, n * sizeof *x);
}

static void test_dropout(rumor_device_t *d, rumor_device_t *cpu)
{
    const size_t n = 1000000;
    const float p = 0.3f;
    const uint64_t seed = 0x5eedULL;
    float *x = fmalloc(n), *dy = fmalloc(n);
    /* No zeros in the inputs, so a zero output means dropped. */
    fill(x, n, 0.5f, 2.0f, 31);
    fill(dy, n, -2.0f, -0.5f, 32);

    float *y = run_dropout(d, 0, x, n, p, seed);
    size_t kept = 0, bad_scale = 0, bad_mask = 0;
    for (size_t i = 0; i < n; i++) {
        int k = y[i] != 0.0f;
        kept += k;
        /* Every backend draws the mask from the exported generator. */
        bad_mask += k != (rumor_rand_uniform(seed, i) >= p);
        if (k && fabs(y[i] - x[i] / (1.0 - p)) > 1e-6 * fabs(x[i] / (1.0 - p)))
            bad_scale++;
    }
    double sigma = sqrt(n * (double)p * (1.0 - p));
    double dev = fabs((double)kept - n * (1.0 - p));
    CHECKF(dev <= 4 * sigma, "%s dropout kept %zu of %zu (expected %.0f +- %.0f)", d->name,
           kept, n, n * (1.0 - p), 4 * sigma);
    CHECKF(bad_scale == 0, "%s dropout: %zu kept values not x/(1-p)", d->name, bad_scale);
    CHECKF(bad_mask == 0, "%s dropout: %zu elements differ from rumor_rand_uniform's mask",
           d->name, bad_mask);

    /* Backward with the same seed drops the same elements. */
    float *g = run_dropout(d, 1, dy, n, p, seed);
    size_t bad_bwd = 0;
    for (size_t i = 0; i < n; i++) {
        double want = y[i] != 0.0f ? dy[i] / (1.0 - p) : 0.0;
        bad_bwd += fabs(g[i] - want) > 1e-6 * fabs(want);
    }
    CHECKF(bad_bwd == 0, "%s dropout_backward: %zu elements not masked as in forward", d->name,
           bad_bwd);
    free(g);

    /* Another seed draws another mask (about 2p(1-p) = 42% of elements differ). */
    float *y2 = run_dropout(d, 0, x, n, p, seed + 1);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += (y[i] != 0.0f) != (y2[i] != 0.0f);
    CHECKF(differ > n / 3, "%s dropout: seeds %llu and %llu share masks (%zu of %zu differ)",
           d->name, (unsigned long long)seed, (unsigned long long)seed + 1, differ, n);
    free(y2);

    if (d != cpu) {
        float *yc = run_dropout(cpu, 0, x, n, p, seed);
        cmp_cpu(d->name, "dropout_forward", y, yc, n, 0, 1e-6);
        free(yc);
    }
    free(y);

    /* p = 0 is the identity, forward and backward. */
    y = run_dropout(d, 0, x, n, 0.0f, seed);
    CHECKF(memcmp(y, x, n * sizeof *x) == 0, "%s dropout p=0 is not the identity", d->name);
    free(y);
    g = run_dropout(d, 1, dy, n, 0.0f, seed);
    CHECKF(memcmp(g, dy, n * sizeof *dy) == 0, "%s dropout_backward p=0 is not the identity",
           d->name);
    free(g);
    free(x);
    free(dy);
}

/* ------------------------------------------------------------ softmax/xent */

/* softmax_xent on d: the losses, and the logits after the op (grad: the
 * gradient written over them) */
static void run_xent(rumor_device_t *d, const float *logits, const int32_t *labels, int batch,
                     int classes, float scale, int grad, float **out, float **losses)
{
    size_t bc = (size_t)batch * classes;
    float *dz = dput(d, logits, bc * sizeof(float));
    int32_t *dl = dput(d, labels, batch * sizeof(int32_t));
    float *dloss = dput(d, NULL, batch * sizeof(float));
    d->ops->softmax_xent(d, dz, dloss, dl, batch, classes, scale, grad);
    *out = dtake(d, dz, bc * sizeof(float));
    *losses = dtake(d, dloss, batch * sizeof(float));
    d->ops->free(d, dl);
}

static void test_xent(rumor_device_t *d, rumor_device_t *cpu)
{
    enum { B = 10, C = 10 };
    float z[B * C];
    int32_t labels[B] = { 0, 9, 3, 4, 7, 1, 0, 5, 2, 8 };
    fill(z, B * C, -5, 5, 41);
    /* Rows 5-9: logits of magnitude 1e4. exp() of them overflows float, so
     * only a max-subtracting implementation stays finite. */
    for (int c = 0; c < C; c++) {
        z[5 * C + c] = c % 2 ? -1e4f : 1e4f - c; /* label 1 holds -1e4: loss ~2e4 */
        z[6 * C + c] = c == 0 ? 1e4f : 1e4f - 1.0f - c;
        z[7 * C + c] = 1e4f;                     /* all equal: loss log(10) */
        z[8 * C + c] = -1e4f;
        z[9 * C + c] = (c - 4.5f) * 2.2e3f;
    }
    const float scale = 1.0f / B;
    float *same, *l0, *g, *losses;
    run_xent(d, z, labels, B, C, scale, 0, &same, &l0);
    CHECKF(!memcmp(same, z, sizeof z), "%s softmax_xent without grad changed the logits",
           d->name);
    run_xent(d, z, labels, B, C, scale, 1, &g, &losses);
    CHECKF(!memcmp(l0, losses, B * sizeof(float)), "%s xent losses differ with grad", d->name);

    double wg[B * C], wl[B];
    for (int b = 0; b < B; b++) {
        const float *zr = z + b * C;
        double mx = zr[0], s = 0;
        for (int c = 1; c < C; c++)
            mx = fmax(mx, zr[c]);
        for (int c = 0; c < C; c++)
            s += exp((double)zr[c] - mx);
        double lse = mx + log(s);
        for (int c = 0; c < C; c++)
            wg[b * C + c] = (double)scale * (exp((double)zr[c] - lse) - (c == labels[b]));
        wl[b] = lse - zr[labels[b]];
    }
    cmp(d->name, "xent gradient", g, wg, B * C, 1e-7, 1e-5);
    cmp(d->name, "xent losses", losses, wl, B, 2e-6, 2e-6);
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int c = 0; c < C; c++)
            s += g[b * C + c];
        CHECKF(fabs(s) <= 1e-6, "%s xent gradient row %d sums to %.9g", d->name, b, s);
    }
    CHECK_CLOSE(losses[7], log(10.0), 1e-6, 1e-6);
    CHECK_CLOSE(losses[5], 2e4, 1.0, 0); /* label at -1e4, max 1e4: ~2e4, and finite */

    if (d != cpu) {
        float *gc, *lc;
        run_xent(cpu, z, labels, B, C, scale, 1, &gc, &lc);
        cmp_cpu(d->name, "xent gradient", g, gc, B * C, 1e-7, 1e-5);
        cmp_cpu(d->name, "xent losses", losses, lc, B, 2e-6, 2e-6);
        free(gc);
        free(lc);
    }
    free(same);
    free(l0);
    free(g);
    free(losses);
}

/* --------------------------------------------------------------- optimizers */

/* Three SGD steps from p = 1, mom = 0 with gradients 0.5, -0.25, 1; the
 * expected values are worked out by hand below each case. */
typedef struct {
    const char *what;
    float lr, mu, wd;
    int nesterov;
    double p[3], m[3]; /* after each step; m unchecked (NAN) when mu == 0 */
} sgd_case;

static const sgd_case sgd_cases[] = {
    /* p1 = 1 - 0.1*0.5; p2 = 0.95 - 0.1*(-0.25); p3 = 0.975 - 0.1*1 */
    { "plain", 0.1f, 0.0f, 0.0f, 0, { 0.95, 0.975, 0.875 }, { NAN, NAN, NAN } },
    /* g' = g + 0.1 p: 0.5+0.1 = 0.6 -> p1 = 0.94; -0.25+0.094 = -0.156 -> p2 = 0.9556;
     * 1+0.09556 = 1.09556 -> p3 = 0.9556 - 0.109556 = 0.846044 */
    { "weight decay", 0.1f, 0.0f, 0.1f, 0, { 0.94, 0.9556, 0.846044 }, { NAN, NAN, NAN } },
    /* m1 = 0.5, p1 = 0.95; m2 = 0.45 - 0.25 = 0.2, p2 = 0.93;
     * m3 = 0.18 + 1 = 1.18, p3 = 0.93 - 0.118 = 0.812 */
    { "momentum", 0.1f, 0.9f, 0.0f, 0, { 0.95, 0.93, 0.812 }, { 0.5, 0.2, 1.18 } },
    /* g1' = 0.5 + 0.01 = 0.51, m1 = 0.51, p1 = 1 - 0.051 = 0.949;
     * g2' = -0.25 + 0.00949 = -0.24051, m2 = 0.459 - 0.24051 = 0.21849,
     * p2 = 0.949 - 0.021849 = 0.927151;
     * g3' = 1 + 0.00927151 = 1.00927151, m3 = 0.196641 + 1.00927151 = 1.20591251,
     * p3 = 0.927151 - 0.120591251 = 0.806559749 */
    { "momentum+wd", 0.1f, 0.9f, 0.01f, 0, { 0.949, 0.927151, 0.806559749 },
      { 0.51, 0.21849, 1.20591251 } },
    /* step = g' + 0.9 m. g1' = 0.51, m1 = 0.51, step = 0.51 + 0.459 = 0.969,
     * p1 = 1 - 0.0969 = 0.9031;
     * g2' = -0.25 + 0.009031 = -0.240969, m2 = 0.459 - 0.240969 = 0.218031,
     * step = -0.240969 + 0.1962279 = -0.0447411, p2 = 0.9031 + 0.00447411 = 0.90757411;
     * g3' = 1 + 0.0090757411 = 1.0090757411, m3 = 0.1962279 + 1.0090757411 = 1.2053036411,
     * step = 1.0090757411 + 1.08477327699 = 2.09384901809,
     * p3 = 0.90757411 - 0.209384901809 = 0.698189208191 */
    { "nesterov+wd", 0.1f, 0.9f, 0.01f, 1, { 0.9031, 0.90757411, 0.698189208191 },
      { 0.51, 0.218031, 1.2053036411 } },
};

static void test_sgd(rumor_device_t *d)
{
    static const float grads[3] = { 0.5f, -0.25f, 1.0f };
    for (size_t ci = 0; ci < sizeof sgd_cases / sizeof sgd_cases[0]; ci++) {
        const sgd_case *sc = &sgd_cases[ci];
        /* Five copies, so vector bodies and tails both run. */
        enum { N = 5 };
        float p0[N], g[N];
        for (int i = 0; i < N; i++)
            p0[i] = 1.0f;
        float *dp = dput(d, p0, sizeof p0), *dm = dput(d, NULL, sizeof p0);
        float *dg = dput(d, NULL, sizeof g);
        for (int t = 0; t < 3; t++) {
            for (int i = 0; i < N; i++)
                g[i] = grads[t];
            CHECK_OK(d->ops->upload(d, dg, g, sizeof g));
            d->ops->sgd_step(d, dp, dm, dg, N, sc->lr, sc->mu, sc->wd, sc->nesterov);
            float p[N], m[N];
            CHECK_OK(d->ops->sync(d));
            CHECK_OK(d->ops->download(d, p, dp, sizeof p));
            CHECK_OK(d->ops->download(d, m, dm, sizeof m));
            int bad = 0;
            for (int i = 0; i < N; i++)
                bad += !(fabs(p[i] - sc->p[t]) <= 1e-6) ||
                       (!isnan(sc->m[t]) && !(fabs(m[i] - sc->m[t]) <= 1e-6));
            CHECKF(bad == 0, "%s sgd %s step %d: p = %.9g, mom = %.9g, expected %.9g, %.9g",
                   d->name, sc->what, t + 1, p[0], m[0], sc->p[t], sc->m[t]);
        }
        d->ops->free(d, dp);
        d->ops->free(d, dm);
        d->ops->free(d, dg);
    }
}

/* AdamW, lr 0.01, betas 0.9/0.999, eps 1e-8, wd 0.1, three steps. Element 0
 * starts at p = 1 with gradients 0.5, -0.25, 1; element 1 starts at p = -2
 * with zero gradients, so only the decoupled decay moves it. */
static void test_adamw(rumor_device_t *d)
{
    const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
    static const float grads[3][2] = { { 0.5f, 0.0f }, { -0.25f, 0.0f }, { 1.0f, 0.0f } };
    double want[3][2];
    /* t=1: p *= 1 - lr*wd = 0.999; m = 0.1*0.5 = 0.05; v = 0.001*0.25 = 0.00025;
     * bc1 = 0.1, bc2 = 0.001 */
    want[0][0] = 1.0 * 0.999 - 0.01 * (0.05 / 0.1) / (sqrt(0.00025 / 0.001) + 1e-8);
    /* t=2: m = 0.9*0.05 + 0.1*(-0.25) = 0.02; v = 0.999*0.00025 + 0.001*0.0625 = 0.00031225;
     * bc1 = 1 - 0.81 = 0.19, bc2 = 1 - 0.998001 = 0.001999 */
    want[1][0] = want[0][0] * 0.999 - 0.01 * (0.02 / 0.19) / (sqrt(0.00031225 / 0.001999) + 1e-8);
    /* t=3: m = 0.9*0.02 + 0.1*1 = 0.118; v = 0.999*0.00031225 + 0.001*1 = 0.00131193775;
     * bc1 = 1 - 0.729 = 0.271, bc2 = 1 - 0.997002999 = 0.002997001 */
    want[2][0] = want[1][0] * 0.999 -
                 0.01 * (0.118 / 0.271) / (sqrt(0.00131193775 / 0.002997001) + 1e-8);
    /* Zero gradient: m = v = 0, the update is 0/(0 + eps) = 0. */
    want[0][1] = -2.0 * 0.999;
    want[1][1] = -2.0 * 0.999 * 0.999;
    want[2][1] = -2.0 * 0.999 * 0.999 * 0.999;
    /* Also pin the figures the comments above quote. */
    CHECK_CLOSE(want[0][0], 0.9890000002, 1e-12, 0);
    CHECK_CLOSE(want[2][0], 0.9777811663376385, 1e-12, 0);

    float p0[2] = { 1.0f, -2.0f };
    float *dp = dput(d, p0, sizeof p0), *dm = dput(d, NULL, sizeof p0);
    float *dv = dput(d, NULL, sizeof p0), *dg = dput(d, NULL, sizeof p0);
    for (int t = 1; t <= 3; t++) {
        CHECK_OK(d->ops->upload(d, dg, grads[t - 1], sizeof grads[0]));
        float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
        d->ops->adamw_step(d, dp, dm, dv, dg, 2, lr, b1, b2, eps, wd, bc1, bc2);
        float p[2];
        CHECK_OK(d->ops->sync(d));
        CHECK_OK(d->ops->download(d, p, dp, sizeof p));
        for (int i = 0; i < 2; i++)
            CHECKF(fabs(p[i] - want[t - 1][i]) <= 1e-6 + 1e-6 * fabs(want[t - 1][i]),
                   "%s adamw step %d p[%d] = %.9g, expected %.9g", d->name, t, i, p[i],
                   want[t - 1][i]);
    }
    d->ops->free(d, dp);
    d->ops->free(d, dm);
    d->ops->free(d, dv);
    d->ops->free(d, dg);
}

/* ----------------------------------------------------------------- devices */

static void test_table_complete(const rumor_device_t *d)
{
    const rumor_ops_t *o = d->ops;
#define HAS(f) CHECKF(o->f != NULL, "%s: ops->" #f " is NULL", d->name)
    HAS(name); HAS(alloc); HAS(free); HAS(upload); HAS(download); HAS(copy); HAS(sync);
    HAS(gemm); HAS(add_bias); HAS(sum_rows); HAS(axpy); HAS(scale);
    HAS(relu_forward); HAS(relu_backward); HAS(gelu_forward); HAS(gelu_backward);
    HAS(gemm_bias_gelu); HAS(gemm_dgelu);
    HAS(dropout_forward); HAS(dropout_backward);
    HAS(softmax_xent);
    HAS(sgd_step); HAS(adamw_step);
#undef HAS
}

static void test_specs(void)
{
    rumor_device_t *d = NULL;
    static const char *const good[] = { "cpu", "cpu:2", "auto", "", "cpu:1:slow=2.5",
                                        "cpu:slow=3" };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK_OK(rumor_device_open(good[i], &d));
        CHECKF(d != NULL && d->ops != NULL && d->name[0], "spec '%s' gave no device", good[i]);
        if (d && strcmp(good[i], "cpu:2") == 0)
            CHECKF(d->kind == RUMOR_DEV_CPU && d->nthreads == 2 && d->ops == &rumor_cpu_ops &&
                       strstr(d->name, "2 threads"),
                   "cpu:2 opened kind %d with %d threads, name '%s'", d->kind, d->nthreads,
                   d->name);
        if (d && strcmp(good[i], "cpu") == 0)
            CHECKF(d->nthreads == rumor_cpu_cores(), "cpu opened with %d threads of %d cores",
                   d->nthreads, rumor_cpu_cores());
        if (d)
            CHECKF(d->slowdown == (i == 4 ? 2.5 : i == 5 ? 3.0 : 1.0) &&
                       (i < 4 || strstr(d->name, "x slower)")) &&
                       (i != 4 || d->nthreads == 1) && (i != 5 || d->nthreads == rumor_cpu_cores()),
                   "'%s': slowdown %g, %d threads, name '%s'", good[i], d->slowdown,
                   d->nthreads, d->name);
        rumor_device_close(&d);
        CHECK(d == NULL);
        rumor_device_close(&d); /* safe twice */
        CHECK(d == NULL);
    }
    rumor_device_close(NULL);

    /* Each bad spec fails with EINVAL, names itself, and leaves *out NULL. */
    static const char *const bad[] = { "cpu:0", "cpu:x",   "gpu", "cuda:abc", "cpu:",
                                       "cpu:-1", "cpu:2x", "CPU", "cudax",    "cuda:-1",
                                       "cpu:1:slow=0.5", "cpu:1:slow=", "cpu:1:slow=2x",
                                       "cpu:1:slow=101", "cpu:x:slow=2", "cuda:0:slow=2" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = (rumor_device_t *)&d; /* poison: open must clear it */
        CHECK_ERR(rumor_device_open(bad[i], &d), RUMOR_EINVAL, bad[i]);
        CHECKF(d == NULL, "spec '%s' failed but left *out set", bad[i]);
    }

    /* Without a usable GPU, asking for one is ENODEV (none present) or
     * ENOTSUP (CUDA not built, or its ops not written yet), and says which. */
    if (rumor_device_count(RUMOR_DEV_CUDA) == 0) {
        static const char *const cuda[] = { "cuda:0", "cuda" };
        for (size_t i = 0; i < 2; i++) {
            rumor_err_clear();
            int rc = rumor_device_open(cuda[i], &d);
            CHECKF((rc == RUMOR_ENODEV || rc == RUMOR_ENOTSUP) && d == NULL &&
                       strstr(rumor_err_msg(), cuda[i]) &&
                       (strstr(rumor_err_msg(), "CUDA") || strstr(rumor_err_msg(), "GPU")),
                   "'%s' without a GPU: rc %d, \"%s\"", cuda[i], rc, rumor_err_msg());
            fprintf(stderr, "# %s here: %s (%s)\n", cuda[i], rumor_strerror(rc),
                    rumor_err_msg());
            rumor_device_close(&d);
        }
    }
    int n = rumor_device_count(RUMOR_DEV_CUDA);
    char spec[32];
    snprintf(spec, sizeof spec, "cuda:%d", n); /* one past the last GPU */
    int rc = rumor_device_open(spec, &d);
    CHECKF((rc == RUMOR_ENODEV || rc == RUMOR_ENOTSUP) && d == NULL && strstr(rumor_err_msg(), spec),
           "'%s' (only %d GPUs): rc %d \"%s\"", spec, n, rc, rumor_err_msg());
    rumor_device_close(&d);
}

/* After rumor_blas_autotune, OpenBLAS runs the best kernels this CPU has,
 * unless RUMOR_BLAS_AUTOTUNE=0 asked to keep the slower ones. */
static void test_blas_core(void)
{
    const char *from = getenv("RUMOR_BLAS_AUTOTUNED_FROM");
    const char *opt = getenv("RUMOR_BLAS_AUTOTUNE");
    fprintf(stderr, "# openblas core: %s%s%s%s\n", rumor_blas_corename(),
            from ? " (autotuned from " : "", from ? from : "", from ? ")" : "");
    if (!(opt && strcmp(opt, "0") == 0))
        CHECKF(rumor_blas_better_core() == NULL,
               "OpenBLAS still runs %s kernels after autotune where %s is better",
               rumor_blas_corename(), rumor_blas_better_core());
}

/* ------------------------------------------------------------------- main */

static void run_all(rumor_device_t *d, rumor_device_t *cpu)
{
    fprintf(stderr, "# backend %s\n", d->name);
    test_table_complete(d);
    test_memory(d);
    test_gemm(d, cpu);
    test_algebra(d, cpu);
    test_activations(d, cpu);
    test_dropout(d, cpu);
    test_xent(d, cpu);
    test_sgd(d);
    test_adamw(d);
}

int main(int argc, char **argv)
{
    /* Test the kernels the binaries run: the same re-exec they do. */
    rumor_blas_autotune(argc, argv);
    test_blas_core();
    test_specs();

    rumor_device_t *cpu = NULL, *cpu2 = NULL;
    CHECK_OK(rumor_device_open("cpu:1", &cpu));
    CHECK_OK(rumor_device_open("cpu:2", &cpu2));
    if (!cpu || !cpu2)
        return tu_finish("test_ops");
    run_all(cpu, cpu);
    run_all(cpu2, cpu);

    int ngpu = rumor_device_count(RUMOR_DEV_CUDA);
    for (int i = 0; i < ngpu; i++) {
        char spec[32];
        snprintf(spec, sizeof spec, "cuda:%d", i);
        rumor_device_t *g = NULL;
        rumor_err_clear();
        int rc = rumor_device_open(spec, &g);
        /* a GPU is present (the count says so, which only a CUDA build
         * can): a backend that does not open is a missing code path, a
         * failure, never a skip */
        CHECKF(rc == 0, "%s: a GPU is present but its backend does not open: %s (%s)", spec,
               rumor_strerror(rc), rumor_err_msg());
        if (g)
            run_all(g, cpu);
        rumor_device_close(&g);
    }
    if (ngpu == 0)
        fprintf(stderr, "# no CUDA GPU: CPU backends only\n");

    rumor_device_close(&cpu);
    rumor_device_close(&cpu2);
    return tu_finish("test_ops");
}

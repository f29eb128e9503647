/* Every op of every backend present against the CPU table, ggml's way.
 *
 * For each GPU (a CUDA build with a GPU, or the CPU emulation of
 * tests/cuda-emu), each math op of the ops table runs on inputs drawn here
 * and on the same inputs through the CPU table; the two outputs are compared
 * by their normalized mean squared error NMSE = sum (a - b)^2 / sum a^2
 * (a the CPU's), under 1e-7 for element-wise and row ops, and for matrix
 * products by precision: 1e-10 in fp32 (cuBLAS and OpenBLAS differ only in
 * the order of their sums), 5e-4 in tf32, 5e-3 in bf16; fused attention
 * 1e-10 in fp32, 1e-3 in bf16 (tensor cores). Where the CPU gives
 * NaN or an infinity (inputs with NaN and Inf in them) the GPU must give the
 * same at the same place. Every output buffer has 64 floats of canary on
 * each side, a NaN payload no kernel computes, checked bit for bit after
 * the op: a write out of bounds fails the op.
 *
 * Without a GPU the test exits 77. With one, an op missing from its table
 * is a failure, as is any op that fails or differs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "testutil.h"

#define GUARD 64
#define CANARY 0x7fc0c0deu /* a NaN whose payload no kernel writes */

static rumor_device_t *gpu, *cpu;
static int emulated;
static uint64_t rng = 0x243f6a8885a308d3ULL;

static float frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static float *host_rand(size_t n, float scale)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = scale * frand();
    return h;
}

/* ---- device buffers with canaries on both sides */

typedef struct {
    float *base; /* the allocation: GUARD canaries, n floats, GUARD canaries */
    size_t n;
} gbuf;

static float *gdata(const gbuf *b) { return b->base + GUARD; }

static gbuf gput(const float *h, size_t n) /* device copy of h (NULL: zeros) */
{
    gbuf b = { NULL, n };
    size_t tot = n + 2 * GUARD;
    float *tmp = calloc(tot, sizeof *tmp);
    uint32_t c = CANARY;
    for (size_t i = 0; i < GUARD; i++) {
        memcpy(&tmp[i], &c, 4);
        memcpy(&tmp[GUARD + n + i], &c, 4);
    }
    if (h)
        memcpy(tmp + GUARD, h, n * sizeof *h);
    b.base = gpu->ops->alloc(gpu, tot * sizeof(float));
    CHECK_OK(b.base ? gpu->ops->upload(gpu, b.base, tmp, tot * sizeof(float)) : -1);
    free(tmp);
    return b;
}

/* The buffer's n floats, after checking its canaries; frees it. */
static float *gtake(gbuf *b, const char *what)
{
    size_t tot = b->n + 2 * GUARD;
    float *tmp = malloc(tot * sizeof *tmp), *out = malloc((b->n ? b->n : 1) * sizeof *out);
    CHECK_OK(gpu->ops->download(gpu, tmp, b->base, tot * sizeof(float)));
    int bad = 0;
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t lo, hi;
        memcpy(&lo, &tmp[i], 4);
        memcpy(&hi, &tmp[GUARD + b->n + i], 4);
        bad += (lo != CANARY) + (hi != CANARY);
    }
    CHECKF(bad == 0, "%s: %s wrote %d floats outside its output", gpu->name, what, bad);
    memcpy(out, tmp + GUARD, b->n * sizeof *out);
    free(tmp);
    gpu->ops->free(gpu, b->base);
    b->base = NULL;
    return out;
}

static int32_t *iput(const int32_t *h, size_t n)
{
    int32_t *d = gpu->ops->alloc(gpu, (n ? n : 1) * sizeof *d);
    CHECK_OK(d ? gpu->ops->upload(gpu, d, h, n * sizeof *h) : -1);
    return d;
}

/* ---- comparison */

/* NMSE of got against ref over the entries where ref is finite; NaN and
 * infinities must sit where ref has them. */
static void compare(const char *what, const float *ref, const float *got, size_t n, double max)
{
    double num = 0, den = 0;
    size_t wrong_special = 0;
    for (size_t i = 0; i < n; i++) {
        float a = ref[i], b = got[i];
        if (isnan(a) || isinf(a)) {
            int same = isnan(a) ? isnan(b) : (isinf(b) && signbit(a) == signbit(b));
            if (!same && wrong_special++ < 3)
                fprintf(stderr, "  %s: %s[%zu] = %g where the CPU has %g\n", gpu->name, what, i,
                        (double)b, (double)a);
            continue;
        }
        double e = (double)a - (double)b;
        num += e * e;
        den += (double)a * a;
    }
    double nmse = den > 0 ? num / den : num;
    CHECKF(wrong_special == 0, "%s: %s: %zu NaN or infinities out of place", gpu->name, what,
           wrong_special);
    CHECKF(nmse <= max, "%s: %s: NMSE %.3g above %.3g", gpu->name, what, nmse, max);
    if (getenv("RUMOR_TEST_VERBOSE"))
        fprintf(stderr, "# %s: NMSE %.3g (limit %.3g)\n", what, nmse, max);
}

#define ELT 1e-7

/* ---- the ops */

static void op_gemm(rumor_precision prec)
{
    static const double lim[] = { 1e-10, 5e-4, 5e-3 };
    CHECK_OK(rumor_device_set_precision(gpu, prec));
    int m = 67, n = 129, k = 45;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = ta ? m : k, ldb = tb ? k : n;
            float *a = host_rand((size_t)m * k, 1), *b = host_rand((size_t)k * n, 1),
                  *c = host_rand((size_t)m * n, 1), *ref = malloc((size_t)m * n * sizeof *ref);
            memcpy(ref, c, (size_t)m * n * sizeof *c);
            cpu->ops->gemm(cpu, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, ref, n);
            gbuf A = gput(a, (size_t)m * k), B = gput(b, (size_t)k * n), C = gput(c, (size_t)m * n);
            gpu->ops->gemm(gpu, ta, tb, m, n, k, 0.7f, gdata(&A), lda, gdata(&B), ldb, 0.3f,
                           gdata(&C), n);
            char what[64];
            snprintf(what, sizeof what, "gemm %c%c %s", ta ? 'T' : 'N', tb ? 'T' : 'N',
                     rumor_precision_name(prec));
            float *got = gtake(&C, what);
            compare(what, ref, got, (size_t)m * n, lim[prec]);
            free(gtake(&A, "gemm A"));
            free(gtake(&B, "gemm B"));
            free(a), free(b), free(c), free(ref), free(got);
        }
    /* strided batches, as attention uses them */
    int batch = 5;
    long long sa = (long long)m * k + 3, sb = (long long)k * n + 5, sc = (long long)m * n + 7;
    float *a = host_rand((size_t)(sa * batch), 1), *b = host_rand((size_t)(sb * batch), 1),
          *c = host_rand((size_t)(sc * batch), 1), *ref = malloc((size_t)(sc * batch) * 4);
    memcpy(ref, c, (size_t)(sc * batch) * 4);
    cpu->ops->gemm_batched(cpu, 0, 1, m, n, k, 1.0f, a, k, sa, b, k, sb, 0.0f, ref, n, sc, batch);
    gbuf A = gput(a, (size_t)(sa * batch)), B = gput(b, (size_t)(sb * batch)),
         C = gput(c, (size_t)(sc * batch));
    gpu->ops->gemm_batched(gpu, 0, 1, m, n, k, 1.0f, gdata(&A), k, sa, gdata(&B), k, sb, 0.0f,
                           gdata(&C), n, sc, batch);
    float *got = gtake(&C, "gemm_batched");
    compare("gemm_batched", ref, got, (size_t)(sc * batch), lim[prec]);
    free(gtake(&A, "gemm_batched A"));
    free(gtake(&B, "gemm_batched B"));
    free(a), free(b), free(c), free(ref), free(got);
    CHECK_OK(rumor_device_set_precision(gpu, RUMOR_PREC_FP32));
}

/* x rounded to bf16 (8 bits of mantissa, to nearest, ties to even) */
static float round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* bf16 products are the fp32 products of the inputs rounded to bf16: the
 * CPU's GEMM over rounded copies, to fp32's tolerance, with leading
 * dimensions wider than the rows (operands inside larger matrices) */
static void op_gemm_bf16_exact(void)
{
    CHECK_OK(rumor_device_set_precision(gpu, RUMOR_PREC_BF16));
    for (int pad = 0; pad < 2; pad++) /* packed operands of 4s (vector loads), padded ones */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int m = pad ? 157 : 156, n = pad ? 53 : 52, k = pad ? 29 : 28;
            int lda = (ta ? m : k) + 3 * pad, ldb = (tb ? k : n) + 5 * pad, ldc = n + 2 * pad;
            size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb,
                   nc = (size_t)m * ldc;
            float *a = host_rand(na, 1), *b = host_rand(nb, 1), *c = host_rand(nc, 1);
            float *ra = malloc(na * 4), *rb = malloc(nb * 4), *ref = malloc(nc * 4);
            for (size_t i = 0; i < na; i++)
                ra[i] = round_bf16(a[i]);
            for (size_t i = 0; i < nb; i++)
                rb[i] = round_bf16(b[i]);
            memcpy(ref, c, nc * 4);
            cpu->ops->gemm(cpu, ta, tb, m, n, k, 0.7f, ra, lda, rb, ldb, 0.3f, ref, ldc);
            gbuf A = gput(a, na), B = gput(b, nb), C = gput(c, nc);
            gpu->ops->gemm(gpu, ta, tb, m, n, k, 0.7f, gdata(&A), lda, gdata(&B), ldb, 0.3f,
                           gdata(&C), ldc);
            char what[64];
            snprintf(what, sizeof what, "gemm %c%c bf16 inputs, %s", ta ? 'T' : 'N',
                     tb ? 'T' : 'N', pad ? "strided" : "packed");
            float *got = gtake(&C, what);
            compare(what, ref, got, nc, 1e-10);
            free(gtake(&A, "gemm A"));
            free(gtake(&B, "gemm B"));
            free(a), free(b), free(c), free(ra), free(rb), free(ref), free(got);
        }
    CHECK_OK(rumor_device_set_precision(gpu, RUMOR_PREC_FP32));
}

/* the MLP's fused dense + GELU (cuBLASLt epilogues on a GPU) against the
 * CPU's gemm, add_bias and GELU: widths that are multiples of 8 (the
 * epilogue's) and odd ones (the separate ops) */
static void op_gemm_gelu(rumor_precision prec)
{
    static const double lim[] = { 1e-10, 5e-4, 5e-3 };
    static const int shapes[3][3] = { { 67, 48, 136 }, { 67, 45, 129 }, { 5, 8, 8 } };
    CHECK_OK(rumor_device_set_precision(gpu, prec));
    for (int s = 0; s < 3; s++) {
        int rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        size_t nx = (size_t)rows * in, ny = (size_t)rows * out;
        float *x = host_rand(nx, 1), *w = host_rand((size_t)in * out, 0.5f),
              *b = host_rand((size_t)out, 0.5f), *dy = host_rand(ny, 1);
        float *pre = malloc(ny * 4), *y = malloc(ny * 4), *dx = malloc(nx * 4);
        float *xpre = host_rand(nx, 2); /* the backward's pre-GELU input, (rows, in) */
        cpu->ops->gemm_bias_gelu(cpu, y, pre, x, w, b, rows, in, out);
        cpu->ops->gemm_dgelu(cpu, dx, dy, w, xpre, rows, in, out);
        gbuf X = gput(x, nx), W = gput(w, (size_t)in * out), Bb = gput(b, (size_t)out),
             P = gput(NULL, ny), Y = gput(NULL, ny), DY = gput(dy, ny), XP = gput(xpre, nx),
             DX = gput(NULL, nx);
        gpu->ops->gemm_bias_gelu(gpu, gdata(&Y), gdata(&P), gdata(&X), gdata(&W), gdata(&Bb), rows,
                                 in, out);
        gpu->ops->gemm_dgelu(gpu, gdata(&DX), gdata(&DY), gdata(&W), gdata(&XP), rows, in, out);
        char what[96];
        float *gp = gtake(&P, "gemm_bias_gelu pre"), *gy = gtake(&Y, "gemm_bias_gelu y"),
              *gdx = gtake(&DX, "gemm_dgelu dx");
        snprintf(what, sizeof what, "gemm_bias_gelu pre (%d, %d, %d) %s", rows, in, out,
                 rumor_precision_name(prec));
        compare(what, pre, gp, ny, lim[prec]);
        snprintf(what, sizeof what, "gemm_bias_gelu y (%d, %d, %d) %s", rows, in, out,
                 rumor_precision_name(prec));
        compare(what, y, gy, ny, lim[prec]);
        snprintf(what, sizeof what, "gemm_dgelu dx (%d, %d, %d) %s", rows, in, out,
                 rumor_precision_name(prec));
        compare(what, dx, gdx, nx, lim[prec]);
        gbuf *rest[] = { &X, &W, &Bb, &DY, &XP };
        for (int i = 0; i < 5; i++)
            free(gtake(rest[i], "gemm_gelu inputs"));
        free(x), free(w), free(b), free(dy), free(pre), free(y), free(dx), free(xpre), free(gp),
            free(gy), free(gdx);
    }
    CHECK_OK(rumor_device_set_precision(gpu, RUMOR_PREC_FP32));
}

/* inputs with a NaN, +Inf and -Inf among them */
static float *host_special(size_t n, float scale)
{
    float *h = host_rand(n, scale);
    if (n > 10) {
        h[3] = NAN;
        h[n / 2] = INFINITY;
        h[n - 2] = -INFINITY;
    }
    return h;
}

/* an op of the form out = f(x [, y]) in place over n floats: both tables
 * from the same (x, y, out) */
typedef void (*unary_fn)(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                         const float *y, size_t n);

static void elementwise(const char *what, unary_fn f, int special)
{
    size_t n = emulated ? 10007 : 1000003;
    float *x = special ? host_special(n, 3) : host_rand(n, 3), *y = host_rand(n, 2),
          *o = host_rand(n, 1), *ref = malloc(n * sizeof *ref);
    memcpy(ref, o, n * sizeof *o);
    gbuf X = gput(x, n), Y = gput(y, n), O = gput(o, n);
    f(cpu->ops, cpu, ref, x, y, n);
    f(gpu->ops, gpu, gdata(&O), gdata(&X), gdata(&Y), n);
    float *got = gtake(&O, what);
    compare(what, ref, got, n, ELT);
    free(gtake(&X, what));
    free(gtake(&Y, what));
    free(x), free(y), free(o), free(ref), free(got);
}

static void f_axpy(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                   const float *y, size_t n) { (void)y; o->axpy(d, out, -0.37f, x, n); }
static void f_scale(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                    const float *y, size_t n) { (void)x, (void)y; o->scale(d, out, 1.7f, n); }
static void f_fill(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                   const float *y, size_t n) { (void)x, (void)y; o->fill(d, out, -2.5f, n); }
static void f_add(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                  const float *y, size_t n) { o->add(d, out, x, y, n); }
static void f_add_alias(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                        const float *y, size_t n) { (void)y; o->add(d, out, out, x, n); }
static void f_axpby(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                    const float *y, size_t n) { (void)y; o->axpby(d, out, 0.6f, x, 0.4f, n); }
static void f_axpby0(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                     const float *y, size_t n) { (void)y; o->axpby(d, out, 0.6f, x, 0.0f, n); }
static void f_relu(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                   const float *y, size_t n) { (void)y; o->relu_forward(d, out, x, n); }
static void f_relu_b(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                     const float *y, size_t n) { o->relu_backward(d, out, x, y, n); }
static void f_gelu(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                   const float *y, size_t n) { (void)y; o->gelu_forward(d, out, x, n); }
static void f_gelu_b(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                     const float *y, size_t n) { o->gelu_backward(d, out, x, y, n); }
static void f_drop(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                   const float *y, size_t n) { (void)y; o->dropout_forward(d, out, x, n, 0.3f, 77); }
static void f_drop_b(const rumor_ops_t *o, rumor_device_t *d, float *out, const float *x,
                     const float *y, size_t n) { (void)y; o->dropout_backward(d, out, x, n, 0.3f, 77); }
/* optimizer steps: parameters and state compared after three steps */
static void op_optim(int adamw)
{
    size_t n = emulated ? 10007 : 1000003;
    float *p = host_rand(n, 1), *m = host_rand(n, 0.1f), *v = host_rand(n, 0.01f),
          *g = host_rand(n, 1);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]); /* a second moment */
    gbuf P = gput(p, n), M = gput(m, n), Vv = gput(v, n), G = gput(g, n);
    for (int t = 1; t <= 3; t++) {
        float bc1 = 1.0f - powf(0.9f, (float)t), bc2 = 1.0f - powf(0.999f, (float)t);
        if (adamw) {
            cpu->ops->adamw_step(cpu, p, m, v, g, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, bc1, bc2);
            gpu->ops->adamw_step(gpu, gdata(&P), gdata(&M), gdata(&Vv), gdata(&G), n, 1e-3f, 0.9f,
                                 0.999f, 1e-8f, 0.01f, bc1, bc2);
        } else {
            cpu->ops->sgd_step(cpu, p, m, g, n, 0.05f, 0.9f, 5e-4f, t != 2);
            gpu->ops->sgd_step(gpu, gdata(&P), gdata(&M), gdata(&G), n, 0.05f, 0.9f, 5e-4f,
                               t != 2);
        }
    }
    const char *name = adamw ? "adamw_step" : "sgd_step";
    float *gp = gtake(&P, name), *gm = gtake(&M, name), *gv = gtake(&Vv, name);
    compare(adamw ? "adamw_step parameters" : "sgd_step parameters", p, gp, n, ELT);
    compare(adamw ? "adamw_step first moment" : "sgd_step momentum", m, gm, n, ELT);
    if (adamw)
        compare("adamw_step second moment", v, gv, n, ELT);
    free(gtake(&G, name));
    free(p), free(m), free(v), free(g), free(gp), free(gm), free(gv);
}

static void op_bias_rows(void)
{
    int rows = emulated ? 97 : 4099, cols = 131;
    size_t n = (size_t)rows * cols;
    float *y = host_rand(n, 1), *bias = host_rand((size_t)cols, 1), *ref = malloc(n * 4);
    memcpy(ref, y, n * 4);
    cpu->ops->add_bias(cpu, ref, bias, rows, cols);
    gbuf Y = gput(y, n), Bi = gput(bias, (size_t)cols);
    gpu->ops->add_bias(gpu, gdata(&Y), gdata(&Bi), rows, cols);
    float *got = gtake(&Y, "add_bias");
    compare("add_bias", ref, got, n, ELT);
    free(got);
    /* column sums: odd widths (a column a thread), widths of 4s (float4) */
    for (int w = 0; w < 2; w++)
    for (int k = 0; k < 3; k++) {
        static const float betas[] = { 0.0f, 1.0f, 0.5f };
        int sc = w ? 132 : cols;
        float *sy = w ? host_rand((size_t)rows * sc, 1) : y;
        float *db = host_rand((size_t)sc, 1), *r = malloc((size_t)sc * 4);
        if (k == 0)
            db[5] = NAN; /* beta 0 forgets it */
        memcpy(r, db, (size_t)sc * 4);
        cpu->ops->sum_rows(cpu, r, sy, rows, sc, betas[k]);
        gbuf D = gput(db, (size_t)sc), Yin = gput(sy, (size_t)rows * sc);
        gpu->ops->sum_rows(gpu, gdata(&D), gdata(&Yin), rows, sc, betas[k]);
        char what[48];
        snprintf(what, sizeof what, "sum_rows (%d, %d) beta %g", rows, sc, (double)betas[k]);
        got = gtake(&D, what);
        compare(what, r, got, (size_t)sc, 1e-10);
        free(gtake(&Yin, what));
        free(got), free(db), free(r);
        if (w)
            free(sy);
    }
    free(gtake(&Bi, "add_bias"));
    free(y), free(bias), free(ref);
}

static void op_reductions(void)
{
    size_t n = emulated ? 20011 : 3000017;
    float *x = host_rand(n, 2), *y = host_rand(n, 2), *ry = malloc(n * 4);
    memcpy(ry, y, n * 4);
    double dref, dgot, sref, sgot;
    size_t bref, bgot;
    CHECK_OK(cpu->ops->axpy_dist(cpu, ry, 0.25f, x, n, &dref));
    gbuf X = gput(x, n), Y = gput(y, n);
    CHECK_OK(gpu->ops->axpy_dist(gpu, gdata(&Y), 0.25f, gdata(&X), n, &dgot));
    CHECKF(fabs(dgot - dref) <= 1e-6 * dref, "%s: axpy_dist %.12g against %.12g", gpu->name, dgot,
           dref);
    float *got = gtake(&Y, "axpy_dist");
    compare("axpy_dist", ry, got, n, ELT);
    x[7] = NAN;
    x[n - 1] = INFINITY;
    CHECK_OK(cpu->ops->sumsq(cpu, x, n, &sref, &bref));
    free(gtake(&X, "axpy_dist x"));
    X = gput(x, n);
    CHECK_OK(gpu->ops->sumsq(gpu, gdata(&X), n, &sgot, &bgot));
    CHECKF(bgot == bref && bref == 2, "%s: sumsq counts %zu non-finite, the CPU %zu", gpu->name,
           bgot, bref);
    CHECKF(isnan(sgot) == isnan(sref), "%s: sumsq %g, the CPU %g", gpu->name, sgot, sref);
    x[7] = 1.0f;
    x[n - 1] = 2.0f;
    free(gtake(&X, "sumsq"));
    X = gput(x, n);
    CHECK_OK(cpu->ops->sumsq(cpu, x, n, &sref, &bref));
    CHECK_OK(gpu->ops->sumsq(gpu, gdata(&X), n, &sgot, &bgot));
    CHECKF(fabs(sgot - sref) <= 1e-9 * sref && bgot == 0, "%s: sumsq %.15g against %.15g",
           gpu->name, sgot, sref);
    free(gtake(&X, "sumsq"));
    free(x), free(y), free(ry), free(got);
}

static void op_xent(void)
{
    /* a vocabulary far wider than a block (odd: rows start off float4
     * boundaries), small ones, one narrower than a float4 */
    static const int shapes[4][2] = { { 37, 50257 }, { 129, 10 }, { 9, 3 }, { 6, 1030 } };
    for (int s = 0; s < 4; s++) {
        int B = shapes[s][0], V = shapes[s][1];
        if (emulated && V > 10000)
            V = 5003;
        size_t n = (size_t)B * V;
        float *z = host_rand(n, 8), *ref_g = malloc(n * 4), *ref_l = malloc((size_t)B * 4),
              *ref_l2 = malloc((size_t)B * 4);
        int32_t *lab = malloc((size_t)B * 4);
        for (int b = 0; b < B; b++)
            lab[b] = (int32_t)((b * 7919u) % (unsigned)V);
        z[1 % n] = 80.0f; /* a large logit: the max must be taken out */
        memcpy(ref_g, z, n * 4);
        cpu->ops->softmax_xent(cpu, ref_g, ref_l, lab, B, V, 0.125f, 0);
        CHECKF(!memcmp(ref_g, z, n * 4), "cpu: softmax_xent without grad changed the logits");
        cpu->ops->softmax_xent(cpu, ref_g, ref_l2, lab, B, V, 0.125f, 1);
        CHECKF(!memcmp(ref_l, ref_l2, (size_t)B * 4), "cpu: softmax_xent losses with grad differ");
        int32_t *dl = iput(lab, (size_t)B);
        /* loss only: the logits stay, bit for bit */
        gbuf Z = gput(z, n), L = gput(NULL, (size_t)B);
        gpu->ops->softmax_xent(gpu, gdata(&Z), gdata(&L), dl, B, V, 0.125f, 0);
        float *gl = gtake(&L, "xent losses"), *gz = gtake(&Z, "xent logits");
        compare("softmax_xent losses", ref_l, gl, (size_t)B, ELT);
        CHECKF(!memcmp(gz, z, n * 4), "%s: softmax_xent without grad changed the logits (V %d)",
               gpu->name, V);
        /* with the gradient, in place; twice: the same bits */
        float *gg[2], *gl2[2];
        for (int k = 0; k < 2; k++) {
            gbuf Zg = gput(z, n), Lg = gput(NULL, (size_t)B);
            gpu->ops->softmax_xent(gpu, gdata(&Zg), gdata(&Lg), dl, B, V, 0.125f, 1);
            gl2[k] = gtake(&Lg, "xent losses (grad)");
            gg[k] = gtake(&Zg, "xent dlogits");
        }
        compare("softmax_xent losses (grad)", ref_l, gl2[0], (size_t)B, ELT);
        compare("softmax_xent dlogits", ref_g, gg[0], n, ELT);
        CHECKF(!memcmp(gg[0], gg[1], n * 4) && !memcmp(gl2[0], gl2[1], (size_t)B * 4),
               "%s: softmax_xent: two runs differ (V %d)", gpu->name, V);
        /* losses NULL: the gradient alone */
        gbuf Zn = gput(z, n);
        gpu->ops->softmax_xent(gpu, gdata(&Zn), NULL, dl, B, V, 0.125f, 1);
        float *gn = gtake(&Zn, "xent dlogits (no losses)");
        CHECKF(!memcmp(gn, gg[0], n * 4), "%s: softmax_xent without losses differs (V %d)",
               gpu->name, V);
        gpu->ops->free(gpu, dl);
        free(z), free(ref_g), free(ref_l), free(ref_l2), free(lab), free(gl), free(gz), free(gn);
        for (int k = 0; k < 2; k++)
            free(gg[k]), free(gl2[k]);
    }
}

static void op_layernorm(void)
{
    int rows = emulated ? 67 : 8193, C = 99;
    size_t n = (size_t)rows * C;
    float *x = host_rand(n, 3), *w = host_rand((size_t)C, 1), *b = host_rand((size_t)C, 1),
          *dy = host_rand(n, 1);
    float *y = malloc(n * 4), *mean = malloc((size_t)rows * 4), *rstd = malloc((size_t)rows * 4);
    cpu->ops->layernorm_forward(cpu, y, mean, rstd, x, w, b, rows, C, 1e-5f);
    gbuf X = gput(x, n), W = gput(w, (size_t)C), Bb = gput(b, (size_t)C), Y = gput(NULL, n),
         M = gput(NULL, (size_t)rows), R = gput(NULL, (size_t)rows), DY = gput(dy, n);
    gpu->ops->layernorm_forward(gpu, gdata(&Y), gdata(&M), gdata(&R), gdata(&X), gdata(&W),
                                gdata(&Bb), rows, C, 1e-5f);
    float *gy = gtake(&Y, "layernorm y"), *gm = gtake(&M, "layernorm mean"),
          *gr = gtake(&R, "layernorm rstd");
    compare("layernorm_forward y", y, gy, n, ELT);
    compare("layernorm_forward mean", mean, gm, (size_t)rows, ELT);
    compare("layernorm_forward rstd", rstd, gr, (size_t)rows, ELT);
    M = gput(mean, (size_t)rows);
    R = gput(rstd, (size_t)rows);
    for (int acc = 0; acc < 2; acc++) {
        float *dx = host_rand(n, 1), *ref = malloc(n * 4);
        memcpy(ref, dx, n * 4);
        cpu->ops->layernorm_backward_x(cpu, ref, dy, x, w, mean, rstd, rows, C, acc);
        gbuf DX = gput(dx, n);
        gpu->ops->layernorm_backward_x(gpu, gdata(&DX), gdata(&DY), gdata(&X), gdata(&W),
                                       gdata(&M), gdata(&R), rows, C, acc);
        float *got = gtake(&DX, "layernorm dx");
        compare(acc ? "layernorm_backward_x (accumulate)" : "layernorm_backward_x", ref, got, n,
                ELT);
        free(dx), free(ref), free(got);
    }
    float *dw = host_rand((size_t)C, 1), *db = host_rand((size_t)C, 1), *rw = malloc((size_t)C * 4),
          *rb = malloc((size_t)C * 4);
    memcpy(rw, dw, (size_t)C * 4);
    memcpy(rb, db, (size_t)C * 4);
    cpu->ops->layernorm_backward_w(cpu, rw, rb, dy, x, mean, rstd, rows, C);
    gbuf DW = gput(dw, (size_t)C), DB = gput(db, (size_t)C);
    gpu->ops->layernorm_backward_w(gpu, gdata(&DW), gdata(&DB), gdata(&DY), gdata(&X), gdata(&M),
                                   gdata(&R), rows, C);
    float *gw = gtake(&DW, "layernorm dw"), *gb = gtake(&DB, "layernorm db");
    compare("layernorm_backward_w dw", rw, gw, (size_t)C, ELT);
    compare("layernorm_backward_w db", rb, gb, (size_t)C, ELT);
    /* no atomics: a second run gives the same bits */
    DW = gput(dw, (size_t)C), DB = gput(db, (size_t)C);
    gpu->ops->layernorm_backward_w(gpu, gdata(&DW), gdata(&DB), gdata(&DY), gdata(&X), gdata(&M),
                                   gdata(&R), rows, C);
    float *gw2 = gtake(&DW, "layernorm dw"), *gb2 = gtake(&DB, "layernorm db");
    CHECKF(!memcmp(gw, gw2, (size_t)C * 4) && !memcmp(gb, gb2, (size_t)C * 4),
           "%s: layernorm_backward_w: two runs differ", gpu->name);
    free(gw2), free(gb2);
    gbuf *rest[] = { &X, &W, &Bb, &M, &R, &DY };
    for (int i = 0; i < 6; i++)
        free(gtake(rest[i], "layernorm inputs"));
    free(x), free(w), free(b), free(dy), free(y), free(mean), free(rstd), free(gy), free(gm);
    free(gr), free(dw), free(db), free(rw), free(rb), free(gw), free(gb);
}

/* Fused attention at head size hs: out, lse and dqkv against the CPU's
 * exact op. fp32 and tf32 run the GPU's fp32 kernel (1e-10: only the order
 * of the sums differs); bf16 its tensor-core kernel where hs is 32, 64 or
 * 128 (q, k, v, p and the gradients rounded to bf16 before each product:
 * 1e-3), which the emulation runs too, its mma and ldmatrix lane by lane.
 * T is off every tile's multiple and spans several 64-row tiles (203 on a
 * GPU, 150 in the emulation at bf16), so the causal skipping, the diagonal
 * tile's skipped products and the last tile's mask all run. */
static void op_attention(rumor_precision prec, int hs)
{
    static const double lim[] = { 1e-10, 1e-10, 1e-3 };
    CHECK_OK(rumor_device_set_precision(gpu, prec));
    int B = emulated ? 1 : 2, NH = emulated ? 2 : 3, C = NH * hs;
    int T = !emulated ? 203 : prec == RUMOR_PREC_BF16 ? 150 : 37;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = host_rand(nq, 1.5f), *dout = host_rand(no, 1);
    float *out = malloc(no * 4), *lse = malloc(nl * 4), *dqkv = malloc(nq * 4);
    cpu->ops->attention_forward(cpu, out, lse, qkv, B, T, C, NH);
    cpu->ops->attention_backward(cpu, dqkv, dout, qkv, out, lse, B, T, C, NH);
    gbuf Q = gput(qkv, nq), O = gput(NULL, no), L = gput(NULL, nl), DO = gput(dout, no),
         DQ = gput(NULL, nq);
    gpu->ops->attention_forward(gpu, gdata(&O), gdata(&L), gdata(&Q), B, T, C, NH);
    gpu->ops->attention_backward(gpu, gdata(&DQ), gdata(&DO), gdata(&Q), gdata(&O), gdata(&L), B,
                                 T, C, NH);
    float *go = gtake(&O, "attention out"), *gl = gtake(&L, "attention lse"),
          *gq = gtake(&DQ, "attention dqkv");
    char what[80];
    snprintf(what, sizeof what, "attention_forward out (hs %d, %s)", hs,
             rumor_precision_name(prec));
    compare(what, out, go, no, lim[prec]);
    snprintf(what, sizeof what, "attention_forward lse (hs %d, %s)", hs,
             rumor_precision_name(prec));
    compare(what, lse, gl, nl, lim[prec]);
    snprintf(what, sizeof what, "attention_backward dqkv (hs %d, %s)", hs,
             rumor_precision_name(prec));
    compare(what, dqkv, gq, nq, lim[prec]);
    free(gtake(&Q, "attention qkv"));
    free(gtake(&DO, "attention dout"));
    free(qkv), free(dout), free(out), free(lse), free(dqkv), free(go), free(gl), free(gq);
    CHECK_OK(rumor_device_set_precision(gpu, RUMOR_PREC_FP32));
}

/* embed_backward sums each element's terms in the CPU's order: the same
 * bits as the CPU, and the same on every run */
static void embed_case(int B, int T, int C, int V)
{
    size_t n = (size_t)B * T * C, nt = (size_t)B * T;
    int32_t *tok = malloc(nt * sizeof *tok);
    for (size_t i = 0; i < nt; i++) /* token 7 repeats, the last row is used */
        tok[i] = i % 5 == 0 ? 7 : i % 11 == 0 ? V - 1 : (int32_t)((i * 31u) % (unsigned)V);
    float *wte = host_rand((size_t)V * C, 1), *wpe = host_rand((size_t)T * C, 1),
          *out = malloc(n * 4), *dout = host_rand(n, 1);
    cpu->ops->embed_forward(cpu, out, tok, wte, wpe, B, T, C);
    gbuf WT = gput(wte, (size_t)V * C), WP = gput(wpe, (size_t)T * C), O = gput(NULL, n),
         DO = gput(dout, n);
    int32_t *dt = iput(tok, nt);
    gpu->ops->embed_forward(gpu, gdata(&O), dt, gdata(&WT), gdata(&WP), B, T, C);
    float *go = gtake(&O, "embed out");
    compare("embed_forward", out, go, n, ELT);
    float *dwte = host_rand((size_t)V * C, 1), *dwpe = host_rand((size_t)T * C, 1);
    float *gwt[2], *gwp[2];
    for (int k = 0; k < 2; k++) {
        gbuf DWT = gput(dwte, (size_t)V * C), DWP = gput(dwpe, (size_t)T * C);
        gpu->ops->embed_backward(gpu, gdata(&DWT), gdata(&DWP), gdata(&DO), dt, B, T, C, V);
        gwt[k] = gtake(&DWT, "embed dwte");
        gwp[k] = gtake(&DWP, "embed dwpe");
    }
    cpu->ops->embed_backward(cpu, dwte, dwpe, dout, tok, B, T, C, V);
    compare("embed_backward dwte", dwte, gwt[0], (size_t)V * C, ELT);
    compare("embed_backward dwpe", dwpe, gwp[0], (size_t)T * C, ELT);
    CHECKF(!memcmp(gwt[0], gwt[1], (size_t)V * C * 4) && !memcmp(gwp[0], gwp[1], (size_t)T * C * 4),
           "%s: embed_backward: two runs differ (B %d, T %d, C %d, V %d)", gpu->name, B, T, C, V);
    CHECKF(!memcmp(gwt[0], dwte, (size_t)V * C * 4) && !memcmp(gwp[0], dwpe, (size_t)T * C * 4),
           "%s: embed_backward: not the CPU's bits (B %d, T %d, C %d, V %d)", gpu->name, B, T, C,
           V);
    free(gtake(&WT, "embed wte"));
    free(gtake(&WP, "embed wpe"));
    free(gtake(&DO, "embed dout"));
    gpu->ops->free(gpu, dt);
    free(tok), free(wte), free(wpe), free(out), free(dout), free(go), free(dwte), free(dwpe);
    for (int k = 0; k < 2; k++)
        free(gwt[k]), free(gwp[k]);
}

static void op_embed(void)
{
    embed_case(3, 17, 40, 61);
    /* past a tile of tokens, a block's rows and its 256 columns */
    embed_case(3, 371, 300, 1100);
}

/* ---- the table itself */

static int table_complete(const rumor_ops_t *o)
{
    const void *need[] = {
        o->alloc, o->free, o->upload, o->download, o->copy, o->sync, o->gemm, o->add_bias,
        o->sum_rows, o->axpy, o->scale, o->relu_forward, o->relu_backward, o->gelu_forward,
        o->gelu_backward, o->gemm_bias_gelu, o->gemm_dgelu, o->dropout_forward, o->dropout_backward, o->softmax_xent,
        o->sgd_step, o->adamw_step, o->fill, o->add, o->axpby,
        o->axpy_dist, o->sumsq, o->gemm_batched, o->layernorm_forward, o->layernorm_backward_x,
        o->layernorm_backward_w, o->attention_forward, o->attention_backward, o->embed_forward,
        o->embed_backward, o->stream_create, o->stream_destroy, o->set_stream, o->stream_sync,
        o->event_create, o->event_destroy, o->event_record, o->stream_wait, o->event_sync,
        o->event_query,
        o->upload_async, o->download_async, o->copy_peer, o->host_alloc, o->host_free,
        o->supports,
    };
    int missing = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        missing += need[i] == NULL;
    return missing;
}

static void run_backend(void)
{
    fprintf(stderr, "# backend %s against %s\n", gpu->name, cpu->name);
    int missing = table_complete(gpu->ops);
    CHECKF(missing == 0, "%s: %d ops missing from its table", gpu->name, missing);
    if (missing)
        return;
    op_gemm(RUMOR_PREC_FP32);
    op_gemm_gelu(RUMOR_PREC_FP32);
    if (gpu->ops->supports(gpu, RUMOR_CAP_TF32)) {
        op_gemm(RUMOR_PREC_TF32);
        op_gemm_gelu(RUMOR_PREC_TF32);
    }
    if (gpu->ops->supports(gpu, RUMOR_CAP_BF16)) {
        op_gemm(RUMOR_PREC_BF16);
        op_gemm_bf16_exact();
        op_gemm_gelu(RUMOR_PREC_BF16);
    }
    static const struct {
        const char *name;
        unary_fn f;
        int special;
    } elt[] = {
        { "axpy", f_axpy, 1 },       { "scale", f_scale, 0 },       { "fill", f_fill, 1 },
        { "add", f_add, 1 },         { "add (aliased)", f_add_alias, 0 },
        { "axpby", f_axpby, 1 },     { "axpby (b = 0)", f_axpby0, 0 },
        { "relu_forward", f_relu, 1 }, { "relu_backward", f_relu_b, 0 },
        { "gelu_forward", f_gelu, 0 }, { "gelu_backward", f_gelu_b, 0 },
        { "dropout_forward", f_drop, 1 }, { "dropout_backward", f_drop_b, 0 },
    };
    for (size_t i = 0; i < sizeof elt / sizeof elt[0]; i++)
        elementwise(elt[i].name, elt[i].f, elt[i].special);
    op_optim(0);
    op_optim(1);
    op_bias_rows();
    op_reductions();
    op_xent();
    op_layernorm();
    static const int hs[] = { 12, 32, 64, 128 };
    for (int i = 0; i < 4; i++) {
        op_attention(RUMOR_PREC_FP32, hs[i]);
        if (i > 0 && gpu->ops->supports(gpu, RUMOR_CAP_BF16))
            op_attention(RUMOR_PREC_BF16, hs[i]);
    }
    op_embed();
    CHECK_OK(gpu->ops->sync(gpu));
}

int main(void)
{
    int n = rumor_device_count(RUMOR_DEV_CUDA);
    if (n == 0)
        TEST_SKIP("no GPU: every op is compared with the CPU's on a GPU (CUDA build and a GPU, "
                  "or the CPU emulation of tests/cuda-emu)");
    CHECK_OK(rumor_device_open("cpu:1", &cpu));
    for (int i = 0; i < n && cpu; i++) {
        char spec[16];
        snprintf(spec, sizeof spec, "cuda:%d", i);
        rumor_err_clear();
        int rc = rumor_device_open(spec, &gpu);
        CHECKF(rc == 0, "%s: a GPU is present but does not open: %s", spec, rumor_err_msg());
        if (rc < 0)
            continue;
        /* the emulation (and RUMOR_TEST_SMALL=1, for compute-sanitizer's
         * slow runs) get small sizes */
        const char *small = getenv("RUMOR_TEST_SMALL");
        emulated = strstr(gpu->name, "emulation") != NULL || (small && *small == '1');
        run_backend();
        rumor_device_close(&gpu);
        /* cuBLASLt's DGELU epilogue, off by default (slower than the
         * separate ops where measured): the same checks with it on */
        setenv("RUMOR_CUDA_LT_DGELU", "1", 1);
        if (rumor_device_open(spec, &gpu) == 0) {
            op_gemm_gelu(RUMOR_PREC_FP32);
            if (gpu->ops->supports(gpu, RUMOR_CAP_TF32))
                op_gemm_gelu(RUMOR_PREC_TF32);
            if (gpu->ops->supports(gpu, RUMOR_CAP_BF16))
                op_gemm_gelu(RUMOR_PREC_BF16);
            rumor_device_close(&gpu);
        }
        unsetenv("RUMOR_CUDA_LT_DGELU");
    }
    rumor_device_close(&cpu);
    return tu_finish("test_backend_ops");
}

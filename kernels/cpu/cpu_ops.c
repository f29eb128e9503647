/* The CPU ops table: the reference every other backend is checked against.
 *
 * GEMM goes to CBLAS (OpenBLAS, with as many threads as the device was given;
 * see blas_tune.h). The element-wise ops are plain loops the compiler
 * vectorizes; they are memory-bound and small next to the GEMMs of a step. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "cpu_int.h"
#include "ops.h"

static void *cpu_alloc(rumor_device_t *d, size_t bytes)
{
    (void)d;
    /* 64-byte alignment for AVX-512 loads; calloc'd semantics. */
    size_t n = (bytes + 63) & ~(size_t)63;
    void *p = NULL;
    if (n == 0)
        n = 64;
    if (posix_memalign(&p, 64, n) != 0) {
        rumor_err_set(RUMOR_ENOMEM, "cpu: cannot allocate %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

static void cpu_free(rumor_device_t *d, void *p)
{
    (void)d;
    free(p);
}

static int cpu_copy(rumor_device_t *d, void *dst, const void *src, size_t bytes)
{
    (void)d;
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

static int cpu_sync(rumor_device_t *d)
{
    (void)d;
    return 0;
}

static void cpu_gemm(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    (void)d; /* OpenBLAS's thread count is set when the device opens and by the step */
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_add_bias(rumor_device_t *d, float *y, const float *bias, int rows, int cols)
{
    (void)d;
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * cols;
        for (int c = 0; c < cols; c++)
            yr[c] += bias[c];
    }
}

static void cpu_sum_rows(rumor_device_t *d, float *db, const float *dy, int rows, int cols,
                         float beta)
{
    (void)d;
    if (beta == 0.0f)
        memset(db, 0, sizeof(float) * (size_t)cols);
    else if (beta != 1.0f)
        for (int c = 0; c < cols; c++)
            db[c] *= beta;
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * cols;
        for (int c = 0; c < cols; c++)
            db[c] += dyr[c];
    }
}

/* Element-wise loops in blocks of 16 over non-overlapping arrays: gcc -O2's
 * cheap vectorizer takes them (the mixer runs them over whole models). */
#define LANES 16

static void cpu_axpy(rumor_device_t *d, float *restrict y, float a, const float *restrict x,
                     size_t n)
{
    (void)d;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            y[i + j] += a * x[i + j];
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void cpu_scale(rumor_device_t *d, float *y, float a, size_t n)
{
    (void)d;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            y[i + j] *= a;
    for (; i < n; i++)
        y[i] *= a;
}

static void cpu_relu_forward(rumor_device_t *d, float *y, const float *x, size_t n)
{
    (void)d;
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void cpu_relu_backward(rumor_device_t *d, float *dx, const float *x, const float *dy,
                              size_t n)
{
    (void)d;
    for (size_t i = 0; i < n; i++)
        dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

/* 1 + tanh(u) and 1 - tanh(u) from one expf of -2|u| (libm's tanhf goes
 * through expm1f and took 40% of a GPT step): with a = exp(-2|u|) in (0, 1],
 * they are 2/(1+a) and 2a/(1+a) (which is which depends on u's sign), so
 * neither cancels when tanh(u) is near -1 or 1 and GELU's tails stay
 * accurate in relative terms. */
static inline void tanh_pm(float u, float *one_plus, float *one_minus)
{
    float a = expf(-2.0f * fabsf(u));
    float big = 2.0f / (1.0f + a), small = big * a;
    *one_plus = u >= 0.0f ? big : small;
    *one_minus = u >= 0.0f ? small : big;
}

static void cpu_gelu_forward(rumor_device_t *d, float *y, const float *x, size_t n)
{
    (void)d;
    for (size_t i = 0; i < n; i++) {
        float v = x[i], p, m;
        tanh_pm(GELU_SCALE * (v + 0.044715f * v * v * v), &p, &m);
        y[i] = 0.5f * v * p;
    }
}

static void cpu_gelu_backward(rumor_device_t *d, float *dx, const float *x, const float *dy,
                              size_t n)
{
    (void)d;
    for (size_t i = 0; i < n; i++) {
        float v = x[i], p, m;
        tanh_pm(GELU_SCALE * (v + 0.044715f * v * v * v), &p, &m);
        float sech2 = p * m; /* 1 - tanh^2 */
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] = dy[i] * (0.5f * p + 0.5f * v * sech2 * du);
    }
}

static void cpu_dropout_forward(rumor_device_t *d, float *y, const float *x, size_t n, float p,
                                uint64_t seed)
{
    (void)d;
    float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (size_t i = 0; i < n; i++)
        y[i] = rumor_rand_uniform(seed, i) >= p ? x[i] * keep_scale : 0.0f;
}

static void cpu_dropout_backward(rumor_device_t *d, float *dx, const float *dy, size_t n, float p,
                                 uint64_t seed)
{
    cpu_dropout_forward(d, dx, dy, n, p, seed);
}

static void cpu_gemm_bias_gelu(rumor_device_t *d, float *y, float *pre, const float *x,
                               const float *w, const float *bias, int rows, int in, int out)
{
    d->ops->gemm(d, 0, 0, rows, out, in, 1.0f, x, in, w, out, 0.0f, pre, out);
    d->ops->add_bias(d, pre, bias, rows, out);
    cpu_gelu_forward(d, y, pre, (size_t)rows * (size_t)out);
}

static void cpu_gemm_dgelu(rumor_device_t *d, float *dx, const float *dy, const float *w,
                           const float *pre, int rows, int in, int out)
{
    d->ops->gemm(d, 0, 1, rows, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
    cpu_gelu_backward(d, dx, pre, dx, (size_t)rows * (size_t)in);
}

static void cpu_softmax_xent(rumor_device_t *d, float *logits, float *losses,
                             const int32_t *labels, int rows, int classes, float scale, int grad)
{
    (void)d;
    for (int b = 0; b < rows; b++) {
        float *z = logits + (size_t)b * classes;
        int lab = labels[b];
        float mx = z[0];
        for (int c = 1; c < classes; c++)
            mx = z[c] > mx ? z[c] : mx;
        double sum = 0.0;
        for (int c = 0; c < classes; c++)
            sum += expf(z[c] - mx);
        /* -log softmax computed from the logits, not from a rounded prob. */
        if (losses)
            losses[b] = (float)(log(sum) - (double)(z[lab] - mx));
        if (!grad)
            continue;
        float inv = (float)(1.0 / sum);
        for (int c = 0; c < classes; c++)
            z[c] = scale * (expf(z[c] - mx) * inv - (c == lab ? 1.0f : 0.0f));
    }
}

static void cpu_sgd_step(rumor_device_t *d, float *p, float *mom, const float *g, size_t n,
                         float lr, float mu, float wd, int nesterov)
{
    (void)d;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + wd * p[i];
        float step = gi;
        if (mu != 0.0f) {
            mom[i] = mu * mom[i] + gi;
            step = nesterov ? gi + mu * mom[i] : mom[i];
        }
        p[i] -= lr * step;
    }
}

static void cpu_adamw_step(rumor_device_t *d, float *p, float *m, float *v, const float *g,
                           size_t n, float lr, float b1, float b2, float eps, float wd, float bc1,
                           float bc2)
{
    (void)d;
    float inv_bc1 = 1.0f / bc1, inv_bc2 = 1.0f / bc2;
    for (size_t i = 0; i < n; i++) {
        p[i] -= lr * wd * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        p[i] -= lr * (m[i] * inv_bc1) / (sqrtf(v[i] * inv_bc2) + eps);
    }
}

const rumor_ops_t rumor_cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .gemm = cpu_gemm,
    .add_bias = cpu_add_bias,
    .sum_rows = cpu_sum_rows,
    .axpy = cpu_axpy,
    .scale = cpu_scale,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .gemm_bias_gelu = cpu_gemm_bias_gelu,
    .gemm_dgelu = cpu_gemm_dgelu,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .softmax_xent = cpu_softmax_xent,
    .sgd_step = cpu_sgd_step,
    .adamw_step = cpu_adamw_step,
    .fill = cpu_fill,
    .add = cpu_add,
    .axpby = cpu_axpby,
    .axpy_dist = cpu_axpy_dist,
    .sumsq = cpu_sumsq,
    .gemm_batched = cpu_gemm_batched,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward_x = cpu_layernorm_backward_x,
    .layernorm_backward_w = cpu_layernorm_backward_w,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .embed_forward = cpu_embed_forward,
    .embed_backward = cpu_embed_backward,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .set_stream = cpu_set_stream,
    .stream_sync = cpu_stream_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait = cpu_stream_wait,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .upload_async = cpu_copy_async,
    .download_async = cpu_copy_async,
    .copy_peer = cpu_copy_peer,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .supports = cpu_supports,
};

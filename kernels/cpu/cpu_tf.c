/* The CPU ops for transformers and the device plumbing (see ops.h).
 *
 * Attention runs as batched GEMMs over (batch, head) through CBLAS with the
 * strided views of q, k and v inside the qkv rows (leading dimension 3C),
 * and a causal masked softmax in between. The element-wise ops are plain
 * loops the compiler vectorizes. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_int.h"

/* ---------------------------------------------------------- element-wise */

void cpu_fill(rumor_device_t *d, float *y, float v, size_t n)
{
    (void)d;
    if (v == 0.0f) {
        memset(y, 0, n * sizeof *y);
        return;
    }
    for (size_t i = 0; i < n; i++)
        y[i] = v;
}

void cpu_add(rumor_device_t *d, float *y, const float *a, const float *b, size_t n)
{
    (void)d;
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void cpu_axpby(rumor_device_t *d, float *restrict y, float a, const float *restrict x, float b,
               size_t n)
{
    (void)d;
    size_t i = 0;
    if (b == 0.0f) {
        for (; i + 16 <= n; i += 16)
            for (int j = 0; j < 16; j++)
                y[i + j] = a * x[i + j];
        for (; i < n; i++)
            y[i] = a * x[i];
        return;
    }
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++)
            y[i + j] = a * x[i + j] + b * y[i + j];
    for (; i < n; i++)
        y[i] = a * x[i] + b * y[i];
}

/* Blocks of 16 lanes so that gcc -O2 vectorizes the sum. */
#define DIST_LANES 16

int cpu_axpy_dist(rumor_device_t *d, float *restrict y, float a, const float *restrict x,
                  size_t n, double *sqdist)
{
    (void)d;
    float lanes[DIST_LANES] = { 0 };
    double d2 = 0.0;
    size_t i = 0;
    /* float lanes over blocks of at most 4096 elements, summed in double */
    while (i + DIST_LANES <= n) {
        size_t stop = n - i > 4096 ? i + 4096 : n;
        for (; i + DIST_LANES <= stop; i += DIST_LANES)
            for (int j = 0; j < DIST_LANES; j++) {
                float v = y[i + j] + a * x[i + j];
                float e = v - x[i + j];
                lanes[j] += e * e;
                y[i + j] = v;
            }
        for (int j = 0; j < DIST_LANES; j++) {
            d2 += lanes[j];
            lanes[j] = 0.0f;
        }
    }
    for (; i < n; i++) {
        float v = y[i] + a * x[i];
        double e = (double)v - x[i];
        d2 += e * e;
        y[i] = v;
    }
    if (sqdist)
        *sqdist = d2;
    return 0;
}

int cpu_sumsq(rumor_device_t *d, const float *x, size_t n, double *out, size_t *nonfinite)
{
    (void)d;
    double s = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            bad++;
        s += (double)x[i] * (double)x[i];
    }
    if (out)
        *out = s;
    if (nonfinite)
        *nonfinite = bad;
    return 0;
}

/* ------------------------------------------------------------------ GEMM */

void cpu_gemm_batched(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                      float beta, float *c, int ldc, long long sc, int batch)
{
    (void)d;
    for (int i = 0; i < batch; i++)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, beta, c + i * sc, ldc);
}

/* ------------------------------------------------------------- layernorm */

void cpu_layernorm_forward(rumor_device_t *d, float *y, float *mean, float *rstd, const float *x,
                           const float *w, const float *b, int rows, int C, float eps)
{
    (void)d;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * C;
        float *yr = y + (size_t)r * C;
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += xr[c];
        float mu = (float)(s / C);
        double v = 0.0;
        for (int c = 0; c < C; c++) {
            double t = xr[c] - mu;
            v += t * t;
        }
        float rs = (float)(1.0 / sqrt(v / C + eps));
        for (int c = 0; c < C; c++)
            yr[c] = (xr[c] - mu) * rs * w[c] + b[c];
        mean[r] = mu;
        rstd[r] = rs;
    }
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w */
void cpu_layernorm_backward_x(rumor_device_t *d, float *dx, const float *dy, const float *x,
                              const float *w, const float *mean, const float *rstd, int rows, int C,
                              int accumulate)
{
    (void)d;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * C, *gr = dy + (size_t)r * C;
        float *dr = dx + (size_t)r * C;
        float mu = mean[r], rs = rstd[r];
        double sg = 0.0, sgx = 0.0;
        for (int c = 0; c < C; c++) {
            float g = gr[c] * w[c];
            sg += g;
            sgx += g * (xr[c] - mu) * rs;
        }
        float mg = (float)(sg / C), mgx = (float)(sgx / C);
        for (int c = 0; c < C; c++) {
            float xh = (xr[c] - mu) * rs;
            float v = rs * (gr[c] * w[c] - mg - xh * mgx);
            dr[c] = accumulate ? dr[c] + v : v;
        }
    }
}

void cpu_layernorm_backward_w(rumor_device_t *d, float *dw, float *db, const float *dy,
                              const float *x, const float *mean, const float *rstd, int rows, int C)
{
    (void)d;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * C, *gr = dy + (size_t)r * C;
        float mu = mean[r], rs = rstd[r];
        for (int c = 0; c < C; c++) {
            dw[c] += gr[c] * (xr[c] - mu) * rs;
            db[c] += gr[c];
        }
    }
}

/* ------------------------------------------------------------- attention */

void cpu_attention_forward(rumor_device_t *d, float *out, float *att, const float *qkv, int B,
                           int T, int C, int NH)
{
    (void)d;
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *k = q + C, *v = q + 2 * C;
            float *a = att + ((size_t)b * NH + h) * T * T;
            /* scores (T,T) = q k^T * scale; only the lower triangle is used */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3,
                        0.0f, a, T);
            for (int t = 0; t < T; t++) {
                float *ar = a + (size_t)t * T;
                float mx = ar[0];
                for (int u = 1; u <= t; u++)
                    mx = ar[u] > mx ? ar[u] : mx;
                double s = 0.0;
                for (int u = 0; u <= t; u++) {
                    ar[u] = expf(ar[u] - mx);
                    s += ar[u];
                }
                float inv = (float)(1.0 / s);
                for (int u = 0; u <= t; u++)
                    ar[u] *= inv;
                for (int u = t + 1; u < T; u++)
                    ar[u] = 0.0f;
            }
            /* out (T,hs) = att v */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3,
                        0.0f, out + (size_t)b * T * C + (size_t)h * hs, C);
        }
}

void cpu_attention_backward(rumor_device_t *d, float *dqkv, float *datt, const float *dout,
                            const float *qkv, const float *att, int B, int T, int C, int NH)
{
    (void)d;
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t base = (size_t)b * T * C3 + (size_t)h * hs;
            const float *q = qkv + base, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            float *da = datt + ((size_t)b * NH + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
            /* datt (T,T) = dy v^T; dv (T,hs) = att^T dy */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3,
                        0.0f, da, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, dy, C, 0.0f,
                        dv, C3);
            /* softmax backward on the causal part: dpre = a * (da - sum(a * da)) */
            for (int t = 0; t < T; t++) {
                const float *ar = a + (size_t)t * T;
                float *dr = da + (size_t)t * T;
                double s = 0.0;
                for (int u = 0; u <= t; u++)
                    s += (double)ar[u] * dr[u];
                for (int u = 0; u <= t; u++)
                    dr[u] = ar[u] * (dr[u] - (float)s);
                for (int u = t + 1; u < T; u++)
                    dr[u] = 0.0f;
            }
            /* dq = dpre k * scale; dk = dpre^T q * scale */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, da, T, k, C3,
                        0.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, da, T, q, C3,
                        0.0f, dk, C3);
        }
}

/* ------------------------------------------------------------ embeddings */

void cpu_embed_forward(rumor_device_t *d, float *out, const int32_t *tok, const float *wte,
                       const float *wpe, int B, int T, int C)
{
    (void)d;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *e = wte + (size_t)tok[(size_t)b * T + t] * C, *p = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] = e[c] + p[c];
        }
}

void cpu_embed_backward(rumor_device_t *d, float *dwte, float *dwpe, const float *dout,
                        const int32_t *tok, int B, int T, int C, int V)
{
    (void)d;
    (void)V; /* tokens are in [0, V): callers validate */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *g = dout + ((size_t)b * T + t) * C;
            float *e = dwte + (size_t)tok[(size_t)b * T + t] * C;
            for (int c = 0; c < C; c++)
                e[c] += g[c];
            if (dwpe) {
                float *p = dwpe + (size_t)t * C;
                for (int c = 0; c < C; c++)
                    p[c] += g[c];
            }
        }
}

/* -------------------------------------------------------------- plumbing */

/* On the CPU work runs at once: one static stream and event stand for all. */
static char cpu_stream_token, cpu_event_token;

int cpu_stream_create(rumor_device_t *d, rumor_stream_t **out)
{
    (void)d;
    *out = (rumor_stream_t *)&cpu_stream_token;
    return 0;
}

void cpu_stream_destroy(rumor_device_t *d, rumor_stream_t *s) { (void)d, (void)s; }

int cpu_set_stream(rumor_device_t *d, rumor_stream_t *s) { return (void)d, (void)s, 0; }

int cpu_stream_sync(rumor_device_t *d, rumor_stream_t *s) { return (void)d, (void)s, 0; }

int cpu_event_create(rumor_device_t *d, rumor_event_t **out)
{
    (void)d;
    *out = (rumor_event_t *)&cpu_event_token;
    return 0;
}

void cpu_event_destroy(rumor_device_t *d, rumor_event_t *e) { (void)d, (void)e; }

int cpu_event_record(rumor_device_t *d, rumor_event_t *e, rumor_stream_t *s)
{
    return (void)d, (void)e, (void)s, 0;
}

int cpu_stream_wait(rumor_device_t *d, rumor_stream_t *s, rumor_event_t *e)
{
    return (void)d, (void)s, (void)e, 0;
}

int cpu_event_sync(rumor_device_t *d, rumor_event_t *e) { return (void)d, (void)e, 0; }
int cpu_event_query(rumor_device_t *d, rumor_event_t *e) { return (void)d, (void)e, 1; }

int cpu_copy_async(rumor_device_t *d, void *dst, const void *src, size_t bytes, rumor_stream_t *s)
{
    (void)d, (void)s;
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

int cpu_copy_peer(rumor_device_t *dd, void *dst, rumor_device_t *sd, const void *src,
                  size_t bytes, rumor_stream_t *s)
{
    (void)dd, (void)sd, (void)s;
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

int cpu_supports(const rumor_device_t *d, rumor_cap cap)
{
    (void)d;
    return cap == RUMOR_CAP_PEER_COPY;
}

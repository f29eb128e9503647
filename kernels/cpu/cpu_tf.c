/* The CPU ops for transformers and the device plumbing (see ops.h).
 *
 * Attention runs tile by tile over (batch, head), through CBLAS with the
 * strided views of q, k and v inside the qkv rows (leading dimension 3C),
 * keeping only a log-sum-exp per row for backward (no (T, T) matrix). The
 * element-wise ops are plain loops the compiler vectorizes. */
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

/* Tiled over (query block, key tile) so that no (T, T) matrix exists: the
 * scores of one tile live on the stack and the products are CBLAS calls on
 * the strided views. Tiles wholly above the diagonal are skipped. */
#define ATT_QB 64  /* query rows per block */
#define ATT_KB 128 /* keys per tile */

/* keys of tile [j0, j0 + kn) that row i may see (causal): 0..kn */
static int att_visible(int i, int j0, int kn)
{
    int n = i - j0 + 1;
    return n < 0 ? 0 : n > kn ? kn : n;
}

/* out (B,T,C) and lse (B,NH,T): an online softmax over the key tiles; each
 * row keeps its max m and its sum l (in double), out holds the unnormalized
 * sum of p v until the row's last tile */
void cpu_attention_forward(rumor_device_t *d, float *out, float *lse, const float *qkv, int B,
                           int T, int C, int NH)
{
    (void)d;
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    float s[ATT_QB * ATT_KB];
    float m[ATT_QB];
    double l[ATT_QB];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *k = q + C, *v = q + 2 * C;
            float *o = out + (size_t)b * T * C + (size_t)h * hs;
            float *ls = lse + ((size_t)b * NH + h) * T;
            for (int i0 = 0; i0 < T; i0 += ATT_QB) {
                int qn = T - i0 < ATT_QB ? T - i0 : ATT_QB;
                float *ob = o + (size_t)i0 * C;
                for (int r = 0; r < qn; r++) {
                    m[r] = -3.402823466e38f;
                    l[r] = 0.0;
                    memset(ob + (size_t)r * C, 0, hs * sizeof *ob);
                }
                for (int j0 = 0; j0 < i0 + qn; j0 += ATT_KB) {
                    int kn = i0 + qn - j0 < ATT_KB ? i0 + qn - j0 : ATT_KB;
                    /* s (qn, kn) = scale * q k^T */
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, scale,
                                q + (size_t)i0 * C3, C3, k + (size_t)j0 * C3, C3, 0.0f, s, ATT_KB);
                    for (int r = 0; r < qn; r++) {
                        float *sr = s + (size_t)r * ATT_KB;
                        int n = att_visible(i0 + r, j0, kn);
                        float mx = m[r];
                        for (int u = 0; u < n; u++)
                            mx = sr[u] > mx ? sr[u] : mx;
                        double sum = 0.0;
                        for (int u = 0; u < n; u++) {
                            sr[u] = expf(sr[u] - mx);
                            sum += sr[u];
                        }
                        for (int u = n; u < kn; u++)
                            sr[u] = 0.0f;
                        if (mx != m[r]) {
                            float alpha = expf(m[r] - mx);
                            float *orow = ob + (size_t)r * C;
                            for (int i = 0; i < hs; i++)
                                orow[i] *= alpha;
                            l[r] *= alpha;
                            m[r] = mx;
                        }
                        l[r] += sum;
                    }
                    /* o (qn, hs) += p (qn, kn) v (kn, hs) */
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qn, hs, kn, 1.0f, s,
                                ATT_KB, v + (size_t)j0 * C3, C3, 1.0f, ob, C);
                }
                for (int r = 0; r < qn; r++) {
                    float inv = (float)(1.0 / l[r]), *orow = ob + (size_t)r * C;
                    for (int i = 0; i < hs; i++)
                        orow[i] *= inv;
                    ls[i0 + r] = m[r] + (float)log(l[r]);
                }
            }
        }
}

/* dqkv (=) from dout: each tile's p = exp(s - lse) is recomputed from q and
 * k; dpre = p * (dout v^T - D) with D_i = dout_i . out_i (the row's sum of
 * p * dp); dv += p^T dout, dq += scale dpre k, dk += scale dpre^T q. */
void cpu_attention_backward(rumor_device_t *d, float *dqkv, const float *dout, const float *qkv,
                            const float *out, const float *lse, int B, int T, int C, int NH)
{
    (void)d;
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    float p[ATT_QB * ATT_KB], dp[ATT_QB * ATT_KB];
    float D[ATT_QB];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t base = (size_t)b * T * C3 + (size_t)h * hs;
            const float *q = qkv + base, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
            const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
            const float *o = out + (size_t)b * T * C + (size_t)h * hs;
            const float *ls = lse + ((size_t)b * NH + h) * T;
            for (int t = 0; t < T; t++)
                for (int part = 0; part < 3; part++)
                    memset(dq + (size_t)t * C3 + (size_t)part * C, 0, hs * sizeof *dq);
            for (int i0 = 0; i0 < T; i0 += ATT_QB) {
                int qn = T - i0 < ATT_QB ? T - i0 : ATT_QB;
                for (int r = 0; r < qn; r++) {
                    const float *g = dy + (size_t)(i0 + r) * C, *orow = o + (size_t)(i0 + r) * C;
                    double s = 0.0;
                    for (int i = 0; i < hs; i++)
                        s += (double)g[i] * orow[i];
                    D[r] = (float)s;
                }
                for (int j0 = 0; j0 < i0 + qn; j0 += ATT_KB) {
                    int kn = i0 + qn - j0 < ATT_KB ? i0 + qn - j0 : ATT_KB;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, scale,
                                q + (size_t)i0 * C3, C3, k + (size_t)j0 * C3, C3, 0.0f, p, ATT_KB);
                    /* dp (qn, kn) = dout v^T */
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, kn, hs, 1.0f,
                                dy + (size_t)i0 * C, C, v + (size_t)j0 * C3, C3, 0.0f, dp, ATT_KB);
                    for (int r = 0; r < qn; r++) {
                        float *pr = p + (size_t)r * ATT_KB, *dr = dp + (size_t)r * ATT_KB;
                        int n = att_visible(i0 + r, j0, kn);
                        float li = ls[i0 + r];
                        for (int u = 0; u < n; u++) {
                            pr[u] = expf(pr[u] - li);
                            dr[u] = pr[u] * (dr[u] - D[r]) * scale;
                        }
                        for (int u = n; u < kn; u++)
                            pr[u] = dr[u] = 0.0f;
                    }
                    /* dv (kn, hs) += p^T dout; dq (qn, hs) += dpre k; dk (kn, hs) += dpre^T q */
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kn, hs, qn, 1.0f, p,
                                ATT_KB, dy + (size_t)i0 * C, C, 1.0f, dv + (size_t)j0 * C3, C3);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qn, hs, kn, 1.0f, dp,
                                ATT_KB, k + (size_t)j0 * C3, C3, 1.0f, dq + (size_t)i0 * C3, C3);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kn, hs, qn, 1.0f, dp,
                                ATT_KB, q + (size_t)i0 * C3, C3, 1.0f, dk + (size_t)j0 * C3, C3);
                }
            }
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

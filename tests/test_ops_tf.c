/* The transformer ops of the ops table on every backend present, against
 * naive double-precision references written here: layernorm forward and
 * both backward parts, causal attention forward and backward, token and
 * position embeddings (with repeated tokens, so the scatter-add collides),
 * softmax + cross-entropy over a vocabulary wider than a GPU block,
 * strided-batched GEMM, fill (over NaN), add (aliased), axpby and sumsq
 * (counting NaN and Inf). Every output has canaries after its end that must
 * stay untouched. A backend whose table lacks one of these ops fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "testutil.h"

#define CANARY 4
#define SENTINEL 12345.5f

static rumor_device_t *d;

/* device buffer of n floats (+ canaries) holding host (or zeros) */
static float *dput(const float *host, size_t n)
{
    float *p = d->ops->alloc(d, (n + CANARY) * sizeof(float));
    float *tmp = malloc((n + CANARY) * sizeof(float));
    if (!p || !tmp)
        exit(99);
    for (size_t i = 0; i < n + CANARY; i++)
        tmp[i] = i < n ? (host ? host[i] : 0.0f) : SENTINEL;
    if (d->ops->upload(d, p, tmp, (n + CANARY) * sizeof(float)) < 0)
        exit(99);
    free(tmp);
    return p;
}

/* copies n floats back, checks the canaries, frees the device buffer */
static float *dtake(float *p, size_t n, const char *what)
{
    float *h = malloc((n + CANARY) * sizeof(float));
    CHECK_OK(d->ops->sync(d));
    CHECK_OK(d->ops->download(d, h, p, (n + CANARY) * sizeof(float)));
    for (int i = 0; i < CANARY; i++)
        CHECKF(h[n + i] == SENTINEL, "%s: %s wrote past its end", d->name, what);
    d->ops->free(d, p);
    return h;
}

static void rnd(float *x, size_t n, unsigned long long *s, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * tu_randf(s);
}

static void *xalloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p)
        exit(99);
    return p;
}

/* max |a - ref| / (max |ref| + tiny); a NaN in a is an infinite error (fmax
 * would skip it) */
static double rel_err(const float *a, const double *ref, size_t n)
{
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double di = fabs((double)a[i] - ref[i]);
        e = fmax(e, isnan(di) ? INFINITY : di);
        m = fmax(m, fabs(ref[i]));
    }
    return e / m;
}

/* R rows of C: rows past a block's warps and C off the warp's width test
 * the GPU's row kernels; dw and db start non-zero (backward_w adds) */
static void check_layernorm(int R, int C)
{
    size_t n = (size_t)R * C;
    unsigned long long s = 3;
    float *x = xalloc(n * sizeof *x), *w = xalloc(C * sizeof *w), *b = xalloc(C * sizeof *b);
    float *dy = xalloc(n * sizeof *dy), *dx0 = xalloc(n * sizeof *dx0);
    float *dw0 = xalloc(C * sizeof *dw0), *db0 = xalloc(C * sizeof *db0);
    rnd(x, n, &s, 2.0f);
    rnd(w, C, &s, 1.0f);
    rnd(b, C, &s, 1.0f);
    rnd(dy, n, &s, 1.0f);
    rnd(dx0, n, &s, 1.0f);
    rnd(dw0, C, &s, 1.0f);
    rnd(db0, C, &s, 1.0f);
    double *y = xalloc(n * sizeof *y), *mean = xalloc(R * sizeof *mean);
    double *rstd = xalloc(R * sizeof *rstd), *dx = xalloc(n * sizeof *dx);
    double *dxa = xalloc(n * sizeof *dxa), *dw = xalloc(C * sizeof *dw);
    double *db = xalloc(C * sizeof *db), *g = xalloc(C * sizeof *g);
    for (int c = 0; c < C; c++) {
        dw[c] = dw0[c];
        db[c] = db0[c];
    }
    for (int r = 0; r < R; r++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += x[r * C + c] / (double)C;
        for (int c = 0; c < C; c++)
            v += (x[r * C + c] - m) * (x[r * C + c] - m) / C;
        mean[r] = m;
        rstd[r] = 1.0 / sqrt(v + 1e-5);
        double sg = 0, sgx = 0;
        for (int c = 0; c < C; c++) {
            double xh = (x[r * C + c] - m) * rstd[r];
            y[r * C + c] = xh * w[c] + b[c];
            g[c] = dy[r * C + c] * w[c];
            sg += g[c];
            sgx += g[c] * xh;
            dw[c] += dy[r * C + c] * xh;
            db[c] += dy[r * C + c];
        }
        for (int c = 0; c < C; c++) {
            double xh = (x[r * C + c] - m) * rstd[r];
            dx[r * C + c] = rstd[r] * (g[c] - sg / C - xh * sgx / C);
            dxa[r * C + c] = dx[r * C + c] + dx0[r * C + c];
        }
    }
    float *px = dput(x, n), *pw = dput(w, C), *pb = dput(b, C), *py = dput(NULL, n);
    float *pm = dput(NULL, R), *pr = dput(NULL, R), *pdy = dput(dy, n);
    float *pdx = dput(NULL, n), *pdxa = dput(dx0, n), *pdw = dput(dw0, C), *pdb = dput(db0, C);
    d->ops->layernorm_forward(d, py, pm, pr, px, pw, pb, R, C, 1e-5f);
    d->ops->layernorm_backward_x(d, pdx, pdy, px, pw, pm, pr, R, C, 0);
    d->ops->layernorm_backward_x(d, pdxa, pdy, px, pw, pm, pr, R, C, 1);
    d->ops->layernorm_backward_w(d, pdw, pdb, pdy, px, pm, pr, R, C);
    float *hy = dtake(py, n, "layernorm y"), *hdx = dtake(pdx, n, "layernorm dx");
    float *hdxa = dtake(pdxa, n, "layernorm dx (+=)"), *hdw = dtake(pdw, C, "layernorm dw");
    float *hdb = dtake(pdb, C, "layernorm db"), *hm = dtake(pm, R, "mean"), *hr = dtake(pr, R, "rstd");
    CHECKF(rel_err(hy, y, n) < 1e-5, "%s: layernorm forward (%d, %d) %.3g", d->name, R, C,
           rel_err(hy, y, n));
    CHECKF(rel_err(hm, mean, R) < 1e-5 && rel_err(hr, rstd, R) < 1e-5, "%s: layernorm stats",
           d->name);
    CHECKF(rel_err(hdx, dx, n) < 1e-5, "%s: layernorm dx (%d, %d) %.3g", d->name, R, C,
           rel_err(hdx, dx, n));
    CHECKF(rel_err(hdxa, dxa, n) < 1e-5, "%s: layernorm dx accumulate (%d, %d)", d->name, R, C);
    CHECKF(rel_err(hdw, dw, C) < 1e-5 && rel_err(hdb, db, C) < 1e-5,
           "%s: layernorm dw/db (%d, %d) %.3g %.3g", d->name, R, C, rel_err(hdw, dw, C),
           rel_err(hdb, db, C));
    free(hy), free(hdx), free(hdxa), free(hdw), free(hdb), free(hm), free(hr);
    d->ops->free(d, px), d->ops->free(d, pw), d->ops->free(d, pb), d->ops->free(d, pdy);
    free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0);
    free(y), free(mean), free(rstd), free(dx), free(dxa), free(dw), free(db), free(g);
}

/* T past a warp's 32 lanes and off every tile's multiple (37) tests the
 * tiles' edges and the causal mask inside a tile; HS off 4 the strided
 * heads, 32/64/128 the GPU's head sizes. lse is checked against the naive
 * log-sum-exp; backward is this row-by-row derivation with the full
 * probabilities, not the recomputation the ops do. */
static void check_attention(int B, int T, int NH, int HS)
{
    int C = NH * HS, C3 = 3 * C, nqkv = B * T * C3, nout = B * T * C, natt = B * NH * T * T;
    int nlse = B * NH * T;
    unsigned long long s = 9;
    float *qkv = xalloc(nqkv * sizeof *qkv), *dout = xalloc(nout * sizeof *dout);
    rnd(qkv, nqkv, &s, 1.5f);
    rnd(dout, nout, &s, 1.0f);
    double *out = xalloc(nout * sizeof *out), *att = xalloc(natt * sizeof *att);
    double *lse = xalloc(nlse * sizeof *lse);
    double *dqkv = calloc(nqkv, sizeof *dqkv), *p = xalloc(T * sizeof *p);
    double *da = xalloc(T * sizeof *da);
    if (!dqkv)
        exit(99);
    double sc = 1.0 / sqrt((double)HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + (b * T + t) * C3 + h * HS;
                double mx = -1e300, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + (b * T + u) * C3 + C + h * HS;
                    double dot = 0;
                    for (int i = 0; i < HS; i++)
                        dot += (double)q[i] * k[i];
                    p[u] = dot * sc;
                    mx = fmax(mx, p[u]);
                }
                for (int u = 0; u <= t; u++)
                    sum += p[u] = exp(p[u] - mx);
                lse[(b * NH + h) * T + t] = mx + log(sum);
                double *a = att + ((b * NH + h) * T + t) * T;
                for (int u = 0; u < T; u++)
                    a[u] = u <= t ? p[u] / sum : 0.0;
                double *o = out + (b * T + t) * C + h * HS;
                for (int i = 0; i < HS; i++) {
                    o[i] = 0;
                    for (int u = 0; u <= t; u++)
                        o[i] += a[u] * qkv[(b * T + u) * C3 + 2 * C + h * HS + i];
                }
                /* backward of this row */
                const float *g = dout + (b * T + t) * C + h * HS;
                double dot = 0;
                for (int u = 0; u <= t; u++) {
                    da[u] = 0;
                    for (int i = 0; i < HS; i++) {
                        da[u] += (double)g[i] * qkv[(b * T + u) * C3 + 2 * C + h * HS + i];
                        dqkv[(b * T + u) * C3 + 2 * C + h * HS + i] += a[u] * g[i];
                    }
                    dot += a[u] * da[u];
                }
                for (int u = 0; u <= t; u++) {
                    double dp = a[u] * (da[u] - dot) * sc;
                    for (int i = 0; i < HS; i++) {
                        dqkv[(b * T + t) * C3 + h * HS + i] +=
                            dp * qkv[(b * T + u) * C3 + C + h * HS + i];
                        dqkv[(b * T + u) * C3 + C + h * HS + i] += dp * q[i];
                    }
                }
            }
    float *pq = dput(qkv, nqkv), *po = dput(NULL, nout);
    float *pl = dput(NULL, nlse), *pg = dput(dout, nout);
    float *pdq = dput(NULL, nqkv);
    /* dqkv must be written in full: start it dirty */
    float *junk = xalloc(nqkv * sizeof *junk);
    for (int i = 0; i < nqkv; i++)
        junk[i] = NAN;
    CHECK_OK(d->ops->upload(d, pdq, junk, nqkv * sizeof *junk));
    free(junk);
    d->ops->attention_forward(d, po, pl, pq, B, T, C, NH);
    d->ops->attention_backward(d, pdq, pg, pq, po, pl, B, T, C, NH);
    float *ho = dtake(po, nout, "attention out"), *hl = dtake(pl, nlse, "lse");
    float *hdq = dtake(pdq, nqkv, "dqkv");
    CHECKF(rel_err(ho, out, nout) < 1e-5, "%s: attention out (T %d, hs %d) %.3g", d->name, T, HS,
           rel_err(ho, out, nout));
    CHECKF(rel_err(hl, lse, nlse) < 1e-5, "%s: attention lse (T %d, hs %d) %.3g", d->name, T, HS,
           rel_err(hl, lse, nlse));
    CHECKF(rel_err(hdq, dqkv, nqkv) < 1e-5, "%s: attention dqkv (T %d, hs %d) %.3g", d->name, T,
           HS, rel_err(hdq, dqkv, nqkv));
    free(ho), free(hl), free(hdq);
    d->ops->free(d, pq), d->ops->free(d, pg);
    free(qkv), free(dout), free(out), free(att), free(lse), free(dqkv), free(p), free(da);
}

static void check_embed(void)
{
    enum { B = 3, T = 4, C = 5, V = 6 };
    unsigned long long s = 4;
    float wte[V * C], wpe[T * C], g[B * T * C];
    int32_t tok[B * T] = { 1, 1, 5, 0, 2, 1, 1, 3, 5, 5, 0, 1 }; /* repeats collide */
    rnd(wte, V * C, &s, 1.0f);
    rnd(wpe, T * C, &s, 1.0f);
    rnd(g, B * T * C, &s, 1.0f);
    double out[B * T * C], dwte[V * C] = { 0 }, dwpe[T * C] = { 0 };
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                out[(b * T + t) * C + c] = (double)wte[tok[b * T + t] * C + c] + wpe[t * C + c];
                dwte[tok[b * T + t] * C + c] += g[(b * T + t) * C + c];
                dwpe[t * C + c] += g[(b * T + t) * C + c];
            }
    int32_t *pt = d->ops->alloc(d, sizeof tok);
    CHECK_OK(d->ops->upload(d, pt, tok, sizeof tok));
    float *pe = dput(wte, V * C), *pp = dput(wpe, T * C), *po = dput(NULL, B * T * C);
    float *pg = dput(g, B * T * C), *pde = dput(NULL, V * C), *pdp = dput(NULL, T * C);
    d->ops->embed_forward(d, po, pt, pe, pp, B, T, C);
    d->ops->embed_backward(d, pde, pdp, pg, pt, B, T, C, V);
    float *ho = dtake(po, B * T * C, "embed out"), *hde = dtake(pde, V * C, "dwte");
    float *hdp = dtake(pdp, T * C, "dwpe");
    CHECKF(rel_err(ho, out, B * T * C) < 1e-6, "%s: embed forward", d->name);
    CHECKF(rel_err(hde, dwte, V * C) < 1e-6 && rel_err(hdp, dwpe, T * C) < 1e-6,
           "%s: embed backward (scatter-add)", d->name);
    free(ho), free(hde), free(hdp);
    d->ops->free(d, pt), d->ops->free(d, pe), d->ops->free(d, pp), d->ops->free(d, pg);
}

/* many rows on few tokens (every token repeats across b and t), C off the
 * warp's width, gradients that start non-zero; a second backward without
 * dwpe adds to dwte only */
static void check_embed_wide(void)
{
    enum { B = 4, T = 33, C = 37, V = 7, N = B * T * C };
    unsigned long long s = 6;
    float *wte = xalloc(V * C * sizeof *wte), *wpe = xalloc(T * C * sizeof *wpe);
    float *g = xalloc(N * sizeof *g), *dwte0 = xalloc(V * C * sizeof *dwte0);
    float *dwpe0 = xalloc(T * C * sizeof *dwpe0);
    int32_t tok[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (int32_t)((i * 5 + i / 3) % V);
    rnd(wte, V * C, &s, 1.0f);
    rnd(wpe, T * C, &s, 1.0f);
    rnd(g, N, &s, 1.0f);
    rnd(dwte0, V * C, &s, 1.0f);
    rnd(dwpe0, T * C, &s, 1.0f);
    double *out = xalloc(N * sizeof *out), *dwte = xalloc(V * C * sizeof *dwte);
    double *dwpe = xalloc(T * C * sizeof *dwpe);
    for (int i = 0; i < V * C; i++)
        dwte[i] = dwte0[i];
    for (int i = 0; i < T * C; i++)
        dwpe[i] = dwpe0[i];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                int i = (b * T + t) * C + c;
                out[i] = (double)wte[tok[b * T + t] * C + c] + wpe[t * C + c];
                dwte[tok[b * T + t] * C + c] += 2.0 * g[i]; /* two backward calls */
                dwpe[t * C + c] += g[i];
            }
    int32_t *pt = d->ops->alloc(d, sizeof tok);
    CHECK_OK(d->ops->upload(d, pt, tok, sizeof tok));
    float *pe = dput(wte, V * C), *pp = dput(wpe, T * C), *po = dput(NULL, N);
    float *pg = dput(g, N), *pde = dput(dwte0, V * C), *pdp = dput(dwpe0, T * C);
    d->ops->embed_forward(d, po, pt, pe, pp, B, T, C);
    d->ops->embed_backward(d, pde, pdp, pg, pt, B, T, C, V);
    d->ops->embed_backward(d, pde, NULL, pg, pt, B, T, C, V);
    float *ho = dtake(po, N, "embed out"), *hde = dtake(pde, V * C, "dwte");
    float *hdp = dtake(pdp, T * C, "dwpe");
    CHECKF(rel_err(ho, out, N) < 1e-6, "%s: embed forward (%d x %d, C %d)", d->name, B, T, C);
    CHECKF(rel_err(hde, dwte, V * C) < 1e-6, "%s: embed backward dwte (%d x %d on %d tokens) %.3g",
           d->name, B, T, V, rel_err(hde, dwte, V * C));
    CHECKF(rel_err(hdp, dwpe, T * C) < 1e-6, "%s: embed backward dwpe (dwpe NULL must skip it)",
           d->name);
    free(ho), free(hde), free(hdp);
    d->ops->free(d, pt), d->ops->free(d, pe), d->ops->free(d, pp), d->ops->free(d, pg);
    free(wte), free(wpe), free(g), free(dwte0), free(dwpe0), free(out), free(dwte), free(dwpe);
}

/* softmax + cross-entropy over a vocabulary many times a GPU block, in
 * rows that put -inf logits first (a lane's first element) and logits of
 * magnitude 1e4; the loss from the logits, their gradient written over
 * them */
static void check_xent_wide(void)
{
    enum { R = 5, V = 5003 };
    unsigned long long s = 12;
    float *z = xalloc(R * V * sizeof *z);
    int32_t lab[R] = { 0, 5002, 777, 4096, 31 };
    rnd(z, R * V, &s, 3.0f);
    z[1 * V + 0] = z[1 * V + 1] = z[1 * V + 33] = -INFINITY;
    for (int c = 0; c < V; c++)
        z[3 * V + c] *= 3e3f;
    double *dz = xalloc(R * V * sizeof *dz), loss[R];
    for (int r = 0; r < R; r++) {
        const float *zr = z + r * V;
        double mx = -INFINITY, sum = 0;
        for (int c = 0; c < V; c++)
            mx = fmax(mx, zr[c]);
        for (int c = 0; c < V; c++)
            sum += exp(zr[c] - mx);
        for (int c = 0; c < V; c++)
            dz[r * V + c] = 0.25 * (exp(zr[c] - mx) / sum - (c == lab[r]));
        loss[r] = log(sum) - (zr[lab[r]] - mx);
    }
    int32_t *pl = d->ops->alloc(d, sizeof lab);
    CHECK_OK(d->ops->upload(d, pl, lab, sizeof lab));
    float *pz = dput(z, R * V), *ploss = dput(NULL, R);
    d->ops->softmax_xent(d, pz, ploss, pl, R, V, 0.25f, 1);
    float *hl = dtake(ploss, R, "losses"), *hdz = dtake(pz, R * V, "dlogits");
    for (int r = 0; r < R; r++) {
        double eg = rel_err(hdz + r * V, dz + r * V, V);
        CHECKF(eg < 1e-5, "%s: softmax xent gradient row %d over V = %d: %.3g", d->name, r, V,
               eg);
        CHECKF(fabs(hl[r] - loss[r]) <= 1e-5 * fabs(loss[r]) + 1e-6,
               "%s: xent loss row %d over V = %d: %.9g, expected %.9g", d->name, r, V, hl[r],
               loss[r]);
    }
    free(hl), free(hdz), free(z), free(dz);
    d->ops->free(d, pl);
}

static void check_small_ops(void)
{
    enum { N = 37, M = 3, K = 5, NN = 4, BATCH = 3 };
    unsigned long long s = 8;
    float a[N], b[N];
    rnd(a, N, &s, 1.0f);
    rnd(b, N, &s, 1.0f);
    /* fill over NaN */
    float nan_buf[N];
    for (int i = 0; i < N; i++)
        nan_buf[i] = NAN;
    float *p = dput(nan_buf, N);
    d->ops->fill(d, p, 0.0f, N);
    float *h = dtake(p, N, "fill");
    int zero = 1;
    for (int i = 0; i < N; i++)
        zero &= h[i] == 0.0f;
    CHECKF(zero, "%s: fill 0 left a NaN", d->name);
    free(h);
    /* add with y aliasing a; axpby */
    float *pa = dput(a, N), *pb = dput(b, N);
    d->ops->add(d, pa, pa, pb, N);
    d->ops->axpby(d, pb, 2.0f, pa, -0.5f, N);
    h = dtake(pa, N, "add");
    float *h2 = dtake(pb, N, "axpby");
    double ra[N], rb[N];
    for (int i = 0; i < N; i++) {
        ra[i] = (double)a[i] + b[i];
        rb[i] = 2.0 * ((double)a[i] + b[i]) - 0.5 * b[i];
    }
    CHECKF(rel_err(h, ra, N) < 1e-6 && rel_err(h2, rb, N) < 1e-6, "%s: add/axpby", d->name);
    free(h), free(h2);
    /* sumsq counts non-finite values */
    float v[N];
    double ss = 0;
    for (int i = 0; i < N; i++)
        ss += (double)a[i] * a[i];
    memcpy(v, a, sizeof v);
    float *pv = dput(v, N);
    double got;
    size_t bad = 99;
    CHECK_OK(d->ops->sumsq(d, pv, N, &got, &bad));
    CHECKF(fabs(got - ss) < 1e-5 * ss && bad == 0, "%s: sumsq %g vs %g", d->name, got, ss);
    v[3] = NAN;
    v[7] = INFINITY;
    CHECK_OK(d->ops->upload(d, pv, v, sizeof v));
    CHECK_OK(d->ops->sumsq(d, pv, N, NULL, &bad));
    CHECKF(bad == 2, "%s: sumsq counted %zu non-finite values, expected 2", d->name, bad);
    d->ops->free(d, pv);
    /* axpby with b == 0 over a y of NaNs: y = a x, the NaNs gone */
    float nanv[N];
    for (int i = 0; i < N; i++)
        nanv[i] = NAN;
    pv = dput(nanv, N);
    pa = dput(a, N);
    d->ops->axpby(d, pv, -3.0f, pa, 0.0f, N);
    h = dtake(pv, N, "axpby b=0");
    for (int i = 0; i < N; i++)
        ra[i] = -3.0 * a[i];
    CHECKF(rel_err(h, ra, N) < 1e-6, "%s: axpby with b = 0 read y", d->name);
    free(h);
    d->ops->free(d, pa);
    /* axpy_dist: y += a x and sum (y - x)^2, over lengths around its blocks
     * of 16 and 4096 */
    static const size_t lens[] = { 0, 1, 15, 16, 17, 4096, 4111, 10007 };
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        size_t n = lens[li];
        float *xy = malloc((2 * n + 1) * sizeof *xy);
        rnd(xy, (int)(2 * n + 1), &s, 1.0f);
        float *px = dput(xy, (int)n + 1), *py = dput(xy + n, (int)n + 1);
        double d2 = -1, want = 0;
        CHECK_OK(d->ops->axpy_dist(d, py, 0.25f, px, n, &d2));
        float *got_y = dtake(py, (int)n + 1, "axpy_dist");
        double *ry = malloc((n + 1) * sizeof *ry);
        for (size_t i = 0; i < n; i++) {
            ry[i] = (double)xy[n + i] + 0.25 * xy[i];
            want += (ry[i] - xy[i]) * (ry[i] - xy[i]);
        }
        ry[n] = xy[2 * n]; /* the element after the range stays */
        CHECKF(rel_err(got_y, ry, (int)n + 1) < 1e-6 && fabs(d2 - want) <= 1e-5 * want + 1e-30,
               "%s: axpy_dist over %zu: distance %.9g, expected %.9g", d->name, n, d2, want);
        free(got_y), free(ry), free(xy);
        d->ops->free(d, px);
    }
    /* strided-batched GEMM: C_i (M,NN) = 0.5 A_i^T (M,K) B_i (K,NN) + 2 C_i, padded strides */
    enum { SA = K * M + 3, SB = K * NN + 2, SC = M * NN + 1 };
    float A[BATCH * SA], Bm[BATCH * SB], Cm[BATCH * SC];
    rnd(A, BATCH * SA, &s, 1.0f);
    rnd(Bm, BATCH * SB, &s, 1.0f);
    rnd(Cm, BATCH * SC, &s, 1.0f);
    double ref[BATCH * SC];
    for (int i = 0; i < BATCH * SC; i++)
        ref[i] = Cm[i];
    for (int bi = 0; bi < BATCH; bi++)
        for (int r = 0; r < M; r++)
            for (int c = 0; c < NN; c++) {
                double acc = 0;
                for (int k = 0; k < K; k++)
                    acc += (double)A[bi * SA + k * M + r] * Bm[bi * SB + k * NN + c];
                ref[bi * SC + r * NN + c] = 0.5 * acc + 2.0 * Cm[bi * SC + r * NN + c];
            }
    float *pA = dput(A, BATCH * SA), *pB = dput(Bm, BATCH * SB), *pC = dput(Cm, BATCH * SC);
    d->ops->gemm_batched(d, 1, 0, M, NN, K, 0.5f, pA, M, SA, pB, NN, SB, 2.0f, pC, NN, SC, BATCH);
    h = dtake(pC, BATCH * SC, "gemm_batched");
    CHECKF(rel_err(h, ref, BATCH * SC) < 1e-5, "%s: gemm_batched %.3g", d->name,
           rel_err(h, ref, BATCH * SC));
    free(h);
    d->ops->free(d, pA), d->ops->free(d, pB);
}

/* Asynchronous copies through host_alloc memory on two streams ordered by
 * an event, and event_query: 1 for an event never recorded, 1 once the work
 * before it is done (after event_sync), and the data arrives intact. */
static void check_async_copies(void)
{
    const size_t n = (size_t)1 << 20;
    float *h = d->ops->host_alloc(d, n * sizeof(float));
    float *back = d->ops->host_alloc(d, n * sizeof(float));
    float *dv = d->ops->alloc(d, n * sizeof(float));
    rumor_stream_t *s1 = NULL, *s2 = NULL;
    rumor_event_t *e = NULL, *never = NULL;
    CHECKF(h && back && dv, "%s: host_alloc or alloc failed", d->name);
    CHECK_OK(d->ops->stream_create(d, &s1));
    CHECK_OK(d->ops->stream_create(d, &s2));
    CHECK_OK(d->ops->event_create(d, &e));
    CHECK_OK(d->ops->event_create(d, &never));
    if (h && back && dv && s1 && s2 && e && never) {
        for (size_t i = 0; i < n; i++)
            h[i] = (float)i * 0.5f - 7.0f, back[i] = NAN;
        CHECKF(d->ops->event_query(d, never) == 1, "%s: an event never recorded is not done",
               d->name);
        CHECK_OK(d->ops->upload_async(d, dv, h, n * sizeof(float), s1));
        CHECK_OK(d->ops->event_record(d, e, s1));
        int q = d->ops->event_query(d, e);
        CHECKF(q == 0 || q == 1, "%s: event_query of a recorded event gave %d", d->name, q);
        CHECK_OK(d->ops->stream_wait(d, s2, e));
        CHECK_OK(d->ops->download_async(d, back, dv, n * sizeof(float), s2));
        CHECK_OK(d->ops->event_record(d, e, s2));
        CHECK_OK(d->ops->event_sync(d, e));
        CHECKF(d->ops->event_query(d, e) == 1, "%s: event_query after event_sync is not 1",
               d->name);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += back[i] != h[i];
        CHECKF(bad == 0, "%s: %zu of %zu floats differ after an upload and a download ordered "
               "by an event", d->name, bad, n);
    }
    if (never)
        d->ops->event_destroy(d, never);
    if (e)
        d->ops->event_destroy(d, e);
    if (s1)
        d->ops->stream_destroy(d, s1);
    if (s2)
        d->ops->stream_destroy(d, s2);
    if (dv)
        d->ops->free(d, dv);
    if (h)
        d->ops->host_free(d, h);
    if (back)
        d->ops->host_free(d, back);
}

static int complete(const rumor_ops_t *o)
{
    return o->fill && o->add && o->axpby && o->axpy_dist && o->sumsq && o->gemm_batched &&
           o->layernorm_forward && o->layernorm_backward_x && o->layernorm_backward_w &&
           o->attention_forward && o->attention_backward && o->embed_forward && o->embed_backward && o->stream_create &&
           o->set_stream && o->event_record && o->stream_wait && o->upload_async &&
           o->download_async && o->copy_peer && o->host_alloc && o->event_query && o->supports;
}

int main(void)
{
    char specs[10][16] = { "cpu:1", "cpu:2" };
    int n = 2;
    for (int i = 0; i < rumor_device_count(RUMOR_DEV_CUDA) && n < 10; i++)
        snprintf(specs[n++], sizeof specs[0], "cuda:%d", i);
    for (int i = 0; i < n; i++) {
        if (rumor_device_open(specs[i], &d) < 0) {
            CHECKF(0, "%s: does not open: %s", specs[i], rumor_err_msg());
            continue;
        }
        if (!complete(d->ops)) {
            CHECKF(0, "%s: the ops table lacks transformer ops or plumbing", d->name);
        } else {
            check_layernorm(5, 12);
            check_layernorm(83, 203);
            check_attention(2, 7, 3, 4);
            check_attention(2, 37, 2, 5);
            check_attention(1, 37, 2, 32);
            check_attention(1, 37, 1, 64);
            check_attention(1, 37, 1, 128);
            check_attention(1, 150, 2, 16); /* several query blocks and key tiles */
            check_embed();
            check_embed_wide();
            check_xent_wide();
            check_small_ops();
            check_async_copies();
            fprintf(stderr, "%s: transformer ops checked\n", d->name);
        }
        rumor_device_close(&d);
    }
    return tu_finish("test_ops_tf");
}

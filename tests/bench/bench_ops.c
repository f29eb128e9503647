/* Benchmark: the CPU ops of a GPT step against the machine's own limits,
 * measured in the same run: memory-bound ops (layernorm, embeddings, add,
 * fill, GELU) in GB/s and as a ratio to memcpy of the same bytes; attention
 * (tiled GEMMs and the online softmax; counted as the full T x T products) in GFLOP/s and as a ratio to one
 * cblas_sgemm of the same FLOP count. One thread (cpu:1), GPT-like shapes
 * (B 8, T 128, C 128, 4 heads); medians of repeated timings. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "log.h"
#include "ops.h"
#include "bench_util.h"

enum { B = 8, T = 128, C = 128, NH = 4, V = 256, REPS = 15 };
#define R (B * T)

static rumor_device_t *d;
static float *x, *y, *w, *b, *mean, *rstd, *dy, *dx, *qkv, *lse, *dqkv, *wte, *wpe, *h4;
static int32_t *tok;

typedef void (*op_fn)(void);

static double seconds_of(op_fn f, int inner)
{
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = rumor_now();
        for (int i = 0; i < inner; i++)
            f();
        t[r] = (rumor_now() - t0) / inner;
    }
    return bench_median(t, REPS);
}

static size_t memcpy_bytes;
static void op_memcpy(void) { memcpy(dx, x, memcpy_bytes); }
static void op_ln_fwd(void) { d->ops->layernorm_forward(d, y, mean, rstd, x, w, b, R, C, 1e-5f); }
static void op_ln_bx(void) { d->ops->layernorm_backward_x(d, dx, dy, x, w, mean, rstd, R, C, 0); }
static void op_ln_bw(void) { d->ops->layernorm_backward_w(d, w, b, dy, x, mean, rstd, R, C); }
static void op_emb_fwd(void) { d->ops->embed_forward(d, y, tok, wte, wpe, B, T, C); }
static void op_emb_bwd(void) { d->ops->embed_backward(d, wte, wpe, dy, tok, B, T, C, V); }
static void op_add(void) { d->ops->add(d, y, x, dy, (size_t)R * C); }
static void op_fill(void) { d->ops->fill(d, y, 0.0f, (size_t)R * C); }
static void op_gelu(void) { d->ops->gelu_forward(d, h4, h4 + (size_t)R * C, (size_t)R * C); }
static void op_att_fwd(void) { d->ops->attention_forward(d, y, lse, qkv, B, T, C, NH); }
static void op_att_bwd(void) { d->ops->attention_backward(d, dqkv, dy, qkv, y, lse, B, T, C, NH); }
static int sg_m, sg_n, sg_k;
static float *sa, *sb, *sc;
static void op_sgemm(void)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sg_m, sg_n, sg_k, 1, sa, sg_k, sb,
                sg_n, 0, sc, sg_n);
}

static float *buf(size_t n)
{
    float *p = calloc(n, sizeof *p);
    if (!p)
        exit(1);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

static void mem_op(const char *name, op_fn f, size_t bytes)
{
    memcpy_bytes = bytes / 2; /* memcpy reads and writes: the same bytes touched */
    double tm = seconds_of(op_memcpy, 20), to = seconds_of(f, 20);
    printf("bench: ops_%s = %.2f GB/s\n", name, bytes / to / 1e9);
    printf("bench: ops_%s_vs_memcpy = %.3f x\n", name, tm / to);
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    if (rumor_device_open("cpu:1", &d) < 0) {
        fprintf(stderr, "bench_ops: %s\n", rumor_err_msg());
        return 1;
    }
    size_t n = (size_t)R * C;
    /* x and dx are twice the size: memcpy copies up to 1.5 n floats */
    x = buf(2 * n), y = buf(n), dy = buf(n), dx = buf(2 * n), w = buf(C), b = buf(C);
    mean = buf(R), rstd = buf(R), qkv = buf(3 * n), dqkv = buf(3 * n), h4 = buf(2 * n);
    lse = buf((size_t)B * NH * T);
    wte = buf((size_t)V * C), wpe = buf((size_t)T * C);
    tok = malloc(sizeof(int32_t) * R);
    for (int i = 0; i < R; i++)
        tok[i] = (i * 7) % V;
    printf("# one thread, B %d, T %d, C %d, %d heads; OpenBLAS %s\n", B, T, C, NH,
           rumor_blas_corename());
    size_t f4 = sizeof(float);
    mem_op("layernorm_fwd", op_ln_fwd, (2 * n + 2 * R) * f4);
    mem_op("layernorm_bwd_x", op_ln_bx, 3 * n * f4);
    mem_op("layernorm_bwd_w", op_ln_bw, 2 * n * f4);
    mem_op("embed_fwd", op_emb_fwd, 3 * n * f4);
    mem_op("embed_bwd", op_emb_bwd, 3 * n * f4);
    mem_op("add", op_add, 3 * n * f4);
    mem_op("fill", op_fill, n * f4);
    mem_op("gelu_fwd", op_gelu, 2 * n * f4);
    /* attention: 2 GEMMs of T x T x hs per (b, h) forward, 4 backward */
    int hs = C / NH;
    double ffwd = 2.0 * 2.0 * B * NH * (double)T * T * hs, fbwd = 2.0 * ffwd;
    sg_m = 512, sg_n = 512, sg_k = 512;
    sa = buf((size_t)sg_m * sg_k), sb = buf((size_t)sg_k * sg_n), sc = buf((size_t)sg_m * sg_n);
    double gflops = 2.0 * sg_m * sg_n * sg_k / seconds_of(op_sgemm, 3) / 1e9;
    double af = ffwd / seconds_of(op_att_fwd, 3) / 1e9, ab = fbwd / seconds_of(op_att_bwd, 3) / 1e9;
    printf("bench: ops_sgemm_512 = %.1f GFLOP/s\n", gflops);
    printf("bench: ops_attention_fwd = %.1f GFLOP/s\n", af);
    printf("bench: ops_attention_fwd_vs_sgemm = %.3f x\n", af / gflops);
    printf("bench: ops_attention_bwd = %.1f GFLOP/s\n", ab);
    printf("bench: ops_attention_bwd_vs_sgemm = %.3f x\n", ab / gflops);
    rumor_device_close(&d);
    return 0;
}

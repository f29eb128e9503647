/* bench_cuda's op figures: the GPU's bf16 GEMM peak, element-wise ops and
 * reductions against a device-to-device copy, and the ops table's GEMM
 * against cuBLAS called directly (bench_cuda.c has the rest).
 *
 * Times are wall clock around a number of calls queued back to back and one
 * device sync (ops->sync, or cudaStreamSynchronize for direct cuBLAS), so a
 * launch's cost counts where it does not hide behind the work before it.
 * Ratios are taken round by round over interleaved rounds, and the median
 * is printed. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "bench_util.h"
#include "err.h"
#include "log.h"

/* cuBLAS called from here needs the real CUDA headers; the emulation's
 * stand-ins (tests/cuda-emu/cuda_emu.h) are C++ only, so emulated builds
 * time the ops table alone. */
#if defined(HAVE_CUDA) && !defined(RUMOR_CUDA_EMU)
#define BC_CUBLAS 1
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

/* Calls per timed measurement: enough that one sync at the end is noise. */
static int reps_for(const bc_sizes *z, int real) { return z->emu ? 1 : real; }

/* ------------------------------------------------------------ bf16 peak */

#ifdef BC_CUBLAS
/* Random bf16 (the top half of a float in [-1, 1)): tensor cores fed zeros
 * or constants draw less power and clock higher than on real data. */
static uint16_t *random_bf16(size_t n, uint64_t seed)
{
    uint16_t *h = malloc(n * sizeof *h);
    if (!h)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        float f = (float)(seed >> 40) * (2.0f / 16777216.0f) - 1.0f;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        h[i] = (uint16_t)(u >> 16);
    }
    return h;
}

/* cublasGemmEx, bf16 A, B and C, fp32 accumulation (CUBLAS_COMPUTE_32F):
 * what autocast's products and llm.c's matmuls run. -1 on a failure. */
static double peak_cublas(int n, int rounds, int reps)
{
    size_t nn = (size_t)n * n;
    void *a = NULL, *b = NULL, *c = NULL;
    cublasHandle_t h = NULL;
    cudaStream_t s = NULL;
    uint16_t *ha = random_bf16(nn, 1), *hb = random_bf16(nn, 2);
    double tf[16], out = -1;
    const float one = 1.0f, zero = 0.0f;
    if (!ha || !hb || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc(&a, nn * 2) != cudaSuccess || cudaMalloc(&b, nn * 2) != cudaSuccess ||
        cudaMalloc(&c, nn * 2) != cudaSuccess ||
        cudaMemcpy(a, ha, nn * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(b, hb, nn * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
        cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS)
        goto done;
    for (int r = -1; r < rounds && r < 16; r++) { /* round -1 warms up (heuristics, clocks) */
        double t0 = rumor_now();
        for (int i = 0; i < reps; i++)
            if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b,
                             CUDA_R_16BF, n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
                goto done;
        if (cudaStreamSynchronize(s) != cudaSuccess)
            goto done;
        if (r >= 0)
            tf[r] = 2.0 * n * (double)nn * reps / (rumor_now() - t0) / 1e12;
    }
    out = bench_median(tf, rounds < 16 ? rounds : 16);
done:
    if (out < 0)
        fprintf(stderr, "bench_cuda: the bf16 cuBLAS GEMM failed: %s\n",
                cudaGetErrorString(cudaGetLastError()));
    if (h)
        cublasDestroy(h);
    cudaFree(a), cudaFree(b), cudaFree(c);
    if (s)
        cudaStreamDestroy(s);
    free(ha), free(hb);
    return out;
}
#endif

/* The ops table's gemm in bf16 mode (fp32 in and out, bf16 tensor-core
 * products): below cuBLAS's bf16 peak by the fp32 traffic. */
static double peak_table(rumor_device_t *d, int n, int rounds, int reps)
{
    const rumor_ops_t *o = d->ops;
    size_t nn = (size_t)n * n;
    float *a = o->alloc(d, nn * 4), *b = o->alloc(d, nn * 4), *c = o->alloc(d, nn * 4);
    double tf[16], out = -1;
    if (a && b && c && rumor_device_set_precision(d, RUMOR_PREC_BF16) == 0) {
        o->fill(d, a, 0.5f, nn);
        o->fill(d, b, -0.25f, nn);
        for (int r = -1; r < rounds && r < 16; r++) {
            double t0 = rumor_now();
            for (int i = 0; i < reps; i++)
                o->gemm(d, 0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            if (o->sync(d) < 0)
                break;
            if (r >= 0)
                tf[r] = 2.0 * n * (double)nn * reps / (rumor_now() - t0) / 1e12;
            if (r == rounds - 1 || r == 15)
                out = bench_median(tf, rounds < 16 ? rounds : 16);
        }
    }
    if (out < 0)
        fprintf(stderr, "bench_cuda: the ops table's bf16 GEMM failed: %s\n", rumor_err_msg());
    if (rumor_device_set_precision(d, RUMOR_PREC_FP32) < 0)
        bc_die("precision");
    o->free(d, a), o->free(d, b), o->free(d, c);
    return out;
}

double bc_bf16_peak(rumor_device_t *d, const bc_sizes *z)
{
    int n = z->peak_n, rounds = z->emu ? 2 : 5, reps = reps_for(z, 20);
    double table = peak_table(d, n, rounds, reps), peak = table;
    const char *how = "the ops table's gemm in bf16 mode (fp32 in and out)";
#ifdef BC_CUBLAS
    double direct = peak_cublas(n, rounds, reps);
    if (direct > 0) /* else the table's, named as such */
        peak = direct, how = "cublasGemmEx, bf16 A, B and C, fp32 compute (CUBLAS_COMPUTE_32F)";
#endif
    if (peak > 0)
        printf("bench: cuda_bf16_gemm_peak = %.4g TFLOP/s\n", peak);
    printf("# peak: %d^3 through %s; the ops table's bf16 gemm (fp32 storage) %.4g TFLOP/s\n", n,
           how, table);
    fflush(stdout);
    return peak;
}

/* ------------------------------------------------- element-wise ops */

enum { OP_COPY, OP_AXPY, OP_ADD, OP_AXPBY, OP_SCALE, OP_FILL, OP_GELU, OP_ADAMW, OP_SUMSQ,
       OP_AXPY_DIST, OP_LAYERNORM, OP_XENT, NOPS };
static const char *const op_names[NOPS] = {
    "copy", "axpy", "add", "axpby", "scale", "fill", "gelu_forward", "adamw_step", "sumsq",
    "axpy_dist", "layernorm_forward", "softmax_xent"
};

typedef struct {
    size_t n;             /* floats in x, y, z, w */
    float *x, *y, *z, *w;
    int ln_rows, ln_C;    /* layernorm over (n / C, C): x -> y */
    float *mean, *rstd, *lnw, *lnb;
    int xe_rows, xe_V;    /* softmax + cross-entropy over (n / V, V): x -> y */
    float *losses;
    int32_t *labels;
} op_bufs;

/* Bytes op k reads and writes by its definition (ops.h), each once. */
static double op_bytes(int k, const op_bufs *b)
{
    double n = (double)b->n, R = b->ln_rows, C = b->ln_C, X = b->xe_rows, V = b->xe_V;
    static const double per_n[NOPS] = { 2, 3, 3, 3, 2, 1, 2, 7, 1, 3, 0, 0 };
    if (k == OP_LAYERNORM) /* x, w, b in; y, mean, rstd out */
        return 4.0 * (2 * R * C + 2 * C + 2 * R);
    if (k == OP_XENT) /* logits read twice, their gradient written over them; labels, losses */
        return 4.0 * (3 * X * V + 2 * X);
    return 4.0 * per_n[k] * n;
}

static int run_op(rumor_device_t *d, int k, op_bufs *b)
{
    const rumor_ops_t *o = d->ops;
    double sq;
    size_t nonfinite;
    switch (k) {
    case OP_COPY: return o->copy(d, b->y, b->x, b->n * 4);
    case OP_AXPY: o->axpy(d, b->y, 1e-3f, b->x, b->n); return 0;
    case OP_ADD: o->add(d, b->z, b->x, b->y, b->n); return 0;
    case OP_AXPBY: o->axpby(d, b->y, 0.5f, b->x, 0.5f, b->n); return 0;
    case OP_SCALE: o->scale(d, b->y, 1.0f, b->n); return 0;
    case OP_FILL: o->fill(d, b->z, 0.25f, b->n); return 0;
    case OP_GELU: o->gelu_forward(d, b->z, b->x, b->n); return 0;
    case OP_ADAMW: /* p = x, m = y, v = z, g = w */
        o->adamw_step(d, b->x, b->y, b->z, b->w, b->n, 1e-6f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f,
                      0.5f);
        return 0;
    case OP_SUMSQ: return o->sumsq(d, b->x, b->n, &sq, &nonfinite);
    case OP_AXPY_DIST: return o->axpy_dist(d, b->y, 1e-3f, b->x, b->n, &sq);
    case OP_LAYERNORM:
        o->layernorm_forward(d, b->y, b->mean, b->rstd, b->x, b->lnw, b->lnb, b->ln_rows,
                             b->ln_C, 1e-5f);
        return 0;
    case OP_XENT:
        /* the gradient over x: later calls run on earlier gradients (finite) */
        o->softmax_xent(d, b->x, b->losses, b->labels, b->xe_rows, b->xe_V, 1.0f, 1);
        return 0;
    }
    return -1;
}

/* GB/s of op k over reps calls; -1 on a failure (reported). */
static double op_rate(rumor_device_t *d, int k, op_bufs *b, int reps)
{
    if (d->ops->sync(d) < 0)
        return -1;
    double t0 = rumor_now();
    for (int i = 0; i < reps; i++)
        if (run_op(d, k, b) < 0)
            return -1;
    if (d->ops->sync(d) < 0)
        return -1;
    return op_bytes(k, b) * reps / (rumor_now() - t0) / 1e9;
}

void bc_eltwise(rumor_device_t *d, const bc_sizes *z)
{
    const rumor_ops_t *o = d->ops;
    op_bufs b = { .n = z->op_n, .ln_C = z->C, .xe_V = z->V };
    b.ln_rows = (int)(b.n / (size_t)b.ln_C);
    b.xe_rows = (int)(b.n / (size_t)b.xe_V);
    size_t bytes = b.n * 4;
    b.x = o->alloc(d, bytes), b.y = o->alloc(d, bytes), b.z = o->alloc(d, bytes);
    b.w = o->alloc(d, bytes);
    b.mean = o->alloc(d, (size_t)b.ln_rows * 4), b.rstd = o->alloc(d, (size_t)b.ln_rows * 4);
    b.lnw = o->alloc(d, (size_t)b.ln_C * 4), b.lnb = o->alloc(d, (size_t)b.ln_C * 4);
    b.losses = o->alloc(d, (size_t)b.xe_rows * 4);
    b.labels = o->alloc(d, (size_t)b.xe_rows * 4);
    int32_t *lab = malloc((size_t)b.xe_rows * 4);
    if (!b.x || !b.y || !b.z || !b.w || !b.mean || !b.rstd || !b.lnw || !b.lnb || !b.losses ||
        !b.labels || !lab)
        bc_die("element-wise buffers");
    for (int i = 0; i < b.xe_rows; i++)
        lab[i] = (int32_t)((i * 7919) % b.xe_V);
    /* finite values that the repeated calls keep finite */
    o->fill(d, b.x, 0.5f, b.n), o->fill(d, b.y, 0.25f, b.n), o->fill(d, b.w, 0.125f, b.n);
    o->fill(d, b.lnw, 1.0f, (size_t)b.ln_C);
    if (o->upload(d, b.labels, lab, (size_t)b.xe_rows * 4) < 0)
        bc_die("labels");
    printf("# element-wise: buffers of %.0f MiB; layernorm over (%d, %d), softmax + "
           "cross-entropy over (%d, %d); bytes read + written once each, over a copy's 2 x %.0f "
           "MiB\n", bytes / 1048576.0, b.ln_rows, b.ln_C, b.xe_rows, b.xe_V, bytes / 1048576.0);
    enum { MAXR = 9 };
    int rounds = z->emu ? 2 : 7, reps = reps_for(z, 20);
    double rate[NOPS][MAXR], ratio[NOPS][MAXR];
    for (int r = -1; r < rounds; r++) /* round -1 warms up */
        for (int k = 0; k < NOPS; k++) {
            /* a copy right before each op: the clocks and the memory as the op finds them */
            double c = op_rate(d, OP_COPY, &b, reps), v = op_rate(d, k, &b, reps);
            if (c < 0 || v < 0) {
                fprintf(stderr, "bench_cuda: %s: %s\n", op_names[k], rumor_err_msg());
                bc_die("element-wise ops");
            }
            if (r >= 0)
                rate[k][r] = v, ratio[k][r] = v / c;
        }
    for (int k = 1; k < NOPS; k++)
        printf("bench: cuda_%s_vs_copy = %.3f x\n", op_names[k], bench_median(ratio[k], rounds));
    printf("# GB/s:");
    for (int k = 0; k < NOPS; k++)
        printf(" %s %.0f", op_names[k], bench_median(rate[k], rounds));
    printf("\n");
    fflush(stdout);
    float *bufs[] = { b.x, b.y, b.z, b.w, b.mean, b.rstd, b.lnw, b.lnb, b.losses,
                      (float *)b.labels };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        o->free(d, bufs[i]);
    free(lab);
}

/* ------------------------------------------------ GEMM against cuBLAS */

#ifdef BC_CUBLAS
typedef struct {
    int m, n, k, tb;
    const char *what;
} gemm_shape;

static cublasComputeType_t compute_of(rumor_precision p)
{
    return p == RUMOR_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
         : p == RUMOR_PREC_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
}

/* Seconds per call of shape g: the table's gemm (direct == 0) or the same
 * cublasGemmEx that kernels/cuda/cuda_matmul.cu makes (row-major C = A B
 * as column-major C^T = B^T A^T) on our own handle and stream; -1 on a
 * failure. */
/* (direct == 2: bf16 copies of a and b, set by gemm_bf16_inputs, multiplied
 * as bf16 with fp32 accumulation: the ceiling of a bf16 product) */
static const void *a16, *b16;
static double gemm_time(rumor_device_t *d, int direct, cublasHandle_t h, cudaStream_t s,
                        const gemm_shape *g, const float *a, const float *b, float *c, int reps)
{
    const float one = 1.0f, zero = 0.0f;
    int lda = g->k, ldb = g->tb ? g->k : g->n, ldc = g->n;
    if (d->ops->sync(d) < 0 || cudaStreamSynchronize(s) != cudaSuccess)
        return -1;
    double t0 = rumor_now();
    for (int i = 0; i < reps; i++) {
        if (!direct)
            d->ops->gemm(d, 0, g->tb, g->m, g->n, g->k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
        else if (direct == 2) {
            if (cublasGemmEx(h, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->m, g->k,
                             &one, b16, CUDA_R_16BF, ldb, a16, CUDA_R_16BF, lda, &zero, c,
                             CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
                return -1;
        } else if (cublasGemmEx(h, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->m,
                              g->k, &one, b, CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &zero, c,
                              CUDA_R_32F, ldc, compute_of(d->precision),
                              CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            return -1;
    }
    if ((direct ? cudaStreamSynchronize(s) != cudaSuccess : d->ops->sync(d) < 0))
        return -1;
    return (rumor_now() - t0) / reps;
}
/* How far the direct call's product is from the table's over its first
 * ns entries (max |difference| / max |entry|; the same call gives 0): a
 * direct call that read the operands in another layout would time another
 * product. Also warms both up. -1 on a failure. */
static double gemm_disagree(rumor_device_t *d, cublasHandle_t h, cudaStream_t s,
                            const gemm_shape *g, const float *a, const float *b, float *c,
                            float *h1, float *h2, size_t ns)
{
    if (gemm_time(d, 0, h, s, g, a, b, c, 1) < 0 || d->ops->download(d, h1, c, ns * 4) < 0 ||
        gemm_time(d, 1, h, s, g, a, b, c, 1) < 0 || d->ops->download(d, h2, c, ns * 4) < 0)
        return -1;
    double diff = 0, big = 0;
    for (size_t i = 0; i < ns; i++) {
        double e = fabs((double)h1[i] - h2[i]), v = fabs((double)h1[i]);
        diff = e > diff ? e : diff;
        big = v > big ? v : big;
    }
    return diff / (big > 0 ? big : 1);
}

/* Uniform in [-1, 1): products of constants would hide a transposed operand. */
static int upload_random(rumor_device_t *d, float *dst, float *host, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        host[i] = (float)(seed >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
    return d->ops->upload(d, dst, host, n * 4);
}

/* *dst16 = a new device copy of host's n floats in bf16 (to nearest even) */
static int bf16_copy(void **dst16, const float *host, size_t n)
{
    uint16_t *h = malloc(n * 2);
    if (!h || cudaMalloc(dst16, n * 2) != cudaSuccess) {
        free(h);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &host[i], 4);
        h[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    int rc = cudaMemcpy(*dst16, h, n * 2, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
    free(h);
    return rc;
}
#endif

void bc_gemm_vs_cublas(rumor_device_t *d, const bc_sizes *z, int R)
{
#ifndef BC_CUBLAS
    (void)d, (void)z, (void)R;
    printf("bench_cuda: cuBLAS is not linked into the emulated build (tests/cuda-emu): "
           "cuda_gemm_table_vs_cublas_* skipped\n");
#else
    const rumor_ops_t *o = d->ops;
    int C = z->C, V = z->V;
    /* the GPT's forward products: qkv, MLP up, MLP down, logits against wte (V, C) */
    const gemm_shape shapes[] = { { R, 3 * C, C, 0, "(R,C)x(C,3C)" },
                                  { R, 4 * C, C, 0, "(R,C)x(C,4C)" },
                                  { R, C, 4 * C, 0, "(R,4C)x(4C,C)" },
                                  { R, V, C, 1, "(R,C)x(C,V)" } };
    enum { NSH = 4, ROUNDS = 5 };
    size_t big = (size_t)V > 4 * (size_t)C ? (size_t)V : 4 * (size_t)C;
    size_t na = (size_t)R * 4 * C, nb = big * C, ns = 65536;
    float *a = o->alloc(d, na * 4), *b = o->alloc(d, nb * 4);
    float *c = o->alloc(d, (size_t)R * big * 4);
    float *host = malloc((na > nb ? na : nb) * 4), *h1 = malloc(ns * 4), *h2 = malloc(ns * 4);
    cublasHandle_t h = NULL;
    cudaStream_t s = NULL;
    if (!a || !b || !c || !host || !h1 || !h2 ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cublasCreate(&h) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS ||
        upload_random(d, a, host, na, 3) < 0 || bf16_copy((void **)&a16, host, na) < 0 ||
        upload_random(d, b, host, nb, 4) < 0 || bf16_copy((void **)&b16, host, nb) < 0)
        bc_die("GEMM buffers and handle");
    printf("# GEMM: R = %d rows (the step's batch x T), C = %d, V = %d; the table's gemm and "
           "the same cublasGemmEx on a handle of our own\n", R, C, V);
    static const rumor_precision precs[3] = { RUMOR_PREC_FP32, RUMOR_PREC_TF32, RUMOR_PREC_BF16 };
    for (int p = 0; p < 3; p++) {
        if (rumor_device_set_precision(d, precs[p]) < 0) {
            printf("bench_cuda: %s: %s: skipped\n", rumor_precision_name(precs[p]),
                   rumor_err_msg());
            continue;
        }
        double per_shape[NSH], per_shape16[NSH];
        int bf = precs[p] == RUMOR_PREC_BF16;
        for (int k = 0; k < NSH; k++) {
            const gemm_shape *g = &shapes[k];
            double flops = 2.0 * g->m * (double)g->n * g->k, ratio[ROUNDS], ttab[ROUNDS];
            size_t nc = (size_t)g->m * g->n < ns ? (size_t)g->m * g->n : ns;
            double off = gemm_disagree(d, h, s, g, a, b, c, h1, h2, nc);
            /* a warm call sizes the rounds to ~20 ms */
            double t1 = off < 0 ? -1 : gemm_time(d, 0, h, s, g, a, b, c, 1);
            if (t1 < 0)
                goto failed;
            if (off > 1e-5)
                printf("bench_cuda: %s %s: cuBLAS called here differs from the table by %.3g of "
                       "the largest entry: not the same product\n",
                       rumor_precision_name(precs[p]), g->what, off);
            int reps = t1 > 0.02 ? 1 : (int)(0.02 / t1) + 1;
            double ratio16[ROUNDS], t16[ROUNDS];
            for (int r = 0; r < ROUNDS; r++) {
                double tt = gemm_time(d, 0, h, s, g, a, b, c, reps);
                double td = gemm_time(d, 1, h, s, g, a, b, c, reps);
                double tb16 = bf ? gemm_time(d, 2, h, s, g, a, b, c, reps) : 1;
                if (tt < 0 || td < 0 || tb16 < 0)
                    goto failed;
                ratio[r] = td / tt, ttab[r] = tt;
                ratio16[r] = tb16 / tt, t16[r] = tb16;
            }
            per_shape[k] = bench_median(ratio, ROUNDS);
            per_shape16[k] = bench_median(ratio16, ROUNDS);
            printf("# %s %s: table %.4g TFLOP/s, %.3f of cuBLAS (products %.2g apart)\n",
                   rumor_precision_name(precs[p]), g->what,
                   flops / bench_median(ttab, ROUNDS) / 1e12, per_shape[k], off);
            if (bf)
                printf("# bf16 %s: cuBLAS on bf16 inputs %.4g TFLOP/s: the table (rounding its "
                       "fp32 inputs first) at %.3f of it\n", g->what,
                       flops / bench_median(t16, ROUNDS) / 1e12, per_shape16[k]);
        }
        printf("bench: cuda_gemm_table_vs_cublas_%s = %.3f x\n", rumor_precision_name(precs[p]),
               bench_median(per_shape, NSH));
        if (bf)
            printf("bench: cuda_gemm_table_vs_cublas_bf16_inputs = %.3f x\n",
                   bench_median(per_shape16, NSH));
        fflush(stdout);
    }
    goto done;
failed:
    fprintf(stderr, "bench_cuda: GEMM: %s / %s\n", rumor_err_msg(),
            cudaGetErrorString(cudaGetLastError()));
    bc_die("GEMM against cuBLAS");
done:
    if (rumor_device_set_precision(d, RUMOR_PREC_FP32) < 0)
        bc_die("precision");
    cublasDestroy(h);
    cudaStreamDestroy(s);
    cudaFree((void *)a16), cudaFree((void *)b16);
    o->free(d, a), o->free(d, b), o->free(d, c);
    free(host), free(h1), free(h2);
#endif
}

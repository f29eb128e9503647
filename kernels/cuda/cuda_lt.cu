/* The MLP's GEMMs with their element-wise neighbours fused into cuBLASLt
 * epilogues (GPT-2's fc layer and its GELU):
 *   gemm_bias_gelu: pre = x W + bias, y = gelu(pre)  (CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
 *                   pre written as the epilogue's auxiliary output)
 *   gemm_dgelu:     dx = (dy W^T) * gelu'(pre)       (CUBLASLT_EPILOGUE_DGELU, pre read
 *                   as its auxiliary input), only where RUMOR_CUDA_LT_DGELU=1:
 *                   on an H200 (fp32 output and auxiliary matrix) it took
 *                   304 us where the GEMM and GELU's backward as separate
 *                   ops take about 160, a GPT-2 124M step 4% longer
 *                   (bench_cuda's gpt124m_lt_dgelu_vs_default measures it)
 * cuBLASLt's GELU is the tanh approximation, rumor's (ops.h).
 *
 * Row-major onto column-major as in cuda_matmul.cu: a row-major (r, c)
 * matrix is the column-major (c, r) one, so pre^T (out, rows) = W^T x^T
 * with W as A (out x in, ld out) and x as B (in x rows, ld in); the bias,
 * a vector over D's column-major rows, is over rumor's columns, as wanted.
 * Backward: dx^T (in, rows) = op_T(W) dy^T, W (out x in, ld out)
 * transposed, dy (out x rows, ld out); the auxiliary matrix has D's shape.
 *
 * The handle and a workspace are the device's, made at the first call.
 * Where cuBLASLt offers no algorithm (the auxiliary matrix's leading
 * dimension must be a multiple of 8; pointer alignments are passed as
 * preferences), where RUMOR_CUDA_NO_LT=1 is set, and in the emulation
 * (HIP-CPU has no cuBLASLt), the ops run as the separate GEMM, bias and GELU
 * ops: the same semantics as the CPU's. */
#include <stdlib.h>
#include <string.h>

#include "cuda_int.h"

#ifndef RUMOR_CUDA_EMU
#include <cublasLt.h>

#define LT_WORKSPACE (32u << 20)

/* bf16: the inputs rounded first (cu_bf16_pair), as cu_gemm multiplies */
static cublasComputeType_t lt_compute(const rumor_device_t *d, int bf)
{
    if (bf)
        return CUBLAS_COMPUTE_32F;
    switch (d->precision) {
    case RUMOR_PREC_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case RUMOR_PREC_BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    default: return CUBLAS_COMPUTE_32F;
    }
}

/* the largest power of two up to 256 that divides the address */
static uint32_t lt_align(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 4 && a % al)
        al >>= 1;
    return al;
}

/* the device's cuBLASLt handle and workspace; 0 when there are none
 * (RUMOR_CUDA_NO_LT=1, or they could not be made: the fallback runs) */
static int lt_ready(rumor_device_t *d)
{
    cu_ctx *x = cu_of(d);
    if (x->lt)
        return 1;
    if (x->lt_off)
        return 0;
    const char *e = getenv("RUMOR_CUDA_NO_LT"), *dg = getenv("RUMOR_CUDA_LT_DGELU");
    x->lt_off = 1;
    if (e && *e && strcmp(e, "0") != 0)
        return 0;
    x->lt_dgelu = dg && *dg && strcmp(dg, "0") != 0;
    cublasLtHandle_t h = NULL;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS)
        return 0;
    CU_COUNT(d, n_malloc);
    if (cudaMalloc(&x->lt_ws, LT_WORKSPACE) != cudaSuccess) {
        (void)cudaGetLastError();
        cublasLtDestroy(h);
        x->lt_ws = NULL;
        return 0;
    }
    x->lt = h;
    x->lt_off = 0;
    return 1;
}

/* D (m x n, ld ldd, column-major) = epilogue(op(A) B) with A (stored
 * am x ak, ld lda), B (k x n, ld ldb); bias (m) and aux (m x n, ld ldd) as
 * the epilogue needs. 1: queued; 0: no algorithm (nothing queued; the
 * caller falls back); failures of a queued call are kept on the device. */
static int lt_matmul_as(rumor_device_t *d, int bf, cublasLtEpilogue_t epi, int transa, int m,
                        int n, int k, const void *a, int lda, const void *b, int ldb, float *dst,
                        int ldd, const float *bias, const float *aux);

/* D (m, n; ldd, column-major) = epi(op(A) B) with A (m x k, or k x m
 * transposed; lda) and B (k x n; ldb); 1 when queued, 0 when cuBLASLt
 * cannot (the caller runs the separate ops). In bf16 the inputs are
 * rounded first, as cu_gemm's (fp32 inputs under ..._FAST_16BF where no
 * bf16 algorithm is offered). */
static int lt_matmul(rumor_device_t *d, cublasLtEpilogue_t epi, int transa, int m, int n, int k,
                     const float *a, int lda, const float *b, int ldb, float *dst, int ldd,
                     const float *bias, const float *aux)
{
    if (!lt_ready(d) || ldd % 8 != 0)
        return 0;
    const uint16_t *a16, *b16;
    /* column-major (r, c; ld) is row-major (c, r; ld): A's stored columns
     * are the rows cu_bf16_pair sees */
    int acols = transa ? m : k, arows = transa ? k : m;
    if (d->precision == RUMOR_PREC_BF16 &&
        cu_bf16_pair(d, a, acols, arows, lda, b, n, k, ldb, &a16, &b16) == 0 &&
        lt_matmul_as(d, 1, epi, transa, m, n, k, a16, arows, b16, k, dst, ldd, bias, aux))
        return 1;
    return lt_matmul_as(d, 0, epi, transa, m, n, k, a, lda, b, ldb, dst, ldd, bias, aux);
}

static int lt_matmul_as(rumor_device_t *d, int bf, cublasLtEpilogue_t epi, int transa, int m,
                        int n, int k, const void *a, int lda, const void *b, int ldb, float *dst,
                        int ldd, const float *bias, const float *aux)
{
    cu_ctx *x = cu_of(d);
    cudaDataType_t in = bf ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtHandle_t h = (cublasLtHandle_t)x->lt;
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    int found = 0, queued = 0;
    cublasOperation_t opa = transa ? CUBLAS_OP_T : CUBLAS_OP_N, opb = CUBLAS_OP_N;
    cudaDataType_t scale = CUDA_R_32F;
    int64_t aux_ld = ldd;
    uint64_t ws = LT_WORKSPACE;
    uint32_t al_a = lt_align(a), al_b = lt_align(b), al_d = lt_align(dst);
    cublasLtMatmulHeuristicResult_t heur;
    memset(&heur, 0, sizeof heur);
    if (cublasLtMatmulDescCreate(&desc, lt_compute(d, bf), CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
        goto out;
    if (cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scale,
                                       sizeof scale) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                       sizeof aux) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                       sizeof aux_ld) != CUBLAS_STATUS_SUCCESS)
        goto out;
    if (bias && cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                               sizeof bias) != CUBLAS_STATUS_SUCCESS)
        goto out;
    if (cublasLtMatrixLayoutCreate(&la, in, transa ? k : m, transa ? m : k, lda) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&lb, in, k, n, ldb) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd) != CUBLAS_STATUS_SUCCESS)
        goto out;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof ws) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                             &al_a, sizeof al_a) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                             &al_b, sizeof al_b) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                             &al_d, sizeof al_d) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                             &al_d, sizeof al_d) != CUBLAS_STATUS_SUCCESS)
        goto out;
    if (cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, &heur, &found) !=
            CUBLAS_STATUS_SUCCESS ||
        found < 1)
        goto out;
    {
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_KEEP(d, cublasLtMatmul(h, desc, &one, a, la, b, lb, &zero, dst, ld, dst, ld,
                                      &heur.algo, x->lt_ws, LT_WORKSPACE, x->cur));
        queued = 1;
    }
out:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (ld)
        cublasLtMatrixLayoutDestroy(ld);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (desc)
        cublasLtMatmulDescDestroy(desc);
    return queued;
}
#endif /* RUMOR_CUDA_EMU */

void cu_lt_free(cu_ctx *x)
{
#ifndef RUMOR_CUDA_EMU
    if (x->lt)
        cublasLtDestroy((cublasLtHandle_t)x->lt);
    if (x->lt_ws)
        cudaFree(x->lt_ws);
#endif
    x->lt = NULL;
    x->lt_ws = NULL;
}

void cu_gemm_bias_gelu(rumor_device_t *d, float *y, float *pre, const float *x, const float *w,
                       const float *bias, int rows, int in, int out)
{
    if (rows <= 0 || out <= 0)
        return;
    CU_ENTER(d);
#ifndef RUMOR_CUDA_EMU
    if (in > 0 && lt_matmul(d, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 0, out, rows, in, w, out, x, in,
                            y, out, bias, pre))
        return;
#endif
    cu_gemm(d, 0, 0, rows, out, in, 1.0f, x, in, w, out, 0.0f, pre, out);
    cu_add_bias(d, pre, bias, rows, out);
    cu_gelu_forward(d, y, pre, (size_t)rows * (size_t)out);
}

void cu_gemm_dgelu(rumor_device_t *d, float *dx, const float *dy, const float *w, const float *pre,
                   int rows, int in, int out)
{
    if (rows <= 0 || in <= 0)
        return;
    CU_ENTER(d);
#ifndef RUMOR_CUDA_EMU
    if (out > 0 && lt_ready(d) && cu_of(d)->lt_dgelu &&
        lt_matmul(d, CUBLASLT_EPILOGUE_DGELU, 1, in, rows, out, w, out, dy, out, dx, in, NULL,
                  pre))
        return;
#endif
    cu_gemm(d, 0, 1, rows, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
    cu_gelu_backward(d, dx, pre, dx, (size_t)rows * (size_t)in);
}

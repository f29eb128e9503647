/* Matrix products through cuBLAS, and the bias ops around them.
 *
 * rumor's matrices are row-major; cuBLAS's are column-major. A row-major
 * (m, n) matrix is the column-major (n, m) transpose, so C = op(A) op(B)
 * becomes C^T = op(B)^T op(A)^T: the same call with A and B swapped and m
 * and n swapped, leading dimensions unchanged.
 *
 * The device's precision (ops.h) picks cuBLAS's compute type: fp32
 * (CUBLAS_COMPUTE_32F), tf32 or bf16 tensor cores (..._FAST_TF32,
 * ..._FAST_16BF: inputs rounded on the fly, fp32 accumulation, fp32 in and
 * out, so parameters and activations stay fp32 in memory). */
#include "cuda_int.h"

static cublasComputeType_t compute_type(const rumor_device_t *d)
{
    switch (d->precision) {
    case RUMOR_PREC_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case RUMOR_PREC_BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    default: return CUBLAS_COMPUTE_32F;
    }
}

void cu_gemm(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha, const float *a,
             int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    CU_ENTER(d);
    cu_ctx *x = cu_of(d);
    CUBLAS_KEEP(d, cublasGemmEx(x->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_32F,
                                ldb, a, CUDA_R_32F, lda, &beta, c, CUDA_R_32F, ldc,
                                compute_type(d), CUBLAS_GEMM_DEFAULT));
}

void cu_gemm_batched(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                     float beta, float *c, int ldc, long long sc, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return;
    CU_ENTER(d);
    cu_ctx *x = cu_of(d);
    CUBLAS_KEEP(d, cublasGemmStridedBatchedEx(
                       x->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n,
                       m, k, &alpha, b, CUDA_R_32F, ldb, sb, a, CUDA_R_32F, lda, sa, &beta, c,
                       CUDA_R_32F, ldc, sc, batch, compute_type(d), CUBLAS_GEMM_DEFAULT));
}

/* y (rows, cols) += bias (cols), four columns a thread where they align */
static __global__ void add_bias4_kernel(float4 *y, const float4 *bias, size_t n4, int cols4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = y[i], b = bias[i % (size_t)cols4];
        v.x += b.x;
        v.y += b.y;
        v.z += b.z;
        v.w += b.w;
        y[i] = v;
    }
}

static __global__ void add_bias_kernel(float *y, const float *bias, size_t n, int cols)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += bias[i % (size_t)cols];
}

void cu_add_bias(rumor_device_t *d, float *y, const float *bias, int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols;
    if (!n)
        return;
    CU_ENTER(d);
    cudaStream_t s = cu_of(d)->cur;
    if (cols % 4 == 0 && ((uintptr_t)y & 15) == 0 && ((uintptr_t)bias & 15) == 0) {
        size_t n4 = n / 4;
        CU_LAUNCH(add_bias4_kernel, cu_blocks(n4, 256), 256, 0, s, (float4 *)y,
                  (const float4 *)bias, n4, cols / 4);
    } else {
        CU_LAUNCH(add_bias_kernel, cu_blocks(n, 256), 256, 0, s, y, bias, n, cols);
    }
    CU_LAUNCHED(d, "add_bias");
}

static __global__ void fill_kernel(float *y, float v, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = v;
}

/* db (cols) = beta db + dy^T 1: the column sums as a GEMV against a vector
 * of ones (cuBLAS reads dy once, at its bandwidth) */
void cu_sum_rows(rumor_device_t *d, float *db, const float *dy, int rows, int cols, float beta)
{
    if (cols <= 0)
        return;
    CU_ENTER(d);
    cu_ctx *x = cu_of(d);
    const float one = 1.0f;
    if (rows <= 0) { /* an empty sum: db = beta db (0 clears a NaN, as BLAS's beta 0 does) */
        if (beta == 0.0f) {
            CU_LAUNCH(fill_kernel, cu_blocks((size_t)cols, 256), 256, 0, x->cur, db, 0.0f,
                      (size_t)cols);
            CU_LAUNCHED(d, "sum_rows");
        } else {
            CUBLAS_KEEP(d, cublasSscal(x->blas, cols, &beta, db, 1));
        }
        return;
    }
    /* a chunk of CU_ONES rows at a time against the vector of ones made at
     * open (nothing allocated here: sum_rows runs inside a step) */
    for (int r0 = 0; r0 < rows; r0 += CU_ONES) {
        int n = rows - r0 < CU_ONES ? rows - r0 : CU_ONES;
        float b = r0 == 0 ? beta : 1.0f;
        CUBLAS_KEEP(d, cublasSgemv(x->blas, CUBLAS_OP_N, cols, n, &one, dy + (size_t)r0 * cols,
                                   cols, x->ones, 1, &b, db, 1));
    }
}

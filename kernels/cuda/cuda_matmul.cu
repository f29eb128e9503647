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
 * out, so parameters and activations stay fp32 in memory).
 *
 * bf16: cu_gemm rounds both inputs to bf16 (to nearest, ties to even, as
 * the tensor cores round) into the device's scratch and multiplies bf16
 * matrices with fp32 accumulation into the fp32 output: cuBLAS's bf16
 * kernels read half the bytes and run at the tensor cores' bf16 rate, where
 * fp32 inputs under ..._FAST_16BF are converted inside slower kernels. The
 * scratch's rows start on 16 bytes whatever the caller's leading
 * dimensions (a GPT's logits over 50257 words do not: cuBLAS then falls
 * back to kernels several times slower), and an output whose rows do not is
 * made there and copied out. The scratch grows to what the largest product
 * needs (in the first steps), up to CU_BF16_SCRATCH elements, rows of C
 * going through it in chunks; products where not even 64 rows fit keep
 * ..._FAST_16BF. */
#include <string.h>

#include "cuda_int.h"

#define CU_BF16_SCRATCH ((size_t)512 << 20) /* elements: 1 GiB */
#define CUDA_BF16_TYPE CUDA_R_16BF

static cublasComputeType_t compute_type(const rumor_device_t *d)
{
    switch (d->precision) {
    case RUMOR_PREC_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case RUMOR_PREC_BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    default: return CUBLAS_COMPUTE_32F;
    }
}

static __device__ __forceinline__ uint16_t bf16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN stays a (quiet) NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* dst (drows, dcols; ldd) = bf16(src (rows, cols; ld)) with zeros beyond
 * rows and cols (drows >= rows, dcols >= cols): a block's threads along a
 * row, blocks down the rows; four elements a thread where rows start on 16
 * bytes */
static __global__ void to_bf16_kernel(uint16_t *dst, int drows, int dcols, int ldd,
                                      const float *src, int rows, int cols, int ld)
{
    int vec = cols % 4 == 0 && dcols % 4 == 0 && ld % 4 == 0 && ldd % 4 == 0 &&
              ((uintptr_t)src & 15) == 0 && ((uintptr_t)dst & 7) == 0;
    int step = gridDim.x * blockDim.x, c0 = blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = blockIdx.y; r < drows; r += gridDim.y) {
        const float *sr = src + (size_t)r * ld;
        uint16_t *dr = dst + (size_t)r * ldd;
        if (vec) {
            for (int c = c0; c < dcols / 4; c += step) {
                float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (r < rows && c < cols / 4)
                    v = ((const float4 *)sr)[c];
                uint2 o;
                o.x = (uint32_t)bf16_rn(v.x) | ((uint32_t)bf16_rn(v.y) << 16);
                o.y = (uint32_t)bf16_rn(v.z) | ((uint32_t)bf16_rn(v.w) << 16);
                ((uint2 *)dr)[c] = o;
            }
        } else {
            for (int c = c0; c < dcols; c += step)
                dr[c] = r < rows && c < cols ? bf16_rn(sr[c]) : (uint16_t)0;
        }
    }
}

/* dst[i] = bf16(src[i]) for n4 runs of four: a packed matrix without
 * margins, as one flat run */
static __global__ void to_bf16_flat_kernel(uint2 *dst, const float4 *src, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = src[i];
        uint2 o;
        o.x = (uint32_t)bf16_rn(v.x) | ((uint32_t)bf16_rn(v.y) << 16);
        o.y = (uint32_t)bf16_rn(v.z) | ((uint32_t)bf16_rn(v.w) << 16);
        dst[i] = o;
    }
}

/* queues the rounding of src (rows, cols; ld) into dst (drows, dcols; ldd)
 * (its time a part of the op's in the profile) */
static void to_bf16(const rumor_device_t *d, uint16_t *dst, int drows, int dcols, int ldd,
                    const float *src, int rows, int cols, int ld)
{
    CU_PART(d, "cu_bf16_round");
    cudaStream_t st = cu_of(d)->cur;
    size_t n = (size_t)rows * (size_t)cols;
    if (drows == rows && dcols == cols && ld == cols && ldd == cols && n % 4 == 0 &&
        ((uintptr_t)src & 15) == 0 && ((uintptr_t)dst & 7) == 0) {
        CU_LAUNCH(to_bf16_flat_kernel, cu_blocks(n / 4, 256), 256, 0, st, (uint2 *)dst,
                  (const float4 *)src, n / 4);
        return;
    }
    unsigned bx = (unsigned)((dcols / 4 + 255) / 256), by = (unsigned)drows;
    if (bx < 1)
        bx = 1;
    if (bx > 64)
        bx = 64;
    if (by > 16384)
        by = 16384;
    if (by < 1)
        by = 1;
    CU_LAUNCH(to_bf16_kernel, dim3(bx, by), 256, 0, st, dst, drows, dcols, ldd, src, rows, cols,
              ld);
}

/* dst (rows, cols; ldd) = src (rows, cols; lds), fp32: a block's threads
 * along a row, blocks down the rows */
static __global__ void copy2d_kernel(float *dst, int ldd, const float *src, int lds, int rows,
                                     int cols)
{
    int step = gridDim.x * blockDim.x, c0 = blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = blockIdx.y; r < rows; r += gridDim.y)
        for (int c = c0; c < cols; c += step)
            dst[(size_t)r * ldd + c] = src[(size_t)r * lds + c];
}

static void copy2d(const rumor_device_t *d, float *dst, int ldd, const float *src, int lds,
                   int rows, int cols)
{
    CU_PART(d, "cu_gemm_out_copy");
    cudaStream_t st = cu_of(d)->cur;
    unsigned bx = (unsigned)((cols + 255) / 256), by = (unsigned)(rows < 16384 ? rows : 16384);
    if (bx > 64)
        bx = 64;
    CU_LAUNCH(copy2d_kernel, dim3(bx ? bx : 1, by ? by : 1), 256, 0, st, dst, ldd, src, lds, rows,
              cols);
}

/* The device's bf16 scratch holds `need` elements (grown outside the
 * stream's work in flight: it may still be read); NULL on a failure
 * (kept). */
static uint16_t *bf16_scratch(rumor_device_t *d, size_t need)
{
    cu_ctx *x = cu_of(d);
    if (need <= x->bf16_cap)
        return x->bf16;
    if (x->bf16) {
        CU_KEEP(d, cudaStreamSynchronize(x->cur));
        cudaFree(x->bf16);
        x->bf16 = NULL;
        x->bf16_cap = 0;
    }
    cudaError_t e = cudaMalloc((void **)&x->bf16, need * sizeof(uint16_t));
    CU_COUNT(d, n_malloc);
    if (e != cudaSuccess) {
        x->bf16 = NULL;
        cudaGetLastError(); /* not a failure of the op: the slower path runs */
        return NULL;
    }
    x->bf16_cap = need;
    return x->bf16;
}

void cu_matmul_free(cu_ctx *x)
{
    if (x->bf16)
        cudaFree(x->bf16);
    x->bf16 = NULL;
    x->bf16_cap = 0;
}

int cu_bf16_pair(rumor_device_t *d, const float *a, int ar, int ac, int lda, const float *b,
                 int br, int bc, int ldb, const uint16_t **a16, const uint16_t **b16)
{
    size_t na = (size_t)ar * ac, nb = (size_t)br * bc, na_pad = (na + 7) & ~(size_t)7;
    if (na_pad + nb > CU_BF16_SCRATCH)
        return -1;
    uint16_t *s = bf16_scratch(d, na_pad + nb);
    if (!s)
        return -1;
    to_bf16(d, s, ar, ac, ac, a, ar, ac, lda);
    to_bf16(d, s + na_pad, br, bc, bc, b, br, bc, ldb);
    CU_LAUNCHED(d, "gemm: inputs to bf16");
    *a16 = s;
    *b16 = s + na_pad;
    return 0;
}

static size_t round8(size_t v) { return (v + 7) & ~(size_t)7; }

/* C = alpha op(A) op(B) + beta C with A and B rounded to bf16 first, into
 * the scratch with n and k rounded up to 8s, zeros in the margins, and
 * leading dimensions of 8s (cuBLAS's fast bf16 kernels want them: a
 * classifier over 50257 words ran at a sixth of the others' rate); the
 * output is made there (fp32) when n or ldc is not a multiple of 8, and
 * copied out. Rows of C (and of op(A)) go in chunks that fit the scratch
 * with B. 0, or -1 when not even 64 rows fit (the caller multiplies as
 * fp32). */
static int gemm_bf16(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    cu_ctx *x = cu_of(d);
    size_t n8 = round8((size_t)n), k8 = round8((size_t)k);
    /* B as stored, row-major: (k, n), or (n, k) transposed; padded */
    int br = tb ? n : k, bc = tb ? k : n, bpr = (int)(tb ? n8 : k8), bpc = (int)(tb ? k8 : n8);
    size_t nb = round8((size_t)bpr * bpc);
    int pad_out = ldc % 8 != 0 || n % 8 != 0;
    /* bf16 elements a row of C needs: its row of op(A), its row of the
     * fp32 output */
    size_t per_row = k8 + (pad_out ? 2 * n8 : 0);
    if (nb + 64 * per_row + 64 > CU_BF16_SCRATCH)
        return -1;
    size_t mc = (CU_BF16_SCRATCH - nb - 64) / per_row;
    if (mc > (size_t)m)
        mc = (size_t)m;
    if (mc < (size_t)m) /* a chunk's rows a multiple of 8 */
        mc &= ~(size_t)7;
    size_t mc8 = round8(mc), na = round8(mc8 * k8);
    uint16_t *s = bf16_scratch(d, nb + na + (pad_out ? 2 * mc * n8 : 0));
    if (!s)
        return -1;
    uint16_t *b16 = s, *a16 = s + nb;
    float *out = pad_out ? (float *)(s + nb + na) : NULL;
    to_bf16(d, b16, bpr, bpc, bpc, b, br, bc, ldb);
    for (int m0 = 0; m0 < m; m0 += (int)mc) {
        int rows = m - m0 < (int)mc ? m - m0 : (int)mc, ald;
        if (ta) { /* columns m0.. of the stored (k, m) A, as (k8, rows8) */
            ald = (int)round8((size_t)rows);
            to_bf16(d, a16, (int)k8, ald, ald, a + m0, k, rows, lda);
        } else { /* rows m0.. of the stored (m, k) A, as (rows, k8) */
            ald = (int)k8;
            to_bf16(d, a16, rows, ald, ald, a + (size_t)m0 * lda, rows, k, lda);
        }
        float *cc = c + (size_t)m0 * ldc, *dst = pad_out ? out : cc;
        int ldd = pad_out ? (int)n8 : ldc;
        if (pad_out && beta != 0.0f)
            copy2d(d, out, ldd, cc, ldc, rows, n);
        CU_LAUNCHED(d, "gemm: inputs to bf16");
        CUBLAS_KEEP(d, cublasGemmEx(x->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n8, rows, (int)k8, &alpha,
                                    b16, CUDA_BF16_TYPE, bpc, a16, CUDA_BF16_TYPE, ald, &beta, dst,
                                    CUDA_R_32F, ldd, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        if (pad_out) {
            copy2d(d, cc, ldc, out, ldd, rows, n);
            CU_LAUNCHED(d, "gemm: output rows");
        }
    }
    return 0;
}

void cu_gemm(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha, const float *a,
             int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    CU_ENTER(d);
    if (cu_profiling == 1) {
        const char *shape = cu_prof_shape("cu_gemm %c%c %dx%dx%d", ta ? 'T' : 'N',
                                          tb ? 'T' : 'N', m, n, k);
        if (shape)
            cu_op_scope_.name = shape;
    }
    cu_ctx *x = cu_of(d);
    if (d->precision == RUMOR_PREC_BF16 && k > 0 &&
        gemm_bf16(d, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0)
        return;
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

/* sum_rows, deterministic in two passes: part[k][c] = the sum of dy's
 * column c over row chunk k (a block per 32 columns, or 32 float4 columns,
 * and a chunk; its 8 rows of threads stride the chunk and are added in row
 * order), then db[c] = beta db[c] + the chunks' sums in chunk order. */
#define SR_Y 8
static __global__ void sum_rows_part4(float4 *part, const float4 *dy, int rows, int cols4,
                                      int chunk)
{
    __shared__ float4 sh[SR_Y][32];
    int c = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * chunk, r1 = rows < r0 + chunk ? rows : r0 + chunk;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c < cols4)
        for (int r = r0 + threadIdx.y; r < r1; r += SR_Y) {
            float4 v = dy[(size_t)r * cols4 + c];
            acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
        }
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols4) {
        for (int y = 1; y < SR_Y; y++) {
            float4 v = sh[y][threadIdx.x];
            acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
        }
        part[(size_t)blockIdx.y * cols4 + c] = acc;
    }
}

static __global__ void sum_rows_part(float *part, const float *dy, int rows, int cols, int chunk)
{
    __shared__ float sh[SR_Y][32];
    int c = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * chunk, r1 = rows < r0 + chunk ? rows : r0 + chunk;
    float acc = 0.0f;
    if (c < cols)
        for (int r = r0 + threadIdx.y; r < r1; r += SR_Y)
            acc += dy[(size_t)r * cols + c];
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        for (int y = 1; y < SR_Y; y++)
            acc += sh[y][threadIdx.x];
        part[(size_t)blockIdx.y * cols + c] = acc;
    }
}

static __global__ void sum_rows_final(float *db, const float *part, int cols, int chunks,
                                      float beta)
{
    for (size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x; c < (size_t)cols;
         c += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int k = 0; k < chunks; k++)
            s += part[(size_t)k * cols + c];
        /* beta 0 clears what was there (a NaN too), as the CPU's memset */
        db[c] = beta == 0.0f ? s : beta * db[c] + s;
    }
}

/* db (cols) = beta db + the column sums of dy (rows, cols) */
void cu_sum_rows(rumor_device_t *d, float *db, const float *dy, int rows, int cols, float beta)
{
    if (cols <= 0)
        return;
    CU_ENTER(d);
    cu_ctx *x = cu_of(d);
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
    int vec = cols % 4 == 0 && ((uintptr_t)dy & 15) == 0;
    int width = vec ? cols / 4 : cols, colblocks = (width + 31) / 32;
    /* enough chunks for four blocks a multiprocessor, each at least 64 rows,
     * their sums within the device's scratch */
    long want = ((long)x->sm_count * 4 + colblocks - 1) / colblocks;
    long most = (long)(CU_SR_PART / (size_t)cols);
    long chunks = want < (rows + 63) / 64 ? want : (rows + 63) / 64;
    if (chunks > most)
        chunks = most;
    if (chunks > 65535)
        chunks = 65535;
    if (chunks < 1)
        chunks = 1;
    int chunk = (int)((rows + chunks - 1) / chunks);
    chunks = (rows + chunk - 1) / chunk;
    dim3 grid((unsigned)colblocks, (unsigned)chunks), block(32, SR_Y);
    if (vec)
        CU_LAUNCH(sum_rows_part4, grid, block, 0, x->cur, (float4 *)x->sr_part,
                  (const float4 *)dy, rows, width, chunk);
    else
        CU_LAUNCH(sum_rows_part, grid, block, 0, x->cur, x->sr_part, dy, rows, cols, chunk);
    CU_LAUNCH(sum_rows_final, cu_blocks((size_t)cols, 256), 256, 0, x->cur, db, x->sr_part, cols,
              (int)chunks, beta);
    CU_LAUNCHED(d, "sum_rows");
}

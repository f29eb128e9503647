/* CUDA's names over AMD's HIP-CPU runtime, and the cuBLAS calls rumor makes
 * over CBLAS: the CUDA backend's kernels built with g++ and run on the CPU
 * (configure --with-cuda-emu=HIPCPU_DIR; see README.md here). A developer's
 * check of the kernels' indexing, reductions and host logic where no GPU is
 * at hand; it says nothing of their speed and is no substitute for a run on
 * a GPU. Included by kernels/cuda/cuda_compat.h only under RUMOR_CUDA_EMU. */
#ifndef RUMOR_CUDA_EMU_H
#define RUMOR_CUDA_EMU_H

#include <hip/hip_runtime.h>

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <thread>
#include <vector>

/* ---- runtime */
typedef hipError_t cudaError_t;
typedef hipStream_t cudaStream_t;
typedef hipEvent_t cudaEvent_t;
typedef hipDeviceProp_t cudaDeviceProp;
#define cudaSuccess hipSuccess
#define cudaErrorNotSupported hipErrorNotSupported
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy hipMemcpy
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventDestroy hipEventDestroy
#define cudaEventCreate hipEventCreate
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventRecord hipEventRecord
/* An event never recorded is done, as CUDA has it (HIP-CPU calls it an
 * invalid handle) */
static inline hipError_t cudaEventSynchronize(hipEvent_t e)
{
    hipError_t r = hipEventSynchronize(e);
    return r == hipErrorInvalidHandle && e ? hipSuccess : r;
}
/* HIP-CPU has no hipEventQuery: the emulation answers "done" after waiting,
 * which is a correct (if never pending) answer */
#define cudaErrorNotReady hipErrorNotReady
static inline hipError_t cudaEventQuery(hipEvent_t e) { return cudaEventSynchronize(e); }
/* HIP-CPU runs every stream's queue on one processor thread, so a queue
 * that waits for an event recorded later in another queue deadlocks it: the
 * emulation waits for the event on the host instead (a stronger order) */
static inline hipError_t cudaStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags)
{
    (void)s, (void)flags;
    return cudaEventSynchronize(e);
}
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaFreeHost hipHostFree

static inline hipError_t cudaMallocHost(void **p, size_t n) { return hipHostMalloc(p, n); }

/* one emulated GPU, of compute capability 9.0 */
static inline hipError_t cudaGetDeviceProperties(cudaDeviceProp *p, int index)
{
    hipError_t e = hipGetDeviceProperties(p, index);
    snprintf(p->name, sizeof p->name, "HIP-CPU emulation");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = (int)std::thread::hardware_concurrency();
    return e;
}

static inline hipError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n,
                                             hipStream_t s)
{
    (void)dd;
    (void)sd;
    return hipMemcpyAsync(dst, src, n, hipMemcpyDeviceToDevice, s);
}

/* ---- warp shuffles. HIP-CPU's own exchange through a scratchpad indexed by
 * the lane modulo its warp size of 64, which blocks of more than 64 threads
 * overwrite. This one keeps a slot a thread, in the block's shared memory
 * (HIP-CPU's __shared__ is one per worker thread, which runs a block's
 * fibers). Like HIP-CPU's, it is a barrier of the whole block: every thread
 * of the block must reach each shuffle (the CUDA code keeps its warp
 * operations in control flow uniform over the block for this). */
template <typename T> static inline T emu_shfl_xor(T v, int mask)
{
    __shared__ T slot[1024];
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    slot[t] = v;
    __syncthreads();
    T r = slot[t ^ (unsigned)mask];
    __syncthreads();
    return r;
}

/* ---- cuBLAS over CBLAS: each call waits for its stream, then computes */
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
struct emu_blas {
    hipStream_t stream;
};
typedef emu_blas *cublasHandle_t;

static inline cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = new emu_blas{ nullptr };
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetStream(cublasHandle_t h, hipStream_t s)
{
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

static inline CBLAS_TRANSPOSE emu_op(cublasOperation_t o) { return o == CUBLAS_OP_T ? CblasTrans : CblasNoTrans; }

/* the tensor cores' rounding of an input: tf32 keeps 10 mantissa bits, bf16
 * 7, each rounded to nearest even */
static inline float emu_round(float v, int drop)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return v;
    uint32_t half = 1u << (drop - 1), lsb = (u >> drop) & 1u;
    u = (u + half - 1 + lsb) & ~((1u << drop) - 1);
    memcpy(&v, &u, 4);
    return v;
}

/* a column-major (rows, cols) operand with leading dimension ld, rounded */
static inline const float *emu_rounded(const float *a, int rows, int cols, int ld,
                                       cublasComputeType_t ct, std::vector<float> &buf)
{
    int drop = ct == CUBLAS_COMPUTE_32F_FAST_TF32 ? 13 : ct == CUBLAS_COMPUTE_32F_FAST_16BF ? 16 : 0;
    if (!drop)
        return a;
    buf.assign((size_t)ld * cols, 0.0f);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            buf[(size_t)j * ld + i] = emu_round(a[(size_t)j * ld + i], drop);
    return buf.data();
}

/* a column-major (rows, cols) bf16 operand with leading dimension ld, as
 * floats */
static inline void emu_widen(const void *a, int rows, int cols, int ld, std::vector<float> &buf)
{
    const uint16_t *h = (const uint16_t *)a;
    buf.assign((size_t)ld * cols, 0.0f);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++) {
            uint32_t u = (uint32_t)h[(size_t)j * ld + i] << 16;
            memcpy(&buf[(size_t)j * ld + i], &u, 4);
        }
}

static inline cublasStatus_t emu_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                      int m, int n, int k, const float *alpha, const float *a,
                                      int lda, const float *b, int ldb, const float *beta, float *c,
                                      int ldc, cublasComputeType_t ct)
{
    std::vector<float> ra, rb;
    const float *A = emu_rounded(a, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda, ct, ra);
    const float *B = emu_rounded(b, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb, ct, rb);
    cblas_sgemm(CblasColMajor, emu_op(ta), emu_op(tb), m, n, k, *alpha, A, lda, B, ldb, *beta, c, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

static inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *a, cudaDataType at, int lda,
                                          const void *b, cudaDataType bt, int ldb, const void *beta,
                                          void *c, cudaDataType ct_, int ldc,
                                          cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
    (void)ct_, (void)algo;
    if (m < 0 || n < 0 || k < 0 || at != bt)
        return CUBLAS_STATUS_INVALID_VALUE;
    hipStreamSynchronize(h->stream);
    std::vector<float> fa, fb;
    if (at == CUDA_R_16BF) { /* bf16 inputs, widened: the products are exact in fp32 */
        emu_widen(a, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda, fa);
        emu_widen(b, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb, fb);
        a = fa.data(), b = fb.data();
    }
    return emu_gemm(h, ta, tb, m, n, k, (const float *)alpha, (const float *)a, lda,
                    (const float *)b, ldb, (const float *)beta, (float *)c, ldc, ct);
}

static inline cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *a, cudaDataType at, int lda, long long sa, const void *b,
    cudaDataType bt, int ldb, long long sb, const void *beta, void *c, cudaDataType ct_, int ldc,
    long long sc, int batch, cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
    (void)at, (void)bt, (void)ct_, (void)algo;
    if (m < 0 || n < 0 || k < 0 || batch < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    hipStreamSynchronize(h->stream);
    for (int i = 0; i < batch; i++)
        emu_gemm(h, ta, tb, m, n, k, (const float *)alpha, (const float *)a + i * sa, lda,
                 (const float *)b + i * sb, ldb, (const float *)beta, (float *)c + i * sc, ldc, ct);
    return CUBLAS_STATUS_SUCCESS;
}

static inline cublasStatus_t cublasSgemv(cublasHandle_t h, cublasOperation_t t, int m, int n,
                                         const float *alpha, const float *a, int lda,
                                         const float *x, int incx, const float *beta, float *y,
                                         int incy)
{
    hipStreamSynchronize(h->stream);
    cblas_sgemv(CblasColMajor, emu_op(t), m, n, *alpha, a, lda, x, incx, *beta, y, incy);
    return CUBLAS_STATUS_SUCCESS;
}

static inline cublasStatus_t cublasSscal(cublasHandle_t h, int n, const float *alpha, float *x,
                                         int incx)
{
    hipStreamSynchronize(h->stream);
    cblas_sscal(n, *alpha, x, incx);
    return CUBLAS_STATUS_SUCCESS;
}

#endif

/* The CUDA backend's internals, shared by its source files (not installed).
 *
 * Each op family has one source file (cuda_matmul.cu, cuda_eltwise.cu, ...):
 * kernel -> launcher on the device's current stream -> the table entry
 * declared here. cuda_device.cu builds the table (rumor_cuda_ops) and owns
 * the device's context.
 *
 * Errors. Ops that return int report failures at once (RUMOR_CUDA_CHECK and
 * friends: the call, the CUDA error and file:line). The math ops return void
 * and run asynchronously: their launch errors, and cuBLAS's, are kept as the
 * device's first failure (CU_LAUNCHED, CU_KEEP, CUBLAS_KEEP), which the next
 * sync, stream_sync, download or reduction returns (as the CPU's ops cannot
 * fail there, callers need not check after every op). */
#ifndef RUMOR_CUDA_INT_H
#define RUMOR_CUDA_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_compat.h"
#include "err.h"
#include "ops.h"

#define CU_PROF_MAX 128 /* entries of a device's profile */

typedef struct cu_ctx {
    int index;
    cudaStream_t stream;   /* the device's own stream (NULL rumor_stream_t) */
    cudaStream_t cur;      /* where math ops are queued (set_stream) */
    cublasHandle_t blas;   /* bound to cur */
    int cc_major, cc_minor;
    int sm_count;
    /* reductions: per-block partial sums on the device, the result in pinned
     * host memory */
    double *red;           /* (CU_RED_BLOCKS + 1) x 2 doubles */
    double *red_host;      /* 2 doubles, page-locked */
    float *sr_part;        /* (CU_SR_PART) column sums of row chunks: sum_rows',
                            * layernorm_backward_w's (made at open) */
    uint16_t *bf16;        /* (bf16_cap) bf16 inputs of a GEMM (cuda_matmul.cu) */
    size_t bf16_cap;
    /* cuda_lt.cu: the cuBLASLt handle and workspace, made at the first use;
     * lt_off: none (RUMOR_CUDA_NO_LT=1, or they could not be made);
     * lt_dgelu: the backward's DGELU epilogue too (RUMOR_CUDA_LT_DGELU=1) */
    void *lt, *lt_ws;
    int lt_off, lt_dgelu;
    /* what stalled the host or the GPU (rumor_dev_counters_t; atomics: a
     * link may wait on a device's stream from another stage's thread) */
    long n_malloc, n_free, n_device_sync, n_host_wait;
    /* RUMOR_CUDA_PROFILE=1: each op's time and calls, by name (under mu) */
    struct cu_prof {
        const char *name;
        double first; /* the first call's ms: loading kernels, growing scratch */
        double ms;    /* the later calls' */
        long calls;   /* the later calls */
    } prof[CU_PROF_MAX];
    int nprof;
    /* the first failure of an asynchronous op since the last report (under
     * mu: a pipeline's link may sync a device from another stage's thread) */
    pthread_mutex_t mu;
    int failed;
    char why[320];
} cu_ctx;

/* Rows of sum_rows' vector of ones: one GEMV a chunk of this many rows. */
#define CU_SR_PART ((size_t)4 << 20) /* floats: 16 MiB */

/* Counts a stall of d (cu_ctx's n_* fields) */
#define CU_COUNT(d, field) __atomic_fetch_add(&cu_of(d)->field, 1L, __ATOMIC_RELAXED)

/* Grid of the reductions (axpy_dist, sumsq): enough blocks to fill a GPU,
 * few enough that one block adds their partial sums. */
#define CU_RED_BLOCKS 1024
#define CU_RED_THREADS 256

static inline cu_ctx *cu_of(const rumor_device_t *d) { return (cu_ctx *)d->ctx; }

/* Makes d's GPU current on the calling thread (a cached check: pipeline
 * workers each drive their own device). */
void cu_enter(const rumor_device_t *d);

/* Every op begins with CU_ENTER(d): it makes d's GPU current and, when the
 * environment sets RUMOR_CUDA_PROFILE=1, times the op with events on its
 * stream (waiting for each: a profile says where a step's time goes, at the
 * price of the overlap) and adds it to the device's profile, which
 * rumor_cuda_close prints to stderr. An op called from another op counts
 * once, as the outer one. */
extern int cu_profiling;
struct cu_op_scope {
    const rumor_device_t *d;
    const char *name;
    cudaEvent_t e0;
    int on;
    cu_op_scope(const rumor_device_t *dev, const char *op);
    ~cu_op_scope();
};
#define CU_ENTER(d) cu_op_scope cu_op_scope_((d), __func__)

/* A part of an op's work timed on its own in the profile (the bf16
 * rounding of a product's inputs, the copy of its padded output): its time
 * is the part's, taken off the op's. Nothing without RUMOR_CUDA_PROFILE, or
 * outside an op. */
struct cu_part_scope {
    const rumor_device_t *d;
    const char *name;
    cudaEvent_t e0;
    int on;
    cu_part_scope(const rumor_device_t *dev, const char *part);
    ~cu_part_scope();
};
#define CU_PART(d, name) cu_part_scope cu_part_scope_((d), (name))

/* RUMOR_CUDA_PROFILE=shapes: a name for the op's entry that says its
 * shape ("cu_gemm NT 8192x768x50257"), kept for the process; NULL when
 * the profile is not by shape or has no room */
const char *cu_prof_shape(const char *fmt, ...);

/* Keeps the first failure of an asynchronous op (what, where); no-op on
 * success. */
void cu_keep(const rumor_device_t *d, cudaError_t e, const char *what, const char *file,
             int line);
void cu_keep_blas(const rumor_device_t *d, cublasStatus_t s, const char *what, const char *file,
                  int line);
#define CU_KEEP(d, call) cu_keep((d), (call), #call, __FILE__, __LINE__)
#define CUBLAS_KEEP(d, call) cu_keep_blas((d), (call), #call, __FILE__, __LINE__)
/* after a kernel launch */
#define CU_LAUNCHED(d, name) cu_keep((d), cudaGetLastError(), (name), __FILE__, __LINE__)

/* Reports (and forgets) the device's kept failure as a rumor error. */
int cu_report(const rumor_device_t *d);

const char *cu_blas_status(cublasStatus_t s);

/* Passes a failing CUDA or cuBLAS call up as RUMOR_ECUDA with the call,
 * the library's message and file:line (NCCL's in cuda_nccl.cu). */
#define RUMOR_CUDA_CHECK(call)                                                                  \
    do {                                                                                        \
        cudaError_t rumor_cu_e_ = (call);                                                       \
        if (rumor_cu_e_ != cudaSuccess)                                                         \
            return rumor_err_set_at(__FILE__, __LINE__, RUMOR_ECUDA, "%s: %s", #call,           \
                                    cudaGetErrorString(rumor_cu_e_));                           \
    } while (0)
#define RUMOR_CUBLAS_CHECK(call)                                                                \
    do {                                                                                        \
        cublasStatus_t rumor_cb_s_ = (call);                                                    \
        if (rumor_cb_s_ != CUBLAS_STATUS_SUCCESS)                                               \
            return rumor_err_set_at(__FILE__, __LINE__, RUMOR_ECUDA, "%s: %s", #call,           \
                                    cu_blas_status(rumor_cb_s_));                               \
    } while (0)

/* Blocks of `threads` covering n elements, capped (grid-stride loops do
 * the rest). */
static inline unsigned cu_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    if (b > 65535u * 16u)
        b = 65535u * 16u;
    return b ? (unsigned)b : 1u;
}

/* ---- the ops (signatures as in rumor_ops_t) */

/* cuda_device.cu: memory and plumbing */
void *cu_alloc(rumor_device_t *d, size_t bytes);
void cu_free(rumor_device_t *d, void *p);
int cu_upload(rumor_device_t *d, void *dst, const void *src, size_t bytes);
int cu_download(rumor_device_t *d, void *dst, const void *src, size_t bytes);
int cu_copy(rumor_device_t *d, void *dst, const void *src, size_t bytes);
int cu_sync(rumor_device_t *d);

/* cuda_matmul.cu */
void cu_matmul_free(cu_ctx *x); /* the GEMMs' scratch */
/* Rounds row-major a (ar, ac; lda) and b (br, bc; ldb) to bf16, packed (ld
 * ac and bc), into the device's GEMM scratch, on its stream: 0 with *a16
 * and *b16 set (valid until the next call), -1 when they do not fit. */
int cu_bf16_pair(rumor_device_t *d, const float *a, int ar, int ac, int lda, const float *b,
                 int br, int bc, int ldb, const uint16_t **a16, const uint16_t **b16);
void cu_gemm(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha, const float *a,
             int lda, const float *b, int ldb, float beta, float *c, int ldc);
void cu_gemm_batched(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                     float beta, float *c, int ldc, long long sc, int batch);
void cu_add_bias(rumor_device_t *d, float *y, const float *bias, int rows, int cols);
void cu_sum_rows(rumor_device_t *d, float *db, const float *dy, int rows, int cols, float beta);

/* cuda_lt.cu: GEMMs with cuBLASLt epilogues */
void cu_gemm_bias_gelu(rumor_device_t *d, float *y, float *pre, const float *x, const float *w,
                       const float *bias, int rows, int in, int out);
void cu_gemm_dgelu(rumor_device_t *d, float *dx, const float *dy, const float *w, const float *pre,
                   int rows, int in, int out);
void cu_lt_free(cu_ctx *x);

/* cuda_eltwise.cu */
void cu_axpy(rumor_device_t *d, float *y, float a, const float *x, size_t n);
void cu_scale(rumor_device_t *d, float *y, float a, size_t n);
void cu_fill(rumor_device_t *d, float *y, float v, size_t n);
void cu_add(rumor_device_t *d, float *y, const float *a, const float *b, size_t n);
void cu_axpby(rumor_device_t *d, float *y, float a, const float *x, float b, size_t n);
void cu_relu_forward(rumor_device_t *d, float *y, const float *x, size_t n);
void cu_relu_backward(rumor_device_t *d, float *dx, const float *x, const float *dy, size_t n);
void cu_gelu_forward(rumor_device_t *d, float *y, const float *x, size_t n);
void cu_gelu_backward(rumor_device_t *d, float *dx, const float *x, const float *dy, size_t n);
void cu_dropout_forward(rumor_device_t *d, float *y, const float *x, size_t n, float p,
                        uint64_t seed);
void cu_dropout_backward(rumor_device_t *d, float *dx, const float *dy, size_t n, float p,
                         uint64_t seed);

/* cuda_reduce.cu */
int cu_axpy_dist(rumor_device_t *d, float *y, float a, const float *x, size_t n, double *sqdist);
int cu_sumsq(rumor_device_t *d, const float *x, size_t n, double *out, size_t *nonfinite);

/* cuda_optim.cu */
void cu_sgd_step(rumor_device_t *d, float *p, float *mom, const float *g, size_t n, float lr,
                 float momentum, float wd, int nesterov);
void cu_adamw_step(rumor_device_t *d, float *p, float *m, float *v, const float *g, size_t n,
                   float lr, float b1, float b2, float eps, float wd, float bc1, float bc2);

/* cuda_xent.cu */
void cu_softmax_xent(rumor_device_t *d, float *logits, float *losses, const int32_t *labels,
                     int rows, int classes, float scale, int grad);

/* cuda_layernorm.cu */
void cu_layernorm_forward(rumor_device_t *d, float *y, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int rows, int C, float eps);
void cu_layernorm_backward_x(rumor_device_t *d, float *dx, const float *dy, const float *x,
                             const float *w, const float *mean, const float *rstd, int rows, int C,
                             int accumulate);
void cu_layernorm_backward_w(rumor_device_t *d, float *dw, float *db, const float *dy,
                             const float *x, const float *mean, const float *rstd, int rows, int C);

/* cuda_attention.cu */
void cu_attention_forward(rumor_device_t *d, float *out, float *lse, const float *qkv, int B,
                          int T, int C, int NH);
void cu_attention_backward(rumor_device_t *d, float *dqkv, const float *dout, const float *qkv,
                           const float *out, const float *lse, int B, int T, int C, int NH);

/* cuda_embed.cu */
void cu_embed_forward(rumor_device_t *d, float *out, const int32_t *tok, const float *wte,
                      const float *wpe, int B, int T, int C);
void cu_embed_backward(rumor_device_t *d, float *dwte, float *dwpe, const float *dout,
                       const int32_t *tok, int B, int T, int C, int V);

/* cuda_nccl.cu (built with NCCL): cliques of GPUs, one communicator a GPU */
int cu_clique_open(rumor_device_t *const *devs, int n, rumor_clique_t **out);
void cu_clique_close(rumor_clique_t *c);
int cu_clique_copy(rumor_clique_t *c, rumor_device_t *dd, void *dst, rumor_stream_t *ds,
                   rumor_device_t *sd, const void *src, rumor_stream_t *ss, size_t bytes);

/* The dropout generator of ops.h (rumor_rand_uniform), on the device: the
 * same bits for the same (seed, index), so every backend draws one mask. */
static __device__ __forceinline__ float cu_rand_uniform(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* Sum over a warp's 32 lanes (every lane gets it). */
template <typename T> static __device__ __forceinline__ T cu_warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += CU_SHFL_XOR(v, o);
    return v;
}
template <typename T> static __device__ __forceinline__ T cu_warp_max(T v)
{
    for (int o = 16; o > 0; o >>= 1) {
        T u = CU_SHFL_XOR(v, o);
        v = u > v ? u : v;
    }
    return v;
}

#endif

/* Devices and their ops tables.
 *
 * A device is the CPU or CUDA:n. Each device kind has one table of function
 * pointers (rumor_ops_t) picked when the device is opened; the layers, the
 * optimizers and the gossip mixer call compute only through it, so the same
 * model code runs on every backend. The CPU table is the reference: every
 * other backend is tested against it.
 *
 * Pointers passed to the math ops are device memory from ops->alloc. Matrices
 * are row-major. Math ops are asynchronous on devices that queue work (CUDA);
 * ops->sync waits and reports the first failure. On the CPU they run at once. */
#ifndef RUMOR_OPS_H
#define RUMOR_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RUMOR_DEV_CPU = 0, RUMOR_DEV_CUDA = 1 } rumor_dev_kind;

typedef struct rumor_device rumor_device_t;

typedef struct rumor_ops {
    const char *name;

    /* ---- memory. alloc returns zeroed memory, or NULL with the error set. */
    void *(*alloc)(rumor_device_t *d, size_t bytes);
    void (*free)(rumor_device_t *d, void *p);
    int (*upload)(rumor_device_t *d, void *dst, const void *host_src, size_t bytes);
    int (*download)(rumor_device_t *d, void *host_dst, const void *src, size_t bytes);
    int (*copy)(rumor_device_t *d, void *dst, const void *src, size_t bytes);
    int (*sync)(rumor_device_t *d);

    /* ---- dense algebra. C (m,n) = alpha * op(A) (m,k) * op(B) (k,n) + beta * C */
    void (*gemm)(rumor_device_t *d, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
    /* y (rows,cols) += bias (cols) broadcast over rows */
    void (*add_bias)(rumor_device_t *d, float *y, const float *bias, int rows, int cols);
    /* db (cols) = beta * db + sum over rows of dy (rows,cols) */
    void (*sum_rows)(rumor_device_t *d, float *db, const float *dy, int rows, int cols, float beta);
    /* y = y + a * x */
    void (*axpy)(rumor_device_t *d, float *y, float a, const float *x, size_t n);
    /* y = a * y */
    void (*scale)(rumor_device_t *d, float *y, float a, size_t n);

    /* ---- activations. backward reads the forward input x. dx may alias dy. */
    void (*relu_forward)(rumor_device_t *d, float *y, const float *x, size_t n);
    void (*relu_backward)(rumor_device_t *d, float *dx, const float *x, const float *dy, size_t n);
    /* GELU, tanh approximation (as in GPT-2). */
    void (*gelu_forward)(rumor_device_t *d, float *y, const float *x, size_t n);
    void (*gelu_backward)(rumor_device_t *d, float *dx, const float *x, const float *dy, size_t n);
    /* Inverted dropout: y = x * keep / (1-p), keep drawn from a counter-based
     * generator keyed by (seed, index), so backward recomputes the mask
     * instead of storing it and every backend draws the same mask. */
    void (*dropout_forward)(rumor_device_t *d, float *y, const float *x, size_t n, float p,
                            uint64_t seed);
    void (*dropout_backward)(rumor_device_t *d, float *dx, const float *dy, size_t n, float p,
                             uint64_t seed);

    /* ---- loss. probs (B,C) = softmax(logits); losses (B) = -log probs[label].
     * Labels must be in [0, C): callers validate them (data.c does). */
    void (*softmax_xent_forward)(rumor_device_t *d, float *probs, float *losses,
                                 const float *logits, const int32_t *labels, int batch,
                                 int classes);
    /* dlogits = scale * (probs - onehot(labels)) */
    void (*softmax_xent_backward)(rumor_device_t *d, float *dlogits, const float *probs,
                                  const int32_t *labels, int batch, int classes, float scale);

    /* ---- optimizer updates over a contiguous range of the flat buffers.
     * SGD (PyTorch semantics): g' = g + wd*p; m = mu*m + g'; step = nesterov ?
     * g' + mu*m : m; p -= lr*step. AdamW (decoupled decay): p -= lr*wd*p;
     * m = b1*m + (1-b1)g; v = b2*v + (1-b2)g^2; p -= lr * (m/bc1) /
     * (sqrt(v/bc2) + eps), with bc1 = 1-b1^t, bc2 = 1-b2^t. */
    void (*sgd_step)(rumor_device_t *d, float *p, float *mom, const float *g, size_t n, float lr,
                     float momentum, float wd, int nesterov);
    void (*adamw_step)(rumor_device_t *d, float *p, float *m, float *v, const float *g, size_t n,
                       float lr, float b1, float b2, float eps, float wd, float bc1, float bc2);
} rumor_ops_t;

struct rumor_device {
    rumor_dev_kind kind;
    int index;            /* CUDA ordinal; 0 for the CPU */
    int nthreads;         /* CPU threads this device may use (BLAS and workers) */
    const rumor_ops_t *ops;
    void *ctx;            /* backend state (cuBLAS handle, stream, ...) */
    char name[64];        /* "cpu (2 threads, OpenBLAS SkylakeX)", "cuda:0 (NVIDIA H100)" */
};

/* Opens a device from a spec: "cpu", "cpu:N" (N threads; default all cores),
 * "cuda", "cuda:N", or "auto" (the first GPU if one is present, else the CPU).
 * Asking for CUDA where it is not built or no GPU is present is an error;
 * "auto" quietly falls back to the CPU. */
int rumor_device_open(const char *spec, rumor_device_t **out) RUMOR_WUR;

/* Releases a device and sets *dp to NULL; safe to call twice. */
void rumor_device_close(rumor_device_t **dp);

/* Number of usable devices of a kind (CUDA: 0 when not built, no driver or
 * no GPU; CPU: 1). Never fails. */
int rumor_device_count(rumor_dev_kind kind);

/* Number of online CPU cores. */
int rumor_cpu_cores(void);

/* Counter-based uniform draw in [0,1) for (seed, index): the generator behind
 * dropout, exported so tests and other backends reproduce the same mask. */
static inline float rumor_rand_uniform(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* The CPU table, always built. */
extern const rumor_ops_t rumor_cpu_ops;

#ifdef __cplusplus
}
#endif
#endif

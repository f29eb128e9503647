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

/* Queues of work on a device, and markers in them. On the CPU work runs at
 * once on the calling thread: streams and events exist (so callers are
 * written once) but every event is complete when recorded. */
typedef struct rumor_stream rumor_stream_t;
typedef struct rumor_event rumor_event_t;

/* Devices of one kind that move bytes between them through the backend's
 * collective library (NCCL's communicators, one a GPU). */
typedef struct rumor_clique rumor_clique_t;

/* Ops a backend may lack, for rumor_ops_t.supports. */
typedef enum {
    RUMOR_CAP_ASYNC_COPY = 0, /* upload/download_async overlap compute */
    RUMOR_CAP_PEER_COPY,      /* copy_peer between two devices of this kind */
    RUMOR_CAP_PINNED,         /* host_alloc returns page-locked memory */
    RUMOR_CAP_BF16,           /* bf16 compute (a stage's precision) */
    RUMOR_CAP_TF32,
    RUMOR_CAP_COUNT_
} rumor_cap;

/* How a device's matrix products compute (a property of the device a stage
 * runs on). fp32: IEEE single precision; tf32: tensor cores round the
 * products' inputs to 10-bit mantissas, accumulating in fp32; bf16: inputs
 * rounded to bfloat16 (8-bit mantissas), accumulating in fp32. Parameters,
 * gradients, optimizer state and what peers gossip stay fp32 in every mode
 * (fp32 master weights, as llm.c keeps them); element-wise ops, layernorm,
 * softmax and reductions compute in fp32. The CPU computes in fp32 only. */
typedef enum { RUMOR_PREC_FP32 = 0, RUMOR_PREC_TF32, RUMOR_PREC_BF16 } rumor_precision;

/* What a device did that stalls its host or its GPU, counted since it was
 * opened (ops->counters; CUDA): a step that allocates, frees or waits for
 * the whole device shows here, as do the host's waits for its streams. */
typedef struct rumor_dev_counters {
    long mallocs;      /* device or page-locked allocations */
    long frees;
    long device_syncs; /* waits for all of the GPU's streams */
    long host_waits;   /* the host waited for a stream or an event */
} rumor_dev_counters_t;

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
    /* y = y + a * x (x and y do not overlap) */
    void (*axpy)(rumor_device_t *d, float *y, float a, const float *x, size_t n);
    /* y = a * y */
    void (*scale)(rumor_device_t *d, float *y, float a, size_t n);

    /* ---- activations. backward reads the forward input x. dx may alias dy. */
    void (*relu_forward)(rumor_device_t *d, float *y, const float *x, size_t n);
    void (*relu_backward)(rumor_device_t *d, float *dx, const float *x, const float *dy, size_t n);
    /* GELU, tanh approximation (as in GPT-2). */
    void (*gelu_forward)(rumor_device_t *d, float *y, const float *x, size_t n);
    void (*gelu_backward)(rumor_device_t *d, float *dx, const float *x, const float *dy, size_t n);
    /* A dense layer and its GELU, as GPT-2's MLP has them; all row-major and
     * contiguous, W (in, out). Forward: pre (rows, out) = x (rows, in) W +
     * bias (out), y = gelu(pre) (pre kept for backward). Backward: dx (rows,
     * in) = (dy (rows, out) W^T) * gelu'(pre (rows, in)). The same as gemm,
     * add_bias and gelu_forward / gemm and gelu_backward in turn; CUDA fuses
     * them into cuBLASLt epilogues. */
    void (*gemm_bias_gelu)(rumor_device_t *d, float *y, float *pre, const float *x,
                           const float *w, const float *bias, int rows, int in, int out);
    void (*gemm_dgelu)(rumor_device_t *d, float *dx, const float *dy, const float *w,
                       const float *pre, int rows, int in, int out);
    /* Inverted dropout: y = x * keep / (1-p), keep drawn from a counter-based
     * generator keyed by (seed, index), so backward recomputes the mask
     * instead of storing it and every backend draws the same mask. */
    void (*dropout_forward)(rumor_device_t *d, float *y, const float *x, size_t n, float p,
                            uint64_t seed);
    void (*dropout_backward)(rumor_device_t *d, float *dx, const float *dy, size_t n, float p,
                             uint64_t seed);

    /* ---- loss, fused with its gradient. Each row r of logits (rows, classes):
     * losses[r] = -log softmax(logits[r])[labels[r]] (from the log-sum-exp;
     * losses NULL: not written); grad != 0: then logits[r] = scale *
     * (softmax(logits[r]) - onehot(labels[r])), written in place over the
     * logits; grad 0 leaves the logits intact. Labels must be in [0, classes):
     * callers validate them (data.c does). */
    void (*softmax_xent)(rumor_device_t *d, float *logits, float *losses, const int32_t *labels,
                         int rows, int classes, float scale, int grad);

    /* ---- optimizer updates over a contiguous range of the flat buffers.
     * SGD (PyTorch semantics): g' = g + wd*p; m = mu*m + g'; step = nesterov ?
     * g' + mu*m : m; p -= lr*step. AdamW (decoupled decay): p -= lr*wd*p;
     * m = b1*m + (1-b1)g; v = b2*v + (1-b2)g^2; p -= lr * (m/bc1) /
     * (sqrt(v/bc2) + eps), with bc1 = 1-b1^t, bc2 = 1-b2^t. */
    void (*sgd_step)(rumor_device_t *d, float *p, float *mom, const float *g, size_t n, float lr,
                     float momentum, float wd, int nesterov);
    void (*adamw_step)(rumor_device_t *d, float *p, float *m, float *v, const float *g, size_t n,
                       float lr, float b1, float b2, float eps, float wd, float bc1, float bc2);

    /* ---- element-wise and reductions. fill writes v (zeroing gradients
     * with fill 0 clears a NaN, where scaling by 0 would keep it). */
    void (*fill)(rumor_device_t *d, float *y, float v, size_t n);
    /* y = a + b (residual connections); y may alias a or b. */
    void (*add)(rumor_device_t *d, float *y, const float *a, const float *b, size_t n);
    /* y = a * x + b * y, element-wise over n (mixing two parameter copies;
     * x and y do not overlap);
     * b == 0 writes a * x without reading y (BLAS's beta == 0: whatever y
     * held, NaN included, is gone). */
    void (*axpby)(rumor_device_t *d, float *y, float a, const float *x, float b, size_t n);
    /* The mixer's step: y = y + a * x, then *sqdist = sum (y - x)^2 over the
     * result in double precision (the distance of a mixed range from this
     * peer's own parameters; a == 0 only measures; x and y do not overlap).
     * Host result: waits. */
    int (*axpy_dist)(rumor_device_t *d, float *y, float a, const float *x, size_t n,
                     double *sqdist);
    /* *out = sum of x[i]^2 in double precision, and *nonfinite = how many x[i]
     * are NaN or +-Inf (either pointer may be NULL). Host results: waits. */
    int (*sumsq)(rumor_device_t *d, const float *x, size_t n, double *out, size_t *nonfinite);

    /* ---- batched GEMM: for i in [0, batch), C_i = alpha op(A_i) op(B_i) +
     * beta C_i with X_i = X + i * stride_x (cuBLAS's strided-batched form). */
    void (*gemm_batched)(rumor_device_t *d, int trans_a, int trans_b, int m, int n, int k,
                         float alpha, const float *a, int lda, long long stride_a, const float *b,
                         int ldb, long long stride_b, float beta, float *c, int ldc,
                         long long stride_c, int batch);

    /* ---- layernorm over the last dimension (GPT-2: eps 1e-5).
     * y (rows,C) = (x - mean) * rstd * w + b; mean and rstd (rows) are saved
     * for backward. backward_x: dx (=, or += when accumulate) from dy;
     * backward_w: dw += sum over rows dy * xhat, db += sum over rows dy. */
    void (*layernorm_forward)(rumor_device_t *d, float *y, float *mean, float *rstd,
                              const float *x, const float *w, const float *b, int rows, int C,
                              float eps);
    void (*layernorm_backward_x)(rumor_device_t *d, float *dx, const float *dy, const float *x,
                                 const float *w, const float *mean, const float *rstd, int rows,
                                 int C, int accumulate);
    void (*layernorm_backward_w)(rumor_device_t *d, float *dw, float *db, const float *dy,
                                 const float *x, const float *mean, const float *rstd, int rows,
                                 int C);

    /* ---- causal multi-head self-attention (GPT-2 layout), fused: no
     * (T, T) matrix is kept. qkv (B,T,3C): q, k and v side by side in each
     * row, head h using columns [h*hs, (h+1)*hs) of each, hs = C/NH. out
     * (B,T,C): head outputs side by side. Scores scaled by 1/sqrt(hs), key
     * u visible from query t when u <= t. forward also writes lse
     * (B,NH,T): each query row's log-sum-exp of its scaled scores, which
     * backward needs with qkv and out to recompute the probabilities.
     * backward writes dqkv (=) from dout (B,T,C). */
    void (*attention_forward)(rumor_device_t *d, float *out, float *lse, const float *qkv, int B,
                              int T, int C, int NH);
    void (*attention_backward)(rumor_device_t *d, float *dqkv, const float *dout,
                               const float *qkv, const float *out, const float *lse, int B, int T,
                               int C, int NH);

    /* ---- token and position embeddings. out (B,T,C) = wte[tok[b,t]] +
     * wpe[t]; tokens must be in [0, V) (callers validate). backward adds:
     * dwte[tok] += dout, dwpe[t] += dout summed over b (dwpe may be NULL),
     * each element's terms in the order of (b, t): deterministic, on every
     * backend. dwte is (V, C). */
    void (*embed_forward)(rumor_device_t *d, float *out, const int32_t *tok, const float *wte,
                          const float *wpe, int B, int T, int C);
    void (*embed_backward)(rumor_device_t *d, float *dwte, float *dwpe, const float *dout,
                           const int32_t *tok, int B, int T, int C, int V);

    /* ---- device plumbing. A NULL stream is the device's default stream;
     * the math ops run on the current stream (set_stream). */
    int (*stream_create)(rumor_device_t *d, rumor_stream_t **out);
    void (*stream_destroy)(rumor_device_t *d, rumor_stream_t *s);
    int (*set_stream)(rumor_device_t *d, rumor_stream_t *s);
    int (*stream_sync)(rumor_device_t *d, rumor_stream_t *s);
    int (*event_create)(rumor_device_t *d, rumor_event_t **out);
    void (*event_destroy)(rumor_device_t *d, rumor_event_t *e);
    int (*event_record)(rumor_device_t *d, rumor_event_t *e, rumor_stream_t *s);
    /* work queued on s after this waits for e (recorded on any stream) */
    int (*stream_wait)(rumor_device_t *d, rumor_stream_t *s, rumor_event_t *e);
    int (*event_sync)(rumor_device_t *d, rumor_event_t *e);
    /* without waiting: 1 when the work before e's last record is done (or e
     * was never recorded), 0 while it runs, < 0 on an error; callable from
     * any thread */
    int (*event_query)(rumor_device_t *d, rumor_event_t *e);
    /* copies ordered on stream s; host memory should come from host_alloc */
    int (*upload_async)(rumor_device_t *d, void *dst, const void *host_src, size_t bytes,
                        rumor_stream_t *s);
    int (*download_async)(rumor_device_t *d, void *host_dst, const void *src, size_t bytes,
                          rumor_stream_t *s);
    /* dst on device dd, src on device sd (both of this table's kind), ordered
     * on stream s of d */
    int (*copy_peer)(rumor_device_t *dd, void *dst, rumor_device_t *sd, const void *src,
                     size_t bytes, rumor_stream_t *s);
    /* host memory for async copies (page-locked where the device has such) */
    void *(*host_alloc)(rumor_device_t *d, size_t bytes);
    void (*host_free)(rumor_device_t *d, void *p);
    int (*supports)(const rumor_device_t *d, rumor_cap cap);
    /* the device's counters (NULL where it keeps none: the CPU) */
    void (*counters)(const rumor_device_t *d, rumor_dev_counters_t *out);

    /* ---- a clique of devices of this table's kind (distinct devices; one
     * alone sends to itself), for copies by the backend's collective
     * library: NCCL's grouped send and receive between GPUs. NULL where
     * the backend has none (the CPU; CUDA built without NCCL): callers copy
     * with copy_peer then. clique_copy copies bytes from src on sd to dst
     * on dd (both of the clique), queued on streams ss (of sd) and ds (of
     * dd), NULL meaning the devices' own streams; the caller waits on both.
     * clique_close takes NULL. */
    int (*clique_open)(rumor_device_t *const *devs, int n, rumor_clique_t **out);
    void (*clique_close)(rumor_clique_t *c);
    int (*clique_copy)(rumor_clique_t *c, rumor_device_t *dd, void *dst, rumor_stream_t *ds,
                       rumor_device_t *sd, const void *src, rumor_stream_t *ss, size_t bytes);
} rumor_ops_t;

struct rumor_device {
    rumor_dev_kind kind;
    int index;            /* CUDA ordinal; 0 for the CPU */
    int nthreads;         /* CPU threads this device may use (BLAS and workers) */
    const rumor_ops_t *ops;
    void *ctx;            /* backend state (cuBLAS handle, stream, ...) */
    rumor_precision precision; /* of its matrix products (fp32 unless set) */
    double slowdown;      /* >= 1: a stage's compute on it takes this many times as
                           * long (a CPU device throttled to stand for a slower
                           * machine); 1 for none */
    char name[64];        /* "cpu (2 threads, OpenBLAS SkylakeX)", "cuda:0 (NVIDIA H100)" */
};

/* Opens a device from a spec: "cpu", "cpu:N" (N threads; default all cores),
 * "cuda", "cuda:N", or "auto" (the first GPU if one is present, else the CPU).
 * A CPU spec may end in ":slow=X" (X in [1, 100]): after each forward or
 * backward of a stage the device sleeps X - 1 times what it computed, so it
 * runs X times slower with its core idle, standing for a slower machine
 * (unlike pipeline devices on one host: cpu:1,cpu:1:slow=2). A CUDA spec
 * may end in :fp32, :tf32 or :bf16, the device's precision (a stage's
 * property: cuda:0:bf16,cuda:1:fp32).
 * Asking for CUDA where it is not built or no GPU is present is an error;
 * "auto" quietly falls back to the CPU. */
int rumor_device_open(const char *spec, rumor_device_t **out) RUMOR_WUR;

/* Whether spec is a device spec rumor_device_open understands, without
 * opening anything (RUMOR_EINVAL naming it otherwise): whether the device
 * is there is the open's question. */
int rumor_device_check_spec(const char *spec) RUMOR_WUR;

/* Releases a device and sets *dp to NULL; safe to call twice. */
void rumor_device_close(rumor_device_t **dp);

/* Sets how d's matrix products compute: RUMOR_ENOTSUP (naming the device)
 * where it cannot (tf32 or bf16 on the CPU, or a GPU without tensor cores
 * for them). */
int rumor_device_set_precision(rumor_device_t *d, rumor_precision p) RUMOR_WUR;

/* "fp32", "tf32", "bf16" (RUMOR_EINVAL naming the text otherwise). */
int rumor_precision_parse(const char *s, rumor_precision *out) RUMOR_WUR;
const char *rumor_precision_name(rumor_precision p);

/* Whether a and b address the same memory (both the CPU, or the same GPU):
 * a pointer of one is valid on the other. */
int rumor_device_same_memory(const rumor_device_t *a, const rumor_device_t *b);

/* Copies bytes from src (memory of device sd) to dst (memory of device dd),
 * whatever their kinds: a copy within one memory, an upload, a download, or
 * a copy between two GPUs. Returns once dst holds the bytes and src may be
 * reused; work queued on either device before the call is ordered before. */
int rumor_device_copy(rumor_device_t *dd, void *dst, rumor_device_t *sd, const void *src,
                      size_t bytes) RUMOR_WUR;

/* Number of usable devices of a kind (CUDA: 0 when not built, no driver or
 * no GPU; CPU: 1). Never fails. */
int rumor_device_count(rumor_dev_kind kind);

/* Why no device of a kind is usable here, or "ok" when one is: for CUDA
 * the runtime's reason ("CUDA driver version is insufficient for CUDA
 * runtime version", "no CUDA GPU found") or "this rumor was built without
 * CUDA". Never fails. */
const char *rumor_device_status(rumor_dev_kind kind);

/* What `rumor-train devices` shows of a device, without opening it. */
typedef struct rumor_device_info {
    char name[256];         /* "NVIDIA H100 80GB HBM3"; the CPU: "cpu" */
    int cc_major, cc_minor; /* compute capability (0.0 for the CPU) */
    int sms;                /* multiprocessors (the CPU: its online cores) */
    size_t memory;          /* bytes of device memory (the CPU: physical memory) */
} rumor_device_info_t;

/* Fills out for device `index` of a kind (0 <= index < rumor_device_count;
 * the CPU is index 0). RUMOR_ENODEV for an index beyond them, RUMOR_ECUDA
 * when the runtime cannot say. */
int rumor_device_info(rumor_dev_kind kind, int index, rumor_device_info_t *out) RUMOR_WUR;

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

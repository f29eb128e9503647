/* Softmax and cross-entropy over the classes of each row (the LM head's
 * vocabulary: V = 50257 for GPT-2, many times a block).
 *
 * Forward: one block per row. Each thread keeps an online (max, sum of
 * exp(z - max)) over its strided share of the row; the block combines the
 * pairs (warp butterflies, then every thread folds the warps' pairs from
 * shared memory in the same order); a second pass writes the probabilities.
 * The logits are read twice, the probabilities written once. The loss is
 * log(sum) - (z[label] - max), from the logits, not from a rounded prob, as
 * on the CPU (cpu_ops.c).
 *
 * Every thread of a block runs every shuffle and barrier: HIP-CPU's
 * shuffles are block-wide barriers (tests/cuda-emu), so a shuffle inside a
 * branch some warps skip would hang or corrupt the emulated run. */
#include "cuda_int.h"

#define MAX_THREADS 512
#define NEG_BIG (-3.402823466e38f) /* -FLT_MAX: exp(-inf - -inf) would be NaN */

/* threads per row: a power of two from a warp up to MAX_THREADS, about
 * four elements a thread */
static unsigned row_threads(int width)
{
    unsigned t = 32;
    while (t < MAX_THREADS && (int)t * 4 < width)
        t *= 2;
    return t;
}

/* (max, sum) of the block's threads' (m, s) pairs, in every thread; s is
 * a sum of exp(z - m). Uses sm[0 .. 2 * warps); one call per kernel (no
 * barrier guards a second use of sm). */
static __device__ void block_max_sum(float m, float s, float *sm, float *max_out, float *sum_out)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    float mw = cu_warp_max(m);
    s = cu_warp_sum(s * expf(m - mw)); /* m <= mw, both finite: no NaN */
    if (lane == 0) {
        sm[w] = mw;
        sm[nw + w] = s;
    }
    __syncthreads();
    float mx = sm[0];
    for (int i = 1; i < nw; i++)
        mx = sm[i] > mx ? sm[i] : mx;
    float sum = 0.0f;
    for (int i = 0; i < nw; i++)
        sum += sm[nw + i] * expf(sm[i] - mx);
    *max_out = mx;
    *sum_out = sum;
}

/* probs (batch, V) = softmax(logits); losses (batch) = -log probs[label].
 * probs may alias logits: the label's logit is read before any write. */
static __global__ void xent_fwd_kernel(float *probs, float *losses, const float *logits,
                                       const int32_t *labels, int V)
{
    __shared__ float sm[2 * MAX_THREADS / 32];
    size_t row = blockIdx.x;
    const float *z = logits + row * V;
    float *p = probs + row * V;
    float m = NEG_BIG, s = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float v = z[i];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    int lab = labels[row];
    float zl = threadIdx.x == 0 && lab >= 0 && lab < V ? z[lab] : 0.0f;
    float mx, sum;
    block_max_sum(m, s, sm, &mx, &sum); /* its barrier orders the reads before the writes */
    float inv = 1.0f / sum;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        p[i] = expf(z[i] - mx) * inv;
    if (threadIdx.x == 0) /* a label out of [0, V) (callers validate) reads nothing */
        losses[row] = lab >= 0 && lab < V ? logf(sum) - (zl - mx) : INFINITY;
}

void cu_softmax_xent_forward(rumor_device_t *d, float *probs, float *losses, const float *logits,
                             const int32_t *labels, int batch, int classes)
{
    if (batch <= 0 || classes <= 0)
        return;
    CU_ENTER(d);
    CU_LAUNCH(xent_fwd_kernel, (unsigned)batch, row_threads(classes), 0, cu_of(d)->cur, probs,
              losses, logits, labels, classes);
    CU_LAUNCHED(d, "softmax_xent_forward");
}

/* dlogits (batch, V) = scale * (probs - onehot(labels)); a block per row
 * (grid-stride over rows), the label read once a row. dlogits may alias
 * probs. */
static __global__ void xent_bwd_kernel(float *dlogits, const float *probs, const int32_t *labels,
                                       int batch, int V, float scale)
{
    for (size_t row = blockIdx.x; row < (size_t)batch; row += gridDim.x) {
        const float *p = probs + row * V;
        float *g = dlogits + row * V;
        int lab = labels[row];
        for (int i = threadIdx.x; i < V; i += blockDim.x)
            g[i] = scale * (p[i] - (i == lab ? 1.0f : 0.0f));
    }
}

void cu_softmax_xent_backward(rumor_device_t *d, float *dlogits, const float *probs,
                              const int32_t *labels, int batch, int classes, float scale)
{
    if (batch <= 0 || classes <= 0)
        return;
    CU_ENTER(d);
    unsigned grid = batch < 65535 * 16 ? (unsigned)batch : 65535u * 16u;
    CU_LAUNCH(xent_bwd_kernel, grid, row_threads(classes), 0, cu_of(d)->cur, dlogits, probs,
              labels, batch, classes, scale);
    CU_LAUNCHED(d, "softmax_xent_backward");
}

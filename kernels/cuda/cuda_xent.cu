/* Softmax cross-entropy over the classes of each row (the LM head's
 * vocabulary: V = 50257 for GPT-2, many times a block), fused: the loss and,
 * when asked, the gradient of the logits written over the logits.
 *
 * One block per row. Pass 1: each thread keeps an online (max, sum of
 * exp(z - max)) over its share of the row; the block combines the pairs
 * (warp butterflies, then every thread folds the warps' pairs from shared
 * memory in the same order). The loss is log(sum) - (z[label] - max), from
 * the logits, not from a rounded prob, as on the CPU (cpu_ops.c). Pass 2
 * (grad only): z = scale * (exp(z - max) / sum - onehot(label)), in place.
 * So the logits are read once (loss only) or twice and written once, and no
 * (rows, V) buffer of probabilities exists.
 *
 * Rows of an odd V start anywhere: each row is read as a scalar head up to
 * the first 16-byte boundary, float4s, then a scalar tail.
 *
 * Every thread of a block runs every shuffle and barrier: HIP-CPU's
 * shuffles are block-wide barriers (tests/cuda-emu), so a shuffle inside a
 * branch some warps skip would hang or corrupt the emulated run. */
#include "cuda_int.h"

#define MAX_THREADS 512
#define NEG_BIG (-3.402823466e38f) /* -FLT_MAX: exp(-inf - -inf) would be NaN */

/* threads per row: a power of two from a warp up to MAX_THREADS, about
 * eight elements a thread */
static unsigned row_threads(int width)
{
    unsigned t = 32;
    while (t < MAX_THREADS && (int)t * 8 < width)
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

/* adds v to the online pair (m, s) */
static __device__ __forceinline__ void online(float v, float *m, float *s)
{
    if (v > *m) {
        *s = *s * expf(*m - v) + 1.0f;
        *m = v;
    } else {
        *s += expf(v - *m);
    }
}

/* elements before the row's first 16-byte boundary (all of a short row) */
static __device__ __forceinline__ int row_head(const float *z, int V)
{
    int h = (int)((16u - ((unsigned)(size_t)z & 15u)) & 15u) / 4;
    return h < V ? h : V;
}

/* losses[row] = -log softmax(z)[label] (losses may be NULL); grad:
 * z = scale * (softmax(z) - onehot(label)) over z. z must be 4-byte
 * aligned (any float array is). */
static __global__ void xent_kernel(float *logits, float *losses, const int32_t *labels, int V,
                                   float scale, int grad)
{
    __shared__ float sm[2 * MAX_THREADS / 32];
    float *z = logits + (size_t)blockIdx.x * V;
    int h = row_head(z, V), nv = (V - h) / 4, t0 = h + 4 * nv;
    float4 *z4 = (float4 *)(z + h);
    float m = NEG_BIG, s = 0.0f;
    for (int i = threadIdx.x; i < h; i += blockDim.x)
        online(z[i], &m, &s);
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
        float4 v = z4[i];
        online(v.x, &m, &s);
        online(v.y, &m, &s);
        online(v.z, &m, &s);
        online(v.w, &m, &s);
    }
    for (int i = t0 + threadIdx.x; i < V; i += blockDim.x)
        online(z[i], &m, &s);
    int lab = labels[blockIdx.x];
    int ok = lab >= 0 && lab < V; /* callers validate; out of range reads nothing */
    float zl = threadIdx.x == 0 && ok ? z[lab] : 0.0f;
    float mx, sum;
    block_max_sum(m, s, sm, &mx, &sum); /* its barrier orders every read above before the writes */
    if (threadIdx.x == 0 && losses)
        losses[blockIdx.x] = ok ? logf(sum) - (zl - mx) : INFINITY;
    if (!grad)
        return;
    float inv = 1.0f / sum;
    for (int i = threadIdx.x; i < h; i += blockDim.x)
        z[i] = scale * (expf(z[i] - mx) * inv - (i == lab ? 1.0f : 0.0f));
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
        float4 v = z4[i];
        int j = h + 4 * i;
        v.x = scale * (expf(v.x - mx) * inv - (j == lab ? 1.0f : 0.0f));
        v.y = scale * (expf(v.y - mx) * inv - (j + 1 == lab ? 1.0f : 0.0f));
        v.z = scale * (expf(v.z - mx) * inv - (j + 2 == lab ? 1.0f : 0.0f));
        v.w = scale * (expf(v.w - mx) * inv - (j + 3 == lab ? 1.0f : 0.0f));
        z4[i] = v;
    }
    for (int i = t0 + threadIdx.x; i < V; i += blockDim.x)
        z[i] = scale * (expf(z[i] - mx) * inv - (i == lab ? 1.0f : 0.0f));
}

void cu_softmax_xent(rumor_device_t *d, float *logits, float *losses, const int32_t *labels,
                     int rows, int classes, float scale, int grad)
{
    if (rows <= 0 || classes <= 0)
        return;
    CU_ENTER(d);
    CU_LAUNCH(xent_kernel, (unsigned)rows, row_threads(classes), 0, cu_of(d)->cur, logits, losses,
              labels, classes, scale, grad);
    CU_LAUNCHED(d, "softmax_xent");
}

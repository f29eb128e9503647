/* Causal multi-head self-attention, as llm.c's first CUDA version: the
 * (B, NH, T, T) attention matrix is materialized (it is saved for
 * backward), the products are strided-batched GEMMs (cu_gemm_batched, so
 * they run at the device's precision) and a causal softmax kernel sits
 * between them.
 *
 * No permute into scratch: for each b, head h of q, k and v is the
 * (T, hs) matrix at qkv + b*T*3C + h*hs (+ C for k, + 2C for v) with
 * leading dimension 3C, so one GEMM call batches the NH heads with a
 * stride of hs (a stride of T*T in att, hs in out and dout). That costs
 * B calls per product instead of one; the heads' outputs interleave in
 * memory without overlapping.
 *
 * The GEMMs compute the full T x T scores; the softmax kernels write 0
 * above the diagonal, in att (forward) and in datt (backward, before the
 * products that read it), so the masked scores never reach out or dqkv. */
#include "cuda_int.h"

#define ROW_WARPS 8 /* rows (warps) per block */

/* In place over att (rows = B*NH*T, each of T scores), row t of each
 * (b, h): the softmax of its first t+1 scores, 0 after them. One warp per
 * row: each lane keeps an online (max, sum of exp) over its strided share.
 * Every thread runs every shuffle (HIP-CPU's shuffles are block-wide
 * barriers): warps past the last row redo the last row and write nothing. */
static __global__ void causal_softmax_kernel(float *att, size_t rows, int T)
{
    int lane = threadIdx.x & 31;
    size_t row = (size_t)blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
    int live = row < rows;
    if (!live)
        row = rows - 1;
    int t = (int)(row % (size_t)T);
    float *a = att + row * T;
    float m = -3.402823466e38f, s = 0.0f; /* -FLT_MAX: no NaN from -inf - -inf */
    for (int u = lane; u <= t; u += 32) {
        float v = a[u];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    float mx = cu_warp_max(m);
    float sum = cu_warp_sum(s * expf(m - mx));
    if (!live)
        return; /* after the last shuffle */
    float inv = 1.0f / sum;
    for (int u = lane; u < T; u += 32)
        a[u] = u <= t ? expf(a[u] - mx) * inv : 0.0f;
}

/* In place over datt, with att: dpre = att * (datt - sum_u att * datt) on
 * each row's first t+1 entries, 0 after them. One warp per row, as above. */
static __global__ void causal_softmax_bwd_kernel(float *datt, const float *att, size_t rows, int T)
{
    int lane = threadIdx.x & 31;
    size_t row = (size_t)blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
    int live = row < rows;
    if (!live)
        row = rows - 1;
    int t = (int)(row % (size_t)T);
    const float *a = att + row * T;
    float *da = datt + row * T;
    float s = 0.0f;
    for (int u = lane; u <= t; u += 32)
        s += a[u] * da[u];
    float dot = cu_warp_sum(s);
    if (!live)
        return; /* after the last shuffle */
    for (int u = lane; u < T; u += 32)
        da[u] = u <= t ? a[u] * (da[u] - dot) : 0.0f;
}

static unsigned row_blocks(size_t rows) { return (unsigned)((rows + ROW_WARPS - 1) / ROW_WARPS); }

/* out (B,T,C) = softmax(q k^T / sqrt(hs), causal) v per head; att
 * (B,NH,T,T) keeps the probabilities */
void cu_attention_forward(rumor_device_t *d, float *out, float *att, const float *qkv, int B,
                          int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || NH <= 0)
        return;
    CU_ENTER(d);
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        /* scores (NH, T, T) = scale * q k^T */
        cu_gemm_batched(d, 0, 1, T, T, hs, scale, q, C3, hs, k, C3, hs, 0.0f,
                        att + (size_t)b * NH * TT, T, TT, NH);
    }
    size_t rows = (size_t)B * NH * T;
    CU_LAUNCH(causal_softmax_kernel, row_blocks(rows), 32 * ROW_WARPS, 0, cu_of(d)->cur, att,
              rows, T);
    CU_LAUNCHED(d, "attention_forward: softmax");
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C;
        /* out (T, hs) of each head = att (T, T) v (T, hs) */
        cu_gemm_batched(d, 0, 0, T, hs, T, 1.0f, att + (size_t)b * NH * TT, T, TT, v, C3, hs,
                        0.0f, out + (size_t)b * T * C, C, hs, NH);
    }
}

/* dqkv (B,T,3C) written (=) from dout (B,T,C); datt (B,NH,T,T) is scratch */
void cu_attention_backward(rumor_device_t *d, float *dqkv, float *datt, const float *dout,
                           const float *qkv, const float *att, int B, int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || NH <= 0)
        return;
    CU_ENTER(d);
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C;
        const float *dy = dout + (size_t)b * T * C, *ab = att + (size_t)b * NH * TT;
        float *dv = dqkv + (size_t)b * T * C3 + 2 * C;
        /* datt (T, T) = dy v^T; dv (T, hs) = att^T dy (att is 0 above the diagonal) */
        cu_gemm_batched(d, 0, 1, T, T, hs, 1.0f, dy, C, hs, v, C3, hs, 0.0f,
                        datt + (size_t)b * NH * TT, T, TT, NH);
        cu_gemm_batched(d, 1, 0, T, hs, T, 1.0f, ab, T, TT, dy, C, hs, 0.0f, dv, C3, hs, NH);
    }
    size_t rows = (size_t)B * NH * T;
    CU_LAUNCH(causal_softmax_bwd_kernel, row_blocks(rows), 32 * ROW_WARPS, 0, cu_of(d)->cur, datt,
              att, rows, T);
    CU_LAUNCHED(d, "attention_backward: softmax");
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        const float *da = datt + (size_t)b * NH * TT;
        float *dq = dqkv + (size_t)b * T * C3, *dk = dq + C;
        /* dq = scale * dpre k; dk = scale * dpre^T q (dpre is 0 above the diagonal) */
        cu_gemm_batched(d, 0, 0, T, hs, T, scale, da, T, TT, k, C3, hs, 0.0f, dq, C3, hs, NH);
        cu_gemm_batched(d, 1, 0, T, hs, T, scale, da, T, TT, q, C3, hs, 0.0f, dk, C3, hs, NH);
    }
}

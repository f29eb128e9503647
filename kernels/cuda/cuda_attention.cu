/* Causal multi-head self-attention, fused (FlashAttention-2's scheme): no
 * (T, T) matrix is ever written. Each block owns one (b, h) and a tile of
 * query rows; it walks the key tiles at or below the diagonal (the rest are
 * skipped) keeping a running max m and sum l per row (online softmax), and
 * writes out and lse = m + log l. Backward recomputes p = exp(s - lse) tile
 * by tile, with D_i = dout_i . out_i computed in the kernels (no scratch):
 * one kernel over key tiles accumulates dk and dv (looping over the query
 * tiles below them), one over query tiles accumulates dq (looping over the
 * key tiles): every output has one writer, no float atomics, so gradients
 * are bit-reproducible.
 *
 * Two paths. The fp32 kernels (any head size up to 256) compute in fp32 on
 * the SIMT cores: the device's fp32 and tf32 precisions. At bf16 precision,
 * head sizes 32, 64 and 128 take the tensor-core kernels
 * (cuda_attention_tc.h, which the emulation runs too): q, k, v and dout
 * rounded to bf16 in shared memory, scores and probabilities in registers,
 * products mma.sync m16n8k16 accumulated in fp32, the softmax and its
 * statistics in fp32.
 *
 * Layout: head h of q, k and v is the (T, hs) matrix at qkv + b*T*3C + h*hs
 * (+ C for k, + 2C for v) with row stride 3C; out and dout rows have stride
 * C; lse is (B, NH, T); dqkv has qkv's layout and is written (=). */
#include <stdint.h>
#include <stdio.h>

#include "cuda_int.h"

/* ---------------------------------------------------------- fp32 kernels */

#define SB 32                 /* query rows and keys per tile */
#define SWARPS 8              /* 256 threads */
#define RPW (SB / SWARPS)     /* rows a warp owns */
#define SCH 8                 /* hs <= 32 * SCH: the columns a lane owns */
#define SIMT_MAX_HS (32 * SCH)
#define NEG_BIG (-3.402823466e38f) /* -FLT_MAX: no NaN from -inf - -inf */

/* rows [r0, r0 + SB) of one head's matrix (row stride `stride`) into sm
 * (row stride ld), zeros past T */
static __device__ void simt_load(float *sm, const float *src, int r0, int T, int hs, int ld,
                                 int stride)
{
    for (int e = threadIdx.x; e < SB * hs; e += SWARPS * 32) {
        int r = e / hs, c = e - r * hs;
        sm[r * ld + c] = r0 + r < T ? src[(size_t)(r0 + r) * stride + c] : 0.0f;
    }
}

static __device__ float simt_dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int d = 0; d < n; d++)
        s += a[d] * b[d];
    return s;
}

/* D_i = dout_i . out_i over the head's hs columns (every lane gets it; 0 past T) */
static __device__ float simt_rowdot(const float *dout, const float *out, int i, int T, int hs,
                                    int C)
{
    int lane = threadIdx.x & 31;
    float s = 0.0f;
    if (i < T)
        for (int d = lane; d < hs; d += 32)
            s += dout[(size_t)i * C + d] * out[(size_t)i * C + d];
    return cu_warp_sum(s);
}

/* Block (bh, query tile): warp w owns rows w*RPW.., lane u is key j0 + u of
 * each score tile and columns u, u+32, ... of each output row. Shared: q
 * tile, k then v tile (row stride ld = hs | 1: odd, so a lane per row reads
 * without bank conflicts), p tile. Every thread runs every shuffle and
 * barrier (the emulation's shuffles are block barriers). */
static __global__ void __launch_bounds__(256)
    att_fwd_simt(float *out, float *lse, const float *qkv, int T, int C, int NH, float scale)
{
    CU_DYNAMIC_SHARED(float, sm);
    int hs = C / NH, ld = hs | 1, C3 = 3 * C;
    int bh = blockIdx.x, b = bh / NH, h = bh - b * NH;
    int i0 = (gridDim.y - 1 - blockIdx.y) * SB; /* the longest rows first */
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *qs = sm, *kv = qs + SB * ld, *ps = kv + SB * ld;
    const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *k = q + C, *v = q + 2 * C;
    simt_load(qs, q, i0, T, hs, ld, C3);
    float m[RPW], l[RPW], o[RPW][SCH];
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) {
        m[rr] = NEG_BIG, l[rr] = 0.0f;
#pragma unroll
        for (int c = 0; c < SCH; c++)
            o[rr][c] = 0.0f;
    }
    int jend = T < i0 + SB ? T : i0 + SB;
    for (int j0 = 0; j0 < jend; j0 += SB) {
        __syncthreads(); /* the last tile's readers of kv are done */
        simt_load(kv, k, j0, T, hs, ld, C3);
        __syncthreads();
        int j = j0 + lane;
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) {
            int r = w * RPW + rr, i = i0 + r;
            float s = simt_dot(qs + r * ld, kv + lane * ld, hs);
            s = j <= i && j < T ? s * scale : -INFINITY;
            float mn = fmaxf(m[rr], cu_warp_max(s)); /* finite: key j0 <= i is visible */
            float p = expf(s - mn), alpha = expf(m[rr] - mn);
            l[rr] = l[rr] * alpha + cu_warp_sum(p);
            m[rr] = mn;
#pragma unroll
            for (int c = 0; c < SCH; c++)
                o[rr][c] *= alpha;
            ps[r * SB + lane] = p;
        }
        __syncthreads();
        simt_load(kv, v, j0, T, hs, ld, C3);
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) {
            int r = w * RPW + rr;
            for (int u = 0; u < SB; u++) {
                float p = ps[r * SB + u];
                const float *vr = kv + u * ld;
#pragma unroll
                for (int c = 0; c < SCH; c++)
                    if (lane + 32 * c < hs)
                        o[rr][c] += p * vr[lane + 32 * c];
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) {
        int i = i0 + w * RPW + rr;
        if (i >= T)
            continue;
        float inv = 1.0f / l[rr], *orow = out + ((size_t)b * T + i) * C + (size_t)h * hs;
#pragma unroll
        for (int c = 0; c < SCH; c++)
            if (lane + 32 * c < hs)
                orow[lane + 32 * c] = o[rr][c] * inv;
        if (lane == 0)
            lse[(size_t)bh * T + i] = m[rr] + logf(l[rr]);
    }
}

/* dq of a query tile: warp w owns rows w*RPW.., lane u is key j0 + u of the
 * tile. Shared: q, dout, k, v tiles (stride ld) and the dpre tile. */
static __global__ void __launch_bounds__(256)
    att_bwd_dq_simt(float *dqkv, const float *dout, const float *qkv, const float *out,
                    const float *lse, int T, int C, int NH, float scale)
{
    CU_DYNAMIC_SHARED(float, sm);
    int hs = C / NH, ld = hs | 1, C3 = 3 * C;
    int bh = blockIdx.x, b = bh / NH, h = bh - b * NH;
    int i0 = (gridDim.y - 1 - blockIdx.y) * SB;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *qs = sm, *dos = qs + SB * ld, *ks = dos + SB * ld, *vs = ks + SB * ld;
    float *ds = vs + SB * ld;
    size_t hoff = (size_t)h * hs;
    const float *q = qkv + (size_t)b * T * C3 + hoff, *k = q + C, *v = q + 2 * C;
    const float *dy = dout + (size_t)b * T * C + hoff, *o = out + (size_t)b * T * C + hoff;
    simt_load(qs, q, i0, T, hs, ld, C3);
    simt_load(dos, dy, i0, T, hs, ld, C);
    float L[RPW], D[RPW], dq[RPW][SCH];
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) {
        int i = i0 + w * RPW + rr;
        L[rr] = i < T ? lse[(size_t)bh * T + i] : 0.0f;
        D[rr] = simt_rowdot(dy, o, i, T, hs, C);
#pragma unroll
        for (int c = 0; c < SCH; c++)
            dq[rr][c] = 0.0f;
    }
    int jend = T < i0 + SB ? T : i0 + SB;
    for (int j0 = 0; j0 < jend; j0 += SB) {
        __syncthreads();
        simt_load(ks, k, j0, T, hs, ld, C3);
        simt_load(vs, v, j0, T, hs, ld, C3);
        __syncthreads();
        int j = j0 + lane;
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) {
            int r = w * RPW + rr, i = i0 + r;
            float s = simt_dot(qs + r * ld, ks + lane * ld, hs);
            float dp = simt_dot(dos + r * ld, vs + lane * ld, hs);
            float p = j <= i && j < T ? expf(s * scale - L[rr]) : 0.0f;
            ds[r * SB + lane] = p * (dp - D[rr]) * scale;
        }
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) {
            int r = w * RPW + rr;
            for (int u = 0; u < SB; u++) {
                float g = ds[r * SB + u];
                const float *kr = ks + u * ld;
#pragma unroll
                for (int c = 0; c < SCH; c++)
                    if (lane + 32 * c < hs)
                        dq[rr][c] += g * kr[lane + 32 * c];
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) {
        int i = i0 + w * RPW + rr;
        if (i >= T)
            continue;
        float *dr = dqkv + ((size_t)b * T + i) * C3 + hoff;
#pragma unroll
        for (int c = 0; c < SCH; c++)
            if (lane + 32 * c < hs)
                dr[lane + 32 * c] = dq[rr][c];
    }
}

/* dk and dv of a key tile: warp w owns keys w*RPW.., lane u is query
 * i0 + u of each tile below. Shared: k, v, q, dout tiles (stride ld), the p
 * and dpre tiles (key-major) and each query row's lse and D. */
static __global__ void __launch_bounds__(256)
    att_bwd_dkdv_simt(float *dqkv, const float *dout, const float *qkv, const float *out,
                      const float *lse, int T, int C, int NH, float scale)
{
    CU_DYNAMIC_SHARED(float, sm);
    int hs = C / NH, ld = hs | 1, C3 = 3 * C;
    int bh = blockIdx.x, b = bh / NH, h = bh - b * NH;
    int j0 = blockIdx.y * SB; /* the first key tiles see the most queries */
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *ks = sm, *vs = ks + SB * ld, *qs = vs + SB * ld, *dos = qs + SB * ld;
    float *ps = dos + SB * ld, *dss = ps + SB * SB, *Ls = dss + SB * SB, *Ds = Ls + SB;
    size_t hoff = (size_t)h * hs;
    const float *q = qkv + (size_t)b * T * C3 + hoff, *k = q + C, *v = q + 2 * C;
    const float *dy = dout + (size_t)b * T * C + hoff, *o = out + (size_t)b * T * C + hoff;
    simt_load(ks, k, j0, T, hs, ld, C3);
    simt_load(vs, v, j0, T, hs, ld, C3);
    float dk[RPW][SCH], dv[RPW][SCH];
#pragma unroll
    for (int rr = 0; rr < RPW; rr++)
#pragma unroll
        for (int c = 0; c < SCH; c++)
            dk[rr][c] = dv[rr][c] = 0.0f;
    for (int i0 = j0; i0 < T; i0 += SB) {
        __syncthreads();
        simt_load(qs, q, i0, T, hs, ld, C3);
        simt_load(dos, dy, i0, T, hs, ld, C);
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) {
            int t = w * RPW + rr, i = i0 + t;
            float Dt = simt_rowdot(dy, o, i, T, hs, C);
            if (lane == 0) {
                Ds[t] = Dt;
                Ls[t] = i < T ? lse[(size_t)bh * T + i] : 0.0f;
            }
        }
        __syncthreads();
        int i = i0 + lane;
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) {
            int r = w * RPW + rr, j = j0 + r;
            float s = simt_dot(qs + lane * ld, ks + r * ld, hs);
            float dp = simt_dot(dos + lane * ld, vs + r * ld, hs);
            float p = i < T && j <= i ? expf(s * scale - Ls[lane]) : 0.0f;
            ps[r * SB + lane] = p;
            dss[r * SB + lane] = p * (dp - Ds[lane]) * scale;
        }
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) {
            int r = w * RPW + rr;
            for (int u = 0; u < SB; u++) {
                float p = ps[r * SB + u], g = dss[r * SB + u];
                const float *dor = dos + u * ld, *qr = qs + u * ld;
#pragma unroll
                for (int c = 0; c < SCH; c++)
                    if (lane + 32 * c < hs) {
                        dv[rr][c] += p * dor[lane + 32 * c];
                        dk[rr][c] += g * qr[lane + 32 * c];
                    }
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) {
        int j = j0 + w * RPW + rr;
        if (j >= T)
            continue;
        float *dr = dqkv + ((size_t)b * T + j) * C3 + hoff;
#pragma unroll
        for (int c = 0; c < SCH; c++)
            if (lane + 32 * c < hs) {
                dr[C + lane + 32 * c] = dk[rr][c];
                dr[2 * C + lane + 32 * c] = dv[rr][c];
            }
    }
}

#include "cuda_attention_tc.h"

/* ------------------------------------------------------------- launchers */

/* Kernels past 48 KiB of shared memory must say so (sm_80 and later allow
 * up to 163 or 227 KiB); the emulation has no such limit. */
static void att_smem(rumor_device_t *d, const void *kernel, size_t bytes)
{
#ifndef RUMOR_CUDA_EMU
    if (bytes > 48 * 1024)
        CU_KEEP(d, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
#else
    (void)d, (void)kernel, (void)bytes;
#endif
}

/* The tensor-core kernels run at bf16 precision on sm_80 and later, for
 * head sizes 32, 64 and 128, 16-byte aligned buffers (float4 loads) and
 * where the device gives a block the shared memory they need (backward at
 * hs 128 needs 69 KiB). The emulation runs them at bf16 as well. */
static int att_tc(const rumor_device_t *d, int hs, size_t smem, const void *a, const void *b,
                  const void *c)
{
    if (d->precision != RUMOR_PREC_BF16 || (hs != 32 && hs != 64 && hs != 128))
        return 0;
#ifdef RUMOR_CUDA_EMU
    (void)smem;
#else
    if (cu_of(d)->cc_major < 8)
        return 0;
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                               cu_of(d)->index) != cudaSuccess ||
        (size_t)optin < smem)
        return 0;
#endif
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15) == 0;
}

/* Shapes no kernel takes are the device's failure (reported at the next
 * sync), as launch errors are. */
static int att_bad(rumor_device_t *d, int T, int C, int NH, const char *op)
{
    int hs = C / NH;
    const char *why = NULL;
    if (C <= 0 || C % NH)
        why = "C must be a positive multiple of NH";
    else if (hs > SIMT_MAX_HS)
        why = "head size C/NH above 256";
    else if ((T + SB - 1) / SB > 65535)
        why = "T above 65535 * 32";
    if (!why)
        return 0;
    char what[160];
    snprintf(what, sizeof what, "%s: %s (T %d, C %d, NH %d)", op, why, T, C, NH);
    cu_keep(d, cudaErrorNotSupported, what, __FILE__, __LINE__);
    return 1;
}

template <int HS>
static void tc_forward(rumor_device_t *d, int B, int T, int C, int NH, float *out, float *lse,
                       const float *qkv, float scale)
{
    dim3 grid((unsigned)(B * NH), (unsigned)((T + TB - 1) / TB));
    size_t sm = tc_fwd_smem<HS>();
    att_smem(d, (const void *)att_fwd_tc<HS>, sm);
    CU_LAUNCH(att_fwd_tc<HS>, grid, TTHREADS, sm, cu_of(d)->cur, out, lse, qkv, T, C, NH, scale);
}

template <int HS>
static void tc_backward(rumor_device_t *d, int B, int T, int C, int NH, float *dqkv,
                        const float *dout, const float *qkv, const float *out, const float *lse,
                        float scale)
{
    dim3 grid((unsigned)(B * NH), (unsigned)((T + TB - 1) / TB));
    size_t sm = tc_bwd_smem<HS>();
    cudaStream_t st = cu_of(d)->cur;
    att_smem(d, (const void *)att_bwd_dkdv_tc<HS>, sm);
    att_smem(d, (const void *)att_bwd_dq_tc<HS>, sm);
    CU_LAUNCH(att_bwd_dkdv_tc<HS>, grid, TTHREADS, sm, st, dqkv, dout, qkv, out, lse, T, C, NH,
              scale);
    CU_LAUNCH(att_bwd_dq_tc<HS>, grid, TTHREADS, sm, st, dqkv, dout, qkv, out, lse, T, C, NH,
              scale);
}

/* out (B,T,C) = softmax(q k^T / sqrt(hs), causal) v per head; lse (B,NH,T) */
void cu_attention_forward(rumor_device_t *d, float *out, float *lse, const float *qkv, int B,
                          int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || NH <= 0)
        return;
    CU_ENTER(d);
    if (att_bad(d, T, C, NH, "attention_forward"))
        return;
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    size_t tsm = hs == 32 ? tc_fwd_smem<32>() : hs == 64 ? tc_fwd_smem<64>() : tc_fwd_smem<128>();
    if (att_tc(d, hs, tsm, out, qkv, qkv)) {
        if (hs == 32)
            tc_forward<32>(d, B, T, C, NH, out, lse, qkv, scale);
        else if (hs == 64)
            tc_forward<64>(d, B, T, C, NH, out, lse, qkv, scale);
        else
            tc_forward<128>(d, B, T, C, NH, out, lse, qkv, scale);
        CU_LAUNCHED(d, "attention_forward (tensor cores)");
        return;
    }
    dim3 grid((unsigned)(B * NH), (unsigned)((T + SB - 1) / SB));
    int ld = hs | 1;
    size_t sm = (size_t)(2 * SB * ld + SB * SB) * sizeof(float);
    att_smem(d, (const void *)att_fwd_simt, sm);
    CU_LAUNCH(att_fwd_simt, grid, SWARPS * 32, sm, cu_of(d)->cur, out, lse, qkv, T, C, NH, scale);
    CU_LAUNCHED(d, "attention_forward");
}

/* dqkv (B,T,3C) written (=) from dout (B,T,C), with forward's out and lse */
void cu_attention_backward(rumor_device_t *d, float *dqkv, const float *dout, const float *qkv,
                           const float *out, const float *lse, int B, int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || NH <= 0)
        return;
    CU_ENTER(d);
    if (att_bad(d, T, C, NH, "attention_backward"))
        return;
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    size_t tsm = hs == 32 ? tc_bwd_smem<32>() : hs == 64 ? tc_bwd_smem<64>() : tc_bwd_smem<128>();
    if (att_tc(d, hs, tsm, dqkv, dout, qkv) && att_tc(d, hs, tsm, out, out, out)) {
        if (hs == 32)
            tc_backward<32>(d, B, T, C, NH, dqkv, dout, qkv, out, lse, scale);
        else if (hs == 64)
            tc_backward<64>(d, B, T, C, NH, dqkv, dout, qkv, out, lse, scale);
        else
            tc_backward<128>(d, B, T, C, NH, dqkv, dout, qkv, out, lse, scale);
        CU_LAUNCHED(d, "attention_backward (tensor cores)");
        return;
    }
    dim3 grid((unsigned)(B * NH), (unsigned)((T + SB - 1) / SB));
    int ld = hs | 1;
    cudaStream_t st = cu_of(d)->cur;
    size_t sdq = (size_t)(4 * SB * ld + SB * SB) * sizeof(float);
    size_t skv = (size_t)(4 * SB * ld + 2 * SB * SB + 2 * SB) * sizeof(float);
    att_smem(d, (const void *)att_bwd_dq_simt, sdq);
    att_smem(d, (const void *)att_bwd_dkdv_simt, skv);
    CU_LAUNCH(att_bwd_dkdv_simt, grid, SWARPS * 32, skv, st, dqkv, dout, qkv, out, lse, T, C, NH,
              scale);
    CU_LAUNCH(att_bwd_dq_simt, grid, SWARPS * 32, sdq, st, dqkv, dout, qkv, out, lse, T, C, NH,
              scale);
    CU_LAUNCHED(d, "attention_backward");
}

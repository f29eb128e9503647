/* The tensor-core kernels of cuda_attention.cu (bf16 precision, head sizes
 * 32, 64 and 128; sm_80 and later; not built by the emulation). A block of
 * 4 warps owns one (b, h) and a tile of TB = 64 query rows (forward, dq) or
 * keys (dk, dv); each warp owns 16 of them. Tiles of q, k, v and dout are
 * loaded as fp32 from global memory and stored as bf16 in shared memory;
 * products run as wmma 16x16x16 bf16 with fp32 accumulators. The layout of
 * a wmma accumulator is opaque, so score tiles go through a per-warp fp32
 * staging area, where each lane pair owns one row (a lane its half): the
 * softmax, the mask and the output rescaling run there in fp32. The
 * forward's output lives in registers (a lane pair per row), backward's
 * dq, dk and dv in accumulator fragments (no rescaling is needed there).
 * Scores are kept in the log2 domain (scale * log2 e), lse in natural log. */
#include <cuda_bf16.h>
#include <mma.h>

namespace wm = nvcuda::wmma;
typedef __nv_bfloat16 bf16;
typedef wm::fragment<wm::matrix_a, 16, 16, 16, bf16, wm::row_major> frag_a;
typedef wm::fragment<wm::matrix_b, 16, 16, 16, bf16, wm::row_major> frag_brow;
typedef wm::fragment<wm::matrix_b, 16, 16, 16, bf16, wm::col_major> frag_bcol;
typedef wm::fragment<wm::accumulator, 16, 16, 16, float> frag_c;

#define TB 64              /* query rows and keys per tile */
#define TWARPS 4
#define TTHREADS (32 * TWARPS)
#define PLD (TB + 8)       /* bf16 row stride of a warp's 16 x 64 tile */
#define SLD (TB + 4)       /* fp32 row stride of a staged 16 x 64 tile */
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

/* bf16 row stride of a 64 x HS tile and fp32 stride of a staged 16 x HS one
 * (multiples of 8 and 4, as wmma asks; every fragment 32-byte aligned) */
template <int HS> struct tc_dims {
    static constexpr int LD = HS + 8, OLD = HS + 4, KN = HS / 16;
};

/* rows [r0, r0 + TB) of one head's matrix (row stride `stride`, 16-byte
 * aligned rows) into sm as bf16, zeros past T */
template <int HS>
static __device__ void tc_load(bf16 *sm, const float *src, int r0, int T, int stride)
{
    constexpr int V4 = HS / 4, LD = tc_dims<HS>::LD;
    for (int e = threadIdx.x; e < TB * V4; e += TTHREADS) {
        int r = e / V4, c = (e - r * V4) * 4;
        float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r0 + r < T)
            x = *reinterpret_cast<const float4 *>(src + (size_t)(r0 + r) * stride + c);
        __nv_bfloat162 *d = reinterpret_cast<__nv_bfloat162 *>(sm + r * LD + c);
        d[0] = __floats2bfloat162_rn(x.x, x.y);
        d[1] = __floats2bfloat162_rn(x.z, x.w);
    }
}

/* Ls (log2 domain) and Ds = dout . out (fp32) of the tile's 64 query rows:
 * two threads a row, half of its columns each; 0 past T */
template <int HS>
static __device__ void tc_rows(float *Ls, float *Ds, const float *dy, const float *o,
                               const float *lse_bh, int i0, int T, int C)
{
    int r = threadIdx.x >> 1, hf = threadIdx.x & 1, i = i0 + r;
    float s = 0.0f;
    if (i < T) {
        const float4 *g = reinterpret_cast<const float4 *>(dy + (size_t)i * C + hf * (HS / 2));
        const float4 *x = reinterpret_cast<const float4 *>(o + (size_t)i * C + hf * (HS / 2));
#pragma unroll
        for (int c = 0; c < HS / 8; c++) {
            float4 a = g[c], bb = x[c];
            s += a.x * bb.x + a.y * bb.y + a.z * bb.z + a.w * bb.w;
        }
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    if (!hf) {
        Ds[r] = s;
        Ls[r] = i < T ? lse_bh[i] * LOG2E : 0.0f;
    }
}

/* c[0..3] (16 x 64) = a rows (16 x HS at `a`) times the 64 rows at `b`
 * transposed (both bf16, stride LD) */
template <int HS>
static __device__ void tc_abt(frag_c *c, const bf16 *a, const bf16 *b)
{
    constexpr int LD = tc_dims<HS>::LD;
#pragma unroll
    for (int n = 0; n < 4; n++)
        wm::fill_fragment(c[n], 0.0f);
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        frag_a fa;
        wm::load_matrix_sync(fa, a + kk * 16, LD);
#pragma unroll
        for (int n = 0; n < 4; n++) {
            frag_bcol fb;
            wm::load_matrix_sync(fb, b + n * 16 * LD + kk * 16, LD);
            wm::mma_sync(c[n], fa, fb, c[n]);
        }
    }
}

/* acc[0..KN) (16 x HS) += p (16 x 64, bf16, stride PLD) times the 64 x HS
 * tile at b (bf16, stride LD) */
template <int HS>
static __device__ void tc_pb(frag_c *acc, const bf16 *p, const bf16 *b)
{
    constexpr int LD = tc_dims<HS>::LD;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        frag_a fa;
        wm::load_matrix_sync(fa, p + kk * 16, PLD);
#pragma unroll
        for (int n = 0; n < HS / 16; n++) {
            frag_brow fb;
            wm::load_matrix_sync(fb, b + kk * 16 * LD + n * 16, LD);
            wm::mma_sync(acc[n], fa, fb, acc[n]);
        }
    }
}

/* a warp's 16 x HS accumulators to global rows (row0 + r) * stride, rows
 * below T, through the warp's staging area */
template <int HS>
static __device__ void tc_store_rows(float *dst, size_t stride, int row0, int T, frag_c *acc,
                                     float *stage)
{
    constexpr int OLD = tc_dims<HS>::OLD;
    int lane = threadIdx.x & 31, row = lane >> 1, hf = lane & 1;
    __syncwarp();
#pragma unroll
    for (int n = 0; n < HS / 16; n++)
        wm::store_matrix_sync(stage + n * 16, acc[n], OLD, wm::mem_row_major);
    __syncwarp();
    if (row0 + row < T) {
        const float4 *s = reinterpret_cast<const float4 *>(stage + row * OLD + hf * (HS / 2));
        float4 *d = reinterpret_cast<float4 *>(dst + (size_t)(row0 + row) * stride + hf * (HS / 2));
#pragma unroll
        for (int c = 0; c < HS / 8; c++)
            d[c] = s[c];
    }
    __syncwarp();
}

template <int HS> static size_t tc_fwd_smem()
{
    return (size_t)3 * TB * tc_dims<HS>::LD * 2 + (size_t)TWARPS * 16 * PLD * 2 +
           (size_t)TWARPS * 16 * (SLD > tc_dims<HS>::OLD ? SLD : tc_dims<HS>::OLD) * 4;
}

template <int HS>
static __global__ void __launch_bounds__(TTHREADS)
    att_fwd_tc(float *out, float *lse, const float *qkv, int T, int C, int NH, float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) unsigned char att_tc_sm[];
    constexpr int LD = tc_dims<HS>::LD, OLD = tc_dims<HS>::OLD;
    constexpr int STW = 16 * (SLD > OLD ? SLD : OLD);
    bf16 *qs = reinterpret_cast<bf16 *>(att_tc_sm), *ks = qs + TB * LD, *vs = ks + TB * LD;
    bf16 *ps = vs + TB * LD;
    float *st = reinterpret_cast<float *>(ps + TWARPS * 16 * PLD);
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31, row = lane >> 1, hf = lane & 1;
    int bh = blockIdx.x, b = bh / NH, h = bh - b * NH;
    int i0 = (gridDim.y - 1 - blockIdx.y) * TB, i = i0 + w * 16 + row;
    const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * HS, *k = q + C, *v = q + 2 * C;
    bf16 *pw = ps + w * 16 * PLD;
    float *sw = st + w * STW;
    float sl2 = scale * LOG2E, m = NEG_BIG, l = 0.0f, o[HS / 2];
#pragma unroll
    for (int c = 0; c < HS / 2; c++)
        o[c] = 0.0f;
    tc_load<HS>(qs, q, i0, T, 3 * C);
    int jend = T < i0 + TB ? T : i0 + TB;
    for (int j0 = 0; j0 < jend; j0 += TB) {
        __syncthreads();
        tc_load<HS>(ks, k, j0, T, 3 * C);
        tc_load<HS>(vs, v, j0, T, 3 * C);
        __syncthreads();
        frag_c sc[4];
        tc_abt<HS>(sc, qs + w * 16 * LD, ks);
#pragma unroll
        for (int n = 0; n < 4; n++)
            wm::store_matrix_sync(sw + n * 16, sc[n], SLD, wm::mem_row_major);
        __syncwarp();
        /* online softmax of this lane's 32 scores of row i */
        float sv[32], mx = -INFINITY;
        const float *sr = sw + row * SLD + hf * 32;
#pragma unroll
        for (int u = 0; u < 32; u++) {
            int j = j0 + hf * 32 + u;
            sv[u] = j <= i && j < T ? sr[u] * sl2 : -INFINITY;
            mx = fmaxf(mx, sv[u]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mn = fmaxf(m, mx), alpha = exp2f(m - mn), sum = 0.0f;
        bf16 *pr = pw + row * PLD + hf * 32;
#pragma unroll
        for (int u = 0; u < 32; u += 2) {
            float p0 = exp2f(sv[u] - mn), p1 = exp2f(sv[u + 1] - mn);
            sum += p0 + p1;
            *reinterpret_cast<__nv_bfloat162 *>(pr + u) = __floats2bfloat162_rn(p0, p1);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * alpha + sum;
        m = mn;
#pragma unroll
        for (int c = 0; c < HS / 2; c++)
            o[c] *= alpha;
        __syncwarp();
        /* this tile's p v, staged and added to the lane's half row */
        frag_c acc[HS / 16];
#pragma unroll
        for (int n = 0; n < HS / 16; n++)
            wm::fill_fragment(acc[n], 0.0f);
        tc_pb<HS>(acc, pw, vs);
#pragma unroll
        for (int n = 0; n < HS / 16; n++)
            wm::store_matrix_sync(sw + n * 16, acc[n], OLD, wm::mem_row_major);
        __syncwarp();
        const float *orow = sw + row * OLD + hf * (HS / 2);
#pragma unroll
        for (int c = 0; c < HS / 2; c++)
            o[c] += orow[c];
        __syncwarp();
    }
    if (i < T) {
        float inv = 1.0f / l;
        float4 *d = reinterpret_cast<float4 *>(out + ((size_t)b * T + i) * C + (size_t)h * HS +
                                               hf * (HS / 2));
#pragma unroll
        for (int c = 0; c < HS / 8; c++)
            d[c] = make_float4(o[4 * c] * inv, o[4 * c + 1] * inv, o[4 * c + 2] * inv,
                               o[4 * c + 3] * inv);
        if (!hf)
            lse[(size_t)bh * T + i] = m * LN2 + logf(l);
    }
#endif
}

template <int HS> static size_t tc_bwd_smem()
{
    return (size_t)4 * TB * tc_dims<HS>::LD * 2 + (size_t)TWARPS * 16 * PLD * 2 * 2 +
           (size_t)TWARPS * 2 * 16 * SLD * 4 + (size_t)2 * TB * 4;
}

/* the shared layout of both backward kernels: four 64 x HS bf16 tiles, two
 * 16 x 64 bf16 tiles and a 2 x 16 x 64 fp32 staging area per warp, then
 * the 64 rows' Ls and Ds */
template <int HS> struct tc_bwd_sm {
    bf16 *t0, *t1, *t2, *t3, *pa, *pb;
    float *sw, *dw, *Ls, *Ds;
    __device__ tc_bwd_sm(unsigned char *base, int w)
    {
        constexpr int LD = tc_dims<HS>::LD;
        t0 = reinterpret_cast<bf16 *>(base);
        t1 = t0 + TB * LD, t2 = t1 + TB * LD, t3 = t2 + TB * LD;
        bf16 *p = t3 + TB * LD;
        pa = p + w * 16 * PLD;
        pb = p + TWARPS * 16 * PLD + w * 16 * PLD;
        float *st = reinterpret_cast<float *>(p + 2 * TWARPS * 16 * PLD);
        sw = st + w * 2 * 16 * SLD;
        dw = sw + 16 * SLD;
        Ls = st + TWARPS * 2 * 16 * SLD;
        Ds = Ls + TB;
    }
};

/* dk and dv of a 64-key tile: warp w owns keys j0 + 16w..; for each query
 * tile at or below the diagonal, s^T = k q^T and dp^T = v dout^T (16 x 64
 * per warp), p^T and dpre^T in fp32, then dv += p^T dout, dk += dpre^T q */
template <int HS>
static __global__ void __launch_bounds__(TTHREADS)
    att_bwd_dkdv_tc(float *dqkv, const float *dout, const float *qkv, const float *out,
                    const float *lse, int T, int C, int NH, float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) unsigned char att_tc_sm[];
    constexpr int LD = tc_dims<HS>::LD, KN = tc_dims<HS>::KN;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31, row = lane >> 1, hf = lane & 1;
    tc_bwd_sm<HS> s(att_tc_sm, w);
    bf16 *ks = s.t0, *vs = s.t1, *qs = s.t2, *dos = s.t3;
    int bh = blockIdx.x, b = bh / NH, h = bh - b * NH;
    int j0 = blockIdx.y * TB, j = j0 + w * 16 + row;
    size_t hoff = (size_t)h * HS, C3 = (size_t)3 * C;
    const float *q = qkv + (size_t)b * T * C3 + hoff, *k = q + C, *v = q + 2 * C;
    const float *dy = dout + (size_t)b * T * C + hoff, *o = out + (size_t)b * T * C + hoff;
    float sl2 = scale * LOG2E;
    tc_load<HS>(ks, k, j0, T, 3 * C);
    tc_load<HS>(vs, v, j0, T, 3 * C);
    frag_c dk[KN], dv[KN];
#pragma unroll
    for (int n = 0; n < KN; n++) {
        wm::fill_fragment(dk[n], 0.0f);
        wm::fill_fragment(dv[n], 0.0f);
    }
    for (int i0 = j0; i0 < T; i0 += TB) {
        __syncthreads();
        tc_load<HS>(qs, q, i0, T, 3 * C);
        tc_load<HS>(dos, dy, i0, T, C);
        tc_rows<HS>(s.Ls, s.Ds, dy, o, lse + (size_t)bh * T, i0, T, C);
        __syncthreads();
        frag_c sc[4], dp[4];
        tc_abt<HS>(sc, ks + w * 16 * LD, qs);
        tc_abt<HS>(dp, vs + w * 16 * LD, dos);
#pragma unroll
        for (int n = 0; n < 4; n++) {
            wm::store_matrix_sync(s.sw + n * 16, sc[n], SLD, wm::mem_row_major);
            wm::store_matrix_sync(s.dw + n * 16, dp[n], SLD, wm::mem_row_major);
        }
        __syncwarp();
        /* key j's row: queries i0 + 32 hf + u */
#pragma unroll 8
        for (int u = 0; u < 32; u += 2) {
            float pv[2], gv[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int t = hf * 32 + u + e, i = i0 + t;
                float p = i < T && j <= i ? exp2f(s.sw[row * SLD + t] * sl2 - s.Ls[t]) : 0.0f;
                pv[e] = p;
                gv[e] = p * (s.dw[row * SLD + t] - s.Ds[t]) * scale;
            }
            *reinterpret_cast<__nv_bfloat162 *>(s.pa + row * PLD + hf * 32 + u) =
                __floats2bfloat162_rn(pv[0], pv[1]);
            *reinterpret_cast<__nv_bfloat162 *>(s.pb + row * PLD + hf * 32 + u) =
                __floats2bfloat162_rn(gv[0], gv[1]);
        }
        __syncwarp();
        tc_pb<HS>(dv, s.pa, dos);
        tc_pb<HS>(dk, s.pb, qs);
    }
    float *dk_out = dqkv + (size_t)b * T * C3 + hoff + C;
    tc_store_rows<HS>(dk_out, C3, j0 + w * 16, T, dk, s.sw);
    tc_store_rows<HS>(dk_out + C, C3, j0 + w * 16, T, dv, s.sw);
#endif
}

/* dq of a 64-row query tile: warp w owns rows i0 + 16w..; for each key tile
 * at or below the diagonal, s = q k^T and dp = dout v^T, dpre in fp32, then
 * dq += dpre k */
template <int HS>
static __global__ void __launch_bounds__(TTHREADS)
    att_bwd_dq_tc(float *dqkv, const float *dout, const float *qkv, const float *out,
                  const float *lse, int T, int C, int NH, float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) unsigned char att_tc_sm[];
    constexpr int LD = tc_dims<HS>::LD, KN = tc_dims<HS>::KN;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31, row = lane >> 1, hf = lane & 1;
    tc_bwd_sm<HS> s(att_tc_sm, w);
    bf16 *qs = s.t0, *dos = s.t1, *ks = s.t2, *vs = s.t3;
    int bh = blockIdx.x, b = bh / NH, h = bh - b * NH;
    int i0 = (gridDim.y - 1 - blockIdx.y) * TB, r = w * 16 + row, i = i0 + r;
    size_t hoff = (size_t)h * HS, C3 = (size_t)3 * C;
    const float *q = qkv + (size_t)b * T * C3 + hoff, *k = q + C, *v = q + 2 * C;
    const float *dy = dout + (size_t)b * T * C + hoff, *o = out + (size_t)b * T * C + hoff;
    float sl2 = scale * LOG2E;
    tc_load<HS>(qs, q, i0, T, 3 * C);
    tc_load<HS>(dos, dy, i0, T, C);
    tc_rows<HS>(s.Ls, s.Ds, dy, o, lse + (size_t)bh * T, i0, T, C);
    frag_c dq[KN];
#pragma unroll
    for (int n = 0; n < KN; n++)
        wm::fill_fragment(dq[n], 0.0f);
    int jend = T < i0 + TB ? T : i0 + TB;
    for (int j0 = 0; j0 < jend; j0 += TB) {
        __syncthreads();
        tc_load<HS>(ks, k, j0, T, 3 * C);
        tc_load<HS>(vs, v, j0, T, 3 * C);
        __syncthreads();
        frag_c sc[4], dp[4];
        tc_abt<HS>(sc, qs + w * 16 * LD, ks);
        tc_abt<HS>(dp, dos + w * 16 * LD, vs);
#pragma unroll
        for (int n = 0; n < 4; n++) {
            wm::store_matrix_sync(s.sw + n * 16, sc[n], SLD, wm::mem_row_major);
            wm::store_matrix_sync(s.dw + n * 16, dp[n], SLD, wm::mem_row_major);
        }
        __syncwarp();
        float Li = s.Ls[r], Di = s.Ds[r];
#pragma unroll 8
        for (int u = 0; u < 32; u += 2) {
            float gv[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int t = hf * 32 + u + e, jj = j0 + t;
                float p = jj <= i && jj < T ? exp2f(s.sw[row * SLD + t] * sl2 - Li) : 0.0f;
                gv[e] = p * (s.dw[row * SLD + t] - Di) * scale;
            }
            *reinterpret_cast<__nv_bfloat162 *>(s.pa + row * PLD + hf * 32 + u) =
                __floats2bfloat162_rn(gv[0], gv[1]);
        }
        __syncwarp();
        tc_pb<HS>(dq, s.pa, ks);
    }
    tc_store_rows<HS>(dqkv + (size_t)b * T * C3 + hoff, C3, i0 + w * 16, T, dq, s.sw);
#endif
}

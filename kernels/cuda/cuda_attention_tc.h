/* The tensor-core kernels of cuda_attention.cu (bf16 precision, head sizes
 * 32, 64 and 128; sm_80 and later, and the emulation), in
 * FlashAttention-2's register scheme. Products are mma.sync m16n8k16 (bf16
 * inputs, fp32 accumulators), whose fragment layouts the PTX ISA documents
 * ("Matrix Fragments for mma.m16n8k16"); with g = lane / 4, t = lane % 4:
 *   A (16 x 16): a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
 *   B (16 x 8):  b0 (2t..2t+1, g)  b1 (2t+8.., g)
 *   C (16 x 8):  c0 c1 (g, 2t..2t+1)  c2 c3 (g+8, 2t..2t+1)
 * so two accumulator tiles side by side hold, element for element, the A
 * operand of the next product: scores stay in registers from s = q k^T
 * through the softmax (or backward's p and dpre) into p v, with no staging
 * through shared memory.
 *
 * A block of 4 warps owns one (b, h) and a tile of TB = 64 query rows
 * (forward, dq) or keys (dk, dv); each warp owns 16 of them. Tiles of q, k,
 * v and dout are loaded as fp32 from global memory and stored as bf16 in
 * shared memory, row-major with a row stride of HS + 8 (fragment reads and
 * ldmatrix rows then fall on distinct banks). An operand read as stored
 * (A, or B = a tile's rows as columns) takes 32-bit loads; one that needs
 * the tile's transpose (v in p v, dout and q in dv and dk, k in dq) takes
 * ldmatrix .trans. On the diagonal tile a warp skips the products whose
 * scores the causal mask removes whole. The softmax, the mask and all
 * statistics run in fp32; scores are kept in the log2 domain
 * (scale * log2 e), lse in natural log.
 *
 * The emulation runs the same kernels with mma and ldmatrix done lane by
 * lane (an exchange through shared memory, a barrier of the block: every
 * thread calls them, a skipped product only leaves its accumulator alone). */
#include <stdint.h>
#ifndef RUMOR_CUDA_EMU
#include <cuda_bf16.h>
#endif

#define TB 64              /* query rows and keys per tile */
#define TWARPS 4
#define TTHREADS (32 * TWARPS)
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

#if defined(RUMOR_CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define TC_BUILD 1
#else
#define TC_BUILD 0
#endif

template <int HS> struct tc_dims {
    static constexpr int LD = HS + 8, KN = HS / 16, NN = HS / 8;
};

/* two floats as a bf16 pair (lo in the low half), rounded to nearest even */
static __device__ __forceinline__ uint32_t tc_pack(float lo, float hi)
{
#ifdef RUMOR_CUDA_EMU
    float a = emu_round(lo, 16), b = emu_round(hi, 16);
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return (ua >> 16) | (ub & 0xffff0000u);
#else
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
#endif
}

static __device__ __forceinline__ uint32_t tc_ld32(const uint16_t *p)
{
    return *reinterpret_cast<const uint32_t *>(p);
}

#ifdef RUMOR_CUDA_EMU
static inline float emu_bf(uint32_t v, int hi)
{
    uint32_t u = hi ? (v & 0xffff0000u) : v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#endif

/* c (16 x 8) += a (16 x 16) b (16 x 8), when `on` (warp-uniform) */
static __device__ __forceinline__ void tc_mma(float *c, const uint32_t *a, uint32_t b0,
                                              uint32_t b1, bool on)
{
#ifdef RUMOR_CUDA_EMU
    __shared__ uint32_t slot[1024 * 6];
    unsigned t = threadIdx.x, lane = t & 31, base = t - lane, g = lane >> 2, q = lane & 3;
    uint32_t *my = slot + 6 * t;
    my[0] = a[0], my[1] = a[1], my[2] = a[2], my[3] = a[3], my[4] = b0, my[5] = b1;
    __syncthreads();
    float r[4];
    for (int e = 0; e < 4; e++) {
        int row = (int)g + 8 * (e >> 1), col = 2 * (int)q + (e & 1);
        float s = c[e];
        for (int k = 0; k < 16; k++) {
            int tq = (k & 7) >> 1, hi = k >> 3, half = k & 1;
            uint32_t av = slot[6 * (base + 4 * (row & 7) + tq) + 2 * hi + (row >> 3)];
            uint32_t bv = slot[6 * (base + 4 * col + tq) + 4 + hi];
            s += emu_bf(av, half) * emu_bf(bv, half);
        }
        r[e] = s;
    }
    __syncthreads();
    if (on)
        for (int e = 0; e < 4; e++)
            c[e] = r[e];
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (on)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1, (void)on;
#endif
}

/* the A fragment of rows r0.., columns c0.. of a row-major tile */
static __device__ __forceinline__ void tc_frag_a(uint32_t *a, const uint16_t *sm, int ld, int r0,
                                                 int c0)
{
    int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const uint16_t *p = sm + (r0 + g) * ld + c0 + 2 * q;
    a[0] = tc_ld32(p);
    a[1] = tc_ld32(p + 8 * ld);
    a[2] = tc_ld32(p + 8);
    a[3] = tc_ld32(p + 8 * ld + 8);
}

/* the B fragment whose column n is row n0 + n of a row-major tile and whose
 * rows are that row's columns c0.. (B = the tile's rows, transposed) */
static __device__ __forceinline__ void tc_frag_bt(uint32_t *b, const uint16_t *sm, int ld, int n0,
                                                  int c0)
{
    int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const uint16_t *p = sm + (n0 + g) * ld + c0 + 2 * q;
    b[0] = tc_ld32(p);
    b[1] = tc_ld32(p + 8);
}

/* the B fragments of columns c0.. and c0 + 8.. of a row-major tile, rows
 * r0..r0 + 15 (B = the tile as stored): r[0], r[1] for the first, r[2],
 * r[3] for the second; ldmatrix .x4 .trans */
static __device__ __forceinline__ void tc_frag_b2(uint32_t *r, const uint16_t *sm, int ld, int r0,
                                                  int c0)
{
    int lane = threadIdx.x & 31;
#ifdef RUMOR_CUDA_EMU
    int g = lane >> 2, q = lane & 3;
    for (int m = 0; m < 4; m++) {
        const uint16_t *p = sm + (r0 + 8 * (m & 1) + 2 * q) * ld + c0 + 8 * (m >> 1) + g;
        r[m] = (uint32_t)p[0] | (uint32_t)p[ld] << 16;
    }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    int m = lane >> 3;
    const uint16_t *p = sm + (r0 + (lane & 7) + 8 * (m & 1)) * ld + c0 + 8 * (m >> 1);
    unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#else
    (void)lane, (void)sm, (void)ld, (void)r0, (void)c0;
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

/* the A fragments (16 rows x 64 columns, k-steps kk = 0..3) of the 16 x 64
 * accumulator tiles s[0..7] */
static __device__ __forceinline__ void tc_acc_to_a(uint32_t (*a)[4], float (*s)[4])
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        a[kk][0] = tc_pack(s[2 * kk][0], s[2 * kk][1]);
        a[kk][1] = tc_pack(s[2 * kk][2], s[2 * kk][3]);
        a[kk][2] = tc_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        a[kk][3] = tc_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
}

/* s[0..7] (16 x 64) = rows r0.. of tile a times the 64 rows of tile b,
 * transposed; n-tile n only where `from <= n <= to` */
template <int HS>
static __device__ __forceinline__ void tc_abt(float (*s)[4], const uint16_t *a, int r0,
                                              const uint16_t *b, int from, int to)
{
    constexpr int LD = tc_dims<HS>::LD;
#pragma unroll
    for (int n = 0; n < 8; n++)
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        uint32_t fa[4];
        tc_frag_a(fa, a, LD, r0, 16 * kk);
#pragma unroll
        for (int n = 0; n < 8; n++) {
            uint32_t fb[2];
            tc_frag_bt(fb, b, LD, 8 * n, 16 * kk);
            tc_mma(s[n], fa, fb[0], fb[1], n >= from && n <= to);
        }
    }
}

/* acc[0..HS/8) (16 x HS) += p (16 x 64, A fragments) times the 64 x HS tile
 * b; k-step kk only where `from <= kk <= to` */
template <int HS>
static __device__ __forceinline__ void tc_pb(float (*acc)[4], uint32_t (*p)[4], const uint16_t *b,
                                             int from, int to)
{
    constexpr int LD = tc_dims<HS>::LD;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        bool on = kk >= from && kk <= to;
#pragma unroll
        for (int n = 0; n < HS / 8; n += 2) {
            uint32_t fb[4];
            tc_frag_b2(fb, b, LD, 16 * kk, 8 * n);
            tc_mma(acc[n], p[kk], fb[0], fb[1], on);
            tc_mma(acc[n + 1], p[kk], fb[2], fb[3], on);
        }
    }
}

/* rows [r0, r0 + TB) of one head's matrix (row stride `stride`, 16-byte
 * aligned rows) into sm as bf16, zeros past T */
template <int HS>
static __device__ void tc_load(uint16_t *sm, const float *src, int r0, int T, int stride)
{
    constexpr int V4 = HS / 4, LD = tc_dims<HS>::LD;
    for (int e = threadIdx.x; e < TB * V4; e += TTHREADS) {
        int r = e / V4, c = (e - r * V4) * 4;
        float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r0 + r < T)
            x = *reinterpret_cast<const float4 *>(src + (size_t)(r0 + r) * stride + c);
        uint32_t *d = reinterpret_cast<uint32_t *>(sm + r * LD + c);
        d[0] = tc_pack(x.x, x.y);
        d[1] = tc_pack(x.z, x.w);
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
    s += CU_SHFL_XOR(s, 1);
    if (!hf) {
        Ds[r] = s;
        Ls[r] = i < T ? lse_bh[i] * LOG2E : 0.0f;
    }
}

/* rows row0 + g and row0 + g + 8 (below T) of a warp's 16 x HS accumulators
 * to dst (row stride `stride`), times `mul` per row */
template <int HS>
static __device__ void tc_store(float *dst, size_t stride, int row0, int T, float (*acc)[4],
                                const float *mul)
{
    int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int i = row0 + g + 8 * r;
        if (i >= T)
            continue;
        float *d = dst + (size_t)i * stride + 2 * q;
#pragma unroll
        for (int n = 0; n < HS / 8; n++)
            *reinterpret_cast<float2 *>(d + 8 * n) =
                make_float2(acc[n][2 * r] * mul[r], acc[n][2 * r + 1] * mul[r]);
    }
}

/* a thread's place: its warp w, its lane's g = lane / 4 and t = lane % 4
 * (q4), its block's head bh = (b, h) */
struct tc_ids {
    int w, g, q4, bh, b, h;
    __device__ explicit tc_ids(int NH)
    {
        int lane = (int)threadIdx.x & 31;
        w = (int)threadIdx.x >> 5, g = lane >> 2, q4 = lane & 3;
        bh = (int)blockIdx.x, b = bh / NH, h = bh - b * NH;
    }
};

template <int HS> static size_t tc_fwd_smem()
{
    return (size_t)3 * TB * tc_dims<HS>::LD * 2;
}

template <int HS>
static __global__ void __launch_bounds__(TTHREADS)
    att_fwd_tc(float *out, float *lse, const float *qkv, int T, int C, int NH, float scale)
{
#if TC_BUILD
    CU_DYNAMIC_SHARED(unsigned char, att_tc_sm);
    constexpr int LD = tc_dims<HS>::LD, KN = tc_dims<HS>::KN, NN = tc_dims<HS>::NN;
    uint16_t *qs = reinterpret_cast<uint16_t *>(att_tc_sm), *ks = qs + TB * LD, *vs = ks + TB * LD;
    tc_ids id(NH);
    int w = id.w, g = id.g, q4 = id.q4, bh = id.bh, b = id.b, h = id.h;
    int i0 = (int)(gridDim.y - 1 - blockIdx.y) * TB, r0 = 16 * w;
    const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * HS, *k = q + C, *v = q + 2 * C;
    float sl2 = scale * LOG2E;
    tc_load<HS>(qs, q, i0, T, 3 * C);
    __syncthreads();
    uint32_t qf[KN][4];
#pragma unroll
    for (int kk = 0; kk < KN; kk++)
        tc_frag_a(qf[kk], qs, LD, r0, 16 * kk);
    float o[NN][4], m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f };
#pragma unroll
    for (int n = 0; n < NN; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    int jend = T < i0 + TB ? T : i0 + TB;
    for (int j0 = 0; j0 < jend; j0 += TB) {
        __syncthreads();
        tc_load<HS>(ks, k, j0, T, 3 * C);
        tc_load<HS>(vs, v, j0, T, 3 * C);
        __syncthreads();
        /* on the diagonal tile, this warp's rows see keys up to r0 + 15 */
        int ntop = j0 == i0 ? 2 * w + 1 : 7;
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++)
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KN; kk++)
#pragma unroll
            for (int n = 0; n < 8; n++) {
                uint32_t fb[2];
                tc_frag_bt(fb, ks, LD, 8 * n, 16 * kk);
                tc_mma(s[n], qf[kk], fb[0], fb[1], n <= ntop);
            }
        float mx[2] = { -INFINITY, -INFINITY };
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int row = i0 + r0 + g + 8 * (e >> 1), key = j0 + 8 * n + 2 * q4 + (e & 1);
                float x = key <= row && key < T ? s[n][e] * sl2 : -INFINITY;
                s[n][e] = x;
                mx[e >> 1] = fmaxf(mx[e >> 1], x);
            }
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], CU_SHFL_XOR(mx[r], 1));
            mx[r] = fmaxf(mx[r], CU_SHFL_XOR(mx[r], 2));
            float mn = fmaxf(m[r], mx[r]);
            alpha[r] = exp2f(m[r] - mn);
            m[r] = mn;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int n = 0; n < NN; n++) {
            o[n][0] *= alpha[0], o[n][1] *= alpha[0];
            o[n][2] *= alpha[1], o[n][3] *= alpha[1];
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = exp2f(s[n][e] - m[e >> 1]);
                l[e >> 1] += p;
                s[n][e] = p;
            }
        uint32_t pa[4][4];
        tc_acc_to_a(pa, s);
        tc_pb<HS>(o, pa, vs, 0, ntop >> 1);
    }
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += CU_SHFL_XOR(l[r], 1);
        l[r] += CU_SHFL_XOR(l[r], 2);
        inv[r] = 1.0f / l[r];
    }
    tc_store<HS>(out + (size_t)b * T * C + (size_t)h * HS, (size_t)C, i0 + r0, T, o, inv);
    if (q4 == 0)
        for (int r = 0; r < 2; r++) {
            int i = i0 + r0 + g + 8 * r;
            if (i < T)
                lse[(size_t)bh * T + i] = m[r] * LN2 + logf(l[r]);
        }
#endif
}

/* the backward kernels' shared memory: four 64 x HS bf16 tiles t[0..3],
 * then the tile's 64 rows' L (log2 domain) and D */
template <int HS> struct tc_bwd_sm {
    uint16_t *t[4];
    float *Ls, *Ds;
    __device__ explicit tc_bwd_sm(unsigned char *base)
    {
        constexpr int LD = tc_dims<HS>::LD;
        for (int i = 0; i < 4; i++)
            t[i] = reinterpret_cast<uint16_t *>(base) + i * TB * LD;
        Ls = reinterpret_cast<float *>(t[3] + TB * LD);
        Ds = Ls + TB;
    }
};

template <int HS> static size_t tc_bwd_smem()
{
    return (size_t)4 * TB * tc_dims<HS>::LD * 2 + (size_t)2 * TB * 4;
}

/* dk and dv of a 64-key tile: warp w owns keys j0 + 16w..; for each query
 * tile at or below the diagonal, s^T = k q^T and dp^T = v dout^T (16 x 64
 * per warp), p^T and dpre^T in fp32, then dv += p^T dout, dk += dpre^T q */
template <int HS>
static __global__ void __launch_bounds__(TTHREADS)
    att_bwd_dkdv_tc(float *dqkv, const float *dout, const float *qkv, const float *out,
                    const float *lse, int T, int C, int NH, float scale)
{
#if TC_BUILD
    CU_DYNAMIC_SHARED(unsigned char, att_tc_sm);
    constexpr int NN = tc_dims<HS>::NN;
    tc_bwd_sm<HS> sm(att_tc_sm);
    uint16_t *ks = sm.t[0], *vs = sm.t[1], *qs = sm.t[2], *dos = sm.t[3];
    float *Ls = sm.Ls, *Ds = sm.Ds;
    tc_ids id(NH);
    int w = id.w, g = id.g, q4 = id.q4, bh = id.bh, b = id.b, h = id.h;
    int j0 = (int)blockIdx.y * TB, r0 = 16 * w;
    size_t hoff = (size_t)h * HS, C3 = (size_t)3 * C;
    const float *q = qkv + (size_t)b * T * C3 + hoff, *k = q + C, *v = q + 2 * C;
    const float *dy = dout + (size_t)b * T * C + hoff, *o = out + (size_t)b * T * C + hoff;
    float sl2 = scale * LOG2E;
    tc_load<HS>(ks, k, j0, T, 3 * C);
    tc_load<HS>(vs, v, j0, T, 3 * C);
    float dk[NN][4], dv[NN][4];
#pragma unroll
    for (int n = 0; n < NN; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[n][e] = dv[n][e] = 0.0f;
    for (int i0 = j0; i0 < T; i0 += TB) {
        __syncthreads();
        tc_load<HS>(qs, q, i0, T, 3 * C);
        tc_load<HS>(dos, dy, i0, T, C);
        tc_rows<HS>(Ls, Ds, dy, o, lse + (size_t)bh * T, i0, T, C);
        __syncthreads();
        /* on the diagonal tile, this warp's keys meet queries from r0 on */
        int nlow = i0 == j0 ? 2 * w : 0;
        float st[8][4], dpt[8][4];
        tc_abt<HS>(st, ks, r0, qs, nlow, 7);
        tc_abt<HS>(dpt, vs, r0, dos, nlow, 7);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = j0 + r0 + g + 8 * (e >> 1), c = 8 * n + 2 * q4 + (e & 1), i = i0 + c;
                float p = i < T && key <= i ? exp2f(st[n][e] * sl2 - Ls[c]) : 0.0f;
                dpt[n][e] = p * (dpt[n][e] - Ds[c]) * scale;
                st[n][e] = p;
            }
        uint32_t pa[4][4], da[4][4];
        tc_acc_to_a(pa, st);
        tc_acc_to_a(da, dpt);
        tc_pb<HS>(dv, pa, dos, nlow >> 1, 3);
        tc_pb<HS>(dk, da, qs, nlow >> 1, 3);
    }
    const float one[2] = { 1.0f, 1.0f };
    float *dk_out = dqkv + (size_t)b * T * C3 + hoff + C;
    tc_store<HS>(dk_out, C3, j0 + r0, T, dk, one);
    tc_store<HS>(dk_out + C, C3, j0 + r0, T, dv, one);
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
#if TC_BUILD
    CU_DYNAMIC_SHARED(unsigned char, att_tc_sm);
    constexpr int NN = tc_dims<HS>::NN;
    tc_bwd_sm<HS> sm(att_tc_sm);
    uint16_t *qs = sm.t[0], *dos = sm.t[1], *ks = sm.t[2], *vs = sm.t[3];
    float *Ls = sm.Ls, *Ds = sm.Ds;
    tc_ids id(NH);
    int w = id.w, g = id.g, q4 = id.q4, bh = id.bh, b = id.b, h = id.h;
    int i0 = (int)(gridDim.y - 1 - blockIdx.y) * TB, r0 = 16 * w;
    size_t hoff = (size_t)h * HS, C3 = (size_t)3 * C;
    const float *q = qkv + (size_t)b * T * C3 + hoff, *k = q + C, *v = q + 2 * C;
    const float *dy = dout + (size_t)b * T * C + hoff, *o = out + (size_t)b * T * C + hoff;
    float sl2 = scale * LOG2E;
    tc_load<HS>(qs, q, i0, T, 3 * C);
    tc_load<HS>(dos, dy, i0, T, C);
    tc_rows<HS>(Ls, Ds, dy, o, lse + (size_t)bh * T, i0, T, C);
    float dq[NN][4];
#pragma unroll
    for (int n = 0; n < NN; n++)
        dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    __syncthreads();
    float Li[2] = { Ls[r0 + g], Ls[r0 + g + 8] }, Di[2] = { Ds[r0 + g], Ds[r0 + g + 8] };
    int jend = T < i0 + TB ? T : i0 + TB;
    for (int j0 = 0; j0 < jend; j0 += TB) {
        __syncthreads();
        tc_load<HS>(ks, k, j0, T, 3 * C);
        tc_load<HS>(vs, v, j0, T, 3 * C);
        __syncthreads();
        int ntop = j0 == i0 ? 2 * w + 1 : 7;
        float s[8][4], dp[8][4];
        tc_abt<HS>(s, qs, r0, ks, 0, ntop);
        tc_abt<HS>(dp, dos, r0, vs, 0, ntop);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int i = i0 + r0 + g + 8 * (e >> 1), key = j0 + 8 * n + 2 * q4 + (e & 1);
                float p = key <= i && key < T ? exp2f(s[n][e] * sl2 - Li[e >> 1]) : 0.0f;
                dp[n][e] = p * (dp[n][e] - Di[e >> 1]) * scale;
            }
        uint32_t da[4][4];
        tc_acc_to_a(da, dp);
        tc_pb<HS>(dq, da, ks, 0, ntop >> 1);
    }
    const float one[2] = { 1.0f, 1.0f };
    tc_store<HS>(dqkv + (size_t)b * T * C3 + hoff, C3, i0 + r0, T, dq, one);
#endif
}

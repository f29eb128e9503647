/* Token and position embeddings (GPT-2: wte (V, C), wpe (maxT, C)).
 *
 * Forward runs a block per (b, t) row (grid-stride over the rows), the
 * token read once a row and the row's C columns read and written
 * contiguously.
 *
 * dwte[tok] += dout collides wherever a token repeats in the batch. Instead
 * of float atomics (a sum whose order, and so whose last bits, vary from run
 * to run), each warp owns WTE_ROWS rows of dwte and WTE_COLS * 32 of its
 * columns: the block reads the tokens in tiles into shared memory, each
 * warp finds the positions holding one of its rows (a ballot built from
 * butterfly shuffles) and adds those positions' dout rows in position order,
 * a lane a column, keeping the sum in registers while the same row repeats.
 * Every element of dwte gets its terms in the CPU's order (cpu_tf.c): the
 * same bits on every run, and the CPU's bits. dwpe is a plain sum over b,
 * one thread per (t, c), in the CPU's order (b = 0 first). */
#include "cuda_int.h"

#define THREADS 256

/* threads for rows of C: up to THREADS, a multiple of the warp */
static unsigned row_threads(int C)
{
    int t = (C + 31) / 32 * 32;
    return t < THREADS ? (unsigned)t : THREADS;
}

static unsigned row_grid(size_t rows) { return rows < 65535u * 16u ? (unsigned)rows : 65535u * 16u; }

/* out (B,T,C) = wte[tok[b,t]] + wpe[t] */
static __global__ void embed_fwd_kernel(float *out, const int32_t *tok, const float *wte,
                                        const float *wpe, size_t rows, int T, int C)
{
    for (size_t bt = blockIdx.x; bt < rows; bt += gridDim.x) {
        const float *e = wte + (size_t)tok[bt] * C, *p = wpe + (bt % (size_t)T) * C;
        float *o = out + bt * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = e[c] + p[c];
    }
}

void cu_embed_forward(rumor_device_t *d, float *out, const int32_t *tok, const float *wte,
                      const float *wpe, int B, int T, int C)
{
    size_t rows = (size_t)(B > 0 ? B : 0) * (size_t)(T > 0 ? T : 0);
    if (!rows || C <= 0)
        return;
    CU_ENTER(d);
    CU_LAUNCH(embed_fwd_kernel, row_grid(rows), row_threads(C), 0, cu_of(d)->cur, out, tok, wte,
              wpe, rows, T, C);
    CU_LAUNCHED(d, "embed_forward");
}

#define WTE_WARPS 8   /* warps a block */
#define WTE_ROWS 64   /* rows of dwte a warp owns */
#define WTE_COLS 8    /* columns a lane: a block covers 256 of C, blockIdx.y picks which */
#define WTE_TILE 1024 /* tokens a shared tile */

/* dwte[tok[i]] += dout[i] for i in [0, rows), in order of i */
static __global__ void embed_bwd_wte_kernel(float *dwte, const float *dout, const int32_t *tok,
                                            int rows, int C)
{
    __shared__ int32_t st[WTE_TILE];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int v0 = ((int)blockIdx.x * WTE_WARPS + w) * WTE_ROWS; /* the warp's rows: [v0, v0 + ROWS) */
    int c0 = (int)blockIdx.y * 32 * WTE_COLS + lane;       /* the lane's columns: c0 + 32 k */
    float acc[WTE_COLS];
    int cur = -1; /* the row acc holds */
    for (int k = 0; k < WTE_COLS; k++)
        acc[k] = 0.0f;
    for (int base = 0; base < rows; base += WTE_TILE) {
        int n = rows - base < WTE_TILE ? rows - base : WTE_TILE;
        __syncthreads(); /* every warp is done with the tile before */
        for (int i = threadIdx.x; i < n; i += blockDim.x)
            st[i] = tok[base + i];
        __syncthreads();
        for (int i0 = 0; i0 < n; i0 += 32) { /* the same count in every warp: shuffles inside */
            int r = i0 + lane < n ? st[i0 + lane] - v0 : -1;
            unsigned mask = r >= 0 && r < WTE_ROWS ? 1u << lane : 0u;
            for (int m = 1; m < 32; m <<= 1)
                mask |= CU_SHFL_XOR(mask, m);
            while (mask) { /* the warp's positions in this group, in order */
                int j = (int)__ffs((int)mask) - 1;
                mask &= mask - 1;
                int row = st[i0 + j];
                if (row != cur) {
                    if (cur >= 0)
                        for (int k = 0; k < WTE_COLS; k++)
                            if (c0 + 32 * k < C)
                                dwte[(size_t)cur * C + c0 + 32 * k] = acc[k];
                    cur = row;
                    for (int k = 0; k < WTE_COLS; k++)
                        if (c0 + 32 * k < C)
                            acc[k] = dwte[(size_t)row * C + c0 + 32 * k];
                }
                const float *g = dout + (size_t)(base + i0 + j) * C;
                for (int k = 0; k < WTE_COLS; k++)
                    if (c0 + 32 * k < C)
                        acc[k] += g[c0 + 32 * k];
            }
        }
    }
    if (cur >= 0)
        for (int k = 0; k < WTE_COLS; k++)
            if (c0 + 32 * k < C)
                dwte[(size_t)cur * C + c0 + 32 * k] = acc[k];
}

/* dwpe (T,C) += sum over b of dout[b] (T,C) */
static __global__ void embed_bwd_wpe_kernel(float *dwpe, const float *dout, int B, size_t TC)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < TC;
         i += (size_t)gridDim.x * blockDim.x) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++)
            acc += dout[(size_t)b * TC + i];
        dwpe[i] = acc;
    }
}

void cu_embed_backward(rumor_device_t *d, float *dwte, float *dwpe, const float *dout,
                       const int32_t *tok, int B, int T, int C, int V)
{
    if (B <= 0 || T <= 0 || C <= 0 || V <= 0)
        return;
    CU_ENTER(d);
    cudaStream_t s = cu_of(d)->cur;
    size_t rows = (size_t)B * T, TC = (size_t)T * C;
    dim3 grid((unsigned)((V + WTE_WARPS * WTE_ROWS - 1) / (WTE_WARPS * WTE_ROWS)),
              (unsigned)((C + 32 * WTE_COLS - 1) / (32 * WTE_COLS)));
    CU_LAUNCH(embed_bwd_wte_kernel, grid, WTE_WARPS * 32, 0, s, dwte, dout, tok, (int)rows, C);
    CU_LAUNCHED(d, "embed_backward: dwte");
    if (!dwpe)
        return;
    CU_LAUNCH(embed_bwd_wpe_kernel, cu_blocks(TC, THREADS), THREADS, 0, s, dwpe, dout, B, TC);
    CU_LAUNCHED(d, "embed_backward: dwpe");
}

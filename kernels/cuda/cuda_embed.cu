/* Token and position embeddings (GPT-2: wte (V, C), wpe (maxT, C)).
 *
 * Forward and the dwte scatter run a block per (b, t) row (grid-stride over
 * the rows), the token read once a row and the row's C columns read and
 * written contiguously. dwte[tok] += dout collides wherever a token repeats
 * in the batch, so its adds are float atomicAdds: the sum is right, the
 * order of its terms (and so its last bits) varies from run to run. dwpe is
 * a plain sum over b, one thread per (t, c), in the CPU's order (b = 0
 * first), with no atomics. */
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

/* dwte[tok[b,t]] += dout[b,t] (rows colliding on a repeated token add) */
static __global__ void embed_bwd_wte_kernel(float *dwte, const float *dout, const int32_t *tok,
                                            size_t rows, int C)
{
    for (size_t bt = blockIdx.x; bt < rows; bt += gridDim.x) {
        float *e = dwte + (size_t)tok[bt] * C;
        const float *g = dout + bt * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            atomicAdd(e + c, g[c]);
    }
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
                       const int32_t *tok, int B, int T, int C)
{
    if (B <= 0 || T <= 0 || C <= 0)
        return;
    CU_ENTER(d);
    cudaStream_t s = cu_of(d)->cur;
    size_t rows = (size_t)B * T, TC = (size_t)T * C;
    CU_LAUNCH(embed_bwd_wte_kernel, row_grid(rows), row_threads(C), 0, s, dwte, dout, tok, rows,
              C);
    CU_LAUNCHED(d, "embed_backward: dwte");
    if (!dwpe)
        return;
    CU_LAUNCH(embed_bwd_wpe_kernel, cu_blocks(TC, THREADS), THREADS, 0, s, dwpe, dout, B, TC);
    CU_LAUNCHED(d, "embed_backward: dwpe");
}

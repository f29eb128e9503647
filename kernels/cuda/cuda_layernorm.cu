/* Layernorm over the last dimension (GPT-2: C = 768, rows = B*T up to
 * 65536), as llm.c's kernels do it: one warp per row for forward and for
 * dx (the row's sums are warp butterflies, the row re-read from cache for
 * each pass), and a column-strip reduction over the rows for dw and db.
 * Semantics are the CPU's (cpu_tf.c): mean and variance in two passes,
 * rstd = 1 / sqrt(var + eps); dx written (=) or added (accumulate); dw and
 * db added to (+=).
 *
 * Every thread of a block runs every shuffle and barrier: HIP-CPU's
 * shuffles are block-wide barriers (tests/cuda-emu), so the warps past the
 * last row redo the last row and write nothing instead of returning. */
#include "cuda_int.h"

#define ROW_WARPS 8 /* rows (warps) per block of the row kernels */

/* y (rows, C) = (x - mean) * rstd * w + b; mean, rstd (rows) saved */
static __global__ void ln_fwd_kernel(float *y, float *mean, float *rstd, const float *x,
                                     const float *w, const float *b, int rows, int C, float eps)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
    int live = row < rows;
    size_t r = live ? row : rows - 1;
    const float *xr = x + r * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += xr[c];
    float mu = cu_warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float t = xr[c] - mu;
        v += t * t;
    }
    float rs = 1.0f / sqrtf(cu_warp_sum(v) / C + eps);
    if (!live)
        return; /* after the last shuffle */
    float *yr = y + r * C;
    for (int c = lane; c < C; c += 32)
        yr[c] = (xr[c] - mu) * rs * w[c] + b[c];
    if (lane == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

static unsigned row_blocks(int rows) { return (unsigned)((rows + ROW_WARPS - 1) / ROW_WARPS); }

void cu_layernorm_forward(rumor_device_t *d, float *y, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int rows, int C, float eps)
{
    if (rows <= 0 || C <= 0)
        return;
    CU_ENTER(d);
    CU_LAUNCH(ln_fwd_kernel, row_blocks(rows), 32 * ROW_WARPS, 0, cu_of(d)->cur, y, mean, rstd,
              x, w, b, rows, C, eps);
    CU_LAUNCHED(d, "layernorm_forward");
}

/* dx (rows, C) = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w;
 * written, or added when accumulate. dx may alias dy (each lane reads its
 * elements before writing them). */
static __global__ void ln_bwd_x_kernel(float *dx, const float *dy, const float *x, const float *w,
                                       const float *mean, const float *rstd, int rows, int C,
                                       int accumulate)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
    int live = row < rows;
    size_t r = live ? row : rows - 1;
    const float *xr = x + r * C, *gr = dy + r * C;
    float mu = mean[r], rs = rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float g = gr[c] * w[c];
        sg += g;
        sgx += g * (xr[c] - mu) * rs;
    }
    float mg = cu_warp_sum(sg) / C, mgx = cu_warp_sum(sgx) / C;
    if (!live)
        return; /* after the last shuffle */
    float *dr = dx + r * C;
    for (int c = lane; c < C; c += 32) {
        float xh = (xr[c] - mu) * rs;
        float v = rs * (gr[c] * w[c] - mg - xh * mgx);
        dr[c] = accumulate ? dr[c] + v : v;
    }
}

void cu_layernorm_backward_x(rumor_device_t *d, float *dx, const float *dy, const float *x,
                             const float *w, const float *mean, const float *rstd, int rows, int C,
                             int accumulate)
{
    if (rows <= 0 || C <= 0)
        return;
    CU_ENTER(d);
    CU_LAUNCH(ln_bwd_x_kernel, row_blocks(rows), 32 * ROW_WARPS, 0, cu_of(d)->cur, dx, dy, x, w,
              mean, rstd, rows, C, accumulate);
    CU_LAUNCHED(d, "layernorm_backward_x");
}

/* Column sums over the rows: block (32, STRIP_ROWS) owns 32 columns (a
 * warp reads 128 contiguous bytes of a row) and a chunk of the rows; its
 * threads fold their partial sums through shared memory in a fixed order
 * and write the chunk's sums (dw's and db's) to the device's scratch
 * (cu_ctx.sr_part, chunks x 2C). The chunks split the rows so that the grid
 * fills the GPU (C = 768 is only 24 strips). A second kernel adds each
 * column's chunk sums in chunk order into dw and db: no atomics, the same
 * bits on every run of the same GPU (the chunking follows its SM count).
 * The scratch is the device's, made at open and sum_rows' too: the op must
 * not run on two of the device's streams at once. */
#define STRIP_ROWS 8

static __global__ void ln_bwd_w_kernel(float *part, const float *dy, const float *x,
                                       const float *mean, const float *rstd, int rows, int C,
                                       int chunk)
{
    __shared__ float sw[STRIP_ROWS][32], sb[STRIP_ROWS][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * 32 + tx;
    int r0 = blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
        for (int r = r0 + ty; r < r1; r += STRIP_ROWS) {
            float g = dy[(size_t)r * C + c];
            aw += g * (x[(size_t)r * C + c] - mean[r]) * rstd[r];
            ab += g;
        }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int i = 1; i < STRIP_ROWS; i++) {
            aw += sw[i][tx];
            ab += sb[i][tx];
        }
        float *p = part + (size_t)blockIdx.y * 2 * C;
        p[c] = aw;
        p[C + c] = ab;
    }
}

/* dw (C) += the chunks' dw sums, db (C) += theirs, each in chunk order */
static __global__ void ln_bwd_w_sum_kernel(float *dw, float *db, const float *part, int C,
                                           int chunks)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < 2 * C; j += gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < chunks; k++)
            acc += part[(size_t)k * 2 * C + j];
        if (j < C)
            dw[j] += acc;
        else
            db[j - C] += acc;
    }
}

void cu_layernorm_backward_w(rumor_device_t *d, float *dw, float *db, const float *dy,
                             const float *x, const float *mean, const float *rstd, int rows, int C)
{
    if (rows <= 0 || C <= 0)
        return;
    CU_ENTER(d);
    cu_ctx *ctx = cu_of(d);
    int strips = (C + 31) / 32;
    /* about 8 blocks an SM, each chunk at least 64 rows */
    int sms = ctx->sm_count > 0 ? ctx->sm_count : 1;
    int chunks = (8 * sms + strips - 1) / strips, most = (rows + 63) / 64;
    chunks = chunks < most ? chunks : most;
    chunks = chunks < 65535 ? chunks : 65535;
    /* the chunks' sums go to the device's scratch for column sums (made at
     * open, sum_rows' too: both run on its one stream) */
    long fit = (long)(CU_SR_PART / (2 * (size_t)C));
    chunks = chunks < fit ? chunks : (int)fit;
    chunks = chunks > 0 ? chunks : 1;
    int chunk = (rows + chunks - 1) / chunks;
    chunks = (rows + chunk - 1) / chunk;
    CU_LAUNCH(ln_bwd_w_kernel, dim3((unsigned)strips, (unsigned)chunks), dim3(32, STRIP_ROWS), 0,
              ctx->cur, ctx->sr_part, dy, x, mean, rstd, rows, C, chunk);
    CU_LAUNCHED(d, "layernorm_backward_w");
    CU_LAUNCH(ln_bwd_w_sum_kernel, cu_blocks(2 * (size_t)C, 256), 256, 0, ctx->cur, dw, db,
              ctx->sr_part, C, chunks);
    CU_LAUNCHED(d, "layernorm_backward_w: sum");
}

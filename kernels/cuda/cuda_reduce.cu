/* Reductions with host results: the mixer's step (axpy_dist) and norms with
 * a count of non-finite values (sumsq). Each block reduces its share in
 * double precision (warp butterflies, then one warp over the warps' sums)
 * into the device's scratch (cu_ctx.red); one block adds the blocks' sums;
 * the two doubles land in page-locked host memory. Deterministic: the same
 * input gives the same bits (the order of the sums is fixed by the grid). */
#include "cuda_int.h"

/* (sum, count) of this block's threads into red[2 * blockIdx.x ...]. Every
 * warp adds up the warps' sums (control flow uniform over the block, see
 * cuda_compat.h); thread 0 writes. */
static __device__ void block_reduce2(double s, double c, double *red)
{
    __shared__ double ws[CU_RED_THREADS / 32], wc[CU_RED_THREADS / 32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    s = cu_warp_sum(s);
    c = cu_warp_sum(c);
    if (lane == 0) {
        ws[w] = s;
        wc[w] = c;
    }
    __syncthreads();
    s = lane < nw ? ws[lane] : 0.0;
    c = lane < nw ? wc[lane] : 0.0;
    s = cu_warp_sum(s);
    c = cu_warp_sum(c);
    if (threadIdx.x == 0) {
        red[0] = s;
        red[1] = c;
    }
}

/* y += a x; partial sums of (y - x)^2 */
static __global__ void axpy_dist_kernel(float *y, float a, const float *x, size_t n, double *red)
{
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = y[i] + a * x[i];
        y[i] = v;
        double e = (double)v - (double)x[i];
        s += e * e;
    }
    block_reduce2(s, 0.0, red + 2 * blockIdx.x);
}

/* partial sums of x^2 and counts of non-finite x */
static __global__ void sumsq_kernel(const float *x, size_t n, double *red)
{
    double s = 0.0, c = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        s += (double)v * (double)v; /* a NaN or Inf shows in the sum, as on the CPU */
        if (!(fabsf(v) <= 3.402823466e38f)) /* NaN or +-Inf */
            c += 1.0;
    }
    block_reduce2(s, c, red + 2 * blockIdx.x);
}

/* red[2 nb ...] = the sums of the nb blocks' pairs */
static __global__ void finish_kernel(double *red, int nb)
{
    double s = 0.0, c = 0.0;
    for (int i = threadIdx.x; i < nb; i += blockDim.x) {
        s += red[2 * i];
        c += red[2 * i + 1];
    }
    block_reduce2(s, c, red + 2 * CU_RED_BLOCKS);
}

/* the two sums of the first nb blocks' pairs, on the host */
static int finish(rumor_device_t *d, int nb, double *sum, double *count)
{
    cu_ctx *x = cu_of(d);
    CU_LAUNCH(finish_kernel, 1, CU_RED_THREADS, 0, x->cur, x->red, nb);
    CU_LAUNCHED(d, "reduction");
    RUMOR_CUDA_CHECK(cudaMemcpyAsync(x->red_host, x->red + 2 * CU_RED_BLOCKS, 2 * sizeof(double),
                                     cudaMemcpyDeviceToHost, x->cur));
    CU_COUNT(d, n_host_wait); /* a host result */
    RUMOR_CUDA_CHECK(cudaStreamSynchronize(x->cur));
    RUMOR_CHECK(cu_report(d));
    *sum = x->red_host[0];
    if (count)
        *count = x->red_host[1];
    return 0;
}

static int red_blocks(size_t n)
{
    size_t b = (n + CU_RED_THREADS - 1) / CU_RED_THREADS;
    return b < 1 ? 1 : b > CU_RED_BLOCKS ? CU_RED_BLOCKS : (int)b;
}

int cu_axpy_dist(rumor_device_t *d, float *y, float a, const float *x, size_t n, double *sqdist)
{
    CU_ENTER(d);
    int nb = red_blocks(n);
    CU_LAUNCH(axpy_dist_kernel, nb, CU_RED_THREADS, 0, cu_of(d)->cur, y, a, x, n, cu_of(d)->red);
    CU_LAUNCHED(d, "axpy_dist");
    double s;
    RUMOR_CHECK(finish(d, nb, &s, NULL));
    if (sqdist)
        *sqdist = s;
    return 0;
}

int cu_sumsq(rumor_device_t *d, const float *x, size_t n, double *out, size_t *nonfinite)
{
    CU_ENTER(d);
    int nb = red_blocks(n);
    CU_LAUNCH(sumsq_kernel, nb, CU_RED_THREADS, 0, cu_of(d)->cur, x, n, cu_of(d)->red);
    CU_LAUNCHED(d, "sumsq");
    double s, c;
    RUMOR_CHECK(finish(d, nb, &s, &c));
    if (out)
        *out = s;
    if (nonfinite)
        *nonfinite = (size_t)c;
    return 0;
}

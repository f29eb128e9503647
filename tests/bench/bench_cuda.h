/* What bench_cuda's sources share: the sizes of a run (full on a GPU, tiny
 * under the HIP-CPU emulation of tests/cuda-emu, where only the code paths
 * are being checked) and the parts each file measures. */
#ifndef RUMOR_BENCH_CUDA_H
#define RUMOR_BENCH_CUDA_H

#include <stddef.h>

#include "ops.h"

typedef struct bc_sizes {
    int emu;              /* the GPU is HIP-CPU's emulation: tiny sizes */
    /* the GPT step (GPT-2 124M on a GPU) */
    int L, C, NH, T, V;
    int batches[5];       /* batch sizes to try, largest first, 0 ends */
    int rounds, steps;    /* timed rounds of steps (after 2 warm-up steps) */
    /* element-wise ops: buffers of op_n floats; xent over (op_n / V, V) */
    size_t op_n;
    int peak_n;           /* the square bf16 GEMM that measures the peak */
    /* the 4-stage pipeline: a GPT of pipe_L blocks, pipe_B examples a step */
    int pipe_L, pipe_C, pipe_NH, pipe_T, pipe_V, pipe_B;
    double torch_timeout_s;
} bc_sizes;

/* bench_cuda.c */
void bc_die(const char *what);

/* bench_cuda_ops.c. Each prints its "bench:" lines. */
/* TFLOP/s of a bf16 GEMM (peak_n^3): cuBLAS called directly where it is
 * linked, else the ops table in bf16 mode (the emulation); -1 on a failure. */
double bc_bf16_peak(rumor_device_t *d, const bc_sizes *z);
/* element-wise ops and reductions against a device-to-device copy */
void bc_eltwise(rumor_device_t *d, const bc_sizes *z);
/* the ops table's GEMM against cuBLAS called directly, on the GPT's
 * shapes with R = rows, in fp32, tf32 and bf16 */
void bc_gemm_vs_cublas(rumor_device_t *d, const bc_sizes *z, int rows);

/* bench_cuda_attn.c: the attention op, forward and backward, against
 * PyTorch's flash SDPA on the same shapes */
void bc_attention(rumor_device_t *d, const bc_sizes *z);

#endif

/* What the CUDA sources include instead of the CUDA headers, so that the
 * same kernels build for a GPU (nvcc) and, for developers without one, for
 * the CPU through AMD's header-only HIP-CPU runtime (RUMOR_CUDA_EMU, set by
 * configure --with-cuda-emu=DIR; see tests/cuda-emu/README.md). Kernels use
 * the three forms below instead of CUDA's own syntax:
 *   CU_LAUNCH(kernel, grid, block, shared_bytes, stream, args...)
 *   CU_SHFL_XOR(v, lane_mask)      a butterfly step among a warp's 32 lanes
 *   CU_DYNAMIC_SHARED(type, name)  the block's dynamic shared memory
 * The emulation makes each shuffle a barrier of the whole block, so kernels
 * keep shuffles and __syncthreads in control flow that every thread of the
 * block takes (no early return before them; a warp that has no work still
 * joins in). That costs a GPU nothing measurable. */
#ifndef RUMOR_CUDA_COMPAT_H
#define RUMOR_CUDA_COMPAT_H

#ifdef RUMOR_CUDA_EMU
#include "cuda_emu.h" /* tests/cuda-emu: CUDA's names over HIP-CPU, cuBLAS over CBLAS */
#define CU_LAUNCH(k, grid, block, shmem, stream, ...)                                          \
    hipLaunchKernelGGL(k, grid, block, shmem, stream, __VA_ARGS__)
#define CU_SHFL_XOR(v, m) emu_shfl_xor((v), (m))
#define CU_DYNAMIC_SHARED(type, name) HIP_DYNAMIC_SHARED(type, name)
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define CU_LAUNCH(k, grid, block, shmem, stream, ...) k<<<grid, block, shmem, stream>>>(__VA_ARGS__)
#define CU_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define CU_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#endif

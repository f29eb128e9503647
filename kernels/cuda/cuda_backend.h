/* The CUDA backend's entry points, built when configure finds nvcc and cuBLAS,
 * for kernels/device.c alone (not installed): the rest of rumor reaches the
 * GPU through ops.h, its device functions and the ops table. A binary built
 * with CUDA runs on machines without a GPU or driver: device discovery then
 * reports zero devices and callers stay on the CPU. */
#ifndef RUMOR_CUDA_BACKEND_H
#define RUMOR_CUDA_BACKEND_H

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Usable GPUs (0 without a driver or GPU). Never fails; the first call probes. */
RUMOR_INTERNAL int rumor_cuda_device_count(void);

/* Why no GPU is usable ("CUDA driver version is insufficient ...") or "ok". */
RUMOR_INTERNAL const char *rumor_cuda_status(void);

/* Fills d (name, ops, ctx) for GPU `index`: a stream and a cuBLAS handle. */
RUMOR_INTERNAL int rumor_cuda_open(rumor_device_t *d, int index);
RUMOR_INTERNAL void rumor_cuda_close(rumor_device_t *d);

/* rumor_device_info of GPU `index` (ops.h). */
RUMOR_INTERNAL int rumor_cuda_info(int index, rumor_device_info_t *out);

/* How d's matrix products compute (ops.h); ENOTSUP without tensor cores. */
RUMOR_INTERNAL int rumor_cuda_set_precision(rumor_device_t *d, rumor_precision p);

#ifdef __cplusplus
}
#endif
#endif

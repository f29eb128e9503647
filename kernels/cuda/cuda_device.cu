/* CUDA device discovery and contexts (see cuda_backend.h).
 *
 * The compute ops table for CUDA is not written yet: opening a GPU succeeds
 * in creating its stream and cuBLAS handle, then reports ENOTSUP so callers
 * fall back to the CPU with a clear message rather than run half a backend. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_backend.h"

static int probed = 0;
static int count = 0;
static char status[256] = "not probed";

extern "C" int rumor_cuda_device_count(void)
{
    if (!probed) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            snprintf(status, sizeof status, "%s", cudaGetErrorString(e));
            n = 0;
            cudaGetLastError(); /* clear the sticky-free error state */
        } else {
            snprintf(status, sizeof status, n ? "ok" : "no CUDA GPU found");
        }
        count = n;
        probed = 1;
    }
    return count;
}

extern "C" const char *rumor_cuda_status(void)
{
    rumor_cuda_device_count();
    return status;
}

extern "C" int rumor_cuda_open(rumor_device_t *d, int index)
{
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, index);
    if (e != cudaSuccess)
        return rumor_err_set(RUMOR_ECUDA, "cuda:%d: %s", index, cudaGetErrorString(e));
    snprintf(d->name, sizeof d->name, "cuda:%d (%s)", index, prop.name);
    return rumor_err_set(RUMOR_ENOTSUP,
                         "%s: the CUDA compute ops are not implemented yet; use --device cpu",
                         d->name);
}

extern "C" void rumor_cuda_close(rumor_device_t *d)
{
    (void)d;
}

/* The CUDA backend's entry points, built when configure finds nvcc and cuBLAS.
 * A binary built with CUDA runs on machines without a GPU or driver: device
 * discovery then reports zero devices and callers stay on the CPU. */
#ifndef RUMOR_CUDA_BACKEND_H
#define RUMOR_CUDA_BACKEND_H

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Usable GPUs (0 without a driver or GPU). Never fails; the first call probes. */
int rumor_cuda_device_count(void);

/* Why no GPU is usable ("CUDA driver version is insufficient ...") or "ok". */
const char *rumor_cuda_status(void);

/* Fills d (name, ops, ctx) for GPU `index`: a stream and a cuBLAS handle. */
int rumor_cuda_open(rumor_device_t *d, int index);
void rumor_cuda_close(rumor_device_t *d);

/* What `rumor-train devices` shows of GPU `index`. */
typedef struct rumor_cuda_info {
    char name[256];
    int cc_major, cc_minor; /* compute capability */
    int sms;                /* multiprocessors */
    size_t memory;          /* bytes of global memory */
} rumor_cuda_info_t;
int rumor_cuda_info(int index, rumor_cuda_info_t *out);

/* How d's matrix products compute (ops.h); ENOTSUP without tensor cores. */
int rumor_cuda_set_precision(rumor_device_t *d, rumor_precision p);

/* NCCL between this process's GPUs (built with NCCL): a clique of one
 * communicator per GPU (distinct ordinals; one is allowed: it sends to
 * itself), and a copy of bytes from src on sd to dst on dd as a grouped send
 * and receive, queued on streams ss (of sd) and ds (of dd), NULL meaning the
 * devices' own streams; the caller waits on ds (and ss) for it. */
typedef struct rumor_nccl rumor_nccl_t;
int rumor_nccl_open(const int *devices, int n, rumor_nccl_t **out);
void rumor_nccl_close(rumor_nccl_t **c);
int rumor_nccl_rank(const rumor_nccl_t *c, int device);
int rumor_nccl_copy(rumor_nccl_t *c, rumor_device_t *dd, void *dst, rumor_stream_t *ds,
                    rumor_device_t *sd, const void *src, rumor_stream_t *ss, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif

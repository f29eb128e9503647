/* NCCL between a process's GPUs: one communicator per GPU of a clique
 * (ncclCommInitAll), and a copy as a grouped send and receive, each on a
 * stream of its own GPU: the CUDA table's clique ops (ops.h). Built when
 * configure finds NCCL.
 *
 * One thread issues both halves inside one group (NCCL's single-thread,
 * multi-GPU form), so a pipeline's worker moves an activation between two
 * GPUs without the other worker's help. A one-rank clique sends to itself,
 * which exercises the same calls on a machine with one GPU. */
#include <nccl.h>
#include <stdlib.h>

#include "cuda_int.h"

struct rumor_clique {
    int n;
    int *dev;          /* (n) CUDA ordinals */
    ncclComm_t *comm;  /* (n) */
};

#define RUMOR_NCCL_CHECK(call)                                                                  \
    do {                                                                                        \
        ncclResult_t rumor_nc_r_ = (call);                                                      \
        if (rumor_nc_r_ != ncclSuccess)                                                         \
            return rumor_err_set_at(__FILE__, __LINE__, RUMOR_ECUDA, "%s: %s", #call,           \
                                    ncclGetErrorString(rumor_nc_r_));                           \
    } while (0)

int cu_clique_open(rumor_device_t *const *devs, int n, rumor_clique_t **out)
{
    *out = NULL;
    if (n < 1 || n > 64)
        return rumor_err_set(RUMOR_EINVAL, "nccl: %d GPUs", n);
    for (int i = 0; i < n; i++) {
        if (devs[i]->kind != RUMOR_DEV_CUDA)
            return rumor_err_set(RUMOR_EINVAL, "nccl: %s is not a GPU", devs[i]->name);
        for (int j = 0; j < i; j++)
            if (devs[i]->index == devs[j]->index)
                return rumor_err_set(RUMOR_EINVAL, "nccl: cuda:%d twice in one clique (stages on "
                                     "one GPU copy within it)", devs[i]->index);
    }
    rumor_clique_t *c = (rumor_clique_t *)calloc(1, sizeof *c);
    if (!c || !(c->dev = (int *)calloc((size_t)n, sizeof *c->dev)) ||
        !(c->comm = (ncclComm_t *)calloc((size_t)n, sizeof *c->comm))) {
        if (c)
            free(c->dev);
        free(c);
        return rumor_err_set(RUMOR_ENOMEM, "nccl: out of memory");
    }
    c->n = n;
    for (int i = 0; i < n; i++)
        c->dev[i] = devs[i]->index;
    ncclResult_t r = ncclCommInitAll(c->comm, n, c->dev);
    if (r != ncclSuccess) {
        free(c->comm);
        free(c->dev);
        free(c);
        return rumor_err_set(RUMOR_ECUDA, "nccl: ncclCommInitAll over %d GPU%s: %s", n,
                             n == 1 ? "" : "s", ncclGetErrorString(r));
    }
    *out = c;
    return 0;
}

void cu_clique_close(rumor_clique_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        if (c->comm[i])
            ncclCommDestroy(c->comm[i]);
    free(c->comm);
    free(c->dev);
    free(c);
}

/* The rank of CUDA ordinal `device` in c, or -1. */
static int clique_rank(const rumor_clique_t *c, int device)
{
    for (int i = 0; i < c->n; i++)
        if (c->dev[i] == device)
            return i;
    return -1;
}

int cu_clique_copy(rumor_clique_t *c, rumor_device_t *dd, void *dst, rumor_stream_t *ds,
                   rumor_device_t *sd, const void *src, rumor_stream_t *ss, size_t bytes)
{
    int dr = clique_rank(c, dd->index), sr = clique_rank(c, sd->index);
    if (dr < 0 || sr < 0 || dd->kind != RUMOR_DEV_CUDA || sd->kind != RUMOR_DEV_CUDA)
        return rumor_err_set(RUMOR_EINVAL, "nccl: %s -> %s: not GPUs of this clique", sd->name,
                             dd->name);
    if (!bytes)
        return 0;
    cudaStream_t dst_stream = ds ? (cudaStream_t)ds : cu_of(dd)->stream;
    cudaStream_t src_stream = ss ? (cudaStream_t)ss : cu_of(sd)->stream;
    RUMOR_NCCL_CHECK(ncclGroupStart());
    ncclResult_t r1 = ncclSend(src, bytes, ncclChar, dr, c->comm[sr], src_stream);
    ncclResult_t r2 = ncclRecv(dst, bytes, ncclChar, sr, c->comm[dr], dst_stream);
    RUMOR_NCCL_CHECK(ncclGroupEnd());
    RUMOR_NCCL_CHECK(r1);
    RUMOR_NCCL_CHECK(r2);
    return 0;
}

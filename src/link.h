/* Links: how activations and gradients move between two pipeline stages'
 * devices (pipeline.h).
 *
 * A link joins device a (the stage before) and device b (the stage after)
 * and copies in either direction, whatever the two are: a memcpy between
 * CPU stages; a copy on a stream of the link's own within one GPU (two
 * stages on cuda:0); an upload or download through the CUDA runtime between
 * the CPU and a GPU; between two GPUs, NCCL's grouped send and receive when
 * rumor is built with NCCL, cudaMemcpyPeerAsync otherwise. The link's
 * streams carry nothing but its copies, so a copy never waits for the
 * compute either stage has queued since.
 *
 * rumor_link_copy's source must be complete (the stage that wrote it synced
 * its device) and it returns when the destination holds the bytes;
 * rumor_link_copy_ordered orders the copy with events instead, so a step's
 * copies between GPUs leave the host free. One thread uses a link at a
 * time. */
#ifndef RUMOR_LINK_H
#define RUMOR_LINK_H

#include <stddef.h>

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RUMOR_LINK_HOST = 0, /* both on the CPU: memcpy */
    RUMOR_LINK_DEVICE,   /* one GPU: a device-to-device copy */
    RUMOR_LINK_UPLOAD,   /* CPU -> GPU or GPU -> CPU through the runtime */
    RUMOR_LINK_PEER,     /* two GPUs, cudaMemcpyPeerAsync */
    RUMOR_LINK_NCCL      /* two GPUs, NCCL send/recv */
} rumor_link_kind;

typedef struct rumor_link rumor_link_t;

/* A link between a and b (not owned; they outlive it). use_nccl: between
 * two GPUs, NCCL when built with it (0: peer copies). */
int rumor_link_create(rumor_device_t *a, rumor_device_t *b, int use_nccl,
                      rumor_link_t **out) RUMOR_WUR;
void rumor_link_destroy(rumor_link_t **lp);

rumor_link_kind rumor_link_get_kind(const rumor_link_t *l);
const char *rumor_link_kind_name(rumor_link_kind k);

/* Copies bytes from src on one end to dst on the other: forward (a -> b)
 * when forward is 1, backward (b -> a) when 0. */
int rumor_link_copy(rumor_link_t *l, int forward, void *dst, const void *src,
                    size_t bytes) RUMOR_WUR;

/* The copy of rumor_link_copy, ordered by events: it starts once the work
 * before after_src (an event of the source's device) and after_dst (of the
 * destination's device) is done, either NULL for none; `done` (an event of
 * the destination's device, NULL: none) is recorded when dst holds the bytes
 * and src has been read: readers of dst and writers of src wait for it.
 * Between two GPUs it returns once queued; with a CPU end it returns when
 * the bytes have landed (a CPU stage waits for nothing). */
int rumor_link_copy_ordered(rumor_link_t *l, int forward, void *dst, const void *src,
                            size_t bytes, rumor_event_t *after_src, rumor_event_t *after_dst,
                            rumor_event_t *done) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

/* Checkpoint internals shared by checkpoint.c (save, list) and
 * checkpoint_load.c (reading and verifying a file). Not installed. */
#ifndef RUMOR_CHECKPOINT_INT_H
#define RUMOR_CHECKPOINT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints store little-endian float32 as-is: port the byte order first"
#endif

#define CKPT_FORMAT "rumor-checkpoint-1"
#define CKPT_MAX_ROUND 999999999999L /* the file name holds 12 digits */
#define CKPT_SUFFIX ".safetensors"
#define CKPT_NAME_KEEP 48 /* characters of the swarm name a file name keeps */
#define JSON_MAX_INT 9007199254740992.0 /* 2^53: larger JSON numbers are inexact */

/* One tensor of the layout: name, shape and [begin, end) in the data section. */
struct ckpt_tensor {
    char name[RUMOR_TENSOR_NAME];
    int ndim;
    uint64_t shape[2];
    uint64_t begin, end;
    int seen; /* load: met in the header */
};

/* The tensors a checkpoint of m holds, in data order: fc{k}.weight/bias of
 * each linear layer, then optim.m and optim.v when asked. Fails when the
 * model's flat buffer is not exactly those views back to back (the data
 * section is written as the buffer verbatim). *out is the caller's to free. */
int ckpt_layout(const rumor_model_t *m, int with_m, int with_v, struct ckpt_tensor **out, int *n,
                uint64_t *total);

/* The swarm name as the metadata holds it (rumor_ckpt_info_t.swarm): its
 * first 63 bytes, bytes outside printable ASCII written '?'. */
void ckpt_swarm_text(const char *swarm, char out[64]);

/* The start of the file names of swarm and rank's checkpoints, up to the
 * round: "<safe swarm>-r<rank>-" (see checkpoint.h). */
int ckpt_prefix(const char *swarm, int rank, char *buf, size_t len);

/* Whose checkpoint a file is, by its name. */
struct ckpt_owner {
    const char *swarm; /* as given to rumor_ckpt_load_latest */
    int rank;
    long round;
};

/* rumor_ckpt_load that also refuses (RUMOR_EFORMAT, before m or o change) a
 * file whose metadata names another swarm, rank or round than owner; owner
 * NULL accepts any. */
int ckpt_load_owned(const char *path, const struct ckpt_owner *owner, rumor_stage_t *st,
                    rumor_optim_t *o, rumor_ckpt_info_t *info);

#endif

/* Checkpoint internals shared by checkpoint.c (save, list) and
 * checkpoint_load.c (reading and verifying a file). Not installed. */
#ifndef RUMOR_CHECKPOINT_INT_H
#define RUMOR_CHECKPOINT_INT_H

#include <stdint.h>

#include "checkpoint.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints store little-endian float32 as-is: port the byte order first"
#endif

#define CKPT_FORMAT "rumor-checkpoint-1"
#define CKPT_MAX_ROUND 999999999999L /* the file name holds 12 digits */
#define JSON_MAX_INT 9007199254740992.0 /* 2^53: larger JSON numbers are inexact */

/* One tensor of the layout: name, shape and [begin, end) in the data section. */
struct ckpt_tensor {
    char name[32];
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

#endif

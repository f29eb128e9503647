/* Blocks: the units a model is cut into, each a table of functions.
 *
 * A model (model.h) is a list of blocks; a pipeline stage (stage.h) runs a
 * contiguous run of them. Every block owns a contiguous range [lo, hi) of the
 * model's flat parameter space, holding its tensors (name, shape, offset,
 * init), so every peer running the same spec agrees on every offset.
 *
 * Tensors flow between blocks as (rows, width) floats, rows = B*T (T = 1 for
 * models of images). The first block of a token model reads the tokens of
 * the call instead of a float input; the last block is the head: it turns
 * its input and the targets into each row's loss (out_width 1), so the loss
 * is a block like any other, not part of every forward. A head's forward
 * with training set may leave the gradient of its logits (unscaled, the
 * seed without loss_scale) where the logits were; an eval forward (training
 * 0) leaves the logits, for accuracy and sampling, and B after it computes
 * the gradient then.
 *
 * Backward is split in two, as zero-bubble schedules need:
 *   B (backward_b): the gradient of the block's input, dx, from dy; it also
 *     keeps, in the block's saved state, the internal gradients W will need;
 *   W (backward_w): the gradients of the block's weights, added (+=) into the
 *     gradient space; it reads x, dy and the saved state, so it may run any
 *     time after B (W of micro-batch m deferred into a bubble).
 * A head's B reads no dy: its seed is the call's loss_scale. The first block
 * of a token model writes no dx (the call passes dx = NULL).
 *
 * All pointers in a call are device memory of the call's device; blocks
 * compute only through the ops table. Randomness (dropout) comes from the
 * call's key (rng.h), never from a counter. */
#ifndef RUMOR_BLOCK_H
#define RUMOR_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RUMOR_INIT_ZERO = 0,
    RUMOR_INIT_ONE,
    RUMOR_INIT_UNIFORM, /* U(-scale, scale) */
    RUMOR_INIT_NORMAL   /* N(0, scale^2) */
} rumor_init_kind;

#define RUMOR_TENSOR_NAME 80
#define RUMOR_BLOCK_NAME 32

/* One parameter tensor in the flat space, as checkpoints name and store it
 * (GPT models use GPT-2's names and layouts: Conv1D weights are (in, out)). */
typedef struct rumor_tensor {
    char name[RUMOR_TENSOR_NAME];
    int ndim;
    int shape[2];
    size_t off, numel;
    rumor_init_kind init;
    float scale;
} rumor_tensor_t;

typedef struct rumor_block rumor_block_t;

/* One call on one micro-batch. */
typedef struct rumor_call {
    rumor_device_t *dev;
    int B, T;               /* rows = B*T */
    int training;           /* dropout on */
    uint64_t key;           /* rumor_rng_key(seed, step, micro, block index, 0) */
    const float *params;    /* the caller's parameter buffer: tensor at offset off is */
    float *grads;           /* at params + (off - base); grads mirror params */
    size_t base;
    const int32_t *tok;     /* (B,T) tokens: input of a token model's first block */
    const int32_t *targets; /* (rows) labels or next tokens: read by the head */
    float loss_scale;       /* head: d(total loss)/d(one row's loss), e.g. 1/rows of the batch */
    const float *tied;      /* lm head: a copy of the tensor at tied_off and its own */
    float *tied_grad;       /* gradient, when the caller's buffer does not hold it
                             * (a pipeline stage without the embedding); NULL: in params */
} rumor_call_t;

typedef struct rumor_block_type {
    const char *name;
    /* bytes of state one micro-batch keeps from forward to W */
    size_t (*saved_bytes)(const rumor_block_t *b, int B, int T);
    /* y (rows, out_width) from x (rows, in_width) (x is NULL for token input) */
    int (*forward)(const rumor_block_t *b, const rumor_call_t *c, const float *x, float *y,
                   void *saved);
    /* dx (rows, in_width) = d loss / dx, written (=); dx NULL: not wanted */
    int (*backward_b)(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                      const float *dy, float *dx, void *saved);
    /* grads += d loss / d weights; NULL when the block has no weights */
    int (*backward_w)(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                      const float *dy, void *saved);
    /* heads: the (rows, V) logits of the last forward when it was an eval
     * forward (training 0), in saved or x (the head's input) */
    const float *(*logits)(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                           const void *saved);
} rumor_block_type_t;

struct rumor_block {
    const rumor_block_type_t *type;
    char name[RUMOR_BLOCK_NAME]; /* "fc0", "embed", "h.3", "head" */
    int index;                   /* in the model */
    size_t lo, hi;               /* the parameter range it owns */
    int first_tensor, ntensors;  /* its tensors in the model's list */
    int in_width, out_width;     /* floats per row; in_width 0: token input */
    /* what the block types read */
    int act;                     /* dense: 0 none, 1 ReLU, 2 GELU */
    float dropout;               /* dense, GPT blocks: dropout probability */
    int C, NH, V, T;             /* GPT: width, heads, vocabulary, context */
    size_t w_off, b_off;         /* dense: W (out,in) and b; embed: wte and wpe */
    size_t tied_off;             /* lm head: the token embedding it shares */
    size_t sub[12];              /* GPT block: offsets of its tensors, in order */
};

/* Block types. */
extern const rumor_block_type_t rumor_block_dense;    /* y = drop(act(x W^T + b)) */
extern const rumor_block_type_t rumor_block_xent;     /* head: softmax cross-entropy on x */
extern const rumor_block_type_t rumor_block_embed;    /* GPT: token + position embedding */
extern const rumor_block_type_t rumor_block_gpt;      /* GPT-2 transformer block */
extern const rumor_block_type_t rumor_block_lm_head;  /* GPT: ln_f, tied logits, xent */

/* Bytes rounded up to 64: the alignment of every buffer carved from a
 * block's saved state (and of arenas). */
static inline size_t rumor_align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* A call's view of a parameter or gradient tensor at flat offset off. */
static inline const float *rumor_call_param(const rumor_call_t *c, size_t off)
{
    return c->params + (off - c->base);
}
static inline float *rumor_call_grad(const rumor_call_t *c, size_t off)
{
    return c->grads + (off - c->base);
}
/* The tensor a block shares (tied_off), and where its gradient adds up. */
static inline const float *rumor_call_tied(const rumor_call_t *c, const rumor_block_t *b)
{
    return c->tied ? c->tied : rumor_call_param(c, b->tied_off);
}
static inline float *rumor_call_tied_grad(const rumor_call_t *c, const rumor_block_t *b)
{
    return c->tied_grad ? c->tied_grad : rumor_call_grad(c, b->tied_off);
}

#ifdef __cplusplus
}
#endif
#endif

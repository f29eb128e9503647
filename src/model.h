/* Models: a spec, a list of blocks and the layout of one flat parameter space.
 *
 * A model is data only: which blocks, which tensors at which offsets, how
 * they are initialized. It owns no device memory and no activations: stages
 * (stage.h) hold parameters, gradients, optimizer state and per-micro-batch
 * activations for a run of its blocks on a device. Every peer running the same
 * spec agrees on every offset, so gossip moves (offset, length) ranges of the
 * same space whatever cut each peer runs.
 *
 * Specs:
 *   mlp:D0-D1-...-Dn[:relu|:gelu][:dropout=P]
 *       a classifier of D0 features into Dn classes: one dense block per
 *       linear layer (the activation and dropout after every hidden one),
 *       then a softmax cross-entropy head. Tensors fc{k}.weight (out, in) and
 *       fc{k}.bias.
 *   gpt:layers=L,dim=D,heads=H,ctx=T[,vocab=V][,dropout=P]
 *       GPT-2: token and position embeddings, L pre-layernorm transformer
 *       blocks (causal self-attention of H heads, GELU MLP of 4D), a final
 *       layernorm and output weights tied to the token embedding. Tensors
 *       carry GPT-2's names and layouts (transformer.wte.weight (V, D),
 *       transformer.h.{i}.attn.c_attn.weight (D, 3D) as Conv1D stores it,
 *       ...). V defaults to the data's vocabulary. Dropout follows the
 *       embedding and both residual branches (not the attention weights). */
#ifndef RUMOR_MODEL_H
#define RUMOR_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "block.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RUMOR_MODEL_MLP = 0, RUMOR_MODEL_GPT = 1 } rumor_model_kind;

#define RUMOR_MODEL_SPEC 160

typedef struct rumor_model {
    rumor_model_kind kind;
    char spec[RUMOR_MODEL_SPEC]; /* canonical: every field written out */
    rumor_batch_kind input;      /* images or tokens */
    int nblocks;
    rumor_block_t *blocks;
    int ntensors;
    rumor_tensor_t *tensors;     /* in the order of the flat space */
    size_t nparams;
    /* MLP */
    int in_dim, classes;
    /* GPT */
    int layers, dim, heads, ctx, vocab;
    float dropout;
} rumor_model_t;

/* Parses a spec (above) and lays the model out. data_vocab fills a GPT
 * spec's missing vocab= (0: none given, then vocab= is required). The
 * canonical spec (m->spec) is what checkpoints record and peers compare. */
int rumor_model_create(const char *spec, int data_vocab, rumor_model_t **out) RUMOR_WUR;
void rumor_model_destroy(rumor_model_t **mp);

/* The whole space's initial values from seed, into host memory (nparams
 * floats): each tensor by its init, drawn in the order of the space from
 * one splitmix64 stream (normals by Box-Muller), so the same spec and seed
 * give bit-identical parameters on every peer and platform. MLP: He-uniform
 * U(+-sqrt(6/in)) for hidden layers, U(+-1/sqrt(in)) for the output, biases
 * 0. GPT (GPT-2's): weights N(0, 0.02^2), the residual projections
 * N(0, (0.02/sqrt(2L))^2), biases 0, layernorm weights 1. */
int rumor_model_init_host(const rumor_model_t *m, uint64_t seed, float *host) RUMOR_WUR;

/* The index of the tensor named name, or -1. */
int rumor_model_find_tensor(const rumor_model_t *m, const char *name);

/* Bytes of activations and saved state one micro-batch of (B, T) needs on
 * the blocks [first, last). */
size_t rumor_model_act_bytes(const rumor_model_t *m, int first, int last, int B, int T);

/* Rows of targets per example: ctx for GPT, 1 for MLP. */
static inline int rumor_model_seq(const rumor_model_t *m)
{
    return m->kind == RUMOR_MODEL_GPT ? m->ctx : 1;
}

#ifdef __cplusplus
}
#endif
#endif

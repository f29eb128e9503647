/* Models: an ordered list of layers whose parameters live in one flat buffer.
 *
 * All parameters of a model are one contiguous float32 buffer on its device
 * (llm.c style); a linear layer's W and b are views at fixed offsets; the
 * gradients mirror the same offsets in a second buffer, and optimizer state
 * (optim.h) in a third. Layers are grouped into blocks, each owning a
 * contiguous range [lo, hi) of the buffer: a pipeline stage is a run of
 * blocks, and gossip moves (offset, length) ranges of the same space, so every
 * peer running the same model spec agrees on every offset.
 *
 * Shapes in comments: B batch, I/O a layer's input/output features. */
#ifndef RUMOR_MODEL_H
#define RUMOR_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RUMOR_LAYER_LINEAR = 0, /* y (B,O) = x (B,I) W^T + b; W (O,I), b (O) */
    RUMOR_LAYER_RELU,
    RUMOR_LAYER_GELU,
    RUMOR_LAYER_DROPOUT
} rumor_layer_kind;

typedef struct rumor_layer {
    rumor_layer_kind kind;
    int in, out;         /* features; equal for activations and dropout */
    size_t w_off, b_off; /* linear: offsets of W and b in the flat buffers */
    float p;             /* dropout probability */
} rumor_layer_t;

typedef struct rumor_block {
    size_t lo, hi;       /* the parameter range this block owns */
    int first, count;    /* its layers: [first, first+count) */
} rumor_block_t;

typedef struct rumor_model {
    rumor_device_t *dev; /* not owned */
    char spec[128];      /* e.g. "mlp:784-256-256-10:relu" */
    int nlayers;
    rumor_layer_t *layers;
    int nblocks;
    rumor_block_t *blocks;
    int in_dim, classes;
    size_t nparams;
    float *params;       /* (nparams) device memory */
    float *grads;        /* (nparams) mirrors params */

    /* Activations for batches up to max_batch, allocated once. */
    int max_batch;
    float **act;         /* act[0] (B,in_dim) input; act[l+1] output of layer l */
    float *dbuf[2];      /* (B, widest) gradient ping-pong */
    float *probs;        /* (B, classes) */
    float *losses;       /* (B) */
    int32_t *labels;     /* (B) on the device */
    float *host_losses;  /* (B) host copies, for the loss and accuracy */
    float *host_probs;   /* (B, classes) */
    int32_t *host_labels; /* (B) */
    int batch;           /* batch size of the last forward */
    int training;        /* whether the last forward used dropout */
    uint64_t seed;       /* init and dropout seed */
    uint64_t dropout_calls; /* advances the dropout stream each forward */
    int owns_params;     /* 0 for a replica sharing another model's params */
    int grad_overwrite;  /* backward writes grads (=) instead of adding (+=) */
} rumor_model_t;

/* Builds a model from a spec and initializes its parameters from `seed` (the
 * same spec and seed give bit-identical parameters on every peer).
 * Spec: "mlp:D0-D1-...-Dn[:relu|:gelu][:dropout=P]", e.g. "mlp:784-256-256-10"
 * (ReLU by default; dropout, when given, follows each hidden activation).
 * max_batch bounds the batch of every later forward. */
int rumor_model_create(rumor_device_t *dev, const char *spec, int max_batch, uint64_t seed,
                       rumor_model_t **out) RUMOR_WUR;
void rumor_model_destroy(rumor_model_t **mp);

/* A replica of m for a worker thread: the same layers and offsets, reading
 * m's parameter buffer (not copied), with its own gradients and activations
 * on `dev` (which must share m's memory: the CPU). Dropout draws from a
 * stream of its own (stream 0 is m's). Destroy replicas before m. */
int rumor_model_create_replica(const rumor_model_t *m, rumor_device_t *dev, int max_batch,
                               int stream, rumor_model_t **out) RUMOR_WUR;

/* Re-initializes parameters from seed: He-uniform for linear layers followed
 * by an activation, U(+-1/sqrt(I)) for the output layer, biases zero. */
int rumor_model_init_params(rumor_model_t *m, uint64_t seed);

/* Forward pass of x (B, in_dim) and labels (B), both in host memory (they are
 * copied to the device); returns the mean cross-entropy loss in *loss. `training`
 * turns dropout on. Labels must be in [0, classes). */
int rumor_model_forward(rumor_model_t *m, const float *x, const int32_t *labels, int batch,
                        int training, float *loss);

/* Backward pass of the last forward: grads += d(mean loss)/d(params), or
 * grads = ... when m->grad_overwrite is set (no zeroing pass needed). Call
 * rumor_model_zero_grad first when accumulating micro-batches. */
int rumor_model_backward(rumor_model_t *m);
/* The same with the loss taken as sum(losses) * scale: workers that each see
 * part of a batch of B pass scale = 1/B, so their gradients simply add up. */
int rumor_model_backward_scaled(rumor_model_t *m, float scale);
void rumor_model_zero_grad(rumor_model_t *m);

/* The last forward's predictions: number of rows whose argmax equals the label. */
int rumor_model_correct(rumor_model_t *m);

/* Accuracy and mean loss over n examples (x (n, in_dim) on the host), in
 * batches of max_batch, dropout off. */
int rumor_model_evaluate(rumor_model_t *m, const float *x, const int32_t *y, int n,
                         double *accuracy, double *loss);

/* Points the model at a parameter buffer it does not own (nparams floats of
 * the model's device memory), freeing its own buffer the first time: the
 * gossip mixer owns and rotates the buffers of a peer's parameters. */
void rumor_model_bind_params(rumor_model_t *m, float *params);

/* Copies the whole parameter buffer to/from host memory (nparams floats). */
int rumor_model_get_params(const rumor_model_t *m, float *host);
int rumor_model_set_params(rumor_model_t *m, const float *host);

#ifdef __cplusplus
}
#endif
#endif

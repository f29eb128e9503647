/* Stages: a run of a model's blocks on one device, with its range of the
 * parameter space, its gradients, its optimizer state and the activations of
 * the micro-batches in flight.
 *
 * A stage of blocks [first, last) owns the parameters [lo, hi) those blocks
 * hold (hi - lo floats of device memory, lo..hi of the flat space), the same
 * range of gradients and optimizer state, and `slots` arenas, one per
 * micro-batch in flight, each holding every block's output, output gradient
 * and saved state for up to max_B x T rows. A whole model is the stage of
 * blocks [0, nblocks). A pipeline (the engine of the next issue) runs one
 * stage per device, feeding each stage's output to the next stage's input and
 * gradients back.
 *
 * Per micro-batch, in order: rumor_stage_load (the batch's inputs and
 * targets, on the stages that read them), rumor_stage_forward,
 * rumor_stage_backward_b, and any time later rumor_stage_backward_w, which
 * adds the weight gradients into the stage's gradient buffer. Dropout masks
 * are keyed by (seed, step, micro-batch, block), so any order of B and W and
 * any recomputation draws the same masks.
 *
 * A GPT head shares the token embedding with the first block (tied
 * weights). A stage holding the head without the embedding keeps a copy of
 * it (tied, initialized like the model) and adds the head's part of its
 * gradient into tied_grad; the pipeline refreshes the copy from the stage
 * that owns the embedding before each step (rumor_stage_sync_tied) and adds
 * tied_grad into that stage's gradient after it. */
#ifndef RUMOR_STAGE_H
#define RUMOR_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "batch.h"
#include "model.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_stage_config {
    const rumor_model_t *model; /* not owned; outlives the stage */
    rumor_device_t *dev;        /* not owned */
    int first, last;            /* blocks [first, last) */
    int max_B;                  /* examples (or windows) per micro-batch */
    int T;                      /* rows per example: the model's context (1 for MLPs) */
    int slots;                  /* micro-batches in flight (>= 1) */
    uint64_t seed;              /* init and dropout */
    uint64_t stream;            /* whose dropout: masks are keyed by (seed, stream,
                                 * step, micro-batch, block); peers pass their rank
                                 * so that theirs differ (0: seed alone) */
    const rumor_optim_config_t *optim; /* NULL: no optimizer state */
} rumor_stage_config_t;

typedef struct rumor_stage_slot {
    rumor_arena_t arena;
    int B, T;                   /* this micro-batch's shape */
    int training;
    long step;
    int micro;
    float *in;                  /* (rows, in_width) the stage's input; NULL for token input */
    float *din;                 /* its gradient; NULL on the first stage */
    int32_t *tok;               /* (rows) tokens: first stage of a token model */
    int32_t *targets;           /* (rows) labels or next tokens: last stage */
    float **out, **dout;        /* per block of the stage: (rows, out_width) */
    void **saved;               /* per block */
    float loss_scale;
    /* a GPU stage's page-locked copies of the rows rumor_stage_load
     * uploads (asynchronously, on the device's stream), reused once the
     * event `loaded` says the last upload from them is done; NULL on the CPU */
    void *host_in, *host_targets;
    rumor_event_t *loaded;
} rumor_stage_slot_t;

typedef struct rumor_stage {
    const rumor_model_t *model;
    rumor_device_t *dev;
    int first, last;
    size_t lo, hi, n;           /* parameter range; n = hi - lo */
    float *params;              /* (n) device; the flat offset off is params[off - lo] */
    float *grads;               /* (n) */
    int owns_params;
    int owns_grads;             /* 0 once bound to a caller's buffer */
    rumor_optim_t *opt;         /* NULL without an optimizer */
    int max_B, T, nslots;
    uint64_t seed;
    uint64_t noise;             /* the dropout keys' seed: seed and stream */
    rumor_stage_slot_t *slots;
    int is_first, is_last;      /* holds block 0 / the head */
    /* a tensor a block of the stage shares with another stage (a GPT head's
     * token embedding): a copy [tied_lo, tied_lo + tied_n) of the flat space
     * and its gradient, NULL when the stage holds what its blocks share */
    float *tied, *tied_grad;
    size_t tied_lo, tied_n;
} rumor_stage_t;

/* Creates the stage and initializes its parameters from cfg->seed (the
 * model's init, rumor_model_init_host, restricted to [lo, hi)). */
int rumor_stage_create(const rumor_stage_config_t *cfg, rumor_stage_t **out) RUMOR_WUR;
void rumor_stage_destroy(rumor_stage_t **sp);

/* A stage over the same blocks sharing src's parameter buffer (not copied),
 * with its own gradients and activations on dev (which must share memory with
 * src's device: the CPU), no optimizer: for worker threads that each take
 * part of a batch. Destroy replicas before src. */
int rumor_stage_create_replica(const rumor_stage_t *src, rumor_device_t *dev, int max_B,
                               rumor_stage_t **out) RUMOR_WUR;

/* Grows the stage to nslots micro-batch slots (nothing when it has as
 * many): a pipeline whose new schedule holds more micro-batches at once. */
int rumor_stage_grow_slots(rumor_stage_t *s, int nslots) RUMOR_WUR;

/* Points the stage at a parameter buffer it does not own (n floats of its
 * device's memory), freeing its own the first time: the gossip mixer owns
 * and rotates a peer's parameter buffers. */
void rumor_stage_bind_params(rumor_stage_t *s, float *params);

/* Points the stage at a gradient buffer it does not own (n floats of its
 * device's memory), freeing its own the first time: a pipeline whose stages
 * share host memory accumulates into the range of one whole-model gradient
 * that an all-reduce or a checkpoint reads as is. */
void rumor_stage_bind_grads(rumor_stage_t *s, float *grads);

/* Copies rows [row0, row0 + n) of batch b's inputs (first stage) and targets
 * (last stage) to slot's device buffers and sets the slot's shape (a GPU
 * stage: queued on its stream from page-locked copies, b may be reused on
 * return); b's kind
 * must match the model's input, tokens and labels must be in [0, V) (checked
 * here: RUMOR_EINVAL names the row). */
int rumor_stage_load(rumor_stage_t *s, int slot, const rumor_batch_t *b, int row0, int n) RUMOR_WUR;

/* Forward of the slot's micro-batch through the stage's blocks. A stage that
 * is not the first reads its input from `in` (device memory of this device,
 * rows x in_width floats; copied into the slot); the first stage passes NULL.
 * step and micro key the dropout masks; training turns dropout on. */
int rumor_stage_forward(rumor_stage_t *s, int slot, const float *in, int training, long step,
                        int micro) RUMOR_WUR;

/* The slot's output (rows, out_width of the last block): the next stage's
 * input, or the head's per-row losses. */
const float *rumor_stage_output(const rumor_stage_t *s, int slot);

/* B: input gradients through the stage's blocks, last to first. The last
 * stage seeds its head with loss_scale (d total loss / d one row's loss) and
 * passes dy = NULL; other stages pass the gradient of their output. On every
 * stage but the first, rumor_stage_input_grad is then the gradient to send
 * upstream. */
int rumor_stage_backward_b(rumor_stage_t *s, int slot, const float *dy, float loss_scale) RUMOR_WUR;
const float *rumor_stage_input_grad(const rumor_stage_t *s, int slot);

/* Where the gradient of the slot's output goes (rows x out_width floats of
 * the stage's device): a pipeline's next stage sends it here, and this
 * stage's B then passes it as dy, which is not copied again. */
float *rumor_stage_output_grad(rumor_stage_t *s, int slot);

/* The device bytes one slot (a micro-batch's activations) takes. */
size_t rumor_stage_slot_bytes(const rumor_stage_t *s);

/* The device bytes the stage holds: parameters it owns, gradients it owns,
 * optimizer state, a tied copy and its gradient, and its slots: its peak
 * (a step allocates nothing). */
size_t rumor_stage_device_bytes(const rumor_stage_t *s);

/* W: grads += the weight gradients of the slot's micro-batch (after its B). */
int rumor_stage_backward_w(rumor_stage_t *s, int slot) RUMOR_WUR;

/* Copies the shared tensor (tied_n floats of src_dev's memory, the owner's
 * current values) into the stage's tied copy; nothing for a stage without
 * one. */
int rumor_stage_sync_tied(rumor_stage_t *s, const float *src, rumor_device_t *src_dev) RUMOR_WUR;

/* Where a stage that is not the first keeps the slot's input (rows x
 * in_width floats of its device): a link from another device copies the
 * previous stage's output here, and forward then reads it in place. */
float *rumor_stage_input_buffer(rumor_stage_t *s, int slot);

/* grads = 0, and tied_grad (a fill: a NaN from an earlier step does not
 * survive). */
int rumor_stage_zero_grad(rumor_stage_t *s) RUMOR_WUR;

/* Last stage: the sum of the slot's per-row losses, and when correct is not
 * NULL how many rows' argmax equals the target (from the head's logits;
 * downloads them; after an eval forward only). */
int rumor_stage_loss(rumor_stage_t *s, int slot, double *sum, long *correct) RUMOR_WUR;

/* The head's (rows, V) logits of the slot's last forward, on the device,
 * when that was an eval forward (training 0): a training forward leaves the
 * gradient of the loss there instead. */
const float *rumor_stage_logits(const rumor_stage_t *s, int slot);

/* One optimizer step over the stage's range at the schedule's rate (o->t += 1). */
int rumor_stage_step(rumor_stage_t *s) RUMOR_WUR;

/* The stage's parameters to/from host memory (n floats). */
int rumor_stage_get_params(const rumor_stage_t *s, float *host) RUMOR_WUR;
int rumor_stage_set_params(rumor_stage_t *s, const float *host) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

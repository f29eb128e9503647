/* The trainer: the training policy of rumor-train and rumor-peer in one
 * object that tests can drive.
 *
 * rumor_trainer_create opens the device, the model (a language model's
 * context sets the data's window) and the data (source.h), checks that they
 * fit, sizes the run (steps per epoch the same on every rank, total steps,
 * warm-up capped to a tenth of a short run, cosine decay over the run),
 * builds the whole-model stage with its optimizer and the worker pool. Steps
 * are keyed by their number: the batch of step k, its gradients (a
 * non-finite loss is an error that names the step and the learning rate),
 * the optimizer update. It evaluates any parameter vector on the validation
 * data, and saves and resumes checkpoints.
 *
 * rumor_trainer_run is rumor-train's whole run (progress line, evaluations,
 * checkpoints, metrics). rumor-peer drives the steps itself between gossip
 * rounds: the mixer owns the parameter buffer, bound with
 * rumor_trainer_bind. */
#ifndef RUMOR_TRAINER_H
#define RUMOR_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "batch.h"
#include "model.h"
#include "optim.h"
#include "pipeline.h"
#include "progress.h"
#include "source.h"
#include "stage.h"
#include "step.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_trainer_config {
    const char *data;      /* --data spec (source.h); default fashion-mnist */
    const char *model;     /* --model spec (model.h); default mlp:784-256-256-10 */
    const char *device;    /* NULL: "cpu" with `threads` workers */
    int threads;           /* CPU workers (0: one per core) */
    int rank, world;       /* this process's shard (default 0 of 1) */
    uint64_t data_stream;  /* 0: the shard's order; else (open membership, world
                            * 1) this peer's own seeded stream over the whole
                            * set, and its dropout stream (source.h) */
    uint64_t seed;         /* initialization, data order, dropout (default 1) */
    int batch;             /* examples or windows per step (default 128) */
    int epochs;            /* passes over the shard when steps is 0 (default 10) */
    long steps;            /* > 0: the run's length in steps */
    long train_limit;      /* images: the shard's first N examples (0: all) */
    int shuffle_labels;    /* images: permute the labels (a control run) */
    int lockstep;          /* every rank takes the same steps per epoch (peers) */
    int host_params;       /* refuse a device whose parameters are not host memory */
    int eval_batches;      /* validation batches per evaluation (0: all) */
    rumor_optim_config_t optim; /* kind and rates; the schedule is set from below */
    double warmup_epochs;  /* linear warm-up (default 0.2 epochs) */
    int cosine;            /* 1 (default): cosine decay to optim.min_lr_ratio at the end */
    /* A pipeline (pipeline.h) when stages > 1, a schedule or devices are
     * given: the model cut into stages over `devices` ("cpu:1,cpu:1"; a
     * device may repeat; default stages x "cpu:1"), run by `schedule`
     * (default 1f1b) over `microbatches` (default 2 x stages) micro-batches,
     * cut by `partition` (uniform, params or "0-3,4-7"; default uniform).
     * The whole model's parameters stay one buffer, which the stages train
     * in place; the optimizer steps it whole. */
    const char *devices, *schedule, *partition;
    int stages, microbatches;
    /* how GPU devices compute their matrix products (ops.h; fp32 by
     * default): tf32 or bf16 need a GPU; parameters, gradients, optimizer
     * state and what a peer gossips stay fp32 */
    rumor_precision precision;
    /* a language model on text (bytes, vocabulary 256) must have that
     * vocabulary: another one (vocab=50257) trains an output layer of
     * tokens the data never holds. 1 allows a larger one anyway. Token
     * shards do not record their vocabulary: any model's vocabulary goes,
     * and a token at or above it is an error when the shard is read. */
    int allow_vocab_mismatch;
} rumor_trainer_config_t;

/* A trainer: the device, the data, the model with its stages or pipeline,
 * the optimizer and its workers (opaque; what callers read has a function
 * below). */
typedef struct rumor_trainer rumor_trainer_t;

/* A model's score on the validation data: mean loss per target (nats),
 * accuracy (images; -1 for a language model) and the targets counted. */
typedef struct rumor_eval {
    double loss, accuracy;
    long targets;
} rumor_eval_t;

void rumor_trainer_config_default(rumor_trainer_config_t *c);

/* Checks everything about c that needs no file, device or data opened:
 * numbers in range, the model spec and its kind against the data's, the
 * vocabulary (above), the device specs (each --devices entry non-empty and
 * a spec; as many as --stages when both are given), and a pipeline's
 * schedule, micro-batches and partition against the model's blocks. The
 * programs call it before they load anything, so what it refuses is bad
 * usage (exit 2); rumor_trainer_create calls it too. RUMOR_EINVAL with the
 * reason. */
int rumor_trainer_config_check(const rumor_trainer_config_t *c) RUMOR_WUR;

/* Every error names what is wrong (the data, the model, the device). *out
 * is NULL on failure. */
int rumor_trainer_create(const rumor_trainer_config_t *c, rumor_trainer_t **out) RUMOR_WUR;
void rumor_trainer_destroy(rumor_trainer_t **tp);

/* What a trainer is: its model (spec, nparameters, context), the bound
 * parameters (the whole model's flat buffer, trained in place), its
 * device, its data, whether it runs a pipeline of stages or a language
 * model, the run's length, and a pipeline's measured bubble (averaged over
 * steps) and the last rumor_trainer_grads_step's wait (seconds after the
 * gradient: the schedule's tail, waiting for next() and stepping). */
const rumor_model_t *rumor_trainer_model(const rumor_trainer_t *t);
float *rumor_trainer_params(const rumor_trainer_t *t);
rumor_device_t *rumor_trainer_device(const rumor_trainer_t *t);
rumor_source_t *rumor_trainer_source(const rumor_trainer_t *t);
int rumor_trainer_pipelined(const rumor_trainer_t *t);
int rumor_trainer_is_lm(const rumor_trainer_t *t);
long rumor_trainer_steps_per_epoch(const rumor_trainer_t *t);
long rumor_trainer_total_steps(const rumor_trainer_t *t);
double rumor_trainer_bubble(const rumor_trainer_t *t);
double rumor_trainer_step_wait(const rumor_trainer_t *t);

/* The training batch of `step`; valid until the next call. */
int rumor_trainer_batch(rumor_trainer_t *t, long step, rumor_batch_t *b) RUMOR_WUR;

/* Gradients of batch b at the bound parameters; *loss its mean loss. A loss
 * that is not finite is RUMOR_EINVAL ("training diverged: loss is nan at
 * step 12: lower --lr (now 0.05)"). Pipeline stages on another device than
 * the trainer's (a GPU stage of a host model) keep their gradient where they
 * are, for their own optimizer step: rumor_trainer_flat_grads brings it
 * into stage->grads for whoever reads the flat gradient. */
int rumor_trainer_grads(rumor_trainer_t *t, const rumor_batch_t *b, long step,
                        float *loss) RUMOR_WUR;

/* rumor_trainer_grads and the optimizer step, onto new parameters that
 * next() hands over (a gossip round's mix: rumor_mixer_range_wait): each
 * pipeline stage asks for its own range as soon as its gradient is complete
 * and steps on it without waiting for the other stages (pipeline.h,
 * rumor_pipeline_grads_step); a trainer without a pipeline asks for the
 * whole space once its gradient is computed. Afterwards the trainer is
 * bound to the buffer next() handed over, which holds the stepped
 * parameters (a GPU stage's copy back lands asynchronously:
 * rumor_trainer_params_ready). A loss that is not finite is an error, as
 * for rumor_trainer_grads, after the step. wait_s says how much of the
 * call came after the gradient. */
int rumor_trainer_grads_step(rumor_trainer_t *t, const rumor_batch_t *b, long step, float *loss,
                             rumor_pipeline_next_fn next, void *ctx) RUMOR_WUR;

/* A trainer without a pipeline steps in ranges of `cell` parameters in
 * rumor_trainer_grads_step, each as soon as next() hands it over, in order,
 * and tells stepped(ctx, x, upto) (ctx: grads_step's) after each that
 * x[0, upto) holds the stepped parameters (a gossip round sends them on
 * while later ranges still arrive: rumor_mixer_send_ahead). stepped's
 * error ends the step. The result equals the whole-space step's. cell 0 or
 * stepped NULL: the whole space at once (the default). */
typedef int (*rumor_trainer_stepped_fn)(void *ctx, const float *x, size_t upto);
void rumor_trainer_set_step_ranges(rumor_trainer_t *t, size_t cell,
                                   rumor_trainer_stepped_fn stepped);

/* The flat gradient of the last rumor_trainer_grads, current in
 * stage->grads (copied from stages elsewhere if need be); a caller may
 * change it (an all-reduce), and rumor_trainer_update steps on what it
 * holds then. NULL on an error. */
float *rumor_trainer_flat_grads(rumor_trainer_t *t);

/* Parameters a pipeline's GPU stages copy back into the bound host buffer
 * after each rumor_trainer_update land asynchronously, while the next step
 * computes: rumor_trainer_params_ready (1 landed, 0 not yet, < 0 error;
 * never blocks, any thread) and rumor_trainer_sync_params (waits) say when
 * the buffer may be read. Evaluating, saving and binding wait themselves. */
int rumor_trainer_params_ready(rumor_trainer_t *t) RUMOR_WUR;
int rumor_trainer_sync_params(rumor_trainer_t *t) RUMOR_WUR;

/* Whether the pipeline's stages fill this machine's cores (CPU stages whose
 * threads are at least its online cores): gossip's own work (mixing) then
 * belongs in the stages' idle time (rumor_mixer_set_caller_mixes) rather
 * than on a thread of its own competing with them. 0 without a pipeline or
 * with a GPU stage. */
int rumor_trainer_fills_cores(const rumor_trainer_t *t);

/* The device whose host_alloc the bound host buffer should come from (a
 * pipeline's first GPU stage when the trainer's device is the CPU: its
 * page-locked memory makes the stages' copies asynchronous and full speed),
 * or NULL. */
rumor_device_t *rumor_trainer_host_mem(const rumor_trainer_t *t);

/* The gradient of `batches` training batches, those of steps first,
 * first + 1, ..., averaged over all their targets into the flat gradient
 * (stage->grads); *loss their mean loss, *examples how many examples they
 * held. One batch is rumor_trainer_grads on rumor_trainer_batch(first). */
int rumor_trainer_grads_many(rumor_trainer_t *t, long first, int batches, float *loss,
                             long *examples) RUMOR_WUR;

/* One optimizer step at the scheduled rate; *lr (may be NULL) gets it. */
int rumor_trainer_update(rumor_trainer_t *t, float *lr) RUMOR_WUR;

/* The learning rate of the next update. */
float rumor_trainer_lr(const rumor_trainer_t *t);

/* Optimizer steps taken (restored from a checkpoint): a peer draws the
 * batch of this step next. */
long rumor_trainer_optim_steps(const rumor_trainer_t *t);

/* Sets the optimizer's step count (its learning-rate schedule and the
 * batch drawn next): a peer that fetched the swarm's state at round k
 * takes up the schedule where the swarm is. Moments stay as they are. */
void rumor_trainer_set_optim_steps(rumor_trainer_t *t, long step);

/* The 1-based epoch that step belongs to. */
int rumor_trainer_epoch(const rumor_trainer_t *t, long step);

/* Points the model at `params` (nparams floats of the trainer device's
 * memory that the caller keeps); NULL points it back at the stage's own
 * buffer. Pipeline stages on another device (a GPU stage of a peer whose
 * buffers are host memory) load their range now, and write it back after
 * each rumor_trainer_update: change the buffer's contents before binding
 * it, not after. */
int rumor_trainer_bind(rumor_trainer_t *t, float *params) RUMOR_WUR;

/* Scores `params` (NULL: the bound parameters) on the first `batches`
 * validation batches (< 0: cfg.eval_batches; 0: all), dropout off; the
 * bound parameters stay bound. */
int rumor_trainer_evaluate(rumor_trainer_t *t, const float *params, int batches,
                           rumor_eval_t *e) RUMOR_WUR;

/* The same for any step and source: the first max_batches (0: all)
 * validation batches of `batch`. */
int rumor_evaluate(rumor_step_t *s, rumor_source_t *src, int batch, int max_batches,
                   rumor_eval_t *e) RUMOR_WUR;

/* Writes a checkpoint after `step` steps (checkpoint.h names it by swarm and
 * rank) keeping the newest `keep`. */
int rumor_trainer_save(rumor_trainer_t *t, const char *dir, const char *swarm, int rank,
                       long step, int keep) RUMOR_WUR;

/* Writes other parameters of this model (a swarm average) as a checkpoint
 * without optimizer state: DIR/<swarm>-r<rank>-<step>.safetensors, keeping
 * the newest one of that swarm name and rank. */
int rumor_trainer_save_params(rumor_trainer_t *t, const float *params, const char *dir,
                              const char *swarm, int rank, long step) RUMOR_WUR;

/* Loads a checkpoint into the model and optimizer; *step gets its step. */
int rumor_trainer_resume(rumor_trainer_t *t, const char *path, long *step) RUMOR_WUR;

/* Loads the newest checkpoint of (swarm, rank) in dir that loads: 0 and
 * *step, path (may be NULL) when one did; RUMOR_CKPT_NONE when there is
 * none; a negative code when dir cannot be read. */
int rumor_trainer_resume_latest(rumor_trainer_t *t, const char *dir, const char *swarm, int rank,
                                long *step, char *path, size_t path_len) RUMOR_WUR;

/* Names a trace's rows for this trainer's compute (a pipeline's devices, or
 * its one device) and returns how many it named: the caller's own rows
 * (a peer's gossip) come after. */
int rumor_trainer_trace_rows(const rumor_trainer_t *t, rumor_trace_t *tr);

/* Adds a step to the trace: its gradient computed over [g0, g1] (a
 * pipeline's every action instead) and its optimizer update over [u0, u1]. */
void rumor_trainer_trace(const rumor_trainer_t *t, rumor_trace_t *tr, long step, double g0,
                         double g1, double u0, double u1);

/* "mlp:784-256-256-10, 269322 parameters, cpu:2, 2 workers" and the data's
 * and the schedule's lines, for the programs' heading. */
void rumor_trainer_describe(const rumor_trainer_t *t, FILE *out, const char *prog);

/* The pipeline's lines alone (nothing without one): its schedule, and each
 * stage's device, blocks, parameters and predicted time. */
void rumor_trainer_describe_pipeline(const rumor_trainer_t *t, FILE *out, const char *prog);

/* rumor-train's run: from step `first` (a resumed run's) to total_steps.
 * first at or past total_steps is RUMOR_ESTATE: nothing would run. */
typedef struct rumor_run_config {
    long first;               /* the step to start at */
    long eval_every;          /* steps between evaluations; 0: each epoch's end */
    const char *checkpoint_dir; /* a checkpoint at every evaluation (NULL: none) */
    int keep_checkpoints;
    const char *optimizer;    /* its name, for the metrics */
    FILE *out;                /* progress and results (stdout) */
    double progress;          /* seconds between progress lines (< 0: the default) */
    int quiet;
    rumor_metrics_t *metrics; /* NULL or closed: none */
    const char *trace;        /* a Chrome trace of every step (trace.h): a pipeline's
                               * actions, a row a device, or each step's compute
                               * (NULL: none) */
} rumor_run_config_t;

typedef struct rumor_run_result {
    rumor_eval_t eval;        /* the last evaluation */
    long steps;               /* the step reached */
    double seconds, rate;     /* examples or tokens per second */
} rumor_run_result_t;

int rumor_trainer_run(rumor_trainer_t *t, const rumor_run_config_t *rc,
                      rumor_run_result_t *res) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

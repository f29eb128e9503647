/* A model cut into stages across devices, run by a pipeline schedule
 * (schedule.h).
 *
 * The model's blocks are cut into S = P x V stages (uniformly by blocks,
 * or at the cuts given); stage s lives on the device the schedule places it
 * on (rumor_schedule_device: s mod P, or a V shape for zbv). A training step
 * splits the batch into M micro-batches and runs the schedule: one worker
 * thread a device executes its action list in order, each action waiting
 * only for the activation or gradient it needs to arrive (a message from
 * the neighbouring stage), not for a global clock. An activation or an
 * input gradient moves between stages by a copy over the link between their
 * devices (link.h: a memcpy, a copy within a GPU, an upload or download, a
 * peer copy or NCCL between GPUs): the next stage's forward copies its input
 * into its own slot, and a stage's B sends its input gradient into the slot
 * of the stage before. A stage on a GPU finishes its F or B (syncs its
 * stream) before the stage waiting on it is told, so links never read
 * half-computed data. Each pipeline rank needs a device object of its own
 * where it is a GPU (a stream and a cuBLAS handle are one thread's).
 *
 * Activation memory is what the schedule needs, not M micro-batches' worth:
 * stage s holds the validator's peak_stage[s] slots, taking one for a
 * micro-batch at its F and giving it back at its W (1F1B's stage s: P - s
 * slots; GPipe's: M).
 *
 * A worker whose next action waits for its input first runs the Ws listed
 * after it whose B is done: the schedules' orders come from unit costs
 * (F = B = W), real ones differ, and a W moved earlier breaks no
 * dependency (nothing waits on a W) and raises no peak (it frees a slot
 * sooner), so zero-bubble schedules fill the waits their list did not
 * foresee. Each stage accumulates its weight
 * gradients over the micro-batches and steps its own optimizer over its own
 * parameter range.
 *
 * A micro-batch's dropout masks are keyed by (step, micro-batch, block),
 * whatever stage or order runs it, so a pipelined step computes what the
 * same micro-batches computed one after another by one stage do. */
#ifndef RUMOR_PIPELINE_H
#define RUMOR_PIPELINE_H

#include <stdatomic.h>
#include <stdio.h>

#include "batch.h"
#include "link.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "schedule.h"
#include "stage.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_pipeline_config {
    const rumor_model_t *model;   /* not owned; outlives the pipeline */
    rumor_device_t **devs;        /* (ndevs) device of each pipeline rank; may repeat */
    int ndevs;                    /* P */
    const char *schedule;         /* schedule.h's spec */
    int microbatches;             /* M */
    const int *cuts;              /* S + 1 block boundaries (NULL: equal blocks;
                                   * rumor_pipeline_partition makes others) */
    int max_B;                    /* rows of a whole batch */
    int T;                        /* rows per example (the model's context; 1 for MLPs) */
    uint64_t seed;                /* init (the whole model's) and dropout */
    uint64_t stream;              /* whose dropout (stage.h): a peer's rank */
    const rumor_optim_config_t *optim; /* NULL: no optimizer */
} rumor_pipeline_config_t;

typedef struct rumor_pipeline {
    rumor_pipeline_config_t cfg;  /* the caller's, but its arrays and strings are
                                   * not kept: devs points at dev below; cuts,
                                   * schedule and optim are NULL (see cut,
                                   * sched->name, the stages' opt) */
    rumor_device_t **dev;         /* (P) each rank's device (not owned) */
    rumor_schedule_t *sched;
    int P, V, S, M;
    int *cut;                     /* (S + 1) */
    rumor_stage_t **st;           /* (S) */
    double *busy_s;               /* (P) seconds each device computed in the last step */
    double step_s;                /* the last step's wall time */
    int early_w;                  /* Ws the last step ran before their place (waits filled) */
    long steps;                   /* steps run */
    double t0;                    /* when the last step began (rumor_now) */
    double **ev;                  /* (P) start and end of each action of the last step,
                                   * 2 x sched->n[d], seconds from t0 */
    rumor_link_t **link;          /* (S - 1) link[s] joins stage s and s + 1 (link.h) */
    float **tied_tmp;             /* (S) where a stage's tied gradient lands on its owner's
                                   * device, when the two are not one device (else NULL) */
    double (*fin)[3];             /* (S) the last rumor_pipeline_grads_step's finish of each
                                   * stage, seconds from t0: gradient complete, range
                                   * handed over, optimizer step done (0: none) */
    atomic_long idle_works;       /* the last step's pieces of next()'s work (cells of a
                                   * gossip round mixed) done while a worker waited
                                   * for an input */
    int *tied_of;                 /* (S) the stage holding the tensor stage s keeps a
                                   * copy of, or -1 */
    struct pipeline_run *run;     /* the step under way (pipeline.c) */
    int timed;                    /* GPU stages' actions are waited for, one at a time,
                                   * so that ev (a trace, the costs a re-plan reads)
                                   * measures the GPU rather than the queueing; the
                                   * first two steps of a zero-bubble schedule are
                                   * timed so (its re-plan). 0: the host waits for
                                   * the losses alone */
    struct pipeline_param_io *pio; /* (S) the copies of stages whose parameters are
                                   * not the caller's buffer (pipeline.c) */
} rumor_pipeline_t;

/* Cuts the model, builds the schedule (refusing combinations it cannot
 * run, a cut list that does not cover the blocks, more stages than blocks)
 * and the stages, each with the slots its schedule's peak needs. */
int rumor_pipeline_create(const rumor_pipeline_config_t *cfg, rumor_pipeline_t **out) RUMOR_WUR;
void rumor_pipeline_destroy(rumor_pipeline_t **pp);

/* Every stage's gradient of the mean loss over batch b (at least M rows,
 * split into M micro-batches of consecutive rows, the first b->n mod M one
 * row larger); *loss that mean loss. Dropout on, keyed by step. */
int rumor_pipeline_grads(rumor_pipeline_t *p, const rumor_batch_t *b, long step,
                         float *loss) RUMOR_WUR;

/* Where stage s's next parameters come from, for rumor_pipeline_grads_step:
 * 1 with *params pointing at a buffer of host memory whose [lo, hi) (the
 * stage's range) holds them, 0 when they have not come within `wait`
 * seconds, < 0 on an error. Called from the stages' worker threads, several
 * at once. A worker waiting for an input also calls it with wait < 0 for
 * its stages still computing: a moment for a piece of the work the range
 * needs (rumor_mixer_range_wait mixes a cell), returning 2 when it did one
 * (the worker then looks at its input again), 0 or 1 otherwise. */
typedef int (*rumor_pipeline_next_fn)(void *ctx, int s, size_t lo, size_t hi, double wait,
                                      float **params);

/* rumor_pipeline_grads, and each stage's optimizer step as soon as its own
 * gradient is complete (its last action, and the tied copies' parts added)
 * and next() hands it its range of `host` memory (a gossip round's mix):
 * the stage binds to that buffer (one on another device uploads its range),
 * steps, and copies the result back (a GPU: asynchronously, see
 * rumor_pipeline_params_ready), without waiting for the other stages. The
 * wait fills idle time: between actions and while it waits for an input, a
 * worker steps the stages whose ranges came; at the end of its list it
 * waits for the rest. Each stage steps at most once; when next is NULL no
 * stage steps (rumor_pipeline_grads). */
int rumor_pipeline_grads_step(rumor_pipeline_t *p, const rumor_batch_t *b, long step,
                              float *loss, rumor_device_t *host, rumor_pipeline_next_fn next,
                              void *ctx) RUMOR_WUR;

/* Rebuilds a zero-bubble schedule's lists for the costs the last step
 * measured (each stage's mean F, B and W: rumor_schedule_build_costed), or
 * for cost (S x 3: F, B, W seconds a stage) when not NULL, validated, and
 * adopts them when they leave less idle at those costs than
 * the lists in use (stages grow the slots the new peaks need). *before and
 * *after: the two lists' bubbles simulated at the costs. Returns 1 when
 * the lists changed, 0 when they stay, < 0 on an error (the old lists
 * stay). Schedules other than zb-h1 and zbv do not depend on costs. */
int rumor_pipeline_replan(rumor_pipeline_t *p, const double *cost, double *before,
                          double *after) RUMOR_WUR;

/* Every stage's optimizer step over its own range, on its own device, at
 * the schedule's rate (each stage's count advances). */
int rumor_pipeline_update(rumor_pipeline_t *p) RUMOR_WUR;

/* Points every stage whose device shares dev's memory at its range of a
 * whole-model parameter buffer (params + stage lo, memory of dev): the
 * pipeline then trains the caller's parameters (a trainer's, a mixer's) in
 * place. Stages elsewhere (a GPU stage of a host buffer) keep their own
 * parameters and get a copy of their range; rumor_pipeline_write_params
 * copies them back. Returns 1 when every stage was bound in place. */
int rumor_pipeline_bind_params(rumor_pipeline_t *p, float *params, rumor_device_t *dev) RUMOR_WUR;

/* Starts copying the parameters of the stages not bound in place into
 * their range of params (memory of dev, page-locked for full speed: see
 * the device's host_alloc): after an optimizer step, so that the whole
 * buffer becomes current. The copies run on a stream of each stage's own,
 * after its step, while the caller goes on (the next step computes on the
 * stage's own parameters meanwhile); rumor_pipeline_params_ready says when
 * they landed, rumor_pipeline_params_sync waits for them. The next
 * rumor_pipeline_bind_params orders itself after them. */
int rumor_pipeline_write_params(rumor_pipeline_t *p, float *params, rumor_device_t *dev) RUMOR_WUR;

/* 1 when every copy rumor_pipeline_write_params started has landed, 0 while
 * one runs, < 0 on an error. Never blocks; callable from another thread
 * (a mixer's comm thread) while the caller computes. */
int rumor_pipeline_params_ready(rumor_pipeline_t *p) RUMOR_WUR;

/* Waits for the copies rumor_pipeline_write_params started. */
int rumor_pipeline_params_sync(rumor_pipeline_t *p) RUMOR_WUR;

/* Points every stage whose device shares dev's memory at its range of a
 * whole-model gradient buffer (grads + stage lo): those stages accumulate
 * there, so the caller reads (or all-reduces) one flat gradient without a
 * copy. Returns 1 when every stage was bound, 0 when a stage lives
 * elsewhere (its gradients stay its own: rumor_pipeline_gather_grads copies
 * them). */
int rumor_pipeline_bind_grads(rumor_pipeline_t *p, float *grads, rumor_device_t *dev);

/* Copies the stages' gradients that are not bound into grads + their lo
 * (memory of dev), and back (a gradient the caller changed, e.g.
 * all-reduced). */
int rumor_pipeline_gather_grads(const rumor_pipeline_t *p, float *grads,
                                rumor_device_t *dev) RUMOR_WUR;
int rumor_pipeline_scatter_grads(rumor_pipeline_t *p, const float *grads,
                                 rumor_device_t *dev) RUMOR_WUR;

/* The optimizer state of every stage gathered into (to_whole) or scattered
 * from a whole-model optimizer o of the same kind (on any device): a
 * checkpoint holds the whole space, whatever the cut. The step count goes
 * along. */
int rumor_pipeline_optim_state(rumor_pipeline_t *p, rumor_optim_t *o, int to_whole) RUMOR_WUR;

/* Optimizer steps taken (every stage takes each one). */
long rumor_pipeline_optim_steps(const rumor_pipeline_t *p);
/* Sets every stage's step count (a peer that fetched the swarm's state
 * takes up the swarm's learning-rate schedule). */
void rumor_pipeline_set_optim_steps(rumor_pipeline_t *p, long t);

/* The measured bubble of the last step: the share of P x its wall time that
 * the devices spent waiting. */
double rumor_pipeline_bubble(const rumor_pipeline_t *p);

/* The bubble the schedule itself leaves at the last step's costs: its lists
 * simulated (rumor_schedule_simulate) with each stage's mean F, B and W
 * seconds as measured in that step. Against the measured bubble it tells
 * the schedule's idle time (unequal stages, F, B and W of unlike cost) from
 * the executor's (waking, copying). */
int rumor_pipeline_expected_bubble(const rumor_pipeline_t *p, double *bubble) RUMOR_WUR;

/* Names the trace's rows 0 to P - 1 after the pipeline's devices. */
void rumor_pipeline_trace_rows(const rumor_pipeline_t *p, rumor_trace_t *t);

/* Adds the last step's actions to a trace (trace.h), a row a device: each
 * F, B, W or BW with its stage, micro-batch and step; after
 * rumor_pipeline_grads_step also each stage's wait for its range ("wait for
 * mix S", category gossip) and its optimizer step ("step S"). */
void rumor_pipeline_trace(const rumor_pipeline_t *p, rumor_trace_t *t, long step);

/* Whether the last step stepped every stage (rumor_pipeline_grads_step). */
int rumor_pipeline_stepped(const rumor_pipeline_t *p);

/* Cuts for a partition spec over S stages: "uniform" (equal blocks),
 * "params" (equal parameters, at block boundaries) or a list of block
 * ranges "0-3,4-7,8,9-12" that covers the blocks in order. cuts has S + 1
 * entries. */
int rumor_pipeline_partition(const rumor_model_t *m, const char *spec, int S,
                             int *cuts) RUMOR_WUR;

/* --partition profile (PipeDream's planner): times each block's F, B and
 * W on each of the P devices it could run on (micro-batches of b->n / M of
 * batch b's first rows), and chooses the cut of S stages (stage s on device
 * dev_of[s], rumor_schedule_placement) that minimizes the slowest stage's
 * time: its blocks on its device for M micro-batches, plus copying its
 * activation out and the gradient back. Unlike devices get unlike shares.
 * cuts: S + 1 entries; stage_s (may be NULL): each stage's predicted
 * seconds a step. */
int rumor_pipeline_profile(const rumor_model_t *m, rumor_device_t **devs, int P,
                           const int *dev_of, int S, const rumor_batch_t *b, int M, int T,
                           uint64_t seed, int *cuts, double *stage_s) RUMOR_WUR;

/* The planner behind profile: cost (P x nb) is block k's seconds of F + B
 * + W for one micro-batch on device d at cost[d nb + k], xfer (nb) the
 * seconds to move block k's output and its gradient between stages. Fills
 * the cuts of S stages (stage s on device dev_of[s]) that minimize the
 * slowest stage's time for M micro-batches (a stage's time on a device that
 * holds several stages is its own: they take turns), and (stage_s not NULL)
 * each stage's time. */
int rumor_pipeline_plan(const double *cost, const double *xfer, int nb, int P, const int *dev_of,
                        int S, int M, int *cuts, double *stage_s) RUMOR_WUR;

/* The rows of micro-batch m of a batch of n rows split M ways. */
void rumor_pipeline_micro_rows(int n, int M, int m, int *row0, int *rows);

#ifdef __cplusplus
}
#endif
#endif

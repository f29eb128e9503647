/* The pipeline's internals, shared by its sources (not installed):
 *   pipeline.c         creating and destroying a pipeline, and a step's run:
 *                      the workers started, joined and their results read
 *   pipeline_worker.c  a device's worker thread: its action list, the waits
 *                      between stages, each stage's finish (gradient complete,
 *                      optimizer step on the range next() hands it)
 *   pipeline_params.c  parameters, gradients and optimizer state between the
 *                      stages and a whole-model buffer (bound in place, or
 *                      copied, a GPU stage's copy back on a stream of its own)
 *   pipeline_trace.c   what a step measured: the bubble, the simulated bubble
 *                      at the measured costs, re-planning, the trace
 *   pipeline_plan.c    cuts: partition specs, profiling and the planner
 *
 * Who touches what during a step (rumor_pipeline_grads_step): the run's
 * flags (done_f, done_b, acted) and `failed` are read and written under
 * run->mu by every worker; a stage's slots, pool, left and finished belong
 * to the worker of the stage's device alone; the rest of the pipeline is
 * read-only until the workers are joined. */
#ifndef RUMOR_PIPELINE_INT_H
#define RUMOR_PIPELINE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "pipeline.h"

/* One step under way: what has been done, and the first error. */
struct pipeline_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* on CLOCK_MONOTONIC (its timed waits) */
    uint8_t *done_f, *done_b;     /* (S x M) */
    int *slot_of;                 /* (S x M) the slot holding (stage, micro-batch) */
    int **pool, *npool;           /* (S) each stage's free slots; only its device's
                                   * worker takes and returns them */
    double *loss;                 /* (M) each micro-batch's summed loss */
    uint8_t **early;              /* (P)(n[d]) a W run before its place in the list */
    const rumor_batch_t *b;
    long step;
    float loss_scale;
    int failed;
    char err[512];
    /* each stage's finish: its gradient complete (its own actions, and the
     * tied copies' parts added), then its optimizer step on the range
     * next() hands it */
    int *left;                    /* (S) actions of stage s not done yet (its worker's) */
    uint8_t *acted;               /* (S) all of them done (under mu) */
    uint8_t *finished;            /* (S) gradient complete; 2: stepped too (its worker's) */
    rumor_pipeline_next_fn next;  /* NULL: no step */
    void *next_ctx;
    rumor_device_t *host;         /* the memory next() hands ranges of */
};

/* A device's worker thread of one step (pipeline_worker.c). */
struct pipeline_worker {
    rumor_pipeline_t *p;
    int d;
    double idle; /* seconds spent waiting for inputs */
    double end;  /* when the last action's result was ready (0: not yet) */
    int todo;    /* stages of this device not stepped yet */
    double list_end; /* when its action list ended */
};

/* The thread of a pipeline_worker: runs device w->d's action list, then
 * finishes its stages (pipeline_worker.c). */
void *pipe_work(void *arg);

/* The stage holding the tensor st keeps a copy of (NULL: none). */
rumor_stage_t *pipe_tied_owner(const rumor_pipeline_t *p, const rumor_stage_t *st);

/* ---- parameters of the stages and a whole-model buffer (pipeline_params.c) */

/* Whether a stage on device d copies its range to and from a buffer of
 * `host` asynchronously (a GPU stage, a host buffer); else it copies at once. */
int pipe_copies_async(const rumor_device_t *host, const rumor_device_t *d);

/* Stage s's parameters from `params` (the whole space in dev's memory):
 * bound in place when the stage shares dev's memory (returns 1), else its
 * range is copied in (0). */
int pipe_bind_stage(rumor_pipeline_t *p, int s, float *params, rumor_device_t *dev);

/* Stage s's parameters into its range of `params` (nothing when bound
 * there); a GPU stage's copy runs on its copy stream after its step. */
int pipe_write_stage(rumor_pipeline_t *p, int s, float *params, rumor_device_t *dev);

/* Frees the stages' copy streams and events (p->pio). */
void pipe_pio_free(rumor_pipeline_t *p);

#endif

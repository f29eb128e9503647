/* The pipeline's internals, shared by its sources (not installed):
 *   pipeline.c         creating and destroying a pipeline (its worker
 *                      threads, one a device, live as long as it), and a
 *                      step's run: the workers woken, waited for and their
 *                      results read
 *   pipeline_order.c   the events ordering GPU stages' work and their links'
 *                      copies on their streams (the host waits for none of
 *                      it in a step but for the losses, once)
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
 * read-only until the workers are done.
 *
 * On GPU stages a step's work is queued, and ordered by events on the
 * streams, not by the host (pipeline_order.c): after each action on a slot
 * the stage records done[slot] on its stream; a link copy into a slot (its
 * input, its output's gradient) waits for the source stage's done and the
 * destination slot's done (its last reader, the W of the micro-batch that
 * held it before) and records in[slot], which the stage's stream waits for
 * before it reads the slot; a slot whose input gradient a link read is taken
 * again only after that copy's event (read[slot]). The worker's flags say
 * what has been queued, the events when it ran. */
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
    struct pipeline_events *pev;  /* (S) GPU stages' events (CPU: none) */
    int timed;                    /* this step waits for each GPU action (p->timed) */
    float *loss_host;             /* (M x loss_stride) per-row losses, downloaded as
                                   * each micro-batch's F ends (page-locked on a GPU) */
    size_t loss_stride;
    int *loss_rows;               /* (M) rows of each micro-batch's losses */
    rumor_event_t *loss_ev;       /* after the last download (GPU) */
    /* the worker threads, created with the pipeline: woken for a step (gen
     * moves), each says when done (ndone) */
    pthread_mutex_t wmu;
    pthread_cond_t go, fin;
    long gen;
    int ndone, quit, nthreads;
    pthread_t th[RUMOR_SCHED_MAX_DEVICES];
    struct pipeline_worker *w;    /* (P) */
};

/* A GPU stage's events (pipeline_order.c); n slots covered. */
struct pipeline_events {
    rumor_event_t **done; /* (n) after the stage's last action on the slot */
    rumor_event_t **in;   /* (n) a link's copy into the slot landed */
    rumor_event_t **read; /* (n) not owned: the event after which a link has read
                           * the slot's input gradient (NULL: none pending) */
    int n;
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

/* One step of a pipeline_worker: runs device w->d's action list, then
 * finishes its stages (pipeline_worker.c). */
void pipe_work(struct pipeline_worker *w);

/* ---- events between GPU stages (pipeline_order.c) */

/* Makes the events for the stages' slots (more when a stage grew slots) and
 * the losses' buffer; frees them. */
int pipe_events_make(rumor_pipeline_t *p);
void pipe_events_free(rumor_pipeline_t *p);
/* Stage s's events of slot k: NULL on a CPU stage. */
rumor_event_t *pipe_ev_done(const rumor_pipeline_t *p, int s, int k);
rumor_event_t *pipe_ev_in(const rumor_pipeline_t *p, int s, int k);
/* After an action of stage s on slot k: records done[k] on its stream. */
int pipe_acted_on(rumor_pipeline_t *p, int s, int k);
/* Stage s's stream waits for what a link copied into slot k. */
int pipe_wait_in(rumor_pipeline_t *p, int s, int k);
/* Stage s takes slot k for a micro-batch: its stream waits for a link's
 * pending read of the slot's input gradient. */
int pipe_take_slot(rumor_pipeline_t *p, int s, int k);
/* The last stage queues the download of slot's per-row losses of
 * micro-batch m; pipe_loss_read waits for them all (once a step) and sums
 * each micro-batch's into run->loss. */
int pipe_loss_queue(rumor_pipeline_t *p, int slot, int m);
int pipe_loss_read(rumor_pipeline_t *p);

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

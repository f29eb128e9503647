/* One training step's gradient over a whole-model stage, computed by several
 * worker threads.
 *
 * On the CPU a step's matrices are small (batch 128 x 784 x 256; a GPT's
 * 4096 x 128 x 384): OpenBLAS's own threads cost more than they gain there,
 * so rumor splits the batch instead. Each worker runs forward and backward on
 * its examples with a replica of the stage (shared parameters, its own
 * activations and gradients) and one BLAS thread; the replicas' gradients,
 * each scaled by the whole batch's targets, are then summed into the stage's
 * gradient buffer by parameter ranges (through the ops table), and the
 * optimizer updates ranges in parallel too. Worker w's examples are
 * micro-batch w of the step (its dropout masks are keyed by it). */
#ifndef RUMOR_STEP_H
#define RUMOR_STEP_H

#include "batch.h"
#include "pool.h"
#include "stage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_step rumor_step_t;

/* Prepares `workers` workers for stage st (CPU stages; a GPU stage gets
 * one). st must hold the whole model and outlive the step. */
int rumor_step_create(rumor_stage_t *st, int workers, rumor_step_t **out) RUMOR_WUR;
void rumor_step_destroy(rumor_step_t **sp);
int rumor_step_workers(const rumor_step_t *s);

/* st->grads = the gradient of the mean loss over batch b's targets at
 * st->params; *loss = that mean loss. Dropout on, keyed by step. */
int rumor_step_grads(rumor_step_t *s, const rumor_batch_t *b, long step, float *loss) RUMOR_WUR;

/* Forward only, dropout off: adds b's summed loss to *loss_sum, its targets
 * to *targets and (correct not NULL) the targets whose argmax is right. */
int rumor_step_eval(rumor_step_t *s, const rumor_batch_t *b, double *loss_sum, long *targets,
                    long *correct) RUMOR_WUR;

/* Points the stage and every replica at `params` (see rumor_stage_bind_params). */
void rumor_step_bind_params(rumor_step_t *s, float *params);

/* Applies the stage's optimizer at its scheduled rate (o->t += 1), the range
 * split among the workers. */
int rumor_step_update(rumor_step_t *s) RUMOR_WUR;

/* The same step over [lo, hi) only, at the step number and rate of the
 * optimizer's current step, which advances after the `last` range: a
 * caller steps the space range by range as each is ready (a gossip round's
 * mix, cell by cell), with the result of rumor_step_update. */
int rumor_step_update_range(rumor_step_t *s, size_t lo, size_t hi, int last) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

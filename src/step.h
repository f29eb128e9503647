/* One training step's gradient, computed by several worker threads.
 *
 * On the CPU a step's matrices are small (batch 128 x 784 x 256): OpenBLAS's
 * own threads cost more than they gain there, so rumor splits the batch
 * instead. Each worker runs forward and backward on its rows with a replica
 * of the model (shared parameters, its own activations and gradients) and one
 * BLAS thread; the replicas' gradients, each scaled by the whole batch, are
 * then summed into the model's gradient buffer by parameter ranges, and the
 * optimizer updates ranges in parallel too. With one worker this is exactly
 * rumor_model_forward + backward. */
#ifndef RUMOR_STEP_H
#define RUMOR_STEP_H

#include "model.h"
#include "optim.h"
#include "pool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_step rumor_step_t;

/* Prepares `workers` workers for model m (CPU models; a GPU model gets one).
 * m must outlive the step. */
int rumor_step_create(rumor_model_t *m, int workers, rumor_step_t **out) RUMOR_WUR;
void rumor_step_destroy(rumor_step_t **sp);
int rumor_step_workers(const rumor_step_t *s);

/* m->grads = gradient of the mean loss over the batch x (B, in) with labels
 * y, evaluated at m->params; *loss = that mean loss. Dropout on. */
int rumor_step_grads(rumor_step_t *s, const float *x, const int32_t *y, int batch, float *loss);

/* Points the model and every worker's replica at `params` (see
 * rumor_model_bind_params). */
void rumor_step_bind_params(rumor_step_t *s, float *params);

/* Applies the optimizer to the whole model at its scheduled rate (o->t += 1),
 * the buffer split among the workers. */
int rumor_step_update(rumor_step_t *s, rumor_optim_t *o);

#ifdef __cplusplus
}
#endif
#endif

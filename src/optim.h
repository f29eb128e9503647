/* Optimizers over the flat parameter buffer, and the learning-rate schedule.
 *
 * State (momentum; AdamW's m and v) mirrors the parameter buffer's offsets,
 * so a pipeline stage updates its own range [lo, hi) with step_range and a
 * peer joining late can fetch optimizer state by (offset, length) like the
 * parameters. */
#ifndef RUMOR_OPTIM_H
#define RUMOR_OPTIM_H

#include <stddef.h>

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RUMOR_OPT_SGD = 0, RUMOR_OPT_ADAMW } rumor_optim_kind;

typedef struct rumor_optim_config {
    rumor_optim_kind kind;
    float lr;            /* peak learning rate */
    float momentum;      /* SGD */
    int nesterov;        /* SGD */
    float weight_decay;  /* SGD: L2 added to the gradient; AdamW: decoupled */
    float beta1, beta2, eps; /* AdamW */
    long warmup_steps;   /* linear warm-up from lr/warmup_steps to lr */
    long total_steps;    /* cosine decay to min_lr_ratio*lr at total_steps; 0: constant */
    float min_lr_ratio;
} rumor_optim_config_t;

/* Defaults: SGD, lr 0.1, momentum 0.9 (Nesterov), weight decay 5e-4; AdamW
 * betas 0.9/0.999, eps 1e-8; no warm-up, constant rate. */
void rumor_optim_config_default(rumor_optim_config_t *cfg);

/* Parses "sgd" or "adamw". */
int rumor_optim_parse_kind(const char *name, rumor_optim_kind *out);

typedef struct rumor_optim {
    rumor_optim_config_t cfg;
    rumor_device_t *dev; /* not owned */
    size_t n;
    float *m;            /* (n) SGD momentum, AdamW first moment */
    float *v;            /* (n) AdamW second moment; NULL for SGD */
    long t;              /* steps taken */
} rumor_optim_t;

int rumor_optim_create(rumor_device_t *dev, const rumor_optim_config_t *cfg, size_t nparams,
                       rumor_optim_t **out) RUMOR_WUR;
void rumor_optim_destroy(rumor_optim_t **op);

/* The learning rate at step t (0-based): warm-up, then cosine decay. */
float rumor_optim_lr_at(const rumor_optim_config_t *cfg, long t);

/* One step over the whole buffer at the schedule's current rate; t += 1. */
int rumor_optim_step(rumor_optim_t *o, float *params, const float *grads);

/* One step over [lo, hi) as step number t (0-based) at rate lr, without
 * advancing o->t: pipeline stages update their ranges of the same step. */
int rumor_optim_step_range(rumor_optim_t *o, float *params, const float *grads, size_t lo,
                           size_t hi, long t, float lr);

#ifdef __cplusplus
}
#endif
#endif

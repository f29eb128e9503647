/* The trainer's internals (not installed). Its sources:
 *   trainer.c       configuration checks, creation (device, model, data,
 *                   stages, pipeline), destruction, the description
 *   trainer_step.c  batches, gradients, updates, binding parameters
 *   trainer_run.c   evaluation, traces and rumor-train's run
 *   trainer_ckpt.c  checkpoints saved and resumed */
#ifndef RUMOR_TRAINER_INT_H
#define RUMOR_TRAINER_INT_H

#include "trainer.h"

struct rumor_trainer {
    rumor_trainer_config_t cfg;
    rumor_device_t *dev;
    rumor_source_t *src;
    rumor_model_t *model;
    rumor_stage_t *stage;     /* the whole model; its optimizer unless pipelined (then
                               * each pipeline stage has its own) */
    rumor_step_t *step;       /* the workers */
    rumor_optim_config_t oc;  /* the optimizer with its schedule */
    long steps_per_epoch, total_steps;
    int lm;                   /* a language model on token windows */
    float *own;               /* the stage's own parameter buffer */
    rumor_pipeline_t *pipe;   /* NULL: the data-parallel workers compute gradients */
    int grads_bound;          /* the stages accumulate into stage->grads in place */
    int params_bound;         /* the stages train stage->params in place (else copies) */
    int grads_on_stages;      /* not bound: the last gradient is in the stages alone
                               * (rumor_trainer_flat_grads copies it into stage->grads) */
    rumor_device_t *pdevs[RUMOR_SCHED_MAX_DEVICES]; /* the pipeline's devices, opened */
    int npdevs;
    double bubble;            /* the pipeline's measured bubble, averaged over steps */
    double wait_s;            /* the last rumor_trainer_grads_step: seconds after the
                               * gradient (a pipeline's schedule), waiting for next()
                               * and stepping */
    size_t step_cell;         /* rumor_trainer_set_step_ranges */
    int (*stepped)(void *ctx, const float *x, size_t upto);
    double *stage_pred;       /* --partition profile: each stage's predicted seconds a step */
    float *acc;               /* rumor_trainer_grads_many's sum (nparams), once needed */
    char *owned[6];           /* copies of cfg's strings */
    char tokenizer[512];      /* the tokens' BPE (bpe.h: rumor_bpe_data_tokenizer), "" none */
    char tokenizer_digest[65];
};

/* Returns a failing call's code with "what: " before its message. */
#define TRY(what, call)                                                                      \
    do {                                                                                     \
        int try_rc_ = (call);                                                                \
        if (try_rc_ < 0)                                                                     \
            return rumor_err_prefix(try_rc_, "%s", what);                                    \
    } while (0)

#endif

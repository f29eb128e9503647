/* The trainer's internals (not installed). Its sources:
 *   trainer.c       configuration checks, creation (device, model, data,
 *                   stages, pipeline), destruction, the description
 *   trainer_step.c  batches, gradients, updates, binding parameters
 *   trainer_run.c   evaluation, traces and rumor-train's run
 *   trainer_ckpt.c  checkpoints saved and resumed */
#ifndef RUMOR_TRAINER_INT_H
#define RUMOR_TRAINER_INT_H

#include "trainer.h"

/* Returns a failing call's code with "what: " before its message. */
#define TRY(what, call)                                                                      \
    do {                                                                                     \
        int try_rc_ = (call);                                                                \
        if (try_rc_ < 0)                                                                     \
            return rumor_err_prefix(try_rc_, "%s", what);                                    \
    } while (0)

#endif

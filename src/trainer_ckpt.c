/* The trainer's checkpoints: saving and resuming the whole model and its
 * optimizer state, whatever the pipeline's cut (see trainer.h). */
#include "trainer.h"
#include "trainer_int.h"

#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

/* A pipeline's optimizer state lives in its stages; checkpoints hold the
 * whole space, so it is gathered into (or scattered from) a whole-model
 * optimizer on the host for the save or the load. */
static int whole_optim(rumor_trainer_t *t, rumor_optim_t **o)
{
    *o = t->stage->opt;
    if (!t->pipe)
        return 0;
    RUMOR_CHECK(rumor_optim_create(t->dev, &t->oc, t->model->nparams, o));
    return 0;
}

static void whole_optim_done(rumor_trainer_t *t, rumor_optim_t **o)
{
    if (t->pipe)
        rumor_optim_destroy(o);
}

/* What a checkpoint of `step` says of itself. */
static rumor_ckpt_info_t ckpt_info(const rumor_trainer_t *t, const char *swarm, int rank,
                                   long step)
{
    rumor_ckpt_info_t ci;
    memset(&ci, 0, sizeof ci);
    ci.round = step;
    ci.epoch = rumor_trainer_epoch(t, step);
    ci.rank = rank;
    snprintf(ci.swarm, sizeof ci.swarm, "%s", swarm);
    snprintf(ci.tokenizer, sizeof ci.tokenizer, "%s", t->tokenizer);
    snprintf(ci.tokenizer_digest, sizeof ci.tokenizer_digest, "%s", t->tokenizer_digest);
    return ci;
}

int rumor_trainer_save(rumor_trainer_t *t, const char *dir, const char *swarm, int rank,
                       long step, int keep)
{
    rumor_ckpt_info_t ci = ckpt_info(t, swarm, rank, step);
    RUMOR_CHECK(rumor_trainer_sync_params(t));
    rumor_optim_t *o;
    RUMOR_CHECK(whole_optim(t, &o));
    int rc = t->pipe ? rumor_pipeline_optim_state(t->pipe, o, 1) : 0;
    if (rc == 0)
        rc = rumor_ckpt_save(dir, t->stage, o, &ci, keep > 0 ? keep : 3);
    whole_optim_done(t, &o);
    return rc;
}

int rumor_trainer_save_params(rumor_trainer_t *t, const float *params, const char *dir,
                              const char *swarm, int rank, long step)
{
    rumor_ckpt_info_t ci = ckpt_info(t, swarm, rank, step);
    RUMOR_CHECK(rumor_trainer_sync_params(t));
    /* the checkpoint reads the stage's parameters only: point it at these
     * for the write (the trainer, not the stage, owns its buffer) */
    float *bound = t->stage->params;
    t->stage->params = (float *)params;
    int rc = rumor_ckpt_save(dir, t->stage, NULL, &ci, 1);
    t->stage->params = bound;
    return rc;
}

int rumor_trainer_resume(rumor_trainer_t *t, const char *path, long *step)
{
    rumor_ckpt_info_t ci;
    rumor_optim_t *o;
    RUMOR_CHECK(whole_optim(t, &o));
    int rc = rumor_ckpt_load(path, t->stage, o, &ci);
    if (rc == 0 && t->pipe)
        rc = rumor_pipeline_optim_state(t->pipe, o, 0);
    if (rc == 0 && t->pipe && !t->params_bound) /* stages on copies load what was read */
        rc = rumor_pipeline_bind_params(t->pipe, t->stage->params, t->dev);
    if (rc > 0)
        rc = 0;
    whole_optim_done(t, &o);
    RUMOR_CHECK(rc);
    *step = ci.round;
    return 0;
}

int rumor_trainer_resume_latest(rumor_trainer_t *t, const char *dir, const char *swarm, int rank,
                                long *step, char *path, size_t path_len)
{
    rumor_ckpt_info_t ci;
    rumor_optim_t *o;
    RUMOR_CHECK(whole_optim(t, &o));
    int rc = rumor_ckpt_load_latest(dir, swarm, rank, t->stage, o, &ci, path, path_len);
    if (rc == 0 && t->pipe) {
        int r2 = rumor_pipeline_optim_state(t->pipe, o, 0);
        if (r2 == 0 && !t->params_bound)
            r2 = rumor_pipeline_bind_params(t->pipe, t->stage->params, t->dev);
        rc = r2 < 0 ? r2 : rc;
    }
    whole_optim_done(t, &o);
    RUMOR_CHECK(rc);
    if (rc == 0)
        *step = ci.round;
    return rc;
}

/* Test helpers: a whole-model stage built from a spec (the model is owned
 * with it). */
#ifndef RUMOR_STAGEUTIL_H
#define RUMOR_STAGEUTIL_H

#include "model.h"
#include "stage.h"

/* A stage of every block of spec on dev for batches up to max_B, parameters
 * from seed, with the optimizer oc (NULL: none). NULL on failure (the error
 * is set). */
static inline rumor_stage_t *su_stage_new(rumor_device_t *dev, const char *spec, int max_B,
                                          uint64_t seed, const rumor_optim_config_t *oc)
{
    rumor_model_t *m = NULL;
    rumor_stage_t *st = NULL;
    if (rumor_model_create(spec, 0, &m) < 0)
        return NULL;
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = 0, .last = m->nblocks,
                                .max_B = max_B, .T = rumor_model_seq(m), .slots = 1,
                                .seed = seed, .optim = oc };
    if (rumor_stage_create(&sc, &st) < 0) {
        rumor_model_destroy(&m);
        return NULL;
    }
    return st;
}

/* Destroys the stage and its model; NULLs *sp; safe twice. */
static inline void su_stage_free(rumor_stage_t **sp)
{
    if (!sp || !*sp)
        return;
    rumor_model_t *m = (rumor_model_t *)(*sp)->model;
    rumor_stage_destroy(sp);
    rumor_model_destroy(&m);
}

#endif

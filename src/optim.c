/* SGD with momentum, AdamW, and warm-up + cosine schedules (see optim.h). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rumor_optim_config_default(rumor_optim_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->kind = RUMOR_OPT_SGD;
    c->lr = 0.1f;
    c->momentum = 0.9f;
    c->nesterov = 1;
    c->weight_decay = 5e-4f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->min_lr_ratio = 0.0f;
}

int rumor_optim_parse_kind(const char *name, rumor_optim_kind *out)
{
    if (strcmp(name, "sgd") == 0)
        *out = RUMOR_OPT_SGD;
    else if (strcmp(name, "adamw") == 0)
        *out = RUMOR_OPT_ADAMW;
    else
        return rumor_err_set(RUMOR_EINVAL, "optimizer '%s': expected sgd or adamw", name);
    return 0;
}

/* Rejects configurations that would silently train garbage. */
static int check_config(const rumor_optim_config_t *c)
{
    if (!(c->lr > 0.0f && isfinite(c->lr)))
        return rumor_err_set(RUMOR_EINVAL, "learning rate %g must be positive", (double)c->lr);
    if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
        return rumor_err_set(RUMOR_EINVAL, "momentum %g must be in [0, 1)", (double)c->momentum);
    if (c->nesterov && c->kind == RUMOR_OPT_SGD && c->momentum == 0.0f)
        return rumor_err_set(RUMOR_EINVAL, "Nesterov momentum needs momentum > 0");
    if (!(c->weight_decay >= 0.0f && isfinite(c->weight_decay)))
        return rumor_err_set(RUMOR_EINVAL, "weight decay %g must be >= 0", (double)c->weight_decay);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return rumor_err_set(RUMOR_EINVAL, "AdamW betas (%g, %g) must be in [0, 1)",
                             (double)c->beta1, (double)c->beta2);
    if (!(c->eps > 0.0f))
        return rumor_err_set(RUMOR_EINVAL, "AdamW eps %g must be positive", (double)c->eps);
    if (c->warmup_steps < 0 || c->total_steps < 0)
        return rumor_err_set(RUMOR_EINVAL, "warm-up and total steps must be >= 0");
    if (!(c->min_lr_ratio >= 0.0f && c->min_lr_ratio <= 1.0f))
        return rumor_err_set(RUMOR_EINVAL, "minimum learning-rate ratio %g must be in [0, 1]",
                             (double)c->min_lr_ratio);
    return 0;
}

int rumor_optim_create(rumor_device_t *dev, const rumor_optim_config_t *cfg, size_t nparams,
                       rumor_optim_t **out)
{
    *out = NULL;
    RUMOR_CHECK(check_config(cfg));
    rumor_optim_t *o = calloc(1, sizeof *o);
    if (!o)
        return rumor_err_set(RUMOR_ENOMEM, "optimizer: out of memory");
    o->cfg = *cfg;
    o->dev = dev;
    o->n = nparams;
    o->m = dev->ops->alloc(dev, nparams * sizeof(float));
    if (cfg->kind == RUMOR_OPT_ADAMW)
        o->v = dev->ops->alloc(dev, nparams * sizeof(float));
    if (!o->m || (cfg->kind == RUMOR_OPT_ADAMW && !o->v)) {
        rumor_optim_destroy(&o);
        return rumor_err_set(RUMOR_ENOMEM, "optimizer: cannot allocate state for %zu parameters",
                             nparams);
    }
    *out = o;
    return 0;
}

void rumor_optim_destroy(rumor_optim_t **op)
{
    if (!op || !*op)
        return;
    rumor_optim_t *o = *op;
    o->dev->ops->free(o->dev, o->m);
    o->dev->ops->free(o->dev, o->v);
    free(o);
    *op = NULL;
}

float rumor_optim_lr_at(const rumor_optim_config_t *c, long t)
{
    double lr = c->lr;
    if (t < c->warmup_steps)
        return (float)(lr * (double)(t + 1) / (double)c->warmup_steps);
    if (c->total_steps <= c->warmup_steps)
        return (float)lr;
    double progress = (double)(t - c->warmup_steps) / (double)(c->total_steps - c->warmup_steps);
    if (progress > 1.0)
        progress = 1.0;
    double lo = lr * c->min_lr_ratio;
    return (float)(lo + 0.5 * (lr - lo) * (1.0 + cos(M_PI * progress)));
}

int rumor_optim_step_range(rumor_optim_t *o, float *params, const float *grads, size_t lo,
                           size_t hi, long t, float lr)
{
    if (lo > hi || hi > o->n)
        return rumor_err_set(RUMOR_EINVAL, "optimizer: range [%zu, %zu) outside [0, %zu)", lo, hi,
                             o->n);
    const rumor_optim_config_t *c = &o->cfg;
    size_t n = hi - lo;
    if (c->kind == RUMOR_OPT_SGD) {
        o->dev->ops->sgd_step(o->dev, params + lo, o->m + lo, grads + lo, n, lr, c->momentum,
                              c->weight_decay, c->nesterov);
    } else {
        float bc1 = (float)(1.0 - pow(c->beta1, (double)(t + 1)));
        float bc2 = (float)(1.0 - pow(c->beta2, (double)(t + 1)));
        o->dev->ops->adamw_step(o->dev, params + lo, o->m + lo, o->v + lo, grads + lo, n, lr,
                                c->beta1, c->beta2, c->eps, c->weight_decay, bc1, bc2);
    }
    return 0;
}

int rumor_optim_step(rumor_optim_t *o, float *params, const float *grads)
{
    float lr = rumor_optim_lr_at(&o->cfg, o->t);
    RUMOR_CHECK(rumor_optim_step_range(o, params, grads, 0, o->n, o->t, lr));
    o->t++;
    return 0;
}

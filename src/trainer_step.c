/* The trainer's steps: batches by step number, gradients (data-parallel
 * workers or a pipeline), the optimizer update, stepping onto parameters a
 * gossip round hands over, and the bound parameter buffer (see trainer.h). */
#include "trainer.h"
#include "trainer_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

int rumor_trainer_batch(rumor_trainer_t *t, long step, rumor_batch_t *b)
{
    int n = rumor_source_next(t->src, step, b);
    RUMOR_CHECK(n);
    return 0;
}

/* After a pipeline step: zero-bubble lists re-planned for this machine's
 * costs (the first step warms up; the second is measured), and the
 * bubble's running mean. */
static void pipeline_stepped(rumor_trainer_t *t)
{
    if (t->pipe->steps == 2 && (t->pipe->sched->kind == RUMOR_SCHED_ZBH1 ||
                                t->pipe->sched->kind == RUMOR_SCHED_ZBV)) {
        double was, now;
        int rc = rumor_pipeline_replan(t->pipe, NULL, &was, &now);
        if (rc < 0)
            rumor_warn("re-planning the %s lists: %s; keeping them", t->pipe->sched->name,
                       rumor_err_msg());
        else
            rumor_info("%s lists %s for the measured F, B and W times: simulated bubble "
                       "%.1f%% -> %.1f%%", t->pipe->sched->name,
                       rc ? "rebuilt" : "kept", 100.0 * was, 100.0 * now);
    }
    double bub = rumor_pipeline_bubble(t->pipe);
    t->bubble = t->bubble > 0 ? 0.9 * t->bubble + 0.1 * bub : bub;
}

static int check_loss(const rumor_trainer_t *t, long step, float loss)
{
    if (!isfinite(loss))
        return rumor_err_set(RUMOR_EINVAL, "training diverged: loss is %g at step %ld: lower --lr (now %g)",
                             (double)loss, step, (double)rumor_trainer_lr(t));
    return 0;
}

int rumor_trainer_grads(rumor_trainer_t *t, const rumor_batch_t *b, long step, float *loss)
{
    if (t->pipe) {
        RUMOR_CHECK(rumor_pipeline_grads(t->pipe, b, step, loss));
        pipeline_stepped(t);
        t->grads_on_stages = !t->grads_bound; /* copied only when asked for */
    } else {
        RUMOR_CHECK(rumor_step_grads(t->step, b, step, loss));
    }
    return check_loss(t, step, *loss);
}

/* rumor_trainer_grads_step's hand-over: each stage's buffer is recorded (all
 * must be one) */
struct next_wrap {
    rumor_pipeline_next_fn fn;
    void *ctx;
    float **base; /* (S) */
};

static int next_wrapped(void *ctx, int s, size_t lo, size_t hi, double wait, float **params)
{
    struct next_wrap *nw = ctx;
    int rc = nw->fn(nw->ctx, s, lo, hi, wait, params);
    if (rc > 0)
        nw->base[s] = *params;
    return rc;
}

int rumor_trainer_grads_step(rumor_trainer_t *t, const rumor_batch_t *b, long step, float *loss,
                             rumor_pipeline_next_fn next, void *ctx)
{
    float *base = NULL;
    double t0 = rumor_now();
    if (!t->pipe) {
        RUMOR_CHECK(rumor_step_grads(t->step, b, step, loss));
        RUMOR_CHECK(check_loss(t, step, *loss));
        double t1 = rumor_now();
        size_t n = t->model->nparams;
        size_t cell = t->stepped && t->step_cell > 0 ? t->step_cell : n;
        for (size_t lo = 0; lo < n; lo += cell) {
            size_t hi = n - lo > cell ? lo + cell : n;
            float *mixed = NULL;
            int rc;
            while ((rc = next(ctx, 0, lo, hi, 1.0, &mixed)) == 0)
                ;
            RUMOR_CHECK(rc);
            if (!base)
                RUMOR_CHECK(rumor_trainer_bind(t, base = mixed));
            else if (mixed != base)
                return rumor_err_set(RUMOR_ESTATE, "trainer: ranges of one step were handed "
                                                   "different buffers");
            RUMOR_CHECK(rumor_step_update_range(t->step, lo, hi, hi == n));
            if (hi < n && t->stepped)
                RUMOR_CHECK(t->stepped(ctx, base, hi));
        }
        t->wait_s = rumor_now() - t1;
        return 0;
    }
    int S = t->pipe->S;
    struct next_wrap nw = { next, ctx, calloc((size_t)S, sizeof(float *)) };
    if (!nw.base)
        return rumor_err_set(RUMOR_ENOMEM, "trainer: out of memory");
    int rc = rumor_pipeline_grads_step(t->pipe, b, step, loss, t->dev, next_wrapped, &nw);
    for (int s = 0; rc == 0 && s < S; s++) { /* (a stage without parameters gets none) */
        if (nw.base[s] && base && nw.base[s] != base)
            rc = rumor_err_set(RUMOR_ESTATE, "trainer: the stages were handed different "
                               "buffers");
        if (nw.base[s])
            base = nw.base[s];
    }
    if (rc == 0 && !base)
        rc = rumor_err_set(RUMOR_ESTATE, "trainer: no stage was handed parameters");
    free(nw.base);
    RUMOR_CHECK(rc);
    pipeline_stepped(t);
    t->wait_s = rumor_now() - t0 - t->pipe->step_s;
    t->grads_on_stages = 0; /* stepped on */
    /* the whole model (evaluation, checkpoints) reads the new buffer */
    rumor_step_bind_params(t->step, base);
    return check_loss(t, step, *loss);
}

float *rumor_trainer_flat_grads(rumor_trainer_t *t)
{
    if (t->grads_on_stages) {
        if (rumor_pipeline_gather_grads(t->pipe, t->stage->grads, t->dev) < 0)
            return NULL;
        t->grads_on_stages = 0;
    }
    return t->stage->grads;
}

int rumor_trainer_params_ready(rumor_trainer_t *t)
{
    return t->pipe && !t->params_bound ? rumor_pipeline_params_ready(t->pipe) : 1;
}

int rumor_trainer_sync_params(rumor_trainer_t *t)
{
    return t->pipe && !t->params_bound ? rumor_pipeline_params_sync(t->pipe) : 0;
}

int rumor_trainer_fills_cores(const rumor_trainer_t *t)
{
    if (!t->pipe)
        return 0;
    long threads = 0, cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (int d = 0; d < t->pipe->P; d++) {
        if (t->pipe->dev[d]->kind != RUMOR_DEV_CPU)
            return 0; /* a GPU stage's thread mostly waits for its device */
        threads += t->pipe->dev[d]->nthreads;
    }
    return threads >= cores;
}

rumor_device_t *rumor_trainer_host_mem(const rumor_trainer_t *t)
{
    if (!t->pipe || t->dev->kind != RUMOR_DEV_CPU)
        return NULL;
    for (int s = 0; s < t->pipe->S; s++)
        if (t->pipe->st[s]->dev->kind != RUMOR_DEV_CPU)
            return t->pipe->st[s]->dev;
    return NULL;
}

int rumor_trainer_grads_many(rumor_trainer_t *t, long first, int batches, float *loss,
                             long *examples)
{
    if (batches < 1)
        return rumor_err_set(RUMOR_EINVAL, "trainer: %d batches", batches);
    rumor_batch_t b;
    if (batches == 1) {
        RUMOR_CHECK(rumor_trainer_batch(t, first, &b));
        *examples = b.n;
        return rumor_trainer_grads(t, &b, first, loss);
    }
    size_t n = t->model->nparams;
    if (t->dev->kind != RUMOR_DEV_CPU)
        return rumor_err_set(RUMOR_ENOTSUP, "trainer: several batches a step need the "
                             "gradient in host memory (a CPU device)");
    if (!t->acc && !(t->acc = malloc(n * sizeof *t->acc)))
        return rumor_err_set(RUMOR_ENOMEM, "trainer: out of memory");
    /* each batch's gradient is a mean over its targets: weighted by them,
     * the sum over batches is the mean over all targets */
    double lsum = 0.0;
    long targets = 0;
    *examples = 0;
    for (int i = 0; i < batches; i++) {
        float l;
        RUMOR_CHECK(rumor_trainer_batch(t, first + i, &b));
        RUMOR_CHECK(rumor_trainer_grads(t, &b, first + i, &l));
        long w = rumor_batch_targets(&b);
        const float *g = rumor_trainer_flat_grads(t);
        if (!g)
            return rumor_err_trace_add(__FILE__, __LINE__, rumor_err_code());
        if (i == 0)
            for (size_t j = 0; j < n; j++)
                t->acc[j] = (float)w * g[j];
        else
            for (size_t j = 0; j < n; j++)
                t->acc[j] += (float)w * g[j];
        lsum += (double)l * (double)w;
        targets += w;
        *examples += b.n;
    }
    float inv = (float)(1.0 / (double)targets);
    for (size_t j = 0; j < n; j++)
        t->stage->grads[j] = t->acc[j] * inv; /* rumor_trainer_update reads it */
    *loss = (float)(lsum / (double)targets);
    return 0;
}

float rumor_trainer_lr(const rumor_trainer_t *t)
{
    return rumor_optim_lr_at(&t->oc, rumor_trainer_optim_steps(t));
}

void rumor_trainer_set_optim_steps(rumor_trainer_t *t, long step)
{
    if (step < 0)
        step = 0;
    if (t->pipe)
        rumor_pipeline_set_optim_steps(t->pipe, step);
    if (t->stage->opt)
        t->stage->opt->t = step;
}

long rumor_trainer_optim_steps(const rumor_trainer_t *t)
{
    return t->pipe ? rumor_pipeline_optim_steps(t->pipe) : t->stage->opt->t;
}

void rumor_trainer_set_step_ranges(rumor_trainer_t *t, size_t cell,
                                   rumor_trainer_stepped_fn stepped)
{
    t->step_cell = cell;
    t->stepped = stepped;
}

int rumor_trainer_update(rumor_trainer_t *t, float *lr)
{
    if (lr)
        *lr = rumor_trainer_lr(t);
    if (!t->pipe)
        return rumor_step_update(t->step);
    /* each stage steps its own range where it lives; the flat gradient is
     * what counts (an all-reduce may have replaced it) */
    if (!t->grads_bound && !t->grads_on_stages)
        RUMOR_CHECK(rumor_pipeline_scatter_grads(t->pipe, t->stage->grads, t->dev));
    t->grads_on_stages = 0;
    RUMOR_CHECK(rumor_pipeline_update(t->pipe));
    /* stages working on copies: the whole buffer is current again */
    if (!t->params_bound)
        RUMOR_CHECK(rumor_pipeline_write_params(t->pipe, t->stage->params, t->dev));
    return 0;
}

int rumor_trainer_epoch(const rumor_trainer_t *t, long step)
{
    return (int)(step / t->steps_per_epoch) + 1;
}

int rumor_trainer_bind(rumor_trainer_t *t, float *params)
{
    rumor_step_bind_params(t->step, params ? params : t->own);
    if (t->pipe) /* stages on another device load their range */
        RUMOR_CHECK(rumor_pipeline_bind_params(t->pipe, params ? params : t->own, t->dev));
    return 0;
}

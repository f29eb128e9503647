/* Data-parallel gradient of one step over worker threads (see step.h). */
#include "step.h"

#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"

struct rumor_step {
    rumor_model_t *model;       /* not owned */
    int n;
    rumor_pool_t *pool;
    rumor_device_t *wdev;       /* one-thread CPU device the replicas run on */
    rumor_model_t **replicas;   /* n, or NULL when n == 1 */

    /* the job being run */
    const float *x;
    const int32_t *y;
    int batch;
    float lr;
    long t;
    rumor_optim_t *opt;
    double loss_sum[64];        /* per worker: sum of its rows' losses */
    int rc[64];
};

#define MAX_WORKERS 64

int rumor_step_create(rumor_model_t *m, int workers, rumor_step_t **out)
{
    *out = NULL;
    if (workers < 1 || workers > MAX_WORKERS)
        return rumor_err_set(RUMOR_EINVAL, "step: %d workers out of range [1, %d]", workers,
                             MAX_WORKERS);
    if (m->dev->kind != RUMOR_DEV_CPU)
        workers = 1;
    if (workers > m->max_batch)
        workers = m->max_batch;
    rumor_step_t *s = calloc(1, sizeof *s);
    if (!s)
        return rumor_err_set(RUMOR_ENOMEM, "step: out of memory");
    s->model = m;
    s->n = workers;
    int rc = rumor_pool_create(workers, &s->pool);
    if (rc == 0 && workers > 1) {
        rc = rumor_device_open("cpu:1", &s->wdev);
        s->replicas = calloc((size_t)workers, sizeof *s->replicas);
        if (rc == 0 && !s->replicas)
            rc = rumor_err_set(RUMOR_ENOMEM, "step: out of memory");
        int rows = (m->max_batch + workers - 1) / workers;
        for (int w = 0; rc == 0 && w < workers; w++)
            rc = rumor_model_create_replica(m, s->wdev, rows, w + 1, &s->replicas[w]);
    }
    if (rc < 0) {
        rumor_step_destroy(&s);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    *out = s;
    return 0;
}

void rumor_step_destroy(rumor_step_t **sp)
{
    if (!sp || !*sp)
        return;
    rumor_step_t *s = *sp;
    if (s->replicas)
        for (int w = 0; w < s->n; w++)
            rumor_model_destroy(&s->replicas[w]);
    free(s->replicas);
    rumor_device_close(&s->wdev);
    rumor_pool_destroy(&s->pool);
    free(s);
    *sp = NULL;
}

int rumor_step_workers(const rumor_step_t *s) { return s->n; }

void rumor_step_bind_params(rumor_step_t *s, float *params)
{
    rumor_model_bind_params(s->model, params);
    if (s->replicas)
        for (int w = 0; w < s->n; w++)
            s->replicas[w]->params = params; /* replicas never own theirs */
}

/* Worker w: forward and backward on its rows of the batch. */
static void grads_job(void *arg, int w, int n)
{
    rumor_step_t *s = arg;
    rumor_model_t *r = s->replicas[w];
    size_t lo = (size_t)s->batch * (size_t)w / (size_t)n;
    size_t hi = (size_t)s->batch * (size_t)(w + 1) / (size_t)n;
    s->loss_sum[w] = 0;
    s->rc[w] = 0;
    if (hi == lo)
        return;
    float loss = 0.0f;
    int rc = rumor_model_forward(r, s->x + lo * (size_t)r->in_dim, s->y + lo, (int)(hi - lo), 1,
                                 &loss);
    if (rc == 0) {
        r->grad_overwrite = 1; /* each linear layer's gradient is written once */
        rc = rumor_model_backward_scaled(r, 1.0f / (float)s->batch);
    }
    s->loss_sum[w] = (double)loss * (double)(hi - lo);
    s->rc[w] = rc;
}

/* Worker w: sums every replica's gradient over its range of the buffer. */
static void reduce_job(void *arg, int w, int n)
{
    rumor_step_t *s = arg;
    size_t lo, hi;
    rumor_pool_split(s->model->nparams, w, n, &lo, &hi);
    float *g = s->model->grads;
    if (hi <= lo)
        return;
    /* one pass for the first two replicas, then one a replica more */
    const float *g0 = s->replicas[0]->grads, *g1 = s->replicas[1]->grads;
    for (size_t i = lo; i < hi; i++)
        g[i] = g0[i] + g1[i];
    for (int v = 2; v < n; v++) {
        const float *gv = s->replicas[v]->grads;
        for (size_t i = lo; i < hi; i++)
            g[i] += gv[i];
    }
}

int rumor_step_grads(rumor_step_t *s, const float *x, const int32_t *y, int batch, float *loss)
{
    rumor_model_t *m = s->model;
    if (s->n == 1) {
        RUMOR_CHECK(rumor_model_forward(m, x, y, batch, 1, loss));
        int saved = m->grad_overwrite;
        m->grad_overwrite = 1;
        int rc = rumor_model_backward(m);
        m->grad_overwrite = saved;
        return rc;
    }
    if (batch < 1 || batch > m->max_batch)
        return rumor_err_set(RUMOR_EINVAL, "step: batch %d out of range [1, %d]", batch,
                             m->max_batch);
    rumor_blas_set_threads(1); /* workers must not spawn BLAS threads */
    s->x = x;
    s->y = y;
    s->batch = batch;
    rumor_pool_run(s->pool, grads_job, s);
    double sum = 0;
    for (int w = 0; w < s->n; w++) {
        if (s->rc[w] < 0)
            return rumor_err_trace_add(__FILE__, __LINE__, s->rc[w]);
        sum += s->loss_sum[w];
    }
    *loss = (float)(sum / batch);
    m->batch = batch;
    rumor_pool_run(s->pool, reduce_job, s);
    return 0;
}

static void update_job(void *arg, int w, int n)
{
    rumor_step_t *s = arg;
    size_t lo, hi;
    rumor_pool_split(s->model->nparams, w, n, &lo, &hi);
    s->rc[w] = hi > lo ? rumor_optim_step_range(s->opt, s->model->params, s->model->grads, lo, hi,
                                                s->t, s->lr)
                       : 0;
}

int rumor_step_update(rumor_step_t *s, rumor_optim_t *o)
{
    if (s->n == 1)
        return rumor_optim_step(o, s->model->params, s->model->grads);
    s->opt = o;
    s->t = o->t;
    s->lr = rumor_optim_lr_at(&o->cfg, o->t);
    rumor_pool_run(s->pool, update_job, s);
    for (int w = 0; w < s->n; w++)
        if (s->rc[w] < 0)
            return rumor_err_trace_add(__FILE__, __LINE__, s->rc[w]);
    o->t++;
    return 0;
}

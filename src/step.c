/* Data-parallel gradient of one step over worker threads (see step.h). */
#include "step.h"

#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"

#define MAX_WORKERS 64

struct rumor_step {
    rumor_stage_t *stage;       /* not owned */
    int n;
    rumor_pool_t *pool;
    rumor_device_t *wdev;       /* one-thread CPU device the replicas run on */
    rumor_stage_t **replicas;   /* n, or NULL when n == 1 */

    /* the job being run */
    const rumor_batch_t *b;
    long step;
    int eval, want_correct;
    float scale;
    float lr;
    long t;
    size_t ulo, uhi;            /* the range an update steps */
    int dirty;                  /* replicas' gradients not zeroed (a step failed) */
    double loss_sum[MAX_WORKERS];
    long correct[MAX_WORKERS];
    int rc[MAX_WORKERS];
};

int rumor_step_create(rumor_stage_t *st, int workers, rumor_step_t **out)
{
    *out = NULL;
    if (workers < 1 || workers > MAX_WORKERS)
        return rumor_err_set(RUMOR_EINVAL, "step: %d workers out of range [1, %d]", workers,
                             MAX_WORKERS);
    if (!st->is_first || !st->is_last)
        return rumor_err_set(RUMOR_EINVAL, "step: the stage must hold the whole model");
    if (st->dev->kind != RUMOR_DEV_CPU)
        workers = 1;
    if (workers > st->max_B)
        workers = st->max_B;
    rumor_step_t *s = calloc(1, sizeof *s);
    if (!s)
        return rumor_err_set(RUMOR_ENOMEM, "step: out of memory");
    s->stage = st;
    s->n = workers;
    int rc = rumor_pool_create(workers, &s->pool);
    if (rc == 0 && workers > 1) {
        rc = rumor_device_open("cpu:1", &s->wdev);
        s->replicas = calloc((size_t)workers, sizeof *s->replicas);
        if (rc == 0 && !s->replicas)
            rc = rumor_err_set(RUMOR_ENOMEM, "step: out of memory");
        int rows = (st->max_B + workers - 1) / workers;
        for (int w = 0; rc == 0 && w < workers; w++)
            rc = rumor_stage_create_replica(st, s->wdev, rows, &s->replicas[w]);
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
            rumor_stage_destroy(&s->replicas[w]);
    free(s->replicas);
    rumor_device_close(&s->wdev);
    rumor_pool_destroy(&s->pool);
    free(s);
    *sp = NULL;
}

int rumor_step_workers(const rumor_step_t *s) { return s->n; }

void rumor_step_bind_params(rumor_step_t *s, float *params)
{
    rumor_stage_bind_params(s->stage, params);
    if (s->replicas)
        for (int w = 0; w < s->n; w++)
            s->replicas[w]->params = params; /* replicas never own theirs */
}

/* Forward (and for training backward) of rows [lo, hi) of the batch on st. */
static int run_rows(rumor_step_t *s, rumor_stage_t *st, int lo, int hi, int micro, double *loss,
                    long *correct, int zero)
{
    *loss = 0.0;
    *correct = 0;
    if (hi <= lo)
        return 0;
    RUMOR_CHECK(rumor_stage_load(st, 0, s->b, lo, hi - lo));
    RUMOR_CHECK(rumor_stage_forward(st, 0, NULL, !s->eval, s->step, micro));
    RUMOR_CHECK(rumor_stage_loss(st, 0, loss, s->want_correct ? correct : NULL));
    if (s->eval)
        return 0;
    if (zero)
        RUMOR_CHECK(rumor_stage_zero_grad(st));
    RUMOR_CHECK(rumor_stage_backward_b(st, 0, NULL, s->scale));
    RUMOR_CHECK(rumor_stage_backward_w(st, 0));
    return 0;
}

static void rows_job(void *arg, int w, int n)
{
    rumor_step_t *s = arg;
    int lo = (int)((long)s->b->n * w / n), hi = (int)((long)s->b->n * (w + 1) / n);
    /* replicas' gradients are zeroed by the reduce that read them (while
     * they are in cache), or here after a failed step */
    s->rc[w] = run_rows(s, s->replicas[w], lo, hi, w, &s->loss_sum[w], &s->correct[w], s->dirty);
}

/* Worker w: sums every replica's gradient over its range of the buffer. */
static void reduce_job(void *arg, int w, int n)
{
    rumor_step_t *s = arg;
    size_t lo, hi;
    rumor_pool_split(s->stage->n, w, n, &lo, &hi);
    if (hi <= lo)
        return;
    rumor_device_t *d = s->wdev;
    float *g = s->stage->grads + lo;
    int used = 0;
    for (int v = 0; v < n; v++) {
        int vlo = (int)((long)s->b->n * v / n), vhi = (int)((long)s->b->n * (v + 1) / n);
        if (vhi <= vlo)
            continue; /* a worker without rows wrote no gradient */
        float *gv = s->replicas[v]->grads + lo;
        if (used++ == 0)
            d->ops->copy(d, g, gv, (hi - lo) * sizeof(float));
        else
            d->ops->add(d, g, g, gv, hi - lo);
        d->ops->fill(d, gv, 0.0f, hi - lo); /* ready for the next step */
    }
    if (!used)
        d->ops->fill(d, g, 0.0f, hi - lo);
}

static int run(rumor_step_t *s, const rumor_batch_t *b, long step, int eval, int want_correct,
               double *loss_sum, long *correct)
{
    rumor_stage_t *st = s->stage;
    if (b->n < 1 || b->n > st->max_B)
        return rumor_err_set(RUMOR_EINVAL, "step: batch %d out of range [1, %d]", b->n, st->max_B);
    s->b = b;
    s->step = step;
    s->eval = eval;
    s->want_correct = want_correct;
    s->scale = (float)(1.0 / (double)rumor_batch_targets(b));
    *loss_sum = 0.0;
    *correct = 0;
    if (s->n == 1) {
        if (st->dev->kind == RUMOR_DEV_CPU) /* one model: the device's threads in BLAS */
            rumor_blas_set_threads(st->dev->nthreads);
        RUMOR_CHECK(run_rows(s, st, 0, b->n, 0, loss_sum, correct, 1));
        return 0;
    }
    rumor_blas_set_threads(1); /* workers must not spawn BLAS threads */
    rumor_pool_run(s->pool, rows_job, s);
    s->dirty = 0;
    for (int w = 0; w < s->n; w++) {
        if (s->rc[w] < 0) {
            s->dirty = 1;
            return rumor_err_trace_add(__FILE__, __LINE__, s->rc[w]);
        }
        *loss_sum += s->loss_sum[w];
        *correct += s->correct[w];
    }
    if (!eval)
        rumor_pool_run(s->pool, reduce_job, s);
    return 0;
}

int rumor_step_grads(rumor_step_t *s, const rumor_batch_t *b, long step, float *loss)
{
    double sum;
    long correct;
    RUMOR_CHECK(run(s, b, step, 0, 0, &sum, &correct));
    *loss = (float)(sum / (double)rumor_batch_targets(b));
    return 0;
}

int rumor_step_eval(rumor_step_t *s, const rumor_batch_t *b, double *loss_sum, long *targets,
                    long *correct)
{
    double sum;
    long ok;
    RUMOR_CHECK(run(s, b, 0, 1, correct != NULL, &sum, &ok));
    *loss_sum += sum;
    *targets += rumor_batch_targets(b);
    if (correct)
        *correct += ok;
    return 0;
}

static void update_job(void *arg, int w, int n)
{
    rumor_step_t *s = arg;
    size_t lo, hi;
    rumor_pool_split(s->uhi - s->ulo, w, n, &lo, &hi);
    lo += s->ulo;
    hi += s->ulo;
    s->rc[w] = hi > lo ? rumor_optim_step_range(s->stage->opt, s->stage->params,
                                                s->stage->grads, lo, hi, s->t, s->lr)
                       : 0;
}

int rumor_step_update_range(rumor_step_t *s, size_t lo, size_t hi, int last)
{
    rumor_optim_t *o = s->stage->opt;
    if (!o)
        return rumor_err_set(RUMOR_ESTATE, "step: the stage has no optimizer");
    if (lo > hi || hi > s->stage->n)
        return rumor_err_set(RUMOR_EINVAL, "step: range [%zu, %zu) of %zu parameters", lo, hi,
                             s->stage->n);
    s->t = o->t;
    s->lr = rumor_optim_lr_at(&o->cfg, o->t);
    s->ulo = lo;
    s->uhi = hi;
    /* a pool's hand-off costs more than a small range's update */
    if (s->n == 1 || hi - lo < ((size_t)1 << 16)) {
        if (hi > lo)
            RUMOR_CHECK(rumor_optim_step_range(o, s->stage->params, s->stage->grads, lo, hi,
                                               s->t, s->lr));
    } else {
        rumor_pool_run(s->pool, update_job, s);
        for (int w = 0; w < s->n; w++)
            if (s->rc[w] < 0)
                return rumor_err_trace_add(__FILE__, __LINE__, s->rc[w]);
    }
    if (last)
        o->t++;
    return 0;
}

int rumor_step_update(rumor_step_t *s)
{
    return rumor_step_update_range(s, 0, s->stage->n, 1);
}

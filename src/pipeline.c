/* Pipelines: creating one (cuts, schedule, stages, links, a worker thread
 * a device that lives as long as the pipeline) and running a step: the
 * workers woken and waited for here (pipeline_worker.c runs them). See
 * pipeline.h and pipeline_int.h. */
#include "pipeline.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "pipeline_int.h"

void rumor_pipeline_micro_rows(int n, int M, int m, int *row0, int *rows)
{
    int base = n / M, extra = n % M;
    *rows = base + (m < extra);
    *row0 = m * base + (m < extra ? m : extra);
}

rumor_stage_t *pipe_tied_owner(const rumor_pipeline_t *p, const rumor_stage_t *st)
{
    if (!st->tied)
        return NULL;
    for (int s = 0; s < p->S; s++)
        if (p->st[s]->lo <= st->tied_lo && st->tied_lo + st->tied_n <= p->st[s]->hi)
            return p->st[s];
    return NULL;
}

/* A worker thread: one step of its device each time the generation moves,
 * until the pipeline goes. */
static void *worker_main(void *arg)
{
    struct pipeline_worker *w = arg;
    struct pipeline_run *r = w->p->run;
    long seen = 0;
    for (;;) {
        pthread_mutex_lock(&r->wmu);
        while (r->gen == seen && !r->quit)
            pthread_cond_wait(&r->go, &r->wmu);
        int quit = r->quit;
        seen = r->gen;
        pthread_mutex_unlock(&r->wmu);
        if (quit)
            return NULL;
        pipe_work(w);
        pthread_mutex_lock(&r->wmu);
        r->ndone++;
        pthread_cond_signal(&r->fin);
        pthread_mutex_unlock(&r->wmu);
    }
}

static void workers_stop(rumor_pipeline_t *p)
{
    struct pipeline_run *r = p->run;
    pthread_mutex_lock(&r->wmu);
    r->quit = 1;
    pthread_cond_broadcast(&r->go);
    pthread_mutex_unlock(&r->wmu);
    for (int d = 0; d < r->nthreads; d++)
        pthread_join(r->th[d], NULL);
    r->nthreads = 0;
}

static int workers_start(rumor_pipeline_t *p)
{
    struct pipeline_run *r = p->run;
    if (!(r->w = calloc((size_t)p->P, sizeof *r->w)))
        return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
    for (int d = 0; d < p->P; d++) {
        r->w[d].p = p;
        r->w[d].d = d;
        if (pthread_create(&r->th[d], NULL, worker_main, &r->w[d]) != 0)
            return rumor_err_set(RUMOR_ESYS, "pipeline: cannot start the worker of device %d",
                                 d);
        r->nthreads++;
    }
    return 0;
}

void rumor_pipeline_destroy(rumor_pipeline_t **pp)
{
    if (!pp || !*pp)
        return;
    rumor_pipeline_t *p = *pp;
    if (p->run && p->run->w) {
        workers_stop(p);
        free(p->run->w);
    }
    pipe_events_free(p);
    if (p->pio) { /* copies still landing in the caller's buffer finish first */
        RUMOR_IGNORE(rumor_pipeline_params_sync(p));
        pipe_pio_free(p);
    }
    for (int s = 0; p->link && s + 1 < p->S; s++)
        rumor_link_destroy(&p->link[s]);
    free(p->link);
    for (int s = 0; p->tied_tmp && s < p->S; s++)
        if (p->tied_tmp[s]) {
            rumor_stage_t *o = pipe_tied_owner(p, p->st[s]);
            o->dev->ops->free(o->dev, p->tied_tmp[s]);
        }
    free(p->tied_tmp);
    for (int s = 0; p->st && s < p->S; s++)
        rumor_stage_destroy(&p->st[s]);
    free(p->st);
    free(p->cut);
    free(p->dev);
    free(p->busy_s);
    free(p->fin);
    free(p->tied_of);
    for (int d = 0; p->ev && d < p->P; d++)
        free(p->ev[d]);
    free(p->ev);
    if (p->run) {
        pthread_mutex_destroy(&p->run->mu);
        pthread_cond_destroy(&p->run->cv);
        pthread_mutex_destroy(&p->run->wmu);
        pthread_cond_destroy(&p->run->go);
        pthread_cond_destroy(&p->run->fin);
        free(p->run->done_f);
        free(p->run->done_b);
        free(p->run->slot_of);
        for (int s = 0; p->run->pool && s < p->S; s++)
            free(p->run->pool[s]);
        free(p->run->pool);
        free(p->run->npool);
        free(p->run->loss);
        for (int d = 0; p->run->early && d < p->P; d++)
            free(p->run->early[d]);
        free(p->run->early);
        free(p->run->left);
        free(p->run->acted);
        free(p->run->finished);
        free(p->run);
    }
    rumor_schedule_destroy(&p->sched);
    free(p);
    *pp = NULL;
}

/* A GPU device object serves one pipeline rank (its stream and cuBLAS
 * handle are one thread's); links between consecutive stages; where a stage
 * shares a tensor with a stage on another device, room on the owner's
 * device for its part of the gradient. */
static int make_links(rumor_pipeline_t *p)
{
    for (int d = 0; d < p->P; d++)
        for (int e = 0; e < d; e++)
            if (p->dev[d] == p->dev[e] && p->dev[d]->kind != RUMOR_DEV_CPU)
                return rumor_err_set(RUMOR_EINVAL, "pipeline: ranks %d and %d share the device "
                                     "object of %s; open the GPU once per rank", e, d,
                                     p->dev[d]->name);
    p->link = calloc((size_t)p->S, sizeof *p->link);
    p->tied_tmp = calloc((size_t)p->S, sizeof *p->tied_tmp);
    if (!p->link || !p->tied_tmp)
        return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
    for (int s = 0; s + 1 < p->S; s++)
        if (p->st[s]->dev != p->st[s + 1]->dev)
            RUMOR_CHECK(rumor_link_create(p->st[s]->dev, p->st[s + 1]->dev, 1, &p->link[s]));
    for (int s = 0; s < p->S; s++) {
        rumor_stage_t *o = pipe_tied_owner(p, p->st[s]);
        if (o && o->dev != p->st[s]->dev &&
            !(p->tied_tmp[s] = o->dev->ops->alloc(o->dev, p->st[s]->tied_n * sizeof(float))))
            return rumor_err_trace_add(__FILE__, __LINE__, RUMOR_ENOMEM);
    }
    return 0;
}

static int make_cuts(rumor_pipeline_t *p)
{
    int nb = p->cfg.model->nblocks;
    for (int s = 0; s <= p->S; s++) {
        p->cut[s] = p->cfg.cuts ? p->cfg.cuts[s] : (int)((long)s * nb / p->S);
        if (s > 0 && p->cut[s] <= p->cut[s - 1])
            return rumor_err_set(RUMOR_EINVAL, "pipeline: stage %d would hold blocks [%d, %d): "
                                 "every stage needs at least one block", s - 1, p->cut[s - 1],
                                 p->cut[s]);
    }
    if (p->cut[0] != 0 || p->cut[p->S] != nb)
        return rumor_err_set(RUMOR_EINVAL, "pipeline: the cuts cover blocks [%d, %d) of the "
                             "model's [0, %d)", p->cut[0], p->cut[p->S], nb);
    return 0;
}

int rumor_pipeline_create(const rumor_pipeline_config_t *cfg, rumor_pipeline_t **out)
{
    *out = NULL;
    if (!cfg || !cfg->model || !cfg->devs || cfg->ndevs < 1 || cfg->max_B < 1 || cfg->T < 1)
        return rumor_err_set(RUMOR_EINVAL, "pipeline: no model, no devices or an empty batch");
    rumor_pipeline_t *p = calloc(1, sizeof *p);
    if (!p)
        return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
    p->cfg = *cfg;
    int rc = rumor_schedule_build(cfg->schedule, cfg->ndevs, cfg->microbatches,
                                  cfg->model->nblocks, &p->sched);
    if (rc == 0) {
        p->P = p->sched->P;
        p->V = p->sched->V;
        p->S = p->sched->S;
        p->M = p->sched->M;
        if (p->M > cfg->max_B)
            rc = rumor_err_set(RUMOR_EINVAL, "pipeline: %d micro-batches of a batch of %d rows",
                               p->M, cfg->max_B);
    }
    if (rc == 0) {
        p->cut = calloc((size_t)p->S + 1, sizeof *p->cut);
        p->dev = calloc((size_t)p->P, sizeof *p->dev);
        p->st = calloc((size_t)p->S, sizeof *p->st);
        p->busy_s = calloc((size_t)p->P, sizeof *p->busy_s);
        p->run = calloc(1, sizeof *p->run);
        p->ev = calloc((size_t)p->P, sizeof *p->ev);
        int ok = p->cut && p->dev && p->st && p->busy_s && p->run && p->ev;
        for (int d = 0; ok && d < p->P; d++)
            p->dev[d] = cfg->devs[d];
        for (int d = 0; ok && d < p->P; d++)
            ok = (p->ev[d] = calloc(2 * (size_t)p->sched->n[d] + 1, sizeof **p->ev)) != NULL;
        if (!ok)
            rc = rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
    }
    if (rc == 0) {
        pthread_mutex_init(&p->run->mu, NULL);
        /* nap()'s timed waits count on the monotonic clock: a step of the
         * wall clock moves no deadline */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->run->cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&p->run->wmu, NULL);
        pthread_cond_init(&p->run->go, NULL);
        pthread_cond_init(&p->run->fin, NULL);
        size_t cells = (size_t)p->S * p->M;
        struct pipeline_run *r = p->run;
        r->done_f = calloc(cells, 1);
        r->done_b = calloc(cells, 1);
        r->slot_of = calloc(cells, sizeof *r->slot_of);
        r->pool = calloc((size_t)p->S, sizeof *r->pool);
        r->npool = calloc((size_t)p->S, sizeof *r->npool);
        r->loss = calloc((size_t)p->M, sizeof *r->loss);
        r->early = calloc((size_t)p->P, sizeof *r->early);
        r->left = calloc((size_t)p->S, sizeof *r->left);
        r->acted = calloc((size_t)p->S, 1);
        r->finished = calloc((size_t)p->S, 1);
        p->fin = calloc((size_t)p->S, sizeof *p->fin);
        p->tied_of = calloc((size_t)p->S, sizeof *p->tied_of);
        int ok = r->done_f && r->done_b && r->slot_of && r->pool && r->npool && r->loss &&
                 r->early && r->left && r->acted && r->finished && p->fin && p->tied_of;
        for (int d = 0; ok && d < p->P; d++)
            ok = (r->early[d] = calloc((size_t)p->sched->n[d] + 1, 1)) != NULL;
        for (int s = 0; ok && s < p->S; s++)
            ok = (r->pool[s] = calloc((size_t)p->sched->peak_stage[s], sizeof **r->pool)) != NULL;
        if (!ok)
            rc = rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
    }
    if (rc == 0)
        rc = make_cuts(p);
    int micro_rows = (cfg->max_B + p->M - 1) / (p->M ? p->M : 1);
    for (int s = 0; rc == 0 && s < p->S; s++) {
        int d = rumor_schedule_device(p->sched, s, NULL);
        rumor_stage_config_t sc = { .model = cfg->model, .dev = cfg->devs[d],
                                    .first = p->cut[s], .last = p->cut[s + 1],
                                    .max_B = micro_rows, .T = cfg->T,
                                    .slots = p->sched->peak_stage[s],
                                    .seed = cfg->seed, .stream = cfg->stream,
                                    .optim = cfg->optim };
        rc = rumor_stage_create(&sc, &p->st[s]);
        if (rc < 0)
            rc = rumor_err_prefix(rc, "pipeline stage %d (blocks %d-%d)", s, p->cut[s],
                                  p->cut[s + 1] - 1);
    }
    for (int s = 0; rc == 0 && s < p->S; s++) {
        p->tied_of[s] = -1;
        rumor_stage_t *o = pipe_tied_owner(p, p->st[s]);
        for (int q = 0; o && q < p->S; q++)
            if (p->st[q] == o)
                p->tied_of[s] = q;
        if (p->st[s]->tied && !o)
            rc = rumor_err_set(RUMOR_ESTATE, "pipeline stage %d: no stage holds the tensor it "
                               "shares at offset %zu", s, p->st[s]->tied_lo);
    }
    if (rc == 0)
        rc = make_links(p);
    if (rc == 0)
        rc = pipe_events_make(p);
    if (rc == 0)
        rc = workers_start(p);
    if (rc < 0) {
        rumor_pipeline_destroy(&p);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    p->cfg.devs = p->dev;
    p->cfg.cuts = NULL;
    p->cfg.schedule = NULL;
    p->cfg.optim = NULL;
    *out = p;
    return 0;
}

int rumor_pipeline_grads(rumor_pipeline_t *p, const rumor_batch_t *b, long step, float *loss)
{
    return rumor_pipeline_grads_step(p, b, step, loss, NULL, NULL, NULL);
}

int rumor_pipeline_grads_step(rumor_pipeline_t *p, const rumor_batch_t *b, long step,
                              float *loss, rumor_device_t *host, rumor_pipeline_next_fn next,
                              void *ctx)
{
    if (!b || b->n < p->M || b->n > p->cfg.max_B)
        return rumor_err_set(RUMOR_EINVAL, "pipeline: a batch of %d rows for %d micro-batches "
                             "of at most %d rows in all", b ? b->n : 0, p->M, p->cfg.max_B);
    if (next && (!host || host->kind != RUMOR_DEV_CPU))
        return rumor_err_set(RUMOR_EINVAL, "pipeline: stepping on ranges of host memory "
                             "needs a CPU device");
    struct pipeline_run *r = p->run;
    size_t cells = (size_t)p->S * p->M;
    memset(r->done_f, 0, cells);
    memset(r->done_b, 0, cells);
    for (int d = 0; d < p->P; d++)
        memset(r->early[d], 0, (size_t)p->sched->n[d]);
    for (int s = 0; s < p->S; s++) {
        r->npool[s] = p->st[s]->nslots;
        for (int i = 0; i < r->npool[s]; i++)
            r->pool[s][i] = r->npool[s] - 1 - i; /* slot 0 first */
        r->left[s] = 0;
        r->acted[s] = r->finished[s] = 0;
        p->fin[s][0] = p->fin[s][1] = p->fin[s][2] = 0;
    }
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->sched->n[d]; i++)
            r->left[rumor_schedule_stage(p->sched, d, p->sched->acts[d][i].chunk)]++;
    p->idle_works = 0;
    r->b = b;
    r->step = step;
    r->failed = 0;
    r->err[0] = '\0';
    r->next = next;
    r->next_ctx = ctx;
    r->host = host;
    long targets = rumor_batch_targets(b);
    r->loss_scale = 1.0f / (float)targets;
    RUMOR_CHECK(pipe_events_make(p)); /* stages that grew slots (re-planned) */
    r->timed = p->timed || (p->steps < 2 && (p->sched->kind == RUMOR_SCHED_ZBH1 ||
                                             p->sched->kind == RUMOR_SCHED_ZBV));
    for (int s = 0; s < p->S; s++) {
        RUMOR_CHECK(rumor_stage_zero_grad(p->st[s]));
        /* a stage that shares a tensor it does not hold (a GPT head's token
         * embedding) works on a fresh copy of its owner's */
        const rumor_stage_t *o = pipe_tied_owner(p, p->st[s]);
        if (o)
            RUMOR_CHECK(rumor_stage_sync_tied(p->st[s], o->params + (p->st[s]->tied_lo - o->lo),
                                              o->dev));
    }
    /* the workers (made with the pipeline) run the step */
    struct pipeline_worker *w = r->w;
    double t0 = rumor_now();
    p->t0 = t0;
    for (int d = 0; d < p->P; d++) {
        /* the step's fields alone: p and d, set once, the worker reads
         * while it waits for the step */
        w[d].idle = w[d].end = w[d].list_end = 0.0;
        w[d].todo = 0;
        for (int s = 0; s < p->S; s++)
            w[d].todo += rumor_schedule_device(p->sched, s, NULL) == d;
    }
    pthread_mutex_lock(&r->wmu);
    r->ndone = 0;
    r->gen++;
    pthread_cond_broadcast(&r->go);
    while (r->ndone < p->P)
        pthread_cond_wait(&r->fin, &r->wmu);
    pthread_mutex_unlock(&r->wmu);
    int started = p->P;
    /* the schedule's span: until the last list ended (steps after it wait
     * for gossip, not for the pipeline) */
    double end = t0;
    for (int d = 0; d < started; d++)
        if (w[d].list_end > end)
            end = w[d].list_end;
    p->step_s = end - t0;
    p->steps++;
    p->early_w = 0;
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->sched->n[d]; i++)
            p->early_w += r->early[d][i];
    if (r->failed)
        return rumor_err_set(RUMOR_ESTATE, "pipeline step %ld: %s", step, r->err);
    /* the host waits for the GPU here alone: the losses, once */
    RUMOR_CHECK(pipe_loss_read(p));
    double sum = 0.0;
    for (int m = 0; m < p->M; m++)
        sum += r->loss[m];
    *loss = (float)(sum / (double)targets);
    return 0;
}

int rumor_pipeline_update(rumor_pipeline_t *p)
{
    for (int s = 0; s < p->S; s++)
        RUMOR_CHECK(rumor_stage_step(p->st[s]));
    return 0;
}

/* Pipelines: stages across devices, run by a schedule (see pipeline.h). */
#include "pipeline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* One step under way: what has been done, and the first error. */
struct pipeline_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *done_f, *done_b;     /* (S x M) */
    int *slot_of;                 /* (S x M) the slot holding (stage, micro-batch) */
    int **pool, *npool;           /* (S) each stage's free slots; only its device's
                                   * worker takes and returns them */
    double *loss;                 /* (M) each micro-batch's summed loss */
    uint8_t **early;              /* (P)(n[d]) a W run before its place in the list */
    const rumor_batch_t *b;
    long step;
    float loss_scale;
    int failed;
    char err[512];
    /* each stage's finish: its gradient complete (its own actions, and the
     * tied copies' parts added), then its optimizer step on the range
     * next() hands it */
    int *left;                    /* (S) actions of stage s not done yet (its worker's) */
    uint8_t *acted;               /* (S) all of them done (under mu) */
    uint8_t *finished;            /* (S) gradient complete; 2: stepped too (its worker's) */
    rumor_pipeline_next_fn next;  /* NULL: no step */
    void *next_ctx;
    rumor_device_t *host;         /* the memory next() hands ranges of */
};

struct worker {
    rumor_pipeline_t *p;
    int d;
    double idle; /* seconds spent waiting for inputs */
    double end;  /* when the last action's result was ready (0: not yet) */
    int todo;    /* stages of this device not stepped yet */
    double list_end; /* when its action list ended */
};

void rumor_pipeline_micro_rows(int n, int M, int m, int *row0, int *rows)
{
    int base = n / M, extra = n % M;
    *rows = base + (m < extra);
    *row0 = m * base + (m < extra ? m : extra);
}

/* The stage holding the tensor st keeps a copy of (NULL: none). */
static rumor_stage_t *tied_owner(const rumor_pipeline_t *p, const rumor_stage_t *st)
{
    if (!st->tied)
        return NULL;
    for (int s = 0; s < p->S; s++)
        if (p->st[s]->lo <= st->tied_lo && st->tied_lo + st->tied_n <= p->st[s]->hi)
            return p->st[s];
    return NULL;
}

static void pio_free(rumor_pipeline_t *p);

void rumor_pipeline_destroy(rumor_pipeline_t **pp)
{
    if (!pp || !*pp)
        return;
    rumor_pipeline_t *p = *pp;
    if (p->pio) { /* copies still landing in the caller's buffer finish first */
        RUMOR_IGNORE(rumor_pipeline_params_sync(p));
        pio_free(p);
    }
    for (int s = 0; p->link && s + 1 < p->S; s++)
        rumor_link_destroy(&p->link[s]);
    free(p->link);
    for (int s = 0; p->tied_tmp && s < p->S; s++)
        if (p->tied_tmp[s]) {
            rumor_stage_t *o = tied_owner(p, p->st[s]);
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
        rumor_stage_t *o = tied_owner(p, p->st[s]);
        if (o && o->dev != p->st[s]->dev &&
            !(p->tied_tmp[s] = o->dev->ops->alloc(o->dev, p->st[s]->tied_n * sizeof(float))))
            return rumor_err_trace_add(__FILE__, __LINE__, RUMOR_ENOMEM);
    }
    return 0;
}

/* Finishes what a stage on a GPU queued (its F, B or W): the stage waiting
 * on its result is told only then, and a slot goes back to the pool only
 * when nothing queued still reads it. */
static int stage_done(rumor_stage_t *st)
{
    return st->dev->kind == RUMOR_DEV_CPU ? 0 : st->dev->ops->sync(st->dev);
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
        pthread_cond_init(&p->run->cv, NULL);
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
        rumor_stage_t *o = tied_owner(p, p->st[s]);
        for (int q = 0; o && q < p->S; q++)
            if (p->st[q] == o)
                p->tied_of[s] = q;
        if (p->st[s]->tied && !o)
            rc = rumor_err_set(RUMOR_ESTATE, "pipeline stage %d: no stage holds the tensor it "
                               "shares at offset %zu", s, p->st[s]->tied_lo);
    }
    if (rc == 0)
        rc = make_links(p);
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

/* Waits until flag is set (or the step failed), adding the time waited to
 * *idle; returns 0, or -1 if the step failed. */
static int wait_for(struct pipeline_run *r, const uint8_t *flag, double *idle)
{
    double t0 = rumor_now();
    pthread_mutex_lock(&r->mu);
    while (!*flag && !r->failed)
        pthread_cond_wait(&r->cv, &r->mu);
    int failed = r->failed;
    pthread_mutex_unlock(&r->mu);
    *idle += rumor_now() - t0;
    return failed ? -1 : 0;
}

static void post(struct pipeline_run *r, uint8_t *flag)
{
    pthread_mutex_lock(&r->mu);
    *flag = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void fail_run(struct pipeline_run *r, int d, const rumor_action_t *a, int s)
{
    static const char *kinds[] = { "F", "B", "W", "BW" };
    pthread_mutex_lock(&r->mu);
    if (!r->failed) {
        r->failed = 1;
        snprintf(r->err, sizeof r->err, "device %d, %s of stage %d micro-batch %d: %s", d,
                 kinds[a->kind], s, a->micro, rumor_err_msg());
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* One action of worker w's list: 0 done, < 0 an error, 1 the step failed
 * elsewhere. */
static int act(struct worker *w, const rumor_action_t *a)
{
    rumor_pipeline_t *p = w->p;
    int d = w->d;
    struct pipeline_run *r = p->run;
    int s = rumor_schedule_stage(p->sched, d, a->chunk), m = a->micro;
    size_t c = (size_t)s * p->M + m;
    rumor_stage_t *st = p->st[s];
    int slot = r->slot_of[c];
    switch (a->kind) {
    case RUMOR_ACT_F: {
        if (s > 0 && wait_for(r, &r->done_f[c - p->M], &w->idle) < 0)
            return 1;
        /* a slot for the micro-batch until its W: the validator's peak
         * is how many this stage's list ever holds at once */
        if (r->npool[s] == 0)
            return rumor_err_set(RUMOR_ESTATE, "stage %d: no free activation slot (the "
                                 "schedule's peak is %d)", s, p->sched->peak_stage[s]);
        slot = r->slot_of[c] = r->pool[s][--r->npool[s]];
        int row0, rows;
        rumor_pipeline_micro_rows(r->b->n, p->M, m, &row0, &rows);
        RUMOR_CHECK(rumor_stage_load(st, slot, r->b, row0, rows));
        const float *in = s > 0 ? rumor_stage_output(p->st[s - 1], r->slot_of[c - p->M]) : NULL;
        if (s > 0 && p->link[s - 1]) { /* from another device: over the link */
            float *buf = rumor_stage_input_buffer(st, slot);
            size_t bytes = (size_t)st->slots[slot].B * st->slots[slot].T *
                           (size_t)st->model->blocks[st->first].in_width * sizeof(float);
            RUMOR_CHECK(rumor_link_copy(p->link[s - 1], 1, buf, in, bytes));
            in = buf;
        }
        RUMOR_CHECK(rumor_stage_forward(st, slot, in, 1, r->step, m));
        RUMOR_CHECK(stage_done(st));
        if (s == p->S - 1) /* the loss now: the slot is reused after W */
            RUMOR_CHECK(rumor_stage_loss(st, slot, &r->loss[m], NULL));
        w->end = rumor_now(); /* before the next stage may start on it */
        post(r, &r->done_f[c]);
        return 0;
    }
    case RUMOR_ACT_B:
    case RUMOR_ACT_BW: {
        /* the stage after has sent the gradient of this stage's output
         * into the slot (below) */
        if (s < p->S - 1 && wait_for(r, &r->done_b[c + p->M], &w->idle) < 0)
            return 1;
        const float *dy = s < p->S - 1 ? rumor_stage_output_grad(st, slot) : NULL;
        RUMOR_CHECK(rumor_stage_backward_b(st, slot, dy, r->loss_scale));
        RUMOR_CHECK(stage_done(st));
        if (s > 0) {
            /* send the input gradient into the stage before's slot of this
             * micro-batch (held until its W, which follows its B, which
             * waits for this), so this slot is free after this stage's W */
            rumor_stage_t *up = p->st[s - 1];
            size_t bytes = (size_t)st->slots[slot].B * st->slots[slot].T *
                           (size_t)st->model->blocks[st->first].in_width * sizeof(float);
            float *dst = rumor_stage_output_grad(up, r->slot_of[c - p->M]);
            if (p->link[s - 1])
                RUMOR_CHECK(rumor_link_copy(p->link[s - 1], 0, dst,
                                            rumor_stage_input_grad(st, slot), bytes));
            else
                RUMOR_CHECK(up->dev->ops->copy(up->dev, dst, rumor_stage_input_grad(st, slot),
                                               bytes));
        }
        if (a->kind == RUMOR_ACT_BW) {
            RUMOR_CHECK(rumor_stage_backward_w(st, slot));
            RUMOR_CHECK(stage_done(st)); /* before a link may write into the slot again */
            r->pool[s][r->npool[s]++] = slot;
        }
        w->end = rumor_now();
        post(r, &r->done_b[c]);
        return 0;
    }
    default:
        RUMOR_CHECK(rumor_stage_backward_w(st, slot));
        /* the slot's buffers are read until W is done on the device: the
         * next micro-batch's input or gradient comes into them over a link,
         * off this stage's stream */
        RUMOR_CHECK(stage_done(st));
        r->pool[s][r->npool[s]++] = slot;
        w->end = rumor_now();
        return 0;
    }
}

/* The flag action a of device d waits for (NULL: none). */
static const uint8_t *input_of(const rumor_pipeline_t *p, int d, const rumor_action_t *a)
{
    int s = rumor_schedule_stage(p->sched, d, a->chunk);
    size_t c = (size_t)s * p->M + a->micro;
    if (a->kind == RUMOR_ACT_F)
        return s > 0 ? &p->run->done_f[c - p->M] : NULL;
    if (a->kind == RUMOR_ACT_B || a->kind == RUMOR_ACT_BW)
        return s < p->S - 1 ? &p->run->done_b[c + p->M] : NULL;
    return NULL;
}

static int is_set(struct pipeline_run *r, const uint8_t *flag)
{
    pthread_mutex_lock(&r->mu);
    int v = *flag || r->failed;
    pthread_mutex_unlock(&r->mu);
    return v;
}

static int bind_stage(rumor_pipeline_t *p, int s, float *params, rumor_device_t *dev);
static int copies_async(const rumor_device_t *host, const rumor_device_t *d);
static int write_stage(rumor_pipeline_t *p, int s, float *params, rumor_device_t *dev);

/* Stage q's gradient is complete once its own actions are, and those of the
 * stages keeping a copy of a tensor it holds (a GPT head's tied embedding):
 * their parts are added into it then, in stage order. Returns 1 when it
 * is, 0 not yet, < 0 on an error. Worker of q's device. */
static int complete_grads(struct worker *w, int q)
{
    rumor_pipeline_t *p = w->p;
    struct pipeline_run *r = p->run;
    pthread_mutex_lock(&r->mu);
    int ready = r->acted[q];
    for (int s = 0; ready && s < p->S; s++)
        if (p->tied_of[s] == q && !r->acted[s])
            ready = 0;
    pthread_mutex_unlock(&r->mu);
    if (!ready)
        return 0;
    rumor_stage_t *o = p->st[q];
    for (int s = 0; s < p->S; s++) {
        if (p->tied_of[s] != q)
            continue;
        rumor_stage_t *st = p->st[s];
        const float *g = st->tied_grad;
        if (p->tied_tmp[s]) { /* on another device: its part comes over first */
            RUMOR_CHECK(rumor_device_copy(o->dev, p->tied_tmp[s], st->dev, g,
                                          st->tied_n * sizeof(float)));
            g = p->tied_tmp[s];
        }
        o->dev->ops->axpy(o->dev, o->grads + (st->tied_lo - o->lo), 1.0f, g, st->tied_n);
    }
    r->finished[q] = 1;
    p->fin[q][0] = rumor_now() - p->t0;
    return 1;
}

/* Finishes what it can of worker w's stages: completes their gradients and
 * steps those whose range next() hands over, waiting for it at most `wait`
 * seconds (the time waited counts as idle). Returns 0, < 0 on an error. */
static int finish_stages(struct worker *w, double wait)
{
    rumor_pipeline_t *p = w->p;
    struct pipeline_run *r = p->run;
    int waiting = 0; /* stages whose gradient is complete, not stepped */
    for (int q = 0; q < p->S && w->todo > 0; q++) {
        if (rumor_schedule_device(p->sched, q, NULL) != w->d || r->finished[q] == 2)
            continue;
        if (!r->finished[q]) {
            int rc = complete_grads(w, q);
            if (rc <= 0)
                continue;
            if (!r->next) {
                r->finished[q] = 2;
                w->todo--;
                continue;
            }
        }
        waiting++;
    }
    for (int q = 0; q < p->S && waiting > 0; q++) {
        if (rumor_schedule_device(p->sched, q, NULL) != w->d || r->finished[q] != 1)
            continue;
        rumor_stage_t *st = p->st[q];
        float *buf = NULL;
        double t0 = rumor_now();
        /* one stage to wait for: wait on it; several: ask each in turn */
        int rc = st->hi > st->lo ? r->next(r->next_ctx, q, st->lo, st->hi,
                                           waiting == 1 ? wait : 0.001, &buf)
                                 : 1; /* no parameters: nothing to wait for */
        w->idle += rumor_now() - t0;
        if (rc < 0)
            return rumor_err_prefix(rc, "stage %d's parameters", q);
        if (rc == 0)
            continue;
        p->fin[q][1] = rumor_now() - p->t0;
        if (buf)
            RUMOR_CHECK(bind_stage(p, q, buf, r->host));
        RUMOR_CHECK(rumor_stage_step(st));
        if (buf)
            RUMOR_CHECK(write_stage(p, q, buf, r->host));
        if (!copies_async(r->host, st->dev))
            RUMOR_CHECK(stage_done(st));
        p->fin[q][2] = rumor_now() - p->t0;
        r->finished[q] = 2;
        w->todo--;
        waiting--;
    }
    return 0;
}

/* Stage s of worker w did an action: when it was its last, the stage's
 * gradient may be complete (so may its tied owner's: told through mu). */
static int acted(struct worker *w, int s)
{
    struct pipeline_run *r = w->p->run;
    if (--r->left[s] > 0)
        return 0;
    pthread_mutex_lock(&r->mu);
    r->acted[s] = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return finish_stages(w, 0.0);
}

/* Waits at most ns nanoseconds for news on the run (a flag posted, a stage
 * done), unless *need is set already or the step failed. */
static void nap(struct pipeline_run *r, const uint8_t *need, long ns)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += ns;
    while (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    if (!(need && *need) && !r->failed)
        pthread_cond_timedwait(&r->cv, &r->mu, &until);
    pthread_mutex_unlock(&r->mu);
}

/* A moment of worker w's idle time for its stages still computing: next()
 * with wait < 0 does some of the work their ranges need (mixes a cell of a
 * gossip round). Returns 1 when it did some, 0 when there was none, < 0 on
 * an error. */
static int idle_work(struct worker *w)
{
    rumor_pipeline_t *p = w->p;
    struct pipeline_run *r = p->run;
    for (int q = 0; r->next && q < p->S; q++) {
        if (rumor_schedule_device(p->sched, q, NULL) != w->d || r->finished[q] ||
            p->st[q]->hi == p->st[q]->lo)
            continue;
        float *buf;
        int rc = r->next(r->next_ctx, q, p->st[q]->lo, p->st[q]->hi, -1.0, &buf);
        if (rc < 0)
            return rumor_err_prefix(rc, "stage %d's parameters", q);
        if (rc == 2) {
            p->idle_works++;
            return 1;
        }
    }
    return 0;
}

/* Waits for an input while this worker's stages wait for their ranges or
 * have work their ranges need: steps each as its range comes, does that
 * work a piece at a time, and looks at the input between pieces and every
 * millisecond. Returns 0, or < 0 on an error here. */
static int wait_finishing(struct worker *w, const uint8_t *need)
{
    struct pipeline_run *r = w->p->run;
    while (w->todo > 0 && !is_set(r, need)) {
        int rc = finish_stages(w, 0.0);
        if (rc == 0 && !is_set(r, need))
            rc = idle_work(w);
        if (rc < 0)
            return rc;
        if (rc > 0)
            continue; /* did some: is the input here? */
        double t0 = rumor_now();
        nap(r, need, 1000000);
        w->idle += rumor_now() - t0;
    }
    return 0;
}

/* While action i of worker w waits for its input, runs the Ws listed after
 * it whose B is done (nothing waits on a W, and running one earlier frees
 * its slot earlier: the schedule's dependencies and peak hold). Returns 0,
 * or < 0 when a W failed. */
static int fill_wait(struct worker *w, int i, const uint8_t *need)
{
    rumor_pipeline_t *p = w->p;
    const rumor_schedule_t *sc = p->sched;
    struct pipeline_run *r = p->run;
    int n = sc->n[w->d], lim = i + 1 + 6 * p->S;
    uint8_t *early = r->early[w->d];
    for (int j = i + 1; j < n && j < lim && !is_set(r, need); j++) {
        const rumor_action_t *x = &sc->acts[w->d][j];
        if (x->kind != RUMOR_ACT_W || early[j])
            continue;
        int s = rumor_schedule_stage(sc, w->d, x->chunk);
        if (!r->done_b[(size_t)s * p->M + x->micro]) /* set by this worker alone */
            continue;
        double a0 = rumor_now() - p->t0;
        w->end = 0;
        int rc = act(w, x);
        p->ev[w->d][2 * j] = a0;
        p->ev[w->d][2 * j + 1] = (w->end > 0 ? w->end : rumor_now()) - p->t0;
        if (rc == 0)
            rc = acted(w, s);
        if (rc < 0) {
            fail_run(r, w->d, x, s);
            return rc;
        }
        early[j] = 1;
    }
    return 0;
}

static int run_failed(struct pipeline_run *r)
{
    pthread_mutex_lock(&r->mu);
    int v = r->failed;
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* Fails the step with this thread's error, outside any action. */
static void fail_finish(struct pipeline_run *r, int d)
{
    pthread_mutex_lock(&r->mu);
    if (!r->failed) {
        r->failed = 1;
        snprintf(r->err, sizeof r->err, "device %d, finishing its stages: %s", d,
                 rumor_err_msg());
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Whether one of worker w's stages waits for a tied copy's gradient. */
static int waits_for_copy(const struct worker *w)
{
    for (int q = 0; q < w->p->S; q++)
        if (rumor_schedule_device(w->p->sched, q, NULL) == w->d && !w->p->run->finished[q])
            return 1;
    return 0;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    rumor_pipeline_t *p = w->p;
    const rumor_schedule_t *sc = p->sched;
    double t0 = rumor_now(), *ev = p->ev[w->d];
    uint8_t *early = p->run->early[w->d];
    int n = sc->n[w->d];
    for (int i = 0; i < n; i++) {
        const rumor_action_t *a = &sc->acts[w->d][i];
        if (early[i])
            continue;
        int s = rumor_schedule_stage(p->sched, w->d, a->chunk);
        const uint8_t *need = input_of(p, w->d, a);
        if (need && !is_set(p->run, need)) {
            /* idle until the input comes: first the Ws that can run, then
             * the optimizer steps of stages whose ranges came */
            if (fill_wait(w, i, need) < 0)
                break;
            if (wait_finishing(w, need) < 0) {
                fail_finish(p->run, w->d);
                break;
            }
        }
        double idle = w->idle;
        double a0 = rumor_now();
        w->end = 0;
        int rc = act(w, a);
        ev[2 * i] = a0 + (w->idle - idle) - p->t0; /* from the end of its wait */
        /* to the moment its result was ready (a stage waiting on it may
         * start then, before this thread reads the clock again) */
        ev[2 * i + 1] = (w->end > 0 ? w->end : rumor_now()) - p->t0;
        if (rc == 0)
            rc = acted(w, s);
        if (rc != 0) {
            if (rc < 0)
                fail_run(p->run, w->d, a, s);
            break;
        }
    }
    /* computing, not waiting, until the list's end */
    p->busy_s[w->d] = rumor_now() - t0 - w->idle;
    w->list_end = rumor_now();
    /* the stages not stepped yet wait for their ranges (or a tied copy) */
    while (w->todo > 0 && !run_failed(p->run)) {
        if (finish_stages(w, 0.05) < 0) {
            fail_finish(p->run, w->d);
            break;
        }
        if (w->todo > 0 && waits_for_copy(w)) {
            /* a tied copy on another device: its worker says when (mu) */
            nap(p->run, NULL, 2000000);
        }
    }
    return NULL;
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
    for (int s = 0; s < p->S; s++) {
        RUMOR_CHECK(rumor_stage_zero_grad(p->st[s]));
        /* a stage that shares a tensor it does not hold (a GPT head's token
         * embedding) works on a fresh copy of its owner's */
        const rumor_stage_t *o = tied_owner(p, p->st[s]);
        if (o)
            RUMOR_CHECK(rumor_stage_sync_tied(p->st[s], o->params + (p->st[s]->tied_lo - o->lo),
                                              o->dev));
    }
    pthread_t th[RUMOR_SCHED_MAX_DEVICES];
    struct worker w[RUMOR_SCHED_MAX_DEVICES];
    int started = 0;
    double t0 = rumor_now();
    p->t0 = t0;
    for (int d = 0; d < p->P; d++) {
        w[d] = (struct worker){ p, d, 0.0, 0.0, 0, 0.0 };
        for (int s = 0; s < p->S; s++)
            w[d].todo += rumor_schedule_device(p->sched, s, NULL) == d;
        if (pthread_create(&th[d], NULL, work, &w[d]) != 0) {
            pthread_mutex_lock(&r->mu);
            r->failed = 1;
            snprintf(r->err, sizeof r->err, "cannot start the worker of device %d", d);
            pthread_cond_broadcast(&r->cv);
            pthread_mutex_unlock(&r->mu);
            break;
        }
        started++;
    }
    for (int d = 0; d < started; d++)
        pthread_join(th[d], NULL);
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

/* A stage whose parameters are its own copy of a host range: the copy back
 * runs on a stream of its own, after the stage's optimizer step (event
 * `stepped` on the stage's compute stream), and `written` marks its end.
 * Created at the first bind, so a comm thread that asks
 * rumor_pipeline_params_ready later sees them made. */
struct pipeline_param_io {
    rumor_stream_t *s;
    rumor_event_t *stepped, *written;
    atomic_int started; /* a copy back was started (the events were recorded): an
                         * event never recorded is not asked about */
};

static void pio_free(rumor_pipeline_t *p)
{
    for (int s = 0; p->pio && s < p->S; s++) {
        struct pipeline_param_io *io = &p->pio[s];
        rumor_device_t *d = p->st[s]->dev;
        if (io->written)
            d->ops->event_destroy(d, io->written);
        if (io->stepped)
            d->ops->event_destroy(d, io->stepped);
        if (io->s)
            d->ops->stream_destroy(d, io->s);
    }
    free(p->pio);
    p->pio = NULL;
}

/* Whether a stage on device d copies its range to and from a buffer of
 * `host` asynchronously (a GPU stage, a host buffer); else it copies at once. */
static int copies_async(const rumor_device_t *host, const rumor_device_t *d)
{
    return host->kind == RUMOR_DEV_CPU && d->kind != RUMOR_DEV_CPU;
}

/* The copy machinery of stage s (made on first use); NULL on an error. */
static struct pipeline_param_io *pio_of(rumor_pipeline_t *p, int s)
{
    if (!p->pio && !(p->pio = calloc((size_t)p->S, sizeof *p->pio))) {
        rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
        return NULL;
    }
    struct pipeline_param_io *io = &p->pio[s];
    rumor_device_t *d = p->st[s]->dev;
    if (!io->s && d->ops->stream_create(d, &io->s) < 0)
        return NULL;
    if (!io->stepped && d->ops->event_create(d, &io->stepped) < 0)
        return NULL;
    if (!io->written && d->ops->event_create(d, &io->written) < 0)
        return NULL;
    return io;
}

/* Stage s's parameters from `params` (the whole space in dev's memory):
 * bound in place when the stage shares dev's memory (returns 1), else its
 * range is copied in (0): a GPU stage's upload is queued on its compute
 * stream after the last copy back read its parameters. */
static int bind_stage(rumor_pipeline_t *p, int s, float *params, rumor_device_t *dev)
{
    rumor_stage_t *st = p->st[s];
    if (rumor_device_same_memory(st->dev, dev)) {
        rumor_stage_bind_params(st, params + st->lo);
        return 1;
    }
    if (!st->owns_params) /* was bound in place: a buffer of its own again */
        return rumor_err_set(RUMOR_ESTATE, "pipeline stage %d: bound to another device's "
                             "memory", s);
    rumor_device_t *d = st->dev;
    size_t bytes = st->n * sizeof(float);
    if (copies_async(dev, d)) {
        struct pipeline_param_io *io = pio_of(p, s);
        if (!io)
            return rumor_err_trace_add(__FILE__, __LINE__, rumor_err_code());
        if (atomic_load(&io->started))
            RUMOR_CHECK(d->ops->stream_wait(d, NULL, io->written));
        RUMOR_CHECK(d->ops->upload_async(d, st->params, params + st->lo, bytes, NULL));
    } else {
        RUMOR_CHECK(rumor_pipeline_params_sync(p));
        RUMOR_CHECK(rumor_device_copy(d, st->params, dev, params + st->lo, bytes));
    }
    return 0;
}

/* Stage s's parameters into its range of `params` (nothing when bound
 * there): a GPU stage's copy runs on its copy stream after its optimizer
 * step, `written` marking its end. */
static int write_stage(rumor_pipeline_t *p, int s, float *params, rumor_device_t *dev)
{
    rumor_stage_t *st = p->st[s];
    if (st->params == params + st->lo)
        return 0;
    rumor_device_t *d = st->dev;
    size_t bytes = st->n * sizeof(float);
    if (!copies_async(dev, d))
        return rumor_device_copy(dev, params + st->lo, d, st->params, bytes);
    struct pipeline_param_io *io = pio_of(p, s);
    if (!io)
        return rumor_err_trace_add(__FILE__, __LINE__, rumor_err_code());
    RUMOR_CHECK(d->ops->event_record(d, io->stepped, NULL));
    RUMOR_CHECK(d->ops->stream_wait(d, io->s, io->stepped));
    RUMOR_CHECK(d->ops->download_async(d, params + st->lo, st->params, bytes, io->s));
    RUMOR_CHECK(d->ops->event_record(d, io->written, io->s));
    atomic_store(&io->started, 1);
    return 0;
}

int rumor_pipeline_bind_params(rumor_pipeline_t *p, float *params, rumor_device_t *dev)
{
    int all = 1;
    for (int s = 0; s < p->S; s++) {
        int rc = bind_stage(p, s, params, dev);
        RUMOR_CHECK(rc);
        all &= rc;
    }
    return all;
}

int rumor_pipeline_write_params(rumor_pipeline_t *p, float *params, rumor_device_t *dev)
{
    for (int s = 0; s < p->S; s++)
        RUMOR_CHECK(write_stage(p, s, params, dev));
    return 0;
}

int rumor_pipeline_params_ready(rumor_pipeline_t *p)
{
    for (int s = 0; p->pio && s < p->S; s++) {
        struct pipeline_param_io *io = &p->pio[s];
        if (!io->written || !atomic_load(&io->started))
            continue;
        int r = p->st[s]->dev->ops->event_query(p->st[s]->dev, io->written);
        if (r <= 0)
            return r < 0 ? rumor_err_trace_add(__FILE__, __LINE__, r) : 0;
    }
    return 1;
}

int rumor_pipeline_params_sync(rumor_pipeline_t *p)
{
    for (int s = 0; p->pio && s < p->S; s++)
        if (p->pio[s].written && atomic_load(&p->pio[s].started))
            RUMOR_CHECK(p->st[s]->dev->ops->event_sync(p->st[s]->dev, p->pio[s].written));
    return 0;
}

int rumor_pipeline_bind_grads(rumor_pipeline_t *p, float *grads, rumor_device_t *dev)
{
    int all = 1;
    for (int s = 0; s < p->S; s++) {
        if (rumor_device_same_memory(p->st[s]->dev, dev))
            rumor_stage_bind_grads(p->st[s], grads + p->st[s]->lo);
        else
            all = 0;
    }
    return all;
}

int rumor_pipeline_gather_grads(const rumor_pipeline_t *p, float *grads, rumor_device_t *dev)
{
    for (int s = 0; s < p->S; s++) {
        const rumor_stage_t *st = p->st[s];
        if (st->grads != grads + st->lo)
            RUMOR_CHECK(rumor_device_copy(dev, grads + st->lo, st->dev, st->grads,
                                          st->n * sizeof(float)));
    }
    return 0;
}

int rumor_pipeline_scatter_grads(rumor_pipeline_t *p, const float *grads, rumor_device_t *dev)
{
    for (int s = 0; s < p->S; s++) {
        rumor_stage_t *st = p->st[s];
        if (st->grads != grads + st->lo)
            RUMOR_CHECK(rumor_device_copy(st->dev, st->grads, dev, grads + st->lo,
                                          st->n * sizeof(float)));
    }
    return 0;
}

int rumor_pipeline_optim_state(rumor_pipeline_t *p, rumor_optim_t *o, int to_whole)
{
    for (int s = 0; s < p->S; s++) {
        rumor_stage_t *st = p->st[s];
        rumor_optim_t *so = st->opt;
        if (!so)
            return rumor_err_set(RUMOR_ESTATE, "pipeline stage %d: no optimizer", s);
        if (so->cfg.kind != o->cfg.kind || st->hi > o->n)
            return rumor_err_set(RUMOR_EINVAL, "pipeline stage %d: optimizer state of another "
                                 "kind or size", s);
        size_t bytes = st->n * sizeof(float);
        if (to_whole) {
            RUMOR_CHECK(rumor_device_copy(o->dev, o->m + st->lo, st->dev, so->m, bytes));
            if (so->v)
                RUMOR_CHECK(rumor_device_copy(o->dev, o->v + st->lo, st->dev, so->v, bytes));
        } else {
            RUMOR_CHECK(rumor_device_copy(st->dev, so->m, o->dev, o->m + st->lo, bytes));
            if (so->v)
                RUMOR_CHECK(rumor_device_copy(st->dev, so->v, o->dev, o->v + st->lo, bytes));
            so->t = o->t;
        }
    }
    if (to_whole)
        o->t = rumor_pipeline_optim_steps(p);
    return 0;
}

long rumor_pipeline_optim_steps(const rumor_pipeline_t *p)
{
    return p->S > 0 && p->st[0]->opt ? p->st[0]->opt->t : 0;
}

void rumor_pipeline_set_optim_steps(rumor_pipeline_t *p, long t)
{
    for (int s = 0; s < p->S; s++)
        if (p->st[s]->opt)
            p->st[s]->opt->t = t;
}

double rumor_pipeline_bubble(const rumor_pipeline_t *p)
{
    double busy = 0;
    for (int d = 0; d < p->P; d++)
        busy += p->busy_s[d];
    return p->step_s > 0 ? 1.0 - busy / ((double)p->P * p->step_s) : 0.0;
}

/* Each stage's mean F, B and W seconds in the last step (S x 3, malloc'd). */
static int measured_costs(const rumor_pipeline_t *p, double **out)
{
    size_t n = (size_t)p->S * 3;
    double *cost = calloc(n, sizeof *cost), *cnt = calloc(n, sizeof *cnt);
    *out = NULL;
    if (!cost || !cnt) {
        free(cost);
        free(cnt);
        return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
    }
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->sched->n[d]; i++) {
            const rumor_action_t *a = &p->sched->acts[d][i];
            int s = rumor_schedule_stage(p->sched, d, a->chunk);
            double t = p->ev[d][2 * i + 1] - p->ev[d][2 * i];
            if (a->kind == RUMOR_ACT_BW) { /* split as B = W: only their sum counts */
                cost[s * 3 + 1] += t / 2, cost[s * 3 + 2] += t / 2;
                cnt[s * 3 + 1] += 1, cnt[s * 3 + 2] += 1;
            } else {
                cost[s * 3 + a->kind] += t;
                cnt[s * 3 + a->kind] += 1;
            }
        }
    for (size_t k = 0; k < n; k++)
        cost[k] = cnt[k] > 0 ? cost[k] / cnt[k] : 0.0;
    free(cnt);
    *out = cost;
    return 0;
}

int rumor_pipeline_expected_bubble(const rumor_pipeline_t *p, double *bubble)
{
    double *cost, mk;
    RUMOR_CHECK(measured_costs(p, &cost));
    int rc = rumor_schedule_simulate(p->sched, cost, &mk, bubble);
    free(cost);
    return rc;
}

int rumor_pipeline_replan(rumor_pipeline_t *p, const double *given, double *before,
                          double *after)
{
    double *cost = NULL, mk;
    rumor_schedule_t *ns = NULL;
    if (given) {
        if (!(cost = malloc((size_t)p->S * 3 * sizeof *cost)))
            return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
        memcpy(cost, given, (size_t)p->S * 3 * sizeof *cost);
    } else {
        RUMOR_CHECK(measured_costs(p, &cost));
    }
    int rc = rumor_schedule_simulate(p->sched, cost, &mk, before);
    if (rc == 0)
        rc = rumor_schedule_build_costed(p->sched->name, p->P, p->M, p->cfg.model->nblocks, cost,
                                         &ns);
    if (rc == 0)
        rc = rumor_schedule_simulate(ns, cost, &mk, after);
    free(cost);
    if (rc < 0 || *after >= *before - 1e-3) { /* no better: keep the lists */
        if (rc == 0)
            *after = *before;
        rumor_schedule_destroy(&ns);
        return rc < 0 ? rumor_err_trace_add(__FILE__, __LINE__, rc) : 0;
    }
    /* the new lists' slots, waits and times */
    struct pipeline_run *r = p->run;
    for (int s = 0; rc == 0 && s < p->S; s++) {
        rc = rumor_stage_grow_slots(p->st[s], ns->peak_stage[s]);
        int *pool = rc == 0 ? realloc(r->pool[s], (size_t)p->st[s]->nslots * sizeof *pool) : NULL;
        if (rc == 0 && !pool)
            rc = rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
        if (pool)
            r->pool[s] = pool;
    }
    for (int d = 0; rc == 0 && d < p->P; d++) {
        uint8_t *e = realloc(r->early[d], (size_t)ns->n[d] + 1);
        double *ev = realloc(p->ev[d], (2 * (size_t)ns->n[d] + 1) * sizeof *ev);
        if (e)
            r->early[d] = e;
        if (ev)
            p->ev[d] = ev;
        if (!e || !ev)
            rc = rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
        else
            memset(ev, 0, (2 * (size_t)ns->n[d] + 1) * sizeof *ev);
    }
    if (rc < 0) {
        rumor_schedule_destroy(&ns);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    rumor_schedule_destroy(&p->sched);
    p->sched = ns;
    return 1;
}

void rumor_pipeline_trace_rows(const rumor_pipeline_t *p, rumor_trace_t *t)
{
    for (int d = 0; d < p->P; d++) {
        char name[96];
        snprintf(name, sizeof name, "device %d: %s", d, p->dev[d]->name);
        rumor_trace_row(t, d, name);
    }
}

void rumor_pipeline_trace(const rumor_pipeline_t *p, rumor_trace_t *t, long step)
{
    static const char *kinds[] = { "F", "B", "W", "BW" };
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->sched->n[d]; i++) {
            const rumor_action_t *a = &p->sched->acts[d][i];
            char name[16], args[96];
            snprintf(name, sizeof name, "%s%d%s", kinds[a->kind], a->micro,
                     p->V > 1 ? (char[2]){ (char)('a' + a->chunk), 0 } : "");
            snprintf(args, sizeof args, "\"stage\":%d,\"micro\":%d,\"step\":%ld",
                     rumor_schedule_stage(p->sched, d, a->chunk), a->micro, step);
            rumor_trace_span(t, d, name, kinds[a->kind], p->t0 + p->ev[d][2 * i],
                             p->t0 + p->ev[d][2 * i + 1], args);
        }
    /* rumor_pipeline_grads_step: each stage's wait for its range of the
     * mix, and its optimizer step, on its device's row */
    for (int s = 0; s < p->S; s++) {
        if (p->fin[s][2] <= 0)
            continue;
        int d = rumor_schedule_device(p->sched, s, NULL);
        char name[32], args[64];
        snprintf(args, sizeof args, "\"stage\":%d,\"step\":%ld", s, step);
        if (p->fin[s][1] > p->fin[s][0]) {
            snprintf(name, sizeof name, "wait for mix %d", s);
            rumor_trace_span(t, d, name, "gossip", p->t0 + p->fin[s][0], p->t0 + p->fin[s][1],
                             args);
        }
        snprintf(name, sizeof name, "step %d", s);
        rumor_trace_span(t, d, name, "optimizer", p->t0 + p->fin[s][1], p->t0 + p->fin[s][2],
                         args);
    }
}

int rumor_pipeline_stepped(const rumor_pipeline_t *p)
{
    for (int s = 0; s < p->S; s++)
        if (p->fin[s][2] <= 0)
            return 0;
    return 1;
}

int rumor_pipeline_partition(const rumor_model_t *m, const char *spec, int S, int *cuts)
{
    int nb = m->nblocks;
    if (S < 1 || S > nb)
        return rumor_err_set(RUMOR_EINVAL, "--partition: %d stages for a model of %d blocks", S,
                             nb);
    if (!spec || !strcmp(spec, "uniform")) {
        for (int s = 0; s <= S; s++)
            cuts[s] = (int)((long)s * nb / S);
        return 0;
    }
    if (!strcmp(spec, "profile"))
        return rumor_err_set(RUMOR_EINVAL, "--partition profile: measured on the devices "
                             "(rumor_pipeline_profile), not computed from the model alone");
    if (!strcmp(spec, "params")) {
        /* cut s at the block boundary whose parameters before it come
         * nearest s / S of the whole, leaving every stage a block */
        double total = (double)m->nparams;
        cuts[0] = 0;
        for (int s = 1; s < S; s++) {
            double want = total * s / S, best = -1;
            for (int c = cuts[s - 1] + 1; c <= nb - (S - s); c++) {
                double have = (double)m->blocks[c - 1].hi; /* parameters before block c */
                double dist = have > want ? have - want : want - have;
                if (best < 0 || dist < best) {
                    best = dist;
                    cuts[s] = c;
                }
            }
        }
        cuts[S] = nb;
        return 0;
    }
    /* "a-b,c,d-e": ranges of blocks in order */
    const char *q = spec;
    int s = 0, next = 0;
    while (*q) {
        char *end;
        long lo = strtol(q, &end, 10), hi = lo;
        if (end == q)
            return rumor_err_set(RUMOR_EINVAL, "--partition '%s': expected uniform, params or "
                                 "block ranges like 0-3,4-7 (at offset %d)", spec, (int)(q - spec));
        q = end;
        if (*q == '-') {
            hi = strtol(q + 1, &end, 10);
            if (end == q + 1)
                return rumor_err_set(RUMOR_EINVAL, "--partition '%s': a range without its end "
                                     "(at offset %d)", spec, (int)(q - spec));
            q = end;
        }
        if (lo != next || hi < lo || hi >= nb)
            return rumor_err_set(RUMOR_EINVAL, "--partition '%s': stage %d is blocks %ld-%ld; "
                                 "it must start at block %d and end before %d", spec, s, lo, hi,
                                 next, nb);
        if (s == S)
            return rumor_err_set(RUMOR_EINVAL, "--partition '%s': more than %d stages", spec, S);
        cuts[s++] = (int)lo;
        next = (int)hi + 1;
        if (*q == ',')
            q++;
        else if (*q)
            return rumor_err_set(RUMOR_EINVAL, "--partition '%s': unexpected '%c' at offset %d",
                                 spec, *q, (int)(q - spec));
    }
    if (s != S || next != nb)
        return rumor_err_set(RUMOR_EINVAL, "--partition '%s': %d stage%s covering blocks 0-%d; "
                             "the pipeline has %d stages and the model %d blocks", spec, s,
                             s == 1 ? "" : "s", next - 1, S, nb);
    cuts[S] = nb;
    return 0;
}

/* ------------------------------------------------------------ profile */

/* Seconds of F + B + W of block k alone on dev, micro-batches of `rows` of
 * batch b (the first rows): the best of three after one warm-up. */
static int time_block(const rumor_model_t *m, int k, rumor_device_t *dev, const rumor_batch_t *b,
                      int rows, int T, uint64_t seed, double *secs)
{
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = k, .last = k + 1, .max_B = rows,
                                .T = T, .slots = 1, .seed = seed };
    rumor_stage_t *st = NULL;
    RUMOR_CHECK(rumor_stage_create(&sc, &st));
    const rumor_block_t *blk = &m->blocks[k];
    size_t nin = (size_t)rows * T * (size_t)(blk->in_width > 0 ? blk->in_width : 1);
    size_t nout = (size_t)rows * T * (size_t)blk->out_width;
    float *in = NULL, *dy = NULL, *host = malloc((nin > nout ? nin : nout) * sizeof *host);
    int rc = host ? 0 : rumor_err_set(RUMOR_ENOMEM, "profile: out of memory");
    /* inputs and output gradients of a plausible size: small values */
    for (size_t i = 0; rc == 0 && i < (nin > nout ? nin : nout); i++)
        host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    if (rc == 0 && k > 0) {
        in = dev->ops->alloc(dev, nin * sizeof *in);
        rc = in ? dev->ops->upload(dev, in, host, nin * sizeof *in)
                : rumor_err_set(RUMOR_ENOMEM, "profile: out of memory");
    }
    if (rc == 0 && k < m->nblocks - 1) {
        dy = dev->ops->alloc(dev, nout * sizeof *dy);
        rc = dy ? dev->ops->upload(dev, dy, host, nout * sizeof *dy)
                : rumor_err_set(RUMOR_ENOMEM, "profile: out of memory");
    }
    double best = -1;
    for (int r = 0; rc == 0 && r < 4; r++) {
        double t0 = rumor_now();
        rc = rumor_stage_load(st, 0, b, 0, rows);
        if (rc == 0)
            rc = rumor_stage_forward(st, 0, in, 1, r, 0);
        if (rc == 0)
            rc = rumor_stage_backward_b(st, 0, dy, 1.0f / (float)(rows * T));
        if (rc == 0)
            rc = rumor_stage_backward_w(st, 0);
        if (rc == 0)
            rc = dev->ops->sync(dev);
        double t = rumor_now() - t0;
        if (r > 0 && (best < 0 || t < best))
            best = t;
    }
    if (in)
        dev->ops->free(dev, in);
    if (dy)
        dev->ops->free(dev, dy);
    free(host);
    rumor_stage_destroy(&st);
    *secs = best;
    return rc;
}

int rumor_pipeline_profile(const rumor_model_t *m, rumor_device_t **devs, int P,
                           const int *dev_of, int S, const rumor_batch_t *b, int M, int T,
                           uint64_t seed, int *cuts, double *stage_s)
{
    int nb = m->nblocks;
    if (S > nb)
        return rumor_err_set(RUMOR_EINVAL, "--partition profile: %d stages for a model of %d "
                             "blocks", S, nb);
    int rows = b->n / M > 0 ? b->n / M : 1;
    /* each block on each distinct device */
    double *cost = calloc((size_t)P * nb, sizeof *cost), *xfer = calloc((size_t)nb, sizeof *xfer);
    int rc = cost && xfer ? 0 : rumor_err_set(RUMOR_ENOMEM, "profile: out of memory");
    for (int d = 0; rc == 0 && d < P; d++) {
        int same = -1;
        for (int e = 0; e < d && same < 0; e++)
            if (devs[e] == devs[d])
                same = e;
        for (int k = 0; rc == 0 && k < nb; k++) {
            if (same >= 0)
                cost[(size_t)d * nb + k] = cost[(size_t)same * nb + k];
            else
                rc = time_block(m, k, devs[d], b, rows, T, seed, &cost[(size_t)d * nb + k]);
        }
    }
    /* moving an activation and its gradient between stages: two copies of
     * rows x T x width floats, at the copy rate measured here */
    double copy_s = 0;
    if (rc == 0) {
        size_t n = 1 << 22;
        float *a = malloc(n * sizeof *a), *z = malloc(n * sizeof *z);
        if (a && z) {
            memset(a, 1, n * sizeof *a);
            double t0 = rumor_now();
            memcpy(z, a, n * sizeof *a);
            copy_s = (rumor_now() - t0) / (double)(n * sizeof *a);
        }
        free(a);
        free(z);
    }
    for (int k = 0; rc == 0 && k < nb; k++)
        xfer[k] = 2.0 * copy_s * (double)rows * T * m->blocks[k].out_width * sizeof(float);
    if (rc == 0)
        rc = rumor_pipeline_plan(cost, xfer, nb, P, dev_of, S, M, cuts, stage_s);
    free(cost);
    free(xfer);
    return rc < 0 ? rumor_err_trace_add(__FILE__, __LINE__, rc) : 0;
}

int rumor_pipeline_plan(const double *cost, const double *xfer, int nb, int P, const int *dev_of,
                        int S, int M, int *cuts, double *stage_s)
{
    if (S < 1 || S > nb || M < 1)
        return rumor_err_set(RUMOR_EINVAL, "plan: %d stages for %d blocks, %d micro-batches", S,
                             nb, M);
    for (int s = 0; s < S; s++)
        if (dev_of[s] < 0 || dev_of[s] >= P)
            return rumor_err_set(RUMOR_EINVAL, "plan: stage %d on device %d of %d", s,
                                 dev_of[s], P);
    /* best[s][j]: the least slowest-stage time of blocks [0, j) in s stages;
     * stage s - 1 runs on device dev_of[s - 1]: its blocks' time there for M
     * micro-batches, plus moving its output on (all but the last) */
    double *best = malloc((size_t)(S + 1) * (nb + 1) * sizeof *best);
    int *from = malloc((size_t)(S + 1) * (nb + 1) * sizeof *from);
    if (!best || !from) {
        free(best);
        free(from);
        return rumor_err_set(RUMOR_ENOMEM, "plan: out of memory");
    }
#define AT(s, j) ((size_t)(s) * (nb + 1) + (j))
    for (int s = 0; s <= S; s++)
        for (int j = 0; j <= nb; j++)
            best[AT(s, j)] = s == 0 && j == 0 ? 0.0 : -1.0;
    for (int s = 1; s <= S; s++) {
        int d = dev_of[s - 1];
        for (int j = s; j <= nb - (S - s); j++)
            for (int i = s - 1; i < j; i++) {
                if (best[AT(s - 1, i)] < 0)
                    continue;
                double t = 0;
                for (int k = i; k < j; k++)
                    t += cost[(size_t)d * nb + k];
                t *= M;
                if (s < S)
                    t += M * xfer[j - 1];
                double v = t > best[AT(s - 1, i)] ? t : best[AT(s - 1, i)];
                if (best[AT(s, j)] < 0 || v < best[AT(s, j)]) {
                    best[AT(s, j)] = v;
                    from[AT(s, j)] = i;
                }
            }
    }
    cuts[S] = nb;
    for (int s = S; s > 0; s--)
        cuts[s - 1] = from[AT(s, cuts[s])];
#undef AT
    for (int s = 0; stage_s && s < S; s++) {
        double t = 0;
        for (int k = cuts[s]; k < cuts[s + 1]; k++)
            t += cost[(size_t)dev_of[s] * nb + k];
        stage_s[s] = t * M + (s < S - 1 ? M * xfer[cuts[s + 1] - 1] : 0.0);
    }
    free(best);
    free(from);
    return 0;
}

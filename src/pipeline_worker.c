/* A device's worker thread of a pipeline step: its action list in order,
 * the waits for the neighbouring stages' results (flags under run->mu),
 * the Ws run early to fill a wait, and each of its stages' finish: the
 * gradient completed (tied copies' parts added) and the optimizer step on
 * the range next() hands over. See pipeline_int.h. */
#include "pipeline.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "pipeline_int.h"

/* Waits for the work a GPU stage queued (CPU: done already): the
 * optimizer step's end, where the caller's buffer is not written back on a
 * stream of its own. */
static int stage_done(rumor_stage_t *st)
{
    return st->dev->kind == RUMOR_DEV_CPU ? 0 : st->dev->ops->sync(st->dev);
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
 * elsewhere. On a GPU stage the action is queued, ordered by events
 * (pipeline_int.h); its flag is posted once it is. */
static int act(struct pipeline_worker *w, const rumor_action_t *a)
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
        RUMOR_CHECK(pipe_take_slot(p, s, slot));
        int row0, rows;
        rumor_pipeline_micro_rows(r->b->n, p->M, m, &row0, &rows);
        RUMOR_CHECK(rumor_stage_load(st, slot, r->b, row0, rows));
        const float *in = s > 0 ? rumor_stage_output(p->st[s - 1], r->slot_of[c - p->M]) : NULL;
        if (s > 0 && p->link[s - 1]) {
            /* from another device, over the link: after the stage before's
             * F and this slot's last reader (the W of the micro-batch that
             * held it), and this stage's forward after the copy */
            float *buf = rumor_stage_input_buffer(st, slot);
            size_t bytes = (size_t)st->slots[slot].B * st->slots[slot].T *
                           (size_t)st->model->blocks[st->first].in_width * sizeof(float);
            RUMOR_CHECK(rumor_link_copy_ordered(p->link[s - 1], 1, buf, in, bytes,
                                                pipe_ev_done(p, s - 1, r->slot_of[c - p->M]),
                                                pipe_ev_done(p, s, slot), pipe_ev_in(p, s, slot)));
            RUMOR_CHECK(pipe_wait_in(p, s, slot));
            in = buf;
        }
        RUMOR_CHECK(rumor_stage_forward(st, slot, in, 1, r->step, m));
        RUMOR_CHECK(pipe_acted_on(p, s, slot));
        if (s == p->S - 1) /* the losses, read once the step is over */
            RUMOR_CHECK(pipe_loss_queue(p, slot, m));
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
        if (s < p->S - 1 && p->link[s])
            RUMOR_CHECK(pipe_wait_in(p, s, slot));
        const float *dy = s < p->S - 1 ? rumor_stage_output_grad(st, slot) : NULL;
        RUMOR_CHECK(rumor_stage_backward_b(st, slot, dy, r->loss_scale));
        RUMOR_CHECK(pipe_acted_on(p, s, slot));
        if (s > 0) {
            /* send the input gradient into the stage before's slot of this
             * micro-batch (held until its W, which follows its B, which
             * waits for this) */
            rumor_stage_t *up = p->st[s - 1];
            int upslot = r->slot_of[c - p->M];
            size_t bytes = (size_t)st->slots[slot].B * st->slots[slot].T *
                           (size_t)st->model->blocks[st->first].in_width * sizeof(float);
            float *dst = rumor_stage_output_grad(up, upslot);
            if (p->link[s - 1]) {
                /* after this B and the slot's F up there; this slot is
                 * taken again only once the copy has read it */
                rumor_event_t *landed = pipe_ev_in(p, s - 1, upslot);
                RUMOR_CHECK(rumor_link_copy_ordered(p->link[s - 1], 0, dst,
                                                    rumor_stage_input_grad(st, slot), bytes,
                                                    pipe_ev_done(p, s, slot),
                                                    pipe_ev_done(p, s - 1, upslot), landed));
                if (st->dev->kind != RUMOR_DEV_CPU)
                    r->pev[s].read[slot] = landed;
            } else { /* one device, one stream */
                RUMOR_CHECK(up->dev->ops->copy(up->dev, dst, rumor_stage_input_grad(st, slot),
                                               bytes));
            }
        }
        if (a->kind == RUMOR_ACT_BW) {
            RUMOR_CHECK(rumor_stage_backward_w(st, slot));
            RUMOR_CHECK(pipe_acted_on(p, s, slot)); /* a link writing into the slot waits */
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
         * off this stage's stream, after this event */
        RUMOR_CHECK(pipe_acted_on(p, s, slot));
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


/* Stage q's gradient is complete once its own actions are, and those of the
 * stages keeping a copy of a tensor it holds (a GPT head's tied embedding):
 * their parts are added into it then, in stage order. Returns 1 when it
 * is, 0 not yet, < 0 on an error. Worker of q's device. */
static int complete_grads(struct pipeline_worker *w, int q)
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
static int finish_stages(struct pipeline_worker *w, double wait)
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
            RUMOR_CHECK(pipe_bind_stage(p, q, buf, r->host));
        RUMOR_CHECK(rumor_stage_step(st));
        if (buf)
            RUMOR_CHECK(pipe_write_stage(p, q, buf, r->host));
        if (!pipe_copies_async(r->host, st->dev))
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
static int acted(struct pipeline_worker *w, int s)
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
    clock_gettime(CLOCK_MONOTONIC, &until); /* the condition's clock */
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
static int idle_work(struct pipeline_worker *w)
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
static int wait_finishing(struct pipeline_worker *w, const uint8_t *need)
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
static int fill_wait(struct pipeline_worker *w, int i, const uint8_t *need)
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
static int waits_for_copy(const struct pipeline_worker *w)
{
    for (int q = 0; q < w->p->S; q++)
        if (rumor_schedule_device(w->p->sched, q, NULL) == w->d && !w->p->run->finished[q])
            return 1;
    return 0;
}

void pipe_work(struct pipeline_worker *w)
{
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
}

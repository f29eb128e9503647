/* The events that order a step's work between GPU stages and their links
 * (see pipeline_int.h): each stage's stream, not the host, waits for what it
 * reads. A CPU stage has none: its work is done when its call returns, and a
 * link with a CPU end returns when the bytes have landed. */
#include "pipeline.h"

#include <stdlib.h>

#include "pipeline_int.h"

static int gpu(const rumor_stage_t *st) { return st->dev->kind != RUMOR_DEV_CPU; }

/* a new event of d, recorded once: waiting for it before its first real
 * record waits for nothing (the emulation refuses an event never recorded) */
static int fresh(rumor_device_t *d, rumor_event_t **e)
{
    RUMOR_CHECK(d->ops->event_create(d, e));
    return d->ops->event_record(d, *e, NULL);
}

int pipe_events_make(rumor_pipeline_t *p)
{
    struct pipeline_run *r = p->run;
    if (!r->pev && !(r->pev = calloc((size_t)p->S, sizeof *r->pev)))
        return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
    for (int s = 0; s < p->S; s++) {
        rumor_stage_t *st = p->st[s];
        struct pipeline_events *e = &r->pev[s];
        if (!gpu(st) || e->n >= st->nslots)
            continue;
        int n = st->nslots;
        rumor_event_t **done = realloc(e->done, (size_t)n * sizeof *done);
        if (done)
            e->done = done;
        rumor_event_t **in = realloc(e->in, (size_t)n * sizeof *in);
        if (in)
            e->in = in;
        rumor_event_t **read = realloc(e->read, (size_t)n * sizeof *read);
        if (read)
            e->read = read;
        if (!done || !in || !read)
            return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
        for (; e->n < n; e->n++) {
            e->done[e->n] = e->in[e->n] = e->read[e->n] = NULL;
            RUMOR_CHECK(fresh(st->dev, &e->done[e->n]));
            RUMOR_CHECK(fresh(st->dev, &e->in[e->n]));
        }
    }
    rumor_stage_t *last = p->st[p->S - 1];
    if (!r->loss_host) {
        size_t rows = (size_t)((p->cfg.max_B + p->M - 1) / p->M) * (size_t)p->cfg.T;
        r->loss_stride = rows;
        r->loss_rows = calloc((size_t)p->M, sizeof *r->loss_rows);
        r->loss_host = last->dev->ops->host_alloc(last->dev, (size_t)p->M * rows * sizeof(float));
        if (!r->loss_rows || !r->loss_host)
            return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory for the losses");
        if (gpu(last))
            RUMOR_CHECK(fresh(last->dev, &r->loss_ev));
    }
    return 0;
}

void pipe_events_free(rumor_pipeline_t *p)
{
    struct pipeline_run *r = p->run;
    if (!r)
        return;
    for (int s = 0; r->pev && s < p->S; s++) {
        struct pipeline_events *e = &r->pev[s];
        rumor_device_t *d = p->st[s]->dev;
        for (int k = 0; k < e->n; k++) {
            d->ops->event_destroy(d, e->done[k]);
            d->ops->event_destroy(d, e->in[k]);
        }
        free(e->done);
        free(e->in);
        free(e->read);
    }
    free(r->pev);
    r->pev = NULL;
    rumor_stage_t *last = p->st ? p->st[p->S - 1] : NULL;
    if (last && r->loss_ev) /* no download may still land in the losses' buffer */
        RUMOR_IGNORE(last->dev->ops->event_sync(last->dev, r->loss_ev));
    if (last && r->loss_host)
        last->dev->ops->host_free(last->dev, r->loss_host);
    if (last && r->loss_ev)
        last->dev->ops->event_destroy(last->dev, r->loss_ev);
    r->loss_host = NULL;
    r->loss_ev = NULL;
    free(r->loss_rows);
}

rumor_event_t *pipe_ev_done(const rumor_pipeline_t *p, int s, int k)
{
    return gpu(p->st[s]) ? p->run->pev[s].done[k] : NULL;
}

rumor_event_t *pipe_ev_in(const rumor_pipeline_t *p, int s, int k)
{
    return gpu(p->st[s]) ? p->run->pev[s].in[k] : NULL;
}

int pipe_acted_on(rumor_pipeline_t *p, int s, int k)
{
    rumor_stage_t *st = p->st[s];
    if (!gpu(st))
        return 0;
    RUMOR_CHECK(st->dev->ops->event_record(st->dev, p->run->pev[s].done[k], NULL));
    return p->run->timed ? st->dev->ops->event_sync(st->dev, p->run->pev[s].done[k]) : 0;
}

int pipe_wait_in(rumor_pipeline_t *p, int s, int k)
{
    rumor_stage_t *st = p->st[s];
    return gpu(st) ? st->dev->ops->stream_wait(st->dev, NULL, p->run->pev[s].in[k]) : 0;
}

int pipe_take_slot(rumor_pipeline_t *p, int s, int k)
{
    rumor_stage_t *st = p->st[s];
    if (!gpu(st))
        return 0;
    struct pipeline_events *e = &p->run->pev[s];
    rumor_event_t *read = e->read[k];
    e->read[k] = NULL;
    if (!read) /* nothing of another device read it, or its copy was waited for */
        return 0;
    return st->dev->ops->stream_wait(st->dev, NULL, read);
}

int pipe_loss_queue(rumor_pipeline_t *p, int slot, int m)
{
    struct pipeline_run *r = p->run;
    rumor_stage_t *st = p->st[p->S - 1];
    rumor_device_t *d = st->dev;
    size_t rows = (size_t)st->slots[slot].B * (size_t)st->slots[slot].T;
    if (rows > r->loss_stride)
        return rumor_err_set(RUMOR_ESTATE, "pipeline: %zu rows of losses in a micro-batch of "
                             "at most %zu", rows, r->loss_stride);
    r->loss_rows[m] = (int)rows;
    RUMOR_CHECK(d->ops->download_async(d, r->loss_host + (size_t)m * r->loss_stride,
                                       rumor_stage_output(st, slot), rows * sizeof(float), NULL));
    return r->loss_ev ? d->ops->event_record(d, r->loss_ev, NULL) : 0;
}

int pipe_loss_read(rumor_pipeline_t *p)
{
    struct pipeline_run *r = p->run;
    rumor_device_t *d = p->st[p->S - 1]->dev;
    if (r->loss_ev)
        RUMOR_CHECK(d->ops->event_sync(d, r->loss_ev));
    for (int m = 0; m < p->M; m++) {
        const float *h = r->loss_host + (size_t)m * r->loss_stride;
        double t = 0.0; /* in row order, as rumor_stage_loss sums */
        for (int i = 0; i < r->loss_rows[m]; i++)
            t += h[i];
        r->loss[m] = t;
    }
    /* a GPU stage's kept failure (a launch refused) is this step's, where
     * its work is done by now: without waiting, the queries report it */
    for (int s = 0; s < p->S; s++) {
        rumor_stage_t *st = p->st[s];
        if (gpu(st) && r->pev[s].n > 0)
            RUMOR_CHECK(st->dev->ops->event_query(st->dev, r->pev[s].done[0]));
    }
    return 0;
}

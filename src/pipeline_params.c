/* A pipeline's parameters, gradients and optimizer state against a
 * whole-model buffer: stages bound in place where they share its memory,
 * copied in and back otherwise (a GPU stage of a host buffer: its copy back
 * on a stream of its own, after its step). See pipeline.h. */
#include "pipeline.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_int.h"

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

void pipe_pio_free(rumor_pipeline_t *p)
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
int pipe_copies_async(const rumor_device_t *host, const rumor_device_t *d)
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
int pipe_bind_stage(rumor_pipeline_t *p, int s, float *params, rumor_device_t *dev)
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
    if (pipe_copies_async(dev, d)) {
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
int pipe_write_stage(rumor_pipeline_t *p, int s, float *params, rumor_device_t *dev)
{
    rumor_stage_t *st = p->st[s];
    if (st->params == params + st->lo)
        return 0;
    rumor_device_t *d = st->dev;
    size_t bytes = st->n * sizeof(float);
    if (!pipe_copies_async(dev, d))
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
        int rc = pipe_bind_stage(p, s, params, dev);
        RUMOR_CHECK(rc);
        all &= rc;
    }
    return all;
}

int rumor_pipeline_write_params(rumor_pipeline_t *p, float *params, rumor_device_t *dev)
{
    for (int s = 0; s < p->S; s++)
        RUMOR_CHECK(pipe_write_stage(p, s, params, dev));
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

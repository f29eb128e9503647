/* Stages (see stage.h). */
#include "stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rng.h"

/* A throttled device (ops.h: slowdown) sleeps slowdown - 1 times what the
 * call since t0 computed. */
static void throttle(const rumor_stage_t *s, double t0)
{
    if (s->dev->slowdown > 1.0)
        rumor_sleep((s->dev->slowdown - 1.0) * (rumor_now() - t0));
}

static int in_width(const rumor_stage_t *s) { return s->model->blocks[s->first].in_width; }

static int out_width(const rumor_stage_t *s) { return s->model->blocks[s->last - 1].out_width; }

static void slot_free(rumor_stage_t *s, rumor_stage_slot_t *sl)
{
    const rumor_ops_t *ops = s->dev->ops;
    if (sl->loaded) { /* the last upload from the copies is done first */
        RUMOR_IGNORE(ops->event_sync(s->dev, sl->loaded));
        ops->event_destroy(s->dev, sl->loaded);
    }
    if (sl->host_in)
        ops->host_free(s->dev, sl->host_in);
    if (sl->host_targets)
        ops->host_free(s->dev, sl->host_targets);
    rumor_arena_free(&sl->arena);
    free(sl->out);
    free(sl->dout);
    free(sl->saved);
}

/* Carves one slot's buffers for up to max_B x T rows. */
static int slot_init(rumor_stage_t *s, rumor_stage_slot_t *sl)
{
    const rumor_model_t *m = s->model;
    size_t rows = (size_t)s->max_B * (size_t)s->T;
    int nb = s->last - s->first;
    size_t bytes = rumor_model_act_bytes(m, s->first, s->last, s->max_B, s->T);
    size_t iw = (size_t)in_width(s);
    bytes += 2 * rows * iw * sizeof(float) + 2 * rows * sizeof(int32_t) + 4 * 64;
    sl->out = calloc((size_t)nb, sizeof *sl->out);
    sl->dout = calloc((size_t)nb, sizeof *sl->dout);
    sl->saved = calloc((size_t)nb, sizeof *sl->saved);
    if (!sl->out || !sl->dout || !sl->saved)
        return rumor_err_set(RUMOR_ENOMEM, "stage: out of memory");
    RUMOR_CHECK(rumor_arena_init(&sl->arena, s->dev, bytes));
    rumor_arena_t *a = &sl->arena;
    if (s->dev->kind != RUMOR_DEV_CPU && s->dev->ops->supports(s->dev, RUMOR_CAP_PINNED) &&
        s->dev->ops->supports(s->dev, RUMOR_CAP_ASYNC_COPY)) {
        /* the batch's rows go up asynchronously from copies of their own */
        size_t in_bytes = m->input == RUMOR_BATCH_TOKENS ? rows * sizeof(int32_t)
                                                         : rows * iw * sizeof(float);
        RUMOR_CHECK(s->dev->ops->event_create(s->dev, &sl->loaded));
        /* recorded once, so that it may be waited for before the first load */
        RUMOR_CHECK(s->dev->ops->event_record(s->dev, sl->loaded, NULL));
        if (s->is_first && !(sl->host_in = s->dev->ops->host_alloc(s->dev, in_bytes)))
            return rumor_err_trace_add(__FILE__, __LINE__, RUMOR_ENOMEM);
        if (s->is_last &&
            !(sl->host_targets = s->dev->ops->host_alloc(s->dev, rows * sizeof(int32_t))))
            return rumor_err_trace_add(__FILE__, __LINE__, RUMOR_ENOMEM);
    }
    if (iw) {
        sl->in = rumor_arena_take(a, rows * iw * sizeof(float));
        if (!s->is_first)
            sl->din = rumor_arena_take(a, rows * iw * sizeof(float));
    }
    if (m->input == RUMOR_BATCH_TOKENS && s->is_first)
        sl->tok = rumor_arena_take(a, rows * sizeof(int32_t));
    if (s->is_last)
        sl->targets = rumor_arena_take(a, rows * sizeof(int32_t));
    for (int i = 0; i < nb; i++) {
        const rumor_block_t *k = &m->blocks[s->first + i];
        size_t ob = rows * (size_t)k->out_width * sizeof(float);
        sl->out[i] = rumor_arena_take(a, ob);
        sl->dout[i] = rumor_arena_take(a, ob);
        sl->saved[i] = rumor_arena_take(a, k->type->saved_bytes(k, s->max_B, s->T));
        if (!sl->out[i] || !sl->dout[i] || !sl->saved[i])
            return rumor_err_trace_add(__FILE__, __LINE__, RUMOR_ENOMEM);
    }
    return 0;
}

static int stage_alloc(rumor_stage_t *s, int with_params)
{
    const rumor_ops_t *ops = s->dev->ops;
    if (with_params) {
        s->params = ops->alloc(s->dev, s->n * sizeof(float));
        s->owns_params = 1;
        if (!s->params)
            return rumor_err_trace_add(__FILE__, __LINE__, RUMOR_ENOMEM);
    }
    s->grads = ops->alloc(s->dev, s->n * sizeof(float));
    s->owns_grads = 1;
    s->slots = calloc((size_t)s->nslots, sizeof *s->slots);
    if (!s->grads || !s->slots)
        return rumor_err_set(RUMOR_ENOMEM, "stage: cannot allocate %zu parameters' gradients",
                             s->n);
    for (int i = 0; i < s->nslots; i++)
        RUMOR_CHECK(slot_init(s, &s->slots[i]));
    return 0;
}

int rumor_stage_create(const rumor_stage_config_t *cfg, rumor_stage_t **out)
{
    *out = NULL;
    const rumor_model_t *m = cfg->model;
    if (cfg->first < 0 || cfg->last > m->nblocks || cfg->first >= cfg->last)
        return rumor_err_set(RUMOR_EINVAL, "stage: blocks [%d, %d) outside the model's [0, %d)",
                             cfg->first, cfg->last, m->nblocks);
    if (cfg->max_B < 1 || cfg->max_B > (1 << 20) || cfg->T < 1 || cfg->slots < 1 ||
        cfg->slots > 1024)
        return rumor_err_set(RUMOR_EINVAL,
                             "stage: batch %d, rows per example %d or %d micro-batches in flight "
                             "out of range",
                             cfg->max_B, cfg->T, cfg->slots);
    if (m->kind == RUMOR_MODEL_GPT && cfg->T > m->ctx)
        return rumor_err_set(RUMOR_EINVAL, "stage: window %d longer than the model's context %d",
                             cfg->T, m->ctx);
    /* a shared tensor outside the stage's range: kept as a copy */
    size_t tied_lo = SIZE_MAX, tied_n = 0;
    for (int i = cfg->first; i < cfg->last; i++) {
        const rumor_block_t *k = &m->blocks[i];
        size_t t = k->tied_off;
        if (t != SIZE_MAX && (t < m->blocks[cfg->first].lo || t >= m->blocks[cfg->last - 1].hi)) {
            if (tied_n)
                return rumor_err_set(RUMOR_ENOTSUP, "stage: blocks %d-%d share two tensors with "
                                     "other stages", cfg->first, cfg->last - 1);
            tied_lo = t;
            tied_n = (size_t)k->V * (size_t)k->C;
        }
    }
    rumor_stage_t *s = calloc(1, sizeof *s);
    if (!s)
        return rumor_err_set(RUMOR_ENOMEM, "stage: out of memory");
    s->tied_lo = tied_lo;
    s->tied_n = tied_n;
    s->model = m;
    s->dev = cfg->dev;
    s->first = cfg->first;
    s->last = cfg->last;
    s->lo = m->blocks[cfg->first].lo;
    s->hi = m->blocks[cfg->last - 1].hi;
    s->n = s->hi - s->lo;
    s->max_B = cfg->max_B;
    s->T = cfg->T;
    s->nslots = cfg->slots;
    s->seed = cfg->seed;
    s->noise = cfg->stream ? rumor_mix64(cfg->seed ^ rumor_mix64(cfg->stream)) : cfg->seed;
    s->is_first = cfg->first == 0;
    s->is_last = cfg->last == m->nblocks;
    int rc = stage_alloc(s, 1);
    if (rc == 0 && tied_n) {
        s->tied = s->dev->ops->alloc(s->dev, tied_n * sizeof(float));
        s->tied_grad = s->dev->ops->alloc(s->dev, tied_n * sizeof(float));
        if (!s->tied || !s->tied_grad)
            rc = rumor_err_set(RUMOR_ENOMEM, "stage: cannot allocate the shared tensor's copy "
                               "(%zu floats)", tied_n);
    }
    if (rc == 0) {
        float *host = malloc((m->nparams ? m->nparams : 1) * sizeof(float));
        if (!host)
            rc = rumor_err_set(RUMOR_ENOMEM, "stage: out of memory");
        else {
            rc = rumor_model_init_host(m, cfg->seed, host);
            if (rc == 0)
                rc = s->dev->ops->upload(s->dev, s->params, host + s->lo, s->n * sizeof(float));
            if (rc == 0 && tied_n)
                rc = s->dev->ops->upload(s->dev, s->tied, host + tied_lo, tied_n * sizeof(float));
            free(host);
        }
    }
    if (rc == 0 && cfg->optim)
        rc = rumor_optim_create(s->dev, cfg->optim, s->n, &s->opt);
    if (rc < 0) {
        rumor_stage_destroy(&s);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    *out = s;
    return 0;
}

int rumor_stage_create_replica(const rumor_stage_t *src, rumor_device_t *dev, int max_B,
                               rumor_stage_t **out)
{
    *out = NULL;
    if (dev->kind != RUMOR_DEV_CPU || src->dev->kind != RUMOR_DEV_CPU)
        return rumor_err_set(RUMOR_ENOTSUP, "stage: replicas share host memory (CPU only)");
    if (src->tied)
        return rumor_err_set(RUMOR_ENOTSUP, "stage: no replicas of a stage that keeps a copy "
                             "of another stage's tensor");
    rumor_stage_t *s = calloc(1, sizeof *s);
    if (!s)
        return rumor_err_set(RUMOR_ENOMEM, "stage: out of memory");
    *s = *src;
    s->dev = dev;
    s->max_B = max_B;
    s->nslots = 1;
    s->owns_params = 0;
    s->opt = NULL;
    s->grads = NULL;
    s->slots = NULL;
    int rc = stage_alloc(s, 0);
    if (rc < 0) {
        rumor_stage_destroy(&s);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    *out = s;
    return 0;
}

void rumor_stage_destroy(rumor_stage_t **sp)
{
    if (!sp || !*sp)
        return;
    rumor_stage_t *s = *sp;
    const rumor_ops_t *ops = s->dev->ops;
    if (s->slots)
        for (int i = 0; i < s->nslots; i++)
            slot_free(s, &s->slots[i]);
    free(s->slots);
    if (s->owns_params)
        ops->free(s->dev, s->params);
    if (s->owns_grads)
        ops->free(s->dev, s->grads);
    if (s->tied)
        ops->free(s->dev, s->tied);
    if (s->tied_grad)
        ops->free(s->dev, s->tied_grad);
    rumor_optim_destroy(&s->opt);
    free(s);
    *sp = NULL;
}

int rumor_stage_grow_slots(rumor_stage_t *s, int nslots)
{
    if (nslots <= s->nslots)
        return 0;
    if (nslots > 1024)
        return rumor_err_set(RUMOR_EINVAL, "stage: %d micro-batch slots (at most 1024)", nslots);
    rumor_stage_slot_t *sl = realloc(s->slots, (size_t)nslots * sizeof *sl);
    if (!sl)
        return rumor_err_set(RUMOR_ENOMEM, "stage: out of memory");
    memset(sl + s->nslots, 0, (size_t)(nslots - s->nslots) * sizeof *sl);
    s->slots = sl;
    while (s->nslots < nslots) {
        int rc = slot_init(s, &s->slots[s->nslots]);
        s->nslots++; /* freed by destroy even when half made */
        RUMOR_CHECK(rc);
    }
    return 0;
}

void rumor_stage_bind_params(rumor_stage_t *s, float *params)
{
    if (s->owns_params && s->params != params)
        s->dev->ops->free(s->dev, s->params);
    s->owns_params = 0;
    s->params = params;
}

void rumor_stage_bind_grads(rumor_stage_t *s, float *grads)
{
    if (s->owns_grads && s->grads != grads)
        s->dev->ops->free(s->dev, s->grads);
    s->owns_grads = 0;
    s->grads = grads;
}

static int check_slot(const rumor_stage_t *s, int slot)
{
    if (slot < 0 || slot >= s->nslots)
        return rumor_err_set(RUMOR_EINVAL, "stage: micro-batch slot %d outside [0, %d)", slot,
                             s->nslots);
    return 0;
}

/* bytes of host memory src to dst of the slot's device memory: on a GPU
 * through the slot's page-locked copy `pinned` (queued on the device's
 * stream once the last upload from it is done: a step waits for nothing),
 * else at once */
static int load_rows(rumor_stage_t *s, rumor_stage_slot_t *sl, void *dst, void *pinned,
                     const void *src, size_t bytes)
{
    rumor_device_t *d = s->dev;
    if (!pinned)
        return d->ops->upload(d, dst, src, bytes);
    RUMOR_CHECK(d->ops->event_sync(d, sl->loaded));
    memcpy(pinned, src, bytes);
    return d->ops->upload_async(d, dst, pinned, bytes, NULL);
}

int rumor_stage_load(rumor_stage_t *s, int slot, const rumor_batch_t *b, int row0, int n)
{
    RUMOR_CHECK(check_slot(s, slot));
    const rumor_model_t *m = s->model;
    rumor_device_t *d = s->dev;
    rumor_stage_slot_t *sl = &s->slots[slot];
    if (b->kind != m->input)
        return rumor_err_set(RUMOR_EINVAL, "stage: a batch of %s for a model of %s",
                             b->kind == RUMOR_BATCH_TOKENS ? "tokens" : "images",
                             m->input == RUMOR_BATCH_TOKENS ? "tokens" : "images");
    if (row0 < 0 || n < 1 || row0 + n > b->n || n > s->max_B)
        return rumor_err_set(RUMOR_EINVAL, "stage: rows [%d, %d) of a batch of %d (at most %d)",
                             row0, row0 + n, b->n, s->max_B);
    int T = b->kind == RUMOR_BATCH_TOKENS ? b->width : 1;
    if (b->kind == RUMOR_BATCH_TOKENS && (T < 1 || T > s->T))
        return rumor_err_set(RUMOR_EINVAL, "stage: window %d outside [1, %d]", T, s->T);
    if (b->kind == RUMOR_BATCH_IMAGES && b->width != m->in_dim)
        return rumor_err_set(RUMOR_EINVAL, "stage: %d features per example, the model takes %d",
                             b->width, m->in_dim);
    size_t rows = (size_t)n * (size_t)T, r0 = (size_t)row0 * (size_t)T;
    int V = m->kind == RUMOR_MODEL_GPT ? m->vocab : m->classes;
    if (s->is_first) {
        if (b->kind == RUMOR_BATCH_TOKENS) {
            for (size_t i = 0; i < rows; i++)
                if (b->tok[r0 + i] < 0 || b->tok[r0 + i] >= V)
                    return rumor_err_set(RUMOR_EINVAL,
                                         "stage: token %d at row %zu out of the vocabulary [0, %d)",
                                         (int)b->tok[r0 + i], r0 + i, V);
            RUMOR_CHECK(load_rows(s, sl, sl->tok, sl->host_in, b->tok + r0,
                                  rows * sizeof(int32_t)));
        } else {
            RUMOR_CHECK(load_rows(s, sl, sl->in, sl->host_in, b->x + r0 * (size_t)b->width,
                                  rows * (size_t)b->width * sizeof(float)));
        }
    }
    if (s->is_last) {
        for (size_t i = 0; i < rows; i++)
            if (b->y[r0 + i] < 0 || b->y[r0 + i] >= V)
                return rumor_err_set(RUMOR_EINVAL, "stage: %s %d at row %zu out of range [0, %d)",
                                     b->kind == RUMOR_BATCH_TOKENS ? "target" : "label",
                                     (int)b->y[r0 + i], r0 + i, V);
        RUMOR_CHECK(load_rows(s, sl, sl->targets, sl->host_targets, b->y + r0,
                              rows * sizeof(int32_t)));
    }
    if (sl->loaded) /* the copies are free again once this is done */
        RUMOR_CHECK(d->ops->event_record(d, sl->loaded, NULL));
    sl->B = n;
    sl->T = T;
    return 0;
}

static void make_call(const rumor_stage_t *s, const rumor_stage_slot_t *sl, int block,
                      rumor_call_t *c)
{
    memset(c, 0, sizeof *c);
    c->dev = s->dev;
    c->B = sl->B;
    c->T = sl->T;
    c->training = sl->training;
    c->key = rumor_rng_key(s->noise, (uint64_t)sl->step, (uint64_t)sl->micro, (uint64_t)block, 0);
    c->params = s->params;
    c->grads = s->grads;
    c->base = s->lo;
    c->tok = sl->tok;
    c->targets = sl->targets;
    c->loss_scale = sl->loss_scale;
    c->tied = s->tied;
    c->tied_grad = s->tied_grad;
}

static const float *block_input(const rumor_stage_slot_t *sl, int i)
{
    return i == 0 ? sl->in : sl->out[i - 1];
}

static int stage_forward(rumor_stage_t *s, int slot, const float *in, int training, long step,
                         int micro)
{
    RUMOR_CHECK(check_slot(s, slot));
    rumor_stage_slot_t *sl = &s->slots[slot];
    if (sl->B < 1)
        return rumor_err_set(RUMOR_ESTATE, "stage: forward of slot %d before a load", slot);
    sl->training = training;
    sl->step = step;
    sl->micro = micro;
    if (!s->is_first) {
        if (!in)
            return rumor_err_set(RUMOR_EINVAL, "stage: blocks from %d need an input",
                                 s->first);
        RUMOR_CHECK(s->dev->ops->copy(s->dev, sl->in, in,
                                      (size_t)sl->B * sl->T * in_width(s) * sizeof(float)));
    }
    for (int i = 0; i < s->last - s->first; i++) {
        const rumor_block_t *k = &s->model->blocks[s->first + i];
        rumor_call_t c;
        make_call(s, sl, s->first + i, &c);
        RUMOR_CHECK(k->type->forward(k, &c, block_input(sl, i), sl->out[i], sl->saved[i]));
    }
    return 0;
}

int rumor_stage_forward(rumor_stage_t *s, int slot, const float *in, int training, long step,
                        int micro)
{
    double t0 = s->dev->slowdown > 1.0 ? rumor_now() : 0.0; /* throttled only */
    int rc = stage_forward(s, slot, in, training, step, micro);
    throttle(s, t0);
    return rc;
}

const float *rumor_stage_output(const rumor_stage_t *s, int slot)
{
    return s->slots[slot].out[s->last - s->first - 1];
}

static int stage_backward_b(rumor_stage_t *s, int slot, const float *dy, float loss_scale)
{
    RUMOR_CHECK(check_slot(s, slot));
    rumor_stage_slot_t *sl = &s->slots[slot];
    int nb = s->last - s->first;
    sl->loss_scale = loss_scale;
    if (!s->is_last) {
        if (!dy)
            return rumor_err_set(RUMOR_EINVAL, "stage: blocks to %d need an output gradient",
                                 s->last);
        if (dy != sl->dout[nb - 1]) /* not already sent into place */
            RUMOR_CHECK(s->dev->ops->copy(s->dev, sl->dout[nb - 1], dy,
                                          (size_t)sl->B * sl->T * out_width(s) * sizeof(float)));
    }
    for (int i = nb - 1; i >= 0; i--) {
        const rumor_block_t *k = &s->model->blocks[s->first + i];
        rumor_call_t c;
        make_call(s, sl, s->first + i, &c);
        float *dx = i > 0 ? sl->dout[i - 1] : sl->din;
        RUMOR_CHECK(k->type->backward_b(k, &c, block_input(sl, i), sl->dout[i], dx, sl->saved[i]));
    }
    return 0;
}

int rumor_stage_backward_b(rumor_stage_t *s, int slot, const float *dy, float loss_scale)
{
    double t0 = s->dev->slowdown > 1.0 ? rumor_now() : 0.0; /* throttled only */
    int rc = stage_backward_b(s, slot, dy, loss_scale);
    throttle(s, t0);
    return rc;
}

const float *rumor_stage_input_grad(const rumor_stage_t *s, int slot) { return s->slots[slot].din; }

float *rumor_stage_output_grad(rumor_stage_t *s, int slot)
{
    return s->slots[slot].dout[s->last - s->first - 1];
}

size_t rumor_stage_slot_bytes(const rumor_stage_t *s) { return s->slots[0].arena.size; }

static int stage_backward_w(rumor_stage_t *s, int slot)
{
    RUMOR_CHECK(check_slot(s, slot));
    rumor_stage_slot_t *sl = &s->slots[slot];
    for (int i = s->last - s->first - 1; i >= 0; i--) {
        const rumor_block_t *k = &s->model->blocks[s->first + i];
        if (!k->type->backward_w)
            continue;
        rumor_call_t c;
        make_call(s, sl, s->first + i, &c);
        RUMOR_CHECK(k->type->backward_w(k, &c, block_input(sl, i), sl->dout[i], sl->saved[i]));
    }
    return 0;
}

int rumor_stage_backward_w(rumor_stage_t *s, int slot)
{
    double t0 = s->dev->slowdown > 1.0 ? rumor_now() : 0.0; /* throttled only */
    int rc = stage_backward_w(s, slot);
    throttle(s, t0);
    return rc;
}

int rumor_stage_zero_grad(rumor_stage_t *s)
{
    s->dev->ops->fill(s->dev, s->grads, 0.0f, s->n);
    if (s->tied_grad)
        s->dev->ops->fill(s->dev, s->tied_grad, 0.0f, s->tied_n);
    return 0;
}

int rumor_stage_sync_tied(rumor_stage_t *s, const float *src, rumor_device_t *src_dev)
{
    if (!s->tied)
        return 0;
    if (src_dev == s->dev)
        return s->dev->ops->copy(s->dev, s->tied, src, s->tied_n * sizeof(float));
    return rumor_device_copy(s->dev, s->tied, src_dev, src, s->tied_n * sizeof(float));
}

float *rumor_stage_input_buffer(rumor_stage_t *s, int slot) { return s->slots[slot].in; }

size_t rumor_stage_device_bytes(const rumor_stage_t *s)
{
    size_t b = 0;
    if (s->owns_params)
        b += s->n * sizeof(float);
    if (s->owns_grads)
        b += s->n * sizeof(float);
    if (s->opt)
        b += ((s->opt->m ? s->opt->n : 0) + (s->opt->v ? s->opt->n : 0)) * sizeof(float);
    if (s->tied)
        b += 2 * s->tied_n * sizeof(float);
    for (int i = 0; i < s->nslots; i++)
        b += s->slots[i].arena.size;
    return b;
}

const float *rumor_stage_logits(const rumor_stage_t *s, int slot)
{
    const rumor_block_t *h = &s->model->blocks[s->last - 1];
    rumor_call_t c;
    if (!s->is_last || !h->type->logits)
        return NULL;
    const rumor_stage_slot_t *sl = &s->slots[slot];
    int i = s->last - s->first - 1;
    make_call(s, sl, s->last - 1, &c);
    return h->type->logits(h, &c, block_input(sl, i), sl->saved[i]);
}

int rumor_stage_loss(rumor_stage_t *s, int slot, double *sum, long *correct)
{
    RUMOR_CHECK(check_slot(s, slot));
    if (!s->is_last)
        return rumor_err_set(RUMOR_ESTATE, "stage: losses live on the last stage");
    rumor_stage_slot_t *sl = &s->slots[slot];
    rumor_device_t *d = s->dev;
    size_t rows = (size_t)sl->B * sl->T;
    float *h = malloc(rows * sizeof(float));
    if (!h)
        return rumor_err_set(RUMOR_ENOMEM, "stage: out of memory");
    int rc = d->ops->download(d, h, rumor_stage_output(s, slot), rows * sizeof(float));
    double t = 0.0;
    for (size_t i = 0; rc == 0 && i < rows; i++)
        t += h[i];
    free(h);
    RUMOR_CHECK(rc);
    *sum = t;
    if (correct && sl->training)
        return rumor_err_set(RUMOR_ESTATE, "stage: accuracy needs an eval forward (a training "
                                           "forward leaves the gradient over the logits)");
    if (correct) {
        const rumor_block_t *k = &s->model->blocks[s->last - 1];
        int V = k->V;
        float *p = malloc(rows * (size_t)V * sizeof(float));
        int32_t *y = malloc(rows * sizeof(int32_t));
        if (!p || !y)
            rc = rumor_err_set(RUMOR_ENOMEM, "stage: out of memory");
        if (rc == 0)
            rc = d->ops->download(d, p, rumor_stage_logits(s, slot), rows * (size_t)V * sizeof(float));
        if (rc == 0)
            rc = d->ops->download(d, y, sl->targets, rows * sizeof(int32_t));
        long ok = 0;
        for (size_t r = 0; rc == 0 && r < rows; r++) {
            const float *pr = p + r * (size_t)V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (pr[v] > pr[best])
                    best = v;
            ok += best == y[r];
        }
        free(p);
        free(y);
        RUMOR_CHECK(rc);
        *correct = ok;
    }
    return 0;
}

int rumor_stage_step(rumor_stage_t *s)
{
    if (!s->opt)
        return rumor_err_set(RUMOR_ESTATE, "stage: no optimizer");
    return rumor_optim_step(s->opt, s->params, s->grads);
}

int rumor_stage_get_params(const rumor_stage_t *s, float *host)
{
    return s->dev->ops->download(s->dev, host, s->params, s->n * sizeof(float));
}

int rumor_stage_set_params(rumor_stage_t *s, const float *host)
{
    return s->dev->ops->upload(s->dev, s->params, host, s->n * sizeof(float));
}

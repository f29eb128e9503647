/* The blocks of classifiers: dense layers and the softmax cross-entropy head
 * (see block.h). */
#include <string.h>

#include "block.h"

/* ---------------------------------------------------------------- dense */

/* saved: z (rows,out) the pre-activation when there is an activation;
 *        dz (rows,out) its gradient, kept from B for W when it differs from dy */
static int dense_keeps_z(const rumor_block_t *b) { return b->act != 0; }
static int dense_keeps_dz(const rumor_block_t *b) { return b->act != 0 || b->dropout > 0.0f; }

static size_t dense_saved_bytes(const rumor_block_t *b, int B, int T)
{
    size_t one = rumor_align64((size_t)B * (size_t)T * (size_t)b->out_width * sizeof(float));
    return (dense_keeps_z(b) ? one : 0) + (dense_keeps_dz(b) ? one : 0);
}

static void dense_views(const rumor_block_t *b, const rumor_call_t *c, void *saved, float **z,
                        float **dz)
{
    size_t one = rumor_align64((size_t)c->B * (size_t)c->T * (size_t)b->out_width * sizeof(float));
    char *p = saved;
    *z = NULL;
    *dz = NULL;
    if (dense_keeps_z(b)) {
        *z = (float *)p;
        p += one;
    }
    if (dense_keeps_dz(b))
        *dz = (float *)p;
}

static int dense_forward(const rumor_block_t *b, const rumor_call_t *c, const float *x, float *y,
                         void *saved)
{
    rumor_device_t *d = c->dev;
    const rumor_ops_t *ops = d->ops;
    int rows = c->B * c->T;
    size_t n = (size_t)rows * (size_t)b->out_width;
    float *z, *dz;
    dense_views(b, c, saved, &z, &dz);
    float *lin = z ? z : y;
    /* lin (rows,O) = x (rows,I) W^T (I,O) + b */
    ops->gemm(d, 0, 1, rows, b->out_width, b->in_width, 1.0f, x, b->in_width,
              rumor_call_param(c, b->w_off), b->in_width, 0.0f, lin, b->out_width);
    ops->add_bias(d, lin, rumor_call_param(c, b->b_off), rows, b->out_width);
    if (b->act == 1)
        ops->relu_forward(d, y, z, n);
    else if (b->act == 2)
        ops->gelu_forward(d, y, z, n);
    if (b->dropout > 0.0f && c->training)
        ops->dropout_forward(d, y, y, n, b->dropout, c->key);
    return 0;
}

static int dense_backward_b(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                            const float *dy, float *dx, void *saved)
{
    (void)x;
    rumor_device_t *d = c->dev;
    const rumor_ops_t *ops = d->ops;
    int rows = c->B * c->T;
    size_t n = (size_t)rows * (size_t)b->out_width;
    float *z, *dz;
    dense_views(b, c, saved, &z, &dz);
    const float *g = dy;
    if (dz) {
        if (b->dropout > 0.0f && c->training)
            ops->dropout_backward(d, dz, dy, n, b->dropout, c->key);
        else
            ops->copy(d, dz, dy, n * sizeof(float));
        if (b->act == 1)
            ops->relu_backward(d, dz, z, dz, n);
        else if (b->act == 2)
            ops->gelu_backward(d, dz, z, dz, n);
        g = dz;
    }
    if (dx) /* dx (rows,I) = g (rows,O) W (O,I) */
        ops->gemm(d, 0, 0, rows, b->in_width, b->out_width, 1.0f, g, b->out_width,
                  rumor_call_param(c, b->w_off), b->in_width, 0.0f, dx, b->in_width);
    return 0;
}

static int dense_backward_w(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                            const float *dy, void *saved)
{
    rumor_device_t *d = c->dev;
    const rumor_ops_t *ops = d->ops;
    int rows = c->B * c->T;
    float *z, *dz;
    dense_views(b, c, saved, &z, &dz);
    const float *g = dz ? dz : dy;
    /* dW (O,I) += g^T (O,rows) x (rows,I); db (O) += sum over rows of g */
    ops->gemm(d, 1, 0, b->out_width, b->in_width, rows, 1.0f, g, b->out_width, x, b->in_width,
              1.0f, rumor_call_grad(c, b->w_off), b->in_width);
    ops->sum_rows(d, rumor_call_grad(c, b->b_off), g, rows, b->out_width, 1.0f);
    return 0;
}

const rumor_block_type_t rumor_block_dense = {
    .name = "dense",
    .saved_bytes = dense_saved_bytes,
    .forward = dense_forward,
    .backward_b = dense_backward_b,
    .backward_w = dense_backward_w,
};

/* ----------------------------------------------------------------- xent */

/* saved: nothing (x holds the logits). y (rows): each row's loss. */
static size_t xent_saved_bytes(const rumor_block_t *b, int B, int T)
{
    (void)b;
    (void)B;
    (void)T;
    return 0;
}

static int xent_forward(const rumor_block_t *b, const rumor_call_t *c, const float *x, float *y,
                        void *saved)
{
    (void)saved;
    /* grad 0: the op writes no logit, x stays the previous block's output */
    c->dev->ops->softmax_xent(c->dev, (float *)x, y, c->targets, c->B * c->T, b->V, 1.0f, 0);
    return 0;
}

/* dx = loss_scale * (softmax(x) - onehot(targets)), over a copy of x */
static int xent_backward_b(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                           const float *dy, float *dx, void *saved)
{
    (void)dy;
    (void)saved;
    if (!dx)
        return 0;
    size_t n = (size_t)c->B * c->T * (size_t)b->V;
    RUMOR_CHECK(c->dev->ops->copy(c->dev, dx, x, n * sizeof(float)));
    c->dev->ops->softmax_xent(c->dev, dx, NULL, c->targets, c->B * c->T, b->V, c->loss_scale, 1);
    return 0;
}

static const float *xent_logits(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                                const void *saved)
{
    (void)b;
    (void)c;
    (void)saved;
    return x;
}

const rumor_block_type_t rumor_block_xent = {
    .name = "xent",
    .saved_bytes = xent_saved_bytes,
    .forward = xent_forward,
    .backward_b = xent_backward_b,
    .backward_w = NULL,
    .logits = xent_logits,
};

/* The blocks of GPT-2 (see block.h and model.h): the embedding, the
 * pre-layernorm transformer block and the head (final layernorm, logits
 * tied to the token embedding, cross-entropy).
 *
 * Each block's saved state is one region carved into named buffers, forward
 * state first, then the gradients B keeps for W. Shapes: R = B*T rows, C
 * width, V vocabulary; Conv1D weights are (in, out): y = x W + b. */
#include <string.h>

#include "block.h"
#include "rng.h"

#define LN_EPS 1e-5f

/* carves n floats off *p */
static float *take(char **p, size_t n)
{
    float *r = (float *)*p;
    *p += rumor_align64(n * sizeof(float));
    return r;
}

/* y (R,out) = x (R,in) W (in,out) + b */
static void conv1d(const rumor_call_t *c, float *y, const float *x, size_t w, size_t b, int R,
                   int in, int out)
{
    const rumor_ops_t *ops = c->dev->ops;
    ops->gemm(c->dev, 0, 0, R, out, in, 1.0f, x, in, rumor_call_param(c, w), out, 0.0f, y, out);
    ops->add_bias(c->dev, y, rumor_call_param(c, b), R, out);
}

/* dx (R,in) = dy (R,out) W^T */
static void conv1d_dx(const rumor_call_t *c, float *dx, const float *dy, size_t w, int R, int in,
                      int out)
{
    c->dev->ops->gemm(c->dev, 0, 1, R, in, out, 1.0f, dy, out, rumor_call_param(c, w), out, 0.0f,
                      dx, in);
}

/* dW (in,out) += x^T dy; db += sum over rows of dy */
static void conv1d_dw(const rumor_call_t *c, const float *x, const float *dy, size_t w, size_t b,
                      int R, int in, int out)
{
    const rumor_ops_t *ops = c->dev->ops;
    ops->gemm(c->dev, 1, 0, in, out, R, 1.0f, x, in, dy, out, 1.0f, rumor_call_grad(c, w), out);
    ops->sum_rows(c->dev, rumor_call_grad(c, b), dy, R, out, 1.0f);
}

static void dropout_fwd(const rumor_call_t *c, float p, float *y, size_t n, uint64_t key)
{
    if (p > 0.0f && c->training)
        c->dev->ops->dropout_forward(c->dev, y, y, n, p, key);
}

/* dx = dropout backward of dy (a copy when dropout is off); dx may be dy */
static void dropout_bwd(const rumor_call_t *c, float p, float *dx, const float *dy, size_t n,
                        uint64_t key)
{
    if (p > 0.0f && c->training)
        c->dev->ops->dropout_backward(c->dev, dx, dy, n, p, key);
    else if (dx != dy)
        c->dev->ops->copy(c->dev, dx, dy, n * sizeof(float));
}

/* ------------------------------------------------------------- embedding */

static size_t embed_saved_bytes(const rumor_block_t *b, int B, int T)
{
    return rumor_align64((size_t)B * T * b->C * sizeof(float));
}

static int embed_forward(const rumor_block_t *b, const rumor_call_t *c, const float *x, float *y,
                         void *saved)
{
    (void)x;
    (void)saved;
    c->dev->ops->embed_forward(c->dev, y, c->tok, rumor_call_param(c, b->w_off),
                               rumor_call_param(c, b->b_off), c->B, c->T, b->C);
    dropout_fwd(c, b->dropout, y, (size_t)c->B * c->T * b->C, c->key);
    return 0;
}

static int embed_backward_b(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                            const float *dy, float *dx, void *saved)
{
    (void)x;
    (void)dx; /* tokens have no gradient */
    dropout_bwd(c, b->dropout, saved, dy, (size_t)c->B * c->T * b->C, c->key);
    return 0;
}

static int embed_backward_w(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                            const float *dy, void *saved)
{
    (void)x;
    (void)dy;
    c->dev->ops->embed_backward(c->dev, rumor_call_grad(c, b->w_off), rumor_call_grad(c, b->b_off),
                                saved, c->tok, c->B, c->T, b->C, b->V);
    return 0;
}

const rumor_block_type_t rumor_block_embed = {
    .name = "embed",
    .saved_bytes = embed_saved_bytes,
    .forward = embed_forward,
    .backward_b = embed_backward_b,
    .backward_w = embed_backward_w,
};

/* ----------------------------------------------------- transformer block */

enum { LN1_W, LN1_B, ATTN_W, ATTN_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B };

typedef struct {
    /* forward */
    float *ln1, *mean1, *rstd1, *qkv, *lse, *atty, *r1, *ln2, *mean2, *rstd2, *fch, *fcg;
    /* kept by B for W */
    float *d2, *dfch, *dln2, *dr1, *d1, *datty, *dqkv, *dln1;
} gpt_views;

static size_t gpt_carve(const rumor_block_t *b, int B, int T, void *saved, gpt_views *v)
{
    size_t R = (size_t)B * T, C = (size_t)b->C, L = (size_t)B * b->NH * T;
    char *p = saved, *start = saved;
    gpt_views dummy;
    if (!v)
        v = &dummy;
    v->ln1 = take(&p, R * C);
    v->mean1 = take(&p, R);
    v->rstd1 = take(&p, R);
    v->qkv = take(&p, R * 3 * C);
    v->lse = take(&p, L); /* (B,NH,T): attention's log-sum-exp per query row */
    v->atty = take(&p, R * C);
    v->r1 = take(&p, R * C);
    v->ln2 = take(&p, R * C);
    v->mean2 = take(&p, R);
    v->rstd2 = take(&p, R);
    v->fch = take(&p, R * 4 * C);
    v->fcg = take(&p, R * 4 * C);
    v->d2 = take(&p, R * C);
    v->dfch = take(&p, R * 4 * C);
    v->dln2 = take(&p, R * C);
    v->dr1 = take(&p, R * C);
    v->d1 = take(&p, R * C);
    v->datty = take(&p, R * C);
    v->dqkv = take(&p, R * 3 * C);
    v->dln1 = take(&p, R * C);
    return (size_t)(p - start);
}

static size_t gpt_saved_bytes(const rumor_block_t *b, int B, int T)
{
    return gpt_carve(b, B, T, NULL, NULL);
}

static int gpt_forward(const rumor_block_t *b, const rumor_call_t *c, const float *x, float *y,
                       void *saved)
{
    rumor_device_t *d = c->dev;
    const rumor_ops_t *ops = d->ops;
    gpt_views v;
    gpt_carve(b, c->B, c->T, saved, &v);
    int R = c->B * c->T, C = b->C;
    size_t n = (size_t)R * C;
    const size_t *o = b->sub;
    ops->layernorm_forward(d, v.ln1, v.mean1, v.rstd1, x, rumor_call_param(c, o[LN1_W]),
                           rumor_call_param(c, o[LN1_B]), R, C, LN_EPS);
    conv1d(c, v.qkv, v.ln1, o[ATTN_W], o[ATTN_B], R, C, 3 * C);
    ops->attention_forward(d, v.atty, v.lse, v.qkv, c->B, c->T, C, b->NH);
    /* r1 = x + dropout(atty Wp + bp) */
    conv1d(c, v.r1, v.atty, o[APROJ_W], o[APROJ_B], R, C, C);
    dropout_fwd(c, b->dropout, v.r1, n, rumor_mix64(c->key ^ 1));
    ops->add(d, v.r1, v.r1, x, n);
    ops->layernorm_forward(d, v.ln2, v.mean2, v.rstd2, v.r1, rumor_call_param(c, o[LN2_W]),
                           rumor_call_param(c, o[LN2_B]), R, C, LN_EPS);
    /* fch = ln2 Wfc + bfc, fcg = gelu(fch): one call (a cuBLASLt epilogue on CUDA) */
    ops->gemm_bias_gelu(d, v.fcg, v.fch, v.ln2, rumor_call_param(c, o[FC_W]),
                        rumor_call_param(c, o[FC_B]), R, C, 4 * C);
    /* y = r1 + dropout(gelu(fch) Wfp + bfp) */
    conv1d(c, y, v.fcg, o[FPROJ_W], o[FPROJ_B], R, 4 * C, C);
    dropout_fwd(c, b->dropout, y, n, rumor_mix64(c->key ^ 2));
    ops->add(d, y, y, v.r1, n);
    return 0;
}

static int gpt_backward_b(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                          const float *dy, float *dx, void *saved)
{
    rumor_device_t *d = c->dev;
    const rumor_ops_t *ops = d->ops;
    gpt_views v;
    gpt_carve(b, c->B, c->T, saved, &v);
    int R = c->B * c->T, C = b->C;
    size_t n = (size_t)R * C;
    const size_t *o = b->sub;
    /* MLP branch */
    dropout_bwd(c, b->dropout, v.d2, dy, n, rumor_mix64(c->key ^ 2));
    /* dfch = (d2 Wfp^T) * gelu'(fch): one call */
    ops->gemm_dgelu(d, v.dfch, v.d2, rumor_call_param(c, o[FPROJ_W]), v.fch, R, 4 * C, C);
    conv1d_dx(c, v.dln2, v.dfch, o[FC_W], R, C, 4 * C);
    ops->layernorm_backward_x(d, v.dr1, v.dln2, v.r1, rumor_call_param(c, o[LN2_W]), v.mean2,
                              v.rstd2, R, C, 0);
    ops->add(d, v.dr1, v.dr1, dy, n);
    /* attention branch */
    dropout_bwd(c, b->dropout, v.d1, v.dr1, n, rumor_mix64(c->key ^ 1));
    conv1d_dx(c, v.datty, v.d1, o[APROJ_W], R, C, C);
    ops->attention_backward(d, v.dqkv, v.datty, v.qkv, v.atty, v.lse, c->B, c->T, C, b->NH);
    conv1d_dx(c, v.dln1, v.dqkv, o[ATTN_W], R, C, 3 * C);
    if (dx) {
        ops->layernorm_backward_x(d, dx, v.dln1, x, rumor_call_param(c, o[LN1_W]), v.mean1,
                                  v.rstd1, R, C, 0);
        ops->add(d, dx, dx, v.dr1, n);
    }
    return 0;
}

static int gpt_backward_w(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                          const float *dy, void *saved)
{
    (void)dy;
    const rumor_ops_t *ops = c->dev->ops;
    gpt_views v;
    gpt_carve(b, c->B, c->T, saved, &v);
    int R = c->B * c->T, C = b->C;
    const size_t *o = b->sub;
    conv1d_dw(c, v.fcg, v.d2, o[FPROJ_W], o[FPROJ_B], R, 4 * C, C);
    conv1d_dw(c, v.ln2, v.dfch, o[FC_W], o[FC_B], R, C, 4 * C);
    ops->layernorm_backward_w(c->dev, rumor_call_grad(c, o[LN2_W]), rumor_call_grad(c, o[LN2_B]),
                              v.dln2, v.r1, v.mean2, v.rstd2, R, C);
    conv1d_dw(c, v.atty, v.d1, o[APROJ_W], o[APROJ_B], R, C, C);
    conv1d_dw(c, v.ln1, v.dqkv, o[ATTN_W], o[ATTN_B], R, C, 3 * C);
    ops->layernorm_backward_w(c->dev, rumor_call_grad(c, o[LN1_W]), rumor_call_grad(c, o[LN1_B]),
                              v.dln1, x, v.mean1, v.rstd1, R, C);
    return 0;
}

const rumor_block_type_t rumor_block_gpt = {
    .name = "gpt",
    .saved_bytes = gpt_saved_bytes,
    .forward = gpt_forward,
    .backward_b = gpt_backward_b,
    .backward_w = gpt_backward_w,
};

/* ---------------------------------------------------------------- head */

typedef struct {
    float *lnf, *mean, *rstd, *logits, *dlnf;
} head_views;

static size_t head_carve(const rumor_block_t *b, int B, int T, const void *saved, head_views *v)
{
    size_t R = (size_t)B * T, C = (size_t)b->C, V = (size_t)b->V;
    char *p = (char *)saved, *start = (char *)saved;
    head_views dummy;
    if (!v)
        v = &dummy;
    v->lnf = take(&p, R * C);
    v->mean = take(&p, R);
    v->rstd = take(&p, R);
    v->logits = take(&p, R * V); /* unscaled dlogits after a training forward or B */
    v->dlnf = take(&p, R * C);
    return (size_t)(p - start);
}

static size_t head_saved_bytes(const rumor_block_t *b, int B, int T)
{
    return head_carve(b, B, T, NULL, NULL);
}

static int head_forward(const rumor_block_t *b, const rumor_call_t *c, const float *x, float *y,
                        void *saved)
{
    rumor_device_t *d = c->dev;
    const rumor_ops_t *ops = d->ops;
    head_views v;
    head_carve(b, c->B, c->T, saved, &v);
    int R = c->B * c->T, C = b->C, V = b->V;
    ops->layernorm_forward(d, v.lnf, v.mean, v.rstd, x, rumor_call_param(c, b->w_off),
                           rumor_call_param(c, b->b_off), R, C, LN_EPS);
    /* logits (R,V) = lnf (R,C) wte^T, wte (V,C) */
    ops->gemm(d, 0, 1, R, V, C, 1.0f, v.lnf, C, rumor_call_tied(c, b), C, 0.0f,
              v.logits, V);
    /* training: the loss and, over the logits, their gradient softmax -
     * onehot (B and W scale it by loss_scale, known only then); eval: the
     * loss, the logits left for accuracy and sampling */
    ops->softmax_xent(d, v.logits, y, c->targets, R, V, 1.0f, c->training);
    return 0;
}

static int head_backward_b(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                           const float *dy, float *dx, void *saved)
{
    (void)dy;
    rumor_device_t *d = c->dev;
    const rumor_ops_t *ops = d->ops;
    head_views v;
    head_carve(b, c->B, c->T, saved, &v);
    int R = c->B * c->T, C = b->C, V = b->V;
    if (!c->training) /* after an eval forward the logits are still there */
        ops->softmax_xent(d, v.logits, NULL, c->targets, R, V, 1.0f, 1);
    /* dlnf (R,C) = loss_scale dlogits (R,V) wte (V,C) */
    ops->gemm(d, 0, 0, R, C, V, c->loss_scale, v.logits, V, rumor_call_tied(c, b), C, 0.0f,
              v.dlnf, C);
    if (dx)
        ops->layernorm_backward_x(d, dx, v.dlnf, x, rumor_call_param(c, b->w_off), v.mean, v.rstd,
                                  R, C, 0);
    return 0;
}

static int head_backward_w(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                           const float *dy, void *saved)
{
    (void)dy;
    rumor_device_t *d = c->dev;
    const rumor_ops_t *ops = d->ops;
    head_views v;
    head_carve(b, c->B, c->T, saved, &v);
    int R = c->B * c->T, C = b->C, V = b->V;
    /* dwte (V,C) += loss_scale dlogits^T (V,R) lnf (R,C): the tied embedding's gradient */
    ops->gemm(d, 1, 0, V, C, R, c->loss_scale, v.logits, V, v.lnf, C, 1.0f,
              rumor_call_tied_grad(c, b), C);
    ops->layernorm_backward_w(d, rumor_call_grad(c, b->w_off), rumor_call_grad(c, b->b_off),
                              v.dlnf, x, v.mean, v.rstd, R, C);
    return 0;
}

static const float *head_logits(const rumor_block_t *b, const rumor_call_t *c, const float *x,
                               const void *saved)
{
    (void)x;
    head_views v;
    head_carve(b, c->B, c->T, saved, &v);
    return v.logits;
}

const rumor_block_type_t rumor_block_lm_head = {
    .name = "lm_head",
    .saved_bytes = head_saved_bytes,
    .forward = head_forward,
    .backward_b = head_backward_b,
    .backward_w = head_backward_w,
    .logits = head_logits,
};

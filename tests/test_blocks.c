/* Finite-difference checks of every block type (block.h), called directly,
 * and of whole models and partial stages through the stage API (stage.h).
 *
 * Blocks: dense (ReLU, GELU, none; each with and without dropout 0.3 in
 * training), the softmax cross-entropy head, the GPT embedding, the GPT
 * transformer block and the tied lm head, on windows T = ctx and T < ctx.
 * A block that is not a head is checked on L = sum r .* y for a fixed random
 * r, so its backward_b gets dy = r; a head on L = loss_scale * sum of its
 * rows' losses. Stages: whole MLPs and GPTs (L = the mean loss), the second
 * stage of a cut MLP and a GPT stage of transformer blocks only (their input
 * gradients, rumor_stage_input_grad), the B/W split over two slots, the
 * refusal of a GPT head cut from its tied embedding, and dropout masks keyed
 * by (seed, step, micro-batch, block).
 *
 * The forward runs in float and the loss is summed in double; each gradient
 * coordinate (every coordinate of a tensor of <= 256 floats, else 200 at
 * random) is compared with central differences D(h) = (L(v+h) - L(v-h)) / 2h
 * extrapolated as (4 D(eps/2) - D(eps)) / 3, eps = 2e-2, which cancels the
 * O(eps^2) term (plain D(1e-2) is 2% off on the embeddings of the GPT with
 * dropout, where layernorm's curvature is large). An element passes when
 * |g - fd| <= atol + rtol |fd| with rtol 1e-2 and atol 1e-3 of the largest
 * gradient of the tensor; a tensor passes when every element does and the
 * norm of (g - fd) is within 3e-3 of the norm of fd. Float rounding leaves
 * about 3e-4 in norm and 20% of the element tolerance (the run prints the
 * worst it saw), while a dropped term of layernorm's backward (its mean(g)
 * term is ~1/sqrt(C) = 25% of a gradient at C = 16) or a missing 1/sqrt(hs)
 * in attention (a factor 2 at hs = 4) is off by 10-100x the tolerance. ReLU
 * is piecewise linear: coordinates whose steps would cross a kink (found
 * from the pre-activations, recomputed here in double) are skipped. */
#include <stdint.h>

#include "model.h"
#include "rng.h"
#include "stage.h"
#include "testutil.h"

#define RTOL 1e-2
#define ATOL_REL 1e-3
#define NORM_TOL 3e-3
#define SAMPLES 200
#define SMALL 256

static rumor_device_t *dev;
static double worst_seen, worst_norm_seen; /* over every check, for the summary */

static void *dalloc(size_t bytes)
{
    void *p = dev->ops->alloc(dev, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "alloc %zu: %s\n", bytes, rumor_err_msg());
        exit(1);
    }
    return p;
}

static void die(const char *what)
{
    fprintf(stderr, "%s: %s [%s]\n", what, rumor_err_msg(), rumor_err_trace());
    exit(1);
}

/* ------------------------------------------------------------ comparison */

/* What a check differentiates: the loss at the current values, and
 * (optionally) whether stepping v[i] by +-eps crosses a kink. */
typedef struct {
    double (*loss)(void *ctx);
    int (*kink)(void *ctx, const float *v, size_t i, float eps);
    void *ctx;
    float eps;
} fd_t;

/* Compares g with central differences of the loss in v over one tensor's
 * coordinates [0, n) (sampled when large, plus the `must` ones). */
static void fd_tensor(const fd_t *f, const char *what, const char *tensor, float *v,
                      const float *g, size_t n, const size_t *must, int nmust)
{
    unsigned long long s = 0x51ed27 + n;
    double gmax = 0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(g[i]));
    double atol = ATOL_REL * gmax + 1e-9, worst = 0, num = 0, den = 0;
    int count = n <= SMALL ? (int)n : SAMPLES + nmust, skipped = 0, bad = 0;
    for (int k = 0; k < count; k++) {
        size_t i = n <= SMALL ? (size_t)k : k < nmust ? must[k] : tu_randu(&s) % n;
        if (f->kink && f->kink(f->ctx, v, i, f->eps)) {
            skipped++;
            continue;
        }
        double d[2];
        for (int h = 0; h < 2; h++) {
            float saved = v[i], eps = h ? 0.5f * f->eps : f->eps;
            v[i] = saved + eps;
            double lp = f->loss(f->ctx);
            v[i] = saved - eps;
            double lm = f->loss(f->ctx);
            v[i] = saved;
            d[h] = (lp - lm) / (2.0 * eps);
        }
        double fd = (4.0 * d[1] - d[0]) / 3.0, e = fabs(g[i] - fd);
        double ratio = e / (atol + RTOL * fabs(fd));
        num += e * e;
        den += fd * fd;
        worst = fmax(worst, ratio);
        if (ratio > 1 && bad++ < 3)
            fprintf(stderr, "  %s %s[%zu]: grad %.7g fd %.7g\n", what, tensor, i, g[i], fd);
    }
    double norm = den > 0 ? sqrt(num / den) : (num > 0 ? 1.0 : 0.0);
    CHECKF(bad == 0, "%s %s: %d of %d coordinates off (worst %.3g of the tolerance)", what,
           tensor, bad, count - skipped, worst);
    CHECKF(norm <= NORM_TOL, "%s %s: relative error of the gradient's norm %.3g", what, tensor,
           norm);
    CHECKF(skipped <= count / 4, "%s %s: %d of %d coordinates skipped at kinks", what, tensor,
           skipped, count);
    worst_seen = fmax(worst_seen, worst);
    worst_norm_seen = fmax(worst_norm_seen, norm);
    if (getenv("TEST_BLOCKS_VERBOSE"))
        fprintf(stderr, "  %s %s: %d coords, worst %.3f of tol, norm error %.2e, |g|max %.3g\n",
                what, tensor, count - skipped, worst, norm, gmax);
}

/* The coordinates of a token embedding (V, C) always checked when it is
 * sampled: one in each of its first and last 32 rows. Tokens of the batches
 * here come from [0, V-3), so rows that are an input (embedding and output
 * gradients) and rows that are not (output only) are both among them. */
static int wte_coords(const rumor_tensor_t *tt, size_t must[64])
{
    int n = 0, V = tt->shape[0], C = tt->shape[1];
    if (!strstr(tt->name, "wte.weight"))
        return 0;
    for (int v = 0; v < V; v++)
        if (v < 32 || v >= V - 32)
            must[n++] = (size_t)v * C + (size_t)(v % C);
    return n;
}

/* Every tensor of blocks [first, last) of m, the parameters of the flat
 * range starting at base. */
static void fd_params(const fd_t *f, const char *what, const rumor_model_t *m, int first, int last,
                      float *params, const float *grads, size_t base)
{
    for (int b = first; b < last; b++) {
        const rumor_block_t *k = &m->blocks[b];
        for (int t = k->first_tensor; t < k->first_tensor + k->ntensors; t++) {
            const rumor_tensor_t *tt = &m->tensors[t];
            size_t must[64];
            fd_tensor(f, what, tt->name, params + (tt->off - base), grads + (tt->off - base),
                      tt->numel, must, wte_coords(tt, must));
        }
    }
}

/* -------------------------------------------------- block types, directly */

/* One block called by hand: a call over the whole model's parameter space
 * (base 0), its input x, output y, saved state, and L's projection r. */
typedef struct {
    const rumor_model_t *m;
    rumor_block_t k;
    rumor_call_t c;
    float *params, *grads, *x, *dx, *y, *r;
    void *saved;
    int32_t *tok, *targets;
    size_t rows;
    int head;
} blk_t;

static double blk_loss(void *p)
{
    blk_t *t = p;
    if (t->k.type->forward(&t->k, &t->c, t->x, t->y, t->saved) < 0)
        die("block forward");
    double L = 0;
    for (size_t i = 0; i < t->rows * (size_t)t->k.out_width; i++)
        L += t->head ? (double)t->c.loss_scale * t->y[i] : (double)t->r[i] * t->y[i];
    return L;
}

/* A dense ReLU block's pre-activation z[row][o], in double. */
static double dense_z(const blk_t *t, size_t row, int o)
{
    const rumor_block_t *k = &t->k;
    const float *w = t->params + k->w_off + (size_t)o * k->in_width;
    double z = t->params[k->b_off + o];
    for (int i = 0; i < k->in_width; i++)
        z += (double)w[i] * t->x[row * k->in_width + i];
    return z;
}

/* Would v[i] +- eps move a ReLU pre-activation across 0? (1.5x margin) */
static int dense_kink(void *p, const float *v, size_t i, float eps)
{
    blk_t *t = p;
    const rumor_block_t *k = &t->k;
    if (k->act != 1)
        return 0;
    int I = k->in_width, O = k->out_width;
    double e = 1.5 * eps;
    if (v == t->x) {
        size_t row = i / I;
        for (int o = 0; o < O; o++)
            if (fabs(dense_z(t, row, o)) <= e * fabs(t->params[k->w_off + (size_t)o * I + i % I]))
                return 1;
        return 0;
    }
    if (i >= k->w_off && i < k->w_off + (size_t)O * I) {
        int o = (int)((i - k->w_off) / I), in = (int)((i - k->w_off) % I);
        for (size_t row = 0; row < t->rows; row++)
            if (fabs(dense_z(t, row, o)) <= e * fabs(t->x[row * I + in]))
                return 1;
        return 0;
    }
    if (i >= k->b_off && i < k->b_off + (size_t)O)
        for (size_t row = 0; row < t->rows; row++)
            if (fabs(dense_z(t, row, (int)(i - k->b_off))) <= e)
                return 1;
    return 0;
}

/* Sets up block k of m (with the given dropout, act < 0: the model's) on B x
 * T rows: parameters from the model's init plus noise, random x, r, tokens
 * (from [0, V-3): the last 3 rows of wte are no input) and targets. */
static void blk_init(blk_t *t, const rumor_model_t *m, int block, int act, float dropout, int B,
                     int T, float noise)
{
    memset(t, 0, sizeof *t);
    unsigned long long s = 1234 + (unsigned long long)block * 77 + (unsigned long long)T;
    t->m = m;
    t->k = m->blocks[block];
    if (act >= 0)
        t->k.act = act;
    t->k.dropout = dropout;
    t->rows = (size_t)B * T;
    t->head = t->k.out_width == 1;
    t->params = dalloc(m->nparams * sizeof(float));
    t->grads = dalloc(m->nparams * sizeof(float));
    if (rumor_model_init_host(m, 5, t->params) < 0)
        die("init");
    for (size_t i = 0; i < m->nparams; i++)
        t->params[i] += noise * tu_randf(&s);
    size_t in = t->rows * (size_t)(t->k.in_width ? t->k.in_width : 1);
    size_t out = t->rows * (size_t)t->k.out_width;
    t->x = t->k.in_width ? dalloc(in * sizeof(float)) : NULL;
    t->dx = t->k.in_width ? dalloc(in * sizeof(float)) : NULL;
    for (size_t i = 0; t->x && i < in; i++)
        t->x[i] = 1.5f * tu_randf(&s);
    t->y = dalloc(out * sizeof(float));
    t->r = dalloc(out * sizeof(float));
    for (size_t i = 0; i < out; i++)
        t->r[i] = tu_randf(&s);
    int V = m->kind == RUMOR_MODEL_GPT ? m->vocab : m->classes;
    t->tok = dalloc(t->rows * sizeof(int32_t));
    t->targets = dalloc(t->rows * sizeof(int32_t));
    for (size_t i = 0; i < t->rows; i++) {
        t->tok[i] = (int32_t)(tu_randu(&s) % (unsigned)(V > 3 ? V - 3 : V));
        t->targets[i] = (int32_t)(tu_randu(&s) % (unsigned)V);
    }
    t->saved = dalloc(t->k.type->saved_bytes(&t->k, B, T));
    t->c = (rumor_call_t){ .dev = dev, .B = B, .T = T, .training = 1,
                           .key = rumor_rng_key(9, 4, 1, (uint64_t)block, 0),
                           .params = t->params, .grads = t->grads, .base = 0, .tok = t->tok,
                           .targets = t->targets, .loss_scale = 1.0f / (float)t->rows };
}

static void blk_free(blk_t *t)
{
    void *p[] = { t->params, t->grads, t->x, t->dx, t->y, t->r, t->saved, t->tok, t->targets };
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        if (p[i])
            dev->ops->free(dev, p[i]);
}

/* forward, grads = 0, B (dx), W (grads) */
static void blk_backward(blk_t *t)
{
    const rumor_block_type_t *ty = t->k.type;
    blk_loss(t);
    dev->ops->fill(dev, t->grads, 0.0f, t->m->nparams);
    if (ty->backward_b(&t->k, &t->c, t->x, t->head ? NULL : t->r, t->dx, t->saved) < 0 ||
        (ty->backward_w && ty->backward_w(&t->k, &t->c, t->x, t->head ? NULL : t->r,
                                          t->saved) < 0))
        die("block backward");
}

/* Checks block `block` of spec: its input gradient (when it has an input)
 * and the gradient of every tensor its parameters touch: its own and, for
 * the tied head, the token embedding. */
static void check_block(const char *spec, int block, int act, float dropout, int B, int T)
{
    rumor_model_t *m;
    if (rumor_model_create(spec, 0, &m) < 0)
        die(spec);
    blk_t t;
    blk_init(&t, m, block, act, dropout, B, T, m->kind == RUMOR_MODEL_GPT ? 0.2f : 0.05f);
    char what[160];
    snprintf(what, sizeof what, "%s %s (%s, act %d, dropout %g, B %d, T %d)", spec, t.k.name,
             t.k.type->name, t.k.act, (double)dropout, B, T);
    blk_backward(&t);
    /* W adds into the gradients: a second W (same B state) doubles them,
     * to the rounding of sums taken in another order */
    if (t.k.type->backward_w) {
        float *g1 = malloc(m->nparams * sizeof(float));
        memcpy(g1, t.grads, m->nparams * sizeof(float));
        if (t.k.type->backward_w(&t.k, &t.c, t.x, t.head ? NULL : t.r, t.saved) < 0)
            die("block backward_w");
        double err = 0, mx = 0;
        for (size_t i = 0; i < m->nparams; i++) {
            err = fmax(err, fabs(t.grads[i] - 2.0 * g1[i]));
            mx = fmax(mx, fabs(g1[i]));
        }
        CHECKF(mx > 0 && err <= 1e-5 * mx, "%s: a second W gave %.3g off twice the first's "
               "(max %.3g): W must add", what, err, mx);
        memcpy(t.grads, g1, m->nparams * sizeof(float));
        free(g1);
    }
    fd_t f = { .loss = blk_loss, .kink = dense_kink, .ctx = &t, .eps = 2e-2f };
    if (t.x)
        fd_tensor(&f, what, "x", t.x, t.dx, t.rows * (size_t)t.k.in_width, NULL, 0);
    fd_params(&f, what, m, block, block + 1, t.params, t.grads, 0);
    if (t.k.tied_off != SIZE_MAX) {
        int w = rumor_model_find_tensor(m, "transformer.wte.weight");
        CHECK(w >= 0 && m->tensors[w].off == t.k.tied_off);
        size_t must[64];
        if (w >= 0)
            fd_tensor(&f, what, "tied transformer.wte.weight", t.params + t.k.tied_off,
                      t.grads + t.k.tied_off, m->tensors[w].numel, must,
                      wte_coords(&m->tensors[w], must));
    }
    /* a block writes no gradient outside its range (and the tied tensor) */
    size_t stray = 0;
    for (size_t i = 0; i < m->nparams; i++) {
        int mine = i >= t.k.lo && i < t.k.hi;
        if (t.k.tied_off != SIZE_MAX && i >= t.k.tied_off &&
            i < t.k.tied_off + (size_t)t.k.V * t.k.C)
            mine = 1;
        stray += !mine && t.grads[i] != 0.0f;
    }
    CHECKF(stray == 0, "%s: %zu gradients written outside the block", what, stray);
    fprintf(stderr, "%s: ok\n", what);
    blk_free(&t);
    rumor_model_destroy(&m);
}

/* Same (seed, step, micro-batch, block): the same masks, in any order;
 * another step, micro-batch or block: others. */
static void check_dropout_keys(void)
{
    rumor_model_t *m;
    if (rumor_model_create("mlp:6-40-4:gelu:dropout=0.5", 0, &m) < 0)
        die("dropout model");
    blk_t t;
    blk_init(&t, m, 0, -1, 0.5f, 3, 1, 0.05f);
    size_t n = t.rows * (size_t)t.k.out_width;
    float *y0 = malloc(n * sizeof(float));
    static const uint64_t keys[][4] = { { 9, 4, 1, 0 }, { 9, 5, 1, 0 }, { 9, 4, 2, 0 },
                                        { 9, 4, 1, 1 }, { 8, 4, 1, 0 } };
    blk_loss(&t);
    memcpy(y0, t.y, n * sizeof(float));
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        t.c.key = rumor_rng_key(keys[k][0], keys[k][1], keys[k][2], keys[k][3], 0);
        blk_loss(&t);
        size_t differ = 0, zeros = 0;
        for (size_t i = 0; i < n; i++) {
            differ += t.y[i] != y0[i];
            zeros += t.y[i] == 0.0f;
        }
        if (k == 0)
            CHECKF(differ == 0, "the same key drew another mask (%zu of %zu differ)", differ, n);
        else
            CHECKF(differ > n / 5, "key %zu drew the mask of key 0 (%zu of %zu differ)", k,
                   differ, n);
        CHECKF(zeros > n / 4 && zeros < 3 * n / 4, "key %zu dropped %zu of %zu at p = 0.5", k,
               zeros, n);
    }
    /* the stage derives the key from (seed, step, micro, block): the same
     * forward twice gives the same losses, another step or micro others */
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = 0, .last = m->nblocks,
                                .max_B = 3, .T = 1, .slots = 1, .seed = 9 };
    rumor_stage_t *st;
    if (rumor_stage_create(&sc, &st) < 0)
        die("dropout stage");
    float x[18];
    int32_t y[3] = { 0, 1, 3 };
    unsigned long long s = 3;
    for (int i = 0; i < 18; i++)
        x[i] = tu_randf(&s);
    rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = 3, .width = 6, .x = x, .y = y };
    double l[4];
    static const int sm[4][2] = { { 7, 0 }, { 7, 0 }, { 8, 0 }, { 7, 1 } };
    CHECK_OK(rumor_stage_load(st, 0, &b, 0, 3));
    for (int k = 0; k < 4; k++) {
        CHECK_OK(rumor_stage_forward(st, 0, NULL, 1, sm[k][0], sm[k][1]));
        CHECK_OK(rumor_stage_loss(st, 0, &l[k], NULL));
    }
    CHECKF(l[0] == l[1] && l[2] != l[0] && l[3] != l[0],
           "stage losses %.9g %.9g (same step and micro) %.9g (next step) %.9g (next micro)", l[0],
           l[1], l[2], l[3]);
    rumor_stage_destroy(&st);
    free(y0);
    blk_free(&t);
    rumor_model_destroy(&m);
}

/* ---------------------------------------------------------------- stages */

/* A stage of blocks [first, last) of m on one batch. A stage without the
 * head is checked on L = sum r .* out; with it, on the mean loss. */
typedef struct {
    rumor_model_t *m;
    rumor_stage_t *st;
    rumor_batch_t b;
    float *x, *in, *r;
    int32_t *tok, *y;
    size_t rows;
    int training;
    float scale;
} stg_t;

static void stg_init(stg_t *t, const char *spec, int first, int last, int B, int T, int slots,
                     int training)
{
    memset(t, 0, sizeof *t);
    if (rumor_model_create(spec, 0, &t->m) < 0)
        die(spec);
    rumor_model_t *m = t->m;
    if (last < 0)
        last = m->nblocks;
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = first, .last = last,
                                .max_B = B, .T = rumor_model_seq(m), .slots = slots, .seed = 42 };
    if (rumor_stage_create(&sc, &t->st) < 0)
        die("stage");
    int gpt = m->kind == RUMOR_MODEL_GPT;
    if (!gpt)
        T = 1;
    t->rows = (size_t)B * T;
    t->training = training;
    t->scale = (float)(1.0 / (double)t->rows);
    unsigned long long s = 77 + (unsigned long long)first;
    int V = gpt ? m->vocab : m->classes;
    t->y = malloc(t->rows * sizeof(int32_t));
    t->tok = malloc(t->rows * sizeof(int32_t));
    t->x = gpt ? NULL : malloc(t->rows * (size_t)m->in_dim * sizeof(float));
    for (size_t i = 0; t->x && i < t->rows * (size_t)m->in_dim; i++)
        t->x[i] = tu_randf(&s);
    for (size_t i = 0; i < t->rows; i++) {
        t->tok[i] = (int32_t)(tu_randu(&s) % (unsigned)(V - 3)); /* rows V-3.. of wte: no input */
        t->y[i] = (int32_t)(tu_randu(&s) % (unsigned)V);
    }
    t->b = (rumor_batch_t){ .kind = gpt ? RUMOR_BATCH_TOKENS : RUMOR_BATCH_IMAGES, .n = B,
                            .width = gpt ? T : m->in_dim, .x = t->x, .tok = gpt ? t->tok : NULL,
                            .y = t->y };
    rumor_stage_t *st = t->st;
    for (size_t i = 0; i < st->n; i++) /* away from the init: LN weights not all 1 */
        st->params[i] += (gpt ? 0.2f : 0.05f) * tu_randf(&s);
    if (!st->is_first) {
        int w = m->blocks[first].in_width;
        t->in = dalloc(t->rows * (size_t)w * sizeof(float));
        for (size_t i = 0; i < t->rows * (size_t)w; i++)
            t->in[i] = 1.5f * tu_randf(&s);
    }
    if (!st->is_last) {
        size_t n = t->rows * (size_t)m->blocks[last - 1].out_width;
        t->r = dalloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            t->r[i] = tu_randf(&s);
    }
    if (rumor_stage_load(st, 0, &t->b, 0, B) < 0)
        die("load");
}

static void stg_free(stg_t *t)
{
    if (t->in)
        dev->ops->free(dev, t->in);
    if (t->r)
        dev->ops->free(dev, t->r);
    free(t->x);
    free(t->tok);
    free(t->y);
    rumor_stage_destroy(&t->st);
    rumor_model_destroy(&t->m);
}

static double stg_loss(void *p)
{
    stg_t *t = p;
    rumor_stage_t *st = t->st;
    if (rumor_stage_forward(st, 0, t->in, t->training, 5, 0) < 0)
        die("stage forward");
    double L = 0;
    if (st->is_last) {
        if (rumor_stage_loss(st, 0, &L, NULL) < 0)
            die("stage loss");
        return L * t->scale;
    }
    const float *out = rumor_stage_output(st, 0);
    for (size_t i = 0; i < t->rows * (size_t)t->m->blocks[st->last - 1].out_width; i++)
        L += (double)t->r[i] * out[i];
    return L;
}

static void stg_backward(stg_t *t)
{
    stg_loss(t);
    CHECK_OK(rumor_stage_zero_grad(t->st));
    CHECK_OK(rumor_stage_backward_b(t->st, 0, t->r, t->scale));
    CHECK_OK(rumor_stage_backward_w(t->st, 0));
}

/* Every parameter of the stage and (not the first stage) its input. */
static void check_stage(const char *spec, int first, int last, int B, int T, int training)
{
    stg_t t;
    stg_init(&t, spec, first, last, B, T, 1, training);
    rumor_stage_t *st = t.st;
    char what[200];
    snprintf(what, sizeof what, "%s stage [%d, %d) (B %d, T %d%s)", spec, first, st->last, B,
             (int)(t.rows / B), training ? ", dropout on" : "");
    stg_backward(&t);
    fd_t f = { .loss = stg_loss, .ctx = &t, .eps = 2e-2f };
    fd_params(&f, what, t.m, first, st->last, st->params, st->grads, st->lo);
    if (!st->is_first) {
        const float *din = rumor_stage_input_grad(st, 0);
        CHECK(din != NULL);
        if (din)
            fd_tensor(&f, what, "stage input", t.in, din,
                      t.rows * (size_t)t.m->blocks[first].in_width, NULL, 0);
    } else {
        CHECK(rumor_stage_input_grad(st, 0) == NULL);
    }
    int w = rumor_model_find_tensor(t.m, "transformer.wte.weight");
    if (w >= 0 && st->is_first) {
        /* tied: rows of tokens that are no input get the output's gradient */
        const rumor_tensor_t *tt = &t.m->tensors[w];
        const float *g = st->grads + tt->off - st->lo;
        int C = tt->shape[1], V = tt->shape[0];
        double unused = 0;
        for (int v = V - 3; v < V; v++)
            for (int c = 0; c < C; c++)
                unused += fabs(g[(size_t)v * C + c]);
        CHECKF(unused > 0, "%s: wte rows of no input token have no gradient", what);
    }
    fprintf(stderr, "%s: ok\n", what);
    stg_free(&t);
}

/* Two stages of one MLP: the second's input gradient fed to the first's B
 * gives the one-stage model's gradients. */
static void check_chain(const char *spec, int cut)
{
    enum { B = 4 };
    stg_t whole, tail;
    stg_init(&whole, spec, 0, -1, B, 1, 1, 1);
    stg_init(&tail, spec, cut, -1, B, 1, 1, 1);
    rumor_stage_t *head = NULL;
    rumor_stage_config_t sc = { .model = whole.m, .dev = dev, .first = 0, .last = cut, .max_B = B,
                                .T = 1, .slots = 1, .seed = 42 };
    CHECK_OK(rumor_stage_create(&sc, &head));
    if (!head)
        return;
    memcpy(head->params, whole.st->params, head->n * sizeof(float));
    memcpy(tail.st->params, whole.st->params + tail.st->lo, tail.st->n * sizeof(float));
    stg_backward(&whole);
    CHECK_OK(rumor_stage_load(head, 0, &whole.b, 0, B));
    CHECK_OK(rumor_stage_load(tail.st, 0, &whole.b, 0, B));
    CHECK_OK(rumor_stage_forward(head, 0, NULL, 1, 5, 0));
    CHECK_OK(rumor_stage_forward(tail.st, 0, rumor_stage_output(head, 0), 1, 5, 0));
    CHECK_OK(rumor_stage_zero_grad(head));
    CHECK_OK(rumor_stage_zero_grad(tail.st));
    CHECK_OK(rumor_stage_backward_b(tail.st, 0, NULL, whole.scale));
    CHECK_OK(rumor_stage_backward_b(head, 0, rumor_stage_input_grad(tail.st, 0), whole.scale));
    CHECK_OK(rumor_stage_backward_w(head, 0));
    CHECK_OK(rumor_stage_backward_w(tail.st, 0));
    double err = 0, mx = 0;
    for (size_t i = 0; i < whole.st->n; i++) {
        float g = i < head->n ? head->grads[i] : tail.st->grads[i - head->n];
        err = fmax(err, fabs(g - whole.st->grads[i]));
        mx = fmax(mx, fabs(whole.st->grads[i]));
    }
    CHECKF(mx > 0 && err <= 1e-6 * mx, "%s cut at %d: gradients differ by %.3g (max %.3g)", spec,
           cut, err, mx);
    fprintf(stderr, "%s cut at %d: two stages' gradients within %.1e of one stage's\n", spec, cut,
            err);
    rumor_stage_destroy(&head);
    stg_free(&tail);
    stg_free(&whole);
}

/* W of micro-batch 0 after the forward and B of micro-batch 1 (2 slots):
 * the gradients of running each in order. */
static void check_bw_split(const char *spec, int T)
{
    enum { B = 2 };
    stg_t t;
    stg_init(&t, spec, 0, -1, B, T, 2, 1);
    rumor_stage_t *st = t.st;
    float sc = t.scale;
    float *ref = malloc(st->n * sizeof(float)), *alt = malloc(st->n * sizeof(float));
    /* F0 B0 W0 F1 B1 W1 */
    CHECK_OK(rumor_stage_zero_grad(st));
    for (int mb = 0; mb < 2; mb++) {
        CHECK_OK(rumor_stage_load(st, 0, &t.b, mb, 1));
        CHECK_OK(rumor_stage_forward(st, 0, NULL, 1, 3, mb));
        CHECK_OK(rumor_stage_backward_b(st, 0, NULL, sc));
        CHECK_OK(rumor_stage_backward_w(st, 0));
    }
    memcpy(ref, st->grads, st->n * sizeof(float));
    /* F0 B0 F1 B1 W0 W1: the same sums in the same order, bit for bit */
    CHECK_OK(rumor_stage_zero_grad(st));
    CHECK_OK(rumor_stage_load(st, 0, &t.b, 0, 1));
    CHECK_OK(rumor_stage_load(st, 1, &t.b, 1, 1));
    CHECK_OK(rumor_stage_forward(st, 0, NULL, 1, 3, 0));
    CHECK_OK(rumor_stage_backward_b(st, 0, NULL, sc));
    CHECK_OK(rumor_stage_forward(st, 1, NULL, 1, 3, 1));
    CHECK_OK(rumor_stage_backward_b(st, 1, NULL, sc));
    CHECK_OK(rumor_stage_backward_w(st, 0));
    CHECK_OK(rumor_stage_backward_w(st, 1));
    memcpy(alt, st->grads, st->n * sizeof(float));
    CHECKF(!memcmp(ref, alt, st->n * sizeof(float)), "%s: W0 after F1 B1 changed the gradients",
           spec);
    /* F0 F1 B1 B0 W1 W0: the other order of the sum */
    CHECK_OK(rumor_stage_zero_grad(st));
    CHECK_OK(rumor_stage_forward(st, 0, NULL, 1, 3, 0));
    CHECK_OK(rumor_stage_forward(st, 1, NULL, 1, 3, 1));
    CHECK_OK(rumor_stage_backward_b(st, 1, NULL, sc));
    CHECK_OK(rumor_stage_backward_b(st, 0, NULL, sc));
    CHECK_OK(rumor_stage_backward_w(st, 1));
    CHECK_OK(rumor_stage_backward_w(st, 0));
    double err = 0, mx = 0;
    for (size_t i = 0; i < st->n; i++) {
        err = fmax(err, fabs(st->grads[i] - ref[i]));
        mx = fmax(mx, fabs(ref[i]));
    }
    CHECKF(mx > 0 && err <= 1e-6 * mx, "%s: F0 F1 B1 B0 W1 W0 differs by %.3g (max %.3g)", spec,
           err, mx);
    /* a NaN left in the gradients does not survive zeroing */
    st->grads[st->n - 1] = NAN;
    CHECK_OK(rumor_stage_zero_grad(st));
    CHECK(st->grads[st->n - 1] == 0.0f);
    fprintf(stderr, "%s: B/W split over 2 slots ok (other order within %.1e)\n", spec, err);
    free(ref);
    free(alt);
    stg_free(&t);
}

/* A GPT head cut from the embedding it is tied to keeps a copy of it,
 * initialized as the model's: equal to the embedding stage's own, and the
 * head computes with the copy (its logits are those of the whole model's
 * head on the same input). */
static void check_tied_cut(void)
{
    rumor_model_t *m;
    if (rumor_model_create("gpt:layers=2,dim=16,heads=4,ctx=8,vocab=11", 0, &m) < 0)
        die("gpt");
    rumor_stage_t *a = NULL, *b = NULL, *whole = NULL;
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = 0, .last = 2, .max_B = 2,
                                .T = 8, .slots = 1, .seed = 1 };
    CHECK_OK(rumor_stage_create(&sc, &a)); /* [embed, h.0] */
    sc.last = m->nblocks;
    CHECK_OK(rumor_stage_create(&sc, &whole));
    sc.first = 2;
    CHECK_OK(rumor_stage_create(&sc, &b)); /* [h.1, head] with the embedding's copy */
    if (!a || !b || !whole)
        die("stages");
    CHECK(b->tied && b->tied_lo == 0 && b->tied_n == 11 * 16 && a->tied == NULL);
    CHECK(memcmp(b->tied, a->params, b->tied_n * sizeof(float)) == 0);
    /* the head on the copy: the cut model's loss is the whole model's */
    int32_t tok[16], y[16];
    for (int i = 0; i < 16; i++)
        tok[i] = (i * 7) % 11, y[i] = (i * 3 + 1) % 11;
    rumor_batch_t bt = { .kind = RUMOR_BATCH_TOKENS, .n = 2, .width = 8, .tok = tok, .y = y };
    double lw = 0, lc = 0;
    CHECK_OK(rumor_stage_load(whole, 0, &bt, 0, 2));
    CHECK_OK(rumor_stage_forward(whole, 0, NULL, 0, 0, 0));
    CHECK_OK(rumor_stage_loss(whole, 0, &lw, NULL));
    CHECK_OK(rumor_stage_load(a, 0, &bt, 0, 2));
    CHECK_OK(rumor_stage_forward(a, 0, NULL, 0, 0, 0));
    CHECK_OK(rumor_stage_load(b, 0, &bt, 0, 2));
    CHECK_OK(rumor_stage_forward(b, 0, rumor_stage_output(a, 0), 0, 0, 0));
    CHECK_OK(rumor_stage_loss(b, 0, &lc, NULL));
    CHECKF(lw == lc && lw > 0, "cut GPT loss %.9g, whole %.9g", lc, lw);
    rumor_stage_destroy(&a);
    rumor_stage_destroy(&b);
    rumor_stage_destroy(&whole);
    rumor_model_destroy(&m);
}

int main(void)
{
    if (rumor_device_open("cpu:1", &dev) < 0) {
        fprintf(stderr, "cpu device: %s\n", rumor_err_msg());
        return 1;
    }
    static const char *mlp = "mlp:7-6-5";
    static const char *gpt = "gpt:layers=2,dim=16,heads=4,ctx=8,vocab=11";
    /* dense: ReLU, GELU, none; dropout off and on */
    for (int act = 0; act <= 2; act++) {
        check_block(mlp, 0, act, 0.0f, 4, 1);
        check_block(mlp, 0, act, 0.3f, 4, 1);
    }
    check_block(mlp, 2, -1, 0.0f, 4, 1); /* xent head */
    check_block(gpt, 0, -1, 0.0f, 3, 8); /* embed */
    check_block(gpt, 0, -1, 0.3f, 2, 5);
    check_block(gpt, 1, -1, 0.0f, 3, 8); /* transformer block */
    check_block(gpt, 2, -1, 0.0f, 2, 5);
    check_block(gpt, 1, -1, 0.3f, 2, 8);
    check_block(gpt, 3, -1, 0.0f, 3, 8); /* tied lm head */
    check_block(gpt, 3, -1, 0.0f, 2, 5);
    check_dropout_keys();
    /* whole models and stages */
    check_stage("mlp:10-9-8-6-4:gelu:dropout=0.3", 0, -1, 4, 1, 1);
    check_stage("mlp:10-9-8-6-4:gelu:dropout=0.3", 2, -1, 4, 1, 1); /* input gradient */
    check_stage(gpt, 0, -1, 3, 8, 0);
    check_stage(gpt, 0, -1, 2, 5, 0);
    check_stage("gpt:layers=2,dim=16,heads=4,ctx=8,vocab=11,dropout=0.3", 0, -1, 2, 8, 1);
    /* a vocabulary large enough that wte is sampled: its rows of inputs and of no input */
    check_stage("gpt:layers=1,dim=16,heads=2,ctx=8,vocab=40", 0, -1, 2, 8, 0);
    check_stage(gpt, 1, 3, 2, 8, 0); /* transformer blocks only: input gradient */
    check_stage("gpt:layers=2,dim=16,heads=4,ctx=8,vocab=11,dropout=0.3", 1, 3, 2, 5, 1);
    check_chain("mlp:10-9-8-6-4:gelu:dropout=0.3", 2);
    check_bw_split("mlp:10-9-8-6-4:gelu:dropout=0.3", 1);
    check_bw_split("gpt:layers=2,dim=16,heads=4,ctx=8,vocab=11,dropout=0.3", 8);
    check_tied_cut();
    fprintf(stderr, "worst element error %.3f of the tolerance, worst norm error %.2e (limit %g)\n",
            worst_seen, worst_norm_seen, NORM_TOL);
    rumor_device_close(&dev);
    return tu_finish("test_blocks");
}

/* Finite-difference gradient checks of the element-wise ops and the loss,
 * and of whole MLPs and GPTs (every parameter, the tied token embedding
 * included); model specs and layouts. Blocks one by one, stages cut
 * anywhere (their input gradients), the B/W split and keyed dropout are
 * test_blocks.c's.
 *
 * Each check perturbs one input or parameter by +-eps, recomputes the scalar
 * loss with the forward pass, and compares (L+ - L-)/(2 eps) with what the
 * backward pass produced. GELU models are smooth, so every element must
 * match; ReLU has kinks where a perturbation can cross zero, so there the
 * whole gradient must match in norm and almost every element individually. */
#include "model.h"
#include "stage.h"
#include "testutil.h"

static rumor_device_t *dev;

/* A whole-model stage of spec with B examples (of T rows each) and a fixed
 * batch: random images with labels, or random tokens with next tokens. */
typedef struct {
    rumor_model_t *m;
    rumor_stage_t *st;
    rumor_batch_t b;
    float *x;
    int32_t *tok, *y;
} fixture_t;

static void fixture_init(fixture_t *f, const char *spec, int B, int T, int slots)
{
    memset(f, 0, sizeof *f);
    CHECK_OK(rumor_model_create(spec, 0, &f->m));
    if (!f->m)
        exit(1);
    rumor_stage_config_t sc = { .model = f->m, .dev = dev, .first = 0, .last = f->m->nblocks,
                                .max_B = B, .T = rumor_model_seq(f->m), .slots = slots,
                                .seed = 42 };
    CHECK_OK(rumor_stage_create(&sc, &f->st));
    if (!f->st)
        exit(1);
    unsigned long long s = 7;
    rumor_batch_t *b = &f->b;
    b->n = B;
    if (f->m->kind == RUMOR_MODEL_MLP) {
        b->kind = RUMOR_BATCH_IMAGES;
        b->width = f->m->in_dim;
        f->x = malloc(sizeof(float) * (size_t)B * f->m->in_dim);
        f->y = malloc(sizeof(int32_t) * (size_t)B);
        for (int i = 0; i < B * f->m->in_dim; i++)
            f->x[i] = tu_randf(&s);
        for (int i = 0; i < B; i++)
            f->y[i] = (int32_t)(i % f->m->classes);
        b->x = f->x;
    } else {
        b->kind = RUMOR_BATCH_TOKENS;
        b->width = T;
        f->tok = malloc(sizeof(int32_t) * (size_t)B * T);
        f->y = malloc(sizeof(int32_t) * (size_t)B * T);
        /* tokens from the lower part of the vocabulary only: rows of wte
         * that no input uses get gradient only from the tied output */
        for (int i = 0; i < B * T; i++) {
            f->tok[i] = (int32_t)(tu_randu(&s) % (unsigned)(f->m->vocab - 3));
            f->y[i] = (int32_t)(tu_randu(&s) % (unsigned)f->m->vocab);
        }
        b->tok = f->tok;
    }
    b->y = f->y;
    /* bias the parameters away from zero so ReLU kinks are rare */
    for (size_t i = 0; i < f->st->n; i++)
        f->st->params[i] += 0.05f * tu_randf(&s);
}

static void fixture_free(fixture_t *f)
{
    rumor_stage_destroy(&f->st);
    rumor_model_destroy(&f->m);
    free(f->x);
    free(f->tok);
    free(f->y);
}

/* Mean loss of the batch at the current parameters (dropout keyed by step 5). */
static double loss_at(fixture_t *f, int slot, int training)
{
    double sum;
    if (rumor_stage_load(f->st, slot, &f->b, 0, f->b.n) < 0 ||
        rumor_stage_forward(f->st, slot, NULL, training, 5, 0) < 0 ||
        rumor_stage_loss(f->st, slot, &sum, NULL) < 0) {
        fprintf(stderr, "forward failed: %s\n", rumor_err_msg());
        exit(1);
    }
    return sum / (double)rumor_batch_targets(&f->b);
}

/* grads = d(mean loss)/d params by the stage's B and W. */
static void grads_at(fixture_t *f, int training)
{
    loss_at(f, 0, training);
    CHECK_OK(rumor_stage_zero_grad(f->st));
    CHECK_OK(rumor_stage_backward_b(f->st, 0, NULL, (float)(1.0 / rumor_batch_targets(&f->b))));
    CHECK_OK(rumor_stage_backward_w(f->st, 0));
}

/* Checks every parameter gradient of `spec` against central differences.
 * strict: every element within tolerance; else norm + 98% of elements.
 * eps: the step; small enough not to cross ReLU kinks, large enough that
 * float32 rounding of the loss stays far below the gradient. */
static void check_model(const char *spec, int B, int T, int training, int strict, float eps)
{
    fixture_t f;
    fixture_init(&f, spec, B, T, 1);
    rumor_stage_t *st = f.st;
    grads_at(&f, training);
    float *g = malloc(st->n * sizeof *g);
    memcpy(g, st->grads, st->n * sizeof *g);
    size_t bad = 0;
    double num = 0, den = 0;
    for (size_t i = 0; i < st->n; i++) {
        float saved = st->params[i];
        st->params[i] = saved + eps;
        double lp = loss_at(&f, 0, training);
        st->params[i] = saved - eps;
        double lm = loss_at(&f, 0, training);
        st->params[i] = saved;
        double fd = (lp - lm) / (2.0 * eps);
        num += (g[i] - fd) * (g[i] - fd);
        den += fd * fd;
        if (fabs(g[i] - fd) > 2e-4 + 2e-2 * fabs(fd)) {
            if (strict || bad < 3)
                fprintf(stderr, "  %s: param %zu grad %.6g fd %.6g\n", spec, i, g[i], fd);
            bad++;
        }
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    CHECKF(den > 0, "%s: gradient is all zero", spec);
    CHECKF(rel < (strict ? 5e-3 : 2e-2), "%s: relative gradient error %.3g", spec, rel);
    if (strict)
        CHECKF(bad == 0, "%s: %zu of %zu elements off", spec, bad, st->n);
    else
        CHECKF(bad <= st->n / 50, "%s: %zu of %zu elements off", spec, bad, st->n);
    fprintf(stderr, "%s (B %d, T %d%s): %zu params, relative error %.2e, %zu off\n", spec, B, T,
            training ? ", dropout on" : "", st->n, rel, bad);
    free(g);
    fixture_free(&f);
}

/* Element-wise layer check: L = sum r .* f(x); backward(r) must equal dL/dx. */
typedef void (*fwd_fn)(const float *x, float *y, size_t n);
typedef void (*bwd_fn)(const float *x, const float *dy, float *dx, size_t n);

static void relu_f(const float *x, float *y, size_t n) { dev->ops->relu_forward(dev, y, x, n); }
static void relu_b(const float *x, const float *dy, float *dx, size_t n)
{
    dev->ops->relu_backward(dev, dx, x, dy, n);
}
static void gelu_f(const float *x, float *y, size_t n) { dev->ops->gelu_forward(dev, y, x, n); }
static void gelu_b(const float *x, const float *dy, float *dx, size_t n)
{
    dev->ops->gelu_backward(dev, dx, x, dy, n);
}
static void drop_f(const float *x, float *y, size_t n) { dev->ops->dropout_forward(dev, y, x, n, 0.4f, 99); }
static void drop_b(const float *x, const float *dy, float *dx, size_t n)
{
    (void)x;
    dev->ops->dropout_backward(dev, dx, dy, n, 0.4f, 99);
}

static void check_elementwise(const char *name, fwd_fn f, bwd_fn b)
{
    enum { N = 257 };
    float x[N], y[N], r[N], dx[N];
    unsigned long long s = 11;
    for (int i = 0; i < N; i++) {
        x[i] = 3.0f * tu_randf(&s);
        if (fabsf(x[i]) < 0.05f) /* keep away from the ReLU kink */
            x[i] = 0.5f;
        r[i] = tu_randf(&s);
    }
    b(x, r, dx, N);
    const float eps = 1e-3f;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float saved = x[i];
        double lp = 0, lm = 0;
        x[i] = saved + eps;
        f(x, y, N);
        lp = (double)r[i] * y[i];
        x[i] = saved - eps;
        f(x, y, N);
        lm = (double)r[i] * y[i];
        x[i] = saved;
        double fd = (lp - lm) / (2.0 * eps);
        if (fabs(dx[i] - fd) > 1e-3 + 1e-2 * fabs(fd)) {
            if (bad++ < 3)
                fprintf(stderr, "  %s: x=%g dx %g fd %g\n", name, x[i], dx[i], fd);
        }
    }
    CHECKF(bad == 0, "%s: %d of %d elements off", name, bad, N);
}

/* Softmax cross-entropy: d(mean loss)/d logits vs central differences. */
static void check_softmax_xent(void)
{
    enum { B = 4, C = 7 };
    float z[B * C], l[B], g[B * C];
    int32_t y[B] = { 0, 3, 6, 2 };
    unsigned long long s = 5;
    for (int i = 0; i < B * C; i++)
        z[i] = 4.0f * tu_randf(&s);
    memcpy(g, z, sizeof z);
    dev->ops->softmax_xent(dev, g, l, y, B, C, 1.0f / B, 1); /* g: the gradient, over z's copy */
    const float eps = 1e-2f;
    int bad = 0;
    for (int i = 0; i < B * C; i++) {
        float saved = z[i];
        double lp = 0, lm = 0;
        z[i] = saved + eps;
        dev->ops->softmax_xent(dev, z, l, y, B, C, 1.0f, 0);
        for (int b = 0; b < B; b++)
            lp += l[b] / (double)B;
        z[i] = saved - eps;
        dev->ops->softmax_xent(dev, z, l, y, B, C, 1.0f, 0);
        for (int b = 0; b < B; b++)
            lm += l[b] / (double)B;
        z[i] = saved;
        double fd = (lp - lm) / (2.0 * eps);
        if (fabs(g[i] - fd) > 2e-4 + 1e-2 * fabs(fd))
            bad++;
    }
    CHECKF(bad == 0, "softmax cross-entropy: %d of %d logits off", bad, B * C);
}

/* Blocks own contiguous, disjoint ranges covering the whole space, every
 * tensor lies inside its block, and the same seed gives the same parameters. */
static void check_layout(void)
{
    static const char *specs[] = { "mlp:784-256-256-10:gelu:dropout=0.1",
                                   "gpt:layers=3,dim=16,heads=2,ctx=8,vocab=11" };
    for (int k = 0; k < 2; k++) {
        rumor_model_t *m;
        CHECK_OK(rumor_model_create(specs[k], 0, &m));
        if (!m)
            return;
        size_t expect_lo = 0;
        for (int b = 0; b < m->nblocks; b++) {
            const rumor_block_t *bk = &m->blocks[b];
            CHECK(bk->lo == expect_lo && bk->hi >= bk->lo && bk->index == b);
            expect_lo = bk->hi;
            for (int t = bk->first_tensor; t < bk->first_tensor + bk->ntensors; t++)
                CHECK(m->tensors[t].off >= bk->lo &&
                      m->tensors[t].off + m->tensors[t].numel <= bk->hi);
        }
        CHECK(expect_lo == m->nparams);
        float *a = malloc(m->nparams * sizeof *a), *b = malloc(m->nparams * sizeof *b);
        CHECK_OK(rumor_model_init_host(m, 1, a));
        CHECK_OK(rumor_model_init_host(m, 1, b));
        CHECK(memcmp(a, b, m->nparams * sizeof *a) == 0);
        CHECK_OK(rumor_model_init_host(m, 2, b));
        CHECK(memcmp(a, b, m->nparams * sizeof *a) != 0);
        free(a);
        free(b);
        rumor_model_destroy(&m);
        rumor_model_destroy(&m); /* safe twice */
    }
    rumor_model_t *m;
    CHECK_OK(rumor_model_create("mlp:784-256-256-10", 0, &m));
    if (m) {
        CHECK(m->nparams == (size_t)784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
        CHECK(m->nblocks == 4 && !strcmp(m->tensors[0].name, "fc0.weight") &&
              m->tensors[0].shape[0] == 256 && m->tensors[0].shape[1] == 784);
    }
    rumor_model_destroy(&m);
    /* GPT-2's names, Conv1D layouts and sizes: 12 D^2 + 13 D per layer */
    CHECK_OK(rumor_model_create("gpt:layers=2,dim=8,heads=2,ctx=5", 13, &m));
    if (m) {
        size_t D = 8, want = 13 * D + 5 * D + 2 * (12 * D * D + 13 * D) + 2 * D;
        CHECKF(m->nparams == want, "gpt: %zu parameters, expected %zu", m->nparams, want);
        int t = rumor_model_find_tensor(m, "transformer.h.1.attn.c_attn.weight");
        CHECK(t >= 0 && m->tensors[t].shape[0] == 8 && m->tensors[t].shape[1] == 24);
        CHECK(rumor_model_find_tensor(m, "lm_head.weight") < 0); /* tied */
        CHECK(!strcmp(m->spec, "gpt:layers=2,dim=8,heads=2,ctx=5,vocab=13,dropout=0"));
    }
    rumor_model_destroy(&m);
}

/* One model, one spec: every spelling of an MLP becomes the same canonical
 * string (relu is the default; numbers as parsed), which checkpoints and
 * peers compare. */
static void check_canonical_specs(void)
{
    static const char *const same[][2] = {
        { "mlp:784-256-10", "mlp:784-256-10" },
        { "mlp:784-256-10:relu", "mlp:784-256-10" },
        { "mlp:0784-256-010", "mlp:784-256-10" },
        { "mlp:9-8-4:relu:gelu", "mlp:9-8-4:gelu" },
        { "mlp:9-8-4:dropout=0.10:gelu", "mlp:9-8-4:gelu:dropout=0.1" },
        { "mlp:9-8-4:gelu:dropout=0", "mlp:9-8-4:gelu" },
        { "mlp:9-8-4:dropout=2.5e-1", "mlp:9-8-4:dropout=0.25" },
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        rumor_model_t *m = NULL;
        CHECK_OK(rumor_model_create(same[i][0], 0, &m));
        CHECKF(m && !strcmp(m->spec, same[i][1]), "'%s' became '%s', expected '%s'", same[i][0],
               m ? m->spec : "(none)", same[i][1]);
        rumor_model_t *again = NULL; /* the canonical form is a fixed point */
        CHECK_OK(rumor_model_create(m ? m->spec : same[i][1], 0, &again));
        CHECK(again && m && !strcmp(again->spec, m->spec));
        rumor_model_destroy(&again);
        rumor_model_destroy(&m);
    }
}

/* GPT-2's presets have the parameter counts of OpenAI's checkpoints as
 * transformers loads them (tied output weights): 124,439,808, 354,823,168
 * and 774,030,080. */
static void check_presets(void)
{
    static const struct {
        const char *spec, *canon;
        size_t nparams;
    } p[] = {
        { "gpt2", "gpt:layers=12,dim=768,heads=12,ctx=1024,vocab=50257,dropout=0", 124439808 },
        { "gpt2-medium", "gpt:layers=24,dim=1024,heads=16,ctx=1024,vocab=50257,dropout=0",
          354823168 },
        { "gpt2-large", "gpt:layers=36,dim=1280,heads=20,ctx=1024,vocab=50257,dropout=0",
          774030080 },
        { "gpt2:ctx=256,dropout=0.1",
          "gpt:layers=12,dim=768,heads=12,ctx=256,vocab=50257,dropout=0.1",
          124439808 - 768 * 768 },
    };
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) {
        rumor_model_t *m = NULL;
        CHECK_OK(rumor_model_create(p[i].spec, 0, &m));
        CHECKF(m && !strcmp(m->spec, p[i].canon) && m->nparams == p[i].nparams,
               "'%s': '%s' with %zu parameters, expected '%s' with %zu", p[i].spec,
               m ? m->spec : "(none)", m ? m->nparams : 0, p[i].canon, p[i].nparams);
        rumor_model_destroy(&m);
    }
    rumor_model_t *m = NULL;
    CHECK_ERR(rumor_model_create("gpt2:", 0, &m), RUMOR_EINVAL, "nothing after ':'");
    CHECK_ERR(rumor_model_create("gpt2:ctx=x", 0, &m), RUMOR_EINVAL, "ctx must be");
    CHECK_ERR(rumor_model_create("gpt2-xxl", 0, &m), RUMOR_EINVAL, "gpt2-medium");
    CHECK(m == NULL);
}

static void check_bad_specs(void)
{
    rumor_model_t *m = NULL;
    CHECK_ERR(rumor_model_create("cnn:1-2", 0, &m), RUMOR_EINVAL, "unknown kind");
    CHECK_ERR(rumor_model_create("mlp:784", 0, &m), RUMOR_EINVAL, "at least");
    CHECK_ERR(rumor_model_create("mlp:784-0-10", 0, &m), RUMOR_EINVAL, "width");
    CHECK_ERR(rumor_model_create("mlp:784-x", 0, &m), RUMOR_EINVAL, "width");
    CHECK_ERR(rumor_model_create("mlp:784-10:tanh", 0, &m), RUMOR_EINVAL, "unknown option");
    CHECK_ERR(rumor_model_create("mlp:784-10:dropout=1", 0, &m), RUMOR_EINVAL, "dropout");
    CHECK_ERR(rumor_model_create("gpt:layers=2,dim=10,heads=3,ctx=8,vocab=5", 0, &m),
              RUMOR_EINVAL, "not a multiple of heads");
    CHECK_ERR(rumor_model_create("gpt:layers=2,dim=8,heads=2", 0, &m), RUMOR_EINVAL,
              "are required");
    CHECK_ERR(rumor_model_create("gpt:layers=2,dim=8,heads=2,ctx=4", 0, &m), RUMOR_EINVAL,
              "vocab= is required");
    CHECK_ERR(rumor_model_create("gpt:layers=2,dim=8,heads=2,ctx=4,vocab=9,width=3", 0, &m),
              RUMOR_EINVAL, "unknown field");
    CHECK_ERR(rumor_model_create("gpt:layers=0,dim=8,heads=2,ctx=4,vocab=9", 0, &m),
              RUMOR_EINVAL, "layers");
    CHECK(m == NULL);
    /* labels and tokens outside the vocabulary, batches too large */
    fixture_t f;
    fixture_init(&f, "mlp:4-3", 2, 1, 1);
    f.y[1] = 3;
    CHECK_ERR(rumor_stage_load(f.st, 0, &f.b, 0, 2), RUMOR_EINVAL, "label 3 at row 1");
    f.b.n = 3;
    CHECK_ERR(rumor_stage_load(f.st, 0, &f.b, 0, 3), RUMOR_EINVAL, "at most 2");
    fixture_free(&f);
    fixture_init(&f, "gpt:layers=1,dim=8,heads=2,ctx=4,vocab=9", 2, 4, 1);
    f.tok[5] = 9;
    CHECK_ERR(rumor_stage_load(f.st, 0, &f.b, 0, 2), RUMOR_EINVAL, "token 9 at row 5");
    /* a stage holding the head without the embedding it is tied to keeps a
     * copy, and has no worker replicas */
    rumor_stage_t *st = NULL, *rep = NULL;
    rumor_stage_config_t c = { .model = f.m, .dev = dev, .first = 1, .last = f.m->nblocks,
                               .max_B = 2, .T = 4, .slots = 1 };
    CHECK_OK(rumor_stage_create(&c, &st));
    CHECK(st && st->tied && st->tied_lo == 0 && st->tied_n == 9 * 8);
    if (st)
        CHECK_ERR(rumor_stage_create_replica(st, dev, 2, &rep), RUMOR_ENOTSUP, "keeps a copy");
    rumor_stage_destroy(&st);
    c.first = 0;
    c.T = 5;
    CHECK_ERR(rumor_stage_create(&c, &st), RUMOR_EINVAL, "longer than the model's context");
    fixture_free(&f);
}

int main(void)
{
    if (rumor_device_open("cpu:1", &dev) < 0) {
        fprintf(stderr, "cpu device: %s\n", rumor_err_msg());
        return 1;
    }
    check_elementwise("relu", relu_f, relu_b);
    check_elementwise("gelu", gelu_f, gelu_b);
    check_elementwise("dropout", drop_f, drop_b);
    check_softmax_xent();
    check_model("mlp:7-3", 5, 1, 1, 1, 1e-2f);                    /* linear + softmax */
    check_model("mlp:12-10-8-5:gelu", 6, 1, 1, 1, 1e-2f);         /* smooth: every element */
    check_model("mlp:12-10-8-5:gelu:dropout=0.3", 6, 1, 1, 1, 1e-2f); /* keyed mask */
    check_model("mlp:12-10-8-5", 6, 1, 1, 0, 1e-3f); /* ReLU kinks: small steps */
    /* GPT: embedding, 2 transformer blocks, tied head; full and short windows */
    check_model("gpt:layers=2,dim=16,heads=4,ctx=8,vocab=11", 3, 8, 0, 1, 1e-2f);
    check_model("gpt:layers=2,dim=16,heads=4,ctx=8,vocab=11", 2, 5, 0, 1, 1e-2f);
    check_model("gpt:layers=1,dim=16,heads=2,ctx=6,vocab=7,dropout=0.2", 2, 6, 1, 1, 1e-2f);
    check_layout();
    check_canonical_specs();
    check_presets();
    check_bad_specs();
    rumor_device_close(&dev);
    return tu_finish("test_grad");
}

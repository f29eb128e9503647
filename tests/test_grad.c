/* Finite-difference gradient checks of every layer and of whole MLPs.
 *
 * Each check perturbs one input or parameter by +-eps, recomputes the scalar
 * loss with the forward pass, and compares (L+ - L-)/(2 eps) with what the
 * backward pass produced. GELU models are smooth, so every element must
 * match; ReLU has kinks where a perturbation can cross zero, so there the
 * whole gradient must match in norm and almost every element individually. */
#include "model.h"
#include "testutil.h"

static rumor_device_t *dev;

/* Loss of the model at its current parameters (dropout mask pinned). */
static double model_loss(rumor_model_t *m, const float *x, const int32_t *y, int B, int training,
                         uint64_t dropout_call)
{
    float loss;
    m->dropout_calls = dropout_call - 1; /* forward advances it to dropout_call */
    if (rumor_model_forward(m, x, y, B, training, &loss) < 0) {
        fprintf(stderr, "forward failed: %s\n", rumor_err_msg());
        exit(1);
    }
    return loss;
}

/* Checks every parameter gradient of `spec` against central differences.
 * strict: every element within tolerance; else norm + 98% of elements.
 * eps: the step; small enough not to cross ReLU kinks, large enough that
 * float32 rounding of the loss stays far below the gradient. */
static void check_model(const char *spec, int B, int training, int strict, float eps)
{
    rumor_model_t *m;
    CHECK_OK(rumor_model_create(dev, spec, B, 42, &m));
    if (!m)
        return;
    unsigned long long s = 7;
    float *x = malloc(sizeof(float) * (size_t)B * m->in_dim);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)B);
    for (int i = 0; i < B * m->in_dim; i++)
        x[i] = tu_randf(&s);
    for (int b = 0; b < B; b++)
        y[b] = (int32_t)(b % m->classes);
    /* Bias the biases away from zero so ReLU kinks are rare. */
    for (size_t i = 0; i < m->nparams; i++)
        m->params[i] += 0.05f * tu_randf(&s);

    const uint64_t call = 5;
    model_loss(m, x, y, B, training, call);
    rumor_model_zero_grad(m);
    CHECK_OK(rumor_model_backward(m));

    size_t bad = 0;
    double num = 0, den = 0;
    for (size_t i = 0; i < m->nparams; i++) {
        float saved = m->params[i];
        m->params[i] = saved + eps;
        double lp = model_loss(m, x, y, B, training, call);
        m->params[i] = saved - eps;
        double lm = model_loss(m, x, y, B, training, call);
        m->params[i] = saved;
        double fd = (lp - lm) / (2.0 * eps), g = m->grads[i];
        num += (g - fd) * (g - fd);
        den += fd * fd;
        if (fabs(g - fd) > 2e-4 + 2e-2 * fabs(fd)) {
            if (strict || bad < 3)
                fprintf(stderr, "  %s: param %zu grad %.6g fd %.6g\n", spec, i, g, fd);
            bad++;
        }
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    CHECKF(den > 0, "%s: gradient is all zero", spec);
    CHECKF(rel < (strict ? 5e-3 : 2e-2), "%s: relative gradient error %.3g", spec, rel);
    if (strict)
        CHECKF(bad == 0, "%s: %zu of %zu elements off", spec, bad, m->nparams);
    else
        CHECKF(bad <= m->nparams / 50, "%s: %zu of %zu elements off", spec, bad, m->nparams);
    fprintf(stderr, "%s: %zu params, relative error %.2e, %zu off\n", spec, m->nparams, rel, bad);
    free(x);
    free(y);
    rumor_model_destroy(&m);
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
    float z[B * C], p[B * C], l[B], g[B * C];
    int32_t y[B] = { 0, 3, 6, 2 };
    unsigned long long s = 5;
    for (int i = 0; i < B * C; i++)
        z[i] = 4.0f * tu_randf(&s);
    dev->ops->softmax_xent_forward(dev, p, l, z, y, B, C);
    dev->ops->softmax_xent_backward(dev, g, p, y, B, C, 1.0f / B);
    const float eps = 1e-2f;
    int bad = 0;
    for (int i = 0; i < B * C; i++) {
        float saved = z[i];
        double lp = 0, lm = 0;
        z[i] = saved + eps;
        dev->ops->softmax_xent_forward(dev, p, l, z, y, B, C);
        for (int b = 0; b < B; b++)
            lp += l[b] / (double)B;
        z[i] = saved - eps;
        dev->ops->softmax_xent_forward(dev, p, l, z, y, B, C);
        for (int b = 0; b < B; b++)
            lm += l[b] / (double)B;
        z[i] = saved;
        double fd = (lp - lm) / (2.0 * eps);
        if (fabs(g[i] - fd) > 2e-4 + 1e-2 * fabs(fd))
            bad++;
    }
    CHECKF(bad == 0, "softmax cross-entropy: %d of %d logits off", bad, B * C);
}

/* Blocks own contiguous, disjoint ranges covering the whole buffer, and every
 * linear layer's W and b lie inside its own block. */
static void check_layout(void)
{
    rumor_model_t *m;
    CHECK_OK(rumor_model_create(dev, "mlp:784-256-256-10:gelu:dropout=0.1", 8, 1, &m));
    if (!m)
        return;
    CHECK(m->nparams == (size_t)784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
    CHECK(m->nblocks == 3);
    CHECK(m->nlayers == 3 + 2 * 2);
    size_t expect_lo = 0;
    for (int b = 0; b < m->nblocks; b++) {
        const rumor_block_t *bk = &m->blocks[b];
        CHECK(bk->lo == expect_lo && bk->hi > bk->lo);
        expect_lo = bk->hi;
        for (int l = bk->first; l < bk->first + bk->count; l++) {
            const rumor_layer_t *L = &m->layers[l];
            if (L->kind == RUMOR_LAYER_LINEAR)
                CHECK(L->w_off == bk->lo && L->b_off + (size_t)L->out == bk->hi);
        }
    }
    CHECK(expect_lo == m->nparams);
    /* The same seed gives the same parameters; another seed does not. */
    rumor_model_t *a, *b2;
    CHECK_OK(rumor_model_create(dev, "mlp:784-256-256-10:gelu:dropout=0.1", 4, 1, &a));
    CHECK_OK(rumor_model_create(dev, "mlp:784-256-256-10:gelu:dropout=0.1", 4, 2, &b2));
    if (a && b2) {
        CHECK(memcmp(a->params, m->params, m->nparams * sizeof(float)) == 0);
        CHECK(memcmp(b2->params, m->params, m->nparams * sizeof(float)) != 0);
    }
    rumor_model_destroy(&a);
    rumor_model_destroy(&b2);
    rumor_model_destroy(&m);
    rumor_model_destroy(&m); /* safe twice */
}

static void check_bad_specs(void)
{
    rumor_model_t *m = NULL;
    CHECK_ERR(rumor_model_create(dev, "cnn:1-2", 4, 1, &m), RUMOR_EINVAL, "expected mlp");
    CHECK_ERR(rumor_model_create(dev, "mlp:784", 4, 1, &m), RUMOR_EINVAL, "at least");
    CHECK_ERR(rumor_model_create(dev, "mlp:784-0-10", 4, 1, &m), RUMOR_EINVAL, "width");
    CHECK_ERR(rumor_model_create(dev, "mlp:784-x", 4, 1, &m), RUMOR_EINVAL, "width");
    CHECK_ERR(rumor_model_create(dev, "mlp:784-10:tanh", 4, 1, &m), RUMOR_EINVAL, "unknown option");
    CHECK_ERR(rumor_model_create(dev, "mlp:784-10:dropout=1", 4, 1, &m), RUMOR_EINVAL, "dropout");
    CHECK_ERR(rumor_model_create(dev, "mlp:784-10", 0, 1, &m), RUMOR_EINVAL, "batch");
    CHECK(m == NULL);
    CHECK_OK(rumor_model_create(dev, "mlp:4-3", 2, 1, &m));
    if (m) {
        float x[8] = { 0 }, loss;
        int32_t y[2] = { 0, 3 };
        CHECK_ERR(rumor_model_forward(m, x, y, 2, 1, &loss), RUMOR_EINVAL, "label 3 at row 1");
        CHECK_ERR(rumor_model_forward(m, x, y, 3, 1, &loss), RUMOR_EINVAL, "batch 3");
    }
    rumor_model_destroy(&m);
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
    check_model("mlp:7-3", 5, 1, 1, 1e-2f);                    /* linear + softmax */
    check_model("mlp:12-10-8-5:gelu", 6, 1, 1, 1e-2f);         /* smooth: every element */
    check_model("mlp:12-10-8-5:gelu:dropout=0.3", 6, 1, 1, 1e-2f); /* pinned mask */
    check_model("mlp:12-10-8-5", 6, 1, 0, 1e-3f); /* ReLU kinks: small steps */
    check_layout();
    check_bad_specs();
    rumor_device_close(&dev);
    return tu_finish("test_grad");
}

/* Models over one flat parameter buffer (see model.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define MAX_LAYERS 64

/* splitmix64: a small, portable generator for parameter init, so every peer
 * (and every platform) draws the same initial model from the same seed. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double next_uniform(uint64_t *s) /* [0,1) */
{
    return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Parses "mlp:784-256-256-10[:relu|:gelu][:dropout=P]" into dims and options. */
static int parse_spec(const char *spec, int *dims, int *ndims, rumor_layer_kind *act,
                      float *dropout)
{
    const char *s = spec;
    *ndims = 0;
    *act = RUMOR_LAYER_RELU;
    *dropout = 0.0f;
    if (strncmp(s, "mlp:", 4) != 0)
        return rumor_err_set(RUMOR_EINVAL, "model '%s': expected mlp:D0-D1-...-Dn (e.g. mlp:784-256-256-10)",
                             spec);
    s += 4;
    for (;;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > (1 << 20))
            return rumor_err_set(RUMOR_EINVAL,
                                 "model '%s': layer width at offset %d must be an integer in [1, 1048576]",
                                 spec, (int)(s - spec));
        if (*ndims == MAX_LAYERS)
            return rumor_err_set(RUMOR_EINVAL, "model '%s': more than %d layers", spec, MAX_LAYERS);
        dims[(*ndims)++] = (int)v;
        s = end;
        if (*s == '-') {
            s++;
            continue;
        }
        break;
    }
    if (*ndims < 2)
        return rumor_err_set(RUMOR_EINVAL, "model '%s': needs at least an input and an output width",
                             spec);
    while (*s == ':') {
        s++;
        if (strncmp(s, "relu", 4) == 0 && (s[4] == ':' || s[4] == '\0')) {
            *act = RUMOR_LAYER_RELU;
            s += 4;
        } else if (strncmp(s, "gelu", 4) == 0 && (s[4] == ':' || s[4] == '\0')) {
            *act = RUMOR_LAYER_GELU;
            s += 4;
        } else if (strncmp(s, "dropout=", 8) == 0) {
            char *end;
            double p = strtod(s + 8, &end);
            if (end == s + 8 || !(p >= 0.0 && p < 1.0) || (*end != ':' && *end != '\0'))
                return rumor_err_set(RUMOR_EINVAL, "model '%s': dropout must be a number in [0, 1)",
                                     spec);
            *dropout = (float)p;
            s = end;
        } else {
            return rumor_err_set(RUMOR_EINVAL,
                                 "model '%s': unknown option at offset %d (expected relu, gelu or dropout=P)",
                                 spec, (int)(s - spec));
        }
    }
    if (*s != '\0')
        return rumor_err_set(RUMOR_EINVAL, "model '%s': unexpected text at offset %d", spec,
                             (int)(s - spec));
    return 0;
}

static int alloc_buffers(rumor_model_t *m)
{
    const rumor_ops_t *ops = m->dev->ops;
    int widest = m->in_dim;
    for (int l = 0; l < m->nlayers; l++)
        widest = m->layers[l].out > widest ? m->layers[l].out : widest;
    size_t B = (size_t)m->max_batch;
    m->params = ops->alloc(m->dev, m->nparams * sizeof(float));
    m->grads = ops->alloc(m->dev, m->nparams * sizeof(float));
    m->act = calloc((size_t)m->nlayers + 1, sizeof *m->act);
    if (!m->params || !m->grads || !m->act)
        return rumor_err_set(RUMOR_ENOMEM, "model: cannot allocate %zu parameters", m->nparams);
    m->act[0] = ops->alloc(m->dev, B * (size_t)m->in_dim * sizeof(float));
    if (!m->act[0])
        return RUMOR_ENOMEM;
    for (int l = 0; l < m->nlayers; l++) {
        m->act[l + 1] = ops->alloc(m->dev, B * (size_t)m->layers[l].out * sizeof(float));
        if (!m->act[l + 1])
            return RUMOR_ENOMEM;
    }
    for (int i = 0; i < 2; i++)
        if (!(m->dbuf[i] = ops->alloc(m->dev, B * (size_t)widest * sizeof(float))))
            return RUMOR_ENOMEM;
    m->probs = ops->alloc(m->dev, B * (size_t)m->classes * sizeof(float));
    m->losses = ops->alloc(m->dev, B * sizeof(float));
    m->labels = ops->alloc(m->dev, B * sizeof(int32_t));
    m->host_losses = calloc(B, sizeof(float));
    m->host_probs = calloc(B * (size_t)m->classes, sizeof(float));
    m->host_labels = calloc(B, sizeof(int32_t));
    if (!m->probs || !m->losses || !m->labels || !m->host_losses || !m->host_probs ||
        !m->host_labels)
        return rumor_err_set(RUMOR_ENOMEM, "model: cannot allocate activations for batch %d",
                             m->max_batch);
    return 0;
}

int rumor_model_create(rumor_device_t *dev, const char *spec, int max_batch, uint64_t seed,
                       rumor_model_t **out)
{
    int dims[MAX_LAYERS], nd;
    rumor_layer_kind act;
    float dropout;
    *out = NULL;
    RUMOR_CHECK(parse_spec(spec, dims, &nd, &act, &dropout));
    if (max_batch < 1 || max_batch > (1 << 20))
        return rumor_err_set(RUMOR_EINVAL, "model: batch size %d out of range [1, 1048576]",
                             max_batch);

    rumor_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return rumor_err_set(RUMOR_ENOMEM, "model: out of memory");
    m->dev = dev;
    snprintf(m->spec, sizeof m->spec, "%s", spec);
    m->in_dim = dims[0];
    m->classes = dims[nd - 1];
    m->max_batch = max_batch;
    m->seed = seed;
    int nlin = nd - 1;
    m->layers = calloc((size_t)nlin * 3, sizeof *m->layers);
    m->blocks = calloc((size_t)nlin, sizeof *m->blocks);
    if (!m->layers || !m->blocks) {
        rumor_model_destroy(&m);
        return rumor_err_set(RUMOR_ENOMEM, "model: out of memory");
    }
    /* One block per linear layer with the activation (and dropout) after it;
     * each block's parameters are W then b, blocks back to back. */
    size_t off = 0;
    for (int i = 0; i < nlin; i++) {
        rumor_block_t *b = &m->blocks[m->nblocks++];
        b->first = m->nlayers;
        b->lo = off;
        rumor_layer_t *L = &m->layers[m->nlayers++];
        L->kind = RUMOR_LAYER_LINEAR;
        L->in = dims[i];
        L->out = dims[i + 1];
        L->w_off = off;
        off += (size_t)L->in * (size_t)L->out;
        L->b_off = off;
        off += (size_t)L->out;
        if (i < nlin - 1) {
            rumor_layer_t *A = &m->layers[m->nlayers++];
            A->kind = act;
            A->in = A->out = dims[i + 1];
            if (dropout > 0.0f) {
                rumor_layer_t *D = &m->layers[m->nlayers++];
                D->kind = RUMOR_LAYER_DROPOUT;
                D->in = D->out = dims[i + 1];
                D->p = dropout;
            }
        }
        b->hi = off;
        b->count = m->nlayers - b->first;
    }
    m->nparams = off;
    m->owns_params = 1;
    int rc = alloc_buffers(m);
    if (rc == 0)
        rc = rumor_model_init_params(m, seed);
    if (rc < 0) {
        rumor_model_destroy(&m);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    *out = m;
    return 0;
}

void rumor_model_destroy(rumor_model_t **mp)
{
    if (!mp || !*mp)
        return;
    rumor_model_t *m = *mp;
    const rumor_ops_t *ops = m->dev->ops;
    if (m->act)
        for (int l = 0; l <= m->nlayers; l++)
            ops->free(m->dev, m->act[l]);
    free(m->act);
    for (int i = 0; i < 2; i++)
        ops->free(m->dev, m->dbuf[i]);
    if (m->owns_params)
        ops->free(m->dev, m->params);
    ops->free(m->dev, m->grads);
    ops->free(m->dev, m->probs);
    ops->free(m->dev, m->losses);
    ops->free(m->dev, m->labels);
    free(m->host_losses);
    free(m->host_probs);
    free(m->host_labels);
    free(m->layers);
    free(m->blocks);
    free(m);
    *mp = NULL;
}

int rumor_model_create_replica(const rumor_model_t *m, rumor_device_t *dev, int max_batch,
                               int stream, rumor_model_t **out)
{
    if (dev->kind != RUMOR_DEV_CPU || m->dev->kind != RUMOR_DEV_CPU)
        return rumor_err_set(RUMOR_ENOTSUP, "model: replicas share host memory (CPU only)");
    RUMOR_CHECK(rumor_model_create(dev, m->spec, max_batch, m->seed, out));
    rumor_model_t *r = *out;
    dev->ops->free(dev, r->params);
    r->params = m->params;
    r->owns_params = 0;
    r->seed = m->seed + 0x9e3779b97f4a7c15ULL * (uint64_t)stream;
    return 0;
}

/* Weights of a linear layer followed by an activation: He-uniform,
 * U(-sqrt(6/I), sqrt(6/I)), which keeps ReLU activations' variance steady;
 * the output layer: U(-1/sqrt(I), 1/sqrt(I)) (PyTorch's default). Biases 0. */
int rumor_model_init_params(rumor_model_t *m, uint64_t seed)
{
    float *host = malloc(m->nparams * sizeof(float));
    if (!host)
        return rumor_err_set(RUMOR_ENOMEM, "model: out of memory");
    uint64_t s = seed ^ 0x72756d6f72ULL; /* "rumor" */
    for (int l = 0; l < m->nlayers; l++) {
        const rumor_layer_t *L = &m->layers[l];
        if (L->kind != RUMOR_LAYER_LINEAR)
            continue;
        int last = (l == m->nlayers - 1);
        double bound = last ? 1.0 / sqrt((double)L->in) : sqrt(6.0 / (double)L->in);
        size_t nw = (size_t)L->in * (size_t)L->out;
        for (size_t i = 0; i < nw; i++)
            host[L->w_off + i] = (float)((2.0 * next_uniform(&s) - 1.0) * bound);
        memset(host + L->b_off, 0, (size_t)L->out * sizeof(float));
    }
    int rc = m->dev->ops->upload(m->dev, m->params, host, m->nparams * sizeof(float));
    free(host);
    return rc;
}

void rumor_model_zero_grad(rumor_model_t *m)
{
    m->dev->ops->scale(m->dev, m->grads, 0.0f, m->nparams);
}

int rumor_model_forward(rumor_model_t *m, const float *x, const int32_t *labels, int batch,
                        int training, float *loss)
{
    rumor_device_t *d = m->dev;
    const rumor_ops_t *ops = d->ops;
    if (batch < 1 || batch > m->max_batch)
        return rumor_err_set(RUMOR_EINVAL, "model: batch %d out of range [1, %d]", batch,
                             m->max_batch);
    for (int b = 0; b < batch; b++)
        if (labels[b] < 0 || labels[b] >= m->classes)
            return rumor_err_set(RUMOR_EINVAL, "model: label %d at row %d out of range [0, %d)",
                                 (int)labels[b], b, m->classes);
    RUMOR_CHECK(ops->upload(d, m->act[0], x, (size_t)batch * (size_t)m->in_dim * sizeof(float)));
    RUMOR_CHECK(ops->upload(d, m->labels, labels, (size_t)batch * sizeof(int32_t)));
    m->batch = batch;
    m->training = training;
    if (training)
        m->dropout_calls++;
    for (int l = 0; l < m->nlayers; l++) {
        const rumor_layer_t *L = &m->layers[l];
        const float *in = m->act[l];
        float *out = m->act[l + 1];
        size_t n = (size_t)batch * (size_t)L->out;
        switch (L->kind) {
        case RUMOR_LAYER_LINEAR:
            /* out (B,O) = in (B,I) W^T (I,O) + b */
            ops->gemm(d, 0, 1, batch, L->out, L->in, 1.0f, in, L->in, m->params + L->w_off, L->in,
                      0.0f, out, L->out);
            ops->add_bias(d, out, m->params + L->b_off, batch, L->out);
            break;
        case RUMOR_LAYER_RELU:
            ops->relu_forward(d, out, in, n);
            break;
        case RUMOR_LAYER_GELU:
            ops->gelu_forward(d, out, in, n);
            break;
        case RUMOR_LAYER_DROPOUT:
            if (training)
                ops->dropout_forward(d, out, in, n, L->p,
                                     m->seed * 0x2545f4914f6cdd1dULL + m->dropout_calls * 1315423911ULL + (uint64_t)l);
            else
                ops->copy(d, out, in, n * sizeof(float));
            break;
        }
    }
    ops->softmax_xent_forward(d, m->probs, m->losses, m->act[m->nlayers], m->labels, batch,
                              m->classes);
    RUMOR_CHECK(ops->download(d, m->host_losses, m->losses, (size_t)batch * sizeof(float)));
    double sum = 0.0;
    for (int b = 0; b < batch; b++)
        sum += m->host_losses[b];
    *loss = (float)(sum / batch);
    return 0;
}

int rumor_model_backward(rumor_model_t *m)
{
    /* the gradient of the mean loss: dlogits = (probs - onehot) / B */
    return rumor_model_backward_scaled(m, m->batch > 0 ? 1.0f / (float)m->batch : 0.0f);
}

int rumor_model_backward_scaled(rumor_model_t *m, float scale)
{
    rumor_device_t *d = m->dev;
    const rumor_ops_t *ops = d->ops;
    int B = m->batch;
    if (B < 1)
        return rumor_err_set(RUMOR_ESTATE, "model: backward without a forward");
    float *dy = m->dbuf[0], *dx = m->dbuf[1];
    ops->softmax_xent_backward(d, dy, m->probs, m->labels, B, m->classes, scale);
    for (int l = m->nlayers - 1; l >= 0; l--) {
        const rumor_layer_t *L = &m->layers[l];
        const float *in = m->act[l];
        size_t n = (size_t)B * (size_t)L->out;
        switch (L->kind) {
        case RUMOR_LAYER_LINEAR:
            /* dW (O,I) += dy^T (O,B) in (B,I); db (O) += sum_B dy */
            ops->gemm(d, 1, 0, L->out, L->in, B, 1.0f, dy, L->out, in, L->in,
                      m->grad_overwrite ? 0.0f : 1.0f, m->grads + L->w_off, L->in);
            ops->sum_rows(d, m->grads + L->b_off, dy, B, L->out, m->grad_overwrite ? 0.0f : 1.0f);
            if (l > 0) /* dx (B,I) = dy (B,O) W (O,I) */
                ops->gemm(d, 0, 0, B, L->in, L->out, 1.0f, dy, L->out, m->params + L->w_off,
                          L->in, 0.0f, dx, L->in);
            break;
        case RUMOR_LAYER_RELU:
            ops->relu_backward(d, dx, in, dy, n);
            break;
        case RUMOR_LAYER_GELU:
            ops->gelu_backward(d, dx, in, dy, n);
            break;
        case RUMOR_LAYER_DROPOUT:
            if (m->training)
                ops->dropout_backward(d, dx, dy, n, L->p,
                                      m->seed * 0x2545f4914f6cdd1dULL + m->dropout_calls * 1315423911ULL + (uint64_t)l);
            else
                ops->copy(d, dx, dy, n * sizeof(float));
            break;
        }
        float *t = dy;
        dy = dx;
        dx = t;
    }
    return ops->sync(d);
}

int rumor_model_correct(rumor_model_t *m)
{
    const rumor_ops_t *ops = m->dev->ops;
    size_t n = (size_t)m->batch * (size_t)m->classes;
    RUMOR_CHECK(ops->download(m->dev, m->host_probs, m->probs, n * sizeof(float)));
    RUMOR_CHECK(ops->download(m->dev, m->host_labels, m->labels, (size_t)m->batch * sizeof(int32_t)));
    int correct = 0;
    for (int b = 0; b < m->batch; b++) {
        const float *r = m->host_probs + (size_t)b * m->classes;
        int best = 0;
        for (int c = 1; c < m->classes; c++)
            if (r[c] > r[best])
                best = c;
        correct += (best == m->host_labels[b]);
    }
    return correct;
}

int rumor_model_evaluate(rumor_model_t *m, const float *x, const int32_t *y, int n,
                         double *accuracy, double *loss)
{
    long correct = 0;
    double total = 0.0;
    for (int i = 0; i < n; i += m->max_batch) {
        int b = n - i < m->max_batch ? n - i : m->max_batch;
        float l;
        RUMOR_CHECK(rumor_model_forward(m, x + (size_t)i * m->in_dim, y + i, b, 0, &l));
        int c = rumor_model_correct(m);
        RUMOR_CHECK(c);
        correct += c;
        total += (double)l * b;
    }
    *accuracy = n ? (double)correct / n : 0.0;
    *loss = n ? total / n : 0.0;
    return 0;
}

void rumor_model_bind_params(rumor_model_t *m, float *params)
{
    if (m->owns_params && m->params != params)
        m->dev->ops->free(m->dev, m->params);
    m->owns_params = 0;
    m->params = params;
}

int rumor_model_get_params(const rumor_model_t *m, float *host)
{
    return m->dev->ops->download(m->dev, host, m->params, m->nparams * sizeof(float));
}

int rumor_model_set_params(rumor_model_t *m, const float *host)
{
    return m->dev->ops->upload(m->dev, m->params, host, m->nparams * sizeof(float));
}

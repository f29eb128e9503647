/* Compressed gossip: CHOCO-SGD's consensus (Koloskova, Stich and Jaggi
 * 2019, Algorithm 2) inside the synchronous mixer (see the codec field of
 * rumor_mixer_config_t). Runs on the comm thread.
 *
 * Round k, this peer i with parameters x (the caller's, read only while
 * the caller computes its gradient at x):
 *   keyframe (k % R == 0):  x_hat = x, and x goes out in f32; the mix of the
 *                           round is then s = sum_j W_ij x_hat_j exactly;
 *   otherwise:              q = C(x - x_hat) goes out coded, x_hat += q;
 *                           the mix of the round is sum_j W_ij q_j (the
 *                           mixer mixes q as it mixes x), added into s.
 * At the end of the round x(k+1) = x + gamma (s - x_hat).
 *
 * s is only right while every neighbour's copy x_hat_j moved by exactly
 * what it sent: a neighbour that sent part of a round, one that came back
 * or left (its weight moved to or from the self-weight), a change of
 * weights, a jump: from then until the next complete keyframe the copies
 * are out of sync and the consensus step is skipped (counted). A
 * neighbour absent from a keyframe on stays tracked as this peer's own
 * copy (the mixer gives its weight to the self-weight), consistently,
 * as long as it stays away. */
#include <stdlib.h>
#include <string.h>

#include "mixer_int.h"
#include "rng.h"

static float *alloc_floats(size_t n)
{
    float *p = NULL;
    if (posix_memalign((void **)&p, 64, n * sizeof(float) + 64) != 0)
        return NULL;
    return p;
}

int mx_choco_alloc(rumor_mixer_t *m)
{
    struct mx_choco *ch = &m->ch;
    const rumor_mixer_config_t *cfg = &m->cfg;
    if (cfg->codec.kind == RUMOR_CODEC_NONE)
        return 0;
    char name[48];
    rumor_codec_format(&cfg->codec, name, sizeof name);
    if (cfg->async)
        return rumor_err_set(RUMOR_EINVAL, "mixer: compressed gossip (%s) needs synchronous "
                                           "rounds, not asynchronous gossip",
                             name);
    ch->gamma = cfg->consensus_step > 0 ? cfg->consensus_step
                                        : rumor_codec_default_gamma(&cfg->codec);
    if (!(ch->gamma > 0.0) || ch->gamma > 1.0)
        return rumor_err_set(RUMOR_EINVAL, "mixer: consensus step %g outside (0, 1]",
                             ch->gamma);
    ch->keyframe_every = cfg->keyframe_every > 0 ? cfg->keyframe_every
                                                 : rumor_codec_default_keyframe(&cfg->codec);
    if (m->chunk >= ((size_t)1 << 32))
        return rumor_err_set(RUMOR_EINVAL, "mixer: compressed chunks hold fewer than 2^32 "
                                           "elements, not %zu",
                             m->chunk);
    ch->dtype = rumor_codec_dtype(&cfg->codec);
    ch->xhat = alloc_floats(m->n);
    ch->s = alloc_floats(m->n);
    ch->scratch = alloc_floats(m->chunk);
    ch->kw = calloc((size_t)m->npeers, sizeof *ch->kw);
    ch->cw = calloc((size_t)m->npeers, sizeof *ch->cw);
    if (!ch->xhat || !ch->s || !ch->scratch || !ch->kw || !ch->cw)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory for compressed gossip");
    ch->on = 1;
    ch->q_round = -1;
    return 0;
}

void mx_choco_free(rumor_mixer_t *m)
{
    struct mx_choco *ch = &m->ch;
    free(ch->xhat);
    free(ch->s);
    free(ch->scratch);
    free(ch->kw);
    free(ch->cw);
    for (int i = 0; i < MX_MAX_BUFS; i++)
        if (ch->code[i]) {
            free(ch->code[i]->bytes);
            free(ch->code[i]->nbytes);
            free(ch->code[i]->aux);
            free(ch->code[i]);
        }
    memset(ch, 0, sizeof *ch);
}

int mx_choco_keyframe(const rumor_mixer_t *m, long k)
{
    return m->ch.on && k % m->ch.keyframe_every == 0;
}

int mx_choco_dtype(const rumor_mixer_t *m, long r)
{
    return !m->ch.on || mx_choco_keyframe(m, r) ? RUMOR_WIRE_DT_F32 : m->ch.dtype;
}

static int buf_index(const rumor_mixer_t *m, const rumor_sendbuf_t *b)
{
    for (int i = 0; i < m->nbufs; i++)
        if (m->bufs[i] == b)
            return i;
    return -1;
}

const struct mx_code *mx_choco_code(const rumor_mixer_t *m, const rumor_sendbuf_t *buf)
{
    if (!m->ch.on)
        return NULL;
    int i = buf_index(m, buf);
    return i >= 0 && m->ch.code[i] && m->ch.code[i]->coded ? m->ch.code[i] : NULL;
}

static struct mx_code *code_for(rumor_mixer_t *m, const rumor_sendbuf_t *buf)
{
    int i = buf_index(m, buf);
    if (i < 0)
        return NULL;
    struct mx_code *c = m->ch.code[i];
    if (c)
        return c;
    c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->stride = rumor_codec_bytes(&m->cfg.codec, m->chunk);
    c->bytes = malloc(m->nchunks * c->stride);
    c->nbytes = calloc(m->nchunks, sizeof *c->nbytes);
    c->aux = calloc(m->nchunks, sizeof *c->aux);
    if (!c->bytes || !c->nbytes || !c->aux) {
        free(c->bytes);
        free(c->nbytes);
        free(c->aux);
        free(c);
        return NULL;
    }
    m->ch.code[i] = c;
    return c;
}

rumor_sendbuf_t *mx_choco_begin(rumor_mixer_t *m, long k, rumor_sendbuf_t *buf)
{
    struct mx_choco *ch = &m->ch;
    const rumor_ops_t *ops = m->dev->ops;
    ch->q = NULL;
    ch->q_round = -1;
    if (mx_choco_keyframe(m, k)) {
        struct mx_code *c = code_for(m, buf);
        if (c)
            c->coded = 0;
        RUMOR_IGNORE(ops->copy(m->dev, ch->xhat, buf->data, m->n * sizeof(float)));
        return buf;
    }
    rumor_sendbuf_t *q = mx_buf_get(m);
    struct mx_code *c = q ? code_for(m, q) : NULL;
    if (!c) {
        rumor_warn("mixer: round %ld: no memory for its coded copy; sending nothing", k);
        if (q)
            mx_buf_retire(m, q);
        return NULL;
    }
    /* q = C(x - x_hat), decoded in place: exactly what the neighbours add */
    RUMOR_IGNORE(ops->copy(m->dev, q->data, buf->data, m->n * sizeof(float)));
    ops->axpy(m->dev, q->data, -1.0f, ch->xhat, m->n);
    for (size_t i = 0; i < m->nchunks; i++) {
        uint64_t off, len;
        RUMOR_IGNORE(rumor_wire_chunk_range(m->n, m->chunk, i, &off, &len));
        uint64_t seed = rumor_mix64(m->incarnation ^ rumor_mix64(m->ids[m->self])) ^
                        rumor_mix64((uint64_t)k * m->nchunks + i + 1);
        if (rumor_codec_encode(&m->cfg.codec, q->data + off, (size_t)len, seed,
                               c->bytes + i * c->stride, &c->aux[i], q->data + off,
                               ch->scratch) < 0) {
            rumor_warn("mixer: round %ld: %s; sending nothing", k, rumor_err_msg());
            mx_buf_retire(m, q);
            return NULL;
        }
        c->nbytes[i] = rumor_codec_payload_bytes(ch->dtype, len, c->aux[i]);
    }
    ops->axpy(m->dev, ch->xhat, 1.0f, q->data, m->n);
    c->coded = 1;
    ch->q = q;
    ch->q_round = k;
    return q;
}

void mx_choco_finish(rumor_mixer_t *m, const struct mx_slot *s, long k, rumor_sendbuf_t *out,
                     double *dis)
{
    struct mx_choco *ch = &m->ch;
    const rumor_ops_t *ops = m->dev->ops;
    int kf = mx_choco_keyframe(m, k), partial = 0;
    memset(ch->cw, 0, (size_t)m->npeers * sizeof *ch->cw);
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        uint64_t got = s->cov[j].covered;
        if (got == m->n)
            ch->cw[j] = s->w_of[j];
        else if (got > 0)
            partial = 1;
    }
    int sent = kf ? m->sent_round == k : ch->q != NULL && ch->q_round == k;
    int valid;
    if (kf) {
        valid = sent && !partial;
        memcpy(ch->kw, ch->cw, (size_t)m->npeers * sizeof *ch->kw);
    } else {
        valid = ch->valid && sent && !partial &&
                memcmp(ch->kw, ch->cw, (size_t)m->npeers * sizeof *ch->kw) == 0;
    }
    ch->valid = valid;
    float *o = out->data;
    const float *x = m->params->data;
    *dis = 0;
    if (valid) {
        if (kf)
            RUMOR_IGNORE(ops->copy(m->dev, ch->s, o, m->n * sizeof(float)));
        else
            ops->axpy(m->dev, ch->s, 1.0f, o, m->n);
        /* o = x + gamma (s - x_hat) */
        RUMOR_IGNORE(ops->copy(m->dev, o, ch->s, m->n * sizeof(float)));
        ops->axpy(m->dev, o, -1.0f, ch->xhat, m->n);
        RUMOR_IGNORE(ops->sumsq(m->dev, o, m->n, dis, NULL));
        ops->axpby(m->dev, o, 1.0f, x, (float)ch->gamma, m->n);
    } else {
        RUMOR_IGNORE(ops->copy(m->dev, o, x, m->n * sizeof(float)));
        m->counters.consensus_skipped++;
    }
    ch->keyframe_closed = kf;
    ch->skipped_closed = !valid;
    if (ch->q) { /* sent while it is still referenced: recycled when done */
        mx_buf_retire(m, ch->q);
        ch->q = NULL;
        ch->q_round = -1;
    }
}

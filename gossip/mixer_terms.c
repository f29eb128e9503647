/* Neighbours this peer does not mix with (see mixer.h): those whose terms
 * differ (cfg.terms, terms.h), said once and for good while they run so,
 * and outliers (cfg.outlier_ratio), whose parameters are implausibly far
 * from this peer's, left out round by round. Runs on the comm thread; what
 * the caller reads is published (m->pub, under pub_mu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer_int.h"
#include "terms.h"

#define OUTLIER_SAY_EVERY_S 10.0 /* an outlier's warning, at most this often a neighbour */
#define OUTLIER_FLOOR_RMS 0.01   /* the norm compared with is at least this per element */

int mx_terms_alloc(rumor_mixer_t *m)
{
    m->incompatible = calloc((size_t)m->npeers, 1);
    m->incompat_told = calloc((size_t)m->npeers, 1);
    m->outlier_said = calloc((size_t)m->npeers, sizeof *m->outlier_said);
    if (!m->incompatible || !m->incompat_told || !m->outlier_said)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    return 0;
}

void mx_terms_free(rumor_mixer_t *m)
{
    free(m->incompatible);
    free(m->incompat_told);
    free(m->outlier_said);
    free(m->outlier_own0);
}

void mx_terms_forget(rumor_mixer_t *m, int node)
{
    if (!m->incompatible[node])
        return;
    m->incompatible[node] = 0;
    m->incompat_told[node] = 0;
    if (m->talks_to[node])
        m->nincompat--;
    m->counters.incompatible = m->nincompat;
}

/* Publishes how many neighbours are incompatible (the barrier does not
 * wait for them) and whether all are: all only once each was told this
 * peer's terms (a HELLO sent after) or has left, so that a peer that stops
 * for it does not leave its neighbours waiting for an answer that never
 * comes: they stop too, saying why. */
void mx_terms_publish(rumor_mixer_t *m)
{
    int all = m->ntalk > 0;
    for (int j = 0; j < m->npeers; j++)
        if (m->talks_to[j] && !(m->incompatible[j] && (m->incompat_told[j] || m->left[j])))
            all = 0;
    m->incompat_all = all;
    pthread_mutex_lock(&m->pub_mu);
    m->pub.incompat_all = all;
    m->pub.counters.incompatible = m->nincompat;
    if (!m->pub.incompat_err[0])
        snprintf(m->pub.incompat_err, sizeof m->pub.incompat_err, "%s", m->incompat_err);
    pthread_mutex_unlock(&m->pub_mu);
}

/* node's terms differ as `what` says: left out from now on, said once. */
static void mark_incompatible(rumor_mixer_t *m, int node, const char *what)
{
    if (m->incompatible[node])
        return;
    m->incompatible[node] = 1;
    if (m->talks_to[node])
        m->nincompat++;
    m->counters.incompatible = m->nincompat;
    char name[48], msg[sizeof m->incompat_err];
    snprintf(msg, sizeof msg, "%s (%s) runs %s; this peer does not mix with it",
             mx_peer_name(m, node, name, sizeof name), mx_endpoint_name(m, node), what);
    rumor_error("%s", msg);
    if (!m->incompat_err[0]) /* the first difference: the one a failure names */
        snprintf(m->incompat_err, sizeof m->incompat_err, "%s", msg);
    mx_terms_publish(m);
}

int mx_terms_judge(rumor_mixer_t *m, int node, const void *body, size_t len, uint64_t space)
{
    if (!m->cfg.terms || !body)
        return 0; /* nothing to compare: a peer that states no terms is taken as it is */
    rumor_terms_diff_t df;
    char what[1200];
    int d = rumor_terms_compare(m->cfg.terms, body, len, &df);
    if (d < 0)
        return -RUMOR_WIRE_BAD_FRAMES; /* a body that is no terms */
    if (d == 1)
        snprintf(what, sizeof what, "--%s %s, this peer --%s %s: every peer of a swarm must use "
                                    "the same --%s",
                 df.key, df.theirs, df.key, df.mine, df.key);
    if (d == 0 && space != m->n) { /* the same stated terms, another model size */
        snprintf(what, sizeof what, "a model of %llu parameters, this peer one of %zu: every "
                                    "peer of a swarm must train the same model",
                 (unsigned long long)space, m->n);
        d = 1;
    }
    if (d == 0) {
        if (m->incompatible[node]) { /* restarted with this peer's terms */
            char name[48];
            rumor_info("%s now runs this peer's settings: mixed with again",
                       mx_peer_name(m, node, name, sizeof name));
            mx_terms_forget(m, node);
            mx_terms_publish(m);
        }
        return 0;
    }
    mark_incompatible(m, node, what);
    m->last_heard[node] = rumor_now(); /* it speaks: a leaving peer tells it (mx_untold_retry) */
    /* it learns this peer's terms too (after the rank check: before it,
     * this peer says nothing to anyone) */
    if (m->rank_state == 2 && m->talks_to[node])
        (void)mx_send_control(m, node, RUMOR_WIRE_HELLO, 2);
    rumor_err_set(RUMOR_EPROTO, "%s", what);
    return -RUMOR_WIRE_INCOMPATIBLE;
}

void mx_terms_told(rumor_mixer_t *m, int node)
{
    if (!m->incompatible[node] || m->incompat_told[node])
        return;
    m->incompat_told[node] = 1;
    mx_terms_publish(m);
}

int mx_terms_all_incompatible(rumor_mixer_t *m)
{
    pthread_mutex_lock(&m->pub_mu);
    int all = m->pub.incompat_all;
    char msg[sizeof m->pub.incompat_err];
    if (all)
        snprintf(msg, sizeof msg, "%s", m->pub.incompat_err);
    pthread_mutex_unlock(&m->pub_mu);
    if (all)
        rumor_err_set(RUMOR_EINVAL, "%s; no neighbour is left to mix with", msg);
    return all;
}

void mx_terms_all_msg(const rumor_mixer_t *m, char *msg, size_t cap)
{
    snprintf(msg, cap, "%s; no neighbour is left to mix with", m->incompat_err);
}

int rumor_mixer_incompatible(rumor_mixer_t *m)
{
    return mx_terms_all_incompatible(m);
}

/* ------------------------------------------------------- outliers */

struct dist_ctx {
    const float *x; /* this peer's own parameters, the range's first element */
    double d2, n2;
};

static void dist_block(rumor_mixer_t *m, void *ctx, const float *p, size_t at, size_t n)
{
    (void)m;
    struct dist_ctx *c = ctx;
    const float *x = c->x + at;
    /* 16 partial sums in float over 1024 elements (GCC vectorizes that at
     * -O2), added up in double */
    for (size_t b = 0; b < n; b += 1024) {
        size_t e = n - b < 1024 ? n : b + 1024, i = b;
        float pd[16] = { 0 }, pn[16] = { 0 };
        for (; i + 16 <= e; i += 16)
            for (int j = 0; j < 16; j++) {
                float d = p[i + j] - x[i + j];
                pd[j] += d * d;
                pn[j] += x[i + j] * x[i + j];
            }
        for (; i < e; i++) {
            float d = p[i] - x[i];
            pd[0] += d * d;
            pn[0] += x[i] * x[i];
        }
        for (int j = 0; j < 16; j++) {
            c->d2 += pd[j];
            c->n2 += pn[j];
        }
    }
}

/* This peer's own x(round) once it began the round, else the round
 * before's (a range sent ahead): a step apart, the same scale; before its
 * first round went out, a copy of the parameters it was made with (the
 * caller steps its own meanwhile; none when a device copies them in). */
const float *mx_robust_own(const rumor_mixer_t *m, const struct mx_slot *s)
{
    /* (the send buffer is held while it is the last one sent: it does not
     * go back to the pool and get written) */
    return s->x          ? s->x
           : m->sent_buf ? m->sent_buf->data
           : m->sent_round < 0 && !m->params_ready ? m->outlier_own0
                                                   : NULL;
}

int mx_outlier_check(rumor_mixer_t *m, struct mx_slot *s, const rumor_wire_hdr_t *h, int node,
                     const void *data)
{
    m->rb.scale = 1.0;
    if ((m->cfg.outlier_ratio <= 0 && !m->cfg.robust) || m->cfg.async ||
        h->dtype != RUMOR_WIRE_DT_F32)
        return 0;
    if (s->outlier[node]) {
        rumor_err_set(RUMOR_EPROTO, "round %ld: this neighbour is left out as %s", s->round,
                      mx_robust_quarantined(m, node) ? "quarantined" : "an outlier");
        return -RUMOR_WIRE_OUTLIER;
    }
    const float *own = mx_robust_own(m, s);
    if (!own && m->cfg.robust) {
        /* nothing to judge by: robust mixing leaves it out of the round */
        s->outlier[node] = 1;
        mx_slot_x_known(m, s);
        rumor_err_set(RUMOR_EPROTO, "round %ld: no parameters of this peer's to judge it by",
                      s->round);
        return -RUMOR_WIRE_OUTLIER;
    }
    if (!own)
        return 0;
    struct dist_ctx c = { own + h->offset, 0, 0 };
    mx_payload_blocks(m, RUMOR_WIRE_DT_F32, 0, data, h->length, dist_block, &c);
    if (m->cfg.robust) { /* the same sums serve robust mixing (mixer_robust.c) */
        int v = mx_robust_judge(m, s, node, c.d2, c.n2, h->length);
        if (v < 0)
            return v;
    }
    /* over all its ranges of the round so far: a short range (a model's
     * last few biases) says little alone */
    s->od2[node] += c.d2;
    s->on2[node] += c.n2;
    s->olen[node] += h->length;
    double d = sqrt(s->od2[node]), norm = sqrt(s->on2[node]);
    double floor = OUTLIER_FLOOR_RMS * sqrt((double)s->olen[node]);
    double ref = norm > floor ? norm : floor;
    if (m->cfg.outlier_ratio <= 0 || d <= m->cfg.outlier_ratio * ref)
        return 0;
    /* left out of this round: its weight goes to this peer's own, as for a
     * neighbour that missed the deadline; cells that waited for it mix */
    s->outlier[node] = 1;
    m->counters.outlier_rounds++;
    double now = rumor_now();
    if (now - m->outlier_said[node] >= OUTLIER_SAY_EVERY_S) {
        m->outlier_said[node] = now;
        char name[48];
        rumor_warn("%s (%s): its parameters are %.3g times this peer's norm away from them "
                   "(range [%llu, %llu) of round %ld): left out of the mix; its training "
                   "diverged? This peer goes on with its other neighbours (said at most every "
                   "%.0f s)",
                   mx_peer_name(m, node, name, sizeof name), mx_endpoint_name(m, node), d / ref,
                   (unsigned long long)h->offset, (unsigned long long)(h->offset + h->length),
                   s->round, OUTLIER_SAY_EVERY_S);
    }
    mx_slot_x_known(m, s);
    rumor_err_set(RUMOR_EPROTO, "range [%llu, %llu) of round %ld is %.3g times this peer's norm "
                  "away", (unsigned long long)h->offset,
                  (unsigned long long)(h->offset + h->length), s->round, d / ref);
    return -RUMOR_WIRE_OUTLIER;
}

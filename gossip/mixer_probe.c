/* Robust mixing's validation probe (mixer.h, robust_probe): every P rounds
 * the in-neighbours' parameters of that round are held whole, as they came,
 * and the caller scores each on its validation data; a neighbour whose loss
 * sits far above the neighbourhood's is quarantined.
 *
 * Why: a liar that sends parameters just inside the honest spread ("a
 * little is enough", Baruch et al. 2019; alie:Z in tests/rumor-attacker,
 * its parameters moved back against its own progress) is as far from this
 * peer as an honest neighbour, so distances cannot tell it apart: the bound
 * of mixer_robust.c clips it to about its fellows' distance, and it drags
 * this peer back by that much each round, and its neighbours drag theirs.
 * What it sends is worse, though, and a loss on one set of data says so:
 * the paired comparison (every vector on the same batches) cancels the
 * data's noise, and what is left is the vectors' own quality.
 *
 * The rule. At probe k this peer has L_i (its own x(k)) and L_j for each
 * in-neighbour whose whole x_j(k) came. The reference is the median of all
 * of them (the own included: with two neighbours and one a liar, the median
 * is an honest loss). A neighbour is far when L_j - median exceeds the
 * margin: PB_MARGIN times the spread of the honest differences seen lately
 * (the median absolute difference of this peer's recent probes, an
 * exponential average) and at least PB_FLOOR nats. Each neighbour's share of
 * far probes is an exponential average (PB_DECAY); one past PB_SCORE after
 * PB_MIN probes, while most of the others' shares stay below PB_OTHERS (when
 * all are far, this peer is what differs), is quarantined as by
 * mx_robust_quarantine.
 *
 * A neighbour in quarantine (for its probes or its distances) is still
 * probed: its ranges are held though the round refuses them, and rounds
 * wait for them as for any live neighbour's (mx_round_done), so that it
 * stays in step with this peer: not waited for, an honest peer falls
 * behind the one that quarantined it, whose ranges then come too early and
 * are dropped (on a ring of 8 two honest peers ran 46 of 374 rounds and
 * fetched the swarm's state at the end: 79% and 76% where the others
 * reached 84%). One whose last PB_MIN probes were all within the margin,
 * its share of far probes back under PB_OTHERS, is let out early. That is
 * for the honest peer a liar drags: it sends worse parameters while the
 * liar's part is in its mix (measured on a ring of 5, MLP and small GPT:
 * about a tenth of the liar's excess, while its fellows agree within a
 * hundredth), so its other
 * neighbours may quarantine it as well; once it has left the liar out it
 * recovers within a few rounds and is let back in. A liar stays out: the
 * loss of what it sends stays above its fellows'.
 *
 * Threads. The comm thread fills the held vectors (mx_probe_hold) and at
 * the round's close publishes which came (state READY, release); the
 * caller takes them (READY -> TAKEN, acquire), scores them without locks,
 * and posts its verdicts (MX_OP_PROBE), which the comm thread applies, the
 * state back to FREE. A probe round that finds the last one not done is
 * skipped; one left READY (never taken) is reused. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mixer_int.h"

#define PB_DECAY 0.7
#define PB_MIN 3
#define PB_MARGIN 4.0            /* times the honest spread */
#define PB_FLOOR 0.002           /* nats: below this, nothing is far */
#define PB_SPREAD 0.3            /* the newest probe's share of the spread */
#define PB_SCORE 0.6             /* a neighbour's share of far probes, to be quarantined */
#define PB_OTHERS 0.3            /* ... while most others' stay below this */

enum { PB_FREE, PB_HOLD, PB_READY, PB_TAKEN };

struct mx_probe {
    _Atomic int state;
    long round;                /* the round held (HOLD, READY, TAKEN) */
    float *buf;                /* (cap * n) in-neighbour i's vector at buf + i n */
    float *own;                /* (n) this peer's x(round), copied at the close */
    int cap;
    int *pos;                  /* (npeers) j's place in buf, -1: not held */
    mx_cover_t *cov;           /* (npeers) what of j's vector came */
    int *nodes, nnodes;        /* READY: those whose whole vector came */
    double spread;             /* recent median |L_j - median| (nats), 0: none yet */
    double *score;             /* (npeers) share of far probes lately */
    double *excess;            /* (npeers) the last probe's L_j - median */
    uint32_t *probes;          /* (npeers) probes judged since forgiven */
    uint32_t *clean;           /* (npeers) its last probes within the margin, in a row */
    double *vals, *dev, *tmp;  /* (npeers + 1) a verdict's scratch */
};

/* The caller's scores (MX_OP_PROBE) */
struct probe_verdict {
    long round;
    double own;
    const int *node;
    const double *loss;
    int n;
};

int mx_probe_alloc(rumor_mixer_t *m)
{
    if (m->cfg.robust_probe <= 0)
        return 0;
    if (!m->cfg.robust)
        return rumor_err_set(RUMOR_EINVAL, "the validation probe (every %d rounds) is part of "
                             "robust mixing: clip or trimmed", m->cfg.robust_probe);
    struct mx_probe *p = calloc(1, sizeof *p);
    size_t N = (size_t)m->npeers;
    if (!p || !(p->pos = malloc(N * sizeof *p->pos)) || !(p->nodes = malloc(N * sizeof(int))) ||
        !(p->score = calloc(N, sizeof *p->score)) || !(p->excess = calloc(N, sizeof(double))) ||
        !(p->probes = calloc(N, sizeof *p->probes)) ||
        !(p->clean = calloc(N, sizeof *p->clean)) ||
        !(p->vals = malloc((N + 1) * sizeof(double))) ||
        !(p->dev = malloc((N + 1) * sizeof(double))) ||
        !(p->tmp = malloc((N + 1) * sizeof(double))) ||
        !(p->cov = calloc(N, sizeof *p->cov))) {
        m->probe = p;
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    }
    atomic_init(&p->state, PB_FREE);
    p->round = -1;
    m->probe = p;
    return 0;
}

void mx_probe_free(rumor_mixer_t *m)
{
    struct mx_probe *p = m->probe;
    if (!p)
        return;
    free(p->buf);
    free(p->own);
    free(p->pos);
    free(p->nodes);
    free(p->score);
    free(p->excess);
    free(p->probes);
    free(p->clean);
    if (p->cov)
        for (int j = 0; j < m->npeers; j++)
            mx_cover_free(&p->cov[j]);
    free(p->cov);
    free(p->vals);
    free(p->dev);
    free(p->tmp);
    free(p);
    m->probe = NULL;
}

void mx_probe_forget(rumor_mixer_t *m, int node)
{
    struct mx_probe *p = m->probe;
    if (!p)
        return;
    p->score[node] = 0;
    p->excess[node] = 0;
    p->probes[node] = 0;
    p->clean[node] = 0;
}

/* Slot s's in-neighbours are set (open, or a new view before anything came):
 * a probe round holds their vectors. */
int mx_probe_slot(rumor_mixer_t *m, struct mx_slot *s)
{
    struct mx_probe *p = m->probe;
    if (!p || s->round < 0)
        return 0;
    int st = atomic_load_explicit(&p->state, memory_order_relaxed);
    if (!(st == PB_HOLD && p->round == s->round)) { /* not a new view of the round held */
        if (s->round % m->cfg.robust_probe != 0 || st == PB_TAKEN)
            return 0; /* TAKEN: the last probe is being scored */
        if (st == PB_HOLD && p->round + 1 >= m->cur)
            return 0; /* it holds a round still (one that failed before: reused) */
        /* READY and never taken: the caller moved on, unless it takes it now */
        if (st == PB_READY &&
            !atomic_compare_exchange_strong_explicit(&p->state, &st, PB_HOLD,
                                                     memory_order_acquire, memory_order_relaxed))
            return 0;
    }
    if (!p->own && !(p->own = malloc(m->n * sizeof(float))))
        return rumor_err_set(RUMOR_ENOMEM, "robust mixing's probe: out of memory");
    if (s->nin > p->cap) {
        free(p->buf);
        p->cap = 0;
        if (!(p->buf = malloc((size_t)s->nin * m->n * sizeof(float))))
            return rumor_err_set(RUMOR_ENOMEM, "robust mixing's probe: no memory to hold %d "
                                 "neighbours' parameters (%zu floats each)", s->nin, m->n);
        p->cap = s->nin;
    }
    for (int j = 0; j < m->npeers; j++) {
        p->pos[j] = -1;
        mx_cover_clear(&p->cov[j]);
    }
    for (int i = 0; i < s->nin; i++)
        p->pos[s->in[i]] = i;
    p->round = s->round;
    atomic_store_explicit(&p->state, PB_HOLD, memory_order_relaxed);
    return 0;
}

void mx_probe_hold(rumor_mixer_t *m, long r, int node, const rumor_wire_hdr_t *h,
                   const void *data, size_t nbytes, int checked)
{
    struct mx_probe *p = m->probe;
    if (!p || p->round != r || p->pos[node] < 0 ||
        atomic_load_explicit(&p->state, memory_order_relaxed) != PB_HOLD)
        return;
    /* a late or quarantined neighbour's range, which the round did not check */
    if (!checked && (h->dtype != RUMOR_WIRE_DT_F32 || nbytes != h->length * sizeof(float) ||
                     !rumor_wire_payload_finite(data, h->length)))
        return;
    uint64_t lo = h->offset, hi = h->offset + h->length;
    if (mx_cover_check(&p->cov[node], lo, hi) != 0)
        return;
    mx_cover_add(&p->cov[node], lo, hi);
    float *to = p->buf + (size_t)p->pos[node] * m->n + h->offset;
    mx_payload_blocks(m, h->dtype, h->aux, data, h->length, mx_copy_block, to);
}

/* A round closes. The probe's: this peer's own x(k) is copied (the mix's
 * self-term, as sent). The one after it: the caller may take the vectors
 * that came whole (a round late, so that ranges that come after the
 * probe's round closed have a round more to come). */
void mx_probe_close(rumor_mixer_t *m, const struct mx_slot *s)
{
    struct mx_probe *p = m->probe;
    if (!p || atomic_load_explicit(&p->state, memory_order_relaxed) != PB_HOLD)
        return;
    if (s->round == p->round) {
        memcpy(p->own, s->x, m->n * sizeof(float));
        return;
    }
    if (s->round != p->round + 1)
        return;
    p->nnodes = 0;
    for (int j = 0; j < m->npeers; j++)
        if (p->pos[j] >= 0 && p->cov[j].covered == m->n)
            p->nodes[p->nnodes++] = j;
    atomic_store_explicit(&p->state, p->nnodes ? PB_READY : PB_FREE, memory_order_release);
}

int rumor_mixer_probe_take(rumor_mixer_t *m, long *k, const float **own, int *node,
                           const float **x, int cap)
{
    struct mx_probe *p = m->probe;
    int st = PB_READY;
    if (!p || !atomic_compare_exchange_strong_explicit(&p->state, &st, PB_TAKEN,
                                                       memory_order_acquire,
                                                       memory_order_relaxed))
        return 0;
    *k = p->round; /* TAKEN: the comm thread leaves it alone */
    int n = p->nnodes < cap ? p->nnodes : cap;
    *own = p->own;
    for (int i = 0; i < n; i++) {
        node[i] = p->nodes[i];
        x[i] = p->buf + (size_t)p->pos[p->nodes[i]] * m->n;
    }
    return n;
}

int rumor_mixer_probe_done(rumor_mixer_t *m, long k, double own, const int *node,
                           const double *loss, int n)
{
    struct probe_verdict v = { k, own, node, loss, n };
    struct mx_cmd c = { .op = MX_OP_PROBE, .probe = &v };
    struct mx_reply r;
    return mx_call(m, &c, &r); /* the reply's rc: as mx_probe_verdict */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Whether most of node's fellows in the probe are not far lately. */
static int others_pass(const struct mx_probe *p, const struct probe_verdict *v, int node)
{
    int others = 0, far = 0;
    for (int i = 0; i < v->n; i++)
        if (v->node[i] != node) {
            others++;
            far += p->score[v->node[i]] >= PB_OTHERS;
        }
    return others > 0 && 2 * far < others; /* alone, it cannot be told apart */
}

/* The comm thread applies the caller's verdicts (MX_OP_PROBE). */
int mx_probe_verdict(rumor_mixer_t *m, const void *arg)
{
    struct mx_probe *p = m->probe;
    const struct probe_verdict *v = arg;
    if (!p || atomic_load_explicit(&p->state, memory_order_acquire) != PB_TAKEN ||
        p->round != v->round)
        return rumor_err_set(RUMOR_ESTATE, "mixer: no probe of round %ld taken", v->round);
    if (v->n < 0 || v->n > p->nnodes)
        return rumor_err_set(RUMOR_EINVAL, "mixer: a probe of %d neighbours judged as %d",
                             p->nnodes, v->n);
    int n = v->n, q = 0;
    double *vals = p->vals, *dev = p->dev, *tmp = p->tmp;
    vals[0] = isfinite(v->own) ? v->own : INFINITY;
    for (int i = 0; i < n; i++)
        vals[i + 1] = isfinite(v->loss[i]) ? v->loss[i] : INFINITY;
    memcpy(tmp, vals, (size_t)(n + 1) * sizeof *tmp);
    double med = n > 0 ? median(tmp, n + 1) : 0;
    /* the margin comes from the spread before this probe: the liar's own
     * distance must not widen the bar it is judged by */
    double margin = PB_MARGIN * p->spread > PB_FLOOR ? PB_MARGIN * p->spread : PB_FLOOR;
    int ready = p->spread > 0;
    for (int i = 0; i <= n; i++)
        dev[i] = fabs(vals[i] - med);
    if (n > 0 && isfinite(med)) { /* the spread: the median deviation (robust to one liar) */
        double sp = median(dev, n + 1);
        if (isfinite(sp))
            p->spread = ready ? (1 - PB_SPREAD) * p->spread + PB_SPREAD * sp : sp;
    }
    for (int i = 0; i < n; i++) {
        int j = v->node[i];
        double ex = vals[i + 1] - med;
        int far = ready && !(ex <= margin); /* NaN and Inf too */
        p->excess[j] = isfinite(ex) ? ex : 1e30;
        p->score[j] = PB_DECAY * p->score[j] + (1 - PB_DECAY) * far;
        p->probes[j]++;
        p->clean[j] = far || !ready ? 0 : p->clean[j] + 1;
        rumor_debug("probe round %ld: %d's loss %.5f, median %.5f, margin %.5f, own %.5f%s",
                    v->round, j, vals[i + 1], med, margin, vals[0], far ? ": far" : "");
    }
    for (int i = 0; i < n; i++) {
        int j = v->node[i];
        if (mx_robust_quarantined(m, j) && p->clean[j] >= PB_MIN && p->score[j] < PB_OTHERS) {
            /* its probes came back near its fellows': an honest peer that
             * a liar had dragged, and it has left the liar out since */
            char name[48];
            rumor_warn("%s (%s): its last probes scored near its fellows' on validation data "
                       "(the last %.4g nats over their median; margin %.4g): let out of "
                       "quarantine", mx_peer_name(m, j, name, sizeof name),
                       mx_endpoint_name(m, j), p->excess[j], margin);
            mx_robust_release(m, j);
            q += 1000;
            continue;
        }
        if (p->probes[j] < PB_MIN || p->score[j] <= PB_SCORE || mx_robust_quarantined(m, j) ||
            !others_pass(p, v, j))
            continue;
        char why[160];
        snprintf(why, sizeof why, "%.0f%% of its recent probes scored far above its fellows' "
                 "on validation data (the last %.4g nats over their median; margin %.4g)",
                 100 * p->score[j], p->excess[j], margin);
        mx_robust_quarantine(m, j, why);
        q++;
    }
    atomic_store_explicit(&p->state, PB_FREE, memory_order_relaxed);
    return q;
}

void mx_probe_publish(const rumor_mixer_t *m, int node, rumor_robust_score_t *o)
{
    const struct mx_probe *p = m->probe;
    o->val_score = p ? p->score[node] : 0;
    o->val_excess = p ? p->excess[node] : 0;
}

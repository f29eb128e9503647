/* Robust mixing (mixer.h, robust): self-centred clipping of each
 * in-neighbour's ranges, and the quarantine of a neighbour clipped again
 * and again. Runs on the comm thread.
 *
 * Clipping (He, Karimireddy and Jaggi 2022, "Byzantine-robust
 * decentralized learning via self-centered clipping"): a neighbour's range
 * enters the mix as x_i + clip(x_j - x_i, tau_r), so a neighbour whatever
 * it sends moves this peer by at most W_ij tau a round. The judge runs on
 * the distance sums the outlier check computes anyway (mixer_terms.c),
 * and the accumulation takes the clipped range as
 *   W_ij * (s x_j + (1 - s) x_i),   s = min(1, tau_r / |x_j - x_i|_r),
 * which is W_ij * x_j itself for the ranges within the bound (nothing
 * changes for honest neighbours). A range of a round this peer has not
 * begun is judged against the parameters it sent last (held for that:
 * mx_start_send).
 *
 * tau, when not given, follows the honest differences: each in-neighbour's
 * recent difference (RMS per element, an exponential average over its
 * ranges, RB_RECENT the newest's share, a clipped range counted at RB_CAP
 * times the bound it met), and tau is RB_MULT times the least of them
 * (twice: honest neighbours sit within about twice each other's distance,
 * a range's distance over its fellow's on a ring of 5 having its 90th
 * percentile at 1.26 with the MLP and 1.48 with the small GPT, where a
 * liar just inside the honest spread, alie:4, sat at a median of 2.96 and
 * 2.32: so it is clipped to about its fellows' distance, where 4 times
 * had let it through whole). As
 * long as one in-neighbour is honest, the least is an honest difference (a
 * liar's is at least a bound's worth above it, or it moves this peer by
 * little); a liar that sends something close only makes the bound tighter
 * (this peer mixes less, it is not poisoned). The bound follows honest
 * differences as they grow early in training, by at most RB_GROW a range
 * (relative to this peer's own RMS). Until two in-neighbours' ranges are
 * known (or all there are, when fewer: one alone is not told apart from a
 * liar), tau is RB_START of this peer's own RMS there; it is never below
 * RB_FLOOR of it (peers that start from one initialization are 0 apart).
 *
 * Quarantine: each neighbour's share of far ranges, an exponential average
 * over its ranges (RB_DECAY). A range is far when it was clipped and is
 * more than RB_FAR times as far as any other in-neighbour's recent
 * difference (honest neighbours sit within a few times of each other, a
 * gross liar tens or hundreds of times further); for a peer with no other
 * in-neighbour known, when it is more than RB_FAR_OWN of this peer's own
 * RMS away (peers that mix stay a few percent of their norm apart, where a
 * sign-flipped or random vector of the same norm is 1.4 to 2 norms away). One past
 * RB_SCORE after RB_MIN ranges, while the other in-neighbours' shares
 * mostly stay below RB_OTHERS (when all are far, the bound is wrong, not
 * they), is left
 * out of every round for the quarantine time (its weight goes to this
 * peer, as for a neighbour that missed the deadline), said once naming it,
 * counted; it is judged afresh after. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer_int.h"

#define RB_RECENT 0.3
#define RB_MULT 2.0
#define RB_CAP 2.0               /* a clipped range counts at this times the bound */
#define RB_GROW 1.5              /* the bound widens at most this much a range */
#define RB_START 0.05
#define RB_FLOOR 0.01            /* of this peer's own RMS: nothing closer is clipped */
#define RB_DECAY 0.9
#define RB_FAR 8.0               /* clipped, and this many times the others' differences */
#define RB_FAR_OWN 0.5           /* alone: clipped, and this share of this peer's own RMS */
#define RB_SCORE 0.6             /* a neighbour's share of far ranges, to be quarantined */
#define RB_OTHERS 0.3            /* ... while the others' share stays below this */
#define RB_MIN 8
#define RB_QUARANTINE_S 30.0

/* trimmed:K on a listed graph: every round of its period gives this peer
 * 2K + 1 in-neighbours at least. */
static int trim_degree_check(rumor_mixer_t *m)
{
    if (m->open || !m->topo)
        return 0; /* an open swarm's graph changes: each round says (mx_robust_trim) */
    int K = m->cfg.robust_trim, period = m->topo->period > 0 ? m->topo->period : 1;
    for (long r = 0; r < period; r++) {
        int d = rumor_topo_neighbors(m->topo, m->self, r, m->rb.tord, m->rb.tw, m->npeers);
        if (d < 0)
            return d;
        if (d < 2 * K + 1)
            return rumor_err_set(RUMOR_EINVAL, "robust mixing (trimmed:%d) leaves out %d of "
                                 "each element's values and needs %d in-neighbours: this "
                                 "peer has %d%s (a graph of a higher degree, a smaller K, or "
                                 "clip)", K, 2 * K, 2 * K + 1, d,
                                 period > 1 ? " in one of the graph's rounds" : "");
    }
    return 0;
}

int mx_robust_alloc(rumor_mixer_t *m)
{
    m->rb.scale = 1.0;
    if (!m->cfg.robust)
        return 0;
    if (m->cfg.robust != RUMOR_ROBUST_CLIP && m->cfg.robust != RUMOR_ROBUST_TRIMMED)
        return rumor_err_set(RUMOR_EINVAL, "mixer: robust mode %d unknown", m->cfg.robust);
    const char *what = m->cfg.robust == RUMOR_ROBUST_CLIP ? "clip" : "trimmed";
    if (m->cfg.async)
        return rumor_err_set(RUMOR_EINVAL, "robust mixing (%s) runs on synchronous rounds: "
                                           "not with asynchronous D-PSGD", what);
    if (m->cfg.codec.kind != RUMOR_CODEC_NONE)
        return rumor_err_set(RUMOR_EINVAL, "robust mixing (%s) judges a neighbour's "
                                           "parameters: not with a codec (compressed gossip "
                                           "sends coded changes)", what);
    if (m->cfg.robust_tau < 0 || !isfinite(m->cfg.robust_tau))
        return rumor_err_set(RUMOR_EINVAL, "robust mixing: tau %g (0: auto, or > 0)",
                             m->cfg.robust_tau);
    if (m->cfg.robust == RUMOR_ROBUST_TRIMMED && m->cfg.robust_trim < 1)
        return rumor_err_set(RUMOR_EINVAL, "robust mixing: trimmed:%d (K is 1 or more)",
                             m->cfg.robust_trim);
    size_t N = (size_t)m->npeers;
    m->rb.recent = calloc(N, sizeof *m->rb.recent);
    m->pub.robust = calloc(N, sizeof *m->pub.robust);
    m->rb.score = calloc(N, sizeof *m->rb.score);
    m->rb.ranges = calloc(N, sizeof *m->rb.ranges);
    m->rb.until = calloc(N, sizeof *m->rb.until);
    m->rb.tvals = calloc(N, sizeof *m->rb.tvals);
    m->rb.tw = calloc(N, sizeof *m->rb.tw);
    m->rb.tord = calloc(N, sizeof *m->rb.tord);
    if (!m->rb.recent || !m->pub.robust || !m->rb.score || !m->rb.ranges || !m->rb.until ||
        !m->rb.tvals || !m->rb.tw || !m->rb.tord)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    return m->cfg.robust == RUMOR_ROBUST_TRIMMED ? trim_degree_check(m) : 0;
}

void mx_robust_free(rumor_mixer_t *m)
{
    free(m->rb.recent);
    free(m->pub.robust);
    free(m->rb.score);
    free(m->rb.ranges);
    free(m->rb.until);
    free(m->rb.tvals);
    free(m->rb.tw);
    free(m->rb.tord);
}

void mx_robust_slot_free(struct mx_slot *s)
{
    free(s->tv);
    free(s->tpos);
}

int mx_robust_slot_reweigh(rumor_mixer_t *m, struct mx_slot *s)
{
    RUMOR_CHECK(mx_probe_slot(m, s));
    if (m->cfg.robust != RUMOR_ROBUST_TRIMMED)
        return 0;
    if (!s->tpos && !(s->tpos = malloc((size_t)m->npeers * sizeof *s->tpos)))
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    if (s->nin > s->tvcap) {
        free(s->tv);
        s->tvcap = 0;
        if (!(s->tv = malloc((size_t)s->nin * m->n * sizeof(float))))
            return rumor_err_set(RUMOR_ENOMEM, "robust mixing (trimmed): no memory to hold %d "
                                 "neighbours' parameters (%zu floats each)", s->nin, m->n);
        s->tvcap = s->nin;
    }
    for (int j = 0; j < m->npeers; j++)
        s->tpos[j] = -1;
    for (int i = 0; i < s->nin; i++)
        s->tpos[s->in[i]] = i;
    return 0;
}

void mx_robust_hold(rumor_mixer_t *m, struct mx_slot *s, int node, const rumor_wire_hdr_t *h,
                    const void *data)
{
    float *to = s->tv + (size_t)s->tpos[node] * m->n + h->offset;
    mx_payload_blocks(m, RUMOR_WIRE_DT_F32, 0, data, h->length, mx_copy_block, to);
}

/* The trimmed mean of one element: this peer's own value x (weight ws)
 * and the in-neighbours' v[0..d) (weights w), the K largest and the K
 * smallest of those left out. *selfw gets the self's share. */
static float trimmed_mean(float x, double ws, const float *v, const double *w, int *ord, int d,
                          int K, double *selfw)
{
    for (int i = 0; i < d; i++) { /* insertion sort: d is a node's degree */
        int k = i;
        while (k > 0 && v[ord[k - 1]] > v[i]) {
            ord[k] = ord[k - 1];
            k--;
        }
        ord[k] = i;
    }
    double sum = ws * (double)x, wsum = ws;
    for (int t = K; t < d - K; t++) {
        sum += w[ord[t]] * (double)v[ord[t]];
        wsum += w[ord[t]];
    }
    if (wsum <= 0) { /* no self-weight and nothing kept: cannot happen with d >= 2K + 1 */
        *selfw += 1.0;
        return x;
    }
    *selfw += ws / wsum;
    return (float)(sum / wsum);
}

void mx_robust_trim(rumor_mixer_t *m, struct mx_slot *s, uint64_t off, uint64_t len)
{
    int d = s->nin, K = m->cfg.robust_trim;
    if (d < 2 * K + 1) {
        K = d > 0 ? (d - 1) / 2 : 0;
        if (m->rb.trim_said != d) {
            m->rb.trim_said = d;
            rumor_warn("robust mixing (trimmed:%d): round %ld has %d in-neighbours, fewer than "
                       "the %d it needs: leaving out %d largest and smallest values",
                       m->cfg.robust_trim, s->round, d, 2 * m->cfg.robust_trim + 1, K);
        }
    }
    float *v = m->rb.tvals;
    double *w = m->rb.tw, ws = 1.0;
    for (int i = 0; i < d; i++) {
        w[i] = s->w_of[s->in[i]];
        ws -= w[i];
    }
    if (ws < 0)
        ws = 0;
    float *acc = s->buf->data;
    const float *x = s->x;
    int any = 0;
    int *use = m->part_scratch;
    uint64_t p = off, end = off + len;
    while (p < end) {
        uint64_t next = end;
        for (int i = 0; i < d; i++) {
            int j = s->in[i];
            uint64_t run_end = end;
            use[i] = !s->outlier[j] && mx_cover_run(&s->cov[j], p, &run_end);
            if (run_end < next)
                next = run_end;
        }
        for (uint64_t e = p; e < next; e++) {
            for (int i = 0; i < d; i++) /* one missing there counts as this peer's own */
                v[i] = use[i] ? s->tv[(size_t)i * m->n + e] : x[e];
            float y = trimmed_mean(x[e], ws, v, w, m->rb.tord, d, K, &s->selfw);
            double dy = (double)y - (double)x[e];
            s->dis += dy * dy;
            acc[e] = y;
        }
        for (int i = 0; i < d; i++)
            any |= use[i];
        p = next;
    }
    s->mixed_any |= any;
}

/* A slot given to another member: its record starts afresh. */
void mx_robust_forget(rumor_mixer_t *m, int node)
{
    if (!m->rb.score)
        return;
    m->rb.score[node] = 0;
    m->rb.ranges[node] = 0;
    m->rb.until[node] = 0;
    m->rb.recent[node] = 0;
    mx_probe_forget(m, node);
}

int mx_robust_quarantined(const rumor_mixer_t *m, int node)
{
    return m->rb.until && m->rb.until[node] > rumor_now();
}

/* A round's slot opens: quarantined neighbours are not waited for. */
void mx_robust_slot_open(rumor_mixer_t *m, struct mx_slot *s)
{
    if (!m->rb.until)
        return;
    double now = rumor_now();
    int q = 0;
    for (int j = 0; j < m->npeers; j++)
        if (m->rb.until[j] > now) {
            s->outlier[j] = 1;
            q++;
        } else if (m->rb.until[j] > 0) { /* served its time: judged afresh */
            mx_robust_forget(m, j);
        }
    m->counters.quarantined = q;
}

/* The bound on the RMS per element of a range's difference, for slot s. */
static double tau_rms(rumor_mixer_t *m, const struct mx_slot *s, double own_rms)
{
    if (m->cfg.robust_tau > 0)
        return m->cfg.robust_tau / sqrt((double)m->n);
    double least = -1;
    int known = 0, in = 0;
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (j == m->self || mx_robust_quarantined(m, j))
            continue;
        in++;
        if (m->rb.ranges[j]) {
            known++;
            if (least < 0 || m->rb.recent[j] < least)
                least = m->rb.recent[j];
        }
    }
    /* one neighbour's alone does not say what honest is (it may be the
     * liar's): two, or all there are */
    double t = known >= 2 || (known && known == in) ? RB_MULT * least : RB_START * own_rms;
    /* and it widens smoothly: RB_GROW at most a range */
    if (m->rb.last > 0 && t > RB_GROW * m->rb.last * own_rms)
        t = RB_GROW * m->rb.last * own_rms;
    double floor = RB_FLOOR * own_rms > 1e-12 ? RB_FLOOR * own_rms : 1e-12;
    t = t > floor ? t : floor;
    if (own_rms > 0)
        m->rb.last = t / own_rms;
    return t;
}

/* Whether most of node's fellow in-neighbours of slot s pass the bound. */
static int others_pass(const rumor_mixer_t *m, const struct mx_slot *s, int node)
{
    int others = 0, clipped = 0;
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (j == node || j == m->self || mx_robust_quarantined(m, j))
            continue;
        others++;
        clipped += m->rb.score[j] >= RB_OTHERS;
    }
    return others > 0 && 2 * clipped < others; /* alone, it cannot be told apart */
}

int mx_robust_judge(rumor_mixer_t *m, struct mx_slot *s, int node, double d2, double n2,
                    uint64_t len)
{
    if (mx_robust_quarantined(m, node)) { /* a range of a round opened before */
        s->outlier[node] = 1;
        mx_slot_x_known(m, s);
        rumor_err_set(RUMOR_EPROTO, "round %ld: quarantined (robust mixing)", s->round);
        return -RUMOR_WIRE_OUTLIER;
    }
    double d = sqrt(d2 / (double)len), own = sqrt(n2 / (double)len);
    double tau = tau_rms(m, s, own);
    int clipped = d > tau;
    /* trimmed: judged and scored alike, but the trimmed mean bounds it */
    m->rb.scale = clipped && m->cfg.robust == RUMOR_ROBUST_CLIP ? tau / d : 1.0;
    double seen = d < RB_CAP * tau ? d : RB_CAP * tau;
    m->rb.recent[node] = m->rb.ranges[node] ? (1 - RB_RECENT) * m->rb.recent[node] + RB_RECENT * seen
                                            : seen;
    m->counters.robust_ranges++;
    m->counters.robust_clipped += (uint64_t)clipped;
    double others = -1; /* the largest recent difference of the others */
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (j != node && j != m->self && m->rb.ranges[j] && !mx_robust_quarantined(m, j) &&
            m->rb.recent[j] > others)
            others = m->rb.recent[j];
    }
    int far = clipped && (others >= 0 ? d > RB_FAR * others : d > RB_FAR_OWN * own);
    m->rb.score[node] = RB_DECAY * m->rb.score[node] + (1 - RB_DECAY) * far;
    m->rb.ranges[node]++;
    if (m->rb.ranges[node] < RB_MIN || m->rb.score[node] <= RB_SCORE || !others_pass(m, s, node))
        return 0;
    /* clipped again and again: quarantined, left out from this round on */
    char why[200];
    snprintf(why, sizeof why, "%.0f%% of its recent ranges were far beyond the bound (its "
             "parameters %.3g times the bound away from this peer's, RMS %.3g)",
             100 * m->rb.score[node], d / tau, d);
    mx_robust_quarantine(m, node, why);
    s->outlier[node] = 1;
    mx_slot_x_known(m, s); /* cells that waited for it mix */
    rumor_err_set(RUMOR_EPROTO, "round %ld: quarantined (robust mixing)", s->round);
    return -RUMOR_WIRE_OUTLIER;
}

void mx_robust_quarantine(rumor_mixer_t *m, int node, const char *why)
{
    double q = m->cfg.robust_quarantine_s > 0 ? m->cfg.robust_quarantine_s : RB_QUARANTINE_S;
    m->rb.until[node] = rumor_now() + q;
    m->counters.quarantines++;
    m->counters.quarantined++;
    char name[48];
    rumor_warn("%s (%s): %s: quarantined for %.0f s, left out of the mix",
               mx_peer_name(m, node, name, sizeof name), mx_endpoint_name(m, node), why, q);
}

void mx_robust_release(rumor_mixer_t *m, int node)
{
    mx_robust_forget(m, node);
    m->counters.releases++;
}

int mx_robust_publish(rumor_mixer_t *m, rumor_robust_score_t *out)
{
    if (!m->rb.score || !out)
        return 0;
    int n = 0;
    double now = rumor_now();
    for (int j = 0; j < m->npeers; j++) {
        if (j == m->self || !m->talks_to[j])
            continue;
        rumor_robust_score_t *o = &out[n++];
        char name[48];
        mx_peer_name(m, j, name, sizeof name);
        const char *nm = strncmp(name, "peer ", 5) ? name : name + 5;
        snprintf(o->name, sizeof o->name, "%.23s", nm);
        o->score = m->rb.score[j];
        o->distance = m->rb.recent[j];
        o->quarantined = m->rb.until[j] > now;
        mx_probe_publish(m, j, o);
    }
    return n;
}

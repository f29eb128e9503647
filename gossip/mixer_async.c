/* Asynchronous gossip (AD-PSGD, Lian et al. 2018) in the mixer: a round
 * never waits for neighbours. Each in-neighbour's newest chunks are kept
 * (one parameter-sized buffer per in-neighbour); when this peer ends round
 * k it mixes every chunk a neighbour sent since the last mix, if it is at
 * most `staleness` rounds old:
 *
 *     x_c <- x_c + sum_j W_ij (x_j,c - x_c)     (fresh chunks of j only)
 *
 * so each row of the round's mixing matrix still sums to 1 and a neighbour
 * that sent nothing new is simply left out (its weight stays with x).
 *
 * Rounds are a shared clock, as Lamport clocks: a peer that learns that a
 * neighbour is at round r > k + staleness/2 moves to r after ending round
 * k. A slow
 * peer thus skips rounds instead of falling ever further behind, its
 * parameters reach the others a few rounds old at most (its slowness
 * ratio), and the staleness bound keeps meaning "how old", while fast peers
 * never wait for it.
 *
 * Neighbours cut the space their own way: j's ranges of round r are copied
 * into latest[j] as they come, and a cell of this peer's grid becomes fresh
 * once j's ranges of one round cover it whole (a range of a newer round
 * that overwrites part of a cell makes it wait for the rest). Runs on the
 * comm thread. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mixer_int.h"

/* How far ahead of this peer's round a neighbour's round may be taken as
 * the clock (a guard against a broken sender dragging the swarm to its
 * end): one such jump per round at most. */
#define ASYNC_MAX_AHEAD 4096L

int mx_async_alloc(rumor_mixer_t *m)
{
    int N = m->npeers;
    struct mx_async *a = &m->as;
    a->latest = calloc((size_t)N, sizeof *a->latest);
    a->lround = malloc((size_t)N * m->nchunks * sizeof *a->lround);
    a->fresh = calloc((size_t)N * m->nchunks, 1);
    a->linc = calloc((size_t)N, sizeof *a->linc);
    a->pround = malloc((size_t)N * sizeof *a->pround);
    a->pcov = calloc((size_t)N, sizeof *a->pcov);
    if (!a->latest || !a->lround || !a->fresh || !a->linc || !a->pround || !a->pcov)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    for (int j = 0; j < N; j++) {
        a->pround[j] = -1;
        if (mx_cover_check(&a->pcov[j], 0, 1) < 0) /* its first interval's room */
            return RUMOR_ENOMEM;
    }
    for (size_t i = 0; i < (size_t)N * m->nchunks; i++)
        a->lround[i] = -1;
    int period = m->topo->period > 0 ? m->topo->period : 1;
    for (int r = 0; r < period; r++) {
        int k = rumor_topo_neighbors(m->topo, m->self, r, m->tmp_nbrs, NULL, N);
        for (int i = 0; i < k && i < N; i++) {
            int j = m->tmp_nbrs[i];
            if (a->latest[j])
                continue;
            if (posix_memalign((void **)&a->latest[j], 64, m->n * sizeof(float) + 64) != 0) {
                a->latest[j] = NULL;
                return rumor_err_set(RUMOR_ENOMEM, "mixer: cannot allocate %zu parameters",
                                     m->n);
            }
        }
    }
    return 0;
}

void mx_async_free(rumor_mixer_t *m)
{
    struct mx_async *a = &m->as;
    if (a->latest)
        for (int j = 0; j < m->npeers; j++)
            free(a->latest[j]);
    free(a->latest);
    free(a->lround);
    free(a->fresh);
    free(a->linc);
    for (int j = 0; a->pcov && j < m->npeers; j++)
        mx_cover_free(&a->pcov[j]);
    free(a->pcov);
    free(a->pround);
    memset(a, 0, sizeof *a);
}

void mx_async_forget(rumor_mixer_t *m, int node)
{
    struct mx_async *a = &m->as;
    memset(a->fresh + (size_t)node * m->nchunks, 0, m->nchunks);
    for (size_t c = 0; c < m->nchunks; c++)
        a->lround[(size_t)node * m->nchunks + c] = -1;
    a->pround[node] = -1;
    mx_cover_clear(&a->pcov[node]);
}

int mx_async_on_params(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, const void *data)
{
    struct mx_async *a = &m->as;
    if (h->round > (uint64_t)m->cur + ASYNC_MAX_AHEAD) {
        mx_ask_round(m, node);
        rumor_err_set(RUMOR_EPROTO, "round %llu while at %ld", (unsigned long long)h->round, m->cur);
        return -RUMOR_WIRE_FUTURE_ROUND;
    }
    long r = (long)h->round;
    if (!a->latest[node] && !(m->swim && m->talks_to[node])) {
        rumor_err_set(RUMOR_EPROTO, "peer %d is not an in-neighbour", node);
        return -RUMOR_WIRE_UNKNOWN_SENDER;
    }
    /* a newer incarnation (a restart) starts its rounds over */
    long pr = h->incarnation > m->known_inc[node] ? -1 : a->pround[node];
    if (r < m->cur - m->cfg.staleness || r < pr) {
        if (r < m->cur - m->cfg.staleness)
            mx_tell_behind(m, node);
        rumor_err_set(RUMOR_EPROTO, "round %ld older than %ld", r,
                      r < pr ? pr : m->cur - m->cfg.staleness);
        return -RUMOR_WIRE_STALE_ROUND;
    }
    uint64_t lo = h->offset, hi = h->offset + h->length; /* inside the space: wire_check */
    if (r == pr) {
        int cv = mx_cover_check(&a->pcov[node], lo, hi);
        if (cv != 0) {
            if (cv < 0)
                rumor_warn("mixer: %s", rumor_err_msg());
            rumor_err_set(RUMOR_EPROTO, "range [%llu, %llu) of round %ld %s",
                          (unsigned long long)lo, (unsigned long long)hi, r,
                          cv == 1 ? "overlaps one received already" : "in too many pieces");
            return cv == 1 ? -RUMOR_WIRE_DUPLICATE : -RUMOR_WIRE_BAD_RANGE;
        }
    }
    if (!rumor_wire_payload_finite(data, h->length)) {
        rumor_err_set(RUMOR_EPROTO, "NaN or Inf in range [%llu, %llu) of round %ld",
                      (unsigned long long)lo, (unsigned long long)hi, r);
        return -RUMOR_WIRE_NONFINITE;
    }
    /* membership: any peer may become a neighbour; its buffer comes with
     * its first message */
    if (!a->latest[node] &&
        posix_memalign((void **)&a->latest[node], 64, m->n * sizeof(float) + 64) != 0) {
        a->latest[node] = NULL;
        rumor_warn("mixer: cannot allocate %zu parameters for peer %d", m->n, node);
        return -RUMOR_WIRE_UNEXPECTED;
    }

    /* accepted */
    mx_accept(m, h, node);
    mx_heard_round(m, node, r);
    if (r > a->pround[node]) { /* the first range of a newer round */
        a->pround[node] = r;
        mx_cover_clear(&a->pcov[node]);
    }
    mx_payload_blocks(m, RUMOR_WIRE_DT_F32, 0, data, h->length, mx_copy_block,
                      a->latest[node] + lo);
    mx_cover_add(&a->pcov[node], lo, hi);
    a->linc[node] = h->incarnation;
    m->counters.elems_received += h->length;
    size_t c0 = (size_t)(lo / m->chunk), c1 = (size_t)((hi - 1) / m->chunk);
    for (size_t c = c0; c <= c1; c++) {
        uint64_t off, len;
        RUMOR_IGNORE(rumor_wire_chunk_range(m->n, m->chunk, c, &off, &len));
        size_t at = (size_t)node * m->nchunks + c;
        if (mx_cover_within(&a->pcov[node], off, off + len) == len) {
            a->lround[at] = r;
            a->fresh[at] = 1;
        } else {
            a->lround[at] = -1; /* part old, part new: not mixed until whole */
            a->fresh[at] = 0;
        }
    }
    return 0;
}

/* Ends round cur at once: mixes what is fresh into a new buffer. */
void mx_async_close(rumor_mixer_t *m)
{
    struct mx_async *a = &m->as;
    long k = m->cur;
    rumor_sendbuf_t *out = mx_buf_get(m);
    if (!out) {
        mx_close_failed(m, RUMOR_ENOMEM);
        return;
    }
    const float *x = m->params->data;
    int nin = mx_in_neighbors(m, k, m->tmp_nbrs, m->tmp_w);
    if (nin < 0)
        nin = 0;
    double dis = 0, selfw = 0;
    int oldest = 0;
    int *used = m->out_nbrs; /* scratch: in-neighbours mixed at least once */
    for (int i = 0; i < nin; i++)
        used[i] = 0;
    const rumor_ops_t *ops = m->dev->ops;
    RUMOR_IGNORE(ops->copy(m->dev, out->data, x, m->n * sizeof(float)));
    for (size_t c = 0; c < m->nchunks; c++) {
        uint64_t off, len;
        RUMOR_IGNORE(rumor_wire_chunk_range(m->n, m->chunk, c, &off, &len));
        float *y = out->data + off;
        const float *xc = x + off;
        double wsum = 0;
        for (int i = 0; i < nin; i++) {
            int j = m->tmp_nbrs[i];
            size_t at = (size_t)j * m->nchunks + c;
            if (!a->latest[j] || !a->fresh[at])
                continue;
            a->fresh[at] = 0;
            long age = k - a->lround[at];
            if (age > m->cfg.staleness || a->linc[j] != m->known_inc[j]) {
                /* went stale while waiting here: never mixed */
                rumor_wire_stats_count(&m->wire_stats, -RUMOR_WIRE_STALE_ROUND);
                continue;
            }
            if (a->lround[at] < k - m->cfg.staleness || a->linc[j] != m->known_inc[j])
                m->counters.stale_applied++; /* self-check: cannot happen */
            if (age > oldest)
                oldest = (int)age;
            float w = (float)m->tmp_w[i];
            const float *xj = a->latest[j] + off;
            ops->axpy(m->dev, y, w, xj, len); /* y += w (x_j - x) */
            ops->axpy(m->dev, y, -w, xc, len);
            wsum += m->tmp_w[i];
            used[i] = 1;
        }
        if (wsum > 0) {
            double d2 = 0;
            RUMOR_IGNORE(ops->axpy_dist(m->dev, y, 0.0f, xc, len, &d2)); /* measures only */
            dis += d2;
        }
        selfw += (1.0 - wsum) * (double)len;
    }
    int mixed = 0;
    for (int i = 0; i < nin; i++)
        mixed += used[i];
    /* the clock: once half the staleness bound behind, join the newest
     * round a neighbour is at (not the one after: two peers would then
     * overtake each other every round). The newest of any one neighbour,
     * not the swarm's second newest: on a ring a peer next to a faster one
     * has one fast and one slow neighbour, and the fast one would
     * otherwise run away until everything it receives is stale (it would
     * train alone). A claim moves this peer at most ASYNC_MAX_AHEAD. */
    long ahead = -1;
    for (int i = 0; i < nin; i++) {
        long r = m->peer_round[m->tmp_nbrs[i]];
        if (r > ahead)
            ahead = r;
    }
    long slack = m->cfg.staleness / 2 > 1 ? m->cfg.staleness / 2 : 1;
    if (ahead > k + slack && ahead <= k + ASYNC_MAX_AHEAD) {
        m->counters.jumps++;
        m->counters.rounds_skipped += (uint64_t)(ahead - k - 1);
        m->cur = ahead;
    } else {
        m->cur = k + 1;
    }
    m->round_staleness = oldest;
    mx_publish_close(m, k, out, nin, mixed, 0, dis, selfw / (double)m->n, mixed > 0);
}

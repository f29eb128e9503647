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
 * never wait for it. Runs on the comm thread. */
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
    if (!a->latest || !a->lround || !a->fresh || !a->linc)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
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
    memset(a, 0, sizeof *a);
}

void mx_async_forget(rumor_mixer_t *m, int node)
{
    struct mx_async *a = &m->as;
    memset(a->fresh + (size_t)node * m->nchunks, 0, m->nchunks);
    for (size_t c = 0; c < m->nchunks; c++)
        a->lround[(size_t)node * m->nchunks + c] = -1;
}

void mx_async_on_params(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, const float *data)
{
    struct mx_async *a = &m->as;
    long r = (long)(h->round > (uint64_t)LONG_MAX / 2 ? LONG_MAX / 2 : h->round);
    if (!a->latest[node] && m->swim && m->talks_to[node] &&
        posix_memalign((void **)&a->latest[node], 64, m->n * sizeof(float) + 64) != 0)
        a->latest[node] = NULL; /* membership: any peer may become a neighbour */
    if (!a->latest[node]) {
        rumor_err_set(RUMOR_EPROTO, "peer %d is not an in-neighbour", node);
        mx_count(m, -RUMOR_WIRE_UNKNOWN_SENDER, node, "params");
        return;
    }
    if (r > m->cur + ASYNC_MAX_AHEAD) {
        rumor_err_set(RUMOR_EPROTO, "round %ld while at %ld", r, m->cur);
        mx_count(m, -RUMOR_WIRE_FUTURE_ROUND, node, "params");
        return;
    }
    mx_heard_round(m, node, r);
    if (r < m->cur - m->cfg.staleness) {
        mx_tell_behind(m, node);
        rumor_err_set(RUMOR_EPROTO, "round %ld older than %ld - %d", r, m->cur, m->cfg.staleness);
        mx_count(m, -RUMOR_WIRE_STALE_ROUND, node, "params");
        return;
    }
    uint64_t off, len;
    if (h->nchunks != m->nchunks ||
        rumor_wire_chunk_range(m->n, m->chunk, h->chunk, &off, &len) < 0 || off != h->offset ||
        len != h->length) {
        rumor_err_set(RUMOR_EPROTO, "chunk %u/%u is not on this peer's chunk grid", h->chunk,
                      h->nchunks);
        mx_count(m, -RUMOR_WIRE_BAD_RANGE, node, "params");
        return;
    }
    size_t at = (size_t)node * m->nchunks + h->chunk;
    if (a->lround[at] >= r) {
        rumor_err_set(RUMOR_EPROTO, "chunk %u of round %ld after round %ld", h->chunk, r,
                      a->lround[at]);
        mx_count(m, a->lround[at] == r ? -RUMOR_WIRE_DUPLICATE : -RUMOR_WIRE_STALE_ROUND, node,
                 "params");
        return;
    }
    if (!rumor_wire_payload_finite(data, len)) {
        rumor_err_set(RUMOR_EPROTO, "NaN or Inf in chunk %u of round %ld", h->chunk, r);
        mx_count(m, -RUMOR_WIRE_NONFINITE, node, "params");
        return;
    }
    memcpy(a->latest[node] + off, data, len * sizeof(float)); /* any alignment */
    a->lround[at] = r;
    a->fresh[at] = 1;
    a->linc[node] = h->incarnation;
    mx_count(m, 0, node, "params");
}

/* Ends round cur at once: mixes what is fresh into a new buffer. */
void mx_async_close(rumor_mixer_t *m)
{
    struct mx_async *a = &m->as;
    long k = m->cur;
    rumor_sendbuf_t *out = mx_buf_get(m);
    if (!out) {
        pthread_mutex_lock(&m->mu);
        snprintf(m->closed_err, sizeof m->closed_err, "%s", rumor_err_msg());
        m->closed_rc = RUMOR_ENOMEM;
        m->req_close = -1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
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
    memcpy(out->data, x, m->n * sizeof(float));
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
            for (size_t e = 0; e < len; e++)
                y[e] += w * (xj[e] - xc[e]);
            wsum += m->tmp_w[i];
            used[i] = 1;
        }
        if (wsum > 0) {
            double d2 = 0;
            for (size_t e = 0; e < len; e++) {
                double d = (double)y[e] - xc[e];
                d2 += d * d;
            }
            dis += d2;
        }
        selfw += 1.0 - wsum;
    }
    int mixed = 0;
    for (int i = 0; i < nin; i++)
        mixed += used[i];
    /* the clock: once half the staleness bound behind, join the newest
     * round a neighbour is at (not the one after: two peers would then
     * overtake each other every round) */
    long ahead = mx_swarm_round(m);
    long slack = m->cfg.staleness / 2 > 1 ? m->cfg.staleness / 2 : 1;
    if (ahead > k + slack && ahead <= k + ASYNC_MAX_AHEAD) {
        m->counters.jumps++;
        m->counters.rounds_skipped += (uint64_t)(ahead - k - 1);
        m->cur = ahead;
    } else {
        m->cur = k + 1;
    }
    m->round_staleness = oldest;
    mx_publish_close(m, k, out, nin, mixed, 0, dis, selfw / (double)m->nchunks);
}

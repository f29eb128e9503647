/* The mixer's comm thread: receiving, accumulating, sending, closing rounds,
 * the HELLO handshake and the ring all-reduce (see mixer.h, mixer_int.h).
 * Everything here runs on the comm thread except the wake helpers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "mixer_int.h"


/* --------------------------------------------------------- set-up */

static int cmp_u64_node(const void *a, const void *b, void *ctx)
{
    const uint64_t *ids = ctx;
    uint64_t x = ids[*(const int *)a], y = ids[*(const int *)b];
    return (x > y) - (x < y);
}

int mx_node_of(const rumor_mixer_t *m, uint64_t id)
{
    int lo = 0, hi = m->npeers - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (m->sorted_ids[mid] == id)
            return m->sorted_node[mid];
        if (m->sorted_ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void mark_talk(rumor_mixer_t *m, int j)
{
    if (j != m->self && !m->talks_to[j]) {
        m->talks_to[j] = 1;
        m->ntalk++;
    }
}

int mx_alloc_state(rumor_mixer_t *m, const rumor_mixer_config_t *cfg)
{
    int N = m->npeers;
    m->ids = calloc((size_t)N, sizeof *m->ids);
    m->sorted_ids = calloc((size_t)N, sizeof *m->sorted_ids);
    m->sorted_node = calloc((size_t)N, sizeof *m->sorted_node);
    m->known_inc = calloc((size_t)N, sizeof *m->known_inc);
    m->talks_to = calloc((size_t)N, 1);
    m->ready = calloc((size_t)N, 1);
    m->heard = calloc((size_t)N, 1);
    m->absent = calloc((size_t)N, 1);
    m->left = calloc((size_t)N, 1);
    m->ep = calloc((size_t)N, sizeof *m->ep);
    m->behind_since = calloc((size_t)N, sizeof *m->behind_since);
    m->scratch = malloc(m->chunk * sizeof(float) + 64);
    m->tmp_nbrs = calloc((size_t)N, sizeof *m->tmp_nbrs);
    m->tmp_w = calloc((size_t)N, sizeof *m->tmp_w);
    m->out_nbrs = calloc((size_t)N, sizeof *m->out_nbrs);
    m->sendq = calloc((size_t)N, sizeof *m->sendq);
    m->ar.recv = calloc((size_t)(2 * N), sizeof *m->ar.recv);
    m->hold = calloc(MX_HOLD_MAX, sizeof *m->hold);
    if (!m->ids || !m->sorted_ids || !m->sorted_node || !m->known_inc || !m->talks_to ||
        !m->ready || !m->heard || !m->absent || !m->left || !m->ep || !m->behind_since ||
        !m->scratch || !m->tmp_nbrs || !m->tmp_w || !m->out_nbrs || !m->sendq || !m->ar.recv ||
        !m->hold)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    /* A peer waits only for its in-neighbours: on a directed or
     * time-varying graph one it sends to can fall up to a period behind, so
     * rounds up to a period ahead are accepted (at most 8: memory). */
    int period_slots = (m->topo->period > 0 ? m->topo->period : 1) + 1;
    m->nslots = period_slots < 2 ? 2 : period_slots > 8 ? 8 : period_slots;
    m->slot = calloc((size_t)m->nslots, sizeof *m->slot);
    if (!m->slot)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    m->sent_round = -1;
    for (int i = 0; i < m->nslots; i++) {
        struct mx_slot *s = &m->slot[i];
        s->round = -1;
        s->arrivals = calloc(m->nchunks, sizeof *s->arrivals);
        s->done = calloc(m->nchunks, 1);
        s->wsum = calloc(m->nchunks, sizeof *s->wsum);
        s->got = calloc((size_t)N * m->nchunks, 1);
        s->w_of = calloc((size_t)N, sizeof *s->w_of);
        s->chunks_from = calloc((size_t)N, sizeof *s->chunks_from);
        s->in = calloc((size_t)N, sizeof *s->in);
        if (!s->wsum || !s->got || !s->w_of || !s->chunks_from || !s->in || !s->arrivals ||
            !s->done)
            return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    }
    for (int j = 0; j < N; j++) {
        if (cfg->endpoints[j] && !(m->ep[j] = strdup(cfg->endpoints[j])))
            return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
        if (!cfg->endpoints[j] && (j == m->self || !cfg->membership))
            return rumor_err_set(RUMOR_EINVAL,
                                 j == m->self ? "mixer: this peer (%d) needs its own endpoint"
                                              : "mixer: peer %d has no endpoint (only membership "
                                                "learns endpoints)",
                                 j);
        m->ids[j] = cfg->ids ? cfg->ids[j] : (uint64_t)j + 1;
        if (m->ids[j] == 0)
            return rumor_err_set(RUMOR_EINVAL, "mixer: peer %d has id 0", j);
        m->sorted_node[j] = j;
    }
    qsort_r(m->sorted_node, (size_t)N, sizeof(int), cmp_u64_node, m->ids);
    for (int j = 0; j < N; j++) {
        m->sorted_ids[j] = m->ids[m->sorted_node[j]];
        if (j > 0 && m->sorted_ids[j] == m->sorted_ids[j - 1])
            return rumor_err_set(RUMOR_EINVAL, "mixer: two peers share the id %llu",
                                 (unsigned long long)m->sorted_ids[j]);
    }
    /* Everyone this peer exchanges with in some round of the period, plus
     * its ring neighbours for the all-reduce. */
    int period = m->topo->period > 0 ? m->topo->period : 1;
    for (int r = 0; r < period; r++) {
        int k = rumor_topo_neighbors(m->topo, m->self, r, m->tmp_nbrs, NULL, N);
        for (int i = 0; i < k && i < N; i++)
            mark_talk(m, m->tmp_nbrs[i]);
        k = rumor_topo_out_neighbors(m->topo, m->self, r, m->tmp_nbrs, NULL, N);
        for (int i = 0; i < k && i < N; i++)
            mark_talk(m, m->tmp_nbrs[i]);
    }
    if (N > 1) {
        mark_talk(m, (m->self + 1) % N);
        mark_talk(m, (m->self + N - 1) % N);
    }
    /* with membership any peer of the list may become a neighbour */
    for (int j = 0; cfg->membership && j < N; j++)
        mark_talk(m, j);
    m->cur = cfg->first_round > 0 ? cfg->first_round : 0;
    m->next_send = m->cur;
    m->req_send = -1;
    m->req_close = -1;
    m->wake_fd[0] = m->wake_fd[1] = -1;
    atomic_init(&m->ar.ref.refs, 0);
    m->ar.last_tag = -1;
    RUMOR_CHECK(mx_state_alloc(m));
    if (m->cfg.async)
        RUMOR_CHECK(mx_async_alloc(m));
    return 0;
}

void mx_free_state(rumor_mixer_t *m)
{
    for (int i = 0; i < m->nhold; i++) {
        zmq_msg_close(&m->hold[i].hdr);
        zmq_msg_close(&m->hold[i].payload);
    }
    for (int i = 0; i < m->nbufs; i++) {
        free(m->bufs[i]->data);
        free(m->bufs[i]);
    }
    for (int i = 0; m->slot && i < m->nslots; i++) {
        free(m->slot[i].arrivals);
        free(m->slot[i].done);
        free(m->slot[i].wsum);
        free(m->slot[i].got);
        free(m->slot[i].w_of);
        free(m->slot[i].chunks_from);
        free(m->slot[i].in);
    }
    free(m->slot);
    free(m->ids);
    free(m->sorted_ids);
    free(m->sorted_node);
    free(m->known_inc);
    free(m->talks_to);
    free(m->ready);
    free(m->heard);
    free(m->absent);
    free(m->left);
    for (int j = 0; m->ep && j < m->npeers; j++)
        free(m->ep[j]);
    free(m->ep);
    free(m->behind_since);
    free(m->scratch);
    free(m->tmp_nbrs);
    free(m->tmp_w);
    free(m->out_nbrs);
    free(m->sendq);
    free(m->ar.recv);
    free(m->hold);
    mx_state_free(m);
    mx_async_free(m);
    mx_view_free(m);
}

/* The caller wakes the comm thread through a pipe that zmq_poll watches. */
int mx_wake_open(rumor_mixer_t *m)
{
    if (pipe(m->wake_fd) != 0)
        return rumor_err_sys(RUMOR_ESYS, "mixer: pipe");
    for (int i = 0; i < 2; i++)
        fcntl(m->wake_fd[i], F_SETFL, fcntl(m->wake_fd[i], F_GETFL) | O_NONBLOCK);
    return 0;
}

void mx_wake_close(rumor_mixer_t *m)
{
    for (int i = 0; i < 2; i++)
        if (m->wake_fd[i] >= 0)
            close(m->wake_fd[i]);
}

void mx_wake(rumor_mixer_t *m)
{
    char c = 1;
    if (write(m->wake_fd[1], &c, 1) < 0 && errno != EAGAIN)
        rumor_warn("mixer: wake-up failed: %s", strerror(errno));
}

static void drain_wake(rumor_mixer_t *m)
{
    char buf[64];
    while (read(m->wake_fd[0], buf, sizeof buf) > 0)
        ;
}

/* ------------------------------------------------------- headers */

void mx_fill_hdr(const rumor_mixer_t *m, rumor_wire_hdr_t *h, int type)
{
    memset(h, 0, sizeof *h);
    h->type = (uint8_t)type;
    h->swarm = m->swarm;
    h->sender = m->ids[m->self];
    h->incarnation = m->incarnation;
    h->space = m->n;
}

/* A header-only message; its round field says which round this peer is
 * receiving, so a neighbour learns whether it fell behind. */
static int send_control(rumor_mixer_t *m, int peer, int type, uint32_t aux)
{
    rumor_wire_hdr_t h;
    uint8_t bytes[RUMOR_WIRE_HDR_LEN];
    mx_fill_hdr(m, &h, type);
    h.aux = aux;
    h.round = m->cur > 0 ? (uint64_t)m->cur : 0;
    rumor_wire_encode(&h, bytes);
    return rumor_transport_send(m->tr, peer, bytes, sizeof bytes, NULL, NULL, 0);
}

/* Sends a copy of p as one frame of a multipart message (flags: ZMQ_DONTWAIT,
 * ZMQ_SNDMORE): for the rare messages (state, membership) that need a body
 * frame the transport's zero-copy send does not carry. 0 or -1. */
int mx_send_frame(void *sock, const void *p, size_t len, int flags)
{
    zmq_msg_t msg;
    if (zmq_msg_init_size(&msg, len) != 0)
        return -1;
    if (len)
        memcpy(zmq_msg_data(&msg), p, len);
    if (zmq_msg_send(&msg, sock, flags) < 0) {
        zmq_msg_close(&msg);
        return -1;
    }
    return 0;
}

int mx_send_control_round(rumor_mixer_t *m, int peer, int type, uint32_t aux)
{
    return send_control(m, peer, type, aux);
}

void mx_count(rumor_mixer_t *m, int verdict, int node, const char *what)
{
    rumor_wire_stats_count(&m->wire_stats, verdict);
    if (verdict != 0)
        rumor_debug("dropped %s from peer %d: %s (%s)", what, node,
                    rumor_wire_reject_name(verdict), rumor_err_msg());
}

/* ------------------------------------------------------- D-PSGD rounds */

/* The inner loops run in blocks of 16 so that gcc -O2 vectorizes them. */
#define BLK 16

/* y = a x (first arrival of a chunk) or y += a x */
static void axpy(float *restrict y, float a, const float *restrict x, size_t n, int first)
{
    size_t i = 0;
    if (first) {
        for (; i + BLK <= n; i += BLK)
            for (int j = 0; j < BLK; j++)
                y[i + j] = a * x[i + j];
        for (; i < n; i++)
            y[i] = a * x[i];
        return;
    }
    for (; i + BLK <= n; i += BLK)
        for (int j = 0; j < BLK; j++)
            y[i + j] += a * x[i + j];
    for (; i < n; i++)
        y[i] += a * x[i];
}

/* Mixes chunk c of slot s: acc = acc + (1 - w_c) x, or x itself when no
 * neighbour's chunk arrived; adds |acc - x|^2 to the slot's disagreement. */
static void mix_chunk(rumor_mixer_t *m, struct mx_slot *s, size_t c)
{
    uint64_t off, len;
    RUMOR_IGNORE(rumor_wire_chunk_range(m->n, m->chunk, c, &off, &len));
    float *restrict acc = s->buf->data + off;
    const float *restrict x = s->x + off;
    if (s->arrivals[c] == 0) {
        memcpy(acc, x, len * sizeof(float));
    } else {
        float a = (float)(1.0 - s->wsum[c]);
        float lanes[BLK] = { 0 };
        size_t i = 0;
        for (; i + BLK <= len; i += BLK)
            for (int j = 0; j < BLK; j++) {
                float v = acc[i + j] + a * x[i + j];
                float d = v - x[i + j];
                lanes[j] += d * d;
                acc[i + j] = v;
            }
        double d2 = 0;
        for (; i < len; i++) {
            float v = acc[i] + a * x[i];
            float d = v - x[i];
            d2 += (double)d * d;
            acc[i] = v;
        }
        for (int j = 0; j < BLK; j++)
            d2 += lanes[j];
        s->dis += d2;
    }
    s->selfw += 1.0 - s->wsum[c];
    s->done[c] = 1;
    s->ndone++;
}

/* Whether chunk c of slot s has everything it will get: every in-neighbour
 * that is not absent sent it. */
static int chunk_ready(const rumor_mixer_t *m, const struct mx_slot *s, size_t c)
{
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (!s->got[(size_t)j * m->nchunks + c] && !(m->absent[j] && s->chunks_from[j] == 0))
            return 0;
    }
    return 1;
}

/* Mixes a chunk as soon as it is complete and this peer's own x(round) is
 * known: while it is in cache, and while the caller still computes, instead
 * of in one pass when the round closes. */
static void mix_if_ready(rumor_mixer_t *m, struct mx_slot *s, size_t c)
{
    if (s->x && !s->done[c] && chunk_ready(m, s, c))
        mix_chunk(m, s, c);
}

static int ensure_slot(rumor_mixer_t *m, long r)
{
    struct mx_slot *s = &m->slot[r % m->nslots];
    if (s->round == r && s->buf)
        return 0;
    return mx_slot_open(m, s, r);
}

/* A PARAMS chunk: accumulate W_ij * chunk into its round's slot. */
static void on_params(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, const float *data)
{
    long r = (long)h->round;
    if (h->round >= (uint64_t)m->cur + (uint64_t)m->nslots) {
        /* this peer fell behind (or the sender runs ahead): the caller
         * learns it from swarm_round and jumps or catches up */
        mx_heard_round(m, node, r);
        rumor_err_set(RUMOR_EPROTO, "round %llu while at %ld", (unsigned long long)h->round, m->cur);
        mx_count(m, -RUMOR_WIRE_FUTURE_ROUND, node, "params");
        return;
    }
    if (r < m->cur) {
        mx_heard_round(m, node, r);
        mx_tell_behind(m, node);
        rumor_err_set(RUMOR_EPROTO, "round %ld already mixed (at %ld)", r, m->cur);
        mx_count(m, -RUMOR_WIRE_STALE_ROUND, node, "params");
        return;
    }
    mx_heard_round(m, node, r);
    if (ensure_slot(m, r) < 0) {
        rumor_warn("mixer: %s", rumor_err_msg());
        return;
    }
    struct mx_slot *s = &m->slot[r % m->nslots];
    double w = s->w_of[node];
    if (w == 0.0) {
        rumor_err_set(RUMOR_EPROTO, "peer %d is not an in-neighbour in round %ld", node, r);
        mx_count(m, -RUMOR_WIRE_UNKNOWN_SENDER, node, "params");
        return;
    }
    uint64_t off, len;
    if (h->nchunks != m->nchunks || rumor_wire_chunk_range(m->n, m->chunk, h->chunk, &off, &len) < 0 ||
        off != h->offset || len != h->length) {
        rumor_err_set(RUMOR_EPROTO, "chunk %u/%u at [%llu, +%llu) is not on this peer's chunk grid",
                      h->chunk, h->nchunks, (unsigned long long)h->offset,
                      (unsigned long long)h->length);
        mx_count(m, -RUMOR_WIRE_BAD_RANGE, node, "params");
        return;
    }
    uint8_t *got = &s->got[(size_t)node * m->nchunks + h->chunk];
    if (*got) {
        rumor_err_set(RUMOR_EPROTO, "chunk %u of round %ld again", h->chunk, r);
        mx_count(m, -RUMOR_WIRE_DUPLICATE, node, "params");
        return;
    }
    if (s->done[h->chunk]) {
        /* an absent peer came back after this chunk was mixed without it */
        rumor_err_set(RUMOR_EPROTO, "chunk %u of round %ld was already mixed", h->chunk, r);
        mx_count(m, -RUMOR_WIRE_STALE_ROUND, node, "params");
        return;
    }
    if ((uintptr_t)data % sizeof(float) != 0) {
        /* libzmq may hand small frames out at any byte offset */
        memcpy(m->scratch, data, len * sizeof(float));
        data = m->scratch;
    }
    if (!rumor_wire_payload_finite(data, len)) {
        rumor_err_set(RUMOR_EPROTO, "NaN or Inf in chunk %u of round %ld", h->chunk, r);
        mx_count(m, -RUMOR_WIRE_NONFINITE, node, "params");
        return;
    }
    axpy(s->buf->data + off, (float)w, data, len, s->arrivals[h->chunk] == 0);
    s->arrivals[h->chunk]++;
    s->wsum[h->chunk] += w;
    *got = 1;
    if (++s->chunks_from[node] == (int)m->nchunks)
        s->complete++;
    mx_count(m, 0, node, "params");
    mix_if_ready(m, s, h->chunk);
}

/* Whom round cur waits for. A neighbour is waited for while it is alive
 * (heard from within the liveness window: the heartbeat timeout, or the
 * round's deadline if that is longer), has not said it is leaving, and has
 * not stayed more than MX_WAIT_LAG rounds behind this peer for that long.
 * One that did not answer the HELLO barrier is not waited for until it
 * speaks.
 *   - A live neighbour that misses a deadline is waited for again in the
 *     next round: peers never run ahead of a slow but live neighbour, they
 *     stay within a round or two of each other, and nobody has to skip
 *     rounds or fetch state after one late message.
 *   - A dead, frozen or cut-off neighbour stops being waited for once it
 *     has been silent for the window (it is never waited for longer than
 *     a deadline in any one round).
 *   - One far behind (restarted from a checkpoint, thawed, joining) is told
 *     where the swarm is and jumps or fetches state (mixer_state.c), which
 *     takes well under the window; a peer that stays behind is not waited
 *     for after it.
 * A neighbour that has sent part of round cur is waited for regardless. */
static void refresh_absent(rumor_mixer_t *m, double deadline)
{
    double now = rumor_now();
    double alive = m->cfg.heartbeat_timeout_ms > 0 ? m->cfg.heartbeat_timeout_ms / 1000.0 : 2.0;
    if (deadline > alive)
        alive = deadline;
    for (int j = 0; j < m->npeers; j++) {
        if (!m->talks_to[j])
            continue;
        if (m->peer_round[j] >= m->cur - MX_WAIT_LAG)
            m->behind_since[j] = 0;
        else if (m->behind_since[j] == 0)
            m->behind_since[j] = now;
        m->absent[j] = m->left[j] || now - m->last_heard[j] > alive ||
                       (m->behind_since[j] > 0 && now - m->behind_since[j] > alive) ||
                       (m->barrier_run && !m->heard[j] && !m->ready[j]);
    }
}

/* Where peer `node` listens, as membership (SWIM) spreads it: a peer whose
 * address was not known (a '-' in the list) or that came back elsewhere (a
 * replacement machine) is connected to at its new address. Returns 1 when
 * it moved, 0 when unchanged, < 0 on error. */
int mx_learn_endpoint(rumor_mixer_t *m, int node, const char *endpoint)
{
    if (node < 0 || node >= m->npeers || node == m->self || !endpoint || !*endpoint)
        return 0;
    if (m->ep[node] && strcmp(m->ep[node], endpoint) == 0)
        return 0;
    char *e = strdup(endpoint);
    if (!e)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    if (m->ep[node])
        rumor_info("peer %d is at %s now (was %s)", node, endpoint, m->ep[node]);
    else
        rumor_info("peer %d is at %s", node, endpoint);
    free(m->ep[node]);
    m->ep[node] = e;
    m->counters.endpoints_learned++;
    mx_drop_serves(m, node);
    if (!m->talks_to[node])
        return 1;
    return rumor_transport_connect(m->tr, node, e) < 0 ? RUMOR_ESYS : 1;
}

const char *mx_endpoint_name(const rumor_mixer_t *m, int node)
{
    return m->ep[node] ? m->ep[node] : "address not known yet";
}

/* Whether round cur can close: every in-neighbour sent all its chunks, or
 * is not waited for (refresh_absent) and has sent nothing this round,
 * or has moved on to a later round. */
static int moved_on(const rumor_mixer_t *m, int j)
{
    /* j sent chunks of a later round, or said (HELLO) it is in one: its
     * connection is in order, so what it has not sent of this round is not
     * coming (it skipped ahead). Chunks of rounds beyond the window were
     * dropped unread and do not count. */
    if (m->said_round[j] > m->cur)
        return 1;
    for (int d = 1; d < m->nslots; d++) {
        const struct mx_slot *n = &m->slot[(m->cur + d) % m->nslots];
        if (n->round == m->cur + d && n->buf && n->chunks_from[j] > 0)
            return 1;
    }
    return 0;
}

static int round_done(const rumor_mixer_t *m, const struct mx_slot *s)
{
    if (s->round != m->cur)
        return 0;
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (s->chunks_from[j] == (int)m->nchunks)
            continue;
        if (m->absent[j] && s->chunks_from[j] == 0)
            continue;
        if (m->cfg.conns_per_peer <= 1 && moved_on(m, j))
            continue;
        return 0;
    }
    return 1;
}

/* Finishes round cur: mixes the chunks not mixed yet (x = acc + (1 - w_c) x
 * where w_c is the weight that arrived), hands the buffer to the caller and
 * moves on to round cur + 1. */
static void close_round(rumor_mixer_t *m, int timed_out)
{
    long k = m->cur;
    if (ensure_slot(m, k) < 0) {
        pthread_mutex_lock(&m->mu);
        snprintf(m->closed_err, sizeof m->closed_err, "%s", rumor_err_msg());
        m->closed_rc = rumor_err_code() ? rumor_err_code() : RUMOR_ENOMEM;
        m->req_close = -1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
        return;
    }
    struct mx_slot *s = &m->slot[k % m->nslots];
    s->x = m->params->data;
    for (size_t c = 0; c < m->nchunks; c++)
        if (!s->done[c])
            mix_chunk(m, s, c);
    double dis = s->dis, selfw = s->selfw;
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (s->chunks_from[j] == (int)m->nchunks)
            continue;
        if (!m->absent[j])
            rumor_info("round %ld: peer %d sent %d of %zu chunks before the deadline; its "
                       "weight %.3g went to the self-weight",
                       k, j, s->chunks_from[j], m->nchunks, s->w_of[j]);
    }
    rumor_sendbuf_t *out = s->buf;
    /* The caller now owns s->buf as its parameters; the slot waits, empty,
     * for round k + nslots. */
    s->buf = NULL;
    s->round = -1;
    m->round_staleness = 0;
    /* a round that timed out waiting for a peer that sent nothing says
     * nothing about how long rounds take: not a deadline sample */
    int silent = 0;
    for (int i = 0; i < s->nin; i++)
        silent += s->chunks_from[s->in[i]] == 0;
    m->round_sample = !(timed_out && silent);
    mx_publish_close(m, k, out, s->nin, s->complete, timed_out, dis, selfw / (double)m->nchunks);
}

/* Hands the mixed parameters of round k to the caller and moves on to
 * round k + 1 (or later: an asynchronous peer follows its neighbours'
 * clock, see mixer_async.c, which sets m->cur itself beforehand). */
void mx_publish_close(rumor_mixer_t *m, long k, rumor_sendbuf_t *out, int nin, int complete,
                      int timed_out, double dis, double selfw)
{
    const rumor_transport_stats_t *ts = rumor_transport_stats(m->tr);
    if (m->cur <= k)
        m->cur = k + 1;
    pthread_mutex_lock(&m->mu);
    double elapsed = rumor_now() - m->round_start;
    if (!m->cfg.async && !atomic_load(&m->hurry) && m->round_sample)
        mx_record_round_time(m, elapsed);
    rumor_round_stats_t *st = &m->closed_stats;
    memset(st, 0, sizeof *st);
    st->round = k;
    st->in_neighbors = nin;
    st->complete = complete;
    st->timed_out = timed_out;
    st->disagreement = sqrt(dis);
    st->self_weight = selfw;
    st->deadline_s = m->cur_deadline;
    st->round_s = elapsed;
    st->swarm_round = mx_swarm_round(m);
    st->next_round = m->cur;
    st->window = m->nslots;
    st->behind_round = m->told_behind;
    st->members = m->swim ? m->vn : 0;
    m->told_behind = -1;
    st->max_staleness = m->round_staleness;
    st->bytes_sent = m->pub_sent = ts->bytes_sent;
    st->bytes_received = m->pub_received = ts->bytes_received;
    mx_buf_retire(m, m->params); /* may still be sending: recycled when done */
    m->params = out;
    m->closed_buf = out;
    m->closed_rc = 0;
    m->req_close = -1;
    m->next_send = m->cur;
    m->wire_stats_pub = m->wire_stats;
    m->counters_pub = m->counters;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* Queues round k's parameters for its out-neighbours. Rounds a window or
 * more behind k still queued for a peer are dropped: that peer has moved
 * past them or is gone. Absent peers get nothing until they show up again. */
static void start_send(rumor_mixer_t *m, long k, rumor_sendbuf_t *buf)
{
    /* x(k) is known now: chunks of round k that are complete can be mixed */
    m->sent_round = k;
    m->sent_buf = buf;
    struct mx_slot *s = &m->slot[k % m->nslots];
    if (s->round == k && s->buf) {
        s->x = buf->data;
        for (size_t c = 0; c < m->nchunks; c++)
            mix_if_ready(m, s, c);
    }
    for (int j = 0; j < m->npeers; j++) {
        struct mx_sendq *q = &m->sendq[j];
        while (q->n > 0 && q->round[0] < k - m->nslots + 1) {
            q->buf[0]->pins--;
            q->round[0] = q->round[1];
            q->buf[0] = q->buf[1];
            q->next[0] = q->next[1];
            q->n--;
        }
    }
    mx_view_update(m);
    int n = mx_out_neighbors(m, k, m->out_nbrs);
    n = n < 0 ? 0 : (n > m->npeers ? m->npeers : n);
    for (int i = 0; i < n; i++) {
        int j = m->out_nbrs[i];
        struct mx_sendq *q = &m->sendq[j];
        /* absent peers get x(k) too: a peer that comes back (thawed,
         * reconnected) learns the swarm's round from it */
        if (q->n == 2)
            continue;
        q->round[q->n] = k;
        q->buf[q->n] = buf;
        q->next[q->n] = 0;
        q->n++;
        buf->pins++;
    }
}

/* Hands as many chunks to ZeroMQ as each peer's queue takes, oldest round
 * first. */
static void pump_sends(rumor_mixer_t *m)
{
    for (int j = 0; j < m->npeers; j++) {
        struct mx_sendq *q = &m->sendq[j];
        while (q->n > 0) {
            size_t c = q->next[0];
            if (c == m->nchunks) {
                q->buf[0]->pins--;
                q->round[0] = q->round[1];
                q->buf[0] = q->buf[1];
                q->next[0] = q->next[1];
                q->n--;
                continue;
            }
            uint64_t off, len;
            RUMOR_IGNORE(rumor_wire_chunk_range(m->n, m->chunk, c, &off, &len));
            rumor_wire_hdr_t h;
            uint8_t bytes[RUMOR_WIRE_HDR_LEN];
            mx_fill_hdr(m, &h, RUMOR_WIRE_PARAMS);
            h.dtype = RUMOR_WIRE_DT_F32;
            h.round = (uint64_t)q->round[0];
            h.chunk = (uint32_t)c;
            h.nchunks = (uint32_t)m->nchunks;
            h.offset = off;
            h.length = len;
            rumor_wire_encode(&h, bytes);
            int rc = rumor_transport_send(m->tr, j, bytes, sizeof bytes, q->buf[0],
                                          q->buf[0]->data + off, len * sizeof(float));
            if (rc != 0) {
                if (rc < 0)
                    rumor_warn("mixer: %s", rumor_err_msg());
                break;
            }
            q->next[0]++;
        }
    }
}

static int sends_queued(const rumor_mixer_t *m)
{
    for (int j = 0; j < m->npeers; j++)
        if (m->sendq[j].n > 0)
            return 1;
    return 0;
}

/* Drops every queued send (leaving). */
static void drop_sends(rumor_mixer_t *m)
{
    for (int j = 0; j < m->npeers; j++) {
        struct mx_sendq *q = &m->sendq[j];
        for (int i = 0; i < q->n; i++)
            q->buf[i]->pins--;
        q->n = 0;
    }
}

/* ------------------------------------------------------- HELLO */

/* HELLO's aux: 0 "I have not heard you", 1 "I have heard you", 2 "a reply:
 * I have heard you", 3 "your round was stale here: I am at `round`" (2 and
 * 3 are never answered, so two peers do not ping-pong). Every HELLO that is
 * not a reply gets one, so a peer still in its barrier (or restarted) hears
 * back even after this one stopped its own HELLOs. */
static void on_hello(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node)
{
    m->heard[node] = 1;
    int sane = h->round < (uint64_t)(m->cur + MX_ROUND_SANITY);
    if (sane && (long)h->round > m->said_round[node])
        m->said_round[node] = (long)h->round;
    if (h->aux == 3 && m->talks_to[node] && sane && (long)h->round > m->told_behind)
        m->told_behind = (long)h->round;
    if (h->aux < 2 && m->talks_to[node])
        (void)send_control(m, node, RUMOR_WIRE_HELLO, 2);
    if (h->aux >= 1 && !m->ready[node]) {
        pthread_mutex_lock(&m->mu);
        m->ready[node] = 1;
        if (m->talks_to[node])
            m->nready++;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
    }
}

static void send_hellos(rumor_mixer_t *m)
{
    double now = rumor_now();
    if (!m->hello_active || now < m->next_hello)
        return;
    m->next_hello = now + 0.1;
    for (int j = 0; j < m->npeers; j++)
        if (m->talks_to[j])
            (void)send_control(m, j, RUMOR_WIRE_HELLO, m->heard[j]);
}

/* ------------------------------------------------------- receiving */

/* Reads one message (up to 3 frames kept; more are drained and rejected),
 * judges it and acts on it. Returns 0 when the socket had nothing. */
static int recv_one(rumor_mixer_t *m)
{
    void *pull = rumor_transport_pull(m->tr);
    zmq_msg_t part[3];
    zmq_msg_init(&part[0]);
    if (zmq_msg_recv(&part[0], pull, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&part[0]);
        return 0;
    }
    size_t frames = 1, sizes[2] = { 0, 0 }, total = zmq_msg_size(&part[0]);
    zmq_msg_init(&part[1]);
    zmq_msg_init(&part[2]);
    int more = zmq_msg_more(&part[0]);
    while (more) {
        zmq_msg_t extra;
        zmq_msg_t *dst = frames <= 2 ? &part[frames] : &extra;
        if (dst == &extra)
            zmq_msg_init(&extra);
        if (zmq_msg_recv(dst, pull, 0) < 0)
            break;
        total += zmq_msg_size(dst);
        if (frames <= 2)
            sizes[frames - 1] = zmq_msg_size(dst);
        more = zmq_msg_more(dst);
        if (dst == &extra)
            zmq_msg_close(dst);
        frames++;
    }
    rumor_transport_count_received(m->tr, total);
    rumor_wire_hdr_t h;
    int node = -1;
    int v = rumor_wire_decode(zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), &h);
    if (v == 0) {
        rumor_wire_expect_t e = { .swarm = m->swarm, .space = m->n, .self = m->ids[m->self],
                                  .max_chunk = m->chunk };
        v = rumor_wire_check(&h, &e, sizes, frames - 1 > 2 ? 2 : frames - 1);
        if (v == 0 && frames > 3) {
            rumor_err_set(RUMOR_EPROTO, "%zu frames", frames);
            v = -RUMOR_WIRE_BAD_FRAMES;
        }
    }
    if (v == 0 && rumor_transport_secure(m->tr)) {
        uint64_t id = rumor_transport_msg_peer_id(&part[0]);
        if (id != h.sender) {
            rumor_err_set(RUMOR_EPROTO, "sender id %016llx on a connection authenticated as %016llx",
                          (unsigned long long)h.sender, (unsigned long long)id);
            v = -RUMOR_WIRE_BAD_IDENTITY;
        }
    }
    if (v == 0 && (node = mx_node_of(m, h.sender)) < 0) {
        rumor_err_set(RUMOR_EPROTO, "unknown sender id %llu", (unsigned long long)h.sender);
        v = -RUMOR_WIRE_UNKNOWN_SENDER;
    }
    if (v == 0 && h.incarnation < m->known_inc[node]) {
        rumor_err_set(RUMOR_EPROTO, "incarnation %llu after %llu", (unsigned long long)h.incarnation,
                      (unsigned long long)m->known_inc[node]);
        v = -RUMOR_WIRE_OLD_INCARNATION;
    }
    if (v != 0) {
        mx_count(m, v, node, "message");
    } else {
        m->last_heard[node] = rumor_now();
        if (h.type != RUMOR_WIRE_LEAVE)
            m->left[node] = 0;
        if (h.incarnation > m->known_inc[node]) {
            if (m->known_inc[node] != 0) {
                rumor_info("peer %d restarted (incarnation %llu)", node,
                           (unsigned long long)h.incarnation);
                m->peer_round[node] = -1; /* its new life starts over */
                m->said_round[node] = -1;
                if (m->cfg.async)
                    mx_async_forget(m, node);
            }
            m->known_inc[node] = h.incarnation;
        }
        if (m->swim && h.type != RUMOR_WIRE_PROBE && h.type != RUMOR_WIRE_PROBE_REQ &&
            h.type != RUMOR_WIRE_ACK && h.type != RUMOR_WIRE_LEAVE)
            rumor_swim_heard(m->swim, rumor_now(), h.sender, h.incarnation);
        switch (h.type) {
        case RUMOR_WIRE_PROBE:
        case RUMOR_WIRE_PROBE_REQ:
        case RUMOR_WIRE_ACK:
            if (!m->swim) {
                mx_count(m, 0, node, "membership"); /* valid, not used: static membership */
                break;
            }
            v = rumor_swim_on_message(m->swim, rumor_now(), h.sender, h.incarnation, h.type, h.aux,
                                      frames > 1 ? zmq_msg_data(&part[1]) : NULL,
                                      frames > 1 ? zmq_msg_size(&part[1]) : 0);
            mx_count(m, v, node, "membership");
            break;
        case RUMOR_WIRE_PARAMS:
            if (m->cfg.async)
                mx_async_on_params(m, &h, node, zmq_msg_data(&part[1]));
            else
                on_params(m, &h, node, zmq_msg_data(&part[1]));
            break;
        case RUMOR_WIRE_STATE_REQ:
            mx_on_state_req(m, &h, node);
            break;
        case RUMOR_WIRE_STATE_CHUNK:
            mx_on_state_chunk(m, &h, node, &part[1], &part[2], frames == 3);
            break;
        case RUMOR_WIRE_GRADS:
            if (on_grads(m, &h, node, &part[0], &part[1])) {
                zmq_msg_close(&part[2]);
                return 1; /* held: the parts now belong to the hold queue */
            }
            break;
        case RUMOR_WIRE_HELLO:
            mx_heard_round(m, node, (long)(h.round > (uint64_t)LONG_MAX / 2 ? 0 : h.round));
            on_hello(m, &h, node);
            mx_count(m, 0, node, "hello");
            break;
        case RUMOR_WIRE_LEAVE:
            /* not waited for from now on; it is waited for again when it
             * speaks again (a restart) */
            m->left[node] = 1;
            rumor_info("peer %d is leaving", node);
            mx_count(m, 0, node, "leave");
            break;
        default:
            mx_count(m, 0, node, "message"); /* valid, not used by this peer yet */
            break;
        }
    }
    zmq_msg_close(&part[0]);
    zmq_msg_close(&part[1]);
    zmq_msg_close(&part[2]);
    return 1;
}

/* ------------------------------------------------------- the loop */

/* Makes the comm thread's counters visible to the caller. */
static void publish(rumor_mixer_t *m)
{
    const rumor_transport_stats_t *ts = rumor_transport_stats(m->tr);
    pthread_mutex_lock(&m->mu);
    m->wire_stats_pub = m->wire_stats;
    m->pub_sent = ts->bytes_sent;
    m->pub_received = ts->bytes_received;
    m->swarm_round_pub = mx_swarm_round(m);
    m->counters_pub = m->counters;
    m->vn_pub = m->vn;
    pthread_mutex_unlock(&m->mu);
}

/* Takes the caller's requests (under mu). */
static void take_requests(rumor_mixer_t *m)
{
    pthread_mutex_lock(&m->mu);
    if (m->req_send >= 0) {
        start_send(m, m->req_send, m->req_send_buf);
        if (m->req_send >= 1)
            m->hello_active = 0; /* everyone who was coming has come */
        m->req_send = -1;
    }
    if (m->req_hello) {
        m->hello_active = 1;
        m->req_hello = 0;
    }
    if (m->ar.requested) {
        m->ar.requested = 0;
        ar_start(m);
    }
    if (m->req_jump >= 0) {
        mx_do_jump(m, m->req_jump);
        m->req_jump = -1;
        pthread_cond_broadcast(&m->cv);
    }
    if (m->cu.requested) {
        m->cu.requested = 0;
        m->cu.active = 1;
    }
    pthread_mutex_unlock(&m->mu);
}

static int all_sends_done(rumor_mixer_t *m)
{
    for (int i = 0; i < m->nbufs; i++)
        if (atomic_load(&m->bufs[i]->refs) != 0)
            return 0;
    return atomic_load(&m->ar.ref.refs) == 0;
}

void mx_comm_main(rumor_mixer_t *m)
{
    zmq_pollitem_t *items = calloc((size_t)m->npeers + 2, sizeof *items);
    if (!items) {
        rumor_error("mixer: out of memory in the comm thread");
        return;
    }
    int stopping = 0;
    for (;;) {
        take_requests(m);
        pthread_mutex_lock(&m->mu);
        int stop = m->req_stop;
        double stop_deadline = m->stop_deadline;
        long want_close = m->req_close;
        double close_deadline = m->close_deadline;
        double pace_until = m->round_start + m->pace;
        double round_deadline = m->cur_deadline;
        int pacing = 0;
        pthread_mutex_unlock(&m->mu);
        /* Stopping: neighbours still need this peer's last round, so
         * queued chunks go out first (within the grace period), then LEAVE
         * (behind them: each connection is FIFO), then ZeroMQ lets go. */
        if (stop && !stopping)
            stopping = 1;
        if (stopping == 1 && (!sends_queued(m) || rumor_now() >= stop_deadline)) {
            drop_sends(m);
            if (m->swim)
                (void)rumor_swim_leave(m->swim, rumor_now());
            for (int j = 0; j < m->npeers; j++)
                if (m->talks_to[j])
                    (void)send_control(m, j, RUMOR_WIRE_LEAVE, 0);
            stopping = 2;
        }
        if (stopping == 2 && (all_sends_done(m) || rumor_now() >= stop_deadline))
            break;

        pump_sends(m);
        send_hellos(m);
        ar_progress(m);
        mx_state_progress(m);
        if (!stopping)
            mx_redial(m);
        if (m->swim && !stopping) {
            (void)rumor_swim_tick(m->swim, rumor_now());
            (void)mx_view_update(m);
        }

        double now = rumor_now();
        if (atomic_load(&m->hurry))
            close_deadline = now;
        if (want_close >= 0 && want_close == m->cur) {
            if (m->cfg.async) {
                mx_async_close(m); /* never waits */
                continue;
            }
            /* a round nobody sent to has no slot yet: open it, or a peer
             * whose neighbours are all absent would wait out every deadline */
            if (ensure_slot(m, m->cur) < 0)
                rumor_warn("mixer: %s", rumor_err_msg());
            struct mx_slot *s = &m->slot[m->cur % m->nslots];
            refresh_absent(m, round_deadline);
            int complete = round_done(m, s);
            /* every in-neighbour absent: nothing to wait for, but a peer
             * alone keeps the swarm's pace (the median round time) instead
             * of racing its round counter ahead of everyone's */
            pacing = complete && s->nin > 0 && s->complete == 0 && now < pace_until &&
                     !atomic_load(&m->hurry) && now < close_deadline;
            if (!pacing && (complete || now >= close_deadline)) {
                close_round(m, !complete);
                continue;
            }
        }

        /* Poll: wake pipe, PULL, and PUSH sockets with chunks waiting. */
        int ni = 0;
        items[ni].socket = NULL;
        items[ni].fd = m->wake_fd[0];
        items[ni++].events = ZMQ_POLLIN;
        items[ni].socket = rumor_transport_pull(m->tr);
        items[ni++].events = ZMQ_POLLIN;
        for (int j = 0; j < m->npeers; j++)
            if ((m->sendq[j].n > 0 || mx_state_wants_pollout(m, j)) &&
                rumor_transport_push(m->tr, j)) {
                items[ni].socket = rumor_transport_push(m->tr, j);
                items[ni].events = ZMQ_POLLOUT;
                ni++;
            }
        ar_poll_items(m, items, &ni);
        double wait = 0.05;
        if (want_close >= 0 && close_deadline - now < wait)
            wait = close_deadline - now;
        if (m->ar.active && m->ar.step_deadline - now < wait)
            wait = m->ar.step_deadline - now;
        if (m->hello_active && m->next_hello - now < wait)
            wait = m->next_hello - now;
        if (pacing && pace_until - now < wait)
            wait = pace_until - now;
        if (m->swim && rumor_swim_next_deadline(m->swim) - now < wait)
            wait = rumor_swim_next_deadline(m->swim) - now;
        if (stopping)
            wait = 0.01;
        long ms = wait > 0 ? (long)(wait * 1000.0) + 1 : 0;
        if (zmq_poll(items, ni, ms) < 0 && zmq_errno() != EINTR) {
            rumor_error("mixer: zmq_poll: %s", zmq_strerror(zmq_errno()));
            break;
        }
        if (items[0].revents)
            drain_wake(m);
        /* Drain what arrived, bounded so sends and closes are not starved. */
        for (int k = 0; k < 256 && recv_one(m); k++)
            ;
        publish(m);
    }
    free(items);
}

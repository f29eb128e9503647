/* The mixer's sending side (comm thread): message headers, control
 * messages, queueing each round's parameters for the out-neighbours and
 * handing their ranges to ZeroMQ, HELLOs (see mixer.h, mixer_int.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "mixer_int.h"
#include "terms.h"

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
 * receiving, so a neighbour learns whether it fell behind. A neighbour that
 * hears a later round than its own takes it that nothing more of its round
 * is coming from here (mx_round_done), so the claim never runs ahead of the
 * data on the connection: while ranges of an older round still wait in the
 * send queue (they go out after this message), the claim is that round. */
int mx_send_control(rumor_mixer_t *m, int peer, int type, uint32_t aux)
{
    rumor_wire_hdr_t h;
    uint8_t bytes[RUMOR_WIRE_HDR_LEN];
    mx_fill_hdr(m, &h, type);
    h.aux = aux;
    long r = m->cur > 0 ? m->cur : 0;
    const struct mx_sendq *q = &m->sendq[peer];
    if (q->n > 0 && q->round[0] >= 0 && q->round[0] < r)
        r = q->round[0];
    h.round = (uint64_t)r;
    rumor_wire_encode(&h, bytes);
    if (type == RUMOR_WIRE_HELLO && (m->cfg.terms || m->open)) {
        /* what this peer runs (terms.h); in an open swarm also its dial-back
         * nonce and the receiver's, echoed (mx_reach_check) */
        const char *body = m->cfg.terms ? m->cfg.terms : "";
        if (m->open) {
            char v[24];
            snprintf(m->hello_body, RUMOR_TERMS_MAX + 1, "%s", body);
            snprintf(v, sizeof v, "%016llx", (unsigned long long)m->reach_nonce);
            int ok = rumor_terms_add(m->hello_body, RUMOR_TERMS_MAX + 1, "dialback", v) == 0;
            snprintf(v, sizeof v, "%016llx", (unsigned long long)m->peer_nonce[peer]);
            if (ok && m->peer_nonce[peer])
                ok = rumor_terms_add(m->hello_body, RUMOR_TERMS_MAX + 1, "echo", v) == 0;
            if (ok)
                body = m->hello_body;
        }
        int rc = rumor_transport_send_body(m->tr, peer, bytes, sizeof bytes, body, strlen(body));
        if (rc == 0)
            mx_terms_told(m, peer);
        return rc;
    }
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

void mx_ask_round(rumor_mixer_t *m, int node)
{
    double now = rumor_now();
    if (!m->talks_to[node] || now - m->asked_round[node] < 0.25)
        return;
    m->asked_round[node] = now;
    (void)mx_send_control(m, node, RUMOR_WIRE_HELLO, 1);
}

/* An entry becomes q's head: whether it goes in pieces. A slow link (the
 * last round in pieces went out slower than MX_SLOW_BPS) gets pieces; a
 * fast one whole chunks (fewer messages: on loopback 64 KiB pieces halve
 * gossip's throughput), with a round in pieces every MX_PROBE_EVERY to
 * measure the link again. */
static void head_begins(struct mx_sendq *q, double now)
{
    q->head_at = now;
    q->held = 0;
    q->pieces = q->slow || q->heads++ % MX_PROBE_EVERY == 0;
}

/* Drops the head entry of q: all sent (`sent`: the connection moved), or
 * too old to send. Dropping an old round is not movement: a connection to
 * a neighbour that died holds rounds ZeroMQ never takes, and counting their
 * drops (or the next round queued behind them) as movement would keep it
 * gating every other connection's newer rounds (mx_pump_sends) for good:
 * a swarm of 3 whose third peer was killed ran 8 rounds a second instead
 * of 100. */
static void pop_head(struct mx_sendq *q, double now, int sent)
{
    q->buf[0]->pins--;
    q->round[0] = q->round[1];
    q->buf[0] = q->buf[1];
    q->next[0] = q->next[1];
    q->n--;
    if (sent)
        q->moved_at = now;
    else
        q->stuck = 1;
    if (q->n > 0)
        head_begins(q, now);
}

/* Appends round k's parameters to q (not full), behind what it holds. */
static void queue_round(struct mx_sendq *q, long k, rumor_sendbuf_t *buf, double now)
{
    if (q->n == 0) {
        if (!q->stuck) /* a fresh round on a connection that keeps up */
            q->moved_at = now;
        head_begins(q, now);
    }
    q->round[q->n] = k;
    q->buf[q->n] = buf;
    q->next[q->n] = 0;
    q->n++;
    buf->pins++;
}

/* Queues round k's parameters for its out-neighbours. Rounds a window or
 * more behind k still queued for a peer are dropped: that peer has moved
 * past them or is gone. Absent peers get nothing until they show up again. */
void mx_start_send(rumor_mixer_t *m, long k, rumor_sendbuf_t *buf)
{
    /* compressed: what goes out is the coded change, not x (NULL: nothing) */
    rumor_sendbuf_t *x = buf;
    if (m->ch.on)
        buf = mx_choco_begin(m, k, buf);
    /* x(k) is known now (the self-term of the mix: what was sent): chunks
     * of round k that are complete can be mixed */
    m->sent_round = k;
    /* held until the next round's: ranges that come ahead are judged
     * against it (mx_robust_own), so it must not go back to the pool */
    if (m->sent_buf)
        m->sent_buf->pins--;
    m->sent_buf = buf ? buf : x;
    m->sent_buf->pins++;
    free(m->outlier_own0); /* the outlier check judges by what was sent now */
    m->outlier_own0 = NULL;
    /* a round queued ahead (rumor_mixer_send_ahead) is whole now; any other
     * one queued ahead (the caller jumped past it) was final as far as it
     * went: its rest goes too, x does not change over a jump */
    long ahead = m->ahead_round;
    m->ahead_round = -1;
    struct mx_slot *s = &m->slot[k % m->nslots];
    if (s->round == k && s->buf) {
        s->x = m->sent_buf->data;
        mx_slot_x_known(m, s);
    }
    double now = rumor_now();
    for (int j = 0; j < m->npeers; j++) {
        struct mx_sendq *q = &m->sendq[j];
        while (q->n > 0 && q->round[0] < k - m->nslots + 1)
            pop_head(q, now, 0);
    }
    mx_view_update(m);
    if (!buf)
        return;
    int n = mx_out_neighbors(m, k, m->out_nbrs);
    n = n < 0 ? 0 : (n > m->npeers ? m->npeers : n);
    for (int i = 0; i < n; i++) {
        int j = m->out_nbrs[i];
        struct mx_sendq *q = &m->sendq[j];
        /* absent peers get x(k) too: a peer that comes back (thawed,
         * reconnected) learns the swarm's round from it; one whose
         * terms differ drops it (mixer_terms.c) */
        if (m->incompatible[j])
            continue;
        if (q->n == 2 || (ahead == k && q->n > 0 && q->round[q->n - 1] == k))
            continue; /* full, or this round went ahead */
        queue_round(q, k, buf, now);
    }
}

/* Hands q's head entry to ZeroMQ, piece by piece, as far as the connection
 * takes them. Returns how many pieces went. */
static int send_head(rumor_mixer_t *m, int j, double now)
{
    struct mx_sendq *q = &m->sendq[j];
    int sent = 0;
    uint64_t limit = q->n > 0 && q->round[0] == m->ahead_round ? m->ahead_upto : m->n;
    if (q->n > 0 && q->next[0] >= limit && limit < m->n)
        q->held = 1;
    while (q->n > 0 && q->next[0] < limit) {
        uint64_t at = q->next[0];
        size_t c = (size_t)(at / m->chunk);
        uint64_t off, len;
        RUMOR_IGNORE(rumor_wire_chunk_range(m->n, m->chunk, c, &off, &len));
        rumor_wire_hdr_t h;
        uint8_t bytes[RUMOR_WIRE_HDR_LEN];
        mx_fill_hdr(m, &h, RUMOR_WIRE_PARAMS);
        h.dtype = RUMOR_WIRE_DT_F32;
        const struct mx_code *code = mx_choco_code(m, q->buf[0]);
        const void *payload;
        size_t nbytes;
        if (code) { /* a coded chunk goes whole */
            h.dtype = (uint8_t)m->ch.dtype;
            h.aux = code->aux[c];
            payload = code->bytes + c * code->stride;
            nbytes = code->nbytes[c];
        } else { /* a piece of the chunk */
            uint64_t end = off + len < limit ? off + len : limit;
            off = at;
            len = end - at;
            if (q->pieces && len > MX_PIECE)
                len = MX_PIECE;
            payload = q->buf[0]->data + off;
            nbytes = len * sizeof(float);
        }
        h.round = (uint64_t)q->round[0];
        h.chunk = (uint32_t)c;
        h.nchunks = (uint32_t)m->nchunks;
        h.offset = off;
        h.length = len;
        rumor_wire_encode(&h, bytes);
        int rc;
        if (m->cfg.tamper && !code) { /* testing: a lying peer's range (mixer.h) */
            if (!m->tamper_buf && !(m->tamper_buf = malloc(m->chunk * sizeof(float)))) {
                rumor_warn("mixer: out of memory");
                break;
            }
            m->cfg.tamper(m->cfg.tamper_arg, q->round[0], off, payload, m->tamper_buf, len);
            rc = rumor_transport_send_body(m->tr, j, bytes, sizeof bytes, m->tamper_buf, nbytes);
        } else {
            rc = rumor_transport_send(m->tr, j, bytes, sizeof bytes, q->buf[0], payload, nbytes);
        }
        if (rc != 0) {
            if (rc < 0)
                rumor_warn("mixer: %s", rumor_err_msg());
            break;
        }
        q->next[0] = off + len;
        q->stuck = 0;
        q->moved_at = now;
        m->counters.elems_sent += len;
        if (q->round[0] == m->ahead_round)
            m->counters.elems_ahead += len;
        sent++;
    }
    return sent;
}

/* Hands ranges to ZeroMQ, the oldest round first across all connections:
 * while round r's ranges still wait for one neighbour's connection, no
 * newer round's ranges go to any other. Two rounds sent at once to two
 * neighbours share this peer's upload, and the older one, which a
 * neighbour is waiting for, arrives later (measured on 100 Mbit/s links:
 * a third of onepeer-exp's sends overlapped the previous round's and took
 * 0.195 s against 0.126 s). On a slow link ranges go in small pieces
 * (MX_PIECE, head_begins) and the kernel holds little unsent (the
 * transport's TCP_NOTSENT_LOWAT), so what ZeroMQ has taken is about what
 * is on the wire. A connection to a neighbour that is gone
 * (mx_refresh_absent: left, silent, or never heard), or that took nothing
 * for MX_STALL_S (frozen or gone, not yet found out), holds nobody back.
 * One that only looks behind still does: a neighbour this peer sends to
 * but does not hear from in its rounds (onepeer-exp's out-neighbours) says
 * its round only in heartbeats, and looks tens of rounds behind; letting
 * it hold nobody back sent two rounds at once on most of onepeer-exp's
 * rounds (0.69 of the link bound). */
void mx_pump_sends(rumor_mixer_t *m)
{
    double now = rumor_now();
    for (;;) {
        long gate = LONG_MAX; /* the oldest round a moving connection still waits to send */
        for (int j = 0; j < m->npeers; j++) {
            struct mx_sendq *q = &m->sendq[j];
            while (q->n > 0 && q->next[0] >= m->n) {
                /* a round in pieces went out at the link's pace (ZeroMQ
                 * holds a few, the kernel little): is the link slow? */
                if (q->pieces && !q->held)
                    q->slow = (double)m->n * sizeof(float) < MX_SLOW_BPS * (now - q->head_at);
                pop_head(q, now, 1);
            }
            if (q->n > 0 && now - q->moved_at < MX_STALL_S && !m->gone[j] &&
                q->round[0] < gate)
                gate = q->round[0];
        }
        int sent = 0;
        for (int j = 0; j < m->npeers; j++) {
            struct mx_sendq *q = &m->sendq[j];
            if (q->n > 0 && (q->round[0] <= gate || now - q->moved_at >= MX_STALL_S))
                sent += send_head(m, j, now);
        }
        m->send_gate = gate;
        if (!sent)
            return;
    }
}

/* Whether j's queue has ranges ZeroMQ may take now: not only ones waiting
 * for the caller's step, nor held behind an older round's sends to another
 * neighbour (mx_pump_sends' gate). The comm thread polls only these
 * connections for room: polling a writable connection that the gate holds
 * returns at once, again and again, and that spinning cost a third more
 * CPU in onepeer-exp runs, where a peer's rounds go to different
 * neighbours. The gate opens when the connection holding it takes its
 * last range, which its own poll reports; the stall exemption
 * (MX_STALL_S) is looked at within the poll's 50 ms. */
int mx_send_pending(const rumor_mixer_t *m, int j)
{
    const struct mx_sendq *q = &m->sendq[j];
    if (q->n == 0)
        return 0;
    if (q->round[0] > m->send_gate && rumor_now() - q->moved_at < MX_STALL_S)
        return 0;
    return q->round[0] != m->ahead_round || q->next[0] < m->ahead_upto;
}

/* Round k's parameters x, before round_begin(k), as the caller finishes
 * them: [0, upto) is final (rumor_mixer_send_ahead). The first call queues
 * round k for its out-neighbours, behind what is queued; later ones move
 * the line. Lists only (a membership view may change at round_begin), and
 * plain rounds: a coded or asynchronous round is made at round_begin. */
void mx_send_ahead(rumor_mixer_t *m, long k, const float *x, uint64_t upto)
{
    if (m->cfg.async || m->ch.on || m->swim || m->open || m->params_ready)
        return;
    if (m->ahead_round != k) {
        if (k != m->sent_round + 1)
            return; /* only the round after the one begun */
        rumor_sendbuf_t *buf = NULL;
        for (int i = 0; i < m->nbufs && !buf; i++)
            if (m->bufs[i]->data == x)
                buf = m->bufs[i];
        if (!buf)
            return;
        double now = rumor_now();
        int n = mx_out_neighbors(m, k, m->out_nbrs);
        n = n < 0 ? 0 : (n > m->npeers ? m->npeers : n);
        for (int i = 0; i < n; i++) {
            if (m->incompatible[m->out_nbrs[i]])
                continue; /* it drops them */
            struct mx_sendq *q = &m->sendq[m->out_nbrs[i]];
            if (q->n < 2) /* (round_begin skips a full one too) */
                queue_round(q, k, buf, now);
        }
        m->ahead_round = k;
        m->ahead_upto = 0;
    }
    if (upto > m->ahead_upto)
        m->ahead_upto = upto > m->n ? m->n : upto;
}

/* Drops the round queued ahead whose rest will never be final (leaving):
 * what went out of it mixes where it covers, and the neighbours do not wait
 * for the rest once this peer's LEAVE, sent after it, arrives. */
void mx_drop_ahead(rumor_mixer_t *m)
{
    if (m->ahead_round < 0)
        return;
    for (int j = 0; j < m->npeers; j++) {
        struct mx_sendq *q = &m->sendq[j];
        if (q->n > 0 && q->round[q->n - 1] == m->ahead_round) {
            q->buf[q->n - 1]->pins--;
            q->n--;
            if (q->n == 0)
                q->held = 0;
        }
    }
    m->ahead_round = -1;
}

int mx_sends_queued(const rumor_mixer_t *m)
{
    for (int j = 0; j < m->npeers; j++)
        if (m->sendq[j].n > 0)
            return 1;
    return 0;
}

/* Drops every queued send (leaving). */
void mx_drop_sends(rumor_mixer_t *m)
{
    for (int j = 0; j < m->npeers; j++) {
        struct mx_sendq *q = &m->sendq[j];
        if (q->n > 0)
            rumor_info("leaving: %d round(s) queued for peer %d were not sent before the "
                       "linger time ran out",
                       q->n, j);
        for (int i = 0; i < q->n; i++)
            q->buf[i]->pins--;
        q->n = 0;
    }
}

/* HELLOs, 10 a second while the barrier lasts, to every peer this one
 * talks to. In an open swarm that is every member of the view (64 founders
 * waiting for each other on one machine would send 40 000 HELLOs a
 * second), so there a member that has answered and been heard gets one
 * every tenth time only (it may still miss this peer's "I have heard
 * you"). */
void mx_send_hellos(rumor_mixer_t *m)
{
    double now = rumor_now();
    /* not before the rank check passed: a second process claiming this
     * peer's rank must not reach the neighbours */
    if (!m->hello_active || now < m->next_hello || m->rank_state != 2)
        return;
    m->next_hello = now + 0.1;
    int all = !m->open || m->hello_ticks++ % 10 == 0;
    for (int j = 0; j < m->npeers; j++)
        if (m->talks_to[j] && (all || !m->ready[j] || !m->heard[j]))
            (void)mx_send_control(m, j, RUMOR_WIRE_HELLO, m->heard[j]);
}

/* Every neighbour hears from this peer at least once a heartbeat interval
 * (the transport's, 0.5 s by default), between rounds too (an application
 * that pauses gossip, a long local step): a neighbour silent for 3 s is
 * taken for gone and redialled (mx_redial), which throws away what was
 * queued for it, so a quiet link must not look like a dead one. Each pass
 * reaches the in- and out-neighbours of this peer's round and the next
 * MX_HB_OTHERS other members it talks to in turn: they learn its round
 * (mx_swarm_round) and have it heard when the graph makes them neighbours.
 * In an open swarm every member of the view is one, and a heartbeat to
 * each twice a second made each of 128 peers on one machine send 254 and
 * receive as many a second, O(N) a peer; a view of up to MX_HB_OTHERS
 * members beyond the neighbours still hears every pass. */
#define MX_HB_OTHERS 16

static void heartbeat(rumor_mixer_t *m, int j)
{
    if (m->incompatible[j] && !m->incompat_told[j])
        /* its terms differ and it has not heard this peer's yet (its
         * connection was not up): a HELLO instead, until it has */
        (void)mx_send_control(m, j, RUMOR_WIRE_HELLO, 2);
    else
        (void)mx_send_control(m, j, RUMOR_WIRE_HEARTBEAT, 0);
}

static int listed(const int *v, int n, int j)
{
    for (int i = 0; i < n; i++)
        if (v[i] == j)
            return 1;
    return 0;
}

void mx_send_heartbeats(rumor_mixer_t *m)
{
    double now = rumor_now();
    if (now < m->next_heartbeat || m->rank_state != 2)
        return;
    double ivl = m->cfg.heartbeat_ivl_ms > 0 ? m->cfg.heartbeat_ivl_ms / 1000.0 : 0.5;
    m->next_heartbeat = now + ivl;
    long r = m->cur > 0 ? m->cur : 0;
    int nin = mx_in_neighbors(m, r, m->tmp_nbrs, NULL); /* who, not their weights */
    int nout = mx_out_neighbors(m, r, m->out_nbrs);
    nin = nin > 0 ? nin : 0;
    nout = nout > 0 ? nout : 0;
    for (int i = 0; i < nin; i++)
        if (m->talks_to[m->tmp_nbrs[i]])
            heartbeat(m, m->tmp_nbrs[i]);
    for (int i = 0; i < nout; i++)
        if (m->talks_to[m->out_nbrs[i]] && !listed(m->tmp_nbrs, nin, m->out_nbrs[i]))
            heartbeat(m, m->out_nbrs[i]);
    int sent = 0, j = m->hb_next % (m->npeers > 0 ? m->npeers : 1);
    for (int s = 0; s < m->npeers && sent < MX_HB_OTHERS; s++, j = (j + 1) % m->npeers) {
        if (!m->talks_to[j] || j == m->self || listed(m->tmp_nbrs, nin, j) ||
            listed(m->out_nbrs, nout, j))
            continue;
        heartbeat(m, j);
        sent++;
    }
    m->hb_next = j;
}

/* Whether every out-neighbour of this peer's last round has passed it (a
 * HELLO, HEARTBEAT or LEAVE of a later round), left, or fallen silent. A
 * leaving peer waits for that (within its grace time): ZeroMQ lets go of a
 * message once it is in the kernel's socket buffer, and the round's last
 * bytes still there are lost when the connection is closed under them (a
 * neighbour that reads slowly missed the end of a 16 MB round that way). */
int mx_neighbours_passed(rumor_mixer_t *m)
{
    long last = m->cur - 1;
    if (m->cfg.async || last < 0 || m->rank_state != 2)
        return 1;
    int n = mx_out_neighbors(m, last, m->tmp_nbrs);
    double now = rumor_now();
    double alive = m->cfg.heartbeat_timeout_ms > 0 ? m->cfg.heartbeat_timeout_ms / 1000.0 : 2.0;
    for (int i = 0; i < n; i++) {
        int j = m->tmp_nbrs[i];
        if (j < 0 || j == m->self || !m->talks_to[j] || m->left[j] || m->incompatible[j] ||
            m->ctl_round[j] > last || now - m->last_heard[j] > alive)
            continue;
        return 0;
    }
    return 1;
}

/* Whether a neighbour of other terms that still speaks has not heard this
 * peer's yet; a HELLO is tried again for each (a leaving peer's first try
 * fails while its connection to a neighbour that started late is not up,
 * and that neighbour would wait out its start timeout for a peer that has
 * gone); also while one just queued may still be in ZeroMQ's pipe. */
int mx_untold_retry(rumor_mixer_t *m)
{
    if (m->rank_state != 2)
        return 0;
    double now = rumor_now();
    double alive = m->cfg.heartbeat_timeout_ms > 0 ? m->cfg.heartbeat_timeout_ms / 1000.0 : 2.0;
    int untold = 0;
    for (int j = 0; j < m->npeers; j++) {
        if (!m->talks_to[j] || !m->incompatible[j] || m->incompat_told[j] || m->left[j] ||
            now - m->last_heard[j] > alive)
            continue;
        if (mx_send_control(m, j, RUMOR_WIRE_HELLO, 2) != 0)
            untold = 1;
        else /* queued in ZeroMQ, which drops it when the socket closes */
            m->told_hold = now + 0.1;
    }
    return untold || now < m->told_hold;
}

int mx_all_sends_done(rumor_mixer_t *m)
{
    for (int i = 0; i < m->nbufs; i++)
        if (atomic_load(&m->bufs[i]->refs) != 0)
            return 0;
    return atomic_load(&m->ar.ref.refs) == 0;
}


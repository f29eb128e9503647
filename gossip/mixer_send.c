/* The mixer's sending side (comm thread): message headers, control
 * messages, queueing each round's parameters for the out-neighbours and
 * handing their ranges to ZeroMQ, HELLOs (see mixer.h, mixer_int.h). */
#include <string.h>
#include <zmq.h>

#include "mixer_int.h"

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
    m->sent_buf = buf ? buf : x;
    struct mx_slot *s = &m->slot[k % m->nslots];
    if (s->round == k && s->buf) {
        s->x = m->sent_buf->data;
        mx_slot_x_known(m, s);
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
    if (!buf)
        return;
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
void mx_pump_sends(rumor_mixer_t *m)
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
            const struct mx_code *code = mx_choco_code(m, q->buf[0]);
            const void *payload = q->buf[0]->data + off;
            size_t nbytes = len * sizeof(float);
            if (code) {
                h.dtype = (uint8_t)m->ch.dtype;
                h.aux = code->aux[c];
                payload = code->bytes + c * code->stride;
                nbytes = code->nbytes[c];
            }
            h.round = (uint64_t)q->round[0];
            h.chunk = (uint32_t)c;
            h.nchunks = (uint32_t)m->nchunks;
            h.offset = off;
            h.length = len;
            rumor_wire_encode(&h, bytes);
            int rc = rumor_transport_send(m->tr, j, bytes, sizeof bytes, q->buf[0], payload,
                                          nbytes);
            if (rc != 0) {
                if (rc < 0)
                    rumor_warn("mixer: %s", rumor_err_msg());
                break;
            }
            q->next[0]++;
        }
    }
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
        for (int i = 0; i < q->n; i++)
            q->buf[i]->pins--;
        q->n = 0;
    }
}

void mx_send_hellos(rumor_mixer_t *m)
{
    double now = rumor_now();
    /* not before the rank check passed: a second process claiming this
     * peer's rank must not reach the neighbours */
    if (!m->hello_active || now < m->next_hello || m->rank_state != 2)
        return;
    m->next_hello = now + 0.1;
    for (int j = 0; j < m->npeers; j++)
        if (m->talks_to[j])
            (void)mx_send_control(m, j, RUMOR_WIRE_HELLO, m->heard[j]);
}

/* Every neighbour hears from this peer at least once a heartbeat interval
 * (the transport's, 0.5 s by default), between rounds too (an application that pauses gossip, a long local step): a
 * neighbour silent for 3 s is taken for gone and redialled (mx_redial),
 * which throws away what was queued for it, so a quiet link must not look
 * like a dead one. */
void mx_send_heartbeats(rumor_mixer_t *m)
{
    double now = rumor_now();
    if (now < m->next_heartbeat || m->rank_state != 2)
        return;
    double ivl = m->cfg.heartbeat_ivl_ms > 0 ? m->cfg.heartbeat_ivl_ms / 1000.0 : 0.5;
    m->next_heartbeat = now + ivl;
    for (int j = 0; j < m->npeers; j++)
        if (m->talks_to[j])
            (void)mx_send_control(m, j, RUMOR_WIRE_HEARTBEAT, 0);
}

int mx_all_sends_done(rumor_mixer_t *m)
{
    for (int i = 0; i < m->nbufs; i++)
        if (atomic_load(&m->bufs[i]->refs) != 0)
            return 0;
    return atomic_load(&m->ar.ref.refs) == 0;
}


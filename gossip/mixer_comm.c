/* The mixer's comm thread: receiving, accumulating, sending, closing rounds,
 * the HELLO handshake and the ring all-reduce (see mixer.h, mixer_int.h).
 * Everything here runs on the comm thread except the wake helpers (any
 * thread) and mx_alloc_state / mx_free_state (create and destroy). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sodium.h>
#include <unistd.h>
#include <zmq.h>

#include "mixer_int.h"
#include "terms.h"


/* --------------------------------------------------------- set-up */

int mx_node_of(const rumor_mixer_t *m, uint64_t id) { return rumor_idmap_find(&m->idmap, id); }

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
    m->known_inc = calloc((size_t)N, sizeof *m->known_inc);
    m->talks_to = calloc((size_t)N, 1);
    m->ready = calloc((size_t)N, 1);
    m->heard = calloc((size_t)N, 1);
    m->peer_nonce = calloc((size_t)N, sizeof *m->peer_nonce);
    m->hello_body = malloc(RUMOR_TERMS_MAX + 1);
    m->reach_by = -1;
    while (!m->reach_nonce) /* 0: none */
        randombytes_buf(&m->reach_nonce, sizeof m->reach_nonce);
    m->absent = calloc((size_t)N, 1);
    m->gone = calloc((size_t)N, 1);
    m->left = calloc((size_t)N, 1);
    m->ep = calloc((size_t)N, sizeof *m->ep);
    m->behind_since = calloc((size_t)N, sizeof *m->behind_since);
    m->scratch = aligned_alloc(64, MX_SCRATCH * sizeof(float));
    m->rej_round = malloc((size_t)N * sizeof *m->rej_round);
    m->rej_count = calloc((size_t)N, sizeof *m->rej_count);
    m->rej_reason = calloc((size_t)N, sizeof *m->rej_reason);
    m->asked_round = calloc((size_t)N, sizeof *m->asked_round);
    m->part_scratch = calloc((size_t)N, sizeof *m->part_scratch);
    m->tmp_nbrs = calloc((size_t)N, sizeof *m->tmp_nbrs);
    m->tmp_w = calloc((size_t)N, sizeof *m->tmp_w);
    m->out_nbrs = calloc((size_t)N, sizeof *m->out_nbrs);
    m->sendq = calloc((size_t)N, sizeof *m->sendq);
    m->ar.recv = calloc((size_t)(2 * N), sizeof *m->ar.recv);
    m->ar.ring = calloc((size_t)N, sizeof *m->ar.ring);
    m->hold = calloc(MX_HOLD_MAX, sizeof *m->hold);
    RUMOR_CHECK(mx_terms_alloc(m));
    RUMOR_CHECK(mx_robust_alloc(m));
    RUMOR_CHECK(mx_probe_alloc(m));
    if (!m->ids || !m->known_inc || !m->talks_to ||
        !m->ready || !m->heard || !m->absent || !m->gone || !m->left || !m->ep || !m->behind_since ||
        !m->scratch || !m->tmp_nbrs || !m->tmp_w || !m->out_nbrs || !m->sendq || !m->ar.recv || !m->ar.ring ||
        !m->hold || !m->peer_nonce || !m->hello_body || !m->rej_round || !m->rej_count || !m->rej_reason || !m->asked_round ||
        !m->part_scratch)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    for (int j = 0; j < N; j++)
        m->rej_round[j] = -1;
    /* A peer waits only for its in-neighbours: on a directed or
     * time-varying graph one it sends to can fall up to a period behind, so
     * rounds up to a period ahead are accepted, and in synchronous rounds
     * one more: a neighbour closing round k sends round k + 1's first cells
     * ahead (rumor_mixer_send_ahead), and they can reach a peer still
     * closing k - 1 (at most 8 rounds; a slot holds an accumulator only
     * once a range of its round arrives). */
    int lag = m->open ? mx_open_period(m) : m->topo->period > 0 ? m->topo->period : 1;
    int period_slots = lag + (m->cfg.async ? 1 : 2);
    m->nslots = period_slots < 2 ? 2 : period_slots > 8 ? 8 : period_slots;
    m->slot = calloc((size_t)m->nslots, sizeof *m->slot);
    if (!m->slot)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    m->sent_round = -1;
    m->ahead_round = -1;
    m->send_gate = LONG_MAX;
    for (int i = 0; i < m->nslots; i++)
        RUMOR_CHECK(mx_slot_alloc(m, &m->slot[i]));
    RUMOR_CHECK(rumor_idmap_init(&m->idmap, N));
    int listed = m->open ? 1 : N; /* open membership: this peer alone, slot 0 */
    for (int j = 0; j < listed; j++) {
        const char *e = cfg->endpoints ? cfg->endpoints[j] : NULL;
        if (e && !(m->ep[j] = strdup(e)))
            return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
        if (!e && !m->open && (j == m->self || !cfg->membership))
            return rumor_err_set(RUMOR_EINVAL,
                                 j == m->self ? "mixer: this peer (%d) needs its own endpoint"
                                              : "mixer: peer %d has no endpoint (only membership "
                                                "learns endpoints)",
                                 j);
        m->ids[j] = cfg->ids ? cfg->ids[j] : (uint64_t)j + 1;
        if (m->ids[j] == 0)
            return rumor_err_set(RUMOR_EINVAL, "mixer: peer %d has id 0", j);
        if (rumor_idmap_insert(&m->idmap, m->ids[j], j) < 0)
            return rumor_err_set(RUMOR_EINVAL, "mixer: two peers share the id %llu",
                                 (unsigned long long)m->ids[j]);
    }
    /* Everyone this peer exchanges with in some round of the period, plus
     * its ring neighbours for the all-reduce (open membership: members
     * become peers to talk to as they come, mixer_open.c). */
    int period = m->open ? 0 : m->topo->period > 0 ? m->topo->period : 1;
    for (int r = 0; r < period; r++) {
        int k = rumor_topo_neighbors(m->topo, m->self, r, m->tmp_nbrs, NULL, N);
        for (int i = 0; i < k && i < N; i++)
            mark_talk(m, m->tmp_nbrs[i]);
        k = rumor_topo_out_neighbors(m->topo, m->self, r, m->tmp_nbrs, NULL, N);
        for (int i = 0; i < k && i < N; i++)
            mark_talk(m, m->tmp_nbrs[i]);
    }
    if (N > 1 && !m->open) {
        mark_talk(m, (m->self + 1) % N);
        mark_talk(m, (m->self + N - 1) % N);
    }
    /* with membership any peer of the list may become a neighbour */
    for (int j = 0; cfg->membership && !m->open && j < N; j++)
        mark_talk(m, j);
    m->cur = cfg->first_round > 0 ? cfg->first_round : 0;
    m->caller.next_send = m->cur;
    m->caller.closing = -1;
    m->closed.round = -1;
    m->close_round = -1;
    m->pend_send = -1;
    m->pub.swarm_round = -1;
    m->wake_fd[0] = m->wake_fd[1] = -1;
    atomic_init(&m->ar.ref.refs, 0);
    atomic_init(&m->caller_mixes, 0);
    m->ar.last_tag = -1;
    RUMOR_CHECK(mx_state_alloc(m));
    if (m->open)
        RUMOR_CHECK(mx_open_alloc(m));
    if (m->cfg.async)
        RUMOR_CHECK(mx_async_alloc(m));
    return 0;
}

void mx_free_state(rumor_mixer_t *m)
{
    mx_choco_free(m);
    mx_terms_free(m);
    mx_robust_free(m);
    mx_probe_free(m);
    free(m->tamper_buf);
    for (int i = 0; i < m->nhold; i++) {
        zmq_msg_close(&m->hold[i].hdr);
        zmq_msg_close(&m->hold[i].payload);
    }
    for (int i = 0; i < m->nbufs; i++) {
        if (m->cfg.host_mem)
            m->cfg.host_mem->ops->host_free(m->cfg.host_mem, m->bufs[i]->data);
        else
            free(m->bufs[i]->data);
        free(m->bufs[i]);
    }
    for (int i = 0; m->slot && i < m->nslots; i++)
        mx_slot_free(m, &m->slot[i]);
    free(m->slot);
    free(m->ids);
    rumor_idmap_free(&m->idmap);
    mx_open_free(m);
    free(m->known_inc);
    free(m->talks_to);
    free(m->ready);
    free(m->heard);
    free(m->peer_nonce);
    free(m->hello_body);
    free(m->absent);
    free(m->gone);
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
    ar_free(m);
    free(m->hold);
    free(m->rej_round);
    free(m->rej_count);
    free(m->rej_reason);
    free(m->asked_round);
    free(m->part_scratch);
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

void mx_count(rumor_mixer_t *m, int verdict, int node, const char *what)
{
    rumor_wire_stats_count(&m->wire_stats, verdict);
    if (verdict == 0)
        return;
    rumor_debug("dropped %s from peer %d: %s (%s)", what, node, rumor_wire_reject_name(verdict),
                rumor_err_msg());
    if (node >= 0 && node < m->npeers) {
        if (m->rej_round[node] != m->cur) {
            m->rej_round[node] = m->cur;
            m->rej_count[node] = 0;
        }
        m->rej_count[node]++;
        m->rej_reason[node] = verdict < 0 ? -verdict : verdict;
    }
}

void mx_accept(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node)
{
    m->last_heard[node] = rumor_now();
    /* a peer that said LEAVE is waited for again in a new life (a restart,
     * a higher incarnation), not when the leaving process speaks on: it
     * lingers until its neighbours passed its last round and may answer
     * what reaches it meanwhile */
    if (h->type != RUMOR_WIRE_LEAVE && h->incarnation > m->known_inc[node])
        m->left[node] = 0;
    if (h->incarnation > m->known_inc[node]) {
        if (m->known_inc[node] != 0) {
            char name[48];
            rumor_info("%s restarted (incarnation %llu)", mx_peer_name(m, node, name, sizeof name),
                       (unsigned long long)h->incarnation);
            m->peer_round[node] = -1; /* its new life starts over */
            m->said_round[node] = -1;
            m->ctl_round[node] = -1;
            if (m->cfg.async)
                mx_async_forget(m, node);
        }
        m->known_inc[node] = h->incarnation;
    }
    if ((h->type == RUMOR_WIRE_HELLO || h->type == RUMOR_WIRE_HEARTBEAT ||
         h->type == RUMOR_WIRE_LEAVE) &&
        h->round < (uint64_t)m->cur + MX_ROUND_SANITY && (long)h->round > m->ctl_round[node])
        m->ctl_round[node] = (long)h->round;
    if (m->swim && h->type != RUMOR_WIRE_PROBE && h->type != RUMOR_WIRE_PROBE_REQ &&
        h->type != RUMOR_WIRE_ACK && h->type != RUMOR_WIRE_LEAVE)
        rumor_swim_heard(m->swim, rumor_now(), h->sender, h->incarnation);
}

void mx_copy_block(rumor_mixer_t *m, void *ctx, const float *p, size_t at, size_t n)
{
    RUMOR_IGNORE(m->dev->ops->copy(m->dev, (float *)ctx + at, p, n * sizeof(float)));
}

void mx_payload_blocks(rumor_mixer_t *m, int dtype, uint32_t aux, const void *data, size_t n,
                       mx_block_fn fn, void *ctx)
{
    if (dtype == RUMOR_WIRE_DT_F32 && (uintptr_t)data % sizeof(float) == 0) {
        fn(m, ctx, data, 0, n);
        return;
    }
    /* libzmq may hand small frames out at any byte offset, and coded
     * ranges decode: a block at a time into the scratch, while in cache */
    rumor_codec_reader_t rd;
    rumor_codec_reader_init(&rd, dtype, data, n, aux);
    for (size_t at = 0; at < n; at += MX_SCRATCH) {
        size_t k = n - at < MX_SCRATCH ? n - at : MX_SCRATCH;
        rumor_codec_read(&rd, m->scratch, k);
        fn(m, ctx, m->scratch, at, k);
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
    char name[48];
    mx_peer_name(m, node, name, sizeof name);
    if (m->ep[node])
        rumor_info("%s is at %s now (was %s)", name, endpoint, m->ep[node]);
    else
        rumor_info("%s is at %s", name, endpoint);
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

/* ------------------------------------------------------- HELLO */

/* An open swarm's HELLO nonces: the sender's own ("dialback", echoed in
 * this peer's HELLOs to it) and this peer's, echoed ("echo"): the sender
 * dialled this peer's announced address, and the HELLO came that way. */
static int hello_nonces(rumor_mixer_t *m, int node, const void *body, size_t len)
{
    char v[RUMOR_TERMS_VALUE_MAX + 1], *end;
    int rc = rumor_terms_get(body, len, "dialback", v, sizeof v);
    if (rc == 1) {
        uint64_t n = strtoull(v, &end, 16);
        if (*end || end == v)
            return rumor_err_set(RUMOR_EPROTO, "HELLO: a dialback nonce '%.20s'", v);
        m->peer_nonce[node] = n;
    }
    if (rc >= 0)
        rc = rumor_terms_get(body, len, "echo", v, sizeof v);
    if (rc == 1 && m->reach_by < 0 && strtoull(v, &end, 16) == m->reach_nonce && !*end)
        m->reach_by = node;
    return rc < 0 ? rc : 0;
}

/* HELLO's aux: 0 "I have not heard you", 1 "I have heard you", 2 "a reply:
 * I have heard you", 3 "your round was stale here: I am at `round`" (2 and
 * 3 are never answered, so two peers do not ping-pong), 4 the rank check
 * (mixer_rank.c: only ever sent to this peer's own address). Every HELLO
 * that is not a reply gets one, so a peer still in its barrier (or
 * restarted) hears back even after this one stopped its own HELLOs. */
static int on_hello(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, const void *body,
                    size_t len)
{
    if (h->aux > 3) {
        rumor_err_set(RUMOR_EPROTO, "HELLO with aux %u", h->aux);
        return -RUMOR_WIRE_UNEXPECTED;
    }
    if (h->round >= (uint64_t)m->cur + MX_ROUND_SANITY) {
        rumor_err_set(RUMOR_EPROTO, "HELLO from round %llu while at %ld",
                      (unsigned long long)h->round, m->cur);
        return -RUMOR_WIRE_FUTURE_ROUND;
    }
    /* its terms (the body): another model, codec, ... is not mixed with */
    int tv = mx_terms_judge(m, node, body, len, h->space);
    if (tv < 0)
        return tv;
    if (m->open && body && len && hello_nonces(m, node, body, len) < 0)
        return -RUMOR_WIRE_BAD_FRAMES;
    mx_accept(m, h, node);
    long r = (long)h->round;
    mx_heard_round(m, node, r);
    m->heard[node] = 1;
    if (r > m->said_round[node])
        m->said_round[node] = r;
    if (h->aux == 3 && m->talks_to[node] && r > m->told_behind)
        m->told_behind = r;
    if (h->aux < 2 && m->talks_to[node])
        (void)mx_send_control(m, node, RUMOR_WIRE_HELLO, 2);
    if (h->aux >= 1 && !m->ready[node]) {
        m->ready[node] = 1;
        if (m->talks_to[node])
            m->nready++;
    }
    return 0;
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
    int node = -1, held = 0;
    int v = rumor_wire_decode(zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), &h);
    int decoded = v == 0;
    if (v == 0) {
        rumor_wire_expect_t e = { .swarm = m->swarm, .space = m->n, .self = m->ids[m->self],
                                  .max_chunk = m->max_recv };
        if (m->ch.on)
            e.dtypes = 1u << RUMOR_WIRE_DT_F32 | 1u << m->ch.dtype;
        v = rumor_wire_check(&h, &e, sizes, frames - 1 > 2 ? 2 : frames - 1);
        /* a HELLO of another model size still states its terms: judged
         * (on_hello) so that the difference is said, not only counted */
        /* a LEAVE carries no parameters: one from a peer of another model
         * size still says that it has gone (a neighbour found incompatible
         * whose LEAVE were dropped would be waited for until the start
         * timeout) */
        if (v == -RUMOR_WIRE_WRONG_SPACE && h.type == RUMOR_WIRE_LEAVE && frames == 1) {
            rumor_wire_expect_t any = e;
            any.space = h.space;
            v = rumor_wire_check(&h, &any, sizes, 0);
        }
        if (v == -RUMOR_WIRE_WRONG_SPACE && h.type == RUMOR_WIRE_HELLO &&
            h.aux < MX_HELLO_RANK_CHECK && frames == 2 && m->cfg.terms) {
            rumor_wire_expect_t any = e;
            any.space = h.space;
            if (rumor_wire_check(&h, &any, sizes, 1) == 0)
                v = 0;
            else
                v = rumor_wire_check(&h, &e, sizes, 1);
        }
        if (v == 0 && h.dtype != RUMOR_WIRE_DT_F32 && h.dtype != RUMOR_WIRE_DT_NONE &&
            h.type != RUMOR_WIRE_PARAMS &&
            !(h.type == RUMOR_WIRE_GRADS && (h.dtype == RUMOR_WIRE_DT_Q8 ||
                                             h.dtype == RUMOR_WIRE_DT_Q4))) {
            rumor_err_set(RUMOR_EPROTO, "dtype %u on a %s message (f32 only)",
                          (unsigned)h.dtype, rumor_wire_type_name(h.type));
            v = -RUMOR_WIRE_UNSUPPORTED_DTYPE;
        }
        if (v == 0 && frames > 3) {
            rumor_err_set(RUMOR_EPROTO, "%zu frames", frames);
            v = -RUMOR_WIRE_BAD_FRAMES;
        }
        /* this peer's own rank check coming back, or another process
         * that claims to be this peer */
        if (v == -RUMOR_WIRE_FROM_SELF && h.type == RUMOR_WIRE_HELLO &&
            h.aux == MX_HELLO_RANK_CHECK && frames <= 2 &&
            mx_rank_on_self(m, &h, &part[1], frames == 2))
            v = 1; /* ours: neither accepted nor rejected */
    }
    if (v == 0 && rumor_transport_secure(m->tr)) {
        uint64_t id = rumor_transport_msg_peer_id(&part[0]);
        if (id != h.sender) {
            rumor_err_set(RUMOR_EPROTO, "sender id %016llx on a connection authenticated as %016llx",
                          (unsigned long long)h.sender, (unsigned long long)id);
            v = -RUMOR_WIRE_BAD_IDENTITY;
        }
    }
    if (v == 0) /* another peer dialled this one's address and was understood */
        m->heard_others++;
    /* open membership: a newcomer's first SWIM messages come before it has
     * a slot here; SWIM judges them, and the view gives it one */
    int swim_type = h.type == RUMOR_WIRE_PROBE || h.type == RUMOR_WIRE_PROBE_REQ ||
                    h.type == RUMOR_WIRE_ACK;
    if (v == 0 && (node = mx_node_of(m, h.sender)) < 0 && !(m->open && m->swim && swim_type)) {
        rumor_err_set(RUMOR_EPROTO, "unknown sender id %llu", (unsigned long long)h.sender);
        v = -RUMOR_WIRE_UNKNOWN_SENDER;
    }
    if (v == 0 && node >= 0 && h.incarnation < m->known_inc[node]) {
        rumor_err_set(RUMOR_EPROTO, "incarnation %llu after %llu", (unsigned long long)h.incarnation,
                      (unsigned long long)m->known_inc[node]);
        v = -RUMOR_WIRE_OLD_INCARNATION;
    }
    /* a peer whose terms differ: nothing of its model is used */
    if (v == 0 && node >= 0 && m->incompatible[node] &&
        (h.type == RUMOR_WIRE_PARAMS || h.type == RUMOR_WIRE_GRADS ||
         h.type == RUMOR_WIRE_STATE_REQ || h.type == RUMOR_WIRE_STATE_CHUNK)) {
        rumor_err_set(RUMOR_EPROTO, "%s from a peer whose settings differ",
                      rumor_wire_type_name(h.type));
        v = -RUMOR_WIRE_INCOMPATIBLE;
    }
    /* Each handler judges the message whole and calls mx_accept (what the
     * message says of its sender) only once it takes it: a message it
     * drops changes nothing. */
    const char *what = "message";
    char name[48];
    if (v == 0) {
        what = rumor_wire_type_name(h.type);
        switch (h.type) {
        case RUMOR_WIRE_PROBE:
        case RUMOR_WIRE_PROBE_REQ:
        case RUMOR_WIRE_ACK:
            if (!m->swim) {
                mx_accept(m, &h, node); /* valid, not used: static membership */
                break;
            }
            v = rumor_swim_on_message(m->swim, rumor_now(), h.sender, h.incarnation, h.type, h.aux,
                                      frames > 1 ? zmq_msg_data(&part[1]) : NULL,
                                      frames > 1 ? zmq_msg_size(&part[1]) : 0);
            if (v == 0 && node >= 0)
                mx_accept(m, &h, node);
            break;
        case RUMOR_WIRE_PARAMS:
            v = m->cfg.async ? mx_async_on_params(m, &h, node, zmq_msg_data(&part[1]))
                             : mx_on_params(m, &h, node, zmq_msg_data(&part[1]),
                                            zmq_msg_size(&part[1]));
            break;
        case RUMOR_WIRE_STATE_REQ:
            v = mx_on_state_req(m, &h, node);
            break;
        case RUMOR_WIRE_STATE_CHUNK:
            v = mx_on_state_chunk(m, &h, node, &part[1], &part[2], frames == 3);
            break;
        case RUMOR_WIRE_GRADS:
            v = mx_on_grads(m, &h, node, &part[0], &part[1], &held);
            break;
        case RUMOR_WIRE_HELLO:
            v = on_hello(m, &h, node, frames == 2 ? zmq_msg_data(&part[1]) : NULL,
                         frames == 2 ? zmq_msg_size(&part[1]) : 0);
            break;
        case RUMOR_WIRE_LEAVE:
            /* not waited for from now on; it is waited for again when it
             * speaks again (a restart) */
            mx_accept(m, &h, node);
            m->left[node] = 1;
            rumor_info("%s is leaving", mx_peer_name(m, node, name, sizeof name));
            if (m->incompatible[node]) /* it will not hear this peer's terms now */
                mx_terms_publish(m);
            break;
        default:
            mx_accept(m, &h, node); /* valid, not used by this peer yet */
            break;
        }
    }
    /* a held all-reduce message is counted when its call takes it; a
     * rejection is tallied for the peer the message came from (the key its
     * connection authenticated, or in plaintext its header's word), for the
     * round's log line */
    if (v < 0 && node < 0 && decoded) {
        uint64_t from = rumor_transport_secure(m->tr) ? rumor_transport_msg_peer_id(&part[0])
                                                      : h.sender;
        node = from ? mx_node_of(m, from) : -1;
    }
    if (v <= 0 && !held)
        mx_count(m, v, node, what);
    if (!held) {
        zmq_msg_close(&part[0]);
        zmq_msg_close(&part[1]);
    }
    zmq_msg_close(&part[2]);
    return 1;
}

/* ------------------------------------------------------- the loop */

void mx_comm_main(rumor_mixer_t *m)
{
    zmq_pollitem_t *items = calloc((size_t)m->npeers + 2, sizeof *items);
    if (!items) {
        rumor_error("mixer: out of memory in the comm thread");
        return;
    }
    int stopping = 0;
    mx_rank_start(m); /* before this peer says anything to anyone */
    for (;;) {
        mx_take_commands(m);
        int stop = m->stop;
        double stop_deadline = m->stop_deadline;
        long want_close = m->close_round;
        double close_deadline = m->close_deadline;
        double pace_until = m->round_start + m->pace;
        double round_deadline = m->cur_deadline;
        int pacing = 0, extended = 0;
        /* Stopping: neighbours still need this peer's last round, so
         * queued chunks go out first (within the grace period), then LEAVE
         * (behind them: each connection is FIFO), then ZeroMQ lets go. */
        if (stop && !stopping) {
            stopping = 1;
            mx_drop_ahead(m); /* its rest is not coming */
        }
        if (stopping == 1 && (!mx_sends_queued(m) || rumor_now() >= stop_deadline)) {
            mx_drop_sends(m);
            /* a process refused as a copy of this peer (or still being
             * checked) says nothing: its LEAVE would be the real peer's */
            int speak = m->rank_state == 2;
            if (m->swim && speak)
                (void)rumor_swim_leave(m->swim, rumor_now());
            for (int j = 0; speak && j < m->npeers; j++) {
                /* one whose terms differ learns this peer's first: its LEAVE
                 * (of another model size) it drops, and it would wait out
                 * its start for a peer that has gone */
                if (m->talks_to[j] && m->incompatible[j] && !m->incompat_told[j])
                    (void)mx_send_control(m, j, RUMOR_WIRE_HELLO, 2);
                if (m->talks_to[j])
                    (void)mx_send_control(m, j, RUMOR_WIRE_LEAVE, 0);
            }
            stopping = 2;
        }
        if (stopping == 2 && mx_all_sends_done(m) && mx_neighbours_passed(m) &&
            !mx_untold_retry(m))
            break;
        if (stopping == 2 && rumor_now() >= stop_deadline) {
            if (!mx_all_sends_done(m))
                rumor_info("leaving: messages still queued in ZeroMQ when the linger time ran "
                           "out are dropped");
            else
                rumor_debug("leaving before every neighbour passed round %ld", m->cur - 1);
            break;
        }

        rumor_transport_events(m->tr);
        mx_rank_progress(m);
        mx_pump_sends(m);
        mx_send_hellos(m);
        if (!stopping)
            mx_send_heartbeats(m);
        ar_progress(m);
        if (!m->send_waiting) /* newcomers get parameters once they are written */
            mx_state_progress(m);
        if (!stopping)
            mx_redial(m);
        if (m->swim && !stopping && m->rank_state == 2) {
            mx_self_endpoint(m);
            (void)rumor_swim_tick(m->swim, rumor_now());
            (void)mx_view_update(m);
        }
        if (m->open && !stopping) {
            mx_open_progress(m);
            mx_reach_check(m);
        }

        double now = rumor_now();
        if (atomic_load(&m->hurry))
            close_deadline = now;
        if (want_close >= 0 && want_close == m->cur && !m->send_waiting) {
            if (m->cfg.async) {
                mx_async_close(m); /* never waits */
                continue;
            }
            /* a round nobody sent to has no slot yet: open it, or a peer
             * whose neighbours are all absent would wait out every deadline */
            if (mx_ensure_slot(m, m->cur) < 0)
                rumor_warn("mixer: %s", rumor_err_msg());
            struct mx_slot *s = &m->slot[m->cur % m->nslots];
            mx_refresh_absent(m, round_deadline);
            int complete = mx_round_done(m, s);
            /* past the deadline with the round's data still coming at a
             * rate that brings it in within round_timeout: wait for it */
            int expired = now >= close_deadline;
            /* neighbours beyond the window left this peer behind: they
             * do not wait for it, and what it waits for is not coming
             * (their rounds are dropped unread), so the round closes now
             * and the caller jumps (catchup.c) instead of waiting out the
             * deadline round after round while the swarm moves on */
            if (!complete && !expired && mx_swarm_round(m) >= m->cur + m->nslots) {
                expired = 1;
                rumor_debug("round %ld: neighbours are at round %ld, beyond the window: "
                            "closing it now", m->cur, mx_swarm_round(m));
            }
            if (expired && !complete && !atomic_load(&m->hurry) && mx_round_flowing(m, s, now)) {
                expired = 0;
                extended = 1;
            }
            /* every in-neighbour absent: nothing to wait for, but a peer
             * alone keeps the swarm's pace (the median round time) instead
             * of racing its round counter ahead of everyone's */
            pacing = complete && s->nin > 0 && s->complete == 0 && now < pace_until &&
                     !atomic_load(&m->hurry) && !expired;
            /* complete, with cells left to the caller's threads: they mix
             * them in their idle time (the deadline still holds) */
            int left = complete && !expired && mx_caller_mixes(m) &&
                       atomic_load(&s->pub_round) == m->cur &&
                       atomic_load(&s->nmixed) < m->nchunks;
            if (!pacing && !left && (complete || expired)) {
                mx_close_round(m, !complete);
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
            if ((mx_send_pending(m, j) || mx_state_wants_pollout(m, j)) &&
                rumor_transport_push(m->tr, j)) {
                items[ni].socket = rumor_transport_push(m->tr, j);
                items[ni].events = ZMQ_POLLOUT;
                ni++;
            }
        ar_poll_items(m, items, &ni);
        double wait = 0.05;
        if (want_close >= 0 && !extended && close_deadline - now < wait)
            wait = close_deadline - now;
        if (m->ar.active && m->ar.step_deadline - now < wait)
            wait = m->ar.step_deadline - now;
        if (m->hello_active && m->next_hello - now < wait)
            wait = m->next_hello - now;
        if (pacing && pace_until - now < wait)
            wait = pace_until - now;
        if (m->swim && m->rank_state == 2 && rumor_swim_next_deadline(m->swim) - now < wait)
            wait = rumor_swim_next_deadline(m->swim) - now;
        if (m->barrier_reply && m->barrier_deadline - now < wait)
            wait = m->barrier_deadline - now;
        if (stopping)
            wait = 0.01;
        if (m->send_waiting)
            wait = 0.0005; /* a 1 ms poll while the parameters are copied */
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
        mx_publish(m);
        mx_barrier_progress(m);
    }
    free(items);
}

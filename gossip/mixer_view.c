/* Membership in the mixer (see mixer.h, config.membership): a SWIM
 * instance (gossip/swim.h, sans-I/O) driven by the comm thread over the
 * mixer's own sockets decides which peers of the list are alive; the
 * topology family is instantiated over that view (rumor_swim_topology:
 * members sorted by id are nodes 0..n-1, Metropolis-Hastings weights from
 * the view's degrees), so a dead peer's neighbours become neighbours of
 * each other and W stays doubly stochastic among the living. Every peer
 * whose view is the same derives the same graph. With open membership
 * (mixer_open.c) the view is not bounded by a list: members get a slot as
 * the view brings them, and the graph is laid over the whole view (a
 * member this peer has no slot for is a node all the same, so that every
 * peer lays the same graph). Runs on the comm thread. */
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "mixer_int.h"

/* rumor_swim_send_fn: a SWIM message to the member with that id, or to the
 * peer listening at endpoint (a seed whose id is not known yet). */
static int swim_send(void *ctx, uint64_t to_id, const char *endpoint, int type, uint32_t seq,
                     const void *body, size_t len)
{
    rumor_mixer_t *m = ctx;
    int node = to_id ? mx_node_of(m, to_id) : -1;
    if (node < 0 && to_id && m->open) /* a newcomer: it gets a slot here */
        node = mx_open_claim(m, to_id, endpoint);
    for (int j = 0; node < 0 && !to_id && endpoint && j < m->npeers; j++)
        if (m->ep[j] && strcmp(m->ep[j], endpoint) == 0 && !(m->open && m->trial_of[j] >= 0))
            node = j;
    if (node < 0 || node == m->self)
        return rumor_err_set(RUMOR_EINVAL, "membership: no socket for %s", endpoint ? endpoint : "?");
    /* SWIM knows where a member listens (its own word, the newest life's):
     * a peer whose address this one did not know, or that moved, is
     * connected to there */
    if (to_id && endpoint && mx_learn_endpoint(m, node, endpoint) < 0)
        return rumor_err_set(RUMOR_ESYS, "membership: cannot connect to peer %d at %s", node,
                             endpoint);
    void *sock = rumor_transport_push(m->tr, node);
    if (!sock)
        return rumor_err_set(RUMOR_ESTATE, "membership: peer %d not connected", node);
    rumor_wire_hdr_t h;
    uint8_t bytes[RUMOR_WIRE_HDR_LEN];
    mx_fill_hdr(m, &h, type);
    h.aux = seq;
    rumor_wire_encode(&h, bytes);
    if (mx_send_frame(sock, bytes, sizeof bytes, ZMQ_DONTWAIT | (len ? ZMQ_SNDMORE : 0)) < 0)
        return 1; /* queue full or not connected: SWIM treats it as lost */
    if (len && mx_send_frame(sock, body, len, ZMQ_DONTWAIT) < 0)
        return 1;
    return 0;
}

int mx_view_create(rumor_mixer_t *m)
{
    if (!m->cfg.membership)
        return 0;
    rumor_swim_config_t sc;
    memset(&sc, 0, sizeof sc);
    sc.self_id = m->ids[m->self];
    sc.incarnation = m->incarnation;
    sc.self_endpoint = m->ep[m->self];
    sc.self_relayed = m->cfg.self_endpoint != NULL;
    sc.self_relay = m->cfg.relay_offer;
    sc.seed = m->incarnation;
    RUMOR_CHECK(rumor_swim_create(&sc, swim_send, m, &m->swim));
    for (int j = 0; !m->open && j < m->npeers; j++)
        if (j != m->self && m->ep[j])
            RUMOR_CHECK(rumor_swim_add_seed(m->swim, m->ep[j]));
    for (int i = 0; m->open && i < m->cfg.nseeds; i++)
        RUMOR_CHECK(rumor_swim_add_seed(m->swim, m->cfg.seeds[i]));
    /* SWIM's table bounds an open view (4096 by default) */
    m->vcap = m->open ? 4096 : m->npeers;
    m->vmember = calloc((size_t)m->vcap, sizeof *m->vmember);
    m->vslot = calloc((size_t)m->vcap, sizeof *m->vslot);
    m->vtmp = calloc((size_t)m->vcap, sizeof *m->vtmp);
    m->vw = calloc((size_t)m->vcap, sizeof *m->vw);
    m->vtmp_member = m->open ? calloc((size_t)m->vcap, sizeof *m->vtmp_member) : NULL;
    if (!m->vmember || !m->vslot || !m->vtmp || !m->vw || (m->open && !m->vtmp_member))
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    m->vversion = (uint64_t)-1;
    return mx_view_update(m);
}

void mx_view_free(rumor_mixer_t *m)
{
    rumor_swim_destroy(&m->swim);
    rumor_topo_destroy(&m->vtopo);
    free(m->vmember);
    free(m->vslot);
    free(m->vtmp);
    free(m->vw);
    free(m->vtmp_member);
}

/* Rebuilds the view's topology when SWIM's view changed. */
int mx_view_update(rumor_mixer_t *m)
{
    if (!m->swim || rumor_swim_view_version(m->swim) == m->vversion)
        return 0;
    m->vversion = rumor_swim_view_version(m->swim);
    size_t n = rumor_swim_view(m->swim, m->vmember, (size_t)m->vcap);
    if (n > (size_t)m->vcap)
        n = (size_t)m->vcap; /* members outside the list cannot be reached here */
    rumor_topo_t *t = NULL;
    int self = -1;
    if (rumor_swim_topology(m->cfg.membership, m->vmember, n, m->ids[m->self], &t, &self) < 0) {
        rumor_warn("membership: %s; keeping the previous graph", rumor_err_msg());
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        m->vslot[i] = mx_node_of(m, m->vmember[i].id);
        if (m->vslot[i] < 0 && m->open) /* a member never met: a slot of its own */
            m->vslot[i] = mx_open_claim(m, m->vmember[i].id, m->vmember[i].endpoint);
        if (m->vslot[i] >= 0 && mx_learn_endpoint(m, m->vslot[i], m->vmember[i].endpoint) < 0)
            rumor_warn("membership: %s", rumor_err_msg());
    }
    rumor_topo_destroy(&m->vtopo);
    m->vtopo = t;
    m->vself = self;
    m->vn = (int)n;
    m->view_changes++;
    /* how the members are reached, and who relays */
    int direct = 0, relayed = 0, relaying = 0;
    for (size_t i = 0; i < n; i++) {
        const rumor_swim_member_t *v = &m->vmember[i];
        if (v->id == m->ids[m->self])
            continue;
        relayed += (v->reach & RUMOR_SWIM_RELAYED) != 0;
        direct += !(v->reach & RUMOR_SWIM_RELAYED);
        if ((v->reach & RUMOR_SWIM_RELAY) && m->vtmp_member)
            m->vtmp_member[relaying++] = *v;
    }
    m->counters.members_direct = direct;
    m->counters.members_relayed = relayed;
    m->counters.members_relaying = relaying;
    if (m->cfg.relays_seen)
        m->cfg.relays_seen(m->cfg.reach_arg, m->vtmp_member, relaying);
    rumor_info("membership: %zu peers alive; %s", n, t->desc);
    /* rounds opened under the old view that nobody has sent to yet take
     * the new graph (the first rounds open before the view is complete) */
    for (int i = 0; i < m->nslots; i++) {
        struct mx_slot *s = &m->slot[i];
        if (s->round < m->cur || !s->buf)
            continue;
        if (s->elems_in == 0)
            (void)mx_slot_reweigh(m, s);
    }
    return 0;
}

/* Nodes of the view's graph -> the mixer's peer slots (dropping members it
 * has no slot for); weights kept aligned. */
static int to_slots(rumor_mixer_t *m, int k, int *nbrs, double *w)
{
    int out = 0;
    for (int i = 0; i < k; i++) {
        int s = m->vslot[m->vtmp[i]];
        if (s < 0 || s == m->self)
            continue;
        nbrs[out] = s;
        if (w)
            w[out] = m->vw[i];
        out++;
    }
    return out;
}

int mx_in_neighbors(rumor_mixer_t *m, long r, int *nbrs, double *w)
{
    if (!m->vtopo)
        return rumor_topo_neighbors(m->topo, m->self, r, nbrs, w, m->npeers);
    int k = rumor_topo_neighbors(m->vtopo, m->vself, r, m->vtmp, m->vw, m->vcap);
    return k < 0 ? k : to_slots(m, k, nbrs, w);
}

int mx_out_neighbors(rumor_mixer_t *m, long r, int *nbrs)
{
    if (!m->vtopo)
        return rumor_topo_out_neighbors(m->topo, m->self, r, nbrs, NULL, m->npeers);
    int k = rumor_topo_out_neighbors(m->vtopo, m->vself, r, m->vtmp, NULL, m->vcap);
    return k < 0 ? k : to_slots(m, k, nbrs, NULL);
}

int mx_view_ring(rumor_mixer_t *m, int *ring, int *pos)
{
    int n = 0;
    *pos = 0;
    if (!m->swim) { /* the list, by node */
        for (int j = 0; j < m->npeers; j++)
            ring[n++] = j;
        *pos = m->self;
        return n;
    }
    for (int i = 0; i < m->vn && n < m->npeers; i++) {
        int s = m->vslot[i];
        if (s < 0)
            continue; /* a member this peer cannot reach is left out of its ring */
        if (s == m->self)
            *pos = n;
        ring[n++] = s;
    }
    if (n == 0) { /* no view yet: alone */
        ring[n++] = m->self;
        *pos = 0;
    }
    return n;
}

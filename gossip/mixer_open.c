/* Open membership in the mixer (mixer.h, config.max_peers): the swarm is
 * whoever SWIM holds alive, not a list's ranks.
 *
 * Slot 0 is this peer; every other slot is free until a member needs one.
 * A member gets a slot the first time this peer has to reach it: SWIM
 * sends to it (an answer to its join, a probe), or the view lists it (it
 * may be a neighbour). The slot holds its id (in the id map, so the graph's
 * order is the ids' order on every peer), the address it announced for
 * itself and, on a secure swarm, the allow-list key whose id is its id:
 * CurveZMQ then decides who answers there, and a member whose id is no
 * allowed key's is never dialled (counted as not_allowed). Slots are not
 * given back: max_peers bounds the members one peer meets in its life.
 *
 * Seeds (the addresses a peer joins through) have no id yet. In plaintext
 * a seed gets a slot with id 0, connected to its address; SWIM's join
 * probes go there, and the member that announces that address takes the
 * slot over. On a secure swarm the connection must know the key at the
 * other end: a seed named with its key gets a member's slot at once;
 * otherwise every allowed key is tried there at once, a slot each (ZeroMQ
 * queues nothing on a connection whose handshake has not succeeded, so the
 * one that can send is the right key), the winner becomes the seed's slot
 * and the other trials are closed. The seed counts each wrong key as a
 * refused connection (crypto), once a batch: a trial's connection is not
 * retried while its batch is open (1 s), and a batch that found nothing is
 * closed and opened again after a pause that doubles up to 8 s. Runs on the comm thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "mixer_int.h"

#define TRIAL_BATCH 32     /* keys tried at one seed at once */
#define TRIAL_OPEN_S 1.0   /* a batch that found nothing in this long is closed */
#define TRIAL_PAUSE_MAX 8.0 /* the longest pause before a seed's next batch */
#define TRIAL_RETRY_MS 5000 /* a trial's connection is not retried while its batch is open */

int mx_open_alloc(rumor_mixer_t *m)
{
    int N = m->npeers;
    m->seed_slot = calloc((size_t)N, 1);
    m->trial_id = calloc((size_t)N, sizeof *m->trial_id);
    m->trial_of = malloc((size_t)N * sizeof *m->trial_of);
    m->warned = calloc((size_t)N, 1);
    if (!m->seed_slot || !m->trial_id || !m->trial_of || !m->warned)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    for (int j = 0; j < N; j++)
        m->trial_of[j] = -1;
    return 0;
}

void mx_open_free(rumor_mixer_t *m)
{
    free(m->seed_slot);
    free(m->trial_id);
    free(m->trial_of);
    free(m->warned);
    free(m->trial_next);
    free(m->trial_since);
    free(m->trial_pause);
    rumor_topo_destroy(&m->own_topo);
}

int mx_open_period(const rumor_mixer_t *m)
{
    /* the family over as many members as this peer can hold (at most the
     * window's 8 slots matter) */
    char spec[256];
    int n = m->npeers < 3 ? 3 : m->npeers > 256 ? 256 : m->npeers;
    rumor_topo_t *t = NULL;
    if (rumor_swim_topology_spec(m->cfg.membership, (size_t)n, spec, sizeof spec) < 0 ||
        rumor_topo_parse(spec, &t) < 0)
        return 1;
    int p = t->period > 0 ? t->period : 1;
    rumor_topo_destroy(&t);
    return p;
}

const char *mx_peer_name(const rumor_mixer_t *m, int node, char *buf, size_t cap)
{
    if (!m->open)
        snprintf(buf, cap, "peer %d", node);
    else if (node >= 0 && node < m->npeers && m->ids[node])
        snprintf(buf, cap, "peer %08llx", (unsigned long long)(m->ids[node] >> 32));
    else
        snprintf(buf, cap, "the peer at %s", node >= 0 && node < m->npeers && m->ep[node]
                                                 ? m->ep[node] : "an unknown address");
    return buf;
}

/* A slot nobody holds: no id, no seed, no trial. */
static int free_slot(const rumor_mixer_t *m)
{
    for (int j = 0; j < m->npeers; j++)
        if (j != m->self && !m->ids[j] && !m->seed_slot[j] && m->trial_of[j] < 0)
            return j;
    return -1;
}

/* Closes slot j's connection and forgets its address (a trial, or a seed
 * slot nobody took over). */
static void release(rumor_mixer_t *m, int j)
{
    rumor_transport_disconnect(m->tr, j);
    free(m->ep[j]);
    m->ep[j] = NULL;
    m->seed_slot[j] = 0;
    m->trial_of[j] = -1;
    m->trial_id[j] = 0;
    rumor_transport_set_reconnect(m->tr, j, 0);
}

/* Gives slot j to member id at endpoint (NULL: keep the slot's); pk: its
 * key on a secure swarm. connected: the slot's socket already reaches it. */
static int take(rumor_mixer_t *m, int j, uint64_t id, const char *endpoint, const uint8_t *pk,
                int connected)
{
    char *e = endpoint ? strdup(endpoint) : NULL;
    if (endpoint && !e)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    if (rumor_idmap_insert(&m->idmap, id, j) < 0) {
        free(e);
        return RUMOR_EINVAL;
    }
    m->ids[j] = id;
    if (e) {
        free(m->ep[j]);
        m->ep[j] = e;
    }
    m->ready[j] = 0;
    m->talks_to[j] = 1;
    m->ntalk++;
    m->seed_slot[j] = 0;
    m->trial_of[j] = -1;
    m->trial_id[j] = 0;
    rumor_transport_set_reconnect(m->tr, j, 0); /* its next connects: the usual pace */
    m->known_inc[j] = 0;
    m->heard[j] = m->left[j] = m->absent[j] = m->gone[j] = 0;
    m->peer_nonce[j] = 0;
    mx_terms_forget(m, j);
    mx_robust_forget(m, j);
    m->peer_round[j] = m->said_round[j] = m->ctl_round[j] = -1;
    m->last_heard[j] = rumor_now();
    m->last_redial[j] = 0;
    m->counters.members_joined++;
    char name[48];
    rumor_info("%s is at %s", mx_peer_name(m, j, name, sizeof name),
               m->ep[j] ? m->ep[j] : "an address not known yet");
    if (pk && rumor_transport_set_peer_key(m->tr, j, pk) < 0)
        return RUMOR_ESYS;
    if (!connected && m->ep[j] && rumor_transport_connect(m->tr, j, m->ep[j]) < 0)
        return RUMOR_ESYS;
    return 0;
}

/* Says once per member (by id, for the last few) why it has no slot. */
static void refuse(rumor_mixer_t *m, uint64_t id, const char *endpoint, int not_allowed)
{
    for (int i = 0; i < 8; i++)
        if (m->refused_ids[i] == id)
            return;
    m->refused_ids[m->nrefused++ % 8] = id;
    if (not_allowed) {
        m->counters.not_allowed++;
        rumor_warn("membership: peer %016llx at %s has no key on the allow-list: not dialled",
                   (unsigned long long)id, endpoint ? endpoint : "?");
    } else {
        m->counters.slots_full++;
        rumor_warn("membership: no room for peer %016llx at %s: this peer has met %d peers "
                   "(raise --max-peers)",
                   (unsigned long long)id, endpoint ? endpoint : "?", m->npeers - 1);
    }
}

int mx_open_claim(rumor_mixer_t *m, uint64_t id, const char *endpoint)
{
    int j = mx_node_of(m, id);
    if (j >= 0 || !m->open || id == 0)
        return j;
    uint8_t pk[32];
    int secure = rumor_transport_secure(m->tr);
    if (secure && !rumor_allowlist_lookup_id(m->cfg.allow, id, pk)) {
        refuse(m, id, endpoint, 1);
        return -1;
    }
    /* a plaintext seed at that address: the member takes its slot over */
    for (int s = 0; !secure && endpoint && s < m->npeers; s++)
        if (m->seed_slot[s] && m->ep[s] && strcmp(m->ep[s], endpoint) == 0) {
            if (take(m, s, id, NULL, NULL, 1) < 0)
                rumor_warn("membership: %s", rumor_err_msg());
            return s;
        }
    j = free_slot(m);
    if (j < 0) {
        refuse(m, id, endpoint, 0);
        return -1;
    }
    if (take(m, j, id, endpoint, secure ? pk : NULL, 0) < 0) {
        rumor_warn("membership: %s", rumor_err_msg());
        return mx_node_of(m, id);
    }
    return j;
}

/* Opens the next batch of trial keys at seed i. */
static void trial_batch(rumor_mixer_t *m, int i)
{
    const char *ep = m->cfg.seeds[i];
    size_t nkeys = rumor_allowlist_count(m->cfg.allow);
    for (int j = 0; j < m->npeers; j++)
        if (m->trial_of[j] == i)
            release(m, j);
    uint8_t pk[32];
    for (int opened = 0; opened < TRIAL_BATCH && m->trial_next[i] < nkeys;) {
        if (!rumor_allowlist_key_at(m->cfg.allow, m->trial_next[i]++, pk) ||
            rumor_curve_id(pk) == m->ids[m->self])
            continue;
        int j = free_slot(m);
        char *e = strdup(ep);
        if (j < 0 || !e) {
            free(e);
            break;
        }
        m->ep[j] = e;
        m->trial_of[j] = i;
        m->trial_id[j] = rumor_curve_id(pk);
        /* a wrong key is refused, and retried only once the batch closes */
        rumor_transport_set_reconnect(m->tr, j, TRIAL_RETRY_MS);
        if (rumor_transport_set_peer_key(m->tr, j, pk) < 0 ||
            rumor_transport_connect(m->tr, j, ep) < 0) {
            rumor_warn("joining through %s: %s", ep, rumor_err_msg());
            release(m, j);
            break;
        }
        opened++;
    }
    if (m->trial_next[i] >= nkeys)
        m->trial_next[i] = 0; /* round and round while nobody answers */
    m->trial_since[i] = rumor_now();
}

int mx_open_seeds(rumor_mixer_t *m)
{
    int secure = rumor_transport_secure(m->tr);
    m->trial_next = calloc((size_t)m->cfg.nseeds + 1, sizeof *m->trial_next);
    m->trial_since = calloc((size_t)m->cfg.nseeds + 1, sizeof *m->trial_since);
    m->trial_pause = calloc((size_t)m->cfg.nseeds + 1, sizeof *m->trial_pause);
    if (!m->trial_next || !m->trial_since || !m->trial_pause)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    for (int i = 0; i < m->cfg.nseeds; i++) {
        const char *ep = m->cfg.seeds[i];
        const uint8_t *key = m->cfg.seed_keys ? m->cfg.seed_keys[i] : NULL;
        if (m->ep[m->self] && strcmp(ep, m->ep[m->self]) == 0)
            continue; /* ourselves */
        if (secure && key) { /* a member's slot at once: its id is its key's */
            uint64_t id = rumor_curve_id(key);
            if (id == m->ids[m->self] || mx_node_of(m, id) >= 0)
                continue;
            int j = free_slot(m);
            if (j < 0)
                return rumor_err_set(RUMOR_EINVAL, "mixer: more seeds than --max-peers");
            RUMOR_CHECK(take(m, j, id, ep, key, 0));
        } else if (secure) {
            m->trial_pause[i] = 0.5;
            trial_batch(m, i);
        } else {
            int j = free_slot(m);
            if (j < 0)
                return rumor_err_set(RUMOR_EINVAL, "mixer: more seeds than --max-peers");
            char *e = strdup(ep);
            if (!e)
                return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
            m->ep[j] = e;
            m->seed_slot[j] = 1;
            RUMOR_CHECK(rumor_transport_connect(m->tr, j, ep));
        }
    }
    return 0;
}

/* 1 when slot j's socket has a connection whose handshake succeeded (with
 * ZMQ_IMMEDIATE, ZeroMQ offers no room to send before that). */
static int handshaken(rumor_mixer_t *m, int j)
{
    void *s = rumor_transport_push(m->tr, j);
    int ev = 0;
    size_t len = sizeof ev;
    return s && zmq_getsockopt(s, ZMQ_EVENTS, &ev, &len) == 0 && (ev & ZMQ_POLLOUT);
}

/* 1 when a member's slot holds seed i's address: the seed is reached. */
static int seed_reached(const rumor_mixer_t *m, int i)
{
    for (int j = 0; j < m->npeers; j++)
        if (m->ids[j] && m->ep[j] && strcmp(m->ep[j], m->cfg.seeds[i]) == 0)
            return 1;
    return 0;
}

/* Trials go on until their seed is reached (not merely until this peer
 * knows someone: a newcomer that joined this one first would otherwise
 * leave it in a swarm of its own, apart from the seed's). */
void mx_open_progress(rumor_mixer_t *m)
{
    if (!m->trial_next)
        return;
    for (int j = 0; j < m->npeers; j++) {
        int i = m->trial_of[j];
        if (i < 0)
            continue;
        if (seed_reached(m, i)) {
            release(m, j);
            continue;
        }
        if (!handshaken(m, j))
            continue;
        /* this key answers at seed i: the trial becomes its slot */
        uint64_t id = m->trial_id[j];
        for (int k = 0; k < m->npeers; k++)
            if (k != j && m->trial_of[k] == i)
                release(m, k);
        m->trial_of[j] = -1;
        m->trial_id[j] = 0;
        m->trial_pause[i] = 0; /* its key is known: no more trials there */
        if (mx_node_of(m, id) >= 0) { /* a member already, at another address */
            release(m, j);
            continue;
        }
        rumor_info("the peer at %s holds key %016llx", m->cfg.seeds[i], (unsigned long long)id);
        if (take(m, j, id, NULL, NULL, 1) < 0)
            rumor_warn("membership: %s", rumor_err_msg());
    }
    /* a batch open for TRIAL_OPEN_S closes; the next opens after a pause */
    double now = rumor_now();
    for (int i = 0; i < m->cfg.nseeds; i++) {
        if (m->trial_pause[i] <= 0)
            continue; /* a seed named with its key, a plaintext one, or found */
        if (seed_reached(m, i)) {
            m->trial_pause[i] = 0;
            continue;
        }
        int any = 0;
        for (int j = 0; j < m->npeers && !any; j++)
            any = m->trial_of[j] == i;
        if (any && now - m->trial_since[i] > TRIAL_OPEN_S) {
            for (int j = 0; j < m->npeers; j++)
                if (m->trial_of[j] == i)
                    release(m, j);
        } else if (!any && now - m->trial_since[i] > TRIAL_OPEN_S + m->trial_pause[i]) {
            m->trial_pause[i] = m->trial_pause[i] * 2 > TRIAL_PAUSE_MAX ? TRIAL_PAUSE_MAX
                                                                       : m->trial_pause[i] * 2;
            trial_batch(m, i);
        }
    }
}

void mx_self_endpoint(rumor_mixer_t *m)
{
    double now = rumor_now();
    if (!m->cfg.self_endpoint || now < m->self_ep_next)
        return;
    m->self_ep_next = now + 0.25;
    char ep[RUMOR_SWIM_ENDPOINT_MAX];
    int n = m->cfg.self_endpoint(m->cfg.reach_arg, ep, sizeof ep);
    if (n <= 0 || (size_t)n >= sizeof ep || (m->ep[m->self] && strcmp(ep, m->ep[m->self]) == 0))
        return;
    char *e = strdup(ep);
    if (!e)
        return;
    if (rumor_swim_set_endpoint(m->swim, now, ep, 1) < 0) {
        rumor_warn("mixer: this peer's new address %s: %s", ep, rumor_err_msg());
        free(e);
        return;
    }
    free(m->ep[m->self]);
    m->ep[m->self] = e;
}

/* A joining peer's reachability, said once at start. Its HELLOs carry a
 * random nonce ("dialback"); a member that heard one answers with HELLOs
 * that echo it, sent over its own connection to the address this peer
 * announces (CurveZMQ on a secure swarm, where only this peer's key
 * completes the handshake). An echo says that the others can dial this
 * peer; none within REACH_WAIT s of this peer's own first connection
 * coming up says that they probably cannot (a NAT, a firewall, an address
 * that leads elsewhere); the join goes on until --start-timeout, which
 * says it again as an error. */
#define REACH_WAIT 3.0

void mx_reach_check(rumor_mixer_t *m)
{
    if (m->reach_said || !m->cfg.nseeds)
        return;
    double now = rumor_now();
    if (m->reach_by >= 0) {
        char name[48];
        rumor_info("reachable: %s dialled this peer's address %s back%s, echoing its nonce",
                   mx_peer_name(m, m->reach_by, name, sizeof name), mx_endpoint_name(m, m->self),
                   m->cfg.self_endpoint ? " (through its relay)" : "");
        m->reach_said = 1;
    } else if (rumor_transport_stats(m->tr)->out_hs_ok == 0) {
        return; /* nobody reached yet: nothing to say of the way back */
    } else if (m->reach_t0 == 0) {
        m->reach_t0 = now;
    } else if (now - m->reach_t0 > REACH_WAIT) {
        rumor_warn("this peer reached a seed, but no peer dialled its address %s back within "
                   "%.0f s: the others probably cannot reach it (a NAT or a firewall in between? "
                   "--relay-via registers with a relay, --advertise names a forwarded port); "
                   "it waits until --start-timeout", mx_endpoint_name(m, m->self), REACH_WAIT);
        m->reach_said = 1;
    }
}

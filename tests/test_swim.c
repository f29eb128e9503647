/* SWIM membership against closed expectations, on a simulated network: N
 * instances, a message queue with a virtual clock, and message loss,
 * partitions, crashes and freezes injected here. Covers joins through a
 * chain of seeds, crash detection, no false deaths under 10% loss, a frozen
 * member refuting, a restart, a healed partition, leaving, the neighbours a
 * view implies, the body layout, and malformed bodies. Deterministic. */
#include "rng.h"
#include "swim.h"

#include <math.h>
#include <stdint.h>
#include <time.h>

#include "testutil.h"

#define NMAX 32
#define SWARM 0x5157494d5357494dull
#define SPACE 1000
#define IVL 0.5 /* the default probe interval */

/* ------------------------------------------------- the simulated network */

typedef struct net net_t;

typedef struct node {
    net_t *net;
    int idx;
    rumor_swim_t *sw;
    uint64_t id, life;
    char ep[64];
    int up, frozen, side;
    /* the last message this node sent, for replays */
    uint8_t last[RUMOR_WIRE_MAX_BODY];
    size_t last_len;
    int last_type;
} node_t;

typedef struct msg {
    double at;
    uint64_t order;
    int from, to, type;
    uint64_t sender, life;
    uint32_t seq;
    size_t len;
    uint8_t *body;
} msg_t;

struct net {
    node_t nodes[NMAX];
    int n;
    msg_t *heap, *held;
    size_t nheap, capheap, nheld, capheld;
    double now, loss;
    int partitioned;
    int deaf;          /* 1 + the node every message to which is lost (0: none) */
    uint64_t order, rng;
    uint64_t sent, delivered, dropped, hdr_fail, bad_to, unknown_ep, stuck;
    uint64_t rejected[RUMOR_WIRE_NREJECT];
    rumor_swim_config_t base;
};

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unif(net_t *net)
{
    net->rng = mix64(net->rng);
    return (double)(net->rng >> 11) * (1.0 / 9007199254740992.0);
}

static int msg_before(const msg_t *a, const msg_t *b)
{
    return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static void heap_push(net_t *net, msg_t m)
{
    if (net->nheap == net->capheap) {
        net->capheap = net->capheap ? 2 * net->capheap : 1024;
        net->heap = realloc(net->heap, net->capheap * sizeof *net->heap);
    }
    size_t i = net->nheap++;
    while (i && msg_before(&m, &net->heap[(i - 1) / 2])) {
        net->heap[i] = net->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    net->heap[i] = m;
}

static msg_t heap_pop(net_t *net)
{
    msg_t top = net->heap[0], last = net->heap[--net->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= net->nheap)
            break;
        if (c + 1 < net->nheap && msg_before(&net->heap[c + 1], &net->heap[c]))
            c++;
        if (!msg_before(&net->heap[c], &last))
            break;
        net->heap[i] = net->heap[c];
        i = c;
    }
    if (net->nheap)
        net->heap[i] = last;
    return top;
}

static int ep_index(net_t *net, const char *ep)
{
    for (int i = 0; i < net->n; i++)
        if (!strcmp(net->nodes[i].ep, ep))
            return i;
    return -1;
}

static int cut(net_t *net, int a, int b)
{
    return net->partitioned && net->nodes[a].side != net->nodes[b].side;
}

/* The send callback: the header goes through the real codec and receiver
 * checks, so bodies stay within what a version 1 receiver takes. */
static int sim_send(void *ctx, uint64_t to_id, const char *ep, int type, uint32_t seq,
                    const void *body, size_t len)
{
    node_t *me = ctx;
    net_t *net = me->net;
    rumor_wire_hdr_t h = { 0 }, d;
    h.type = (uint8_t)type;
    h.swarm = SWARM;
    h.sender = me->id;
    h.incarnation = me->life;
    h.aux = seq;
    h.space = SPACE;
    uint8_t hb[RUMOR_WIRE_HDR_LEN];
    rumor_wire_encode(&h, hb);
    rumor_wire_expect_t e = { .swarm = SWARM, .space = SPACE };
    size_t fs = len;
    if (rumor_wire_decode(hb, sizeof hb, &d) || rumor_wire_check(&d, &e, &fs, 1))
        net->hdr_fail++;
    memcpy(me->last, body, len);
    me->last_len = len;
    me->last_type = type;
    net->sent++;
    int to = ep_index(net, ep);
    if (to < 0) {
        net->unknown_ep++;
        return -1;
    }
    if (to_id && to_id != net->nodes[to].id)
        net->bad_to++;
    if ((net->loss > 0 && unif(net) < net->loss) || cut(net, me->idx, to) || net->deaf == to + 1) {
        net->dropped++;
        return 0;
    }
    msg_t m = { net->now + 0.001 + 0.019 * unif(net), ++net->order, me->idx, to, type,
                me->id, me->life, seq, len, malloc(len) };
    memcpy(m.body, body, len);
    heap_push(net, m);
    return 0;
}

static void deliver(net_t *net, msg_t *m)
{
    node_t *dst = &net->nodes[m->to];
    if (!dst->up || cut(net, m->from, m->to)) {
        net->dropped++;
        free(m->body);
        return;
    }
    if (dst->frozen) { /* SIGSTOP: the kernel keeps it until the process runs */
        if (net->nheld == net->capheld) {
            net->capheld = net->capheld ? 2 * net->capheld : 256;
            net->held = realloc(net->held, net->capheld * sizeof *net->held);
        }
        net->held[net->nheld++] = *m;
        return;
    }
    net->delivered++;
    int rc = rumor_swim_on_message(dst->sw, net->now, m->sender, m->life, m->type, m->seq,
                                   m->body, m->len);
    if (rc < 0 && -rc < RUMOR_WIRE_NREJECT)
        net->rejected[-rc]++;
    free(m->body);
}

static int live(const node_t *nd)
{
    return nd->up && !nd->frozen;
}

/* Runs the network until virtual time t_end: messages in order of arrival,
 * each instance ticked at the deadline it asked for. */
static void run_until(net_t *net, double t_end)
{
    for (long guard = 0; guard < 50000000; guard++) {
        double t = INFINITY;
        if (net->nheap)
            t = net->heap[0].at;
        for (int i = 0; i < net->n; i++)
            if (live(&net->nodes[i])) {
                double d = rumor_swim_next_deadline(net->nodes[i].sw);
                if (d < t)
                    t = d;
            }
        if (t > t_end)
            break;
        if (t > net->now)
            net->now = t;
        while (net->nheap && net->heap[0].at <= net->now) {
            msg_t m = heap_pop(net);
            deliver(net, &m);
        }
        for (int i = 0; i < net->n; i++) {
            node_t *nd = &net->nodes[i];
            if (live(nd) && rumor_swim_next_deadline(nd->sw) <= net->now) {
                rumor_swim_tick(nd->sw, net->now);
                if (rumor_swim_next_deadline(nd->sw) <= net->now)
                    net->stuck++;
            }
        }
    }
    net->now = t_end;
}

static uint64_t node_id(int i)
{
    return mix64(0x1234 + (uint64_t)i) | 1;
}

static void node_start(net_t *net, int i, uint64_t life, int seed)
{
    node_t *nd = &net->nodes[i];
    nd->net = net;
    nd->idx = i;
    nd->id = node_id(i);
    nd->life = life;
    snprintf(nd->ep, sizeof nd->ep, "tcp://10.0.%d.%d:5001", i / 200, 1 + i % 200);
    rumor_swim_config_t c = net->base;
    c.self_id = nd->id;
    c.incarnation = life;
    c.self_endpoint = nd->ep;
    c.seed = 77 + (uint64_t)i * 1000 + life;
    CHECK_OK(rumor_swim_create(&c, sim_send, nd, &nd->sw));
    if (seed >= 0) {
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://10.0.%d.%d:5001", seed / 200, 1 + seed % 200);
        CHECK_OK(rumor_swim_add_seed(nd->sw, ep));
    }
    nd->up = 1;
    nd->frozen = 0;
}

static void net_init(net_t *net, int n, uint64_t rng)
{
    memset(net, 0, sizeof *net);
    net->n = n;
    net->rng = rng;
    net->base.probe_interval = IVL;
}

/* n members, member i seeded with member i-1 (a chain). */
static void net_chain(net_t *net, int n, uint64_t rng)
{
    net_init(net, n, rng);
    for (int i = 0; i < n; i++)
        node_start(net, i, 100, i - 1);
}

static void net_free(net_t *net)
{
    for (int i = 0; i < net->n; i++)
        rumor_swim_destroy(&net->nodes[i].sw);
    while (net->nheap) {
        msg_t m = heap_pop(net);
        free(m.body);
    }
    for (size_t i = 0; i < net->nheld; i++)
        free(net->held[i].body);
    free(net->heap);
    free(net->held);
}

static void freeze(net_t *net, int i, int on)
{
    net->nodes[i].frozen = on;
    if (on)
        return;
    size_t keep = 0;
    for (size_t k = 0; k < net->nheld; k++) {
        if (net->held[k].to == i) {
            net->held[k].at = net->now;
            heap_push(net, net->held[k]);
        } else
            net->held[keep++] = net->held[k];
    }
    net->nheld = keep;
}

/* 1 when every live member's view is exactly the members in `want`
 * (a bitmask of node indices), all of them alive. */
static int converged(net_t *net, uint64_t want)
{
    rumor_swim_member_t v[NMAX + 1];
    for (int i = 0; i < net->n; i++) {
        node_t *nd = &net->nodes[i];
        if (!live(nd) || !(want >> i & 1))
            continue;
        size_t k = rumor_swim_view(nd->sw, v, NMAX + 1);
        if (k != (size_t)__builtin_popcountll(want))
            return 0;
        for (size_t j = 0; j < k; j++) {
            int idx = ep_index(net, v[j].endpoint);
            if (idx < 0 || !(want >> idx & 1) || v[j].state != RUMOR_SWIM_ALIVE ||
                v[j].id != net->nodes[idx].id || v[j].incarnation != net->nodes[idx].life)
                return 0;
        }
    }
    return 1;
}

/* Runs until converged(want) or t_max; returns the time it took, or -1. */
static double run_to_convergence(net_t *net, uint64_t want, double t_max)
{
    double t0 = net->now;
    while (net->now < t0 + t_max) {
        if (converged(net, want))
            return net->now - t0;
        run_until(net, net->now + 0.05);
    }
    return converged(net, want) ? net->now - t0 : -1;
}

/* The state node `at` holds for node `of` (-1 when unknown). */
static int state_of(net_t *net, int at, int of)
{
    const rumor_swim_member_t *m = rumor_swim_find(net->nodes[at].sw, net->nodes[of].id);
    return m ? m->state : -1;
}

static rumor_swim_stats_t sum_stats(net_t *net)
{
    rumor_swim_stats_t s = { 0 }, t;
    for (int i = 0; i < net->n; i++) {
        if (!net->nodes[i].sw)
            continue;
        rumor_swim_stats(net->nodes[i].sw, &t);
        s.probes += t.probes;
        s.probe_reqs += t.probe_reqs;
        s.acks_indirect += t.acks_indirect;
        s.suspected += t.suspected;
        s.declared_dead += t.declared_dead;
        s.refuted += t.refuted;
        s.late_ticks += t.late_ticks;
        s.syncs += t.syncs;
    }
    return s;
}

static uint64_t rejected_total(const net_t *net)
{
    uint64_t r = 0;
    for (int i = 0; i < RUMOR_WIRE_NREJECT; i++)
        r += net->rejected[i];
    return r;
}

/* The suspicion timeout the default config gives a view of n. */
static double susp_timeout(int n)
{
    return 5.0 * (n > 10 ? log10((double)n) : 1.0) * IVL;
}

/* Dissemination to n members takes O(log n) intervals: with piggybacking
 * on probes and acks plus gossip rounds of fanout 3 every half interval,
 * the informed set grows by a factor > 2 per interval. This is the budget
 * the tests allow, with a factor 2 of slack. */
static double spread_bound(int n)
{
    return 2.0 * ceil(log2((double)n)) * IVL;
}

/* --------------------------------------------------- (a) join and converge */

static void test_join(void)
{
    net_t net;
    int n = 16;
    net_chain(&net, n, 1);
    uint64_t all = (1ull << n) - 1;
    /* The join is one round trip to the seed (full state), and each
     * newcomer's alive spreads like any update; the chain adds at most one
     * hop per member per interval before gossip takes over. */
    double bound = 2 * IVL + spread_bound(n) + 4 * IVL;
    double t = run_to_convergence(&net, all, 60);
    CHECKF(t >= 0 && t <= bound, "16 members converged in %.2f s (bound %.2f s)", t, bound);
    fprintf(stderr, "join: 16 members from a chain of seeds converged in %.2f s virtual "
                    "(bound %.2f s)\n",
            t, bound);
    run_until(&net, net.now + 20);
    CHECK(converged(&net, all));
    rumor_swim_stats_t s = sum_stats(&net);
    CHECKF(s.suspected == 0, "%llu suspicions without loss", (unsigned long long)s.suspected);
    CHECK(s.declared_dead == 0);
    CHECK(net.hdr_fail == 0);
    CHECK(net.bad_to == 0);
    CHECK(net.unknown_ep == 0);
    CHECK(net.stuck == 0);
    CHECKF(rejected_total(&net) == 0, "%llu messages rejected",
           (unsigned long long)rejected_total(&net));

    /* (f) converged views give the same graph everywhere */
    rumor_swim_member_t v0[NMAX], v[NMAX];
    size_t n0 = rumor_swim_view(net.nodes[0].sw, v0, NMAX);
    rumor_topo_t *t0 = NULL;
    int self0 = -1;
    CHECK_OK(rumor_swim_topology("rreg:4:seed=3", v0, n0, net.nodes[0].id, &t0, &self0));
    for (int i = 1; i < n && t0; i++) {
        size_t k = rumor_swim_view(net.nodes[i].sw, v, NMAX);
        CHECK(k == n0 && rumor_swim_view_version(net.nodes[i].sw) > 0);
        rumor_topo_t *ti = NULL;
        int self = -1;
        CHECK_OK(rumor_swim_topology("rreg:4:seed=3", v, k, net.nodes[i].id, &ti, &self));
        if (!ti)
            continue;
        CHECK(v[self].id == net.nodes[i].id);
        CHECK(!strcmp(ti->spec, t0->spec));
        const rumor_mix_t *a = rumor_topo_mix(t0, 0), *b = rumor_topo_mix(ti, 0);
        CHECK(a->nnz == b->nnz && !memcmp(a->col, b->col, (size_t)a->nnz * sizeof *a->col) &&
              !memcmp(a->val, b->val, (size_t)a->nnz * sizeof *a->val));
        for (size_t j = 0; j < k; j++)
            CHECK(v[j].id == v0[j].id);
        rumor_topo_destroy(&ti);
    }
    rumor_topo_destroy(&t0);
    net_free(&net);
}

/* ------------------------------------------------------- (b) a crash */

static void test_crash(void)
{
    net_t net;
    int n = 16, x = 5;
    net_chain(&net, n, 2);
    uint64_t all = (1ull << n) - 1;
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    run_until(&net, net.now + 5);
    double t_crash = net.now;
    net.nodes[x].up = 0;
    double first_suspect = -1, first_dead = -1, dead_all = -1;
    double ts = susp_timeout(n - 1);
    /* Somebody probes x within a few intervals (15 probers, each going
     * round-robin through a shuffled list); then the suspicion timeout,
     * then the death spreads. */
    double bound = (n - 1) * IVL / 2 + 2 * IVL + ts + spread_bound(n);
    while (net.now < t_crash + 60 && dead_all < 0) {
        run_until(&net, net.now + 0.02);
        int ndead = 0;
        for (int i = 0; i < n; i++) {
            if (i == x)
                continue;
            int s = state_of(&net, i, x);
            if (s == RUMOR_SWIM_SUSPECT && first_suspect < 0)
                first_suspect = net.now - t_crash;
            if (s == RUMOR_SWIM_DEAD) {
                ndead++;
                if (first_dead < 0)
                    first_dead = net.now - t_crash;
            }
        }
        if (ndead == n - 1)
            dead_all = net.now - t_crash;
    }
    fprintf(stderr, "crash: first suspect %.2f s, first dead %.2f s, dead everywhere %.2f s "
                    "(suspicion timeout %.2f s, bound %.2f s)\n",
            first_suspect, first_dead, dead_all, ts, bound);
    CHECK(first_suspect >= 0 && first_suspect < first_dead);
    CHECKF(first_dead - first_suspect >= ts - 0.05, "dead %.2f s after the first suspicion",
           first_dead - first_suspect);
    CHECKF(dead_all >= 0 && dead_all <= bound, "dead everywhere after %.2f s (bound %.2f)",
           dead_all, bound);
    CHECK(converged(&net, all & ~(1ull << x)));
    /* x alone died: no member saw more than one suspicion expire */
    for (int i = 0; i < n; i++) {
        rumor_swim_stats_t s;
        rumor_swim_stats(net.nodes[i].sw, &s);
        CHECK(s.declared_dead <= 1);
    }
    net_free(&net);
}

/* A member reached at a new address (its relay changed): its record with
 * the new endpoint supersedes the old one on every member within the
 * dissemination bound, each view's version moves (neighbours are dialled
 * again), and nobody suspects it meanwhile. */
static void test_new_endpoint(void)
{
    net_t net;
    int n = 12, x = 4;
    net_chain(&net, n, 9);
    uint64_t all = (1ull << n) - 1;
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    run_until(&net, net.now + 2);
    uint64_t ver[NMAX];
    for (int i = 0; i < n; i++)
        ver[i] = rumor_swim_view_version(net.nodes[i].sw);
    rumor_swim_t *sw = net.nodes[x].sw;
    CHECK_ERR(rumor_swim_set_endpoint(sw, net.now, "udp://10.0.0.1:1", 1), RUMOR_EINVAL, "tcp://");
    CHECK_ERR(rumor_swim_set_endpoint(sw, net.now, "tcp://10.0.0.1:0", 1), RUMOR_EINVAL, "");
    CHECK(rumor_swim_set_endpoint(sw, net.now, net.nodes[x].ep, 0) == 0); /* unchanged */
    const char *moved = "tcp://10.9.9.9:6001";
    snprintf(net.nodes[x].ep, sizeof net.nodes[x].ep, "%s", moved);
    double t0 = net.now;
    CHECK(rumor_swim_set_endpoint(sw, net.now, moved, 1) == 1); /* a relay's address now */
    double all_at = -1;
    while (net.now < t0 + 30 && all_at < 0) {
        run_until(&net, net.now + 0.02);
        int k = 0;
        for (int i = 0; i < n; i++) {
            const rumor_swim_member_t *m = rumor_swim_find(net.nodes[i].sw, node_id(x));
            k += m && !strcmp(m->endpoint, moved) && m->reach == RUMOR_SWIM_RELAYED;
        }
        if (k == n)
            all_at = net.now - t0;
    }
    double bound = spread_bound(n) + 2 * IVL;
    fprintf(stderr, "new endpoint: known everywhere after %.2f s (bound %.2f s)\n", all_at, bound);
    CHECKF(all_at >= 0 && all_at <= bound, "the new endpoint everywhere after %.2f s", all_at);
    for (int i = 0; i < n; i++) {
        if (i == x)
            continue;
        CHECKF(rumor_swim_view_version(net.nodes[i].sw) > ver[i], "member %d's view did not "
               "move", i);
        CHECK(state_of(&net, i, x) == RUMOR_SWIM_ALIVE);
        rumor_swim_stats_t st;
        rumor_swim_stats(net.nodes[i].sw, &st);
        CHECK(st.declared_dead == 0);
    }
    CHECK(converged(&net, all));
    CHECK(rumor_swim_leave(sw, net.now) >= 0);
    CHECK_ERR(rumor_swim_set_endpoint(sw, net.now, "tcp://10.9.9.9:6002", 1), RUMOR_ESTATE,
              "left");
    net_free(&net);
    /* members that relay say where (RUMOR_SWIM_RELAY and the control
     * endpoint ride in every record of theirs) */
    net_init(&net, 6, 3);
    net.base.self_relay = "tcp://10.7.7.7:7001";
    for (int i = 0; i < 6; i++)
        node_start(&net, i, 100, i - 1);
    CHECK(run_to_convergence(&net, (1ull << 6) - 1, 30) >= 0);
    int offered = 0;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            const rumor_swim_member_t *m = rumor_swim_find(net.nodes[i].sw, node_id(j));
            offered += m && m->reach == RUMOR_SWIM_RELAY && !strcmp(m->relay, "tcp://10.7.7.7:7001");
        }
    CHECKF(offered == 36, "%d of 36 records say their member relays", offered);
    net_free(&net);
    rumor_swim_config_t bad = { .self_id = 1, .self_endpoint = "tcp://10.0.0.1:1",
                                .self_relay = "tcp://10.0.0.1:0" };
    rumor_swim_t *sw2 = NULL;
    CHECK_ERR(rumor_swim_create(&bad, sim_send, NULL, &sw2), RUMOR_EINVAL, "relay endpoint");
}

/* 10% of all messages lost for 200 intervals: indirect probes and
 * refutation keep every live member alive everywhere. */
static void test_loss(void)
{
    net_t net;
    int n = 16;
    net_chain(&net, n, 3);
    uint64_t all = (1ull << n) - 1;
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    rumor_swim_stats_t s0 = sum_stats(&net);
    net.loss = 0.10;
    int ever_dead = 0;
    double t_end = net.now + 200 * IVL;
    while (net.now < t_end) {
        run_until(&net, net.now + 0.1);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                ever_dead += state_of(&net, i, j) >= RUMOR_SWIM_DEAD;
    }
    rumor_swim_stats_t s = sum_stats(&net);
    fprintf(stderr, "loss 10%%, 200 intervals: %llu probes, %llu indirect requests, %llu acks "
                    "only through helpers, %llu suspicions, %llu refutations, %llu deaths\n",
            (unsigned long long)(s.probes - s0.probes),
            (unsigned long long)(s.probe_reqs - s0.probe_reqs),
            (unsigned long long)(s.acks_indirect - s0.acks_indirect),
            (unsigned long long)(s.suspected - s0.suspected),
            (unsigned long long)(s.refuted - s0.refuted),
            (unsigned long long)(s.declared_dead - s0.declared_dead));
    CHECK(ever_dead == 0);
    CHECK(s.declared_dead == 0);
    CHECK(s.acks_indirect > s0.acks_indirect); /* the helpers did save some probes */
    if (s.suspected > s0.suspected)
        CHECK(s.refuted > s0.refuted);
    net.loss = 0;
    CHECK(run_to_convergence(&net, all, 20) >= 0);
    CHECK(net.hdr_fail == 0 && net.stuck == 0);
    net_free(&net);
}

/* Lifeguard's local health: node 0 hears nothing (every message to it is
 * lost; it still sends), as a peer starved of CPU whose answers queue
 * unread. Its probes go unanswered, so its health multiplier climbs to the
 * maximum (8) and it probes 9 times less often: over 100 intervals it sends
 * under a quarter of a healthy node's probes, and suspects as few members.
 * The healthy nodes, which probed node 0 in vain a few times, end at 0 or
 * 1. Once node 0 hears again, its answered probes bring it back to 0, one
 * step a probe. */
static void test_health(void)
{
    net_t net;
    int n = 8;
    net_chain(&net, n, 11);
    uint64_t all = (1ull << n) - 1;
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    rumor_swim_stats_t a0, b0, a, b;
    rumor_swim_stats(net.nodes[0].sw, &a0);
    rumor_swim_stats(net.nodes[1].sw, &b0);
    CHECK(a0.health == 0 && b0.health == 0);
    net.deaf = 1;
    run_until(&net, net.now + 100 * IVL);
    rumor_swim_stats(net.nodes[0].sw, &a);
    rumor_swim_stats(net.nodes[1].sw, &b);
    uint64_t pa = a.probes - a0.probes, pb = b.probes - b0.probes;
    fprintf(stderr, "health: a deaf node sent %llu probes in 100 intervals (health %d), a "
                    "healthy one %llu (health %d, at most %d)\n", (unsigned long long)pa,
            a.health, (unsigned long long)pb, b.health, b.health_max);
    CHECKF(a.health == 8 && a.health_max == 8, "the deaf node's health is %d", a.health);
    CHECKF(4 * pa < pb, "the deaf node probed %llu times, a healthy one %llu",
           (unsigned long long)pa, (unsigned long long)pb);
    CHECK(a.suspected - a0.suspected <= pa);
    CHECK(b.health <= 1);
    net.deaf = 0;
    CHECK(run_to_convergence(&net, all, 120) >= 0);
    /* one step down a probe, each (health + 1) intervals long: 9 + 8 + ... + 1 */
    run_until(&net, net.now + 60 * IVL);
    rumor_swim_stats(net.nodes[0].sw, &a);
    CHECKF(a.health == 0, "health %d after hearing again", a.health);
    CHECK(net.hdr_fail == 0 && net.stuck == 0);
    net_free(&net);
}

/* --------------------------------------- (c) freeze, refute, die, restart */

static void test_freeze_restart(void)
{
    net_t net;
    int n = 16, x = 9;
    net_chain(&net, n, 4);
    uint64_t all = (1ull << n) - 1;
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    run_until(&net, net.now + 3);
    double ts = susp_timeout(n);

    /* a short freeze: suspected, back before the timeout, refutes */
    rumor_swim_stats_t sx0;
    rumor_swim_stats(net.nodes[x].sw, &sx0);
    /* frozen until somebody suspects x, and one interval more: x wakes
     * up well inside the suspicion timeout */
    freeze(&net, x, 1);
    double t0 = net.now;
    int suspected = 0;
    while (!suspected && net.now < t0 + n * IVL) {
        run_until(&net, net.now + 0.05);
        for (int i = 0; i < n; i++)
            suspected |= i != x && state_of(&net, i, x) == RUMOR_SWIM_SUSPECT;
    }
    CHECK(suspected);
    run_until(&net, net.now + IVL);
    freeze(&net, x, 0);
    int died = 0;
    double t1 = net.now;
    while (net.now < t1 + 20) {
        run_until(&net, net.now + 0.05);
        for (int i = 0; i < n; i++)
            died |= state_of(&net, i, x) >= RUMOR_SWIM_DEAD;
    }
    rumor_swim_stats_t sx;
    rumor_swim_stats(net.nodes[x].sw, &sx);
    CHECK(!died);
    CHECK(sx.refuted > sx0.refuted);
    CHECK(sx.late_ticks > sx0.late_ticks);
    CHECK(sx.declared_dead == sx0.declared_dead); /* waking up, x killed nobody */
    CHECK(converged(&net, all));
    const rumor_swim_member_t *mx = rumor_swim_find(net.nodes[0].sw, net.nodes[x].id);
    CHECK(mx && mx->refutation >= 1);
    fprintf(stderr, "freeze %.2f s: suspected, refuted (refutation %u), alive everywhere\n",
            t1 - t0, mx ? mx->refutation : 0);

    /* a long freeze: dead everywhere */
    run_until(&net, net.now + 2);
    uint8_t stale[RUMOR_WIRE_MAX_BODY];
    size_t stale_len = net.nodes[x].last_len;
    int stale_type = net.nodes[x].last_type;
    memcpy(stale, net.nodes[x].last, stale_len);
    freeze(&net, x, 1);
    t0 = net.now;
    double bound = (n - 1) * IVL / 2 + 2 * IVL + ts + spread_bound(n);
    while (net.now < t0 + bound) {
        run_until(&net, net.now + 0.1);
        if (converged(&net, all & ~(1ull << x)))
            break;
    }
    CHECKF(converged(&net, all & ~(1ull << x)), "frozen member not dead everywhere in %.2f s",
           bound);
    for (int i = 0; i < n; i++)
        if (i != x)
            CHECK(state_of(&net, i, x) == RUMOR_SWIM_DEAD);

    /* killed, restarted with a higher incarnation: alive again everywhere */
    net.nodes[x].frozen = 0;
    net.nodes[x].up = 0;
    rumor_swim_destroy(&net.nodes[x].sw);
    size_t keep = 0;
    for (size_t k = 0; k < net.nheld; k++) { /* its socket buffer dies with it */
        if (net.held[k].to == x)
            free(net.held[k].body);
        else
            net.held[keep++] = net.held[k];
    }
    net.nheld = keep;
    node_start(&net, x, 101, 0);
    double t = run_to_convergence(&net, all, 30);
    double rbound = 2 * IVL + spread_bound(n) + 2 * IVL;
    CHECKF(t >= 0 && t <= rbound, "restarted member alive everywhere after %.2f s (bound %.2f)",
           t, rbound);
    fprintf(stderr, "restart: alive everywhere with incarnation 101 after %.2f s\n", t);
    for (int i = 0; i < n; i++) {
        const rumor_swim_member_t *m = rumor_swim_find(net.nodes[i].sw, net.nodes[x].id);
        CHECK(m && m->incarnation == 101 && m->state == RUMOR_SWIM_ALIVE);
    }
    /* a message from the previous life is refused and changes nothing */
    uint64_t v = rumor_swim_view_version(net.nodes[0].sw);
    int rc = rumor_swim_on_message(net.nodes[0].sw, net.now, net.nodes[x].id, 100, stale_type,
                                   1, stale, stale_len);
    CHECK(rc == -RUMOR_WIRE_OLD_INCARNATION);
    CHECK(rumor_swim_view_version(net.nodes[0].sw) == v);
    CHECK(rumor_swim_find(net.nodes[0].sw, net.nodes[x].id)->incarnation == 101);
    net_free(&net);
}

/* --------------------------------------------------- (d) a partition */

static void test_partition(void)
{
    net_t net;
    int n = 16;
    net_chain(&net, n, 5);
    uint64_t all = (1ull << n) - 1, a = (1ull << (n / 2)) - 1, b = all & ~a;
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    run_until(&net, net.now + 3);
    for (int i = 0; i < n; i++)
        net.nodes[i].side = i >= n / 2;
    net.partitioned = 1;
    double t = run_to_convergence(&net, a, 60);
    CHECKF(t >= 0, "side A did not settle on itself");
    CHECK(run_to_convergence(&net, b, 60) >= 0);
    run_until(&net, net.now + 10);
    CHECK(converged(&net, a) && converged(&net, b));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if ((i < n / 2) != (j < n / 2))
                CHECK(state_of(&net, i, j) == RUMOR_SWIM_DEAD);
    net.partitioned = 0;
    /* Dead members are re-probed every reprobe_every = 5 intervals and the
     * contact carries each side's verdict to the other, which refutes and
     * spreads its refutation; a suspicion timeout may pass on the way. */
    double bound = 5 * IVL * 2 + susp_timeout(n) + 2 * spread_bound(n);
    t = run_to_convergence(&net, all, 60);
    fprintf(stderr, "partition healed: all 16 members again in %.2f s (bound %.2f s)\n", t,
            bound);
    CHECKF(t >= 0 && t <= bound, "healed in %.2f s", t);
    run_until(&net, net.now + 30);
    CHECK(converged(&net, all));
    net_free(&net);
}

/* A partition that outlasts the tombstones: nobody remembers the other
 * side, and only the seeds (member 8 seeds member 7, across the cut) can
 * bring the halves together. */
static void test_partition_forgotten(void)
{
    net_t net;
    int n = 16;
    net_init(&net, n, 8);
    net.base.tombstone_timeout = 5;
    for (int i = 0; i < n; i++)
        node_start(&net, i, 100, i - 1);
    uint64_t all = (1ull << n) - 1, a = (1ull << (n / 2)) - 1, b = all & ~a;
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    for (int i = 0; i < n; i++)
        net.nodes[i].side = i >= n / 2;
    net.partitioned = 1;
    run_until(&net, net.now + 30);
    CHECK(converged(&net, a) && converged(&net, b));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if ((i < n / 2) != (j < n / 2))
                CHECK(state_of(&net, i, j) == -1); /* forgotten */
    net.partitioned = 0;
    /* the stray seed is tried every 2 * reprobe_every intervals */
    double bound = 2 * 5 * IVL + 2 * spread_bound(n);
    double t = run_to_convergence(&net, all, 60);
    fprintf(stderr, "partition past the tombstones healed through a seed in %.2f s (bound "
                    "%.2f s)\n",
            t, bound);
    CHECKF(t >= 0 && t <= bound, "healed in %.2f s", t);
    net_free(&net);
}

/* ------------------------------------------------------ body builder */

/* An independent encoder of the body layout in docs/membership.md. */
typedef struct ent {
    uint64_t id, inc;
    uint32_t ref;
    int state;
    const char *ep;
} ent_t;

static size_t put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

static size_t mk_body(uint8_t *b, int flags, int count, const ent_t *e, int ne, uint64_t target,
                      const char *tep)
{
    size_t p = 0;
    b[p++] = 1;
    b[p++] = (uint8_t)flags;
    p += put_le(b + p, (uint64_t)count, 2);
    if (tep) {
        p += put_le(b + p, target, 8);
        b[p++] = (uint8_t)strlen(tep);
        memcpy(b + p, tep, strlen(tep));
        p += strlen(tep);
    }
    for (int i = 0; i < ne; i++) {
        p += put_le(b + p, e[i].id, 8);
        p += put_le(b + p, e[i].inc, 8);
        p += put_le(b + p, e[i].ref, 4);
        b[p++] = (uint8_t)e[i].state;
        b[p++] = (uint8_t)strlen(e[i].ep);
        memcpy(b + p, e[i].ep, strlen(e[i].ep));
        p += strlen(e[i].ep);
    }
    return p;
}

/* ----------------------------------------------------------- (e) leave */

static void test_leave(void)
{
    net_t net;
    int n = 12, x = 4, y = 7;
    net_chain(&net, n, 6);
    uint64_t all = (1ull << n) - 1;
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    CHECK(rumor_swim_leave(net.nodes[x].sw, net.now) > 0);
    CHECK(rumor_swim_leave(net.nodes[x].sw, net.now) == RUMOR_ESTATE);
    double t0 = net.now;
    while (net.now < t0 + 10) {
        run_until(&net, net.now + 0.05);
        int nl = 0;
        for (int i = 0; i < n; i++)
            nl += i != x && state_of(&net, i, x) == RUMOR_SWIM_LEFT;
        if (nl == n - 1)
            break;
    }
    double t = net.now - t0;
    fprintf(stderr, "leave: LEFT everywhere in %.2f s\n", t);
    CHECKF(t <= spread_bound(n), "LEFT took %.2f s", t);
    net.nodes[x].up = 0;
    for (int i = 0; i < n; i++)
        if (i != x)
            CHECK(state_of(&net, i, x) == RUMOR_SWIM_LEFT);

    /* stale alives of the same incarnation, even with a higher refutation
     * number, from a third member or from x itself, override nothing */
    const rumor_swim_member_t *mx = rumor_swim_find(net.nodes[0].sw, net.nodes[x].id);
    uint32_t ref = mx ? mx->refutation : 0;
    uint8_t body[512];
    ent_t e[2] = { { net.nodes[y].id, 100, 0, RUMOR_SWIM_ALIVE, net.nodes[y].ep },
                   { net.nodes[x].id, 100, ref + 5, RUMOR_SWIM_ALIVE, net.nodes[x].ep } };
    const rumor_swim_member_t *my = rumor_swim_find(net.nodes[0].sw, net.nodes[y].id);
    e[0].ref = my ? my->refutation : 0;
    size_t len = mk_body(body, RUMOR_SWIM_F_STATE, 2, e, 2, 0, NULL);
    ent_t self_alive = { net.nodes[x].id, 100, ref + 9, RUMOR_SWIM_ALIVE, net.nodes[x].ep };
    uint8_t body2[256];
    size_t len2 = mk_body(body2, 0, 1, &self_alive, 1, 0, NULL);
    for (int i = 0; i < n; i++) {
        if (i == x || i == y)
            continue;
        CHECK(rumor_swim_on_message(net.nodes[i].sw, net.now, net.nodes[y].id, 100,
                                    RUMOR_WIRE_ACK, 0, body, len) == 0);
        CHECK(rumor_swim_on_message(net.nodes[i].sw, net.now, net.nodes[x].id, 100,
                                    RUMOR_WIRE_ACK, 0, body2, len2) == 0);
        CHECK(state_of(&net, i, x) == RUMOR_SWIM_LEFT);
    }
    run_until(&net, net.now + 10);
    CHECK(converged(&net, all & ~(1ull << x)));
    /* a later life comes back */
    rumor_swim_destroy(&net.nodes[x].sw);
    node_start(&net, x, 200, y);
    CHECK(run_to_convergence(&net, all, 30) >= 0);
    net_free(&net);
}

/* ------------------------------------------------ (f) view -> topology */

static void view_of(rumor_swim_member_t *v, size_t n, uint64_t salt)
{
    memset(v, 0, n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        v[i].id = (i + 1) * 1000 + salt; /* sorted */
        v[i].incarnation = 1;
        snprintf(v[i].endpoint, sizeof v[i].endpoint, "tcp://10.1.0.%zu:7", i + 1);
    }
}

static void check_weights(rumor_topo_t *t)
{
    for (int k = 0; k < t->period; k++) {
        rumor_mix_t *w = t->w[k];
        int static_graph = !t->time_varying;
        CHECK_OK(rumor_mix_check(w, static_graph, 0));
        for (int i = 0; i < w->n; i++) {
            double s = w->diag[i];
            for (long p = w->off[i]; p < w->off[i + 1]; p++)
                s += w->val[p];
            CHECK_CLOSE(s, 1.0, 1e-12, 0);
        }
    }
}

/* Edges (by id pair) of graph a that graph b lacks, leaving out those
 * touching `gone`. */
static int edges_missing(const rumor_topo_t *a, const rumor_swim_member_t *va,
                         const rumor_topo_t *b, const rumor_swim_member_t *vb, size_t nb,
                         uint64_t gone)
{
    int missing = 0;
    for (int i = 0; i < a->n; i++)
        for (long p = a->graph->off[i]; p < a->graph->off[i + 1]; p++) {
            uint64_t u = va[i].id, v = va[a->graph->adj[p]].id;
            if (u > v || u == gone || v == gone)
                continue;
            int found = 0;
            for (size_t j = 0; j < nb && !found; j++)
                if (vb[j].id == u)
                    for (long q = b->graph->off[j]; q < b->graph->off[j + 1] && !found; q++)
                        found = vb[b->graph->adj[q]].id == v;
            missing += !found;
        }
    return missing;
}

/* "chord": the neighbours by distance in the id space, against a brute
 * force of the rule (successor, and the first member at or after id +
 * 2^64/2^k for every k in 1..63, either way round),
 * and how few edges a departure moves, against exp laid over ranks. */
static void test_chord(void)
{
    enum { N = 256 };
    static rumor_swim_member_t v[N], w[N - 1];
    uint64_t st = 42;
    memset(v, 0, sizeof v);
    for (int i = 0; i < N; i++)
        v[i].id = rumor_splitmix64(&st) | 1;
    for (int i = 1; i < N; i++) /* insertion sort: ids increasing */
        for (int j = i; j > 0 && v[j].id < v[j - 1].id; j--) {
            rumor_swim_member_t x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    rumor_topo_t *t = NULL, *u = NULL;
    int self;
    CHECK_OK(rumor_swim_topology("chord", v, N, v[5].id, &t, &self));
    if (!t)
        return;
    CHECK(self == 5 && t->n == N && !strcmp(t->family, "chord"));
    check_weights(t);
    /* brute force: adjacency from the rule, linear scans */
    static unsigned char adj[N][N];
    memset(adj, 0, sizeof adj);
    for (int i = 0; i < N; i++) {
        int s = (i + 1) % N;
        adj[i][s] = adj[s][i] = 1;
        for (int k = 1; k < 64; k++) {
            uint64_t target = v[i].id + ((uint64_t)1 << (64 - k));
            int j = 0; /* the first id >= target, else the smallest (wrap) */
            while (j < N && v[j].id < target)
                j++;
            j %= N;
            if (j != i)
                adj[i][j] = adj[j][i] = 1;
        }
    }
    int wrong = 0, deg_sum = 0;
    for (int i = 0; i < N; i++) {
        int nb[N];
        int k = rumor_topo_neighbors(t, i, 0, nb, NULL, N), want = 0;
        for (int j = 0; j < N; j++)
            want += adj[i][j];
        wrong += k != want;
        for (int q = 0; q < k && q < N; q++)
            wrong += !adj[i][nb[q]];
        deg_sum += k;
    }
    CHECKF(wrong == 0, "chord over %d: %d neighbours differ from the rule", N, wrong);
    double mean_deg = (double)deg_sum / N;
    CHECKF(mean_deg > 6 && mean_deg < 24, "chord over %d: mean degree %.1f", N, mean_deg);
    /* a departure (member 100): edges among the others that it moved */
    for (int i = 0, k = 0; i < N; i++)
        if (i != 100)
            w[k++] = v[i];
    CHECK_OK(rumor_swim_topology("chord", w, N - 1, w[5].id, &u, &self));
    int moved = u ? edges_missing(t, v, u, w, N - 1, v[100].id) +
                        edges_missing(u, w, t, v, N, v[100].id)
                  : -1;
    rumor_topo_destroy(&t);
    rumor_topo_destroy(&u);
    CHECK_OK(rumor_swim_topology("exp", v, N, v[5].id, &t, &self));
    CHECK_OK(rumor_swim_topology("exp", w, N - 1, w[5].id, &u, &self));
    int moved_exp = t && u ? edges_missing(t, v, u, w, N - 1, v[100].id) +
                                 edges_missing(u, w, t, v, N, v[100].id)
                           : -1;
    rumor_topo_destroy(&t);
    rumor_topo_destroy(&u);
    fprintf(stderr, "a departure from %d members moved %d edges of chord (mean degree %.1f), %d "
                    "of exp\n", N, moved, mean_deg, moved_exp);
    /* the fingers that pointed at it move to its successor: about one a
     * finger level, log2(256) + 1 of them, each an edge gone and one new */
    CHECKF(moved >= 0 && moved <= 4 * 9, "chord: a departure moved %d edges", moved);
    CHECKF(moved_exp > 10 * moved, "exp moved %d edges, chord %d", moved_exp, moved);
}

static void test_topology(void)
{
    rumor_swim_member_t v[64];
    rumor_topo_t *t = NULL;
    int self = -1, nb[8];
    double w[8];

    /* ring over 5: each member's neighbours are the previous and next id */
    view_of(v, 5, 7);
    for (int i = 0; i < 5; i++) {
        CHECK_OK(rumor_swim_topology("ring", v, 5, v[i].id, &t, &self));
        if (!t)
            continue;
        CHECK(self == i);
        CHECK(!strcmp(t->spec, "ring:5"));
        int k = rumor_topo_neighbors(t, self, 0, nb, w, 8);
        CHECK(k == 2);
        int prev = (i + 4) % 5, next = (i + 1) % 5;
        CHECK((nb[0] == prev && nb[1] == next) || (nb[0] == next && nb[1] == prev));
        CHECK_CLOSE(w[0], 1.0 / 3, 1e-15, 0); /* MH: 1/(1+max(2,2)) */
        CHECK_CLOSE(rumor_topo_self_weight(t, self, 0), 1.0 / 3, 1e-15, 0);
        check_weights(t);
        rumor_topo_destroy(&t);
    }
    /* equal views, whatever the order they were learned in: same topology */
    rumor_topo_t *a = NULL, *b = NULL;
    view_of(v, 9, 3);
    CHECK_OK(rumor_swim_topology("exp", v, 9, v[2].id, &a, &self));
    CHECK_OK(rumor_swim_topology("exp:N", v, 9, v[6].id, &b, &self));
    CHECK(a && b && !strcmp(a->spec, b->spec) && a->w[0]->nnz == b->w[0]->nnz);
    if (a && b)
        CHECK(!memcmp(a->w[0]->val, b->w[0]->val, (size_t)a->w[0]->nnz * sizeof(double)));
    rumor_topo_destroy(&a);
    rumor_topo_destroy(&b);

    /* n = 1: alone, self weight 1; n = 2: one edge, weights 1/2 */
    view_of(v, 1, 0);
    CHECK_OK(rumor_swim_topology("torus", v, 1, v[0].id, &t, &self));
    CHECK(t && t->n == 1 && self == 0);
    if (t) {
        CHECK(rumor_topo_neighbors(t, 0, 0, nb, w, 8) == 0);
        CHECK(rumor_topo_self_weight(t, 0, 0) == 1.0);
        check_weights(t);
    }
    rumor_topo_destroy(&t);
    const char *fams[] = { "ring", "exp", "torus", "grid", "hypercube", "complete", "star",
                           "rreg:3", "er:0.5:seed=2", "ws:2:0.1", "base:1", "onepeer-exp",
                           "exp:directed", "chord" };
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++) {
        view_of(v, 2, 0);
        CHECK_OK(rumor_swim_topology(fams[f], v, 2, v[1].id, &t, &self));
        CHECK(t && t->n == 2 && self == 1);
        if (t) {
            CHECK(rumor_topo_neighbors(t, 1, 0, nb, w, 8) == 1 && nb[0] == 0);
            CHECK(w[0] == 0.5 && rumor_topo_self_weight(t, 1, 0) == 0.5);
        }
        rumor_topo_destroy(&t);
        /* and every size up to 17 builds a valid W (hypercube: powers of 2) */
        for (size_t n = 1; n <= 17; n++) {
            view_of(v, n, 1);
            int rc = rumor_swim_topology(fams[f], v, n, v[n - 1].id, &t, &self);
            if (!strcmp(fams[f], "hypercube") && (n & (n - 1))) {
                CHECK(rc == RUMOR_EINVAL && !t);
                continue;
            }
            CHECKF(rc == 0 && t && t->n == (int)n, "%s over %zu: %s", fams[f], n,
                   rumor_err_msg());
            if (t)
                check_weights(t);
            rumor_topo_destroy(&t);
        }
    }
    /* the adaptations, spelled out */
    char buf[64];
    struct {
        const char *fam;
        size_t n;
        const char *want;
    } cases[] = {
        { "ring", 1, "alone" },          { "ring", 2, "complete:2" },
        { "ring:N", 8, "ring:8" },       { "torus", 12, "torus:3x4" },
        { "torus", 7, "ring:7" },        { "grid", 7, "grid:1x7" },
        { "hypercube", 16, "hypercube:4" }, { "rreg:3", 7, "rreg:7:4" },
        { "rreg:3:seed=5", 8, "rreg:8:3:seed=5" }, { "rreg:N:4", 5, "complete:5" },
        { "ws:4:0.2", 5, "complete:5" }, { "ws:2:0.2:seed=3", 9, "ws:9:2:0.2:seed=3" },
        { "base:3", 3, "base:3:2" },     { "exp:directed", 6, "exp:6:directed" },
        { "er:0.3", 5, "er:5:0.3" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int len = rumor_swim_topology_spec(cases[i].fam, cases[i].n, buf, sizeof buf);
        CHECKF(len > 0 && !strcmp(buf, cases[i].want), "%s over %zu: '%s', want '%s'",
               cases[i].fam, cases[i].n, len > 0 ? buf : rumor_err_msg(), cases[i].want);
    }
    /* refused: sized specs, files, unknown families, bad views */
    view_of(v, 4, 0);
    const char *bad[] = { "ring:8", "file:edges.txt", "bogus", "rreg", "rreg:x", "exp:undirected",
                          "", "ring:N:N" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECKF(rumor_swim_topology(bad[i], v, 4, v[0].id, &t, &self) == RUMOR_EINVAL && !t,
               "'%s' accepted", bad[i]);
    }
    CHECK(rumor_swim_topology("ring", v, 4, 12345, &t, &self) == RUMOR_EINVAL);
    rumor_swim_member_t tmp = v[1];
    v[1] = v[2];
    v[2] = tmp;
    CHECK(rumor_swim_topology("ring", v, 4, v[0].id, &t, &self) == RUMOR_EINVAL);
    CHECK(rumor_swim_topology("ring", v, 0, v[0].id, &t, &self) == RUMOR_EINVAL);
    CHECK(rumor_swim_topology_spec("ring", 5, buf, 4) == RUMOR_EINVAL);
}

/* ------------------------------------------- (g) bodies, good and bad */

static uint8_t cap_buf[RUMOR_WIRE_MAX_BODY];
static size_t cap_len;
static int cap_type, cap_n;
static uint64_t cap_to;
static struct {
    int type;
    uint64_t to;
    uint32_t seq;
} cap_log[64]; /* the first 64 messages since cap_n was reset */

static int capture(void *ctx, uint64_t to_id, const char *ep, int type, uint32_t seq,
                   const void *body, size_t len)
{
    (void)ctx;
    (void)ep;
    (void)seq;
    memcpy(cap_buf, body, len);
    cap_len = len;
    cap_type = type;
    cap_to = to_id;
    if (cap_n >= 0 && cap_n < 64) {
        cap_log[cap_n].type = type;
        cap_log[cap_n].to = to_id;
        cap_log[cap_n].seq = seq;
    }
    cap_n++;
    return 0;
}

typedef struct snap {
    size_t n;
    rumor_swim_member_t v[16];
    uint64_t version, sent;
} snap_t;

static void take(rumor_swim_t *sw, snap_t *s)
{
    memset(s, 0, sizeof *s);
    s->n = rumor_swim_view(sw, s->v, 16);
    s->version = rumor_swim_view_version(sw);
    rumor_swim_stats_t st;
    rumor_swim_stats(sw, &st);
    s->sent = st.messages_sent;
}

static int same(const snap_t *a, const snap_t *b)
{
    if (a->n != b->n || a->version != b->version || a->sent != b->sent)
        return 0;
    for (size_t i = 0; i < a->n && i < 16; i++)
        if (a->v[i].id != b->v[i].id || a->v[i].incarnation != b->v[i].incarnation ||
            a->v[i].refutation != b->v[i].refutation || a->v[i].state != b->v[i].state ||
            strcmp(a->v[i].endpoint, b->v[i].endpoint))
            return 0;
    return 1;
}

static void test_bodies(void)
{
    rumor_swim_config_t c = { 0 };
    rumor_swim_t *sw = NULL;
    /* config checks */
    c.self_endpoint = "tcp://10.9.0.1:5001";
    CHECK_ERR(rumor_swim_create(&c, capture, NULL, &sw), RUMOR_EINVAL, "self_id");
    c.self_id = 0x1111;
    c.incarnation = 5;
    c.self_endpoint = "udp://x";
    CHECK(rumor_swim_create(&c, capture, NULL, &sw) == RUMOR_EINVAL && !sw);
    c.self_endpoint = "tcp://10.9.0.1:5001";
    c.probe_timeout = 0.6;
    CHECK(rumor_swim_create(&c, capture, NULL, &sw) == RUMOR_EINVAL);
    c.probe_timeout = 0;
    CHECK_OK(rumor_swim_create(&c, capture, NULL, &sw));
    if (!sw)
        return;
    CHECK(rumor_swim_next_deadline(sw) == 0);
    CHECK(rumor_swim_add_seed(sw, "tcp://10.9.0.2:5001") == 0);
    CHECK(rumor_swim_add_seed(sw, "tcp://10.9.0.2:5001") == 0); /* repeat: ignored */
    CHECK(rumor_swim_add_seed(sw, "tcp://10.9.0.1:5001") == 0); /* self: ignored */
    CHECK(rumor_swim_add_seed(sw, "tcp://") == RUMOR_EINVAL);
    CHECK(rumor_swim_add_seed(sw, "tcp://a b") == RUMOR_EINVAL);
    CHECK(rumor_swim_add_seed(sw, NULL) == RUMOR_EINVAL);

    /* the first tick knocks at the seed: PROBE, SYNC|STATE, our own record,
     * byte for byte as docs/membership.md lays it out */
    CHECK(rumor_swim_tick(sw, 10.0) == 0);
    CHECK(cap_n == 1 && cap_type == RUMOR_WIRE_PROBE && cap_to == 0);
    uint8_t want[64];
    ent_t me = { 0x1111, 5, 0, RUMOR_SWIM_ALIVE, "tcp://10.9.0.1:5001" };
    size_t wl = mk_body(want, RUMOR_SWIM_F_SYNC | RUMOR_SWIM_F_STATE, 1, &me, 1, 0, NULL);
    CHECK(cap_len == wl && !memcmp(cap_buf, want, wl));
    CHECK(cap_len == 4 + 22 + 19);
    CHECK(rumor_swim_next_deadline(sw) > 10.0 && rumor_swim_next_deadline(sw) <= 10.5);

    /* a valid ACK from a peer adds it */
    uint8_t b[RUMOR_WIRE_MAX_BODY + 16];
    ent_t peer = { 0x2222, 7, 0, RUMOR_SWIM_ALIVE, "tcp://10.9.0.2:5001" };
    ent_t other = { 0x3333, 9, 2, RUMOR_SWIM_ALIVE, "tcp://10.9.0.3:5001" };
    ent_t two[2] = { peer, other };
    size_t len = mk_body(b, RUMOR_SWIM_F_STATE, 2, two, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.1, 0x2222, 7, RUMOR_WIRE_ACK, 1, b, len) == 0);
    CHECK(rumor_swim_view(sw, NULL, 0) == 3);
    const rumor_swim_member_t *m3 = rumor_swim_find(sw, 0x3333);
    CHECK(m3 && m3->refutation == 2 && m3->incarnation == 9 &&
          !strcmp(m3->endpoint, "tcp://10.9.0.3:5001"));
    /* a PROBE is answered with an ACK of the same seq, to the sender */
    cap_n = 0;
    len = mk_body(b, 0, 1, &peer, 1, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.2, 0x2222, 7, RUMOR_WIRE_PROBE, 42, b, len) == 0);
    CHECK(cap_n == 1 && cap_type == RUMOR_WIRE_ACK && cap_to == 0x2222);
    /* asked to probe ourselves: we answer the requester directly */
    cap_n = 0;
    len = mk_body(b, 0, 1, &peer, 1, 0x1111, "tcp://10.9.0.1:5001");
    CHECK(rumor_swim_on_message(sw, 10.2, 0x2222, 7, RUMOR_WIRE_PROBE_REQ, 43, b, len) == 0);
    CHECK(cap_n == 1 && cap_log[0].type == RUMOR_WIRE_ACK && cap_log[0].to == 0x2222 &&
          cap_log[0].seq == 43);
    /* asked to probe a third member: a PROBE to it, and its ACK is forwarded */
    cap_n = 0;
    len = mk_body(b, 0, 1, &peer, 1, 0x3333, "tcp://10.9.0.3:5001");
    CHECK(rumor_swim_on_message(sw, 10.2, 0x2222, 7, RUMOR_WIRE_PROBE_REQ, 44, b, len) == 0);
    CHECK(cap_n == 1 && cap_log[0].type == RUMOR_WIRE_PROBE && cap_log[0].to == 0x3333);
    uint32_t relay_seq = cap_log[0].seq;
    cap_n = 0;
    len = mk_body(b, 0, 1, &other, 1, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.21, 0x3333, 9, RUMOR_WIRE_ACK, relay_seq, b, len) == 0);
    CHECK(cap_n == 1 && cap_log[0].type == RUMOR_WIRE_ACK && cap_log[0].to == 0x2222 &&
          cap_log[0].seq == 44);
    cap_n = 0; /* a second ACK is not forwarded again */
    CHECK(rumor_swim_on_message(sw, 10.22, 0x3333, 9, RUMOR_WIRE_ACK, relay_seq, b, len) == 0);
    CHECK(cap_n == 0);
    /* a suspicion of ourselves is refuted */
    ent_t sus[2] = { peer, { 0x1111, 5, 0, RUMOR_SWIM_SUSPECT, "tcp://10.9.0.1:5001" } };
    len = mk_body(b, 0, 2, sus, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.3, 0x2222, 7, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0x1111)->refutation == 1);
    /* precedence: suspect(inc) beats alive(inc); alive(inc+1) beats suspect(inc);
     * dead of an older refutation does not win */
    ent_t p3[2] = { peer, { 0x3333, 9, 2, RUMOR_SWIM_SUSPECT, "tcp://10.9.0.3:5001" } };
    len = mk_body(b, 0, 2, p3, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.4, 0x2222, 7, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0x3333)->state == RUMOR_SWIM_SUSPECT);
    CHECK(rumor_swim_view(sw, NULL, 0) == 3); /* a suspect is still a member */
    p3[1].state = RUMOR_SWIM_ALIVE;
    len = mk_body(b, 0, 2, p3, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.5, 0x2222, 7, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0x3333)->state == RUMOR_SWIM_SUSPECT);
    p3[1].ref = 3;
    len = mk_body(b, 0, 2, p3, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.6, 0x2222, 7, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0x3333)->state == RUMOR_SWIM_ALIVE);
    p3[1].ref = 2;
    p3[1].state = RUMOR_SWIM_DEAD;
    len = mk_body(b, 0, 2, p3, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.7, 0x2222, 7, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0x3333)->state == RUMOR_SWIM_ALIVE);
    p3[1].ref = 3;
    len = mk_body(b, 0, 2, p3, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 10.8, 0x2222, 7, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0x3333)->state == RUMOR_SWIM_DEAD);
    CHECK(rumor_swim_view(sw, NULL, 0) == 2);
    /* a restart (a later incarnation) comes back alive */
    p3[1].inc = 10;
    p3[1].ref = 0;
    p3[1].state = RUMOR_SWIM_ALIVE;
    len = mk_body(b, 0, 2, p3, 2, 0, NULL);
    uint64_t ver = rumor_swim_view_version(sw);
    CHECK(rumor_swim_on_message(sw, 10.9, 0x2222, 7, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0x3333)->state == RUMOR_SWIM_ALIVE);
    CHECK(rumor_swim_view_version(sw) > ver);

    /* malformed bodies: each rejected with its reason, nothing changes */
    snap_t s0, s1;
    take(sw, &s0);
    uint8_t good[512];
    ent_t g2[2] = { peer, { 0x4444, 1, 0, RUMOR_SWIM_ALIVE, "tcp://10.9.0.4:5001" } };
    size_t glen = mk_body(good, 0, 2, g2, 2, 0, NULL);
    for (size_t cut_at = 0; cut_at < glen; cut_at++) { /* every truncation */
        int rc = rumor_swim_on_message(sw, 11, 0x2222, 7, RUMOR_WIRE_PROBE, 1, good, cut_at);
        CHECK(rc == (cut_at ? -RUMOR_WIRE_BAD_PAYLOAD_SIZE : -RUMOR_WIRE_BAD_FRAMES));
    }
    struct {
        const char *what;
        int type;
        uint64_t sender, inc;
        int flags, count;
        ent_t e[2];
        int ne;
        int want;
    } bad[] = {
        { "count beyond the entries", RUMOR_WIRE_ACK, 0x2222, 7, 0, 3, { peer, other }, 2,
          RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "count 65535", RUMOR_WIRE_ACK, 0x2222, 7, 0, 65535, { peer, other }, 2,
          RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "count below the entries (trailing)", RUMOR_WIRE_ACK, 0x2222, 7, 0, 1,
          { peer, other }, 2, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "count 0", RUMOR_WIRE_ACK, 0x2222, 7, 0, 0, { peer }, 0, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "endpoint not tcp", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2,
          { peer, { 0x5555, 1, 0, 0, "ipc:///tmp/sock" } }, 2, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "endpoint with a space", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2,
          { peer, { 0x5555, 1, 0, 0, "tcp://a b:1" } }, 2, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "endpoint with a control byte", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2,
          { peer, { 0x5555, 1, 0, 0, "tcp://a\nb:1" } }, 2, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "endpoint with no host", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2,
          { peer, { 0x5555, 1, 0, 0, "tcp://" } }, 2, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "endpoint with a high byte", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2,
          { peer, { 0x5555, 1, 0, 0, "tcp://\xc3\xa9:1" } }, 2, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "state 4", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2, { peer, { 0x5555, 1, 0, 4, "tcp://x:1" } },
          2, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "id 0", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2, { peer, { 0, 1, 0, 0, "tcp://x:1" } }, 2,
          RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "state with an unknown high bit", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2,
          { peer, { 0x5555, 1, 0, 0x20, "tcp://x:1" } }, 2, RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "relay flag without its endpoint", RUMOR_WIRE_ACK, 0x2222, 7, 0, 2,
          { peer, { 0x5555, 1, 0, RUMOR_SWIM_RELAY, "tcp://x:1" } }, 2,
          RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "first entry someone else", RUMOR_WIRE_ACK, 0x2222, 7, 0, 1, { other }, 1,
          RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "first entry another life", RUMOR_WIRE_ACK, 0x2222, 8, 0, 1, { peer }, 1,
          RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "first entry suspect", RUMOR_WIRE_ACK, 0x2222, 7, 0, 1,
          { { 0x2222, 7, 0, RUMOR_SWIM_SUSPECT, "tcp://10.9.0.2:5001" } }, 1,
          RUMOR_WIRE_BAD_PAYLOAD_SIZE },
        { "unknown flag", RUMOR_WIRE_ACK, 0x2222, 7, 0x04, 1, { peer }, 1, RUMOR_WIRE_BAD_FLAGS },
        { "SYNC on an ACK", RUMOR_WIRE_ACK, 0x2222, 7, RUMOR_SWIM_F_SYNC, 1, { peer }, 1,
          RUMOR_WIRE_BAD_FLAGS },
        { "older incarnation", RUMOR_WIRE_ACK, 0x2222, 6,
          0, 1, { { 0x2222, 6, 0, 0, "tcp://10.9.0.2:5001" } }, 1, RUMOR_WIRE_OLD_INCARNATION },
        { "not a SWIM type", RUMOR_WIRE_HELLO, 0x2222, 7, 0, 1, { peer }, 1, RUMOR_WIRE_BAD_TYPE },
        { "sender 0", RUMOR_WIRE_ACK, 0, 7, 0, 1, { peer }, 1, RUMOR_WIRE_BAD_SENDER },
        { "from ourselves", RUMOR_WIRE_ACK, 0x1111, 5, 0, 1, { me }, 1, RUMOR_WIRE_FROM_SELF },
        { "PROBE_REQ without a target", RUMOR_WIRE_PROBE_REQ, 0x2222, 7, 0, 1, { peer }, 1,
          RUMOR_WIRE_BAD_PAYLOAD_SIZE },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        len = mk_body(b, bad[i].flags, bad[i].count, bad[i].e, bad[i].ne, 0, NULL);
        rumor_err_clear();
        int rc = rumor_swim_on_message(sw, 11, bad[i].sender, bad[i].inc, bad[i].type, 1, b, len);
        CHECKF(rc == -bad[i].want, "%s: %d (%s), want -%d", bad[i].what, rc, rumor_err_msg(),
               bad[i].want);
        CHECK(rumor_err_code() == RUMOR_EPROTO);
        take(sw, &s1);
        CHECKF(same(&s0, &s1), "%s changed the instance", bad[i].what);
    }
    /* version byte, overlong endpoint length, oversize body, no body */
    len = mk_body(b, 0, 1, &peer, 1, 0, NULL);
    b[0] = 2;
    CHECK(rumor_swim_on_message(sw, 11, 0x2222, 7, RUMOR_WIRE_ACK, 1, b, len) ==
          -RUMOR_WIRE_BAD_VERSION);
    b[0] = 1;
    b[4 + 21] = 200; /* endpoint length beyond the body and the cap */
    CHECK(rumor_swim_on_message(sw, 11, 0x2222, 7, RUMOR_WIRE_ACK, 1, b, len) ==
          -RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    memset(b, 0, sizeof b);
    CHECK(rumor_swim_on_message(sw, 11, 0x2222, 7, RUMOR_WIRE_ACK, 1, b, RUMOR_WIRE_MAX_BODY + 1) ==
          -RUMOR_WIRE_BODY_TOO_LARGE);
    CHECK(rumor_swim_on_message(sw, 11, 0x2222, 7, RUMOR_WIRE_ACK, 1, NULL, 0) ==
          -RUMOR_WIRE_BAD_FRAMES);
    /* a PROBE_REQ with a bad target endpoint */
    len = mk_body(b, 0, 1, &peer, 1, 0x3333, "tcp:/x");
    CHECK(rumor_swim_on_message(sw, 11, 0x2222, 7, RUMOR_WIRE_PROBE_REQ, 1, b, len) ==
          -RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    take(sw, &s1);
    CHECK(same(&s0, &s1));

    /* 10,000 random buffers, and 10,000 valid bodies with random damage */
    uint64_t r = 99;
    int accepted = 0;
    for (int i = 0; i < 10000; i++) {
        r = mix64(r);
        size_t l = 1 + r % 300;
        for (size_t k = 0; k < l; k++) {
            r = mix64(r);
            b[k] = (uint8_t)r;
        }
        int type = RUMOR_WIRE_PROBE + (int)(r % 3);
        int rc = rumor_swim_on_message(sw, 11, 0x2222, 7, type, (uint32_t)r, b, l);
        accepted += rc == 0;
        CHECK(rc < 0);
    }
    take(sw, &s1);
    CHECK(same(&s0, &s1));
    for (int i = 0; i < 10000; i++) {
        len = mk_body(b, 0, 2, g2, 2, 0, NULL);
        r = mix64(r);
        for (int k = 0; k < 1 + (int)(r % 4); k++) {
            r = mix64(r);
            b[r % len] ^= (uint8_t)(1u << (r >> 40) % 8);
        }
        r = mix64(r);
        size_t l = (r & 1) ? len : (size_t)(r >> 8) % (len + 8);
        /* accepted or rejected, never a crash; sanitizers watch */
        (void)rumor_swim_on_message(sw, 11, 0x2222, 7, RUMOR_WIRE_ACK, 0, b, l);
    }
    rumor_swim_stats_t st;
    rumor_swim_stats(sw, &st);
    CHECK(rumor_wire_stats_rejected(&st.wire) >= 10000);
    fprintf(stderr, "bodies: 10000 random buffers rejected (%d accepted)\n", accepted);
    rumor_swim_destroy(&sw);
    rumor_swim_destroy(&sw);
}

/* A full state larger than one body: a seed holding 3000 members (with
 * long endpoints, ~120 bytes an entry) answers a joiner's SYNC with several
 * ACKs, each a valid body within RUMOR_WIRE_MAX_BODY, and the joiner learns
 * them all in one round trip. */
static void test_big_state(void)
{
    net_t net;
    net_init(&net, 2, 9);
    node_start(&net, 0, 1, -1);
    static uint8_t b[RUMOR_WIRE_MAX_BODY];
    static char eps[400][120];
    ent_t e[401];
    int nfake = 0;
    while (nfake < 3000) {
        e[0] = (ent_t){ 0xF00, 1, 0, RUMOR_SWIM_ALIVE, "tcp://10.200.0.1:5001" };
        int k = 1;
        for (; k <= 399 && nfake < 3000; k++, nfake++) {
            snprintf(eps[k], sizeof eps[k], "tcp://member-%04d.a-rather-long-host-name.example."
                                            "internal.swarm:5001", nfake);
            e[k] = (ent_t){ 0x100000 + (uint64_t)nfake, 1, 0, RUMOR_SWIM_ALIVE, eps[k] };
        }
        size_t len = mk_body(b, 0, k, e, k, 0, NULL);
        CHECK(len <= RUMOR_WIRE_MAX_BODY);
        CHECK(rumor_swim_on_message(net.nodes[0].sw, 0, 0xF00, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    }
    size_t want = rumor_swim_view(net.nodes[0].sw, NULL, 0);
    CHECK(want == 3002);
    node_start(&net, 1, 1, 0);
    uint64_t sent0 = net.sent;
    run_until(&net, 0.06); /* one round trip, before anybody could suspect anyone */
    size_t got = rumor_swim_view(net.nodes[1].sw, NULL, 0);
    CHECKF(got == want + 1, "the joiner knows %zu of %zu members", got, want + 1);
    CHECK(net.sent - sent0 >= 6 && net.hdr_fail == 0 && rejected_total(&net) == 0);
    net_free(&net);
}

/* ----------------------------------------- one instance, by the clock */

/* Ticks; member `who` answers the probes sent to it at once. */
static void tick_answering(rumor_swim_t *sw, double now, uint64_t who, const uint8_t *ack,
                           size_t len)
{
    cap_n = 0;
    CHECK(rumor_swim_tick(sw, now) == 0);
    int sent = cap_n;
    for (int i = 0; i < sent && i < 64; i++)
        if (cap_log[i].type == RUMOR_WIRE_PROBE && cap_log[i].to == who)
            CHECK(rumor_swim_on_message(sw, now, who, 1, RUMOR_WIRE_ACK, cap_log[i].seq, ack,
                                        len) == 0);
}

/* Peer 0xA's config for the tests by the clock: only the probes' messages
 * (no gossip rounds, syncs or re-probes). */
static rumor_swim_config_t clock_config(void)
{
    rumor_swim_config_t c = { 0 };
    c.self_id = 0xA;
    c.incarnation = 1;
    c.self_endpoint = "tcp://10.8.0.1:1";
    c.gossip_interval = -1;
    c.sync_every = -1;
    c.reprobe_every = -1;
    return c;
}

/* Timers with closed expectations: a member that answers is never
 * suspected, proof of life through rumor_swim_heard counts, a silent one
 * is asked about through helpers after probe_timeout, suspected at the end
 * of the interval and dead exactly one suspicion timeout later. */
/* A SWIM instance of config c (capturing what it sends) that has heard
 * from B (0xB) that B and C (0xC) are alive: a view of 3. e: their entries. */
static rumor_swim_t *with_b_and_c(const rumor_swim_config_t *c, ent_t e[2])
{
    rumor_swim_t *sw = NULL;
    CHECK_OK(rumor_swim_create(c, capture, NULL, &sw));
    if (!sw)
        return NULL;
    e[0] = (ent_t){ 0xB, 1, 0, RUMOR_SWIM_ALIVE, "tcp://10.8.0.2:1" };
    e[1] = (ent_t){ 0xC, 1, 0, RUMOR_SWIM_ALIVE, "tcp://10.8.0.3:1" };
    uint8_t b[256];
    size_t len = mk_body(b, 0, 2, e, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 0, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_view(sw, NULL, 0) == 3);
    return sw;
}

static void test_timers(void)
{
    rumor_swim_config_t c = { 0 };
    c.self_id = 0xA;
    c.incarnation = 1;
    c.self_endpoint = "tcp://10.8.0.1:1";
    c.gossip_interval = -1; /* no gossip rounds: only the probe's messages */
    c.sync_every = -1;
    uint8_t b[256];
    ent_t e[2];
    size_t len;
    rumor_swim_t *sw = with_b_and_c(&c, e);
    if (!sw)
        return;

    /* t = 0: probe one of B, C */
    cap_n = 0;
    CHECK(rumor_swim_tick(sw, 0) == 0);
    CHECK(cap_n == 1 && cap_type == RUMOR_WIRE_PROBE && (cap_to == 0xB || cap_to == 0xC));
    CHECK(rumor_swim_next_deadline(sw) == 0.25); /* the direct ACK's deadline */
    uint64_t t1 = cap_to;
    rumor_swim_heard(sw, 0.1, t1, 1); /* proof of life: the probe is answered */
    CHECK(rumor_swim_next_deadline(sw) == 0.5);
    cap_n = 0;
    CHECK(rumor_swim_tick(sw, 0.5) == 0); /* next period: the other member */
    CHECK(cap_n == 1 && cap_type == RUMOR_WIRE_PROBE && cap_to != t1);
    uint64_t t2 = cap_to, helper = t1;
    CHECK(rumor_swim_find(sw, t1)->state == RUMOR_SWIM_ALIVE);
    /* no ACK by 0.75: the other member is asked to probe t2 */
    cap_n = 0;
    CHECK(rumor_swim_tick(sw, 0.75) == 0);
    CHECK(cap_n == 1 && cap_type == RUMOR_WIRE_PROBE_REQ && cap_to == helper);
    CHECK(cap_len > 4 + 9 && cap_buf[4] == (uint8_t)t2); /* the target's id comes first */
    /* no ACK by the end of the interval: t2 is suspected (and from here on
     * t1 answers its probes at once) */
    ent_t me1 = e[t1 == 0xB ? 0 : 1];
    size_t len1 = mk_body(b, 0, 1, &me1, 1, 0, NULL);
    tick_answering(sw, 1.0, t1, b, len1);
    const rumor_swim_member_t *m = rumor_swim_find(sw, t2);
    CHECK(m && m->state == RUMOR_SWIM_SUSPECT && m->since == 1.0);
    CHECK(rumor_swim_view(sw, NULL, 0) == 3);
    uint64_t v = rumor_swim_view_version(sw);
    /* a view of 3: suspicion timeout 5 * 1 * 0.5 = 2.5 s; tick at every
     * deadline up to just before it */
    double now = 1.0;
    while (now < 3.4) {
        double d = rumor_swim_next_deadline(sw);
        CHECK(d > now);
        now = d < 3.4 ? d : 3.4;
        tick_answering(sw, now, t1, b, len1);
    }
    CHECK(rumor_swim_find(sw, t1)->state == RUMOR_SWIM_ALIVE);
    CHECK(rumor_swim_find(sw, t2)->state == RUMOR_SWIM_SUSPECT);
    CHECK(rumor_swim_next_deadline(sw) <= 3.5);
    CHECK(rumor_swim_tick(sw, 3.5) == 0);
    CHECK(rumor_swim_find(sw, t2)->state == RUMOR_SWIM_DEAD);
    CHECK(rumor_swim_view(sw, NULL, 0) == 2);
    CHECK(rumor_swim_view_version(sw) == v + 1);
    rumor_swim_stats_t st;
    rumor_swim_stats(sw, &st);
    CHECK(st.declared_dead == 1 && st.suspected == 1 && st.probe_reqs >= 1 &&
          st.acks_direct >= 2);
    rumor_swim_destroy(&sw);

    /* a table of 4: tombstones make room first, and it never grows past 4 */
    c.max_members = 4;
    CHECK_OK(rumor_swim_create(&c, capture, NULL, &sw));
    if (!sw)
        return;
    for (uint64_t id = 0x10; id < 0x20; id++) {
        ent_t x[2] = { { 0xB, 1, 0, RUMOR_SWIM_ALIVE, "tcp://10.8.0.2:1" },
                       { id, 1, 0, id & 1 ? RUMOR_SWIM_LEFT : RUMOR_SWIM_ALIVE, "tcp://h:1" } };
        len = mk_body(b, 0, 2, x, 2, 0, NULL);
        CHECK(rumor_swim_on_message(sw, 0, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    }
    CHECK(rumor_swim_view(sw, NULL, 0) == 4);
    CHECK(rumor_swim_find(sw, 0xA) && rumor_swim_find(sw, 0xB));
    rumor_swim_destroy(&sw);
}

/* The earliest member timer is kept as a lower bound, not found by a scan:
 * next_deadline must still name a suspicion's and a tombstone's time
 * exactly, a stale bound (the suspect refuted) must cost one early tick
 * and no state change, and expiry must happen at the named time. */
static void test_timer_bound(void)
{
    rumor_swim_config_t c = clock_config();
    c.probe_interval = 10;
    c.probe_timeout = 1;
    c.suspicion_timeout = 2;
    c.tombstone_timeout = 3;
    uint8_t b[256];
    ent_t e[2];
    size_t len;
    rumor_swim_t *sw = with_b_and_c(&c, e);
    if (!sw)
        return;
    CHECK(rumor_swim_tick(sw, 0) == 0);
    rumor_swim_heard(sw, 0.1, cap_to, 1); /* the probe is answered */
    CHECK(rumor_swim_next_deadline(sw) == 10);

    /* B says C is suspect: C's deadline is 0.2 + 2 */
    e[1].state = RUMOR_SWIM_SUSPECT;
    len = mk_body(b, 0, 2, e, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 0.2, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0xC)->state == RUMOR_SWIM_SUSPECT);
    CHECK(rumor_swim_next_deadline(sw) == 0.2 + 2);

    /* C refutes: the bound is stale; its tick changes nothing and is exact after */
    ent_t cr = { 0xC, 1, 1, RUMOR_SWIM_ALIVE, "tcp://10.8.0.3:1" };
    len = mk_body(b, 0, 1, &cr, 1, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 0.3, 0xC, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0xC)->state == RUMOR_SWIM_ALIVE);
    double d = rumor_swim_next_deadline(sw);
    CHECK(d > 0.3 && d <= 2.2);
    uint64_t v = rumor_swim_view_version(sw);
    CHECK(rumor_swim_tick(sw, d) == 0);
    CHECK(rumor_swim_view_version(sw) == v && rumor_swim_view(sw, NULL, 0) == 3);
    CHECK(rumor_swim_next_deadline(sw) == 10);

    /* suspected again at 3: dead at exactly 5, forgotten at exactly 8 */
    ent_t cs[2] = { e[0], { 0xC, 1, 1, RUMOR_SWIM_SUSPECT, "tcp://10.8.0.3:1" } };
    len = mk_body(b, 0, 2, cs, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 3, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_next_deadline(sw) == 5);
    CHECK(rumor_swim_tick(sw, 4.999) == 0);
    CHECK(rumor_swim_find(sw, 0xC)->state == RUMOR_SWIM_SUSPECT);
    CHECK(rumor_swim_tick(sw, 5) == 0);
    CHECK(rumor_swim_find(sw, 0xC)->state == RUMOR_SWIM_DEAD);
    CHECK(rumor_swim_next_deadline(sw) == 5 + 3);
    CHECK(rumor_swim_tick(sw, 8) == 0);
    CHECK(rumor_swim_find(sw, 0xC) == NULL);
    CHECK(rumor_swim_next_deadline(sw) == 10);
    rumor_swim_stats_t st;
    rumor_swim_stats(sw, &st);
    CHECK(st.declared_dead == 1);
    rumor_swim_destroy(&sw);
}

/* A body from `from` (entry 0) carrying member x's record as SUSPECT,
 * named as suspected by `by` (0: the suspecter not said, as before
 * Lifeguard's confirmations); flags as in mk_body. */
static size_t mk_suspect(uint8_t *b, int flags, const ent_t *from, ent_t x, uint64_t by)
{
    x.state = RUMOR_SWIM_SUSPECT;
    ent_t e[2] = { *from, x };
    size_t p = mk_body(b, flags, 2, e, 2, 0, NULL);
    if (by) {
        b[4 + 22 + strlen(from->ep) + 20] |= 0x04; /* the second entry's state byte */
        p += put_le(b + p, by, 8);
    }
    return p;
}

/* The suspecter that member x's entry names in a captured body (0: none;
 * ~0: x is not in it). */
static uint64_t named_suspecter(uint64_t x)
{
    size_t p = 4;
    int count = cap_buf[2] | cap_buf[3] << 8;
    for (int i = 0; i < count && p + 22 <= cap_len; i++) {
        uint64_t id = 0, by = 0;
        for (int k = 7; k >= 0; k--)
            id = id << 8 | cap_buf[p + k];
        uint8_t st = cap_buf[p + 20];
        p += 22 + cap_buf[p + 21];
        if (st & 0x80)
            p += 1 + cap_buf[p];
        if (st & 0x04) {
            for (int k = 7; k >= 0; k--)
                by = by << 8 | cap_buf[p + k];
            p += 8;
        }
        if (id == x)
            return by;
    }
    return ~0ull;
}

/* Lifeguard's dynamic suspicion, by the clock: with base timeout 2 s,
 * max_mult 6 (12 s) and 3 confirmations, a suspicion that B alone raised
 * lasts 12 s; each other suspecter (counted once, whoever relays it) cuts
 * it to 12 - 10 log(C + 1) / log 4: 7 s, 4.075 s, then the base 2 s from
 * the suspicion's start (in a view of 17). The record passed on names the
 * latest suspecter; a new suspicion (after a refutation) starts over; a
 * death met in a full state is a suspicion at the base timeout; a view
 * under 16 keeps the fixed timeout; malformed suspecters are rejected
 * and change nothing. */
static void test_dynamic_suspicion(void)
{
    rumor_swim_config_t c = clock_config();
    c.probe_interval = 100;
    c.probe_timeout = 1;
    c.suspicion_timeout = 2;
    rumor_swim_t *sw = NULL;
    CHECK_OK(rumor_swim_create(&c, capture, NULL, &sw));
    if (!sw)
        return;
    ent_t e[5];
    const char *eps[5] = { "tcp://10.8.0.2:1", "tcp://10.8.0.3:1", "tcp://10.8.0.4:1",
                           "tcp://10.8.0.5:1", "tcp://10.8.0.6:1" };
    for (int i = 0; i < 5; i++)
        e[i] = (ent_t){ 0xB + (uint64_t)i, 1, 0, RUMOR_SWIM_ALIVE, eps[i] };
    /* and 11 more members: a view of 17 (dynamic from 16) */
    ent_t all[16];
    for (int i = 0; i < 16; i++)
        all[i] = i < 5 ? e[i] : (ent_t){ 0x20 + (uint64_t)i, 1, 0, RUMOR_SWIM_ALIVE, eps[i % 5] };
    uint8_t b[1024];
    size_t len = mk_body(b, 0, 16, all, 16, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 0, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_view(sw, NULL, 0) == 17);
    CHECK(rumor_swim_tick(sw, 0) == 0);
    rumor_swim_heard(sw, 0.1, cap_to, 1);
    CHECK(rumor_swim_next_deadline(sw) == 100);
    const ent_t *B = &e[0], *C = &e[1], *D = &e[2], *E = &e[3], *F = &e[4];

    /* B suspects C at t = 1: 12 s */
    len = mk_suspect(b, 0, B, *C, 0xB);
    CHECK(rumor_swim_on_message(sw, 1, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0xC)->state == RUMOR_SWIM_SUSPECT);
    CHECK(rumor_swim_find(sw, 0xC)->by == 0xB);
    CHECKF(fabs(rumor_swim_next_deadline(sw) - 13) < 1e-9, "deadline %.4f, expected 13",
           rumor_swim_next_deadline(sw));
    /* B's suspicion again, and relayed by E: not a confirmation */
    CHECK(rumor_swim_on_message(sw, 1.5, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    len = mk_suspect(b, 0, E, *C, 0xB);
    CHECK(rumor_swim_on_message(sw, 1.5, 0xE, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    /* a suspicion that names no suspecter is no confirmation either */
    len = mk_suspect(b, 0, E, *C, 0);
    CHECK(rumor_swim_on_message(sw, 1.6, 0xE, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(fabs(rumor_swim_next_deadline(sw) - 13) < 1e-9);
    rumor_swim_stats_t st;
    rumor_swim_stats(sw, &st);
    CHECK(st.confirmations == 0);

    /* D's own suspicion, relayed by B at t = 2: 1 + 7 */
    len = mk_suspect(b, 0, B, *C, 0xD);
    CHECK(rumor_swim_on_message(sw, 2, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECKF(fabs(rumor_swim_next_deadline(sw) - 8) < 1e-9, "deadline %.4f after 1 confirmation, "
           "expected 8", rumor_swim_next_deadline(sw));
    CHECK(rumor_swim_find(sw, 0xC)->by == 0xD);
    /* passed on naming D: A's answer to a probe from F carries it */
    len = mk_body(b, 0, 1, F, 1, 0, NULL);
    cap_n = 0;
    CHECK(rumor_swim_on_message(sw, 2.1, 0xF, 1, RUMOR_WIRE_PROBE, 7, b, len) == 0);
    CHECK(cap_n == 1 && cap_type == RUMOR_WIRE_ACK);
    CHECKF(named_suspecter(0xC) == 0xD, "the ACK names %llx as C's suspecter",
           (unsigned long long)named_suspecter(0xC));
    /* E's at t = 3: 1 + 12 - 10 log 3 / log 4 */
    len = mk_suspect(b, 0, E, *C, 0xE);
    CHECK(rumor_swim_on_message(sw, 3, 0xE, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    double want = 1 + 12 - 10 * log(3.0) / log(4.0);
    CHECKF(fabs(rumor_swim_next_deadline(sw) - want) < 1e-9, "deadline %.4f after 2, "
           "expected %.4f", rumor_swim_next_deadline(sw), want);
    CHECK(rumor_swim_tick(sw, 3.5) == 0);
    CHECK(rumor_swim_find(sw, 0xC)->state == RUMOR_SWIM_SUSPECT);
    /* F's at t = 3.5: the base timeout from t = 1 has passed: dead now */
    len = mk_suspect(b, 0, F, *C, 0xF);
    CHECK(rumor_swim_on_message(sw, 3.5, 0xF, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_next_deadline(sw) <= 3.5);
    CHECK(rumor_swim_tick(sw, 3.5) == 0);
    CHECK(rumor_swim_find(sw, 0xC)->state == RUMOR_SWIM_DEAD);
    rumor_swim_stats(sw, &st);
    CHECK(st.confirmations == 3 && st.declared_dead == 1);

    /* D is suspected by B at t = 4, then refutes; suspected again by B at
     * t = 5 with refutation 1: the earlier suspicion's confirmers are gone */
    len = mk_suspect(b, 0, B, *D, 0xB);
    CHECK(rumor_swim_on_message(sw, 4, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    len = mk_suspect(b, 0, E, *D, 0xE);
    CHECK(rumor_swim_on_message(sw, 4, 0xE, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    ent_t D1 = *D;
    D1.ref = 1;
    len = mk_body(b, 0, 1, &D1, 1, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 4.5, 0xD, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0xD)->state == RUMOR_SWIM_ALIVE);
    len = mk_suspect(b, 0, B, D1, 0xB);
    CHECK(rumor_swim_on_message(sw, 5, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    len = mk_suspect(b, 0, F, D1, 0xE); /* E again, for this version: counted */
    CHECK(rumor_swim_on_message(sw, 5, 0xF, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    double d = rumor_swim_next_deadline(sw);
    if (d < 12) { /* the refuted suspicion's stale bound (test_timer_bound): one early tick */
        CHECK(fabs(d - 11) < 1e-9);
        CHECK(rumor_swim_tick(sw, d) == 0);
        CHECK(rumor_swim_find(sw, 0xD)->state == RUMOR_SWIM_SUSPECT);
        d = rumor_swim_next_deadline(sw);
    }
    CHECKF(fabs(d - 12) < 1e-9, "deadline %.4f for a new suspicion with 1 confirmation, "
           "expected 5 + 7", d);

    /* a death in F's full state (t = 11.5): the base timeout from the
     * suspicion's start, 5 + 2, has passed */
    ent_t Ddead = D1;
    Ddead.state = RUMOR_SWIM_DEAD;
    ent_t fs[2] = { *F, Ddead };
    len = mk_body(b, RUMOR_SWIM_F_STATE, 2, fs, 2, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 11.5, 0xF, 1, RUMOR_WIRE_ACK, 3, b, len) == 0);
    CHECK(rumor_swim_find(sw, 0xD)->state == RUMOR_SWIM_SUSPECT);
    CHECKF(fabs(rumor_swim_next_deadline(sw) - 7) < 1e-9, "deadline %.4f after a death in a "
           "full state, expected 5 + 2", rumor_swim_next_deadline(sw));
    CHECK(rumor_swim_tick(sw, 11.5) == 0);
    CHECK(rumor_swim_find(sw, 0xD)->state == RUMOR_SWIM_DEAD);

    /* malformed suspecters: rejected, nothing changes */
    uint64_t v = rumor_swim_view_version(sw);
    rumor_swim_stats(sw, &st);
    uint64_t conf = st.confirmations;
    len = mk_suspect(b, 0, B, *E, 0xE); /* E as its own suspecter */
    CHECK(rumor_swim_on_message(sw, 11.6, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) < 0);
    len = mk_suspect(b, 0, B, *E, 0xB);
    b[4 + 22 + strlen(B->ep) + 20] = RUMOR_SWIM_ALIVE | 0x04; /* a suspecter on an alive */
    CHECK(rumor_swim_on_message(sw, 11.6, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) < 0);
    len = mk_suspect(b, 0, B, *E, 0xB);
    CHECK(rumor_swim_on_message(sw, 11.6, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len - 3) < 0);
    len = mk_suspect(b, 0, B, *E, 0);
    b[4 + 22 + strlen(B->ep) + 20] |= 0x04; /* says a suspecter follows; none does */
    CHECK(rumor_swim_on_message(sw, 11.6, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) < 0);
    CHECK(rumor_swim_find(sw, 0xE)->state == RUMOR_SWIM_ALIVE);
    CHECK(rumor_swim_view_version(sw) == v);
    rumor_swim_stats(sw, &st);
    CHECK(st.confirmations == conf);
    rumor_swim_destroy(&sw);

    /* a view of 4 (under 16; 2 members could confirm, fewer than 3): the fixed 2 s */
    CHECK_OK(rumor_swim_create(&c, capture, NULL, &sw));
    if (!sw)
        return;
    len = mk_body(b, 0, 3, e, 3, 0, NULL);
    CHECK(rumor_swim_on_message(sw, 0, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(rumor_swim_tick(sw, 0) == 0);
    rumor_swim_heard(sw, 0.1, cap_to, 1);
    len = mk_suspect(b, 0, B, *C, 0xB);
    CHECK(rumor_swim_on_message(sw, 1, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(fabs(rumor_swim_next_deadline(sw) - 3) < 1e-9);
    /* D suspects C too: nothing to shorten, so not counted nor passed on */
    len = mk_suspect(b, 0, B, *C, 0xD);
    CHECK(rumor_swim_on_message(sw, 1.5, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    CHECK(fabs(rumor_swim_next_deadline(sw) - 3) < 1e-9);
    rumor_swim_stats(sw, &st);
    CHECKF(st.confirmations == 0, "%llu confirmation(s) counted in a view of 4",
           (unsigned long long)st.confirmations);
    rumor_swim_destroy(&sw);

    /* out of range */
    c.suspicion_max_mult = 0.5;
    CHECK(rumor_swim_create(&c, capture, NULL, &sw) < 0 && !sw);
    c.suspicion_max_mult = 0;
    c.suspicion_confirm = 99;
    CHECK(rumor_swim_create(&c, capture, NULL, &sw) < 0 && !sw);
}

/* Local health by the clock: a probe that fails while no other member is
 * heard raises the multiplier to 1, so the next probe waits twice as long
 * for its direct answer; a probe answered by another message from its
 * target (rumor_swim_heard, as PARAMS do) lowers it again, as an ACK does. */
static void test_heard_health(void)
{
    rumor_swim_config_t c = clock_config();
    ent_t e[2];
    rumor_swim_t *sw = with_b_and_c(&c, e);
    if (!sw)
        return;
    cap_n = 0;
    CHECK(rumor_swim_tick(sw, 0) == 0);
    CHECK(cap_n == 1 && cap_log[0].type == RUMOR_WIRE_PROBE);
    CHECK(rumor_swim_tick(sw, 0.25) == 0); /* helpers asked */
    cap_n = 0;
    CHECK(rumor_swim_tick(sw, 0.5) == 0); /* failed, nobody heard; the next probe */
    rumor_swim_stats_t st;
    rumor_swim_stats(sw, &st);
    CHECKF(st.health == 1, "health %d after a probe failed in silence", st.health);
    CHECK(cap_n >= 1 && cap_log[cap_n - 1].type == RUMOR_WIRE_PROBE);
    CHECKF(fabs(rumor_swim_next_deadline(sw) - 1.0) < 1e-9, "next deadline %.3f, expected the "
           "direct answer's at 0.5 + 2 * 0.25", rumor_swim_next_deadline(sw));
    rumor_swim_heard(sw, 0.6, cap_log[cap_n - 1].to, 1);
    rumor_swim_stats(sw, &st);
    CHECKF(st.health == 0, "health %d after the probe was answered", st.health);
    rumor_swim_destroy(&sw);
}

/* Gossip targets in a large table (drawn by rejection, not a scan): never
 * self, never a tombstone, distinct within a round, and every live member
 * is reached. */
static int g_hits[0x400], g_round_dup, g_bad;
static uint64_t g_round[8];
static int g_nround;
static int count_gossip(void *ctx, uint64_t to, const char *ep, int type, uint32_t seq,
                        const void *body, size_t len)
{
    (void)ctx, (void)ep, (void)body, (void)len;
    if (type != RUMOR_WIRE_ACK || seq)
        return 0;
    for (int k = 0; k < g_nround; k++)
        g_round_dup += g_round[k] == to;
    if (g_nround < 8)
        g_round[g_nround++] = to;
    if (to == 0xB)
        return 0;
    if (to < 0x100 || to >= 0x400 || (to & 1))
        g_bad++; /* self, a tombstone or a stranger */
    else
        g_hits[to]++;
    return 0;
}

static void test_pick_large(void)
{
    rumor_swim_config_t c = { 0 };
    c.self_id = 0xA;
    c.incarnation = 1;
    c.self_endpoint = "tcp://10.8.0.1:1";
    c.probe_interval = 1000;
    c.gossip_interval = 0.1;
    c.sync_every = -1;
    c.reprobe_every = -1;
    rumor_swim_t *sw = NULL;
    CHECK_OK(rumor_swim_create(&c, count_gossip, NULL, &sw));
    if (!sw)
        return;
    static char eps[0x300][32];
    uint8_t b[1024];
    /* 0x100..0x2ff: even ids alive, odd ids left (tombstones) */
    for (uint64_t id = 0x100; id < 0x300; id++) {
        snprintf(eps[id - 0x100], sizeof eps[0], "tcp://10.9.%u.%u:1", (unsigned)(id >> 8),
                 (unsigned)(id & 0xff));
        ent_t x[2] = { { 0xB, 1, 0, RUMOR_SWIM_ALIVE, "tcp://10.8.0.2:1" },
                       { id, 1, 0, id & 1 ? RUMOR_SWIM_LEFT : RUMOR_SWIM_ALIVE, eps[id - 0x100] } };
        size_t len = mk_body(b, 0, 2, x, 2, 0, NULL);
        CHECK(rumor_swim_on_message(sw, 0, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
    }
    CHECK(rumor_swim_view(sw, NULL, 0) == 2 + 0x100);
    memset(g_hits, 0, sizeof g_hits);
    g_round_dup = g_bad = 0;
    CHECK(rumor_swim_tick(sw, 0) == 0);
    int rounds = 0, short_rounds = 0; /* ticks for tombstones send nothing */
    double now = 0;
    for (int r = 0; r < 800; r++) {
        /* B tells of a member that left: an update to spread, so every
         * gossip round has something to send */
        ent_t x[2] = { { 0xB, 1, 0, RUMOR_SWIM_ALIVE, "tcp://10.8.0.2:1" },
                       { 0x1000 + (uint64_t)r, 1, 0, RUMOR_SWIM_LEFT, "tcp://10.8.9.9:1" } };
        size_t len = mk_body(b, 0, 2, x, 2, 0, NULL);
        CHECK(rumor_swim_on_message(sw, now, 0xB, 1, RUMOR_WIRE_ACK, 0, b, len) == 0);
        now = rumor_swim_next_deadline(sw);
        g_nround = 0;
        CHECK(rumor_swim_tick(sw, now) == 0);
        rounds += g_nround == 3;
        short_rounds += g_nround == 1 || g_nround == 2;
    }
    int missed = 0;
    for (uint64_t id = 0x100; id < 0x300; id += 2)
        missed += g_hits[id] == 0;
    CHECK(rounds >= 600 && short_rounds == 0);
    CHECK(g_round_dup == 0 && g_bad == 0);
    CHECK(missed == 0);
    fprintf(stderr, "pick: %d gossip rounds of 3, %d to self, tombstones or strangers, "
                    "%d duplicates in a round, %d live members never picked\n",
            rounds, g_bad, g_round_dup, missed);
    rumor_swim_destroy(&sw);
}

/* ------------------------------------------------------------------ */

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    double t0 = wall();
    test_bodies();
    test_topology();
    test_chord();
    test_join();
    test_crash();
    test_new_endpoint();
    test_loss();
    test_health();
    test_freeze_restart();
    test_partition();
    test_partition_forgotten();
    test_leave();
    test_timers();
    test_timer_bound();
    test_dynamic_suspicion();
    test_heard_health();
    test_pick_large();
    test_big_state();
    fprintf(stderr, "test_swim: %.1f s wall\n", wall() - t0);
    return tu_finish("test_swim");
}

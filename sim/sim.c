/* rumor-sim's engine (sim.h): an event heap over simulated time, peers that
 * each own a rumor_swim_t, a network model, churn, and the measurements,
 * taken by watching the SWIM tables as events change them (sim_watch.c). */
#include "sim_int.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "rng.h"

/* ------------------------------------------------------------ the heap */

static int ev_less(const sim_event_t *a, const sim_event_t *b)
{
    return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static int push_ev(sim_t *s, double at, int kind, int peer, long arg, sim_msg_t *msg)
{
    if (s->nheap == s->capheap) {
        size_t cap = s->capheap ? s->capheap * 2 : 4096;
        sim_event_t *h = realloc(s->heap, cap * sizeof *h);
        if (!h)
            return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory for %zu events", cap);
        s->heap = h;
        s->capheap = cap;
    }
    sim_event_t e = {
        .at = at, .order = s->order++, .kind = kind, .peer = peer, .arg = arg, .msg = msg
    };
    size_t i = s->nheap++;
    while (i > 0) { /* sift up */
        size_t p = (i - 1) / 2;
        if (!ev_less(&e, &s->heap[p]))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = e;
    return 0;
}

int sim_push(sim_t *s, double at, int kind, int peer, sim_msg_t *msg)
{
    return push_ev(s, at, kind, peer, 0, msg);
}

int sim_push_arg(sim_t *s, double at, int kind, int peer, long arg)
{
    return push_ev(s, at, kind, peer, arg, NULL);
}

static sim_event_t pop(sim_t *s)
{
    sim_event_t top = s->heap[0], last = s->heap[--s->nheap];
    size_t i = 0, n = s->nheap;
    for (;;) { /* sift down */
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_less(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!ev_less(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n)
        s->heap[i] = last;
    return top;
}

/* ------------------------------------------------ maps: id and endpoint */

static uint64_t ep_hash(const char *ep)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, then mixed */
    for (; *ep; ep++)
        h = (h ^ (unsigned char)*ep) * 1099511628211ull;
    return rumor_mix64(h);
}

static int map_grow(sim_map_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    sim_map_t n = { .cap = cap, .key = malloc(cap * sizeof *n.key), .val = malloc(cap * sizeof *n.val) };
    if (!n.key || !n.val) {
        free(n.key);
        free(n.val);
        return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory for a map");
    }
    for (size_t i = 0; i < cap; i++)
        n.val[i] = -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->val[i] >= 0) {
            size_t j = rumor_mix64(m->key[i]) & (cap - 1);
            while (n.val[j] >= 0)
                j = (j + 1) & (cap - 1);
            n.key[j] = m->key[i];
            n.val[j] = m->val[i];
        }
    n.n = m->n;
    free(m->key);
    free(m->val);
    *m = n;
    return 0;
}

/* Keys never leave a map: endpoints and ids are never reused. */
static int map_put(sim_map_t *m, uint64_t key, int val)
{
    if (2 * (m->n + 1) > m->cap)
        RUMOR_CHECK(map_grow(m));
    size_t j = rumor_mix64(key) & (m->cap - 1);
    while (m->val[j] >= 0)
        j = (j + 1) & (m->cap - 1);
    m->key[j] = key;
    m->val[j] = val;
    m->n++;
    return 0;
}

/* The peers under `key`, in turn: *pos starts at 0; -1 when no more. */
static int map_next(const sim_map_t *m, uint64_t key, size_t *pos)
{
    if (!m->cap)
        return -1;
    size_t j = *pos ? *pos : (rumor_mix64(key) & (m->cap - 1)) + 1;
    for (; m->val[(j - 1) & (m->cap - 1)] >= 0; j++)
        if (m->key[(j - 1) & (m->cap - 1)] == key) {
            *pos = j + 1;
            return m->val[(j - 1) & (m->cap - 1)];
        }
    return -1;
}

double sim_steady_from(const sim_t *s) { return s->t_churn + 5; }

double sim_steady_end(const sim_t *s)
{
    return s->cfg.burst_at >= 0 && s->cfg.burst_n > 0 ? s->cfg.burst_at : s->t_end;
}

/* SWIM messages a live peer sends a second in the steady window [5 s
 * after the last initial join, sim_steady_end): the joins' storm left out,
 * as bench_scale measures real peers. */
static void steady_rate(sim_t *s)
{
    double w0 = sim_steady_from(s), w1 = sim_steady_end(s), peer_s = 0;
    for (size_t i = 0; i < s->npeers && w1 > w0; i++) {
        const sim_peer_t *p = s->peers[i];
        double a = p->born > w0 ? p->born : w0, b = p->alive ? w1 : p->died;
        if (b > w1)
            b = w1;
        if (b > a)
            peer_s += b - a;
    }
    s->res.msg_rate_steady = peer_s > 0 ? (double)s->win_msgs / peer_s : NAN;
}

int sim_peer_by_id(const sim_t *s, uint64_t id)
{
    size_t pos = 0;
    return map_next(&s->by_id, id, &pos);
}

static int peer_by_endpoint(const sim_t *s, const char *ep)
{
    size_t pos = 0;
    int i;
    while ((i = map_next(&s->by_ep, ep_hash(ep), &pos)) >= 0)
        if (!strcmp(s->peers[i]->ep, ep)) /* a 64-bit hash may still collide */
            return i;
    return -1;
}

/* ------------------------------------------------------------ the network */

double sim_unit(sim_t *s)
{
    return rumor_rand_unit(&s->rng);
}

static double expo(sim_t *s, double mean)
{
    return -mean * log(1.0 - sim_unit(s));
}

/* The network: the message leaves the sender's uplink after those before
 * it (one message at a time, at its upload rate), crosses the one-way
 * latency of the two ends, and is received after those queued at the
 * receiver's downlink (reserved in send order, a simplification). */
int sim_transmit(sim_t *s, sim_peer_t *p, int to, int type, uint32_t seq, const void *body,
                 size_t len, double wire)
{
    double start = p->send_free > s->now ? p->send_free : s->now;
    p->send_free = start + (p->up_bps > 0 ? wire * 8 / p->up_bps : 0);
    sim_peer_t *q = s->peers[to];
    if (!q->alive) {
        s->res.to_dead++;
        return 0;
    }
    if (s->cfg.loss > 0 && sim_unit(s) < s->cfg.loss) {
        s->res.lost++;
        return 0;
    }
    double lat = (p->lat + q->lat) / 2;
    if (s->cfg.jitter_ms > 0)
        lat += (2 * sim_unit(s) - 1) * s->cfg.jitter_ms * 1e-3;
    double at = p->send_free + (lat > 0 ? lat : 0);
    if (q->down_bps > 0) {
        at = (q->recv_free > at ? q->recv_free : at) + wire * 8 / q->down_bps;
        q->recv_free = at;
    }
    sim_msg_t *m = malloc(sizeof *m + len);
    if (!m)
        return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory for a message");
    m->sender = p->id;
    m->type = type;
    m->seq = seq;
    m->len = len;
    if (len)
        memcpy(m->body, body, len);
    if (sim_push(s, at, SIM_DELIVER, to, m) < 0) {
        free(m);
        return -1;
    }
    return 0;
}

/* SWIM's send callback: counted as SWIM's traffic, then transmitted. */
static int on_send(void *ctx, uint64_t to_id, const char *endpoint, int type, uint32_t seq,
                   const void *body, size_t len)
{
    sim_peer_t *p = ctx;
    sim_t *s = p->sim;
    double bytes = (double)(RUMOR_WIRE_HDR_LEN + len);
    p->sent++;
    p->bytes += (uint64_t)bytes;
    s->res.messages++;
    s->res.bytes += (uint64_t)bytes;
    if (s->now >= sim_steady_from(s) && s->now < sim_steady_end(s))
        s->win_msgs++;
    int to = peer_by_endpoint(s, endpoint);
    if (to < 0) {
        s->res.unknown_endpoint++;
        return 0;
    }
    if (to_id && to_id != s->peers[to]->id) {
        s->res.to_dead++;
        return 0;
    }
    return sim_transmit(s, p, to, type, seq, body, len, bytes);
}

/* Makes sure a tick is scheduled no later than the instance's deadline.
 * An earlier tick than needed is harmless (SWIM runs what is due), so a
 * deadline that moved later leaves the scheduled one in place; a stale
 * tick event (tick_at moved) is skipped when it pops. */
static int schedule_tick(sim_t *s, sim_peer_t *p)
{
    double d = rumor_swim_next_deadline(p->sw);
    if (d <= s->now)
        d = s->now;
    if (p->tick_at >= 0 && p->tick_at <= d)
        return 0;
    p->tick_at = d;
    return sim_push(s, d, SIM_TICK, p->idx, NULL);
}

/* ------------------------------------------------------------ churn */

static int alive_add(sim_t *s, sim_peer_t *p)
{
    if (s->nalive == s->capalive) {
        size_t cap = s->capalive ? s->capalive * 2 : 1024;
        int *a = realloc(s->alive, cap * sizeof *a);
        if (!a)
            return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory");
        s->alive = a;
        s->capalive = cap;
    }
    p->alive_pos = (int)s->nalive;
    s->alive[s->nalive++] = p->idx;
    return 0;
}

static void alive_remove(sim_t *s, sim_peer_t *p)
{
    int last = s->alive[--s->nalive];
    s->alive[p->alive_pos] = last;
    s->peers[last]->alive_pos = p->alive_pos;
    p->alive_pos = -1;
}

/* A new peer starts now, bootstrapping from one random live peer (none for
 * the first). Its identity and link come from the simulation's generator. */
static int peer_start(sim_t *s)
{
    if (s->npeers == s->cappeers) {
        size_t cap = s->cappeers ? s->cappeers * 2 : 1024;
        sim_peer_t **a = realloc(s->peers, cap * sizeof *a);
        if (!a)
            return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory");
        s->peers = a;
        s->cappeers = cap;
    }
    sim_peer_t *p = calloc(1, sizeof *p);
    if (!p)
        return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory");
    int idx = (int)s->npeers;
    s->peers[s->npeers++] = p;
    p->sim = s;
    p->idx = idx;
    do
        p->id = rumor_splitmix64(&s->rng);
    while (p->id == 0 || sim_peer_by_id(s, p->id) >= 0);
    unsigned a = (unsigned)idx + 1; /* 10.0.0.1 upwards: unique per peer, never reused */
    snprintf(p->ep, sizeof p->ep, "tcp://10.%u.%u.%u:7000", (a >> 16) & 255, (a >> 8) & 255,
             a & 255);
    p->born = s->now;
    p->died = -1;
    p->tick_at = -1;
    p->vseen = UINT64_MAX;
    p->watch_slot = -1;
    p->join_item = -1;
    if (s->cfg.nlinks > 0) {
        const sim_link_t *l = &s->cfg.links[rumor_rand_below(&s->rng, (uint64_t)s->cfg.nlinks)];
        p->up_bps = l->up_mbit * 1e6;
        p->down_bps = l->down_mbit * 1e6;
        p->lat = l->latency_ms * 1e-3;
    } else {
        p->up_bps = s->cfg.rate_mbit * 1e6;
        p->lat = s->cfg.latency_ms * 1e-3;
    }
    /* rumor-peer's own configuration (gossip/mixer_view.c): every tunable
     * left at zero, i.e. swim.h's defaults, incarnation 1 for a first life */
    rumor_swim_config_t sc;
    memset(&sc, 0, sizeof sc);
    sc.self_id = p->id;
    sc.incarnation = 1;
    sc.self_endpoint = p->ep;
    sc.max_members = s->cfg.max_members;
    sc.seed = rumor_splitmix64(&s->rng);
    RUMOR_CHECK(rumor_swim_create(&sc, on_send, p, &p->sw));
    if (s->nalive > 0) {
        int seed = s->alive[rumor_rand_below(&s->rng, s->nalive)];
        RUMOR_CHECK(rumor_swim_add_seed(p->sw, s->peers[seed]->ep));
    }
    RUMOR_CHECK(map_put(&s->by_id, p->id, idx));
    RUMOR_CHECK(map_put(&s->by_ep, ep_hash(p->ep), idx));
    RUMOR_CHECK(alive_add(s, p));
    p->alive = 1;
    s->res.started++;
    if (s->cfg.lifetime_mean > 0) {
        double from = s->now > s->t_churn ? s->now : s->t_churn;
        RUMOR_CHECK(sim_push(s, from + expo(s, s->cfg.lifetime_mean), SIM_DEATH, idx, NULL));
    }
    RUMOR_CHECK(sim_watch_join(s, p));
    if (s->cfg.rounds)
        RUMOR_CHECK(sim_round_start(s, p));
    return schedule_tick(s, p);
}

/* The peer stops: silently (SIGKILL) or, for a share of departures, after
 * announcing that it leaves. Its instance is freed at once; messages in
 * flight to it are dropped on arrival. */
static int peer_stop(sim_t *s, sim_peer_t *p, int may_leave)
{
    int leave = may_leave && s->cfg.leave_share > 0 && sim_unit(s) < s->cfg.leave_share;
    if (leave && rumor_swim_leave(p->sw, s->now) < 0)
        rumor_err_clear(); /* already left: nothing to tell */
    rumor_swim_destroy(&p->sw);
    sim_round_stop(s, p);
    p->alive = 0;
    p->died = s->now;
    alive_remove(s, p);
    if (leave)
        s->res.left++;
    else
        s->res.killed++;
    return sim_watch_depart(s, p, leave);
}

static int kill_random(sim_t *s, int replace)
{
    if (s->nalive <= 1)
        return 0; /* keep one peer: a swarm of none has nothing to measure */
    sim_peer_t *p = s->peers[s->alive[rumor_rand_below(&s->rng, s->nalive)]];
    RUMOR_CHECK(peer_stop(s, p, 1));
    return replace ? peer_start(s) : 0;
}

/* ------------------------------------------------------------ the run */

/* SIGINT or SIGTERM ends a long run as --wall-limit does: the figures of
 * what was simulated so far are still printed. */
static volatile sig_atomic_t stop_asked;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_asked = 1;
}

static void progress(sim_t *s)
{
    double w = rumor_now() - s->wall0, done = s->now / s->t_end;
    double eta = done > 0.001 ? w * (1 - done) / done : 0;
    fprintf(stderr, "rumor-sim: t %.1f/%.0f s, %llu events, %zu live, %.0f s wall, ETA %.0f s\n",
            s->now, s->t_end, (unsigned long long)s->res.events, s->nalive, w, eta);
}

static int step(sim_t *s, sim_event_t e)
{
    sim_peer_t *p = e.peer >= 0 ? s->peers[e.peer] : NULL;
    switch (e.kind) {
    case SIM_JOIN:
        return peer_start(s);
    case SIM_TICK:
        if (!p->alive || e.at != p->tick_at)
            return 0;
        p->tick_at = -1;
        RUMOR_CHECK(rumor_swim_tick(p->sw, s->now));
        RUMOR_CHECK(schedule_tick(s, p));
        if (p->tr)
            RUMOR_CHECK(sim_round_seen(s, p));
        return sim_watch_peer(s, p);
    case SIM_DELIVER: {
        sim_msg_t *m = e.msg;
        int rc = 0;
        if (p->alive && m->type == RUMOR_WIRE_PARAMS) {
            /* proof of life, as every accepted message of a member is */
            rumor_swim_heard(p->sw, s->now, m->sender, 1);
            rc = sim_round_params(s, p, m);
            if (rc == 0)
                rc = schedule_tick(s, p);
        } else if (p->alive) {
            /* a rejected message is SWIM's business (counted in its stats) */
            if (rumor_swim_on_message(p->sw, s->now, m->sender, 1, m->type, m->seq,
                                      m->len ? m->body : NULL, m->len) < 0)
                rumor_err_clear();
            rc = schedule_tick(s, p);
            if (rc == 0 && p->tr)
                rc = sim_round_seen(s, p);
            if (rc == 0)
                rc = sim_watch_peer(s, p);
        }
        free(m);
        return rc;
    }
    case SIM_KILL: /* the kill-rate process: a Poisson stream of deaths, each replaced */
        RUMOR_CHECK(kill_random(s, 1));
        return sim_push(s, s->now + expo(s, 60.0 / (s->cfg.kill_rate * s->cfg.peers)), SIM_KILL,
                        -1, NULL);
    case SIM_DEATH: /* a lifetime ran out: replaced */
        if (!p->alive)
            return 0;
        RUMOR_CHECK(peer_stop(s, p, 1));
        return peer_start(s);
    case SIM_KILL_AT:
        return kill_random(s, 0);
    case SIM_BURST: /* bench_scale's churn: killed together, then as many newcomers */
        for (int i = 0; i < s->cfg.burst_n; i++)
            RUMOR_CHECK(kill_random(s, 0));
        for (int i = 0; i < s->cfg.burst_n; i++)
            RUMOR_CHECK(peer_start(s));
        return 0;
    case SIM_SAMPLE:
        RUMOR_CHECK(sim_watch_sample(s));
        return sim_push(s, s->now + s->cfg.sample_every, SIM_SAMPLE, -1, NULL);
    case SIM_TRAIN:
    case SIM_COMPUTED:
    case SIM_DEADLINE:
        return p->alive && p->tr ? sim_round_event(s, p, e.kind, e.arg) : 0;
    }
    return rumor_err_set(RUMOR_ESTATE, "sim: unknown event kind %d", e.kind);
}

static void sim_free(sim_t *s)
{
    for (size_t i = 0; i < s->npeers; i++) {
        rumor_swim_destroy(&s->peers[i]->sw);
        sim_round_free(s->peers[i]);
        free(s->peers[i]);
    }
    free(s->peers);
    for (size_t i = 0; i < s->nheap; i++)
        free(s->heap[i].msg);
    free(s->heap);
    free(s->alive);
    free(s->by_id.key);
    free(s->by_id.val);
    free(s->by_ep.key);
    free(s->by_ep.val);
    sim_watch_free(s);
    free(s->admit);
    free(s->xbar);
}

int sim_run(const sim_config_t *cfg, sim_result_t *res)
{
    sim_t s;
    memset(&s, 0, sizeof s);
    memset(res, 0, sizeof *res);
    s.cfg = *cfg;
    s.rng = cfg->seed ^ 0x73696d756c61746full; /* "simulato": seed 0 is a seed too */
    s.t_churn = cfg->join_over;
    s.t_end = cfg->join_over + cfg->duration;
    s.res.target_s = NAN;
    s.wall0 = rumor_now();
    int rc = 0;
    for (int i = 0; i < cfg->peers && rc == 0; i++)
        rc = sim_push(&s, cfg->peers > 1 ? cfg->join_over * i / (cfg->peers - 1) : 0, SIM_JOIN,
                      -1, NULL);
    if (rc == 0 && cfg->kill_rate > 0 && cfg->lifetime_mean <= 0)
        rc = sim_push(&s, s.t_churn + expo(&s, 60.0 / (cfg->kill_rate * cfg->peers)), SIM_KILL,
                      -1, NULL);
    if (rc == 0 && cfg->kill_at >= 0)
        rc = sim_push(&s, cfg->kill_at, SIM_KILL_AT, -1, NULL);
    if (rc == 0 && cfg->burst_at >= 0 && cfg->burst_n > 0)
        rc = sim_push(&s, cfg->burst_at, SIM_BURST, -1, NULL);
    if (rc == 0)
        rc = sim_push(&s, 0, SIM_SAMPLE, -1, NULL);
    double next_progress = s.wall0 + cfg->progress;
    stop_asked = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    while (rc == 0 && s.nheap && s.heap[0].at <= s.t_end) {
        sim_event_t e = pop(&s);
        s.now = e.at;
        s.res.events++;
        rc = step(&s, e); /* frees a delivered message */
        if ((s.res.events & 4095) != 0)
            continue;
        double w = rumor_now();
        if (cfg->progress > 0 && w >= next_progress) {
            progress(&s);
            next_progress = w + cfg->progress;
        }
        if (stop_asked || (cfg->wall_limit > 0 && w - s.wall0 >= cfg->wall_limit)) {
            s.res.truncated = 1; /* the figures are those of [0, now] */
            s.t_end = s.now;
            break;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    s.now = s.t_end;
    if (rc == 0)
        rc = sim_watch_finish(&s);
    steady_rate(&s);
    if (rc == 0 && cfg->rounds)
        rc = sim_round_finish(&s);
    s.res.t_end = s.t_end;
    s.res.wall_s = rumor_now() - s.wall0;
    s.res.events_per_s = s.res.wall_s > 0 ? (double)s.res.events / s.res.wall_s : 0;
    s.res.peer_rounds_per_wall_s =
        s.res.wall_s > 0 ? (double)s.res.peer_rounds / s.res.wall_s : 0;
    *res = s.res;
    memset(&s.res, 0, sizeof s.res); /* the arrays are the caller's now */
    sim_free(&s);
    if (rc < 0)
        sim_result_free(res);
    return rc;
}

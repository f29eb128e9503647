/* SWIM membership: the failure detector, dissemination, joins and syncs
 * (see swim.h; docs/membership.md specifies the protocol and the body
 * format; the member table is in swim_table.c). Sans-I/O: time comes in
 * through tick and on_message, messages go out through the caller's send
 * callback. */
#include "config.h"

#include "swim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "peerlist.h"
#include "swim_int.h"

static uint32_t next_seq(rumor_swim_t *sw)
{
    if (++sw->seq == 0)
        sw->seq = 1; /* aux 0 on an ACK means "answers nothing": one-way gossip */
    return sw->seq;
}

/* ------------------------------------------------------- the send side */

static void send_msg(rumor_swim_t *sw, uint64_t to, const char *ep, int type, uint32_t seq,
                     size_t len)
{
    sw->stats.messages_sent++;
    if (sw->send(sw->ctx, to, ep, type, seq, sw->buf, len) < 0)
        sw->stats.send_failed++;
}

/* Sorts the broadcast queue: fewest transmissions first, then newest. */
static int bq_cmp(const void *a, const void *b)
{
    const struct swim_bcast *x = a, *y = b;
    if (x->tx != y->tx)
        return x->tx < y->tx ? -1 : 1;
    return x->order > y->order ? -1 : x->order < y->order;
}

/* Starts a body in sw->buf: the common part, the PROBE_REQ target when
 * `target` is given, our own record (entry 0) and the recipient's record
 * when we hold it as anything but alive (Lifeguard's buddy system: a
 * suspect learns of its suspicion from whoever talks to it). */
static void body_begin(rumor_swim_t *sw, struct body_w *w, uint8_t flags, uint64_t to,
                       const struct swim_mem *target)
{
    swim_body_begin(w, sw->buf, sizeof sw->buf, flags);
    if (target)
        swim_body_target(w, target->m.id, target->m.endpoint);
    swim_body_entry(w, &swim_self(sw)->m);
    struct swim_mem *r = to ? swim_find(sw, to) : NULL;
    if (r && r->m.id != sw->cfg.self_id && r->m.state != RUMOR_SWIM_ALIVE)
        swim_body_entry(w, &r->m);
}

/* Fills the rest of the body with pending updates, fewest-sent first, and
 * forgets those sent often enough. */
static void body_piggyback(rumor_swim_t *sw, struct body_w *w, uint64_t to)
{
    if (!sw->nbq)
        return;
    qsort(sw->bq, sw->nbq, sizeof *sw->bq, bq_cmp);
    uint32_t limit = swim_retransmit_limit(sw);
    size_t keep = 0;
    for (size_t i = 0; i < sw->nbq; i++) {
        struct swim_bcast b = sw->bq[i];
        struct swim_mem *c = swim_find(sw, b.id);
        if (!c)
            continue; /* forgotten since */
        if (b.id != to && swim_body_entry(w, &c->m) == 0)
            b.tx++;
        if (b.tx < limit)
            sw->bq[keep++] = b;
    }
    sw->nbq = keep;
}

/* A message with our record, the recipient's and piggybacked updates. */
static void send_gossip(rumor_swim_t *sw, uint64_t to, const char *ep, int type, uint32_t seq,
                        uint8_t flags, const struct swim_mem *target)
{
    struct body_w w;
    body_begin(sw, &w, flags, to, target);
    body_piggyback(sw, &w, to);
    send_msg(sw, to, ep, type, seq, swim_body_end(&w));
}

/* Our whole member table (tombstones included), split over as many
 * messages as RUMOR_WIRE_MAX_BODY needs, each a valid body of its own:
 * entries are applied one by one, so a receiver needs no reassembly. The
 * first message carries first_flags (SYNC on a push-pull). */
static void send_state(rumor_swim_t *sw, uint64_t to, const char *ep, int type, uint32_t seq,
                       uint8_t first_flags)
{
    size_t i = 0;
    uint8_t flags = first_flags | RUMOR_SWIM_F_STATE;
    do {
        struct body_w w;
        body_begin(sw, &w, flags, to, NULL);
        for (; i < sw->nmem; i++) {
            const rumor_swim_member_t *m = &sw->mem[i].m;
            if (m->id == sw->cfg.self_id || (m->id == to && m->state != RUMOR_SWIM_ALIVE))
                continue; /* already in (body_begin) */
            if (swim_body_entry(&w, m) < 0)
                break;
        }
        send_msg(sw, to, ep, type, seq, swim_body_end(&w));
        flags = RUMOR_SWIM_F_STATE;
    } while (i < sw->nmem);
}

/* Up to `want` distinct random members in the view other than self and
 * `except`, ALIVE only when alive_only. Returns how many were written. */
static int pick_ok(const rumor_swim_t *sw, const struct swim_mem *c, uint64_t except,
                   int alive_only)
{
    return c->m.id != sw->cfg.self_id && c->m.id != except && swim_in_view(sw, c) &&
           (!alive_only || c->m.state == RUMOR_SWIM_ALIVE);
}

static int pick_members(rumor_swim_t *sw, uint64_t except, int alive_only, struct swim_mem **out,
                        int want)
{
    int got = 0;
    /* A large view: draw records at random and keep the distinct ones that
     * qualify (uniform over them, as the scan below), in O(want) draws
     * while most of the table qualifies; the scan is the fallback. */
    if (sw->nview > 64 && sw->nview >= 4 * (size_t)want && 2 * sw->nview >= sw->nmem) {
        for (int tries = 0; tries < 8 * want + 16 && got < want; tries++) {
            struct swim_mem *c = &sw->mem[rumor_topo_rng_below(&sw->rng, sw->nmem)];
            int dup = !pick_ok(sw, c, except, alive_only);
            for (int k = 0; k < got && !dup; k++)
                dup = out[k] == c;
            if (!dup)
                out[got++] = c;
        }
        if (got == want)
            return got;
        got = 0;
    }
    size_t cand = 0;
    for (size_t i = 0; i < sw->nmem; i++) {
        struct swim_mem *c = &sw->mem[i];
        if (!pick_ok(sw, c, except, alive_only))
            continue;
        /* reservoir sampling over the candidates */
        cand++;
        if (got < want)
            out[got++] = c;
        else {
            size_t j = rumor_topo_rng_below(&sw->rng, cand);
            if (j < (size_t)want)
                out[j] = c;
        }
    }
    return got;
}

/* ------------------------------------------------------------ lifetime */

int rumor_swim_create(const rumor_swim_config_t *cfg, rumor_swim_send_fn send, void *ctx,
                      rumor_swim_t **out)
{
    *out = NULL;
    if (!cfg || !send)
        return rumor_err_set(RUMOR_EINVAL, "swim: config and send callback are required");
    if (!cfg->self_id)
        return rumor_err_set(RUMOR_EINVAL, "swim: self_id must not be 0");
    if (!cfg->self_endpoint ||
        !rumor_swim_endpoint_valid(cfg->self_endpoint, strlen(cfg->self_endpoint)))
        return rumor_err_set(RUMOR_EINVAL,
                             "swim: endpoint '%.140s' is not tcp:// followed by 1..120 "
                             "printable characters",
                             cfg->self_endpoint ? cfg->self_endpoint : "(null)");
    if (rumor_peerlist_check_endpoint(cfg->self_endpoint) < 0) /* port in 1-65535 */
        return rumor_err_prefix(RUMOR_EINVAL, "swim");
    if (cfg->self_relay && (!rumor_swim_endpoint_valid(cfg->self_relay, strlen(cfg->self_relay)) ||
                            rumor_peerlist_check_endpoint(cfg->self_relay) < 0))
        return rumor_err_set(RUMOR_EINVAL, "swim: relay endpoint '%.140s' is not a tcp:// "
                             "endpoint", cfg->self_relay);
    rumor_swim_config_t c = *cfg;
    if (!(c.probe_interval >= 0) || !(c.probe_timeout >= 0) || !(c.suspicion_timeout >= 0) ||
        !(c.suspicion_mult >= 0) || !(c.tombstone_timeout >= 0) || isnan(c.gossip_interval) ||
        !(c.suspicion_max_mult == 0 || (c.suspicion_max_mult >= 1 && c.suspicion_max_mult <= 100)) ||
        c.suspicion_confirm < 0 || c.suspicion_confirm > SWIM_CONFIRM_MAX ||
        c.indirect_k < 0 || c.indirect_k > SWIM_MAX_HELPERS || c.gossip_fanout < 0 ||
        c.retransmit_mult < 0 || c.max_members < 0 || (c.max_members && c.max_members < 2) ||
        c.max_members > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "swim: a config value is out of range (indirect_k "
                                           "<= %d, 2 <= max_members <= %d, times >= 0, "
                                           "1 <= suspicion_max_mult <= 100, "
                                           "suspicion_confirm <= %d)",
                             SWIM_MAX_HELPERS, RUMOR_TOPO_MAX_NODES, SWIM_CONFIRM_MAX);
    if (!c.probe_interval)
        c.probe_interval = 0.5;
    if (!c.probe_timeout)
        c.probe_timeout = c.probe_interval / 2;
    if (c.probe_timeout >= c.probe_interval)
        return rumor_err_set(RUMOR_EINVAL, "swim: probe_timeout %g must be below probe_interval %g",
                             c.probe_timeout, c.probe_interval);
    if (!c.indirect_k)
        c.indirect_k = 3;
    if (!c.suspicion_mult)
        c.suspicion_mult = 5;
    if (!c.suspicion_max_mult)
        c.suspicion_max_mult = 6;
    if (!c.suspicion_confirm)
        c.suspicion_confirm = 3;
    if (!c.gossip_interval)
        c.gossip_interval = c.probe_interval / 2;
    if (!c.gossip_fanout)
        c.gossip_fanout = 3;
    if (!c.retransmit_mult)
        c.retransmit_mult = 3;
    if (!c.sync_every)
        c.sync_every = 10;
    if (!c.reprobe_every)
        c.reprobe_every = 5;
    if (!c.tombstone_timeout)
        c.tombstone_timeout = 60;
    if (!c.max_members)
        c.max_members = 4096;

    rumor_swim_t *sw = calloc(1, sizeof *sw);
    if (!sw)
        return rumor_err_set(RUMOR_ENOMEM, "swim: out of memory");
    sw->cap = (size_t)c.max_members;
    sw->mem = calloc(sw->cap, sizeof *sw->mem);
    sw->order = calloc(sw->cap, sizeof *sw->order);
    sw->bq = calloc(sw->cap, sizeof *sw->bq);
    sw->ids = calloc(sw->cap, sizeof *sw->ids);
    if (!sw->mem || !sw->order || !sw->bq || !sw->ids) {
        rumor_swim_destroy(&sw);
        return rumor_err_set(RUMOR_ENOMEM, "swim: out of memory for %d members", c.max_members);
    }
    snprintf(sw->self_ep, sizeof sw->self_ep, "%s", cfg->self_endpoint);
    c.self_endpoint = sw->self_ep;
    sw->cfg = c;
    sw->send = send;
    sw->ctx = ctx;
    rumor_topo_rng_seed(&sw->rng, c.seed, c.self_id);
    sw->seq = (uint32_t)rumor_topo_rng_next(&sw->rng);

    struct swim_mem *s = &sw->mem[0];
    s->m.id = c.self_id;
    sw->ids[0] = c.self_id;
    s->m.incarnation = c.incarnation;
    s->m.state = RUMOR_SWIM_ALIVE;
    snprintf(s->m.endpoint, sizeof s->m.endpoint, "%s", sw->self_ep);
    s->m.reach = (c.self_relayed ? RUMOR_SWIM_RELAYED : 0) | (c.self_relay ? RUMOR_SWIM_RELAY : 0);
    if (c.self_relay)
        snprintf(s->m.relay, sizeof s->m.relay, "%s", c.self_relay);
    c.self_relay = NULL; /* copied into the record; the caller's string is not kept */
    sw->nmem = 1;
    sw->nview = 1;
    sw->timers_at = INFINITY;
    sw->version = 1;
    *out = sw;
    return 0;
}

void rumor_swim_destroy(rumor_swim_t **sp)
{
    if (!sp || !*sp)
        return;
    rumor_swim_t *sw = *sp;
    free(sw->mem);
    free(sw->ids);
    free(sw->order);
    free(sw->bq);
    free(sw);
    *sp = NULL;
}

int rumor_swim_add_seed(rumor_swim_t *sw, const char *ep)
{
    if (!ep || !rumor_swim_endpoint_valid(ep, strlen(ep)))
        return rumor_err_set(RUMOR_EINVAL, "swim: seed '%.140s' is not a tcp:// endpoint",
                             ep ? ep : "(null)");
    if (rumor_peerlist_check_endpoint(ep) < 0) /* a port nobody listens on */
        return rumor_err_prefix(RUMOR_EINVAL, "swim: seed");
    if (!strcmp(ep, sw->self_ep))
        return 0;
    for (int i = 0; i < sw->nseeds; i++)
        if (!strcmp(sw->seeds[i], ep))
            return 0;
    if (sw->nseeds >= RUMOR_SWIM_MAX_SEEDS)
        return rumor_err_set(RUMOR_ENOMEM, "swim: more than %d seeds", RUMOR_SWIM_MAX_SEEDS);
    snprintf(sw->seeds[sw->nseeds++], RUMOR_SWIM_ENDPOINT_MAX, "%s", ep);
    return 0;
}

/* ------------------------------------------------------------ driving */

/* The id of the view member at a seed's endpoint, 0 when none. */
static uint64_t seed_id(rumor_swim_t *sw, const char *ep)
{
    for (size_t i = 0; i < sw->nmem; i++)
        if (swim_in_view(sw, &sw->mem[i]) && !strcmp(sw->mem[i].m.endpoint, ep))
            return sw->mem[i].m.id;
    return 0;
}

/* Push-pull: our full state to `to`, which answers with its own. */
static void sync_with(rumor_swim_t *sw, uint64_t to, const char *ep)
{
    sw->stats.syncs++;
    send_state(sw, to, ep, RUMOR_WIRE_PROBE, next_seq(sw), RUMOR_SWIM_F_SYNC);
}

/* Lifeguard's local health awareness (Dadgar et al. 2018): a peer whose
 * probe goes unanswered while it hears from nobody else either, or that is
 * told it is suspected, is more likely slow or cut off itself (starved of
 * CPU, its messages queued) than surrounded by dead members (a dead target
 * among members still heard from costs nothing: detection keeps its
 * speed). Each such event raises its health multiplier by one, each
 * answered probe lowers it by one, and its probe interval and timeout
 * are (multiplier + 1) times the configured ones: a starved peer probes
 * less often and waits longer, so it does not declare a healthy swarm
 * dead around it, while a healthy one keeps its speed of detection. */
void swim_health(rumor_swim_t *sw, int delta)
{
    int h = sw->health + delta;
    h = h < 0 ? 0 : h > SWIM_HEALTH_MAX ? SWIM_HEALTH_MAX : h;
    if (h > sw->stats.health_max)
        sw->stats.health_max = h;
    if (h != sw->health && (h == SWIM_HEALTH_MAX || (h == 0 && sw->health == SWIM_HEALTH_MAX)))
        rumor_debug("swim: local health %d of %d", h, SWIM_HEALTH_MAX);
    sw->health = h;
    sw->stats.health = h;
}

static void start_probe(rumor_swim_t *sw, double now)
{
    struct swim_mem *t = NULL;
    for (int pass = 0; pass < 2 && !t; pass++) {
        while (sw->order_pos < sw->norder && !t) {
            struct swim_mem *c = swim_find(sw, sw->order[sw->order_pos++]);
            if (c && c->m.id != sw->cfg.self_id && swim_in_view(sw, c))
                t = c;
        }
        if (!t)
            swim_order_rebuild(sw);
    }
    if (!t)
        return;
    memset(&sw->probe, 0, sizeof sw->probe);
    sw->probe.active = 1;
    sw->probe.target = t->m.id;
    sw->probe.seq = next_seq(sw);
    sw->probe.direct_deadline = now + sw->cfg.probe_timeout * (sw->health + 1);
    sw->probe.end = now + sw->cfg.probe_interval * (sw->health + 1);
    sw->stats.probes++;
    send_gossip(sw, t->m.id, t->m.endpoint, RUMOR_WIRE_PROBE, sw->probe.seq, 0, NULL);
}

/* The direct ACK is late: ask k alive members to probe the target for us. */
static void ask_helpers(rumor_swim_t *sw)
{
    sw->probe.indirect_sent = 1;
    struct swim_mem *t = swim_find(sw, sw->probe.target), *h[SWIM_MAX_HELPERS];
    if (!t)
        return;
    int n = pick_members(sw, t->m.id, 1, h, sw->cfg.indirect_k);
    for (int i = 0; i < n; i++) {
        sw->probe.helpers[sw->probe.nhelpers++] = h[i]->m.id;
        sw->stats.probe_reqs++;
        send_gossip(sw, h[i]->m.id, h[i]->m.endpoint, RUMOR_WIRE_PROBE_REQ, sw->probe.seq, 0, t);
    }
}

/* A seed whose endpoint no member of our view holds (NULL when none): one
 * that may be across a partition whose tombstones are already forgotten.
 * A healthy swarm, where every seed is a member, pays nothing for seeds. */
static const char *stray_seed(rumor_swim_t *sw)
{
    for (int k = 0; k < sw->nseeds; k++) {
        const char *ep = sw->seeds[sw->seed_pos++ % sw->nseeds];
        int held = 0;
        for (size_t i = 0; i < sw->nmem && !held; i++)
            held = swim_in_view(sw, &sw->mem[i]) && !strcmp(sw->mem[i].m.endpoint, ep);
        if (!held)
            return ep;
    }
    return NULL;
}

/* Every reprobe_every intervals, a push-pull with a dead member (it may be
 * across a healed partition, or a false positive that has not heard of its
 * death: the probe carries its death, so it refutes) or with a seed outside
 * our view, alternately. */
static void reprobe(rumor_swim_t *sw)
{
    size_t ndead = 0;
    for (size_t i = 0; i < sw->nmem; i++)
        ndead += sw->mem[i].m.state == RUMOR_SWIM_DEAD;
    const char *seed = (sw->reprobes++ & 1) || !ndead ? stray_seed(sw) : NULL;
    if (seed) {
        sync_with(sw, seed_id(sw, seed), seed);
        return;
    }
    if (!ndead)
        return;
    size_t k = rumor_topo_rng_below(&sw->rng, ndead);
    for (size_t i = 0; i < sw->nmem; i++)
        if (sw->mem[i].m.state == RUMOR_SWIM_DEAD && k-- == 0) {
            sync_with(sw, sw->mem[i].m.id, sw->mem[i].m.endpoint);
            return;
        }
}

/* Intervals between anti-entropy syncs: sync_every, stretched beyond 32
 * members as memberlist does (pushPullScale), so that the bytes a member
 * sends for syncs grow like n / log n rather than n. */
static uint64_t sync_period(const rumor_swim_t *sw)
{
    size_t n = swim_view_size(sw);
    uint64_t mult = 1;
    if (n > 32)
        mult += (uint64_t)ceil(log2((double)n) - 5.0);
    return (uint64_t)sw->cfg.sync_every * mult;
}

static void gossip_round(rumor_swim_t *sw)
{
    if (!sw->nbq)
        return;
    struct swim_mem *to[64];
    int want = sw->cfg.gossip_fanout < 64 ? sw->cfg.gossip_fanout : 64;
    int n = pick_members(sw, 0, 0, to, want);
    for (int i = 0; i < n; i++)
        send_gossip(sw, to[i]->m.id, to[i]->m.endpoint, RUMOR_WIRE_ACK, 0, 0, NULL);
}

static double compute_due(const rumor_swim_t *sw)
{
    double d = sw->next_probe;
    if (sw->probe.active && !sw->probe.acked) {
        if (!sw->probe.indirect_sent && sw->probe.direct_deadline < d)
            d = sw->probe.direct_deadline;
        if (sw->probe.end < d)
            d = sw->probe.end;
    }
    if (sw->cfg.gossip_interval > 0 && sw->nbq && sw->next_gossip < d)
        d = sw->next_gossip;
    return sw->timers_at < d ? sw->timers_at : d;
}

/* Forgets old tombstones and declares expired suspicions dead, then makes
 * timers_at the exact earliest timer left. Runs only when timers_at is
 * reached (a suspicion or tombstone is due, or a late tick moved them). */
static void expire_timers(rumor_swim_t *sw, double now)
{
    size_t keep = 0;
    for (size_t i = 0; i < sw->nmem; i++) {
        struct swim_mem *m = &sw->mem[i];
        if (m->m.state >= RUMOR_SWIM_DEAD && m->deadline <= now && m->m.id != sw->cfg.self_id)
            continue;
        sw->ids[keep] = m->m.id;
        sw->mem[keep++] = *m;
    }
    sw->nmem = keep;
    sw->timers_at = INFINITY;
    for (size_t i = 0; i < sw->nmem; i++) {
        struct swim_mem *m = &sw->mem[i];
        if (m->m.state == RUMOR_SWIM_SUSPECT && m->deadline <= now) {
            sw->stats.declared_dead++;
            rumor_info("swim: %016llx (%s) declared dead", (unsigned long long)m->m.id,
                       m->m.endpoint);
            swim_declare(sw, now, m, RUMOR_SWIM_DEAD); /* in place; sets its tombstone timer */
        }
        if (m->m.state >= RUMOR_SWIM_SUSPECT && m->m.id != sw->cfg.self_id &&
            m->deadline < sw->timers_at)
            sw->timers_at = m->deadline;
    }
}

double rumor_swim_next_deadline(const rumor_swim_t *sw)
{
    return sw->started ? sw->due : 0;
}

int rumor_swim_tick(rumor_swim_t *sw, double now)
{
    if (isnan(now))
        return rumor_err_set(RUMOR_EINVAL, "swim: tick at NaN");
    const rumor_swim_config_t *c = &sw->cfg;
    if (!sw->started) {
        sw->started = 1;
        sw->next_probe = now;
        sw->next_gossip = now;
        sw->due = now;
    }
    double late = now - sw->due;
    if (late > c->probe_interval) {
        /* We were frozen or starved: a silence we could not hear through
         * says nothing about others (Lifeguard's local health, in small). */
        sw->stats.late_ticks++;
        sw->probe.active = 0;
        for (size_t i = 0; i < sw->nmem; i++)
            if (sw->mem[i].m.state == RUMOR_SWIM_SUSPECT) {
                sw->mem[i].deadline += late;
                sw->mem[i].susp_since += late;
            }
        if (sw->next_probe < now)
            sw->next_probe = now;
        sw->timers_at = now; /* rescan below */
    }

    for (int i = 0; i < SWIM_NRELAYS; i++)
        if (sw->relays[i].used && sw->relays[i].expires <= now)
            sw->relays[i].used = 0;
    if (now >= sw->timers_at)
        expire_timers(sw, now);

    /* the probe in flight */
    if (sw->probe.active && !sw->probe.acked) {
        if (!sw->probe.indirect_sent && now >= sw->probe.direct_deadline && !sw->left)
            ask_helpers(sw);
        if (now >= sw->probe.end) {
            struct swim_mem *t = swim_find(sw, sw->probe.target);
            if (!sw->probe.heard_other) /* nobody at all was heard: maybe it is us */
                swim_health(sw, +1);
            if (t && t->m.state == RUMOR_SWIM_ALIVE) {
                sw->stats.suspected++;
                rumor_debug("swim: %016llx missed probe %u: suspect",
                            (unsigned long long)t->m.id, sw->probe.seq);
                swim_declare(sw, now, t, RUMOR_SWIM_SUSPECT);
            } else if (t && t->m.state == RUMOR_SWIM_SUSPECT) {
                swim_confirm(sw, t, sw->cfg.self_id); /* we find it silent too */
            }
            sw->probe.active = 0;
        }
    }
    if (sw->probe.active && sw->probe.acked && now >= sw->probe.end)
        sw->probe.active = 0;
    double interval = c->probe_interval * (sw->health + 1);

    /* a new protocol period */
    if (now >= sw->next_probe) {
        sw->next_probe += interval;
        if (sw->next_probe <= now)
            sw->next_probe = now + interval;
        sw->rounds++;
        if (!sw->left) {
            if (swim_view_size(sw) <= 1) {
                /* alone: knock at every seed, asking for the whole state */
                for (int i = 0; i < sw->nseeds; i++)
                    sync_with(sw, seed_id(sw, sw->seeds[i]), sw->seeds[i]);
            } else {
                start_probe(sw, now);
                if (c->sync_every > 0 && sw->rounds % sync_period(sw) == 0) {
                    struct swim_mem *p;
                    if (pick_members(sw, 0, 1, &p, 1) == 1)
                        sync_with(sw, p->m.id, p->m.endpoint);
                }
            }
            if (c->reprobe_every > 0 && sw->rounds % (uint64_t)c->reprobe_every == 0)
                reprobe(sw);
        }
    }

    if (c->gossip_interval > 0 && now >= sw->next_gossip) {
        sw->next_gossip = now + c->gossip_interval;
        gossip_round(sw);
    }
    sw->due = compute_due(sw);
    return 0;
}

/* ------------------------------------------------------------ receiving */

static int reject(rumor_swim_t *sw, int reason, const char *what, uint64_t sender)
{
    rumor_wire_stats_count(&sw->stats.wire, reason);
    rumor_err_set(RUMOR_EPROTO, "swim: %s from %016llx (%s)", what, (unsigned long long)sender,
                  rumor_wire_reject_name(reason));
    return -reason;
}

static void on_probe_req(rumor_swim_t *sw, double now, const rumor_swim_member_t *from,
                         const struct swim_body *b, uint32_t seq)
{
    if (b->target_id == sw->cfg.self_id) {
        send_gossip(sw, from->id, from->endpoint, RUMOR_WIRE_ACK, seq, 0, NULL);
        return;
    }
    if (sw->left)
        return;
    struct swim_relay *r = &sw->relays[0];
    for (int i = 0; i < SWIM_NRELAYS; i++) {
        if (!sw->relays[i].used) {
            r = &sw->relays[i];
            break;
        }
        if (sw->relays[i].expires < r->expires)
            r = &sw->relays[i];
    }
    r->used = 1;
    r->my_seq = next_seq(sw);
    r->their_seq = seq;
    r->requester = from->id;
    r->target = b->target_id;
    snprintf(r->requester_ep, sizeof r->requester_ep, "%s", from->endpoint);
    r->expires = now + sw->cfg.probe_interval;
    sw->stats.relayed++;
    send_gossip(sw, b->target_id, b->target_ep, RUMOR_WIRE_PROBE, r->my_seq, 0, NULL);
}

static void on_ack(rumor_swim_t *sw, uint64_t sender, uint32_t seq)
{
    if (!seq)
        return; /* one-way gossip */
    if (sw->probe.active && !sw->probe.acked && seq == sw->probe.seq) {
        int ok = sender == sw->probe.target;
        for (int i = 0; i < sw->probe.nhelpers && !ok; i++)
            if (sw->probe.helpers[i] == sender) {
                ok = 1;
                sw->stats.acks_indirect++;
            }
        if (sender == sw->probe.target)
            sw->stats.acks_direct++;
        if (ok) {
            sw->probe.acked = 1;
            swim_health(sw, -1);
        }
    }
    for (int i = 0; i < SWIM_NRELAYS; i++) {
        struct swim_relay *r = &sw->relays[i];
        if (r->used && r->my_seq == seq && r->target == sender) {
            r->used = 0;
            sw->stats.relayed++;
            send_gossip(sw, r->requester, r->requester_ep, RUMOR_WIRE_ACK, r->their_seq, 0, NULL);
        }
    }
}

/* FUZZ TARGET: takes any bytes; swim_body_parse checks all of them first. */
int rumor_swim_on_message(rumor_swim_t *sw, double now, uint64_t sender,
                          uint64_t sender_incarnation, int type, uint32_t seq, const void *body,
                          size_t len)
{
    if (type != RUMOR_WIRE_PROBE && type != RUMOR_WIRE_PROBE_REQ && type != RUMOR_WIRE_ACK)
        return reject(sw, RUMOR_WIRE_BAD_TYPE, "not a SWIM message type", sender);
    if (!sender)
        return reject(sw, RUMOR_WIRE_BAD_SENDER, "sender id 0", sender);
    if (sender == sw->cfg.self_id)
        return reject(sw, RUMOR_WIRE_FROM_SELF, "our own id as sender", sender);
    struct swim_mem *known = swim_find(sw, sender);
    if (known && sender_incarnation < known->m.incarnation)
        return reject(sw, RUMOR_WIRE_OLD_INCARNATION, "a message from a previous life", sender);
    if (!body || !len)
        return reject(sw, RUMOR_WIRE_BAD_FRAMES, "no body", sender);
    if (len > RUMOR_WIRE_MAX_BODY)
        return reject(sw, RUMOR_WIRE_BODY_TOO_LARGE, "body above 64 KiB", sender);
    struct swim_body b;
    const char *why = NULL;
    int reason = swim_body_parse(body, len, type, sender, sender_incarnation, &b, &why);
    if (reason)
        return reject(sw, reason, why, sender);
    rumor_wire_stats_count(&sw->stats.wire, 0);
    if (sender != sw->probe.target)
        sw->probe.heard_other = 1;

    /* the sender's own record first: it may be new, or have restarted */
    rumor_swim_member_t from, u;
    const uint8_t *p = swim_body_get(b.entries, &from);
    swim_apply(sw, now, from, 0);
    for (uint32_t i = 1; i < b.count; i++) {
        p = swim_body_get(p, &u);
        swim_apply(sw, now, u, (b.flags & RUMOR_SWIM_F_STATE) != 0);
    }

    switch (type) {
    case RUMOR_WIRE_PROBE:
        if (b.flags & RUMOR_SWIM_F_SYNC)
            send_state(sw, sender, from.endpoint, RUMOR_WIRE_ACK, seq, 0);
        else
            send_gossip(sw, sender, from.endpoint, RUMOR_WIRE_ACK, seq, 0, NULL);
        break;
    case RUMOR_WIRE_PROBE_REQ:
        on_probe_req(sw, now, &from, &b, seq);
        break;
    default:
        on_ack(sw, sender, seq);
        if (!seq) {
            /* one-way gossip from a member we hold as suspect or dead, and
             * which has not refuted: tell it (the buddy system), since
             * gossip gets no answer that would */
            struct swim_mem *c = swim_find(sw, sender);
            if (c && (c->m.state == RUMOR_SWIM_SUSPECT || c->m.state == RUMOR_SWIM_DEAD) &&
                c->m.incarnation == sender_incarnation)
                send_gossip(sw, sender, from.endpoint, RUMOR_WIRE_ACK, 0, 0, NULL);
        }
        break;
    }
    sw->due = compute_due(sw);
    return 0;
}

void rumor_swim_heard(rumor_swim_t *sw, double now, uint64_t sender, uint64_t incarnation)
{
    (void)now;
    struct swim_mem *c = swim_find(sw, sender);
    if (!c || c->m.incarnation != incarnation)
        return;
    if (sender != sw->probe.target)
        sw->probe.heard_other = 1;
    if (sw->probe.active && !sw->probe.acked && sw->probe.target == sender) {
        sw->probe.acked = 1;
        sw->stats.acks_direct++;
        swim_health(sw, -1); /* answered, as by an ACK */
        sw->due = compute_due(sw);
    }
}

int rumor_swim_set_endpoint(rumor_swim_t *sw, double now, const char *endpoint, int relayed)
{
    if (!endpoint || !rumor_swim_endpoint_valid(endpoint, strlen(endpoint)) ||
        rumor_peerlist_check_endpoint(endpoint) < 0)
        return rumor_err_set(RUMOR_EINVAL, "swim: endpoint '%.140s' is not a tcp:// endpoint",
                             endpoint ? endpoint : "(null)");
    struct swim_mem *s = swim_self(sw);
    if (sw->left)
        return rumor_err_set(RUMOR_ESTATE, "swim: already left");
    unsigned reach = (s->m.reach & ~RUMOR_SWIM_RELAYED) | (relayed ? RUMOR_SWIM_RELAYED : 0);
    if (strcmp(s->m.endpoint, endpoint) == 0 && reach == s->m.reach)
        return 0;
    s->m.reach = reach;
    if (s->m.refutation == UINT32_MAX)
        return rumor_err_set(RUMOR_ESTATE, "swim: the refutation counter is spent");
    snprintf(sw->self_ep, sizeof sw->self_ep, "%s", endpoint);
    snprintf(s->m.endpoint, sizeof s->m.endpoint, "%s", endpoint);
    s->m.refutation++; /* a newer record of this life: it supersedes the old one everywhere */
    s->m.since = now;
    sw->next_gossip = now; /* tell a few members at once */
    sw->due = compute_due(sw);
    rumor_info("swim: %016llx announces its new address %s (refutation %u)",
               (unsigned long long)s->m.id, endpoint, s->m.refutation);
    return 1;
}

int rumor_swim_leave(rumor_swim_t *sw, double now)
{
    if (sw->left)
        return rumor_err_set(RUMOR_ESTATE, "swim: already left");
    struct swim_mem *s = swim_self(sw);
    s->m.state = RUMOR_SWIM_LEFT;
    s->m.since = now;
    sw->left = 1;
    sw->probe.active = 0;
    int k = sw->cfg.indirect_k > sw->cfg.gossip_fanout ? sw->cfg.indirect_k : sw->cfg.gossip_fanout;
    struct swim_mem *to[2 * 64];
    int want = 2 * k < 128 ? 2 * k : 128;
    int n = pick_members(sw, 0, 0, to, want);
    for (int i = 0; i < n; i++)
        send_gossip(sw, to[i]->m.id, to[i]->m.endpoint, RUMOR_WIRE_PROBE, next_seq(sw), 0, NULL);
    rumor_info("swim: %016llx leaves, told %d members", (unsigned long long)s->m.id, n);
    sw->due = compute_due(sw);
    return n;
}

/* SWIM's member table: lookups, the precedence of updates, refutation,
 * the probe order and the update queue (see swim.h; the rules are in
 * docs/membership.md, section 1.1). */
#include "config.h"

#include <math.h>
#include <string.h>

#include "log.h"
#include "swim_int.h"

int swim_in_view(const rumor_swim_t *sw, const struct swim_mem *c)
{
    return c->m.state == RUMOR_SWIM_ALIVE || c->m.state == RUMOR_SWIM_SUSPECT ||
           c->m.id == sw->cfg.self_id;
}

static size_t find_pos(const rumor_swim_t *sw, uint64_t id, int *found)
{
    size_t lo = 0, hi = sw->nmem;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sw->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < sw->nmem && sw->ids[lo] == id;
    return lo;
}

struct swim_mem *swim_find(rumor_swim_t *sw, uint64_t id)
{
    int found;
    size_t p = find_pos(sw, id, &found);
    return found ? &sw->mem[p] : NULL;
}

struct swim_mem *swim_self(rumor_swim_t *sw)
{
    return swim_find(sw, sw->cfg.self_id);
}

/* Members in the view (self included), kept up to date by swim_apply(). */
size_t swim_view_size(const rumor_swim_t *sw)
{
    return sw->nview;
}

/* Whether a suspicion is dynamic here: in a small view it keeps SWIM's
 * fixed timeout. Too few members could confirm it (memberlist's rule: all
 * but us and the suspect), or each probes the dead one so rarely that
 * waiting for K of them costs seconds (a ring of 5 went from under 8 s to
 * 8.1 s to see a death in test_open_membership). */
static int dynamic(const rumor_swim_t *sw)
{
    int n = (int)swim_view_size(sw);
    return n >= SWIM_DYNAMIC_MIN_VIEW && n - 2 >= sw->cfg.suspicion_confirm;
}

/* Lifeguard's dynamic suspicion (Dadgar et al. 2018, section IV-B; as
 * memberlist does it). The base timeout is SWIM's; a suspicion starts at
 * max = suspicion_max_mult times it and falls with each other member that
 * suspects the same version, as max - (max - min) log(C + 1) / log(K + 1),
 * to the base at K confirmations. A member that only one peer finds silent
 * (often because one of the two is starved, not dead) has the long timeout
 * to refute in; one that several find silent goes at the base timeout. */
double swim_suspicion_timeout(const rumor_swim_t *sw, int confirmations)
{
    double min;
    if (sw->cfg.suspicion_timeout > 0) {
        min = sw->cfg.suspicion_timeout;
    } else {
        double n = (double)swim_view_size(sw), l = n > 10 ? log10(n) : 1.0;
        min = sw->cfg.suspicion_mult * l * sw->cfg.probe_interval;
    }
    double max = min * sw->cfg.suspicion_max_mult;
    int k = sw->cfg.suspicion_confirm;
    if (!dynamic(sw) || max <= min || confirmations >= k)
        return min;
    double t = max - (max - min) * log(confirmations + 1.0) / log(k + 1.0);
    return t > min ? t : min;
}

/* Brings c's suspicion timer to what its confirmations allow. */
static void shorten(rumor_swim_t *sw, struct swim_mem *c)
{
    double d = c->susp_since + swim_suspicion_timeout(sw, c->nconfirm);
    if (d < c->deadline) {
        c->deadline = d;
        if (d < sw->timers_at)
            sw->timers_at = d;
    }
}

/* One more member, `by`, suspects c at its current version: counted once
 * per suspecter, up to the confirmations that matter, and passed on (the
 * record now names it) so that the others count it too. */
void swim_confirm(rumor_swim_t *sw, struct swim_mem *c, uint64_t by)
{
    if (c->m.state != RUMOR_SWIM_SUSPECT || !by || by == c->m.id ||
        c->nconfirm >= sw->cfg.suspicion_confirm || !dynamic(sw))
        return; /* nothing to shorten: nothing to pass on */
    for (int i = 0; i < c->nsusp; i++)
        if (c->susp_by[i] == by)
            return;
    if (c->nsusp < SWIM_CONFIRM_MAX + 1)
        c->susp_by[c->nsusp++] = by;
    c->nconfirm++;
    sw->stats.confirmations++;
    c->m.by = by;
    swim_enqueue(sw, c->m.id);
    shorten(sw, c);
}

uint32_t swim_retransmit_limit(const rumor_swim_t *sw)
{
    double n = (double)swim_view_size(sw);
    return (uint32_t)sw->cfg.retransmit_mult * (uint32_t)ceil(log2(n + 1.0));
}

int rumor_swim_endpoint_valid(const char *s, size_t len)
{
    if (!s || len < 7 || len >= RUMOR_SWIM_ENDPOINT_MAX || memcmp(s, "tcp://", 6))
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7E)
            return 0;
    return 1;
}

const char *rumor_swim_state_name(int state)
{
    static const char *const names[] = { "alive", "suspect", "dead", "left" };
    return state >= 0 && state <= RUMOR_SWIM_LEFT ? names[state] : "unknown";
}

/* ------------------------------------------------------ the member table */

static void order_insert(rumor_swim_t *sw, uint64_t id)
{
    if (sw->norder >= sw->cap)
        return;
    /* SWIM: a new member goes to a random place in what is left of this
     * round, so it is probed within one round */
    size_t at = sw->order_pos + rumor_topo_rng_below(&sw->rng, sw->norder - sw->order_pos + 1);
    memmove(&sw->order[at + 1], &sw->order[at], (sw->norder - at) * sizeof *sw->order);
    sw->order[at] = id;
    sw->norder++;
}

void swim_order_rebuild(rumor_swim_t *sw)
{
    sw->norder = sw->order_pos = 0;
    for (size_t i = 0; i < sw->nmem; i++)
        if (sw->mem[i].m.id != sw->cfg.self_id && swim_in_view(sw, &sw->mem[i]))
            sw->order[sw->norder++] = sw->mem[i].m.id;
    for (size_t i = sw->norder; i > 1; i--) {
        size_t j = rumor_topo_rng_below(&sw->rng, i);
        uint64_t t = sw->order[i - 1];
        sw->order[i - 1] = sw->order[j];
        sw->order[j] = t;
    }
}

static void set_timer(rumor_swim_t *sw, struct swim_mem *c, double now)
{
    if (c->m.state == RUMOR_SWIM_SUSPECT)
        c->deadline = c->susp_since + swim_suspicion_timeout(sw, c->nconfirm);
    else if (c->m.state >= RUMOR_SWIM_DEAD)
        c->deadline = now + sw->cfg.tombstone_timeout;
    else
        c->deadline = 0;
    if (c->m.state != RUMOR_SWIM_ALIVE && c->deadline < sw->timers_at)
        sw->timers_at = c->deadline;
}

/* Makes room for one more member: forgets the tombstone due soonest. */
static int make_room(rumor_swim_t *sw)
{
    if (sw->nmem < sw->cap)
        return 1;
    size_t best = sw->nmem;
    for (size_t i = 0; i < sw->nmem; i++)
        if (sw->mem[i].m.state >= RUMOR_SWIM_DEAD &&
            (best == sw->nmem || sw->mem[i].deadline < sw->mem[best].deadline))
            best = i;
    if (best == sw->nmem)
        return 0;
    memmove(&sw->mem[best], &sw->mem[best + 1], (sw->nmem - best - 1) * sizeof *sw->mem);
    memmove(&sw->ids[best], &sw->ids[best + 1], (sw->nmem - best - 1) * sizeof *sw->ids);
    sw->nmem--;
    return 1;
}

/* Does update u win over our record c? Versions (incarnation, refutation)
 * compare first; at equal versions LEFT > DEAD > SUSPECT > ALIVE. LEFT is
 * final for its incarnation: only a later life comes back. */
static int supersedes(const rumor_swim_member_t *u, const rumor_swim_member_t *c)
{
    if (c->state == RUMOR_SWIM_LEFT && u->incarnation <= c->incarnation)
        return 0;
    if (u->state == RUMOR_SWIM_LEFT)
        return u->incarnation >= c->incarnation;
    if (u->incarnation != c->incarnation)
        return u->incarnation > c->incarnation;
    if (u->refutation != c->refutation)
        return u->refutation > c->refutation;
    return u->state > c->state;
}

/* An update about ourselves: a suspicion or death of this life is refuted
 * by raising our refutation number past it (SWIM section 4.2); our record
 * travels as entry 0 of everything we send, so the refutation spreads from
 * whoever hears from us. */
static void about_self(rumor_swim_t *sw, double now, const rumor_swim_member_t *u)
{
    struct swim_mem *s = swim_self(sw);
    if (sw->left || u->incarnation != s->m.incarnation ||
        (u->state != RUMOR_SWIM_SUSPECT && u->state != RUMOR_SWIM_DEAD) ||
        u->refutation < s->m.refutation)
        return;
    if (u->refutation == UINT32_MAX) {
        rumor_warn("swim: cannot refute %s at refutation %u (the counter is spent)",
                   rumor_swim_state_name(u->state), u->refutation);
        return;
    }
    s->m.refutation = u->refutation + 1;
    s->m.since = now;
    sw->stats.refuted++;
    swim_health(sw, +1); /* others did not hear from us in time */
    sw->next_gossip = now; /* tell a few members at once */
    rumor_debug("swim: %016llx refutes %s with refutation %u", (unsigned long long)s->m.id,
                rumor_swim_state_name(u->state), s->m.refutation);
}

/* Applies one update (validated). from_state: it came in a full-state
 * sync, where a death is only a suspicion (as in memberlist): the member
 * gets a suspicion timeout to refute, which is how members declared dead
 * across a partition come back after it heals. Returns 1 when the table
 * changed. */
int swim_apply(rumor_swim_t *sw, double now, rumor_swim_member_t u, int from_state)
{
    if (u.id == sw->cfg.self_id) {
        about_self(sw, now, &u);
        return 0;
    }
    int was_dead = from_state && u.state == RUMOR_SWIM_DEAD;
    int ours = u.by == sw->cfg.self_id; /* swim_declare's */
    if (was_dead) {
        u.state = RUMOR_SWIM_SUSPECT;
        u.by = 0;
    }
    if (u.state != RUMOR_SWIM_SUSPECT)
        u.by = 0;
    u.since = now;
    int found;
    size_t p = find_pos(sw, u.id, &found);
    if (!found) {
        /* A suspicion of a stranger tells nothing; a tombstone from a full
         * state would bounce between peers' tables forever. */
        if (u.state == RUMOR_SWIM_SUSPECT || (from_state && u.state != RUMOR_SWIM_ALIVE))
            return 0;
        size_t before = sw->nmem;
        if (!make_room(sw)) {
            rumor_debug("swim: member table full (%zu); %016llx not added", sw->nmem,
                        (unsigned long long)u.id);
            return 0;
        }
        if (sw->nmem != before)
            p = find_pos(sw, u.id, &found);
        memmove(&sw->mem[p + 1], &sw->mem[p], (sw->nmem - p) * sizeof *sw->mem);
        memmove(&sw->ids[p + 1], &sw->ids[p], (sw->nmem - p) * sizeof *sw->ids);
        sw->ids[p] = u.id;
        sw->nmem++;
        struct swim_mem *c = &sw->mem[p];
        c->m = u;
        set_timer(sw, c, now);
        if (swim_in_view(sw, c)) {
            sw->version++;
            sw->nview++;
            order_insert(sw, u.id);
        }
        swim_enqueue(sw, u.id);
        sw->stats.updates_applied++;
        rumor_debug("swim: new member %016llx %s (%s)", (unsigned long long)u.id,
                    rumor_swim_state_name(u.state), u.endpoint);
        return 1;
    }
    struct swim_mem *c = &sw->mem[p];
    if (u.state == RUMOR_SWIM_SUSPECT && c->m.state == RUMOR_SWIM_SUSPECT &&
        u.incarnation == c->m.incarnation && u.refutation == c->m.refutation) {
        if (was_dead && c->nconfirm < sw->cfg.suspicion_confirm) {
            c->nconfirm = sw->cfg.suspicion_confirm; /* another peer declared it dead */
            shorten(sw, c);
        }
        swim_confirm(sw, c, u.by); /* the same suspicion, maybe from another suspecter */
        return 0;
    }
    if (!supersedes(&u, &c->m))
        return 0;
    int was_in = swim_in_view(sw, c);
    int moved = strcmp(u.endpoint, c->m.endpoint) || u.incarnation != c->m.incarnation ||
                u.reach != c->m.reach || strcmp(u.relay, c->m.relay);
    int old_state = c->m.state;
    c->m = u;
    if (u.state == RUMOR_SWIM_SUSPECT) {
        /* a new suspicion (of this version). A death another peer already
         * declared, met in a full state, has been confirmed enough. */
        c->susp_since = now;
        c->nsusp = 0;
        c->nconfirm = was_dead ? sw->cfg.suspicion_confirm : 0;
        if (u.by)
            c->susp_by[c->nsusp++] = u.by;
    }
    set_timer(sw, c, now);
    int is_in = swim_in_view(sw, c);
    if (was_in != is_in || (is_in && moved))
        sw->version++;
    if (was_in != is_in)
        sw->nview = is_in ? sw->nview + 1 : sw->nview - 1;
    if (is_in && !was_in)
        order_insert(sw, u.id);
    swim_enqueue(sw, u.id);
    sw->stats.updates_applied++;
    if (u.state == RUMOR_SWIM_DEAD && old_state != u.state && !ours)
        rumor_info("swim: %016llx (%s) dead, as another member declared", (unsigned long long)u.id,
                   u.endpoint);
    else if (old_state != u.state)
        rumor_debug("swim: %016llx %s -> %s (incarnation %llu.%u)", (unsigned long long)u.id,
                    rumor_swim_state_name(old_state), rumor_swim_state_name(u.state),
                    (unsigned long long)u.incarnation, u.refutation);
    return 1;
}

/* Marks a member we hold with record `c` as `state` at its current version. */
void swim_declare(rumor_swim_t *sw, double now, struct swim_mem *c, int state)
{
    rumor_swim_member_t u = c->m;
    u.state = state;
    u.by = sw->cfg.self_id;
    swim_apply(sw, now, u, 0);
}

void swim_enqueue(rumor_swim_t *sw, uint64_t id)
{
    for (size_t i = 0; i < sw->nbq; i++)
        if (sw->bq[i].id == id) {
            sw->bq[i].tx = 0;
            sw->bq[i].order = ++sw->border;
            return;
        }
    if (sw->nbq == sw->cap) { /* drop updates about members forgotten since */
        size_t keep = 0;
        for (size_t i = 0; i < sw->nbq; i++)
            if (swim_find(sw, sw->bq[i].id))
                sw->bq[keep++] = sw->bq[i];
        sw->nbq = keep;
    }
    if (sw->nbq < sw->cap)
        sw->bq[sw->nbq++] = (struct swim_bcast){ id, 0, ++sw->border };
}

/* ------------------------------------------------------------ the view */

size_t rumor_swim_view(const rumor_swim_t *sw, rumor_swim_member_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < sw->nmem; i++)
        if (swim_in_view(sw, &sw->mem[i])) {
            if (n < cap)
                out[n] = sw->mem[i].m;
            n++;
        }
    return n;
}

uint64_t rumor_swim_view_version(const rumor_swim_t *sw)
{
    return sw->version;
}

const rumor_swim_member_t *rumor_swim_find(const rumor_swim_t *sw, uint64_t id)
{
    struct swim_mem *c = swim_find((rumor_swim_t *)sw, id);
    return c ? &c->m : NULL;
}

void rumor_swim_stats(const rumor_swim_t *sw, rumor_swim_stats_t *out)
{
    *out = sw->stats;
}

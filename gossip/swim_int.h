/* SWIM internals shared by swim.c (protocol), swim_table.c (member table)
 * and swim_body.c (the body codec, laid out in docs/membership.md section
 * 1.6). Not installed. */
#ifndef RUMOR_SWIM_INT_H
#define RUMOR_SWIM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "swim.h"

#define SWIM_MAX_HELPERS 16 /* indirect_k's bound */
#define SWIM_NRELAYS 64     /* indirect probes in flight for others */
#define SWIM_CONFIRM_MAX 8  /* suspicion_confirm's bound */
#define SWIM_DYNAMIC_MIN_VIEW 16 /* smaller views keep the fixed suspicion timeout */

/* One member: the public record plus its timer. */
struct swim_mem {
    rumor_swim_member_t m;
    double deadline; /* SUSPECT: declared dead then; DEAD, LEFT: forgotten then */
    double susp_since; /* SUSPECT: when this peer's suspicion (of this version) began */
    int nsusp;         /* SUSPECT: the suspecters heard (susp_by), the first included */
    int nconfirm;      /* SUSPECT: confirmations counted (swim_table.c) */
    uint64_t susp_by[SWIM_CONFIRM_MAX + 1];
};

/* A pending update to disseminate: the member's current record is sent. */
struct swim_bcast {
    uint64_t id;
    uint32_t tx;    /* times sent so far */
    uint64_t order; /* larger = newer */
};

/* A probe this peer makes for another member (a PROBE_REQ it accepted). */
struct swim_relay {
    int used;
    uint32_t my_seq, their_seq;
    uint64_t requester, target;
    char requester_ep[RUMOR_SWIM_ENDPOINT_MAX];
    double expires;
};

struct rumor_swim {
    rumor_swim_config_t cfg; /* defaults applied; self_endpoint points at self_ep */
    char self_ep[RUMOR_SWIM_ENDPOINT_MAX];
    rumor_swim_send_fn send;
    void *ctx;

    struct swim_mem *mem; /* sorted by id; self included */
    uint64_t *ids;        /* mem[i].m.id, packed: what find_pos searches */
    size_t nmem, cap;
    size_t nview; /* members in the view, self included */

    uint64_t *order; /* probe order: a shuffled list of member ids */
    size_t norder, order_pos;

    struct swim_bcast *bq;
    size_t nbq;
    uint64_t border;

    char seeds[RUMOR_SWIM_MAX_SEEDS][RUMOR_SWIM_ENDPOINT_MAX];
    int nseeds, seed_pos;

    struct swim_relay relays[SWIM_NRELAYS];

    struct {
        int active, acked, indirect_sent, nhelpers;
        int heard_other;  /* a member other than the target was heard meanwhile */
        uint64_t target;
        uint32_t seq;
        double direct_deadline, end;
        uint64_t helpers[SWIM_MAX_HELPERS];
    } probe;

    uint32_t seq;
    int started, left;
    int health;        /* Lifeguard's local health multiplier, 0 .. SWIM_HEALTH_MAX:
                        * this peer's probe times are (health + 1) times the
                        * configured ones (swim.c) */
    double next_probe, next_gossip;
    double due; /* what next_deadline says: recomputed after every change */
    double timers_at; /* no member's timer (suspicion, tombstone) falls before
                       * this: a lower bound kept by set_timer in O(1), made
                       * exact by rumor_swim_tick's scan when it is reached,
                       * so a tick or a message costs no scan of the table */
    uint64_t rounds, reprobes, version;
    rumor_topo_rng_t rng; /* xoshiro256**, seeded from (seed, self id) */
    rumor_swim_stats_t stats;
    uint8_t buf[RUMOR_WIRE_MAX_BODY];
};

/* ---- swim_body.c: the body codec */
#define SWIM_BODY_FIXED 4   /* version, flags, count */
#define SWIM_HEALTH_MAX 8 /* probe times stretch at most 9-fold */
#define SWIM_ENTRY_FIXED 22 /* id, incarnation, refutation, state, endpoint length */
#define SWIM_STATE_MASK 0x03u /* entry byte 20: the state; the high bits say how it is reached */
#define SWIM_BY 0x04u         /* entry byte 20: a SUSPECT entry ends with its suspecter's id */
#define SWIM_FLAGS_KNOWN (RUMOR_SWIM_F_SYNC | RUMOR_SWIM_F_STATE)

/* A body being written into a caller's buffer. */
struct body_w {
    uint8_t *buf;
    size_t cap, len;
    uint16_t count;
};

/* A received body, validated by swim_body_parse. */
struct swim_body {
    uint8_t flags;
    uint16_t count;                          /* entries; entry 0 is the sender's */
    uint64_t target_id;                      /* PROBE_REQ only */
    char target_ep[RUMOR_SWIM_ENDPOINT_MAX]; /* PROBE_REQ only */
    const uint8_t *entries;                  /* count entries, back to back */
};

void swim_body_begin(struct body_w *w, uint8_t *buf, size_t cap, uint8_t flags);
/* The PROBE_REQ target; right after begin. */
void swim_body_target(struct body_w *w, uint64_t id, const char *endpoint);
/* Appends a member's record; -1 (nothing written) when it does not fit. */
int swim_body_entry(struct body_w *w, const rumor_swim_member_t *m);
/* Writes the count; returns the body's length. */
size_t swim_body_end(struct body_w *w);

/* Checks every byte of a body of `type` from `sender` (life
 * sender_inc). Returns 0 and fills *out, or a rumor_wire_reject reason with
 * *why saying what was wrong. */
int swim_body_parse(const void *body, size_t len, int type, uint64_t sender, uint64_t sender_inc,
                    struct swim_body *out, const char **why);

/* Decodes the entry at p (inside a parsed body) into *m (since = 0);
 * returns the next entry. */
const uint8_t *swim_body_get(const uint8_t *p, rumor_swim_member_t *m);

/* ---- swim_table.c: the member table */
/* ALIVE or SUSPECT, or self: a member of the view. */
int swim_in_view(const rumor_swim_t *sw, const struct swim_mem *c);
/* swim.c: raises (+1) or lowers (-1) the local health multiplier. */
void swim_health(rumor_swim_t *sw, int delta);
/* The record of id, NULL when unknown (binary search). */
struct swim_mem *swim_find(rumor_swim_t *sw, uint64_t id);
struct swim_mem *swim_self(rumor_swim_t *sw);
size_t swim_view_size(const rumor_swim_t *sw);
/* Times an update is sent: retransmit_mult * ceil(log2(n + 1)). */
uint32_t swim_retransmit_limit(const rumor_swim_t *sw);
/* Applies a validated update by the precedence rules (an update about
 * ourselves may make us refute); from_state: it came in a full state. 1
 * when the table changed. May move records: pointers into sw->mem are
 * stale afterwards, except for the record updated in place. */
int swim_apply(rumor_swim_t *sw, double now, rumor_swim_member_t u, int from_state);
/* Marks the member with record c as `state` at its current version (a
 * suspicion names us as its suspecter). */
void swim_declare(rumor_swim_t *sw, double now, struct swim_mem *c, int state);
/* The suspicion timeout after `confirmations` other suspecters (Lifeguard). */
double swim_suspicion_timeout(const rumor_swim_t *sw, int confirmations);
/* Member `by` suspects c (SUSPECT) at its version too: shortens its timer. */
void swim_confirm(rumor_swim_t *sw, struct swim_mem *c, uint64_t by);
/* Reshuffles the probe order over the view. */
void swim_order_rebuild(rumor_swim_t *sw);
/* Queues (or requeues, as new) an update about id. */
void swim_enqueue(rumor_swim_t *sw, uint64_t id);

#endif

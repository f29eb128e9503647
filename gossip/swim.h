/* SWIM: membership without a coordinator (docs/membership.md is the spec).
 *
 * Each peer runs one rumor_swim_t. It starts from a bootstrap list (any live
 * peer will do) and learns the swarm through SWIM (Das, Gupta & Motivala
 * 2002) with a few Lifeguard refinements (Dadgar et al. 2018): round-robin
 * probes in shuffled order, indirect probes through k helpers, suspicion
 * with incarnation-numbered refutation, infection-style dissemination
 * piggybacked on every message, full-state push-pull on join and every few
 * intervals, and re-probes of dead members and seeds so that healed
 * partitions merge.
 *
 * The module is sans-I/O: it never touches a socket, a clock or a thread.
 * The caller (the mixer's comm thread) feeds it the time (rumor_swim_tick at
 * rumor_swim_next_deadline) and every SWIM message it receives
 * (rumor_swim_on_message), and sends what the module hands to its send
 * callback as a header (type, aux = seq) plus one body frame. Not
 * thread-safe: one thread owns an instance.
 *
 * A member's version is the pair (incarnation, refutation), compared
 * lexicographically: `incarnation` is the process's life, the header's
 * incarnation field (docs/protocol.md section 7), larger after a restart;
 * `refutation` is SWIM's incarnation number, which the member raises to
 * refute a suspicion within one life. */
#ifndef RUMOR_SWIM_H
#define RUMOR_SWIM_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "topology.h"
#include "wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_SWIM_BODY_VERSION 1
#define RUMOR_SWIM_ENDPOINT_MAX 128 /* bytes with the terminator: endpoints are 7..127 chars */
#define RUMOR_SWIM_MAX_SEEDS 64

/* Body flags (byte 1 of a SWIM body; unknown bits are rejected). */
#define RUMOR_SWIM_F_SYNC 0x01u  /* PROBE: answer with your full state (ACKs with F_STATE) */
#define RUMOR_SWIM_F_STATE 0x02u /* the entries are (part of) the sender's full state */

/* Member states. Precedence at equal version: LEFT > DEAD > SUSPECT > ALIVE. */
enum rumor_swim_state {
    RUMOR_SWIM_ALIVE = 0,
    RUMOR_SWIM_SUSPECT = 1, /* missed a probe; still a member until declared dead */
    RUMOR_SWIM_DEAD = 2,    /* suspected for suspicion_timeout without refuting */
    RUMOR_SWIM_LEFT = 3     /* left in order; final for that incarnation */
};

/* How a member is reached, beside its state (entry byte 20's high bits). */
#define RUMOR_SWIM_RELAYED 0x40u  /* its endpoint is a relay's (gossip/relay.h) */
#define RUMOR_SWIM_RELAY 0x80u    /* it relays for others: its control endpoint follows */

typedef struct rumor_swim_config {
    uint64_t self_id;          /* rumor_wire_peer_id of our key; never 0 */
    uint64_t incarnation;      /* this process's life, as in the header (restart => larger) */
    const char *self_endpoint; /* what others send to: "tcp://10.0.0.2:5001" (copied) */
    int self_relayed;          /* self_endpoint is a relay's */
    const char *self_relay;    /* this peer relays; its control endpoint (copied), or NULL */
    double probe_interval;     /* s between probes (0: 0.5) */
    double probe_timeout;      /* s to wait for a direct ACK before asking helpers
                                  (0: probe_interval / 2; must be < probe_interval) */
    int indirect_k;            /* helpers asked per failed direct probe (0: 3) */
    double suspicion_timeout;  /* s a suspect has to refute (0: auto, suspicion_mult *
                                  max(1, log10 n) * probe_interval, n = view size) */
    double suspicion_mult;     /* (0: 5) */
    double suspicion_max_mult; /* Lifeguard's dynamic suspicion: a suspicion that no
                                  other member confirms lasts this many times the
                                  timeout above; each member that suspects it too
                                  (up to suspicion_confirm) shortens it, down to the
                                  timeout above (0: 6; 1: the timeout is fixed) */
    int suspicion_confirm;     /* confirmations that bring it down (0: 3); a view of
                                  fewer than 16, or with fewer other members (n - 2),
                                  has the fixed timeout */
    double gossip_interval;    /* s between gossip rounds while updates are pending
                                  (0: probe_interval / 2; < 0: no gossip rounds) */
    int gossip_fanout;         /* members each gossip round sends to (0: 3) */
    int retransmit_mult;       /* each update is sent mult * ceil(log2(n + 1)) times (0: 3) */
    int sync_every;            /* push-pull full state with a random member every this
                                  many probe intervals, times 1 + ceil(log2(n / 32))
                                  beyond 32 members (0: 10; < 0: never) */
    int reprobe_every;         /* push-pull with a dead member or a seed outside the
                                  view every this many intervals (0: 5; < 0: never) */
    double tombstone_timeout;  /* s dead and left members are remembered (0: 60) */
    int max_members;           /* members remembered, self and tombstones included (0: 4096) */
    uint64_t seed;             /* probe order and helper choice (mixed with self_id) */
} rumor_swim_config_t;

/* One member as this peer sees it. */
typedef struct rumor_swim_member {
    uint64_t id;
    uint64_t incarnation;     /* the member's process life */
    uint32_t refutation;      /* SWIM incarnation number within that life */
    int state;                /* enum rumor_swim_state */
    unsigned reach;           /* RUMOR_SWIM_RELAYED, RUMOR_SWIM_RELAY */
    double since;             /* caller's time when this record last changed here */
    uint64_t by;              /* SUSPECT: the member that suspected it, as this record
                               * says (0: not said); others' suspicions of the same
                               * version confirm it (Lifeguard) */
    char endpoint[RUMOR_SWIM_ENDPOINT_MAX];
    char relay[RUMOR_SWIM_ENDPOINT_MAX]; /* with RUMOR_SWIM_RELAY: its relay's control */
} rumor_swim_member_t;

/* What an instance did and refused, since create. */
typedef struct rumor_swim_stats {
    uint64_t probes;          /* failure-detector probes sent */
    uint64_t probe_reqs;      /* indirect probe requests sent */
    uint64_t acks_direct;     /* probes answered by the target itself */
    uint64_t acks_indirect;   /* probes answered only through a helper */
    uint64_t relayed;         /* probes made for another member, and acks forwarded */
    uint64_t suspected;       /* members this peer suspected itself */
    uint64_t declared_dead;   /* suspicions this peer saw expire */
    uint64_t confirmations;   /* suspicions confirmed by another suspecter (Lifeguard) */
    uint64_t refuted;         /* times this peer raised its refutation number */
    uint64_t syncs;           /* full-state exchanges started */
    uint64_t messages_sent;   /* send callback calls */
    uint64_t send_failed;     /* ... that returned < 0 */
    uint64_t updates_applied; /* entries that changed the member table */
    uint64_t late_ticks;      /* ticks more than a probe interval late (the caller stalled) */
    int health;               /* local health multiplier now (Lifeguard): 0 healthy, up to 8;
                               * this peer's probe interval and timeout are (health + 1)
                               * times the configured ones */
    int health_max;           /* the highest it reached */
    rumor_wire_stats_t wire;  /* verdicts of rumor_swim_on_message */
} rumor_swim_stats_t;

typedef struct rumor_swim rumor_swim_t;

/* The caller's transport: send one SWIM message of `type` (RUMOR_WIRE_PROBE,
 * _PROBE_REQ or _ACK) with header aux = seq and the body (len bytes, at most
 * RUMOR_WIRE_MAX_BODY; valid only during the call: copy it) to the member
 * `to_id` at `endpoint`. to_id is 0 for a seed whose id is not known yet.
 * The header's sender and incarnation are the caller's own (the config's).
 * Return 0, or < 0 when the message could not be queued (counted; SWIM
 * treats it as lost). Must not call back into the instance. */
typedef int (*rumor_swim_send_fn)(void *ctx, uint64_t to_id, const char *endpoint, int type,
                                  uint32_t seq, const void *body, size_t len);

/* ------------------------------------------------------------ lifetime */

/* Makes an instance with the config (zero fields take the defaults above);
 * send and ctx are kept. Nothing is sent before the first rumor_swim_tick.
 * RUMOR_EINVAL for a zero id, a bad endpoint (see rumor_swim_endpoint_valid)
 * or out-of-range values; *out is NULL on failure. */
int rumor_swim_create(const rumor_swim_config_t *cfg, rumor_swim_send_fn send, void *ctx,
                      rumor_swim_t **out) RUMOR_WUR;

/* Frees the instance and sets *sp to NULL; safe on NULL and twice. Sends
 * nothing: call rumor_swim_leave first for an orderly departure. */
void rumor_swim_destroy(rumor_swim_t **sp);

/* Adds a bootstrap endpoint. While this peer knows no other live member it
 * probes every seed each interval (asking for the full state); afterwards
 * it re-probes, every 2 * reprobe_every intervals at most, a seed whose
 * endpoint no member of its view holds, so that a partition heals even
 * after its tombstones are gone (a healthy swarm sends nothing for this).
 * Our own endpoint and repeats are ignored.
 * RUMOR_EINVAL for a bad endpoint, RUMOR_ENOMEM past RUMOR_SWIM_MAX_SEEDS. */
int rumor_swim_add_seed(rumor_swim_t *sw, const char *endpoint) RUMOR_WUR;

/* ------------------------------------------------------------ driving */

/* Runs what is due at `now` (the caller's monotonic clock, seconds, never
 * going back): starts a probe each interval, asks helpers when the direct
 * ACK is late, suspects a target not acknowledged by the end of its
 * interval, declares expired suspects dead, gossips pending updates, syncs,
 * re-probes seeds and the dead, forgets old tombstones. Sends through the
 * callback. A tick more than a probe interval later than the deadline asked
 * for (the caller was frozen or starved) suspects nobody for that interval
 * and extends running suspicions by the delay: the silence was ours.
 * Returns 0 (RUMOR_EINVAL for a NaN time). */
int rumor_swim_tick(rumor_swim_t *sw, double now);

/* When rumor_swim_tick must run next (for the caller's poll timeout); the
 * creation-time value 0 means "now". */
double rumor_swim_next_deadline(const rumor_swim_t *sw);

/* Judges and applies one received SWIM message. The caller has decoded and
 * checked the header (rumor_wire_decode, rumor_wire_check: swarm, frame
 * count and body size) and passes sender, incarnation, type, aux (= seq)
 * and the body frame (NULL, 0 when there was none). Robust to any bytes.
 * FUZZ TARGET (tests/fuzz): any body/len, any type, sender and incarnation.
 * The whole body is validated before anything is applied; a rejected
 * message changes nothing and is not answered. Returns 0, or -reason
 * (enum rumor_wire_reject) with a RUMOR_EPROTO message: BAD_TYPE (not
 * PROBE/PROBE_REQ/ACK), BAD_SENDER (0), FROM_SELF, OLD_INCARNATION (the
 * sender's life is older than one already seen), BAD_FRAMES (no body),
 * BODY_TOO_LARGE, BAD_VERSION (body version), BAD_FLAGS (unknown body
 * flag, SYNC on another type than PROBE, STATE on a PROBE_REQ) and
 * BAD_PAYLOAD_SIZE (wire.h has no reason for body content) for any
 * other malformed body (truncated, counts beyond the bytes, trailing
 * bytes, bad state, invalid endpoint, id 0, a first entry that is not the
 * sender's own). Every verdict is counted in the stats. */
int rumor_swim_on_message(rumor_swim_t *sw, double now, uint64_t sender,
                          uint64_t sender_incarnation, int type, uint32_t seq, const void *body,
                          size_t len);

/* Any other accepted message from a member (PARAMS, HEARTBEAT, ...) is
 * proof of life: it answers a probe of that member in flight. Unknown
 * senders and other lives are ignored (their own SWIM messages tell). */
void rumor_swim_heard(rumor_swim_t *sw, double now, uint64_t sender, uint64_t incarnation);

/* Announces that this peer leaves: marks itself LEFT (final for this
 * incarnation) and sends it directly to up to max(indirect_k, gossip_fanout)
 * * 2 members; afterwards the instance stops probing but still answers
 * probes (with LEFT) and gossips. Returns how many members were told, or
 * RUMOR_ESTATE when already left. */
int rumor_swim_leave(rumor_swim_t *sw, double now);

/* This peer is reached at another address now (its relay changed;
 * relayed: the address is a relay's): its own record takes it and a higher
 * refutation number, so that it supersedes the old one on every member it
 * reaches (each message carries it; a gossip round goes out at once).
 * Returns 1 when it changed, 0 when it was that already; RUMOR_EINVAL for
 * a bad endpoint, RUMOR_ESTATE after leaving. */
int rumor_swim_set_endpoint(rumor_swim_t *sw, double now, const char *endpoint,
                            int relayed) RUMOR_WUR;

/* ------------------------------------------------------------ the view */

/* The members (ALIVE and SUSPECT: a suspect is a member until declared
 * dead, as SWIM says) and self, sorted by increasing id. Writes at most cap
 * of them to out (may be NULL when cap is 0) and returns how many there are. */
size_t rumor_swim_view(const rumor_swim_t *sw, rumor_swim_member_t *out, size_t cap);

/* Grows whenever the view's set of ids changes, or a member in it changes
 * endpoint or incarnation (restarted): the caller rebuilds its neighbours
 * when this moves. Suspicions and refutations do not move it. */
uint64_t rumor_swim_view_version(const rumor_swim_t *sw);

/* The record of a member (any state, self included), or NULL when unknown.
 * Valid until the next call that changes the instance. */
const rumor_swim_member_t *rumor_swim_find(const rumor_swim_t *sw, uint64_t id);

/* Counters since create. */
void rumor_swim_stats(const rumor_swim_t *sw, rumor_swim_stats_t *out);

/* "alive", "suspect", "dead", "left" ("unknown" otherwise). */
const char *rumor_swim_state_name(int state);

/* 1 when s is an endpoint SWIM accepts: "tcp://" then printable ASCII
 * without spaces, 7..RUMOR_SWIM_ENDPOINT_MAX-1 bytes in all; else 0. */
int rumor_swim_endpoint_valid(const char *s, size_t len);

/* ------------------------------------------------------ the neighbours */

/* The topology over a view: the family `spec` (a topology spec without its
 * size, or with N in its place: "ring", "exp", "torus", "rreg:4:seed=1",
 * "rreg:N:4", "base:2", "onepeer-exp") instantiated for n = the view's size,
 * member i of the sorted view being node i. Equal views give the same graph
 * and weights on every peer. Sizes the family cannot take are adapted, the
 * same way everywhere (docs/membership.md): n = 1 is a lone node with W = 1;
 * torus and grid take the squarest RxC = n (torus falls back to a ring
 * when no factors >= 2 exist); rreg, ws and base lower degrees above n - 1
 * (rreg and ws become complete:n) and raise an odd rreg degree on odd n;
 * hypercube needs n a power of two. Weights are the library's defaults:
 * Metropolis-Hastings for static graphs, the construction's own for
 * onepeer-exp, base and exp:directed. view must be sorted by strictly
 * increasing id and hold self_id; *self_node gets self's node. On failure
 * (RUMOR_EINVAL with a message) *topo is NULL. The caller frees the topology
 * with rumor_topo_destroy. */
int rumor_swim_topology(const char *spec, const rumor_swim_member_t *view, size_t n,
                        uint64_t self_id, rumor_topo_t **topo, int *self_node) RUMOR_WUR;

/* The sized spec rumor_swim_topology parses for n members ("ring:5",
 * "complete:3", "torus:2x3"; "alone" for n = 1), into buf. Returns its
 * length, or RUMOR_EINVAL (with a message) for a family or size it cannot
 * instantiate or a buffer too small. */
int rumor_swim_topology_spec(const char *spec, size_t n, char *buf, size_t cap) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

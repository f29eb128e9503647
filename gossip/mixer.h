/* The D-PSGD mixer: one peer's side of gossip averaging (Lian et al. 2017).
 *
 * Round k: the peer sends its parameters x_i(k) to its out-neighbours while
 * it computes its gradient at the same x_i(k); chunks of the neighbours'
 * x_j(k) are accumulated as they arrive (acc += W_ij * chunk) into one
 * buffer; when every in-neighbour's chunks are in, or the round's deadline
 * passes, the mix is finished: x = acc + (1 - w_c) x_i(k) for each chunk c,
 * where w_c is the weight that actually arrived for chunk c. A neighbour that
 * missed the deadline is thus absent for that round and its weight moves to
 * the self-weight: the row stays stochastic, the round never hangs. The
 * caller then applies its optimizer step to the mixed parameters.
 *
 * A comm thread owns the sockets, so sending, receiving and accumulating
 * overlap the caller's gradient computation. Parameters live in buffers the
 * mixer owns and rotates (the current x, the accumulator of this round and of
 * the next, a retired x still being sent): about 3-4 model copies whatever
 * the degree, allocated once. rumor_mixer_round_end hands back the buffer
 * that now holds the parameters; the caller's model must point at it.
 *
 * Neighbours may cut the space differently (another chunk size, pipeline
 * stages): a PARAMS message carries any range [offset, offset + length) of
 * the space, and a neighbour's data for a round is complete when its ranges
 * cover the space.
 *
 * Messages from another swarm or model, from an old incarnation of a peer,
 * for a round already mixed or too far ahead, malformed, overlapping what
 * arrived, or holding NaN or Inf are dropped and counted. A message is
 * judged whole before any of it is used: a dropped one changes nothing,
 * not even what is known of its sender (its incarnation, round, liveness). */
#ifndef RUMOR_MIXER_H
#define RUMOR_MIXER_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "curve.h"
#include "err.h"
#include "ops.h"
#include "swim.h"
#include "topology.h"
#include "transport.h"
#include "wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default chunk: 2^18 floats, 1 MiB. Small enough that a chunk's finite
 * check, accumulation and mixing read it from the L2 cache (4 MiB chunks cost
 * ~25% more CPU a byte here, measured by tests/bench/bench_gossip), large
 * enough to amortize a message's overhead. */
#define RUMOR_MIXER_CHUNK ((size_t)1 << 18)

typedef struct rumor_mixer_config {
    const rumor_topo_t *topo;  /* not owned; must outlive the mixer */
    int self;                  /* this peer's node in topo, [0, topo->n) */
    const char *const *endpoints; /* topo->n endpoints peers send to */
    const char *listen;        /* bind address (default: endpoints[self]) */
    const uint64_t *ids;       /* topo->n peer ids (default: node + 1) */
    uint64_t swarm;            /* rumor_wire_swarm_id of the swarm name */
    uint64_t incarnation;      /* default: the realtime clock in ns at create */
    size_t nparams;            /* elements of the flat parameter space */
    size_t chunk_elems;        /* this peer's chunk: the ranges it sends and the
                                * cells it mixes in (default RUMOR_MIXER_CHUNK,
                                * 1 MiB of f32); neighbours may use others */
    size_t max_msg_elems;      /* the most elements one message may carry here
                                * (default the larger of 2^24, 64 MiB of f32,
                                * and chunk_elems): a receiver's limit, not a
                                * grid; a larger range is dropped and counted
                                * (chunk_too_large), one above twice the limit
                                * is cut by libzmq with its connection */
    double round_timeout;      /* the longest a round waits for neighbours (default 10 s):
                                * the deadline adapts to observed round times
                                * (4 x their median) within
                                * [min_round_timeout, round_timeout] */
    double min_round_timeout;  /* default 0.5 s; equal to round_timeout: fixed deadline */
    int async;                 /* asynchronous gossip (AD-PSGD, Lian et al. 2018):
                                * a round never waits; it mixes the newest
                                * parameters each neighbour sent, once each,
                                * if at most `staleness` rounds old */
    int staleness;             /* async: oldest round mixed, k - staleness (default 8) */
    long first_round;          /* the round to start at (a resumed peer's), default 0 */
    int heartbeat_ivl_ms, heartbeat_timeout_ms; /* default 500, 2000 */
    /* Security (CurveZMQ): with keys, every connection is CURVE, only
     * allow's keys get in, peer j's id is rumor_curve_id(peer_keys[j]) (ids
     * is ignored) and a message whose header names another sender than the
     * key that connection authenticated is dropped (bad_identity). */
    const rumor_curve_keypair_t *keys;   /* this peer's keypair; NULL: plaintext */
    const rumor_allowlist_t *allow;      /* required with keys; with open membership it
                                          * must outlive the mixer (members are looked up) */
    const uint8_t (*peer_keys)[32];      /* (topo->n) public keys, with keys */
    /* Membership: a topology family without a size ("ring", "exp",
     * "torus", ...). The mixer then runs SWIM over the peer list (every
     * endpoint is a seed) and the graph is that family over the peers SWIM
     * holds alive, re-derived whenever that view changes, with
     * Metropolis-Hastings weights from the view's degrees. NULL: topo is
     * fixed and dead peers are only left out round by round. */
    const char *membership;
    /* Open membership (with `membership`): max_peers > 0 makes the swarm
     * whoever SWIM holds alive instead of a list's ranks. The config then
     * describes this peer alone: topo, self and peer_keys are ignored (topo
     * may be NULL; this peer is slot 0), endpoints[0] is the address the
     * others dial (NULL: the address bound), ids[0] its id in plaintext
     * (in secure mode its key's id; ids NULL: a random id). A member SWIM
     * announces gets a slot of its own here when it is first needed, up to
     * max_peers slots in all (this peer's included) in the mixer's life; in
     * secure mode it is dialled with the allow-list key whose id is its id
     * (a member whose id matches no allowed key gets none, and is counted
     * as not_allowed). `seeds` (nseeds) are addresses of live peers to join
     * through; in secure mode seed_keys[i] (NULL, or NULL entries: not
     * known) is the key expected at seeds[i], and a seed without one is
     * tried with every allowed key until a handshake succeeds (the seed
     * counts the others as refused: crypto). rumor_mixer_barrier then waits
     * until `min_members` peers (this one included) are alive and each has
     * answered; the ring all-reduce runs over the living (the view's ids in
     * increasing order). Not with async's neighbours or the all-reduce
     * baseline's per-round use: only the final average uses the ring. */
    int max_peers;
    /* Open membership and relays (gossip/relay.h). self_endpoint: this
     * peer is reached through a relay (its SWIM record says so), and where
     * may change while it runs (its relay died and another gave it a new
     * address). The comm thread asks every 0.25 s; a new address is
     * announced through SWIM (rumor_swim_set_endpoint) and the neighbours
     * dial it. Returns its length, or <= 0 when unknown. NULL: endpoints[0]
     * for the whole run, dialled directly. relays_seen: told the members
     * that offer relaying (their records' RUMOR_SWIM_RELAY, the control
     * endpoint in .relay) whenever the view changes. relay_offer: this peer
     * relays, at that control endpoint (announced in its record). The
     * callbacks run on the comm thread and must not call into the mixer. */
    int (*self_endpoint)(void *arg, char *buf, size_t cap);
    /* dial: the transport's dial hook (transport.h), with reach_arg: the
     * address dialled for a member's endpoint. NULL: the endpoint. */
    int (*dial)(void *arg, const char *endpoint, char *out, size_t cap);
    void (*relays_seen)(void *arg, const rumor_swim_member_t *relays, int n);
    void *reach_arg;
    const char *relay_offer;
    const char *const *seeds;
    int nseeds;
    const uint8_t *const *seed_keys;
    int min_members;
    /* Connections per neighbour and ZeroMQ I/O threads (default 1 and 1):
     * CURVE encrypts on the I/O thread a connection lives on, so 2 and 2
     * spread encryption over two cores (chunks may then arrive out of
     * order, which the mixer does not mind). */
    int conns_per_peer, io_threads;
    /* The device whose ops table does the mixing arithmetic (accumulating
     * neighbours' ranges, the mix, the all-reduce's sums). The mixer's
     * buffers are host memory, so a CPU device; NULL: the mixer opens
     * "cpu:1" itself. Not owned; must outlive the mixer. */
    rumor_device_t *dev;
    /* A device whose host_alloc allocates the parameter buffers (a GPU's:
     * page-locked memory, which GPU pipeline stages copy their ranges to and
     * from asynchronously at the bus's speed); NULL: ordinary memory. Not
     * owned; must outlive the mixer. */
    rumor_device_t *host_mem;
    /* Compressed gossip (--compress): CHOCO-SGD (Koloskova et al. 2019).
     * Each peer keeps x_hat, the copy of its parameters its neighbours
     * hold, and s = sum_j W_ij x_hat_j. A round sends q = C(x - x_hat),
     * coded (codec.h); everyone adds what it decodes: x_hat += q at the
     * sender, s += sum_j W_ij q_j at the receivers; then
     * x = x + gamma (s - x_hat). What the codec did not send stays in
     * x - x_hat (error feedback). Every `keyframe_every`-th round (and
     * round 0) sends x in f32 instead and sets x_hat = x, s = the plain
     * D-PSGD mix: it resynchronizes the copies after a lost round, a
     * neighbour that left or came back, a jump. Between a round whose
     * copies went out of sync and the next keyframe, the peer takes no
     * consensus step (rumor_round_stats_t.consensus_skipped). Every peer
     * of a swarm must use the same codec and keyframe interval: a
     * range of another dtype than the round's is dropped
     * (unsupported_dtype). Not with async. */
    rumor_codec_t codec;       /* kind NONE (0): plain D-PSGD */
    double consensus_step;     /* gamma in (0, 1]; 0: rumor_codec_default_gamma */
    int keyframe_every;        /* 0: rumor_codec_default_keyframe */
    /* The settings every peer of the swarm must share (terms.h: "KEY=VALUE"
     * lines, well-formed), sent in every HELLO. A neighbour whose HELLO
     * states other terms (or another model size) is incompatible: its
     * parameters are dropped (incompatible), it is not waited for, and the
     * difference is logged once, naming it. When every neighbour this peer
     * exchanges with is incompatible nothing can be mixed: the barrier and
     * every later round fail with that message
     * (rumor_mixer_incompatible). NULL: none sent, none checked. */
    const char *terms;
    /* A neighbour's f32 range whose distance to this peer's own parameters
     * there is more than outlier_ratio times their norm (at least 0.01 per
     * element) is an outlier, a peer whose training diverged: it is dropped
     * (outlier) and that neighbour is left out of the round (its weight
     * goes to this peer, as for one that missed the deadline), said once a
     * while, naming it. Peers of one swarm sit well within 2x of each
     * other's norm (even two random initializations are sqrt(2) apart).
     * Synchronous uncompressed rounds only. 0: no such check. */
    double outlier_ratio;
    /* Robust mixing against a lying neighbour (mixer_robust.c; README,
     * Security). RUMOR_ROBUST_CLIP: self-centred clipping. Each
     * in-neighbour's f32 range is taken as this peer's own parameters there
     * plus its difference from them, clipped: x_i + sum_j W_ij clip(x_j -
     * x_i), range by range, the range's share of robust_tau (an L2 norm over
     * the whole space: a range of len elements gets robust_tau *
     * sqrt(len / n)). robust_tau 0: twice the least of the in-neighbours'
     * recent differences (RMS per element, averaged over their ranges; 5%
     * of this peer's own RMS before any is known). A neighbour whose recent
     * ranges were mostly clipped and over 8 times as far as the other
     * in-neighbours', while the others' were not, is quarantined for
     * robust_quarantine_s (0: 30 s): left out of every round, its weight
     * going to this peer, said once naming it and counted.
     * RUMOR_ROBUST_TRIMMED: the per-coordinate trimmed mean of the
     * neighbourhood. Element by element, the robust_trim largest and the
     * robust_trim smallest of the in-neighbours' values are left out and
     * the rest are averaged with this peer's own by their weights:
     * (W_ii x_i + sum_kept W_ij x_j) / (W_ii + sum_kept W_ij). An
     * in-neighbour missing there (absent, left out, late) counts as this
     * peer's own value. It needs 2 robust_trim + 1 in-neighbours: create
     * fails with RUMOR_EINVAL on a listed graph where this peer has fewer,
     * and a round of an open swarm's graph with fewer trims (d - 1) / 2
     * (said once). Neighbours' ranges are held until their cells mix (the
     * in-degree times the space, per round in flight), judged and
     * quarantined as with clipping (robust_tau), but not clipped.
     * Synchronous uncompressed rounds only: create fails with RUMOR_EINVAL
     * for async rounds or a codec. RUMOR_ROBUST_NONE (0): weights alone
     * bound a neighbour's influence. */
    int robust;
    int robust_trim;
    double robust_tau;
    double robust_quarantine_s;
    /* Robust mixing's validation probe (gossip/mixer_probe.c; with robust
     * clip or trimmed): every robust_probe rounds (0: never) the
     * in-neighbours' parameters of that round are held whole, as they came,
     * for the caller to score on its validation data
     * (rumor_mixer_probe_take, rumor_mixer_probe_done). A neighbour whose
     * loss sat well above the neighbourhood's median (the caller's own
     * included) in most of its recent probes, while most of the others'
     * did not, is quarantined as for its distances. It holds the in-degree
     * times the space, and a probe round whose last probe is not done is
     * skipped. */
    int robust_probe;
    /* Testing only (tests/rumor-attacker: a lying peer; rumor-peer never
     * sets it): what goes on the wire for round r's range [off, off + n) of
     * this peer's parameters x; out gets n floats. This peer's own mix and
     * training use x, as they would. NULL: x itself. */
    void (*tamper)(void *arg, long round, uint64_t off, const float *x, float *out, size_t n);
    void *tamper_arg;
} rumor_mixer_config_t;

enum { RUMOR_ROBUST_NONE = 0, RUMOR_ROBUST_CLIP = 1, RUMOR_ROBUST_TRIMMED = 2 };

typedef struct rumor_mixer rumor_mixer_t;

typedef struct rumor_round_stats {
    long round;
    int in_neighbors;          /* whom this round waited for */
    int complete;              /* of those, how many sent everything in time */
    int timed_out;             /* the deadline ended the round */
    double wait_s;             /* time round_end waited for the network */
    double disagreement;       /* ||mix - x_i(k)||_2: this peer's distance to its neighbourhood */
    double self_weight;        /* effective W_ii, averaged over chunks */
    double deadline_s;         /* the deadline this round had, from round_begin */
    double round_s;            /* round_begin to the end of the mix */
    long swarm_round;          /* newest round a neighbour is known to be at (-1 none) */
    long behind_round;         /* a neighbour that dropped this peer's parameters
                                * as stale said it is at this round (-1 none):
                                * this peer left behind */
    int window;                /* rounds received ahead of the current one: a
                                * neighbour at swarm_round >= next_round + window
                                * has left this peer behind */
    long next_round;           /* the round to begin next: round + 1, or later
                                * after rumor_mixer_jump / async clock moves */
    int max_staleness;         /* async: oldest contribution mixed, in rounds */
    int members;               /* membership: peers alive in this peer's view */
    int keyframe;              /* --compress: this round sent f32 and resynchronized */
    int consensus_skipped;     /* --compress: the copies of a neighbour's x_hat were
                                * out of sync (a lost or partial round, a change of
                                * neighbours): no consensus step until the next
                                * keyframe */
    uint64_t bytes_sent, bytes_received; /* totals since create */
    double mix_start, mix_end; /* rumor_now() when the round's first and last cells
                                * were mixed (0: none) */
    double recv_start, recv_end; /* rumor_now() when the round's first and last
                                  * accepted ranges arrived (0: none), sent
                                  * ahead ones before the round began too */
    size_t cells;              /* the cells the space is mixed in */
    size_t cells_by_caller;    /* of them, mixed by the caller's threads
                                * (rumor_mixer_set_caller_mixes) */
} rumor_round_stats_t;

/* Binds, connects to every peer this one may talk to, starts the comm
 * thread, and copies `init` (nparams floats) into the first parameter
 * buffer. */
int rumor_mixer_create(const rumor_mixer_config_t *cfg, const float *init,
                       rumor_mixer_t **out) RUMOR_WUR;

/* Tells the neighbours this peer is leaving, waits (at most `grace` seconds)
 * for sends in flight, stops the thread, closes the sockets; nulls *mp. */
void rumor_mixer_destroy(rumor_mixer_t **mp, double grace);

/* The endpoint actually bound ("tcp://127.0.0.1:41234"). */
const char *rumor_mixer_endpoint(const rumor_mixer_t *m);

/* This peer's id in the swarm (the header's sender field). */
uint64_t rumor_mixer_self_id(const rumor_mixer_t *m);

/* Peers alive in this peer's membership view, itself included (1 without
 * membership until the comm thread's first view; the list's size when
 * membership is off). */
int rumor_mixer_members(rumor_mixer_t *m);

/* The buffer holding the current parameters x_i(k) (nparams floats). */
float *rumor_mixer_params(rumor_mixer_t *m);

/* Waits for the check, begun at create, that no other process runs as this
 * peer (mixer_rank.c: a second process started with the same rank; this
 * peer says nothing to anyone until it passed), then until every peer this
 * one exchanges with in any round has answered a HELLO, or `timeout`
 * seconds pass. Returns how many are ready; the rest are logged and treated
 * as absent until they appear. RUMOR_EINVAL, with a message naming the rank
 * and both addresses, when another process is this peer. */
int rumor_mixer_barrier(rumor_mixer_t *m, double timeout);

/* Whether every neighbour this peer exchanges with turned out incompatible
 * (cfg.terms): 1 with the first difference said as the last error
 * (RUMOR_EINVAL: "peer 1 (tcp://...) runs --compress int8 there, ..."),
 * else 0. The barrier and round_begin fail the same way. */
int rumor_mixer_incompatible(rumor_mixer_t *m);

/* Parameters written asynchronously (a GPU stage's range copied into
 * rumor_mixer_params() after its optimizer step): before it sends a round's
 * parameters or serves them to a newcomer, the comm thread asks
 * ready(ctx), which must not block: 1 when they are written, 0 while not
 * yet (it asks again within a millisecond, and the round neither sends nor
 * closes meanwhile), < 0 on an error (logged; they go as they are). Set
 * before round 0; NULL: always ready. */
void rumor_mixer_set_params_ready(rumor_mixer_t *m, int (*ready)(void *ctx), void *ctx);

/* Round k (k = 0, 1, ... in order): starts sending rumor_mixer_params(). */
int rumor_mixer_round_begin(rumor_mixer_t *m, long k);

/* Waits for round k to complete or time out, then mixes. On return
 * *params points at the mixed parameters (also rumor_mixer_params()); the
 * previous buffer must no longer be used. st may be NULL. */
int rumor_mixer_round_end(rumor_mixer_t *m, long k, float **params, rumor_round_stats_t *st);

/* A part of round k's mix, before the whole round: returns 1 once every
 * element of [lo, hi) is mixed (every neighbour waited for sent it, or the
 * round closed), with *mixed pointing at the buffer that round_end will
 * hand over (the range's values at (*mixed)[lo .. hi)), 0 when `wait`
 * seconds passed first (0: do not wait), < 0 on an error. A pipelined
 * peer's stage steps its optimizer on its own range as soon as that range
 * is mixed, while other stages still compute: the first call starts the
 * round's close as round_end would (its deadline runs from round_begin),
 * and the caller's x(k) (rumor_mixer_params() before) stays valid until
 * round_end, which must follow. Safe from several threads at once; the
 * caller writes only inside ranges it was handed. With --compress and in
 * asynchronous mode the mix is made whole at the close: ranges wait for it.
 * With rumor_mixer_set_caller_mixes the calling thread mixes the range's
 * complete cells itself, and wait < 0 only does that (below). */
int rumor_mixer_range_wait(rumor_mixer_t *m, long k, size_t lo, size_t hi, double wait,
                           float **mixed) RUMOR_WUR;

/* Round k of mixer m as a source of stages' parameters: `round` is a
 * rumor_mixer_round_t and the function has the shape of a pipeline's next()
 * (pipeline.h, rumor_trainer_grads_step): rumor_mixer_range_wait on the
 * stage's range. */
typedef struct rumor_mixer_round {
    rumor_mixer_t *m;
    long k;
} rumor_mixer_round_t;
int rumor_mixer_round_range(void *round, int stage, size_t lo, size_t hi, double wait,
                            float **mixed) RUMOR_WUR;
/* ... and the shape of rumor_trainer_stepped_fn: x[0, upto) is x(k + 1),
 * sent ahead (rumor_mixer_send_ahead). */
int rumor_mixer_round_stepped(void *round, const float *x, size_t upto) RUMOR_WUR;

/* Pipelines the next round's send: after rumor_mixer_range_wait handed over
 * round k - 1's mix (`x`, the buffer round_end will hand over) and the
 * caller stepped its optimizer on x[0, upto), those elements are x(k) for
 * good, and they go to round k's out-neighbours now, before round_begin(k),
 * while later cells of round k - 1 still arrive. On slow links a round's
 * send then starts as its predecessor's first cell lands instead of after
 * its last: each link carries the next round while this one completes.
 * Call with growing `upto`; round_begin(k) sends the rest. Ignored (round
 * k goes at round_begin) with --compress, in asynchronous rounds, with
 * membership (the view may change at round_begin), and with a
 * set_params_ready hook. 0, or RUMOR_ESTATE out of order. */
int rumor_mixer_send_ahead(rumor_mixer_t *m, long k, const float *x, size_t upto) RUMOR_WUR;

/* Leaves the mixing of complete cells (a pass over the parameters: x =
 * acc + (1 - w) x, and the disagreement) to the caller's threads instead of
 * the comm thread: a pipelined peer whose stages fill its cores mixes each
 * stage's range in that stage's idle time. rumor_mixer_range_wait mixes the
 * complete cells of its range before it returns; with wait < 0 it only
 * mixes (at most one cell, returning 2 when it did, 1 when the range is
 * mixed, 0 otherwise) and neither waits nor starts the round's close, for
 * a thread that has a moment. A round that is complete closes once its
 * cells are mixed, or at its deadline (the comm thread then mixes what is
 * left). Off by default; not for --compress or asynchronous rounds (their
 * mix is made whole at the close). */
void rumor_mixer_set_caller_mixes(rumor_mixer_t *m, int on);

/* The newest round a neighbour is known to be at (from its messages and
 * HELLO answers), -1 when none is known yet. */
long rumor_mixer_swarm_round(rumor_mixer_t *m);

/* The deadline of a synchronous round (the mixer's own rule, exported for
 * rumor-sim): 4 x the median of the last round times, within [min_timeout,
 * timeout] (the median, not a high percentile: a round that waited for a
 * neighbour that was itself waiting out a deadline takes about that
 * deadline, and a high percentile of such rounds would feed the deadline
 * back into itself until it reached timeout); until 8 rounds were seen,
 * 4 x min_timeout within timeout (the HELLO barrier has connected everyone,
 * and a joiner that missed its first round's messages must not wait the
 * longest deadline for them). `ring` holds the last min(n, cap) round times
 * (cap <= 256) of the n ever recorded; *pace (may be NULL) gets the median
 * when it was used. */
double rumor_round_deadline(const double *ring, long n, int cap, double min_timeout,
                            double timeout, double *pace);

/* Moves this peer's round counter forward to `round` (> the last round
 * ended) without mixing: for a peer that fell a few rounds behind its
 * neighbours (frozen, cut off): it keeps its parameters and the rounds in
 * between are skipped, so it takes part in the swarm's current rounds
 * again. Call between round_end and round_begin. */
int rumor_mixer_jump(rumor_mixer_t *m, long round);

/* State transfer for a late joiner, a restarted peer, or one too far
 * behind: asks the neighbours ahead of this peer for their parameters,
 * each for its own contiguous part of the space (joiners spread over their
 * neighbours), checks each part's BLAKE2b-256 digest, installs them as this
 * peer's parameters and moves to the round after the newest one received.
 * A neighbour that does not answer within a few seconds is replaced by
 * another. Call between round_end and round_begin (or before the first
 * round). On success *round is the round to begin next and *params the new
 * parameters; RUMOR_ETIMEOUT when no neighbour served the state in
 * `timeout` seconds (the parameters are then unchanged). */
int rumor_mixer_catch_up(rumor_mixer_t *m, long *round, float **params, double timeout);

/* Counters of the catch-up mechanisms since create. */
typedef struct rumor_mixer_counters {
    uint64_t jumps, rounds_skipped;
    uint64_t state_fetches, state_bytes_fetched, state_served, state_bytes_served;
    uint64_t digest_failures;
    uint64_t endpoints_learned; /* peers' addresses learned or changed by membership */
    uint64_t rounds_mixed;     /* rounds (or all-reduces) that used some neighbour's
                                * data: 0 at the end of a run means this peer
                                * trained alone */
    uint64_t consensus_skipped; /* --compress: rounds without a consensus step */
    uint64_t stale_applied;    /* contributions from another round or an old
                                * incarnation that reached a mix: a self-check,
                                * always 0 */
    uint64_t members_joined;   /* open membership: members given a slot here */
    uint64_t not_allowed;      /* open membership, secure: members announced whose id
                                * is no allowed key's (never dialled) */
    uint64_t slots_full;       /* open membership: members left without a slot
                                * (max_peers reached) */
    uint64_t elems_ahead;      /* parameters handed to ZeroMQ before their round
                                * began (rumor_mixer_send_ahead), over all
                                * neighbours */
    uint64_t elems_sent;       /* parameters handed to ZeroMQ in all */
    uint64_t elems_received;   /* neighbours' parameters accepted (PARAMS ranges
                                * taken into a round), over all neighbours */
    uint64_t outlier_rounds;   /* rounds a neighbour was left out as an outlier
                                * (outlier_ratio), summed over neighbours */
    uint64_t robust_ranges, robust_clipped; /* ranges judged by robust mixing, clipped */
    uint64_t quarantines;      /* neighbours quarantined (robust), each time */
    uint64_t releases;         /* ... let out early (the validation probe) */
    int quarantined;           /* neighbours in quarantine now */
    int incompatible;          /* neighbours whose terms differ (cfg.terms) */
    /* open membership, the view now: members (this peer aside) reached
     * directly, through a relay, and offering to relay */
    int members_direct, members_relayed, members_relaying;
    /* open membership: SWIM messages this peer sent (probes, acks, gossip,
     * syncs) and its local health multiplier now (swim.h) */
    uint64_t swim_messages;
    int swim_health;
} rumor_mixer_counters_t;
void rumor_mixer_counters(rumor_mixer_t *m, rumor_mixer_counters_t *out);

/* Robust mixing's view of one neighbour (cfg.robust). */
typedef struct rumor_robust_score {
    char name[24];              /* "3" (a list's rank) or "1f2e3d4c..." (its id, from its key) */
    double score;               /* its share of far ranges lately, 0 to 1 (quarantined past 0.6) */
    double distance;            /* its recent difference from this peer, RMS per element */
    int quarantined;            /* 1 while quarantined */
    double val_score;           /* cfg.robust_probe: its share of probes far above the
                                 * median lately, 0 to 1 (quarantined past 0.6) */
    double val_excess;          /* its last probe's loss over the median (nats); 0: none */
} rumor_robust_score_t;
/* The neighbours this peer talks to, as robust mixing judges them (as of
 * the last publication, a few times a second), at most cap: how many were
 * written (0 without cfg.robust). */
int rumor_mixer_robust_scores(rumor_mixer_t *m, rumor_robust_score_t *out, int cap);

/* cfg.robust_probe, after a rumor_mixer_round_end: a probe to score, or 0.
 * A probe of round k is ready once round k + 1 closed (what comes after
 * round k closed has a round more to come): *k, the in-neighbours whose whole parameters of round k
 * came, as they sent them, at most cap of them (their nodes in node[],
 * vectors in x[]), and *own this peer's x(k) as it went out; the mixer's
 * memory, read-only, valid until rumor_mixer_probe_done. */
int rumor_mixer_probe_take(rumor_mixer_t *m, long *k, const float **own, int *node,
                           const float **x, int cap);
/* The caller's scores of round k's probe, on one set of validation data:
 * own, this peer's loss at *own, and loss[i]
 * node[i]'s (n of those taken; non-finite: judged as far). Lets go of the
 * vectors; may quarantine a neighbour or let one out (said, counted,
 * published): how many it quarantined plus 1000 times how many it let out,
 * or < 0. */
int rumor_mixer_probe_done(rumor_mixer_t *m, long k, double own, const int *node,
                           const double *loss, int n);

/* Makes the round in progress end now (as if its deadline had passed) and
 * every later round end without waiting: for a peer that must leave (a
 * preemption notice). A barrier or a state fetch in progress returns at
 * once too (the fetch fails: "this peer is leaving"). Async-signal-safe:
 * call it from a signal handler. */
void rumor_mixer_hurry(rumor_mixer_t *m);

/* Sets the per-round deadline (seconds). */
void rumor_mixer_set_timeout(rumor_mixer_t *m, double seconds);

/* Ring all-reduce over every peer of the topology (ring order by node):
 * buf (n floats, host memory) becomes the mean of all peers' buf. `tag`
 * tells calls apart (the training round) and must grow from call to call.
 * Fails with RUMOR_ETIMEOUT when a step waits longer than `timeout`
 * seconds (a peer is gone): buf then holds partial sums and must not be
 * used. The caller's buffer must stay untouched until the call returns.
 * coded: the ranges go in the mixer's codec (int8 or int4 only; every
 * peer of the call must agree): each reduce-scatter hop encodes its
 * partial sums, the owner of a segment encodes its sum once and the
 * all-gather forwards those bytes unchanged, so every peer ends with the
 * same values, within the codec's error of the f32 mean. */
int rumor_mixer_allreduce_mean(rumor_mixer_t *m, float *buf, size_t n, long tag, double timeout,
                               int coded);

/* The peers the last finished all-reduce ran over (its ring), 0 before
 * the first. */
int rumor_mixer_allreduce_size(rumor_mixer_t *m);

/* Bytes sent and received (headers included) since create. */
void rumor_mixer_traffic(rumor_mixer_t *m, uint64_t *sent, uint64_t *received);

/* What was dropped and why, since create. */
void rumor_mixer_wire_stats(rumor_mixer_t *m, rumor_wire_stats_t *out);

/* The transport's counters (bytes, refused connections by kind), as of the
 * comm thread's last loop. */
void rumor_mixer_transport_stats(rumor_mixer_t *m, rumor_transport_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif

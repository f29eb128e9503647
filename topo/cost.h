/* The network cost of a topology: bytes per round, time per round, and
 * predicted time to eps-consensus on a described network.
 *
 * Model (synchronous D-PSGD, as the runtime runs it): every round each peer
 * sends its whole model (model_bytes) to each of its out-neighbours, all at
 * once. A message j -> i takes lat(j,i) + bytes / b, where b is the least of
 * the link's bandwidth, j's NIC shared by its out-links and i's NIC shared
 * by its in-links. The round takes as long as its slowest message, or the
 * local compute time if that is longer (communication overlaps compute).
 *
 * A gossip plan (compress.h) changes what a round moves and holds: with a
 * codec every message carries the plan's share of the model's bytes (f32
 * keyframes one round in R, the codec's payload in the others), and with
 * H local steps a round is H optimizer steps of which only the last
 * overlaps the communication: round = (H - 1) compute + max(comm, compute).
 *
 * The link file (docs/rumor-topo.md has the full description):
 *   default BW LAT              every pair not described otherwise
 *   nic PEERS BW                NIC bandwidth of those peers (else unlimited)
 *   site NAME PEERS             name a group of peers (a machine, a rack, a region)
 *   intra NAME BW LAT           links inside site NAME
 *   inter NAME NAME BW LAT      links between two sites (both ways)
 *   link I J BW LAT             one pair (both ways); wins over the rest
 *   compute TIME                local compute per optimizer step
 * PEERS: "all", or ids and ranges "0-15,32,40-47". BW: 10Gbit, 100Mbit,
 * 1.25GB (bytes), with optional "/s"; LAT: 50us, 2ms, 0.1s, 800ns.
 * Without a file: 10 Gbit/s links and NICs, 50 us, no compute time. */
#ifndef RUMOR_TOPO_COST_H
#define RUMOR_TOPO_COST_H

#include "compress.h"
#include "topology.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_links rumor_links_t;

/* Reads a link file for n peers; errors name the file and line. */
int rumor_links_load(const char *path, int n, rumor_links_t **out) RUMOR_WUR;
/* The default network (10 Gbit/s links and NICs, 50 us). */
int rumor_links_default(int n, rumor_links_t **out) RUMOR_WUR;
void rumor_links_destroy(rumor_links_t **l);

/* Bandwidth (bytes/s) and latency (s) of link i-j. */
void rumor_links_get(const rumor_links_t *l, int i, int j, double *bw, double *lat);
/* NIC bandwidth of peer i in bytes/s (INFINITY when unlimited). */
double rumor_links_nic(const rumor_links_t *l, int i);
/* Per-round compute time in seconds (0 when not given). */
double rumor_links_compute(const rumor_links_t *l);

/* "10Gbit", "1.25GB/s" -> bytes/s; "50us" -> seconds; "100MB", "1.5GiB",
 * "4096" -> bytes. 0 or RUMOR_EINVAL (with a message naming `s`). */
int rumor_topo_parse_bandwidth(const char *s, double *bytes_per_s) RUMOR_WUR;
int rumor_topo_parse_latency(const char *s, double *seconds) RUMOR_WUR;
int rumor_topo_parse_bytes(const char *s, double *bytes) RUMOR_WUR;

typedef struct rumor_topo_cost {
    double model_bytes;
    double bytes_peer_max;    /* sent by the busiest peer per round */
    double bytes_peer_mean;   /* sent per peer per round, on average */
    double bytes_link_max;    /* on the busiest link, one direction, per round */
    double bytes_nic_max;     /* through the busiest NIC (in or out) per round */
    double bytes_total;       /* all links, per round */
    int msgs_peer_max;        /* most messages a peer sends in a round */
    double round_seconds;     /* mean over a period */
    double comm_seconds;      /* communication part of the slowest round */
    int slow_from, slow_to;   /* the message that sets the slowest round */
    double slow_bw, slow_lat; /* its effective bandwidth (bytes/s) and latency */
    double seconds_to_eps;    /* INFINITY when consensus is never reached */
    /* the plan priced (compress.h) */
    double bytes_factor;      /* bytes a round over f32's (1 without a codec) */
    int local_steps;          /* optimizer steps between a coordinate's mixes (H) */
    int fragments, overlap;   /* streaming (rumor-peer --fragments F --overlap S): a
                               * round is H/F steps and carries 1/F of the model,
                               * S of its steps run while it is in flight; the
                               * bytes and seconds above are such a round's, and
                               * eps takes F rounds a consensus round */
    double step_seconds;      /* round_seconds over its steps */
    double compute_seconds;   /* per optimizer step (the link file's; 0 unknown) */
    int suggested_steps;      /* the fewest local steps whose compute hides the
                               * communication (1 when compute already does; 0
                               * when no compute time is known) */
} rumor_topo_cost_t;

/* Cost of t on network l for a model of model_bytes under `plan` (NULL:
 * f32 every step), reaching eps in rounds_to_eps rounds (-1 = never). */
int rumor_topo_cost(const rumor_topo_t *t, const rumor_links_t *l, double model_bytes,
                    long rounds_to_eps, const rumor_gossip_plan_t *plan,
                    rumor_topo_cost_t *c) RUMOR_WUR;

/* Seconds per optimizer step of the priced rounds with h local steps
 * instead: ((h - 1) compute + max(comm, compute)) / h. */
double rumor_topo_step_seconds(const rumor_topo_cost_t *c, int h);

/* CHOCO-SGD's consensus rate a round under the plan's consensus step
 * gamma, for W with eigenvalues lambda2 and lambda_min (NAN when not
 * known: then from rho): a codec that loses little moves x by gamma (W - I)
 * x, whose rate is max |1 - gamma (1 - lambda)| over lambda != 1
 * (tests/test_choco measures it). rho itself without a codec. */
double rumor_gossip_plan_rho(const rumor_gossip_plan_t *plan, double rho, double lambda2,
                             double lambda_min);

#ifdef __cplusplus
}
#endif
#endif

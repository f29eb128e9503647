/* rumor-sim's engine: a discrete-event simulation of an open swarm's
 * membership. Every simulated peer runs librumor's own SWIM state machine
 * (gossip/swim.h: one rumor_swim_t each, ticked at rumor_swim_next_deadline
 * and fed every delivered message through rumor_swim_on_message); what is
 * simulated is only what SWIM leaves to its caller: the clock, the network
 * (latency, jitter, loss, upload and download rates) and churn (joins,
 * SIGKILL-style deaths, orderly leaves). docs/sim.md says what is measured
 * and how.
 *
 * Deterministic: one seed fixes every random draw, and events at the same
 * simulated time run in the order they were scheduled. Single-threaded.
 * Not part of librumor (the binary's own module, hence the sim_ prefix). */
#ifndef RUMOR_SIM_H
#define RUMOR_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One peer's link, from a --net file line "up_mbit down_mbit latency_ms". */
typedef struct sim_link {
    double up_mbit, down_mbit, latency_ms;
} sim_link_t;

typedef struct sim_config {
    int peers;            /* initial peers */
    double join_over;     /* s over which they start, evenly spaced */
    double duration;      /* s simulated after the last initial peer started */
    double latency_ms;    /* one-way mean (without --net) */
    double jitter_ms;     /* uniform +- on every message */
    double loss;          /* probability that a message is lost, 0..1 */
    double rate_mbit;     /* per-peer upload rate (0: unlimited) */
    const sim_link_t *links; /* --net: links sampled per peer (NULL: the above) */
    int nlinks;
    double kill_rate;     /* fraction of the initial peers killed a minute */
    double lifetime_mean; /* > 0: exponential lifetimes of this mean instead */
    double leave_share;   /* fraction of departures that call rumor_swim_leave */
    double kill_at;       /* >= 0: one extra death at this time, not replaced */
    double burst_at;      /* >= 0: burst_n peers killed at this time, as many newcomers */
    int burst_n;
    int observers;        /* peers whose tables are watched (0: every peer) */
    int max_members;      /* SWIM's table bound (0: swim.h's 4096) */
    double sample_every;  /* s of simulated time between samples of the curve */
    double progress;      /* s of wall time between progress lines (0: none) */
    double wall_limit;    /* > 0: stop after this many s of wall time and report
                           * what was simulated until then */
    uint64_t seed;
    /* training rounds (sim_round.c); rounds == 0: membership only */
    int rounds;
    const char *topology;     /* family laid over each peer's view (rumor-peer's --topology) */
    double model_params;      /* parameters; a PARAMS message carries 4 bytes each */
    double round_cpu_ms;      /* CPU a round takes a peer on a core of its own */
    double cores;             /* cores all peers share (0: a core each) */
    double round_timeout, min_round_timeout; /* rumor-peer's, s */
    double drift;             /* norm of a peer's own step a round (its SGD step) */
    double heartbeat_timeout; /* s of silence after which a neighbour is not waited for */
    double new_edge_grace;    /* s an edge of a static graph is not waited for (0: always) */
    double init_spread;       /* norm of the initial peers' random start (0: all equal) */
    double target;            /* > 0: report when the distance to the average first falls
                               * below it after the joins */
    int dim;                  /* entries of the simulated parameter vector */
} sim_config_t;

/* Distribution of a measure over items; the times are seconds. `missing`
 * items never reached it before the end of the run. */
typedef struct sim_dist {
    int n, missing;
    double mean, p50, p90, max;
} sim_dist_t;

/* One point of the curve over simulated time. */
typedef struct sim_point {
    double t;
    int live;
    double cov_median, cov_min; /* of watched peers: live members in view / live peers */
    double cons_mean;           /* training peers' last disagreement, mean (-1: none) */
    double spread;              /* their RMS distance to their average (-1: none) */
} sim_point_t;

typedef struct sim_result {
    double t_end;             /* simulated s */
    int truncated;            /* stopped early by wall_limit, SIGINT or SIGTERM */
    int started, killed, left, live_end, observers_end;
    /* deaths: first DEAD anywhere, gone from half and all watched views */
    sim_dist_t detect_first, gone_half, gone_all;
    sim_dist_t leave_first, leave_all; /* orderly leaves: first LEFT, gone from all */
    uint64_t false_positives;  /* live peers declared DEAD (declarations) */
    uint64_t suspicions;       /* suspicions raised, all peers */
    /* joins: in half and all watched views, own view >= 90% of live peers */
    sim_dist_t join_half, join_all, join_own90;       /* the initial peers */
    sim_dist_t churn_half, churn_all, churn_own90;    /* newcomers during churn */
    /* traffic, per peer over its lifetime (peers that lived >= 5 s) */
    double msg_rate_mean, msg_rate_max, byte_rate_mean, byte_rate_max;
    double msg_rate_steady; /* a live peer's a second from 5 s after the joins to a --burst
                             * or the end (NaN: no such window) */
    uint64_t messages, bytes, lost, to_dead, unknown_endpoint;
    /* live members in view / live peers, over the watched live peers at the end */
    double cov_min, cov_median, cov_max;
    double stale_mean; /* dead or departed members still in a view, mean */
    size_t view_max;   /* largest view at the end */
    /* memory and the simulator itself */
    long rss_kb, hwm_kb;
    double rss_per_peer_kb;
    int max_members;
    size_t table_bytes; /* at least this much table per peer when full */
    double wall_s, events_per_s;
    uint64_t events;
    /* training rounds (cfg.rounds); the steady window is [join_over + 5, --burst or end] */
    uint64_t peer_rounds;       /* rounds closed, all peers, whole run */
    double rounds_per_s;        /* a peer's rounds a second in the steady window, mean over
                                 * the peers that trained there >= 5 s */
    double mixed_share;         /* of the steady window's rounds: a neighbour's parameters came */
    double late_share;          /* of the rounds from 10 s after a --burst (the churn phase
                                 * without one): ran into their deadline */
    double max_wait;            /* longest wait after a round's compute, from the steady
                                 * window's start to the end, s */
    double consensus_mean, consensus_max; /* live training peers' last disagreement */
    double consensus_rms;       /* RMS of every round's disagreement, steady window */
    double target_s;            /* simulated s from the last initial join until the
                                 * distance to the average fell below cfg.target with
                                 * every live peer training (NaN: never, or no target) */
    double spread_rms;          /* RMS distance of a training peer's parameters to the
                                 * training peers' average (the consensus distance to the
                                 * swarm's model), over the curve's points in the steady
                                 * window */
    int training_end;           /* live peers training at the end */
    sim_dist_t admit;           /* a newcomer's start to its first round (churn phase) */
    double params_bytes_per_s;  /* PARAMS bytes a peer sends a second, mean (lived >= 5 s) */
    uint64_t jumps;             /* rounds skipped by a peer far behind (told where the swarm is) */
    double peer_rounds_per_wall_s; /* the simulator's speed */
    /* the curve and the times of first detections, for --svg */
    sim_point_t *curve;
    int ncurve;
    double *deaths, *detections; /* simulated times */
    int ndeaths, ndetections;
} sim_result_t;

/* Runs the simulation; fills *res (free it with sim_result_free). 0, or a
 * negative rumor_rc with a message. */
int sim_run(const sim_config_t *cfg, sim_result_t *res);
void sim_result_free(sim_result_t *res);

/* Reads a --net file: one link a line, "up_mbit down_mbit latency_ms"
 * (positive numbers; '#' starts a comment; blank lines skipped). *out is
 * malloc'd. RUMOR_EIO / RUMOR_EFORMAT with the file and line. */
int sim_links_read(const char *path, sim_link_t **out, int *n);

/* sim_report.c: the readable table, the JSON object, the SVG plot. */
void sim_report_table(FILE *f, const sim_config_t *cfg, const sim_result_t *r);
int sim_report_json(FILE *f, const sim_config_t *cfg, const sim_result_t *r);
int sim_report_svg(const char *path, const sim_config_t *cfg, const sim_result_t *r);

#endif

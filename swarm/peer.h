/* The peer object: one peer of a swarm, as a library object.
 *
 * A peer owns a trainer (the model, its data and optimizer, its pipeline of
 * stages) and a mixer (the swarm: transport, membership, the rounds) and
 * runs the round loop between them: each round the mode's strategy
 * (strategy.h: D-PSGD, its asynchronous form, local steps with an outer
 * optimizer, balanced batches, send-ahead, the all-reduce baseline) computes,
 * communicates and steps; around it the peer catches up with a swarm that
 * is ahead, writes checkpoints, prints progress, writes metrics events and,
 * at the end, evaluates its own model and the swarm's average.
 *
 * rumor-peer parses its options into a rumor_peer_config_t, creates the
 * peer, runs it and prints its result; a program (or a test) can run
 * several peers in one process the same way. Threads: create, run, result
 * and destroy are called from one thread; rumor_peer_stop from any thread
 * or a signal handler. */
#ifndef RUMOR_SWARM_PEER_H
#define RUMOR_SWARM_PEER_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "mixer.h"
#include "peer_open.h"
#include "trainer.h"
#include "wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_peer rumor_peer_t;

typedef enum {
    RUMOR_PEER_STARTING = 0, /* loading the data and the model, until it waits */
    RUMOR_PEER_WAITING,      /* for its neighbours at start, fetching the swarm's state */
    RUMOR_PEER_TRAINING,     /* the rounds */
    RUMOR_PEER_LEAVING,      /* stopped: a last checkpoint, telling the neighbours */
    RUMOR_PEER_DONE,         /* the rounds are over: the swarm average, the result */
    RUMOR_PEER_NPHASES
} rumor_peer_phase;

const char *rumor_peer_phase_name(rumor_peer_phase phase);

/* What a peer shows while it runs (rumor-peer's Prometheus metrics). */
#define RUMOR_PEER_ROBUST_MAX 32 /* neighbours whose robust scores the stats carry */

typedef struct rumor_peer_stats {
    int rank, peers;
    char peer[24];              /* open membership: the id in hex, the label instead
                                 * of rank ("" with a list) */
    long round, rounds_total;   /* the round the peer is at, and the run's (0 while
                                 * the data loads) */
    double loss;                /* the last round's training loss (NaN none yet) */
    double examples_per_second; /* since the start */
    double wait_seconds;        /* waited for neighbours, since the start */
    double compute_seconds;     /* computing (rounds and local steps, not waiting) */
    double link_utilization;    /* bytes sent a second / the link's rate (NaN: not known) */
    double seconds;             /* training time since the start */
    double consensus_distance;  /* |mix - x| of the last round (NaN none yet) */
    int in_neighbors, neighbors_complete, members;
    uint64_t bytes_sent, bytes_received;
    uint64_t rounds_run, rounds_mixed, consensus_skipped, jumps, state_fetches;
    uint64_t robust_ranges, robust_clipped, quarantines; /* --robust (mixer.h) */
    uint64_t releases;      /* quarantines ended early by --robust-val's probes */
    int quarantined;
    rumor_robust_score_t robust[RUMOR_PEER_ROBUST_MAX]; /* the neighbours' scores */
    int nrobust;
    rumor_wire_stats_t messages;
    double checkpoint_unix;     /* when the last checkpoint was written (0 none) */
    double test_accuracy;       /* the last evaluation (NaN none) */
    double eval_loss;           /* the last validation loss (NaN none) */
} rumor_peer_stats_t;

/* Sets every figure to "none yet" (NaN, zero counts). */
void rumor_peer_stats_init(rumor_peer_stats_t *s);

typedef enum { RUMOR_PEER_DPSGD = 0, RUMOR_PEER_ASYNC, RUMOR_PEER_ALLREDUCE } rumor_peer_mode;

typedef struct rumor_peer_config {
    /* The model, data and optimizer (trainer.h). The peer sets lockstep,
     * host_params, steps (rounds x local_steps) and, in an open swarm,
     * data_stream (its id). */
    rumor_trainer_config_t trainer;
    /* The swarm (mixer.h): the caller sets the topology, endpoints,
     * listen, swarm id, keys, membership, open membership's seeds,
     * timeouts, staleness, connections, I/O threads, the codec with its
     * consensus step and keyframes, and chunk_elems (0: 1 MiB, or an eighth
     * of a smaller model) and max_msg_elems. The peer sets nparams, async,
     * the device, first_round, the terms and the outlier ratio. */
    rumor_mixer_config_t mixer;
    rumor_peer_mode mode;
    long rounds;            /* 0: trainer.epochs passes over the shard */
    int local_steps;        /* H >= 1: optimizer steps a round */
    const char *outer;      /* with H >= 2: "nesterov[:...]" or "sgd[:lr=X]"; NULL: none */
    int outer_rounds;       /* with outer: the gossip rounds an outer step mixes over
                             * (1, the default); 0: the topology's period, which on
                             * onepeer-exp (2^m peers) and base:K averages exactly */
    int fragments;          /* with outer sgd or nesterov: F >= 1 runs of the parameters,
                             * one gossiped a round, each every H steps (Streaming
                             * DiLoCo; 1, the default: all at once) */
    int overlap;            /* with outer: S inner steps run while a fragment's round is
                             * in flight (0 <= S <= H / F) */
    double merge;           /* with overlap: the local share alpha kept when the new
                             * anchor lands, x = alpha x + (1 - alpha) anchor (< 0: 0.5) */
    int balance;            /* batches a round fill the wait (balance.h) */
    int balance_max;
    int send_ahead;         /* step the mix cell by cell and send on at once */
    int robust_val_batches; /* with mixer.robust_probe: validation batches a probe (4) */
    double throttle;        /* testing: F >= 1 times slower than this machine */
    double link_mbit;       /* this peer's upload rate in Mbit/s (0: not known), for the
                             * link utilization figure */
    long catch_up_rounds;   /* catchup.h */
    double start_timeout;   /* the longest the start waits for neighbours */
    const char *swarm;      /* the swarm's name (checkpoints, metrics) */
    const char *topology;   /* the topology as given, for messages */
    const char *compress;   /* the codec as given, for the metrics */
    int rank;               /* the list's rank; -1 in an open swarm */
    int npeers;             /* the list's length; 1 in an open swarm */
    const rumor_peer_open_t *open; /* an open swarm's id and seeds; NULL with a list */
    int swim;               /* --membership swim: the average tolerates deaths */
    const char *checkpoint_dir; /* NULL: none */
    long checkpoint_every;  /* also every N rounds (0: epochs only) */
    int keep_checkpoints;
    int eval_every;         /* epochs between evaluations */
    int no_average;         /* skip the swarm average at the end */
    int allow_alone;        /* training alone is not an error */
    const char *save_average; /* DIR for the average, NULL: not saved */
    const char *metrics;    /* JSON-lines events file, NULL: none */
    const char *trace;      /* Chrome trace file, NULL: none */
    FILE *out;              /* start lines and progress; NULL: standard output */
    int quiet;              /* nothing on out */
    double progress;        /* seconds between progress lines */
    /* Called from the run's thread when the phase changes, after each
     * round, evaluation and checkpoint (NULL: none). */
    void (*observe)(void *arg, const rumor_peer_stats_t *s, rumor_peer_phase phase);
    void *observe_arg;
} rumor_peer_config_t;

/* Defaults: D-PSGD, one local step, catch up after 50 rounds, start
 * timeout 60 s, keep 3 checkpoints, evaluate every epoch, the trainer's
 * and the mixer's own defaults. */
void rumor_peer_config_default(rumor_peer_config_t *c);

/* Checks the settings that only mean something together (the outer
 * optimizer needs H >= 2, keyframes need a codec, ...): RUMOR_EINVAL naming
 * the options, or 0. */
int rumor_peer_config_check(const rumor_peer_config_t *c) RUMOR_WUR;

/* Loads the data and the model and resumes from the newest checkpoint in
 * checkpoint_dir that loads (a finished run's: RUMOR_EINVAL, nothing left to
 * train). Joins nobody yet. The config's strings and objects must outlive
 * the peer. */
int rumor_peer_create(const rumor_peer_config_t *c, rumor_peer_t **out) RUMOR_WUR;

/* Joins the swarm, trains its rounds and ends: the final evaluation, the
 * swarm average, the done event. 0 when the run ended (rumor_peer_result
 * says how: stopped, alone, checkpoints failed), or an error. Called once. */
int rumor_peer_run(rumor_peer_t *p) RUMOR_WUR;

/* Asks a running peer to stop: it ends the round at once, checkpoints and
 * tells its neighbours. Async-signal-safe; `sig` is what the events say
 * (the signal's number, or any positive value). */
void rumor_peer_stop(rumor_peer_t *p, int sig);

/* Whether the peer has begun to join the swarm (a stop from then on leaves
 * through the neighbours; before, nothing is saved or joined).
 * Async-signal-safe. */
int rumor_peer_started(const rumor_peer_t *p);

typedef struct rumor_peer_result {
    int left_on;             /* stopped by rumor_peer_stop(sig): sig, else 0 */
    int left_checkpoint;     /* stopped: 1 checkpoint written, -1 failed, 0 none asked */
    int left_before;         /* stopped before training began */
    int usage;               /* the run failed on its configuration (bad usage) */
    int lm;                  /* a language model: no accuracies */
    long round;              /* the round it ended at */
    long rounds, rounds_run; /* the run's rounds, and those run here */
    double seconds, examples_per_second, wait_s, max_stall;
    double compute_s;        /* in rounds and their local steps, not waiting for the others */
    uint64_t bytes_sent, bytes_received;
    double local_accuracy, local_loss;     /* this peer's model */
    double average_accuracy, average_loss; /* the swarm average (-1: none) */
    int average_members;
    char average_note[300];  /* why there is no average ("" when there is) */
    int average_lost;        /* save_average could not take it (saved elsewhere) */
    int alone;               /* no neighbour's parameters ever arrived */
    long allreduce_failures, catch_ups;
    long checkpoints, checkpoints_failed;
    char checkpoint_error[400]; /* the last failure */
    rumor_mixer_counters_t counters;
    rumor_wire_stats_t messages;
    rumor_transport_stats_t connections;
} rumor_peer_result_t;

const rumor_peer_result_t *rumor_peer_result(const rumor_peer_t *p);

/* This peer's parameters (n of them): its own model, as the last round
 * left it. */
const float *rumor_peer_params(const rumor_peer_t *p, size_t *n);

/* The name of the round strategy its run picked from the mode and what
 * its trainer is (swarm/strategy.h): "gossip", "stepped", "balance",
 * "outer" or "allreduce"; "" before the run joined the swarm. */
const char *rumor_peer_strategy(const rumor_peer_t *p);

/* Its name in messages: "peer 3", or "peer 1a2b3c4d" in an open swarm. */
const char *rumor_peer_name(const rumor_peer_t *p);

void rumor_peer_destroy(rumor_peer_t **pp);

#ifdef __cplusplus
}
#endif

#endif

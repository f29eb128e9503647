/* The peer's round strategies: one per way of running a round (D-PSGD
 * and its asynchronous form, with send-ahead or a pipeline stepping by
 * range, with balanced batches, local steps under an outer optimizer, and
 * the all-reduce baseline), behind one interface. The peer's loop
 * (peer_run.c) runs the round's local steps, then the strategy's round, then
 * what every round shares: the trace, progress, catch-up, checkpoints.
 * Internal: not installed, and not exported (RUMOR_INTERNAL); a peer's
 * strategy is named by rumor_peer_strategy (peer.h) and its events. */
#ifndef RUMOR_SWARM_STRATEGY_H
#define RUMOR_SWARM_STRATEGY_H

#include "batch.h"
#include "err.h"

typedef struct rumor_peer rumor_peer_t;

/* One round, as the loop hands it to a strategy and gets it back. */
typedef struct rumor_round {
    long k;               /* the round */
    long t;               /* the optimizer step its gradient is for */
    rumor_batch_t batch;  /* step t's batch */
    float loss;           /* out: the round's training loss */
    long examples;        /* out: the examples its gradient saw (0: the local
                           * steps counted them) */
    long next;            /* out: the round that follows (k + 1, or later when the
                           * mixer jumped) */
    double t_round, t_compute, t_computed; /* its start, its gradient's start and
                                            * end (rumor_now) */
    double wait_s;        /* out: time spent waiting for the others */
    int gossip;           /* out: the round went through the mixer's rounds (its
                           * round statistics are the peer's st) */
    int fragment;         /* out, streaming: the fragment it gossiped (-1: all) */
    long sent_step;       /* out, streaming: the optimizer step it was sent at */
} rumor_round_t;

typedef struct rumor_peer_strategy {
    const char *name;
    /* local optimizer steps on the peer's own data before the round: H - 1
     * (the last step is the round's own), or all H (outer: the round only
     * mixes) */
    int all_steps_before;
    /* x(k) -> x(k+1): computes, communicates and steps. 0 or an error. */
    int (*round)(rumor_peer_t *p, rumor_round_t *r);
} rumor_peer_strategy_t;

/* What decides a peer's strategy. */
typedef struct rumor_strategy_choice {
    int allreduce;  /* --mode allreduce */
    int outer;      /* an outer optimizer (--outer) */
    int outer_optim;/* --outer optim: the peer's own optimizer is the outer one */
    int streaming;  /* --fragments or --overlap: a fragment a round, steps in flight */
    int balance;    /* --balance batch */
    int pipe;       /* the model runs as a pipeline of stages */
    int ahead;      /* send-ahead is on (unpipelined, plain synchronous rounds) */
    double throttle;/* --throttle: > 1 sleeps after the whole gradient */
} rumor_strategy_choice_t;

/* The strategy for a peer: allreduce, outer-optim, streaming, outer, balance, stepped (a pipeline
 * or send-ahead steps each range of the mix as it is ready, unless a
 * throttle must sleep after the whole gradient) or gossip. */
RUMOR_INTERNAL const rumor_peer_strategy_t *rumor_peer_strategy_pick(const rumor_strategy_choice_t *c);

RUMOR_INTERNAL extern const rumor_peer_strategy_t rumor_strategy_gossip, rumor_strategy_stepped,
    rumor_strategy_balance, rumor_strategy_outer, rumor_strategy_outer_optim,
    rumor_strategy_streaming, rumor_strategy_allreduce;

#endif

/* The peer object's insides (peer.h), shared by swarm/peer*.c and
 * swarm/strategy.c. Everything here belongs to the thread that calls
 * rumor_peer_run, except `stop` and `started` (written by rumor_peer_stop
 * from any thread or a signal handler, read by the run) and `hurry` (the
 * mixer a stop hurries: set by the run, read by rumor_peer_stop).
 * Internal: not installed, and not exported (RUMOR_INTERNAL). */
#ifndef RUMOR_SWARM_PEER_INT_H
#define RUMOR_SWARM_PEER_INT_H

#include <signal.h>

#include "balance.h"
#include "catchup.h"
#include "outer.h"
#include "peer.h"
#include "progress.h"
#include "strategy.h"
#include "terms.h"
#include "trace.h"

struct rumor_peer {
    rumor_peer_config_t cfg;
    rumor_trainer_t *tr;      /* device, data, model, optimizer, workers */
    rumor_mixer_t *mixer;
    rumor_mixer_t *volatile hurry; /* what a stop hurries: NULL until made, and once
                                    * destroyed */
    volatile sig_atomic_t stop;    /* the signal (or value) a stop gave; 0 none */
    volatile sig_atomic_t started; /* the mixer was made: a stop leaves through it */
    rumor_outer_t *outer;     /* --outer: the anchor and momentum */
    rumor_outer_config_t ocfg; /* --outer as parsed (valid when cfg.outer) */
    int optim;                /* --outer optim */
    const rumor_peer_strategy_t *strategy;
    rumor_metrics_t metrics;
    rumor_trace_t *trace;
    float *avg;               /* the swarm average at the end */
    char terms[RUMOR_TERMS_MAX];
    char name[32], who[48], spec[512];
    const char *ckpt_swarm;   /* whose checkpoints: the swarm's, or the open id's */
    FILE *out;
    int N, rank, is_open, dpsgd, async, ahead, coded_allreduce;
    long H, per_epoch, total_rounds, first_round;
    float last_loss;          /* --outer optim: the loss of the outer step's gradient */
    long R;                   /* rounds an outer step mixes over (--outer-rounds): the
                               * H local steps run before rounds k = 0 mod R, the
                               * outer step after rounds k = R - 1 mod R */
    size_t nparams;
    /* --fragments F, --overlap S (swarm/strategy.c's streaming round): a
     * round gossips fragment k mod F, [f flen, (f + 1) flen) of the
     * parameters, in a gossip space of flen floats; H is then the steps of
     * a round, H / F of --local-steps */
    int F, S, streaming;
    float alpha;              /* the local share kept at the merge */
    size_t flen;
    long steps_before;        /* the round's optimizer steps before its gossip */
    double t_loaded;
    rumor_peer_stats_t stats;
    rumor_peer_result_t res;

    /* the run */
    long k;                   /* the round it is at */
    float *params;            /* the parameters the mixer holds */
    int joining, newcomer;    /* an open swarm's newcomer before its first fetch */
    rumor_progress_t prog;
    double start, last_dis, deadline;
    long examples;
    rumor_catchup_t cu;
    rumor_round_stats_t st;   /* the last round's, from the mixer */
    rumor_balance_t bal;
    long draws;               /* --balance batch: batches drawn so far */
    int gossip_row;           /* the trace's row for rounds */
    int epoch;
    double epoch_start, epoch_cpu0, loss_sum, dis_sum;
    long epoch_rounds, evaluated_at;
};

/* peer_run.c: `steps` optimizer steps on the peer's own data, without
 * gossip; *loss is the last one's */
RUMOR_INTERNAL int rumor_peer_local_steps(rumor_peer_t *p, long steps, float *loss) RUMOR_WUR;

/* peer.c */
RUMOR_INTERNAL void rumor_peer_publish(rumor_peer_t *p, rumor_peer_phase phase);
RUMOR_INTERNAL int rumor_peer_checkpoint(rumor_peer_t *p, long round);
RUMOR_INTERNAL int rumor_peer_evaluate(rumor_peer_t *p, float *params, double *acc,
                                       double *loss);
RUMOR_INTERNAL void rumor_peer_sleep(rumor_peer_t *p, double s);

/* peer_start.c: the mixer, the start lines, the barrier, the state fetch
 * at start. 1 when a stop came before training began. */
RUMOR_INTERNAL int rumor_peer_join(rumor_peer_t *p) RUMOR_WUR;

/* peer_end.c: the end of the run (the final evaluation, the swarm average,
 * the done event), or of a stopped one. */
RUMOR_INTERNAL int rumor_peer_finish(rumor_peer_t *p) RUMOR_WUR;
RUMOR_INTERNAL void rumor_peer_left_before(rumor_peer_t *p);

/* peer_events.c: the metrics events, as JSON objects (cJSON). */
RUMOR_INTERNAL void rumor_peer_event_start(rumor_peer_t *p, int ready);
RUMOR_INTERNAL void rumor_peer_event_round(rumor_peer_t *p, double loss, double el);
/* Bytes sent a second over `el` s / --link-mbit's rate; NaN when not known. */
RUMOR_INTERNAL double rumor_peer_link_utilization(const rumor_peer_t *p, double el);
RUMOR_INTERNAL void rumor_peer_event_epoch(rumor_peer_t *p, int epoch, double train_loss,
                                           int evaluated, double acc, double tloss,
                                           double consensus, double epoch_s, double epoch_cpu);
RUMOR_INTERNAL void rumor_peer_event_leave(rumor_peer_t *p, long round, int checkpoint);
RUMOR_INTERNAL void rumor_peer_event_done(rumor_peer_t *p);

#endif

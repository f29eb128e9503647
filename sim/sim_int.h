/* rumor-sim's internals, shared by sim.c (events, network, churn) and
 * sim_watch.c (the measurements). */
#ifndef RUMOR_SIM_INT_H
#define RUMOR_SIM_INT_H

#include "sim.h"
#include "swim.h"

enum {
    SIM_JOIN,    /* a new peer starts */
    SIM_TICK,    /* a peer's SWIM deadline */
    SIM_DELIVER, /* a message arrives */
    SIM_KILL,    /* the kill-rate process fires */
    SIM_DEATH,   /* a peer's lifetime ends */
    SIM_KILL_AT, /* --kill-at */
    SIM_BURST,   /* --burst */
    SIM_SAMPLE,  /* a point of the curve */
    SIM_TRAIN,   /* sim_round.c: a peer ends its barrier and starts training */
    SIM_COMPUTED, /* ... : a round's compute is done (arg: the round) */
    SIM_DEADLINE /* ... : a round's deadline (arg: the round) */
};

typedef struct sim_msg {
    uint64_t sender;
    int type;
    uint32_t seq;
    size_t len;
    uint8_t body[]; /* a copy: the send callback's body lives only during the call */
} sim_msg_t;

typedef struct sim_event {
    double at;
    uint64_t order; /* ties run in scheduling order: determinism */
    int kind, peer;
    long arg;
    sim_msg_t *msg;
} sim_event_t;

typedef struct sim sim_t;
typedef struct sim_train sim_train_t; /* sim_round.c */

typedef struct sim_peer {
    sim_t *sim;
    int idx, alive, alive_pos;
    rumor_swim_t *sw; /* NULL once stopped */
    uint64_t id;
    char ep[40];
    double born, died;
    double tick_at;           /* the tick event that counts (-1: none) */
    double lat;               /* one-way access latency, s */
    double up_bps, down_bps;  /* 0: unlimited */
    double send_free, recv_free;
    uint64_t sent, bytes;
    uint64_t vseen;           /* view version when last watched */
    uint64_t dead_seen;       /* declared_dead when last watched */
    uint64_t suspected_seen;
    int watch_slot;           /* bit index in the items' bitmaps, -1: not watched */
    int join_item;            /* its join item while it is pending, else -1 */
    sim_train_t *tr;          /* training state (cfg.rounds), NULL otherwise */
    uint64_t pbytes;          /* PARAMS bytes sent */
} sim_peer_t;

/* Open addressing from a 64-bit key to a peer index; keys stay. */
typedef struct sim_map {
    uint64_t *key;
    int *val; /* -1: empty */
    size_t cap, n;
} sim_map_t;

/* Something watched in the tables: a departure (gone from views) or a join
 * (in views); `bits` marks the watched peers that have seen it. The 50% and
 * 100% marks are over the watched peers that were running when it happened
 * and still run: a peer that starts later never knew the departed one and
 * needs its own join to learn the newcomer, which is measured on its own. */
typedef struct sim_item {
    int kind;      /* 0 departure, 1 initial join, 2 churn join */
    int peer;
    uint64_t id;
    double t0, first, half, all, own; /* -1: not yet */
    int count, pending;
    int limit; /* only peers with a smaller index count: those live at t0 */
    int den;   /* watched peers live at t0 and still running */
    uint8_t *bits;
    size_t nbytes;
} sim_item_t;

struct sim {
    sim_config_t cfg;
    double now, t_churn, t_end, wall0;
    uint64_t rng, order;
    sim_event_t *heap;
    size_t nheap, capheap;
    sim_peer_t **peers;
    size_t npeers, cappeers;
    int *alive; /* live peers' indices, any order */
    size_t nalive, capalive;
    sim_map_t by_id, by_ep;
    /* measurements (sim_watch.c) */
    sim_item_t *items;
    size_t nitems, capitems;
    int *pending; /* items being watched */
    size_t npending, cappending;
    int nwatch_live, nslots;
    rumor_swim_member_t *vbuf; /* a view's worth */
    size_t vcap;
    size_t cap_curve, cap_deaths, cap_detect;
    /* training rounds (sim_round.c) */
    double win_rounds, win_mixed, win_late, win_late_n, win_wait, win_dis2;
    uint64_t win_msgs; /* SWIM messages sent in the steady window */
    double win_spread2, win_spread_n; /* squared spread summed over the window's samples */
    double *xbar;                     /* cfg.dim scratch */
    double *admit;
    size_t nadmit, capadmit;
    sim_result_t res;
};

int sim_push(sim_t *s, double at, int kind, int peer, sim_msg_t *msg);
int sim_push_arg(sim_t *s, double at, int kind, int peer, long arg);
/* Sends a message from p to peer `to` over the simulated network: `wire`
 * bytes on the links; body/len is what is delivered. SWIM's messages and
 * PARAMS alike. */
int sim_transmit(sim_t *s, sim_peer_t *p, int to, int type, uint32_t seq, const void *body,
                 size_t len, double wire);
double sim_unit(sim_t *s);
int sim_peer_by_id(const sim_t *s, uint64_t id);
/* The steady window (bench_scale's): from 5 s after the last initial join
 * to a --burst, or the run's end. */
double sim_steady_from(const sim_t *s);
double sim_steady_end(const sim_t *s);

/* sim_watch.c */
int sim_watch_join(sim_t *s, sim_peer_t *p);
int sim_watch_depart(sim_t *s, sim_peer_t *p, int left);
int sim_watch_peer(sim_t *s, sim_peer_t *p);
int sim_watch_sample(sim_t *s);
int sim_watch_finish(sim_t *s);
void sim_watch_free(sim_t *s);
/* Makes *a hold at least `need` elements of `size` bytes, doubling *cap. */
int sim_grow(void **a, size_t *cap, size_t need, size_t size);
/* The distribution of v[0..n) (sorted in place); NAN figures when n is 0. */
sim_dist_t sim_dist(double *v, int n, int missing);

/* sim_round.c: training rounds over the view (cfg.rounds) */
int sim_round_start(sim_t *s, sim_peer_t *p);   /* the peer started: its barrier */
int sim_round_seen(sim_t *s, sim_peer_t *p);    /* its SWIM table may have changed */
int sim_round_event(sim_t *s, sim_peer_t *p, int kind, long arg);
int sim_round_params(sim_t *s, sim_peer_t *p, const sim_msg_t *m);
void sim_round_stop(sim_t *s, sim_peer_t *p);   /* the peer stops */
int sim_round_finish(sim_t *s);                 /* the figures, at the end */
double sim_round_consensus(const sim_t *s);     /* live peers' last disagreement, mean */
/* RMS distance to the training peers' average; *all: every live peer trains */
double sim_round_spread(sim_t *s, int *all);
void sim_round_free(sim_peer_t *p);

#endif

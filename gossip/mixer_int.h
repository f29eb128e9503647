/* The mixer's internals. Not installed.
 *
 * The mixer is an actor (as CZMQ's zactor): its comm thread owns the round
 * state, the transport and everything in struct rumor_mixer past the
 * "comm thread's" line; the caller's threads (mixer.c's API) talk to it
 * only through commands (mixer_cmd.c): a command is queued under mu, the
 * comm thread is woken through a pipe, serves the commands in order between
 * polls and answers through a reply the caller waits on. What else both
 * sides touch is listed in struct rumor_mixer by owner: atomics, and one
 * published struct of counters. */
#ifndef RUMOR_MIXER_INT_H
#define RUMOR_MIXER_INT_H

#include <pthread.h>
#include <zmq.h>

#include "cover.h"
#include "idmap.h"
#include "log.h"
#include "mixer.h"
#include "swim.h"
#include "transport.h"

#define MX_MAX_BUFS 16
#define MX_ROUND_SANITY 100000000L /* a round claim further ahead is ignored */
#define MX_WAIT_LAG 2 /* a neighbour further behind than this is not waited for */
#define MX_HOLD_MAX 4096 /* all-reduce messages held before their call starts */
#define MX_SCRATCH 16384 /* floats: aligned copies of unaligned payloads, in blocks */
#define MX_RECV_DEFAULT ((size_t)1 << 24) /* elements one message may carry (64 MiB) */
#define MX_HELLO_RANK_CHECK 4 /* HELLO aux: "is this address me?" (see mixer_rank.c) */

enum { BUF_FREE = 0, BUF_USED, BUF_RETIRED };

/* The receive state of one round. Neighbours send (offset, length) ranges
 * cut as they like; this peer accumulates and mixes in cells, its own chunk
 * grid (m->chunk elements each, the last one shorter). */
struct mx_slot {                /* the comm thread's, but where said */
    long round;
    rumor_sendbuf_t *buf;      /* accumulator: sum of W_ij x_j over the ranges
                                * received; a cell not touched yet is garbage */
    const float *x;            /* this peer's own x(round), once round_begin */
    double *wfull;             /* (nchunks) weight of the neighbours whose ranges
                                * cover cell c whole */
    uint8_t *touched;          /* (nchunks) the accumulator of cell c is written */
    uint8_t *done;             /* (nchunks) mixed: acc = x(round+1) there */
    int ndone;
    double dis, selfw;         /* over the cells mixed so far: sum (mix - x)^2,
                                * and the self-weight summed over elements */
    uint8_t *full;             /* (npeers * nchunks) j's ranges cover cell c */
    mx_cover_t *cov;           /* (npeers) ranges received from j this round */
    double *w_of;              /* (npeers) W_ij this round; 0 for non-neighbours */
    int nin;                   /* in-neighbours this round */
    int *in;                   /* (npeers) their nodes */
    int complete;              /* in-neighbours whose ranges cover the space */
    int mixed_any;             /* some neighbour's data reached the mix */
    uint64_t elems_in;         /* elements received for this round */
    uint64_t max_range;        /* the longest range among them */
    double first_arrival, last_arrival; /* of those: the rate they come at */
    uint8_t *rdy;              /* (nchunks) complete, left for the caller to mix
                                * (rumor_mixer_set_caller_mixes) */
    /* Shared with the caller's threads (rumor_mixer_range_wait, caller
     * mixes). pub_round is stored (release) by the comm thread once the rest
     * is reset for a round, and -1 at its close; a cell is claimed by moving
     * its cstate READY -> MIXING (compare-exchange) and handed over by
     * storing MIXED (release) after its results below; pub_x is written
     * once a round, before its first READY. The thread that mixed cell c
     * wrote tmix[c], and a caller's thread cd2[c], csw[c] and cby[c]. */
    _Atomic long pub_round;    /* the round cstate describes (-1 none) */
    _Atomic uint8_t *cstate;   /* (nchunks) cell c: MX_CELL_* */
    atomic_size_t nmixed;      /* cells in MX_CELL_MIXED */
    float *pub_data;           /* the accumulator's memory */
    const float *pub_x;        /* x(round), once known */
    double *tmix;              /* (nchunks) when cell c was mixed */
    double *cd2, *csw;         /* (nchunks) a caller's mix of c: its sum (mix - x)^2
                                * and self-weight over the cell */
    uint8_t *cby;              /* (nchunks) 0: the comm thread mixed c; 1 a caller's
                                * thread did, 2 and mixed neighbours' data in */
    uint8_t *outlier;          /* (npeers) j left out of this round: its parameters are
                                * an outlier's (mixer_terms.c) */
    double *od2, *on2;         /* (npeers) over j's ranges so far: sum (x_j - x)^2, sum x^2 */
    uint64_t *olen;            /* (npeers) and their elements */
    uint64_t *qgot;            /* (npeers) elements j sent in quarantine (--robust-val) */
    /* --robust trimmed (mixer_robust.c): the in-neighbours' ranges as they
     * came, held until their cells mix */
    float *tv;                 /* (tvcap * n) in-neighbour i's at tv + i n */
    int tvcap;                 /* in-neighbours tv has room for */
    int *tpos;                 /* (npeers) j's place i in in[] (-1: not an in-neighbour) */
};

/* A cell's state as the caller's threads see it (mx_slot.cstate) */
enum { MX_CELL_OPEN, MX_CELL_READY, MX_CELL_MIXING, MX_CELL_MIXED };

/* The ring all-reduce in progress (served by the comm thread). */
struct mx_allreduce {
    int active;
    float *buf;                /* the caller's (ALLREDUCE command) */
    long tag;
    double timeout;
    char err[256];             /* why it failed */
    /* progress */
    int step;                  /* 0 .. 2(N-1)-1: reduce-scatter then all-gather */
    size_t send_off;           /* next element of this step's segment to send */
    mx_cover_t *recv;          /* (2N) ranges received for each step: data for
                                * a later step can arrive while this peer still
                                * sends (it is applied at once, see mixer_ring.c) */
    double step_deadline;
    int sent_all;              /* this step's segment fully handed to ZeroMQ */
    rumor_sendbuf_t ref;       /* counts sends from buf */
    int finishing;             /* result known; waiting for sends to let go */
    int replayed;              /* held messages of this call applied */
    int result;
    long last_tag;             /* wire tag of the last finished call (-1 none) */
    long wire;                 /* this call's tag on the wire (mixer_ring.c) */
    int last_rn;               /* the ring of the last finished call (published) */
    /* coded (int8, int4): each chunk encoded once, sent from here */
    int coded;                 /* this call's ranges go coded (the mixer's codec) */
    uint8_t *cbytes;           /* (2N x seg_chunks x stride) this call's encodings */
    size_t cstride, seg_chunks;
    size_t encoded_upto;       /* elements of this step's segment encoded */
    struct mx_fwd *fwd;        /* all-gather ranges received, forwarded verbatim */
    int nfwd, capfwd, send_idx;
    int coded_rn;              /* the ring length cbytes was sized for */
    /* the ring: every peer of the list by node, or with membership the
     * living (the view's slots by increasing id); fixed while a call runs */
    int *ring;                 /* (npeers) slots in ring order */
    int rn, rpos;              /* its length, and this peer's place in it */
};

/* An all-gather range kept to be forwarded as it came (its bytes), so that
 * every peer decodes the same values. */
struct mx_fwd {
    int step;
    uint64_t off, len;
    uint8_t dtype;
    size_t nbytes;
    uint8_t *bytes;
};

/* The most floats one PARAMS message carries from this peer (64 KiB; a
 * coded chunk goes whole), and how long a connection may take nothing
 * before it no longer holds newer rounds back (mx_pump_sends). */
#define MX_PIECE ((uint64_t)1 << 14)
#define MX_STALL_S 1.0
#define MX_SLOW_BPS 50e6
#define MX_PROBE_EVERY 16

struct mx_sendq {
    int n;                     /* entries, 0..2 */
    long round[2];
    rumor_sendbuf_t *buf[2];
    uint64_t next[2];          /* the next element to hand to ZeroMQ */
    double moved_at;           /* when the head entry last moved (queued or a piece taken) */
    double head_at;            /* when the head entry became the head */
    int slow;                  /* the last round sent in pieces went out slower than
                                * MX_SLOW_BPS (the link, not ZeroMQ's queue, paced it) */
    int pieces;                /* the head entry goes in pieces: slow, or a probe */
    int held;                  /* the head entry waited for the caller's step
                                * (rumor_mixer_send_ahead): its pace says
                                * nothing of the link */
    unsigned heads;            /* entries that became the head */
    int stuck;                 /* entries were dropped unsent (too old, or the
                                * neighbour was redialled): a new entry does not
                                * make the connection count as moving until
                                * ZeroMQ takes a piece of it (mx_pump_sends) */
};

/* State transfer, the requesting side: the space is cut into contiguous
 * parts, one per source neighbour, which sends it in ranges cut its way. */
#define MX_MAX_PARTS 8
struct mx_part {
    int src;                   /* node serving it, -1 none yet */
    uint32_t req_id;
    size_t lo, hi;             /* elements [lo, hi) */
    mx_cover_t have;           /* ranges received */
    long round;                /* the source's round of that state, -1 none yet */
    uint8_t digest[32];
    int have_digest, done, asked;
    double last_progress;
};

struct mx_catchup {
    int active;
    double deadline;
    long round;                /* result: the round to begin next */
    rumor_sendbuf_t *buf;      /* the state being assembled */
    int nparts;
    struct mx_part part[MX_MAX_PARTS];
    uint8_t *tried;            /* (npeers) sources asked already this catch-up */
    int *cand;                 /* (npeers) scratch: possible sources */
    double next_hello;
};

/* State transfer, the serving side. */
#define MX_MAX_SERVES 8
struct mx_serve {
    int node;                  /* -1 free */
    uint32_t req_id;
    size_t next, end;          /* elements still to send: [next, end) */
    long round;
    rumor_sendbuf_t *buf;      /* pinned snapshot x(round) */
    uint8_t digest[32];
    double last;               /* last progress: a serve stalled 10 s is dropped */
};

/* Asynchronous mode: the newest parameters each in-neighbour sent, by
 * cell of this peer's grid. A cell counts once j's ranges of one round cover
 * it whole. */
struct mx_async {
    float **latest;            /* (npeers) n floats for in-neighbours, else NULL */
    long *lround;              /* (npeers * nchunks) round of that cell, -1 none
                                * (or overwritten in part by a newer round) */
    uint8_t *fresh;            /* (npeers * nchunks) not mixed yet */
    uint64_t *linc;            /* (npeers) incarnation the cells came from */
    long *pround;              /* (npeers) the round j's ranges arrive for now */
    mx_cover_t *pcov;          /* (npeers) its ranges received */
};

/* Compressed gossip (mixer_choco.c): a parameter buffer's coded copy, the
 * payloads of one round's chunks, sent from here (the buffer's refs keep
 * it alive while ZeroMQ holds a message). */
struct mx_code {
    int coded;                 /* the buffer's round went out coded */
    uint8_t *bytes;            /* (nchunks * stride) payloads */
    size_t stride;
    size_t *nbytes;            /* (nchunks) */
    uint32_t *aux;             /* (nchunks) the header's aux */
};

struct mx_choco {
    int on;
    int dtype;                 /* the codec's wire dtype */
    double gamma;
    int keyframe_every;
    float *xhat;               /* x_hat: this peer's copy as its neighbours hold it */
    float *s;                  /* sum_j W_ij x_hat_j */
    float *scratch;            /* (chunk) topk's selection */
    int valid;                 /* s matches the neighbours' copies */
    double *kw;                /* (npeers) the weights of the neighbours whose x_hat
                                * s holds (0: tracked as this peer's own) */
    double *cw;                /* (npeers) scratch: this round's */
    rumor_sendbuf_t *q;        /* this round's coded change, sent instead of x */
    long q_round;
    struct mx_code *code[MX_MAX_BUFS]; /* per buffer of m->bufs */
    int keyframe_closed, skipped_closed; /* of the round being closed */
};

#define MX_DEADLINE_SAMPLES 32

/* A message kept for an all-reduce that has not started here yet. */
struct mx_held {
    zmq_msg_t hdr, payload;
    rumor_wire_hdr_t h;
    int node;                  /* its sender's slot */
};

/* ------------------------------------------------------------------------
 * The command path (mixer_cmd.c). The caller's threads never touch the comm
 * thread's state: they post commands, and a command that has an answer
 * names a reply, which the comm thread fills and marks done under mu.
 * Commands are served in the order they were posted. */
enum mx_op {
    MX_OP_BEGIN,        /* round `round` begins: buf goes out; t: when (rumor_now) */
    MX_OP_AHEAD,        /* x[0, upto) of round `round` is final (send_ahead) */
    MX_OP_CLOSE,        /* close round `round`: reply when mixed (m->closed) */
    MX_OP_JUMP,         /* move to round `round`; reply when done */
    MX_OP_CATCHUP,      /* fetch the state within timeout s of t; reply: round, buf */
    MX_OP_ALLREDUCE,    /* the mean of data over the ring; reply when done */
    MX_OP_BARRIER,      /* reply (peers ready, or an error) once the barrier holds */
    MX_OP_TIMEOUT,      /* round_timeout = timeout */
    MX_OP_PARAMS_READY, /* the set_params_ready hook */
    MX_OP_PROBE,        /* the caller's verdicts of a probe (mixer_probe.c) */
    MX_OP_STOP          /* leave within timeout s of t */
};

#define MX_ERR_LEN 2048

/* A command's answer. Written by the comm thread, then done = 1, under mu;
 * read by the caller's threads under mu once done. */
struct mx_reply {
    int done;
    int rc;                    /* 0 or a rumor_rc (BARRIER: peers ready, >= 0) */
    char err[MX_ERR_LEN];      /* the comm thread's message when rc < 0 */
    long round;                /* CLOSE: the round closed; CATCHUP: the round to begin */
    long next;                 /* CLOSE: the round to begin next */
    rumor_sendbuf_t *buf;      /* CLOSE, CATCHUP: the caller's parameters from now on */
    rumor_round_stats_t st;    /* CLOSE */
};

struct mx_cmd {
    int op;                    /* enum mx_op */
    long round, tag;
    rumor_sendbuf_t *buf;      /* BEGIN */
    const float *x;            /* AHEAD */
    size_t upto;
    float *data;               /* ALLREDUCE */
    int coded;
    double t, timeout;         /* see enum mx_op */
    int (*ready)(void *ctx);   /* PARAMS_READY */
    void *ready_ctx;
    const void *probe;         /* PROBE: the caller's scores (mixer_probe.c) */
    struct mx_reply *reply;    /* NULL: nobody waits for an answer */
};

#define MX_CMDQ 32

/* What the comm thread publishes for the caller's queries, copied whole
 * under pub_mu (a lock around one struct: one copy in, one copy out). */
struct mx_pub {
    rumor_wire_stats_t wire_stats;
    uint64_t sent, received;   /* transport bytes */
    rumor_transport_stats_t ts;
    rumor_mixer_counters_t counters;
    long swarm_round;
    int members;               /* the membership view's size (0: none yet) */
    int ar_size;               /* the ring of the last finished all-reduce */
    int incompat_all;          /* every peer talked to is incompatible (and was told) */
    char incompat_err[1600];   /* the first difference found */
    rumor_robust_score_t *robust; /* (npeers) with cfg.robust */
    int nrobust;
};

/* The caller's side of the rounds: read and written by the caller's threads
 * under mu (range_wait may run on several at once); the comm thread never
 * touches it. */
struct mx_caller {
    long next_send;            /* the round round_begin expects next */
    long closing;              /* the round whose close was posted and not yet taken
                                * by round_end (-1 none) */
    rumor_sendbuf_t *early_hold; /* range_wait posted the close: the caller's x(closing),
                                * held (a reference) until round_end */
};

/* ------------------------------------------------------------------------
 * The mixer. Who owns what:
 *   - fixed at create: written before the comm thread starts, read by all;
 *   - the command path: under mu (the mailbox, replies, the caller's side);
 *   - shared atomics: documented where they are (hurry, caller_mixes,
 *     caller_params, each slot's cell states);
 *   - published: under pub_mu, written by the comm thread only;
 *   - everything else belongs to the comm thread, which runs every function
 *     of mixer_*.c but mixer.c's API, mixer_cmd.c's caller side and
 *     mx_caller_mix (mixer_round.c).
 * Create and destroy run before the comm thread starts and after it ended:
 * they touch everything. */
struct rumor_mixer {
    /* ---- fixed at create */
    rumor_mixer_config_t cfg;
    rumor_device_t *dev;       /* the mixing arithmetic's ops (cfg.dev or own_dev) */
    rumor_device_t *own_dev;
    const rumor_topo_t *topo;
    int self, npeers;
    size_t n, chunk, nchunks;
    uint64_t swarm, incarnation;
    int open;                  /* open membership (mixer_open.c) */
    size_t max_recv;           /* the most elements one message may carry here */
    int nslots;                /* receive slots: a directed or time-varying graph lets
                                * a peer run up to a period ahead of one it sends to */
    rumor_transport_t *tr;     /* the pointer; the transport is the comm thread's */
    pthread_t thread;
    int thread_started;
    int wake_fd[2];            /* pipe: the caller's threads wake the comm thread
                                * (write: any thread, even a signal handler) */

    /* ---- the command path (mixer_cmd.c), under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* broadcast: a reply is done, the queue has room, a
                                * cell became ready or mixed */
    struct mx_cmd cmdq[MX_CMDQ]; /* posted, not yet taken */
    int cmd_head, cmd_n;
    int comm_gone;             /* the comm thread ended: posts fail */
    struct mx_caller caller;
    struct mx_reply closed;    /* the reply of the last round's close */

    /* ---- shared atomics */
    atomic_int hurry;          /* rumor_mixer_hurry: rounds end at once */
    atomic_int caller_mixes;   /* rumor_mixer_set_caller_mixes */
    _Atomic(rumor_sendbuf_t *) caller_params; /* the buffer the caller was handed last
                                * (create, round_end, catch_up): rumor_mixer_params */

    /* ---- published by the comm thread */
    pthread_mutex_t pub_mu;
    struct mx_pub pub;

    /* ---- the comm thread's, from here on */
    /* commands in progress: their replies (on the waiting caller's stack, or
     * m->closed), answered when done; NULL none */
    struct mx_reply *close_reply, *cu_reply, *ar_reply, *barrier_reply;
    long close_round;          /* the round asked to close (-1 none) */
    double self_ep_next;       /* when cfg.self_endpoint is asked next */
    double reach_t0;           /* this peer's first handshake out came up (mx_reach_check) */
    int reach_said;
    long pend_send;            /* a round begun whose send waits for the params_ready
                                * hook (-1 none) */
    rumor_sendbuf_t *pend_send_buf;
    int (*params_ready)(void *ctx); /* rumor_mixer_set_params_ready */
    void *params_ready_ctx;
    int send_waiting;          /* pend_send waits for the hook */
    double barrier_deadline, barrier_timeout;
    int stop;                  /* STOP taken */
    double stop_deadline;
    double close_deadline, round_start, timeout;
    double closing_mix[2];     /* the closing round's first and last mix */
    double closing_recv[2];    /* the closing round's first_arrival, last_arrival */
    size_t closing_caller;     /* the closing round's cells mixed by the caller */

    uint64_t *ids;             /* (npeers) peer ids (0: a free slot, open membership);
                                * ids[self] is fixed at create */
    char **ep;                 /* (npeers) where each peer listens (owned); NULL: not
                                * known yet (membership learns it) */
    rumor_idmap_t idmap;       /* id -> slot, sorted by id */
    /* open membership (mixer_open.c): slots given to members as they come */
    uint8_t *seed_slot;        /* (npeers) a seed's address whose id is not known yet */
    uint64_t *trial_id;        /* (npeers) secure seeds: the id of the key this slot's
                                * connection tries (0: not a trial) */
    int *trial_of;             /* (npeers) the seed a trial slot tries, -1 none */
    uint8_t *warned;           /* (npeers) slot full / not allowed said once */
    size_t *trial_next;        /* (nseeds) the next allow-list key to try at seed i */
    double *trial_since;       /* (nseeds) when its batch of trials opened */
    double *trial_pause;       /* (nseeds) the pause before its next batch; 0: no trials */
    uint64_t refused_ids[8];   /* members said to have no slot (said once) */
    int nrefused;
    rumor_topo_t *own_topo;    /* open: the one-node graph before the first view */
    uint64_t *known_inc;       /* (npeers) newest incarnation seen */
    uint8_t *talks_to;         /* (npeers) exchanges with j in some round */
    int ntalk;
    uint8_t *ready;            /* (npeers) j answered our HELLO */
    uint8_t *heard;            /* (npeers) we received a HELLO from j */
    uint8_t *absent;           /* (npeers) not waited for this round: see refresh_absent */
    uint8_t *gone;             /* (npeers) left, silent or never heard: its connection
                                * holds no other back (mx_pump_sends) */
    long send_gate;            /* the oldest round a moving connection still had to
                                * send at the last mx_pump_sends (LONG_MAX: none) */
    uint8_t *left;             /* (npeers) said LEAVE; cleared when it speaks again */
    double *behind_since;      /* (npeers) since when it is > MX_WAIT_LAG rounds behind; 0 not */
    float *scratch;            /* (MX_SCRATCH) aligned copy of an unaligned payload */
    int *part_scratch;         /* (npeers) mix_cell: neighbours that covered part of a cell */
    /* per peer: rejections in the current round, for the round's log line */
    long *rej_round;           /* (npeers) round of the last rejection */
    int *rej_count;            /* (npeers) rejections in that round */
    int *rej_reason;           /* (npeers) the last one's reason */
    double *asked_round;       /* (npeers) when j was last asked its round */
    /* the rank check (mixer_rank.c): is another process this peer? */
    int rank_state;            /* 0 not started, 1 probing, 2 passed, < 0 conflict */
    uint64_t rank_nonce;
    double rank_started, rank_handshake;
    char rank_err[512];
    double other_self_warned;  /* last warning about another process with our id */
    int nready;
    int *tmp_nbrs;
    double *tmp_w;

    rumor_sendbuf_t *bufs[MX_MAX_BUFS];
    int buf_state[MX_MAX_BUFS];
    int nbufs;
    rumor_sendbuf_t *params;   /* x_i(k) as the comm thread knows it: the buffer the
                                * last close or catch-up handed over */

    struct mx_slot *slot;      /* (nslots) rounds cur .. cur + nslots - 1; the array is
                                * fixed at create, and the caller's threads read the
                                * shared part of a slot (struct mx_slot) */
    long cur;                  /* the round being received into slot[cur % nslots] */

    /* sending: per peer, the rounds still to send, oldest first; a round
     * stays queued while the peer may still use it (until the round after
     * next is queued), so a slow neighbour gets every chunk of round k even
     * after this peer moved on to k + 1. */
    struct mx_sendq *sendq;    /* (npeers) */
    long sent_round;           /* the newest round round_begin handed over */
    rumor_sendbuf_t *sent_buf; /* its parameters, x(sent_round) */
    long ahead_round;          /* round queued before its round_begin, as the caller
                                * steps it (rumor_mixer_send_ahead; -1 none) */
    uint64_t ahead_upto;       /* its elements [0, ahead_upto) are final */
    int *out_nbrs;             /* scratch (npeers) */
    int barrier_run;           /* rumor_mixer_barrier was called */

    rumor_wire_stats_t wire_stats;
    uint64_t heard_others;     /* well-formed messages from other peers on this
                                * peer's listener: someone could dial it */
    uint64_t reach_nonce;      /* open membership: this peer's HELLOs' "dialback" */
    uint64_t *peer_nonce;      /* (npeers) each member's, echoed in HELLOs to it */
    int reach_by;              /* the member whose HELLO echoed reach_nonce, -1: none */
    char *hello_body;          /* the terms and the nonces a HELLO carries */
    struct mx_allreduce ar;
    struct mx_held *hold;      /* (MX_HOLD_MAX) */
    int nhold;
    double next_hello;
    int hello_active, hello_ticks;  /* HELLO passes so far (every 10th reaches all) */
    double next_heartbeat;     /* when the next HEARTBEAT goes to the neighbours */
    int hb_next;               /* the slot the next pass of heartbeats to others starts at */

    /* catching up (mixer_state.c) */
    long *peer_round;          /* (npeers) newest round heard from j, -1 none */
    long *said_round;          /* (npeers) newest round j said (HELLO) it is in, -1 none */
    long *ctl_round;           /* (npeers) newest round j's HELLO, HEARTBEAT or LEAVE said it is
                                * in, -1 none: a leaving peer waits for its neighbours to pass
                                * its last round (mx_neighbours_passed) */
    double *stale_reply;       /* (npeers) when j was last told it is behind */
    long told_behind;          /* newest round a "you are behind" HELLO named, -1 none */
    double *last_heard;        /* (npeers) when j's last valid message came */
    double *last_redial;       /* (npeers) when j's connection was last remade */
    struct mx_catchup cu;
    struct mx_serve serve[MX_MAX_SERVES];
    rumor_mixer_counters_t counters;
    uint32_t next_req_id;
    /* adaptive deadline: round times seen */
    double samples[MX_DEADLINE_SAMPLES];
    int nsamples;
    double cur_deadline;
    double pace;               /* median round time; 0 unknown */
    /* membership (mixer_view.c) */
    rumor_swim_t *swim;
    rumor_topo_t *vtopo;       /* the family over the view; NULL: cfg.topo */
    int vself, vn;
    rumor_swim_member_t *vmember; /* (vcap) the view, sorted by id */
    rumor_swim_member_t *vtmp_member; /* (vcap, open membership) the relays in it */
    int *vslot;                /* (vcap) view node -> peer slot (-1 none) */
    int *vtmp;                 /* (vcap) scratch */
    double *vw;                /* (vcap) scratch weights */
    int vcap;                  /* npeers, or SWIM's table in open membership */
    uint64_t vversion;
    uint64_t view_changes;
    /* asynchronous mode (mixer_async.c) */
    struct mx_async as;
    struct mx_choco ch;        /* --compress (mixer_choco.c); ch.on is fixed at create */
    double recv_rate;          /* elements/s the last round's ranges arrived at (0 unknown) */
    int round_staleness;       /* of the round being closed */
    int round_sample;          /* its time is a deadline sample */
    /* neighbours not mixed with (mixer_terms.c) */
    uint8_t *incompatible;     /* (npeers) its HELLO stated other terms (cfg.terms): its
                                * data are dropped and it is not waited for */
    uint8_t *incompat_told;    /* (npeers) it was sent this peer's terms since */
    double told_hold;          /* a leaving peer stays until then: a HELLO just queued */
    int nincompat;             /* of the peers talked to, how many are incompatible */
    int incompat_all;          /* every peer talked to is incompatible and was told
                                * this peer's terms or left */
    char incompat_err[1600];   /* the first difference found */
    double *outlier_said;      /* (npeers) when j was last said to be an outlier */
    float *tamper_buf;         /* cfg.tamper's output, a chunk */
    struct {                   /* robust mixing (mixer_robust.c) */
        double scale;          /* the range judged last: its difference's factor */
        double last;           /* the bound it met, relative to this peer's own RMS */
        double *recent;        /* (npeers) its recent differences, RMS per element */
        double *score;         /* (npeers) share of its recent ranges clipped */
        uint32_t *ranges;      /* (npeers) ranges judged since it was last forgiven */
        double *until;         /* (npeers) quarantined until then (rumor_now), 0: not */
        int trim_said;         /* trimmed: the in-degree last said too small (0: none) */
        float *tvals;          /* trimmed: (npeers) an element's values, */
        double *tw;            /*          their weights */
        int *tord;             /*          and their order */
    } rb;
    struct mx_probe *probe;    /* cfg.robust_probe (mixer_probe.c) */
    float *outlier_own0;       /* the parameters the mixer was made with, which the
                                * outlier check judges ranges by until this peer's
                                * first round goes out (the caller may step its own
                                * meanwhile: local steps); freed then */
};

/* mixer.c */
/* A condition variable whose timed waits run on CLOCK_MONOTONIC, and a
 * wait on it until `deadline` (a rumor_now() time): 0 when woken,
 * ETIMEDOUT when the deadline passed (mu held, as pthread_cond_timedwait). */
void mx_cond_init(pthread_cond_t *cv);
int mx_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline);
rumor_sendbuf_t *mx_buf_get(rumor_mixer_t *m);
void mx_buf_retire(rumor_mixer_t *m, rumor_sendbuf_t *b);

/* mixer_cmd.c: the command path.
 * The caller's side: mx_call posts c and waits for its reply, and returns
 * the reply's rc (>= 0), or its error (the reply's message set as this
 * thread's error), or < 0 when the comm thread has ended. Under
 * mu (the _locked forms; mx_call takes it): mx_post_locked queues c (it
 * waits while the queue is full) and wakes the comm thread. */
int mx_call(rumor_mixer_t *m, struct mx_cmd *c, struct mx_reply *r);
int mx_post_locked(rumor_mixer_t *m, struct mx_cmd *c);
/* The comm thread's side: takes every queued command and serves it in
 * order; replies r (rc, and err when rc < 0, from fmt) and wakes who waits
 * (r NULL: nothing). mx_reply_locked: the same with mu held, for replies
 * that carry more (the caller fills the rest first). */
void mx_take_commands(rumor_mixer_t *m);
void mx_reply(rumor_mixer_t *m, struct mx_reply *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void mx_reply_locked(struct mx_reply *r, int rc, const char *msg);
/* The barrier command (mx_call BARRIER): answered once it holds. */
void mx_barrier_progress(rumor_mixer_t *m);
/* The comm thread ends: every command pending or queued is answered with
 * an error and later posts fail. */
void mx_cmd_shutdown(rumor_mixer_t *m);
/* Wakes the caller's threads that wait on cv (a cell's state changed). */
void mx_cmd_broadcast(rumor_mixer_t *m);
/* Copies the comm thread's counters, round and view into m->pub. */
void mx_publish(rumor_mixer_t *m);

/* mixer_comm.c: the comm thread's loop, receiving, sending.
 *
 * Every message is judged whole before anything of it is used: a handler
 * checks all it can and returns the negative of a rumor_wire_reject reason
 * with nothing changed, or calls mx_accept and then acts and returns 0. */
int mx_alloc_state(rumor_mixer_t *m, const rumor_mixer_config_t *cfg);
void mx_free_state(rumor_mixer_t *m);
int mx_wake_open(rumor_mixer_t *m);
void mx_wake_close(rumor_mixer_t *m);
void mx_wake(rumor_mixer_t *m);
void mx_comm_main(rumor_mixer_t *m);
int mx_node_of(const rumor_mixer_t *m, uint64_t id);
/* Counts a verdict; a rejection is also tallied for its sender's round
 * (the round's log line says why a neighbour's data did not arrive). */
void mx_count(rumor_mixer_t *m, int verdict, int node, const char *what);
/* What an accepted message says about its sender: it is alive, not leaving
 * (unless it says so), and in this incarnation (a newer one is a restart:
 * what was known of its previous life is dropped). */
void mx_accept(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node);
/* Calls fn on the n elements of a payload (any alignment) of dtype (f32,
 * or a codec's, with the codec's aux; judged already) as aligned blocks
 * of floats: at is the block's first element. */
typedef void (*mx_block_fn)(rumor_mixer_t *m, void *ctx, const float *p, size_t at, size_t n);
void mx_payload_blocks(rumor_mixer_t *m, int dtype, uint32_t aux, const void *data, size_t n,
                       mx_block_fn fn, void *ctx);
/* An mx_block_fn that copies the block to (float *)ctx + at. */
void mx_copy_block(rumor_mixer_t *m, void *ctx, const float *p, size_t at, size_t n);

/* mixer_send.c: the sending side */
void mx_fill_hdr(const rumor_mixer_t *m, rumor_wire_hdr_t *h, int type);
/* Asks a peer its round (a HELLO it answers), at most every 0.25 s: after
 * a message from a round too far ahead was dropped unread. */
void mx_ask_round(rumor_mixer_t *m, int node);
/* A header-only message; its round field says which round this peer is
 * receiving, so a neighbour learns whether it fell behind. */
int mx_send_control(rumor_mixer_t *m, int peer, int type, uint32_t aux);
/* Sends a copy of p as one frame of a multipart message (flags: ZMQ_DONTWAIT,
 * ZMQ_SNDMORE): for the rare messages (state, membership) that need a body
 * frame the transport's zero-copy send does not carry. 0 or -1. */
int mx_send_frame(void *sock, const void *p, size_t len, int flags);
void mx_start_send(rumor_mixer_t *m, long k, rumor_sendbuf_t *buf);
void mx_pump_sends(rumor_mixer_t *m);
void mx_send_ahead(rumor_mixer_t *m, long k, const float *x, uint64_t upto);
void mx_drop_ahead(rumor_mixer_t *m);
int mx_send_pending(const rumor_mixer_t *m, int j);
int mx_sends_queued(const rumor_mixer_t *m);
void mx_drop_sends(rumor_mixer_t *m);
void mx_send_hellos(rumor_mixer_t *m);
void mx_send_heartbeats(rumor_mixer_t *m);
int mx_all_sends_done(rumor_mixer_t *m);
int mx_neighbours_passed(rumor_mixer_t *m);
int mx_untold_retry(rumor_mixer_t *m);

/* mixer_round.c: synchronous D-PSGD rounds (receiving side) */
int mx_slot_open(rumor_mixer_t *m, struct mx_slot *s, long r);
int mx_slot_reweigh(rumor_mixer_t *m, struct mx_slot *s);
int mx_slot_alloc(rumor_mixer_t *m, struct mx_slot *s);
void mx_slot_free(rumor_mixer_t *m, struct mx_slot *s);
int mx_ensure_slot(rumor_mixer_t *m, long r);
void mx_slot_x_known(rumor_mixer_t *m, struct mx_slot *s); /* x(round) set: mix what is ready */
/* Whether complete cells are left to the caller's threads to mix */
int mx_caller_mixes(const rumor_mixer_t *m);
/* A caller's thread mixes cell c of slot s, which it claimed (READY ->
 * MIXING), and hands it over (MIXED); mu not held. */
void mx_caller_mix(rumor_mixer_t *m, struct mx_slot *s, size_t c);
int mx_on_params(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, const void *data,
                 size_t nbytes);
void mx_refresh_absent(rumor_mixer_t *m, double deadline);
int mx_round_done(const rumor_mixer_t *m, const struct mx_slot *s);
int mx_round_flowing(const rumor_mixer_t *m, const struct mx_slot *s, double now);
void mx_close_round(rumor_mixer_t *m, int timed_out);
/* The close asked for failed (rc, the last error's message): said to the
 * caller; the round stays open. */
void mx_close_failed(rumor_mixer_t *m, int rc);
/* Hands the mixed parameters of round k to the caller (both modes). */
void mx_publish_close(rumor_mixer_t *m, long k, rumor_sendbuf_t *out, int nin, int complete,
                      int timed_out, double dis, double selfw, int mixed_any);

/* mixer_choco.c: compressed gossip (CHOCO-SGD) */
int mx_choco_alloc(rumor_mixer_t *m);
void mx_choco_free(rumor_mixer_t *m);
int mx_choco_keyframe(const rumor_mixer_t *m, long k);
/* The dtype PARAMS of round r must have here. */
int mx_choco_dtype(const rumor_mixer_t *m, long r);
/* Round k begins with x in buf: returns what to send (buf itself in a
 * keyframe, else the coded change; NULL: nothing, the round's copies are
 * out of sync). */
rumor_sendbuf_t *mx_choco_begin(rumor_mixer_t *m, long k, rumor_sendbuf_t *buf);
/* The coded copy of a buffer that went out coded, else NULL. */
const struct mx_code *mx_choco_code(const rumor_mixer_t *m, const rumor_sendbuf_t *buf);
/* Round k is mixed into out (sum_j W_ij q_j, or the plain mix in a
 * keyframe): turns it into x(k+1) = x + gamma (s - x_hat), or x when the
 * copies are out of sync. *dis: ||s - x_hat||^2. */
void mx_choco_finish(rumor_mixer_t *m, const struct mx_slot *s, long k, rumor_sendbuf_t *out,
                     double *dis);

/* mixer_state.c: round tracking, jumps, state transfer, deadlines */
int mx_state_alloc(rumor_mixer_t *m);
void mx_state_free(rumor_mixer_t *m);
void mx_heard_round(rumor_mixer_t *m, int node, long round);
long mx_swarm_round(const rumor_mixer_t *m);
void mx_do_jump(rumor_mixer_t *m, long round);
void mx_tell_behind(rumor_mixer_t *m, int node);
void mx_redial(rumor_mixer_t *m);
int mx_on_state_req(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node);
int mx_on_state_chunk(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, zmq_msg_t *payload,
                      zmq_msg_t *body, int nbody);
void mx_state_progress(rumor_mixer_t *m);
int mx_state_wants_pollout(const rumor_mixer_t *m, int node);
void mx_record_round_time(rumor_mixer_t *m, double seconds);
int mx_learn_endpoint(rumor_mixer_t *m, int node, const char *endpoint);
void mx_drop_serves(rumor_mixer_t *m, int node);
const char *mx_endpoint_name(const rumor_mixer_t *m, int node);
double mx_deadline(rumor_mixer_t *m);

/* mixer_open.c: open membership */
int mx_open_alloc(rumor_mixer_t *m);
/* The period of the view's graphs (time-varying families), for the
 * receive window's slots. */
int mx_open_period(const rumor_mixer_t *m);
void mx_open_free(rumor_mixer_t *m);
/* The slot of member id at endpoint, given one now if it has none (a
 * seed's slot at that address is taken over): the slot, or -1 (full, or
 * in secure mode no allowed key has that id; counted, logged once). */
int mx_open_claim(rumor_mixer_t *m, uint64_t id, const char *endpoint);
/* Slots for the seeds (connected; secure ones without a key: trials). */
int mx_open_seeds(rumor_mixer_t *m);
/* Secure seeds: the trial whose handshake succeeded becomes the seed's
 * slot, the others are closed. */
void mx_open_progress(rumor_mixer_t *m);
/* Open membership: a new address of this peer (cfg.self_endpoint), announced. */
void mx_self_endpoint(rumor_mixer_t *m);
/* Says once, early, whether others can dial this joining peer. */
void mx_reach_check(rumor_mixer_t *m);
/* "peer 3" (a list's rank) or "peer 1f2e3d4c" (open membership: the id's
 * first 8 hex digits), for log lines. */
const char *mx_peer_name(const rumor_mixer_t *m, int node, char *buf, size_t cap);

/* mixer_view.c: membership */
int mx_view_create(rumor_mixer_t *m);
void mx_view_free(rumor_mixer_t *m);
int mx_view_update(rumor_mixer_t *m);
int mx_in_neighbors(rumor_mixer_t *m, long r, int *nbrs, double *w);
int mx_out_neighbors(rumor_mixer_t *m, long r, int *nbrs);
/* The ring of the all-reduce now (see struct mx_allreduce): ring[] gets
 * the slots in order, *pos this peer's place; returns the length. */
int mx_view_ring(rumor_mixer_t *m, int *ring, int *pos);

/* mixer_async.c */
int mx_async_alloc(rumor_mixer_t *m);
void mx_async_free(rumor_mixer_t *m);
int mx_async_on_params(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, const void *data);
void mx_async_close(rumor_mixer_t *m);
void mx_async_forget(rumor_mixer_t *m, int node); /* j restarted: its cells are void */

/* mixer_ring.c: the ring all-reduce, driven by the comm thread */
void ar_start(rumor_mixer_t *m);
void ar_progress(rumor_mixer_t *m);
void ar_poll_items(rumor_mixer_t *m, zmq_pollitem_t *items, int *ni);
/* Judges a GRADS message. Returns its verdict; *held = 1 when it was kept
 * for an all-reduce call not started yet (hdr and payload moved out). */
int mx_on_grads(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, zmq_msg_t *hdr,
                zmq_msg_t *payload, int *held);
void ar_free(rumor_mixer_t *m);

/* mixer_terms.c: neighbours not mixed with */
int mx_terms_alloc(rumor_mixer_t *m);
void mx_terms_free(rumor_mixer_t *m);
/* A HELLO from node: its terms body (NULL: none stated) and the model size
 * its header gives. 0, or -INCOMPATIBLE when they differ from this peer's
 * (node is marked, the difference said once), -BAD_FRAMES for a body that
 * is not terms. */
int mx_terms_judge(rumor_mixer_t *m, int node, const void *body, size_t len, uint64_t space);
/* A HELLO with this peer's terms went to node. */
void mx_terms_told(rumor_mixer_t *m, int node);
/* Works out whether all are incompatible (after a LEAVE too) and
 * publishes it. */
void mx_terms_publish(rumor_mixer_t *m);
/* Slot j got another member (open membership): forget what was known. */
void mx_terms_forget(rumor_mixer_t *m, int node);
/* The caller's side (what was published): 1 when every peer talked to is
 * incompatible (the first difference as the last error), else 0. */
int mx_terms_all_incompatible(rumor_mixer_t *m);
/* The comm thread's: the same message, written to msg (cap bytes). */
void mx_terms_all_msg(const rumor_mixer_t *m, char *msg, size_t cap);
/* The parameters of this peer's a neighbour's range of slot s is judged
 * against (mixer_terms.c); NULL: none known. */
const float *mx_robust_own(const rumor_mixer_t *m, const struct mx_slot *s);
#include "mixer_robust.h"
/* Judges an f32 PARAMS range of slot s from node against this peer's own
 * parameters (cfg.outlier_ratio, cfg.robust): 0, or -OUTLIER with node
 * left out of the round. */
int mx_outlier_check(rumor_mixer_t *m, struct mx_slot *s, const rumor_wire_hdr_t *h, int node,
                     const void *data);

/* mixer_rank.c: is another process running as this peer? */
void mx_rank_start(rumor_mixer_t *m);
void mx_rank_progress(rumor_mixer_t *m);
/* A HELLO from our own id: our own rank check coming back (1), or another
 * process claiming to be this peer (0, logged). */
int mx_rank_on_self(rumor_mixer_t *m, const rumor_wire_hdr_t *h, zmq_msg_t *body, int nbody);

#endif

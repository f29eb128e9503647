/* rumor-peer's options: the usage text, the option table, the checks of
 * what the options say together, and the peer's configuration (peer.h)
 * they make. */
#ifndef RUMOR_PEERS_PEER_OPTS_H
#define RUMOR_PEERS_PEER_OPTS_H

#include "peer.h"
#include "trainopts.h"

struct options {
    struct rumor_train_opts t;
    int balance_max, local_steps, fragments;
    const char *balance, *outer, *outer_rounds, *overlap, *compress, *send_ahead;
    double consensus_step;
    int keyframe_every;
    int rank, eval_every, no_average, keep_checkpoints, staleness, insecure, connections,
        io_threads, allow_alone;
    const char *keys, *allow, *peer_keys, *membership;
    long checkpoint_every, catch_up_rounds, rounds;
    const char *peers, *peers_file, *listen, *swarm, *topology, *weights, *mode, *checkpoint_dir,
        *save_average;
    double round_timeout, min_round_timeout, start_timeout, chunk_mb, max_message_mb,
        leave_timeout, throttle, link_mbit;
    const char *metrics_listen;
    const char *join, *advertise; /* open membership */
    const char *relay, *relay_via; /* relays (peer_relay.h) */
    const char *robust;            /* --robust none|clip[:tau=X] */
    const char *robust_val;        /* --robust-val N[:B] */
    int relay_max_peers, no_hole_punch;
    double relay_mbit;
    int min_peers, max_peers;
    char listen_ep[600]; /* --listen as the endpoint to bind (a name resolved) */
};

/* Parses argv into o (defaults first; -c FILE reads an INI file). Returns
 * an exit status (0 after --help, 2 on bad usage) or -1 to go on. */
int peer_opts_parse(int argc, char **argv, struct options *o);

/* The peer's configuration from the options (the swarm's topology,
 * endpoints and keys are the caller's to add). Returns 2 (bad usage,
 * said on stderr) or -1. */
int peer_opts_config(const struct options *o, rumor_peer_config_t *c);

/* Says msg and the --help hint on stderr; returns 2. */
int peer_usage_error(const char *msg);

#endif

/* rumor-peer --metrics-listen ADDR:PORT: the peer's live state in
 * Prometheus's text exposition format (version 0.0.4) over HTTP, served by
 * libmicrohttpd from its own thread. GET /metrics answers the page; other
 * paths 404, other methods 405, and malformed requests get libmicrohttpd's
 * 400: nothing a client sends reaches the training.
 *
 * The training loop publishes a snapshot after each round (under a mutex);
 * the server formats the last snapshot. Names follow Prometheus's
 * conventions: rumor_ prefix, base units (seconds, bytes), counters end in
 * _total. */
#ifndef RUMOR_PEERS_PROMSERVE_H
#define RUMOR_PEERS_PROMSERVE_H

#include <stdint.h>

#include "mixer.h"
#include "wire.h"

typedef struct rumor_prom rumor_prom_t;

/* What a peer publishes after a round. */
typedef struct rumor_prom_snapshot {
    int rank, peers;
    char peer[24];              /* open membership: the id in hex, the label instead
                                 * of rank ("" with a list) */
    long round, rounds_total;   /* the round the peer is at, and the run's */
    double loss;                /* the last round's training loss */
    double examples_per_second; /* since the start */
    double wait_seconds;        /* waited for neighbours, since the start */
    double seconds;             /* training time since the start */
    double consensus_distance;  /* |mix - x| of the last round */
    int in_neighbors, neighbors_complete, members;
    uint64_t bytes_sent, bytes_received;
    uint64_t rounds_run, rounds_mixed, consensus_skipped, jumps, state_fetches;
    rumor_wire_stats_t messages;
    double checkpoint_unix;     /* when the last checkpoint was written (0 none) */
    double test_accuracy;       /* the last evaluation (< 0 none) */
    double eval_loss;           /* the last validation loss (< 0 none) */
} rumor_prom_snapshot_t;

/* Starts serving on "ADDR:PORT" (an IPv4 address or a name such as
 * localhost; port 1..65535). RUMOR_EINVAL for a malformed address,
 * RUMOR_ESYS when the port cannot be bound, RUMOR_ENOTSUP when rumor was
 * built without libmicrohttpd. */
int rumor_prom_start(const char *listen, rumor_prom_t **out) RUMOR_WUR;
void rumor_prom_stop(rumor_prom_t **pp);
/* Replaces the snapshot the server shows. */
void rumor_prom_publish(rumor_prom_t *p, const rumor_prom_snapshot_t *s);
/* The page for a snapshot, into buf (always terminated); its length, or
 * RUMOR_EINVAL when it does not fit. */
int rumor_prom_format(const rumor_prom_snapshot_t *s, char *buf, size_t cap);

#endif

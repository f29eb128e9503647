/* rumor-peer --metrics-listen ADDR:PORT: the peer's live state in
 * Prometheus's text exposition format (version 0.0.4) over HTTP, served by
 * libmicrohttpd from its own thread. GET /metrics answers the page; other
 * paths 404, other methods 405, and malformed requests get libmicrohttpd's
 * 400: nothing a client sends reaches the training.
 *
 * The server starts before the data loads and serves every family from the
 * first scrape, with its initial value (NaN where there is none yet: the
 * loss before the first round, the accuracy before the first evaluation),
 * so that a dashboard shows a peer that is starting rather than "no data".
 * rumor_peer_phase says what the peer is doing, as a state set: one series
 * per phase, 1 for the current one and 0 for the others.
 *
 * The training loop publishes a snapshot after each round (under a mutex);
 * the server formats the last snapshot. Names follow Prometheus's
 * conventions: rumor_ prefix, base units (seconds, bytes), counters end in
 * _total.
 *
 * Idle connections are closed after RUMOR_PROM_IDLE_TIMEOUT seconds and up
 * to RUMOR_PROM_MAX_CONNECTIONS are served at once, so that a few idle or
 * slow clients cannot lock a scraper out. */
#ifndef RUMOR_PEERS_PROMSERVE_H
#define RUMOR_PEERS_PROMSERVE_H

#include <stdint.h>

#include "mixer.h"
#include "peer.h"
#include "wire.h"

#define RUMOR_PROM_IDLE_TIMEOUT 5       /* seconds without a byte either way */
#define RUMOR_PROM_MAX_CONNECTIONS 128  /* at least 64 clients are always served */

typedef struct rumor_prom rumor_prom_t;

/* What it serves: the peer's figures and phase (swarm/peer.h), the phase
 * as rumor_peer_phase{phase="..."}. */

/* Checks "ADDR:PORT" (an IPv4 address, 0.0.0.0 or * for every interface,
 * or a name such as localhost; port 1..65535) without binding:
 * RUMOR_EINVAL with what is wrong. */
int rumor_prom_check_listen(const char *listen) RUMOR_WUR;

/* Binds "ADDR:PORT" and starts serving `first` in phase starting.
 * RUMOR_EINVAL for a malformed address or one that is not this machine's
 * (bad usage), RUMOR_ESYS when the port cannot be bound (in use, no
 * permission), RUMOR_ENOTSUP when rumor was built without libmicrohttpd.
 * libmicrohttpd's own messages go to rumor_debug, never to stderr. */
int rumor_prom_start(const char *listen, const rumor_peer_stats_t *first,
                     rumor_prom_t **out) RUMOR_WUR;
void rumor_prom_stop(rumor_prom_t **pp);
/* Replaces the snapshot the server shows (p may be NULL: no server). */
void rumor_prom_publish(rumor_prom_t *p, const rumor_peer_stats_t *s);
/* Sets the phase the server shows (p may be NULL). Async-signal-safe (an
 * atomic store), so a signal handler may call it while p lives. */
void rumor_prom_set_phase(rumor_prom_t *p, rumor_peer_phase phase);
/* The page for a snapshot and a phase, into buf (always terminated); its
 * length, or RUMOR_EINVAL when it does not fit. */
int rumor_prom_format(const rumor_peer_stats_t *s, rumor_peer_phase phase, char *buf,
                      size_t cap);

#endif

/* ZeroMQ sockets for gossip, with the settings every rumor socket needs.
 *
 * A transport is one ZeroMQ context, one PULL socket bound at the peer's
 * listen address (every neighbour sends to it) and one PUSH socket per peer
 * this peer sends to. All sockets: LINGER 0 (closing never waits on a dead
 * peer), ZMTP heartbeats (a frozen or partitioned peer is noticed in
 * heartbeat_timeout instead of never), PUSH with ZMQ_IMMEDIATE (nothing
 * queues for a peer that is not connected: a send reports "would block"
 * instead) and a small send HWM, PULL with ZMQ_MAXMSGSIZE.
 *
 * Sockets are not thread-safe: one thread (the mixer's comm thread) uses a
 * transport after creating it.
 *
 * Payloads are sent zero-copy out of reference-counted buffers
 * (rumor_sendbuf_t): ZeroMQ reads a buffer until its I/O thread has written
 * it out, so a buffer must not be overwritten until its count drops to 0. */
#ifndef RUMOR_TRANSPORT_H
#define RUMOR_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_transport_opts {
    const char *listen;         /* "tcp://127.0.0.1:5001"; "tcp://" "*:5001" for all interfaces */
    size_t max_msg_size;        /* largest message accepted (ZMQ_MAXMSGSIZE) */
    int heartbeat_ivl_ms;       /* default 500 */
    int heartbeat_timeout_ms;   /* default 2000 */
    int sndhwm;                 /* messages queued per peer (default 4) */
    int rcvhwm;                 /* default 64 */
    int io_threads;             /* ZeroMQ I/O threads (default 1) */
} rumor_transport_opts_t;

typedef struct rumor_transport rumor_transport_t;

/* A buffer whose sends are counted: refs is raised for each message that
 * points into it and lowered by ZeroMQ when it lets go of the message. */
typedef struct rumor_sendbuf {
    float *data;
    size_t n;                   /* floats */
    atomic_int refs;
    int pins;                   /* the owner's own count of sends still to start */
} rumor_sendbuf_t;

/* Creates the context and binds the PULL socket. peers is the number of
 * peer slots (PUSH sockets are made by connect). */
int rumor_transport_create(const rumor_transport_opts_t *o, int peers,
                           rumor_transport_t **out) RUMOR_WUR;
void rumor_transport_destroy(rumor_transport_t **tp);

/* The endpoint actually bound (a "*:0" port resolved). */
const char *rumor_transport_endpoint(const rumor_transport_t *t);

/* Connects slot `peer` to endpoint (a fresh PUSH socket; an old one is
 * closed, dropping what was queued on it). */
int rumor_transport_connect(rumor_transport_t *t, int peer, const char *endpoint);
void rumor_transport_disconnect(rumor_transport_t *t, int peer);
int rumor_transport_connected(const rumor_transport_t *t, int peer);

/* Sockets, for zmq_poll. */
void *rumor_transport_pull(rumor_transport_t *t);
void *rumor_transport_push(rumor_transport_t *t, int peer);

/* Sends [hdr] or [hdr][payload] to a peer without blocking. The payload is
 * data[0..bytes) inside buf, sent zero-copy (buf->refs is raised until
 * ZeroMQ is done with it); buf may be NULL for header-only messages.
 * Returns 0 when queued, 1 when the peer's queue is full or it is not
 * connected (nothing was queued), or a negative error. */
int rumor_transport_send(rumor_transport_t *t, int peer, const void *hdr, size_t hdr_len,
                         rumor_sendbuf_t *buf, const void *data, size_t bytes);

/* Counters since creation. */
typedef struct rumor_transport_stats {
    uint64_t bytes_sent, bytes_received, msgs_sent, msgs_received;
    uint64_t send_would_block;
} rumor_transport_stats_t;
const rumor_transport_stats_t *rumor_transport_stats(const rumor_transport_t *t);
/* Counts a received message (callers receive with zmq_msg_recv themselves). */
void rumor_transport_count_received(rumor_transport_t *t, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif

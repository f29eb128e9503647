/* ZeroMQ sockets for gossip, with the settings every rumor socket needs.
 *
 * A transport is one ZeroMQ context, one PULL socket bound at the peer's
 * listen address (every neighbour sends to it) and one PUSH socket per peer
 * this peer sends to. All sockets: LINGER 0 (closing never waits on a dead
 * peer), ZMTP heartbeats on the PUSH sockets unless opts.no_heartbeats (a
 * frozen or partitioned receiver is noticed in heartbeat_timeout instead
 * of never; none on the PULL socket, see transport.c), PUSH with
 * ZMQ_IMMEDIATE (nothing queues for a peer that is not connected: a send
 * reports "would block" instead) and a small send HWM, PULL with
 * ZMQ_MAXMSGSIZE.
 *
 * Sockets are not thread-safe: one thread (the mixer's comm thread) uses a
 * transport after creating it.
 *
 * Payloads are sent zero-copy out of reference-counted buffers
 * (rumor_sendbuf_t): ZeroMQ reads a buffer until its I/O thread has written
 * it out, so a buffer must not be overwritten until its count drops to 0.
 *
 * Security (CurveZMQ, see curve.h). With opts.keys set, every socket runs
 * CURVE: a ZAP handler that admits only opts.allow's keys starts in the
 * transport's context before the PULL socket binds, the PULL socket is a
 * CURVE server, and every PUSH socket a CURVE client that knows its
 * neighbour's public key (rumor_transport_set_peer_key or
 * rumor_transport_connect_curve). Each message received then carries the
 * sender's authenticated key: rumor_transport_msg_peer_id gives its peer
 * id, which a receiver compares with the header's sender id (a mismatch is
 * RUMOR_WIRE_BAD_IDENTITY). Without opts.keys the transport is plaintext
 * (the --insecure mode): anyone who can reach the port gets in. */
#ifndef RUMOR_TRANSPORT_H
#define RUMOR_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "curve.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_transport_opts {
    const char *listen;         /* "tcp://127.0.0.1:5001"; "tcp://" "*:5001" for all interfaces */
    size_t max_msg_size;        /* largest message accepted (ZMQ_MAXMSGSIZE) */
    int heartbeat_ivl_ms;       /* default 500 */
    int heartbeat_timeout_ms;   /* default 2000 */
    /* No ZMTP heartbeats at all. For an open swarm, where a peer holds a
     * PUSH socket to every member of its view: libzmq's heartbeats cost
     * every connection two messages and a timer each interval (and
     * cancelling a timer scans an I/O thread's whole timer list), O(view)
     * a peer, and SWIM's probes and the mixer's own HEARTBEATs already say
     * who is alive. */
    int no_heartbeats;
    int sndhwm;                 /* messages queued per peer (default 4) */
    int rcvhwm;                 /* default 64 */
    int io_threads;             /* ZeroMQ I/O threads (default 1) */
    /* Our keypair (with its secret): CURVE on every socket. NULL: plaintext.
     * Copied (and wiped on destroy); the caller may clear its own. */
    const rumor_curve_keypair_t *keys;
    /* The keys admitted to our PULL socket; required with keys (copied). */
    const rumor_allowlist_t *allow;
    /* TCP connections each PUSH socket opens to its peer (default 1).
     * A PUSH socket deals messages round-robin over its connections and
     * each connection encrypts on its own I/O thread, so with io_threads
     * > 1 (on both sides) several cores encrypt; messages to one peer may
     * then arrive out of order. Connection 0 opens at connect, the others
     * one by one, 20 ms apart, once messages to that peer flow (so that
     * the receiver, which places each accepted connection on its least
     * loaded I/O thread, sees the previous one's load). */
    int conns_per_peer;
    /* TCP_NOTSENT_LOWAT of every connection this peer opens: how many
     * bytes the kernel holds not yet sent before it asks ZeroMQ for more.
     * Small, what is handed to ZeroMQ is close to what is on the wire, so
     * the mixer's oldest-round-first order is the wire's order too (a
     * kernel buffer that grows to megabytes would hold whole rounds, and
     * two rounds' sends to two neighbours would share the upload); it
     * does not bound the bytes in flight, so a long link still fills.
     * Default 16 KiB; -1: the kernel's. */
    int notsent_lowat;
    /* The address a connect dials for a peer's endpoint (into out, cap
     * bytes; returns its length): a relayed peer may be dialled through a
     * local proxy (relay.h, rumor_relay_client_dial). NULL: the endpoint. */
    int (*dial)(void *arg, const char *endpoint, char *out, size_t cap);
    void *dial_arg;
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
 * peer slots (PUSH sockets are made by connect). With o->keys: starts the
 * ZAP handler first; RUMOR_EINVAL when o->allow is missing or empty (CURVE
 * without an allow-list would admit anyone) or o->keys has no secret. */
int rumor_transport_create(const rumor_transport_opts_t *o, int peers,
                           rumor_transport_t **out) RUMOR_WUR;
void rumor_transport_destroy(rumor_transport_t **tp);

/* The endpoint actually bound (a "*:0" port resolved). */
const char *rumor_transport_endpoint(const rumor_transport_t *t);

/* Connects slot `peer` to endpoint (a fresh PUSH socket; an old one is
 * closed, dropping what was queued on it). On a secure transport the slot
 * must have its peer's public key (rumor_transport_set_peer_key): else
 * RUMOR_EINVAL, never a plaintext connection. */
int rumor_transport_connect(rumor_transport_t *t, int peer, const char *endpoint);

/* Remembers the public key of the peer in slot `peer`: every later connect
 * of that slot authenticates that peer as its CURVE server. RUMOR_ESTATE
 * on a plaintext transport. Does not reconnect. */
int rumor_transport_set_peer_key(rumor_transport_t *t, int peer,
                                 const uint8_t pk[RUMOR_CURVE_KEY_BYTES]);

/* rumor_transport_set_peer_key then rumor_transport_connect. */
int rumor_transport_connect_curve(rumor_transport_t *t, int peer, const char *endpoint,
                                  const uint8_t server_pk[RUMOR_CURVE_KEY_BYTES]);

/* 1 if the transport runs CURVE, 0 if plaintext. */
int rumor_transport_secure(const rumor_transport_t *t);

/* Our peer id, rumor_curve_id of our public key; 0 on a plaintext transport. */
uint64_t rumor_transport_self_id(const rumor_transport_t *t);
void rumor_transport_disconnect(rumor_transport_t *t, int peer);
/* The interval at which slot `peer`'s later connects retry a connection
 * that failed or was refused (ms; 0: the default, 100 ms growing to
 * 500 ms). A handshake refused by the other end is retried at that pace,
 * each retry counted there: a key tried on a guess waits longer. */
void rumor_transport_set_reconnect(rumor_transport_t *t, int peer, int ms);
int rumor_transport_connected(const rumor_transport_t *t, int peer);

/* Sockets, for zmq_poll. */
void *rumor_transport_pull(rumor_transport_t *t);
void *rumor_transport_push(rumor_transport_t *t, int peer);
/* The ZeroMQ context (for inproc sockets such as zmq_socket_monitor's). */
void *rumor_transport_context(rumor_transport_t *t);

/* The peer id (rumor_curve_id) of the key the connection a received
 * message came through authenticated with (ZeroMQ's "User-Id" message
 * property, set by our ZAP handler), or 0 when the message came in
 * plaintext or carries no such property. msg is any frame of a message
 * received from rumor_transport_pull. */
struct zmq_msg_t;
uint64_t rumor_transport_msg_peer_id(const struct zmq_msg_t *msg);
/* The same key itself: 1 and pk filled, or 0 when there is none. */
int rumor_transport_msg_peer_key(const struct zmq_msg_t *msg,
                                 uint8_t pk[RUMOR_CURVE_KEY_BYTES]);

/* Sends [hdr] or [hdr][payload] to a peer without blocking. The payload is
 * data[0..bytes) inside buf, sent zero-copy (buf->refs is raised until
 * ZeroMQ is done with it); buf may be NULL for header-only messages.
 * Returns 0 when queued, 1 when the peer's queue is full or it is not
 * connected (nothing was queued), or a negative error. */
int rumor_transport_send(rumor_transport_t *t, int peer, const void *hdr, size_t hdr_len,
                         rumor_sendbuf_t *buf, const void *data, size_t bytes);

/* Sends [hdr][body] to a peer without blocking, the body copied (a small
 * control message's: a HELLO's terms). Returns as rumor_transport_send. */
int rumor_transport_send_body(rumor_transport_t *t, int peer, const void *hdr, size_t hdr_len,
                              const void *body, size_t body_len);

/* Counters since creation. */
typedef struct rumor_transport_stats {
    uint64_t bytes_sent, bytes_received, msgs_sent, msgs_received;
    uint64_t send_would_block;
    /* The ZAP handler's decisions (0 on a plaintext transport). A client
     * with a wrong server key or a secret that does not match its public
     * key fails the CURVE handshake before ZAP is asked, and one with
     * another mechanism (NULL, PLAIN) fails at the greeting: none of
     * those is counted here. */
    uint64_t zap_admitted, zap_denied_not_listed, zap_denied_mechanism, zap_malformed;
    /* Handshakes on our PULL socket that failed, by kind, from its socket
     * monitor (rumor_transport_events): another mechanism (a NULL or PLAIN
     * client at a CURVE peer, or CURVE at a plaintext one), a cryptographic
     * failure (a client with a wrong server key, or a secret that does not
     * match its public key), other protocol errors, refused by ZAP (also
     * counted above), and failures libzmq gives no detail for. */
    uint64_t hs_mechanism, hs_crypto, hs_protocol, hs_denied, hs_other;
    /* connections accepted and closed, handshakes that succeeded */
    uint64_t conn_accepted, conn_closed, hs_ok;
    /* outgoing TCP connections given TCP_NOTSENT_LOWAT (opts.notsent_lowat) */
    uint64_t lowat_set;
    /* outgoing connections to peers whose handshake succeeded (CurveZMQ's,
     * or the plaintext greeting): this peer can reach others */
    uint64_t out_hs_ok;
} rumor_transport_stats_t;
const rumor_transport_stats_t *rumor_transport_stats(const rumor_transport_t *t);

/* Connections refused, all kinds (ZAP's and the handshake's, each once). */
uint64_t rumor_transport_stats_refused(const rumor_transport_stats_t *s);
/* "admitted=12 refused: not_listed=3 crypto=1" (refusals only where not 0;
 * "plaintext" instead of admitted= on a plaintext transport), for a log
 * line. Returns the length, or RUMOR_EINVAL when it does not fit. */
int rumor_transport_stats_format(const rumor_transport_stats_t *s, int secure, char *buf,
                                 size_t cap);
/* {"admitted":12,"refused":4,"not_listed":3,"zap_mechanism":0,...} with every
 * kind, for metrics. Returns as above. */
int rumor_transport_stats_json(const rumor_transport_stats_t *s, char *buf, size_t cap);
/* Reads the socket monitors' events (without blocking): handshake
 * failures into the stats, the probe's progress. Call it from the loop
 * that polls the sockets. */
void rumor_transport_events(rumor_transport_t *t);

/* The probe: a PUSH socket, a client with our own keys that expects our
 * own public key from the server, connected to `endpoint` (this peer's
 * listed address), which sends one message [hdr][body] once connected. It
 * tells whether someone else holding this peer's key (or, in plaintext,
 * anyone) answers there. rumor_transport_probe_state gives
 * RUMOR_PROBE_HANDSHAKE once a handshake with the other end succeeded and
 * RUMOR_PROBE_FAILED when a connection was refused or failed. */
#define RUMOR_PROBE_HANDSHAKE 1
#define RUMOR_PROBE_FAILED 2
int rumor_transport_probe_open(rumor_transport_t *t, const char *endpoint, const void *hdr,
                               size_t hdr_len, const void *body, size_t body_len) RUMOR_WUR;
int rumor_transport_probe_state(const rumor_transport_t *t);
void rumor_transport_probe_close(rumor_transport_t *t);

/* Counts a received message (callers receive with zmq_msg_recv themselves). */
void rumor_transport_count_received(rumor_transport_t *t, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif

/* ZeroMQ sockets for gossip (see transport.h). */
#include "transport.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"

#define ZAP_DOMAIN "rumor"

struct rumor_transport {
    void *ctx;
    void *pull;
    void **push;           /* peers */
    int peers;
    char endpoint[256];
    rumor_transport_opts_t o;
    rumor_transport_stats_t stats;
    /* Security: keys set means CURVE (o.keys and o.allow are not kept). */
    rumor_curve_keypair_t *keys;      /* our copy, wiped on destroy */
    rumor_zap_t *zap;
    uint8_t (*peer_pk)[RUMOR_CURVE_KEY_BYTES]; /* peers: each slot's server key */
    uint8_t *has_pk;                  /* peers */
    /* peers: the endpoint of a slot whose connections 1..conns_per_peer-1
     * are still to open (see connect_more), the next one's index and when
     * the last one opened. */
    char **more_ep;
    int *more_next;
    int *reconnect_ms;                /* peers: a slot's own reconnect interval, 0 default */
    double *more_at;
    /* socket monitors (inproc PAIR sockets): the PULL socket's handshakes,
     * and the probe's (rumor_transport_probe_open) */
    void *mon;
    void **push_mon;       /* peers: each PUSH socket's connections (for their fds) */
    unsigned push_mons;    /* monitors started: each one's inproc address is new */
    double push_mon_next;  /* when rumor_transport_events reads them next */
    void *probe, *probe_mon;
    int probe_state;
};

#define PUSH_MON_GAP_S 0.02

static int set_int(void *sock, int opt, int v, const char *what)
{
    if (zmq_setsockopt(sock, opt, &v, sizeof v) != 0)
        return rumor_err_set(RUMOR_ESYS, "zmq_setsockopt(%s=%d): %s", what, v,
                             zmq_strerror(zmq_errno()));
    return 0;
}

static int watch(rumor_transport_t *t, void *s, const char *what, int events, void **out);

/* The settings every rumor socket has (see transport.h). Heartbeats only
 * on the sending sockets (`sender`): they notice a receiver that froze or
 * was cut off. None on the receiving PULL socket, and no TTL asking the
 * receiver to time its senders out: a receiver whose input is stopped (its
 * queue full while the comm thread is busy) cannot read PINGs, and libzmq
 * 4.3.4 aborts the process when such a stopped connection times out
 * (Assertion failed: !_io_error, stream_engine_base.cpp:331; zeromq/libzmq
 * #4364, #4767; seen under ThreadSanitizer's slowdown). */
static int common_opts(const rumor_transport_t *t, void *s, int sender)
{
    RUMOR_CHECK(set_int(s, ZMQ_LINGER, 0, "LINGER"));
    if (sender && !t->o.no_heartbeats) {
        RUMOR_CHECK(set_int(s, ZMQ_HEARTBEAT_IVL, t->o.heartbeat_ivl_ms, "HEARTBEAT_IVL"));
        RUMOR_CHECK(set_int(s, ZMQ_HEARTBEAT_TIMEOUT, t->o.heartbeat_timeout_ms,
                            "HEARTBEAT_TIMEOUT"));
    }
    RUMOR_CHECK(set_int(s, ZMQ_RECONNECT_IVL, 100, "RECONNECT_IVL"));
    RUMOR_CHECK(set_int(s, ZMQ_RECONNECT_IVL_MAX, 500, "RECONNECT_IVL_MAX"));
    /* (ZMQ_CONNECT_TIMEOUT would cut the kernel's SYN backoff after a
     * partition heals, but libzmq 4.3.4 then runs out of file descriptors:
     * tests/test_mixer aborts with "Too many open files") */
    return 0;
}

/* ZeroMQ resolves IPv6 only on a socket told so: an endpoint in brackets
 * ("tcp://[::1]:7000", "tcp://[2001:db8::5]:7000") and a listener on the
 * wildcard (a star for the host, which then takes both IPv4 and IPv6; libzmq
 * falls back to IPv4 where the system has no IPv6) */
static int ipv6_for(void *s, const char *endpoint, int listener)
{
    int on = strstr(endpoint, "://[") != NULL || (listener && strstr(endpoint, "://*:") != NULL);
    return set_int(s, ZMQ_IPV6, on, "IPV6");
}

/* Keeps a copy of our keys and starts the ZAP handler in t's context,
 * before any socket of it exists. */
static int secure_setup(rumor_transport_t *t, const rumor_transport_opts_t *o)
{
    if (!o->keys->has_secret)
        return rumor_err_set(RUMOR_EINVAL, "transport: CURVE needs our secret key, not only "
                                           "the public one");
    if (!o->allow || rumor_allowlist_count(o->allow) == 0)
        return rumor_err_set(RUMOR_EINVAL,
                             "transport: CURVE without an allow-list would admit anyone who "
                             "knows our public key: give the swarm's allow-list, or run "
                             "plaintext (insecure) on purpose");
    size_t slots = (size_t)(t->peers ? t->peers : 1);
    t->keys = malloc(sizeof *t->keys);
    t->peer_pk = calloc(slots, sizeof *t->peer_pk);
    t->has_pk = calloc(slots, 1);
    if (!t->keys || !t->peer_pk || !t->has_pk)
        return rumor_err_set(RUMOR_ENOMEM, "transport: out of memory");
    *t->keys = *o->keys;
    RUMOR_CHECK(rumor_zap_start(t->ctx, o->allow, &t->zap));
    return 0;
}

int rumor_transport_create(const rumor_transport_opts_t *o, int peers, rumor_transport_t **out)
{
    *out = NULL;
    if (!o->listen || !*o->listen)
        return rumor_err_set(RUMOR_EINVAL, "transport: no listen address");
    if (peers < 0 || peers > 1 << 20)
        return rumor_err_set(RUMOR_EINVAL, "transport: %d peers out of range", peers);
    rumor_transport_t *t = calloc(1, sizeof *t);
    if (!t)
        return rumor_err_set(RUMOR_ENOMEM, "transport: out of memory");
    t->o = *o;
    if (t->o.heartbeat_ivl_ms <= 0)
        t->o.heartbeat_ivl_ms = 500;
    if (t->o.heartbeat_timeout_ms <= 0)
        t->o.heartbeat_timeout_ms = 2000;
    if (t->o.sndhwm <= 0)
        t->o.sndhwm = 4;
    if (t->o.rcvhwm <= 0)
        t->o.rcvhwm = 64;
    if (t->o.io_threads <= 0)
        t->o.io_threads = 1;
    if (t->o.conns_per_peer <= 0)
        t->o.conns_per_peer = 1;
    if (t->o.notsent_lowat == 0)
        t->o.notsent_lowat = 16 << 10;
    t->o.keys = NULL;
    t->o.allow = NULL;
    t->peers = peers;
    size_t slots = (size_t)(peers ? peers : 1);
    t->push = calloc(slots, sizeof *t->push);
    t->push_mon = calloc(slots, sizeof *t->push_mon);
    t->more_ep = calloc(slots, sizeof *t->more_ep);
    t->more_next = calloc(slots, sizeof *t->more_next);
    t->more_at = calloc(slots, sizeof *t->more_at);
    t->reconnect_ms = calloc(slots, sizeof *t->reconnect_ms);
    t->ctx = zmq_ctx_new();
    if (!t->push || !t->push_mon || !t->more_ep || !t->more_next || !t->more_at || !t->reconnect_ms || !t->ctx) {
        rumor_transport_destroy(&t);
        return rumor_err_set(RUMOR_ENOMEM, "transport: cannot create a ZeroMQ context");
    }
    zmq_ctx_set(t->ctx, ZMQ_IO_THREADS, t->o.io_threads);
    /* a socket a member, its monitor's two and room for those closed but
     * not yet reaped: ZeroMQ's default of 1023 ran out at 128 members */
    int want = 8 * (int)slots + 64, limit = zmq_ctx_get(t->ctx, ZMQ_SOCKET_LIMIT);
    if (limit > 0 && want > limit)
        want = limit;
    if (want > zmq_ctx_get(t->ctx, ZMQ_MAX_SOCKETS))
        zmq_ctx_set(t->ctx, ZMQ_MAX_SOCKETS, want);
    int rc = 0;
    if (o->keys)
        rc = secure_setup(t, o);
    if (rc == 0) {
        t->pull = zmq_socket(t->ctx, ZMQ_PULL);
        if (!t->pull)
            rc = rumor_err_set(RUMOR_ESYS, "transport: zmq_socket: %s",
                               zmq_strerror(zmq_errno()));
    }
    if (rc == 0)
        rc = common_opts(t, t->pull, 0);
    if (rc == 0)
        rc = set_int(t->pull, ZMQ_RCVHWM, t->o.rcvhwm, "RCVHWM");
    if (rc == 0 && t->keys) {
        /* A CURVE server: the ZAP handler (running since secure_setup) is
         * asked about every client before the handshake completes. */
        rc = set_int(t->pull, ZMQ_CURVE_SERVER, 1, "CURVE_SERVER");
        if (rc == 0 && (zmq_setsockopt(t->pull, ZMQ_CURVE_SECRETKEY, t->keys->secret_key,
                                       RUMOR_CURVE_KEY_BYTES) != 0 ||
                        zmq_setsockopt(t->pull, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN,
                                       strlen(ZAP_DOMAIN)) != 0))
            rc = rumor_err_set(RUMOR_ESYS, "transport: CURVE server options: %s",
                               zmq_strerror(zmq_errno()));
    }
    if (rc == 0 && o->max_msg_size) {
        /* libzmq bounds the frame on the wire, which CURVE makes larger:
         * the bound stays the one on what the sender sent. */
        int64_t mx = (int64_t)o->max_msg_size + (t->keys ? RUMOR_CURVE_MSG_OVERHEAD : 0);
        if (zmq_setsockopt(t->pull, ZMQ_MAXMSGSIZE, &mx, sizeof mx) != 0)
            rc = rumor_err_set(RUMOR_ESYS, "zmq_setsockopt(MAXMSGSIZE): %s",
                               zmq_strerror(zmq_errno()));
    }
    if (rc == 0)
        rc = watch(t, t->pull, "pull",
                   ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH,
                   &t->mon);
    if (rc == 0)
        rc = ipv6_for(t->pull, o->listen, 1);
    if (rc == 0 && zmq_bind(t->pull, o->listen) != 0) {
        int e = zmq_errno();
        rc = rumor_err_set(RUMOR_ESYS, "cannot listen on '%s': %s%s", o->listen, zmq_strerror(e),
                           e == EADDRINUSE ? " (another process listens there: a second peer "
                                             "with the same rank?)"
                                           : "");
    }
    if (rc == 0) {
        size_t len = sizeof t->endpoint;
        if (zmq_getsockopt(t->pull, ZMQ_LAST_ENDPOINT, t->endpoint, &len) != 0)
            snprintf(t->endpoint, sizeof t->endpoint, "%s", o->listen);
    }
    if (rc < 0) {
        rumor_transport_destroy(&t);
        return rc;
    }
    *out = t;
    return 0;
}

void rumor_transport_destroy(rumor_transport_t **tp)
{
    if (!tp || !*tp)
        return;
    rumor_transport_t *t = *tp;
    rumor_transport_probe_close(t);
    if (t->mon)
        zmq_close(t->mon);
    for (int i = 0; t->push && i < t->peers; i++)
        if (t->push[i])
            zmq_close(t->push[i]);
    for (int i = 0; t->push_mon && i < t->peers; i++)
        if (t->push_mon[i])
            zmq_close(t->push_mon[i]);
    if (t->pull)
        zmq_close(t->pull);
    rumor_zap_stop(&t->zap); /* after the sockets that authenticate through it */
    if (t->ctx)
        zmq_ctx_term(t->ctx); /* LINGER 0 everywhere: returns at once */
    if (t->keys) {
        rumor_curve_keypair_clear(t->keys);
        free(t->keys);
    }
    for (int i = 0; t->more_ep && i < t->peers; i++)
        free(t->more_ep[i]);
    free(t->more_ep);
    free(t->reconnect_ms);
    free(t->more_next);
    free(t->more_at);
    free(t->peer_pk);
    free(t->has_pk);
    free(t->push);
    free(t->push_mon);
    free(t);
    *tp = NULL;
}

const char *rumor_transport_endpoint(const rumor_transport_t *t) { return t->endpoint; }

/* ------------------------------------------------------------ monitors */

/* Starts a monitor of socket s for `events` and connects a PAIR socket to
 * it (*out), read without blocking by drain(). */
static int watch(rumor_transport_t *t, void *s, const char *what, int events, void **out)
{
    char addr[96];
    snprintf(addr, sizeof addr, "inproc://rumor-monitor-%s-%p", what, s);
    if (zmq_socket_monitor(s, addr, events) != 0)
        return rumor_err_set(RUMOR_ESYS, "transport: socket monitor: %s",
                             zmq_strerror(zmq_errno()));
    void *p = zmq_socket(t->ctx, ZMQ_PAIR);
    if (!p)
        return rumor_err_set(RUMOR_ESYS, "transport: zmq_socket: %s", zmq_strerror(zmq_errno()));
    int zero = 0;
    zmq_setsockopt(p, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(p, addr) != 0) {
        zmq_close(p);
        return rumor_err_set(RUMOR_ESYS, "transport: socket monitor: %s",
                             zmq_strerror(zmq_errno()));
    }
    *out = p;
    return 0;
}

/* The next event of a monitor: 1 and *event, *value set, or 0 when none. */
static int next_event(void *mon, int *event, uint32_t *value)
{
    zmq_msg_t a, b;
    zmq_msg_init(&a);
    if (zmq_msg_recv(&a, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&a);
        return 0;
    }
    int ok = zmq_msg_size(&a) >= 6;
    if (ok) {
        const uint8_t *d = zmq_msg_data(&a);
        uint16_t ev;
        memcpy(&ev, d, 2); /* host order: libzmq writes the event in memory */
        memcpy(value, d + 2, 4);
        *event = ev;
    }
    int more = zmq_msg_more(&a);
    zmq_msg_close(&a);
    if (more) { /* the endpoint frame */
        zmq_msg_init(&b);
        (void)zmq_msg_recv(&b, mon, 0);
        zmq_msg_close(&b);
    }
    return ok ? 1 : next_event(mon, event, value);
}

void rumor_transport_events(rumor_transport_t *t)
{
    int ev;
    uint32_t v;
    /* a connection is up: its kernel buffer holds little unsent (the fd is
     * libzmq's; were it closed and reused meanwhile, the option fails on
     * anything but a TCP socket and does no harm on one) */
    /* Reading a monitor is a system call on its mailbox even when empty,
     * and an open swarm's peer has one a member: read them every
     * PUSH_MON_GAP_S, not on every turn of the comm loop (which turns for
     * every message), or a round costs O(members) system calls. What
     * they report (a connection up: its TCP_NOTSENT_LOWAT; handshakes, for
     * the stats) may wait that long. */
    double now = rumor_now();
    int scan = now >= t->push_mon_next;
    if (scan)
        t->push_mon_next = now + PUSH_MON_GAP_S;
    for (int j = 0; scan && j < t->peers; j++)
        while (t->push_mon[j] && next_event(t->push_mon[j], &ev, &v))
            if (ev == ZMQ_EVENT_CONNECTED && t->o.notsent_lowat > 0) {
                int lowat = t->o.notsent_lowat;
                if (setsockopt((int)v, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat) == 0)
                    t->stats.lowat_set++;
            } else if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
                t->stats.out_hs_ok++;
            }
    while (t->mon && next_event(t->mon, &ev, &v)) {
        if (ev == ZMQ_EVENT_ACCEPTED)
            t->stats.conn_accepted++;
        else if (ev == ZMQ_EVENT_DISCONNECTED)
            t->stats.conn_closed++;
        else if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            t->stats.hs_ok++;
        else if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            t->stats.hs_denied++;
        else if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && v == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
            t->stats.hs_mechanism++;
        else if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && v == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
            t->stats.hs_crypto++;
        else if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
            t->stats.hs_protocol++;
        else if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            t->stats.hs_other++;
    }
    while (t->probe_mon && next_event(t->probe_mon, &ev, &v)) {
        if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            t->probe_state |= RUMOR_PROBE_HANDSHAKE;
        else if (ev == ZMQ_EVENT_CONNECT_RETRIED || ev == ZMQ_EVENT_CLOSED ||
                 (ev & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                        ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)))
            t->probe_state |= RUMOR_PROBE_FAILED;
    }
}

int rumor_transport_probe_open(rumor_transport_t *t, const char *endpoint, const void *hdr,
                               size_t hdr_len, const void *body, size_t body_len)
{
    rumor_transport_probe_close(t);
    void *s = zmq_socket(t->ctx, ZMQ_PUSH);
    if (!s)
        return rumor_err_set(RUMOR_ESYS, "transport: zmq_socket: %s", zmq_strerror(zmq_errno()));
    t->probe = s;
    int rc = common_opts(t, s, 1);
    /* as this peer's own client: whoever answers there must hold our key */
    if (rc == 0 && t->keys &&
        (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, t->keys->public_key, RUMOR_CURVE_KEY_BYTES) != 0 ||
         zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, t->keys->public_key, RUMOR_CURVE_KEY_BYTES) != 0 ||
         zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, t->keys->secret_key, RUMOR_CURVE_KEY_BYTES) != 0))
        rc = rumor_err_set(RUMOR_ESYS, "probe: CURVE client options: %s",
                           zmq_strerror(zmq_errno()));
    if (rc == 0)
        rc = watch(t, s, "probe",
                   ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_CLOSED |
                       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH,
                   &t->probe_mon);
    if (rc == 0)
        rc = ipv6_for(s, endpoint, 0);
    if (rc == 0 && zmq_connect(s, endpoint) != 0)
        rc = rumor_err_set(RUMOR_EINVAL, "probe: cannot connect to '%s': %s", endpoint,
                           zmq_strerror(zmq_errno()));
    /* queued until the connection is up (no ZMQ_IMMEDIATE on this socket) */
    if (rc == 0 && (zmq_send(s, hdr, hdr_len, ZMQ_DONTWAIT | (body_len ? ZMQ_SNDMORE : 0)) < 0 ||
                    (body_len && zmq_send(s, body, body_len, ZMQ_DONTWAIT) < 0)))
        rc = rumor_err_set(RUMOR_ESYS, "probe: send: %s", zmq_strerror(zmq_errno()));
    if (rc < 0)
        rumor_transport_probe_close(t);
    return rc;
}

int rumor_transport_probe_state(const rumor_transport_t *t) { return t->probe_state; }

void rumor_transport_probe_close(rumor_transport_t *t)
{
    if (t->probe_mon)
        zmq_close(t->probe_mon);
    if (t->probe)
        zmq_close(t->probe);
    t->probe_mon = t->probe = NULL;
    t->probe_state = 0;
}

/* Opens connection c of slot peer's PUSH socket s. Each connection is its
 * own session, which encrypts on the I/O thread it lives on; ZeroMQ puts a
 * new session on the least loaded thread, but a thread's load grows only
 * once its TCP connection is up, so a burst of connects lands on one
 * thread: each connection is pinned (ZMQ_AFFINITY, read at connect time)
 * round-robin over peers and connections instead. */
static int connect_one(rumor_transport_t *t, void *s, int peer, int c, const char *endpoint)
{
    if (t->o.io_threads > 1) {
        int k = (peer * t->o.conns_per_peer + c) % t->o.io_threads;
        uint64_t mask = k < 64 ? (uint64_t)1 << k : 0;
        if (zmq_setsockopt(s, ZMQ_AFFINITY, &mask, sizeof mask) != 0)
            return rumor_err_set(RUMOR_ESYS, "zmq_setsockopt(AFFINITY): %s",
                                 zmq_strerror(zmq_errno()));
    }
    RUMOR_CHECK(ipv6_for(s, endpoint, 0));
    if (zmq_connect(s, endpoint) != 0)
        return rumor_err_set(RUMOR_EINVAL, "peer %d: cannot connect to '%s': %s", peer, endpoint,
                             zmq_strerror(zmq_errno()));
    return 0;
}

#define MORE_GAP_S 0.02 /* between a slot's extra connections */

/* Opens the next extra connection of a slot (conns_per_peer > 1), called
 * after each message sent to that peer: the first once connection 0
 * carried a message, each further one MORE_GAP_S after the one before.
 * Why staggered: the receiving side has no say over its threads but the
 * least-loaded rule, so connections that arrive together land on one of
 * its I/O threads, while one that arrives after the previous one is up
 * goes to another. A failure here is not the caller's (connection 0
 * works): it is logged and the slot stays with what it has. */
static void connect_more(rumor_transport_t *t, int peer)
{
    double now = rumor_now();
    int c = t->more_next[peer];
    if (c > 1 && now - t->more_at[peer] < MORE_GAP_S)
        return;
    int rc = connect_one(t, t->push[peer], peer, c, t->more_ep[peer]);
    if (rc < 0)
        rumor_warn("peer %d: extra connection: %s", peer, rumor_err_msg());
    t->more_at[peer] = now;
    if (rc < 0 || ++t->more_next[peer] >= t->o.conns_per_peer) {
        free(t->more_ep[peer]);
        t->more_ep[peer] = NULL;
    }
}

int rumor_transport_connect(rumor_transport_t *t, int peer, const char *endpoint)
{
    if (peer < 0 || peer >= t->peers)
        return rumor_err_set(RUMOR_EINVAL, "transport: peer %d out of range [0, %d)", peer,
                             t->peers);
    if (t->keys && !t->has_pk[peer])
        return rumor_err_set(RUMOR_EINVAL,
                             "peer %d: no public key known for it: a secure transport does not "
                             "connect in plaintext",
                             peer);
    char dialled[320];
    if (t->o.dial) {
        int n = t->o.dial(t->o.dial_arg, endpoint, dialled, sizeof dialled);
        if (n > 0 && (size_t)n < sizeof dialled)
            endpoint = dialled;
    }
    rumor_transport_disconnect(t, peer);
    void *s = zmq_socket(t->ctx, ZMQ_PUSH);
    if (!s)
        return rumor_err_set(RUMOR_ESYS, "transport: zmq_socket: %s", zmq_strerror(zmq_errno()));
    int rc = common_opts(t, s, 1);
    if (rc == 0 && t->reconnect_ms[peer] > 0)
        rc = set_int(s, ZMQ_RECONNECT_IVL, t->reconnect_ms[peer], "RECONNECT_IVL");
    if (rc == 0 && t->reconnect_ms[peer] > 0)
        rc = set_int(s, ZMQ_RECONNECT_IVL_MAX, t->reconnect_ms[peer], "RECONNECT_IVL_MAX");
    if (rc == 0)
        rc = set_int(s, ZMQ_IMMEDIATE, 1, "IMMEDIATE");
    if (rc == 0)
        rc = set_int(s, ZMQ_SNDHWM, t->o.sndhwm, "SNDHWM");
    if (rc == 0 && t->keys &&
        (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, t->peer_pk[peer], RUMOR_CURVE_KEY_BYTES) != 0 ||
         zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, t->keys->public_key, RUMOR_CURVE_KEY_BYTES) != 0 ||
         zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, t->keys->secret_key, RUMOR_CURVE_KEY_BYTES) != 0))
        rc = rumor_err_set(RUMOR_ESYS, "peer %d: CURVE client options: %s", peer,
                           zmq_strerror(zmq_errno()));
    if (rc == 0 && !strncmp(endpoint, "tcp://", 6)) {
        /* TCP_NOTSENT_LOWAT once a connection is up (an optimization: a
         * connection without it still works), and the handshakes that
         * succeed (whether this peer can reach others) */
        char what[32];
        snprintf(what, sizeof what, "push%u", ++t->push_mons);
        if (watch(t, s, what, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED,
                  &t->push_mon[peer]) < 0)
            rumor_debug("peer %d: no connection monitor: %s", peer, rumor_err_msg());
    }
    if (rc == 0)
        rc = connect_one(t, s, peer, 0, endpoint);
    if (rc == 0 && t->o.conns_per_peer > 1) {
        if (!(t->more_ep[peer] = strdup(endpoint)))
            rc = rumor_err_set(RUMOR_ENOMEM, "transport: out of memory");
        t->more_next[peer] = 1;
    }
    if (rc < 0) {
        if (t->push_mon[peer]) {
            zmq_close(t->push_mon[peer]);
            t->push_mon[peer] = NULL;
        }
        zmq_close(s);
        return rc;
    }
    t->push[peer] = s;
    return 0;
}

void rumor_transport_set_reconnect(rumor_transport_t *t, int peer, int ms)
{
    if (peer >= 0 && peer < t->peers)
        t->reconnect_ms[peer] = ms > 0 ? ms : 0;
}

void rumor_transport_disconnect(rumor_transport_t *t, int peer)
{
    if (peer >= 0 && peer < t->peers && t->push[peer]) {
        zmq_close(t->push[peer]);
        t->push[peer] = NULL;
    }
    if (peer >= 0 && peer < t->peers && t->push_mon[peer]) {
        zmq_close(t->push_mon[peer]);
        t->push_mon[peer] = NULL;
    }
    if (peer >= 0 && peer < t->peers && t->more_ep[peer]) {
        free(t->more_ep[peer]);
        t->more_ep[peer] = NULL;
    }
}

int rumor_transport_connected(const rumor_transport_t *t, int peer)
{
    return peer >= 0 && peer < t->peers && t->push[peer] != NULL;
}

int rumor_transport_set_peer_key(rumor_transport_t *t, int peer,
                                 const uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    if (peer < 0 || peer >= t->peers)
        return rumor_err_set(RUMOR_EINVAL, "transport: peer %d out of range [0, %d)", peer,
                             t->peers);
    if (!t->keys)
        return rumor_err_set(RUMOR_ESTATE,
                             "peer %d: a public key given to a plaintext transport (no keys of "
                             "our own)",
                             peer);
    memcpy(t->peer_pk[peer], pk, RUMOR_CURVE_KEY_BYTES);
    t->has_pk[peer] = 1;
    return 0;
}

int rumor_transport_connect_curve(rumor_transport_t *t, int peer, const char *endpoint,
                                  const uint8_t server_pk[RUMOR_CURVE_KEY_BYTES])
{
    RUMOR_CHECK(rumor_transport_set_peer_key(t, peer, server_pk));
    RUMOR_CHECK(rumor_transport_connect(t, peer, endpoint));
    return 0;
}

int rumor_transport_secure(const rumor_transport_t *t) { return t->keys != NULL; }

uint64_t rumor_transport_self_id(const rumor_transport_t *t)
{
    return t->keys ? rumor_curve_id(t->keys->public_key) : 0;
}

void *rumor_transport_context(rumor_transport_t *t) { return t->ctx; }

int rumor_transport_msg_peer_key(const struct zmq_msg_t *msg, uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    const char *uid = zmq_msg_gets(msg, "User-Id");
    if (!uid || strlen(uid) != RUMOR_CURVE_Z85_LEN)
        return 0;
    if (rumor_curve_z85_decode(uid, pk) < 0) {
        rumor_err_clear();
        return 0;
    }
    return 1;
}

uint64_t rumor_transport_msg_peer_id(const struct zmq_msg_t *msg)
{
    uint8_t pk[RUMOR_CURVE_KEY_BYTES];
    return rumor_transport_msg_peer_key(msg, pk) ? rumor_curve_id(pk) : 0;
}

void *rumor_transport_pull(rumor_transport_t *t) { return t->pull; }

void *rumor_transport_push(rumor_transport_t *t, int peer)
{
    return peer >= 0 && peer < t->peers ? t->push[peer] : NULL;
}

/* ThreadSanitizer cannot see libzmq's own synchronization (it is not
 * built with TSan): a zero-copy message handed to zmq_msg_send is released
 * here and acquired in its free callback on the I/O thread, which is what
 * libzmq's queues guarantee. Nothing outside a TSan build. */
#if defined(__SANITIZE_THREAD__)
#define RUMOR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RUMOR_TSAN 1
#endif
#endif
#ifdef RUMOR_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define zmq_handoff_release(p) __tsan_release(p)
#define zmq_handoff_acquire(p) __tsan_acquire(p)
#else
#define zmq_handoff_release(p) ((void)(p))
#define zmq_handoff_acquire(p) ((void)(p))
#endif

/* ZeroMQ's free callback for zero-copy payloads: runs on an I/O thread. */
static void release(void *data, void *hint)
{
    (void)data;
    rumor_sendbuf_t *b = hint;
    zmq_handoff_acquire(b);
    atomic_fetch_sub_explicit(&b->refs, 1, memory_order_release);
}

int rumor_transport_send_body(rumor_transport_t *t, int peer, const void *hdr, size_t hdr_len,
                              const void *body, size_t body_len)
{
    void *s = rumor_transport_push(t, peer);
    if (!s)
        return 1;
    if (zmq_send(s, hdr, hdr_len, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0) {
        if (zmq_errno() == EAGAIN) {
            t->stats.send_would_block++;
            return 1;
        }
        return rumor_err_set(RUMOR_ESYS, "send to peer %d: %s", peer, zmq_strerror(zmq_errno()));
    }
    /* the first part was taken, so the rest goes without blocking */
    if (zmq_send(s, body, body_len, 0) < 0)
        return rumor_err_set(RUMOR_ESYS, "send to peer %d: %s", peer, zmq_strerror(zmq_errno()));
    t->stats.bytes_sent += hdr_len + body_len;
    t->stats.msgs_sent++;
    if (t->more_ep[peer])
        connect_more(t, peer);
    return 0;
}

int rumor_transport_send(rumor_transport_t *t, int peer, const void *hdr, size_t hdr_len,
                         rumor_sendbuf_t *buf, const void *data, size_t bytes)
{
    void *s = rumor_transport_push(t, peer);
    if (!s)
        return 1;
    int more = data && bytes ? ZMQ_SNDMORE : 0;
    if (zmq_send(s, hdr, hdr_len, ZMQ_DONTWAIT | more) < 0) {
        if (zmq_errno() == EAGAIN) {
            t->stats.send_would_block++;
            return 1;
        }
        return rumor_err_set(RUMOR_ESYS, "send to peer %d: %s", peer, zmq_strerror(zmq_errno()));
    }
    t->stats.bytes_sent += hdr_len;
    t->stats.msgs_sent++;
    if (!more) {
        if (t->more_ep[peer])
            connect_more(t, peer);
        return 0;
    }
    zmq_msg_t msg;
    atomic_fetch_add_explicit(&buf->refs, 1, memory_order_relaxed);
    zmq_handoff_release(buf);
    if (zmq_msg_init_data(&msg, (void *)data, bytes, release, buf) != 0) {
        atomic_fetch_sub(&buf->refs, 1);
        return rumor_err_set(RUMOR_ENOMEM, "send to peer %d: %s", peer,
                             zmq_strerror(zmq_errno()));
    }
    /* The first part was accepted, so ZeroMQ takes the rest of the message
     * without blocking (multipart messages are atomic). */
    if (zmq_msg_send(&msg, s, 0) < 0) {
        int e = zmq_errno();
        zmq_msg_close(&msg); /* runs release */
        return rumor_err_set(RUMOR_ESYS, "send to peer %d: %s", peer, zmq_strerror(e));
    }
    t->stats.bytes_sent += bytes;
    if (t->more_ep[peer])
        connect_more(t, peer);
    return 0;
}

const rumor_transport_stats_t *rumor_transport_stats(const rumor_transport_t *t)
{
    rumor_transport_t *m = (rumor_transport_t *)t; /* refresh the ZAP counters */
    if (t->zap) {
        rumor_zap_stats_t z;
        rumor_zap_stats(t->zap, &z);
        m->stats.zap_admitted = z.admitted;
        m->stats.zap_denied_not_listed = z.denied_not_listed;
        m->stats.zap_denied_mechanism = z.denied_mechanism;
        m->stats.zap_malformed = z.malformed;
    }
    return &t->stats;
}

int rumor_transport_stats_format(const rumor_transport_stats_t *s, int secure, char *buf,
                                 size_t cap)
{
    struct {
        const char *name;
        uint64_t v;
    } f[] = {
        { "not_listed", s->zap_denied_not_listed }, { "zap_mechanism", s->zap_denied_mechanism },
        { "zap_malformed", s->zap_malformed },      { "crypto", s->hs_crypto },
        { "mechanism", s->hs_mechanism },           { "protocol", s->hs_protocol },
        { "no_detail", s->hs_other },
    };
    size_t n = 0;
    int w = secure ? snprintf(buf, cap, "admitted=%llu", (unsigned long long)s->zap_admitted)
                   : snprintf(buf, cap, "plaintext");
    if (w < 0 || (size_t)w >= cap)
        return rumor_err_set(RUMOR_EINVAL, "buffer too small");
    n = (size_t)w;
    const char *sep = " refused:";
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].v)
            continue;
        w = snprintf(buf + n, cap - n, "%s %s=%llu", sep, f[i].name, (unsigned long long)f[i].v);
        if (w < 0 || (size_t)w >= cap - n)
            return rumor_err_set(RUMOR_EINVAL, "buffer too small");
        n += (size_t)w;
        sep = "";
    }
    return (int)n;
}

uint64_t rumor_transport_stats_refused(const rumor_transport_stats_t *s)
{
    /* ZAP's refusals are also handshake failures (hs_denied): counted once */
    return s->zap_denied_not_listed + s->zap_denied_mechanism + s->zap_malformed + s->hs_crypto +
           s->hs_mechanism + s->hs_protocol + s->hs_other;
}

int rumor_transport_stats_json(const rumor_transport_stats_t *s, char *buf, size_t cap)
{
    int w = snprintf(buf, cap,
                     "{\"admitted\":%llu,\"refused\":%llu,\"not_listed\":%llu,"
                     "\"zap_mechanism\":%llu,\"zap_malformed\":%llu,\"crypto\":%llu,"
                     "\"mechanism\":%llu,\"protocol\":%llu,\"no_detail\":%llu}",
                     (unsigned long long)s->zap_admitted,
                     (unsigned long long)rumor_transport_stats_refused(s),
                     (unsigned long long)s->zap_denied_not_listed,
                     (unsigned long long)s->zap_denied_mechanism,
                     (unsigned long long)s->zap_malformed, (unsigned long long)s->hs_crypto,
                     (unsigned long long)s->hs_mechanism, (unsigned long long)s->hs_protocol,
                     (unsigned long long)s->hs_other);
    if (w < 0 || (size_t)w >= cap)
        return rumor_err_set(RUMOR_EINVAL, "buffer too small");
    return w;
}

void rumor_transport_count_received(rumor_transport_t *t, size_t bytes)
{
    t->stats.bytes_received += bytes;
    t->stats.msgs_received++;
}

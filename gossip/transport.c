/* ZeroMQ sockets for gossip (see transport.h). */
#include "transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

struct rumor_transport {
    void *ctx;
    void *pull;
    void **push;           /* peers */
    int peers;
    char endpoint[256];
    rumor_transport_opts_t o;
    rumor_transport_stats_t stats;
};

static int set_int(void *sock, int opt, int v, const char *what)
{
    if (zmq_setsockopt(sock, opt, &v, sizeof v) != 0)
        return rumor_err_set(RUMOR_ESYS, "zmq_setsockopt(%s=%d): %s", what, v,
                             zmq_strerror(zmq_errno()));
    return 0;
}

/* The settings every rumor socket has (see transport.h). */
static int common_opts(const rumor_transport_t *t, void *s)
{
    RUMOR_CHECK(set_int(s, ZMQ_LINGER, 0, "LINGER"));
    RUMOR_CHECK(set_int(s, ZMQ_HEARTBEAT_IVL, t->o.heartbeat_ivl_ms, "HEARTBEAT_IVL"));
    RUMOR_CHECK(set_int(s, ZMQ_HEARTBEAT_TIMEOUT, t->o.heartbeat_timeout_ms, "HEARTBEAT_TIMEOUT"));
    RUMOR_CHECK(set_int(s, ZMQ_HEARTBEAT_TTL, t->o.heartbeat_timeout_ms, "HEARTBEAT_TTL"));
    RUMOR_CHECK(set_int(s, ZMQ_RECONNECT_IVL, 100, "RECONNECT_IVL"));
    RUMOR_CHECK(set_int(s, ZMQ_RECONNECT_IVL_MAX, 1000, "RECONNECT_IVL_MAX"));
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
    t->peers = peers;
    t->push = calloc((size_t)(peers ? peers : 1), sizeof *t->push);
    t->ctx = zmq_ctx_new();
    if (!t->push || !t->ctx) {
        rumor_transport_destroy(&t);
        return rumor_err_set(RUMOR_ENOMEM, "transport: cannot create a ZeroMQ context");
    }
    zmq_ctx_set(t->ctx, ZMQ_IO_THREADS, t->o.io_threads);
    int rc = 0;
    t->pull = zmq_socket(t->ctx, ZMQ_PULL);
    if (!t->pull)
        rc = rumor_err_set(RUMOR_ESYS, "transport: zmq_socket: %s", zmq_strerror(zmq_errno()));
    if (rc == 0)
        rc = common_opts(t, t->pull);
    if (rc == 0)
        rc = set_int(t->pull, ZMQ_RCVHWM, t->o.rcvhwm, "RCVHWM");
    if (rc == 0 && o->max_msg_size) {
        int64_t mx = (int64_t)o->max_msg_size;
        if (zmq_setsockopt(t->pull, ZMQ_MAXMSGSIZE, &mx, sizeof mx) != 0)
            rc = rumor_err_set(RUMOR_ESYS, "zmq_setsockopt(MAXMSGSIZE): %s",
                               zmq_strerror(zmq_errno()));
    }
    if (rc == 0 && zmq_bind(t->pull, o->listen) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "cannot listen on '%s': %s", o->listen,
                           zmq_strerror(zmq_errno()));
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
    for (int i = 0; t->push && i < t->peers; i++)
        if (t->push[i])
            zmq_close(t->push[i]);
    if (t->pull)
        zmq_close(t->pull);
    if (t->ctx)
        zmq_ctx_term(t->ctx); /* LINGER 0 everywhere: returns at once */
    free(t->push);
    free(t);
    *tp = NULL;
}

const char *rumor_transport_endpoint(const rumor_transport_t *t) { return t->endpoint; }

int rumor_transport_connect(rumor_transport_t *t, int peer, const char *endpoint)
{
    if (peer < 0 || peer >= t->peers)
        return rumor_err_set(RUMOR_EINVAL, "transport: peer %d out of range [0, %d)", peer,
                             t->peers);
    rumor_transport_disconnect(t, peer);
    void *s = zmq_socket(t->ctx, ZMQ_PUSH);
    if (!s)
        return rumor_err_set(RUMOR_ESYS, "transport: zmq_socket: %s", zmq_strerror(zmq_errno()));
    int rc = common_opts(t, s);
    if (rc == 0)
        rc = set_int(s, ZMQ_IMMEDIATE, 1, "IMMEDIATE");
    if (rc == 0)
        rc = set_int(s, ZMQ_SNDHWM, t->o.sndhwm, "SNDHWM");
    if (rc == 0 && zmq_connect(s, endpoint) != 0)
        rc = rumor_err_set(RUMOR_EINVAL, "peer %d: cannot connect to '%s': %s", peer, endpoint,
                           zmq_strerror(zmq_errno()));
    if (rc < 0) {
        zmq_close(s);
        return rc;
    }
    t->push[peer] = s;
    return 0;
}

void rumor_transport_disconnect(rumor_transport_t *t, int peer)
{
    if (peer >= 0 && peer < t->peers && t->push[peer]) {
        zmq_close(t->push[peer]);
        t->push[peer] = NULL;
    }
}

int rumor_transport_connected(const rumor_transport_t *t, int peer)
{
    return peer >= 0 && peer < t->peers && t->push[peer] != NULL;
}

void *rumor_transport_pull(rumor_transport_t *t) { return t->pull; }

void *rumor_transport_push(rumor_transport_t *t, int peer)
{
    return peer >= 0 && peer < t->peers ? t->push[peer] : NULL;
}

/* ZeroMQ's free callback for zero-copy payloads: runs on an I/O thread. */
static void release(void *data, void *hint)
{
    (void)data;
    rumor_sendbuf_t *b = hint;
    atomic_fetch_sub_explicit(&b->refs, 1, memory_order_release);
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
    if (!more)
        return 0;
    zmq_msg_t msg;
    atomic_fetch_add_explicit(&buf->refs, 1, memory_order_relaxed);
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
    return 0;
}

const rumor_transport_stats_t *rumor_transport_stats(const rumor_transport_t *t)
{
    return &t->stats;
}

void rumor_transport_count_received(rumor_transport_t *t, size_t bytes)
{
    t->stats.bytes_received += bytes;
    t->stats.msgs_received++;
}

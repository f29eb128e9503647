/* A relayed peer's side (see relay.h): the registration, the heartbeat and
 * the data connections spliced to this peer's own listener. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "le.h"
#include "log.h"
#include "relay.h"
#include "relay_int.h"

static int send_cmd(rumor_relay_client_t *c, const char *cmd)
{
    return zmq_send(c->dealer, cmd, strlen(cmd), ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

int rly_client_send(rumor_relay_client_t *c, const char *cmd, const void *a, size_t alen,
                    const void *b, size_t blen, const void *d, size_t dlen)
{
    const void *part[3] = { a, b, d };
    size_t len[3] = { alen, blen, dlen };
    int n = d ? 3 : b ? 2 : a ? 1 : 0;
    if (zmq_send(c->dealer, cmd, strlen(cmd), (n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        zmq_send(c->dealer, part[i], len[i], (i + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    return 0;
}

int rly_client_splice(rumor_relay_client_t *c, int a, int b, int proxy, int kind)
{
    if (c->ns == RLY_SPLICES) {
        close(a);
        close(b);
        return rumor_err_set(RUMOR_EINVAL, "relay: %d connections spliced already", c->ns);
    }
    rly_csplice_t *s = &c->sp[c->ns];
    if (rly_splice_init(&s->s, a, b) < 0) {
        rly_splice_close(&s->s);
        return RUMOR_ENOMEM;
    }
    s->proxy = proxy;
    s->kind = kind;
    c->ns++;
    return 0;
}

/* A neighbour dialled the relayed address: a data connection to the
 * relay's back port, its header, and this peer's own listener. */
static void on_conn(rumor_relay_client_t *c, uint64_t id)
{
    int ok = 0;
    int b = -1, l = -1;
    if (c->ns < RLY_SPLICES && (b = rly_connect(c->back_host, c->back_port, 3.0)) >= 0) {
        unsigned char hdr[RLY_HDR];
        memcpy(hdr, RLY_MAGIC, 8);
        memcpy(hdr + 8, c->token, RLY_TOKEN);
        put64(hdr + 8 + RLY_TOKEN, id);
        if (send(b, hdr, sizeof hdr, MSG_NOSIGNAL) == (ssize_t)sizeof hdr &&
            (l = rly_connect(c->local_host, c->local_port, 3.0)) >= 0) {
            ok = rly_client_splice(c, b, l, -1, RLY_SP_BACK) == 0;
            b = l = -1;
        }
    }
    if (!ok) {
        rumor_warn("relay %s: a neighbour's connection %llu could not be served: %s", c->relay,
                   (unsigned long long)id, rumor_err_msg());
        if (b >= 0)
            close(b);
        if (l >= 0)
            close(l);
    }
    pthread_mutex_lock(&c->mu);
    if (ok)
        c->st.conns++;
    else
        c->st.conns_failed++;
    pthread_mutex_unlock(&c->mu);
}

/* Reads one control message: "CONN" <id>, "PONG", "OK ..." (a repeated
 * registration's answer). Returns its command's first letter, 0 if none. */
static int on_control(rumor_relay_client_t *c, zmq_msg_t *parts, int *np)
{
    int n = rly_recv_parts(c->dealer, parts, 4);
    *np = n;
    if (n == 0)
        return 0;
    c->heard = rumor_now();
    return zmq_msg_size(&parts[0]) ? *(const char *)zmq_msg_data(&parts[0]) : 0;
}

static void close_parts(zmq_msg_t *parts, int n)
{
    for (int i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
}

/* The relay's answer to REGISTER: "OK" <relayed> <back> <token>. */
static int take_ok(rumor_relay_client_t *c, zmq_msg_t *p, int np)
{
    size_t l1 = zmq_msg_size(&p[1]), l2 = np > 2 ? zmq_msg_size(&p[2]) : 0;
    if (np != 4 || l1 == 0 || l1 >= sizeof c->endpoint || l2 == 0 || l2 >= 300 ||
        zmq_msg_size(&p[3]) != RLY_TOKEN)
        return rumor_err_set(RUMOR_EPROTO, "relay %s: a malformed answer", c->relay);
    memcpy(c->endpoint, zmq_msg_data(&p[1]), l1);
    c->endpoint[l1] = 0;
    char back[300];
    memcpy(back, zmq_msg_data(&p[2]), l2);
    back[l2] = 0;
    int port;
    RUMOR_CHECK(rly_split(c->endpoint, c->back_host, sizeof c->back_host, &port));
    RUMOR_CHECK(rly_split(back, c->back_host, sizeof c->back_host, &c->back_port));
    memcpy(c->token, zmq_msg_data(&p[3]), RLY_TOKEN);
    return 0;
}

/* Points the control socket at relay i (its key first: a connect takes
 * the socket's CURVE options of that moment). */
static int use_relay(rumor_relay_client_t *c, int i)
{
    if (c->relay && zmq_disconnect(c->dealer, c->relay) != 0)
        rumor_debug("relay %s: zmq_disconnect: %s", c->relay, zmq_strerror(zmq_errno()));
    c->cur = i;
    c->relay = c->relays[i];
    c->switched = rumor_now();
    if (c->o.keys && zmq_setsockopt(c->dealer, ZMQ_CURVE_SERVERKEY, c->keys[i], 32) != 0)
        return rumor_err_set(RUMOR_EINVAL, "relay %s: CURVE key refused", c->relay);
    int v6 = strchr(c->relay, '[') != NULL;
    zmq_setsockopt(c->dealer, ZMQ_IPV6, &v6, sizeof v6);
    if (zmq_connect(c->dealer, c->relay) != 0)
        return rumor_err_set(RUMOR_EINVAL, "relay %s: %s", c->relay, zmq_strerror(zmq_errno()));
    return 0;
}

/* The control connection closed (ZMQ_EVENT_DISCONNECTED): a relay whose
 * process ended closes it at once, long before its silence says so. */
static int relay_closed(rumor_relay_client_t *c)
{
    int closed = 0;
    zmq_msg_t p[2];
    int n;
    while ((n = rly_recv_parts(c->mon, p, 2)) > 0) {
        if (n == 2 && zmq_msg_size(&p[0]) >= 2 && zmq_msg_size(&p[1]) == strlen(c->relay) &&
            !memcmp(zmq_msg_data(&p[1]), c->relay, strlen(c->relay))) {
            uint16_t ev; /* the event, in this host's order (zmq_socket_monitor) */
            memcpy(&ev, zmq_msg_data(&p[0]), sizeof ev);
            closed |= ev == ZMQ_EVENT_DISCONNECTED; /* the relay in use's */
        }
        close_parts(p, n);
    }
    return closed;
}

static void *client_main(void *arg)
{
    rumor_relay_client_t *c = arg;
    enum { CAP = 2 + 2 * RLY_SPLICES + RLY_PROXIES + RLY_TRIES };
    zmq_pollitem_t it[CAP];
    double hb = c->o.heartbeat_timeout_ms / 1000.0;
    while (!atomic_load(&c->stop)) {
        int n = 0;
        it[n++] = (zmq_pollitem_t){ c->dealer, 0, ZMQ_POLLIN, 0 };
        it[n++] = (zmq_pollitem_t){ c->mon, 0, c->mon ? ZMQ_POLLIN : 0, 0 };
        for (int k = 0; k < c->ns; k++)
            for (int j = 0; j < 2; j++)
                it[n++] = (zmq_pollitem_t){ NULL, c->sp[k].s.fd[j],
                                            rly_splice_events(&c->sp[k].s, j, 1), 0 };
        int sp_end = n;
        n += rly_punch_items(c, it + n, CAP - n);
        if (zmq_poll(it, n, 100) < 0 && zmq_errno() != EINTR)
            break;
        for (int k = c->ns - 1; k >= 0; k--) {
            int live = 1;
            for (int j = 0; j < 2 && live; j++) {
                short ev = it[2 + 2 * k + j].revents;
                size_t moved = 0;
                if (ev)
                    live = rly_splice_io(&c->sp[k].s, j, ev, RLY_BUF, &moved, NULL);
                if (moved && c->sp[k].kind == RLY_SP_BACK) {
                    pthread_mutex_lock(&c->mu);
                    c->st.bytes += moved;
                    pthread_mutex_unlock(&c->mu);
                }
            }
            if (!live) {
                rly_splice_close(&c->sp[k].s);
                c->sp[k] = c->sp[--c->ns];
            }
        }
        /* after the splices: a punch's service adds splices */
        rly_punch_serve(c, it + sp_end, n - sp_end);
        for (int i = 0; i < 64 && (it[0].revents & ZMQ_POLLIN); i++) {
            zmq_msg_t parts[4];
            int np;
            int cmd = on_control(c, parts, &np);
            if (!np)
                break;
            if (cmd == 'O' && zmq_msg_size(&parts[0]) == 2) {
                /* registered again (the relay had dropped us, or restarted) */
                char was[300];
                snprintf(was, sizeof was, "%s", c->endpoint);
                pthread_mutex_lock(&c->mu);
                if (take_ok(c, parts, np) == 0 && strcmp(was, c->endpoint) != 0) {
                    c->st.moved++;
                    rumor_warn("relay %s: registered again, relayed at %s now (was %s)",
                               c->relay, c->endpoint, was);
                }
                pthread_mutex_unlock(&c->mu);
            } else if (cmd == 'C' && np == 2 && zmq_msg_size(&parts[0]) == 4 &&
                zmq_msg_size(&parts[1]) == 8) {
                on_conn(c, get64(zmq_msg_data(&parts[1])));
            } else if (cmd == 'P' || cmd == 'N') {
                rly_punch_control(c, parts, np);
            }
            close_parts(parts, np);
        }
        double now = rumor_now();
        if (now - c->pinged >= (hb / 4 < 1.0 ? hb / 4 : 1.0)) {
            /* silent too long: register again (the relay may have dropped us;
             * it gives the same address back while it still holds it) */
            send_cmd(c, now - c->heard > hb ? "REGISTER" : "PING");
            c->pinged = now;
        }
        pthread_mutex_lock(&c->mu);
        int known = c->n; /* relays learned later are appended (rumor_relay_client_add) */
        pthread_mutex_unlock(&c->mu);
        int closed = c->mon && (it[1].revents & ZMQ_POLLIN) && relay_closed(c);
        if (known > 1 && (closed || (now - c->heard > hb && now - c->switched > hb))) {
            /* closed (its process ended), or silent (its machine is gone):
             * the next relay of the list */
            int next = (c->cur + 1) % known;
            if (closed)
                rumor_warn("relay %s: its connection closed: registering with %s", c->relay,
                           c->relays[next]);
            else
                rumor_warn("relay %s: silent for %.1f s: registering with %s", c->relay,
                           now - c->heard, c->relays[next]);
            if (use_relay(c, next) < 0)
                rumor_warn("%s", rumor_err_msg());
            send_cmd(c, "REGISTER");
            c->pinged = now;
        }
        int alive = now - c->heard <= hb;
        if (!alive && !c->warned) {
            rumor_warn("relay %s: silent for %.1f s: neighbours cannot reach this peer through "
                       "it until it answers again", c->relay, now - c->heard);
            c->warned = 1;
        } else if (alive && c->warned) {
            rumor_info("relay %s: answers again", c->relay);
            c->warned = 0;
        }
        pthread_mutex_lock(&c->mu);
        c->st.alive = alive;
        c->st.relay = c->cur;
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

static void client_free(rumor_relay_client_t *c)
{
    for (int k = 0; k < c->ns; k++)
        rly_splice_close(&c->sp[k].s);
    rly_punch_free(c);
    if (c->dealer)
        zmq_close(c->dealer);
    if (c->mon)
        zmq_close(c->mon);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Registers with the relay in use: asks, and asks again each second
 * until it answers or the timeout. */
static int register_with(rumor_relay_client_t *c, double timeout)
{
    double t0 = rumor_now(), asked = -1;
    for (;;) {
        double now = rumor_now();
        if (now - t0 > timeout)
            return rumor_err_set(RUMOR_ETIMEOUT, "relay %s did not answer within %.0f s (is it "
                                 "running with --relay, is this peer's key on its allow-list, "
                                 "is the key named for it the relay's?)", c->relay, timeout);
        if (now - asked >= 1.0) {
            send_cmd(c, "REGISTER");
            asked = now;
        }
        zmq_pollitem_t it = { c->dealer, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t p[4];
        int np, rc = 1;
        int cmd = on_control(c, p, &np);
        if (cmd == 'O' && np >= 1 && zmq_msg_size(&p[0]) == 2) {
            rc = take_ok(c, p, np);
        } else if (cmd == 'R' && np == 2) {
            rc = rumor_err_set(RUMOR_EAUTH, "relay %s refused: %.*s", c->relay,
                               (int)(zmq_msg_size(&p[1]) > 200 ? 200 : zmq_msg_size(&p[1])),
                               (const char *)zmq_msg_data(&p[1]));
        }
        close_parts(p, np);
        if (rc <= 0)
            return rc;
    }
}

int rumor_relay_client_start(const rumor_relay_client_opts_t *o, rumor_relay_client_t **out)
{
    *out = NULL;
    if (!o || o->nrelays < 1 || o->nrelays > RUMOR_RELAY_CLIENT_MAX)
        return rumor_err_set(RUMOR_EINVAL, "relay: 1 to %d relays, not %d",
                             RUMOR_RELAY_CLIENT_MAX, o ? o->nrelays : 0);
    rumor_relay_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return rumor_err_set(RUMOR_ENOMEM, "relay: out of memory");
    c->o = *o;
    pthread_mutex_init(&c->mu, NULL);
    for (int i = 0; i < RLY_PROXIES; i++)
        c->px[i].lfd = c->px[i].ready_fd = -1;
    if (c->o.heartbeat_timeout_ms <= 0)
        c->o.heartbeat_timeout_ms = 5000;
    int rc = 0;
    c->n = o->nrelays;
    for (int i = 0; i < c->n && rc == 0; i++) {
        if (strlen(o->relays[i]) >= sizeof c->relays[i])
            rc = rumor_err_set(RUMOR_EINVAL, "relay: address %d too long", i);
        else
            snprintf(c->relays[i], sizeof c->relays[i], "%s", o->relays[i]);
        if (o->keys && (!o->relay_keys || !o->relay_keys[i]))
            rc = rumor_err_set(RUMOR_EINVAL, "relay %s: its key is not known", o->relays[i]);
        else if (o->keys)
            memcpy(c->keys[i], o->relay_keys[i], 32);
    }
    c->o.relays = NULL;
    c->o.relay_keys = NULL;
    if (rc == 0)
        rc = rly_split(o->local, c->local_host, sizeof c->local_host, &c->local_port);
    if (rc == 0 && !c->local_host[0]) /* this peer listens everywhere: loopback reaches it */
        snprintf(c->local_host, sizeof c->local_host, "127.0.0.1");
    if (rc == 0 && !(c->ctx = zmq_ctx_new()))
        rc = rumor_err_set(RUMOR_ESYS, "relay: zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    if (rc == 0 && !(c->dealer = zmq_socket(c->ctx, ZMQ_DEALER)))
        rc = rumor_err_set(RUMOR_ESYS, "relay: zmq_socket: %s", zmq_strerror(zmq_errno()));
    if (rc == 0) {
        int zero = 0, ivl = 200;
        int64_t maxmsg = 4096;
        zmq_setsockopt(c->dealer, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(c->dealer, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
        zmq_setsockopt(c->dealer, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
        if (o->keys &&
            (zmq_setsockopt(c->dealer, ZMQ_CURVE_PUBLICKEY, o->keys->public_key, 32) != 0 ||
             zmq_setsockopt(c->dealer, ZMQ_CURVE_SECRETKEY, o->keys->secret_key, 32) != 0))
            rc = rumor_err_set(RUMOR_EINVAL, "relay: this peer's CURVE keys were refused");
    }
    if (rc == 0) { /* without a monitor, a dead relay is found by its silence alone */
        char mon[64];
        snprintf(mon, sizeof mon, "inproc://rumor-relay-client-%p", (void *)c);
        if (zmq_socket_monitor(c->dealer, mon, ZMQ_EVENT_DISCONNECTED) == 0 &&
            (c->mon = zmq_socket(c->ctx, ZMQ_PAIR)) != NULL) {
            int zero = 0;
            zmq_setsockopt(c->mon, ZMQ_LINGER, &zero, sizeof zero);
            if (zmq_connect(c->mon, mon) != 0) {
                zmq_close(c->mon);
                c->mon = NULL;
            }
        }
    }
    /* the first relay that takes this peer */
    int got = 0;
    for (int i = 0; rc == 0 && !got && i < c->n; i++) {
        int r = use_relay(c, i);
        if (r == 0)
            r = register_with(c, o->timeout);
        if (r == 0)
            got = 1;
        else if (i + 1 < c->n)
            rumor_warn("%s; trying %s", rumor_err_msg(), c->relays[i + 1]);
        else
            rc = r;
    }
    c->pinged = rumor_now();
    c->st.alive = 1;
    c->st.relay = c->cur;
    if (rc == 0 && pthread_create(&c->thread, NULL, client_main, c) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "relay: cannot start its thread");
    if (rc < 0) {
        client_free(c);
        return rc;
    }
    c->running = 1;
    *out = c;
    return 0;
}

void rumor_relay_client_stop(rumor_relay_client_t **cp)
{
    if (!cp || !*cp)
        return;
    rumor_relay_client_t *c = *cp;
    atomic_store(&c->stop, 1);
    if (c->running)
        pthread_join(c->thread, NULL);
    int linger = 200; /* the BYE goes out before the socket closes */
    zmq_setsockopt(c->dealer, ZMQ_LINGER, &linger, sizeof linger);
    send_cmd(c, "BYE");
    client_free(c);
    *cp = NULL;
}

int rumor_relay_client_add(rumor_relay_client_t *c, const char *relay, const uint8_t *key)
{
    if (!relay || strlen(relay) >= sizeof c->relays[0] || (c->o.keys && !key))
        return rumor_err_set(RUMOR_EINVAL, "relay: a relay needs its address%s",
                             c->o.keys ? " and its key" : "");
    pthread_mutex_lock(&c->mu);
    int rc = 1;
    for (int i = 0; i < c->n && rc == 1; i++)
        if (!strcmp(c->relays[i], relay))
            rc = 0;
    if (rc == 1 && c->n == RUMOR_RELAY_CLIENT_MAX)
        rc = rumor_err_set(RUMOR_EINVAL, "relay: %d relays known already", c->n);
    if (rc == 1) {
        snprintf(c->relays[c->n], sizeof c->relays[0], "%s", relay);
        if (key)
            memcpy(c->keys[c->n], key, 32);
        c->n++;
        rumor_info("relay %s: another relay to fail over to", relay);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int rumor_relay_client_endpoint(rumor_relay_client_t *c, char *out, size_t cap)
{
    pthread_mutex_lock(&c->mu);
    int n = snprintf(out, cap, "%s", c->endpoint);
    pthread_mutex_unlock(&c->mu);
    return n;
}

void rumor_relay_client_stats(rumor_relay_client_t *c, rumor_relay_client_stats_t *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}

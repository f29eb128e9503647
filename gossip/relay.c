/* The relay: registrations over CurveZMQ, relayed ports, data connections
 * and splices, all served by one thread (see relay.h). */
#include "relay.h"

#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "le.h"
#include "log.h"
#include "relay_int.h"
#include "transport.h"

#define ZAP_DOMAIN "rumor"

struct reg {
    int used;
    uint64_t key_id;            /* the registered key's id (0 in plaintext) */
    unsigned char rid[256];     /* the ROUTER routing id of its control connection */
    size_t rid_len;
    uint8_t token[RLY_TOKEN];
    int lfd, port;
    char ep[300];
    double heard;               /* its last control message */
    double tokens, refilled;    /* bytes it may still splice (mbit's bucket) */
    int conns;                  /* waiting fronts and splices */
    uint64_t next_conn;
};

struct front {                  /* a neighbour's connection, waiting for its back */
    int fd, reg;
    uint64_t id;
    double t;
};

struct back {                   /* a data connection from a registered peer */
    int fd, got;
    unsigned char hdr[RLY_HDR];
    double t;
};

struct splice {
    rly_splice_t s;
    int reg;
};

#define PUNCHES 64               /* hole punches waiting for their answer */

struct punch {                  /* from asked of to, for the relay's id rid */
    int from, to;
    uint64_t id, rid;
    double t;
};

struct rumor_relay {
    rumor_relay_opts_t o;
    char host[256], public_host[256];
    char endpoint[300], back_ep[300], public_ep[300];
    void *ctx, *router;
    rumor_zap_t *zap;
    rumor_curve_keypair_t keys;
    int secure;
    int back_fd;
    struct reg *regs;           /* o.max_peers */
    struct front *fronts;       /* nf */
    struct back *backs;
    struct splice *splices;
    int nf, nb, ns, cap_conns;
    struct punch punch[PUNCHES];
    int np;
    uint64_t next_rid;
    FILE *tap;
    double rate;                /* bytes/s per registration, 0: unlimited */
    pthread_t thread;
    atomic_int stop;
    pthread_mutex_t mu;         /* stats */
    rumor_relay_stats_t st;
};

/* ------------------------------------------------------------ control */

static void send_parts(rumor_relay_t *r, const struct reg *g, const char *cmd,
                       const void *a, size_t alen, const void *b, size_t blen,
                       const void *c, size_t clen)
{
    const void *part[3] = { a, b, c };
    size_t len[3] = { alen, blen, clen };
    int n = c ? 3 : b ? 2 : a ? 1 : 0;
    if (zmq_send(r->router, g->rid, g->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return;
    zmq_send(r->router, cmd, strlen(cmd), (n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    for (int i = 0; i < n; i++)
        zmq_send(r->router, part[i], len[i], (i + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
}

static void drop_reg(rumor_relay_t *r, int i, const char *why)
{
    struct reg *g = &r->regs[i];
    rumor_info("relay: %s (port %d) dropped: %s", g->ep, g->port, why);
    close(g->lfd);
    for (int k = 0; k < r->nf; k++)
        if (r->fronts[k].reg == i) {
            close(r->fronts[k].fd);
            r->fronts[k--] = r->fronts[--r->nf];
        }
    for (int k = 0; k < r->ns; k++)
        if (r->splices[k].reg == i)
            r->splices[k].reg = -1; /* it ends on its own */
    for (int k = 0; k < r->np; k++)
        if (r->punch[k].from == i || r->punch[k].to == i)
            r->punch[k--] = r->punch[--r->np];
    memset(g, 0, sizeof *g);
    g->lfd = -1;
    pthread_mutex_lock(&r->mu);
    r->st.peers_now--;
    pthread_mutex_unlock(&r->mu);
}

static void on_register(rumor_relay_t *r, const unsigned char *rid, size_t rid_len, uint64_t key)
{
    int found = -1, free_slot = -1;
    for (int i = 0; i < r->o.max_peers; i++) {
        struct reg *g = &r->regs[i];
        if (!g->used) {
            if (free_slot < 0)
                free_slot = i;
        } else if (r->secure ? g->key_id == key
                             : g->rid_len == rid_len && memcmp(g->rid, rid, rid_len) == 0) {
            found = i;
        }
    }
    struct reg tmp = { 0 };
    memcpy(tmp.rid, rid, rid_len);
    tmp.rid_len = rid_len;
    if (found < 0 && free_slot < 0) {
        char why[96];
        snprintf(why, sizeof why, "full: %d peers are relayed here", r->o.max_peers);
        send_parts(r, &tmp, "REFUSED", why, strlen(why), NULL, 0, NULL, 0);
        pthread_mutex_lock(&r->mu);
        r->st.refused_full++;
        pthread_mutex_unlock(&r->mu);
        return;
    }
    struct reg *g;
    if (found >= 0) { /* registered again (a new control connection): same port */
        g = &r->regs[found];
    } else {
        g = &r->regs[free_slot];
        int port = 0;
        int fd = rly_listen(r->host, 0, &port);
        if (fd < 0) {
            send_parts(r, &tmp, "REFUSED", rumor_err_msg(), strlen(rumor_err_msg()), NULL, 0,
                       NULL, 0);
            return;
        }
        memset(g, 0, sizeof *g);
        g->used = 1;
        g->key_id = key;
        g->lfd = fd;
        g->port = port;
        randombytes_buf(g->token, sizeof g->token);
        g->tokens = r->rate > 0 ? r->rate * 0.1 : 0;
        g->refilled = rumor_now();
        rly_endpoint(g->ep, sizeof g->ep, r->public_host, port);
        pthread_mutex_lock(&r->mu);
        r->st.registered++;
        r->st.peers_now++;
        pthread_mutex_unlock(&r->mu);
        rumor_info("relay: peer %016llx relayed at %s", (unsigned long long)key, g->ep);
    }
    memcpy(g->rid, rid, rid_len);
    g->rid_len = rid_len;
    g->heard = rumor_now();
    send_parts(r, g, "OK", g->ep, strlen(g->ep), r->back_ep, strlen(r->back_ep), g->token,
               sizeof g->token);
}

static int find_reg(rumor_relay_t *r, const unsigned char *rid, size_t rid_len)
{
    for (int i = 0; i < r->o.max_peers; i++)
        if (r->regs[i].used && r->regs[i].rid_len == rid_len &&
            memcmp(r->regs[i].rid, rid, rid_len) == 0)
            return i;
    return -1;
}

static uint64_t id_frame(zmq_msg_t *m)
{
    return get64(zmq_msg_data(m));
}

/* "PUNCH" <id> <port> <address> from registration g: passed on to the
 * peer relayed at that port, or refused with a reason. */
static void on_punch(rumor_relay_t *r, int g, zmq_msg_t *part, int n)
{
    char addr[RLY_ADDR], port_s[8];
    unsigned char id[8];
    if (n != 5 || zmq_msg_size(&part[2]) != 8 || zmq_msg_size(&part[3]) >= sizeof port_s ||
        !rly_addr_frame(&part[4], addr))
        return; /* malformed: nothing to answer to */
    memcpy(id, zmq_msg_data(&part[2]), 8);
    memcpy(port_s, zmq_msg_data(&part[3]), zmq_msg_size(&part[3]));
    port_s[zmq_msg_size(&part[3])] = 0;
    int port = atoi(port_s), to = -1;
    for (int i = 0; i < r->o.max_peers && to < 0; i++)
        if (r->regs[i].used && r->regs[i].port == port && i != g)
            to = i;
    const char *why = to < 0 ? "no peer is relayed at that port" : NULL;
    if (!why && r->np == PUNCHES)
        why = "too many hole punches under way";
    if (why) {
        send_parts(r, &r->regs[g], "NOPUNCH", id, 8, why, strlen(why), NULL, 0);
        return;
    }
    struct punch *p = &r->punch[r->np++];
    p->from = g;
    p->to = to;
    p->id = id_frame(&part[2]);
    p->rid = ++r->next_rid;
    p->t = rumor_now();
    unsigned char rid[8];
    put64(rid, p->rid);
    send_parts(r, &r->regs[to], "PUNCH", rid, 8, addr, strlen(addr), NULL, 0);
    pthread_mutex_lock(&r->mu);
    r->st.punches++;
    pthread_mutex_unlock(&r->mu);
}

/* "PUNCHED" <relay's id> <address> or "NOPUNCH" <relay's id> from the
 * peer asked: the answer goes to the one that asked. */
static void on_punched(rumor_relay_t *r, int g, int yes, zmq_msg_t *part, int n)
{
    char addr[RLY_ADDR];
    if (n < 3 || zmq_msg_size(&part[2]) != 8 ||
        (yes && (n != 4 || !rly_addr_frame(&part[3], addr))))
        return;
    uint64_t rid = id_frame(&part[2]);
    for (int i = 0; i < r->np; i++) {
        struct punch *p = &r->punch[i];
        if (p->rid != rid || p->to != g)
            continue;
        unsigned char id[8];
        put64(id, p->id);
        const char *why = "the peer declined";
        if (r->regs[p->from].used)
            send_parts(r, &r->regs[p->from], yes ? "PUNCHED" : "NOPUNCH", id, 8,
                       yes ? addr : why, strlen(yes ? addr : why), NULL, 0);
        r->punch[i] = r->punch[--r->np];
        return;
    }
}

/* One control message: [routing id][command][...]. Anything else is
 * ignored: a malformed request changes nothing. */
static void on_control(rumor_relay_t *r)
{
    zmq_msg_t part[5];
    int n = rly_recv_parts(r->router, part, 5);
    if (n >= 2 && zmq_msg_size(&part[0]) <= sizeof r->regs[0].rid) {
        const unsigned char *rid = zmq_msg_data(&part[0]);
        size_t rl = zmq_msg_size(&part[0]);
        const char *cmd = zmq_msg_data(&part[1]);
        size_t cl = zmq_msg_size(&part[1]);
        uint64_t key = r->secure ? rumor_transport_msg_peer_id(&part[1]) : 0;
        int g = find_reg(r, rid, rl);
        if (cl == 8 && memcmp(cmd, "REGISTER", 8) == 0 && (!r->secure || key)) {
            on_register(r, rid, rl, key);
        } else if (cl == 4 && memcmp(cmd, "PING", 4) == 0 && g >= 0) {
            r->regs[g].heard = rumor_now();
            send_parts(r, &r->regs[g], "PONG", NULL, 0, NULL, 0, NULL, 0);
        } else if (cl == 3 && memcmp(cmd, "BYE", 3) == 0 && g >= 0) {
            drop_reg(r, g, "the peer left");
        } else if (cl == 5 && memcmp(cmd, "PUNCH", 5) == 0 && g >= 0) {
            on_punch(r, g, part, n);
        } else if (cl == 7 && memcmp(cmd, "PUNCHED", 7) == 0 && g >= 0) {
            on_punched(r, g, 1, part, n);
        } else if (cl == 7 && memcmp(cmd, "NOPUNCH", 7) == 0 && g >= 0) {
            on_punched(r, g, 0, part, n);
        }
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&part[i]);
}

/* ------------------------------------------------------------ connections */

static void on_front(rumor_relay_t *r, int g)
{
    struct reg *rg = &r->regs[g];
    int fd = accept4(rg->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    if (rg->conns >= r->o.max_conns || r->nf >= r->cap_conns) {
        pthread_mutex_lock(&r->mu);
        r->st.conns_refused++;
        pthread_mutex_unlock(&r->mu);
        close(fd);
        return;
    }
    struct front *f = &r->fronts[r->nf++];
    f->fd = fd;
    f->reg = g;
    f->id = ++rg->next_conn;
    f->t = rumor_now();
    rg->conns++;
    unsigned char id[8];
    put64(id, f->id);
    send_parts(r, rg, "CONN", id, sizeof id, NULL, 0, NULL, 0);
}

static void on_back_accept(rumor_relay_t *r)
{
    int fd = accept4(r->back_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    if (r->nb >= r->cap_conns) {
        close(fd);
        return;
    }
    struct back *b = &r->backs[r->nb++];
    memset(b, 0, sizeof *b);
    b->fd = fd;
    b->t = rumor_now();
}

static void bad_back(rumor_relay_t *r, int k)
{
    pthread_mutex_lock(&r->mu); /* counted before the other end sees the close */
    r->st.backs_bad++;
    pthread_mutex_unlock(&r->mu);
    close(r->backs[k].fd);
    r->backs[k] = r->backs[--r->nb];
}

/* A registered peer's probe: the address its connection comes from, as
 * this side sees it (its NAT's), then the close. */
static void on_probe(rumor_relay_t *r, int k)
{
    struct back *b = &r->backs[k];
    int known = 0;
    for (int i = 0; i < r->o.max_peers && !known; i++)
        known = r->regs[i].used && sodium_memcmp(r->regs[i].token, b->hdr + 8, RLY_TOKEN) == 0;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "", out[RLY_ADDR] = { 0 };
    int port = 0;
    if (known && getpeername(b->fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
            port = ntohs(s6->sin6_port);
            if (!strncmp(host, "::ffff:", 7) && strchr(host, '.')) /* IPv4, mapped */
                memmove(host, host + 7, strlen(host + 7) + 1);
        } else {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
            port = ntohs(s4->sin_port);
        }
    }
    if (!port) {
        bad_back(r, k);
        return;
    }
    rly_endpoint(out, sizeof out, host, port);
    /* 64 bytes into an empty socket buffer: one write, or nothing */
    if (send(b->fd, out, sizeof out, MSG_NOSIGNAL) != (ssize_t)sizeof out)
        rumor_debug("relay: a probe's answer was not sent: %s", strerror(errno));
    pthread_mutex_lock(&r->mu);
    r->st.probes++;
    pthread_mutex_unlock(&r->mu);
    close(b->fd);
    r->backs[k] = r->backs[--r->nb];
}

/* Reads a data connection's header; a whole one pairs it with its front.
 * Returns 1 when backs[k] was removed (paired or refused). */
static int on_back_read(rumor_relay_t *r, int k)
{
    struct back *b = &r->backs[k];
    ssize_t n = read(b->fd, b->hdr + b->got, (size_t)(RLY_HDR - b->got));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        bad_back(r, k);
        return 1;
    }
    if (n > 0)
        b->got += (int)n;
    if (b->got < RLY_HDR)
        return 0;
    if (memcmp(b->hdr, RLY_PROBE, 8) == 0) {
        on_probe(r, k);
        return 1;
    }
    uint64_t id = get64(b->hdr + 8 + RLY_TOKEN);
    int f = -1;
    if (memcmp(b->hdr, RLY_MAGIC, 8) == 0)
        for (int i = 0; i < r->nf && f < 0; i++)
            if (r->fronts[i].id == id &&
                sodium_memcmp(r->regs[r->fronts[i].reg].token, b->hdr + 8, RLY_TOKEN) == 0)
                f = i;
    if (f < 0 || r->ns >= r->cap_conns) {
        bad_back(r, k);
        return 1;
    }
    struct splice *s = &r->splices[r->ns];
    if (rly_splice_init(&s->s, r->fronts[f].fd, b->fd) < 0) {
        rly_splice_close(&s->s);
        r->regs[r->fronts[f].reg].conns--;
    } else {
        s->reg = r->fronts[f].reg;
        r->ns++;
        pthread_mutex_lock(&r->mu);
        r->st.conns_spliced++;
        r->st.conns_now++;
        pthread_mutex_unlock(&r->mu);
    }
    r->fronts[f] = r->fronts[--r->nf];
    r->backs[k] = r->backs[--r->nb];
    return 1;
}

static void end_splice(rumor_relay_t *r, int k)
{
    struct splice *s = &r->splices[k];
    if (s->reg >= 0)
        r->regs[s->reg].conns--;
    rly_splice_close(&s->s);
    r->splices[k] = r->splices[--r->ns];
    pthread_mutex_lock(&r->mu);
    r->st.conns_now--;
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------------ the loop */

static void refill(rumor_relay_t *r, double now)
{
    if (r->rate <= 0)
        return;
    for (int i = 0; i < r->o.max_peers; i++) {
        struct reg *g = &r->regs[i];
        if (!g->used)
            continue;
        g->tokens += (now - g->refilled) * r->rate;
        g->refilled = now;
        double cap = r->rate * 0.1 > RLY_BUF ? r->rate * 0.1 : RLY_BUF;
        if (g->tokens > cap)
            g->tokens = cap;
    }
}

static size_t budget_of(const rumor_relay_t *r, int g)
{
    if (r->rate <= 0 || g < 0)
        return RLY_BUF;
    /* reads of a useful size: the loop sleeps while the bucket fills */
    double least = r->rate * 0.01 < RLY_BUF / 4 ? r->rate * 0.01 : RLY_BUF / 4;
    return r->regs[g].tokens >= least ? (size_t)r->regs[g].tokens : 0;
}

static void *relay_main(void *arg)
{
    rumor_relay_t *r = arg;
    int cap = 2 + r->o.max_peers + 2 * r->cap_conns + r->cap_conns;
    zmq_pollitem_t *it = calloc((size_t)cap, sizeof *it);
    int *who = calloc((size_t)cap, sizeof *who);
    if (!it || !who) {
        rumor_error("relay: out of memory; relaying stops");
        free(it);
        free(who);
        return NULL;
    }
    while (!atomic_load(&r->stop)) {
        double now = rumor_now();
        refill(r, now);
        int n = 0, throttled = 0;
        it[n++] = (zmq_pollitem_t){ r->router, 0, ZMQ_POLLIN, 0 };
        it[n++] = (zmq_pollitem_t){ NULL, r->back_fd, ZMQ_POLLIN, 0 };
        int reg0 = n;
        for (int i = 0; i < r->o.max_peers; i++)
            if (r->regs[i].used) {
                who[n] = i;
                it[n++] = (zmq_pollitem_t){ NULL, r->regs[i].lfd, ZMQ_POLLIN, 0 };
            }
        int back0 = n;
        for (int k = 0; k < r->nb; k++) {
            who[n] = k;
            it[n++] = (zmq_pollitem_t){ NULL, r->backs[k].fd, ZMQ_POLLIN, 0 };
        }
        int sp0 = n;
        for (int k = 0; k < r->ns; k++) {
            int allow = budget_of(r, r->splices[k].reg) > 0;
            throttled |= !allow;
            for (int j = 0; j < 2; j++) {
                who[n] = k;
                it[n++] = (zmq_pollitem_t){ NULL, r->splices[k].s.fd[j], 0, 0 };
                it[n - 1].events = rly_splice_events(&r->splices[k].s, j, allow);
            }
        }
        if (zmq_poll(it, n, throttled ? 5 : 100) < 0 && zmq_errno() != EINTR)
            break;
        if (it[0].revents & ZMQ_POLLIN)
            for (int i = 0; i < 64 && (it[0].revents & ZMQ_POLLIN); i++) {
                on_control(r);
                size_t sz = sizeof it[0].revents;
                int ev = 0;
                zmq_getsockopt(r->router, ZMQ_EVENTS, &ev, &sz);
                it[0].revents = (short)ev;
            }
        if (it[1].revents & ZMQ_POLLIN)
            on_back_accept(r);
        for (int i = reg0; i < back0; i++)
            if ((it[i].revents & ZMQ_POLLIN) && r->regs[who[i]].used &&
                r->regs[who[i]].lfd == it[i].fd)
                on_front(r, who[i]);
        /* splices first (their indices move when one ends), back to front */
        for (int i = n - 2; i >= sp0; i -= 2) {
            int k = who[i];
            struct splice *s = &r->splices[k];
            int live = 1;
            for (int j = 0; j < 2 && live; j++) {
                short ev = it[i + j].revents;
                if (!ev)
                    continue;
                size_t moved = 0;
                live = rly_splice_io(&s->s, j, ev, budget_of(r, s->reg), &moved, r->tap);
                if (moved) {
                    if (r->rate > 0 && s->reg >= 0)
                        r->regs[s->reg].tokens -= (double)moved;
                    pthread_mutex_lock(&r->mu);
                    r->st.bytes += moved;
                    pthread_mutex_unlock(&r->mu);
                }
            }
            if (!live)
                end_splice(r, k);
        }
        for (int i = sp0 - 1; i >= back0; i--)
            if (it[i].revents)
                on_back_read(r, who[i]);
        /* deadlines: headers, fronts never claimed, silent registrations */
        now = rumor_now();
        for (int k = r->nb - 1; k >= 0; k--)
            if (now - r->backs[k].t > RLY_BACK_TIMEOUT)
                bad_back(r, k);
        for (int k = r->nf - 1; k >= 0; k--)
            if (now - r->fronts[k].t > RLY_BACK_TIMEOUT) {
                close(r->fronts[k].fd);
                r->regs[r->fronts[k].reg].conns--;
                r->fronts[k] = r->fronts[--r->nf];
            }
        for (int k = r->np - 1; k >= 0; k--)
            if (now - r->punch[k].t > RLY_BACK_TIMEOUT)
                r->punch[k] = r->punch[--r->np];
        for (int i = 0; i < r->o.max_peers; i++)
            if (r->regs[i].used && now - r->regs[i].heard > r->o.heartbeat_timeout_ms / 1000.0) {
                drop_reg(r, i, "silent for the heartbeat timeout");
                pthread_mutex_lock(&r->mu);
                r->st.dropped_silent++;
                pthread_mutex_unlock(&r->mu);
            }
        if (r->tap)
            fflush(r->tap);
    }
    free(it);
    free(who);
    return NULL;
}

/* ------------------------------------------------------------ life */

static void relay_free(rumor_relay_t *r)
{
    for (int i = 0; r->regs && i < r->o.max_peers; i++)
        if (r->regs[i].used)
            close(r->regs[i].lfd);
    for (int k = 0; k < r->nf; k++)
        close(r->fronts[k].fd);
    for (int k = 0; k < r->nb; k++)
        close(r->backs[k].fd);
    for (int k = 0; k < r->ns; k++)
        rly_splice_close(&r->splices[k].s);
    if (r->back_fd >= 0)
        close(r->back_fd);
    if (r->router)
        zmq_close(r->router);
    rumor_zap_stop(&r->zap);
    if (r->ctx)
        zmq_ctx_term(r->ctx);
    if (r->tap)
        fclose(r->tap);
    rumor_curve_keypair_clear(&r->keys);
    pthread_mutex_destroy(&r->mu);
    free(r->regs);
    free(r->fronts);
    free(r->backs);
    free(r->splices);
    free(r);
}

int rumor_relay_start(const rumor_relay_opts_t *o, rumor_relay_t **out)
{
    *out = NULL;
    if (!o || !o->control)
        return rumor_err_set(RUMOR_EINVAL, "relay: no control address");
    if (o->keys && (!o->allow || !o->keys->has_secret))
        return rumor_err_set(RUMOR_EINVAL, "relay: CURVE needs this peer's secret key and an "
                                           "allow-list");
    rumor_relay_t *r = calloc(1, sizeof *r);
    if (!r)
        return rumor_err_set(RUMOR_ENOMEM, "relay: out of memory");
    r->o = *o;
    r->back_fd = -1;
    pthread_mutex_init(&r->mu, NULL);
    if (r->o.max_peers <= 0)
        r->o.max_peers = 32;
    if (r->o.max_conns <= 0)
        r->o.max_conns = 64;
    if (r->o.heartbeat_timeout_ms <= 0)
        r->o.heartbeat_timeout_ms = 5000;
    r->rate = o->mbit > 0 ? o->mbit * 1e6 / 8 : 0;
    r->cap_conns = r->o.max_peers * r->o.max_conns;
    int port, rc = rly_split(o->control, r->host, sizeof r->host, &port);
    if (rc == 0 && sodium_init() < 0)
        rc = rumor_err_set(RUMOR_ESYS, "relay: libsodium cannot initialize");
    snprintf(r->public_host, sizeof r->public_host, "%s",
             o->public_host ? o->public_host : r->host);
    if (rc == 0 && !r->public_host[0])
        rc = rumor_err_set(RUMOR_EINVAL, "relay: %s binds every interface: the relayed "
                                         "addresses need a host the others can dial",
                           o->control);
    r->regs = calloc((size_t)r->o.max_peers, sizeof *r->regs);
    r->fronts = calloc((size_t)r->cap_conns, sizeof *r->fronts);
    r->backs = calloc((size_t)r->cap_conns, sizeof *r->backs);
    r->splices = calloc((size_t)r->cap_conns, sizeof *r->splices);
    if (rc == 0 && (!r->regs || !r->fronts || !r->backs || !r->splices))
        rc = rumor_err_set(RUMOR_ENOMEM, "relay: out of memory");
    if (rc == 0 && o->tap && !(r->tap = fopen(o->tap, "ab")))
        rc = rumor_err_set(RUMOR_ESYS, "relay: tap %s: %s", o->tap, strerror(errno));
    if (rc == 0 && !(r->ctx = zmq_ctx_new()))
        rc = rumor_err_set(RUMOR_ESYS, "relay: zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    if (rc == 0 && o->keys) {
        r->secure = 1;
        r->keys = *o->keys;
        rc = rumor_zap_start(r->ctx, o->allow, &r->zap);
    }
    if (rc == 0 && !(r->router = zmq_socket(r->ctx, ZMQ_ROUTER)))
        rc = rumor_err_set(RUMOR_ESYS, "relay: zmq_socket: %s", zmq_strerror(zmq_errno()));
    if (rc == 0) {
        int zero = 0, one = 1;
        int64_t maxmsg = 4096;
        zmq_setsockopt(r->router, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(r->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
        if (strchr(r->host, ':') || !r->host[0])
            zmq_setsockopt(r->router, ZMQ_IPV6, &one, sizeof one);
        if (r->secure &&
            (zmq_setsockopt(r->router, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
             zmq_setsockopt(r->router, ZMQ_CURVE_SECRETKEY, r->keys.secret_key,
                            RUMOR_CURVE_KEY_BYTES) != 0 ||
             zmq_setsockopt(r->router, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0))
            rc = rumor_err_set(RUMOR_ESYS, "relay: CURVE: %s", zmq_strerror(zmq_errno()));
    }
    if (rc == 0 && zmq_bind(r->router, o->control) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "relay: cannot bind %s: %s", o->control,
                           zmq_strerror(zmq_errno()));
    if (rc == 0) {
        size_t sz = sizeof r->endpoint;
        zmq_getsockopt(r->router, ZMQ_LAST_ENDPOINT, r->endpoint, &sz);
        char h[256];
        int cp = 0;
        if (rly_split(r->endpoint, h, sizeof h, &cp) == 0)
            rly_endpoint(r->public_ep, sizeof r->public_ep, r->public_host, cp);
        int bp = 0;
        r->back_fd = rly_listen(r->host, 0, &bp);
        if (r->back_fd < 0)
            rc = r->back_fd;
        rly_endpoint(r->back_ep, sizeof r->back_ep, r->public_host, bp);
    }
    for (int i = 0; r->regs && i < r->o.max_peers; i++)
        r->regs[i].lfd = -1;
    if (rc == 0 && pthread_create(&r->thread, NULL, relay_main, r) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "relay: cannot start its thread");
    if (rc < 0) {
        relay_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void rumor_relay_stop(rumor_relay_t **rp)
{
    if (!rp || !*rp)
        return;
    rumor_relay_t *r = *rp;
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
    relay_free(r);
    *rp = NULL;
}

const char *rumor_relay_endpoint(const rumor_relay_t *r)
{
    return r->endpoint;
}

const char *rumor_relay_public_endpoint(const rumor_relay_t *r)
{
    return r->public_ep;
}

void rumor_relay_stats(rumor_relay_t *r, rumor_relay_stats_t *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
    if (r->zap) {
        rumor_zap_stats_t z;
        rumor_zap_stats(r->zap, &z);
        out->refused_key = z.denied_not_listed;
    }
}

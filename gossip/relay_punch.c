/* Direct paths between two peers relayed by one relay: TCP simultaneous
 * open ("hole punching") coordinated through the relay (see relay.h).
 *
 * The dialling side. The mixer dials members through the transport's dial
 * hook, rumor_relay_client_dial: a member relayed by this peer's relay is
 * dialled at a local proxy (a listener on 127.0.0.1). A connection the
 * proxy accepts goes on over a punched connection when one is ready and
 * through the relay otherwise; the first one starts a punch. A punch that
 * succeeds closes one relayed connection of that member, so that ZeroMQ
 * connects again and takes the direct path; one that fails leaves the
 * relay in use and is tried again later (10 s, doubling to 5 min).
 *
 * Both sides. A punch learns the address the NAT gives one port of this
 * peer (a probe to the relay's back port from that port), tells the relay,
 * gets the other's address in return, and connects to it from that port
 * until the other's connection meets it or 5 s pass; a refused attempt
 * (an RST from the other's NAT, which had not yet seen its own side's
 * connection go out) is tried again at once from the same port. The asked
 * side splices what it punched to its own listener, as it does a relayed
 * connection: the dialling peer's CurveZMQ handshake runs with it end to
 * end. All of this runs on the relay client's thread. */
#include <errno.h>
#include <poll.h>
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

#define PUNCH_WAIT 5.0           /* for the other's address, then for the connection */
#define PUNCH_RETRY 0.02         /* after a refused attempt */
#define PUNCH_BACKOFF 10.0       /* a failed member's next try; doubles to PUNCH_BACKOFF_MAX */
#define PUNCH_BACKOFF_MAX 300.0
#define PROXY_IDLE 60.0          /* a proxy not dialled for this long closes */

enum { T_ANSWER, T_CONNECT, T_RETRY };


/* ------------------------------------------------------------ the dial hook */

int rumor_relay_client_dial(void *client, const char *ep, char *out, size_t cap)
{
    rumor_relay_client_t *c = client;
    char host[256], rhost[256];
    int port, rport;
    if (!c || c->o.no_punch || rly_split(ep, host, sizeof host, &port) < 0)
        return snprintf(out, cap, "%s", ep);
    pthread_mutex_lock(&c->mu);
    int k = -1;
    /* relayed by the relay in use: its host, another port than ours */
    if (rly_split(c->endpoint, rhost, sizeof rhost, &rport) == 0 && !strcmp(rhost, host) &&
        rport != port) {
        for (int i = 0; i < RLY_PROXIES && k < 0; i++)
            if (c->px[i].used && !strcmp(c->px[i].target, ep))
                k = i;
        for (int i = 0; i < RLY_PROXIES && k < 0; i++)
            if (!c->px[i].used && strlen(ep) < sizeof c->px[i].target) {
                rly_proxy_t *p = &c->px[i];
                int lport = 0;
                int fd = rly_listen("127.0.0.1", 0, &lport);
                if (fd < 0) {
                    rumor_warn("relay: no local path for %s: %s", ep, rumor_err_msg());
                    break;
                }
                memset(p, 0, sizeof *p);
                p->lfd = fd;
                p->lport = lport;
                p->ready_fd = -1;
                snprintf(p->target, sizeof p->target, "%s", ep);
                snprintf(p->thost, sizeof p->thost, "%s", host);
                p->tport = port;
                p->used_at = rumor_now();
                p->used = 1;
                k = i;
            }
    }
    int n = k >= 0 ? snprintf(out, cap, "tcp://127.0.0.1:%d", c->px[k].lport)
                   : snprintf(out, cap, "%s", ep);
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* ------------------------------------------------------------ punches */

static void count(rumor_relay_client_t *c, uint64_t *what)
{
    pthread_mutex_lock(&c->mu);
    (*what)++;
    pthread_mutex_unlock(&c->mu);
}

/* The address the relay sees connections from port *lport come from (0:
 * any; *lport gets the one used). 0 or an error. */
static int probe(rumor_relay_client_t *c, int *lport, char *seen)
{
    int fd = rly_connect_from(c->back_host, c->back_port, 0, lport, 3.0);
    if (fd < 0)
        return fd;
    unsigned char hdr[RLY_HDR] = { 0 };
    memcpy(hdr, RLY_PROBE, 8);
    memcpy(hdr + 8, c->token, RLY_TOKEN);
    size_t got = 0;
    int rc = send(fd, hdr, sizeof hdr, MSG_NOSIGNAL) == (ssize_t)sizeof hdr ? 0 : -1;
    while (rc == 0 && got < RLY_ADDR) {
        struct pollfd p = { fd, POLLIN, 0 };
        ssize_t r = poll(&p, 1, 3000) == 1 ? read(fd, seen + got, RLY_ADDR - got) : 0;
        if (r <= 0)
            rc = -1;
        else
            got += (size_t)r;
    }
    close(fd);
    char host[RLY_ADDR];
    int port;
    if (rc < 0 || !memchr(seen, 0, RLY_ADDR) || rly_split(seen, host, sizeof host, &port) < 0)
        return rumor_err_set(RUMOR_EPROTO, "relay %s: no answer to a probe", c->relay);
    return 0;
}

static void end_try(rumor_relay_client_t *c, int t)
{
    if (c->tr[t].fd >= 0)
        close(c->tr[t].fd);
    c->tr[t] = c->tr[--c->ntr];
}

static void failed(rumor_relay_client_t *c, int t, const char *why)
{
    rly_try_t *x = &c->tr[t];
    if (x->proxy < 0 || !c->px[x->proxy].no_punch) /* not a try: nobody to punch to */
        count(c, &c->st.punches);
    if (x->proxy >= 0) {
        rly_proxy_t *p = &c->px[x->proxy];
        p->busy = 0;
        p->fails++;
        double wait = PUNCH_BACKOFF * (double)(1 << (p->fails < 6 ? p->fails - 1 : 5));
        p->next_try = rumor_now() + (wait < PUNCH_BACKOFF_MAX ? wait : PUNCH_BACKOFF_MAX);
        if (p->no_punch)
            rumor_debug("relay: %s is not relayed: %s", p->target, why);
        else if (!p->said++)
            rumor_info("relay: no direct path to %s (%s): it stays reached through the relay",
                       p->target, why);
        else
            rumor_debug("relay: no direct path to %s (%s)", p->target, why);
    } else {
        rumor_debug("relay: a neighbour's hole punch from %s:%d failed: %s", x->host, x->port,
                    why);
    }
    end_try(c, t);
}

/* Connected: the dialling side keeps it for its proxy's next connection
 * and closes one relayed connection to that member (ZeroMQ reconnects,
 * now directly); the asked side splices it to its own listener. */
static void punched(rumor_relay_client_t *c, int t)
{
    rly_try_t *x = &c->tr[t];
    int fd = x->fd;
    x->fd = -1;
    pthread_mutex_lock(&c->mu);
    c->st.punches++;
    c->st.punched++;
    pthread_mutex_unlock(&c->mu);
    if (x->proxy >= 0) {
        rly_proxy_t *p = &c->px[x->proxy];
        if (p->ready_fd >= 0)
            close(p->ready_fd);
        p->ready_fd = fd;
        p->busy = 0;
        p->fails = 0;
        rumor_info("relay: a direct path to %s (a hole punched to %s:%d)", p->target, x->host,
                   x->port);
        for (int k = 0; k < c->ns; k++)
            if (c->sp[k].proxy == x->proxy && c->sp[k].kind == RLY_SP_RELAYED) {
                rly_splice_close(&c->sp[k].s);
                c->sp[k] = c->sp[--c->ns];
                break;
            }
    } else {
        int l = rly_connect(c->local_host, c->local_port, 3.0);
        if (l < 0) {
            rumor_warn("relay: a punched connection could not reach this peer's listener: %s",
                       rumor_err_msg());
            close(fd);
        } else if (rly_client_splice(c, fd, l, -1, RLY_SP_PUNCHED) == 0) {
            count(c, &c->st.direct);
            rumor_debug("relay: a neighbour's direct path from %s:%d", x->host, x->port);
        }
    }
    end_try(c, t);
}

/* A connection attempt from the probed port; refused at once: again. */
static void connect_try(rumor_relay_client_t *c, int t)
{
    rly_try_t *x = &c->tr[t];
    int bound = 0;
    x->fd = rly_connect_from(x->host, x->port, x->lport, &bound, 0);
    x->state = T_CONNECT;
    if (x->fd < 0) {
        x->state = T_RETRY;
        x->retry_at = rumor_now() + PUNCH_RETRY;
    }
}

/* A new try; -1 when RLY_TRIES are under way. */
static int new_try(rumor_relay_client_t *c, int proxy, uint64_t pid, int lport)
{
    if (c->ntr == RLY_TRIES)
        return -1;
    rly_try_t *x = &c->tr[c->ntr];
    memset(x, 0, sizeof *x);
    x->fd = -1;
    x->proxy = proxy;
    x->pid = pid;
    x->lport = lport;
    x->deadline = rumor_now() + PUNCH_WAIT;
    return c->ntr++;
}

/* The dialling side: a probe, then PUNCH to the relay. */
static void start_punch(rumor_relay_client_t *c, int k)
{
    rly_proxy_t *p = &c->px[k];
    char seen[RLY_ADDR] = { 0 };
    int lport = 0, t;
    p->busy = 1;
    if (probe(c, &lport, seen) < 0 || (t = new_try(c, k, ++c->next_pid, lport)) < 0) {
        p->busy = 0;
        p->next_try = rumor_now() + PUNCH_BACKOFF;
        rumor_debug("relay: no hole punch to %s now: %s", p->target,
                    c->ntr == RLY_TRIES ? "too many under way" : rumor_err_msg());
        return;
    }
    c->tr[t].state = T_ANSWER;
    unsigned char id[8];
    char port[8];
    put64(id, c->tr[t].pid);
    snprintf(port, sizeof port, "%d", p->tport);
    rly_client_send(c, "PUNCH", id, 8, port, strlen(port), seen, strlen(seen));
}

static int addr_of(zmq_msg_t *m, char *host, size_t cap, int *port)
{
    char a[RLY_ADDR];
    return rly_addr_frame(m, a) && rly_split(a, host, cap, port) == 0 ? 0 : -1;
}

void rly_punch_control(rumor_relay_client_t *c, zmq_msg_t *parts, int np)
{
    const char *cmd = zmq_msg_data(&parts[0]);
    size_t cl = zmq_msg_size(&parts[0]);
    if (np < 2 || zmq_msg_size(&parts[1]) != 8)
        return;
    uint64_t id = get64(zmq_msg_data(&parts[1]));
    char host[256];
    int port = 0;
    if (cl == 5 && !memcmp(cmd, "PUNCH", 5)) {
        /* another relayed peer dials this one: the address its NAT gave
         * it, ours in return, and our connection towards it */
        char seen[RLY_ADDR] = { 0 };
        int lport = 0, t = -1;
        unsigned char rid[8];
        put64(rid, id);
        if (np != 3 || addr_of(&parts[2], host, sizeof host, &port) < 0)
            return;
        if (c->o.no_punch || probe(c, &lport, seen) < 0 || (t = new_try(c, -1, id, lport)) < 0) {
            rly_client_send(c, "NOPUNCH", rid, 8, NULL, 0, NULL, 0);
            return;
        }
        snprintf(c->tr[t].host, sizeof c->tr[t].host, "%s", host);
        c->tr[t].port = port;
        rly_client_send(c, "PUNCHED", rid, 8, seen, strlen(seen), NULL, 0);
        connect_try(c, t);
        return;
    }
    int yes = cl == 7 && !memcmp(cmd, "PUNCHED", 7);
    if (!yes && !(cl == 7 && !memcmp(cmd, "NOPUNCH", 7)))
        return;
    int t = -1;
    for (int i = 0; i < c->ntr && t < 0; i++)
        if (c->tr[i].proxy >= 0 && c->tr[i].pid == id && c->tr[i].state == T_ANSWER)
            t = i;
    if (t < 0)
        return; /* late, or not ours */
    if (!yes || np != 3 || addr_of(&parts[2], host, sizeof host, &port) < 0) {
        char why[128] = "a malformed answer";
        if (!yes && np == 3)
            snprintf(why, sizeof why, "%.*s",
                     (int)(zmq_msg_size(&parts[2]) < 100 ? zmq_msg_size(&parts[2]) : 100),
                     (const char *)zmq_msg_data(&parts[2]));
        if (!yes && strstr(why, "no peer is relayed")) {
            /* the relay's host itself: reached directly, never punched */
            int k = c->tr[t].proxy, was = 0;
            c->px[k].no_punch = 1;
            for (int i = 0; i < c->ns; i++)
                if (c->sp[i].proxy == k && c->sp[i].kind == RLY_SP_RELAYED) {
                    c->sp[i].kind = RLY_SP_PLAIN;
                    was++;
                }
            pthread_mutex_lock(&c->mu);
            c->st.relayed_out -= (uint64_t)was;
            pthread_mutex_unlock(&c->mu);
        }
        failed(c, t, why);
        return;
    }
    snprintf(c->tr[t].host, sizeof c->tr[t].host, "%s", host);
    c->tr[t].port = port;
    c->tr[t].deadline = rumor_now() + PUNCH_WAIT;
    connect_try(c, t);
}

/* ------------------------------------------------------------ the proxies */

/* The mixer's connection to a relayed member: over the punched path when
 * one is ready, else through the relay (and a punch starts). */
static void on_accept(rumor_relay_client_t *c, int k)
{
    rly_proxy_t *p = &c->px[k];
    int fd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    double now = rumor_now();
    p->used_at = now;
    if (p->ready_fd >= 0) {
        int d = p->ready_fd;
        p->ready_fd = -1;
        if (rly_client_splice(c, fd, d, k, RLY_SP_DIRECT) == 0)
            count(c, &c->st.direct);
        /* more connections of this member still relayed: another punch */
        for (int i = 0; i < c->ns; i++)
            if (c->sp[i].proxy == k && c->sp[i].kind == RLY_SP_RELAYED)
                p->next_try = 0;
    } else {
        int r = rly_connect(p->thost, p->tport, 3.0);
        if (r < 0) {
            rumor_debug("relay: %s: %s", p->target, rumor_err_msg());
            close(fd);
        } else if (rly_client_splice(c, fd, r, k, p->no_punch ? RLY_SP_PLAIN : RLY_SP_RELAYED) == 0 &&
                   !p->no_punch) {
            count(c, &c->st.relayed_out);
        }
    }
    if (!p->busy && !p->no_punch && p->ready_fd < 0 && now >= p->next_try)
        start_punch(c, k);
}

int rly_punch_items(rumor_relay_client_t *c, void *items, int cap)
{
    zmq_pollitem_t *it = items;
    int n = 0;
    pthread_mutex_lock(&c->mu); /* the dial hook takes slots */
    for (int k = 0; k < RLY_PROXIES && n < cap; k++)
        it[n++] = (zmq_pollitem_t){ NULL, c->px[k].used ? c->px[k].lfd : -1,
                                    c->px[k].used ? ZMQ_POLLIN : 0, 0 };
    pthread_mutex_unlock(&c->mu);
    for (int t = 0; t < RLY_TRIES && n < cap; t++) {
        int on = t < c->ntr && c->tr[t].state == T_CONNECT;
        it[n++] = (zmq_pollitem_t){ NULL, on ? c->tr[t].fd : -1, on ? ZMQ_POLLOUT : 0, 0 };
    }
    return n;
}

void rly_punch_serve(rumor_relay_client_t *c, const void *items, int n)
{
    const zmq_pollitem_t *it = items;
    if (n < RLY_PROXIES + RLY_TRIES)
        return;
    for (int k = 0; k < RLY_PROXIES; k++)
        if (it[k].revents & ZMQ_POLLIN)
            on_accept(c, k);
    /* connects that ended (tries move when one ends: back to front) */
    double now = rumor_now();
    for (int t = c->ntr - 1; t >= 0; t--) {
        rly_try_t *x = &c->tr[t];
        short ev = it[RLY_PROXIES + t].fd == x->fd ? it[RLY_PROXIES + t].revents : 0;
        if (x->state == T_CONNECT && ev) {
            int e = 0;
            socklen_t sl = sizeof e;
            getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &e, &sl);
            if (!e) {
                punched(c, t);
                continue;
            }
            close(x->fd);
            x->fd = -1;
            x->state = T_RETRY;
            x->retry_at = now + PUNCH_RETRY;
        }
        if (now > x->deadline)
            failed(c, t, x->state == T_ANSWER ? "no answer through the relay"
                                              : "no connection within 5 s");
        else if (x->state == T_RETRY && now >= x->retry_at)
            connect_try(c, t);
    }
    /* proxies nobody dials any more (the member left or moved) */
    pthread_mutex_lock(&c->mu);
    for (int k = 0; k < RLY_PROXIES; k++) {
        rly_proxy_t *p = &c->px[k];
        int live = p->busy;
        for (int i = 0; i < c->ns && !live; i++)
            live = c->sp[i].proxy == k;
        if (p->used && !live && now - p->used_at > PROXY_IDLE) {
            close(p->lfd);
            if (p->ready_fd >= 0)
                close(p->ready_fd);
            p->used = 0;
            p->lfd = p->ready_fd = -1;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

void rly_punch_free(rumor_relay_client_t *c)
{
    for (int k = 0; k < RLY_PROXIES; k++) {
        if (c->px[k].used)
            close(c->px[k].lfd);
        if (c->px[k].ready_fd >= 0)
            close(c->px[k].ready_fd);
    }
    while (c->ntr)
        end_try(c, 0);
}

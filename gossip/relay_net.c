/* TCP sockets and splices for relays (see relay_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "err.h"
#include "log.h"
#include "relay.h"
#include "relay_int.h"

int rly_split(const char *ep, char *host, size_t cap, int *port)
{
    const char *s = ep;
    if (strncmp(s, "tcp://", 6) == 0)
        s += 6;
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        return rumor_err_set(RUMOR_EINVAL, "'%s': expected tcp://HOST:PORT", ep);
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535 || end == colon + 1)
        return rumor_err_set(RUMOR_EINVAL, "'%s': bad port", ep);
    size_t n = (size_t)(colon - s);
    if (s[0] == '[') {
        if (n < 2 || s[n - 1] != ']')
            return rumor_err_set(RUMOR_EINVAL, "'%s': an IPv6 address goes in brackets", ep);
        s++;
        n -= 2;
    }
    if (n == 1 && s[0] == '*')
        n = 0;
    if (n + 1 > cap)
        return rumor_err_set(RUMOR_EINVAL, "'%s': host too long", ep);
    memcpy(host, s, n);
    host[n] = 0;
    *port = (int)p;
    return 0;
}

int rumor_endpoint_split(const char *ep, char *host, size_t cap, int *port)
{
    return rly_split(ep, host, cap, port);
}

int rly_recv_parts(void *sock, zmq_msg_t *parts, int cap)
{
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < cap)
            parts[n++] = m;
        else
            zmq_msg_close(&m);
    }
    return n;
}

int rly_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return rumor_err_set(RUMOR_ESYS, "fcntl: %s", strerror(errno));
    return 0;
}

static int resolve(const char *host, int port, int passive, struct addrinfo **res)
{
    struct addrinfo hints = { 0 };
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host[0] ? host : NULL, ps, &hints, res);
    if (rc != 0)
        return rumor_err_set(RUMOR_EINVAL, "%s:%d: %s", host[0] ? host : "*", port,
                             gai_strerror(rc));
    return 0;
}

int rly_listen(const char *host, int port, int *bound)
{
    struct addrinfo *res;
    RUMOR_CHECK(resolve(host, port, 1, &res));
    /* every interface: IPv6's wildcard takes IPv4 too, as --listen tcp://\*: does */
    struct addrinfo *a = res;
    if (!host[0])
        for (struct addrinfo *b = res; b; b = b->ai_next)
            if (b->ai_family == AF_INET6)
                a = b;
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? rumor_err_set(RUMOR_ESYS, "socket: %s", strerror(errno)) : 0;
    int one = 1, zero = 0;
    if (rc == 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (a->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 64) < 0)
            rc = rumor_err_set(RUMOR_ESYS, "cannot listen on %s:%d: %s", host[0] ? host : "*",
                               port, strerror(errno));
    }
    if (rc == 0)
        rc = rly_nonblock(fd);
    if (rc == 0) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
    }
    freeaddrinfo(res);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    return fd;
}

int rly_connect(const char *host, int port, double timeout)
{
    return rly_connect_from(host, port, 0, NULL, timeout);
}

/* A socket of a's family; with reuse, SO_REUSEADDR and SO_REUSEPORT and
 * bound to lport (0: any) on every address, so that another such socket
 * may take the same port (a probe's port is a punch's too). */
static int new_socket(const struct addrinfo *a, int reuse, int lport)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || !reuse)
        return fd;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_storage ss = { 0 };
    socklen_t sl;
    if (a->ai_family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)lport);
        sl = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)lport);
        sl = sizeof *s4;
    }
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int rly_connect_from(const char *host, int port, int lport, int *bound, double timeout)
{
    struct addrinfo *res;
    RUMOR_CHECK(resolve(host, port, 0, &res));
    int fd = -1, rc = rumor_err_set(RUMOR_ESYS, "%s:%d: no address", host, port);
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = new_socket(a, bound != NULL || lport, lport);
        if (fd < 0) {
            rc = rumor_err_set(RUMOR_ESYS, "cannot bind port %d: %s", lport, strerror(errno));
            continue;
        }
        int e = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
        if (e == EINPROGRESS && timeout <= 0) {
            e = 0; /* started: its end comes as POLLOUT */
        } else if (e == EINPROGRESS) {
            struct pollfd p = { fd, POLLOUT, 0 };
            int n = poll(&p, 1, (int)(timeout * 1000));
            socklen_t sl = sizeof e;
            if (n == 1)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl);
            else
                e = ETIMEDOUT;
        }
        if (e) {
            rc = rumor_err_set(RUMOR_ESYS, "cannot connect to %s:%d: %s", host, port,
                               strerror(e));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return rc;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bound) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
    }
    if (timeout > 0)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int rly_addr_frame(zmq_msg_t *m, char *out)
{
    size_t l = zmq_msg_size(m);
    if (l < 8 || l >= RLY_ADDR)
        return 0;
    memcpy(out, zmq_msg_data(m), l);
    out[l] = 0;
    char host[RLY_ADDR];
    int port;
    return strlen(out) == l && rly_split(out, host, sizeof host, &port) == 0 && port > 0;
}

int rly_endpoint(char *out, size_t cap, const char *host, int port)
{
    return snprintf(out, cap, strchr(host, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", host, port);
}

int rly_splice_init(rly_splice_t *s, int a, int b)
{
    memset(s, 0, sizeof *s);
    s->fd[0] = a;
    s->fd[1] = b;
    s->p[0].buf = malloc(RLY_BUF);
    s->p[1].buf = malloc(RLY_BUF);
    if (!s->p[0].buf || !s->p[1].buf) {
        free(s->p[0].buf);
        free(s->p[1].buf);
        s->p[0].buf = s->p[1].buf = NULL;
        return rumor_err_set(RUMOR_ENOMEM, "relay: out of memory");
    }
    int one = 1;
    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (rly_nonblock(a) < 0 || rly_nonblock(b) < 0)
        return RUMOR_ESYS;
    return 0;
}

void rly_splice_close(rly_splice_t *s)
{
    for (int i = 0; i < 2; i++) {
        if (s->fd[i] >= 0)
            close(s->fd[i]);
        s->fd[i] = -1;
        free(s->p[i].buf);
        s->p[i].buf = NULL;
    }
}

short rly_splice_events(const rly_splice_t *s, int i, int allow_read)
{
    short ev = 0;
    const rly_pipe_t *in = &s->p[i], *out = &s->p[1 - i];
    if (allow_read && !in->eof && in->len < RLY_BUF)
        ev |= ZMQ_POLLIN;
    if (out->len)
        ev |= ZMQ_POLLOUT;
    return ev;
}

int rly_splice_io(rly_splice_t *s, int i, short revents, size_t budget, size_t *moved, FILE *tap)
{
    rly_pipe_t *in = &s->p[i], *out = &s->p[1 - i];
    *moved = 0;
    /* zmq_poll's events: a hang-up or an error comes as ZMQ_POLLERR */
    if ((revents & (ZMQ_POLLIN | ZMQ_POLLERR)) && !in->eof) {
        if (in->off && in->off + in->len == RLY_BUF) { /* the room is at the front */
            memmove(in->buf, in->buf + in->off, in->len);
            in->off = 0;
        }
        size_t room = RLY_BUF - in->off - in->len;
        if (room > budget)
            room = budget;
        if (!room && (revents & ZMQ_POLLERR)) {
            int e = 0;
            socklen_t sl = sizeof e;
            getsockopt(s->fd[i], SOL_SOCKET, SO_ERROR, &e, &sl);
            if (e)
                return 0;
        }
        if (room) {
            ssize_t n = read(s->fd[i], in->buf + in->off + in->len, room);
            if (n > 0) {
                if (tap)
                    fwrite(in->buf + in->off + in->len, 1, (size_t)n, tap);
                in->len += (size_t)n;
                *moved = (size_t)n;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                in->eof = 1;
            }
        }
    }
    if ((revents & ZMQ_POLLOUT) && out->len) {
        ssize_t n = send(s->fd[i], out->buf + out->off, out->len, MSG_NOSIGNAL);
        if (n > 0) {
            out->off += (size_t)n;
            out->len -= (size_t)n;
            if (!out->len)
                out->off = 0;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            return 0; /* this side is gone: nothing more can reach it */
        }
    }
    /* a side closed: over once what it sent has gone on */
    for (int k = 0; k < 2; k++)
        if (s->p[k].eof && s->p[k].len == 0)
            return 0;
    return 1;
}

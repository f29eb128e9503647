/* What the relay (relay.c) and a relayed peer (relay_client.c) share: TCP
 * sockets by endpoint and the splice of two TCP streams. Internal. */
#ifndef RUMOR_RELAY_INT_H
#define RUMOR_RELAY_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RLY_MAGIC "RUMORRLY"
#define RLY_HDR 48                /* magic, token, connection id */
#define RLY_TOKEN 32
#define RLY_BUF (64 * 1024)       /* bytes buffered each way of a splice */
#define RLY_BACK_TIMEOUT 5.0      /* a data connection's header, a front's back */
#define RLY_PROBE "RUMORPRB"      /* a data connection asking where it comes from */
#define RLY_ADDR 64               /* the answer: "tcp://HOST:PORT", NUL-padded */

/* "tcp://HOST:PORT" (HOST may be [v6], * or a name) into host (brackets
 * removed; "" for *) and port. RUMOR_EINVAL naming the endpoint. */
int rly_split(const char *ep, char *host, size_t cap, int *port);

/* A non-blocking TCP listener on host:port (port 0: any); *bound gets the
 * port. Returns the fd or a negative error. */
int rly_listen(const char *host, int port, int *bound);

/* A TCP connection to host:port within timeout seconds, left blocking
 * with TCP_NODELAY. Returns the fd or a negative error. */
int rly_connect(const char *host, int port, double timeout);

/* rly_connect from this machine's port lport (0: any; SO_REUSEADDR and
 * SO_REUSEPORT, so that another socket may take the same port: a hole
 * punch's); *bound gets the local port. timeout 0: the connect is only
 * started (the fd is non-blocking; its end comes as POLLOUT). */
int rly_connect_from(const char *host, int port, int lport, int *bound, double timeout);

/* A frame holding an address seen ("tcp://HOST:PORT", as a probe answers
 * it) into out (RLY_ADDR bytes): 1 when it is one, 0 when not. */
struct zmq_msg_t;
int rly_addr_frame(struct zmq_msg_t *m, char *out);

/* "tcp://HOST:PORT" (brackets for an IPv6 HOST); snprintf's count. */
int rly_endpoint(char *out, size_t cap, const char *host, int port);

int rly_nonblock(int fd);

/* Receives one multipart message without waiting: its first `cap` frames
 * into parts (the rest dropped). Returns how many were kept (0: none). */
struct zmq_msg_t;
int rly_recv_parts(void *sock, struct zmq_msg_t *parts, int cap);

/* Two TCP streams spliced: p[i] holds bytes read from fd[i] for fd[1-i]. */
typedef struct rly_pipe {
    unsigned char *buf;
    size_t off, len;
    int eof;
} rly_pipe_t;

typedef struct rly_splice {
    int fd[2];
    rly_pipe_t p[2];
} rly_splice_t;

int rly_splice_init(rly_splice_t *s, int a, int b);
void rly_splice_close(rly_splice_t *s);

/* The poll events fd[i] waits for; reading only where allow_read. */
short rly_splice_events(const rly_splice_t *s, int i, int allow_read);

/* Serves fd[i]'s revents: reads at most `budget` bytes (when it may read),
 * writes what the other side buffered. *moved gets the bytes read; tap,
 * when not NULL, receives them too. Returns 1 while the splice lives, 0
 * when it is over (a side closed or failed and what it sent is passed on). */
int rly_splice_io(rly_splice_t *s, int i, short revents, size_t budget, size_t *moved,
                  FILE *tap);

/* ------------------------------------------------------------ a relayed peer */

#include <pthread.h>
#include <stdatomic.h>

#include "relay.h"

#define RLY_SPLICES 256
#define RLY_PROXIES 64            /* members reached through this peer's relay */
#define RLY_TRIES 16              /* hole punches under way */

/* back: a neighbour's through the relay; relayed, direct: this peer's to
 * a member behind the same relay; punched: a neighbour's, direct; plain:
 * this peer's to the relay's host itself (not relayed) */
enum { RLY_SP_BACK, RLY_SP_RELAYED, RLY_SP_DIRECT, RLY_SP_PUNCHED, RLY_SP_PLAIN };

typedef struct rly_csplice {
    rly_splice_t s;
    int proxy;                    /* the proxy it serves, -1: none */
    int kind;                     /* RLY_SP_* */
} rly_csplice_t;

/* A member relayed by this peer's relay: the mixer dials a local listener
 * (rumor_relay_client_dial), whose connections go on through a punched
 * direct path when one is ready, else through the relay. */
typedef struct rly_proxy {
    int used, lfd, lport;
    char target[300], thost[256];
    int tport;
    int ready_fd;                 /* a punched connection not yet taken */
    int busy, no_punch, fails, said;
    double next_try, used_at;
} rly_proxy_t;

typedef struct rly_try {
    int fd, lport, proxy;         /* proxy -1: the other side asked (responder) */
    uint64_t pid;
    char host[256];
    int port, state;
    double deadline, retry_at;
} rly_try_t;

struct rumor_relay_client {
    rumor_relay_client_opts_t o;
    char relays[RUMOR_RELAY_CLIENT_MAX][300];
    uint8_t keys[RUMOR_RELAY_CLIENT_MAX][32];
    int n, cur;
    double switched;            /* when the relay in use was picked */
    const char *relay;          /* relays[cur] */
    char local_host[256];
    int local_port;
    char endpoint[300];         /* the relayed address */
    char back_host[256];
    int back_port;
    uint8_t token[RLY_TOKEN];
    void *ctx, *dealer;
    void *mon;                  /* the control connection's closes (a relay that died) */
    rly_csplice_t sp[RLY_SPLICES];
    int ns;
    rly_proxy_t px[RLY_PROXIES];  /* slots taken under mu (the dialler's thread) */
    rly_try_t tr[RLY_TRIES];
    int ntr;
    uint64_t next_pid;
    double heard, pinged;
    int warned;
    pthread_t thread;
    int running;
    atomic_int stop;
    pthread_mutex_t mu;
    rumor_relay_client_stats_t st;
};

/* relay_client.c: a splice of a and b (closed on failure); 0 or an error */
int rly_client_splice(rumor_relay_client_t *c, int a, int b, int proxy, int kind);
int rly_client_send(rumor_relay_client_t *c, const char *cmd, const void *a, size_t alen,
                    const void *b, size_t blen, const void *d, size_t dlen);

/* relay_punch.c, on the client's thread: poll items for the proxies and
 * the punches (into it, at most cap; returns how many), their service,
 * and the relay's PUNCH, PUNCHED and NOPUNCH messages. */
int rly_punch_items(rumor_relay_client_t *c, void *items, int cap);
void rly_punch_serve(rumor_relay_client_t *c, const void *items, int n);
void rly_punch_control(rumor_relay_client_t *c, struct zmq_msg_t *parts, int np);
void rly_punch_free(rumor_relay_client_t *c);

#endif

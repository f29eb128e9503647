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

/* "tcp://HOST:PORT" (HOST may be [v6], * or a name) into host (brackets
 * removed; "" for *) and port. RUMOR_EINVAL naming the endpoint. */
int rly_split(const char *ep, char *host, size_t cap, int *port);

/* A non-blocking TCP listener on host:port (port 0: any); *bound gets the
 * port. Returns the fd or a negative error. */
int rly_listen(const char *host, int port, int *bound);

/* A TCP connection to host:port within timeout seconds, left blocking
 * with TCP_NODELAY. Returns the fd or a negative error. */
int rly_connect(const char *host, int port, double timeout);

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

#endif

/* A swarm's peer list and the endpoints in it.
 *
 * rumor-peer takes every peer's endpoint in rank order, either as one
 * comma-separated list (--peers) or as a file (--peers-file) of lines
 *     ENDPOINT [PUBLIC-KEY]      # comment
 * where PUBLIC-KEY is 40 Z85 characters or the path of a .pub file. A
 * comment starts with '#' at the beginning of a line or after a space or
 * tab, never inside a word: '#' is in Z85's alphabet, and about 38% of
 * public keys contain one. An entry "-" (either column) means not known:
 * for an endpoint, an address membership learns from the swarm.
 *
 * Every endpoint is checked with rumor_peerlist_check_endpoint: a tcp://
 * endpoint needs a host and a port in 1-65535. ZeroMQ itself takes a
 * larger port modulo 65536 (99999 binds 34463) and port 0 (or '*') as "any
 * free port", which the other peers could not know, so both are refused
 * here, with the endpoint and the valid range in the message. */
#ifndef RUMOR_PEERLIST_H
#define RUMOR_PEERLIST_H

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_PORT_MIN 1
#define RUMOR_PORT_MAX 65535

/* A parsed peer list. The caller owns it (it may live on the stack) and
 * releases it with rumor_peerlist_clear; ep and key point into buf and
 * keybuf, and all four are malloc'd. */
typedef struct rumor_peerlist {
    char **ep;      /* (n) endpoints in rank order; NULL where given as "-" */
    char **key;     /* (n) peers file's second column; NULL where none or "-" */
    int n;          /* peers listed */
    int unknown;    /* entries given as "-" */
    char *buf;      /* storage behind ep */
    char *keybuf;   /* storage behind key */
} rumor_peerlist_t;

/* Checks one endpoint a peer binds, connects to or announces: SCHEME://...
 * without spaces or control characters and, for tcp://, HOST:PORT with a
 * host and a decimal port in 1-65535 (after the last ';' when a source
 * address is given, "tcp://SRC;HOST:PORT"). RUMOR_EINVAL with a message
 * naming the endpoint ("endpoint 'tcp://h:0': port 0 is outside 1-65535");
 * callers add where it came from with rumor_err_prefix. */
int rumor_peerlist_check_endpoint(const char *ep) RUMOR_WUR;

/* Parses "EP0,EP1,..." (--peers) into *pl. RUMOR_EINVAL naming the peer
 * for an empty entry, an endpoint rumor_peerlist_check_endpoint refuses or
 * two peers at one endpoint; *pl is then empty. */
int rumor_peerlist_parse_string(const char *list, rumor_peerlist_t *pl) RUMOR_WUR;

/* Parses a peers file (see the top of this header) into *pl. A key column
 * that names a file beside the peers file (relative to its directory, and
 * there) is taken from there, wherever the program runs. Errors name
 * file:line: RUMOR_EFORMAT for a line that is not "ENDPOINT [KEY]",
 * RUMOR_EINVAL for a bad endpoint or a duplicate, RUMOR_EFORMAT for a file
 * with no entry; RUMOR_ESYS for one that cannot be opened or read (a
 * directory). *pl is empty on error. */
int rumor_peerlist_parse_file(const char *path, rumor_peerlist_t *pl) RUMOR_WUR;

/* Parses rumor-peer --join "[KEY@]ADDRESS,..." (open membership: live
 * peers to join through) into *pl: ep[i] is the address as an endpoint
 * (HOST:PORT becomes tcp://HOST:PORT), key[i] what came before the last
 * '@' (an allow-list name, a Z85 key or a .pub file: the key expected
 * there on a secure swarm) or NULL. RUMOR_EINVAL naming the entry for an
 * empty one, a bad address (rumor_peerlist_check_endpoint), another scheme
 * than tcp://, a repeat or more than RUMOR_JOIN_MAX; *pl is then empty. */
#define RUMOR_JOIN_MAX 64
int rumor_peerlist_parse_join(const char *list, rumor_peerlist_t *pl) RUMOR_WUR;

/* The endpoint to bind for an address a user gave (--listen, or this
 * peer's own entry in the list): tcp://HOST:PORT or HOST:PORT, checked
 * with rumor_peerlist_check_endpoint, into out (cap bytes) as
 * tcp://ADDRESS:PORT. ZeroMQ binds numeric addresses, '*' and interface
 * names only ("tcp://localhost:7000" fails with "No such device"), so a
 * host that is none of these is looked up (getaddrinfo) and its first
 * address taken. RUMOR_EINVAL naming the address for a bad endpoint or a
 * name that does not resolve; other schemes (ipc://, inproc://) are
 * copied as they are. */
int rumor_peerlist_bind_endpoint(const char *given, char *out, size_t cap) RUMOR_WUR;

/* Tries to bind a TCP socket to tcp://ADDRESS:PORT as
 * rumor_peerlist_bind_endpoint gives it (and closes it at once), so that a
 * peer learns before it loads its data whether it can listen there: 0, or
 * RUMOR_EINVAL for an address that is not this machine's (EADDRNOTAVAIL) or
 * an interface that does not exist, RUMOR_ESYS for one in use or refused
 * (EADDRINUSE, EACCES). Other schemes: 0. */
int rumor_peerlist_try_bind(const char *ep) RUMOR_WUR;

/* Frees what a parse allocated and zeroes *pl. Safe on a zeroed list. */
void rumor_peerlist_clear(rumor_peerlist_t *pl);

#ifdef __cplusplus
}
#endif
#endif

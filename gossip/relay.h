/* Relays for peers that cannot be dialled (behind a NAT or a firewall).
 *
 * A relay is a reachable peer (or a process of its own: rumor-peer relay)
 * that splices TCP streams and nothing more. A peer P that others cannot
 * dial registers with a relay over a CurveZMQ control connection that P
 * opens (outbound, so a NAT lets it through). The relay opens a TCP port
 * for P, its "relayed address", which P announces as its own. When a
 * neighbour dials the relayed address, the relay tells P over the control
 * connection; P opens a data connection to the relay's back port, proves
 * with its registration's token which of its waiting neighbours it is for,
 * and connects it to its own listener; from then on the relay copies bytes
 * between the two TCP streams. The neighbour's CurveZMQ handshake is with P
 * itself, end to end: the relay sees only ciphertext and cannot pose as
 * either side (each checks the other's key, as on a direct connection).
 *
 * Control messages (ZeroMQ frames over CURVE; a relay admits only its
 * allow-list's keys, or anyone in plaintext):
 *   P -> relay   "REGISTER"                         ask for a relayed address
 *   relay -> P   "OK" <relayed endpoint> <back endpoint> <32-byte token>
 *   relay -> P   "REFUSED" <reason>                 full, or a bad request
 *   relay -> P   "CONN" <8-byte connection id, little-endian>
 *   P -> relay   "PING"; relay -> P "PONG"          each way's liveness
 *   P -> relay   "BYE"                              the relayed address closes
 * A data connection from P starts with 48 bytes: "RUMORRLY", the token and
 * the connection id; the relay closes one whose token or id is wrong, or
 * that does not send them within 5 s. A registration not heard from for
 * the heartbeat timeout is dropped, its port closed.
 *
 * Direct paths (hole punching) between two peers relayed by one relay: P
 * learns the address its NAT gives a connection from a port of its own
 * (a data connection with "RUMORPRB" and its token instead of "RUMORRLY";
 * the relay answers the address it sees, 64 bytes, and closes), then:
 *   P -> relay   "PUNCH" <8-byte id> <Q's relayed port> <P's address seen>
 *   relay -> Q   "PUNCH" <8-byte relay's id> <P's address seen>
 *   Q -> relay   "PUNCHED" <relay's id> <Q's address seen> | "NOPUNCH" <id>
 *   relay -> P   "PUNCHED" <id> <Q's address seen> | "NOPUNCH" <id> <reason>
 * and P and Q connect to each other's address from the ports they probed
 * at the same time (TCP simultaneous open): each NAT sees its own side's
 * connection go out first, and lets the other's in. The connection is
 * spliced to Q's listener on Q's side and to the local proxy P's mixer
 * dials on P's; CurveZMQ runs end to end over it as over the relay, which
 * stays the fallback. docs/protocol.md section 13 has the whole protocol.
 *
 * Limits a relay gives away: registrations (max_peers), connections
 * waiting or spliced per registration (max_conns) and the bytes a second
 * spliced per registration, both ways together (mbit). */
#ifndef RUMOR_RELAY_H
#define RUMOR_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "curve.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_relay_opts {
    const char *control;        /* the control socket's bind address, tcp://HOST:PORT */
    const char *public_host;    /* the host the relayed addresses name (NULL: control's) */
    int max_peers;              /* registrations at once (default 32) */
    int max_conns;              /* connections per registration (default 64) */
    double mbit;                /* per registration, both ways; 0: no limit */
    int heartbeat_timeout_ms;   /* a silent registration is dropped (default 5000) */
    const rumor_curve_keypair_t *keys;   /* NULL: plaintext (--insecure) */
    const rumor_allowlist_t *allow;      /* required with keys */
    const char *tap;            /* testing: every byte spliced is appended there */
} rumor_relay_opts_t;

typedef struct rumor_relay_stats {
    uint64_t registered, refused_full, refused_key, dropped_silent;
    uint64_t conns_spliced, conns_refused, backs_bad, bytes;
    uint64_t probes, punches;   /* addresses told, hole punches brokered */
    int peers_now, conns_now;
} rumor_relay_stats_t;

typedef struct rumor_relay rumor_relay_t;

/* Binds the control socket and starts the relay's thread. */
int rumor_relay_start(const rumor_relay_opts_t *o, rumor_relay_t **out) RUMOR_WUR;
void rumor_relay_stop(rumor_relay_t **rp);
const char *rumor_relay_endpoint(const rumor_relay_t *r); /* the control address bound */
/* The control address others dial: the public host and the port bound. */
const char *rumor_relay_public_endpoint(const rumor_relay_t *r);
void rumor_relay_stats(rumor_relay_t *r, rumor_relay_stats_t *out);

/* ------------------------------------------------------------ a relayed peer */

#define RUMOR_RELAY_CLIENT_MAX 16  /* relays one peer knows */

typedef struct rumor_relay_client_opts {
    /* the relays' control addresses, tcp://HOST:PORT, in the order tried,
     * and their public keys (secure mode) */
    const char *const *relays;
    const uint8_t *const *relay_keys;
    int nrelays;
    const rumor_curve_keypair_t *keys;  /* this peer's (NULL: plaintext) */
    const char *local;          /* this peer's own listener, where data connections go */
    double timeout;             /* registering waits at most this long (s) */
    int heartbeat_timeout_ms;   /* the relay is dead after this much silence (default 5000) */
    int no_punch;               /* no direct paths: everything through the relay */
} rumor_relay_client_opts_t;

typedef struct rumor_relay_client_stats {
    uint64_t conns, conns_failed, bytes; /* neighbours' connections through the relay */
    uint64_t moved;             /* registered again at another relayed address */
    uint64_t punches, punched;  /* hole punches tried (either side) and made */
    uint64_t direct;            /* connections over punched paths, both ways */
    uint64_t relayed_out;       /* this peer's connections to relayed members, relayed */
    int alive;                  /* the relay answered within the heartbeat timeout */
    int relay;                  /* the index of the relay in use */
} rumor_relay_client_stats_t;

typedef struct rumor_relay_client rumor_relay_client_t;

/* Registers with the first relay that answers, trying each in turn (each
 * for at most o->timeout), and starts the thread that serves the relayed
 * address. The relayed address to announce: rumor_relay_client_endpoint.
 * When the relay falls silent for the heartbeat timeout, the thread
 * registers with the next relay of the list (the same one, alone) and the
 * relayed address changes. Fails as the last relay tried did:
 * RUMOR_ETIMEOUT when it did not answer, RUMOR_EAUTH when it refused (the
 * message says why). */
int rumor_relay_client_start(const rumor_relay_client_opts_t *o,
                             rumor_relay_client_t **out) RUMOR_WUR;
void rumor_relay_client_stop(rumor_relay_client_t **cp);
/* One more relay to fail over to (learned from the membership: a member
 * whose record offers relaying), with its key in secure mode. 1 when
 * added, 0 when known already, RUMOR_EINVAL when the list is full. */
int rumor_relay_client_add(rumor_relay_client_t *c, const char *relay, const uint8_t *key);
/* The relayed address now (it changes when the relay restarted and gave
 * another); returns snprintf's count. */
int rumor_relay_client_endpoint(rumor_relay_client_t *c, char *out, size_t cap);
void rumor_relay_client_stats(rumor_relay_client_t *c, rumor_relay_client_stats_t *out);
/* The address to dial for a member at ep (the transport's dial hook,
 * transport.h): for a member relayed by this peer's relay, a local proxy
 * whose connections go over a direct path once a hole punch made one and
 * through the relay until then (and whenever punching fails); for anyone
 * else, ep itself. Returns snprintf's count. Thread-safe. */
int rumor_relay_client_dial(void *client, const char *ep, char *out, size_t cap);

/* "tcp://HOST:PORT" (HOST may be [v6], * or a name) into host (brackets
 * removed; "" for *) and port. RUMOR_EINVAL naming the endpoint. */
int rumor_endpoint_split(const char *ep, char *host, size_t cap, int *port) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

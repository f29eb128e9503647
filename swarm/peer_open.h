/* Open membership for rumor-peer (--listen without --rank and --peers):
 * what --join, --listen and --advertise become for the mixer (mixer.h,
 * max_peers), this peer's id and names, and the swarm average over the
 * living at the end. */
#ifndef RUMOR_PEER_OPEN_H
#define RUMOR_PEER_OPEN_H

#include <stddef.h>
#include <stdint.h>

#include "curve.h"
#include "mixer.h"
#include "peerlist.h"

typedef struct rumor_peer_open {
    rumor_peerlist_t join;     /* --join: addresses, and the keys named with them */
    const char *join_given;    /* --join as given (NULL: a founder) */
    uint8_t (*key)[32];        /* (join.n) the keys expected there (secure mode) */
    const uint8_t **key_of;    /* (join.n) pointers into key; NULL: not known */
    char advertise[512];       /* the address the others dial */
    uint64_t id;               /* this peer's id: its key's, or random in plaintext */
    char name[32];             /* "peer 1a2b3c4d" (the id's first 8 hex digits) */
    char ckpt_swarm[160];      /* checkpoints: <swarm>-<the id in 16 hex digits> */
} rumor_peer_open_t;

/* Reads --join (NULL: a founder, none), --listen and --advertise (NULL:
 * the listen address, unless it binds every interface) and sets the id:
 * the key's on a secure swarm (keys non-NULL), else a random one. Seed
 * keys named with '@' are looked up in allow (a name, a Z85 key or a .pub
 * file) and must be on it. RUMOR_EINVAL with a message naming the option. */
int rumor_peer_open_init(rumor_peer_open_t *po, const char *join, const char *listen,
                         const char *advertise, const char *swarm,
                         const rumor_curve_keypair_t *keys,
                         const rumor_allowlist_t *allow) RUMOR_WUR;
void rumor_peer_open_free(rumor_peer_open_t *po);

/* A key named at an address of `flag` (--join, --relay-via; the i-th
 * address): an allow-list name, 40 Z85 characters or a .pub file, on the
 * allow-list. RUMOR_EINVAL naming the flag and the address. */
int rumor_peer_open_key(const char *text, const char *flag, int i,
                        const rumor_allowlist_t *allow, uint8_t pk[32]) RUMOR_WUR;

/* The swarm's average of x (n floats) into avg: a ring all-reduce over the
 * peers alive (mixer.h). A call whose ring broke (a peer died during it,
 * or views disagreed) fails after `timeout`; it is tried again, up to
 * `tries` times in all, each with the next tag, over the peers alive then.
 * 0, or the last failure. */
int rumor_peer_average(rumor_mixer_t *m, const float *x, float *avg, size_t n, long tag,
                       double timeout, int tries) RUMOR_WUR;

#endif

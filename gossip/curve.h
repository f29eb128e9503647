/* CurveZMQ for gossip: keypairs and key files, the swarm's allow-list and a
 * ZAP handler (ZeroMQ RFC 27) that admits only allow-listed keys.
 *
 * Why a ZAP handler: a CURVE server socket without one encrypts but admits
 * every client that knows the server's public key, whatever the client's
 * own key (measured: 100/100 random keys got in). With rumor_zap_start
 * running in a context before any of its sockets binds, a CURVE server
 * socket of that context admits a client only after the handler said yes,
 * and every message it then receives carries the client's key as its
 * "User-Id" property (zmq_msg_gets): the 40-character Z85 text of the
 * client's long-term public key. A peer's id is derived from that key
 * (rumor_curve_id), so a receiver can check that the sender id in a
 * message header is the id of the key that connection authenticated.
 *
 * Key files (rumor_curve_write_keys), zcert-like text:
 *     # rumor CURVE secret key: keep it private (mode 0600)
 *     public-key = "<40 Z85 characters>"
 *     secret-key = "<40 Z85 characters>"
 * PREFIX.key holds both lines (mode 0600), PREFIX.pub only the public one
 * (0644). Readers also take CZMQ's zcert files ("curve" and "metadata"
 * section lines, indented fields) and, for public keys, a bare Z85 line.
 *
 * An allow-list file holds one public key a line: "<z85>" or "<z85> name",
 * blank lines ignored. In key and allow-list files a comment starts with
 * '#' at the beginning of a line or after a blank (outside double quotes):
 * '#' is in Z85's alphabet, so a '#' inside a key is part of it. An
 * allow-list may also be a single key file (PREFIX.pub: a list of one key,
 * named PREFIX's last part) or a directory, meaning every "*.pub" file in
 * it, each named by its file name without ".pub". */
#ifndef RUMOR_CURVE_H
#define RUMOR_CURVE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_CURVE_KEY_BYTES 32
#define RUMOR_CURVE_Z85_LEN 40          /* Z85 text of a key, without the NUL */
#define RUMOR_CURVE_MSG_OVERHEAD 33     /* bytes CURVE adds to every frame on the wire */
#define RUMOR_ALLOWLIST_MAX (1 << 20)   /* keys in one allow-list */
#define RUMOR_ALLOWLIST_NAME_MAX 63     /* characters of a key's name */

/* A Curve25519 keypair, raw and as Z85 text. A public-only keypair (as
 * read from a .pub file) has has_secret 0 and zeroed secret fields.
 * Clear it with rumor_curve_keypair_clear when done: it holds a secret. */
typedef struct rumor_curve_keypair {
    uint8_t public_key[RUMOR_CURVE_KEY_BYTES];
    uint8_t secret_key[RUMOR_CURVE_KEY_BYTES];
    char public_z85[RUMOR_CURVE_Z85_LEN + 1];
    char secret_z85[RUMOR_CURVE_Z85_LEN + 1];
    int has_secret;
} rumor_curve_keypair_t;

/* ------------------------------------------------------------ keys */

/* A fresh keypair from libsodium (crypto_box_keypair). RUMOR_ESYS when
 * libsodium cannot initialize. */
int rumor_curve_keygen(rumor_curve_keypair_t *kp) RUMOR_WUR;

/* Fills kp from a raw secret key (the public key is derived from it). */
int rumor_curve_keypair_from_secret(rumor_curve_keypair_t *kp,
                                    const uint8_t secret[RUMOR_CURVE_KEY_BYTES]) RUMOR_WUR;

/* Wipes kp (sodium_memzero). Safe on a zeroed or already cleared keypair. */
void rumor_curve_keypair_clear(rumor_curve_keypair_t *kp);

/* Z85 text of a 32-byte key: out gets 40 characters and a NUL. */
void rumor_curve_z85_encode(const uint8_t key[RUMOR_CURVE_KEY_BYTES],
                            char out[RUMOR_CURVE_Z85_LEN + 1]);

/* Decodes exactly 40 Z85 characters at z85 (no terminator needed after
 * them) into key. RUMOR_EINVAL (key untouched) for a character outside the
 * Z85 alphabet or a group whose value overflows 32 bits. */
int rumor_curve_z85_decode(const char *z85, uint8_t key[RUMOR_CURVE_KEY_BYTES]) RUMOR_WUR;

/* The peer id of a public key: rumor_wire_peer_id(pk) (gossip/wire.h), the
 * sender id a peer with this key puts in its message headers. Never 0. */
uint64_t rumor_curve_id(const uint8_t pk[RUMOR_CURVE_KEY_BYTES]);

/* ------------------------------------------------------- key files */

/* Writes kp (which must hold a secret) to PREFIX.key (mode 0600, created
 * with O_EXCL) and PREFIX.pub (mode 0644); when prefix names an existing
 * directory the files are DIR/peer.key and DIR/peer.pub. An existing file
 * is refused (RUMOR_EINVAL, nothing written) unless force, which replaces
 * both. RUMOR_ESYS naming the path when a file cannot be written. */
int rumor_curve_write_keys(const char *prefix, const rumor_curve_keypair_t *kp,
                           int force) RUMOR_WUR;

/* Reads a secret key file into kp. Refuses (RUMOR_EAUTH) a file that group
 * or others may read or write (mode & 077), and (RUMOR_EFORMAT, naming
 * file:line) malformed content, a missing secret-key line, or a public-key
 * line that does not match the secret. A public key file (PREFIX.pub) is
 * refused as such (RUMOR_EFORMAT, naming PREFIX.key), whatever its mode. */
int rumor_curve_read_keys(const char *path, rumor_curve_keypair_t *kp) RUMOR_WUR;

/* Reads a public key from a .pub file, a key file's public-key line, or a
 * file whose only content is a bare 40-character Z85 line. Errors name
 * file:line (RUMOR_EFORMAT) or the path (RUMOR_ESYS). */
int rumor_curve_read_public(const char *path, uint8_t pk[RUMOR_CURVE_KEY_BYTES]) RUMOR_WUR;

/* ------------------------------------------------------- allow-list */

/* A set of public keys, each with an optional name. Sorted at all times,
 * so lookups never write: any number of threads may look up at once while
 * nobody adds. */
typedef struct rumor_allowlist rumor_allowlist_t;

/* An empty list. */
int rumor_allowlist_new(rumor_allowlist_t **out) RUMOR_WUR;

/* Loads path: an allow-list file, a single .pub file or a directory of
 * *.pub files (see the top of this header). An empty result is an error (it
 * would admit nobody), and so is a secret key file (RUMOR_EINVAL). Errors
 * name file:line (RUMOR_EFORMAT), or the path (RUMOR_ESYS). */
int rumor_allowlist_load(const char *path, rumor_allowlist_t **out) RUMOR_WUR;

/* Adds a key (name may be NULL). Adding a key already present keeps the
 * first name and returns 0. RUMOR_EINVAL past RUMOR_ALLOWLIST_MAX keys or
 * for a name longer than RUMOR_ALLOWLIST_NAME_MAX or with control
 * characters. */
int rumor_allowlist_add(rumor_allowlist_t *al, const uint8_t pk[RUMOR_CURVE_KEY_BYTES],
                        const char *name) RUMOR_WUR;

/* A copy (NULL when out of memory). */
rumor_allowlist_t *rumor_allowlist_dup(const rumor_allowlist_t *al);

void rumor_allowlist_destroy(rumor_allowlist_t **alp);

size_t rumor_allowlist_count(const rumor_allowlist_t *al);

/* 1 if pk is on the list, else 0. */
int rumor_allowlist_contains(const rumor_allowlist_t *al, const uint8_t pk[RUMOR_CURVE_KEY_BYTES]);

/* The name given to pk ("" when none), or NULL when pk is not listed. */
const char *rumor_allowlist_name(const rumor_allowlist_t *al,
                                 const uint8_t pk[RUMOR_CURVE_KEY_BYTES]);

/* The key named `name` (a directory's "peer-3.pub" is named "peer-3"):
 * 1 and *pk set, or 0 when no key has that name. */
int rumor_allowlist_lookup_name(const rumor_allowlist_t *al, const char *name,
                                uint8_t pk[RUMOR_CURVE_KEY_BYTES]);

/* The key whose peer id (rumor_curve_id) is `id`: 1 and *pk set, or 0
 * when no listed key has it (open membership: a member SWIM announces is
 * dialled with the key its id stands for). A scan of the list. */
int rumor_allowlist_lookup_id(const rumor_allowlist_t *al, uint64_t id,
                              uint8_t pk[RUMOR_CURVE_KEY_BYTES]);

/* The i-th key in the list's order (0 <= i < count): 1 and *pk set, else 0. */
int rumor_allowlist_key_at(const rumor_allowlist_t *al, size_t i,
                           uint8_t pk[RUMOR_CURVE_KEY_BYTES]);

/* ------------------------------------------------------ ZAP handler */

typedef struct rumor_zap rumor_zap_t;

/* What the handler decided since it started. */
typedef struct rumor_zap_stats {
    uint64_t admitted;          /* CURVE, key on the list: 200 */
    uint64_t denied_not_listed; /* CURVE, key not on the list: 400 */
    uint64_t denied_mechanism;  /* NULL, PLAIN, GSSAPI, ...: 400 */
    uint64_t malformed;         /* not an RFC 27 request: 400 (or dropped) */
} rumor_zap_stats_t;

/* Binds a REP socket at inproc://zeromq.zap.01 in ctx and starts a thread
 * that answers ZAP requests: status 200 with User-Id = the Z85 text of the
 * client's public key for mechanism "CURVE" and a listed key; 400 for
 * everything else. Keeps its own copy of allow (the caller may destroy
 * its own at once). Call it before any socket of ctx binds or connects:
 * a CURVE socket that handshakes while no handler is bound admits anyone.
 * RUMOR_ESYS when ctx already has a ZAP handler (EADDRINUSE). */
int rumor_zap_start(void *ctx, const rumor_allowlist_t *allow, rumor_zap_t **out) RUMOR_WUR;

/* Stops the thread and closes its sockets. Close every socket of the
 * context that authenticates through it first: once the handler is gone,
 * a CURVE server socket would admit anyone again. Safe on NULL. */
void rumor_zap_stop(rumor_zap_t **zp);

/* The counters, read atomically (any thread). Zeros when z is NULL. */
void rumor_zap_stats(const rumor_zap_t *z, rumor_zap_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif

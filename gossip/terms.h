/* Terms: the settings every peer of a swarm must share, and the check that
 * two peers share them.
 *
 * Some settings only work when every peer has the same: the model (the
 * flat parameter space and what each offset means), the gossip codec and
 * its keyframe interval (each round's dtype), the local steps a round
 * holds, the outer optimizer, the mode. Peers that differ would each drop
 * the other's messages, or worse mix them, and run to the end saying
 * nothing. So each peer sends its terms in the body of every HELLO
 * (docs/protocol.md, section 3) and compares a neighbour's with its own:
 * a neighbour whose terms differ is not mixed with, and the difference is
 * said once, naming the setting, both values and the neighbour.
 *
 * The body is text: lines "KEY=VALUE\n", KEY an option name without its
 * dashes ("compress", "local-steps"), VALUE printable ASCII without '='
 * restrictions, at most RUMOR_TERMS_MAX bytes in all. A key only one side
 * sends is ignored (a newer peer may add terms an older one does not
 * know), so only what both sides state is compared. */
#ifndef RUMOR_TERMS_H
#define RUMOR_TERMS_H

#include <stddef.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_TERMS_MAX 4096 /* bytes of a HELLO's terms body */
#define RUMOR_TERMS_KEY_MAX 32
#define RUMOR_TERMS_VALUE_MAX 512

/* Checks that body (len bytes, not terminated) is well-formed terms: every
 * line KEY=VALUE ending in '\n', KEY of [a-z0-9-] (1..32 bytes), VALUE of
 * printable ASCII (0..512 bytes), no key twice. 0, or RUMOR_EPROTO naming
 * the line. */
int rumor_terms_check(const void *body, size_t len) RUMOR_WUR;

/* The first term two peers state differently. */
typedef struct rumor_terms_diff {
    char key[RUMOR_TERMS_KEY_MAX + 1];
    char theirs[RUMOR_TERMS_VALUE_MAX + 1], mine[RUMOR_TERMS_VALUE_MAX + 1];
} rumor_terms_diff_t;

/* Compares this peer's terms (mine, a well-formed NUL-terminated text)
 * with a neighbour's (theirs, len bytes, checked by rumor_terms_check).
 * Returns 0 when every key both state has the same value, 1 when one
 * differs (the first, in mine's order, into *diff when not NULL);
 * RUMOR_EPROTO when theirs is not well-formed. */
int rumor_terms_compare(const char *mine, const void *theirs, size_t len,
                        rumor_terms_diff_t *diff) RUMOR_WUR;

/* KEY's value in body (len bytes, checked as rumor_terms_check does) into
 * out (cap bytes, NUL-terminated): 1 when stated, 0 when not; RUMOR_EPROTO
 * when body is not well-formed, RUMOR_EINVAL when the value does not fit. */
int rumor_terms_get(const void *body, size_t len, const char *key, char *out,
                    size_t cap) RUMOR_WUR;

/* Appends "KEY=VALUE\n" to the terms in buf (cap bytes, NUL-terminated).
 * RUMOR_EINVAL for a key or value that rumor_terms_check would refuse or
 * when it does not fit. */
int rumor_terms_add(char *buf, size_t cap, const char *key, const char *value) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

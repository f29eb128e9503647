/* Open membership for rumor-peer (see peer_open.h). */
#include "peer_open.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

int rumor_peer_open_key(const char *text, const char *flag, int i,
                        const rumor_allowlist_t *allow, uint8_t pk[32])
{
    if (rumor_allowlist_lookup_name(allow, text, pk))
        return 0;
    if (strlen(text) == RUMOR_CURVE_Z85_LEN && rumor_curve_z85_decode(text, pk) == 0)
        ;
    else if (rumor_curve_read_public(text, pk) < 0)
        return rumor_err_set(RUMOR_EINVAL, "%s address %d: '%s' is no name on the allow-list, "
                                           "no Z85 key and no readable .pub file", flag, i, text);
    if (!rumor_allowlist_contains(allow, pk))
        return rumor_err_set(RUMOR_EINVAL, "%s address %d: key '%s' is not on the allow-list",
                             flag, i, text);
    return 0;
}

/* --advertise, or --listen when it names an address others can dial. */
static int advertised(rumor_peer_open_t *po, const char *listen, const char *advertise)
{
    const char *a = advertise ? advertise : listen;
    if (!a)
        return rumor_err_set(RUMOR_EINVAL, "open membership needs --listen ADDR (the address "
                                           "to bind; without --rank and --peers a peer joins "
                                           "the swarm through --join HOST:PORT)");
    rumor_peerlist_t one;
    if (rumor_peerlist_parse_join(a, &one) < 0 || one.n != 1 || one.key[0]) {
        if (one.n)
            rumor_err_set(RUMOR_EINVAL, "expected one address");
        rumor_peerlist_clear(&one);
        return rumor_err_prefix(RUMOR_EINVAL, advertise ? "--advertise" : "--listen");
    }
    snprintf(po->advertise, sizeof po->advertise, "%s", one.ep[0]);
    rumor_peerlist_clear(&one);
    if (!advertise && (strstr(po->advertise, "://*") || strstr(po->advertise, "://0.0.0.0") ||
                       strstr(po->advertise, "://[::]")))
        return rumor_err_set(RUMOR_EINVAL, "--listen %s binds every interface: say which address "
                                           "the others reach this peer at with --advertise "
                                           "HOST:PORT", listen);
    return 0;
}

int rumor_peer_open_init(rumor_peer_open_t *po, const char *join, const char *listen,
                         const char *advertise, const char *swarm,
                         const rumor_curve_keypair_t *keys, const rumor_allowlist_t *allow)
{
    memset(po, 0, sizeof *po);
    po->join_given = join;
    RUMOR_CHECK(advertised(po, listen, advertise));
    if (join && rumor_peerlist_parse_join(join, &po->join) < 0)
        return rumor_err_prefix(RUMOR_EINVAL, "--join");
    int n = po->join.n;
    po->key = calloc((size_t)n + 1, sizeof *po->key);
    po->key_of = calloc((size_t)n + 1, sizeof *po->key_of);
    if (!po->key || !po->key_of)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (!po->join.key[i])
            continue;
        if (!keys) {
            rumor_warn("--join %s: a key named in plaintext (--insecure) is ignored",
                       po->join.ep[i]);
            continue;
        }
        RUMOR_CHECK(rumor_peer_open_key(po->join.key[i], "--join", i, allow, po->key[i]));
        po->key_of[i] = po->key[i];
    }
    if (keys)
        po->id = rumor_curve_id(keys->public_key);
    while (!po->id)
        randombytes_buf(&po->id, sizeof po->id);
    snprintf(po->name, sizeof po->name, "peer %08llx", (unsigned long long)(po->id >> 32));
    snprintf(po->ckpt_swarm, sizeof po->ckpt_swarm, "%.120s-%016llx", swarm,
             (unsigned long long)po->id);
    return 0;
}

void rumor_peer_open_free(rumor_peer_open_t *po)
{
    rumor_peerlist_clear(&po->join);
    free(po->key);
    free(po->key_of);
    memset(po, 0, sizeof *po);
}

int rumor_peer_average(rumor_mixer_t *m, const float *x, float *avg, size_t n, long tag,
                       double timeout, int tries)
{
    int rc = 0;
    for (int i = 0; i < tries; i++) {
        memcpy(avg, x, n * sizeof *avg);
        rc = rumor_mixer_allreduce_mean(m, avg, n, tag + i, timeout, 0);
        if (rc == 0)
            return 0;
        if (i + 1 < tries)
            rumor_warn("swarm average: %s; once more over the %d peers alive now",
                       rumor_err_msg(), rumor_mixer_members(m));
    }
    return rc;
}

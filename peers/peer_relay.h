/* rumor-peer's relays (gossip/relay.h): --relay (this peer relays for
 * others), --relay-via (this peer is reached through a relay) and the
 * subcommand `rumor-peer relay` (a relay and nothing else). */
#ifndef RUMOR_PEERS_PEER_RELAY_H
#define RUMOR_PEERS_PEER_RELAY_H

#include <stddef.h>

#include "curve.h"
#include "relay.h"

/* --relay PORT|HOST:PORT beside a peer listening at listen_ep and reached
 * at advertise: the relay's control socket binds listen's host at PORT
 * (or HOST:PORT), and the relayed addresses name advertise's host.
 * Prints where it relays. 2 on bad usage, 1 on failure, -1 when running. */
int peer_relay_serve(const char *given, int max_peers, double mbit, const char *listen_ep,
                     const char *advertise, const rumor_curve_keypair_t *keys,
                     const rumor_allowlist_t *allow, rumor_relay_t **out);

/* --relay-via LIST (NAME@HOST:PORT, ...): registers with the first relay
 * that answers (each tried for at most `timeout` s) and writes the relayed
 * address into advertise. Returns -1 when registered, else an exit status
 * (2: bad usage, 1: no relay answered), said on stderr. */
int peer_relay_register(const char *via, const char *listen_ep, const rumor_curve_keypair_t *keys,
                        const rumor_allowlist_t *allow, double timeout, int no_punch,
                        char *advertise, size_t cap, rumor_relay_client_t **out);

/* The final lines: what the relay served, what came through the relay. */
void peer_relay_report(const char *name, rumor_relay_t *relay, rumor_relay_client_t *client);

/* rumor-peer relay [options]: a relay until SIGTERM or SIGINT. */
int peer_relay_main(int argc, char **argv);

#endif

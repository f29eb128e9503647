/* rumor-peer's relays (see peer_relay.h). */
#include "peer_relay.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "peer_open.h"
#include "peerlist.h"

/* "tcp://HOST:PORT" with host in brackets where it is IPv6. */
static void endpoint_of(char *out, size_t cap, const char *host, int port)
{
    snprintf(out, cap, strchr(host, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", host[0] ? host : "*",
             port);
}

/* --relay's control address: PORT on listen's host, or HOST:PORT. */
static int control_address(const char *given, const char *listen_ep, char *out, size_t cap)
{
    char host[256];
    int port;
    char *end;
    long p = strtol(given, &end, 10);
    if (!*end && end != given) {
        if (p < 1 || p > 65535)
            return rumor_err_set(RUMOR_EINVAL, "--relay %s: a port is 1 to 65535", given);
        RUMOR_CHECK(rumor_endpoint_split(listen_ep, host, sizeof host, &port));
        endpoint_of(out, cap, host, (int)p);
        return 0;
    }
    rumor_peerlist_t one;
    if (rumor_peerlist_parse_join(given, &one) < 0 || one.n != 1 || one.key[0]) {
        rumor_peerlist_clear(&one);
        return rumor_err_set(RUMOR_EINVAL, "--relay %s: give PORT (on --listen's address) or "
                                           "HOST:PORT", given);
    }
    snprintf(out, cap, "%s", one.ep[0]);
    rumor_peerlist_clear(&one);
    return 0;
}

static int tap_warned;

static const char *tap_path(void)
{
    const char *t = getenv("RUMOR_RELAY_TAP");
    if (t && *t && !tap_warned) {
        rumor_warn("RUMOR_RELAY_TAP: every byte this relay splices is copied to %s", t);
        tap_warned = 1;
    }
    return t && *t ? t : NULL;
}

int peer_relay_serve(const char *given, int max_peers, double mbit, const char *listen_ep,
                     const char *advertise, const rumor_curve_keypair_t *keys,
                     const rumor_allowlist_t *allow, rumor_relay_t **out)
{
    char control[300], public_host[256];
    int port;
    if (control_address(given, listen_ep, control, sizeof control) < 0 ||
        rumor_endpoint_split(advertise, public_host, sizeof public_host, &port) < 0) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        return 2;
    }
    rumor_relay_opts_t o = { .control = control, .public_host = public_host,
                             .max_peers = max_peers, .mbit = mbit, .keys = keys,
                             .allow = allow, .tap = tap_path() };
    if (rumor_relay_start(&o, out) < 0) {
        fprintf(stderr, "rumor-peer: --relay: %s\n", rumor_err_msg());
        return 1;
    }
    rumor_info("relaying for peers that cannot be dialled: control at %s, relayed addresses on %s",
               rumor_relay_endpoint(*out), public_host);
    return -1;
}

int peer_relay_register(const char *via, const char *listen_ep, const rumor_curve_keypair_t *keys,
                        const rumor_allowlist_t *allow, double timeout, int no_punch,
                        char *advertise, size_t cap, rumor_relay_client_t **out)
{
    rumor_peerlist_t pl;
    if (rumor_peerlist_parse_join(via, &pl) < 0) {
        fprintf(stderr, "rumor-peer: --relay-via: %s\n", rumor_err_msg());
        return 2;
    }
    int rc = -1;
    uint8_t(*pk)[32] = calloc((size_t)pl.n + 1, sizeof *pk);
    const uint8_t **keyp = calloc((size_t)pl.n + 1, sizeof *keyp);
    if (!pk || !keyp || pl.n > RUMOR_RELAY_CLIENT_MAX) {
        fprintf(stderr, "rumor-peer: --relay-via: %s\n", pk && keyp ? "at most 16 relays"
                                                                      : "out of memory");
        rc = 2;
    }
    for (int i = 0; rc < 0 && keys && i < pl.n; i++) {
        if (!pl.key[i]) {
            fprintf(stderr, "rumor-peer: --relay-via address %d (%s): name the relay's key, "
                            "NAME@HOST:PORT (an allow-list name, a Z85 key or a .pub file)\n",
                    i, pl.ep[i]);
            rc = 2;
        } else if (rumor_peer_open_key(pl.key[i], "--relay-via", i, allow, pk[i]) < 0) {
            fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
            rc = 2;
        }
        keyp[i] = pk[i];
    }
    if (rc < 0) {
        rumor_relay_client_opts_t o = { .relays = (const char *const *)pl.ep,
                                        .relay_keys = keys ? keyp : NULL, .nrelays = pl.n,
                                        .keys = keys, .local = listen_ep, .timeout = timeout,
                                        .no_punch = no_punch };
        if (rumor_relay_client_start(&o, out) == 0) {
            rumor_relay_client_endpoint(*out, advertise, cap);
            rumor_info("reached through a relay at %s", advertise);
        } else {
            fprintf(stderr, "rumor-peer: --relay-via: %s\n", rumor_err_msg());
            rc = rumor_err_code() == RUMOR_EINVAL ? 2 : 1;
        }
    }
    free(pk);
    free(keyp);
    if (rc == 1)
        fprintf(stderr, "rumor-peer: --relay-via %s: no relay took this peer; the others cannot "
                        "reach it\n", via);
    rumor_peerlist_clear(&pl);
    return rc;
}

void peer_relay_report(const char *name, rumor_relay_t *relay, rumor_relay_client_t *client)
{
    if (relay) {
        rumor_relay_stats_t s;
        rumor_relay_stats(relay, &s);
        printf("%s: relayed for %llu peers: %llu connections spliced, %.1f MB; refused: "
               "%llu keys, %llu when full, %llu connections, %llu bad data connections; "
               "%llu dropped as silent; %llu hole punches brokered\n",
               name, (unsigned long long)s.registered, (unsigned long long)s.conns_spliced,
               s.bytes / 1e6, (unsigned long long)s.refused_key,
               (unsigned long long)s.refused_full, (unsigned long long)s.conns_refused,
               (unsigned long long)s.backs_bad, (unsigned long long)s.dropped_silent,
               (unsigned long long)s.punches);
    }
    if (client) {
        rumor_relay_client_stats_t s;
        rumor_relay_client_stats(client, &s);
        char ep[300];
        rumor_relay_client_endpoint(client, ep, sizeof ep);
        printf("%s: reached through a relay at %s: %llu neighbours' connections, %.1f MB "
               "received through it%s\n",
               name, ep, (unsigned long long)s.conns, s.bytes / 1e6,
               s.alive ? "" : "; the relay is silent now");
        printf("%s: connections with peers behind the same relay: %llu direct, %llu relayed; "
               "hole punches: %llu of %llu made a direct path\n",
               name, (unsigned long long)s.direct, (unsigned long long)s.relayed_out,
               (unsigned long long)s.punched, (unsigned long long)s.punches);
    }
    fflush(stdout);
}

/* ------------------------------------------------------ rumor-peer relay */

static volatile sig_atomic_t relay_stop;

static void on_relay_signal(int sig)
{
    relay_stop = sig;
}

static int relay_usage(const char *msg)
{
    fprintf(stderr, "rumor-peer relay: %s\nTry 'rumor-peer relay --help'.\n", msg);
    return 2;
}

static const char relay_help[] =
    "Usage: rumor-peer relay --listen ADDR [--advertise HOST] (--keys FILE --allow PATH |\n"
    "                        --insecure) [--max-peers N] [--mbit R] [--status-every S]\n"
    "A relay and nothing else: peers that cannot be dialled (behind a NAT or a\n"
    "firewall) register with it (rumor-peer --relay-via NAME@HOST:PORT) and are\n"
    "reached at a port it opens for each. It splices TCP streams: the CurveZMQ\n"
    "handshake runs between the peers themselves, so the relay sees only ciphertext\n"
    "and cannot pose as either side. Runs until SIGTERM or SIGINT.\n"
    "  --listen ADDR       the control address to bind, HOST:PORT (tcp://*:PORT: every\n"
    "                      interface; the relayed ports open on the same one)\n"
    "  --advertise HOST    the host the relayed addresses name (default: --listen's;\n"
    "                      required when --listen binds every interface)\n"
    "  --keys FILE         this relay's secret key (rumor-peer keygen); the peers name\n"
    "                      its public key in --relay-via\n"
    "  --allow PATH        the keys that may register (the swarm's allow-list)\n"
    "  --insecure          plaintext control: anyone may register\n"
    "  --max-peers N       peers relayed at once (default: 32)\n"
    "  --max-conns N       connections per relayed peer (default: 64)\n"
    "  --mbit R            bytes spliced per relayed peer, both ways, in Mbit/s\n"
    "                      (default: no limit)\n"
    "  --status-every S    a status line every S seconds, 0 for none (default: 10)\n"
    "RUMOR_RELAY_TAP=FILE (testing) copies every byte spliced to FILE.\n";

static int relay_args(int argc, char **argv, rumor_relay_opts_t *o, const char **listen,
                      const char **advertise, const char **keys, const char **allow,
                      int *insecure, double *status)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(relay_help, stdout);
            return 0;
        }
        if (!strcmp(a, "--insecure")) {
            *insecure = 1;
            continue;
        }
        if (i + 1 >= argc || a[0] != '-')
            return relay_usage(a[0] == '-' ? "an option without its value" : "unexpected argument");
        const char *v = argv[++i];
        char *end;
        double d = strtod(v, &end);
        int num = *end == 0 && end != v;
        if (!strcmp(a, "--listen"))
            *listen = v;
        else if (!strcmp(a, "--advertise"))
            *advertise = v;
        else if (!strcmp(a, "--keys"))
            *keys = v;
        else if (!strcmp(a, "--allow"))
            *allow = v;
        else if (!strcmp(a, "--max-peers") && num && d >= 1 && d <= 4096)
            o->max_peers = (int)d;
        else if (!strcmp(a, "--max-conns") && num && d >= 1 && d <= 4096)
            o->max_conns = (int)d;
        else if (!strcmp(a, "--mbit") && num && d > 0 && d <= 1e7)
            o->mbit = d;
        else if (!strcmp(a, "--status-every") && num && d >= 0 && d <= 86400)
            *status = d;
        else {
            char msg[160];
            snprintf(msg, sizeof msg, "%s %s: unknown option or a value out of range", a, v);
            return relay_usage(msg);
        }
    }
    if (!*listen)
        return relay_usage("--listen ADDR is required (the control address)");
    if (!*insecure && (!*keys || !*allow))
        return relay_usage("give --keys and --allow (who may register), or --insecure");
    return -1;
}

int peer_relay_main(int argc, char **argv)
{
    rumor_relay_opts_t o = { 0 };
    const char *listen = NULL, *advertise = NULL, *keys_path = NULL, *allow_path = NULL;
    int insecure = 0;
    double status = 10;
    int rc = relay_args(argc, argv, &o, &listen, &advertise, &keys_path, &allow_path, &insecure,
                        &status);
    if (rc >= 0)
        return rc;
    char control[300], host[256], public_host[256];
    int port;
    rumor_peerlist_t one;
    if (rumor_peerlist_parse_join(listen, &one) < 0 || one.n != 1 || one.key[0]) {
        rumor_peerlist_clear(&one);
        return relay_usage("--listen: expected HOST:PORT or tcp://HOST:PORT");
    }
    snprintf(control, sizeof control, "%s", one.ep[0]);
    rumor_peerlist_clear(&one);
    if (rumor_endpoint_split(control, host, sizeof host, &port) < 0)
        return relay_usage(rumor_err_msg());
    snprintf(public_host, sizeof public_host, "%s", host);
    if (advertise) { /* a host: a name, an IPv4 address or an IPv6 one in brackets */
        size_t n = strlen(advertise);
        if (advertise[0] == '[' && n > 2 && advertise[n - 1] == ']')
            snprintf(public_host, sizeof public_host, "%.*s", (int)(n - 2), advertise + 1);
        else if (n && n < sizeof public_host && !strchr(advertise, ':') && !strchr(advertise, '/'))
            snprintf(public_host, sizeof public_host, "%s", advertise);
        else
            return relay_usage("--advertise HOST: a host name or address, no port (an IPv6 "
                               "address in brackets)");
    }
    if (!public_host[0])
        return relay_usage("--listen binds every interface: say which host the peers dial with "
                           "--advertise HOST");
    rumor_curve_keypair_t keys = { 0 };
    rumor_allowlist_t *allow = NULL;
    if (insecure) {
        fprintf(stderr, "rumor-peer relay: WARNING: --insecure: anyone may register\n");
    } else if (rumor_curve_read_keys(keys_path, &keys) < 0 ||
               rumor_allowlist_load(allow_path, &allow) < 0) {
        fprintf(stderr, "rumor-peer relay: %s\n", rumor_err_msg());
        rumor_curve_keypair_clear(&keys);
        return 2;
    }
    o.control = control;
    o.public_host = public_host;
    o.keys = insecure ? NULL : &keys;
    o.allow = allow;
    o.tap = tap_path();
    rumor_relay_t *r = NULL;
    rc = rumor_relay_start(&o, &r);
    rumor_curve_keypair_clear(&keys);
    rumor_allowlist_destroy(&allow);
    if (rc < 0) {
        fprintf(stderr, "rumor-peer relay: %s\n", rumor_err_msg());
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_relay_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("rumor-peer relay: control at %s (key %s), relayed addresses on %s\n",
           rumor_relay_endpoint(r), insecure ? "none: plaintext" : keys_path, public_host);
    fflush(stdout);
    double t0 = rumor_now(), last = t0;
    uint64_t last_bytes = 0;
    while (!relay_stop) {
        rumor_sleep(0.2);
        double now = rumor_now();
        if (status > 0 && now - last >= status) {
            rumor_relay_stats_t s;
            rumor_relay_stats(r, &s);
            printf("rumor-peer relay: %d peers, %d connections, %.1f MB spliced (%.2f MB/s), "
                   "up %.0f s\n", s.peers_now, s.conns_now, s.bytes / 1e6,
                   (double)(s.bytes - last_bytes) / 1e6 / (now - last), now - t0);
            fflush(stdout);
            last = now;
            last_bytes = s.bytes;
        }
    }
    peer_relay_report("rumor-peer relay", r, NULL);
    rumor_relay_stop(&r);
    return 0;
}

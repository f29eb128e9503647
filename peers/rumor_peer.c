/* rumor-peer: one peer of a swarm that trains one model with D-PSGD.
 *
 * Every peer runs the same program with the same list of peers, the same
 * topology and the same seed, and its own --rank (or, in an open swarm,
 * joins through any live peer). The peer object (swarm/peer.h) runs the
 * rounds; this program reads the options (peer_opts.c), the peer list and
 * the keys, serves the Prometheus metrics, stops the peer on SIGTERM or
 * SIGINT, and prints the result. */
#include "config.h"

#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "blas_tune.h"
#include "dirs.h"
#include "log.h"
#include "peer.h"
#include "peer_open.h"
#include "peer_opts.h"
#include "peer_relay.h"
#ifdef RUMOR_ATTACKER
/* tests/attack.c (tests/rumor-attacker, the test suite's lying peer): sets
 * mc's tamper hook from RUMOR_ATTACK; -1, said, when unset or bad */
int attack_setup(rumor_mixer_config_t *mc);
#endif
#include "peerlist.h"
#include "promserve.h"
#include "topology.h"

/* The peer list, from --peers (commas) or --peers-file (lines), and the
 * --listen address: gossip/peerlist.c parses them and refuses a port outside
 * 1-65535 (ZeroMQ would wrap it) or 0 (an ephemeral port: the others dial
 * the listed endpoint, so they could not reach it). */
static int read_peers(const struct options *o, rumor_peerlist_t *pl)
{
    memset(pl, 0, sizeof *pl);
    if (!!o->peers == !!o->peers_file)
        return rumor_err_set(RUMOR_EINVAL, "give the peer list with exactly one of --peers and "
                                           "--peers-file");
    return o->peers ? rumor_peerlist_parse_string(o->peers, pl)
                    : rumor_peerlist_parse_file(o->peers_file, pl);
}

/* Everything a peer owns, released in one place. */

/* Everything the program owns, released in one place. */
struct peer {
    rumor_peerlist_t pl;
    rumor_topo_t *topo;
    rumor_curve_keypair_t *keys;
    uint8_t (*peer_keys)[32];
    rumor_allowlist_t *allow;
    rumor_prom_t *prom;       /* --metrics-listen: Prometheus metrics */
    rumor_peer_open_t open;   /* open membership (no --rank): --join, the id */
    int is_open;
    rumor_peer_t *peer;
    rumor_relay_t *relay;                 /* --relay */
    rumor_relay_client_t *relay_client;   /* --relay-via */
};

/* A public key given as 40 Z85 characters or as a key file. */
static int parse_public(const char *s, uint8_t pk[32])
{
    if (strlen(s) == RUMOR_CURVE_Z85_LEN && rumor_curve_z85_decode(s, pk) == 0)
        return 0;
    return rumor_curve_read_public(s, pk);
}

/* Secure mode: this peer's keypair and the allow-list. */
static int load_keys(struct peer *p, const struct options *o)
{
    if (!o->keys || !o->allow)
        return rumor_err_set(RUMOR_EINVAL,
                             "secure mode needs --keys (this peer's secret key: make one with "
                             "'rumor-peer keygen PREFIX') and --allow (the swarm's public keys); "
                             "CURVE without an allow-list would admit anyone. --insecure runs "
                             "plaintext");
    p->keys = calloc(1, sizeof *p->keys);
    if (!p->keys)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    RUMOR_CHECK(rumor_curve_read_keys(o->keys, p->keys));
    RUMOR_CHECK(rumor_allowlist_load(o->allow, &p->allow));
    if (p->pl.n == 0 && !rumor_allowlist_contains(p->allow, p->keys->public_key))
        rumor_warn("this peer's own key is not on the allow-list %s: the others will refuse it",
                   o->allow);
    return 0;
}

/* Secure mode with a list: also every peer's public key (peers file
 * column, --peer-keys, or the allow-list entry peer-R). */
static int load_security(struct peer *p, const struct options *o)
{
    RUMOR_CHECK(load_keys(p, o));
    p->peer_keys = calloc((size_t)p->pl.n, sizeof *p->peer_keys);
    if (!p->peer_keys)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    char *list = o->peer_keys ? strdup(o->peer_keys) : NULL, *save = NULL;
    char *tok = list ? strtok_r(list, ",", &save) : NULL;
    int rc = 0;
    for (int j = 0; rc == 0 && j < p->pl.n; j++, tok = tok ? strtok_r(NULL, ",", &save) : NULL) {
        char name[32];
        snprintf(name, sizeof name, "peer-%d", j);
        if (p->pl.key[j])
            rc = parse_public(p->pl.key[j], p->peer_keys[j]);
        else if (tok)
            rc = parse_public(tok, p->peer_keys[j]);
        else if (!rumor_allowlist_lookup_name(p->allow, name, p->peer_keys[j]))
            rc = rumor_err_set(RUMOR_EINVAL, "no public key for peer %d: give it in the peers "
                                             "file's second column, in --peer-keys, or as the "
                                             "allow-list entry named %s", j, name);
        if (rc == 0 && !rumor_allowlist_contains(p->allow, p->peer_keys[j]))
            rc = rumor_err_set(RUMOR_EAUTH, "peer %d's public key is not on the allow-list %s", j,
                               o->allow);
    }
    if (rc == 0 && o->peer_keys && tok)
        rc = rumor_err_set(RUMOR_EINVAL, "--peer-keys lists more keys than there are peers");
    free(list);
    return rc;
}


/* rumor-peer keygen [--force] PREFIX...: new keypairs. */
static int keygen_main(int argc, char **argv)
{
    int force = 0, made = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--force") == 0) {
            force = 1;
            continue;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("Usage: rumor-peer keygen [--force] PREFIX...\n"
                   "Writes a new CurveZMQ keypair for each PREFIX: PREFIX.key, the secret key\n"
                   "(mode 0600, given to this peer's --keys), and PREFIX.pub, the public key\n"
                   "(put it in every peer's --allow list or directory). Existing files are\n"
                   "kept unless --force. Prints each public key.\n");
            return 0;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "rumor-peer keygen: unknown option '%s'\n", argv[i]);
            return 2;
        }
        rumor_curve_keypair_t kp;
        if (rumor_curve_keygen(&kp) < 0 || rumor_curve_write_keys(argv[i], &kp, force) < 0) {
            fprintf(stderr, "rumor-peer keygen: %s\n", rumor_err_msg());
            rumor_curve_keypair_clear(&kp);
            return 1;
        }
        printf("%s  %s.pub\n", kp.public_z85, argv[i]);
        rumor_curve_keypair_clear(&kp);
        made++;
    }
    if (!made) {
        fprintf(stderr, "rumor-peer keygen: give a PREFIX (writes PREFIX.key and PREFIX.pub)\n");
        return 2;
    }
    return 0;
}

/* A swarm of a list (--rank, --peers): the list, the keys, the graph.
 * Returns an exit status, or -1 to go on. */
static int setup_list(struct peer *p, const struct options *opts)
{
    int rank = opts->rank;
    if (read_peers(opts, &p->pl) < 0) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        return 2;
    }
    int N = p->pl.n;
    if (rank >= N) {
        fprintf(stderr, "rumor-peer: --rank %d but the peer list has %d endpoint%s\n", rank, N,
                N == 1 ? "" : "s");
        return 2;
    }
    if (!p->pl.ep[rank]) {
        fprintf(stderr, "rumor-peer: --rank %d: this peer's own entry in the peer list is '-'; "
                        "give the address the others reach it at\n", rank);
        return 2;
    }
    if (p->pl.unknown && strcmp(opts->membership, "swim") != 0) {
        fprintf(stderr, "rumor-peer: the peer list has %d entr%s given as '-' (address not "
                        "known): only --membership swim learns addresses from the swarm\n",
                p->pl.unknown, p->pl.unknown == 1 ? "y" : "ies");
        return 2;
    }
    /* ---- security: CurveZMQ unless --insecure */
    if (opts->insecure) {
        fprintf(stderr, "rumor-peer %d: WARNING: --insecure: plaintext gossip; anyone who can "
                        "reach this port can join the swarm, read its parameters and poison "
                        "them\n", rank);
    } else if (load_security(p, opts) < 0) {
        fprintf(stderr, "rumor-peer %d: security: %s\n", rank, rumor_err_msg());
        return rumor_err_code() == RUMOR_EINVAL ? 2 : 1;
    }
    /* ---- topology: the same spec string as rumor-topo */
    char spec[512];
    if (strchr(opts->topology, ':'))
        snprintf(spec, sizeof spec, "%s", opts->topology);
    else
        snprintf(spec, sizeof spec, "%s:%d", opts->topology, N);
    int rc = rumor_topo_parse(spec, &p->topo);
    if (rc == 0 && p->topo->n != N)
        rc = rumor_err_set(RUMOR_EINVAL, "'%s' has %d peers but the peer list has %d", spec,
                           p->topo->n, N);
    if (rc < 0) {
        fprintf(stderr, "rumor-peer %d: topology: %s\n", rank, rumor_err_msg());
        return 1;
    }
    if (opts->weights && rumor_topo_set_weights(p->topo, opts->weights) < 0) {
        fprintf(stderr, "rumor-peer %d: weights: %s\n", rank, rumor_err_msg());
        return 1;
    }
    return -1;
}

/* An open swarm (--listen, --join, no rank): the keys, the join addresses
 * and this peer's id. Returns an exit status, or -1 to go on. */
static int setup_open(struct peer *p, const struct options *opts)
{
    if (opts->insecure)
        fprintf(stderr, "rumor-peer: WARNING: --insecure: plaintext gossip; anyone who can reach "
                        "this port can join the swarm, read its parameters and poison them\n");
    else if (load_keys(p, opts) < 0) {
        fprintf(stderr, "rumor-peer: security: %s\n", rumor_err_msg());
        return rumor_err_code() == RUMOR_EINVAL ? 2 : 1;
    }
    if (rumor_peer_open_init(&p->open, opts->join, opts->listen, opts->advertise, opts->swarm,
                             p->keys, p->allow) < 0) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        return 2;
    }
    if (opts->weights && strcmp(opts->weights, "mh") != 0) {
        fprintf(stderr, "rumor-peer: --weights %s: a graph over the living takes "
                        "Metropolis-Hastings weights (each peer's row from the degrees it sees)\n",
                opts->weights);
        return 2;
    }
    return -1;
}

/* What can be checked before the data loads and before joining anyone:
 * the directories the run writes into and the address it listens on.
 * Returns an exit status (2: usage, 1: the address is in use), or -1. */
static int check_at_start(struct peer *p, struct options *o)
{
    const struct {
        const char *dir, *flag;
    } outs[] = { { o->checkpoint_dir, "--checkpoint-dir" }, { o->save_average, "--save-average" } };
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++)
        if (outs[i].dir && rumor_dir_prepare(outs[i].dir) < 0) {
            fprintf(stderr, "rumor-peer: %s: %s\n", outs[i].flag, rumor_err_msg());
            return 2;
        }
    /* a list's peer binds its own entry unless --listen says otherwise */
    if (!o->listen_ep[0] &&
        rumor_peerlist_bind_endpoint(p->pl.ep[o->rank], o->listen_ep, sizeof o->listen_ep) < 0) {
        fprintf(stderr, "rumor-peer: peer list entry %d: %s\n", o->rank, rumor_err_msg());
        return 2;
    }
    if (rumor_peerlist_try_bind(o->listen_ep) < 0) {
        fprintf(stderr, "rumor-peer: %s%s\n", rumor_err_msg(),
                rumor_err_code() == RUMOR_EINVAL ? " (give --listen an address of this machine, "
                                                   "or tcp://*:PORT for all of them, IPv4 and IPv6)"
                                                 : "");
        return rumor_err_code() == RUMOR_EINVAL ? 2 : 1;
    }
    return -1;
}
/* --relay: a relay beside this peer; --relay-via: this peer reached
 * through one (its announced address becomes the relayed one). Returns an
 * exit status, or -1 to go on. */
static int setup_relays(struct peer *p, struct options *o)
{
    const char *local = o->listen_ep[0] ? o->listen_ep : o->listen;
    if (o->relay) {
        const char *self = p->is_open ? p->open.advertise : p->pl.ep[o->rank];
        int rc = peer_relay_serve(o->relay, o->relay_max_peers, o->relay_mbit, local, self,
                                  p->keys, p->allow, &p->relay);
        if (rc >= 0)
            return rc;
    }
    if (o->relay_via) {
        double t = o->start_timeout < 10 ? o->start_timeout : 10;
        return peer_relay_register(o->relay_via, local, p->keys, p->allow, t > 1 ? t : 1,
                                   o->no_hole_punch, p->open.advertise, sizeof p->open.advertise, &p->relay_client);
    }
    return -1;
}

/* The address a relay gives this peer now (mixer.h, self_endpoint). */
static int relayed_endpoint(void *arg, char *buf, size_t cap)
{
    return rumor_relay_client_endpoint(((struct peer *)arg)->relay_client, buf, cap);
}

/* The address dialled for a member (mixer.h, dial). */
static int dial_member(void *arg, const char *ep, char *out, size_t cap)
{
    return rumor_relay_client_dial(((struct peer *)arg)->relay_client, ep, out, cap);
}

/* Members that relay (mixer.h, relays_seen): more relays to fail over to,
 * each with the allow-list's key for its id. */
static void relays_seen(void *arg, const rumor_swim_member_t *relays, int n)
{
    struct peer *p = arg;
    for (int i = 0; i < n; i++) {
        uint8_t pk[32];
        if (p->keys && !rumor_allowlist_lookup_id(p->allow, relays[i].id, pk))
            continue; /* not dialled: no allowed key has its id */
        if (rumor_relay_client_add(p->relay_client, relays[i].relay, p->keys ? pk : NULL) < 0)
            rumor_debug("%s", rumor_err_msg());
    }
}

static void peer_free(struct peer *p)
{
    rumor_peer_destroy(&p->peer); /* flushes queued chunks, then LEAVE */
    rumor_relay_client_stop(&p->relay_client); /* after: the LEAVE went out */
    rumor_relay_stop(&p->relay);
    rumor_prom_stop(&p->prom);    /* after: scrapes see the phase while LEAVE flushes */
    rumor_topo_destroy(&p->topo);
    free(p->pl.ep);
    free(p->pl.buf);
    free(p->pl.key);
    free(p->pl.keybuf);
    if (p->keys)
        rumor_curve_keypair_clear(p->keys);
    free(p->keys);
    free(p->peer_keys);
    rumor_allowlist_destroy(&p->allow);
    rumor_peer_open_free(&p->open);
}

/* ------------------------------------------------------ preemption */

/* "rumor-peer 3" (a list's rank) or "rumor-peer 1a2b3c4d" (open membership:
 * the id's first 8 hex digits), for messages. */
static char label[48] = "rumor-peer";
static rumor_peer_t *volatile the_peer;   /* what a signal stops; NULL before and after */
static volatile sig_atomic_t joined;      /* the peer began to join the swarm */
static volatile sig_atomic_t leave_signal;
static unsigned leave_alarm_s = 10;

/* SIGTERM/SIGINT: end the round at once and leave; a watchdog alarm bounds
 * how long leaving may take. Only async-signal-safe calls here. */
static void on_leave_signal(int sig)
{
    rumor_peer_t *p = the_peer;
    if (!joined && !rumor_peer_started(p)) {
        /* still loading: nothing saved, nobody joined; a plain stop is a
         * success for systemd and compose */
        static const char msg[] = "rumor-peer: stopped by a signal before joining the swarm\n";
        if (write(2, msg, sizeof msg - 1) < 0) {
            /* nothing more to do */
        }
        _exit(0);
    }
    if (leave_signal)
        return;
    leave_signal = sig;
    rumor_peer_stop(p, sig);
    alarm(leave_alarm_s);
}

static void on_leave_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "rumor-peer: leaving took longer than --leave-timeout; exiting now\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(1);
}

/* A peer holds a few descriptors per member it knows (a connection each
 * way, ZeroMQ's mailboxes): about 7 a member, so the usual soft limit of
 * 1024 ends a swarm near 140 members. The soft limit goes up to the hard
 * one, as servers of many connections do. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (1u << 20) ? (1u << 20)
                                                                            : rl.rlim_max;
    if (want <= rl.rlim_cur)
        return;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        rumor_debug("cannot raise the open files limit to %lu", (unsigned long)want);
}

static void catch_leave_signals(double timeout)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_leave_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_leave_alarm;
    sigaction(SIGALRM, &sa, NULL);
    leave_alarm_s = timeout < 1 ? 1 : (unsigned)ceil(timeout);
}

/* The peer's figures and phase, to the Prometheus endpoint. */
static void observe(void *arg, const rumor_peer_stats_t *s, rumor_peer_phase phase)
{
    if (phase < RUMOR_PEER_NPHASES)
        rumor_prom_set_phase(arg, phase);
    rumor_prom_publish(arg, s);
}

static int fail(struct peer *p, const char *what)
{
    if (what)
        fprintf(stderr, "%s: %s: %s\n", label, what, rumor_err_msg());
    else
        fprintf(stderr, "%s: %s\n", label, rumor_err_msg());
    rumor_debug("error trace: %s", rumor_err_trace());
    the_peer = NULL;
    peer_free(p);
    return 1;
}

/* The run's result, as lines; returns the exit status. */
static int report(const rumor_peer_t *peer, const struct options *o, int secure)
{
    const rumor_peer_result_t *r = rumor_peer_result(peer);
    const char *name = rumor_peer_name(peer);
    if (r->left_before) {
        printf("%s: left before training began, on signal %d\n", name, r->left_on);
        return 0;
    }
    if (r->left_on) {
        int saved = r->left_checkpoint == 1;
        if (r->left_checkpoint < 0)
            fprintf(stderr, "%s: checkpoint while leaving: %s\n", label, r->checkpoint_error);
        printf("%s: left at round %ld on signal %d after %.1f s%s%s\n", name, r->round,
               r->left_on, r->seconds, saved ? "; checkpoint in " : "",
               saved ? o->checkpoint_dir : "");
        return r->left_checkpoint < 0 ? 1 : 0;
    }
    int averaged = !o->no_average && !r->alone;
    if (r->lm) {
        printf("%s: local validation loss %.4f\n", name, r->local_loss);
        if (averaged && !r->average_note[0])
            printf("%s: swarm average validation loss %.4f\n", name, r->average_loss);
    } else {
        printf("%s: local test accuracy %.2f%%\n", name, 100.0 * r->local_accuracy);
    }
    if (r->average_accuracy >= 0 && o->rank < 0)
        printf("%s: swarm average test accuracy %.2f%% (%d peers alive)\n", name,
               100.0 * r->average_accuracy, r->average_members);
    else if (r->average_accuracy >= 0)
        printf("%s: swarm average test accuracy %.2f%%\n", name, 100.0 * r->average_accuracy);
    else if (averaged && r->average_note[0])
        printf("%s: swarm average %s\n", name, r->average_note);
    char rejects[512], conns[256], ckpts[96] = "";
    rumor_wire_stats_format(&r->messages, rejects, sizeof rejects);
    if (rumor_transport_stats_format(&r->connections, secure, conns, sizeof conns) < 0)
        snprintf(conns, sizeof conns, "?");
    if (r->checkpoints_failed)
        snprintf(ckpts, sizeof ckpts, "; CHECKPOINTS FAILED: %ld of %ld", r->checkpoints_failed,
                 r->checkpoints);
    printf("%s: done: %ld rounds (%ld run here) in %.1f s, %.0f examples/s, sent %.1f MB, "
           "received %.1f MB, waited %.1f s, computing %.0f%% of the time; messages: %s; "
           "connections: %s%s%s\n",
           name, r->rounds, r->rounds_run, r->seconds, r->examples_per_second,
           r->bytes_sent / 1e6, r->bytes_received / 1e6, r->wait_s,
           r->seconds > 0 ? 100.0 * r->compute_s / r->seconds : 0.0, rejects, conns,
           r->allreduce_failures ? " (some all-reduces failed)" : "", ckpts);
    const rumor_mixer_counters_t *m = &r->counters;
    if (m->elems_ahead) /* --send-ahead */
        printf("%s: sent ahead: %.1f%% of the parameters sent went before their round began\n",
               name, 100.0 * (double)m->elems_ahead / (double)m->elems_sent);
    if (o->rank < 0 && (m->members_relayed || m->members_relaying || o->relay_via))
        printf("%s: membership: %d peers reached directly, %d through relays; %d offer to relay\n",
               name, m->members_direct, m->members_relayed, m->members_relaying);
    if (m->jumps || r->catch_ups || m->state_served)
        printf("%s: caught up: %llu jumps over %llu rounds, %ld state fetches; served state "
               "%llu times\n", name, (unsigned long long)m->jumps,
               (unsigned long long)m->rounds_skipped, r->catch_ups,
               (unsigned long long)m->state_served);
    fflush(stdout);
    if (r->checkpoints_failed) {
        fprintf(stderr, "%s: %ld of %ld checkpoints failed to write (the last at %s): this run "
                        "was not protected by them\n", label, r->checkpoints_failed,
                r->checkpoints, r->checkpoint_error);
        return 1;
    }
    if (r->average_lost)
        return 1;
    if (r->alone) {
        fprintf(stderr, "%s: trained alone: no neighbour's parameters reached this peer in %ld "
                        "rounds (messages: %s; connections: %s). Check --peers, the keys and "
                        "--allow, and that the neighbours run; --allow-alone accepts training "
                        "alone\n", label, r->rounds_run, rejects, conns);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
        return keygen_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "relay") == 0)
        return peer_relay_main(argc, argv);
    catch_leave_signals(10); /* a stop at once is a clean one (on_leave_signal) */
    rumor_blas_autotune(argc, argv);
    /* ZeroMQ allocates each received chunk (1 MiB): keep freed chunks in the
     * heap instead of returning them to the kernel and faulting them in
     * again every round (about 4x fewer page faults per round). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    raise_fd_limit();
    struct options opts;
    rumor_peer_config_t cfg;
    int rc = peer_opts_parse(argc, argv, &opts);
    if (rc < 0)
        rc = peer_opts_config(&opts, &cfg);
    if (rc >= 0)
        return rc;
#ifdef RUMOR_ATTACKER
    if (attack_setup(&cfg.mixer) < 0) /* tests/rumor-attacker: a lying peer */
        return 2;
#endif
    catch_leave_signals(opts.leave_timeout); /* the watchdog's time */
    struct peer p;
    memset(&p, 0, sizeof p);
    p.is_open = opts.rank < 0;
    rc = p.is_open ? setup_open(&p, &opts) : setup_list(&p, &opts);
    if (rc < 0)
        rc = check_at_start(&p, &opts);
    if (rc < 0)
        rc = setup_relays(&p, &opts);
    if (rc >= 0) {
        peer_free(&p);
        return rc;
    }
    /* ---- --metrics-listen: serving from here on, every family in phase
     * "starting" while the data loads; a bad address stops the peer before
     * the data loads and before it joins anyone */
    rumor_peer_stats_t first;
    rumor_peer_stats_init(&first);
    first.rank = p.is_open ? -1 : opts.rank;
    if (p.is_open)
        snprintf(first.peer, sizeof first.peer, "%016llx", (unsigned long long)p.open.id);
    first.peers = p.is_open ? 1 : p.pl.n;
    if (opts.metrics_listen && rumor_prom_start(opts.metrics_listen, &first, &p.prom) < 0) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        /* the value (or a build without the server): usage; in use: runtime */
        rc = rumor_err_code() == RUMOR_EINVAL || rumor_err_code() == RUMOR_ENOTSUP ? 2 : 1;
        peer_free(&p);
        return rc;
    }
    if (p.is_open) {
        snprintf(label, sizeof label, "rumor-%s", p.open.name);
        rumor_log_set_tag(p.open.name);
    } else {
        snprintf(label, sizeof label, "rumor-peer %d", opts.rank);
        char tag[32];
        snprintf(tag, sizeof tag, "peer %d", opts.rank);
        rumor_log_set_tag(tag);
    }
    /* ---- the configuration: the options', with the list, keys and graph */
    cfg.npeers = p.is_open ? 1 : p.pl.n;
    if (rumor_train_opts_config(&opts.t, p.is_open ? 0 : opts.rank, cfg.npeers,
                                &cfg.trainer) < 0) { /* bad usage */
        fail(&p, NULL);
        return 2;
    }
    rumor_mixer_config_t *mc = &cfg.mixer;
    const char *self_ep = p.open.advertise;
    char family[256] = "";
    mc->topo = p.topo;
    mc->self = p.is_open ? 0 : opts.rank;
    mc->endpoints = (const char *const *)p.pl.ep;
    mc->keys = p.keys;
    mc->allow = p.allow;
    mc->peer_keys = (const uint8_t(*)[32])p.peer_keys;
    if (p.is_open) { /* the swarm is whoever SWIM finds alive (mixer.h, max_peers) */
        cfg.open = &p.open;
        mc->endpoints = &self_ep;
        mc->max_peers = opts.max_peers;
        mc->seeds = (const char *const *)p.open.join.ep;
        mc->nseeds = p.open.join.n;
        mc->seed_keys = p.open.key_of;
        mc->min_members = opts.min_peers > 0 ? opts.min_peers : 1;
        if (p.open.join.n && mc->min_members < 2)
            mc->min_members = 2; /* a joiner must reach someone */
        mc->ids = &p.open.id;
        mc->reach_arg = &p;
        if (p.relay_client) { /* the relay may move it: another relay, another port */
            mc->self_endpoint = relayed_endpoint;
            mc->dial = dial_member; /* members behind the same relay: a punched path */
            mc->relays_seen = relays_seen; /* more relays to fail over to */
        }
        if (p.relay) /* the others learn that this peer relays, and where */
            mc->relay_offer = rumor_relay_public_endpoint(p.relay);
    }
    if (cfg.swim) { /* the family of the spec: "ring:8" -> "ring" */
        snprintf(family, sizeof family, "%s", opts.topology);
        if (strchr(opts.topology, ':') && strncmp(opts.topology, "rreg:", 5) != 0) {
            rumor_err_set(RUMOR_EINVAL, "--membership swim takes a topology family without a "
                                        "size ('ring', 'exp', 'torus', ...), not '%s'",
                          opts.topology);
            return fail(&p, "membership");
        }
        mc->membership = family;
    }
    if (p.prom) {
        cfg.observe = observe;
        cfg.observe_arg = p.prom;
    }
    /* ---- the peer: the data and the model, then the swarm */
    if (rumor_peer_create(&cfg, &p.peer) < 0)
        return fail(&p, NULL);
    the_peer = p.peer;
    rc = rumor_peer_run(p.peer);
    joined = rumor_peer_started(p.peer);
    if (rc < 0) {
        rc = rumor_peer_result(p.peer)->usage ? 2 : 1;
        the_peer = NULL;
        fprintf(stderr, "%s: %s\n", label, rumor_err_msg());
        peer_free(&p);
        return rc;
    }
    rc = report(p.peer, &opts, p.keys != NULL);
    peer_relay_report(rumor_peer_name(p.peer), p.relay, p.relay_client);
    the_peer = NULL;
    peer_free(&p);
    return rc;
}

/* Relays (gossip/relay.h) over loopback, with rumor's own transport at both
 * ends: a peer registers with a relay and gets a relayed address; a
 * neighbour's CurveZMQ connection to that address reaches the peer's
 * listener through the relay and authenticates end to end (the receiver
 * sees the sender's key); what the relay spliced holds no byte of the
 * payload in clear (and does in plaintext, so the check can fail); keys
 * not on the relay's allow-list get no address; a full relay refuses by
 * name; data connections with a bad header are closed and change nothing;
 * the relay's bandwidth limit holds (measured against the unlimited run);
 * a peer notices its relay's death within the heartbeat timeout and
 * registers again once a relay answers at that address. */
#include <arpa/inet.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "relay.h"
#include "testutil.h"
#include "transport.h"

#define MARKER "rumor-relay-test-plaintext-marker"

static rumor_curve_keypair_t kr, ka, kb, kc;
static rumor_allowlist_t *allow;

struct ends {
    rumor_relay_t *relay;
    rumor_relay_client_t *client;
    rumor_transport_t *a, *b; /* a: the relayed peer; b: its neighbour */
    char relayed[300];
};

static rumor_transport_t *transport(const rumor_curve_keypair_t *k, int port)
{
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    rumor_transport_opts_t o = { .listen = ep, .max_msg_size = 1 << 20, .keys = k,
                                 .allow = k ? allow : NULL };
    rumor_transport_t *t = NULL;
    CHECK_OK(rumor_transport_create(&o, 1, &t));
    return t;
}

static int relay_at(int port, int secure, int max_peers, double mbit, const char *tap,
                    rumor_relay_t **out)
{
    char ctl[64];
    snprintf(ctl, sizeof ctl, "tcp://127.0.0.1:%d", port);
    rumor_relay_opts_t o = { .control = ctl, .max_peers = max_peers, .mbit = mbit,
                             .heartbeat_timeout_ms = 1000, .keys = secure ? &kr : NULL,
                             .allow = secure ? allow : NULL, .tap = tap };
    return rumor_relay_start(&o, out);
}

/* A client of the relay at port (and of a second one at port2, when not 0,
 * with the same key). */
static int client_of2(int port, int port2, const rumor_curve_keypair_t *k, const char *local,
                      double timeout, rumor_relay_client_t **out)
{
    char ep[2][64];
    snprintf(ep[0], sizeof ep[0], "tcp://127.0.0.1:%d", port);
    snprintf(ep[1], sizeof ep[1], "tcp://127.0.0.1:%d", port2);
    const char *eps[2] = { ep[0], ep[1] };
    const uint8_t *keys[2] = { kr.public_key, kr.public_key };
    rumor_relay_client_opts_t o = { .relays = eps, .relay_keys = keys, .nrelays = port2 ? 2 : 1,
                                    .keys = k, .local = local, .timeout = timeout,
                                    .heartbeat_timeout_ms = 1000 };
    return rumor_relay_client_start(&o, out);
}

static int client_of(int relay_port, const rumor_curve_keypair_t *k, const char *local,
                     double timeout, rumor_relay_client_t **out)
{
    return client_of2(relay_port, 0, k, local, timeout, out);
}

/* Sends n messages of `size` bytes (MARKER repeated) from b to a through the
 * relayed address; returns how many a received, and the seconds it took. */
static int pump(struct ends *e, int n, size_t size, double *secs, uint64_t *sender)
{
    char *body = malloc(size);
    for (size_t i = 0; i < size; i++)
        body[i] = MARKER[i % (sizeof MARKER - 1)];
    uint32_t hdr = 0x52454c59;
    int sent = 0, got = 0;
    double t0 = rumor_now();
    while (got < n && rumor_now() - t0 < 20) {
        if (sent < n) {
            int rc = rumor_transport_send_body(e->b, 0, &hdr, sizeof hdr, body, size);
            if (rc == 0)
                sent++;
        }
        zmq_pollitem_t it = { rumor_transport_pull(e->a), 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, sent < n ? 1 : 100) <= 0)
            continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        while (zmq_msg_recv(&m, rumor_transport_pull(e->a), ZMQ_DONTWAIT) >= 0) {
            if (zmq_msg_more(&m)) { /* the header; the body follows */
                if (sender)
                    *sender = rumor_transport_msg_peer_id(&m);
                continue;
            }
            if (zmq_msg_size(&m) == size && memcmp(zmq_msg_data(&m), body, size) == 0)
                got++;
        }
        zmq_msg_close(&m);
    }
    *secs = rumor_now() - t0;
    free(body);
    return got;
}

static void ends_up(struct ends *e, int secure, double mbit, const char *tap)
{
    memset(e, 0, sizeof *e);
    int rp = tu_free_port(), ap = tu_free_port();
    CHECK_OK(relay_at(rp, secure, 4, mbit, tap, &e->relay));
    e->a = transport(secure ? &ka : NULL, ap);
    e->b = transport(secure ? &kb : NULL, tu_free_port());
    CHECK_OK(client_of(rp, secure ? &ka : NULL, rumor_transport_endpoint(e->a), 5, &e->client));
    rumor_relay_client_endpoint(e->client, e->relayed, sizeof e->relayed);
    CHECKF(strncmp(e->relayed, "tcp://127.0.0.1:", 16) == 0, "relayed at %s", e->relayed);
    if (secure)
        CHECK_OK(rumor_transport_connect_curve(e->b, 0, e->relayed, ka.public_key));
    else
        CHECK_OK(rumor_transport_connect(e->b, 0, e->relayed));
}

static void ends_down(struct ends *e)
{
    rumor_relay_client_stop(&e->client);
    rumor_relay_stop(&e->relay);
    rumor_transport_destroy(&e->a);
    rumor_transport_destroy(&e->b);
}

static size_t slurp(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        *out = NULL;
        if (f)
            fclose(f);
        return 0;
    }
    *out = malloc((size_t)st.st_size + 1);
    size_t n = fread(*out, 1, (size_t)st.st_size, f);
    fclose(f);
    return n;
}

static int contains(const char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0)
            return 1;
    return 0;
}

/* The path end to end, and what the relay sees of it. */
static void test_splice(int secure)
{
    char tap[512];
    snprintf(tap, sizeof tap, "%s/tap-%d", tu_tmpdir(), secure);
    struct ends e;
    ends_up(&e, secure, 0, tap);
    double secs;
    uint64_t sender = 0;
    int got = pump(&e, 20, 64 * 1024, &secs, &sender);
    CHECKF(got == 20, "%s: %d of 20 messages came through the relay", secure ? "CURVE" : "plain",
           got);
    if (secure)
        CHECKF(sender == rumor_curve_id(kb.public_key),
               "the receiver sees the sender's own key through the relay (%016llx)",
               (unsigned long long)sender);
    rumor_relay_stats_t st;
    rumor_relay_stats(e.relay, &st);
    CHECKF(st.conns_spliced >= 1 && st.bytes >= 20 * 64 * 1024,
           "spliced %llu connections, %llu bytes", (unsigned long long)st.conns_spliced,
           (unsigned long long)st.bytes);
    rumor_relay_client_stats_t cs;
    rumor_relay_client_stats(e.client, &cs);
    CHECKF(cs.conns >= 1 && cs.alive, "the peer served %llu connections", (unsigned long long)cs.conns);
    ends_down(&e);
    char *seen;
    size_t n = slurp(tap, &seen);
    CHECKF(n >= 20 * 64 * 1024, "the tap holds %zu bytes", n);
    if (secure)
        CHECKF(!contains(seen, n, MARKER), "the relay saw the payload in clear");
    else
        CHECKF(contains(seen, n, MARKER), "a plaintext relay's tap shows the payload (the "
                                          "check above can fail)");
    free(seen);
}

static void test_refusals(void)
{
    int rp = tu_free_port();
    rumor_relay_t *r = NULL;
    CHECK_OK(relay_at(rp, 1, 1, 0, NULL, &r));
    /* a key not on the allow-list gets nothing */
    rumor_relay_client_t *c = NULL;
    double t0 = rumor_now();
    CHECK_ERR(client_of(rp, &kc, "tcp://127.0.0.1:1", 1.5, &c), RUMOR_ETIMEOUT, "did not answer");
    CHECKF(rumor_now() - t0 < 3, "refusal took %.1f s", rumor_now() - t0);
    rumor_relay_stats_t st;
    rumor_relay_stats(r, &st);
    CHECKF(st.refused_key >= 1 && st.registered == 0, "ZAP refused %llu, registered %llu",
           (unsigned long long)st.refused_key, (unsigned long long)st.registered);
    /* one slot: the first peer gets it, the second is told the relay is full */
    rumor_relay_client_t *c1 = NULL;
    CHECK_OK(client_of(rp, &ka, "tcp://127.0.0.1:1", 5, &c1));
    CHECK_ERR(client_of(rp, &kb, "tcp://127.0.0.1:1", 5, &c), RUMOR_EAUTH, "full: 1 peers");
    rumor_relay_client_stop(&c1);
    rumor_relay_stop(&r);
}

/* A data connection whose header is wrong: the relay closes it and the
 * waiting neighbour's connection is served by the right one later. */
/* Up to 4 parts of the next message on d (5 s at most); the count. */
static int raw_recv(void *d, char part[4][300], int len[4])
{
    int np = 0, more = 1;
    zmq_pollitem_t it = { d, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll(&it, 1, 5000) != 1)
        return 0;
    while (more && np < 4) {
        len[np] = zmq_recv(d, part[np], 299, 0);
        part[np][len[np] > 0 ? len[np] : 0] = 0;
        size_t sz = sizeof more;
        zmq_getsockopt(d, ZMQ_RCVMORE, &more, &sz);
        np++;
    }
    return np;
}

/* A control connection of k's own to relay r, registered: the answer in
 * part (relayed endpoint, back endpoint, token). */
static void *raw_register(void *ctx, rumor_relay_t *r, const rumor_curve_keypair_t *k,
                          char part[4][300], int len[4])
{
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, kr.public_key, 32);
    zmq_setsockopt(d, ZMQ_CURVE_PUBLICKEY, k->public_key, 32);
    zmq_setsockopt(d, ZMQ_CURVE_SECRETKEY, k->secret_key, 32);
    CHECK(zmq_connect(d, rumor_relay_endpoint(r)) == 0);
    zmq_send(d, "REGISTER", 8, 0);
    int np = raw_recv(d, part, len);
    CHECKF(np == 4 && len[0] == 2 && memcmp(part[0], "OK", 2) == 0 && len[3] == 32,
           "a registration's answer: %d parts", np);
    return d;
}

static int port_of(const char *ep)
{
    const char *colon = strrchr(ep, ':');
    return colon ? atoi(colon + 1) : 0;
}

/* A TCP connection to 127.0.0.1:port that sends 48 bytes: magic, token. */
static int back_conn(int port, const char *magic, const void *token)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0);
    unsigned char hdr[48] = { 0 };
    memcpy(hdr, magic, 8);
    memcpy(hdr + 8, token, 32);
    CHECK(write(s, hdr, sizeof hdr) == (ssize_t)sizeof hdr);
    struct timeval tv = { 3, 0 };
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return s;
}

/* Hole punching's relay side (relay.h): a probe with the registration's
 * token is told the address it comes from (its own port), one with a
 * wrong token gets nothing; PUNCH for a port nobody is relayed at is
 * refused with the reason; a malformed PUNCH changes nothing (PING still
 * answered); PUNCH for a relayed peer (a real client, a's) reaches it, its
 * answer comes back with the address it probed from, and it connects from
 * that port to the address given (a listener here). */
static void test_punch_broker(void)
{
    struct ends e;
    ends_up(&e, 1, 0, NULL);
    void *ctx = zmq_ctx_new();
    char part[4][300];
    int len[4];
    void *d = raw_register(ctx, e.relay, &kb, part, len);
    int bport = port_of(part[2]);
    char token[32], drelayed[300];
    snprintf(drelayed, sizeof drelayed, "%s", part[1]);
    memcpy(token, part[3], 32);
    /* the probe */
    int s = back_conn(bport, "RUMORPRB", token);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(s, (struct sockaddr *)&me, &ml);
    char seen[64] = { 0 }, want[64];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof seen && (r = read(s, seen + got, sizeof seen - got)) > 0)
        got += (size_t)r;
    snprintf(want, sizeof want, "tcp://127.0.0.1:%d", ntohs(me.sin_port));
    CHECKF(got == 64 && strcmp(seen, want) == 0, "a probe's answer: '%.64s' (%zu bytes), "
           "expected '%s'", seen, got, want);
    close(s);
    token[0] ^= 1;
    s = back_conn(bport, "RUMORPRB", token);
    char c;
    CHECKF(read(s, &c, 1) == 0, "a probe with a wrong token is closed unanswered");
    close(s);
    token[0] ^= 1;
    rumor_relay_stats_t st;
    rumor_relay_stats(e.relay, &st);
    CHECKF(st.probes == 1 && st.backs_bad == 1, "probes %llu, bad %llu",
           (unsigned long long)st.probes, (unsigned long long)st.backs_bad);
    /* nobody relayed at port 1; a malformed one (no address) */
    unsigned char id[8] = { 7, 0, 0, 0, 0, 0, 0, 1 };
    zmq_send(d, "PUNCH", 5, ZMQ_SNDMORE);
    zmq_send(d, id, 8, ZMQ_SNDMORE);
    zmq_send(d, "1", 1, ZMQ_SNDMORE);
    zmq_send(d, want, strlen(want), 0);
    int np = raw_recv(d, part, len);
    CHECKF(np == 3 && !strcmp(part[0], "NOPUNCH") && len[1] == 8 && !memcmp(part[1], id, 8) &&
           strstr(part[2], "no peer is relayed"), "PUNCH to nobody: %d parts, '%s' '%s'", np,
           part[0], np > 2 ? part[2] : "");
    zmq_send(d, "PUNCH", 5, ZMQ_SNDMORE);
    zmq_send(d, id, 8, 0);
    zmq_send(d, "PING", 4, 0);
    np = raw_recv(d, part, len);
    CHECKF(np == 1 && !strcmp(part[0], "PONG"), "after a malformed PUNCH: '%s'", part[0]);
    /* to a's client, through the relay: its answer, then its connection
     * from the port it probed from to a listener of ours */
    int lport = 0;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    CHECK(bind(lfd, (struct sockaddr *)&la, sizeof la) == 0 && listen(lfd, 4) == 0);
    ml = sizeof la;
    getsockname(lfd, (struct sockaddr *)&la, &ml);
    lport = ntohs(la.sin_port);
    char ours[64], aport[16];
    snprintf(ours, sizeof ours, "tcp://127.0.0.1:%d", lport);
    snprintf(aport, sizeof aport, "%d", port_of(e.relayed));
    zmq_send(d, "PUNCH", 5, ZMQ_SNDMORE);
    zmq_send(d, id, 8, ZMQ_SNDMORE);
    zmq_send(d, aport, strlen(aport), ZMQ_SNDMORE);
    zmq_send(d, ours, strlen(ours), 0);
    np = raw_recv(d, part, len);
    CHECKF(np == 3 && !strcmp(part[0], "PUNCHED") && !memcmp(part[1], id, 8) &&
           !strncmp(part[2], "tcp://127.0.0.1:", 16), "PUNCH to a: %d parts, '%s' '%s'", np,
           part[0], np > 2 ? part[2] : "");
    struct timeval tv = { 5, 0 };
    setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    int a = accept(lfd, (struct sockaddr *)&from, &fl);
    CHECKF(a >= 0 && ntohs(from.sin_port) == port_of(part[2]),
           "a's connection came from port %d, it announced %d", a >= 0 ? ntohs(from.sin_port) : -1,
           port_of(part[2]));
    if (a >= 0)
        close(a);
    close(lfd);
    /* the dial hook: a member behind the same relay (d, at its relayed
     * port) is dialled at a local proxy, the same one each time; this
     * peer's own address and others' are dialled as they are */
    char out[300], out2[300];
    CHECK(rumor_relay_client_dial(e.client, "tcp://10.1.2.3:5", out, sizeof out) > 0 &&
          !strcmp(out, "tcp://10.1.2.3:5"));
    CHECK(rumor_relay_client_dial(e.client, e.relayed, out, sizeof out) > 0 &&
          !strcmp(out, e.relayed));
    char dep[64];
    snprintf(dep, sizeof dep, "tcp://127.0.0.1:%d", port_of(drelayed));
    rumor_relay_client_dial(e.client, dep, out, sizeof out);
    rumor_relay_client_dial(e.client, dep, out2, sizeof out2);
    CHECKF(strncmp(out, "tcp://127.0.0.1:", 16) == 0 && strcmp(out, dep) != 0 &&
           !strcmp(out, out2), "a member behind the same relay dialled at %s, then %s", out,
           out2);
    rumor_relay_stats(e.relay, &st);
    CHECKF(st.punches == 1 && st.probes == 2, "punches brokered %llu, probes %llu",
           (unsigned long long)st.punches, (unsigned long long)st.probes);
    zmq_close(d);
    zmq_ctx_term(ctx);
    ends_down(&e);
}

static void test_bad_back(void)
{
    struct ends e;
    ends_up(&e, 1, 0, NULL);
    double secs;
    CHECK(pump(&e, 2, 1024, &secs, NULL) == 2);
    /* the back port, as the relay tells it: a registration of b's own */
    void *ctx = zmq_ctx_new();
    char part[4][300];
    int len[4];
    void *d = raw_register(ctx, e.relay, &kb, part, len);
    const char *colon = strrchr(part[2], ':');
    int bport = colon ? atoi(colon + 1) : 0;
    rumor_relay_stats_t st;
    rumor_relay_stats(e.relay, &st);
    uint64_t bad0 = st.backs_bad, spliced0 = st.conns_spliced;
    /* garbage, then the right magic with a wrong token */
    for (int k = 0; k < 2; k++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)bport),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0);
        unsigned char hdr[48];
        memset(hdr, k ? 0x5a : 0xff, sizeof hdr);
        if (k) {
            memcpy(hdr, "RUMORRLY", 8);
            memset(hdr + 40, 0, 8);
            hdr[40] = 1; /* connection 1 exists (the pump's) or did */
        }
        CHECK(write(s, hdr, sizeof hdr) == (ssize_t)sizeof hdr);
        char c;
        struct timeval tv = { 3, 0 };
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        CHECKF(read(s, &c, 1) == 0, "a bad header (%s) is closed", k ? "wrong token" : "garbage");
        close(s);
    }
    rumor_relay_stats(e.relay, &st);
    CHECKF(st.backs_bad == bad0 + 2 && st.conns_spliced == spliced0,
           "bad headers counted %llu, spliced %llu", (unsigned long long)(st.backs_bad - bad0),
           (unsigned long long)(st.conns_spliced - spliced0));
    CHECK(pump(&e, 2, 1024, &secs, NULL) == 2); /* the path still works */
    zmq_close(d);
    zmq_ctx_term(ctx);
    ends_down(&e);
}

/* The bandwidth a relay gives a peer: 16 Mbit/s (2 MB/s) both ways
 * together; 3 MB take about 1.5 s there and far less without a limit. */
static void test_rate(void)
{
    struct ends e;
    double limited, free_secs;
    ends_up(&e, 0, 16, NULL);
    int got = pump(&e, 48, 64 * 1024, &limited, NULL);
    rumor_relay_stats_t st;
    rumor_relay_stats(e.relay, &st);
    CHECKF(st.dropped_silent == 0, "a registration in use was dropped as silent");
    ends_down(&e);
    ends_up(&e, 0, 0, NULL);
    int got2 = pump(&e, 48, 64 * 1024, &free_secs, NULL);
    ends_down(&e);
    CHECK(got == 48 && got2 == 48);
    double mbit = 48 * 64 * 1024 * 8 / limited / 1e6;
    fprintf(stderr, "relay: 3 MiB at a 16 Mbit/s limit: %.2f s (%.1f Mbit/s); unlimited %.3f s\n",
            limited, mbit, free_secs);
    CHECKF(mbit <= 16 * 1.15 && mbit >= 16 * 0.5, "%.1f Mbit/s through a 16 Mbit/s relay", mbit);
    CHECKF(free_secs < limited / 3, "unlimited %.2f s against limited %.2f s", free_secs, limited);
}

/* The relay dies: the peer says so within the heartbeat timeout, and
 * registers again when a relay answers at that address. */
static void test_relay_death(void)
{
    int rp = tu_free_port();
    rumor_relay_t *r = NULL;
    CHECK_OK(relay_at(rp, 1, 4, 0, NULL, &r));
    rumor_relay_client_t *c = NULL;
    CHECK_OK(client_of(rp, &ka, "tcp://127.0.0.1:1", 5, &c));
    rumor_relay_stop(&r);
    double t0 = rumor_now();
    rumor_relay_client_stats_t cs = { .alive = 1 };
    while (cs.alive && rumor_now() - t0 < 5) {
        rumor_sleep(0.05);
        rumor_relay_client_stats(c, &cs);
    }
    double dead = rumor_now() - t0;
    CHECKF(!cs.alive && dead < 2.6, "the relay's death noticed after %.2f s (timeout 1 s)", dead);
    CHECK_OK(relay_at(rp, 1, 4, 0, NULL, &r));
    t0 = rumor_now();
    while (!cs.alive && rumor_now() - t0 < 5) {
        rumor_sleep(0.05);
        rumor_relay_client_stats(c, &cs);
    }
    CHECKF(cs.alive, "registered again with the new relay after %.2f s", rumor_now() - t0);
    rumor_relay_stats_t st;
    rumor_relay_stats(r, &st);
    CHECK(st.registered == 1);
    rumor_relay_client_stop(&c);
    rumor_relay_stop(&r);
}

/* A relay in a child process (so that it can be stopped: silent, its
 * connections open); its pid, or -1. */
static pid_t relay_child(int port)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        rumor_relay_t *r = NULL;
        char ok = relay_at(port, 1, 4, 0, NULL, &r) == 0;
        if (write(fds[1], &ok, 1) != 1 || !ok)
            _exit(1);
        for (;;)
            pause();
    }
    close(fds[1]);
    char ok = 0;
    if (pid < 0 || read(fds[0], &ok, 1) != 1 || !ok) {
        if (pid > 0)
            kill(pid, SIGKILL);
        pid = -1;
    }
    close(fds[0]);
    return pid;
}

/* Two relays: the first dies, the peer registers with the second and a
 * neighbour reaches it at its new address. The second is in the list from
 * the start, or learned later (as from the membership:
 * rumor_relay_client_add). A relay whose process ended closes its
 * connection, and the move is at once; one that is silent with its
 * connection open (its machine hangs: here a stopped process) is left
 * after the heartbeat timeout. */
enum { LISTED, LEARNED, SILENT };

static void test_failover(int how)
{
    int learned = how == LEARNED;
    int p1 = tu_free_port(), p2 = tu_free_port();
    rumor_relay_t *r1 = NULL, *r2 = NULL;
    pid_t child = -1;
    if (how == SILENT)
        CHECK((child = relay_child(p1)) > 0);
    else
        CHECK_OK(relay_at(p1, 1, 4, 0, NULL, &r1));
    CHECK_OK(relay_at(p2, 1, 4, 0, NULL, &r2));
    struct ends e = { 0 };
    e.a = transport(&ka, tu_free_port());
    e.b = transport(&kb, tu_free_port());
    if (learned) {
        CHECK_OK(client_of(p1, &ka, rumor_transport_endpoint(e.a), 5, &e.client));
        char ep2[64];
        snprintf(ep2, sizeof ep2, "tcp://127.0.0.1:%d", p2);
        CHECK(rumor_relay_client_add(e.client, ep2, kr.public_key) == 1);
        CHECK(rumor_relay_client_add(e.client, ep2, kr.public_key) == 0); /* known */
        CHECK_ERR(rumor_relay_client_add(e.client, ep2, NULL), RUMOR_EINVAL, "its key");
    } else {
        CHECK_OK(client_of2(p1, p2, &ka, rumor_transport_endpoint(e.a), 5, &e.client));
    }
    char first[300], now_ep[300];
    rumor_relay_client_endpoint(e.client, first, sizeof first);
    CHECK_OK(rumor_transport_connect_curve(e.b, 0, first, ka.public_key));
    double secs;
    CHECK(pump(&e, 3, 4096, &secs, NULL) == 3);
    if (how == SILENT)
        kill(child, SIGSTOP);
    else
        rumor_relay_stop(&r1);
    double t0 = rumor_now();
    rumor_relay_client_stats_t cs = { 0 };
    while (rumor_now() - t0 < 6) {
        rumor_sleep(0.05);
        rumor_relay_client_stats(e.client, &cs);
        if (cs.moved)
            break;
    }
    double moved = rumor_now() - t0;
    rumor_relay_client_endpoint(e.client, now_ep, sizeof now_ep);
    CHECKF(cs.moved == 1 && cs.relay == 1 && strcmp(first, now_ep) != 0,
           "moved %llu times to relay %d (%s, was %s)", (unsigned long long)cs.moved, cs.relay,
           now_ep, first);
    if (how == SILENT)
        CHECKF(moved > 0.5 && moved < 3.5, "registered with the second relay %.2f s after the "
               "first fell silent (heartbeat timeout 1 s)", moved);
    else
        CHECKF(moved < 0.5, "registered with the second relay %.2f s after the first closed",
               moved);
    fprintf(stderr, "relay: failover to the second relay (%s, the first %s) after %.2f s\n",
            learned ? "learned" : "listed", how == SILENT ? "silent" : "closed", moved);
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    CHECK_OK(rumor_transport_connect_curve(e.b, 0, now_ep, ka.public_key));
    uint64_t sender = 0;
    CHECK(pump(&e, 3, 4096, &secs, &sender) == 3);
    CHECK(sender == rumor_curve_id(kb.public_key));
    rumor_relay_stats_t st;
    rumor_relay_stats(r2, &st);
    CHECKF(st.registered == 1 && st.conns_spliced >= 1, "the second relay registered %llu, "
           "spliced %llu", (unsigned long long)st.registered,
           (unsigned long long)st.conns_spliced);
    e.relay = r2;
    ends_down(&e);
}

int main(void)
{
    rumor_log_set_level(RUMOR_LOG_ERROR);
    tu_watchdog(120, "test_relay");
    CHECK_OK(rumor_curve_keygen(&kr));
    CHECK_OK(rumor_curve_keygen(&ka));
    CHECK_OK(rumor_curve_keygen(&kb));
    CHECK_OK(rumor_curve_keygen(&kc));
    CHECK_OK(rumor_allowlist_new(&allow));
    CHECK_OK(rumor_allowlist_add(allow, kr.public_key, "relay"));
    CHECK_OK(rumor_allowlist_add(allow, ka.public_key, "a"));
    CHECK_OK(rumor_allowlist_add(allow, kb.public_key, "b"));
    test_splice(1);
    test_splice(0);
    test_refusals();
    test_bad_back();
    test_punch_broker();
    test_rate();
    test_relay_death();
    test_failover(LISTED);
    test_failover(LEARNED);
    test_failover(SILENT);
    rumor_allowlist_destroy(&allow);
    return tu_finish("test_relay");
}

/* Benchmark: gossip throughput with CURVE vs plaintext, in the same run.
 *
 * Two processes on tcp://127.0.0.1, each with its own rumor transport: a
 * sender pushes 16 MiB transfers cut into 1 MiB zero-copy messages
 * (rumor_transport_send, SNDHWM 4) and a receiver pulls them (RCVHWM 4).
 * Each window moves RUMOR_BENCH_MB MiB (default 512); the figure is the
 * receiver's bytes per second from its first message to its last (the
 * handshake is outside the window). Configurations, interleaved round by
 * round so that drift hits all alike:
 *     plain / curve  x  io_threads 1 / 2  x  1 / 2 connections per peer
 * Ratios are medians of per-round ratios; absolute figures are medians.
 *
 * The limit measured in the same run: libsodium's crypto_box_afternm and
 * crypto_box_open_afternm (XSalsa20-Poly1305, what libzmq's CURVE calls per
 * message) over 1 MiB buffers on one core. A CURVE stream pays one of each
 * per byte, plus ZeroMQ's copies, so on one core per side it cannot beat
 * the slower of the two.
 *
 * Also printed: the CPU the two processes used per second of window
 * ("cores"), to show when the machine, not the protocol, is the limit
 * (this VM has 2 vCPUs: sender and receiver share them), and their minor
 * page faults per MiB moved (libzmq's CURVE allocates two message-sized
 * buffers a message on each side; where glibc serves them from fresh
 * pages every time, the faults cost more than the cipher). */
#include <errno.h>
#include <signal.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "curve.h"
#include "log.h"
#include "transport.h"
#include "bench_util.h"

#define CHUNK ((size_t)1 << 20)     /* bytes a message */
#define TRANSFER ((size_t)16 << 20) /* bytes a transfer */
#define MAX_ROUNDS 15

typedef struct cfg {
    int curve, io, conns;
} cfg_t;

/* Pairs: plaintext then CURVE with the same threads and connections. The
 * last pair runs only where there are cores for it (8 or more online). */
static const cfg_t cfgs[] = {
    { 0, 1, 1 }, { 1, 1, 1 }, { 0, 2, 1 }, { 1, 2, 1 }, { 0, 1, 2 },
    { 1, 1, 2 }, { 0, 2, 2 }, { 1, 2, 2 }, { 0, 4, 4 }, { 1, 4, 4 },
};
#define MAX_CFG ((int)(sizeof cfgs / sizeof cfgs[0]))
static int ncfg = MAX_CFG;

typedef struct result {
    double mbps;  /* MB/s (10^6) at the receiver */
    double cores; /* CPU seconds of both processes per second of window */
    double faults; /* minor page faults of both processes per MiB moved */
} result_t;

static rumor_curve_keypair_t snd_keys, rcv_keys;
static rumor_allowlist_t *snd_allow, *rcv_allow; /* each side admits the other */
static size_t window_bytes;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_minflt;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_curve: %s: %s\n", what, rumor_err_msg());
    _exit(2);
}

static void write_all(int fd, const void *p, size_t n)
{
    if (write(fd, p, n) != (ssize_t)n)
        _exit(3);
}

static int read_all(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static rumor_transport_t *make_transport(const cfg_t *c, int sender)
{
    rumor_transport_opts_t o = { .listen = "tcp://127.0.0.1:*",
                                 .max_msg_size = CHUNK + 4096,
                                 .sndhwm = 4,
                                 .rcvhwm = 4,
                                 .io_threads = c->io,
                                 .conns_per_peer = c->conns };
    if (c->curve) {
        o.keys = sender ? &snd_keys : &rcv_keys;
        o.allow = sender ? snd_allow : rcv_allow;
    }
    rumor_transport_t *t;
    if (rumor_transport_create(&o, 1, &t) < 0)
        die("transport");
    return t;
}

/* Receives window_bytes of payload; writes {seconds, cpu seconds} of the
 * window (first payload to last) to fd. */
static void receiver(const cfg_t *c, int ep_fd, int res_fd)
{
    rumor_transport_t *t = make_transport(c, 0);
    char ep[256];
    snprintf(ep, sizeof ep, "%s", rumor_transport_endpoint(t));
    write_all(ep_fd, ep, sizeof ep);
    void *pull = rumor_transport_pull(t);
    int tmo = 20000;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    size_t bytes = 0, first = 0;
    double t0 = 0, c0 = 0, f0 = 0;
    while (bytes < window_bytes) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, pull, 0) < 0)
            die("receive timed out");
        size_t n = zmq_msg_size(&m);
        if (zmq_msg_more(&m) == 0 && n >= CHUNK) { /* a payload frame */
            if (bytes == 0) {
                t0 = now_s();
                c0 = rumor_cpu_now();
                f0 = minflt();
                first = n;
            }
            bytes += n;
        }
        zmq_msg_close(&m);
    }
    double r[4] = { now_s() - t0, rumor_cpu_now() - c0, (double)(bytes - first), minflt() - f0 };
    write_all(res_fd, r, sizeof r);
    rumor_transport_destroy(&t);
    _exit(0);
}

/* Sends window_bytes and reports its CPU seconds over the sends; then
 * waits for the parent to close hold_fd before letting go of its buffer. */
static void sender(const cfg_t *c, const char *ep, int res_fd, int hold_fd)
{
    rumor_transport_t *t = make_transport(c, 1);
    int rc = c->curve ? rumor_transport_connect_curve(t, 0, ep, rcv_keys.public_key)
                      : rumor_transport_connect(t, 0, ep);
    if (rc < 0)
        die("connect");
    static rumor_sendbuf_t buf;
    buf.n = TRANSFER / sizeof(float);
    buf.data = malloc(TRANSFER);
    if (!buf.data)
        _exit(4);
    memset(buf.data, 0x5a, TRANSFER); /* first touch outside the window */
    void *push = rumor_transport_push(t, 0);
    size_t total = window_bytes, sent = 0;
    uint64_t hdr[2] = { 0, 0 };
    double c0 = rumor_cpu_now(), f0 = minflt();
    while (sent < total) {
        size_t off = sent % TRANSFER;
        hdr[0] = sent;
        rc = rumor_transport_send(t, 0, hdr, sizeof hdr, &buf, (char *)buf.data + off, CHUNK);
        if (rc < 0)
            die("send");
        if (rc == 1) {
            zmq_pollitem_t it = { push, 0, ZMQ_POLLOUT, 0 };
            zmq_poll(&it, 1, 100);
            continue;
        }
        sent += CHUNK;
    }
    double r[2] = { rumor_cpu_now() - c0, minflt() - f0 };
    write_all(res_fd, r, sizeof r);
    char b;
    while (read(hold_fd, &b, 1) > 0) {
    }
    rumor_transport_destroy(&t); /* frees every message: refs drop to 0 */
    free(buf.data);
    _exit(0);
}

/* One window of one configuration, in two fresh processes. */
static result_t run_pair(const cfg_t *c)
{
    int ep_p[2], rres[2], sres[2], hold[2];
    if (pipe(ep_p) || pipe(rres) || pipe(sres) || pipe(hold)) {
        perror("pipe");
        exit(2);
    }
    pid_t rp = fork();
    if (rp == 0) {
        alarm(120);
        receiver(c, ep_p[1], rres[1]);
    }
    char ep[256];
    if (read_all(ep_p[0], ep, sizeof ep) < 0) {
        fprintf(stderr, "bench_curve: the receiver did not start\n");
        exit(2);
    }
    pid_t sp = fork();
    if (sp == 0) {
        alarm(120);
        close(hold[1]);
        sender(c, ep, sres[1], hold[0]);
    }
    close(hold[0]);
    double rr[4] = { 0, 0, 0, 0 }, sr[2] = { 0, 0 };
    int bad = read_all(rres[0], rr, sizeof rr) < 0 || read_all(sres[0], sr, sizeof sr) < 0;
    close(hold[1]);
    int st1, st2;
    waitpid(rp, &st1, 0);
    waitpid(sp, &st2, 0);
    int fds[] = { ep_p[0], ep_p[1], rres[0], rres[1], sres[0], sres[1] };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
    if (bad || !WIFEXITED(st1) || WEXITSTATUS(st1) || !WIFEXITED(st2) || WEXITSTATUS(st2)) {
        fprintf(stderr, "bench_curve: a child failed (%s, io %d, conns %d)\n",
                c->curve ? "curve" : "plain", c->io, c->conns);
        exit(2);
    }
    /* The sender's CPU covers its whole sending loop, a little longer
     * than the receiver's window: "cores" is a slight overestimate. */
    result_t r = { rr[2] / rr[0] / 1e6, (rr[1] + sr[0]) / rr[0],
                   (rr[3] + sr[1]) / (rr[2] / (1 << 20)) };
    return r;
}

/* One core's XSalsa20-Poly1305 speed over 1 MiB messages, MB/s. */
static void sodium_limit(double *seal, double *open)
{
    size_t n = CHUNK + crypto_box_ZEROBYTES;
    uint8_t *p = calloc(1, n), *cbox = calloc(1, n), *back = calloc(1, n);
    uint8_t pk[32], sk[32], k[crypto_box_BEFORENMBYTES], nonce[crypto_box_NONCEBYTES] = { 0 };
    crypto_box_keypair(pk, sk);
    if (!p || !cbox || !back || crypto_box_beforenm(k, pk, sk) != 0)
        exit(2);
    double best_s = 0, best_o = 0;
    for (int rep = 0; rep < 3; rep++) {
        int iters = 256;
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            nonce[0] = (uint8_t)i;
            crypto_box_afternm(cbox, p, n, nonce, k);
        }
        double t1 = now_s();
        for (int i = 0; i < iters; i++)
            if (crypto_box_open_afternm(back, cbox, n, nonce, k) != 0)
                exit(2);
        double t2 = now_s();
        double s = (double)iters * CHUNK / (t1 - t0) / 1e6, o = (double)iters * CHUNK / (t2 - t1) / 1e6;
        best_s = s > best_s ? s : best_s;
        best_o = o > best_o ? o : best_o;
    }
    *seal = best_s;
    *open = best_o;
    free(p);
    free(cbox);
    free(back);
}

static const char *cfg_name(const cfg_t *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s_%dio_%dconn", c->curve ? "curve" : "plain", c->io, c->conns);
    return buf;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (sodium_init() < 0 || !zmq_has("curve")) {
        fprintf(stderr, "bench_curve: no CURVE here\n");
        return 77;
    }
    const char *e = getenv("RUMOR_BENCH_MB");
    window_bytes = (size_t)(e && atoi(e) > 0 ? atoi(e) : 512) << 20;
    e = getenv("RUMOR_BENCH_ROUNDS");
    int rounds = e && atoi(e) > 0 ? atoi(e) : 3;
    if (rounds > MAX_ROUNDS)
        rounds = MAX_ROUNDS;
    if (rumor_curve_keygen(&snd_keys) < 0 || rumor_curve_keygen(&rcv_keys) < 0 ||
        rumor_allowlist_new(&snd_allow) < 0 || rumor_allowlist_new(&rcv_allow) < 0 ||
        rumor_allowlist_add(rcv_allow, snd_keys.public_key, "sender") < 0 ||
        rumor_allowlist_add(snd_allow, rcv_keys.public_key, "receiver") < 0)
        die("keys");

    double seal, open_;
    sodium_limit(&seal, &open_);
    printf("bench_curve: %zu MiB windows of 16 MiB transfers in 1 MiB messages, %d rounds, "
           "%ld CPUs online\n",
           window_bytes >> 20, rounds, sysconf(_SC_NPROCESSORS_ONLN));
    printf("bench: sodium_box_seal_1core = %.0f MB/s\n", seal);
    printf("bench: sodium_box_open_1core = %.0f MB/s\n", open_);
    fflush(stdout);

    if (sysconf(_SC_NPROCESSORS_ONLN) < 8)
        ncfg = MAX_CFG - 2;
    double mbps[MAX_CFG][MAX_ROUNDS], cores[MAX_CFG][MAX_ROUNDS], faults[MAX_CFG][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < ncfg; i++) {
            result_t x = run_pair(&cfgs[i]);
            mbps[i][r] = x.mbps;
            cores[i][r] = x.cores;
            faults[i][r] = x.faults;
        }
    char name[64];
    for (int i = 0; i < ncfg; i++) {
        printf("bench: %s = %.0f MB/s\n", cfg_name(&cfgs[i], name, sizeof name),
               bench_median(mbps[i], rounds));
        printf("bench: %s_cores = %.2f cores\n", name, bench_median(cores[i], rounds));
        printf("bench: %s_faults = %.0f faults/MiB\n", name, bench_median(faults[i], rounds));
    }
    /* Ratios: curve against plaintext with the same threads and connections
     * (cfgs alternate plain, curve), and the best CURVE setting against the
     * default one. */
    for (int i = 0; i + 1 < ncfg; i += 2) {
        double q[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++)
            q[r] = mbps[i + 1][r] / mbps[i][r];
        printf("bench: curve_vs_plain_%dio_%dconn = %.2f x\n", cfgs[i].io, cfgs[i].conns,
               bench_median(q, rounds));
    }
    int base = 1, best = 1;
    for (int i = 3; i < ncfg; i += 2)
        if (bench_median(mbps[i], rounds) > bench_median(mbps[best], rounds))
            best = i;
    double q[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        q[r] = mbps[best][r] / mbps[base][r];
    printf("bench: curve_best_vs_curve_1io_1conn = %.2f x (%s)\n", bench_median(q, rounds),
           cfg_name(&cfgs[best], name, sizeof name));
    for (int r = 0; r < rounds; r++)
        q[r] = mbps[best][r] / mbps[0][r];
    printf("bench: curve_best_vs_plain_1io_1conn = %.2f x\n", bench_median(q, rounds));
    rumor_curve_keypair_clear(&snd_keys);
    rumor_curve_keypair_clear(&rcv_keys);
    rumor_allowlist_destroy(&snd_allow);
    rumor_allowlist_destroy(&rcv_allow);
    return 0;
}

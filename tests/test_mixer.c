/* The D-PSGD mixer and ring all-reduce between real processes over real
 * ZeroMQ sockets (TCP on loopback).
 *
 * 1. Exact arithmetic: 3 peers on the path 0-1-2 (grid:1x3) with
 *    Metropolis-Hastings weights W00 = W22 = 2/3, W11 = 1/3, W01 = W12 = 1/3,
 *    known parameters and gradients, chunks smaller than the model: after
 *    each of 3 rounds every peer's parameters equal the mix computed by hand
 *    in double precision (then - lr * g), to float rounding.
 * 2. All-reduce: the mean of 3 known vectors, segments not dividing evenly.
 * 3. A peer that never starts: no round of its neighbours waits longer than
 *    the deadline, and its weight goes to the self-weight.
 * 4. Hostile input: raw messages with a bad magic, another swarm, another
 *    model size, an unknown sender, a stale round, a NaN payload and an
 *    off-grid chunk are dropped and counted by reason; the mix is unchanged. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "mixer.h"
#include "testutil.h"

#define NP 1000   /* parameters */
#define CHUNK 96  /* elements per chunk: 11 chunks, the last one partial */
#define LR 0.1

static char endpoints[3][64];
static const char *eps[3];

static double x0_of(int peer, int i) { return (peer + 1) * 0.01 * (i % 37) - 0.1 * peer; }
static double g_of(int peer, int i) { return 0.001 * (peer + 1) * ((i % 5) - 2); }

static rumor_mixer_t *make_mixer(rumor_topo_t *t, int self, const float *init, double timeout)
{
    rumor_mixer_config_t c = { 0 };
    c.topo = t;
    c.self = self;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("test");
    c.nparams = NP;
    c.chunk_elems = CHUNK;
    c.round_timeout = timeout;
    rumor_mixer_t *m = NULL;
    if (rumor_mixer_create(&c, init, &m) < 0) {
        fprintf(stderr, "peer %d: %s\n", self, rumor_err_msg());
        exit(2);
    }
    return m;
}

/* Child: 3 rounds of mix + SGD, checked against the hand-computed values. */
static int exact_child(int self)
{
    rumor_topo_t *t;
    if (rumor_topo_parse("grid:1x3", &t) < 0)
        return 2;
    static float init[NP];
    static double ref[3][NP];
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < NP; i++)
            ref[p][i] = (float)x0_of(p, i);
    for (int i = 0; i < NP; i++)
        init[i] = (float)ref[self][i];
    rumor_mixer_t *m = make_mixer(t, self, init, 20.0);
    if (rumor_mixer_barrier(m, 20.0) < 2) {
        fprintf(stderr, "peer %d: barrier failed\n", self);
        return 1;
    }
    static const double W[3][3] = { { 2.0 / 3, 1.0 / 3, 0 },
                                    { 1.0 / 3, 1.0 / 3, 1.0 / 3 },
                                    { 0, 1.0 / 3, 2.0 / 3 } };
    int bad = 0;
    for (long k = 0; k < 3; k++) {
        CHECK_OK(rumor_mixer_round_begin(m, k));
        float *x;
        rumor_round_stats_t st;
        CHECK_OK(rumor_mixer_round_end(m, k, &x, &st));
        CHECK(st.timed_out == 0 && st.complete == st.in_neighbors);
        for (int i = 0; i < NP; i++)
            x[i] -= (float)(LR * g_of(self, i)); /* the caller's SGD step */
        /* hand-computed: x_p(k+1) = sum_q W_pq x_q(k) - lr g_p */
        static double next[3][NP];
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < NP; i++) {
                double v = 0;
                for (int q = 0; q < 3; q++)
                    v += W[p][q] * ref[q][i];
                next[p][i] = v - LR * g_of(p, i);
            }
        memcpy(ref, next, sizeof ref);
        for (int i = 0; i < NP; i++)
            if (fabs(x[i] - ref[self][i]) > 1e-6 + 1e-5 * fabs(ref[self][i])) {
                if (bad++ < 3)
                    fprintf(stderr, "peer %d round %ld x[%d] = %.9g, expected %.9g\n", self, k, i,
                            x[i], ref[self][i]);
            }
    }
    CHECKF(bad == 0, "peer %d: %d parameters off", self, bad);

    /* All-reduce mean of buf_p[i] = p*1000 + i over the 3 peers. */
    static float buf[NP];
    for (int i = 0; i < NP; i++)
        buf[i] = (float)(self * 1000 + i);
    CHECK_OK(rumor_mixer_allreduce_mean(m, buf, NP, 1, 10.0));
    int off = 0;
    for (int i = 0; i < NP; i++)
        if (fabsf(buf[i] - (float)(1000 + i)) > 1e-3f)
            off++;
    CHECKF(off == 0, "peer %d: all-reduce mean wrong at %d places (buf[0] = %g)", self, off,
           buf[0]);
    /* A second call with the next tag works too. */
    for (int i = 0; i < NP; i++)
        buf[i] = (float)(self == 2 ? 3.0 : 0.0);
    CHECK_OK(rumor_mixer_allreduce_mean(m, buf, NP, 2, 10.0));
    CHECK_CLOSE(buf[NP - 1], 1.0, 1e-6, 0);
    rumor_wire_stats_t ws;
    rumor_mixer_wire_stats(m, &ws);
    CHECKF(rumor_wire_stats_rejected(&ws) == 0, "peer %d: %llu messages rejected", self,
           (unsigned long long)rumor_wire_stats_rejected(&ws));
    rumor_mixer_destroy(&m, 5.0);
    rumor_topo_destroy(&t);
    return tu_failures ? 1 : 0;
}

/* Child for the missing-peer case: peer `self` of grid:1x3 where peer 2
 * never starts. Rounds must end at the deadline and no later. */
static int missing_child(int self)
{
    rumor_topo_t *t;
    if (rumor_topo_parse("grid:1x3", &t) < 0)
        return 2;
    static float init[NP];
    for (int i = 0; i < NP; i++)
        init[i] = (float)x0_of(self, i);
    const double timeout = 0.4;
    rumor_mixer_t *m = make_mixer(t, self, init, timeout);
    rumor_mixer_barrier(m, 1.0); /* peer 2 never answers */
    double worst = 0;
    for (long k = 0; k < 4; k++) {
        double t0 = rumor_now();
        CHECK_OK(rumor_mixer_round_begin(m, k));
        float *x;
        rumor_round_stats_t st;
        CHECK_OK(rumor_mixer_round_end(m, k, &x, &st));
        double dt = rumor_now() - t0;
        worst = dt > worst ? dt : worst;
        if (self == 1) { /* peer 2's weight 1/3 moved to the self-weight */
            CHECK(st.in_neighbors == 2 && st.complete == 1);
            CHECK_CLOSE(st.self_weight, 2.0 / 3, 1e-9, 0);
        } else {
            CHECK(st.in_neighbors == 1);
        }
    }
    CHECKF(worst < timeout + 0.25, "peer %d: a round took %.3f s with a deadline of %.1f s", self,
           worst, timeout);
    fprintf(stderr, "peer %d: slowest round %.3f s (deadline %.1f s)\n", self, worst, timeout);
    rumor_mixer_destroy(&m, 1.0);
    rumor_topo_destroy(&t);
    return tu_failures ? 1 : 0;
}

static int run_children(int (*fn)(int), int n)
{
    pid_t pids[3];
    for (int p = 0; p < n; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            alarm(60); /* a hang is a failure, never a stuck suite */
            _exit(fn(p));
        }
    }
    int failed = 0;
    for (int p = 0; p < n; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "peer %d: %s %d\n", p, WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            failed++;
        }
    }
    return failed;
}

/* Sends one raw message to the mixer at endpoints[0]. */
static void send_raw(void *push, const rumor_wire_hdr_t *h, const float *payload, size_t n,
                     int corrupt_magic)
{
    uint8_t b[RUMOR_WIRE_HDR_LEN];
    rumor_wire_encode(h, b);
    if (corrupt_magic)
        b[0] ^= 0xff;
    zmq_send(push, b, sizeof b, payload ? ZMQ_SNDMORE : 0);
    if (payload)
        zmq_send(push, payload, n * sizeof(float), 0);
}

/* Peer 0 of ring:2 receives hostile messages plus peer 1's real ones. */
static void check_hostile(void)
{
    rumor_topo_t *t;
    CHECK_OK(rumor_topo_parse("ring:2", &t));
    static float init[NP];
    for (int i = 0; i < NP; i++)
        init[i] = 1.0f;
    rumor_mixer_t *m = make_mixer(t, 0, init, 3.0);
    void *ctx = zmq_ctx_new(), *push = zmq_socket(ctx, ZMQ_PUSH);
    int zero = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(push, endpoints[0]);
    usleep(200000);
    rumor_wire_hdr_t h = { 0 };
    h.type = RUMOR_WIRE_PARAMS;
    h.dtype = RUMOR_WIRE_DT_F32;
    h.swarm = rumor_wire_swarm_id("test");
    h.sender = 2; /* node 1 */
    h.incarnation = 5;
    h.round = 0;
    h.space = NP;
    h.nchunks = (NP + CHUNK - 1) / CHUNK;
    h.length = CHUNK;
    static float chunk[CHUNK], nan_chunk[CHUNK];
    for (int i = 0; i < CHUNK; i++) {
        chunk[i] = 3.0f;
        nan_chunk[i] = i == 17 ? NAN : 3.0f;
    }
    CHECK_OK(rumor_mixer_round_begin(m, 0));
    rumor_wire_hdr_t b;
    b = h; send_raw(push, &b, chunk, CHUNK, 1);                 /* bad magic */
    b = h; b.swarm ^= 1; send_raw(push, &b, chunk, CHUNK, 0);   /* another swarm */
    b = h; b.space = NP + 1; send_raw(push, &b, chunk, CHUNK, 0); /* another model */
    b = h; b.sender = 99; send_raw(push, &b, chunk, CHUNK, 0);  /* unknown sender */
    b = h; b.round = 5; send_raw(push, &b, chunk, CHUNK, 0);    /* too far ahead */
    b = h; send_raw(push, &b, nan_chunk, CHUNK, 0);             /* NaN */
    b = h; b.offset = 1; send_raw(push, &b, chunk, CHUNK, 0);   /* off the grid */
    b = h; b.length = CHUNK - 1; send_raw(push, &b, chunk, CHUNK - 1, 0); /* short chunk */
    /* Now the real round 0 from "peer 1": every chunk of 3.0. */
    for (uint32_t c = 0; c < h.nchunks; c++) {
        b = h;
        b.chunk = c;
        b.offset = (uint64_t)c * CHUNK;
        b.length = c == h.nchunks - 1 ? NP - b.offset : CHUNK;
        send_raw(push, &b, chunk, b.length, 0);
    }
    b = h; send_raw(push, &b, chunk, CHUNK, 0);                 /* duplicate */
    float *x;
    rumor_round_stats_t st;
    CHECK_OK(rumor_mixer_round_end(m, 0, &x, &st));
    /* ring:2 with MH: W01 = 1/2: x = (1 + 3) / 2 everywhere */
    int off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - 2.0f) > 1e-6f;
    CHECKF(off == 0, "hostile input changed the mix at %d places (x[17] = %g)", off, x[17]);
    CHECK(st.complete == 1 && !st.timed_out);
    /* An old incarnation and a stale round, now that round 0 is mixed. */
    b = h; b.incarnation = 4; send_raw(push, &b, chunk, CHUNK, 0);
    b = h; b.round = 0; send_raw(push, &b, chunk, CHUNK, 0);
    usleep(300000);
    rumor_wire_stats_t ws;
    rumor_mixer_wire_stats(m, &ws);
    char line[512];
    rumor_wire_stats_format(&ws, line, sizeof line);
    fprintf(stderr, "hostile: %s\n", line);
    CHECK(ws.rejected[RUMOR_WIRE_BAD_MAGIC] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_WRONG_SWARM] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_WRONG_SPACE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_UNKNOWN_SENDER] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_FUTURE_ROUND] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_NONFINITE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_BAD_RANGE] == 2);
    CHECK(ws.rejected[RUMOR_WIRE_DUPLICATE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_OLD_INCARNATION] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_STALE_ROUND] == 1);
    CHECK(ws.accepted == h.nchunks);
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    rumor_topo_destroy(&t);
}

int main(int argc, char **argv)
{
    /* argv[1]: run one part only (exact, missing, hostile), for debugging */
    const char *only = argc > 1 ? argv[1] : "";
    signal(SIGPIPE, SIG_IGN);
    for (int p = 0; p < 3; p++) {
        snprintf(endpoints[p], sizeof endpoints[p], "tcp://127.0.0.1:%d", tu_free_port());
        eps[p] = endpoints[p];
    }
    if (!*only || !strcmp(only, "exact"))
        CHECKF(run_children(exact_child, 3) == 0, "exact arithmetic / all-reduce");
    for (int p = 0; p < 3; p++) {
        snprintf(endpoints[p], sizeof endpoints[p], "tcp://127.0.0.1:%d", tu_free_port());
        eps[p] = endpoints[p];
    }
    if (!*only || !strcmp(only, "missing"))
        CHECKF(run_children(missing_child, 2) == 0, "missing peer");
    snprintf(endpoints[0], sizeof endpoints[0], "tcp://127.0.0.1:%d", tu_free_port());
    snprintf(endpoints[1], sizeof endpoints[1], "tcp://127.0.0.1:%d", tu_free_port());
    if (!*only || !strcmp(only, "hostile"))
        check_hostile();
    return tu_finish("test_mixer");
}

/* The D-PSGD mixer and ring all-reduce between real processes over real
 * ZeroMQ sockets (TCP on loopback).
 *
 * 1. Exact arithmetic with unlike cuts: 3 peers on the path 0-1-2
 *    (grid:1x3) with Metropolis-Hastings weights W00 = W22 = 2/3, W11 = 1/3,
 *    W01 = W12 = 1/3, known parameters and gradients, and each peer its own
 *    chunk size (96, 40 and the whole model): after each of 3 rounds every
 *    peer's parameters equal the mix computed by hand in double precision
 *    (then - lr * g), to float rounding.
 * 2. All-reduce with the same unlike cuts: the mean of 3 known vectors,
 *    segments not dividing evenly.
 * 3. State transfer across cuts: peer 2 fetches its neighbour's state,
 *    served in that neighbour's chunks, and gets x_1(2) exactly.
 * 4. A peer that never starts: no round of its neighbours waits longer than
 *    the deadline, and its weight goes to the self-weight.
 * 5. Hostile input: raw messages with a bad magic, another swarm, another
 *    model size, an unknown sender, a round too far ahead, a NaN payload, a
 *    range past the space or above the receiver's limit, and an overlapping
 *    range are dropped and counted by reason; the mix is unchanged. Ranges
 *    cut off the receiver's grid and sent out of order mix exactly. A
 *    rejected message from a "new incarnation" changes nothing: the real
 *    sender's next round still mixes. A neighbour that sends half its
 *    parameters before the deadline counts where it sent, element by
 *    element.
 * 5a. A diverged neighbour (x = 10^4 beside peers at 1 and 3) is dropped as
 *    an outlier and left out of the round at once, its weight going to the
 *    peer's own (5/3 everywhere, by hand), and mixed again in the next
 *    round once its parameters are like the others'.
 * 6. A slow link: a round whose data keeps arriving is not cut at the
 *    adaptive deadline; one whose data stops ends soon after.
 * 7. Quiet links: two peers with a 16 MiB model pause between rounds
 *    until they heard each other only through heartbeats for 3.25 s
 *    (longer than the 3 s after which a silent neighbour is redialled): the
 *    rounds after each pause still mix every element of both peers, in
 *    time (heartbeats keep a quiet link from looking like a dead one).
 * 8. Parameters written late (a GPU stage's copy landing after round_begin):
 *    while peer 0's params_ready hook says 0 it sends nothing, even for
 *    200 ms; values it writes meanwhile are what its neighbour mixes, and
 *    neither round ends before they went out. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "mixutil.h"
#include "mixer.h"
#include "testutil.h"

#define NP 1000   /* parameters */
#define CHUNK 96  /* elements per chunk: 11 chunks, the last one partial */
#define LR 0.1

static char endpoints[4][64];
static const char *eps[4];

static double x0_of(int peer, int i) { return (peer + 1) * 0.01 * (i % 37) - 0.1 * peer; }
static double g_of(int peer, int i) { return 0.001 * (peer + 1) * ((i % 5) - 2); }

/* Each peer cuts the space its own way. */
static const size_t chunk_of[3] = { CHUNK, 40, NP };

/* What every mixer of these tests shares: peer self of t at eps, NP
 * parameters in cells of CHUNK. */
static rumor_mixer_config_t base_config(rumor_topo_t *t, int self)
{
    rumor_mixer_config_t c = { 0 };
    c.topo = t;
    c.self = self;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("test");
    c.nparams = NP;
    c.chunk_elems = CHUNK;
    return c;
}

static rumor_mixer_t *make_mixer_c(rumor_topo_t *t, int self, const float *init, double timeout,
                                   size_t chunk, size_t max_msg, int async)
{
    rumor_mixer_config_t c = base_config(t, self);
    c.chunk_elems = chunk;
    c.max_msg_elems = max_msg;
    c.round_timeout = timeout;
    if (timeout >= 10.0) /* tests of exact values: a fixed deadline, which a loaded machine
                          * (make -j2 check) cannot make end a round early */
        c.min_round_timeout = timeout;
    c.async = async;
    rumor_mixer_t *m = NULL;
    if (rumor_mixer_create(&c, init, &m) < 0) {
        fprintf(stderr, "peer %d: %s\n", self, rumor_err_msg());
        exit(2);
    }
    return m;
}

static rumor_mixer_t *make_mixer(rumor_topo_t *t, int self, const float *init, double timeout)
{
    return make_mixer_c(t, self, init, timeout, chunk_of[self], 0, 0);
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
    /* peers 0's and 1's parameters at the start of each round */
    static double x0_at[3][NP], x1_at[3][NP];
    for (long k = 0; k < 3; k++) {
        memcpy(x0_at[k], ref[0], sizeof ref[0]);
        memcpy(x1_at[k], ref[1], sizeof ref[1]);
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
    CHECK_OK(rumor_mixer_allreduce_mean(m, buf, NP, 1, 10.0, 0));
    int off = 0;
    for (int i = 0; i < NP; i++)
        if (fabsf(buf[i] - (float)(1000 + i)) > 1e-3f)
            off++;
    CHECKF(off == 0, "peer %d: all-reduce mean wrong at %d places (buf[0] = %g)", self, off,
           buf[0]);
    /* A second call with the next tag works too. */
    for (int i = 0; i < NP; i++)
        buf[i] = (float)(self == 2 ? 3.0 : 0.0);
    CHECK_OK(rumor_mixer_allreduce_mean(m, buf, NP, 2, 10.0, 0));
    CHECK_CLOSE(buf[NP - 1], 1.0, 1e-6, 0);

    /* State transfer: peer 2 asks the peers it talks to (1 its neighbour,
     * 0 its successor in the all-reduce ring) for the state, a contiguous
     * part each; each serves its x(2), the parameters it sent last, in its
     * own chunks (96 and 40; peer 2's are the whole model). */
    if (self == 2) {
        long nk = -1;
        float *xs = NULL;
        CHECK_OK(rumor_mixer_catch_up(m, &nk, &xs, 10.0));
        int off_state = 0, from = -1, switches = 0;
        for (int i = 0; xs && i < NP; i++) {
            int src = fabs(xs[i] - x0_at[2][i]) <= 1e-6 + 1e-5 * fabs(x0_at[2][i]) ? 0
                      : fabs(xs[i] - x1_at[2][i]) <= 1e-6 + 1e-5 * fabs(x1_at[2][i]) ? 1
                                                                                     : -1;
            if (src < 0 && off_state++ < 3)
                fprintf(stderr, "state x[%d] = %.9g: neither x_0(2) = %.9g nor x_1(2) = %.9g\n",
                        i, xs[i], x0_at[2][i], x1_at[2][i]);
            /* x_0 and x_1 agree where i % 37 == 10: no switch counted there */
            if (src >= 0 && fabs(x0_at[2][i] - x1_at[2][i]) > 1e-3) {
                switches += from >= 0 && src != from;
                from = src;
            }
        }
        CHECKF(xs && off_state == 0 && switches <= 1,
               "state transfer: %d parameters from nobody's x(2), %d switches of source",
               off_state, switches);
        CHECKF(nk >= 3, "state transfer: joins at round %ld", nk);
    } else {
        usleep(3000000); /* serve peer 2 meanwhile */
    }
    rumor_wire_stats_t ws;
    rumor_mixer_wire_stats(m, &ws);
    CHECKF(rumor_wire_stats_rejected(&ws) == 0, "peer %d: %llu messages rejected", self,
           (unsigned long long)rumor_wire_stats_rejected(&ws));
    rumor_mixer_destroy(&m, 5.0);
    rumor_topo_destroy(&t);
    return tu_failures ? 1 : 0;
}

/* Polls m's counters until `n` neighbours' parameters were accepted, or
 * `timeout` seconds pass: whether they were. */
static int wait_received(rumor_mixer_t *m, uint64_t n, double timeout)
{
    double end = rumor_now() + timeout;
    rumor_mixer_counters_t mc;
    for (;;) {
        rumor_mixer_counters(m, &mc);
        if (mc.elems_received >= n || rumor_now() > end)
            return mc.elems_received >= n;
        usleep(2000);
    }
}

/* A quiet link: waits until more than `secs` seconds passed with m hearing
 * its neighbour only through heartbeats (one every 0.5 s by default: as many
 * messages accepted as that span holds), or 4 x secs pass: whether they
 * were heard throughout. */
static int quiet_pause(rumor_mixer_t *m, double secs)
{
    double t0 = rumor_now();
    rumor_wire_stats_t ws;
    rumor_mixer_wire_stats(m, &ws);
    uint64_t a0 = ws.accepted, want = (uint64_t)(secs / 0.5);
    for (;;) {
        usleep(20000);
        rumor_mixer_wire_stats(m, &ws);
        double dt = rumor_now() - t0;
        if (dt > secs && ws.accepted - a0 >= want)
            return 1;
        if (dt > 4 * secs)
            return 0;
    }
}

/* Child: asynchronous gossip with unlike cuts (chunks of 96 and 40) on
 * ring:2. Each peer waits in round 0 until the other's ranges arrived (its
 * counter of parameters received), so the mix is exact: (1 + 3) / 2
 * everywhere. */
static int async_child(int self)
{
    rumor_topo_t *t;
    if (rumor_topo_parse("ring:2", &t) < 0)
        return 2;
    static float init[NP];
    for (int i = 0; i < NP; i++)
        init[i] = self == 0 ? 1.0f : 3.0f;
    rumor_mixer_t *m = make_mixer_c(t, self, init, 5.0, chunk_of[self], 0, 1);
    CHECK(rumor_mixer_barrier(m, 10.0) == 1);
    CHECK_OK(rumor_mixer_round_begin(m, 0));
    CHECKF(wait_received(m, NP, 10.0), "peer %d: the neighbour's round 0 did not arrive in "
           "10 s", self);
    float *x;
    rumor_round_stats_t st;
    CHECK_OK(rumor_mixer_round_end(m, 0, &x, &st));
    int off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - 2.0f) > 1e-6f;
    CHECKF(off == 0 && st.complete == 1, "peer %d: async mix off at %d places (x[0] = %g)", self,
           off, x[0]);
    usleep(300000); /* let the other end its round before this one leaves */
    rumor_mixer_destroy(&m, 1.0);
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

#define QUIET_NP ((size_t)1 << 22)

static int quiet_child(int self)
{
    rumor_topo_t *t;
    if (rumor_topo_parse("ring:2", &t) < 0)
        return 2;
    float *init = malloc(QUIET_NP * sizeof *init);
    if (!init)
        return 2;
    for (size_t i = 0; i < QUIET_NP; i++)
        init[i] = (float)(self + 1) + 0.001f * (float)(i % 1000);
    rumor_mixer_config_t c = { 0 };
    c.topo = t;
    c.self = self;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("quiet");
    c.nparams = QUIET_NP;
    c.chunk_elems = (size_t)1 << 18;
    c.round_timeout = c.min_round_timeout = 20.0;
    rumor_mixer_t *m = NULL;
    if (rumor_mixer_create(&c, init, &m) < 0) {
        fprintf(stderr, "peer %d: %s\n", self, rumor_err_msg());
        return 2;
    }
    CHECK(rumor_mixer_barrier(m, 20.0) == 1);
    /* ring:2's weights are 1/2 and 1/2: every round gives both peers the
     * mean of the two starting points, 1.5 + 0.001 (i % 1000) */
    for (long k = 0; k < 3; k++) {
        if (k > 0) /* quiet for longer than the 3 s after which a silent neighbour is
                    * redialled, hearing it only through heartbeats */
            CHECKF(quiet_pause(m, 3.25), "peer %d: its neighbour's heartbeats stopped during "
                   "a quiet pause", self);
        CHECK_OK(rumor_mixer_round_begin(m, k));
        float *x;
        rumor_round_stats_t st;
        CHECK_OK(rumor_mixer_round_end(m, k, &x, &st));
        size_t off = 0;
        for (size_t i = 0; i < QUIET_NP; i++)
            off += fabsf(x[i] - (1.5f + 0.001f * (float)(i % 1000))) > 1e-5f;
        CHECKF(!st.timed_out && st.complete == 1 && off == 0,
               "peer %d: round %ld after a 4 s pause: complete %d, timed out %d, %zu of %zu "
               "elements off the mean",
               self, k, st.complete, st.timed_out, off, QUIET_NP);
    }
    /* its neighbour may still be receiving this peer's last round (16 MB,
     * slow under ThreadSanitizer): the mixer leaves once the neighbour has
     * passed it, within 30 s */
    rumor_mixer_destroy(&m, 30.0);
    rumor_topo_destroy(&t);
    free(init);
    return tu_failures ? 1 : 0;
}

/* Part 8: peer 0's hook answers 0 until its parameters are written. */
static atomic_int late_written, late_asked;

static int late_ready(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&late_asked, 1);
    return atomic_load(&late_written);
}

static int late_child(int self)
{
    rumor_topo_t *t;
    if (rumor_topo_parse("grid:1x2", &t) < 0)
        return 2;
    static float init[NP];
    for (int i = 0; i < NP; i++)
        init[i] = (float)x0_of(self, i);
    rumor_mixer_t *m = make_mixer_c(t, self, init, 20.0, CHUNK, 0, 0);
    if (rumor_mixer_barrier(m, 20.0) < 1) {
        fprintf(stderr, "peer %d: barrier failed\n", self);
        return 1;
    }
    if (self == 0)
        rumor_mixer_set_params_ready(m, late_ready, NULL);
    double t0 = rumor_now();
    CHECK_OK(rumor_mixer_round_begin(m, 0));
    if (self == 0) {
        /* the copy lands late: what was in the buffer at round_begin is
         * never sent */
        usleep(500000);
        float *x = rumor_mixer_params(m);
        for (int i = 0; i < NP; i++)
            x[i] = (float)(3.0 + 0.001 * i);
        atomic_store(&late_written, 1);
    }
    float *x;
    rumor_round_stats_t st;
    CHECK_OK(rumor_mixer_round_end(m, 0, &x, &st));
    double took = rumor_now() - t0;
    CHECK(st.timed_out == 0 && st.complete == st.in_neighbors);
    size_t off = 0;
    for (int i = 0; i < NP; i++) {
        double v0 = 3.0 + 0.001 * i, v1 = (float)x0_of(1, i);
        off += fabs(x[i] - 0.5 * (v0 + v1)) > 1e-6;
    }
    /* the mean of the values written late: neither peer's round ended
     * before they were written, 0.5 s into peer 0's round (a time peer 1
     * cannot measure from its own round_begin: the two may leave the
     * barrier apart, by more than a HELLO interval on a loaded machine) */
    CHECKF(off == 0, "peer %d: %zu of %d elements are not the mean of the values written late "
           "and the neighbour's (round ended %.3f s after it began)", self, off, NP, took);
    if (self == 0)
        CHECKF(atomic_load(&late_asked) >= 10, "peer 0: the hook was asked %d times in 0.5 s "
               "(the comm thread should poll it every millisecond)", atomic_load(&late_asked));
    rumor_mixer_destroy(&m, 1.0);
    rumor_topo_destroy(&t);
    return tu_failures ? 1 : 0;
}

/* The peers of a part, each a process (tu_swarm): the first failed check
 * ends its peer and the others at once, and no peer runs past 60 s (a hang
 * is a failure, never a stuck suite). */
static int (*child_fn)(int);

static int call_child(int self, void *arg)
{
    (void)arg;
    return child_fn(self);
}

static int run_children(const char *what, int (*fn)(int), int n)
{
    child_fn = fn;
    return tu_swarm(what, n, call_child, NULL, 60);
}

/* Sends one raw message of n floats to the mixer at endpoints[0]. */
static void send_raw(void *push, const rumor_wire_hdr_t *h, const float *payload, size_t n,
                     int corrupt_magic)
{
    mu_send_raw(push, h, payload, n * sizeof(float), corrupt_magic);
}

/* Sends v[0 .. upto) for round r as "peer" h0->sender, in ranges of piece,
 * the last range first when backwards. */
static void send_ranges(void *push, const rumor_wire_hdr_t *h0, long r, const float *v,
                        size_t piece, size_t upto, int backwards)
{
    size_t n = (upto + piece - 1) / piece;
    for (size_t k = 0; k < n; k++) {
        size_t c = backwards ? n - 1 - k : k;
        rumor_wire_hdr_t b = *h0;
        b.round = (uint64_t)r;
        b.chunk = (uint32_t)c;
        b.nchunks = (uint32_t)n;
        b.offset = c * piece;
        b.length = c == n - 1 ? upto - b.offset : piece;
        send_raw(push, &b, v + b.offset, b.length, 0);
    }
}

/* Sends "peer 1"'s x = v everywhere for round r, in ranges of `piece`
 * elements, last range first (out of order, off peer 0's grid). */
static void send_round(void *push, const rumor_wire_hdr_t *h0, long r, float v, size_t piece,
                       size_t upto)
{
    static float buf[NP];
    for (int i = 0; i < NP; i++)
        buf[i] = v;
    send_ranges(push, h0, r, buf, piece, upto, 1);
}

/* Peer 0 of ring:2 receives hostile messages plus "peer 1"'s real ones. */
static void check_hostile(void)
{
    rumor_topo_t *t;
    CHECK_OK(rumor_topo_parse("ring:2", &t));
    static float init[NP];
    for (int i = 0; i < NP; i++)
        init[i] = 1.0f;
    /* its own grid: chunks of 96; it takes ranges of at most 500 elements */
    rumor_mixer_t *m = make_mixer_c(t, 0, init, 1.0, CHUNK, 500, 0);
    void *ctx = zmq_ctx_new(), *push = mu_push(ctx, endpoints[0]);
    rumor_wire_hdr_t h = { 0 };
    h.type = RUMOR_WIRE_PARAMS;
    h.dtype = RUMOR_WIRE_DT_F32;
    h.swarm = rumor_wire_swarm_id("test");
    h.sender = 2; /* node 1 */
    h.incarnation = 5;
    h.round = 0;
    h.space = NP;
    h.nchunks = 1;
    h.length = 70;
    static float chunk[600], nan_chunk[70];
    for (int i = 0; i < 600; i++)
        chunk[i] = 3.0f;
    for (int i = 0; i < 70; i++)
        nan_chunk[i] = i == 17 ? NAN : 3.0f;
    CHECK_OK(rumor_mixer_round_begin(m, 0));
    rumor_wire_hdr_t b;
    b = h; send_raw(push, &b, chunk, 70, 1);                     /* bad magic */
    b = h; b.swarm ^= 1; send_raw(push, &b, chunk, 70, 0);       /* another swarm */
    b = h; b.space = NP + 1; send_raw(push, &b, chunk, 70, 0);   /* another model */
    b = h; b.sender = 99; send_raw(push, &b, chunk, 70, 0);      /* unknown sender */
    b = h; b.round = 5; send_raw(push, &b, chunk, 70, 0);        /* too far ahead */
    b = h; send_raw(push, &b, nan_chunk, 70, 0);                 /* NaN */
    b = h; b.offset = NP - 10; send_raw(push, &b, chunk, 70, 0); /* past the space */
    b = h; b.length = 600; send_raw(push, &b, chunk, 600, 0);    /* above the limit */
    /* Now the real round 0 from "peer 1": ranges of 70, off peer 0's grid of
     * 96, last first; then a range overlapping what arrived. */
    send_round(push, &h, 0, 3.0f, 70, NP);
    b = h; b.offset = 100; b.length = 50; send_raw(push, &b, chunk, 50, 0); /* overlap */
    float *x;
    rumor_round_stats_t st;
    CHECK_OK(rumor_mixer_round_end(m, 0, &x, &st));
    /* ring:2 with MH: W01 = 1/2: x = (1 + 3) / 2 everywhere */
    int off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - 2.0f) > 1e-6f;
    CHECKF(off == 0, "hostile input changed the mix at %d places (x[17] = %g)", off, x[17]);
    CHECK(st.complete == 1 && !st.timed_out);

    /* Round 1. First what a rejected message must not change: NaN for the
     * mixed round 0 from a "new incarnation", a finite one too, and a
     * message from the old incarnation. Then the real round 1 from
     * incarnation 5: still taken. */
    CHECK_OK(rumor_mixer_round_begin(m, 1));
    b = h; b.incarnation = 1ULL << 62; send_raw(push, &b, nan_chunk, 70, 0); /* NaN, stale */
    b = h; b.incarnation = 1ULL << 62; send_raw(push, &b, chunk, 70, 0);     /* stale */
    b = h; b.incarnation = 1ULL << 62; b.round = 1; b.offset = NP - 10;
    send_raw(push, &b, chunk, 70, 0);                                         /* past the space */
    b = h; b.incarnation = 4; b.round = 1; send_raw(push, &b, chunk, 70, 0);  /* old incarnation */
    send_round(push, &h, 1, 4.0f, CHUNK, NP); /* on peer 0's grid: this checks item 1 alone */
    CHECK_OK(rumor_mixer_round_end(m, 1, &x, &st));
    off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - 3.0f) > 1e-6f; /* (2 + 4) / 2 */
    CHECKF(off == 0 && st.complete == 1 && !st.timed_out,
           "after rejected messages of a 'new incarnation', the real sender's round 1 did not "
           "mix (%d places off, complete %d, timed out %d)",
           off, st.complete, st.timed_out);

    /* Round 2: "peer 1" sends [0, 500) only and misses the deadline: its
     * weight counts there and goes to the self-weight elsewhere. */
    CHECK_OK(rumor_mixer_round_begin(m, 2));
    send_round(push, &h, 2, 5.0f, 250, 500);
    CHECK_OK(rumor_mixer_round_end(m, 2, &x, &st));
    off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - (i < 500 ? 4.0f : 3.0f)) > 1e-6f;
    CHECKF(off == 0 && st.timed_out && st.complete == 0,
           "a half-sent round mixed wrong at %d places (x[0] = %g, x[999] = %g)", off, x[0],
           x[NP - 1]);
    CHECK_CLOSE(st.self_weight, 0.75, 1e-6, 0); /* half the elements 1/2, half 1 */
    rumor_wire_stats_t ws;
    mu_wire_stats(m, &ws);
    CHECK(ws.rejected[RUMOR_WIRE_BAD_MAGIC] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_WRONG_SWARM] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_WRONG_SPACE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_UNKNOWN_SENDER] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_FUTURE_ROUND] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_NONFINITE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_BAD_RANGE] == 2);
    CHECK(ws.rejected[RUMOR_WIRE_CHUNK_TOO_LARGE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_DUPLICATE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_STALE_ROUND] == 2);
    CHECK(ws.rejected[RUMOR_WIRE_OLD_INCARNATION] == 1);
    CHECKF(ws.accepted == 15 + 11 + 2, "%llu accepted", (unsigned long long)ws.accepted);
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    rumor_topo_destroy(&t);
}

/* A PARAMS header of the neighbour with that sender id (node id - 1),
 * played by hand. */
static rumor_wire_hdr_t hand_hdr(uint64_t sender)
{
    rumor_wire_hdr_t h = { 0 };
    h.type = RUMOR_WIRE_PARAMS;
    h.dtype = RUMOR_WIRE_DT_F32;
    h.swarm = rumor_wire_swarm_id("test");
    h.sender = sender;
    h.incarnation = 1;
    h.space = NP;
    return h;
}

static float ones[NP];

/* Peer 0 of ring:3, its parameters all 1, with the outlier check
 * rumor-peer runs (ratio 10) and, with robust, --robust clip:tau=sqrt(NP)
 * (a bound of 1 per element); *c its configuration, *t its graph (NULL
 * and none when it could not be made). */
static rumor_mixer_t *ring3_peer0(rumor_topo_t **t, rumor_mixer_config_t *c, int robust)
{
    CHECK_OK(rumor_topo_parse("ring:3", t));
    for (int i = 0; i < NP; i++)
        ones[i] = 1.0f;
    *c = base_config(*t, 0);
    c->round_timeout = c->min_round_timeout = 10;
    c->outlier_ratio = 10;
    if (robust) { /* 1: a bound of 1 per element (RMS); 2: the bound by default; 3: as
                   * 1, and a validation probe every 2 rounds */
        c->robust = RUMOR_ROBUST_CLIP;
        c->robust_tau = robust != 2 ? sqrt((double)NP) : 0;
        c->robust_probe = robust == 3 ? 2 : 0;
    }
    rumor_mixer_t *m = NULL;
    CHECK_OK(rumor_mixer_create(c, ones, &m));
    if (!m)
        rumor_topo_destroy(t);
    return m;
}

/* Peer 0 of ring:3 (weights 1/3) with the outlier check rumor-peer runs
 * (ratio 10) and two neighbours played by hand: in round 0 "peer 2" sends
 * x = 10^4 (a diverged peer) and is left out, its weight going to peer 0's
 * own, without holding the round to its deadline; in round 1 it sends a
 * value like the others' and is mixed again. */
static void check_outlier(void)
{
    rumor_topo_t *t;
    rumor_mixer_config_t c;
    rumor_mixer_t *m = ring3_peer0(&t, &c, 0);
    if (!m)
        return;
    void *ctx = zmq_ctx_new(), *push = mu_push(ctx, endpoints[0]);
    rumor_wire_hdr_t h1 = hand_hdr(2), h2 = hand_hdr(3); /* nodes 1 and 2 */
    float *x;
    rumor_round_stats_t st;
    /* the outlier's ranges come first, before this peer's round 0 went out:
     * judged against the parameters it was made with */
    send_round(push, &h2, 0, 1e4f, 250, NP);
    usleep(100000);
    CHECK_OK(rumor_mixer_round_begin(m, 0));
    double t0 = rumor_now();
    send_round(push, &h1, 0, 3.0f, 250, NP);
    CHECK_OK(rumor_mixer_round_end(m, 0, &x, &st));
    double took = rumor_now() - t0;
    int off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - 5.0f / 3.0f) > 1e-5f; /* (1 + 3 + 1) / 3: its weight to self */
    CHECKF(off == 0, "an outlier's round mixed wrong at %d places (x[0] = %g)", off, x[0]);
    CHECKF(st.complete == 1 && !st.timed_out && took < 5.0,
           "the outlier held the round: complete %d, timed out %d, %.2f s", st.complete,
           st.timed_out, took);
    CHECK_CLOSE(st.self_weight, 2.0 / 3.0, 1e-6, 0);
    /* round 1: both like peer 0 (x = 5/3): mixed, the three of them */
    CHECK_OK(rumor_mixer_round_begin(m, 1));
    send_round(push, &h2, 1, 2.0f, 250, NP);
    send_round(push, &h1, 1, 2.0f, 250, NP);
    CHECK_OK(rumor_mixer_round_end(m, 1, &x, &st));
    off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - (5.0f / 3.0f + 4.0f) / 3.0f) > 1e-5f;
    CHECKF(off == 0 && st.complete == 2, "round 1 after an outlier round mixed wrong at %d "
           "places (x[0] = %g, complete %d)", off, x[0], st.complete);
    rumor_wire_stats_t ws;
    mu_wire_stats(m, &ws);
    CHECKF(ws.rejected[RUMOR_WIRE_OUTLIER] == 4, "%llu outlier ranges dropped, expected 4",
           (unsigned long long)ws.rejected[RUMOR_WIRE_OUTLIER]);
    rumor_mixer_counters_t mc;
    rumor_mixer_counters(m, &mc);
    CHECK(mc.outlier_rounds == 1);
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    rumor_topo_destroy(&t);
}

/* The configuration of peer 0 of complete:4 (*t), its parameters all 1
 * (`ones`), with a fixed deadline of `timeout` seconds. */
static rumor_mixer_config_t complete4_peer0(rumor_topo_t **t, double timeout)
{
    CHECK_OK(rumor_topo_parse("complete:4", t));
    for (int i = 0; i < NP; i++)
        ones[i] = 1.0f;
    rumor_mixer_config_t c = base_config(*t, 0);
    c.round_timeout = c.min_round_timeout = timeout;
    return c;
}

/* Peer 0 of complete:4 (deadline 10 s) left behind: two of its neighbours,
 * played by hand, say (HELLO) they are at round 5 while it is in round 0,
 * beyond its window of 3 rounds; the third says it is in round 0 with it
 * and sends nothing yet. The two ahead do not wait for this peer, which
 * will jump to their round after this one (catchup.c): waiting for the
 * third would only hold it further behind. The round closes at once with
 * this peer's own parameters (their weight to itself) and says where the
 * swarm is, instead of waiting out the deadline for the one in step. */
static void check_left_behind(void)
{
    rumor_topo_t *t;
    rumor_mixer_config_t c = complete4_peer0(&t, 10);
    rumor_mixer_t *m = NULL;
    CHECK_OK(rumor_mixer_create(&c, ones, &m));
    if (!m) {
        rumor_topo_destroy(&t);
        return;
    }
    void *ctx = zmq_ctx_new(), *push = mu_push(ctx, endpoints[0]);
    CHECK_OK(rumor_mixer_round_begin(m, 0));
    double t0 = rumor_now();
    for (uint64_t sender = 4; sender >= 2; sender--) { /* nodes 3, 2, 1 */
        rumor_wire_hdr_t h = hand_hdr(sender);
        h.type = RUMOR_WIRE_HELLO;
        h.dtype = RUMOR_WIRE_DT_NONE;
        h.aux = 2;
        h.round = sender == 4 ? 0 : 5;
        mu_send_raw(push, &h, NULL, 0, 0);
    }
    float *x;
    rumor_round_stats_t st;
    CHECK_OK(rumor_mixer_round_end(m, 0, &x, &st));
    double took = rumor_now() - t0;
    int off = 0;
    for (int i = 0; i < NP; i++)
        off += x[i] != 1.0f;
    CHECKF(took < 2.0 && st.complete == 0 && off == 0,
           "a peer left behind held its round %.2f s (deadline 10), complete %d, %d elements not "
           "its own", took, st.complete, off);
    CHECKF(st.swarm_round == 5 && st.window == 3 && st.next_round == 1,
           "left behind: swarm round %ld, window %d, next round %ld", st.swarm_round, st.window,
           st.next_round);
    fprintf(stderr, "left behind: round 0 closed after %.3f s, the swarm at round %ld\n", took,
            st.swarm_round);
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    rumor_topo_destroy(&t);
}

/* Peer 0 of ring:3 (weights 1/3) with robust mixing, --robust clip:tau=T,
 * T = sqrt(NP): a bound of 1 per element (RMS). Its own x = 1; "peer 1"
 * sends 3 (2 away: clipped to 1 away, taken as 2), "peer 2" 1.5 (0.5 away:
 * taken as it is). The closed form: (1 + 2 + 1.5) / 3 = 1.5, where plain
 * D-PSGD gives (1 + 3 + 1.5) / 3. Peer 1's ranges come before this peer's
 * round began (judged against the parameters it was made with), peer 2's
 * after. Round 1: both send x + 0.25, unclipped. */
static void check_robust_clip(void)
{
    rumor_topo_t *t;
    rumor_mixer_config_t c;
    rumor_mixer_t *m = ring3_peer0(&t, &c, 1);
    if (!m)
        return;
    void *ctx = zmq_ctx_new(), *push = mu_push(ctx, endpoints[0]);
    rumor_wire_hdr_t h1 = hand_hdr(2), h2 = hand_hdr(3); /* nodes 1 and 2 */
    float *x;
    rumor_round_stats_t st;
    send_round(push, &h1, 0, 3.0f, 250, NP);
    usleep(100000);
    CHECK_OK(rumor_mixer_round_begin(m, 0));
    send_round(push, &h2, 0, 1.5f, 250, NP);
    CHECK_OK(rumor_mixer_round_end(m, 0, &x, &st));
    int off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - 1.5f) > 1e-5f;
    CHECKF(off == 0 && st.complete == 2, "a clipped round mixed wrong at %d places (x[0] = %g, "
           "expected 1.5; complete %d)", off, x[0], st.complete);
    rumor_mixer_counters_t mc;
    rumor_mixer_counters(m, &mc);
    CHECKF(mc.robust_ranges == 8 && mc.robust_clipped == 4 && mc.quarantines == 0,
           "judged %llu ranges, clipped %llu, quarantined %llu: expected 8, 4, 0",
           (unsigned long long)mc.robust_ranges, (unsigned long long)mc.robust_clipped,
           (unsigned long long)mc.quarantines);
    CHECK_OK(rumor_mixer_round_begin(m, 1));
    send_round(push, &h1, 1, 1.75f, 250, NP);
    send_round(push, &h2, 1, 1.75f, 250, NP);
    CHECK_OK(rumor_mixer_round_end(m, 1, &x, &st));
    off = 0;
    for (int i = 0; i < NP; i++)
        off += fabsf(x[i] - (1.5f + 3.5f) / 3.0f) > 1e-5f;
    CHECKF(off == 0, "round 1 (within the bound) mixed wrong at %d places (x[0] = %g)", off, x[0]);
    rumor_mixer_counters(m, &mc);
    CHECK(mc.robust_clipped == 4);
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    /* where it is not defined: refused, said */
    c.async = 1;
    CHECK_ERR(rumor_mixer_create(&c, ones, &m), RUMOR_EINVAL, "not with asynchronous");
    rumor_topo_destroy(&t);
}

/* Whether a PARAMS message of round k comes to socket `pull` (within its
 * receive timeout), the messages before it read and dropped. */
static int sent_round(void *pull, long k)
{
    for (;;) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, pull, 0) < 0) {
            zmq_msg_close(&f);
            return 0;
        }
        rumor_wire_hdr_t h;
        int hit = rumor_wire_decode(zmq_msg_data(&f), zmq_msg_size(&f), &h) == 0 &&
                  h.type == RUMOR_WIRE_PARAMS && h.round == (uint64_t)k;
        int more = zmq_msg_more(&f);
        zmq_msg_close(&f);
        while (more) { /* the payload */
            zmq_msg_init(&f);
            more = zmq_msg_recv(&f, pull, 0) >= 0 && zmq_msg_more(&f);
            zmq_msg_close(&f);
        }
        if (hit)
            return 1;
    }
}

/* Peer 0 of ring:3 with --robust clip and its default bound: twice the
 * least of the in-neighbours' recent differences. Every round "peer 1"
 * sends x + 0.01 and "peer 2" x + 0.05 (x: peer 0's parameters), each in
 * ten ranges. Once both are known, the bound is about 0.02 per element
 * (peer 1's recent difference, an average over its ranges, settles at
 * 0.01): peer 1 is mixed whole, peer 2 clipped to 0.02,
 * and from round 2 on a round moves every element by (0.01 + 0.02) / 3 =
 * 0.01 within 3e-4 (with a bound of 4 times, 0.05 / 3: peer 2 whole). Five times as
 * far as peer 1, peer 2 is not quarantined: a quarantine takes 8 times. */
static void check_robust_bound(void)
{
    rumor_topo_t *t;
    rumor_mixer_config_t c;
    rumor_mixer_t *m = ring3_peer0(&t, &c, 2);
    if (!m)
        return;
    void *ctx = zmq_ctx_new(), *push = mu_push(ctx, endpoints[0]);
    /* peer 0's out-neighbours, to see when it sends a round */
    void *pull[2];
    for (int p = 0; p < 2; p++) {
        pull[p] = zmq_socket(ctx, ZMQ_PULL);
        int zero = 0, wait_ms = 10000;
        zmq_setsockopt(pull[p], ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(pull[p], ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms);
        CHECK(zmq_bind(pull[p], endpoints[1 + p]) == 0);
    }
    rumor_wire_hdr_t h1 = hand_hdr(2), h2 = hand_hdr(3); /* nodes 1 and 2 */
    float *x;
    static float prev[NP], v1[NP], v2[NP]; /* x before the round; what they send */
    for (int i = 0; i < NP; i++)
        prev[i] = 1.0f;
    rumor_round_stats_t st;
    for (long k = 0; k < 6; k++) {
        for (int i = 0; i < NP; i++) {
            v1[i] = prev[i] + 0.01f;
            v2[i] = prev[i] + 0.05f;
        }
        CHECK_OK(rumor_mixer_round_begin(m, k));
        /* the neighbours' ranges go once peer 0 sends its round k: before
         * that they would be judged against the parameters it sent last,
         * x of round k - 1 (mixer_robust.c), 0.01 further */
        CHECKF(sent_round(pull[0], k), "peer 0 never sent round %ld", k);
        send_ranges(push, &h1, k, v1, NP / 10, NP, 1);
        send_ranges(push, &h2, k, v2, NP / 10, NP, 1);
        CHECK_OK(rumor_mixer_round_end(m, k, &x, &st));
        int off = 0, first = 0;
        for (int i = 0; k >= 2 && i < NP; i++)
            if (fabsf(x[i] - prev[i] - 0.01f) > 3e-4f && off++ == 0)
                first = i;
        CHECKF(off == 0 && st.complete == 2, "round %ld with the default bound: %d places off "
               "(x[%d] moved by %g, expected 0.01), complete %d", k, off, first,
               x[first] - prev[first], st.complete);
        memcpy(prev, x, sizeof prev);
    }
    for (int p = 0; p < 2; p++)
        zmq_close(pull[p]);
    rumor_mixer_counters_t mc;
    rumor_mixer_counters(m, &mc);
    CHECKF(mc.quarantines == 0 && mc.robust_clipped >= 50,
           "default bound: %llu quarantines (expected 0), %llu ranges clipped (expected peer "
           "2's from round 1 on)", (unsigned long long)mc.quarantines,
           (unsigned long long)mc.robust_clipped);
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    rumor_topo_destroy(&t);
}

/* Peer 0 of ring:3 with --robust clip (a bound of 1 per element, which
 * nothing here meets) and a validation probe every 2 rounds; the test plays
 * the caller that scores the vectors. Every round "peer 1" sends x + a(i)
 * and "peer 2" x - b(i) (x: peer 0's own, a and b varying by element). The
 * probe of round k comes after round k + 1: exactly what each neighbour
 * sent, and *own exactly x(k). The losses given: this peer 1.0, peer 1
 * 1.0 +- 0.01 (the honest spread), peer 2 1.5. Peer 2 is quarantined at
 * the 4th probe (the 1st sets the spread: far at probes 2, 3, 4, a share of
 * 1 - 0.7^3 = 0.657 > 0.6), peer 1 never; from then on a round mixes
 * (2 x + x1) / 3, peer 2's weight going to this peer. Peer 2 is still
 * probed in quarantine (its ranges held though the rounds refuse them);
 * given its fellows' loss at 3 probes in a row, it is let out. */
static void check_robust_probe(void)
{
    rumor_topo_t *t;
    rumor_mixer_config_t c;
    rumor_mixer_t *m = ring3_peer0(&t, &c, 3);
    if (!m)
        return;
    void *ctx = zmq_ctx_new(), *push = mu_push(ctx, endpoints[0]);
    rumor_wire_hdr_t h1 = hand_hdr(2), h2 = hand_hdr(3); /* nodes 1 and 2 */
    static float x0[NP], v1[14][NP], v2[14][NP], own[14][NP];
    for (int i = 0; i < NP; i++)
        x0[i] = 1.0f;
    float *x = x0;
    rumor_round_stats_t st;
    int probes = 0, quarantined_at = -1, released_at = -1, bad = 0;
    for (long k = 0; k < 14 && !bad; k++) {
        for (int i = 0; i < NP; i++) {
            own[k][i] = x[i];
            v1[k][i] = x[i] + 0.01f * (float)(1 + i % 7);
            v2[k][i] = x[i] - 0.02f * (float)(1 + i % 5);
        }
        CHECK_OK(rumor_mixer_round_begin(m, k));
        send_ranges(push, &h1, k, v1[k], NP / 4, NP, 0);
        send_ranges(push, &h2, k, v2[k], NP / 3, NP, 1);
        CHECK_OK(rumor_mixer_round_end(m, k, &x, &st));
        int out = quarantined_at >= 0 && released_at < 0; /* peer 2 left out this round */
        int off = 0;
        for (int i = 0; i < NP; i++) {
            float want = out ? (2 * own[k][i] + v1[k][i]) / 3
                             : (own[k][i] + v1[k][i] + v2[k][i]) / 3;
            off += fabsf(x[i] - want) > 1e-5f;
        }
        CHECKF(off == 0 && st.complete == 2 - out, "probe part, round %ld (peer 2 %s): %d "
               "places off the closed form (x[0] %g: own %g, peer 1 %g, peer 2 %g), complete %d",
               k, out ? "left out" : "mixed", off, x[0], own[k][0], v1[k][0], v2[k][0],
               st.complete);
        long pk = -1;
        const float *self = NULL, *got[4];
        int node[4];
        int n = rumor_mixer_probe_take(m, &pk, &self, node, got, 4);
        int want_probe = k >= 1 && (k - 1) % 2 == 0; /* the probe of round k - 1 */
        if (n != (want_probe ? 2 : 0) || (n && pk != k - 1)) {
            CHECKF(0, "after round %ld: a probe of %d neighbours (round %ld), expected %s", k, n,
                   pk, want_probe ? "2 of round k - 1" : "none");
            bad = 1;
            break;
        }
        if (!n)
            continue;
        int same = 1;
        for (int a = 0; a < n; a++) {
            const float *want = node[a] == 1 ? v1[pk] : node[a] == 2 ? v2[pk] : NULL;
            same &= want && memcmp(got[a], want, NP * sizeof(float)) == 0;
        }
        same &= memcmp(self, own[pk], NP * sizeof(float)) == 0;
        CHECKF(same && node[0] != node[1], "probe of round %ld: the vectors held are not what "
               "peers 1 and 2 sent and peer 0's own x(k)", pk);
        probes++;
        double loss[4];
        int liar = quarantined_at < 0 || probes < quarantined_at + 1; /* then honest */
        for (int a = 0; a < n; a++)
            loss[a] = node[a] == 1 ? 1.0 + (probes % 2 ? 0.01 : -0.01) : liar ? 1.5 : 1.0;
        int v = rumor_mixer_probe_done(m, pk, 1.0, node, loss, n);
        CHECKF(v >= 0 && v % 1000 <= 1 && v / 1000 <= 1, "probe %d: verdict %d", probes, v);
        if (v % 1000 && quarantined_at < 0)
            quarantined_at = probes;
        if (v / 1000 && released_at < 0)
            released_at = probes;
    }
    CHECKF(quarantined_at == 4 && released_at == 7, "probes: peer 2 quarantined at probe %d "
           "(expected 4), let out at %d (expected 7), of %d", quarantined_at, released_at,
           probes);
    rumor_robust_score_t sc[4];
    int ns = 0, seen = 0;
    for (double t0 = rumor_now(); seen != 2 && rumor_now() - t0 < 3; usleep(50000)) {
        ns = rumor_mixer_robust_scores(m, sc, 4); /* published a few times a second */
        seen = 0;
        for (int a = 0; a < ns; a++) {
            if (!strcmp(sc[a].name, "2"))
                seen += sc[a].val_score < 0.3 && !sc[a].quarantined;
            if (!strcmp(sc[a].name, "1"))
                seen += sc[a].val_score == 0 && fabs(sc[a].val_excess) <= 0.02;
        }
    }
    CHECKF(seen == 2, "probe: the published scores (%d) do not show peer 1 never far and peer 2 "
           "let out", ns);
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    /* a probe is part of robust mixing */
    c.robust = RUMOR_ROBUST_NONE;
    CHECK_ERR(rumor_mixer_create(&c, ones, &m), RUMOR_EINVAL, "robust mixing");
    rumor_topo_destroy(&t);
}

/* The median of three, the reference trimmed:1 of three values is. */
static float median3(float a, float b, float c)
{
    float lo = a < b ? a : b, hi = a < b ? b : a;
    return c < lo ? lo : c > hi ? hi : c;
}

/* --robust trimmed:1 at peer 0 of complete:4 (weights 1/4, its own x = 1):
 * its three neighbours, played by hand in ranges of unlike sizes, send
 * values that differ element by element, the third a liar at +-50. Each
 * element's mix is (x + median of the three) / 2, computed here apart. In
 * round 1 the liar sends half the space and misses the deadline: where it
 * sent nothing, its value is this peer's own. On ring:3 (two
 * in-neighbours) trimmed:1 is refused. */
static void check_robust_trimmed(void)
{
    rumor_topo_t *t;
    rumor_mixer_config_t c = complete4_peer0(&t, 1.0);
    c.robust = RUMOR_ROBUST_TRIMMED;
    c.robust_trim = 1;
    c.robust_tau = 1e6; /* judged, never far: no quarantine in this test */
    rumor_mixer_t *m = NULL;
    CHECK_OK(rumor_mixer_create(&c, ones, &m));
    if (!m) {
        rumor_topo_destroy(&t);
        return;
    }
    void *ctx = zmq_ctx_new(), *push = mu_push(ctx, endpoints[0]);
    rumor_wire_hdr_t h[3] = { hand_hdr(2), hand_hdr(3), hand_hdr(4) };
    static float v[3][NP], y0[NP];
    static const size_t piece[3] = { 250, CHUNK, 333 };
    float *x;
    rumor_round_stats_t st;
    for (long r = 0; r < 2; r++) {
        for (int i = 0; i < NP; i++) {
            v[0][i] = 1.0f + 0.1f * (float)(i % 7) + (float)r;
            v[1][i] = 1.0f - 0.1f * (float)(i % 5) - (float)r;
            v[2][i] = i % 2 ? 50.0f : -50.0f;
        }
        CHECK_OK(rumor_mixer_round_begin(m, r));
        for (int k = 0; k < 3; k++)
            send_ranges(push, &h[k], r, v[k], piece[k], k == 2 && r == 1 ? NP / 2 : NP, 0);
        CHECK_OK(rumor_mixer_round_end(m, r, &x, &st));
        int off = 0, first = -1;
        float want_first = 0;
        for (int i = 0; i < NP; i++) {
            float own = r == 0 ? 1.0f : y0[i];
            float liar = r == 1 && i >= NP / 2 ? own : v[2][i];
            float want = (own + median3(v[0][i], v[1][i], liar)) / 2;
            if (fabsf(x[i] - want) > 1e-5f && off++ == 0) {
                first = i;
                want_first = want;
            }
        }
        CHECKF(off == 0, "trimmed:1, round %ld: %d elements off the trimmed mean (first %d: %g, "
               "expected %g)", r, off, first, first >= 0 ? x[first] : 0.0, want_first);
        CHECKF(st.complete == (r == 0 ? 3 : 2) && st.timed_out == (r == 1),
               "round %ld: complete %d, timed out %d", r, st.complete, st.timed_out);
        if (r == 0)
            memcpy(y0, x, sizeof y0);
    }
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    rumor_topo_destroy(&t);
    CHECK_OK(rumor_topo_parse("ring:3", &t));
    c = base_config(t, 0);
    c.robust = RUMOR_ROBUST_TRIMMED;
    c.robust_trim = 1;
    CHECK_ERR(rumor_mixer_create(&c, ones, &m), RUMOR_EINVAL, "needs 3 in-neighbours");
    rumor_topo_destroy(&t);
}

/* "peer 1" on a slow link: sends round k of x = 3 in ranges of CHUNK (on
 * peer 0's grid), one every 150 ms, from its own thread and socket. */
struct trickle {
    long round;
    int pieces;
};

static void *trickle_main(void *arg)
{
    const struct trickle *tr = arg;
    void *ctx = zmq_ctx_new(), *push = zmq_socket(ctx, ZMQ_PUSH);
    int zero = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(push, endpoints[0]);
    static float v[NP];
    for (int i = 0; i < NP; i++)
        v[i] = 3.0f;
    rumor_wire_hdr_t h = { 0 };
    h.type = RUMOR_WIRE_PARAMS;
    h.dtype = RUMOR_WIRE_DT_F32;
    h.swarm = rumor_wire_swarm_id("test");
    h.sender = 2;
    h.incarnation = 5;
    h.space = NP;
    h.round = (uint64_t)tr->round;
    h.nchunks = (NP + CHUNK - 1) / CHUNK;
    for (int p = 0; p < tr->pieces; p++) {
        rumor_wire_hdr_t b = h;
        b.chunk = (uint32_t)p;
        b.offset = (uint64_t)p * CHUNK;
        b.length = b.offset + CHUNK > NP ? NP - b.offset : CHUNK;
        send_raw(push, &b, v + b.offset, b.length, 0);
        usleep(150000);
    }
    usleep(200000);
    zmq_close(push);
    zmq_ctx_term(ctx);
    return NULL;
}

/* A slow link: "peer 1"'s round 0 trickles in (11 ranges, 150 ms apart:
 * 1.6 s), past the adaptive deadline (1 s in the first rounds here), while
 * peer 0 waits in round_end: the round waits for it, since it arrives at a
 * rate that brings it in before round_timeout (10 s). Round 1 stops after 5
 * ranges: it ends soon after the flow stops, not at round_timeout. */
static void check_slow_link(void)
{
    rumor_topo_t *t;
    CHECK_OK(rumor_topo_parse("ring:2", &t));
    static float init[NP];
    for (int i = 0; i < NP; i++)
        init[i] = 1.0f;
    rumor_mixer_config_t c = base_config(t, 0);
    c.round_timeout = 10.0;
    c.min_round_timeout = 0.25; /* deadline 4 x 0.25 s until 8 rounds are seen */
    rumor_mixer_t *m = NULL;
    CHECK_OK(rumor_mixer_create(&c, init, &m));
    if (!m)
        return;
    for (long k = 0; k < 2; k++) {
        struct trickle tr = { k, k == 0 ? (NP + CHUNK - 1) / CHUNK : 5 };
        pthread_t th;
        CHECK_OK(rumor_mixer_round_begin(m, k));
        pthread_create(&th, NULL, trickle_main, &tr);
        float *x;
        rumor_round_stats_t st;
        CHECK_OK(rumor_mixer_round_end(m, k, &x, &st));
        pthread_join(th, NULL);
        fprintf(stderr, "slow link: round %ld took %.2f s (deadline %.2f s), %s\n", k, st.round_s,
                st.deadline_s, st.timed_out ? "timed out" : "complete");
        if (k == 0) {
            CHECKF(!st.timed_out && st.complete == 1 && st.round_s > st.deadline_s,
                   "a round whose data kept arriving was cut at %.2f s (deadline %.2f s)",
                   st.round_s, st.deadline_s);
            CHECK_CLOSE(x[NP - 1], 2.0, 1e-6, 0);
        } else {
            CHECKF(st.timed_out && st.round_s < 2.5,
                   "a round whose data stopped took %.2f s (timed out %d)", st.round_s,
                   st.timed_out);
        }
    }
    rumor_mixer_destroy(&m, 0.5);
    rumor_topo_destroy(&t);
}

/* Whether part `name` runs: all of them, or the one named on the command line. */
static int runs(const char *only, const char *name)
{
    return !*only || !strcmp(only, name);
}

/* Fresh loopback endpoints for the first n peers. */
static void new_endpoints(int n)
{
    for (int p = 0; p < n; p++) {
        snprintf(endpoints[p], sizeof endpoints[p], "tcp://127.0.0.1:%d", tu_free_port());
        eps[p] = endpoints[p];
    }
}

/* The deadline rule (rumor_round_deadline, shared by the mixer and
 * rumor-sim) against hand-computed values. */
static void check_round_deadline(void)
{
    double ring[32] = { 0.3, 0.1, 0.2, 0.5, 0.4, 0.9, 0.6, 0.8 }, pace = -1;
    /* fewer than 8 rounds: 4 x the shortest deadline, within the longest */
    CHECKF(rumor_round_deadline(ring, 7, 32, 0.5, 10, &pace) == 2.0 && pace == -1,
           "7 rounds: %g", rumor_round_deadline(ring, 7, 32, 0.5, 10, NULL));
    CHECKF(rumor_round_deadline(ring, 7, 32, 0.5, 1.5, NULL) == 1.5, "7 rounds, capped");
    /* 8 rounds: sorted 0.1 0.2 0.3 0.4 0.5 0.6 0.8 0.9, median v[4] = 0.5 */
    double d = rumor_round_deadline(ring, 8, 32, 0.5, 10, &pace);
    CHECKF(fabs(d - 2.0) < 1e-12 && pace == 0.5, "8 rounds: %g (pace %g)", d, pace);
    CHECKF(rumor_round_deadline(ring, 8, 32, 0.5, 1.0, NULL) == 1.0, "8 rounds, capped");
    CHECKF(rumor_round_deadline(ring, 8, 32, 3.0, 10, NULL) == 3.0, "8 rounds, floored");
    /* a full ring of 32 after 1000 rounds: all 32 count (median v[16]) */
    for (int i = 0; i < 32; i++)
        ring[i] = 0.01 * (double)((i * 7) % 32 + 1); /* 0.01 .. 0.32, shuffled */
    d = rumor_round_deadline(ring, 1000, 32, 0.001, 10, &pace);
    CHECKF(fabs(pace - 0.17) < 1e-12 && fabs(d - 0.68) < 1e-12, "full ring: %g (pace %g)", d,
           pace);
    /* a fixed deadline */
    CHECKF(rumor_round_deadline(ring, 1000, 32, 10, 10, NULL) == 10, "fixed deadline");
}

int main(int argc, char **argv)
{
    /* argv[1]: run one part only (deadline, exact, async, missing, hostile, outlier, slow, quiet,
     * late), for
     * debugging */
    const char *only = argc > 1 ? argv[1] : "";
    signal(SIGPIPE, SIG_IGN);
    tu_training_lock(); /* its deadlines assume the cores are its own */
    /* The parts in turn; the first that fails ends the test: the later ones
     * would take their whole time to say nothing new. Parts in this process
     * (hostile, slow) have a watchdog, the swarms' peers their own. */
    const char *failed = NULL;
    if (runs(only, "deadline")) {
        check_round_deadline();
        if (tu_failures)
            failed = "the deadline rule";
    }
    new_endpoints(3);
    if (!failed && runs(only, "exact") &&
        run_children("exact arithmetic / all-reduce", exact_child, 3) != 0)
        failed = "exact arithmetic / all-reduce";
    new_endpoints(3);
    if (!failed && runs(only, "async") &&
        run_children("asynchronous gossip with unlike cuts", async_child, 2) != 0)
        failed = "asynchronous gossip with unlike cuts";
    new_endpoints(3);
    if (!failed && runs(only, "missing") && run_children("missing peer", missing_child, 2) != 0)
        failed = "missing peer";
    new_endpoints(2);
    if (!failed && runs(only, "hostile")) {
        tu_watchdog(60, "hostile input");
        check_hostile();
        if (tu_failures)
            failed = "hostile input";
    }
    new_endpoints(3);
    if (!failed && runs(only, "outlier")) {
        tu_watchdog(60, "a diverged neighbour");
        check_outlier();
        check_robust_clip();
        check_robust_bound();
        check_robust_probe();
        new_endpoints(4);
        check_robust_trimmed();
        check_left_behind();
        if (tu_failures)
            failed = "a diverged neighbour";
    }
    new_endpoints(1);
    if (!failed && runs(only, "slow")) {
        tu_watchdog(60, "slow link");
        check_slow_link();
        if (tu_failures)
            failed = "slow link";
    }
    tu_watchdog(0, NULL);
    new_endpoints(2);
    if (!failed && runs(only, "quiet") &&
        run_children("rounds after quiet pauses", quiet_child, 2) != 0)
        failed = "rounds after quiet pauses";
    new_endpoints(2);
    if (!failed && runs(only, "late") &&
        run_children("parameters written after round_begin", late_child, 2) != 0)
        failed = "parameters written after round_begin";
    CHECKF(!failed, "%s failed; later parts not run", failed);
    return tu_finish("test_mixer");
}

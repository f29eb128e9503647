/* Compressed gossip (CHOCO-SGD's consensus, --compress) between real
 * processes over real ZeroMQ sockets on loopback.
 *
 * 1. Consensus: 8 peers on ring:8 (Metropolis-Hastings weights, 1/3 each),
 *    each from its own random starting point, gossip without any SGD step,
 *    with int8, int4, int2, topk:0.1, topk:0.1 in 2 bits and randk:0.1
 *    (their default consensus steps and keyframe intervals). For each
 *    codec:
 *    - the average of the peers' parameters stays the average of the
 *      starting points (CHOCO preserves it: W is doubly stochastic);
 *    - the peers agree on it to 1e-4 (relative to the starting spread);
 *    - int8 and int4 converge at the rate the analysis predicts within 20%:
 *      with a codec that loses little, x(k+1) = x + gamma (W - I) x, whose
 *      rate is max |1 - gamma (1 - lambda)| over the eigenvalues lambda != 1
 *      of W (here 1/3 + 2/3 cos(2 pi j / 8), computed in the test);
 *    - no round skipped its consensus step, and the bytes each peer sent
 *      are the codec's share of f32's (headers included, within 15%).
 * 2. Hostile and lost input, against one mixer (int8, a keyframe every 4
 *    rounds) and a raw socket playing its neighbour on ring:2: a coded
 *    range in a keyframe round, an f32 range or another codec's in a coded
 *    round, an int8 code -128, a NaN scale, a payload of the wrong size are
 *    rejected and counted by reason, and the mix is exactly what CHOCO
 *    computes from the valid ranges (computed here with the same codec).
 *    A round the neighbour sends half of leaves x alone (its copies are out
 *    of sync: consensus skipped), and so does the next, complete one; the
 *    next keyframe resynchronizes and mixes again.
 * 3. The all-reduce baseline's codecs: 5 peers (segments not dividing the
 *    space evenly, each peer its own chunk size) all-reduce known vectors
 *    coded with int8 and int4: every peer ends with the same values, bit
 *    for bit, within the codec's error of the mean computed here in double
 *    (each of the N - 1 reduce-scatter hops and the owner's encoding adds
 *    at most its block's largest partial sum / 254, or / 14); the f32 call
 *    on the same mixer gives the mean to float rounding. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "codec.h"
#include "mixer.h"
#include "mixutil.h"
#include "testutil.h"

#define PEERS 8
#define NP 20000
#define CHUNK 4096

static char endpoints[PEERS][64];
static const char *eps[PEERS];

static float x0_of(int p, int i)
{
    unsigned long long s = 0x9e3779b97f4a7c15ULL * (unsigned long long)(p * NP + i + 1);
    (void)tu_randu(&s);
    return tu_randf(&s) * (1.0f + (float)p) + (float)p;
}

struct codec_case {
    const char *spec;
    int rounds;
    int check_rate;
};

static int consensus_child(int self, const struct codec_case *cc, const char *path)
{
    rumor_topo_t *t;
    if (rumor_topo_parse("ring:8", &t) < 0)
        return 2;
    float *x = malloc(NP * sizeof *x);
    for (int i = 0; i < NP; i++)
        x[i] = x0_of(self, i);
    rumor_mixer_config_t c = { 0 };
    c.topo = t;
    c.self = self;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("choco");
    c.nparams = NP;
    c.chunk_elems = CHUNK;
    c.round_timeout = c.min_round_timeout = 30.0;
    if (rumor_codec_parse(cc->spec, &c.codec) < 0)
        return 2;
    rumor_mixer_t *m = NULL;
    if (rumor_mixer_create(&c, x, &m) < 0) {
        fprintf(stderr, "peer %d: %s\n", self, rumor_err_msg());
        return 2;
    }
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(rumor_mixer_barrier(m, 30.0) == 2);
    int skipped = 0, keyframes = 0;
    for (long k = 0; k < cc->rounds; k++) {
        float *px;
        rumor_round_stats_t st;
        CHECK_OK(rumor_mixer_round_begin(m, k));
        CHECK_OK(rumor_mixer_round_end(m, k, &px, &st));
        skipped += st.consensus_skipped;
        keyframes += st.keyframe;
        if (f)
            CHECK(fwrite(px, sizeof *px, NP, f) == NP);
    }
    uint64_t sent, recv;
    rumor_mixer_traffic(m, &sent, &recv);
    if (f) {
        double stats[3] = { (double)skipped, (double)keyframes, (double)sent };
        CHECK(fwrite(stats, sizeof stats, 1, f) == 1);
        fclose(f);
    }
    rumor_mixer_destroy(&m, 2.0);
    rumor_topo_destroy(&t);
    free(x);
    return tu_failures ? 1 : 0;
}

static void check_consensus(const struct codec_case *cc, const char *dir)
{
    for (int p = 0; p < PEERS; p++) {
        snprintf(endpoints[p], sizeof endpoints[p], "tcp://127.0.0.1:%d", tu_free_port());
        eps[p] = endpoints[p];
    }
    pid_t pid[PEERS];
    char path[PEERS][512];
    for (int p = 0; p < PEERS; p++) {
        snprintf(path[p], sizeof path[p], "%s/x-%d.bin", dir, p);
        pid[p] = fork();
        if (pid[p] == 0) {
            tu_failures = 0;
            alarm(240); /* a hang is a failure */
            _exit(consensus_child(p, cc, path[p]));
        }
    }
    int failed = 0;
    for (int p = 0; p < PEERS; p++) {
        int st;
        waitpid(pid[p], &st, 0);
        failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    CHECKF(failed == 0, "%s: %d peers failed", cc->spec, failed);
    if (failed)
        return;
    /* the average of the starting points, and their spread */
    double *avg = calloc(NP, sizeof *avg), d0 = 0;
    for (int p = 0; p < PEERS; p++)
        for (int i = 0; i < NP; i++)
            avg[i] += x0_of(p, i) / PEERS;
    for (int p = 0; p < PEERS; p++)
        for (int i = 0; i < NP; i++)
            d0 += (x0_of(p, i) - avg[i]) * (x0_of(p, i) - avg[i]);
    d0 = sqrt(d0);
    int R = cc->rounds;
    double *dist = calloc((size_t)R, sizeof *dist), *drift = calloc((size_t)R, sizeof *drift);
    double skipped = 0, sent = 0;
    float *buf = malloc(NP * sizeof *buf);
    double *mean = malloc(NP * sizeof *mean);
    FILE *f[PEERS];
    for (int p = 0; p < PEERS; p++)
        f[p] = fopen(path[p], "rb");
    for (int k = 0; k < R; k++) {
        memset(mean, 0, NP * sizeof *mean);
        for (int p = 0; p < PEERS; p++) {
            CHECK(fread(buf, sizeof *buf, NP, f[p]) == NP);
            for (int i = 0; i < NP; i++) {
                dist[k] += (buf[i] - avg[i]) * (buf[i] - avg[i]);
                mean[i] += buf[i] / (double)PEERS;
            }
        }
        double dr = 0, a = 0;
        for (int i = 0; i < NP; i++) {
            dr += (mean[i] - avg[i]) * (mean[i] - avg[i]);
            a += avg[i] * avg[i];
        }
        dist[k] = sqrt(dist[k]) / d0;
        drift[k] = sqrt(dr / a);
    }
    for (int p = 0; p < PEERS; p++) {
        double stats[3];
        CHECK(fread(stats, sizeof stats, 1, f[p]) == 1);
        skipped += stats[0];
        sent += stats[2];
        fclose(f[p]);
    }
    rumor_codec_t c;
    RUMOR_IGNORE(rumor_codec_parse(cc->spec, &c));
    double gamma = rumor_codec_default_gamma(&c);
    int kf = rumor_codec_default_keyframe(&c);
    /* bytes: per round each peer sends its model to 2 neighbours, f32 in
     * keyframes, coded otherwise, in ranges of CHUNK with 80-byte headers */
    int nkf = (R + kf - 1) / kf, ncoded = R - nkf, nch = (NP + CHUNK - 1) / CHUNK;
    double coded = 0;
    for (int ch = 0; ch < nch; ch++)
        coded += (double)rumor_codec_bytes(&c, ch == nch - 1 ? NP - ch * CHUNK : CHUNK) + 80;
    double model = PEERS * 2.0 * (nkf * (4.0 * NP + 80.0 * nch) + ncoded * coded);
    double rate = NAN, pred = 0;
    for (int j = 1; j < PEERS; j++) {
        double lam = 1.0 / 3 + 2.0 / 3 * cos(2 * M_PI * j / PEERS);
        pred = fmax(pred, fabs(1 - gamma * (1 - lam)));
    }
    if (cc->check_rate) {
        /* the slope of log distance from 1e-1 to 1e-4 */
        int a = -1, b = -1;
        for (int k = 0; k < R; k++) {
            if (a < 0 && dist[k] < 1e-1)
                a = k;
            if (b < 0 && dist[k] < 1e-4)
                b = k;
        }
        if (a >= 0 && b > a)
            rate = pow(dist[b] / dist[a], 1.0 / (b - a));
    }
    double maxdrift = 0;
    for (int k = 0; k < R; k++)
        maxdrift = fmax(maxdrift, drift[k]);
    printf("choco %-10s gamma %.2f keyframe every %2d: distance %.2e after %d rounds, mean drift "
           "%.1e, rate %.4f (analysis %.4f), bytes %.3f of f32 (model %.3f), skipped %.0f\n",
           cc->spec, gamma, kf, dist[R - 1], R, maxdrift, rate, pred,
           sent / (PEERS * 2.0 * R * 4.0 * NP), model / (PEERS * 2.0 * R * 4.0 * NP), skipped);
    CHECKF(dist[R - 1] < 1e-4, "%s: consensus distance %.3g after %d rounds", cc->spec,
           dist[R - 1], R);
    CHECKF(maxdrift < 1e-5, "%s: the average moved by %.3g", cc->spec, maxdrift);
    CHECKF(skipped == 0, "%s: %.0f rounds skipped their consensus step", cc->spec, skipped);
    /* heartbeats and HELLOs add a little; the last sends may not be counted yet */
    CHECKF(sent >= 0.98 * model && sent < 1.15 * model,
           "%s: %.0f bytes sent, the codec's model %.0f", cc->spec, sent, model);
    if (cc->check_rate)
        CHECKF(fabs(log(rate) / log(pred) - 1) < 0.2, "%s: rate %.4f a round, analysis %.4f",
               cc->spec, rate, pred);
    free(avg), free(dist), free(drift), free(buf), free(mean);
}

/* ------------------------------------------------- coded all-reduce */

#define AR_PEERS 5
#define AR_N 3001

static float ar_x(int p, int i) { return (float)((p + 1) * 0.37 * sin(0.01 * i + p)) + 0.1f * p; }

static int allreduce_child(int self, const char *spec, const char *path)
{
    rumor_topo_t *t;
    if (rumor_topo_parse("ring:5", &t) < 0)
        return 2;
    static float x[AR_N], y[AR_N];
    for (int i = 0; i < AR_N; i++)
        x[i] = ar_x(self, i);
    rumor_mixer_config_t c = { 0 };
    c.topo = t;
    c.self = self;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("choco-ar");
    c.nparams = AR_N;
    c.chunk_elems = 100 + 77 * (size_t)self;
    c.round_timeout = 30;
    if (rumor_codec_parse(spec, &c.codec) < 0)
        return 2;
    rumor_mixer_t *m = NULL;
    if (rumor_mixer_create(&c, x, &m) < 0) {
        fprintf(stderr, "peer %d: %s\n", self, rumor_err_msg());
        return 2;
    }
    CHECK(rumor_mixer_barrier(m, 30.0) == 2);
    memcpy(y, x, sizeof y);
    CHECK_OK(rumor_mixer_allreduce_mean(m, x, AR_N, 1, 30.0, 1));
    CHECK_OK(rumor_mixer_allreduce_mean(m, y, AR_N, 2, 30.0, 0));
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(x, sizeof x, 1, f) == 1 && fwrite(y, sizeof y, 1, f) == 1);
    if (f)
        fclose(f);
    rumor_mixer_destroy(&m, 2.0);
    rumor_topo_destroy(&t);
    return tu_failures ? 1 : 0;
}

static void check_allreduce(const char *spec, const char *dir)
{
    for (int p = 0; p < AR_PEERS; p++) {
        snprintf(endpoints[p], sizeof endpoints[p], "tcp://127.0.0.1:%d", tu_free_port());
        eps[p] = endpoints[p];
    }
    pid_t pid[AR_PEERS];
    char path[AR_PEERS][512];
    for (int p = 0; p < AR_PEERS; p++) {
        snprintf(path[p], sizeof path[p], "%s/ar-%d.bin", dir, p);
        pid[p] = fork();
        if (pid[p] == 0) {
            tu_failures = 0;
            alarm(120);
            _exit(allreduce_child(p, spec, path[p]));
        }
    }
    int failed = 0;
    for (int p = 0; p < AR_PEERS; p++) {
        int st;
        waitpid(pid[p], &st, 0);
        failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    CHECKF(failed == 0, "coded all-reduce %s: %d peers failed", spec, failed);
    if (failed)
        return;
    static float x[AR_PEERS][AR_N], y[AR_PEERS][AR_N];
    for (int p = 0; p < AR_PEERS; p++) {
        FILE *f = fopen(path[p], "rb");
        CHECK(f && fread(x[p], sizeof x[p], 1, f) == 1 && fread(y[p], sizeof y[p], 1, f) == 1);
        if (f)
            fclose(f);
    }
    double div = strcmp(spec, "int8") == 0 ? 254.0 : 14.0, worst = 0, f32err = 0;
    int same = 1, within = 1;
    for (int i = 0; i < AR_N; i++) {
        double mean = 0, big = 0, part = 0;
        for (int p = 0; p < AR_PEERS; p++) {
            mean += ar_x(p, i) / AR_PEERS;
            part += fabs(ar_x(p, i));
        }
        /* the largest partial sum in i's block bounds every hop's error */
        for (int j = i / 256 * 256; j < AR_N && j < (i / 256 + 1) * 256; j++) {
            double s = 0;
            for (int p = 0; p < AR_PEERS; p++)
                s += fabs(ar_x(p, j));
            big = fmax(big, s);
        }
        double bound = AR_PEERS * big / div / AR_PEERS * 1.01;
        for (int p = 0; p < AR_PEERS; p++) {
            same &= memcmp(&x[p][i], &x[0][i], sizeof(float)) == 0;
            f32err = fmax(f32err, fabs(y[p][i] - mean) / part); /* float rounding of the sum */
        }
        worst = fmax(worst, fabs(x[0][i] - mean) / bound);
        within &= fabs(x[0][i] - mean) <= bound;
    }
    printf("choco all-reduce %s: error %.2f of the bound, f32 relative error %.1e\n", spec, worst,
           f32err);
    CHECKF(same, "coded all-reduce %s: peers ended with different values", spec);
    CHECKF(within, "coded all-reduce %s: %.2f x the error bound", spec, worst);
    CHECKF(f32err < 1e-6, "f32 all-reduce after a coded one: relative error %.3g", f32err);
}

/* ---------------------------------------------------------- hostile */

#define HN 1000

static void send_raw(void *push, const rumor_wire_hdr_t *h, const void *payload, size_t bytes)
{
    mu_send_raw(push, h, payload, bytes, 0);
}

/* the neighbour's range [off, off + len) of round r: f32 v, or int8 of v
 * (whose decoding, what the mixer adds, goes to *q) */
static void send_range(void *push, const rumor_wire_hdr_t *h0, long r, int coded, float v,
                       size_t off, size_t len, float *q)
{
    static float vals[HN], dec[HN];
    static uint8_t bytes[HN * 2];
    rumor_wire_hdr_t h = *h0;
    h.round = (uint64_t)r;
    h.offset = off;
    h.length = len;
    for (size_t i = 0; i < len; i++)
        vals[i] = v;
    if (!coded) {
        h.dtype = RUMOR_WIRE_DT_F32;
        send_raw(push, &h, vals, len * 4);
        return;
    }
    rumor_codec_t c = { RUMOR_CODEC_INT8, 1, 0, 0 };
    uint32_t aux;
    CHECK_OK(rumor_codec_encode(&c, vals, len, 0, bytes, &aux, dec, NULL));
    if (q)
        memcpy(q + off, dec, len * sizeof *q);
    h.dtype = RUMOR_WIRE_DT_Q8;
    send_raw(push, &h, bytes, rumor_codec_bytes(&c, len));
}

static void check_hostile(void)
{
    rumor_topo_t *t;
    CHECK_OK(rumor_topo_parse("ring:2", &t));
    snprintf(endpoints[0], sizeof endpoints[0], "tcp://127.0.0.1:%d", tu_free_port());
    snprintf(endpoints[1], sizeof endpoints[1], "tcp://127.0.0.1:%d", tu_free_port());
    eps[0] = endpoints[0], eps[1] = endpoints[1];
    static float init[HN], x[HN], xhat[HN], s[HN], q0[HN], q1[HN], d[HN];
    for (int i = 0; i < HN; i++)
        init[i] = 1.0f + 0.001f * (float)i;
    rumor_mixer_config_t c = { 0 };
    c.topo = t;
    c.self = 0;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("test");
    c.nparams = HN;
    c.chunk_elems = 300;
    c.round_timeout = 1.0;
    c.codec.kind = RUMOR_CODEC_INT8;
    c.keyframe_every = 4;
    rumor_mixer_t *m = NULL;
    CHECK_OK(rumor_mixer_create(&c, init, &m));
    if (!m)
        return;
    void *ctx = zmq_ctx_new(), *push = mu_push(ctx, endpoints[0]);
    rumor_wire_hdr_t h = { 0 };
    h.type = RUMOR_WIRE_PARAMS;
    h.swarm = c.swarm;
    h.sender = 2; /* node 1 */
    h.incarnation = 5;
    h.space = HN;
    h.nchunks = 1;
    float *px;
    rumor_round_stats_t st;
    memcpy(x, init, sizeof x);
    rumor_codec_t c8 = { RUMOR_CODEC_INT8, 1, 0, 0 };
    uint8_t bad[2 * HN];
    uint32_t aux;

    /* round 0, a keyframe: a coded range is refused, then f32 3.0 mixes:
     * s = (x + 3) / 2, x_hat = x, x = x + (s - x_hat) */
    CHECK_OK(rumor_mixer_round_begin(m, 0));
    send_range(push, &h, 0, 1, 3.0f, 0, HN, NULL);
    send_range(push, &h, 0, 0, 3.0f, 0, 500, NULL);
    send_range(push, &h, 0, 0, 3.0f, 500, 500, NULL);
    CHECK_OK(rumor_mixer_round_end(m, 0, &px, &st));
    int off = 0;
    for (int i = 0; i < HN; i++) {
        xhat[i] = x[i];
        s[i] = 0.5f * x[i] + 0.5f * 3.0f;
        x[i] = x[i] + (s[i] - xhat[i]);
        off += fabsf(px[i] - x[i]) > 1e-6f;
    }
    CHECKF(off == 0 && st.keyframe && !st.consensus_skipped,
           "keyframe: %d places off (x[0] %g, expected %g), keyframe %d, skipped %d", off,
           px[0], x[0], st.keyframe, st.consensus_skipped);

    /* round 1, coded: malformed ranges first, then int8 of 0.5 */
    for (int i = 0; i < HN; i++)
        d[i] = px[i] - xhat[i];
    CHECK_OK(rumor_codec_encode(&c8, d, 300, 0, bad, &aux, q0, NULL)); /* the mixer's chunks */
    CHECK_OK(rumor_codec_encode(&c8, d + 300, 300, 0, bad, &aux, q0 + 300, NULL));
    CHECK_OK(rumor_codec_encode(&c8, d + 600, 300, 0, bad, &aux, q0 + 600, NULL));
    CHECK_OK(rumor_codec_encode(&c8, d + 900, 100, 0, bad, &aux, q0 + 900, NULL));
    CHECK_OK(rumor_mixer_round_begin(m, 1));
    send_range(push, &h, 1, 0, 0.5f, 0, 100, NULL); /* f32 in a coded round */
    rumor_wire_hdr_t b = h;
    b.round = 1, b.length = 100, b.dtype = RUMOR_WIRE_DT_Q8;
    static float half[HN];
    for (int i = 0; i < HN; i++)
        half[i] = 0.5f;
    CHECK_OK(rumor_codec_encode(&c8, half, 100, 0, bad, &aux, d, NULL));
    bad[4 + 17] = 0x80; /* code -128 */
    send_raw(push, &b, bad, rumor_codec_bytes(&c8, 100));
    CHECK_OK(rumor_codec_encode(&c8, half, 100, 0, bad, &aux, d, NULL));
    float nan = NAN;
    memcpy(bad, &nan, 4); /* a NaN scale */
    send_raw(push, &b, bad, rumor_codec_bytes(&c8, 100));
    send_raw(push, &b, bad, rumor_codec_bytes(&c8, 100) - 1); /* one byte short */
    b.dtype = RUMOR_WIRE_DT_TOPK, b.aux = 3; /* another codec */
    send_raw(push, &b, bad, 24);
    send_range(push, &h, 1, 1, 0.5f, 0, 700, q1);
    send_range(push, &h, 1, 1, 0.5f, 700, 300, q1);
    CHECK_OK(rumor_mixer_round_end(m, 1, &px, &st));
    off = 0;
    for (int i = 0; i < HN; i++) {
        xhat[i] += q0[i];
        s[i] += 0.5f * q0[i] + 0.5f * q1[i];
        x[i] = x[i] + (s[i] - xhat[i]);
        off += fabsf(px[i] - x[i]) > 1e-5f;
    }
    CHECKF(off == 0 && !st.keyframe && !st.consensus_skipped,
           "coded round: %d places off (x[0] %g, expected %g), skipped %d", off, px[0], x[0],
           st.consensus_skipped);

    /* round 2: half a round arrives: x stays; round 3: complete but the
     * copies are out of sync: x stays; round 4, a keyframe: mixes again */
    float before[HN];
    memcpy(before, px, sizeof before);
    CHECK_OK(rumor_mixer_round_begin(m, 2));
    send_range(push, &h, 2, 1, 0.25f, 0, 500, NULL);
    CHECK_OK(rumor_mixer_round_end(m, 2, &px, &st));
    CHECKF(st.consensus_skipped && memcmp(px, before, sizeof before) == 0,
           "half a coded round: skipped %d, x[0] %g (was %g)", st.consensus_skipped, px[0],
           before[0]);
    CHECK_OK(rumor_mixer_round_begin(m, 3));
    send_range(push, &h, 3, 1, 0.25f, 0, HN, NULL);
    CHECK_OK(rumor_mixer_round_end(m, 3, &px, &st));
    CHECKF(st.consensus_skipped && memcmp(px, before, sizeof before) == 0,
           "the round after a lost one: skipped %d", st.consensus_skipped);
    CHECK_OK(rumor_mixer_round_begin(m, 4));
    send_range(push, &h, 4, 0, 3.0f, 0, HN, NULL);
    CHECK_OK(rumor_mixer_round_end(m, 4, &px, &st));
    off = 0;
    for (int i = 0; i < HN; i++)
        off += fabsf(px[i] - (0.5f * before[i] + 1.5f)) > 1e-6f;
    CHECKF(off == 0 && st.keyframe && !st.consensus_skipped,
           "the keyframe after lost rounds: %d places off, skipped %d", off,
           st.consensus_skipped);
    rumor_mixer_counters_t ct;
    rumor_mixer_counters(m, &ct);
    CHECK(ct.consensus_skipped == 2);

    rumor_wire_stats_t ws;
    mu_wire_stats(m, &ws);
    CHECK(ws.rejected[RUMOR_WIRE_UNSUPPORTED_DTYPE] == 3);
    CHECK(ws.rejected[RUMOR_WIRE_BAD_CODE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_NONFINITE] == 1);
    CHECK(ws.rejected[RUMOR_WIRE_BAD_PAYLOAD_SIZE] == 1);
    zmq_close(push);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    rumor_topo_destroy(&t);
}

int main(void)
{
    tu_training_lock(); /* 8 processes: the cores are theirs */
    const char *dir = tu_tmpdir();
    check_hostile();
    check_allreduce("int8", dir);
    check_allreduce("int4", dir);
    static const struct codec_case cases[] = {
        { "int8", 60, 1 },
        { "int4", 80, 1 },
        { "int2", 160, 0 },
        { "topk:0.1", 260, 0 },
        { "topk:0.1:bits=2", 280, 0 },
        { "randk:0.1", 460, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_consensus(&cases[i], dir);
    return tu_finish("test_choco");
}

/* The codecs of compressed gossip (gossip/codec.h), against what each one
 * promises, computed here independently:
 *
 * 1. Specs: valid ones parse, bad ones are refused naming what is valid.
 * 2. Round trips on data with outliers, ranges of unlike lengths:
 *    - what the sender is told it sent (q) is bitwise what the receiver
 *      decodes, read in one piece or in uneven pieces;
 *    - int8, int4 and int2: every element within (its block's largest
 *      magnitude) / 254, / 14 and / 2, recomputed here;
 *    - topk:F:bits=B: in each chunk exactly its k (recomputed here from F,
 *      C and the chunk's length) elements, the largest in magnitude, each
 *      within the chunk's largest / 2^(B-1) (half that for any element of
 *      at least half a step), the sign kept, the rest 0; aux and the size
 *      recomputed from the layout;
 *    - topk: exactly k = ceil(F n) elements, the largest in magnitude (no
 *      element left out is larger than one taken), exact, the rest 0;
 *    - randk: exactly k elements, exact, the rest 0, and over many seeds
 *      every element is taken about k / n of the time (chi-square);
 *    - payload sizes match rumor_codec_bytes and the f32 ratio.
 * 3. Error feedback (CHOCO's sender): x_hat += q each round; the residual
 *    x - x_hat holds exactly what was not sent: for topk, after round t it
 *    is 0 where an element went out and x elsewhere, bitwise, and after
 *    ceil(n / k) rounds everything went out; for int8, the residual
 *    shrinks by 127x a round until it is float rounding; for topk in 2
 *    bits, an element not taken keeps its residual bitwise, one taken
 *    keeps d - q (to rounding), and 300 rounds send it all to 1e-4.
 * 4. Malformed payloads: every kind of damage (size, aux, a NaN or a
 *    negative scale, the code -128, a nibble 0, a 2-bit code 0, padding,
 *    topk indices out of order or out of range or their chunk, a NaN value,
 *    an aux no topk with bits has) is rejected with its reason, by
 *    rumor_codec_check and by rumor_wire_check for sizes; random bytes
 *    never decode to a non-finite value once accepted. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "testutil.h"
#include "wire.h"

static unsigned long long seed = 0x5eedc0dec0deULL;

/* data with a spread of scales and a few outliers */
static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = tu_randf(&seed) * 2.0f - 1.0f;
        if (tu_randu(&seed) % 97 == 0)
            v *= 50.0f;
        if (tu_randu(&seed) % 13 == 0)
            v = 0.0f;
        x[i] = v * (1.0f + (float)(i / 300));
    }
}

static void check_parse(void)
{
    rumor_codec_t c;
    CHECK_OK(rumor_codec_parse("int8", &c));
    CHECK(c.kind == RUMOR_CODEC_INT8);
    CHECK_OK(rumor_codec_parse("topk:0.01", &c));
    CHECK(c.kind == RUMOR_CODEC_TOPK && c.frac == 0.01);
    CHECK_OK(rumor_codec_parse("randk:5%", &c));
    CHECK(c.kind == RUMOR_CODEC_RANDK && fabs(c.frac - 0.05) < 1e-12);
    CHECK_OK(rumor_codec_parse("none", &c));
    CHECK(c.kind == RUMOR_CODEC_NONE);
    char buf[32];
    CHECK_OK(rumor_codec_parse("topk:0.25", &c));
    rumor_codec_format(&c, buf, sizeof buf);
    CHECK(strcmp(buf, "topk:0.25") == 0);
    CHECK_ERR(rumor_codec_parse("int3", &c), RUMOR_EINVAL, "expected none, int8, int4");
    CHECK_ERR(rumor_codec_parse("topk:0", &c), RUMOR_EINVAL, "must be a number in (0, 1]");
    CHECK_ERR(rumor_codec_parse("topk:1.5", &c), RUMOR_EINVAL, "in (0, 1]");
    CHECK_ERR(rumor_codec_parse("randk:", &c), RUMOR_EINVAL, "in (0, 1]");
    CHECK_ERR(rumor_codec_parse("topk:0.1x", &c), RUMOR_EINVAL, "'0.1x'");
    CHECK_ERR(rumor_codec_parse("randk:nan", &c), RUMOR_EINVAL, "in (0, 1]");
    CHECK_OK(rumor_codec_parse("int2", &c));
    CHECK(c.kind == RUMOR_CODEC_INT2);
    CHECK_OK(rumor_codec_parse("topk:0.02:bits=2", &c));
    CHECK(c.kind == RUMOR_CODEC_TOPK && c.frac == 0.02 && c.bits == 2 && c.chunk == 4096);
    CHECK(rumor_codec_chunk_k(&c) == 82); /* ceil(0.02 * 4096) */
    rumor_codec_format(&c, buf, sizeof buf);
    CHECK(strcmp(buf, "topk:0.02:bits=2") == 0);
    CHECK_OK(rumor_codec_parse("topk:1.5%:bits=4:chunk=256", &c));
    CHECK(c.bits == 4 && c.chunk == 256 && fabs(c.frac - 0.015) < 1e-12);
    CHECK(rumor_codec_chunk_k(&c) == 4);
    rumor_codec_format(&c, buf, sizeof buf);
    CHECK(strcmp(buf, "topk:0.015:bits=4:chunk=256") == 0);
    CHECK_ERR(rumor_codec_parse("topk:0.1:bits=3", &c), RUMOR_EINVAL, "bits must be 2, 4 or 8");
    CHECK_ERR(rumor_codec_parse("topk:0.1:bits=2:chunk=100", &c), RUMOR_EINVAL,
              "power of two in [64, 32768]");
    CHECK_ERR(rumor_codec_parse("topk:0.1:chunk=1024", &c), RUMOR_EINVAL, "goes with bits=B");
    CHECK_ERR(rumor_codec_parse("randk:0.1:bits=2", &c), RUMOR_EINVAL, "unknown option 'bits=2'");
    CHECK_ERR(rumor_codec_parse("topk:0.1:bits=2x", &c), RUMOR_EINVAL, "'x' after a number");
    /* the ratio of 1.56% in 2 bits: 4096 floats against a scale, 64 indices
     * of 12 bits and 64 values of 2 */
    CHECK_OK(rumor_codec_parse("topk:0.015625:bits=2", &c));
    CHECK(fabs(rumor_codec_ratio(&c) - 16384.0 / (4 + 64 * 14 / 8.0)) < 1e-9);
}

/* topk:F:bits=B's values in a chunk of n elements, from the spec's words */
static size_t chunk_k(const rumor_codec_t *c, size_t n)
{
    size_t C = (size_t)c->chunk, k = (size_t)ceil(c->frac * (double)C);
    k = k < 1 ? 1 : k;
    if (n == C)
        return k;
    size_t kl = (k * n + C - 1) / C;
    return kl < 1 ? 1 : (kl > n ? n : kl);
}

/* topk with bits against its promises, chunk by chunk */
static void check_topkq(const rumor_codec_t *c, const float *x, const float *q, size_t n,
                        uint32_t aux, size_t nb, const char *spec)
{
    size_t C = (size_t)c->chunk, lc = 0, K = 0;
    while (((size_t)1 << lc) < C)
        lc++;
    CHECKF(aux == (uint32_t)(chunk_k(c, C) | lc << 16 | (size_t)c->bits << 24), "%s: aux %#x",
           spec, (unsigned)aux);
    double M = (double)(1 << (c->bits - 1));
    int count_ok = 1, order_ok = 1, err_ok = 1;
    for (size_t lo = 0; lo < n; lo += C) {
        size_t hi = lo + C < n ? lo + C : n, k = chunk_k(c, hi - lo), taken = 0;
        K += k;
        double amax = 0, min_in = INFINITY, max_out = 0;
        for (size_t i = lo; i < hi; i++)
            amax = fmax(amax, fabs(x[i]));
        double step = amax / M;
        for (size_t i = lo; i < hi; i++) {
            if (q[i] != 0.0f) {
                taken++;
                min_in = fmin(min_in, fabs(x[i]));
                double e = fabs((double)q[i] - x[i]);
                double bound = fabs(x[i]) >= step / 2 ? step / 2 : step;
                err_ok &= e <= bound * (1 + 1e-5) && (x[i] == 0.0f || (q[i] < 0) == (x[i] < 0));
            } else {
                max_out = fmax(max_out, fabs(x[i]));
            }
        }
        count_ok &= taken == k || amax == 0;
        order_ok &= max_out <= min_in;
    }
    CHECKF(count_ok, "%s n=%zu: a chunk sent other than its k values", spec, n);
    CHECKF(order_ok, "%s n=%zu: an element left out is larger than one taken", spec, n);
    CHECKF(err_ok, "%s n=%zu: a value off by more than its step or with its sign lost", spec, n);
    size_t nch = (n + C - 1) / C;
    CHECKF(nb == 4 * nch + (K * lc + 7) / 8 + (K * (size_t)c->bits + 7) / 8,
           "%s n=%zu: %zu bytes", spec, n, nb);
}

/* decodes a payload in pieces of the given sizes (cycled) */
static void decode(const rumor_codec_t *c, const void *p, size_t n, uint32_t aux, float *out,
                   const size_t *pieces, int npieces)
{
    rumor_codec_reader_t r;
    rumor_codec_reader_init(&r, rumor_codec_dtype(c), p, n, aux);
    size_t at = 0;
    for (int i = 0; at < n; i = (i + 1) % npieces) {
        size_t k = pieces[i] < n - at ? pieces[i] : n - at;
        rumor_codec_read(&r, out + at, k);
        at += k;
    }
}

static void check_round_trip(const char *spec, size_t n)
{
    rumor_codec_t c;
    CHECK_OK(rumor_codec_parse(spec, &c));
    float *x = malloc(n * sizeof *x), *q = malloc(n * sizeof *q), *d1 = malloc(n * sizeof *d1);
    float *d2 = malloc(n * sizeof *d2), *scratch = malloc(n * sizeof *scratch);
    size_t nb = rumor_codec_bytes(&c, n);
    uint8_t *p = malloc(nb);
    fill(x, n);
    uint32_t aux = 99;
    CHECK_OK(rumor_codec_encode(&c, x, n, 1234 + n, p, &aux, q, scratch));
    CHECKF(rumor_codec_check(rumor_codec_dtype(&c), p, nb, n, aux) == 0, "%s n=%zu: %s", spec,
           n, rumor_err_msg());
    CHECK(rumor_codec_payload_bytes(rumor_codec_dtype(&c), n, aux) == nb);
    static const size_t whole[] = { (size_t)1 << 30 };
    static const size_t uneven[] = { 1, 7, 255, 256, 3, 1000 };
    decode(&c, p, n, aux, d1, whole, 1);
    decode(&c, p, n, aux, d2, uneven, 6);
    CHECKF(memcmp(q, d1, n * sizeof *q) == 0, "%s n=%zu: the sender's q is not what decodes",
           spec, n);
    CHECKF(memcmp(d1, d2, n * sizeof *q) == 0, "%s n=%zu: decoding in pieces differs", spec, n);
    if (c.kind == RUMOR_CODEC_TOPK && c.bits) {
        check_topkq(&c, x, q, n, aux, nb, spec);
    } else if (c.kind == RUMOR_CODEC_INT8 || c.kind == RUMOR_CODEC_INT4 ||
               c.kind == RUMOR_CODEC_INT2) {
        double div = c.kind == RUMOR_CODEC_INT8 ? 254.0 : c.kind == RUMOR_CODEC_INT4 ? 14.0 : 2.0;
        int ok = 1;
        for (size_t b = 0; b * 256 < n; b++) {
            double amax = 0;
            for (size_t i = b * 256; i < n && i < (b + 1) * 256; i++)
                amax = fmax(amax, fabs(x[i]));
            for (size_t i = b * 256; i < n && i < (b + 1) * 256; i++)
                if (fabs((double)q[i] - x[i]) > amax / div * (1 + 1e-5) + 1e-30)
                    ok = 0;
        }
        CHECKF(ok, "%s n=%zu: an element off by more than its block's max / %g", spec, n, div);
        CHECK(aux == 0);
    } else {
        size_t k = (size_t)ceil(c.frac * (double)n), taken = 0;
        if (k < 1)
            k = 1;
        CHECK(aux == k);
        double min_in = INFINITY, max_out = 0;
        int exact = 1;
        for (size_t i = 0; i < n; i++) {
            /* an element 0 that was taken reads as not taken: harmless */
            if (q[i] != 0.0f) {
                taken++;
                exact &= q[i] == x[i];
                min_in = fmin(min_in, fabs(x[i]));
            } else {
                max_out = fmax(max_out, fabs(x[i]));
            }
        }
        CHECKF(exact, "%s: a value taken is not exact", spec);
        CHECKF(taken <= k, "%s n=%zu: %zu non-zero values, k = %zu", spec, n, taken, k);
        if (c.kind == RUMOR_CODEC_TOPK) {
            CHECKF(taken == k || max_out == 0, "%s n=%zu: %zu taken, k = %zu", spec, n, taken, k);
            CHECKF(max_out <= min_in, "%s n=%zu: left out %g > taken %g", spec, n, max_out,
                   min_in);
        }
    }
    double ratio = 4.0 * (double)n / (double)nb;
    if (n >= 65536)
        CHECKF(fabs(ratio / rumor_codec_ratio(&c) - 1) < 0.02, "%s: ratio %.3f, model %.3f",
               spec, ratio, rumor_codec_ratio(&c));
    free(x), free(q), free(d1), free(d2), free(scratch), free(p);
}

/* randk takes every element equally often: chi-square over 4000 seeds */
static void check_randk_uniform(void)
{
    rumor_codec_t c = { RUMOR_CODEC_RANDK, 0.1, 0, 0 };
    enum { N = 100, T = 4000 };
    float x[N], q[N];
    for (int i = 0; i < N; i++)
        x[i] = 1.0f + (float)i;
    uint8_t p[8 + 4 * N];
    long count[N] = { 0 };
    for (int t = 0; t < T; t++) {
        uint32_t aux;
        CHECK_OK(rumor_codec_encode(&c, x, N, 0xabc0000ULL + (uint64_t)t * 7919, p, &aux, q,
                                    NULL));
        int nz = 0;
        for (int i = 0; i < N; i++)
            if (q[i] != 0.0f) {
                count[i]++;
                nz++;
            }
        if (nz != 10) {
            CHECKF(nz == 10, "randk took %d of 100, k = 10", nz);
            break;
        }
    }
    double e = T * 0.1, chi = 0;
    for (int i = 0; i < N; i++)
        chi += (count[i] - e) * (count[i] - e) / e;
    /* 99 degrees of freedom: the 99.99th percentile is about 163 */
    CHECKF(chi < 163, "randk selection chi-square %.1f over 100 elements", chi);
}

static void check_error_feedback(void)
{
    enum { N = 1000 };
    float x[N], xhat[N], q[N], d[N], scratch[N];
    uint8_t p[16 * N];
    fill(x, N);
    for (int i = 0; i < N; i++)
        x[i] += (x[i] == 0.0f) ? 0.5f : 0.0f; /* every element has something to send */
    rumor_codec_t c = { RUMOR_CODEC_TOPK, 0.03, 0, 0 }; /* k = 30: 34 rounds */
    memset(xhat, 0, sizeof xhat);
    uint8_t sent[N] = { 0 };
    int rounds = 0, exact = 1;
    for (; rounds < 40; rounds++) {
        int left = 0;
        for (int i = 0; i < N; i++) {
            d[i] = x[i] - xhat[i];
            left += d[i] != 0.0f;
        }
        if (!left)
            break;
        uint32_t aux;
        CHECK_OK(rumor_codec_encode(&c, d, N, 1, p, &aux, q, scratch));
        for (int i = 0; i < N; i++) {
            sent[i] |= q[i] != 0.0f;
            xhat[i] += q[i];
        }
        for (int i = 0; i < N; i++) /* the residual: x where not sent, 0 where sent */
            exact &= sent[i] ? x[i] - xhat[i] == 0.0f : x[i] - xhat[i] == x[i];
    }
    CHECKF(exact, "topk's residual is not exactly what was not sent");
    CHECKF(rounds == (N + 29) / 30, "topk sent everything in %d rounds, %d expected", rounds,
           (N + 29) / 30);

    /* int8: the residual shrinks by about 127x a round */
    rumor_codec_t c8 = { RUMOR_CODEC_INT8, 1, 0, 0 };
    memset(xhat, 0, sizeof xhat);
    double prev = 0;
    for (int i = 0; i < N; i++)
        prev = fmax(prev, fabs(x[i]));
    for (int t = 0; t < 3; t++) {
        uint32_t aux;
        for (int i = 0; i < N; i++)
            d[i] = x[i] - xhat[i];
        CHECK_OK(rumor_codec_encode(&c8, d, N, 1, p, &aux, q, NULL));
        double r = 0;
        for (int i = 0; i < N; i++) {
            xhat[i] += q[i];
            /* exactly what was not sent, up to the rounding of x_hat's sum */
            double left = (double)x[i] - xhat[i], unsent = (double)d[i] - q[i];
            if (fabs(left - unsent) > 2e-7 * fabs(x[i]) + 1e-30)
                exact = 0;
            r = fmax(r, fabs(left));
        }
        CHECKF(r <= prev / 127.0 * 1.01 + 1e-6 * fabs(prev), "int8 round %d: residual %g after %g",
               t, r, prev);
        prev = r;
    }
    CHECKF(exact, "int8's residual is not what was not sent");

    /* topk in 2 bits: 2 of each 64 a round, values +-1 or 2 steps */
    rumor_codec_t cq;
    CHECK_OK(rumor_codec_parse("topk:0.03:bits=2:chunk=64", &cq));
    memset(xhat, 0, sizeof xhat);
    double start = 0, left = 0;
    for (int i = 0; i < N; i++)
        start = fmax(start, fabs(x[i]));
    int kept = 1, sent_ok = 1, t = 0;
    for (; t < 300; t++) {
        uint32_t aux;
        for (int i = 0; i < N; i++)
            d[i] = x[i] - xhat[i];
        CHECK_OK(rumor_codec_encode(&cq, d, N, 1, p, &aux, q, scratch));
        left = 0;
        for (int i = 0; i < N; i++) {
            float before = xhat[i];
            xhat[i] += q[i];
            if (q[i] == 0.0f) {
                kept &= x[i] - xhat[i] == d[i] && xhat[i] == before;
            } else {
                double l = (double)x[i] - xhat[i], unsent = (double)d[i] - q[i];
                /* to the rounding of d = x - x_hat and of x_hat + q */
                sent_ok &= fabs(l - unsent) <=
                           2e-7 * (fabs(x[i]) + fabs(before) + fabs(q[i])) + 1e-30;
            }
            left = fmax(left, fabs((double)x[i] - xhat[i]));
        }
    }
    CHECKF(kept, "topk 2-bit: an element not taken lost its residual");
    CHECKF(sent_ok, "topk 2-bit: a taken element's residual is not d - q");
    CHECKF(left <= 1e-4 * start, "topk 2-bit: residual %g of %g after %d rounds", left, start, t);
}

static void put32le(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_f32(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put32le(p, u);
}

#define EXPECT_REJECT(dt, buf, nb, n, aux, reason)                                           \
    do {                                                                                     \
        int v_ = rumor_codec_check(dt, buf, nb, n, aux);                                     \
        CHECKF(v_ == -(reason), "%s: got %s, expected %s", rumor_err_msg(),                  \
               rumor_wire_reject_name(v_), rumor_wire_reject_name(reason));                  \
    } while (0)

static void check_malformed(void)
{
    enum { N = 600 }; /* 3 blocks, the last one short */
    float x[N], q[N], scratch[N];
    fill(x, N);
    uint8_t good[8 * N], p[8 * N];
    uint32_t aux;
    rumor_codec_t c8 = { RUMOR_CODEC_INT8, 1, 0, 0 }, c4 = { RUMOR_CODEC_INT4, 1, 0, 0 };
    rumor_codec_t ck = { RUMOR_CODEC_TOPK, 0.05, 0, 0 }, cr = { RUMOR_CODEC_RANDK, 0.05, 0, 0 };

    size_t nb = rumor_codec_bytes(&c8, N);
    CHECK(nb == 3 * 4 + N);
    CHECK_OK(rumor_codec_encode(&c8, x, N, 0, good, &aux, q, NULL));
    int dt = RUMOR_WIRE_DT_Q8;
    EXPECT_REJECT(dt, good, nb - 1, N, 0, RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    EXPECT_REJECT(dt, good, nb, N, 1, RUMOR_WIRE_BAD_PAYLOAD_SIZE); /* aux on a dense codec */
    memcpy(p, good, nb), put_f32(p + 4, NAN);
    EXPECT_REJECT(dt, p, nb, N, 0, RUMOR_WIRE_NONFINITE);
    memcpy(p, good, nb), put_f32(p + 8, INFINITY);
    EXPECT_REJECT(dt, p, nb, N, 0, RUMOR_WIRE_NONFINITE);
    memcpy(p, good, nb), put_f32(p, -1.0f);
    EXPECT_REJECT(dt, p, nb, N, 0, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), put_f32(p, FLT_MAX);
    EXPECT_REJECT(dt, p, nb, N, 0, RUMOR_WIRE_BAD_CODE); /* 127 * scale would be Inf */
    memcpy(p, good, nb), p[12 + 599] = 0x80;
    EXPECT_REJECT(dt, p, nb, N, 0, RUMOR_WIRE_BAD_CODE);

    nb = rumor_codec_bytes(&c4, N - 1); /* odd: a padding nibble */
    CHECK(nb == 3 * 4 + N / 2);
    CHECK_OK(rumor_codec_encode(&c4, x, N - 1, 0, good, &aux, q, NULL));
    dt = RUMOR_WIRE_DT_Q4;
    CHECK(rumor_codec_check(dt, good, nb, N - 1, 0) == 0);
    memcpy(p, good, nb), p[12 + 10] &= 0xF0;
    EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), p[nb - 1] |= 0x10;
    EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), put_f32(p + 4, -0.0f);
    EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_BAD_CODE);

    nb = rumor_codec_bytes(&ck, N);
    CHECK_OK(rumor_codec_encode(&ck, x, N, 0, good, &aux, q, scratch));
    CHECK(aux == 30 && nb == 240);
    dt = RUMOR_WIRE_DT_TOPK;
    CHECK(rumor_codec_check(dt, good, nb, N, aux) == 0);
    EXPECT_REJECT(dt, good, nb, N, 0, RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    EXPECT_REJECT(dt, good, nb, 20, aux, RUMOR_WIRE_BAD_PAYLOAD_SIZE); /* aux > length */
    memcpy(p, good, nb), put32le(p + 4 * 29, N);
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE); /* past the range */
    memcpy(p, good, nb), memcpy(p + 4 * 5, p + 4 * 4, 4);
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE); /* twice the same index */
    memcpy(p, good, nb), memcpy(p + 4 * 5, good + 4 * 6, 4), memcpy(p + 4 * 6, good + 4 * 5, 4);
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE); /* out of order */
    memcpy(p, good, nb), put_f32(p + 4 * 30 + 4 * 7, NAN);
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_NONFINITE);

    nb = rumor_codec_bytes(&cr, N);
    CHECK_OK(rumor_codec_encode(&cr, x, N, 77, good, &aux, q, NULL));
    dt = RUMOR_WIRE_DT_RANDK;
    CHECK(aux == 30 && nb == 8 + 120 && rumor_codec_check(dt, good, nb, N, aux) == 0);
    memcpy(p, good, nb), put_f32(p + 8 + 4 * 29, -INFINITY);
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_NONFINITE);
    EXPECT_REJECT(dt, good, nb, N, aux + 1, RUMOR_WIRE_BAD_PAYLOAD_SIZE);

    /* int2: 600 elements in 150 bytes; 599 leave a padding pair */
    rumor_codec_t c2 = { RUMOR_CODEC_INT2, 1, 0, 0 };
    nb = rumor_codec_bytes(&c2, N - 1);
    CHECK(nb == 3 * 4 + N / 4);
    CHECK_OK(rumor_codec_encode(&c2, x, N - 1, 0, good, &aux, q, NULL));
    dt = RUMOR_WIRE_DT_Q2;
    CHECK(aux == 0 && rumor_codec_check(dt, good, nb, N - 1, 0) == 0);
    for (int at = 0; at < 4; at++) { /* a code 0 in each position of a byte */
        memcpy(p, good, nb), p[12 + 20] &= (uint8_t)~(3u << (2 * at));
        EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_BAD_CODE);
    }
    memcpy(p, good, nb), p[nb - 1] &= 0x3F; /* the last code (element 598) 0 */
    memcpy(p, good, nb), p[nb - 1] |= 0xC0;  /* padding */
    EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), p[nb - 1] &= (uint8_t)~0x30;
    EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), put_f32(p + 8, -2.0f);
    EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), put_f32(p, FLT_MAX);
    EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), put_f32(p + 4, NAN);
    EXPECT_REJECT(dt, p, nb, N - 1, 0, RUMOR_WIRE_NONFINITE);
    EXPECT_REJECT(dt, good, nb, N - 1, 4, RUMOR_WIRE_BAD_PAYLOAD_SIZE);

    /* topk in 4 bits, chunks of 64: 600 = 9 chunks and one of 24; k = 4
     * a whole chunk, 2 the last: 38 values, indices 6 bits (29 bytes, 2
     * bits of padding), values 4 bits (19 bytes) */
    rumor_codec_t cq;
    CHECK_OK(rumor_codec_parse("topk:0.05:bits=4:chunk=64", &cq));
    nb = rumor_codec_bytes(&cq, N);
    CHECK(nb == 10 * 4 + 29 + 19);
    CHECK_OK(rumor_codec_encode(&cq, x, N, 0, good, &aux, q, scratch));
    dt = RUMOR_WIRE_DT_TOPKQ;
    CHECK(aux == (4u | 6u << 16 | 4u << 24) && rumor_codec_check(dt, good, nb, N, aux) == 0);
    const uint8_t *ib = good + 40;
    /* the index of value v (6 bits at bit 6 v) */
#define IDX(buf, v) ((unsigned)(((buf)[40 + (6 * (v)) / 8] | (buf)[40 + (6 * (v)) / 8 + 1] << 8) >> \
                                ((6 * (v)) % 8)) & 63u)
#define SET_IDX(buf, v, val)                                                                \
    do {                                                                                    \
        unsigned pos_ = 6u * (v), w_ = (buf)[40 + pos_ / 8] | (buf)[40 + pos_ / 8 + 1] << 8; \
        w_ = (w_ & ~(63u << (pos_ % 8))) | (unsigned)(val) << (pos_ % 8);                    \
        (buf)[40 + pos_ / 8] = (uint8_t)w_, (buf)[40 + pos_ / 8 + 1] = (uint8_t)(w_ >> 8);   \
    } while (0)
    CHECK(IDX(good, 0) < IDX(good, 1) && IDX(good, 1) == (unsigned)(ib[0] >> 6 | (ib[1] & 15) << 2));
    memcpy(p, good, nb);
    SET_IDX(p, 1, IDX(good, 0)); /* twice the same index in a chunk */
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb);
    SET_IDX(p, 2, IDX(good, 3));
    SET_IDX(p, 3, IDX(good, 2));
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE); /* out of order */
    memcpy(p, good, nb);
    SET_IDX(p, 37, 24); /* past the last chunk's 24 elements */
    if (IDX(good, 36) < 24)
        EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb);
    SET_IDX(p, 36, 23);
    SET_IDX(p, 37, 23);
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), p[40 + 28] |= 0x80; /* index padding */
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE);
    {   /* 586 elements: a last chunk of 10 with 1 value, 37 values of 4 bits: 4 bits of
         * padding after them */
        uint8_t g2[8 * N];
        size_t nb2 = rumor_codec_bytes(&cq, 586);
        CHECK(nb2 == 10 * 4 + (37 * 6 + 7) / 8 + (37 * 4 + 7) / 8);
        CHECK_OK(rumor_codec_encode(&cq, x, 586, 0, g2, &aux, q, scratch));
        CHECK(rumor_codec_check(dt, g2, nb2, 586, aux) == 0);
        memcpy(p, g2, nb2), p[nb2 - 1] |= 0x40;
        EXPECT_REJECT(dt, p, nb2, 586, aux, RUMOR_WIRE_BAD_CODE);
        CHECK_OK(rumor_codec_encode(&cq, x, N, 0, good, &aux, q, scratch));
    }
    memcpy(p, good, nb), put_f32(p + 4 * 9, -1.0f);
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_BAD_CODE);
    memcpy(p, good, nb), put_f32(p + 4 * 3, INFINITY);
    EXPECT_REJECT(dt, p, nb, N, aux, RUMOR_WIRE_NONFINITE);
    EXPECT_REJECT(dt, good, nb, N, 4u | 6u << 16 | 3u << 24, RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    EXPECT_REJECT(dt, good, nb, N, 4u | 5u << 16 | 4u << 24, RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    EXPECT_REJECT(dt, good, nb, N, 65u | 6u << 16 | 4u << 24, RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    EXPECT_REJECT(dt, good, nb, N, 0u | 6u << 16 | 4u << 24, RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    EXPECT_REJECT(dt, good, nb, N, 5u | 6u << 16 | 4u << 24, RUMOR_WIRE_BAD_PAYLOAD_SIZE);
#undef IDX
#undef SET_IDX

    /* rumor_wire_check judges a coded payload's size from length and aux */
    rumor_wire_hdr_t h = { 0 };
    h.version = 1, h.type = RUMOR_WIRE_PARAMS, h.dtype = RUMOR_WIRE_DT_TOPK, h.nchunks = 1;
    h.swarm = 7, h.sender = 3, h.offset = 0, h.length = N, h.space = N, h.aux = 30;
    rumor_wire_expect_t e = { .swarm = 7, .space = N, .self = 1,
                              .dtypes = 1u << RUMOR_WIRE_DT_F32 | 1u << RUMOR_WIRE_DT_TOPK };
    size_t fs = 240;
    CHECK(rumor_wire_check(&h, &e, &fs, 1) == 0);
    fs = 241;
    CHECK(rumor_wire_check(&h, &e, &fs, 1) == -RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    fs = 240, h.aux = 0;
    CHECK(rumor_wire_check(&h, &e, &fs, 1) == -RUMOR_WIRE_BAD_PAYLOAD_SIZE);
    h.aux = 30, e.dtypes = 0; /* a receiver without --compress */
    CHECK(rumor_wire_check(&h, &e, &fs, 1) == -RUMOR_WIRE_UNSUPPORTED_DTYPE);

    /* random bytes: rejected, or decoded to finite values only */
    int accepted = 0, finite = 1;
    for (int t = 0; t < 20000; t++) {
        int dts[] = { RUMOR_WIRE_DT_Q8,    RUMOR_WIRE_DT_Q4, RUMOR_WIRE_DT_TOPK,
                      RUMOR_WIRE_DT_RANDK, RUMOR_WIRE_DT_Q2, RUMOR_WIRE_DT_TOPKQ };
        int d = dts[t % 6];
        size_t n = 1 + tu_randu(&seed) % 40;
        uint32_t ax = d == RUMOR_WIRE_DT_TOPK || d == RUMOR_WIRE_DT_RANDK
                          ? 1 + tu_randu(&seed) % (unsigned)n
                          : 0;
        if (d == RUMOR_WIRE_DT_TOPKQ) /* k of 1 or 2 in chunks of 64; 2, 4 or 8 bits */
            ax = (1u + (unsigned)(t % 12 < 6)) | 6u << 16 | (2u << (t % 3)) << 24;
        size_t bytes = rumor_codec_payload_bytes(d, n, ax);
        for (size_t i = 0; i < bytes; i++)
            p[i] = (uint8_t)tu_randu(&seed);
        if (d == RUMOR_WIRE_DT_TOPK) /* mostly increasing indices */
            for (uint32_t v = 0; v < ax && t % 8; v++)
                put32le(p + 4 * v, v * (uint32_t)(n / ax));
        if (rumor_codec_check(d, p, bytes, n, ax) == 0) {
            accepted++;
            float out[40];
            rumor_codec_reader_t r;
            rumor_codec_reader_init(&r, d, p, n, ax);
            rumor_codec_read(&r, out, n);
            for (size_t i = 0; i < n; i++)
                finite &= isfinite(out[i]) != 0;
        }
    }
    CHECKF(finite, "an accepted payload decoded to NaN or Inf");
    CHECKF(accepted > 1000, "only %d random payloads accepted: the test tests nothing", accepted);
}

int main(void)
{
    check_parse();
    const char *specs[] = { "int8",       "int4",
                            "int2",       "topk:0.01",
                            "topk:0.3",   "randk:0.01",
                            "randk:0.5",  "topk:0.02:bits=2",
                            "topk:0.1:bits=4:chunk=64", "topk:0.5:bits=8:chunk=256",
                            "topk:1:bits=2:chunk=64" };
    const size_t sizes[] = { 1, 2, 255, 256, 257, 1000, 65536 + 77 };
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            check_round_trip(specs[s], sizes[i]);
    check_randk_uniform();
    check_error_feedback();
    check_malformed();
    return tu_finish("test_codec");
}

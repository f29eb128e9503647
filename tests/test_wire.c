/* The wire codec: layout pinned by a header built byte by byte here, round
 * trips of every type, every malformed field rejected with its reason,
 * receiver checks, the NaN/Inf scan (and its speed), ids and counters. */
#include "wire.h"

#include <float.h>
#include <stdint.h>
#include <time.h>

#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* splitmix64: random field values */
static uint64_t r64(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int is_data(int type)
{
    return type == RUMOR_WIRE_PARAMS || type == RUMOR_WIRE_GRADS || type == RUMOR_WIRE_STATE_CHUNK;
}

/* A valid header of the given type with random values where any are allowed. */
static rumor_wire_hdr_t random_hdr(int type)
{
    rumor_wire_hdr_t h = { 0 };
    h.type = (uint8_t)type;
    h.flags = (r64() & 1) ? RUMOR_WIRE_F_LEAVING : 0;
    h.swarm = r64();
    h.sender = r64() | 1;
    h.incarnation = r64();
    h.round = r64();
    h.aux = (uint32_t)r64();
    h.space = r64();
    if (is_data(type)) {
        h.dtype = (uint8_t)(1 + r64() % 3);
        h.nchunks = (uint32_t)r64() | 1;
        h.chunk = (uint32_t)(r64() % h.nchunks);
        h.offset = r64();
        h.length = r64();
        if (type == RUMOR_WIRE_GRADS && (r64() & 1))
            h.flags |= RUMOR_WIRE_F_ALLGATHER;
    } else if (type == RUMOR_WIRE_STATE_REQ) {
        h.offset = r64();
        h.length = r64();
    }
    return h;
}

static int hdr_equal(const rumor_wire_hdr_t *a, const rumor_wire_hdr_t *b)
{
    return a->type == b->type && a->flags == b->flags && a->dtype == b->dtype &&
           a->chunk == b->chunk && a->nchunks == b->nchunks && a->aux == b->aux &&
           a->swarm == b->swarm && a->sender == b->sender && a->incarnation == b->incarnation &&
           a->round == b->round && a->offset == b->offset && a->length == b->length &&
           a->space == b->space;
}

/* The layout of docs/protocol.md, written out by hand: no call into the codec. */
static void test_layout(void)
{
    static const uint8_t hand[80] = {
        'R', 'U', 'M', 'R',                             /*  0 magic */
        1,                                              /*  4 version */
        2,                                              /*  5 type GRADS */
        0x01, 0x01,                                     /*  6 flags ALLGATHER|LEAVING */
        80, 0,                                          /*  8 hdr_len */
        1,                                              /* 10 dtype f32 */
        0,                                              /* 11 reserved */
        0x07, 0, 0, 0,                                  /* 12 chunk 7 */
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, /* 16 swarm */
        0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, /* 24 sender */
        0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, /* 32 incarnation */
        0x2A, 0, 0, 0, 0, 0, 0, 0,                      /* 40 round 42 */
        0x00, 0x00, 0x10, 0, 0, 0, 0, 0,                /* 48 offset 1 Mi */
        0x00, 0x01, 0, 0, 0, 0, 0, 0,                   /* 56 length 256 */
        0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0,             /* 64 space 16 Mi */
        0x10, 0, 0, 0,                                  /* 72 nchunks 16 */
        0x03, 0, 0, 0x80,                               /* 76 aux */
    };
    rumor_wire_hdr_t h;
    CHECK_OK(rumor_wire_decode(hand, sizeof hand, &h));
    CHECK(h.version == 1 && h.type == RUMOR_WIRE_GRADS && h.hdr_len == 80);
    CHECK(h.flags == (RUMOR_WIRE_F_ALLGATHER | RUMOR_WIRE_F_LEAVING));
    CHECK(h.dtype == RUMOR_WIRE_DT_F32 && h.chunk == 7 && h.nchunks == 16);
    CHECK(h.swarm == 0x1817161514131211ull);
    CHECK(h.sender == 0x2827262524232221ull);
    CHECK(h.incarnation == 0x3837363534333231ull);
    CHECK(h.round == 42 && h.offset == (1u << 20) && h.length == 256);
    CHECK(h.space == (1u << 24) && h.aux == 0x80000003u);
    uint8_t enc[80];
    rumor_wire_encode(&h, enc);
    CHECK(memcmp(enc, hand, sizeof hand) == 0);
}

/* Every type survives encode/decode with random values, 1000 times. */
static void test_roundtrip(void)
{
    int bad = 0;
    for (int it = 0; it < 1000; it++) {
        int type = 1 + it % (RUMOR_WIRE_NTYPES - 1);
        rumor_wire_hdr_t h = random_hdr(type), d;
        h.version = 77; /* ignored by encode */
        h.hdr_len = 3;
        uint8_t buf[RUMOR_WIRE_HDR_LEN];
        rumor_wire_encode(&h, buf);
        int rc = rumor_wire_decode(buf, sizeof buf, &d);
        if (rc != 0 || !hdr_equal(&h, &d) || d.version != 1 || d.hdr_len != 80) {
            if (bad++ < 5)
                fprintf(stderr, "round trip of %s: rc %d %s\n", rumor_wire_type_name(type), rc,
                        rumor_err_msg());
        }
    }
    CHECKF(bad == 0, "%d of 1000 round trips failed", bad);
}

/* Encodes h, lets poke corrupt the bytes, and expects decode to give want. */
static int decode_poked(const rumor_wire_hdr_t *h, size_t off, uint8_t val)
{
    uint8_t buf[RUMOR_WIRE_HDR_LEN];
    rumor_wire_encode(h, buf);
    buf[off] = val;
    rumor_wire_hdr_t d;
    memset(&d, 0xEE, sizeof d);
    int rc = rumor_wire_decode(buf, sizeof buf, &d);
    if (rc != 0 && d.swarm != 0xEEEEEEEEEEEEEEEEull)
        return 999; /* *out written on failure */
    return rc;
}

#define CHECK_POKE(h, off, val, reason, substr)                                       \
    do {                                                                               \
        rumor_err_clear();                                                             \
        int rc_ = decode_poked(&(h), (off), (val));                                    \
        CHECKF(rc_ == -(reason) && strstr(rumor_err_msg(), (substr)) &&                \
                   rumor_err_code() == RUMOR_EPROTO,                                   \
               "byte %d = 0x%02x: rc %d (%s) \"%s\", want %s", (int)(off), (unsigned)(val), \
               rc_, rumor_wire_reject_name(rc_), rumor_err_msg(), rumor_wire_reject_name(reason)); \
    } while (0)

/* Each field corrupted alone is rejected with its own reason. */
static void test_bad_fields(void)
{
    rumor_wire_hdr_t p = random_hdr(RUMOR_WIRE_PARAMS);
    p.dtype = RUMOR_WIRE_DT_F32;
    p.flags = 0;
    rumor_wire_hdr_t hb = random_hdr(RUMOR_WIRE_HEARTBEAT);
    hb.flags = 0;

    CHECK_POKE(p, 0, 'r', RUMOR_WIRE_BAD_MAGIC, "magic");
    CHECK_POKE(p, 3, 0, RUMOR_WIRE_BAD_MAGIC, "magic");
    CHECK_POKE(p, 4, 0, RUMOR_WIRE_BAD_VERSION, "version 0");
    CHECK_POKE(p, 4, 2, RUMOR_WIRE_BAD_VERSION, "version 2");
    CHECK_POKE(p, 5, 0, RUMOR_WIRE_BAD_TYPE, "type 0");
    CHECK_POKE(p, 5, 11, RUMOR_WIRE_BAD_TYPE, "type 11");
    CHECK_POKE(p, 5, 255, RUMOR_WIRE_BAD_TYPE, "type 255");
    /* critical bits: unknown, or ALLGATHER outside GRADS */
    CHECK_POKE(p, 6, 0x02, RUMOR_WIRE_BAD_FLAGS, "flags 0x0002");
    CHECK_POKE(p, 6, 0x80, RUMOR_WIRE_BAD_FLAGS, "flags");
    CHECK_POKE(p, 6, 0x01, RUMOR_WIRE_BAD_FLAGS, "params");
    CHECK_POKE(hb, 6, 0x01, RUMOR_WIRE_BAD_FLAGS, "heartbeat");
    /* unknown ignorable bits (high byte) are kept and ignored */
    {
        rumor_wire_hdr_t d;
        uint8_t buf[80];
        rumor_wire_encode(&p, buf);
        buf[7] = 0xFE;
        CHECK_OK(rumor_wire_decode(buf, sizeof buf, &d));
        CHECK(d.flags == 0xFE00);
    }
    CHECK_POKE(p, 10, 0, RUMOR_WIRE_BAD_DTYPE, "dtype 0 on type params");
    CHECK_POKE(p, 10, 10, RUMOR_WIRE_BAD_DTYPE, "dtype 10"); /* the first past topkq (9) */
    CHECK_POKE(p, 10, 255, RUMOR_WIRE_BAD_DTYPE, "dtype 255");
    CHECK_POKE(hb, 10, 1, RUMOR_WIRE_BAD_DTYPE, "dtype 1 on type heartbeat");
    CHECK_POKE(p, 11, 1, RUMOR_WIRE_BAD_RESERVED, "byte 11");
    CHECK_POKE(p, 11, 0x80, RUMOR_WIRE_BAD_RESERVED, "0x80");
    /* chunk numbering: nchunks 0, chunk == nchunks, chunk fields on control */
    {
        rumor_wire_hdr_t c = p;
        c.nchunks = 0;
        c.chunk = 0;
        CHECK_POKE(c, 12, 0, RUMOR_WIRE_BAD_CHUNK, "chunk 0 of 0");
        c.nchunks = 5;
        CHECK_POKE(c, 12, 5, RUMOR_WIRE_BAD_CHUNK, "chunk 5 of 5");
        CHECK_POKE(hb, 72, 1, RUMOR_WIRE_BAD_CHUNK, "heartbeat");
        CHECK_POKE(hb, 12, 1, RUMOR_WIRE_BAD_CHUNK, "heartbeat");
    }
    CHECK_POKE(hb, 48, 1, RUMOR_WIRE_BAD_RANGE, "no range");
    CHECK_POKE(hb, 63, 1, RUMOR_WIRE_BAD_RANGE, "no range");
    {
        rumor_wire_hdr_t z = p;
        z.sender = 0x100;
        CHECK_POKE(z, 25, 0, RUMOR_WIRE_BAD_SENDER, "sender id 0");
    }
    /* hdr_len against an 80-byte frame */
    CHECK_POKE(p, 8, 79, RUMOR_WIRE_BAD_HDR_LEN, "hdr_len 79 in a frame of 80");
    CHECK_POKE(p, 8, 81, RUMOR_WIRE_BAD_HDR_LEN, "hdr_len 81 in a frame of 80");
    CHECK_POKE(p, 8, 0, RUMOR_WIRE_BAD_HDR_LEN, "hdr_len 0");
    CHECK_POKE(p, 9, 1, RUMOR_WIRE_BAD_HDR_LEN, "hdr_len 336");
    CHECK(RUMOR_WIRE_NREJECT > RUMOR_WIRE_BAD_IDENTITY);
}

/* Short frames, NULL, and frames longer than 80 bytes. */
static void test_sizes(void)
{
    rumor_wire_hdr_t p = random_hdr(RUMOR_WIRE_PARAMS), d;
    uint8_t big[96];
    rumor_wire_encode(&p, big);
    int bad = 0;
    for (size_t len = 0; len < RUMOR_WIRE_HDR_LEN; len++)
        if (rumor_wire_decode(big, len, &d) != -RUMOR_WIRE_BAD_SIZE)
            bad++;
    CHECKF(bad == 0, "%d truncated lengths not rejected as bad_size", bad);
    CHECK_ERR(rumor_wire_decode(NULL, 80, &d), -RUMOR_WIRE_BAD_SIZE, "0 bytes");

    /* extension: hdr_len == frame == 96, trailing bytes ignored */
    memset(big + 80, 0xAB, 16);
    big[8] = 96;
    CHECK_OK(rumor_wire_decode(big, 96, &d));
    CHECK(d.hdr_len == 96 && hdr_equal(&p, &d));
    /* the largest header a u16 can announce */
    {
        uint8_t *huge = calloc(1, RUMOR_WIRE_HDR_MAX);
        memcpy(huge, big, 80);
        huge[8] = 0xFF;
        huge[9] = 0xFF;
        CHECK_OK(rumor_wire_decode(huge, RUMOR_WIRE_HDR_MAX, &d));
        CHECK_ERR(rumor_wire_decode(huge, RUMOR_WIRE_HDR_MAX + 1, &d), -RUMOR_WIRE_BAD_HDR_LEN,
                  "hdr_len 65535 in a frame of 65536");
        free(huge);
    }
    /* hdr_len disagreeing with the frame either way */
    CHECK_ERR(rumor_wire_decode(big, 80, &d), -RUMOR_WIRE_BAD_HDR_LEN, "hdr_len 96 in a frame of 80");
    big[8] = 80;
    CHECK_ERR(rumor_wire_decode(big, 96, &d), -RUMOR_WIRE_BAD_HDR_LEN, "hdr_len 80 in a frame of 96");
    big[8] = 200;
    CHECK_ERR(rumor_wire_decode(big, 96, &d), -RUMOR_WIRE_BAD_HDR_LEN, "hdr_len 200");
}

/* A PARAMS header that passes rumor_wire_check against e. */
static rumor_wire_hdr_t good_params(const rumor_wire_expect_t *e)
{
    rumor_wire_hdr_t h = { 0 };
    h.type = RUMOR_WIRE_PARAMS;
    h.dtype = RUMOR_WIRE_DT_F32;
    h.swarm = e->swarm;
    h.space = e->space;
    h.sender = 0x42;
    h.offset = e->space - 1000;
    h.length = 1000;
    h.chunk = 3;
    h.nchunks = 4;
    return h;
}

#define CHECK_REJECT(call, reason, substr)                                            \
    do {                                                                               \
        rumor_err_clear();                                                             \
        int rc_ = (call);                                                              \
        CHECKF(rc_ == -(reason) && strstr(rumor_err_msg(), (substr)),                  \
               "rc %d (%s) \"%s\", want %s with \"%s\"", rc_, rumor_wire_reject_name(rc_), \
               rumor_err_msg(), rumor_wire_reject_name(reason), (substr));            \
    } while (0)

/* The receiver's checks: swarm, model, range, sizes and frames. */
static void test_check(void)
{
    const rumor_wire_expect_t e = { .swarm = 0xABCDull, .space = 3000, .self = 0x99,
                                    .max_chunk = 1000 };
    rumor_wire_hdr_t h = good_params(&e), x;
    size_t fs[3] = { 4000, 0, 0 };
    CHECK_OK(rumor_wire_check(&h, &e, fs, 1));

    x = h, x.swarm ^= 1;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_WRONG_SWARM, "swarm");
    x = h, x.space = 3001;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_WRONG_SPACE, "3001");
    x = h, x.sender = e.self;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_FROM_SELF, "own id");
    x = h, x.offset = 2001;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_BAD_RANGE, "offset 2001");
    x = h, x.offset = 3001, x.length = 1, fs[0] = 4;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_BAD_RANGE, "offset 3001");
    /* offset + length wraps u64 to a small number: still out of range */
    x = h, x.offset = UINT64_MAX - 10, x.length = 100, fs[0] = 400;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_BAD_RANGE, "beyond");
    x = h, x.offset = 100, x.length = UINT64_MAX;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_BAD_RANGE, "beyond");
    x = h, x.length = 0, fs[0] = 0;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_EMPTY_CHUNK, "length 0");
    x = h, x.offset = 0, x.length = 1001, fs[0] = 4004;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_CHUNK_TOO_LARGE, "1001");
    fs[0] = 4000;
    /* payload one byte short or long; a payload of the right size for bf16 */
    fs[0] = 3999;
    CHECK_REJECT(rumor_wire_check(&h, &e, fs, 1), RUMOR_WIRE_BAD_PAYLOAD_SIZE, "3999 bytes");
    fs[0] = 4001;
    CHECK_REJECT(rumor_wire_check(&h, &e, fs, 1), RUMOR_WIRE_BAD_PAYLOAD_SIZE, "4001 bytes");
    fs[0] = 2000;
    CHECK_REJECT(rumor_wire_check(&h, &e, fs, 1), RUMOR_WIRE_BAD_PAYLOAD_SIZE, "2000 bytes");
    /* frames: none, or an extra one */
    fs[0] = 4000;
    CHECK_REJECT(rumor_wire_check(&h, &e, NULL, 0), RUMOR_WIRE_BAD_FRAMES, "0 frames");
    CHECK_REJECT(rumor_wire_check(&h, &e, fs, 2), RUMOR_WIRE_BAD_FRAMES, "2 frames");
    /* dtypes: bf16 decodes but is refused unless the receiver takes it */
    x = h, x.dtype = RUMOR_WIRE_DT_BF16, fs[0] = 2000;
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 1), RUMOR_WIRE_UNSUPPORTED_DTYPE, "dtype 2");
    {
        rumor_wire_expect_t e2 = e;
        e2.dtypes = 1u << RUMOR_WIRE_DT_F32 | 1u << RUMOR_WIRE_DT_BF16;
        CHECK_OK(rumor_wire_check(&x, &e2, fs, 1));
        fs[0] = 4000;
        CHECK_REJECT(rumor_wire_check(&x, &e2, fs, 1), RUMOR_WIRE_BAD_PAYLOAD_SIZE, "4000");
    }
    /* a whole-space chunk at the default bound (no max_chunk given) */
    {
        rumor_wire_expect_t e3 = { .swarm = 1, .space = RUMOR_WIRE_CHUNK_DEFAULT };
        x = good_params(&e3), x.offset = 0, x.length = e3.space;
        fs[0] = 4 * (size_t)e3.space;
        CHECK_OK(rumor_wire_check(&x, &e3, fs, 1));
        e3.space++;
        x.space = e3.space;
        x.length = e3.space;
        fs[0] += 4;
        CHECK_REJECT(rumor_wire_check(&x, &e3, fs, 1), RUMOR_WIRE_CHUNK_TOO_LARGE, "1048577");
    }

    /* control types */
    rumor_wire_hdr_t c = { .type = RUMOR_WIRE_HEARTBEAT, .swarm = e.swarm, .space = e.space,
                           .sender = 7 };
    CHECK_OK(rumor_wire_check(&c, &e, NULL, 0));
    fs[0] = 4;
    CHECK_REJECT(rumor_wire_check(&c, &e, fs, 1), RUMOR_WIRE_BAD_FRAMES, "heartbeat");
    c.type = RUMOR_WIRE_HELLO;
    CHECK_OK(rumor_wire_check(&c, &e, NULL, 0));
    fs[0] = RUMOR_WIRE_MAX_BODY;
    CHECK_OK(rumor_wire_check(&c, &e, fs, 1));
    fs[0]++;
    CHECK_REJECT(rumor_wire_check(&c, &e, fs, 1), RUMOR_WIRE_BODY_TOO_LARGE, "65537");
    CHECK_REJECT(rumor_wire_check(&c, &e, fs, 2), RUMOR_WIRE_BAD_FRAMES, "2 frames");
    c.type = RUMOR_WIRE_PROBE_REQ;
    CHECK_REJECT(rumor_wire_check(&c, &e, NULL, 0), RUMOR_WIRE_BAD_FRAMES, "probe_req");
    fs[0] = 16;
    CHECK_OK(rumor_wire_check(&c, &e, fs, 1));
    c.type = RUMOR_WIRE_STATE_REQ, c.offset = 0, c.length = 3000;
    CHECK_OK(rumor_wire_check(&c, &e, NULL, 0));
    c.length = 3001;
    CHECK_REJECT(rumor_wire_check(&c, &e, NULL, 0), RUMOR_WIRE_BAD_RANGE, "3001");
    c.type = 0;
    CHECK_REJECT(rumor_wire_check(&c, &e, NULL, 0), RUMOR_WIRE_BAD_TYPE, "type 0");
    /* STATE_CHUNK: payload and an optional body (the digest) */
    x = h, x.type = RUMOR_WIRE_STATE_CHUNK;
    fs[0] = 4000, fs[1] = 32;
    CHECK_OK(rumor_wire_check(&x, &e, fs, 1));
    CHECK_OK(rumor_wire_check(&x, &e, fs, 2));
    CHECK_REJECT(rumor_wire_check(&x, &e, fs, 3), RUMOR_WIRE_BAD_FRAMES, "3 frames");
}

/* NaN and Inf found wherever they are; subnormals and -0.0 pass. */
static void test_finite(void)
{
    const size_t sizes[] = { 0, 1, 3, 1023, 1024, 1025, 4096 + 17, 100000 };
    const float bad[] = { NAN, -NAN, INFINITY, -INFINITY };
    unsigned long long s = 7;
    int miss = 0, fp = 0;
    float *p = malloc(100001 * sizeof *p);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        /* p + 1: a float-aligned but not 8-aligned start */
        float *q = p + 1;
        for (size_t i = 0; i < n; i++)
            q[i] = tu_randf(&s) * 1e30f;
        if (n > 2) {
            q[0] = FLT_TRUE_MIN;
            q[1] = -0.0f;
            q[2] = -FLT_MAX;
        }
        if (n == 1025) {
            /* a payload at an odd byte offset, as libzmq may hand one over */
            unsigned char *raw = malloc(4 * n + 1);
            memcpy(raw + 1, q, 4 * n);
            float nan = NAN;
            if (!rumor_wire_payload_finite(raw + 1, n))
                fp++;
            memcpy(raw + 1 + 4 * (n - 1), &nan, 4);
            if (rumor_wire_payload_finite(raw + 1, n))
                miss++;
            free(raw);
        }
        if (!rumor_wire_payload_finite(q, n))
            fp++;
        if (n == 0)
            continue;
        size_t where[] = { 0, n / 2, n - 1 };
        for (int w = 0; w < 3; w++)
            for (int b = 0; b < 4; b++) {
                float keep = q[where[w]];
                q[where[w]] = bad[b];
                if (rumor_wire_payload_finite(q, n))
                    miss++;
                q[where[w]] = keep;
            }
    }
    /* every NaN payload pattern, signalling ones included */
    uint32_t nans[] = { 0x7F800001u, 0x7FC00000u, 0xFFFFFFFFu, 0x7FBFFFFFu };
    for (int i = 0; i < 4; i++) {
        memcpy(&p[500], &nans[i], 4);
        if (rumor_wire_payload_finite(p, 1000))
            miss++;
        p[500] = 0.0f;
    }
    CHECKF(miss == 0, "%d non-finite values missed", miss);
    CHECKF(fp == 0, "%d finite buffers rejected", fp);
    free(p);
}

/* The scan's speed next to memcpy's, in the same run (printed, not tested). */
static void bench_finite(void)
{
    size_t n = (size_t)4 << 20; /* 16 MiB */
    float *a = malloc(n * 4), *b = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        a[i] = (float)i * 1e-3f;
    memcpy(b, a, n * 4);
    int reps = 20, ok = 1;
    double t0 = now_s();
    for (int r = 0; r < reps; r++)
        ok &= rumor_wire_payload_finite(a, n);
    double t1 = now_s();
    for (int r = 0; r < reps; r++) {
        a[r] = (float)r;
        memcpy(b, a, n * 4);
    }
    double t2 = now_s();
    CHECK(ok);
    double gb = (double)reps * (double)n * 4 / 1e9;
    fprintf(stderr, "finite scan: %.1f GB/s over 16 MiB; memcpy %.1f GB/s (read+write %.1f)\n",
            gb / (t1 - t0), gb / (t2 - t1), 2 * gb / (t2 - t1));
    free(a);
    free(b);
}

/* Chunking helpers and the message size bound. */
static void test_chunks(void)
{
    CHECK(rumor_wire_nchunks(0, 10) == 0 && rumor_wire_nchunks(10, 0) == 0);
    CHECK(rumor_wire_nchunks(10, 10) == 1 && rumor_wire_nchunks(11, 10) == 2);
    CHECK(rumor_wire_nchunks(UINT64_MAX, 1) == UINT64_MAX);
    CHECK(rumor_wire_nchunks(UINT64_MAX, UINT64_MAX / 2) == 3);
    uint64_t off, len, sum = 0, n = 2500001, cs = 1u << 20;
    uint64_t nc = rumor_wire_nchunks(n, cs);
    CHECK(nc == 3);
    for (uint64_t c = 0; c < nc; c++) {
        CHECK_OK(rumor_wire_chunk_range(n, cs, c, &off, &len));
        CHECK(off == sum && len > 0 && len <= cs);
        sum += len;
    }
    CHECK(sum == n);
    CHECK_ERR(rumor_wire_chunk_range(n, cs, 3, &off, &len), RUMOR_EINVAL, "chunk 3 of 3");
    CHECK_ERR(rumor_wire_chunk_range(n, 0, 0, &off, &len), RUMOR_EINVAL, "chunk 0 of 0");
    CHECK(rumor_wire_max_msg_size(1u << 20) == 4u << 20);
    CHECK(rumor_wire_max_msg_size(1) == RUMOR_WIRE_MAX_BODY);
    CHECK(rumor_wire_max_msg_size(SIZE_MAX / 2) == 0);
    CHECK(rumor_wire_dtype_size(RUMOR_WIRE_DT_F32) == 4 && rumor_wire_dtype_size(2) == 2 &&
          rumor_wire_dtype_size(3) == 2 && rumor_wire_dtype_size(0) == 0 &&
          rumor_wire_dtype_size(9) == 0);
}

/* Ids: deterministic, distinct, and equal to an independent BLAKE2b
 * (Python's hashlib.blake2b(x, digest_size=16, person=...), first 8 bytes LE). */
static void test_ids(void)
{
    uint8_t k0[32] = { 0 }, k1[32];
    for (int i = 0; i < 32; i++)
        k1[i] = (uint8_t)i;
    CHECK(rumor_wire_peer_id(k0) == 0x6eb56888f6b3b492ull);
    CHECK(rumor_wire_peer_id(k1) == 0xc215f9e2a7a31b37ull);
    CHECK(rumor_wire_swarm_id("test") == 0xe1f951360be0516aull);
    CHECK(rumor_wire_swarm_id("") == 0xb83f1c5d7164aa74ull);
    CHECK(rumor_wire_swarm_id(NULL) == rumor_wire_swarm_id(""));
    CHECK(rumor_wire_swarm_id("test") == rumor_wire_swarm_id("test"));
    CHECK(rumor_wire_swarm_id("test") != rumor_wire_swarm_id("tesu"));
    /* one bit of the key changes the id; ids of 256 keys all differ */
    uint64_t ids[256];
    int dup = 0;
    for (int i = 0; i < 256; i++) {
        uint8_t k[32] = { 0 };
        k[i / 8] = (uint8_t)(1u << (i % 8));
        ids[i] = rumor_wire_peer_id(k);
        dup += ids[i] == 0 || ids[i] == rumor_wire_peer_id(k0);
        for (int j = 0; j < i; j++)
            dup += ids[i] == ids[j];
    }
    CHECK(dup == 0);
    /* the same bytes as a swarm name and as a key give different ids */
    char name[33] = { 0 };
    for (int i = 0; i < 32; i++)
        name[i] = (char)('a' + i % 26);
    CHECK(rumor_wire_swarm_id(name) != rumor_wire_peer_id((const uint8_t *)name));
}

/* Counting verdicts and formatting the counters. */
static void test_stats(void)
{
    rumor_wire_stats_t s = { 0 }, t = { 0 };
    char buf[2048];
    CHECK(rumor_wire_stats_format(&s, buf, sizeof buf) > 0 && strcmp(buf, "accepted=0") == 0);
    for (int i = 0; i < 3; i++)
        CHECK_OK(rumor_wire_stats_count(&s, -RUMOR_WIRE_BAD_MAGIC));
    CHECK_OK(rumor_wire_stats_count(&s, RUMOR_WIRE_STALE_ROUND));
    CHECK_OK(rumor_wire_stats_count(&s, 0));
    CHECK_OK(rumor_wire_stats_count(&s, 0));
    CHECK_ERR(rumor_wire_stats_count(&s, RUMOR_WIRE_NREJECT), RUMOR_EINVAL, "not a reject");
    CHECK_ERR(rumor_wire_stats_count(&s, -1000), RUMOR_EINVAL, "not a reject");
    /* a real verdict from decode counts the same way */
    uint8_t junk[80] = { 0 };
    rumor_wire_hdr_t h;
    CHECK_OK(rumor_wire_stats_count(&s, rumor_wire_decode(junk, 80, &h)));
    int n = rumor_wire_stats_format(&s, buf, sizeof buf);
    CHECKF(n == (int)strlen(buf) && strcmp(buf, "accepted=2 bad_magic=4 stale_round=1") == 0,
           "%d \"%s\"", n, buf);
    CHECK(rumor_wire_stats_rejected(&s) == 5);
    rumor_wire_stats_add(&t, &s);
    rumor_wire_stats_add(&t, &s);
    CHECK(t.accepted == 4 && t.rejected[RUMOR_WIRE_BAD_MAGIC] == 8);
    n = rumor_wire_stats_json(&s, buf, sizeof buf);
    CHECK(n == (int)strlen(buf));
    const char *pre = "{\"accepted\":2,\"rejected\":5,\"reasons\":{\"bad_size\":0,";
    CHECK(strncmp(buf, pre, strlen(pre)) == 0);
    CHECK(strstr(buf, "\"bad_magic\":4,") && strstr(buf, "\"bad_identity\":0,") &&
          strstr(buf, "\"unexpected\":0,\"bad_code\":0,\"incompatible\":0,\"outlier\":0}}"));
    CHECK_ERR(rumor_wire_stats_format(&s, buf, 10), RUMOR_EINVAL, "does not fit");
    CHECK(strlen(buf) < 10);
    CHECK_ERR(rumor_wire_stats_json(&s, buf, 100), RUMOR_EINVAL, "does not fit");
    /* every reason and type has a distinct name */
    int same = 0;
    for (int a = 0; a < RUMOR_WIRE_NREJECT; a++)
        for (int b = 0; b < a; b++)
            same += strcmp(rumor_wire_reject_name(a), rumor_wire_reject_name(b)) == 0;
    CHECK(same == 0);
    CHECK(strcmp(rumor_wire_reject_name(-RUMOR_WIRE_WRONG_SPACE), "wrong_space") == 0);
    CHECK(strcmp(rumor_wire_reject_name(RUMOR_WIRE_NREJECT), "unknown") == 0);
    CHECK(strcmp(rumor_wire_type_name(RUMOR_WIRE_STATE_CHUNK), "state_chunk") == 0);
    CHECK(strcmp(rumor_wire_type_name(0), "unknown") == 0);
}

int main(void)
{
    test_layout();
    test_roundtrip();
    test_bad_fields();
    test_sizes();
    test_check();
    test_finite();
    bench_finite();
    test_chunks();
    test_ids();
    test_stats();
    return tu_finish("test_wire");
}

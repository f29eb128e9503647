/* Fuzz target: the gossip wire codec (gossip/wire.h).
 *
 * Input: frame 0 then the bytes of the frames after it. Frame 0 is the
 * header's own hdr_len bytes (bytes 8-9) when the input is that long, else
 * the whole input, so a valid header followed by a payload is a natural
 * seed. For every input: rumor_wire_decode on several cuts of the bytes; for
 * an accepted header the encode/decode round trip, rumor_wire_check against
 * expectations and frame-size layouts derived from the input, and the chunk
 * arithmetic; rumor_wire_payload_finite on the rest, against a plain
 * reference; the name functions and the counters on values from the input.
 *
 * Bodies: SWIM's (PROBE, PROBE_REQ, ACK; gossip/swim.h) are the only ones a
 * receiver parses, so an accepted header and the rest of the input go to
 * rumor_swim_on_message of a fresh instance, which then runs its timers; what
 * it sends must be SWIM messages of a legal size to valid endpoints. HELLO,
 * LEAVE and the others carry nothing the receiver reads (the mixer uses the
 * header's aux only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "swim.h"
#include "wire.h"

/* Little-endian loads from the input (any alignment). */
static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Four input bytes ending at the end of the input, as an int (0 when short):
 * the arbitrary values the name and counter functions get. */
static int tail_int(const uint8_t *data, size_t size, size_t back)
{
    if (size < back + 4)
        return 0;
    return (int)rd32(data + size - back - 4);
}

static int same_hdr(const rumor_wire_hdr_t *a, const rumor_wire_hdr_t *b)
{
    return a->version == b->version && a->type == b->type && a->flags == b->flags &&
           a->dtype == b->dtype && a->chunk == b->chunk && a->nchunks == b->nchunks &&
           a->aux == b->aux && a->swarm == b->swarm && a->sender == b->sender &&
           a->incarnation == b->incarnation && a->round == b->round &&
           a->offset == b->offset && a->length == b->length && a->space == b->space;
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_wire: %s\n", what);
    abort();
}

/* Counts a verdict, which must be 0 or the negative of a reason. */
static void count(rumor_wire_stats_t *st, int v)
{
    if (v > 0 || v <= -RUMOR_WIRE_NREJECT)
        fail("decode or check returned a value outside the reasons");
    if (rumor_wire_stats_count(st, v) != 0)
        fail("stats_count refused a verdict of decode or check");
}

/* decode(encode(h)) is h, and encode(h) is the input's first 80 bytes (but
 * hdr_len, which encode always writes as 80). */
static void round_trip(const rumor_wire_hdr_t *h, const uint8_t *frame0)
{
    uint8_t enc[RUMOR_WIRE_HDR_LEN];
    rumor_wire_encode(h, enc);
    for (int i = 0; i < RUMOR_WIRE_HDR_LEN; i++)
        if ((i < 8 || i > 9) && enc[i] != frame0[i])
            fail("encode(decode(x)) differs from x");
    rumor_wire_hdr_t back;
    if (rumor_wire_decode(enc, sizeof enc, &back) != 0)
        fail("decode rejects the encoding of a header it accepted");
    if (back.hdr_len != RUMOR_WIRE_HDR_LEN || !same_hdr(&back, h))
        fail("decode(encode(h)) != h");
}

/* What an accepted check promises about the header and the frames. */
static void check_accepted(const rumor_wire_hdr_t *h, const rumor_wire_expect_t *e,
                           const size_t *fs, size_t nf)
{
    int data = h->type == RUMOR_WIRE_PARAMS || h->type == RUMOR_WIRE_GRADS ||
               h->type == RUMOR_WIRE_STATE_CHUNK;
    int ranged = data || h->type == RUMOR_WIRE_STATE_REQ;
    if (h->swarm != e->swarm || h->space != e->space || (e->self && h->sender == e->self))
        fail("check accepted another swarm, space or our own id");
    if (ranged && (h->length == 0 || h->offset > e->space || h->length > e->space - h->offset))
        fail("check accepted a range outside the space");
    if (!ranged && (h->offset | h->length))
        fail("check accepted a range on a type without one");
    if (data) {
        uint64_t max_chunk = e->max_chunk ? e->max_chunk : RUMOR_WIRE_CHUNK_DEFAULT;
        size_t es = rumor_wire_dtype_size(h->dtype);
        if (h->length > max_chunk || nf < 1 || es == 0 || fs[0] % es || fs[0] / es != h->length)
            fail("check accepted a chunk of the wrong size");
    }
    uint32_t max_body = e->max_body ? e->max_body : RUMOR_WIRE_MAX_BODY;
    for (size_t i = data ? 1 : 0; i < nf; i++)
        if (fs[i] > max_body)
            fail("check accepted a body above the bound");
}

static void check_one(rumor_wire_stats_t *st, const rumor_wire_hdr_t *h,
                      const rumor_wire_expect_t *e, const size_t *fs, size_t nf)
{
    int v = rumor_wire_check(h, e, fs, nf);
    count(st, v);
    if (v == 0)
        check_accepted(h, e, fs, nf);
}

/* rumor_wire_check against expectations that match the header (options from
 * its aux bits) and one that does not, over several frame layouts. */
static void check_layouts(rumor_wire_stats_t *st, const rumor_wire_hdr_t *h, const uint8_t *rest,
                          size_t nrest)
{
    rumor_wire_expect_t e = { .swarm = h->swarm, .space = h->space };
    if (h->aux & 1)
        e.self = h->sender;
    if (h->aux & 2)
        e.dtypes = 1u << RUMOR_WIRE_DT_F32 | 1u << RUMOR_WIRE_DT_BF16 | 1u << RUMOR_WIRE_DT_F16;
    if (h->aux & 4)
        e.max_body = 16;
    if (h->aux & 8)
        e.max_chunk = h->aux >> 8;
    size_t es = rumor_wire_dtype_size(h->dtype);
    size_t exact = es && h->length <= SIZE_MAX / es ? (size_t)h->length * es : SIZE_MAX;
    size_t fs[4] = { 0 };
    size_t nf = 0;
    for (; nf < 4 && 2 * nf + 1 < nrest; nf++)
        fs[nf] = rd16(rest + 2 * nf);
    const size_t l_one[1] = { nrest }, l_exact[2] = { exact, nrest }, l_split[2] = { nrest / 2,
                                                                                    nrest - nrest / 2 };
    const size_t l_three[3] = { exact, 1, 2 };
    check_one(st, h, &e, NULL, 0);
    check_one(st, h, &e, l_one, 1);
    check_one(st, h, &e, l_exact, 1);
    check_one(st, h, &e, l_exact, 2);
    check_one(st, h, &e, l_split, 2);
    check_one(st, h, &e, l_three, 3);
    check_one(st, h, &e, fs, nf);
    rumor_wire_expect_t other = e;
    other.swarm ^= 1;
    check_one(st, h, &other, l_exact, 1);
    other = e;
    other.space = h->space / 2;
    check_one(st, h, &other, l_exact, 1);
    /* frames without sizes: an error, never a read through NULL */
    count(st, rumor_wire_check(h, &e, NULL, 1 + (nrest & 1)));
}

/* The chunk arithmetic on the header's numbers. */
static void chunk_math(const rumor_wire_hdr_t *h)
{
    uint64_t n = h->space, c = h->length;
    uint64_t nc = rumor_wire_nchunks(n, c);
    if ((n == 0 || c == 0) != (nc == 0))
        fail("nchunks is 0 exactly when there is nothing to cover");
    if (nc > 0 && nc - 1 != (n - 1) / c)
        fail("nchunks is not ceil(n / c)");
    uint64_t off = 7, len = 9;
    int rc = rumor_wire_chunk_range(n, c, h->chunk, &off, &len);
    if (rc == 0) {
        if ((uint64_t)h->chunk >= nc || len == 0 || len > c || off > n || len > n - off ||
            (len < c && off + len != n))
            fail("chunk_range gave a range outside the space");
    } else if ((uint64_t)h->chunk < nc || off != 7 || len != 9) {
        fail("chunk_range refused a chunk that exists, or wrote its outputs");
    }
    size_t m = rumor_wire_max_msg_size((size_t)h->length);
    if (m != 0 && (m < RUMOR_WIRE_HDR_MAX || m < RUMOR_WIRE_MAX_BODY))
        fail("max_msg_size below the largest header or body");
}

/* rumor_wire_payload_finite against a float-by-float reference. */
static void payload(const uint8_t *p, size_t nbytes)
{
    size_t n = nbytes / 4;
    int ref = 1;
    for (size_t i = 0; i < n && ref; i++) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        ref = isfinite(f);
    }
    if (rumor_wire_payload_finite(p, n) != ref)
        fail("payload_finite disagrees with isfinite");
}

static void names_and_stats(rumor_wire_stats_t *st, const uint8_t *data, size_t size)
{
    for (size_t back = 0; back < 12; back += 4) {
        int x = tail_int(data, size, back);
        if (!rumor_wire_type_name(x) || !rumor_wire_reject_name(x))
            fail("a name function returned NULL");
        rumor_wire_stats_t before = *st;
        int rc = rumor_wire_stats_count(st, x);
        int in_enum = x > -RUMOR_WIRE_NREJECT && x < RUMOR_WIRE_NREJECT;
        if ((rc == 0) != in_enum)
            fail("stats_count accepted a value outside the enum, or refused one in it");
        if (rc != 0 && memcmp(&before, st, sizeof before))
            fail("stats_count counted a value it refused");
    }
    rumor_wire_stats_t sum = { 0 };
    rumor_wire_stats_add(&sum, st);
    rumor_wire_stats_add(&sum, st);
    if (rumor_wire_stats_rejected(&sum) != 2 * rumor_wire_stats_rejected(st))
        fail("stats_add did not add");
    char buf[1200];
    size_t cap = size ? 1 + data[0] * 4 % sizeof buf : sizeof buf;
    int n = rumor_wire_stats_format(&sum, buf, cap);
    if (strnlen(buf, cap) >= cap || (n >= 0 && (size_t)n != strlen(buf)))
        fail("stats_format overran or miscounted");
    n = rumor_wire_stats_json(&sum, buf, cap);
    if (strnlen(buf, cap) >= cap || (n >= 0 && (size_t)n != strlen(buf)))
        fail("stats_json overran or miscounted");
}

static void ids(const uint8_t *data, size_t size)
{
    char name[65];
    size_t len = size < sizeof name - 1 ? size : sizeof name - 1;
    memcpy(name, data, len);
    name[len] = '\0';
    if (rumor_wire_swarm_id(name) == 0)
        fail("swarm_id 0");
    if (size >= 32 && rumor_wire_peer_id(data) == 0)
        fail("peer_id 0");
}

/* What a SWIM instance sends: checked, then dropped. */
static int swim_send(void *ctx, uint64_t to_id, const char *endpoint, int type, uint32_t seq,
                     const void *body, size_t len)
{
    (void)ctx;
    (void)to_id;
    (void)seq;
    if (type != RUMOR_WIRE_PROBE && type != RUMOR_WIRE_PROBE_REQ && type != RUMOR_WIRE_ACK)
        fail("swim sent a type that is not SWIM's");
    if (len > RUMOR_WIRE_MAX_BODY || (len && !body))
        fail("swim sent a body above RUMOR_WIRE_MAX_BODY");
    if (!endpoint || !rumor_swim_endpoint_valid(endpoint, strlen(endpoint)))
        fail("swim sent to an invalid endpoint");
    return 0;
}

/* One SWIM message (header fields, body) to a fresh instance at a fixed
 * time, then its timers; the view stays sorted and holds self. */
static void swim_body(rumor_wire_stats_t *st, const rumor_wire_hdr_t *h, const uint8_t *body,
                      size_t len)
{
    rumor_swim_config_t c = { .self_id = 0x5eed5eed5eed5eedULL, .incarnation = 1,
                              .self_endpoint = "tcp://127.0.0.1:6000", .seed = 1 };
    rumor_swim_t *sw = NULL;
    if (rumor_swim_create(&c, swim_send, NULL, &sw) < 0)
        fail("swim_create failed");
    double now = 100.0;
    rumor_swim_tick(sw, now);
    count(st, rumor_swim_on_message(sw, now, h->sender, h->incarnation, h->type, h->aux,
                                    len ? body : NULL, len));
    rumor_swim_heard(sw, now + 0.1, h->sender, h->incarnation);
    for (double t = 0.3; t < 40; t *= 3)
        rumor_swim_tick(sw, now + t);
    rumor_swim_member_t view[8];
    size_t n = rumor_swim_view(sw, view, 8), self = 0;
    for (size_t i = 0; i < n && i < 8; i++) {
        if (i > 0 && view[i].id <= view[i - 1].id)
            fail("swim view not sorted by id");
        self += view[i].id == c.self_id;
    }
    if (n < 1 || (n <= 8 && self != 1))
        fail("swim view without self");
    rumor_swim_destroy(&sw);
    rumor_swim_destroy(&sw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t hlen = size;
    if (size >= 10 && rd16(data + 8) >= 1 && rd16(data + 8) <= size)
        hlen = rd16(data + 8);
    const uint8_t *rest = data + hlen;
    size_t nrest = size - hlen;
    rumor_wire_stats_t st = { 0 };
    rumor_wire_hdr_t h, other;

    int v = rumor_wire_decode(data, hlen, &h);
    count(&st, v);
    count(&st, rumor_wire_decode(data, size, &other));
    if (size > RUMOR_WIRE_HDR_LEN)
        count(&st, rumor_wire_decode(data, RUMOR_WIRE_HDR_LEN, &other));
    count(&st, rumor_wire_decode(NULL, size, &other));
    if (v == 0) {
        if (h.hdr_len != hlen)
            fail("decode accepted a hdr_len other than the frame's size");
        round_trip(&h, data);
        check_layouts(&st, &h, rest, nrest);
        chunk_math(&h);
        if (h.type == RUMOR_WIRE_PROBE || h.type == RUMOR_WIRE_PROBE_REQ ||
            h.type == RUMOR_WIRE_ACK)
            swim_body(&st, &h, rest, nrest);
        if (!rumor_wire_type_name(h.type) || !strcmp(rumor_wire_type_name(h.type), "unknown"))
            fail("an accepted type has no name");
    }
    payload(rest, nrest);
    if (nrest > 1)
        payload(rest + 1, nrest - 1); /* libzmq hands out frames at any offset */
    names_and_stats(&st, data, size);
    ids(data, size);
    return 0;
}

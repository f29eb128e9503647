/* Wire: header codec, receiver checks, payload check, ids and counters
 * (see wire.h; the byte layout is specified in docs/protocol.md). */
#include "wire.h"

#include "codec.h"

#include "le.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

/* What each type carries and which frames follow its header. "ranged" types
 * address [offset, offset+length) of the space; "data" types also carry those
 * elements in a payload frame (the first frame after the header) and number
 * their chunks. Frames after the payload (or all frames of a control type)
 * are bodies, at most max_body bytes each. */
struct tinfo {
    const char *name;
    uint8_t data;       /* carries elements: payload frame, dtype, chunk numbering */
    uint8_t ranged;     /* offset/length meaningful (else both must be 0) */
    uint8_t min_frames; /* frames after the header */
    uint8_t max_frames;
    uint16_t crit_flags; /* critical flag bits this type allows */
};

static const struct tinfo types[RUMOR_WIRE_NTYPES] = {
    [RUMOR_WIRE_PARAMS] = { "params", 1, 1, 1, 1, 0 },
    [RUMOR_WIRE_GRADS] = { "grads", 1, 1, 1, 1, RUMOR_WIRE_F_ALLGATHER },
    [RUMOR_WIRE_HELLO] = { "hello", 0, 0, 0, 1, 0 },
    [RUMOR_WIRE_HEARTBEAT] = { "heartbeat", 0, 0, 0, 0, 0 },
    [RUMOR_WIRE_LEAVE] = { "leave", 0, 0, 0, 1, 0 },
    [RUMOR_WIRE_PROBE] = { "probe", 0, 0, 0, 1, 0 },
    [RUMOR_WIRE_PROBE_REQ] = { "probe_req", 0, 0, 1, 1, 0 },
    [RUMOR_WIRE_ACK] = { "ack", 0, 0, 0, 1, 0 },
    [RUMOR_WIRE_STATE_REQ] = { "state_req", 0, 1, 0, 1, 0 },
    [RUMOR_WIRE_STATE_CHUNK] = { "state_chunk", 1, 1, 1, 2, 0 },
};

static const char *const reject_names[RUMOR_WIRE_NREJECT] = {
    [RUMOR_WIRE_ACCEPT] = "accept",
    [RUMOR_WIRE_BAD_SIZE] = "bad_size",
    [RUMOR_WIRE_BAD_MAGIC] = "bad_magic",
    [RUMOR_WIRE_BAD_VERSION] = "bad_version",
    [RUMOR_WIRE_BAD_HDR_LEN] = "bad_hdr_len",
    [RUMOR_WIRE_BAD_TYPE] = "bad_type",
    [RUMOR_WIRE_BAD_FLAGS] = "bad_flags",
    [RUMOR_WIRE_BAD_DTYPE] = "bad_dtype",
    [RUMOR_WIRE_BAD_RESERVED] = "bad_reserved",
    [RUMOR_WIRE_BAD_CHUNK] = "bad_chunk",
    [RUMOR_WIRE_BAD_SENDER] = "bad_sender",
    [RUMOR_WIRE_WRONG_SWARM] = "wrong_swarm",
    [RUMOR_WIRE_WRONG_SPACE] = "wrong_space",
    [RUMOR_WIRE_FROM_SELF] = "from_self",
    [RUMOR_WIRE_BAD_RANGE] = "bad_range",
    [RUMOR_WIRE_EMPTY_CHUNK] = "empty_chunk",
    [RUMOR_WIRE_CHUNK_TOO_LARGE] = "chunk_too_large",
    [RUMOR_WIRE_UNSUPPORTED_DTYPE] = "unsupported_dtype",
    [RUMOR_WIRE_BAD_FRAMES] = "bad_frames",
    [RUMOR_WIRE_BAD_PAYLOAD_SIZE] = "bad_payload_size",
    [RUMOR_WIRE_BODY_TOO_LARGE] = "body_too_large",
    [RUMOR_WIRE_STALE_ROUND] = "stale_round",
    [RUMOR_WIRE_FUTURE_ROUND] = "future_round",
    [RUMOR_WIRE_OLD_INCARNATION] = "old_incarnation",
    [RUMOR_WIRE_NONFINITE] = "nonfinite",
    [RUMOR_WIRE_UNKNOWN_SENDER] = "unknown_sender",
    [RUMOR_WIRE_DUPLICATE] = "duplicate",
    [RUMOR_WIRE_BAD_IDENTITY] = "bad_identity",
    [RUMOR_WIRE_BAD_DIGEST] = "bad_digest",
    [RUMOR_WIRE_UNEXPECTED] = "unexpected",
    [RUMOR_WIRE_BAD_CODE] = "bad_code",
    [RUMOR_WIRE_INCOMPATIBLE] = "incompatible",
    [RUMOR_WIRE_OUTLIER] = "outlier",
};

int rumor_wire_reject(int reason, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rumor_err_set(RUMOR_EPROTO, "wire: %s: %s", reject_names[reason], msg);
    return -reason;
}

/* ----------------------------------------------------------- the header */

void rumor_wire_encode(const rumor_wire_hdr_t *h, uint8_t out[RUMOR_WIRE_HDR_LEN])
{
    put32(out + 0, RUMOR_WIRE_MAGIC);
    out[4] = RUMOR_WIRE_VERSION;
    out[5] = h->type;
    put16(out + 6, h->flags);
    put16(out + 8, RUMOR_WIRE_HDR_LEN);
    out[10] = h->dtype;
    out[11] = 0;
    put32(out + 12, h->chunk);
    put64(out + 16, h->swarm);
    put64(out + 24, h->sender);
    put64(out + 32, h->incarnation);
    put64(out + 40, h->round);
    put64(out + 48, h->offset);
    put64(out + 56, h->length);
    put64(out + 64, h->space);
    put32(out + 72, h->nchunks);
    put32(out + 76, h->aux);
}

int rumor_wire_decode(const void *buf, size_t len, rumor_wire_hdr_t *out)
{
    const uint8_t *p = buf;
    if (!p || len < RUMOR_WIRE_HDR_LEN)
        return rumor_wire_reject(RUMOR_WIRE_BAD_SIZE, "header frame of %zu bytes, at least %d expected",
                      p ? len : 0, RUMOR_WIRE_HDR_LEN);
    uint32_t magic = get32(p);
    if (magic != RUMOR_WIRE_MAGIC)
        return rumor_wire_reject(RUMOR_WIRE_BAD_MAGIC, "magic 0x%08" PRIx32 ", expected 0x%08x (\"RUMR\")",
                      magic, RUMOR_WIRE_MAGIC);
    rumor_wire_hdr_t h;
    h.version = p[4];
    if (h.version != RUMOR_WIRE_VERSION)
        return rumor_wire_reject(RUMOR_WIRE_BAD_VERSION, "version %u, only %d is understood",
                      (unsigned)h.version, RUMOR_WIRE_VERSION);
    h.hdr_len = get16(p + 8);
    if (h.hdr_len < RUMOR_WIRE_HDR_LEN || h.hdr_len != len)
        return rumor_wire_reject(RUMOR_WIRE_BAD_HDR_LEN, "hdr_len %u in a frame of %zu bytes",
                      (unsigned)h.hdr_len, len);
    h.type = p[5];
    if (h.type == 0 || h.type >= RUMOR_WIRE_NTYPES)
        return rumor_wire_reject(RUMOR_WIRE_BAD_TYPE, "type %u", (unsigned)h.type);
    const struct tinfo *t = &types[h.type];
    h.flags = get16(p + 6);
    uint16_t crit = h.flags & RUMOR_WIRE_F_CRITICAL_MASK;
    if (crit & ~t->crit_flags)
        return rumor_wire_reject(RUMOR_WIRE_BAD_FLAGS, "flags 0x%04x: critical bits 0x%02x unknown to type %s",
                      (unsigned)h.flags, (unsigned)(crit & ~t->crit_flags), t->name);
    h.dtype = p[10];
    if (h.dtype > RUMOR_WIRE_DT_MAX || (h.dtype == RUMOR_WIRE_DT_NONE) == t->data)
        return rumor_wire_reject(RUMOR_WIRE_BAD_DTYPE, "dtype %u on type %s", (unsigned)h.dtype, t->name);
    if (p[11] != 0)
        return rumor_wire_reject(RUMOR_WIRE_BAD_RESERVED, "byte 11 is 0x%02x, must be 0", (unsigned)p[11]);
    h.chunk = get32(p + 12);
    h.nchunks = get32(p + 72);
    if (t->data ? h.chunk >= h.nchunks : (h.chunk | h.nchunks) != 0)
        return rumor_wire_reject(RUMOR_WIRE_BAD_CHUNK, "chunk %" PRIu32 " of %" PRIu32 " on type %s",
                      h.chunk, h.nchunks, t->name);
    h.offset = get64(p + 48);
    h.length = get64(p + 56);
    if (!t->ranged && (h.offset | h.length) != 0)
        return rumor_wire_reject(RUMOR_WIRE_BAD_RANGE, "offset %" PRIu64 " length %" PRIu64
                      " on type %s, which has no range", h.offset, h.length, t->name);
    h.sender = get64(p + 24);
    if (h.sender == 0)
        return rumor_wire_reject(RUMOR_WIRE_BAD_SENDER, "sender id 0");
    h.swarm = get64(p + 16);
    h.incarnation = get64(p + 32);
    h.round = get64(p + 40);
    h.space = get64(p + 64);
    h.aux = get32(p + 76);
    *out = h;
    return 0;
}

/* Checks the frames after the header: their number for the type, the
 * payload's size for data types, and every body's size. */
static int check_frames(const rumor_wire_hdr_t *h, const struct tinfo *t, uint32_t max_body,
                        const size_t *fs, size_t nframes)
{
    if (nframes < t->min_frames || nframes > t->max_frames)
        return rumor_wire_reject(RUMOR_WIRE_BAD_FRAMES, "%zu frames after a %s header, %u..%u expected",
                      nframes, t->name, (unsigned)t->min_frames, (unsigned)t->max_frames);
    size_t first_body = 0;
    if (t->data) {
        size_t es = rumor_wire_dtype_size(h->dtype);
        if (es == 0) { /* compressed: the size follows from length and aux */
            /* GRADS's aux is its step: its codecs (int8, int4) carry none */
            size_t want = rumor_codec_payload_bytes(
                h->dtype, h->length, h->type == RUMOR_WIRE_GRADS ? 0 : h->aux);
            if (want == 0 || fs[0] != want)
                return rumor_wire_reject(RUMOR_WIRE_BAD_PAYLOAD_SIZE, "payload of %zu bytes for %" PRIu64
                              " elements of dtype %u with aux %" PRIu32 " (%zu expected)",
                              fs[0], h->length, (unsigned)h->dtype, h->aux, want);
        } else if (fs[0] % es != 0 || fs[0] / es != h->length) {
            /* fs[0] / es == length without multiplying: length may be anything */
            return rumor_wire_reject(RUMOR_WIRE_BAD_PAYLOAD_SIZE, "payload of %zu bytes for %" PRIu64
                          " elements of %zu bytes", fs[0], h->length, es);
        }
        first_body = 1;
    }
    for (size_t i = first_body; i < nframes; i++)
        if (fs[i] > max_body)
            return rumor_wire_reject(RUMOR_WIRE_BODY_TOO_LARGE, "%s body frame of %zu bytes, at most %" PRIu32,
                          t->name, fs[i], max_body);
    return 0;
}

int rumor_wire_check(const rumor_wire_hdr_t *h, const rumor_wire_expect_t *e,
                     const size_t *frame_sizes, size_t nframes)
{
    if (h->type == 0 || h->type >= RUMOR_WIRE_NTYPES)
        return rumor_wire_reject(RUMOR_WIRE_BAD_TYPE, "type %u", (unsigned)h->type);
    const struct tinfo *t = &types[h->type];
    if (h->swarm != e->swarm)
        return rumor_wire_reject(RUMOR_WIRE_WRONG_SWARM, "swarm %016" PRIx64 ", ours is %016" PRIx64,
                      h->swarm, e->swarm);
    if (h->space != e->space)
        return rumor_wire_reject(RUMOR_WIRE_WRONG_SPACE, "space of %" PRIu64 " elements, our model has %" PRIu64,
                      h->space, e->space);
    if (e->self != 0 && h->sender == e->self)
        return rumor_wire_reject(RUMOR_WIRE_FROM_SELF, "sender %016" PRIx64 " is our own id", h->sender);
    if (t->ranged) {
        if (h->length == 0)
            return rumor_wire_reject(RUMOR_WIRE_EMPTY_CHUNK, "%s of length 0", t->name);
        /* offset + length <= space, written so that nothing can overflow */
        if (h->offset > e->space || h->length > e->space - h->offset)
            return rumor_wire_reject(RUMOR_WIRE_BAD_RANGE, "offset %" PRIu64 " length %" PRIu64
                          " beyond a space of %" PRIu64, h->offset, h->length, e->space);
    }
    if (t->data) {
        uint64_t max_chunk = e->max_chunk ? e->max_chunk : RUMOR_WIRE_CHUNK_DEFAULT;
        if (h->length > max_chunk)
            return rumor_wire_reject(RUMOR_WIRE_CHUNK_TOO_LARGE, "chunk of %" PRIu64
                          " elements, at most %" PRIu64, h->length, max_chunk);
        uint32_t dtypes = e->dtypes ? e->dtypes : 1u << RUMOR_WIRE_DT_F32;
        if (!(dtypes & (1u << h->dtype)))
            return rumor_wire_reject(RUMOR_WIRE_UNSUPPORTED_DTYPE, "dtype %u not accepted here",
                          (unsigned)h->dtype);
    }
    if (nframes > 0 && !frame_sizes)
        return rumor_wire_reject(RUMOR_WIRE_BAD_FRAMES, "%zu frames but no sizes", nframes);
    return check_frames(h, t, e->max_body ? e->max_body : RUMOR_WIRE_MAX_BODY, frame_sizes,
                        nframes);
}

/* ------------------------------------------------------------- payloads */

/* A float is NaN or +-Inf iff its 8 exponent bits are all ones. Adding one
 * exponent ulp to the masked exponent carries into bit 31 exactly then, so an
 * OR over a block tells whether any element is non-finite: and, add, or per
 * element, which GCC vectorizes with plain SSE2 at -O2 (the constant block
 * length leaves no epilogue, the condition of its cheapest vectorizer). */
#define FINITE_BLOCK 1024

static uint32_t nonfinite_bits(const uint8_t *b, size_t n)
{
    uint32_t acc = 0;
    for (size_t j = 0; j < n; j++) {
        uint32_t u;
        memcpy(&u, b + 4 * j, 4);
        acc |= (u & 0x7F800000u) + 0x00800000u;
    }
    return acc & 0x80000000u;
}

static uint32_t nonfinite_block(const uint8_t *b)
{
    uint32_t acc = 0;
    for (size_t j = 0; j < FINITE_BLOCK; j++) {
        uint32_t u;
        memcpy(&u, b + 4 * j, 4);
        acc |= (u & 0x7F800000u) + 0x00800000u;
    }
    return acc & 0x80000000u;
}

int rumor_wire_payload_finite(const void *p, size_t n)
{
    const uint8_t *b = p;
    size_t i = 0;
    /* blocks of 4 KiB: a poisoned chunk is caught without reading it all */
    for (; n - i >= FINITE_BLOCK; i += FINITE_BLOCK)
        if (nonfinite_block(b + 4 * i))
            return 0;
    return !nonfinite_bits(b + 4 * i, n - i);
}

size_t rumor_wire_dtype_size(int dtype)
{
    switch (dtype) {
    case RUMOR_WIRE_DT_F32: return 4;
    case RUMOR_WIRE_DT_BF16:
    case RUMOR_WIRE_DT_F16: return 2;
    default: return 0;
    }
}

size_t rumor_wire_max_msg_size(size_t chunk_elems)
{
    if (chunk_elems > (size_t)(INT64_MAX / 4))
        return 0;
    size_t m = chunk_elems * 4;
    if (m < RUMOR_WIRE_HDR_MAX)
        m = RUMOR_WIRE_HDR_MAX;
    if (m < RUMOR_WIRE_MAX_BODY)
        m = RUMOR_WIRE_MAX_BODY;
    return m;
}

uint64_t rumor_wire_nchunks(uint64_t n_elems, uint64_t chunk_elems)
{
    if (n_elems == 0 || chunk_elems == 0)
        return 0;
    return n_elems / chunk_elems + (n_elems % chunk_elems != 0);
}

int rumor_wire_chunk_range(uint64_t n_elems, uint64_t chunk_elems, uint64_t c,
                           uint64_t *offset, uint64_t *length)
{
    uint64_t nc = rumor_wire_nchunks(n_elems, chunk_elems);
    if (c >= nc)
        return rumor_err_set(RUMOR_EINVAL, "chunk %" PRIu64 " of %" PRIu64 " (%" PRIu64
                             " elements in chunks of %" PRIu64 ")", c, nc, n_elems, chunk_elems);
    *offset = c * chunk_elems;
    uint64_t rest = n_elems - *offset;
    *length = rest < chunk_elems ? rest : chunk_elems;
    return 0;
}

/* ------------------------------------------------------------------ ids */

/* First 8 bytes (LE) of personalized BLAKE2b-128; 16 bytes is the shortest
 * output libsodium documents, and Python's hashlib.blake2b(digest_size=16,
 * person=...) gives the same. 0 is kept for "no id". */
static uint64_t id64(const uint8_t *in, size_t len, const char *person)
{
    uint8_t pers[crypto_generichash_blake2b_PERSONALBYTES] = { 0 };
    uint8_t out[16];
    memcpy(pers, person, strlen(person));
    if (crypto_generichash_blake2b_salt_personal(out, sizeof out, in, len, NULL, 0, NULL,
                                                 pers) != 0)
        return 0; /* cannot happen with these lengths; 0 is "no id" */
    uint64_t v = get64(out);
    return v ? v : 1;
}

uint64_t rumor_wire_peer_id(const uint8_t key[32])
{
    return id64(key, 32, "rumor.peer.v1");
}

uint64_t rumor_wire_swarm_id(const char *name)
{
    if (!name)
        name = "";
    return id64((const uint8_t *)name, strlen(name), "rumor.swarm.v1");
}

/* ---------------------------------------------------------------- names */

const char *rumor_wire_type_name(int type)
{
    return type > 0 && type < RUMOR_WIRE_NTYPES ? types[type].name : "unknown";
}

const char *rumor_wire_reject_name(int reason)
{
    /* the range first: negating INT_MIN would overflow */
    if (reason <= -RUMOR_WIRE_NREJECT || reason >= RUMOR_WIRE_NREJECT)
        return "unknown";
    return reject_names[reason < 0 ? -reason : reason];
}

/* ---------------------------------------------------------------- stats */

int rumor_wire_stats_count(rumor_wire_stats_t *s, int verdict)
{
    if (verdict == RUMOR_WIRE_ACCEPT) {
        s->accepted++;
        return 0;
    }
    /* the range first: negating INT_MIN would overflow */
    if (verdict <= -RUMOR_WIRE_NREJECT || verdict >= RUMOR_WIRE_NREJECT)
        return rumor_err_set(RUMOR_EINVAL, "wire stats: %d is not a reject reason", verdict);
    s->rejected[verdict < 0 ? -verdict : verdict]++;
    return 0;
}

void rumor_wire_stats_add(rumor_wire_stats_t *dst, const rumor_wire_stats_t *src)
{
    dst->accepted += src->accepted;
    for (int r = 1; r < RUMOR_WIRE_NREJECT; r++)
        dst->rejected[r] += src->rejected[r];
}

uint64_t rumor_wire_stats_rejected(const rumor_wire_stats_t *s)
{
    uint64_t n = 0;
    for (int r = 1; r < RUMOR_WIRE_NREJECT; r++)
        n += s->rejected[r];
    return n;
}

/* Appends to buf at *pos like snprintf; sets *full when it did not fit. */
RUMOR_PRINTF(5, 6)
static void put(char *buf, size_t cap, size_t *pos, int *full, const char *fmt, ...)
{
    if (*full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *pos, cap - *pos, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *pos)
        *full = 1;
    else
        *pos += (size_t)n;
}

/* Shared end of the formatters: the length, or RUMOR_EINVAL when cut. */
static int finish(size_t pos, int full, const char *what)
{
    if (full)
        return rumor_err_set(RUMOR_EINVAL, "wire stats: %s does not fit the buffer", what);
    return (int)pos;
}

int rumor_wire_stats_format(const rumor_wire_stats_t *s, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return rumor_err_set(RUMOR_EINVAL, "wire stats: no buffer");
    size_t pos = 0;
    int full = 0;
    buf[0] = '\0';
    put(buf, cap, &pos, &full, "accepted=%" PRIu64, s->accepted);
    for (int r = 1; r < RUMOR_WIRE_NREJECT; r++)
        if (s->rejected[r])
            put(buf, cap, &pos, &full, " %s=%" PRIu64, reject_names[r], s->rejected[r]);
    return finish(pos, full, "text");
}

int rumor_wire_stats_json(const rumor_wire_stats_t *s, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return rumor_err_set(RUMOR_EINVAL, "wire stats: no buffer");
    size_t pos = 0;
    int full = 0;
    buf[0] = '\0';
    put(buf, cap, &pos, &full, "{\"accepted\":%" PRIu64 ",\"rejected\":%" PRIu64 ",\"reasons\":{",
        s->accepted, rumor_wire_stats_rejected(s));
    for (int r = 1; r < RUMOR_WIRE_NREJECT; r++)
        put(buf, cap, &pos, &full, "%s\"%s\":%" PRIu64, r > 1 ? "," : "", reject_names[r],
            s->rejected[r]);
    put(buf, cap, &pos, &full, "}}");
    return finish(pos, full, "JSON");
}

/* Wire: the codec of rumor's gossip protocol (docs/protocol.md is the spec).
 *
 * A message is a ZeroMQ multipart message: frame 0 is an 80-byte header
 * encoded field by field in little-endian, then zero or more frames whose
 * number and sizes the header's type fixes (a parameter chunk, or a small
 * body). This module turns headers into bytes and back and judges what a
 * peer sent; it never touches a socket.
 *
 * A receiver runs, for every message:
 *   1. rumor_wire_decode   on frame 0: syntax (magic, version, hdr_len, type,
 *                          flags, dtype, reserved bytes, chunk numbering);
 *   2. rumor_wire_check    against what this peer expects: swarm, model size,
 *                          range, chunk size, number and sizes of frames;
 *   3. its own judgement   (the mixer): incarnation, round, sender known,
 *                          rumor_wire_payload_finite on the payload;
 * and on any rejection drops the whole message, counts the reason with
 * rumor_wire_stats_count and goes on. Nothing from a rejected message is used.
 *
 * Verdicts: decode and check return 0 (accept) or the negative of a
 * rumor_wire_reject reason, and record a message naming the field and value
 * as the last error with code RUMOR_EPROTO. The reasons are not rumor_rc
 * codes: to pass a rejection up as an error, return RUMOR_EPROTO. */
#ifndef RUMOR_WIRE_H
#define RUMOR_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_WIRE_MAGIC 0x524D5552u  /* the bytes "RUMR" read as a LE u32 */
#define RUMOR_WIRE_VERSION 1
#define RUMOR_WIRE_HDR_LEN 80         /* header bytes a version 1 sender sends */
#define RUMOR_WIRE_HDR_MAX 65535      /* largest hdr_len (extensions included) */
#define RUMOR_WIRE_MAX_BODY 65536     /* largest body frame of a control type */
#define RUMOR_WIRE_CHUNK_DEFAULT (1u << 20) /* elements per chunk: 4 MiB of f32 */

/* Message types (header byte 5). 0 and 11..255 are rejected (BAD_TYPE). */
enum rumor_wire_type {
    RUMOR_WIRE_PARAMS = 1,      /* a chunk of x_i(k): D-PSGD gossip */
    RUMOR_WIRE_GRADS = 2,       /* a chunk of the all-reduce baseline */
    RUMOR_WIRE_HELLO = 3,       /* first message to a peer: who, which model */
    RUMOR_WIRE_HEARTBEAT = 4,   /* liveness between rounds */
    RUMOR_WIRE_LEAVE = 5,       /* orderly departure (preemption notice) */
    RUMOR_WIRE_PROBE = 6,       /* SWIM direct probe */
    RUMOR_WIRE_PROBE_REQ = 7,   /* SWIM indirect probe request */
    RUMOR_WIRE_ACK = 8,         /* answer to PROBE / PROBE_REQ */
    RUMOR_WIRE_STATE_REQ = 9,   /* late joiner asks for the current state */
    RUMOR_WIRE_STATE_CHUNK = 10 /* a chunk of that state */
};
#define RUMOR_WIRE_NTYPES 11 /* types are 1..RUMOR_WIRE_NTYPES-1 */

/* Element types (header byte 10). BF16 and F16 decode but are not
 * produced; the compressed ones (codec.h) are produced by --compress and
 * accepted, like every dtype but F32, only by a receiver that asks for
 * them (rumor_wire_expect_t.dtypes). A compressed payload's size follows
 * from its length and aux (rumor_codec_payload_bytes). */
enum rumor_wire_dtype {
    RUMOR_WIRE_DT_NONE = 0, /* control types: no elements */
    RUMOR_WIRE_DT_F32 = 1,
    RUMOR_WIRE_DT_BF16 = 2,
    RUMOR_WIRE_DT_F16 = 3,
    RUMOR_WIRE_DT_Q8 = 4,   /* int8 codes in blocks of 256 with f32 scales */
    RUMOR_WIRE_DT_Q4 = 5,   /* int4 codes in blocks of 256 with f32 scales */
    RUMOR_WIRE_DT_TOPK = 6, /* aux (index, value) pairs: u32 indices then f32 values */
    RUMOR_WIRE_DT_RANDK = 7, /* a u64 seed choosing aux elements, then their f32 values */
    RUMOR_WIRE_DT_Q2 = 8,    /* int2 codes in blocks of 256 with f32 scales */
    RUMOR_WIRE_DT_TOPKQ = 9  /* top-k of each chunk: f32 scales, packed indices, B-bit values */
};
#define RUMOR_WIRE_DT_MAX RUMOR_WIRE_DT_TOPKQ

/* Flags (header bytes 6-7). The low byte is "critical": a receiver rejects a
 * bit it does not know (BAD_FLAGS). The high byte is "ignorable": a receiver
 * keeps but ignores bits it does not know. */
#define RUMOR_WIRE_F_ALLGATHER 0x0001u /* GRADS only: all-gather phase (else reduce-scatter) */
#define RUMOR_WIRE_F_LEAVING 0x0100u   /* any type: the sender expects to leave soon */
#define RUMOR_WIRE_F_CRITICAL_MASK 0x00FFu
#define RUMOR_WIRE_F_KNOWN (RUMOR_WIRE_F_ALLGATHER | RUMOR_WIRE_F_LEAVING)

/* Why a message was rejected. 0 is "accepted"; decode and check return the
 * negative of a reason. The caller-judged reasons (after FROM_SELF) are never
 * returned by this module; they are here so that one stats table counts all. */
enum rumor_wire_reject {
    RUMOR_WIRE_ACCEPT = 0,
    /* rumor_wire_decode */
    RUMOR_WIRE_BAD_SIZE,        /* frame 0 shorter than 80 bytes */
    RUMOR_WIRE_BAD_MAGIC,       /* not "RUMR" */
    RUMOR_WIRE_BAD_VERSION,     /* version other than 1 */
    RUMOR_WIRE_BAD_HDR_LEN,     /* hdr_len < 80 or != size of frame 0 */
    RUMOR_WIRE_BAD_TYPE,        /* unknown message type */
    RUMOR_WIRE_BAD_FLAGS,       /* unknown critical flag, or a flag the type forbids */
    RUMOR_WIRE_BAD_DTYPE,       /* unknown dtype, or a dtype the type forbids */
    RUMOR_WIRE_BAD_RESERVED,    /* reserved byte not zero */
    RUMOR_WIRE_BAD_CHUNK,       /* chunk >= nchunks, or chunk fields on a control type */
    RUMOR_WIRE_BAD_SENDER,      /* sender id 0 */
    /* rumor_wire_check */
    RUMOR_WIRE_WRONG_SWARM,     /* another swarm's message */
    RUMOR_WIRE_WRONG_SPACE,     /* another model size */
    RUMOR_WIRE_FROM_SELF,       /* our own id as sender */
    RUMOR_WIRE_BAD_RANGE,       /* offset+length beyond the space (or set on a control type) */
    RUMOR_WIRE_EMPTY_CHUNK,     /* length 0 on a type that carries elements */
    RUMOR_WIRE_CHUNK_TOO_LARGE, /* length above the receiver's chunk bound */
    RUMOR_WIRE_UNSUPPORTED_DTYPE, /* a valid dtype this receiver does not take */
    RUMOR_WIRE_BAD_FRAMES,      /* wrong number of frames for the type */
    RUMOR_WIRE_BAD_PAYLOAD_SIZE, /* payload frame != length * dtype size */
    RUMOR_WIRE_BODY_TOO_LARGE,  /* body frame above the bound */
    /* judged by the caller (mixer, membership, transport) */
    RUMOR_WIRE_STALE_ROUND,     /* round already mixed */
    RUMOR_WIRE_FUTURE_ROUND,    /* round too far ahead */
    RUMOR_WIRE_OLD_INCARNATION, /* from a previous life of the sender */
    RUMOR_WIRE_NONFINITE,       /* NaN or Inf in the payload */
    RUMOR_WIRE_UNKNOWN_SENDER,  /* not a current neighbour */
    RUMOR_WIRE_DUPLICATE,       /* chunk already received this round */
    RUMOR_WIRE_BAD_IDENTITY,    /* sender id != id of the authenticated key */
    RUMOR_WIRE_BAD_DIGEST,      /* transferred state does not match its digest */
    RUMOR_WIRE_UNEXPECTED,      /* a well-formed message this peer did not ask for */
    RUMOR_WIRE_BAD_CODE,        /* a compressed payload that does not decode (codec.h) */
    RUMOR_WIRE_INCOMPATIBLE,    /* from a peer whose terms (terms.h) differ from ours */
    RUMOR_WIRE_OUTLIER,         /* parameters implausibly far from ours (a diverged peer) */
    RUMOR_WIRE_NREJECT
};

/* A decoded header. rumor_wire_encode ignores version and hdr_len (it
 * always writes 1 and 80); rumor_wire_decode fills them from the frame. */
typedef struct rumor_wire_hdr {
    uint8_t version;      /* 1 */
    uint8_t type;         /* enum rumor_wire_type */
    uint16_t flags;       /* RUMOR_WIRE_F_*; unknown ignorable bits kept */
    uint16_t hdr_len;     /* size of frame 0 as received */
    uint8_t dtype;        /* enum rumor_wire_dtype */
    uint32_t chunk;       /* index of this chunk in its sequence (< nchunks) */
    uint32_t nchunks;     /* chunks in the sequence; 0 on control types */
    uint32_t aux;         /* per type: GRADS step, probe/request sequence number */
    uint64_t swarm;       /* rumor_wire_swarm_id of the swarm's name */
    uint64_t sender;      /* rumor_wire_peer_id of the sender's key; never 0 */
    uint64_t incarnation; /* grows each time the sender's process restarts */
    uint64_t round;       /* training round k of x_i(k) */
    uint64_t offset;      /* first element, in the flat parameter space */
    uint64_t length;      /* elements in this chunk */
    uint64_t space;       /* elements in the whole flat parameter space */
} rumor_wire_hdr_t;

/* What a receiver expects; rumor_wire_check judges a header against it. */
typedef struct rumor_wire_expect {
    uint64_t swarm;     /* our swarm id */
    uint64_t space;     /* our model's parameter count */
    uint64_t self;      /* our peer id (0: don't test for FROM_SELF) */
    uint64_t max_chunk; /* largest chunk length accepted, in elements (0: RUMOR_WIRE_CHUNK_DEFAULT) */
    uint32_t dtypes;    /* accepted dtypes, bit (1u << dtype) (0: f32 only) */
    uint32_t max_body;  /* largest body frame in bytes (0: RUMOR_WIRE_MAX_BODY) */
} rumor_wire_expect_t;

/* Counters of one receiver. Not thread-safe: keep one per receiving thread
 * and add them up with rumor_wire_stats_add. rejected[0] is unused. */
typedef struct rumor_wire_stats {
    uint64_t accepted;
    uint64_t rejected[RUMOR_WIRE_NREJECT];
} rumor_wire_stats_t;

/* ---------------------------------------------------------- the header */

/* Writes h as a version 1 header (80 bytes, little-endian, reserved bytes 0).
 * Encodes the fields as given: a sender that wants its message accepted
 * fills them as docs/protocol.md says (decode its own output to be sure). */
void rumor_wire_encode(const rumor_wire_hdr_t *h, uint8_t out[RUMOR_WIRE_HDR_LEN]);

/* Decodes frame 0 of a message (buf, len bytes) into *out and checks every
 * field that needs no context. Returns 0, or -reason (BAD_SIZE, BAD_MAGIC,
 * BAD_VERSION, BAD_HDR_LEN, BAD_TYPE, BAD_FLAGS, BAD_DTYPE, BAD_RESERVED,
 * BAD_CHUNK, BAD_RANGE (offset or length set on a type without a range),
 * BAD_SENDER) with a RUMOR_EPROTO message naming the field and
 * value. Extension bytes after byte 80 (hdr_len == len > 80) are ignored.
 * *out is written only on success. */
int rumor_wire_decode(const void *buf, size_t len, rumor_wire_hdr_t *out);

/* Judges a decoded header and the sizes of the frames after the header
 * (frame_sizes[0..nframes-1]; frame_sizes may be NULL when nframes is 0)
 * against e. Returns 0, or -reason (WRONG_SWARM, WRONG_SPACE, FROM_SELF,
 * BAD_RANGE, EMPTY_CHUNK, CHUNK_TOO_LARGE, UNSUPPORTED_DTYPE, BAD_FRAMES,
 * BAD_PAYLOAD_SIZE, BODY_TOO_LARGE, BAD_TYPE) with a RUMOR_EPROTO message.
 * Round, incarnation, sender and payload values are the caller's to judge. */
int rumor_wire_check(const rumor_wire_hdr_t *h, const rumor_wire_expect_t *e,
                     const size_t *frame_sizes, size_t nframes);

/* ------------------------------------------------------------ payloads */

/* 1 if none of the n little-endian f32 values at p is NaN or +-Inf, else 0
 * (subnormals and -0.0 are finite); n == 0 gives 1. Reads at memory speed.
 * p need not be aligned: libzmq hands out small frames at any byte offset of
 * its receive buffer, so a payload is bytes until copied (hence void *). */
int rumor_wire_payload_finite(const void *p, size_t n);

/* Bytes per element of a dtype (0 for NONE and unknown dtypes). */
size_t rumor_wire_dtype_size(int dtype);

/* The ZMQ_MAXMSGSIZE a peer sets when chunks hold at most chunk_elems f32
 * elements: the largest frame a version 1 peer sends (libzmq applies the
 * bound to each frame): max(chunk bytes, largest header, largest body).
 * 0 when chunk_elems * 4 overflows or exceeds INT64_MAX. */
size_t rumor_wire_max_msg_size(size_t chunk_elems);

/* Number of chunks of at most chunk_elems elements that cover n_elems
 * (0 when n_elems or chunk_elems is 0). */
uint64_t rumor_wire_nchunks(uint64_t n_elems, uint64_t chunk_elems);

/* The range of chunk c: *offset = c * chunk_elems, *length = the rest of
 * n_elems up to chunk_elems. RUMOR_EINVAL (outputs untouched) when
 * c >= nchunks; a caller looping c over [0, nchunks) may ignore the result. */
int rumor_wire_chunk_range(uint64_t n_elems, uint64_t chunk_elems, uint64_t c,
                           uint64_t *offset, uint64_t *length);

/* ------------------------------------------------------------- ids */

/* The peer id of a Curve25519 public key: the first 8 bytes, read LE, of
 * BLAKE2b-128 with personalization "rumor.peer.v1". Never 0 (0 maps to 1). */
uint64_t rumor_wire_peer_id(const uint8_t key[32]);

/* The swarm id of a swarm name: as rumor_wire_peer_id over the name's bytes
 * (no terminator) with personalization "rumor.swarm.v1". Never 0. */
uint64_t rumor_wire_swarm_id(const char *name);

/* Records a rejection as the last error (RUMOR_EPROTO, "wire: REASON:
 * message") and returns -reason, the verdict a judge hands back (for the
 * judges outside this module too: codec.h's payload checks). */
int rumor_wire_reject(int reason, const char *fmt, ...) RUMOR_PRINTF(2, 3);

/* ------------------------------------------------------------- names */

/* "params", "heartbeat", ...; "unknown" for other values. */
const char *rumor_wire_type_name(int type);

/* "bad_magic", "stale_round", ...; accepts reason or -reason; "accept" for
 * 0 and "unknown" outside the enum. */
const char *rumor_wire_reject_name(int reason);

/* --------------------------------------------------------------- stats */

/* Counts a verdict: 0 counts as accepted, reason or -reason as rejected.
 * Returns RUMOR_EINVAL (counting nothing) for a value outside the enum. */
int rumor_wire_stats_count(rumor_wire_stats_t *s, int verdict);

/* Adds the counters of src to dst. */
void rumor_wire_stats_add(rumor_wire_stats_t *dst, const rumor_wire_stats_t *src);

/* The sum of all rejection counters. */
uint64_t rumor_wire_stats_rejected(const rumor_wire_stats_t *s);

/* Formats "accepted=12 bad_magic=3 stale_round=1" (only non-zero reasons)
 * into buf. Returns the length written, or RUMOR_EINVAL when it does not fit
 * (buf then holds a terminated prefix). */
int rumor_wire_stats_format(const rumor_wire_stats_t *s, char *buf, size_t cap);

/* Formats {"accepted":12,"rejected":3,"reasons":{"bad_size":0,...}} with
 * every reason present, for metrics files. Returns as stats_format. */
int rumor_wire_stats_json(const rumor_wire_stats_t *s, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

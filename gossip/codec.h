/* Codecs of compressed gossip (--compress, CHOCO-SGD: Koloskova et al. 2019).
 *
 * A codec turns a range of floats (what a peer sends of a round: in CHOCO,
 * the change x - x_hat that its neighbours have not seen yet) into a
 * payload of fewer bytes, and tells the sender what its neighbours will
 * decode, so that the sender's own copy x_hat moves by exactly that: what
 * was not sent stays in x - x_hat and goes out in later rounds (error
 * feedback). The codecs, each a wire dtype (docs/protocol.md, section 4):
 *
 *   int8     blocks of 256 elements, each an f32 scale (its largest
 *            magnitude / 127) and one signed byte per element in
 *            [-127, 127], rounded to nearest: error <= scale / 2 an element;
 *            4 + 256 bytes a block, 3.94x smaller than f32
 *   int4     the same with 4 bits in [-7, 7] (scale = largest / 7, two
 *            elements a byte, low nibble first, stored as v + 8): 7.53x
 *   int2     the same with 2 bits in [-1, 1] (scale = largest, four
 *            elements a byte, low bits first, stored as v + 2): 15.06x
 *   topk:F   the ceil(F * length) elements of largest magnitude, as
 *            increasing u32 indices then f32 values; the rest are 0
 *   topk:F:bits=B[:chunk=C]
 *            within each chunk of C elements (default 4096), the
 *            ceil(F * C) of largest magnitude: their indices in log2 C
 *            bits, their values in B bits (2, 4 or 8; sign and magnitude
 *            m in [1, 2^(B-1)] times the chunk's f32 scale): 141x for
 *            1.56% in 2 bits
 *   randk:F  ceil(F * length) elements chosen by a seed (selection
 *            sampling, Knuth's algorithm S, so the receiver regenerates the
 *            indices from the seed): a u64 seed then the f32 values
 *
 * The header's aux field carries the number of values of topk and randk
 * (0 for int8, int4 and int2; k | log2 C << 16 | B << 24 for topk with
 * bits), so a receiver knows a payload's size without knowing the
 * sender's F. A receiver judges a payload whole with
 * rumor_codec_check before decoding any of it. */
#ifndef RUMOR_CODEC_H
#define RUMOR_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "compress.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The wire dtype of the codec's payloads (RUMOR_WIRE_DT_F32 for none). */
int rumor_codec_dtype(const rumor_codec_t *c);

/* Values a range of len elements sends: len for int8, int4, int2 and none,
 * max(1, ceil(F * len)) for topk and randk, the chunks' counts summed for
 * topk with bits. */
uint64_t rumor_codec_count(const rumor_codec_t *c, uint64_t len);

/* Bytes of the payload of a range of len elements. */
size_t rumor_codec_bytes(const rumor_codec_t *c, uint64_t len);

/* Bytes a payload of a given dtype, length and aux must have; 0 when no
 * payload can have them (an aux out of [1, len] on a sparse dtype, aux set
 * on a dense one, a length a randk payload cannot index, an unknown
 * dtype). */
size_t rumor_codec_payload_bytes(int dtype, uint64_t len, uint32_t aux);

/* Encodes x[0..len) (finite floats; len < 2^32) into out, which holds
 * rumor_codec_bytes(c, len) bytes; *aux is the header's aux. Writes what a
 * receiver decodes into q[0..len) (q may be x). scratch: len floats for
 * topk (min(len, C) with bits), unused otherwise. seed: randk's choice of elements (the sender
 * picks a new one for every range it sends). RUMOR_EINVAL for a NaN or Inf
 * in x or codec none. */
int rumor_codec_encode(const rumor_codec_t *c, const float *x, size_t len, uint64_t seed,
                       void *out, uint32_t *aux, float *q, float *scratch) RUMOR_WUR;

/* Judges a payload (nbytes at p, any alignment) of `dtype` for a range of
 * len elements with the header's aux, before any of it is used. Returns 0,
 * or the negative of a rumor_wire_reject reason with an RUMOR_EPROTO message:
 * BAD_PAYLOAD_SIZE, NONFINITE (a non-finite scale or value), BAD_CODE
 * (a negative or too large scale, the byte -128, a nibble 0, a 2-bit code
 * 0, padding not 0, topk indices not increasing or past the range or
 * chunk). */
int rumor_codec_check(int dtype, const void *p, size_t nbytes, uint64_t len, uint32_t aux);

/* Decodes a payload that passed rumor_codec_check, in order, a block of
 * elements at a time. */
typedef struct rumor_codec_reader {
    int dtype;
    const uint8_t *p;
    uint64_t len;
    uint32_t aux;
    uint64_t pos;  /* next element */
    uint64_t vi;   /* sparse: next value */
    uint64_t seed; /* randk */
    uint64_t chunk, chunk_first, chunk_k; /* topk with bits: the chunk of value vi, its first
                                           * value and its count */
} rumor_codec_reader_t;

void rumor_codec_reader_init(rumor_codec_reader_t *r, int dtype, const void *p, uint64_t len,
                             uint32_t aux);

/* Writes the next n elements (n <= len - pos) into out. */
void rumor_codec_read(rumor_codec_reader_t *r, float *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif

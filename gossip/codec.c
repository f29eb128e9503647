/* Codecs of compressed gossip (see codec.h). */
#include "codec.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "le.h"
#include "rng.h"
#include "wire.h"

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int rumor_codec_dtype(const rumor_codec_t *c)
{
    switch (c->kind) {
    case RUMOR_CODEC_INT8: return RUMOR_WIRE_DT_Q8;
    case RUMOR_CODEC_INT4: return RUMOR_WIRE_DT_Q4;
    case RUMOR_CODEC_INT2: return RUMOR_WIRE_DT_Q2;
    case RUMOR_CODEC_TOPK: return c->bits ? RUMOR_WIRE_DT_TOPKQ : RUMOR_WIRE_DT_TOPK;
    case RUMOR_CODEC_RANDK: return RUMOR_WIRE_DT_RANDK;
    default: return RUMOR_WIRE_DT_F32;
    }
}

/* ------------------------------------------------------------ topk:F:bits=B
 *
 * A range is cut into chunks of C = 2^c elements (the last one shorter);
 * each chunk sends its k largest magnitudes (k for a whole chunk, and
 * max(1, ceil(k len / C)) for a last chunk of len < C elements). The aux
 * field is k | c << 16 | B << 24. The payload: the chunks' f32 scales, then
 * every value's index within its chunk in c bits, then every value in B
 * bits, each stream packed from bit 0 of its first byte on and padded with
 * 0 bits to a byte. A value is sign-magnitude, the sign in its top bit and
 * m - 1 below it, m in [1, M] with M = 2^(B-1): it decodes as +-m * scale,
 * scale = the chunk's largest magnitude / M. */

struct topkq {
    unsigned k, lc, bits; /* k of a whole chunk, log2 C, bits of a value */
};

static int topkq_of_aux(uint32_t aux, struct topkq *t)
{
    t->k = aux & 0xFFFFu;
    t->lc = (aux >> 16) & 0xFFu;
    t->bits = aux >> 24;
    return t->lc >= 6 && t->lc <= 15 && (t->bits == 2 || t->bits == 4 || t->bits == 8) &&
           t->k >= 1 && t->k <= (1u << t->lc);
}

static uint32_t topkq_aux(const rumor_codec_t *c)
{
    unsigned lc = 0;
    while ((1 << lc) < rumor_codec_chunk(c))
        lc++;
    return rumor_codec_chunk_k(c) | lc << 16 | (uint32_t)c->bits << 24;
}

/* values of a chunk of n elements (n <= C) */
static inline uint64_t topkq_chunk_k(const struct topkq *t, uint64_t n)
{
    uint64_t C = (uint64_t)1 << t->lc;
    if (n >= C)
        return t->k;
    uint64_t k = (t->k * n + C - 1) / C;
    return k < 1 ? 1 : (k > n ? n : k);
}

static uint64_t topkq_values(const struct topkq *t, uint64_t len)
{
    uint64_t C = (uint64_t)1 << t->lc, full = len / C, rest = len % C;
    return full * t->k + (rest ? topkq_chunk_k(t, rest) : 0);
}

static inline void bits_put(uint8_t *p, uint64_t pos, unsigned v, unsigned n)
{
    for (unsigned b = 0; b < n; b++, pos++)
        p[pos >> 3] |= (uint8_t)(((v >> b) & 1u) << (pos & 7));
}

static inline unsigned bits_get(const uint8_t *p, uint64_t pos, unsigned n)
{
    unsigned v = 0;
    for (unsigned b = 0; b < n; b++, pos++)
        v |= ((p[pos >> 3] >> (pos & 7)) & 1u) << b;
    return v;
}

uint64_t rumor_codec_count(const rumor_codec_t *c, uint64_t len)
{
    if (c->kind == RUMOR_CODEC_TOPK && c->bits) {
        struct topkq t;
        (void)topkq_of_aux(topkq_aux(c), &t);
        return topkq_values(&t, len);
    }
    if (c->kind != RUMOR_CODEC_TOPK && c->kind != RUMOR_CODEC_RANDK)
        return len;
    uint64_t k = (uint64_t)ceil(c->frac * (double)len);
    if (k < 1)
        k = 1;
    return k > len ? len : k;
}

static uint64_t nblocks(uint64_t len)
{
    return (len + RUMOR_CODEC_BLOCK - 1) / RUMOR_CODEC_BLOCK;
}

size_t rumor_codec_payload_bytes(int dtype, uint64_t len, uint32_t aux)
{
    if (len == 0 || len >= ((uint64_t)1 << 32))
        return 0;
    switch (dtype) {
    case RUMOR_WIRE_DT_F32: return aux ? 0 : (size_t)len * 4;
    case RUMOR_WIRE_DT_Q8: return aux ? 0 : (size_t)(nblocks(len) * 4 + len);
    case RUMOR_WIRE_DT_Q4: return aux ? 0 : (size_t)(nblocks(len) * 4 + (len + 1) / 2);
    case RUMOR_WIRE_DT_Q2: return aux ? 0 : (size_t)(nblocks(len) * 4 + (len + 3) / 4);
    case RUMOR_WIRE_DT_TOPKQ: {
        struct topkq t;
        if (!topkq_of_aux(aux, &t))
            return 0;
        uint64_t nch = (len + ((uint64_t)1 << t.lc) - 1) >> t.lc, K = topkq_values(&t, len);
        return (size_t)(4 * nch + (K * t.lc + 7) / 8 + (K * t.bits + 7) / 8);
    }
    case RUMOR_WIRE_DT_TOPK: return aux == 0 || aux > len ? 0 : (size_t)aux * 8;
    case RUMOR_WIRE_DT_RANDK: return aux == 0 || aux > len ? 0 : 8 + (size_t)aux * 4;
    default: return 0;
    }
}

size_t rumor_codec_bytes(const rumor_codec_t *c, uint64_t len)
{
    uint64_t k = rumor_codec_count(c, len);
    if (c->kind == RUMOR_CODEC_TOPK && c->bits)
        return rumor_codec_payload_bytes(RUMOR_WIRE_DT_TOPKQ, len, topkq_aux(c));
    return rumor_codec_payload_bytes(rumor_codec_dtype(c), len,
                                     c->kind == RUMOR_CODEC_TOPK || c->kind == RUMOR_CODEC_RANDK
                                         ? (uint32_t)k
                                         : 0);
}

/* ------------------------------------------------------------ encoding */

/* Selection sampling (Knuth, TAOCP 3.4.2, algorithm S): element i of a
 * range of len is taken when a draw in [0, len - i) falls below the count
 * still to take; exactly k are taken, in order, the same on both sides. */
static inline int randk_take(uint64_t seed, uint64_t i, uint64_t len, uint64_t left)
{
    uint64_t r = rumor_mix64(seed + 0x9e3779b97f4a7c15ULL * (i + 1)) >> 32;
    return ((r * (len - i)) >> 32) < left;
}

/* The k-th largest of a[0..n) (1 <= k <= n), reordering a: quickselect
 * with the median of three. */
static float kth_largest(float *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1, want = n - k; /* ascending position */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        float x = a[lo], y = a[mid], z = a[hi];
        float piv = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        size_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < piv)
                i++;
            while (a[j] > piv)
                j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return a[want];
    }
    return a[want];
}

/* int8 (qmax 127), int4 (7) and int2 (1): codes v in [-qmax, qmax], a byte
 * each for int8, else v + qmax + 1 in 4 or 2 bits, low bits first */
static void encode_quant(const float *x, size_t len, int qmax, uint8_t *out, float *q)
{
    size_t nb = (size_t)nblocks(len);
    uint8_t *codes = out + 4 * nb;
    if (qmax == 7)
        memset(codes, 0, (len + 1) / 2);
    else if (qmax == 1)
        memset(codes, 0, (len + 3) / 4);
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * RUMOR_CODEC_BLOCK;
        size_t hi = lo + RUMOR_CODEC_BLOCK < len ? lo + RUMOR_CODEC_BLOCK : len;
        float amax = 0.0f;
        for (size_t i = lo; i < hi; i++) {
            float a = fabsf(x[i]);
            amax = a > amax ? a : amax;
        }
        float scale = amax / (float)qmax;
        float inv = amax > 0.0f ? (float)qmax / amax : 0.0f;
        put32(out + 4 * b, f32_bits(scale));
        for (size_t i = lo; i < hi; i++) {
            long v = lrintf(x[i] * inv);
            v = v > qmax ? qmax : (v < -qmax ? -qmax : v);
            if (qmax == 127)
                codes[i] = (uint8_t)(int8_t)v;
            else if (qmax == 7)
                codes[i / 2] |= (uint8_t)((v + 8) << (4 * (i & 1)));
            else
                codes[i / 4] |= (uint8_t)((v + 2) << (2 * (i & 3)));
            q[i] = (float)v * scale;
        }
    }
}

/* topk:F:bits=B (see above): each chunk's k largest magnitudes (ties: the
 * first ones), in index order */
static void encode_topkq(const rumor_codec_t *c, const float *x, size_t len, uint8_t *o, float *q,
                         float *scratch)
{
    struct topkq t;
    (void)topkq_of_aux(topkq_aux(c), &t);
    size_t C = (size_t)1 << t.lc, nch = (len + C - 1) / C;
    uint64_t K = topkq_values(&t, len);
    uint8_t *ib = o + 4 * nch, *vb = ib + (K * t.lc + 7) / 8;
    memset(ib, 0, (size_t)((K * t.lc + 7) / 8 + (K * t.bits + 7) / 8));
    int M = 1 << (t.bits - 1);
    uint64_t vi = 0;
    for (size_t ch = 0; ch < nch; ch++) {
        size_t lo = ch * C, n = lo + C <= len ? C : len - lo;
        size_t k = (size_t)topkq_chunk_k(&t, n);
        float amax = 0.0f;
        for (size_t i = 0; i < n; i++) {
            scratch[i] = fabsf(x[lo + i]);
            amax = scratch[i] > amax ? scratch[i] : amax;
        }
        float tau = kth_largest(scratch, n, k);
        size_t above = 0;
        for (size_t i = 0; i < n; i++)
            above += fabsf(x[lo + i]) > tau;
        size_t ties = k - above;
        float scale = amax / (float)M;
        float inv = amax > 0.0f ? (float)M / amax : 0.0f;
        put32(o + 4 * ch, f32_bits(scale));
        for (size_t i = 0; i < n; i++) {
            float a = fabsf(x[lo + i]);
            int take = a > tau || (a == tau && ties > 0);
            if (take && a == tau)
                ties--;
            if (!take) {
                q[lo + i] = 0.0f;
                continue;
            }
            long m = lrintf(a * inv);
            m = m < 1 ? 1 : (m > M ? M : m);
            int neg = x[lo + i] < 0.0f;
            bits_put(ib, vi * t.lc, (unsigned)i, t.lc);
            bits_put(vb, vi * t.bits, (unsigned)(neg << (t.bits - 1)) | (unsigned)(m - 1), t.bits);
            q[lo + i] = (float)(neg ? -m : m) * scale;
            vi++;
        }
    }
}

int rumor_codec_encode(const rumor_codec_t *c, const float *x, size_t len, uint64_t seed,
                       void *out, uint32_t *aux, float *q, float *scratch)
{
    if (len == 0 || (uint64_t)len >= ((uint64_t)1 << 32))
        return rumor_err_set(RUMOR_EINVAL, "codec: a range of %zu elements", len);
    for (size_t i = 0; i < len; i++)
        if (!isfinite(x[i]))
            return rumor_err_set(RUMOR_EINVAL, "codec: element %zu is %g", i, (double)x[i]);
    uint8_t *o = out;
    *aux = 0;
    switch (c->kind) {
    case RUMOR_CODEC_INT8: encode_quant(x, len, 127, o, q); return 0;
    case RUMOR_CODEC_INT4: encode_quant(x, len, 7, o, q); return 0;
    case RUMOR_CODEC_INT2: encode_quant(x, len, 1, o, q); return 0;
    case RUMOR_CODEC_TOPK: {
        if (c->bits) {
            if (!scratch)
                return rumor_err_set(RUMOR_EINVAL, "codec: topk needs scratch");
            *aux = topkq_aux(c);
            encode_topkq(c, x, len, o, q, scratch);
            return 0;
        }
        size_t k = (size_t)rumor_codec_count(c, len);
        if (!scratch)
            return rumor_err_set(RUMOR_EINVAL, "codec: topk needs scratch");
        for (size_t i = 0; i < len; i++)
            scratch[i] = fabsf(x[i]);
        float tau = kth_largest(scratch, len, k);
        size_t above = 0;
        for (size_t i = 0; i < len; i++)
            above += fabsf(x[i]) > tau;
        size_t ties = k - above, got = 0; /* elements equal to tau to take, first first */
        uint8_t *vals = o + 4 * k;
        for (size_t i = 0; i < len; i++) {
            float a = fabsf(x[i]);
            int take = a > tau || (a == tau && ties > 0);
            if (take && a == tau)
                ties--;
            if (take) {
                put32(o + 4 * got, (uint32_t)i);
                put32(vals + 4 * got, f32_bits(x[i]));
                got++;
            }
            q[i] = take ? x[i] : 0.0f;
        }
        *aux = (uint32_t)k;
        return 0;
    }
    case RUMOR_CODEC_RANDK: {
        uint64_t k = rumor_codec_count(c, len), got = 0;
        put64(o, seed);
        for (size_t i = 0; i < len; i++) {
            if (got < k && randk_take(seed, i, len, k - got)) {
                put32(o + 8 + 4 * got, f32_bits(x[i]));
                got++;
                q[i] = x[i];
            } else {
                q[i] = 0.0f;
            }
        }
        *aux = (uint32_t)k;
        return 0;
    }
    default: return rumor_err_set(RUMOR_EINVAL, "codec: nothing to encode with 'none'");
    }
}

/* ------------------------------------------------------------ checking */

static int check_scales(const uint8_t *p, uint64_t nb, float smax)
{
    for (uint64_t b = 0; b < nb; b++) {
        float s = f32_of(get32(p + 4 * b));
        if (!isfinite(s))
            return rumor_wire_reject(RUMOR_WIRE_NONFINITE, "scale %llu is %g", (unsigned long long)b,
                       (double)s);
        if (s < 0.0f || s > smax || (s == 0.0f && signbit(s)))
            return rumor_wire_reject(RUMOR_WIRE_BAD_CODE, "scale %llu is %g, outside [0, %g]",
                       (unsigned long long)b, (double)s, (double)smax);
    }
    return 0;
}

/* int4's and int2's codes: `bits` each, v + 2^(bits-1) in 1 .. 2^bits - 1
 * (0 is no code), packed from the low bits of each byte; the bits after
 * the last code 0 */
static inline int check_packed(const uint8_t *codes, uint64_t len, unsigned bits)
{
    const unsigned per = 8 / bits, mask = (1u << bits) - 1;
    uint8_t zero = 0;
    for (uint64_t i = 0; i < len / per; i++)
        for (unsigned e = 0; e < per; e++)
            zero |= ((codes[i] >> (bits * e)) & mask) == 0;
    if (len % per) {
        uint8_t last = codes[len / per];
        unsigned used = (unsigned)(len % per);
        for (unsigned e = 0; e < used; e++)
            zero |= ((last >> (bits * e)) & mask) == 0;
        if (last >> (bits * used))
            return rumor_wire_reject(RUMOR_WIRE_BAD_CODE, "int%u last byte 0x%02x (%u codes in "
                                                          "1..%u, then padding 0)",
                                     bits, (unsigned)last, used, mask);
    }
    if (zero)
        return rumor_wire_reject(RUMOR_WIRE_BAD_CODE, "int%u code 0 (codes are v + %u in 1..%u)",
                                 bits, 1u << (bits - 1), mask);
    return 0;
}

int rumor_codec_check(int dtype, const void *payload, size_t nbytes, uint64_t len, uint32_t aux)
{
    const uint8_t *p = payload;
    size_t want = rumor_codec_payload_bytes(dtype, len, aux);
    if (want == 0 || nbytes != want)
        return rumor_wire_reject(RUMOR_WIRE_BAD_PAYLOAD_SIZE, "payload of %zu bytes for %llu elements of dtype "
                                                "%d with aux %u (%zu expected)",
                   nbytes, (unsigned long long)len, dtype, (unsigned)aux, want);
    switch (dtype) {
    case RUMOR_WIRE_DT_F32:
        if (!rumor_wire_payload_finite(p, len))
            return rumor_wire_reject(RUMOR_WIRE_NONFINITE, "NaN or Inf in an f32 payload");
        return 0;
    case RUMOR_WIRE_DT_Q8: {
        uint64_t nb = nblocks(len);
        int rc = check_scales(p, nb, FLT_MAX / 128.0f);
        if (rc < 0)
            return rc;
        const uint8_t *codes = p + 4 * nb;
        uint8_t seen = 0;
        for (uint64_t i = 0; i < len; i++)
            seen |= codes[i] == 0x80;
        if (seen)
            return rumor_wire_reject(RUMOR_WIRE_BAD_CODE, "int8 code -128 (codes are in [-127, 127])");
        return 0;
    }
    case RUMOR_WIRE_DT_Q4:
    case RUMOR_WIRE_DT_Q2: {
        unsigned bits = dtype == RUMOR_WIRE_DT_Q4 ? 4 : 2;
        uint64_t nb = nblocks(len);
        int rc = check_scales(p, nb, FLT_MAX / (float)(1u << (bits - 1)));
        if (rc < 0)
            return rc;
        return check_packed(p + 4 * nb, len, bits);
    }
    case RUMOR_WIRE_DT_TOPKQ: {
        struct topkq t;
        (void)topkq_of_aux(aux, &t); /* (payload_bytes judged aux) */
        uint64_t C = (uint64_t)1 << t.lc, nch = (len + C - 1) / C, K = topkq_values(&t, len);
        int rc = check_scales(p, nch, FLT_MAX / (float)(2 << (t.bits - 1)));
        if (rc < 0)
            return rc;
        const uint8_t *ib = p + 4 * nch, *vb = ib + (K * t.lc + 7) / 8;
        uint64_t vi = 0;
        for (uint64_t ch = 0; ch < nch; ch++) {
            uint64_t n = (ch + 1) * C <= len ? C : len - ch * C, k = topkq_chunk_k(&t, n);
            uint64_t prev = 0;
            for (uint64_t v = 0; v < k; v++, vi++) {
                uint64_t i = bits_get(ib, vi * t.lc, t.lc);
                if (i >= n || (v > 0 && i <= prev))
                    return rumor_wire_reject(RUMOR_WIRE_BAD_CODE, "topk index %llu of chunk "
                                                                  "%llu (indices increase and "
                                                                  "stay below %llu)",
                                             (unsigned long long)i, (unsigned long long)ch,
                                             (unsigned long long)n);
                prev = i;
            }
        }
        /* padding: the bits after each stream's last one */
        uint64_t ie = K * t.lc, ve = K * t.bits;
        if ((ie & 7) && (ib[ie >> 3] >> (ie & 7)))
            return rumor_wire_reject(RUMOR_WIRE_BAD_CODE, "topk index padding not 0");
        if ((ve & 7) && (vb[ve >> 3] >> (ve & 7)))
            return rumor_wire_reject(RUMOR_WIRE_BAD_CODE, "topk value padding not 0");
        return 0;
    }
    case RUMOR_WIRE_DT_TOPK: {
        uint64_t prev = 0;
        for (uint32_t v = 0; v < aux; v++) {
            uint64_t i = get32(p + 4 * (size_t)v);
            if (i >= len || (v > 0 && i <= prev))
                return rumor_wire_reject(RUMOR_WIRE_BAD_CODE, "topk index %llu at %u (indices increase "
                                                "and stay below %llu)",
                           (unsigned long long)i, (unsigned)v, (unsigned long long)len);
            prev = i;
        }
        if (!rumor_wire_payload_finite(p + 4 * (size_t)aux, aux))
            return rumor_wire_reject(RUMOR_WIRE_NONFINITE, "NaN or Inf in topk values");
        return 0;
    }
    case RUMOR_WIRE_DT_RANDK:
        if (!rumor_wire_payload_finite(p + 8, aux))
            return rumor_wire_reject(RUMOR_WIRE_NONFINITE, "NaN or Inf in randk values");
        return 0;
    default: return rumor_wire_reject(RUMOR_WIRE_BAD_DTYPE, "dtype %d carries no codec", dtype);
    }
}

/* ------------------------------------------------------------ decoding */

void rumor_codec_reader_init(rumor_codec_reader_t *r, int dtype, const void *p, uint64_t len,
                             uint32_t aux)
{
    memset(r, 0, sizeof *r);
    r->dtype = dtype;
    r->p = p;
    r->len = len;
    r->aux = aux;
    if (dtype == RUMOR_WIRE_DT_RANDK)
        r->seed = get64(r->p);
    if (dtype == RUMOR_WIRE_DT_TOPKQ) {
        struct topkq t;
        (void)topkq_of_aux(aux, &t);
        r->chunk_k = topkq_chunk_k(&t, len < ((uint64_t)1 << t.lc) ? len : (uint64_t)1 << t.lc);
    }
}

void rumor_codec_read(rumor_codec_reader_t *r, float *out, size_t n)
{
    const uint8_t *p = r->p;
    uint64_t pos = r->pos;
    switch (r->dtype) {
    case RUMOR_WIRE_DT_F32:
        memcpy(out, p + 4 * pos, n * 4);
        break;
    case RUMOR_WIRE_DT_Q8:
    case RUMOR_WIRE_DT_Q4: {
        uint64_t nb = nblocks(r->len);
        const uint8_t *codes = p + 4 * nb;
        size_t i = 0;
        while (i < n) {
            uint64_t e = pos + i, b = e / RUMOR_CODEC_BLOCK;
            uint64_t bend = (b + 1) * RUMOR_CODEC_BLOCK;
            size_t stop = bend - pos < n ? (size_t)(bend - pos) : n;
            float s = f32_of(get32(p + 4 * b));
            if (r->dtype == RUMOR_WIRE_DT_Q8)
                for (; i < stop; i++)
                    out[i] = (float)(int8_t)codes[pos + i] * s;
            else
                for (; i < stop; i++) {
                    uint64_t el = pos + i;
                    int v = (codes[el / 2] >> (4 * (el & 1))) & 0x0F;
                    out[i] = (float)(v - 8) * s;
                }
        }
        break;
    }
    case RUMOR_WIRE_DT_TOPK: {
        memset(out, 0, n * sizeof *out);
        const uint8_t *vals = p + 4 * (size_t)r->aux;
        while (r->vi < r->aux) {
            uint64_t i = get32(p + 4 * r->vi);
            if (i >= pos + n)
                break;
            out[i - pos] = f32_of(get32(vals + 4 * r->vi));
            r->vi++;
        }
        break;
    }
    case RUMOR_WIRE_DT_Q2: {
        uint64_t nb = nblocks(r->len);
        const uint8_t *codes = p + 4 * nb;
        for (size_t i = 0; i < n; i++) {
            uint64_t el = pos + i;
            int v = (codes[el / 4] >> (2 * (el & 3))) & 3;
            out[i] = (float)(v - 2) * f32_of(get32(p + 4 * (el / RUMOR_CODEC_BLOCK)));
        }
        break;
    }
    case RUMOR_WIRE_DT_TOPKQ: {
        /* values in order: chunk r->chunk's run from r->chunk_first */
        struct topkq t;
        (void)topkq_of_aux(r->aux, &t);
        uint64_t C = (uint64_t)1 << t.lc, nch = (r->len + C - 1) / C, K = topkq_values(&t, r->len);
        const uint8_t *ib = p + 4 * nch, *vb = ib + (K * t.lc + 7) / 8;
        int M = 1 << (t.bits - 1);
        memset(out, 0, n * sizeof *out);
        while (r->vi < K) {
            while (r->vi >= r->chunk_first + r->chunk_k) { /* the next chunk */
                r->chunk_first += r->chunk_k;
                r->chunk++;
                uint64_t lo = r->chunk * C;
                r->chunk_k = topkq_chunk_k(&t, lo + C <= r->len ? C : r->len - lo);
            }
            uint64_t e = r->chunk * C + bits_get(ib, r->vi * t.lc, t.lc);
            if (e >= pos + n)
                break;
            unsigned code = bits_get(vb, r->vi * t.bits, t.bits);
            int m = (int)(code & (unsigned)(M - 1)) + 1;
            float s = f32_of(get32(p + 4 * r->chunk));
            out[e - pos] = (float)((code >> (t.bits - 1)) ? -m : m) * s;
            r->vi++;
        }
        break;
    }
    case RUMOR_WIRE_DT_RANDK:
        for (size_t i = 0; i < n; i++) {
            uint64_t e = pos + i;
            if (r->vi < r->aux && randk_take(r->seed, e, r->len, r->aux - r->vi)) {
                out[i] = f32_of(get32(p + 8 + 4 * r->vi));
                r->vi++;
            } else {
                out[i] = 0.0f;
            }
        }
        break;
    default: memset(out, 0, n * sizeof *out); break;
    }
    r->pos = pos + n;
}

/* Compressed gossip as a plan: which codec a swarm gossips with, its
 * consensus step and keyframe interval, and how many local steps a round
 * holds. The gossip layer encodes and decodes (gossip/codec.h); this part
 * knows what a codec costs (bytes) and how fast CHOCO-SGD's consensus runs
 * with it, so that rumor-topo's cost model can price a plan before a run
 * (cost.h). Base layer only. */
#ifndef RUMOR_TOPO_COMPRESS_H
#define RUMOR_TOPO_COMPRESS_H

#include <stddef.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_CODEC_BLOCK 256        /* elements per scale of int8, int4 and int2 */
#define RUMOR_CODEC_TOPK_CHUNK 4096  /* topk:F:bits=B's default chunk */

enum rumor_codec_kind {
    RUMOR_CODEC_NONE = 0, /* f32, uncompressed */
    RUMOR_CODEC_INT8,
    RUMOR_CODEC_INT4,
    RUMOR_CODEC_TOPK,
    RUMOR_CODEC_RANDK,
    RUMOR_CODEC_INT2
};

typedef struct rumor_codec {
    int kind;    /* enum rumor_codec_kind */
    double frac; /* topk and randk: the share of elements sent, (0, 1] */
    int bits;    /* topk: 0 (u32 indices and f32 values, the whole range), or the bits of
                  * a value (2, 4 or 8), chosen within each chunk of `chunk` elements */
    int chunk;   /* topk with bits: a power of two in [64, 32768] (0: 4096) */
} rumor_codec_t;

/* Parses "none", "int8", "int4", "int2", "topk:F[:bits=B[:chunk=C]]" or
 * "randk:F" (F in (0, 1], e.g. 0.01; also "topk:1%"; B in 2, 4, 8; C a
 * power of two in [64, 32768], default 4096). RUMOR_EINVAL with a message
 * naming the spec and what is valid; *out is written only on success. */
int rumor_codec_parse(const char *spec, rumor_codec_t *out) RUMOR_WUR;

/* "int8", "topk:0.01", ... into buf (always terminated). */
void rumor_codec_format(const rumor_codec_t *c, char *buf, size_t cap);

/* topk:F:bits=B's chunk (4096 when unset). */
int rumor_codec_chunk(const rumor_codec_t *c);
/* topk:F:bits=B's values a whole chunk sends: max(1, ceil(F C)). */
unsigned rumor_codec_chunk_k(const rumor_codec_t *c);

/* f32 bytes / payload bytes of a large range: 3.94 for int8,
 * 7.53 for int4, 15.06 for int2, 1 / (2F) for topk, about
 * 32 / (F (log2 C + B)) for topk:F:bits=B, 1 / F for randk; 1 for none. */
double rumor_codec_ratio(const rumor_codec_t *c);

/* The consensus step gamma that CHOCO-SGD takes with this codec when the
 * user sets none (docs/compression.md says how they were chosen): 1 for
 * none and int8, 0.8 for int4, 0.4 for int2, 2F (at most 1) for topk (with
 * bits or not) and F for randk:
 * a codec that sends a share F of the change needs a step of about F, and
 * diverges with a larger one. */
double rumor_codec_default_gamma(const rumor_codec_t *c);

/* Rounds between full-precision rounds (keyframes, which resynchronize
 * every peer's copies), by default: 16 for int8, 32 for int4, 64 for
 * int2, and for topk
 * and randk the interval at which keyframes cost as much as the
 * compressed rounds between them (at least 16). 0 for none. */
int rumor_codec_default_keyframe(const rumor_codec_t *c);

/* A swarm's gossip plan: the codec, CHOCO's consensus step and keyframe
 * interval (0: the codec's defaults), and optimizer steps per round. */
typedef struct rumor_gossip_plan {
    rumor_codec_t codec;
    double gamma;
    int keyframe_every;
    int local_steps; /* 0 or 1: gossip every step */
    int fragments;   /* 0 or 1: the whole model a round; F: streaming outer steps
                      * (rumor-peer --fragments), 1/F of it a round, every H/F steps */
    int overlap;     /* streaming: steps of a round run while its fragment is away */
} rumor_gossip_plan_t;

/* The plan's bytes a round over f32's: 1 without a codec, else keyframes
 * (f32) one round in R and the codec's share in the others. */
double rumor_gossip_plan_bytes_factor(const rumor_gossip_plan_t *p);
/* The consensus step the plan takes (its own, or the codec's default). */
double rumor_gossip_plan_gamma(const rumor_gossip_plan_t *p);
/* The keyframe interval it uses (0 without a codec). */
int rumor_gossip_plan_keyframe(const rumor_gossip_plan_t *p);
/* "int8, H = 4" and the like into buf. */
void rumor_gossip_plan_format(const rumor_gossip_plan_t *p, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

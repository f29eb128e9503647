/* Compressed gossip as a plan (see compress.h). */
#include "compress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* int2's default consensus step (docs/compression.md: measured on ring:8) */
#define INT2_GAMMA 0.4

int rumor_codec_parse(const char *spec, rumor_codec_t *out)
{
    if (!spec || !out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_codec_parse: NULL argument");
    rumor_codec_t c = { RUMOR_CODEC_NONE, 1.0, 0, 0 };
    if (!strcmp(spec, "none") || !strcmp(spec, "f32")) {
        *out = c;
        return 0;
    }
    if (!strcmp(spec, "int8")) {
        c.kind = RUMOR_CODEC_INT8;
        *out = c;
        return 0;
    }
    if (!strcmp(spec, "int4")) {
        c.kind = RUMOR_CODEC_INT4;
        *out = c;
        return 0;
    }
    if (!strcmp(spec, "int2")) {
        c.kind = RUMOR_CODEC_INT2;
        *out = c;
        return 0;
    }
    const char *arg = NULL;
    if (!strncmp(spec, "topk:", 5)) {
        c.kind = RUMOR_CODEC_TOPK;
        arg = spec + 5;
    } else if (!strncmp(spec, "randk:", 6)) {
        c.kind = RUMOR_CODEC_RANDK;
        arg = spec + 6;
    } else {
        return rumor_err_set(RUMOR_EINVAL, "compression '%s': expected none, int8, int4, "
                                           "int2, topk:F[:bits=B[:chunk=C]] or randk:F (F in "
                                           "(0, 1], e.g. topk:0.01 or topk:0.02:bits=2)",
                             spec);
    }
    char *end;
    double f = strtod(arg, &end);
    if (end != arg && *end == '%') {
        f /= 100.0;
        end++;
    }
    if (end == arg || (*end != '\0' && *end != ':') || !(f > 0.0) || f > 1.0)
        return rumor_err_set(RUMOR_EINVAL, "compression '%s': the share '%.*s' must be a number "
                                           "in (0, 1] (or a percentage like 1%%)",
                             spec, (int)strcspn(arg, ":"), arg);
    c.frac = f;
    /* topk's options: :bits=B (values of B bits within chunks), :chunk=C */
    while (*end == ':') {
        const char *opt = end + 1;
        long v;
        if (c.kind == RUMOR_CODEC_TOPK && !strncmp(opt, "bits=", 5)) {
            v = strtol(opt + 5, &end, 10);
            if (end == opt + 5 || (v != 2 && v != 4 && v != 8))
                return rumor_err_set(RUMOR_EINVAL, "compression '%s': bits must be 2, 4 or 8",
                                     spec);
            c.bits = (int)v;
        } else if (c.kind == RUMOR_CODEC_TOPK && !strncmp(opt, "chunk=", 6)) {
            v = strtol(opt + 6, &end, 10);
            if (end == opt + 6 || v < 64 || v > 32768 || (v & (v - 1)))
                return rumor_err_set(RUMOR_EINVAL, "compression '%s': chunk must be a power "
                                                   "of two in [64, 32768]",
                                     spec);
            c.chunk = (int)v;
        } else {
            return rumor_err_set(RUMOR_EINVAL, "compression '%s': unknown option '%.*s' (topk "
                                               "takes :bits=B and :chunk=C)",
                                 spec, (int)strcspn(opt, ":"), opt);
        }
        if (*end != '\0' && *end != ':')
            return rumor_err_set(RUMOR_EINVAL, "compression '%s': '%s' after a number", spec,
                                 end);
    }
    if (c.chunk && !c.bits)
        return rumor_err_set(RUMOR_EINVAL, "compression '%s': chunk=C goes with bits=B (plain "
                                           "topk:F chooses over the whole range)",
                             spec);
    if (c.bits && !c.chunk)
        c.chunk = RUMOR_CODEC_TOPK_CHUNK;
    *out = c;
    return 0;
}

int rumor_codec_chunk(const rumor_codec_t *c)
{
    return c->chunk > 0 ? c->chunk : RUMOR_CODEC_TOPK_CHUNK;
}

unsigned rumor_codec_chunk_k(const rumor_codec_t *c)
{
    int C = rumor_codec_chunk(c);
    double k = ceil(c->frac * (double)C);
    if (k < 1)
        k = 1;
    return k > C ? (unsigned)C : (unsigned)k;
}

static int log2i(int v)
{
    int b = 0;
    while ((1 << b) < v)
        b++;
    return b;
}

void rumor_codec_format(const rumor_codec_t *c, char *buf, size_t cap)
{
    if (!cap)
        return;
    switch (c->kind) {
    case RUMOR_CODEC_INT8: snprintf(buf, cap, "int8"); break;
    case RUMOR_CODEC_INT4: snprintf(buf, cap, "int4"); break;
    case RUMOR_CODEC_INT2: snprintf(buf, cap, "int2"); break;
    case RUMOR_CODEC_TOPK:
        if (c->bits && rumor_codec_chunk(c) != RUMOR_CODEC_TOPK_CHUNK)
            snprintf(buf, cap, "topk:%g:bits=%d:chunk=%d", c->frac, c->bits, c->chunk);
        else if (c->bits)
            snprintf(buf, cap, "topk:%g:bits=%d", c->frac, c->bits);
        else
            snprintf(buf, cap, "topk:%g", c->frac);
        break;
    case RUMOR_CODEC_RANDK: snprintf(buf, cap, "randk:%g", c->frac); break;
    default: snprintf(buf, cap, "none"); break;
    }
}

double rumor_codec_ratio(const rumor_codec_t *c)
{
    switch (c->kind) {
    case RUMOR_CODEC_INT8: return 4.0 * RUMOR_CODEC_BLOCK / (RUMOR_CODEC_BLOCK + 4.0);
    case RUMOR_CODEC_INT4: return 4.0 * RUMOR_CODEC_BLOCK / (RUMOR_CODEC_BLOCK / 2.0 + 4.0);
    case RUMOR_CODEC_INT2: return 4.0 * RUMOR_CODEC_BLOCK / (RUMOR_CODEC_BLOCK / 4.0 + 4.0);
    case RUMOR_CODEC_TOPK:
        if (c->bits) { /* a chunk: its scale, k indices of log2 C bits, k values of B */
            int C = rumor_codec_chunk(c);
            double k = rumor_codec_chunk_k(c);
            return 4.0 * C / (4.0 + k * (log2i(C) + c->bits) / 8.0);
        }
        return 1.0 / (2.0 * c->frac);
    case RUMOR_CODEC_RANDK: return 1.0 / c->frac;
    default: return 1.0;
    }
}

double rumor_codec_default_gamma(const rumor_codec_t *c)
{
    switch (c->kind) {
    case RUMOR_CODEC_INT4: return 0.8;
    case RUMOR_CODEC_INT2: return INT2_GAMMA;
    case RUMOR_CODEC_TOPK: return c->frac >= 0.5 ? 1.0 : 2.0 * c->frac;
    case RUMOR_CODEC_RANDK: return c->frac;
    default: return 1.0;
    }
}

int rumor_codec_default_keyframe(const rumor_codec_t *c)
{
    switch (c->kind) {
    case RUMOR_CODEC_INT8: return 16;
    case RUMOR_CODEC_INT4: return 32;
    case RUMOR_CODEC_INT2: return 64;
    case RUMOR_CODEC_TOPK:
    case RUMOR_CODEC_RANDK: {
        /* a keyframe (4 bytes an element) every R rounds costs as much as
         * R compressed rounds when R = ratio */
        double r = rumor_codec_ratio(c);
        if (r > 1000.0)
            r = 1000.0;
        return r < 16.0 ? 16 : (int)r;
    }
    default: return 0;
    }
}

double rumor_gossip_plan_bytes_factor(const rumor_gossip_plan_t *p)
{
    if (p->codec.kind == RUMOR_CODEC_NONE)
        return 1.0;
    double r = rumor_gossip_plan_keyframe(p);
    return 1.0 / r + (r - 1.0) / r / rumor_codec_ratio(&p->codec);
}

double rumor_gossip_plan_gamma(const rumor_gossip_plan_t *p)
{
    return p->gamma > 0 ? p->gamma : rumor_codec_default_gamma(&p->codec);
}

int rumor_gossip_plan_keyframe(const rumor_gossip_plan_t *p)
{
    if (p->codec.kind == RUMOR_CODEC_NONE)
        return 0;
    return p->keyframe_every > 0 ? p->keyframe_every : rumor_codec_default_keyframe(&p->codec);
}

void rumor_gossip_plan_format(const rumor_gossip_plan_t *p, char *buf, size_t cap)
{
    char c[48];
    rumor_codec_format(&p->codec, c, sizeof c);
    int h = p->local_steps > 1 ? p->local_steps : 1;
    if (p->fragments > 1 || p->overlap > 0)
        snprintf(buf, cap, "%s, H = %d, F = %d, S = %d", c, h,
                 p->fragments > 1 ? p->fragments : 1, p->overlap);
    else if (h > 1)
        snprintf(buf, cap, "%s, H = %d", c, h);
    else
        snprintf(buf, cap, "%s", c);
}

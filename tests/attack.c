/* A lying peer for the test suite: tests/rumor-attacker is rumor-peer
 * built with RUMOR_ATTACKER, which hands its mixer this tamper hook
 * (mixer.h, tamper). The attacker trains and mixes as an honest peer does,
 * and sends its neighbours, range by range, what RUMOR_ATTACK says:
 *   scale:F   its parameters times F (100: a diverged or buggy peer)
 *   sign      its parameters sign-flipped
 *   noise     Gaussian noise of the same norm, range by range
 *   alie:Z    "a little is enough" (Baruch et al. 2019), as a gossip peer
 *             can play it: its parameters moved back against its own last
 *             round's progress, Z times it (x + Z (x_prev - x)): within a
 *             few steps of the honest spread, always against training
 * rumor-peer itself has no such option. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer.h"

int attack_setup(rumor_mixer_config_t *mc); /* called by rumor_peer.c's main */

enum { SCALE, SIGN, NOISE, ALIE };

static int kind;
static double factor;
/* alie: the last two rounds' parameters, as far as they were sent */
static float *cur, *prev;
static size_t cap;
static long cur_round = -1;
static int have_prev;

/* splitmix64: a generator seeded by (round, offset), so that every
 * neighbour gets the same lie */
static uint64_t mix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return ((double)(mix64(s) >> 11) + 0.5) / 9007199254740992.0;
}

static void tamper(void *arg, long round, uint64_t off, const float *x, float *out, size_t n)
{
    (void)arg;
    if (kind == ALIE) {
        if (off + n > cap) {
            size_t c = off + n;
            float *a = realloc(cur, c * sizeof *a), *b = a ? realloc(prev, c * sizeof *b) : NULL;
            if (!a || !b) {
                memcpy(out, x, n * sizeof *out);
                return;
            }
            memset(a + cap, 0, (c - cap) * sizeof *a);
            memset(b + cap, 0, (c - cap) * sizeof *b);
            cur = a;
            prev = b;
            cap = c;
        }
        if (round != cur_round) { /* a new round: the last one's are the previous */
            float *t = prev;
            prev = cur;
            cur = t;
            have_prev = cur_round >= 0 && round == cur_round + 1;
            cur_round = round;
        }
        memcpy(cur + off, x, n * sizeof *cur);
        for (size_t i = 0; i < n; i++)
            out[i] = have_prev ? x[i] + (float)factor * (prev[off + i] - x[i]) : x[i];
        return;
    }
    if (kind == SCALE || kind == SIGN) {
        float f = kind == SIGN ? -1.0f : (float)factor;
        for (size_t i = 0; i < n; i++)
            out[i] = f * x[i];
        return;
    }
    uint64_t s = (uint64_t)round * 0x100000001b3ULL ^ off;
    double norm = 0, got = 0;
    for (size_t i = 0; i < n; i++) {
        norm += (double)x[i] * x[i];
        double g = sqrt(-2 * log(uniform(&s))) * cos(6.283185307179586 * uniform(&s));
        out[i] = (float)g;
        got += g * g;
    }
    float k = got > 0 ? (float)sqrt(norm / got) : 0.0f;
    for (size_t i = 0; i < n; i++)
        out[i] *= k;
}

int attack_setup(rumor_mixer_config_t *mc)
{
    const char *a = getenv("RUMOR_ATTACK");
    if (!a || !*a) {
        fprintf(stderr, "rumor-attacker: set RUMOR_ATTACK to scale:F, sign, noise or alie:Z\n");
        return -1;
    }
    char *end = NULL;
    if (!strncmp(a, "scale:", 6) && (factor = strtod(a + 6, &end)) != 0 && end && !*end)
        kind = SCALE;
    else if (!strcmp(a, "sign"))
        kind = SIGN;
    else if (!strcmp(a, "noise"))
        kind = NOISE;
    else if (!strncmp(a, "alie:", 5) && (factor = strtod(a + 5, &end)) > 0 && end && !*end)
        kind = ALIE;
    else {
        fprintf(stderr, "rumor-attacker: RUMOR_ATTACK '%s': scale:F, sign, noise or alie:Z\n", a);
        return -1;
    }
    mc->tamper = tamper;
    fprintf(stderr, "rumor-attacker: every range sent is %s\n", a);
    return 0;
}

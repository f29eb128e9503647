/* A lying peer for the test suite: tests/rumor-attacker is rumor-peer
 * built with RUMOR_ATTACKER, which hands its mixer this tamper hook
 * (mixer.h, tamper). The attacker trains and mixes as an honest peer does,
 * and sends its neighbours, range by range, what RUMOR_ATTACK says:
 *   scale:F   its parameters times F (100: a diverged or buggy peer)
 *   sign      its parameters sign-flipped
 *   noise     Gaussian noise of the same norm, range by range
 * rumor-peer itself has no such option. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attack.h"

enum { SCALE, SIGN, NOISE };

static int kind;
static double factor;

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
        fprintf(stderr, "rumor-attacker: set RUMOR_ATTACK to scale:F, sign or noise\n");
        return -1;
    }
    char *end = NULL;
    if (!strncmp(a, "scale:", 6) && (factor = strtod(a + 6, &end)) != 0 && end && !*end)
        kind = SCALE;
    else if (!strcmp(a, "sign"))
        kind = SIGN;
    else if (!strcmp(a, "noise"))
        kind = NOISE;
    else {
        fprintf(stderr, "rumor-attacker: RUMOR_ATTACK '%s': scale:F, sign or noise\n", a);
        return -1;
    }
    mc->tamper = tamper;
    fprintf(stderr, "rumor-attacker: every range sent is %s\n", a);
    return 0;
}

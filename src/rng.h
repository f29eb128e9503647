/* Random numbers keyed by what they are for, never by how often they were
 * drawn before.
 *
 * Dropout and other per-step randomness draw from a counter-based generator
 * (rumor_rand_uniform in ops.h: one uniform per (key, index)). The key of a
 * mask is a hash of (seed, step, micro-batch, block, site): a backward pass run
 * out of order, a recomputation, or the same micro-batch on another stage or
 * backend draws the same mask. */
#ifndef RUMOR_RNG_H
#define RUMOR_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* splitmix64's finalizer: a bijective 64-bit mix. */
static inline uint64_t rumor_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The key of the randomness of (seed, step, micro-batch, block, site); site
 * tells apart the masks of one block (e.g. its two residual dropouts). */
static inline uint64_t rumor_rng_key(uint64_t seed, uint64_t step, uint64_t micro, uint64_t block,
                                     uint64_t site)
{
    uint64_t k = rumor_mix64(seed ^ 0x6b6579ULL); /* "key" */
    k = rumor_mix64(k + 0x9e3779b97f4a7c15ULL * (step + 1));
    k = rumor_mix64(k + 0xc2b2ae3d27d4eb4fULL * (micro + 1));
    k = rumor_mix64(k + 0x165667b19e3779f9ULL * (block + 1));
    return rumor_mix64(k + 0x27d4eb2f165667c5ULL * (site + 1));
}

#ifdef __cplusplus
}
#endif
#endif

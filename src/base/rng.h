/* Random numbers: splitmix64 streams, unbiased bounded draws and seeded
 * permutations (shards, shuffles, windows, initialization, random graphs),
 * and keys for randomness that depends on what it is for, never on how
 * often it was drawn before.
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

/* splitmix64: advances *state and returns the next 64 random bits. */
uint64_t rumor_splitmix64(uint64_t *state);

/* Uniform in [0, bound), bound >= 1: rejects the 2^64 mod bound lowest draws
 * so that every value is equally likely. */
uint64_t rumor_rand_below(uint64_t *state, uint64_t bound);

/* Uniform in [0, 1) with 53 random bits. */
double rumor_rand_unit(uint64_t *state);

/* Writes a seeded uniformly random permutation of [0, n) into out[0..n):
 * Fisher-Yates from the top, driven by splitmix64 with unbiased bounded
 * draws, so the result depends only on (n, seed). n >= 0; RUMOR_EINVAL
 * (err.h) otherwise. */
int rumor_permutation(int n, uint64_t seed, int *out);

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

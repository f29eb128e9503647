/* Random numbers (see rng.h). */
#include "rng.h"

#include "err.h"

uint64_t rumor_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rumor_rand_below(uint64_t *state, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t r = rumor_splitmix64(state);
        if (r >= threshold)
            return r % bound;
    }
}

double rumor_rand_unit(uint64_t *state)
{
    return (double)(rumor_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

int rumor_permutation(int n, uint64_t seed, int *out)
{
    if (n < 0 || (n > 0 && !out))
        return rumor_err_set(RUMOR_EINVAL, "rumor_permutation: n=%d or out NULL", n);
    for (int i = 0; i < n; i++)
        out[i] = i;
    uint64_t s = seed;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rumor_rand_below(&s, (uint64_t)i + 1);
        int t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
    return 0;
}

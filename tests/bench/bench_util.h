/* What the benchmarks share: the median of repeated measurements (these
 * machines drift, so every figure is a median of rounds or of ratios taken
 * round by round). */
#ifndef RUMOR_BENCH_UTIL_H
#define RUMOR_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0, n) (n >= 1), leaving v in its order. */
static inline double bench_median(const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) /* out of memory: the middle sample, unsorted */
        return v[n / 2];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

#endif

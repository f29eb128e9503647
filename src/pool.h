/* A fixed pool of worker threads that run one function together.
 *
 * rumor_pool_run(pool, fn, arg) calls fn(arg, w, n) on every worker w in
 * [0, n) at once, the calling thread being worker 0, and returns when all are
 * done: a fork-join barrier with no allocation, cheap enough to use several
 * times per training step. Pools must not nest, and each worker does its
 * math with one BLAS thread. */
#ifndef RUMOR_POOL_H
#define RUMOR_POOL_H

#include <stddef.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_pool rumor_pool_t;
typedef void (*rumor_pool_fn)(void *arg, int worker, int nworkers);

/* Starts n-1 threads (n >= 1; n == 1 runs everything on the caller). */
int rumor_pool_create(int n, rumor_pool_t **out) RUMOR_WUR;
/* Stops and joins the threads; nulls *pp; safe twice. */
void rumor_pool_destroy(rumor_pool_t **pp);
int rumor_pool_size(const rumor_pool_t *p);
void rumor_pool_run(rumor_pool_t *p, rumor_pool_fn fn, void *arg);

/* The part [lo, hi) of n items that worker w of k takes (even split,
 * aligned to 16 items so workers never share a cache line of floats). */
void rumor_pool_split(size_t n, int w, int k, size_t *lo, size_t *hi);

#ifdef __cplusplus
}
#endif
#endif

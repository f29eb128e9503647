/* Undirected simple graphs in CSR form, and the generators behind the spec
 * strings (ring, torus, grid, hypercube, exponential, complete, star, random
 * regular, Erdős–Rényi, Watts–Strogatz).
 *
 * A graph never holds an n*n matrix: neighbours of node i are
 * adj[off[i] .. off[i+1]), sorted and without repeats or self-loops, so a
 * 65,536-peer graph of degree 16 takes about 5 MB. Sizes are capped
 * (RUMOR_TOPO_MAX_NODES, RUMOR_TOPO_MAX_EDGES) before anything is allocated,
 * so no number read from a spec or file can make the library allocate
 * without bound. Random families are seeded and use their own generator
 * (splitmix64 + xoshiro256**), so every peer that parses "rreg:64:4:seed=1"
 * builds the same graph on any platform. */
#ifndef RUMOR_TOPO_GRAPH_H
#define RUMOR_TOPO_GRAPH_H

#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_TOPO_MAX_NODES (1 << 20)
#define RUMOR_TOPO_MAX_EDGES (1L << 26)

typedef struct rumor_graph {
    int n;     /* nodes 0 .. n-1 */
    long m;    /* undirected edges, each counted once */
    long *off; /* (n+1) */
    int *adj;  /* (2m) neighbour ids, sorted within each node */
} rumor_graph_t;

/* A growable list of edges as read from a file or made by a generator. `line`
 * remembers where each edge came from so that errors found later (a repeated
 * edge with another weight) can name it; 0 when not from a file. */
typedef struct rumor_edges {
    long len, cap;
    int *u, *v;
    double *w;  /* NAN when the edge carries no weight */
    int *line;
} rumor_edges_t;

/* Appends edge u-v; fails with RUMOR_ENOMEM, or RUMOR_EINVAL past
 * RUMOR_TOPO_MAX_EDGES. */
int rumor_edges_add(rumor_edges_t *e, int u, int v, double w, int line) RUMOR_WUR;
void rumor_edges_free(rumor_edges_t *e);

/* Builds the CSR graph on n nodes from an edge list. Repeated edges (either
 * direction) are merged; self-loops and ids outside [0, n) are errors. The
 * caller keeps `e`. On failure *out is NULL. */
int rumor_graph_from_edges(int n, const rumor_edges_t *e, rumor_graph_t **out) RUMOR_WUR;

/* Frees the graph and sets *g to NULL; safe on NULL and twice. */
void rumor_graph_destroy(rumor_graph_t **g);

static inline int rumor_graph_degree(const rumor_graph_t *g, int i)
{
    return (int)(g->off[i + 1] - g->off[i]);
}

/* 1 when i-j is an edge (binary search), else 0. */
int rumor_graph_has_edge(const rumor_graph_t *g, int i, int j);

/* Number of connected components; *unreached (if not NULL) is the smallest
 * node not reachable from node 0, or -1 when the graph is connected. */
int rumor_graph_components(const rumor_graph_t *g, int *unreached);

/* Smallest and largest degree. */
void rumor_graph_degree_range(const rumor_graph_t *g, int *dmin, int *dmax);

/* Checks n against [min_n, RUMOR_TOPO_MAX_NODES] and the edge count against
 * RUMOR_TOPO_MAX_EDGES, with a message naming `what`. */
int rumor_topo_check_size(const char *what, long n, int min_n, double edges) RUMOR_WUR;

/* ---- generators: each returns 0 and a connected graph in *out, or a
 * negative code with a message that names the family and the bad value. */
int rumor_graph_ring(int n, rumor_graph_t **out) RUMOR_WUR;
int rumor_graph_torus(int rows, int cols, rumor_graph_t **out) RUMOR_WUR;
int rumor_graph_grid(int rows, int cols, rumor_graph_t **out) RUMOR_WUR;
int rumor_graph_hypercube(int dim, rumor_graph_t **out) RUMOR_WUR;
/* Undirected static exponential graph: i ~ i +- 2^k (mod n) for 2^k < n. */
int rumor_graph_exp(int n, rumor_graph_t **out) RUMOR_WUR;
int rumor_graph_complete(int n, rumor_graph_t **out) RUMOR_WUR;
int rumor_graph_star(int n, rumor_graph_t **out) RUMOR_WUR;
/* Uniform-ish random d-regular graph (pairing model, then double-edge swaps
 * to remove loops and repeats); retried on fresh streams until connected. */
int rumor_graph_rreg(int n, int d, uint64_t seed, rumor_graph_t **out) RUMOR_WUR;
/* G(n, p) by geometric skipping (O(n + m)); retried until connected. */
int rumor_graph_er(int n, double p, uint64_t seed, rumor_graph_t **out) RUMOR_WUR;
/* Watts–Strogatz: ring lattice with k neighbours (k even), each edge's far
 * end rewired with probability p; retried until connected. */
int rumor_graph_ws(int n, int k, double p, uint64_t seed, rumor_graph_t **out) RUMOR_WUR;

/* ---- the generator's random numbers (stable across platforms) */
typedef struct rumor_topo_rng {
    uint64_t s[4];
} rumor_topo_rng_t;

void rumor_topo_rng_seed(rumor_topo_rng_t *r, uint64_t seed, uint64_t stream);
uint64_t rumor_topo_rng_next(rumor_topo_rng_t *r);
/* Uniform in [0, 1). */
double rumor_topo_rng_unif(rumor_topo_rng_t *r);
/* Uniform integer in [0, bound) without modulo bias; bound > 0. */
uint64_t rumor_topo_rng_below(rumor_topo_rng_t *r, uint64_t bound);
/* Standard normal (Box–Muller). */
double rumor_topo_rng_normal(rumor_topo_rng_t *r);

#ifdef __cplusplus
}
#endif
#endif

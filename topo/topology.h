/* A topology: what a spec string means, for the analyzer and the runtime.
 *
 *   spec := ring:N | torus:RxC | grid:RxC | hypercube:D | exp:N[:directed]
 *         | onepeer-exp:N | complete:N | star:N | rreg:N:D[:seed=S]
 *         | er:N:P[:seed=S] | ws:N:K:P[:seed=S] | base:N:K | file:PATH
 *
 * A topology is a graph plus its mixing matrices: one for a static graph
 * (Metropolis–Hastings by default), `period` of them for a time-varying one
 * (onepeer-exp, base, whose weights are part of the construction). Round k
 * uses matrix k mod period. Every peer that parses the same spec gets the
 * same graph and the same weights, bit for bit.
 *
 * For the runtime: rumor_topo_neighbors() gives peer i's row of W at round
 * k (whom to receive from, with weights), rumor_topo_out_neighbors() whom it
 * sends to, rumor_topo_self_weight() W_ii. */
#ifndef RUMOR_TOPO_TOPOLOGY_H
#define RUMOR_TOPO_TOPOLOGY_H

#include "graph.h"
#include "weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_topo {
    char *spec;              /* the spec string as given */
    char family[16];         /* "ring", "torus", ..., "file" */
    char desc[160];          /* one line for reports: "ring of 16 peers" */
    int n;                   /* peers */
    rumor_graph_t *graph;    /* static graph, or the union over a period */
    int period;              /* 1 for a static topology */
    rumor_mix_t **w;         /* (period) mixing matrices */
    rumor_mix_scheme scheme; /* how w was made */
    int rows, cols;          /* torus/grid shape (drawing), else 0 */
    int time_varying;        /* period > 1 or weights fixed by construction */
} rumor_topo_t;

/* Parses a spec and builds the topology with its default weights. Errors
 * (RUMOR_EINVAL for the spec, RUMOR_EFORMAT/RUMOR_ESYS for files) say what
 * is wrong and where: "rreg:64:5: n*d = 64*5 is odd", "edges.txt:7: ...".
 * On failure *out is NULL. */
int rumor_topo_parse(const char *spec, rumor_topo_t **out) RUMOR_WUR;

/* Replaces the weights: "mh", "maxdeg", "uniform", "bestconst", "fmmc" or
 * "file:PATH" (a weights file; its non-zeros must lie on the graph's edges).
 * Time-varying topologies accept only "file:" (their weights are part of
 * the construction). On failure the old weights stay. */
int rumor_topo_set_weights(rumor_topo_t *t, const char *weights) RUMOR_WUR;

/* Frees t and sets *t to NULL; safe on NULL and twice. */
void rumor_topo_destroy(rumor_topo_t **t);

/* The matrix used at round `round` (>= 0). */
const rumor_mix_t *rumor_topo_mix(const rumor_topo_t *t, long round);

/* Peer `node`'s in-neighbours at round `round`: the j != node with
 * W_node,j != 0, in increasing order, with their weights. Writes at most
 * `cap` of them (nbrs or w may be NULL) and returns how many there are (like
 * snprintf), or RUMOR_EINVAL for a bad node or round. */
int rumor_topo_neighbors(const rumor_topo_t *t, int node, long round, int *nbrs, double *w,
                         int cap);

/* Peer `node`'s out-neighbours at `round`: the j != node with W_j,node != 0
 * (whom it sends to), with W_j,node. Same conventions. */
int rumor_topo_out_neighbors(const rumor_topo_t *t, int node, long round, int *nbrs, double *w,
                             int cap);

/* W_node,node at `round` (NAN for a bad node or round). */
double rumor_topo_self_weight(const rumor_topo_t *t, int node, long round);

/* Reads an edge list or JSON graph (format in docs/rumor-topo.md). *weights
 * gets the user's W when edges carry weights, else NULL. */
int rumor_topo_read_graph(const char *path, rumor_graph_t **g, rumor_mix_t **weights) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

/* CSR graphs: building from edge lists, queries, connectivity, and the
 * seeded random numbers the generators use (see graph.h). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "rng.h"

int rumor_edges_add(rumor_edges_t *e, int u, int v, double w, int line)
{
    if (e->len == e->cap) {
        if (e->cap >= RUMOR_TOPO_MAX_EDGES)
            return rumor_err_set(RUMOR_EINVAL, "more than %ld edges", RUMOR_TOPO_MAX_EDGES);
        long cap = e->cap ? e->cap * 2 : 64;
        if (cap > RUMOR_TOPO_MAX_EDGES)
            cap = RUMOR_TOPO_MAX_EDGES;
        int *nu = realloc(e->u, (size_t)cap * sizeof *nu);
        if (nu)
            e->u = nu;
        int *nv = realloc(e->v, (size_t)cap * sizeof *nv);
        if (nv)
            e->v = nv;
        double *nw = realloc(e->w, (size_t)cap * sizeof *nw);
        if (nw)
            e->w = nw;
        int *nl = realloc(e->line, (size_t)cap * sizeof *nl);
        if (nl)
            e->line = nl;
        if (!nu || !nv || !nw || !nl)
            return rumor_err_set(RUMOR_ENOMEM, "edge list: out of memory at %ld edges", e->len);
        e->cap = cap;
    }
    e->u[e->len] = u;
    e->v[e->len] = v;
    e->w[e->len] = w;
    e->line[e->len] = line;
    e->len++;
    return 0;
}

void rumor_edges_free(rumor_edges_t *e)
{
    if (!e)
        return;
    free(e->u);
    free(e->v);
    free(e->w);
    free(e->line);
    memset(e, 0, sizeof *e);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int rumor_graph_from_edges(int n, const rumor_edges_t *e, rumor_graph_t **out)
{
    *out = NULL;
    if (n < 1 || n > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "graph: %d nodes is outside [1, %d]", n,
                             RUMOR_TOPO_MAX_NODES);
    rumor_graph_t *g = calloc(1, sizeof *g);
    long *deg = calloc((size_t)n + 1, sizeof *deg);
    if (!g || !deg) {
        free(g);
        free(deg);
        return rumor_err_set(RUMOR_ENOMEM, "graph: out of memory (%d nodes)", n);
    }
    for (long k = 0; k < e->len; k++) {
        int u = e->u[k], v = e->v[k];
        if (u < 0 || v < 0 || u >= n || v >= n) {
            free(g);
            free(deg);
            return rumor_err_set(RUMOR_EINVAL, "graph: edge %d-%d names a node outside [0, %d)",
                                 u, v, n);
        }
        if (u == v) {
            free(g);
            free(deg);
            return rumor_err_set(RUMOR_EINVAL, "graph: self-loop on node %d", u);
        }
        deg[u]++;
        deg[v]++;
    }
    g->n = n;
    g->off = malloc(((size_t)n + 1) * sizeof *g->off);
    g->adj = malloc((size_t)(2 * e->len + 1) * sizeof *g->adj);
    if (!g->off || !g->adj) {
        free(deg);
        rumor_graph_destroy(&g);
        return rumor_err_set(RUMOR_ENOMEM, "graph: out of memory (%ld edges)", e->len);
    }
    g->off[0] = 0;
    for (int i = 0; i < n; i++)
        g->off[i + 1] = g->off[i] + deg[i];
    for (int i = 0; i < n; i++)
        deg[i] = g->off[i];
    for (long k = 0; k < e->len; k++) {
        g->adj[deg[e->u[k]]++] = e->v[k];
        g->adj[deg[e->v[k]]++] = e->u[k];
    }
    /* Sort each list and squeeze out repeats in place; off[] is rewritten as
     * we go, so `lo` keeps the old start of the list being squeezed. */
    long w = 0, lo = 0;
    for (int i = 0; i < n; i++) {
        long hi = g->off[i + 1];
        qsort(g->adj + lo, (size_t)(hi - lo), sizeof(int), cmp_int);
        g->off[i] = w;
        for (long k = lo; k < hi; k++)
            if (k == lo || g->adj[k] != g->adj[k - 1])
                g->adj[w++] = g->adj[k];
        lo = hi;
    }
    g->off[n] = w;
    g->m = w / 2;
    free(deg);
    *out = g;
    return 0;
}

void rumor_graph_destroy(rumor_graph_t **gp)
{
    if (!gp || !*gp)
        return;
    free((*gp)->off);
    free((*gp)->adj);
    free(*gp);
    *gp = NULL;
}

int rumor_graph_has_edge(const rumor_graph_t *g, int i, int j)
{
    if (i < 0 || j < 0 || i >= g->n || j >= g->n)
        return 0;
    long lo = g->off[i], hi = g->off[i + 1];
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (g->adj[mid] == j)
            return 1;
        if (g->adj[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

int rumor_graph_components(const rumor_graph_t *g, int *unreached)
{
    int n = g->n, comps = 0;
    int *comp = malloc((size_t)n * sizeof *comp), *queue = malloc((size_t)n * sizeof *queue);
    if (!comp || !queue) {
        free(comp);
        free(queue);
        return rumor_err_set(RUMOR_ENOMEM, "graph: out of memory");
    }
    for (int i = 0; i < n; i++)
        comp[i] = -1;
    if (unreached)
        *unreached = -1;
    for (int s = 0; s < n; s++) {
        if (comp[s] >= 0)
            continue;
        if (comps == 1 && unreached && *unreached < 0)
            *unreached = s;
        int head = 0, tail = 0;
        queue[tail++] = s;
        comp[s] = comps;
        while (head < tail) {
            int u = queue[head++];
            for (long k = g->off[u]; k < g->off[u + 1]; k++)
                if (comp[g->adj[k]] < 0) {
                    comp[g->adj[k]] = comps;
                    queue[tail++] = g->adj[k];
                }
        }
        comps++;
    }
    free(comp);
    free(queue);
    return comps;
}

void rumor_graph_degree_range(const rumor_graph_t *g, int *dmin, int *dmax)
{
    int lo = g->n ? rumor_graph_degree(g, 0) : 0, hi = lo;
    for (int i = 1; i < g->n; i++) {
        int d = rumor_graph_degree(g, i);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    *dmin = lo;
    *dmax = hi;
}

int rumor_topo_check_size(const char *what, long n, int min_n, double edges)
{
    if (n < min_n)
        return rumor_err_set(RUMOR_EINVAL, "%s: %ld peers is too few (at least %d)", what, n,
                             min_n);
    if (n > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "%s: %ld peers is more than the limit of %d", what,
                             n, RUMOR_TOPO_MAX_NODES);
    if (edges > (double)RUMOR_TOPO_MAX_EDGES)
        return rumor_err_set(RUMOR_EINVAL, "%s: %.0f edges is more than the limit of %ld", what,
                             edges, RUMOR_TOPO_MAX_EDGES);
    return 0;
}

/* ---- random numbers: xoshiro256** seeded through splitmix64, so that
 * (seed, stream) pairs give independent, reproducible sequences. */
void rumor_topo_rng_seed(rumor_topo_rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
    for (int i = 0; i < 4; i++)
        r->s[i] = rumor_splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t rumor_topo_rng_next(rumor_topo_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double rumor_topo_rng_unif(rumor_topo_rng_t *r)
{
    return (double)(rumor_topo_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t rumor_topo_rng_below(rumor_topo_rng_t *r, uint64_t bound)
{
    uint64_t lim = -bound % bound; /* 2^64 mod bound: reject below it */
    for (;;) {
        uint64_t x = rumor_topo_rng_next(r);
        if (x >= lim)
            return x % bound;
    }
}

double rumor_topo_rng_normal(rumor_topo_rng_t *r)
{
    double u = rumor_topo_rng_unif(r), v = rumor_topo_rng_unif(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

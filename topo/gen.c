/* Graph generators for the spec families (see graph.h). Deterministic
 * families write their CSR lists directly from a neighbour rule; random ones
 * draw from a seeded stream and retry on the next stream until the graph is
 * connected, so a given (family, parameters, seed) always means the same
 * graph. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* ---- the deterministic families, built straight into CSR
 *
 * A rule writes node i's neighbours (any order, repeats allowed) and the
 * list is sorted and squeezed in place. These graphs are connected by
 * construction, so neither the edge list (20 bytes an edge) nor the
 * connectivity search is needed: at 2^20 peers those were most of the
 * work. */
typedef struct {
    int n, rows, cols, dim;
} rule_t;

typedef int (*rule_fn)(const rule_t *r, int i, int *out);

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* cap: bound on the sum of what the rule writes (2m before merging). */
static int csr_build(const char *what, const rule_t *r, rule_fn rule, long cap,
                     rumor_graph_t **out)
{
    rumor_graph_t *g = calloc(1, sizeof *g);
    if (g) {
        g->off = malloc(((size_t)r->n + 1) * sizeof *g->off);
        g->adj = malloc(((size_t)cap + 1) * sizeof *g->adj);
    }
    if (!g || !g->off || !g->adj) {
        rumor_graph_destroy(&g);
        return rumor_err_set(RUMOR_ENOMEM, "%s: out of memory (%ld neighbour slots)", what, cap);
    }
    g->n = r->n;
    long w = 0;
    g->off[0] = 0;
    for (int i = 0; i < r->n; i++) {
        int *a = g->adj + w, k = rule(r, i, a), sorted = 1;
        for (int x = 1; x < k && sorted; x++)
            sorted = a[x - 1] <= a[x];
        if (!sorted && k > 16)
            qsort(a, (size_t)k, sizeof *a, cmp_int);
        else if (!sorted)
            for (int x = 1; x < k; x++) /* insertion sort: a handful of entries */
                for (int y = x; y > 0 && a[y - 1] > a[y]; y--) {
                    int t = a[y];
                    a[y] = a[y - 1];
                    a[y - 1] = t;
                }
        int kept = 0;
        for (int x = 0; x < k; x++)
            if (a[x] != i && (kept == 0 || a[x] != a[kept - 1]))
                a[kept++] = a[x];
        w += kept;
        g->off[i + 1] = w;
    }
    g->m = w / 2;
    int *adj = realloc(g->adj, ((size_t)w + 1) * sizeof *adj);
    if (adj)
        g->adj = adj;
    *out = g;
    return 0;
}

static int ring_rule(const rule_t *r, int i, int *o)
{
    o[0] = (i + 1) % r->n;
    o[1] = (i + r->n - 1) % r->n;
    return 2;
}

int rumor_graph_ring(int n, rumor_graph_t **out)
{
    *out = NULL;
    RUMOR_CHECK(rumor_topo_check_size("ring", n, 2, n));
    rule_t r = { .n = n };
    return csr_build("ring", &r, ring_rule, 2L * n, out);
}

static int torus_rule(const rule_t *r, int i, int *o)
{
    int R = r->rows, C = r->cols, a = i / C, b = i % C;
    o[0] = a * C + (b + 1) % C;
    o[1] = a * C + (b + C - 1) % C;
    o[2] = ((a + 1) % R) * C + b;
    o[3] = ((a + R - 1) % R) * C + b;
    return 4;
}

int rumor_graph_torus(int r, int c, rumor_graph_t **out)
{
    *out = NULL;
    if (r < 2 || c < 2)
        return rumor_err_set(RUMOR_EINVAL, "torus: %dx%d: both sides must be at least 2", r, c);
    RUMOR_CHECK(rumor_topo_check_size("torus", (long)r * c, 4, 2.0 * r * c));
    rule_t ru = { .n = r * c, .rows = r, .cols = c };
    return csr_build("torus", &ru, torus_rule, 4L * r * c, out);
}

static int grid_rule(const rule_t *r, int i, int *o)
{
    int R = r->rows, C = r->cols, a = i / C, b = i % C, k = 0;
    if (a > 0)
        o[k++] = i - C;
    if (b > 0)
        o[k++] = i - 1;
    if (b + 1 < C)
        o[k++] = i + 1;
    if (a + 1 < R)
        o[k++] = i + C;
    return k;
}

int rumor_graph_grid(int r, int c, rumor_graph_t **out)
{
    *out = NULL;
    if (r < 1 || c < 1)
        return rumor_err_set(RUMOR_EINVAL, "grid: %dx%d: both sides must be at least 1", r, c);
    RUMOR_CHECK(rumor_topo_check_size("grid", (long)r * c, 2, 2.0 * r * c));
    rule_t ru = { .n = r * c, .rows = r, .cols = c };
    return csr_build("grid", &ru, grid_rule, 4L * r * c, out);
}

/* i xor 2^b in increasing order: the set bits cleared from the top, then
 * the clear bits set from the bottom */
static int hypercube_rule(const rule_t *r, int i, int *o)
{
    int k = 0;
    for (int b = r->dim - 1; b >= 0; b--)
        if (i & (1 << b))
            o[k++] = i ^ (1 << b);
    for (int b = 0; b < r->dim; b++)
        if (!(i & (1 << b)))
            o[k++] = i | (1 << b);
    return k;
}

int rumor_graph_hypercube(int dim, rumor_graph_t **out)
{
    *out = NULL;
    if (dim < 1 || dim > 20)
        return rumor_err_set(RUMOR_EINVAL, "hypercube: dimension %d is outside [1, 20]", dim);
    rule_t r = { .n = 1 << dim, .dim = dim };
    return csr_build("hypercube", &r, hypercube_rule, (long)dim << dim, out);
}

static int exp_rule(const rule_t *r, int i, int *o)
{
    int k = 0;
    for (long h = 1; h < r->n; h *= 2) {
        o[k++] = (int)((i + h) % r->n);
        o[k++] = (int)((i + r->n - h) % r->n);
    }
    return k;
}

int rumor_graph_exp(int n, rumor_graph_t **out)
{
    *out = NULL;
    RUMOR_CHECK(rumor_topo_check_size("exp", n, 2, 21.0 * n));
    rule_t r = { .n = n };
    int levels = 0;
    while ((1L << levels) < n)
        levels++;
    return csr_build("exp", &r, exp_rule, 2L * levels * n, out);
}

static int complete_rule(const rule_t *r, int i, int *o)
{
    int k = 0;
    for (int j = 0; j < r->n; j++)
        if (j != i)
            o[k++] = j;
    return k;
}

int rumor_graph_complete(int n, rumor_graph_t **out)
{
    *out = NULL;
    RUMOR_CHECK(rumor_topo_check_size("complete", n, 2, 0.5 * n * (n - 1.0)));
    rule_t r = { .n = n };
    return csr_build("complete", &r, complete_rule, (long)n * (n - 1), out);
}

static int star_rule(const rule_t *r, int i, int *o)
{
    if (i)
        o[0] = 0;
    else
        for (int j = 1; j < r->n; j++)
            o[j - 1] = j;
    return i ? 1 : r->n - 1;
}

int rumor_graph_star(int n, rumor_graph_t **out)
{
    *out = NULL;
    RUMOR_CHECK(rumor_topo_check_size("star", n, 2, n));
    rule_t r = { .n = n };
    return csr_build("star", &r, star_rule, 2L * (n - 1), out);
}

/* ---- an edge multiset (open addressing, counts) for the random families */
typedef struct {
    uint64_t *key; /* (min << 21 | max) + 1; 0 = empty */
    int *cnt;
    uint64_t mask;
} eset_t;

static int eset_init(eset_t *s, long m)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)m * 4)
        cap *= 2;
    s->key = calloc(cap, sizeof *s->key);
    s->cnt = calloc(cap, sizeof *s->cnt);
    s->mask = cap - 1;
    if (!s->key || !s->cnt) {
        free(s->key);
        free(s->cnt);
        return rumor_err_set(RUMOR_ENOMEM, "out of memory for %ld edges", m);
    }
    return 0;
}

static void eset_free(eset_t *s)
{
    free(s->key);
    free(s->cnt);
}

/* The slot of edge u-v (found, or the empty one where it would go). */
static int *eset_slot(eset_t *s, int u, int v)
{
    uint64_t a = (uint64_t)(u < v ? u : v), b = (uint64_t)(u < v ? v : u);
    uint64_t k = (a << 21 | b) + 1, h = (k * 0x9e3779b97f4a7c15ULL) >> 20;
    for (;; h++) {
        h &= s->mask;
        if (s->key[h] == k || s->key[h] == 0) {
            s->key[h] = k; /* slots are never freed: a count of 0 is a tombstone */
            return &s->cnt[h];
        }
    }
}

static int eset_count(eset_t *s, int u, int v)
{
    return *eset_slot(s, u, v);
}

/* One attempt at a random d-regular multigraph made simple by swaps.
 * Returns 1 on success, 0 when the swaps got stuck, negative on error. */
static int rreg_try(int n, int d, rumor_topo_rng_t *r, rumor_edges_t *e)
{
    long m = (long)n * d / 2;
    int *stub = malloc((size_t)(2 * m) * sizeof *stub);
    eset_t s;
    if (!stub)
        return rumor_err_set(RUMOR_ENOMEM, "rreg: out of memory");
    if (eset_init(&s, m) < 0) {
        free(stub);
        return RUMOR_ENOMEM;
    }
    for (long k = 0; k < 2 * m; k++)
        stub[k] = (int)(k / d);
    for (long k = 2 * m - 1; k > 0; k--) {
        long j = (long)rumor_topo_rng_below(r, (uint64_t)k + 1);
        int t = stub[k];
        stub[k] = stub[j];
        stub[j] = t;
    }
    int *u = stub, *v = stub + m; /* edge k is u[k]-v[k] */
    for (long k = 0; k < m; k++)
        (*eset_slot(&s, u[k], v[k]))++;
    int ok = 1;
    for (long k = 0; k < m && ok; k++) {
        long tries = 0;
        while (u[k] == v[k] || eset_count(&s, u[k], v[k]) > 1) {
            if (++tries > 10000) {
                ok = 0;
                break;
            }
            long l = (long)rumor_topo_rng_below(r, (uint64_t)m);
            if (l == k)
                continue;
            int a = u[k], b = v[k], c = u[l], dd = v[l];
            if (rumor_topo_rng_next(r) & 1) {
                c = v[l];
                dd = u[l];
            }
            /* a-b, c-dd  ->  a-c, b-dd */
            if (a == c || b == dd || eset_count(&s, a, c) || eset_count(&s, b, dd) ||
                (a == b && c == dd) || ((a < c ? a : c) == (b < dd ? b : dd) &&
                                        (a < c ? c : a) == (b < dd ? dd : b)))
                continue;
            (*eset_slot(&s, a, b))--;
            (*eset_slot(&s, c, dd))--;
            (*eset_slot(&s, a, c))++;
            (*eset_slot(&s, b, dd))++;
            u[k] = a;
            v[k] = c;
            u[l] = b;
            v[l] = dd;
        }
    }
    /* A swap can re-break an edge fixed earlier only by creating a repeat,
     * which the membership test forbids, so one pass suffices. */
    int rc = ok;
    for (long k = 0; k < m && ok; k++)
        if ((rc = rumor_edges_add(e, u[k], v[k], NAN, 0)) < 0)
            break;
    free(stub);
    eset_free(&s);
    return rc < 0 ? rc : ok;
}

/* Tries stream after stream until `gen` yields a connected graph. */
#define RANDOM_TRIES 100

int rumor_graph_rreg(int n, int d, uint64_t seed, rumor_graph_t **out)
{
    *out = NULL;
    RUMOR_CHECK(rumor_topo_check_size("rreg", n, 2, 0.5 * n * d));
    if (d < 1 || d >= n)
        return rumor_err_set(RUMOR_EINVAL, "rreg: degree %d is outside [1, %d] for %d peers", d,
                             n - 1, n);
    if ((long)n * d % 2)
        return rumor_err_set(RUMOR_EINVAL, "rreg: n*d = %d*%d is odd; no such regular graph", n,
                             d);
    if (d == 1 && n > 2)
        return rumor_err_set(RUMOR_EINVAL, "rreg: a 1-regular graph on %d peers is not connected",
                             n);
    if (d == n - 1)
        return rumor_graph_complete(n, out);
    for (int t = 0; t < RANDOM_TRIES; t++) {
        rumor_topo_rng_t r;
        rumor_topo_rng_seed(&r, seed, (uint64_t)t);
        rumor_edges_t e = { 0 };
        int rc;
        if (d == 2) { /* connected 2-regular = one random cycle */
            int *p = malloc((size_t)n * sizeof *p);
            if (!p)
                return rumor_err_set(RUMOR_ENOMEM, "rreg: out of memory");
            for (int i = 0; i < n; i++)
                p[i] = i;
            for (int i = n - 1; i > 0; i--) {
                int j = (int)rumor_topo_rng_below(&r, (uint64_t)i + 1), x = p[i];
                p[i] = p[j];
                p[j] = x;
            }
            rc = 1;
            for (int i = 0; i < n && rc > 0; i++)
                if (rumor_edges_add(&e, p[i], p[(i + 1) % n], NAN, 0) < 0)
                    rc = RUMOR_ENOMEM;
            free(p);
        } else {
            rc = rreg_try(n, d, &r, &e);
        }
        if (rc < 0) {
            rumor_edges_free(&e);
            return rc;
        }
        if (rc == 0) {
            rumor_edges_free(&e);
            continue;
        }
        rc = rumor_graph_from_edges(n, &e, out);
        rumor_edges_free(&e);
        if (rc < 0)
            return rc;
        if (rumor_graph_components(*out, NULL) == 1)
            return 0;
        rumor_graph_destroy(out);
    }
    return rumor_err_set(RUMOR_EINVAL, "rreg:%d:%d: no connected graph in %d tries", n, d,
                         RANDOM_TRIES);
}

int rumor_graph_er(int n, double p, uint64_t seed, rumor_graph_t **out)
{
    *out = NULL;
    if (!(p > 0 && p <= 1))
        return rumor_err_set(RUMOR_EINVAL, "er: edge probability %g is outside (0, 1]", p);
    RUMOR_CHECK(rumor_topo_check_size("er", n, 2, p * 0.5 * n * (n - 1.0) * 1.1 + 64));
    if (p == 1)
        return rumor_graph_complete(n, out);
    double lq = log1p(-p);
    for (int t = 0; t < RANDOM_TRIES; t++) {
        rumor_topo_rng_t r;
        rumor_topo_rng_seed(&r, seed, (uint64_t)t);
        rumor_edges_t e = { 0 };
        /* Batagelj & Brandes (2005): jump over the absent pairs of the lower
         * triangle by geometric gaps. */
        long v = 1, w = -1;
        while (v < n) {
            double u = rumor_topo_rng_unif(&r);
            double gap = floor(log1p(-u) / lq);
            w += 1 + (gap > 4e18 ? (long)4e18 : (long)gap);
            while (w >= v && v < n) {
                w -= v;
                v++;
            }
            if (v < n) {
                int rc = rumor_edges_add(&e, (int)v, (int)w, NAN, 0);
                if (rc < 0) {
                    rumor_edges_free(&e);
                    return rc;
                }
            }
        }
        int rc = rumor_graph_from_edges(n, &e, out);
        rumor_edges_free(&e);
        if (rc < 0)
            return rc;
        if (rumor_graph_components(*out, NULL) == 1)
            return 0;
        rumor_graph_destroy(out);
    }
    return rumor_err_set(RUMOR_EINVAL,
                         "er:%d:%g: not connected in %d tries (mean degree %.2f; connectivity "
                         "needs about ln n = %.2f): raise p",
                         n, p, RANDOM_TRIES, p * (n - 1), log((double)n));
}

int rumor_graph_ws(int n, int k, double p, uint64_t seed, rumor_graph_t **out)
{
    *out = NULL;
    RUMOR_CHECK(rumor_topo_check_size("ws", n, 3, 0.5 * n * (double)k));
    if (k < 2 || k % 2 || k >= n)
        return rumor_err_set(RUMOR_EINVAL, "ws: k = %d must be even and in [2, %d]", k, n - 1);
    if (!(p >= 0 && p <= 1))
        return rumor_err_set(RUMOR_EINVAL, "ws: rewiring probability %g is outside [0, 1]", p);
    long m = (long)n * (k / 2);
    for (int t = 0; t < RANDOM_TRIES; t++) {
        rumor_topo_rng_t r;
        rumor_topo_rng_seed(&r, seed, (uint64_t)t);
        int *eu = malloc((size_t)m * sizeof *eu), *ev = malloc((size_t)m * sizeof *ev);
        int *deg = malloc((size_t)n * sizeof *deg);
        eset_t s;
        if (!eu || !ev || !deg || eset_init(&s, m) < 0) {
            free(eu);
            free(ev);
            free(deg);
            return rumor_err_set(RUMOR_ENOMEM, "ws: out of memory");
        }
        for (int i = 0; i < n; i++)
            deg[i] = k;
        for (int j = 1; j <= k / 2; j++)
            for (int i = 0; i < n; i++) {
                long id = (long)(j - 1) * n + i;
                eu[id] = i;
                ev[id] = (i + j) % n;
                (*eset_slot(&s, i, (i + j) % n))++;
            }
        /* Rewire the far end of each lattice edge, keeping the graph simple
         * (the construction of Watts & Strogatz 1998, as networkx does it). */
        for (int j = 1; j <= k / 2; j++)
            for (int i = 0; i < n; i++) {
                long id = (long)(j - 1) * n + i;
                if (rumor_topo_rng_unif(&r) >= p || deg[i] >= n - 1)
                    continue;
                int w;
                do
                    w = (int)rumor_topo_rng_below(&r, (uint64_t)n);
                while (w == i || eset_count(&s, i, w));
                (*eset_slot(&s, i, ev[id]))--;
                deg[ev[id]]--;
                ev[id] = w;
                deg[w]++;
                (*eset_slot(&s, i, w))++;
            }
        rumor_edges_t e = { 0 };
        int rc = 0;
        for (long id = 0; id < m && rc >= 0; id++)
            rc = rumor_edges_add(&e, eu[id], ev[id], NAN, 0);
        free(eu);
        free(ev);
        free(deg);
        eset_free(&s);
        if (rc >= 0)
            rc = rumor_graph_from_edges(n, &e, out);
        rumor_edges_free(&e);
        if (rc < 0)
            return rc;
        if (rumor_graph_components(*out, NULL) == 1)
            return 0;
        rumor_graph_destroy(out);
    }
    return rumor_err_set(RUMOR_EINVAL, "ws:%d:%d:%g: not connected in %d tries", n, k, p,
                         RANDOM_TRIES);
}

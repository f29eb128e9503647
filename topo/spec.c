/* Spec strings -> topologies, and the per-peer queries the runtime makes
 * (see topology.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_text.h"
#include "topology.h"

#define SPEC_GRAMMAR                                                                     \
    "ring:N, torus:RxC, grid:RxC, hypercube:D, exp:N[:directed], onepeer-exp:N, "       \
    "complete:N, star:N, rreg:N:D[:seed=S], er:N:P[:seed=S], ws:N:K:P[:seed=S], "       \
    "base:N:K or file:PATH"

void rumor_topo_destroy(rumor_topo_t **tp)
{
    if (!tp || !*tp)
        return;
    rumor_topo_t *t = *tp;
    free(t->spec);
    rumor_graph_destroy(&t->graph);
    rumor_mix_free_seq(&t->w, t->period);
    free(t);
    *tp = NULL;
}

/* An integer spec field in [lo, hi], with a message naming it. */
static int field_int(const char *spec, const char *name, const char *s, long lo, long hi,
                     long *out)
{
    if (rumor_topo_parse_long(s, lo, hi, out) < 0)
        return rumor_err_set(RUMOR_EINVAL, "spec '%s': %s '%s' is not an integer in [%ld, %ld]",
                             spec, name, s, lo, hi);
    return 0;
}

static int field_prob(const char *spec, const char *name, const char *s, double *out)
{
    if (rumor_topo_parse_double(s, out) < 0 || *out < 0 || *out > 1)
        return rumor_err_set(RUMOR_EINVAL, "spec '%s': %s '%s' is not a probability in [0, 1]",
                             spec, name, s);
    return 0;
}

/* "RxC" */
static int field_shape(const char *spec, const char *s, long *r, long *c)
{
    char buf[64];
    const char *x = strchr(s, 'x');
    if (!x || (size_t)(x - s) >= sizeof buf)
        return rumor_err_set(RUMOR_EINVAL, "spec '%s': shape '%s' is not RxC (e.g. 4x8)", spec, s);
    memcpy(buf, s, (size_t)(x - s));
    buf[x - s] = 0;
    RUMOR_CHECK(field_int(spec, "rows", buf, 1, RUMOR_TOPO_MAX_NODES, r));
    RUMOR_CHECK(field_int(spec, "columns", x + 1, 1, RUMOR_TOPO_MAX_NODES, c));
    if (*r * *c > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "spec '%s': %ld peers is more than the limit of %d",
                             spec, *r * *c, RUMOR_TOPO_MAX_NODES);
    return 0;
}

/* The optional trailing "seed=S" of the random families (default 1). */
static int field_seed(const char *spec, char **f, int nf, int at, uint64_t *seed)
{
    *seed = 1;
    if (nf <= at)
        return 0;
    long v;
    if (nf > at + 1 || strncmp(f[at], "seed=", 5) ||
        rumor_topo_parse_long(f[at] + 5, 0, 2147483647L, &v) < 0)
        return rumor_err_set(RUMOR_EINVAL,
                             "spec '%s': expected at most a trailing seed=S (0 <= S < 2^31)",
                             spec);
    *seed = (uint64_t)v;
    return 0;
}

static int nargs(const char *spec, int nf, int lo, int hi, const char *form)
{
    if (nf - 1 < lo || nf - 1 > hi)
        return rumor_err_set(RUMOR_EINVAL, "spec '%s': expected %s", spec, form);
    return 0;
}

/* Builds the graph or sequence for a parsed spec. */
static int build(rumor_topo_t *t, char **f, int nf)
{
    const char *s = t->spec, *fam = f[0];
    long a = 0, b = 0;
    double p;
    uint64_t seed;
    int rc;
    const long MAXN = RUMOR_TOPO_MAX_NODES;
    snprintf(t->family, sizeof t->family, "%s", fam);
    if (!strcmp(fam, "ring")) {
        RUMOR_CHECK(nargs(s, nf, 1, 1, "ring:N"));
        RUMOR_CHECK(field_int(s, "N", f[1], 2, MAXN, &a));
        snprintf(t->desc, sizeof t->desc, "ring of %ld peers", a);
        return rumor_graph_ring((int)a, &t->graph);
    }
    if (!strcmp(fam, "torus") || !strcmp(fam, "grid")) {
        RUMOR_CHECK(nargs(s, nf, 1, 1, "torus:RxC or grid:RxC"));
        RUMOR_CHECK(field_shape(s, f[1], &a, &b));
        t->rows = (int)a;
        t->cols = (int)b;
        snprintf(t->desc, sizeof t->desc, "%ldx%ld %s (%ld peers)", a, b,
                 fam[0] == 't' ? "torus" : "grid", a * b);
        return fam[0] == 't' ? rumor_graph_torus((int)a, (int)b, &t->graph)
                             : rumor_graph_grid((int)a, (int)b, &t->graph);
    }
    if (!strcmp(fam, "hypercube")) {
        RUMOR_CHECK(nargs(s, nf, 1, 1, "hypercube:D"));
        RUMOR_CHECK(field_int(s, "dimension D", f[1], 1, 20, &a));
        snprintf(t->desc, sizeof t->desc, "%ld-dimensional hypercube (%ld peers)", a, 1L << a);
        return rumor_graph_hypercube((int)a, &t->graph);
    }
    if (!strcmp(fam, "exp")) {
        RUMOR_CHECK(nargs(s, nf, 1, 2, "exp:N or exp:N:directed"));
        RUMOR_CHECK(field_int(s, "N", f[1], 2, MAXN, &a));
        if (nf == 3) {
            if (strcmp(f[2], "directed"))
                return rumor_err_set(RUMOR_EINVAL, "spec '%s': expected exp:N or exp:N:directed",
                                     s);
            snprintf(t->desc, sizeof t->desc,
                     "directed static exponential graph, %ld peers (Ying et al. 2021)", a);
            t->time_varying = 1;
            t->scheme = RUMOR_MIX_NATIVE;
            return rumor_mix_exp_directed((int)a, &t->w, &t->period);
        }
        snprintf(t->desc, sizeof t->desc, "exponential graph, %ld peers (i ~ i +- 2^k)", a);
        return rumor_graph_exp((int)a, &t->graph);
    }
    if (!strcmp(fam, "onepeer-exp")) {
        RUMOR_CHECK(nargs(s, nf, 1, 1, "onepeer-exp:N"));
        RUMOR_CHECK(field_int(s, "N", f[1], 2, MAXN, &a));
        t->time_varying = 1;
        t->scheme = RUMOR_MIX_NATIVE;
        rc = rumor_mix_onepeer_exp((int)a, &t->w, &t->period);
        snprintf(t->desc, sizeof t->desc,
                 "one-peer exponential graph, %ld peers, period %d (Ying et al. 2021)", a,
                 t->period);
        return rc;
    }
    if (!strcmp(fam, "complete") || !strcmp(fam, "star")) {
        RUMOR_CHECK(nargs(s, nf, 1, 1, "complete:N or star:N"));
        RUMOR_CHECK(field_int(s, "N", f[1], 2, MAXN, &a));
        snprintf(t->desc, sizeof t->desc, "%s of %ld peers",
                 fam[0] == 'c' ? "complete graph" : "star", a);
        return fam[0] == 'c' ? rumor_graph_complete((int)a, &t->graph)
                             : rumor_graph_star((int)a, &t->graph);
    }
    if (!strcmp(fam, "rreg")) {
        if (nf < 3)
            return nargs(s, nf, 2, 3, "rreg:N:D[:seed=S]");
        RUMOR_CHECK(field_int(s, "N", f[1], 2, MAXN, &a));
        RUMOR_CHECK(field_int(s, "degree D", f[2], 1, MAXN - 1, &b));
        RUMOR_CHECK(field_seed(s, f, nf, 3, &seed));
        snprintf(t->desc, sizeof t->desc, "random %ld-regular graph, %ld peers, seed %llu", b, a,
                 (unsigned long long)seed);
        return rumor_graph_rreg((int)a, (int)b, seed, &t->graph);
    }
    if (!strcmp(fam, "er")) {
        if (nf < 3)
            return nargs(s, nf, 2, 3, "er:N:P[:seed=S]");
        RUMOR_CHECK(field_int(s, "N", f[1], 2, MAXN, &a));
        RUMOR_CHECK(field_prob(s, "P", f[2], &p));
        RUMOR_CHECK(field_seed(s, f, nf, 3, &seed));
        snprintf(t->desc, sizeof t->desc, "Erdos-Renyi G(%ld, %g), seed %llu", a, p,
                 (unsigned long long)seed);
        return rumor_graph_er((int)a, p, seed, &t->graph);
    }
    if (!strcmp(fam, "ws")) {
        if (nf < 4)
            return nargs(s, nf, 3, 4, "ws:N:K:P[:seed=S]");
        RUMOR_CHECK(field_int(s, "N", f[1], 3, MAXN, &a));
        RUMOR_CHECK(field_int(s, "K", f[2], 2, MAXN - 1, &b));
        RUMOR_CHECK(field_prob(s, "P", f[3], &p));
        RUMOR_CHECK(field_seed(s, f, nf, 4, &seed));
        snprintf(t->desc, sizeof t->desc, "Watts-Strogatz, %ld peers, k = %ld, p = %g, seed %llu",
                 a, b, p, (unsigned long long)seed);
        return rumor_graph_ws((int)a, (int)b, p, seed, &t->graph);
    }
    if (!strcmp(fam, "base")) {
        RUMOR_CHECK(nargs(s, nf, 2, 2, "base:N:K"));
        RUMOR_CHECK(field_int(s, "N", f[1], 2, MAXN, &a));
        RUMOR_CHECK(field_int(s, "degree K", f[2], 1, MAXN - 1, &b));
        t->time_varying = 1;
        t->scheme = RUMOR_MIX_NATIVE;
        rc = rumor_mix_base((int)a, (int)b, &t->w, &t->period);
        snprintf(t->desc, sizeof t->desc,
                 "Base-(%ld+1) graph, %ld peers, degree <= %ld, period %d (Takezawa et al. 2023)",
                 b, a, b, t->period);
        return rc;
    }
    return rumor_err_set(RUMOR_EINVAL, "spec '%s': unknown family '%s' (expected " SPEC_GRAMMAR
                         ")", s, fam);
}

int rumor_topo_parse(const char *spec, rumor_topo_t **out)
{
    *out = NULL;
    if (!spec || !*spec)
        return rumor_err_set(RUMOR_EINVAL, "empty topology spec (expected " SPEC_GRAMMAR ")");
    if (strlen(spec) > 4096)
        return rumor_err_set(RUMOR_EINVAL, "topology spec longer than 4096 bytes");
    rumor_topo_t *t = calloc(1, sizeof *t);
    if (!t || !(t->spec = strdup(spec))) {
        free(t);
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    }
    t->scheme = RUMOR_MIX_MH;
    int rc;
    rumor_mix_t *uw = NULL;
    if (!strncmp(spec, "file:", 5)) {
        snprintf(t->family, sizeof t->family, "file");
        snprintf(t->desc, sizeof t->desc, "graph from %.140s", spec + 5);
        rc = rumor_topo_read_graph(spec + 5, &t->graph, &uw);
    } else {
        char buf[4097], *f[8];
        snprintf(buf, sizeof buf, "%s", spec);
        int nf = 0;
        for (char *p = buf, *q; p && nf < 7; p = q) {
            q = strchr(p, ':');
            if (q)
                *q++ = 0;
            f[nf++] = p;
            if (q && nf == 7)
                nf = 8; /* too many fields */
        }
        if (nf > 7 || !f[0][0])
            rc = rumor_err_set(RUMOR_EINVAL, "spec '%s': expected " SPEC_GRAMMAR, spec);
        else
            rc = build(t, f, nf);
    }
    if (rc >= 0 && t->graph && !t->w) {
        /* a static graph: its weights, the user's or Metropolis–Hastings */
        t->w = calloc(1, sizeof *t->w);
        t->period = 1;
        if (!t->w)
            rc = rumor_err_set(RUMOR_ENOMEM, "out of memory");
        else if (uw) {
            t->w[0] = uw;
            uw = NULL;
            t->scheme = RUMOR_MIX_FILE;
        } else {
            rc = rumor_mix_from_graph(t->graph, RUMOR_MIX_MH, &t->w[0]);
        }
    } else if (rc >= 0 && !t->graph) {
        rc = rumor_mix_support(t->w, t->period, &t->graph);
    }
    rumor_mix_destroy(&uw);
    if (rc < 0) {
        rumor_topo_destroy(&t);
        return rc;
    }
    t->n = t->graph->n;
    *out = t;
    return 0;
}

int rumor_topo_set_weights(rumor_topo_t *t, const char *weights)
{
    if (!weights || !*weights)
        return rumor_err_set(RUMOR_EINVAL, "empty weights name");
    rumor_mix_t **w = NULL;
    int period = 1, rc;
    rumor_mix_scheme s = RUMOR_MIX_FILE;
    if (!strncmp(weights, "file:", 5)) {
        const char *path = weights + 5;
        RUMOR_CHECK(rumor_mix_load(path, &w, &period));
        if (w[0]->n != t->n) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s: weights for %d peers, but %s has %d", path,
                               w[0]->n, t->spec, t->n);
            rumor_mix_free_seq(&w, period);
            return rc;
        }
        for (int k = 0; k < period; k++) {
            int bi, bj;
            if (!rumor_mix_on_graph(w[k], t->graph, &bi, &bj)) {
                rc = rumor_err_set(RUMOR_EINVAL,
                                   "%s: W(%d,%d) is non-zero but %d-%d is not a link of %s", path,
                                   bi, bj, bi, bj, t->spec);
                rumor_mix_free_seq(&w, period);
                return rc;
            }
        }
    } else {
        RUMOR_CHECK(rumor_mix_parse_scheme(weights, &s));
        if (t->time_varying)
            return rumor_err_set(RUMOR_EINVAL,
                                 "%s: the weights of a time-varying topology are part of its "
                                 "construction; '%s' does not apply (only file:PATH)",
                                 t->spec, weights);
        w = calloc(1, sizeof *w);
        if (!w)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory");
        rc = rumor_mix_from_graph(t->graph, s, &w[0]);
        if (rc < 0) {
            free(w);
            return rumor_err_prefix(rc, "%s", t->spec);
        }
    }
    rumor_mix_free_seq(&t->w, t->period);
    t->w = w;
    t->period = period;
    t->scheme = s;
    return 0;
}

const rumor_mix_t *rumor_topo_mix(const rumor_topo_t *t, long round)
{
    if (!t || round < 0)
        return NULL;
    return t->w[round % t->period];
}

int rumor_topo_neighbors(const rumor_topo_t *t, int node, long round, int *nbrs, double *w,
                         int cap)
{
    const rumor_mix_t *m = rumor_topo_mix(t, round);
    if (!m || node < 0 || node >= t->n)
        return rumor_err_set(RUMOR_EINVAL, "neighbors: bad peer %d or round %ld", node, round);
    int cnt = 0;
    for (long p = m->off[node]; p < m->off[node + 1]; p++) {
        if (m->val[p] == 0)
            continue;
        if (cnt < cap) {
            if (nbrs)
                nbrs[cnt] = m->col[p];
            if (w)
                w[cnt] = m->val[p];
        }
        cnt++;
    }
    return cnt;
}

int rumor_topo_out_neighbors(const rumor_topo_t *t, int node, long round, int *nbrs, double *w,
                             int cap)
{
    const rumor_mix_t *m = rumor_topo_mix(t, round);
    if (!m || node < 0 || node >= t->n)
        return rumor_err_set(RUMOR_EINVAL, "out_neighbors: bad peer %d or round %ld", node, round);
    /* whoever receives from `node` is a neighbour in the union graph */
    const rumor_graph_t *g = t->graph;
    int cnt = 0;
    for (long q = g->off[node]; q < g->off[node + 1]; q++) {
        int j = g->adj[q];
        long lo = m->off[j], hi = m->off[j + 1];
        while (lo < hi) {
            long mid = lo + (hi - lo) / 2;
            if (m->col[mid] < node)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < m->off[j + 1] && m->col[lo] == node && m->val[lo] != 0) {
            if (cnt < cap) {
                if (nbrs)
                    nbrs[cnt] = j;
                if (w)
                    w[cnt] = m->val[lo];
            }
            cnt++;
        }
    }
    return cnt;
}

double rumor_topo_self_weight(const rumor_topo_t *t, int node, long round)
{
    const rumor_mix_t *m = rumor_topo_mix(t, round);
    if (!m || node < 0 || node >= t->n)
        return NAN;
    return m->diag[node];
}

/* Fuzz target: topology spec strings (topo/topology.h).
 *
 * Input: "SPEC" or "SPEC\nWEIGHTS". rumor_topo_parse(SPEC); when it builds a
 * topology, every peer's in- and out-neighbours and self-weight at the first
 * rounds of the period, checked against what topology.h promises (rows of W
 * sum to 1, out-neighbours mirror in-neighbours), then, on small graphs,
 * rumor_topo_set_weights(WEIGHTS).
 *
 * Skipped, because other targets or the budget cover them:
 *   - "file:" specs and weights: fuzz_topo_file feeds files; here a path from
 *     the input could name /dev/stdin or a FIFO and block.
 *   - specs whose integers could make a graph beyond the budget below. The
 *     library's own caps are RUMOR_TOPO_MAX_NODES peers and
 *     RUMOR_TOPO_MAX_EDGES edges (graph.h); a spec at those caps is allowed
 *     to take seconds and gigabytes (rreg:1048576:64: 41 s, 2.5 GB), which
 *     libFuzzer would report as a timeout or out-of-memory.
 *   - WEIGHTS on graphs above 64 peers: bestconst and fmmc need the spectrum
 *     and "may take seconds on large graphs" (weights.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "topology.h"

#define MAX_SPEC_BYTES 4096       /* rumor_topo_parse refuses longer specs itself */
#define MAX_INT 1024         /* each integer of the spec */
#define MAX_PRODUCT 65536    /* their product: rows x cols, peers x degree */
#define MAX_HYPERCUBE 16     /* 2^16 peers */
#define MAX_QUERY_PEERS 4096 /* peers whose rows are checked */
#define MAX_WEIGHTS_PEERS 64

static void fail(const char *spec, const char *what)
{
    fprintf(stderr, "fuzz_topo_spec: '%s': %s\n", spec, what);
    abort();
}

/* 1 when the spec's integers stay within the budget. Runs of digits right
 * after '.', 'e', 'E' or '=' belong to a probability or a seed and do not
 * count; every other run counts (an overestimate is only a skipped input). */
static int within_budget(const char *spec)
{
    double product = 1;
    int hyper = !strncmp(spec, "hypercube", 9);
    for (const char *p = spec; *p;) {
        if (*p < '0' || *p > '9') {
            p++;
            continue;
        }
        char before = p > spec ? p[-1] : ':';
        long v = 0;
        for (; *p >= '0' && *p <= '9'; p++)
            if (v <= 1000000000L)
                v = v * 10 + (*p - '0');
        if (before == '.' || before == 'e' || before == 'E' || before == '=')
            continue;
        if (v > MAX_INT || (hyper && v > MAX_HYPERCUBE))
            return 0;
        product *= v > 1 ? (double)v : 1.0;
        if (product > MAX_PRODUCT)
            return 0;
    }
    return 1;
}

/* Peer i's row at round k: in-neighbours sorted, weights finite, the row
 * (self-weight included) summing to 1; for the first peers, every
 * in-neighbour j of i has i among its out-neighbours with the same weight. */
static void check_rows(const rumor_topo_t *t, long k, int *nb, double *w, int *onb, double *ow)
{
    const char *s = t->spec;
    for (int i = 0; i < t->n && i < MAX_QUERY_PEERS; i++) {
        int c = rumor_topo_neighbors(t, i, k, NULL, NULL, 0);
        if (c < 0 || c >= t->n)
            fail(s, "neighbour count out of range");
        if (rumor_topo_neighbors(t, i, k, nb, w, t->n) != c)
            fail(s, "neighbour count changed with the buffer");
        double sum = rumor_topo_self_weight(t, i, k);
        if (!isfinite(sum))
            fail(s, "self-weight not finite");
        for (int q = 0; q < c; q++) {
            if (nb[q] < 0 || nb[q] >= t->n || nb[q] == i || (q > 0 && nb[q] <= nb[q - 1]))
                fail(s, "neighbours not sorted, repeated, self or out of range");
            if (!isfinite(w[q]) || w[q] == 0)
                fail(s, "neighbour weight zero or not finite");
            sum += w[q];
        }
        if (fabs(sum - 1) > 1e-9)
            fail(s, "row of W does not sum to 1");
        /* the mirror: i is an out-neighbour of each in-neighbour, same weight */
        for (int q = 0; q < c && q < 8 && i < 64; q++) {
            int j = nb[q];
            int oc = rumor_topo_out_neighbors(t, j, k, onb, ow, t->n);
            int found = 0;
            for (int r = 0; r < oc && !found; r++)
                found = onb[r] == i && ow[r] == w[q];
            if (oc < 0 || !found)
                fail(s, "in-neighbour j of i does not list i as an out-neighbour");
        }
    }
    if (rumor_topo_neighbors(t, -1, k, NULL, NULL, 0) >= 0 ||
        rumor_topo_neighbors(t, t->n, k, NULL, NULL, 0) >= 0 ||
        rumor_topo_out_neighbors(t, t->n, k, NULL, NULL, 0) >= 0 ||
        !isnan(rumor_topo_self_weight(t, t->n, k)))
        fail(s, "a bad peer was accepted");
}

static void check_topology(const rumor_topo_t *t)
{
    const char *s = t->spec;
    if (t->n < 2 || t->n > RUMOR_TOPO_MAX_NODES || !t->graph || t->graph->n != t->n ||
        t->period < 1 || !t->w)
        fail(s, "topology with a bad size, graph or period");
    if (rumor_graph_components(t->graph, NULL) != 1)
        fail(s, "graph not connected");
    if (rumor_topo_mix(t, -1) != NULL)
        fail(s, "a negative round was accepted");
    int *nb = malloc(2 * (size_t)t->n * sizeof *nb);
    double *w = malloc(2 * (size_t)t->n * sizeof *w);
    if (!nb || !w)
        fail(s, "out of memory in the harness");
    for (long k = 0; k < t->period && k < 3; k++)
        check_rows(t, k, nb, w, nb + t->n, w + t->n);
    if (t->period > 3)
        check_rows(t, t->period - 1, nb, w, nb + t->n, w + t->n);
    free(nb);
    free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_SPEC_BYTES)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *weights = strchr(buf, '\n');
    if (weights)
        *weights++ = '\0';
    if (!strncmp(buf, "file:", 5) || !within_budget(buf)) {
        free(buf);
        return 0;
    }
    rumor_topo_t *t = NULL;
    int rc = rumor_topo_parse(buf, &t);
    if (rc < 0 && t)
        fail(buf, "failed parse left a topology");
    if (rc == 0 && !t)
        fail(buf, "successful parse left no topology");
    if (t) {
        if (strcmp(t->spec, buf))
            fail(buf, "spec not kept as given");
        check_topology(t);
        if (weights && t->n <= MAX_WEIGHTS_PEERS && strncmp(weights, "file:", 5)) {
            int period = t->period;
            rumor_mix_t **old = t->w;
            if (rumor_topo_set_weights(t, weights) == 0)
                check_topology(t);
            else if (t->w != old || t->period != period)
                fail(buf, "failed set_weights changed the weights");
        }
    }
    rumor_topo_destroy(&t);
    rumor_topo_destroy(&t); /* safe twice */
    free(buf);
    return 0;
}

/* Graph families and spec strings: sizes and degrees of every family,
 * seeded determinism, connectivity, the per-peer queries the runtime uses,
 * and bad specs rejected with a message naming the problem. */
#include "config.h"

#include "topology.h"
#include "blas_tune.h"
#include "testutil.h"

static rumor_topo_t *parse(const char *spec)
{
    rumor_topo_t *t = NULL;
    if (rumor_topo_parse(spec, &t) < 0)
        fprintf(stderr, "parse %s: %s\n", spec, rumor_err_msg());
    return t;
}

/* n, edges, degree range of a spec. */
static void check_shape(const char *spec, int n, long m, int dmin, int dmax)
{
    rumor_topo_t *t = parse(spec);
    CHECKF(t != NULL, "%s", spec);
    if (!t)
        return;
    int lo, hi;
    rumor_graph_degree_range(t->graph, &lo, &hi);
    CHECKF(t->n == n && t->graph->m == m && lo == dmin && hi == dmax,
           "%s: n %d m %ld degree %d..%d, expected %d %ld %d..%d", spec, t->n, t->graph->m, lo,
           hi, n, m, dmin, dmax);
    CHECK(rumor_graph_components(t->graph, NULL) == 1);
    /* CSR invariants: sorted, no self-loops, symmetric */
    int ok = 1;
    for (int i = 0; i < t->n; i++)
        for (long p = t->graph->off[i]; p < t->graph->off[i + 1]; p++) {
            int j = t->graph->adj[p];
            if (j == i || (p > t->graph->off[i] && t->graph->adj[p - 1] >= j) ||
                !rumor_graph_has_edge(t->graph, j, i))
                ok = 0;
        }
    CHECKF(ok, "%s: adjacency not sorted/simple/symmetric", spec);
    rumor_topo_destroy(&t);
    CHECK(t == NULL);
    rumor_topo_destroy(&t); /* safe twice */
}

static void test_families(void)
{
    check_shape("ring:16", 16, 16, 2, 2);
    check_shape("ring:2", 2, 1, 1, 1);
    check_shape("torus:4x4", 16, 32, 4, 4);
    check_shape("torus:2x5", 10, 15, 3, 3); /* the 2-wrap merges into one edge */
    check_shape("grid:4x8", 32, 4 * 7 + 3 * 8, 2, 4);
    check_shape("hypercube:5", 32, 80, 5, 5);
    check_shape("exp:32", 32, 32 * 9 / 2, 9, 9); /* +-1,2,4,8 and 16 once */
    check_shape("exp:12", 12, 36, 6, 6); /* +-1, +-2, +-4; +-8 = -+4 adds nothing */
    check_shape("complete:8", 8, 28, 7, 7);
    check_shape("star:8", 8, 7, 1, 7);
    check_shape("rreg:64:4:seed=1", 64, 128, 4, 4);
    check_shape("rreg:1000:3", 1000, 1500, 3, 3);
    check_shape("rreg:50:2:seed=9", 50, 50, 2, 2);
    check_shape("rreg:10:9", 10, 45, 9, 9);
    check_shape("ws:64:4:0:seed=1", 64, 128, 4, 4); /* p = 0: the ring lattice */
    /* onepeer-exp:8: union of i~i+1, i+2, i+4 */
    check_shape("onepeer-exp:8", 8, 8 + 8 + 4, 5, 5);
}

static void test_random(void)
{
    /* same spec, same graph; another seed, another graph */
    rumor_topo_t *a = parse("rreg:200:4:seed=7"), *b = parse("rreg:200:4:seed=7");
    rumor_topo_t *c = parse("rreg:200:4:seed=8");
    CHECK(a && b && c);
    if (a && b && c) {
        CHECK(!memcmp(a->graph->adj, b->graph->adj, sizeof(int) * 800));
        CHECK(memcmp(a->graph->adj, c->graph->adj, sizeof(int) * 800) != 0);
    }
    rumor_topo_destroy(&a), rumor_topo_destroy(&b), rumor_topo_destroy(&c);
    /* G(n, p): the edge count is near p n(n-1)/2 */
    a = parse("er:2000:0.01:seed=3");
    CHECK(a != NULL);
    if (a) {
        double mean = 0.01 * 2000 * 1999 / 2, sd = sqrt(mean);
        CHECKF(fabs((double)a->graph->m - mean) < 5 * sd, "er edges %ld vs %g", a->graph->m, mean);
    }
    rumor_topo_destroy(&a);
    /* Watts–Strogatz keeps the edge count, and rewiring spreads degrees */
    a = parse("ws:500:6:0.3:seed=2");
    CHECK(a && a->graph->m == 1500);
    int lo, hi;
    if (a) {
        rumor_graph_degree_range(a->graph, &lo, &hi);
        CHECK(lo < 6 && hi > 6);
    }
    rumor_topo_destroy(&a);
    /* a large random regular graph builds quickly and connected */
    a = parse("rreg:65536:4:seed=1");
    CHECK(a && a->graph->m == 131072);
    rumor_topo_destroy(&a);
}

/* The queries rumor-peer makes, against the MH formula computed here. */
static void test_neighbors(void)
{
    rumor_topo_t *t = parse("star:6");
    int nb[8];
    double w[8];
    CHECK(rumor_topo_neighbors(t, 0, 0, nb, w, 8) == 5);
    CHECK(nb[0] == 1 && nb[4] == 5);
    CHECK_CLOSE(w[0], 1.0 / 6, 1e-15, 0); /* 1/(1+max(5,1)) */
    CHECK_CLOSE(rumor_topo_self_weight(t, 0, 0), 1.0 / 6, 1e-15, 0);
    CHECK_CLOSE(rumor_topo_self_weight(t, 3, 7), 5.0 / 6, 1e-15, 0);
    CHECK(rumor_topo_neighbors(t, 3, 123456789L, nb, w, 8) == 1 && nb[0] == 0);
    CHECK(rumor_topo_neighbors(t, 0, 0, nb, w, 2) == 5); /* count even when capped */
    CHECK(rumor_mix_mh_weight(5, 1) == w[0]);
    CHECK_ERR(rumor_topo_neighbors(t, 6, 0, nb, w, 8), RUMOR_EINVAL, "bad peer 6");
    CHECK_ERR(rumor_topo_neighbors(t, -1, 0, nb, w, 8), RUMOR_EINVAL, "bad peer");
    CHECK_ERR(rumor_topo_neighbors(t, 0, -1, nb, w, 8), RUMOR_EINVAL, "round -1");
    CHECK(isnan(rumor_topo_self_weight(t, 99, 0)));
    rumor_topo_destroy(&t);
    /* directed: whom peer i receives from and whom it sends to differ */
    t = parse("onepeer-exp:16");
    CHECK(t && t->period == 4);
    if (t) {
        CHECK(rumor_topo_neighbors(t, 3, 2, nb, w, 8) == 1 && nb[0] == 7 && w[0] == 0.5);
        CHECK(rumor_topo_out_neighbors(t, 3, 2, nb, w, 8) == 1 && nb[0] == 15);
        CHECK(rumor_topo_neighbors(t, 3, 6, nb, w, 8) == 1 && nb[0] == 7); /* 6 mod 4 = 2 */
    }
    rumor_topo_destroy(&t);
}

static void test_bad_specs(void)
{
    rumor_topo_t *t = NULL;
    CHECK_ERR(rumor_topo_parse("", &t), RUMOR_EINVAL, "empty topology spec");
    CHECK_ERR(rumor_topo_parse("ring", &t), RUMOR_EINVAL, "expected ring:N");
    CHECK_ERR(rumor_topo_parse("ring:", &t), RUMOR_EINVAL, "N '' is not an integer");
    CHECK_ERR(rumor_topo_parse("ring:abc", &t), RUMOR_EINVAL, "N 'abc' is not an integer");
    CHECK_ERR(rumor_topo_parse("ring:16x", &t), RUMOR_EINVAL, "'16x'");
    CHECK_ERR(rumor_topo_parse("ring:1", &t), RUMOR_EINVAL, "in [2, 1048576]");
    CHECK_ERR(rumor_topo_parse("ring:99999999999999999999", &t), RUMOR_EINVAL, "not an integer");
    CHECK_ERR(rumor_topo_parse("ring:2000000", &t), RUMOR_EINVAL, "1048576");
    CHECK_ERR(rumor_topo_parse("ring:16:3", &t), RUMOR_EINVAL, "expected ring:N");
    CHECK_ERR(rumor_topo_parse("torus:4", &t), RUMOR_EINVAL, "is not RxC");
    CHECK_ERR(rumor_topo_parse("torus:4x", &t), RUMOR_EINVAL, "columns");
    CHECK_ERR(rumor_topo_parse("torus:1x8", &t), RUMOR_EINVAL, "at least 2");
    CHECK_ERR(rumor_topo_parse("torus:2000x2000", &t), RUMOR_EINVAL, "more than the limit");
    CHECK_ERR(rumor_topo_parse("hypercube:21", &t), RUMOR_EINVAL, "dimension D");
    CHECK_ERR(rumor_topo_parse("complete:20000", &t), RUMOR_EINVAL, "edges is more than");
    CHECK_ERR(rumor_topo_parse("rreg:64:5:seed=1", &t), 0, "");
    rumor_topo_destroy(&t);
    CHECK_ERR(rumor_topo_parse("rreg:65:5", &t), RUMOR_EINVAL, "is odd");
    CHECK_ERR(rumor_topo_parse("rreg:8:8", &t), RUMOR_EINVAL, "outside [1, 7]");
    CHECK_ERR(rumor_topo_parse("rreg:8:1", &t), RUMOR_EINVAL, "not connected");
    CHECK_ERR(rumor_topo_parse("rreg:64:4:seed=x", &t), RUMOR_EINVAL, "seed=S");
    CHECK_ERR(rumor_topo_parse("rreg:64:4:sed=1", &t), RUMOR_EINVAL, "seed=S");
    CHECK_ERR(rumor_topo_parse("er:64:1.5", &t), RUMOR_EINVAL, "probability");
    CHECK_ERR(rumor_topo_parse("er:64:nan", &t), RUMOR_EINVAL, "probability");
    CHECK_ERR(rumor_topo_parse("er:64:0.01:seed=1", &t), RUMOR_EINVAL, "not connected");
    CHECK_ERR(rumor_topo_parse("er:1000000:0.5", &t), RUMOR_EINVAL, "edges is more than");
    CHECK_ERR(rumor_topo_parse("ws:64:3:0.1", &t), RUMOR_EINVAL, "must be even");
    CHECK_ERR(rumor_topo_parse("base:16:0", &t), RUMOR_EINVAL, "degree K");
    CHECK_ERR(rumor_topo_parse("exp:16:undirected", &t), RUMOR_EINVAL, "exp:N:directed");
    CHECK_ERR(rumor_topo_parse("mesh:16", &t), RUMOR_EINVAL, "unknown family 'mesh'");
    CHECK_ERR(rumor_topo_parse("a:b:c:d:e:f:g:h:i", &t), RUMOR_EINVAL, "expected");
    CHECK_ERR(rumor_topo_parse("file:", &t), RUMOR_EINVAL, "needs a path");
    CHECK_ERR(rumor_topo_parse("file:/nonexistent/x", &t), RUMOR_ESYS, "No such file");
    CHECK(t == NULL);
    /* weights that do not apply */
    t = parse("star:6");
    CHECK_ERR(rumor_topo_set_weights(t, "uniform"), RUMOR_EINVAL, "regular graph");
    CHECK_ERR(rumor_topo_set_weights(t, "fastest"), RUMOR_EINVAL, "unknown weights 'fastest'");
    CHECK(t->scheme == RUMOR_MIX_MH); /* unchanged after failures */
    rumor_topo_destroy(&t);
    t = parse("base:10:2");
    CHECK_ERR(rumor_topo_set_weights(t, "mh"), RUMOR_EINVAL, "part of its construction");
    rumor_topo_destroy(&t);
}

int main(void)
{
    rumor_blas_set_threads(1); /* tiny BLAS calls: threads only cost here */
    test_families();
    test_random();
    test_neighbors();
    test_bad_specs();
    return tu_finish("test_topo_graphs");
}

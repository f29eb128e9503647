/* Graphs from files: edge lists and JSON that are valid load as the graph
 * they describe (weights included); malformed ones (self-loops, ids out of
 * range, disconnected graphs, negative weights, text in number fields,
 * empty files, ...) are rejected naming the file and the line. Also the
 * link file of the cost model. */
#include "config.h"

#include <unistd.h>

#include "blas_tune.h"
#include "cost.h"
#include "topology.h"
#include "testutil.h"

static char path[512];

static const char *put(const char *name, const char *text)
{
    snprintf(path, sizeof path, "%s/%s", tu_tmpdir(), name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void bad(const char *name, const char *text, int code, const char *want)
{
    char spec[600];
    snprintf(spec, sizeof spec, "file:%s", put(name, text));
    rumor_topo_t *t = NULL;
    CHECK_ERR(rumor_topo_parse(spec, &t), code, want);
    CHECK(t == NULL);
    unlink(path);
}

static rumor_topo_t *good(const char *name, const char *text)
{
    char spec[600];
    snprintf(spec, sizeof spec, "file:%s", put(name, text));
    rumor_topo_t *t = NULL;
    CHECK_OK(rumor_topo_parse(spec, &t));
    unlink(path);
    return t;
}

static void test_edgelist_good(void)
{
    rumor_topo_t *t = good("ring.txt", "# a 4-ring\n0 1\n1 2\n\n2 3   # comment\n3 0\n1 0\n");
    CHECK(t && t->n == 4 && t->graph->m == 4 && t->scheme == RUMOR_MIX_MH);
    rumor_topo_destroy(&t);
    /* weights: W_ij = W_ji = w, W_ii = 1 - sum */
    t = good("w.txt", "n 3\n0 1 0.25\n1 2 0.5\n2 1 0.5\n");
    CHECK(t && t->scheme == RUMOR_MIX_FILE);
    if (t) {
        int nb[4];
        double w[4];
        CHECK(rumor_topo_neighbors(t, 1, 0, nb, w, 4) == 2 && w[0] == 0.25 && w[1] == 0.5);
        CHECK(rumor_topo_self_weight(t, 1, 0) == 0.25 && rumor_topo_self_weight(t, 0, 0) == 0.75);
    }
    rumor_topo_destroy(&t);
    /* windows line ends and tabs */
    t = good("crlf.txt", "0\t1\r\n1 2\r\n");
    CHECK(t && t->n == 3 && t->graph->m == 2);
    rumor_topo_destroy(&t);
}

static void test_edgelist_bad(void)
{
    bad("e.txt", "", RUMOR_EFORMAT, "e.txt: no edges");
    bad("e.txt", "# only a comment\n\n", RUMOR_EFORMAT, "e.txt: no edges");
    bad("e.txt", "0 1\n1 1\n", RUMOR_EFORMAT, "e.txt:2: self-loop 1-1");
    bad("e.txt", "n 4\n0 1\n1 2\n2 4\n", RUMOR_EFORMAT, "e.txt:4: peer ids 2 4 must be integers in [0, 4) (the declared n)");
    bad("e.txt", "0 1\n-1 2\n", RUMOR_EFORMAT, "e.txt:2: peer ids -1 2");
    bad("e.txt", "0 1\n1 2000000\n", RUMOR_EFORMAT, "e.txt:2: peer ids 1 2000000");
    bad("e.txt", "0 1\n1 99999999999999999999\n", RUMOR_EFORMAT, "e.txt:2: peer ids '1' '99999999999999999999' are not integers");
    bad("e.txt", "0 1\n2 3\n", RUMOR_EFORMAT, "graph is not connected (2 components; peer 2");
    bad("e.txt", "n 5\n0 1\n1 2\n2 3\n", RUMOR_EFORMAT, "peer 4 is not reachable");
    bad("e.txt", "0 1 0.5\n1 2 -0.25\n", RUMOR_EFORMAT, "e.txt:2: weight -0.25 of edge 1-2 must be positive");
    bad("e.txt", "0 1 0.5\n1 2 0\n", RUMOR_EFORMAT, "e.txt:2: weight 0 of edge 1-2 must be positive (leave out");
    bad("e.txt", "0 one\n", RUMOR_EFORMAT, "e.txt:1: peer ids '0' 'one' are not integers");
    bad("e.txt", "0 1\n1 2.5\n", RUMOR_EFORMAT, "e.txt:2: peer ids '1' '2.5'");
    bad("e.txt", "0 1 abc\n", RUMOR_EFORMAT, "e.txt:1: weight 'abc' is not a finite number");
    bad("e.txt", "0 1 inf\n", RUMOR_EFORMAT, "e.txt:1: weight 'inf' is not a finite number");
    bad("e.txt", "0 1 1e999\n", RUMOR_EFORMAT, "e.txt:1: weight '1e999'");
    bad("e.txt", "0 1 0.5 9\n", RUMOR_EFORMAT, "e.txt:1: expected 'i j' or 'i j w', found more than 3");
    bad("e.txt", "0\n", RUMOR_EFORMAT, "e.txt:1: expected 'i j' or 'i j w', found 1 field");
    bad("e.txt", "0 1 0.5\n1 2\n", RUMOR_EFORMAT, "e.txt:2: edge 1-2 lacks a weight but earlier edges do");
    bad("e.txt", "0 1\n1 2 0.5\n", RUMOR_EFORMAT, "e.txt:2: edge 1-2 has a weight but earlier edges do not");
    bad("e.txt", "0 1 0.5\n1 2 0.25\n1 0 0.3\n", RUMOR_EFORMAT, "e.txt:3: edge 0-1 has weight 0.29999999999999999, but line 1 gave 0.5");
    bad("e.txt", "0 1 0.7\n0 2 0.7\n", RUMOR_EINVAL, "W(0,0) = -0.39999999999999991 is negative");
    bad("e.txt", "0 1\nn 4\n", RUMOR_EFORMAT, "e.txt:2: 'n' must come once, before the edges");
    bad("e.txt", "n x\n", RUMOR_EFORMAT, "e.txt:1: expected 'n N'");
    /* a line longer than the reader takes */
    char big[6000];
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = 0;
    bad("e.txt", big, RUMOR_EFORMAT, "e.txt:1: line longer than");
}

static void test_json(void)
{
    rumor_topo_t *t = good("g.json", "{\"n\": 4, \"edges\": [[0,1],[1,2],[2,3],[3,0]]}");
    CHECK(t && t->n == 4 && t->graph->m == 4);
    rumor_topo_destroy(&t);
    /* networkx node-link, weights */
    t = good("nx.json", "{\"directed\": false, \"nodes\": [{\"id\":0},{\"id\":1},{\"id\":2}],\n"
                        " \"links\": [{\"source\":0,\"target\":1,\"weight\":0.5},\n"
                        "           {\"source\":1,\"target\":2,\"weight\":0.5}]}");
    CHECK(t && t->n == 3 && t->scheme == RUMOR_MIX_FILE && rumor_topo_self_weight(t, 1, 0) == 0);
    rumor_topo_destroy(&t);
    /* a file named .txt holding JSON is still JSON */
    t = good("g.txt", "  {\"edges\": [[0,1]]}");
    CHECK(t && t->n == 2);
    rumor_topo_destroy(&t);
    bad("b.json", "{\"edges\": [[0,1],[1,2]\n,\n", RUMOR_EFORMAT, "b.json:2: invalid JSON");
    bad("b.json", "[[0,1]]", RUMOR_EFORMAT, "expected a JSON object");
    bad("b.json", "{\"n\": 3}", RUMOR_EFORMAT, "no \"edges\" (or \"links\") array");
    bad("b.json", "{\"edges\": []}", RUMOR_EFORMAT, "b.json: no edges");
    bad("b.json", "{\"edges\": [[0,1],[1,\"2\"]]}", RUMOR_EFORMAT, "b.json: edges[1]: expected [i, j] or [i, j, w]");
    bad("b.json", "{\"edges\": [[0,1],[1,1]]}", RUMOR_EFORMAT, "edges[1]: self-loop");
    bad("b.json", "{\"edges\": [[0,1],[1,2.5]]}", RUMOR_EFORMAT, "edges[1]: peer ids 1 2.5 must be integers");
    bad("b.json", "{\"n\": 3, \"edges\": [[0,1],[1,3]]}", RUMOR_EFORMAT, "edges[1]: peer ids 1 3");
    bad("b.json", "{\"n\": 1e9, \"edges\": [[0,1]]}", RUMOR_EFORMAT, "\"n\" must be an integer");
    bad("b.json", "{\"edges\": [[0,1,-1]]}", RUMOR_EFORMAT, "edges[0]: weight -1");
    bad("b.json", "{\"links\": [{\"source\":0}]}", RUMOR_EFORMAT, "links[0]: expected {\"source\"");
    bad("b.json", "{\"edges\": [[0,1],[2,3]]}", RUMOR_EFORMAT, "not connected");
    bad("b.json", "", RUMOR_EFORMAT, "invalid JSON");
}

static void test_links(void)
{
    rumor_links_t *l = NULL;
    const char *p = put("net.links",
                        "# two racks\n"
                        "default 1Gbit 1ms\n"
                        "nic all 10Gbit\n"
                        "site a 0-3\n"
                        "site b 4-6,7\n"
                        "intra a 100Gbit 5us\n"
                        "inter a b 2.5GB/s 20ms\n"
                        "link 0 5 1MB 1s\n"
                        "compute 0.25s\n");
    CHECK_OK(rumor_links_load(p, 10, &l));
    double bw, lat;
    rumor_links_get(l, 1, 2, &bw, &lat);
    CHECK(bw == 100e9 / 8 && lat == 5e-6);
    rumor_links_get(l, 6, 1, &bw, &lat);
    CHECK(bw == 2.5e9 && lat == 20e-3);
    rumor_links_get(l, 5, 0, &bw, &lat);
    CHECK(bw == 1e6 && lat == 1);
    rumor_links_get(l, 4, 5, &bw, &lat); /* no intra for b: the default */
    CHECK(bw == 1e9 / 8 && lat == 1e-3);
    rumor_links_get(l, 8, 9, &bw, &lat);
    CHECK(bw == 1e9 / 8 && lat == 1e-3);
    CHECK(rumor_links_nic(l, 9) == 10e9 / 8 && rumor_links_compute(l) == 0.25);
    rumor_links_destroy(&l);
    rumor_links_destroy(&l);
    unlink(path);
    struct {
        const char *text, *want;
    } cases[] = {
        { "default 1Gbit\n", "net.links:1: expected 'default BW LAT'" },
        { "default fast 1ms\n", "net.links:1: bandwidth 'fast'" },
        { "default 1Gbit 1parsec\n", "net.links:1: time '1parsec'" },
        { "default -1Gbit 1ms\n", "bandwidth '-1Gbit'" },
        { "default 0Gbit 1ms\n", "bandwidth '0Gbit'" },
        { "\nsite a 0-3\nsite a 4\n", "net.links:3: site 'a' is defined twice" },
        { "site a 0-3\nsite b 3-5\n", "net.links:2: peer 3 is already in site 'a'" },
        { "site a 0-10\n", "net.links:1: peers '0-10'" },
        { "site a 5-2\n", "net.links:1: peers '5-2'" },
        { "intra x 1Gbit 1ms\n", "net.links:1: unknown site 'x'" },
        { "link 0 0 1Gbit 1ms\n", "net.links:1: link '0 0'" },
        { "link 0 1 1Gbit 1ms\nlink 1 0 1Gbit 2ms\n", "link 0-1 is given twice" },
        { "bogus 1\n", "net.links:1: unknown directive 'bogus'" },
        { "compute soon\n", "net.links:1: time 'soon'" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p = put("net.links", cases[i].text);
        CHECK_ERR(rumor_links_load(p, 10, &l), RUMOR_EFORMAT, cases[i].want);
        CHECK(l == NULL);
        unlink(path);
    }
    double b;
    CHECK_OK(rumor_topo_parse_bytes("1.5GiB", &b));
    CHECK(b == 1.5 * 1073741824.0);
    CHECK_OK(rumor_topo_parse_bytes("100MB", &b));
    CHECK(b == 100e6);
    CHECK_ERR(rumor_topo_parse_bytes("12 MB", &b), RUMOR_EINVAL, "size '12 MB'");
    CHECK_ERR(rumor_topo_parse_bytes("1e300", &b), RUMOR_EINVAL, "up to 1e15");
}

/* The cost model against hand-computed numbers: a 4-ring, MH weights, a
 * 100 MB model, 1 Gbit/s NICs: each peer sends 2 messages through a NIC
 * shared two ways, so 100 MB at 62.5 MB/s + 1 ms = 1.601 s a round. */
static void test_cost(void)
{
    rumor_topo_t *t = NULL;
    CHECK_OK(rumor_topo_parse("ring:4", &t));
    rumor_links_t *l = NULL;
    const char *p = put("ring.links", "default 10Gbit 1ms\nnic all 1Gbit\n");
    CHECK_OK(rumor_links_load(p, 4, &l));
    unlink(path);
    rumor_topo_cost_t c;
    CHECK_OK(rumor_topo_cost(t, l, 100e6, 10, NULL, &c));
    CHECK_CLOSE(c.round_seconds, 1e-3 + 100e6 / (1e9 / 8 / 2), 1e-12, 1e-12);
    CHECK_CLOSE(c.seconds_to_eps, 10 * c.round_seconds, 0, 1e-12);
    CHECK(c.msgs_peer_max == 2 && c.bytes_peer_max == 200e6 && c.bytes_total == 800e6);
    CHECK(c.bytes_link_max == 100e6 && c.bytes_nic_max == 200e6);
    CHECK_OK(rumor_topo_cost(t, l, 100e6, -1, NULL, &c));
    CHECK(isinf(c.seconds_to_eps));
    rumor_links_destroy(&l);
    /* compute-bound: the round takes the compute time */
    p = put("ring.links", "default 10Gbit 1us\ncompute 5s\n");
    CHECK_OK(rumor_links_load(p, 4, &l));
    unlink(path);
    CHECK_OK(rumor_topo_cost(t, l, 100e6, 3, NULL, &c));
    CHECK(c.round_seconds == 5 && c.seconds_to_eps == 15);
    CHECK_CLOSE(c.comm_seconds, 1e-6 + 100e6 / (10e9 / 8), 1e-12, 1e-12); /* no NIC limit */
    rumor_links_destroy(&l);
    CHECK_OK(rumor_links_load(put("ring.links", "default 1Gbit 1ms\n"), 5, &l));
    CHECK_ERR(rumor_topo_cost(t, l, 1, 1, NULL, &c), RUMOR_EINVAL, "links describe 5 peers");
    rumor_links_destroy(&l);
    unlink(path);
    rumor_topo_destroy(&t);
    /* one-peer exponential: one message a round */
    CHECK_OK(rumor_topo_parse("onepeer-exp:8", &t));
    CHECK_OK(rumor_links_default(8, &l));
    CHECK_OK(rumor_topo_cost(t, l, 1e6, 3, NULL, &c));
    CHECK(c.msgs_peer_max == 1 && c.bytes_peer_mean == 1e6);
    CHECK_CLOSE(c.round_seconds, 50e-6 + 1e6 / (10e9 / 8), 1e-15, 1e-12);
    rumor_links_destroy(&l);
    rumor_topo_destroy(&t);
}

/* A gossip plan against hand-computed numbers: an 8-ring on 100 Mbit/s
 * links with 25 ms latency and 10 ms of compute a step, a 1,077,288-byte
 * model (the MLP's 269,322 floats). int8 with keyframes every 16 rounds
 * sends 1/16 + 15/16 x 260/1024 of f32's bytes; 4 local steps make a round
 * 3 computes + max(comm, compute). CHOCO's rate with int4 (gamma 0.8) is
 * max |1 - 0.8 (1 - lambda)| over the ring's 1/3 + 2/3 cos(2 pi j / 8). */
static void test_plan(void)
{
    rumor_gossip_plan_t p = { { RUMOR_CODEC_INT8, 1, 0, 0 }, 0, 0, 0 };
    double f = 1.0 / 16 + 15.0 / 16 * 260.0 / 1024;
    CHECK_CLOSE(rumor_gossip_plan_bytes_factor(&p), f, 0, 1e-12);
    CHECK(rumor_gossip_plan_keyframe(&p) == 16 && rumor_gossip_plan_gamma(&p) == 1.0);
    rumor_topo_t *t = NULL;
    CHECK_OK(rumor_topo_parse("ring:8", &t));
    rumor_links_t *l = NULL;
    CHECK_OK(rumor_links_load(put("wan.links", "default 100Mbit 25ms\ncompute 10ms\n"), 8, &l));
    unlink(path);
    double B = 269322.0 * 4;
    rumor_topo_cost_t c;
    CHECK_OK(rumor_topo_cost(t, l, B, 50, &p, &c));
    double comm = 0.025 + B * f / 12.5e6;
    CHECK_CLOSE(c.comm_seconds, comm, 1e-12, 1e-12);
    CHECK_CLOSE(c.round_seconds, comm, 1e-12, 1e-12);
    CHECK_CLOSE(c.bytes_peer_max, 2 * B * f, 0, 1e-12);
    CHECK(c.suggested_steps == (int)ceil(comm / 0.01) && c.local_steps == 1);
    p.local_steps = 4;
    CHECK_OK(rumor_topo_cost(t, l, B, 50, &p, &c));
    CHECK_CLOSE(c.round_seconds, 3 * 0.01 + comm, 1e-12, 1e-12);
    CHECK_CLOSE(c.step_seconds, (3 * 0.01 + comm) / 4, 1e-12, 1e-12);
    CHECK_CLOSE(rumor_topo_step_seconds(&c, 8), (7 * 0.01 + comm) / 8, 1e-12, 1e-12);
    CHECK_CLOSE(c.seconds_to_eps, 50 * c.round_seconds, 0, 1e-12);
    /* the consensus rate of a plan */
    rumor_gossip_plan_t q = { { RUMOR_CODEC_INT4, 1, 0, 0 }, 0, 0, 1 };
    double rho = 0;
    for (int j = 1; j < 8; j++)
        rho = fmax(rho, fabs(1 - 0.8 * (1 - (1.0 / 3 + 2.0 / 3 * cos(2 * M_PI * j / 8)))));
    double l2 = 1.0 / 3 + 2.0 / 3 * cos(2 * M_PI / 8), ln = 1.0 / 3 - 2.0 / 3;
    CHECK_CLOSE(rumor_gossip_plan_rho(&q, fmax(fabs(l2), fabs(ln)), l2, ln), rho, 1e-15, 0);
    CHECK_CLOSE(rumor_gossip_plan_rho(&q, 0.9, NAN, NAN), 1 - 0.8 * 0.1, 1e-15, 0);
    CHECK(rumor_gossip_plan_rho(NULL, 0.9, l2, ln) == 0.9);
    q.codec.kind = RUMOR_CODEC_NONE;
    CHECK(rumor_gossip_plan_rho(&q, 0.9, l2, ln) == 0.9 && rumor_gossip_plan_bytes_factor(&q) == 1);
    rumor_links_destroy(&l);
    rumor_topo_destroy(&t);
}

int main(void)
{
    rumor_blas_set_threads(1);
    test_plan();
    test_edgelist_good();
    test_edgelist_bad();
    test_json();
    test_links();
    test_cost();
    rmdir(tu_tmpdir());
    return tu_finish("test_topo_files");
}

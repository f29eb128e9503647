/* Mixing weights: Metropolis–Hastings is symmetric and doubly stochastic on
 * random graphs; max-degree and uniform match their formulas; best constant
 * matches Xiao & Boyd's closed form; FMMC is never worse than MH (and beats
 * it where MH is poor); the weights file round-trips bit for bit, bestconst's
 * negative self-weights included; invalid weights are rejected naming the
 * entry, and negative ones unless W is symmetric with rho(W - 11^T/n) < 1. */
#include "config.h"

#include <stdlib.h>
#include <unistd.h>

#include "spectrum.h"
#include "blas_tune.h"
#include "testutil.h"

static rumor_topo_t *parse(const char *spec)
{
    rumor_topo_t *t = NULL;
    if (rumor_topo_parse(spec, &t) < 0)
        fprintf(stderr, "parse %s: %s\n", spec, rumor_err_msg());
    return t;
}

/* Row and column sums and symmetry, computed here from the dense W. */
static void check_doubly_stochastic(const rumor_mix_t *w, const char *what)
{
    int n = w->n;
    double *a = malloc((size_t)n * n * sizeof *a);
    rumor_mix_to_dense(w, a);
    double rs = 0, cs = 0, asym = 0, neg = 0;
    for (int i = 0; i < n; i++) {
        double r = 0, c = 0;
        for (int j = 0; j < n; j++) {
            r += a[i + (size_t)j * n];
            c += a[j + (size_t)i * n];
            asym = fmax(asym, fabs(a[i + (size_t)j * n] - a[j + (size_t)i * n]));
            neg = fmin(neg, a[i + (size_t)j * n]);
        }
        rs = fmax(rs, fabs(r - 1));
        cs = fmax(cs, fabs(c - 1));
    }
    CHECKF(rs < 1e-12 && cs < 1e-12 && asym == 0 && neg >= 0,
           "%s: row err %g col err %g asym %g min %g", what, rs, cs, asym, neg);
    free(a);
}

static void test_mh_random(void)
{
    static const char *const specs[] = { "er:300:0.02:seed=1", "er:300:0.05:seed=2",
                                         "ws:200:4:0.5:seed=3", "rreg:128:5:seed=4",
                                         "star:50", "grid:7x9" };
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        rumor_topo_t *t = parse(specs[s]);
        CHECK(t != NULL);
        if (!t)
            continue;
        const rumor_mix_t *w = t->w[0];
        check_doubly_stochastic(w, specs[s]);
        /* each entry is the local formula */
        int bad = 0;
        for (int i = 0; i < w->n; i++)
            for (long p = w->off[i]; p < w->off[i + 1]; p++)
                bad += w->val[p] != 1.0 / (1 + fmax(rumor_graph_degree(t->graph, i),
                                                    rumor_graph_degree(t->graph, w->col[p])));
        CHECK(bad == 0);
        CHECK_OK(rumor_mix_check(t->w[0], 1, 0));
        rumor_topo_destroy(&t);
    }
}

static void test_schemes(void)
{
    rumor_topo_t *t = parse("grid:3x4");
    CHECK_OK(rumor_topo_set_weights(t, "maxdeg"));
    CHECK(t->scheme == RUMOR_MIX_MAXDEG);
    check_doubly_stochastic(t->w[0], "maxdeg");
    CHECK(t->w[0]->val[0] == 1.0 / 5); /* d_max = 4 */
    CHECK_CLOSE(t->w[0]->diag[0], 1 - 2.0 / 5, 1e-15, 0);
    rumor_topo_destroy(&t);
    t = parse("torus:4x4");
    CHECK_OK(rumor_topo_set_weights(t, "uniform"));
    CHECK(t->w[0]->val[0] == 1.0 / 5 && t->w[0]->diag[3] == 1 - 4.0 / 5);
    rumor_topo_destroy(&t);
}

/* Xiao & Boyd: W = I - a L with a = 2/(lambda_1(L) + lambda_{n-1}(L)). On a
 * ring L's eigenvalues are 2 - 2cos(2 pi k/n); on the star 0, 1 (n-2 times),
 * n, so a = 2/(n+1) and the centre's self-weight is negative. */
static void test_bestconst(void)
{
    const double PI = 3.14159265358979323846;
    int n = 20;
    rumor_topo_t *t = parse("ring:20");
    CHECK_OK(rumor_topo_set_weights(t, "bestconst"));
    double l1 = 4, ln1 = 2 - 2 * cos(2 * PI / n), a = 2 / (l1 + ln1);
    CHECK_CLOSE(t->w[0]->val[0], a, 1e-12, 0);
    rumor_topo_analysis_t an;
    rumor_analyze_opts_t o = { .sim_rounds = -1 };
    CHECK_OK(rumor_topo_analyze(t, &o, &an));
    CHECK_CLOSE(an.rho, (l1 - ln1) / (l1 + ln1), 1e-12, 0); /* both ends balanced */
    rumor_topo_analysis_free(&an);
    rumor_topo_destroy(&t);
    t = parse("star:10");
    CHECK_OK(rumor_topo_set_weights(t, "bestconst"));
    CHECK_CLOSE(t->w[0]->val[0], 2.0 / 11, 1e-12, 0);
    CHECK(t->w[0]->diag[0] < 0);
    CHECK_OK(rumor_topo_analyze(t, &o, &an));
    CHECK(an.neg_diag == 1);
    CHECK_CLOSE(an.rho, 9.0 / 11, 1e-12, 0); /* max(|1-a|, |1-a n|) */
    rumor_topo_analysis_free(&an);
    rumor_topo_destroy(&t);
}

static void test_fmmc(void)
{
    static const char *const specs[] = { "star:12", "grid:4x5", "er:40:0.15:seed=3",
                                         "ws:30:4:0.3:seed=1", "ring:10", "rreg:600:3:seed=2" };
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        rumor_topo_t *t = parse(specs[s]);
        if (!t) {
            CHECK(0);
            continue;
        }
        double l2, ln, rho_mh, rho_f;
        CHECK_OK(rumor_mix_rho(t->w[0], RUMOR_EIG_DENSE, &l2, &ln, &rho_mh));
        CHECK_OK(rumor_topo_set_weights(t, "fmmc"));
        check_doubly_stochastic(t->w[0], specs[s]);
        CHECK_OK(rumor_mix_rho(t->w[0], RUMOR_EIG_DENSE, &l2, &ln, &rho_f));
        CHECKF(rho_f <= rho_mh + 1e-12, "%s: fmmc %g worse than mh %g", specs[s], rho_f, rho_mh);
        fprintf(stderr, "  %-22s rho mh %.6f fmmc %.6f\n", specs[s], rho_mh, rho_f);
        /* the star's FMMC is known: weights 1/(n-1)... rho = 1 - 1/(n-1)?
         * Boyd et al.: optimal star chain has rho = (n-2)/(n-1)... at least
         * it must beat MH's 1 - 1/n clearly */
        if (!strcmp(specs[s], "star:12"))
            CHECK(rho_f < rho_mh - 0.005);
        if (!strcmp(specs[s], "grid:4x5") || !strcmp(specs[s], "er:40:0.15:seed=3"))
            CHECK(rho_f < rho_mh - 1e-3);
        rumor_topo_destroy(&t);
    }
}

/* Write, read back, compare bit for bit; then the same through --weights. */
static void test_file_roundtrip(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/w.txt", tu_tmpdir());
    static const char *const specs[] = { "er:50:0.2:seed=5", "onepeer-exp:12", "base:11:2" };
    for (size_t s = 0; s < 3; s++) {
        rumor_topo_t *t = parse(specs[s]);
        if (!t) {
            CHECK(0);
            continue;
        }
        if (s == 0)
            CHECK_OK(rumor_topo_set_weights(t, "fmmc"));
        CHECK_OK(rumor_mix_save(path, t->w, t->period, specs[s]));
        rumor_mix_t **w = NULL;
        int period = 0;
        CHECK_OK(rumor_mix_load(path, &w, &period));
        CHECK(period == t->period);
        int same = w != NULL;
        for (int k = 0; same && k < period; k++) {
            same &= w[k]->nnz == t->w[k]->nnz;
            same &= !memcmp(w[k]->diag, t->w[k]->diag, sizeof(double) * (size_t)t->n);
            same &= !memcmp(w[k]->val, t->w[k]->val, sizeof(double) * (size_t)t->w[k]->nnz);
            same &= !memcmp(w[k]->col, t->w[k]->col, sizeof(int) * (size_t)t->w[k]->nnz);
        }
        CHECKF(same, "%s: weights file does not round-trip", specs[s]);
        rumor_mix_free_seq(&w, period);
        char arg[600];
        snprintf(arg, sizeof arg, "file:%s", path);
        CHECK_OK(rumor_topo_set_weights(t, arg));
        CHECK(t->scheme == RUMOR_MIX_FILE);
        rumor_topo_destroy(&t);
    }
    /* weights on a pair that is not a link */
    rumor_topo_t *t = parse("ring:50");
    char arg[600];
    snprintf(arg, sizeof arg, "file:%s", path);
    CHECK_ERR(rumor_topo_set_weights(t, arg), RUMOR_EINVAL, "weights for 11 peers");
    rumor_topo_destroy(&t);
    t = parse("ring:11");
    CHECK_ERR(rumor_topo_set_weights(t, arg), RUMOR_EINVAL, "is not a link of ring:11");
    rumor_topo_destroy(&t);
    unlink(path);
}

/* A weights file with one problem; the error must contain `want`. */
static void bad_weights(const char *text, int code, const char *want)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad.w", tu_tmpdir());
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    rumor_mix_t **w = NULL;
    int period;
    CHECK_ERR(rumor_mix_load(path, &w, &period), code, want);
    CHECK(w == NULL);
    unlink(path);
}

static void test_bad_weights(void)
{
    const char *h = "rumor-weights 1 n=3\n";
    char buf[512];
    bad_weights("", RUMOR_EFORMAT, "empty file");
    bad_weights("0 1 0.5\n", RUMOR_EFORMAT, "bad.w:1: not a rumor weights file");
    bad_weights("rumor-weights 1 n=0\n", RUMOR_EFORMAT, ":1: not a rumor weights file");
    bad_weights("rumor-weights 1 n=99999999\n", RUMOR_EFORMAT, "not a rumor weights file");
    snprintf(buf, sizeof buf, "%s0 1 0.5\n1 0 0.5\n# ok\n0 3 0.1\n", h);
    bad_weights(buf, RUMOR_EFORMAT, "bad.w:5: peer ids '0 3'");
    snprintf(buf, sizeof buf, "%s0 1 x\n", h);
    bad_weights(buf, RUMOR_EFORMAT, "bad.w:2: weight 'x' is not a finite number");
    snprintf(buf, sizeof buf, "%s0 1 0.5 7\n", h);
    bad_weights(buf, RUMOR_EFORMAT, "bad.w:2: expected 'i j w'");
    /* a negative entry in a W that is not symmetric (here not even
     * stochastic by columns) */
    snprintf(buf, sizeof buf, "%s0 1 -0.5\n", h);
    bad_weights(buf, RUMOR_EINVAL, "bad.w: column 0 of W sums to 1.5");
    snprintf(buf, sizeof buf, "%s0 1 0.5\n1 0 0.5\n0 1 0.5\n", h);
    bad_weights(buf, RUMOR_EINVAL, "bad.w:4: entry (0,1) is given twice (first at line 2)");
    snprintf(buf, sizeof buf, "%s0 1 0.5\n1 0 0.25\n", h);
    bad_weights(buf, RUMOR_EINVAL, "column 0 of W sums to");
    snprintf(buf, sizeof buf, "%s0 1 0.7\n0 2 0.7\n1 0 0.7\n2 0 0.7\n", h);
    bad_weights(buf, RUMOR_EINVAL, "W(0,0) = -0.3");
    snprintf(buf, sizeof buf, "%s0 0 0.9\n0 1 0.5\n1 0 0.5\n", h);
    bad_weights(buf, RUMOR_EINVAL, "row 0 of W sums to 1.3999");
    bad_weights("rumor-weights 1 n=2 period=2\n0 1 0.5\n", RUMOR_EFORMAT,
                ":2: entry before 'round 0'");
    bad_weights("rumor-weights 1 n=2 period=2\nround 1\n", RUMOR_EFORMAT, ":2: expected 'round 0'");
    bad_weights("rumor-weights 1 n=2 period=2\nround 0\n0 1 .5\n1 0 .5\n", RUMOR_EFORMAT,
                "period=2 but only 1 rounds given");
    bad_weights("rumor-weights 1 n=2 period=0\n", RUMOR_EFORMAT, "bad period");
    /* a NUL byte in the text */
    char path[512];
    snprintf(path, sizeof path, "%s/nul.w", tu_tmpdir());
    FILE *f = fopen(path, "wb");
    fwrite("rumor-weights 1 n=2\n0 1\0 0.5\n", 1, 29, f);
    fclose(f);
    rumor_mix_t **w = NULL;
    int period;
    CHECK_ERR(rumor_mix_load(path, &w, &period), RUMOR_EFORMAT, "NUL byte");
    unlink(path);
    /* symmetric is required for undirected edge weights, not for W files */
    rumor_mix_t *m = NULL;
    int r[] = { 0, 1, 1, 2, 2, 0 }, c[] = { 1, 2, 2, 0, 0, 1 };
    double v[] = { 0.5, 0.5, 0.5, 0.5, 0.5, 0.5 };
    CHECK_ERR(rumor_mix_build(3, 6, r, c, v, NULL, NULL, &m), RUMOR_EINVAL, "given twice");
    int r2[] = { 0, 1, 2 }, c2[] = { 1, 2, 0 };
    CHECK_OK(rumor_mix_build(3, 3, r2, c2, v, NULL, NULL, &m));
    CHECK_OK(rumor_mix_check(m, 0, 0)); /* a cyclic shift average: doubly stochastic */
    CHECK(m && !m->symmetric);
    CHECK_ERR(rumor_mix_check(m, 1, 0), RUMOR_EINVAL, "W is not symmetric: W(0,1) = 0.5 but W(1,0) = 0");
    rumor_mix_destroy(&m);
    rumor_mix_destroy(&m);
}

/* Writes `text` to dir/name and returns "file:PATH" in arg. */
static const char *put_file(const char *name, const char *text, char *arg, size_t len)
{
    snprintf(arg, len, "file:%s/%s", tu_tmpdir(), name);
    FILE *f = fopen(arg + 5, "w");
    fputs(text, f);
    fclose(f);
    return arg;
}

/* Item: bestconst writes negative self-weights, and the reader must take
 * them back. On the star K_{1,n-1} the Laplacian has eigenvalues 0, 1
 * (n - 2 times) and n, so a = 2/(1 + n), the centre keeps 1 - (n-1) a =
 * (3 - n)/(n + 1) < 0 for n > 3, a leaf 1 - a = (n - 1)/(n + 1), and W's
 * eigenvalues 1 - a mu are 1, (n-1)/(n+1) and (1-n)/(n+1): rho = (n-1)/(n+1).
 * On the path P_n, lambda_1 + lambda_{n-1} = (2 + 2cos(pi/n)) + (2 - 2cos(pi/n))
 * = 4, so a = 1/2: the ends keep 1/2 and the inner peers 1 - 2a = 0, which
 * rounding may make -1e-17. */
static void test_signed_roundtrip(void)
{
    char path[512], arg[600];
    snprintf(path, sizeof path, "%s/signed.w", tu_tmpdir());
    snprintf(arg, sizeof arg, "file:%s", path);
    for (int n = 6; n <= 10; n += 4) {
        char spec[32];
        snprintf(spec, sizeof spec, "star:%d", n);
        rumor_topo_t *t = parse(spec);
        CHECK_OK(rumor_topo_set_weights(t, "bestconst"));
        CHECK_OK(rumor_mix_save(path, t->w, 1, spec));
        rumor_mix_t **w = NULL;
        int period = 0;
        CHECK_OK(rumor_mix_load(path, &w, &period));
        CHECK(w != NULL && period == 1);
        if (w) {
            CHECK_CLOSE(w[0]->diag[0], (3.0 - n) / (n + 1), 1e-15, 0);
            CHECK(w[0]->diag[0] < 0);
            for (int i = 1; i < n; i++)
                CHECK_CLOSE(w[0]->diag[i], (n - 1.0) / (n + 1), 1e-15, 0);
            for (long p = 0; p < w[0]->nnz; p++)
                CHECK_CLOSE(w[0]->val[p], 2.0 / (n + 1), 1e-15, 0);
            /* and bit for bit what was written */
            CHECK(w[0]->nnz == t->w[0]->nnz &&
                  !memcmp(w[0]->diag, t->w[0]->diag, sizeof(double) * (size_t)n) &&
                  !memcmp(w[0]->val, t->w[0]->val, sizeof(double) * (size_t)w[0]->nnz));
        }
        rumor_mix_free_seq(&w, period);
        /* the same through --weights file:, as rumor-peer reads it */
        CHECK_OK(rumor_topo_set_weights(t, arg));
        CHECK(t->scheme == RUMOR_MIX_FILE && t->w[0]->diag[0] < 0);
        CHECK(rumor_topo_self_weight(t, 0, 0) == t->w[0]->diag[0]);
        rumor_topo_analysis_t an;
        rumor_analyze_opts_t o = { .sim_rounds = 50 };
        CHECK_OK(rumor_topo_analyze(t, &o, &an));
        CHECK_CLOSE(an.rho, (n - 1.0) / (n + 1), 1e-12, 0);
        CHECK(an.neg_diag == 1);
        /* averaging with it converges at that rate */
        int k = an.sim_rounds;
        CHECK(k > 10 && an.sim_err[k] <= pow(an.rho, k) * (1 + 1e-9));
        rumor_topo_analysis_free(&an);
        rumor_topo_destroy(&t);
    }
    rumor_topo_t *t = parse("grid:1x6");
    CHECK_OK(rumor_topo_set_weights(t, "bestconst"));
    CHECK_OK(rumor_mix_save(path, t->w, 1, "path"));
    CHECK_OK(rumor_topo_set_weights(t, arg));
    CHECK_CLOSE(t->w[0]->diag[0], 0.5, 1e-15, 0);
    CHECK_CLOSE(t->w[0]->diag[5], 0.5, 1e-15, 0);
    for (int i = 1; i < 5; i++)
        CHECK_CLOSE(t->w[0]->diag[i], 0, 1e-15, 0);
    for (long p = 0; p < t->w[0]->nnz; p++)
        CHECK_CLOSE(t->w[0]->val[p], 0.5, 1e-15, 0);
    rumor_topo_destroy(&t);
    unlink(path);
}

/* Negative entries that do and do not mix, on the complete graph K_4 with a
 * circulant W: diagonal c0, next peers c1, opposite peer c2, so W's
 * eigenvalues are 1, c0 - c2 (twice) and c0 - 2 c1 + c2. */
static void test_signed_rho(void)
{
    const char *h = "rumor-weights 1 n=4\n";
    char text[1024], arg[600];
    /* c0 = 0.3, c1 = 0.4, c2 = -0.1: eigenvalues 0.4, 0.4, -0.6: rho 0.6 */
    snprintf(text, sizeof text,
             "%s0 0 0.3\n0 1 0.4\n0 2 -0.1\n0 3 0.4\n1 0 0.4\n1 1 0.3\n1 2 0.4\n1 3 -0.1\n"
             "2 0 -0.1\n2 1 0.4\n2 2 0.3\n2 3 0.4\n3 0 0.4\n3 1 -0.1\n3 2 0.4\n3 3 0.3\n",
             h);
    rumor_topo_t *t = parse("complete:4");
    CHECK_OK(rumor_topo_set_weights(t, put_file("ok.w", text, arg, sizeof arg)));
    double l2, ln, rho;
    CHECK_OK(rumor_mix_rho(t->w[0], RUMOR_EIG_DENSE, &l2, &ln, &rho));
    CHECK_CLOSE(l2, 0.4, 1e-12, 0);
    CHECK_CLOSE(ln, -0.6, 1e-12, 0);
    CHECK_CLOSE(rho, 0.6, 1e-12, 0);
    rumor_topo_destroy(&t);
    unlink(arg + 5);
    /* c0 = -0.1, c1 = 0.6, c2 = -0.1: eigenvalues 0, 0, -1.4: rho 1.4 */
    snprintf(text, sizeof text,
             "%s0 0 -0.1\n0 1 0.6\n0 2 -0.1\n0 3 0.6\n1 0 0.6\n1 1 -0.1\n1 2 0.6\n1 3 -0.1\n"
             "2 0 -0.1\n2 1 0.6\n2 2 -0.1\n2 3 0.6\n3 0 0.6\n3 1 -0.1\n3 2 0.6\n3 3 -0.1\n",
             h);
    bad_weights(text, RUMOR_EINVAL, "bad.w: W(0,0) = -0.10000000000000001 is negative and rho(W");
    bad_weights(text, RUMOR_EINVAL, "= 1.3999999999999999 >= 1");
    bad_weights(text, RUMOR_EINVAL, "averaging with these weights does not converge");
    /* c0 = -0.5, c1 = c2 = 0.5: eigenvalues -1 (3 times): rho exactly 1 */
    snprintf(text, sizeof text,
             "%s0 0 -0.5\n0 1 0.5\n0 2 0.5\n0 3 0.5\n1 0 0.5\n1 1 -0.5\n1 2 0.5\n1 3 0.5\n"
             "2 0 0.5\n2 1 0.5\n2 2 -0.5\n2 3 0.5\n3 0 0.5\n3 1 0.5\n3 2 0.5\n3 3 -0.5\n",
             h);
    bad_weights(text, RUMOR_EINVAL, "|lambda_n|) = 1 >= 1");
    /* doubly stochastic with a negative entry, but not symmetric */
    bad_weights("rumor-weights 1 n=3\n0 0 1.5\n0 1 -0.5\n1 1 1.5\n1 2 -0.5\n2 2 1.5\n"
                "2 0 -0.5\n",
                RUMOR_EINVAL, "bad.w: W(0,1) = -0.5 is negative and W is not symmetric");
    /* a time-varying file: each round is checked */
    bad_weights("rumor-weights 1 n=2 period=2\nround 0\n0 1 .5\n1 0 .5\nround 1\n0 0 -1\n0 1 2\n"
                "1 0 2\n1 1 -1\n",
                RUMOR_EINVAL, "bad.w: round 1: W(0,0) = -1 is negative and rho");
}

int main(void)
{
    rumor_blas_set_threads(1); /* tiny BLAS calls: threads only cost here */
    test_mh_random();
    test_schemes();
    test_bestconst();
    test_fmmc();
    test_file_roundtrip();
    test_bad_weights();
    test_signed_roundtrip();
    test_signed_rho();
    rmdir(tu_tmpdir());
    return tu_finish("test_topo_weights");
}

/* Closed-form spectra (topo/closedform.h) against LAPACK: for every family
 * and weight scheme that keeps a symmetry group (circulant rings, exp and
 * complete graphs, 2-D circulant tori, hypercubes, constant-weight grids,
 * the directed exponential graph, the one-peer exponential sequence, and
 * graphs from files that turn out to have one), `auto` must take the closed
 * form and agree with the dense solve eigenvalue by eigenvalue to 1e-10;
 * graphs or weights without the structure (mh on a grid, a star, a random
 * graph, a ring with one weight changed) must not be taken for it. */
#include "config.h"

#include <stdlib.h>
#include <unistd.h>

#include "blas_tune.h"
#include "closedform.h"
#include "spectrum.h"
#include "testutil.h"

#define TOL 1e-10

static rumor_topo_t *parse(const char *spec, const char *weights)
{
    rumor_topo_t *t = NULL;
    if (rumor_topo_parse(spec, &t) < 0) {
        fprintf(stderr, "parse %s: %s\n", spec, rumor_err_msg());
        return NULL;
    }
    if (weights && rumor_topo_set_weights(t, weights) < 0) {
        fprintf(stderr, "%s --weights %s: %s\n", spec, weights, rumor_err_msg());
        rumor_topo_destroy(&t);
    }
    return t;
}

/* auto (closed form when `want_cf`) against dense, all eigenvalues. */
static void compare(const char *spec, const char *weights, int want_cf)
{
    rumor_topo_t *t = parse(spec, weights);
    CHECKF(t != NULL, "%s", spec);
    if (!t)
        return;
    rumor_analyze_opts_t o = { .sim_rounds = -1 };
    rumor_topo_analysis_t a, d;
    CHECK_OK(rumor_topo_analyze(t, &o, &a));
    o.method = RUMOR_EIG_DENSE;
    CHECK_OK(rumor_topo_analyze(t, &o, &d));
    int cf = !strncmp(a.method, "closed-form (", 13);
    CHECKF(cf == want_cf, "%s --weights %s: method '%s'", spec, weights ? weights : "mh",
           a.method);
    double err = 0;
    CHECKF(a.neigs == t->n && d.neigs == t->n, "%s: %d and %d eigenvalues for %d peers", spec,
           a.neigs, d.neigs, t->n);
    for (int i = 0; i < a.neigs && i < d.neigs; i++)
        err = fmax(err, fabs(a.eigs[i] - d.eigs[i]));
    CHECKF(err <= TOL, "%s --weights %s: spectra differ by %g", spec, weights ? weights : "mh",
           err);
    CHECKF(fabs(a.rho - d.rho) <= TOL, "%s: rho %.15f vs dense %.15f", spec, a.rho, d.rho);
    CHECKF(fabs(a.contraction_gap - d.contraction_gap) <= TOL, "%s: gap %.15g vs dense %.15g",
           spec, a.contraction_gap, d.contraction_gap);
    CHECK(isnan(a.lambda2) == isnan(d.lambda2));
    if (!isnan(d.lambda2)) {
        CHECK_CLOSE(a.lambda2, d.lambda2, TOL, 0);
        CHECK_CLOSE(a.lambda_min, d.lambda_min, TOL, 0);
    }
    CHECKF(a.exact_after == d.exact_after, "%s: exact after %d vs dense %d", spec, a.exact_after,
           d.exact_after);
    CHECKF(labs(a.rounds_to_eps - d.rounds_to_eps) <= (a.rounds_to_eps > 1000 ? 1 : 0),
           "%s: %ld rounds vs dense %ld", spec, a.rounds_to_eps, d.rounds_to_eps);
    fprintf(stderr, "  %-22s %-9s %-34s rho %.12f  max diff %.1e\n", spec,
            weights ? weights : "mh", a.method, a.rho, err);
    rumor_topo_analysis_free(&a);
    rumor_topo_analysis_free(&d);
    rumor_topo_destroy(&t);
}

static void test_families(void)
{
    static const char *const rings[] = { "ring:2", "ring:3", "ring:17", "ring:64" };
    for (size_t i = 0; i < 4; i++)
        compare(rings[i], NULL, 1);
    compare("ring:20", "bestconst", 1);
    compare("ring:15", "maxdeg", 1);
    compare("ring:9", "uniform", 1);
    compare("torus:3x5", NULL, 1);
    compare("torus:2x6", NULL, 1);
    compare("torus:4x4", NULL, 1);
    compare("torus:3x4", "bestconst", 1);
    compare("torus:5x6", "maxdeg", 1);
    compare("hypercube:1", NULL, 1);
    compare("hypercube:3", NULL, 1);
    compare("hypercube:6", NULL, 1);
    compare("hypercube:4", "bestconst", 1);
    compare("complete:2", NULL, 1);
    compare("complete:7", NULL, 1);
    compare("exp:5", NULL, 1);
    compare("exp:12", NULL, 1);
    compare("exp:16", "bestconst", 1);
    /* static but not symmetric: singular values of W - 11^T/n */
    compare("exp:12:directed", NULL, 1);
    compare("exp:16:directed", NULL, 1);
    /* time-varying: singular values of the period's product */
    compare("onepeer-exp:12", NULL, 1);
    compare("onepeer-exp:16", NULL, 1);
    /* W = I - a L on a grid: one weight on every link */
    compare("grid:4x5", "maxdeg", 1);
    compare("grid:3x3", "bestconst", 1);
    compare("grid:1x9", NULL, 1); /* a path: mh is 1/3 on every link */
    compare("grid:1x2", NULL, 1);
    /* no symmetry group: the dense path */
    compare("grid:4x5", NULL, 0); /* mh: 1/4 and 1/5 */
    compare("star:7", NULL, 0);
    compare("rreg:30:3:seed=2", NULL, 0);
    compare("base:11:2", NULL, 0);
}

/* Graphs from files: the structure is found from the numbering. */
static void test_files(void)
{
    char path[512], spec[600];
    snprintf(path, sizeof path, "%s/g.txt", tu_tmpdir());
    snprintf(spec, sizeof spec, "file:%s", path);
    FILE *f = fopen(path, "w"); /* the circulant C_12(1, 5) */
    for (int i = 0; i < 12; i++)
        fprintf(f, "%d %d\n%d %d\n", i, (i + 1) % 12, i, (i + 5) % 12);
    fclose(f);
    compare(spec, NULL, 1);
    f = fopen(path, "w"); /* the 3x4 torus, numbered by rows */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++)
            fprintf(f, "%d %d\n%d %d\n", r * 4 + c, r * 4 + (c + 1) % 4, r * 4 + c,
                    ((r + 1) % 3) * 4 + c);
    fclose(f);
    compare(spec, NULL, 1);
    f = fopen(path, "w"); /* the cube Q_3 */
    for (int i = 0; i < 8; i++)
        for (int b = 0; b < 3; b++)
            if (!(i & (1 << b)))
                fprintf(f, "%d %d\n", i, i | (1 << b));
    fclose(f);
    compare(spec, NULL, 1);
    f = fopen(path, "w"); /* the 3x4 grid with one weight on every link */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) {
            if (c < 3)
                fprintf(f, "%d %d 0.2\n", r * 4 + c, r * 4 + c + 1);
            if (r < 2)
                fprintf(f, "%d %d 0.2\n", r * 4 + c, (r + 1) * 4 + c);
        }
    fclose(f);
    compare(spec, NULL, 1);
    f = fopen(path, "w"); /* the same grid, one link heavier: no structure */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) {
            if (c < 3)
                fprintf(f, "%d %d %s\n", r * 4 + c, r * 4 + c + 1, r + c ? "0.2" : "0.25");
            if (r < 2)
                fprintf(f, "%d %d 0.2\n", r * 4 + c, (r + 1) * 4 + c);
        }
    fclose(f);
    compare(spec, NULL, 0);
    unlink(path);
}

/* A circulant W read from a weights file keeps the closed form; one whose
 * single link differs does not. */
static void test_weights_files(void)
{
    char path[512], arg[600];
    snprintf(path, sizeof path, "%s/w.txt", tu_tmpdir());
    snprintf(arg, sizeof arg, "file:%s", path);
    rumor_topo_t *t = parse("ring:12", "bestconst");
    CHECK(t && rumor_mix_save(path, t->w, 1, "ring:12 bestconst") == 0);
    rumor_topo_destroy(&t);
    compare("ring:12", arg, 1);
    FILE *f = fopen(path, "w");
    fprintf(f, "rumor-weights 1 n=12\n");
    for (int i = 0; i < 12; i++) {
        int j = (i + 1) % 12;
        double w = i == 5 ? 0.25 : 1.0 / 3;
        fprintf(f, "%d %d %.17g\n%d %d %.17g\n", i, j, w, j, i, w);
    }
    fclose(f);
    compare("ring:12", arg, 0);
    unlink(path);
}

/* The shape check itself: exactly the matrices that have the shape. */
static void test_has_shape(void)
{
    rumor_topo_t *t = parse("torus:4x6", NULL);
    rumor_topo_shape_t torus = { .kind = RUMOR_SHAPE_CAYLEY, .k = 2, .m = { 4, 6 } };
    rumor_topo_shape_t wrong = { .kind = RUMOR_SHAPE_CAYLEY, .k = 2, .m = { 6, 4 } };
    rumor_topo_shape_t ring = { .kind = RUMOR_SHAPE_CAYLEY, .k = 1, .m = { 24 } };
    CHECK(rumor_mix_has_shape(t->w, 1, &torus) == 1);
    CHECK(rumor_mix_has_shape(t->w, 1, &wrong) == 0);
    CHECK(rumor_mix_has_shape(t->w, 1, &ring) == 0);
    rumor_topo_shape_t found;
    CHECK(rumor_mix_find_shape(t->w, 1, "file", 0, 0, &found) == 1);
    CHECK(found.kind == RUMOR_SHAPE_CAYLEY && found.k == 2 && found.m[0] == 4 && found.m[1] == 6);
    /* move weight between two links: still doubly stochastic, no longer
     * circulant */
    t->w[0]->val[0] += 0.01;
    t->w[0]->diag[0] -= 0.01;
    CHECK(rumor_mix_has_shape(t->w, 1, &torus) == 0);
    rumor_topo_destroy(&t);
}

int main(void)
{
    rumor_blas_set_threads(1); /* tiny BLAS calls: threads only cost here */
    test_families();
    test_files();
    test_weights_files();
    test_has_shape();
    rmdir(tu_tmpdir());
    return tu_finish("test_topo_closedform");
}

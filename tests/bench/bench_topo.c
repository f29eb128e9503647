/* Spectral analysis speed: a 1,024-peer graph on the dense path (LAPACK
 * dsyevd, all eigenvalues), 65,536-peer graphs on the sparse paths (ARPACK
 * and our thick-restart Lanczos), 2^20-peer rings, tori and hypercubes in
 * closed form (build and spectrum), plus the consensus simulation. Targets
 * on a 2-core machine: dense 1,024 under 1 s, sparse 65,536 under 30 s,
 * closed form 2^20 under 5 s with the build. Prints "bench: NAME = VALUE
 * UNIT" lines; the _ratio lines compare with dsyevd's own time on the same
 * matrix, measured in the same run. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "log.h"
#include "spectrum.h"

static int run(const char *name, const char *spec, rumor_eig_method m, int sim, double *secs,
               double *rho)
{
    rumor_topo_t *t = NULL;
    double t0 = rumor_now();
    if (rumor_topo_parse(spec, &t) < 0) {
        fprintf(stderr, "bench_topo: %s: %s\n", spec, rumor_err_msg());
        return -1;
    }
    double t1 = rumor_now();
    rumor_analyze_opts_t o = { .method = m, .sim_rounds = sim ? 0 : -1 };
    rumor_topo_analysis_t a;
    if (rumor_topo_analyze(t, &o, &a) < 0) {
        fprintf(stderr, "bench_topo: %s: %s\n", spec, rumor_err_msg());
        rumor_topo_destroy(&t);
        return -1;
    }
    double t2 = rumor_now();
    printf("bench: %s = %.3f s\n", name, t2 - t1);
    printf("bench: %s_build = %.3f s\n", name, t1 - t0);
    printf("# %s: build %.3f s, %s, rho %.10f, lambda_2 %.10f, %ld products, sim %d rounds\n", spec,
           t1 - t0, a.method, a.rho, a.lambda2, a.matvecs, a.sim_rounds);
    if (secs)
        *secs = t2 - t1;
    if (rho)
        *rho = a.rho;
    rumor_topo_analysis_free(&a);
    rumor_topo_destroy(&t);
    return 0;
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    printf("# OpenBLAS core: %s\n", rumor_blas_corename());
    int fails = 0;
    double dense, dense_sim, rd, rl, ra;
    fails += run("topo_dense_1024", "rreg:1024:4:seed=1", RUMOR_EIG_DENSE, 0, &dense, &rd) < 0;
    fails += run("topo_dense_1024_with_sim", "rreg:1024:4:seed=1", RUMOR_EIG_DENSE, 1,
                 &dense_sim, NULL) < 0;
    fails += run("topo_lanczos_1024", "rreg:1024:4:seed=1", RUMOR_EIG_LANCZOS, 0, NULL, &rl) < 0;
    if (!fails)
        printf("bench: topo_lanczos_vs_dense_rho_diff_1024 = %.2e abs\n", fabs(rl - rd));
#ifdef HAVE_ARPACK
    fails += run("topo_sparse_arpack_exp_65536", "exp:65536", RUMOR_EIG_ARPACK, 0, NULL, &ra) < 0;
    fails += run("topo_sparse_arpack_rreg_65536", "rreg:65536:4:seed=1", RUMOR_EIG_ARPACK, 0,
                 NULL, NULL) < 0;
#else
    ra = NAN;
#endif
    fails += run("topo_sparse_lanczos_exp_65536", "exp:65536", RUMOR_EIG_LANCZOS, 0, NULL, &rl) < 0;
    if (!isnan(ra))
        printf("bench: topo_sparse_arpack_vs_lanczos_rho_diff = %.2e abs\n", fabs(ra - rl));
    fails += run("topo_sparse_lanczos_rreg_65536", "rreg:65536:4:seed=1", RUMOR_EIG_LANCZOS, 0,
                 NULL, NULL) < 0;
    fails += run("topo_sparse_onepeer_65536", "onepeer-exp:65536", RUMOR_EIG_LANCZOS, 0, NULL,
                 NULL) < 0;
    fails += run("topo_closedform_ring_1048576", "ring:1048576", RUMOR_EIG_AUTO, 0, NULL,
                 NULL) < 0;
    fails += run("topo_closedform_torus_1024x1024", "torus:1024x1024", RUMOR_EIG_AUTO, 0, NULL,
                 NULL) < 0;
    fails += run("topo_closedform_hypercube_20", "hypercube:20", RUMOR_EIG_AUTO, 0, NULL, NULL) < 0;
    fails += run("topo_closedform_exp_65536", "exp:65536", RUMOR_EIG_AUTO, 0, NULL, NULL) < 0;
    fails += run("topo_sparse_base_65536_k3", "base:65536:3", RUMOR_EIG_AUTO, 1, NULL, NULL) < 0;
    return fails ? 1 : 0;
}

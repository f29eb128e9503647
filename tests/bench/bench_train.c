/* Benchmark: MLP training throughput on Fashion-MNIST-shaped batches.
 *
 * Times full SGD steps (forward, backward, update) of the default model
 * 784-256-256-10 at batch 128 with 1 and 2 workers (rumor's data-parallel
 * step, one BLAS thread each), and with one model and 2 OpenBLAS threads
 * (what a naive trainer does). Each is compared with the time the step's
 * GEMMs take when called directly through cblas_sgemm on one thread, divided
 * by the worker count: the GEMM floor. Rounds interleave the variants back to
 * back; medians are reported. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "step.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The GEMMs of one step of a model, through CBLAS directly. */
static void gemm_floor(const rumor_model_t *m, int B, float *scratch_a, float *scratch_b,
                       float *scratch_c)
{
    for (int l = 0; l < m->nlayers; l++) {
        const rumor_layer_t *L = &m->layers[l];
        if (L->kind != RUMOR_LAYER_LINEAR)
            continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, L->out, L->in, 1, scratch_a, L->in,
                    scratch_b, L->in, 0, scratch_c, L->out);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L->out, L->in, B, 1, scratch_c,
                    L->out, scratch_a, L->in, 1, scratch_b, L->in);
        if (l > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, L->in, L->out, 1, scratch_c,
                        L->out, scratch_b, L->in, 0, scratch_a, L->in);
    }
}

/* Times one variant: `workers` step workers, or (workers == 0) one model
 * with 2 OpenBLAS threads. Returns seconds per step. */
static double time_steps(rumor_model_t *m, rumor_step_t *s, rumor_optim_t *opt, const float *x,
                         const int32_t *y, int B, int steps)
{
    float loss;
    double t0 = rumor_now();
    for (int k = 0; k < steps; k++) {
        if (s) {
            rumor_step_grads(s, x, y, B, &loss);
            rumor_step_update(s, opt);
        } else {
            rumor_blas_set_threads(2);
            rumor_model_forward(m, x, y, B, 1, &loss);
            rumor_model_zero_grad(m);
            rumor_model_backward(m);
            rumor_optim_step(opt, m->params, m->grads);
        }
    }
    return (rumor_now() - t0) / steps;
}

static void run(void)
{
    const int B = 128, steps = 50, rounds = 9;
    rumor_device_t *dev;
    rumor_model_t *m;
    rumor_optim_t *opt;
    rumor_step_t *s1, *s2;
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    oc.lr = 0.01f;
    if (rumor_device_open("cpu:2", &dev) < 0 ||
        rumor_model_create(dev, "mlp:784-256-256-10", B, 1, &m) < 0 ||
        rumor_optim_create(dev, &oc, m->nparams, &opt) < 0 || rumor_step_create(m, 1, &s1) < 0 ||
        rumor_step_create(m, 2, &s2) < 0) {
        fprintf(stderr, "bench_train: %s\n", rumor_err_msg());
        exit(1);
    }
    float *x = malloc(sizeof(float) * B * 784);
    int32_t *y = malloc(sizeof(int32_t) * B);
    float *sa = calloc((size_t)B * 784, sizeof(float)), *sb = calloc(784 * 256, sizeof(float)),
          *sc = calloc((size_t)B * 256, sizeof(float));
    for (int i = 0; i < B * 784; i++)
        x[i] = (float)((i * 37) % 255) / 255.0f;
    for (int b = 0; b < B; b++)
        y[b] = b % 10;
    double r1[16], r2[16], rb[16], f1[16], f2[16], speedup[16];
    for (int r = 0; r < rounds; r++) {
        double t1 = time_steps(m, s1, opt, x, y, B, steps);
        double t2 = time_steps(m, s2, opt, x, y, B, steps);
        double tb = time_steps(m, NULL, opt, x, y, B, steps);
        rumor_blas_set_threads(1);
        double t0 = rumor_now();
        for (int k = 0; k < steps; k++)
            gemm_floor(m, B, sa, sb, sc);
        double tg = (rumor_now() - t0) / steps;
        r1[r] = B / t1;
        r2[r] = B / t2;
        rb[r] = B / tb;
        f1[r] = tg / t1;
        f2[r] = (tg / 2) / t2;
        speedup[r] = t1 / t2;
    }
    printf("bench: train_mlp_1w = %.0f examples/s\n", median(r1, rounds));
    printf("bench: train_mlp_2w = %.0f examples/s\n", median(r2, rounds));
    printf("bench: train_mlp_1model_2blas = %.0f examples/s\n", median(rb, rounds));
    printf("bench: train_mlp_2w_speedup = %.2f x\n", median(speedup, rounds));
    printf("bench: train_mlp_gemm_floor_1w = %.3f x\n", median(f1, rounds));
    printf("bench: train_mlp_gemm_floor_2w = %.3f x\n", median(f2, rounds));
    free(x);
    free(y);
    free(sa);
    free(sb);
    free(sc);
    rumor_step_destroy(&s1);
    rumor_step_destroy(&s2);
    rumor_optim_destroy(&opt);
    rumor_model_destroy(&m);
    rumor_device_close(&dev);
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    printf("# MLP 784-256-256-10, batch 128, SGD; OpenBLAS core %s\n", rumor_blas_corename());
    printf("# gemm_floor: time of the step's GEMMs alone (1 thread, divided by the\n"
           "# workers) / time of the whole step; 1.0 would be all GEMM\n");
    run();
    return 0;
}

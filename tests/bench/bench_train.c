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
#include "../stageutil.h"
#include "bench_util.h"

/* The GEMMs of one step of a model, through CBLAS directly: each dense
 * block's forward, weight gradient and (but the first) input gradient. */
static void gemm_floor(const rumor_model_t *m, int B, float *scratch_a, float *scratch_b,
                       float *scratch_c)
{
    for (int l = 0; l < m->nblocks; l++) {
        const rumor_block_t *k = &m->blocks[l];
        if (k->type != &rumor_block_dense)
            continue;
        int in = k->in_width, out = k->out_width;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1, scratch_a, in,
                    scratch_b, in, 0, scratch_c, out);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B, 1, scratch_c, out,
                    scratch_a, in, 1, scratch_b, in);
        if (l > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out, 1, scratch_c, out,
                        scratch_b, in, 0, scratch_a, in);
    }
}

/* Times one variant: a step of `workers` workers, or (one == 1) one model
 * with 2 OpenBLAS threads and no worker split. Returns seconds per step. */
static double time_steps(rumor_step_t *s, int one, const rumor_batch_t *b, int steps)
{
    float loss;
    double t0 = rumor_now();
    for (int k = 0; k < steps; k++) {
        if (one)
            rumor_blas_set_threads(2);
        if (rumor_step_grads(s, b, k, &loss) < 0 || rumor_step_update(s) < 0) {
            fprintf(stderr, "bench_train: %s\n", rumor_err_msg());
            exit(1);
        }
    }
    return (rumor_now() - t0) / steps;
}

static void run(void)
{
    const int B = 128, steps = 50, rounds = 9;
    rumor_device_t *dev, *dev1;
    rumor_stage_t *st = NULL, *st1 = NULL;
    rumor_step_t *s1, *s2, *sb2;
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    oc.lr = 0.01f;
    /* 1 worker: one BLAS thread (cpu:1); 2 workers and one model with 2
     * BLAS threads: cpu:2 */
    if (rumor_device_open("cpu:2", &dev) < 0 || rumor_device_open("cpu:1", &dev1) < 0 ||
        !(st = su_stage_new(dev, "mlp:784-256-256-10", B, 1, &oc)) ||
        !(st1 = su_stage_new(dev1, "mlp:784-256-256-10", B, 1, &oc)) ||
        rumor_step_create(st1, 1, &s1) < 0 || rumor_step_create(st, 2, &s2) < 0 ||
        rumor_step_create(st, 1, &sb2) < 0) {
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
    rumor_batch_t batch = { .kind = RUMOR_BATCH_IMAGES, .n = B, .width = 784, .x = x, .y = y };
    double r1[16], r2[16], rb[16], f1[16], f2[16], speedup[16];
    for (int r = 0; r < rounds; r++) {
        double t1 = time_steps(s1, 0, &batch, steps);
        double t2 = time_steps(s2, 0, &batch, steps);
        double tb = time_steps(sb2, 1, &batch, steps);
        rumor_blas_set_threads(1);
        double t0 = rumor_now();
        for (int k = 0; k < steps; k++)
            gemm_floor(st->model, B, sa, sb, sc);
        double tg = (rumor_now() - t0) / steps;
        r1[r] = B / t1;
        r2[r] = B / t2;
        rb[r] = B / tb;
        f1[r] = tg / t1;
        f2[r] = (tg / 2) / t2;
        speedup[r] = t1 / t2;
    }
    printf("bench: train_mlp_1w = %.0f examples/s\n", bench_median(r1, rounds));
    printf("bench: train_mlp_2w = %.0f examples/s\n", bench_median(r2, rounds));
    printf("bench: train_mlp_1model_2blas = %.0f examples/s\n", bench_median(rb, rounds));
    printf("bench: train_mlp_2w_speedup = %.2f x\n", bench_median(speedup, rounds));
    printf("bench: train_mlp_gemm_floor_1w = %.3f x\n", bench_median(f1, rounds));
    printf("bench: train_mlp_gemm_floor_2w = %.3f x\n", bench_median(f2, rounds));
    free(x);
    free(y);
    free(sa);
    free(sb);
    free(sc);
    rumor_step_destroy(&s1);
    rumor_step_destroy(&s2);
    rumor_step_destroy(&sb2);
    su_stage_free(&st);
    su_stage_free(&st1);
    rumor_device_close(&dev1);
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

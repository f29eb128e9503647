/* Benchmark: pipelines on CPU devices against their analysis and against
 * data parallelism, measured in the same run.
 *
 * The model is an MLP of equal dense layers (mlp:W-W-...-W-10), so a
 * stage's F, B and W each cost about one GEMM of the same size: the unit
 * costs the schedules' analysis assumes. On P = 2 CPU devices (one BLAS
 * thread each; 2 cores) with M micro-batches, for each schedule:
 *   bubble_NAME           the measured idle share of the devices' time
 *   bubble_vs_theory_NAME  measured / the schedule's simulated bubble
 *                          (GPipe and 1F1B (P-1)/(M+P-1), ZB-H1 (P-1)/(3M+P-1))
 * then zb-h1's measured bubble / 1f1b's, and the pipeline's throughput /
 * the same model trained data-parallel (2 workers, one BLAS thread each) on
 * the same cores. Medians over interleaved rounds of steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "log.h"
#include "pipeline.h"
#include "step.h"

enum { WIDTH = 512, LAYERS = 8, BATCH = 1024, M = 8, STEPS = 4, ROUNDS = 5 };

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

static void die(const char *what)
{
    fprintf(stderr, "bench_pipeline: %s: %s\n", what, rumor_err_msg());
    exit(1);
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    char spec[256];
    int at = snprintf(spec, sizeof spec, "mlp:%d", WIDTH);
    for (int i = 0; i < LAYERS; i++)
        at += snprintf(spec + at, sizeof spec - (size_t)at, "-%d", WIDTH);
    snprintf(spec + at, sizeof spec - (size_t)at, "-10");
    rumor_model_t *m = NULL;
    if (rumor_model_create(spec, 0, &m) < 0)
        die("model");
    rumor_device_t *devs[2], *dp = NULL;
    if (rumor_device_open("cpu:1", &devs[0]) < 0 || rumor_device_open("cpu:1", &devs[1]) < 0 ||
        rumor_device_open("cpu:2", &dp) < 0)
        die("devices");
    float *x = malloc((size_t)BATCH * WIDTH * sizeof *x);
    int32_t *y = malloc(BATCH * sizeof *y);
    unsigned long long s = 1;
    for (int i = 0; i < BATCH * WIDTH; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((s >> 40) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < BATCH; i++)
        y[i] = i % 10;
    rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = BATCH, .width = WIDTH, .x = x, .y = y };
    printf("# %s (%zu parameters), batch %d in %d micro-batches, 2 CPU devices of one thread\n",
           spec, m->nparams, BATCH, M);

    static const char *scheds[] = { "gpipe", "1f1b", "zb-h1" };
    enum { NS = 3 };
    rumor_pipeline_t *p[NS];
    int cuts[3];
    if (rumor_pipeline_partition(m, "params", 2, cuts) < 0)
        die("partition");
    for (int k = 0; k < NS; k++) {
        rumor_pipeline_config_t pc = { .model = m, .devs = devs, .ndevs = 2,
                                       .schedule = scheds[k], .microbatches = M, .cuts = cuts,
                                       .max_B = BATCH, .T = 1, .seed = 1 };
        if (rumor_pipeline_create(&pc, &p[k]) < 0)
            die(scheds[k]);
    }
    rumor_stage_config_t sc = { .model = m, .dev = dp, .first = 0, .last = m->nblocks,
                                .max_B = BATCH, .T = 1, .slots = 1, .seed = 1 };
    rumor_stage_t *whole = NULL;
    rumor_step_t *step = NULL;
    if (rumor_stage_create(&sc, &whole) < 0 || rumor_step_create(whole, 2, &step) < 0)
        die("data-parallel step");

    double bub[NS][ROUNDS], sps[NS][ROUNDS], dp_sps[ROUNDS];
    float loss;
    for (int r = -1; r < ROUNDS; r++) { /* round -1 warms up */
        for (int k = 0; k < NS; k++) {
            double t0 = rumor_now(), bsum = 0;
            for (int i = 0; i < STEPS; i++) {
                if (rumor_pipeline_grads(p[k], &b, i, &loss) < 0)
                    die(scheds[k]);
                bsum += rumor_pipeline_bubble(p[k]);
            }
            if (r >= 0) {
                bub[k][r] = bsum / STEPS;
                sps[k][r] = STEPS / (rumor_now() - t0);
            }
        }
        double t0 = rumor_now();
        for (int i = 0; i < STEPS; i++)
            if (rumor_step_grads(step, &b, i, &loss) < 0)
                die("data-parallel step");
        if (r >= 0)
            dp_sps[r] = STEPS / (rumor_now() - t0);
    }
    double med_bub[NS], med_sps[NS];
    for (int k = 0; k < NS; k++) {
        double ratio[ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            ratio[r] = bub[k][r] / p[k]->sched->bubble;
        double rb = median(ratio, ROUNDS);
        med_bub[k] = median(bub[k], ROUNDS);
        med_sps[k] = median(sps[k], ROUNDS);
        printf("bench: bubble_%s = %.3f x\n", scheds[k], med_bub[k]);
        printf("bench: bubble_vs_theory_%s = %.3f x\n", scheds[k], rb);
        printf("# %s: analysis %.3f, %.2f steps/s\n", scheds[k], p[k]->sched->bubble, med_sps[k]);
    }
    double zr[ROUNDS], tr[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        zr[r] = bub[2][r] / bub[1][r];
        tr[r] = sps[1][r] / dp_sps[r];
    }
    printf("bench: zbh1_vs_1f1b_bubble = %.3f x\n", median(zr, ROUNDS));
    printf("bench: pipeline_1f1b_vs_data_parallel = %.3f x\n", median(tr, ROUNDS));
    printf("# data-parallel (2 workers): %.2f steps/s; the pipeline splits each layer's work "
           "less evenly and waits in its bubble, while 2 workers split every GEMM's rows\n",
           median(dp_sps, ROUNDS));
    for (int k = 0; k < NS; k++)
        rumor_pipeline_destroy(&p[k]);
    rumor_step_destroy(&step);
    rumor_stage_destroy(&whole);
    rumor_model_destroy(&m);
    free(x);
    free(y);
    rumor_device_close(&devs[0]);
    rumor_device_close(&devs[1]);
    rumor_device_close(&dp);
    return 0;
}

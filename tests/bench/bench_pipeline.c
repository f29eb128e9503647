/* Benchmark: pipelines on CPU devices against their analysis, against each
 * other and against data parallelism, measured in the same run.
 *
 * The model is an MLP of equal dense layers (mlp:W-W-...-W-10), so a
 * stage's F, B and W each cost about one GEMM of the same size: the unit
 * costs the schedules' analysis assumes. On P = 2 CPU devices (one BLAS
 * thread each; 2 cores), and on 4 and 8 where the machine has the cores,
 * with M micro-batches, for each schedule:
 *   bubble_NAME             the measured idle share of the devices' time
 *   bubble_vs_theory_NAME   measured / the schedule's simulated bubble with
 *                           unit costs (GPipe and 1F1B (P-1)/(M+P-1),
 *                           interleaved (P-1)/(MV+P-1), ZB-H1 (P-1)/(3M+P-1),
 *                           ZB-V its greedy order's, near (P-1)/(6M+P-1))
 *   bubble_vs_costed_NAME   measured / the schedule simulated with the
 *                           step's own measured F, B and W costs per stage:
 *                           what the executor adds to the schedule's idle
 *   act_memory_vs_predicted_NAME  the heap the pipeline's activations took
 *                           (mallinfo2 around its creation, less parameters
 *                           and gradients) / the validator's peak slots x
 *                           a slot's bytes
 *   act_memory_vs_all_micro_NAME  the same heap / one slot for each of the
 *                           M micro-batches on every stage (what the engine
 *                           held before slots followed the schedule)
 * then zero-bubble's measured bubble / 1F1B's, with the lists built for unit
 * costs and with lists re-planned for the costs measured in the warm-up
 * round (the _costed figures), the pipeline's throughput /
 * the same model trained data-parallel (P workers, one BLAS thread each) on
 * the same cores, and on two devices of unlike speed (cpu:1 and
 * cpu:1:slow=3) the throughput of --partition profile's cut / uniform's.
 * Medians over interleaved rounds of steps (ratios taken round by round). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "blas_tune.h"
#include "log.h"
#include "pipeline.h"
#include "step.h"

enum { WIDTH = 512, BATCH = 1024, M = 8, STEPS = 4, ROUNDS = 5, NS = 7 };
static const char *const scheds[NS] = { "gpipe", "1f1b", "interleaved:2", "zb-h1", "zbv",
                                        "zb-h1", "zbv" };
static const char *const names[NS] = { "gpipe",        "1f1b",       "interleaved2", "zbh1", "zbv",
                                       "zbh1_costed", "zbv_costed" };

static void die(const char *what)
{
    fprintf(stderr, "bench_pipeline: %s: %s\n", what, rumor_err_msg());
    exit(1);
}

static rumor_model_t *equal_mlp(int layers)
{
    char spec[1024];
    int at = snprintf(spec, sizeof spec, "mlp:%d", WIDTH);
    for (int i = 0; i < layers; i++)
        at += snprintf(spec + at, sizeof spec - (size_t)at, "-%d", WIDTH);
    snprintf(spec + at, sizeof spec - (size_t)at, "-10");
    rumor_model_t *m = NULL;
    if (rumor_model_create(spec, 0, &m) < 0)
        die("model");
    return m;
}

static size_t heap_now(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* A pipeline, and the heap its activations took. */
static rumor_pipeline_t *make(const rumor_model_t *m, rumor_device_t **devs, int P,
                              const char *sched, const int *cuts, double *act_bytes)
{
    rumor_pipeline_config_t pc = { .model = m, .devs = devs, .ndevs = P, .schedule = sched,
                                   .microbatches = M, .cuts = cuts, .max_B = BATCH, .T = 1,
                                   .seed = 1 };
    rumor_pipeline_t *p = NULL;
    size_t h0 = heap_now();
    if (rumor_pipeline_create(&pc, &p) < 0)
        die(sched);
    double took = (double)(heap_now() - h0);
    for (int s = 0; s < p->S; s++)
        took -= 2.0 * (double)p->st[s]->n * sizeof(float); /* parameters, gradients */
    if (act_bytes)
        *act_bytes = took;
    return p;
}

static double steps_per_s(rumor_pipeline_t *p, const rumor_batch_t *b, double *bubble)
{
    float loss;
    double t0 = rumor_now(), bsum = 0;
    for (int i = 0; i < STEPS; i++) {
        if (rumor_pipeline_grads(p, b, i, &loss) < 0)
            die(p->sched->name);
        bsum += rumor_pipeline_bubble(p);
    }
    if (bubble)
        *bubble = bsum / STEPS;
    return STEPS / (rumor_now() - t0);
}

static void bench_schedules(int P, const rumor_batch_t *b)
{
    char sfx[16] = "";
    if (P != 2)
        snprintf(sfx, sizeof sfx, "_p%d", P);
    rumor_model_t *m = equal_mlp(P * 2 > 8 ? P * 2 : 8);
    rumor_device_t *devs[8], *dp = NULL;
    char dps[16];
    snprintf(dps, sizeof dps, "cpu:%d", P);
    for (int d = 0; d < P; d++)
        if (rumor_device_open("cpu:1", &devs[d]) < 0)
            die("devices");
    if (rumor_device_open(dps, &dp) < 0)
        die("devices");
    printf("# %d blocks (%zu parameters), batch %d in %d micro-batches, %d CPU devices of one "
           "thread\n", m->nblocks, m->nparams, BATCH, M, P);
    rumor_pipeline_t *p[NS];
    double act[NS];
    for (int k = 0; k < NS; k++) {
        int S = P * (k == 2 || k == 4 || k == 6 ? 2 : 1), cuts[17];
        if (rumor_pipeline_partition(m, "params", S, cuts) < 0)
            die("partition");
        p[k] = make(m, devs, P, scheds[k], cuts, &act[k]);
    }
    rumor_stage_config_t sc = { .model = m, .dev = dp, .first = 0, .last = m->nblocks,
                                .max_B = BATCH, .T = 1, .slots = 1, .seed = 1 };
    rumor_stage_t *whole = NULL;
    rumor_step_t *step = NULL;
    if (rumor_stage_create(&sc, &whole) < 0 || rumor_step_create(whole, P, &step) < 0)
        die("data-parallel step");

    double bub[NS][ROUNDS], sps[NS][ROUNDS], dp_sps[ROUNDS], cost_bub[NS][ROUNDS];
    for (int r = -1; r < ROUNDS; r++) { /* round -1 warms up */
        for (int k = 0; k < NS; k++) {
            double bb, v = steps_per_s(p[k], b, &bb), was, now;
            if (r == -1 && k >= 5) { /* the same lists rebuilt for the measured costs */
                if (rumor_pipeline_replan(p[k], NULL, &was, &now) < 0)
                    die("replan");
                printf("# %s re-planned for the measured costs: simulated bubble %.3f -> %.3f\n",
                       scheds[k], was, now);
            }
            if (r >= 0) {
                bub[k][r] = bb, sps[k][r] = v;
                if (rumor_pipeline_expected_bubble(p[k], &cost_bub[k][r]) < 0)
                    die("simulation");
            }
        }
        double t0 = rumor_now();
        float loss;
        for (int i = 0; i < STEPS; i++)
            if (rumor_step_grads(step, b, i, &loss) < 0)
                die("data-parallel step");
        if (r >= 0)
            dp_sps[r] = STEPS / (rumor_now() - t0);
    }
    for (int k = 0; k < NS; k++) {
        double ratio[ROUNDS], cratio[ROUNDS], pred = 0, all = 0;
        for (int r = 0; r < ROUNDS; r++) {
            ratio[r] = bub[k][r] / p[k]->sched->bubble;
            cratio[r] = bub[k][r] / cost_bub[k][r];
        }
        for (int s = 0; s < p[k]->S; s++) {
            pred += (double)p[k]->sched->peak_stage[s] * rumor_stage_slot_bytes(p[k]->st[s]);
            all += (double)M * rumor_stage_slot_bytes(p[k]->st[s]);
        }
        printf("bench: bubble_%s%s = %.3f x\n", names[k], sfx, bench_median(bub[k], ROUNDS));
        printf("bench: bubble_vs_theory_%s%s = %.3f x\n", names[k], sfx,
               bench_median(ratio, ROUNDS));
        printf("bench: bubble_vs_costed_%s%s = %.3f x\n", names[k], sfx,
               bench_median(cratio, ROUNDS));
        if (P == 2) {
            printf("bench: act_memory_vs_predicted_%s = %.3f x\n", names[k], act[k] / pred);
            printf("bench: act_memory_vs_all_micro_%s = %.3f x\n", names[k], act[k] / all);
        }
        printf("# %s: bubble with unit costs %.3f, with the measured costs %.3f; %.2f steps/s, "
               "activations %.1f MiB\n", scheds[k], p[k]->sched->bubble,
               bench_median(cost_bub[k], ROUNDS), bench_median(sps[k], ROUNDS),
               act[k] / 1048576.0);
    }
    double zr[ROUNDS], vr[ROUNDS], tr[ROUNDS], zc[ROUNDS], vc[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        zr[r] = bub[3][r] / bub[1][r];
        vr[r] = bub[4][r] / bub[1][r];
        zc[r] = bub[5][r] / bub[1][r];
        vc[r] = bub[6][r] / bub[1][r];
        tr[r] = sps[1][r] / dp_sps[r];
    }
    printf("bench: zbh1_vs_1f1b_bubble%s = %.3f x\n", sfx, bench_median(zr, ROUNDS));
    printf("bench: zbv_vs_1f1b_bubble%s = %.3f x\n", sfx, bench_median(vr, ROUNDS));
    printf("bench: zbh1_costed_vs_1f1b_bubble%s = %.3f x\n", sfx, bench_median(zc, ROUNDS));
    printf("bench: zbv_costed_vs_1f1b_bubble%s = %.3f x\n", sfx, bench_median(vc, ROUNDS));
    printf("bench: pipeline_1f1b_vs_data_parallel%s = %.3f x\n", sfx, bench_median(tr, ROUNDS));
    printf("# data-parallel (%d workers): %.2f steps/s; the pipeline waits in its bubble and "
           "copies activations, while the workers split every GEMM's rows\n", P,
           bench_median(dp_sps, ROUNDS));
    for (int k = 0; k < NS; k++)
        rumor_pipeline_destroy(&p[k]);
    rumor_step_destroy(&step);
    rumor_stage_destroy(&whole);
    rumor_model_destroy(&m);
    for (int d = 0; d < P; d++)
        rumor_device_close(&devs[d]);
    rumor_device_close(&dp);
}

/* Two devices of unlike speed: --partition profile against uniform. */
static void bench_unlike(const rumor_batch_t *b)
{
    rumor_model_t *m = equal_mlp(8);
    rumor_device_t *devs[2];
    if (rumor_device_open("cpu:1", &devs[0]) < 0 || rumor_device_open("cpu:1:slow=3", &devs[1]) < 0)
        die("devices");
    int uni[3], prof[3], dev_of[2] = { 0, 1 };
    double pred[2];
    if (rumor_pipeline_partition(m, "uniform", 2, uni) < 0 ||
        rumor_pipeline_profile(m, devs, 2, dev_of, 2, b, M, 1, 1, prof, pred) < 0)
        die("partition");
    printf("# cpu:1 and cpu:1:slow=3, 1f1b, %d micro-batches: uniform cuts at block %d of %d, "
           "profile at %d (predicted %.1f and %.1f ms a step)\n", M, uni[1], m->nblocks, prof[1],
           1e3 * pred[0], 1e3 * pred[1]);
    rumor_pipeline_t *pu = make(m, devs, 2, "1f1b", uni, NULL);
    rumor_pipeline_t *pp = make(m, devs, 2, "1f1b", prof, NULL);
    double ratio[ROUNDS], su[ROUNDS], sp[ROUNDS];
    for (int r = -1; r < ROUNDS; r++) {
        double a = steps_per_s(pu, b, NULL), c = steps_per_s(pp, b, NULL);
        if (r >= 0)
            su[r] = a, sp[r] = c, ratio[r] = c / a;
    }
    printf("bench: partition_profile_vs_uniform_slow3 = %.3f x\n", bench_median(ratio, ROUNDS));
    printf("# uniform %.2f steps/s, profile %.2f steps/s; the ideal is 1.5: uniform leaves 3 of "
           "the 8 equal layers on the slow device (9 layer-times a micro-batch), the best cut 2 "
           "(6, as the fast device's 6)\n", bench_median(su, ROUNDS), bench_median(sp, ROUNDS));
    rumor_pipeline_destroy(&pu);
    rumor_pipeline_destroy(&pp);
    rumor_model_destroy(&m);
    rumor_device_close(&devs[0]);
    rumor_device_close(&devs[1]);
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    float *x = malloc((size_t)BATCH * WIDTH * sizeof *x);
    int32_t *y = malloc(BATCH * sizeof *y);
    if (!x || !y)
        die("out of memory");
    unsigned long long s = 1;
    for (int i = 0; i < BATCH * WIDTH; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((s >> 40) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < BATCH; i++)
        y[i] = i % 10;
    rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = BATCH, .width = WIDTH, .x = x, .y = y };
    int cores = rumor_cpu_cores();
    bench_schedules(2, &b);
    for (int P = 4; P <= 8; P *= 2) {
        if (cores >= P)
            bench_schedules(P, &b);
        else
            printf("# %d stages: skipped, %d cores (one a stage)\n", P, cores);
    }
    bench_unlike(&b);
    free(x);
    free(y);
    return 0;
}

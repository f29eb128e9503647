/* Benchmark: GPT training steps on the CPU, against PyTorch on the same
 * model, batch and thread count.
 *
 * Times full AdamW steps (forward, backward, update) of a small GPT-2
 * (gpt:layers=4,dim=128,heads=4,ctx=128,vocab=256, batch 8) with 1 and 2
 * workers (rumor's data-parallel step, one BLAS thread each), as tokens/s.
 * Then runs tests/bench/torch_gpt_step.py, the same model written in
 * PyTorch, at 1 and 2 threads, and reports rumor against torch's best thread
 * setting. Medians over interleaved rounds. Prints:
 *   bench: gpt_tokens_per_s_1w, gpt_tokens_per_s_2w (tokens/s)
 *   bench: gpt_2w_vs_1w (x)
 *   bench: gpt_vs_torch (x, rumor's best over torch's best; skipped without torch) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "log.h"
#include "model.h"
#include "stage.h"
#include "step.h"
#include "bench_util.h"

enum { NL = 4, ND = 128, NH = 4, NT = 128, NV = 256, NB = 8 };

static void die(const char *what)
{
    fprintf(stderr, "bench_gpt: %s: %s\n", what, rumor_err_msg());
    exit(1);
}

int main(void)
{
    char spec[128];
    snprintf(spec, sizeof spec, "gpt:layers=%d,dim=%d,heads=%d,ctx=%d,vocab=%d", NL, ND, NH, NT, NV);
    rumor_device_t *dev, *dev1;
    rumor_model_t *m;
    if (rumor_device_open("cpu:2", &dev) < 0 || rumor_device_open("cpu:1", &dev1) < 0 ||
        rumor_model_create(spec, 0, &m) < 0)
        die("setup");
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    oc.kind = RUMOR_OPT_ADAMW;
    oc.lr = 1e-3f;
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = 0, .last = m->nblocks,
                                .max_B = NB, .T = NT, .slots = 1, .seed = 1, .optim = &oc };
    /* 1 worker with one BLAS thread (cpu:1); 2 workers with one each (cpu:2) */
    rumor_stage_t *st, *st1;
    if (rumor_stage_create(&sc, &st) < 0)
        die("stage");
    sc.dev = dev1;
    if (rumor_stage_create(&sc, &st1) < 0)
        die("stage");
    rumor_step_t *s1, *s2;
    if (rumor_step_create(st1, 1, &s1) < 0 || rumor_step_create(st, 2, &s2) < 0)
        die("step");
    int32_t *tok = malloc(sizeof(int32_t) * NB * NT), *y = malloc(sizeof(int32_t) * NB * NT);
    uint64_t r = 7;
    for (int i = 0; i < NB * NT; i++) {
        tok[i] = (int32_t)(rumor_splitmix64(&r) % NV);
        y[i] = (int32_t)(rumor_splitmix64(&r) % NV);
    }
    rumor_batch_t b = { .kind = RUMOR_BATCH_TOKENS, .n = NB, .width = NT, .tok = tok, .y = y };
    enum { ROUNDS = 7, STEPS = 3 };
    double t1[ROUNDS], t2[ROUNDS];
    float loss;
    for (int w = 0; w < 2; w++) /* warm-up */
        if (rumor_step_grads(s1, &b, w, &loss) < 0 || rumor_step_update(s1) < 0 ||
            rumor_step_grads(s2, &b, w, &loss) < 0 || rumor_step_update(s2) < 0)
            die("step");
    for (int k = 0; k < ROUNDS; k++) {
        for (int v = 0; v < 2; v++) {
            rumor_step_t *s = v ? s2 : s1;
            double t0 = rumor_now();
            for (int i = 0; i < STEPS; i++)
                if (rumor_step_grads(s, &b, i, &loss) < 0 || rumor_step_update(s) < 0)
                    die("step");
            (v ? t2 : t1)[k] = (double)NB * NT * STEPS / (rumor_now() - t0);
        }
    }
    double r1 = bench_median(t1, ROUNDS), r2 = bench_median(t2, ROUNDS);
    printf("bench: gpt_params = %zu count\n", m->nparams);
    printf("bench: gpt_tokens_per_s_1w = %.0f tokens/s\n", r1);
    printf("bench: gpt_tokens_per_s_2w = %.0f tokens/s\n", r2);
    printf("bench: gpt_2w_vs_1w = %.3f x\n", r2 / r1);
    fflush(stdout);

    /* the rival, in the same run */
    /* Debian's python3 (where python3-torch installs), unless RUMOR_PYTHON says */
    const char *src = getenv("RUMOR_SRCDIR"), *py = getenv("RUMOR_PYTHON");
    if (!py)
        py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s '%s/tests/bench/torch_gpt_step.py' %d %d %d %d %d %d 10 1 2",
             py, src ? src : ".", NL, ND, NH, NT, NV, NB);
    FILE *p = popen(cmd, "r");
    double best = 0;
    int th;
    double rate;
    char line[256];
    while (p && fgets(line, sizeof line, p))
        if (sscanf(line, "torch %d %lf", &th, &rate) == 2) {
            printf("bench: gpt_torch_tokens_per_s_%dt = %.0f tokens/s\n", th, rate);
            if (rate > best)
                best = rate;
        }
    int prc = p ? pclose(p) : -1;
    if (best > 0)
        printf("bench: gpt_vs_torch = %.3f x\n", (r1 > r2 ? r1 : r2) / best);
    else
        printf("bench_gpt: PyTorch not available (exit %d): gpt_vs_torch skipped\n", prc);
    free(tok);
    free(y);
    rumor_step_destroy(&s1);
    rumor_step_destroy(&s2);
    rumor_stage_destroy(&st);
    rumor_stage_destroy(&st1);
    rumor_model_destroy(&m);
    rumor_device_close(&dev);
    rumor_device_close(&dev1);
    return 0;
}

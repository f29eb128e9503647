/* gpt_ref DIR: writes what test_gpt_torch.py checks against PyTorch.
 *
 * A small GPT (gpt:layers=2,dim=32,heads=4,ctx=16,vocab=67) on one CPU
 * thread, a fixed batch of 3 windows of random tokens and targets:
 *   DIR/init.safetensors  the initial parameters (a rumor checkpoint)
 *   DIR/grads.f32         d(mean loss)/d(params) at them (the flat space)
 *   DIR/after.f32         the parameters after K AdamW steps on the batch
 *   DIR/ref.json          spec, tokens, targets, the loss, the losses of the
 *                         K steps and the AdamW settings
 *   DIR/hf/               the Hugging Face export of the initial model
 *   DIR/probs.f32         its next-token probabilities (B, T, V) on the
 *                         batch, dropout off: log(probs) are the logits up to
 *                         a constant per row
 * It also checks that 2 workers give the 1-worker gradient. AdamW's eps is
 * 1e-6: with 1e-8, Adam's normalization turns the float32 rounding of
 * gradients near zero into lr-sized differences against a float64
 * reference (4.4e-4 relative after 3 steps, measured). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "data.h"
#include "export.h"
#include "model.h"
#include "stage.h"
#include "step.h"

#define SPEC "gpt:layers=2,dim=32,heads=4,ctx=16,vocab=67"
enum { B = 3, T = 16, V = 67, K = 3 };

static void die(const char *what)
{
    fprintf(stderr, "gpt_ref: %s: %s\n", what, rumor_err_msg());
    exit(1);
}

static void write_f32(const char *dir, const char *name, const float *x, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gpt_ref DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    rumor_device_t *d1, *d2;
    rumor_model_t *m;
    if (rumor_device_open("cpu:1", &d1) < 0 || rumor_device_open("cpu:2", &d2) < 0 ||
        rumor_model_create(SPEC, 0, &m) < 0)
        die("set-up");
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    oc.kind = RUMOR_OPT_ADAMW;
    oc.lr = 1e-2f;
    oc.beta1 = 0.9f;
    oc.beta2 = 0.95f;
    oc.eps = 1e-6f;
    oc.weight_decay = 0.1f;
    rumor_stage_config_t sc = { .model = m, .dev = d1, .first = 0, .last = m->nblocks,
                                .max_B = B, .T = T, .slots = 1, .seed = 5, .optim = &oc };
    rumor_stage_t *st, *st2;
    if (rumor_stage_create(&sc, &st) < 0)
        die("stage");
    sc.dev = d2;
    if (rumor_stage_create(&sc, &st2) < 0)
        die("stage");
    rumor_step_t *s1, *s2;
    if (rumor_step_create(st, 1, &s1) < 0 || rumor_step_create(st2, 2, &s2) < 0)
        die("step");
    int32_t tok[B * T], y[B * T];
    uint64_t r = 11;
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)(rumor_splitmix64(&r) % V);
        y[i] = (int32_t)(rumor_splitmix64(&r) % V);
    }
    rumor_batch_t b = { .kind = RUMOR_BATCH_TOKENS, .n = B, .width = T, .tok = tok, .y = y };
    rumor_ckpt_info_t ci = { .round = 0 };
    snprintf(ci.swarm, sizeof ci.swarm, "ref");
    char path[4096];
    if (rumor_ckpt_save(dir, st, NULL, &ci, 1) < 0 || rumor_ckpt_filename("ref", 0, 0, path, sizeof path) < 0)
        die("checkpoint");
    char from[8192], to[8192];
    snprintf(from, sizeof from, "%s/%s", dir, path);
    snprintf(to, sizeof to, "%s/init.safetensors", dir);
    if (rename(from, to) < 0) {
        perror(to);
        return 1;
    }
    snprintf(path, sizeof path, "%s/hf", dir);
    if (rumor_export_hf(st, path) < 0)
        die("export");
    /* the next-token probabilities of the initial model, dropout off
     * (st2 holds the same parameters), for the logits comparison */
    if (rumor_stage_load(st2, 0, &b, 0, B) < 0 || rumor_stage_forward(st2, 0, NULL, 0, 0, 0) < 0)
        die("forward");
    const float *z = rumor_stage_logits(st2, 0); /* the CPU's: host memory */
    float *pr = malloc((size_t)B * T * V * sizeof *pr);
    if (!pr)
        die("out of memory");
    for (size_t row = 0; row < (size_t)B * T; row++) { /* softmax of each row, in double */
        const float *zr = z + row * V;
        double mx = zr[0], sum = 0;
        for (int v = 1; v < V; v++)
            mx = zr[v] > mx ? zr[v] : mx;
        for (int v = 0; v < V; v++)
            sum += exp(zr[v] - mx);
        for (int v = 0; v < V; v++)
            pr[row * V + v] = (float)(exp(zr[v] - mx) / sum);
    }
    write_f32(dir, "probs.f32", pr, (size_t)B * T * V);
    free(pr);
    float loss, loss2, losses[K];
    if (rumor_step_grads(s1, &b, 0, &loss) < 0 || rumor_step_grads(s2, &b, 0, &loss2) < 0)
        die("gradient");
    double num = 0, den = 0;
    for (size_t i = 0; i < st->n; i++) {
        num += (double)(st->grads[i] - st2->grads[i]) * (st->grads[i] - st2->grads[i]);
        den += (double)st->grads[i] * st->grads[i];
    }
    if (!(sqrt(num / den) < 1e-5) || fabsf(loss - loss2) > 1e-5f * loss) {
        fprintf(stderr, "gpt_ref: 2 workers' gradient differs from 1 worker's by %.3g "
                "(relative), loss %g vs %g\n", sqrt(num / den), loss, loss2);
        return 1;
    }
    write_f32(dir, "grads.f32", st->grads, st->n);
    for (int k = 0; k < K; k++) {
        if (rumor_step_grads(s1, &b, k, &losses[k]) < 0 || rumor_step_update(s1) < 0)
            die("AdamW step");
    }
    write_f32(dir, "after.f32", st->params, st->n);
    snprintf(path, sizeof path, "%s/ref.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"spec\":\"%s\",\"B\":%d,\"T\":%d,\"loss\":%.9g,\"lr\":%g,\"beta1\":%g,"
            "\"beta2\":%g,\"eps\":%g,\"weight_decay\":%g,\"losses\":[",
            m->spec, B, T, loss, (double)oc.lr, (double)oc.beta1, (double)oc.beta2,
            (double)oc.eps, (double)oc.weight_decay);
    for (int k = 0; k < K; k++)
        fprintf(f, "%s%.9g", k ? "," : "", losses[k]);
    fprintf(f, "],\"tokens\":[");
    for (int i = 0; i < B * T; i++)
        fprintf(f, "%s%d", i ? "," : "", tok[i]);
    fprintf(f, "],\"targets\":[");
    for (int i = 0; i < B * T; i++)
        fprintf(f, "%s%d", i ? "," : "", y[i]);
    fprintf(f, "]}\n");
    fclose(f);
    printf("gpt_ref: %s, %zu parameters, loss %.6f, 2 workers agree to %.1e\n", m->spec,
           m->nparams, loss, sqrt(num / den));
    rumor_step_destroy(&s1);
    rumor_step_destroy(&s2);
    rumor_stage_destroy(&st);
    rumor_stage_destroy(&st2);
    rumor_model_destroy(&m);
    rumor_device_close(&d1);
    rumor_device_close(&d2);
    return 0;
}

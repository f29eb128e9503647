/* rumor-train for language models (see train_lm.h): GPT on text or tokens,
 * with a progress line in tokens/s, validation loss every --eval-every
 * steps, checkpoints and resume. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "log.h"
#include "model.h"
#include "progress.h"
#include "source.h"
#include "stage.h"
#include "step.h"
#include "train_lm.h"

struct lm_run {
    rumor_device_t *dev;
    rumor_source_t *src;
    rumor_model_t *model;
    rumor_stage_t *stage;
    rumor_step_t *step;
    rumor_metrics_t metrics;
};

static void lm_free(struct lm_run *r)
{
    rumor_metrics_close(&r->metrics);
    rumor_step_destroy(&r->step);
    rumor_stage_destroy(&r->stage);
    rumor_model_destroy(&r->model);
    rumor_source_destroy(&r->src);
    rumor_device_close(&r->dev);
}

static int lm_fail(struct lm_run *r, const char *what)
{
    fprintf(stderr, "rumor-train: %s: %s\n", what, rumor_err_msg());
    rumor_debug("error trace: %s", rumor_err_trace());
    lm_free(r);
    return 1;
}

static int save(struct lm_run *r, const struct rumor_lm_opts *lm, const struct rumor_train_opts *o,
                long step, int rank)
{
    rumor_ckpt_info_t ci;
    memset(&ci, 0, sizeof ci);
    ci.round = step;
    ci.optim_t = r->stage->opt->t;
    ci.rank = rank;
    snprintf(ci.optimizer, sizeof ci.optimizer, "%s", o->optimizer);
    snprintf(ci.swarm, sizeof ci.swarm, "train");
    return rumor_ckpt_save(lm->checkpoint_dir, r->stage, r->stage->opt, &ci,
                           lm->keep_checkpoints > 0 ? lm->keep_checkpoints : 3);
}

int rumor_train_lm(const struct rumor_train_opts *o, const struct rumor_lm_opts *lm, int rank,
                   int world)
{
    struct lm_run r;
    memset(&r, 0, sizeof r);
    char devspec[32];
    const char *device = o->device;
    if (!device) {
        snprintf(devspec, sizeof devspec, o->threads ? "cpu:%d" : "cpu", o->threads);
        device = devspec;
    }
    if (rumor_device_open(device, &r.dev) < 0)
        return lm_fail(&r, "device");
    /* the model first (its context is the data's window), with the data's
     * vocabulary unless the spec names one */
    int data_vocab = !strncmp(o->data, "text:", 5) ? 256 : 50257;
    if (rumor_model_create(o->model, data_vocab, &r.model) < 0)
        return lm_fail(&r, "model");
    if (r.model->kind != RUMOR_MODEL_GPT) {
        rumor_err_set(RUMOR_EINVAL, "'%s' is not a language model; --data %s is text (use "
                      "--model gpt:layers=L,dim=D,heads=H,ctx=T)", o->model, o->data);
        return lm_fail(&r, "model");
    }
    double t0 = rumor_now();
    rumor_source_config_t sc;
    rumor_source_config_default(&sc);
    sc.spec = o->data;
    sc.seed = (uint64_t)o->seed;
    sc.rank = rank;
    sc.world = world;
    sc.batch = o->batch;
    sc.seq = r.model->ctx;
    sc.vocab = r.model->vocab;
    if (rumor_source_open(&sc, &r.src) < 0)
        return lm_fail(&r, "data");
    long tokens_per_step = (long)o->batch * r.model->ctx;
    long per_epoch = rumor_source_train_size(r.src) / tokens_per_step;
    if (per_epoch < 1)
        per_epoch = 1;
    long total = lm->steps > 0 ? lm->steps : per_epoch * o->epochs;
    struct rumor_train_opts oo = *o;
    oo.epochs = 1;
    rumor_optim_config_t oc;
    if (rumor_train_opts_optim(&oo, total, &oc) < 0)
        return lm_fail(&r, "optimizer");
    /* warm-up given in epochs of the whole run */
    oc.warmup_steps = (long)(o->warmup_epochs * (double)per_epoch);
    if (oc.warmup_steps > total / 2)
        oc.warmup_steps = total / 10;
    rumor_stage_config_t stc = { .model = r.model, .dev = r.dev, .first = 0,
                                 .last = r.model->nblocks, .max_B = o->batch,
                                 .T = r.model->ctx, .slots = 1, .seed = (uint64_t)o->seed,
                                 .optim = &oc };
    if (rumor_stage_create(&stc, &r.stage) < 0)
        return lm_fail(&r, "model");
    if (rumor_step_create(r.stage, r.dev->kind == RUMOR_DEV_CPU ? r.dev->nthreads : 1, &r.step) < 0)
        return lm_fail(&r, "workers");
    long step = 0;
    if (lm->resume) {
        rumor_ckpt_info_t ci;
        if (rumor_ckpt_load(lm->resume, r.stage, r.stage->opt, &ci) < 0)
            return lm_fail(&r, "resume");
        step = ci.round;
        fprintf(stderr, "rumor-train: resumed from %s at step %ld\n", lm->resume, step);
    }
    if (o->metrics && (rumor_metrics_open(&r.metrics, o->metrics) < 0 ||
                       rumor_metrics_tag_int(&r.metrics, "rank", rank) < 0 ||
                       rumor_metrics_tag_int(&r.metrics, "world", world) < 0))
        return lm_fail(&r, "metrics");
    if (!o->quiet) {
        printf("rumor-train: %s, %zu parameters, %s, %d worker%s\n", r.model->spec,
               r.model->nparams, r.dev->name, rumor_step_workers(r.step),
               rumor_step_workers(r.step) == 1 ? "" : "s");
        printf("rumor-train: %s (shard %d of %d), loaded in %.2f s\n", rumor_source_describe(r.src),
               rank, world, rumor_now() - t0);
        printf("rumor-train: %s lr %g, batch %d x %d tokens, %ld steps\n", o->optimizer,
               (double)oc.lr, o->batch, r.model->ctx, total);
        fflush(stdout);
    }
    rumor_metrics_write(&r.metrics,
                        "\"event\":\"start\",\"model\":\"%s\",\"params\":%zu,\"device\":\"%s\","
                        "\"steps\":%ld,\"batch\":%d,\"ctx\":%d,\"optimizer\":\"%s\",\"lr\":%g,"
                        "\"seed\":%llu",
                        r.model->spec, r.model->nparams, r.dev->name, total, o->batch,
                        r.model->ctx, o->optimizer, (double)oc.lr, (unsigned long long)o->seed);
    rumor_progress_t prog;
    rumor_progress_begin(&prog, stdout, total - step, o->progress, o->quiet);
    double start = rumor_now(), val = NAN, loss_ema = NAN;
    long tokens = 0, first = step;
    int eval_every = lm->eval_every > 0 ? lm->eval_every : 100;
    while (step < total) {
        rumor_batch_t b;
        if (rumor_source_next(r.src, step, &b) <= 0)
            return lm_fail(&r, "data");
        float loss;
        if (rumor_step_grads(r.step, &b, step, &loss) < 0)
            return lm_fail(&r, "training step");
        if (!isfinite(loss)) {
            rumor_err_set(RUMOR_EINVAL, "loss is %g at step %ld: lower --lr (now %g)",
                          (double)loss, step, (double)oc.lr);
            return lm_fail(&r, "training diverged");
        }
        float lr = rumor_optim_lr_at(&oc, r.stage->opt->t);
        if (rumor_step_update(r.step) < 0)
            return lm_fail(&r, "optimizer step");
        step++;
        tokens += rumor_batch_targets(&b);
        loss_ema = isnan(loss_ema) ? loss : 0.9 * loss_ema + 0.1 * loss;
        int evaluate = step % eval_every == 0 || step == total;
        if (evaluate) {
            if (rumor_train_validate(r.step, r.src, o->batch, lm->eval_batches, &val) < 0)
                return lm_fail(&r, "validation");
            rumor_metrics_write(&r.metrics,
                                "\"event\":\"eval\",\"step\":%ld,\"val_loss\":%.6g,"
                                "\"train_loss\":%.6g",
                                step, val, loss_ema);
            if (lm->checkpoint_dir && save(&r, lm, o, step, rank) < 0)
                return lm_fail(&r, "checkpoint");
        }
        double rate = (double)tokens / (rumor_now() - start);
        char vals[32] = "";
        if (!isnan(val))
            snprintf(vals, sizeof vals, "  val %.4f", val);
        if (rumor_progress_update(&prog, step - first, evaluate,
                                  "step %ld/%ld  loss %.4f%s  lr %.3g  %.0f tok/s", step, total,
                                  loss_ema, vals, (double)lr, rate))
            rumor_metrics_write(&r.metrics,
                                "\"event\":\"step\",\"step\":%ld,\"loss\":%.6g,\"lr\":%.6g,"
                                "\"tokens_per_s\":%.1f",
                                step, (double)loss, (double)lr, rate);
    }
    double secs = rumor_now() - start;
    printf("validation loss %.4f (%.4f bits per token) after %ld steps in %.1f s, %.0f tokens/s\n",
           val, val / log(2.0), step, secs, secs > 0 ? (double)tokens / secs : 0.0);
    rumor_metrics_write(&r.metrics,
                        "\"event\":\"done\",\"val_loss\":%.6g,\"steps\":%ld,\"seconds\":%.3f,"
                        "\"tokens_per_s\":%.1f",
                        val, step, secs, secs > 0 ? (double)tokens / secs : 0.0);
    lm_free(&r);
    return 0;
}

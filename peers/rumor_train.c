/* rumor-train: trains a model on Fashion-MNIST in one process.
 *
 * The single-process core that rumor-peer builds on: load and shard the data,
 * build the model on a device, and run epochs of SGD/AdamW with a progress
 * line, a test evaluation per epoch and optional JSON-lines metrics. */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "data.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "progress.h"
#include "step.h"
#include "train_cmds.h"
#include "train_lm.h"
#include "trainopts.h"

static const char usage_head[] =
    "Usage: rumor-train [OPTION]...\n"
    "Train a model on Fashion-MNIST in one process and report its test accuracy.\n"
    "\n"
    "The data are the IDX files of Debian's dataset-fashion-mnist package\n"
    "(gzip'd or plain). Each epoch visits the training shard once in a seeded\n"
    "random order, then evaluates on the full test set. The same seed gives the\n"
    "same run, bit for bit, on the same device and thread count.\n"
    "\n"
    "Sharding:\n"
    "  --rank R, --world W    train on shard R of W (default: 0 of 1)\n"
    "\n"
    "Language models (--data text:FILE[,FILE...] or tokens:TRAIN.bin[,VAL.bin],\n"
    "--model gpt:layers=L,dim=D,heads=H,ctx=T[,vocab=V][,dropout=P]):\n"
    "  --steps N              optimizer steps (default: --epochs passes over the tokens)\n"
    "  --eval-every N         steps between validation losses (default 100)\n"
    "  --eval-batches N       validation batches per evaluation, 0 = all (default 0)\n"
    "  --checkpoint-dir DIR   write a checkpoint at every evaluation\n"
    "  --keep-checkpoints N   how many to keep (default 3)\n"
    "  --resume FILE          start from a checkpoint (its step, parameters, optimizer)\n"
    "\n"
    "Subcommands on a checkpoint (see rumor-train sample --help):\n"
    "  rumor-train sample CKPT [--prompt TEXT] [--tokens N] [--temperature X] [--seed S]\n"
    "  rumor-train eval CKPT [--data SPEC] [--batch N] [--eval-batches N]\n"
    "  rumor-train export CKPT DIR   Hugging Face GPT-2 format\n"
    "\n";

static const char usage_tail[] =
    "\n"
    "Environment:\n"
    "  OPENBLAS_CORETYPE      OpenBLAS kernels to use; when OpenBLAS runs slower kernels\n"
    "                         than the CPU supports (also because this variable says\n"
    "                         so), rumor-train sets it to the better core and restarts\n"
    "  RUMOR_BLAS_AUTOTUNE    0 keeps whatever kernels OpenBLAS chose\n"
    "  RUMOR_LOG              log level when --log-level is not given\n"
    "\n"
    "Exit status: 0 on success, 1 on a runtime error, 2 on bad usage.\n"
    "\n"
    "Example:\n"
    "  rumor-train --epochs 3 --optimizer adamw --metrics run.jsonl\n";

struct options {
    struct rumor_train_opts t;
    struct rumor_lm_opts lm;
    int rank, world;
};

static const rumor_opt_t option_table[] = {
    { "rank", 0, RUMOR_OPT_INT, offsetof(struct options, rank), 0, 1 << 20, NULL, 0 },
    { "world", 0, RUMOR_OPT_INT, offsetof(struct options, world), 1, 1 << 20, NULL, 0 },
    { "steps", 0, RUMOR_OPT_LONG, offsetof(struct options, lm.steps), 1, 1e12, NULL, 0 },
    { "eval-every", 0, RUMOR_OPT_INT, offsetof(struct options, lm.eval_every), 1, 1 << 30, NULL, 0 },
    { "eval-batches", 0, RUMOR_OPT_INT, offsetof(struct options, lm.eval_batches), 0, 1 << 30, NULL, 0 },
    { "checkpoint-dir", 0, RUMOR_OPT_STR, offsetof(struct options, lm.checkpoint_dir), 0, 0, NULL, 0 },
    { "keep-checkpoints", 0, RUMOR_OPT_INT, offsetof(struct options, lm.keep_checkpoints), 1, 1000, NULL, 0 },
    { "resume", 0, RUMOR_OPT_STR, offsetof(struct options, lm.resume), 0, 0, NULL, 0 },
    RUMOR_TRAIN_OPTIONS(struct options, t),
    { NULL, 0, 0, 0, 0, 0, NULL, 0 },
};

/* Parses the command line; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    rumor_train_opts_default(&o->t);
    o->world = 1;
    int rc = rumor_train_opts_parse("rumor-train", option_table, o, argc, argv, usage_head, usage_tail);
    if (rc >= 0)
        return rc;
    if (o->rank >= o->world) {
        fprintf(stderr, "rumor-train: --rank %d must be less than --world %d\n", o->rank, o->world);
        return 2;
    }
    rumor_train_opts_apply_log(&o->t);
    return -1;
}

/* Everything a run owns, released in one place. */
struct run {
    rumor_device_t *dev;
    rumor_dataset_t *train_full, *train, *test;
    rumor_loader_t *loader;
    rumor_model_t *model;
    rumor_stage_t *stage;
    rumor_step_t *step;
    rumor_metrics_t metrics;
};

static void run_free(struct run *r)
{
    rumor_metrics_close(&r->metrics);
    rumor_step_destroy(&r->step);
    rumor_stage_destroy(&r->stage);
    rumor_model_destroy(&r->model);
    rumor_loader_destroy(&r->loader);
    rumor_dataset_destroy(&r->train);
    rumor_dataset_destroy(&r->train_full);
    rumor_dataset_destroy(&r->test);
    rumor_device_close(&r->dev);
}

static int fail(struct run *r, const char *what)
{
    fprintf(stderr, "rumor-train: %s: %s\n", what, rumor_err_msg());
    rumor_debug("error trace: %s", rumor_err_trace());
    run_free(r);
    return 1;
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    int sub = rumor_train_subcommand(argc, argv);
    if (sub >= 0)
        return sub;
    struct options opts;
    int rc = parse_args(argc, argv, &opts);
    if (rc >= 0)
        return rc;
    struct rumor_train_opts o = opts.t;
    if (rumor_train_is_lm(o.data))
        return rumor_train_lm(&o, &opts.lm, opts.rank, opts.world);

    struct run r;
    memset(&r, 0, sizeof r);
    char devspec[32];
    if (!o.device) {
        snprintf(devspec, sizeof devspec, o.threads ? "cpu:%d" : "cpu", o.threads);
        o.device = devspec;
    }
    if (rumor_device_open(o.device, &r.dev) < 0)
        return fail(&r, "device");

    /* ---- data: load, shard, standardize */
    double t0 = rumor_now();
    if (rumor_train_opts_data(&o, opts.rank, opts.world, &r.train, &r.test, NULL) < 0)
        return fail(&r, "data");
    if (rumor_loader_create(r.train, o.batch, (uint64_t)o.seed, 1, 0, &r.loader) < 0)
        return fail(&r, "loader");

    /* ---- model and optimizer */
    if (rumor_model_create(o.model, 0, &r.model) < 0)
        return fail(&r, "model");
    if (rumor_train_opts_check_model(r.model, r.train) < 0)
        return fail(&r, "model");
    long steps_per_epoch = rumor_loader_batches_per_epoch(r.loader);
    long total_steps = steps_per_epoch * o.epochs;
    rumor_optim_config_t oc;
    if (rumor_train_opts_optim(&o, steps_per_epoch, &oc) < 0)
        return fail(&r, "optimizer");
    rumor_stage_config_t sc = { .model = r.model, .dev = r.dev, .first = 0,
                                .last = r.model->nblocks, .max_B = o.batch, .T = 1, .slots = 1,
                                .seed = (uint64_t)o.seed, .optim = &oc };
    if (rumor_stage_create(&sc, &r.stage) < 0)
        return fail(&r, "model");
    /* One worker per CPU thread, each with one BLAS thread (see step.h). */
    if (rumor_step_create(r.stage, r.dev->kind == RUMOR_DEV_CPU ? r.dev->nthreads : 1, &r.step) < 0)
        return fail(&r, "workers");
    /* the shard in every event: runs of several shards may share the file */
    if (o.metrics && (rumor_metrics_open(&r.metrics, o.metrics) < 0 ||
                      rumor_metrics_tag_int(&r.metrics, "rank", opts.rank) < 0 ||
                      rumor_metrics_tag_int(&r.metrics, "world", opts.world) < 0))
        return fail(&r, "metrics");

    if (!o.quiet) {
        printf("rumor-train: %s, %zu parameters, %s, %d worker%s\n", o.model, r.model->nparams,
               r.dev->name, rumor_step_workers(r.step), rumor_step_workers(r.step) == 1 ? "" : "s");
        printf("rumor-train: %d training examples (shard %d of %d%s), %d test, loaded in %.2f s\n",
               r.train->n, opts.rank, opts.world, o.shuffle_labels ? ", labels shuffled" : "",
               r.test->n, rumor_now() - t0);
        printf("rumor-train: %s lr %g, batch %d, %d epochs of %ld steps\n", o.optimizer,
               (double)oc.lr, o.batch, o.epochs, steps_per_epoch);
        fflush(stdout);
    }
    rumor_metrics_write(&r.metrics,
                        "\"event\":\"start\",\"model\":\"%s\",\"params\":%zu,\"device\":\"%s\","
                        "\"train_examples\":%d,\"test_examples\":%d,\"epochs\":%d,\"batch\":%d,"
                        "\"optimizer\":\"%s\",\"lr\":%g,\"seed\":%llu",
                        o.model, r.model->nparams, r.dev->name, r.train->n, r.test->n, o.epochs,
                        o.batch, o.optimizer, (double)oc.lr, (unsigned long long)o.seed);

    /* ---- training loop */
    rumor_progress_t prog;
    rumor_progress_begin(&prog, stdout, total_steps, o.progress, o.quiet);
    double acc = 0, test_loss = 0, run_start = rumor_now();
    long step = 0, examples = 0;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        double epoch_start = rumor_now(), loss_sum = 0;
        long epoch_examples = 0;
        const float *x;
        const int32_t *y;
        int b;
        while ((b = rumor_loader_next(r.loader, &x, &y)) > 0) {
            float loss;
            rumor_batch_t batch = { .kind = RUMOR_BATCH_IMAGES, .n = b, .width = r.train->dim,
                                    .x = x, .y = y };
            if (rumor_step_grads(r.step, &batch, step, &loss) < 0)
                return fail(&r, "training step");
            if (!isfinite(loss)) {
                rumor_err_set(RUMOR_EINVAL, "loss is %g at step %ld: lower --lr (now %g)",
                              (double)loss, step, (double)oc.lr);
                return fail(&r, "training diverged");
            }
            float lr = rumor_optim_lr_at(&oc, r.stage->opt->t);
            if (rumor_step_update(r.step) < 0)
                return fail(&r, "optimizer step");
            step++;
            examples += b;
            epoch_examples += b;
            loss_sum += (double)loss * b;
            double rate = (double)examples / (rumor_now() - run_start);
            if (rumor_progress_update(&prog, step, 0,
                                      "epoch %d/%d  step %ld/%ld  loss %.4f  lr %.4g  %.0f ex/s",
                                      epoch, o.epochs, step, total_steps, (double)loss, (double)lr,
                                      rate))
                rumor_metrics_write(&r.metrics,
                                    "\"event\":\"step\",\"epoch\":%d,\"step\":%ld,\"loss\":%.6g,"
                                    "\"lr\":%.6g,\"examples_per_s\":%.1f",
                                    epoch, step, (double)loss, (double)lr, rate);
        }
        if (rumor_train_evaluate(r.step, r.test, o.batch, &acc, &test_loss) < 0)
            return fail(&r, "evaluation");
        double secs = rumor_now() - epoch_start;
        double train_loss = epoch_examples ? loss_sum / (double)epoch_examples : 0;
        if (!o.quiet)
            rumor_progress_print(&prog,
                                 "epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy "
                                 "%.2f%%  %.1f s  %.0f ex/s",
                                 epoch, o.epochs, train_loss, test_loss, 100.0 * acc, secs,
                                 (double)epoch_examples / secs);
        rumor_metrics_write(&r.metrics,
                            "\"event\":\"epoch\",\"epoch\":%d,\"step\":%ld,\"train_loss\":%.6g,"
                            "\"test_loss\":%.6g,\"test_accuracy\":%.6f,\"seconds\":%.3f,"
                            "\"examples_per_s\":%.1f",
                            epoch, step, train_loss, test_loss, acc, secs,
                            (double)epoch_examples / secs);
    }
    double total = rumor_now() - run_start;
    printf("test accuracy %.2f%% (test loss %.4f) after %d epoch%s in %.1f s, %.0f examples/s\n",
           100.0 * acc, test_loss, o.epochs, o.epochs == 1 ? "" : "s", total,
           (double)examples / total);
    rumor_metrics_write(&r.metrics,
                        "\"event\":\"done\",\"test_accuracy\":%.6f,\"test_loss\":%.6g,"
                        "\"seconds\":%.3f,\"examples_per_s\":%.1f",
                        acc, test_loss, total, (double)examples / total);
    run_free(&r);
    return 0;
}

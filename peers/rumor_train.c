/* rumor-train: trains a model in one process: an MLP on Fashion-MNIST or a
 * GPT on text. The options become a trainer (src/trainer.h), which runs
 * the whole job; this file parses, reports and hands out the subcommands. */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "dirs.h"
#include "checkpoint.h"
#include "log.h"
#include "progress.h"
#include "train_cmds.h"
#include "trainer.h"
#include "trainopts.h"

static const char usage_head[] =
    "Usage: rumor-train [OPTION]...\n"
    "Train a model in one process: an MLP on Fashion-MNIST (the default), reporting\n"
    "its test accuracy, or a GPT on text, reporting its validation loss.\n"
    "\n"
    "Images are the IDX files of Debian's dataset-fashion-mnist package (gzip'd or\n"
    "plain); text is any files of bytes (--data text:FILE[,FILE...]; the last 10%\n"
    "of each is validation) or llm.c token shards (--data tokens:TRAIN.bin[,VAL.bin])\n"
    "with --model gpt:layers=L,dim=D,heads=H,ctx=T[,vocab=V][,dropout=P]. The batch\n"
    "of step k depends only on the seed, the shard and k: the same seed gives the\n"
    "same run, bit for bit, on the same device and thread count, and a run resumed\n"
    "from a checkpoint ends where the unbroken one does.\n"
    "\n"
    "Sharding:\n"
    "  --rank R, --world W    train on shard R of W (default: 0 of 1)\n"
    "\n"
    "Run:\n"
    "  --steps N              optimizer steps (default: --epochs passes over the shard)\n"
    "  --eval-every N         steps between evaluations (default: each epoch's end for\n"
    "                         images, 100 for text); and at the end\n"
    "  --eval-batches N       validation batches per evaluation, 0 = all (default 0)\n"
    "  --checkpoint-dir DIR   write a checkpoint at every evaluation (DIR is created\n"
    "                         and tried at start: one that cannot be written is bad\n"
    "                         usage)\n"
    "  --keep-checkpoints N   how many to keep (default 3)\n"
    "  --resume FILE          start from a checkpoint (its step, parameters, optimizer);\n"
    "                         one at or past the run's last step is an error: give\n"
    "                         --steps or --epochs beyond it\n"
    "\n"
    "Subcommands on a checkpoint (see rumor-train sample --help):\n"
    "  rumor-train sample CKPT [--prompt TEXT] [--tokens N] [--temperature X] [--seed S]\n"
    "  rumor-train eval CKPT [--data SPEC] [--batch N] [--eval-batches N]\n"
    "  rumor-train export CKPT DIR [--force]   Hugging Face GPT-2 format\n"
    "and on a pipeline schedule, without training (rumor-train schedule --help):\n"
    "  rumor-train schedule --schedule S --stages P --microbatches M [--svg FILE]\n"
    "and the devices this machine offers (the CPU and each GPU):\n"
    "  rumor-train devices [--json]\n"
    "and text files to llm.c token shards (rumor-train tokenize --help):\n"
    "  rumor-train tokenize FILE... --tokenizer gpt2:DIR --out DIR [--threads T]\n"
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
    int rank, world;
    long steps;
    int eval_every, eval_batches, keep_checkpoints;
    const char *checkpoint_dir, *resume;
};

static const rumor_opt_t option_table[] = {
    { "rank", 0, RUMOR_OPT_INT, offsetof(struct options, rank), 0, 1 << 20, NULL, 0 },
    { "world", 0, RUMOR_OPT_INT, offsetof(struct options, world), 1, 1 << 20, NULL, 0 },
    { "steps", 0, RUMOR_OPT_LONG, offsetof(struct options, steps), 1, 1e12, NULL, 0 },
    { "eval-every", 0, RUMOR_OPT_INT, offsetof(struct options, eval_every), 1, 1 << 30, NULL, 0 },
    { "eval-batches", 0, RUMOR_OPT_INT, offsetof(struct options, eval_batches), 0, 1 << 30, NULL, 0 },
    { "checkpoint-dir", 0, RUMOR_OPT_PATH, offsetof(struct options, checkpoint_dir), 0, 0, NULL, 0 },
    { "keep-checkpoints", 0, RUMOR_OPT_INT, offsetof(struct options, keep_checkpoints), 1, 1000, NULL, 0 },
    { "resume", 0, RUMOR_OPT_PATH, offsetof(struct options, resume), 0, 0, NULL, 0 },
    RUMOR_TRAIN_OPTIONS(struct options, t),
    { NULL, 0, 0, 0, 0, 0, NULL, 0 },
};

/* Parses the command line; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    rumor_train_opts_default(&o->t);
    o->world = 1;
    o->keep_checkpoints = 3;
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

static int fail(rumor_trainer_t **t, rumor_metrics_t *m)
{
    fprintf(stderr, "rumor-train: %s\n", rumor_err_msg());
    rumor_debug("error trace: %s", rumor_err_trace());
    rumor_metrics_close(m);
    rumor_trainer_destroy(t);
    return 1;
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    int sub = rumor_train_subcommand(argc, argv);
    if (sub >= 0)
        return sub;
    struct options o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    rumor_trainer_config_t tc;
    rumor_trainer_t *t = NULL;
    rumor_metrics_t metrics;
    memset(&metrics, 0, sizeof metrics);
    if (rumor_train_opts_config(&o.t, o.rank, o.world, &tc) < 0) { /* bad usage */
        fprintf(stderr, "rumor-train: %s\n", rumor_err_msg());
        return 2;
    }
    tc.steps = o.steps;
    tc.eval_batches = o.eval_batches;
    /* where the run writes, before it loads anything: a checkpoint that
     * cannot be written would otherwise fail hundreds of steps in */
    if (o.checkpoint_dir && rumor_dir_prepare(o.checkpoint_dir) < 0) {
        fprintf(stderr, "rumor-train: --checkpoint-dir: %s\n", rumor_err_msg());
        return 2;
    }
    double t0 = rumor_now();
    if (rumor_trainer_create(&tc, &t) < 0)
        return fail(&t, &metrics);
    long first = 0;
    if (o.resume) {
        if (rumor_trainer_resume(t, o.resume, &first) < 0) {
            rumor_err_prefix(rumor_err_code(), "resume");
            return fail(&t, &metrics);
        }
        if (first >= rumor_trainer_total_steps(t)) { /* nothing to do is not a run that succeeded */
            char end[64];
            if (o.steps)
                snprintf(end, sizeof end, "--steps %ld", o.steps);
            else
                snprintf(end, sizeof end, "--epochs %d of %ld steps", o.t.epochs,
                         rumor_trainer_steps_per_epoch(t));
            rumor_err_set(RUMOR_ESTATE, "resume: %s is at step %ld, already %s this run's last "
                          "step %ld (%s): nothing to train; give --steps (or --epochs) beyond "
                          "step %ld to go on", o.resume, first,
                          first == rumor_trainer_total_steps(t) ? "at" : "past", rumor_trainer_total_steps(t), end, first);
            return fail(&t, &metrics);
        }
        /* stderr, even with -q: which file a run continues matters */
        fprintf(stderr, "rumor-train: resumed from %s at step %ld\n", o.resume, first);
    }
    /* the shard in every event: runs of several shards may share the file */
    if (o.t.metrics && (rumor_metrics_open(&metrics, o.t.metrics) < 0 ||
                        rumor_metrics_tag_int(&metrics, "rank", o.rank) < 0 ||
                        rumor_metrics_tag_int(&metrics, "world", o.world) < 0)) {
        rumor_err_prefix(rumor_err_code(), "metrics");
        return fail(&t, &metrics);
    }
    if (!o.t.quiet) {
        rumor_trainer_describe(t, stdout, "rumor-train");
        printf("rumor-train: shard %d of %d, loaded in %.2f s\n", o.rank, o.world,
               rumor_now() - t0);
        fflush(stdout);
    }
    rumor_run_config_t rc_run = {
        .first = first,
        /* images: at each epoch's end; text: every 100 steps */
        .eval_every = o.eval_every ? o.eval_every : rumor_trainer_is_lm(t) ? 100 : 0,
        .checkpoint_dir = o.checkpoint_dir,
        .keep_checkpoints = o.keep_checkpoints,
        .optimizer = o.t.optimizer,
        .out = stdout,
        .progress = o.t.progress,
        .quiet = o.t.quiet,
        .metrics = &metrics,
        .trace = o.t.trace,
    };
    if (rumor_trainer_run(t, &rc_run, NULL) < 0)
        return fail(&t, &metrics);
    rumor_metrics_close(&metrics);
    rumor_trainer_destroy(&t);
    return 0;
}

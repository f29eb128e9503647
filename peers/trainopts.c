/* Training options shared by rumor-train and rumor-peer (see trainopts.h). */
#include "trainopts.h"

#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

const char rumor_train_opts_help[] =
    "Data:\n"
    "  --data SPEC            fashion-mnist[:DIR] or DIR: Fashion-MNIST's IDX files,\n"
    "                         gzip'd or plain (default: /usr/share/datasets/fashion-mnist);\n"
    "                         text:FILE[,FILE...] or tokens:TRAIN.bin[,VAL.bin] for\n"
    "                         language models (with --model gpt:...); tokens:DIR\n"
    "                         reads rumor-train tokenize's DIR/train_*.bin and\n"
    "                         DIR/val_*.bin, tokens:'GLOB' every shard it matches\n"
    "  --train-limit N        use at most N examples of the training shard\n"
    "  --shuffle-labels       permute the training labels: a control run that must\n"
    "                         not learn (test accuracy near 10%)\n"
    "\n"
    "Model and device:\n"
    "  --model SPEC           mlp:D0-D1-...-Dn[:relu|:gelu][:dropout=P]\n"
    "                         (default: mlp:784-256-256-10), or a GPT-2:\n"
    "                         gpt:layers=L,dim=D,heads=H,ctx=T[,vocab=V][,dropout=P]\n"
    "                         (vocab= defaults to the data's; on text it must be 256),\n"
    "                         or GPT-2's sizes: gpt2, gpt2-medium, gpt2-large (124M,\n"
    "                         350M, 774M; vocab 50257, ctx 1024), fields replaceable:\n"
    "                         gpt2:ctx=256\n"
    "  --allow-vocab-mismatch\n"
    "                         train a GPT whose vocab= is larger than the text's 256\n"
    "                         (an output layer for tokens the data never holds)\n"
    "  --device SPEC          cpu, cpu:THREADS, cuda, cuda:N or auto (default: cpu);\n"
    "                         a CPU spec may end in :slow=X (X times slower), a GPU's\n"
    "                         in :fp32, :tf32 or :bf16 (its precision)\n"
    "  --precision P          how GPUs compute matrix products: fp32 (default), tf32\n"
    "                         or bf16 (tensor cores; fp32 accumulation). Parameters,\n"
    "                         gradients, optimizer state and gossip stay fp32, so\n"
    "                         peers of any precision share a swarm; the CPU is fp32.\n"
    "                         A device's own suffix (cuda:0:bf16) wins\n"
    "  --threads N            CPU worker threads; each takes a share of every batch\n"
    "                         with one BLAS thread\n"
    "\n"
    "Pipeline (the model cut into stages across devices; docs/pipeline.md):\n"
    "  --stages N             pipeline stages (default: one per --devices entry, else 1:\n"
    "                         no pipeline); with --devices, as many as it lists\n"
    "  --devices LIST         the stages' devices, one a stage, e.g. cpu:1,cpu:1 or\n"
    "                         cuda:0,cuda:1 or cpu:1,cuda:0 (one may repeat; default:\n"
    "                         cpu:1 for each stage)\n"
    "  --schedule S           gpipe, 1f1b, interleaved[:V], zb-h1 or zbv (default\n"
    "                         1f1b); rumor-train schedule shows them\n"
    "  --microbatches M       micro-batches a step (default: 2 x stages), 1 to 4096\n"
    "  --partition P          uniform (equal blocks, the default), params (equal\n"
    "                         parameters), profile (time every block on the stages'\n"
    "                         devices and cut where the slowest stage is fastest)\n"
    "                         or block ranges like 0-3,4-7\n"
    "\n"
    "Optimization:\n"
    "  --epochs N             passes over the training shard (default: 10)\n"
    "  --batch N              examples per step (default: 128; rumor-peer: 64)\n"
    "  --optimizer NAME       sgd or adamw (default: sgd)\n"
    "  --lr X                 peak learning rate (default: 0.05 for sgd, rumor-peer 0.1;\n"
    "                         0.001 for adamw)\n"
    "  --momentum X           SGD momentum (default: 0.9)\n"
    "  --no-nesterov          plain momentum instead of Nesterov's\n"
    "  --weight-decay X       SGD: L2 penalty; AdamW: decoupled decay\n"
    "                         (default: 5e-4 for sgd, 0.01 for adamw)\n"
    "  --beta1 X, --beta2 X   AdamW moment decay rates (default: 0.9, 0.999)\n"
    "  --warmup-epochs X      linear warm-up length (default: 0.2)\n"
    "  --lr-schedule NAME     cosine (decay to --min-lr-ratio at the end) or\n"
    "                         constant (default: cosine)\n"
    "  --min-lr-ratio X       final learning rate / peak (default: 0.01)\n"
    "  --seed N               initialization, shuffling and dropout seed (default: 1)\n"
    "\n"
    "Output:\n"
    "  --metrics FILE         append JSON lines, one event a line: start, step\n"
    "                         (rumor-train) or round (rumor-peer), one with each\n"
    "                         progress line, epoch, leave (rumor-peer) and done;\n"
    "                         - for standard output. Appended to, never truncated:\n"
    "                         peers may share one file (an event is one write, so\n"
    "                         lines never mix; each names its rank); remove it to\n"
    "                         start anew\n"
    "  --trace FILE.json      write Chrome trace events (open in https://ui.perfetto.dev\n"
    "                         or chrome://tracing): every F, B and W of every\n"
    "                         pipeline stage, or each step's compute, and for\n"
    "                         rumor-peer each round's gossip (waiting, mixing,\n"
    "                         its ranges arriving), a row each, to see where the\n"
    "                         time goes; peers' traces line up by their\n"
    "                         clock_origin event\n"
    "  --progress SECS        seconds between progress lines (default: 0.5 on a\n"
    "                         terminal, 10 otherwise)\n"
    "  -q, --quiet            print only the final result\n"
    "  --log-level LEVEL      error, warn, info or debug (default: info; or RUMOR_LOG)\n"
    "  -c, --config FILE      read options from an INI file first: one 'key = value'\n"
    "                         a line, keys named like the long options (any\n"
    "                         section); flags on the command line win. Relative\n"
    "                         paths in the file (peers-file, keys, allow, data,\n"
    "                         checkpoint-dir, metrics, file:PATH, ...) are taken\n"
    "                         from the file's directory, those on the command\n"
    "                         line from the working directory\n"
    "  -h, --help             show this help and exit\n"
    "  -V, --version          show the version and exit\n";

int rumor_train_opts_parse(const char *prog, const rumor_opt_t *table, void *dst, int argc,
                           char **argv, const char *help_head, const char *help_tail)
{
    switch (rumor_opts_parse(prog, table, dst, argc, argv)) {
    case RUMOR_OPTS_HELP:
        fputs(help_head, stdout);
        fputs(rumor_train_opts_help, stdout);
        fputs(help_tail, stdout);
        return 0;
    case RUMOR_OPTS_VERSION:
        printf("%s (rumor) %s\n", prog, PACKAGE_VERSION);
        return 0;
    case RUMOR_OPTS_ERROR:
        return 2;
    }
    return -1;
}

void rumor_train_opts_default(struct rumor_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->data = "fashion-mnist";
    o->model = "mlp:784-256-256-10";
    o->optimizer = "sgd";
    o->lr_schedule = "cosine";
    o->epochs = 10;
    o->batch = 128;
    o->nesterov = 1;
    o->lr = o->weight_decay = -1; /* per optimizer */
    o->sgd_lr = 0.05;
    o->momentum = 0.9;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->warmup_epochs = 0.2;
    o->min_lr_ratio = 0.01;
    o->progress = -1;
    o->seed = 1;
}

void rumor_train_opts_apply_log(const struct rumor_train_opts *o)
{
    rumor_log_level l;
    if (o->log_level && rumor_log_parse_level(o->log_level, &l) == 0)
        rumor_log_set_level(l);
}

int rumor_train_opts_check_output(const char *opt, const char *path)
{
    struct stat sb;
    if (!strcmp(path, "-"))
        return 0;
    if (stat(path, &sb) == 0)
        return S_ISDIR(sb.st_mode) ? rumor_err_set(RUMOR_EINVAL, "%s %s: is a directory", opt,
                                                   path)
               : access(path, W_OK) < 0 ? rumor_err_sys(RUMOR_EINVAL, "%s %s", opt, path)
                                        : 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *up = !slash ? "." : slash == dir ? "/" : (*slash = '\0', dir);
    if (stat(up, &sb) < 0 || !S_ISDIR(sb.st_mode))
        return rumor_err_set(RUMOR_EINVAL, "%s %s: there is no directory %s", opt, path, up);
    if (access(up, W_OK | X_OK) < 0)
        return rumor_err_sys(RUMOR_EINVAL, "%s %s: cannot create it in %s", opt, path, up);
    return 0;
}

int rumor_train_opts_config(const struct rumor_train_opts *o, int rank, int world,
                            rumor_trainer_config_t *c)
{
    rumor_trainer_config_default(c);
    c->data = o->data;
    c->model = o->model;
    c->device = o->device;
    c->threads = o->threads;
    c->rank = rank;
    c->world = world;
    c->seed = (uint64_t)o->seed;
    c->batch = o->batch;
    c->epochs = o->epochs;
    c->train_limit = o->train_limit;
    c->shuffle_labels = o->shuffle_labels;
    rumor_optim_config_t *oc = &c->optim;
    RUMOR_CHECK(rumor_optim_parse_kind(o->optimizer, &oc->kind));
    int adamw = oc->kind == RUMOR_OPT_ADAMW;
    oc->lr = (float)(o->lr > 0 ? o->lr : adamw ? 1e-3 : o->sgd_lr);
    oc->weight_decay = (float)(o->weight_decay >= 0 ? o->weight_decay : adamw ? 0.01 : 5e-4);
    oc->momentum = (float)o->momentum;
    oc->nesterov = o->nesterov && o->momentum > 0;
    oc->beta1 = (float)o->beta1;
    oc->beta2 = (float)o->beta2;
    oc->min_lr_ratio = (float)o->min_lr_ratio;
    c->warmup_epochs = o->warmup_epochs;
    c->cosine = strcmp(o->lr_schedule, "cosine") == 0;
    c->devices = o->devices;
    c->stages = o->stages;
    if (o->schedule && (!strcmp(o->schedule, "cosine") || !strcmp(o->schedule, "constant")))
        return rumor_err_set(RUMOR_EINVAL, "--schedule %s: the learning rate's schedule is "
                             "--lr-schedule now; --schedule picks a pipeline schedule (gpipe, "
                             "1f1b, interleaved[:V], zb-h1, zbv)", o->schedule);
    rumor_sched_kind kind;
    int V;
    if (o->schedule)
        RUMOR_CHECK(rumor_schedule_parse(o->schedule, &kind, &V));
    c->schedule = o->schedule;
    c->microbatches = o->microbatches;
    c->partition = o->partition;
    if (o->precision)
        RUMOR_CHECK(rumor_precision_parse(o->precision, &c->precision));
    c->allow_vocab_mismatch = o->allow_vocab_mismatch;
    if (o->metrics)
        RUMOR_CHECK(rumor_train_opts_check_output("--metrics", o->metrics));
    if (o->trace)
        RUMOR_CHECK(rumor_train_opts_check_output("--trace", o->trace));
    /* every spec now, before any data loads or peer is met: bad usage */
    return rumor_trainer_config_check(c);
}

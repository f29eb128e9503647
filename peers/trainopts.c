/* Training options shared by rumor-train and rumor-peer (see trainopts.h). */
#include "trainopts.h"

#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Fashion-MNIST's training-set pixel mean and standard deviation (of x/255):
 * inputs are standardized with them so one learning rate suits every layer. */
#define FASHION_MEAN 0.2860f
#define FASHION_STD 0.3530f

const char rumor_train_opts_help[] =
    "Data:\n"
    "  --data SPEC            fashion-mnist[:DIR] or DIR: Fashion-MNIST's IDX files,\n"
    "                         gzip'd or plain (default: /usr/share/datasets/fashion-mnist);\n"
    "                         text:FILE[,FILE...] or tokens:TRAIN.bin[,VAL.bin] for\n"
    "                         language models (with --model gpt:...)\n"
    "  --train-limit N        use at most N examples of the training shard\n"
    "  --shuffle-labels       permute the training labels: a control run that must\n"
    "                         not learn (test accuracy near 10%)\n"
    "\n"
    "Model and device:\n"
    "  --model SPEC           mlp:D0-D1-...-Dn[:relu|:gelu][:dropout=P]\n"
    "                         (default: mlp:784-256-256-10), or a GPT-2:\n"
    "                         gpt:layers=L,dim=D,heads=H,ctx=T[,vocab=V][,dropout=P]\n"
    "  --device SPEC          cpu, cpu:THREADS, cuda, cuda:N or auto (default: cpu)\n"
    "  --threads N            CPU worker threads; each takes a share of every batch\n"
    "                         with one BLAS thread\n"
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
    "  --schedule NAME        cosine (decay to --min-lr-ratio at the end) or\n"
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
    "  --progress SECS        seconds between progress lines (default: 0.5 on a\n"
    "                         terminal, 10 otherwise)\n"
    "  -q, --quiet            print only the final result\n"
    "  --log-level LEVEL      error, warn, info or debug (default: info; or RUMOR_LOG)\n"
    "  -c, --config FILE      read options from an INI file first: one 'key = value'\n"
    "                         a line, keys named like the long options (any\n"
    "                         section); flags on the command line win\n"
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

int rumor_train_evaluate(rumor_step_t *s, const rumor_dataset_t *d, int batch, double *accuracy,
                         double *loss)
{
    double sum = 0.0;
    long targets = 0, correct = 0;
    for (int i = 0; i < d->n; i += batch) {
        rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = d->n - i < batch ? d->n - i : batch,
                            .width = d->dim, .x = d->x + (size_t)i * d->dim, .y = d->y + i };
        RUMOR_CHECK(rumor_step_eval(s, &b, &sum, &targets, &correct));
    }
    *accuracy = targets ? (double)correct / (double)targets : 0.0;
    *loss = targets ? sum / (double)targets : 0.0;
    return 0;
}

int rumor_train_is_lm(const char *data)
{
    return data && (!strncmp(data, "text:", 5) || !strncmp(data, "tokens:", 7));
}

int rumor_train_validate(rumor_step_t *s, rumor_source_t *src, int batch, int n, double *loss)
{
    double sum = 0.0;
    long targets = 0;
    int nb = rumor_source_val_batches(src, batch);
    if (n > 0 && n < nb)
        nb = n;
    for (int i = 0; i < nb; i++) {
        rumor_batch_t b;
        int got = rumor_source_val(src, i, batch, &b);
        RUMOR_CHECK(got);
        if (got == 0)
            break;
        RUMOR_CHECK(rumor_step_eval(s, &b, &sum, &targets, NULL));
    }
    *loss = targets ? sum / (double)targets : NAN;
    return 0;
}

int rumor_train_opts_check_model(const rumor_model_t *m, const rumor_dataset_t *d)
{
    if (m->kind != RUMOR_MODEL_MLP)
        return rumor_err_set(RUMOR_EINVAL, "'%s' is a language model; the data are images",
                             m->spec);
    if (m->in_dim != d->dim || m->classes != d->classes)
        return rumor_err_set(RUMOR_EINVAL,
                             "'%s' takes %d inputs and %d classes; the data have %d and %d",
                             m->spec, m->in_dim, m->classes, d->dim, d->classes);
    return 0;
}

void rumor_train_opts_default(struct rumor_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->data = "/usr/share/datasets/fashion-mnist";
    o->model = "mlp:784-256-256-10";
    o->optimizer = "sgd";
    o->schedule = "cosine";
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

int rumor_train_opts_optim(const struct rumor_train_opts *o, long steps_per_epoch,
                           rumor_optim_config_t *c)
{
    rumor_optim_config_default(c);
    RUMOR_CHECK(rumor_optim_parse_kind(o->optimizer, &c->kind));
    int adamw = c->kind == RUMOR_OPT_ADAMW;
    c->lr = (float)(o->lr > 0 ? o->lr : adamw ? 1e-3 : o->sgd_lr);
    c->weight_decay = (float)(o->weight_decay >= 0 ? o->weight_decay : adamw ? 0.01 : 5e-4);
    c->momentum = (float)o->momentum;
    c->nesterov = o->nesterov && o->momentum > 0;
    c->beta1 = (float)o->beta1;
    c->beta2 = (float)o->beta2;
    c->warmup_steps = (long)(o->warmup_epochs * (double)steps_per_epoch);
    c->total_steps = strcmp(o->schedule, "cosine") == 0 ? steps_per_epoch * o->epochs : 0;
    c->min_lr_ratio = (float)o->min_lr_ratio;
    return 0;
}

/* Permutes the labels among the examples (a control that must not learn). */
static int shuffle_labels(rumor_dataset_t *d, uint64_t seed)
{
    int *perm = malloc(sizeof(int) * (size_t)d->n);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)d->n);
    int rc = perm && y ? rumor_permutation(d->n, seed, perm)
                       : rumor_err_set(RUMOR_ENOMEM, "out of memory");
    if (rc == 0) {
        for (int i = 0; i < d->n; i++)
            y[i] = d->y[perm[i]];
        memcpy(d->y, y, sizeof(int32_t) * (size_t)d->n);
    }
    free(perm);
    free(y);
    return rc;
}

int rumor_train_opts_data(const struct rumor_train_opts *o, int rank, int world,
                          rumor_dataset_t **train, rumor_dataset_t **test, int *smallest)
{
    rumor_dataset_t *full = NULL;
    *train = *test = NULL;
    /* fashion-mnist[:DIR]; a bare directory keeps meaning the same */
    const char *dir = o->data;
    if (!strcmp(dir, "fashion-mnist"))
        dir = "/usr/share/datasets/fashion-mnist";
    else if (!strncmp(dir, "fashion-mnist:", 14))
        dir += 14;
    else if (!strncmp(dir, "text:", 5) || !strncmp(dir, "tokens:", 7))
        return rumor_err_set(RUMOR_EINVAL, "--data %s: text for a language model; this program "
                             "trains on Fashion-MNIST", o->data);
    int rc = rumor_dataset_load(dir, "train", &full);
    if (rc == 0)
        rc = rumor_dataset_load(dir, "test", test);
    if (rc == 0)
        rc = rumor_dataset_shard(full, rank, world, (uint64_t)o->seed, train);
    if (rc == 0 && smallest) {
        *smallest = full->n / world;
        if (o->train_limit && o->train_limit < *smallest)
            *smallest = (int)o->train_limit;
    }
    rumor_dataset_destroy(&full);
    if (rc == 0 && o->train_limit && o->train_limit < (*train)->n)
        (*train)->n = (int)o->train_limit;
    if (rc == 0 && o->shuffle_labels)
        rc = shuffle_labels(*train, (uint64_t)o->seed ^ 0x5eedULL);
    if (rc == 0)
        rc = rumor_dataset_normalize(*train, FASHION_MEAN, FASHION_STD);
    if (rc == 0)
        rc = rumor_dataset_normalize(*test, FASHION_MEAN, FASHION_STD);
    if (rc < 0) {
        rumor_dataset_destroy(train);
        rumor_dataset_destroy(test);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    return 0;
}

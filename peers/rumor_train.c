/* rumor-train: trains a model on Fashion-MNIST in one process.
 *
 * The single-process core that rumor-peer builds on: load and shard the data,
 * build the model on a device, and run epochs of SGD/AdamW with a progress
 * line, a test evaluation per epoch and optional JSON-lines metrics. */
#include "config.h"

#include <getopt.h>
#include <math.h>
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

/* Fashion-MNIST's training-set pixel mean and standard deviation (of x/255):
 * inputs are standardized with them so one learning rate suits every layer. */
#define FASHION_MEAN 0.2860f
#define FASHION_STD 0.3530f

static const char usage[] =
    "Usage: rumor-train [OPTION]...\n"
    "Train a model on Fashion-MNIST in one process and report its test accuracy.\n"
    "\n"
    "The data are the IDX files of Debian's dataset-fashion-mnist package\n"
    "(gzip'd or plain). Each epoch visits the training shard once in a seeded\n"
    "random order, then evaluates on the full test set. The same seed gives the\n"
    "same run, bit for bit, on the same device and thread count.\n"
    "\n"
    "Data:\n"
    "  --data DIR             directory of the IDX files\n"
    "                         (default: /usr/share/datasets/fashion-mnist)\n"
    "  --rank R, --world W    train on shard R of W (default: 0 of 1)\n"
    "  --train-limit N        use at most N examples of the shard (default: all)\n"
    "  --shuffle-labels       permute the training labels: a control run that must\n"
    "                         not learn (test accuracy near 10%%)\n"
    "\n"
    "Model and device:\n"
    "  --model SPEC           mlp:D0-D1-...-Dn[:relu|:gelu][:dropout=P]\n"
    "                         (default: mlp:784-256-256-10)\n"
    "  --device SPEC          cpu, cpu:THREADS, cuda, cuda:N or auto (default: cpu)\n"
    "  --threads N            CPU worker threads; each takes a share of every batch\n"
    "                         with one BLAS thread (default: all cores)\n"
    "\n"
    "Optimization:\n"
    "  --epochs N             passes over the shard (default: 10)\n"
    "  --batch N              examples per step (default: 128)\n"
    "  --optimizer NAME       sgd or adamw (default: sgd)\n"
    "  --lr X                 peak learning rate (default: 0.05 for sgd, 0.001 for adamw)\n"
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
    "  --metrics FILE         write JSON lines (one object per progress line, per\n"
    "                         epoch and at the end); - for standard output\n"
    "  --progress SECS        seconds between progress lines (default: 0.5 on a\n"
    "                         terminal, 10 otherwise)\n"
    "  -q, --quiet            print only the final result\n"
    "  --log-level LEVEL      error, warn, info or debug (default: info; or RUMOR_LOG)\n"
    "  -h, --help             show this help and exit\n"
    "  -V, --version          show the version and exit\n"
    "\n"
    "Environment:\n"
    "  OPENBLAS_CORETYPE      OpenBLAS kernels to use; when OpenBLAS runs slower kernels\n"
    "                         than the CPU supports (also because this variable says\n"
    "                         so), rumor-train sets it to the better core and restarts\n"
    "  RUMOR_BLAS_AUTOTUNE    0 keeps whatever kernels OpenBLAS chose\n"
    "\n"
    "Exit status: 0 on success, 1 on a runtime error, 2 on bad usage.\n"
    "\n"
    "Example:\n"
    "  rumor-train --epochs 3 --optimizer adamw --metrics run.jsonl\n";

struct options {
    const char *data, *model, *device, *optimizer, *schedule, *metrics;
    int rank, world, threads, epochs, batch, nesterov, shuffle_labels, quiet;
    long train_limit;
    double lr, momentum, weight_decay, beta1, beta2, warmup_epochs, min_lr_ratio, progress;
    unsigned long long seed;
};

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "rumor-train: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'rumor-train --help' for more information.\n");
    return 2;
}

/* Strict number parsing: the whole argument must be a finite number. */
static int parse_double(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "rumor-train: %s '%s': expected a number in [%g, %g]\n", opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "rumor-train: %s '%s': expected an integer in [%ld, %ld]\n", opt, s, lo,
                hi);
        return -1;
    }
    *out = v;
    return 0;
}

enum {
    O_DATA = 256, O_RANK, O_WORLD, O_LIMIT, O_SHUFFLE_LABELS, O_MODEL, O_DEVICE, O_THREADS,
    O_EPOCHS, O_BATCH, O_OPTIMIZER, O_LR, O_MOMENTUM, O_NO_NESTEROV, O_WD, O_BETA1, O_BETA2,
    O_WARMUP, O_SCHEDULE, O_MIN_LR, O_SEED, O_METRICS, O_PROGRESS, O_LOG_LEVEL
};

static int parse_args(int argc, char **argv, struct options *o)
{
    static const struct option longs[] = {
        { "data", required_argument, 0, O_DATA },
        { "rank", required_argument, 0, O_RANK },
        { "world", required_argument, 0, O_WORLD },
        { "train-limit", required_argument, 0, O_LIMIT },
        { "shuffle-labels", no_argument, 0, O_SHUFFLE_LABELS },
        { "model", required_argument, 0, O_MODEL },
        { "device", required_argument, 0, O_DEVICE },
        { "threads", required_argument, 0, O_THREADS },
        { "epochs", required_argument, 0, O_EPOCHS },
        { "batch", required_argument, 0, O_BATCH },
        { "optimizer", required_argument, 0, O_OPTIMIZER },
        { "lr", required_argument, 0, O_LR },
        { "momentum", required_argument, 0, O_MOMENTUM },
        { "no-nesterov", no_argument, 0, O_NO_NESTEROV },
        { "weight-decay", required_argument, 0, O_WD },
        { "beta1", required_argument, 0, O_BETA1 },
        { "beta2", required_argument, 0, O_BETA2 },
        { "warmup-epochs", required_argument, 0, O_WARMUP },
        { "schedule", required_argument, 0, O_SCHEDULE },
        { "min-lr-ratio", required_argument, 0, O_MIN_LR },
        { "seed", required_argument, 0, O_SEED },
        { "metrics", required_argument, 0, O_METRICS },
        { "progress", required_argument, 0, O_PROGRESS },
        { "log-level", required_argument, 0, O_LOG_LEVEL },
        { "quiet", no_argument, 0, 'q' },
        { "help", no_argument, 0, 'h' },
        { "version", no_argument, 0, 'V' },
        { 0, 0, 0, 0 },
    };
    memset(o, 0, sizeof *o);
    o->data = "/usr/share/datasets/fashion-mnist";
    o->model = "mlp:784-256-256-10";
    o->device = NULL;
    o->optimizer = "sgd";
    o->schedule = "cosine";
    o->world = 1;
    o->epochs = 10;
    o->batch = 128;
    o->nesterov = 1;
    o->lr = o->weight_decay = -1; /* per-optimizer defaults below */
    o->momentum = 0.9;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->warmup_epochs = 0.2;
    o->min_lr_ratio = 0.01;
    o->progress = -1;
    o->seed = 1;
    long v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qhV", longs, NULL)) != -1) {
        const char *a = optarg;
        switch (c) {
        case O_DATA: o->data = a; break;
        case O_RANK: if (parse_long("--rank", a, 0, 1 << 20, &v)) return 2; o->rank = (int)v; break;
        case O_WORLD: if (parse_long("--world", a, 1, 1 << 20, &v)) return 2; o->world = (int)v; break;
        case O_LIMIT: if (parse_long("--train-limit", a, 1, 1L << 31, &o->train_limit)) return 2; break;
        case O_SHUFFLE_LABELS: o->shuffle_labels = 1; break;
        case O_MODEL: o->model = a; break;
        case O_DEVICE: o->device = a; break;
        case O_THREADS: if (parse_long("--threads", a, 1, 1024, &v)) return 2; o->threads = (int)v; break;
        case O_EPOCHS: if (parse_long("--epochs", a, 1, 100000, &v)) return 2; o->epochs = (int)v; break;
        case O_BATCH: if (parse_long("--batch", a, 1, 65536, &v)) return 2; o->batch = (int)v; break;
        case O_OPTIMIZER: o->optimizer = a; break;
        case O_LR: if (parse_double("--lr", a, 1e-12, 1e3, &o->lr)) return 2; break;
        case O_MOMENTUM: if (parse_double("--momentum", a, 0, 0.999999, &o->momentum)) return 2; break;
        case O_NO_NESTEROV: o->nesterov = 0; break;
        case O_WD: if (parse_double("--weight-decay", a, 0, 10, &o->weight_decay)) return 2; break;
        case O_BETA1: if (parse_double("--beta1", a, 0, 0.999999, &o->beta1)) return 2; break;
        case O_BETA2: if (parse_double("--beta2", a, 0, 0.999999999, &o->beta2)) return 2; break;
        case O_WARMUP: if (parse_double("--warmup-epochs", a, 0, 1e6, &o->warmup_epochs)) return 2; break;
        case O_SCHEDULE:
            if (strcmp(a, "cosine") != 0 && strcmp(a, "constant") != 0)
                return bad_usage("--schedule '%s': expected cosine or constant", a);
            o->schedule = a;
            break;
        case O_MIN_LR: if (parse_double("--min-lr-ratio", a, 0, 1, &o->min_lr_ratio)) return 2; break;
        case O_SEED: if (parse_long("--seed", a, 0, 0x7fffffffL, &v)) return 2; o->seed = (unsigned long long)v; break;
        case O_METRICS: o->metrics = a; break;
        case O_PROGRESS: if (parse_double("--progress", a, 0, 1e6, &o->progress)) return 2; break;
        case O_LOG_LEVEL: {
            rumor_log_level l;
            if (rumor_log_parse_level(a, &l) < 0)
                return bad_usage("--log-level '%s': expected error, warn, info or debug", a);
            rumor_log_set_level(l);
            break;
        }
        case 'q': o->quiet = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        case 'V': printf("rumor-train (rumor) %s\n", PACKAGE_VERSION); return 0;
        case ':':
            return bad_usage("option '%s' needs a value", argv[optind - 1]);
        default:
            return bad_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return bad_usage("unexpected argument '%s'", argv[optind]);
    if (o->rank >= o->world) {
        fprintf(stderr, "rumor-train: --rank %d must be less than --world %d\n", o->rank, o->world);
        return 2;
    }
    return -1; /* go on */
}

/* Everything a run owns, released in one place. */
struct run {
    rumor_device_t *dev;
    rumor_dataset_t *train_full, *train, *test;
    rumor_loader_t *loader;
    rumor_model_t *model;
    rumor_step_t *step;
    rumor_optim_t *opt;
    rumor_metrics_t metrics;
};

static void run_free(struct run *r)
{
    rumor_metrics_close(&r->metrics);
    rumor_optim_destroy(&r->opt);
    rumor_step_destroy(&r->step);
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
    struct options o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;

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
    if (rumor_dataset_load(o.data, "train", &r.train_full) < 0)
        return fail(&r, "training data");
    if (rumor_dataset_load(o.data, "test", &r.test) < 0)
        return fail(&r, "test data");
    if (rumor_dataset_shard(r.train_full, o.rank, o.world, o.seed, &r.train) < 0)
        return fail(&r, "shard");
    rumor_dataset_destroy(&r.train_full);
    if (o.train_limit && o.train_limit < r.train->n)
        r.train->n = (int)o.train_limit;
    if (o.shuffle_labels) {
        int *perm = malloc(sizeof(int) * (size_t)r.train->n);
        int32_t *y = malloc(sizeof(int32_t) * (size_t)r.train->n);
        if (!perm || !y || rumor_permutation(r.train->n, o.seed ^ 0x5eedULL, perm) < 0) {
            free(perm);
            free(y);
            return fail(&r, "shuffle labels");
        }
        for (int i = 0; i < r.train->n; i++)
            y[i] = r.train->y[perm[i]];
        memcpy(r.train->y, y, sizeof(int32_t) * (size_t)r.train->n);
        free(perm);
        free(y);
    }
    rumor_dataset_normalize(r.train, FASHION_MEAN, FASHION_STD);
    rumor_dataset_normalize(r.test, FASHION_MEAN, FASHION_STD);
    if (rumor_loader_create(r.train, o.batch, o.seed, 1, 0, &r.loader) < 0)
        return fail(&r, "loader");

    /* ---- model and optimizer */
    if (rumor_model_create(r.dev, o.model, o.batch, o.seed, &r.model) < 0)
        return fail(&r, "model");
    if (r.model->in_dim != r.train->dim || r.model->classes != r.train->classes) {
        rumor_err_set(RUMOR_EINVAL, "'%s' takes %d inputs and %d classes; the data have %d and %d",
                      o.model, r.model->in_dim, r.model->classes, r.train->dim, r.train->classes);
        return fail(&r, "model");
    }
    /* One worker per CPU thread, each with one BLAS thread (see step.h). */
    if (rumor_step_create(r.model, r.dev->kind == RUMOR_DEV_CPU ? r.dev->nthreads : 1, &r.step) < 0)
        return fail(&r, "workers");
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    if (rumor_optim_parse_kind(o.optimizer, &oc.kind) < 0) {
        fprintf(stderr, "rumor-train: %s\n", rumor_err_msg());
        run_free(&r);
        return 2;
    }
    int adamw = oc.kind == RUMOR_OPT_ADAMW;
    long steps_per_epoch = rumor_loader_batches_per_epoch(r.loader);
    long total_steps = steps_per_epoch * o.epochs;
    oc.lr = (float)(o.lr > 0 ? o.lr : adamw ? 1e-3 : 0.05);
    oc.weight_decay = (float)(o.weight_decay >= 0 ? o.weight_decay : adamw ? 0.01 : 5e-4);
    oc.momentum = (float)o.momentum;
    oc.nesterov = o.nesterov && o.momentum > 0;
    oc.beta1 = (float)o.beta1;
    oc.beta2 = (float)o.beta2;
    oc.warmup_steps = (long)(o.warmup_epochs * (double)steps_per_epoch);
    oc.total_steps = strcmp(o.schedule, "cosine") == 0 ? total_steps : 0;
    oc.min_lr_ratio = (float)o.min_lr_ratio;
    if (rumor_optim_create(r.dev, &oc, r.model->nparams, &r.opt) < 0)
        return fail(&r, "optimizer");
    if (o.metrics && rumor_metrics_open(&r.metrics, o.metrics) < 0)
        return fail(&r, "metrics");

    if (!o.quiet) {
        printf("rumor-train: %s, %zu parameters, %s, %d worker%s\n", o.model, r.model->nparams,
               r.dev->name, rumor_step_workers(r.step), rumor_step_workers(r.step) == 1 ? "" : "s");
        printf("rumor-train: %d training examples (shard %d of %d%s), %d test, loaded in %.2f s\n",
               r.train->n, o.rank, o.world, o.shuffle_labels ? ", labels shuffled" : "",
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
                        o.batch, o.optimizer, (double)oc.lr, o.seed);

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
            if (rumor_step_grads(r.step, x, y, b, &loss) < 0)
                return fail(&r, "training step");
            if (!isfinite(loss)) {
                rumor_err_set(RUMOR_EINVAL, "loss is %g at step %ld: lower --lr (now %g)",
                              (double)loss, step, (double)oc.lr);
                return fail(&r, "training diverged");
            }
            float lr = rumor_optim_lr_at(&oc, r.opt->t);
            if (rumor_step_update(r.step, r.opt) < 0)
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
        if (rumor_model_evaluate(r.model, r.test->x, r.test->y, r.test->n, &acc, &test_loss) < 0)
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

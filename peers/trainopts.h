/* The training options rumor-train and rumor-peer share: data, model,
 * device, optimizer and schedule, as one struct, one block of option-table
 * entries and one block of --help text, turned into the trainer's
 * configuration (src/trainer.h holds the policy). */
#ifndef RUMOR_TRAINOPTS_H
#define RUMOR_TRAINOPTS_H

#include <stddef.h>

#include "options.h"
#include "trainer.h"

struct rumor_train_opts {
    const char *data, *model, *device, *optimizer, *lr_schedule, *metrics, *log_level;
    const char *devices, *schedule, *partition; /* schedule: the pipeline's */
    const char *trace;                          /* a Chrome trace file */
    const char *precision;                      /* fp32, tf32, bf16 */
    int threads, epochs, batch, nesterov, shuffle_labels, quiet, stages, microbatches;
    int allow_vocab_mismatch; /* a GPT whose vocabulary is not the text's 256 */
    long train_limit, seed;
    double lr, momentum, weight_decay, beta1, beta2, warmup_epochs, min_lr_ratio, progress;
    double sgd_lr;   /* the default --lr for sgd (binaries differ: see their --help) */
};

/* Option-table entries for a struct that holds the training options in a
 * member `m` (use inside a rumor_opt_t array). */
#define RUMOR_TRAIN_OPTIONS(type, m)                                                        \
    { "data", 0, RUMOR_OPT_PATHS, offsetof(type, m.data), 0, 0, "fashion-mnist:|text:|tokens:", 1 }, \
    { "train-limit", 0, RUMOR_OPT_LONG, offsetof(type, m.train_limit), 1, 2147483647.0, NULL, 0 }, \
    { "shuffle-labels", 0, RUMOR_OPT_FLAG, offsetof(type, m.shuffle_labels), 0, 0, NULL, 1 }, \
    { "model", 0, RUMOR_OPT_STR, offsetof(type, m.model), 0, 0, NULL, 0 },                  \
    { "allow-vocab-mismatch", 0, RUMOR_OPT_FLAG, offsetof(type, m.allow_vocab_mismatch), 0, 0, \
      NULL, 1 },                                                                             \
    { "device", 0, RUMOR_OPT_STR, offsetof(type, m.device), 0, 0, NULL, 0 },                \
    { "devices", 0, RUMOR_OPT_STR, offsetof(type, m.devices), 0, 0, NULL, 0 },              \
    { "precision", 0, RUMOR_OPT_CHOICE, offsetof(type, m.precision), 0, 0, "fp32|tf32|bf16", 0 }, \
    { "stages", 0, RUMOR_OPT_INT, offsetof(type, m.stages), 1, 64, NULL, 0 },               \
    { "schedule", 0, RUMOR_OPT_STR, offsetof(type, m.schedule), 0, 0, NULL, 0 },            \
    { "microbatches", 0, RUMOR_OPT_INT, offsetof(type, m.microbatches), 1, 4096, NULL, 0 },  \
    { "partition", 0, RUMOR_OPT_STR, offsetof(type, m.partition), 0, 0, NULL, 0 },          \
    { "threads", 0, RUMOR_OPT_INT, offsetof(type, m.threads), 1, 1024, NULL, 0 },           \
    { "epochs", 0, RUMOR_OPT_INT, offsetof(type, m.epochs), 1, 100000, NULL, 0 },           \
    { "batch", 0, RUMOR_OPT_INT, offsetof(type, m.batch), 1, 65536, NULL, 0 },              \
    { "optimizer", 0, RUMOR_OPT_CHOICE, offsetof(type, m.optimizer), 0, 0, "sgd|adamw", 0 }, \
    { "lr", 0, RUMOR_OPT_DOUBLE, offsetof(type, m.lr), 1e-12, 1e3, NULL, 0 },               \
    { "momentum", 0, RUMOR_OPT_DOUBLE, offsetof(type, m.momentum), 0, 0.999999, NULL, 0 },  \
    { "no-nesterov", 0, RUMOR_OPT_FLAG, offsetof(type, m.nesterov), 0, 0, NULL, 0 },        \
    { "weight-decay", 0, RUMOR_OPT_DOUBLE, offsetof(type, m.weight_decay), 0, 10, NULL, 0 }, \
    { "beta1", 0, RUMOR_OPT_DOUBLE, offsetof(type, m.beta1), 0, 0.999999, NULL, 0 },        \
    { "beta2", 0, RUMOR_OPT_DOUBLE, offsetof(type, m.beta2), 0, 0.999999999, NULL, 0 },     \
    { "warmup-epochs", 0, RUMOR_OPT_DOUBLE, offsetof(type, m.warmup_epochs), 0, 1e6, NULL, 0 }, \
    { "lr-schedule", 0, RUMOR_OPT_CHOICE, offsetof(type, m.lr_schedule), 0, 0, "cosine|constant", 0 }, \
    { "min-lr-ratio", 0, RUMOR_OPT_DOUBLE, offsetof(type, m.min_lr_ratio), 0, 1, NULL, 0 }, \
    { "seed", 0, RUMOR_OPT_LONG, offsetof(type, m.seed), 0, 2147483647.0, NULL, 0 },        \
    { "metrics", 0, RUMOR_OPT_PATH, offsetof(type, m.metrics), 0, 0, NULL, 0 },             \
    { "trace", 0, RUMOR_OPT_PATH, offsetof(type, m.trace), 0, 0, NULL, 0 },                 \
    { "progress", 0, RUMOR_OPT_DOUBLE, offsetof(type, m.progress), 0, 1e6, NULL, 0 },       \
    { "quiet", 'q', RUMOR_OPT_FLAG, offsetof(type, m.quiet), 0, 0, NULL, 1 },               \
    { "log-level", 0, RUMOR_OPT_CHOICE, offsetof(type, m.log_level), 0, 0, "error|warn|info|debug", 0 }

/* --help text for those options (sections "Data", "Model and device",
 * "Optimization", "Output"). */
extern const char rumor_train_opts_help[];

/* Parses the command line with rumor_opts_parse and handles --help (prints
 * head, the training options' help, tail) and --version. Returns -1 to go
 * on, else the exit status (0 after help or version, 2 on bad usage). */
int rumor_train_opts_parse(const char *prog, const rumor_opt_t *table, void *dst, int argc,
                           char **argv, const char *help_head, const char *help_tail);

/* Defaults: Fashion-MNIST from Debian's package, mlp:784-256-256-10 on the
 * CPU, 10 epochs of batch 128, SGD with Nesterov momentum 0.9, warm-up 0.2
 * epochs then cosine to 1% (lr and weight decay per optimizer, below). */
void rumor_train_opts_default(struct rumor_train_opts *o);

/* Applies --log-level (if given). */
void rumor_train_opts_apply_log(const struct rumor_train_opts *o);

/* An output file named on the command line (opt its option; - is
 * standard output), checked before any work so that a run is not lost to
 * it at its end: its directory must be there and writable, and the name
 * not a directory. Nothing is created. RUMOR_EINVAL (bad usage) naming
 * both otherwise. */
int rumor_train_opts_check_output(const char *opt, const char *path);

/* The trainer's configuration from the options (trainer.h), or
 * RUMOR_EINVAL for options that cannot go together or specs that do not
 * parse (rumor_trainer_config_check: --model, --device, --devices,
 * --stages, --schedule, --partition; all bad usage, exit 2): SGD lr
 * o->sgd_lr and weight decay 5e-4, AdamW lr 1e-3 and decay 0.01 unless
 * given; rank and world are the caller's. The strings stay o's. */
int rumor_train_opts_config(const struct rumor_train_opts *o, int rank, int world,
                            rumor_trainer_config_t *c);

#endif

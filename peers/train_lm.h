/* rumor-train's loop for language models (text: and tokens: data). */
#ifndef RUMOR_TRAIN_LM_H
#define RUMOR_TRAIN_LM_H

#include "trainopts.h"

struct rumor_lm_opts {
    long steps;              /* 0: --epochs passes over the shard's tokens */
    int eval_every;          /* steps between validation losses */
    int eval_batches;        /* validation batches per evaluation (0: all) */
    const char *checkpoint_dir;
    const char *resume;      /* a checkpoint to start from */
    int keep_checkpoints;
};

/* Trains o->model (a GPT spec) on o->data; returns the exit status. */
int rumor_train_lm(const struct rumor_train_opts *o, const struct rumor_lm_opts *lm, int rank,
                   int world);

#endif

/* Data sources: one --data spec opened into typed batches (batch.h) of
 * images or token windows, in host memory, sharded by (rank, world).
 *
 * Specs:
 *   fashion-mnist          Fashion-MNIST from RUMOR_FASHION_MNIST_DIR (Debian's
 *                          dataset-fashion-mnist)
 *   fashion-mnist:DIR, DIR the IDX files of DIR (gzip'd or plain; data.h);
 *                          a bare directory keeps meaning what it always has
 *   text:FILE[,FILE...]    bytes (vocabulary 256); the last val_fraction of
 *                          each file is validation (text.h)
 *   tokens:TRAIN.bin[,VAL.bin]  llm.c token shards (GPT-2's vocabulary
 *                          50257 unless the config names another); tokens:DIR
 *                          and tokens:GLOB read many (text.h)
 * Anything else is RUMOR_EINVAL ("--data 'X': unknown kind; ...").
 *
 * Images reproduce what rumor-train and rumor-peer did before sources
 * existed, batch for batch: the train split sharded with
 * rumor_dataset_shard(full, rank, world, seed) (the same seed on every
 * peer), cut to `limit`, labels optionally permuted (seed ^ 0x5eed),
 * train and test standardized with Fashion-MNIST's mean and std
 * (RUMOR_FASHION_MEAN, RUMOR_FASHION_STD), then a shuffled loader seeded by
 * seed + rank. Tokens: windows keyed by (seed, rank, step) from the rank's
 * contiguous slice (text.h). Either way the batch of a step depends only on
 * the step: a run that resumes or jumps ahead draws what it would have
 * drawn, without replaying the batches before.
 *
 * The default text corpus, the King James Bible, is written by
 * `./bootstrap build` (and so by demo and check) to RUMOR_DEFAULT_CORPUS
 * under the source tree: `--data text:build/corpus/kjv.txt`. */
#ifndef RUMOR_SOURCE_H
#define RUMOR_SOURCE_H

#include <stdint.h>

#include "batch.h"
#include "data.h"
#include "err.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
/* Fashion-MNIST's train-set pixel mean and std (of pixel/255). */
#define RUMOR_FASHION_MEAN 0.2860f
#define RUMOR_FASHION_STD 0.3530f
#define RUMOR_DEFAULT_CORPUS "build/corpus/kjv.txt"

typedef struct rumor_source_config {
    const char *spec;    /* --data (copied by open) */
    uint64_t seed;       /* images: the shard permutation and, + rank, the epoch
                          * shuffles; tokens: the windows. Same on every peer. */
    int rank, world;     /* this peer's shard of world (default 0 of 1) */
    uint64_t stream;     /* 0: the shard's order (seed + rank), as above. Else
                          * (open membership: world 1) this peer's own seeded
                          * stream over the whole set: images shuffled each
                          * epoch by rumor_source_stream_seed(seed, stream),
                          * token windows drawn with it; the shard (and
                          * `limit`) stay what every peer shares */
    int batch;           /* examples or windows per training batch (default 8) */
    int seq;             /* tokens: T, tokens per window (default 64) */
    double val_fraction; /* text, and tokens without VAL.bin (default 0.1) */
    int vocab;           /* tokens: 0 = the kind's default; text needs >= 256 */
    int normalize;       /* images: 1 (default) standardizes train and test */
    int lockstep;        /* images: every rank takes the same steps per epoch, the
                          * full batches of the smallest shard (peers that run
                          * rounds together); default 0: every example of the
                          * shard, the last batch of an epoch partial */
    long limit;          /* images: keep the shard's first `limit` examples (0: all) */
    int shuffle_labels;  /* images: permute the shard's labels (a control) */
    long val_max;        /* validation examples or windows handed out (0: all) */
} rumor_source_config_t;

void rumor_source_config_default(rumor_source_config_t *c);

/* The seed of a peer's own stream (config.stream != 0): seed and stream
 * mixed through splitmix64, so that peers whose ids are near draw
 * unrelated orders. */
uint64_t rumor_source_stream_seed(uint64_t seed, uint64_t stream);

typedef struct rumor_source rumor_source_t;

/* What a spec names before it is opened: RUMOR_BATCH_TOKENS for text: and
 * tokens: (*vocab, may be NULL, gets their vocabulary: 256 or GPT-2's
 * 50257), else RUMOR_BATCH_IMAGES (*vocab 0). */
rumor_batch_kind rumor_source_spec_kind(const char *spec, int *vocab);

/* Opens c->spec. Every file error names the file; *out is NULL on failure. */
int rumor_source_open(const rumor_source_config_t *c, rumor_source_t **out) RUMOR_WUR;
void rumor_source_destroy(rumor_source_t **sp);

rumor_batch_kind rumor_source_kind(const rumor_source_t *s);
/* Tokens: the vocabulary; images: the classes. */
int rumor_source_vocab(const rumor_source_t *s);
/* Images: features per example; tokens: T. */
int rumor_source_width(const rumor_source_t *s);
/* Images: examples in this rank's shard. Tokens: floor(n / world) train
 * tokens, what every rank's slice holds (a slice holds that or one more),
 * so that steps per epoch computed from it agree on every rank. */
long rumor_source_train_size(const rumor_source_t *s);
/* The smallest shard of any rank (images: floor(N / world), cut to limit):
 * what every peer can count on for steps per epoch. */
long rumor_source_min_train_size(const rumor_source_t *s);
/* Steps in an epoch, the same on every rank. Images: the shard's batches
 * (the last one partial), or with lockstep the full batches of the smallest
 * shard. Tokens: train_size / (batch * seq), at least 1. */
long rumor_source_steps_per_epoch(const rumor_source_t *s);
/* The epoch of the last step drawn (0 before the first): step / steps per epoch. */
int rumor_source_epoch(const rumor_source_t *s);
/* "text: 2 files, 4.1M train tokens, 455k validation tokens, vocab 256" */
const char *rumor_source_describe(const rumor_source_t *s);

/* The underlying data (NULL for the other kind). */
const rumor_tokens_t *rumor_source_train_tokens(const rumor_source_t *s);
const rumor_tokens_t *rumor_source_val_tokens(const rumor_source_t *s);
const rumor_dataset_t *rumor_source_train_dataset(const rumor_source_t *s);
const rumor_dataset_t *rumor_source_test_dataset(const rumor_source_t *s);

/* The training batch of `step` (>= 0) into b, valid until the next call on
 * s; returns its size n > 0. Images: batch step % E of epoch step / E (E
 * steps per epoch) of the shuffled loader, the batches rumor_loader_next
 * hands out in order (drawn in order they cost nothing more; any other
 * step seeks). Tokens: windows keyed by (seed, rank, step). */
int rumor_source_next(rumor_source_t *s, long step, rumor_batch_t *b) RUMOR_WUR;

/* Validation, the same on every rank: batches of `batch` (any size >= 1)
 * examples of the test split in order (images) or validation windows
 * (tokens), at most val_max of them. The i-th into b, valid until the next
 * call; returns n, 0 past the end. */
int rumor_source_val_batches(const rumor_source_t *s, int batch);
int rumor_source_val(rumor_source_t *s, int i, int batch, rumor_batch_t *b) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

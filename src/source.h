/* Data sources for language models: a --data spec opened into typed batches
 * (batch.h) of token windows.
 *
 * Specs: text:FILE[,FILE...] (bytes, vocabulary 256) and
 * tokens:TRAIN.bin[,VAL.bin] (llm.c shards, GPT-2's vocabulary 50257 unless
 * the config names another); see text.h for the split, the sharding by
 * (rank, world) and the seeded windows. Images (fashion-mnist[:DIR] or a
 * directory) are read by data.h's datasets. */
#ifndef RUMOR_SOURCE_H
#define RUMOR_SOURCE_H

#include <stdint.h>

#include "batch.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_source_config {
    const char *spec;
    uint64_t seed;
    int rank, world;
    int batch;           /* windows per batch */
    int seq;             /* T: tokens per window */
    double val_fraction; /* default 0.1 */
    int vocab;           /* 0: the kind's default */
} rumor_source_config_t;

void rumor_source_config_default(rumor_source_config_t *c);

typedef struct rumor_source rumor_source_t;

int rumor_source_open(const rumor_source_config_t *c, rumor_source_t **out) RUMOR_WUR;
void rumor_source_destroy(rumor_source_t **sp);

/* Tokens of this rank's training slice. */
long rumor_source_train_size(const rumor_source_t *s);
int rumor_source_vocab(const rumor_source_t *s);
/* "text: 2 files, 3.6M training tokens, 400k validation tokens, vocabulary 256" */
const char *rumor_source_describe(const rumor_source_t *s);
const rumor_tokens_t *rumor_source_train_tokens(const rumor_source_t *s);
const rumor_tokens_t *rumor_source_val_tokens(const rumor_source_t *s);

/* The training batch of `step` (it depends only on seed, rank and step).
 * Returns the windows in it (> 0); b is valid until the next call. */
int rumor_source_next(rumor_source_t *s, long step, rumor_batch_t *b) RUMOR_WUR;

/* Validation: batches of `batch` windows, the i-th into b (n returned, 0
 * past the end). */
int rumor_source_val_batches(const rumor_source_t *s, int batch);
int rumor_source_val(rumor_source_t *s, int i, int batch, rumor_batch_t *b) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

/* Token corpora for language models: byte-level text and llm.c's token
 * shards, windows drawn from them, and validation windows.
 *
 * text:FILE[,FILE...] reads each file whole as bytes (vocabulary 256) and
 * splits it: the last val_fraction of EACH file is validation, so every file
 * contributes to both parts; the train part is the concatenation of the
 * first parts. tokens:TRAIN.bin[,VAL.bin] reads llm.c's shards: a header of
 * 256 little-endian int32 ([0] magic 20240520, [1] version 1, [2] token
 * count N), then N little-endian uint16 tokens and nothing after; without a
 * VAL.bin the last val_fraction of TRAIN is validation. Every error names
 * the file and what is wrong; nothing is allocated from a header's claim
 * before it is checked against the file's size.
 *
 * Training windows: rank r of w trains on the contiguous slice
 * [n r / w, n (r+1) / w) of the train tokens (contiguous: neighbours' text
 * stays distinct and a window never crosses two shards); each batch draws B
 * window starts uniformly in the slice from splitmix64 keyed by (seed, rank,
 * step), so a batch depends only on those and a peer resuming at step s
 * draws the windows it would have drawn. Validation windows start at 0 and
 * step by T (every validation token after the first is predicted once). */
#ifndef RUMOR_TEXT_H
#define RUMOR_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_TOKENS_MAGIC 20240520
#define RUMOR_GPT2_VOCAB 50257

typedef struct rumor_tokens {
    int vocab;
    size_t n;
    uint16_t *tok;
    char name[256]; /* where they came from, for messages */
} rumor_tokens_t;

void rumor_tokens_destroy(rumor_tokens_t **tp);

/* Reads "FILE[,FILE...]" as bytes into train and validation parts. Each
 * part must hold at least `window` tokens (T + 1). */
int rumor_text_load(const char *files, double val_fraction, size_t window, rumor_tokens_t **train,
                    rumor_tokens_t **val) RUMOR_WUR;

/* Reads "TRAIN.bin[,VAL.bin]" token shards with ids checked against vocab. */
int rumor_tokens_load(const char *files, int vocab, double val_fraction, size_t window,
                      rumor_tokens_t **train, rumor_tokens_t **val) RUMOR_WUR;

/* Entropy of the token frequencies, in nats. */
double rumor_tokens_unigram_entropy(const rumor_tokens_t *t);

/* A batch of B windows of T tokens (inputs) and their next tokens (targets)
 * from rank's slice, for step; tok and y hold B*T each. */
int rumor_tokens_sample(const rumor_tokens_t *t, uint64_t seed, int rank, int world, long step,
                        int B, int T, int32_t *tok, int32_t *y) RUMOR_WUR;

/* Validation windows of T: how many there are, and window i into tok/y (T each). */
long rumor_tokens_val_windows(const rumor_tokens_t *t, int T);
void rumor_tokens_val_window(const rumor_tokens_t *t, int T, long i, int32_t *tok, int32_t *y);

#ifdef __cplusplus
}
#endif
#endif

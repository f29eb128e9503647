/* Token corpora for language models: byte-level text and llm.c's token
 * shards, the training windows drawn from them and the validation windows.
 *
 * text:FILE[,FILE...] reads each file whole as bytes (vocabulary 256; any
 * byte, NUL included, is a token) and splits it: the last val_fraction of
 * EACH file is validation, so every file contributes to both parts; the
 * train part is the concatenation of the first parts, and so is the
 * validation part. Each file's two parts must hold a window (T + 1 tokens)
 * each.
 *
 * tokens:TRAIN.bin[,VAL.bin] maps llm.c's shards: a header of 256
 * little-endian int32 ([0] magic 20240520, [1] version 1, [2] token count
 * N > 0), then N little-endian uint16 tokens and nothing after (the file is
 * exactly 1024 + 2N bytes). Every token must be below the vocabulary
 * (GPT-2's 50257 unless the caller names another). Without VAL.bin the last
 * val_fraction of TRAIN is validation. Nothing is allocated from a header's
 * claim before it is checked against the file's size. tokens:DIR reads
 * rumor-train tokenize's output, DIR/train_*.bin then DIR/val_*.bin, each
 * set one after the other in name order (without val_*.bin the last
 * val_fraction of the train tokens); tokens:GLOB (a pattern with *, ?
 * or [) every shard it matches in name order, the last val_fraction of
 * them all for validation.
 *
 * Every error names the file and what is wrong, with both numbers where two
 * disagree ("val.bin: 3 tokens, fewer than a window of 65"); on failure the
 * out pointers are NULL.
 *
 * Training windows: rank r of w trains on the contiguous slice
 * [floor(n r / w), floor(n (r+1) / w)) of the train tokens. Contiguous, not
 * strided, because neighbouring peers then read distinct passages (gossip
 * averages models that saw different text), and a window never straddles
 * two ranks' slices. Each batch draws its B window starts uniformly in
 * [lo, hi - (T+1)] from splitmix64 keyed by (seed, rank, step): a batch
 * depends only on those three, so a peer that restarts at step s draws the
 * windows it would have drawn. Inputs are data[s..s+T), targets
 * data[s+1..s+T].
 *
 * Validation windows: T + 1 tokens from offset i T (stride T, so every
 * validation token after the first is predicted exactly once); the same on
 * every rank. */
#ifndef RUMOR_TEXT_H
#define RUMOR_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_TOKENS_MAGIC 20240520
#define RUMOR_TOKENS_VERSION 1
#define RUMOR_TOKENS_HEADER 1024 /* bytes: 256 int32 */
#define RUMOR_GPT2_VOCAB 50257
#define RUMOR_BYTE_VOCAB 256

struct rumor_tokens_part; /* text.c's */

/* Tokens live in runs: memory of their own (rumor_tokens_create, text
 * files), or token shards mapped read-only (mmap), so that a corpus larger
 * than memory is paged in as windows are drawn, not read whole. */
typedef struct rumor_tokens {
    int vocab;      /* every token < vocab */
    size_t n;       /* tokens */
    uint16_t *tok;  /* (n) when they are one run: their own memory (writable) or a
                     * mapped shard's (read-only); NULL when they span several
                     * shards (rumor_tokens_at reads any) */
    char name[256]; /* where they came from, for messages (may be cut short) */
    int nparts;     /* the runs */
    struct rumor_tokens_part *parts;
} rumor_tokens_t;

/* Token i (< t->n) of any tokens. */
uint16_t rumor_tokens_at(const rumor_tokens_t *t, size_t i);

/* A zeroed corpus of n tokens named `name`; *out NULL on failure. */
int rumor_tokens_create(size_t n, int vocab, const char *name, rumor_tokens_t **out) RUMOR_WUR;

/* Frees the tokens and sets *tp to NULL; safe on NULL and twice. */
void rumor_tokens_destroy(rumor_tokens_t **tp);

/* Reads "FILE[,FILE...]" as bytes into train and validation parts (see
 * above); window = T + 1. val_fraction in (0, 1). Errors: RUMOR_ESYS (a
 * missing or unreadable file), RUMOR_EIO (a short read), RUMOR_EFORMAT (an
 * empty file, or one whose parts hold no window), RUMOR_EINVAL (arguments). */
int rumor_text_load(const char *files, double val_fraction, size_t window, rumor_tokens_t **train,
                    rumor_tokens_t **val) RUMOR_WUR;

/* Reads "TRAIN.bin[,VAL.bin]" token shards, ids checked against vocab in
 * [2, 65536]. Errors: RUMOR_ESYS (missing), RUMOR_EIO (truncated),
 * RUMOR_EFORMAT (bad magic, version or count, trailing bytes, a token >=
 * vocab, too few tokens for a window), RUMOR_EINVAL (arguments). */
int rumor_tokens_load(const char *files, int vocab, double val_fraction, size_t window,
                      rumor_tokens_t **train, rumor_tokens_t **val) RUMOR_WUR;

/* Writes t as an llm.c shard (for tools and tests); t->n in [1, INT32_MAX]. */
int rumor_tokens_save(const rumor_tokens_t *t, const char *path) RUMOR_WUR;

/* Entropy of t's token frequencies, -sum p ln p, in nats (0 for one
 * distinct token). Empty or NULL t: RUMOR_EINVAL. */
int rumor_unigram_entropy(const rumor_tokens_t *t, double *nats) RUMOR_WUR;

/* Rank's slice [*lo, *hi) of t (see above); slices of ranks 0..world-1 are
 * disjoint and cover [0, t->n). */
int rumor_tokens_slice(const rumor_tokens_t *t, int rank, int world, size_t *lo,
                       size_t *hi) RUMOR_WUR;

/* The B window starts of (seed, rank, step), each in [lo, hi - T - 1] of
 * rank's slice. A slice shorter than T + 1 tokens is RUMOR_EINVAL. */
int rumor_tokens_starts(const rumor_tokens_t *t, uint64_t seed, int rank, int world, long step,
                        int B, int T, size_t *starts) RUMOR_WUR;

/* The batch of those windows: tok (B, T) the inputs, y (B, T) the targets. */
int rumor_tokens_sample(const rumor_tokens_t *t, uint64_t seed, int rank, int world, long step,
                        int B, int T, int32_t *tok, int32_t *y) RUMOR_WUR;

/* Validation windows of T: how many there are ((n - 1) / T, 0 when fewer
 * than T + 1 tokens), and window i in [0, that) into tok and y (T each). */
long rumor_tokens_val_windows(const rumor_tokens_t *t, int T);
int rumor_tokens_val_window(const rumor_tokens_t *t, int T, long i, int32_t *tok,
                            int32_t *y) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

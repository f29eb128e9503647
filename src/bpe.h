/* Byte-level BPE tokenizers: GPT-2's (Radford et al. 2019) and any other
 * saved in its two files, which tiktoken and Hugging Face read too:
 *
 *   encoder.json  {"token": id, ...}: each token's bytes written in GPT-2's
 *                 byte-to-character map (the 188 printable Latin-1 bytes
 *                 as themselves, the other 68 as U+0100 + n in byte order);
 *   vocab.bpe     "#version: 0.2", then one merge a line, "left right" in
 *                 the same map, in order of priority.
 *
 * Every byte is a token; a merge's parts and its result must be tokens. A
 * token that is neither a byte nor a merge's result is special (GPT-2's
 * <|endoftext|>): it has an id but text never encodes to it.
 *
 * Encoding splits the text with GPT-2's pattern (contractions, letters,
 * numbers, other symbols, whitespace runs; Unicode 15's classes, ICU's), then
 * merges each piece's bytes as tiktoken does: the adjacent pair whose
 * concatenation has the lowest rank, leftmost first, until none is a
 * token. On valid UTF-8 the ids are tiktoken's encode_ordinary("gpt2") ids;
 * bytes that are not UTF-8 become pieces of their own, merged as bytes, so
 * decoding gives back every input byte. */
#ifndef RUMOR_BPE_H
#define RUMOR_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_bpe rumor_bpe_t;         /* the vocabulary: read-only once loaded */
typedef struct rumor_bpe_ctx rumor_bpe_ctx_t; /* one thread's encoder (its cache) */

/* Loads encoder.json and vocab.bpe. Errors name the file and, for
 * vocab.bpe, the line: missing or unreadable, not JSON, ids not 0..V-1
 * each once, a token not in the byte map, a merge whose part or result is
 * not a token, a byte that is not a token. */
int rumor_bpe_load(const char *encoder_json, const char *vocab_bpe, rumor_bpe_t **out) RUMOR_WUR;
/* DIR/encoder.json and DIR/vocab.bpe */
int rumor_bpe_load_dir(const char *dir, rumor_bpe_t **out) RUMOR_WUR;
void rumor_bpe_free(rumor_bpe_t **b);

int rumor_bpe_vocab(const rumor_bpe_t *b);         /* tokens, specials included */
int rumor_bpe_merges(const rumor_bpe_t *b);        /* lines of vocab.bpe */
/* The bytes of token id (NULL for an id outside the vocabulary). */
const uint8_t *rumor_bpe_token(const rumor_bpe_t *b, int id, size_t *len);
/* The id of a special token by its text ("<|endoftext|>"), or -1. */
int rumor_bpe_special(const rumor_bpe_t *b, const char *text);

int rumor_bpe_ctx_create(const rumor_bpe_t *b, rumor_bpe_ctx_t **out) RUMOR_WUR;
void rumor_bpe_ctx_free(rumor_bpe_ctx_t **c);

/* Encodes n bytes: the ids are appended to *ids (*len of them, *cap
 * allocated; realloc'd as needed). 0 or RUMOR_ENOMEM. */
int rumor_bpe_encode(rumor_bpe_ctx_t *c, const char *text, size_t n, uint16_t **ids, size_t *len,
                     size_t *cap) RUMOR_WUR;

/* Decodes n ids into out (at most cap bytes): returns the bytes they make
 * (which may exceed cap: out then holds the first cap), or -1 with an
 * error naming the first id outside the vocabulary. */
long rumor_bpe_decode(const rumor_bpe_t *b, const uint16_t *ids, size_t n, char *out,
                      size_t cap);

/* hex = the BLAKE2b-256 of DIR/encoder.json then DIR/vocab.bpe: which
 * tokenizer a checkpoint was trained with (64 hex digits and a NUL). */
int rumor_bpe_digest_dir(const char *dir, char hex[65]) RUMOR_WUR;

/* The tokenizer a --data spec's tokens were made with: for tokens:DIR
 * (rumor-train tokenize's output) DIR/tokenizer when it holds
 * encoder.json, as an absolute path in buf; 1 when there is one, else 0. */
int rumor_bpe_data_tokenizer(const char *spec, char *buf, size_t cap);

/* Training one (bpe_train.c): feed text, then save a vocabulary of V
 * tokens (257..65536, <|endoftext|> among them) as DIR/encoder.json and
 * DIR/vocab.bpe. The distinct pieces of GPT-2's pre-tokenizer are counted;
 * then, until V - 1 tokens, the most frequent adjacent pair over them (the
 * lower ids on a tie) becomes a token. *made is the vocabulary made: less
 * than V when no pair is left twice. */
typedef struct rumor_bpe_trainer rumor_bpe_trainer_t;
int rumor_bpe_trainer_create(rumor_bpe_trainer_t **out) RUMOR_WUR;
int rumor_bpe_trainer_feed(rumor_bpe_trainer_t *t, const char *text, size_t n) RUMOR_WUR;
int rumor_bpe_trainer_save(rumor_bpe_trainer_t *t, int V, const char *dir, int *made) RUMOR_WUR;
void rumor_bpe_trainer_free(rumor_bpe_trainer_t **t);

#ifdef __cplusplus
}
#endif
#endif

/* What src/bpe.c shares with src/bpe_train.c. Internal: not installed. */
#ifndef RUMOR_BPE_INT_H
#define RUMOR_BPE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* GPT-2's byte-to-character map: byte b is written as code point cp_of[b] */
RUMOR_INTERNAL void rumor_bpe_byte_map(uint32_t cp_of[256]);

/* FNV-1a of n bytes: the vocabulary's and the trainer's hash tables */
RUMOR_INTERNAL uint64_t rumor_bpe_hash(const uint8_t *p, size_t n);

/* The end of GPT-2's piece that starts at t[i] (t holds n bytes). */
RUMOR_INTERNAL size_t rumor_bpe_piece_end(const uint8_t *t, size_t n, size_t i);

#endif

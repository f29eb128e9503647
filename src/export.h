/* Exports a model for other tools.
 *
 * rumor_export_hf writes a Hugging Face GPT-2 directory: model.safetensors
 * (every tensor of the model under its GPT-2 name, F32, no optimizer state;
 * the output layer is tied to transformer.wte.weight, as GPT-2's is, so it
 * has no tensor of its own) and config.json (GPT2LMHeadModel, gelu_new,
 * layer_norm_epsilon 1e-5), which transformers' GPT2LMHeadModel.from_pretrained
 * loads. */
#ifndef RUMOR_EXPORT_H
#define RUMOR_EXPORT_H

#include "stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether dir may receive an export: a directory that is empty, or that
 * is not there and can be created (its parent is a directory we may write
 * in); with force any directory we may write in. Nothing is created.
 * RUMOR_EINVAL naming dir and what is wrong ("holds 2 files: give --force to
 * write into it anyway"). */
int rumor_export_check_dir(const char *dir, int force) RUMOR_WUR;

/* st holds a whole GPT model. Creates dir (mode 0755) when missing;
 * overwrites the two files (each written to a temp file, then renamed). */
int rumor_export_hf(const rumor_stage_t *st, const char *dir) RUMOR_WUR;

/* A BPE model's tokenizer beside it, as Hugging Face's GPT2Tokenizer reads
 * it (AutoTokenizer.from_pretrained(dir)): vocab.json and merges.txt (the
 * tokenizer directory's encoder.json and vocab.bpe as they are),
 * tokenizer_config.json (GPT2Tokenizer, model_max_length ctx, <|endoftext|>
 * as the bos, eos and unk token) and special_tokens_map.json. */
int rumor_export_tokenizer(const char *tokdir, const char *dir, int ctx) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

/* Checkpoints: a model's parameters (and optimizer state) as safetensors files.
 *
 * A checkpoint is DIR/<swarm>-r<rank>-<round, 12 digits>.safetensors, e.g.
 * ckpt/rumor-r3-000000001200.safetensors: the peers of a swarm (and of other
 * swarms) may share one directory, each reading, listing and pruning only its
 * own files. <swarm> is the swarm name made safe for file systems: the
 * characters A-Z a-z 0-9 . _ - kept, every other byte (and a leading '.')
 * written '_', at most 48 characters; when that changed the name in any way
 * (or it is empty), '+' and the first 8 hex digits of the BLAKE2b-256 of the
 * name (as the metadata holds it, see rumor_ckpt_info_t.swarm) follow, so
 * that swarms "a b" and "a_b" do not share files: "a_b+<8 hex>-r0-...".
 *
 * The file is readable by PyTorch and Hugging Face tools
 * (safetensors.torch.load_file): an 8-byte little-endian header length N,
 * N bytes of JSON padded with spaces to a multiple of 8, then the data
 * section. One F32 tensor per model tensor (model.h), with its name and shape,
 * in the order of the flat space, so the parameter data is that space
 * verbatim: an MLP's "fc{k}.weight" (out, in) and "fc{k}.bias"; a GPT's
 * GPT-2 names ("transformer.h.0.attn.c_attn.weight", (in, out) as Conv1D
 * stores it), which Hugging Face's GPT2LMHeadModel reads;
 * then, when an optimizer was given, "optim.m" (nparams) and for AdamW
 * "optim.v" (nparams). The "__metadata__" strings record the format, model
 * spec, round, epoch, optimizer and its step count, rank, incarnation, swarm,
 * and "blake2b": the hex BLAKE2b-256 digest of the whole data section; a
 * model of tokens made by a BPE also "tokenizer" (its directory) and
 * "tokenizer_blake2b" (its files' digest, bpe.h). The
 * name and the metadata agree on the swarm, rank and round: a file whose
 * metadata names another swarm, rank or round than its name (another peer's
 * checkpoint copied or renamed) is never resumed from.
 *
 * Writes are atomic (temp file, fsync, rename, fsync of the directory: a
 * SIGKILL at any moment leaves either the previous set of checkpoints or the
 * new one, never a partial file under a final name). Loads check every byte
 * of structure and the digest before touching the model, so a corrupt or
 * truncated file is an error that leaves the model as it was, and
 * rumor_ckpt_load_latest falls back to the previous checkpoint. */
#ifndef RUMOR_CHECKPOINT_H
#define RUMOR_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "optim.h"
#include "stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rumor_ckpt_load_latest's return when DIR holds no loadable checkpoint. */
#define RUMOR_CKPT_NONE 1

/* The largest header a load accepts (the spec's own limit is 100 MB; ours
 * are a few hundred bytes per layer). */
#define RUMOR_CKPT_MAX_HEADER (1u << 20)

typedef struct rumor_ckpt_info {
    long round;           /* rounds completed; names the file */
    int epoch;
    long optim_t;         /* save: ignored (o->t is written); load: restored into o->t */
    int rank;
    uint64_t incarnation;
    char model[RUMOR_MODEL_SPEC]; /* load: the file's model spec (save writes the stage's) */
    char optimizer[16];   /* load: "sgd", "adamw" or "none" (save derives it from o) */
    char swarm[64];       /* the swarm's name: bytes outside printable ASCII are
                           * written as '?'; it and rank name the file */
    char tokenizer[512];  /* a token model's tokenizer directory (bpe.h), "" none */
    char tokenizer_digest[65]; /* its rumor_bpe_digest_dir */
} rumor_ckpt_info_t;

/* The file name (no directory) of the checkpoint of swarm, rank and round,
 * as described above. swarm is taken as rumor_ckpt_info_t.swarm holds it:
 * its first 63 bytes. Fails (RUMOR_EINVAL) on a negative rank, a round
 * outside [0, 10^12) or a name longer than len - 1. */
int rumor_ckpt_filename(const char *swarm, int rank, long round, char *buf, size_t len) RUMOR_WUR;

/* Writes DIR/<swarm>-r<rank>-<round>.safetensors (info's swarm, rank and
 * round; rank >= 0) atomically: the data goes to a fresh
 * DIR/.<that name without .safetensors>.<pid>.<n>.tmp (O_EXCL, mode 0644),
 * which is fsynced, renamed over the final name, and the directory fsynced.
 * Then removes this swarm and rank's stale temp files (left by a writer that
 * was killed: one whose pid is gone from this machine; other ranks' temp
 * files are never touched) and all but `keep` of this swarm and rank's
 * checkpoints: the one just written and the keep-1 highest other rounds.
 * Creates DIR (mode 0755) if missing. o may be NULL (parameters only). On
 * failure the temp file is removed and no final-named file is changed. */
int rumor_ckpt_save(const char *dir, const rumor_stage_t *st, const rumor_optim_t *o,
                    const rumor_ckpt_info_t *info, int keep) RUMOR_WUR;


/* Loads one checkpoint file into m, and into o when o is not NULL and the
 * file holds optimizer state (its kind must then match o's; o->t is restored
 * from the metadata). Checks the header length (<= RUMOR_CKPT_MAX_HEADER and
 * within the file), the JSON, the format and model spec, every tensor's name,
 * dtype, shape and offsets against m's layout, the data length, the BLAKE2b
 * digest and that every value is finite. On any failure m and o are left
 * unchanged and the error names the file and the problem. info may be NULL. */
int rumor_ckpt_load(const char *path, rumor_stage_t *st, rumor_optim_t *o,
                    rumor_ckpt_info_t *info) RUMOR_WUR;

/* Reads a checkpoint's metadata only (model spec, round, epoch, optimizer
 * and its step count, rank, swarm) into info, without its data: what model
 * to build before rumor_ckpt_load (rumor-train sample, eval, export). The
 * data is checked by the load. */
int rumor_ckpt_peek(const char *path, rumor_ckpt_info_t *info) RUMOR_WUR;

/* Loads the newest loadable checkpoint of swarm and rank in DIR: tries its
 * files highest round first, warning (rumor_warn, with the reason and the
 * file's name) about each one that fails, and refusing, with a warning, one
 * whose metadata names another swarm, rank or round than its file name (a
 * checkpoint of another peer, renamed or copied). Other swarms' and ranks'
 * files are not looked at. Returns 0 and copies the file's path to path_out
 * (if not NULL) when one loaded; RUMOR_CKPT_NONE when DIR is missing or
 * holds nothing of this swarm and rank that loads (the last error then says
 * why); a negative code when DIR cannot be read. */
int rumor_ckpt_load_latest(const char *dir, const char *swarm, int rank, rumor_stage_t *st,
                           rumor_optim_t *o, rumor_ckpt_info_t *info, char *path_out,
                           size_t path_len) RUMOR_WUR;

/* Lists swarm and rank's checkpoints in DIR (the names
 * rumor_ckpt_filename gives), highest round first, into a new array the
 * caller frees with rumor_ckpt_list_free. A missing DIR gives an empty
 * list. */
int rumor_ckpt_list(const char *dir, const char *swarm, int rank, char ***paths,
                    int *n) RUMOR_WUR;
void rumor_ckpt_list_free(char ***paths, int n);

#ifdef __cplusplus
}
#endif
#endif

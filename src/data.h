/* Data: IDX files (plain or gzip'd, as Debian's dataset-fashion-mnist ships
 * them), datasets in memory, sharding by (rank, world) and shuffled batches.
 *
 * Every file error names the file and what is wrong with it
 * ("…/train-images-idx3-ubyte.gz: truncated: 47040000 pixel bytes expected,
 * 1234 read"); nothing read from a file is trusted before it is checked, and
 * memory grows with the bytes actually read, never with what a header claims.
 *
 * Randomness (shuffles, shards) comes from splitmix64 and an unbiased
 * Fisher–Yates, so the same seed gives the same order on every platform. */
#ifndef RUMOR_DATA_H
#define RUMOR_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ IDX */

#define RUMOR_IDX_MAX_DIMS 4
/* Largest data an IDX file may declare (product of its dims, in bytes). */
#define RUMOR_IDX_MAX_BYTES ((size_t)INT32_MAX)
#define RUMOR_IDX_MAGIC_IMAGES 0x00000803u /* ubyte, 3 dims (n, rows, cols) */
#define RUMOR_IDX_MAGIC_LABELS 0x00000801u /* ubyte, 1 dim (n) */

/* One IDX file in memory. Only dtype 0x08 (unsigned byte) is supported. */
typedef struct rumor_idx {
    int dtype;                           /* 0x08 */
    int ndims;                           /* 1..RUMOR_IDX_MAX_DIMS */
    uint32_t dims[RUMOR_IDX_MAX_DIMS];   /* dims[ndims..] are 0 */
    size_t size;                         /* bytes of data: product of dims */
    uint8_t *data;                       /* (dims[0], ..., dims[ndims-1]), owned */
    void *map;                           /* non-NULL: data lies in this read-only
                                          * mapping of the file (map_len bytes) */
    size_t map_len;
} rumor_idx_t;

/* Reads an IDX file, gzip'd or plain (told apart by content, not name).
 * Checks the magic, dtype, dims (non-zero, product <= RUMOR_IDX_MAX_BYTES),
 * that the data is all there and that nothing follows it. On success *out
 * owns its data (free with rumor_idx_free); on failure *out is empty and the
 * error is RUMOR_ESYS (cannot open/read), RUMOR_EIO (truncated), RUMOR_EFORMAT
 * (bad header, corrupt gzip, trailing bytes) or RUMOR_ENOMEM. */
int rumor_idx_read(const char *path, rumor_idx_t *out) RUMOR_WUR;

/* Frees idx->data and zeroes *idx; safe on a zeroed or already freed idx. */
void rumor_idx_free(rumor_idx_t *idx);

/* -------------------------------------------------------------- datasets */

#define RUMOR_DATASET_CLASSES 10

/* The pixels stay bytes, as the files hold them (a quarter of the memory
 * of floats: a peer of a small model is mostly its data set); a feature is
 * computed when a batch is made, rumor_dataset_at. */
typedef struct rumor_dataset {
    int n;          /* examples */
    int rows, cols; /* image shape (28x28) */
    int dim;        /* rows*cols features */
    int classes;    /* 10 */
    uint8_t *px;    /* (n, dim) row-major pixels, owned; read-only when mapped */
    struct rumor_dataset_map *map; /* non-NULL: px lies in a read-only mapping of
                                    * the data cache's file, which every process
                                    * of the machine that loads it shares; subsets
                                    * of it share it too (reference counted) */
    int32_t *row;   /* (n) with a map: example i is px's row row[i] (a view);
                     * NULL: example i is row i */
    float div;      /* feature = (px / div - mean) * inv: div 255 as loaded */
    float mean, inv; /* (0 and 1 until rumor_dataset_normalize) */
    int32_t *y;     /* (n) labels in [0, classes), owned */
} rumor_dataset_t;

/* Feature i of the flat (n, dim) array: ((float)px[i] / div - mean) * inv,
 * the pixel / 255 in [0, 1] as loaded (of a view: its example's row). */
static inline float rumor_dataset_at(const rumor_dataset_t *d, size_t i)
{
    size_t dim = (size_t)d->dim;
    size_t at = d->row ? (size_t)d->row[i / dim] * dim + i % dim : i;
    return ((float)d->px[at] / d->div - d->mean) * d->inv;
}

/* Example i's dim features into out. */
void rumor_dataset_row(const rumor_dataset_t *d, int i, float *out);

/* A zero-filled dataset of n examples of rows x cols (div 1: a feature is
 * the byte itself), for synthetic data and subsets. *out is NULL on failure
 * (RUMOR_EINVAL, RUMOR_ENOMEM). */
int rumor_dataset_create(int n, int rows, int cols, int classes, rumor_dataset_t **out) RUMOR_WUR;

/* Loads the "train" or "test" ("t10k" also accepted) split from dir:
 * {train,t10k}-images-idx3-ubyte and -labels-idx1-ubyte, each tried with
 * ".gz" first, then plain. Errors as rumor_dataset_load_files; a missing file
 * names the .gz path. *out is NULL on failure. */
int rumor_dataset_load(const char *dir, const char *split, rumor_dataset_t **out) RUMOR_WUR;

/* Loads an (images, labels) pair of IDX files (magic 0x803 and 0x801).
 * Fails, naming the file, on anything rumor_idx_read rejects, a wrong magic,
 * a label outside [0, RUMOR_DATASET_CLASSES) (RUMOR_EFORMAT) or counts that
 * disagree (RUMOR_EFORMAT). The new dataset is the caller's; NULL on failure. */
int rumor_dataset_load_files(const char *images_path, const char *labels_path,
                             rumor_dataset_t **out) RUMOR_WUR;

/* The examples idx[0..k) of full, in that order (indices checked): a copy,
 * or of a mapped dataset a view of its rows that shares the mapping (and
 * outlives full). */
int rumor_dataset_subset(const rumor_dataset_t *full, const int *idx, int k,
                         rumor_dataset_t **out) RUMOR_WUR;

/* Shard `rank` of `world`: the examples perm[k] for k % world == rank, in
 * increasing k, where perm = rumor_permutation(full->n, seed). Every peer
 * must pass the same seed; then the shards are disjoint, cover the dataset
 * and their sizes differ by at most one (the first n % world ranks get one
 * more). world > full->n (an empty shard) is RUMOR_EINVAL. *out is a new
 * dataset owned by the caller, NULL on failure. */
int rumor_dataset_shard(const rumor_dataset_t *full, int rank, int world, uint64_t seed,
                        rumor_dataset_t **out) RUMOR_WUR;

/* Keeps d's first n examples (0 <= n <= d->n) and gives the rest's memory
 * back (a mapping stays whole: it is shared). */
void rumor_dataset_keep(rumor_dataset_t *d, int n);

/* Mean and standard deviation of all of d's pixels (population std), in
 * double precision; for standardizing with rumor_dataset_normalize. */
int rumor_dataset_stats(const rumor_dataset_t *d, double *mean, double *std);

/* x = (x - mean) / std for every feature (the same scalars for every
 * feature; kept as d->mean and d->inv, applied as batches are made, and
 * composed with an earlier normalization). A std that is not finite and >
 * 0, or a non-finite mean, is RUMOR_EINVAL and leaves d unchanged. */
int rumor_dataset_normalize(rumor_dataset_t *d, float mean, float std);

/* Frees the dataset and sets *dp to NULL; safe on NULL and twice. */
void rumor_dataset_destroy(rumor_dataset_t **dp);

/* ----------------------------------------------------------------- loader */

/* Batches over a dataset, reshuffled each epoch with the permutation seeded by
 * (seed, epoch). It borrows the dataset, which must outlive it. */
typedef struct rumor_loader rumor_loader_t;

/* batch >= 1. shuffle = 0 keeps the dataset's order. drop_last = 1 skips a
 * last partial batch (and then batch > n is RUMOR_EINVAL: no batch at all);
 * drop_last = 0 ends an epoch with it. An empty dataset is RUMOR_EINVAL.
 * *out is NULL on failure. */
int rumor_loader_create(const rumor_dataset_t *d, int batch, uint64_t seed, int shuffle,
                        int drop_last, rumor_loader_t **out) RUMOR_WUR;

/* The next batch, copied into the loader's buffers: *x (b, dim) and *y (b).
 * Returns b > 0, or 0 at the end of an epoch (then *x = *y = NULL, the epoch
 * counter advances and the next call starts the next epoch). The pointers are
 * valid until the next call or destroy. */
int rumor_loader_next(rumor_loader_t *l, const float **x, const int32_t **y);

/* Same, copying into the caller's buffers x (batch*dim floats) and y (batch),
 * batch as rumor_loader_batch returns it. */
int rumor_loader_next_into(rumor_loader_t *l, float *x, int32_t *y);

/* Positions the loader at batch `index` of `epoch` (the batches a loader
 * created alike would hand out after index batches of that epoch), so a run
 * can draw the batch of any step without replaying the ones before it.
 * index in [0, batches per epoch]; index == batches per epoch is the epoch's
 * end (the next call returns 0). */
int rumor_loader_seek(rumor_loader_t *l, int epoch, int index) RUMOR_WUR;

/* The epoch the next batch comes from: 0 at first, +1 after each 0 return. */
int rumor_loader_epoch(const rumor_loader_t *l);
int rumor_loader_batches_per_epoch(const rumor_loader_t *l);
/* The full batch size: create's batch, capped at n (the last batch of an
 * epoch may be smaller). Buffers for next_into need this many rows. */
int rumor_loader_batch(const rumor_loader_t *l);

/* Frees the loader (not the dataset) and sets *lp to NULL; safe twice. */
void rumor_loader_destroy(rumor_loader_t **lp);


#ifdef __cplusplus
}
#endif
#endif

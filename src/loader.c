/* Batches over a dataset, reshuffled each epoch (data.h, loader). */
#include "data.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* ---------------------------------------------------------------- loader */

struct rumor_loader {
    const rumor_dataset_t *d; /* borrowed */
    int batch, shuffle, drop_last;
    uint64_t seed;
    int epoch;  /* of the next batch */
    int pos;    /* next position in order */
    int end;    /* positions used per epoch: n, or n rounded down to batches */
    int *order; /* (n) this epoch's example order */
    float *x;   /* (batch, dim) */
    int32_t *y; /* (batch) */
};

/* The permutation seed of an epoch: seed and epoch both pass through
 * splitmix64, so nearby seeds or epochs give unrelated orders. */
static uint64_t epoch_seed(uint64_t seed, int epoch)
{
    uint64_t s = seed;
    uint64_t h = rumor_splitmix64(&s);
    s = h ^ (uint64_t)(uint32_t)epoch;
    return rumor_splitmix64(&s);
}

static void loader_order(rumor_loader_t *l)
{
    if (l->shuffle) {
        rumor_permutation(l->d->n, epoch_seed(l->seed, l->epoch), l->order);
    } else {
        for (int i = 0; i < l->d->n; i++)
            l->order[i] = i;
    }
}

/* Allocates the loader, its order and batch buffers; NULL on failure. */
int rumor_loader_create(const rumor_dataset_t *d, int batch, uint64_t seed, int shuffle,
                        int drop_last, rumor_loader_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_loader_create: out is NULL");
    *out = NULL;
    if (!d || d->n < 1)
        return rumor_err_set(RUMOR_EINVAL, "loader: empty or NULL dataset");
    if (batch < 1)
        return rumor_err_set(RUMOR_EINVAL, "loader: batch %d must be >= 1", batch);
    if (drop_last && batch > d->n)
        return rumor_err_set(RUMOR_EINVAL,
                             "loader: batch %d > %d examples with drop_last: no batch at all",
                             batch, d->n);
    if (batch > d->n)
        batch = d->n; /* no batch can be larger; saves memory */
    rumor_loader_t *l = calloc(1, sizeof *l);
    if (!l)
        return rumor_err_set(RUMOR_ENOMEM, "cannot allocate a loader");
    l->d = d;
    l->batch = batch;
    l->shuffle = shuffle != 0;
    l->drop_last = drop_last != 0;
    l->seed = seed;
    l->end = l->drop_last ? d->n / batch * batch : d->n;
    l->order = malloc((size_t)d->n * sizeof *l->order);
    l->x = malloc((size_t)batch * (size_t)d->dim * sizeof *l->x);
    l->y = malloc((size_t)batch * sizeof *l->y);
    if (!l->order || !l->x || !l->y) {
        rumor_loader_destroy(&l);
        return rumor_err_set(RUMOR_ENOMEM, "cannot allocate a loader for batch %d of %d", batch,
                             d->dim);
    }
    loader_order(l);
    *out = l;
    return 0;
}

/* Copies the next batch's rows into x and y (each large enough for a full
 * batch); at the end of an epoch returns 0 and reshuffles for the next. */
int rumor_loader_next_into(rumor_loader_t *l, float *x, int32_t *y)
{
    if (!l || !x || !y)
        return rumor_err_set(RUMOR_EINVAL, "rumor_loader_next: NULL argument");
    if (l->pos >= l->end) {
        if (l->epoch == INT32_MAX)
            return rumor_err_set(RUMOR_ESTATE, "loader: epoch counter exhausted");
        l->epoch++;
        l->pos = 0;
        loader_order(l);
        return 0;
    }
    int b = l->end - l->pos < l->batch ? l->end - l->pos : l->batch;
    size_t dim = (size_t)l->d->dim;
    for (int i = 0; i < b; i++) {
        int k = l->order[l->pos + i];
        rumor_dataset_row(l->d, k, x + (size_t)i * dim);
        y[i] = l->d->y[k];
    }
    l->pos += b;
    return b;
}

/* Same into the loader's own buffers. */
int rumor_loader_next(rumor_loader_t *l, const float **x, const int32_t **y)
{
    if (!l || !x || !y)
        return rumor_err_set(RUMOR_EINVAL, "rumor_loader_next: NULL argument");
    int b = rumor_loader_next_into(l, l->x, l->y);
    *x = b > 0 ? l->x : NULL;
    *y = b > 0 ? l->y : NULL;
    return b;
}

int rumor_loader_seek(rumor_loader_t *l, int epoch, int index)
{
    if (!l)
        return rumor_err_set(RUMOR_EINVAL, "rumor_loader_seek: NULL loader");
    int per = rumor_loader_batches_per_epoch(l);
    if (epoch < 0 || index < 0 || index > per)
        return rumor_err_set(RUMOR_EINVAL, "loader: batch %d of epoch %d is outside [0, %d]",
                             index, epoch, per);
    if (epoch != l->epoch) {
        l->epoch = epoch;
        loader_order(l);
    }
    long pos = (long)index * l->batch;
    l->pos = pos < l->end ? (int)pos : l->end;
    return 0;
}

int rumor_loader_epoch(const rumor_loader_t *l) { return l ? l->epoch : 0; }

int rumor_loader_batches_per_epoch(const rumor_loader_t *l)
{
    return l ? (l->end + l->batch - 1) / l->batch : 0;
}

int rumor_loader_batch(const rumor_loader_t *l) { return l ? l->batch : 0; }

/* Frees the loader's buffers; the dataset stays the caller's. */
void rumor_loader_destroy(rumor_loader_t **lp)
{
    if (!lp || !*lp)
        return;
    free((*lp)->order);
    free((*lp)->x);
    free((*lp)->y);
    free(*lp);
    *lp = NULL;
}

/* Data: datasets of images as bytes (loaded through idx.c's reader and
 * cache), subsets and shards (copies, or views of a mapped set), and
 * standardization (see data.h). */
#include "data.h"
#include "idx_int.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
/* ------------------------------------------------------------- datasets */

/* Allocates a zeroed dataset; nothing is left allocated on failure. */
int rumor_dataset_create(int n, int rows, int cols, int classes, rumor_dataset_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_create: out is NULL");
    *out = NULL;
    if (n < 0 || rows < 1 || cols < 1 || classes < 1)
        return rumor_err_set(RUMOR_EINVAL, "dataset shape n=%d rows=%d cols=%d classes=%d invalid",
                             n, rows, cols, classes);
    if ((int64_t)rows * cols > INT32_MAX || (int64_t)n * rows * cols > (int64_t)RUMOR_IDX_MAX_BYTES)
        return rumor_err_set(RUMOR_EINVAL, "dataset of %d x %d x %d is too large", n, rows, cols);
    rumor_dataset_t *d = calloc(1, sizeof *d);
    if (!d)
        return rumor_err_set(RUMOR_ENOMEM, "cannot allocate a dataset");
    d->n = n;
    d->rows = rows;
    d->cols = cols;
    d->dim = rows * cols;
    d->classes = classes;
    d->div = 1.0f;
    d->mean = 0.0f;
    d->inv = 1.0f;
    /* one more element so that n = 0 never asks malloc for 0 bytes */
    d->px = calloc((size_t)n * (size_t)d->dim + 1, sizeof *d->px);
    d->y = calloc((size_t)n + 1, sizeof *d->y);
    if (d->px)
        rumor_hint_huge(d->px, ((size_t)n * (size_t)d->dim + 1) * sizeof *d->px);
    if (!d->px || !d->y) {
        rumor_dataset_destroy(&d);
        return rumor_err_set(RUMOR_ENOMEM, "cannot allocate a dataset of %d x %d pixels", n,
                             rows * cols);
    }
    *out = d;
    return 0;
}

/* A file mapping that datasets share: unmapped with the last of them. */
struct rumor_dataset_map {
    void *base;
    size_t len;
    atomic_int refs;
};

static void map_release(struct rumor_dataset_map *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1) {
        munmap(m->base, m->len);
        free(m);
    }
}

void rumor_dataset_row(const rumor_dataset_t *d, int i, float *out)
{
    size_t dim = (size_t)d->dim;
    const uint8_t *p = d->px + (size_t)(d->row ? d->row[i] : i) * dim;
    for (size_t k = 0; k < dim; k++)
        out[k] = ((float)p[k] / d->div - d->mean) * d->inv;
}

/* Reads both files and checks them against each other; the dataset takes
 * the images' pixels over. The labels' IDX buffer is freed before
 * returning. */
int rumor_dataset_load_files(const char *images_path, const char *labels_path,
                             rumor_dataset_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_load_files: out is NULL");
    *out = NULL;
    rumor_idx_t im, lb;
    memset(&lb, 0, sizeof lb);
    int rc;
    RUMOR_CHECK_GOTO(rumor_idx_read_images_cached(images_path, &im), rc, done);
    RUMOR_CHECK_GOTO(rumor_idx_read_labels(labels_path, &lb), rc, done);
    if (im.dims[0] != lb.dims[0]) {
        rc = rumor_err_set(RUMOR_EFORMAT,
                           "images and labels disagree: %u images in %s, %u labels in %s",
                           (unsigned)im.dims[0], images_path, (unsigned)lb.dims[0], labels_path);
        goto done;
    }
    int n = (int)im.dims[0];
    for (int i = 0; i < n; i++) {
        if (lb.data[i] >= RUMOR_DATASET_CLASSES) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: label %d at index %d out of range [0,%d)",
                               labels_path, lb.data[i], i, RUMOR_DATASET_CLASSES);
            goto done;
        }
    }
    rumor_dataset_t *d;
    /* an empty shell (n 0), then the images' own buffer as its pixels */
    RUMOR_CHECK_GOTO(rumor_dataset_create(0, (int)im.dims[1], (int)im.dims[2],
                                          RUMOR_DATASET_CLASSES, &d), rc, done);
    int32_t *y = malloc(((size_t)n + 1) * sizeof *y);
    if (!y) {
        rumor_dataset_destroy(&d);
        rc = rumor_err_set(RUMOR_ENOMEM, "cannot allocate %d labels", n);
        goto done;
    }
    if (im.map && !(d->map = malloc(sizeof *d->map))) {
        free(y);
        rumor_dataset_destroy(&d);
        rc = rumor_err_set(RUMOR_ENOMEM, "out of memory");
        goto done;
    }
    if (im.map) {
        d->map->base = im.map;
        d->map->len = im.map_len;
        atomic_init(&d->map->refs, 1);
    }
    free(d->px);
    free(d->y);
    d->px = im.data;
    im.data = NULL;
    im.map = NULL;
    d->y = y;
    d->n = n;
    d->div = 255.0f;
    for (int i = 0; i < n; i++)
        d->y[i] = lb.data[i];
    *out = d;
    rc = 0;
done:
    rumor_idx_free(&im);
    rumor_idx_free(&lb);
    return rc;
}

/* Builds dir/base.gz, or dir/base when only that exists, into path. */
static int split_path(const char *dir, const char *base, char *path, size_t size)
{
    struct stat st;
    if ((size_t)snprintf(path, size, "%s/%s.gz", dir, base) >= size)
        return rumor_err_set(RUMOR_EINVAL, "%s: directory name too long", dir);
    if (stat(path, &st) == 0 || errno != ENOENT)
        return 0; /* open reports any other problem */
    char plain[4096];
    snprintf(plain, sizeof plain, "%s/%s", dir, base);
    if (stat(plain, &st) == 0) {
        snprintf(path, size, "%s", plain);
        return 0;
    }
    errno = ENOENT;
    return rumor_err_sys(RUMOR_ESYS, "%s: cannot open (nor %s)%s", path, plain,
                         strcmp(dir, "/usr/share/datasets/fashion-mnist") == 0
                             ? " (Debian: apt-get install dataset-fashion-mnist)"
                             : "");
}

/* Maps a split name to its files and loads them. */
int rumor_dataset_load(const char *dir, const char *split, rumor_dataset_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_load: out is NULL");
    *out = NULL;
    if (!dir || !split)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_load: dir or split is NULL");
    const char *prefix;
    if (strcmp(split, "train") == 0)
        prefix = "train";
    else if (strcmp(split, "test") == 0 || strcmp(split, "t10k") == 0)
        prefix = "t10k";
    else
        return rumor_err_set(RUMOR_EINVAL, "unknown split \"%s\" (train or test)", split);
    char base[32], images[4096], labels[4096];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
    RUMOR_CHECK(split_path(dir, base, images, sizeof images));
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    RUMOR_CHECK(split_path(dir, base, labels, sizeof labels));
    RUMOR_CHECK(rumor_dataset_load_files(images, labels, out));
    return 0;
}

/* Copies the chosen rows into a new dataset of full's shape. */
int rumor_dataset_subset(const rumor_dataset_t *full, const int *idx, int k,
                         rumor_dataset_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_subset: out is NULL");
    *out = NULL;
    if (!full || k < 0 || (k > 0 && !idx))
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_subset: bad arguments (k=%d)", k);
    for (int i = 0; i < k; i++)
        if (idx[i] < 0 || idx[i] >= full->n)
            return rumor_err_set(RUMOR_EINVAL, "subset index %d at %d out of range [0,%d)",
                                 idx[i], i, full->n);
    rumor_dataset_t *d;
    RUMOR_CHECK(rumor_dataset_create(full->map ? 0 : k, full->rows, full->cols, full->classes,
                                     &d));
    size_t dim = (size_t)full->dim;
    d->div = full->div;
    d->mean = full->mean;
    d->inv = full->inv;
    if (full->map) { /* a view: row numbers into the shared mapping */
        int32_t *y = malloc(((size_t)k + 1) * sizeof *y);
        d->row = malloc(((size_t)k + 1) * sizeof *d->row);
        if (!y || !d->row) {
            free(y);
            rumor_dataset_destroy(&d);
            return rumor_err_set(RUMOR_ENOMEM, "cannot allocate a view of %d examples", k);
        }
        free(d->px);
        free(d->y);
        d->y = y;
        d->px = full->px;
        d->map = full->map;
        atomic_fetch_add(&d->map->refs, 1);
        d->n = k;
        for (int i = 0; i < k; i++) {
            d->row[i] = full->row ? full->row[idx[i]] : idx[i];
            d->y[i] = full->y[idx[i]];
        }
        *out = d;
        return 0;
    }
    for (int i = 0; i < k; i++) {
        memcpy(d->px + (size_t)i * dim, full->px + (size_t)idx[i] * dim, dim * sizeof *d->px);
        d->y[i] = full->y[idx[i]];
    }
    *out = d;
    return 0;
}

/* Strided pick from a seeded permutation (see data.h). */
int rumor_dataset_shard(const rumor_dataset_t *full, int rank, int world, uint64_t seed,
                        rumor_dataset_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_shard: out is NULL");
    *out = NULL;
    if (!full)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_shard: dataset is NULL");
    if (world < 1 || rank < 0 || rank >= world)
        return rumor_err_set(RUMOR_EINVAL, "shard rank %d of world %d invalid", rank, world);
    if (world > full->n)
        return rumor_err_set(RUMOR_EINVAL, "world %d exceeds the %d examples: a shard would be empty",
                             world, full->n);
    int *perm = malloc((size_t)full->n * sizeof *perm);
    if (!perm)
        return rumor_err_set(RUMOR_ENOMEM, "cannot allocate a permutation of %d", full->n);
    rumor_permutation(full->n, seed, perm);
    int k = full->n / world + (rank < full->n % world);
    for (int j = 0; j < k; j++) /* in place: rank + j*world >= j */
        perm[j] = perm[rank + (size_t)j * (size_t)world];
    int rc = rumor_dataset_subset(full, perm, k, out);
    free(perm);
    if (rc < 0)
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    return 0;
}

void rumor_dataset_keep(rumor_dataset_t *d, int n)
{
    if (!d || n < 0 || n >= d->n)
        return;
    d->n = n;
    if (d->map) { /* a shared mapping costs this process nothing to keep whole */
        int32_t *y = realloc(d->y, ((size_t)n + 1) * sizeof *y);
        d->y = y ? y : d->y;
        int32_t *row = d->row ? realloc(d->row, ((size_t)n + 1) * sizeof *row) : NULL;
        d->row = row ? row : d->row;
        return;
    }
    uint8_t *px = realloc(d->px, (size_t)n * (size_t)d->dim + 1);
    int32_t *y = realloc(d->y, ((size_t)n + 1) * sizeof *y);
    d->px = px ? px : d->px; /* a shrink that fails keeps the larger block */
    d->y = y ? y : d->y;
}

/* Two-pass mean and std in double precision. */
int rumor_dataset_stats(const rumor_dataset_t *d, double *mean, double *std)
{
    if (!d || !mean || !std || d->n < 1)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_stats: empty or NULL dataset");
    size_t total = (size_t)d->n * (size_t)d->dim;
    double s = 0.0, ss = 0.0;
    for (size_t i = 0; i < total; i++)
        s += rumor_dataset_at(d, i);
    double m = s / (double)total;
    for (size_t i = 0; i < total; i++) {
        double e = rumor_dataset_at(d, i) - m;
        ss += e * e;
    }
    *mean = m;
    *std = sqrt(ss / (double)total);
    return 0;
}

/* Standardizes in place; refuses scalars that would fill d with inf/NaN. */
int rumor_dataset_normalize(rumor_dataset_t *d, float mean, float std)
{
    if (!d)
        return rumor_err_set(RUMOR_EINVAL, "rumor_dataset_normalize: dataset is NULL");
    if (!isfinite(mean) || !isfinite(std) || !(std > 0.0f))
        return rumor_err_set(RUMOR_EINVAL, "normalize: mean %g, std %g: need finite, std > 0",
                             (double)mean, (double)std);
    float inv = 1.0f / std;
    if (d->mean == 0.0f && d->inv == 1.0f) { /* the first: exactly (x - mean) * inv */
        d->mean = mean;
        d->inv = inv;
    } else { /* ((x - m1) i1 - m2) i2 = (x - (m1 + m2 / i1)) (i1 i2) */
        d->mean += mean / d->inv;
        d->inv *= inv;
    }
    return 0;
}

/* Frees everything the dataset owns. */
void rumor_dataset_destroy(rumor_dataset_t **dp)
{
    if (!dp || !*dp)
        return;
    if ((*dp)->map)
        map_release((*dp)->map);
    else
        free((*dp)->px);
    free((*dp)->row);
    free((*dp)->y);
    free(*dp);
    *dp = NULL;
}

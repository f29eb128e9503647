/* Data sources: a --data spec opened into images or token windows (see
 * source.h). */
#include "source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct rumor_source {
    rumor_source_config_t cfg; /* cfg.spec points at spec */
    char *spec;
    rumor_batch_kind kind;
    /* images */
    rumor_dataset_t *train_d, *test_d;
    rumor_loader_t *loader;
    float *vx;      /* (vcap, dim) a validation batch's features */
    int vcap;
    long smallest;
    long per_epoch; /* steps */
    /* tokens */
    rumor_tokens_t *train, *val;
    int32_t *tok, *y; /* (cap, seq) */
    int cap;          /* windows the buffers hold */
    long step;        /* the last step drawn */
    char desc[512];
};

void rumor_source_config_default(rumor_source_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->spec = "fashion-mnist";
    c->world = 1;
    c->batch = 8;
    c->seq = 64;
    c->val_fraction = 0.1;
    c->normalize = 1;
}

void rumor_source_destroy(rumor_source_t **sp)
{
    if (!sp || !*sp)
        return;
    rumor_source_t *s = *sp;
    rumor_loader_destroy(&s->loader);
    rumor_dataset_destroy(&s->train_d);
    rumor_dataset_destroy(&s->test_d);
    rumor_tokens_destroy(&s->train);
    rumor_tokens_destroy(&s->val);
    free(s->tok);
    free(s->y);
    free(s->vx);
    free(s->spec);
    free(s);
    *sp = NULL;
}

/* "4.1M", "455k", "900". */
static void human(double n, char *buf, size_t cap)
{
    if (n >= 1e6)
        snprintf(buf, cap, "%.1fM", n / 1e6);
    else if (n >= 1e4)
        snprintf(buf, cap, "%.0fk", n / 1e3);
    else
        snprintf(buf, cap, "%.0f", n);
}

/* --------------------------------------------------------------- the spec */

enum spec_kind { SPEC_UNKNOWN, SPEC_IMAGES, SPEC_TEXT, SPEC_TOKENS };

/* What a spec names and its argument (a directory or a file list). A bare
 * word that is no directory, or KIND:... of an unknown kind, is unknown; a
 * path with a slash is a directory even when it does not exist, so that
 * the error names the missing files. */
static enum spec_kind parse_spec(const char *spec, const char **arg)
{
    struct stat sb;
    *arg = spec;
    if (!strcmp(spec, "fashion-mnist")) {
        *arg = RUMOR_FASHION_MNIST_DIR;
        return SPEC_IMAGES;
    }
    if (!strncmp(spec, "fashion-mnist:", 14)) {
        *arg = spec + 14;
        return SPEC_IMAGES;
    }
    if (!strncmp(spec, "text:", 5)) {
        *arg = spec + 5;
        return SPEC_TEXT;
    }
    if (!strncmp(spec, "tokens:", 7)) {
        *arg = spec + 7;
        return SPEC_TOKENS;
    }
    if (stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode))
        return SPEC_IMAGES;
    const char *colon = strchr(spec, ':'), *slash = strchr(spec, '/');
    if (!slash || (colon && colon < slash))
        return SPEC_UNKNOWN;
    return SPEC_IMAGES;
}

rumor_batch_kind rumor_source_spec_kind(const char *spec, int *vocab)
{
    int v = 0;
    if (spec && !strncmp(spec, "text:", 5))
        v = RUMOR_BYTE_VOCAB;
    else if (spec && !strncmp(spec, "tokens:", 7))
        v = RUMOR_GPT2_VOCAB;
    if (vocab)
        *vocab = v;
    return v ? RUMOR_BATCH_TOKENS : RUMOR_BATCH_IMAGES;
}

/* ----------------------------------------------------------------- images */

/* Permutes the labels among the examples, as rumor-train's --shuffle-labels
 * always has: y[i] = y[perm[i]]. */
static int shuffle_labels(rumor_dataset_t *d, uint64_t seed)
{
    int *perm = malloc(sizeof(int) * (size_t)d->n);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)d->n);
    int rc = perm && y ? rumor_permutation(d->n, seed, perm)
                       : rumor_err_set(RUMOR_ENOMEM, "out of memory");
    if (rc == 0) {
        for (int i = 0; i < d->n; i++)
            y[i] = d->y[perm[i]];
        memcpy(d->y, y, sizeof(int32_t) * (size_t)d->n);
    }
    free(perm);
    free(y);
    return rc;
}

/* Load, shard, cut, standardize, then the loader (see source.h). */
static int open_images(rumor_source_t *s, const char *dir)
{
    const rumor_source_config_t *c = &s->cfg;
    if (!*dir)
        return rumor_err_set(RUMOR_EINVAL, "--data '%s': no directory", c->spec);
    rumor_dataset_t *full = NULL;
    int rc = rumor_dataset_load(dir, "train", &full);
    if (rc == 0)
        rc = rumor_dataset_load(dir, "test", &s->test_d);
    if (rc == 0)
        rc = rumor_dataset_shard(full, c->rank, c->world, c->seed, &s->train_d);
    if (rc == 0) {
        s->smallest = full->n / c->world;
        if (c->limit > 0 && c->limit < s->smallest)
            s->smallest = c->limit;
        if (c->limit > 0 && c->limit < s->train_d->n)
            rumor_dataset_keep(s->train_d, (int)c->limit);
    }
    if (rc == 0 && c->shuffle_labels)
        rc = shuffle_labels(s->train_d, c->seed ^ 0x5eedULL);
    if (rc == 0 && c->normalize)
        rc = rumor_dataset_normalize(s->train_d, RUMOR_FASHION_MEAN, RUMOR_FASHION_STD);
    if (rc == 0 && c->normalize)
        rc = rumor_dataset_normalize(s->test_d, RUMOR_FASHION_MEAN, RUMOR_FASHION_STD);
    if (rc == 0 && c->lockstep && s->smallest / c->batch < 1)
        rc = rumor_err_set(RUMOR_EINVAL, "--data %s: shards of %ld examples hold no batch of %d",
                           c->spec, s->smallest, c->batch);
    if (rc == 0)
        rc = rumor_loader_create(s->train_d, c->batch,
                                 c->stream ? rumor_source_stream_seed(c->seed, c->stream)
                                           : c->seed + (uint64_t)c->rank, 1,
                                 c->lockstep, &s->loader);
    if (rc == 0)
        s->per_epoch = c->lockstep ? s->smallest / c->batch
                                   : rumor_loader_batches_per_epoch(s->loader);
    if (rc == 0)
        snprintf(s->desc, sizeof s->desc,
                 "fashion-mnist: %s, %d train examples (%d in shard %d of %d), %d test examples, "
                 "%dx%d pixels, %d classes",
                 dir, full->n, s->train_d->n, c->rank, c->world, s->test_d->n, s->train_d->rows,
                 s->train_d->cols, s->train_d->classes);
    rumor_dataset_destroy(&full);
    return rc < 0 ? rumor_err_trace_add(__FILE__, __LINE__, rc) : 0;
}

/* ----------------------------------------------------------------- tokens */

/* Room for n windows of seq tokens in tok and y. */
static int reserve(rumor_source_t *s, int n)
{
    if (n <= s->cap)
        return 0;
    size_t k = (size_t)n * (size_t)s->cfg.seq;
    int32_t *tok = realloc(s->tok, k * sizeof *tok);
    if (tok)
        s->tok = tok;
    int32_t *y = tok ? realloc(s->y, k * sizeof *y) : NULL;
    if (y)
        s->y = y;
    if (!tok || !y)
        return rumor_err_set(RUMOR_ENOMEM, "data: out of memory for %d windows of %d", n,
                             s->cfg.seq);
    s->cap = n;
    return 0;
}

static int open_tokens(rumor_source_t *s, enum spec_kind kind, const char *files)
{
    const rumor_source_config_t *c = &s->cfg;
    size_t window = (size_t)c->seq + 1;
    if (kind == SPEC_TEXT) {
        if (c->vocab && c->vocab < RUMOR_BYTE_VOCAB)
            return rumor_err_set(RUMOR_EINVAL, "--data %s: bytes need a vocabulary of %d, the "
                                 "model has %d", c->spec, RUMOR_BYTE_VOCAB, c->vocab);
        RUMOR_CHECK(rumor_text_load(files, c->val_fraction, window, &s->train, &s->val));
    } else {
        RUMOR_CHECK(rumor_tokens_load(files, c->vocab ? c->vocab : RUMOR_GPT2_VOCAB,
                                      c->val_fraction, window, &s->train, &s->val));
    }
    size_t lo, hi;
    RUMOR_CHECK(rumor_tokens_slice(s->train, c->rank, c->world, &lo, &hi));
    if (hi - lo < window)
        return rumor_err_set(RUMOR_EINVAL,
                             "--data %s: shard %d of %d holds %zu training tokens, fewer than a "
                             "window of %zu",
                             c->spec, c->rank, c->world, hi - lo, window);
    s->smallest = (long)(s->train->n / (size_t)c->world);
    s->per_epoch = s->smallest / ((long)c->batch * c->seq);
    if (s->per_epoch < 1)
        s->per_epoch = 1;
    RUMOR_CHECK(reserve(s, c->batch));
    int files_n = 1;
    for (const char *p = files; *p; p++)
        files_n += *p == ',';
    char a[32], b[32];
    human((double)s->train->n, a, sizeof a);
    human((double)s->val->n, b, sizeof b);
    snprintf(s->desc, sizeof s->desc,
             "%s: %d file%s, %s train tokens, %s validation tokens, vocab %d",
             kind == SPEC_TEXT ? "text" : "tokens", files_n, files_n == 1 ? "" : "s", a, b,
             s->train->vocab);
    return 0;
}

/* ------------------------------------------------------------------- open */

uint64_t rumor_source_stream_seed(uint64_t seed, uint64_t stream)
{
    uint64_t z = seed ^ (stream * 0x9e3779b97f4a7c15ULL);
    for (int i = 0; i < 2; i++) { /* splitmix64, twice */
        z += 0x9e3779b97f4a7c15ULL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
    }
    return z;
}

int rumor_source_open(const rumor_source_config_t *c, rumor_source_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_source_open: out is NULL");
    *out = NULL;
    if (!c || !c->spec || !*c->spec)
        return rumor_err_set(RUMOR_EINVAL, "--data: missing");
    if (c->batch < 1 || c->seq < 1 || c->world < 1 || c->rank < 0 || c->rank >= c->world ||
        c->limit < 0 || c->val_max < 0)
        return rumor_err_set(RUMOR_EINVAL,
                             "--data %s: batch %d, window %d, rank %d of %d, limit %ld or "
                             "val_max %ld out of range",
                             c->spec, c->batch, c->seq, c->rank, c->world, c->limit, c->val_max);
    rumor_source_t *s = calloc(1, sizeof *s);
    char *spec = strdup(c->spec);
    if (!s || !spec) {
        free(s);
        free(spec);
        return rumor_err_set(RUMOR_ENOMEM, "data: out of memory");
    }
    s->cfg = *c;
    s->spec = spec;
    s->cfg.spec = spec;
    s->step = -1;
    const char *arg;
    enum spec_kind kind = parse_spec(spec, &arg);
    s->kind = kind == SPEC_IMAGES ? RUMOR_BATCH_IMAGES : RUMOR_BATCH_TOKENS;
    int rc;
    if (kind == SPEC_IMAGES)
        rc = open_images(s, arg);
    else if (kind != SPEC_UNKNOWN)
        rc = open_tokens(s, kind, arg);
    else
        rc = rumor_err_set(RUMOR_EINVAL,
                           "--data '%s': unknown kind; expected fashion-mnist[:DIR], DIR, "
                           "text:FILE[,FILE...] or tokens:TRAIN.bin[,VAL.bin]",
                           spec);
    if (rc < 0) {
        rumor_source_destroy(&s);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    *out = s;
    return 0;
}

/* -------------------------------------------------------------- accessors */

rumor_batch_kind rumor_source_kind(const rumor_source_t *s) { return s->kind; }

int rumor_source_vocab(const rumor_source_t *s)
{
    return s->kind == RUMOR_BATCH_IMAGES ? s->train_d->classes : s->train->vocab;
}

int rumor_source_width(const rumor_source_t *s)
{
    return s->kind == RUMOR_BATCH_IMAGES ? s->train_d->dim : s->cfg.seq;
}

long rumor_source_train_size(const rumor_source_t *s)
{
    return s->kind == RUMOR_BATCH_IMAGES ? (long)s->train_d->n : s->smallest;
}

long rumor_source_min_train_size(const rumor_source_t *s) { return s->smallest; }

long rumor_source_steps_per_epoch(const rumor_source_t *s) { return s->per_epoch; }

int rumor_source_epoch(const rumor_source_t *s)
{
    return s->step < 0 ? 0 : (int)(s->step / s->per_epoch);
}

const char *rumor_source_describe(const rumor_source_t *s) { return s->desc; }
const rumor_tokens_t *rumor_source_train_tokens(const rumor_source_t *s) { return s->train; }
const rumor_tokens_t *rumor_source_val_tokens(const rumor_source_t *s) { return s->val; }
const rumor_dataset_t *rumor_source_train_dataset(const rumor_source_t *s) { return s->train_d; }
const rumor_dataset_t *rumor_source_test_dataset(const rumor_source_t *s) { return s->test_d; }

/* ---------------------------------------------------------------- batches */

static void batch_set(rumor_source_t *s, rumor_batch_t *b, int n, const float *x,
                      const int32_t *tok, const int32_t *y)
{
    memset(b, 0, sizeof *b);
    b->kind = s->kind;
    b->n = n;
    b->width = rumor_source_width(s);
    b->x = x;
    b->tok = tok;
    b->y = y;
}

int rumor_source_next(rumor_source_t *s, long step, rumor_batch_t *b)
{
    if (!s || !b || step < 0)
        return rumor_err_set(RUMOR_EINVAL, "rumor_source_next: step %ld or a NULL argument",
                             step);
    const rumor_source_config_t *c = &s->cfg;
    if (s->kind == RUMOR_BATCH_IMAGES) {
        long epoch = step / s->per_epoch, index = step % s->per_epoch;
        if (epoch > INT32_MAX)
            return rumor_err_set(RUMOR_EINVAL, "data: step %ld is past the last epoch", step);
        /* in order, the loader is where the step's batch is; else seek */
        if (step != s->step + 1 || index == 0)
            RUMOR_CHECK(rumor_loader_seek(s->loader, (int)epoch, (int)index));
        const float *x;
        const int32_t *y;
        int n = rumor_loader_next(s->loader, &x, &y);
        RUMOR_CHECK(n);
        if (n == 0)
            return rumor_err_set(RUMOR_ESTATE, "data: no batch %ld of epoch %ld", index, epoch);
        s->step = step;
        batch_set(s, b, n, x, NULL, y);
        return n;
    }
    uint64_t seed = c->stream ? rumor_source_stream_seed(c->seed, c->stream) : c->seed;
    RUMOR_CHECK(rumor_tokens_sample(s->train, seed, c->rank, c->world, step, c->batch, c->seq,
                                    s->tok, s->y));
    s->step = step;
    batch_set(s, b, c->batch, NULL, s->tok, s->y);
    return c->batch;
}

/* Validation examples or windows handed out. */
static long val_total(const rumor_source_t *s)
{
    long n = s->kind == RUMOR_BATCH_IMAGES ? (long)s->test_d->n
                                           : rumor_tokens_val_windows(s->val, s->cfg.seq);
    return s->cfg.val_max > 0 && s->cfg.val_max < n ? s->cfg.val_max : n;
}

int rumor_source_val_batches(const rumor_source_t *s, int batch)
{
    if (!s || batch < 1)
        return 0;
    return (int)((val_total(s) + batch - 1) / batch);
}

int rumor_source_val(rumor_source_t *s, int i, int batch, rumor_batch_t *b)
{
    if (!s || !b || batch < 1)
        return rumor_err_set(RUMOR_EINVAL, "rumor_source_val: batch %d or a NULL argument", batch);
    long total = val_total(s), first = (long)i * batch;
    batch_set(s, b, 0, NULL, NULL, NULL);
    if (i < 0 || first >= total)
        return 0;
    int n = (int)(total - first < batch ? total - first : batch);
    if (s->kind == RUMOR_BATCH_IMAGES) {
        const rumor_dataset_t *d = s->test_d;
        if (n > s->vcap) {
            float *vx = realloc(s->vx, (size_t)n * (size_t)d->dim * sizeof *vx);
            if (!vx)
                return rumor_err_set(RUMOR_ENOMEM, "no memory for a validation batch of %d", n);
            s->vx = vx;
            s->vcap = n;
        }
        for (int k = 0; k < n; k++)
            rumor_dataset_row(d, (int)first + k, s->vx + (size_t)k * (size_t)d->dim);
        batch_set(s, b, n, s->vx, NULL, d->y + first);
        return n;
    }
    int T = s->cfg.seq;
    RUMOR_CHECK(reserve(s, n));
    for (int k = 0; k < n; k++)
        RUMOR_CHECK(rumor_tokens_val_window(s->val, T, first + k, s->tok + (size_t)k * T,
                                            s->y + (size_t)k * T));
    batch_set(s, b, n, NULL, s->tok, s->y);
    return n;
}

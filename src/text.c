/* Token corpora (see text.h). */
#include "text.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"

void rumor_tokens_destroy(rumor_tokens_t **tp)
{
    if (!tp || !*tp)
        return;
    free((*tp)->tok);
    free(*tp);
    *tp = NULL;
}

static int tokens_new(size_t n, int vocab, const char *name, rumor_tokens_t **out)
{
    rumor_tokens_t *t = calloc(1, sizeof *t);
    if (t)
        t->tok = malloc((n ? n : 1) * sizeof *t->tok);
    if (!t || !t->tok) {
        if (t)
            free(t);
        return rumor_err_set(RUMOR_ENOMEM, "%s: out of memory for %zu tokens", name, n);
    }
    t->n = n;
    t->vocab = vocab;
    snprintf(t->name, sizeof t->name, "%s", name);
    *out = t;
    return 0;
}

/* Reads a whole regular file. */
static int read_file(const char *path, unsigned char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot open", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) < 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return rumor_err_set(RUMOR_EIO, "%s: not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *p = malloc(n ? n : 1);
    if (!p) {
        fclose(f);
        return rumor_err_set(RUMOR_ENOMEM, "%s: out of memory for %zu bytes", path, n);
    }
    size_t got = fread(p, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(p);
        return rumor_err_set(RUMOR_EIO, "%s: read %zu of %zu bytes", path, got, n);
    }
    *data = p;
    *len = n;
    return 0;
}

/* Splits "a,b,c" into at most max paths (copies into buf). */
static int split_list(const char *list, char *buf, size_t cap, char **paths, int max, int *n)
{
    if (!list || !*list)
        return rumor_err_set(RUMOR_EINVAL, "no file named");
    if (strlen(list) >= cap)
        return rumor_err_set(RUMOR_EINVAL, "file list longer than %zu characters", cap - 1);
    strcpy(buf, list);
    *n = 0;
    for (char *s = buf, *save = NULL, *tok; (tok = strtok_r(s, ",", &save)); s = NULL) {
        if (*n == max)
            return rumor_err_set(RUMOR_EINVAL, "more than %d files", max);
        paths[(*n)++] = tok;
    }
    if (*n == 0)
        return rumor_err_set(RUMOR_EINVAL, "no file named in '%s'", list);
    return 0;
}

static int check_fraction(double f)
{
    if (!(f > 0.0 && f < 1.0))
        return rumor_err_set(RUMOR_EINVAL, "validation fraction %g outside (0, 1)", f);
    return 0;
}

#define MAX_FILES 64

int rumor_text_load(const char *files, double val_fraction, size_t window, rumor_tokens_t **train,
                    rumor_tokens_t **val)
{
    *train = *val = NULL;
    char buf[8192], *paths[MAX_FILES];
    int n;
    RUMOR_CHECK(check_fraction(val_fraction));
    RUMOR_CHECK(split_list(files, buf, sizeof buf, paths, MAX_FILES, &n));
    unsigned char *data[MAX_FILES] = { 0 };
    size_t len[MAX_FILES], tr = 0, va = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        rc = read_file(paths[i], &data[i], &len[i]);
        if (rc == 0 && len[i] == 0)
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: empty file", paths[i]);
        if (rc == 0) {
            size_t v = (size_t)((double)len[i] * val_fraction);
            tr += len[i] - v;
            va += v;
        }
    }
    if (rc == 0 && (tr < window || va < window))
        rc = rumor_err_set(RUMOR_EFORMAT,
                           "%s: %zu training and %zu validation bytes; a window of %zu tokens "
                           "needs more text",
                           files, tr, va, window);
    if (rc == 0)
        rc = tokens_new(tr, 256, files, train);
    if (rc == 0)
        rc = tokens_new(va, 256, files, val);
    if (rc == 0) {
        size_t at = 0, av = 0;
        for (int i = 0; i < n; i++) {
            size_t v = (size_t)((double)len[i] * val_fraction), t = len[i] - v;
            for (size_t j = 0; j < t; j++)
                (*train)->tok[at++] = data[i][j];
            for (size_t j = 0; j < v; j++)
                (*val)->tok[av++] = data[i][t + j];
        }
    }
    for (int i = 0; i < n; i++)
        free(data[i]);
    if (rc < 0) {
        rumor_tokens_destroy(train);
        rumor_tokens_destroy(val);
    }
    return rc;
}

/* One llm.c shard. */
static int read_shard(const char *path, int vocab, rumor_tokens_t **out)
{
    *out = NULL;
    unsigned char *d;
    size_t len;
    RUMOR_CHECK(read_file(path, &d, &len));
    int rc = 0;
    int32_t h[3] = { 0, 0, 0 };
    if (len < 1024) {
        rc = rumor_err_set(RUMOR_EFORMAT, "%s: %zu bytes, shorter than the 1024-byte header",
                           path, len);
    } else {
        for (int i = 0; i < 3; i++)
            h[i] = (int32_t)((uint32_t)d[4 * i] | (uint32_t)d[4 * i + 1] << 8 |
                             (uint32_t)d[4 * i + 2] << 16 | (uint32_t)d[4 * i + 3] << 24);
        if (h[0] != RUMOR_TOKENS_MAGIC)
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: magic %d, expected %d (an llm.c token shard)",
                               path, h[0], RUMOR_TOKENS_MAGIC);
        else if (h[1] != 1)
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: version %d, expected 1", path, h[1]);
        else if (h[2] <= 0)
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: token count %d", path, h[2]);
        else if (len != 1024 + 2 * (size_t)h[2])
            rc = rumor_err_set(len < 1024 + 2 * (size_t)h[2] ? RUMOR_EIO : RUMOR_EFORMAT,
                               "%s: %zu bytes; the header's %d tokens need %zu (%s)", path, len,
                               h[2], 1024 + 2 * (size_t)h[2],
                               len < 1024 + 2 * (size_t)h[2] ? "truncated" : "trailing bytes");
    }
    if (rc == 0)
        rc = tokens_new((size_t)h[2], vocab, path, out);
    for (size_t i = 0; rc == 0 && i < (size_t)h[2]; i++) {
        uint16_t v = (uint16_t)(d[1024 + 2 * i] | d[1024 + 2 * i + 1] << 8);
        if (v >= vocab) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: token %u at index %zu is outside the "
                               "vocabulary of %d", path, v, i, vocab);
            rumor_tokens_destroy(out);
            break;
        }
        (*out)->tok[i] = v;
    }
    free(d);
    return rc;
}

int rumor_tokens_load(const char *files, int vocab, double val_fraction, size_t window,
                      rumor_tokens_t **train, rumor_tokens_t **val)
{
    *train = *val = NULL;
    char buf[8192], *paths[2];
    int n;
    RUMOR_CHECK(check_fraction(val_fraction));
    RUMOR_CHECK(split_list(files, buf, sizeof buf, paths, 2, &n));
    if (vocab < 2 || vocab > 65536)
        return rumor_err_set(RUMOR_EINVAL, "vocabulary %d outside [2, 65536]", vocab);
    RUMOR_CHECK(read_shard(paths[0], vocab, train));
    int rc = 0;
    if (n == 2) {
        rc = read_shard(paths[1], vocab, val);
    } else {
        size_t v = (size_t)((double)(*train)->n * val_fraction);
        rc = tokens_new(v, vocab, paths[0], val);
        if (rc == 0) {
            memcpy((*val)->tok, (*train)->tok + (*train)->n - v, v * sizeof(uint16_t));
            (*train)->n -= v;
        }
    }
    if (rc == 0 && ((*train)->n < window || (*val)->n < window))
        rc = rumor_err_set(RUMOR_EFORMAT,
                           "%s: %zu training and %zu validation tokens; a window of %zu tokens "
                           "needs more",
                           files, (*train)->n, (*val)->n, window);
    if (rc < 0) {
        rumor_tokens_destroy(train);
        rumor_tokens_destroy(val);
    }
    return rc;
}

double rumor_tokens_unigram_entropy(const rumor_tokens_t *t)
{
    size_t *c = calloc((size_t)t->vocab, sizeof *c);
    if (!c || t->n == 0) {
        free(c);
        return 0.0;
    }
    for (size_t i = 0; i < t->n; i++)
        c[t->tok[i]]++;
    double h = 0.0;
    for (int v = 0; v < t->vocab; v++)
        if (c[v]) {
            double p = (double)c[v] / (double)t->n;
            h -= p * log(p);
        }
    free(c);
    return h;
}

int rumor_tokens_sample(const rumor_tokens_t *t, uint64_t seed, int rank, int world, long step,
                        int B, int T, int32_t *tok, int32_t *y)
{
    size_t lo = t->n * (size_t)rank / (size_t)world, hi = t->n * (size_t)(rank + 1) / (size_t)world;
    if (rank < 0 || rank >= world || hi - lo < (size_t)T + 1)
        return rumor_err_set(RUMOR_EINVAL,
                             "%s: shard %d of %d holds %zu tokens, fewer than a window of %d",
                             t->name, rank, world, hi - lo, T + 1);
    uint64_t s = seed ^ 0x77696e646f77ULL; /* "window" */
    s = rumor_splitmix64(&s) ^ (uint64_t)rank * 0x9e3779b97f4a7c15ULL;
    s = rumor_splitmix64(&s) ^ (uint64_t)step * 0xc2b2ae3d27d4eb4fULL;
    uint64_t span = hi - lo - (size_t)T; /* starts in [lo, hi - T - 1] */
    for (int b = 0; b < B; b++) {
        size_t start = lo + (size_t)(rumor_splitmix64(&s) % span);
        for (int i = 0; i < T; i++) {
            tok[(size_t)b * T + i] = t->tok[start + i];
            y[(size_t)b * T + i] = t->tok[start + i + 1];
        }
    }
    return 0;
}

long rumor_tokens_val_windows(const rumor_tokens_t *t, int T)
{
    return t->n < (size_t)T + 1 ? 0 : (long)((t->n - 1) / (size_t)T);
}

void rumor_tokens_val_window(const rumor_tokens_t *t, int T, long i, int32_t *tok, int32_t *y)
{
    size_t start = (size_t)i * (size_t)T;
    for (int k = 0; k < T; k++) {
        tok[k] = t->tok[start + k];
        y[k] = t->tok[start + k + 1];
    }
}

/* Token corpora: byte-level text, llm.c token shards, seeded training
 * windows and validation windows (see text.h). */
#include "text.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glob.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "data.h"
#include "rng.h"

/* Where a run's tokens live: memory of their own (freed) or a mapped file
 * (unmapped), shared by the runs that view it (a validation tail is a
 * view of its shard). */
struct tokmap {
    void *base;
    size_t len; /* mapped bytes; 0: base is malloc's */
    int refs;
    atomic_uint reads; /* windows read from it since its pages were last let go */
};

/* Windows read from a corpus's mappings before this process lets go of the
 * pages they brought in (a fault maps a run of cached pages around it,
 * measured here at about 300 KB a window): the kernel keeps them in its
 * page cache, but they stop counting as this process's resident memory,
 * which stays bounded however large the corpus and however long the run. */
#define RELEASE_EVERY 128u

struct rumor_tokens_part {
    uint16_t *p;
    size_t n, start; /* its tokens, and the first one's index in the whole */
    struct tokmap *m;
};

static void tokmap_unref(struct tokmap *m)
{
    if (!m || --m->refs > 0)
        return;
    if (m->len)
        munmap(m->base, m->len);
    else
        free(m->base);
    free(m);
}

/* t's runs are parts[0, k) (taken over): its n, starts and tok */
static void set_parts(rumor_tokens_t *t, struct rumor_tokens_part *parts, int k)
{
    t->parts = parts;
    t->nparts = k;
    t->n = 0;
    for (int i = 0; i < k; i++) {
        parts[i].start = t->n;
        t->n += parts[i].n;
    }
    t->tok = k == 1 ? parts[0].p : NULL;
}

static int tokens_new(int vocab, const char *name, struct rumor_tokens_part *parts, int k,
                      rumor_tokens_t **out)
{
    rumor_tokens_t *t = calloc(1, sizeof *t);
    if (!t)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    t->vocab = vocab;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    set_parts(t, parts, k);
    *out = t;
    return 0;
}

int rumor_tokens_create(size_t n, int vocab, const char *name, rumor_tokens_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_tokens_create: out is NULL");
    *out = NULL;
    if (vocab < 1 || vocab > 65536 || n > SIZE_MAX / sizeof(uint16_t))
        return rumor_err_set(RUMOR_EINVAL, "%s: %zu tokens of a vocabulary of %d",
                             name ? name : "tokens", n, vocab);
    struct rumor_tokens_part *part = calloc(1, sizeof *part);
    struct tokmap *m = calloc(1, sizeof *m);
    uint16_t *tok = calloc(n ? n : 1, sizeof *tok); /* n = 0 never asks for 0 bytes */
    if (part && m && tok) {
        *m = (struct tokmap){ tok, 0, 1, 0 };
        *part = (struct rumor_tokens_part){ tok, n, 0, m };
    }
    if (!part || !m || !tok || tokens_new(vocab, name, part, 1, out) < 0) {
        free(part), free(m), free(tok);
        return rumor_err_set(RUMOR_ENOMEM, "%s: out of memory for %zu tokens",
                             name ? name : "tokens", n);
    }
    return 0;
}

void rumor_tokens_destroy(rumor_tokens_t **tp)
{
    if (!tp || !*tp)
        return;
    for (int i = 0; i < (*tp)->nparts; i++)
        tokmap_unref((*tp)->parts[i].m);
    free((*tp)->parts);
    free(*tp);
    *tp = NULL;
}

uint16_t rumor_tokens_at(const rumor_tokens_t *t, size_t i)
{
    if (t->tok)
        return t->tok[i];
    int lo = 0, hi = t->nparts - 1; /* the last part starting at or before i */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t->parts[mid].start <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return t->parts[lo].p[i - t->parts[lo].start];
}

/* n tokens from index at, widened (the runs they span read in turn) */
/* A window was read from t: every RELEASE_EVERY of them, the pages they
 * brought in are let go (the first run's mapping counts for them all). */
static void window_read(const rumor_tokens_t *t)
{
    struct tokmap *c = t->nparts ? t->parts[0].m : NULL;
    if (!c || !c->len ||
        atomic_fetch_add_explicit(&c->reads, 1, memory_order_relaxed) + 1 != RELEASE_EVERY)
        return;
    atomic_store_explicit(&c->reads, 0, memory_order_relaxed);
    for (int i = 0; i < t->nparts; i++)
        if (t->parts[i].m->len)
            madvise(t->parts[i].m->base, t->parts[i].m->len, MADV_DONTNEED);
}

static void tok_copy(const rumor_tokens_t *t, size_t at, size_t n, int32_t *out)
{
    if (t->tok) {
        for (size_t i = 0; i < n; i++)
            out[i] = t->tok[at + i];
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = rumor_tokens_at(t, at + i);
}

/* Moves the last v tokens of t into a new *val that views the same runs
 * (nothing copied). */
static int split_tail(rumor_tokens_t *t, size_t v, const char *name, rumor_tokens_t **val)
{
    size_t keep = t->n - v;
    int first = 0; /* the part holding token `keep` */
    while (first < t->nparts - 1 && t->parts[first].start + t->parts[first].n <= keep)
        first++;
    int k = t->nparts - first;
    struct rumor_tokens_part *vp = calloc((size_t)(k ? k : 1), sizeof *vp);
    if (!vp)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    for (int i = 0; i < k; i++) {
        vp[i] = t->parts[first + i];
        vp[i].m->refs++;
    }
    size_t cut = keep - t->parts[first].start; /* tokens of part `first` the train keeps */
    vp[0].p += cut;
    vp[0].n -= cut;
    if (tokens_new(t->vocab, name, vp, k, val) < 0) {
        for (int i = 0; i < k; i++)
            vp[i].m->refs--;
        free(vp);
        return RUMOR_ENOMEM;
    }
    /* the train side ends at keep: parts after `first` go, `first` is cut */
    for (int i = first + 1; i < t->nparts; i++)
        tokmap_unref(t->parts[i].m);
    int nk = first + 1;
    t->parts[first].n = cut;
    if (cut == 0 && nk > 1) {
        tokmap_unref(t->parts[first].m);
        nk--;
    }
    set_parts(t, t->parts, nk);
    return 0;
}

/* ------------------------------------------------------------------ files */

/* Opens a regular file for reading and tells its size. */
static int open_regular(const char *path, FILE **f, size_t *len)
{
    *f = fopen(path, "rb");
    if (!*f)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot open", path);
    struct stat sb;
    if (fstat(fileno(*f), &sb) < 0) {
        int rc = rumor_err_sys(RUMOR_ESYS, "%s: cannot stat", path);
        fclose(*f);
        *f = NULL;
        return rc;
    }
    if (!S_ISREG(sb.st_mode)) {
        fclose(*f);
        *f = NULL;
        return rumor_err_set(RUMOR_EINVAL, "%s: not a regular file", path);
    }
    *len = (size_t)sb.st_size;
    return 0;
}

/* Reads exactly n bytes; a read error or a file that shrank names path. */
static int read_exact(FILE *f, const char *path, void *buf, size_t n, size_t at)
{
    size_t got = n ? fread(buf, 1, n, f) : 0;
    if (got == n)
        return 0;
    if (ferror(f))
        return rumor_err_sys(RUMOR_ESYS, "%s: read failed at byte %zu", path, at + got);
    return rumor_err_set(RUMOR_EIO, "%s: truncated while reading: %zu of %zu bytes at byte %zu",
                         path, got, n, at);
}

/* Reads a whole regular file into a new buffer. */
static int read_whole(const char *path, unsigned char **data, size_t *len)
{
    FILE *f;
    *data = NULL;
    RUMOR_CHECK(open_regular(path, &f, len));
    unsigned char *p = malloc(*len ? *len : 1);
    int rc = p ? read_exact(f, path, p, *len, 0)
               : rumor_err_set(RUMOR_ENOMEM, "%s: out of memory for %zu bytes", path, *len);
    fclose(f);
    if (rc < 0) {
        free(p);
        return rc;
    }
    *data = p;
    return 0;
}

/* Splits "a,b,c" into a fresh copy *buf and pointers into it; empty names
 * and more than max of them are RUMOR_EINVAL. */
static int split_list(const char *list, int max, char **buf, char ***paths, int *n)
{
    *buf = NULL;
    *paths = NULL;
    *n = 0;
    if (!list || !*list)
        return rumor_err_set(RUMOR_EINVAL, "no file named");
    int k = 1;
    for (const char *c = list; *c; c++)
        k += *c == ',';
    if (k > max)
        return rumor_err_set(RUMOR_EINVAL, "'%s': %d files, at most %d", list, k, max);
    *buf = strdup(list);
    *paths = malloc((size_t)k * sizeof **paths);
    if (!*buf || !*paths) {
        free(*buf);
        free(*paths);
        *buf = NULL;
        *paths = NULL;
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    }
    char *s = *buf;
    for (int i = 0; i < k; i++) {
        (*paths)[i] = s;
        char *comma = strchr(s, ',');
        if (comma)
            *comma = '\0';
        if (!*s) {
            free(*buf);
            free(*paths);
            *buf = NULL;
            *paths = NULL;
            return rumor_err_set(RUMOR_EINVAL, "'%s': an empty file name", list);
        }
        s = comma ? comma + 1 : s;
    }
    *n = k;
    return 0;
}

static int check_args(double val_fraction, size_t window, rumor_tokens_t **train,
                      rumor_tokens_t **val)
{
    if (!train || !val)
        return rumor_err_set(RUMOR_EINVAL, "token loader: out pointers are NULL");
    *train = *val = NULL;
    if (!(val_fraction > 0.0 && val_fraction < 1.0))
        return rumor_err_set(RUMOR_EINVAL, "validation fraction %g outside (0, 1)", val_fraction);
    if (window < 2)
        return rumor_err_set(RUMOR_EINVAL, "a window of %zu tokens: need at least 2", window);
    return 0;
}

/* Tokens of a part of n that go to validation: the last floor(n f). */
static size_t val_part(size_t n, double f) { return (size_t)((double)n * f); }

/* ------------------------------------------------------------ text: bytes */

int rumor_text_load(const char *files, double val_fraction, size_t window, rumor_tokens_t **train,
                    rumor_tokens_t **val)
{
    RUMOR_CHECK(check_args(val_fraction, window, train, val));
    char *buf, **paths;
    int n;
    RUMOR_CHECK(split_list(files, 4096, &buf, &paths, &n));
    unsigned char **data = calloc((size_t)n, sizeof *data);
    size_t *len = calloc((size_t)n, sizeof *len), tr = 0, va = 0;
    int rc = data && len ? 0 : rumor_err_set(RUMOR_ENOMEM, "out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        rc = read_whole(paths[i], &data[i], &len[i]);
        if (rc == 0 && len[i] == 0)
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: empty file", paths[i]);
        if (rc < 0)
            break;
        size_t v = val_part(len[i], val_fraction), t = len[i] - v;
        if (t < window || v < window)
            rc = rumor_err_set(RUMOR_EFORMAT,
                               "%s: %zu bytes give %zu training and %zu validation tokens; a "
                               "window of %zu tokens needs at least %zu in each",
                               paths[i], len[i], t, v, window, window);
        tr += t;
        va += v;
    }
    if (rc == 0)
        rc = rumor_tokens_create(tr, RUMOR_BYTE_VOCAB, files, train);
    if (rc == 0)
        rc = rumor_tokens_create(va, RUMOR_BYTE_VOCAB, files, val);
    for (size_t i = 0, at = 0, av = 0; rc == 0 && i < (size_t)n; i++) {
        size_t v = val_part(len[i], val_fraction), t = len[i] - v;
        for (size_t j = 0; j < t; j++)
            (*train)->tok[at++] = data[i][j];
        for (size_t j = 0; j < v; j++)
            (*val)->tok[av++] = data[i][t + j];
    }
    for (int i = 0; data && i < n; i++)
        free(data[i]);
    free(data);
    free(len);
    free(paths);
    free(buf);
    if (rc < 0) {
        rumor_tokens_destroy(train);
        rumor_tokens_destroy(val);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    return 0;
}

/* ------------------------------------------------------ tokens: llm.c shards */

static int32_t le32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* Checks a shard's header against its size (len bytes); *count on success. */
static int check_header(const char *path, const unsigned char *h, size_t len, int32_t *count)
{
    if (len == 0)
        return rumor_err_set(RUMOR_EFORMAT, "%s: empty file", path);
    if (len >= 4 && le32(h) != RUMOR_TOKENS_MAGIC)
        return rumor_err_set(RUMOR_EFORMAT, "%s: magic %d, expected %d (an llm.c token shard)",
                             path, le32(h), RUMOR_TOKENS_MAGIC);
    if (len < RUMOR_TOKENS_HEADER)
        return rumor_err_set(RUMOR_EIO, "%s: truncated: %zu bytes, shorter than the %d-byte header",
                             path, len, RUMOR_TOKENS_HEADER);
    if (le32(h + 4) != RUMOR_TOKENS_VERSION)
        return rumor_err_set(RUMOR_EFORMAT, "%s: version %d, expected %d", path, le32(h + 4),
                             RUMOR_TOKENS_VERSION);
    *count = le32(h + 8);
    if (*count <= 0)
        return rumor_err_set(RUMOR_EFORMAT, "%s: the header claims %d tokens", path, *count);
    uint64_t want = RUMOR_TOKENS_HEADER + 2 * (uint64_t)*count;
    if ((uint64_t)len < want)
        return rumor_err_set(RUMOR_EIO,
                             "%s: truncated: %zu bytes, the header's %d tokens need %llu", path,
                             len, *count, (unsigned long long)want);
    if ((uint64_t)len > want)
        return rumor_err_set(RUMOR_EFORMAT,
                             "%s: %zu bytes, %llu trailing bytes after the header's %d tokens "
                             "(%llu bytes)",
                             path, len, (unsigned long long)((uint64_t)len - want), *count,
                             (unsigned long long)want);
    return 0;
}

#define SCAN_RUN ((size_t)16 << 20) /* tokens (32 MiB) the vocabulary check reads at once */

/* Maps one shard: the header, checked against the file's size, then every
 * token checked against the vocabulary (a sequential pass; the pages stay
 * the kernel's to drop, and come back as windows are drawn). A big-endian
 * machine reads and swaps into memory of its own instead. */
static int read_shard(const char *path, int vocab, rumor_tokens_t **out)
{
    FILE *f;
    size_t len;
    RUMOR_CHECK(open_regular(path, &f, &len));
    unsigned char h[RUMOR_TOKENS_HEADER];
    size_t hlen = len < sizeof h ? len : sizeof h;
    int32_t count = 0;
    int rc = read_exact(f, path, h, hlen, 0);
    if (rc == 0)
        rc = check_header(path, h, len, &count);
    const uint16_t one = 1;
    int big_endian = *(const unsigned char *)&one == 0;
    void *base = MAP_FAILED;
    if (rc == 0 && !big_endian) {
        base = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fileno(f), 0);
        if (base == MAP_FAILED)
            rc = rumor_err_sys(RUMOR_ESYS, "%s: cannot map", path);
    }
    if (rc == 0 && big_endian) {
        rc = rumor_tokens_create((size_t)count, vocab, path, out);
        if (rc == 0)
            rc = read_exact(f, path, (*out)->tok, 2 * (size_t)count, RUMOR_TOKENS_HEADER);
        for (size_t i = 0; rc == 0 && i < (size_t)count; i++)
            (*out)->tok[i] = (uint16_t)((*out)->tok[i] >> 8 | (*out)->tok[i] << 8);
    }
    fclose(f);
    if (rc == 0 && !big_endian) {
        madvise(base, len, MADV_SEQUENTIAL);
        struct rumor_tokens_part *part = calloc(1, sizeof *part);
        struct tokmap *m = calloc(1, sizeof *m);
        if (part && m) {
            *m = (struct tokmap){ base, len, 1, 0 };
            *part = (struct rumor_tokens_part){ (uint16_t *)((char *)base + RUMOR_TOKENS_HEADER),
                                                (size_t)count, 0, m };
        }
        if (!part || !m || tokens_new(vocab, path, part, 1, out) < 0) {
            free(part), free(m);
            munmap(base, len);
            return rumor_err_set(RUMOR_ENOMEM, "out of memory");
        }
    }
    const uint16_t *tok = rc == 0 ? (*out)->tok : NULL;
    for (size_t i = 0; rc == 0 && i < (size_t)count; i++) {
        if (tok[i] >= vocab)
            rc = rumor_err_set(RUMOR_EFORMAT,
                               "%s: token %u at index %zu is outside the vocabulary of %d "
                               "(token shards do not record theirs: give the model a vocab= "
                               "above the largest token)", path, (unsigned)tok[i], i, vocab);
        /* the pass leaves no page resident: each 32 MiB it read is let go
         * (the page cache keeps what it can) */
        if (!big_endian && ((i + 1) % SCAN_RUN == 0 || i + 1 == (size_t)count)) {
            size_t end = RUMOR_TOKENS_HEADER + 2 * (i + 1);
            size_t from = end > 2 * SCAN_RUN ? (end - 2 * SCAN_RUN) & ~(size_t)4095 : 0;
            madvise((char *)base + from, end - from, MADV_DONTNEED);
        }
    }
    if (rc == 0 && !big_endian)
        madvise(base, len, MADV_RANDOM); /* windows are drawn anywhere */
    if (rc < 0)
        rumor_tokens_destroy(out);
    return rc;
}

static int too_short(const char *path, size_t n, size_t window, const char *what)
{
    return rumor_err_set(RUMOR_EFORMAT, "%s: %zu %s tokens, fewer than a window of %zu", path, n,
                         what, window);
}

/* The shards a glob pattern names, in order, one after the other; none
 * is an error naming the pattern. */
static int read_glob(const char *pattern, int vocab, rumor_tokens_t **out)
{
    glob_t g;
    int gr = glob(pattern, 0, NULL, &g);
    if (gr != 0) {
        if (gr != GLOB_NOMATCH)
            globfree(&g);
        return rumor_err_set(RUMOR_EIO, "%s: no shard matches", pattern);
    }
    /* each shard mapped, its run taken over: nothing copied */
    struct rumor_tokens_part *parts = calloc(g.gl_pathc, sizeof *parts);
    int rc = parts ? 0 : rumor_err_set(RUMOR_ENOMEM, "out of memory");
    size_t k = 0;
    for (; rc == 0 && k < g.gl_pathc; k++) {
        rumor_tokens_t *one;
        rc = read_shard(g.gl_pathv[k], vocab, &one);
        if (rc < 0)
            break;
        parts[k] = one->parts[0];
        one->nparts = 0; /* its run is ours now */
        rumor_tokens_destroy(&one);
    }
    if (rc == 0)
        rc = tokens_new(vocab, pattern, parts, (int)k, out);
    if (rc < 0) {
        for (size_t i = 0; parts && i < k; i++)
            tokmap_unref(parts[i].m);
        free(parts);
    }
    globfree(&g);
    return rc;
}

/* tokens:DIR (rumor-train tokenize's output: DIR/train_*.bin and
 * DIR/val_*.bin) or tokens:GLOB (shards, the last val_fraction of them
 * all for validation) */
static int load_many(const char *spec, int dir, int vocab, double val_fraction, size_t window,
                     rumor_tokens_t **train, rumor_tokens_t **val)
{
    char pat[4200];
    snprintf(pat, sizeof pat, dir ? "%s/train_*.bin" : "%s", spec);
    RUMOR_CHECK(read_glob(pat, vocab, train));
    int rc = 0;
    glob_t g;
    snprintf(pat, sizeof pat, "%s/val_*.bin", spec);
    if (dir && glob(pat, 0, NULL, &g) != 0)
        dir = 0; /* no validation shards: the last val_fraction of the train ones */
    else if (dir)
        globfree(&g);
    if (dir) {
        rc = read_glob(pat, vocab, val);
        if (rc == 0 && (*train)->n < window)
            rc = too_short(spec, (*train)->n, window, "training");
        if (rc == 0 && (*val)->n < window)
            rc = too_short(spec, (*val)->n, window, "validation");
    } else {
        size_t all = (*train)->n, v = val_part(all, val_fraction);
        if (all - v < window || v < window)
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: %zu tokens give %zu training and %zu "
                                              "validation tokens; a window of %zu tokens needs "
                                              "at least %zu in each", spec, all, all - v, v,
                               window, window);
        if (rc == 0)
            rc = split_tail(*train, v, spec, val);
    }
    if (rc < 0) {
        rumor_tokens_destroy(train);
        rumor_tokens_destroy(val);
    }
    return rc;
}

int rumor_tokens_load(const char *files, int vocab, double val_fraction, size_t window,
                      rumor_tokens_t **train, rumor_tokens_t **val)
{
    RUMOR_CHECK(check_args(val_fraction, window, train, val));
    if (vocab < 2 || vocab > 65536)
        return rumor_err_set(RUMOR_EINVAL, "vocabulary %d outside [2, 65536]", vocab);
    struct stat sb;
    int dir = !strchr(files, ',') && stat(files, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (dir || (!strchr(files, ',') && strpbrk(files, "*?[")))
        return load_many(files, dir, vocab, val_fraction, window, train, val);
    char *buf, **paths;
    int n;
    RUMOR_CHECK(split_list(files, 2, &buf, &paths, &n));
    int rc = read_shard(paths[0], vocab, train);
    if (rc == 0 && n == 2) {
        rc = read_shard(paths[1], vocab, val);
        if (rc == 0 && (*train)->n < window)
            rc = too_short(paths[0], (*train)->n, window, "training");
        if (rc == 0 && (*val)->n < window)
            rc = too_short(paths[1], (*val)->n, window, "validation");
    } else if (rc == 0) {
        size_t all = (*train)->n, v = val_part(all, val_fraction);
        if (all - v < window || v < window)
            rc = rumor_err_set(RUMOR_EFORMAT,
                               "%s: %zu tokens give %zu training and %zu validation tokens; a "
                               "window of %zu tokens needs at least %zu in each",
                               paths[0], all, all - v, v, window, window);
        if (rc == 0)
            rc = split_tail(*train, v, paths[0], val);
    }
    free(paths);
    free(buf);
    if (rc < 0) {
        rumor_tokens_destroy(train);
        rumor_tokens_destroy(val);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    return 0;
}

int rumor_tokens_save(const rumor_tokens_t *t, const char *path)
{
    if (!t || !path || t->n < 1 || t->n > INT32_MAX)
        return rumor_err_set(RUMOR_EINVAL, "%s: cannot save %zu tokens as a shard",
                             path ? path : "(null)", t ? t->n : 0);
    FILE *f = fopen(path, "wb");
    if (!f)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot create", path);
    unsigned char h[RUMOR_TOKENS_HEADER] = { 0 };
    int32_t head[3] = { RUMOR_TOKENS_MAGIC, RUMOR_TOKENS_VERSION, (int32_t)t->n };
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            h[4 * i + k] = (unsigned char)((uint32_t)head[i] >> (8 * k));
    int ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    for (size_t i = 0; ok && i < t->n; i++) {
        uint16_t v = rumor_tokens_at(t, i);
        unsigned char le[2] = { (unsigned char)(v & 0xff), (unsigned char)(v >> 8) };
        ok = fwrite(le, 1, 2, f) == 2;
    }
    if (fclose(f) != 0)
        ok = 0;
    if (!ok)
        return rumor_err_sys(RUMOR_ESYS, "%s: write failed", path);
    return 0;
}

/* -------------------------------------------------------------- statistics */

int rumor_unigram_entropy(const rumor_tokens_t *t, double *nats)
{
    if (!t || !nats || t->n == 0 || t->vocab < 1)
        return rumor_err_set(RUMOR_EINVAL, "unigram entropy of %s: no tokens",
                             t ? t->name : "(null)");
    size_t *c = calloc((size_t)t->vocab, sizeof *c);
    if (!c)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    for (size_t i = 0; i < t->n; i++) {
        uint16_t v = rumor_tokens_at(t, i);
        c[v < t->vocab ? v : 0]++; /* < vocab by construction */
    }
    double h = 0.0;
    for (int v = 0; v < t->vocab; v++)
        if (c[v]) {
            double p = (double)c[v] / (double)t->n;
            h -= p * log(p);
        }
    free(c);
    *nats = h;
    return 0;
}

/* ----------------------------------------------------------------- windows */

/* floor(n r / w) without overflowing n r. */
static size_t slice_at(size_t n, int r, int w)
{
    size_t q = n / (size_t)w, m = n % (size_t)w;
    return q * (size_t)r + m * (size_t)r / (size_t)w;
}

int rumor_tokens_slice(const rumor_tokens_t *t, int rank, int world, size_t *lo, size_t *hi)
{
    if (!t || !lo || !hi || world < 1 || rank < 0 || rank >= world)
        return rumor_err_set(RUMOR_EINVAL, "slice: rank %d of world %d invalid", rank, world);
    *lo = slice_at(t->n, rank, world);
    *hi = slice_at(t->n, rank + 1, world);
    return 0;
}

/* Checks the arguments of a draw, finds the slice and seeds the stream of
 * (seed, rank, step); starts are then lo + rumor_rand_below(state, span). */
static int windows_begin(const rumor_tokens_t *t, uint64_t seed, int rank, int world, long step,
                         int B, int T, size_t *lo, uint64_t *span, uint64_t *state)
{
    if (B < 1 || T < 1 || step < 0)
        return rumor_err_set(RUMOR_EINVAL, "windows: batch %d, T %d or step %ld out of range", B,
                             T, step);
    size_t hi;
    RUMOR_CHECK(rumor_tokens_slice(t, rank, world, lo, &hi));
    if (hi - *lo < (size_t)T + 1)
        return rumor_err_set(RUMOR_EINVAL,
                             "%s: shard %d of %d holds %zu tokens, fewer than a window of %d",
                             t->name, rank, world, hi - *lo, T + 1);
    *span = hi - *lo - (size_t)T; /* starts in [lo, hi - T - 1] */
    uint64_t s = seed ^ 0x77696e646f77ULL; /* "window" */
    s = rumor_splitmix64(&s) ^ (uint64_t)rank * 0x9e3779b97f4a7c15ULL;
    s = rumor_splitmix64(&s) ^ (uint64_t)step * 0xc2b2ae3d27d4eb4fULL;
    *state = s;
    return 0;
}

int rumor_tokens_starts(const rumor_tokens_t *t, uint64_t seed, int rank, int world, long step,
                        int B, int T, size_t *starts)
{
    size_t lo;
    uint64_t span, s;
    if (!starts)
        return rumor_err_set(RUMOR_EINVAL, "windows: starts is NULL");
    RUMOR_CHECK(windows_begin(t, seed, rank, world, step, B, T, &lo, &span, &s));
    for (int b = 0; b < B; b++)
        starts[b] = lo + (size_t)rumor_rand_below(&s, span);
    return 0;
}

int rumor_tokens_sample(const rumor_tokens_t *t, uint64_t seed, int rank, int world, long step,
                        int B, int T, int32_t *tok, int32_t *y)
{
    size_t lo;
    uint64_t span, s;
    if (!tok || !y)
        return rumor_err_set(RUMOR_EINVAL, "windows: output is NULL");
    RUMOR_CHECK(windows_begin(t, seed, rank, world, step, B, T, &lo, &span, &s));
    for (int b = 0; b < B; b++) {
        size_t at = lo + (size_t)rumor_rand_below(&s, span);
        tok_copy(t, at, (size_t)T, tok + (size_t)b * (size_t)T);
        tok_copy(t, at + 1, (size_t)T, y + (size_t)b * (size_t)T);
        window_read(t);
    }
    return 0;
}

long rumor_tokens_val_windows(const rumor_tokens_t *t, int T)
{
    if (!t || T < 1 || t->n < (size_t)T + 1)
        return 0;
    return (long)((t->n - 1) / (size_t)T);
}

int rumor_tokens_val_window(const rumor_tokens_t *t, int T, long i, int32_t *tok, int32_t *y)
{
    long w = rumor_tokens_val_windows(t, T);
    if (!tok || !y || i < 0 || i >= w)
        return rumor_err_set(RUMOR_EINVAL, "%s: validation window %ld of %ld (T %d)",
                             t ? t->name : "(null)", i, w, T);
    tok_copy(t, (size_t)i * (size_t)T, (size_t)T, tok);
    tok_copy(t, (size_t)i * (size_t)T + 1, (size_t)T, y);
    window_read(t);
    return 0;
}

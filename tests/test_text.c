/* Text and token data (src/text.h) and data sources (src/source.h), with
 * real files written to a scratch directory:
 *  - byte-level text splits each file into exact train/validation parts
 *    (binary bytes included);
 *  - llm.c token shards round-trip, and every malformed file (empty, wrong
 *    magic or version, no tokens, truncated, trailing bytes, a token outside
 *    the vocabulary, a window longer than the data, missing) is refused with
 *    a message naming the file, leaving the outputs NULL; so is an unknown
 *    --data kind;
 *  - the window sampler depends only on (seed, rank, step), keeps each rank
 *    inside its contiguous slice, the slices are disjoint and cover the
 *    train tokens, and targets are the inputs shifted by one;
 *  - validation windows step by T and predict every token once;
 *  - the unigram entropy equals its closed form;
 *  - the fashion-mnist source hands out the bytes the programs' old path
 *    (shard, standardize, loader) did, when Debian's dataset is installed;
 *  - the default corpus (build/corpus/kjv.txt), when ./bootstrap wrote it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>

#include "source.h"
#include "testutil.h"

static char dir[4096];

static const char *path(const char *name)
{
    static char buf[8][4200];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void put(const char *name, const void *data, size_t n)
{
    FILE *f = fopen(path(name), "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        perror(name);
        exit(99);
    }
}

/* An llm.c shard written by hand: header (magic, version, count) then ntok
 * tokens; `trailing` zero bytes appended, `drop` bytes cut from the end. */
static void put_shard(const char *name, int magic, int version, int count, const uint16_t *tok,
                      int ntok, int trailing, int drop)
{
    size_t n = 1024 + 2 * (size_t)ntok + (size_t)trailing;
    unsigned char *b = calloc(1, n);
    int32_t h[3] = { magic, version, count };
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            b[4 * i + k] = (unsigned char)((uint32_t)h[i] >> (8 * k));
    for (int i = 0; i < ntok; i++) {
        b[1024 + 2 * i] = (unsigned char)(tok[i] & 0xff);
        b[1024 + 2 * i + 1] = (unsigned char)(tok[i] >> 8);
    }
    put(name, b, n - (size_t)drop);
    free(b);
}

/* Outputs of a failing call are set to this first: the call must NULL them. */
static rumor_tokens_t sentinel;

/* A loader call that must fail with `want`, a message naming `substr`, and
 * both outputs NULL. */
#define CHECK_LOAD_ERR(call, want, substr)                                         \
    do {                                                                           \
        tr = va = &sentinel;                                                       \
        CHECK_ERR(call, want, substr);                                             \
        CHECK(tr == NULL && va == NULL);                                           \
    } while (0)

/* The same for rumor_source_open(&c, &s). */
#define CHECK_OPEN_ERR(want, substr)                                               \
    do {                                                                           \
        s = (rumor_source_t *)&sentinel;                                           \
        CHECK_ERR(rumor_source_open(&c, &s), want, substr);                        \
        CHECK(s == NULL);                                                          \
    } while (0)

/* ------------------------------------------------------------------- text */

static char a[1000], b[500];
static unsigned char bin[1024];

static void check_text_split(void)
{
    for (int i = 0; i < 1000; i++)
        a[i] = (char)('a' + i % 26);
    for (int i = 0; i < 500; i++)
        b[i] = (char)('A' + i % 7);
    for (int i = 0; i < 1024; i++)
        bin[i] = (unsigned char)(i * 37 % 256); /* every byte value, NUL included */
    put("a.txt", a, sizeof a);
    put("b.txt", b, sizeof b);
    put("bin.dat", bin, sizeof bin);
    char spec[9000];
    snprintf(spec, sizeof spec, "%s,%s,%s", path("a.txt"), path("b.txt"), path("bin.dat"));
    rumor_tokens_t *tr = NULL, *va = NULL;
    CHECK_OK(rumor_text_load(spec, 0.1, 17, &tr, &va));
    if (!tr || !va)
        return;
    /* the last floor(10%) of each file is validation: 100, 50 and 102 bytes */
    CHECK(tr->n == 900 + 450 + 922 && va->n == 100 + 50 + 102);
    CHECK(tr->vocab == 256 && va->vocab == 256);
    int same = 1;
    for (size_t i = 0; i < 900; i++)
        same &= tr->tok[i] == (unsigned char)a[i];
    for (size_t i = 0; i < 450; i++)
        same &= tr->tok[900 + i] == (unsigned char)b[i];
    for (size_t i = 0; i < 922; i++)
        same &= tr->tok[1350 + i] == bin[i];
    for (size_t i = 0; i < 100; i++)
        same &= va->tok[i] == (unsigned char)a[900 + i];
    for (size_t i = 0; i < 50; i++)
        same &= va->tok[100 + i] == (unsigned char)b[450 + i];
    for (size_t i = 0; i < 102; i++)
        same &= va->tok[150 + i] == bin[922 + i];
    CHECKF(same, "train/validation tokens are not the files' bytes in order");
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
    rumor_tokens_destroy(&tr); /* twice is fine */
    CHECK(tr == NULL);

    /* 0.25 of a 1000-byte file */
    CHECK_OK(rumor_text_load(path("a.txt"), 0.25, 17, &tr, &va));
    CHECK(tr && va && tr->n == 750 && va->n == 250);
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
}

static void check_text_errors(void)
{
    rumor_tokens_t *tr, *va;
    put("empty.txt", "", 0);
    put("small.txt", "0123456789abcdefghij", 20); /* 18 train, 2 validation bytes */
    CHECK_LOAD_ERR(rumor_text_load(path("empty.txt"), 0.1, 2, &tr, &va), RUMOR_EFORMAT,
                   path("empty.txt"));
    CHECK_LOAD_ERR(rumor_text_load(path("missing.txt"), 0.1, 2, &tr, &va), RUMOR_ESYS,
                   path("missing.txt"));
    /* a file too small for a window in each part, even beside a large one */
    char spec[9000];
    snprintf(spec, sizeof spec, "%s,%s", path("a.txt"), path("small.txt"));
    CHECK_LOAD_ERR(rumor_text_load(spec, 0.1, 3, &tr, &va), RUMOR_EFORMAT, path("small.txt"));
    CHECK_ERR(rumor_text_load(spec, 0.1, 3, &tr, &va), RUMOR_EFORMAT,
              "18 training and 2 validation tokens; a window of 3");
    /* a window longer than the data */
    CHECK_LOAD_ERR(rumor_text_load(path("a.txt"), 0.1, 101, &tr, &va), RUMOR_EFORMAT,
                   path("a.txt"));
    CHECK_LOAD_ERR(rumor_text_load(dir, 0.1, 2, &tr, &va), RUMOR_EINVAL, "not a regular file");
    CHECK_LOAD_ERR(rumor_text_load(path("a.txt"), 1.0, 2, &tr, &va), RUMOR_EINVAL, "fraction");
    snprintf(spec, sizeof spec, "%s,,%s", path("a.txt"), path("b.txt"));
    CHECK_LOAD_ERR(rumor_text_load(spec, 0.1, 2, &tr, &va), RUMOR_EINVAL, "empty file name");
}

/* ----------------------------------------------------------------- tokens */

static uint16_t shard_tok[3000];

static void check_tokens_roundtrip(void)
{
    for (int i = 0; i < 3000; i++)
        shard_tok[i] = (uint16_t)((i * 7919u + 13) % 50257);
    rumor_tokens_t *t = NULL, *tr = NULL, *va = NULL;
    CHECK_OK(rumor_tokens_create(3000, 50257, "made here", &t));
    if (!t)
        return;
    memcpy(t->tok, shard_tok, sizeof shard_tok);
    CHECK_OK(rumor_tokens_save(t, path("saved.bin")));
    /* the library's file is byte for byte the hand-written one */
    put_shard("hand.bin", 20240520, 1, 3000, shard_tok, 3000, 0, 0);
    FILE *f1 = fopen(path("saved.bin"), "rb"), *f2 = fopen(path("hand.bin"), "rb");
    static unsigned char b1[8000], b2[8000];
    size_t n1 = f1 ? fread(b1, 1, sizeof b1, f1) : 0, n2 = f2 ? fread(b2, 1, sizeof b2, f2) : 0;
    if (f1)
        fclose(f1);
    if (f2)
        fclose(f2);
    CHECK(n1 == 1024 + 6000 && n1 == n2 && !memcmp(b1, b2, n1));
    /* no VAL.bin: the last 10% is validation */
    CHECK_OK(rumor_tokens_load(path("saved.bin"), 50257, 0.1, 9, &tr, &va));
    if (tr && va) {
        CHECK(tr->n == 2700 && va->n == 300 && tr->vocab == 50257 && va->vocab == 50257);
        CHECK(!memcmp(tr->tok, shard_tok, 2700 * 2));
        CHECK(!memcmp(va->tok, shard_tok + 2700, 300 * 2));
    }
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
    /* TRAIN.bin,VAL.bin: both whole */
    put_shard("val.bin", 20240520, 1, 40, shard_tok + 100, 40, 0, 0);
    char spec[9000];
    snprintf(spec, sizeof spec, "%s,%s", path("hand.bin"), path("val.bin"));
    CHECK_OK(rumor_tokens_load(spec, 50257, 0.1, 9, &tr, &va));
    if (tr && va) {
        CHECK(tr->n == 3000 && va->n == 40);
        CHECK(!memcmp(tr->tok, shard_tok, sizeof shard_tok));
        CHECK(!memcmp(va->tok, shard_tok + 100, 80));
    }
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
    rumor_tokens_destroy(&t);
    /* a smaller vocabulary the caller names */
    uint16_t small[100];
    for (int i = 0; i < 100; i++)
        small[i] = (uint16_t)(i % 10);
    put_shard("small.bin", 20240520, 1, 100, small, 100, 0, 0);
    CHECK_OK(rumor_tokens_load(path("small.bin"), 10, 0.2, 9, &tr, &va));
    CHECK(tr && tr->vocab == 10 && tr->n == 80 && va->n == 20);
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
}

static void check_tokens_errors(void)
{
    rumor_tokens_t *tr, *va;
    put("empty.bin", "", 0);
    CHECK_LOAD_ERR(rumor_tokens_load(path("empty.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
                   path("empty.bin"));
    put_shard("magic.bin", 20240521, 1, 300, shard_tok, 300, 0, 0);
    CHECK_LOAD_ERR(rumor_tokens_load(path("magic.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
                   path("magic.bin"));
    CHECK_ERR(rumor_tokens_load(path("magic.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
              "magic 20240521, expected 20240520");
    put_shard("version.bin", 20240520, 2, 300, shard_tok, 300, 0, 0);
    CHECK_LOAD_ERR(rumor_tokens_load(path("version.bin"), 50257, 0.1, 9, &tr, &va),
                   RUMOR_EFORMAT, "version.bin: version 2, expected 1");
    put_shard("zero.bin", 20240520, 1, 0, shard_tok, 0, 0, 0);
    CHECK_LOAD_ERR(rumor_tokens_load(path("zero.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
                   "zero.bin: the header claims 0 tokens");
    put_shard("negative.bin", 20240520, 1, -5, shard_tok, 0, 0, 0);
    CHECK_LOAD_ERR(rumor_tokens_load(path("negative.bin"), 50257, 0.1, 9, &tr, &va),
                   RUMOR_EFORMAT, "negative.bin");
    /* truncated data: both sizes named; a header that claims 2^31-1 tokens
     * must not be believed (no 4 GB allocation) */
    put_shard("short.bin", 20240520, 1, 300, shard_tok, 300, 0, 7);
    CHECK_LOAD_ERR(rumor_tokens_load(path("short.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EIO,
                   "short.bin: truncated: 1617 bytes, the header's 300 tokens need 1624");
    put_shard("liar.bin", 20240520, 1, 2147483647, shard_tok, 300, 0, 0);
    CHECK_LOAD_ERR(rumor_tokens_load(path("liar.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EIO,
                   "liar.bin: truncated");
    put_shard("header.bin", 20240520, 1, 300, shard_tok, 0, 0, 1000); /* 24 bytes */
    CHECK_LOAD_ERR(rumor_tokens_load(path("header.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EIO,
                   "header.bin: truncated: 24 bytes");
    put_shard("long.bin", 20240520, 1, 300, shard_tok, 300, 4, 0);
    CHECK_LOAD_ERR(rumor_tokens_load(path("long.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
                   "long.bin: 1628 bytes, 4 trailing bytes");
    /* the first token outside the vocabulary, by id and index */
    uint16_t bad[300];
    memcpy(bad, shard_tok, sizeof bad);
    for (int i = 0; i < 300; i++)
        bad[i] %= 1000;
    bad[123] = 50257;
    bad[200] = 60000;
    put_shard("vocab.bin", 20240520, 1, 300, bad, 300, 0, 0);
    CHECK_LOAD_ERR(rumor_tokens_load(path("vocab.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
                   "vocab.bin: token 50257 at index 123 is outside the vocabulary of 50257");
    CHECK_LOAD_ERR(rumor_tokens_load(path("hand.bin"), 1000, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
                   "outside the vocabulary of 1000");
    /* a window longer than the data: the split, the train shard, the val shard */
    CHECK_LOAD_ERR(rumor_tokens_load(path("hand.bin"), 50257, 0.1, 301, &tr, &va),
                   RUMOR_EFORMAT, "hand.bin: 3000 tokens give 2700 training and 300 validation");
    char spec[9000];
    snprintf(spec, sizeof spec, "%s,%s", path("hand.bin"), path("val.bin"));
    CHECK_LOAD_ERR(rumor_tokens_load(spec, 50257, 0.1, 41, &tr, &va), RUMOR_EFORMAT,
                   "val.bin: 40 validation tokens, fewer than a window of 41");
    snprintf(spec, sizeof spec, "%s,%s", path("val.bin"), path("hand.bin"));
    CHECK_LOAD_ERR(rumor_tokens_load(spec, 50257, 0.1, 41, &tr, &va), RUMOR_EFORMAT,
                   "val.bin: 40 training tokens, fewer than a window of 41");
    CHECK_LOAD_ERR(rumor_tokens_load(path("missing.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_ESYS,
                   path("missing.bin"));
    snprintf(spec, sizeof spec, "%s,%s", path("hand.bin"), path("missing.bin"));
    CHECK_LOAD_ERR(rumor_tokens_load(spec, 50257, 0.1, 9, &tr, &va), RUMOR_ESYS,
                   path("missing.bin"));
    snprintf(spec, sizeof spec, "%s,%s,%s", path("hand.bin"), path("val.bin"), path("val.bin"));
    CHECK_LOAD_ERR(rumor_tokens_load(spec, 50257, 0.1, 9, &tr, &va), RUMOR_EINVAL,
                   "at most 2");
}

/* ---------------------------------------------------------------- windows */

static void check_slices(const rumor_tokens_t *t)
{
    for (int world = 1; world <= 7; world++) {
        size_t end = 0;
        for (int r = 0; r < world; r++) {
            size_t lo, hi;
            CHECK_OK(rumor_tokens_slice(t, r, world, &lo, &hi));
            /* contiguous, disjoint, covering; floor(n r / w) exactly */
            CHECK(lo == end && lo == t->n * (size_t)r / (size_t)world);
            CHECK(hi - lo == t->n / world || hi - lo == t->n / world + 1);
            end = hi;
        }
        CHECKF(end == t->n, "world %d: slices end at %zu of %zu", world, end, t->n);
    }
    size_t lo, hi;
    CHECK_ERR(rumor_tokens_slice(t, 3, 3, &lo, &hi), RUMOR_EINVAL, "rank 3 of world 3");
    CHECK_ERR(rumor_tokens_slice(t, 0, 0, &lo, &hi), RUMOR_EINVAL, "world 0");
}

static void check_sampler(void)
{
    rumor_tokens_t *tr = NULL, *va = NULL;
    char spec[9000];
    snprintf(spec, sizeof spec, "%s,%s,%s", path("a.txt"), path("b.txt"), path("bin.dat"));
    CHECK_OK(rumor_text_load(spec, 0.1, 17, &tr, &va));
    if (!tr || !va)
        return;
    check_slices(tr);
    enum { B = 6, T = 16, W = 3 };
    size_t s1[B], s2[B], s3[B];
    int32_t t1[B * T], y1[B * T], t2[B * T], y2[B * T];
    for (int rank = 0; rank < W; rank++) {
        size_t lo, hi;
        CHECK_OK(rumor_tokens_slice(tr, rank, W, &lo, &hi));
        CHECK_OK(rumor_tokens_starts(tr, 5, rank, W, 7, B, T, s1));
        CHECK_OK(rumor_tokens_starts(tr, 5, rank, W, 3, B, T, s3)); /* another step between */
        CHECK_OK(rumor_tokens_starts(tr, 5, rank, W, 7, B, T, s2));
        CHECK(!memcmp(s1, s2, sizeof s1));
        CHECK(memcmp(s1, s3, sizeof s1) != 0);
        CHECK_OK(rumor_tokens_starts(tr, 6, rank, W, 7, B, T, s3)); /* another seed */
        CHECK(memcmp(s1, s3, sizeof s1) != 0);
        CHECK_OK(rumor_tokens_sample(tr, 5, rank, W, 7, B, T, t1, y1));
        CHECK_OK(rumor_tokens_sample(tr, 5, rank, W, 7, B, T, t2, y2));
        CHECK(!memcmp(t1, t2, sizeof t1) && !memcmp(y1, y2, sizeof y1));
        int inside = 1, shifted = 1;
        for (int w = 0; w < B; w++) {
            inside &= s1[w] >= lo && s1[w] + T + 1 <= hi;
            for (int k = 0; k < T; k++) {
                shifted &= t1[w * T + k] == tr->tok[s1[w] + k];
                shifted &= y1[w * T + k] == tr->tok[s1[w] + k + 1];
                if (k + 1 < T)
                    shifted &= y1[w * T + k] == t1[w * T + k + 1];
            }
        }
        CHECKF(inside, "rank %d: a window outside [%zu, %zu)", rank, lo, hi);
        CHECKF(shifted, "rank %d: inputs or targets are not data[s+t], data[s+t+1]", rank);
        CHECK_OK(rumor_tokens_sample(tr, 5, rank, W, 8, B, T, t2, y2));
        CHECK(memcmp(t1, t2, sizeof t1) != 0);
        /* uniform over the starts: 4000 draws, each quarter of [lo, hi-T-1]
         * within 20% of its share, and both ends reached */
        size_t span = hi - lo - T, q[4] = { 0 }, first = hi, last = 0;
        for (long step = 0; step < 4000 / B; step++) {
            CHECK_OK(rumor_tokens_starts(tr, 11, rank, W, step, B, T, s2));
            for (int w = 0; w < B; w++) {
                q[(s2[w] - lo) * 4 / span]++;
                first = s2[w] < first ? s2[w] : first;
                last = s2[w] > last ? s2[w] : last;
            }
        }
        for (int k = 0; k < 4; k++)
            CHECKF(q[k] > 800 && q[k] < 1200, "rank %d: quarter %d drew %zu of %d", rank, k,
                   q[k], 4000 / B * B);
        CHECK(first < lo + 5 && last > hi - T - 1 - 5 && last <= hi - T - 1);
    }
    /* a slice too small for a window */
    CHECK_ERR(rumor_tokens_sample(tr, 5, 3, 200, 0, B, T, t1, y1), RUMOR_EINVAL,
              "shard 3 of 200 holds 11 tokens, fewer than a window of 17");
    CHECK_ERR(rumor_tokens_sample(tr, 5, 0, 1, -1, B, T, t1, y1), RUMOR_EINVAL, "step -1");

    /* validation: windows of T+1 at stride T, every token after the first
     * predicted once */
    long nw = rumor_tokens_val_windows(va, T);
    CHECK(nw == (long)((va->n - 1) / T) && nw == 15);
    int *hits = calloc(va->n, sizeof *hits);
    int ok = 1;
    for (long i = 0; i < nw; i++) {
        int32_t vt[T], vy[T];
        CHECK_OK(rumor_tokens_val_window(va, T, i, vt, vy));
        for (int k = 0; k < T; k++) {
            ok &= vt[k] == va->tok[i * T + k] && vy[k] == va->tok[i * T + k + 1];
            hits[i * T + k + 1]++;
        }
    }
    for (long p = 1; p <= nw * T; p++)
        ok &= hits[p] == 1;
    CHECKF(ok && hits[0] == 0, "validation windows overlap or skip tokens");
    free(hits);
    int32_t vt[T], vy[T];
    CHECK_ERR(rumor_tokens_val_window(va, T, nw, vt, vy), RUMOR_EINVAL, "validation window 15");
    CHECK(rumor_tokens_val_windows(va, (int)va->n) == 0);
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
    /* at the edges: k T tokens hold k - 1 windows, k T + 1 hold k */
    for (size_t n = 4 * T - 1; n <= 4 * T + 2; n++) {
        rumor_tokens_t *t = NULL;
        CHECK_OK(rumor_tokens_create(n, 256, "edge", &t));
        long want = n == 4 * T - 1 || n == 4 * T ? 3 : 4;
        CHECKF(rumor_tokens_val_windows(t, T) == want, "%zu tokens: %ld windows", n,
               rumor_tokens_val_windows(t, T));
        CHECK_OK(rumor_tokens_val_window(t, T, want - 1, vt, vy));
        rumor_tokens_destroy(&t);
    }
}

/* ---------------------------------------------------------------- entropy */

static void check_entropy(void)
{
    /* 40 bytes at validation fraction 0.2: the train part is the first 32 */
    struct {
        const char *text, *name;
        double want;
    } cases[] = {
        { "aabbaabbaabbaabbaabbaabbaabbaabbzzzzzzzz", "ab.txt", log(2.0) },
        { "abcdabcdabcdabcdabcdabcdabcdabcdzzzzzzzz", "abcd.txt", log(4.0) },
        { "aaabaaabaaabaaabaaabaaabaaabaaabzzzzzzzz", "aaab.txt",
          -(0.75 * log(0.75) + 0.25 * log(0.25)) },
        { "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxyyyyyyyy", "x.txt", 0.0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rumor_tokens_t *tr = NULL, *va = NULL;
        put(cases[i].name, cases[i].text, 40);
        CHECK_OK(rumor_text_load(path(cases[i].name), 0.2, 2, &tr, &va));
        double h = -1;
        if (tr && tr->n == 32)
            CHECK_OK(rumor_unigram_entropy(tr, &h));
        CHECK_CLOSE(h, cases[i].want, 1e-12, 1e-12);
        rumor_tokens_destroy(&tr);
        rumor_tokens_destroy(&va);
    }
    double h;
    rumor_tokens_t *none = NULL;
    CHECK_OK(rumor_tokens_create(0, 256, "nothing", &none));
    CHECK_ERR(rumor_unigram_entropy(none, &h), RUMOR_EINVAL, "nothing");
    rumor_tokens_destroy(&none);
}

/* --------------------------------------------------------- token sources */

static void check_token_source(void)
{
    rumor_source_config_t c;
    rumor_source_config_default(&c);
    CHECK(c.seq == 64 && c.val_fraction == 0.1 && c.vocab == 0 && c.normalize == 1 &&
          c.world == 1);
    rumor_source_t *s = NULL, *s2 = NULL;
    char spec[9000];
    snprintf(spec, sizeof spec, "text:%s,%s", path("a.txt"), path("b.txt"));
    c.spec = spec;
    c.seq = 16;
    c.batch = 4;
    c.world = 2;
    c.rank = 1;
    c.seed = 9;
    CHECK_OK(rumor_source_open(&c, &s));
    CHECK_OK(rumor_source_open(&c, &s2)); /* a peer that restarts */
    if (!s || !s2)
        return;
    spec[0] = 'X'; /* the source keeps its own copy */
    const rumor_tokens_t *tr = rumor_source_train_tokens(s), *va = rumor_source_val_tokens(s);
    CHECK(tr && va && tr->n == 1350 && va->n == 150);
    CHECK(rumor_source_kind(s) == RUMOR_BATCH_TOKENS && rumor_source_vocab(s) == 256 &&
          rumor_source_width(s) == 16);
    CHECK(rumor_source_train_size(s) == 675 && rumor_source_min_train_size(s) == 675);
    CHECK(rumor_source_train_dataset(s) == NULL && rumor_source_test_dataset(s) == NULL);
    CHECKF(!strcmp(rumor_source_describe(s),
                   "text: 2 files, 1350 train tokens, 150 validation tokens, vocab 256"),
           "%s", rumor_source_describe(s));
    rumor_batch_t bt, b2;
    int32_t tok[4 * 16], y[4 * 16];
    CHECK(rumor_source_next(s, 3, &bt) == 4);
    CHECK(bt.kind == RUMOR_BATCH_TOKENS && bt.n == 4 && bt.width == 16 && !bt.x && bt.tok && bt.y);
    CHECK_OK(rumor_tokens_sample(tr, 9, 1, 2, 3, 4, 16, tok, y));
    CHECK(!memcmp(bt.tok, tok, sizeof tok) && !memcmp(bt.y, y, sizeof y));
    CHECK(rumor_source_next(s2, 3, &b2) == 4);
    CHECK(!memcmp(b2.tok, tok, sizeof tok) && !memcmp(b2.y, y, sizeof y));
    CHECK(rumor_source_epoch(s) == 0);
    /* 675 tokens hold 10 steps of 4 windows of 16 tokens: step 30 is epoch 3 */
    CHECK(rumor_source_steps_per_epoch(s) == 10);
    CHECK(rumor_source_next(s, 29, &bt) == 4 && rumor_source_epoch(s) == 2);
    CHECK(rumor_source_next(s, 30, &bt) == 4 && rumor_source_epoch(s) == 3);
    /* validation: every window once, in order, in batches of any size */
    long nw = rumor_tokens_val_windows(va, 16);
    CHECK(nw == 9 && rumor_source_val_batches(s, 4) == 3 && rumor_source_val_batches(s, 20) == 1);
    int got = 0, ok = 1;
    for (int i = 0; i < rumor_source_val_batches(s, 4); i++) {
        int n = rumor_source_val(s, i, 4, &bt);
        CHECK(n == (i < 2 ? 4 : 1) && bt.n == n && bt.width == 16);
        for (int k = 0; k < n; k++, got++) {
            CHECK_OK(rumor_tokens_val_window(va, 16, got, tok, y));
            ok &= !memcmp(bt.tok + k * 16, tok, 64) && !memcmp(bt.y + k * 16, y, 64);
        }
    }
    CHECK(ok && got == 9);
    CHECK(rumor_source_val(s, 3, 4, &bt) == 0 && bt.n == 0);
    CHECK(rumor_source_val(s, 0, 20, &bt) == 9); /* larger than the training batch */
    rumor_source_destroy(&s);
    rumor_source_destroy(&s);
    rumor_source_destroy(&s2);
    CHECK(s == NULL);
    /* a cap on validation windows */
    snprintf(spec, sizeof spec, "text:%s,%s", path("a.txt"), path("b.txt"));
    c.val_max = 5;
    CHECK_OK(rumor_source_open(&c, &s));
    if (s)
        CHECK(rumor_source_val_batches(s, 4) == 2 && rumor_source_val(s, 1, 4, &bt) == 1);
    rumor_source_destroy(&s);
    c.val_max = 0;

    /* tokens: GPT-2's vocabulary unless the config names one */
    snprintf(spec, sizeof spec, "tokens:%s,%s", path("hand.bin"), path("val.bin"));
    c.world = 1;
    c.rank = 0;
    CHECK_OK(rumor_source_open(&c, &s));
    if (s) {
        CHECK(rumor_source_vocab(s) == 50257 && rumor_source_train_size(s) == 3000);
        CHECKF(strstr(rumor_source_describe(s), "tokens: 2 files, 3000 train tokens, 40 "
                                                "validation tokens, vocab 50257") != NULL,
               "%s", rumor_source_describe(s));
        CHECK(rumor_source_next(s, 0, &bt) == 4 && bt.tok[0] < 50257);
    }
    rumor_source_destroy(&s);
    snprintf(spec, sizeof spec, "tokens:%s", path("small.bin"));
    c.vocab = 10;
    c.seq = 8;
    CHECK_OK(rumor_source_open(&c, &s));
    CHECK(s && rumor_source_vocab(s) == 10 && rumor_source_train_size(s) == 90);
    rumor_source_destroy(&s);

    /* errors name the file and leave the source NULL */
    c.vocab = 0;
    c.seq = 16;
    c.spec = "parquet:/data/x";
    CHECK_OPEN_ERR(RUMOR_EINVAL, "--data 'parquet:/data/x': unknown kind; expected "
                                 "fashion-mnist[:DIR], DIR, text:FILE[,FILE...] or "
                                 "tokens:TRAIN.bin[,VAL.bin]");
    c.spec = "wikipedia";
    CHECK_OPEN_ERR(RUMOR_EINVAL, "'wikipedia': unknown kind");
    c.spec = spec;
    snprintf(spec, sizeof spec, "text:%s", path("missing.txt"));
    CHECK_OPEN_ERR(RUMOR_ESYS, path("missing.txt"));
    snprintf(spec, sizeof spec, "text:%s", path("a.txt"));
    c.seq = 100; /* 100 validation bytes: no window of 101 */
    CHECK_OPEN_ERR(RUMOR_EFORMAT, path("a.txt"));
    c.seq = 16;
    c.vocab = 100;
    CHECK_OPEN_ERR(RUMOR_EINVAL, "vocabulary of 256");
    c.vocab = 0;
    snprintf(spec, sizeof spec, "tokens:%s", path("vocab.bin"));
    CHECK_OPEN_ERR(RUMOR_EFORMAT, path("vocab.bin"));
    snprintf(spec, sizeof spec, "tokens:%s", path("missing.bin"));
    CHECK_OPEN_ERR(RUMOR_ESYS, path("missing.bin"));
    snprintf(spec, sizeof spec, "text:%s", path("a.txt"));
    c.world = 200; /* slices smaller than a window */
    c.rank = 3;
    CHECK_OPEN_ERR(RUMOR_EINVAL, "shard 3 of 200 holds 5 training tokens");
    c.rank = 200;
    CHECK_OPEN_ERR(RUMOR_EINVAL, "rank 200 of 200");
    c.world = 1;
    c.rank = 0;
    snprintf(spec, sizeof spec, "fashion-mnist:%s/no-such-dir", dir);
    CHECK_OPEN_ERR(RUMOR_ESYS, "no-such-dir/train-images-idx3-ubyte");
    snprintf(spec, sizeof spec, "%s/no-such-dir", dir); /* a path: a directory */
    CHECK_OPEN_ERR(RUMOR_ESYS, "no-such-dir/train-images-idx3-ubyte");
}

/* ---------------------------------------------------------- fashion-mnist */

/* The programs' path before sources: load, shard, standardize with
 * Fashion-MNIST's constants, a shuffled loader seeded by seed + rank. */
static int old_path(const char *fm, int rank, int world, uint64_t seed, int batch, int drop_last,
                    rumor_dataset_t **train, rumor_dataset_t **test, rumor_loader_t **l)
{
    rumor_dataset_t *full = NULL;
    RUMOR_CHECK(rumor_dataset_load(fm, "train", &full));
    int rc = rumor_dataset_load(fm, "test", test);
    if (rc == 0)
        rc = rumor_dataset_shard(full, rank, world, seed, train);
    rumor_dataset_destroy(&full);
    if (rc == 0)
        rc = rumor_dataset_normalize(*train, 0.2860f, 0.3530f);
    if (rc == 0)
        rc = rumor_dataset_normalize(*test, 0.2860f, 0.3530f);
    if (rc == 0)
        rc = rumor_loader_create(*train, batch, seed + (uint64_t)rank, 1, drop_last, l);
    return rc;
}

static void check_fashion_source(int *ran)
{
    const char *fm = tu_fashion_dir();
    char probe[4200];
    struct stat sb;
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", fm);
    if (stat(probe, &sb) != 0) {
        snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte", fm);
        if (stat(probe, &sb) != 0) {
            fprintf(stderr, "test_text: SKIP the fashion-mnist source: no %s "
                            "(apt-get install dataset-fashion-mnist)\n", fm);
            return;
        }
    }
    *ran = 1;
    rumor_dataset_t *train = NULL, *test = NULL;
    rumor_loader_t *l = NULL;
    CHECK_OK(old_path(fm, 1, 3, 7, 32, 1, &train, &test, &l));
    rumor_source_config_t c;
    rumor_source_config_default(&c);
    char spec[4200];
    snprintf(spec, sizeof spec, "fashion-mnist:%s", fm);
    c.spec = spec;
    c.seed = 7;
    c.rank = 1;
    c.world = 3;
    c.batch = 32;
    c.lockstep = 1;
    rumor_source_t *s = NULL;
    CHECK_OK(rumor_source_open(&c, &s));
    if (!s || !l) {
        rumor_source_destroy(&s);
        rumor_loader_destroy(&l);
        rumor_dataset_destroy(&train);
        rumor_dataset_destroy(&test);
        return;
    }
    CHECK(rumor_source_kind(s) == RUMOR_BATCH_IMAGES && rumor_source_vocab(s) == 10 &&
          rumor_source_width(s) == 784);
    CHECK(rumor_source_train_size(s) == 20000 && rumor_source_min_train_size(s) == 20000);
    CHECK(rumor_source_train_tokens(s) == NULL && rumor_source_test_dataset(s)->n == 10000);
    CHECKF(strstr(rumor_source_describe(s), "60000 train examples (20000 in shard 1 of 3), "
                                            "10000 test examples") != NULL,
           "%s", rumor_source_describe(s));
    /* step for step the bytes of the old path, across an epoch's end (where
     * the old loader said 0 once) */
    int per_epoch = rumor_loader_batches_per_epoch(l), same = 1, batches = 0;
    CHECK(per_epoch == 625 && rumor_source_steps_per_epoch(s) == 625);
    float *keep_x = malloc(32 * 784 * sizeof(float));
    int32_t keep_y[32];
    for (int i = 0; i < per_epoch + 3; i++) {
        const float *x;
        const int32_t *y;
        rumor_batch_t bt;
        int n0 = rumor_loader_next(l, &x, &y);
        if (n0 == 0)
            n0 = rumor_loader_next(l, &x, &y);
        int n1 = rumor_source_next(s, i, &bt);
        same &= n0 == n1 && n0 == 32;
        if (n0 > 0 && n1 == n0) {
            same &= bt.kind == RUMOR_BATCH_IMAGES && bt.width == 784 && !bt.tok;
            same &= !memcmp(bt.x, x, (size_t)n0 * 784 * sizeof(float));
            same &= !memcmp(bt.y, y, (size_t)n0 * sizeof(int32_t));
            batches++;
        }
        if (i == per_epoch + 1 && keep_x) { /* for the random access below */
            memcpy(keep_x, bt.x, 32 * 784 * sizeof(float));
            memcpy(keep_y, bt.y, sizeof keep_y);
        }
        if (i == per_epoch - 1)
            CHECK(rumor_source_epoch(s) == 0);
    }
    CHECKF(same && batches == per_epoch + 3, "the source's batches differ from the old path's");
    CHECK(rumor_source_epoch(s) == rumor_loader_epoch(l) && rumor_source_epoch(s) == 1);
    /* any step, in any order: a fresh source's step 626 is the one drawn in
     * order above, after a jump back to step 5 and forward again */
    rumor_source_t *s2 = NULL;
    CHECK_OK(rumor_source_open(&c, &s2));
    if (s2 && keep_x) {
        rumor_batch_t bt;
        CHECK(rumor_source_next(s2, 5, &bt) == 32);
        CHECK(rumor_source_next(s2, per_epoch + 1, &bt) == 32 && rumor_source_epoch(s2) == 1);
        CHECK(!memcmp(bt.x, keep_x, 32 * 784 * sizeof(float)) &&
              !memcmp(bt.y, keep_y, sizeof keep_y));
    }
    rumor_source_destroy(&s2);
    free(keep_x);
    /* lockstep: every rank of an uneven split (60000 = 7 shards of 8571 or
     * 8572) takes the smallest shard's full batches per epoch */
    c.world = 7;
    for (int r = 0; r < 7; r += 6) {
        c.rank = r;
        CHECK_OK(rumor_source_open(&c, &s2));
        CHECK(s2 && rumor_source_min_train_size(s2) == 8571 &&
              rumor_source_steps_per_epoch(s2) == 8571 / 32);
        rumor_source_destroy(&s2);
    }
    c.lockstep = 0; /* without: every example, the last batch partial */
    CHECK_OK(rumor_source_open(&c, &s2));
    CHECK(s2 && rumor_source_steps_per_epoch(s2) == (rumor_source_train_size(s2) + 31) / 32);
    rumor_source_destroy(&s2);
    c.rank = 1;
    c.world = 3;
    c.lockstep = 1;
    /* validation: the test split in order, standardized */
    rumor_batch_t bt;
    CHECK(rumor_source_val_batches(s, 1000) == 10 && rumor_source_val_batches(s, 3000) == 4);
    CHECK(rumor_source_val(s, 3, 3000, &bt) == 1000);
    int val_same = 1;
    for (int i = 0; i < 1000 * 784; i++)
        val_same &= bt.x[i] == rumor_dataset_at(test, 9000 * 784 + (size_t)i);
    CHECK(val_same && !memcmp(bt.y, test->y + 9000, 1000 * sizeof(int32_t)));
    CHECK(rumor_source_val(s, 4, 3000, &bt) == 0);
    rumor_source_destroy(&s);

    /* the default directory and a bare directory mean the same */
    if (!strcmp(fm, RUMOR_FASHION_MNIST_DIR)) {
        c.spec = "fashion-mnist";
        c.limit = 1000;
        c.normalize = 0;
        CHECK_OK(rumor_source_open(&c, &s));
        if (s) {
            /* --train-limit cuts the shard; without normalize pixels stay in [0, 1] */
            CHECK(rumor_source_train_size(s) == 1000 && rumor_source_min_train_size(s) == 1000);
            CHECK(!memcmp(rumor_source_train_dataset(s)->y, train->y, 1000 * sizeof(int32_t)));
            const rumor_dataset_t *raw = rumor_source_train_dataset(s);
            int close = 1;
            for (int i = 0; i < 1000 * 784; i++)
                close &= fabsf(rumor_dataset_at(raw, (size_t)i) -
                               (rumor_dataset_at(train, (size_t)i) * 0.3530f + 0.2860f)) < 1e-6f;
            CHECK(close);
        }
        rumor_source_destroy(&s);
    }
    rumor_loader_destroy(&l);
    rumor_dataset_destroy(&train);
    rumor_dataset_destroy(&test);
}

/* ------------------------------------------------------------- the corpus */

/* $RUMOR_CORPUS, else the corpus ./bootstrap writes under build/. */
static const char *find_corpus(void)
{
    static char p[4200];
    const char *env[] = { "RUMOR_CORPUS", "RUMOR_BUILDDIR", "RUMOR_SRCDIR" };
    const char *tail[] = { "", "/corpus/kjv.txt", "/build/corpus/kjv.txt" };
    struct stat sb;
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(env[i]);
        if (!v || !*v)
            continue;
        snprintf(p, sizeof p, "%s%s", v, tail[i]);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
            return p;
    }
    return NULL;
}

static void check_corpus(int *ran)
{
    const char *kjv = find_corpus();
    if (!kjv) {
        fprintf(stderr, "test_text: SKIP the corpus: no build/corpus/kjv.txt (./bootstrap build "
                        "writes it) and no $RUMOR_CORPUS\n");
        return;
    }
    *ran = 1;
    struct stat sb;
    stat(kjv, &sb);
    char spec[4300];
    snprintf(spec, sizeof spec, "text:%s", kjv);
    rumor_source_config_t c;
    rumor_source_config_default(&c);
    c.spec = spec;
    c.world = 8;
    c.rank = 5;
    rumor_source_t *s = NULL;
    CHECK_OK(rumor_source_open(&c, &s));
    if (!s)
        return;
    const rumor_tokens_t *tr = rumor_source_train_tokens(s), *va = rumor_source_val_tokens(s);
    size_t n = (size_t)sb.st_size, v = (size_t)((double)n * 0.1);
    CHECK(rumor_source_vocab(s) == 256 && tr->n + va->n == n && va->n == v);
    double h = 0;
    CHECK_OK(rumor_unigram_entropy(tr, &h));
    CHECK(h > 2.0 && h < 3.5); /* English bytes: about 3 nats */
    rumor_batch_t bt;
    CHECK(rumor_source_next(s, 0, &bt) == 8 && bt.width == 64);
    fprintf(stderr, "test_text: %s (%s): %zu bytes, unigram entropy %.4f nats (%.4f bits)\n",
            rumor_source_describe(s), kjv, n, h, h / log(2.0));
    rumor_source_destroy(&s);
}

/* Shards as one corpus: tokens:DIR (rumor-train tokenize's names) and
 * tokens:GLOB map three shards of 1000 tokens without copying them; every
 * token, the validation tail cut across a shard, the windows that straddle
 * two shards and the slices must be those of the concatenation, held here
 * in one array. */
static void check_many_shards(void)
{
    char d[8200], spec[8300];
    snprintf(d, sizeof d, "%s/many", dir);
    CHECK(mkdir(d, 0755) == 0 || errno == EEXIST);
    static uint16_t all[3000];
    for (int i = 0; i < 3000; i++)
        all[i] = (uint16_t)((i * 7919u + 13) % 50257);
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "many/train_%06d.bin", k);
        put_shard(name, 20240520, 1, 1000, all + 1000 * k, 1000, 0, 0);
    }
    /* no val_*.bin: the last 40% (1200 tokens: shard 1's last 200 and
     * shard 2) */
    for (int g = 0; g < 2; g++) {
        if (g)
            snprintf(spec, sizeof spec, "%s/train_*.bin", d);
        else
            snprintf(spec, sizeof spec, "%s", d);
        rumor_tokens_t *tr = NULL, *va = NULL;
        CHECK_OK(rumor_tokens_load(spec, 50257, 0.4, 9, &tr, &va));
        if (!tr || !va)
            continue;
        CHECK(tr->n == 1800 && va->n == 1200 && tr->tok == NULL && tr->nparts == 2 &&
              va->nparts == 2);
        int same = 1;
        for (size_t i = 0; i < 1800; i++)
            same &= rumor_tokens_at(tr, i) == all[i];
        for (size_t i = 0; i < 1200; i++)
            same &= rumor_tokens_at(va, i) == all[1800 + i];
        CHECKF(same, "%s: the tokens are not the shards' in order", spec);
        /* every validation window of T 8 (149 of them): the one at token
         * 200 crosses from shard 1 into shard 2 */
        int32_t x[8], y[8];
        long w = rumor_tokens_val_windows(va, 8);
        CHECK(w == 149);
        same = 1;
        for (long i = 0; i < w; i++) {
            CHECK_OK(rumor_tokens_val_window(va, 8, i, x, y));
            for (int k = 0; k < 8; k++)
                same &= x[k] == all[1800 + i * 8 + k] && y[k] == all[1800 + i * 8 + k + 1];
        }
        CHECKF(same, "%s: validation windows across shards", spec);
        /* training windows: rank 1 of 2's slice [900, 1800) straddles
         * shards 0 and 1's boundary at 1000 */
        size_t starts[64];
        int32_t bx[64 * 16], by[64 * 16];
        CHECK_OK(rumor_tokens_starts(tr, 5, 1, 2, 3, 64, 16, starts));
        CHECK_OK(rumor_tokens_sample(tr, 5, 1, 2, 3, 64, 16, bx, by));
        same = 1;
        int across = 0;
        for (int q = 0; q < 64; q++) {
            across += starts[q] < 1000 && starts[q] + 17 > 1000;
            for (int k = 0; k < 16; k++)
                same &= bx[q * 16 + k] == all[starts[q] + k] && by[q * 16 + k] == all[starts[q] + k + 1];
        }
        CHECKF(same, "%s: training windows", spec);
        CHECKF(across > 0, "%s: no window crossed the shard boundary (the test needs one)", spec);
        rumor_tokens_destroy(&tr);
        rumor_tokens_destroy(&va);
    }
    snprintf(spec, sizeof spec, "%s/nothing_*.bin", d);
    rumor_tokens_t *tr = NULL, *va = NULL;
    CHECK_ERR(rumor_tokens_load(spec, 50257, 0.4, 9, &tr, &va), RUMOR_EIO, "no shard matches");
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    check_text_split();
    check_text_errors();
    check_tokens_roundtrip();
    check_tokens_errors();
    check_many_shards();
    check_sampler();
    check_entropy();
    check_token_source();
    int fashion = 0, corpus = 0;
    check_fashion_source(&fashion);
    check_corpus(&corpus);
    fprintf(stderr, "test_text: files made here: ran; fashion-mnist source: %s; corpus: %s\n",
            fashion ? "ran" : "skipped", corpus ? "ran" : "skipped");
    return tu_finish("test_text");
}

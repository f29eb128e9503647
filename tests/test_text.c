/* Text and token data (src/text.h, src/source.h), with real files written
 * here:
 *  - byte-level text splits each file into exact train/validation parts;
 *  - llm.c token shards round-trip, and every malformed file (empty, wrong
 *    magic or version, truncated, trailing bytes, a token outside the
 *    vocabulary, a window longer than the data, missing) is refused with a
 *    message naming the file;
 *  - the window sampler depends only on (seed, rank, step), keeps each rank
 *    inside its contiguous slice and its targets are the inputs shifted by
 *    one; validation windows step by T;
 *  - the unigram entropy equals its closed form. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"
#include "testutil.h"

static char dir[4096];

static const char *path(const char *name)
{
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
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

/* An llm.c shard: header (magic, version, count) then tokens; extra bytes
 * appended when trailing > 0, `drop` bytes cut from the end. */
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

static void check_text(void)
{
    char a[1000], b[500];
    for (int i = 0; i < 1000; i++)
        a[i] = (char)('a' + i % 26);
    for (int i = 0; i < 500; i++)
        b[i] = (char)('A' + i % 7);
    put("a.txt", a, sizeof a);
    put("b.txt", b, sizeof b);
    char spec[9000];
    snprintf(spec, sizeof spec, "%s,%s", path("a.txt"), path("b.txt"));
    rumor_tokens_t *tr = NULL, *va = NULL;
    CHECK_OK(rumor_text_load(spec, 0.1, 17, &tr, &va));
    if (!tr || !va)
        return;
    /* the last 10% of each file is validation */
    CHECK(tr->n == 900 + 450 && va->n == 100 + 50 && tr->vocab == 256);
    CHECK(tr->tok[0] == 'a' && tr->tok[899] == (uint16_t)a[899] && tr->tok[900] == 'A');
    CHECK(va->tok[0] == (uint16_t)a[900] && va->tok[100] == (uint16_t)b[450]);
    /* sampler: same key, same windows; targets shifted by one; inside the slice */
    enum { B = 6, T = 16 };
    int32_t t1[B * T], y1[B * T], t2[B * T], y2[B * T];
    for (int rank = 0; rank < 3; rank++) {
        size_t lo = tr->n * rank / 3, hi = tr->n * (rank + 1) / 3;
        CHECK_OK(rumor_tokens_sample(tr, 5, rank, 3, 7, B, T, t1, y1));
        CHECK_OK(rumor_tokens_sample(tr, 5, rank, 3, 7, B, T, t2, y2));
        CHECK(!memcmp(t1, t2, sizeof t1) && !memcmp(y1, y2, sizeof y1));
        for (int w = 0; w < B; w++) {
            /* find the window's start in the slice: the first token must match */
            int found = 0;
            for (size_t s = lo; s + T + 1 <= hi && !found; s++) {
                int ok = 1;
                for (int k = 0; k < T && ok; k++)
                    ok = tr->tok[s + k] == t1[w * T + k] && tr->tok[s + k + 1] == y1[w * T + k];
                found = ok;
            }
            CHECKF(found, "rank %d window %d is not a window of its slice", rank, w);
        }
        CHECK_OK(rumor_tokens_sample(tr, 5, rank, 3, 8, B, T, t2, y2));
        CHECK(memcmp(t1, t2, sizeof t1) != 0); /* another step, other windows */
    }
    /* validation windows: stride T, non-overlapping predictions */
    long nw = rumor_tokens_val_windows(va, T);
    CHECK(nw == (long)((va->n - 1) / T));
    int32_t vt[T], vy[T];
    rumor_tokens_val_window(va, T, 1, vt, vy);
    CHECK(vt[0] == va->tok[T] && vy[T - 1] == va->tok[2 * T]);
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
    /* entropy: "aabb" repeated is ln 2 */
    put("ab.txt", "aabbaabbaabbaabbaabbaabbaabbaabbaabbaabb", 40);
    CHECK_OK(rumor_text_load(path("ab.txt"), 0.2, 2, &tr, &va));
    if (tr)
        CHECK_CLOSE(rumor_tokens_unigram_entropy(tr), log(2.0), 1e-12, 1e-12);
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
    /* bad text */
    put("empty.txt", "", 0);
    CHECK_ERR(rumor_text_load(path("empty.txt"), 0.1, 2, &tr, &va), RUMOR_EFORMAT, "empty.txt: empty");
    CHECK_ERR(rumor_text_load(path("missing.txt"), 0.1, 2, &tr, &va), RUMOR_ESYS, "missing.txt");
    CHECK_ERR(rumor_text_load(path("ab.txt"), 0.1, 64, &tr, &va), RUMOR_EFORMAT, "ab.txt");
    CHECK(tr == NULL && va == NULL);
}

static void check_tokens(void)
{
    uint16_t tok[300];
    for (int i = 0; i < 300; i++)
        tok[i] = (uint16_t)((i * 7919) % 50257);
    put_shard("good.bin", 20240520, 1, 300, tok, 300, 0, 0);
    rumor_tokens_t *tr = NULL, *va = NULL;
    CHECK_OK(rumor_tokens_load(path("good.bin"), 50257, 0.1, 9, &tr, &va));
    if (tr && va) {
        CHECK(tr->n == 270 && va->n == 30 && tr->vocab == 50257);
        CHECK(tr->tok[5] == tok[5] && va->tok[0] == tok[270]);
    }
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
    /* a separate validation shard */
    put_shard("val.bin", 20240520, 1, 40, tok, 40, 0, 0);
    char spec[9000];
    snprintf(spec, sizeof spec, "%s,%s", path("good.bin"), path("val.bin"));
    CHECK_OK(rumor_tokens_load(spec, 50257, 0.1, 9, &tr, &va));
    CHECK(tr && va && tr->n == 300 && va->n == 40);
    rumor_tokens_destroy(&tr);
    rumor_tokens_destroy(&va);
    /* malformed shards, each named in the error */
    put_shard("magic.bin", 20240521, 1, 300, tok, 300, 0, 0);
    CHECK_ERR(rumor_tokens_load(path("magic.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
              "magic.bin: magic 20240521");
    put_shard("version.bin", 20240520, 2, 300, tok, 300, 0, 0);
    CHECK_ERR(rumor_tokens_load(path("version.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
              "version.bin: version 2");
    put_shard("short.bin", 20240520, 1, 300, tok, 300, 0, 7);
    CHECK_ERR(rumor_tokens_load(path("short.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EIO,
              "short.bin");
    put_shard("long.bin", 20240520, 1, 300, tok, 300, 4, 0);
    CHECK_ERR(rumor_tokens_load(path("long.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
              "trailing bytes");
    put_shard("header.bin", 20240520, 1, 300, tok, 0, 0, 1024);
    CHECK_ERR(rumor_tokens_load(path("header.bin"), 50257, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
              "header.bin");
    CHECK_ERR(rumor_tokens_load(path("good.bin"), 1000, 0.1, 9, &tr, &va), RUMOR_EFORMAT,
              "outside the vocabulary of 1000");
    CHECK_ERR(rumor_tokens_load(path("good.bin"), 50257, 0.1, 100, &tr, &va), RUMOR_EFORMAT,
              "window of 100");
    CHECK(tr == NULL && va == NULL);
}

static void check_source(void)
{
    rumor_source_config_t c;
    rumor_source_config_default(&c);
    rumor_source_t *s = NULL;
    c.spec = "parquet:x";
    CHECK_ERR(rumor_source_open(&c, &s), RUMOR_EINVAL, "unknown kind");
    char spec[9000];
    snprintf(spec, sizeof spec, "text:%s", path("a.txt"));
    c.spec = spec;
    c.seq = 16;
    c.batch = 4;
    c.world = 2;
    c.rank = 1;
    CHECK_OK(rumor_source_open(&c, &s));
    if (!s)
        return;
    rumor_batch_t b;
    CHECK(rumor_source_next(s, 3, &b) == 4 && b.kind == RUMOR_BATCH_TOKENS && b.width == 16);
    CHECK(rumor_source_val_batches(s, 4) == (int)((rumor_tokens_val_windows(
                                                   rumor_source_val_tokens(s), 16) + 3) / 4));
    CHECK(rumor_source_val(s, 0, 4, &b) > 0 && rumor_source_val(s, 1000, 4, &b) == 0);
    CHECK(strstr(rumor_source_describe(s), "vocabulary 256") != NULL);
    rumor_source_destroy(&s);
    rumor_source_destroy(&s);
    c.world = 200; /* slices smaller than a window */
    c.rank = 3;
    CHECK_ERR(rumor_source_open(&c, &s), RUMOR_EINVAL, "shard 3 of 200");
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    check_text();
    check_tokens();
    check_source();
    return tu_finish("test_text");
}


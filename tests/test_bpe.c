/* Byte-level BPE (src/bpe.h) on a tokenizer written here: 256 byte tokens
 * in GPT-2's byte map (built here from its definition), eight merges and a
 * special token, with the ids worked out by hand from the rules (GPT-2's
 * pieces; within a piece the lowest-ranked pair first). Then: decoding gives
 * back any bytes, invalid UTF-8 included; the special token's text encodes
 * as ordinary text; and every kind of bad file is refused by name (and
 * line). With GPT-2's own files (./bootstrap fetches them), a sentence
 * against the ids tiktoken's gpt2 encoding gives it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "testutil.h"

static char dir[700];

/* GPT-2's map: the printable Latin-1 bytes as themselves, the rest as
 * U+0100 + n in byte order; written as UTF-8 */
static void put_byte(FILE *f, int b)
{
    static int cp[256], done;
    if (!done) {
        int n = 0;
        for (int i = 0; i < 256; i++)
            cp[i] = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174 ? i : 256 + n++;
        done = 1;
    }
    int c = cp[b];
    if (c == '"' || c == '\\')
        fprintf(f, "\\%c", c);
    else if (c < 0x80)
        fputc(c, f);
    else
        fprintf(f, "%c%c", 0xC0 | (c >> 6), 0x80 | (c & 0x3F));
}

static void put_str(FILE *f, const char *s)
{
    for (; *s; s++)
        put_byte(f, (unsigned char)*s);
}

/* ids: byte b is b; the merges' results 256.. in order; <|endoftext|> last */
static const char *merges[][2] = { { "h", "e" },    { "l", "l" },  { "he", "ll" }, { "hell", "o" },
                                   { " ", "w" },    { "o", "r" },  { " w", "or" }, { "l", "d" } };
#define NM 8

static void write_files(const char *enc, const char *voc, int drop_byte, const char *extra_line)
{
    char p[800];
    snprintf(p, sizeof p, "%s/%s", dir, enc);
    FILE *f = fopen(p, "w");
    fputc('{', f);
    int first = 1, id = 0;
    for (int b = 0; b < 256; b++) {
        if (b == drop_byte)
            continue;
        fprintf(f, "%s\"", first ? "" : ", ");
        put_byte(f, b);
        fprintf(f, "\": %d", id++);
        first = 0;
    }
    for (int m = 0; m < NM; m++) {
        char t[32];
        snprintf(t, sizeof t, "%s%s", merges[m][0], merges[m][1]);
        fprintf(f, ", \"");
        put_str(f, t);
        fprintf(f, "\": %d", id++);
    }
    fprintf(f, ", \"<|endoftext|>\": %d}", id);
    fclose(f);
    snprintf(p, sizeof p, "%s/%s", dir, voc);
    f = fopen(p, "w");
    fprintf(f, "#version: 0.2\n");
    for (int m = 0; m < NM; m++) {
        put_str(f, merges[m][0]);
        fputc(' ', f);
        put_str(f, merges[m][1]);
        fputc('\n', f);
    }
    if (extra_line)
        fprintf(f, "%s\n", extra_line);
    fclose(f);
}

static rumor_bpe_t *load(const char *enc, const char *voc)
{
    char e[800], v[800];
    snprintf(e, sizeof e, "%s/%s", dir, enc);
    snprintf(v, sizeof v, "%s/%s", dir, voc);
    rumor_bpe_t *b = NULL;
    if (rumor_bpe_load(e, v, &b) < 0)
        return NULL;
    return b;
}

static size_t encode(rumor_bpe_t *b, const char *t, size_t n, uint16_t **ids)
{
    rumor_bpe_ctx_t *c;
    size_t len = 0, cap = 0;
    *ids = NULL;
    CHECK_OK(rumor_bpe_ctx_create(b, &c));
    CHECK_OK(rumor_bpe_encode(c, t, n, ids, &len, &cap));
    rumor_bpe_ctx_free(&c);
    return len;
}

static void expect_ids(rumor_bpe_t *b, const char *text, const int *want, size_t nw)
{
    uint16_t *ids;
    size_t n = encode(b, text, strlen(text), &ids);
    int same = n == nw;
    for (size_t i = 0; same && i < n; i++)
        same = ids[i] == want[i];
    CHECKF(same, "\"%s\": %zu ids, want %zu (first %d, want %d)", text, n, nw, n ? ids[0] : -1,
           nw ? want[0] : -1);
    free(ids);
}

static void test_hand(void)
{
    write_files("enc.json", "vocab.bpe", -1, NULL);
    rumor_bpe_t *b = load("enc.json", "vocab.bpe");
    CHECKF(b != NULL, "load: %s", rumor_err_msg());
    if (!b)
        return;
    CHECK(rumor_bpe_vocab(b) == 256 + NM + 1 && rumor_bpe_merges(b) == NM);
    CHECK(rumor_bpe_special(b, "<|endoftext|>") == 256 + NM);
    CHECK(rumor_bpe_special(b, "hello") == -1);
    /* "hello" is a token; " world": " w" (rank 4), then "or" (5), then
     * " w"+"or" (6), then "ld" (7): " wor", "ld" */
    expect_ids(b, "hello world", (int[]){ 259, 262, 263 }, 3);
    /* pieces: "he", "'s" (a contraction), " hello", "!!" */
    expect_ids(b, "he's hello!!", (int[]){ 256, '\'', 's', ' ', 259, '!', '!' }, 7);
    /* white space: "  " before a word leaves its last space to the word;
     * trailing white space is one piece; "\n" before a word stands alone */
    expect_ids(b, "a   world  ", (int[]){ 'a', ' ', ' ', 262, 263, ' ', ' ' }, 7);
    expect_ids(b, "x\nworld", (int[]){ 'x', '\n', 'w', 261, 263 }, 5);
    /* numbers and letters are separate pieces: "ll" then "12" */
    expect_ids(b, "ll12", (int[]){ 257, '1', '2' }, 3);
    /* the special token's text is ordinary text */
    const char *eot = "<|endoftext|>";
    uint16_t *ids;
    size_t n = encode(b, eot, strlen(eot), &ids);
    int special = 0;
    for (size_t i = 0; i < n; i++)
        special |= ids[i] == 256 + NM;
    CHECKF(n > 1 && !special, "the special token's text encoded to the special id");
    free(ids);
    /* any bytes come back: random ones, invalid UTF-8 among them */
    char buf[4096], back[4096];
    uint64_t s = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        buf[i] = (char)(s >> 56);
    }
    memcpy(buf + 100, "hello world he's \xe2\x80\xa8 \xf0\x9f\x98\x80", 26);
    n = encode(b, buf, sizeof buf, &ids);
    long w = rumor_bpe_decode(b, ids, n, back, sizeof back);
    CHECKF(w == (long)sizeof buf && memcmp(buf, back, sizeof buf) == 0,
           "decode(encode(4096 random bytes)) gave %ld bytes", w);
    uint16_t bad = 9999;
    CHECK_ERR(rumor_bpe_decode(b, &bad, 1, back, sizeof back), -1, "outside the vocabulary");
    free(ids);
    rumor_bpe_free(&b);
}

static void expect_refused(const char *enc, const char *voc, const char *what)
{
    rumor_bpe_t *b = load(enc, voc);
    CHECKF(b == NULL && strstr(rumor_err_msg(), what), "%s + %s: want an error with \"%s\", got "
           "\"%s\"", enc, voc, what, b ? "(loaded)" : rumor_err_msg());
    rumor_bpe_free(&b);
}

static void test_bad_files(void)
{
    char p[800];
    expect_refused("nothere.json", "vocab.bpe", "nothere.json: No such file");
    write_files("enc.json", "vocab.bpe", -1, NULL);
    expect_refused("vocab.bpe", "vocab.bpe", "vocab.bpe: not a JSON object"); /* the wrong file */
    snprintf(p, sizeof p, "%s/trunc.json", dir);
    FILE *f = fopen(p, "w");
    fputs("{\"a\": 0, \"b\": ", f);
    fclose(f);
    expect_refused("trunc.json", "vocab.bpe", "trunc.json: not a JSON object");
    write_files("nobyte.json", "v2.bpe", 'q', NULL);
    expect_refused("nobyte.json", "v2.bpe", "nobyte.json: byte 0x71 has no token");
    write_files("enc.json", "v3.bpe", -1, "x");
    expect_refused("enc.json", "v3.bpe", "v3.bpe:10: expected two tokens");
    write_files("enc.json", "v4.bpe", -1, "w orld");
    expect_refused("enc.json", "v4.bpe", "v4.bpe:10: \"orld\" is not a token");
    write_files("enc.json", "v5.bpe", -1, "hello hello");
    expect_refused("enc.json", "v5.bpe", "v5.bpe:10: the merge \"hello\" + \"hello\" makes no "
                                         "token");
    snprintf(p, sizeof p, "%s/dup.json", dir);
    f = fopen(p, "w");
    fputs("{\"a\": 0, \"b\": 0}", f);
    fclose(f);
    expect_refused("dup.json", "vocab.bpe", "dup.json: 2 tokens");
}

/* GPT-2's files, if ./bootstrap fetched them: a sentence against the ids
 * tiktoken's gpt2 encoding gives it (encode_ordinary, tiktoken 1.0.22) */
static void test_gpt2(void)
{
    char d[700];
    snprintf(d, sizeof d, "%s/tokenizers/gpt2", getenv("RUMOR_BUILDDIR") ? getenv("RUMOR_BUILDDIR")
                                                                         : ".");
    rumor_bpe_t *b = NULL;
    if (rumor_bpe_load_dir(d, &b) < 0) {
        printf("no GPT-2 tokenizer at %s (./bootstrap fetches it): %s\n", d, rumor_err_msg());
        return;
    }
    CHECK(rumor_bpe_vocab(b) == 50257 && rumor_bpe_merges(b) == 50000);
    CHECK(rumor_bpe_special(b, "<|endoftext|>") == 50256);
    const char *s = "Hello world!  It's 2026's test: na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 123 4567 "
                    "\n\n  end";
    expect_ids(b, s, (int[]){ 15496, 995, 0, 220, 632, 338, 1160, 2075, 338, 1332, 25, 41492,
                              40304, 851, 17031, 4153, 3134, 220, 628, 220, 886 }, 21);
    rumor_bpe_free(&b);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", tu_tmpdir());
    test_hand();
    test_bad_files();
    test_gpt2();
    return tu_finish("test_bpe");
}

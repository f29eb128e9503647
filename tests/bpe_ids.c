/* bpe_ids DIR FILE: FILE's bytes encoded with the BPE of DIR (encoder.json,
 * vocab.bpe), one id a line; a second program for test_bpe_tiktoken.sh to
 * set beside tiktoken's. Exit 1 with the error on a bad file. */
#include <stdio.h>
#include <stdlib.h>

#include "bpe.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bpe_ids DIR FILE\n");
        return 2;
    }
    rumor_bpe_t *b;
    rumor_bpe_ctx_t *c;
    if (rumor_bpe_load_dir(argv[1], &b) < 0 || rumor_bpe_ctx_create(b, &c) < 0) {
        fprintf(stderr, "bpe_ids: %s\n", rumor_err_msg());
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    size_t cap = 1 << 20, n = 0;
    char *t = malloc(cap);
    for (size_t r; t && (r = fread(t + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap)
            t = realloc(t, cap *= 2);
    }
    fclose(f);
    uint16_t *ids = NULL;
    size_t len = 0, icap = 0;
    if (!t || rumor_bpe_encode(c, t, n, &ids, &len, &icap) < 0) {
        fprintf(stderr, "bpe_ids: %s\n", t ? rumor_err_msg() : "out of memory");
        return 1;
    }
    for (size_t i = 0; i < len; i++)
        printf("%u\n", ids[i]);
    free(ids);
    free(t);
    rumor_bpe_ctx_free(&c);
    rumor_bpe_free(&b);
    return 0;
}

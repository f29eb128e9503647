/* Data sources for language models (see source.h). */
#include "source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rumor_source {
    rumor_source_config_t cfg;
    rumor_tokens_t *train, *val;
    int32_t *tok, *y; /* (batch, seq) */
    char desc[512];
};

void rumor_source_config_default(rumor_source_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->world = 1;
    c->batch = 8;
    c->seq = 64;
    c->val_fraction = 0.1;
}

void rumor_source_destroy(rumor_source_t **sp)
{
    if (!sp || !*sp)
        return;
    rumor_tokens_destroy(&(*sp)->train);
    rumor_tokens_destroy(&(*sp)->val);
    free((*sp)->tok);
    free((*sp)->y);
    free(*sp);
    *sp = NULL;
}

static void human(double n, char *buf, size_t cap)
{
    if (n >= 1e6)
        snprintf(buf, cap, "%.1fM", n / 1e6);
    else if (n >= 1e4)
        snprintf(buf, cap, "%.0fk", n / 1e3);
    else
        snprintf(buf, cap, "%.0f", n);
}

int rumor_source_open(const rumor_source_config_t *c, rumor_source_t **out)
{
    *out = NULL;
    if (!c->spec)
        return rumor_err_set(RUMOR_EINVAL, "--data: missing");
    if (c->batch < 1 || c->seq < 1 || c->world < 1 || c->rank < 0 || c->rank >= c->world)
        return rumor_err_set(RUMOR_EINVAL, "data: batch %d, window %d or rank %d of %d out of range",
                             c->batch, c->seq, c->rank, c->world);
    rumor_source_t *s = calloc(1, sizeof *s);
    if (!s)
        return rumor_err_set(RUMOR_ENOMEM, "data: out of memory");
    s->cfg = *c;
    size_t window = (size_t)c->seq + 1;
    int rc;
    const char *kind;
    if (!strncmp(c->spec, "text:", 5)) {
        kind = "text";
        rc = rumor_text_load(c->spec + 5, c->val_fraction, window, &s->train, &s->val);
        if (rc == 0 && c->vocab && c->vocab < 256)
            rc = rumor_err_set(RUMOR_EINVAL, "--data %s: bytes need a vocabulary of 256, the "
                               "model has %d", c->spec, c->vocab);
    } else if (!strncmp(c->spec, "tokens:", 7)) {
        kind = "tokens";
        rc = rumor_tokens_load(c->spec + 7, c->vocab ? c->vocab : RUMOR_GPT2_VOCAB,
                               c->val_fraction, window, &s->train, &s->val);
    } else {
        rc = rumor_err_set(RUMOR_EINVAL,
                           "--data '%s': unknown kind; expected fashion-mnist[:DIR], DIR, "
                           "text:FILE[,FILE...] or tokens:TRAIN.bin[,VAL.bin]",
                           c->spec);
        kind = "";
    }
    if (rc == 0) {
        size_t lo = s->train->n * (size_t)c->rank / (size_t)c->world;
        size_t hi = s->train->n * (size_t)(c->rank + 1) / (size_t)c->world;
        if (hi - lo < window)
            rc = rumor_err_set(RUMOR_EINVAL,
                               "--data %s: shard %d of %d holds %zu training tokens, fewer than "
                               "a window of %zu",
                               c->spec, c->rank, c->world, hi - lo, window);
    }
    if (rc == 0) {
        s->tok = malloc((size_t)c->batch * c->seq * sizeof *s->tok);
        s->y = malloc((size_t)c->batch * c->seq * sizeof *s->y);
        if (!s->tok || !s->y)
            rc = rumor_err_set(RUMOR_ENOMEM, "data: out of memory");
    }
    if (rc < 0) {
        rumor_source_destroy(&s);
        return rc;
    }
    char a[32], b[32];
    human((double)s->train->n, a, sizeof a);
    human((double)s->val->n, b, sizeof b);
    snprintf(s->desc, sizeof s->desc, "%s: %s training tokens, %s validation tokens, vocabulary %d",
             kind, a, b, s->train->vocab);
    *out = s;
    return 0;
}

long rumor_source_train_size(const rumor_source_t *s)
{
    return (long)(s->train->n / (size_t)s->cfg.world);
}

int rumor_source_vocab(const rumor_source_t *s) { return s->train->vocab; }
const char *rumor_source_describe(const rumor_source_t *s) { return s->desc; }
const rumor_tokens_t *rumor_source_train_tokens(const rumor_source_t *s) { return s->train; }
const rumor_tokens_t *rumor_source_val_tokens(const rumor_source_t *s) { return s->val; }

int rumor_source_next(rumor_source_t *s, long step, rumor_batch_t *b)
{
    const rumor_source_config_t *c = &s->cfg;
    RUMOR_CHECK(rumor_tokens_sample(s->train, c->seed, c->rank, c->world, step, c->batch, c->seq,
                                    s->tok, s->y));
    memset(b, 0, sizeof *b);
    b->kind = RUMOR_BATCH_TOKENS;
    b->n = c->batch;
    b->width = c->seq;
    b->tok = s->tok;
    b->y = s->y;
    return b->n;
}

int rumor_source_val_batches(const rumor_source_t *s, int batch)
{
    long w = rumor_tokens_val_windows(s->val, s->cfg.seq);
    return batch < 1 ? 0 : (int)((w + batch - 1) / batch);
}

int rumor_source_val(rumor_source_t *s, int i, int batch, rumor_batch_t *b)
{
    int T = s->cfg.seq;
    long w = rumor_tokens_val_windows(s->val, T), first = (long)i * batch;
    if (batch < 1 || batch > s->cfg.batch)
        return rumor_err_set(RUMOR_EINVAL, "data: validation batch %d outside [1, %d]", batch,
                             s->cfg.batch);
    if (i < 0 || first >= w)
        return 0;
    int n = (int)(w - first < batch ? w - first : batch);
    for (int k = 0; k < n; k++)
        rumor_tokens_val_window(s->val, T, first + k, s->tok + (size_t)k * T, s->y + (size_t)k * T);
    memset(b, 0, sizeof *b);
    b->kind = RUMOR_BATCH_TOKENS;
    b->n = n;
    b->width = T;
    b->tok = s->tok;
    b->y = s->y;
    return n;
}

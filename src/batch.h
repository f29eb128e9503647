/* Typed batches: what a data source hands the trainer, in host memory.
 *
 * Images come with one label each (Fashion-MNIST); token windows come with
 * their next tokens as targets (language models). The same trainer runs both:
 * the model's first block reads x or tok, its head block reads y. */
#ifndef RUMOR_BATCH_H
#define RUMOR_BATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RUMOR_BATCH_IMAGES = 0, RUMOR_BATCH_TOKENS = 1 } rumor_batch_kind;

typedef struct rumor_batch {
    rumor_batch_kind kind;
    int n;              /* examples (images) or windows (tokens) */
    int width;          /* images: features per example; tokens: T, the window */
    const float *x;     /* images (n, width); NULL for tokens */
    const int32_t *tok; /* tokens (n, width): the inputs; NULL for images */
    const int32_t *y;   /* images: labels (n); tokens: targets (n, width), the
                         * token that follows each input token */
} rumor_batch_t;

/* Targets per batch: n for images, n * width for tokens. */
static inline long rumor_batch_targets(const rumor_batch_t *b)
{
    return b->kind == RUMOR_BATCH_TOKENS ? (long)b->n * b->width : (long)b->n;
}

#ifdef __cplusplus
}
#endif
#endif

/* Arenas: one device allocation carved into aligned pieces.
 *
 * A stage keeps one arena per micro-batch in flight, sized once for the
 * largest micro-batch, so a training step allocates nothing. */
#ifndef RUMOR_ARENA_H
#define RUMOR_ARENA_H

#include <stddef.h>

#include "block.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_arena {
    rumor_device_t *dev; /* not owned */
    char *base;          /* device memory */
    size_t size, used;
} rumor_arena_t;

/* Allocates `bytes` of zeroed device memory on dev. */
int rumor_arena_init(rumor_arena_t *a, rumor_device_t *dev, size_t bytes) RUMOR_WUR;
/* The next `bytes` (64-byte aligned), or NULL with the error set when the
 * arena is full (a sizing bug: arenas are sized from the blocks' own
 * accounting). */
void *rumor_arena_take(rumor_arena_t *a, size_t bytes);
void rumor_arena_reset(rumor_arena_t *a);
void rumor_arena_free(rumor_arena_t *a);

#ifdef __cplusplus
}
#endif
#endif

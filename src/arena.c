/* Arenas (see arena.h). */
#include "arena.h"

#include <string.h>

int rumor_arena_init(rumor_arena_t *a, rumor_device_t *dev, size_t bytes)
{
    memset(a, 0, sizeof *a);
    a->dev = dev;
    a->size = rumor_align64(bytes);
    a->base = dev->ops->alloc(dev, a->size ? a->size : 64);
    if (!a->base)
        return rumor_err_set(RUMOR_ENOMEM, "arena: cannot allocate %zu bytes on %s", bytes,
                             dev->name);
    return 0;
}

void *rumor_arena_take(rumor_arena_t *a, size_t bytes)
{
    size_t n = rumor_align64(bytes);
    if (n > a->size - a->used) {
        rumor_err_set(RUMOR_ENOMEM, "arena: %zu bytes wanted, %zu of %zu left", bytes,
                      a->size - a->used, a->size);
        return NULL;
    }
    void *p = a->base + a->used;
    a->used += n;
    return p;
}

void rumor_arena_reset(rumor_arena_t *a) { a->used = 0; }

void rumor_arena_free(rumor_arena_t *a)
{
    if (a->base)
        a->dev->ops->free(a->dev, a->base);
    memset(a, 0, sizeof *a);
}

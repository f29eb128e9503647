/* What the IDX reader (idx.c) gives the datasets (data.c): not installed. */
#ifndef RUMOR_IDX_INT_H
#define RUMOR_IDX_INT_H

#include <stddef.h>

#include "data.h"
#include "err.h"

/* Reads the images of gz (an image file's magic expected) through the
 * decompressed cache: its copy mapped when whole, else gz read and the copy
 * written, then mapped (idx->map set when mapped). Errors as rumor_idx_read. */
RUMOR_INTERNAL int rumor_idx_read_images_cached(const char *gz, rumor_idx_t *out);

/* Reads a label file (a label file's magic expected), as rumor_idx_read. */
RUMOR_INTERNAL int rumor_idx_read_labels(const char *path, rumor_idx_t *out);

/* Asks for 2 MiB pages over a large fresh buffer (a hint only). */
RUMOR_INTERNAL void rumor_hint_huge(void *p, size_t n);

#endif

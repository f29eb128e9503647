/* Output directories a run writes into (checkpoints, a saved average, an
 * export): checked when the run starts, so that a directory that cannot be
 * written is a usage error at once, not a warning hours in. */
#ifndef RUMOR_DIRS_H
#define RUMOR_DIRS_H

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes dir (and its missing parents, mode 0755) unless it exists, and
 * checks that it is a directory this process can create files in (by
 * creating and removing one: as root, permission bits say nothing). 0, or
 * RUMOR_EINVAL with a message naming dir and why ("is a file", "Permission
 * denied", "Read-only file system"). */
int rumor_dir_prepare(const char *dir) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

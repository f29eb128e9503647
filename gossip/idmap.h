/* Peer ids to the mixer's slots: a map kept sorted by id.
 *
 * A slot is where the mixer keeps what it knows of one peer (its socket,
 * rounds, ranges). With a peer list the slots are the list's ranks; with
 * open membership (mixer.h, max_peers) a member SWIM announces gets the
 * first free slot when it is first needed, so slot numbers are local to
 * each peer and say nothing about order. What every peer agrees on is the
 * order of ids, which this map keeps: rumor_idmap_at(map, i) is the i-th
 * smallest id, the order the topology is laid in (swim.h, "the view").
 *
 * Pure: no I/O, no threads (the mixer's comm thread owns its map). Lookups
 * are binary searches; an insert or removal moves at most cap entries.
 * Internal: not installed, and not exported (RUMOR_INTERNAL). */
#ifndef RUMOR_IDMAP_H
#define RUMOR_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_idmap {
    uint64_t *id;   /* (cap) ids, strictly increasing over [0, n) */
    int *slot;      /* (cap) the slot of id[i] */
    int n, cap;
} rumor_idmap_t;

/* Room for cap ids (cap >= 1). RUMOR_ENOMEM, RUMOR_EINVAL; *map zeroed on
 * failure. */
RUMOR_INTERNAL int rumor_idmap_init(rumor_idmap_t *map, int cap) RUMOR_WUR;
RUMOR_INTERNAL void rumor_idmap_free(rumor_idmap_t *map);

/* The slot of id, or -1 when it has none (id 0 never has one). */
RUMOR_INTERNAL int rumor_idmap_find(const rumor_idmap_t *map, uint64_t id);

/* Gives id the slot. RUMOR_EINVAL for id 0, a negative slot or an id
 * already mapped (the message names it), RUMOR_ENOMEM when the map is full;
 * the map is unchanged on failure. */
RUMOR_INTERNAL int rumor_idmap_insert(rumor_idmap_t *map, uint64_t id, int slot) RUMOR_WUR;

/* Forgets id; returns its slot, or -1 when it had none (nothing changes). */
RUMOR_INTERNAL int rumor_idmap_remove(rumor_idmap_t *map, uint64_t id);

/* The i-th smallest id (0 <= i < n), else 0. */
RUMOR_INTERNAL uint64_t rumor_idmap_at(const rumor_idmap_t *map, int i);

#ifdef __cplusplus
}
#endif
#endif

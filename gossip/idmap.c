/* Peer ids to slots, sorted by id (see idmap.h). */
#include "idmap.h"

#include <stdlib.h>
#include <string.h>

int rumor_idmap_init(rumor_idmap_t *map, int cap)
{
    memset(map, 0, sizeof *map);
    if (cap < 1)
        return rumor_err_set(RUMOR_EINVAL, "id map: capacity %d", cap);
    map->id = calloc((size_t)cap, sizeof *map->id);
    map->slot = calloc((size_t)cap, sizeof *map->slot);
    if (!map->id || !map->slot) {
        rumor_idmap_free(map);
        return rumor_err_set(RUMOR_ENOMEM, "id map: out of memory for %d ids", cap);
    }
    map->cap = cap;
    return 0;
}

void rumor_idmap_free(rumor_idmap_t *map)
{
    free(map->id);
    free(map->slot);
    memset(map, 0, sizeof *map);
}

/* The index of the first id >= want. */
static int lower_bound(const rumor_idmap_t *map, uint64_t want)
{
    int lo = 0, hi = map->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (map->id[mid] < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int rumor_idmap_find(const rumor_idmap_t *map, uint64_t id)
{
    if (id == 0 || map->n == 0)
        return -1;
    int i = lower_bound(map, id);
    return i < map->n && map->id[i] == id ? map->slot[i] : -1;
}

int rumor_idmap_insert(rumor_idmap_t *map, uint64_t id, int slot)
{
    if (id == 0 || slot < 0)
        return rumor_err_set(RUMOR_EINVAL, "id map: id %016llx, slot %d",
                             (unsigned long long)id, slot);
    int i = lower_bound(map, id);
    if (i < map->n && map->id[i] == id)
        return rumor_err_set(RUMOR_EINVAL, "id map: two peers share the id %016llx",
                             (unsigned long long)id);
    if (map->n == map->cap)
        return rumor_err_set(RUMOR_ENOMEM, "id map: full (%d ids)", map->cap);
    memmove(&map->id[i + 1], &map->id[i], (size_t)(map->n - i) * sizeof *map->id);
    memmove(&map->slot[i + 1], &map->slot[i], (size_t)(map->n - i) * sizeof *map->slot);
    map->id[i] = id;
    map->slot[i] = slot;
    map->n++;
    return 0;
}

int rumor_idmap_remove(rumor_idmap_t *map, uint64_t id)
{
    if (id == 0 || map->n == 0)
        return -1;
    int i = lower_bound(map, id);
    if (i >= map->n || map->id[i] != id)
        return -1;
    int slot = map->slot[i];
    memmove(&map->id[i], &map->id[i + 1], (size_t)(map->n - i - 1) * sizeof *map->id);
    memmove(&map->slot[i], &map->slot[i + 1], (size_t)(map->n - i - 1) * sizeof *map->slot);
    map->n--;
    return slot;
}

uint64_t rumor_idmap_at(const rumor_idmap_t *map, int i)
{
    return i >= 0 && i < map->n ? map->id[i] : 0;
}

/* Open membership's pure logic: the id map that gives members slots in the
 * order they come while keeping the ids' order (gossip/idmap.h), and the
 * topology laid over an open view (swim.h, rumor_swim_topology) by peers
 * that met the members in different orders and hold them in different
 * slots: every peer must lay the same graph, whose edges and weights agree
 * from both ends, as members join and leave. */
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "swim.h"
#include "testutil.h"

static uint64_t next_id(unsigned long long *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (z ^ (z >> 31)) | 1; /* never 0 */
}

/* ------------------------------------------------------------ the id map */

static void test_idmap(void)
{
    rumor_idmap_t m;
    CHECK_ERR(rumor_idmap_init(&m, 0), RUMOR_EINVAL, "capacity");
    CHECK_OK(rumor_idmap_init(&m, 64));
    unsigned long long s = 5;
    uint64_t ids[64];
    for (int i = 0; i < 64; i++) { /* slot i to the i-th comer, ids in no order */
        ids[i] = next_id(&s);
        CHECK_OK(rumor_idmap_insert(&m, ids[i], i));
    }
    CHECK(m.n == 64);
    for (int i = 0; i < 64; i++)
        CHECK(rumor_idmap_find(&m, ids[i]) == i);
    for (int i = 1; i < 64; i++)
        CHECK(rumor_idmap_at(&m, i - 1) < rumor_idmap_at(&m, i));
    CHECK(rumor_idmap_at(&m, 64) == 0 && rumor_idmap_at(&m, -1) == 0);
    /* refused, and the map unchanged: full, a repeat, id 0, a bad slot */
    CHECK_ERR(rumor_idmap_insert(&m, 12345, 64), RUMOR_ENOMEM, "full");
    CHECK(rumor_idmap_remove(&m, ids[10]) == 10);
    CHECK(rumor_idmap_find(&m, ids[10]) == -1 && m.n == 63);
    CHECK_ERR(rumor_idmap_insert(&m, ids[11], 10), RUMOR_EINVAL, "share the id");
    CHECK_ERR(rumor_idmap_insert(&m, 0, 10), RUMOR_EINVAL, "id map");
    CHECK_ERR(rumor_idmap_insert(&m, 777, -1), RUMOR_EINVAL, "id map");
    CHECK(rumor_idmap_find(&m, 0) == -1 && rumor_idmap_remove(&m, 0) == -1);
    CHECK(rumor_idmap_remove(&m, ids[10]) == -1 && m.n == 63);
    for (int i = 1; i < m.n; i++)
        CHECK(rumor_idmap_at(&m, i - 1) < rumor_idmap_at(&m, i));
    /* the slot comes back to another id */
    CHECK_OK(rumor_idmap_insert(&m, 777, 10));
    CHECK(rumor_idmap_find(&m, 777) == 10 && rumor_idmap_at(&m, 0) == 777);
    for (int i = 0; i < 64; i++)
        if (i != 10)
            CHECK(rumor_idmap_find(&m, ids[i]) == i);
    rumor_idmap_free(&m);
    CHECK(m.id == NULL && m.n == 0);
    rumor_idmap_free(&m); /* twice is fine */
}

/* ------------------------------------------- the graph over an open view */

#define MAXP 40

/* One peer of the simulation: the members it met, a slot each in the
 * order it met them (its own numbering), as the mixer keeps them. */
struct peer {
    uint64_t id;
    rumor_idmap_t slots;
    int next_slot;
};

/* The view a peer holds: the living's records sorted by id, as
 * rumor_swim_view gives them. */
static size_t view_of(const uint64_t *alive, size_t n, rumor_swim_member_t *v)
{
    for (size_t i = 0; i < n; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].id = alive[i];
        snprintf(v[i].endpoint, sizeof v[i].endpoint, "tcp://10.0.%u.%u:7000",
                 (unsigned)(alive[i] >> 56), (unsigned)(alive[i] & 0xff));
    }
    for (size_t i = 1; i < n; i++) /* insertion sort by id */
        for (size_t j = i; j > 0 && v[j - 1].id > v[j].id; j--) {
            rumor_swim_member_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n;
}

/* A peer's neighbours by id in round r, with weights, through its slots
 * (node -> id -> slot -> id: what the mixer does). Returns how many. */
static int nbrs_by_id(struct peer *p, const char *fam, const rumor_swim_member_t *v, size_t n,
                      long r, uint64_t *out, double *w)
{
    rumor_topo_t *t = NULL;
    int self = -1, nb[MAXP];
    double wn[MAXP];
    if (rumor_swim_topology(fam, v, n, p->id, &t, &self) < 0) {
        CHECKF(0, "%s over %zu: %s", fam, n, rumor_err_msg());
        return -1;
    }
    int k = rumor_topo_neighbors(t, self, r, nb, wn, MAXP);
    for (int i = 0; i < k; i++) {
        uint64_t id = v[nb[i]].id;
        int slot = rumor_idmap_find(&p->slots, id);
        if (slot < 0) { /* met now: the next free slot */
            slot = p->next_slot++;
            CHECK_OK(rumor_idmap_insert(&p->slots, id, slot));
        }
        /* the slot leads back to the same member */
        int back = -1;
        for (int j = 0; j < p->slots.n; j++)
            if (p->slots.slot[j] == slot)
                back = j;
        CHECK(back >= 0 && p->slots.id[back] == id);
        out[i] = id;
        w[i] = wn[i];
    }
    rumor_topo_destroy(&t);
    return k;
}

/* Every living peer lays the family over the same view; i's neighbour j
 * has i as its neighbour, with the same weight (undirected families). */
static void check_agree(struct peer *ps, const int *alive_idx, size_t n, const char *fam)
{
    uint64_t alive[MAXP], nbr[MAXP][MAXP];
    double w[MAXP][MAXP];
    int k[MAXP];
    rumor_swim_member_t v[MAXP];
    for (size_t i = 0; i < n; i++)
        alive[i] = ps[alive_idx[i]].id;
    view_of(alive, n, v);
    for (size_t i = 0; i < n; i++)
        k[i] = nbrs_by_id(&ps[alive_idx[i]], fam, v, n, 0, nbr[i], w[i]);
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < k[i]; a++) {
            size_t j = 0;
            while (j < n && alive[j] != nbr[i][a])
                j++;
            CHECKF(j < n, "%s: a neighbour that is not alive", fam);
            int found = 0;
            for (int b = 0; j < n && b < k[j]; b++)
                if (nbr[j][b] == alive[i]) {
                    found = 1;
                    CHECK_CLOSE(w[j][b], w[i][a], 1e-15, 0);
                }
            CHECKF(found, "%s over %zu: %016llx lists %016llx, not back", fam, n,
                   (unsigned long long)alive[i], (unsigned long long)nbr[i][a]);
        }
    /* a ring: 2 neighbours each (1 for 2 members): the ids' cyclic order */
    if (!strcmp(fam, "ring") && n >= 3)
        for (size_t i = 0; i < n; i++) {
            size_t pos = 0;
            while (v[pos].id != alive[i])
                pos++;
            uint64_t prev = v[(pos + n - 1) % n].id, next = v[(pos + 1) % n].id;
            CHECK(k[i] == 2 && ((nbr[i][0] == prev && nbr[i][1] == next) ||
                                (nbr[i][0] == next && nbr[i][1] == prev)));
        }
}

static void test_open_view(void)
{
    const char *fams[] = { "ring", "exp", "torus", "rreg:3:seed=9", "complete", "chord" };
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++) {
        struct peer ps[MAXP];
        unsigned long long s = 11 + f;
        for (int i = 0; i < MAXP; i++) {
            ps[i].id = next_id(&s);
            ps[i].next_slot = 1; /* slot 0: itself */
            CHECK_OK(rumor_idmap_init(&ps[i].slots, MAXP));
        }
        /* 4 founders; then peers join and leave for good, one at a time:
         * views of every size the swarm passes through */
        int alive[MAXP], n = 4, joined = 4;
        for (int i = 0; i < n; i++)
            alive[i] = i;
        check_agree(ps, alive, (size_t)n, fams[f]);
        for (int step = 0; step < 30; step++) {
            unsigned long long r = next_id(&s);
            if ((r & 3) != 0 && joined < MAXP) /* join */
                alive[n++] = joined++;
            else if (n > 2) { /* someone leaves */
                int victim = (int)((r >> 8) % (unsigned long long)n);
                alive[victim] = alive[--n];
            }
            check_agree(ps, alive, (size_t)n, fams[f]);
        }
        for (int i = 0; i < MAXP; i++)
            rumor_idmap_free(&ps[i].slots);
    }
}

int main(void)
{
    test_idmap();
    test_open_view();
    return tu_finish("test_open");
}

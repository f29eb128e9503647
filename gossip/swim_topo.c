/* The neighbours a membership view implies: a topology family instantiated
 * for the view's size, member i of the sorted view being node i (see
 * swim.h and docs/membership.md, "Neighbours from the view"). Every peer
 * that holds the same view builds the same spec string, hence the same
 * graph and weights bit for bit (topology.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swim.h"

/* A non-negative decimal integer field, whole. */
static int field_long(const char *s, long *out)
{
    char *end;
    if (!s || !*s || *s < '0' || *s > '9')
        return -1;
    long v = strtol(s, &end, 10);
    if (*end || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Appends ":f[i]" for i in [from, nf) to buf at *len. */
static int tail(char *buf, size_t cap, int len, char **f, int from, int nf)
{
    for (int i = from; i < nf && len >= 0; i++) {
        int k = snprintf(buf + len, cap - (size_t)len, ":%s", f[i]);
        len = k < 0 || (size_t)k >= cap - (size_t)len ? -1 : len + k;
    }
    return len;
}

static int put(char *buf, size_t cap, int k)
{
    return k < 0 || (size_t)k >= cap ? -1 : k;
}

int rumor_swim_topology_spec(const char *spec, size_t n, char *buf, size_t cap)
{
    if (!spec || !*spec || strlen(spec) > 200)
        return rumor_err_set(RUMOR_EINVAL, "swim topology: empty or overlong family spec");
    if (!buf || !cap)
        return rumor_err_set(RUMOR_EINVAL, "swim topology: no buffer");
    if (n < 1 || n > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "swim topology: %zu members is outside [1, %d]", n,
                             RUMOR_TOPO_MAX_NODES);
    char tmp[256], *f[8];
    int nf = 0;
    snprintf(tmp, sizeof tmp, "%s", spec);
    for (char *p = tmp, *q; p; p = q) {
        if (nf == 8)
            return rumor_err_set(RUMOR_EINVAL, "spec '%s': too many fields", spec);
        q = strchr(p, ':');
        if (q)
            *q++ = 0;
        f[nf++] = p;
    }
    if (nf > 1 && !strcmp(f[1], "N")) { /* "ring:N" means "ring" */
        memmove(&f[1], &f[2], (size_t)(nf - 2) * sizeof *f);
        nf--;
    }
    const char *fam = f[0];
    static const char *const known[] = { "ring",     "exp",  "torus", "grid", "hypercube",
                                         "complete", "star", "rreg",  "er",   "ws",
                                         "base",     "onepeer-exp", "chord" };
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        ok |= !strcmp(fam, known[i]);
    if (!ok)
        return rumor_err_set(RUMOR_EINVAL,
                             "spec '%s': family '%s' cannot follow a changing view (expected "
                             "ring, exp, chord, torus, grid, hypercube, complete, star, rreg:D, "
                             "er:P, ws:K:P, base:K or onepeer-exp, without N or with N in its "
                             "place)",
                             spec, fam);
    /* the arguments each family takes besides N */
    int lo = 0, hi = 0;
    if (!strcmp(fam, "exp"))
        hi = 1;
    else if (!strcmp(fam, "rreg") || !strcmp(fam, "er"))
        lo = 1, hi = 2;
    else if (!strcmp(fam, "ws"))
        lo = 2, hi = 3;
    else if (!strcmp(fam, "base"))
        lo = hi = 1;
    if (nf - 1 < lo || nf - 1 > hi || (!strcmp(fam, "exp") && nf == 2 && strcmp(f[1], "directed")))
        return rumor_err_set(RUMOR_EINVAL,
                             "spec '%s': wrong arguments for '%s' (give the family without its "
                             "size, e.g. ring, exp[:directed], rreg:D[:seed=S], er:P[:seed=S], "
                             "ws:K:P[:seed=S], base:K)",
                             spec, fam);
    long a = 0;
    if ((!strcmp(fam, "rreg") || !strcmp(fam, "ws") || !strcmp(fam, "base")) &&
        (field_long(f[1], &a) < 0 || a < 1 || a > RUMOR_TOPO_MAX_NODES))
        return rumor_err_set(RUMOR_EINVAL, "spec '%s': degree '%s' is not an integer >= 1", spec,
                             f[1]);

    long nn = (long)n;
    int len;
    if (n == 1)
        len = put(buf, cap, snprintf(buf, cap, "alone"));
    else if (n == 2)
        len = put(buf, cap, snprintf(buf, cap, "complete:2")); /* the only connected graph */
    else if (!strcmp(fam, "torus") || !strcmp(fam, "grid")) {
        long r = 1;
        for (long d = 1; d * d <= nn; d++)
            if (nn % d == 0)
                r = d;
        if (r < 2 && fam[0] == 't')
            len = put(buf, cap, snprintf(buf, cap, "ring:%ld", nn));
        else
            len = put(buf, cap, snprintf(buf, cap, "%s:%ldx%ld", fam, r, nn / r));
    } else if (!strcmp(fam, "hypercube")) {
        int dim = 0;
        while ((1L << dim) < nn)
            dim++;
        if ((1L << dim) != nn)
            return rumor_err_set(RUMOR_EINVAL,
                                 "spec '%s': a hypercube needs a power-of-two view, not %ld "
                                 "members (exp is the nearest family for any size)",
                                 spec, nn);
        len = put(buf, cap, snprintf(buf, cap, "hypercube:%d", dim));
    } else if (!strcmp(fam, "rreg")) {
        long d = a;
        if (nn * d % 2)
            d++; /* no d-regular graph on an odd number of nodes with d odd */
        if (d < 2)
            d = 2; /* 1-regular graphs on more than 2 nodes are not connected */
        if (d >= nn - 1)
            len = put(buf, cap, snprintf(buf, cap, "complete:%ld", nn));
        else
            len = tail(buf, cap, put(buf, cap, snprintf(buf, cap, "rreg:%ld:%ld", nn, d)), f, 2,
                       nf);
    } else if (!strcmp(fam, "ws")) {
        if (a >= nn - 1)
            len = put(buf, cap, snprintf(buf, cap, "complete:%ld", nn));
        else
            len = tail(buf, cap, put(buf, cap, snprintf(buf, cap, "ws:%ld", nn)), f, 1, nf);
    } else if (!strcmp(fam, "base")) {
        len = put(buf, cap, snprintf(buf, cap, "base:%ld:%ld", nn, a < nn - 1 ? a : nn - 1));
    } else {
        len = tail(buf, cap, put(buf, cap, snprintf(buf, cap, "%s:%ld", fam, nn)), f, 1, nf);
    }
    if (len < 0)
        return rumor_err_set(RUMOR_EINVAL, "swim topology: spec buffer of %zu bytes too small",
                             cap);
    return len;
}

/* The first member at or after `target` in the id space (wrapping). */
static size_t successor(const rumor_swim_member_t *view, size_t n, uint64_t target)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (view[mid].id < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == n ? 0 : lo;
}

/* "chord": neighbours by distance in the id space, not by rank in the
 * sorted view. Member i links to the first member at or after id_i +
 * 2^64 / 2^k for k = 1, 2, ..., 63 (Chord's fingers; once one is i's
 * successor all later ones are), undirected, with MH weights. Whether an
 * edge exists depends only on the ids between its ends and its targets,
 * never on the view's size or ranks: a member that joins or leaves moves
 * the fingers that pointed across its place, about log2(n) + 1 of them.
 * Laid over ranks (exp), the same change shifts every later member's rank
 * and rewires many peers, and peers whose views differ for a moment wait
 * for neighbours that do not send to them (docs/scale.md, "Graphs that
 * survive churn"). */
static int chord(const rumor_swim_member_t *view, size_t n, rumor_topo_t **out)
{
    rumor_edges_t e = { 0 };
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        size_t next = (i + 1) % n;
        rc = rumor_edges_add(&e, (int)i, (int)next, NAN, 0);
        for (int k = 1; k < 64 && rc >= 0; k++) {
            size_t j = successor(view, n, view[i].id + ((uint64_t)1 << (64 - k))); /* mod 2^64 */
            if (j == next)
                break;
            if (j != i)
                rc = rumor_edges_add(&e, (int)i, (int)j, NAN, 0);
        }
    }
    rumor_topo_t *t = rc >= 0 ? calloc(1, sizeof *t) : NULL;
    if (rc >= 0 && (!t || !(t->spec = strdup("chord")) || !(t->w = calloc(1, sizeof *t->w))))
        rc = rumor_err_set(RUMOR_ENOMEM, "out of memory");
    if (rc >= 0)
        rc = rumor_graph_from_edges((int)n, &e, &t->graph);
    if (rc >= 0)
        rc = rumor_mix_from_graph(t->graph, RUMOR_MIX_MH, &t->w[0]);
    rumor_edges_free(&e);
    if (rc < 0) {
        if (t)
            rumor_topo_destroy(&t);
        return rc;
    }
    snprintf(t->family, sizeof t->family, "chord");
    snprintf(t->desc, sizeof t->desc, "chord of %zu peers (fingers in the id space), MH weights",
             n);
    t->scheme = RUMOR_MIX_MH;
    t->period = 1;
    t->n = (int)n;
    *out = t;
    return 0;
}

/* A lone peer: one node, no edges, W = [1]. */
static int alone(const char *family, rumor_topo_t **out)
{
    rumor_topo_t *t = calloc(1, sizeof *t);
    if (!t || !(t->spec = strdup("alone"))) {
        free(t);
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    }
    snprintf(t->family, sizeof t->family, "%.*s", (int)strcspn(family, ":"), family);
    snprintf(t->desc, sizeof t->desc, "1 peer, alone");
    t->scheme = RUMOR_MIX_MH;
    t->period = 1;
    rumor_edges_t e = { 0 };
    int rc = rumor_graph_from_edges(1, &e, &t->graph);
    if (rc >= 0 && !(t->w = calloc(1, sizeof *t->w)))
        rc = rumor_err_set(RUMOR_ENOMEM, "out of memory");
    if (rc >= 0)
        rc = rumor_mix_from_graph(t->graph, RUMOR_MIX_MH, &t->w[0]);
    if (rc < 0) {
        rumor_topo_destroy(&t);
        return rc;
    }
    t->n = 1;
    *out = t;
    return 0;
}

int rumor_swim_topology(const char *spec, const rumor_swim_member_t *view, size_t n,
                        uint64_t self_id, rumor_topo_t **topo, int *self_node)
{
    *topo = NULL;
    if (!view || !n)
        return rumor_err_set(RUMOR_EINVAL, "swim topology: empty view");
    int self = -1;
    for (size_t i = 0; i < n; i++) {
        if (i && view[i].id <= view[i - 1].id)
            return rumor_err_set(RUMOR_EINVAL,
                                 "swim topology: view not sorted by strictly increasing id at "
                                 "%zu",
                                 i);
        if (view[i].id == self_id)
            self = (int)i;
    }
    if (self < 0)
        return rumor_err_set(RUMOR_EINVAL, "swim topology: %016llx is not in the view",
                             (unsigned long long)self_id);
    char buf[256];
    RUMOR_CHECK(rumor_swim_topology_spec(spec, n, buf, sizeof buf));
    if (n == 1)
        RUMOR_CHECK(alone(spec, topo));
    else if (!strncmp(buf, "chord:", 6))
        RUMOR_CHECK(chord(view, n, topo));
    else
        RUMOR_CHECK(rumor_topo_parse(buf, topo));
    *self_node = self;
    return 0;
}

/* Graphs from files: a plain edge list or JSON (see docs/rumor-topo.md).
 *
 * Edge list: one "i j" or "i j w" per line, '#' starts a comment, an
 * optional "n N" line first fixes the number of peers (else max id + 1).
 * JSON: {"n": N, "edges": [[i, j], [i, j, w], ...]} or the node-link form
 * networkx writes ({"nodes": [...], "links": [{"source": i, "target": j,
 * "weight": w}, ...]}). Either way, edges with weights give the user's W
 * (W_ij = W_ji = w, W_ii = 1 - sum), which must then be valid.
 * Every error names the file and the line (or the JSON element). */
#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "topo_text.h"
#include "topology.h"

#define JSON_MAX_BYTES (1L << 30)

typedef struct {
    int a, b;  /* a < b */
    long idx;
} ekey_t;

static int cmp_ekey(const void *x, const void *y)
{
    const ekey_t *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return (p->idx > q->idx) - (p->idx < q->idx);
}

/* Turns checked edges into the graph (connected) and, when weighted, W. */
static int finish(const char *path, int n, rumor_edges_t *e, int weighted, rumor_graph_t **g,
                  rumor_mix_t **wout)
{
    if (e->len == 0)
        return rumor_err_set(RUMOR_EFORMAT, "%s: no edges", path);
    RUMOR_CHECK(rumor_graph_from_edges(n, e, g));
    int miss, c = rumor_graph_components(*g, &miss);
    if (c != 1) {
        rumor_graph_destroy(g);
        if (c < 0)
            return c;
        return rumor_err_set(RUMOR_EFORMAT,
                             "%s: graph is not connected (%d components; peer %d is not reachable "
                             "from peer 0)",
                             path, c, miss);
    }
    if (!weighted)
        return 0;
    /* One W entry per undirected edge; a pair listed twice must agree. */
    ekey_t *k = malloc((size_t)e->len * sizeof *k);
    int *r = malloc((size_t)(2 * e->len) * sizeof *r), *cc = malloc((size_t)(2 * e->len) * sizeof *cc);
    int *ln = malloc((size_t)(2 * e->len) * sizeof *ln);
    double *v = malloc((size_t)(2 * e->len) * sizeof *v);
    int rc = 0;
    long cnt = 0;
    if (!k || !r || !cc || !ln || !v) {
        rc = rumor_err_set(RUMOR_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    for (long i = 0; i < e->len; i++)
        k[i] = (ekey_t){ e->u[i] < e->v[i] ? e->u[i] : e->v[i],
                         e->u[i] < e->v[i] ? e->v[i] : e->u[i], i };
    qsort(k, (size_t)e->len, sizeof *k, cmp_ekey);
    for (long i = 0; i < e->len; i++) {
        long x = k[i].idx;
        if (i > 0 && k[i].a == k[i - 1].a && k[i].b == k[i - 1].b) {
            long y = k[i - 1].idx;
            if (e->w[x] != e->w[y]) {
                rc = rumor_err_set(RUMOR_EFORMAT,
                                   "%s:%d: edge %d-%d has weight %.17g, but line %d gave %.17g",
                                   path, e->line[x], k[i].a, k[i].b, e->w[x], e->line[y], e->w[y]);
                goto out;
            }
            continue;
        }
        r[cnt] = k[i].a, cc[cnt] = k[i].b, v[cnt] = e->w[x], ln[cnt++] = e->line[x];
        r[cnt] = k[i].b, cc[cnt] = k[i].a, v[cnt] = e->w[x], ln[cnt++] = e->line[x];
    }
    rc = rumor_mix_build(n, cnt, r, cc, v, ln, path, wout);
    if (rc >= 0 && (rc = rumor_mix_check(*wout, 1, 0)) < 0) {
        rumor_mix_destroy(wout);
        rumor_err_prefix(rc, "%s: edge weights", path);
    }
out:
    free(k);
    free(r);
    free(cc);
    free(ln);
    free(v);
    if (rc < 0)
        rumor_graph_destroy(g);
    return rc;
}

/* Checks one edge's fields and adds it; `where` is "path:line" or a JSON
 * element path for messages. */
static int add_edge(rumor_edges_t *e, const char *where, int line, long nmax, int declared,
                    double u, double v, int has_w, double w, int *weighted, long *maxid)
{
    if (u != floor(u) || v != floor(v) || u < 0 || v < 0 || u >= (double)nmax || v >= (double)nmax)
        return rumor_err_set(RUMOR_EFORMAT, "%s: peer ids %.17g %.17g must be integers in [0, %ld)%s",
                             where, u, v, nmax, declared ? " (the declared n)" : "");
    if (u == v)
        return rumor_err_set(RUMOR_EFORMAT, "%s: self-loop %.17g-%.17g (a peer's own weight is implied)",
                             where, u, v);
    if (has_w && !(w > 0))
        return rumor_err_set(RUMOR_EFORMAT, "%s: weight %g of edge %.17g-%.17g must be positive%s", where,
                             w, u, v, w == 0 ? " (leave out an edge to drop it)" : "");
    if (*weighted < 0)
        *weighted = has_w;
    else if (*weighted != has_w)
        return rumor_err_set(RUMOR_EFORMAT, "%s: edge %.17g-%.17g %s a weight but earlier edges %s",
                             where, u, v, has_w ? "has" : "lacks", has_w ? "do not" : "do");
    if ((long)u > *maxid)
        *maxid = (long)u;
    if ((long)v > *maxid)
        *maxid = (long)v;
    int rc = rumor_edges_add(e, (int)u, (int)v, has_w ? w : NAN, line);
    return rc < 0 ? rumor_err_prefix(rc, "%s", where) : 0;
}

static int read_edgelist(const char *path, FILE *f, rumor_graph_t **g, rumor_mix_t **wout)
{
    char buf[RUMOR_TOPO_LINE_MAX + 2], *fld[4], where[512];
    int line = 0, rc, weighted = -1;
    long n = 0, maxid = -1;
    rumor_edges_t e = { 0 };
    while ((rc = rumor_topo_readline(f, buf, sizeof buf, &line, path)) > 0) {
        if (!buf[0])
            continue;
        snprintf(where, sizeof where, "%s:%d", path, line);
        int nf = rumor_topo_split(buf, fld, 3);
        if (nf >= 1 && !strcmp(fld[0], "n")) {
            if (e.len || n) {
                rc = rumor_err_set(RUMOR_EFORMAT, "%s: 'n' must come once, before the edges", where);
                goto fail;
            }
            if (nf != 2 || rumor_topo_parse_long(fld[1], 2, RUMOR_TOPO_MAX_NODES, &n) < 0) {
                rc = rumor_err_set(RUMOR_EFORMAT, "%s: expected 'n N' with 2 <= N <= %d", where,
                                   RUMOR_TOPO_MAX_NODES);
                goto fail;
            }
            continue;
        }
        long u, v;
        double w = NAN;
        if (nf < 2 || nf > 3) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: expected 'i j' or 'i j w', found %s", where,
                               nf > 3 ? "more than 3 fields" : "1 field");
            goto fail;
        }
        if (rumor_topo_parse_long(fld[0], -(1L << 40), 1L << 40, &u) < 0 ||
            rumor_topo_parse_long(fld[1], -(1L << 40), 1L << 40, &v) < 0) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: peer ids '%s' '%s' are not integers", where,
                               fld[0], fld[1]);
            goto fail;
        }
        if (nf == 3 && rumor_topo_parse_double(fld[2], &w) < 0) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: weight '%s' is not a finite number", where,
                               fld[2]);
            goto fail;
        }
        rc = add_edge(&e, where, line, n ? n : RUMOR_TOPO_MAX_NODES, n != 0, (double)u, (double)v,
                      nf == 3, w, &weighted, &maxid);
        if (rc < 0)
            goto fail;
    }
    if (rc < 0)
        goto fail;
    if (!n)
        n = maxid + 1;
    rc = finish(path, (int)n, &e, weighted == 1, g, wout);
fail:
    rumor_edges_free(&e);
    return rc;
}

/* A JSON number that must be there. */
static int jnum(const cJSON *o, double *out)
{
    if (!cJSON_IsNumber(o))
        return -1;
    *out = o->valuedouble;
    return 0;
}

static int read_json(const char *path, FILE *f, rumor_graph_t **g, rumor_mix_t **wout)
{
    struct stat st;
    if (fstat(fileno(f), &st) < 0)
        return rumor_err_sys(RUMOR_ESYS, "%s", path);
    if (st.st_size > JSON_MAX_BYTES)
        return rumor_err_set(RUMOR_EFORMAT, "%s: JSON larger than %ld bytes", path, JSON_MAX_BYTES);
    char *text = malloc((size_t)st.st_size + 1);
    if (!text)
        return rumor_err_set(RUMOR_ENOMEM, "%s: out of memory", path);
    size_t len = fread(text, 1, (size_t)st.st_size, f);
    text[len] = 0;
    cJSON *root = cJSON_ParseWithLength(text, len);
    int rc = 0, weighted = -1;
    long n = 0, maxid = -1;
    rumor_edges_t e = { 0 };
    char where[512];
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= text && at <= text + len ? (long)(at - text) : -1;
        int line = 1;
        for (long i = 0; i < off; i++)
            line += text[i] == '\n';
        rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: invalid JSON", path, line);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        rc = rumor_err_set(RUMOR_EFORMAT, "%s: expected a JSON object with \"edges\" or \"links\"",
                           path);
        goto out;
    }
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(root, "n");
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    if (jn) {
        double d;
        if (jnum(jn, &d) < 0 || d != floor(d) || d < 2 || d > RUMOR_TOPO_MAX_NODES) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: \"n\" must be an integer in [2, %d]", path,
                               RUMOR_TOPO_MAX_NODES);
            goto out;
        }
        n = (long)d;
    } else if (cJSON_IsArray(nodes)) {
        n = cJSON_GetArraySize(nodes);
        if (n < 2 || n > RUMOR_TOPO_MAX_NODES) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: \"nodes\" has %ld entries (2 to %d allowed)",
                               path, n, RUMOR_TOPO_MAX_NODES);
            goto out;
        }
    }
    const cJSON *edges = cJSON_GetObjectItemCaseSensitive(root, "edges");
    const char *ename = "edges";
    if (!edges) {
        edges = cJSON_GetObjectItemCaseSensitive(root, "links");
        ename = "links";
    }
    if (!cJSON_IsArray(edges)) {
        rc = rumor_err_set(RUMOR_EFORMAT, "%s: no \"edges\" (or \"links\") array", path);
        goto out;
    }
    long idx = 0;
    for (const cJSON *it = edges->child; it; it = it->next, idx++) {
        snprintf(where, sizeof where, "%s: %s[%ld]", path, ename, idx);
        double u, v, w = NAN;
        int has_w = 0;
        if (cJSON_IsArray(it)) {
            int sz = cJSON_GetArraySize(it);
            if (sz < 2 || sz > 3 || jnum(cJSON_GetArrayItem(it, 0), &u) < 0 ||
                jnum(cJSON_GetArrayItem(it, 1), &v) < 0 ||
                (sz == 3 && jnum(cJSON_GetArrayItem(it, 2), &w) < 0)) {
                rc = rumor_err_set(RUMOR_EFORMAT, "%s: expected [i, j] or [i, j, w] of numbers",
                                   where);
                goto out;
            }
            has_w = sz == 3;
        } else if (cJSON_IsObject(it)) {
            const cJSON *jw = cJSON_GetObjectItemCaseSensitive(it, "weight");
            if (jnum(cJSON_GetObjectItemCaseSensitive(it, "source"), &u) < 0 ||
                jnum(cJSON_GetObjectItemCaseSensitive(it, "target"), &v) < 0 ||
                (jw && jnum(jw, &w) < 0)) {
                rc = rumor_err_set(RUMOR_EFORMAT,
                                   "%s: expected {\"source\": i, \"target\": j[, \"weight\": w]} "
                                   "with integer ids",
                                   where);
                goto out;
            }
            has_w = jw != NULL;
        } else {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: expected an array or an object", where);
            goto out;
        }
        rc = add_edge(&e, where, 0, n ? n : RUMOR_TOPO_MAX_NODES, n != 0, u, v, has_w, w,
                      &weighted, &maxid);
        if (rc < 0)
            goto out;
    }
    if (!n)
        n = maxid + 1;
    rc = finish(path, (int)n, &e, weighted == 1, g, wout);
out:
    rumor_edges_free(&e);
    cJSON_Delete(root);
    free(text);
    return rc;
}

int rumor_topo_read_graph(const char *path, rumor_graph_t **g, rumor_mix_t **wout)
{
    *g = NULL;
    *wout = NULL;
    if (!path || !*path)
        return rumor_err_set(RUMOR_EINVAL, "file: spec needs a path (file:PATH)");
    FILE *f = fopen(path, "r");
    if (!f)
        return rumor_err_sys(RUMOR_ESYS, "%s", path);
    /* JSON when the name says so or the first non-blank byte is '{' */
    int c;
    while ((c = getc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r')
        ;
    rewind(f);
    size_t len = strlen(path);
    int json = c == '{' || (len > 5 && !strcmp(path + len - 5, ".json"));
    int rc = json ? read_json(path, f, g, wout) : read_edgelist(path, f, g, wout);
    fclose(f);
    return rc;
}

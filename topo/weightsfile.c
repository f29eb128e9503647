/* The weights file: what `rumor-topo weights` writes and rumor-peer and
 * `--weights file:W` read (format in weights.h and docs/rumor-topo.md).
 * Every value is written with %.17g, so a file read back gives the very
 * same doubles, and peers that read it agree bit for bit.
 *
 * Negative entries: averaging x <- W x converges to the mean for any
 * symmetric W with rows summing to 1 and rho(W - 11^T/n) < 1, whatever the
 * signs (bestconst's self-weights are negative on a star, and its rho is
 * the best of all constant edge weights). So the reader takes what the
 * writer writes: a W with a negative entry must be symmetric and contract,
 * which is checked here; one without needs only its sums (its rho is at
 * most 1, so it cannot blow up). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spectrum.h"
#include "topo_text.h"
#include "weights.h"

/* rho must be below 1 by more than rounding to count as contracting */
#define RHO_MARGIN 1e-12

int rumor_mix_check_signed(rumor_mix_t *w)
{
    RUMOR_CHECK(rumor_mix_check(w, 0, RUMOR_MIX_SIGNED));
    int ni = -1, nj = -1;
    double nv = 0;
    for (int i = 0; i < w->n && ni < 0; i++) {
        if (w->diag[i] < 0)
            ni = nj = i, nv = w->diag[i];
        for (long p = w->off[i]; p < w->off[i + 1] && ni < 0; p++)
            if (w->val[p] < 0)
                ni = i, nj = w->col[p], nv = w->val[p];
    }
    if (ni < 0)
        return 0;
    if (!w->symmetric)
        return rumor_err_set(RUMOR_EINVAL,
                             "W(%d,%d) = %.17g is negative and W is not symmetric: negative "
                             "weights are accepted only in a symmetric W, where rho(W - 11^T/n) "
                             "< 1 makes averaging converge",
                             ni, nj, nv);
    double l2, ln, rho;
    int rc = rumor_mix_rho(w, RUMOR_EIG_AUTO, &l2, &ln, &rho);
    if (rc < 0)
        return rumor_err_prefix(rc,
                                "W(%d,%d) = %.17g is negative, so rho(W - 11^T/n) < 1 must be "
                                "checked, and that failed",
                                ni, nj, nv);
    if (!(rho < 1 - RHO_MARGIN))
        return rumor_err_set(RUMOR_EINVAL,
                             "W(%d,%d) = %.17g is negative and rho(W - 11^T/n) = max(|lambda_2|, "
                             "|lambda_n|) = %.17g >= 1 (lambda_2 = %.17g, lambda_n = %.17g): "
                             "averaging with these weights does not converge",
                             ni, nj, nv, rho, l2, ln);
    return 0;
}

int rumor_mix_write(FILE *f, rumor_mix_t *const *w, int period, const char *comment)
{
    if (period < 1 || !w || !w[0])
        return rumor_err_set(RUMOR_EINVAL, "weights: nothing to write");
    int n = w[0]->n;
    fprintf(f, "rumor-weights 1 n=%d period=%d\n", n, period);
    if (comment)
        fprintf(f, "# %s\n", comment);
    fprintf(f, "# i j W_ij: peer i mixes x_i <- sum_j W_ij x_j (every non-zero, "
               "diagonal included)\n");
    for (int k = 0; k < period; k++) {
        if (period > 1)
            fprintf(f, "round %d\n", k);
        for (int i = 0; i < n; i++) {
            /* the row in column order, the diagonal in its place */
            int done_diag = 0;
            for (long p = w[k]->off[i]; p <= w[k]->off[i + 1]; p++) {
                if (!done_diag && (p == w[k]->off[i + 1] || w[k]->col[p] > i)) {
                    fprintf(f, "%d %d %.17g\n", i, i, w[k]->diag[i]);
                    done_diag = 1;
                }
                if (p < w[k]->off[i + 1])
                    fprintf(f, "%d %d %.17g\n", i, w[k]->col[p], w[k]->val[p]);
            }
        }
    }
    if (ferror(f))
        return rumor_err_sys(RUMOR_EIO, "weights: write failed");
    return 0;
}

int rumor_mix_save(const char *path, rumor_mix_t *const *w, int period, const char *comment)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return rumor_err_sys(RUMOR_ESYS, "%s", path);
    int rc = rumor_mix_write(f, w, period, comment);
    if (fclose(f) != 0 && rc == 0)
        rc = rumor_err_sys(RUMOR_EIO, "%s: close failed", path);
    if (rc < 0)
        rumor_err_prefix(rc, "%s", path);
    return rc;
}

/* Entries of the round being read. */
typedef struct {
    long len, cap;
    int *r, *c, *line;
    double *v;
} ents_t;

static int ents_add(ents_t *e, int r, int c, double v, int line)
{
    if (e->len == e->cap) {
        long cap = e->cap ? 2 * e->cap : 256;
        if (cap > 2 * RUMOR_TOPO_MAX_EDGES + RUMOR_TOPO_MAX_NODES)
            return rumor_err_set(RUMOR_EINVAL, "more than %ld entries in one round",
                                 2 * RUMOR_TOPO_MAX_EDGES + RUMOR_TOPO_MAX_NODES);
        int *nr = realloc(e->r, (size_t)cap * sizeof *nr);
        if (nr)
            e->r = nr;
        int *nc = realloc(e->c, (size_t)cap * sizeof *nc);
        if (nc)
            e->c = nc;
        int *nl = realloc(e->line, (size_t)cap * sizeof *nl);
        if (nl)
            e->line = nl;
        double *nv = realloc(e->v, (size_t)cap * sizeof *nv);
        if (nv)
            e->v = nv;
        if (!nr || !nc || !nl || !nv)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory");
        e->cap = cap;
    }
    e->r[e->len] = r;
    e->c[e->len] = c;
    e->v[e->len] = v;
    e->line[e->len++] = line;
    return 0;
}

static void ents_free(ents_t *e)
{
    free(e->r);
    free(e->c);
    free(e->line);
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* Turns the entries gathered for round k into a checked matrix. */
static int close_round(const char *path, int n, int k, int period, ents_t *e,
                       rumor_mix_t **slot)
{
    int rc = rumor_mix_build(n, e->len, e->r, e->c, e->v, e->line, path, slot);
    if (rc < 0)
        return rc;
    rc = rumor_mix_check_signed(*slot);
    if (rc < 0) {
        rumor_mix_destroy(slot);
        if (period > 1)
            return rumor_err_prefix(rc, "%s: round %d", path, k);
        return rumor_err_prefix(rc, "%s", path);
    }
    e->len = 0;
    return 0;
}

int rumor_mix_load(const char *path, rumor_mix_t ***out, int *period)
{
    *out = NULL;
    *period = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return rumor_err_sys(RUMOR_ESYS, "%s", path);
    char buf[RUMOR_TOPO_LINE_MAX + 2], *fld[8];
    int line = 0, rc, n = 0, per = 0, round = -1;
    rumor_mix_t **w = NULL;
    ents_t e = { 0 };
    while ((rc = rumor_topo_readline(f, buf, sizeof buf, &line, path)) > 0) {
        if (!buf[0])
            continue;
        int nf = rumor_topo_split(buf, fld, 4);
        if (!n) { /* the header */
            long v;
            per = 1;
            if (nf < 3 || strcmp(fld[0], "rumor-weights") || strcmp(fld[1], "1") ||
                strncmp(fld[2], "n=", 2) ||
                rumor_topo_parse_long(fld[2] + 2, 1, RUMOR_TOPO_MAX_NODES, &v) < 0) {
                rc = rumor_err_set(RUMOR_EFORMAT,
                                   "%s:%d: not a rumor weights file (expected 'rumor-weights 1 "
                                   "n=N [period=P]' with 1 <= N <= %d)",
                                   path, line, RUMOR_TOPO_MAX_NODES);
                goto out;
            }
            n = (int)v;
            if (nf >= 4) {
                if (nf > 4 || strncmp(fld[3], "period=", 7) ||
                    rumor_topo_parse_long(fld[3] + 7, 1, 4096, &v) < 0) {
                    rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: bad period (expected period=P, 1 <= "
                                       "P <= 4096)", path, line);
                    goto out;
                }
                per = (int)v;
            }
            /* each round holds n rows: bound n x period like an edge count,
             * so a small file cannot ask for gigabytes */
            if ((long)n * per > (1L << 20)) {
                rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: n=%d x period=%d rows exceed %ld", path,
                                   line, n, per, 1L << 20);
                goto out;
            }
            w = calloc((size_t)per, sizeof *w);
            if (!w) {
                rc = rumor_err_set(RUMOR_ENOMEM, "out of memory");
                goto out;
            }
            continue;
        }
        if (!strcmp(fld[0], "round")) {
            long k;
            if (nf != 2 || rumor_topo_parse_long(fld[1], 0, per - 1, &k) < 0 || k != round + 1) {
                rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: expected 'round %d'", path, line,
                                   round + 1);
                goto out;
            }
            if (round >= 0 && (rc = close_round(path, n, round, per, &e, &w[round])) < 0)
                goto out;
            round = (int)k;
            continue;
        }
        if (round < 0) {
            if (per > 1) {
                rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: entry before 'round 0'", path, line);
                goto out;
            }
            round = 0;
        }
        long i, j;
        double v;
        if (nf != 3) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: expected 'i j w', found %d fields", path,
                               line, nf > 4 ? 4 : nf);
            goto out;
        }
        if (rumor_topo_parse_long(fld[0], 0, n - 1, &i) < 0 ||
            rumor_topo_parse_long(fld[1], 0, n - 1, &j) < 0) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: peer ids '%s %s' are not integers in [0, %d)",
                               path, line, fld[0], fld[1], n);
            goto out;
        }
        if (rumor_topo_parse_double(fld[2], &v) < 0) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: weight '%s' is not a finite number", path,
                               line, fld[2]);
            goto out;
        }
        if ((rc = ents_add(&e, (int)i, (int)j, v, line)) < 0) {
            rumor_err_prefix(rc, "%s:%d", path, line);
            goto out;
        }
    }
    if (rc < 0)
        goto out;
    if (!n) {
        rc = rumor_err_set(RUMOR_EFORMAT, "%s: empty file (no 'rumor-weights' header)", path);
        goto out;
    }
    if (round < 0)
        round = 0;
    if ((rc = close_round(path, n, round, per, &e, &w[round])) < 0)
        goto out;
    if (round != per - 1) {
        rc = rumor_err_set(RUMOR_EFORMAT, "%s: period=%d but only %d rounds given", path, per,
                           round + 1);
        goto out;
    }
    *out = w;
    *period = per;
    w = NULL;
    rc = 0;
out:
    if (w)
        rumor_mix_free_seq(&w, per);
    ents_free(&e);
    fclose(f);
    return rc;
}

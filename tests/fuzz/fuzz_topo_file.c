/* Fuzz target: graph and weights files (topo/topology.h, topo/weights.h).
 *
 * The input is written to a file under $TMPDIR and read as:
 *   1. a graph, through the spec "file:PATH" (edge list, or JSON when it
 *      starts with '{'), its rows checked like any topology's, then the same
 *      file offered as its weights (rumor_topo_set_weights "file:PATH");
 *   2. a weights file (rumor_mix_load): every matrix checked as the loader
 *      promises (finite, non-negative, rows summing to 1), written back with
 *      rumor_mix_save and read again, which must give the very same doubles
 *      (weightsfile.c: "%.17g"), and set as the weights of complete:N, on
 *      which every entry lies (so that must succeed), and of ring:N.
 *
 * Skipped: weights files whose header declares more than MAX_ROW_ROUNDS
 * peers x period. A round costs O(n) memory and time even when the file
 * lists no entry for it (a row without entries is the identity), so a header
 * "n=1048576 period=4096" and 4096 one-line "round K" lines (40 KB) make
 * rumor_mix_load allocate 4096 matrices of 2^20 rows (some 64 GiB); a 927-byte
 * file of 100 rounds takes 10 s and 1.7 GB. Reported as a finding; drop the
 * skip once the loader bounds n x period (it now refuses n x period > 2^20,
 * so the skip only mirrors that bound). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "topology.h"

#define MAX_ROW_ROUNDS (1L << 20) /* n x period of a weights file */
#define MAX_ROUND_TRIP 4096       /* n x period written back and reread */
#define MAX_SET_PEERS 64          /* complete:N / ring:N built for set_weights */
#define MAX_QUERY_PEERS 4096

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_topo_file: %s\n", what);
    abort();
}

/* Every row of W at round 0: sorted in-neighbours, finite non-zero weights,
 * summing to 1 with the self-weight. */
static void check_rows(const rumor_topo_t *t)
{
    int *nb = malloc((size_t)t->n * sizeof *nb);
    double *w = malloc((size_t)t->n * sizeof *w);
    if (!nb || !w)
        fail("out of memory in the harness");
    for (int i = 0; i < t->n && i < MAX_QUERY_PEERS; i++) {
        int c = rumor_topo_neighbors(t, i, 0, nb, w, t->n);
        if (c < 1 || c >= t->n)
            fail("a peer of a connected graph file without neighbours, or too many");
        double sum = rumor_topo_self_weight(t, i, 0);
        for (int q = 0; q < c; q++) {
            if (nb[q] == i || (q > 0 && nb[q] <= nb[q - 1]) || !(w[q] > 0))
                fail("a row with self, repeated, unsorted or non-positive entries");
            sum += w[q];
        }
        if (!(fabs(sum - 1) <= 1e-9))
            fail("a row of W does not sum to 1");
    }
    free(nb);
    free(w);
}

/* Peers and period a weights file's header declares (0 when it is not one:
 * the loader then refuses it on its own). Mirrors rumor_mix_load's reading
 * of the first line that is not blank or a comment. */
static long declared_row_rounds(const uint8_t *data, size_t size)
{
    char line[256];
    size_t i = 0;
    while (i < size) {
        size_t len = 0;
        while (i < size && data[i] != '\n') {
            if (len + 1 < sizeof line)
                line[len++] = (char)data[i];
            i++;
        }
        i++;
        line[len] = '\0';
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        if (strspn(line, " \t\r\f\v") == strlen(line))
            continue;
        long n = 1, period = 1;
        char *p = strstr(line, "n=");
        if (p)
            n = strtol(p + 2, NULL, 10);
        p = strstr(line, "period=");
        if (p)
            period = strtol(p + 7, NULL, 10);
        if (n < 1 || period < 1)
            return 0;
        if (n > MAX_ROW_ROUNDS || period > MAX_ROW_ROUNDS)
            return MAX_ROW_ROUNDS + 1;
        return n * period;
    }
    return 0;
}

static int same_mix(const rumor_mix_t *a, const rumor_mix_t *b)
{
    if (a->n != b->n || a->nnz != b->nnz)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->diag[i] != b->diag[i] || a->off[i + 1] != b->off[i + 1])
            return 0;
    for (long p = 0; p < a->nnz; p++)
        if (a->col[p] != b->col[p] || a->val[p] != b->val[p])
            return 0;
    return 1;
}

/* W(i, j) of a loaded matrix (0 off its support). */
static double mix_at(const rumor_mix_t *w, int i, int j)
{
    if (i == j)
        return w->diag[i];
    for (long p = w->off[i]; p < w->off[i + 1]; p++)
        if (w->col[p] == j)
            return w->val[p];
    return 0;
}

/* What the reader promises of what it accepts: finite entries, rows summing
 * to 1; and where an entry is negative, a symmetric W (its rho < 1 is the
 * reader's own check, too costly to repeat here). */
static void check_mix(const rumor_mix_t *w)
{
    if (w->n < 1 || w->nnz < 0 || w->off[0] != 0 || w->off[w->n] != w->nnz)
        fail("weights: bad shape");
    int negative = 0;
    for (int i = 0; i < w->n; i++) {
        double sum = w->diag[i];
        if (!isfinite(sum))
            fail("weights: a diagonal entry not finite");
        negative |= sum < 0;
        for (long p = w->off[i]; p < w->off[i + 1]; p++) {
            if (w->col[p] < 0 || w->col[p] >= w->n || w->col[p] == i ||
                (p > w->off[i] && w->col[p] <= w->col[p - 1]))
                fail("weights: a column out of range, repeated or unsorted");
            if (!isfinite(w->val[p]))
                fail("weights: an entry not finite");
            negative |= w->val[p] < 0;
            sum += w->val[p];
        }
        if (!(fabs(sum - 1) <= 1e-9))
            fail("weights: a row does not sum to 1");
    }
    for (int i = 0; negative && i < w->n; i++)
        for (long p = w->off[i]; p < w->off[i + 1]; p++)
            if (!(fabs(w->val[p] - mix_at(w, w->col[p], i)) <= 1e-9))
                fail("weights: negative entries in a matrix that is not symmetric");
}

/* Sets the file as the weights of `family`:N; must succeed when `must`. */
static void set_on(const char *family, int n, const char *wspec, int must)
{
    char spec[64];
    snprintf(spec, sizeof spec, "%s:%d", family, n);
    rumor_topo_t *t = NULL;
    if (rumor_topo_parse(spec, &t) < 0)
        return;
    int rc = rumor_topo_set_weights(t, wspec);
    if (rc < 0 && must)
        fail("weights that loaded and lie on the graph's edges were refused");
    if (rc == 0 && (t->scheme != RUMOR_MIX_FILE || t->n != n))
        fail("set_weights: wrong scheme or size");
    rumor_topo_destroy(&t);
}

static void weights_file(const char *path, const char *wspec, const uint8_t *data, size_t size)
{
    long rr = declared_row_rounds(data, size);
    if (rr > MAX_ROW_ROUNDS)
        return;
    rumor_mix_t **w = NULL;
    int period = 0;
    if (rumor_mix_load(path, &w, &period) < 0) {
        if (w || period)
            fail("failed load left matrices");
        return;
    }
    if (period < 1 || !w)
        fail("load without matrices");
    int n = w[0]->n;
    for (int k = 0; k < period; k++) {
        if (w[k]->n != n)
            fail("weights: rounds of different sizes");
        check_mix(w[k]);
    }
    if ((long)n * period <= MAX_ROUND_TRIP) {
        const char *back = fuzz_tmpfile("wback", "");
        rumor_mix_t **w2 = NULL;
        int p2 = 0;
        if (!back || rumor_mix_save(back, w, period, "fuzz") < 0 ||
            rumor_mix_load(back, &w2, &p2) < 0)
            fail("weights written back do not load");
        if (p2 != period)
            fail("weights written back: another period");
        for (int k = 0; k < period; k++)
            if (!same_mix(w[k], w2[k]))
                fail("weights written back differ from the ones read");
        rumor_mix_free_seq(&w2, p2);
    }
    rumor_mix_free_seq(&w, period);
    if (n >= 2 && n <= MAX_SET_PEERS) {
        set_on("complete", n, wspec, 1);
        if (n >= 3)
            set_on("ring", n, wspec, 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    const char *path = fuzz_tmpfile("graph", "");
    if (!path || fuzz_write(path, data, size) < 0)
        abort();
    char spec[4200];
    snprintf(spec, sizeof spec, "file:%s", path);
    rumor_topo_t *t = NULL;
    if (rumor_topo_parse(spec, &t) == 0) {
        if (!t->graph || t->n < 2 || t->period != 1 ||
            rumor_graph_components(t->graph, NULL) != 1)
            fail("a graph file gave a bad topology");
        check_rows(t);
        int before = t->n;
        if (rumor_topo_set_weights(t, spec) == 0 && t->n != before)
            fail("set_weights changed the number of peers");
    } else if (t) {
        fail("failed parse left a topology");
    }
    rumor_topo_destroy(&t);
    weights_file(path, spec, data, size);
    return 0;
}

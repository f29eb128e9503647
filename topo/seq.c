/* Time-varying topologies: the one-peer exponential graph, the directed
 * static exponential graph (both Ying et al. 2021) and the Base-(k+1) graph
 * (Takezawa et al. 2023). Each is a short sequence of sparse mixing
 * matrices that peers cycle through, round k using matrix k mod period.
 *
 * The Base-(k+1) construction here is our own scheduling of the paper's
 * idea (checked in tests/test_topo_spectrum.c: every round has degree <= k
 * and one period multiplies out to exactly 11^T/n):
 *  - write n = sum_l a_l (k+1)^p_l in base k+1 and cut the peers into groups
 *    V_l of those sizes;
 *  - each group averages inside itself with the "k-peer hyper-hypercube":
 *    peers numbered in mixed radix, round r averages the cliques of peers
 *    that differ only in digit r (clique size <= k+1, so degree <= k);
 *  - then, largest group first, one round per group: every peer of the
 *    tail T = V_{>t} (|T| < (k+1)^p_t) links to one peer in each of V_t's a_t
 *    blocks with weight m_t / ((m_t + |T|) a_t). Each block of V_t gets the
 *    same mass, so one hyper-hypercube pass inside the blocks (run while
 *    the later steps go on) leaves V_t at the mean of V_t and T, and the
 *    tail keeps that same mean: by induction everyone ends at the global
 *    average, after about 2 log_{k+1} n + 2 rounds.
 * When n = f r with f made of factors <= k+1, averaging r-blocks first and
 * then across blocks can be shorter; the shorter schedule is kept. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"

/* Off-diagonal entries gathered per round, turned into matrices at the end. */
typedef struct {
    long len, cap;
    int *r, *c;
    double *v;
} rent_t;

typedef struct {
    int n, rounds, cap;
    rent_t *e;
    int err;
} sched_t;

static void put(sched_t *s, int round, int i, int j, double w)
{
    if (s->err)
        return;
    if (round >= s->cap) {
        int cap = s->cap ? s->cap : 8;
        while (cap <= round)
            cap *= 2;
        rent_t *ne = realloc(s->e, (size_t)cap * sizeof *ne);
        if (!ne) {
            s->err = 1;
            return;
        }
        memset(ne + s->cap, 0, (size_t)(cap - s->cap) * sizeof *ne);
        s->e = ne;
        s->cap = cap;
    }
    if (round >= s->rounds)
        s->rounds = round + 1;
    rent_t *e = &s->e[round];
    if (e->len == e->cap) {
        long cap = e->cap ? 2 * e->cap : 64;
        int *nr = realloc(e->r, (size_t)cap * sizeof *nr);
        if (nr)
            e->r = nr;
        int *nc = realloc(e->c, (size_t)cap * sizeof *nc);
        if (nc)
            e->c = nc;
        double *nv = realloc(e->v, (size_t)cap * sizeof *nv);
        if (nv)
            e->v = nv;
        if (!nr || !nc || !nv) {
            s->err = 1;
            return;
        }
        e->cap = cap;
    }
    e->r[e->len] = i;
    e->c[e->len] = j;
    e->v[e->len++] = w;
}

static void sched_free(sched_t *s)
{
    for (int k = 0; k < s->cap; k++) {
        free(s->e[k].r);
        free(s->e[k].c);
        free(s->e[k].v);
    }
    free(s->e);
    memset(s, 0, sizeof *s);
}

/* Builds the matrices; rounds with no entry are the identity. */
static int sched_finish(sched_t *s, rumor_mix_t ***out, int *period)
{
    if (s->err) {
        sched_free(s);
        return rumor_err_set(RUMOR_ENOMEM, "topology sequence: out of memory");
    }
    int rounds = s->rounds ? s->rounds : 1;
    rumor_mix_t **w = calloc((size_t)rounds, sizeof *w);
    if (!w) {
        sched_free(s);
        return rumor_err_set(RUMOR_ENOMEM, "topology sequence: out of memory");
    }
    for (int k = 0; k < rounds; k++) {
        rent_t empty = { 0 }, *e = k < s->cap ? &s->e[k] : &empty;
        int rc = rumor_mix_build(s->n, e->len, e->r, e->c, e->v, NULL, NULL, &w[k]);
        if (rc >= 0)
            rc = rumor_mix_check(w[k], 0, 0);
        if (rc < 0) {
            rumor_mix_free_seq(&w, rounds);
            sched_free(s);
            return rumor_err_prefix(rc, "topology sequence: round %d", k);
        }
    }
    sched_free(s);
    *out = w;
    *period = rounds;
    return 0;
}

int rumor_mix_onepeer_exp(int n, rumor_mix_t ***out, int *period)
{
    *out = NULL;
    if (n < 2 || n > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "onepeer-exp: %d peers is outside [2, %d]", n,
                             RUMOR_TOPO_MAX_NODES);
    sched_t s = { .n = n };
    int r = 0;
    for (long h = 1; h < n; h *= 2, r++)
        for (int i = 0; i < n; i++)
            put(&s, r, i, (int)((i + h) % n), 0.5);
    return sched_finish(&s, out, period);
}

int rumor_mix_exp_directed(int n, rumor_mix_t ***out, int *period)
{
    *out = NULL;
    if (n < 2 || n > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "exp: %d peers is outside [2, %d]", n,
                             RUMOR_TOPO_MAX_NODES);
    int tau = 0;
    while ((1L << tau) < n)
        tau++;
    sched_t s = { .n = n };
    for (long h = 1; h < n; h *= 2)
        for (int i = 0; i < n; i++)
            put(&s, 0, i, (int)((i + h) % n), 1.0 / (tau + 1));
    return sched_finish(&s, out, period);
}

/* Rounds of the hyper-hypercube on ids[0..m) with the given radix list,
 * starting at round `start`; returns the round after the last. Peers are
 * ids[x] for x in mixed radix f[0], f[1], ... */
static int hhc(sched_t *s, const int *ids, long stride_ids, int m, const int *f, int nf,
               int start)
{
    long stride = 1;
    for (int r = 0; r < nf; r++) {
        for (long x = 0; x < m; x++) {
            if ((x / stride) % f[r])
                continue; /* not the clique's first member */
            for (int a = 0; a < f[r]; a++)
                for (int b = 0; b < f[r]; b++)
                    if (a != b)
                        put(s, start + r, ids[(x + a * stride) * stride_ids],
                            ids[(x + b * stride) * stride_ids], 1.0 / f[r]);
        }
        stride *= f[r];
    }
    return start + nf;
}

/* Factors m into radices <= b, largest first; returns how many, or -1 when
 * m has a prime factor above b. */
static int factor(long m, int b, int *f)
{
    int nf = 0;
    for (int q = b; q >= 2 && m > 1; q--)
        while (m % q == 0) {
            f[nf++] = q;
            m /= q;
        }
    return m == 1 ? nf : -1;
}

/* Simple Base-(k+1) on ids[0..m) (step stride_ids), from round `start`;
 * returns the round after the last. */
static int simple_base(sched_t *s, const int *ids, long sid, int m, int k, int start)
{
    int b = k + 1, f[64];
    if (m <= 1)
        return start;
    int nf = factor(m, b, f);
    if (nf >= 0)
        return hhc(s, ids, sid, m, f, nf, start);
    /* base-b digits, most significant first: groups V_1 (largest) ... V_L */
    int L = 0, a[64], p[64];
    long pw = 1;
    int e = 0;
    while (pw * b <= m) {
        pw *= b;
        e++;
    }
    for (long rest = m; rest > 0; pw /= b, e--)
        if (rest >= pw) {
            a[L] = (int)(rest / pw);
            p[L++] = e;
            rest %= pw;
        }
    long first[64];
    int ready[64] = { 0 };
    first[0] = 0;
    for (int l = 0; l < L; l++) {
        long size = (long)a[l] * (long)pow(b, p[l]);
        first[l + 1] = first[l] + size;
        int g[64], ng = 0;
        for (int t = 0; t < p[l]; t++)
            g[ng++] = b;
        if (a[l] > 1)
            g[ng++] = a[l];
        ready[l] = hhc(s, ids + first[l] * sid, sid, (int)size, g, ng, start);
    }
    /* Merge step t (largest group first, one round each): every peer of the
     * tail V_{>t} links to one peer in each of V_t's a_t blocks. Then V_t
     * re-averages inside its blocks while later steps go on, since they
     * no longer touch V_t. */
    int r = ready[0], end = ready[0];
    for (int l = 1; l < L; l++)
        r = ready[l] > r ? ready[l] : r;
    for (int t = 0; t + 1 < L; t++, r++) {
        int at = a[t], blk = (int)pow(b, p[t]), g[64];
        long mt = (long)at * blk, ts = first[L] - first[t + 1];
        double beta = (double)mt / (double)(mt + ts) / at;
        for (long q = 0; q < ts; q++)
            for (int c = 0; c < at; c++) {
                int ti = ids[(first[t + 1] + q) * sid];
                int vi = ids[(first[t] + (long)c * blk + q) * sid];
                put(s, r, ti, vi, beta);
                put(s, r, vi, ti, beta);
            }
        for (int t2 = 0; t2 < p[t]; t2++)
            g[t2] = b;
        for (int c = 0; c < at; c++) {
            int e2 = hhc(s, ids + (first[t] + (long)c * blk) * sid, sid, blk, g, p[t], r + 1);
            end = e2 > end ? e2 : end;
        }
        end = r + 1 > end ? r + 1 : end;
    }
    return end;
}

int rumor_mix_base(int n, int k, rumor_mix_t ***out, int *period)
{
    *out = NULL;
    if (n < 2 || n > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "base: %d peers is outside [2, %d]", n,
                             RUMOR_TOPO_MAX_NODES);
    if (k < 1 || k >= n)
        return rumor_err_set(RUMOR_EINVAL, "base: degree k = %d is outside [1, %d]", k, n - 1);
    int *ids = malloc((size_t)n * sizeof *ids);
    if (!ids)
        return rumor_err_set(RUMOR_ENOMEM, "base: out of memory");
    for (int i = 0; i < n; i++)
        ids[i] = i;
    /* plan A: simple Base-(k+1) on all n */
    sched_t a = { .n = n };
    simple_base(&a, ids, 1, n, k, 0);
    /* plan B: n = f r, f the (k+1)-smooth part: r-blocks, then across */
    long f = 1, r = n;
    for (int q = 2; q <= k + 1; q++)
        while (r % q == 0) {
            r /= q;
            f *= q;
        }
    if (f > 1 && r > 1 && !a.err) {
        sched_t bs = { .n = n };
        int end = 0, fl[64];
        for (long blk = 0; blk < f; blk++)
            end = simple_base(&bs, ids + blk * r, 1, (int)r, k, 0);
        int nf = factor(f, k + 1, fl);
        int end2 = end;
        for (long j = 0; j < r; j++)
            end2 = hhc(&bs, ids + j, r, (int)f, fl, nf, end);
        if (!bs.err && end2 < a.rounds) {
            sched_free(&a);
            a = bs;
        } else {
            sched_free(&bs);
        }
    }
    free(ids);
    return sched_finish(&a, out, period);
}

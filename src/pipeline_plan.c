/* Cutting a model into pipeline stages: partition specs, profiling the
 * blocks on the stages' devices, and the planner that chooses the cuts.
 * See pipeline.h. */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

int rumor_pipeline_partition(const rumor_model_t *m, const char *spec, int S, int *cuts)
{
    int nb = m->nblocks;
    if (S < 1 || S > nb)
        return rumor_err_set(RUMOR_EINVAL, "--partition: %d stages for a model of %d blocks", S,
                             nb);
    if (!spec || !strcmp(spec, "uniform")) {
        for (int s = 0; s <= S; s++)
            cuts[s] = (int)((long)s * nb / S);
        return 0;
    }
    if (!strcmp(spec, "profile"))
        return rumor_err_set(RUMOR_EINVAL, "--partition profile: measured on the devices "
                             "(rumor_pipeline_profile), not computed from the model alone");
    if (!strcmp(spec, "params")) {
        /* cut s at the block boundary whose parameters before it come
         * nearest s / S of the whole, leaving every stage a block */
        double total = (double)m->nparams;
        cuts[0] = 0;
        for (int s = 1; s < S; s++) {
            double want = total * s / S, best = -1;
            for (int c = cuts[s - 1] + 1; c <= nb - (S - s); c++) {
                double have = (double)m->blocks[c - 1].hi; /* parameters before block c */
                double dist = have > want ? have - want : want - have;
                if (best < 0 || dist < best) {
                    best = dist;
                    cuts[s] = c;
                }
            }
        }
        cuts[S] = nb;
        return 0;
    }
    /* "a-b,c,d-e": ranges of blocks in order */
    const char *q = spec;
    int s = 0, next = 0;
    while (*q) {
        char *end;
        long lo = strtol(q, &end, 10), hi = lo;
        if (end == q)
            return rumor_err_set(RUMOR_EINVAL, "--partition '%s': expected uniform, params or "
                                 "block ranges like 0-3,4-7 (at offset %d)", spec, (int)(q - spec));
        q = end;
        if (*q == '-') {
            hi = strtol(q + 1, &end, 10);
            if (end == q + 1)
                return rumor_err_set(RUMOR_EINVAL, "--partition '%s': a range without its end "
                                     "(at offset %d)", spec, (int)(q - spec));
            q = end;
        }
        if (lo != next || hi < lo || hi >= nb)
            return rumor_err_set(RUMOR_EINVAL, "--partition '%s': stage %d is blocks %ld-%ld; "
                                 "it must start at block %d and end before %d", spec, s, lo, hi,
                                 next, nb);
        if (s == S)
            return rumor_err_set(RUMOR_EINVAL, "--partition '%s': more than %d stages", spec, S);
        cuts[s++] = (int)lo;
        next = (int)hi + 1;
        if (*q == ',')
            q++;
        else if (*q)
            return rumor_err_set(RUMOR_EINVAL, "--partition '%s': unexpected '%c' at offset %d",
                                 spec, *q, (int)(q - spec));
    }
    if (s != S || next != nb)
        return rumor_err_set(RUMOR_EINVAL, "--partition '%s': %d stage%s covering blocks 0-%d; "
                             "the pipeline has %d stages and the model %d blocks", spec, s,
                             s == 1 ? "" : "s", next - 1, S, nb);
    cuts[S] = nb;
    return 0;
}

/* ------------------------------------------------------------ profile */

/* Seconds of F + B + W of block k alone on dev, micro-batches of `rows` of
 * batch b (the first rows): the best of three after one warm-up. */
static int time_block(const rumor_model_t *m, int k, rumor_device_t *dev, const rumor_batch_t *b,
                      int rows, int T, uint64_t seed, double *secs)
{
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = k, .last = k + 1, .max_B = rows,
                                .T = T, .slots = 1, .seed = seed };
    rumor_stage_t *st = NULL;
    RUMOR_CHECK(rumor_stage_create(&sc, &st));
    const rumor_block_t *blk = &m->blocks[k];
    size_t nin = (size_t)rows * T * (size_t)(blk->in_width > 0 ? blk->in_width : 1);
    size_t nout = (size_t)rows * T * (size_t)blk->out_width;
    float *in = NULL, *dy = NULL, *host = malloc((nin > nout ? nin : nout) * sizeof *host);
    int rc = host ? 0 : rumor_err_set(RUMOR_ENOMEM, "profile: out of memory");
    /* inputs and output gradients of a plausible size: small values */
    for (size_t i = 0; rc == 0 && i < (nin > nout ? nin : nout); i++)
        host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    if (rc == 0 && k > 0) {
        in = dev->ops->alloc(dev, nin * sizeof *in);
        rc = in ? dev->ops->upload(dev, in, host, nin * sizeof *in)
                : rumor_err_set(RUMOR_ENOMEM, "profile: out of memory");
    }
    if (rc == 0 && k < m->nblocks - 1) {
        dy = dev->ops->alloc(dev, nout * sizeof *dy);
        rc = dy ? dev->ops->upload(dev, dy, host, nout * sizeof *dy)
                : rumor_err_set(RUMOR_ENOMEM, "profile: out of memory");
    }
    double best = -1;
    for (int r = 0; rc == 0 && r < 4; r++) {
        double t0 = rumor_now();
        rc = rumor_stage_load(st, 0, b, 0, rows);
        if (rc == 0)
            rc = rumor_stage_forward(st, 0, in, 1, r, 0);
        if (rc == 0)
            rc = rumor_stage_backward_b(st, 0, dy, 1.0f / (float)(rows * T));
        if (rc == 0)
            rc = rumor_stage_backward_w(st, 0);
        if (rc == 0)
            rc = dev->ops->sync(dev);
        double t = rumor_now() - t0;
        if (r > 0 && (best < 0 || t < best))
            best = t;
    }
    if (in)
        dev->ops->free(dev, in);
    if (dy)
        dev->ops->free(dev, dy);
    free(host);
    rumor_stage_destroy(&st);
    *secs = best;
    return rc;
}

int rumor_pipeline_profile(const rumor_model_t *m, rumor_device_t **devs, int P,
                           const int *dev_of, int S, const rumor_batch_t *b, int M, int T,
                           uint64_t seed, int *cuts, double *stage_s)
{
    int nb = m->nblocks;
    if (S > nb)
        return rumor_err_set(RUMOR_EINVAL, "--partition profile: %d stages for a model of %d "
                             "blocks", S, nb);
    int rows = b->n / M > 0 ? b->n / M : 1;
    /* each block on each distinct device */
    double *cost = calloc((size_t)P * nb, sizeof *cost), *xfer = calloc((size_t)nb, sizeof *xfer);
    int rc = cost && xfer ? 0 : rumor_err_set(RUMOR_ENOMEM, "profile: out of memory");
    for (int d = 0; rc == 0 && d < P; d++) {
        int same = -1;
        for (int e = 0; e < d && same < 0; e++)
            if (devs[e] == devs[d])
                same = e;
        for (int k = 0; rc == 0 && k < nb; k++) {
            if (same >= 0)
                cost[(size_t)d * nb + k] = cost[(size_t)same * nb + k];
            else
                rc = time_block(m, k, devs[d], b, rows, T, seed, &cost[(size_t)d * nb + k]);
        }
    }
    /* moving an activation and its gradient between stages: two copies of
     * rows x T x width floats, at the copy rate measured here */
    double copy_s = 0;
    if (rc == 0) {
        size_t n = 1 << 22;
        float *a = malloc(n * sizeof *a), *z = malloc(n * sizeof *z);
        if (a && z) {
            memset(a, 1, n * sizeof *a);
            double t0 = rumor_now();
            memcpy(z, a, n * sizeof *a);
            copy_s = (rumor_now() - t0) / (double)(n * sizeof *a);
        }
        free(a);
        free(z);
    }
    for (int k = 0; rc == 0 && k < nb; k++)
        xfer[k] = 2.0 * copy_s * (double)rows * T * m->blocks[k].out_width * sizeof(float);
    if (rc == 0)
        rc = rumor_pipeline_plan(cost, xfer, nb, P, dev_of, S, M, cuts, stage_s);
    free(cost);
    free(xfer);
    return rc < 0 ? rumor_err_trace_add(__FILE__, __LINE__, rc) : 0;
}

int rumor_pipeline_plan(const double *cost, const double *xfer, int nb, int P, const int *dev_of,
                        int S, int M, int *cuts, double *stage_s)
{
    if (S < 1 || S > nb || M < 1)
        return rumor_err_set(RUMOR_EINVAL, "plan: %d stages for %d blocks, %d micro-batches", S,
                             nb, M);
    for (int s = 0; s < S; s++)
        if (dev_of[s] < 0 || dev_of[s] >= P)
            return rumor_err_set(RUMOR_EINVAL, "plan: stage %d on device %d of %d", s,
                                 dev_of[s], P);
    /* best[s][j]: the least slowest-stage time of blocks [0, j) in s stages;
     * stage s - 1 runs on device dev_of[s - 1]: its blocks' time there for M
     * micro-batches, plus moving its output on (all but the last) */
    double *best = malloc((size_t)(S + 1) * (nb + 1) * sizeof *best);
    int *from = malloc((size_t)(S + 1) * (nb + 1) * sizeof *from);
    if (!best || !from) {
        free(best);
        free(from);
        return rumor_err_set(RUMOR_ENOMEM, "plan: out of memory");
    }
#define AT(s, j) ((size_t)(s) * (nb + 1) + (j))
    for (int s = 0; s <= S; s++)
        for (int j = 0; j <= nb; j++)
            best[AT(s, j)] = s == 0 && j == 0 ? 0.0 : -1.0;
    for (int s = 1; s <= S; s++) {
        int d = dev_of[s - 1];
        for (int j = s; j <= nb - (S - s); j++)
            for (int i = s - 1; i < j; i++) {
                if (best[AT(s - 1, i)] < 0)
                    continue;
                double t = 0;
                for (int k = i; k < j; k++)
                    t += cost[(size_t)d * nb + k];
                t *= M;
                if (s < S)
                    t += M * xfer[j - 1];
                double v = t > best[AT(s - 1, i)] ? t : best[AT(s - 1, i)];
                if (best[AT(s, j)] < 0 || v < best[AT(s, j)]) {
                    best[AT(s, j)] = v;
                    from[AT(s, j)] = i;
                }
            }
    }
    cuts[S] = nb;
    for (int s = S; s > 0; s--)
        cuts[s - 1] = from[AT(s, cuts[s])];
#undef AT
    for (int s = 0; stage_s && s < S; s++) {
        double t = 0;
        for (int k = cuts[s]; k < cuts[s + 1]; k++)
            t += cost[(size_t)dev_of[s] * nb + k];
        stage_s[s] = t * M + (s < S - 1 ? M * xfer[cuts[s + 1] - 1] : 0.0);
    }
    free(best);
    free(from);
    return 0;
}

/* What a pipeline step measured: the bubble, the bubble its lists leave at
 * the measured costs, re-planning zero-bubble lists for them, and the
 * step's actions in a trace. See pipeline.h. */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "pipeline_int.h"

double rumor_pipeline_bubble(const rumor_pipeline_t *p)
{
    double busy = 0;
    for (int d = 0; d < p->P; d++)
        busy += p->busy_s[d];
    return p->step_s > 0 ? 1.0 - busy / ((double)p->P * p->step_s) : 0.0;
}

/* Each stage's mean F, B and W seconds in the last step (S x 3, malloc'd). */
static int measured_costs(const rumor_pipeline_t *p, double **out)
{
    size_t n = (size_t)p->S * 3;
    double *cost = calloc(n, sizeof *cost), *cnt = calloc(n, sizeof *cnt);
    *out = NULL;
    if (!cost || !cnt) {
        free(cost);
        free(cnt);
        return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
    }
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->sched->n[d]; i++) {
            const rumor_action_t *a = &p->sched->acts[d][i];
            int s = rumor_schedule_stage(p->sched, d, a->chunk);
            double t = p->ev[d][2 * i + 1] - p->ev[d][2 * i];
            if (a->kind == RUMOR_ACT_BW) { /* split as B = W: only their sum counts */
                cost[s * 3 + 1] += t / 2, cost[s * 3 + 2] += t / 2;
                cnt[s * 3 + 1] += 1, cnt[s * 3 + 2] += 1;
            } else {
                cost[s * 3 + a->kind] += t;
                cnt[s * 3 + a->kind] += 1;
            }
        }
    for (size_t k = 0; k < n; k++)
        cost[k] = cnt[k] > 0 ? cost[k] / cnt[k] : 0.0;
    free(cnt);
    *out = cost;
    return 0;
}

int rumor_pipeline_expected_bubble(const rumor_pipeline_t *p, double *bubble)
{
    double *cost, mk;
    RUMOR_CHECK(measured_costs(p, &cost));
    int rc = rumor_schedule_simulate(p->sched, cost, &mk, bubble);
    free(cost);
    return rc;
}

int rumor_pipeline_replan(rumor_pipeline_t *p, const double *given, double *before,
                          double *after)
{
    double *cost = NULL, mk;
    rumor_schedule_t *ns = NULL;
    if (given) {
        if (!(cost = malloc((size_t)p->S * 3 * sizeof *cost)))
            return rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
        memcpy(cost, given, (size_t)p->S * 3 * sizeof *cost);
    } else {
        RUMOR_CHECK(measured_costs(p, &cost));
    }
    int rc = rumor_schedule_simulate(p->sched, cost, &mk, before);
    if (rc == 0)
        rc = rumor_schedule_build_costed(p->sched->name, p->P, p->M, p->cfg.model->nblocks, cost,
                                         &ns);
    if (rc == 0)
        rc = rumor_schedule_simulate(ns, cost, &mk, after);
    free(cost);
    if (rc < 0 || *after >= *before - 1e-3) { /* no better: keep the lists */
        if (rc == 0)
            *after = *before;
        rumor_schedule_destroy(&ns);
        return rc < 0 ? rumor_err_trace_add(__FILE__, __LINE__, rc) : 0;
    }
    /* the new lists' slots, waits and times */
    struct pipeline_run *r = p->run;
    for (int s = 0; rc == 0 && s < p->S; s++) {
        rc = rumor_stage_grow_slots(p->st[s], ns->peak_stage[s]);
        int *pool = rc == 0 ? realloc(r->pool[s], (size_t)p->st[s]->nslots * sizeof *pool) : NULL;
        if (rc == 0 && !pool)
            rc = rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
        if (pool)
            r->pool[s] = pool;
    }
    for (int d = 0; rc == 0 && d < p->P; d++) {
        uint8_t *e = realloc(r->early[d], (size_t)ns->n[d] + 1);
        double *ev = realloc(p->ev[d], (2 * (size_t)ns->n[d] + 1) * sizeof *ev);
        if (e)
            r->early[d] = e;
        if (ev)
            p->ev[d] = ev;
        if (!e || !ev)
            rc = rumor_err_set(RUMOR_ENOMEM, "pipeline: out of memory");
        else
            memset(ev, 0, (2 * (size_t)ns->n[d] + 1) * sizeof *ev);
    }
    if (rc < 0) {
        rumor_schedule_destroy(&ns);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    rumor_schedule_destroy(&p->sched);
    p->sched = ns;
    return 1;
}

void rumor_pipeline_trace_rows(const rumor_pipeline_t *p, rumor_trace_t *t)
{
    for (int d = 0; d < p->P; d++) {
        char name[160];
        size_t bytes = 0; /* its stages' peak memory: a step allocates none */
        for (int s = 0; s < p->S; s++)
            if (rumor_schedule_device(p->sched, s, NULL) == d)
                bytes += rumor_stage_device_bytes(p->st[s]);
        snprintf(name, sizeof name, "device %d: %s, stages' peak memory %.1f MiB", d,
                 p->dev[d]->name, (double)bytes / (1 << 20));
        rumor_trace_row(t, d, name);
    }
}

void rumor_pipeline_trace(const rumor_pipeline_t *p, rumor_trace_t *t, long step)
{
    static const char *kinds[] = { "F", "B", "W", "BW" };
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->sched->n[d]; i++) {
            const rumor_action_t *a = &p->sched->acts[d][i];
            char name[16], args[96];
            snprintf(name, sizeof name, "%s%d%s", kinds[a->kind], a->micro,
                     p->V > 1 ? (char[2]){ (char)('a' + a->chunk), 0 } : "");
            snprintf(args, sizeof args, "\"stage\":%d,\"micro\":%d,\"step\":%ld",
                     rumor_schedule_stage(p->sched, d, a->chunk), a->micro, step);
            rumor_trace_span(t, d, name, kinds[a->kind], p->t0 + p->ev[d][2 * i],
                             p->t0 + p->ev[d][2 * i + 1], args);
        }
    /* rumor_pipeline_grads_step: each stage's wait for its range of the
     * mix, and its optimizer step, on its device's row */
    for (int s = 0; s < p->S; s++) {
        if (p->fin[s][2] <= 0)
            continue;
        int d = rumor_schedule_device(p->sched, s, NULL);
        char name[32], args[64];
        snprintf(args, sizeof args, "\"stage\":%d,\"step\":%ld", s, step);
        if (p->fin[s][1] > p->fin[s][0]) {
            snprintf(name, sizeof name, "wait for mix %d", s);
            rumor_trace_span(t, d, name, "gossip", p->t0 + p->fin[s][0], p->t0 + p->fin[s][1],
                             args);
        }
        snprintf(name, sizeof name, "step %d", s);
        rumor_trace_span(t, d, name, "optimizer", p->t0 + p->fin[s][1], p->t0 + p->fin[s][2],
                         args);
    }
}

int rumor_pipeline_stepped(const rumor_pipeline_t *p)
{
    for (int s = 0; s < p->S; s++)
        if (p->fin[s][2] <= 0)
            return 0;
    return 1;
}

/* Pipeline schedules: generators, validation by simulation, timelines (see
 * schedule.h). */
#include "schedule.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const act_name[] = { "F", "B", "W", "BW" };

int rumor_schedule_parse(const char *spec, rumor_sched_kind *kind, int *V)
{
    *V = 1;
    if (!spec)
        return rumor_err_set(RUMOR_EINVAL, "--schedule: missing");
    if (!strcmp(spec, "gpipe"))
        *kind = RUMOR_SCHED_GPIPE;
    else if (!strcmp(spec, "1f1b"))
        *kind = RUMOR_SCHED_1F1B;
    else if (!strcmp(spec, "zb-h1"))
        *kind = RUMOR_SCHED_ZBH1;
    else if (!strcmp(spec, "zbv")) {
        *kind = RUMOR_SCHED_ZBV;
        *V = 2;
    }
    else if (!strncmp(spec, "interleaved", 11) && (spec[11] == '\0' || spec[11] == ':')) {
        *kind = RUMOR_SCHED_INTERLEAVED;
        *V = 2;
        if (spec[11] == ':') {
            char *end;
            long v = strtol(spec + 12, &end, 10);
            if (end == spec + 12 || *end || v < 2 || v > RUMOR_SCHED_MAX_CHUNKS)
                return rumor_err_set(RUMOR_EINVAL, "--schedule %s: V (chunks a device) must be "
                                     "an integer in [2, %d]", spec, RUMOR_SCHED_MAX_CHUNKS);
            *V = (int)v;
        }
    } else {
        return rumor_err_set(RUMOR_EINVAL, "--schedule '%s': unknown; expected gpipe, 1f1b, "
                             "interleaved[:V], zb-h1 or zbv", spec);
    }
    return 0;
}

void rumor_schedule_destroy(rumor_schedule_t **sp)
{
    if (!sp || !*sp)
        return;
    rumor_schedule_t *s = *sp;
    for (int d = 0; s->acts && d < s->P; d++)
        free(s->acts[d]);
    free(s->acts);
    free(s->n);
    free(s->busy);
    free(s->peak);
    free(s->peak_stage);
    free(s);
    *sp = NULL;
}

int rumor_schedule_create(int P, int V, int M, int cap, rumor_schedule_t **out)
{
    *out = NULL;
    if (P < 1 || P > RUMOR_SCHED_MAX_DEVICES || V < 1 || V > RUMOR_SCHED_MAX_CHUNKS || M < 1 ||
        M > RUMOR_SCHED_MAX_MICRO || cap < 1)
        return rumor_err_set(RUMOR_EINVAL, "schedule: %d devices (1 to %d), %d chunks (1 to %d) "
                             "or %d micro-batches (1 to %d) out of range", P,
                             RUMOR_SCHED_MAX_DEVICES, V, RUMOR_SCHED_MAX_CHUNKS, M,
                             RUMOR_SCHED_MAX_MICRO);
    rumor_schedule_t *s = calloc(1, sizeof *s);
    if (!s)
        return rumor_err_set(RUMOR_ENOMEM, "schedule: out of memory");
    s->kind = RUMOR_SCHED_CUSTOM;
    snprintf(s->name, sizeof s->name, "custom");
    s->P = P;
    s->V = V;
    s->M = M;
    s->S = P * V;
    s->n = calloc((size_t)P, sizeof *s->n);
    s->acts = calloc((size_t)P, sizeof *s->acts);
    s->busy = calloc((size_t)P, sizeof *s->busy);
    s->peak = calloc((size_t)P, sizeof *s->peak);
    s->peak_stage = calloc((size_t)s->S, sizeof *s->peak_stage);
    int ok = s->n && s->acts && s->busy && s->peak && s->peak_stage;
    for (int d = 0; ok && d < P; d++)
        ok = (s->acts[d] = calloc((size_t)cap, sizeof **s->acts)) != NULL;
    if (!ok) {
        rumor_schedule_destroy(&s);
        return rumor_err_set(RUMOR_ENOMEM, "schedule: out of memory");
    }
    *out = s;
    return 0;
}

int rumor_schedule_stage(const rumor_schedule_t *s, int d, int chunk)
{
    return s->vshape && chunk == 1 ? 2 * s->P - 1 - d : chunk * s->P + d;
}

int rumor_schedule_device(const rumor_schedule_t *s, int st, int *chunk)
{
    int c = st / s->P, d = st % s->P;
    if (s->vshape && c == 1)
        d = s->P - 1 - d;
    if (chunk)
        *chunk = c;
    return d;
}

void rumor_schedule_placement(rumor_sched_kind kind, int P, int V, int *dev_of)
{
    for (int st = 0; st < P * V; st++)
        dev_of[st] = kind == RUMOR_SCHED_ZBV && st >= P ? 2 * P - 1 - st : st % P;
}

static void push(rumor_schedule_t *s, int d, rumor_act_kind k, int chunk, int micro)
{
    rumor_action_t *a = &s->acts[d][s->n[d]++];
    a->kind = (uint8_t)k;
    a->chunk = (uint8_t)chunk;
    a->micro = (uint16_t)micro;
    a->start = -1;
}

/* ------------------------------------------------------------ validation */

/* Finish times of F, B and W per (stage, micro-batch); -1: not yet run. */
struct sim {
    int S, M;
    double *fin[3];
};

static double *fin_of(struct sim *x, int k, int stage, int micro)
{
    return &x->fin[k][(size_t)stage * x->M + micro];
}

/* Whether action a of device d can run: its inputs' finish time in *ready
 * (0 when none), else 0 with what it waits for in why. */
static int deps_done(const rumor_schedule_t *s, struct sim *x, int d, const rumor_action_t *a,
                     double *ready, char *why, size_t cap)
{
    int st = rumor_schedule_stage(s, d, a->chunk), m = a->micro;
    double t = 0;
    const char *need = NULL;
    int need_stage = -1;
    if (a->kind == RUMOR_ACT_F) {
        if (st > 0 && *fin_of(x, 0, st - 1, m) < 0)
            need = "F", need_stage = st - 1;
        else if (st > 0)
            t = *fin_of(x, 0, st - 1, m);
    } else if (a->kind == RUMOR_ACT_B || a->kind == RUMOR_ACT_BW) {
        if (*fin_of(x, 0, st, m) < 0)
            need = "F", need_stage = st;
        else if (st < s->S - 1 && *fin_of(x, 1, st + 1, m) < 0)
            need = "B", need_stage = st + 1;
        else {
            t = *fin_of(x, 0, st, m);
            if (st < s->S - 1 && *fin_of(x, 1, st + 1, m) > t)
                t = *fin_of(x, 1, st + 1, m);
        }
    } else { /* W */
        if (*fin_of(x, 1, st, m) < 0)
            need = "B", need_stage = st;
        else
            t = *fin_of(x, 1, st, m);
    }
    if (need) {
        snprintf(why, cap, "device %d waits at %s of stage %d micro-batch %d for %s of stage %d "
                 "(device %d)", d, act_name[a->kind], st, m, need, need_stage,
                 rumor_schedule_device(s, need_stage, NULL));
        return 0;
    }
    *ready = t;
    return 1;
}

static int check_counts(const rumor_schedule_t *s)
{
    size_t cells = (size_t)s->S * s->M;
    int *cnt = calloc(cells * 4, sizeof *cnt);
    int *pos = malloc(cells * 3 * sizeof *pos); /* list position of F, B, W */
    if (!cnt || !pos) {
        free(cnt), free(pos);
        return rumor_err_set(RUMOR_ENOMEM, "schedule: out of memory");
    }
    int rc = 0;
    for (int d = 0; rc == 0 && d < s->P; d++)
        for (int i = 0; rc == 0 && i < s->n[d]; i++) {
            const rumor_action_t *a = &s->acts[d][i];
            if (a->kind > RUMOR_ACT_BW || a->chunk >= s->V || a->micro >= s->M) {
                rc = rumor_err_set(RUMOR_EINVAL, "device %d, action %d: kind %d, chunk %d or "
                                   "micro-batch %d out of range", d, i, a->kind, a->chunk,
                                   a->micro);
                break;
            }
            int st = rumor_schedule_stage(s, d, a->chunk);
            size_t c = (size_t)st * s->M + a->micro;
            if (++cnt[c * 4 + a->kind] > 1) {
                rc = rumor_err_set(RUMOR_EINVAL, "device %d: %s of stage %d micro-batch %d "
                                   "appears twice", d, act_name[a->kind], st, a->micro);
                break;
            }
            int k = a->kind == RUMOR_ACT_BW ? 1 : a->kind;
            pos[c * 3 + k] = i;
            /* order on the device: B after its F, W after its B */
            if ((a->kind == RUMOR_ACT_B || a->kind == RUMOR_ACT_BW) && !cnt[c * 4 + RUMOR_ACT_F])
                rc = rumor_err_set(RUMOR_EINVAL, "device %d: %s of stage %d micro-batch %d "
                                   "before its F", d, act_name[a->kind], st, a->micro);
            else if (a->kind == RUMOR_ACT_W && !cnt[c * 4 + RUMOR_ACT_B])
                rc = rumor_err_set(RUMOR_EINVAL, "device %d: W of stage %d micro-batch %d "
                                   "before its B", d, st, a->micro);
        }
    for (size_t c = 0; rc == 0 && c < cells; c++) {
        int st = (int)(c / (size_t)s->M), m = (int)(c % (size_t)s->M), *n = &cnt[c * 4];
        const char *miss = !n[RUMOR_ACT_F] ? "F"
                           : n[RUMOR_ACT_BW] && (n[RUMOR_ACT_B] || n[RUMOR_ACT_W]) ? NULL
                           : n[RUMOR_ACT_BW] ? ""
                           : !n[RUMOR_ACT_B] && !n[RUMOR_ACT_W] ? "backward (BW, or B and W)"
                           : !n[RUMOR_ACT_B] ? "B"
                           : !n[RUMOR_ACT_W] ? "W" : "";
        if (!miss)
            rc = rumor_err_set(RUMOR_EINVAL, "device %d: stage %d micro-batch %d has both BW "
                               "and a split backward", rumor_schedule_device(s, st, NULL), st, m);
        else if (*miss)
            rc = rumor_err_set(RUMOR_EINVAL, "device %d lists no %s of stage %d micro-batch %d",
                               rumor_schedule_device(s, st, NULL), miss, st, m);
    }
    free(cnt);
    free(pos);
    return rc;
}

/* Runs s's lists in order, each action as soon as its device is free and
 * its inputs are done, with cost[st * 3 + k] the seconds of kind k (F, B,
 * W) on stage st (BW: B + W), or unit costs (NULL). Fills *makespan and
 * busy (P); with starts, each action's start. RUMOR_EINVAL names the waits
 * of a deadlock. */
static int simulate(rumor_schedule_t *s, const double *cost, int starts, double *makespan,
                    double *busy)
{
    size_t cells = (size_t)s->S * s->M;
    struct sim x = { s->S, s->M, { NULL, NULL, NULL } };
    int *ptr = calloc((size_t)s->P, sizeof *ptr);
    double *free_at = calloc((size_t)s->P, sizeof *free_at);
    int ok = ptr && free_at;
    for (int k = 0; ok && k < 3; k++) {
        ok = (x.fin[k] = malloc(cells * sizeof(double))) != NULL;
        for (size_t c = 0; ok && c < cells; c++)
            x.fin[k][c] = -1;
    }
    int rc = ok ? 0 : rumor_err_set(RUMOR_ENOMEM, "schedule: out of memory");
    long left = 0;
    for (int d = 0; d < s->P; d++) {
        left += s->n[d];
        busy[d] = 0;
    }
    char why[256];
    while (rc == 0 && left > 0) {
        int moved = 0;
        for (int d = 0; d < s->P; d++)
            while (ptr[d] < s->n[d]) {
                rumor_action_t *a = &s->acts[d][ptr[d]];
                double ready;
                if (!deps_done(s, &x, d, a, &ready, why, sizeof why))
                    break;
                int st = rumor_schedule_stage(s, d, a->chunk);
                double start = ready > free_at[d] ? ready : free_at[d], dur;
                if (!cost)
                    dur = a->kind == RUMOR_ACT_BW ? 2 : 1;
                else if (a->kind == RUMOR_ACT_BW)
                    dur = cost[st * 3 + 1] + cost[st * 3 + 2];
                else
                    dur = cost[st * 3 + a->kind];
                if (starts)
                    a->start = (int32_t)start;
                free_at[d] = start + dur;
                busy[d] += dur;
                if (a->kind == RUMOR_ACT_BW) {
                    *fin_of(&x, 1, st, a->micro) = start + dur;
                    *fin_of(&x, 2, st, a->micro) = start + dur;
                } else {
                    *fin_of(&x, a->kind, st, a->micro) = start + dur;
                }
                ptr[d]++;
                left--;
                moved = 1;
            }
        if (!moved) {
            /* every device with work left waits: name each one's wait */
            char msg[1024] = "";
            size_t at = 0;
            for (int d = 0; d < s->P && at < sizeof msg; d++)
                if (ptr[d] < s->n[d]) {
                    double ready;
                    deps_done(s, &x, d, &s->acts[d][ptr[d]], &ready, why, sizeof why);
                    at += (size_t)snprintf(msg + at, sizeof msg - at, "%s%s", at ? "; " : "", why);
                }
            rc = rumor_err_set(RUMOR_EINVAL, "deadlock: %s", msg);
        }
    }
    *makespan = 0;
    for (int d = 0; rc == 0 && d < s->P; d++)
        if (free_at[d] > *makespan)
            *makespan = free_at[d];
    free(ptr);
    free(free_at);
    for (int k = 0; k < 3; k++)
        free(x.fin[k]);
    return rc;
}

int rumor_schedule_validate(rumor_schedule_t *s)
{
    RUMOR_CHECK(check_counts(s));
    double mk, busy[RUMOR_SCHED_MAX_DEVICES];
    RUMOR_CHECK(simulate(s, NULL, 1, &mk, busy));
    s->makespan = (int)mk;
    long total = 0;
    for (int st = 0; st < s->S; st++)
        s->peak_stage[st] = 0;
    for (int d = 0; d < s->P; d++) {
        s->busy[d] = (int)busy[d];
        s->peak[d] = 0;
        total += s->busy[d];
        /* live activations: a micro-batch's chunk from its F to its W */
        int live = 0, lc[RUMOR_SCHED_MAX_CHUNKS] = { 0 };
        for (int i = 0; i < s->n[d]; i++) {
            const rumor_action_t *a = &s->acts[d][i];
            int k = a->kind, st = rumor_schedule_stage(s, d, a->chunk);
            int dl = k == RUMOR_ACT_F ? 1 : k == RUMOR_ACT_W || k == RUMOR_ACT_BW ? -1 : 0;
            live += dl;
            lc[a->chunk] += dl;
            if (live > s->peak[d])
                s->peak[d] = live;
            if (lc[a->chunk] > s->peak_stage[st])
                s->peak_stage[st] = lc[a->chunk];
        }
    }
    s->bubble = s->makespan ? 1.0 - (double)total / ((double)s->P * s->makespan) : 0.0;
    return 0;
}

int rumor_schedule_simulate(rumor_schedule_t *s, const double *cost, double *makespan,
                            double *bubble)
{
    double busy[RUMOR_SCHED_MAX_DEVICES], total = 0;
    RUMOR_CHECK(simulate(s, cost, 0, makespan, busy));
    for (int d = 0; d < s->P; d++)
        total += busy[d];
    *bubble = *makespan > 0 ? 1.0 - total / ((double)s->P * *makespan) : 0.0;
    return 0;
}

/* ------------------------------------------------------------ generators */

static void gen_gpipe(rumor_schedule_t *s)
{
    for (int d = 0; d < s->P; d++) {
        for (int m = 0; m < s->M; m++)
            push(s, d, RUMOR_ACT_F, 0, m);
        for (int m = 0; m < s->M; m++)
            push(s, d, RUMOR_ACT_BW, 0, m);
    }
}

/* Megatron-LM's order: forward k of a device runs chunk (k mod PV) / P of
 * micro-batch (k / PV) P + k mod P; backward k runs the chunks in reverse.
 * Device d warms up with (P - d - 1) 2 + (V - 1) P forwards (P - d - 1 when
 * V = 1), then alternates one forward and one backward. back is the kind of
 * the backward actions (BW, or B for zb-h1's base order). */
static void gen_1f1b(rumor_schedule_t *s, rumor_act_kind back)
{
    int P = s->P, V = s->V, total = s->M * V;
    for (int d = 0; d < P; d++) {
        int warm = V == 1 ? P - d - 1 : (P - d - 1) * 2 + (V - 1) * P;
        if (warm > total)
            warm = total;
        int f = 0, b = 0;
        for (; f < warm; f++)
            push(s, d, RUMOR_ACT_F, (f % (P * V)) / P, (f / (P * V)) * P + f % P);
        while (b < total) {
            if (f < total) {
                push(s, d, RUMOR_ACT_F, (f % (P * V)) / P, (f / (P * V)) * P + f % P);
                f++;
            }
            push(s, d, back, V - 1 - (b % (P * V)) / P, (b / (P * V)) * P + b % P);
            b++;
        }
    }
}

/* ZB-H1: each device keeps 1F1B's order of F and B (backward split) and
 * runs a W whenever its next F or B cannot start yet, or another F would
 * hold more than P live activations (1F1B's peak, on its first device: the
 * later devices, which 1F1B leaves with fewer, defer their Ws into the
 * cool-down); the Ws left run at the end. Built by a unit-time simulation
 * of that rule. */
/* An action's duration in the generators' ticks: ticks (S x 3, F B W)
 * from measured costs, or 1 each. */
static int tick_of(const int *ticks, int st, int k) { return ticks ? ticks[st * 3 + k] : 1; }

static int max_tick(const int *ticks, int S)
{
    int mx = 1;
    for (int i = 0; ticks && i < 3 * S; i++)
        mx = ticks[i] > mx ? ticks[i] : mx;
    return mx;
}

static int gen_zbh1(rumor_schedule_t *s, const int *ticks)
{
    int P = s->P, M = s->M;
    rumor_schedule_t *base = NULL;
    RUMOR_CHECK(rumor_schedule_create(P, 1, M, 2 * M, &base));
    gen_1f1b(base, RUMOR_ACT_B);
    size_t cells = (size_t)P * M;
    int *finF = malloc(cells * sizeof *finF), *finB = malloc(cells * sizeof *finB);
    int *ptr = calloc((size_t)P, sizeof *ptr), *free_at = calloc((size_t)P, sizeof *free_at);
    int *live = calloc((size_t)P, sizeof *live), *wq = malloc(cells * sizeof *wq);
    int *wh = calloc((size_t)P, sizeof *wh), *wt = calloc((size_t)P, sizeof *wt);
    int rc = finF && finB && ptr && free_at && live && wq && wh && wt
                 ? 0 : rumor_err_set(RUMOR_ENOMEM, "schedule: out of memory");
    for (size_t c = 0; rc == 0 && c < cells; c++)
        finF[c] = finB[c] = -1;
    long left = 3L * P * M;
    long limit = (6L * P * M + 4L * P) * max_tick(ticks, P);
    for (int t = 0; rc == 0 && left > 0; t++) {
        if (t > limit)
            rc = rumor_err_set(RUMOR_ESTATE, "zb-h1: the generator did not finish");
        for (int d = 0; rc == 0 && d < P; d++) {
            if (free_at[d] > t)
                continue;
            int *q = wq + (size_t)d * M; /* this device's pending Ws (their micro-batches) */
            int run = 0, dur = 1;
            if (ptr[d] < base->n[d]) {
                const rumor_action_t *a = &base->acts[d][ptr[d]];
                int m = a->micro, ready;
                if (a->kind == RUMOR_ACT_F)
                    ready = (d == 0 || (finF[(size_t)(d - 1) * M + m] >= 0 &&
                                        finF[(size_t)(d - 1) * M + m] <= t)) &&
                            live[d] < P;
                else
                    ready = d == P - 1 || (finB[(size_t)(d + 1) * M + m] >= 0 &&
                                           finB[(size_t)(d + 1) * M + m] <= t);
                if (ready) {
                    push(s, d, a->kind, 0, m);
                    dur = tick_of(ticks, d, a->kind);
                    if (a->kind == RUMOR_ACT_F) {
                        finF[(size_t)d * M + m] = t + dur;
                        live[d]++;
                    } else {
                        finB[(size_t)d * M + m] = t + dur;
                        q[wt[d]++] = m;
                    }
                    ptr[d]++;
                    run = 1;
                }
            }
            if (!run && wh[d] < wt[d]) {
                /* a W whose B ended before now */
                int m = q[wh[d]];
                if (finB[(size_t)d * M + m] <= t) {
                    push(s, d, RUMOR_ACT_W, 0, m);
                    dur = tick_of(ticks, d, RUMOR_ACT_W);
                    wh[d]++;
                    live[d]--;
                    run = 1;
                }
            }
            if (run) {
                free_at[d] = t + dur;
                left--;
            }
        }
    }
    free(finF), free(finB), free(ptr), free(free_at), free(live), free(wq), free(wh), free(wt);
    rumor_schedule_destroy(&base);
    return rc;
}

/* ZBV: a simulation of the greedy rule in schedule.h, in ticks (one an
 * action, or measured costs' durations). At each tick a free device takes
 * the first ready of: the next B of chunk 0, of chunk 1; the next F of
 * chunk 1, of chunk 0 while it holds fewer than 2P chunk activations; its
 * oldest pending W. (With unit costs the bound never stops every device at
 * once; with others it can, and then yields for a tick.) */
static int gen_zbv(rumor_schedule_t *s, const int *ticks)
{
    int P = s->P, M = s->M, S = s->S;
    int busy_until[RUMOR_SCHED_MAX_DEVICES] = { 0 };
    size_t cells = (size_t)S * M;
    int *finF = malloc(cells * sizeof *finF), *finB = malloc(cells * sizeof *finB);
    int *wq = malloc(cells * sizeof *wq); /* per device: pending W as chunk x M + micro */
    int *st = calloc((size_t)P * 8, sizeof *st);
    int rc = finF && finB && wq && st ? 0 : rumor_err_set(RUMOR_ENOMEM, "schedule: out of memory");
    for (size_t c = 0; rc == 0 && c < cells; c++)
        finF[c] = finB[c] = -1;
    /* per device: next F of chunk 0 and 1, next B of chunk 0 and 1, live,
     * W queue head and tail, busy until */
#define NF(d, c) st[(d) * 8 + (c)]
#define NB(d, c) st[(d) * 8 + 2 + (c)]
#define LIVE(d) st[(d) * 8 + 4]
#define WH(d) st[(d) * 8 + 5]
#define WT(d) st[(d) * 8 + 6]
    long left = 3L * S * M, limit = (12L * S * M + 8L * S) * max_tick(ticks, S);
    for (int t = 0; rc == 0 && left > 0; t++) {
        if (t > limit) {
            rc = rumor_err_set(RUMOR_ESTATE, "zbv: the generator did not finish");
            break;
        }
        /* decide every device's action at t before any result of t is seen;
         * when no device is busy and none can act, the memory bound would
         * hold them all forever (unequal costs can lead there): lift it
         * for this tick */
        int pick[RUMOR_SCHED_MAX_DEVICES][3], bound = 2 * P;
    again:
        for (int d = 0; d < P; d++) {
            pick[d][0] = -1;
            if (busy_until[d] > t)
                continue;
            for (int c = 0; c < 2 && pick[d][0] < 0; c++) {
                int m = NB(d, c), sg = rumor_schedule_stage(s, d, c);
                if (m < M && finF[(size_t)sg * M + m] >= 0 && finF[(size_t)sg * M + m] <= t &&
                    (sg == S - 1 || (finB[(size_t)(sg + 1) * M + m] >= 0 &&
                                     finB[(size_t)(sg + 1) * M + m] <= t)))
                    pick[d][0] = RUMOR_ACT_B, pick[d][1] = c, pick[d][2] = m;
            }
            for (int c = 1; c >= 0 && pick[d][0] < 0 && LIVE(d) < bound; c--) {
                int m = NF(d, c), sg = rumor_schedule_stage(s, d, c);
                if (m < M && (sg == 0 || (finF[(size_t)(sg - 1) * M + m] >= 0 &&
                                          finF[(size_t)(sg - 1) * M + m] <= t)))
                    pick[d][0] = RUMOR_ACT_F, pick[d][1] = c, pick[d][2] = m;
            }
            if (pick[d][0] < 0 && WH(d) < WT(d)) {
                int w = wq[(size_t)d * 2 * M + WH(d)];
                pick[d][0] = RUMOR_ACT_W, pick[d][1] = w / M, pick[d][2] = w % M;
            }
        }
        if (bound == 2 * P) {
            int any = 0;
            for (int d = 0; d < P; d++)
                any |= pick[d][0] >= 0 || busy_until[d] > t;
            if (!any) {
                bound = 2 * M + 1;
                goto again;
            }
        }
        for (int d = 0; d < P; d++) {
            int k = pick[d][0], c = pick[d][1], m = pick[d][2];
            if (k < 0)
                continue;
            int sg = rumor_schedule_stage(s, d, c), dur = tick_of(ticks, sg, k);
            push(s, d, (rumor_act_kind)k, c, m);
            left--;
            busy_until[d] = t + dur;
            if (k == RUMOR_ACT_F) {
                finF[(size_t)sg * M + m] = t + dur;
                NF(d, c)++;
                LIVE(d)++;
            } else if (k == RUMOR_ACT_B) {
                finB[(size_t)sg * M + m] = t + dur;
                NB(d, c)++;
                wq[(size_t)d * 2 * M + WT(d)++] = c * M + m;
            } else {
                WH(d)++;
                LIVE(d)--;
            }
        }
    }
#undef NF
#undef NB
#undef LIVE
#undef WH
#undef WT
    free(finF), free(finB), free(wq), free(st);
    return rc;
}

static int build(const char *spec, int P, int M, int nblocks, const int *ticks,
                 rumor_schedule_t **out);

int rumor_schedule_build(const char *spec, int P, int M, int nblocks, rumor_schedule_t **out)
{
    return build(spec, P, M, nblocks, NULL, out);
}

int rumor_schedule_build_costed(const char *spec, int P, int M, int nblocks, const double *cost,
                                rumor_schedule_t **out)
{
    rumor_sched_kind kind;
    int V;
    *out = NULL;
    RUMOR_CHECK(rumor_schedule_parse(spec, &kind, &V));
    int S = P * V;
    if (P < 1 || P > RUMOR_SCHED_MAX_DEVICES)
        return build(spec, P, M, nblocks, NULL, out); /* refused there */
    /* ticks: 4 for the cheapest action, the others in proportion (at most
     * 64), so that equal costs give the unit-cost order */
    double lo = 0;
    for (int i = 0; i < 3 * S; i++) {
        if (!(cost[i] >= 0) || !isfinite(cost[i]))
            return rumor_err_set(RUMOR_EINVAL, "schedule costs: stage %d's %s cost %g", i / 3,
                                 act_name[i % 3], cost[i]);
        if (cost[i] > 0 && (lo == 0 || cost[i] < lo))
            lo = cost[i];
    }
    int *ticks = malloc((size_t)S * 3 * sizeof *ticks);
    if (!ticks)
        return rumor_err_set(RUMOR_ENOMEM, "schedule: out of memory");
    for (int i = 0; i < 3 * S; i++) {
        double r = lo > 0 ? 4.0 * cost[i] / lo : 4.0;
        ticks[i] = r < 1 ? 1 : r > 64 ? 64 : (int)(r + 0.5);
    }
    int rc = build(spec, P, M, nblocks, ticks, out);
    free(ticks);
    return rc;
}

static int build(const char *spec, int P, int M, int nblocks, const int *ticks,
                 rumor_schedule_t **out)
{
    *out = NULL;
    rumor_sched_kind kind;
    int V;
    RUMOR_CHECK(rumor_schedule_parse(spec, &kind, &V));
    if (P < 1 || P > RUMOR_SCHED_MAX_DEVICES)
        return rumor_err_set(RUMOR_EINVAL, "--stages %d: must be in [1, %d]", P,
                             RUMOR_SCHED_MAX_DEVICES);
    if (M < 1 || M > RUMOR_SCHED_MAX_MICRO)
        return rumor_err_set(RUMOR_EINVAL, "--microbatches %d: must be in [1, %d]", M,
                             RUMOR_SCHED_MAX_MICRO);
    if ((kind == RUMOR_SCHED_1F1B || kind == RUMOR_SCHED_ZBH1) && M < P)
        return rumor_err_set(RUMOR_EINVAL, "--schedule %s needs at least as many micro-batches "
                             "as stages (%d < %d): with fewer it is GPipe (use gpipe)", spec, M, P);
    if (kind == RUMOR_SCHED_INTERLEAVED && M % P)
        return rumor_err_set(RUMOR_EINVAL, "--schedule %s: the micro-batches (%d) must be a "
                             "multiple of the stages (%d)", spec, M, P);
    if (nblocks > 0 && nblocks < P * V)
        return rumor_err_set(RUMOR_EINVAL, "--schedule %s on %d stages cuts the model into %d "
                             "pieces, but it has %d blocks", spec, P, P * V, nblocks);
    rumor_schedule_t *s = NULL;
    RUMOR_CHECK(rumor_schedule_create(P, V, M, 3 * M * V, &s));
    s->kind = kind;
    s->vshape = kind == RUMOR_SCHED_ZBV;
    snprintf(s->name, sizeof s->name, "%s", spec);
    int rc = 0;
    if (kind == RUMOR_SCHED_GPIPE)
        gen_gpipe(s);
    else if (kind == RUMOR_SCHED_ZBH1)
        rc = gen_zbh1(s, ticks);
    else if (kind == RUMOR_SCHED_ZBV)
        rc = gen_zbv(s, ticks);
    else
        gen_1f1b(s, RUMOR_ACT_BW);
    if (rc == 0)
        rc = rumor_schedule_validate(s);
    if (rc < 0) {
        rumor_schedule_destroy(&s);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    *out = s;
    return 0;
}

double rumor_schedule_theory(rumor_sched_kind kind, int P, int M, int V)
{
    double p1 = P - 1;
    switch (kind) {
    case RUMOR_SCHED_INTERLEAVED:
        return p1 / ((double)M * V + p1);
    case RUMOR_SCHED_ZBH1:
        return p1 / (3.0 * M + p1);
    case RUMOR_SCHED_ZBV:
        return p1 / (6.0 * M + p1);
    default:
        return p1 / ((double)M + p1);
    }
}

/* ------------------------------------------------------------ pictures */

static int digits(int v)
{
    int n = 1;
    while (v >= 10)
        v /= 10, n++;
    return n;
}

void rumor_schedule_print(const rumor_schedule_t *s, FILE *out)
{
    int w = 1 + digits(s->M - 1) + (s->V > 1), T = s->makespan;
    char *row = malloc((size_t)T * (size_t)(w + 1) + 1);
    if (!row)
        return;
    fprintf(out, "%s: %d stage%s on %d device%s, %d micro-batch%s; unit costs F = B = W = 1\n",
            s->name, s->S, s->S == 1 ? "" : "s", s->P, s->P == 1 ? "" : "s", s->M,
            s->M == 1 ? "" : "es");
    for (int d = 0; d < s->P; d++) {
        for (int i = 0; i < T * (w + 1); i++)
            row[i] = (i % (w + 1)) == w ? ' ' : '.';
        row[T * (w + 1)] = '\0';
        for (int i = 0; i < s->n[d]; i++) {
            const rumor_action_t *a = &s->acts[d][i];
            int dur = a->kind == RUMOR_ACT_BW ? 2 : 1;
            for (int u = 0; u < dur; u++) {
                char cell[16];
                snprintf(cell, sizeof cell, "%c%d%s", "FBWb"[a->kind], a->micro,
                         s->V > 1 ? (char[2]){ (char)('a' + a->chunk), 0 } : "");
                memset(row + (size_t)(a->start + u) * (w + 1), ' ', (size_t)w);
                memcpy(row + (size_t)(a->start + u) * (w + 1), cell, strlen(cell));
            }
        }
        /* trailing blanks off */
        size_t len = strlen(row);
        while (len && row[len - 1] == ' ')
            row[--len] = '\0';
        fprintf(out, "device %-2d %s\n", d, row);
    }
    fprintf(out, "makespan %d units, bubble %.1f%% (theory %.1f%%), peak activations",
            s->makespan, 100.0 * s->bubble,
            100.0 * rumor_schedule_theory(s->kind, s->P, s->M, s->V));
    for (int d = 0; d < s->P; d++)
        fprintf(out, "%s%d", d ? " " : " ", s->peak[d]);
    fputc('\n', out);
    free(row);
}

int rumor_schedule_svg(const rumor_schedule_t *s, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return rumor_err_set(RUMOR_ESYS, "%s: cannot write: %s", path, strerror(errno));
    const int cw = 28, rh = 28, left = 80, top = 40;
    int W = left + s->makespan * cw + 20, H = top + s->P * rh + 50;
    static const char *fill[] = { "#4e79a7", "#59a14f", "#edc948", "#76b7b2" };
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\">%s: %d devices, %d micro-batches, "
               "bubble %.1f%%</text>\n", left, s->name, s->P, s->M, 100.0 * s->bubble);
    for (int d = 0; d < s->P; d++) {
        int y = top + d * rh;
        fprintf(f, "<text x=\"8\" y=\"%d\">device %d</text>\n", y + rh / 2 + 4, d);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#eeeeee\"/>\n",
                left, y + 2, s->makespan * cw, rh - 4);
        for (int i = 0; i < s->n[d]; i++) {
            const rumor_action_t *a = &s->acts[d][i];
            int dur = a->kind == RUMOR_ACT_BW ? 2 : 1;
            int x = left + a->start * cw;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                       "stroke=\"white\"><title>%s stage %d micro-batch %d</title></rect>\n",
                    x, y + 2, dur * cw, rh - 4, fill[a->kind], act_name[a->kind],
                    rumor_schedule_stage(s, d, a->chunk), a->micro);
            fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"white\" text-anchor=\"middle\">%s%d%s"
                       "</text>\n", x + dur * cw / 2, y + rh / 2 + 4, act_name[a->kind],
                    a->micro, s->V > 1 ? (char[2]){ (char)('a' + a->chunk), 0 } : "");
        }
    }
    /* a legend of the kinds the schedule has */
    int ly = top + s->P * rh + 25, lx = left, has[4] = { 0 };
    for (int d = 0; d < s->P; d++)
        for (int i = 0; i < s->n[d]; i++)
            has[s->acts[d][i].kind] = 1;
    static const char *label[] = { "forward", "backward (input)", "backward (weights)",
                                   "backward" };
    for (int k = 0; k < 4; k++)
        if (has[k]) {
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/><text "
                       "x=\"%d\" y=\"%d\">%s</text>\n", lx, ly - 11, fill[k], lx + 18, ly,
                    label[k]);
            lx += 40 + 7 * (int)strlen(label[k]);
        }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0)
        return rumor_err_set(RUMOR_EIO, "%s: write failed", path);
    return 0;
}

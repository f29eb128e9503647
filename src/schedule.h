/* Pipeline schedules as data.
 *
 * A model cut into S = P x V stages runs on P devices, V stages (chunks) a
 * device: stage s = chunk x P + device (with V = 1, stage s on device s),
 * or in a V shape (zbv: V = 2, chunk 0 of device d is stage d, chunk 1 is
 * stage 2P - 1 - d, so device 0 holds the first and the last stage).
 * A step's batch is M micro-batches. Each device executes a list of
 * actions, in order:
 *   F  forward of (stage, micro-batch): needs F of the stage before (its
 *      activation arrives from that stage's device);
 *   B  backward, input gradient: needs F of the same (stage, micro-batch)
 *      and B of the stage after (its gradient arrives);
 *   W  backward, weight gradients: needs B of the same (stage, micro-batch);
 *   BW B and W at once (schedules that do not split the backward).
 * Sends and receives are implied by those dependencies: an F or B whose
 * neighbouring stage lives on another device receives from it, and its
 * result is sent on when it ends.
 *
 * Schedules (rumor_schedule_build's spec):
 *   gpipe          every F, then every BW (Huang et al. 2019)
 *   1f1b           P - d - 1 warm-up forwards on device d, then one F and
 *                  one BW in turn (PipeDream-Flush; M >= P)
 *   interleaved:V  Megatron-LM's interleaved 1F1B over V chunks a device
 *                  (Narayanan et al. 2021; M a multiple of P)
 *   zb-h1          zero-bubble H1 (Qi et al. 2023): 1F1B's order of F and
 *                  B with the backward split, each W deferred into the
 *                  device's idle slots, at most P live activations on any
 *                  device (1F1B's peak) (M >= P)
 *   zbv            zero-bubble V (Qi et al. 2024): two chunks a device in a
 *                  V shape, the backward split; each device runs, of what
 *                  is ready, a B (chunk 0's first), else an F (chunk 1's
 *                  first) while it holds fewer than 2P chunk activations
 *                  (1F1B's peak memory), else its oldest pending W. With
 *                  F = B = W its bubble is near (P-1)/(6M+P-1), half ZB-H1's,
 *                  at 1F1B's memory (any M)
 *
 * Every schedule, generated or made by hand, is validated before use:
 * counts (every F, B and W of every (stage, micro-batch) exactly once, on
 * the stage's device), order on a device (B after its F, W after its B),
 * and a simulation with unit costs (F = B = W = 1, BW = 2) that finds a
 * deadlock (a device waiting on one that waits on it) and gives the
 * timeline, the bubble (idle share of the makespan) and the peak live
 * activations per device (micro-batch chunks whose F ran and whose W has
 * not). */
#ifndef RUMOR_SCHEDULE_H
#define RUMOR_SCHEDULE_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RUMOR_ACT_F = 0, RUMOR_ACT_B, RUMOR_ACT_W, RUMOR_ACT_BW } rumor_act_kind;

typedef struct rumor_action {
    uint8_t kind;    /* rumor_act_kind */
    uint8_t chunk;   /* the device's chunk: stage chunk x P + device */
    uint16_t micro;  /* micro-batch */
    int32_t start;   /* simulated start, in unit costs (after validation) */
} rumor_action_t;

typedef enum {
    RUMOR_SCHED_GPIPE = 0,
    RUMOR_SCHED_1F1B,
    RUMOR_SCHED_INTERLEAVED,
    RUMOR_SCHED_ZBH1,
    RUMOR_SCHED_ZBV,
    RUMOR_SCHED_CUSTOM
} rumor_sched_kind;

#define RUMOR_SCHED_MAX_DEVICES 64
#define RUMOR_SCHED_MAX_CHUNKS 16
#define RUMOR_SCHED_MAX_MICRO 4096

typedef struct rumor_schedule {
    rumor_sched_kind kind;
    char name[32];             /* "1f1b", "interleaved:2", ... */
    int P, V, M, S;            /* devices, chunks a device, micro-batches, stages */
    int vshape;                /* stages placed in a V (zbv) rather than round robin */
    int *n;                    /* (P) actions a device */
    rumor_action_t **acts;     /* (P) lists */
    /* from the simulation (rumor_schedule_validate) */
    int makespan;              /* unit costs */
    int *busy;                 /* (P) */
    int *peak;                 /* (P) peak live activations (micro-batch chunks) */
    int *peak_stage;           /* (S) peak live micro-batches of each stage: the
                                * activation slots the stage needs */
    double bubble;             /* idle share of P x makespan */
} rumor_schedule_t;

/* Parses "gpipe", "1f1b", "interleaved[:V]" (V default 2), "zb-h1" or "zbv"
 * (V = 2). */
int rumor_schedule_parse(const char *spec, rumor_sched_kind *kind, int *V) RUMOR_WUR;

/* Generates the schedule of spec for P devices and M micro-batches,
 * validates and simulates it. nblocks > 0: the model's blocks, which must
 * number at least P x V. A combination the schedule does not allow (1f1b
 * with M < P, interleaved with M not a multiple of P, ...) is RUMOR_EINVAL
 * with the reason. */
int rumor_schedule_build(const char *spec, int P, int M, int nblocks,
                         rumor_schedule_t **out) RUMOR_WUR;

/* The stage that chunk `chunk` of device d runs, and the device (and the
 * chunk, when not NULL) that runs stage st. */
int rumor_schedule_stage(const rumor_schedule_t *s, int d, int chunk);
int rumor_schedule_device(const rumor_schedule_t *s, int st, int *chunk);

/* The device of each of the P x V stages of a schedule of this kind, before
 * one is built (a planner's question): dev_of has P x V entries. */
void rumor_schedule_placement(rumor_sched_kind kind, int P, int V, int *dev_of);

/* The same for measured costs (cost[st * 3 + k]: seconds of F, B, W on
 * stage st): the zero-bubble generators (zb-h1, zbv) simulate their rules
 * with these durations instead of F = B = W, so their Ws land where real
 * costs leave the devices idle; the other schedules do not depend on
 * costs. Equal costs give rumor_schedule_build's lists. The result is
 * validated like any schedule (its printed timeline stays in unit costs). */
int rumor_schedule_build_costed(const char *spec, int P, int M, int nblocks, const double *cost,
                                rumor_schedule_t **out) RUMOR_WUR;

/* An empty schedule of P devices and V chunks for M micro-batches, whose
 * lists the caller fills (up to cap actions a device) before validating. */
int rumor_schedule_create(int P, int V, int M, int cap, rumor_schedule_t **out) RUMOR_WUR;
void rumor_schedule_destroy(rumor_schedule_t **sp);

/* Checks and simulates s (see above), filling the action starts, the
 * makespan, busy time, peaks and bubble; RUMOR_EINVAL names what is wrong
 * ("device 1: B of stage 1 micro-batch 2 before its F"; "deadlock: device
 * 0 waits at F of stage 0 micro-batch 1 ..."). */
int rumor_schedule_validate(rumor_schedule_t *s) RUMOR_WUR;

/* The schedule run with real costs: cost[st * 3 + k] the seconds of kind
 * k (F, B, W) on stage st (BW costs B + W), each device's list in order,
 * each action as soon as its device is free and its inputs are done (no
 * transfer time). *makespan and *bubble (the idle share) are what an
 * executor with no overhead would measure; the starts printed stay the
 * unit-cost ones. */
int rumor_schedule_simulate(rumor_schedule_t *s, const double *cost, double *makespan,
                            double *bubble) RUMOR_WUR;

/* The bubble of the schedule's analysis with unit costs, as an idle share of
 * the makespan: GPipe and 1F1B (P-1)/(M+P-1), interleaved (P-1)/(MV+P-1),
 * ZB-H1 (P-1)/(3M+P-1), ZBV (P-1)/(6M+P-1) (the papers' (P-1)/M, (P-1)/(MV) and (P-1)/(3M) are
 * idle / busy). */
double rumor_schedule_theory(rumor_sched_kind kind, int P, int M, int V);

/* The timeline as text: a row a device, a cell a unit of time ("F3" the
 * forward of micro-batch 3, "B", "W", "b" for BW's two units; lower-case
 * chunk letters when V > 1), then the bubble and the peaks. */
void rumor_schedule_print(const rumor_schedule_t *s, FILE *out);

/* The timeline as an SVG picture. */
int rumor_schedule_svg(const rumor_schedule_t *s, const char *path) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif

/* rumor-train schedule: a pipeline schedule's timeline, bubble and peak
 * activations, without training (src/schedule.h). */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "schedule.h"
#include "train_cmds.h"
#include "trainopts.h"

static const char usage[] =
    "Usage: rumor-train schedule [--schedule S] [--stages P] [--microbatches M]\n"
    "                            [--costs F,B,W] [--svg FILE] [--json]\n"
    "Show a pipeline schedule without training: its timeline (a row a device, a\n"
    "cell a unit of time, with F = B = W = 1), its bubble against the analysis,\n"
    "and each device's peak live activations (micro-batches held).\n"
    "\n"
    "  --schedule S        gpipe, 1f1b, interleaved[:V], zb-h1 or zbv\n"
    "                      (default 1f1b)\n"
    "  --stages P          devices in the pipeline (default 4)\n"
    "  --microbatches M    micro-batches a step (default 8)\n"
    "  --costs F,B,W       a stage's forward, input-gradient and weight-gradient\n"
    "                      times (any unit, > 0): zb-h1 and zbv order their lists\n"
    "                      for them, as a pipeline re-plans for the costs it\n"
    "                      measures, and the bubble at those costs is shown\n"
    "                      beside the unit-cost lists' (cells stay unit-sized)\n"
    "  --svg FILE          also draw the timeline as an SVG picture\n"
    "  --json              print the schedule as JSON instead\n"
    "\n"
    "Cells: F3 forward of micro-batch 3, B3 its input gradient, W3 its weight\n"
    "gradients, b3 (two cells) both at once; a trailing letter names the chunk\n"
    "(interleaved, zbv). Exit status: 0, or 2 for a schedule that cannot run.\n";

struct sched_opts {
    const char *schedule, *svg, *costs;
    int stages, microbatches, json;
};

static const rumor_opt_t table[] = {
    { "schedule", 0, RUMOR_OPT_STR, offsetof(struct sched_opts, schedule), 0, 0, NULL, 0 },
    { "stages", 0, RUMOR_OPT_INT, offsetof(struct sched_opts, stages), 1, RUMOR_SCHED_MAX_DEVICES, NULL, 0 },
    { "microbatches", 0, RUMOR_OPT_INT, offsetof(struct sched_opts, microbatches), 1, RUMOR_SCHED_MAX_MICRO, NULL, 0 },
    { "svg", 0, RUMOR_OPT_STR, offsetof(struct sched_opts, svg), 0, 0, NULL, 0 },
    { "costs", 0, RUMOR_OPT_STR, offsetof(struct sched_opts, costs), 0, 0, NULL, 0 },
    { "json", 0, RUMOR_OPT_FLAG, offsetof(struct sched_opts, json), 0, 0, NULL, 1 },
    { NULL, 0, 0, 0, 0, 0, NULL, 0 },
};

/* "F,B,W": three positive numbers. */
static int parse_costs(const char *spec, double fbw[3])
{
    const char *p = spec;
    for (int k = 0; k < 3; k++) {
        char *end;
        fbw[k] = strtod(p, &end);
        if (end == p || !(fbw[k] > 0) || fbw[k] > 1e9 || (k < 2 ? *end != ',' : *end != '\0')) {
            fprintf(stderr, "rumor-train schedule: --costs '%s': expected three positive numbers "
                            "F,B,W\n", spec);
            return -1;
        }
        p = end + 1;
    }
    return 0;
}

static void print_json(const rumor_schedule_t *s, const double *costed)
{
    static const char *kinds[] = { "F", "B", "W", "BW" };
    printf("{\"schedule\":\"%s\",\"devices\":%d,\"chunks\":%d,\"stages\":%d,"
           "\"microbatches\":%d,\"makespan\":%d,\"bubble\":%.6f,\"theory\":%.6f,\"per_device\":[",
           s->name, s->P, s->V, s->S, s->M, s->makespan, s->bubble,
           rumor_schedule_theory(s->kind, s->P, s->M, s->V));
    for (int d = 0; d < s->P; d++) {
        printf("%s{\"device\":%d,\"busy\":%d,\"peak_activations\":%d,\"actions\":[", d ? "," : "",
               d, s->busy[d], s->peak[d]);
        for (int i = 0; i < s->n[d]; i++) {
            const rumor_action_t *a = &s->acts[d][i];
            printf("%s{\"kind\":\"%s\",\"stage\":%d,\"micro\":%d,\"start\":%d}", i ? "," : "",
                   kinds[a->kind], rumor_schedule_stage(s, d, a->chunk), a->micro,
                   a->start);
        }
        printf("]}");
    }
    printf("]");
    if (costed)
        printf(",\"costs\":[%g,%g,%g],\"bubble_at_costs\":%.6f,"
               "\"unit_lists_bubble_at_costs\":%.6f", costed[0], costed[1], costed[2], costed[3],
               costed[4]);
    printf("}\n");
}

int rumor_train_schedule_cmd(int argc, char **argv)
{
    struct sched_opts o = { .schedule = "1f1b", .stages = 4, .microbatches = 8 };
    int rc = rumor_opts_parse("rumor-train schedule", table, &o, argc, argv);
    if (rc == RUMOR_OPTS_HELP) {
        fputs(usage, stdout);
        return 0;
    }
    if (rc != 0)
        return rc == RUMOR_OPTS_VERSION ? 0 : 2;
    double fbw[3], costed[5];
    if (o.costs && parse_costs(o.costs, fbw) < 0)
        return 2;
    if (o.svg && rumor_train_opts_check_output("--svg", o.svg) < 0) {
        fprintf(stderr, "rumor-train schedule: %s\n", rumor_err_msg());
        return 2;
    }
    rumor_schedule_t *s = NULL, *u = NULL;
    int brc = rumor_schedule_build(o.schedule, o.stages, o.microbatches, 0, &u);
    if (brc == 0 && o.costs) {
        /* every stage alike; the lists for those costs, and both bubbles */
        double *cost = malloc((size_t)u->S * 3 * sizeof *cost), mk;
        brc = cost ? 0 : rumor_err_set(RUMOR_ENOMEM, "out of memory");
        for (int st = 0; brc == 0 && st < u->S; st++)
            for (int k = 0; k < 3; k++)
                cost[st * 3 + k] = fbw[k];
        if (brc == 0)
            brc = rumor_schedule_build_costed(o.schedule, o.stages, o.microbatches, 0, cost, &s);
        if (brc == 0)
            brc = rumor_schedule_simulate(s, cost, &mk, &costed[3]);
        if (brc == 0)
            brc = rumor_schedule_simulate(u, cost, &mk, &costed[4]);
        free(cost);
        memcpy(costed, fbw, sizeof fbw);
        rumor_schedule_destroy(&u);
    } else {
        s = u;
    }
    if (brc < 0) {
        fprintf(stderr, "rumor-train schedule: %s\n", rumor_err_msg());
        rumor_schedule_destroy(&s);
        return 2;
    }
    if (o.json) {
        print_json(s, o.costs ? costed : NULL);
    } else {
        rumor_schedule_print(s, stdout);
        if (o.costs)
            printf("at F, B, W = %g, %g, %g: bubble %.1f%% (the unit-cost lists: %.1f%%)\n",
                   fbw[0], fbw[1], fbw[2], 100.0 * costed[3], 100.0 * costed[4]);
    }
    if (o.svg && rumor_schedule_svg(s, o.svg) < 0) {
        fprintf(stderr, "rumor-train schedule: %s\n", rumor_err_msg());
        rumor_schedule_destroy(&s);
        return 1;
    }
    if (o.svg && !o.json)
        printf("timeline drawn in %s\n", o.svg);
    rumor_schedule_destroy(&s);
    return 0;
}

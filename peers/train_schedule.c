/* rumor-train schedule: a pipeline schedule's timeline, bubble and peak
 * activations, without training (src/schedule.h). */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "options.h"
#include "schedule.h"
#include "train_cmds.h"

static const char usage[] =
    "Usage: rumor-train schedule [--schedule S] [--stages P] [--microbatches M]\n"
    "                            [--svg FILE] [--json]\n"
    "Show a pipeline schedule without training: its timeline (a row a device, a\n"
    "cell a unit of time, with F = B = W = 1), its bubble against the analysis,\n"
    "and each device's peak live activations (micro-batches held).\n"
    "\n"
    "  --schedule S        gpipe, 1f1b, interleaved[:V], zb-h1 or zbv\n"
    "                      (default 1f1b)\n"
    "  --stages P          devices in the pipeline (default 4)\n"
    "  --microbatches M    micro-batches a step (default 8)\n"
    "  --svg FILE          also draw the timeline as an SVG picture\n"
    "  --json              print the schedule as JSON instead\n"
    "\n"
    "Cells: F3 forward of micro-batch 3, B3 its input gradient, W3 its weight\n"
    "gradients, b3 (two cells) both at once; a trailing letter names the chunk\n"
    "(interleaved, zbv). Exit status: 0, or 2 for a schedule that cannot run.\n";

struct sched_opts {
    const char *schedule, *svg;
    int stages, microbatches, json;
};

static const rumor_opt_t table[] = {
    { "schedule", 0, RUMOR_OPT_STR, offsetof(struct sched_opts, schedule), 0, 0, NULL, 0 },
    { "stages", 0, RUMOR_OPT_INT, offsetof(struct sched_opts, stages), 1, RUMOR_SCHED_MAX_DEVICES, NULL, 0 },
    { "microbatches", 0, RUMOR_OPT_INT, offsetof(struct sched_opts, microbatches), 1, RUMOR_SCHED_MAX_MICRO, NULL, 0 },
    { "svg", 0, RUMOR_OPT_STR, offsetof(struct sched_opts, svg), 0, 0, NULL, 0 },
    { "json", 0, RUMOR_OPT_FLAG, offsetof(struct sched_opts, json), 0, 0, NULL, 1 },
    { NULL, 0, 0, 0, 0, 0, NULL, 0 },
};

static void print_json(const rumor_schedule_t *s)
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
    printf("]}\n");
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
    rumor_schedule_t *s = NULL;
    if (rumor_schedule_build(o.schedule, o.stages, o.microbatches, 0, &s) < 0) {
        fprintf(stderr, "rumor-train schedule: %s\n", rumor_err_msg());
        return 2;
    }
    if (o.json)
        print_json(s);
    else
        rumor_schedule_print(s, stdout);
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

/* Pipeline schedules (src/schedule.h).
 *
 * - Every schedule for P in {2, 3, 4} and M in {1, 2, 3, 4, 8} (where it
 *   runs) validates, and its simulated bubble equals the closed form of its
 *   paper exactly: (P-1)/(M+P-1) for GPipe and 1F1B, (P-1)/(MV+P-1)
 *   interleaved, (P-1)/(3M+P-1) for ZB-H1, as idle shares of the makespan.
 *   ZB-V's greedy order comes within 1.5x of its bound (P-1)/(6M+P-1) and
 *   under ZB-H1's bubble (M >= P), with its stages in a V.
 * - Peak live activations: M on every GPipe device, P - d on 1F1B's device
 *   d, at most P for ZB-H1, at most 2P half-size chunks for ZB-V.
 * - Timelines match golden files in tests/data/schedules, each checked by
 *   hand against the schedule's rules (1F1B on 4 devices is PipeDream's
 *   published figure).
 * - Combinations a schedule does not allow, and hand-made broken schedules
 *   (a B before its F, a missing W, an action twice, two devices waiting on
 *   each other), are refused with the reason. */
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "testutil.h"

static void check_all(void)
{
    static const char *specs[] = { "gpipe", "1f1b", "interleaved", "interleaved:3", "zb-h1",
                                   "zbv" };
    static const int Ps[] = { 2, 3, 4 }, Ms[] = { 1, 2, 3, 4, 8 };
    int built = 0;
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++)
        for (size_t i = 0; i < 3; i++)
            for (size_t j = 0; j < 5; j++) {
                int P = Ps[i], M = Ms[j];
                rumor_sched_kind kind;
                int V;
                CHECK_OK(rumor_schedule_parse(specs[k], &kind, &V));
                int allowed = kind == RUMOR_SCHED_GPIPE || kind == RUMOR_SCHED_ZBV ||
                              (kind == RUMOR_SCHED_INTERLEAVED ? M % P == 0 : M >= P);
                rumor_schedule_t *s = NULL;
                int rc = rumor_schedule_build(specs[k], P, M, 0, &s);
                if (!allowed) {
                    CHECKF(rc == RUMOR_EINVAL && s == NULL, "%s P=%d M=%d: built, expected a "
                           "refusal", specs[k], P, M);
                    continue;
                }
                CHECKF(rc == 0 && s, "%s P=%d M=%d: %s", specs[k], P, M, rumor_err_msg());
                if (!s)
                    continue;
                built++;
                double want = rumor_schedule_theory(kind, P, M, V);
                double closed = kind == RUMOR_SCHED_INTERLEAVED ? (P - 1.0) / (M * V + P - 1.0)
                                : kind == RUMOR_SCHED_ZBH1      ? (P - 1.0) / (3.0 * M + P - 1.0)
                                                                : (P - 1.0) / (M + P - 1.0);
                if (kind == RUMOR_SCHED_ZBV) {
                    /* with M >= P the greedy order reaches the V's bound or
                     * comes near it, well under ZB-H1's bubble; with fewer
                     * micro-batches the critical path (4P + 1 units for one)
                     * rules, and it still beats GPipe's */
                    double bound = (P - 1.0) / (6.0 * M + P - 1.0);
                    double zbh1 = (P - 1.0) / (3.0 * M + P - 1.0);
                    double gp = (P - 1.0) / (M + P - 1.0);
                    CHECKF(fabs(want - bound) < 1e-15 && s->bubble >= bound - 1e-12 &&
                           (M < P ? s->bubble < gp && s->makespan >= 4 * P + 1
                                  : s->bubble <= 1.5 * bound && s->bubble < 0.8 * zbh1),
                           "zbv P=%d M=%d: bubble %.6f, the bound %.6f, ZB-H1's %.6f", P, M,
                           s->bubble, bound, zbh1);
                    /* the V: device d holds stages d and 2P - 1 - d */
                    for (int d = 0; d < P; d++) {
                        int c0, c1;
                        CHECK(rumor_schedule_device(s, d, &c0) == d && c0 == 0 &&
                              rumor_schedule_device(s, 2 * P - 1 - d, &c1) == d && c1 == 1 &&
                              rumor_schedule_stage(s, d, 1) == 2 * P - 1 - d);
                    }
                } else {
                    CHECKF(fabs(want - closed) < 1e-15 && fabs(s->bubble - closed) < 1e-12,
                           "%s P=%d M=%d: bubble %.6f, the analysis %.6f", specs[k], P, M,
                           s->bubble, closed);
                }
                /* unit costs: 3 units a (stage, micro-batch) */
                int busy = 0;
                for (int d = 0; d < P; d++)
                    busy += s->busy[d];
                CHECK(busy == 3 * M * V * P);
                for (int d = 0; d < P; d++) {
                    int peak = s->peak[d];
                    if (kind == RUMOR_SCHED_GPIPE)
                        CHECKF(peak == M, "gpipe P=%d M=%d device %d: peak %d", P, M, d, peak);
                    else if (kind == RUMOR_SCHED_1F1B)
                        CHECKF(peak == P - d, "1f1b P=%d M=%d device %d: peak %d", P, M, d, peak);
                    else if (kind == RUMOR_SCHED_ZBH1)
                        CHECKF(peak <= P, "zb-h1 P=%d M=%d device %d: peak %d", P, M, d, peak);
                    else if (kind == RUMOR_SCHED_ZBV) /* chunks of half a 1F1B stage */
                        CHECKF(peak <= 2 * P, "zbv P=%d M=%d device %d: peak %d", P, M, d, peak);
                }
                /* a stage's slots: its peak, never more than M; GPipe's is M */
                for (int st = 0; st < s->S; st++)
                    CHECKF(s->peak_stage[st] >= 1 && s->peak_stage[st] <= M &&
                           (kind != RUMOR_SCHED_GPIPE || s->peak_stage[st] == M) &&
                           (kind != RUMOR_SCHED_1F1B || s->peak_stage[st] == (P - st < M ? P - st : M)),
                           "%s P=%d M=%d stage %d: peak %d", specs[k], P, M, st, s->peak_stage[st]);
                rumor_schedule_destroy(&s);
            }
    /* gpipe, zbv: any M; 1f1b, zb-h1: M >= P; interleaved: M % P == 0 */
    CHECK(built == 15 + 9 + 9 + 6 + 6 + 15);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

static void check_golden(void)
{
    static const struct { const char *spec; int P, M; const char *file; } g[] = {
        { "gpipe", 2, 2, "gpipe-p2-m2.txt" },
        { "1f1b", 2, 3, "1f1b-p2-m3.txt" },
        { "1f1b", 4, 8, "1f1b-p4-m8.txt" },
        { "zb-h1", 2, 3, "zb-h1-p2-m3.txt" },
        { "interleaved:2", 2, 2, "interleaved2-p2-m2.txt" },
        { "zbv", 2, 4, "zbv-p2-m4.txt" },
    };
    const char *src = getenv("RUMOR_SRCDIR");
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/tests/data/schedules/%s", src ? src : "..", g[i].file);
        char *want = slurp(path);
        CHECKF(want != NULL, "%s: cannot read", path);
        rumor_schedule_t *s = NULL;
        CHECK_OK(rumor_schedule_build(g[i].spec, g[i].P, g[i].M, 0, &s));
        char *got = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&got, &len);
        if (s && mem)
            rumor_schedule_print(s, mem);
        if (mem)
            fclose(mem);
        CHECKF(want && got && !strcmp(want, got), "%s P=%d M=%d differs from %s:\n%s", g[i].spec,
               g[i].P, g[i].M, path, got ? got : "(nothing)");
        free(want);
        free(got);
        rumor_schedule_destroy(&s);
    }
}

/* The schedule run with real costs, against a timeline worked by hand:
 * GPipe on 2 devices, 2 micro-batches, stage 0's F, B, W = 1, 1, 1 and
 * stage 1's 2, 2, 2. Device 0: F0 [0, 1] F1 [1, 2]; device 1: F0 [1, 3]
 * F1 [3, 5] BW0 [5, 9] BW1 [9, 13]; device 0: BW0 [9, 11] BW1 [13, 15].
 * Makespan 15, busy 6 + 12 of 30: bubble 0.4. And with unit costs every
 * schedule simulates to its validated makespan and bubble. */
static void check_costs(void)
{
    rumor_schedule_t *s = NULL;
    CHECK_OK(rumor_schedule_build("gpipe", 2, 2, 0, &s));
    double cost[6] = { 1, 1, 1, 2, 2, 2 }, mk = 0, bub = 0;
    if (s)
        CHECK_OK(rumor_schedule_simulate(s, cost, &mk, &bub));
    CHECKF(mk == 15 && fabs(bub - 0.4) < 1e-12, "gpipe with costs: makespan %g, bubble %g", mk,
           bub);
    CHECK(s && s->makespan == 9 && s->acts[1][2].start == 3); /* unit starts kept */
    rumor_schedule_destroy(&s);
    static const char *specs[] = { "gpipe", "1f1b", "interleaved:2", "zb-h1", "zbv" };
    for (size_t k = 0; k < 5; k++) {
        CHECK_OK(rumor_schedule_build(specs[k], 4, 8, 0, &s));
        double unit[8 * 3];
        for (int i = 0; i < 24; i++)
            unit[i] = 1.0;
        if (s)
            CHECK_OK(rumor_schedule_simulate(s, unit, &mk, &bub));
        CHECKF(s && mk == s->makespan && fabs(bub - s->bubble) < 1e-12, "%s: unit costs give "
               "makespan %g, bubble %g; validated %d, %g", specs[k], mk, bub,
               s ? s->makespan : -1, s ? s->bubble : -1.0);
        rumor_schedule_destroy(&s);
        /* equal measured costs give the unit-cost lists */
        rumor_schedule_t *e = NULL;
        double eq[8 * 3];
        for (int i = 0; i < 24; i++)
            eq[i] = 0.25;
        CHECK_OK(rumor_schedule_build(specs[k], 4, 8, 0, &s));
        CHECK_OK(rumor_schedule_build_costed(specs[k], 4, 8, 0, eq, &e));
        int same = s && e;
        for (int d = 0; same && d < 4; d++)
            same = s->n[d] == e->n[d] &&
                   !memcmp(s->acts[d], e->acts[d], (size_t)s->n[d] * sizeof **s->acts);
        CHECKF(same, "%s: equal costs changed the lists", specs[k]);
        rumor_schedule_destroy(&s);
        rumor_schedule_destroy(&e);
    }
    /* F, B, W = 1.6, 1.3, 0.8 (a CPU's dense layers): zero-bubble lists
     * built for these costs leave no more idle at them than the unit-cost
     * lists do (zbv: much less), and still validate */
    for (size_t k = 3; k < 5; k++)
        for (int P = 2; P <= 4; P += 2) {
            int S = P * (k == 4 ? 2 : 1);
            double real[8 * 3], b0 = 0, b1 = 0;
            for (int st = 0; st < S; st++)
                real[st * 3] = 1.6, real[st * 3 + 1] = 1.3, real[st * 3 + 2] = 0.8;
            rumor_schedule_t *u = NULL, *c = NULL;
            CHECK_OK(rumor_schedule_build(specs[k], P, 16, 0, &u));
            CHECK_OK(rumor_schedule_build_costed(specs[k], P, 16, 0, real, &c));
            if (u && c) {
                CHECK_OK(rumor_schedule_simulate(u, real, &mk, &b0));
                CHECK_OK(rumor_schedule_simulate(c, real, &mk, &b1));
            }
            fprintf(stderr, "%s P=%d M=16 at F, B, W = 1.6, 1.3, 0.8: bubble %.3f with the "
                    "unit-cost lists, %.3f with lists for these costs\n", specs[k], P, b0, b1);
            /* zb-h1 keeps 1F1B's F and B order, which costs do not change;
             * zbv's order follows them and halves its bubble */
            CHECKF(k == 3 ? b1 <= b0 + 1e-12 : b1 < 0.6 * b0, "%s P=%d: the costed lists' "
                   "bubble %.4f, the unit lists' %.4f", specs[k], P, b1, b0);
            rumor_schedule_destroy(&u);
            rumor_schedule_destroy(&c);
        }
    double bad[6] = { 1, 1, NAN, 1, 1, 1 };
    rumor_schedule_t *x = NULL;
    CHECK_ERR(rumor_schedule_build_costed("zb-h1", 2, 4, 0, bad, &x), RUMOR_EINVAL,
              "stage 0's W cost nan");
}

static void check_refusals(void)
{
    rumor_schedule_t *s = NULL;
    CHECK_ERR(rumor_schedule_build("2f2b", 2, 4, 0, &s), RUMOR_EINVAL, "unknown");
    CHECK_ERR(rumor_schedule_build("interleaved:1", 2, 4, 0, &s), RUMOR_EINVAL, "[2, 16]");
    CHECK_ERR(rumor_schedule_build("interleaved:x", 2, 4, 0, &s), RUMOR_EINVAL, "V (chunks");
    CHECK_ERR(rumor_schedule_build("1f1b", 4, 3, 0, &s), RUMOR_EINVAL,
              "at least as many micro-batches as stages (3 < 4)");
    CHECK_ERR(rumor_schedule_build("zb-h1", 3, 2, 0, &s), RUMOR_EINVAL, "(2 < 3)");
    CHECK_ERR(rumor_schedule_build("interleaved:2", 2, 3, 0, &s), RUMOR_EINVAL,
              "must be a multiple of the stages (2)");
    CHECK_ERR(rumor_schedule_build("gpipe", 2, 0, 0, &s), RUMOR_EINVAL, "--microbatches 0");
    CHECK_ERR(rumor_schedule_build("gpipe", 0, 2, 0, &s), RUMOR_EINVAL, "--stages 0");
    CHECK_ERR(rumor_schedule_build("interleaved:2", 4, 8, 7, &s), RUMOR_EINVAL,
              "8 pieces, but it has 7 blocks");
    CHECK_OK(rumor_schedule_build("interleaved:2", 4, 8, 8, &s));
    rumor_schedule_destroy(&s);
}

/* A hand-made schedule of 2 devices, 2 micro-batches, fused backward, with
 * device 1's list given; device 0 runs F0 F1 BW0 BW1. */
static rumor_schedule_t *hand(const char *dev1)
{
    rumor_schedule_t *s = NULL;
    if (rumor_schedule_create(2, 1, 2, 8, &s) < 0)
        return NULL;
    static const struct { rumor_act_kind k; int m; } d0[] = {
        { RUMOR_ACT_F, 0 }, { RUMOR_ACT_F, 1 }, { RUMOR_ACT_BW, 0 }, { RUMOR_ACT_BW, 1 } };
    for (int i = 0; i < 4; i++)
        s->acts[0][s->n[0]++] = (rumor_action_t){ (uint8_t)d0[i].k, 0, (uint16_t)d0[i].m, -1 };
    /* "F0 X0 ..." : kind letter (F, B, W, X for BW) and micro-batch */
    for (const char *p = dev1; p[0] && p[1]; p += 3) {
        rumor_act_kind k = p[0] == 'F' ? RUMOR_ACT_F : p[0] == 'B' ? RUMOR_ACT_B
                           : p[0] == 'W' ? RUMOR_ACT_W : RUMOR_ACT_BW;
        s->acts[1][s->n[1]++] = (rumor_action_t){ (uint8_t)k, 0, (uint16_t)(p[1] - '0'), -1 };
        if (!p[2])
            break;
    }
    return s;
}

static void check_broken(void)
{
    static const struct { const char *dev1, *why; } bad[] = {
        { "X0 F0 F1 X1", "device 1: BW of stage 1 micro-batch 0 before its F" },
        { "F0 F1 X0", "device 1 lists no backward (BW, or B and W) of stage 1 micro-batch 1" },
        { "F0 F1 X0 X1 X1", "device 1: BW of stage 1 micro-batch 1 appears twice" },
        { "F0 F1 B0 X1", "device 1 lists no W of stage 1 micro-batch 0" },
        { "F0 F1 W0 B0 X1", "device 1: W of stage 1 micro-batch 0 before its B" },
        { "F0 F1 B0 W0 X0 X1", "stage 1 micro-batch 0 has both BW and a split backward" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rumor_schedule_t *s = hand(bad[i].dev1);
        CHECK(s != NULL);
        if (s)
            CHECK_ERR(rumor_schedule_validate(s), RUMOR_EINVAL, bad[i].why);
        rumor_schedule_destroy(&s);
    }
    /* a cycle between the two devices: device 0 runs BW0 before F1, so it
     * waits for device 1's BW0; device 1 lists F1 first, which waits for
     * device 0's F1 */
    rumor_schedule_t *s = NULL;
    CHECK_OK(rumor_schedule_create(2, 1, 2, 8, &s));
    if (s) {
        rumor_action_t d0[] = { { RUMOR_ACT_F, 0, 0, -1 }, { RUMOR_ACT_BW, 0, 0, -1 },
                                { RUMOR_ACT_F, 0, 1, -1 }, { RUMOR_ACT_BW, 0, 1, -1 } };
        rumor_action_t d1[] = { { RUMOR_ACT_F, 0, 1, -1 }, { RUMOR_ACT_F, 0, 0, -1 },
                                { RUMOR_ACT_BW, 0, 0, -1 }, { RUMOR_ACT_BW, 0, 1, -1 } };
        memcpy(s->acts[0], d0, sizeof d0);
        memcpy(s->acts[1], d1, sizeof d1);
        s->n[0] = s->n[1] = 4;
        CHECK_ERR(rumor_schedule_validate(s), RUMOR_EINVAL,
                  "deadlock: device 0 waits at BW of stage 0 micro-batch 0 for B of stage 1 "
                  "(device 1); device 1 waits at F of stage 1 micro-batch 1 for F of stage 0 "
                  "(device 0)");
        rumor_schedule_destroy(&s);
    }
    /* the same lists in a working order validate, and the simulation gives
     * GPipe's timeline */
    s = hand("F0 F1 X0 X1");
    CHECK(s && rumor_schedule_validate(s) == 0 && s->makespan == 9 &&
          fabs(s->bubble - 1.0 / 3.0) < 1e-12);
    rumor_schedule_destroy(&s);
}

int main(void)
{
    check_all();
    check_golden();
    check_costs();
    check_refusals();
    check_broken();
    return tu_finish("test_schedule");
}

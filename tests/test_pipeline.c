/* Pipelined steps (src/pipeline.h) against the unpipelined step.
 *
 * The reference is one stage holding the whole model that runs the same M
 * micro-batches one after another (forward, B, W each; dropout keyed by
 * (step, micro-batch, block) alike). For every schedule, P in {2, 3, 4}
 * CPU devices and M in {1, 2, 3, 4, 8} micro-batches where the schedule
 * runs, on an MLP of 10 blocks with GELU and dropout, every stage's
 * gradient must equal the reference's over its range (each stage adds its
 * micro-batches' weight gradients in the same order, so bit for bit), and
 * the loss too, with each stage holding only the activation slots its
 * schedule's peak needs (1F1B's stage s: P - s); for a few, ten SGD steps
 * give the same losses. */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "testutil.h"

#define SPEC "mlp:16-15-14-13-12-11-10-9-8-6:gelu:dropout=0.2"
enum { N = 8, IN = 16, CLASSES = 6 };

static rumor_device_t *devs[4];
static rumor_model_t *model;
static float X[N * IN];
static int32_t Y[N];
static rumor_optim_config_t sgd;

/* The reference: the whole model, batch b's M micro-batches one after
 * another. */
static void reference_of(rumor_stage_t *ref, const rumor_batch_t *b, int M, long step,
                         float *loss)
{
    long targets = rumor_batch_targets(b);
    CHECK_OK(rumor_stage_zero_grad(ref));
    double sum = 0;
    for (int m = 0; m < M; m++) {
        int row0, rows;
        rumor_pipeline_micro_rows(b->n, M, m, &row0, &rows);
        double part;
        CHECK_OK(rumor_stage_load(ref, 0, b, row0, rows));
        CHECK_OK(rumor_stage_forward(ref, 0, NULL, 1, step, m));
        CHECK_OK(rumor_stage_backward_b(ref, 0, NULL, 1.0f / (float)targets));
        CHECK_OK(rumor_stage_backward_w(ref, 0));
        CHECK_OK(rumor_stage_loss(ref, 0, &part, NULL));
        sum += part;
    }
    *loss = (float)(sum / (double)targets);
}

static void reference(rumor_stage_t *ref, int M, long step, float *loss)
{
    rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = N, .width = IN, .x = X, .y = Y };
    reference_of(ref, &b, M, step, loss);
}

static rumor_stage_t *new_reference(void)
{
    rumor_stage_config_t sc = { .model = model, .dev = devs[0], .first = 0,
                                .last = model->nblocks, .max_B = N, .T = 1, .slots = 1,
                                .seed = 5, .optim = &sgd };
    rumor_stage_t *ref = NULL;
    CHECK_OK(rumor_stage_create(&sc, &ref));
    return ref;
}

static rumor_pipeline_t *new_pipeline(const char *spec, int P, int M)
{
    rumor_pipeline_config_t pc = { .model = model, .devs = devs, .ndevs = P, .schedule = spec,
                                   .microbatches = M, .max_B = N, .T = 1, .seed = 5,
                                   .optim = &sgd };
    rumor_pipeline_t *p = NULL;
    if (rumor_pipeline_create(&pc, &p) < 0) {
        CHECKF(0, "%s P=%d M=%d: %s", spec, P, M, rumor_err_msg());
        return NULL;
    }
    return p;
}

/* How many gradient (or parameter) elements of the pipeline differ from
 * the whole model's, and the largest difference. */
static size_t compare(const rumor_pipeline_t *p, const rumor_stage_t *ref, int grads,
                      double *worst)
{
    size_t differ = 0, covered = 0;
    *worst = 0;
    for (int s = 0; s < p->S; s++) {
        const rumor_stage_t *st = p->st[s];
        const float *mine = grads ? st->grads : st->params;
        const float *want = (grads ? ref->grads : ref->params) + st->lo;
        for (size_t i = 0; i < st->n; i++) {
            double e = fabs((double)mine[i] - want[i]);
            differ += mine[i] != want[i];
            *worst = e > *worst ? e : *worst;
        }
        covered += st->n;
    }
    CHECK(covered == ref->n);
    return differ;
}

static void check_grads(void)
{
    static const char *specs[] = { "gpipe", "1f1b", "interleaved:2", "zb-h1", "zbv" };
    static const int Ps[] = { 2, 3, 4 }, Ms[] = { 1, 2, 3, 4, 8 };
    rumor_stage_t *ref = new_reference();
    int runs = 0;
    for (size_t k = 0; ref && k < 5; k++)
        for (size_t i = 0; i < 3; i++)
            for (size_t j = 0; j < 5; j++) {
                int P = Ps[i], M = Ms[j];
                int ok_combo = k == 0 || k == 4 || (k == 2 ? M % P == 0 : M >= P);
                if (!ok_combo)
                    continue;
                rumor_pipeline_t *p = new_pipeline(specs[k], P, M);
                if (!p)
                    continue;
                /* activation slots: the schedule's peak, not M */
                for (int s = 0; s < p->S; s++)
                    CHECKF(p->st[s]->nslots == p->sched->peak_stage[s] &&
                           (k != 1 || p->st[s]->nslots == P - s) &&
                           (k != 0 || p->st[s]->nslots == M),
                           "%s P=%d M=%d stage %d: %d slots, the schedule's peak %d", specs[k],
                           P, M, s, p->st[s]->nslots, p->sched->peak_stage[s]);
                double worst;
                CHECKF(compare(p, ref, 0, &worst) == 0, "%s P=%d M=%d: initial parameters "
                       "differ from the whole model's", specs[k], P, M);
                rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = N, .width = IN, .x = X,
                                    .y = Y };
                float lp = 0, lr = 0;
                CHECK_OK(rumor_pipeline_grads(p, &b, 7, &lp));
                reference(ref, M, 7, &lr);
                size_t differ = compare(p, ref, 1, &worst);
                CHECKF(differ == 0 && lp == lr, "%s P=%d M=%d: %zu gradient elements differ "
                       "(largest by %.3g), loss %.9g vs %.9g", specs[k], P, M, differ, worst,
                       (double)lp, (double)lr);
                runs++;
                rumor_pipeline_destroy(&p);
            }
    CHECK(runs == 15 + 9 + 6 + 9 + 15);
    fprintf(stderr, "%d pipelined steps (5 schedules, 2-4 devices, 1-8 micro-batches): every "
            "gradient equal to the unpipelined step's, bit for bit\n", runs);
    rumor_stage_destroy(&ref);
}

/* Waits filled with later Ws: device 0 throttled 20x, so device 1 waits
 * for every activation and runs its pending Ws meanwhile; the gradients stay
 * bit for bit the unpipelined step's (a stage's Ws still run in
 * micro-batch order: its Bs do). */
static void check_early_w(const char *spec)
{
    rumor_device_t *slow = NULL, *pair[2] = { NULL, devs[0] };
    CHECK_OK(rumor_device_open("cpu:1:slow=20", &slow));
    pair[0] = slow;
    rumor_pipeline_config_t pc = { .model = model, .devs = pair, .ndevs = 2, .schedule = spec,
                                   .microbatches = 4, .max_B = N, .T = 1, .seed = 5,
                                   .optim = &sgd };
    rumor_pipeline_t *p = NULL;
    rumor_stage_t *ref = new_reference();
    CHECK_OK(rumor_pipeline_create(&pc, &p));
    rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = N, .width = IN, .x = X, .y = Y };
    float lp = 0, lr = 0;
    double worst = 0;
    if (p && ref) {
        CHECK_OK(rumor_pipeline_grads(p, &b, 3, &lp));
        reference(ref, 4, 3, &lr);
        size_t differ = compare(p, ref, 1, &worst);
        CHECKF(p->early_w > 0 && differ == 0 && lp == lr, "%s, device 0 20x slower: %d Ws run "
               "early, %zu gradient elements differ", spec, p->early_w, differ);
        fprintf(stderr, "%s with a slow device: %d Ws filled waits, gradients equal\n", spec,
                p->early_w);
    }
    rumor_pipeline_destroy(&p);
    rumor_stage_destroy(&ref);
    rumor_device_close(&slow);
}

/* Re-planning for measured costs: a zero-bubble pipeline whose second
 * device is 3x slower rebuilds its lists from the step's times (or keeps
 * them when they are no worse); either way the lists validate, every stage
 * has the slots their peaks need, and the next step's gradients are still
 * bit for bit the unpipelined step's. Then the same for given costs (F, B,
 * W = 1.6, 1.3, 0.8), for which zbv's lists change: new lists, grown slots,
 * the same gradients. */
static void check_replan(const char *spec)
{
    rumor_device_t *slow = NULL, *pair[2] = { devs[0], NULL };
    CHECK_OK(rumor_device_open("cpu:1:slow=3", &slow));
    pair[1] = slow;
    rumor_pipeline_config_t pc = { .model = model, .devs = pair, .ndevs = 2, .schedule = spec,
                                   .microbatches = 8, .max_B = N, .T = 1, .seed = 5 };
    rumor_pipeline_t *p = NULL;
    rumor_stage_t *ref = new_reference();
    CHECK_OK(rumor_pipeline_create(&pc, &p));
    rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = N, .width = IN, .x = X, .y = Y };
    float lp = 0, lr = 0;
    double was = -1, now = -1;
    if (p && ref) {
        CHECK_OK(rumor_pipeline_grads(p, &b, 1, &lp));
        int rc = rumor_pipeline_replan(p, NULL, &was, &now);
        CHECKF(rc >= 0 && now <= was && was >= 0 && now >= 0, "%s: replan %d, bubble %.3f -> "
               "%.3f: %s", spec, rc, was, now, rumor_err_msg());
        CHECK(rumor_schedule_validate(p->sched) == 0);
        for (int s = 0; s < p->S; s++)
            CHECK(p->st[s]->nslots >= p->sched->peak_stage[s]);
        CHECK_OK(rumor_pipeline_grads(p, &b, 2, &lp));
        reference(ref, 8, 2, &lr);
        double worst;
        size_t differ = compare(p, ref, 1, &worst);
        CHECKF(differ == 0 && lp == lr, "%s after re-planning (%s): %zu gradient elements "
               "differ", spec, rc > 0 ? "new lists" : "kept", differ);
        fprintf(stderr, "%s with a 3x slower device: lists %s, simulated bubble %.3f -> %.3f\n",
                spec, rc > 0 ? "rebuilt" : "kept", was, now);
        double cost[8 * 3];
        for (int s = 0; s < p->S; s++)
            cost[s * 3] = 1.6, cost[s * 3 + 1] = 1.3, cost[s * 3 + 2] = 0.8;
        rc = rumor_pipeline_replan(p, cost, &was, &now);
        int want = !strcmp(spec, "zbv");
        CHECKF(rc == want && (want ? now < was : now == was), "%s: replan for F, B, W = 1.6, "
               "1.3, 0.8 gave %d, bubble %.3f -> %.3f", spec, rc, was, now);
        CHECK(rumor_schedule_validate(p->sched) == 0);
        for (int s = 0; s < p->S; s++)
            CHECK(p->st[s]->nslots >= p->sched->peak_stage[s]);
        CHECK_OK(rumor_pipeline_grads(p, &b, 3, &lp));
        reference(ref, 8, 3, &lr);
        differ = compare(p, ref, 1, &worst);
        CHECKF(differ == 0 && lp == lr, "%s after the given costs' lists: %zu gradient "
               "elements differ", spec, differ);
    }
    rumor_pipeline_destroy(&p);
    rumor_stage_destroy(&ref);
    rumor_device_close(&slow);
}

static void check_training(const char *spec, int P, int M)
{
    rumor_stage_t *ref = new_reference();
    rumor_pipeline_t *p = new_pipeline(spec, P, M);
    rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = N, .width = IN, .x = X, .y = Y };
    int same = 1;
    float first = 0, last = 0;
    for (long step = 0; ref && p && step < 10; step++) {
        float lp, lr;
        CHECK_OK(rumor_pipeline_grads(p, &b, step, &lp));
        reference(ref, M, step, &lr);
        same &= lp == lr;
        if (step == 0)
            first = lr;
        last = lr;
        CHECK_OK(rumor_pipeline_update(p));
        CHECK_OK(rumor_stage_step(ref));
    }
    double worst = 0;
    if (ref && p)
        CHECKF(same && compare(p, ref, 0, &worst) == 0 && last < first,
               "%s P=%d M=%d: ten SGD steps: losses the same %d, parameters differ by %.3g, "
               "loss %.4f -> %.4f", spec, P, M, same, worst, (double)first, (double)last);
    rumor_pipeline_destroy(&p);
    rumor_stage_destroy(&ref);
}

/* The slowest stage of a cut, from a cost table (as the planner counts). */
static double slowest(const double *cost, const double *xfer, int nb, const int *dev_of, int S,
                      int M, const int *cuts)
{
    double worst = 0;
    for (int s = 0; s < S; s++) {
        double t = 0;
        for (int k = cuts[s]; k < cuts[s + 1]; k++)
            t += cost[dev_of[s] * nb + k];
        t = t * M + (s < S - 1 ? M * xfer[cuts[s + 1] - 1] : 0);
        worst = t > worst ? t : worst;
    }
    return worst;
}

/* The best slowest stage over every cut, by enumeration. */
static double brute(const double *cost, const double *xfer, int nb, const int *dev_of, int S,
                    int M, int *cuts, int s)
{
    if (s == S)
        return cuts[S - 1] < nb ? slowest(cost, xfer, nb, dev_of, S, M, cuts) : 1e300;
    double best = 1e300;
    for (int c = cuts[s - 1] + 1; c <= nb - (S - s); c++) {
        cuts[s] = c;
        double v = brute(cost, xfer, nb, dev_of, S, M, cuts, s + 1);
        best = v < best ? v : best;
    }
    return best;
}

/* The profile's planner against enumeration: unlike devices (one twice as
 * slow gets half the blocks), and random cost tables over round-robin and
 * V-shaped placements. */
static void check_plan(void)
{
    enum { NB = 8 };
    double cost[3 * NB], xfer[NB] = { 0 };
    int cuts[7], ref[7], dev_of[6];
    for (int k = 0; k < 6; k++)
        cost[k] = 1.0, cost[6 + k] = 2.0;
    rumor_schedule_placement(RUMOR_SCHED_1F1B, 2, 1, dev_of);
    CHECK_OK(rumor_pipeline_plan(cost, xfer, 6, 2, dev_of, 2, 4, cuts, NULL));
    CHECKF(cuts[0] == 0 && cuts[1] == 4 && cuts[2] == 6, "a device twice as slow: cut at %d, "
           "expected 4", cuts[1]);
    unsigned long long seed = 11;
    int cases = 0;
    rumor_schedule_placement(RUMOR_SCHED_ZBV, 3, 2, dev_of);
    CHECK(dev_of[0] == 0 && dev_of[2] == 2 && dev_of[3] == 2 && dev_of[5] == 0);
    for (int P = 1; P <= 3; P++)
        for (int V = 1; V <= 3; V++)
            for (int r = 0; r < 20; r++) {
                int S = P * V;
                if (V == 3 && P == 3)
                    continue;
                /* V = 3 stands for the V shape (2 chunks) */
                rumor_schedule_placement(V == 3 ? RUMOR_SCHED_ZBV : RUMOR_SCHED_INTERLEAVED, P,
                                         V == 3 ? 2 : V, dev_of);
                if (V == 3)
                    S = 2 * P;
                if (S > NB)
                    continue;
                for (int i = 0; i < P * NB; i++)
                    cost[i] = 0.1 + (tu_randu(&seed) % 1000) / 100.0;
                for (int k = 0; k < NB; k++)
                    xfer[k] = (tu_randu(&seed) % 100) / 100.0;
                double st[6];
                CHECK_OK(rumor_pipeline_plan(cost, xfer, NB, P, dev_of, S, 3, cuts, st));
                int valid = cuts[0] == 0 && cuts[S] == NB;
                for (int s = 0; s < S; s++)
                    valid &= cuts[s + 1] > cuts[s];
                ref[0] = 0;
                ref[S] = NB;
                double want = S == 1 ? slowest(cost, xfer, NB, dev_of, 1, 3, ref)
                                     : brute(cost, xfer, NB, dev_of, S, 3, ref, 1);
                double got = slowest(cost, xfer, NB, dev_of, S, 3, cuts), mx = 0;
                for (int s = 0; s < S; s++)
                    mx = st[s] > mx ? st[s] : mx;
                CHECKF(valid && fabs(got - want) < 1e-9 * want && fabs(mx - got) < 1e-9 * got,
                       "P=%d V=%d: the plan's slowest stage %.6f, the best cut's %.6f", P, V, got,
                       want);
                cases++;
            }
    CHECK(cases == 160);
}

/* --partition profile on unlike devices: a CPU device throttled 4x
 * (cpu:1:slow=4) gets fewer blocks of a model of equal layers than a plain
 * one, whichever side of the pipeline it is on (timings under load vary,
 * so no closer bound: the planner's optimum is checked in check_plan). */
static void check_profile_unlike(void)
{
    rumor_model_t *eq = NULL;
    rumor_device_t *slow = NULL;
    CHECK_OK(rumor_model_create("mlp:256-256-256-256-256-256-256-256-10", 0, &eq));
    CHECK_OK(rumor_device_open("cpu:1:slow=4", &slow));
    if (!eq || !slow)
        return;
    enum { R = 64 };
    static float x[R * 256];
    static int32_t y[R];
    for (int i = 0; i < R * 256; i++)
        x[i] = (float)(i % 17) / 17.0f - 0.5f;
    for (int i = 0; i < R; i++)
        y[i] = i % 10;
    rumor_batch_t b = { .kind = RUMOR_BATCH_IMAGES, .n = R, .width = 256, .x = x, .y = y };
    int nb = eq->nblocks, dev_of[2] = { 0, 1 };
    for (int side = 0; side < 2; side++) {
        rumor_device_t *pair[2] = { side ? slow : devs[0], side ? devs[0] : slow };
        int cuts[3];
        double pred[2];
        CHECK_OK(rumor_pipeline_profile(eq, pair, 2, dev_of, 2, &b, 2, 1, 1, cuts, pred));
        int on_slow = side ? cuts[1] : nb - cuts[1], on_fast = nb - on_slow;
        CHECKF(on_slow < on_fast, "slow device as stage %d: %d of %d blocks (cut at %d)",
               side ? 0 : 1, on_slow, nb, cuts[1]);
        double lo = pred[0] < pred[1] ? pred[0] : pred[1];
        fprintf(stderr, "profile, slow device as stage %d: cut at %d of %d blocks, predicted "
                "%.3f and %.3f ms\n", side ? 0 : 1, cuts[1], nb, 1e3 * pred[0], 1e3 * pred[1]);
        CHECKF(lo > 0, "a planned stage's time is %g", lo); /* the plan's optimality:
                                                               * check_plan */
    }
    rumor_device_close(&slow);
    rumor_model_destroy(&eq);
}

static void check_refusals(void)
{
    rumor_pipeline_t *p = NULL;
    rumor_pipeline_config_t pc = { .model = model, .devs = devs, .ndevs = 4,
                                   .schedule = "interleaved:3", .microbatches = 4, .max_B = N,
                                   .T = 1, .seed = 5 };
    CHECK_ERR(rumor_pipeline_create(&pc, &p), RUMOR_EINVAL, "12 pieces, but it has 10 blocks");
    pc.schedule = "1f1b";
    pc.microbatches = 16;
    CHECK_ERR(rumor_pipeline_create(&pc, &p), RUMOR_EINVAL, "16 micro-batches of a batch of 8");
    pc.microbatches = 4;
    int bad[] = { 0, 3, 3, 7, 10 };
    pc.cuts = bad;
    CHECK_ERR(rumor_pipeline_create(&pc, &p), RUMOR_EINVAL, "stage 1 would hold blocks [3, 3)");
    int short_cut[] = { 0, 2, 4, 6, 9 };
    pc.cuts = short_cut;
    CHECK_ERR(rumor_pipeline_create(&pc, &p), RUMOR_EINVAL, "cover blocks [0, 9) of the "
                                                            "model's [0, 10)");
    int good[] = { 0, 1, 2, 3, 10 };
    pc.cuts = good;
    CHECK_OK(rumor_pipeline_create(&pc, &p));
    if (p)
        CHECK(p->st[3]->first == 3 && p->st[3]->last == 10);
    rumor_pipeline_destroy(&p);
    /* partitions: uniform, by parameters (brute force: the 2-way cut whose
     * halves differ least), block ranges and their errors */
    int cuts[5];
    CHECK_OK(rumor_pipeline_partition(model, "uniform", 4, cuts));
    CHECK(cuts[0] == 0 && cuts[1] == 2 && cuts[2] == 5 && cuts[3] == 7 && cuts[4] == 10);
    CHECK_OK(rumor_pipeline_partition(model, "params", 2, cuts));
    size_t best = 0, bestd = (size_t)-1;
    for (int c = 1; c < model->nblocks; c++) {
        size_t a = model->blocks[c - 1].hi, b = model->nparams - a, dd = a > b ? a - b : b - a;
        if (dd < bestd)
            bestd = dd, best = (size_t)c;
    }
    CHECKF(cuts[0] == 0 && cuts[1] == (int)best && cuts[2] == 10, "params cut at %d, expected %zu",
           cuts[1], best);
    CHECK_OK(rumor_pipeline_partition(model, "0-3,4,5-9", 3, cuts));
    CHECK(cuts[1] == 4 && cuts[2] == 5 && cuts[3] == 10);
    CHECK_ERR(rumor_pipeline_partition(model, "0-3,x", 2, cuts), RUMOR_EINVAL, "at offset 4");
    CHECK_ERR(rumor_pipeline_partition(model, "0-4,5-9,", 3, cuts), RUMOR_EINVAL,
              "2 stages covering blocks 0-9");
    CHECK_ERR(rumor_pipeline_partition(model, "uniform", 11, cuts), RUMOR_EINVAL,
              "11 stages for a model of 10 blocks");
}

/* A small GPT cut into stages: the head shares the token embedding with
 * the first block, so the stage holding the head keeps a copy and its part
 * of the gradient is added into the embedding's stage. For every schedule,
 * P in {2, 3} and M in {1, 2, 3, 4, 8} where it runs, the gradient equals
 * the whole model's over the same micro-batches: bit for bit everywhere but
 * the token embedding, whose two parts add in another order when the head
 * is on another stage (there within 1e-6 of its norm); the loss too; and
 * ten AdamW steps follow the whole model's losses. */
enum { GN = 8, GT = 8, GV = 23 };
static int32_t gtok[GN * GT], gy[GN * GT];

static void gpt_reference(rumor_stage_t *ref, int M, long step, float *loss)
{
    rumor_batch_t b = { .kind = RUMOR_BATCH_TOKENS, .n = GN, .width = GT, .tok = gtok, .y = gy };
    reference_of(ref, &b, M, step, loss);
}

static void check_gpt(void)
{
    rumor_model_t *gpt = NULL;
    CHECK_OK(rumor_model_create("gpt:layers=4,dim=16,heads=2,ctx=8,vocab=23,dropout=0.1", 0,
                                &gpt));
    if (!gpt)
        return;
    unsigned long long seed = 9;
    for (int i = 0; i < GN * GT; i++)
        gtok[i] = (int32_t)(tu_randu(&seed) % GV);
    for (int i = 0; i < GN * GT; i++) /* the next token, and a fresh one at each window's end */
        gy[i] = (i + 1) % GT ? gtok[i + 1] : (int32_t)(tu_randu(&seed) % GV);
    size_t wte = (size_t)GV * 16; /* the token embedding: offsets [0, wte) */
    rumor_optim_config_t adam;
    rumor_optim_config_default(&adam);
    adam.kind = RUMOR_OPT_ADAMW;
    adam.lr = 3e-3f;
    rumor_stage_config_t sc = { .model = gpt, .dev = devs[0], .first = 0, .last = gpt->nblocks,
                                .max_B = GN, .T = GT, .slots = 1, .seed = 5, .optim = &adam };
    rumor_stage_t *ref = NULL;
    CHECK_OK(rumor_stage_create(&sc, &ref));
    static const char *specs[] = { "gpipe", "1f1b", "interleaved:2", "zb-h1", "zbv" };
    static const int Ps[] = { 2, 3 }, Ms[] = { 1, 2, 3, 4, 8 };
    int runs = 0, split = 0;
    for (size_t k = 0; ref && k < 5; k++)
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 5; j++) {
                int P = Ps[i], M = Ms[j];
                if (k != 0 && k != 4 && (k == 2 ? M % P != 0 : M < P))
                    continue;
                rumor_pipeline_config_t pc = { .model = gpt, .devs = devs, .ndevs = P,
                                               .schedule = specs[k], .microbatches = M,
                                               .max_B = GN, .T = GT, .seed = 5 };
                rumor_pipeline_t *p = NULL;
                CHECK_OK(rumor_pipeline_create(&pc, &p));
                if (!p)
                    continue;
                rumor_batch_t b = { .kind = RUMOR_BATCH_TOKENS, .n = GN, .width = GT,
                                    .tok = gtok, .y = gy };
                float lp = 0, lr = 0;
                CHECK_OK(rumor_pipeline_grads(p, &b, 4, &lp));
                gpt_reference(ref, M, 4, &lr);
                size_t differ = 0;
                double d2 = 0, r2 = 0;
                for (int s = 0; s < p->S; s++) {
                    const rumor_stage_t *st = p->st[s];
                    for (size_t e = 0; e < st->n; e++) {
                        size_t off = st->lo + e;
                        double g = st->grads[e], want = ref->grads[off];
                        if (off < wte) {
                            d2 += (g - want) * (g - want);
                            r2 += want * want;
                        } else {
                            differ += st->grads[e] != ref->grads[off];
                        }
                    }
                    split += st->tied != NULL;
                }
                CHECKF(differ == 0 && d2 <= 1e-12 * r2 && fabs(lp - lr) <= 1e-6 * fabs(lr),
                       "gpt %s P=%d M=%d: %zu gradient elements off the embedding differ, the "
                       "embedding's by %.3g of its norm, loss %.9g vs %.9g", specs[k], P, M,
                       differ, sqrt(d2 / (r2 > 0 ? r2 : 1)), (double)lp, (double)lr);
                runs++;
                rumor_pipeline_destroy(&p);
            }
    CHECKF(runs == 10 + 7 + 4 + 7 + 10 && split == runs, "%d runs, %d with the head apart", runs,
           split);
    fprintf(stderr, "%d pipelined GPT steps (the head's embedding copy on another stage): "
            "gradients equal to the whole model's\n", runs);
    /* ten AdamW steps: the same losses (to float rounding) */
    rumor_pipeline_config_t pc = { .model = gpt, .devs = devs, .ndevs = 2, .schedule = "zbv",
                                   .microbatches = 4, .max_B = GN, .T = GT, .seed = 5,
                                   .optim = &adam };
    rumor_pipeline_t *p = NULL;
    rumor_stage_destroy(&ref);
    CHECK_OK(rumor_stage_create(&sc, &ref));
    CHECK_OK(rumor_pipeline_create(&pc, &p));
    rumor_batch_t b = { .kind = RUMOR_BATCH_TOKENS, .n = GN, .width = GT, .tok = gtok, .y = gy };
    float first = 0, last = 0, worst = 0;
    for (long step = 0; p && ref && step < 10; step++) {
        float lp, lr;
        CHECK_OK(rumor_pipeline_grads(p, &b, step, &lp));
        gpt_reference(ref, 4, step, &lr);
        float e = fabsf(lp - lr) / lr;
        worst = e > worst ? e : worst;
        if (step == 0)
            first = lr;
        last = lr;
        CHECK_OK(rumor_pipeline_update(p));
        CHECK_OK(rumor_stage_step(ref));
    }
    CHECKF(worst < 1e-5f && last < first, "gpt zbv: ten AdamW steps: losses differ by %.3g "
           "relative, loss %.4f -> %.4f", (double)worst, (double)first, (double)last);
    rumor_pipeline_destroy(&p);
    rumor_stage_destroy(&ref);
    rumor_model_destroy(&gpt);
}

int main(void)
{
    for (int i = 0; i < 4; i++)
        if (rumor_device_open("cpu:1", &devs[i]) < 0)
            TEST_SKIP("no CPU device: %s", rumor_err_msg());
    CHECK_OK(rumor_model_create(SPEC, 0, &model));
    if (!model)
        return tu_finish("test_pipeline");
    CHECK(model->nblocks == 10);
    unsigned long long seed = 3;
    for (int i = 0; i < N * IN; i++)
        X[i] = tu_randf(&seed);
    for (int i = 0; i < N; i++)
        Y[i] = (int32_t)(tu_randu(&seed) % CLASSES);
    rumor_optim_config_default(&sgd);
    sgd.lr = 0.1f;
    sgd.momentum = 0.9f;
    sgd.nesterov = 1;
    check_grads();
    check_training("1f1b", 2, 4);
    check_training("zb-h1", 3, 4);
    check_training("interleaved:2", 2, 4);
    check_training("gpipe", 4, 8);
    check_training("zbv", 3, 5);
    check_replan("zb-h1");
    check_replan("zbv");
    check_early_w("zb-h1");
    check_early_w("zbv");
    check_plan();
    check_profile_unlike();
    check_refusals();
    check_gpt();
    rumor_model_destroy(&model);
    for (int i = 0; i < 4; i++)
        rumor_device_close(&devs[i]);
    return tu_finish("test_pipeline");
}

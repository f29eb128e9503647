/* The peer object (swarm/peer.h) and its round strategies, with peers
 * run in one process: three rumor_peer_t, a thread each, gossip over
 * loopback, training the MLP on Fashion-MNIST shards. Each strategy's
 * parameters after a few rounds are compared with a second implementation
 * of the same algorithm written here from the papers' formulas with the
 * trainer's primitives (gradient, optimizer step) and the topology's
 * weights:
 *   D-PSGD (Lian et al. 2017): x_i(k+1) = sum_j W_ij x_j(k) - lr * step(g_i(x_i(k)))
 *     plain, and stepped cell by cell with send-ahead: the same numbers;
 *   local SGD: H - 1 local steps, then the D-PSGD round;
 *   an outer SGD optimizer (DiLoCo on a graph): H local steps from the
 *     anchor a, then a <- a + lr_out * (sum_j W_ij y_j - a);
 *   the same over --outer-rounds period on base:3:1 (three rounds of one
 *     neighbour at most): a <- a + lr_out * (mean_j y_j - a), the exact
 *     average, which the reference takes directly (not from the graphs);
 *   the all-reduce baseline: x_i(k+1) = x_i(k) - lr * step(mean_j g_j).
 * Asynchronous D-PSGD and balanced batches depend on timing: they must
 * run their rounds and mix. Each run must pick the strategy the rules of
 * swarm/strategy.h give its modes, and a peer stopped at a round leaves
 * there with a checkpoint. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "peer.h"
#include "testutil.h"
#include "topology.h"

#define NP 3        /* peers */
#define ROUNDS 5

typedef struct {
    const char *name;
    rumor_peer_mode mode;
    int local_steps, send_ahead, balance;
    const char *outer;
    double outer_lr;   /* the reference's outer step (0: none) */
    const char *strategy; /* the round strategy the peers must pick */
    const char *topo_spec; /* NULL: complete:3 */
    int exact;         /* 1: --outer-rounds period, the reference mixes by the mean;
                        * 2: and --outer optim, the reference is the all-reduce's
                        * step on the mean gradient; 3: the same with AdamW */
    int rounds;        /* 0: ROUNDS */
    int fragments, overlap; /* streaming (0: 1 fragment, no overlap) */
} scenario_t;

static int scenario_rounds(const scenario_t *s) { return s->rounds ? s->rounds : ROUNDS; }

typedef struct {
    int rank;
    rumor_peer_config_t cfg;
    rumor_peer_t *peer;
    int rc;
    float *params;     /* the peer's parameters at the end */
    size_t n;
    rumor_peer_result_t res;
    char strategy[16];
    long stop_at;      /* > 0: the peer is stopped once it reached this round */
} slot_t;

static char eps[NP][64];
static const char *ep[NP];
static rumor_topo_t *topo;
static char data_spec[512];

static void trainer_config(rumor_trainer_config_t *tc, int rank, const scenario_t *s)
{
    rumor_trainer_config_default(tc);
    tc->data = data_spec;
    tc->model = "mlp:784-12-10";
    tc->threads = 1;
    tc->rank = rank;
    tc->world = NP;
    tc->batch = 16;
    tc->seed = 7;
    tc->train_limit = 3000;
    tc->optim.lr = 0.1;
    if (s && s->exact == 3) {
        tc->optim.kind = RUMOR_OPT_ADAMW;
        tc->optim.lr = 0.01f;
    }
    tc->eval_batches = 0;
}

static long timed_rounds; /* > 0: the rounds of a timed scenario */

static void peer_config(rumor_peer_config_t *c, const scenario_t *s, int rank)
{
    rumor_peer_config_default(c);
    trainer_config(&c->trainer, rank, s);
    c->mode = s->mode;
    c->rounds = timed_rounds > 0 ? timed_rounds : scenario_rounds(s);
    c->local_steps = s->local_steps;
    c->send_ahead = s->send_ahead;
    c->balance = s->balance;
    c->outer = s->outer;
    c->outer_rounds = s->exact ? 0 : 1;
    c->fragments = s->fragments ? s->fragments : 1;
    c->overlap = s->overlap;
    c->rank = rank;
    c->npeers = NP;
    c->quiet = 1;
    c->no_average = 1;
    c->allow_alone = 0;
    c->mixer.topo = topo;
    c->mixer.self = rank;
    c->mixer.endpoints = ep;
    c->mixer.swarm = rumor_wire_swarm_id("test_peer");
    c->mixer.round_timeout = 20;
    c->mixer.min_round_timeout = 20; /* a fixed deadline: every round complete */
}

/* the peer's figures after each round: stops it at its stop_at round, as a
 * signal handler would (from the run's thread here) */
static void observe(void *arg, const rumor_peer_stats_t *st, rumor_peer_phase phase)
{
    slot_t *s = arg;
    (void)phase;
    if (s->stop_at > 0 && st->round >= s->stop_at && s->peer)
        rumor_peer_stop(s->peer, 15);
}

static void *run_peer(void *arg)
{
    slot_t *s = arg;
    s->rc = rumor_peer_create(&s->cfg, &s->peer);
    if (s->rc < 0) {
        fprintf(stderr, "peer %d: create: %s\n", s->rank, rumor_err_msg());
        return NULL;
    }
    s->rc = rumor_peer_run(s->peer);
    if (s->rc < 0)
        fprintf(stderr, "peer %d: run: %s\n", s->rank, rumor_err_msg());
    s->res = *rumor_peer_result(s->peer);
    snprintf(s->strategy, sizeof s->strategy, "%s", rumor_peer_strategy(s->peer));
    const float *x = rumor_peer_params(s->peer, &s->n);
    s->params = malloc(s->n * sizeof(float));
    if (s->params)
        memcpy(s->params, x, s->n * sizeof(float));
    rumor_peer_destroy(&s->peer);
    return NULL;
}

/* Runs NP peers of scenario s in threads. */
static void run_swarm(const scenario_t *s, slot_t *slot)
{
    pthread_t th[NP];
    for (int i = 0; i < NP; i++) {
        slot[i].rank = i;
        peer_config(&slot[i].cfg, s, i);
        CHECK_OK(rumor_peer_config_check(&slot[i].cfg));
        pthread_create(&th[i], NULL, run_peer, &slot[i]);
    }
    for (int i = 0; i < NP; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NP; i++) {
        CHECKF(slot[i].rc == 0 && slot[i].params, "%s: peer %d ran", s->name, i);
        CHECKF(!strcmp(slot[i].strategy, s->strategy), "%s: peer %d ran strategy '%s', not '%s'",
               s->name, i, slot[i].strategy, s->strategy);
    }
}

/* ------------------------------------------------ the second implementation */

typedef struct {
    rumor_trainer_t *tr[NP];
    float *x[NP];   /* each peer's parameters (the trainer is bound to them) */
    float *a[NP];   /* outer: the anchors */
    size_t n;
} ref_t;

static void ref_open(ref_t *r, const scenario_t *s)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < NP; i++) {
        rumor_trainer_config_t tc;
        trainer_config(&tc, i, s);
        tc.lockstep = 1;
        tc.host_params = 1;
        tc.steps = (long)scenario_rounds(s) / (s->exact ? topo->period : 1) * s->local_steps /
                   (s->fragments ? s->fragments : 1);
        CHECK_OK(rumor_trainer_create(&tc, &r->tr[i]));
        r->n = rumor_trainer_model(r->tr[i])->nparams;
        r->x[i] = malloc(r->n * sizeof(float));
        r->a[i] = malloc(r->n * sizeof(float));
        memcpy(r->x[i], rumor_trainer_params(r->tr[i]), r->n * sizeof(float));
        memcpy(r->a[i], r->x[i], r->n * sizeof(float));
        CHECK_OK(rumor_trainer_bind(r->tr[i], r->x[i]));
    }
}

static void ref_close(ref_t *r)
{
    for (int i = 0; i < NP; i++) {
        rumor_trainer_destroy(&r->tr[i]);
        free(r->x[i]);
        free(r->a[i]);
    }
}

/* one optimizer step of peer i on its own data */
static void ref_local_step(ref_t *r, int i)
{
    long t = rumor_trainer_optim_steps(r->tr[i]), ex;
    float loss;
    CHECK_OK(rumor_trainer_grads_many(r->tr[i], t, 1, &loss, &ex));
    CHECK_OK(rumor_trainer_update(r->tr[i], NULL));
}

static void ref_grad(ref_t *r, int i)
{
    long t = rumor_trainer_optim_steps(r->tr[i]);
    rumor_batch_t b;
    float loss;
    CHECK_OK(rumor_trainer_batch(r->tr[i], t, &b));
    CHECK_OK(rumor_trainer_grads(r->tr[i], &b, t, &loss));
}

/* mix[i] = sum_j W_ij y_j over n elements, from the topology's weights */
static void ref_mix_n(float *const *y, float **mix, size_t n)
{
    for (int i = 0; i < NP; i++) {
        int nb[NP];
        double w[NP];
        int d = rumor_topo_neighbors(topo, i, 0, nb, w, NP);
        double ws = rumor_topo_self_weight(topo, i, 0);
        for (size_t e = 0; e < n; e++) {
            double v = ws * y[i][e];
            for (int q = 0; q < d; q++)
                v += w[q] * y[nb[q]][e];
            mix[i][e] = (float)v;
        }
    }
}

static void ref_mix(ref_t *r, float *const *y, float **mix)
{
    ref_mix_n(y, mix, r->n);
}

/* Streaming DiLoCo on the graph, written from its description: round k
 * sends fragment f = k mod F (the F equal runs of the parameters) after
 * H/F - S local steps, takes S more, then the fragment's anchor steps on
 * the mix of what was sent and x_f = alpha x_f + (1 - alpha) a_f. */
static void ref_streaming(ref_t *r, const scenario_t *s)
{
    int F = s->fragments, S = s->overlap, h = s->local_steps / F;
    float alpha = S ? 0.5f : 0.0f;
    size_t flen = (r->n + (size_t)F - 1) / (size_t)F;
    float *y[NP], *mix[NP];
    for (int i = 0; i < NP; i++) {
        y[i] = malloc(flen * sizeof(float));
        mix[i] = malloc(flen * sizeof(float));
    }
    for (int k = 0; k < scenario_rounds(s); k++) {
        size_t lo = (size_t)(k % F) * flen, len = r->n - lo < flen ? r->n - lo : flen;
        for (int i = 0; i < NP; i++) {
            for (int q = 0; q < h - S; q++)
                ref_local_step(r, i);
            memcpy(y[i], r->x[i] + lo, len * sizeof(float));
            for (int q = 0; q < S; q++)
                ref_local_step(r, i);
        }
        ref_mix_n(y, mix, len);
        for (int i = 0; i < NP; i++) {
            for (size_t e = 0; e < len; e++) {
                float *a = &r->a[i][lo + e], *x = &r->x[i][lo + e];
                *a = *a + (float)s->outer_lr * (mix[i][e] - *a);
                *x = alpha * *x + (1 - alpha) * *a;
            }
            CHECK_OK(rumor_trainer_bind(r->tr[i], r->x[i]));
        }
    }
    for (int i = 0; i < NP; i++) {
        free(y[i]);
        free(mix[i]);
    }
}

/* every peer's optimizer steps on the mean of their gradients (the
 * all-reduce's step, and one process's with NP times the batch) */
static void ref_mean_grad_step(ref_t *r)
{
    for (int i = 0; i < NP; i++)
        ref_grad(r, i);
    float *g[NP];
    for (int i = 0; i < NP; i++)
        g[i] = rumor_trainer_flat_grads(r->tr[i]);
    for (size_t e = 0; e < r->n; e++) {
        double m = 0;
        for (int i = 0; i < NP; i++)
            m += g[i][e];
        for (int i = 0; i < NP; i++)
            g[i][e] = (float)(m / NP);
    }
    for (int i = 0; i < NP; i++)
        CHECK_OK(rumor_trainer_update(r->tr[i], NULL));
}

static void ref_run(ref_t *r, const scenario_t *s)
{
    if (s->fragments) {
        ref_streaming(r, s);
        return;
    }
    float *mix[NP];
    for (int i = 0; i < NP; i++)
        mix[i] = malloc(r->n * sizeof(float));
    if (s->exact >= 2) { /* rounds / period steps on the peers' mean gradient */
        for (int k = 0; k < scenario_rounds(s) / topo->period; k++) {
            ref_mean_grad_step(r);
        }
        for (int i = 0; i < NP; i++)
            free(mix[i]);
        return;
    }
    if (s->exact) { /* rounds / period outer steps over the exact average */
        for (int k = 0; k < scenario_rounds(s) / topo->period; k++) {
            for (int i = 0; i < NP; i++)
                for (int h = 0; h < s->local_steps; h++)
                    ref_local_step(r, i);
            for (size_t e = 0; e < r->n; e++) {
                double m = 0;
                for (int i = 0; i < NP; i++)
                    m += r->x[i][e];
                for (int i = 0; i < NP; i++)
                    mix[i][e] = (float)(m / NP);
            }
            for (int i = 0; i < NP; i++) {
                for (size_t e = 0; e < r->n; e++)
                    r->x[i][e] = r->a[i][e] =
                        r->a[i][e] + (float)s->outer_lr * (mix[i][e] - r->a[i][e]);
                CHECK_OK(rumor_trainer_bind(r->tr[i], r->x[i]));
            }
        }
        for (int i = 0; i < NP; i++)
            free(mix[i]);
        return;
    }
    for (int k = 0; k < ROUNDS; k++) {
        if (s->mode == RUMOR_PEER_ALLREDUCE) {
            ref_mean_grad_step(r);
            continue;
        }
        if (s->outer_lr > 0) {
            for (int i = 0; i < NP; i++)
                for (int h = 0; h < s->local_steps; h++)
                    ref_local_step(r, i);
            ref_mix(r, r->x, mix);
            for (int i = 0; i < NP; i++) {
                for (size_t e = 0; e < r->n; e++)
                    r->x[i][e] = r->a[i][e] =
                        r->a[i][e] + (float)s->outer_lr * (mix[i][e] - r->a[i][e]);
                CHECK_OK(rumor_trainer_bind(r->tr[i], r->x[i]));
            }
            continue;
        }
        for (int i = 0; i < NP; i++) {
            for (int h = 1; h < s->local_steps; h++)
                ref_local_step(r, i);
            ref_grad(r, i); /* at x_i(k) */
        }
        ref_mix(r, r->x, mix);
        for (int i = 0; i < NP; i++) {
            memcpy(r->x[i], mix[i], r->n * sizeof(float));
            CHECK_OK(rumor_trainer_bind(r->tr[i], r->x[i]));
            CHECK_OK(rumor_trainer_update(r->tr[i], NULL));
        }
    }
    for (int i = 0; i < NP; i++)
        free(mix[i]);
}

/* The largest difference from the reference, relative to the parameters'
 * scale, and how far the peers moved from where they started (a run that
 * did nothing must not pass). */
static void compare(const scenario_t *s, slot_t *slot)
{
    ref_t r;
    ref_open(&r, s);
    float *x0 = malloc(r.n * sizeof(float));
    memcpy(x0, r.x[0], r.n * sizeof(float));
    ref_run(&r, s);
    for (int i = 0; i < NP; i++) {
        if (!slot[i].params || slot[i].n != r.n) {
            CHECKF(0, "%s: peer %d has %zu parameters, the model %zu", s->name, i, slot[i].n, r.n);
            continue;
        }
        double diff = 0, scale = 0, moved = 0;
        for (size_t e = 0; e < r.n; e++) {
            diff = fmax(diff, fabs((double)slot[i].params[e] - r.x[i][e]));
            scale = fmax(scale, fabs((double)r.x[i][e]));
            moved = fmax(moved, fabs((double)r.x[i][e] - x0[e]));
        }
        fprintf(stderr, "  %-22s peer %d: max |x - reference| %.3g (parameters up to %.3g, "
                        "moved up to %.3g), rounds mixed %llu\n",
                s->name, i, diff, scale, moved,
                (unsigned long long)slot[i].res.counters.rounds_mixed);
        CHECKF(moved > 1e-3, "%s: the reference moved (%g)", s->name, moved);
        CHECKF(diff <= 1e-4 * (1 + scale), "%s: peer %d is %g from the reference", s->name, i,
               diff);
        CHECKF(slot[i].res.rounds_run == scenario_rounds(s) &&
                   slot[i].res.rounds == scenario_rounds(s),
               "%s: peer %d ran %ld of %ld rounds", s->name, i, slot[i].res.rounds_run,
               slot[i].res.rounds);
    }
    free(x0);
    ref_close(&r);
}

static void free_slots(slot_t *slot)
{
    for (int i = 0; i < NP; i++) {
        free(slot[i].params);
        slot[i].params = NULL;
    }
}

static void test_against_reference(const scenario_t *s)
{
    slot_t slot[NP];
    memset(slot, 0, sizeof slot);
    rumor_topo_t *keep = topo;
    if (s->topo_spec)
        CHECK_OK(rumor_topo_parse(s->topo_spec, &topo));
    run_swarm(s, slot);
    /* every round with someone to mix with (base:3:1 leaves a peer alone
     * in some) */
    if (s->mode != RUMOR_PEER_ALLREDUCE)
        for (int i = 0; i < NP; i++) {
            uint64_t want = 0;
            for (int k = 0; k < scenario_rounds(s); k++)
                want += rumor_topo_neighbors(topo, i, k, NULL, NULL, 0) > 0;
            CHECKF(slot[i].res.counters.rounds_mixed == want,
                   "%s: peer %d mixed %llu rounds, not %llu", s->name, i,
                   (unsigned long long)slot[i].res.counters.rounds_mixed,
                   (unsigned long long)want);
        }
    compare(s, slot);
    if (s->exact) /* exact averaging: the peers end equal, to rounding */
        for (int i = 1; i < NP; i++) {
            double d = 0;
            for (size_t e = 0; e < slot[0].n && slot[i].params && slot[0].params; e++)
                d = fmax(d, fabs((double)slot[i].params[e] - slot[0].params[e]));
            CHECKF(d <= 1e-6, "%s: peers 0 and %d are %g apart after exact averaging", s->name,
                   i, d);
        }
    if (s->topo_spec) {
        rumor_topo_destroy(&topo);
        topo = keep;
    }
    free_slots(slot);
}

/* Timing decides what these mix (an asynchronous peer never waits, and
 * may follow the swarm's clock past rounds): every peer must end at the
 * run's last round with finite parameters, the swarm must have mixed, and
 * its best model must have learned. */
static void test_runs(const scenario_t *s)
{
    slot_t slot[NP];
    memset(slot, 0, sizeof slot);
    timed_rounds = 60;
    run_swarm(s, slot);
    timed_rounds = 0;
    unsigned long long mixed = 0;
    double best = 0; /* a peer that followed the others' clock ran few rounds itself */
    for (int i = 0; i < NP; i++) {
        int finite = 1;
        for (size_t e = 0; slot[i].params && e < slot[i].n; e++)
            finite &= isfinite(slot[i].params[e]) != 0;
        CHECKF(finite, "%s: peer %d's parameters are finite", s->name, i);
        CHECKF(slot[i].res.round == 60 && slot[i].res.rounds_run > 0, "%s: peer %d ended at "
               "round %ld after %ld rounds", s->name, i, slot[i].res.round,
               slot[i].res.rounds_run);
        best = fmax(best, slot[i].res.local_accuracy);
        mixed += slot[i].res.counters.rounds_mixed;
        fprintf(stderr, "  %-22s peer %d: %ld rounds run, %llu mixed, accuracy %.3f\n", s->name,
                i, slot[i].res.rounds_run, (unsigned long long)slot[i].res.counters.rounds_mixed,
                slot[i].res.local_accuracy);
    }
    CHECKF(mixed > 0, "%s: the swarm mixed %llu rounds", s->name, mixed);
    CHECKF(best > 0.3, "%s: the best peer's accuracy %.3f (chance: 0.1)", s->name, best);
    free_slots(slot);
}

static void test_config_check(void)
{
    rumor_peer_config_t c;
    rumor_peer_config_default(&c);
    CHECK_OK(rumor_peer_config_check(&c));
    c.outer = "sgd:lr=1";
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "--local-steps H with H >= 2");
    c.local_steps = 2;
    CHECK_OK(rumor_peer_config_check(&c));
    c.mode = RUMOR_PEER_ASYNC;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "needs --mode dpsgd");
    rumor_peer_config_default(&c);
    c.mixer.keyframe_every = 4;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "needs --compress");
    rumor_peer_config_default(&c);
    c.mixer.min_round_timeout = 20;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "--min-round-timeout");
    rumor_peer_config_default(&c);
    c.outer_rounds = 0;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "--outer-rounds");
    c.outer = "sgd";
    c.local_steps = 2;
    CHECK_OK(rumor_peer_config_check(&c));
    c.outer_rounds = 5000;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "1 to 4096");
    c.outer_rounds = 0;
    c.outer = "optim";
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "needs --local-steps 1 (not 2)");
    c.local_steps = 1;
    CHECK_OK(rumor_peer_config_check(&c));
    /* streaming: an outer sgd or nesterov, F dividing H, S <= H / F */
    rumor_peer_config_default(&c);
    c.fragments = 3;
    c.local_steps = 6;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "needs --outer sgd or nesterov");
    c.outer = "optim";
    c.local_steps = 1;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "needs --outer sgd or nesterov");
    c.outer = "nesterov";
    c.local_steps = 6;
    CHECK_OK(rumor_peer_config_check(&c));
    c.local_steps = 8;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "--local-steps 8 is not a multiple");
    c.local_steps = 6;
    c.overlap = 3;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "at most H / F = 2");
    c.overlap = 2;
    c.merge = 1.5;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "alpha 1.5");
    c.merge = 0.25;
    CHECK_OK(rumor_peer_config_check(&c));
    c.overlap = 0;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "needs S >= 1");
    c.merge = -1;
    c.outer_rounds = 2;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "takes no --outer-rounds");
    c.outer_rounds = 1;
    c.mixer.codec.kind = RUMOR_CODEC_INT8;
    CHECK_ERR(rumor_peer_config_check(&c), RUMOR_EINVAL, "no --compress");
}

/* --outer-rounds period on a static graph: refused at creation, by name */
static void test_period_static(void)
{
    scenario_t s = { "period", RUMOR_PEER_DPSGD, 2, 1, 0, "sgd", 1, "outer", NULL, 1, 0, 0, 0 };
    rumor_peer_config_t c;
    peer_config(&c, &s, 0);
    rumor_peer_t *p = NULL;
    CHECK_ERR(rumor_peer_create(&c, &p), RUMOR_EINVAL, "is static");
    CHECK(p == NULL);
}

/* A peer stopped after its first rounds leaves at once, with a
 * checkpoint of that round; the others go on without it (each with
 * --allow-alone's leave) until they are stopped too. */
static void test_stop(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ckpt", tu_tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    scenario_t s = { "stop", RUMOR_PEER_DPSGD, 1, 0, 0, NULL, 0, "gossip", NULL, 0, 0, 0, 0 };
    slot_t slot[NP];
    memset(slot, 0, sizeof slot);
    pthread_t th[NP];
    for (int i = 0; i < NP; i++) {
        slot[i].rank = i;
        peer_config(&slot[i].cfg, &s, i);
        slot[i].cfg.rounds = 100000; /* far longer than the test */
        slot[i].cfg.mixer.round_timeout = 1;
        slot[i].cfg.mixer.min_round_timeout = 0.2;
        slot[i].cfg.allow_alone = 1;
        slot[i].stop_at = i == 0 ? 5 : 30;
        slot[i].cfg.observe = observe;
        slot[i].cfg.observe_arg = &slot[i];
        if (i == 0)
            slot[i].cfg.checkpoint_dir = dir;
        pthread_create(&th[i], NULL, run_peer, &slot[i]);
    }
    for (int i = 0; i < NP; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NP; i++) {
        CHECKF(slot[i].rc == 0, "stop: peer %d ran", i);
        CHECKF(slot[i].res.left_on == 15 && slot[i].res.round == slot[i].stop_at,
               "stop: peer %d left on %d at round %ld", i, slot[i].res.left_on, slot[i].res.round);
    }
    CHECKF(slot[0].res.left_checkpoint == 1, "stop: peer 0's checkpoint (%d)",
           slot[0].res.left_checkpoint);
    /* the checkpoint holds the round it left at */
    rumor_trainer_config_t tc;
    trainer_config(&tc, 0, NULL);
    tc.lockstep = 1;
    tc.host_params = 1;
    tc.steps = 100000;
    rumor_trainer_t *tr = NULL;
    CHECK_OK(rumor_trainer_create(&tc, &tr));
    long round = -1;
    char path[1024];
    if (tr)
        CHECK(rumor_trainer_resume_latest(tr, dir, "rumor", 0, &round, path, sizeof path) == 0);
    CHECKF(round == slot[0].res.round, "stop: checkpoint at round %ld, left at %ld", round,
           slot[0].res.round);
    rumor_trainer_destroy(&tr);
    free_slots(slot);
}

int main(void)
{
    tu_watchdog(600, "test_peer");
    snprintf(data_spec, sizeof data_spec, "fashion-mnist:%s", tu_fashion_dir());
    char probe[600];
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", tu_fashion_dir());
    if (access(probe, R_OK) != 0)
        TEST_SKIP("no Fashion-MNIST at %s (dataset-fashion-mnist)", tu_fashion_dir());
    tu_training_lock();
    test_config_check();
    CHECK_OK(rumor_topo_parse("complete:3", &topo));
    for (int i = 0; i < NP; i++) {
        snprintf(eps[i], sizeof eps[i], "tcp://127.0.0.1:%d", tu_free_port());
        ep[i] = eps[i];
    }
    const scenario_t ref[] = {
        { "dpsgd", RUMOR_PEER_DPSGD, 1, 0, 0, NULL, 0, "gossip", NULL, 0, 0, 0, 0 },
        { "dpsgd, send-ahead", RUMOR_PEER_DPSGD, 1, 1, 0, NULL, 0, "stepped", NULL, 0, 0, 0, 0 },
        /* send-ahead is for one local step: x(k+1) is known only after H */
        { "local steps H=3", RUMOR_PEER_DPSGD, 3, 1, 0, NULL, 0, "gossip", NULL, 0, 0, 0, 0 },
        { "outer sgd:lr=0.5, H=2", RUMOR_PEER_DPSGD, 2, 1, 0, "sgd:lr=0.5", 0.5, "outer", NULL, 0, 0, 0, 0 },
        { "outer over base:3:1's period", RUMOR_PEER_DPSGD, 2, 1, 0, "sgd:lr=0.7", 0.7,
          "outer", "base:3:1", 1, 6, 0, 0 },
        { "outer optim over base:3:1", RUMOR_PEER_DPSGD, 1, 1, 0, "optim", 0, "outer-optim",
          "base:3:1", 2, 6, 0, 0 },
        { "outer optim, AdamW", RUMOR_PEER_DPSGD, 1, 1, 0, "optim", 0, "outer-optim",
          "base:3:1", 3, 6, 0, 0 },
        /* 3 fragments (the last one padded), 2 steps a round, one of them
         * while the fragment is away; and without overlap */
        { "streaming F=3, S=1", RUMOR_PEER_DPSGD, 6, 1, 0, "sgd:lr=0.7", 0.7, "streaming", NULL,
          0, 7, 3, 1 },
        { "streaming F=2, S=0", RUMOR_PEER_DPSGD, 4, 1, 0, "sgd:lr=0.7", 0.7, "streaming", NULL,
          0, 5, 2, 0 },
        { "allreduce", RUMOR_PEER_ALLREDUCE, 1, 1, 0, NULL, 0, "allreduce", NULL, 0, 0, 0, 0 },
    };
    test_period_static();
    for (size_t i = 0; i < sizeof ref / sizeof *ref; i++)
        test_against_reference(&ref[i]);
    const scenario_t timed[] = {
        { "async", RUMOR_PEER_ASYNC, 1, 1, 0, NULL, 0, "gossip", NULL, 0, 0, 0, 0 },
        { "balance batch", RUMOR_PEER_DPSGD, 1, 1, 1, NULL, 0, "balance", NULL, 0, 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof timed / sizeof *timed; i++)
        test_runs(&timed[i]);
    test_stop();
    rumor_topo_destroy(&topo);
    return tu_finish("test_peer");
}

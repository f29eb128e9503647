/* The round strategies (strategy.h). D-PSGD as published (Lian et al.
 * 2017, Algorithm 1): send x(k) while computing the gradient at x(k), then
 * x(k+1) = sum_j W_ij x_j(k) - lr * step(grad). */
#include "strategy.h"

#include <string.h>

#include "log.h"
#include "peer_int.h"

/* --throttle F: F times slower than this machine (sleeps after the
 * gradient, for tests that need a straggler) */
static void throttle(rumor_peer_t *p, double since)
{
    if (p->cfg.throttle > 1)
        rumor_peer_sleep(p, (p->cfg.throttle - 1) * (rumor_now() - since));
}

/* --robust-val: a round the mixer probed held the neighbours' parameters
 * whole; each, and this peer's own as they went out, is scored on the same
 * validation batches, and the mixer judges the losses
 * (gossip/mixer_probe.c). */
static int probe(rumor_peer_t *p)
{
    long k;
    int node[RUMOR_PEER_ROBUST_MAX];
    const float *x[RUMOR_PEER_ROBUST_MAX];
    double loss[RUMOR_PEER_ROBUST_MAX], own = 0;
    const float *self;
    int n = rumor_mixer_probe_take(p->mixer, &k, &self, node, x, RUMOR_PEER_ROBUST_MAX);
    if (n <= 0)
        return 0;
    int b = p->cfg.robust_val_batches, rc = 0;
    rumor_eval_t e;
    if ((rc = rumor_trainer_evaluate(p->tr, self, b, &e)) == 0) {
        own = e.loss;
        for (int i = 0; i < n && rc == 0; i++)
            if ((rc = rumor_trainer_evaluate(p->tr, x[i], b, &e)) == 0)
                loss[i] = e.loss;
    }
    if (rc < 0) { /* let go of the vectors, judging nothing */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rumor_err_msg());
        (void)rumor_mixer_probe_done(p->mixer, k, own, node, loss, 0);
        return rumor_err_set(rc, "round %ld's validation probe: %s", k, msg);
    }
    rc = rumor_mixer_probe_done(p->mixer, k, own, node, loss, n); /* >= 0: what it changed */
    return rc < 0 ? rc : 0;
}

/* The mixer's round k begins: x(k) goes out while the gradient computes. */
static int begin(rumor_peer_t *p, rumor_round_t *r)
{
    if (rumor_mixer_round_begin(p->mixer, r->k) < 0)
        return rumor_err_code();
    r->t_compute = rumor_now();
    r->gossip = 1;
    return 0;
}

/* The mixer's round k ends: *mixed is sum_j W_ij x_j(k), the round's
 * statistics are p->st. */
static int end(rumor_peer_t *p, rumor_round_t *r, float **mixed)
{
    r->t_computed = rumor_now();
    RUMOR_CHECK(rumor_mixer_round_end(p->mixer, r->k, mixed, &p->st));
    r->wait_s = p->st.wait_s;
    r->next = p->st.next_round;
    return probe(p);
}

/* the optimizer steps from the mix: x(k+1) = mix - lr * step(grad) */
static int step_from(rumor_peer_t *p, float *mixed)
{
    RUMOR_CHECK(rumor_trainer_bind(p->tr, mixed)); /* after every change to it */
    return rumor_trainer_update(p->tr, NULL);
}

static int gossip_round(rumor_peer_t *p, rumor_round_t *r)
{
    RUMOR_CHECK(begin(p, r));
    RUMOR_CHECK(rumor_trainer_grads(p->tr, &r->batch, r->t, &r->loss));
    r->examples = r->batch.n;
    throttle(p, r->t_compute);
    float *mixed;
    RUMOR_CHECK(end(p, r, &mixed));
    return step_from(p, mixed);
}

/* A pipeline, or send-ahead: each stage (or cell) steps on its own range
 * of the mix as soon as both are ready, while the rest still computes. */
static int stepped_round(rumor_peer_t *p, rumor_round_t *r)
{
    RUMOR_CHECK(begin(p, r));
    rumor_mixer_round_t rn = { p->mixer, r->k };
    RUMOR_CHECK(rumor_trainer_grads_step(p->tr, &r->batch, r->t, &r->loss,
                                         rumor_mixer_round_range, &rn));
    r->examples = r->batch.n;
    float *mixed;
    RUMOR_CHECK(end(p, r, &mixed));
    r->wait_s += rumor_trainer_step_wait(p->tr); /* the wait for the mix came inside the step */
    p->st.wait_s = r->wait_s;
    return 0;
}

/* --balance batch: as many batches as fit in the wait for the slowest
 * neighbour, drawn on from the last round's (balance.h). */
static int balance_round(rumor_peer_t *p, rumor_round_t *r)
{
    int nbat = rumor_balance_batches(&p->bal);
    if (p->draws < r->t)
        p->draws = r->t;
    RUMOR_CHECK(begin(p, r));
    RUMOR_CHECK(rumor_trainer_grads_many(p->tr, p->draws, nbat, &r->loss, &r->examples));
    throttle(p, r->t_compute);
    float *mixed;
    RUMOR_CHECK(end(p, r, &mixed));
    RUMOR_CHECK(step_from(p, mixed));
    rumor_balance_observe(&p->bal, nbat, r->t_computed - r->t_compute, p->st.wait_s);
    p->draws += nbat;
    return 0;
}

/* --outer: the round's H local steps ran before it; the mix becomes the
 * outer step's target, and the outer step is the new anchor (DiLoCo on a
 * graph). With --outer-rounds R the mix of R rounds is: the R - 1 before
 * the last only mix (on onepeer-exp or base:K, R = the period, the R
 * rounds average exactly). */
static int outer_round(rumor_peer_t *p, rumor_round_t *r)
{
    RUMOR_CHECK(begin(p, r));
    float *mixed;
    RUMOR_CHECK(end(p, r, &mixed));
    if ((r->k + 1) % p->R == 0)
        rumor_outer_step(p->outer, mixed);
    r->examples = 0; /* counted by the local steps */
    return rumor_trainer_bind(p->tr, mixed);
}

/* --outer optim: the first of the R rounds sends x0 - eta g, one plain SGD
 * step of size eta from the anchor x0 on this peer's gradient; after the
 * last, d = x0 - mix is eta times the mean gradient (exactly, when the R
 * rounds average exactly), and this peer's optimizer steps the anchor on
 * d / eta as one process would on its gradient: its second moment sees the
 * swarm's batch, not this peer's. The trainer stays on the anchor (what a
 * checkpoint, an evaluation or the swarm average reads); the mixer's buffer
 * carries the exchange.
 *
 * eta is large and fixed: d is a difference of fp32 vectors, exact to
 * about ulp(x0) / eta, and AdamW scales every coordinate's gradient to a
 * step of the rate, so rounding that swamps a small gradient becomes a
 * step in a random direction. Measured on 4 peers (complete graph, the
 * small GPT, one epoch): eta 0.01, 1 and 100 land 0.18, 0.07 and 0.0000
 * nats above the all-reduce. The price: a neighbour's anchor that drifted
 * (a round it missed) is pulled back by only 1/eta of the difference. */
#define OUTER_OPTIM_ETA 1024.0f

static int outer_optim_round(rumor_peer_t *p, rumor_round_t *r)
{
    float *a = p->outer->anchor;
    size_t n = p->nparams;
    const float eta = OUTER_OPTIM_ETA, inv = 1.0f / OUTER_OPTIM_ETA;
    float *g = rumor_trainer_flat_grads(p->tr);
    if (!g)
        return rumor_err_set(RUMOR_EINVAL, "--outer optim: the model's gradients are not "
                                           "flat (a pipeline keeps them by stage)");
    if (r->k % p->R == 0) {
        RUMOR_CHECK(rumor_trainer_bind(p->tr, a));
        r->t_compute = rumor_now();
        RUMOR_CHECK(rumor_trainer_grads(p->tr, &r->batch, r->t, &r->loss));
        r->examples = r->batch.n;
        p->last_loss = r->loss;
        float *x = p->params;
        for (size_t i = 0; i < n; i++)
            x[i] = a[i] - eta * g[i];
    } else {
        r->loss = p->last_loss;
    }
    RUMOR_CHECK(begin(p, r));
    float *mixed;
    RUMOR_CHECK(end(p, r, &mixed));
    p->params = mixed;
    p->st.disagreement *= inv; /* |mix - x| of the gradients, not of x0 - eta g */
    if ((r->k + 1) % p->R) /* only mixing */
        return 0;
    for (size_t i = 0; i < n; i++)
        g[i] = (a[i] - mixed[i]) * inv;
    RUMOR_CHECK(rumor_trainer_bind(p->tr, a));
    if (rumor_trainer_update(p->tr, NULL) < 0)
        return rumor_err_prefix(rumor_err_code(), "optimizer step");
    memcpy(mixed, a, n * sizeof *mixed); /* the mixer holds parameters between outer steps */
    return 0;
}

/* --fragments F, --overlap S: Streaming DiLoCo (Douillard et al. 2025)
 * on a graph. The parameters are F equal runs; round k gossips fragment
 * f = k mod F, so each fragment goes every F rounds (H = F x the round's
 * steps) and a round's message is 1/F of the model. The round's steps run
 * H - S before the send (peer_run.c) and S while the fragment is in
 * flight, on this peer's own parameters (the trainer's buffer, not the
 * mixer's: the mixer sends and mixes a copy of the fragment). When the mix
 * lands, the outer step moves the fragment's anchor on it, and the S steps
 * taken meanwhile are merged: x_f = alpha x_f + (1 - alpha) anchor_f
 * (alpha 0 without overlap: DiLoCo's x_f = anchor_f). The gossip space is
 * one fragment long; the last one is padded with zeros, which mix to
 * zeros. */
static int streaming_round(rumor_peer_t *p, rumor_round_t *r)
{
    float *x = rumor_trainer_params(p->tr);
    size_t lo = (size_t)(r->k % p->F) * p->flen;
    size_t len = p->nparams - lo < p->flen ? p->nparams - lo : p->flen;
    memcpy(p->params, x + lo, len * sizeof *x);
    memset(p->params + len, 0, (p->flen - len) * sizeof *x);
    r->sent_step = rumor_trainer_optim_steps(p->tr);
    r->fragment = (int)(r->k % p->F);
    RUMOR_CHECK(begin(p, r));
    RUMOR_CHECK(rumor_peer_local_steps(p, p->S, &r->loss));
    r->examples = 0; /* counted by the local steps */
    float *mixed;
    RUMOR_CHECK(end(p, r, &mixed));
    p->params = mixed;
    rumor_outer_step_range(p->outer, mixed, lo, lo + len);
    const float al = p->alpha;
    for (size_t i = 0; i < len; i++)
        x[lo + i] = al * x[lo + i] + (1 - al) * mixed[i];
    return rumor_trainer_bind(p->tr, NULL); /* after every change to them */
}

/* --mode allreduce: the ring all-reduce of the gradients (C-PSGD), the
 * baseline. A missing peer stops the ring: that round steps on the local
 * gradient instead (C-PSGD has no better answer). */
static int allreduce_round(rumor_peer_t *p, rumor_round_t *r)
{
    r->t_compute = rumor_now();
    RUMOR_CHECK(rumor_trainer_grads(p->tr, &r->batch, r->t, &r->loss));
    r->examples = r->batch.n;
    double t0 = r->t_computed = rumor_now();
    float *g = rumor_trainer_flat_grads(p->tr);
    if (!g)
        return rumor_err_set(RUMOR_EINVAL, "gradient: the model's gradients are not flat");
    if (rumor_mixer_allreduce_mean(p->mixer, g, p->nparams, r->k, p->cfg.mixer.round_timeout,
                                   p->coded_allreduce) < 0) {
        p->res.allreduce_failures++;
        rumor_warn("round %ld: %s; stepping on the local gradient", r->k, rumor_err_msg());
        RUMOR_CHECK(rumor_trainer_grads(p->tr, &r->batch, r->t, &r->loss));
    }
    r->wait_s = rumor_now() - t0;
    return rumor_trainer_update(p->tr, NULL);
}

const rumor_peer_strategy_t rumor_strategy_gossip = { "gossip", 0, gossip_round };
const rumor_peer_strategy_t rumor_strategy_stepped = { "stepped", 0, stepped_round };
const rumor_peer_strategy_t rumor_strategy_balance = { "balance", 0, balance_round };
const rumor_peer_strategy_t rumor_strategy_outer = { "outer", 1, outer_round };
const rumor_peer_strategy_t rumor_strategy_outer_optim = { "outer-optim", 0, outer_optim_round };
const rumor_peer_strategy_t rumor_strategy_streaming = { "streaming", 0, streaming_round };
const rumor_peer_strategy_t rumor_strategy_allreduce = { "allreduce", 0, allreduce_round };

const rumor_peer_strategy_t *rumor_peer_strategy_pick(const rumor_strategy_choice_t *c)
{
    if (c->allreduce)
        return &rumor_strategy_allreduce;
    if (c->outer_optim)
        return &rumor_strategy_outer_optim;
    if (c->streaming)
        return &rumor_strategy_streaming;
    if (c->outer)
        return &rumor_strategy_outer;
    if (c->balance)
        return &rumor_strategy_balance;
    /* a throttle sleeps after the whole gradient: the round's order stays */
    if ((c->pipe || c->ahead) && c->throttle <= 1)
        return &rumor_strategy_stepped;
    return &rumor_strategy_gossip;
}

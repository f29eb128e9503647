/* A peer's run (peer.h): the round loop. Each round: the local steps on
 * the peer's own data, the strategy's round (strategy.h), then what every
 * round shares: the trace, catching up with a swarm that is ahead,
 * checkpoints, progress, the figures, and the end of an epoch. */
#include "peer_int.h"

#include <math.h>
#include <string.h>

#include "log.h"

/* --local-steps: the round's first H - 1 steps on the peer's own
 * parameters, without gossip (with an outer optimizer all H: the gossip
 * then carries the round's result; with --outer-rounds R, before the first
 * of each R rounds, the others only mix; streaming, H - S of the round's
 * H / F). */
int rumor_peer_local_steps(rumor_peer_t *p, long steps, float *loss)
{
    for (long h = 0; h < steps && !p->stop; h++) {
        long t = rumor_trainer_optim_steps(p->tr), ex;
        double c0 = rumor_now();
        RUMOR_CHECK(rumor_trainer_grads_many(p->tr, t, 1, loss, &ex));
        if (p->cfg.throttle > 1)
            rumor_peer_sleep(p, (p->cfg.throttle - 1) * (rumor_now() - c0));
        if (rumor_trainer_update(p->tr, NULL) < 0)
            return rumor_err_prefix(rumor_err_code(), "optimizer step");
        p->examples += ex;
        p->last_loss = *loss;
    }
    return 0;
}

static int local_steps(rumor_peer_t *p, float *loss)
{
    if (p->k % p->R) { /* a round that only mixes: the loss of the outer step's steps */
        *loss = p->last_loss;
        return 0;
    }
    *loss = p->last_loss; /* a streamed round may take all its steps in flight */
    return rumor_peer_local_steps(p, p->steps_before, loss);
}

static void trace_round(rumor_peer_t *p, const rumor_round_t *r, double t_mixed)
{
    char args[192], name[32];
    rumor_trainer_trace(p->tr, p->trace, r->t, r->t_compute, r->t_computed, t_mixed,
                        rumor_now());
    int na = snprintf(args, sizeof args, "\"round\":%ld,\"step\":%ld,\"wait_s\":%.6f", r->k,
                      r->t, r->wait_s);
    if (r->fragment >= 0) /* streaming: which fragment went, at which step */
        snprintf(args + na, sizeof args - (size_t)na, ",\"fragment\":%d,\"sent_step\":%ld",
                 r->fragment, r->sent_step);
    snprintf(name, sizeof name, "round %ld", r->k);
    rumor_trace_span(p->trace, p->gossip_row, name, "round", r->t_round, t_mixed, args);
    rumor_trace_span(p->trace, p->gossip_row, p->dpsgd ? "wait and mix" : "all-reduce", "wait",
                     r->t_computed, t_mixed, args);
    if (r->gossip && p->st.mix_end > 0) /* the comm thread mixing the cells that came */
        rumor_trace_span(p->trace, p->gossip_row, "mixing", "gossip", p->st.mix_start,
                         p->st.mix_end, args);
    if (r->gossip && p->st.recv_end > 0) /* the round's ranges arriving, ahead ones too */
        rumor_trace_span(p->trace, p->gossip_row, "receiving", "network", p->st.recv_start,
                         p->st.recv_end, args);
    if (r->k % 16 == 15)
        rumor_trace_flush(p->trace); /* a killed peer leaves a readable prefix */
}

/* Behind the swarm (frozen, cut off, restarted): jump ahead keeping this
 * peer's parameters, or fetch the swarm's state (catchup.h). *next is the
 * round that follows. */
static int catch_up(rumor_peer_t *p, long *next)
{
    long target;
    rumor_catchup_action act = rumor_catchup_after_round(&p->cu, &p->st, *next, rumor_now(),
                                                         &target);
    if (!p->dpsgd || p->async || p->stop || act == RUMOR_CATCHUP_NONE)
        return 0;
    /* the GPU stages' copy of this round's parameters lands first */
    if (rumor_trainer_sync_params(p->tr) < 0)
        return rumor_err_prefix(rumor_err_code(), "model");
    /* --outer optim: a neighbour's buffer inside an outer step holds x0 -
     * eta g, not parameters; streaming, one fragment: skip ahead on this
     * peer's own instead */
    if (act == RUMOR_CATCHUP_FETCH && (p->optim || p->streaming))
        act = RUMOR_CATCHUP_JUMP;
    if (act == RUMOR_CATCHUP_FETCH) {
        long nk;
        rumor_info("the swarm is at round %ld, this peer at %ld: fetching its state", target,
                   *next);
        if (rumor_mixer_catch_up(p->mixer, &nk, &p->params, p->cfg.mixer.round_timeout + 5) <
            0) {
            rumor_warn("catching up: %s; skipping ahead instead", rumor_err_msg());
        } else {
            p->res.catch_ups++;
            RUMOR_CHECK(rumor_trainer_bind(p->tr, p->params));
            if (p->outer)
                rumor_outer_reset(p->outer, p->params);
            *next = nk;
            if (p->joining) { /* a newcomer's first fetch, as at the start */
                rumor_trainer_set_optim_steps(p->tr, nk / p->R * p->H);
                p->joining = 0;
                if (!p->cfg.quiet)
                    fprintf(p->out, "%s: joined at round %ld\n", p->who, nk);
            }
            return 0;
        }
    }
    if (rumor_mixer_jump(p->mixer, target) < 0)
        return rumor_err_prefix(rumor_err_code(), "round");
    *next = target;
    return 0;
}

/* The figures after a round: progress line, round event, stats. */
static void after_round(rumor_peer_t *p, float loss)
{
    rumor_peer_result_t *res = &p->res;
    rumor_mixer_traffic(p->mixer, &res->bytes_sent, &res->bytes_received);
    double el = rumor_now() - p->start;
    char bub[64] = "";
    if (rumor_trainer_pipelined(p->tr)) /* the measured idle share of the pipeline's devices */
        snprintf(bub, sizeof bub, "  bubble %.0f%%", 100.0 * rumor_trainer_bubble(p->tr));
    if (p->cfg.balance) /* the batches the next round takes */
        snprintf(bub + strlen(bub), sizeof bub - strlen(bub), "  batches %d",
                 rumor_balance_batches(&p->bal));
    char link[32] = "";
    double lu = rumor_peer_link_utilization(p, el);
    if (lu == lu)
        snprintf(link, sizeof link, "  link %.0f%%", 100.0 * lu);
    if (rumor_progress_update(&p->prog, p->k, 0,
                              "round %ld/%ld  epoch %d  loss %.4f  %.0f ex/s  |mix-x| %.3g  "
                              "sent %.1f MB  recv %.1f MB  compute %.0f%%  waiting %.0f%%%s%s",
                              p->k, p->total_rounds, p->epoch, (double)loss, p->examples / el,
                              p->last_dis, res->bytes_sent / 1e6, res->bytes_received / 1e6,
                              100.0 * res->compute_s / el, 100.0 * res->wait_s / el, link, bub))
        rumor_peer_event_round(p, loss, el);
    if (!p->cfg.observe)
        return;
    rumor_peer_stats_t *s = &p->stats; /* what a scrape shows */
    rumor_mixer_counters_t mcn;
    rumor_mixer_counters(p->mixer, &mcn);
    s->round = p->k;
    s->loss = loss;
    s->examples_per_second = el > 0 ? p->examples / el : 0;
    s->wait_seconds = res->wait_s;
    s->compute_seconds = res->compute_s;
    s->link_utilization = lu;
    s->seconds = el;
    s->consensus_distance = p->last_dis;
    s->in_neighbors = p->st.in_neighbors;
    s->neighbors_complete = p->st.complete;
    s->members = p->st.members;
    s->bytes_sent = res->bytes_sent;
    s->bytes_received = res->bytes_received;
    s->rounds_run = (uint64_t)res->rounds_run;
    s->rounds_mixed = mcn.rounds_mixed;
    s->consensus_skipped = mcn.consensus_skipped;
    s->jumps = mcn.jumps;
    s->state_fetches = (uint64_t)res->catch_ups;
    s->robust_ranges = mcn.robust_ranges;
    s->robust_clipped = mcn.robust_clipped;
    s->quarantines = mcn.quarantines;
    s->releases = mcn.releases;
    s->quarantined = mcn.quarantined;
    s->nrobust = rumor_mixer_robust_scores(p->mixer, s->robust, RUMOR_PEER_ROBUST_MAX);
    rumor_mixer_wire_stats(p->mixer, &s->messages);
    rumor_peer_publish(p, RUMOR_PEER_NPHASES);
}

/* The end of an epoch (or of several, after a jump): evaluation, the
 * epoch's line and event, its checkpoint. */
static int end_epoch(rumor_peer_t *p)
{
    const rumor_peer_config_t *c = &p->cfg;
    double epoch_s = rumor_now() - p->epoch_start, epoch_cpu = rumor_cpu_now() - p->epoch_cpu0;
    double acc = -1, tloss = 0;
    int evaluated = p->epoch % c->eval_every == 0 || p->k >= p->total_rounds;
    if (evaluated) {
        if (rumor_peer_evaluate(p, NULL, &acc, &tloss) < 0)
            return rumor_err_prefix(rumor_err_code(), "evaluation");
        p->evaluated_at = p->k;
        p->res.local_accuracy = acc;
        p->res.local_loss = tloss;
        p->stats.eval_loss = tloss;
        if (!rumor_trainer_is_lm(p->tr))
            p->stats.test_accuracy = acc;
        rumor_peer_publish(p, RUMOR_PEER_NPHASES);
    }
    double nr = p->epoch_rounds > 0 ? (double)p->epoch_rounds : 1.0;
    double consensus = p->dpsgd ? p->dis_sum / nr : 0.0;
    if (!c->quiet) {
        char accs[64] = "";
        if (evaluated && rumor_trainer_is_lm(p->tr))
            snprintf(accs, sizeof accs, "  validation loss %.4f", tloss);
        else if (evaluated)
            snprintf(accs, sizeof accs, "  test accuracy %.2f%%", 100.0 * acc);
        rumor_progress_print(&p->prog, "epoch %d/%d  train loss %.4f%s  |mix-x| %.3g  %.1f s",
                             p->epoch, (int)((p->total_rounds + p->per_epoch - 1) / p->per_epoch),
                             p->loss_sum / nr, accs, consensus, epoch_s);
    }
    rumor_peer_event_epoch(p, p->epoch, p->loss_sum / nr, evaluated, acc, tloss, consensus,
                           epoch_s, epoch_cpu);
    p->epoch = (int)(p->k / p->per_epoch) + 1;
    if (c->checkpoint_dir && rumor_peer_checkpoint(p, p->k) < 0) {
        /* counted and said (rumor_peer_checkpoint) */
    }
    p->epoch_start = rumor_now();
    p->epoch_cpu0 = rumor_cpu_now();
    p->loss_sum = p->dis_sum = 0;
    p->epoch_rounds = 0;
    return 0;
}

/* One round, from its local steps to its figures. */
static int round_once(rumor_peer_t *p)
{
    const rumor_peer_config_t *c = &p->cfg;
    rumor_round_t r = { .k = p->k, .next = p->k + 1, .fragment = -1 };
    double t_start = rumor_now();
    RUMOR_CHECK(local_steps(p, &r.loss));
    /* The batch of this peer's own step t (its optimizer's count, kept in
     * checkpoints): a resumed peer draws the batches it would have drawn,
     * and one that jumps rounds to follow the swarm skips no data. */
    r.t = rumor_trainer_optim_steps(p->tr);
    if (rumor_trainer_batch(p->tr, r.t, &r.batch) < 0)
        return rumor_err_prefix(rumor_err_code(), "data");
    r.t_round = r.t_compute = r.t_computed = rumor_now();
    RUMOR_CHECK(p->strategy->round(p, &r));
    double t_mixed = rumor_now();
    p->res.wait_s += r.wait_s;
    if (t_mixed - t_start > r.wait_s) /* its local steps, gradient, step: not waiting */
        p->res.compute_s += t_mixed - t_start - r.wait_s;
    if (r.gossip) {
        p->last_dis = p->st.disagreement;
        p->dis_sum += p->st.disagreement;
        p->deadline = p->st.deadline_s;
        if (!p->async && p->st.deadline_s > 0 && p->st.round_s / p->st.deadline_s > p->res.max_stall)
            p->res.max_stall = p->st.round_s / p->st.deadline_s;
    }
    if (p->trace)
        trace_round(p, &r, t_mixed);
    p->loss_sum += r.loss;
    p->examples += r.examples;
    p->res.rounds_run++;
    p->epoch_rounds++;
    long next = r.next;
    RUMOR_CHECK(catch_up(p, &next));
    p->joining = 0; /* a newcomer not behind after its first round mixed in */
    if (next > p->total_rounds)
        next = p->total_rounds;
    if (c->checkpoint_dir && c->checkpoint_every > 0 &&
        next / c->checkpoint_every > p->k / c->checkpoint_every && !p->stop &&
        rumor_peer_checkpoint(p, next) < 0) {
        /* counted and said (rumor_peer_checkpoint) */
    }
    p->k = next;
    after_round(p, r.loss);
    if (p->k / p->per_epoch + 1 <= p->epoch && p->k < p->total_rounds)
        return 0;
    return end_epoch(p);
}

int rumor_peer_run(rumor_peer_t *p)
{
    int rc = rumor_peer_join(p);
    if (rc < 0)
        return rc;
    if (rc > 0) {
        rumor_peer_left_before(p);
        return 0;
    }
    rumor_peer_publish(p, RUMOR_PEER_TRAINING);
    rumor_progress_begin(&p->prog, p->out, p->total_rounds, p->cfg.progress, p->cfg.quiet);
    p->start = rumor_now();
    if (p->cfg.trace) {
        RUMOR_CHECK(rumor_trace_open(p->cfg.trace, p->start, &p->trace));
        p->gossip_row = rumor_trainer_trace_rows(p->tr, p->trace);
        rumor_trace_row(p->trace, p->gossip_row, p->dpsgd ? "gossip" : "all-reduce");
    }
    rumor_catchup_init(&p->cu, p->cfg.catch_up_rounds, rumor_now());
    rumor_balance_init(&p->bal, p->cfg.balance_max);
    p->epoch = (int)(p->k / p->per_epoch) + 1;
    p->epoch_start = rumor_now();
    p->epoch_cpu0 = rumor_cpu_now();
    while (p->k < p->total_rounds && !p->stop)
        RUMOR_CHECK(round_once(p));
    return rumor_peer_finish(p);
}

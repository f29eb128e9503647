/* The start of a peer's run: its mixer, the lines that say what it runs,
 * the wait for its neighbours, and a late joiner's state fetch. */
#include "peer_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "log.h"
#include "source.h"
#include "topology.h"

static int trainer_params_ready(void *tr)
{
    return rumor_trainer_params_ready(tr);
}

/* The settings every peer of the swarm must share (terms.h), sent in every
 * HELLO: a neighbour that differs is named and not mixed with. Dropout is
 * left out of the model's (peers may differ in it: the parameters mean the
 * same). */
static int build_terms(rumor_peer_t *p, const rumor_codec_t *codec, char *buf, size_t cap)
{
    const rumor_peer_config_t *c = &p->cfg;
    char v[512];
    buf[0] = '\0';
    snprintf(v, sizeof v, "%s", rumor_trainer_model(p->tr)->spec);
    char *d = strstr(v, "dropout=");
    if (d && d > v && (d[-1] == ':' || d[-1] == ','))
        d[-1] = '\0';
    RUMOR_CHECK(rumor_terms_add(buf, cap, "model", v));
    RUMOR_CHECK(rumor_terms_add(buf, cap, "mode", c->mode == RUMOR_PEER_ASYNC ? "async"
                                                  : p->dpsgd ? "dpsgd" : "allreduce"));
    rumor_codec_format(codec, v, sizeof v);
    RUMOR_CHECK(rumor_terms_add(buf, cap, "compress", v));
    if (codec->kind != RUMOR_CODEC_NONE) {
        snprintf(v, sizeof v, "%d", c->mixer.keyframe_every > 0
                                        ? c->mixer.keyframe_every
                                        : rumor_codec_default_keyframe(codec));
        RUMOR_CHECK(rumor_terms_add(buf, cap, "keyframe-every", v));
    }
    snprintf(v, sizeof v, "%d", c->local_steps);
    RUMOR_CHECK(rumor_terms_add(buf, cap, "local-steps", v));
    const rumor_outer_config_t oc = p->ocfg;
    if (!c->outer)
        snprintf(v, sizeof v, "none");
    else if (oc.kind == RUMOR_OUTER_NESTEROV)
        snprintf(v, sizeof v, "nesterov:lr=%g,momentum=%g", oc.lr, oc.momentum);
    else if (oc.kind == RUMOR_OUTER_OPTIM)
        snprintf(v, sizeof v, "optim");
    else
        snprintf(v, sizeof v, "sgd:lr=%g", oc.lr);
    RUMOR_CHECK(rumor_terms_add(buf, cap, "outer", v));
    if (!c->outer)
        return 0;
    snprintf(v, sizeof v, "%ld", p->R);
    RUMOR_CHECK(rumor_terms_add(buf, cap, "outer-rounds", v));
    if (!p->streaming)
        return 0;
    snprintf(v, sizeof v, "%d", p->F);
    RUMOR_CHECK(rumor_terms_add(buf, cap, "fragments", v));
    snprintf(v, sizeof v, "%d:alpha=%g", p->S, p->alpha);
    return rumor_terms_add(buf, cap, "overlap", v);
}

/* The mixer's configuration: the caller's, with what the model and the
 * trainer decide. */
static int mixer_config(rumor_peer_t *p, rumor_mixer_config_t *mc)
{
    *mc = p->cfg.mixer;
    /* streaming: the gossip space is one fragment (the last one padded
     * with zeros), a round's fragment copied in (swarm/strategy.c) */
    mc->nparams = p->streaming ? p->flen : p->nparams;
    if (mc->chunk_elems == 0) {
        /* 1 MiB cells: a cell's mixing reads it from the L2 cache; a model
         * of under 8 MiB gets 8 cells (at least 64 KiB each), so that
         * send-ahead sends a round's first cells while its last arrive */
        mc->chunk_elems = RUMOR_MIXER_CHUNK;
        if (mc->nparams / 8 < mc->chunk_elems)
            mc->chunk_elems = mc->nparams / 8 > ((size_t)1 << 14) ? mc->nparams / 8
                                                                  : (size_t)1 << 14;
    }
    mc->async = p->async;
    mc->dev = rumor_trainer_device(p->tr); /* the mixing arithmetic runs on the trainer's device's ops */
    /* GPU stages copy their ranges to and from page-locked buffers */
    mc->host_mem = rumor_trainer_host_mem(p->tr);
    mc->first_round = p->first_round;
    /* a sparse codec must send at least one element of a whole range */
    size_t cell = mc->chunk_elems < mc->nparams ? mc->chunk_elems : mc->nparams;
    if (((mc->codec.kind == RUMOR_CODEC_TOPK && !mc->codec.bits) ||
         mc->codec.kind == RUMOR_CODEC_RANDK) &&
        mc->codec.frac * (double)cell < 1.0) {
        p->res.usage = 1;
        return rumor_err_set(RUMOR_EINVAL, "--compress %s sends %.3g elements of a range of "
                                           "%zu: give a share of at least %.3g (one element a "
                                           "range)", p->cfg.compress,
                             mc->codec.frac * (double)cell, cell, 1.0 / (double)cell);
    }
    RUMOR_CHECK(build_terms(p, &mc->codec, p->terms, sizeof p->terms));
    mc->terms = p->terms;
    /* a neighbour 10x this peer's norm away diverged (mixer.h); under
     * --outer optim what goes out is x0 - g, and two peers' gradients can
     * be that far apart early on (seen: 10.3x): only 1000x is a
     * divergence there */
    mc->outlier_ratio = p->optim ? 1000 : 10;
    return 0;
}

/* What the peer runs, before it waits for its neighbours. */
static void describe(rumor_peer_t *p, const rumor_mixer_config_t *mc)
{
    const rumor_peer_config_t *c = &p->cfg;
    FILE *out = p->out;
    const char *who = p->who;
    const rumor_topo_t *topo = c->mixer.topo;
    int nb = topo ? rumor_topo_neighbors(topo, p->rank, 0, NULL, NULL, 0) : 0;
    char secdesc[128];
    if (c->mixer.keys)
        snprintf(secdesc, sizeof secdesc, "CurveZMQ, %zu keys allowed",
                 rumor_allowlist_count(c->mixer.allow));
    else
        snprintf(secdesc, sizeof secdesc, "PLAINTEXT: --insecure");
    fprintf(out, "%s: %s on %s, listening on %s (%s)\n", who,
            p->async ? "asynchronous D-PSGD" : p->dpsgd ? "D-PSGD" : "ring all-reduce",
            topo ? topo->desc : p->spec, rumor_mixer_endpoint(p->mixer), secdesc);
    if (p->is_open)
        fprintf(out, "%s: open membership: id %016llx at %s, joining through %s\n", who,
                (unsigned long long)c->open->id, c->open->advertise,
                c->open->join.n ? c->open->join_given : "nobody (a founder)");
    fprintf(out, "%s: %s, %zu parameters (%.2f MB), %s; %d neighbour%s in round 0\n", who,
            rumor_trainer_model(p->tr)->spec, p->nparams, p->nparams * 4.0 / 1e6, rumor_trainer_device(p->tr)->name, nb,
            nb == 1 ? "" : "s");
    rumor_trainer_describe_pipeline(p->tr, out, who);
    char span[64];
    if (c->rounds)
        snprintf(span, sizeof span, "%ld rounds (--rounds)", p->total_rounds);
    else
        snprintf(span, sizeof span, "%d epoch%s", c->trainer.epochs,
                 c->trainer.epochs == 1 ? "" : "s");
    if (rumor_trainer_is_lm(p->tr))
        fprintf(out, "%s: %s (loaded in %.2f s), %ld rounds of %d windows of %d tokens per "
                     "epoch, %s\n", who, rumor_source_describe(rumor_trainer_source(p->tr)), p->t_loaded,
                p->per_epoch, c->trainer.batch, rumor_trainer_model(p->tr)->ctx, span);
    else
        fprintf(out, "%s: %s of %ld examples (loaded in %.2f s), %ld rounds of batch %d per "
                     "epoch, %s\n", who,
                p->is_open ? "its own stream over a training set" : "shard",
                rumor_source_train_size(rumor_trainer_source(p->tr)), p->t_loaded, p->per_epoch,
                c->trainer.batch, span);
    if (p->H > 1 && p->R > 1)
        fprintf(out, "%s: local SGD: %ld optimizer steps, then %ld rounds of gossip "
                     "(--local-steps, --outer-rounds)\n", who, p->H, p->R);
    else if (p->H > 1 && !p->streaming)
        fprintf(out, "%s: local SGD: %ld optimizer steps a round, the parameters gossiped "
                     "once (--local-steps)\n", who, p->H);
    const rumor_outer_config_t oc = p->ocfg;
    if (p->streaming)
        fprintf(out, "%s: streaming outer steps: %d fragment%s of %zu parameters, one gossiped "
                     "every %ld steps, each every %d; %d step%s overlap a fragment's round, "
                     "then x = %g x + %g anchor (--fragments, --overlap)\n",
                who, p->F, p->F == 1 ? "" : "s", p->flen, p->H, c->local_steps, p->S,
                p->S == 1 ? "" : "s", p->alpha, 1 - p->alpha);
    if (c->outer) {
        if (oc.kind == RUMOR_OUTER_NESTEROV)
            fprintf(out, "%s: outer optimizer: Nesterov, lr %g, momentum %g, on each round's "
                         "change (DiLoCo; --outer)\n", who, oc.lr, oc.momentum);
        else if (oc.kind == RUMOR_OUTER_OPTIM)
            fprintf(out, "%s: outer optimizer: this peer's own, on the mean gradient the mix of "
                         "%ld round(s) gives (--outer optim)\n", who, p->R);
        else
            fprintf(out, "%s: outer optimizer: SGD, lr %g, on each round's change (DiLoCo; "
                         "--outer)\n", who, oc.lr);
    }
    rumor_codec_t codec = mc->codec;
    if (p->coded_allreduce)
        fprintf(out, "%s: coded all-reduce: %s gradients, %.2fx smaller than f32\n", who,
                c->compress, rumor_codec_ratio(&codec));
    else if (codec.kind != RUMOR_CODEC_NONE)
        fprintf(out, "%s: compressed gossip (CHOCO-SGD): %s, %.2fx smaller than f32, "
                     "consensus step %.3g, f32 keyframe every %d rounds\n",
                who, c->compress, rumor_codec_ratio(&codec),
                mc->consensus_step > 0 ? mc->consensus_step : rumor_codec_default_gamma(&codec),
                mc->keyframe_every > 0 ? mc->keyframe_every
                                       : rumor_codec_default_keyframe(&codec));
    fflush(out);
}

/* A late joiner or a restarted peer fetches the swarm's state: an open
 * swarm's newcomer (nothing resumed) starts from the swarm's parameters,
 * here if it knows the swarm's round already, or at its first round's end
 * (the neighbours' rounds may come just after its view). 1: stopped. */
static int fetch_at_start(rumor_peer_t *p)
{
    p->newcomer = p->is_open && p->first_round == 0;
    p->joining = p->newcomer && p->dpsgd && !p->async;
    if (!p->dpsgd || p->async) /* an asynchronous peer just follows the clock */
        return 0;
    if (p->optim || p->streaming) /* no whole state to fetch: it jumps */
        return 0;
    long sr = rumor_mixer_swarm_round(p->mixer);
    if (rumor_catchup_at_start(p->cfg.catch_up_rounds, p->newcomer, sr, p->k) !=
        RUMOR_CATCHUP_FETCH)
        return 0;
    if (!p->cfg.quiet)
        fprintf(p->out, "%s: the swarm is at round %ld: fetching its state\n", p->who, sr);
    long nk;
    if (rumor_mixer_catch_up(p->mixer, &nk, &p->params, p->cfg.start_timeout) < 0) {
        if (p->stop)
            return 1;
        rumor_warn("catching up: %s; training from round %ld", rumor_err_msg(), p->k);
        return 0;
    }
    p->res.catch_ups++;
    p->k = nk < p->total_rounds ? nk : p->total_rounds;
    RUMOR_CHECK(rumor_trainer_bind(p->tr, p->params));
    /* a newcomer takes up the swarm's learning-rate schedule (and draws on
     * in its own stream from there) */
    if (p->newcomer)
        rumor_trainer_set_optim_steps(p->tr, p->k / p->R * p->H);
    p->joining = 0;
    if (!p->cfg.quiet)
        fprintf(p->out, "%s: joined at round %ld\n", p->who, p->k);
    return 0;
}

int rumor_peer_join(rumor_peer_t *p)
{
    const rumor_peer_config_t *c = &p->cfg;
    rumor_mixer_config_t mc;
    RUMOR_CHECK(mixer_config(p, &mc));
    /* --compress with --mode allreduce: the gradients' all-reduce is coded
     * (the swarm average at the end stays f32) */
    p->coded_allreduce = !p->dpsgd && mc.codec.kind != RUMOR_CODEC_NONE;
    /* send-ahead: an unpipelined peer steps the mix cell by cell and sends
     * round k + 1's cells as they are stepped (a pipelined one steps by
     * stage); plain synchronous rounds on a list only (mixer.h), and not
     * with local steps or an outer step: x(k+1) is what they make of the
     * mix, known only at round_begin */
    p->ahead = p->dpsgd && !p->async && c->send_ahead && !rumor_trainer_pipelined(p->tr) && p->H == 1 &&
               !c->outer &&
               mc.codec.kind == RUMOR_CODEC_NONE && !p->is_open && !mc.membership;
    if (p->ahead)
        rumor_trainer_set_step_ranges(p->tr, mc.chunk_elems, rumor_mixer_round_stepped);
    if ((p->optim || p->streaming) && rumor_trainer_pipelined(p->tr))
        return rumor_err_set(RUMOR_EINVAL, "%s the model's whole parameters on one device, "
                                           "which a pipeline keeps by stage: run it with one "
                                           "stage (--stages 1)",
                             p->optim ? "--outer optim steps on the gradient of"
                                      : "--fragments and --overlap step");
    rumor_strategy_choice_t sc = { .allreduce = !p->dpsgd, .outer = c->outer != NULL,
                                   .outer_optim = p->optim, .streaming = p->streaming,
                                   .balance = c->balance, .pipe = rumor_trainer_pipelined(p->tr),
                                   .ahead = p->ahead, .throttle = c->throttle };
    p->strategy = rumor_peer_strategy_pick(&sc);
    float *init = rumor_trainer_params(p->tr);
    if (p->streaming) { /* fragment 0 (round 0's sends it again, stepped) */
        init = calloc(p->flen, sizeof *init);
        if (!init)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory for a fragment");
        memcpy(init, rumor_trainer_params(p->tr),
               (p->flen < p->nparams ? p->flen : p->nparams) * sizeof *init);
    }
    int mrc = rumor_mixer_create(&mc, init, &p->mixer);
    if (init != rumor_trainer_params(p->tr))
        free(init);
    if (mrc < 0)
        return rumor_err_prefix(rumor_err_code(), "swarm");
    p->hurry = p->mixer; /* a stop from now on leaves through the mixer */
    p->started = 1;
    /* the trainer works on the mixer's buffer, or, streaming, on its own
     * (a round's fragment is copied out and the merge copied back) */
    if (!p->streaming)
        RUMOR_CHECK(rumor_trainer_bind(p->tr, rumor_mixer_params(p->mixer)));
    /* a round's parameters go out once the GPU stages' copy of them landed
     * (it runs while the round's gradient is computed) */
    if (rumor_trainer_pipelined(p->tr))
        rumor_mixer_set_params_ready(p->mixer, trainer_params_ready, p->tr);
    if (rumor_trainer_fills_cores(p->tr)) { /* no core to spare: mixing goes in the bubbles */
        rumor_mixer_set_caller_mixes(p->mixer, 1);
        rumor_info("the stages fill the %ld cores: each mixes its own range of a round in its "
                   "idle time", sysconf(_SC_NPROCESSORS_ONLN));
    }
    if (!c->quiet)
        describe(p, &mc);
    rumor_peer_publish(p, RUMOR_PEER_WAITING);
    int ready = rumor_mixer_barrier(p->mixer, c->start_timeout);
    if (p->stop)
        return 1;
    if (ready < 0)
        return rumor_err_prefix(rumor_err_code(), "%s", p->is_open ? "joining" : "swarm");
    if (p->is_open) {
        p->N = rumor_mixer_members(p->mixer);
        if (!c->quiet)
            fprintf(p->out, "%s: joined a swarm of %d peer%s alive\n", p->who, p->N,
                    p->N == 1 ? "" : "s");
    }
    rumor_peer_event_start(p, ready);
    p->k = p->first_round;
    p->params = rumor_mixer_params(p->mixer);
    int rc = fetch_at_start(p);
    if (rc != 0)
        return rc;
    /* --outer: the anchor is where the first round starts */
    if (c->outer)
        RUMOR_CHECK(rumor_outer_create(&p->ocfg, rumor_trainer_params(p->tr), p->nparams,
                                       &p->outer));
    /* the optimizer steps of a round before its gossip: all H before an
     * outer step's, H - S before a streamed fragment's (S more while it
     * is away), H - 1 before D-PSGD's (the last is the round's own) */
    p->steps_before = p->streaming ? p->H - p->S
                      : p->strategy->all_steps_before ? p->H : p->H - 1;
    return 0;
}

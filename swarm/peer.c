/* The peer object (peer.h): its configuration, creation (the trainer and
 * a resumed checkpoint), the helpers its run shares, and its end. */
#include "peer_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "codec.h"
#include "log.h"
#include "source.h"

static const char *const phase_names[RUMOR_PEER_NPHASES] = {
    "starting", "waiting", "training", "leaving", "done",
};

const char *rumor_peer_phase_name(rumor_peer_phase phase)
{
    return (unsigned)phase < RUMOR_PEER_NPHASES ? phase_names[phase] : "unknown";
}

void rumor_peer_stats_init(rumor_peer_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->loss = s->consensus_distance = s->test_accuracy = s->eval_loss = NAN;
    s->link_utilization = NAN;
}

void rumor_peer_config_default(rumor_peer_config_t *c)
{
    memset(c, 0, sizeof *c);
    rumor_trainer_config_default(&c->trainer);
    c->mode = RUMOR_PEER_DPSGD;
    c->local_steps = 1;
    c->outer_rounds = 1;
    c->fragments = 1;
    c->merge = -1;
    c->balance_max = 4;
    c->send_ahead = 1;
    c->robust_val_batches = 4;
    c->throttle = 1;
    c->catch_up_rounds = 50;
    c->start_timeout = 60;
    c->swarm = "rumor";
    c->topology = "ring";
    c->compress = "none";
    c->npeers = 1;
    c->keep_checkpoints = 3;
    c->eval_every = 1;
    c->progress = 1;
    c->mixer.round_timeout = 10;
    c->mixer.min_round_timeout = 0.5;
    c->mixer.staleness = 8;
    c->mixer.conns_per_peer = 1;
    c->mixer.io_threads = 1;
}

static const char *mode_name(rumor_peer_mode m)
{
    return m == RUMOR_PEER_ASYNC ? "async" : m == RUMOR_PEER_ALLREDUCE ? "allreduce" : "dpsgd";
}

/* --fragments and --overlap (Streaming DiLoCo on a graph: swarm/strategy.c) */
static int streaming_check(const rumor_peer_config_t *c, const rumor_outer_config_t *oc)
{
    if (c->fragments < 1 || c->fragments > 4096)
        return rumor_err_set(RUMOR_EINVAL, "--fragments %d: expected 1 to 4096", c->fragments);
    if (c->overlap < 0)
        return rumor_err_set(RUMOR_EINVAL, "--overlap %d: at least 0", c->overlap);
    if (c->merge >= 0 && (c->merge > 1 || c->overlap == 0))
        return rumor_err_set(RUMOR_EINVAL, c->overlap ? "--overlap's alpha %g: expected 0 to 1"
                                                      : "--overlap's alpha merges the steps "
                                                        "taken while a fragment was away: it "
                                                        "needs S >= 1", c->merge);
    if (c->fragments == 1 && c->overlap == 0)
        return 0;
    const char *what = c->fragments > 1 ? "--fragments" : "--overlap";
    if (!oc || oc->kind == RUMOR_OUTER_OPTIM)
        return rumor_err_set(RUMOR_EINVAL, "%s streams the outer step of local SGD: it needs "
                                           "--outer sgd or nesterov with --local-steps H",
                             what);
    if (c->outer_rounds != 1)
        return rumor_err_set(RUMOR_EINVAL, "%s gossips a fragment a round: it takes no "
                                           "--outer-rounds", what);
    if (c->open)
        return rumor_err_set(RUMOR_EINVAL, "%s needs a closed swarm (--rank and --peers): a "
                                           "peer's gossip buffer holds one fragment, no state "
                                           "for a newcomer to fetch", what);
    if (c->mixer.codec.kind != RUMOR_CODEC_NONE)
        return rumor_err_set(RUMOR_EINVAL, "%s gossips in f32: compressed gossip keeps its "
                                           "estimates of the whole space (no --compress)", what);
    int H = c->local_steps, F = c->fragments;
    if (H % F)
        return rumor_err_set(RUMOR_EINVAL, "--fragments %d: --local-steps %d is not a "
                                           "multiple of it (a fragment goes every H / F steps)",
                             F, H);
    if (c->overlap > H / F)
        return rumor_err_set(RUMOR_EINVAL, "--overlap %d: at most H / F = %d steps (the next "
                                           "fragment goes then)", c->overlap, H / F);
    return 0;
}

int rumor_peer_config_check(const rumor_peer_config_t *c)
{
    const rumor_codec_t *codec = &c->mixer.codec;
    const char *mode = mode_name(c->mode);
    if (c->local_steps < 1)
        return rumor_err_set(RUMOR_EINVAL, "--local-steps %d: at least 1", c->local_steps);
    if (c->local_steps > 1 && c->mode == RUMOR_PEER_ALLREDUCE)
        return rumor_err_set(RUMOR_EINVAL, "--local-steps gossips parameters every H steps: it "
                                           "needs --mode dpsgd or async (not allreduce)");
    if (c->outer && c->mode != RUMOR_PEER_DPSGD)
        return rumor_err_set(RUMOR_EINVAL, "--outer steps after each synchronous round: it "
                                           "needs --mode dpsgd (not %s)", mode);
    rumor_outer_config_t oc;
    if (c->outer && rumor_outer_parse(c->outer, &oc) < 0)
        return RUMOR_EINVAL;
    if (codec->kind != RUMOR_CODEC_NONE && c->mode == RUMOR_PEER_ASYNC)
        return rumor_err_set(RUMOR_EINVAL, "--compress %s is compressed gossip in synchronous "
                                           "rounds: it needs --mode dpsgd or allreduce (not "
                                           "async)", c->compress);
    if (c->mode == RUMOR_PEER_ALLREDUCE && codec->kind != RUMOR_CODEC_NONE &&
        codec->kind != RUMOR_CODEC_INT8 && codec->kind != RUMOR_CODEC_INT4)
        return rumor_err_set(RUMOR_EINVAL, "--compress %s: the all-reduce's codecs are int8 and "
                                           "int4 (sums of sparse ranges are not sparse)",
                             c->compress);
    if (c->balance && c->mode != RUMOR_PEER_DPSGD)
        return rumor_err_set(RUMOR_EINVAL, "--balance batch fills the time a peer waits for its "
                                           "neighbours: it needs --mode dpsgd (not %s)", mode);
    if (c->outer_rounds < 0 || c->outer_rounds > 4096)
        return rumor_err_set(RUMOR_EINVAL, "--outer-rounds %d: expected 1 to 4096, or period",
                             c->outer_rounds);
    if (c->outer_rounds != 1 && !c->outer)
        return rumor_err_set(RUMOR_EINVAL, "--outer-rounds sets how many gossip rounds an outer "
                                           "step mixes over: it needs --outer");
    if (c->outer && oc.kind == RUMOR_OUTER_OPTIM && c->open)
        return rumor_err_set(RUMOR_EINVAL, "--outer optim needs a closed swarm (--rank and "
                                           "--peers): inside an outer step a peer's buffer is "
                                           "no state for a newcomer to fetch");
    if (c->outer && oc.kind == RUMOR_OUTER_OPTIM && c->local_steps != 1)
        return rumor_err_set(RUMOR_EINVAL, "--outer optim steps the peer's optimizer on the mean "
                                           "of one gradient a peer: it needs --local-steps 1 "
                                           "(not %d)", c->local_steps);
    if (c->outer && oc.kind != RUMOR_OUTER_OPTIM && c->local_steps < 2 && c->outer_rounds == 1)
        return rumor_err_set(RUMOR_EINVAL, "--outer steps each round's start by what H local "
                                           "steps and the mix propose (DiLoCo): it needs "
                                           "--local-steps H with H >= 2");
    RUMOR_CHECK(streaming_check(c, c->outer ? &oc : NULL));
    if (codec->kind == RUMOR_CODEC_NONE && c->mixer.keyframe_every)
        return rumor_err_set(RUMOR_EINVAL, "--keyframe-every sets how often compressed gossip "
                                           "sends full parameters: it needs --compress");
    if (codec->kind == RUMOR_CODEC_NONE && c->mixer.consensus_step > 0)
        return rumor_err_set(RUMOR_EINVAL, "--consensus-step is compressed gossip's "
                                           "(CHOCO-SGD's) step: it needs --compress");
    if (c->mixer.robust_probe > 0 && c->robust_val_batches < 1)
        return rumor_err_set(RUMOR_EINVAL, "--robust-val: %d validation batches a probe (1 or "
                             "more)", c->robust_val_batches);
    if (c->mixer.min_round_timeout > c->mixer.round_timeout)
        return rumor_err_set(RUMOR_EINVAL, "--min-round-timeout %g is above --round-timeout %g "
                                           "(the shortest deadline and the longest)",
                             c->mixer.min_round_timeout, c->mixer.round_timeout);
    return 0;
}

/* Resumes from the newest checkpoint of this swarm and rank (an open
 * swarm's: this id's) that loads. */
static int resume(rumor_peer_t *p)
{
    char path[1024];
    long round = 0;
    int lrc = rumor_trainer_resume_latest(p->tr, p->cfg.checkpoint_dir, p->ckpt_swarm, p->rank,
                                          &round, path, sizeof path);
    if (lrc < 0)
        return lrc;
    if (lrc == 0 && round >= p->total_rounds)
        /* a finished run restarted (a service manager's restart, a script
         * run twice): nothing to do is not success */
        return rumor_err_set(RUMOR_ESTATE, "%s is at round %ld, %s this run's last round %ld: "
                                           "nothing left to train (give more --epochs or "
                                           "--rounds to go on from it)", path, round,
                             round == p->total_rounds ? "at" : "past", p->total_rounds);
    if (lrc == 0) {
        p->first_round = round;
        /* stderr, even when quiet: which file a run continues matters */
        fprintf(stderr, "%s: resumed from %s at round %ld\n", p->who, path, round);
    }
    return 0;
}

/* --outer-rounds: R rounds an outer step; `period` is the topology's, which
 * must vary (a static graph's one round is the default) */
static int outer_rounds(rumor_peer_t *p, const rumor_peer_config_t *c)
{
    p->R = 1;
    if (!c->outer || c->outer_rounds == 1)
        return 0;
    if (c->outer_rounds > 1) {
        p->R = c->outer_rounds;
        return 0;
    }
    if (p->is_open)
        return rumor_err_set(RUMOR_EINVAL, "--outer-rounds period: an open swarm's graph and "
                                           "its period change with its members; give a number "
                                           "of rounds");
    rumor_topo_t *t = (rumor_topo_t *)c->mixer.topo;
    if (!t && rumor_topo_parse(p->spec, &t) < 0)
        return rumor_err_prefix(rumor_err_code(), "--topology");
    p->R = t->period;
    if (t != c->mixer.topo)
        rumor_topo_destroy(&t);
    if (p->R < 2)
        return rumor_err_set(RUMOR_EINVAL, "--outer-rounds period: %s is static (its period is "
                                           "one round); exact averaging needs a schedule of "
                                           "graphs such as onepeer-exp (a power of 2 peers) or "
                                           "base:K",
                             p->spec);
    return 0;
}

static int create(rumor_peer_t *p, const rumor_peer_config_t *c)
{
    RUMOR_CHECK(rumor_peer_config_check(c));
    p->cfg = *c;
    if (c->outer)
        RUMOR_CHECK(rumor_outer_parse(c->outer, &p->ocfg));
    p->optim = c->outer && p->ocfg.kind == RUMOR_OUTER_OPTIM;
    p->out = c->out ? c->out : stdout;
    p->is_open = c->open != NULL;
    p->rank = p->is_open ? 0 : c->rank;
    p->N = p->is_open ? 1 : c->npeers;
    p->async = c->mode == RUMOR_PEER_ASYNC;
    p->dpsgd = c->mode != RUMOR_PEER_ALLREDUCE;
    p->H = c->local_steps;
    p->F = c->fragments > 1 ? c->fragments : 1;
    p->S = c->overlap;
    p->streaming = c->outer && (p->F > 1 || p->S > 0);
    if (p->streaming)
        p->H = c->local_steps / p->F;
    p->alpha = c->merge >= 0 ? (float)c->merge : p->S ? 0.5f : 0.0f;
    p->ckpt_swarm = p->is_open ? c->open->ckpt_swarm : c->swarm;
    if (p->is_open) {
        snprintf(p->name, sizeof p->name, "%s", c->open->name);
        snprintf(p->who, sizeof p->who, "rumor-%s", c->open->name);
        snprintf(p->spec, sizeof p->spec, "%s over the peers alive", c->topology);
    } else {
        snprintf(p->name, sizeof p->name, "peer %d", p->rank);
        snprintf(p->who, sizeof p->who, "rumor-peer %d/%d", p->rank, p->N);
        if (strchr(c->topology, ':'))
            snprintf(p->spec, sizeof p->spec, "%s", c->topology);
        else
            snprintf(p->spec, sizeof p->spec, "%s:%d", c->topology, p->N);
    }
    rumor_peer_stats_init(&p->stats);
    p->stats.rank = p->is_open ? -1 : p->rank;
    if (p->is_open)
        snprintf(p->stats.peer, sizeof p->stats.peer, "%016llx",
                 (unsigned long long)c->open->id);
    p->stats.peers = p->N;
    p->res.average_accuracy = -1;
    p->res.local_accuracy = -1;
    p->evaluated_at = -1;

    /* ---- device, data, model, optimizer: the trainer. Every peer starts
     * from the same model (the same seed) and runs the same rounds per
     * epoch: the full batches of the smallest shard (lockstep). Gossip
     * reads the parameters from host memory. */
    rumor_trainer_config_t tc = c->trainer;
    tc.lockstep = 1;
    tc.host_params = 1;
    /* an open swarm: no shards; each peer its own seeded stream over the
     * whole training set (its id picks the stream), so a peer that leaves
     * for good takes no data with it */
    if (p->is_open)
        tc.data_stream = c->open->id;
    /* --local-steps H: a round is H optimizer steps (with --outer-rounds R,
     * R rounds are); the schedule and the data count steps, the swarm counts
     * rounds */
    RUMOR_CHECK(outer_rounds(p, c));
    tc.steps = (c->rounds + p->R - 1) / p->R * p->H;
    tc.eval_batches = rumor_source_spec_kind(tc.data, NULL) == RUMOR_BATCH_TOKENS ? 16 : 0;
    double t_load = rumor_now();
    RUMOR_CHECK(rumor_trainer_create(&tc, &p->tr));
    p->t_loaded = rumor_now() - t_load;
    p->per_epoch = rumor_trainer_steps_per_epoch(p->tr) / p->H;
    if (p->per_epoch < 1)
        p->per_epoch = 1;
    p->per_epoch *= p->R;
    p->total_rounds = rumor_trainer_total_steps(p->tr);
    if (p->H > 1 || p->R > 1) /* whole rounds: --rounds, or each epoch's */
        p->total_rounds = c->rounds ? c->rounds : p->per_epoch * tc.epochs;
    p->nparams = rumor_trainer_model(p->tr)->nparams;
    p->flen = (p->nparams + (size_t)p->F - 1) / (size_t)p->F;
    p->res.lm = rumor_trainer_is_lm(p->tr);
    /* every event names its peer: peers may share the file (progress.h) */
    if (c->metrics) {
        char idhex[24];
        snprintf(idhex, sizeof idhex, "%016llx",
                 (unsigned long long)(p->is_open ? c->open->id : 0));
        if (rumor_metrics_open(&p->metrics, c->metrics) < 0 ||
            (p->is_open ? rumor_metrics_tag_str(&p->metrics, "peer", idhex)
                        : rumor_metrics_tag_int(&p->metrics, "rank", p->rank)) < 0 ||
            rumor_metrics_tag_str(&p->metrics, "swarm", c->swarm) < 0)
            return rumor_err_prefix(rumor_err_code(), "metrics");
    }
    p->avg = malloc(p->nparams * sizeof(float));
    if (!p->avg)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory for the swarm average");
    if (c->checkpoint_dir)
        RUMOR_CHECK(resume(p));
    /* the run's length, now that the data is loaded */
    p->stats.rounds_total = p->total_rounds;
    rumor_peer_publish(p, RUMOR_PEER_STARTING);
    return 0;
}

int rumor_peer_create(const rumor_peer_config_t *c, rumor_peer_t **out)
{
    *out = NULL;
    rumor_peer_t *p = calloc(1, sizeof *p);
    if (!p)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    int rc = create(p, c);
    if (rc < 0) {
        rumor_peer_destroy(&p);
        return rc;
    }
    *out = p;
    return 0;
}

void rumor_peer_stop(rumor_peer_t *p, int sig)
{
    if (!p || p->stop)
        return;
    p->stop = sig > 0 ? sig : 1;
    rumor_mixer_t *m = p->hurry;
    if (m)
        rumor_mixer_hurry(m);
}

int rumor_peer_started(const rumor_peer_t *p)
{
    return p && p->started;
}

const rumor_peer_result_t *rumor_peer_result(const rumor_peer_t *p)
{
    return &p->res;
}

const float *rumor_peer_params(const rumor_peer_t *p, size_t *n)
{
    *n = p->nparams;
    return p->tr ? rumor_trainer_params(p->tr) : NULL;
}

const char *rumor_peer_strategy(const rumor_peer_t *p)
{
    return p->strategy ? p->strategy->name : "";
}

const char *rumor_peer_name(const rumor_peer_t *p)
{
    return p->name;
}

void rumor_peer_destroy(rumor_peer_t **pp)
{
    rumor_peer_t *p = *pp;
    if (!p)
        return;
    p->hurry = NULL; /* a stop from here on has no mixer to hurry */
    rumor_mixer_destroy(&p->mixer, 5.0); /* flushes queued chunks, then LEAVE */
    rumor_peer_publish(p, RUMOR_PEER_NPHASES); /* the last figures, phase unchanged */
    rumor_metrics_close(&p->metrics);
    if (rumor_trace_close(&p->trace) < 0)
        rumor_warn("%s", rumor_err_msg());
    rumor_trainer_destroy(&p->tr);
    rumor_outer_destroy(&p->outer);
    free(p->avg);
    free(p);
    *pp = NULL;
}

/* ------------------------------------------------ shared by the run */

/* phase RUMOR_PEER_NPHASES: the figures only */
void rumor_peer_publish(rumor_peer_t *p, rumor_peer_phase phase)
{
    if (p->cfg.observe)
        p->cfg.observe(p->cfg.observe_arg, &p->stats, phase);
}

int rumor_peer_checkpoint(rumor_peer_t *p, long round)
{
    int rc = rumor_trainer_save(p->tr, p->cfg.checkpoint_dir, p->ckpt_swarm, p->rank, round,
                                p->cfg.keep_checkpoints);
    p->res.checkpoints++;
    if (rc < 0) {
        /* an error, not a warning: the run is not protected. Training goes
         * on (the next one may work); the result says it */
        p->res.checkpoints_failed++;
        snprintf(p->res.checkpoint_error, sizeof p->res.checkpoint_error, "round %ld: %s",
                 round, rumor_err_msg());
        rumor_error("checkpoint at round %ld failed: %s", round, rumor_err_msg());
        return rc;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* for people: a date */
    p->stats.checkpoint_unix = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    rumor_peer_publish(p, RUMOR_PEER_NPHASES);
    return 0;
}

/* Evaluates parameters `params` (NULL: its own) with the peer's model. */
int rumor_peer_evaluate(rumor_peer_t *p, float *params, double *acc, double *loss)
{
    rumor_eval_t e;
    RUMOR_CHECK(rumor_trainer_evaluate(p->tr, params, -1, &e));
    *acc = e.accuracy; /* -1 for a language model */
    *loss = e.loss;
    return 0;
}

/* Sleeps s seconds, less if the peer is stopped. */
void rumor_peer_sleep(rumor_peer_t *p, double s)
{
    if (s <= 0)
        return;
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && !p->stop)
        ;
}

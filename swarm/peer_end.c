/* The end of a peer's run: stopped (a last checkpoint, the neighbours
 * told), or over (the final evaluation, the swarm's average, saved where
 * asked or where it can be, the done event). */
#include "peer_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "log.h"

/* A stop before training began: nothing trained, nothing to save; the
 * neighbours are told (LEAVE, when the peer is destroyed). */
void rumor_peer_left_before(rumor_peer_t *p)
{
    p->res.left_on = (int)p->stop;
    p->res.left_before = 1;
    p->res.round = -1;
    rumor_peer_publish(p, RUMOR_PEER_LEAVING);
    rumor_peer_event_leave(p, -1, 0);
}

/* The swarm average into save_average; where that fails (the disk filled,
 * the directory went away), into the checkpoint directory or a new
 * temporary one instead, named on stderr, so that the run's result is not
 * lost (res.average_lost). */
static void save_average(rumor_peer_t *p)
{
    const rumor_peer_config_t *c = &p->cfg;
    char name[200], file[256] = "";
    long round = p->total_rounds;
    snprintf(name, sizeof name, "%s-average", p->ckpt_swarm);
    RUMOR_IGNORE(rumor_ckpt_filename(name, p->rank, round, file, sizeof file));
    if (rumor_trainer_save_params(p->tr, p->avg, c->save_average, name, p->rank, round) == 0) {
        fprintf(p->out, "%s: swarm average saved to %s/%s\n", p->name, c->save_average, file);
        return;
    }
    p->res.average_lost = 1;
    char why[600], tmpdir[512];
    snprintf(why, sizeof why, "%s", rumor_err_msg());
    const char *dir = NULL;
    if (c->checkpoint_dir && strcmp(c->checkpoint_dir, c->save_average) != 0 &&
        rumor_trainer_save_params(p->tr, p->avg, c->checkpoint_dir, name, p->rank, round) == 0)
        dir = c->checkpoint_dir;
    if (!dir) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/rumor-average-XXXXXX", t && *t ? t : "/tmp");
        if (mkdtemp(tmpdir) &&
            rumor_trainer_save_params(p->tr, p->avg, tmpdir, name, p->rank, round) == 0)
            dir = tmpdir;
    }
    if (dir)
        fprintf(stderr, "rumor-%s: --save-average %s: %s; the swarm average is saved to %s/%s "
                        "instead\n", p->name, c->save_average, why, dir, file);
    else
        fprintf(stderr, "rumor-%s: --save-average %s: %s; no other place could take the swarm "
                        "average either (%s)\n", p->name, c->save_average, why, rumor_err_msg());
}

/* p->avg = the all-reduce's mean of the parameters; streaming, fragment
 * by fragment (the gossip space is one fragment long) */
static int average_params(rumor_peer_t *p, int tries)
{
    const float *x = rumor_trainer_params(p->tr);
    double timeout = fmax(p->cfg.mixer.round_timeout, 10.0);
    if (!p->streaming)
        return rumor_peer_average(p->mixer, x, p->avg, p->nparams, p->total_rounds, timeout,
                                  tries);
    float *in = calloc(2 * p->flen, sizeof *in);
    if (!in)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory for a fragment");
    float *out = in + p->flen;
    int rc = 0;
    for (int f = 0; f < p->F && rc == 0; f++) {
        size_t lo = (size_t)f * p->flen;
        size_t len = p->nparams - lo < p->flen ? p->nparams - lo : p->flen;
        memcpy(in, x + lo, len * sizeof *in);
        memset(in + len, 0, (p->flen - len) * sizeof *in);
        rc = rumor_peer_average(p->mixer, in, out, p->flen, p->total_rounds + (long)f * tries,
                                timeout, tries);
        memcpy(p->avg + lo, out, len * sizeof *out);
    }
    free(in);
    return rc;
}

/* The swarm's average model: an all-reduce of the parameters, with
 * membership over the peers alive (tried again over the survivors if one
 * dies during it), with a fixed list over every rank. */
static int average(rumor_peer_t *p)
{
    const rumor_peer_config_t *c = &p->cfg;
    rumor_peer_result_t *res = &p->res;
    int tries = c->swim ? 3 : 1;
    if (average_params(p, tries) < 0) {
        snprintf(res->average_note, sizeof res->average_note, "unavailable: %s%s",
                 rumor_err_msg(), tries > 1 ? ""
                                            : " (a fixed list averages over every rank; with "
                                              "--membership swim it is over the peers alive)");
        return 0;
    }
    if (rumor_peer_evaluate(p, p->avg, &res->average_accuracy, &res->average_loss) < 0)
        return rumor_err_prefix(rumor_err_code(), "evaluation");
    if (rumor_trainer_is_lm(p->tr))
        res->average_accuracy = -1;
    if (tries > 1)
        res->average_members = rumor_mixer_allreduce_size(p->mixer);
    if (c->save_average)
        save_average(p);
    return 0;
}

int rumor_peer_finish(rumor_peer_t *p)
{
    const rumor_peer_config_t *c = &p->cfg;
    rumor_peer_result_t *res = &p->res;
    int leaving = p->stop && p->k < p->total_rounds;
    res->seconds = rumor_now() - p->start;
    res->round = p->k;
    res->rounds = p->total_rounds;
    res->examples_per_second = res->seconds > 0 ? p->examples / res->seconds : 0;
    rumor_peer_publish(p, leaving ? RUMOR_PEER_LEAVING : RUMOR_PEER_DONE);
    if (rumor_trainer_sync_params(p->tr) < 0) /* the last round's copy from the GPU stages */
        return rumor_err_prefix(rumor_err_code(), "model");
    /* a peer that caught up at the very end trained no epoch to its end */
    if (!leaving && p->evaluated_at != p->k &&
        rumor_peer_evaluate(p, NULL, &res->local_accuracy, &res->local_loss) < 0)
        return rumor_err_prefix(rumor_err_code(), "evaluation");
    if (rumor_trainer_is_lm(p->tr))
        res->local_accuracy = -1;
    rumor_mixer_counters(p->mixer, &res->counters);
    rumor_mixer_wire_stats(p->mixer, &res->messages);
    rumor_mixer_transport_stats(p->mixer, &res->connections);
    if (leaving) { /* stopped: checkpoint; the neighbours are told when it is destroyed */
        res->left_on = (int)p->stop;
        if (c->checkpoint_dir)
            res->left_checkpoint = rumor_peer_checkpoint(p, p->k) == 0 ? 1 : -1;
        rumor_peer_event_leave(p, p->k, res->left_checkpoint == 1);
        return 0;
    }
    /* a peer that trained alone although it has neighbours */
    res->alone = (p->N > 1 || p->is_open) && res->rounds_run > 0 &&
                 res->counters.rounds_mixed == 0 && !c->allow_alone;
    res->average_accuracy = -1;
    res->average_loss = -1;
    res->average_members = p->N;
    if (!c->no_average && !res->alone)
        RUMOR_CHECK(average(p));
    rumor_peer_event_done(p);
    return 0;
}

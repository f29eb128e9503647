/* Catching up with the swarm (see catchup.h). */
#include "catchup.h"

rumor_catchup_action rumor_catchup_at_start(long catch_up_rounds, int newcomer, long swarm_round,
                                            long round)
{
    long lead = newcomer ? 1 : catch_up_rounds;
    return swarm_round > round + lead ? RUMOR_CATCHUP_FETCH : RUMOR_CATCHUP_NONE;
}

void rumor_catchup_init(rumor_catchup_t *c, long catch_up_rounds, double now)
{
    c->catch_up_rounds = catch_up_rounds < 0 ? 0 : catch_up_rounds;
    c->rounds_run = 0;
    c->last_end = now;
    c->gap_at = -1e300;
}

rumor_catchup_action rumor_catchup_after_round(rumor_catchup_t *c, const rumor_round_stats_t *st,
                                               long next, double now, long *target)
{
    c->rounds_run++;
    double deadline = st->deadline_s > 0 ? st->deadline_s : 0.0;
    if (now - c->last_end > 2.0 + 2.0 * deadline)
        c->gap_at = now; /* frozen or suspended */
    c->last_end = now;
    long to = -1;
    /* a neighbour dropped our round as stale (its word alone: after a
     * partition heals one edge is all the evidence there is): join its
     * round, under way, where it still waits for our part. Far behind
     * (more than two windows), it has stopped waiting for us (mixer_round.c:
     * a neighbour more than MX_WAIT_LAG rounds behind for the liveness
     * window is not waited for): a peer landing in its round arrives after
     * it moved on, is told again, and chases it for good (a ring healed
     * after a partition did, jump after jump, and never merged); landing
     * one round past it, this peer waits for it instead, and it waits for
     * this peer once our rounds reach it. */
    if (st->behind_round > next)
        to = st->behind_round - next > 2 * (long)st->window ? st->behind_round + 1
                                                           : st->behind_round;
    if (st->swarm_round >= next + st->window && st->swarm_round > to)
        to = st->swarm_round; /* neighbours' rounds beyond our window */
    *target = next;
    if (to <= next)
        return RUMOR_CATCHUP_NONE;
    *target = to;
    int stale = c->rounds_run <= c->catch_up_rounds || now - c->gap_at < 2.0 + 4.0 * deadline;
    return to - next > c->catch_up_rounds && stale ? RUMOR_CATCHUP_FETCH : RUMOR_CATCHUP_JUMP;
}

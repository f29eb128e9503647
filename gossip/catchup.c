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
    if (st->behind_round > next)
        to = st->behind_round; /* a neighbour dropped our round as stale: join
                                * its round, under way (its word alone: after a
                                * partition heals one edge is all the evidence
                                * there is) */
    if (st->swarm_round >= next + st->window && st->swarm_round > to)
        to = st->swarm_round; /* neighbours' rounds beyond our window */
    *target = next;
    if (to <= next)
        return RUMOR_CATCHUP_NONE;
    *target = to;
    int stale = c->rounds_run <= c->catch_up_rounds || now - c->gap_at < 2.0 + 4.0 * deadline;
    return to - next > c->catch_up_rounds && stale ? RUMOR_CATCHUP_FETCH : RUMOR_CATCHUP_JUMP;
}

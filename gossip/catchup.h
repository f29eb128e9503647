/* Catching up with the swarm: what a synchronous D-PSGD peer does after a
 * round when its neighbours are ahead of it (rumor-peer applies it after
 * every round; tests drive it with made-up round statistics).
 *
 * The evidence is in the round's statistics (mixer.h): a neighbour that
 * dropped this peer's parameters as stale said at which round it is
 * (behind_round), and neighbours' messages for rounds beyond this peer's
 * window (swarm_round). The target is the newest of them: the round the
 * swarm is in. The peer joins that round rather than the one after it:
 * the neighbours in it still wait for this peer's part, and a jump past
 * them would leave them behind in turn, so that in a large swarm jumps
 * would chase each other (64 peers on 2 cores ran at 2 rounds a second,
 * every round waiting out its deadline, before this was so). Except far
 * behind a neighbour that said so (more than two windows): that neighbour
 * stopped waiting for this peer, and a peer landing in its round would
 * arrive after it moved on, again and again (a ring healed after two
 * kills never merged: test_membership); one round past it, this peer
 * waits for it instead.
 *
 * Behind by at most catch_up_rounds: the peer jumps there keeping its
 * parameters. Further behind, a peer whose parameters are stale fetches the
 * swarm's state instead: one that just started (from scratch or a
 * checkpoint: its first catch_up_rounds rounds) or was frozen (a round that
 * ended more than 2 s + 2 deadlines after the previous one; the news that
 * the swarm moved on arrives some rounds later, so a gap counts for
 * 2 s + 4 deadlines). One that kept training all along (its part of the
 * swarm was cut off, or ran slower) jumps, and gossip then merges its
 * parameters with the others' instead of throwing that training away. */
#ifndef RUMOR_CATCHUP_H
#define RUMOR_CATCHUP_H

#include "mixer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_catchup {
    long catch_up_rounds; /* the most rounds skipped keeping the parameters */
    long rounds_run;      /* rounds this process ran */
    double last_end;      /* when the previous round ended (rumor_now) */
    double gap_at;        /* when a round after a gap ended */
} rumor_catchup_t;

typedef enum {
    RUMOR_CATCHUP_NONE = 0, /* in step with the swarm */
    RUMOR_CATCHUP_JUMP,     /* skip to *target, keeping the parameters */
    RUMOR_CATCHUP_FETCH     /* fetch the swarm's state (rumor_mixer_catch_up) */
} rumor_catchup_action;

/* Before the first round, with the swarm at swarm_round (-1 unknown) and
 * this peer at `round`: FETCH when the swarm is more than catch_up_rounds
 * ahead (a restart, a late joiner of a list), or, for a newcomer (open
 * membership, nothing resumed: its parameters are the initial ones), more
 * than one round ahead: a fresh model would only pull its neighbours
 * back, and the swarm's state is what it should start from. Else NONE
 * (a round or two behind is made up by jumping after the first round). */
rumor_catchup_action rumor_catchup_at_start(long catch_up_rounds, int newcomer, long swarm_round,
                                            long round);

/* now: when the first round starts. */
void rumor_catchup_init(rumor_catchup_t *c, long catch_up_rounds, double now);

/* After a round that ended at `now`, whose statistics are st and after
 * which this peer would run round `next`: counts the round and returns what
 * to do, with the round to go to in *target (next when NONE). */
rumor_catchup_action rumor_catchup_after_round(rumor_catchup_t *c, const rumor_round_stats_t *st,
                                               long next, double now, long *target);

#ifdef __cplusplus
}
#endif
#endif

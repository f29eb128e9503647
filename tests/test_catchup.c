/* Catching up with the swarm (gossip/catchup.h), driven with made-up round
 * statistics and clocks: each case is the situation a real swarm test
 * (test_freeze.sh, test_partition.sh, test_join.sh) produces, with the
 * decision worked out by hand from the rules in catchup.h. */
#include "catchup.h"
#include "testutil.h"

/* Round statistics of a round with deadline 1 s; swarm_round and
 * behind_round -1 (no news) unless given. */
static rumor_round_stats_t stats(long swarm_round, long behind_round, int window)
{
    rumor_round_stats_t st = { 0 };
    st.deadline_s = 1.0;
    st.swarm_round = swarm_round;
    st.behind_round = behind_round;
    st.window = window;
    return st;
}

static const char *name(rumor_catchup_action a)
{
    return a == RUMOR_CATCHUP_NONE ? "none" : a == RUMOR_CATCHUP_JUMP ? "jump" : "fetch";
}

#define EXPECT(c, st, next, now, want, want_target)                                          \
    do {                                                                                     \
        long t_ = -7;                                                                        \
        rumor_catchup_action a_ = rumor_catchup_after_round(c, st, next, now, &t_);          \
        CHECKF(a_ == (want) && t_ == (want_target), "%s -> %ld, expected %s -> %ld", name(a_), \
               t_, name(want), (long)(want_target));                                         \
    } while (0)

int main(void)
{
    rumor_catchup_t c;
    rumor_round_stats_t st;

    /* in step: neighbours' rounds inside the window, nobody says we lag */
    rumor_catchup_init(&c, 50, 0.0);
    st = stats(11, -1, 2);
    EXPECT(&c, &st, 10, 0.1, RUMOR_CATCHUP_NONE, 10);
    st = stats(-1, -1, 2); /* no news at all */
    EXPECT(&c, &st, 11, 0.2, RUMOR_CATCHUP_NONE, 11);

    /* a newcomer (its first 50 rounds) far behind: its parameters are the
     * initial ones, so it fetches; target: the swarm's round */
    rumor_catchup_init(&c, 50, 0.0);
    st = stats(500, -1, 2);
    EXPECT(&c, &st, 1, 0.1, RUMOR_CATCHUP_FETCH, 500);
    /* ... a little behind (at most 50 rounds): it jumps */
    rumor_catchup_init(&c, 50, 0.0);
    st = stats(40, -1, 2);
    EXPECT(&c, &st, 1, 0.1, RUMOR_CATCHUP_JUMP, 40);
    /* a jump of exactly 50 rounds keeps the parameters, 51 fetches */
    rumor_catchup_init(&c, 50, 0.0);
    st = stats(51, -1, 0);
    EXPECT(&c, &st, 1, 0.1, RUMOR_CATCHUP_JUMP, 51);
    rumor_catchup_init(&c, 50, 0.0);
    st = stats(52, -1, 0);
    EXPECT(&c, &st, 1, 0.1, RUMOR_CATCHUP_FETCH, 52);

    /* a peer that trained all along (100 steady rounds of 0.1 s), then hears
     * the swarm is 200 rounds ahead (its side of a partition was slower):
     * it jumps and keeps its training for gossip to merge */
    rumor_catchup_init(&c, 50, 0.0);
    double now = 0.0;
    long k;
    for (k = 0; k < 100; k++) {
        st = stats(k + 1, -1, 2);
        now += 0.1;
        EXPECT(&c, &st, k + 1, now, RUMOR_CATCHUP_NONE, k + 1);
    }
    st = stats(300, -1, 2);
    now += 0.1;
    EXPECT(&c, &st, 101, now, RUMOR_CATCHUP_JUMP, 300);

    /* frozen: a round that ends 30 s after the previous one (more than
     * 2 s + 2 deadlines); the news arrives 3 rounds later, within 2 s + 4
     * deadlines of the gap, and the peer fetches */
    now += 30.0;
    st = stats(301, -1, 2);
    EXPECT(&c, &st, 301, now, RUMOR_CATCHUP_NONE, 301);
    for (int i = 0; i < 2; i++) {
        now += 0.1;
        st = stats(302 + i, -1, 2);
        EXPECT(&c, &st, 302 + i, now, RUMOR_CATCHUP_NONE, 302 + i);
    }
    now += 0.1;
    st = stats(900, -1, 2);
    EXPECT(&c, &st, 304, now, RUMOR_CATCHUP_FETCH, 900);
    /* a round of 10 s is a gap itself: news then fetches again */
    now += 10.0;
    st = stats(2000, -1, 2);
    EXPECT(&c, &st, 901, now, RUMOR_CATCHUP_FETCH, 2000);
    /* 65 steady rounds later (6.5 s, past 2 s + 4 deadlines) news jumps */
    now += 6.5;
    for (int i = 0; i < 65; i++) {
        st = stats(2001 + i, -1, 2);
        EXPECT(&c, &st, 2001 + i, now - 6.5 + 0.1 * (i + 1), RUMOR_CATCHUP_NONE, 2001 + i);
    }
    st = stats(5000, -1, 2);
    EXPECT(&c, &st, 2066, now + 0.1, RUMOR_CATCHUP_JUMP, 5000);

    /* a neighbour dropped this peer's round as stale and is at round 103:
     * its word alone moves the peer to 103 (joining the round under way,
     * where that neighbour still waits for it), even inside the window */
    rumor_catchup_init(&c, 50, 0.0);
    st = stats(-1, 103, 2);
    EXPECT(&c, &st, 100, 0.1, RUMOR_CATCHUP_JUMP, 103);
    /* at round 120, more than two windows (2) ahead: it no longer waits for
     * this peer, which lands one round past it and waits for it instead */
    st = stats(-1, 120, 2);
    EXPECT(&c, &st, 100, 0.15, RUMOR_CATCHUP_JUMP, 121);
    /* both kinds of news: the newer wins */
    st = stats(140, 120, 2);
    EXPECT(&c, &st, 100, 0.2, RUMOR_CATCHUP_JUMP, 140);
    st = stats(101, 130, 2);
    EXPECT(&c, &st, 100, 0.3, RUMOR_CATCHUP_JUMP, 131);
    /* a neighbour behind us, or one at our round, is no reason to move;
     * nor is one a round ahead that dropped our last round (we begin its
     * round next) */
    st = stats(99, 99, 2);
    EXPECT(&c, &st, 100, 0.4, RUMOR_CATCHUP_NONE, 100);
    st = stats(-1, 100, 2);
    EXPECT(&c, &st, 100, 0.5, RUMOR_CATCHUP_NONE, 100);
    CHECK(c.rounds_run == 6);
    /* catch_up_rounds 0: any lag of a fresh peer fetches */
    rumor_catchup_init(&c, 0, 0.0);
    st = stats(10, -1, 0);
    EXPECT(&c, &st, 9, 0.1, RUMOR_CATCHUP_JUMP, 10); /* rounds_run 1 > 0: not fresh */

    /* before the first round: a resumed or listed peer fetches only when
     * more than catch_up_rounds behind; an open-membership newcomer when
     * more than one round behind (its model is the initial one) */
    CHECK(rumor_catchup_at_start(50, 0, 120, 100) == RUMOR_CATCHUP_NONE);
    CHECK(rumor_catchup_at_start(50, 0, 151, 100) == RUMOR_CATCHUP_FETCH);
    CHECK(rumor_catchup_at_start(50, 1, 102, 100) == RUMOR_CATCHUP_FETCH);
    CHECK(rumor_catchup_at_start(50, 1, 101, 100) == RUMOR_CATCHUP_NONE);
    CHECK(rumor_catchup_at_start(50, 1, -1, 0) == RUMOR_CATCHUP_NONE); /* nobody known */
    CHECK(rumor_catchup_at_start(50, 1, 0, 0) == RUMOR_CATCHUP_NONE);  /* founders together */
    return tu_finish("test_catchup");
}

/* --balance batch's controller (src/balance.h) in a simulated synchronous
 * swarm: each round lasts as long as the slowest peer's compute (a batch
 * takes c_i seconds on peer i), and a peer waits for the rest of it.
 *
 * - peers 3.33x and 5x faster than the slowest settle at 3 and 4 batches a
 *   round (the whole batches in 95% of the round: floor(3.17) and
 *   floor(4.75)), the slowest at 1, and the round is never longer than the
 *   slowest peer's single batch: the swarm does (1 + 3 + 4) / 3 = 2.67x
 *   the work in the same time;
 * - the bound holds (--balance-max 2: 2 batches);
 * - a peer that never waits stays at 1 batch; one that stops waiting
 *   (its neighbour got faster) comes back down;
 * - non-finite, zero or negative times change nothing. */
#include <math.h>

#include "balance.h"
#include "testutil.h"

#define N 3

/* Runs `rounds` rounds of peers with batch times c[] and bounds max[];
 * returns the longest round of the last 10. */
static double simulate(const double *c, const int *max, int rounds, rumor_balance_t *b)
{
    for (int i = 0; i < N; i++)
        rumor_balance_init(&b[i], max[i]);
    double longest = 0;
    for (int r = 0; r < rounds; r++) {
        double compute[N], period = 0;
        int nb[N];
        for (int i = 0; i < N; i++) {
            nb[i] = rumor_balance_batches(&b[i]);
            compute[i] = nb[i] * c[i];
            period = fmax(period, compute[i]);
        }
        for (int i = 0; i < N; i++)
            rumor_balance_observe(&b[i], nb[i], compute[i], period - compute[i]);
        if (r >= rounds - 10)
            longest = fmax(longest, period);
    }
    return longest;
}

int main(void)
{
    rumor_balance_t b[N];
    const double c[N] = { 1.0, 0.3, 0.2 };
    const int max[N] = { 8, 8, 8 };
    double longest = simulate(c, max, 60, b);
    CHECKF(rumor_balance_batches(&b[0]) == 1 && rumor_balance_batches(&b[1]) == 3 &&
               rumor_balance_batches(&b[2]) == 4,
           "batches %d %d %d, expected 1 3 4", rumor_balance_batches(&b[0]),
           rumor_balance_batches(&b[1]), rumor_balance_batches(&b[2]));
    CHECKF(longest <= 1.0 + 1e-9, "a round of %.3f s: balancing slowed the swarm", longest);
    CHECK_CLOSE(b[1].per_batch, 0.3, 1e-9, 0);

    /* the bound */
    const int max2[N] = { 2, 2, 2 };
    longest = simulate(c, max2, 60, b);
    CHECK(rumor_balance_batches(&b[0]) == 1 && rumor_balance_batches(&b[1]) == 2 &&
          rumor_balance_batches(&b[2]) == 2 && longest <= 1.0 + 1e-9);

    /* equal peers: nobody waits, everyone keeps one batch */
    const double same[N] = { 0.5, 0.5, 0.5 };
    simulate(same, max, 30, b);
    for (int i = 0; i < N; i++)
        CHECK(rumor_balance_batches(&b[i]) == 1);

    /* a peer at 4 batches whose wait disappears comes back to 1 */
    rumor_balance_t d;
    rumor_balance_init(&d, 8);
    for (int r = 0; r < 20; r++)
        rumor_balance_observe(&d, rumor_balance_batches(&d), rumor_balance_batches(&d) * 0.2,
                              1.0 - rumor_balance_batches(&d) * 0.2);
    CHECK(rumor_balance_batches(&d) == 4);
    for (int r = 0; r < 20; r++)
        rumor_balance_observe(&d, rumor_balance_batches(&d), rumor_balance_batches(&d) * 0.2, 0);
    CHECKF(rumor_balance_batches(&d) == 1, "%d batches after 20 rounds without waiting",
           rumor_balance_batches(&d));

    /* bad measurements change nothing */
    rumor_balance_t e = d;
    rumor_balance_observe(&e, 1, NAN, 0.1);
    rumor_balance_observe(&e, 1, 0.1, INFINITY);
    rumor_balance_observe(&e, 1, 0.0, 0.1);
    rumor_balance_observe(&e, 1, 0.1, -1.0);
    rumor_balance_observe(&e, 0, 0.1, 0.1);
    CHECK(e.mult == d.mult && e.per_batch == d.per_batch);
    rumor_balance_init(&e, -3);
    CHECK(e.max == 1 && rumor_balance_batches(&e) == 1);
    return tu_finish("test_balance");
}

/* Batch balancing (balance.h): a controller on each peer's own wait. */
#include <math.h>

#include "balance.h"

#define MARGIN 0.05  /* share of the round left unfilled, so a peer at balance waits a little */
#define SMOOTH 0.5   /* weight of the newest round in the smoothed values */

void rumor_balance_init(rumor_balance_t *b, int max)
{
    b->max = max < 1 ? 1 : max;
    b->mult = 1.0;
    b->per_batch = 0.0;
}

int rumor_balance_batches(const rumor_balance_t *b)
{
    /* whole batches that fit: rounding up would lengthen the round, and a
     * peer that fills the round exactly could not tell that it became the
     * one everyone waits for */
    double m = floor(b->mult + 1e-9);
    if (m < 1.0)
        return 1;
    return m > (double)b->max ? b->max : (int)m;
}

void rumor_balance_observe(rumor_balance_t *b, int batches, double compute_s, double wait_s)
{
    if (batches < 1 || !isfinite(compute_s) || !isfinite(wait_s) || compute_s <= 0 || wait_s < 0)
        return;
    double per = compute_s / batches;
    b->per_batch = b->per_batch > 0 ? (1 - SMOOTH) * b->per_batch + SMOOTH * per : per;
    /* the batches that fit in this round's compute and wait, less the margin */
    double target = (1.0 - MARGIN) * (compute_s + wait_s) / b->per_batch;
    if (target < 1.0)
        target = 1.0;
    if (target > (double)b->max)
        target = (double)b->max;
    b->mult = (1 - SMOOTH) * b->mult + SMOOTH * target;
}

/* Batch balancing for swarms of unlike machines (rumor-peer --balance
 * batch).
 *
 * In synchronous D-PSGD every round waits for the slowest neighbour, so a
 * fast peer idles while a slow one computes. A balanced peer measures its
 * own compute time per batch and the time it waited for its neighbours in
 * each round, and takes as many whole batches (of --batch examples each,
 * their gradients averaged) in the next round as fit in its compute plus
 * that wait, less a 5% margin, between 1 and a bound the user sets: fast
 * peers
 * do more work in the rounds they would have idled, the slowest keeps one
 * batch, and the swarm's pace stays the slowest peer's.
 *
 * What it does to the objective: every peer's gradient stays the mean over
 * its own batches, an unbiased estimate of the gradient of its own loss
 * f_i, and the mixing weights do not change, so the swarm still minimizes
 * (1/n) sum_i f_i: each peer's data counts the same whatever its speed. A
 * fast peer's larger batch lowers its gradient's variance and walks its
 * shard faster (more passes in the same rounds); nothing reweights the
 * objective toward the fast peers' data. */
#ifndef RUMOR_BALANCE_H
#define RUMOR_BALANCE_H
#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_balance {
    int max;          /* batches a round at most (>= 1) */
    double mult;      /* batches a round, smoothed */
    double per_batch; /* seconds of compute a batch, smoothed (0: not measured yet) */
} rumor_balance_t;

/* Starts at one batch a round, at most `max` (clamped to >= 1). */
void rumor_balance_init(rumor_balance_t *b, int max);

/* Batches to take next round, in [1, max]. */
int rumor_balance_batches(const rumor_balance_t *b);

/* A round's measurements: `batches` computed in compute_s seconds, then
 * wait_s seconds waiting for neighbours. Non-finite or negative times are
 * ignored. */
void rumor_balance_observe(rumor_balance_t *b, int batches, double compute_s, double wait_s);

#ifdef __cplusplus
}
#endif
#endif

/* The outer optimizer of local SGD (rumor-peer --outer, with --local-steps):
 * DiLoCo's way (Douillard et al. 2023), on a graph. A round starts from the
 * anchor x0; the peer takes H local steps, gossips the result and gets the
 * mix m of its neighbours' results. The outer gradient is the change the
 * round proposes, d = x0 - m, and the outer optimizer steps the anchor:
 *
 *   sgd:      x0' = x0 - lr d                (lr = 1: plain local SGD, x0' = m)
 *   nesterov: v' = mu v + d,  x0' = x0 - lr (d + mu v')
 *
 * DiLoCo's choice for hundreds of local steps is nesterov with lr 0.7 and
 * momentum 0.9. The state (the anchor and v) lives in host memory.
 *
 *   optim:    the peer's own optimizer (--optimizer, its rate schedule,
 *             its state) steps the anchor once per outer step, on the
 *             gradient the mix implies, d / eta, where each peer took one
 *             plain SGD step of size eta from the anchor: with exact
 *             averaging (--outer-rounds period), d / eta is the mean of the
 *             peers' gradients, and the swarm trains as one process with N
 *             times the batch (its second moment estimated on that batch,
 *             not on each peer's). The peer runs that step (swarm/strategy.c);
 *             rumor_outer_step does not. */
#ifndef RUMOR_OUTER_H
#define RUMOR_OUTER_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RUMOR_OUTER_SGD = 0, RUMOR_OUTER_NESTEROV, RUMOR_OUTER_OPTIM } rumor_outer_kind;

typedef struct rumor_outer_config {
    rumor_outer_kind kind;
    float lr;       /* (0, 10] */
    float momentum; /* [0, 1), nesterov */
} rumor_outer_config_t;

/* Parses "sgd[:lr=X]", "nesterov[:lr=X][,momentum=Y]" (defaults: lr 0.7,
 * momentum 0.9; sgd: lr 1) or "optim" (no keys: the peer's optimizer has
 * its own). Errors name the bad part. */
int rumor_outer_parse(const char *spec, rumor_outer_config_t *out);

typedef struct rumor_outer {
    rumor_outer_config_t cfg;
    size_t n;
    float *anchor; /* (n) the parameters the round started from */
    float *v;      /* (n) nesterov's momentum; NULL for sgd */
} rumor_outer_t;

/* The anchor starts at x (n floats). */
int rumor_outer_create(const rumor_outer_config_t *cfg, const float *x, size_t n,
                       rumor_outer_t **out);
void rumor_outer_destroy(rumor_outer_t **op);

/* Starts over from x: the anchor becomes x, the momentum 0 (a peer whose
 * parameters were replaced: a state fetch, a resume). */
void rumor_outer_reset(rumor_outer_t *o, const float *x);

/* One outer step: x holds the mix of the round's results on entry and the
 * new anchor on return (which the next round starts from). */
void rumor_outer_step(rumor_outer_t *o, float *x);

/* The same on the coordinates [lo, hi) alone (a fragment, rumor-peer
 * --fragments): x holds their mix on entry (hi - lo floats, x[0] is
 * coordinate lo) and their new anchor on return. */
void rumor_outer_step_range(rumor_outer_t *o, float *x, size_t lo, size_t hi);

#ifdef __cplusplus
}
#endif
#endif

/* Robust mixing (gossip/mixer_robust.c): the comm thread's entry points,
 * for the mixer's own files (included by mixer_int.h). */
#ifndef RUMOR_MIXER_ROBUST_H
#define RUMOR_MIXER_ROBUST_H

#include <stdint.h>

#include "mixer.h"
#include "wire.h"

struct mx_slot;

int mx_robust_alloc(rumor_mixer_t *m);
void mx_robust_free(rumor_mixer_t *m);
void mx_robust_slot_free(struct mx_slot *s);
void mx_robust_forget(rumor_mixer_t *m, int node);
int mx_robust_quarantined(const rumor_mixer_t *m, int node);
void mx_robust_slot_open(rumor_mixer_t *m, struct mx_slot *s);
/* --robust trimmed: slot s's in-neighbours are set (mx_slot_reweigh): room
 * for their ranges; 0 or RUMOR_ENOMEM. */
int mx_robust_slot_reweigh(rumor_mixer_t *m, struct mx_slot *s);
/* --robust trimmed: holds node's f32 range [lo, lo + n) of slot s. */
void mx_robust_hold(rumor_mixer_t *m, struct mx_slot *s, int node, const rumor_wire_hdr_t *h,
                    const void *data);
/* --robust trimmed: mixes elements [off, off + len) of slot s into its
 * accumulator (a cell every in-neighbour waited for covered), adding sum
 * (mix - x)^2 to s->dis and the self-weight to s->selfw. */
void mx_robust_trim(rumor_mixer_t *m, struct mx_slot *s, uint64_t off, uint64_t len);
/* Writes the neighbours' scores into out (npeers); how many (under pub_mu). */
int mx_robust_publish(rumor_mixer_t *m, rumor_robust_score_t *out);
/* Judges node's range of len elements, d2 and n2 the squared norms of its
 * difference from this peer's own and of this peer's own there: sets
 * m->rb.scale; <0 (RUMOR_WIRE_OUTLIER) when it quarantined node. */
int mx_robust_judge(rumor_mixer_t *m, struct mx_slot *s, int node, double d2, double n2,
                    uint64_t len);
/* Quarantines node for the quarantine time: left out of every round from
 * now on, said naming it and why, counted. */
void mx_robust_quarantine(rumor_mixer_t *m, int node, const char *why);
/* Ends node's quarantine now: it is judged afresh. */
void mx_robust_release(rumor_mixer_t *m, int node);

/* The validation probe (mixer_probe.c; cfg.robust_probe) */
int mx_probe_alloc(rumor_mixer_t *m);
void mx_probe_free(rumor_mixer_t *m);
void mx_probe_forget(rumor_mixer_t *m, int node);
int mx_probe_slot(rumor_mixer_t *m, struct mx_slot *s);
/* node's range of round r (nbytes of data): held when r is the probe's;
 * checked: the round accepted it (f32, finite), else the probe checks */
void mx_probe_hold(rumor_mixer_t *m, long r, int node, const rumor_wire_hdr_t *h,
                   const void *data, size_t nbytes, int checked);
void mx_probe_close(rumor_mixer_t *m, const struct mx_slot *s);
/* MX_OP_PROBE: the caller's verdicts; as rumor_mixer_probe_done */
int mx_probe_verdict(rumor_mixer_t *m, const void *verdict);
void mx_probe_publish(const rumor_mixer_t *m, int node, rumor_robust_score_t *o);
#endif

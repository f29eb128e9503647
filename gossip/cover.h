/* Coverage of the flat parameter space: which element ranges [lo, hi) of
 * one round (one sender, one all-reduce step, one state-transfer part) have
 * arrived. Peers cut the space as they like (their own chunk size, their own
 * pipeline stages), so a receiver takes any range inside the space and knows
 * the data is complete when the ranges cover it; two ranges of one sender
 * that overlap are a duplicate. Internal to the mixer, not installed.
 *
 * A set is sorted, disjoint intervals; an arriving range that touches its
 * neighbours merges with them, so ranges that arrive in order (one
 * connection is FIFO) keep one interval whatever their number. At most
 * MX_COVER_MAX_IVS intervals: a sender that fragments its data beyond that
 * is refused (rumor_cover_check). Checking and adding are separate steps so
 * that a receiver judges a message whole before it changes anything. */
#ifndef RUMOR_COVER_H
#define RUMOR_COVER_H

#include <stddef.h>
#include <stdint.h>

#define MX_COVER_MAX_IVS 4096

typedef struct mx_cover {
    uint64_t (*iv)[2];  /* (n) [lo, hi), sorted, disjoint, never adjacent */
    int n, cap;
    uint64_t covered;   /* elements in the set */
} mx_cover_t;

/* Judges adding [lo, hi) (lo < hi): 0 when it can be added, 1 when it
 * overlaps the set (a duplicate), 2 when the set would need more than
 * MX_COVER_MAX_IVS intervals, < 0 (RUMOR_ENOMEM) when room for it could not
 * be made. Changes nothing the set holds (it may grow its capacity). */
int mx_cover_check(mx_cover_t *c, uint64_t lo, uint64_t hi);

/* Adds [lo, hi), which mx_cover_check accepted just before. */
void mx_cover_add(mx_cover_t *c, uint64_t lo, uint64_t hi);

/* Elements of [lo, hi) in the set. */
uint64_t mx_cover_within(const mx_cover_t *c, uint64_t lo, uint64_t hi);

/* 1 if element e is in the set. */
int mx_cover_has(const mx_cover_t *c, uint64_t e);

/* Whether element p is in the set; *run_end is where that answer changes:
 * the end of p's interval, or the start of the next one (UINT64_MAX when
 * there is none). */
int mx_cover_run(const mx_cover_t *c, uint64_t p, uint64_t *run_end);

/* Empties the set, keeping its memory. */
static inline void mx_cover_clear(mx_cover_t *c)
{
    c->n = 0;
    c->covered = 0;
}

void mx_cover_free(mx_cover_t *c);

#endif

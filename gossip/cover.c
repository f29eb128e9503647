/* Coverage of element ranges (see cover.h). */
#include "cover.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

/* Index of the first interval whose hi > e (n when none). */
static int first_after(const mx_cover_t *c, uint64_t e)
{
    int lo = 0, hi = c->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->iv[mid][1] > e)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

int mx_cover_check(mx_cover_t *c, uint64_t lo, uint64_t hi)
{
    int i = first_after(c, lo);
    if (i < c->n && c->iv[i][0] < hi)
        return 1;
    /* a new interval unless it touches a neighbour */
    int touches = (i > 0 && c->iv[i - 1][1] == lo) || (i < c->n && c->iv[i][0] == hi);
    if (touches)
        return 0;
    if (c->n >= MX_COVER_MAX_IVS)
        return 2;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        void *p = realloc(c->iv, (size_t)cap * sizeof *c->iv);
        if (!p)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory for %d ranges", cap);
        c->iv = p;
        c->cap = cap;
    }
    return 0;
}

void mx_cover_add(mx_cover_t *c, uint64_t lo, uint64_t hi)
{
    int i = first_after(c, lo);
    int left = i > 0 && c->iv[i - 1][1] == lo;
    int right = i < c->n && c->iv[i][0] == hi;
    if (left && right) { /* fills the gap between two intervals */
        c->iv[i - 1][1] = c->iv[i][1];
        memmove(&c->iv[i], &c->iv[i + 1], (size_t)(c->n - i - 1) * sizeof *c->iv);
        c->n--;
    } else if (left) {
        c->iv[i - 1][1] = hi;
    } else if (right) {
        c->iv[i][0] = lo;
    } else {
        memmove(&c->iv[i + 1], &c->iv[i], (size_t)(c->n - i) * sizeof *c->iv);
        c->iv[i][0] = lo;
        c->iv[i][1] = hi;
        c->n++;
    }
    c->covered += hi - lo;
}

uint64_t mx_cover_within(const mx_cover_t *c, uint64_t lo, uint64_t hi)
{
    uint64_t sum = 0;
    for (int i = first_after(c, lo); i < c->n && c->iv[i][0] < hi; i++) {
        uint64_t a = c->iv[i][0] > lo ? c->iv[i][0] : lo;
        uint64_t b = c->iv[i][1] < hi ? c->iv[i][1] : hi;
        sum += b - a;
    }
    return sum;
}

int mx_cover_has(const mx_cover_t *c, uint64_t e)
{
    int i = first_after(c, e);
    return i < c->n && c->iv[i][0] <= e;
}

int mx_cover_run(const mx_cover_t *c, uint64_t p, uint64_t *run_end)
{
    int i = first_after(c, p);
    if (i == c->n) {
        *run_end = UINT64_MAX;
        return 0;
    }
    if (c->iv[i][0] <= p) {
        *run_end = c->iv[i][1];
        return 1;
    }
    *run_end = c->iv[i][0];
    return 0;
}

void mx_cover_free(mx_cover_t *c)
{
    free(c->iv);
    memset(c, 0, sizeof *c);
}
